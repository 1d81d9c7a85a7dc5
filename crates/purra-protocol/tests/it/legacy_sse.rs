//! The HTTP+SSE transport of 2024-11-05 between purra's client and server over real sockets:
//! a session's round trips both ways (a tool call, a log notification, an elicitation the server
//! asks), the automatic fallback from Streamable HTTP to a legacy-only endpoint and a Streamable
//! HTTP endpoint never downgraded, and the bounds the Streamable HTTP endpoint keeps holding here
//! (Host, body size, content type, unknown and foreign sessions, the session limit, a stream's
//! end closing its session, shutdown); on the client side an endpoint on another origin and an
//! event over the bound.

use std::time::Duration;

use purra_protocol::http::reqwest;
use purra_protocol::http::{HttpTransport, LegacySse};
use purra_protocol::types::{ElicitParams, ElicitResult, LoggingLevel};
use purra_protocol::{
    Client, ClientOptions, Error, HandlerResult, HttpClientOptions, HttpServerConfig, RequestCtx,
    Server,
};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{http::serve_http, Size, Text};

fn legacy_server() -> Server {
    let server = Server::builder("legacy", "1").logging().build();
    server
        .tool(
            "echo",
            "echoes, logging first",
            |Text { text }, ctx: RequestCtx| async move {
                ctx.log(LoggingLevel::Info, None, json!("echoing")).await?;
                let session = ctx.http().and_then(|h| h.session_id()).map(str::len);
                HandlerResult::Ok(format!(
                    "{text} (session id of {} chars)",
                    session.unwrap_or(0)
                ))
            },
        )
        .unwrap();
    server
        .tool(
            "ask",
            "asks the user",
            |_: Size, ctx: RequestCtx| async move {
                let form = json!({"type": "object", "properties": {"name": {"type": "string"}}});
                let r = ctx
                    .elicit(ElicitParams::form(
                        "Name?",
                        form.as_object().cloned().unwrap(),
                    ))
                    .await?;
                HandlerResult::Ok(format!("hello {}", r.content.unwrap()["name"]))
            },
        )
        .unwrap();
    server
        .tool(
            "big",
            "returns `bytes` bytes",
            |Size { bytes }, _ctx: RequestCtx| async move { HandlerResult::Ok("x".repeat(bytes)) },
        )
        .unwrap();
    server
}

fn legacy_config() -> HttpServerConfig {
    HttpServerConfig {
        legacy_sse: Some(LegacySse::default()),
        ..HttpServerConfig::default()
    }
}

fn client_options() -> ClientOptions {
    ClientOptions::default()
        .request_timeout(Duration::from_secs(10))
        .on_elicitation(false, |_p: ElicitParams| async move {
            Ok(ElicitResult::accept(
                json!({"name": "Ada"}).as_object().cloned().unwrap(),
            ))
        })
}

/// The message of a refusal: the JSON-RPC error's message the endpoint answers with, or the
/// plain text of an acceptance.
fn message(body: String) -> String {
    match serde_json::from_str::<serde_json::Value>(&body) {
        Ok(v) => {
            assert_eq!(v["id"], serde_json::Value::Null, "{body}");
            assert_eq!(v["error"]["code"], json!(-32600), "{body}");
            v["error"]["message"].as_str().unwrap().to_owned()
        }
        Err(_) => body,
    }
}

/// Polls `f` until it holds, for at most 5 s.
async fn eventually(what: &str, f: impl Fn() -> bool) {
    for _ in 0..200 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{what} did not happen within 5 s");
}

#[tokio::test]
async fn a_session_over_http_sse_round_trips_both_ways() {
    let s = serve_http(legacy_server(), legacy_config()).await;
    let http = HttpClientOptions::default().transport(HttpTransport::Sse);
    let conn = Client::connect_http(&format!("{}/sse", s.base()), http, client_options())
        .await
        .expect("connects over HTTP+SSE");
    assert_eq!(s.http.legacy_session_count(), 1);
    assert_eq!(s.http.session_count(), 0);
    let logs = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = logs.clone();
    let _listening = conn.on_received("notifications/message", move |p| {
        seen.lock().unwrap().push(p["data"].clone());
    });
    let r = conn.call_tool("echo", json!({"text": "hi"})).await.unwrap();
    assert_eq!(
        r.texts().collect::<Vec<_>>(),
        ["hi (session id of 32 chars)"]
    );
    eventually("the log notification", || logs.lock().unwrap().len() == 1).await;
    assert_eq!(logs.lock().unwrap()[0], json!("echoing"));
    let r = conn.call_tool("ask", json!({"bytes": 0})).await.unwrap();
    assert_eq!(r.texts().collect::<Vec<_>>(), ["hello \"Ada\""]);
    // Closing the connection ends the stream, and with it the session.
    conn.close().await;
    eventually("the session's end", || s.http.legacy_session_count() == 0).await;
}

