//! What downstream clients receive: upstream results rebuilt from the adapter's envelope, and
//! failures as `isError` results whose text names a sanitized code (never remote text) and what
//! became of the write.

use std::time::{SystemTime, UNIX_EPOCH};

use purra_core::{ErrorCode, JsonIdentity};
use purra_protocol::types::{CallToolResult, Content};
use serde_json::{json, Value};

/// A successful result from the adapter's envelope `{text: [..], structured}` (a live result or
/// a stored receipt): the text blocks, and the structured content when there is any.
pub fn success(envelope: &Value) -> CallToolResult {
    success_from(envelope.clone())
}

/// [`success`] of an envelope the caller no longer needs (a live read's): its text and
/// structured content are moved into the result, not copied.
pub fn success_from(envelope: Value) -> CallToolResult {
    let Value::Object(envelope) = envelope else {
        return CallToolResult::new(Vec::new());
    };
    // Its members taken in one pass (a lookup by name hashes the name).
    let mut result = CallToolResult::new(Vec::new());
    let mut structured = None;
    for (k, v) in envelope {
        match (k.as_str(), v) {
            ("text", Value::Array(text)) => {
                // Sized up front: collected through a filter, four blocks (1 KiB) would be
                // allocated for one, a size whose allocation consolidates the allocator's bins.
                let mut content = Vec::with_capacity(text.len());
                for t in text {
                    if let Value::String(t) = t {
                        content.push(Content::text(t));
                    }
                }
                result.content = content;
            }
            ("structured", s @ Value::Object(_)) => structured = Some(s),
            (CALLED_AS_META, Value::String(who)) => {
                let mut meta = result.meta.take().unwrap_or_default();
                meta.insert(CALLED_AS_META.to_owned(), Value::String(who));
                result.meta = Some(meta);
            }
            _ => {}
        }
    }
    match structured {
        Some(s) => result.with_structured_content(s),
        None => result,
    }
}

/// The `_meta` key (and the receipt's key) saying who an upstream called as the person who
/// asked was called as: `"sub=alice act=purra-gateway"` (never a token).
pub const CALLED_AS_META: &str = "io.purra/calledAs";

/// The `_meta` key of a result answered from an earlier call's receipt:
/// `{"approval": "approval-1", "receiptAt": "2026-12-06T12:42:05.123Z"}`.
pub const REPLAY_META: &str = "io.purra/replay";

/// The `_meta` key of the answer to a call an approver approved with edited arguments:
/// `{"by": "ada (page)", "approval": "approval-2", "originalApproval": "approval-1",
/// "originalArgumentsDigest": "sha256:…", "arguments": {…}}`.
pub const EDITED_META: &str = "purra/edited";

/// The answer to a call approved with edited arguments (`edited`, edited from `original`): the
/// result of the edited call, preceded by a text saying so, with [`EDITED_META`] in `_meta`.
pub fn edited(
    mut result: CallToolResult,
    original: &str,
    edited: &purra_core::ApprovalView,
) -> CallToolResult {
    let labels = &edited.request.labels;
    let by = labels
        .get(purra_core::EDITED_BY_LABEL)
        .map_or("an approver", String::as_str);
    let digest = labels
        .get(purra_core::ORIGINAL_ARGUMENTS_LABEL)
        .cloned()
        .unwrap_or_default();
    let arguments = &edited.request.arguments;
    result.content.insert(
        0,
        Content::text(format!(
            "edited by {} before it was sent: {original} was approved as {} with the arguments \
             {} (the original arguments' digest: {digest})",
            purra_core::visible::one_line(by, purra_core::visible::WHO_MAX_CHARS),
            edited.id.0,
            arguments,
        )),
    );
    let mut meta = result.meta.take().unwrap_or_default();
    meta.insert(
        EDITED_META.to_owned(),
        json!({"by": by, "approval": edited.id.0, "originalApproval": original,
               "originalArgumentsDigest": digest, "arguments": arguments}),
    );
    result.meta = Some(meta);
    result
}

/// `YYYY-MM-DD HH:MM:SS UTC`.
pub fn utc(t: SystemTime) -> String {
    let stamp = rfc3339_of(t);
    format!("{} {} UTC", &stamp[..10], &stamp[11..19])
}

/// RFC 3339 UTC with milliseconds.
fn rfc3339_of(t: SystemTime) -> String {
    let ms = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
    purra_protocol::tasks::rfc3339(u64::try_from(ms).unwrap_or(u64::MAX))
}

