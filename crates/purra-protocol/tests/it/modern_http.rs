//! The 2026-07-28 revision on the Streamable HTTP endpoint over real sockets: the era decided per
//! request beside handshake-era sessions, the header rules and the status mapping asserted on
//! raw HTTP, JSON answers and request-scoped streams, input_required rounds bound to the
//! principal an authentication layer named, and subscriptions/listen.

use std::time::Duration;

use purra_protocol::modern::InputRequest;
use purra_protocol::types::*;
use purra_protocol::Principal;
use purra_protocol::{HandlerResult, HttpServerConfig, RequestCtx, Server, StreamableHttpServer};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::support::Nothing;

static CANCELLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn mh_server() -> Server {
    let server = Server::builder("mh", "1").logging().build();
    server
        .tool(
            "wait",
            "waits for its cancellation",
            |_: Nothing, c: RequestCtx| async move {
                c.progress(0.0, None, None).await?;
                c.cancelled().await;
                CANCELLED.store(true, std::sync::atomic::Ordering::SeqCst);
                HandlerResult::Ok("cancelled")
            },
        )
        .unwrap();
    server
        .tool("hi", "says hi", |_: Nothing, _c: RequestCtx| async move {
            HandlerResult::Ok("hi")
        })
        .unwrap();
    server
        .tool(
            "steps",
            "reports progress",
            |_: Nothing, c: RequestCtx| async move {
                c.progress(1.0, Some(2.0), None).await?;
                c.progress(2.0, Some(2.0), None).await?;
                HandlerResult::Ok("stepped")
            },
        )
        .unwrap();
    server
        .tool(
            "confirm",
            "asks to confirm",
            |_: Nothing, c: RequestCtx| async move {
                let form = ElicitParams::form(
                    "Sure?",
                    json!({"type": "object", "properties": {"ok": {"type": "boolean"}}})
                        .as_object()
                        .cloned()
                        .unwrap(),
                );
                c.input("confirm", InputRequest::Elicit(form)).await?;
                HandlerResult::Ok(format!(
                    "confirmed by {}",
                    c.principal().map_or("nobody", |p| p.subject.as_str())
                ))
            },
        )
        .unwrap();
    server
        .raw_tool(
            Tool::new(
                "in_region",
                json!({"type": "object", "properties": {
                    "region": {"type": "string", "x-mcp-header": "Region"},
                    "n": {"type": "integer", "x-mcp-header": "N"}
                }})
                .as_object()
                .cloned()
                .unwrap(),
            )
            .with_description("runs in a region"),
            |args, _c: RequestCtx| async move {
                HandlerResult::Ok(CallToolResult::text(format!("ran in {}", args["region"])))
            },
        )
        .unwrap();
    server
}

struct Routed {
    url: String,
    server: Server,
    stop: CancellationToken,
}

impl Drop for Routed {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Serves over real sockets; a header `x-test-user` becomes the request's principal, as an
/// authentication layer in front of the endpoint would make it.
async fn serve_routed() -> Routed {
    let server = mh_server();
    let http = StreamableHttpServer::new(server.clone(), HttpServerConfig::default());
    let app = http.router().layer(axum::middleware::from_fn(
        |mut req: axum::extract::Request, next: axum::middleware::Next| async move {
            let user = req
                .headers()
                .get("x-test-user")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            if let Some(user) = user {
                req.extensions_mut().insert(Principal::new(user));
            }
            next.run(req).await
        },
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let stop = CancellationToken::new();
    let token = stop.clone();
    tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { token.cancelled().await })
            .await
    });
    Routed { url, server, stop }
}

const META_ELICIT: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}}"#;
const MH_INFO: &str =
    r#""_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mh","version":"1"}}"#;

/// POSTs `body` with the standard modern headers plus `extra` (a header named with an empty
/// value is removed); returns status, content type and body.
async fn post_modern(
    url: &str,
    method: &str,
    name: Option<&str>,
    body: String,
    extra: &[(&str, &str)],
) -> (u16, String, String) {
    let client = reqwest::Client::new();
    let mut headers = vec![
        ("content-type", "application/json".to_owned()),
        ("accept", "application/json, text/event-stream".to_owned()),
        ("mcp-protocol-version", "2026-07-28".to_owned()),
        ("mcp-method", method.to_owned()),
    ];
    if let Some(n) = name {
        headers.push(("mcp-name", n.to_owned()));
    }
    for (k, v) in extra {
        headers.retain(|(h, _)| !h.eq_ignore_ascii_case(k));
        if !v.is_empty() {
            headers.push((k, (*v).to_owned()));
        }
    }
    let mut rb = client.post(url).body(body);
    for (k, v) in headers {
        rb = rb.header(k, v);
    }
    let resp = tokio::time::timeout(Duration::from_secs(10), rb.send())
        .await
        .unwrap()
        .unwrap();
    let status = resp.status().as_u16();
    let ct = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let text = tokio::time::timeout(Duration::from_secs(10), resp.text())
        .await
        .unwrap()
        .unwrap();
    (status, ct, text)
}

