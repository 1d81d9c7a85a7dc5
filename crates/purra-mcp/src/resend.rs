//! One resend of a write whose effect is `unknown`, under the idempotency key the first send
//! carried: the remote tool is listed and checked as discovery checks it, the arguments are
//! checked against its input schema, one `tools/call` is sent with the key in `_meta`
//! (`io.purra/idempotency-key`) and, when the server declared `tools.idempotency` (SEP-3182),
//! also as `params.idempotencyKey`, and the result is judged as a dispatch judges it.
//!
//! Whether a resend is allowed at all (the host declared the tool idempotent, or the server
//! declared the capability) and that it happens at most once are the host's to decide; this
//! only sends.

use std::collections::BTreeMap;

use purra_core::ErrorCode;
use purra_protocol::types::{methods, CallToolParams};
use purra_protocol::{Connection, RequestOptions};
use serde_json::Value;

use crate::call::{judge_result, map_error};
use crate::codes;
use crate::discovery::{is_complete, list_tools, select_bindings};
use crate::limits::Limits;
use crate::monitor::CatalogMonitor;

/// Why a resend has no result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResendFailure {
    /// Refused before anything was sent (the tool is missing or changed, the arguments no longer
    /// fit its schema, the connection closed).
    NotSent(ErrorCode),
    /// Failed after the request was sent: the effect stays unknown.
    AfterSend(ErrorCode),
}

/// Sends `arguments` once more to the remote tool `remote` with the idempotency key `key` (the
/// form an upstream sees, `IdempotencyKey::upstream`), and judges the result: the `{text,
/// structured}` a dispatch records as the receipt.
pub async fn resend_write(
    conn: &Connection,
    monitor: &CatalogMonitor,
    limits: Limits,
    remote: &str,
    arguments: Value,
    key: &str,
) -> Result<Value, ResendFailure> {
    let not_sent = |e: crate::AdapterError| ResendFailure::NotSent(e.code);
    let (tools, generation) = list_tools(conn, monitor, &limits).await.map_err(not_sent)?;
    let wanted = BTreeMap::from([(remote.to_owned(), remote.to_owned())]);
    let mut selected =
        select_bindings(tools, &wanted, |s: &String| s.as_str(), &limits).map_err(not_sent)?;
    let Some((_, tool)) = selected.pop() else {
        return Err(ResendFailure::NotSent(codes::tool_missing()));
    };
    if tool.task_only {
        return Err(ResendFailure::NotSent(codes::result_unsupported()));
    }
    if tool.input.validate(&arguments).is_err() {
        return Err(ResendFailure::NotSent(codes::invalid_arguments()));
    }
    let Value::Object(arguments) = arguments else {
        return Err(ResendFailure::NotSent(codes::invalid_arguments()));
    };
    let params = CallToolParams::new(remote.to_owned())
        .with_arguments(arguments)
        .with_idempotency_key(key, conn.supports_idempotency());
    let params = serde_json::to_value(&params).expect("params serialize");
    if monitor.is_closed() || conn.peer().is_closed() {
        return Err(ResendFailure::NotSent(codes::connection_closed()));
    }
    let options = RequestOptions::default().timeout(limits.timeout);
    let raw = conn
        .request_raw(methods::TOOLS_CALL, params, options)
        .await
        .map_err(|e| ResendFailure::AfterSend(map_error(&e)))?;
    if monitor.generation() != generation {
        return Err(ResendFailure::AfterSend(codes::catalog_stale()));
    }
    if !is_complete(conn, &raw) {
        return Err(ResendFailure::AfterSend(codes::result_unsupported()));
    }
    judge_result(raw.get(), &limits, tool.output.as_ref()).map_err(ResendFailure::AfterSend)
}
