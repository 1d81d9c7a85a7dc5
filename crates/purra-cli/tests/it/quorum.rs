//! Approval workflows with real processes: `purra gateway` over the Python SDK's write upstream
//! (its ledger records every write it received), stateless 2026-07-28 `tools/call` requests
//! that wait for the decision, `purra approvals approve|deny --as NAME --config FILE` deciding
//! with the gateway file's `[approvers.groups]`, and the Standard Webhooks receiver
//! (`standardwebhooks` verifying every request).
//!
//! - 2-of-2 from `group:sre`: one vote leaves the call waiting; a vote by someone outside the
//!   group is refused, and a second vote by the same approver; the second approver's vote sends
//!   the write once (the upstream's ledger); a deny by either closes the next one.
//! - `purra approvals serve --config FILE`: its page admits members of the file's groups.
//! - Escalation after a short `escalate_after`: `approval.escalated` arrives verified, then a
//!   member of `escalate_to` (refused before) decides; `on_expiry = "deny"`: the caller's
//!   waiting call ends with the denial naming the expiry, and `approval.expired` arrives.

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::clients::{serving, spawn_gateway};
use crate::support::peers::{fresh_dir, webhook_receiver, HttpUpstream};
use crate::support::run::{approvals_json, page_decide, purra, wait_approval, LIMIT};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// A `purra gateway` process, killed when dropped.
struct Gateway(Child);

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_gateway(config: &Path) -> Gateway {
    let (child, rx) = spawn_gateway(config);
    serving(&rx, LIMIT);
    // Keep reading its stderr (printed) until it exits.
    std::thread::spawn(move || while rx.recv().is_ok() {});
    Gateway(child)
}

/// The gateway file: `set_value` under `approval` (a TOML value), callers waiting up to 30 s
/// (or `request_ttl` when shorter), requests accepting a decision for `request_ttl`, the approver groups, and (with `hook`) an
/// endpoint on the receiver at that port.
fn write_config(
    dir: &Path,
    port: u16,
    upstream: &str,
    approval: &str,
    request_ttl: &str,
    hook: Option<u16>,
) -> std::path::PathBuf {
    let db = dir.join("gateway.db");
    let wait = if request_ttl == "1h" {
        "30s"
    } else {
        request_ttl
    };
    let hook = hook
        .map(|p| {
            format!(
                "\n[webhooks.ops]\nurl = \"http://127.0.0.1:{p}/hooks/ops\"\n\
                 secret_file = \"ops.whsec\"\ntimeout = \"2s\"\nbackoff = \"200ms\"\n\
                 max_backoff = \"1s\"\n"
            )
        })
        .unwrap_or_default();
    let text = format!(
        r#"[gateway]
name = "quorum"
db = {db:?}
listen = "127.0.0.1:{port}"
principal = "carol"
approval_wait = "{wait}"
approval_request_ttl = "{request_ttl}"
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
approval = {approval}

[writes.set_value.scope]
arguments = ["len(value) <= 100"]

[approvers.groups]
sre = ["alice", "bob"]
leads = ["lena"]
{hook}"#
    );
    let file = dir.join("gateway.toml");
    std::fs::write(&file, text).expect("config");
    file
}

