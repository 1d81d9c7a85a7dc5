//! Approval workflows a binding may ask for: a quorum of votes, escalation and expiry.
//!
//! Every rule travels with the [`ApprovalRequest`] as labels, so each process that decides (the
//! approver page, `purra approvals`, a gateway of a fleet) reads the same rule:
//!
//! - [`VOTES_REQUIRED_LABEL`] (a count) turns every decision into a vote, recorded by the store
//!   (one per voter, [`voter_name`]); a deny closes the approval; it is approved when that many
//!   distinct voters approved. The store counts the approving votes again in the claim's
//!   transaction, so a claim never dispatches without the quorum.
//! - [`VOTES_FROM_LABEL`] names who may vote (`group:NAME` entries and names, comma-separated),
//!   checked by [`ApprovalRequest::check_voter`] on every decision path.
//! - [`ESCALATE_AFTER_LABEL`] (seconds) and [`ESCALATE_TO_LABEL`]: from `requested_at` plus that
//!   long, the entries of `escalate_to` may decide too (a check of time, so any process enforces
//!   it); the store records `approval.escalated` once for the whole fleet
//!   ([`OperatorStore::escalate_due`](crate::OperatorStore::escalate_due)).
//! - [`ON_EXPIRY_LABEL`] `"deny"`: an approval still undecided at its request's expiry is denied
//!   by [`EXPIRY_APPROVER`] with [`EXPIRY_NOTE`]
//!   ([`OperatorStore::expire_due`](crate::OperatorStore::expire_due)), and `approval.expired`
//!   is recorded. Without it an undecided request expires and the same call asks anew.

use crate::approval::{ApprovalRequest, Verdict};
use std::time::{Duration, SystemTime};

/// The label with the number of distinct approving votes an approval needs.
pub const VOTES_REQUIRED_LABEL: &str = "votes_required";

/// The label naming who may vote: `group:NAME` entries and approver names, comma-separated.
pub const VOTES_FROM_LABEL: &str = "votes_from";

/// The label with the seconds after the request after which [`ESCALATE_TO_LABEL`] may decide.
pub const ESCALATE_AFTER_LABEL: &str = "escalate_after";

/// The label naming who may decide once the approval escalated (entries as [`VOTES_FROM_LABEL`]).
pub const ESCALATE_TO_LABEL: &str = "escalate_to";

/// The label that, set to `"deny"`, denies an approval still undecided at its request's expiry.
pub const ON_EXPIRY_LABEL: &str = "on_expiry";

/// Who is recorded as the approver of a denial at expiry.
pub const EXPIRY_APPROVER: &str = "expiry (on_expiry = deny)";

/// The note of a denial at expiry: what a waiting caller is told.
pub const EXPIRY_NOTE: &str =
    "the approval request expired undecided and its binding says on_expiry = \"deny\"";

/// One approver's vote on an approval that needs a quorum.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Vote {
    /// Who voted, as votes are told apart ([`voter_name`] of the approver).
    pub voter: String,
    /// The approver as recorded (with the path the vote came by, such as `alice (cli)`).
    pub approver: String,
    /// Approve or deny.
    pub verdict: Verdict,
    /// When the vote was cast.
    pub at: SystemTime,
    /// The voter's note.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The voter an approver string names: the approver without the path a decision came by
/// (`alice (cli)` and `alice (page)` are the one voter `alice`), so one person votes once
/// whichever path they use.
pub fn voter_name(approver: &str) -> &str {
    match approver.rfind(" (") {
        Some(i)
            if approver.ends_with(')') && !approver[i + 2..approver.len() - 1].contains('(') =>
        {
            &approver[..i]
        }
        _ => approver,
    }
}

/// A decision refused because the decider may not vote on the approval
/// ([`ApprovalRequest::check_voter`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotAVoter {
    /// Who tried to decide.
    pub who: String,
    /// Who may decide now (the entries of `from`, and of `escalate_to` once escalated).
    pub allowed: Vec<String>,
}

impl std::fmt::Display for NotAVoter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} may not decide this approval: only {} may",
            self.who,
            self.allowed.join(", ")
        )
    }
}

impl std::error::Error for NotAVoter {}

impl NotAVoter {
    /// The store error a decision path that answers with [`StoreError`](crate::StoreError)
    /// reports it as.
    pub const CONFLICT: &'static str =
        "the approver may not decide this approval: its workflow's `from` does not name them";
}

impl From<NotAVoter> for crate::StoreError {
    fn from(_: NotAVoter) -> crate::StoreError {
        crate::StoreError::Conflict(NotAVoter::CONFLICT)
    }
}

