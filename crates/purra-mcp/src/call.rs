//! One bounded `tools/call`: checks before sending, a single request, and a result judged
//! against the limits and the output schema. Every failure is a code; no remote text escapes.

use std::sync::Arc;

use purra_core::{
    CompiledSchema, ErrorCode, Handler, RunContext, ScopeCheck, ScopeDecision, ToolError,
};
use purra_protocol::types::{methods, CallToolParams, CallToolResult, Content};
use purra_protocol::{Connection, Error, RequestOptions};
use serde_json::{json, Value};
use tracing::Instrument;

use crate::codes;
use crate::discovery::{decode_i_json, is_complete};
use crate::limits::Limits;
use crate::monitor::CatalogMonitor;

/// Maps a protocol failure to its adapter code.
pub(crate) fn map_error(e: &Error) -> ErrorCode {
    match e {
        Error::Rpc(_) => codes::protocol_error(),
        Error::Timeout => codes::timeout(),
        Error::Cancelled => ErrorCode::RUN_CANCELLED,
        Error::ConnectionClosed => codes::connection_closed(),
        Error::Transport(_) | Error::Http { .. } => codes::transport_error(),
        Error::Protocol(_) | Error::InvalidResponse(_) | Error::UnsupportedProtocolVersion(_) => {
            codes::result_invalid()
        }
        Error::ResponseTooLarge { .. } => codes::result_too_large(),
        _ => codes::transport_error(),
    }
}

/// Everything a registration's handler needs to call its remote tool.
pub(crate) struct CallTarget {
    pub conn: Arc<Connection>,
    pub remote: String,
    pub generation: u64,
    pub monitor: CatalogMonitor,
    pub limits: Limits,
    pub input: CompiledSchema,
    pub output: Option<CompiledSchema>,
    pub scope: ScopeCheck,
    pub requires_task: bool,
    /// Writes classify failures after sending as `unknown`; reads never write.
    pub write: bool,
}

/// The outcome of one call, before it is turned into a handler result.
pub(crate) enum CallOutcome {
    /// A validated success: `{text, structured}`.
    Success(Value),
    /// Rejected before anything was sent.
    NotSent(ErrorCode),
    /// Failed after the request was submitted.
    AfterSend(ErrorCode),
}

impl CallTarget {
    pub(crate) fn handler(self: &Arc<Self>) -> Handler {
        let target = self.clone();
        Arc::new(move |args: Value, run: RunContext| {
            let target = target.clone();
            Box::pin(async move {
                // The remote name and run are the host's own data; the outcome is a code.
                let span = tracing::debug_span!(
                    "mcp.tool_call",
                    tool = %target.remote,
                    run = %run.run_id,
                    write = target.write
                );
                let outcome = target.call(args, &run).instrument(span.clone()).await;
                tracing::debug!(
                    parent: &span,
                    outcome = match &outcome {
                        CallOutcome::Success(_) => "ok",
                        CallOutcome::NotSent(c) | CallOutcome::AfterSend(c) => c.as_str(),
                    },
                    sent = !matches!(outcome, CallOutcome::NotSent(_)),
                    "done"
                );
                match outcome {
                    CallOutcome::Success(v) => Ok(v),
                    CallOutcome::NotSent(code) => Err(ToolError::not_started(code)),
                    // A read binding is the host's assertion that the tool does not write: its
                    // effect is `not_started` whatever happened to the request.
                    CallOutcome::AfterSend(code) if !target.write => {
                        Err(ToolError::not_started(code))
                    }
                    CallOutcome::AfterSend(code) => Err(ToolError::unknown(code)),
                }
            })
        })
    }

