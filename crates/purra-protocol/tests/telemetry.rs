//! What a server tells its request observer (`ServerBuilder::observe_requests`) and how many
//! sessions it counts open. (Trace context in `_meta`, the `otel` feature, is proved end to end
//! by purra-cli's `tests/telemetry.rs`, with a real exporter and receiver.)

use std::sync::{Arc, Mutex};

use purra_protocol::types::CallToolResult;
use purra_protocol::{
    memory, Client, ClientOptions, HandlerResult, RequestCtx, RequestOutcome, RpcErrorCode, Server,
};
use serde_json::json;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Nothing {}

/// What the observer heard: method, tool, outcome.
type Heard = Arc<Mutex<Vec<(String, Option<String>, RequestOutcome)>>>;

fn server(seen: Heard) -> Server {
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
    let seen = Arc::new(Mutex::new(Vec::new()));
    let server = server(seen.clone());
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
            &(
                "tools/call".to_owned(),
                Some("missing".to_owned()),
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
