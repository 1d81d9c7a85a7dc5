//! Approval-gated writes: a durable approval bound to the exact call, a decision (from an
//! operator deciding on the store, or, when the binding allows it, from the downstream client's
//! user by elicitation), one claim, one dispatch, one recorded outcome.
//!
//! A write call is identified without any state of its own: its run id is the gateway's name,
//! the local tool and a digest of the caller (principal, client name) and the arguments, so the
//! same call made again, after its wait ended, after the client reconnected or after the gateway
//! restarted, finds the same durable records:
//!
//! 1. a completed claim for the intent: the stored outcome is returned (committed: the stored
//!    receipt), nothing is sent;
//! 2. otherwise the call's approval (the suspended run names it, unless its request expired
//!    undecided) or a new one: the intent is Core's [`ApprovalIntent`] (tool, arguments digest,
//!    approval binding whose revision is the upstream write catalog's digest, run, gateway
//!    preset), prepared in the store as a request accepting a decision for
//!    `approval_request_ttl`, and saved with the arguments as a suspended run. A new approval is
//!    prepared only while the caller's principal (the request's `principal` label) has fewer
//!    than `max_pending_per_caller` approvals open (pending, request not expired), counted by the
//!    store in the same step as the insert; at the cap the call is refused with `approval_limit`
//!    and nothing is prepared or saved. A call whose approval is already pending never prepares,
//!    so it is never refused by the cap;
//! 3. the decision: asked of the downstream client's user with an elicitation form when it
//!    declared elicitation, the configuration allows it and the write's binding says
//!    `approval = "client"`, else waited for (progress notifications every `progress_interval`)
//!    up to `approval_wait` and never past the request's expiry; undecided, the call returns a
//!    result naming the pending approval (or saying that its request expired). By default a
//!    binding's approvals are decided only on an operator's path (the approver page, `purra
//!    approvals approve|deny`, `Gateway::decide`): no client decides its own write unless the
//!    operator said so in the binding. The client's user's approval is recorded with the claim,
//!    in one transaction (its denial at once);
//! 4. the claim, against the *current* binding and registration (rediscovered first if the
//!    upstream's list changed): the caller rules are checked again for the caller the request's
//!    labels name (principal, client), and `check_and_claim` re-checks decision, expiry and the
//!    intent digest (whose binding identity includes a digest of the binding's scope table) and
//!    commits the claim before anything is sent; a caller who no longer qualifies is refused as a
//!    mismatch; the dispatch runs in its own task, so a caller that goes away
//!    never cuts it short, and its outcome (`committed` with the receipt, `not_started`,
//!    `unknown`) is recorded before the result is returned.
//!
//! Denied, expired and mismatched approvals are refused without sending (the store's audit log
//! records the refusal) and the call's run is dropped, so calling again asks for a new approval.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use purra_core::visible::client_name;
use purra_core::{
    execute, json_identity, preset_fingerprint, ApprovalId, ApprovalIntent, ApprovalRecord,
    ApprovalRequest, ApprovalState, ApprovalView, ClaimState, ClaimVerdict, Decision, DecisionPath,
    EffectOutcome, ErrorCode, Execution, IdempotencyKey, Lease, RunContext, RunId, StoreError,
    SuspendedRun, ToolCall, ToolRegistration, Verdict, APPROVERS_MUST_DIFFER_LABEL,
    APPROVER_MAX_AGE_LABEL, EFFECT_LABEL, PRINCIPAL_LABEL, SENDS_WITHOUT_CALLER_LABEL, TITLE_LABEL,
};
use purra_protocol::types::{CallToolResult, ElicitAction, ElicitParams, JsonObject};
use purra_protocol::RequestCtx;
use serde_json::{json, Value};
use tokio::time::Instant;
use tracing::Instrument;

use crate::catalog::Binding;
use crate::config::ApprovalBy;
use crate::rules::scope::Caller;
use crate::runtime::gateway::{BoundTool, Inner};
use crate::runtime::results;
use crate::runtime::store::POLL_INTERVAL;

/// A write call identified ([`Inner::identify`]): the registration it is checked against, its
/// run id and its intent.
pub(crate) struct WriteCall {
    pub bound: Arc<BoundTool>,
    pub run_id: RunId,
    pub intent: ApprovalIntent,
}

/// How a write call's approval is found: pending from an earlier call, or to be prepared (in
/// place of an open one of the caller's, prepared under an earlier binding, when `replaces`).
enum Found {
    /// The approval of an earlier call, its request's expiry, and whether it is still undecided.
    Pending(ApprovalId, Option<SystemTime>, bool),
    New {
        replaces: bool,
    },
}

/// What [`Inner::prepare`] wrote: an approval waiting for its decision, or one a standing grant
/// approved, with its claim already taken in the same transaction when the caller's call could
/// be sent at once (the claim's verdict).
enum Prepared {
    Waiting(ApprovalId, Option<SystemTime>),
    Granted(ApprovalId, Option<SystemTime>, Option<ClaimVerdict>),
}

/// A claim taken ([`Inner::claim_of`]): the registration it was checked against, its verdict, the approval's intent digest and who decided it.
struct Claim {
    bound: Arc<BoundTool>,
    verdict: ClaimVerdict,
    digest: purra_core::JsonIdentity,
    approver: String,
}

/// An approval by the downstream client's user (elicitation) not recorded yet: recorded with
/// the claim, in one transaction ([`purra_core::ApprovalGateway::decide_and_claim`]), by the
/// identity separation of duties compares (`decider`).
pub(crate) struct ClientDecision {
    decision: Decision,
    decider: String,
}

/// The label of a write's approval request naming the client's declared name (absent when it
/// gave none); with [`PRINCIPAL_LABEL`] it is the caller the caller rules are checked for again
/// when the approval is claimed.
pub(crate) const CLIENT_LABEL: &str = "client";

/// The caller an approval request was asked by, from its labels (a request without a label
/// for the client names none: a binding with `clients` rules refuses it).
pub(crate) fn requester(labels: &BTreeMap<String, String>) -> Caller {
    Caller {
        principal: labels.get(PRINCIPAL_LABEL).cloned().unwrap_or_default(),
        client: labels.get(CLIENT_LABEL).cloned().unwrap_or_default(),
        identity: None,
    }
}

/// What [`Inner::generation`] found: the generation whose stored outcome answers the call, or
/// the one that asks for an approval.
pub(crate) enum Generation {
    Done {
        run_id: RunId,
        digest: purra_core::JsonIdentity,
        state: ClaimState,
    },
    Open {
        run_id: RunId,
        intent: ApprovalIntent,
    },
}

/// The most generations of one call looked at (a receipt past the last still answers).
const MAX_GENERATIONS: u32 = 10_000;

/// The first generation's run id of a write run (the lock every generation of a call shares).
pub(crate) fn base_run(run_id: &RunId) -> RunId {
    match run_id.as_str().rsplit_once('~') {
        Some((base, n)) if n.parse::<u32>().is_ok() => RunId::new(base),
        _ => run_id.clone(),
    }
}

/// The checkpoint call id of every gateway write (the run id already identifies the call).
const CALL_ID: &str = "call";

fn store_failed(tool: &str) -> CallToolResult {
    results::failed(tool, &ErrorCode::STORE_FAILED, "nothing was sent")
}

impl Inner {
    /// The run id of a write call: `GATEWAY:TOOL:DIGEST16`.
    pub(crate) fn write_run_id(&self, b: &Binding, caller: &Caller, args: &Value) -> Option<RunId> {
        let id = json_identity(&json!({
            "profile": "purra.gateway-call/v1",
            "principal": caller.principal,
            "client": caller.client,
            "arguments": args,
        }))
        .ok()?;
        let hex = id.as_str().trim_start_matches("sha256:");
        Some(RunId::new(format!(
            "{}:{}:{}",
            self.settings.name,
            b.local,
            &hex[..16.min(hex.len())]
        )))
    }

