//! The Streamable HTTP router through `tower::ServiceExt::oneshot`: up to eight requests built
//! from the input (method, path, headers, body; the session id and event id the server issued are
//! reused). Every request is answered without a server error, every JSON body is JSON-RPC
//! responses, every SSE event carries one JSON-RPC message.

use std::time::Duration;

use axum::body::Body;
use http::{Method, Request, Response};
use http_body_util::BodyExt;
use purra_protocol::__private::{decode_frame, Frame, Message, SseItem, SseParser};
use purra_protocol::{HttpServerConfig, StreamableHttpServer};
use tower::ServiceExt;

use crate::input::Input;

const VERSIONS: &[&str] = &[
    "2025-11-25",
    "2025-06-18",
    "2025-03-26",
    "2024-11-05",
    "1999-01-01",
];

/// Checks one input.
pub fn check(data: &[u8]) {
    let rt = crate::paused_runtime();
    rt.block_on(async {
        let http =
            StreamableHttpServer::new(crate::engine::test_server(), HttpServerConfig::default());
        let mut input = Input::new(data);
        let mut session: Option<String> = None;
        let mut event_id: Option<String> = None;
        for _ in 0..8 {
            if input.is_empty() {
                break;
            }
            let req = request(&mut input, session.as_deref(), event_id.as_deref());
            let resp = tokio::time::timeout(Duration::from_secs(120), http.clone().oneshot(req))
                .await
                .expect("every request is answered")
                .expect("the router is infallible");
            if let Some(id) = resp
                .headers()
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
            {
                session = Some(id.to_owned());
            }
            if let Some(id) = body(resp).await {
                event_id = Some(id);
            }
        }
        http.shutdown();
    });
}

/// One request: a choice byte for each part, then a length-prefixed body.
fn request(input: &mut Input, session: Option<&str>, event_id: Option<&str>) -> Request<Body> {
    let method = match input.byte() % 6 {
        0 | 1 => Method::POST,
        2 => Method::GET,
        3 => Method::DELETE,
        4 => Method::OPTIONS,
        _ => Method::PUT,
    };
    let shape = input.byte();
    let uri = if shape & 1 != 0 { "/other" } else { "/mcp" };
    let mut b = Request::builder().method(method).uri(uri);
    b = match shape >> 1 & 3 {
        0 => b.header("host", "localhost:3000"),
        1 => b.header("host", "evil.example"),
        2 => b,
        _ => b.header("host", "127.0.0.1"),
    };
    b = match shape >> 3 & 3 {
        0 => b.header("accept", "application/json, text/event-stream"),
        1 => b.header("accept", "application/json"),
        2 => b.header("accept", "text/event-stream"),
        _ => b,
    };
    b = match shape >> 5 & 3 {
        0 | 1 => b.header("content-type", "application/json"),
        2 => b.header("content-type", "text/plain"),
        _ => b,
    };
    let extra = input.byte();
    b = match extra & 3 {
        0 | 1 => match session {
            Some(s) => b.header("mcp-session-id", s),
            None => b,
        },
        2 => b.header("mcp-session-id", "not-a-session"),
        _ => b,
    };
    if extra & 4 != 0 {
        b = b.header(
            "mcp-protocol-version",
            VERSIONS[usize::from(extra >> 3) % VERSIONS.len()],
        );
    }
    if extra & 64 != 0 {
        b = b.header(
            "origin",
            if extra & 128 != 0 {
                "http://localhost:5173"
            } else {
                "https://evil.example"
            },
        );
    }
    if let Some(id) = event_id.filter(|_| extra & 32 != 0) {
        b = b.header("last-event-id", id);
    }
    let len = usize::from(input.u16() % 2048);
    let body = input.take(len).to_vec();
    b.body(Body::from(body)).expect("a valid request")
}

/// Reads a response's body (an open SSE stream until it idles for 30 virtual seconds) and checks
/// it; returns the last SSE event id.
async fn body(resp: Response<Body>) -> Option<String> {
    let status = resp.status();
    assert!(
        !status.is_server_error() || status.as_u16() == 503,
        "status {status}"
    );
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let mut body = resp.into_body();
    let mut bytes = Vec::new();
    let mut parser = SseParser::new(1 << 20);
    let mut last_id = None;
    let sse = content_type.starts_with("text/event-stream");
    for _ in 0..64 {
        let frame = match tokio::time::timeout(Duration::from_secs(30), body.frame()).await {
            Ok(Some(Ok(frame))) => frame,
            Ok(Some(Err(e))) => panic!("the body failed: {e}"),
            Ok(None) | Err(_) => break,
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if sse {
            for item in parser.feed(&data) {
                let SseItem::Event(event) = item else {
                    panic!("an event over 1 MiB")
                };
                if !event.data.is_empty() {
                    message(event.data.as_bytes());
                }
                last_id = event.id.or(last_id);
            }
        } else {
            bytes.extend_from_slice(&data);
        }
    }
    if content_type.starts_with("application/json") && !bytes.is_empty() {
        match decode_frame(&bytes) {
            Frame::Batch(items) => {
                for item in items {
                    assert!(
                        matches!(item, Ok(Message::Response { .. } | Message::Error { .. })),
                        "{}",
                        String::from_utf8_lossy(&bytes)
                    );
                }
            }
            Frame::Single(_) => message(&bytes),
        }
    }
    last_id
}

/// One JSON-RPC message the server sent.
fn message(bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    match decode_frame(bytes) {
        Frame::Single(Ok(Message::Error { error, .. })) => {
            assert!(
                !error.message.contains("panicked"),
                "a panic reached the client: {text}"
            );
        }
        Frame::Single(Ok(_)) => {}
        other => panic!("the server sent {text}: {other:?}"),
    }
}
