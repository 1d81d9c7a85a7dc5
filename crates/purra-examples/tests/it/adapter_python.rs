//! The MCP host adapter's read half against an official Python SDK 2.3.0 server process
//! (`peers/python/adapter_server.py`), over stdio and Streamable HTTP: discovery, a schema with
//! `default` refused with no `tools/call` sent (checked on the server's ledger), a list change
//! arriving during a call, and no remote error text reaching the model through Core's agent; and
//! in 2026-07-28 against the SDK's `MCPServer` (`peers/python/modern.py`), a list change learned
//! through `subscriptions/listen`.

use crate::support::{self, call_registered, python, read_bindings, run_context, TempDir, CANARY};

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use purra_core::{
    Agent, Catalog, Lease, Message, RunId, RunOutcome, RunRequest, ScopeCheck, ScriptedModel,
    ToolError,
};
use purra_mcp::{codes, discover_read_tools, CatalogMonitor, Limits, ReadBinding, ReadCatalog};
use purra_protocol::{
    Client, ClientOptions, Connection, HttpClientOptions, ProtocolMode, ProtocolVersion,
    StderrMode, StdioCommand,
};
use serde_json::{json, Value};

struct Peer {
    conn: Arc<Connection>,
    monitor: CatalogMonitor,
    ledger: PathBuf,
    http: Option<std::process::Child>,
    _dir: TempDir,
}

