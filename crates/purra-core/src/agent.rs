//! The agent loop: model turns, batch admission, scheduling, checkpoints, suspension and resumption.
//!
//! One turn: ask the [`Model`]; with no tool calls the run is `Completed`; otherwise admit the whole batch
//! ([`crate::admission`]); a rejected batch dispatches nothing and the model sees one code per call; an
//! admitted batch is dispatched ([`crate::schedule`]) and the results join the transcript. A call of a
//! checkpoint tool (named with [`AgentBuilder::tool_checkpoint_names`], always confirm-policy and alone in
//! its turn) suspends the run: Core forms the [`ApprovalIntent`], prepares it with the gateway, saves the
//! run in the [`RunStore`] and returns [`RunOutcome::Suspended`] with the approval id and intent digest.
//!
//! [`Agent::resume`] loads the suspended run, re-validates the arguments and re-runs the scope check,
//! recomputes the intent from the current registration and preset, and calls
//! [`ApprovalGateway::check_and_claim`]. Approved and claimed: the call is dispatched once and its outcome
//! recorded in the gateway's receipt store as `committed` (with the result as receipt), `not_started` or
//! `unknown`. Denied, expired, mismatched or already claimed: the model sees `approval_denied`,
//! `approval_expired`, `approval_mismatch` or `approval_already_claimed`, and nothing is dispatched. Still
//! pending: the run stays suspended.
//!
//! **Construction-time guarantee**: [`AgentBuilder::build`] fails with
//! [`AgentBuildError::ApprovalGatewayNotDurable`] when the catalog has a confirm-policy tool and the
//! approval gateway, or its receipt store, is not durable (or is missing).

use crate::admission::{admit_batch, Admission, AdmissionLimits};
use crate::approval::{ApprovalGateway, ApprovalIntent, ApprovalRequest, ClaimVerdict};
use crate::catalog::Catalog;
use crate::error_code::{is_identifier, ErrorCode};
use crate::idempotency::EffectOutcome;
use crate::identity::{IdentityError, JsonIdentity};
use crate::model::{Message, Model, ModelRequest, ToolMessage};
use crate::run::{preset_fingerprint, Lease, RunContext, RunId};
use crate::run_store::{RunStore, SuspendedRun};
use crate::schedule::{dispatch_batch, execute, Execution, ScheduleLimits};
use crate::tool::{Effect, ScopeDecision, ToolSpec};
use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

/// Limits of one agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AgentLimits {
    /// Most model turns per run (a resumed run keeps counting).
    pub max_turns: usize,
    /// Admission limits.
    pub admission: AdmissionLimits,
    /// Scheduling limits.
    pub schedule: ScheduleLimits,
}

impl Default for AgentLimits {
    /// 16 turns, and the admission and scheduling defaults.
    fn default() -> Self {
        AgentLimits {
            max_turns: 16,
            admission: AdmissionLimits::default(),
            schedule: ScheduleLimits::default(),
        }
    }
}

/// Why an agent could not be built.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AgentBuildError {
    /// The agent name does not match `^[a-z][a-z0-9_]{0,63}$`.
    InvalidName,
    /// The catalog has confirm-policy tools and the approval gateway (or its receipt store) is missing or
    /// not durable. Its code is `approval_gateway_not_durable`.
    ApprovalGatewayNotDurable,
    /// Checkpoint tools need a run store to suspend into.
    RunStoreRequired,
    /// A checkpoint name is not in the catalog.
    UnknownCheckpoint(String),
    /// A checkpoint name is a read-policy tool (checkpoints are for confirm-policy tools).
    CheckpointNotConfirm(String),
    /// The preset fingerprint could not be computed.
    Identity(IdentityError),
}

impl AgentBuildError {
    /// The sanitized code for this error, where one exists.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            AgentBuildError::ApprovalGatewayNotDurable => {
                Some(ErrorCode::APPROVAL_GATEWAY_NOT_DURABLE)
            }
            _ => None,
        }
    }
}

