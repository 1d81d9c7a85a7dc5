//! What a request's span and its observer are told: the facts read from a request's params
//! (the tool or prompt it names, the W3C trace context in its `_meta`), the span's name, and
//! with the `otel` feature the OpenTelemetry parent of a span and the `traceparent` an
//! outbound request carries.
//!
//! Everything here runs only for a span that a subscriber enabled (or a server with a request
//! observer): with no subscriber, a request costs what it did before.

// Without `client` or `server` nothing makes a request span; the crate then only offers the types.
#![cfg_attr(not(any(feature = "client", feature = "server")), allow(dead_code))]

use serde::Deserialize;
use serde_json::value::RawValue;

/// One inbound request as a server's request observer sees it once it was answered
/// ([`ServerBuilder::observe_requests`](crate::ServerBuilder::observe_requests)): what a
/// metrics registry counts.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct RequestRecord<'a> {
    /// The method (`tools/call`, `initialize`, ...), as the caller wrote it: a metric's label
    /// should be [`method_label`]'s, not this text.
    pub method: &'a str,
    /// The tool (`tools/call`) or prompt (`prompts/get`) it named, when the server has one by
    /// that name; any other name is the caller's text and is left out (`None`).
    pub tool: Option<&'a str>,
    /// How it ended.
    pub outcome: RequestOutcome,
    /// From the moment it was read to the moment its answer was ready.
    pub duration: std::time::Duration,
}

/// How an inbound request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RequestOutcome {
    /// Answered with a result (for `tools/call`, one without `isError`).
    Ok,
    /// A `tools/call` answered with a result that says `isError: true`.
    ToolError,
    /// Answered with a JSON-RPC error.
    Error(crate::RpcErrorCode),
    /// Cancelled by the peer (or by the connection's end): no answer was sent.
    Cancelled,
    /// The handler panicked (answered -32603).
    Panicked,
}

impl RequestOutcome {
    /// Whether the request failed: a JSON-RPC error, a tool's error result or a panic (not a
    /// result, not a cancellation).
    pub fn is_failure(&self) -> bool {
        matches!(
            self,
            RequestOutcome::Error(_) | RequestOutcome::ToolError | RequestOutcome::Panicked
        )
    }

    /// A label without the error's code: `ok`, `tool_error`, `error`, `cancelled`, `panic`
    /// (a metric's label, whose values should be few).
    pub fn label(&self) -> &'static str {
        match self {
            RequestOutcome::Ok => "ok",
            RequestOutcome::ToolError => "tool_error",
            RequestOutcome::Error(_) => "error",
            RequestOutcome::Cancelled => "cancelled",
            RequestOutcome::Panicked => "panic",
        }
    }
}

/// `ok`, `tool error`, `error CODE`, `cancelled`, `panic`: what a request span's `outcome` says.
impl std::fmt::Display for RequestOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestOutcome::Error(code) => write!(f, "error {code}"),
            RequestOutcome::ToolError => f.write_str("tool error"),
            other => f.write_str(other.label()),
        }
    }
}

/// A server's request observer (see [`RequestRecord`]); it runs on the request's task, so it
/// must be quick (count, not wait).
pub type RequestObserver = std::sync::Arc<dyn Fn(&RequestRecord<'_>) + Send + Sync>;

/// The `_meta` keys of W3C trace context (the MCP specification reserves them unprefixed).
#[cfg(feature = "otel")]
pub(crate) const TRACEPARENT: &str = "traceparent";
/// See [`TRACEPARENT`].
#[cfg(feature = "otel")]
pub(crate) const TRACESTATE: &str = "tracestate";

/// Every request and notification method MCP defines (client's and server's), in
/// [`crate::types::methods`].
const KNOWN_METHODS: &[&str] = {
    use crate::types::methods::*;
    &[
        INITIALIZE,
        PING,
        TOOLS_LIST,
        TOOLS_CALL,
        RESOURCES_LIST,
        RESOURCES_TEMPLATES_LIST,
        RESOURCES_READ,
        RESOURCES_SUBSCRIBE,
        RESOURCES_UNSUBSCRIBE,
        PROMPTS_LIST,
        PROMPTS_GET,
        COMPLETION_COMPLETE,
        LOGGING_SET_LEVEL,
        SAMPLING_CREATE_MESSAGE,
        ELICITATION_CREATE,
        ROOTS_LIST,
        INITIALIZED,
        CANCELLED,
        PROGRESS,
        MESSAGE,
        RESOURCE_UPDATED,
        RESOURCES_LIST_CHANGED,
        TOOLS_LIST_CHANGED,
        PROMPTS_LIST_CHANGED,
        ROOTS_LIST_CHANGED,
        ELICITATION_COMPLETE,
        "tasks/get",
        "tasks/result",
        "tasks/list",
        "tasks/cancel",
        "tasks/update",
        "resources/directory/read",
        "subscriptions/listen",
        "notifications/subscriptions/acknowledged",
        "skills/list",
        "skills/get",
        "server/discover",
        "notifications/tasks/status",
    ]
};

/// `method` when MCP defines it, else `other`: what a metric label, a span's name and its
/// `method` field say of an inbound message, so that a caller's made-up method names never
/// become one series or one span name each.
pub fn method_label(method: &str) -> &'static str {
    KNOWN_METHODS
        .iter()
        .find(|m| **m == method)
        .copied()
        .unwrap_or("other")
}