impl Drop for Peer {
    fn drop(&mut self) {
        if let Some(c) = &mut self.http {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Starts `python ARGS` (the arguments made for a free port) serving Streamable HTTP, waits until
/// it accepts, and returns it with its endpoint's URL.
/// Held by a test while its Python HTTP server lives. `serve_http` picks a free port by binding
/// and releasing it; two servers started at once could be handed the same port, and the second
/// would fail to bind while its test connected to the first's (seen once in CI as a refused
/// connection once the other test ended). One HTTP server at a time in this binary rules it out.
static HTTP_SERVER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn serve_http(
    args: impl FnOnce(u16) -> Vec<std::ffi::OsString>,
) -> (std::process::Child, String) {
    let port = support::free_port();
    let child = std::process::Command::new(python())
        .args(args(port))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    support::until_accepting(port, Duration::from_secs(30), "python server").await;
    (child, format!("http://127.0.0.1:{port}/mcp"))
}

async fn start(http: bool) -> Peer {
    let dir = TempDir::new("adapter-py");
    let ledger = dir.0.join("ledger.txt");
    let script = support::repo_root().join("peers/python/adapter_server.py");
    let (conn, child) = if http {
        let (child, url) = serve_http(|port| {
            vec![
                script.clone().into(),
                "--http".into(),
                port.to_string().into(),
                "--ledger".into(),
                ledger.clone().into(),
            ]
        })
        .await;
        (
            Client::connect_http(&url, HttpClientOptions::default(), ClientOptions::default())
                .await
                .unwrap(),
            Some(child),
        )
    } else {
        let cmd = StdioCommand::new(python())
            .args([script.as_os_str(), "--ledger".as_ref(), ledger.as_os_str()])
            .stderr(StderrMode::Null);
        (
            Client::connect_stdio(cmd, ClientOptions::default())
                .await
                .unwrap(),
            None,
        )
    };
    let conn = Arc::new(conn);
    let monitor = CatalogMonitor::attach(&conn);
    Peer {
        conn,
        monitor,
        ledger,
        http: child,
        _dir: dir,
    }
}

fn ledger(p: &Peer) -> Vec<String> {
    std::fs::read_to_string(&p.ledger)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn bindings(pairs: &[(&str, &str)]) -> BTreeMap<String, ReadBinding> {
    read_bindings(pairs, |local| {
        ReadBinding::new(local, format!("Title of {local}"), ScopeCheck::OptOut)
    })
}

async fn discover(
    p: &Peer,
    pairs: &[(&str, &str)],
) -> Result<ReadCatalog, purra_mcp::AdapterError> {
    discover_read_tools(
        &p.conn,
        "python",
        &bindings(pairs),
        &p.monitor,
        Limits::default(),
    )
    .await
}

async fn call(cat: &ReadCatalog, local: &str, args: Value) -> Result<Value, ToolError> {
    call_registered(
        &cat.registrations,
        local,
        args,
        run_context("run-py", "tester"),
    )
    .await
}

async fn against_python(http: bool) {
    let _one_server = if http {
        Some(HTTP_SERVER.lock().await)
    } else {
        None
    };
    let p = start(http).await;
    assert_eq!(p.conn.server_info().name, "adapter-python");
    let cat = discover(&p, &[("search", "search"), ("lookup", "lookup")])
        .await
        .unwrap();
    assert_eq!(cat.snapshot.as_json()["protocolVersion"], "2025-11-25");
    assert_eq!(
        call(&cat, "search", json!({"query": "q"})).await.unwrap(),
        json!({"text": ["found: q"], "structured": null})
    );
    assert_eq!(
        call(&cat, "lookup", json!({"id": 3})).await.unwrap()["structured"],
        json!({"id": 3, "name": "item 3"})
    );
    // `default` in a selected schema: discovery fails, nothing is stripped, nothing is called.
    let err = discover(
        &p,
        &[("search", "search"), ("with_default", "with_default")],
    )
    .await
    .unwrap_err();
    assert_eq!(err.code, codes::schema_unsupported());
    assert_eq!(
        ledger(&p),
        ["search", "lookup"],
        "no tools/call for with_default"
    );
    // Failures are codes; remote text stays out.
    let cat = discover(
        &p,
        &[
            ("fails", "fails"),
            ("rpc_fails", "rpc_fails"),
            ("image", "image"),
            ("change_list", "change_list"),
            ("search", "search"),
        ],
    )
    .await
    .unwrap();
    for (tool, want) in [
        ("fails", codes::tool_error()),
        ("rpc_fails", codes::protocol_error()),
        ("image", codes::result_unsupported()),
    ] {
        let e = call(&cat, tool, json!({})).await.unwrap_err();
        assert_eq!(e.code, want, "{tool}");
        assert!(
            !format!("{e:?} {e}").contains(CANARY),
            "remote text leaked: {e:?}"
        );
    }
    // A list_changed arriving during a call: the result is discarded, the catalog is stale.
    assert_eq!(
        call(&cat, "change_list", json!({})).await.unwrap_err().code,
        codes::catalog_stale()
    );
    assert_eq!(
        call(&cat, "search", json!({"query": "q"}))
            .await
            .unwrap_err()
            .code,
        codes::catalog_stale()
    );
    let calls = ledger(&p);
    assert_eq!(
        calls.iter().filter(|c| *c == "search").count(),
        1,
        "{calls:?}"
    );
    let fresh = discover(&p, &[("search", "search")]).await.unwrap();
    call(&fresh, "search", json!({"query": "again"}))
        .await
        .unwrap();
}

#[tokio::test]
async fn stdio_adapter_against_the_python_sdk() {
    against_python(false).await;
}

#[tokio::test]
async fn http_adapter_against_the_python_sdk() {
    against_python(true).await;
}

/// The adapter on a 2026-07-28 connection to the Python SDK's `MCPServer`
/// (`peers/python/modern.py server`): the monitor accepts the revision, and a tool added at
/// runtime, announced on `subscriptions/listen`, makes the registrations stale.
async fn against_python_modern(http: bool) {
    let _one_server = if http {
        Some(HTTP_SERVER.lock().await)
    } else {
        None
    };
    let script = support::repo_root().join("peers/python/modern.py");
    let options =
        ClientOptions::default().mode(ProtocolMode::Pinned(ProtocolVersion::new("2026-07-28")));
    let (conn, mut child) = if http {
        let (child, url) = serve_http(|port| {
            vec![
                script.clone().into(),
                "server".into(),
                "--http".into(),
                port.to_string().into(),
            ]
        })
        .await;
        let conn = Client::connect_http(&url, HttpClientOptions::default(), options)
            .await
            .unwrap();
        (conn, Some(child))
    } else {
        let cmd = StdioCommand::new(python())
            .args([script.as_os_str(), "server".as_ref()])
            .stderr(StderrMode::Null);
        (Client::connect_stdio(cmd, options).await.unwrap(), None)
    };
    let conn = Arc::new(conn);
    let monitor = CatalogMonitor::attach(&conn);
    assert!(conn.is_modern());
    assert_eq!(conn.server_info().name, "fixture-python-modern");
    assert_eq!(monitor.protocol_version().as_deref(), Some("2026-07-28"));
    let cat = discover_read_tools(
        &conn,
        "python",
        &bindings(&[("echo", "echo")]),
        &monitor,
        Limits::default(),
    )
    .await
    .unwrap();
    assert_eq!(cat.snapshot.as_json()["protocolVersion"], "2026-07-28");
    assert_eq!(
        call(&cat, "echo", json!({"text": "hi"})).await.unwrap(),
        json!({"text": ["hi"], "structured": {"result": "hi"}})
    );
    // The host's own client adds a tool; the change arrives on the listen stream.
    conn.call_tool("add_tool", json!({"name": "late"}))
        .await
        .unwrap();
    let start = std::time::Instant::now();
    while monitor.generation() == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no list change reached the monitor"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        call(&cat, "echo", json!({"text": "hi"}))
            .await
            .unwrap_err()
            .code,
        codes::catalog_stale()
    );
    let fresh = discover_read_tools(
        &conn,
        "python",
        &bindings(&[("echo", "echo"), ("late", "late")]),
        &monitor,
        Limits::default(),
    )
    .await
    .unwrap();
    assert_eq!(
        call(&fresh, "late", json!({})).await.unwrap(),
        json!({"text": ["late called"], "structured": {"result": "late called"}})
    );
    conn.close().await;
    if let Some(c) = &mut child {
        let _ = c.kill();
        let _ = c.wait();
    }
}

#[tokio::test]
async fn stdio_adapter_against_the_python_sdk_in_2026_07_28() {
    against_python_modern(false).await;
}

#[tokio::test]
async fn http_adapter_against_the_python_sdk_in_2026_07_28() {
    against_python_modern(true).await;
}

#[tokio::test]
async fn no_remote_error_text_reaches_the_model() {
    let p = start(false).await;
    let cat = discover(
        &p,
        &[
            ("fails", "fails"),
            ("rpc_fails", "rpc_fails"),
            ("search", "search"),
        ],
    )
    .await
    .unwrap();
    let catalog = Arc::new(Catalog::new(cat.registrations).unwrap());
    let model = Arc::new(ScriptedModel::new(
        "scripted",
        vec![
            ScriptedModel::calls(&[("c1", "fails", json!({}))]),
            ScriptedModel::calls(&[("c2", "rpc_fails", json!({}))]),
            ScriptedModel::calls(&[("c3", "search", json!({"query": "ok"}))]),
            ScriptedModel::text("done"),
        ],
    ));
    let agent = Agent::builder("reader", model.clone(), catalog)
        .build()
        .unwrap();
    let outcome = agent
        .run(RunRequest {
            run_id: RunId::new("run-canary"),
            root_run_id: None,
            input: "go".into(),
            lease: Lease::unbounded(),
        })
        .await;
    assert_eq!(
        outcome,
        RunOutcome::Completed {
            text: "done".into()
        }
    );
    let transcripts = model.transcripts();
    let last: &Vec<Message> = transcripts.last().unwrap();
    let seen = format!("{last:?}");
    assert!(
        seen.contains("mcp_tool_error") && seen.contains("mcp_protocol_error"),
        "{seen}"
    );
    assert!(seen.contains("found: ok"), "{seen}");
    assert!(
        !seen.contains(CANARY),
        "remote error text reached the model: {seen}"
    );
    // The server really did produce the canary: it is in what it answered, not in what the model saw.
    let raw = p.conn.call_tool("fails", json!({})).await.unwrap();
    assert!(raw.texts().any(|t| t.contains(CANARY)));
}
