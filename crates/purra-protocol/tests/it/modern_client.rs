//! purra's client in the 2026-07-28 revision: the modes (pinned, auto with its probe and
//! fallback), the input_required loop answered by the ordinary handlers and its bound, catalogs
//! kept in sync through subscriptions/listen, and caching by ttlMs; over the in-memory pair,
//! a raw peer playing other servers, and Streamable HTTP.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use purra_protocol::memory;
use purra_protocol::modern::{CacheHint, CacheScope, InputRequest};
use purra_protocol::types::*;
use purra_protocol::{
    CacheMode, Client, ClientOptions, Error, HandlerResult, HttpClientOptions, HttpServerConfig,
    ProtocolMode, RequestCtx, Server, StreamableHttpServer,
};
use serde_json::{json, Value};

use crate::support::Nothing;

static READS: AtomicUsize = AtomicUsize::new(0);

fn modern_client_server() -> Server {
    let server = Server::builder("modern-server", "2")
        .cache_hint(
            "resources/read",
            CacheHint::new(60_000, CacheScope::Private),
        )
        .unwrap()
        .build();
    server
        .tool(
            "greet",
            "asks a name",
            |_: Nothing, c: RequestCtx| async move {
                let r = c
                    .elicit(ElicitParams::form(
                        "Name?",
                        json!({"type": "object", "properties": {"name": {"type": "string"}}})
                            .as_object()
                            .cloned()
                            .unwrap(),
                    ))
                    .await?;
                let roots = c.list_roots().await?;
                HandlerResult::Ok(format!(
                    "Hello, {}! ({} roots, {})",
                    r.content.unwrap_or_default()["name"]
                        .as_str()
                        .unwrap_or("?"),
                    roots.len(),
                    c.protocol_version()
                ))
            },
        )
        .unwrap();
    server
        .tool(
            "insatiable",
            "always asks again",
            |_: Nothing, c: RequestCtx| async move {
                let n = c.request_state().and_then(|v| v.as_u64()).unwrap_or(0);
                c.set_request_state(json!(n + 1));
                let mut question = ElicitParams::form(format!("question {n}"), Default::default());
                question.requested_schema = None;
                c.input(&format!("q{n}"), InputRequest::Elicit(question))
                    .await?;
                HandlerResult::Ok("never")
            },
        )
        .unwrap();
    server.resource(
        Resource::new("m://counter", "counter"),
        |uri, _c| async move {
            let n = READS.fetch_add(1, Ordering::SeqCst);
            HandlerResult::Ok(ReadResourceResult::text(uri, n.to_string()))
        },
    );
    server
}

fn modern_options(mode: ProtocolMode) -> ClientOptions {
    ClientOptions::default()
        .mode(mode)
        .request_timeout(Duration::from_secs(10))
        .on_elicitation(false, |_: ElicitParams| async move {
            Ok(ElicitResult::accept(
                json!({"name": "Ada"}).as_object().cloned().unwrap(),
            ))
        })
        .roots(vec![Root::new("file:///w")])
}

async fn pinned(server: &Server) -> purra_protocol::Connection {
    let (a, b) = memory::pair();
    let s = server.clone();
    tokio::spawn(async move { s.serve(b).await });
    Client::connect(a, modern_options(ProtocolMode::Pinned("2026-07-28".into())))
        .await
        .expect("connects")
}

#[tokio::test]
async fn a_pinned_client_speaks_the_revision_and_answers_input_requests() {
    let conn = pinned(&modern_client_server()).await;
    assert!(conn.is_modern());
    assert_eq!(conn.protocol_version(), "2026-07-28");
    assert_eq!(
        conn.server_info(),
        &Implementation::new("modern-server", "2")
    );
    assert_eq!(
        conn.discover_result().unwrap().supported_versions,
        ["2026-07-28"]
    );
    let names: Vec<String> = conn.tools().iter().map(|t| t.name.clone()).collect();
    assert_eq!(names, ["greet", "insatiable"]);
    let r = conn.call_tool("greet", json!({})).await.unwrap();
    assert_eq!(
        r.texts().collect::<Vec<_>>(),
        ["Hello, Ada! (1 roots, 2026-07-28)"]
    );
}

