//! Webhook delivery in one gateway process, to a real receiver: `peers/python/webhook_receiver.py`,
//! which verifies every request with the Standard Webhooks reference library (PyPI
//! `standardwebhooks`) and records it in an fsynced ledger before it answers. The upstream is a
//! purra server on loopback, the store a SQLite file, the downstream client purra's over an
//! in-memory transport. Exact bodies and signatures; one delivery per event by `webhook-id`; a
//! retry keeping its id; a slow receiver delaying only its own deliveries while calls complete; a
//! receiver that answers `410 Gone` retired; secrets that cannot be used refused at start.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use purra_core::{
    ApprovalId, Decision, WebhookDeliveryView, WebhookOutbox, WebhookQuery, WebhookState,
};
use purra_gateway::{
    ConfigSource, Dur, Gateway, GatewayConfig, ScopeRules, StartError, StartOptions, WebhookConfig,
    WebhookEventName, WebhookFormat,
};
use purra_protocol::types::{CallToolResult, Tool};
use purra_protocol::{ClientOptions, Connection, Server};
use purra_sqlite::SqliteStore;
use serde_json::{json, Value};

use crate::support::{
    approval_by, base_config, client_named, object, serve_upstream, set_write, value_input,
    wait_prepared, TempDir, PATIENCE,
};