#[tokio::test]
async fn auto_falls_back_to_a_legacy_endpoint_and_never_downgrades_streamable_http() {
    let s = serve_http(legacy_server(), legacy_config()).await;
    // The SSE path answers the Streamable HTTP POST with 405: the client GETs the stream.
    let conn = Client::connect_http(
        &format!("{}/sse", s.base()),
        HttpClientOptions::default(),
        client_options(),
    )
    .await
    .expect("falls back");
    let r = conn
        .call_tool("echo", json!({"text": "old"}))
        .await
        .unwrap();
    assert_eq!(
        r.texts().collect::<Vec<_>>(),
        ["old (session id of 32 chars)"]
    );
    assert_eq!(
        (s.http.legacy_session_count(), s.http.session_count()),
        (1, 0)
    );
    conn.close().await;

    // The same server's Streamable HTTP endpoint is used as such.
    let conn = Client::connect_http(
        &format!("{}/mcp", s.base()),
        HttpClientOptions::default(),
        client_options(),
    )
    .await
    .expect("connects");
    conn.call_tool("echo", json!({"text": "new"}))
        .await
        .unwrap();
    eventually("the legacy session's end", || {
        s.http.legacy_session_count() == 0
    })
    .await;
    assert_eq!(s.http.session_count(), 1);

    // Without the legacy endpoints nothing is at /sse: the fallback's GET is refused too, and
    // both refusals show.
    let plain = serve_http(legacy_server(), HttpServerConfig::default()).await;
    let e = Client::connect_http(
        &format!("{}/sse", plain.base()),
        HttpClientOptions::default(),
        client_options(),
    )
    .await
    .expect_err("nothing speaks MCP at /sse");
    let Error::Http { status, body } = &e else {
        panic!("an HTTP status: {e}")
    };
    assert_eq!(
        (*status, body.as_str()),
        (404, " (and as an HTTP+SSE server: HTTP status 404: )")
    );
}

#[tokio::test]
async fn the_streamable_endpoints_bounds_hold_for_the_legacy_endpoints() {
    let s = serve_http(
        legacy_server(),
        HttpServerConfig {
            max_sessions: 2,
            max_body_bytes: 1024,
            ..legacy_config()
        },
    )
    .await;
    let client = reqwest::Client::new();
    let sse = format!("{}/sse", s.base());

    // Host first, as on the Streamable HTTP endpoint.
    let r = client
        .get(&sse)
        .header("host", "evil.example")
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(
        r.text().await.unwrap(),
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Forbidden: Host \"evil.example\" is not allowed"}}"#
    );
    let r = client
        .get(&sse)
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 406);

    // A stream: its first event names where to POST.
    let mut stream = client
        .get(&sse)
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let first = String::from_utf8(stream.chunk().await.unwrap().unwrap().to_vec()).unwrap();
    let endpoint = first
        .strip_prefix("event: endpoint\ndata: ")
        .and_then(|r| r.strip_suffix("\n\n"))
        .unwrap_or_else(|| panic!("an endpoint event: {first:?}"))
        .to_owned();
    assert!(endpoint.starts_with("/messages?sessionId="), "{endpoint}");
    let messages = format!("{}{endpoint}", s.base());
    let post = |url: String, ct: &'static str, body: Vec<u8>| {
        let client = client.clone();
        async move {
            let r = client
                .post(url)
                .header("content-type", ct)
                .body(body)
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), message(r.text().await.unwrap()))
        }
    };
    assert_eq!(
        post(messages.clone(), "text/plain", b"{}".to_vec()).await,
        (
            415,
            "Unsupported Media Type: send application/json".to_owned()
        )
    );
    assert_eq!(
        post(messages.clone(), "application/json", vec![b' '; 2048]).await,
        (413, "Payload Too Large: the limit is 1024 bytes".to_owned())
    );
    assert_eq!(
        post(
            format!("{}/messages", s.base()),
            "application/json",
            b"{}".to_vec()
        )
        .await,
        (
            400,
            "Bad Request: missing sessionId query parameter".to_owned()
        )
    );
    assert_eq!(
        post(
            format!("{}/messages?sessionId=00ff", s.base()),
            "application/json",
            b"{}".to_vec()
        )
        .await,
        (404, "Not Found: unknown or expired session".to_owned())
    );
    // Malformed JSON is accepted for the engine, which answers it on the stream.
    assert_eq!(
        post(messages.clone(), "application/json", b"{oops".to_vec()).await,
        (202, "Accepted".to_owned())
    );
    let answer = String::from_utf8(stream.chunk().await.unwrap().unwrap().to_vec()).unwrap();
    assert_eq!(
        answer,
        "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"Parse error: key must be a string at line 1 column 2\"}}\n\n"
    );

    // Two sessions fill the table: a third stream is refused.
    let second = client
        .get(&sse)
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(second.status(), 200);
    assert_eq!(s.http.legacy_session_count(), 2);
    let r = client
        .get(&sse)
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(
        (r.status().as_u16(), message(r.text().await.unwrap())),
        (503, "Service Unavailable: too many sessions".to_owned())
    );
    // A stream dropped by its client frees its place, and its endpoint is gone.
    drop(stream);
    eventually("the dropped stream's session to end", || {
        s.http.legacy_session_count() == 1
    })
    .await;
    assert_eq!(
        post(messages, "application/json", b"{}".to_vec()).await,
        (404, "Not Found: unknown or expired session".to_owned())
    );
    // Shutdown ends the remaining stream.
    s.http.shutdown();
    let mut second = second;
    let mut rest = Vec::new();
    while let Ok(Some(c)) = second.chunk().await {
        rest.extend_from_slice(&c);
    }
    assert!(rest.starts_with(b"event: endpoint\ndata: /messages?sessionId="));
    eventually("shutdown to close the session", || {
        s.http.legacy_session_count() == 0
    })
    .await;
}