#[tokio::test]
async fn the_input_loop_is_bounded() {
    let (a, b) = memory::pair();
    let s = modern_client_server();
    tokio::spawn(async move { s.serve(b).await });
    let conn = Client::connect(
        a,
        modern_options(ProtocolMode::Pinned("2026-07-28".into())).max_input_rounds(3),
    )
    .await
    .unwrap();
    assert_eq!(
        conn.call_tool("insatiable", json!({})).await.unwrap_err(),
        Error::InputRoundsExceeded(3)
    );
}

#[tokio::test]
async fn list_changes_arrive_through_the_subscription() {
    let server = modern_client_server();
    let conn = Arc::new(pinned(&server).await);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let seen = tools_probe(&conn);
    conn.on("notifications/tools/list_changed", move |_| {
        let _ = tx.send(seen());
    });
    server.remove_tool("insatiable");
    let names = tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .expect("a list change")
        .unwrap();
    // The catalog was refetched before the listener ran.
    assert_eq!(names, ["greet"]);
}

#[tokio::test]
async fn resource_reads_are_cached_for_their_ttl_and_updates_invalidate_them() {
    let server = modern_client_server();
    let conn = pinned(&server).await;
    let read = |c: &ReadResourceResult| c.contents[0].text.clone().unwrap();
    let first = read(&conn.read_resource("m://counter").await.unwrap());
    assert_eq!(
        read(&conn.read_resource("m://counter").await.unwrap()),
        first
    );
    let fresh = read(
        &conn
            .read_resource_with("m://counter", CacheMode::Refresh)
            .await
            .unwrap(),
    );
    assert_ne!(fresh, first);
    let sub = conn.subscribe_resource("m://counter").await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    conn.on("notifications/resources/updated", move |p| {
        let _ = tx.send(p["uri"].clone());
    });
    server.notify_resource_updated("m://counter").await;
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .unwrap()
            .unwrap(),
        json!("m://counter")
    );
    let after = read(&conn.read_resource("m://counter").await.unwrap());
    assert_ne!(after, fresh, "the update invalidated the cached read");
    sub.unsubscribe().await.unwrap();
}

#[tokio::test]
async fn auto_mode_chooses_the_modern_revision_of_a_dual_era_server() {
    let (a, b) = memory::pair();
    let s = modern_client_server();
    tokio::spawn(async move { s.serve(b).await });
    let conn = Client::connect(a, modern_options(ProtocolMode::Auto))
        .await
        .unwrap();
    assert!(conn.is_modern());
}

