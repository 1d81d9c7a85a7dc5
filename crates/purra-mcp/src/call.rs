//! One bounded `tools/call`: checks before sending, a single request, and a result judged
//! against the limits and the output schema. Every failure is a code; no remote text escapes.

use std::sync::Arc;

use purra_core::json_text::MAX_DEPTH_CEILING;
use purra_core::{
    parse_json, CompiledSchema, ErrorCode, Handler, JsonLimits, RunContext, ScopeCheck,
    ScopeDecision, ToolError,
};
use std::time::Duration;

use purra_protocol::tasks::TaskStatus;
use purra_protocol::types::{methods, CallToolParams, CallToolResult, Content};
use purra_protocol::{Connection, Error, RequestOptions};
use serde_json::value::RawValue;
use serde_json::Value;
use tokio::time::Instant;
use tracing::Instrument;

use crate::codes;
use crate::discovery::{decode_i_json_value, is_complete};
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
    pub task: TaskUse,
    /// Writes classify failures after sending as `unknown`; reads never write.
    pub write: bool,
}

/// How a call treats its remote tool's `execution.taskSupport`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TaskUse {
    /// The tool runs as a plain request (no task support, or optional).
    Never,
    /// The tool runs only as a task and the binding did not opt in: refused before sending.
    Refuse,
    /// The tool runs only as a task and the read binding opted in: run as one.
    Run,
}