    /// The intent of `args` for the registration as it is now.
    pub(crate) fn intent(
        &self,
        reg: &ToolRegistration,
        run_id: &RunId,
        args: &Value,
    ) -> Result<ApprovalIntent, ErrorCode> {
        let binding = reg
            .approval_binding()
            .ok_or(ErrorCode::APPROVAL_MISMATCH)?
            .identity();
        let preset = preset_fingerprint("purra-gateway", &self.settings.name, &binding)
            .map_err(|_| ErrorCode::INVALID_ARGUMENTS)?;
        let call = ToolCall {
            id: CALL_ID.into(),
            name: reg.name().to_owned(),
            arguments: args.clone(),
        };
        ApprovalIntent::new(reg, &call, run_id.clone(), preset)
            .map_err(|_| ErrorCode::INVALID_ARGUMENTS)
    }

    /// Locks one write run for this process (identical calls queue behind each other).
    async fn lock_run(&self, run_id: &RunId) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = {
            let mut locks = self.run_locks.lock().unwrap_or_else(|p| p.into_inner());
            locks.retain(|_, l| Arc::strong_count(l) > 1);
            locks.entry(base_run(run_id)).or_default().clone()
        };
        lock.lock_owned().await
    }

    fn set_waiting(&self, run_id: &RunId, waiting: bool) {
        let mut w = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        if waiting {
            w.insert(run_id.clone());
        } else {
            w.remove(run_id);
        }
    }

    /// Which write call `caller` makes with `args`: the checks every look at a write call makes
    /// first (the caller's and the arguments' scope, the current registration, the input
    /// schema, the policies of `[policies]`), then its run id and its intent for the
    /// registration as it is now. The refusals are codes; nothing is read from or written to the
    /// store.
    pub(crate) async fn identify(
        &self,
        b: &Binding,
        caller: &Caller,
        args: &Value,
    ) -> Result<WriteCall, ErrorCode> {
        if !b.scope.allows_caller(caller) {
            return Err(ErrorCode::SCOPE_DENIED);
        }
        if !b.scope.allows_arguments(args) {
            return Err(ErrorCode::SCOPE_DENIED);
        }
        let bound = self.registration(b).await?;
        if bound.registration.input_schema().validate(args).is_err() {
            return Err(ErrorCode::INVALID_ARGUMENTS);
        }
        // Before anything is read or prepared: a call the policies do not allow asks nobody.
        if !self.allowed_by_policies(b, caller, args) {
            return Err(results::policy_denied_code());
        }
        let run_id = self
            .write_run_id(b, caller, args)
            .ok_or(ErrorCode::INVALID_ARGUMENTS)?;
        let intent = self.intent(&bound.registration, &run_id, args)?;
        Ok(WriteCall {
            bound,
            run_id,
            intent,
        })
    }

    /// A decision by the downstream client's user, made through `via` (elicitation, the app):
    /// the approver is the client's name with the path (`claude-code (app)`); an approval
    /// authorizes dispatch for `approval_ttl`. Only for writes whose binding says
    /// `approval = "client"`.
    pub(crate) fn user_decision(
        &self,
        ctx: &RequestCtx,
        verdict: Verdict,
        via: DecisionPath,
        note: Option<String>,
    ) -> Decision {
        let client = ctx.client_name().unwrap_or_else(|| "client".into());
        let now = SystemTime::now();
        Decision {
            verdict,
            approver: via.approver(&client_name(&client)),
            decided_at: now,
            expires_at: (verdict == Verdict::Approve)
                .then(|| now.checked_add(self.settings.approval_ttl.0))
                .flatten(),
            note,
        }
    }

    /// Records a decision by `decider` (the identity separation of duties compares: a caller's
    /// principal, an approver's name) and wakes the calls of this process waiting on it. When
    /// the request says approvers must differ and `decider` asked for it, nothing is recorded:
    /// `Conflict(SelfDecision::CONFLICT)`.
    pub(crate) async fn decide_as(
        &self,
        approval: ApprovalId,
        decision: Decision,
        decider: &str,
    ) -> Result<(), StoreError> {
        let view = self
            .store
            .approval(approval.clone())
            .await?
            .ok_or(StoreError::NotFound)?;
        self.decide_seen(approval, &view, decision, decider).await
    }

    /// [`decide_as`](Self::decide_as) with the approval's view already read by the caller (who
    /// checked its workflow's voters on it): one store read per decision, not two.
    pub(crate) async fn decide_seen(
        &self,
        approval: ApprovalId,
        view: &purra_core::ApprovalView,
        decision: Decision,
        decider: &str,
    ) -> Result<(), StoreError> {
        view.request.check_decider(decider)?;
        // A workflow's `from` is checked where the approver's groups are known (the page, the
        // CLI, `Gateway::decide` with the file's groups): a binding with a workflow table is
        // decided by operators only, so the client's paths (elicitation, the approval view)
        // never reach it.
        self.approvals.decide(approval, decision).await?;
        self.decisions.wake();
        Ok(())
    }

    /// One downstream call of a write tool.
    pub(crate) async fn call_write(
        &self,
        b: &Binding,
        args: JsonObject,
        ctx: RequestCtx,
    ) -> CallToolResult {
        let tool = b.local.as_str();
        let caller = self.caller(&ctx);
        let args = Value::Object(args);
        if let Some(refused) = self.scope_refusal(b, &caller, &args, "nothing was sent") {
            return refused;
        }
        let WriteCall {
            bound,
            run_id,
            intent,
        } = match Box::pin(self.identify(b, &caller, &args)).await {
            Ok(call) => call,
            Err(code) if code == results::policy_denied_code() => {
                return results::policy_denied(tool, true)
            }
            Err(code) => return results::failed(tool, &code, "nothing was sent"),
        };
        // An upstream called as the person who asked: the caller must be able to reach it as
        // themselves (connected, holding a secret) before anyone is asked to approve.
        if b.upstream.credentials().is_some() {
            if let Err(e) = Box::pin(self.as_principal_asking(b, &bound, &ctx)).await {
                return results::failed(
                    tool,
                    &e.code,
                    &format!("nothing was sent and no approval was prepared: {}", e.why),
                );
            }
        }
        let reg = &bound.registration;
        // Every generation of the call queues behind the same lock.
        let _guard = self.lock_run(&run_id).await;

        // 1. Done before: the stored outcome, nothing sent; unless the binding bounds how long
        // a receipt answers and it is older: then the call's next generation (a run id of its
        // own, so a new intent and a new approval) is looked at the same way.
        let (run_id, intent) = match Box::pin(self.generation(b, reg, run_id, intent, &args)).await
        {
            Ok(Generation::Done {
                run_id,
                digest,
                state,
            }) => {
                let label = format!("intent {digest}");
                return Box::pin(self.outcome_of(tool, &label, &digest, state, &run_id)).await;
            }
            Ok(Generation::Open { run_id, intent }) => (run_id, intent),
            Err(r) => return r,
        };
        let digest = intent.digest();

        // 2. The call's approval: found from an earlier call, or prepared now (also when the
        // earlier request expired undecided: no decision would be accepted for it any more).
        let now = SystemTime::now();
        let found = match self
            .metrics
            .store("load_run", self.runs.load_suspended(run_id.clone()))
            .await
        {
            Err(_) => return store_failed(tool),
            Ok(Some(s)) if s.intent_digest == digest => {
                match self.store.approval(s.approval_id.clone()).await {
                    Ok(Some(v)) if !v.expired_undecided(now) => {
                        let undecided = v.state == ApprovalState::Prepared;
                        Found::Pending(s.approval_id, v.request.expires_at, undecided)
                    }
                    Ok(_) => Found::New { replaces: false },
                    Err(_) => return store_failed(tool),
                }
            }
            Ok(Some(s)) => {
                // Prepared under an earlier binding: decided, it is refused (recorded); pending,
                // it is replaced.
                match self.store.approval(s.approval_id.clone()).await {
                    Ok(Some(v)) if v.state != ApprovalState::Prepared => {
                        let who = self.who(&ctx);
                        let settle =
                            self.settle(b, &run_id, &s.approval_id, &args, Some(&who), None);
                        return Box::pin(settle).await;
                    }
                    Ok(v) => Found::New {
                        replaces: v.is_some_and(|v| {
                            v.is_open(now)
                                && v.request.labels.get(PRINCIPAL_LABEL) == Some(&caller.principal)
                        }),
                    },
                    Err(_) => return store_failed(tool),
                }
            }
            Ok(None) => {
                // A call an approver approved with edited arguments was claimed under the
                // edited intent: the same call made again is answered from that claim.
                let edited = if b.allow_edit {
                    self.edited_claim(&run_id).await
                } else {
                    Ok(None)
                };
                match edited {
                    Ok(Some((edited, claim))) => {
                        let label = format!("approval {}", edited.id.0);
                        let digest = edited.intent_digest.clone();
                        let result =
                            Box::pin(self.outcome_of(tool, &label, &digest, claim, &run_id)).await;
                        let original = edited
                            .request
                            .labels
                            .get(purra_core::EDITED_FROM_LABEL)
                            .cloned()
                            .unwrap_or_default();
                        return results::edited(result, &original, &edited);
                    }
                    Ok(None) => Found::New { replaces: false },
                    Err(_) => return store_failed(tool),
                }
            }
        };
        // Whether the call's run must be told that a caller waits (again): not for a new
        // approval (its run says so already), nor for a decided one (nobody waits for it).
        let mut mark = false;
        // An approval this call has just prepared: undecided when its commit answered, so the
        // decision is not read before it is waited for (the wait reads it).
        let mut fresh = None;
        let (approval, request_expires) = match found {
            Found::Pending(id, expires, undecided) => {
                mark = undecided;
                (id, expires)
            }
            Found::New { replaces } => {
                let cap = self.settings.max_pending_per_caller;
                // The open approval a new one replaces is the caller's own, and counted.
                let limit = cap.saturating_add(u32::from(replaces));
                // A call a grant approves is claimed with the grant's use when it can be sent
                // now: not one whose upstream takes the caller's own token and has none.
                let who = self.who(&ctx);
                let claim = !b
                    .upstream
                    .credentials()
                    .is_some_and(|c| c.needs_caller_token())
                    || who.token.is_some();
                let prepared_intent = intent.clone();
                let prepare = self
                    .prepare(intent, reg, b, &caller, &run_id, &args, limit, claim)
                    .instrument(tracing::debug_span!("gateway.prepare", tool));
                match Box::pin(prepare).await {
                    Ok(Some(prepared)) => {
                        self.metrics.add(
                            crate::runtime::metrics::APPROVALS_PREPARED,
                            Vec::new(),
                            1,
                        );
                        match prepared {
                            Prepared::Waiting(id, expires) => {
                                fresh = Some(ApprovalRecord {
                                    intent: prepared_intent,
                                    intent_digest: digest.clone(),
                                    state: ApprovalState::Prepared,
                                });
                                (id, expires)
                            }
                            Prepared::Granted(id, expires, None) => (id, expires),
                            Prepared::Granted(id, _, Some(verdict)) => {
                                let granted = self.granted_and_claimed(
                                    b, &bound, &run_id, &id, &args, &who, verdict, &digest,
                                );
                                return Box::pin(granted).await;
                            }
                        }
                    }
                    Ok(None) => return results::approval_limit(tool, cap),
                    Err(_) => return store_failed(tool),
                }
            }
        };

        // 3. The decision, waited for no longer than the request accepts one. Whether the
        // request expires before `approval_wait` would end is judged once, here: an undecided
        // wait cut short by it ends by saying so. A call made as a task waits in its task until
        // the request expires.
        let task = ctx.task_id().is_some();
        let patience = self.patience(task);
        let expires_first = request_expires.is_some_and(|e| {
            e.duration_since(SystemTime::now())
                .map_or(true, |left| left < patience)
        });
        if task {
            ctx.set_task_status(self.task_status(b, &approval).await)
                .await;
        }
        self.set_waiting(&run_id, true);
        // Approvers are told that a caller waits (also in a fleet: the store carries it), until
        // when, and so that approving sends now (a task waits longer than the new run says).
        let waiting_until = self.wait_until_for(request_expires, patience);
        if mark || task {
            self.mark_waiting(&run_id, &approval, Some(waiting_until))
                .await;
        }
        let wait_span = tracing::debug_span!(
            "gateway.approval_wait",
            tool,
            approval = %approval.0,
            state = tracing::field::Empty
        );
        // An approval by the client's user is recorded with the claim (one transaction): until
        // then the record reads pending, and the call goes on to its claim as decided.
        let decision = self
            .decision(b, &approval, request_expires, &digest, &args, &ctx, fresh)
            .instrument(wait_span.clone());
        let (mut record, client) = match Box::pin(decision).await {
            Ok((record, client)) => (Ok(record), client),
            Err(e) => (Err(e), None),
        };
        let by_client = client.is_some();
        // Undecided at the request's expiry under `on_expiry = "deny"`: denied now (once, by
        // whichever instance comes first), and the caller is told so.
        let denies_on_expiry = b
            .approval_rule
            .as_ref()
            .is_some_and(|r| r.on_expiry == Some(crate::config::OnExpiry::Deny));
        let left = request_expires
            .map(|e| e.duration_since(SystemTime::now()).unwrap_or_default())
            .filter(|left| *left < std::time::Duration::from_secs(2));
        if denies_on_expiry
            && !by_client
            && matches!(&record, Ok(r) if r.state == ApprovalState::Prepared)
            && left.is_some()
        {
            // The wait ends at the expiry, give or take the clocks' difference.
            tokio::time::sleep(left.unwrap_or_default() + std::time::Duration::from_millis(5))
                .await;
            if self.store.expire_due(SystemTime::now()).await.is_ok() {
                record = self
                    .approvals
                    .record(approval.clone())
                    .await
                    .and_then(|r| r.ok_or(StoreError::NotFound));
            }
        }
        if let Ok(r) = &record {
            let state = if by_client {
                "decided"
            } else {
                approval_state(&r.state)
            };
            wait_span.record("state", state);
        }
        self.set_waiting(&run_id, false);
        if !by_client
            && matches!(&record, Ok(r) if r.state == ApprovalState::Prepared)
            && SystemTime::now() < waiting_until
        {
            // The wait ended early (the caller went away, the gateway drains): nobody waits.
            self.mark_waiting(&run_id, &approval, None).await;
        }
        // A task its client cancelled withdraws its undecided approval (a denial recorded and
        // audited as the caller's); one decided meanwhile goes on as decided.
        if task
            && ctx.is_cancelled()
            && !by_client
            && matches!(&record, Ok(r) if r.state == ApprovalState::Prepared)
        {
            match self.withdraw(&approval, &caller.principal).await {
                Ok(()) => {
                    return results::failed(
                        tool,
                        &ErrorCode::APPROVAL_DENIED,
                        &format!(
                        "nothing was sent: the caller cancelled its task, withdrawing approval {}",
                        approval.0
                    ),
                    )
                }
                Err(_) => {
                    record = self
                        .approvals
                        .record(approval.clone())
                        .await
                        .and_then(|r| r.ok_or(StoreError::NotFound));
                }
            }
        }
        match record {
            Ok(r) if r.state == ApprovalState::Prepared && !by_client => {
                return if expires_first {
                    results::request_expired(tool, &approval.0)
                } else {
                    results::pending(tool, &approval.0, &digest)
                };
            }
            Ok(_) => {}
            Err(_) => return store_failed(tool),
        }

        // 4. Claim and dispatch.
        let who = self.who(&ctx);
        Box::pin(self.settle(b, &run_id, &approval, &args, Some(&who), client)).await
    }

    /// Until when a call starting to wait now waits: `approval_wait`, never past the request's
    /// expiry.
    fn wait_until(&self, request_expires: Option<SystemTime>) -> SystemTime {
        self.wait_until_for(request_expires, self.settings.approval_wait.0)
    }

    /// Until when a call starting to wait now for `patience` waits, never past the request's
    /// expiry.
    fn wait_until_for(
        &self,
        request_expires: Option<SystemTime>,
        patience: std::time::Duration,
    ) -> SystemTime {
        let now = SystemTime::now();
        let until = now.checked_add(patience).unwrap_or(now);
        request_expires.map_or(until, |e| until.min(e.max(now)))
    }

    /// How long a call waits for its decision: `approval_wait`; in a task (the client was
    /// answered at once), as long as the request accepts a decision.
    fn patience(&self, task: bool) -> std::time::Duration {
        if task {
            self.settings.approval_request_ttl.0
        } else {
            self.settings.approval_wait.0
        }
    }

    /// Withdraws the undecided `approval` of a call whose task its client cancelled: a denial
    /// by the caller (`principal`), recorded and audited like any decision; refused by the
    /// store when a decision came first.
    async fn withdraw(&self, approval: &ApprovalId, principal: &str) -> Result<(), StoreError> {
        let decision = Decision {
            verdict: Verdict::Deny,
            approver: format!("{principal} (task cancelled)"),
            decided_at: SystemTime::now(),
            expires_at: None,
            note: Some("withdrawn: the caller cancelled its task".into()),
        };
        self.approvals.decide(approval.clone(), decision).await?;
        self.decisions.wake();
        Ok(())
    }

    /// Writes `until` as the time the call of `run_id` waits for `approval` until (`None`:
    /// nobody waits), when the run still waits on that approval. Best effort: what an approver
    /// is told, never what is sent.
    async fn mark_waiting(&self, run_id: &RunId, approval: &ApprovalId, until: Option<SystemTime>) {
        if let Ok(Some(mut run)) = self.runs.load_suspended(run_id.clone()).await {
            if &run.approval_id == approval && run.waiting_until != until {
                run.waiting_until = until;
                let _ = self.runs.save_suspended(run).await;
            }
        }
    }

    /// The generation of a write call that answers it: the first (`run_id` itself) or a later
    /// one (`RUN~N`) whose intent has no completed claim older than the binding's
    /// `receipt_ttl`. A claim in flight, or with an `unknown` outcome, always answers: it is
    /// never sent again.
    pub(crate) async fn generation(
        &self,
        b: &Binding,
        reg: &ToolRegistration,
        base: RunId,
        intent: ApprovalIntent,
        args: &Value,
    ) -> Result<Generation, CallToolResult> {
        let tool = b.local.as_str();
        let receipts = self.approvals.receipts();
        let (mut run_id, mut intent) = (base.clone(), intent);
        for n in 1..=MAX_GENERATIONS {
            let digest = intent.digest();
            let state = match self
                .metrics
                .store(
                    "claim_state",
                    receipts.state(IdempotencyKey(digest.to_string())),
                )
                .await
            {
                Ok(Some(state)) => state,
                Ok(None) => return Ok(Generation::Open { run_id, intent }),
                Err(_) => return Err(store_failed(tool)),
            };
            let renewable = matches!(
                &state,
                ClaimState::Completed {
                    outcome: EffectOutcome::Committed { .. } | EffectOutcome::NotStarted
                }
            );
            let stale = match b.receipt_ttl {
                Some(ttl) if renewable => match self.claimed_by(&run_id, &digest).await {
                    Ok(Some((_, Some(at)))) => at
                        .checked_add(ttl)
                        .is_some_and(|until| until <= SystemTime::now()),
                    Ok(_) => false,
                    Err(_) => return Err(store_failed(tool)),
                },
                _ => false,
            };
            if !stale || n == MAX_GENERATIONS {
                return Ok(Generation::Done {
                    run_id,
                    digest,
                    state,
                });
            }
            run_id = RunId::new(format!("{}~{}", base.as_str(), n + 1));
            intent = self
                .intent(reg, &run_id, args)
                .map_err(|code| results::failed(tool, &code, "nothing was sent"))?;
        }
        Err(store_failed(tool))
    }

    /// The approval of `run_id` whose claim has the key `digest`, and when its outcome was
    /// recorded.
    async fn claimed_by(
        &self,
        run_id: &RunId,
        digest: &purra_core::JsonIdentity,
    ) -> Result<Option<(ApprovalId, Option<SystemTime>)>, StoreError> {
        let views = self.store.run_approvals(run_id.clone()).await?;
        Ok(views.into_iter().find_map(|v| {
            let c = v.claim?;
            (c.key.0 == digest.as_str()).then_some((v.id, c.completed_at))
        }))
    }

    /// Prepares the approval request of a write call (accepting a decision for
    /// `approval_request_ttl`, labelled with the caller's principal) unless that principal has
    /// `limit` approvals open, and saves the call as the run waiting on it; returns the
    /// approval and the request's expiry, or `None` at the limit (nothing written). A call a
    /// standing grant covers is approved by it instead (no run waits); with `claim`, claimed in
    /// the same transaction.
    #[allow(clippy::too_many_arguments)] // One call's parts, its limit and whether to claim.
    async fn prepare(
        &self,
        intent: ApprovalIntent,
        reg: &ToolRegistration,
        b: &Binding,
        caller: &Caller,
        run_id: &RunId,
        args: &Value,
        limit: u32,
        claim: bool,
    ) -> Result<Option<Prepared>, StoreError> {
        let digest = intent.digest();
        let preset = intent.preset_fingerprint.clone();
        let tool = intent.tool.clone();
        let binding = reg
            .approval_binding()
            .cloned()
            .ok_or(StoreError::Conflict("the tool has no approval binding"))?;
        // The client's name is its own choice: kept on one line, escaped and bounded, as every
        // approver surface, webhook and log shows it.
        let requested_by = if caller.client.is_empty() {
            caller.principal.clone()
        } else {
            format!("{} ({})", caller.principal, client_name(&caller.client))
        };
        let now = SystemTime::now();
        let expires_at = now.checked_add(self.settings.approval_request_ttl.0);
        let mut request = ApprovalRequest {
            intent,
            arguments: args.clone(),
            binding,
            requested_by,
            requested_at: now,
            expires_at,
            // What an approver is shown besides the intent: where the call goes; and who asked:
            // the principal the store counts the caller's open approvals by, and separation of
            // duties compares deciders with.
            labels: BTreeMap::from([
                ("gateway".to_owned(), self.settings.name.clone()),
                ("upstream".to_owned(), b.upstream.id.clone()),
                ("upstream_tool".to_owned(), b.remote.clone()),
                (PRINCIPAL_LABEL.to_owned(), caller.principal.clone()),
                // What the approver is told the write is.
                (TITLE_LABEL.to_owned(), b.title.clone()),
                (
                    EFFECT_LABEL.to_owned(),
                    b.effect.map_or("write", |e| e.as_str()).to_owned(),
                ),
            ]),
        };
        // The client's declared name, for the caller rules checked again at the claim.
        if !caller.client.is_empty() {
            request
                .labels
                .insert(CLIENT_LABEL.to_owned(), caller.client.clone());
        }
        if self.settings.run_decided_without_caller || b.dispatch_on_approval {
            request
                .labels
                .insert(SENDS_WITHOUT_CALLER_LABEL.to_owned(), "true".to_owned());
        }
        // A fresh sign-in demanded of page approvers travels with the request, so a page in
        // another process (`purra approvals serve`) enforces it as this gateway's would.
        if let Some(age) = b.approver_max_age {
            request
                .labels
                .insert(APPROVER_MAX_AGE_LABEL.to_owned(), age.as_secs().to_string());
        }
        if self.settings.approvers_must_differ {
            request
                .labels
                .insert(APPROVERS_MUST_DIFFER_LABEL.to_owned(), "true".to_owned());
        }
        // Approve with edit: the page is told it may edit, and the schema it validates against.
        if b.allow_edit {
            request
                .labels
                .insert(purra_core::ALLOW_EDIT_LABEL.to_owned(), "true".to_owned());
            request.labels.insert(
                purra_core::INPUT_SCHEMA_LABEL.to_owned(),
                reg.input_schema().source().to_string(),
            );
        }
        // The binding's workflow (quorum, escalation, expiry) travels with the request too.
        let needs_votes = match &b.approval_rule {
            Some(rule) => {
                for (label, value) in rule.labels() {
                    request.labels.insert(label.to_owned(), value);
                }
                rule.required.is_some_and(|n| n > 1)
            }
            None => false,
        };
        // A live grant covering the call approves it now (one use taken with the approval);
        // otherwise the approval is prepared and waits for a decision. A write that needs
        // several approvers is never approved by one standing grant.
        let granted = if needs_votes {
            None
        } else {
            self.metrics
                .store(
                    "use_grant",
                    self.use_grant(caller, args, &request, now, claim),
                )
                .await?
        };
        // A granted call is claimed at once, by this caller: no run waits for it. Claimed with
        // the use, a gateway that stops after it leaves a claim without outcome (`unknown`,
        // never sent again); claimed apart (`claim` false), one that stops before the claim
        // leaves the approval unclaimed, and the caller's next identical call takes a new use;
        // the grant's uses still bound what is sent.
        if let Some((id, verdict)) = granted {
            return Ok(Some(Prepared::Granted(id, expires_at, verdict)));
        }
        // The approval and the call waiting for it: one transaction.
        let run = SuspendedRun {
            run_id: run_id.clone(),
            root_run_id: run_id.clone(),
            agent: self.settings.name.clone(),
            preset_fingerprint: preset,
            transcript: Vec::new(),
            pending_call: ToolCall {
                id: CALL_ID.into(),
                name: tool,
                arguments: args.clone(),
            },
            // Set by the store to the approval it prepares.
            approval_id: ApprovalId(String::new()),
            intent_digest: digest,
            turns_used: 0,
            // The caller waits from here (the wait sets it again, to the same instant).
            waiting_until: Some(self.wait_until(expires_at)),
        };
        let prepared = self
            .metrics
            .store(
                "prepare",
                self.store.prepare_waiting(request, limit, now, run),
            )
            .await?;
        Ok(prepared.map(|id| Prepared::Waiting(id, expires_at)))
    }

    /// Waits for the decision of `approval`: asks the client's user first when allowed, and
    /// reads the store (woken by in-process decisions) until `approval_wait` passes or the
    /// request expires (`request_expires`), sending progress. Returns the record as last read,
    /// and the client's user's approval when it gave one (not recorded yet: the claim records
    /// it, in its transaction). `fresh`: the record of an approval this call just prepared,
    /// not read again before the wait (which reads it, after it listens for decisions).
    #[allow(clippy::too_many_arguments)] // One call's parts and what it knows of its approval.
    async fn decision(
        &self,
        b: &Binding,
        approval: &ApprovalId,
        request_expires: Option<SystemTime>,
        digest: &purra_core::JsonIdentity,
        args: &Value,
        ctx: &RequestCtx,
        fresh: Option<ApprovalRecord>,
    ) -> Result<(ApprovalRecord, Option<ClientDecision>), StoreError> {
        let mut wait = self.patience(ctx.task_id().is_some());
        if let Some(e) = request_expires {
            wait = wait.min(e.duration_since(SystemTime::now()).unwrap_or_default());
        }
        let until = Instant::now() + wait;
        let record = match fresh {
            Some(record) => record,
            None => self
                .approvals
                .record(approval.clone())
                .await?
                .ok_or(StoreError::NotFound)?,
        };
        if record.state != ApprovalState::Prepared {
            return Ok((record, None));
        }
        let waited = self.wait_with_progress(b, approval, until, ctx);
        tokio::pin!(waited);
        // Only a binding that lets the client decide asks the client's user; with separation of
        // duties the caller cannot decide its own call, so it is not asked either.
        let ask = self.settings.elicitation
            && b.approval == ApprovalBy::Client
            && !self.settings.approvers_must_differ
            && ctx.client_capabilities().elicitation.is_some();
        // A draining gateway answers a waiting call with its record as it is (pending: the
        // caller calls again, on another instance).
        let stop_waiting = async {
            tokio::select! {
                () = ctx.cancelled() => {}
                () = self.drain.draining() => {}
            }
        };
        tokio::pin!(stop_waiting);
        // Polled to its end at most once.
        let mut stopped = false;
        if ask {
            let question = self.elicit(b, approval, digest, args, ctx);
            tokio::select! {
                r = &mut waited => return r.map(|r| (r, None)),
                answer = question => {
                    if let Some(approved) = answer {
                        return Ok((record, Some(approved)));
                    }
                }
                () = &mut stop_waiting => stopped = true,
            }
        }
        if !stopped {
            tokio::select! {
                r = &mut waited => return r.map(|r| (r, None)),
                () = &mut stop_waiting => {}
            }
        }
        let record = self
            .approvals
            .record(approval.clone())
            .await?
            .ok_or(StoreError::NotFound)?;
        Ok((record, None))
    }

    /// The votes `b`'s approvals need, when it asks for a quorum (more than one).
    fn votes_needed(b: &Binding) -> Option<u32> {
        b.approval_rule
            .as_ref()
            .and_then(|r| r.required)
            .filter(|n| *n > 1)
    }

    /// The status a held write's task shows: the approval it waits for and, with a quorum, the
    /// approving votes cast so far (`waiting for approval approval-7, 1 of 2 votes`).
    async fn task_status(&self, b: &Binding, approval: &ApprovalId) -> String {
        let votes = match Self::votes_needed(b) {
            Some(need) => self.store.votes(approval.clone()).await.ok().map(|v| {
                let cast = v.iter().filter(|v| v.verdict == Verdict::Approve).count();
                (cast, need)
            }),
            None => None,
        };
        crate::runtime::tasks::waiting_message(&approval.0, votes)
    }

    /// Waits for the decision until `until`, with a progress notification at once (it names the
    /// approval) and then every `progress_interval`.
    async fn wait_with_progress(
        &self,
        b: &Binding,
        approval: &ApprovalId,
        until: Instant,
        ctx: &RequestCtx,
    ) -> Result<ApprovalRecord, StoreError> {
        let start = Instant::now();
        // A task's status follows the votes of a quorum (read at each progress tick).
        let votes_shown = ctx.task_id().is_some() && Self::votes_needed(b).is_some();
        let mut status: Option<String> = None;
        // Whole seconds, rounded (a wait of 59.9997 s is 60 s).
        let secs = |d: std::time::Duration| (d.as_millis() + 500) / 1000;
        let total = secs(until - start);
        let interval = self.settings.progress_interval.0;
        let mut next = start;
        let mut sent: Option<u128> = None;
        loop {
            if Instant::now() >= next {
                let waited = secs(Instant::now() - start).min(total);
                // Progress increases: a second not yet reported, or nothing.
                if sent.is_none_or(|s| waited > s) {
                    let message = format!(
                        "waiting for approval {}: {waited} s of {total} s",
                        approval.0
                    );
                    // A client that stopped listening does not stop the wait.
                    let _ = ctx
                        .progress(waited as f64, Some(total as f64), Some(&message))
                        .await;
                    sent = Some(waited);
                }
                if votes_shown {
                    let now = self.task_status(b, approval).await;
                    if status.as_ref() != Some(&now) {
                        ctx.set_task_status(now.clone()).await;
                        status = Some(now);
                    }
                }
                next += interval;
            }
            let record = self
                .decisions
                .wait(self.approvals.as_ref(), approval, next.min(until))
                .await?;
            if record.state != ApprovalState::Prepared || Instant::now() >= until {
                return Ok(record);
            }
        }
    }

    /// Asks the downstream client's user to approve or deny with an elicitation form: a denial
    /// (deny, or decline) is recorded at once; an approval is returned, to be recorded with the
    /// claim in one transaction; cancel or no answer decides nothing. A decision made elsewhere
    /// first wins (the store refuses a second one).
    async fn elicit(
        &self,
        b: &Binding,
        approval: &ApprovalId,
        digest: &purra_core::JsonIdentity,
        args: &Value,
        ctx: &RequestCtx,
    ) -> Option<ClientDecision> {
        let message = format!(
            "Approve this write?\n\
             tool: {} (upstream {:?}, remote tool {:?})\n\
             arguments: {}\n\
             intent digest: {}\n\
             approval: {} (gateway {})",
            b.local, b.upstream.id, b.remote, args, digest, approval.0, self.settings.name
        );
        let schema = json!({
            "type": "object",
            "properties": {
                "decision": {
                    "type": "string",
                    "title": "Decision",
                    "enum": ["approve", "deny"],
                    "description": "approve: the write is sent once; deny: it is never sent"
                },
                "note": {"type": "string", "title": "Note"}
            },
            "required": ["decision"]
        });
        let params = ElicitParams::form(message, schema.as_object().cloned().unwrap_or_default());
        let Ok(answer) = ctx.elicit(params).await else {
            return None;
        };
        let content = answer.content.unwrap_or_default();
        let verdict = match answer.action {
            ElicitAction::Accept => match content.get("decision").and_then(Value::as_str) {
                Some("approve") => Verdict::Approve,
                Some("deny") => Verdict::Deny,
                _ => return None,
            },
            ElicitAction::Decline => Verdict::Deny,
            _ => return None,
        };
        let note = content
            .get("note")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .map(str::to_owned);
        let decision = self.user_decision(ctx, verdict, DecisionPath::Elicitation, note);
        let decider = self.caller(ctx).principal;
        if verdict == Verdict::Approve {
            return Some(ClientDecision { decision, decider });
        }
        // A decision made elsewhere first stands; the wait reads it.
        let _ = self.decide_as(approval.clone(), decision, &decider).await;
        None
    }

    /// Claims a decided approval against the current registration and dispatches once; or
    /// reports why not. Used by waiting callers (`who`: the caller) and by the sweeper (`None`).
    ///
    /// An upstream called as the person who asked is called with `who`'s credential, obtained
    /// after the claim; one whose credential is the caller's own token (token exchange) is not
    /// claimed without the caller: the decided approval waits for the call to be made again.
    ///
    /// An approval an approver approved with edited arguments is settled as the edited one:
    /// its arguments are sent, and the answer says it was edited.
    ///
    /// `client`: the client's user's approval, not recorded yet: recorded with the claim in one
    /// transaction (so a client-approved cycle commits three times: the approval with its run,
    /// the decision with the claim, the outcome with its receipt). A decision recorded first
    /// (an operator's, an edit) stands; one that cannot be claimed now is recorded alone.
    pub(crate) async fn settle(
        &self,
        b: &Binding,
        run_id: &RunId,
        approval: &ApprovalId,
        args: &Value,
        who: Option<&crate::upstream::principals::Who>,
        client: Option<ClientDecision>,
    ) -> CallToolResult {
        match self.edit_or_original(run_id, approval).await {
            Ok(crate::runtime::edit::Edit::Not(view)) => {
                self.settle_one(b, run_id, approval, args, who, client, view)
                    .await
            }
            Ok(crate::runtime::edit::Edit::Edited(edited)) => {
                // Edited: the original approval was decided by the edit, first.
                let result = self
                    .settle_one(
                        b,
                        run_id,
                        &edited.id,
                        &edited.request.arguments,
                        who,
                        None,
                        None,
                    )
                    .await;
                results::edited(result, &approval.0, &edited)
            }
            Err(_) => {
                self.keep_decision(approval, client).await;
                store_failed(&b.local)
            }
        }
    }

    /// Records the client's user's approval alone (when its claim is not taken now), so that
    /// it is not lost; a decision recorded first stands.
    async fn keep_decision(&self, approval: &ApprovalId, client: Option<ClientDecision>) {
        if let Some(ClientDecision { decision, decider }) = client {
            let _ = self.decide_as(approval.clone(), decision, &decider).await;
        }
    }

    /// [`settle`](Inner::settle) for one approval and the arguments it was approved with
    /// (`view`: the approval as just read, when it was).
    #[allow(clippy::too_many_arguments)] // One call's parts and what was read of it.
    async fn settle_one(
        &self,
        b: &Binding,
        run_id: &RunId,
        approval: &ApprovalId,
        args: &Value,
        who: Option<&crate::upstream::principals::Who>,
        client: Option<ClientDecision>,
        view: Option<ApprovalView>,
    ) -> CallToolResult {
        match self
            .claim_of(b, run_id, approval, args, who, client, view)
            .await
        {
            Ok((now_bound, claim)) => {
                self.after_claim(&now_bound, claim, run_id, approval, args, who)
                    .await
            }
            Err(r) => r,
        }
    }

    /// A call a standing grant approved, claimed with the grant's use (`verdict`): sent as any
    /// claimed call ([`after_claim`](Inner::after_claim)).
    #[allow(clippy::too_many_arguments)] // One call's parts and its claim's verdict.
    async fn granted_and_claimed(
        &self,
        b: &Binding,
        bound: &Arc<BoundTool>,
        run_id: &RunId,
        approval: &ApprovalId,
        args: &Value,
        who: &crate::upstream::principals::Who,
        verdict: ClaimVerdict,
        digest: &purra_core::JsonIdentity,
    ) -> CallToolResult {
        if matches!(verdict, ClaimVerdict::Claimed(_)) {
            self.metrics.add(
                crate::runtime::metrics::APPROVALS_DECIDED,
                vec![("verdict", "approve".to_owned())],
                1,
            );
        }
        let claim = Claim {
            bound: bound.clone(),
            verdict,
            digest: digest.clone(),
            approver: String::new(),
        };
        self.after_claim(b, claim, run_id, approval, args, Some(who))
            .await
    }

    /// The claim of [`settle_one`](Inner::settle_one): checked against the binding and the
    /// registration as they are now, and taken (with the client's approval, when it gives one);
    /// the binding as it is now and the claim; or the caller's result when nothing is claimed.
    /// `view`: the approval as [`settle`](Inner::settle) just read it (read here otherwise).
    #[allow(clippy::too_many_arguments)] // One call's parts and what was read of it.
    async fn claim_of(
        &self,
        b: &Binding,
        run_id: &RunId,
        approval: &ApprovalId,
        args: &Value,
        who: Option<&crate::upstream::principals::Who>,
        client: Option<ClientDecision>,
        view: Option<ApprovalView>,
    ) -> Result<(Arc<Binding>, Claim), CallToolResult> {
        let mut client = client;
        let tool = b.local.as_str();
        let label = format!("approval {}", approval.0);
        // A reload may have replaced the binding since the call began: the claim is checked
        // against the binding as it is now (an approval for an earlier one is a mismatch).
        let Some(now_bound) = self.binding(tool) else {
            self.keep_decision(approval, client).await;
            return Err(results::failed(
                tool,
                &purra_mcp::codes::tool_missing(),
                &format!("nothing was sent; {label} is kept"),
            ));
        };
        let b: &Binding = &now_bound;
        // The safe boundary: a changed tool list is rediscovered before anything is claimed.
        let bound = match self.registration(b).await {
            Ok(r) => r,
            Err(code) => {
                self.keep_decision(approval, client).await;
                return Err(results::failed(
                    tool,
                    &code,
                    &format!("nothing was sent; {label} is kept"),
                ));
            }
        };
        // The caller rules, checked again against the binding as it is now, for the caller the
        // request names (its labels): one a reload or a restart dropped from `principals` or
        // `clients` has no current intent, so the claim is checked against one that matches no
        // approval and the store records the refusal as a mismatch; nothing is sent.
        // One read serves both: the request's labels now, its state and digest after the claim
        // (the one `settle` made to tell whether the approval was edited, when it made one).
        let read = match view {
            Some(view) => Ok(Some(view)),
            None => self.store.approval(approval.clone()).await,
        };
        let record = match read {
            Ok(Some(view)) => view,
            Ok(None) | Err(_) => {
                self.keep_decision(approval, client).await;
                return Err(store_failed(tool));
            }
        };
        let needs_caller = b
            .upstream
            .credentials()
            .is_some_and(|c| c.needs_caller_token());
        if needs_caller && who.is_none_or(|w| w.token.is_none()) {
            let expired = match &record.state {
                ApprovalState::Decided(d) => d.expires_at.is_some_and(|e| e <= SystemTime::now()),
                _ => false,
            };
            if !expired {
                // The credential is the caller's own token: only the caller's call sends it.
                self.keep_decision(approval, client).await;
                return Err(results::pending(tool, &approval.0, &record.intent_digest));
            }
        }
        let asker = requester(&record.request.labels);
        let current = if b.scope.allows_caller(&asker) {
            match self.intent(&bound.registration, run_id, args) {
                Ok(i) => i.digest(),
                Err(code) => {
                    self.keep_decision(approval, client).await;
                    return Err(results::failed(tool, &code, "nothing was sent"));
                }
            }
        } else {
            match json_identity(&json!({
                "profile": "purra.gateway-caller-refused/v1",
                "approval": approval.0,
            })) {
                Ok(id) => id,
                Err(_) => {
                    self.keep_decision(approval, client).await;
                    return Err(store_failed(tool));
                }
            }
        };
        let claim_span = tracing::debug_span!(
            "gateway.claim",
            tool,
            approval = %approval.0,
            verdict = tracing::field::Empty
        );
        // The client's approval, by a decider separation of duties allows, is recorded with
        // the claim; one recorded first (`Conflict`) stands, and the approval is claimed as it is.
        let client = client
            .take()
            .filter(|c| record.request.check_decider(&c.decider).is_ok());
        let claimed = match client {
            Some(ClientDecision { decision, .. }) => {
                let both = self.approvals.decide_and_claim(
                    approval.clone(),
                    decision,
                    current.clone(),
                    SystemTime::now(),
                );
                match self
                    .metrics
                    .store("decide_and_claim", both)
                    .instrument(claim_span.clone())
                    .await
                {
                    Err(StoreError::Conflict(_)) => None,
                    other => {
                        self.decisions.wake();
                        Some(other)
                    }
                }
            }
            None => None,
        };
        let claimed = match claimed {
            Some(claimed) => claimed,
            None => {
                self.metrics
                    .store(
                        "check_and_claim",
                        self.approvals.check_and_claim(
                            approval.clone(),
                            current,
                            SystemTime::now(),
                        ),
                    )
                    .instrument(claim_span.clone())
                    .await
            }
        };
        let verdict = match claimed {
            Ok(v) => v,
            Err(_) => return Err(store_failed(tool)),
        };
        claim_span.record("verdict", claim_verdict(&verdict));
        match &verdict {
            ClaimVerdict::Claimed(_) => self.metrics.add(
                crate::runtime::metrics::APPROVALS_DECIDED,
                vec![("verdict", "approve".to_owned())],
                1,
            ),
            ClaimVerdict::Denied => self.metrics.add(
                crate::runtime::metrics::APPROVALS_DECIDED,
                vec![("verdict", "deny".to_owned())],
                1,
            ),
            _ => {}
        }
        // Read before the claim: a denial recorded since is read again when the caller is told
        // who denied.
        let mut state = record.state;
        if matches!(verdict, ClaimVerdict::Denied) && matches!(state, ApprovalState::Prepared) {
            if let Ok(Some(now)) = self.store.approval(approval.clone()).await {
                state = now.state;
            }
        }
        let approver = match &state {
            ApprovalState::Decided(d) | ApprovalState::Claimed(d) | ApprovalState::Refused(d) => {
                match &d.note {
                    Some(note) => format!("{} (note: {note})", d.approver),
                    None => d.approver.clone(),
                }
            }
            ApprovalState::Prepared => String::new(),
        };
        let claim = Claim {
            bound,
            verdict,
            digest: record.intent_digest,
            approver,
        };
        Ok((now_bound, claim))
    }

    /// After a claim's verdict: the caller told why nothing is sent, or, claimed, the write sent
    /// once in a task of its own and its outcome recorded with its receipt (the run dropped, in
    /// the same transaction).
    #[allow(clippy::too_many_arguments)] // The claim's parts and the call's.
    async fn after_claim(
        &self,
        b: &Binding,
        claim: Claim,
        run_id: &RunId,
        approval: &ApprovalId,
        args: &Value,
        who: Option<&crate::upstream::principals::Who>,
    ) -> CallToolResult {
        let Claim {
            bound,
            verdict,
            digest,
            approver,
        } = claim;
        let tool = b.local.as_str();
        let label = format!("approval {}", approval.0);
        let refused = |r: CallToolResult| async move {
            // The caller is told; the call's run is over (a new call asks for a new approval).
            let _ = self.runs.remove_suspended(run_id.clone()).await;
            r
        };
        let key = match verdict {
            ClaimVerdict::Claimed(key) => key,
            ClaimVerdict::Pending => return results::pending(tool, &approval.0, &digest),
            ClaimVerdict::Denied => {
                return refused(results::denied(tool, &approval.0, &approver)).await
            }
            ClaimVerdict::Expired => return refused(results::expired(tool, &approval.0)).await,
            ClaimVerdict::Mismatch => return refused(results::mismatch(tool, &approval.0)).await,
            ClaimVerdict::AlreadyClaimed => {
                let receipts = self.approvals.receipts();
                return match receipts.state(IdempotencyKey(digest.to_string())).await {
                    Ok(Some(state)) => self.outcome_of(tool, &label, &digest, state, run_id).await,
                    Ok(None) => refused(results::mismatch(tool, &approval.0)).await,
                    Err(_) => store_failed(tool),
                };
            }
        };
        // Claimed: the claim is on disk. An upstream called as the person who asked gets the
        // credential of the caller now, after the approval and the claim, never before: a
        // connection that cannot be made as the caller sends nothing (`not_started`).
        let credentials = b.upstream.credentials().cloned();
        let mine = match (&credentials, who) {
            (None, _) => None,
            (Some(c), Some(who)) => {
                c.renew(who);
                match self.as_principal(b, &bound, who).await {
                    Ok(m) => m,
                    Err(e) => {
                        return self
                            .not_sent_after_claim(tool, &label, key, run_id, &e.code, &e.why)
                            .await
                    }
                }
            }
            (Some(_), None) => {
                let code =
                    ErrorCode::new("upstream_credential_missing").unwrap_or(ErrorCode::TOOL_FAILED);
                return self
                    .not_sent_after_claim(tool, &label, key, run_id, &code, "no caller to call as")
                    .await;
            }
        };
        let called_as = match (&credentials, who) {
            (Some(c), Some(who)) => Some((c.clone(), who.clone())),
            _ => None,
        };
        // Dispatch in a task of its own, so that the outcome is recorded even if the caller
        // goes away; it holds the upstream it was claimed for and is counted by a drain, which
        // waits for it.
        let registration = match &mine {
            Some(m) => m.registration.clone(),
            None => bound.registration.clone(),
        };
        let held = (bound.clone(), mine, self.drain.hold());
        let store = self.store.clone();
        let runs = self.runs.clone();
        let context = RunContext {
            run_id: run_id.clone(),
            root_run_id: run_id.clone(),
            agent: self.settings.name.clone(),
            lease: Lease::unbounded(),
            // The upstream sees `key.upstream()`: the same for every send of this intent.
            idempotency_key: Some(key.clone()),
        };
        let limits = self.schedule_limits();
        let args = args.clone();
        let run = run_id.clone();
        let metrics = self.metrics.clone();
        let dispatch_span = tracing::debug_span!(
            "gateway.dispatch",
            tool,
            upstream = %b.upstream.id,
            approval = %approval.0
        );
        let outcome_span = tracing::debug_span!(
            parent: &dispatch_span,
            "gateway.outcome",
            tool,
            state = tracing::field::Empty
        );
        let dispatch = tokio::spawn(
            async move {
                let _held = held;
                let execution = execute(registration, args, context, limits).await;
                // Who the upstream was called as (never a token) goes with the receipt.
                let called_as = called_as.and_then(|(c, who)| c.called_as(&who));
                let outcome = match &execution {
                    Execution::Succeeded(v) => EffectOutcome::Committed {
                        receipt: with_called_as(v.clone(), called_as.as_deref()),
                    },
                    Execution::Failed {
                        effect: purra_core::Effect::NotStarted,
                        ..
                    } => EffectOutcome::NotStarted,
                    Execution::Failed { code, .. } => EffectOutcome::Unknown {
                        reason: code.clone(),
                    },
                };
                let state = effect_state(&outcome);
                outcome_span.record("state", state);
                // The outcome with its receipt, and the run dropped: one transaction.
                let recorded = metrics
                    .store(
                        "complete",
                        store.complete_run(key, outcome.clone(), run.clone()),
                    )
                    .instrument(outcome_span)
                    .await;
                // Not recorded (nothing was written): the run is dropped all the same, as the
                // claim without an outcome is what reconciling looks at.
                if recorded.is_err() {
                    let _ = runs.remove_suspended(run).await;
                }
                if recorded.is_ok() {
                    metrics.add(
                        crate::runtime::metrics::EFFECTS,
                        vec![("state", state.to_owned())],
                        1,
                    );
                }
                (execution, outcome, recorded)
            }
            .instrument(dispatch_span),
        );
        match dispatch.await {
            Ok((_, EffectOutcome::Committed { receipt }, Ok(()))) => results::success(&receipt),
            Ok((execution, EffectOutcome::NotStarted, Ok(()))) => {
                let code = match execution {
                    Execution::Failed { code, .. } => Some(code),
                    Execution::Succeeded(_) => None,
                };
                results::not_started(tool, &label, code.as_ref())
            }
            Ok((_, EffectOutcome::Unknown { reason }, Ok(()))) => {
                results::unknown(tool, &label, &reason)
            }
            // The outcome could not be recorded: the claim stays without one and becomes
            // `unknown` when reconciled; it is never sent again.
            _ => results::in_flight(tool, &label),
        }
    }

    /// A claimed write that could not be sent as its caller: recorded `not_started` (nothing left
    /// the gateway), and the caller told why.
    async fn not_sent_after_claim(
        &self,
        tool: &str,
        label: &str,
        key: IdempotencyKey,
        run_id: &RunId,
        code: &ErrorCode,
        why: &str,
    ) -> CallToolResult {
        if self
            .metrics
            .store(
                "complete",
                self.store
                    .complete_run(key, EffectOutcome::NotStarted, run_id.clone()),
            )
            .await
            .is_err()
        {
            return results::in_flight(tool, label);
        }
        results::failed(
            tool,
            code,
            &format!("nothing was sent, {label} was used: {why}"),
        )
    }

    /// The result of a claim found in the store: the stored outcome; a claim without one is
    /// waited for up to `approval_wait` (another call may be sending it), and its claimant, if
    /// it was killed, is found gone once its lease lapsed: the claim is then `unknown`
    /// (`interrupted`), never sent again.
    async fn outcome_of(
        &self,
        tool: &str,
        label: &str,
        digest: &purra_core::JsonIdentity,
        mut state: ClaimState,
        run_id: &RunId,
    ) -> CallToolResult {
        let until = Instant::now() + self.settings.approval_wait.0;
        let key = IdempotencyKey(digest.to_string());
        let receipts = self.approvals.receipts();
        loop {
            if let ClaimState::Completed { outcome } = state {
                return match outcome {
                    EffectOutcome::Committed { receipt } => {
                        let result = results::success(&receipt);
                        // Said to be a replay, with the approval and time when they are found.
                        match self.claimed_by(run_id, digest).await {
                            Ok(Some((approval, at))) => results::replayed(result, &approval.0, at),
                            _ => results::replayed(result, label, None),
                        }
                    }
                    EffectOutcome::NotStarted => results::not_started(tool, label, None),
                    EffectOutcome::Unknown { reason } => results::unknown(tool, label, &reason),
                };
            }
            if Instant::now() >= until || self.drain.is_draining() {
                return results::in_flight(tool, label);
            }
            let _ = self.store.reconcile_interrupted(SystemTime::now()).await;
            state = match receipts.state(key.clone()).await {
                Ok(Some(s @ ClaimState::Completed { .. })) => s,
                Ok(Some(ClaimState::InFlight)) => {
                    tokio::select! {
                        () = tokio::time::sleep(POLL_INTERVAL) => {}
                        () = self.drain.draining() => {}
                    }
                    ClaimState::InFlight
                }
                _ => return store_failed(tool),
            };
        }
    }

    /// One look at the waiting writes of this gateway that no caller here waits on.
    pub(crate) async fn sweep(&self) -> Result<(), StoreError> {
        // Approval workflows, for the whole store: escalations due are marked (and their
        // events recorded) once, whichever instance sweeps first; approvals undecided at
        // their expiry whose binding says `on_expiry = "deny"` are denied.
        let now = SystemTime::now();
        self.store.escalate_due(now).await?;
        if !self.store.expire_due(now).await?.is_empty() {
            self.decisions.wake();
        }
        let prefix = format!("{}:", self.settings.name);
        for run_id in self.store.suspended_run_ids().await? {
            if !run_id.as_str().starts_with(&prefix) {
                continue;
            }
            if self
                .waiting
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(&run_id)
            {
                continue;
            }
            let Some(run) = self.runs.load_suspended(run_id.clone()).await? else {
                continue;
            };
            let Some(b) = self.binding(&run.pending_call.name) else {
                continue;
            };
            let Some(view) = self.store.approval(run.approval_id.clone()).await? else {
                continue;
            };
            if view.expired_undecided(SystemTime::now()) {
                // Undecided and no longer decidable: the run is over (the approval stays in the
                // store, shown as expired); the same call made again asks anew.
                let _guard = self.lock_run(&run_id).await;
                if matches!(self.runs.load_suspended(run_id.clone()).await?, Some(r) if r.approval_id == run.approval_id)
                {
                    self.runs.remove_suspended(run_id.clone()).await?;
                }
                continue;
            }
            if matches!(view.state, ApprovalState::Refused(_)) {
                // Approved with edit: the edited approval is what is sent (or refused, once
                // expired), as an approved call is.
                let Some(edited) = self.edit_of(&run_id, &run.approval_id).await? else {
                    continue;
                };
                let expired = match &edited.state {
                    ApprovalState::Decided(d) => {
                        d.expires_at.is_some_and(|e| e <= SystemTime::now())
                    }
                    _ => continue,
                };
                if !(expired || self.settings.run_decided_without_caller) {
                    continue;
                }
                let _guard = self.lock_run(&run_id).await;
                if matches!(self.runs.load_suspended(run_id.clone()).await?, Some(r) if r.approval_id == run.approval_id)
                {
                    let args = &run.pending_call.arguments;
                    let _ = self
                        .settle(&b, &run_id, &run.approval_id, args, None, None)
                        .await;
                }
                continue;
            }
            let ApprovalState::Decided(d) = &view.state else {
                continue;
            };
            if d.verdict == Verdict::Deny {
                // Denied: a caller calling again until the request would have expired is told
                // the denial; then the run is closed (the same call made again later is a new
                // request), never left suspended.
                let ends = view.request.expires_at.unwrap_or_else(|| {
                    d.decided_at
                        .checked_add(self.settings.approval_request_ttl.0)
                        .unwrap_or(d.decided_at)
                });
                if ends <= SystemTime::now() {
                    let _guard = self.lock_run(&run_id).await;
                    if matches!(self.runs.load_suspended(run_id.clone()).await?, Some(r) if r.approval_id == run.approval_id)
                    {
                        self.runs.remove_suspended(run_id.clone()).await?;
                    }
                }
                continue;
            }
            let expired = d.expires_at.is_some_and(|e| e <= SystemTime::now());
            let run_now = d.verdict == Verdict::Approve
                && (expired || self.settings.run_decided_without_caller || b.dispatch_on_approval);
            if !run_now {
                continue;
            }
            let _guard = self.lock_run(&run_id).await;
            // Looked at again under the lock: a caller may have settled it meanwhile.
            if matches!(self.runs.load_suspended(run_id.clone()).await?, Some(r) if r.approval_id == run.approval_id)
            {
                let _ = self
                    .settle(
                        &b,
                        &run_id,
                        &run.approval_id,
                        &run.pending_call.arguments,
                        None,
                        None,
                    )
                    .await;
            }
        }
        Ok(())
    }
}

