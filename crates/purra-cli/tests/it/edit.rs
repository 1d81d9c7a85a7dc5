//! Approve with edit with real processes: `purra gateway --page` on a SQLite file, the official
//! Python SDK's upstream over Streamable HTTP whose fsynced ledger records every write it
//! received, the Python SDK's client waiting on its call, and an approver in headless Chromium.
//!
//! On the page the approver edits the waiting call's arguments: an edit breaking the tool's input
//! schema is refused live by the page (and by the gateway when sent anyway), one breaking the
//! binding's argument rule and one a Cedar policy forbids are refused by the gateway on the page,
//! deciding nothing; a valid edit is sent once with the edited arguments (the upstream's ledger),
//! and the caller's answer says it was edited (`_meta` `purra/edited` and a text line). The store
//! keeps both approvals and the `edited` audit row naming who edited.

use std::process::{Child, Command, Stdio};
use std::time::Instant;

use serde_json::{json, Value};

use crate::support::clients::{gateway_client, json_lines, wait_for, Sdk};
use crate::support::peers::{free_port, fresh_dir, lines_of, HttpUpstream};
use crate::support::run::{approvals_json, audit_of, purra_bin, wait_approval, Killed, LIMIT};
use crate::support::webdriver::Browser;

/// The gateway's configuration; `sends`: it waits 1 s and sends decided writes without their
/// caller (`run_decided_without_caller`), else it waits 90 s.
fn config_text(db: &str, port: u16, upstream: &str, allow_edit: bool, sends: bool) -> String {
    let wait = if sends { "1s" } else { "90s" };
    format!(
        r#"[gateway]
name = "edits"
db = "{db}"
listen = "127.0.0.1:{port}"
principal = "alice"
approval_wait = "{wait}"
progress_interval = "1s"
run_decided_without_caller = {sends}

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
allow_edit = {allow_edit}

[writes.set_value.scope]
arguments = ['value within "/srv/notes"']

[policies]
files = ["access.cedar"]
"#
    )
}

