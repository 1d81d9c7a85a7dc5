//! The gateway as a library, in one process: an upstream purra server on loopback Streamable
//! HTTP, the gateway started from a configuration built in code on a SQLite file, and purra's
//! client as the downstream client over an in-memory transport. Exact results for what the
//! end-to-end tests do not reach cheaply: remote error text never passing through, scope
//! refusals before anything is prepared, identical calls racing, expiry, in-process decisions.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use purra_core::{
    ApprovalGateway, ApprovalId, ApprovalQuery, ApprovalStatus, Decision, OperatorStore, Verdict,
    PRINCIPAL_LABEL,
};
use purra_gateway::{
    app_uri, ApprovalBy, ConfigSource, Dur, Gateway, GatewayConfig, Listen, ReadConfig,
    ScopeConfig, ScopeRules, StartOptions, APPROVAL_TOOL,
};
use purra_protocol::types::{CallToolResult, Tool};
use purra_protocol::{
    apps, memory, Client, ClientOptions, Connection, ErrorObject, HandlerError, Server,
};
use purra_sqlite::SqliteStore;
use serde_json::{json, Value};

use crate::support::{
    approval_by, base_config, client_named, in_own_process, object, open_read, serve_upstream,
    set_write, start_on_sqlite, text, value_input, TempDir,
};

fn tool(name: &str, input: Value, output: Option<Value>) -> Tool {
    let tool = Tool::new(name, object(input)).with_description(format!("{name} upstream"));
    match output {
        Some(output) => tool.with_output_schema(object(output)),
        None => tool,
    }
}

/// The upstream: `get_value`, `leak` (an `isError` result full of internal text), `explode` (a
/// JSON-RPC error with internal text) and `set_value`, which counts its calls.
async fn upstream(writes: Arc<AtomicU64>) -> String {
    let server = Server::builder("upstream", "1.0.0").build();
    let value_schema = value_input();
    server
        .raw_tool(
            tool(
                "get_value",
                json!({"type": "object", "properties": {}}),
                None,
            ),
            |_, _| async { Ok(CallToolResult::text("v")) },
        )
        .expect("tool");
    server
        .raw_tool(
            tool(
                "count",
                json!({"type": "object", "properties": {"n": {"type": "integer"}},
                    "required": ["n"], "additionalProperties": false}),
                None,
            ),
            |_, _| async { Ok(CallToolResult::text("counted")) },
        )
        .expect("tool");
    server
        .raw_tool(
            tool("leak", json!({"type": "object", "properties": {}}), None),
            |_, _| async { Ok(CallToolResult::error("SECRET: /srv/db password=hunter2")) },
        )
        .expect("tool");
    server
        .raw_tool(
            tool("explode", json!({"type": "object", "properties": {}}), None),
            |_, _| async {
                Err(HandlerError::rpc(ErrorObject::new(
                    purra_protocol::RpcErrorCode(-32000),
                    "SECRET stack trace",
                )))
            },
        )
        .expect("tool");
    server
        .raw_tool(
            tool(
                "set_value",
                value_schema,
                Some(
                    json!({"type": "object", "properties": {"stored": {"type": "string"}},
                    "required": ["stored"], "additionalProperties": false}),
                ),
            ),
            move |args, _| {
                let writes = writes.clone();
                async move {
                    writes.fetch_add(1, Ordering::SeqCst);
                    // Slow enough for identical calls to overlap.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    let v = args["value"].clone();
                    Ok(CallToolResult::text(format!("stored {v}"))
                        .with_structured_content(json!({"stored": v})))
                }
            },
        )
        .expect("tool");
    serve_upstream(server, std::future::pending()).await
}

struct Fixture {
    gateway: Gateway,
    store: SqliteStore,
    writes: Arc<AtomicU64>,
    /// The configuration the gateway started with (a second gateway on the store can share it).
    config: GatewayConfig,
    _dir: TempDir,
}

fn config(url: &str, db: PathBuf, wait: Duration) -> GatewayConfig {
    let mut c = base_config("flow", db, wait, url);
    for name in ["get_value", "leak", "explode"] {
        c.reads.insert(name.into(), open_read(name));
    }
    c.writes.insert(
        "set_value".into(),
        set_write(ScopeRules {
            principals: Some(vec!["local".into()]),
            clients: Some(vec!["flow-client".into()]),
            arguments: vec!["len(value) <= 5".into()],
        }),
    );
    c
}

async fn fixture(name: &str, wait: Duration) -> Fixture {
    fixture_with(name, wait, |_| {}).await
}

async fn fixture_with(
    name: &str,
    wait: Duration,
    edit: impl FnOnce(&mut GatewayConfig),
) -> Fixture {
    fixture_opts(name, wait, edit, StartOptions::default()).await
}