/// A raw server: answers each request by method with `answer`.
fn raw_server(
    answer: impl Fn(&str, &Value, usize) -> Option<String> + Send + 'static,
) -> purra_protocol::Transport {
    let (t, mut raw) = memory::raw();
    tokio::spawn(async move {
        let mut n = 0;
        while let Some(frame) = raw.recv().await {
            let v: Value = serde_json::from_str(&frame).unwrap();
            let (Some(method), Some(id)) = (v["method"].as_str(), v.get("id")) else {
                continue;
            };
            n += 1;
            if let Some(body) = answer(method, &v["params"], n) {
                raw.send(format!(r#"{{"jsonrpc":"2.0","id":{id},{body}}}"#))
                    .await;
            }
        }
    });
    t
}

#[tokio::test]
async fn auto_mode_falls_back_to_the_handshake() {
    let legacy = raw_server(|method, _, _| {
        match method {
        "server/discover" => Some(r#""error":{"code":-32601,"message":"Method not found"}"#.into()),
        "initialize" => Some(
            r#""result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"old","version":"1"}}"#.into(),
        ),
        _ => None,
    }
    });
    let conn = Client::connect(legacy, modern_options(ProtocolMode::Auto))
        .await
        .unwrap();
    assert!(!conn.is_modern());
    assert_eq!(conn.protocol_version(), "2025-11-25");
    assert_eq!(conn.server_info().name, "old");
}

#[tokio::test]
async fn auto_mode_probes_again_at_a_version_the_server_names() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let picky = raw_server(move |method, params, n| {
        log.lock().unwrap().push((
            method.to_owned(),
            params["_meta"]["io.modelcontextprotocol/protocolVersion"].clone(),
        ));
        match (method, n) {
            ("server/discover", 1) => Some(r#""error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"],"requested":"2026-07-28"}}"#.into()),
            ("server/discover", _) => Some(r#""result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{},"ttlMs":0,"cacheScope":"public"}"#.into()),
            _ => None,
        }
    });
    let conn = Client::connect(picky, modern_options(ProtocolMode::Auto))
        .await
        .unwrap();
    assert!(conn.is_modern());
    assert_eq!(
        *seen.lock().unwrap(),
        [
            ("server/discover".to_owned(), json!("2026-07-28")),
            ("server/discover".to_owned(), json!("2026-07-28"))
        ]
    );
    // A server speaking only other modern revisions cannot be spoken to.
    let alien = raw_server(|_, _, _| {
        Some(r#""error":{"code":-32022,"message":"no","data":{"supported":["2099-01-01"],"requested":"2026-07-28"}}"#.into())
    });
    let e = Client::connect(alien, modern_options(ProtocolMode::Auto))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::UnsupportedProtocolVersion(_)), "{e}");
}

#[tokio::test]
async fn an_unknown_result_type_is_refused() {
    let odd = raw_server(|method, _, _| {
        match method {
        "server/discover" => Some(r#""result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}}}"#.into()),
        "tools/list" => Some(r#""result":{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}"#.into()),
        "tools/call" => Some(r#""result":{"resultType":"pending_approval"}"#.into()),
        _ => None,
    }
    });
    let conn = Client::connect(
        odd,
        modern_options(ProtocolMode::Pinned("2026-07-28".into())),
    )
    .await
    .unwrap();
    // A result without resultType (as from the tools/list above) is complete.
    assert_eq!(conn.tools().len(), 1);
    assert_eq!(
        conn.call_tool("t", json!({})).await.unwrap_err(),
        Error::Protocol(
            "tools/call answered with resultType \"pending_approval\", which this client does not know here".into()
        )
    );
}

#[tokio::test]
async fn over_streamable_http_too() {
    let server = modern_client_server();
    let http = StreamableHttpServer::new(server.clone(), HttpServerConfig::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { http.serve(listener, std::future::pending()).await });
    let conn = Arc::new(
        Client::connect_http(
            &url,
            HttpClientOptions::default(),
            modern_options(ProtocolMode::Auto),
        )
        .await
        .unwrap(),
    );
    assert!(conn.is_modern());
    let r = conn.call_tool("greet", json!({})).await.unwrap();
    assert_eq!(
        r.texts().collect::<Vec<_>>(),
        ["Hello, Ada! (1 roots, 2026-07-28)"]
    );
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let seen = tools_probe(&conn);
    conn.on("notifications/tools/list_changed", move |_| {
        let _ = tx.send(seen());
    });
    server.remove_tool("greet");
    let names = tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .expect("a list change over the listen stream")
        .unwrap();
    assert_eq!(names, ["insatiable"]);
}

/// A closure reading the connection's current tool names (for listeners; holds it weakly).
fn tools_probe(conn: &Arc<purra_protocol::Connection>) -> impl Fn() -> Vec<String> + Send + Sync {
    let weak = Arc::downgrade(conn);
    move || {
        weak.upgrade()
            .map(|c| c.tools().iter().map(|t| t.name.clone()).collect())
            .unwrap_or_default()
    }
}