    /// Checks, sends one `tools/call`, and judges the result.
    pub(crate) async fn call(&self, args: Value, run: &RunContext) -> CallOutcome {
        if self.monitor.is_closed() || self.conn.peer().is_closed() {
            return CallOutcome::NotSent(codes::connection_closed());
        }
        if self.monitor.generation() != self.generation || !self.conn.follows_list_changes() {
            return CallOutcome::NotSent(codes::catalog_stale());
        }
        let encoded = serde_json::to_vec(&args)
            .map(|v| v.len())
            .unwrap_or(usize::MAX) as u64;
        if encoded > self.limits.max_result_bytes || self.input.validate(&args).is_err() {
            return CallOutcome::NotSent(codes::invalid_arguments());
        }
        if !matches!(self.scope.evaluate(&args, run), ScopeDecision::Allow) {
            return CallOutcome::NotSent(codes::scope_denied());
        }
        if self.requires_task {
            return CallOutcome::NotSent(codes::result_unsupported());
        }
        if run.lease.check().is_err() {
            return CallOutcome::NotSent(ErrorCode::RUN_CANCELLED);
        }
        let Value::Object(arguments) = args else {
            return CallOutcome::NotSent(codes::invalid_arguments());
        };
        let params = CallToolParams::new(self.remote.clone()).with_arguments(arguments);
        let mut timeout = self.limits.timeout;
        if let Some(deadline) = run.lease.deadline() {
            timeout = timeout.min(deadline.saturating_duration_since(tokio::time::Instant::now()));
        }
        let options = RequestOptions::default()
            .timeout(timeout)
            .cancel_with(run.lease.cancellation().clone());
        let params = serde_json::to_value(&params).expect("params serialize");
        // In 2026-07-28 an `input_required` result comes back as it is (this path installs no
        // input handlers) and is unsupported below.
        let raw = match self
            .conn
            .request_raw(methods::TOOLS_CALL, params, options)
            .await
        {
            Ok(raw) => raw,
            Err(e) => return CallOutcome::AfterSend(map_error(&e)),
        };
        if self.monitor.generation() != self.generation {
            // The catalog changed while the call was in flight: the result is discarded.
            return CallOutcome::AfterSend(codes::catalog_stale());
        }
        if !is_complete(&self.conn, &raw) {
            return CallOutcome::AfterSend(codes::result_unsupported());
        }
        match judge_result(raw.get(), &self.limits, self.output.as_ref()) {
            Ok(v) => CallOutcome::Success(v),
            Err(code) => CallOutcome::AfterSend(code),
        }
    }
}

/// Judges a `tools/call` result's raw text against the limits and the output schema: the
/// `{text, structured}` the model sees, or a code from [`codes`]; no remote text escapes.
pub(crate) fn judge_result(
    raw: &str,
    limits: &Limits,
    output: Option<&CompiledSchema>,
) -> Result<Value, ErrorCode> {
    if raw.len() as u64 > limits.max_result_bytes {
        return Err(codes::result_too_large());
    }
    // I-JSON, not serde's last-wins: a result that repeats a member name means two things.
    let Some(result) = decode_i_json::<CallToolResult>(raw, limits.max_result_bytes) else {
        return Err(codes::result_invalid());
    };
    if result.content.len() as u64 > u64::from(limits.max_content_blocks) {
        return Err(codes::result_too_large());
    }
    if result.is_error() {
        return Err(codes::tool_error());
    }
    let mut text = Vec::with_capacity(result.content.len());
    for block in &result.content {
        match block {
            Content::Text(t) => text.push(Value::String(t.text.clone())),
            _ => return Err(codes::result_unsupported()),
        }
    }
    let structured = match (output, result.structured_content) {
        (Some(schema), Some(sc @ Value::Object(_))) => {
            schema.validate(&sc).map_err(|_| codes::result_invalid())?;
            sc
        }
        // An output schema needs valid structuredContent; text that looks like JSON is not it.
        (Some(_), _) => return Err(codes::result_invalid()),
        (None, Some(sc @ Value::Object(_))) => sc,
        (None, Some(_)) => return Err(codes::result_invalid()),
        (None, None) => Value::Null,
    };
    Ok(json!({"text": text, "structured": structured}))
}