/// An effect's state as the metrics and spans name it.
fn effect_state(outcome: &EffectOutcome) -> &'static str {
    match outcome {
        EffectOutcome::Committed { .. } => "committed",
        EffectOutcome::NotStarted => "not_started",
        EffectOutcome::Unknown { .. } => "unknown",
    }
}

/// A claim's verdict as its span names it.
fn claim_verdict(verdict: &ClaimVerdict) -> &'static str {
    match verdict {
        ClaimVerdict::Claimed(_) => "claimed",
        ClaimVerdict::Pending => "pending",
        ClaimVerdict::Denied => "denied",
        ClaimVerdict::Expired => "expired",
        ClaimVerdict::Mismatch => "mismatch",
        ClaimVerdict::AlreadyClaimed => "already_claimed",
    }
}

/// An approval's state as the wait's span names it.
fn approval_state(state: &ApprovalState) -> &'static str {
    match state {
        ApprovalState::Prepared => "pending",
        ApprovalState::Decided(_) => "decided",
        ApprovalState::Claimed(_) => "claimed",
        ApprovalState::Refused(_) => "refused",
    }
}

/// `receipt` saying who the upstream was called as ([`results::CALLED_AS_META`]), when the
/// upstream is called as the person who asked; the caller's result carries it in `_meta`.
fn with_called_as(mut receipt: Value, called_as: Option<&str>) -> Value {
    if let (Some(who), Value::Object(o)) = (called_as, &mut receipt) {
        o.insert(
            results::CALLED_AS_META.to_owned(),
            Value::String(who.to_owned()),
        );
    }
    receipt
}