async fn fixture_opts(
    name: &str,
    wait: Duration,
    edit: impl FnOnce(&mut GatewayConfig),
    options: StartOptions,
) -> Fixture {
    let writes = Arc::new(AtomicU64::new(0));
    let url = upstream(writes.clone()).await;
    let started = start_on_sqlite(
        "flow",
        name,
        |db| {
            let mut c = config(&url, db, wait);
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
        config: started.config,
        _dir: started.dir,
    }
}

async fn client(gateway: &Gateway, name: &str) -> Connection {
    client_with(gateway, name, ClientOptions::default()).await
}

async fn client_with(gateway: &Gateway, name: &str, options: ClientOptions) -> Connection {
    client_named(gateway, name, options).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_bound_tools_and_no_remote_error_text() {
    let fx = fixture("reads", Duration::from_secs(1)).await;
    let conn = client(&fx.gateway, "flow-client").await;
    let names: Vec<String> = conn.tools().iter().map(|t| t.name.clone()).collect();
    assert_eq!(names, ["explode", "get_value", "leak", "set_value"]);
    let ok = conn.call_tool("get_value", json!({})).await.expect("call");
    assert_eq!(text(&ok), ("v".to_owned(), false));
    let leak = conn.call_tool("leak", json!({})).await.expect("call");
    assert_eq!(
        text(&leak),
        (
            "leak failed: mcp_tool_error (nothing was written)".to_owned(),
            true
        )
    );
    let explode = conn.call_tool("explode", json!({})).await.expect("call");
    assert_eq!(
        text(&explode),
        (
            "explode failed: mcp_protocol_error (nothing was written)".to_owned(),
            true
        )
    );
    fx.gateway.shutdown().await;
}

/// Issue 44, frictions: a caller is listed only the tools its caller rules let it call, and a
/// write tool's description tells the model that its call waits for a person.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_caller_is_listed_what_it_may_call_and_a_write_says_it_waits() {
    let fx = fixture("listed", Duration::from_secs(1)).await;
    let stranger = client(&fx.gateway, "stranger").await;
    let names: Vec<String> = stranger.tools().iter().map(|t| t.name.clone()).collect();
    assert_eq!(names, ["explode", "get_value", "leak"]);
    let known = client(&fx.gateway, "flow-client").await;
    let described: Vec<(String, Option<String>)> = known
        .tools()
        .iter()
        .map(|t| (t.name.clone(), t.description.clone()))
        .collect();
    assert_eq!(
        described,
        [
            ("explode".to_owned(), Some("explode upstream".to_owned())),
            (
                "get_value".to_owned(),
                Some("get_value upstream".to_owned())
            ),
            ("leak".to_owned(), Some("leak upstream".to_owned())),
            (
                "set_value".to_owned(),
                Some(format!(
                    "set_value upstream\n\n{}",
                    purra_gateway::WRITE_WAITS
                ))
            ),
        ]
    );
    assert_eq!(
        purra_gateway::WRITE_WAITS,
        "A call of this tool waits for a person to approve it; if the wait ends first, the \
         result names the pending approval, and the same call made again once it is approved \
         is sent once."
    );
    fx.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scope_refusals_prepare_nothing() {
    let logged = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let sink = logged.clone();
    let fx = fixture_opts(
        "scope",
        Duration::from_secs(1),
        |_| {},
        StartOptions::default().log(move |m| sink.lock().unwrap().push(m.to_owned())),
    )
    .await;
    let stranger = client(&fx.gateway, "stranger").await;
    let r = stranger
        .call_tool("set_value", json!({"value": "a"}))
        .await
        .expect("call");
    assert_eq!(
        text(&r),
        (
            "set_value failed: scope_denied (nothing was sent: the caller's client name is not one of scope.clients)".to_owned(),
            true
        )
    );
    // Issue 44, defect 4: one code for a caller rule and an argument rule, and the refusal
    // names the rule that did not hold and the value's path, never the value.
    let known = client(&fx.gateway, "flow-client").await;
    let r = known
        .call_tool("set_value", json!({"value": "toolong"}))
        .await
        .expect("call");
    assert_eq!(
        text(&r),
        (
            "set_value failed: scope_denied (nothing was sent: the argument rule `len(value) <= 5` does not hold for the value at `value`)".to_owned(),
            true
        )
    );
    // Each refusal is logged (at the default level: the host's log), without the value.
    let lines: Vec<String> = logged
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.starts_with("scope: "))
        .cloned()
        .collect();
    assert_eq!(
        lines,
        [
            "scope: the call of set_value by local was refused (writes.set_value.scope): the caller's client name is not one of scope.clients",
            "scope: the call of set_value by local was refused (writes.set_value.scope): the argument rule `len(value) <= 5` does not hold for the value at `value`",
        ]
    );
    assert_eq!(fx.store.suspended_run_ids().await.expect("runs"), []);
    assert_eq!(
        fx.store.record(ApprovalId("approval-1".into())).await,
        Ok(None)
    );
    assert_eq!(fx.writes.load(Ordering::SeqCst), 0);
    fx.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_calls_racing_send_once_after_an_in_process_decision() {
    let fx = fixture("race", Duration::from_secs(30)).await;
    let conn = Arc::new(client(&fx.gateway, "flow-client").await);
    let calls: Vec<_> = (0..3)
        .map(|_| {
            let conn = conn.clone();
            tokio::spawn(async move { conn.call_tool("set_value", json!({"value": "x"})).await })
        })
        .collect();
    // One approval for the three identical calls.
    let id = ApprovalId("approval-1".into());
    while fx.store.record(id.clone()).await.expect("record").is_none() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    fx.gateway
        .decide(id.clone(), approval_by("page", Duration::from_secs(60)))
        .await
        .expect("decide");
    for c in calls {
        let r = c.await.expect("join").expect("call");
        assert_eq!(r.structured_content, Some(json!({"stored": "x"})), "{r:?}");
    }
    assert_eq!(fx.writes.load(Ordering::SeqCst), 1);
    assert_eq!(
        fx.store.record(ApprovalId("approval-2".into())).await,
        Ok(None)
    );
    fx.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_that_expired_is_refused_and_never_sent() {
    let fx = fixture("expiry", Duration::from_millis(300)).await;
    let conn = client(&fx.gateway, "flow-client").await;
    let r = conn
        .call_tool("set_value", json!({"value": "late"}))
        .await
        .expect("call");
    assert!(
        text(&r).0.contains("approval approval-1 is pending"),
        "{r:?}"
    );
    fx.store
        .decide(
            ApprovalId("approval-1".into()),
            approval_by("ada", Duration::from_millis(100)),
        )
        .await
        .expect("decide");
    // No caller waits: the sweeper finds it expired, records the refusal and drops the run.
    let start = std::time::Instant::now();
    while !fx.store.suspended_run_ids().await.expect("runs").is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the sweeper did not expire it"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let rec = fx
        .store
        .record(ApprovalId("approval-1".into()))
        .await
        .expect("record")
        .expect("exists");
    assert!(
        matches!(rec.state, purra_core::ApprovalState::Refused(_)),
        "{rec:?}"
    );
    // Calling again asks for a new approval; nothing was ever sent.
    let again = conn
        .call_tool("set_value", json!({"value": "late"}))
        .await
        .expect("call");
    assert!(
        text(&again).0.contains("approval approval-2 is pending"),
        "{again:?}"
    );
    assert_eq!(fx.writes.load(Ordering::SeqCst), 0);
    fx.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undecided_request_expires_and_the_same_call_asks_anew() {
    // The second call starts about 2 s into the request's 3 s: a second of margin either way.
    let fx = fixture_with("request-expiry", Duration::from_millis(2000), |c| {
        apps_on(c);
        c.gateway.approval_request_ttl = Dur(Duration::from_millis(3000));
    })
    .await;
    let conn = client_with(&fx.gateway, "flow-client", ClientOptions::default().apps()).await;
    let call = || conn.call_tool("set_value", json!({"value": "v"}));
    let first = call().await.expect("call");
    assert!(
        text(&first).0.contains("approval approval-1 is pending"),
        "{first:?}"
    );
    let a1 = ApprovalId("approval-1".into());
    let view1 = fx
        .store
        .approval(a1.clone())
        .await
        .expect("view")
        .expect("exists");
    assert_eq!(
        view1.request.expires_at,
        Some(view1.request.requested_at + Duration::from_millis(3000))
    );
    // The same call waits only until the request expires (about 1 s, not approval_wait).
    let started = std::time::Instant::now();
    let second = call().await.expect("call");
    assert_eq!(
        text(&second),
        (
            "set_value was not sent: approval approval-1 was not decided before its request \
             expired (approval_request_expired); call set_value again with the same arguments \
             to ask for a new approval"
                .to_owned(),
            true
        )
    );
    assert!(
        started.elapsed() < Duration::from_millis(1900),
        "{:?}",
        started.elapsed()
    );
    // No decision is accepted any more, and the approval view says why.
    let late = fx
        .store
        .decide(a1.clone(), approval_by("ada", Duration::from_secs(60)))
        .await;
    assert_eq!(
        late,
        Err(purra_core::StoreError::Conflict(
            "the approval request expired"
        ))
    );
    let shown = view(&conn, "v", json!({"approval": "approval-1"})).await;
    assert_eq!(status(&shown), "expired", "{shown:?}");
    let tried = view(
        &conn,
        "v",
        json!({"approval": "approval-1", "decision": "approve"}),
    )
    .await;
    assert_eq!(
        text(&tried),
        (
            "approval approval-1 of set_value: expired; nothing was decided: the approval is not \
             pending any more"
                .to_owned(),
            true
        )
    );
    // No caller waits: the sweeper drops the run (the approval stays, undecided).
    let start = std::time::Instant::now();
    while !fx.store.suspended_run_ids().await.expect("runs").is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the sweeper did not drop it"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        fx.store
            .record(a1)
            .await
            .expect("record")
            .expect("exists")
            .state,
        purra_core::ApprovalState::Prepared
    );
    // Calling again asks for a new approval, which sends the write once when approved.
    let third = call().await.expect("call");
    assert!(
        text(&third).0.contains("approval approval-2 is pending"),
        "{third:?}"
    );
    fx.gateway
        .decide(
            ApprovalId("approval-2".into()),
            approval_by("ada", Duration::from_secs(60)),
        )
        .await
        .expect("decide");
    let sent = call().await.expect("call");
    assert_eq!(
        sent.structured_content,
        Some(json!({"stored": "v"})),
        "{sent:?}"
    );
    assert_eq!(fx.writes.load(Ordering::SeqCst), 1);
    fx.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_call_replaces_a_request_that_expired_while_nobody_called() {
    let fx = fixture_with("request-replaced", Duration::from_millis(50), |c| {
        c.gateway.approval_request_ttl = Dur(Duration::from_millis(300));
    })
    .await;
    let conn = client(&fx.gateway, "flow-client").await;
    let call = || conn.call_tool("set_value", json!({"value": "w"}));
    let first = call().await.expect("call");
    assert!(
        text(&first).0.contains("approval approval-1 is pending"),
        "{first:?}"
    );
    // Past its expiry, before the sweeper (every second) looked: the run still names it.
    tokio::time::sleep(Duration::from_millis(350)).await;
    let second = call().await.expect("call");
    assert!(
        text(&second).0.contains("approval approval-2 is pending"),
        "{second:?}"
    );
    assert_eq!(fx.writes.load(Ordering::SeqCst), 0);
    fx.gateway.shutdown().await;
}

/// Issue 43 finding 7: in the approval view, a decider named after a client's self-declared
/// name (`NAME (app)`) is shown on one line, escaped and bounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_7_the_view_shows_a_clients_name_escaped_and_bounded() {
    let fx = fixture_with("view-name", Duration::from_secs(30), |c| {
        apps_on(c);
        if let Some(w) = c.writes.get_mut("set_value") {
            w.scope.clients = None;
        }
    })
    .await;
    let long = "x".repeat(10_000);
    for (name, value, shown) in [
        (
            "evil\u{202e}\nname",
            "a",
            "evil\\u202e\\nname (app)".to_owned(),
        ),
        (
            long.as_str(),
            "b",
            format!("{}\u{2026} (app)", "x".repeat(128)),
        ),
    ] {
        let conn = Arc::new(client_with(&fx.gateway, name, ClientOptions::default().apps()).await);
        let call = {
            let conn = conn.clone();
            tokio::spawn(async move { conn.call_tool("set_value", json!({"value": value})).await })
        };
        view_until(&conn, value, "pending").await;
        let decided = view(&conn, value, json!({"decision": "approve"})).await;
        let s = decided.structured_content.clone().expect("structured");
        assert_eq!(s["decidedBy"], json!(shown), "{s}");
        call.await.expect("join").expect("call");
    }
    assert_eq!(fx.writes.load(Ordering::SeqCst), 2);
    fx.gateway.shutdown().await;
}

/// Issue 44, friction: a denied call's run stayed `suspended` for ever. Its caller calling again
/// is told the denial (and that the same call made again asks anew) while the request would
/// have accepted a decision; after that the sweeper closes the run, and the same call made again
/// is a new request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_calls_run_is_closed_and_the_same_call_asks_anew() {
    let fx = fixture_with("denied-closed", Duration::from_millis(100), |c| {
        c.gateway.approval_request_ttl = Dur(Duration::from_millis(1500));
    })
    .await;
    let conn = client(&fx.gateway, "flow-client").await;
    let call = || conn.call_tool("set_value", json!({"value": "d"}));
    let first = call().await.expect("call");
    assert!(
        text(&first).0.contains("approval approval-1 is pending"),
        "{first:?}"
    );
    fx.store
        .decide(
            ApprovalId("approval-1".into()),
            Decision {
                verdict: Verdict::Deny,
                approver: "ada".into(),
                decided_at: SystemTime::now(),
                expires_at: None,
                note: None,
            },
        )
        .await
        .expect("decide");
    let start = std::time::Instant::now();
    while !fx.store.suspended_run_ids().await.expect("runs").is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the denied call's run was never closed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let again = call().await.expect("call");
    assert!(
        text(&again).0.contains("approval approval-2 is pending"),
        "{again:?}"
    );
    assert_eq!(fx.writes.load(Ordering::SeqCst), 0);
    fx.gateway.shutdown().await;
}

/// `set_value` decided by `group:sre` only, whose one member is bob.
fn from_sre(c: &mut GatewayConfig) {
    c.writes.get_mut("set_value").expect("write").approval =
        purra_gateway::ApprovalConfig::Rule(purra_gateway::ApprovalRule {
            from: vec!["group:sre".into()],
            ..Default::default()
        });
    c.approvers.groups.insert("sre".into(), vec!["bob".into()]);
}

/// `Gateway::decide` (an embedding host's decision, recorded as `NAME (api)`) checks a
/// workflow's `from` with the configuration's `[approvers.groups]`: someone outside is refused
/// and nothing is recorded; a member decides and the waiting call is sent once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_s_decision_is_refused_outside_the_workflow_s_from() {
    let fx = fixture_with("api-from", Duration::from_secs(30), from_sre).await;
    let conn = Arc::new(client(&fx.gateway, "flow-client").await);
    let waiting = {
        let conn = conn.clone();
        tokio::spawn(async move { conn.call_tool("set_value", json!({"value": "q"})).await })
    };
    let id = ApprovalId("approval-1".into());
    while fx.store.record(id.clone()).await.expect("record").is_none() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        fx.gateway
            .decide(id.clone(), approval_by("eve", Duration::from_secs(60)))
            .await,
        Err(purra_core::StoreError::Conflict(
            purra_core::NotAVoter::CONFLICT
        ))
    );
    let rec = fx
        .store
        .record(id.clone())
        .await
        .expect("record")
        .expect("exists");
    assert_eq!(rec.state, purra_core::ApprovalState::Prepared, "{rec:?}");
    fx.gateway
        .decide(id.clone(), approval_by("bob", Duration::from_secs(60)))
        .await
        .expect("bob is in group:sre");
    let r = waiting.await.expect("join").expect("call");
    assert_eq!(r.structured_content, Some(json!({"stored": "q"})), "{r:?}");
    let rec = fx.store.record(id).await.expect("record").expect("exists");
    match rec.state {
        purra_core::ApprovalState::Claimed(d) => assert_eq!(d.approver, "bob (api)"),
        other => panic!("claimed expected: {other:?}"),
    }
    assert_eq!(fx.writes.load(Ordering::SeqCst), 1);
    fx.gateway.shutdown().await;
}

