//! Reconciling `unknown` effects end to end, as an operator does it: `purra gateway` over a
//! Python SDK upstream that honours purra's idempotency key (`peers/python/keyed_write_server.py`,
//! which keeps each key's result fsynced and can exit right after executing), the Python SDK
//! client calling the write over Streamable HTTP, the approval and every `purra effects` command
//! run as other processes, and a webhook receiver verifying every delivery with the Standard
//! Webhooks reference library (`peers/python/webhook_receiver.py`).
//!
//! An unknown effect changes only by an operator's recorded decision or a resend under the same
//! key: the upstream exits after executing, so the write is `unknown`; a resend of a binding that
//! does not say `idempotent = true` (and an upstream that declares nothing) is refused and nothing
//! reaches the upstream; a reconciliation records the operator and the evidence, moves the effect,
//! and is in the audit log and the webhook deliveries. For an idempotent binding, the resend goes
//! to a fresh upstream process under the key the first send carried, the upstream answers it from
//! the result it kept (one execution in total), the receipt is recorded, and a second resend is
//! refused naming the first.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc::Receiver as Lines;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::clients::{gateway_client, json_lines, serving, spawn_gateway, wait_for, Sdk};
use crate::support::peers;
use crate::support::run::{approvals_json, purra, wait_approval, Killed, LIMIT};
use crate::support::webdriver::Browser;

use peers::{fresh_dir, peer, postgres_schema, python, repo_root, webhook_receiver};

/// The endpoint's secret (24 random bytes, as the specification serializes them).
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// One scenario's directory: configuration, store, upstream ledger, receiver ledger.
struct Scenario {
    dir: PathBuf,
    port: u16,
    db: String,
}

impl Drop for Scenario {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Scenario {
    /// `set_value` bound as a write (`idempotent` as given) over the keyed upstream, and one
    /// webhook endpoint subscribed to every event; on SQLite or (`postgres`) a schema of its own.
    fn new(name: &str, idempotent: bool, postgres: bool) -> Scenario {
        let dir = fresh_dir("effects", name);
        let port = peers::free_port();
        std::fs::write(dir.join("ops.whsec"), format!("{SECRET}\n")).expect("secret");
        let db = if postgres {
            postgres_schema("effects")
        } else {
            dir.join("gateway.db").to_string_lossy().into_owned()
        };
        let sc = Scenario { dir, port, db };
        let upstream = peer(repo_root().join("peers/python/keyed_write_server.py"));
        let text = format!(
            r#"[gateway]
name = "gw"
db = {db:?}
listen = "127.0.0.1:0"
approval_wait = "90s"
progress_interval = "1s"

[upstreams.values]
command = [{python:?}, {upstream:?}, "--dir", {dir:?}]

[writes.set_value]
upstream = "values"
title = "Set the value"
effect = "write"
binding_id = "values"
binding_revision = "1"
scope_id = "values-clients"
scope_revision = "1"
scope = {{ clients = ["gateway-client-python"] }}
idempotent = {idempotent}

[webhooks.ops]
url = "http://127.0.0.1:{port}/hooks/ops"
secret_file = "ops.whsec"
timeout = "2s"
backoff = "200ms"
max_backoff = "1s"
"#,
            python = python(),
            dir = sc.dir.to_string_lossy(),
            port = sc.port,
            db = sc.db,
        );
        std::fs::write(sc.config(), text).expect("config");
        sc
    }

    fn config(&self) -> String {
        self.dir.join("gateway.toml").to_string_lossy().into_owned()
    }