/// What the params of one request say about it, borrowed from the frame.
#[derive(Deserialize, Default)]
pub(crate) struct Facts<'a> {
    /// `tools/call`'s tool, `prompts/get`'s prompt.
    #[serde(default, borrow)]
    pub name: Option<std::borrow::Cow<'a, str>>,
    #[cfg_attr(not(feature = "otel"), allow(dead_code))]
    #[serde(default, rename = "_meta", borrow)]
    pub meta: Option<TraceMeta<'a>>,
}

/// The trace context of a request's `_meta`.
#[derive(Deserialize, Default)]
pub(crate) struct TraceMeta<'a> {
    #[cfg_attr(not(feature = "otel"), allow(dead_code))]
    #[serde(default, borrow)]
    pub traceparent: Option<std::borrow::Cow<'a, str>>,
    #[cfg_attr(not(feature = "otel"), allow(dead_code))]
    #[serde(default, borrow)]
    pub tracestate: Option<std::borrow::Cow<'a, str>>,
}

impl<'a> Facts<'a> {
    /// Reads the facts of `params` (nothing from params that are not an object).
    pub(crate) fn read(params: Option<&'a RawValue>) -> Facts<'a> {
        params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or_default()
    }

    /// The tool or prompt the request names, for the methods that name one.
    pub(crate) fn target(&self, method: &str) -> Option<&str> {
        match method {
            "tools/call" | "prompts/get" => self.name.as_deref(),
            _ => None,
        }
    }
}

/// The span's name as OpenTelemetry's conventions for MCP write it: `METHOD TARGET` (the tool or
/// prompt), else the method. An inbound request's caller passes [`method_label`]'s method and a
/// target only when the server knows it (the caller's own names never make a span name).
pub(crate) fn span_name(method: &str, target: Option<&str>) -> String {
    match target {
        Some(t) => format!("{method} {t}"),
        None => method.to_owned(),
    }
}

/// Ends an inbound request's enabled span: its `outcome`, an error status unless it is `ok`,
/// and the `answered` event with the duration in microseconds.
pub(crate) fn answered(
    span: &tracing::Span,
    outcome: RequestOutcome,
    duration: std::time::Duration,
) {
    let text = outcome.to_string();
    span.record("outcome", text.as_str());
    if outcome.is_failure() {
        span.record("otel.status_code", "ERROR");
    }
    tracing::debug!(
        parent: span,
        outcome = text,
        duration_us = duration.as_micros() as u64,
        "answered"
    );
}

/// Whether `result` (a `tools/call` result) says `isError: true`.
pub(crate) fn is_tool_error(result: &str) -> bool {
    #[derive(Deserialize)]
    struct R {
        #[serde(default, rename = "isError")]
        is_error: bool,
    }
    serde_json::from_str::<R>(result).is_ok_and(|r| r.is_error)
}

#[cfg(feature = "otel")]
pub(crate) use otel::{inject, join_current, join_remote};

#[cfg(feature = "otel")]
mod otel {
    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
    };
    use opentelemetry::Context;
    use serde_json::value::RawValue;
    use tracing::Span;
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    use super::{TRACEPARENT, TRACESTATE};

    /// Makes `span` (an inbound request's) a child of the remote span `traceparent` names, or,
    /// without a valid one, the root of a trace of its own (not a child of its connection,
    /// which would put every request of a long connection in one trace).
    pub(crate) fn join_remote(span: &Span, traceparent: Option<&str>, tracestate: Option<&str>) {
        let cx = traceparent
            .and_then(|tp| remote(tp, tracestate))
            .map_or_else(Context::new, |sc| {
                Context::new().with_remote_span_context(sc)
            });
        let _ = span.set_parent(cx);
    }

    /// Makes `span` (an outbound request's) a child of the span the caller is in, whatever its
    /// connection: a gateway's upstream call joins the trace of the downstream call it serves.
    pub(crate) fn join_current(span: &Span) {
        let _ = span.set_parent(Span::current().context());
    }

