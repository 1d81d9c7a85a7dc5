//! Callers proven by tokens, end to end in one process: the gateway served over Streamable HTTP
//! behind its `[gateway.auth]` guard, checking tokens by introspection against an endpoint on
//! loopback that counts its requests; downstream, purra's client sending a bearer token; the
//! upstream a purra server counting its writes; the store a SQLite file.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use purra_core::{ApprovalId, OperatorStore};
use purra_gateway::{
    AuthSettings, ConfigSource, Gateway, IntrospectionSettings, Listen, ScopeRules,
};
use purra_protocol::http::HttpClientOptions;
use purra_protocol::types::{CallToolResult, Tool};
use purra_protocol::{CancellationToken, Client, ClientOptions, Connection, Server};
use purra_sqlite::SqliteStore;
use serde_json::json;

use crate::support::{
    approve, base_config, object, serve_upstream, set_write, text, value_input, wait_prepared,
    TempDir,
};

/// The upstream: `set_value`, counting its calls.
async fn upstream(writes: Arc<AtomicU64>, stop: CancellationToken) -> String {
    let server = Server::builder("upstream", "1.0.0").build();
    server
        .raw_tool(
            Tool::new("set_value", object(value_input())).with_description("Writes"),
            move |args, _| {
                let writes = writes.clone();
                async move {
                    let n = writes.fetch_add(1, Ordering::SeqCst) + 1;
                    let v = args["value"].clone();
                    Ok(CallToolResult::text(format!("stored {v}"))
                        .with_structured_content(json!({"stored": v, "write": n})))
                }
            },
        )
        .expect("tool");
    serve_upstream(server, stop.cancelled_owned()).await
}

