//! Standing grants at the gateway: a write call inside a live grant is approved by it and claimed
//! without waiting.
//!
//! When a write call would prepare a new approval (after the scope, the schema and the policies
//! allowed it: a grant never widens what the binding allows), the gateway reads the caller's live
//! grants for the tool (purra-core's [`GrantStore`](purra_core::GrantStore)), keeps those whose
//! argument rules (the gateway's rule grammar) the arguments satisfy, and asks the store to take
//! one use of the first: the store takes it, prepares the approval and records its approval by the
//! grant in one transaction, so a grant is never used more than its uses whichever instance races
//! for it.
//! The call is then claimed and sent like any approved call: when the caller's call can be sent at
//! once, the claim is taken in the same transaction as the use
//! ([`GrantStore::use_grant_and_claim`](purra_core::GrantStore::use_grant_and_claim): two commits
//! a cycle, the use with its claim and the outcome with its receipt). When no grant covers the
//! call, or the race took the last use, the approval is prepared as always and the call waits.

use std::time::SystemTime;

use purra_core::{
    ApprovalId, ApprovalRequest, ClaimVerdict, Decision, DecisionPath, GrantView, StoreError,
    Verdict,
};
use serde_json::Value;

use crate::config::rule::ArgumentRule;
use crate::rules::scope::Caller;
use crate::runtime::gateway::Inner;

/// Checks one grant rule's text (the gateway's argument rule grammar, such as
/// `path within "/srv/notes"`); says why it cannot be parsed.
pub fn check_grant_rule(text: &str) -> Result<(), String> {
    ArgumentRule::parse(text).map(|_| ())
}

/// Whether `args` satisfy every rule of `grant` (a rule that does not parse covers nothing).
fn covers(grant: &GrantView, args: &Value) -> bool {
    grant
        .grant
        .rules
        .iter()
        .all(|r| ArgumentRule::parse(r).is_ok_and(|rule| rule.holds(args)))
}

impl Inner {
    /// Takes one use of a live grant covering the call `request` stands for, made by `caller`
    /// with `args`: the approval prepared and approved by the grant, or `None` (nothing written)
    /// when no grant covers it or none has a use left. With `claim`, the approval is claimed in
    /// the same transaction (against the request's own intent) and the claim's verdict is
    /// returned with it.
    pub(crate) async fn use_grant(
        &self,
        caller: &Caller,
        args: &Value,
        request: &ApprovalRequest,
        now: SystemTime,
        claim: bool,
    ) -> Result<Option<(ApprovalId, Option<ClaimVerdict>)>, StoreError> {
        let Some(grants) = self.store.grants() else {
            return Ok(None);
        };
        let live = grants
            .live_grants(caller.principal.clone(), request.intent.tool.clone(), now)
            .await?;
        for g in live {
            if !covers(&g, args) {
                continue;
            }
            // Separation of duties holds for grants too: nobody grants their own calls.
            if request.check_decider(&g.grant.granted_by).is_err() {
                continue;
            }
            let decision = Decision {
                verdict: Verdict::Approve,
                approver: DecisionPath::Grant
                    .approver(&format!("{} by {}", g.id, g.grant.granted_by)),
                decided_at: now,
                expires_at: now.checked_add(self.settings.approval_ttl.0),
                note: g.grant.note.clone(),
            };
            let used = if claim {
                grants
                    .use_grant_and_claim(g.id.clone(), request.clone(), decision, now)
                    .await?
                    .map(|(id, verdict)| (id, Some(verdict)))
            } else {
                grants
                    .use_grant(g.id.clone(), request.clone(), decision, now)
                    .await?
                    .map(|id| (id, None))
            };
            if used.is_some() {
                return Ok(used);
            }
        }
        Ok(None)
    }
}