impl fmt::Display for AgentBuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AgentBuildError::InvalidName => {
                f.write_str("agent names must match ^[a-z][a-z0-9_]{0,63}$")
            }
            AgentBuildError::ApprovalGatewayNotDurable => f.write_str(
                "confirm-policy tools require a durable approval gateway and receipt store",
            ),
            AgentBuildError::RunStoreRequired => {
                f.write_str("checkpoint tools require a run store")
            }
            AgentBuildError::UnknownCheckpoint(n) => {
                write!(f, "checkpoint {n:?} is not in the catalog")
            }
            AgentBuildError::CheckpointNotConfirm(n) => {
                write!(f, "checkpoint {n:?} is not a confirm-policy tool")
            }
            AgentBuildError::Identity(e) => write!(f, "preset has no fingerprint: {e}"),
        }
    }
}

impl std::error::Error for AgentBuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AgentBuildError::Identity(e) => Some(e),
            _ => None,
        }
    }
}

/// How a run ended (for now).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunOutcome {
    /// The model answered without tool calls.
    Completed {
        /// The answer.
        text: String,
    },
    /// The run waits for an approval decision; resume it with [`Agent::resume`].
    Suspended {
        /// The prepared approval.
        approval_id: crate::approval::ApprovalId,
        /// What the approver approves.
        intent_digest: JsonIdentity,
    },
    /// The run stopped.
    Failed {
        /// Why.
        code: ErrorCode,
    },
}

/// A request to start a run.
#[derive(Clone, Debug)]
pub struct RunRequest {
    /// This run's id.
    pub run_id: RunId,
    /// The root run's id (`None` for a top-level run).
    pub root_run_id: Option<RunId>,
    /// The user's input.
    pub input: String,
    /// The lease.
    pub lease: Lease,
}

/// Builder for [`Agent`].
pub struct AgentBuilder {
    name: String,
    model: Arc<dyn Model>,
    catalog: Arc<Catalog>,
    instructions: String,
    approval: Option<Arc<dyn ApprovalGateway>>,
    run_store: Option<Arc<dyn RunStore>>,
    checkpoints: BTreeSet<String>,
    limits: AgentLimits,
}

impl AgentBuilder {
    /// Sets the instructions.
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = instructions.into();
        self
    }

    /// Sets the approval gateway.
    pub fn approval(mut self, gateway: Arc<dyn ApprovalGateway>) -> Self {
        self.approval = Some(gateway);
        self
    }

    /// Sets the run store suspended runs are saved in.
    pub fn run_store(mut self, store: Arc<dyn RunStore>) -> Self {
        self.run_store = Some(store);
        self
    }

    /// Names the tools whose calls suspend the run for approval.
    pub fn tool_checkpoint_names<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.checkpoints = names.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the limits.
    pub fn limits(mut self, limits: AgentLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Checks the configuration (see the module's construction-time guarantee).
    pub fn build(self) -> Result<Agent, AgentBuildError> {
        if !is_identifier(&self.name) {
            return Err(AgentBuildError::InvalidName);
        }
        if self.catalog.has_confirm_tools() {
            let durable = self
                .approval
                .as_ref()
                .is_some_and(|g| g.is_durable() && g.receipts().is_durable());
            if !durable {
                return Err(AgentBuildError::ApprovalGatewayNotDurable);
            }
        }
        for name in &self.checkpoints {
            let tool = self
                .catalog
                .get(name)
                .ok_or_else(|| AgentBuildError::UnknownCheckpoint(name.clone()))?;
            if !tool.is_confirm() {
                return Err(AgentBuildError::CheckpointNotConfirm(name.clone()));
            }
        }
        if !self.checkpoints.is_empty() && self.run_store.is_none() {
            return Err(AgentBuildError::RunStoreRequired);
        }
        let preset =
            preset_fingerprint(self.model.id(), &self.instructions, self.catalog.revision())
                .map_err(AgentBuildError::Identity)?;
        Ok(Agent {
            specs: self.catalog.specs(),
            name: self.name,
            model: self.model,
            catalog: self.catalog,
            instructions: self.instructions,
            approval: self.approval,
            run_store: self.run_store,
            checkpoints: self.checkpoints,
            limits: self.limits,
            preset,
        })
    }
}

/// An agent: a model, instructions and a catalog, with the stores its checkpoints need.
pub struct Agent {
    name: String,
    model: Arc<dyn Model>,
    catalog: Arc<Catalog>,
    instructions: String,
    approval: Option<Arc<dyn ApprovalGateway>>,
    run_store: Option<Arc<dyn RunStore>>,
    checkpoints: BTreeSet<String>,
    limits: AgentLimits,
    specs: Vec<ToolSpec>,
    preset: JsonIdentity,
}

impl fmt::Debug for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Agent")
            .field("name", &self.name)
            .field("preset", &self.preset)
            .finish_non_exhaustive()
    }
}