/// The authorization server's introspection endpoint: `user-alice` is the user `alice` (client
/// `web`), `client-alice` a client-only token (no `sub`) of the client `alice`, any other token
/// is not active. Counts its requests.
async fn introspection(issuer: &str, audience: String, hits: Arc<AtomicU64>) -> String {
    let issuer = issuer.to_owned();
    let app = axum::Router::new().route(
        "/introspect",
        axum::routing::post(move |body: String| {
            let (issuer, audience, hits) = (issuer.clone(), audience.clone(), hits.clone());
            async move {
                hits.fetch_add(1, Ordering::SeqCst);
                let token = body
                    .split('&')
                    .find_map(|kv| kv.strip_prefix("token="))
                    .unwrap_or("");
                let exp = SystemTime::now()
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs())
                    + 3600;
                let answer = match token {
                    "user-alice" => json!({"active": true, "iss": issuer, "aud": audience,
                                           "sub": "alice", "client_id": "web", "exp": exp}),
                    "client-alice" => json!({"active": true, "iss": issuer, "aud": audience,
                                             "client_id": "alice", "exp": exp}),
                    _ => json!({"active": false}),
                };
                (
                    [(axum::http::header::CONTENT_TYPE, "application/json")],
                    answer.to_string(),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/introspect")
}

struct Fixture {
    gateway: Gateway,
    store: SqliteStore,
    url: String,
    issuer: String,
    writes: Arc<AtomicU64>,
    introspections: Arc<AtomicU64>,
    stop: CancellationToken,
    _dir: TempDir,
}

async fn fixture(name: &str) -> Fixture {
    let stop = CancellationToken::new();
    let writes = Arc::new(AtomicU64::new(0));
    let upstream_url = upstream(writes.clone(), stop.clone()).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let url = format!("http://{addr}/mcp");
    let issuer = "http://127.0.0.1:1".to_owned();
    let introspections = Arc::new(AtomicU64::new(0));
    let endpoint = introspection(&issuer, url.clone(), introspections.clone()).await;

    let dir = TempDir::new("tokens", name);
    let secret = dir.0.join("secret.txt");
    std::fs::write(&secret, "introspection-secret\n").expect("secret");
    let db = dir.0.join("tokens.db");

    let mut c = base_config(
        "tokens",
        db.clone(),
        Duration::from_millis(300),
        &upstream_url,
    );
    c.gateway.listen = Listen::Http(addr);
    c.gateway.auth = Some(AuthSettings {
        issuer: issuer.clone(),
        introspection: Some(IntrospectionSettings {
            endpoint,
            client_id: "gateway".into(),
            client_secret_file: Some(secret),
            ..IntrospectionSettings::default()
        }),
        ..AuthSettings::default()
    });
    c.writes
        .insert("set_value".into(), set_write(ScopeRules::default()));
    let store = SqliteStore::open(&db).expect("store");
    let gateway = Gateway::start(c, &ConfigSource::default(), Arc::new(store.clone()))
        .await
        .expect("start");
    {
        let gateway = gateway.clone();
        let stop = stop.clone();
        tokio::spawn(async move { gateway.serve_http(listener, stop.cancelled_owned()).await });
    }
    Fixture {
        gateway,
        store,
        url,
        issuer,
        writes,
        introspections,
        stop,
        _dir: dir,
    }
}

/// A downstream client named `tokens-client` sending `token`.
async fn client(url: &str, token: &str) -> Connection {
    let http = HttpClientOptions::default().header("authorization", format!("Bearer {token}"));
    let mut options = ClientOptions::default();
    options.client_info = purra_protocol::types::Implementation::new("tokens-client", "1");
    Client::connect_http(url, http, options)
        .await
        .expect("connect")
}

/// Finding 10 of issue 43: the user `alice` makes a write and gets its receipt; a client-only
/// token (no `sub`) whose client id is `alice`, making the identical call from a client of the
/// same name, is another principal (`ISSUER#client:alice`): it does not get alice's receipt, a
/// new approval is asked for, nothing more is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_10_a_client_only_token_does_not_get_the_users_receipt() {
    let fx = fixture("client-only").await;
    let alice = Arc::new(client(&fx.url, "user-alice").await);
    let call = {
        let alice = alice.clone();
        tokio::spawn(async move { alice.call_tool("set_value", json!({"value": "a"})).await })
    };
    let first = ApprovalId("approval-1".into());
    wait_prepared(&fx.store, &first).await;
    let asked = fx
        .store
        .approval(first.clone())
        .await
        .expect("read")
        .expect("prepared");
    assert_eq!(
        asked.request.labels["principal"],
        format!("{}#alice", fx.issuer)
    );
    fx.gateway.decide(first, approve()).await.expect("decide");
    // The wait may have ended before the decision: the same call again returns the outcome.
    let mut r = call.await.expect("join").expect("call");
    if r.structured_content.is_none() {
        r = alice
            .call_tool("set_value", json!({"value": "a"}))
            .await
            .expect("call");
    }
    assert_eq!(
        r.structured_content,
        Some(json!({"stored": "a", "write": 1})),
        "{r:?}"
    );
    assert_eq!(fx.writes.load(Ordering::SeqCst), 1);

    let other = client(&fx.url, "client-alice").await;
    let r = other
        .call_tool("set_value", json!({"value": "a"}))
        .await
        .expect("call");
    assert_eq!(r.structured_content, None, "{r:?}");
    assert!(
        text(&r).0.contains("approval approval-2 is pending"),
        "{}",
        text(&r).0
    );
    let asked = fx
        .store
        .approval(ApprovalId("approval-2".into()))
        .await
        .expect("read")
        .expect("prepared");
    assert_eq!(
        asked.request.labels["principal"],
        format!("{}#client:alice", fx.issuer)
    );
    assert_eq!(fx.writes.load(Ordering::SeqCst), 1);
    fx.stop.cancel();
    fx.gateway.shutdown().await;
}

/// Finding 6 of issue 43, through the gateway's guard: 200 made-up bearer tokens, each sent
/// twice, are introspected once each (all refused 401); a valid token used for 100 requests is
/// introspected once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_6_the_gateway_introspects_each_token_once() {
    let fx = fixture("introspection").await;
    let addr = fx
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let http = post_ping(addr.clone());
    for _ in 0..2 {
        for i in 0..200 {
            let status = http(format!("made-up-{i}")).await;
            assert_eq!(status, "HTTP/1.1 401 Unauthorized", "token {i}");
        }
    }
    assert_eq!(fx.introspections.load(Ordering::SeqCst), 200);
    let alice = client(&fx.url, "user-alice").await;
    for _ in 0..100 {
        alice.ping().await.expect("ping");
    }
    assert_eq!(fx.introspections.load(Ordering::SeqCst), 201);
    fx.stop.cancel();
    fx.gateway.shutdown().await;
}

/// A POST of a `ping` request to the gateway at `addr` with a bearer token, over a plain
/// socket; answers the status line.
fn post_ping(
    addr: String,
) -> impl Fn(String) -> std::pin::Pin<Box<dyn std::future::Future<Output = String> + Send>> {
    move |token: String| {
        let addr = addr.clone();
        Box::pin(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let body = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
            let request = format!(
                "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
                 Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let mut s = tokio::net::TcpStream::connect(&addr)
                .await
                .expect("connect");
            s.write_all(request.as_bytes()).await.expect("write");
            let mut answer = Vec::new();
            s.read_to_end(&mut answer).await.expect("read");
            String::from_utf8_lossy(&answer)
                .lines()
                .next()
                .unwrap_or("")
                .to_owned()
        })
    }
}