    /// Rewrites the configuration: the write `set_note` (not declared idempotent by the
    /// binding) over purra's own demo server (`purra serve-demo --state DIR`, which honours the
    /// key and declares `tools.idempotency`) behind the lossy relay `peers/python/lossy_stdio.py`,
    /// which loses one `tools/call` answer while the file `lose-answer` exists.
    fn with_purra_upstream(&self) {
        let relay = peer(repo_root().join("peers/python/lossy_stdio.py"));
        let text = format!(
            r#"[gateway]
name = "gw"
db = {db:?}
listen = "127.0.0.1:0"
approval_wait = "90s"
progress_interval = "1s"

[upstreams.notes]
command = [{python:?}, {relay:?}, "--trigger", {trigger:?}, "--ledger", {ledger:?}, "--",
           {purra:?}, "serve-demo", "--state", {dir:?}]

[writes.set_note]
upstream = "notes"
title = "Replace the note"
effect = "write"
binding_id = "notes"
binding_revision = "1"
scope_id = "notes-clients"
scope_revision = "1"
scope = {{ clients = ["gateway-client-python"] }}

[webhooks.ops]
url = "http://127.0.0.1:{port}/hooks/ops"
secret_file = "ops.whsec"
timeout = "2s"
backoff = "200ms"
max_backoff = "1s"
"#,
            python = python(),
            purra = env!("CARGO_BIN_EXE_purra"),
            trigger = self.dir.join("lose-answer").to_string_lossy(),
            ledger = self.dir.join("ledger.txt").to_string_lossy(),
            dir = self.dir.to_string_lossy(),
            port = self.port,
            db = self.db,
        );
        std::fs::write(self.config(), text).expect("config");
    }

