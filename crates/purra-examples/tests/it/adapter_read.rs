//! The MCP host adapter's read half against purra's adapter fixture server, a separate process,
//! over stdio and over Streamable HTTP: discovery, the snapshot, every error code, and every
//! limit at its edge (at the limit passes, one over fails).

use crate::support::{self, call_registered, read_bindings, run_context, CANARY};

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use purra_core::{
    json_identity, Concurrency, ErrorCode, Lease, RunContext, ScopeCheck, ScopeDecision, ToolError,
};
use purra_mcp::{
    codes, discover_read_tools, AdapterError, CatalogMonitor, Limits, ReadBinding, ReadCatalog,
};
use purra_protocol::types::methods;
use purra_protocol::{
    Client, ClientOptions, Connection, HttpClientOptions, ProtocolMode, ProtocolVersion,
    RequestOptions, StdioCommand,
};
use serde_json::{json, Value};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Via {
    Stdio,
    Http,
}

struct Fixture {
    conn: Arc<Connection>,
    monitor: CatalogMonitor,
    /// The HTTP server process (stdio children belong to the connection).
    http: Option<std::process::Child>,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if let Some(c) = &mut self.http {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn fixture_args(page_size: usize, pad_tools: usize, pad_description_bytes: usize) -> Vec<String> {
    vec![
        "--page-size".into(),
        page_size.to_string(),
        "--pad-tools".into(),
        pad_tools.to_string(),
        "--pad-description-bytes".into(),
        pad_description_bytes.to_string(),
        "--canary".into(),
        CANARY.into(),
    ]
}

async fn connect_with(via: Via, args: Vec<String>, version: &str) -> Fixture {
    connect_opts(
        via,
        args,
        ClientOptions::default().protocol_version(version),
    )
    .await
}

async fn connect_opts(via: Via, args: Vec<String>, options: ClientOptions) -> Fixture {
    let bin = env!("CARGO_BIN_EXE_purra-adapter-fixture");
    let (conn, http) = match via {
        Via::Stdio => {
            let cmd = StdioCommand::new(bin)
                .args(args)
                .stderr(purra_protocol::StderrMode::Null);
            (Client::connect_stdio(cmd, options).await.unwrap(), None)
        }
        Via::Http => {
            let port = support::free_port();
            let child = std::process::Command::new(bin)
                .args(args)
                .args(["--http", &format!("127.0.0.1:{port}")])
                .stdin(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            support::until_accepting(port, Duration::from_secs(20), "fixture").await;
            let url = format!("http://127.0.0.1:{port}/mcp");
            let conn = Client::connect_http(&url, HttpClientOptions::default(), options)
                .await
                .unwrap();
            (conn, Some(child))
        }
    };
    let conn = Arc::new(conn);
    let monitor = CatalogMonitor::attach(&conn);
    Fixture {
        conn,
        monitor,
        http,
    }
}

async fn connect(via: Via) -> Fixture {
    connect_with(via, fixture_args(100, 0, 8), "2025-11-25").await
}

fn binding(local: &str) -> ReadBinding {
    ReadBinding::new(local, format!("Title of {local}"), ScopeCheck::OptOut)
        .concurrency(Concurrency::Safe)
}

fn bindings(pairs: &[(&str, &str)]) -> BTreeMap<String, ReadBinding> {
    read_bindings(pairs, binding)
}

fn run() -> RunContext {
    run_context("run-1", "tester")
}

async fn discover(
    fx: &Fixture,
    pairs: &[(&str, &str)],
    limits: Limits,
) -> Result<ReadCatalog, AdapterError> {
    discover_read_tools(&fx.conn, "fixture", &bindings(pairs), &fx.monitor, limits).await
}

async fn call(cat: &ReadCatalog, local: &str, args: Value) -> Result<Value, ToolError> {
    call_registered(&cat.registrations, local, args, run()).await
}

fn code(r: Result<Value, ToolError>) -> ErrorCode {
    let e = r.expect_err("a failure");
    assert!(
        !format!("{e:?} {e}").contains(CANARY),
        "remote text leaked: {e:?}"
    );
    e.code
}

fn dcode(r: Result<ReadCatalog, AdapterError>) -> ErrorCode {
    let e = r.expect_err("a failure");
    assert!(
        !format!("{e:?} {e}").contains(CANARY),
        "remote text leaked: {e:?}"
    );
    e.code
}

/// What the server saw of `tool`: `calls=N cancellations=M`.
async fn observed(fx: &Fixture, tool: &str) -> String {
    let r = fx
        .conn
        .call_tool("observed", json!({"tool": tool}))
        .await
        .unwrap();
    r.texts().collect()
}

async fn discovery_and_snapshot(via: Via) {
    let fx = connect(via).await;
    let cat = discover(
        &fx,
        &[("search", "search_docs"), ("lookup", "lookup_item")],
        Limits::default(),
    )
    .await
    .unwrap();
    let names: Vec<&str> = cat.registrations.iter().map(|r| r.name()).collect();
    assert_eq!(names, ["lookup_item", "search_docs"]);
    let snap = cat.snapshot.as_json();
    assert_eq!(snap["schemaVersion"], 1);
    assert_eq!(snap["serverId"], "fixture");
    assert_eq!(snap["protocolVersion"], "2025-11-25");
    let entries = snap["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2, "unselected tools never appear");
    assert_eq!(entries[0]["localName"], "lookup_item");
    assert_eq!(entries[0]["remoteName"], "lookup");
    assert_eq!(
        entries[0]["policy"],
        json!({"mode": "read", "title": "Title of lookup_item"})
    );
    assert_eq!(entries[0]["concurrencySafe"], true);
    assert_eq!(
        entries[0]["outputSchema"]["required"],
        json!(["id", "name"])
    );
    // The 2020-12 dialect declaration is kept in the snapshot (and so in its digest).
    assert_eq!(
        entries[1]["inputSchema"]["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    assert_eq!(entries[1]["outputSchema"], Value::Null);
    let mut without = snap.clone();
    without.as_object_mut().unwrap().remove("revisionDigest");
    assert_eq!(
        snap["revisionDigest"],
        json_identity(&without).unwrap().as_str()
    );
    assert_eq!(
        cat.snapshot.revision_digest().as_str(),
        snap["revisionDigest"]
    );
    // Deterministic: the same catalog gives the same digest.
    let again = discover(
        &fx,
        &[("lookup", "lookup_item"), ("search", "search_docs")],
        Limits::default(),
    )
    .await
    .unwrap();
    assert_eq!(
        again.snapshot.revision_digest(),
        cat.snapshot.revision_digest()
    );

    assert_eq!(
        call(&cat, "search_docs", json!({"query": "q"}))
            .await
            .unwrap(),
        json!({"text": ["found: q"], "structured": null})
    );
    assert_eq!(
        call(&cat, "lookup_item", json!({"id": 7})).await.unwrap(),
        json!({"text": ["{\"id\":7,\"name\":\"item 7\"}"], "structured": {"id": 7, "name": "item 7"}})
    );
}

#[tokio::test]
async fn stdio_discovery_and_snapshot() {
    discovery_and_snapshot(Via::Stdio).await;
}

#[tokio::test]
async fn http_discovery_and_snapshot() {
    discovery_and_snapshot(Via::Http).await;
}

async fn call_error_codes(via: Via) {
    let fx = connect(via).await;
    let pairs = [
        ("search", "search"),
        ("lookup_text_only", "lookup_text_only"),
        ("lookup_wrong", "lookup_wrong"),
        ("image", "image"),
        ("link", "link"),
        ("fails", "fails"),
        ("rpc_fails", "rpc_fails"),
        ("slow", "slow"),
        ("tasks_required", "tasks_required"),
    ];
    let limits = Limits {
        timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let cat = discover(&fx, &pairs, limits).await.unwrap();
    // Rejected before sending: no coercion ("1" is not a number; a missing field is missing).
    assert_eq!(
        code(call(&cat, "search", json!({})).await),
        codes::invalid_arguments()
    );
    assert_eq!(
        code(call(&cat, "search", json!({"query": 1})).await),
        codes::invalid_arguments()
    );
    assert_eq!(
        code(call(&cat, "tasks_required", json!({})).await),
        codes::result_unsupported()
    );
    assert_eq!(observed(&fx, "search").await, "calls=0 cancellations=0");
    assert_eq!(
        observed(&fx, "tasks_required").await,
        "calls=0 cancellations=0"
    );
    // Failures after sending.
    assert_eq!(
        code(call(&cat, "lookup_text_only", json!({"id": 1})).await),
        codes::result_invalid()
    );
    assert_eq!(
        code(call(&cat, "lookup_wrong", json!({"id": 1})).await),
        codes::result_invalid()
    );
    assert_eq!(
        code(call(&cat, "image", json!({})).await),
        codes::result_unsupported()
    );
    assert_eq!(
        code(call(&cat, "link", json!({})).await),
        codes::result_unsupported()
    );
    assert_eq!(
        code(call(&cat, "fails", json!({})).await),
        codes::tool_error()
    );
    assert_eq!(
        code(call(&cat, "rpc_fails", json!({})).await),
        codes::protocol_error()
    );
    let e = call(&cat, "slow", json!({"ms": 2000})).await.unwrap_err();
    assert_eq!(e.code, codes::timeout());
    // A read's effect is not_started, whatever happened to the request.
    assert_eq!(e.effect, purra_core::tool::Effect::NotStarted);
    // The timeout sent notifications/cancelled, and the server stopped the handler.
    let mut seen = String::new();
    for _ in 0..50 {
        seen = observed(&fx, "slow").await;
        if seen == "calls=1 cancellations=1" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(seen, "calls=1 cancellations=1");
    assert_eq!(
        call(&cat, "slow", json!({"ms": 10})).await.unwrap(),
        json!({"text": ["slept"], "structured": null})
    );
}

#[tokio::test]
async fn stdio_call_error_codes() {
    call_error_codes(Via::Stdio).await;
}

#[tokio::test]
async fn http_call_error_codes() {
    call_error_codes(Via::Http).await;
}

async fn scope_and_cancellation(via: Via) {
    let fx = connect(via).await;
    let mut b = bindings(&[("search", "search"), ("slow", "slow")]);
    b.get_mut("search").unwrap().scope = ScopeCheck::check(|args, run| {
        if run.agent == "tester" && args["query"] != "secret" {
            ScopeDecision::Allow
        } else {
            ScopeDecision::DenyWithReason(format!("not for {}", run.agent))
        }
    });
    let cat = discover_read_tools(&fx.conn, "fixture", &b, &fx.monitor, Limits::default())
        .await
        .unwrap();
    assert_eq!(
        code(call(&cat, "search", json!({"query": "secret"})).await),
        codes::scope_denied()
    );
    assert_eq!(observed(&fx, "search").await, "calls=0 cancellations=0");
    call(&cat, "search", json!({"query": "public"}))
        .await
        .unwrap();
    // Cancelling the run's lease stops local waiting and sends notifications/cancelled.
    let token = purra_protocol::CancellationToken::new();
    let mut ctx = run();
    ctx.lease = Lease::new(None, token.clone());
    let reg = cat
        .registrations
        .iter()
        .find(|r| r.name() == "slow")
        .unwrap();
    let pending = (reg.handler())(json!({"ms": 5000}), ctx);
    let cancel = async {
        tokio::time::sleep(Duration::from_millis(150)).await;
        token.cancel();
    };
    let (res, ()) = tokio::join!(pending, cancel);
    assert_eq!(code(res), ErrorCode::RUN_CANCELLED);
    let mut seen = String::new();
    for _ in 0..50 {
        seen = observed(&fx, "slow").await;
        if seen == "calls=1 cancellations=1" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(seen, "calls=1 cancellations=1");
}

#[tokio::test]
async fn stdio_scope_and_cancellation() {
    scope_and_cancellation(Via::Stdio).await;
}

#[tokio::test]
async fn http_scope_and_cancellation() {
    scope_and_cancellation(Via::Http).await;
}

async fn staleness(via: Via) {
    staleness_of(connect(via).await).await;
}

async fn staleness_of(fx: Fixture) {
    let cat = discover(
        &fx,
        &[("search", "search"), ("change_list", "change_list")],
        Limits::default(),
    )
    .await
    .unwrap();
    // The list changes while the call is in flight: the result is discarded.
    assert_eq!(
        code(call(&cat, "change_list", json!({})).await),
        codes::catalog_stale()
    );
    // Every earlier registration is stale now, and nothing more is sent.
    assert_eq!(
        code(call(&cat, "search", json!({"query": "q"})).await),
        codes::catalog_stale()
    );
    assert_eq!(observed(&fx, "search").await, "calls=0 cancellations=0");
    // Rediscovery builds a new catalog that works; it never widened itself meanwhile.
    let fresh = discover(&fx, &[("search", "search")], Limits::default())
        .await
        .unwrap();
    assert_eq!(fresh.registrations.len(), 1);
    assert_ne!(
        fresh.snapshot.revision_digest(),
        cat.snapshot.revision_digest()
    );
    call(&fresh, "search", json!({"query": "q"})).await.unwrap();
}

#[tokio::test]
async fn stdio_staleness() {
    staleness(Via::Stdio).await;
}

#[tokio::test]
async fn http_staleness() {
    staleness(Via::Http).await;
}

/// The fixture server in 2026-07-28 (pinned, no handshake): the monitor accepts the revision,
/// the snapshot records it, and the list change reaches the monitor through
/// `subscriptions/listen` with the same outcome as in the handshake era.
async fn modern_staleness(via: Via) {
    let options =
        ClientOptions::default().mode(ProtocolMode::Pinned(ProtocolVersion::new("2026-07-28")));
    let fx = connect_opts(via, fixture_args(100, 0, 8), options).await;
    assert!(fx.conn.is_modern());
    assert!(fx.conn.follows_list_changes());
    assert_eq!(fx.monitor.protocol_version().as_deref(), Some("2026-07-28"));
    let cat = discover(&fx, &[("search", "search")], Limits::default())
        .await
        .unwrap();
    assert_eq!(
        cat.snapshot.as_json()["protocolVersion"],
        json!("2026-07-28")
    );
    assert_eq!(fx.monitor.generation(), 0);
    staleness_of(fx).await;
}

#[tokio::test]
async fn stdio_modern_staleness() {
    modern_staleness(Via::Stdio).await;
}

#[tokio::test]
async fn http_modern_staleness() {
    modern_staleness(Via::Http).await;
}

#[tokio::test]
async fn stdio_connection_closed() {
    let fx = connect(Via::Stdio).await;
    let cat = discover(
        &fx,
        &[("exit", "exit"), ("search", "search")],
        Limits::default(),
    )
    .await
    .unwrap();
    // The server process exits while answering.
    assert_eq!(
        code(call(&cat, "exit", json!({})).await),
        codes::connection_closed()
    );
    // The monitor is closed with the connection: nothing is sent any more.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(fx.monitor.is_closed());
    assert_eq!(
        code(call(&cat, "search", json!({"query": "q"})).await),
        codes::connection_closed()
    );
    assert_eq!(
        dcode(discover(&fx, &[("search", "search")], Limits::default()).await),
        codes::connection_closed()
    );
}

#[tokio::test]
async fn http_transport_error() {
    let mut fx = connect(Via::Http).await;
    let cat = discover(&fx, &[("search", "search")], Limits::default())
        .await
        .unwrap();
    let mut server = fx.http.take().unwrap();
    server.kill().unwrap();
    server.wait().unwrap();
    // The HTTP connection cannot be made any more.
    assert_eq!(
        code(call(&cat, "search", json!({"query": "q"})).await),
        codes::transport_error()
    );
}

async fn discovery_codes(via: Via) {
    let fx = connect(via).await;
    assert_eq!(
        dcode(discover(&fx, &[("nope", "nope")], Limits::default()).await),
        codes::tool_missing()
    );
    // A selected tool whose schema carries `default` fails discovery: never stripped.
    assert_eq!(
        dcode(
            discover(
                &fx,
                &[("search", "search"), ("with_default", "with_default")],
                Limits::default()
            )
            .await
        ),
        codes::schema_unsupported()
    );
    assert_eq!(
        observed(&fx, "with_default").await,
        "calls=0 cancellations=0"
    );
    // Unselected, it does not matter.
    discover(&fx, &[("search", "search")], Limits::default())
        .await
        .unwrap();
    let bad = Limits {
        max_pages: 33,
        ..Limits::default()
    };
    assert_eq!(
        dcode(discover(&fx, &[("search", "search")], bad).await),
        codes::config_invalid()
    );
    assert_eq!(
        dcode(
            discover(
                &fx,
                &[("search", "same"), ("lookup", "same")],
                Limits::default()
            )
            .await
        ),
        codes::config_invalid()
    );
    assert_eq!(
        dcode(discover(&fx, &[("search", "Not-A-Local-Name")], Limits::default()).await),
        codes::config_invalid()
    );
    // Only 2025-06-18 and 2025-11-25 are supported, from the actual handshake.
    let old = connect_with(via, fixture_args(100, 0, 8), "2025-03-26").await;
    assert_eq!(old.conn.protocol_version(), "2025-03-26");
    assert_eq!(
        dcode(discover(&old, &[("search", "search")], Limits::default()).await),
        codes::protocol_version_unsupported()
    );
    let june = connect_with(via, fixture_args(100, 0, 8), "2025-06-18").await;
    let cat = discover(&june, &[("search", "search")], Limits::default())
        .await
        .unwrap();
    assert_eq!(cat.snapshot.as_json()["protocolVersion"], "2025-06-18");
}

#[tokio::test]
async fn stdio_discovery_codes() {
    discovery_codes(Via::Stdio).await;
}

#[tokio::test]
async fn http_discovery_codes() {
    discovery_codes(Via::Http).await;
}

/// The raw result size of one call, as the adapter counts it.
async fn raw_result_len(fx: &Fixture, tool: &str, args: Value) -> u64 {
    let params =
        serde_json::value::to_raw_value(&json!({"name": tool, "arguments": args})).unwrap();
    let raw = fx
        .conn
        .peer()
        .request_raw(methods::TOOLS_CALL, Some(params), RequestOptions::default())
        .await
        .unwrap();
    raw.get().len() as u64
}

/// Bytes of every tools/list page together, as the adapter counts them.
async fn catalog_bytes(fx: &Fixture) -> (u64, u32, u32) {
    let mut bytes = 0;
    let mut pages = 0;
    let mut tools = 0;
    let mut cursor: Option<String> = None;
    loop {
        let params = serde_json::value::to_raw_value(&json!({"cursor": cursor})).unwrap();
        let params = if cursor.is_none() {
            serde_json::value::to_raw_value(&json!({})).unwrap()
        } else {
            params
        };
        let raw = fx
            .conn
            .peer()
            .request_raw(methods::TOOLS_LIST, Some(params), RequestOptions::default())
            .await
            .unwrap();
        bytes += raw.get().len() as u64;
        pages += 1;
        let v: Value = serde_json::from_str(raw.get()).unwrap();
        tools += v["tools"].as_array().unwrap().len() as u32;
        match v["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return (bytes, pages, tools),
        }
    }
}

async fn limit_edges(via: Via) {
    // Page size 4 and 6 padding tools with 100-byte descriptions: several pages, many tools.
    let fx = connect_with(via, fixture_args(4, 6, 100), "2025-11-25").await;
    let (bytes, pages, tools) = catalog_bytes(&fx).await;
    assert!(pages >= 5, "{pages} pages");
    let sel = [("search", "search")];
    let at = |f: fn(&mut Limits, u64), v: u64| {
        let mut l = Limits::default();
        f(&mut l, v);
        l
    };
    let edge = |name: &'static str, f: fn(&mut Limits, u64), v: u64, over: ErrorCode| {
        let fx = &fx;
        async move {
            assert!(
                discover(fx, &sel, at(f, v)).await.is_ok(),
                "{name} at its limit {v}"
            );
            assert_eq!(
                dcode(discover(fx, &sel, at(f, v - 1)).await),
                over,
                "{name} one over {v}"
            );
        }
    };
    edge(
        "max_pages",
        |l, v| l.max_pages = v as u32,
        u64::from(pages),
        codes::catalog_too_large(),
    )
    .await;
    edge(
        "max_tools",
        |l, v| l.max_tools = v as u32,
        u64::from(tools),
        codes::catalog_too_large(),
    )
    .await;
    edge(
        "max_catalog_bytes",
        |l, v| l.max_catalog_bytes = v,
        bytes,
        codes::catalog_too_large(),
    )
    .await;
    // Schema bytes: the selected tool's schema, $schema declaration included.
    let search_schema = br#"{"$schema":"https://json-schema.org/draft/2020-12/schema","additionalProperties":false,"properties":{"query":{"minLength":1,"type":"string"}},"required":["query"],"type":"object"}"#;
    edge(
        "max_schema_bytes",
        |l, v| l.max_schema_bytes = v,
        search_schema.len() as u64,
        codes::schema_too_large(),
    )
    .await;
    let pad = [("pad_0", "pad_0")];
    let mut l = Limits {
        max_description_bytes: 100,
        ..Limits::default()
    };
    assert!(
        discover(&fx, &pad, l).await.is_ok(),
        "description at its limit"
    );
    l.max_description_bytes = 99;
    assert_eq!(
        dcode(discover(&fx, &pad, l).await),
        codes::description_too_large()
    );

    // Result bytes and content blocks, at the limit and one over.
    let cat = discover(
        &fx,
        &[("big", "big"), ("blocks", "blocks")],
        Limits::default(),
    )
    .await
    .unwrap();
    let big = raw_result_len(&fx, "big", json!({"bytes": 1000})).await;
    let limited = |l: Limits| {
        let fx = &fx;
        async move {
            discover(fx, &[("big", "big"), ("blocks", "blocks")], l)
                .await
                .unwrap()
        }
    };
    let at_limit = limited(Limits {
        max_result_bytes: big,
        ..Limits::default()
    })
    .await;
    assert!(call(&at_limit, "big", json!({"bytes": 1000})).await.is_ok());
    let over = limited(Limits {
        max_result_bytes: big - 1,
        ..Limits::default()
    })
    .await;
    assert_eq!(
        code(call(&over, "big", json!({"bytes": 1000})).await),
        codes::result_too_large()
    );
    let blocks = limited(Limits {
        max_content_blocks: 5,
        ..Limits::default()
    })
    .await;
    assert_eq!(
        call(&blocks, "blocks", json!({"n": 5})).await.unwrap()["text"]
            .as_array()
            .unwrap()
            .len(),
        5
    );
    assert_eq!(
        code(call(&blocks, "blocks", json!({"n": 6})).await),
        codes::result_too_large()
    );
    // The result budget also bounds decoded arguments: {"bytes":1000} is 14 bytes.
    let args = limited(Limits {
        max_result_bytes: 14,
        ..Limits::default()
    })
    .await;
    assert_eq!(
        code(call(&args, "big", json!({"bytes": 10000})).await),
        codes::invalid_arguments()
    );
    assert_eq!(
        code(call(&args, "big", json!({"bytes": 1000})).await),
        codes::result_too_large()
    );
    assert!(call(&cat, "big", json!({"bytes": 60000})).await.is_ok());
    assert_eq!(
        code(call(&cat, "big", json!({"bytes": 70000})).await),
        codes::result_too_large()
    );
}

#[tokio::test]
async fn stdio_limit_edges() {
    limit_edges(Via::Stdio).await;
}

#[tokio::test]
async fn http_limit_edges() {
    limit_edges(Via::Http).await;
}

#[tokio::test]
async fn every_call_code_of_the_seed_is_covered() {
    // The codes the two suites above assert, against the seed's list of call failures.
    let seed = [
        "mcp_invalid_arguments",
        // The seed's `mcp_scope_denied` is Core's `scope_denied`: one code for every scope
        // refusal (issue 44).
        "scope_denied",
        "mcp_catalog_stale",
        "mcp_connection_closed",
        "mcp_timeout",
        "mcp_protocol_error",
        "mcp_transport_error",
        "mcp_tool_error",
        "mcp_result_invalid",
        "mcp_result_unsupported",
        "mcp_result_too_large",
    ];
    let ours: Vec<String> = codes::all().iter().map(|c| c.as_str().to_owned()).collect();
    for c in seed {
        assert!(
            ours.iter().any(|o| o == c),
            "{c} missing from purra_mcp::codes"
        );
    }
}