/// A host's decision through `Gateway::decide` whose workflow names who may vote reads the
/// approval once: the voter check and the decision share the read (it read it twice). Counted
/// by the store (`SqliteStore::round_trips`); the least of three decisions, as the gateway's
/// sweep (every second) may read during one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_s_decision_in_a_workflow_reads_the_approval_once() {
    let fx = fixture_with("api-from-reads", Duration::from_secs(30), from_sre).await;
    let conn = Arc::new(client(&fx.gateway, "flow-client").await);
    let mut least = u64::MAX;
    for n in 1..=3 {
        let waiting = {
            let conn = conn.clone();
            let value = format!("q{n}");
            tokio::spawn(
                async move { conn.call_tool("set_value", json!({ "value": value })).await },
            )
        };
        let id = ApprovalId(format!("approval-{n}"));
        while fx.store.record(id.clone()).await.expect("record").is_none() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let before = fx.store.round_trips();
        fx.gateway
            .decide(id, approval_by("bob", Duration::from_secs(60)))
            .await
            .expect("bob is in group:sre");
        least = least.min(fx.store.round_trips() - before);
        let r = waiting.await.expect("join").expect("call");
        assert_eq!(
            r.structured_content,
            Some(json!({ "stored": format!("q{n}") })),
            "{r:?}"
        );
    }
    assert_eq!(fx.writes.load(Ordering::SeqCst), 3);
    fx.gateway.shutdown().await;
    assert_eq!(least, 1);
}

/// Issue 44, friction: a waiting write's progress was fractional seconds
/// (`1.787e-06/59.9997`). It is whole seconds, increasing, with a message saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_writes_progress_is_whole_seconds_with_a_message() {
    let fx = fixture_with("progress", Duration::from_millis(2200), |c| {
        c.gateway.progress_interval = Dur(Duration::from_secs(1));
    })
    .await;
    let conn = client(&fx.gateway, "flow-client").await;
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let into = seen.clone();
    let options = purra_protocol::RequestOptions::default().on_progress(
        move |p| {
            into.lock().expect("lock").push((
                p.progress,
                p.total,
                p.message.clone().unwrap_or_default(),
            ));
        },
        None,
    );
    let r = conn
        .call_tool_with("set_value", json!({"value": "p"}), options)
        .await
        .expect("call");
    assert!(
        text(&r).0.contains("approval approval-1 is pending"),
        "{r:?}"
    );
    let seen = seen.lock().expect("lock").clone();
    assert_eq!(
        seen,
        (0..=2)
            .map(|n| (
                f64::from(n),
                Some(2.0),
                format!("waiting for approval approval-1: {n} s of 2 s")
            ))
            .collect::<Vec<_>>()
    );
    fx.gateway.shutdown().await;
}

/// `YYYY-MM-DD HH:MM:SS UTC` and RFC 3339 with milliseconds of `t`.
fn times(t: SystemTime) -> (String, String) {
    let ms = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("after the epoch")
        .as_millis();
    let stamp = purra_protocol::tasks::rfc3339(u64::try_from(ms).expect("ms"));
    (format!("{} {} UTC", &stamp[..10], &stamp[11..19]), stamp)
}

/// Calls `set_value` with `value` until it is sent: the first call prepares an approval (the
/// wait is short), which is approved, and the next call sends it. Returns the approval.
async fn approved_and_sent(fx: &Fixture, conn: &Connection, value: &str, n: u32) -> ApprovalId {
    let first = conn
        .call_tool("set_value", json!({"value": value}))
        .await
        .expect("call");
    let id = ApprovalId(format!("approval-{n}"));
    assert!(
        text(&first)
            .0
            .contains(&format!("approval {} is pending", id.0)),
        "{first:?}"
    );
    fx.gateway
        .decide(id.clone(), approval_by("ada", Duration::from_secs(60)))
        .await
        .expect("decide");
    let sent = conn
        .call_tool("set_value", json!({"value": value}))
        .await
        .expect("call");
    assert_eq!(
        (text(&sent), sent.meta.clone()),
        ((format!("stored \"{value}\""), false), None)
    );
    id
}

/// Issue 44, defect 5: the same call made again after it was sent answered with the old
/// receipt as if it had just been sent ("Successfully wrote to ..." in 0.0 s, nothing written).
/// It says that it is a replay, in its text and in `_meta`; without `receipt_ttl` a receipt
/// answers for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_write_says_it_is_answered_from_its_receipt() {
    let fx = fixture("replay", Duration::from_millis(200)).await;
    let conn = client(&fx.gateway, "flow-client").await;
    let id = approved_and_sent(&fx, &conn, "r", 1).await;
    let at = fx
        .store
        .approval(id.clone())
        .await
        .expect("view")
        .expect("exists")
        .claim
        .expect("claimed")
        .completed_at
        .expect("completed");
    let (shown, stamp) = times(at);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    for _ in 0..2 {
        let again = conn
            .call_tool("set_value", json!({"value": "r"}))
            .await
            .expect("call");
        assert_eq!(
            again.texts().collect::<Vec<_>>(),
            [
                format!("answered from the receipt of approval-1, {shown}; nothing was sent"),
                "stored \"r\"".to_owned()
            ]
        );
        assert!(!again.is_error());
        assert_eq!(again.structured_content, Some(json!({"stored": "r"})));
        assert_eq!(
            again.meta.map(Value::Object),
            Some(json!({"io.purra/replay": {"approval": "approval-1", "receiptAt": stamp}}))
        );
    }
    assert_eq!(fx.writes.load(Ordering::SeqCst), 1);
    assert_eq!(
        fx.store.record(ApprovalId("approval-2".into())).await,
        Ok(None)
    );
    fx.gateway.shutdown().await;
}

/// Issue 44, defect 5: with `receipt_ttl`, a receipt older than it no longer answers: the same
/// call asks for a new approval (its run is the first one's with `~2`), the old approval and
/// its receipt stay in the store, and once approved the call is sent again, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_receipt_ttl_the_same_call_asks_for_a_new_approval() {
    let fx = fixture_with("receipt-ttl", Duration::from_millis(200), |c| {
        apps_on(c);
        c.writes.get_mut("set_value").expect("bound").receipt_ttl =
            Some(Dur(Duration::from_secs(1)));
    })
    .await;
    let conn = client_with(&fx.gateway, "flow-client", ClientOptions::default().apps()).await;
    let first = approved_and_sent(&fx, &conn, "t", 1).await;
    // Within the ttl: the receipt answers.
    let replay = conn
        .call_tool("set_value", json!({"value": "t"}))
        .await
        .expect("call");
    assert!(
        text(&replay)
            .0
            .starts_with("answered from the receipt of approval-1, "),
        "{replay:?}"
    );
    tokio::time::sleep(Duration::from_millis(1100)).await;
    // Past the ttl the view shows the next generation: no approval asked for it yet.
    assert_eq!(status(&view(&conn, "t", json!({})).await), "none");
    let second = approved_and_sent(&fx, &conn, "t", 2).await;
    assert_eq!(fx.writes.load(Ordering::SeqCst), 2);
    let (one, two) = (
        fx.store.approval(first).await.expect("view").expect("kept"),
        fx.store
            .approval(second)
            .await
            .expect("view")
            .expect("exists"),
    );
    assert_eq!(
        two.request.intent.run_id.0,
        format!("{}~2", one.request.intent.run_id.0)
    );
    assert_eq!(
        one.claim.expect("claimed").receipt(),
        Some(&json!({"text": ["stored \"t\""], "structured": {"stored": "t"}}))
    );
    // The approval view follows the call's generation: the new one, committed.
    let shown = view(&conn, "t", json!({})).await;
    assert_eq!(status(&shown), "committed", "{shown:?}");
    assert_eq!(
        shown
            .structured_content
            .as_ref()
            .map(|s| s["intentDigest"].clone()),
        Some(json!(two.intent_digest.as_str()))
    );
    // The new receipt answers now, named by its approval.
    let again = conn
        .call_tool("set_value", json!({"value": "t"}))
        .await
        .expect("call");
    assert!(
        text(&again)
            .0
            .starts_with("answered from the receipt of approval-2, "),
        "{again:?}"
    );
    assert_eq!(fx.writes.load(Ordering::SeqCst), 2);
    fx.gateway.shutdown().await;
}

/// Asks the approval view's tool about the `set_value` call with `value`, with `extra` fields.
async fn view(conn: &Connection, value: &str, extra: Value) -> CallToolResult {
    let mut args = json!({"tool": "set_value", "arguments": {"value": value}});
    if let (Some(a), Value::Object(e)) = (args.as_object_mut(), extra) {
        a.extend(e);
    }
    conn.call_tool(APPROVAL_TOOL, args).await.expect("call")
}

fn status(r: &CallToolResult) -> String {
    r.structured_content
        .as_ref()
        .and_then(|s| s["status"].as_str())
        .unwrap_or_default()
        .to_owned()
}

