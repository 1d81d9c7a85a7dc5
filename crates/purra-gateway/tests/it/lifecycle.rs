//! The gateway's life while it serves, in one process: a reload of its configuration (a changed
//! binding revision refusing the approval a call waits on as a mismatch, with `list_changed`
//! downstream; a configuration with mistakes, or changing what only a restart applies, refused
//! with the running one serving on; bindings added and removed), a drain (waiting writes
//! answered as pending at once, new calls refused, a dispatch in flight waited for, or left at
//! the bound), and the health checks over HTTP (`/healthz`, `/readyz` with an upstream gone, the
//! Host rule of `allowed_hosts`). The upstream is a purra server on loopback Streamable HTTP whose
//! write waits at a gate the test opens; the store a SQLite file.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use purra_core::{ApprovalGateway, ApprovalId, ApprovalState, OperatorStore};
use purra_gateway::{
    ApprovalBy, ConfigSource, Gateway, GatewayConfig, ReadConfig, ScopeConfig, ScopeRules,
    StartOptions,
};
use purra_protocol::types::{methods, CallToolResult, Tool};
use purra_protocol::{memory, CancellationToken, Client, ClientOptions, Connection, Server};
use purra_sqlite::SqliteStore;
use serde_json::{json, Value};
use tokio::sync::Semaphore;

use crate::support::{
    approve, base_config, client_named, mistakes, object, open_read, serve_upstream, set_write,
    start_on_sqlite, text, value_input, wait_prepared, TempDir,
};

/// The upstream: `get_value`, `peek` and `set_value`, which counts its calls and then waits for a
/// permit of `gate` before it answers; over Streamable HTTP, or WebSocket with `ws` (whose
/// connection ends when the server stops). Stops serving when `stop` is cancelled.
async fn upstream(
    writes: Arc<AtomicU64>,
    gate: Arc<Semaphore>,
    stop: CancellationToken,
    ws: bool,
) -> String {
    let server = Server::builder("upstream", "1.0.0").build();
    server
        .raw_tool(
            Tool::new(
                "get_value",
                object(json!({"type": "object", "properties": {}})),
            )
            .with_description("Reads"),
            |_, _| async { Ok(CallToolResult::text("v")) },
        )
        .expect("tool");
    server
        .raw_tool(
            Tool::new("peek", object(json!({"type": "object", "properties": {}})))
                .with_description("Peeks"),
            |_, _| async { Ok(CallToolResult::text("peeked")) },
        )
        .expect("tool");
    server
        .raw_tool(
            Tool::new("set_value", object(value_input())).with_description("Writes"),
            move |args, _| {
                let writes = writes.clone();
                let gate = gate.clone();
                async move {
                    writes.fetch_add(1, Ordering::SeqCst);
                    gate.acquire().await.expect("gate").forget();
                    let v = args["value"].clone();
                    Ok(CallToolResult::text(format!("stored {v}"))
                        .with_structured_content(json!({"stored": v})))
                }
            },
        )
        .expect("tool");
    if ws {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("ws://{}/", listener.local_addr().expect("addr"));
        tokio::spawn(purra_protocol::ws::serve(
            server,
            listener,
            purra_protocol::WsServerOptions::default(),
            stop.cancelled_owned(),
        ));
        return url;
    }
    serve_upstream(server, stop.cancelled_owned()).await
}

struct Fixture {
    gateway: Gateway,
    store: SqliteStore,
    writes: Arc<AtomicU64>,
    /// Permits for the upstream's writes to answer.
    gate: Arc<Semaphore>,
    /// Stops the upstream.
    upstream_stop: CancellationToken,
    config: GatewayConfig,
    _dir: TempDir,
}

fn config(url: &str, db: PathBuf) -> GatewayConfig {
    let mut c = base_config("life", db, Duration::from_secs(60), url);
    c.reads.insert("get_value".into(), open_read("Read"));
    c.writes.insert(
        "set_value".into(),
        set_write(ScopeRules {
            principals: Some(vec!["local".into()]),
            clients: Some(vec!["life-client".into()]),
            arguments: vec![],
        }),
    );
    c
}

async fn fixture(name: &str, edit: impl FnOnce(&mut GatewayConfig)) -> Fixture {
    fixture_on(name, false, edit).await
}

async fn fixture_on(name: &str, ws: bool, edit: impl FnOnce(&mut GatewayConfig)) -> Fixture {
    fixture_opts(name, ws, edit, StartOptions::default()).await
}

async fn fixture_opts(
    name: &str,
    ws: bool,
    edit: impl FnOnce(&mut GatewayConfig),
    options: StartOptions,
) -> Fixture {
    let writes = Arc::new(AtomicU64::new(0));
    let gate = Arc::new(Semaphore::new(0));
    let upstream_stop = CancellationToken::new();
    let url = upstream(writes.clone(), gate.clone(), upstream_stop.clone(), ws).await;
    let started = start_on_sqlite(
        "life",
        name,
        |db| {
            let mut c = config(&url, db);
            edit(&mut c);
            c
        },
        options,
    )
    .await;
    Fixture {
        gateway: started.gateway,
        store: started.store,
        writes,
        gate,
        upstream_stop,
        config: started.config,
        _dir: started.dir,
    }
}

