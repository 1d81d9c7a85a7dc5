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
//! A gateway declares whether it is durable; an agent with confirm-policy tools refuses to build with a
//! gateway that is not. [`InMemoryApprovalGateway`] is for tests and is not durable.

use crate::idempotency::{ClaimResult, IdempotencyKey, IdempotencyStore, InMemoryIdempotencyStore};
use crate::identity::{json_identity, IdentityError, JsonIdentity};
use crate::run::RunId;
use crate::store::{BoxFuture, StoreError};
use crate::tool::{ToolCall, ToolRegistration};
use serde_json::{json, Value};
use std::collections::HashMap;
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
    /// Records a prepared intent and returns its id.
    fn prepare(&self, intent: ApprovalIntent) -> BoxFuture<'_, Result<ApprovalId, StoreError>>;
    /// Records the decision for a prepared intent (`Conflict` if already decided).
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
    /// The receipt store the claims are recorded in; outcomes are completed there.
    fn receipts(&self) -> Arc<dyn IdempotencyStore>;
}

/// An in-memory approval gateway for tests. Not durable: an agent with confirm tools refuses it.
#[derive(Debug, Default)]
pub struct InMemoryApprovalGateway {
    records: Mutex<HashMap<ApprovalId, ApprovalRecord>>,
    receipts: Arc<InMemoryIdempotencyStore>,
    next: AtomicU64,
}

impl InMemoryApprovalGateway {
    /// An empty gateway with its own in-memory receipt store.
    pub fn new() -> InMemoryApprovalGateway {
        InMemoryApprovalGateway::default()
    }
}

impl ApprovalGateway for InMemoryApprovalGateway {
    fn is_durable(&self) -> bool {
        false
    }

    fn prepare(&self, intent: ApprovalIntent) -> BoxFuture<'_, Result<ApprovalId, StoreError>> {
        let id = ApprovalId(format!(
            "approval-{}",
            self.next.fetch_add(1, Ordering::Relaxed) + 1
        ));
        let record = ApprovalRecord {
            intent_digest: intent.digest(),
            intent,
            state: ApprovalState::Prepared,
        };
        self.records
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.clone(), record);
        Box::pin(async move { Ok(id) })
    }

    fn decide(&self, id: ApprovalId, decision: Decision) -> BoxFuture<'_, Result<(), StoreError>> {
        let result = {
            let mut records = self.records.lock().unwrap_or_else(|p| p.into_inner());
            match records.get_mut(&id) {
                None => Err(StoreError::NotFound),
                Some(r) if r.state != ApprovalState::Prepared => {
                    Err(StoreError::Conflict("already decided"))
                }
                Some(r) => {
                    r.state = ApprovalState::Decided(decision);
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
            .cloned();
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
            let record = records.get_mut(&id).ok_or(StoreError::NotFound)?;
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
                return Ok(ClaimVerdict::Expired);
            }
            if record.intent_digest != current_intent {
                record.state = ApprovalState::Refused(decision);
                return Ok(ClaimVerdict::Mismatch);
            }
            let key = IdempotencyKey(record.intent_digest.to_string());
            match self.receipts.claim_now(key.clone()) {
                ClaimResult::Claimed => {
                    record.state = ApprovalState::Claimed(decision);
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn intent(args: &str) -> ApprovalIntent {
        let id = |s: &str| json_identity(&json!(s)).unwrap();
        ApprovalIntent {
            tool: "update".into(),
            arguments_digest: id(args),
            approval_binding: id("binding"),
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
        }
    }

    #[tokio::test]
    async fn check_and_claim_rechecks_expiry_and_digest_once() {
        let gw = InMemoryApprovalGateway::new();
        assert!(!gw.is_durable());
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(100);
        let a = gw.prepare(intent("a")).await.unwrap();
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

        let b = gw.prepare(intent("b")).await.unwrap();
        gw.decide(b.clone(), decision(Verdict::Approve, None))
            .await
            .unwrap();
        assert_eq!(
            gw.check_and_claim(b.clone(), intent("other").digest(), now)
                .await,
            Ok(ClaimVerdict::Mismatch)
        );

        let c = gw.prepare(intent("c")).await.unwrap();
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
        let c2 = gw.prepare(intent("c")).await.unwrap();
        gw.decide(c2.clone(), decision(Verdict::Approve, None))
            .await
            .unwrap();
        assert_eq!(
            gw.check_and_claim(c2, intent("c").digest(), now).await,
            Ok(ClaimVerdict::AlreadyClaimed)
        );
        let d = gw.prepare(intent("d")).await.unwrap();
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
}