async fn view_until(conn: &Connection, value: &str, want: &str) -> CallToolResult {
    let start = std::time::Instant::now();
    loop {
        let r = view(conn, value, json!({})).await;
        if status(&r) == want {
            return r;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "never {want}: {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The approval view on, and `set_value`'s binding letting the client decide in it.
fn apps_on(c: &mut GatewayConfig) {
    c.gateway.apps = true;
    client_decides(c);
}

fn client_decides(c: &mut GatewayConfig) {
    if let Some(w) = c.writes.get_mut("set_value") {
        w.approval = ApprovalBy::Client.into();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_approval_view_shows_and_decides_the_callers_own_write_once() {
    let fx = fixture_with("app", Duration::from_secs(30), apps_on).await;
    let conn =
        Arc::new(client_with(&fx.gateway, "flow-client", ClientOptions::default().apps()).await);
    assert_eq!(conn.negotiated_extensions(), [apps::EXTENSION_ID]);
    // Write tools name their view; reads do not; the view's tool is for the app alone.
    let tools = conn.tools();
    let by_name = |n: &str| tools.iter().find(|t| t.name == n).expect("listed").clone();
    assert_eq!(
        apps::tool_ui(&by_name("set_value")),
        Some("ui://purra-gateway/approval/set_value")
    );
    assert_eq!(apps::tool_ui(&by_name("get_value")), None);
    assert_eq!(
        by_name(APPROVAL_TOOL).meta,
        Some(object(json!({"ui": {"visibility": ["app"]}})))
    );
    // The view: the app MIME type, self-contained (no external asset), naming its tool.
    let read = conn
        .read_resource(&app_uri("set_value"))
        .await
        .expect("read");
    let html = &read.contents[0];
    assert_eq!(html.mime_type.as_deref(), Some(apps::APP_MIME_TYPE));
    assert_eq!(
        html.meta,
        Some(object(json!({"ui": {"csp": {}, "prefersBorder": true}})))
    );
    let text_of = html.text.as_deref().expect("text");
    assert!(text_of.contains(r#"<meta name="purra-tool" content="set_value">"#));
    assert!(!text_of.contains("src=") && !text_of.contains("href="));

    // Before the call there is nothing to decide.
    let before = view(&conn, "x", json!({"decision": "approve"})).await;
    assert_eq!(
        text(&before),
        (
            "set_value: none (no approval asked for this call); nothing was decided: no approval \
             was asked for this call yet"
                .to_owned(),
            true
        )
    );
    let call = {
        let conn = conn.clone();
        tokio::spawn(async move { conn.call_tool("set_value", json!({"value": "x"})).await })
    };
    let pending = view_until(&conn, "x", "pending").await;
    let digest = fx
        .store
        .record(ApprovalId("approval-1".into()))
        .await
        .expect("record")
        .expect("prepared")
        .intent_digest;
    assert_eq!(
        pending.structured_content,
        Some(json!({
            "gateway": "flow", "tool": "set_value", "upstream": "up", "upstreamTool": "set_value",
            "arguments": {"value": "x"}, "argumentsText": "{\n  \"value\": \"x\"\n}",
            "hiddenCharacters": false, "intentDigest": digest.to_string(),
            "approval": "approval-1", "status": "pending", "approvalBy": "client",
            "decidedBy": null, "note": null
        }))
    );
    assert_eq!(
        text(&pending),
        (
            "approval approval-1 of set_value: pending".to_owned(),
            false
        )
    );
    // Other arguments are another call, with nothing to show.
    assert_eq!(status(&view(&conn, "y", json!({})).await), "none");
    // A session without Apps, and a caller outside the write's scope, decide nothing.
    let plain = client(&fx.gateway, "flow-client").await;
    let r = plain
        .call_tool(
            APPROVAL_TOOL,
            json!({"tool": "set_value", "arguments": {"value": "x"}, "decision": "approve"}),
        )
        .await
        .expect("call");
    assert_eq!(
        text(&r),
        (
            "purra_approval failed: app_unsupported (only the approval view of a host that \
             renders MCP Apps calls it; nothing was decided)"
                .to_owned(),
            true
        )
    );
    let stranger = client_with(&fx.gateway, "stranger", ClientOptions::default().apps()).await;
    let r = view(&stranger, "x", json!({"decision": "approve"})).await;
    assert_eq!(
        text(&r),
        (
            "purra_approval failed: scope_denied (nothing was decided)".to_owned(),
            true
        )
    );
    assert_eq!(status(&view(&conn, "x", json!({})).await), "pending");

    // Approved in the view: the waiting call is woken and sends once.
    let decided = view(
        &conn,
        "x",
        json!({"decision": "approve", "note": " looks right "}),
    )
    .await;
    assert!(!decided.is_error(), "{decided:?}");
    assert!(text(&decided).0.ends_with("(decided here)"), "{decided:?}");
    let s = decided.structured_content.expect("structured");
    assert_eq!(s["decidedBy"], "flow-client (app)");
    assert_eq!(s["note"], "looks right");
    let done = call.await.expect("join").expect("call");
    assert_eq!(
        done.structured_content,
        Some(json!({"stored": "x"})),
        "{done:?}"
    );
    assert_eq!(fx.writes.load(Ordering::SeqCst), 1);
    // Its effect, found by the call itself; a second decision is refused.
    assert_eq!(status(&view(&conn, "x", json!({})).await), "committed");
    let again = view(
        &conn,
        "x",
        json!({"approval": "approval-1", "decision": "deny"}),
    )
    .await;
    assert_eq!(
        text(&again),
        (
            "approval approval-1 of set_value: committed; nothing was decided: the approval is \
             not pending any more"
                .to_owned(),
            true
        )
    );
    let view_rec = fx
        .store
        .approval(ApprovalId("approval-1".into()))
        .await
        .expect("view")
        .expect("exists");
    let purra_core::ApprovalState::Claimed(d) = view_rec.state else {
        panic!("{view_rec:?}");
    };
    assert_eq!(
        (d.verdict, d.approver.as_str(), d.note.as_deref()),
        (Verdict::Approve, "flow-client (app)", Some("looks right"))
    );
    assert_eq!(fx.writes.load(Ordering::SeqCst), 1);
    fx.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denied_in_the_view_it_is_never_sent_and_an_approval_after_the_wait_sends_once() {
    let fx = fixture_with("app-deny", Duration::from_millis(300), apps_on).await;
    let conn = client_with(&fx.gateway, "flow-client", ClientOptions::default().apps()).await;
    // The call returns its pending result after the wait; the view still decides it.
    let first = conn
        .call_tool("set_value", json!({"value": "no"}))
        .await
        .expect("call");
    assert!(
        text(&first).0.contains("approval approval-1 is pending"),
        "{first:?}"
    );
    let r = view(&conn, "no", json!({"decision": "deny"})).await;
    assert_eq!(status(&r), "denied", "{r:?}");
    let again = conn
        .call_tool("set_value", json!({"value": "no"}))
        .await
        .expect("call");
    assert_eq!(
        text(&again),
        (
            "set_value was not sent: approval approval-1 was denied by flow-client (app) \
             (approval_denied); calling set_value again with the same arguments asks for a \
             new approval"
                .to_owned(),
            true
        )
    );
    // The run is over; the view, told the approval, still shows the denial.
    assert_eq!(status(&view(&conn, "no", json!({})).await), "none");
    assert_eq!(
        status(&view(&conn, "no", json!({"approval": "approval-1"})).await),
        "denied"
    );
    assert_eq!(fx.writes.load(Ordering::SeqCst), 0);

    // Another call, approved in the view after its wait ended, is sent when called again.
    let first = conn
        .call_tool("set_value", json!({"value": "yes"}))
        .await
        .expect("call");
    assert!(
        text(&first).0.contains("approval approval-2 is pending"),
        "{first:?}"
    );
    assert_eq!(
        status(&view(&conn, "yes", json!({"decision": "approve"})).await),
        "approved"
    );
    let sent = conn
        .call_tool("set_value", json!({"value": "yes"}))
        .await
        .expect("call");
    assert_eq!(
        sent.structured_content,
        Some(json!({"stored": "yes"})),
        "{sent:?}"
    );
    assert_eq!(status(&view(&conn, "yes", json!({})).await), "committed");
    assert_eq!(fx.writes.load(Ordering::SeqCst), 1);
    fx.gateway.shutdown().await;
}

/// Finding 5 of the security review: a flood of approvals must not hide real ones. A caller may
/// have `max_pending_per_caller` approvals waiting at once: one more new write call is refused
/// with `approval_limit` and prepares nothing (no approval, no run); the same call made again
/// is never refused; a decision frees a place, which distinct calls racing take exactly once; a
/// second gateway on the same store counts the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_approvals_per_caller_are_capped() {
    let fx = fixture_with("cap", Duration::from_millis(50), |c| {
        c.gateway.max_pending_per_caller = 3;
    })
    .await;
    let conn = Arc::new(client(&fx.gateway, "flow-client").await);
    for (n, value) in ["a", "b", "c"].iter().enumerate() {
        let r = conn
            .call_tool("set_value", json!({ "value": value }))
            .await
            .expect("call");
        let want = format!("approval approval-{} is pending", n + 1);
        assert!(text(&r).0.contains(&want), "{r:?}");
    }
    let refusal = (
        "set_value failed: approval_limit (nothing was sent and no approval was prepared: 3 \
         approvals asked by this caller already wait for a decision, the most \
         max_pending_per_caller allows; call again once one is decided or has expired)"
            .to_owned(),
        true,
    );
    let r = conn
        .call_tool("set_value", json!({"value": "d"}))
        .await
        .expect("call");
    assert_eq!(text(&r), refusal);
    let all = || fx.store.count_approvals(ApprovalQuery::all());
    assert_eq!(all().await, Ok(3));
    assert_eq!(fx.store.suspended_run_ids().await.expect("runs").len(), 3);
    let first = fx
        .store
        .approval(ApprovalId("approval-1".into()))
        .await
        .expect("view")
        .expect("exists");
    assert_eq!(first.request.labels[PRINCIPAL_LABEL], "local");
    // The same call again is no new approval: still pending, never refused.
    let again = conn
        .call_tool("set_value", json!({"value": "a"}))
        .await
        .expect("call");
    assert!(
        text(&again).0.contains("approval approval-1 is pending"),
        "{again:?}"
    );
    assert_eq!(all().await, Ok(3));

    // A denial frees one place; four distinct calls racing for it: one gets it.
    fx.gateway
        .decide(
            ApprovalId("approval-2".into()),
            Decision {
                verdict: Verdict::Deny,
                ..approval_by("ada", Duration::from_secs(60))
            },
        )
        .await
        .expect("decide");
    let racing: Vec<_> = ["e", "f", "g", "h"]
        .into_iter()
        .map(|value| {
            let conn = conn.clone();
            tokio::spawn(
                async move { conn.call_tool("set_value", json!({ "value": value })).await },
            )
        })
        .collect();
    let mut results = Vec::new();
    for call in racing {
        results.push(text(&call.await.expect("join").expect("call")));
    }
    let refused = results.iter().filter(|r| **r == refusal).count();
    let pending = results
        .iter()
        .filter(|r| r.0.contains("approval approval-4 is pending"))
        .count();
    assert_eq!((refused, pending), (3, 1), "{results:?}");
    assert_eq!(all().await, Ok(4));
    assert_eq!(
        fx.store
            .count_approvals(ApprovalQuery::all().status(ApprovalStatus::Pending))
            .await,
        Ok(3)
    );

    // Another gateway on the same store (as another process, or after a restart) counts the same.
    let other = SqliteStore::open(&fx.config.gateway.db).expect("store");
    let second = Gateway::start(fx.config.clone(), &ConfigSource::default(), Arc::new(other))
        .await
        .expect("start");
    let conn2 = client(&second, "flow-client").await;
    let r = conn2
        .call_tool("set_value", json!({"value": "z"}))
        .await
        .expect("call");
    assert_eq!(text(&r), refusal);
    assert_eq!(all().await, Ok(4));
    assert_eq!(fx.writes.load(Ordering::SeqCst), 0);
    second.shutdown().await;
}

/// Separation of duties in the gateway: with `approvers_must_differ` the request names the
/// caller's principal and the rule; the caller is not asked by elicitation, the approval view
/// refuses its decision, `Gateway::decide` refuses an approver that is the principal that asked,
/// and another approver's decision sends the write once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_approvers_must_differ_the_caller_cannot_decide_its_own_write() {
    // The binding lets the client decide, so only separation of duties stops the caller.
    let fx = fixture_with("differ", Duration::from_secs(30), |c| {
        apps_on(c);
        c.gateway.elicitation = true;
        c.gateway.approvers_must_differ = true;
    })
    .await;
    let asked = Arc::new(AtomicU64::new(0));
    let seen = asked.clone();
    let options = ClientOptions::default()
        .apps()
        .on_elicitation(false, move |_| {
            seen.fetch_add(1, Ordering::SeqCst);
            async {
                Ok(purra_protocol::types::ElicitResult::accept(object(
                    json!({"decision": "approve"}),
                )))
            }
        });
    let conn = Arc::new(client_with(&fx.gateway, "flow-client", options).await);
    let call = {
        let conn = conn.clone();
        tokio::spawn(async move { conn.call_tool("set_value", json!({"value": "x"})).await })
    };
    view_until(&conn, "x", "pending").await;
    let id = ApprovalId("approval-1".into());
    let request = fx
        .store
        .approval(id.clone())
        .await
        .expect("read")
        .expect("prepared")
        .request;
    assert_eq!(request.requester(), Some("local"));
    assert!(request.approvers_must_differ());
    assert_eq!(request.requested_by, "local (flow-client)");

    let refused = view(&conn, "x", json!({"decision": "approve"})).await;
    assert_eq!(
        text(&refused),
        (
            "approval approval-1 of set_value: pending; nothing was decided: approvers must \
             differ: the principal that asked for this call cannot decide it"
                .to_owned(),
            true
        )
    );
    assert_eq!(
        fx.gateway
            .decide(id.clone(), approval_by("local", Duration::from_secs(60)))
            .await,
        Err(purra_core::StoreError::Conflict(
            purra_core::SelfDecision::CONFLICT
        ))
    );
    assert_eq!(status(&view(&conn, "x", json!({})).await), "pending");
    fx.gateway
        .decide(id, approval_by("ada", Duration::from_secs(60)))
        .await
        .expect("another approver decides");
    let r = call.await.expect("join").expect("call");
    assert_eq!(r.structured_content, Some(json!({"stored": "x"})), "{r:?}");
    assert_eq!(fx.writes.load(Ordering::SeqCst), 1);
    // The caller was never asked to decide its own call.
    assert_eq!(asked.load(Ordering::SeqCst), 0);
    fx.gateway.shutdown().await;
}

/// With `[gateway.auth]`, a caller that did not pass the guard (the server served another way,
/// here in memory) acts as nobody: even an open read is refused, and nothing is prepared; the
/// guard for a listener names the metadata of `http://ADDR/mcp`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_auth_configured_a_caller_without_a_proven_principal_is_refused() {
    let fx = fixture_with("unauthenticated", Duration::from_secs(1), |c| {
        c.gateway.listen = purra_gateway::Listen::Http("127.0.0.1:0".parse().unwrap());
        c.gateway.auth = Some(purra_gateway::AuthSettings {
            issuer: "https://auth.example".into(),
            ..Default::default()
        });
    })
    .await;
    let guard = fx
        .gateway
        .auth_layer("127.0.0.1:8787".parse().unwrap())
        .expect("a guard")
        .expect("configured");
    assert_eq!(
        guard.metadata_url(),
        "http://127.0.0.1:8787/.well-known/oauth-protected-resource/mcp"
    );
    let conn = client(&fx.gateway, "flow-client").await;
    for (tool, args) in [
        ("get_value", json!({})),
        ("set_value", json!({"value": "a"})),
    ] {
        let r = conn.call_tool(tool, args).await.expect("call");
        assert_eq!(
            text(&r),
            (
                format!("{tool} failed: scope_denied (nothing was sent)"),
                true
            )
        );
    }
    assert_eq!(fx.store.suspended_run_ids().await.expect("runs"), []);
    assert_eq!(fx.writes.load(Ordering::SeqCst), 0);
    fx.gateway.shutdown().await;
}

/// A client that declares Apps and elicitation, whose elicitation handler approves every form
/// (counting the forms it was asked).
async fn self_approving_client(gateway: &Gateway, asked: Arc<AtomicU64>) -> Connection {
    let options = ClientOptions::default()
        .apps()
        .on_elicitation(false, move |_p| {
            let asked = asked.clone();
            async move {
                asked.fetch_add(1, Ordering::SeqCst);
                Ok(purra_protocol::types::ElicitResult::accept(object(
                    json!({"decision": "approve", "note": "approved by the client itself"}),
                )))
            }
        });
    client_with(gateway, "flow-client", options).await
}

fn decision_of(view: &purra_core::ApprovalView) -> Decision {
    match &view.state {
        purra_core::ApprovalState::Decided(d)
        | purra_core::ApprovalState::Claimed(d)
        | purra_core::ApprovalState::Refused(d) => d.clone(),
        purra_core::ApprovalState::Prepared => panic!("undecided: {view:?}"),
    }
}

/// Finding 1 of issue 40: a client approved its own write, through the app-only tool (and its
/// own elicitation handler). With both settings on and a binding that leaves `approval` out, no
/// elicitation is asked, the view shows the write read-only, a decision through the tool is
/// refused and nothing is sent; only an operator's decision sends it (once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_approves_its_own_write_only_when_the_binding_says_client() {
    let fx = fixture_with("self-approval", Duration::from_millis(500), |c| {
        c.gateway.apps = true;
        c.gateway.elicitation = true;
    })
    .await;
    let asked = Arc::new(AtomicU64::new(0));
    let conn = self_approving_client(&fx.gateway, asked.clone()).await;
    let call = || conn.call_tool("set_value", json!({"value": "self"}));
    let first = call().await.expect("call");
    assert!(
        text(&first).0.contains("approval approval-1 is pending"),
        "{first:?}"
    );
    let a1 = ApprovalId("approval-1".into());
    let shown = view(&conn, "self", json!({})).await;
    assert_eq!(
        (
            status(&shown),
            shown
                .structured_content
                .as_ref()
                .map(|s| s["approvalBy"].clone())
        ),
        ("pending".to_owned(), Some(json!("operator")))
    );
    for decision in ["approve", "deny"] {
        let tried = view(&conn, "self", json!({"decision": decision})).await;
        assert_eq!(
            text(&tried),
            (
                "approval approval-1 of set_value: pending; nothing was decided: an operator \
                 decides this write (on the approver page or with purra approvals), not this view \
                 (operator_approval)"
                    .to_owned(),
                true
            )
        );
        assert_eq!(status(&tried), "pending");
    }
    let again = call().await.expect("call");
    assert!(
        text(&again).0.contains("approval approval-1 is pending"),
        "{again:?}"
    );
    assert_eq!(
        fx.store
            .record(a1.clone())
            .await
            .expect("record")
            .expect("exists")
            .state,
        purra_core::ApprovalState::Prepared
    );
    assert_eq!(asked.load(Ordering::SeqCst), 0, "no elicitation is asked");
    assert_eq!(fx.writes.load(Ordering::SeqCst), 0);

    // An operator's path decides it: the embedding host's Gateway::decide, recorded as such.
    fx.gateway
        .decide(a1.clone(), approval_by("ada", Duration::from_secs(60)))
        .await
        .expect("decide");
    let sent = call().await.expect("call");
    assert_eq!(
        sent.structured_content,
        Some(json!({"stored": "self"})),
        "{sent:?}"
    );
    assert_eq!(fx.writes.load(Ordering::SeqCst), 1);
    let recorded = fx.store.approval(a1).await.expect("view").expect("exists");
    assert_eq!(decision_of(&recorded).approver, "ada (api)");
    // An approver that already names an operator's path (the page beside the gateway) keeps it.
    let other = conn
        .call_tool("set_value", json!({"value": "page"}))
        .await
        .expect("call");
    assert!(
        text(&other).0.contains("approval approval-2 is pending"),
        "{other:?}"
    );
    let a2 = ApprovalId("approval-2".into());
    fx.gateway
        .decide(
            a2.clone(),
            approval_by("ada (page)", Duration::from_secs(60)),
        )
        .await
        .expect("decide");
    let recorded = fx.store.approval(a2).await.expect("view").expect("exists");
    assert_eq!(decision_of(&recorded).approver, "ada (page)");
    assert_eq!(asked.load(Ordering::SeqCst), 0);
    fx.gateway.shutdown().await;
}

/// The operator's explicit choice: with `approval = "client"` the client's own elicitation
/// handler decides, and the write is sent once, its approver naming the path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binding_that_says_client_lets_the_clients_elicitation_decide_once() {
    let fx = fixture_with("client-decides", Duration::from_secs(30), |c| {
        c.gateway.elicitation = true;
        client_decides(c);
    })
    .await;
    let asked = Arc::new(AtomicU64::new(0));
    let conn = self_approving_client(&fx.gateway, asked.clone()).await;
    let sent = conn
        .call_tool("set_value", json!({"value": "mine"}))
        .await
        .expect("call");
    assert_eq!(
        sent.structured_content,
        Some(json!({"stored": "mine"})),
        "{sent:?}"
    );
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    assert_eq!(fx.writes.load(Ordering::SeqCst), 1);
    let recorded = fx
        .store
        .approval(ApprovalId("approval-1".into()))
        .await
        .expect("view")
        .expect("exists");
    let d = decision_of(&recorded);
    assert_eq!(
        (d.approver.as_str(), d.note.as_deref()),
        (
            "flow-client (elicitation)",
            Some("approved by the client itself")
        )
    );
    fx.gateway.shutdown().await;
}

/// Finding 1 of issue 40: the gateway says at start what `elicitation` and `apps` trust when
/// clients connect over HTTP, and which writes a client may decide; over stdio it says nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_warns_what_elicitation_and_apps_trust_over_http() {
    let logged = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let options = |logged: &Arc<std::sync::Mutex<Vec<String>>>| {
        let logged = logged.clone();
        StartOptions::default().log(move |m| logged.lock().expect("log").push(m.to_owned()))
    };
    let fx = fixture_opts(
        "warnings",
        Duration::from_secs(1),
        |c| {
            c.gateway.listen = Listen::Http("127.0.0.1:8787".parse().expect("addr"));
            c.gateway.elicitation = true;
            c.gateway.apps = true;
            client_decides(c);
        },
        options(&logged),
    )
    .await;
    assert_eq!(
        *logged.lock().expect("log"),
        [
            "warning: gateway.elicitation is on and clients connect over HTTP (127.0.0.1:8787): \
             it trusts every client to show the elicitation form to a person and to send back \
             only that person's answer; a client that answers the form itself decides its own \
             write; writes whose binding says approval = \"client\" can be decided that way: \
             set_value",
            "warning: gateway.apps is on and clients connect over HTTP (127.0.0.1:8787): it \
             trusts every client's host to show the approval view to a person and to keep the \
             app-only tool purra_approval from its model; a client that calls purra_approval \
             itself decides its own write; writes whose binding says approval = \"client\" can \
             be decided that way: set_value",
        ]
    );
    fx.gateway.shutdown().await;
    // Apps alone, no binding letting the client decide: the view only shows; said so.
    let logged = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let fx = fixture_opts(
        "warnings-operator",
        Duration::from_secs(1),
        |c| {
            c.gateway.listen = Listen::Http("127.0.0.1:8787".parse().expect("addr"));
            c.gateway.apps = true;
        },
        options(&logged),
    )
    .await;
    assert_eq!(
        *logged.lock().expect("log"),
        ["warning: gateway.apps is on and clients connect over HTTP (127.0.0.1:8787): it trusts \
          every client's host to show the approval view to a person and to keep the app-only \
          tool purra_approval from its model; a client that calls purra_approval itself decides \
          its own write; no write binding says approval = \"client\", so an operator decides \
          every write"]
    );
    fx.gateway.shutdown().await;
    // Over stdio: nothing to warn about.
    let logged = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let fx = fixture_opts(
        "warnings-stdio",
        Duration::from_secs(1),
        |c| {
            c.gateway.elicitation = true;
            c.gateway.apps = true;
            client_decides(c);
        },
        options(&logged),
    )
    .await;
    assert_eq!(*logged.lock().expect("log"), Vec::<String>::new());
    fx.gateway.shutdown().await;
}

/// Finding 4 of issue 40: U+202E and U+200B reached the view raw. The view is told the
/// arguments exactly and as text with every hidden character escaped, and that there were some;
/// the decider's name and note are shown escaped too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_approver_reads_shows_hidden_characters_escaped_in_the_view() {
    let fx = fixture_with("hidden", Duration::from_secs(30), apps_on).await;
    let conn =
        Arc::new(client_with(&fx.gateway, "flow-client", ClientOptions::default().apps()).await);
    let value = "a\u{202e}b\u{200b}";
    let call = {
        let conn = conn.clone();
        tokio::spawn(async move { conn.call_tool("set_value", json!({"value": value})).await })
    };
    let pending = view_until(&conn, value, "pending").await;
    let s = pending.structured_content.clone().expect("structured");
    assert_eq!(s["arguments"], json!({"value": "a\u{202e}b\u{200b}"}));
    assert_eq!(
        s["argumentsText"],
        "{\n  \"value\": \"a\\u202eb\\u200b\"\n}"
    );
    assert_eq!(s["hiddenCharacters"], true);
    // The shown text is still exactly the arguments' JSON.
    assert_eq!(
        serde_json::from_str::<Value>(s["argumentsText"].as_str().expect("text")).expect("json"),
        s["arguments"]
    );
    let decided = view(
        &conn,
        value,
        json!({"decision": "approve", "note": "ok\u{2066}"}),
    )
    .await;
    let s = decided.structured_content.clone().expect("structured");
    assert_eq!(
        (s["decidedBy"].clone(), s["note"].clone()),
        (json!("flow-client (app)"), json!("ok\\u2066"))
    );
    let done = call.await.expect("join").expect("call");
    assert_eq!(
        done.structured_content,
        Some(json!({"stored": value})),
        "{done:?}"
    );
    // Plain arguments: nothing escaped, no warning.
    let plain = view(&conn, "x", json!({})).await;
    let s = plain.structured_content.expect("structured");
    assert_eq!(
        (s["argumentsText"].clone(), s["hiddenCharacters"].clone()),
        (json!("{\n  \"value\": \"x\"\n}"), json!(false))
    );
    fx.gateway.shutdown().await;
}

/// Finding 3 of issue 40, through the gateway: `within` refuses a path that walks out of its
/// directory before anything is prepared; a path inside asks for an approval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argument_rules_cannot_be_walked_around_through_the_gateway() {
    let fx = fixture_with("within", Duration::from_millis(50), |c| {
        if let Some(w) = c.writes.get_mut("set_value") {
            w.scope.arguments = vec!["value within \"/srv/notes\"".into()];
        }
    })
    .await;
    let conn = client(&fx.gateway, "flow-client").await;
    for outside in [
        "/srv/notes/../../etc/passwd",
        "/srv/notes/%2e%2e/x",
        "/srv/notes//x",
    ] {
        let r = conn
            .call_tool("set_value", json!({"value": outside}))
            .await
            .expect("call");
        assert_eq!(
            text(&r),
            (
                "set_value failed: scope_denied (nothing was sent: the argument rule `value within \"/srv/notes\"` does not hold for the value at `value`)".to_owned(),
                true
            ),
            "{outside}"
        );
    }
    assert_eq!(fx.store.suspended_run_ids().await.expect("runs"), []);
    let inside = conn
        .call_tool("set_value", json!({"value": "/srv/notes/a.txt"}))
        .await
        .expect("call");
    assert!(
        text(&inside).0.contains("approval approval-1 is pending"),
        "{inside:?}"
    );
    assert_eq!(fx.writes.load(Ordering::SeqCst), 0);
    fx.gateway.shutdown().await;
}

