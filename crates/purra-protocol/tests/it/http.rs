//! Streamable HTTP over real sockets: the server's status codes and header rules asserted on raw
//! HTTP, stream resumption without loss or duplication, stateless and JSON modes, and the
//! client's error kinds, re-initialization and headers.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use purra_protocol::types::*;
use purra_protocol::{
    Client, ClientOptions, Error, HandlerResult, HttpClientOptions, HttpServerConfig, RequestCtx,
    RequestOptions, Server, StreamableHttpServer,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::support::{
    http::{post, serve_http},
    Nothing, INIT,
};

#[derive(Deserialize, JsonSchema)]
struct Repeat {
    n: u32,
}

fn http_test_server() -> Server {
    let server = Server::builder("http-test", "1").logging().build();
    server
        .tool(
            "echo_headers",
            "says hi",
            |_: Nothing, _c: RequestCtx| async move { HandlerResult::Ok("hi") },
        )
        .unwrap();
    server
        .tool(
            "chatty",
            "logs n messages, 30 ms apart",
            |a: Repeat, c: RequestCtx| async move {
                for i in 1..=a.n {
                    c.log(LoggingLevel::Info, None, json!(format!("m{i}")))
                        .await?;
                    tokio::time::sleep(Duration::from_millis(30)).await;
                }
                HandlerResult::Ok("done")
            },
        )
        .unwrap();
    server
        .tool(
            "hang_up",
            "closes its stream, then answers",
            |_: Nothing, c: RequestCtx| async move {
                c.log(LoggingLevel::Info, None, json!("before")).await?;
                tokio::time::sleep(Duration::from_millis(50)).await;
                assert!(c.close_sse_stream());
                c.log(LoggingLevel::Info, None, json!("after")).await?;
                tokio::time::sleep(Duration::from_millis(100)).await;
                HandlerResult::Ok("answered after the hang-up")
            },
        )
        .unwrap();
    server
}

/// Initializes a session; returns its id.
async fn initialize(url: &str) -> String {
    let resp = post_at_2025(url, None, INIT).await;
    assert_eq!(resp.status(), 200);
    let id = resp.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(id.len(), 32, "128 random bits in hex: {id}");
    let body = resp.text().await.unwrap();
    // 2025-11-25: a priming event (an id to resume from, the retry hint, empty data) comes first.
    assert!(
        body.starts_with("id: s1e0\nretry: 1000\ndata: \n\nid: s1e1\ndata: {"),
        "{body}"
    );
    assert!(body.contains(r#""protocolVersion":"2025-11-25""#), "{body}");
    let resp = post_at_2025(
        url,
        Some(&id),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .await;
    assert_eq!(resp.status(), 202);
    id
}

/// Reads SSE data lines (with their ids) until `until` matches a data line or the stream ends.
async fn read_events(
    resp: &mut reqwest::Response,
    until: impl Fn(&str) -> bool,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut buf = String::new();
    let mut id = String::new();
    while let Ok(Some(chunk)) = tokio::time::timeout(Duration::from_secs(5), resp.chunk())
        .await
        .unwrap()
    {
        buf.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buf.find("\n\n") {
            let event: String = buf.drain(..end + 2).collect();
            for line in event.lines() {
                if let Some(v) = line.strip_prefix("id: ") {
                    id = v.to_owned();
                }
                if let Some(d) = line.strip_prefix("data: ") {
                    if !d.is_empty() {
                        out.push((id.clone(), d.to_owned()));
                        if until(d) {
                            return out;
                        }
                    }
                }
            }
        }
    }
    out
}

/// POSTs `body`; with `session`, the session id and the 2025-11-25 version header.
async fn post_at_2025(url: &str, session: Option<&str>, body: &str) -> reqwest::Response {
    post(url, session, session.map(|_| "2025-11-25"), body).await
}

#[tokio::test]
async fn session_rules_answer_with_the_specified_statuses() {
    let srv = serve_http(http_test_server(), HttpServerConfig::default()).await;
    let ping = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
    // No session id: 400. Unknown session: 404.
    let resp = post_at_2025(&srv.url, None, ping).await;
    assert_eq!(resp.status(), 400);
    assert_eq!(
        resp.text().await.unwrap(),
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Bad Request: missing Mcp-Session-Id header"}}"#
    );
    let resp = post_at_2025(&srv.url, Some("0123456789abcdef0123456789abcdef"), ping).await;
    assert_eq!(resp.status(), 404);
    let id = initialize(&srv.url).await;
    let mut resp = post_at_2025(&srv.url, Some(&id), ping).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let events = read_events(&mut resp, |d| d.contains(r#""id":2"#)).await;
    assert_eq!(
        events.last().unwrap().1,
        r#"{"jsonrpc":"2.0","id":2,"result":{}}"#
    );
    // DELETE ends the session; it is unknown afterwards.
    let resp = reqwest::Client::new()
        .delete(&srv.url)
        .header("mcp-session-id", &id)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(post_at_2025(&srv.url, Some(&id), ping).await.status(), 404);
    assert_eq!(srv.http.session_count(), 0);
}

#[tokio::test]
async fn header_rules() {
    let srv = serve_http(
        http_test_server(),
        HttpServerConfig {
            max_body_bytes: 1024,
            ..HttpServerConfig::default()
        },
    )
    .await;
    let id = initialize(&srv.url).await;
    let ping = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
    let send = |version: Option<&'static str>,
                accept: &'static str,
                origin: Option<&'static str>,
                host: Option<&'static str>,
                body: String| {
        let mut rb = reqwest::Client::new()
            .post(&srv.url)
            .header("content-type", "application/json")
            .header("accept", accept)
            .header("mcp-session-id", &id)
            .body(body);
        if let Some(v) = version {
            rb = rb.header("mcp-protocol-version", v);
        }
        if let Some(o) = origin {
            rb = rb.header("origin", o);
        }
        if let Some(h) = host {
            rb = rb.header("host", h);
        }
        rb.send()
    };
    let accept = "application/json, text/event-stream";
    let r = send(Some("1999-01-01"), accept, None, None, ping.into())
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(
        r.text().await.unwrap(),
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Bad Request: unsupported MCP-Protocol-Version \"1999-01-01\""}}"#
    );
    // Absent header: the client is taken to speak 2025-03-26, which is fine.
    assert_eq!(
        send(None, accept, None, None, ping.into())
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        send(
            Some("2025-11-25"),
            "application/json",
            None,
            None,
            ping.into()
        )
        .await
        .unwrap()
        .status(),
        406
    );
    let r = send(
        Some("2025-11-25"),
        accept,
        Some("http://evil.example.com"),
        None,
        ping.into(),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(
        r.text().await.unwrap(),
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Forbidden: Origin \"http://evil.example.com\" is not allowed"}}"#
    );
    let r = send(
        Some("2025-11-25"),
        accept,
        None,
        Some("evil.example.com"),
        ping.into(),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(
        send(
            Some("2025-11-25"),
            accept,
            Some("http://localhost:1234"),
            Some("localhost:1234"),
            ping.into()
        )
        .await
        .unwrap()
        .status(),
        200
    );
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(2000)
    );
    let r = send(Some("2025-11-25"), accept, None, None, big)
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    assert_eq!(
        r.text().await.unwrap(),
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Payload Too Large: the limit is 1024 bytes"}}"#
    );
    // Notifications and responses are accepted with 202 and no body.
    let r = send(
        Some("2025-11-25"),
        accept,
        None,
        None,
        r#"{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}"#.into(),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 202);
    assert_eq!(r.text().await.unwrap(), "");
    let r = reqwest::Client::new().put(&srv.url).send().await.unwrap();
    assert_eq!(r.status(), 405);
}

#[tokio::test]
async fn a_dropped_stream_resumes_without_loss_or_duplication() {
    let srv = serve_http(http_test_server(), HttpServerConfig::default()).await;
    let id = initialize(&srv.url).await;
    let mut resp = post_at_2025(
        &srv.url,
        Some(&id),
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"chatty","arguments":{"n":10}}}"#,
    )
    .await;
    // Take the first three messages, then drop the connection mid-call.
    let first = read_events(&mut resp, |d| d.contains(r#""data":"m3""#)).await;
    drop(resp);
    assert_eq!(first.len(), 3);
    let last_id = first.last().unwrap().0.clone();
    tokio::time::sleep(Duration::from_millis(120)).await;
    let mut resumed = reqwest::Client::new()
        .get(&srv.url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &id)
        .header("mcp-protocol-version", "2025-11-25")
        .header("last-event-id", &last_id)
        .send()
        .await
        .unwrap();
    assert_eq!(resumed.status(), 200);
    let rest = read_events(&mut resumed, |d| d.contains(r#""id":7"#)).await;
    let mut all: Vec<String> = first
        .iter()
        .chain(rest.iter())
        .map(|e| e.1.clone())
        .collect();
    let result = all.pop().unwrap();
    let want: Vec<String> = (1..=10)
        .map(|i| format!(r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"level":"info","data":"m{i}"}}}}"#))
        .collect();
    assert_eq!(all, want);
    assert_eq!(
        result,
        r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"done"}]}}"#
    );
    let ids: Vec<&String> = first.iter().chain(rest.iter()).map(|e| &e.0).collect();
    let mut unique = ids.clone();
    unique.dedup();
    assert_eq!(ids.len(), unique.len(), "duplicate event ids: {ids:?}");
}