fn entries(value: Option<&String>) -> Vec<String> {
    value
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|e| !e.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

impl ApprovalRequest {
    /// How many distinct approving votes the approval needs ([`VOTES_REQUIRED_LABEL`]); `None`
    /// when it is decided by one decision. A label that is not a count needs more votes than
    /// anyone can cast (it fails closed).
    pub fn votes_required(&self) -> Option<u32> {
        self.labels
            .get(VOTES_REQUIRED_LABEL)
            .map(|v| v.parse::<u32>().ok().filter(|n| *n > 0).unwrap_or(u32::MAX))
    }

    /// Who may vote ([`VOTES_FROM_LABEL`]); empty: anyone who may decide.
    pub fn votes_from(&self) -> Vec<String> {
        entries(self.labels.get(VOTES_FROM_LABEL))
    }

    /// Who may decide once the approval escalated ([`ESCALATE_TO_LABEL`]).
    pub fn escalate_to(&self) -> Vec<String> {
        entries(self.labels.get(ESCALATE_TO_LABEL))
    }

    /// When the approval escalates ([`ESCALATE_AFTER_LABEL`] after `requested_at`); `None`
    /// without the rule. A label that is not seconds never escalates.
    pub fn escalates_at(&self) -> Option<SystemTime> {
        let secs = self.labels.get(ESCALATE_AFTER_LABEL)?.parse::<u64>().ok()?;
        self.requested_at.checked_add(Duration::from_secs(secs))
    }

    /// Whether an approval still undecided at its request's expiry is denied then
    /// ([`ON_EXPIRY_LABEL`] is `"deny"`).
    pub fn denies_on_expiry(&self) -> bool {
        self.labels
            .get(ON_EXPIRY_LABEL)
            .is_some_and(|v| v == "deny")
    }

    /// Who may decide at `now`: the `from` entries, and the `escalate_to` entries once the
    /// approval escalated. Empty: anyone (no `from` rule).
    pub fn deciders_at(&self, now: SystemTime) -> Vec<String> {
        let mut allowed = self.votes_from();
        if allowed.is_empty() {
            return allowed;
        }
        if self.escalates_at().is_some_and(|at| at <= now) {
            for e in self.escalate_to() {
                if !allowed.contains(&e) {
                    allowed.push(e);
                }
            }
        }
        allowed
    }

    /// Whether whoever is known by `names` (a page approver's name and identity; a CLI
    /// approver's name) and belongs to `groups` may decide at `now`: an entry `group:NAME`
    /// admits members of `NAME`, any other entry the name itself, compared exactly. The one
    /// check every decision path makes beside [`check_decider`](ApprovalRequest::check_decider).
    pub fn check_voter(
        &self,
        names: &[&str],
        groups: &[String],
        now: SystemTime,
    ) -> Result<(), NotAVoter> {
        let allowed = self.deciders_at(now);
        if allowed.is_empty() {
            return Ok(());
        }
        let admitted = allowed.iter().any(|e| match e.strip_prefix("group:") {
            Some(g) => groups.iter().any(|m| m == g),
            None => names.contains(&e.as_str()),
        });
        if admitted {
            Ok(())
        } else {
            Err(NotAVoter {
                who: names.first().copied().unwrap_or_default().to_owned(),
                allowed,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::{ApprovalIntent, CheckpointCall};
    use crate::run::RunId;
    use crate::tool::ApprovalBinding;
    use std::collections::BTreeMap;

    fn request(labels: &[(&str, &str)]) -> ApprovalRequest {
        let id = |s: &str| crate::json_identity(&serde_json::json!(s)).unwrap();
        let binding = ApprovalBinding {
            binding_id: "b".into(),
            binding_revision: "1".into(),
            scope_id: "s".into(),
            scope_revision: "1".into(),
        };
        ApprovalRequest {
            intent: ApprovalIntent {
                tool: "t".into(),
                arguments_digest: id("a"),
                approval_binding: binding.identity(),
                checkpoint_call: CheckpointCall {
                    call_id: "c".into(),
                    tool: "t".into(),
                },
                run_id: RunId::new("r"),
                preset_fingerprint: id("p"),
            },
            arguments: serde_json::json!("a"),
            binding,
            requested_by: "w".into(),
            requested_at: SystemTime::UNIX_EPOCH,
            expires_at: None,
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>(),
        }
    }

    #[test]
    fn voters_are_told_apart_without_their_path() {
        assert_eq!(voter_name("alice (cli)"), "alice");
        assert_eq!(voter_name("alice (page)"), "alice");
        assert_eq!(voter_name("alice"), "alice");
        assert_eq!(voter_name("a (b) (page)"), "a (b)");
        assert_eq!(voter_name("odd)"), "odd)");
    }

    /// `from` admits group members and named approvers only; escalation adds `escalate_to`
    /// from `requested_at + escalate_after` on; a count that is not one fails closed.
    #[test]
    fn who_may_vote_follows_from_and_escalation() {
        let t = |s| SystemTime::UNIX_EPOCH + Duration::from_secs(s);
        let anyone = request(&[(VOTES_REQUIRED_LABEL, "2")]);
        assert_eq!(anyone.votes_required(), Some(2));
        assert_eq!(anyone.check_voter(&["zed"], &[], t(0)), Ok(()));
        let r = request(&[
            (VOTES_REQUIRED_LABEL, "2"),
            (VOTES_FROM_LABEL, "group:sre, carol"),
            (ESCALATE_AFTER_LABEL, "600"),
            (ESCALATE_TO_LABEL, "group:leads"),
        ]);
        let sre = vec!["sre".to_owned()];
        let leads = vec!["leads".to_owned()];
        assert_eq!(r.check_voter(&["alice"], &sre, t(0)), Ok(()));
        assert_eq!(r.check_voter(&["carol"], &[], t(0)), Ok(()));
        let refused = r
            .check_voter(&["dave", "x#dave"], &leads, t(599))
            .unwrap_err();
        assert_eq!(
            refused.to_string(),
            "dave may not decide this approval: only group:sre, carol may"
        );
        assert_eq!(r.escalates_at(), Some(t(600)));
        assert_eq!(r.check_voter(&["dave"], &leads, t(600)), Ok(()));
        assert_eq!(
            r.check_voter(&["eve"], &[], t(600))
                .unwrap_err()
                .to_string(),
            "eve may not decide this approval: only group:sre, carol, group:leads may"
        );
        assert_eq!(
            request(&[(VOTES_REQUIRED_LABEL, "two")]).votes_required(),
            Some(u32::MAX)
        );
        assert_eq!(request(&[]).votes_required(), None);
        assert!(request(&[(ON_EXPIRY_LABEL, "deny")]).denies_on_expiry());
        assert!(!request(&[]).denies_on_expiry());
    }
}
