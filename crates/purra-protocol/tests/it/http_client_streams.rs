//! The Streamable HTTP client against hand-written servers: the session's standalone GET stream
//! is open before the client sends anything after `notifications/initialized`, so server
//! requests sent on it (as the TypeScript SDK's `server.request()` does) are not lost; and a body
//! answering a POST of notifications is not taken for messages.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use purra_protocol::{Client, ClientOptions, HttpClientOptions};
use serde_json::{json, Value};

/// A minimal MCP server: its GET stream takes 200 ms to open, and `probe` answers whether it is
/// open yet.
async fn mock(State(get_open): State<Arc<AtomicBool>>, req: Request) -> Response {
    match *req.method() {
        Method::GET => {
            tokio::time::sleep(Duration::from_millis(200)).await;
            get_open.store(true, Ordering::SeqCst);
            let body =
                Body::from_stream(futures_util::stream::pending::<Result<Bytes, Infallible>>());
            (
                [
                    (header::CONTENT_TYPE, "text/event-stream"),
                    (header::HeaderName::from_static("mcp-session-id"), "s1"),
                ],
                body,
            )
                .into_response()
        }
        Method::POST => {
            let body = axum::body::to_bytes(req.into_body(), 1 << 20)
                .await
                .expect("a body");
            let msg: Value = serde_json::from_slice(&body).expect("JSON");
            let Some(id) = msg.get("id").cloned() else {
                return StatusCode::ACCEPTED.into_response();
            };
            let result = match msg["method"].as_str() {
                Some("initialize") => json!({
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "mock", "version": "1"}
                }),
                Some("tools/list") => {
                    json!({"tools": [{"name": "probe", "inputSchema": {"type": "object"}}]})
                }
                Some("tools/call") => {
                    let text = if get_open.load(Ordering::SeqCst) {
                        "open"
                    } else {
                        "not open"
                    };
                    json!({"content": [{"type": "text", "text": text}]})
                }
                _ => json!({}),
            };
            let reply = json!({"jsonrpc": "2.0", "id": id, "result": result});
            (
                [
                    (header::CONTENT_TYPE, "application/json"),
                    (header::HeaderName::from_static("mcp-session-id"), "s1"),
                ],
                reply.to_string(),
            )
                .into_response()
        }
        _ => StatusCode::OK.into_response(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standalone_stream_is_open_before_the_first_request_after_initialized() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("an address");
    let app = axum::Router::new()
        .route("/mcp", axum::routing::any(mock))
        .with_state(Arc::new(AtomicBool::new(false)));
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });

    let conn = tokio::time::timeout(
        Duration::from_secs(10),
        Client::connect_http(
            &format!("http://{addr}/mcp"),
            HttpClientOptions::default(),
            ClientOptions::default(),
        ),
    )
    .await
    .expect("connects in time")
    .expect("connects");
    let r = conn.call_tool("probe", json!({})).await.expect("a result");
    assert_eq!(r.texts().collect::<Vec<_>>(), ["open"]);
    conn.close().await;
}

/// A server that answers every POST `200 {"jsonrpc":"2.0","id":<its id or null>,"result":{}}`,
/// notifications included (as the conformance suite's `initialize` mock does), and counts POSTs.
async fn echo_everything(State(posts): State<Arc<AtomicUsize>>, req: Request) -> Response {
    if req.method() != Method::POST {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    posts.fetch_add(1, Ordering::SeqCst);
    let body = axum::body::to_bytes(req.into_body(), 1 << 20)
        .await
        .expect("a body");
    let msg: Value = serde_json::from_slice(&body).expect("JSON");
    let result = if msg["method"] == "initialize" {
        json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "serverInfo": {"name": "mock", "version": "1"}
        })
    } else {
        json!({})
    };
    let mut reply = json!({"jsonrpc": "2.0", "result": result});
    if let Some(id) = msg.get("id") {
        reply["id"] = id.clone();
    }
    (
        [(header::CONTENT_TYPE, "application/json")],
        reply.to_string(),
    )
        .into_response()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_answering_a_notification_is_ignored() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("an address");
    let posts = Arc::new(AtomicUsize::new(0));
    let app = axum::Router::new()
        .route("/", axum::routing::any(echo_everything))
        .with_state(posts.clone());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });

    let conn = Client::connect_http(
        &format!("http://{addr}/"),
        HttpClientOptions::default(),
        ClientOptions::default(),
    )
    .await
    .expect("connects");
    tokio::time::sleep(Duration::from_millis(300)).await;
    // initialize and notifications/initialized; the `{"result":{}}` answering the notification
    // is no message, and must not be answered with an error (which this server would answer again).
    assert_eq!(posts.load(Ordering::SeqCst), 2);
    conn.close().await;
}