#[tokio::test]
async fn the_client_resumes_a_stream_the_server_closed() {
    let srv = serve_http(
        http_test_server(),
        HttpServerConfig {
            sse_retry_ms: 100,
            ..HttpServerConfig::default()
        },
    )
    .await;
    let conn = Client::connect_http(
        &srv.url,
        HttpClientOptions::default(),
        ClientOptions::default(),
    )
    .await
    .unwrap();
    let logs = Arc::new(Mutex::new(Vec::new()));
    let sink = logs.clone();
    conn.on(methods::MESSAGE, move |p| {
        sink.lock()
            .unwrap()
            .push(p["data"].as_str().unwrap_or_default().to_owned())
    });
    let r = conn.call_tool("hang_up", json!({})).await.unwrap();
    assert_eq!(
        r.texts().collect::<Vec<_>>(),
        ["answered after the hang-up"]
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(*logs.lock().unwrap(), ["before", "after"]);
    conn.close().await;
}

#[tokio::test]
async fn stateless_and_json_modes() {
    let srv = serve_http(
        http_test_server(),
        HttpServerConfig {
            stateless: true,
            json_response: true,
            ..HttpServerConfig::default()
        },
    )
    .await;
    // No initialize, no session: a request is served on its own, as JSON.
    let resp = reqwest::Client::new()
        .post(&srv.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .body(r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo_headers","arguments":{}}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.headers().get("mcp-session-id").is_none());
    assert_eq!(resp.headers()["content-type"], "application/json");
    assert_eq!(
        resp.text().await.unwrap(),
        r#"{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"hi"}]}}"#
    );
    let resp = reqwest::Client::new()
        .get(&srv.url)
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 405);
    assert_eq!(srv.http.session_count(), 0);
    // purra's client works against it too (the GET stream's 405 is tolerated).
    let conn = Client::connect_http(
        &srv.url,
        HttpClientOptions::default(),
        ClientOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(
        conn.call_tool("echo_headers", json!({}))
            .await
            .unwrap()
            .texts()
            .collect::<Vec<_>>(),
        ["hi"]
    );
    conn.close().await;
}

#[tokio::test]
async fn the_client_reinitializes_after_its_session_expires() {
    let srv = serve_http(
        http_test_server(),
        HttpServerConfig {
            session_idle_timeout: Duration::from_millis(200),
            ..HttpServerConfig::default()
        },
    )
    .await;
    let http = HttpClientOptions {
        open_get_stream: false,
        ..HttpClientOptions::default()
    };
    let conn = Client::connect_http(&srv.url, http, ClientOptions::default())
        .await
        .unwrap();
    assert_eq!(srv.http.session_count(), 1);
    tokio::time::sleep(Duration::from_millis(400)).await;
    srv.http.sweep_idle_sessions();
    assert_eq!(srv.http.session_count(), 0);
    let changed = Arc::new(Mutex::new(0));
    let sink = changed.clone();
    conn.on_received(methods::TOOLS_LIST_CHANGED, move |_| {
        *sink.lock().unwrap() += 1
    });
    // The POST meets 404; the transport re-initializes on a new session and retries.
    conn.ping().await.unwrap();
    assert_eq!(srv.http.session_count(), 1);
    // The new session's lists may differ: the client is told, so catalogs are refetched and
    // authorizations made against the old lists go stale.
    for _ in 0..50 {
        if *changed.lock().unwrap() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(*changed.lock().unwrap(), 1);
    conn.close().await;
}

#[tokio::test]
async fn client_error_kinds_are_distinct() {
    // Nothing listens: a connection failure.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("http://{}/mcp", listener.local_addr().unwrap());
    drop(listener);
    let err = Client::connect_http(
        &dead,
        HttpClientOptions::default(),
        ClientOptions::default(),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, Error::Transport(ref why) if why.starts_with("POST http://127.0.0.1:")),
        "{err:?}"
    );
    // An error status, and a response that is not MCP.
    let app = axum::Router::new()
        .route(
            "/status",
            axum::routing::post(|| async { (axum::http::StatusCode::UNAUTHORIZED, "who are you") }),
        )
        .route(
            "/html",
            axum::routing::post(|| async { ([("content-type", "text/html")], "<html></html>") }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let err = Client::connect_http(
        &format!("{base}/status"),
        HttpClientOptions::default(),
        ClientOptions::default(),
    )
    .await
    .unwrap_err();
    assert_eq!(
        err,
        Error::Http {
            status: 401,
            body: "who are you".into()
        }
    );
    let err = Client::connect_http(
        &format!("{base}/html"),
        HttpClientOptions::default(),
        ClientOptions::default(),
    )
    .await
    .unwrap_err();
    assert_eq!(
        err,
        Error::InvalidResponse("unexpected content type \"text/html\"".into())
    );
}

#[tokio::test]
async fn custom_headers_reach_the_server_per_connection_and_per_request() {
    let seen = Arc::new(Mutex::new(Vec::<(String, Option<String>)>::new()));
    let sink = seen.clone();
    let srv = serve_http(http_test_server(), HttpServerConfig::default()).await;
    // A front that records headers, then forwards to the MCP server.
    let upstream = srv.url.clone();
    let app = axum::Router::new().route(
        "/mcp",
        axum::routing::any(move |req: axum::extract::Request| {
            let sink = sink.clone();
            let upstream = upstream.clone();
            async move {
                let h = req.headers();
                sink.lock().unwrap().push((
                    h.get("authorization")
                        .map(|v| v.to_str().unwrap().to_owned())
                        .unwrap_or_default(),
                    h.get("x-trace").map(|v| v.to_str().unwrap().to_owned()),
                ));
                let method = req.method().clone();
                let mut rb = reqwest::Client::new().request(method, &upstream);
                for (k, v) in req.headers() {
                    if k != "host" {
                        rb = rb.header(k, v);
                    }
                }
                let body = axum::body::to_bytes(req.into_body(), 1 << 20)
                    .await
                    .unwrap();
                let resp = rb.body(body).send().await.unwrap();
                let mut out = axum::http::Response::builder().status(resp.status().as_u16());
                for (k, v) in resp.headers() {
                    out = out.header(k, v);
                }
                out.body(axum::body::Body::from_stream(resp.bytes_stream()))
                    .unwrap()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let front = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let http = HttpClientOptions {
        open_get_stream: false,
        ..HttpClientOptions::default()
    }
    .header("authorization", "Bearer t0k3n");
    let conn = Client::connect_http(&front, http, ClientOptions::default())
        .await
        .unwrap();
    let raw = conn
        .peer()
        .request_raw(
            "tools/call",
            Some(
                serde_json::value::to_raw_value(&json!({"name": "echo_headers", "arguments": {}}))
                    .unwrap(),
            ),
            RequestOptions::default().header("x-trace", "abc"),
        )
        .await
        .unwrap();
    let v: Value = serde_json::from_str(raw.get()).unwrap();
    assert_eq!(v["content"][0]["text"], "hi");
    let seen = seen.lock().unwrap().clone();
    assert!(
        seen.iter().all(|(auth, _)| auth == "Bearer t0k3n"),
        "{seen:?}"
    );
    assert_eq!(
        seen.iter()
            .filter(|(_, t)| t.as_deref() == Some("abc"))
            .count(),
        1,
        "{seen:?}"
    );
    drop(conn);
}

#[tokio::test]
async fn the_standalone_server_answers_only_at_its_endpoint() {
    let srv = serve_http(http_test_server(), HttpServerConfig::default()).await;
    let base = srv.url.strip_suffix("/mcp").unwrap();
    // Any other path, a trailing slash, a prefix: 404 with an empty body, whatever the method,
    // as the router of `StreamableHttpServer::router` answers.
    for path in ["/", "/other", "/mcp/", "/mc", "/mcp/x", "/MCP"] {
        let resp = post_at_2025(&format!("{base}{path}"), None, INIT).await;
        assert_eq!(resp.status(), 404, "{path}");
        assert_eq!(resp.text().await.unwrap(), "", "{path}");
        let get = reqwest::Client::new()
            .get(format!("{base}{path}"))
            .send()
            .await
            .unwrap();
        assert_eq!(get.status(), 404, "{path}");
    }
    // The endpoint itself, with a query string: served.
    let resp = post_at_2025(&format!("{}?x=1", srv.url), None, INIT).await;
    assert_eq!(resp.status(), 200);
    assert!(resp.headers().contains_key("mcp-session-id"));
}

#[tokio::test]
async fn binds_loopback_by_default_and_shuts_down_with_open_streams() {
    let bound = StreamableHttpServer::new(http_test_server(), HttpServerConfig::default())
        .bind()
        .await
        .unwrap();
    let addr = bound.local_addr().unwrap();
    assert!(addr.ip().is_loopback(), "{addr}");
    let stop = CancellationToken::new();
    let token = stop.clone();
    let serving = tokio::spawn(bound.serve(async move { token.cancelled().await }));
    let url = format!("http://{addr}/mcp");
    let id = initialize(&url).await;
    let stream = reqwest::Client::new()
        .get(&url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &id)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    // A second standalone stream for the same session is refused.
    let second = reqwest::Client::new()
        .get(&url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &id)
        .send()
        .await
        .unwrap();
    assert_eq!(second.status(), 409);
    stop.cancel();
    let done = tokio::time::timeout(Duration::from_secs(5), serving).await;
    assert!(
        matches!(done, Ok(Ok(Ok(())))),
        "shutdown hung or failed: {done:?}"
    );
    drop(stream);
}

/// What an authorization layer in front of the endpoint would put in the request extensions.
#[derive(Clone)]
struct Principal(String);

fn whoami_server() -> Server {
    let server = http_test_server();
    server
        .tool(
            "whoami",
            "the request's tenant header, session and principal",
            |_: Nothing, c: RequestCtx| async move {
                let tenant = c
                    .http()
                    .and_then(|h| h.headers().get("x-tenant"))
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("-")
                    .to_owned();
                let principal = c
                    .extension::<Principal>()
                    .map_or("-".to_owned(), |p| p.0.clone());
                let method = c.http().map(|h| h.parts().method.to_string());
                HandlerResult::Ok(format!(
                    "tenant={tenant} session={} principal={principal} method={}",
                    c.session_id().unwrap_or("-"),
                    method.unwrap_or_default()
                ))
            },
        )
        .unwrap();
    server
}

#[tokio::test]
async fn handlers_see_the_http_request_and_the_session_id_when_mounted() {
    // The endpoint mounted as a tower service in an existing axum app, behind a layer that
    // authenticates and leaves a principal in the request extensions.
    let stop = CancellationToken::new();
    let mcp = StreamableHttpServer::new(
        whoami_server(),
        HttpServerConfig {
            shutdown: stop.clone(),
            ..HttpServerConfig::default()
        },
    );
    let app = axum::Router::new()
        .route_service("/mcp", mcp.clone())
        .route("/health", axum::routing::get(|| async { "ok" }))
        .layer(axum::middleware::from_fn(
            |mut req: axum::extract::Request, next: axum::middleware::Next| async move {
                let user = req
                    .headers()
                    .get("x-user")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                if let Some(user) = user {
                    req.extensions_mut().insert(Principal(user));
                }
                next.run(req).await
            },
        ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let token = stop.clone();
    let serving = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { token.cancelled().await })
            .await
    });
    let id = initialize(&url).await;
    let mut resp = reqwest::Client::new()
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &id)
        .header("mcp-protocol-version", "2025-11-25")
        .header("x-tenant", "acme")
        .header("x-user", "alice")
        .body(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"whoami","arguments":{}}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let events = read_events(&mut resp, |d| d.contains(r#""id":3"#)).await;
    assert_eq!(
        events.last().unwrap().1,
        format!(
            r#"{{"jsonrpc":"2.0","id":3,"result":{{"content":[{{"type":"text","text":"tenant=acme session={id} principal=alice method=POST"}}]}}}}"#
        )
    );
    // The rest of the app is served as before.
    let health = reqwest::Client::new()
        .get(url.replace("/mcp", "/health"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.text().await.unwrap(), "ok");
    // Graceful shutdown of the app, with the session's GET stream open: the token ends the
    // stream, so axum's shutdown completes.
    let stream = reqwest::Client::new()
        .get(&url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &id)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let t = std::time::Instant::now();
    stop.cancel();
    let done = tokio::time::timeout(Duration::from_secs(5), serving).await;
    assert!(matches!(done, Ok(Ok(Ok(())))), "shutdown hung: {done:?}");
    eprintln!("mounted app shut down in {:?}", t.elapsed());
    assert_eq!(mcp.session_count(), 0);
    drop(stream);
}

#[tokio::test]
async fn stateless_handlers_see_the_request_without_a_session() {
    let http = StreamableHttpServer::new(
        whoami_server(),
        HttpServerConfig {
            stateless: true,
            json_response: true,
            ..HttpServerConfig::default()
        },
    );
    // The service itself, driven as a tower service (as any server that takes one would).
    use tower::ServiceExt;
    let req = axum::http::Request::post("/anywhere")
        .header("host", "localhost")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("x-tenant", "beta")
        .body(axum::body::Body::from(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami","arguments":{}}}"#,
        ))
        .unwrap();
    let resp = http.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .unwrap();
    assert_eq!(
        std::str::from_utf8(&body).unwrap(),
        r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"tenant=beta session=- principal=- method=POST"}]}}"#
    );
}

#[tokio::test]
async fn the_authority_is_checked_when_http2_carries_no_host_header() {
    use tower::ServiceExt;
    let http = StreamableHttpServer::new(http_test_server(), HttpServerConfig::default());
    let ping = |uri: &'static str, host: Option<&'static str>| {
        let mut b = axum::http::Request::post(uri)
            .version(axum::http::Version::HTTP_2)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if let Some(h) = host {
            b = b.header("host", h);
        }
        b.body(axum::body::Body::from(INIT)).unwrap()
    };
    // hyper hands an HTTP/2 request's :authority over as the URI's authority, without Host.
    let ok = http
        .clone()
        .oneshot(ping("http://localhost:3000/mcp", None))
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    let evil = http
        .clone()
        .oneshot(ping("http://evil.example/mcp", Some("localhost")))
        .await
        .unwrap();
    assert_eq!(evil.status(), 403);
    let body = axum::body::to_bytes(evil.into_body(), 1 << 20)
        .await
        .unwrap();
    assert_eq!(
        std::str::from_utf8(&body).unwrap(),
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Forbidden: Host \"evil.example\" is not allowed"}}"#
    );
    let none = http.clone().oneshot(ping("/mcp", None)).await.unwrap();
    assert_eq!(none.status(), 403);
}

#[tokio::test]
async fn idle_sse_streams_carry_keep_alive_comments() {
    let srv = serve_http(
        http_test_server(),
        HttpServerConfig {
            sse_keep_alive: Some(Duration::from_millis(100)),
            ..HttpServerConfig::default()
        },
    )
    .await;
    let id = initialize(&srv.url).await;
    let mut stream = reqwest::Client::new()
        .get(&srv.url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &id)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    let mut seen = String::new();
    let t = std::time::Instant::now();
    while seen.matches(": keep-alive\n\n").count() < 3 {
        let chunk = tokio::time::timeout(Duration::from_secs(2), stream.chunk())
            .await
            .expect("a keep-alive within 2 s")
            .unwrap()
            .expect("the stream stays open");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    // The priming event, then only comments: three of them, about 100 ms apart.
    assert_eq!(
        seen,
        "id: s0e0\nretry: 1000\ndata: \n\n: keep-alive\n\n: keep-alive\n\n: keep-alive\n\n"
    );
    assert!(
        t.elapsed() >= Duration::from_millis(250),
        "{:?}",
        t.elapsed()
    );
}

#[tokio::test]
async fn a_refused_initialize_keeps_no_session() {
    let srv = serve_http(http_test_server(), HttpServerConfig::default()).await;
    let resp = post_at_2025(
        &srv.url,
        None,
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}"#,
    )
    .await;
    assert_eq!(resp.status(), 200);
    assert!(resp.headers().get("mcp-session-id").is_none());
    assert_eq!(
        resp.text().await.unwrap(),
        "id: s1e1\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32602,\"message\":\"Invalid params: missing field `clientInfo` at line 1 column 32\"}}\n\n"
    );
    assert_eq!(srv.http.session_count(), 0);
    assert_eq!(srv.http.pending_session_count(), 0);
}

/// A server with `hi` (answers at once) and `gated` (answers once the test adds a permit).
fn gated_server(gate: Arc<tokio::sync::Semaphore>) -> Server {
    let server = Server::builder("http-test", "1").build();
    server
        .tool("hi", "says hi", |_: Nothing, _c: RequestCtx| async move {
            HandlerResult::Ok("hi")
        })
        .unwrap();
    server
        .tool(
            "gated",
            "answers when let through",
            move |_: Nothing, _c: RequestCtx| {
                let gate = gate.clone();
                async move {
                    gate.acquire().await.unwrap().forget();
                    HandlerResult::Ok("through")
                }
            },
        )
        .unwrap();
    server
}

async fn post_at(url: &str, session: Option<&str>, version: &str, body: &str) -> reqwest::Response {
    let mut rb = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", version)
        .body(body.to_owned());
    if let Some(s) = session {
        rb = rb.header("mcp-session-id", s);
    }
    tokio::time::timeout(Duration::from_secs(5), rb.send())
        .await
        .expect("the response head within 5 s")
        .unwrap()
}

#[tokio::test]
async fn a_quick_answer_leaves_with_its_head_and_a_slow_one_gets_its_head_first() {
    let (url, gate, _stop) = serve_gated(Duration::from_millis(100)).await;

    let v = "2025-06-18";
    let init = INIT.replace("2025-11-25", v);
    let resp = post_at(&url, None, v, &init).await;
    let session = resp.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    // Complete at once: one body of known length, not a chunked stream.
    assert!(resp.headers().get("transfer-encoding").is_none());
    let body = resp.text().await.unwrap();
    assert!(body.starts_with("id: s1e1\ndata: {"), "{body}");
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    assert_eq!(
        post_at(&url, Some(&session), v, initialized).await.status(),
        202
    );

    let call = |id: u32, name: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}","arguments":{{}}}}}}"#
        )
    };
    let resp = post_at(&url, Some(&session), v, &call(2, "hi")).await;
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let want = "id: s2e1\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}}\n\n";
    assert_eq!(resp.content_length(), Some(want.len() as u64));
    assert_eq!(resp.text().await.unwrap(), want);

    // Not answered within the wait: the head comes while the tool is still held, as a stream,
    // and the answer follows once the tool is let through.
    let mut resp = post_at(&url, Some(&session), v, &call(3, "gated")).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["transfer-encoding"], "chunked");
    assert_eq!(gate.available_permits(), 0);
    gate.add_permits(1);
    let events = read_events(&mut resp, |d| d.contains(r#""id":3"#)).await;
    assert_eq!(
        events,
        [(
            "s3e1".to_owned(),
            r#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"through"}]}}"#
                .to_owned()
        )]
    );

    // 2025-11-25 asks for the priming event at once: with a wait far longer than the test's
    // 5 s bound, the head and that event still come while the tool is held.
    let (url, gate, _stop) = serve_gated(Duration::from_secs(600)).await;
    let init = INIT.to_owned();
    let resp = post_at(&url, None, "2025-11-25", &init).await;
    let session = resp.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(resp
        .text()
        .await
        .unwrap()
        .starts_with("id: s1e0\nretry: 1000\ndata: \n\nid: s1e1\ndata: {"));
    assert_eq!(
        post_at(&url, Some(&session), "2025-11-25", initialized)
            .await
            .status(),
        202
    );
    let mut resp = post_at(&url, Some(&session), "2025-11-25", &call(4, "gated")).await;
    let primed = tokio::time::timeout(Duration::from_secs(5), resp.chunk())
        .await
        .expect("the priming event while the tool is held")
        .unwrap()
        .unwrap();
    assert_eq!(&primed[..], b"id: s2e0\nretry: 1000\ndata: \n\n");
    assert_eq!(gate.available_permits(), 0);
    gate.add_permits(1);
    let events = read_events(&mut resp, |d| d.contains(r#""id":4"#)).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].0, "s2e1");
}

/// Serves [`gated_server`] with `sse_head_wait`; the guard stops it.
async fn serve_gated(
    wait: Duration,
) -> (
    String,
    Arc<tokio::sync::Semaphore>,
    tokio_util::sync::DropGuard,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let http = StreamableHttpServer::new(
        gated_server(gate.clone()),
        HttpServerConfig {
            sse_head_wait: wait,
            ..HttpServerConfig::default()
        },
    );
    let stop = CancellationToken::new();
    let token = stop.clone();
    tokio::spawn(async move { http.serve(listener, token.cancelled_owned()).await });
    (url, gate, stop.drop_guard())
}
