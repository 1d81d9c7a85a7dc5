//! Standing grants with real processes: `purra gateway` instances (three on one PostgreSQL
//! store, one and two on one SQLite file), the official Python SDK's upstream over Streamable
//! HTTP whose fsynced ledger records every write it received, stateless 2026-07-28 `tools/call`
//! requests sent at once from many threads, and `purra grants` / `purra approvals` on the store.
//!
//! - A grant of 10 uses raced by 100 concurrent calls across the instances: exactly 10 reach the
//!   upstream (answered with their receipts), the 90 others wait for approval (90 pending
//!   approvals), the grant lists its 10 uses; after `purra grants revoke` the next call waits.
//! - A grant's argument rule excludes a call outside it; an ended grant is not used.
//! - The approver page (headless Chromium) lists grants with their uses and revokes one; the next
//!   call waits.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::peers::{free_port, fresh_dir, lines_of, postgres_schema, HttpUpstream};
use crate::support::run::{approvals_json, audit_of, purra, purra_bin, stateless_post, LIMIT};
use crate::support::webdriver::Browser;

/// `purra gateway` processes on one store.
struct Gateways {
    children: Vec<Child>,
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

/// The variable the webhook endpoint's secret is read from, and the secret.
const SECRET_ENV: &str = "PURRA_GRANTS_TEST_WHSEC";
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn config_text(db: &str, port: u16, upstream: &str) -> String {
    format!(
        r#"[gateway]
name = "granted"
db = "{db}"
listen = "127.0.0.1:{port}"
principal = "alice"
approval_wait = "1s"
progress_interval = "1s"
max_pending_per_caller = 500
max_calls_per_minute_per_caller = 1000

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

[writes.set_value.scope]
arguments = ["len(value) <= 100"]

# Nothing listens there: every event stays in the outbox, listed by `purra webhooks list`.
[webhooks.ops]
url = "http://127.0.0.1:9/hook"
secret_env = "{SECRET_ENV}"
backoff = "1h"
"#
    )
}

fn start_gateways(dir: &Path, db: &str, upstream: &HttpUpstream, n: usize) -> Gateways {
    let mut g = Gateways {
        children: Vec::new(),
        ports: Vec::new(),
    };
    for i in 0..n {
        let port = free_port();
        let config = dir.join(format!("g{i}.toml"));
        std::fs::write(&config, config_text(db, port, &upstream.url)).expect("config");
        let mut child = Command::new(purra_bin())
            .args(["gateway", "--config", &config.to_string_lossy()])
            .env(SECRET_ENV, SECRET)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn gateway");
        let name = format!("g{i}");
        let rx = lines_of(child.stderr.take().expect("stderr"), move |line| {
            eprintln!("[{name}] {line}");
            Some(line)
        });
        let start = Instant::now();
        loop {
            let line = rx
                .recv_timeout(LIMIT.saturating_sub(start.elapsed()))
                .expect("the gateway says where it serves");
            if line.starts_with("purra gateway: serving ") {
                break;
            }
        }
        // Keep reading its stderr (printed) until it exits.
        std::thread::spawn(move || while rx.recv().is_ok() {});
        g.children.push(child);
        g.ports.push(port);
    }
    g
}

/// One stateless 2026-07-28 `tools/call` of `set_value` with `value` to the gateway on `port`:
/// the JSON-RPC result.
pub(crate) fn set_value(port: u16, value: &str) -> Value {
    let params = json!({
        "name": "set_value",
        "arguments": {"value": value},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "grant-client", "version": "1"}
        }
    });
    let (status, answer) = stateless_post(port, "tools/call", params);
    assert!(status.starts_with("HTTP/1.1 200 OK"), "{status}: {answer}");
    answer["result"].clone()
}

/// Whether a result is the receipt of `value` (sent).
fn sent(result: &Value, value: &str) -> bool {
    result["structuredContent"] == json!({"stored": value})
}

