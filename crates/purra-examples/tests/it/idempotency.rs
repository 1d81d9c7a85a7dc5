//! Idempotency keys end to end between purra's client and purra's server (in this process, over
//! an in-memory transport): an idempotent tool runs once per key, a repeat gets the stored result
//! (an `isError` one included), a concurrent repeat waits for the first, other arguments under a
//! key are refused, a key over 255 bytes is refused; results kept in SQLite (and PostgreSQL when
//! `PURRA_TEST_POSTGRES` names a server) answer a repeat after a restart, and a key whose run was
//! interrupted is refused as of unknown outcome, never run again. And 1 000 intents through
//! purra-mcp's write dispatch: one key per intent, the same on every retry.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use purra_core::idempotent_results::{IdempotentBegin, IdempotentBounds, IdempotentResults};
use purra_core::{IdempotencyKey, Lease, Risk, RunContext, RunId, ScopeCheck, ScopeDecision};
use purra_mcp::{
    discover_read_tools, discover_write_tools, CatalogMonitor, DurableIdempotentResults, Limits,
    ReadBinding, WriteBinding, WriteEffect,
};
use purra_protocol::idempotency::{
    self, Begin, IdempotentLimits, IdempotentStoreError, InMemoryIdempotentResults,
};
use purra_protocol::types::CallToolResult;
use purra_protocol::{
    memory, BoxFuture, Client, ClientOptions, Connection, Error, HandlerResult, Json, RequestCtx,
    RequestOptions, Server, ToolDef,
};
use serde_json::json;

use crate::support::call_registered;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Charge {
    amount: i64,
}

#[derive(serde::Serialize, schemars::JsonSchema)]
struct Charged {
    charged: i64,
    execution: usize,
}

/// A server with the idempotent tool `charge` (a negative amount is an `isError` result; 100
/// takes 300 ms) and the same tool, not idempotent, as `plain`; `runs` counts executions.
fn server(
    store: Option<Arc<dyn idempotency::IdempotentResults>>,
    runs: &Arc<AtomicUsize>,
) -> Server {
    let mut builder = Server::builder("idem", "1.0.0");
    if let Some(store) = store {
        builder = builder.idempotent_results(store);
    }
    let server = builder.build();
    for (name, def) in [
        ("charge", ToolDef::new("charge").idempotent()),
        ("plain", ToolDef::new("plain")),
    ] {
        let runs = runs.clone();
        server
            .add_tool(
                def.description(format!("Charges ({name})")),
                move |Charge { amount }, _ctx: RequestCtx| {
                    let execution = runs.fetch_add(1, Ordering::SeqCst) + 1;
                    async move {
                        if amount == 100 {
                            tokio::time::sleep(Duration::from_millis(300)).await;
                        }
                        if amount < 0 {
                            return Err(format!("cannot charge {amount}").into());
                        }
                        HandlerResult::Ok(Json(Charged {
                            charged: amount,
                            execution,
                        }))
                    }
                },
            )
            .expect("tool");
    }
    server
}

async fn connect(server: &Server) -> Connection {
    let (a, b) = memory::pair();
    let s = server.clone();
    tokio::spawn(async move { s.serve(a).await });
    Client::connect(b, ClientOptions::default())
        .await
        .expect("connect")
}

async fn charge(conn: &Connection, amount: i64, key: &str) -> Result<CallToolResult, Error> {
    conn.call_tool_idempotent(
        "charge",
        json!({ "amount": amount }),
        key,
        RequestOptions::default(),
    )
    .await
}

