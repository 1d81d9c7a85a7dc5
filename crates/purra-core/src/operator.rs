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
use crate::effect::{EffectPage, EffectQuery, EffectView, ResendClaim};
use crate::idempotency::{ClaimState, EffectOutcome, IdempotencyKey, IdempotencyStore};
use crate::identity::JsonIdentity;
use crate::run::RunId;
use crate::run_store::RunStore;
use crate::store::{BoxFuture, StoreError};
use crate::workflow::Vote;
use serde_json::Value;
use std::fmt;
use std::time::SystemTime;

/// The reason recorded for a claim found without outcome whose owner is gone.
pub const INTERRUPTED: &str = "interrupted";

/// The most rows one listing returns.
pub const MAX_PAGE: u32 = 1000;

/// How far a listing counts what follows its page: past this many it shows `1000+` (see
/// [`counted_text`]) instead of reading every row to count them
/// ([`OperatorStore::count_approvals_up_to`] with one more than this).
pub const COUNTED_UP_TO: u64 = 1000;

/// A count taken up to [`COUNTED_UP_TO`] + 1, as a listing shows it: the number, or `1000+`
/// when it went past [`COUNTED_UP_TO`].
pub fn counted_text(n: u64) -> String {
    if n > COUNTED_UP_TO {
        format!("{COUNTED_UP_TO}+")
    } else {
        n.to_string()
    }
}

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

/// The label of an [`ApprovalRequest`] with the title of the binding the call goes through (what
/// an approver is told the write is).
pub const TITLE_LABEL: &str = "title";

/// The label of an [`ApprovalRequest`] with the effect of the write: `write` or `destructive`.
pub const EFFECT_LABEL: &str = "effect";

/// The label of an [`ApprovalRequest`] that, set to `"true"`, says its host sends an approved
/// call without waiting for its caller to call again (a gateway's `run_decided_without_caller`).
pub const SENDS_WITHOUT_CALLER_LABEL: &str = "sends_without_caller";

/// What approving a pending approval does ([`ApprovalView::on_approve`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnApprove {
    /// A caller waits for the decision until this instant: approving sends the call now.
    CallerWaiting(SystemTime),
    /// Nobody waits, but the host sends approved calls itself: approving sends it now.
    SendsNow,
    /// Nobody waits: approving sends the call when it is made again, identically.
    NextCall,
}

impl OnApprove {
    /// `caller waiting: approving sends now`, `approving sends now` or `nobody waiting:
    /// approving sends on the next identical call`.
    pub fn text(self) -> &'static str {
        match self {
            OnApprove::CallerWaiting(_) => "caller waiting: approving sends now",
            OnApprove::SendsNow => "approving sends now",
            OnApprove::NextCall => "nobody waiting: approving sends on the next identical call",
        }
    }

    /// `caller_waiting`, `sends_now` or `next_call`.
    pub fn as_str(self) -> &'static str {
        match self {
            OnApprove::CallerWaiting(_) => "caller_waiting",
            OnApprove::SendsNow => "sends_now",
            OnApprove::NextCall => "next_call",
        }
    }
}

impl ApprovalView {
    /// What approving does at `now`, for an approval still open; `run` is the suspended run of
    /// its request's run id, if any ([`RunStore::load_suspended`]): a caller waits while its
    /// [`SuspendedRun::waiting_until`](crate::SuspendedRun::waiting_until) names this approval
    /// and lies ahead.
    pub fn on_approve(
        &self,
        run: Option<&crate::SuspendedRun>,
        now: SystemTime,
    ) -> Option<OnApprove> {
        if !self.is_open(now) {
            return None;
        }
        let waiting = run
            .filter(|r| r.approval_id == self.id)
            .and_then(|r| r.waiting_until)
            .filter(|until| *until > now);
        Some(match waiting {
            Some(until) => OnApprove::CallerWaiting(until),
            None if self
                .request
                .labels
                .get(SENDS_WITHOUT_CALLER_LABEL)
                .is_some_and(|v| v == "true") =>
            {
                OnApprove::SendsNow
            }
            None => OnApprove::NextCall,
        })
    }
}