/// Task polling never runs faster than this, whatever the server asks.
const MIN_POLL: Duration = Duration::from_millis(50);
/// Nor slower than this.
const MAX_POLL: Duration = Duration::from_secs(5);
/// How long an abandoned task's remote cancellation may take.
const CANCEL_WITHIN: Duration = Duration::from_secs(5);

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
            // The caller's span, taken before Core spawns the call onto a task of its own: the
            // call's span stays its child (and the upstream request in its trace).
            let parent = tracing::Span::current();
            Box::pin(async move {
                // The remote name and run are the host's own data; the outcome is a code.
                let span = tracing::debug_span!(
                    parent: &parent,
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
        let encoded = encoded_len(&args);
        if encoded > self.limits.max_result_bytes || self.input.validate(&args).is_err() {
            return CallOutcome::NotSent(codes::invalid_arguments());
        }
        if !matches!(self.scope.evaluate(&args, run), ScopeDecision::Allow) {
            return CallOutcome::NotSent(codes::scope_denied());
        }
        match self.task {
            TaskUse::Never => {}
            TaskUse::Refuse => return CallOutcome::NotSent(codes::result_unsupported()),
            // A handshake server must have offered task-augmented calls.
            TaskUse::Run if !self.conn.is_modern() && !self.conn.supports_tool_tasks() => {
                return CallOutcome::NotSent(codes::result_unsupported())
            }
            TaskUse::Run => {}
        }
        if run.lease.check().is_err() {
            return CallOutcome::NotSent(ErrorCode::RUN_CANCELLED);
        }
        let Value::Object(arguments) = args else {
            return CallOutcome::NotSent(codes::invalid_arguments());
        };
        let mut timeout = self.limits.timeout;
        if let Some(deadline) = run.lease.deadline() {
            timeout = timeout.min(deadline.saturating_duration_since(Instant::now()));
        }
        if self.task == TaskUse::Run {
            // Boxed: a task's polling is a large future, and every read would carry it.
            return match Box::pin(self.run_task(arguments, timeout, run)).await {
                // A completed task's result is the tool's: no `resultType` round to check.
                Ok(raw) => self.judge(&raw, false),
                Err(code) => CallOutcome::AfterSend(code),
            };
        }
        let options = RequestOptions::default()
            .timeout(timeout)
            .cancel_with(run.lease.cancellation().clone());
        // The arguments are moved into the params, not copied through `to_value` with them; a
        // call without a key (every read) is `{name, arguments}`, built as it is.
        let mut params = match self.upstream_key(run) {
            Some(key) => serde_json::to_value(
                CallToolParams::new(self.remote.clone())
                    .with_idempotency_key(&key, self.conn.supports_idempotency()),
            )
            .expect("params serialize"),
            None => {
                let mut p = serde_json::Map::new();
                p.insert("name".to_owned(), Value::String(self.remote.clone()));
                Value::Object(p)
            }
        };
        if let Value::Object(p) = &mut params {
            p.insert("arguments".to_owned(), Value::Object(arguments));
        }
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
        self.judge(&raw, true)
    }

    /// The idempotency key this call carries: a write dispatched under a claim carries
    /// [`IdempotencyKey::upstream`](purra_core::IdempotencyKey::upstream) of the claim key (the
    /// run's [`RunContext::idempotency_key`]), the same for every send of one intent; a read, or a
    /// write run without a claim, carries none.
    fn upstream_key(&self, run: &RunContext) -> Option<String> {
        if !self.write {
            return None;
        }
        run.idempotency_key.as_ref().map(|k| k.upstream())
    }

    /// Judges a result that came back: stale catalog, incomplete result (`check_complete`: a
    /// 2026-07-28 `tools/call` answer), limits, schema.
    fn judge(&self, raw: &RawValue, check_complete: bool) -> CallOutcome {
        if self.monitor.generation() != self.generation {
            // The catalog changed while the call was in flight: the result is discarded.
            return CallOutcome::AfterSend(codes::catalog_stale());
        }
        if check_complete && !is_complete(&self.conn, raw) {
            return CallOutcome::AfterSend(codes::result_unsupported());
        }
        match judge_result(raw.get(), &self.limits, self.output.as_ref()) {
            Ok(v) => CallOutcome::Success(v),
            Err(code) => CallOutcome::AfterSend(code),
        }
    }
}

impl CallTarget {
    /// Runs the remote tool as a task within `timeout`: creates it, polls `tasks/get` at the
    /// server's interval (clamped to 50 ms..5 s), and fetches the raw result once it ended. A
    /// task that asks for input (this path answers no questions) is unsupported; the timeout
    /// and the run's cancellation cancel the remote task. Every failure is an after-send code.
    async fn run_task(
        &self,
        arguments: serde_json::Map<String, Value>,
        timeout: Duration,
        run: &RunContext,
    ) -> Result<Box<RawValue>, ErrorCode> {
        let deadline = Instant::now() + timeout;
        let cancel = run.lease.cancellation();
        // The task outlives an abandoned call by a little at most: the store sweeps it then.
        let ttl = timeout + Duration::from_secs(30);
        let key = self.upstream_key(run);
        let created = tokio::select! {
            r = tokio::time::timeout_at(
                deadline,
                self.conn.call_tool_as_task_keyed(
                    &self.remote,
                    Value::Object(arguments),
                    Some(ttl),
                    key.as_deref(),
                ),
            ) => r,
            () = cancel.cancelled() => return Err(ErrorCode::RUN_CANCELLED),
        };
        let mut task = match created {
            Ok(Ok(task)) => task,
            Ok(Err(e)) => return Err(map_error(&e)),
            Err(_) => return Err(codes::timeout()),
        };
        let id = task.id.clone();
        loop {
            match task.status {
                TaskStatus::Working => {}
                TaskStatus::Completed | TaskStatus::Failed => break,
                TaskStatus::InputRequired => {
                    self.cancel_remote(&id);
                    return Err(codes::result_unsupported());
                }
                // The server ended the task without a result: the tool did not succeed.
                _ => return Err(codes::tool_error()),
            }
            let every = task
                .poll_interval_ms
                .map(Duration::from_millis)
                .unwrap_or(MAX_POLL)
                .clamp(MIN_POLL, MAX_POLL);
            let polled = tokio::select! {
                r = async {
                    tokio::time::sleep_until(deadline.min(Instant::now() + every)).await;
                    if Instant::now() >= deadline {
                        return None;
                    }
                    tokio::time::timeout_at(deadline, self.conn.get_task(&id)).await.ok()
                } => r,
                () = cancel.cancelled() => {
                    self.cancel_remote(&id);
                    return Err(ErrorCode::RUN_CANCELLED);
                }
            };
            task = match polled {
                Some(Ok(t)) if t.id == id => t,
                Some(Ok(_)) => return Err(codes::result_invalid()),
                Some(Err(e)) => return Err(map_error(&e)),
                None => {
                    self.cancel_remote(&id);
                    return Err(codes::timeout());
                }
            };
        }
        let options = RequestOptions::default()
            .timeout(deadline.saturating_duration_since(Instant::now()))
            .cancel_with(cancel.clone());
        self.conn
            .task_result_raw(&id, options)
            .await
            .map_err(|e| map_error(&e))
    }

    /// Cancels the remote task `id`, best effort and detached: the call has already failed.
    fn cancel_remote(&self, id: &str) {
        let conn = self.conn.clone();
        let id = id.to_owned();
        tokio::spawn(async move {
            let _ = tokio::time::timeout(CANCEL_WITHIN, conn.cancel_task(&id)).await;
        });
    }
}

/// The length of `value` serialized as compact JSON, counted without building the text.
pub(crate) fn encoded_len(value: &Value) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len() as u64;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => u64::MAX,
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
    // The usual result is read in one typed pass; anything else as I-JSON (not serde's
    // last-wins: a result that repeats a member name means two things), then taken apart.
    let plain = match plain_text_read(raw) {
        Some(plain) => Ok(plain),
        None => {
            let Some(value) = decode_i_json_value(raw, limits.max_result_bytes) else {
                return Err(codes::result_invalid());
            };
            plain_text_result(value)
        }
    };
    let (text, structured_content) = match plain {
        Ok(plain) => {
            if plain.text.len() as u64 > u64::from(limits.max_content_blocks) {
                return Err(codes::result_too_large());
            }
            if plain.is_error {
                return Err(codes::tool_error());
            }
            (plain.text, plain.structured)
        }
        Err(value) => {
            let Ok(result) = serde_json::from_value::<CallToolResult>(value) else {
                return Err(codes::result_invalid());
            };
            if result.content.len() as u64 > u64::from(limits.max_content_blocks) {
                return Err(codes::result_too_large());
            }
            if result.is_error() {
                return Err(codes::tool_error());
            }
            let mut text = Vec::with_capacity(result.content.len());
            for block in result.content {
                match block {
                    Content::Text(t) => text.push(Value::String(t.text)),
                    _ => return Err(codes::result_unsupported()),
                }
            }
            (text, result.structured_content)
        }
    };
    let structured = match (output, structured_content) {
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
    // Built in place: `json!` would serialize `text` into a copy of itself.
    let mut envelope = serde_json::Map::with_capacity(2);
    envelope.insert("text".to_owned(), Value::Array(text));
    envelope.insert("structured".to_owned(), structured);
    Ok(Value::Object(envelope))
}

/// A result whose every member is one [`CallToolResult`] reads the same way, and whose blocks
/// are all bare text blocks: what most tools answer, taken apart without decoding it again.
struct PlainText {
    /// Each block's text, as `Value::String`s.
    text: Vec<Value>,
    /// `structuredContent`, `None` when absent or `null` (as [`CallToolResult`] reads it).
    structured: Option<Value>,
    /// `isError: true`.
    is_error: bool,
}

/// The raw result as a [`PlainText`] in one typed pass, when it is exactly one (the members and
/// blocks [`plain_text_result`] accepts) and every part of it is I-JSON: serde reads the members
/// and blocks, refusing a repeated member (every member is declared, none other allowed), a lone
/// surrogate and anything that is not JSON; `structuredContent` and `_meta`, whose names and
/// numbers are the remote's, go through the bounded I-JSON decoder. `None` for anything else, which
/// the general way judges (and refuses, when it is not I-JSON): so this only ever agrees with it.
fn plain_text_read(raw: &str) -> Option<PlainText> {
    use std::borrow::Cow;

    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Plain<'a> {
        /// `null` is not a plain result's content: refused here (a `Vec` is never `null`).
        #[serde(default, borrow)]
        content: Vec<Block<'a>>,
        #[serde(rename = "structuredContent", default, borrow)]
        structured: Option<&'a RawValue>,
        #[serde(rename = "isError", default)]
        is_error: Option<bool>,
        #[serde(rename = "_meta", default, borrow)]
        meta: Option<&'a RawValue>,
    }
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Block<'a> {
        #[serde(rename = "type", borrow)]
        kind: Cow<'a, str>,
        #[serde(borrow)]
        text: Cow<'a, str>,
    }
    // One level below the document's root: the general way's depth bound, counted from there.
    fn i_json(part: &RawValue) -> Option<Value> {
        let limits = JsonLimits {
            max_bytes: part.get().len(),
            max_depth: MAX_DEPTH_CEILING - 1,
            max_nodes: part.get().len(),
        };
        parse_json(part.get().as_bytes(), &limits).ok()
    }
    let plain: Plain<'_> = serde_json::from_str(raw).ok()?;
    if plain.content.iter().any(|b| b.kind != "text") {
        return None;
    }
    if let Some(meta) = plain.meta {
        if !i_json(meta)?.is_object() {
            return None;
        }
    }
    let structured = match plain.structured {
        Some(s) => Some(i_json(s)?),
        None => None,
    };
    Some(PlainText {
        text: plain
            .content
            .into_iter()
            .map(|b| Value::String(b.text.into_owned()))
            .collect(),
        structured,
        is_error: plain.is_error == Some(true),
    })
}

