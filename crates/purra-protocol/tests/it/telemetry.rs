//! What a server tells its request observer (`ServerBuilder::observe_requests`) and its request
//! spans, and how many sessions it counts open. (Trace context in `_meta`, the `otel` feature, is proved end to end
//! by purra-cli's `tests/telemetry.rs`, with a real exporter and receiver.)

use std::sync::{Arc, Mutex};

use purra_protocol::types::CallToolResult;
use purra_protocol::{
    memory, Client, ClientOptions, HandlerResult, RequestCtx, RequestOutcome, RpcErrorCode, Server,
};
use serde_json::json;

use crate::support::{self, Nothing};

/// What the observer heard: method, tool, outcome.
type Heard = Arc<Mutex<Vec<(String, Option<String>, RequestOutcome)>>>;

fn observed_server(seen: Heard) -> Server {
    let server = Server::builder("observed", "1")
        .observe_requests(move |r| {
            seen.lock()
                .unwrap()
                .push((r.method.to_owned(), r.tool.map(str::to_owned), r.outcome));
        })
        .build();
    server
        .tool("fine", "Answers", |_: Nothing, _ctx: RequestCtx| async {
            HandlerResult::Ok("ok".to_owned())
        })
        .unwrap();
    server
        .tool("broken", "Fails", |_: Nothing, _ctx: RequestCtx| async {
            HandlerResult::<CallToolResult>::Ok(CallToolResult::error("no"))
        })
        .unwrap();
    server
}

#[tokio::test]
async fn the_observer_hears_every_request_with_its_tool_and_outcome() {
    let _one_at_a_time = ONE_AT_A_TIME.lock().await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let server = observed_server(seen.clone());
    assert_eq!(server.open_sessions(), 0);
    let (a, b) = memory::pair();
    tokio::spawn({
        let server = server.clone();
        async move { server.serve(b).await }
    });
    let conn = Client::connect(a, ClientOptions::default()).await.unwrap();
    assert_eq!(server.open_sessions(), 1);
    conn.call_tool("fine", json!({})).await.unwrap();
    conn.call_tool("broken", json!({})).await.unwrap();
    let unknown = conn.call_tool("missing", json!({})).await;
    assert!(unknown.is_err(), "{unknown:?}");
    conn.close().await;
    let seen = seen.lock().unwrap().clone();
    let calls: Vec<_> = seen.iter().filter(|(m, ..)| m == "tools/call").collect();
    assert_eq!(
        calls,
        [
            &(
                "tools/call".to_owned(),
                Some("fine".to_owned()),
                RequestOutcome::Ok
            ),
            &(
                "tools/call".to_owned(),
                Some("broken".to_owned()),
                RequestOutcome::ToolError
            ),
            // A name the server does not have is the caller's text: left out.
            &(
                "tools/call".to_owned(),
                None,
                RequestOutcome::Error(RpcErrorCode::INVALID_PARAMS)
            ),
        ]
    );
    // The handshake and the catalog prefetch are observed too, with no tool.
    assert_eq!(
        seen[0],
        ("initialize".to_owned(), None, RequestOutcome::Ok),
        "{seen:?}"
    );
    assert!(seen
        .iter()
        .any(|(m, t, o)| m == "tools/list" && t.is_none() && *o == RequestOutcome::Ok));
    assert_eq!(RequestOutcome::ToolError.label(), "tool_error");
    assert_eq!(
        RequestOutcome::Error(RpcErrorCode::INVALID_PARAMS).to_string(),
        "error -32602"
    );
}

/// Every field value each span was created or recorded with: the span's creation number (span
/// ids are reused once a span closes, so they cannot tell two spans apart), field name, value.
#[derive(Clone, Default)]
struct SpanFields(
    Arc<Mutex<Vec<(u64, String, String)>>>,
    Arc<std::sync::atomic::AtomicU64>,
);

/// The tests of this file one at a time: a subscriber set for one test's thread
/// (`set_default`) while the other test's thread creates the same callsites made the recorded
/// spans depend on which thread registered a callsite first.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A span's creation number, kept in its extensions.
struct Seq(u64);

/// Records the fields of one span into [`SpanFields`].
struct Visitor(SpanFields, u64);

impl tracing::field::Visit for Visitor {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        let mut all = self.0 .0.lock().unwrap();
        all.push((self.1, field.name().to_owned(), value.to_owned()));
    }
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        let mut all = self.0 .0.lock().unwrap();
        all.push((self.1, field.name().to_owned(), format!("{value:?}")));
    }
}

impl<S> tracing_subscriber::Layer<S> for SpanFields
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let n = self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(Seq(n));
        }
        attrs.record(&mut Visitor(self.clone(), n));
    }
    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let Some(n) = ctx
            .span(id)
            .and_then(|span| span.extensions().get::<Seq>().map(|s| s.0))
        else {
            return;
        };
        values.record(&mut Visitor(self.clone(), n));
    }
}

/// Finding 1 of the second security review: an inbound request span's name (`otel.name`),
/// `method` and `tool` carry only a method MCP defines (else `other`) and a tool the server has:
/// a caller's made-up tool and method names appear in none of the server's span fields.
#[tokio::test]
async fn finding_1_span_names_carry_only_known_methods_and_tools() {
    use tracing_subscriber::layer::SubscriberExt;
    // Alone in a child process: no other test registers the same callsites meanwhile.
    if !support::alone(
        module_path!(),
        "finding_1_span_names_carry_only_known_methods_and_tools",
    ) {
        return;
    }
    let _one_at_a_time = ONE_AT_A_TIME.lock().await;
    let fields = SpanFields::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(fields.clone()));
    let server = observed_server(Arc::new(Mutex::new(Vec::new())));
    let (a, b) = memory::pair();
    tokio::spawn({
        let server = server.clone();
        async move { server.serve(b).await }
    });
    let conn = Client::connect(a, ClientOptions::default()).await.unwrap();
    conn.call_tool("fine", json!({})).await.unwrap();
    let call = json!({"name": "made-up-tool-7f3a", "arguments": {}});
    conn.request_raw("tools/call", call, Default::default())
        .await
        .expect_err("unknown tool");
    conn.request_raw("made-up/method-7f3a", json!({}), Default::default())
        .await
        .expect_err("unknown method");
    conn.close().await;
    let all = fields.0.lock().unwrap().clone();
    // The server's request spans: `request` spans with `dir = in`.
    let inbound: std::collections::BTreeSet<u64> = all
        .iter()
        .filter(|(_, k, v)| k == "dir" && v == "in")
        .map(|(id, ..)| *id)
        .collect();
    let of = |field: &str| -> Vec<String> {
        all.iter()
            .filter(|(id, k, _)| inbound.contains(id) && k == field)
            .map(|(_, _, v)| v.clone())
            .collect()
    };
    assert_eq!(
        of("otel.name"),
        [
            "initialize",
            "tools/list",
            "tools/call fine",
            "tools/call",
            "other"
        ]
    );
    assert_eq!(
        of("method"),
        [
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/call",
            "tools/call",
            "other"
        ]
    );
    assert_eq!(of("tool"), ["fine"]);
    // The client's own outbound spans name what it chose to send.
    assert!(all
        .iter()
        .any(|(id, k, v)| !inbound.contains(id) && k == "otel.name" && v == "made-up/method-7f3a"));
}