fn call(id: u32, tool: &str, args: &str, extra: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{args}{extra},{META_ELICIT}}}}}"#
    )
}

#[tokio::test]
async fn a_modern_request_is_one_json_exchange() {
    let r = serve_routed().await;
    let (status, ct, body) = post_modern(
        &r.url,
        "tools/call",
        Some("hi"),
        call(1, "hi", "{}", ""),
        &[],
    )
    .await;
    assert_eq!((status, ct.as_str()), (200, "application/json"));
    assert_eq!(
        body,
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[{{"type":"text","text":"hi"}}],"resultType":"complete",{MH_INFO}}}}}"#
        )
    );
    // No session was made: a GET or DELETE in this revision is 405.
    let client = reqwest::Client::new();
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let resp = client
            .request(method, &r.url)
            .header("mcp-protocol-version", "2026-07-28")
            .header("accept", "text/event-stream")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 405);
        assert_eq!(resp.headers()["allow"], "POST");
    }
}

#[tokio::test]
async fn headers_and_errors_map_to_the_revisions_statuses() {
    let r = serve_routed().await;
    let list =
        format!(r#"{{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{{{META_ELICIT}}}}}"#);
    // Mcp-Method disagrees with the body.
    let (s, _, b) = post_modern(&r.url, "tools/call", None, list.clone(), &[]).await;
    assert_eq!(s, 400);
    assert_eq!(
        b,
        r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32020,"message":"Header mismatch: Mcp-Method header value \"tools/call\" does not match body value \"tools/list\""}}"#
    );
    // Header names are case-insensitive and values are trimmed.
    let (s, _, _) = post_modern(
        &r.url,
        "tools/list",
        None,
        list.clone(),
        &[("MCP-METHOD", "  tools/list ")],
    )
    .await;
    assert_eq!(s, 200);
    // Mcp-Name disagrees.
    let (s, _, b) = post_modern(
        &r.url,
        "tools/call",
        Some("other"),
        call(3, "hi", "{}", ""),
        &[],
    )
    .await;
    assert_eq!(s, 400);
    assert!(b.contains(r#""code":-32020"#), "{b}");
    // A modern body without the version header is a header mismatch, not a legacy request.
    let (s, _, b) = post_modern(
        &r.url,
        "tools/list",
        None,
        list.clone(),
        &[("mcp-protocol-version", "")],
    )
    .await;
    assert_eq!(s, 400);
    assert_eq!(
        b,
        r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32020,"message":"Header mismatch: the MCP-Protocol-Version header is missing"}}"#
    );
    // An unknown version is -32022 with 400.
    let unknown = list.replace(r#""2026-07-28""#, r#""v9""#);
    let (s, _, b) = post_modern(
        &r.url,
        "tools/list",
        None,
        unknown,
        &[("mcp-protocol-version", "v9")],
    )
    .await;
    assert_eq!(s, 400);
    // As JSON values: the members' order follows serde_json's `preserve_order`, which a
    // workspace build turns on (purra-gateway's Cedar).
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&b).expect("json"),
        serde_json::from_str::<serde_json::Value>(
            r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"requested":"v9","supported":["2026-07-28"]}}}"#
        )
        .expect("json"),
        "{b}"
    );
    // Removed and unknown methods are 404 with -32601.
    for method in [
        "ping",
        "initialize",
        "resources/unsubscribe",
        "nothing/here",
    ] {
        let body =
            format!(r#"{{"jsonrpc":"2.0","id":5,"method":"{method}","params":{{{META_ELICIT}}}}}"#);
        let (s, _, b) = post_modern(&r.url, method, None, body, &[]).await;
        assert_eq!(s, 404, "{method}");
        assert_eq!(
            b,
            format!(
                r#"{{"jsonrpc":"2.0","id":5,"error":{{"code":-32601,"message":"Method not found: {method}"}}}}"#
            )
        );
    }
    // A missing envelope is -32602 with 400.
    let (s, _, b) = post_modern(
        &r.url,
        "tools/list",
        None,
        r#"{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{}}"#.into(),
        &[],
    )
    .await;
    assert_eq!(s, 400);
    assert!(b.contains(r#""code":-32602"#), "{b}");
}

#[tokio::test]
async fn mirrored_arguments_must_match_their_headers() {
    let r = serve_routed().await;
    let args = r#"{"region":"Zürich","n":7}"#;
    let headers = [
        ("mcp-param-region", "=?base64?WsO8cmljaA==?="),
        ("mcp-param-n", "7"),
    ];
    let (s, _, b) = post_modern(
        &r.url,
        "tools/call",
        Some("in_region"),
        call(1, "in_region", args, ""),
        &headers,
    )
    .await;
    assert_eq!(s, 200, "{b}");
    assert!(b.contains(r#""text":"ran in \"Zürich\"""#), "{b}");
    let (s, _, b) = post_modern(
        &r.url,
        "tools/call",
        Some("in_region"),
        call(2, "in_region", args, ""),
        &headers[..1],
    )
    .await;
    assert_eq!(s, 400);
    assert_eq!(
        b,
        r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32020,"message":"Header mismatch: the Mcp-Param-N header is missing but argument \"n\" has a value"}}"#
    );
    let wrong = [
        ("mcp-param-region", "=?base64?WsO8cmljaA?="),
        ("mcp-param-n", "7"),
    ];
    let (s, _, b) = post_modern(
        &r.url,
        "tools/call",
        Some("in_region"),
        call(3, "in_region", args, ""),
        &wrong,
    )
    .await;
    assert_eq!(s, 400);
    assert!(b.contains("carries a malformed value"), "{b}");
}

#[tokio::test]
async fn notifications_before_the_result_make_a_request_scoped_stream() {
    let r = serve_routed().await;
    let body =
        call(1, "steps", "{}", "").replace(r#""_meta":{"#, r#""_meta":{"progressToken":"p","#);
    let (s, ct, b) = post_modern(&r.url, "tools/call", Some("steps"), body, &[]).await;
    assert_eq!((s, ct.as_str()), (200, "text/event-stream"));
    assert_eq!(
        b,
        format!(
            "data: {}\n\ndata: {}\n\ndata: {}\n\n",
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1.0,"total":2.0}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":2.0,"total":2.0}}"#,
            format_args!(
                r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[{{"type":"text","text":"stepped"}}],"resultType":"complete",{MH_INFO}}}}}"#
            )
        )
    );
}