/// A result answered from the stored outcome of an earlier call (its receipt, recorded by
/// `approval` at `at`): the result, preceded by a text saying so, with [`REPLAY_META`] in
/// `_meta`. Nothing was sent for this call.
pub fn replayed(result: CallToolResult, approval: &str, at: Option<SystemTime>) -> CallToolResult {
    let when = at.map_or_else(|| "at an unrecorded time".to_owned(), utc);
    let mut result = result;
    result.content.insert(
        0,
        Content::text(format!(
            "answered from the receipt of {approval}, {when}; nothing was sent"
        )),
    );
    let mut meta = result.meta.take().unwrap_or_default();
    meta.insert(
        REPLAY_META.to_owned(),
        json!({"approval": approval, "receiptAt": at.map(rfc3339_of)}),
    );
    result.meta = Some(meta);
    result
}

/// `TOOL failed: CODE (WHAT)`, with `isError`.
pub fn failed(tool: &str, code: &ErrorCode, what: &str) -> CallToolResult {
    let mut text = format!("{tool} failed: {code} ({what})");
    if code == &purra_mcp::codes::catalog_changed() {
        text.push_str(
            ". The upstream changed this tool's definition since it was approved; it is served as \
             approved and not called until an operator reviews the change (`purra catalog diff`) \
             and approves it",
        );
    } else if code == &purra_mcp::codes::tool_removed() {
        text.push_str(
            ". The upstream no longer lists this tool; an operator reviews the removal \
             (`purra catalog diff`)",
        );
    }
    CallToolResult::error(text)
}

/// The code of a call refused because the gateway is stopping.
pub fn stopping() -> ErrorCode {
    ErrorCode::new("gateway_stopping").unwrap_or(ErrorCode::TOOL_FAILED)
}

/// The code of a write call refused because its caller's approvals waiting for a decision are
/// at `max_pending_per_caller`.
pub fn approval_limit_code() -> ErrorCode {
    ErrorCode::new("approval_limit").unwrap_or(ErrorCode::TOOL_FAILED)
}

/// A new write call refused at the cap: `limit` approvals of this caller already wait for a
/// decision; nothing was prepared.
pub fn approval_limit(tool: &str, limit: u32) -> CallToolResult {
    failed(
        tool,
        &approval_limit_code(),
        &format!(
            "nothing was sent and no approval was prepared: {limit} approvals asked by this \
             caller already wait for a decision, the most max_pending_per_caller allows; call \
             again once one is decided or has expired"
        ),
    )
}

/// The code of a call the gateway's Cedar policies do not allow.
pub fn policy_denied_code() -> ErrorCode {
    ErrorCode::new("policy_denied").unwrap_or(ErrorCode::SCOPE_DENIED)
}

/// A call the gateway's policies do not allow (no policy permits it, or one forbids it): nothing
/// was sent, and for a write nothing was prepared.
pub fn policy_denied(tool: &str, write: bool) -> CallToolResult {
    let what = if write {
        "nothing was sent and no approval was prepared"
    } else {
        "nothing was sent"
    };
    failed(
        tool,
        &policy_denied_code(),
        &format!("{what}: the gateway's policies do not allow this caller this call"),
    )
}

/// The code of a call refused because its caller made too many calls this minute.
pub fn rate_limited_code() -> ErrorCode {
    ErrorCode::new("rate_limited").unwrap_or(ErrorCode::TOOL_FAILED)
}

/// A call refused at once because its caller (one principal) is over
/// `max_calls_per_minute_per_caller`; the next call fits after `retry_after` (rounded up to
/// whole seconds). Nothing was sent or prepared.
pub fn rate_limited(
    tool: &str,
    per_minute: u32,
    retry_after: std::time::Duration,
    write: bool,
) -> CallToolResult {
    let what = if write {
        "nothing was sent and no approval was prepared"
    } else {
        "nothing was sent"
    };
    let secs = retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0);
    failed(
        tool,
        &rate_limited_code(),
        &format!(
            "{what}: this caller's calls exceed {per_minute} a minute, the most \
             max_calls_per_minute_per_caller allows; call again in {secs}s"
        ),
    )
}

/// The JSON-RPC error code of a request (not a tool call) refused because its caller is over
/// `max_calls_per_minute_per_caller` (in the range JSON-RPC leaves to servers).
pub const RATE_LIMITED_REQUEST: purra_protocol::RpcErrorCode = purra_protocol::RpcErrorCode(-32029);

/// A request other than a tool call (`initialize`, `ping`, `tools/list`, ...) refused at once
/// because its caller is over `max_calls_per_minute_per_caller`; the next fits after
/// `retry_after` (rounded up to whole seconds). An `initialize` refused opens no session.
pub fn rate_limited_request(
    per_minute: u32,
    retry_after: std::time::Duration,
) -> purra_protocol::ErrorObject {
    rate_limited_error("requests", per_minute, "try", retry_after)
}