fn tool_message(
    call_id: &str,
    name: &str,
    result: Result<serde_json::Value, ErrorCode>,
) -> Message {
    Message::Tool {
        call_id: call_id.to_owned(),
        name: name.to_owned(),
        result: match result {
            Ok(value) => ToolMessage::Ok { value },
            Err(code) => ToolMessage::Error { code },
        },
    }
}

impl Agent {
    /// Starts building an agent named `name`.
    pub fn builder(
        name: impl Into<String>,
        model: Arc<dyn Model>,
        catalog: Arc<Catalog>,
    ) -> AgentBuilder {
        AgentBuilder {
            name: name.into(),
            model,
            catalog,
            instructions: String::new(),
            approval: None,
            run_store: None,
            checkpoints: BTreeSet::new(),
            limits: AgentLimits::default(),
        }
    }

    /// The agent's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The run preset fingerprint (model id, instructions, catalog revision).
    pub fn preset_fingerprint(&self) -> &JsonIdentity {
        &self.preset
    }

    /// The catalog.
    pub fn catalog(&self) -> &Arc<Catalog> {
        &self.catalog
    }

    /// Runs until completion, failure or a checkpoint.
    pub async fn run(&self, request: RunRequest) -> RunOutcome {
        let context = RunContext {
            root_run_id: request
                .root_run_id
                .unwrap_or_else(|| request.run_id.clone()),
            run_id: request.run_id,
            agent: self.name.clone(),
            lease: request.lease,
            idempotency_key: None,
        };
        let transcript = vec![Message::User {
            text: request.input,
        }];
        self.drive(context, transcript, 0).await
    }

    /// Resumes a suspended run after its approval was decided (see the module documentation).
    pub async fn resume(&self, run_id: RunId, lease: Lease) -> RunOutcome {
        let (Some(store), Some(gateway)) = (&self.run_store, &self.approval) else {
            return RunOutcome::Failed {
                code: ErrorCode::RUN_NOT_SUSPENDED,
            };
        };
        let suspended = match store.load_suspended(run_id.clone()).await {
            Ok(Some(s)) if s.agent == self.name => s,
            Ok(_) => {
                return RunOutcome::Failed {
                    code: ErrorCode::RUN_NOT_SUSPENDED,
                }
            }
            Err(_) => {
                return RunOutcome::Failed {
                    code: ErrorCode::STORE_FAILED,
                }
            }
        };
        let context = RunContext {
            run_id: suspended.run_id.clone(),
            root_run_id: suspended.root_run_id.clone(),
            agent: self.name.clone(),
            lease,
            idempotency_key: None,
        };
        if let Err(code) = context.lease.check() {
            return RunOutcome::Failed { code };
        }
        let call = suspended.pending_call.clone();
        let result = match self
            .checkpoint_result(gateway.as_ref(), &suspended, &context)
            .await
        {
            Ok(Some(result)) => result,
            Ok(None) => {
                return RunOutcome::Suspended {
                    approval_id: suspended.approval_id,
                    intent_digest: suspended.intent_digest,
                }
            }
            Err(code) => return RunOutcome::Failed { code },
        };
        if store.remove_suspended(run_id).await.is_err() {
            return RunOutcome::Failed {
                code: ErrorCode::STORE_FAILED,
            };
        }
        let mut transcript = suspended.transcript;
        transcript.push(tool_message(&call.id, &call.name, result));
        self.drive(context, transcript, suspended.turns_used).await
    }

