//! The operator's view of a durable store: approvals listed with their request, decision and claim,
//! the append-only audit log, runs, and the two reconciliations only a host or an operator performs.
//!
//! [`OperatorStore`] is what the CLI's `approvals` and `runs` subcommands, an approver page and a
//! gateway use beyond the host's three contracts; every durable store implements it with the same
//! semantics (one contract test suite runs against each).
//!
//! Two moves are never automatic:
//! [`OperatorStore::reconcile_interrupted_claims`] (a host on startup: claims left without outcome by
//! an owner that is gone become `unknown` with reason [`INTERRUPTED`]; a live owner's claims are told
//! apart by its lease) and [`OperatorStore::reconcile_unknown`] (an operator's decision, with
//! independent evidence, that an `unknown` outcome was in fact `committed` or `not_started`).

use crate::approval::{ApprovalGateway, ApprovalId, ApprovalRequest, ApprovalState, Verdict};
use crate::idempotency::{ClaimState, EffectOutcome, IdempotencyKey, IdempotencyStore};
use crate::identity::JsonIdentity;
use crate::run::RunId;
use crate::run_store::RunStore;
use crate::store::{BoxFuture, StoreError};
use serde_json::Value;
use std::fmt;
use std::time::SystemTime;

/// The reason recorded for a claim found without outcome whose owner is gone.
pub const INTERRUPTED: &str = "interrupted";

/// The most rows one listing returns.
pub const MAX_PAGE: u32 = 1000;

/// An approval's state in one word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ApprovalStatus {
    /// Waiting for a decision.
    Pending,
    /// Approved, not claimed yet.
    Approved,
    /// Denied.
    Denied,
    /// Approved and claimed for dispatch.
    Claimed,
    /// Approved but refused at dispatch (expired or mismatched).
    Refused,
}

impl ApprovalStatus {
    /// Every status, in the order of the state machine.
    pub const ALL: [ApprovalStatus; 5] = [
        ApprovalStatus::Pending,
        ApprovalStatus::Approved,
        ApprovalStatus::Denied,
        ApprovalStatus::Claimed,
        ApprovalStatus::Refused,
    ];

    /// The status of `state`.
    pub fn of(state: &ApprovalState) -> ApprovalStatus {
        match state {
            ApprovalState::Prepared => ApprovalStatus::Pending,
            ApprovalState::Decided(d) if d.verdict == Verdict::Approve => ApprovalStatus::Approved,
            ApprovalState::Decided(_) => ApprovalStatus::Denied,
            ApprovalState::Claimed(_) => ApprovalStatus::Claimed,
            ApprovalState::Refused(_) => ApprovalStatus::Refused,
        }
    }

    /// `pending`, `approved`, `denied`, `claimed` or `refused`.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalStatus::Pending => "pending",
            ApprovalStatus::Approved => "approved",
            ApprovalStatus::Denied => "denied",
            ApprovalStatus::Claimed => "claimed",
            ApprovalStatus::Refused => "refused",
        }
    }

    /// Parses [`ApprovalStatus::as_str`]'s words.
    pub fn parse(word: &str) -> Option<ApprovalStatus> {
        ApprovalStatus::ALL.into_iter().find(|s| s.as_str() == word)
    }
}

impl fmt::Display for ApprovalStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The claim an approval made.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimView {
    /// The idempotency key (the intent digest).
    pub key: IdempotencyKey,
    /// The store owner that claimed it.
    pub owner: String,
    /// When it was claimed.
    pub claimed_at: SystemTime,
    /// In flight, or completed with its outcome (the receipt of a `committed` one).
    pub state: ClaimState,
    /// When the outcome was recorded (or last reconciled).
    pub completed_at: Option<SystemTime>,
}

impl ClaimView {
    /// `in_flight`, `committed`, `not_started` or `unknown`.
    pub fn effect_word(&self) -> &'static str {
        self.state.effect_word()
    }

    /// The receipt of a `committed` outcome.
    pub fn receipt(&self) -> Option<&Value> {
        self.state.receipt()
    }
}

/// Everything an approver or operator is shown about one approval.
#[derive(Clone, Debug, PartialEq)]
pub struct ApprovalView {
    /// The approval.
    pub id: ApprovalId,
    /// What was asked (intent, arguments, binding, who, when, until when, labels).
    pub request: ApprovalRequest,
    /// The intent's digest: what an approver approves.
    pub intent_digest: JsonIdentity,
    /// The state, with the decision (verdict, approver, note, time, expiry) once decided.
    pub state: ApprovalState,
    /// The claim this approval made (only an approval that claimed has one).
    pub claim: Option<ClaimView>,
}

