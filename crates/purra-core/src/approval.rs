//! Approval contract: an intent bound to the exact call, a recorded decision, and check-and-claim.
//!
//! ```text
//! prepared ──approve──▶ approved ──check_and_claim (digest + expiry re-checked, claim recorded)──▶ claimed
//!     └──deny──▶ denied      └── expired / digest mismatch ──▶ refused (the call is not started)
//! ```
//! An [`ApprovalIntent`] names the tool, the digest of the arguments, the approval binding identity, the
//! checkpoint call, the run and the run preset fingerprint; its [`ApprovalIntent::digest`] is what the
//! approver approves. At dispatch Core recomputes the intent from the *current* registration, arguments
//! and preset and passes its digest to [`ApprovalGateway::check_and_claim`], which in one step checks the
//! decision, the expiry and the digest and records the idempotency claim in the gateway's own receipt
//! store ([`ApprovalGateway::receipts`]), so a claimed call is never dispatched twice.
//!
//! What a gateway stores for an approver is an [`ApprovalRequest`]: the intent plus the exact arguments and
//! the binding they were approved under (both checked against the intent's digests when prepared), who
//! asked, when, until when a decision is accepted, and display labels.
//!
//! A gateway declares whether it is durable; an agent with confirm-policy tools refuses to build with a
//! gateway that is not. [`InMemoryApprovalGateway`] is for tests and is not durable.
//!
//! Waiting for a decision never polls: [`ApprovalGateway::subscribe`] streams the gateway's
//! [`StoreEvent`]s and [`ApprovalGateway::wait_for_decision`] returns as soon as a decision is recorded,
//! by this process or (when the store can tell, see each store) by another.

use crate::events::{EventSender, StoreEvent, StoreEvents};
use crate::idempotency::{ClaimResult, IdempotencyKey, IdempotencyStore, InMemoryIdempotencyStore};
use crate::identity::{json_identity, IdentityError, JsonIdentity};
use crate::operator::PRINCIPAL_LABEL;
use crate::run::RunId;
use crate::store::{BoxFuture, StoreError};
use crate::tool::{ApprovalBinding, ToolCall, ToolRegistration};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// The identifier of one prepared approval.
#[derive(
    Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct ApprovalId(pub String);

/// The checkpoint call an intent is bound to.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CheckpointCall {
    /// The model's call id.
    pub call_id: String,
    /// The tool name.
    pub tool: String,
}

/// What an approver approves: one exact call in one run under one preset.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ApprovalIntent {
    /// Local tool name.
    pub tool: String,
    /// JSON identity of the arguments.
    pub arguments_digest: JsonIdentity,
    /// Identity of the tool's approval binding.
    pub approval_binding: JsonIdentity,
    /// The checkpoint call.
    pub checkpoint_call: CheckpointCall,
    /// The run that made the call.
    pub run_id: RunId,
    /// The run preset fingerprint (model, instructions, catalog revision).
    pub preset_fingerprint: JsonIdentity,
}

/// Why an intent could not be formed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum IntentError {
    /// The tool has no approval binding (it is not a confirm-policy tool).
    NoApprovalBinding,
    /// The arguments have no JSON identity.
    Arguments(IdentityError),
}

impl std::fmt::Display for IntentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IntentError::NoApprovalBinding => f.write_str("the tool has no approval binding"),
            IntentError::Arguments(e) => write!(f, "the arguments have no identity: {e}"),
        }
    }
}

impl std::error::Error for IntentError {}

impl ApprovalIntent {
    /// Forms the intent for `call` of `tool` in run `run_id` under `preset_fingerprint`.
    pub fn new(
        tool: &ToolRegistration,
        call: &ToolCall,
        run_id: RunId,
        preset_fingerprint: JsonIdentity,
    ) -> Result<ApprovalIntent, IntentError> {
        let binding = tool
            .approval_binding()
            .ok_or(IntentError::NoApprovalBinding)?;
        Ok(ApprovalIntent {
            tool: tool.name().to_owned(),
            arguments_digest: json_identity(&call.arguments).map_err(IntentError::Arguments)?,
            approval_binding: binding.identity(),
            checkpoint_call: CheckpointCall {
                call_id: call.id.clone(),
                tool: call.name.clone(),
            },
            run_id,
            preset_fingerprint,
        })
    }