/// A downstream client (`life-client`) in this process, counting `tools/list_changed`.
async fn client(gateway: &Gateway) -> (Connection, Arc<AtomicUsize>) {
    let conn = client_named(gateway, "life-client", ClientOptions::default()).await;
    let changes = Arc::new(AtomicUsize::new(0));
    let counted = changes.clone();
    // Kept for the connection's life.
    let _listener = conn.on(methods::TOOLS_LIST_CHANGED, move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
    });
    (conn, changes)
}

fn approval(n: u64) -> ApprovalId {
    ApprovalId(format!("approval-{n}"))
}

/// Waits until `what` holds.
async fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !f() {
        assert!(start.elapsed() < Duration::from_secs(60), "never: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A reload that changes the write binding's revision: the client is told to list again, the
/// approval the call waits on (prepared under revision 1) is refused as a mismatch when it is
/// decided, nothing is sent; the same call asks for a new approval, which is sent once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_binding_revision_refuses_the_waiting_approval_as_a_mismatch() {
    let fx = fixture("mismatch", |_| {}).await;
    fx.gate.add_permits(10);
    let (conn, changes) = client(&fx.gateway).await;
    let conn = Arc::new(conn);
    let waiting = {
        let conn = conn.clone();
        tokio::spawn(async move { conn.call_tool("set_value", json!({"value": "a"})).await })
    };
    wait_prepared(&fx.store, &approval(1)).await;
    let before = fx
        .store
        .record(approval(1))
        .await
        .expect("record")
        .expect("exists")
        .intent_digest;

    let mut next = fx.config.clone();
    next.writes
        .get_mut("set_value")
        .expect("binding")
        .binding_revision = "2".into();
    let seen = changes.load(Ordering::SeqCst);
    let reloaded = fx
        .gateway
        .reload(next, &ConfigSource::default())
        .await
        .expect("reload");
    assert_eq!(reloaded.revision, 2);
    assert_eq!(reloaded.changed, ["set_value"]);
    assert!(reloaded.added.is_empty() && reloaded.removed.is_empty());
    assert_eq!(reloaded.tools, ["get_value", "set_value"]);
    assert_eq!(fx.gateway.revision(), 2);
    wait_until("list_changed downstream", || {
        changes.load(Ordering::SeqCst) > seen
    })
    .await;

    fx.gateway
        .decide(approval(1), approve())
        .await
        .expect("decide");
    let r = waiting.await.expect("join").expect("call");
    assert_eq!(
        text(&r),
        (
            "set_value was not sent: approval approval-1 was for an earlier binding of the tool, which changed since (approval_mismatch); call set_value again to ask for a new approval".to_owned(),
            true
        )
    );
    assert_eq!(fx.writes.load(Ordering::SeqCst), 0);
    let refused_record = fx
        .store
        .record(approval(1))
        .await
        .expect("record")
        .expect("exists");
    assert!(
        matches!(refused_record.state, ApprovalState::Refused(_)),
        "{refused_record:?}"
    );
    let trail: Vec<Value> = fx
        .store
        .audit(0, 1000)
        .await
        .expect("audit")
        .into_iter()
        .filter(|e| e.event == "refused" && e.approval_id.as_deref() == Some("approval-1"))
        .map(|e| e.detail)
        .collect();
    assert_eq!(trail.len(), 1, "{trail:?}");
    assert_eq!(trail[0]["reason"], "mismatch");

    // The same call again: a new approval for revision 2, sent once.
    let again = {
        let conn = conn.clone();
        tokio::spawn(async move { conn.call_tool("set_value", json!({"value": "a"})).await })
    };
    wait_prepared(&fx.store, &approval(2)).await;
    let after = fx
        .store
        .record(approval(2))
        .await
        .expect("record")
        .expect("exists")
        .intent_digest;
    assert_ne!(before, after);
    fx.gateway
        .decide(approval(2), approve())
        .await
        .expect("decide");
    let r = again.await.expect("join").expect("call");
    assert_eq!(r.structured_content, Some(json!({"stored": "a"})), "{r:?}");
    assert_eq!(fx.writes.load(Ordering::SeqCst), 1);
    fx.gateway.shutdown().await;
}

/// A configuration with a mistake, and one changing what only a restart applies, are refused
/// with every mistake; the running configuration serves on, unchanged. A binding added, then
/// removed, by reloads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_reload_leaves_the_running_configuration_serving() {
    let fx = fixture("refused", |_| {}).await;
    fx.gate.add_permits(10);
    let (conn, changes) = client(&fx.gateway).await;

    let mut broken = fx.config.clone();
    broken.writes.get_mut("set_value").expect("binding").tool = Some("nope".into());
    let e = fx
        .gateway
        .reload(broken, &ConfigSource::default())
        .await
        .expect_err("refused");
    assert_eq!(
        mistakes(e),
        ["writes.set_value: upstream \"up\" has no tool \"nope\" (it lists: get_value, peek, set_value)"]
    );
    let mut restart = fx.config.clone();
    restart.gateway.approval_wait = purra_gateway::Dur(Duration::from_secs(5));
    restart.gateway.name = "other".into();
    let e = fx
        .gateway
        .reload(restart, &ConfigSource::default())
        .await
        .expect_err("refused");
    let why = "cannot change while the gateway runs: it is read once at start; restart the gateway to apply it (SIGTERM drains it first)";
    assert_eq!(
        mistakes(e),
        [
            format!("gateway.approval_wait: {why}"),
            format!("gateway.name: {why}")
        ]
    );
    assert_eq!(fx.gateway.revision(), 1);
    assert_eq!(changes.load(Ordering::SeqCst), 0);
    let r = conn.call_tool("get_value", json!({})).await.expect("call");
    assert_eq!(text(&r), ("v".to_owned(), false));

    // A read bound under a second name is added; downstream clients are told.
    let mut added = fx.config.clone();
    added.reads.insert(
        "peek".into(),
        ReadConfig {
            upstream: "up".into(),
            tool: None,
            title: "Peek".into(),
            concurrency: Default::default(),
            scope: ScopeConfig::Open,
            tasks: false,
            asserted_read_only: false,
        },
    );
    let reloaded = fx
        .gateway
        .reload(added, &ConfigSource::default())
        .await
        .expect("reload");
    assert_eq!(
        (
            reloaded.revision,
            reloaded.added.clone(),
            reloaded.changed.clone()
        ),
        (2, vec!["peek".to_owned()], Vec::<String>::new())
    );
    assert_eq!(reloaded.tools, ["get_value", "peek", "set_value"]);
    wait_until("list_changed downstream", || {
        changes.load(Ordering::SeqCst) > 0
    })
    .await;
    let r = conn.call_tool("peek", json!({})).await.expect("call");
    assert_eq!(text(&r), ("peeked".to_owned(), false));

    // And removed again: calling it now is refused, nothing sent.
    let reloaded = fx
        .gateway
        .reload(fx.config.clone(), &ConfigSource::default())
        .await
        .expect("reload");
    assert_eq!(
        (reloaded.revision, reloaded.removed.clone()),
        (3, vec!["peek".to_owned()])
    );
    assert_eq!(fx.gateway.tool_names(), ["get_value", "set_value"]);
    fx.gateway.shutdown().await;
}