impl ApprovalView {
    /// The state in one word.
    pub fn status(&self) -> ApprovalStatus {
        ApprovalStatus::of(&self.state)
    }

    /// Whether the approval still waits for a decision that would be accepted at `now`.
    pub fn is_open(&self, now: SystemTime) -> bool {
        self.state == ApprovalState::Prepared && !self.request.expired_at(now)
    }

    /// Whether the request expired at `now` with no decision: none is accepted any more.
    pub fn expired_undecided(&self, now: SystemTime) -> bool {
        self.state == ApprovalState::Prepared && self.request.expired_at(now)
    }
}

/// Which approvals [`OperatorStore::approvals`] lists (oldest first).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ApprovalQuery {
    /// Only approvals in this state.
    pub status: Option<ApprovalStatus>,
    /// Only approvals of this run.
    pub run_id: Option<RunId>,
    /// Only approvals prepared after this one (paging).
    pub after: Option<ApprovalId>,
    /// At most this many (capped at [`MAX_PAGE`]).
    pub limit: u32,
}

impl Default for ApprovalQuery {
    /// Every approval, the first [`MAX_PAGE`].
    fn default() -> Self {
        ApprovalQuery {
            status: None,
            run_id: None,
            after: None,
            limit: MAX_PAGE,
        }
    }
}

impl ApprovalQuery {
    /// Every approval (the first page).
    pub fn all() -> ApprovalQuery {
        ApprovalQuery::default()
    }

    /// Only approvals in `status`.
    pub fn status(mut self, status: ApprovalStatus) -> Self {
        self.status = Some(status);
        self
    }

    /// Only approvals of `run_id`.
    pub fn run(mut self, run_id: RunId) -> Self {
        self.run_id = Some(run_id);
        self
    }

    /// Only approvals after `id`.
    pub fn after(mut self, id: ApprovalId) -> Self {
        self.after = Some(id);
        self
    }

    /// At most `limit` (capped at [`MAX_PAGE`]).
    pub fn limit(mut self, limit: u32) -> Self {
        self.limit = limit.min(MAX_PAGE);
        self
    }
}

/// One row of the append-only audit log.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct AuditEntry {
    /// Position in the log (strictly increasing, never reused).
    pub seq: i64,
    /// Wall-clock time of the write.
    pub at: SystemTime,
    /// The store owner that wrote it.
    pub owner: String,
    /// What happened: `opened`, `closed`, `prepared`, `decided`, `claimed`, `refused`, `claim_refused`,
    /// `outcome`, `outcome_rejected`, `interrupted`, `reconciled`, `run_suspended`, `run_removed`, and
    /// (PostgreSQL, after a lost commit acknowledgement) `commit_confirmed`.
    pub event: String,
    /// The approval concerned, if any.
    pub approval_id: Option<String>,
    /// The idempotency key concerned, if any.
    pub claim_key: Option<String>,
    /// The run concerned, if any.
    pub run_id: Option<String>,
    /// Event details (times in nanoseconds since the Unix epoch, camelCase members).
    pub detail: Value,
}

impl AuditEntry {
    /// A row as a store read it.
    #[allow(clippy::too_many_arguments)] // One row's columns.
    pub fn new(
        seq: i64,
        at: SystemTime,
        owner: String,
        event: String,
        approval_id: Option<String>,
        claim_key: Option<String>,
        run_id: Option<String>,
        detail: Value,
    ) -> AuditEntry {
        AuditEntry {
            seq,
            at,
            owner,
            event,
            approval_id,
            claim_key,
            run_id,
            detail,
        }
    }
}

/// What [`OperatorStore::reconcile_interrupted_claims`] did.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Reconciliation {
    /// Claims of gone owners, now `unknown` with reason `interrupted` (sorted by key).
    pub interrupted: Vec<IdempotencyKey>,
    /// Claims without outcome whose owner still holds a live lease (left alone; still never
    /// dispatched again).
    pub in_flight_elsewhere: usize,
    /// Claims without outcome of this store itself (in flight in this process; left alone).
    pub in_flight_here: usize,
}

