//! Batch admission: every call of one model turn is checked before any call of that turn runs.
//!
//! For each call, in order: resolve the name ([`ErrorCode::UNKNOWN_TOOL`]), bound the serialized size of
//! the arguments ([`ErrorCode::ARGUMENTS_TOO_LARGE`], counted while serializing, so a huge value stops
//! early), validate them against the input schema ([`ErrorCode::INVALID_ARGUMENTS`], or
//! `arguments_too_large` when a validation budget is exceeded), check the policy (a confirm tool outside a
//! checkpoint is [`ErrorCode::APPROVAL_REQUIRED`]; a checkpoint call must be alone in its turn,
//! [`ErrorCode::CHECKPOINT_NOT_ALONE`], and its arguments must have a JSON identity, else
//! `invalid_arguments`) and finally run the scope check ([`ErrorCode::SCOPE_DENIED`]).
//! If any call fails, no call of the turn is dispatched: the failing calls get their code and the others
//! get [`ErrorCode::BATCH_NOT_DISPATCHED`].

use crate::error_code::ErrorCode;
use crate::run::RunContext;
use crate::tool::{ScopeDecision, ToolCall, ToolRegistration};
use std::collections::BTreeSet;
use std::io;
use std::sync::Arc;

/// Limits applied by admission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdmissionLimits {
    /// Maximum serialized size of one call's arguments, in bytes.
    pub max_argument_bytes: usize,
}

impl Default for AdmissionLimits {
    /// 64 KiB, the MCP adapter's default result budget, which also bounds argument objects.
    fn default() -> Self {
        AdmissionLimits {
            max_argument_bytes: 64 << 10,
        }
    }
}

/// A call that passed admission, ready to be scheduled.
#[derive(Clone, Debug)]
pub struct AdmittedCall {
    /// The call.
    pub call: ToolCall,
    /// Its registration.
    pub tool: Arc<ToolRegistration>,
}

/// Why one call of a rejected batch was not dispatched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    /// The model's call id.
    pub call_id: String,
    /// The code the model sees.
    pub code: ErrorCode,
    /// A scope check's reason, for the host's logs only (never shown to the model).
    pub host_reason: Option<String>,
}

/// The outcome of admitting one turn.
#[derive(Clone, Debug)]
pub enum Admission {
    /// Every call passed; dispatch them all.
    Admitted(Vec<AdmittedCall>),
    /// At least one call failed; nothing is dispatched. One entry per call, in order.
    Rejected(Vec<Rejection>),
}

/// Serialized size of a value, stopping as soon as it exceeds `limit`.
pub(crate) fn serialized_size_within(value: &serde_json::Value, limit: usize) -> Option<usize> {
    struct Counter {
        n: usize,
        limit: usize,
    }
    impl io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.n += buf.len();
            if self.n > self.limit {
                return Err(io::Error::other("over limit"));
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter { n: 0, limit };
    serde_json::to_writer(&mut counter, value)
        .ok()
        .map(|()| counter.n)
}

/// Admits one model turn against `catalog` (see the module documentation for the order of checks).
/// `checkpoint_names` are the tools that suspend the run for approval.
pub fn admit_batch(
    catalog: &crate::catalog::Catalog,
    calls: &[ToolCall],
    context: &RunContext,
    checkpoint_names: &BTreeSet<String>,
    limits: &AdmissionLimits,
) -> Admission {
    let mut admitted = Vec::with_capacity(calls.len());
    let mut verdicts: Vec<Option<(ErrorCode, Option<String>)>> = Vec::with_capacity(calls.len());
    for call in calls {
        let verdict = admit_one(
            catalog,
            call,
            calls.len(),
            context,
            checkpoint_names,
            limits,
        );
        match verdict {
            Ok(tool) => {
                admitted.push(AdmittedCall {
                    call: call.clone(),
                    tool,
                });
                verdicts.push(None);
            }
            Err(e) => verdicts.push(Some(e)),
        }
    }
    if verdicts.iter().all(Option::is_none) {
        return Admission::Admitted(admitted);
    }
    Admission::Rejected(
        calls
            .iter()
            .zip(verdicts)
            .map(|(call, verdict)| {
                let (code, host_reason) =
                    verdict.unwrap_or((ErrorCode::BATCH_NOT_DISPATCHED, None));
                Rejection {
                    call_id: call.id.clone(),
                    code,
                    host_reason,
                }
            })
            .collect(),
    )
}

fn admit_one(
    catalog: &crate::catalog::Catalog,
    call: &ToolCall,
    batch_len: usize,
    context: &RunContext,
    checkpoint_names: &BTreeSet<String>,
    limits: &AdmissionLimits,
) -> Result<Arc<ToolRegistration>, (ErrorCode, Option<String>)> {
    let tool = catalog
        .get(&call.name)
        .ok_or((ErrorCode::UNKNOWN_TOOL, None))?;
    if serialized_size_within(&call.arguments, limits.max_argument_bytes).is_none() {
        return Err((ErrorCode::ARGUMENTS_TOO_LARGE, None));
    }
    if let Err(e) = tool.input_schema().validate(&call.arguments) {
        let code = if e.kind.is_budget() {
            ErrorCode::ARGUMENTS_TOO_LARGE
        } else {
            ErrorCode::INVALID_ARGUMENTS
        };
        return Err((code, None));
    }
    let checkpoint = checkpoint_names.contains(&call.name);
    if tool.is_confirm() && !checkpoint {
        return Err((ErrorCode::APPROVAL_REQUIRED, None));
    }
    if checkpoint && batch_len > 1 {
        return Err((ErrorCode::CHECKPOINT_NOT_ALONE, None));
    }
    // An approval intent binds the arguments' identity, so checkpoint arguments must be I-JSON.
    if checkpoint && crate::identity::json_identity(&call.arguments).is_err() {
        return Err((ErrorCode::INVALID_ARGUMENTS, None));
    }
    match tool.scope().evaluate(&call.arguments, context) {
        ScopeDecision::Allow => Ok(Arc::clone(tool)),
        ScopeDecision::Deny => Err((ErrorCode::SCOPE_DENIED, None)),
        ScopeDecision::DenyWithReason(reason) => Err((ErrorCode::SCOPE_DENIED, Some(reason))),
    }
}