    /// The checkpoint call's result after the approval decision: `Ok(None)` while still pending,
    /// `Err` when a store failed.
    async fn checkpoint_result(
        &self,
        gateway: &dyn ApprovalGateway,
        suspended: &SuspendedRun,
        context: &RunContext,
    ) -> Result<Option<Result<serde_json::Value, ErrorCode>>, ErrorCode> {
        let call = &suspended.pending_call;
        // The current registration, arguments and preset must still produce the approved intent.
        let current = self.catalog.get(&call.name).and_then(|tool| {
            tool.input_schema().validate(&call.arguments).ok()?;
            let intent =
                ApprovalIntent::new(tool, call, context.run_id.clone(), self.preset.clone())
                    .ok()?;
            Some((Arc::clone(tool), intent.digest()))
        });
        let Some((tool, digest)) = current else {
            // Nothing to claim against: refuse without dispatch (the approval stays unclaimed).
            return Ok(Some(Err(ErrorCode::APPROVAL_MISMATCH)));
        };
        if tool.scope().evaluate(&call.arguments, context) != ScopeDecision::Allow {
            return Ok(Some(Err(ErrorCode::SCOPE_DENIED)));
        }
        let verdict = gateway
            .check_and_claim(suspended.approval_id.clone(), digest, SystemTime::now())
            .await
            .map_err(|_| ErrorCode::STORE_FAILED)?;
        let key = match verdict {
            ClaimVerdict::Pending => return Ok(None),
            ClaimVerdict::Denied => return Ok(Some(Err(ErrorCode::APPROVAL_DENIED))),
            ClaimVerdict::Expired => return Ok(Some(Err(ErrorCode::APPROVAL_EXPIRED))),
            ClaimVerdict::Mismatch => return Ok(Some(Err(ErrorCode::APPROVAL_MISMATCH))),
            ClaimVerdict::AlreadyClaimed => {
                return Ok(Some(Err(ErrorCode::APPROVAL_ALREADY_CLAIMED)))
            }
            ClaimVerdict::Claimed(key) => key,
        };
        // The dispatch carries its claim: an upstream call carries the key derived from it.
        let mut dispatched = context.clone();
        dispatched.idempotency_key = Some(key.clone());
        let execution = execute(
            tool,
            call.arguments.clone(),
            dispatched,
            self.limits.schedule,
        )
        .await;
        let outcome = match &execution {
            Execution::Succeeded(value) => EffectOutcome::Committed {
                receipt: value.clone(),
            },
            Execution::Failed {
                effect: Effect::NotStarted,
                ..
            } => EffectOutcome::NotStarted,
            Execution::Failed {
                code,
                effect: Effect::Unknown,
            } => EffectOutcome::Unknown {
                reason: code.clone(),
            },
        };
        gateway
            .receipts()
            .complete(key, outcome)
            .await
            .map_err(|_| ErrorCode::STORE_FAILED)?;
        Ok(Some(execution.into_result()))
    }

