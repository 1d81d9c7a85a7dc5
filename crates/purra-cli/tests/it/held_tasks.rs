//! Held writes as MCP tasks with real processes: `purra gateway` instances (two on one
//! PostgreSQL store, one on a SQLite file), the official Python SDK's upstream over Streamable
//! HTTP whose fsynced ledger records every write it received, and the Python SDK 1.30's tasks
//! client (`peers/python/held_task_client.py`) calling the held write as a 2025-11-25 task on one
//! instance and following it with a second session on the other; decisions by `purra approvals`.
//!
//! - Approved: the task is answered at once (`working`, the write listed with `taskSupport:
//!   optional`), `tasks/get` on the other instance says `waiting for approval approval-N`,
//!   `tasks/result` there returns the upstream's result after the decision; the upstream received
//!   the write once.
//! - Denied: the task's result is the refusal (`approval_denied`); nothing is sent.
//! - Cancelled on the other instance: the undecided approval is withdrawn (a denial recorded as
//!   the caller's, `task cancelled`); nothing is sent.
//! - The 2026-07-28 tasks extension (stateless requests): the task at once, `tasks/get` on the
//!   other instance inlines the result after the approval.
//! - `dispatch = "on_approval"`: a call without a task ends pending; the approval alone sends the
//!   write once; the same call made again on the other instance gets the receipt.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::clients::{serving, spawn_gateway};
use crate::support::peers::{
    free_port, fresh_dir, lines_of, peer, peers_dir, postgres_schema, repo_root, HttpUpstream,
};
use crate::support::run::{approvals_json, purra, stateless_post, LIMIT};

/// `purra gateway` processes on one store.
struct Gateways {
    children: Vec<Child>,
    urls: Vec<String>,
    ports: Vec<u16>,
}

impl Drop for Gateways {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// One instance's configuration; `write` adds keys to the write's binding.
fn config_text(db: &str, port: u16, upstream: &str, wait: &str, write: &str) -> String {
    format!(
        r#"[gateway]
name = "held"
db = "{db}"
listen = "127.0.0.1:{port}"
principal = "alice"
approval_wait = "{wait}"
progress_interval = "1s"

[upstreams.values]
url = "{upstream}"

[writes.set_value]
upstream = "values"
title = "Set the value"
effect = "write"
binding_id = "values"
binding_revision = "1"
scope_id = "values"
scope_revision = "1"
{write}

[writes.set_value.scope]
arguments = ["len(value) <= 100"]
"#
    )
}

fn start_gateways(dir: &Path, db: &str, upstream: &HttpUpstream, n: usize) -> Gateways {
    start_configured(dir, db, upstream, n, "30s", "")
}

fn start_configured(
    dir: &Path,
    db: &str,
    upstream: &HttpUpstream,
    n: usize,
    wait: &str,
    write: &str,
) -> Gateways {
    start_with(dir, n, |port| {
        config_text(db, port, &upstream.url, wait, write)
    })
}

/// `n` instances, each configured by `config` from its port.
fn start_with(dir: &Path, n: usize, config: impl Fn(u16) -> String) -> Gateways {
    let mut g = Gateways {
        children: Vec::new(),
        urls: Vec::new(),
        ports: Vec::new(),
    };
    for i in 0..n {
        let port = free_port();
        let file = dir.join(format!("g{i}.toml"));
        std::fs::write(&file, config(port)).expect("config");
        let (child, rx) = spawn_gateway(&file);
        serving(&rx, LIMIT);
        std::thread::spawn(move || while rx.recv().is_ok() {});
        g.children.push(child);
        g.urls.push(format!("http://127.0.0.1:{port}/mcp"));
        g.ports.push(port);
    }
    g
}

/// The tasks client, running: its JSON lines.
struct TaskClient {
    child: Child,
    lines: Receiver<Value>,
    seen: Vec<Value>,
}

impl Drop for TaskClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl TaskClient {
    fn start(call: &str, poll: &str, value: &str, cancel: bool) -> TaskClient {
        TaskClient::start_as(call, poll, value, cancel, None)
    }