/// A directory of its own for a test's policy files.
fn policy_dir(name: &str) -> TempDir {
    TempDir::new("policies", name)
}

const POLICIES: &str = r#"// Reads for everyone but `explode`; `set_value` for the local principal through flow-client.
permit (principal, action in Action::"Read", resource);
forbid (principal, action == Action::"explode", resource);
permit (principal == Caller::"local", action == Action::"set_value", resource)
  when { context.client == "flow-client" && !principal.authenticated };
forbid (principal, action in Action::"Write", resource)
  when { context.arguments.value == "no" };
"#;

/// Item 4 of "the gateway for real servers and real teams": Cedar policies decide who may call
/// which bound tool with which arguments, before anything is prepared or sent. A forbidden write
/// prepares no approval and saves no run, a forbidden read sends nothing, an allowed write is
/// prepared with the policies' digest in its scope revision, and an approval prepared under
/// other policies is refused as a mismatch when the same call is made again, never sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policies_refuse_before_anything_is_prepared_and_a_change_refuses_old_approvals() {
    let dir = policy_dir("flow");
    let file = dir.0.join("flow.cedar");
    std::fs::write(&file, POLICIES).expect("policies");
    let policies = purra_gateway::PoliciesConfig {
        files: vec![file.clone()],
        claims: Default::default(),
    };
    let fx = fixture_with("policies", Duration::from_millis(50), |c| {
        c.policies = Some(policies.clone());
        // The policies, not the scope rules, decide which clients write.
        if let Some(w) = c.writes.get_mut("set_value") {
            w.scope.clients = None;
        }
    })
    .await;
    let (count, schema) = fx.gateway.policy_schema().expect("policies");
    assert_eq!(count, 4);
    assert!(
        schema.contains("action \"set_value\" in [Action::\"Write\"] appliesTo {"),
        "{schema}"
    );
    let conn = client(&fx.gateway, "flow-client").await;

    let denied_write = (
        "set_value failed: policy_denied (nothing was sent and no approval was prepared: the \
         gateway's policies do not allow this caller this call)"
            .to_owned(),
        true,
    );
    let r = conn
        .call_tool("set_value", json!({"value": "no"}))
        .await
        .expect("call");
    assert_eq!(text(&r), denied_write);
    let r = conn.call_tool("explode", json!({})).await.expect("call");
    assert_eq!(
        text(&r),
        (
            "explode failed: policy_denied (nothing was sent: the gateway's policies do not \
             allow this caller this call)"
                .to_owned(),
            true
        )
    );
    let r = conn.call_tool("get_value", json!({})).await.expect("call");
    assert_eq!(text(&r), ("v".to_owned(), false));
    // Another client of the same principal: no permit applies.
    let other = client(&fx.gateway, "other-client").await;
    let r = other
        .call_tool("set_value", json!({"value": "ok"}))
        .await
        .expect("call");
    assert_eq!(text(&r), denied_write);
    assert_eq!(fx.store.suspended_run_ids().await.expect("runs"), []);
    assert_eq!(fx.store.count_approvals(ApprovalQuery::all()).await, Ok(0));
    assert_eq!(fx.writes.load(Ordering::SeqCst), 0);

    // Allowed: prepared, its scope revision naming the policies it was allowed under.
    let r = conn
        .call_tool("set_value", json!({"value": "ok"}))
        .await
        .expect("call");
    assert!(
        text(&r).0.contains("approval approval-1 is pending"),
        "{r:?}"
    );
    let id = ApprovalId("approval-1".into());
    let prepared = fx
        .store
        .approval(id.clone())
        .await
        .expect("read")
        .expect("prepared");
    let revision = prepared.request.binding.scope_revision.clone();
    // `SCOPE_REVISION+scope:RULES+policies:POLICIES`, each digest 16 hex digits.
    let (scope, digest) = revision
        .strip_prefix("1+scope:")
        .and_then(|r| r.split_once("+policies:"))
        .expect("the digests");
    assert_eq!(scope.len(), 16, "{revision}");
    assert!(scope.chars().all(|c| c.is_ascii_hexdigit()), "{revision}");
    assert_eq!(digest.len(), 16, "{revision}");
    assert!(digest.chars().all(|c| c.is_ascii_hexdigit()), "{revision}");
    fx.gateway
        .decide(id.clone(), approval_by("ada", Duration::from_secs(600)))
        .await
        .expect("decide");
    fx.gateway.shutdown().await;

    // The policies change (a comment is enough): the approval was decided under others.
    std::fs::write(&file, format!("// reviewed\n{POLICIES}")).expect("policies");
    let other_store = SqliteStore::open(&fx.config.gateway.db).expect("store");
    let second = Gateway::start(
        fx.config.clone(),
        &ConfigSource::default(),
        Arc::new(other_store),
    )
    .await
    .expect("start");
    let conn = client(&second, "flow-client").await;
    let r = conn
        .call_tool("set_value", json!({"value": "ok"}))
        .await
        .expect("call");
    assert_eq!(
        text(&r),
        (
            "set_value was not sent: approval approval-1 was for an earlier binding of the tool, \
             which changed since (approval_mismatch); call set_value again to ask for a new \
             approval"
                .to_owned(),
            true
        )
    );
    assert_eq!(fx.writes.load(Ordering::SeqCst), 0);
    second.shutdown().await;
}