fn text_of(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// `purra approvals VERB ID --as WHO --config FILE`: exit code, stdout and stderr.
fn decide(config: &Path, verb: &str, id: &str, who: &str) -> (Option<i32>, String, String) {
    let out = purra(&[
        "approvals",
        verb,
        id,
        "--as",
        who,
        "--config",
        &config.to_string_lossy(),
    ]);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A call of `set_value` with `value` made in a thread (it waits for the decision).
fn call(port: u16, value: &str) -> std::thread::JoinHandle<Value> {
    let value = value.to_owned();
    std::thread::spawn(move || crate::grants::set_value(port, &value))
}

/// Waits until approval `after`'s successor is pending: its id.
fn next_pending(db: &str, seen: &[String]) -> String {
    wait_approval(db, "a new pending approval", |a| {
        a["state"] == "pending" && !seen.iter().any(|s| a["id"] == s.as_str())
    })
}

/// A gateway whose `set_value` needs 2 approving votes from `group:sre`, over the Python SDK's
/// write upstream.
struct TwoOfSre {
    dir: std::path::PathBuf,
    upstream: HttpUpstream,
    port: u16,
    config: std::path::PathBuf,
    db: String,
    _gw: Gateway,
}

impl TwoOfSre {
    fn start(name: &str) -> TwoOfSre {
        let dir = fresh_dir("quorum", name);
        let upstream = HttpUpstream::start(&dir, &[]);
        let port = crate::support::peers::free_port();
        let config = write_config(
            &dir,
            port,
            &upstream.url,
            r#"{ required = 2, from = ["group:sre"] }"#,
            "1h",
            None,
        );
        let db = dir.join("gateway.db").to_string_lossy().into_owned();
        let _gw = start_gateway(&config);
        TwoOfSre {
            dir,
            upstream,
            port,
            config,
            db,
            _gw,
        }
    }
}

#[test]
fn quorum_of_two_refuses_outsiders_sends_once_and_a_deny_closes() {
    let TwoOfSre {
        dir,
        upstream,
        port,
        config,
        db,
        _gw,
    } = TwoOfSre::start("two-of-two");

    let first = call(port, "one");
    let a = next_pending(&db, &[]);
    let (code, out, err) = decide(&config, "approve", &a, "alice");
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("1 of 2 approving votes"), "{out}");
    // One vote: the call still waits and nothing was sent.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!first.is_finished());
    assert!(upstream.writes().is_empty());
    let shown = approvals_json(&db, &["show", &a]);
    assert_eq!(shown["state"], "pending", "{shown}");
    assert_eq!(
        (
            shown["votes"]["approving"].clone(),
            shown["votes"]["required"].clone()
        ),
        (json!(1), json!(2))
    );
    // Someone outside group:sre is refused; alice cannot vote twice.
    let (code, _, err) = decide(&config, "approve", &a, "dave");
    assert_ne!(code, Some(0));
    assert!(
        err.contains("dave may not decide this approval: only group:sre may"),
        "{err}"
    );
    let (code, _, err) = decide(&config, "approve", &a, "alice");
    assert_ne!(code, Some(0));
    assert!(err.contains("alice already voted on it"), "{err}");
    // bob's vote completes the quorum: the waiting call is sent, once.
    let (code, out, err) = decide(&config, "approve", &a, "bob");
    assert_eq!(code, Some(0), "{out}{err}");
    let result = first.join().expect("call");
    assert_eq!(
        result["structuredContent"],
        json!({"stored": "one"}),
        "{result}"
    );
    assert_eq!(upstream.writes(), ["one"]);
    let shown = approvals_json(&db, &["show", &a]);
    let voters: Vec<&str> = shown["votes"]["cast"]
        .as_array()
        .expect("votes")
        .iter()
        .map(|v| v["approver"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(voters, ["alice (cli)", "bob (cli)"], "{shown}");
    assert_eq!(shown["effect"], "committed", "{shown}");

    // A deny by either closes it: alice approves, bob denies; nothing is sent.
    let second = call(port, "two");
    let b = next_pending(&db, std::slice::from_ref(&a));
    assert_eq!(decide(&config, "approve", &b, "alice").0, Some(0));
    let (code, out, err) = decide(&config, "deny", &b, "bob");
    assert_eq!(code, Some(0), "{out}{err}");
    let result = second.join().expect("call");
    assert_eq!(result["isError"], true, "{result}");
    assert!(
        text_of(&result).contains("was denied by bob (cli)"),
        "{result}"
    );
    // And a deny before any approval closes the next one too.
    let third = call(port, "three");
    let c = next_pending(&db, &[a, b]);
    assert_eq!(decide(&config, "deny", &c, "alice").0, Some(0));
    assert!(text_of(&third.join().expect("call")).contains("was denied by alice (cli)"));
    assert_eq!(upstream.writes(), ["one"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `purra approvals serve --config FILE` serves the page with the file's `[approvers.groups]`:
/// a member of `group:sre` votes on the page, someone outside it is refused (before, the page
/// knew no groups and refused every member).
#[test]
fn approvals_serve_from_the_gateway_file_admits_its_groups() {
    let TwoOfSre {
        dir,
        upstream,
        port,
        config,
        db,
        _gw,
    } = TwoOfSre::start("serve-groups");
    let waiting = call(port, "one");
    let a = next_pending(&db, &[]);

    let served = crate::page::Purra::start(&[
        "approvals",
        "serve",
        "--config",
        &config.to_string_lossy(),
        "--listen",
        "127.0.0.1:0",
        "--page-approver",
        "bob",
        "--page-approver",
        "dave",
    ]);
    let page = served.line("purra approvals: approver page at ");
    let page = page.trim_end_matches('/');
    let bob = served.line("purra approvals: sign-in token for bob: ");
    let dave = served.line("purra approvals: sign-in token for dave: ");
    assert_eq!(
        page_decide(page, &dave, &a, "approve"),
        (
            403,
            json!({"ok": false, "message": format!("refused: {a}: dave may not decide this approval: only group:sre may")})
        )
    );
    let (status, answer) = page_decide(page, &bob, &a, "approve");
    assert_eq!((status, &answer["ok"]), (200, &json!(true)), "{answer}");
    let shown = approvals_json(&db, &["show", &a]);
    assert_eq!(shown["state"], "pending", "{shown}");
    assert_eq!(
        shown["votes"]["cast"][0]["approver"], "bob (page)",
        "{shown}"
    );
    // alice's vote on the CLI completes the quorum: the call is sent once.
    assert_eq!(decide(&config, "approve", &a, "alice").0, Some(0));
    let result = waiting.join().expect("call");
    assert_eq!(
        result["structuredContent"],
        json!({"stored": "one"}),
        "{result}"
    );
    assert_eq!(upstream.writes(), ["one"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The verified deliveries of `event` the receiver recorded.
fn received(dir: &Path, event: &str) -> Vec<Value> {
    std::fs::read_to_string(dir.join("received.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("ledger line"))
        .filter(|r| r["body"]["type"] == event && r["verified"] == true)
        .collect()
}

fn wait_received(dir: &Path, event: &str, approval: &str) -> Value {
    let start = Instant::now();
    loop {
        if let Some(r) = received(dir, event)
            .into_iter()
            .find(|r| r["body"]["data"]["approval"] == approval)
        {
            return r;
        }
        assert!(start.elapsed() < LIMIT, "no {event} for {approval}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn escalate_to_decides_late_and_on_expiry_deny_tells_the_caller() {
    let dir = fresh_dir("quorum", "escalate");
    std::fs::write(dir.join("ops.whsec"), format!("{SECRET}\n")).expect("secret");
    let hook = crate::support::peers::free_port();
    let _receiver = webhook_receiver(&dir.join("received.jsonl"), &dir.join("ops.whsec"), hook);
    let upstream = HttpUpstream::start(&dir, &[]);
    let port = crate::support::peers::free_port();
    let config = write_config(
        &dir,
        port,
        &upstream.url,
        r#"{ from = ["group:sre"], escalate_after = "2s", escalate_to = ["group:leads"], on_expiry = "deny" }"#,
        "15s",
        Some(hook),
    );
    let db = dir.join("gateway.db").to_string_lossy().into_owned();
    let _gw = start_gateway(&config);

    // Before the escalation lena (group:leads) may not decide; after it she may.
    let first = call(port, "one");
    let a = next_pending(&db, &[]);
    let (code, _, err) = decide(&config, "approve", &a, "lena");
    assert_ne!(code, Some(0));
    assert!(
        err.contains("lena may not decide this approval: only group:sre may"),
        "{err}"
    );
    let escalated = wait_received(&dir, "approval.escalated", &a);
    assert_eq!(
        escalated["body"]["data"]["escalateTo"],
        json!(["group:leads"])
    );
    let (code, out, err) = decide(&config, "approve", &a, "lena");
    assert_eq!(code, Some(0), "{out}{err}");
    let result = first.join().expect("call");
    assert_eq!(
        result["structuredContent"],
        json!({"stored": "one"}),
        "{result}"
    );
    assert_eq!(received(&dir, "approval.escalated").len(), 1);

    // Nobody decides the next one: at its request's expiry (15 s) it is denied, and the
    // waiting caller is told why.
    let started = Instant::now();
    let second = call(port, "two");
    let b = next_pending(&db, &[a]);
    let result = second.join().expect("call");
    assert!(started.elapsed() >= Duration::from_secs(14), "{result}");
    assert_eq!(result["isError"], true, "{result}");
    let text = text_of(&result);
    assert!(
        text.contains(&format!(
            "approval {b} was denied by expiry (on_expiry = deny)"
        )) && text.contains("expired undecided"),
        "{text}"
    );
    let expired = wait_received(&dir, "approval.expired", &b);
    assert!(
        expired["body"]["data"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("on_expiry")),
        "{expired}"
    );
    assert_eq!(approvals_json(&db, &["show", &b])["state"], "denied");
    assert_eq!(upstream.writes(), ["one"]);
    let _ = std::fs::remove_dir_all(&dir);
}