    async fn drive(
        &self,
        context: RunContext,
        mut transcript: Vec<Message>,
        mut turns_used: usize,
    ) -> RunOutcome {
        loop {
            if let Err(code) = context.lease.check() {
                return RunOutcome::Failed { code };
            }
            if turns_used >= self.limits.max_turns {
                return RunOutcome::Failed {
                    code: ErrorCode::MAX_TURNS_EXCEEDED,
                };
            }
            let request = ModelRequest {
                instructions: &self.instructions,
                transcript: &transcript,
                tools: &self.specs,
            };
            let deadline = context.lease.deadline();
            let answer = async {
                match deadline {
                    Some(d) => tokio::time::timeout_at(d, self.model.respond(request))
                        .await
                        .ok(),
                    None => Some(self.model.respond(request).await),
                }
            };
            let response = tokio::select! {
                () = context.lease.cancellation().cancelled() => {
                    return RunOutcome::Failed { code: ErrorCode::RUN_CANCELLED };
                }
                answer = answer => match answer {
                    Some(response) => response,
                    None => return RunOutcome::Failed { code: ErrorCode::LEASE_EXPIRED },
                },
            };
            let response = match response {
                Ok(r) => r,
                Err(e) => return RunOutcome::Failed { code: e.code },
            };
            turns_used += 1;
            let calls = response.tool_calls.clone();
            transcript.push(Message::Assistant {
                text: response.text.clone(),
                tool_calls: response.tool_calls,
            });
            if calls.is_empty() {
                return RunOutcome::Completed {
                    text: response.text,
                };
            }
            match admit_batch(
                &self.catalog,
                &calls,
                &context,
                &self.checkpoints,
                &self.limits.admission,
            ) {
                Admission::Rejected(rejections) => {
                    for (call, rejection) in calls.iter().zip(rejections) {
                        transcript.push(tool_message(&call.id, &call.name, Err(rejection.code)));
                    }
                }
                Admission::Admitted(admitted) => {
                    if admitted.len() == 1 && self.checkpoints.contains(&admitted[0].call.name) {
                        return self
                            .suspend(&context, transcript, &admitted[0], turns_used)
                            .await;
                    }
                    for result in dispatch_batch(admitted, &context, self.limits.schedule).await {
                        transcript.push(tool_message(
                            &result.call_id,
                            &result.tool,
                            result.execution.into_result(),
                        ));
                    }
                }
            }
        }
    }

    async fn suspend(
        &self,
        context: &RunContext,
        transcript: Vec<Message>,
        admitted: &crate::admission::AdmittedCall,
        turns_used: usize,
    ) -> RunOutcome {
        let (Some(gateway), Some(store)) = (&self.approval, &self.run_store) else {
            // `build` guarantees both exist whenever there are checkpoints.
            return RunOutcome::Failed {
                code: ErrorCode::APPROVAL_GATEWAY_NOT_DURABLE,
            };
        };
        let request = match ApprovalRequest::for_call(
            &admitted.tool,
            &admitted.call,
            context.run_id.clone(),
            self.preset.clone(),
            self.name.clone(),
        ) {
            Ok(request) => request,
            Err(_) => {
                return RunOutcome::Failed {
                    code: ErrorCode::INVALID_ARGUMENTS,
                }
            }
        };
        let intent_digest = request.intent.digest();
        let approval_id = match gateway.prepare(request).await {
            Ok(id) => id,
            Err(_) => {
                return RunOutcome::Failed {
                    code: ErrorCode::STORE_FAILED,
                }
            }
        };
        let suspended = SuspendedRun {
            run_id: context.run_id.clone(),
            root_run_id: context.root_run_id.clone(),
            agent: self.name.clone(),
            preset_fingerprint: self.preset.clone(),
            transcript,
            pending_call: admitted.call.clone(),
            approval_id: approval_id.clone(),
            intent_digest: intent_digest.clone(),
            turns_used,
            waiting_until: None,
        };
        if store.save_suspended(suspended).await.is_err() {
            return RunOutcome::Failed {
                code: ErrorCode::STORE_FAILED,
            };
        }
        RunOutcome::Suspended {
            approval_id,
            intent_digest,
        }
    }
}