/// A one-shot HTTP server that answers its first request with `response` (raw bytes) and keeps
/// the connection open.
async fn scripted(response: Vec<u8>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/sse", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut buf = vec![0u8; 4096];
        let _ = sock.read(&mut buf).await;
        sock.write_all(&response).await.unwrap();
        tokio::time::sleep(Duration::from_secs(30)).await;
    });
    url
}

fn sse_response(events: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\r\n{events}"
    )
    .into_bytes()
}

#[tokio::test]
async fn the_client_refuses_an_endpoint_on_another_origin_and_bounds_events() {
    let url = scripted(sse_response(
        "event: endpoint\ndata: http://elsewhere.example/messages?sessionId=1\n\n",
    ))
    .await;
    let e = purra_protocol::http::connect_sse(&url, HttpClientOptions::default())
        .await
        .expect_err("refused");
    assert_eq!(
        e.to_string(),
        "invalid response: the endpoint http://elsewhere.example/messages?sessionId=1 is not on the event stream's origin http://127.0.0.1:".to_owned()
            + url.trim_start_matches("http://127.0.0.1:").trim_end_matches("/sse")
    );

    // An event over the bound before the endpoint: refused, not buffered.
    let big = format!("event: hello\ndata: {}\n\n", "y".repeat(4096));
    let url = scripted(sse_response(&big)).await;
    let options = HttpClientOptions {
        max_frame_bytes: 1024,
        ..HttpClientOptions::default()
    };
    let e = purra_protocol::http::connect_sse(&url, options)
        .await
        .expect_err("refused");
    assert_eq!(
        e.to_string(),
        "invalid response: an event before the endpoint exceeded 1024 bytes"
    );

    // A server that is not one: no endpoint in time.
    let url = scripted(sse_response(": nothing here\n\n")).await;
    let options = HttpClientOptions {
        connect_timeout: Duration::from_millis(300),
        ..HttpClientOptions::default()
    };
    let e = purra_protocol::http::connect_sse(&url, options)
        .await
        .expect_err("refused");
    assert_eq!(
        e.to_string(),
        format!("transport failure: GET {url}: no endpoint event within 300ms")
    );
}

#[tokio::test]
async fn a_message_over_the_clients_bound_fails_its_request_and_the_session_goes_on() {
    let s = serve_http(legacy_server(), legacy_config()).await;
    let http = HttpClientOptions {
        max_frame_bytes: 8192,
        ..HttpClientOptions::default()
    }
    .transport(HttpTransport::Sse);
    let conn = Client::connect_http(&format!("{}/sse", s.base()), http, client_options())
        .await
        .unwrap();
    let e = conn
        .call_tool("big", json!({"bytes": 20_000}))
        .await
        .expect_err("too large");
    assert!(matches!(e, Error::ResponseTooLarge { .. }), "{e}");
    let r = conn.call_tool("big", json!({"bytes": 10})).await.unwrap();
    assert_eq!(r.texts().collect::<Vec<_>>(), ["xxxxxxxxxx"]);
}