/// The label of an [`ApprovalRequest`] that names the principal it was asked for (a gateway's
/// caller): the one label a store reads. Stores keep it beside the request, so that a principal's
/// open approvals are counted through an index ([`ApprovalQuery::principal`],
/// [`OperatorStore::prepare_within`]); [`ApprovalRequest::check_decider`] compares it with whoever
/// decides.
pub const PRINCIPAL_LABEL: &str = "principal";

/// Which approvals [`OperatorStore::approvals`] lists, in which order, and from which cursor.
///
/// Every filter narrows the listing; the cursors are approval ids, compared as the numbers the
/// ids are written with (`approval-9` comes before `approval-10`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ApprovalQuery {
    /// Only approvals in this state.
    pub status: Option<ApprovalStatus>,
    /// Only decided approvals: every state but pending (the history).
    pub decided: bool,
    /// Only approvals of this run.
    pub run_id: Option<RunId>,
    /// Only approvals whose request names this principal ([`PRINCIPAL_LABEL`]).
    pub principal: Option<String>,
    /// Only approvals open at this instant: pending, their request accepting a decision then.
    pub open_at: Option<SystemTime>,
    /// Only approvals prepared after this one (paging oldest first).
    pub after: Option<ApprovalId>,
    /// Only approvals prepared before this one (paging newest first).
    pub before: Option<ApprovalId>,
    /// Newest first instead of oldest first.
    pub newest_first: bool,
    /// At most this many (capped at [`MAX_PAGE`]).
    pub limit: u32,
}