/// A drain: the write waiting for its decision is answered as pending at once; a new call is
/// refused; `/readyz`'s readiness says draining; the dispatch in flight is waited for, and its
/// receipt recorded; a reload while draining is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_answers_waiting_writes_refuses_new_calls_and_waits_for_dispatches() {
    let fx = fixture("drain", |_| {}).await;
    let (conn, _) = client(&fx.gateway).await;
    let conn = Arc::new(conn);
    // A write dispatching (the upstream holds it at its gate).
    let sending = {
        let conn = conn.clone();
        tokio::spawn(async move { conn.call_tool("set_value", json!({"value": "sent"})).await })
    };
    wait_prepared(&fx.store, &approval(1)).await;
    fx.gateway
        .decide(approval(1), approve())
        .await
        .expect("decide");
    let writes = fx.writes.clone();
    wait_until("the dispatch reached the upstream", || {
        writes.load(Ordering::SeqCst) == 1
    })
    .await;
    // A write waiting for its decision.
    let waiting = {
        let conn = conn.clone();
        tokio::spawn(async move { conn.call_tool("set_value", json!({"value": "waits"})).await })
    };
    wait_prepared(&fx.store, &approval(2)).await;
    let ready = fx.gateway.readiness().await;
    assert!(ready.ready, "{ready:?}");
    assert_eq!(fx.gateway.calls_in_flight(), 2);
    assert_eq!(fx.gateway.dispatches_in_flight(), 1);

    let drain = {
        let gateway = fx.gateway.clone();
        tokio::spawn(async move { gateway.drain(Duration::from_secs(120)).await })
    };
    let r = waiting.await.expect("join").expect("call");
    let digest = fx
        .store
        .record(approval(2))
        .await
        .expect("record")
        .expect("exists")
        .intent_digest;
    assert_eq!(
        text(&r),
        (
            format!("set_value was not sent: approval approval-2 is pending (intent {digest}). Once it is decided (purra approvals approve approval-2), call set_value again with the same arguments: an approved call is sent once; a denied one is not sent, and the same call made again after a denial asks for a new approval."),
            true
        )
    );
    let refused_call = conn.call_tool("get_value", json!({})).await.expect("call");
    assert_eq!(
        text(&refused_call),
        (
            "get_value failed: gateway_stopping (nothing was sent)".to_owned(),
            true
        )
    );
    let ready = fx.gateway.readiness().await;
    assert_eq!(
        ready.to_json(),
        json!({"ready": false, "draining": true, "revision": 1, "store": "ok",
               "upstreams": {"up": "ok"}})
    );
    assert_eq!(fx.gateway.calls_in_flight(), 1);
    assert_eq!(fx.gateway.dispatches_in_flight(), 1);
    assert!(!drain.is_finished());
    let e = fx
        .gateway
        .reload(fx.config.clone(), &ConfigSource::default())
        .await
        .expect_err("refused");
    assert_eq!(
        mistakes(e),
        ["the gateway is draining: nothing is reloaded"]
    );

    // The dispatch finishes: its receipt is the caller's, and the drain is done.
    fx.gate.add_permits(1);
    let r = sending.await.expect("join").expect("call");
    assert_eq!(
        r.structured_content,
        Some(json!({"stored": "sent"})),
        "{r:?}"
    );
    let drained = drain.await.expect("join");
    assert_eq!((drained.calls_left, drained.dispatches_left), (0, 0));
    assert_eq!(fx.writes.load(Ordering::SeqCst), 1);
    // Approval 2 is still pending in the store, for the next instance to wait on.
    let rec = fx
        .store
        .record(approval(2))
        .await
        .expect("record")
        .expect("exists");
    assert_eq!(rec.state, ApprovalState::Prepared);
    fx.gateway.shutdown().await;
}