    /// The intent as JSON (`profile` `purra.approval-intent/v1`, camelCase members).
    pub fn to_json(&self) -> Value {
        json!({
            "profile": "purra.approval-intent/v1",
            "tool": self.tool,
            "argumentsDigest": self.arguments_digest.as_str(),
            "approvalBinding": self.approval_binding.as_str(),
            "checkpointCall": {"callId": self.checkpoint_call.call_id, "tool": self.checkpoint_call.tool},
            "runId": self.run_id.as_str(),
            "presetFingerprint": self.preset_fingerprint.as_str(),
        })
    }

    /// The digest the approver approves: the JSON identity of [`ApprovalIntent::to_json`].
    pub fn digest(&self) -> JsonIdentity {
        // Strings only: canonicalization cannot fail.
        json_identity(&self.to_json())
            .unwrap_or_else(|_| unreachable!("strings always canonicalize"))
    }
}

/// What a gateway keeps for an approver: the intent and what it was formed from.
///
/// [`ApprovalRequest::check`] (called by every store's `prepare`) requires the arguments' identity to be
/// the intent's arguments digest and the binding's identity to be its approval binding, so what an
/// approver is shown is exactly what the digest they approve stands for.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ApprovalRequest {
    /// The intent; its digest is what is approved.
    pub intent: ApprovalIntent,
    /// The exact arguments of the call.
    pub arguments: Value,
    /// The binding and scope ids and revisions the call is bound to.
    pub binding: ApprovalBinding,
    /// Who asked: the agent (or the client of a gateway).
    pub requested_by: String,
    /// When the approval was asked for.
    pub requested_at: SystemTime,
    /// A decision at or after this instant is refused (`Conflict("the approval request expired")`).
    pub expires_at: Option<SystemTime>,
    /// Display facts for approvers (for example the upstream server's name); only
    /// [`PRINCIPAL_LABEL`] (by [`ApprovalRequest::check_decider`], and by stores:
    /// [`OperatorStore::prepare_within`](crate::OperatorStore::prepare_within)) and
    /// [`APPROVERS_MUST_DIFFER_LABEL`] are interpreted.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

impl ApprovalRequest {
    /// The request for `call` of `tool` in `run_id` under `preset_fingerprint`, asked by `requested_by`
    /// now, with no expiry and no labels.
    pub fn for_call(
        tool: &ToolRegistration,
        call: &ToolCall,
        run_id: RunId,
        preset_fingerprint: JsonIdentity,
        requested_by: impl Into<String>,
    ) -> Result<ApprovalRequest, IntentError> {
        let intent = ApprovalIntent::new(tool, call, run_id, preset_fingerprint)?;
        let binding = tool
            .approval_binding()
            .ok_or(IntentError::NoApprovalBinding)?
            .clone();
        Ok(ApprovalRequest {
            intent,
            arguments: call.arguments.clone(),
            binding,
            requested_by: requested_by.into(),
            requested_at: SystemTime::now(),
            expires_at: None,
            labels: BTreeMap::new(),
        })
    }

    /// Checks that the arguments and the binding are the ones the intent's digests name
    /// (`Conflict` otherwise).
    pub fn check(&self) -> Result<(), StoreError> {
        match json_identity(&self.arguments) {
            Ok(id) if id == self.intent.arguments_digest => {}
            _ => {
                return Err(StoreError::Conflict(
                    "the arguments are not the ones the intent names",
                ))
            }
        }
        if self.binding.identity() != self.intent.approval_binding {
            return Err(StoreError::Conflict(
                "the binding is not the one the intent names",
            ));
        }
        Ok(())
    }