/// Issue 43 finding 7: a client's self-declared name is recorded as who asked on one line,
/// escaped and bounded (128 characters and `…`): the page, the CLI, the App view and webhooks
/// all show the record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_7_a_clients_name_is_recorded_escaped_and_bounded() {
    let fx = fixture_with("client-name", Duration::from_millis(50), |c| {
        if let Some(w) = c.writes.get_mut("set_value") {
            w.scope.clients = None;
        }
    })
    .await;
    let long = "x".repeat(10_000);
    for (name, value) in [("evil\u{202e}\nname", "a"), (long.as_str(), "b")] {
        let conn = client(&fx.gateway, name).await;
        let r = conn
            .call_tool("set_value", json!({"value": value}))
            .await
            .expect("call");
        assert!(text(&r).0.contains("is pending"), "{r:?}");
    }
    let mut asked_by = Vec::new();
    for id in ["approval-1", "approval-2"] {
        let record = fx
            .store
            .approval(ApprovalId(id.into()))
            .await
            .expect("read")
            .expect("prepared");
        asked_by.push(record.request.requested_by);
    }
    assert_eq!(
        asked_by,
        [
            "local (evil\\u202e\\nname)".to_owned(),
            format!("local ({}\u{2026})", "x".repeat(128))
        ]
    );
    assert_eq!(fx.writes.load(Ordering::SeqCst), 0);
    fx.gateway.shutdown().await;
}

