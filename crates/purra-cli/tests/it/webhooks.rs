//! Webhooks end to end, as people run them: `purra gateway` with `[webhooks.NAME]` endpoints over
//! the Python SDK upstream (`peers/python/gateway_upstream.py`), the Python SDK client calling
//! writes over Streamable HTTP, decisions made by `purra approvals` in other processes, and a
//! receiver (`peers/python/webhook_receiver.py`) that verifies every request with the Standard
//! Webhooks reference library (PyPI `standardwebhooks`) and records it in an fsynced ledger.
//!
//! The acceptance: the receiver is down while three writes are made (one approved and committed,
//! one denied, one approved and cut by the gateway's SIGKILL while it dispatches); then the
//! receiver and the gateway come back, and every event (the first gateway's and the restarted
//! one's `effect.unknown`) arrives verified, each once by `webhook-id`: a request seen twice
//! carries the same id and the same body, and no event arrives under two ids.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc::Receiver as Lines;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::clients::{gateway_client, json_lines, serving, spawn_gateway, wait_for, Sdk};
use crate::support::peers;
use crate::support::run::{
    approvals_json, purra, purra_bin, wait_approval, wait_ledger, Killed, LIMIT,
};

use peers::{fresh_dir, lines_of, peer, postgres_schema, python, repo_root, webhook_receiver};

/// The endpoints' secret (24 random bytes, as the specification serializes them).
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// One scenario's directory: configuration, store, upstream ledger, receiver ledger.
struct Scenario {
    dir: PathBuf,
    port: u16,
    /// The store: a SQLite file in the directory, or a PostgreSQL schema of its own.
    db: String,
}

impl Drop for Scenario {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Scenario {
    /// A scenario whose receiver will listen on a port free now (nothing listens on it yet), on
    /// SQLite or (`postgres`) on a schema of the test command's PostgreSQL server.
    fn new(name: &str, postgres: bool) -> Scenario {
        let dir = fresh_dir("webhooks", name);
        let port = peers::free_port();
        std::fs::write(dir.join("ops.whsec"), format!("{SECRET}\n")).expect("secret");
        let db = if postgres {
            postgres_schema("webhooks")
        } else {
            dir.join("gateway.db").to_string_lossy().into_owned()
        };
        Scenario { dir, port, db }
    }

    fn db(&self) -> String {
        self.db.clone()
    }

    fn config(&self) -> String {
        self.dir.join("gateway.toml").to_string_lossy().into_owned()
    }

    /// The gateway: `set_value` as a write whose upstream takes 5 s (time to kill the gateway
    /// while it dispatches), a 1 s lease, and two endpoints on the receiver: `ops` (standard,
    /// signed, every event) and `chat` (Slack-compatible, unsigned, approvals only).
    fn write_config(&self) {
        let upstream = peer(repo_root().join("peers/python/gateway_upstream.py"));
        let text = format!(
            r#"[gateway]
name = "gw"
db = {db:?}
listen = "127.0.0.1:0"
approval_wait = "90s"
progress_interval = "1s"
lease = "1s"

[page]
url = "https://approvals.example"

[upstreams.values]
command = [{python:?}, {upstream:?}, "--dir", {dir:?}, "--scenario", "slow-write"]

[writes.set_value]
upstream = "values"
title = "Set the value"
effect = "write"
binding_id = "values"
binding_revision = "1"
scope_id = "values-clients"
scope_revision = "1"
scope = {{ clients = ["gateway-client-python"] }}

[webhooks.ops]
url = "http://127.0.0.1:{port}/hooks/ops"
secret_file = "ops.whsec"
timeout = "2s"
backoff = "200ms"
max_backoff = "1s"

[webhooks.chat]
url = "http://127.0.0.1:{port}/hooks/chat"
format = "slack"
events = ["approval.pending", "approval.decided"]
timeout = "2s"
backoff = "200ms"
max_backoff = "1s"
"#,
            python = python(),
            dir = self.dir.to_string_lossy(),
            port = self.port,
            db = self.db,
        );
        std::fs::write(self.config(), text).expect("config");
    }

    fn wait_ledger(&self, prefix: &str) {
        wait_ledger(&self.dir.join("ledger.txt"), prefix);
    }

    /// `purra approvals ARGS --db DB --json`.
    fn approvals(&self, args: &[&str]) -> Value {
        approvals_json(&self.db(), args)
    }