/// A drain whose bound passes with a dispatch in flight says how many are left; the dispatch
/// goes on (its claim is in the store) and records its outcome when it ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_bound_passes_with_a_dispatch_in_flight() {
    let fx = fixture("drain-bound", |_| {}).await;
    let (conn, _) = client(&fx.gateway).await;
    let conn = Arc::new(conn);
    let sending = {
        let conn = conn.clone();
        tokio::spawn(async move { conn.call_tool("set_value", json!({"value": "slow"})).await })
    };
    wait_prepared(&fx.store, &approval(1)).await;
    fx.gateway
        .decide(approval(1), approve())
        .await
        .expect("decide");
    let writes = fx.writes.clone();
    wait_until("the dispatch reached the upstream", || {
        writes.load(Ordering::SeqCst) == 1
    })
    .await;
    let drained = fx.gateway.drain(Duration::from_millis(200)).await;
    assert_eq!((drained.calls_left, drained.dispatches_left), (1, 1));
    fx.gate.add_permits(1);
    let r = sending.await.expect("join").expect("call");
    assert_eq!(
        r.structured_content,
        Some(json!({"stored": "slow"})),
        "{r:?}"
    );
    assert_eq!(
        (
            fx.gateway.calls_in_flight(),
            fx.gateway.dispatches_in_flight()
        ),
        (0, 0)
    );
    fx.gateway.shutdown().await;
}