    /// Whether a decision made at `at` comes too late.
    pub fn expired_at(&self, at: SystemTime) -> bool {
        self.expires_at.is_some_and(|e| e <= at)
    }
}

/// The [`ApprovalRequest::labels`] entry that, set to `"true"`, refuses a decision by the principal
/// that asked (separation of duties; see [`ApprovalRequest::check_decider`]).
pub const APPROVERS_MUST_DIFFER_LABEL: &str = "approvers_must_differ";

/// The [`ApprovalRequest::labels`] entry that demands a fresh sign-in of whoever decides on the
/// approver page: the most seconds since the approver signed in (a binding's
/// `approver_max_age`). Carried with the request, so a page in another process enforces it too
/// (see [`ApprovalRequest::approver_max_age`]).
pub const APPROVER_MAX_AGE_LABEL: &str = "approver_max_age";

/// How an authenticated principal is written wherever approvals name one (a gateway's caller, an
/// approver signed in through an OpenID Connect provider): the issuer, `#`, the subject, such as
/// `https://auth.example#alice`. An issuer is a URL without a fragment (OpenID Connect and RFC 8414
/// require it), so the first `#` separates the two and no two principals share a name; a subject
/// of another issuer never matches.
pub fn principal_name(issuer: &str, subject: &str) -> String {
    format!("{issuer}#{subject}")
}

/// A decision refused by separation of duties ([`ApprovalRequest::check_decider`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SelfDecision {
    /// The principal that asked, when the request names it.
    pub principal: Option<String>,
}

impl std::fmt::Display for SelfDecision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.principal {
            Some(p) => write!(
                f,
                "approvers must differ: {p} asked for this approval and cannot decide it"
            ),
            None => f.write_str(
                "approvers must differ, and the request does not name who asked: nobody can decide it",
            ),
        }
    }
}

impl std::error::Error for SelfDecision {}

impl SelfDecision {
    /// The store error a decision path that answers with [`StoreError`] reports it as.
    pub const CONFLICT: &'static str =
        "approvers must differ: the principal that asked cannot decide it";
}

impl From<SelfDecision> for StoreError {
    fn from(_: SelfDecision) -> StoreError {
        StoreError::Conflict(SelfDecision::CONFLICT)
    }
}

impl ApprovalRequest {
    /// The principal that asked, as the request's [`PRINCIPAL_LABEL`] names it.
    pub fn requester(&self) -> Option<&str> {
        self.labels.get(PRINCIPAL_LABEL).map(String::as_str)
    }

    /// Whether the request refuses a decision by the principal that asked
    /// ([`APPROVERS_MUST_DIFFER_LABEL`] is `"true"`).
    pub fn approvers_must_differ(&self) -> bool {
        self.labels
            .get(APPROVERS_MUST_DIFFER_LABEL)
            .is_some_and(|v| v == "true")
    }

    /// How recent a page approver's sign-in must be to decide this request
    /// ([`APPROVER_MAX_AGE_LABEL`], in seconds). `Err` for a label that is not a number of
    /// seconds: a page refuses every decision then (it fails closed).
    pub fn approver_max_age(&self) -> Result<Option<std::time::Duration>, String> {
        match self.labels.get(APPROVER_MAX_AGE_LABEL) {
            None => Ok(None),
            Some(v) => v
                .parse::<u64>()
                .map(|s| Some(std::time::Duration::from_secs(s)))
                .map_err(|_| format!("its {APPROVER_MAX_AGE_LABEL} label {v:?} is not seconds")),
        }
    }

    /// Separation of duties, the one check every decision path makes before it decides (the
    /// approver page, `purra approvals`, a gateway's `decide`, its elicitation and approval view):
    /// when the request says approvers must differ, `decider` (the identity of whoever decides: a
    /// principal written by [`principal_name`], a signed-in approver's name) must not be the
    /// principal that asked. Identities are compared exactly; a request that says approvers must
    /// differ but names nobody is refused to everyone (it fails closed).
    pub fn check_decider(&self, decider: &str) -> Result<(), SelfDecision> {
        if !self.approvers_must_differ() {
            return Ok(());
        }
        match self.requester() {
            Some(p) if p != decider => Ok(()),
            other => Err(SelfDecision {
                principal: other.map(str::to_owned),
            }),
        }
    }
}