    /// Waits until an approval is pending; its id.
    fn wait_pending(&self) -> String {
        wait_approval(&self.db(), "a pending approval", |a| {
            a["state"] == "pending"
        })
    }

    /// The store's undelivered deliveries (read as another process would).
    fn outbox(&self) -> Vec<purra_core::WebhookDeliveryView> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let location = purra_store::StoreLocation::parse(&self.db).expect("location");
            let store = purra_store::AnyStore::open(&location, None)
                .await
                .expect("store");
            store
                .outbox()
                .webhook_deliveries(purra_core::WebhookQuery::all())
                .await
                .expect("deliveries")
        })
    }

    /// Every request the receiver recorded on `path`.
    fn received(&self, path: &str) -> Vec<Value> {
        std::fs::read_to_string(self.dir.join("received.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).expect("ledger line"))
            .filter(|r| r["path"] == path)
            .collect()
    }
}

/// `purra gateway` on Streamable HTTP (killed when dropped).
struct Gateway {
    child: Killed,
    url: String,
    started: Vec<String>,
    /// Its stderr lines after the start, read as they come (so the pipe is always drained).
    _rest: Lines<String>,
}

impl Gateway {
    fn start(sc: &Scenario) -> Gateway {
        let (child, rx) = spawn_gateway(sc.config());
        let (url, started) = serving(&rx, LIMIT);
        Gateway {
            child: Killed(child),
            url,
            started,
            _rest: rx,
        }
    }

    /// SIGKILL: no cleanup of any kind.
    fn kill(self) {
        drop(self.child);
    }
}

/// The Python SDK client calling `set_value` with `value` over HTTP.
struct Client {
    /// Killed when the client is dropped.
    _child: Killed,
    lines: Lines<Value>,
    seen: Vec<Value>,
}

impl Client {
    fn set_value(g: &Gateway, value: &str) -> Client {
        let steps = json!([{"call": "set_value", "args": {"value": value}}]);
        let (child, lines) = json_lines(gateway_client(Sdk::Python).args([
            "--steps",
            &steps.to_string(),
            "--http",
            &g.url,
        ]));
        Client {
            _child: Killed(child),
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits for the call's step line; returns it.
    fn step(&mut self) -> Value {
        wait_for(&self.lines, &mut self.seen, "call step", LIMIT, |v| {
            v["step"] == "call"
        })
    }
}

/// The acceptance test of the webhooks item on SQLite (see the module documentation).
#[test]
fn a_gateway_killed_while_the_receiver_is_down_delivers_every_event_once_by_id() {
    killed_while_the_receiver_is_down(false);
}

/// The same on PostgreSQL.
#[test]
fn on_postgres_a_gateway_killed_while_the_receiver_is_down_delivers_every_event_once_by_id() {
    killed_while_the_receiver_is_down(true);
}

fn killed_while_the_receiver_is_down(postgres: bool) {
    let sc = Scenario::new(
        if postgres {
            "acceptance-pg"
        } else {
            "acceptance"
        },
        postgres,
    );
    sc.write_config();
    let gateway = Gateway::start(&sc);
    assert!(
        gateway.started.iter().any(|l| l
            == "purra gateway: webhooks: chat, ops (events recorded in the store, delivered from here)"),
        "{:?}",
        gateway.started
    );

    // The receiver is down. One write approved by the CLI in another process and committed.
    let mut one = Client::set_value(&gateway, "one");
    let id1 = sc.wait_pending();
    sc.approvals(&["approve", &id1, "--approver", "ada"]);
    let step = one.step();
    assert_eq!(
        step["result"]["structuredContent"],
        json!({"stored": "one"}),
        "{step}"
    );
    // One denied.
    let mut two = Client::set_value(&gateway, "two");
    let id2 = sc.wait_pending();
    sc.approvals(&[
        "deny",
        &id2,
        "--approver",
        "grace",
        "--note",
        "not this one",
    ]);
    let step = two.step();
    assert_eq!(step["result"]["isError"], true, "{step}");
    // One approved, and the gateway killed while the upstream handles it.
    let mut three = Client::set_value(&gateway, "three");
    let id3 = sc.wait_pending();
    sc.approvals(&["approve", &id3, "--approver", "ada"]);
    sc.wait_ledger("call set_value three");
    // Every event so far is recorded, and the gateway has tried the receiver and failed.
    let start = Instant::now();
    loop {
        let outbox = sc.outbox();
        let tried = outbox.iter().any(|v| {
            v.last_error
                .as_deref()
                .is_some_and(|e| e.starts_with("could not connect"))
        });
        if outbox.len() == 7 + 6 && tried {
            break;
        }
        assert!(start.elapsed() < LIMIT, "{outbox:#?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    gateway.kill();
    let cut = three.step();
    assert!(cut["error"].is_string(), "{cut}");
    drop((one, two, three));
    assert!(sc.received("/hooks/ops").is_empty());

    // Both come back. The same call again finds its claim interrupted: effect.unknown.
    let _receiver = webhook_receiver(
        &sc.dir.join("received.jsonl"),
        &sc.dir.join("ops.whsec"),
        sc.port,
    );
    let gateway = Gateway::start(&sc);
    let mut again = Client::set_value(&gateway, "three");
    let step = again.step();
    assert!(
        step["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("its effect is unknown: interrupted")),
        "{step}"
    );
    // Every delivery made: nothing left in the outbox.
    let start = Instant::now();
    while !sc.outbox().is_empty() {
        assert!(start.elapsed() < LIMIT, "{:#?}", sc.outbox());
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(gateway);

    let ops = sc.received("/hooks/ops");
    // Verified by the reference library, every one; acknowledged or (a duplicate allowed only
    // with its id) seen again.
    for r in &ops {
        assert_eq!(
            (&r["signed"], &r["verified"]),
            (&json!(true), &json!(true)),
            "{r}"
        );
    }
    let mut by_id: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
    for r in &ops {
        by_id
            .entry(r["id"].as_str().expect("id"))
            .or_default()
            .push(&r["body"]);
    }
    for (id, bodies) in &by_id {
        assert!(bodies.iter().all(|b| *b == bodies[0]), "{id}: {bodies:#?}");
    }
    // Each event once by id: eight events, eight ids, no event under two ids.
    let events: BTreeSet<(String, String)> = by_id
        .values()
        .map(|b| {
            (
                b[0]["type"].as_str().unwrap().to_owned(),
                b[0]["data"]["approval"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected: BTreeSet<(String, String)> = [
        ("approval.pending", &id1),
        ("approval.decided", &id1),
        ("effect.committed", &id1),
        ("approval.pending", &id2),
        ("approval.decided", &id2),
        ("approval.pending", &id3),
        ("approval.decided", &id3),
        ("effect.unknown", &id3),
    ]
    .into_iter()
    .map(|(t, a)| (t.to_owned(), a.clone()))
    .collect();
    assert_eq!(by_id.len(), 8, "{by_id:#?}");
    assert_eq!(events, expected);
    let body = |t: &str, a: &str| {
        by_id
            .values()
            .map(|b| b[0])
            .find(|b| b["type"] == t && b["data"]["approval"] == a)
            .expect("event")
            .clone()
    };
    // The CLI's decisions, made in other processes, are reported with their approvers and link.
    let decided = body("approval.decided", &id2);
    assert_eq!(
        (
            &decided["data"]["verdict"],
            &decided["data"]["approver"],
            &decided["data"]["note"],
            &decided["data"]["url"]
        ),
        (
            &json!("deny"),
            &json!("grace (cli)"),
            &json!("not this one"),
            &json!(format!("https://approvals.example/approvals/{id2}"))
        )
    );
    assert_eq!(
        body("approval.decided", &id1)["data"]["approver"],
        "ada (cli)"
    );
    let unknown = body("effect.unknown", &id3);
    assert_eq!(
        (
            &unknown["data"]["reason"],
            &unknown["data"]["tool"],
            &unknown["data"]["principal"]
        ),
        (&json!("interrupted"), &json!("set_value"), &json!("local"))
    );
    assert!(
        !ops.iter()
            .any(|r| r["body"].to_string().contains("\"value\"")),
        "no argument is sent"
    );
    // The Slack-compatible endpoint: the six approval events, one line each, once by id.
    let chat = sc.received("/hooks/chat");
    let chat_ids: BTreeSet<&str> = chat.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(chat_ids.len(), 6, "{chat:#?}");
    let texts: BTreeSet<String> = chat
        .iter()
        .map(|r| r["body"]["text"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        texts.contains(&format!(
            "set_value (approval {id2}) denied by grace (cli): \u{201c}not this one\u{201d} \
             <https://approvals.example/approvals/{id2}|Open it on the approver page>"
        )),
        "{texts:#?}"
    );
}

/// The approver page's process delivers too: with the gateway down, a decision made by
/// `purra approvals approve` is recorded by that process, and `purra approvals serve --config`
/// (which finds the store and the endpoints' secrets through the gateway's file) delivers it,
/// verified, under its own id; the event recorded while the gateway ran came once.
#[test]
fn the_approver_page_process_delivers_what_the_cli_decided_while_the_gateway_is_down() {
    let sc = Scenario::new("page-delivers", false);
    sc.write_config();
    let _receiver = webhook_receiver(
        &sc.dir.join("received.jsonl"),
        &sc.dir.join("ops.whsec"),
        sc.port,
    );
    let gateway = Gateway::start(&sc);
    let mut call = Client::set_value(&gateway, "four");
    let id = sc.wait_pending();
    let start = Instant::now();
    while sc.received("/hooks/ops").is_empty() {
        assert!(start.elapsed() < LIMIT, "approval.pending never arrived");
        std::thread::sleep(Duration::from_millis(50));
    }
    gateway.kill();
    call.step();
    sc.approvals(&[
        "approve",
        &id,
        "--approver",
        "ada",
        "--note",
        "from the terminal",
    ]);
    assert_eq!(sc.received("/hooks/ops").len(), 1);

    let mut page = Command::new(purra_bin())
        .args([
            "approvals",
            "serve",
            "--config",
            &sc.config(),
            "--listen",
            "127.0.0.1:0",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the page");
    let lines = lines_of(page.stderr.take().expect("stderr"), |line| {
        eprintln!("[page] {line}");
        Some(line)
    });
    let start = Instant::now();
    while sc.received("/hooks/ops").len() < 2 {
        assert!(start.elapsed() < LIMIT, "approval.decided never arrived");
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = page.kill();
    let _ = page.wait();
    let said: Vec<String> = lines.try_iter().collect();
    assert!(
        said.iter()
            .any(|l| l == "purra approvals: delivering webhooks: chat, ops"),
        "{said:?}"
    );
    let ops = sc.received("/hooks/ops");
    assert_eq!(ops.len(), 2, "{ops:#?}");
    assert_ne!(ops[0]["id"], ops[1]["id"]);
    for r in &ops {
        assert_eq!(r["verified"], true, "{r}");
    }
    let decided = &ops[1]["body"];
    assert_eq!(
        (
            &decided["type"],
            &decided["data"]["approval"],
            &decided["data"]["approver"],
            &decided["data"]["note"],
            &decided["data"]["url"]
        ),
        (
            &json!("approval.decided"),
            &json!(id),
            &json!("ada (cli)"),
            &json!("from the terminal"),
            &json!(format!("https://approvals.example/approvals/{id}"))
        )
    );

    // A secret the page's process cannot read stops no page: it says so and delivers nothing.
    let text = std::fs::read_to_string(sc.config())
        .expect("config")
        .replace(
            "secret_file = \"ops.whsec\"",
            "secret_env = \"PURRA_TEST_WEBHOOK_SECRET_UNSET\"",
        );
    let other = sc.dir.join("elsewhere.toml");
    std::fs::write(&other, text).expect("config");
    let mut page = Command::new(purra_bin())
        .args(["approvals", "serve", "--config"])
        .arg(&other)
        .args(["--listen", "127.0.0.1:0"])
        .env_remove("PURRA_TEST_WEBHOOK_SECRET_UNSET")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the page");
    let lines = lines_of(page.stderr.take().expect("stderr"), Some);
    let mut said = Vec::new();
    let start = Instant::now();
    while !said
        .iter()
        .any(|l: &String| l.contains("webhooks.ops.secret_env"))
    {
        let line = lines
            .recv_timeout(LIMIT.saturating_sub(start.elapsed()))
            .unwrap_or_else(|_| panic!("the page did not start: {said:?}"));
        said.push(line);
    }
    let _ = page.kill();
    let _ = page.wait();
    assert!(
        said.iter().any(|l| l
            == "purra approvals: not delivering webhooks (the gateway does): the configuration has 1 mistake:"),
        "{said:?}"
    );
    assert!(
        said.iter().any(|l| l.ends_with(
            "webhooks.ops.secret_env: the environment variable PURRA_TEST_WEBHOOK_SECRET_UNSET is not set or empty"
        )),
        "{said:?}"
    );
    assert!(
        !said
            .iter()
            .any(|l| l.starts_with("purra approvals: delivering")),
        "{said:?}"
    );
}

/// `purra webhooks list` shows what is not delivered yet (pending and failed, with attempts and
/// the last failure), `--failed` and `--endpoint` narrow it, `--json` is the exact data, and
/// `purra webhooks retry` makes the failed ones pending again.
#[test]
fn the_cli_lists_undelivered_deliveries_and_retries_the_failed_ones() {
    let sc = Scenario::new("cli", false);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (failed_id, pending_id) = rt.block_on(async {
        use purra_core::{ApprovalGateway, WebhookOutbox};
        let store = purra_sqlite::SqliteStore::open(sc.db()).expect("store");
        store
            .set_webhook_endpoints(vec![
                purra_core::WebhookEndpoint {
                    name: "ops".into(),
                    events: vec![purra_core::WebhookEventType::ApprovalPending],
                },
                purra_core::WebhookEndpoint {
                    name: "chat".into(),
                    events: vec![purra_core::WebhookEventType::ApprovalPending],
                },
            ])
            .await
            .expect("endpoints");
        store
            .prepare(purra_store_tests::request("a"))
            .await
            .expect("prepare");
        let d = store
            .claim_webhook("ops".into(), Duration::from_secs(60))
            .await
            .expect("claim")
            .expect("due");
        let failure = purra_core::WebhookFailure {
            status: Some(500),
            error: "HTTP 500 Internal Server Error".into(),
        };
        store
            .webhook_failed(d.lease.clone(), failure, None)
            .await
            .expect("failed");
        let chat = store
            .webhook_deliveries(purra_core::WebhookQuery::all().endpoint("chat"))
            .await
            .expect("list");
        (d.lease.msg_id, chat[0].msg_id.clone())
    });
    assert_eq!(failed_id, pending_id, "one event, one id on both endpoints");
    let db = sc.db();
    let out = purra(&["webhooks", "list", "--db", &db]);
    assert_eq!(out.status.code(), Some(0));
    let id = &failed_id;
    let pad = " ".repeat(id.len() - 2);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!(
            "ID{pad}  ENDPOINT  EVENT             STATE    ATTEMPTS  LAST FAILURE\n\
             {id}  chat      approval.pending  pending  0\n\
             {id}  ops       approval.pending  failed   1         HTTP 500 Internal Server Error\n"
        )
    );
    let out = purra(&["webhooks", "list", "--failed", "--json", "--db", &db]);
    let listed: Value = serde_json::from_slice(&out.stdout).expect("json");
    let one = &listed["deliveries"][0];
    assert_eq!(listed["deliveries"].as_array().map(Vec::len), Some(1));
    assert_eq!(
        (
            &one["id"],
            &one["endpoint"],
            &one["event"],
            &one["state"],
            &one["attempts"],
            &one["lastStatus"],
            &one["nextAtMs"],
            &one["payload"]["type"],
            &one["payload"]["data"]["approval"]
        ),
        (
            &json!(id),
            &json!("ops"),
            &json!("approval.pending"),
            &json!("failed"),
            &json!(1),
            &json!(500),
            &Value::Null,
            &json!("approval.pending"),
            &json!("approval-1")
        )
    );
    let out = purra(&["webhooks", "list", "--endpoint", "nobody", "--db", &db]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("no webhook delivery waits in {db}\n")
    );
    let out = purra(&["webhooks", "retry", "--endpoint", "ops", "--db", &db]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "1 failed delivery is pending again: the gateway sends it under its own webhook-id\n"
    );
    let out = purra(&["webhooks", "retry", "--json", "--db", &db]);
    assert_eq!(
        serde_json::from_slice::<Value>(&out.stdout).expect("json"),
        json!({"retried": 0})
    );
    let out = purra(&["webhooks", "list", "--failed", "--json", "--db", &db]);
    assert_eq!(
        serde_json::from_slice::<Value>(&out.stdout).expect("json"),
        json!({"deliveries": []})
    );
}