/// One HTTP/1.1 request on a new connection; the whole answer.
fn http(addr: std::net::SocketAddr, head: &str, body: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    write!(
        s,
        "{head}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("write");
    let mut answer = String::new();
    s.read_to_string(&mut answer).expect("read");
    answer
}

/// The status line and the body of an answer (headers left out but the content type).
fn status_and_body(answer: &str) -> (String, String) {
    let (head, body) = answer.split_once("\r\n\r\n").expect("a head");
    (
        head.lines().next().unwrap_or("").to_owned(),
        body.to_owned(),
    )
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.expect("join")
}

/// `/healthz` and `/readyz` beside `/mcp` on the gateway's own listener: exact answers, the
/// upstream gone (503, why only in [`Gateway::readiness`]), a path nobody serves (404); `allowed_hosts` letting a load
/// balancer's name through the Host rule that refuses others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_checks_and_the_host_rule_over_http() {
    // A WebSocket upstream: its connection ends when it stops.
    let fx = fixture_on("health", true, |c| {
        c.gateway.allowed_hosts = vec!["mcp.example.test".into()];
    })
    .await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let stop = CancellationToken::new();
    let serving = {
        let gateway = fx.gateway.clone();
        let stop = stop.clone();
        tokio::spawn(async move { gateway.serve_http(listener, stop.cancelled_owned()).await })
    };
    let get = |path: &'static str| {
        blocking(move || {
            status_and_body(&http(
                addr,
                &format!("GET {path} HTTP/1.1\r\nHost: 10.0.0.7:8080"),
                "",
            ))
        })
    };
    assert_eq!(
        get("/healthz").await,
        ("HTTP/1.1 200 OK".to_owned(), "ok\n".to_owned())
    );
    assert_eq!(
        get("/readyz").await,
        ("HTTP/1.1 200 OK".to_owned(), r#"{"ready":true}"#.to_owned())
    );
    assert_eq!(
        get("/elsewhere").await,
        ("HTTP/1.1 404 Not Found".to_owned(), String::new())
    );
    let post = blocking(move || {
        status_and_body(&http(addr, "POST /readyz HTTP/1.1\r\nHost: 127.0.0.1", ""))
    })
    .await;
    assert_eq!(post.0, "HTTP/1.1 405 Method Not Allowed");

    // The MCP endpoint answers the loopback names and the allowed host, and refuses others.
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"h","version":"1"}}}"#;
    let initialize = |host: &'static str| {
        blocking(move || {
            status_and_body(&http(
                addr,
                &format!(
                    "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
                     Accept: application/json, text/event-stream"
                ),
                init,
            ))
            .0
        })
    };
    assert_eq!(initialize("mcp.example.test").await, "HTTP/1.1 200 OK");
    assert_eq!(initialize("127.0.0.1:9").await, "HTTP/1.1 200 OK");
    assert_eq!(
        initialize("evil.example.test").await,
        "HTTP/1.1 403 Forbidden"
    );

    // The upstream goes away: not ready, saying which.
    fx.upstream_stop.cancel();
    let start = std::time::Instant::now();
    loop {
        let (status, body) = get("/readyz").await;
        if status == "HTTP/1.1 503 Service Unavailable" {
            // The status only: which upstream is down is the operator's, in the log.
            assert_eq!(body, r#"{"ready":false}"#);
            let ready = fx.gateway.readiness().await;
            assert_eq!(
                ready.to_json().to_string(),
                r#"{"ready":false,"draining":false,"revision":1,"store":"ok","upstreams":{"up":"down"}}"#
            );
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "still ready: {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        get("/healthz").await,
        ("HTTP/1.1 200 OK".to_owned(), "ok\n".to_owned())
    );
    stop.cancel();
    serving.await.expect("join").expect("served");
    fx.gateway.shutdown().await;
}

/// A drain while the write waits on its client's elicitation form (a binding that lets the client
/// decide, a client that never answers): the call is answered as pending at once, and the
/// approval stays undecided in the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_answers_a_write_waiting_on_its_elicitation_form() {
    let fx = fixture("drain-form", |c| {
        c.gateway.elicitation = true;
        c.writes.get_mut("set_value").expect("binding").approval = ApprovalBy::Client.into();
    })
    .await;
    let (a, b) = memory::pair();
    let server = fx.gateway.server().clone();
    tokio::spawn(async move { server.serve(a).await });
    let asked = Arc::new(AtomicUsize::new(0));
    let counted = asked.clone();
    let mut options = ClientOptions::default().on_elicitation(false, move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
        // Never answers.
        std::future::pending()
    });
    options.client_info = purra_protocol::types::Implementation::new("life-client", "1");
    let conn = Arc::new(Client::connect(b, options).await.expect("connect"));
    let waiting = {
        let conn = conn.clone();
        tokio::spawn(async move { conn.call_tool("set_value", json!({"value": "form"})).await })
    };
    wait_until("the form asked", || asked.load(Ordering::SeqCst) == 1).await;
    let drained = fx.gateway.drain(Duration::from_secs(60)).await;
    assert_eq!((drained.calls_left, drained.dispatches_left), (0, 0));
    let r = waiting.await.expect("join").expect("call");
    let digest = fx
        .store
        .record(approval(1))
        .await
        .expect("record")
        .expect("exists")
        .intent_digest;
    assert_eq!(
        text(&r),
        (
            format!("set_value was not sent: approval approval-1 is pending (intent {digest}). Once it is decided (purra approvals approve approval-1), call set_value again with the same arguments: an approved call is sent once; a denied one is not sent, and the same call made again after a denial asks for a new approval."),
            true
        )
    );
    assert_eq!(fx.writes.load(Ordering::SeqCst), 0);
    fx.gateway.shutdown().await;
}