/// Every tracing line of this process (level first, no time, no colour), at every level: the
/// subscriber is the process's global one, since the gateway's tasks run on the runtime's threads
/// (the one test that reads it runs alone in a child process, so no other test's lines are in it).
fn captured_tracing() -> Arc<std::sync::Mutex<Vec<u8>>> {
    static LINES: std::sync::OnceLock<Arc<std::sync::Mutex<Vec<u8>>>> = std::sync::OnceLock::new();
    LINES
        .get_or_init(|| {
            let lines = Arc::new(std::sync::Mutex::new(Vec::new()));
            let sink = lines.clone();
            let subscriber = tracing_subscriber::fmt()
                .with_max_level(tracing::Level::TRACE)
                .without_time()
                .with_ansi(false)
                .with_writer(move || Sink(sink.clone()))
                .finish();
            tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
            lines
        })
        .clone()
}

/// Appends what tracing writes to the captured lines.
struct Sink(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lines").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Issue 43 finding 9: a policy whose evaluation fails on a typed argument (an integer
/// overflow) refuses the call (fail-closed, nothing sent), and the argument's value is in no
/// log line below trace (`-vv`): not in the operator's message, not at debug. Cedar's own text,
/// which quotes both operands, is at trace only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_9_a_policy_evaluation_error_logs_no_argument_value_below_trace() {
    if !in_own_process(
        "PURRA_FINDING_9_ALONE",
        concat!(
            module_path!(),
            "::finding_9_a_policy_evaluation_error_logs_no_argument_value_below_trace"
        ),
    ) {
        return;
    }
    let traced = captured_tracing();
    let dir = policy_dir("overflow");
    let file = dir.0.join("overflow.cedar");
    std::fs::write(
        &file,
        "permit (principal, action, resource);\n\
         forbid (principal, action == Action::\"count\", resource)\n  \
           when { context.arguments.n + 9223372036854775807 > 0 };\n",
    )
    .expect("policies");
    let policies = purra_gateway::PoliciesConfig {
        files: vec![file.clone()],
        claims: Default::default(),
    };
    let logged = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let log = logged.clone();
    let fx = fixture_opts(
        "overflow",
        Duration::from_millis(50),
        |c| {
            c.policies = Some(policies);
            c.reads.insert(
                "count".into(),
                ReadConfig {
                    upstream: "up".into(),
                    tool: None,
                    title: "Count".into(),
                    concurrency: Default::default(),
                    scope: ScopeConfig::Open,
                    tasks: false,
                    asserted_read_only: false,
                },
            );
        },
        StartOptions::default().log(move |m| log.lock().expect("log").push(m.to_owned())),
    )
    .await;
    let conn = client(&fx.gateway, "flow-client").await;
    let value = 4_242_424_242_i64;
    let r = conn
        .call_tool("count", json!({"n": value}))
        .await
        .expect("call");
    assert_eq!(
        text(&r),
        (
            "count failed: policy_denied (nothing was sent: the gateway's policies do not allow \
             this caller this call)"
                .to_owned(),
            true
        )
    );
    let logged = logged.lock().expect("log").clone();
    assert_eq!(
        logged
            .iter()
            .filter(|m| m.starts_with("policies:"))
            .cloned()
            .collect::<Vec<_>>(),
        [format!(
            "policies: the call of count by local was refused: policy `{}#2` could not be \
             evaluated: an integer overflow (Cedar's message, which quotes the values, is logged \
             at -vv)",
            file.display()
        )]
    );
    fx.gateway.shutdown().await;
    let traced = String::from_utf8(traced.lock().expect("lines").clone()).expect("UTF-8");
    let value = value.to_string();
    for line in traced.lines() {
        assert!(
            line.starts_with("TRACE") || !line.contains(&value),
            "an argument value below trace: {line}"
        );
    }
    // The value is there at trace (where the test would see a leak).
    assert!(
        traced.lines().any(|l| l.starts_with("TRACE")
            && l.contains("policy evaluation failed")
            && l.contains(&value)),
        "{traced}"
    );
}

/// Item 5: a caller (one principal) over `max_calls_per_minute_per_caller` is answered at once
/// with `rate_limited`, reads and writes alike, nothing sent or prepared. (The quota is two a
/// minute and the calls are a burst of three: the third is over whatever the machine's speed.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_over_the_per_minute_limit_are_refused_at_once() {
    let fx = fixture_with("rate", Duration::from_millis(50), |c| {
        c.gateway.max_calls_per_minute_per_caller = 2;
    })
    .await;
    let conn = client(&fx.gateway, "flow-client").await;
    for _ in 0..2 {
        let r = conn.call_tool("get_value", json!({})).await.expect("call");
        assert_eq!(text(&r), ("v".to_owned(), false));
    }
    // The next call fits once a 30 s interval has passed since the first.
    let refused = |tool: &str, what: &str, r: &CallToolResult| {
        let (t, is_error) = text(r);
        let prefix = format!(
            "{tool} failed: rate_limited ({what}: this caller's calls exceed 2 a minute, the \
             most max_calls_per_minute_per_caller allows; call again in "
        );
        let secs: u64 = t
            .strip_prefix(&prefix)
            .and_then(|rest| rest.strip_suffix("s)"))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{t}"));
        assert!(is_error && (1..=30).contains(&secs), "{t}");
    };
    let r = conn.call_tool("get_value", json!({})).await.expect("call");
    refused("get_value", "nothing was sent", &r);
    // Another client of the same principal shares the quota.
    let other = client(&fx.gateway, "other-client").await;
    let r = other
        .call_tool("set_value", json!({"value": "a"}))
        .await
        .expect("call");
    refused(
        "set_value",
        "nothing was sent and no approval was prepared",
        &r,
    );
    assert_eq!(fx.store.suspended_run_ids().await.expect("runs"), []);
    assert_eq!(fx.store.count_approvals(ApprovalQuery::all()).await, Ok(0));
    assert_eq!(fx.writes.load(Ordering::SeqCst), 0);
    fx.gateway.shutdown().await;
}

/// Finding 1 (its last gap): a call naming a tool the gateway does not have counts against the
/// caller's rate of calls like a bound tool's. With a quota of two a minute, two unknown names
/// are answered `Unknown tool`, the third is refused `rate_limited` at once, and so is the
/// caller's next call of a bound tool (the quota is shared); nothing is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_1_unknown_tool_calls_count_against_the_callers_rate() {
    let fx = fixture_with("unknown-rate", Duration::from_millis(50), |c| {
        c.gateway.max_calls_per_minute_per_caller = 2;
    })
    .await;
    let conn = client(&fx.gateway, "flow-client").await;
    let unknown = |i: usize| {
        conn.request_raw(
            "tools/call",
            json!({"name": format!("no_such_tool_{i}"), "arguments": {}}),
            Default::default(),
        )
    };
    for i in 0..2 {
        let err = unknown(i).await.expect_err("unknown");
        let purra_protocol::Error::Rpc(e) = err else {
            panic!("{err:?}");
        };
        assert_eq!(e.code, purra_protocol::RpcErrorCode::INVALID_PARAMS);
        assert_eq!(e.message, format!("Unknown tool: no_such_tool_{i}"));
    }
    let err = unknown(2).await.expect_err("refused");
    let purra_protocol::Error::Rpc(e) = err else {
        panic!("{err:?}");
    };
    assert_eq!(e.code, purra_protocol::RpcErrorCode(-32029));
    let secs: u64 = e
        .message
        .strip_prefix(
            "rate_limited: this caller's calls exceed 2 a minute, the most \
             max_calls_per_minute_per_caller allows; call again in ",
        )
        .and_then(|rest| rest.strip_suffix('s'))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{}", e.message));
    assert!((1..=30).contains(&secs), "{}", e.message);
    // The unknown names took the quota the bound tools share.
    let r = conn
        .call_tool("set_value", json!({"value": "a"}))
        .await
        .expect("call");
    let (t, is_error) = text(&r);
    assert!(
        is_error
            && t.starts_with(
                "set_value failed: rate_limited (nothing was sent and no approval was prepared: \
                 this caller's calls exceed 2 a minute"
            ),
        "{t}"
    );
    assert_eq!(fx.store.count_approvals(ApprovalQuery::all()).await, Ok(0));
    assert_eq!(fx.writes.load(Ordering::SeqCst), 0);
    fx.gateway.shutdown().await;
}

/// This process's resident size in KiB (`VmRSS` of `/proc/self/status`).
fn resident_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// Finding 1 of the second security review: a caller's made-up tool and method names never
/// become metric labels. 10 000 distinct unknown tool names and 10 000 unknown methods (2 KiB
/// each) leave the series count exactly as it was and the resident size flat (recording them
/// used to keep ~80 MB: a histogram and a counter per name). The resident size is the whole
/// process's, so the test runs alone in a child process of this test binary: the other tests'
/// allocations, running beside it, would otherwise be counted as its growth.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_1_unknown_names_add_no_series_and_no_memory() {
    if !in_own_process(
        "PURRA_FINDING_1_ALONE",
        concat!(
            module_path!(),
            "::finding_1_unknown_names_add_no_series_and_no_memory"
        ),
    ) {
        return;
    }
    const N: usize = 10_000;
    const TOLERANCE_KIB: u64 = 16 * 1024;
    let fx = fixture("labels", Duration::from_secs(1)).await;
    let conn = Arc::new(client(&fx.gateway, "flow-client").await);
    let metrics = fx.gateway.metrics();
    let name = |kind: &str, i: usize| format!("{kind}-{i:05}-{}", "x".repeat(2048));
    let send = |method: String, params: Value| {
        let conn = conn.clone();
        async move {
            conn.request_raw(&method, params, Default::default())
                .await
                .expect_err("refused");
        }
    };
    // Every label set the flood could touch exists once before it is measured.
    conn.call_tool("get_value", json!({})).await.expect("call");
    send(
        "tools/call".into(),
        json!({"name": name("tool", N), "arguments": {}}),
    )
    .await;
    send(name("method", N), json!({})).await;
    let series = metrics.series_count();
    let before = resident_kib();
    for batch in 0..N / 100 {
        let mut calls = tokio::task::JoinSet::new();
        for i in batch * 100..(batch + 1) * 100 {
            calls.spawn(send(
                "tools/call".into(),
                json!({"name": name("tool", i), "arguments": {}}),
            ));
            calls.spawn(send(name("method", i), json!({})));
        }
        while let Some(done) = calls.join_next().await {
            done.expect("request task");
        }
    }
    let after = resident_kib();
    eprintln!("finding_1: resident {before} KiB before, {after} KiB after; {series} series");
    assert_eq!(metrics.series_count(), series);
    let requests = purra_gateway::metrics::REQUESTS;
    let unbound = [
        ("method", "tools/call"),
        ("tool", "(unbound)"),
        ("outcome", "error"),
    ];
    assert_eq!(metrics.value(requests, &unbound), N as u64 + 1);
    let other = [("method", "other"), ("outcome", "error")];
    assert_eq!(metrics.value(requests, &other), N as u64 + 1);
    let bound = [
        ("method", "tools/call"),
        ("tool", "get_value"),
        ("outcome", "ok"),
    ];
    assert_eq!(metrics.value(requests, &bound), 1);
    let text = metrics.render();
    assert!(!text.contains("xxxxxxxx"), "a caller's name is a label");
    assert!(
        after.saturating_sub(before) < TOLERANCE_KIB,
        "resident size grew from {before} KiB to {after} KiB"
    );
    fx.gateway.shutdown().await;
}