impl Default for ApprovalQuery {
    /// Every approval, the first [`MAX_PAGE`], oldest first.
    fn default() -> Self {
        ApprovalQuery {
            status: None,
            decided: false,
            run_id: None,
            principal: None,
            open_at: None,
            after: None,
            before: None,
            newest_first: false,
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

    /// Only decided approvals (every state but pending).
    pub fn decided(mut self) -> Self {
        self.decided = true;
        self
    }

    /// Only approvals of `run_id`.
    pub fn run(mut self, run_id: RunId) -> Self {
        self.run_id = Some(run_id);
        self
    }

    /// Only approvals asked for `principal` (their [`PRINCIPAL_LABEL`] label).
    pub fn principal(mut self, principal: impl Into<String>) -> Self {
        self.principal = Some(principal.into());
        self
    }

    /// Only approvals open at `at`: pending, their request accepting a decision then.
    pub fn open_at(mut self, at: SystemTime) -> Self {
        self.open_at = Some(at);
        self
    }

    /// Only approvals after `id`.
    pub fn after(mut self, id: ApprovalId) -> Self {
        self.after = Some(id);
        self
    }

    /// Only approvals before `id`.
    pub fn before(mut self, id: ApprovalId) -> Self {
        self.before = Some(id);
        self
    }

    /// Newest first.
    pub fn newest_first(mut self) -> Self {
        self.newest_first = true;
        self
    }

    /// At most `limit` (capped at [`MAX_PAGE`]).
    pub fn limit(mut self, limit: u32) -> Self {
        self.limit = limit.min(MAX_PAGE);
        self
    }

    /// The same query, continued past `next` (an [`ApprovalPage::next`]): before it newest
    /// first, after it oldest first.
    pub fn continued(self, next: ApprovalId) -> Self {
        if self.newest_first {
            self.before(next)
        } else {
            self.after(next)
        }
    }
}

/// One page of a listing ([`OperatorStore::approval_page`]).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ApprovalPage {
    /// The approvals, in the query's order.
    pub approvals: Vec<ApprovalView>,
    /// When more approvals follow this page, its last one: the cursor of the next page
    /// ([`ApprovalQuery::continued`]); `None` on the last page.
    pub next: Option<ApprovalId>,
}

impl ApprovalPage {
    /// A page of `approvals` read with one approval past `limit` (if the store found it): the
    /// extra one is dropped and makes the page's [`next`](ApprovalPage::next).
    pub fn from_read(mut approvals: Vec<ApprovalView>, limit: u32) -> ApprovalPage {
        let limit = limit as usize;
        let more = approvals.len() > limit;
        approvals.truncate(limit);
        let next = if more {
            approvals.last().map(|v| v.id.clone())
        } else {
            None
        };
        ApprovalPage { approvals, next }
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
    /// `outcome`, `outcome_rejected`, `interrupted`, `reconciled`, `run_suspended`, `run_removed`,
    /// `grant_added`, `grant_used` (naming the grant and the approval it approved), `grant_revoked`,
    /// `edited` (on an approval approved with edit: the edited approval, both intents and
    /// arguments' digests, the approver), `voted` (one vote of an approval that needs a quorum),
    /// `escalated`, `expired`, and (PostgreSQL, after a lost commit acknowledgement)
    /// `commit_confirmed`.
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
    /// The approvals `query` selects, in its order (oldest first unless it says newest first).
    /// `NotFound` if a cursor is not an approval id.
    fn approvals(
        &self,
        query: ApprovalQuery,
    ) -> BoxFuture<'_, Result<Vec<ApprovalView>, StoreError>>;
    /// One page of the approvals `query` selects: [`approvals`](OperatorStore::approvals), and
    /// whether more follow (read as one approval more than the page, never counted).
    fn approval_page(
        &self,
        query: ApprovalQuery,
    ) -> BoxFuture<'_, Result<ApprovalPage, StoreError>>;
    /// How many approvals `query` selects past its cursors (its order and limit do not count),
    /// exactly. Every approval counted is read: through an index when the query names the pending
    /// state, a run, or a principal's open approvals; the history and the whole store are counted
    /// by reading their rows, so listings page them with [`ApprovalPage::next`] instead.
    fn count_approvals(&self, query: ApprovalQuery) -> BoxFuture<'_, Result<u64, StoreError>>;
    /// How many approvals `query` selects past its cursors, counting no further than `up_to`: the
    /// count when it is at most `up_to`, else `up_to`. A store reads at most `up_to` of them
    /// through the query's index (so a listing's "how many more" costs the same with 100 000
    /// approvals as with 1 000). The default counts them all ([`OperatorStore::count_approvals`]).
    fn count_approvals_up_to(
        &self,
        query: ApprovalQuery,
        up_to: u64,
    ) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move { Ok(self.count_approvals(query).await?.min(up_to)) })
    }
    /// Prepares `request` as [`ApprovalGateway::prepare`] does, unless the principal it names
    /// ([`PRINCIPAL_LABEL`]) already has `limit` approvals open at `now` (pending, their request
    /// accepting a decision then): then nothing is written and the answer is `Ok(None)`. The count
    /// and the insert are one step for every process sharing the store, so concurrent callers
    /// never open more than `limit`. `Conflict` if the request names no principal.
    fn prepare_within(
        &self,
        request: ApprovalRequest,
        limit: u32,
        now: SystemTime,
    ) -> BoxFuture<'_, Result<Option<ApprovalId>, StoreError>>;
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
    /// The audit trails of `ids` ([`approval_audit`](OperatorStore::approval_audit) of each),
    /// in their order: what the approver page shows beside each decided approval of a listing,
    /// in one read of the store. The default reads them one after another.
    fn approval_audits(
        &self,
        ids: Vec<ApprovalId>,
    ) -> BoxFuture<'_, Result<Vec<Vec<AuditEntry>>, StoreError>> {
        Box::pin(async move {
            let mut out = Vec::with_capacity(ids.len());
            for id in ids {
                out.push(self.approval_audit(id).await?);
            }
            Ok(out)
        })
    }
    /// The suspended runs of `run_ids` ([`load_suspended`](RunStore::load_suspended) of each),
    /// in their order, `None` where none is stored: what the approver page shows beside each
    /// pending approval of a listing, in one read of the store. The default reads them one
    /// after another.
    fn load_suspended_each(
        &self,
        run_ids: Vec<RunId>,
    ) -> BoxFuture<'_, Result<Vec<Option<crate::run_store::SuspendedRun>>, StoreError>> {
        Box::pin(async move {
            let mut out = Vec::with_capacity(run_ids.len());
            for id in run_ids {
                out.push(self.load_suspended(id).await?);
            }
            Ok(out)
        })
    }
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
    /// never dispatched again. Recorded as decided by this store's owner; an operator's own decision
    /// is [`OperatorStore::reconcile_effect`].
    fn reconcile_unknown(
        &self,
        key: IdempotencyKey,
        evidence: String,
        outcome: EffectOutcome,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        let by = self.owner().to_owned();
        self.reconcile_effect(key, by, evidence, outcome)
    }
    /// [`OperatorStore::reconcile_unknown`] decided by the operator `by`: the audit row records who
    /// and the evidence (at most [`MAX_EVIDENCE_BYTES`](crate::MAX_EVIDENCE_BYTES), checked by
    /// [`check_reconciler`](crate::check_reconciler) before anything is touched), and the same
    /// transaction records the `effect.reconciled` webhook event (and `effect.committed` for a
    /// committed outcome).
    fn reconcile_effect(
        &self,
        key: IdempotencyKey,
        by: String,
        evidence: String,
        outcome: EffectOutcome,
    ) -> BoxFuture<'_, Result<(), StoreError>>;
    /// One page of effects (claims), newest first: every one, or the `unknown` ones
    /// (through an index of them). `NotFound` if the cursor is not a claimed key.
    fn effects(&self, query: EffectQuery) -> BoxFuture<'_, Result<EffectPage, StoreError>>;
    /// One effect, if `key` was claimed.
    fn effect(&self, key: IdempotencyKey) -> BoxFuture<'_, Result<Option<EffectView>, StoreError>>;
    /// Claims the one resend of the `unknown` effect `key` for the operator `by`, or finds the
    /// resend made before (then nothing may be sent). The claim is durable before anything is
    /// sent, audited (`resend_claimed`). `NotFound` if never claimed; `Conflict` if the effect
    /// is not `unknown`.
    fn claim_resend(
        &self,
        key: IdempotencyKey,
        by: String,
    ) -> BoxFuture<'_, Result<ResendClaim, StoreError>>;
    /// Records what the claimed resend of `key` came to (audited, `resent`): `committed` replaces
    /// the effect's outcome with the receipt (the `effect.committed` event); `unknown` keeps the
    /// effect `unknown` with the new reason (the `effect.unknown` event); `not_started` (nothing
    /// left) releases the resend claim, so another may be made. `Conflict` if no resend of `key`
    /// is claimed without an outcome.
    fn complete_resend(
        &self,
        key: IdempotencyKey,
        outcome: EffectOutcome,
    ) -> BoxFuture<'_, Result<(), StoreError>>;
    /// The votes cast on approval `id` (one that needs a quorum, see [`crate::workflow`]), in
    /// the order they were cast. Empty for an approval decided by one decision.
    fn votes(&self, id: ApprovalId) -> BoxFuture<'_, Result<Vec<Vote>, StoreError>> {
        let _ = id;
        Box::pin(async { Ok(Vec::new()) })
    }
    /// Marks every pending approval whose escalation time ([`ApprovalRequest::escalates_at`])
    /// passed at `now` as escalated and records `approval.escalated` (audited, `escalated`) for
    /// it; the ids it marked. Each approval is marked once, whichever process of a fleet sees it
    /// first (a conditional update).
    fn escalate_due(&self, now: SystemTime) -> BoxFuture<'_, Result<Vec<ApprovalId>, StoreError>> {
        let _ = now;
        Box::pin(async { Ok(Vec::new()) })
    }
    /// Denies every approval still pending at its request's expiry whose request says
    /// `on_expiry = "deny"` ([`ApprovalRequest::denies_on_expiry`]): decided `deny` by
    /// [`EXPIRY_APPROVER`](crate::workflow::EXPIRY_APPROVER) with
    /// [`EXPIRY_NOTE`](crate::workflow::EXPIRY_NOTE), audited, `approval.expired` recorded;
    /// the ids it denied, each once fleet-wide.
    fn expire_due(&self, now: SystemTime) -> BoxFuture<'_, Result<Vec<ApprovalId>, StoreError>> {
        let _ = now;
        Box::pin(async { Ok(Vec::new()) })
    }
}