/// The client cancels its write while the write waits on the elicitation form, eight times (the
/// form's end and the cancellation race, and either may be seen first): each wait ends without a
/// panic in the gateway (its stop is polled to its end once), the calls leave nothing in flight,
/// the connection serves on and the approvals stay undecided in the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_write_waiting_on_its_elicitation_form_ends_its_wait() {
    // Panics in the gateway's own code (its handlers run in tasks of their own, whose panic the
    // client does not see).
    let panics = Arc::new(AtomicUsize::new(0));
    {
        let panics = panics.clone();
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info
                .location()
                .is_some_and(|l| l.file().contains("purra-gateway/src"))
            {
                panics.fetch_add(1, Ordering::SeqCst);
            }
            previous(info);
        }));
    }
    let fx = fixture("cancel-form", |c| {
        c.gateway.elicitation = true;
        c.writes.get_mut("set_value").expect("binding").approval = ApprovalBy::Client.into();
    })
    .await;
    let (a, b) = memory::pair();
    let server = fx.gateway.server().clone();
    tokio::spawn(async move { server.serve(a).await });
    let asked = Arc::new(AtomicUsize::new(0));
    let counted = asked.clone();
    let mut options = ClientOptions::default().on_elicitation(false, move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
        // Never answers.
        std::future::pending()
    });
    options.client_info = purra_protocol::types::Implementation::new("life-client", "1");
    let conn = Arc::new(Client::connect(b, options).await.expect("connect"));
    for n in 1..=8 {
        let cancel = CancellationToken::new();
        let waiting = {
            let conn = conn.clone();
            let options = purra_protocol::RequestOptions {
                cancel: Some(cancel.clone()),
                ..purra_protocol::RequestOptions::default()
            };
            tokio::spawn(async move {
                conn.call_tool_with("set_value", json!({"value": format!("form {n}")}), options)
                    .await
            })
        };
        wait_until("the form asked", || asked.load(Ordering::SeqCst) == n).await;
        cancel.cancel();
        assert!(waiting.await.expect("join").is_err(), "a cancelled call");
        wait_until("the wait ended", || fx.gateway.calls_in_flight() == 0).await;
    }
    assert_eq!(panics.load(Ordering::SeqCst), 0, "the gateway panicked");
    // The connection serves on.
    let r = conn.call_tool("get_value", json!({})).await.expect("call");
    assert_eq!(text(&r), ("v".to_owned(), false));
    for n in 1..=8 {
        let record = fx
            .store
            .record(approval(n))
            .await
            .expect("record")
            .expect("exists");
        assert_eq!(record.state, ApprovalState::Prepared);
    }
    assert_eq!(fx.writes.load(Ordering::SeqCst), 0);
    fx.gateway.shutdown().await;
}

/// The caller the fixture's write binding admits dropped from its caller rules, with the same
/// `scope_revision`: `principals` names someone else.
fn drop_the_caller(c: &mut GatewayConfig) {
    c.writes
        .get_mut("set_value")
        .expect("binding")
        .scope
        .principals = Some(vec!["someone-else".into()]);
}

/// The refusals recorded for `id` in the store's audit log, as their details.
async fn refusals(store: &SqliteStore, id: &str) -> Vec<Value> {
    store
        .audit(0, 1000)
        .await
        .expect("audit")
        .into_iter()
        .filter(|e| e.event == "refused" && e.approval_id.as_deref() == Some(id))
        .map(|e| e.detail)
        .collect()
}

/// Finding 3 of issue 43: a caller waiting on a write, the file rewritten to drop that caller
/// from `principals` (the same `scope_revision`), a reload, then an operator's approval: the
/// upstream gets no request, the caller the mismatch refusal, the store records it; a new call
/// by the same caller is refused `scope_denied`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_3_a_reload_dropping_the_waiting_caller_sends_nothing() {
    let fx = fixture("revoked", |_| {}).await;
    fx.gate.add_permits(10);
    let (conn, _) = client(&fx.gateway).await;
    let conn = Arc::new(conn);
    let waiting = {
        let conn = conn.clone();
        tokio::spawn(async move { conn.call_tool("set_value", json!({"value": "a"})).await })
    };
    wait_prepared(&fx.store, &approval(1)).await;
    let prepared = fx
        .store
        .approval(approval(1))
        .await
        .expect("read")
        .expect("prepared");
    assert_eq!(prepared.request.labels["principal"], "local");
    assert_eq!(prepared.request.labels["client"], "life-client");

    let mut next = fx.config.clone();
    drop_the_caller(&mut next);
    let reloaded = fx
        .gateway
        .reload(next, &ConfigSource::default())
        .await
        .expect("reload");
    assert_eq!(reloaded.changed, ["set_value"]);

    fx.gateway
        .decide(approval(1), approve())
        .await
        .expect("decide");
    let r = waiting.await.expect("join").expect("call");
    assert_eq!(
        text(&r),
        (
            "set_value was not sent: approval approval-1 was for an earlier binding of the tool, which changed since (approval_mismatch); call set_value again to ask for a new approval".to_owned(),
            true
        )
    );
    assert_eq!(fx.writes.load(Ordering::SeqCst), 0);
    let record = fx
        .store
        .record(approval(1))
        .await
        .expect("record")
        .expect("exists");
    assert!(
        matches!(record.state, ApprovalState::Refused(_)),
        "{record:?}"
    );
    let trail = refusals(&fx.store, "approval-1").await;
    assert_eq!(trail.len(), 1, "{trail:?}");
    assert_eq!(trail[0]["reason"], "mismatch");

    // A new call by the same caller is outside the scope now.
    let r = conn
        .call_tool("set_value", json!({"value": "a"}))
        .await
        .expect("call");
    assert_eq!(
        text(&r),
        (
            "set_value failed: scope_denied (nothing was sent: the caller's principal is not one of scope.principals)".to_owned(),
            true
        )
    );
    assert_eq!(fx.writes.load(Ordering::SeqCst), 0);
    fx.gateway.shutdown().await;
}