    /// The `set_note` executions purra's demo server logged, in every process.
    fn note_writes(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.join("writes.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// The upstream's ledger lines.
    fn ledger(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.join("ledger.txt"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// The ledger lines starting with `prefix`.
    fn lines(&self, prefix: &str) -> Vec<String> {
        self.ledger()
            .into_iter()
            .filter(|l| l.starts_with(prefix))
            .collect()
    }

    /// `purra effects ARGS --db DB --json`: the exit code, the JSON on stdout (or null) and
    /// stderr.
    fn effects(&self, args: &[&str]) -> (Option<i32>, Value, String) {
        let mut all = vec!["effects"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--db", &self.db, "--json"]);
        self.run(&all)
    }

    /// `purra effects ARGS --config FILE --json` (the store found through the gateway file).
    fn effects_with_config(&self, args: &[&str]) -> (Option<i32>, Value, String) {
        let config = self.config();
        let mut all = vec!["effects"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--config", &config, "--json"]);
        self.run(&all)
    }

    fn run(&self, args: &[&str]) -> (Option<i32>, Value, String) {
        let out = purra(args);
        let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        (
            out.status.code(),
            json,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Every request the receiver recorded.
    fn received(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.join("received.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).expect("ledger line"))
            .collect()
    }

    /// Waits until the receiver recorded a verified `event` whose data `pred` holds for; its
    /// data.
    fn wait_event(&self, event: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let start = Instant::now();
        loop {
            if let Some(r) = self
                .received()
                .into_iter()
                .find(|r| r["body"]["type"] == event && pred(&r["body"]["data"]))
            {
                assert_eq!(r["verified"], true, "{r}");
                return r["body"]["data"].clone();
            }
            assert!(
                start.elapsed() < LIMIT,
                "no {event} delivered: {:?}",
                self.received()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The store's audit rows about `key` (read as another process would).
    fn audit_of(&self, key: &str) -> Vec<purra_core::AuditEntry> {
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
                .ops()
                .audit(0, 1000)
                .await
                .expect("audit")
                .into_iter()
                .filter(|e| e.claim_key.as_deref() == Some(key))
                .collect()
        })
    }
}

/// `purra gateway` and the webhook receiver (both killed when dropped).
struct Running {
    _gateway: Killed,
    url: String,
    _gateway_lines: Lines<String>,
    _receiver: Killed,
}

impl Running {
    fn start(sc: &Scenario) -> Running {
        let receiver = webhook_receiver(
            &sc.dir.join("received.jsonl"),
            &sc.dir.join("ops.whsec"),
            sc.port,
        );
        let (gateway, lines) = spawn_gateway(sc.config());
        let (url, _) = serving(&lines, LIMIT);
        Running {
            _gateway: Killed(gateway),
            url,
            _gateway_lines: lines,
            _receiver: receiver,
        }
    }
}

/// Calls `set_value` through the gateway with the upstream set to exit right after executing,
/// approves the write from another process, and waits for the client's answer: the effect's
/// key (the approval's intent digest) and the approval id.
fn interrupted_write(sc: &Scenario, url: &str) -> (String, String) {
    interrupted_write_of(sc, url, "v1")
}

/// [`interrupted_write`] of `value`.
fn interrupted_write_of(sc: &Scenario, url: &str, value: &str) -> (String, String) {
    std::fs::write(sc.dir.join("crash-after-execute"), "").expect("trigger");
    interrupted_call(sc, url, "set_value", json!({"value": value}))
}

/// Calls the write `tool` with `args` through the gateway (its upstream set to lose the answer),
/// approves it from another process, and waits for the client's answer saying the effect is
/// unknown: the effect's key and the approval id.
fn interrupted_call(sc: &Scenario, url: &str, tool: &str, args: Value) -> (String, String) {
    let steps = json!([{"call": tool, "args": args}]);
    let (child, lines) = json_lines(gateway_client(Sdk::Python).args([
        "--steps",
        &steps.to_string(),
        "--http",
        url,
    ]));
    let _client = Killed(child);
    let id = wait_approval(&sc.db, "a pending approval", |a| a["state"] == "pending");
    approvals_json(&sc.db, &["approve", &id, "--approver", "ada"]);
    let mut seen = Vec::new();
    let step = wait_for(&lines, &mut seen, "call step", LIMIT, |v| {
        v["step"] == "call"
    });
    let text = step["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(
        text,
        format!(
            "{tool} was claimed once (approval {id}) and its effect is unknown: \
             mcp_connection_closed. It is never sent again; an operator reconciles it with \
             evidence."
        ),
        "{step}"
    );
    let key = approvals_json(&sc.db, &["show", &id])["intentDigest"]
        .as_str()
        .expect("digest")
        .to_owned();
    (key, id)
}

/// The acceptance on SQLite: the interrupted write, the refused resend, the reconciliation.
#[test]
fn unknown_moves_by_a_recorded_decision() {
    interrupted_then_reconciled(false);
}

/// The same on PostgreSQL.
#[test]
fn on_postgres_unknown_moves_by_a_recorded_decision() {
    interrupted_then_reconciled(true);
}

fn interrupted_then_reconciled(postgres: bool) {
    let sc = Scenario::new(
        if postgres {
            "reconcile-pg"
        } else {
            "reconcile"
        },
        false,
        postgres,
    );
    let running = Running::start(&sc);
    let (key, id) = interrupted_write(&sc, &running.url);
    // The upstream executed once and never answered.
    assert_eq!(sc.lines("executed"), ["executed v1"], "{:?}", sc.ledger());
    assert_eq!(sc.lines("exit after execute").len(), 1);

    // The operator's queue: the one unknown effect, with what was sent.
    let (code, queue, err) = sc.effects(&["list", "--unknown"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(queue["next"], Value::Null);
    let effects = queue["effects"].as_array().expect("effects");
    assert_eq!(effects.len(), 1, "{queue}");
    let e = &effects[0];
    assert_eq!(
        (
            &e["key"],
            &e["effect"],
            &e["reason"],
            &e["tool"],
            &e["approval"],
            &e["arguments"]
        ),
        (
            &json!(key),
            &json!("unknown"),
            &json!("mcp_connection_closed"),
            &json!("set_value"),
            &json!(id),
            &json!({"value": "v1"})
        )
    );
    assert!(e["owner"].as_str().is_some_and(|o| !o.is_empty()), "{e}");
    assert!(e["claimedAtMs"].as_u64().is_some(), "{e}");
    // Shown by the approval id too.
    let (code, shown, _) = sc.effects(&["show", &id]);
    assert_eq!((code, &shown), (Some(0), e));

    // No resend: the binding does not say idempotent and the upstream declares nothing.
    let calls = sc.lines("call").len();
    let (code, out, err) = sc.effects_with_config(&["resend", &key, "--by", "ada"]);
    assert_eq!(code, Some(3), "{out} {err}");
    assert_eq!(
        out["error"]["message"],
        format!(
            "resending {key}: refused, nothing sent: [writes.set_value] does not say idempotent \
             = true and upstream values does not declare tools.idempotency: the upstream may not \
             recognize the key, so a resend could have its effect twice; reconcile it instead \
             (purra effects reconcile)"
        ),
        "{out}"
    );
    assert_eq!(sc.lines("call").len(), calls, "{:?}", sc.ledger());
    assert_eq!(sc.lines("executed").len(), 1);
    let (_, still, _) = sc.effects(&["show", &key]);
    assert_eq!(
        (&still["effect"], &still["resend"]),
        (&json!("unknown"), &Value::Null)
    );

    // Refused without changing anything: two outcomes, evidence over the bound.
    let (code, _, _) = sc.effects(&[
        "reconcile",
        &key,
        "--committed",
        "--not-sent",
        "--evidence",
        "x",
    ]);
    assert_eq!(code, Some(64));
    let long = "e".repeat(4097);
    let (code, out, _) = sc.effects(&["reconcile", &key, "--committed", "--evidence", &long]);
    assert_eq!(code, Some(3), "{out}");
    assert_eq!(
        out["error"]["message"],
        format!("reconciling {key}: the evidence is longer than 4096 bytes")
    );

    // The operator's decision, with evidence: recorded, the effect moves, the queue empties.
    let evidence = "the upstream's ledger shows set_value v1 executed";
    let (code, after, err) = sc.effects(&[
        "reconcile",
        &key,
        "--committed",
        "--evidence",
        evidence,
        "--by",
        "ada",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(after["effect"], "committed");
    assert_eq!(
        (&after["reconciled"]["by"], &after["reconciled"]["evidence"]),
        (&json!("ada (cli)"), &json!(evidence))
    );
    let (_, queue, _) = sc.effects(&["list", "--unknown"]);
    assert_eq!(queue["effects"], json!([]));
    let (code, _, _) = sc.effects(&["reconcile", &key, "--not-sent", "--evidence", "again"]);
    assert_eq!(code, Some(3), "reconciled is final");

    // In the audit log: who and the evidence.
    let audit = sc.audit_of(&key);
    let events: Vec<&str> = audit.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(events, ["claimed", "outcome", "reconciled"], "{audit:?}");
    let row = audit.last().expect("reconciled row");
    assert_eq!(
        (
            &row.detail["by"],
            &row.detail["evidence"],
            &row.detail["after"]["outcome"]
        ),
        (&json!("ada (cli)"), &json!(evidence), &json!("committed"))
    );

    // In the webhook deliveries, verified: the unknown effect, then the decision.
    let unknown = sc.wait_event("effect.unknown", |d| d["key"] == key);
    assert_eq!(unknown["reason"], "mcp_connection_closed");
    let reconciled = sc.wait_event("effect.reconciled", |d| d["key"] == key);
    assert_eq!(
        reconciled,
        json!({"approval": id, "tool": "set_value", "principal": "local", "key": key,
               "outcome": "committed", "by": "ada (cli)", "evidence": evidence})
    );
    let committed = sc.wait_event("effect.committed", |d| d["key"] == key);
    assert_eq!(committed["reconciled"], true);
    assert_eq!(sc.lines("executed").len(), 1, "{:?}", sc.ledger());
}

/// The acceptance on SQLite: the resend of an idempotent binding under the same key.
#[test]
fn an_idempotent_resend_executes_once_in_total() {
    resent_once(false);
}

/// The same on PostgreSQL.
#[test]
fn on_postgres_an_idempotent_resend_executes_once_in_total() {
    resent_once(true);
}

fn resent_once(postgres: bool) {
    let sc = Scenario::new(
        if postgres { "resend-pg" } else { "resend" },
        true,
        postgres,
    );
    let running = Running::start(&sc);
    let (key, id) = interrupted_write(&sc, &running.url);
    assert_eq!(sc.lines("executed"), ["executed v1"], "{:?}", sc.ledger());

    // Resent through a fresh upstream process (the one that executed is gone), same key.
    let (code, after, err) = sc.effects_with_config(&["resend", &id, "--by", "ada"]);
    assert_eq!(code, Some(0), "{after} {err}");
    assert_eq!(after["effect"], "committed", "{after}");
    assert_eq!(
        after["receipt"],
        json!({"text": ["stored v1"], "structured": {"stored": "v1"}})
    );
    assert_eq!(
        (&after["resend"]["by"], &after["resend"]["outcome"]),
        (&json!("ada (cli)"), &json!("committed"))
    );
    assert_eq!(after["resent"]["outcome"], "committed");
    // The upstream saw the same key twice and executed once in total.
    let calls = sc.lines("call");
    assert_eq!(calls.len(), 2, "{:?}", sc.ledger());
    assert_eq!(calls[0], calls[1], "{calls:?}");
    assert!(!calls[0].ends_with("key=None"), "{calls:?}");
    assert_eq!(sc.lines("executed").len(), 1, "{:?}", sc.ledger());
    assert_eq!(sc.lines("replayed").len(), 1, "{:?}", sc.ledger());
    // The resend reached a process started after the one that executed had exited.
    let ledger = sc.ledger();
    let exited = ledger.iter().position(|l| l == "exit after execute");
    let resent = ledger.iter().rposition(|l| l.starts_with("call"));
    let (Some(exited), Some(resent)) = (exited, resent) else {
        panic!("{ledger:?}")
    };
    assert!(
        ledger[exited..resent].iter().any(|l| l == "started"),
        "{ledger:?}"
    );

    // A second resend is refused naming the first; nothing reaches the upstream.
    let (code, out, _) = sc.effects_with_config(&["resend", &key, "--by", "bob"]);
    assert_eq!(code, Some(3), "{out}");
    let message = out["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(&format!(
            "resending {key}: refused, nothing sent: already resent by ada (cli) at "
        )) && message.ends_with(" (committed)"),
        "{message}"
    );
    assert_eq!(sc.lines("call").len(), 2, "{:?}", sc.ledger());

    // Audited; the committed effect delivered as a dispatch's is.
    let events: Vec<String> = sc.audit_of(&key).into_iter().map(|e| e.event).collect();
    assert_eq!(
        events,
        ["claimed", "outcome", "resend_claimed", "resent"],
        "{events:?}"
    );
    let committed = sc.wait_event("effect.committed", |d| d["key"] == key);
    assert_eq!(
        committed,
        json!({"approval": id, "tool": "set_value", "principal": "local", "key": key,
               "effect": "committed", "reconciled": false})
    );
}

/// purra to purra: a write whose answer was lost (purra's server executed it and kept its result
/// under the key) is `unknown`; resent through a fresh server process, it is answered with the kept
/// result and executed once in total. The binding does not say `idempotent`: the upstream's
/// declared `tools.idempotency` is what allows the resend.
#[test]
fn a_resend_to_a_purra_server_executes_once_in_total() {
    let sc = Scenario::new("resend-purra", false, false);
    sc.with_purra_upstream();
    let running = Running::start(&sc);
    std::fs::write(sc.dir.join("lose-answer"), "").expect("trigger");
    let (key, id) = interrupted_call(&sc, &running.url, "set_note", json!({"text": "n1"}));
    assert_eq!(sc.note_writes(), ["set_note n1"]);
    assert_eq!(sc.lines("lost answer").len(), 1, "{:?}", sc.ledger());

    let (code, after, err) = sc.effects_with_config(&["resend", &id, "--by", "ada"]);
    assert_eq!(code, Some(0), "{after} {err}");
    assert_eq!(after["effect"], "committed", "{after}");
    // The first execution's result, as the first process kept it.
    assert_eq!(
        after["receipt"]["structured"],
        json!({"stored": "n1", "writes": 1}),
        "{after}"
    );
    // Executed once in total, the resend answered by a process started after the answer was
    // lost (the relay's second start at the least: the gateway restarts its own too).
    assert_eq!(sc.note_writes(), ["set_note n1"]);
    let ledger = sc.ledger();
    let lost = ledger.iter().position(|l| l.starts_with("lost answer"));
    assert!(
        lost.is_some_and(|at| ledger[at..].iter().any(|l| l == "started")),
        "{ledger:?}"
    );
    let events: Vec<String> = sc.audit_of(&key).into_iter().map(|e| e.event).collect();
    assert_eq!(
        events,
        ["claimed", "outcome", "resend_claimed", "resent"],
        "{events:?}"
    );
}

/// A `purra` process the test started, its stderr lines on a channel; killed when dropped.
struct Purra {
    _child: Killed,
    lines: Lines<String>,
}

impl Purra {
    fn start(args: &[&str]) -> Purra {
        let mut child = Command::new(env!("CARGO_BIN_EXE_purra"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn purra");
        let lines = peers::lines_of(child.stderr.take().expect("stderr"), |line| {
            eprintln!("[purra] {line}");
            Some(line)
        });
        Purra {
            _child: Killed(child),
            lines,
        }
    }

    /// Waits for a stderr line starting with `prefix`; the rest of it.
    fn line(&self, prefix: &str) -> String {
        let start = Instant::now();
        loop {
            let line = self
                .lines
                .recv_timeout(LIMIT.saturating_sub(start.elapsed()))
                .unwrap_or_else(|_| panic!("purra never printed {prefix:?}"));
            if let Some(rest) = line.strip_prefix(prefix) {
                return rest.to_owned();
            }
        }
    }
}

/// Signs in on `page` with `token` and opens the queue of unknown effects from the navigation.
fn open_queue(b: &Browser, page: &str, token: &str) {
    b.goto(&format!("{page}login"));
    b.type_css("#token", token);
    b.click_css("#login");
    b.wait_text("#approver", "ada");
    b.click_css("#nav-effects");
    b.wait_for("body[data-view=effects][data-synced=yes]");
}

/// The page (headless Chromium): unknown effects queue up; an approver reconciles one with
/// evidence and resends another under the same key, each recorded as theirs; a page started
/// without the gateway's configuration says why it cannot resend.
#[test]
fn the_page_queues_unknown_effects_and_reconciles_or_resends_them() {
    let sc = Scenario::new("page", true, false);
    let gw = Purra::start(&[
        "gateway",
        "--config",
        &sc.config(),
        "--page",
        "127.0.0.1:0",
        "--page-approver",
        "ada",
    ]);
    let page = gw.line("purra gateway: approver page at ");
    let token = gw.line("purra gateway: sign-in token for ada: ");
    let url = gw.line("purra gateway: serving ");
    let (first, _) = interrupted_write(&sc, &url);
    let (second, _) = interrupted_write_of(&sc, &url, "v2");

    // Without the configuration, the queue cannot resend and says why.
    let alone = Purra::start(&[
        "approvals",
        "serve",
        "--db",
        &sc.db,
        "--listen",
        "127.0.0.1:0",
        "--page-approver",
        "ada",
    ]);
    let alone_page = alone.line("purra approvals: approver page at ");
    let alone_token = alone.line("purra approvals: sign-in token for ada: ");
    let b = Browser::new(1100, 1400);
    open_queue(&b, &alone_page, &alone_token);
    b.wait_text("#count", "2");
    assert_eq!(
        b.text_css("#resend-unavailable-0"),
        "Resend is unavailable here: this page was started without the gateway configuration \
         that binds the upstreams (purra approvals serve --config FILE, or purra gateway --page), \
         so it cannot reach them."
    );
    assert!(b.find("#resend-0").is_none());
    drop(b);
    drop(alone);

    // On the gateway's page: the newest first, with what was sent.
    let b = Browser::new(1100, 1400);
    open_queue(&b, &page, &token);
    b.wait_text("#count", "2");
    assert_eq!(
        b.script("return [...document.querySelectorAll('article.effect')].map(a => a.dataset.key)"),
        json!([second, first])
    );
    assert_eq!(b.text_css("#reason-1"), "mcp_connection_closed");
    // Reconcile the first with evidence.
    let evidence = "the upstream's ledger shows v1 executed";
    b.type_css("#evidence-1", evidence);
    b.click_css("#reconcile-1");
    b.wait_text(
        "#status",
        &format!("{first} reconciled as committed by ada"),
    );
    b.wait_text("#count", "1");
    // Resend the second under its key.
    b.click_css("#resend-0");
    b.wait_text(
        "#status",
        &format!("{second} resent under the same key: committed, the receipt is recorded"),
    );
    b.wait_text("#count", "0");
    b.wait_for("#empty");

    let (_, one, _) = sc.effects(&["show", &first]);
    assert_eq!(
        (
            &one["effect"],
            &one["reconciled"]["by"],
            &one["reconciled"]["evidence"]
        ),
        (
            &json!("committed"),
            &json!("ada (approver page)"),
            &json!(evidence)
        )
    );
    let (_, two, _) = sc.effects(&["show", &second]);
    assert_eq!(
        (
            &two["effect"],
            &two["resend"]["by"],
            &two["receipt"]["structured"]
        ),
        (
            &json!("committed"),
            &json!("ada (approver page)"),
            &json!({"stored": "v2"})
        )
    );
}