/// The JSON-RPC error of a refused call: its code and message.
fn rpc(r: Result<CallToolResult, Error>) -> (i32, String) {
    match r {
        Err(Error::Rpc(e)) => (e.code.0, e.message.clone()),
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_repeated_key_runs_an_idempotent_tool_once() {
    let runs = Arc::new(AtomicUsize::new(0));
    let server = server(None, &runs);
    let conn = connect(&server).await;
    assert!(conn.supports_idempotency(), "declared: tools.idempotency");
    assert_eq!(
        conn.server_capabilities().tools.as_ref().unwrap()["idempotency"],
        json!({})
    );
    let tool = conn
        .tools()
        .iter()
        .find(|t| t.name == "charge")
        .cloned()
        .unwrap();
    assert_eq!(tool.annotations.unwrap().idempotent_hint, Some(true));

    let first = charge(&conn, 5, "k1").await.expect("first");
    assert_eq!(
        first.structured_content,
        Some(json!({"charged": 5, "execution": 1}))
    );
    let again = charge(&conn, 5, "k1").await.expect("repeat");
    assert_eq!(again, first, "the stored result, not a new run");
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    // Other arguments under the key: refused, never the stored result, nothing run.
    let (code, message) = rpc(charge(&conn, 6, "k1").await);
    assert_eq!(code, -32602);
    assert!(
        message.contains("used before for another tool or other arguments"),
        "{message}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    // An isError result is kept and answered as it was.
    let failed = charge(&conn, -1, "k2").await.expect("tool error");
    assert!(failed.is_error());
    assert_eq!(charge(&conn, -1, "k2").await.expect("repeat"), failed);
    assert_eq!(runs.load(Ordering::SeqCst), 2);

    // Without a key, and for a tool that is not idempotent, every call runs.
    conn.call_tool("charge", json!({"amount": 5}))
        .await
        .unwrap();
    conn.call_tool("charge", json!({"amount": 5}))
        .await
        .unwrap();
    for _ in 0..2 {
        conn.call_tool_idempotent(
            "plain",
            json!({"amount": 5}),
            "k1",
            RequestOptions::default(),
        )
        .await
        .unwrap();
    }
    assert_eq!(runs.load(Ordering::SeqCst), 6);

    // A key over 255 bytes is refused by the server before use (and by the client before sending).
    let long = "k".repeat(256);
    charge(&conn, 1, &"k".repeat(255))
        .await
        .expect("255 bytes are accepted");
    assert!(matches!(
        charge(&conn, 1, &long).await,
        Err(Error::Protocol(_))
    ));
    let raw = conn
        .request_raw(
            "tools/call",
            json!({"name": "charge", "arguments": {"amount": 1}, "_meta": {idempotency::META_KEY: long}}),
            RequestOptions::default(),
        )
        .await;
    match raw {
        Err(Error::Rpc(e)) => {
            assert_eq!(e.code.0, -32602);
            assert!(e.message.contains("at most 255"), "{}", e.message);
        }
        other => panic!("expected -32602, got {other:?}"),
    }
    // Two different keys in one call: refused.
    let raw = conn
        .request_raw(
            "tools/call",
            json!({"name": "charge", "arguments": {"amount": 1}, "idempotencyKey": "a",
                   "_meta": {idempotency::META_KEY: "b"}}),
            RequestOptions::default(),
        )
        .await;
    assert!(matches!(raw, Err(Error::Rpc(e)) if e.code.0 == -32602));
    assert_eq!(
        runs.load(Ordering::SeqCst),
        7,
        "only the 255-byte key's call ran"
    );
}

#[tokio::test]
async fn a_concurrent_repeat_waits_for_the_first_run() {
    let runs = Arc::new(AtomicUsize::new(0));
    let server = server(None, &runs);
    let conn = Arc::new(connect(&server).await);
    let calls: Vec<_> = (0..3)
        .map(|_| {
            let conn = conn.clone();
            tokio::spawn(async move { charge(&conn, 100, "slow").await })
        })
        .collect();
    let mut results = Vec::new();
    for c in calls {
        results.push(c.await.unwrap().expect("call"));
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert!(results.iter().all(|r| r == &results[0]));
    assert_eq!(
        results[0].structured_content,
        Some(json!({"charged": 100, "execution": 1}))
    );
}

/// Two servers on one SQLite file (two instances): a repeat on the second while the first runs
/// the key waits for its stored result when the second polls (`idempotent_wait`), and is refused
/// as of unknown outcome at once when it does not; the tool ran once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeat_on_another_instance_waits_for_the_stored_result() {
    let dir = std::env::temp_dir().join(format!("purra-idem-fleet-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("idem.db");
    let runs = Arc::new(AtomicUsize::new(0));
    let instance = |wait: Duration| {
        let store = purra_sqlite::SqliteStore::open(&db).expect("store");
        let durable = DurableIdempotentResults::new(Arc::new(store), IdempotentLimits::default());
        let server = Server::builder("idem", "1.0.0")
            .idempotent_results(Arc::new(durable))
            .idempotent_wait(wait)
            .build();
        let runs = runs.clone();
        server
            .add_tool(
                ToolDef::new("charge").description("Charges").idempotent(),
                move |Charge { amount }, _ctx: RequestCtx| {
                    let execution = runs.fetch_add(1, Ordering::SeqCst) + 1;
                    async move {
                        tokio::time::sleep(Duration::from_millis(500)).await;
                        HandlerResult::Ok(Json(Charged {
                            charged: amount,
                            execution,
                        }))
                    }
                },
            )
            .expect("tool");
        server
    };
    let first = Arc::new(connect(&instance(Duration::ZERO)).await);
    let patient = connect(&instance(Duration::from_secs(30))).await;
    let hasty = connect(&instance(Duration::ZERO)).await;
    let running = {
        let first = first.clone();
        tokio::spawn(async move { charge(&first, 5, "fleet").await })
    };
    while runs.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (code, message) = rpc(charge(&hasty, 5, "fleet").await);
    assert_eq!(code, -32603, "{message}");
    let waited = charge(&patient, 5, "fleet").await.expect("waited");
    let ran = running.await.unwrap().expect("first");
    assert_eq!(waited, ran);
    assert_eq!(
        ran.structured_content,
        Some(json!({"charged": 5, "execution": 1}))
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A key begun in `store` and never finished (a process that stopped while it ran).
async fn interrupted(store: &dyn IdempotentResults, key: &str, amount: i64) {
    let request = idempotency::request_digest("charge", &json!({ "amount": amount }));
    let bounds = IdempotentBounds {
        max_keys: 100,
        ttl: Duration::from_secs(3600),
    };
    assert_eq!(
        store
            .begin_idempotent(key.into(), request, bounds)
            .await
            .unwrap(),
        IdempotentBegin::Run
    );
}

/// The restart scenario on a durable store that `open` opens afresh each time (a new process).
async fn survives_a_restart<F, Fut, S>(open: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Arc<S>>,
    S: IdempotentResults + 'static,
{
    let durable = |s: Arc<S>| -> Arc<dyn idempotency::IdempotentResults> {
        Arc::new(DurableIdempotentResults::new(
            s,
            IdempotentLimits::default(),
        ))
    };
    let runs = Arc::new(AtomicUsize::new(0));
    let first = {
        let server = server(Some(durable(open().await)), &runs);
        let conn = connect(&server).await;
        charge(&conn, 5, "k1").await.expect("first")
    };
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    // The process that began `k-int` stopped while it ran.
    interrupted(&*open().await, "k-int", 9).await;

    // A new server on the store: the stored result, nothing run.
    let runs = Arc::new(AtomicUsize::new(0));
    let server = server(Some(durable(open().await)), &runs);
    let conn = connect(&server).await;
    assert_eq!(charge(&conn, 5, "k1").await.expect("after restart"), first);
    let (code, message) = rpc(charge(&conn, 6, "k1").await);
    assert_eq!(code, -32602, "{message}");
    let (code, message) = rpc(charge(&conn, 9, "k-int").await);
    assert_eq!(code, -32603);
    assert!(
        message.contains("its outcome is unknown and it is not run again"),
        "{message}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    // A new key runs, once.
    charge(&conn, 7, "k3").await.unwrap();
    charge(&conn, 7, "k3").await.unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

/// Two stores on one database (two processes, or two instances of a fleet) beginning the same new
/// key at once: one runs it, the other finds it running; twenty rounds.
async fn one_begin_wins<S: IdempotentResults + 'static>(a: Arc<S>, b: Arc<S>) {
    let bounds = IdempotentBounds {
        max_keys: 1000,
        ttl: Duration::from_secs(3600),
    };
    for i in 0..20 {
        let key = format!("race-{i}");
        let (x, y) = tokio::join!(
            a.begin_idempotent(key.clone(), "r".into(), bounds),
            b.begin_idempotent(key.clone(), "r".into(), bounds)
        );
        let mut got = [x.unwrap(), y.unwrap()];
        got.sort_by_key(|g| g != &IdempotentBegin::Run);
        assert_eq!(
            got,
            [IdempotentBegin::Run, IdempotentBegin::Running],
            "round {i}"
        );
    }
}

#[tokio::test]
async fn a_sqlite_store_answers_a_repeated_key_after_a_restart() {
    let dir = std::env::temp_dir().join(format!("purra-idem-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("idem.db");
    survives_a_restart(|| {
        let db = db.clone();
        async move { Arc::new(purra_sqlite::SqliteStore::open(&db).expect("store")) }
    })
    .await;
    one_begin_wins(
        Arc::new(purra_sqlite::SqliteStore::open(&db).expect("store")),
        Arc::new(purra_sqlite::SqliteStore::open(&db).expect("store")),
    )
    .await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_postgres_store_answers_a_repeated_key_after_a_restart() {
    // Only where the test command started a server.
    let Ok(url) = std::env::var("PURRA_TEST_POSTGRES") else {
        eprintln!("PURRA_TEST_POSTGRES is not set: the PostgreSQL case is not run");
        return;
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let schema = format!("idem_{}_{nanos}", std::process::id());
    let open = || {
        let (url, schema) = (url.clone(), schema.clone());
        async move {
            let options = purra_postgres::PostgresOptions::default().schema(schema);
            Arc::new(
                purra_postgres::PostgresStore::connect_with(&url, options)
                    .await
                    .expect("store"),
            )
        }
    };
    survives_a_restart(open).await;
    one_begin_wins(open().await, open().await).await;
}

/// An in-memory store that records every key a call began with.
#[derive(Default)]
struct Recording {
    inner: InMemoryIdempotentResults,
    keys: Mutex<Vec<String>>,
}

impl idempotency::IdempotentResults for Recording {
    fn begin<'a>(
        &'a self,
        key: &'a str,
        request: &'a str,
    ) -> BoxFuture<'a, Result<Begin, IdempotentStoreError>> {
        self.keys.lock().unwrap().push(key.to_owned());
        self.inner.begin(key, request)
    }
    fn finish<'a>(
        &'a self,
        key: &'a str,
        result: &'a str,
    ) -> BoxFuture<'a, Result<(), IdempotentStoreError>> {
        self.inner.finish(key, result)
    }
    fn release<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<(), IdempotentStoreError>> {
        self.inner.release(key)
    }
}

fn run_with(key: Option<String>) -> RunContext {
    RunContext {
        run_id: RunId::new("run-1"),
        root_run_id: RunId::new("run-1"),
        agent: "writer".into(),
        lease: Lease::unbounded(),
        idempotency_key: key.map(IdempotencyKey),
    }
}

/// 1 000 intents through purra-mcp's write dispatch to a purra server recording keys: each send
/// of one intent (a retry under the same claim key) carries one key, `IdempotencyKey::upstream`
/// of its claim, distinct between intents; the server ran each intent once. A read carries none.
#[tokio::test]
async fn a_thousand_intents_carry_one_stable_key_each() {
    let recording = Arc::new(Recording::default());
    let runs = Arc::new(AtomicUsize::new(0));
    let server = server(Some(recording.clone()), &runs);
    // A read the server also treats as idempotent, so a key it carried would be recorded.
    server
        .add_tool(
            ToolDef::new("look").description("Looks").idempotent(),
            |(): (), _ctx: RequestCtx| async move { HandlerResult::Ok("seen".to_owned()) },
        )
        .unwrap();
    let conn = Arc::new(connect(&server).await);
    let monitor = CatalogMonitor::attach(&conn);
    let allow = ScopeCheck::check(|_, _| ScopeDecision::Allow);
    let writes = BTreeMap::from([(
        "charge".to_owned(),
        WriteBinding {
            local_name: "charge".into(),
            title: "Charge".into(),
            risk: Risk::Write,
            effect: WriteEffect::Write,
            scope: allow.clone(),
            binding_id: "b".into(),
            binding_revision: "1".into(),
            scope_id: "s".into(),
            scope_revision: "1".into(),
        },
    )]);
    let cat = discover_write_tools(&conn, "idem", &writes, &monitor, Limits::default())
        .await
        .expect("write discovery");
    let reads = BTreeMap::from([("look".to_owned(), ReadBinding::new("look", "Look", allow))]);
    let read = discover_read_tools(&conn, "idem", &reads, &monitor, Limits::default())
        .await
        .expect("read discovery");

    let mut expected = Vec::new();
    for i in 0..1000 {
        let digest = format!("sha256:{i:064x}");
        expected.push(IdempotencyKey(digest.clone()).upstream());
        let mut results = Vec::new();
        for _send in 0..2 {
            let run = run_with(Some(digest.clone()));
            results.push(
                call_registered(&cat.registrations, "charge", json!({"amount": i}), run)
                    .await
                    .expect("charge"),
            );
        }
        assert_eq!(
            results[0], results[1],
            "intent {i}: the retry got the stored result"
        );
    }
    let keys = recording.keys.lock().unwrap().clone();
    let twice: Vec<String> = expected
        .iter()
        .flat_map(|k| [k.clone(), k.clone()])
        .collect();
    assert_eq!(keys, twice, "every send of an intent carried its one key");
    assert_eq!(keys.iter().collect::<HashSet<_>>().len(), 1000);
    assert_eq!(runs.load(Ordering::SeqCst), 1000, "each intent ran once");

    // A read carries no key, even in a run that has one; a write run without a claim neither.
    call_registered(
        &read.registrations,
        "look",
        json!({}),
        run_with(Some("sha256:00".into())),
    )
    .await
    .expect("read");
    call_registered(
        &cat.registrations,
        "charge",
        json!({"amount": 1}),
        run_with(None),
    )
    .await
    .expect("unclaimed write");
    assert_eq!(recording.keys.lock().unwrap().len(), 2000);
    assert_eq!(runs.load(Ordering::SeqCst), 1001);
}

/// `purra-idempotent-server` on the SQLite file `db`, counting executions in `executions`.
async fn idempotent_process(db: &std::path::Path, executions: &std::path::Path) -> Connection {
    let cmd = purra_protocol::StdioCommand::new(env!("CARGO_BIN_EXE_purra-idempotent-server"))
        .args([
            "--db".to_owned(),
            db.display().to_string(),
            "--executions".to_owned(),
            executions.display().to_string(),
        ])
        .stderr(purra_protocol::StderrMode::Null);
    Client::connect_stdio(cmd, ClientOptions::default())
        .await
        .expect("spawn")
}

fn lines(path: &std::path::Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |t| t.lines().count())
}

/// Real processes on one SQLite file: a second process answers the first one's key with its
/// stored result, running nothing; a process killed while a key runs leaves it of unknown
/// outcome, and the next process refuses it rather than run it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_process_answers_the_stored_result_and_never_reruns_an_interrupted_key() {
    let dir = std::env::temp_dir().join(format!("purra-idem-proc-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (db, executions) = (dir.join("idem.db"), dir.join("executions.txt"));

    let first = idempotent_process(&db, &executions).await;
    assert!(first.supports_idempotency());
    let stored = charge(&first, 5, "k1").await.expect("first");
    assert_eq!(
        stored.structured_content,
        Some(json!({"charged": 5, "execution": 1}))
    );
    first.close().await;

    let second = Arc::new(idempotent_process(&db, &executions).await);
    assert_eq!(charge(&second, 5, "k1").await.expect("repeat"), stored);
    assert_eq!(lines(&executions), 1, "the second process ran nothing");
    // A charge of 100 runs for a minute: the process is killed while it runs.
    let slow = {
        let second = second.clone();
        tokio::spawn(async move { charge(&second, 100, "k-slow").await })
    };
    let started = std::time::Instant::now();
    while lines(&executions) < 2 {
        assert!(started.elapsed() < Duration::from_secs(60), "never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pid = second.pid().expect("pid");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill");
    assert!(
        slow.await.unwrap().is_err(),
        "the killed process answered nothing"
    );

    let third = idempotent_process(&db, &executions).await;
    let (code, message) = rpc(charge(&third, 100, "k-slow").await);
    assert_eq!(code, -32603);
    assert!(
        message.contains("its outcome is unknown and it is not run again"),
        "{message}"
    );
    assert_eq!(charge(&third, 5, "k1").await.expect("still kept"), stored);
    assert_eq!(lines(&executions), 2, "nothing ran again");
    third.close().await;
    let _ = std::fs::remove_dir_all(&dir);
}