/// Finding 3 of issue 43, across a restart: the approval a caller waited on, prepared before the
/// gateway was restarted with a file that drops that caller (the same `scope_revision`), is
/// refused as a mismatch when it is approved and the gateway runs decided writes without their
/// caller: nothing is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_3_a_restart_dropping_the_caller_refuses_the_earlier_approval() {
    let fx = fixture("restarted", |c| {
        c.gateway.run_decided_without_caller = true;
    })
    .await;
    fx.gate.add_permits(10);
    let (conn, _) = client(&fx.gateway).await;
    let conn = Arc::new(conn);
    let waiting = {
        let conn = conn.clone();
        tokio::spawn(async move { conn.call_tool("set_value", json!({"value": "a"})).await })
    };
    wait_prepared(&fx.store, &approval(1)).await;
    // The caller goes away (its session closes, ending its wait) and the gateway stops; the
    // run stays in the store.
    waiting.abort();
    let _ = waiting.await;
    drop(conn);
    tokio::time::sleep(Duration::from_millis(300)).await;
    fx.gateway.shutdown().await;

    let mut next = fx.config.clone();
    drop_the_caller(&mut next);
    let store = SqliteStore::open(&next.gateway.db).expect("store");
    let second = Gateway::start(next, &ConfigSource::default(), Arc::new(store))
        .await
        .expect("start");
    second.decide(approval(1), approve()).await.expect("decide");
    // The sweeper claims decided writes without their caller (every second).
    let start = std::time::Instant::now();
    let record = loop {
        let r = fx
            .store
            .record(approval(1))
            .await
            .expect("record")
            .expect("exists");
        if !matches!(r.state, ApprovalState::Decided(_)) {
            break r;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "never settled");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        matches!(record.state, ApprovalState::Refused(_)),
        "{record:?}"
    );
    let trail = refusals(&fx.store, "approval-1").await;
    assert_eq!(trail.len(), 1, "{trail:?}");
    assert_eq!(trail[0]["reason"], "mismatch");
    assert_eq!(fx.writes.load(Ordering::SeqCst), 0);
    second.shutdown().await;
}

/// Finding 3 of issue 43: a reload that changes only a write binding's argument rules (the same
/// `scope_revision`, the waiting call still within them) changes the binding identity its
/// approvals are bound to: the approval prepared before is refused as a mismatch, nothing sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_3_a_reload_changing_only_argument_rules_refuses_the_earlier_approval() {
    let fx = fixture("arguments", |_| {}).await;
    fx.gate.add_permits(10);
    let (conn, _) = client(&fx.gateway).await;
    let waiting =
        tokio::spawn(async move { conn.call_tool("set_value", json!({"value": "a"})).await });
    wait_prepared(&fx.store, &approval(1)).await;
    let mut next = fx.config.clone();
    next.writes
        .get_mut("set_value")
        .expect("binding")
        .scope
        .arguments = vec!["len(value) <= 100".into()];
    fx.gateway
        .reload(next, &ConfigSource::default())
        .await
        .expect("reload");
    fx.gateway
        .decide(approval(1), approve())
        .await
        .expect("decide");
    let r = waiting.await.expect("join").expect("call");
    assert!(text(&r).0.contains("(approval_mismatch)"), "{r:?}");
    assert_eq!(fx.writes.load(Ordering::SeqCst), 0);
    let trail = refusals(&fx.store, "approval-1").await;
    assert_eq!(trail.len(), 1, "{trail:?}");
    assert_eq!(trail[0]["reason"], "mismatch");
    fx.gateway.shutdown().await;
}

/// Serves the gateway's Prometheus endpoint on `bind` (port 0); its loopback address and the
/// token that stops it.
async fn metrics_on(gateway: &Gateway, bind: &str) -> (std::net::SocketAddr, CancellationToken) {
    let listener = tokio::net::TcpListener::bind(bind).await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let stop = CancellationToken::new();
    let gateway = gateway.clone();
    let token = stop.clone();
    tokio::spawn(async move {
        gateway
            .serve_metrics(listener, token.cancelled_owned())
            .await
    });
    (std::net::SocketAddr::from(([127, 0, 0, 1], port)), stop)
}

/// `GET /metrics` with `Host: host` and more header lines; status line and body.
async fn scrape(addr: std::net::SocketAddr, host: &'static str, more: String) -> (String, String) {
    blocking(move || {
        status_and_body(&http(
            addr,
            &format!("GET /metrics HTTP/1.1\r\nHost: {host}{more}"),
            "",
        ))
    })
    .await
}