#[tokio::test]
async fn request_state_is_bound_to_the_principal() {
    let r = serve_routed().await;
    let (s, _, first) = post_modern(
        &r.url,
        "tools/call",
        Some("confirm"),
        call(1, "confirm", "{}", ""),
        &[("x-test-user", "alice")],
    )
    .await;
    assert_eq!(s, 200);
    let v: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(v["result"]["resultType"], "input_required");
    let state = v["result"]["requestState"].as_str().unwrap();
    let retry = format!(
        r#","inputResponses":{{"confirm":{{"action":"accept","content":{{"ok":true}}}}}},"requestState":"{state}""#
    );
    let (s, _, b) = post_modern(
        &r.url,
        "tools/call",
        Some("confirm"),
        call(2, "confirm", "{}", &retry),
        &[("x-test-user", "bob")],
    )
    .await;
    assert_eq!(s, 400);
    assert_eq!(
        b,
        r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"Invalid or expired requestState","data":{"reason":"invalid_request_state"}}}"#
    );
    let (s, _, b) = post_modern(
        &r.url,
        "tools/call",
        Some("confirm"),
        call(3, "confirm", "{}", &retry),
        &[],
    )
    .await;
    assert_eq!(s, 400, "{b}");
    let (s, _, b) = post_modern(
        &r.url,
        "tools/call",
        Some("confirm"),
        call(4, "confirm", "{}", &retry),
        &[("x-test-user", "alice")],
    )
    .await;
    assert_eq!(s, 200);
    assert!(b.contains(r#""text":"confirmed by alice""#), "{b}");
}

#[tokio::test]
async fn listen_streams_what_changes_until_the_client_leaves() {
    let r = serve_routed().await;
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{{"notifications":{{"toolsListChanged":true}},{META_ELICIT}}}}}"#
    );
    let resp = reqwest::Client::new()
        .post(&r.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "subscriptions/listen")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    assert_eq!(resp.headers()["x-accel-buffering"], "no");
    let mut resp = resp;
    let mut got = String::new();
    read_chunks(&mut resp, &mut got, 1).await;
    r.server.remove_tool("hi");
    read_chunks(&mut resp, &mut got, 2).await;
    assert_eq!(
        got,
        concat!(
            "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/acknowledged\",\"params\":{\"notifications\":{\"toolsListChanged\":true},\"_meta\":{\"io.modelcontextprotocol/subscriptionId\":\"L\"}}}\n\n",
            "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\",\"params\":{\"_meta\":{\"io.modelcontextprotocol/subscriptionId\":\"L\"}}}\n\n"
        )
    );
}

/// Reads SSE chunks until `got` holds `events` complete events.
async fn read_chunks(resp: &mut reqwest::Response, got: &mut String, events: usize) {
    while got.matches("\n\n").count() < events {
        let chunk = tokio::time::timeout(Duration::from_secs(5), resp.chunk())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        got.push_str(std::str::from_utf8(&chunk).unwrap());
    }
}

#[tokio::test]
async fn closing_the_stream_cancels_the_request() {
    let r = serve_routed().await;
    let body = call(1, "wait", "{}", "").replace(r#""_meta":{"#, r#""_meta":{"progressToken":1,"#);
    let mut resp = reqwest::Client::new()
        .post(&r.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "wait")
        .body(body)
        .send()
        .await
        .unwrap();
    let mut got = String::new();
    read_chunks(&mut resp, &mut got, 1).await;
    assert!(got.contains("notifications/progress"), "{got}");
    assert!(!CANCELLED.load(std::sync::atomic::Ordering::SeqCst));
    drop(resp);
    tokio::time::timeout(Duration::from_secs(5), async {
        while !CANCELLED.load(std::sync::atomic::Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the handler saw its cancellation");
}