/// Approve or deny.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The call may run (once).
    Approve,
    /// The call must not run.
    Deny,
}

/// An approver's decision.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Decision {
    /// Approve or deny.
    pub verdict: Verdict,
    /// Who decided.
    pub approver: String,
    /// When.
    pub decided_at: SystemTime,
    /// After this instant an approval no longer authorizes dispatch.
    pub expires_at: Option<SystemTime>,
    /// The approver's note (why, conditions), kept with the decision and in the audit log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The state of a prepared approval.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalState {
    /// Waiting for a decision.
    Prepared,
    /// Decided.
    Decided(Decision),
    /// Approved and claimed for dispatch.
    Claimed(Decision),
    /// Approved but refused at dispatch (expired or mismatched); never dispatched.
    Refused(Decision),
}

/// A prepared approval and its state.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ApprovalRecord {
    /// The intent as prepared.
    pub intent: ApprovalIntent,
    /// Its digest.
    pub intent_digest: JsonIdentity,
    /// Current state.
    pub state: ApprovalState,
}

/// The answer of [`ApprovalGateway::check_and_claim`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimVerdict {
    /// Approved, unexpired, matching: the claim under this key is recorded; dispatch now.
    Claimed(IdempotencyKey),
    /// No decision yet.
    Pending,
    /// Denied.
    Denied,
    /// The approval expired.
    Expired,
    /// The current intent differs from the approved one.
    Mismatch,
    /// Claimed before (or refused before): never dispatched again.
    AlreadyClaimed,
}

/// The approval gateway contract.
pub trait ApprovalGateway: Send + Sync {
    /// Whether prepared intents, decisions and claims survive a crash of the host.
    fn is_durable(&self) -> bool;
    /// Records a prepared request and returns its id (`Conflict` if [`ApprovalRequest::check`] fails).
    fn prepare(&self, request: ApprovalRequest) -> BoxFuture<'_, Result<ApprovalId, StoreError>>;
    /// Records the decision for a prepared intent (`Conflict("already decided")` if decided;
    /// `Conflict("the approval request expired")` if `decision.decided_at` is at or after the
    /// request's `expires_at`).
    fn decide(&self, id: ApprovalId, decision: Decision) -> BoxFuture<'_, Result<(), StoreError>>;
    /// The record of `id`.
    fn record(&self, id: ApprovalId) -> BoxFuture<'_, Result<Option<ApprovalRecord>, StoreError>>;
    /// In one step: checks decision, expiry (against `now`) and that `current_intent` equals the approved
    /// digest, and records the idempotency claim (key = the intent digest) in [`ApprovalGateway::receipts`].
    fn check_and_claim(
        &self,
        id: ApprovalId,
        current_intent: JsonIdentity,
        now: SystemTime,
    ) -> BoxFuture<'_, Result<ClaimVerdict, StoreError>>;
    /// Records `decision` as [`ApprovalGateway::decide`] does and claims the approval as
    /// [`ApprovalGateway::check_and_claim`] does, both in one transaction where the store has
    /// them (a durable store commits once where the two calls commit twice; a crash leaves either
    /// neither or both). A decision refused (`Conflict`: decided first, or the request expired)
    /// writes nothing, and the error is returned: the caller claims alone then. The default runs
    /// the two one after the other.
    fn decide_and_claim(
        &self,
        id: ApprovalId,
        decision: Decision,
        current_intent: JsonIdentity,
        now: SystemTime,
    ) -> BoxFuture<'_, Result<ClaimVerdict, StoreError>> {
        Box::pin(async move {
            self.decide(id.clone(), decision).await?;
            self.check_and_claim(id, current_intent, now).await
        })
    }
    /// The receipt store the claims are recorded in; outcomes are completed there.
    fn receipts(&self) -> Arc<dyn IdempotencyStore>;
    /// A stream of this store's changes from now on (see [`crate::events`]).
    fn subscribe(&self) -> StoreEvents;
    /// Waits until approval `id` is decided and returns its state then (never `Prepared`); `NotFound`
    /// if there is no such approval. It subscribes before reading, so a decision recorded at any moment
    /// wakes it; bound it with `tokio::time::timeout`. A decision made by another process wakes it when
    /// the store hears of other processes' changes (PostgreSQL: at once, by `LISTEN`; SQLite: within
    /// the store's poll interval).
    fn wait_for_decision(
        &self,
        id: ApprovalId,
    ) -> BoxFuture<'_, Result<ApprovalState, StoreError>> {
        Box::pin(async move {
            let mut events = self.subscribe();
            loop {
                match self.record(id.clone()).await? {
                    None => return Err(StoreError::NotFound),
                    Some(r) if r.state != ApprovalState::Prepared => return Ok(r.state),
                    Some(_) => {}
                }
                loop {
                    match events.next().await {
                        None => return Err(StoreError::Backend("the store closed".into())),
                        Some(StoreEvent::Resync) => break,
                        Some(e) if e.approval_id() == Some(&id) => break,
                        Some(_) => {}
                    }
                }
            }
        })
    }
}