/// Whether a result says the call waits for a pending approval.
fn waits(result: &Value) -> bool {
    result["isError"] == true
        && result["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("is pending"))
}

/// `purra grants ARGS --db DB --json`, which must succeed.
fn grants(db: &str, args: &[&str]) -> Value {
    let mut all: Vec<&str> = vec!["grants"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--db", db, "--json"]);
    let out = purra(&all);
    assert_eq!(
        out.status.code(),
        Some(0),
        "purra {all:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

/// How many approvals of the store are pending.
fn pending(db: &str) -> usize {
    approvals_json(db, &["list", "--limit", "1000"])["approvals"]
        .as_array()
        .expect("approvals")
        .iter()
        .filter(|a| a["state"] == "pending")
        .count()
}

/// `calls` calls at once spread over the gateways (a thread each) against a grant of `uses`:
/// exactly `uses` sent, the others wait; the grant lists its uses; revoked, the next call waits.
fn race(db: &str, dir: &Path, instances: usize, calls: usize, uses: usize) {
    let upstream = HttpUpstream::start(dir, &[]);
    let gw = start_gateways(dir, db, &upstream, instances);
    let id = grants(
        db,
        &[
            "add",
            "--principal",
            "alice",
            "--tool",
            "set_value",
            "--uses",
            &uses.to_string(),
            "--until",
            "1h",
            "--by",
            "ada",
            "--note",
            "the migration",
        ],
    )["granted"]
        .as_str()
        .expect("granted")
        .to_owned();
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(calls));
    let threads: Vec<_> = (0..calls)
        .map(|n| {
            let port = gw.ports[n % gw.ports.len()];
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let value = format!("v{n}");
                barrier.wait();
                let result = set_value(port, &value);
                (value, result)
            })
        })
        .collect();
    let results: Vec<(String, Value)> = threads
        .into_iter()
        .map(|t| t.join().expect("join"))
        .collect();
    let sent_values: Vec<&str> = results
        .iter()
        .filter(|(v, r)| sent(r, v))
        .map(|(v, _)| v.as_str())
        .collect();
    let waiting = results.iter().filter(|(_, r)| waits(r)).count();
    // Each answer's text, for a failure's message.
    let texts: Vec<&str> = results
        .iter()
        .map(|(_, r)| r["content"][0]["text"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(sent_values.len(), uses, "{texts:#?}");
    assert_eq!(waiting, calls - uses, "{texts:#?}");
    let mut writes = upstream.writes();
    writes.sort();
    let mut expected: Vec<String> = sent_values.iter().map(|v| (*v).to_owned()).collect();
    expected.sort();
    assert_eq!(
        writes, expected,
        "the upstream received exactly the granted calls"
    );
    assert_eq!(pending(db), calls - uses);

    // The grant lists its uses; each approval says the grant approved it.
    let shown = grants(db, &["show", &id]);
    assert_eq!(
        (
            shown["used"].clone(),
            shown["usesLeft"].clone(),
            shown["status"].clone()
        ),
        (json!(uses), json!(0), json!("used_up"))
    );
    let used = shown["uses"].as_array().expect("uses");
    assert_eq!(used.len(), uses);
    let approval = used[0]["approval"].as_str().expect("approval");
    let a = approvals_json(db, &["show", approval]);
    assert_eq!(
        a["decision"]["approver"],
        format!("{id} by ada (grant)"),
        "{a}"
    );
    assert_eq!(a["effect"], "committed", "{a}");
    // Its audit trail: prepared, approved by the grant and the use naming the grant (one
    // transaction), then the claim and the outcome as for any approved call (no run waits for
    // a granted call: it is claimed at once).
    let trail = audit_of(db, approval);
    let events: Vec<&str> = trail.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(
        events,
        ["prepared", "decided", "grant_used", "claimed", "outcome"],
        "{trail:?}"
    );
    assert_eq!(trail[2].detail["grant"], id.as_str());
    let listed = grants(db, &["list"]);
    assert_eq!(listed["grants"][0]["id"], id.as_str());
    assert_eq!(listed["grants"][0]["usesLeft"], 0);

    // A second grant, then revoked: the next call waits and nothing more is sent.
    let second = grants(
        db,
        &[
            "add",
            "--principal",
            "alice",
            "--tool",
            "set_value",
            "--uses",
            "5",
            "--until",
            "1h",
        ],
    )["granted"]
        .as_str()
        .expect("granted")
        .to_owned();
    assert!(sent(&set_value(gw.ports[0], "after-grant"), "after-grant"));
    assert_eq!(grants(db, &["revoke", &second])["revoked"], second.as_str());
    let after = set_value(gw.ports[gw.ports.len() - 1], "after-revoke");
    assert!(waits(&after), "{after}");
    assert_eq!(upstream.writes().len(), uses + 1);
    let shown = grants(db, &["show", &second]);
    assert_eq!(
        (
            shown["used"].clone(),
            shown["status"].clone(),
            shown["revoked"]["by"].clone()
        ),
        (json!(1), json!("revoked"), json!("operator (cli)"))
    );
    // Revoking twice is a conflict (exit 3).
    let again = purra(&["grants", "revoke", &second, "--db", db]);
    assert_eq!(again.status.code(), Some(3));
    drop(gw);
}

/// The acceptance race: three instances on one PostgreSQL store, a grant of 10 uses, 100
/// concurrent calls spread over them.
#[test]
fn a_grant_raced_across_a_postgres_fleet_is_never_over_used() {
    let dir = fresh_dir("grants", "pg-race");
    let db = postgres_schema("grants_race");
    race(&db, &dir, 3, 100, 10);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The same on one SQLite file shared by two gateway processes.
#[test]
fn a_grant_raced_on_a_sqlite_file_by_two_gateways_is_never_over_used() {
    let dir = fresh_dir("grants", "sqlite-race");
    let db = dir.join("purra.db").to_string_lossy().into_owned();
    race(&db, &dir, 2, 40, 7);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A grant's argument rule excludes a call outside it; an ended grant is not used; a grant of
/// another principal or tool is not used.
#[test]
fn a_grant_covers_only_calls_inside_its_rules_and_its_time() {
    let dir = fresh_dir("grants", "rules");
    let db = dir.join("purra.db").to_string_lossy().into_owned();
    let upstream = HttpUpstream::start(&dir, &[]);
    let gw = start_gateways(&dir, &db, &upstream, 1);
    let port = gw.ports[0];
    grants(
        &db,
        &[
            "add",
            "--principal",
            "alice",
            "--tool",
            "set_value",
            "--rule",
            "value starts_with \"notes/\"",
            "--uses",
            "5",
            "--until",
            "1h",
        ],
    );
    grants(
        &db,
        &[
            "add",
            "--principal",
            "bob",
            "--tool",
            "set_value",
            "--uses",
            "5",
            "--until",
            "1h",
        ],
    );
    assert!(sent(&set_value(port, "notes/a"), "notes/a"));
    let outside = set_value(port, "etc/passwd");
    assert!(waits(&outside), "{outside}");
    assert_eq!(upstream.writes(), ["notes/a"]);

    // Webhooks: the approval a grant made is announced decided (by the grant), never pending;
    // the call that waits is announced pending.
    let granted = grants(&db, &["show", "grant-1"])["uses"][0]["approval"]
        .as_str()
        .expect("a use")
        .to_owned();
    let waiting = outside["content"][0]["text"]
        .as_str()
        .and_then(|t| t.split("approval ").nth(1))
        .and_then(|t| t.split(' ').next())
        .expect("the waiting approval")
        .to_owned();
    let out = purra(&["webhooks", "list", "--db", &db, "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let listed: Value = serde_json::from_slice(&out.stdout).expect("json");
    let of = |event: &str| -> Vec<String> {
        listed["deliveries"]
            .as_array()
            .expect("deliveries")
            .iter()
            .filter(|d| d["event"] == event)
            .map(|d| d["payload"].to_string())
            .collect()
    };
    let pending = of("approval.pending");
    assert_eq!(pending.len(), 1, "{listed}");
    assert!(
        pending[0].contains(&format!("\"{waiting}\"")),
        "{}",
        pending[0]
    );
    let decided = of("approval.decided");
    assert_eq!(decided.len(), 1, "{listed}");
    assert!(
        decided[0].contains(&format!("\"{granted}\"")),
        "{}",
        decided[0]
    );
    assert!(
        decided[0].contains("grant-1 by operator (grant)"),
        "{}",
        decided[0]
    );

    // A grant that ends: used before, not after.
    let short = grants(
        &db,
        &[
            "add",
            "--principal",
            "alice",
            "--tool",
            "set_value",
            "--uses",
            "5",
            "--until",
            "2s",
        ],
    )["granted"]
        .as_str()
        .expect("granted")
        .to_owned();
    assert!(sent(&set_value(port, "early"), "early"));
    std::thread::sleep(Duration::from_millis(2500));
    let late = set_value(port, "late");
    assert!(waits(&late), "{late}");
    assert_eq!(upstream.writes(), ["notes/a", "early"]);
    let shown = grants(&db, &["show", &short]);
    assert_eq!(
        (shown["used"].clone(), shown["status"].clone()),
        (json!(1), json!("ended"))
    );

    // Bad input is refused before the store is touched: a rule that does not parse, no uses.
    let bad = purra(&[
        "grants",
        "add",
        "--principal",
        "alice",
        "--tool",
        "set_value",
        "--rule",
        "value is great",
        "--uses",
        "1",
        "--until",
        "1h",
        "--db",
        &db,
    ]);
    assert_eq!(bad.status.code(), Some(64));
    let listed = grants(&db, &["list"]);
    assert_eq!(listed["grants"].as_array().map(Vec::len), Some(3));
    drop(gw);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The approver page (headless Chromium, on `purra gateway --page`): the grants are listed with
/// their uses left and the approvals their uses made; revoking one on the page is recorded as the
/// approver's, and the next call waits for an approval.
#[test]
fn the_page_lists_grants_and_revokes_one() {
    let dir = fresh_dir("grants", "page");
    let db = dir.join("purra.db").to_string_lossy().into_owned();
    let upstream = HttpUpstream::start(&dir, &[]);
    let port = free_port();
    let config = dir.join("g.toml");
    std::fs::write(&config, config_text(&db, port, &upstream.url)).expect("config");
    let mut child = Command::new(purra_bin())
        .args(["gateway", "--config", &config.to_string_lossy()])
        .args(["--page", "127.0.0.1:0", "--page-approver", "ada"])
        .env(SECRET_ENV, SECRET)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn gateway");
    let rx = lines_of(child.stderr.take().expect("stderr"), |line| {
        eprintln!("[gateway] {line}");
        Some(line)
    });
    let gw = Gateways {
        children: vec![child],
        ports: vec![port],
    };
    let (mut page, mut token) = (None, None);
    let start = Instant::now();
    while page.is_none() || token.is_none() {
        let line = rx
            .recv_timeout(LIMIT.saturating_sub(start.elapsed()))
            .expect("the gateway says where its page is");
        if let Some(p) = line.strip_prefix("purra gateway: approver page at ") {
            page = Some(p.to_owned());
        }
        if let Some(t) = line.strip_prefix("purra gateway: sign-in token for ada: ") {
            token = Some(t.to_owned());
        }
    }
    std::thread::spawn(move || while rx.recv().is_ok() {});
    let (page, token) = (page.expect("page"), token.expect("token"));
    let id = grants(
        &db,
        &[
            "add",
            "--principal",
            "alice",
            "--tool",
            "set_value",
            "--rule",
            "len(value) <= 10",
            "--uses",
            "5",
            "--until",
            "1h",
            "--by",
            "ada",
        ],
    )["granted"]
        .as_str()
        .expect("granted")
        .to_owned();
    assert!(sent(&set_value(port, "paged"), "paged"));
    let used = grants(&db, &["show", &id])["uses"][0]["approval"]
        .as_str()
        .expect("a use")
        .to_owned();

    let b = Browser::new(1100, 1400);
    b.goto(&format!("{page}login"));
    b.type_css("#token", &token);
    b.click_css("#login");
    b.wait_text("#approver", "ada");
    b.click_css("#nav-grants");
    b.wait_for("body[data-view=grants][data-synced=yes]");
    b.wait_text("#count", "1");
    assert_eq!(b.text_css(&format!("#{id} .uses-left")), "4");
    assert_eq!(b.text_css(&format!("#{id} .status")), "live");
    assert_eq!(b.text_css(&format!("#{id} .rule code")), "len(value) <= 10");
    assert_eq!(b.text_css(&format!("#{id} .uses a")), used);
    b.click_css(&format!("#revoke-{id}"));
    b.wait_text(&format!("#{id} .status"), "revoked");
    assert!(b.find(&format!("#revoke-{id}")).is_none());
    drop(b);

    let shown = grants(&db, &["show", &id]);
    assert_eq!(shown["revoked"]["by"], "ada (page)");
    let after = set_value(port, "later");
    assert!(waits(&after), "{after}");
    assert_eq!(upstream.writes(), ["paged"]);
    drop(gw);
    let _ = std::fs::remove_dir_all(&dir);
}