/// The JSON-RPC error of a call naming a tool the gateway does not have, refused because its
/// caller is over `max_calls_per_minute_per_caller`: such calls count against the same rate as
/// the calls of bound tools. Nothing was sent.
pub fn rate_limited_unknown_tool(
    per_minute: u32,
    retry_after: std::time::Duration,
) -> purra_protocol::ErrorObject {
    rate_limited_error("calls", per_minute, "call", retry_after)
}

/// The JSON-RPC error of a caller over its rate: what it made too many of, and the verb that
/// tells it when the next fits (`retry_after` rounded up to whole seconds).
fn rate_limited_error(
    what: &str,
    per_minute: u32,
    verb: &str,
    retry_after: std::time::Duration,
) -> purra_protocol::ErrorObject {
    let secs = retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0);
    purra_protocol::ErrorObject::new(
        RATE_LIMITED_REQUEST,
        format!(
            "rate_limited: this caller's {what} exceed {per_minute} a minute, the most \
             max_calls_per_minute_per_caller allows; {verb} again in {secs}s"
        ),
    )
}

/// The write waits for a decision.
pub fn pending(tool: &str, approval: &str, digest: &JsonIdentity) -> CallToolResult {
    CallToolResult::error(format!(
        "{tool} was not sent: approval {approval} is pending (intent {digest}). \
         Once it is decided (purra approvals approve {approval}), call {tool} again with the \
         same arguments: an approved call is sent once; a denied one is not sent, and the \
         same call made again after a denial asks for a new approval."
    ))
}

/// The write's approval request expired undecided.
pub fn request_expired(tool: &str, approval: &str) -> CallToolResult {
    CallToolResult::error(format!(
        "{tool} was not sent: approval {approval} was not decided before its request expired \
         (approval_request_expired); call {tool} again with the same arguments to ask for a new \
         approval"
    ))
}

/// The approver denied the write: this call is over (its run closed); the same call made again
/// is a new request.
pub fn denied(tool: &str, approval: &str, approver: &str) -> CallToolResult {
    CallToolResult::error(format!(
        "{tool} was not sent: approval {approval} was denied by {approver} (approval_denied); \
         calling {tool} again with the same arguments asks for a new approval"
    ))
}

/// The approval expired before the write could be claimed.
pub fn expired(tool: &str, approval: &str) -> CallToolResult {
    CallToolResult::error(format!(
        "{tool} was not sent: approval {approval} expired before dispatch (approval_expired)"
    ))
}

/// The binding changed since the approval was prepared.
pub fn mismatch(tool: &str, approval: &str) -> CallToolResult {
    CallToolResult::error(format!(
        "{tool} was not sent: approval {approval} was for an earlier binding of the tool, which \
         changed since (approval_mismatch); call {tool} again to ask for a new approval"
    ))
}

/// The write was claimed (`claim` names the approval or the intent) and its effect is unknown:
/// kept with its claim, never sent again.
pub fn unknown(tool: &str, claim: &str, code: &ErrorCode) -> CallToolResult {
    CallToolResult::error(format!(
        "{tool} was claimed once ({claim}) and its effect is unknown: {code}. It is never sent \
         again; an operator reconciles it with evidence."
    ))
}

/// The write was claimed and refused before anything was sent.
pub fn not_started(tool: &str, claim: &str, code: Option<&ErrorCode>) -> CallToolResult {
    let why = code.map_or_else(|| "not_started".to_owned(), |c| c.to_string());
    CallToolResult::error(format!(
        "{tool} was not sent ({claim}): {why}; its claim is used, so this exact call is never \
         sent"
    ))
}

/// The write is being sent by another call, or its earlier sending has no recorded outcome yet.
pub fn in_flight(tool: &str, claim: &str) -> CallToolResult {
    CallToolResult::error(format!(
        "{tool} was claimed ({claim}) and has no recorded outcome yet; it is never sent twice: \
         call {tool} again later for its outcome"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_moved_envelope_gives_the_result_a_borrowed_one_gives() {
        for envelope in [
            json!({"text": ["a", "b"], "structured": {"n": 1}}),
            json!({"text": ["a"], "structured": null}),
            json!({"text": [], "structured": [1]}),
            json!({"text": ["a", 3], "structured": null, CALLED_AS_META: "sub=alice act=g"}),
            json!({"text": "a", CALLED_AS_META: 3}),
            json!({}),
            json!(null),
        ] {
            assert_eq!(
                success_from(envelope.clone()),
                success(&envelope),
                "{envelope}"
            );
        }
    }
}