/// `purra gateway --page` on `db` with `[writes.set_value] allow_edit`: the process, its MCP
/// URL, the page's URL and ada's sign-in token.
fn start(
    dir: &std::path::Path,
    db: &str,
    upstream: &HttpUpstream,
    allow_edit: bool,
    sends: bool,
) -> Started {
    std::fs::write(
        dir.join("access.cedar"),
        "permit (principal, action, resource);\n\
         forbid (principal, action == Action::\"set_value\", resource)\n  \
           when { context.arguments.value == \"/srv/notes/secret\" };\n",
    )
    .expect("policies");
    let port = free_port();
    let config = dir.join("g.toml");
    std::fs::write(
        &config,
        config_text(db, port, &upstream.url, allow_edit, sends),
    )
    .expect("config");
    let mut child = Command::new(purra_bin())
        .args(["gateway", "--config", &config.to_string_lossy()])
        .args(["--page", "127.0.0.1:0", "--page-approver", "ada"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn gateway");
    let rx = lines_of(child.stderr.take().expect("stderr"), |line| {
        eprintln!("[gateway] {line}");
        Some(line)
    });
    let (mut page, mut token, mut serving) = (None, None, false);
    let start = Instant::now();
    while page.is_none() || token.is_none() || !serving {
        let line = rx
            .recv_timeout(LIMIT.saturating_sub(start.elapsed()))
            .expect("the gateway says where it serves and where its page is");
        if let Some(p) = line.strip_prefix("purra gateway: approver page at ") {
            page = Some(p.to_owned());
        }
        if let Some(t) = line.strip_prefix("purra gateway: sign-in token for ada: ") {
            token = Some(t.to_owned());
        }
        serving |= line.starts_with("purra gateway: serving ");
    }
    std::thread::spawn(move || while rx.recv().is_ok() {});
    Started {
        _child: Killed(child),
        mcp: format!("http://127.0.0.1:{port}/mcp"),
        page: page.expect("page"),
        token: token.expect("token"),
    }
}

struct Started {
    _child: Killed,
    mcp: String,
    page: String,
    token: String,
}

/// The Python SDK's client calling `set_value` with `value` (it waits for the decision), then
/// making the same call again.
fn call(mcp: &str, value: &str) -> (Child, std::sync::mpsc::Receiver<Value>) {
    let call = json!({"call": "set_value", "args": {"value": value}});
    let steps = json!([call, call]);
    json_lines(gateway_client(Sdk::Python).args(["--steps", &steps.to_string(), "--http", mcp]))
}

/// Replaces the arguments editor's text as typing would (the page's script hears `input`).
fn edit_to(b: &Browser, id: &str, text: &str) {
    b.wait_for(&format!("#edit-{id}"));
    b.script_with(
        "const t = document.getElementById(arguments[0]); t.value = arguments[1]; \
         t.dispatchEvent(new Event('input', {bubbles: true}));",
        json!([format!("edit-{id}"), text]),
    );
}

/// A browser `height` pixels high signed in to the gateway's page as ada, with the page token.
fn signed_in(gw: &Started, height: u32) -> Browser {
    let b = Browser::new(1100, height);
    b.goto(&format!("{}login", gw.page));
    b.type_css("#token", &gw.token);
    b.click_css("#login");
    b.wait_text("#approver", "ada");
    b
}

/// The page's status line once it says something starting with `start`.
fn status_after(b: &Browser, start: &str) -> String {
    let begun = Instant::now();
    loop {
        let text = b.text_css("#status");
        if text.starts_with(start) {
            return text;
        }
        assert!(
            begun.elapsed() < LIMIT,
            "the status never began with {start:?}: {text:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn pending(db: &str) -> Vec<String> {
    approvals_json(db, &["list"])["approvals"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["state"] == "pending")
        .filter_map(|a| a["id"].as_str().map(str::to_owned))
        .collect()
}

/// The acceptance: edits that break the schema, the argument rule or a Cedar policy are refused
/// on the page and decide nothing; a valid edit is sent once with the edited arguments and the
/// caller's answer says so; the store keeps both approvals and who edited.
#[test]
fn an_approver_edits_a_waiting_call_on_the_page() {
    let dir = fresh_dir("edit", "page");
    let db = dir.join("purra.db").to_string_lossy().into_owned();
    let upstream = HttpUpstream::start(&dir, &[]);
    let gw = start(&dir, &db, &upstream, true, false);
    let (child, lines) = call(&gw.mcp, "/srv/notes/draft");
    let _client = Killed(child);
    let id = wait_approval(&db, "the call's approval", |a| a["state"] == "pending");

    let b = signed_in(&gw, 1600);
    b.wait_for("body[data-synced=yes]");
    let shown: Value =
        serde_json::from_str(&b.text_css(&format!("#edit-{id}"))).expect("the arguments as JSON");
    assert_eq!(shown, json!({"value": "/srv/notes/draft"}));
    // Unchanged, there is nothing to approve with edit.
    let disabled = format!("return document.getElementById('edit-approve-{id}').disabled");
    assert_eq!(b.script(&disabled), true);

    // 1. The schema: refused live on the page, and by the gateway when sent anyway.
    edit_to(&b, &id, r#"{"value": 5}"#);
    b.wait_text(
        &format!("#edit-error-{id}"),
        "does not match the tool's input schema: arguments/value: must be string, not integer",
    );
    assert_eq!(b.script(&disabled), true);
    // Within the argument rule, so the schema is what refuses it on the gateway too.
    edit_to(&b, &id, r#"{"value": "/srv/notes/x", "mode": "append"}"#);
    b.wait_text(
        &format!("#edit-error-{id}"),
        "does not match the tool's input schema: arguments: \"mode\" is not allowed",
    );
    assert_eq!(b.script(&disabled), true);
    b.script(&format!(
        "document.getElementById('edit-approve-{id}').disabled = false"
    ));
    b.click_css(&format!("#edit-approve-{id}"));
    let said = status_after(&b, "refused:");
    assert!(
        said.starts_with(&format!(
            "refused: {id}: the edit was not recorded: the edited arguments do not match the \
             tool's input schema:"
        )),
        "{said}"
    );
    assert_eq!(pending(&db), std::slice::from_ref(&id));

    // 2. The binding's argument rule.
    edit_to(&b, &id, r#"{"value": "/etc/passwd"}"#);
    b.wait_text(&format!("#edit-error-{id}"), "");
    b.click_css(&format!("#edit-approve-{id}"));
    let said = status_after(
        &b,
        &format!("refused: {id}: the edit was not recorded: the edited call breaks"),
    );
    assert!(said.contains("value within \"/srv/notes\""), "{said}");
    assert_eq!(pending(&db), std::slice::from_ref(&id));

    // 3. A Cedar policy.
    b.script("document.getElementById('status').textContent = ''");
    edit_to(&b, &id, r#"{"value": "/srv/notes/secret"}"#);
    b.click_css(&format!("#edit-approve-{id}"));
    let said = status_after(&b, "refused:");
    assert_eq!(
        said,
        format!(
            "refused: {id}: the edit was not recorded: refused by the policies: they do not \
             allow the edited call"
        )
    );
    assert_eq!(pending(&db), std::slice::from_ref(&id));
    assert!(upstream.writes().is_empty());

    // 4. A valid edit: sent once, with the edited arguments.
    edit_to(&b, &id, r#"{"value": "/srv/notes/final"}"#);
    b.click_css(&format!("#edit-approve-{id}"));
    let said = status_after(&b, &format!("{id} approved with edit as "));
    let edited = said
        .strip_prefix(&format!("{id} approved with edit as "))
        .and_then(|r| r.strip_suffix(" by ada"))
        .expect("the edited approval")
        .to_owned();
    drop(b);

    let mut seen = Vec::new();
    let step = wait_for(&lines, &mut seen, "the call's result", LIMIT, |v| {
        v["step"] == "call"
    });
    let result = &step["result"];
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(
        result["structuredContent"],
        json!({"stored": "/srv/notes/final"})
    );
    let meta = &result["_meta"]["purra/edited"];
    assert_eq!(meta["by"], "ada (page)", "{result}");
    assert_eq!(meta["approval"], edited.as_str());
    assert_eq!(meta["originalApproval"], id.as_str());
    assert_eq!(meta["arguments"], json!({"value": "/srv/notes/final"}));
    assert!(meta["originalArgumentsDigest"]
        .as_str()
        .is_some_and(|d| d.starts_with("sha256:")));
    let first = result["content"][0]["text"].as_str().expect("a text");
    assert!(
        first.starts_with(&format!(
            "edited by ada (page) before it was sent: {id} was approved as {edited} with the \
             arguments {{\"value\":\"/srv/notes/final\"}}"
        )),
        "{first}"
    );
    // The same call made again is answered from the edited call's receipt, saying so.
    let again = wait_for(&lines, &mut seen, "the second call's result", LIMIT, |v| {
        v["step"] == "call" && v != &step
    });
    let again = &again["result"];
    assert_eq!(
        again["structuredContent"],
        json!({"stored": "/srv/notes/final"})
    );
    assert_eq!(again["_meta"]["purra/edited"], *meta);
    assert_eq!(
        again["_meta"]["io.purra/replay"]["approval"],
        edited.as_str()
    );
    assert_eq!(again["content"][0], result["content"][0]);
    assert!(
        again["content"][1]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with(&format!("answered from the receipt of {edited}, "))),
        "{again}"
    );
    assert_eq!(upstream.writes(), ["/srv/notes/final"]);

    // The store: the original refused (never claimable), the edited one claimed once, and the
    // `edited` audit row naming who edited.
    let trail = audit_of(&db, &id);
    let events: Vec<&str> = trail.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(
        events,
        ["prepared", "run_suspended", "decided", "refused", "edited"],
        "{trail:?}"
    );
    let e = &trail[4].detail;
    assert_eq!(e["edited"], edited.as_str());
    assert_eq!(e["approver"], "ada (page)");
    assert_eq!(e["originalArguments"], meta["originalArgumentsDigest"]);
    let events: Vec<String> = audit_of(&db, &edited)
        .into_iter()
        .map(|e| e.event)
        .collect();
    assert!(
        events.starts_with(&[
            "prepared".to_owned(),
            "decided".to_owned(),
            "claimed".to_owned()
        ]),
        "{events:?}"
    );
    let listed = approvals_json(&db, &["list"]);
    let state = |which: &str| {
        listed["approvals"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| a["id"] == which)
            .map(|a| a["state"].clone())
    };
    assert_eq!(state(&id), Some(json!("refused")));
    assert_eq!(state(&edited), Some(json!("claimed")));
    drop(gw);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Without `allow_edit` the page shows no editor and the gateway refuses an edit sent anyway.
#[test]
fn a_write_without_allow_edit_refuses_edits() {
    let dir = fresh_dir("edit", "off");
    let db = dir.join("purra.db").to_string_lossy().into_owned();
    let upstream = HttpUpstream::start(&dir, &[]);
    let gw = start(&dir, &db, &upstream, false, false);
    let (child, _lines) = call(&gw.mcp, "/srv/notes/draft");
    let _client = Killed(child);
    let id = wait_approval(&db, "the call's approval", |a| a["state"] == "pending");
    let b = signed_in(&gw, 1400);
    b.wait_for(&format!("#approve-{id}"));
    assert!(b.find(&format!("#edit-{id}")).is_none());
    // Sent anyway (a form of one's own): refused, nothing decided.
    let answer = b.script_with(
        "const f = document.querySelector('form.decide'); const d = new FormData(f); \
         d.set('verdict', 'edit'); d.set('arguments', arguments[0]); \
         return fetch(f.action, {method: 'POST', body: new URLSearchParams(d), \
           headers: {'Accept': 'application/json'}}).then(r => r.json()).then(j => j.message);",
        json!([r#"{"value": "/srv/notes/other"}"#]),
    );
    assert_eq!(
        answer,
        format!("refused: {id}: this write does not allow edits")
    );
    assert_eq!(pending(&db), [id]);
    assert!(upstream.writes().is_empty());
    drop(b);
    drop(gw);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A gateway that sends decided writes without their caller sends an edited one too, once, with
/// the edited arguments; the caller calling again is answered from its receipt, saying it was
/// edited.
#[test]
fn an_edit_decided_after_the_caller_left_is_sent_by_the_gateway() {
    let dir = fresh_dir("edit", "sweep");
    let db = dir.join("purra.db").to_string_lossy().into_owned();
    let upstream = HttpUpstream::start(&dir, &[]);
    let gw = start(&dir, &db, &upstream, true, true);
    let steps = json!([{"call": "set_value", "args": {"value": "/srv/notes/draft"}}]);
    let (child, lines) = json_lines(gateway_client(Sdk::Python).args([
        "--steps",
        &steps.to_string(),
        "--http",
        &gw.mcp,
    ]));
    let mut seen = Vec::new();
    let first = wait_for(&lines, &mut seen, "the pending answer", LIMIT, |v| {
        v["step"] == "call"
    });
    assert_eq!(first["result"]["isError"], true, "{first}");
    drop(Killed(child));
    let id = wait_approval(&db, "the call's approval", |a| a["state"] == "pending");

    let b = signed_in(&gw, 1600);
    edit_to(&b, &id, r#"{"value": "/srv/notes/late"}"#);
    b.click_css(&format!("#edit-approve-{id}"));
    status_after(&b, &format!("{id} approved with edit as "));
    drop(b);
    let begun = Instant::now();
    while upstream.writes().is_empty() {
        assert!(
            begun.elapsed() < LIMIT,
            "the gateway never sent the edited write"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(upstream.writes(), ["/srv/notes/late"]);

    let (child, lines) = json_lines(gateway_client(Sdk::Python).args([
        "--steps",
        &steps.to_string(),
        "--http",
        &gw.mcp,
    ]));
    let _client = Killed(child);
    let mut seen = Vec::new();
    let again = wait_for(&lines, &mut seen, "the answer", LIMIT, |v| {
        v["step"] == "call"
    });
    let again = &again["result"];
    assert_eq!(
        again["structuredContent"],
        json!({"stored": "/srv/notes/late"}),
        "{again}"
    );
    assert_eq!(
        again["_meta"]["purra/edited"]["originalApproval"],
        id.as_str()
    );
    assert_eq!(upstream.writes(), ["/srv/notes/late"]);
    drop(gw);
    let _ = std::fs::remove_dir_all(&dir);
}