    /// [`TaskClient::start`] sending `token` as its bearer token.
    fn start_as(
        call: &str,
        poll: &str,
        value: &str,
        cancel: bool,
        token: Option<&str>,
    ) -> TaskClient {
        let mut cmd = Command::new(peer(peers_dir().join("venv-mcp1/bin/python")));
        cmd.arg(peer(repo_root().join("peers/python/held_task_client.py")))
            .args(["--call", call, "--poll", poll, "--value", value]);
        if cancel {
            cmd.arg("--cancel");
        }
        if let Some(t) = token {
            cmd.args(["--token", t]);
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the tasks client");
        let lines = lines_of(child.stdout.take().expect("stdout"), |line| {
            eprintln!("[client] {line}");
            Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        });
        TaskClient {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// The first line (seen or new) whose event is `event` and for which `pred` holds.
    fn wait_for(&mut self, event: &str, pred: impl Fn(&Value) -> bool) -> Value {
        if let Some(v) = self.seen.iter().find(|v| v["event"] == event && pred(v)) {
            return v.clone();
        }
        let start = Instant::now();
        loop {
            let v = self
                .lines
                .recv_timeout(LIMIT.saturating_sub(start.elapsed()))
                .unwrap_or_else(|_| panic!("no {event} line; the client printed {:?}", self.seen));
            self.seen.push(v.clone());
            if v["event"] == event && pred(&v) {
                return v;
            }
        }
    }

    /// The approval the task says it waits for (once it says so).
    fn approval(&mut self) -> String {
        let line = self.wait_for("status", |v| {
            v["statusMessage"]
                .as_str()
                .is_some_and(|m| m.starts_with("waiting for approval "))
        });
        line["statusMessage"].as_str().unwrap()["waiting for approval ".len()..].to_owned()
    }
}

fn decide(db: &str, verb: &str, approval: &str) {
    let out = purra(&["approvals", verb, approval, "--db", db]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "purra approvals {verb}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The three cases on gateways `call` (where the task is created) and `poll` (where it is
/// followed) of the store `db`.
fn held_writes_run_as_tasks(db: &str, upstream: &HttpUpstream, call: &str, poll: &str) {
    // Approved: the task at once, followed elsewhere, its result the upstream's.
    let mut c = TaskClient::start(call, poll, "approved", false);
    let created = c.wait_for("created", |_| true);
    assert_eq!(
        (
            &created["status"],
            &created["taskSupport"],
            &created["serverTasks"],
            &created["protocol"]
        ),
        (
            &json!("working"),
            &json!("optional"),
            &json!(true),
            &json!("2025-11-25")
        )
    );
    // At once: long before `approval_wait` (30 s) would have ended.
    assert!(created["ms"].as_u64().unwrap() < 10_000, "{created}");
    let approval = c.approval();
    assert!(upstream.writes().is_empty());
    decide(db, "approve", &approval);
    let result = c.wait_for("result", |_| true);
    assert_eq!(
        result["result"]["structuredContent"],
        json!({"stored": "approved"}),
        "{result}"
    );
    assert_eq!(
        result["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        created["taskId"]
    );
    let listed = c.wait_for("listed", |_| true);
    assert!(listed["tasks"]
        .as_array()
        .unwrap()
        .contains(&created["taskId"]));
    c.wait_for("done", |_| true);
    assert_eq!(upstream.writes(), vec!["approved".to_owned()]);

    // Denied: the task's result is the refusal.
    let mut c = TaskClient::start(call, poll, "denied", false);
    let approval = c.approval();
    decide(db, "deny", &approval);
    let result = c.wait_for("result", |_| true);
    assert_eq!(result["result"]["isError"], true, "{result}");
    let text = result["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with(&format!(
            "set_value was not sent: approval {approval} was denied by"
        )) && text.contains("(approval_denied)"),
        "{text}"
    );
    c.wait_for("done", |_| true);

    // Cancelled on the other instance: the approval is withdrawn.
    let mut c = TaskClient::start(call, poll, "cancelled", true);
    let approval = c.approval();
    let ack = c.wait_for("cancelled", |_| true);
    assert_eq!(ack["status"], "cancelled");
    let error = c.wait_for("result_error", |_| true);
    assert_eq!(error["code"], -32600, "{error}");
    c.wait_for("done", |_| true);
    let start = Instant::now();
    let shown = loop {
        let shown = approvals_json(db, &["show", &approval]);
        if shown["state"] != "pending" || start.elapsed() > LIMIT {
            break shown;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(shown["decision"]["verdict"], "deny", "{shown}");
    assert_eq!(shown["decision"]["approver"], "alice (task cancelled)");
    assert_eq!(
        shown["decision"]["note"],
        "withdrawn: the caller cancelled its task"
    );
    assert_eq!(upstream.writes(), vec!["approved".to_owned()]);
}

/// Acceptance: a task-capable client gets a task at once, polls it on another instance (two on
/// PostgreSQL) and receives the result after the decision; a denial is its result; a
/// cancellation withdraws the approval.
#[test]
fn a_held_write_is_a_task_any_instance_answers() {
    let dir = fresh_dir("held-tasks", "postgres");
    let db = postgres_schema("held_tasks");
    let upstream = HttpUpstream::start(&dir, &[]);
    let gw = start_gateways(&dir, &db, &upstream, 2);
    held_writes_run_as_tasks(&db, &upstream, &gw.urls[0], &gw.urls[1]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The same on one instance on a SQLite file (the task followed in a second session).
#[test]
fn a_held_write_is_a_task_on_a_sqlite_gateway() {
    let dir = fresh_dir("held-tasks", "sqlite");
    let db = dir.join("purra.db").to_string_lossy().into_owned();
    let upstream = HttpUpstream::start(&dir, &[]);
    let gw = start_gateways(&dir, &db, &upstream, 1);
    held_writes_run_as_tasks(&db, &upstream, &gw.urls[0], &gw.urls[0]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `dispatch = "on_approval"` (two instances on PostgreSQL): a call without a task ends pending
/// as before; the approval alone sends the write, once, with nobody calling; the same call made
/// again on the other instance is answered from the receipt, nothing sent again.
#[test]
fn an_on_approval_write_is_sent_when_approved_and_the_next_call_gets_its_receipt() {
    let dir = fresh_dir("held-tasks", "on-approval");
    let db = postgres_schema("held_dispatch");
    let upstream = HttpUpstream::start(&dir, &[]);
    let gw = start_configured(&dir, &db, &upstream, 2, "1s", "dispatch = \"on_approval\"");
    let first = crate::grants::set_value(gw.ports[0], "sent-on-approval");
    let text = first["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        first["isError"] == true && text.contains("is pending"),
        "{first}"
    );
    let approval = approvals_json(&db, &["list"])["approvals"]
        .as_array()
        .expect("approvals")
        .iter()
        .find(|a| a["state"] == "pending")
        .and_then(|a| a["id"].as_str())
        .expect("a pending approval")
        .to_owned();
    assert_eq!(
        approvals_json(&db, &["show", &approval])["labels"]["sends_without_caller"],
        "true"
    );
    decide(&db, "approve", &approval);
    let start = Instant::now();
    while upstream.writes().is_empty() {
        assert!(start.elapsed() < LIMIT, "the approved write was never sent");
        std::thread::sleep(Duration::from_millis(100));
    }
    let again = crate::grants::set_value(gw.ports[1], "sent-on-approval");
    assert_eq!(
        again["structuredContent"],
        json!({"stored": "sent-on-approval"}),
        "{again}"
    );
    // Both sweepers had a second more to send it again: once is all.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(upstream.writes(), vec!["sent-on-approval".to_owned()]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// One stateless 2026-07-28 request `method` with `params` to the gateway on `port`, from a
/// client that declares the tasks extension: the JSON-RPC answer.
fn modern(port: u16, method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {
            "extensions": {"io.modelcontextprotocol/tasks": {}}
        },
        "io.modelcontextprotocol/clientInfo": {"name": "task-client", "version": "1"}
    });
    stateless_post(port, method, params).1
}

/// The 2026-07-28 tasks extension (two instances on PostgreSQL): a client declaring it gets the
/// held write as a task at once; `tasks/get` on the other instance shows what it waits for,
/// then, after the approval, the write's result inlined; sent once.
#[test]
fn a_held_write_is_an_extension_task_on_any_instance() {
    let dir = fresh_dir("held-tasks", "extension");
    let db = postgres_schema("held_extension");
    let upstream = HttpUpstream::start(&dir, &[]);
    let gw = start_gateways(&dir, &db, &upstream, 2);
    let start = Instant::now();
    let created = modern(
        gw.ports[0],
        "tools/call",
        json!({"name": "set_value", "arguments": {"value": "extension"}}),
    );
    assert!(start.elapsed() < Duration::from_secs(10), "{created}");
    assert_eq!(
        (
            &created["result"]["resultType"],
            &created["result"]["status"]
        ),
        (&json!("task"), &json!("working")),
        "{created}"
    );
    let id = created["result"]["taskId"].as_str().unwrap().to_owned();
    let get = || modern(gw.ports[1], "tasks/get", json!({"taskId": id}));
    let waiting = loop {
        let got = get();
        if got["result"]["statusMessage"].is_string() || start.elapsed() > LIMIT {
            break got;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let message = waiting["result"]["statusMessage"]
        .as_str()
        .unwrap_or_default();
    let approval = message
        .strip_prefix("waiting for approval ")
        .unwrap_or_else(|| panic!("{waiting}"))
        .to_owned();
    assert_eq!(waiting["result"]["status"], "working");
    assert!(upstream.writes().is_empty());
    decide(&db, "approve", &approval);
    let done = loop {
        let got = get();
        if got["result"]["status"] != "working" || start.elapsed() > LIMIT {
            break got;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(done["result"]["status"], "completed", "{done}");
    assert_eq!(
        done["result"]["result"]["structuredContent"],
        json!({"stored": "extension"}),
        "{done}"
    );
    assert_eq!(upstream.writes(), vec!["extension".to_owned()]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A held write's task of an authenticated caller (a token of oidc-provider, `[gateway.auth]`)
/// on two instances on PostgreSQL: the task is kept under the caller's principal (whose key
/// joins issuer and subject with NUL, which PostgreSQL refused: no task could be created), is
/// followed on the other instance with the same token, and ends with the upstream's result.
#[test]
fn an_authenticated_caller_s_held_write_is_a_task_on_postgres() {
    const RESOURCE: &str = "http://mcp.held.test/mcp";
    let dir = fresh_dir("held-tasks", "principal");
    let db = postgres_schema("held_principal");
    let upstream = HttpUpstream::start(&dir, &[]);
    let issuer = crate::support::peers::oidc_issuer();
    let gw = start_with(&dir, 2, |port| {
        format!(
            "{}\n[gateway.auth]\nissuer = {issuer:?}\nresource = {RESOURCE:?}\n",
            config_text(&db, port, &upstream.url, "30s", "").replace("principal = \"alice\"\n", "")
        )
    });
    let alice = crate::support::peers::token_for(issuer, "alice", RESOURCE);
    let mut c = TaskClient::start_as(&gw.urls[0], &gw.urls[1], "by-alice", false, Some(&alice));
    let created = c.wait_for("created", |_| true);
    assert_eq!(created["status"], "working", "{created}");
    let approval = c.approval();
    decide(&db, "approve", &approval);
    let result = c.wait_for("result", |_| true);
    assert_eq!(
        result["result"]["structuredContent"],
        json!({"stored": "by-alice"}),
        "{result}"
    );
    let listed = c.wait_for("listed", |_| true);
    assert_eq!(
        listed["tasks"],
        json!([created["taskId"].clone()]),
        "{listed}"
    );
    c.wait_for("done", |_| true);
    assert_eq!(upstream.writes(), vec!["by-alice".to_owned()]);
    let _ = std::fs::remove_dir_all(&dir);
}