    /// `params` with the trace context of `span` in its `_meta` (`traceparent`, and
    /// `tracestate` when there is one), when the span belongs to a sampled-or-not valid
    /// OpenTelemetry span; else `params` unchanged.
    pub(crate) fn inject(
        span: &Span,
        params: Option<Box<RawValue>>,
    ) -> Result<Option<Box<RawValue>>, crate::Error> {
        let cx = span.context();
        let otel = cx.span();
        let sc = otel.span_context();
        if !sc.is_valid() {
            return Ok(params);
        }
        let traceparent = format!(
            "00-{}-{}-{:02x}",
            sc.trace_id(),
            sc.span_id(),
            sc.trace_flags().to_u8()
        );
        let tracestate = sc.trace_state().header();
        let mut value: serde_json::Value = match params {
            Some(p) => {
                serde_json::from_str(p.get()).map_err(|e| crate::Error::Protocol(e.to_string()))?
            }
            None => serde_json::json!({}),
        };
        let Some(obj) = value.as_object_mut() else {
            return Ok(Some(crate::jsonrpc::to_raw(&value)?));
        };
        let meta = obj.entry("_meta").or_insert_with(|| serde_json::json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(TRACEPARENT.into(), traceparent.into());
            if !tracestate.is_empty() {
                meta.insert(TRACESTATE.into(), tracestate.into());
            }
        }
        Ok(Some(crate::jsonrpc::to_raw(&value)?))
    }

    /// The remote span a W3C `traceparent` (version 00, or a later version read as 00) names;
    /// `None` when it is malformed or names the invalid all-zero trace or span.
    fn remote(traceparent: &str, tracestate: Option<&str>) -> Option<SpanContext> {
        let mut parts = traceparent.trim().split('-');
        let version = parts.next()?;
        let trace = parts.next()?;
        let span = parts.next()?;
        let flags = parts.next()?;
        let hex = |s: &str, len: usize| {
            s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        };
        if !hex(version, 2)
            || version == "ff"
            || !hex(trace, 32)
            || !hex(span, 16)
            || !hex(flags, 2)
        {
            return None;
        }
        // Version 00 has exactly four parts; a later version may add more.
        if version == "00" && parts.next().is_some() {
            return None;
        }
        let trace = TraceId::from_hex(trace).ok()?;
        let span = SpanId::from_hex(span).ok()?;
        if trace == TraceId::INVALID || span == SpanId::INVALID {
            return None;
        }
        let flags = TraceFlags::new(u8::from_str_radix(flags, 16).ok()? & 1);
        let state = tracestate
            .and_then(|s| s.parse::<TraceState>().ok())
            .unwrap_or_default();
        Some(SpanContext::new(trace, span, flags, true, state))
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn traceparent_is_read_as_w3c_trace_context_writes_it() {
            let sc = remote(
                "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01",
                Some("congo=t61rcWkgMzE"),
            )
            .expect("valid");
            assert_eq!(
                sc.trace_id().to_string(),
                "0af7651916cd43dd8448eb211c80319c"
            );
            assert_eq!(sc.span_id().to_string(), "00f067aa0ba902b7");
            assert!(sc.is_sampled());
            assert!(sc.is_remote());
            assert_eq!(sc.trace_state().header(), "congo=t61rcWkgMzE");
            let unsampled = remote(
                "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-00",
                None,
            )
            .expect("valid");
            assert!(!unsampled.is_sampled());
            // A later version may carry more parts; 00 may not.
            assert!(remote(
                "01-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01-x",
                None
            )
            .is_some());
            for bad in [
                "",
                "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7",
                "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01-x",
                "ff-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01",
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
                "00-0AF7651916CD43DD8448EB211C80319C-00f067aa0ba902b7-01",
                "00-0af7651916cd43dd8448eb211c80319-00f067aa0ba902b7-01",
                "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-1",
            ] {
                assert!(remote(bad, None).is_none(), "{bad:?}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_name_the_target_and_trace_context() {
        let raw = RawValue::from_string(
            r#"{"name":"add","arguments":{"a":1},"_meta":{"traceparent":"00-a-b-01","progressToken":3}}"#
                .to_owned(),
        )
        .unwrap();
        let facts = Facts::read(Some(&raw));
        assert_eq!(facts.target("tools/call"), Some("add"));
        assert_eq!(facts.target("resources/read"), None);
        assert_eq!(
            facts.meta.and_then(|m| m.traceparent).as_deref(),
            Some("00-a-b-01")
        );
        assert_eq!(span_name("tools/call", Some("add")), "tools/call add");
        assert_eq!(span_name("tools/list", None), "tools/list");
        assert_eq!(method_label("tools/call"), "tools/call");
        assert_eq!(
            method_label("notifications/initialized"),
            "notifications/initialized"
        );
        assert_eq!(method_label("tools/call x"), "other");
        assert_eq!(method_label(&"m".repeat(4096)), "other");
        let err = RawValue::from_string(r#"{"content":[],"isError":true}"#.to_owned()).unwrap();
        assert!(is_tool_error(err.get()));
        let ok = RawValue::from_string(r#"{"content":[]}"#.to_owned()).unwrap();
        assert!(!is_tool_error(ok.get()));
        assert!(Facts::read(None).name.is_none());
    }
}
