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

use purra_core::{ErrorCode, IDEMPOTENCY_KEY_META};
use purra_protocol::types::{methods, CallToolParams};
use purra_protocol::{Connection, RequestOptions};
use serde_json::{json, Value};

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

/// Whether the server of `conn` declared `capabilities.tools.idempotency` (SEP-3182) in its
/// initialize result: present and neither `false` nor `null`.
pub fn declares_idempotency(conn: &Connection) -> bool {
    conn.server_capabilities()
        .tools
        .as_ref()
        .and_then(|t| t.get("idempotency"))
        .is_some_and(|v| !matches!(v, Value::Null | Value::Bool(false)))
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
    let params = CallToolParams::new(remote.to_owned()).with_arguments(arguments);
    let mut params = serde_json::to_value(&params).expect("params serialize");
    params["_meta"] = json!({ IDEMPOTENCY_KEY_META: key });
    if declares_idempotency(conn) {
        params["idempotencyKey"] = json!(key);
    }
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