/// Finding 11 of the second security review: the metrics listener answers only the loopback
/// names and `allowed_hosts`, as the MCP endpoint and the page do (a rebinding page's
/// `Host: attacker.example` is 403).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_11_the_metrics_endpoint_refuses_a_foreign_host() {
    let fx = fixture("metrics-host", |c| {
        c.gateway.allowed_hosts = vec!["metrics.example.test".into()];
    })
    .await;
    let (addr, stop) = metrics_on(&fx.gateway, "127.0.0.1:0").await;
    let (status, body) = scrape(addr, "attacker.example", String::new()).await;
    assert_eq!(
        (status.as_str(), body.as_str()),
        (
            "HTTP/1.1 403 Forbidden",
            "refused: Host \"attacker.example\" is not allowed\n"
        )
    );
    for host in ["127.0.0.1", "localhost:9464", "metrics.example.test"] {
        let (status, body) = scrape(addr, host, String::new()).await;
        assert_eq!(status, "HTTP/1.1 200 OK", "{host}");
        assert!(
            body.contains("purra_gateway_effects_total{state=\"unknown\"} 0\n"),
            "{body}"
        );
    }
    stop.cancel();
    fx.gateway.shutdown().await;
}

/// Finding 11: with `[telemetry] metrics_token_file`, a scrape without that bearer token (none,
/// another, another scheme) is 401 and one with it 200; a listener beyond loopback is warned
/// about at start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_11_the_metrics_token_is_required_when_set() {
    let log = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let lines = log.clone();
    let options =
        StartOptions::default().log(move |l: &str| lines.lock().unwrap().push(l.to_owned()));
    let token_file =
        std::env::temp_dir().join(format!("purra-gw-metrics-token-{}", std::process::id()));
    std::fs::write(&token_file, "s3cret-scrape-token\n").expect("token");
    let file = token_file.clone();
    let fx = fixture_opts(
        "metrics-token",
        false,
        move |c| c.telemetry.metrics_token_file = Some(file),
        options,
    )
    .await;
    let (addr, stop) = metrics_on(&fx.gateway, "0.0.0.0:0").await;
    for more in [
        String::new(),
        "\r\nAuthorization: Bearer s3cret-scrape-toke".to_owned(),
        "\r\nAuthorization: Bearer s3cret-scrape-token2".to_owned(),
        "\r\nAuthorization: Basic s3cret-scrape-token".to_owned(),
    ] {
        let (status, body) = scrape(addr, "127.0.0.1", more.clone()).await;
        assert_eq!(
            (status.as_str(), body.as_str()),
            ("HTTP/1.1 401 Unauthorized", "a bearer token is required\n"),
            "{more:?}"
        );
    }
    let (status, body) = scrape(
        addr,
        "127.0.0.1",
        "\r\nAuthorization: Bearer s3cret-scrape-token".to_owned(),
    )
    .await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        body.contains("purra_gateway_effects_total{state=\"unknown\"} 0\n"),
        "{body}"
    );
    let warned = log.lock().unwrap().clone();
    assert!(
        warned.iter().any(|l| l.starts_with("warning: the metrics endpoint listens on 0.0.0.0:")
            && l.ends_with("beyond loopback: scrapes need the bearer token of [telemetry] metrics_token_file")),
        "{warned:?}"
    );
    stop.cancel();
    fx.gateway.shutdown().await;
    let _ = std::fs::remove_file(token_file);
}

/// Finding 11: `/readyz` tells a caller only whether the gateway is ready, never which upstream
/// is down or what the store said; its store probe is reused for a second, so 50 checks read
/// the store once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_11_readyz_says_only_the_status_and_reads_the_store_once_a_second() {
    // A WebSocket upstream: its connection ends when it stops.
    let fx = fixture_on("readyz", true, |_| {}).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let stop = CancellationToken::new();
    {
        let gateway = fx.gateway.clone();
        let stop = stop.clone();
        tokio::spawn(async move { gateway.serve_http(listener, stop.cancelled_owned()).await });
    }
    let get = move || {
        blocking(move || {
            status_and_body(&http(addr, "GET /readyz HTTP/1.1\r\nHost: 127.0.0.1", ""))
        })
    };
    let reads = || {
        fx.gateway.metrics().value(
            purra_gateway::metrics::STORE_DURATION,
            &[("operation", "readiness")],
        )
    };
    let started = std::time::Instant::now();
    let mut checks = tokio::task::JoinSet::new();
    for _ in 0..50 {
        checks.spawn(get());
    }
    while let Some(answer) = checks.join_next().await {
        assert_eq!(
            answer.expect("check"),
            ("HTTP/1.1 200 OK".to_owned(), r#"{"ready":true}"#.to_owned())
        );
    }
    let elapsed = started.elapsed();
    eprintln!("50 checks in {elapsed:?}: {} store reads", reads());
    assert!(reads() >= 1);
    assert!(
        reads() <= 1 + elapsed.as_secs(),
        "{} store reads in {elapsed:?}",
        reads()
    );
    // The upstream gone: still only the status.
    fx.upstream_stop.cancel();
    let start = std::time::Instant::now();
    loop {
        let (status, body) = get().await;
        if status == "HTTP/1.1 503 Service Unavailable" {
            assert_eq!(body, r#"{"ready":false}"#);
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "still ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.cancel();
    fx.gateway.shutdown().await;
}