/// A durable store as an operator sees it: the host's three contracts plus listings, the audit log
/// and the reconciliations.
pub trait OperatorStore: ApprovalGateway + IdempotencyStore + RunStore {
    /// This store's owner id (recorded with its claims and audit rows).
    fn owner(&self) -> &str;
    /// The approvals `query` selects, oldest first.
    fn approvals(
        &self,
        query: ApprovalQuery,
    ) -> BoxFuture<'_, Result<Vec<ApprovalView>, StoreError>>;
    /// One approval, if it exists.
    fn approval(&self, id: ApprovalId) -> BoxFuture<'_, Result<Option<ApprovalView>, StoreError>>;
    /// Audit rows with a sequence number above `after_seq`, oldest first, at most `limit` (capped at
    /// [`MAX_PAGE`]).
    fn audit(
        &self,
        after_seq: i64,
        limit: u32,
    ) -> BoxFuture<'_, Result<Vec<AuditEntry>, StoreError>>;
    /// The audit trail of one approval, oldest first: the rows naming it, and the rows about its
    /// claim (outcome, interruption, reconciliation) if it made one. Empty if there is no such approval.
    fn approval_audit(&self, id: ApprovalId) -> BoxFuture<'_, Result<Vec<AuditEntry>, StoreError>>;
    /// Every run that asked for an approval, in the order of its first approval.
    fn run_ids(&self) -> BoxFuture<'_, Result<Vec<RunId>, StoreError>>;
    /// The ids of every stored suspended run (a restarted host resumes them), sorted.
    fn suspended_run_ids(&self) -> BoxFuture<'_, Result<Vec<RunId>, StoreError>>;
    /// Marks every claim without outcome whose owner is gone (closed, or its lease lapsed at `now`) as
    /// `unknown` with reason [`INTERRUPTED`], one audit row each. Claims of live owners, this store's
    /// included, are left alone. A host calls it on startup and may call it again later (a crashed
    /// process's claims are found once its lease has lapsed). No claim is ever dispatched again either
    /// way; this only makes the stored outcome say what is known.
    fn reconcile_interrupted_claims(
        &self,
        now: SystemTime,
    ) -> BoxFuture<'_, Result<Reconciliation, StoreError>>;
    /// An operator's reconciliation of an `unknown` outcome: records `evidence` (independent evidence of
    /// what happened, required) in the audit log and replaces the outcome with `outcome`, which must be
    /// `committed` or `not_started`. `NotFound` if never claimed; `Conflict` if the outcome is not
    /// `unknown`, the evidence is empty, or `outcome` is itself `unknown`. The claim stays: the call is
    /// never dispatched again.
    fn reconcile_unknown(
        &self,
        key: IdempotencyKey,
        evidence: String,
        outcome: EffectOutcome,
    ) -> BoxFuture<'_, Result<(), StoreError>>;
}

/// The checks [`OperatorStore::reconcile_unknown`] makes before touching the store.
pub fn check_reconciliation(evidence: &str, outcome: &EffectOutcome) -> Result<(), StoreError> {
    if evidence.trim().is_empty() {
        return Err(StoreError::Conflict("reconciliation requires evidence"));
    }
    if matches!(outcome, EffectOutcome::Unknown { .. }) {
        return Err(StoreError::Conflict(
            "reconciliation must resolve to committed or not_started",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::Decision;

    #[test]
    fn statuses_have_one_word_each() {
        let d = |verdict| Decision {
            verdict,
            approver: "a".into(),
            decided_at: SystemTime::UNIX_EPOCH,
            expires_at: None,
            note: None,
        };
        let states = [
            ApprovalState::Prepared,
            ApprovalState::Decided(d(Verdict::Approve)),
            ApprovalState::Decided(d(Verdict::Deny)),
            ApprovalState::Claimed(d(Verdict::Approve)),
            ApprovalState::Refused(d(Verdict::Approve)),
        ];
        let words: Vec<String> = states
            .iter()
            .map(|s| ApprovalStatus::of(s).to_string())
            .collect();
        assert_eq!(
            words,
            ["pending", "approved", "denied", "claimed", "refused"]
        );
        for s in ApprovalStatus::ALL {
            assert_eq!(ApprovalStatus::parse(s.as_str()), Some(s));
        }
        assert_eq!(ApprovalStatus::parse("done"), None);
        assert_eq!(ApprovalQuery::all().limit(5000).limit, MAX_PAGE);
    }
}