/// `value` as a [`PlainText`] when it is one: members only `content` (bare text blocks:
/// exactly `type: "text"` and a string `text`), `structuredContent`, `isError` (a boolean or
/// `null`) and `_meta` (an object or `null`). Anything else comes back as it was, for
/// [`CallToolResult`]'s own decoding (which accepts exactly these the same way).
fn plain_text_result(value: Value) -> Result<PlainText, Value> {
    // Members are looked at in order rather than looked up (each lookup hashes its name): two
    // distinct members, each `type: "text"` or a string `text`, are exactly both.
    fn bare_text(block: &Value) -> bool {
        block.as_object().is_some_and(|o| {
            o.len() == 2
                && o.iter().all(|(k, v)| match k.as_str() {
                    "type" => v.as_str() == Some("text"),
                    "text" => v.is_string(),
                    _ => false,
                })
        })
    }
    let Value::Object(map) = value else {
        return Err(value);
    };
    let plain = map.iter().all(|(k, v)| match k.as_str() {
        "content" => v
            .as_array()
            .is_some_and(|blocks| blocks.iter().all(bare_text)),
        "structuredContent" => true,
        "isError" => v.is_boolean() || v.is_null(),
        "_meta" => v.is_object() || v.is_null(),
        _ => false,
    });
    if !plain {
        return Err(Value::Object(map));
    }
    let mut plain = PlainText {
        text: Vec::new(),
        structured: None,
        is_error: false,
    };
    for (k, v) in map {
        match (k.as_str(), v) {
            ("content", Value::Array(blocks)) => {
                plain.text = blocks
                    .into_iter()
                    .map(|block| match block {
                        Value::Object(o) => o
                            .into_iter()
                            .find_map(|(k, v)| (k == "text").then_some(v))
                            .unwrap_or_default(),
                        _ => Value::Null,
                    })
                    .collect();
            }
            ("structuredContent", v) if !v.is_null() => plain.structured = Some(v),
            ("isError", v) => plain.is_error = v.as_bool() == Some(true),
            _ => {}
        }
    }
    Ok(plain)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `judge_result` as it was before bare text results were taken apart directly: every
    /// result decoded as a `CallToolResult`.
    fn judged_as_decoded(
        raw: &str,
        limits: &Limits,
        output: Option<&CompiledSchema>,
    ) -> Result<Value, ErrorCode> {
        let Some(result) = crate::discovery::decode_i_json::<CallToolResult>(raw, u64::MAX) else {
            return Err(codes::result_invalid());
        };
        if result.content.len() as u64 > u64::from(limits.max_content_blocks) {
            return Err(codes::result_too_large());
        }
        if result.is_error() {
            return Err(codes::tool_error());
        }
        let mut text = Vec::new();
        for block in result.content {
            match block {
                Content::Text(t) => text.push(Value::String(t.text)),
                _ => return Err(codes::result_unsupported()),
            }
        }
        let structured = match (output, result.structured_content) {
            (Some(schema), Some(sc @ Value::Object(_))) => {
                schema.validate(&sc).map_err(|_| codes::result_invalid())?;
                sc
            }
            (Some(_), _) => return Err(codes::result_invalid()),
            (None, Some(sc @ Value::Object(_))) => sc,
            (None, Some(_)) => return Err(codes::result_invalid()),
            (None, None) => Value::Null,
        };
        Ok(json!({"text": text, "structured": structured}))
    }

    #[test]
    fn a_plain_text_result_is_judged_as_its_decoded_result_is() {
        let limits = Limits {
            max_content_blocks: 2,
            ..Limits::default()
        };
        let schema = CompiledSchema::compile(&json!({
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "required": ["n"]
        }))
        .unwrap();
        let results = [
            r#"{"content":[{"type":"text","text":"hi"}]}"#,
            r#"{"content":[]}"#,
            r#"{}"#,
            r#"{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}"#,
            r#"{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"},{"type":"text","text":"c"}]}"#,
            r#"{"content":[{"type":"text","text":"hi"}],"isError":true}"#,
            r#"{"content":[{"type":"text","text":"hi"}],"isError":false}"#,
            r#"{"content":[{"type":"text","text":"hi"}],"isError":null}"#,
            r#"{"content":[{"type":"text","text":"hi"}],"isError":"yes"}"#,
            r#"{"content":[{"type":"text","text":"hi"}],"structuredContent":{"n":1}}"#,
            r#"{"content":[{"type":"text","text":"hi"}],"structuredContent":{"n":"x"}}"#,
            r#"{"content":[{"type":"text","text":"hi"}],"structuredContent":null}"#,
            r#"{"content":[{"type":"text","text":"hi"}],"structuredContent":[1]}"#,
            r#"{"content":[{"type":"text","text":"hi"}],"_meta":{"k":1}}"#,
            r#"{"content":[{"type":"text","text":"hi"}],"_meta":null}"#,
            r#"{"content":[{"type":"text","text":"hi"}],"_meta":3}"#,
            r#"{"content":[{"type":"text","text":"hi"}],"extra":1}"#,
            r#"{"content":[{"type":"text","text":3}]}"#,
            r#"{"content":[{"type":"text"}]}"#,
            r#"{"content":[{"type":"text","text":"hi","annotations":{"priority":0.5}}]}"#,
            r#"{"content":[{"type":"image","data":"aGk=","mimeType":"image/png"}]}"#,
            r#"{"content":["hi"]}"#,
            r#"{"content":{"type":"text","text":"hi"}}"#,
            r#"{"content":null}"#,
            r#"[]"#,
            r#""text""#,
            // What the one typed pass reads, and what it must leave to the general way.
            r#" { "content" : [ { "text" : "hi" , "type" : "text" } ] } "#,
            r#"{"con\u0074ent":[{"type":"te\u0078t","text":"\u00e9\ud83d\ude00\n"}]}"#,
            r#"{"content":[{"type":"text","text":"\ud800"}]}"#,
            r#"{"content":[{"type":"text","text":"\udc00x"}]}"#,
            r#"{"content":[{"type":"text","text":"hi"}],"content":[]}"#,
            r#"{"content":[{"type":"text","text":"hi","text":"ho"}]}"#,
            r#"{"content":[{"type":"text","type":"text","text":"hi"}]}"#,
            r#"{"content":[{"type":"text","text":"hi"}],"isError":false,"isError":true}"#,
            r#"{"content":[],"structuredContent":{"n":1},"structuredContent":{"n":2}}"#,
            r#"{"content":[],"structuredContent":{"n":1,"n":2}}"#,
            r#"{"content":[],"structuredContent":{"n":9007199254740993}}"#,
            r#"{"content":[],"structuredContent":{"n":1e400}}"#,
            r#"{"content":[],"structuredContent":{"\ud800":1}}"#,
            r#"{"content":[],"_meta":{"k":1,"k":2}}"#,
            r#"{"content":[],"_meta":{"k":1},"_meta":{"k":1}}"#,
            r#"{"content":[],"_meta":[]}"#,
            r#"{"content":[],"_meta":{"k":"\udc00"}}"#,
            r#"{"content":[{"type":"text","text":"hi"}]} x"#,
            r#"{"content":[{"type":"text","text":"hi"}],}"#,
            r#"{"content":[{"type":"Text","text":"hi"}]}"#,
            r#"{"content":[{"type":"text","text":null}]}"#,
            r#"{"content":[{"type":"text","text":"hi"}],"isError":0}"#,
        ];
        let deep = |levels: usize| {
            format!(
                r#"{{"content":[],"structuredContent":{{"n":{}1{}}}}}"#,
                "[".repeat(levels),
                "]".repeat(levels)
            )
        };
        let deep = [
            deep(100),
            deep(126),
            deep(200),
            deep(510),
            deep(511),
            deep(600),
        ];
        for raw in results
            .iter()
            .copied()
            .chain(deep.iter().map(String::as_str))
        {
            for output in [None, Some(&schema)] {
                assert_eq!(
                    judge_result(raw, &limits, output),
                    judged_as_decoded(raw, &limits, output),
                    "{raw} with output schema {}",
                    output.is_some()
                );
            }
        }
        // The usual results are read in one pass; a refused or unusual one is left to the
        // general way.
        for raw in [
            r#"{"content":[{"type":"text","text":"hi"}]}"#,
            r#"{"content":[{"type":"text","text":"hi"}],"isError":false,"_meta":{"k":1}}"#,
            r#"{"content":[],"structuredContent":{"n":1}}"#,
        ] {
            assert!(plain_text_read(raw).is_some(), "{raw}");
        }
        for raw in [
            r#"{"content":[{"type":"text","text":"hi"}],"content":[]}"#,
            r#"{"content":[{"type":"text","text":"\ud800"}]}"#,
            r#"{"content":[],"structuredContent":{"n":1,"n":2}}"#,
            r#"{"content":null}"#,
            r#"{"content":[{"type":"image","data":"aGk=","mimeType":"image/png"}]}"#,
        ] {
            assert!(plain_text_read(raw).is_none(), "{raw}");
        }
        assert!(matches!(
            plain_text_result(json!({"content": [{"type": "text", "text": "hi"}]})),
            Ok(PlainText { ref text, structured: None, is_error: false }) if text == &[json!("hi")]
        ));
        assert!(plain_text_result(
            json!({"content": [{"type": "text", "text": "hi"}], "extra": 1})
        )
        .is_err());
    }

    #[test]
    fn encoded_len_is_the_length_of_the_compact_text() {
        for v in [
            json!({}),
            json!({"text": "é\"\\\n", "n": [1, 2.5, null, true], "deep": {"a": {"b": "c"}}}),
            json!("x".repeat(70_000)),
        ] {
            assert_eq!(
                encoded_len(&v),
                serde_json::to_vec(&v).unwrap().len() as u64
            );
        }
    }
}