/// Finding 2 of the second security review: opening a session, `ping` and `tools/list` count
/// against the caller's rate (a limiter apart from its tool calls, at `max_calls_per_minute_per_caller`
/// or 60, whichever is more): past it each is refused at once with `rate_limited`, a new session
/// is not opened, and the caller's tool calls keep their own quota.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_2_sessions_pings_and_listings_count_against_the_callers_rate() {
    let fx = fixture_with("request-rate", Duration::from_secs(1), |c| {
        c.gateway.max_calls_per_minute_per_caller = 1;
    })
    .await;
    // initialize (1) and the client's own tools/list (2), then pings up to 60.
    let conn = client(&fx.gateway, "flow-client").await;
    let mut served = 0;
    let refusal = loop {
        match conn.ping().await {
            Ok(()) => served += 1,
            Err(e) => break e,
        }
        assert!(served <= 60, "never refused");
    };
    let purra_protocol::Error::Rpc(e) = refusal else {
        panic!("{refusal:?}");
    };
    assert_eq!(e.code, purra_protocol::RpcErrorCode(-32029));
    assert!(
        e.message.starts_with(
            "rate_limited: this caller's requests exceed 60 a minute, the most \
             max_calls_per_minute_per_caller allows; try again in "
        ),
        "{}",
        e.message
    );
    // 60 requests in all: initialize, the client's tools/list, and 58 pings.
    assert_eq!(served, 58);
    let listed = conn
        .request_raw("tools/list", json!({}), Default::default())
        .await
        .expect_err("refused");
    assert!(listed.to_string().contains("rate_limited"), "{listed}");
    // A new session of the same caller is refused too.
    let (a, b) = memory::pair();
    let server = fx.gateway.server().clone();
    tokio::spawn(async move { server.serve(a).await });
    let opened = Client::connect(b, ClientOptions::default()).await;
    let refused = opened.expect_err("a session opened past the rate");
    assert!(refused.to_string().contains("rate_limited"), "{refused}");
    // The tool calls' own quota (one) is untouched.
    let ok = conn.call_tool("get_value", json!({})).await.expect("call");
    assert_eq!(text(&ok), ("v".to_owned(), false));
    fx.gateway.shutdown().await;
}

/// Waits until the store's commit counts stop moving (the gateway's last writes of a cycle, such
/// as dropping the waiting run, may land just after the caller's answer) and returns them.
async fn settled_commits(store: &SqliteStore) -> purra_core::CommitCounts {
    let mut last = store.commit_counts();
    loop {
        tokio::time::sleep(Duration::from_millis(150)).await;
        let now = store.commit_counts();
        if now == last {
            return now;
        }
        last = now;
    }
}

/// Issue 50, item 3: the durable writes of each write-cycle path, one call at a time, counted by
/// the store (`SqliteStore::commit_counts`), so a change that adds a commit to a path fails here
/// (and one that removes a commit updates the count):
/// - an operator decides (4): the approval prepared with its waiting run, the decision, the claim
///   (by the caller's next call), the outcome with its receipt and the run dropped;
/// - the caller's client decides by elicitation (3): the approval with its run, the client's
///   decision with the claim, the outcome with its receipt and the run dropped;
/// - a standing grant covers the call (2): the use taken with the approval and its claim, the
///   outcome (no run waits).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_write_cycle_path_commits_a_counted_number_of_times() {
    use purra_core::{CommitCounts, GrantStore, NewGrant};
    let delta = |a: CommitCounts, b: CommitCounts| (b.writes - a.writes, b.commits - a.commits);

    // An operator decides.
    let fx = fixture("commits-operator", Duration::from_millis(200)).await;
    let conn = client(&fx.gateway, "flow-client").await;
    let before = settled_commits(&fx.store).await;
    approved_and_sent(&fx, &conn, "c", 1).await;
    let operator = delta(before, settled_commits(&fx.store).await);
    assert_eq!(fx.writes.load(Ordering::SeqCst), 1);
    fx.gateway.shutdown().await;

    // The caller's client decides by elicitation, within the wait.
    let fx = fixture_with("commits-client", Duration::from_secs(30), |c| {
        client_decides(c);
        c.gateway.elicitation = true;
    })
    .await;
    let options = ClientOptions::default().on_elicitation(false, |_| async {
        Ok(purra_protocol::types::ElicitResult::accept(object(
            json!({"decision": "approve"}),
        )))
    });
    let conn = client_with(&fx.gateway, "flow-client", options).await;
    let before = settled_commits(&fx.store).await;
    let r = conn
        .call_tool("set_value", json!({"value": "c"}))
        .await
        .expect("call");
    assert_eq!(r.structured_content, Some(json!({"stored": "c"})), "{r:?}");
    let client_path = delta(before, settled_commits(&fx.store).await);
    assert_eq!(fx.writes.load(Ordering::SeqCst), 1);
    fx.gateway.shutdown().await;

    // A standing grant covers the call.
    let fx = fixture("commits-grant", Duration::from_millis(200)).await;
    fx.store
        .add_grant(NewGrant {
            principal: "local".into(),
            tool: "set_value".into(),
            rules: vec![],
            max_uses: 5,
            until: SystemTime::now() + Duration::from_secs(600),
            granted_by: "ada".into(),
            note: None,
        })
        .await
        .expect("grant");
    let conn = client(&fx.gateway, "flow-client").await;
    let before = settled_commits(&fx.store).await;
    let r = conn
        .call_tool("set_value", json!({"value": "c"}))
        .await
        .expect("call");
    assert_eq!(r.structured_content, Some(json!({"stored": "c"})), "{r:?}");
    let grant = delta(before, settled_commits(&fx.store).await);
    assert_eq!(fx.writes.load(Ordering::SeqCst), 1);
    fx.gateway.shutdown().await;

    assert_eq!((operator, client_path, grant), ((4, 4), (3, 3), (2, 2)));
}

/// Issue 50, item 3: the store round trips outside its commits (reads, each a hand-off to a
/// blocking thread) of a write cycle its caller's client approves, one call at a time: the
/// claim state, the waiting run and the live grants before the approval is prepared, the
/// approval as the wait reads it (not before: the call just prepared it), and the approval again
/// before the claim. Counted by the store (`SqliteStore::round_trips`); the least of three calls,
/// as the gateway's sweep (every second) may read during one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_approved_cycle_reads_the_store_five_times() {
    let fx = fixture_with("reads-client", Duration::from_secs(30), |c| {
        client_decides(c);
        c.gateway.elicitation = true;
    })
    .await;
    // The form is answered after a pause: the wait for a decision, which runs beside the form,
    // has made its read by then (answered at once, the form may win before the wait reads, and
    // the cycle reads four times).
    let options = ClientOptions::default().on_elicitation(false, |_| async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        Ok(purra_protocol::types::ElicitResult::accept(object(
            json!({"decision": "approve"}),
        )))
    });
    let conn = client_with(&fx.gateway, "flow-client", options).await;
    let mut least = u64::MAX;
    for n in 0..3 {
        let value = format!("r{n}");
        settled_commits(&fx.store).await;
        let before = fx.store.round_trips();
        let r = conn
            .call_tool("set_value", json!({ "value": value }))
            .await
            .expect("call");
        // The cycle's last store operation (the outcome's commit) is done before its answer.
        least = least.min(fx.store.round_trips() - before);
        assert_eq!(
            r.structured_content,
            Some(json!({ "stored": value })),
            "{r:?}"
        );
    }
    assert_eq!(fx.writes.load(Ordering::SeqCst), 3);
    fx.gateway.shutdown().await;
    assert_eq!(least, 5);
}

/// Reads the task `id` until its status message is `want` (at most 10 s).
async fn task_says(conn: &Connection, id: &str, want: &str) {
    let start = std::time::Instant::now();
    loop {
        let task = conn.get_task(id).await.expect("tasks/get");
        if task.status_message.as_deref() == Some(want) {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the task says {:?}, not {want:?}",
            task.status_message
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Issue 47: a held write called as a task says how many votes its quorum has, counted again at
/// each progress tick: 0 of 2 at once, 1 of 2 after one approver's vote; the second vote sends
/// the write once and the task's result is the upstream's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_writes_task_counts_the_votes_of_its_quorum() {
    let fx = fixture_with("task-votes", Duration::from_secs(30), |c| {
        c.gateway.progress_interval = Dur(Duration::from_secs(1));
        c.writes.get_mut("set_value").expect("bound").approval =
            purra_gateway::config::ApprovalConfig::Rule(purra_gateway::config::ApprovalRule {
                required: Some(2),
                ..Default::default()
            });
    })
    .await;
    let conn = client(&fx.gateway, "flow-client").await;
    let task = conn
        .call_tool_as_task("set_value", json!({"value": "q"}), None)
        .await
        .expect("a task at once");
    task_says(
        &conn,
        &task.id,
        "waiting for approval approval-1, 0 of 2 votes",
    )
    .await;
    let id = ApprovalId("approval-1".into());
    fx.gateway
        .decide(id.clone(), approval_by("ada", Duration::from_secs(60)))
        .await
        .expect("one vote");
    task_says(
        &conn,
        &task.id,
        "waiting for approval approval-1, 1 of 2 votes",
    )
    .await;
    assert_eq!(fx.writes.load(Ordering::SeqCst), 0);
    fx.gateway
        .decide(id, approval_by("bob", Duration::from_secs(60)))
        .await
        .expect("the second vote");
    let r = conn.task_result(&task.id).await.expect("tasks/result");
    assert_eq!(r.structured_content, Some(json!({"stored": "q"})), "{r:?}");
    assert_eq!(fx.writes.load(Ordering::SeqCst), 1);
    fx.gateway.shutdown().await;
}