/// An in-memory approval gateway for tests. Not durable: an agent with confirm tools refuses it.
#[derive(Debug)]
pub struct InMemoryApprovalGateway {
    records: Mutex<HashMap<ApprovalId, (ApprovalRecord, Option<SystemTime>)>>,
    receipts: Arc<InMemoryIdempotencyStore>,
    next: AtomicU64,
    events: EventSender,
}

impl Default for InMemoryApprovalGateway {
    fn default() -> Self {
        InMemoryApprovalGateway::new()
    }
}

impl InMemoryApprovalGateway {
    /// An empty gateway with its own in-memory receipt store (which shares its events).
    pub fn new() -> InMemoryApprovalGateway {
        let events = EventSender::new();
        InMemoryApprovalGateway {
            records: Mutex::default(),
            receipts: Arc::new(InMemoryIdempotencyStore::with_events(events.clone())),
            next: AtomicU64::new(0),
            events,
        }
    }
}

impl ApprovalGateway for InMemoryApprovalGateway {
    fn is_durable(&self) -> bool {
        false
    }

    fn prepare(&self, request: ApprovalRequest) -> BoxFuture<'_, Result<ApprovalId, StoreError>> {
        let result = request.check().map(|()| {
            let id = ApprovalId(format!(
                "approval-{}",
                self.next.fetch_add(1, Ordering::Relaxed) + 1
            ));
            let record = ApprovalRecord {
                intent_digest: request.intent.digest(),
                intent: request.intent,
                state: ApprovalState::Prepared,
            };
            self.records
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(id.clone(), (record, request.expires_at));
            self.events.send(StoreEvent::Prepared { id: id.clone() });
            id
        });
        Box::pin(async move { result })
    }

    fn decide(&self, id: ApprovalId, decision: Decision) -> BoxFuture<'_, Result<(), StoreError>> {
        let result = {
            let mut records = self.records.lock().unwrap_or_else(|p| p.into_inner());
            match records.get_mut(&id) {
                None => Err(StoreError::NotFound),
                Some((r, _)) if r.state != ApprovalState::Prepared => {
                    Err(StoreError::Conflict("already decided"))
                }
                Some((_, Some(expires))) if *expires <= decision.decided_at => {
                    Err(StoreError::Conflict("the approval request expired"))
                }
                Some((r, _)) => {
                    let verdict = decision.verdict;
                    r.state = ApprovalState::Decided(decision);
                    self.events.send(StoreEvent::Decided {
                        id: id.clone(),
                        verdict,
                    });
                    Ok(())
                }
            }
        };
        Box::pin(async move { result })
    }

    fn record(&self, id: ApprovalId) -> BoxFuture<'_, Result<Option<ApprovalRecord>, StoreError>> {
        let result = self
            .records
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&id)
            .map(|(r, _)| r.clone());
        Box::pin(async move { Ok(result) })
    }

    fn check_and_claim(
        &self,
        id: ApprovalId,
        current_intent: JsonIdentity,
        now: SystemTime,
    ) -> BoxFuture<'_, Result<ClaimVerdict, StoreError>> {
        let result = (|| {
            // One critical section covers the checks and the claim (lock order: records, then receipts).
            let mut records = self.records.lock().unwrap_or_else(|p| p.into_inner());
            let (record, _) = records.get_mut(&id).ok_or(StoreError::NotFound)?;
            let decision = match &record.state {
                ApprovalState::Prepared => return Ok(ClaimVerdict::Pending),
                ApprovalState::Claimed(_) | ApprovalState::Refused(_) => {
                    return Ok(ClaimVerdict::AlreadyClaimed)
                }
                ApprovalState::Decided(d) if d.verdict == Verdict::Deny => {
                    return Ok(ClaimVerdict::Denied)
                }
                ApprovalState::Decided(d) => d.clone(),
            };
            if decision.expires_at.is_some_and(|e| e <= now) {
                record.state = ApprovalState::Refused(decision);
                self.events.send(StoreEvent::Refused { id: id.clone() });
                return Ok(ClaimVerdict::Expired);
            }
            if record.intent_digest != current_intent {
                record.state = ApprovalState::Refused(decision);
                self.events.send(StoreEvent::Refused { id: id.clone() });
                return Ok(ClaimVerdict::Mismatch);
            }
            let key = IdempotencyKey(record.intent_digest.to_string());
            match self.receipts.claim_now(key.clone()) {
                ClaimResult::Claimed => {
                    record.state = ApprovalState::Claimed(decision);
                    self.events.send(StoreEvent::Claimed {
                        id: id.clone(),
                        key: key.clone(),
                    });
                    Ok(ClaimVerdict::Claimed(key))
                }
                ClaimResult::Existing(_) => Ok(ClaimVerdict::AlreadyClaimed),
            }
        })();
        Box::pin(async move { result })
    }

    fn receipts(&self) -> Arc<dyn IdempotencyStore> {
        Arc::clone(&self.receipts) as Arc<dyn IdempotencyStore>
    }

    fn subscribe(&self) -> StoreEvents {
        self.events.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn binding() -> ApprovalBinding {
        ApprovalBinding {
            binding_id: "b".into(),
            binding_revision: "1".into(),
            scope_id: "s".into(),
            scope_revision: "1".into(),
        }
    }

    fn request(args: &str) -> ApprovalRequest {
        ApprovalRequest {
            intent: intent(args),
            arguments: json!(args),
            binding: binding(),
            requested_by: "agent".into(),
            requested_at: SystemTime::UNIX_EPOCH,
            expires_at: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(50)),
            labels: BTreeMap::new(),
        }
    }

    fn intent(args: &str) -> ApprovalIntent {
        let id = |s: &str| json_identity(&json!(s)).unwrap();
        ApprovalIntent {
            tool: "update".into(),
            arguments_digest: id(args),
            approval_binding: binding().identity(),
            checkpoint_call: CheckpointCall {
                call_id: "c1".into(),
                tool: "update".into(),
            },
            run_id: RunId::new("r1"),
            preset_fingerprint: id("preset"),
        }
    }

    fn decision(verdict: Verdict, expires_at: Option<SystemTime>) -> Decision {
        Decision {
            verdict,
            approver: "alice".into(),
            decided_at: SystemTime::UNIX_EPOCH,
            expires_at,
            note: None,
        }
    }

    #[tokio::test]
    async fn check_and_claim_rechecks_expiry_and_digest_once() {
        let gw = InMemoryApprovalGateway::new();
        assert!(!gw.is_durable());
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(100);
        let a = gw.prepare(request("a")).await.unwrap();
        assert_eq!(
            gw.check_and_claim(a.clone(), intent("a").digest(), now)
                .await,
            Ok(ClaimVerdict::Pending)
        );
        gw.decide(a.clone(), decision(Verdict::Approve, Some(now)))
            .await
            .unwrap();
        assert_eq!(
            gw.decide(a.clone(), decision(Verdict::Deny, None)).await,
            Err(StoreError::Conflict("already decided"))
        );
        assert_eq!(
            gw.check_and_claim(a.clone(), intent("a").digest(), now)
                .await,
            Ok(ClaimVerdict::Expired)
        );
        assert_eq!(
            gw.check_and_claim(a, intent("a").digest(), now).await,
            Ok(ClaimVerdict::AlreadyClaimed)
        );

        let b = gw.prepare(request("b")).await.unwrap();
        gw.decide(b.clone(), decision(Verdict::Approve, None))
            .await
            .unwrap();
        assert_eq!(
            gw.check_and_claim(b.clone(), intent("other").digest(), now)
                .await,
            Ok(ClaimVerdict::Mismatch)
        );

        let c = gw.prepare(request("c")).await.unwrap();
        gw.decide(c.clone(), decision(Verdict::Approve, None))
            .await
            .unwrap();
        let key = IdempotencyKey(intent("c").digest().to_string());
        assert_eq!(
            gw.check_and_claim(c.clone(), intent("c").digest(), now)
                .await,
            Ok(ClaimVerdict::Claimed(key.clone()))
        );
        assert_eq!(
            gw.receipts().state(key).await,
            Ok(Some(crate::idempotency::ClaimState::InFlight))
        );
        assert_eq!(
            gw.check_and_claim(c.clone(), intent("c").digest(), now)
                .await,
            Ok(ClaimVerdict::AlreadyClaimed)
        );
        // A second approval of the very same intent cannot claim it again.
        let c2 = gw.prepare(request("c")).await.unwrap();
        gw.decide(c2.clone(), decision(Verdict::Approve, None))
            .await
            .unwrap();
        assert_eq!(
            gw.check_and_claim(c2, intent("c").digest(), now).await,
            Ok(ClaimVerdict::AlreadyClaimed)
        );
        let d = gw.prepare(request("d")).await.unwrap();
        gw.decide(d.clone(), decision(Verdict::Deny, None))
            .await
            .unwrap();
        assert_eq!(
            gw.check_and_claim(d, intent("d").digest(), now).await,
            Ok(ClaimVerdict::Denied)
        );
        assert_eq!(
            gw.check_and_claim(ApprovalId("missing".into()), intent("d").digest(), now)
                .await,
            Err(StoreError::NotFound)
        );
    }

    #[tokio::test]
    async fn requests_are_checked_and_expire_for_decisions() {
        let gw = InMemoryApprovalGateway::new();
        let mut wrong = request("a");
        wrong.arguments = json!("b");
        assert_eq!(
            gw.prepare(wrong).await,
            Err(StoreError::Conflict(
                "the arguments are not the ones the intent names"
            ))
        );
        let mut wrong = request("a");
        wrong.binding.scope_revision = "2".into();
        assert_eq!(
            gw.prepare(wrong).await,
            Err(StoreError::Conflict(
                "the binding is not the one the intent names"
            ))
        );
        let a = gw.prepare(request("a")).await.unwrap();
        assert_eq!(a, ApprovalId("approval-1".into()));
        let mut late = decision(Verdict::Approve, None);
        late.decided_at = SystemTime::UNIX_EPOCH + Duration::from_secs(50);
        assert_eq!(
            gw.decide(a.clone(), late).await,
            Err(StoreError::Conflict("the approval request expired"))
        );
        assert_eq!(
            gw.record(a).await.unwrap().unwrap().state,
            ApprovalState::Prepared
        );
    }

    /// A binding's `approver_max_age` travels as seconds in the request's labels; a label that
    /// is not seconds is an error (a page then refuses every decision).
    #[test]
    fn the_approver_max_age_label_is_seconds_or_an_error() {
        let mut r = request("a");
        assert_eq!(r.approver_max_age(), Ok(None));
        r.labels.insert(APPROVER_MAX_AGE_LABEL.into(), "300".into());
        assert_eq!(r.approver_max_age(), Ok(Some(Duration::from_secs(300))));
        r.labels.insert(APPROVER_MAX_AGE_LABEL.into(), "5m".into());
        assert_eq!(
            r.approver_max_age(),
            Err("its approver_max_age label \"5m\" is not seconds".into())
        );
    }

    #[test]
    fn approvers_must_differ_refuses_only_the_principal_that_asked() {
        let mut r = request("a");
        // No rule: anyone decides, the principal that asked too.
        r.labels.insert(
            PRINCIPAL_LABEL.into(),
            principal_name("https://auth.example", "alice"),
        );
        assert_eq!(r.requester(), Some("https://auth.example#alice"));
        assert!(!r.approvers_must_differ());
        assert_eq!(r.check_decider("https://auth.example#alice"), Ok(()));
        r.labels
            .insert(APPROVERS_MUST_DIFFER_LABEL.into(), "yes".into());
        assert!(!r.approvers_must_differ());
        r.labels
            .insert(APPROVERS_MUST_DIFFER_LABEL.into(), "true".into());
        assert!(r.approvers_must_differ());
        let refused = r.check_decider("https://auth.example#alice").unwrap_err();
        assert_eq!(
            refused.to_string(),
            "approvers must differ: https://auth.example#alice asked for this approval and cannot decide it"
        );
        // Compared exactly: another subject, the same subject at another issuer, a prefix.
        for other in [
            "https://auth.example#bob",
            "https://other.example#alice",
            "https://auth.example#alic",
            "alice",
        ] {
            assert_eq!(r.check_decider(other), Ok(()), "{other}");
        }
        // A local principal against a token approver's name.
        r.labels.insert(PRINCIPAL_LABEL.into(), "local".into());
        assert!(r.check_decider("local").is_err());
        assert_eq!(r.check_decider("ada"), Ok(()));
        // The rule without a principal fails closed.
        r.labels.remove(PRINCIPAL_LABEL);
        assert_eq!(
            r.check_decider("ada").unwrap_err().to_string(),
            "approvers must differ, and the request does not name who asked: nobody can decide it"
        );
    }

    #[tokio::test]
    async fn waiting_for_a_decision_wakes_on_it() {
        let gw = Arc::new(InMemoryApprovalGateway::new());
        let a = gw.prepare(request("a")).await.unwrap();
        let waiter = {
            let gw = Arc::clone(&gw);
            let a = a.clone();
            tokio::spawn(async move { gw.wait_for_decision(a).await })
        };
        // Another approval's decision does not end the wait.
        let b = gw.prepare(request("b")).await.unwrap();
        gw.decide(b, decision(Verdict::Deny, None)).await.unwrap();
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        let approve = decision(Verdict::Approve, None);
        gw.decide(a.clone(), approve.clone()).await.unwrap();
        assert_eq!(
            waiter.await.unwrap(),
            Ok(ApprovalState::Decided(approve.clone()))
        );
        // Already decided: it returns at once.
        assert_eq!(
            gw.wait_for_decision(a).await,
            Ok(ApprovalState::Decided(approve))
        );
        assert_eq!(
            gw.wait_for_decision(ApprovalId("approval-9".into())).await,
            Err(StoreError::NotFound)
        );
        let mut events = gw.subscribe();
        let c = gw.prepare(request("c")).await.unwrap();
        assert_eq!(events.next().await, Some(StoreEvent::Prepared { id: c }));
    }
}