/// The test secret (24 random bytes, as the specification serializes them).
const SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The receiver's Python: the venv with the pinned `standardwebhooks`.
fn python() -> PathBuf {
    let peers = std::env::var_os("PURRA_PEERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".peers"));
    let p = peers.join("venv-webhooks/bin/python");
    assert!(
        p.exists(),
        "{} is missing: run scripts/setup-peers.sh (the test command does) first",
        p.display()
    );
    p
}

/// The receiver process (ends when dropped).
struct Receiver {
    child: Child,
    port: u16,
    ledger: PathBuf,
}

impl Receiver {
    fn start(dir: &Path) -> Receiver {
        let secret = dir.join("receiver.whsec");
        std::fs::write(&secret, SECRET).expect("secret");
        let ledger = dir.join("received.jsonl");
        let mut child = Command::new(python())
            .arg(repo().join("peers/python/webhook_receiver.py"))
            .arg("--ledger")
            .arg(&ledger)
            .arg("--secret-file")
            .arg(&secret)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the receiver");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("the receiver's port");
        let port = serde_json::from_str::<Value>(&line).expect("json")["port"]
            .as_u64()
            .expect("port") as u16;
        Receiver {
            child,
            port,
            ledger,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Every request received so far, in order.
    fn received(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.ledger)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("ledger line"))
            .collect()
    }

    /// The requests received on `path`.
    fn on(&self, path: &str) -> Vec<Value> {
        self.received()
            .into_iter()
            .filter(|r| r["path"] == path)
            .collect()
    }

    /// Waits until `path` received `n` requests; returns them.
    async fn wait(&self, path: &str, n: usize) -> Vec<Value> {
        let started = std::time::Instant::now();
        loop {
            let got = self.on(path);
            if got.len() >= n {
                return got;
            }
            assert!(
                started.elapsed() < PATIENCE,
                "{path} received {} of {n}: {got:#?}",
                got.len()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The upstream: `set_value`, answering at once.
async fn upstream() -> String {
    let server = Server::builder("upstream", "1.0.0").build();
    let schema = value_input();
    let output = json!({"type": "object", "properties": {"stored": {"type": "string"}},
        "required": ["stored"], "additionalProperties": false});
    server
        .raw_tool(
            Tool::new("set_value", object(schema))
                .with_description("Sets the value")
                .with_output_schema(object(output)),
            |args, _| async move {
                let v = args["value"].clone();
                Ok(CallToolResult::text(format!("stored {v}"))
                    .with_structured_content(json!({"stored": v})))
            },
        )
        .expect("tool");
    serve_upstream(server, std::future::pending()).await
}

/// A gateway with `set_value` bound as a write and `webhooks` configured.
fn config(upstream: &str, db: PathBuf, webhooks: Vec<(&str, WebhookConfig)>) -> GatewayConfig {
    let mut c = base_config("hooks", db, Duration::from_secs(60), upstream);
    c.writes.insert(
        "set_value".into(),
        set_write(ScopeRules {
            principals: None,
            clients: Some(vec!["hooks-client".into()]),
            arguments: vec![],
        }),
    );
    for (name, w) in webhooks {
        c.webhooks.insert(name.into(), w);
    }
    c
}

/// A standard endpoint at `url` signed with the test secret (in `dir`), retrying quickly.
fn signed(dir: &Path, url: String) -> WebhookConfig {
    let file = dir.join("gateway.whsec");
    std::fs::write(&file, format!("{SECRET}\n")).expect("secret");
    WebhookConfig {
        secret_file: Some(file),
        backoff: Dur(Duration::from_millis(50)),
        max_backoff: Dur(Duration::from_millis(200)),
        ..WebhookConfig::new(url)
    }
}

async fn client(gateway: &Gateway) -> Connection {
    client_named(gateway, "hooks-client", ClientOptions::default()).await
}

/// An approval by `approver` with a note, good for ten minutes.
fn approve_noted(approver: &str) -> Decision {
    Decision {
        note: Some("go & see".into()),
        ..approval_by(approver, Duration::from_secs(600))
    }
}

/// Waits until approval `id` exists.
async fn prepared(store: &SqliteStore, id: &str) {
    wait_prepared(store, &ApprovalId(id.into())).await;
}

async fn pending(store: &SqliteStore) -> Vec<WebhookDeliveryView> {
    store
        .webhook_deliveries(WebhookQuery::all())
        .await
        .expect("deliveries")
}

/// Every event of one write reaches the receiver once, signed and verified by the reference
/// library, its body exactly the recorded event with the approver page's link; the Slack-format
/// endpoint gets one escaped line per event it subscribes to; nothing is left undelivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_event_arrives_once_verified_with_its_link_and_in_slack_form() {
    let dir = TempDir::new("webhooks", "once");
    let receiver = Receiver::start(&dir.0);
    let store = SqliteStore::open(dir.0.join("g.db")).expect("store");
    let mut chat = WebhookConfig::new(receiver.url("/chat"));
    chat.format = WebhookFormat::Slack;
    chat.events = vec![
        WebhookEventName::ApprovalPending,
        WebhookEventName::ApprovalDecided,
    ];
    let mut c = config(
        &upstream().await,
        dir.0.join("g.db"),
        vec![
            ("ops", signed(&dir.0, receiver.url("/ops"))),
            ("chat", chat),
        ],
    );
    c.page.url = Some("https://approvals.example/".into());
    let gateway = Gateway::start(c, &ConfigSource::default(), Arc::new(store.clone()))
        .await
        .expect("start");
    assert_eq!(store.webhook_endpoints().await.expect("endpoints").len(), 2);
    let conn = Arc::new(client(&gateway).await);
    let call = {
        let conn = conn.clone();
        tokio::spawn(async move { conn.call_tool("set_value", json!({"value": "x"})).await })
    };
    prepared(&store, "approval-1").await;
    gateway
        .decide(ApprovalId("approval-1".into()), approve_noted("ada"))
        .await
        .expect("decide");
    let result = call.await.expect("join").expect("call");
    assert_eq!(result.structured_content, Some(json!({"stored": "x"})));

    let ops = receiver.wait("/ops", 3).await;
    let chat = receiver.wait("/chat", 2).await;
    // Nothing more comes, and nothing is left to deliver.
    let started = std::time::Instant::now();
    while !pending(&store).await.is_empty() {
        assert!(started.elapsed() < PATIENCE);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(receiver.on("/ops").len(), 3);
    assert_eq!(receiver.on("/chat").len(), 2);
    let types: Vec<&str> = ops
        .iter()
        .map(|r| r["body"]["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        ["approval.pending", "approval.decided", "effect.committed"]
    );
    for r in &ops {
        assert_eq!(
            (r["signed"].as_bool(), r["verified"].as_bool()),
            (Some(true), Some(true)),
            "{r}"
        );
        assert_eq!(r["status"], 204);
        let id = r["id"].as_str().unwrap();
        assert!(id.starts_with("msg_") && id.len() == 36, "{id}");
        assert_eq!(
            r["body"]["data"]["url"],
            "https://approvals.example/approvals/approval-1"
        );
    }
    let decided = &ops[1]["body"]["data"];
    assert_eq!(
        (
            &decided["approval"],
            &decided["tool"],
            &decided["principal"],
            &decided["verdict"],
            &decided["approver"],
            &decided["note"]
        ),
        (
            &json!("approval-1"),
            &json!("set_value"),
            &json!("local"),
            &json!("approve"),
            &json!("ada (api)"),
            &json!("go & see")
        )
    );
    assert_eq!(ops[2]["body"]["data"]["effect"], "committed");
    assert!(
        !ops[0].to_string().contains("\"value\":\"x\""),
        "{}",
        ops[0]
    );
    // The same event has the same id on every endpoint.
    assert_eq!(chat[0]["id"], ops[0]["id"]);
    assert_eq!(chat[1]["id"], ops[1]["id"]);
    // Without a secret: the id and timestamp, no signature (nothing for the library to verify).
    assert_eq!(
        (&chat[0]["signed"], &chat[0]["verified"], &chat[0]["status"]),
        (&json!(false), &Value::Null, &json!(204)),
        "{}",
        chat[0]
    );
    assert_eq!(
        chat[1]["body"],
        json!({"text": "set_value (approval approval-1) approved by ada (api): \u{201c}go &amp; see\u{201d} <https://approvals.example/approvals/approval-1|Open it on the approver page>"})
    );
    gateway.shutdown().await;
}

/// A receiver that fails twice per event gets every event three times with the same
/// `webhook-id`, then acknowledges it; nothing is left. A receiver that answers `410 Gone` is
/// retired: its delivery is kept as failed with the status, the store records nothing more for
/// it, and the gateway says so once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_keep_their_id_and_410_retires_the_endpoint() {
    let dir = TempDir::new("webhooks", "retry");
    let receiver = Receiver::start(&dir.0);
    let store = SqliteStore::open(dir.0.join("g.db")).expect("store");
    let c = config(
        &upstream().await,
        dir.0.join("g.db"),
        vec![
            ("flaky", signed(&dir.0, receiver.url("/flaky?fail_first=2"))),
            ("gone", signed(&dir.0, receiver.url("/gone?status=410"))),
        ],
    );
    let logged = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = logged.clone();
    let attempts = Arc::new(Mutex::new(Vec::new()));
    let seen = attempts.clone();
    let options = StartOptions::default()
        .log(move |m| log.lock().unwrap().push(m.to_owned()))
        .webhook_observer(move |a| seen.lock().unwrap().push((a.endpoint.clone(), a.attempt)));
    let gateway = Gateway::start_with(
        c,
        &ConfigSource::default(),
        Arc::new(store.clone()),
        options,
    )
    .await
    .expect("start");
    let conn = client(&gateway).await;
    let call =
        tokio::spawn(async move { conn.call_tool("set_value", json!({"value": "y"})).await });
    prepared(&store, "approval-1").await;
    gateway
        .decide(ApprovalId("approval-1".into()), approve_noted("ada"))
        .await
        .expect("decide");
    call.await.expect("join").expect("call");

    let flaky = receiver.wait("/flaky", 9).await;
    let started = std::time::Instant::now();
    while pending(&store)
        .await
        .iter()
        .any(|v| v.state == WebhookState::Pending)
    {
        assert!(started.elapsed() < PATIENCE, "{:#?}", pending(&store).await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut by_id: std::collections::BTreeMap<String, Vec<(u64, Value)>> = Default::default();
    for r in receiver.on("/flaky") {
        assert_eq!(r["verified"], true, "{r}");
        by_id
            .entry(r["id"].as_str().unwrap().to_owned())
            .or_default()
            .push((r["status"].as_u64().unwrap(), r["body"].clone()));
    }
    assert_eq!(by_id.len(), 3, "{flaky:#?}");
    for (id, tries) in &by_id {
        assert_eq!(
            tries.iter().map(|t| t.0).collect::<Vec<_>>(),
            [503, 503, 204],
            "{id}"
        );
        assert!(
            tries.iter().all(|t| t.1 == tries[0].1),
            "{id}: the same body"
        );
    }
    // The 410: one request, the delivery kept failed, the endpoint retired.
    let gone = receiver.on("/gone");
    assert_eq!(gone.len(), 1, "{gone:#?}");
    let left = pending(&store).await;
    assert!(
        left.iter()
            .all(|v| v.endpoint == "gone" && v.state == WebhookState::Failed),
        "{left:#?}"
    );
    let answered = left
        .iter()
        .find(|v| v.last_status == Some(410))
        .expect("the 410");
    assert_eq!(answered.msg_id, gone[0]["id"].as_str().unwrap());
    assert!(left
        .iter()
        .filter(|v| v.last_status.is_none())
        .all(|v| v.last_error.as_deref() == Some("the endpoint answered 410 Gone")));
    let names: Vec<String> = store
        .webhook_endpoints()
        .await
        .expect("endpoints")
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, ["flaky"]);
    // The log and the observer hear of an attempt after the store recorded it.
    let started = std::time::Instant::now();
    let logged = loop {
        let logged = logged.lock().unwrap().clone();
        let observed = attempts.lock().unwrap().len();
        let retired = logged
            .iter()
            .any(|m| m.starts_with("webhook gone: answered 410 Gone: the endpoint is retired ("));
        if observed == 10 && retired {
            break logged;
        }
        assert!(started.elapsed() < PATIENCE, "{logged:#?} {observed}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        logged
            .iter()
            .any(|m| m == "webhook flaky: delivery failed (HTTP 503 Service Unavailable); retrying with backoff"),
        "{logged:#?}"
    );
    let attempts = attempts.lock().unwrap().clone();
    assert_eq!(
        attempts.iter().filter(|(e, _)| e == "flaky").count(),
        9,
        "{attempts:?}"
    );
    assert!(attempts.iter().any(|(e, n)| e == "flaky" && *n == 3));
    // The metrics count the same attempts by endpoint, event and result.
    let text = gateway.metrics().render();
    let attempts_of = |endpoint: &str| -> Vec<String> {
        text.lines()
            .filter(|l| {
                l.starts_with(&format!(
                    "purra_gateway_webhook_attempts_total{{endpoint=\"{endpoint}\""
                ))
            })
            .map(str::to_owned)
            .collect()
    };
    let mut want = Vec::new();
    for event in ["approval.decided", "approval.pending", "effect.committed"] {
        for (result, n) in [("delivered", 1), ("retry", 2)] {
            want.push(format!(
                "purra_gateway_webhook_attempts_total{{endpoint=\"flaky\",event=\"{event}\",result=\"{result}\"}} {n}"
            ));
        }
    }
    assert_eq!(attempts_of("flaky"), want, "{text}");
    let gone = attempts_of("gone");
    assert_eq!(gone.len(), 1, "{text}");
    assert!(gone[0].ends_with(",result=\"gone\"} 1"), "{text}");
    assert!(
        text.contains("purra_gateway_webhook_attempt_duration_seconds_count{endpoint=\"flaky\"} 9"),
        "{text}"
    );
    gateway.shutdown().await;
}

/// A receiver that takes a minute to answer holds no call: the write is decided, sent and
/// answered while the slow receiver still holds its first request (recorded, not answered), and
/// the other endpoint gets every event meanwhile. The slow endpoint's delivery stays leased,
/// attempted once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_receiver_delays_only_its_own_deliveries() {
    let dir = TempDir::new("webhooks", "slow");
    let receiver = Receiver::start(&dir.0);
    let store = SqliteStore::open(dir.0.join("g.db")).expect("store");
    let mut slow = signed(&dir.0, receiver.url("/slow?delay_ms=120000"));
    slow.timeout = Dur(Duration::from_secs(300));
    let c = config(
        &upstream().await,
        dir.0.join("g.db"),
        vec![
            ("slow", slow),
            ("fast", signed(&dir.0, receiver.url("/fast"))),
        ],
    );
    let gateway = Gateway::start(c, &ConfigSource::default(), Arc::new(store.clone()))
        .await
        .expect("start");
    let conn = client(&gateway).await;
    let call =
        tokio::spawn(async move { conn.call_tool("set_value", json!({"value": "z"})).await });
    prepared(&store, "approval-1").await;
    // The slow receiver holds its first request before anything is decided.
    receiver.wait("/slow", 1).await;
    gateway
        .decide(ApprovalId("approval-1".into()), approve_noted("ada"))
        .await
        .expect("decide");
    let result = call.await.expect("join").expect("call");
    assert_eq!(result.structured_content, Some(json!({"stored": "z"})));
    let fast = receiver.wait("/fast", 3).await;
    assert!(fast.iter().all(|r| r["status"] == 204));
    // Still one request on the slow endpoint, unanswered: its delivery leased at attempt 1,
    // the other two waiting behind it.
    assert_eq!(receiver.on("/slow").len(), 1);
    let slow_left: Vec<(u32, Option<u16>)> = pending(&store)
        .await
        .iter()
        .filter(|v| v.endpoint == "slow")
        .map(|v| (v.attempts, v.last_status))
        .collect();
    assert_eq!(slow_left, [(1, None), (0, None), (0, None)]);
    gateway.shutdown().await;
}

/// A secret that cannot be read, or is not a Standard Webhooks secret, stops the start at its
/// key; nothing is registered in the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_that_cannot_be_used_stop_the_start() {
    let dir = TempDir::new("webhooks", "secrets");
    let store = SqliteStore::open(dir.0.join("g.db")).expect("store");
    let short = dir.0.join("short.whsec");
    std::fs::write(&short, "whsec_c2hvcnQ=").expect("secret");
    let mut file = WebhookConfig::new("https://hooks.example/a");
    file.secret_file = Some(short);
    let mut env = WebhookConfig::new("https://hooks.example/b");
    env.secret_env = Some("PURRA_TEST_WEBHOOK_SECRET_UNSET".into());
    let mut missing = WebhookConfig::new("https://hooks.example/c");
    missing.secret_file = Some(dir.0.join("nowhere.whsec"));
    let c = config(
        "http://127.0.0.1:9/mcp",
        dir.0.join("g.db"),
        vec![("a", file), ("b", env), ("c", missing)],
    );
    let err = Gateway::start(c, &ConfigSource::default(), Arc::new(store.clone()))
        .await
        .expect_err("refused");
    let StartError::Config(errors) = err else {
        panic!("not a configuration mistake: {err}")
    };
    let shown: Vec<String> = errors.0.iter().map(|e| e.to_string()).collect();
    assert_eq!(
        shown,
        [
            "webhooks.a.secret_file: the secret decodes to 5 bytes; a Standard Webhooks secret is 24 to 64 random bytes".to_owned(),
            "webhooks.b.secret_env: the environment variable PURRA_TEST_WEBHOOK_SECRET_UNSET is not set or empty".to_owned(),
            format!(
                "webhooks.c.secret_file: cannot read {}: No such file or directory (os error 2)",
                dir.0.join("nowhere.whsec").display()
            ),
        ]
    );
    assert_eq!(store.webhook_endpoints().await, Ok(vec![]));
}

/// An observer that panics (as a process printing to a closed stderr does) does not stop the
/// endpoint's deliveries: its task starts again and every event arrives, once by id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_observer_does_not_stop_deliveries() {
    let dir = TempDir::new("webhooks", "panic");
    let receiver = Receiver::start(&dir.0);
    let store = SqliteStore::open(dir.0.join("g.db")).expect("store");
    let c = config(
        &upstream().await,
        dir.0.join("g.db"),
        vec![("ops", signed(&dir.0, receiver.url("/ops")))],
    );
    let panics = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = panics.clone();
    let options = StartOptions::default().webhook_observer(move |a| {
        if count.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            panic!("the observer of {} failed", a.msg_id);
        }
    });
    let gateway = Gateway::start_with(
        c,
        &ConfigSource::default(),
        Arc::new(store.clone()),
        options,
    )
    .await
    .expect("start");
    let conn = client(&gateway).await;
    let call =
        tokio::spawn(async move { conn.call_tool("set_value", json!({"value": "p"})).await });
    prepared(&store, "approval-1").await;
    gateway
        .decide(ApprovalId("approval-1".into()), approve_noted("ada"))
        .await
        .expect("decide");
    call.await.expect("join").expect("call");
    let started = std::time::Instant::now();
    while !pending(&store).await.is_empty() {
        assert!(started.elapsed() < PATIENCE, "{:#?}", pending(&store).await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let ids: std::collections::BTreeSet<String> = receiver
        .on("/ops")
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 3);
    assert!(panics.load(std::sync::atomic::Ordering::SeqCst) >= 3);
    gateway.shutdown().await;
}

/// A delivery whose attempts keep failing is given up once it is `give_up_after` old: kept in
/// the store as failed, with the last status, and said once; never dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_failing_past_give_up_after_is_kept_failed() {
    let dir = TempDir::new("webhooks", "give-up");
    let receiver = Receiver::start(&dir.0);
    let store = SqliteStore::open(dir.0.join("g.db")).expect("store");
    let mut hook = signed(&dir.0, receiver.url("/broken?status=500"));
    hook.events = vec![WebhookEventName::ApprovalPending];
    hook.backoff = Dur(Duration::from_millis(10));
    hook.max_backoff = Dur(Duration::from_millis(10));
    hook.give_up_after = Dur(Duration::from_millis(10));
    let c = config(
        &upstream().await,
        dir.0.join("g.db"),
        vec![("broken", hook)],
    );
    let logged = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = logged.clone();
    let options = StartOptions::default().log(move |m| log.lock().unwrap().push(m.to_owned()));
    let gateway = Gateway::start_with(
        c,
        &ConfigSource::default(),
        Arc::new(store.clone()),
        options,
    )
    .await
    .expect("start");
    let conn = client(&gateway).await;
    let _call =
        tokio::spawn(async move { conn.call_tool("set_value", json!({"value": "g"})).await });
    prepared(&store, "approval-1").await;
    let started = std::time::Instant::now();
    let failed = loop {
        let left = pending(&store).await;
        if left.len() == 1 && left[0].state == WebhookState::Failed {
            break left[0].clone();
        }
        assert!(started.elapsed() < PATIENCE, "{left:#?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let received = receiver.on("/broken");
    assert!(!received.is_empty());
    assert!(received
        .iter()
        .all(|r| r["id"] == failed.msg_id.as_str() && r["verified"] == true));
    assert_eq!(
        (
            failed.last_status,
            failed.last_error.as_deref(),
            failed.next_at
        ),
        (Some(500), Some("HTTP 500 Internal Server Error"), None)
    );
    assert_eq!(failed.attempts as usize, received.len());
    // The log line follows the store's record of it.
    let prefix = format!(
        "webhook broken: gave up on {} (approval.pending) after ",
        failed.msg_id
    );
    let started = std::time::Instant::now();
    let logged = loop {
        let logged = logged.lock().unwrap().clone();
        if logged.iter().any(|m| m.starts_with(&prefix)) {
            break logged;
        }
        assert!(started.elapsed() < PATIENCE, "{logged:#?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let gave_up: Vec<&String> = logged.iter().filter(|m| m.starts_with(&prefix)).collect();
    assert_eq!(gave_up.len(), 1, "{logged:#?}");
    assert!(
        gave_up[0].ends_with(": HTTP 500 Internal Server Error; it is kept as failed"),
        "{}",
        gave_up[0]
    );
    gateway.shutdown().await;
}