/// The principal `request` names ([`PRINCIPAL_LABEL`]), as [`OperatorStore::prepare_within`]
/// requires one.
pub fn request_principal(request: &ApprovalRequest) -> Result<&str, StoreError> {
    request
        .labels
        .get(PRINCIPAL_LABEL)
        .map(String::as_str)
        .ok_or(StoreError::Conflict(
            "a limited prepare needs the request's principal label",
        ))
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

    /// A page read with one approval more than its limit drops it and names its own last
    /// approval as the next cursor, which continues the query on the side its order goes.
    #[test]
    fn a_page_read_one_past_its_limit_knows_more_follow() {
        let view = |n: u64| ApprovalView {
            id: ApprovalId(format!("approval-{n}")),
            request: ApprovalRequest {
                intent: crate::approval::ApprovalIntent {
                    tool: "t".into(),
                    arguments_digest: crate::json_identity(&serde_json::json!(n)).unwrap(),
                    approval_binding: crate::json_identity(&serde_json::json!("b")).unwrap(),
                    checkpoint_call: crate::approval::CheckpointCall {
                        call_id: "c".into(),
                        tool: "t".into(),
                    },
                    run_id: RunId::new("r"),
                    preset_fingerprint: crate::json_identity(&serde_json::json!("p")).unwrap(),
                },
                arguments: serde_json::json!(n),
                binding: crate::ApprovalBinding {
                    binding_id: "b".into(),
                    binding_revision: "1".into(),
                    scope_id: "s".into(),
                    scope_revision: "1".into(),
                },
                requested_by: "w".into(),
                requested_at: SystemTime::UNIX_EPOCH,
                expires_at: None,
                labels: Default::default(),
            },
            intent_digest: crate::json_identity(&serde_json::json!(n)).unwrap(),
            state: ApprovalState::Prepared,
            claim: None,
        };
        let ids = |p: &ApprovalPage| {
            p.approvals
                .iter()
                .map(|v| v.id.0.clone())
                .collect::<Vec<_>>()
        };
        let full = ApprovalPage::from_read(vec![view(12), view(11), view(10)], 2);
        assert_eq!(ids(&full), ["approval-12", "approval-11"]);
        assert_eq!(full.next, Some(ApprovalId("approval-11".into())));
        let last = ApprovalPage::from_read(vec![view(2), view(1)], 2);
        assert_eq!((ids(&last).len(), last.next), (2, None));
        assert_eq!(ApprovalPage::from_read(vec![view(1)], 0).next, None);
        let next = ApprovalId("approval-11".into());
        let newest = ApprovalQuery::all().newest_first().continued(next.clone());
        assert_eq!((newest.before, newest.after), (Some(next.clone()), None));
        let oldest = ApprovalQuery::all().continued(next.clone());
        assert_eq!((oldest.before, oldest.after), (None, Some(next)));
        let mut labelled = view(1).request;
        assert_eq!(
            request_principal(&labelled),
            Err(StoreError::Conflict(
                "a limited prepare needs the request's principal label"
            ))
        );
        labelled
            .labels
            .insert(PRINCIPAL_LABEL.into(), "local".into());
        assert_eq!(request_principal(&labelled), Ok("local"));
    }
}
