//! The approver page in a real headless Chromium (Debian's `chromium`, driven through
//! `chromedriver` over WebDriver): served by `purra gateway --page` in front of the official
//! Python SDK upstream with its fsynced ledger and a Python SDK downstream client, and by
//! `purra approvals serve --db` on a store another process writes. A pending write appears
//! without a reload, is approved (or denied) on the page and its effect becomes `committed`
//! with exactly one request upstream; a forged cross-site POST and a request without the session
//! cookie are refused; two browser sessions racing to decide one approval: exactly one wins; a
//! page in another process than the gateway, on PostgreSQL, wakes the gateway's waiting write.
//!
//! An approver signs in through a real OpenID Connect provider (oidc-provider, its login and
//! consent forms filled in the browser) and approves under their OIDC identity; someone the
//! allow-list does not name gets the refusal and no session.
//!
//! The gateway's approval view (MCP Apps) runs in a sandboxed iframe of a page whose host side
//! the test plays over purra's client: a waiting write is approved in the view and sent once.
//!
//! With `PURRA_SCREENSHOTS=1` the approval tests also write the screenshots of the guide
//! (`docs/src/images/approver-page-pending.png`, `docs/src/images/approver-page-history.png`,
//! `docs/src/images/approver-page-waiting.png`, `docs/src/images/approval-app-pending.png`).

use crate::support::clients::{gateway_client, json_lines, Sdk};
use crate::support::peers;
use crate::support::webdriver;

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use peers::{fresh_dir, lines_of, oidc_sign_in, peer, postgres_schema, python, repo_root};
use purra_core::{ApprovalGateway, ApprovalId, ApprovalState, Verdict};
use serde_json::{json, Value};
use webdriver::{Browser, WAIT};

/// A fresh directory (removed when dropped): configuration, store, upstream ledger.
struct Scenario {
    dir: PathBuf,
    /// The store: `gateway.db` in the directory, or a fresh PostgreSQL schema.
    db: String,
}

impl Drop for Scenario {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Scenario {
    fn new(name: &str) -> Scenario {
        let dir = fresh_dir("page", name);
        let db = dir.join("gateway.db").to_string_lossy().into_owned();
        Scenario { dir, db }
    }

    /// A scenario whose store is a fresh schema of the test command's PostgreSQL server.
    fn on_postgres(name: &str) -> Scenario {
        let mut sc = Scenario::new(name);
        sc.db = postgres_schema(&format!("page_{name}"));
        sc
    }

    fn db(&self) -> String {
        self.db.clone()
    }

    /// A gateway over the Python SDK upstream: `set_value` bound as a write for the Python client.
    fn write_config(&self) -> String {
        self.write_config_with("")
    }

    /// The gateway's configuration with `extra` tables at its end.
    fn write_config_with(&self, extra: &str) -> String {
        let upstream = peer(repo_root().join("peers/python/gateway_upstream.py"));
        let text = format!(
            r#"[gateway]
name = "gw"
db = {db:?}
listen = "127.0.0.1:0"
approval_wait = "90s"
progress_interval = "1s"
approval_ttl = "10m"

[upstreams.values]
command = [{python:?}, {upstream:?}, "--dir", {dir:?}, "--scenario", "normal"]

[writes.set_value]
upstream = "values"
title = "Set the value"
effect = "write"
binding_id = "values"
binding_revision = "1"
scope_id = "values-clients"
scope_revision = "1"

[writes.set_value.scope]
clients = ["gateway-client-python"]
arguments = ["len(value) <= 40"]
{extra}"#,
            python = python(),
            dir = self.dir.to_string_lossy(),
            db = self.db,
        );
        let path = self.dir.join("gateway.toml");
        std::fs::write(&path, text).expect("config");
        path.to_string_lossy().into_owned()
    }

    /// How many `set_value` requests reached the upstream (its fsynced ledger).
    fn writes(&self) -> usize {
        std::fs::read_to_string(self.dir.join("ledger.txt"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with("call set_value"))
            .count()
    }

    /// `purra approvals show ID --db DB --json`.
    fn show(&self, id: &str) -> Value {
        let out = Command::new(env!("CARGO_BIN_EXE_purra"))
            .args(["approvals", "show", id, "--db", &self.db(), "--json"])
            .output()
            .expect("purra approvals show");
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        serde_json::from_slice(&out.stdout).expect("json")
    }

    /// Prepares an approval in the store from this process (as a gateway elsewhere would).
    fn prepare(&self, value: &str) -> ApprovalId {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let store = purra_sqlite::SqliteStore::open(self.db()).expect("store");
            store
                .prepare(purra_store_tests::request(value))
                .await
                .expect("prepare")
        })
    }

    fn state(&self, id: &ApprovalId) -> ApprovalState {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let store = purra_sqlite::SqliteStore::open(self.db()).expect("store");
            store
                .record(id.clone())
                .await
                .expect("record")
                .expect("exists")
                .state
        })
    }
}

/// A `purra` process the test started, its stderr lines on a channel; killed when dropped.
pub(crate) struct Purra {
    child: Child,
    lines: Receiver<String>,
}

impl Purra {
    pub(crate) fn start(args: &[&str]) -> Purra {
        Purra::start_with_env(args, &[])
    }

    fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Purra {
        let mut child = Command::new(env!("CARGO_BIN_EXE_purra"))
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn purra");
        let lines = lines_of(child.stderr.take().expect("stderr"), |line| {
            eprintln!("[purra] {line}");
            Some(line)
        });
        Purra { child, lines }
    }

    /// Waits for a stderr line starting with `prefix`; the rest of it.
    pub(crate) fn line(&self, prefix: &str) -> String {
        let start = Instant::now();
        loop {
            let line = self
                .lines
                .recv_timeout(WAIT.saturating_sub(start.elapsed()))
                .unwrap_or_else(|_| panic!("purra never printed {prefix:?}"));
            if let Some(rest) = line.strip_prefix(prefix) {
                return rest.to_owned();
            }
        }
    }
}

impl Drop for Purra {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `purra gateway --page` for `sc`: (process, MCP URL, page URL, ada's token).
fn gateway(sc: &Scenario) -> (Purra, String, String, String) {
    let config = sc.write_config();
    let p = Purra::start(&[
        "gateway",
        "--config",
        &config,
        "--page",
        "127.0.0.1:0",
        "--page-approver",
        "ada",
    ]);
    let page = p.line("purra gateway: approver page at ");
    let token = p.line("purra gateway: sign-in token for ada: ");
    let mcp = p.line("purra gateway: serving ");
    (p, mcp, page, token)
}

/// `purra gateway` for `sc` without a page: (process, MCP URL).
fn gateway_alone(sc: &Scenario) -> (Purra, String) {
    let config = sc.write_config();
    let p = Purra::start(&["gateway", "--config", &config]);
    let mcp = p.line("purra gateway: serving ");
    (p, mcp)
}

/// `purra approvals serve` on `sc`'s store for ada and bob: (process, page URL, tokens).
fn approvals_serve(sc: &Scenario) -> (Purra, String, String, String) {
    let p = Purra::start(&[
        "approvals",
        "serve",
        "--db",
        &sc.db(),
        "--listen",
        "127.0.0.1:0",
        "--page-approver",
        "ada",
        "--page-approver",
        "bob",
    ]);
    let page = p.line("purra approvals: approver page at ");
    let ada = p.line("purra approvals: sign-in token for ada: ");
    let bob = p.line("purra approvals: sign-in token for bob: ");
    (p, page, ada, bob)
}

/// The Python SDK client calling `set_value` through the gateway; its printed lines.
struct Client {
    child: Child,
    lines: Receiver<Value>,
}

impl Client {
    fn set_value(mcp: &str, value: &str) -> Client {
        let steps = json!([{"call": "set_value", "args": {"value": value}}]);
        let (child, lines) = json_lines(gateway_client(Sdk::Python).args([
            "--steps",
            &steps.to_string(),
            "--http",
            mcp,
        ]));
        Client { child, lines }
    }

    /// The result of its call.
    fn result(&self) -> Value {
        let start = Instant::now();
        loop {
            let v = self
                .lines
                .recv_timeout(WAIT.saturating_sub(start.elapsed()))
                .expect("the client printed no result");
            if v["step"] == "call" {
                return v["result"].clone();
            }
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Signs in on `page` with `token`; waits for the pending list and its live updates.
fn sign_in(b: &Browser, page: &str, token: &str, who: &str) {
    b.goto(&format!("{page}login"));
    b.type_css("#token", token);
    b.click_css("#login");
    b.wait_text("#approver", who);
    // The live-update stream is open and the list read since.
    b.wait_for("body[data-synced=yes]");
}

/// Writes a screenshot to docs/src/images/ with `PURRA_SCREENSHOTS=1`; checks it is a PNG either way.
fn screenshot(b: &Browser, name: &str) {
    let png = b.screenshot();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    if std::env::var_os("PURRA_SCREENSHOTS").is_some_and(|v| v == "1") {
        std::fs::write(repo_root().join("docs/src/images").join(name), png)
            .expect("write screenshot");
    }
}

#[test]
fn a_pending_write_appears_without_reload_is_approved_on_the_page_and_commits_once() {
    let sc = Scenario::new("approve");
    let (_gw, mcp, page, token) = gateway(&sc);
    // Tall enough for the history's audit trail in the screenshot.
    let b = Browser::new(1100, 1500);
    sign_in(&b, &page, &token, "ada");
    b.wait_text("#count", "0");
    // The session cookie: HttpOnly, SameSite=Strict.
    let cookies = b.cookies();
    let session = cookies
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == "purra_page_session"))
        .unwrap_or_else(|| panic!("no session cookie in {cookies}"));
    assert_eq!(session["httpOnly"], true);
    assert_eq!(session["sameSite"], "Strict");
    assert_eq!(b.script("return document.cookie"), json!(""));
    // A marker a reload would erase.
    b.script("window.purraMarker = 'still here'; return null");

    let client = Client::set_value(&mcp, "from-the-page");
    b.wait_for("#approve-approval-1");
    assert_eq!(b.script("return window.purraMarker"), json!("still here"));
    assert_eq!(b.url(), page);
    let card = b.text_css("#pending-approval-1");
    for shown in [
        "set_value approval-1",
        "Upstream\nvalues",
        "Upstream tool\nset_value",
        "(gateway-client-python)",
        "value\nfrom-the-page",
        "Binding\nvalues @",
        "Scope\nvalues-clients @ 1",
    ] {
        assert!(card.contains(shown), "{shown:?} not in {card:?}");
    }
    screenshot(&b, "approver-page-pending.png");
    b.type_css("#note-approval-1", "checked with the owner");
    b.click_css("#approve-approval-1");
    b.wait_text("#status", "approval-1 approved by ada");
    // The waiting call woke, claimed and sent the write once.
    let result = client.result();
    assert_eq!(
        result["structuredContent"],
        json!({"stored": "from-the-page"})
    );
    b.wait_text("#count", "0");

    b.goto(&format!("{page}history"));
    b.wait_for("body[data-synced=yes]");
    b.wait_text("#effect-approval-1", "committed");
    let card = b.text_css("#history-approval-1");
    assert!(
        card.contains("approved by ada (page) at ")
            && card.contains(" UTC: checked with the owner\n"),
        "{card:?}"
    );
    b.click_css("#history-approval-1 details.trail summary");
    screenshot(&b, "approver-page-history.png");
    assert_eq!(sc.writes(), 1);
    let shown = sc.show("approval-1");
    assert_eq!(shown["effect"], "committed");
    assert_eq!(shown["dispatches"], 1);
    assert_eq!(shown["decision"]["approver"], "ada (page)");
    assert_eq!(shown["decision"]["note"], "checked with the owner");
}

/// Issue 44, defect 6: the approver is told what approving does. While the caller waits, the
/// card says "caller waiting: approving sends now" (and until when); once its wait ended,
/// without a reload, "nobody waiting: approving sends on the next identical call". The
/// binding's title and effect are shown, and a multi-line argument keeps its lines. The same is
/// in `purra approvals show` and its JSON.
#[test]
fn the_page_says_what_approving_does_with_the_title_effect_and_the_arguments_lines() {
    let sc = Scenario::new("waiting");
    let config = sc.write_config();
    let text = std::fs::read_to_string(sc.dir.join("gateway.toml"))
        .expect("config")
        .replace("approval_wait = \"90s\"", "approval_wait = \"4s\"");
    std::fs::write(&config, text).expect("config");
    let p = Purra::start(&[
        "gateway",
        "--config",
        &config,
        "--page",
        "127.0.0.1:0",
        "--page-approver",
        "ada",
    ]);
    let page = p.line("purra gateway: approver page at ");
    let token = p.line("purra gateway: sign-in token for ada: ");
    let mcp = p.line("purra gateway: serving ");
    let b = Browser::new(1100, 1300);
    sign_in(&b, &page, &token, "ada");
    let client = Client::set_value(&mcp, "first line\nsecond line");
    b.wait_for("#approve-approval-1");
    let card = b.text_css("#pending-approval-1");
    for shown in [
        "caller waiting: approving sends now (the caller waits until ",
        "Title\nSet the value",
        "Effect\nwrite",
        "value\nfirst line\nsecond line",
    ] {
        assert!(card.contains(shown), "{shown:?} not in {card:?}");
    }
    assert_eq!(
        b.text_css("#pending-approval-1 .on-approve b"),
        "caller waiting: approving sends now"
    );
    screenshot(&b, "approver-page-waiting.png");
    let shown = sc.show("approval-1");
    assert_eq!(shown["title"], "Set the value");
    assert_eq!(shown["writeEffect"], "write");
    assert_eq!(shown["onApprove"]["what"], "caller_waiting");
    assert_eq!(
        shown["onApprove"]["text"],
        "caller waiting: approving sends now"
    );
    assert!(
        shown["onApprove"]["waitingUntilMs"].as_u64().is_some(),
        "{shown}"
    );

    // The caller's wait ends (approval_wait): the page says so without a reload.
    let result = client.result();
    assert_eq!(result["isError"], true, "{result}");
    b.wait_text(
        "#pending-approval-1 .on-approve",
        "nobody waiting: approving sends on the next identical call",
    );
    let shown = sc.show("approval-1");
    assert_eq!(
        shown["onApprove"],
        json!({"what": "next_call", "waitingUntilMs": null,
               "text": "nobody waiting: approving sends on the next identical call"})
    );
    let out = Command::new(env!("CARGO_BIN_EXE_purra"))
        .args(["approvals", "show", "approval-1", "--db", &sc.db()])
        .output()
        .expect("purra approvals show");
    let text = String::from_utf8_lossy(&out.stdout);
    for line in [
        "on approve: nobody waiting: approving sends on the next identical call\n",
        "title: Set the value\n",
        "effect of the write: write\n",
    ] {
        assert!(text.contains(line), "{line:?} not in {text}");
    }
    assert_eq!(sc.writes(), 0);
}

#[test]
fn a_write_denied_on_the_page_is_never_sent() {
    let sc = Scenario::new("deny");
    let (_gw, mcp, page, token) = gateway(&sc);
    let b = Browser::new(1100, 1000);
    sign_in(&b, &page, &token, "ada");
    let client = Client::set_value(&mcp, "not-this");
    b.wait_for("#deny-approval-1");
    b.type_css("#note-approval-1", "wrong value");
    b.click_css("#deny-approval-1");
    b.wait_text("#status", "approval-1 denied by ada");
    let result = client.result();
    assert_eq!(result["isError"], true);
    assert_eq!(
        result["content"][0]["text"],
        "set_value was not sent: approval approval-1 was denied by ada (page) (note: wrong value) (approval_denied); calling set_value again with the same arguments asks for a new approval"
    );
    b.goto(&format!("{page}history"));
    b.wait_text("#effect-approval-1", "never_dispatched");
    assert_eq!(sc.writes(), 0);
    let shown = sc.show("approval-1");
    assert_eq!(shown["state"], "denied");
    assert_eq!(shown["decision"]["note"], "wrong value");
}

/// Serves `html` to every request on a new loopback port (the attacker's site); its port.
fn attacker_site(html: String) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for mut s in listener.incoming().map_while(Result::ok) {
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{html}",
                html.len()
            );
        }
    });
    port
}

#[test]
fn a_forged_cross_site_post_and_a_request_without_the_session_cookie_are_refused() {
    let sc = Scenario::new("forged");
    let id = sc.prepare("forge-me");
    let (_p, page, ada, _bob) = approvals_serve(&sc);
    let b = Browser::new(1000, 800);
    sign_in(&b, &page, &ada, "ada");
    b.wait_for("#approve-approval-1");

    // Another site (localhost is another site than 127.0.0.1) posts a decision form at the page.
    let forged = format!(
        "<!doctype html><form id=f method=post action=\"{page}approvals/approval-1/decide\">\
         <input name=verdict value=approve><input name=csrf value=guessed></form>\
         <script>document.getElementById('f').submit()</script>"
    );
    let port = attacker_site(forged);
    b.goto(&format!("http://localhost:{port}/"));
    let start = Instant::now();
    while !b.url().starts_with(&page) {
        assert!(start.elapsed() < WAIT, "the forged form was never posted");
        std::thread::sleep(Duration::from_millis(50));
    }
    b.wait_text(
        "#message",
        "refused: a cross-site request cannot change anything here",
    );
    assert_eq!(sc.state(&id), ApprovalState::Prepared);

    // The page again, then the session cookie removed: the page's own request is refused.
    b.goto(&page);
    b.wait_for("body[data-synced=yes]");
    b.wait_for("#approve-approval-1");
    b.delete_cookies();
    b.click_css("#approve-approval-1");
    b.wait_text("#status", "refused: sign in first (no session)");
    assert_eq!(sc.state(&id), ApprovalState::Prepared);
    // The page itself then finds the session gone and offers to sign in again.
    b.click_css("#signed-out a");
    b.wait_for("#token");
    assert_eq!(b.url(), format!("{page}login"));
}

#[test]
fn two_sessions_racing_to_decide_one_approval_exactly_one_wins() {
    let sc = Scenario::new("race");
    // The store exists before the page starts; approvals arrive from another process.
    sc.prepare("round-0");
    let (_p, page, ada_token, bob_token) = approvals_serve(&sc);
    let ada = Browser::new(1000, 800);
    let bob = Browser::new(1000, 800);
    sign_in(&ada, &page, &ada_token, "ada");
    sign_in(&bob, &page, &bob_token, "bob");
    let mut wins = [0usize; 2];
    for round in 1..=3 {
        let id = sc.prepare(&format!("round-{round}"));
        let sel = format!("#approve-{}", id.0);
        for b in [&ada, &bob] {
            b.wait_for(&sel);
            // Writing a note holds live updates back, so both forms stay as they were.
            b.type_css(&format!("#note-{}", id.0), "mine");
            b.script("document.getElementById('status').textContent = ''; return null");
        }
        let ada_button = ada.wait_for(&sel);
        let bob_button = bob.wait_for(&format!("#deny-{}", id.0));
        std::thread::scope(|s| {
            s.spawn(|| ada.click(&ada_button));
            s.spawn(|| bob.click(&bob_button));
        });
        let read = |b: &Browser| {
            let start = Instant::now();
            loop {
                let t = b.text_css("#status");
                if !t.is_empty() {
                    return t;
                }
                assert!(start.elapsed() < WAIT, "no answer shown");
                std::thread::sleep(Duration::from_millis(50));
            }
        };
        let (a, bo) = (read(&ada), read(&bob));
        let ApprovalState::Decided(d) = sc.state(&id) else {
            panic!("round {round}: not decided")
        };
        let (winner, loser, word) = match d.verdict {
            Verdict::Approve => (&a, &bo, "approved"),
            Verdict::Deny => (&bo, &a, "denied"),
        };
        let who = if d.verdict == Verdict::Approve {
            "ada"
        } else {
            "bob"
        };
        wins[usize::from(who == "bob")] += 1;
        // The approver names the path the decision came by.
        assert_eq!(d.approver, format!("{who} (page)"));
        assert_eq!(
            winner,
            &format!("{} {word} by {who}", id.0),
            "round {round}"
        );
        assert_eq!(
            loser,
            &format!(
                "conflict: {} was already decided: {word} by {who} (page) ({word})",
                id.0
            ),
            "round {round}"
        );
    }
    assert_eq!(wins[0] + wins[1], 3);
}

#[test]
fn a_decision_on_a_page_in_another_process_wakes_a_gateway_on_postgresql() {
    let sc = Scenario::on_postgres("wake");
    let (_gw, mcp) = gateway_alone(&sc);
    // The page is another process on the same PostgreSQL schema: it hears of the pending
    // write, and the gateway of the decision, through the store's notifications.
    let (_page, page, ada, _bob) = approvals_serve(&sc);
    let b = Browser::new(1000, 800);
    sign_in(&b, &page, &ada, "ada");
    let client = Client::set_value(&mcp, "over-postgres");
    b.wait_for("#approve-approval-1");
    b.click_css("#approve-approval-1");
    b.wait_text("#status", "approval-1 approved by ada");
    let result = client.result();
    assert_eq!(
        result["structuredContent"],
        json!({"stored": "over-postgres"})
    );
    b.goto(&format!("{page}history"));
    b.wait_text("#effect-approval-1", "committed");
    assert_eq!(sc.writes(), 1);
    let shown = sc.show("approval-1");
    assert_eq!(shown["effect"], "committed");
    assert_eq!(shown["dispatches"], 1);
    assert_eq!(shown["decision"]["approver"], "ada (page)");
}

#[test]
fn a_sign_in_through_openid_connect_decides_under_the_oidc_identity() {
    let issuer = peers::oidc_issuer();
    let sc = Scenario::new("oidc");
    // The secret in a file beside the configuration (never in the file itself).
    std::fs::write(sc.dir.join("page-secret.txt"), "page-secret\n").expect("secret");
    let config = sc.write_config_with(&format!(
        r#"
[page]
token_login = false

[page.oidc]
issuer = {issuer:?}
client_id = "purra-page"
client_secret_file = "page-secret.txt"
scopes = ["openid", "email", "profile", "groups"]
label = "the test provider"
allow_subjects = ["alice", "bob"]
require_claim = "groups=approvers"
"#
    ));
    let gw = Purra::start(&["gateway", "--config", &config, "--page", "127.0.0.1:0"]);
    let page = gw.line("purra gateway: approver page at ");
    let callback = gw.line("purra gateway: OpenID Connect sign-in, callback ");
    assert_eq!(callback, format!("{page}login/callback"));
    // With token sign-in off no token is printed: the next line is the MCP endpoint's.
    let mcp = gw.line("purra gateway: serving ");

    let b = Browser::new(1100, 1000);
    b.goto(&format!("{page}login"));
    assert_eq!(b.find("#token"), None);
    oidc_sign_in(&b, &page, "alice");
    let who = format!("alice (test) <alice@example.com>, sub alice at {issuer}");
    b.wait_text("#approver", &who);
    b.wait_for("body[data-synced=yes]");
    assert_eq!(b.url(), page);
    let cookies = b.cookies();
    let names: Vec<&str> = cookies
        .as_array()
        .expect("cookies")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .filter(|n| n.starts_with("purra_page"))
        .collect();
    assert_eq!(names, ["purra_page_session"], "{cookies}");
    let session = cookies
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == "purra_page_session"))
        .expect("session cookie");
    assert_eq!(session["httpOnly"], true);
    assert_eq!(session["sameSite"], "Strict");

    let client = Client::set_value(&mcp, "signed-in-elsewhere");
    b.wait_for("#approve-approval-1");
    b.click_css("#approve-approval-1");
    b.wait_text("#status", &format!("approval-1 approved by {who}"));
    assert_eq!(
        client.result()["structuredContent"],
        json!({"stored": "signed-in-elsewhere"})
    );
    b.goto(&format!("{page}history"));
    b.wait_for("body[data-synced=yes]");
    b.wait_text("#effect-approval-1", "committed");
    assert!(b
        .text_css("#history-approval-1")
        .contains(&format!("approved by {who} (page) at ")));
    assert_eq!(sc.writes(), 1);
    let shown = sc.show("approval-1");
    assert_eq!(shown["effect"], "committed");
    assert_eq!(shown["dispatches"], 1);
    assert_eq!(
        shown["decision"]["approver"],
        format!("{who} (page)").as_str()
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let trail = rt.block_on(async {
        let store = purra_sqlite::SqliteStore::open(sc.db()).expect("store");
        purra_core::OperatorStore::approval_audit(&store, ApprovalId("approval-1".into()))
            .await
            .expect("audit")
    });
    let decided: Vec<_> = trail.iter().filter(|e| e.event == "decided").collect();
    assert_eq!(decided.len(), 1);
    assert_eq!(
        decided[0].detail["approver"],
        format!("{who} (page)").as_str()
    );

    // bob is a listed subject without the required group: refused, and no session.
    let other = Browser::new(1100, 1000);
    oidc_sign_in(&other, &page, "bob");
    other.wait_text(
        "#login-error",
        &format!(
            "Refused: bob (test) <bob@example.com>, sub bob at {issuer} may not approve here."
        ),
    );
    let cookies = other.cookies();
    assert!(
        !cookies
            .as_array()
            .expect("cookies")
            .iter()
            .any(|c| c["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("purra_page"))),
        "{cookies}"
    );
    other.goto(&page);
    assert_eq!(other.url(), format!("{page}login"));
}

#[test]
fn approvals_serve_signs_in_through_openid_connect_by_flags_beside_the_tokens() {
    let issuer = peers::oidc_issuer();
    let sc = Scenario::new("oidc-flags");
    sc.prepare("\"v1\"");
    let p = Purra::start_with_env(
        &[
            "approvals",
            "serve",
            "--db",
            &sc.db(),
            "--listen",
            "127.0.0.1:0",
            "--page-approver",
            "ada",
            "--page-oidc-issuer",
            issuer,
            "--page-oidc-client-id",
            "purra-page",
            "--page-oidc-client-secret-env",
            "PURRA_TEST_PAGE_SECRET",
            "--page-allow-email",
            "carol@example.com",
        ],
        &[("PURRA_TEST_PAGE_SECRET", "page-secret")],
    );
    let page = p.line("purra approvals: approver page at ");
    assert_eq!(
        p.line("purra approvals: OpenID Connect sign-in, callback "),
        format!("{page}login/callback")
    );
    // Token sign-in stays on beside the provider.
    let token = p.line("purra approvals: sign-in token for ada: ");
    assert_eq!(token.len(), 43);
    let b = Browser::new(1100, 1000);
    b.goto(&format!("{page}login"));
    b.wait_for("#token");
    b.wait_text("#login-oidc", "Sign in with OpenID Connect");
    oidc_sign_in(&b, &page, "carol");
    b.wait_text(
        "#approver",
        &format!("carol (test) <carol@example.com>, sub carol at {issuer}"),
    );
    b.wait_for("#approve-approval-1");

    // Options that cannot work are refused before anything is served.
    for (args, code, message) in [
        (
            &["--page-allow-subject", "alice"][..],
            64,
            "the --page-oidc-* and --page-allow-* options need --page-oidc-issuer",
        ),
        (
            &["--page-no-token-login"][..],
            78,
            "token sign-in can be turned off only when OpenID Connect sign-in is configured",
        ),
        (
            &["--page-oidc-issuer", issuer, "--page-oidc-client-id", "purra-page"][..],
            78,
            "OpenID Connect sign-in needs an allow-list: subjects, emails or a required claim",
        ),
        (
            &[
                "--page-oidc-issuer",
                issuer,
                "--page-oidc-client-id",
                "purra-page",
                "--page-oidc-client-secret-file",
                "/nonexistent/secret",
                "--page-allow-subject",
                "alice",
            ][..],
            78,
            "cannot read the client secret file /nonexistent/secret: No such file or directory (os error 2)",
        ),
        (
            &[
                "--page-oidc-issuer",
                "http://id.example",
                "--page-oidc-client-id",
                "purra-page",
                "--page-allow-subject",
                "alice",
            ][..],
            78,
            "OpenID Connect sign-in: issuer \"http://id.example\" must be https (plain http only on a loopback host: localhost, 127.0.0.1, [::1])",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_purra"))
            .args(["approvals", "serve", "--db", &sc.db(), "--listen", "127.0.0.1:0"])
            .args(args)
            .output()
            .expect("purra");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
}

/// An MCP Apps host for the test: purra's client (declaring Apps) connected to the gateway, and a
/// page in Chromium holding the view in a sandboxed iframe under the specification's restrictive
/// default CSP; every message the view posts is read here and answered as a host answers it,
/// its `tools/call` requests forwarded over the client's own connection.
struct AppHost<'b> {
    browser: &'b Browser,
    rt: tokio::runtime::Runtime,
    conn: std::sync::Arc<purra_protocol::Connection>,
    arguments: Value,
    /// The `status` of every `purra_approval` answer forwarded to the view, in order.
    statuses: Vec<String>,
}

impl AppHost<'_> {
    /// Posts `message` to the view.
    fn to_view(&self, message: Value) {
        self.browser.script_with(
            "document.getElementById('view').contentWindow.postMessage(arguments[0], '*'); return null;",
            json!([message]),
        );
    }

    /// Answers what the view posted since the last look.
    fn pump(&mut self) {
        let posted = self.browser.script("return window.fromView.splice(0);");
        for m in posted.as_array().cloned().unwrap_or_default() {
            let id = m.get("id").cloned();
            match (m["method"].as_str(), id) {
                (Some("ui/initialize"), Some(id)) => self.to_view(json!({
                    "jsonrpc": "2.0", "id": id, "result": {
                        "protocolVersion": "2026-01-26",
                        "hostInfo": {"name": "purra-test-host", "version": "1"},
                        "hostCapabilities": {"serverTools": {}},
                        "hostContext": {"toolInfo": {"tool": {"name": "set_value"}}}
                    }
                })),
                (Some("ui/notifications/initialized"), None) => self.to_view(json!({
                    "jsonrpc": "2.0", "method": "ui/notifications/tool-input",
                    "params": {"arguments": self.arguments}
                })),
                (Some("tools/call"), Some(id)) => {
                    let name = m["params"]["name"].as_str().unwrap_or_default().to_owned();
                    let args = m["params"]["arguments"].clone();
                    let conn = self.conn.clone();
                    let result = self
                        .rt
                        .block_on(async move { conn.call_tool(&name, args).await })
                        .expect("the view's tools/call");
                    if let Some(s) = result.structured_content.as_ref() {
                        self.statuses
                            .push(s["status"].as_str().unwrap_or_default().to_owned());
                    }
                    self.to_view(json!({
                        "jsonrpc": "2.0", "id": id,
                        "result": serde_json::to_value(&result).expect("result")
                    }));
                }
                (Some(method), Some(id)) => self.to_view(json!({
                    "jsonrpc": "2.0", "id": id,
                    "error": {"code": -32601, "message": format!("no {method} in this host")}
                })),
                _ => {}
            }
        }
    }

    /// Answers the view until it was told `status`.
    fn pump_until(&mut self, status: &str) {
        let start = Instant::now();
        while !self.statuses.iter().any(|s| s == status) {
            assert!(
                start.elapsed() < WAIT,
                "the view was never told {status:?}: {:?}",
                self.statuses
            );
            self.pump();
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[test]
fn the_approval_app_in_a_host_decides_the_waiting_write_and_it_is_sent_once() {
    let sc = Scenario::new("app");
    let config = sc.write_config();
    let text = std::fs::read_to_string(&config)
        .expect("config")
        .replacen("[gateway]\n", "[gateway]\napps = true\n", 1)
        // The operator's explicit choice: the host's user decides in the view.
        .replacen(
            "effect = \"write\"\n",
            "effect = \"write\"\napproval = \"client\"\n",
            1,
        )
        .replace(
            r#"clients = ["gateway-client-python"]"#,
            r#"clients = ["purra-app-host"]"#,
        );
    std::fs::write(&config, text).expect("config");
    let gw = Purra::start(&["gateway", "--config", &config]);
    let mcp = gw.line("purra gateway: serving ");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut options = purra_protocol::ClientOptions::default().apps();
    options.client_info = purra_protocol::types::Implementation::new("purra-app-host", "1");
    let conn = std::sync::Arc::new(
        rt.block_on(purra_protocol::Client::connect_http(
            &mcp,
            purra_protocol::http::HttpClientOptions::default(),
            options,
        ))
        .expect("connect"),
    );
    // The host reads the view the write tool names.
    let tools = conn.tools();
    let tool = tools
        .iter()
        .find(|t| t.name == "set_value")
        .expect("set_value");
    let uri = purra_protocol::apps::tool_ui(tool)
        .expect("a view")
        .to_owned();
    assert_eq!(uri, "ui://purra-gateway/approval/set_value");
    let read = rt.block_on(conn.read_resource(&uri)).expect("read");
    assert_eq!(
        read.contents[0].mime_type.as_deref(),
        Some(purra_protocol::apps::APP_MIME_TYPE)
    );
    let csp = "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
               script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; \
               connect-src 'none'; object-src 'none'\">";
    let html =
        read.contents[0]
            .text
            .clone()
            .expect("html")
            .replacen("<head>", &format!("<head>{csp}"), 1);

    // The model's call waits for its approval; the host shows the view meanwhile.
    let arguments = json!({"value": "from-the-app"});
    let call = {
        let conn = conn.clone();
        let args = arguments.clone();
        rt.spawn(async move { conn.call_tool("set_value", args).await })
    };
    let b = Browser::new(900, 900);
    b.goto("about:blank");
    b.script_with(
        "window.fromView = [];\
         const f = document.createElement('iframe');\
         f.id = 'view'; f.setAttribute('sandbox', 'allow-scripts');\
         f.style.width = '860px'; f.style.height = '820px';\
         window.addEventListener('message', e => {\
           if (e.source === f.contentWindow) window.fromView.push(e.data);\
         });\
         f.srcdoc = arguments[0];\
         document.body.appendChild(f);\
         return null;",
        json!([html]),
    );
    let mut host = AppHost {
        browser: &b,
        rt,
        conn: conn.clone(),
        arguments,
        statuses: Vec::new(),
    };
    host.pump_until("pending");
    b.enter_frame("#view");
    b.wait_text("#status", "pending");
    assert_eq!(b.text_css("#approval"), "approval-1");
    assert_eq!(
        b.text_css("#target"),
        "set_value on upstream values (gateway gw)"
    );
    assert!(b
        .text_css("#arguments")
        .contains("\"value\": \"from-the-app\""));
    assert!(b.text_css("#digest").starts_with("sha256:"));
    screenshot(&b, "approval-app-pending.png");
    b.type_css("#note", "seen in the conversation");
    b.click_css("#approve");
    b.leave_frame();
    // The view's decision reaches the gateway; the waiting call wakes and sends once.
    let start = Instant::now();
    while !call.is_finished() {
        assert!(start.elapsed() < WAIT, "the write never finished");
        host.pump();
        std::thread::sleep(Duration::from_millis(50));
    }
    let result = host
        .rt
        .block_on(call)
        .expect("join")
        .expect("the model's call");
    assert_eq!(
        result.structured_content,
        Some(json!({"stored": "from-the-app"}))
    );
    host.to_view(json!({
        "jsonrpc": "2.0", "method": "ui/notifications/tool-result",
        "params": serde_json::to_value(&result).expect("result")
    }));
    host.pump_until("committed");
    b.enter_frame("#view");
    b.wait_text("#status", "committed");
    assert_eq!(
        b.text_css("#decided-by"),
        "purra-app-host (app) (note: seen in the conversation)"
    );
    b.leave_frame();
    assert_eq!(sc.writes(), 1);
    let shown = sc.show("approval-1");
    assert_eq!(shown["effect"], "committed");
    assert_eq!(shown["decision"]["approver"], "purra-app-host (app)");
    assert_eq!(shown["decision"]["note"], "seen in the conversation");
    drop(gw);
}

/// purra's client as an Apps host (declaring Apps, named `purra-app-host`) on `mcp`.
fn app_host_connection(
    mcp: &str,
) -> (
    tokio::runtime::Runtime,
    std::sync::Arc<purra_protocol::Connection>,
) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut options = purra_protocol::ClientOptions::default().apps();
    options.client_info = purra_protocol::types::Implementation::new("purra-app-host", "1");
    let conn = std::sync::Arc::new(
        rt.block_on(purra_protocol::Client::connect_http(
            mcp,
            purra_protocol::http::HttpClientOptions::default(),
            options,
        ))
        .expect("connect"),
    );
    (rt, conn)
}

/// Loads the view of `set_value` into a sandboxed iframe `#view` of `b`, under the Apps
/// specification's restrictive default CSP, collecting what it posts in `window.fromView`.
fn show_view(b: &Browser, rt: &tokio::runtime::Runtime, conn: &purra_protocol::Connection) {
    let read = rt
        .block_on(conn.read_resource("ui://purra-gateway/approval/set_value"))
        .expect("read");
    let csp = "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
               script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; \
               connect-src 'none'; object-src 'none'\">";
    let html =
        read.contents[0]
            .text
            .clone()
            .expect("html")
            .replacen("<head>", &format!("<head>{csp}"), 1);
    b.goto("about:blank");
    b.script_with(
        "window.fromView = [];\
         const f = document.createElement('iframe');\
         f.id = 'view'; f.setAttribute('sandbox', 'allow-scripts');\
         f.style.width = '860px'; f.style.height = '820px';\
         window.addEventListener('message', e => {\
           if (e.source === f.contentWindow) window.fromView.push(e.data);\
         });\
         f.srcdoc = arguments[0];\
         document.body.appendChild(f);\
         return null;",
        json!([html]),
    );
}

/// Findings 1 and 4 of issue 40 in a real browser: with `apps` on and a binding that leaves
/// `approval` out, the view in the host shows the waiting write read-only (no Approve or Deny,
/// saying an operator decides it), and both the view and the approver page show the arguments'
/// U+202E and U+200B as `\u` escapes under a warning; the operator approves on the page, the
/// write is sent once, and the view shows `committed`, decided by `ada (page)`.
#[test]
fn the_view_is_read_only_for_an_operator_write_and_hidden_characters_show_escaped() {
    let sc = Scenario::new("app-operator");
    let config = sc.write_config();
    let text = std::fs::read_to_string(&config)
        .expect("config")
        .replacen("[gateway]\n", "[gateway]\napps = true\n", 1)
        .replace(
            r#"clients = ["gateway-client-python"]"#,
            r#"clients = ["purra-app-host"]"#,
        );
    std::fs::write(&config, text).expect("config");
    let gw = Purra::start(&[
        "gateway",
        "--config",
        &config,
        "--page",
        "127.0.0.1:0",
        "--page-approver",
        "ada",
    ]);
    let page = gw.line("purra gateway: approver page at ");
    let token = gw.line("purra gateway: sign-in token for ada: ");
    let mcp = gw.line("purra gateway: serving ");
    let (rt, conn) = app_host_connection(&mcp);
    let value = "notes\u{202e}txt.exe\u{200b}";
    let arguments = json!({ "value": value });
    let call = {
        let conn = conn.clone();
        let args = arguments.clone();
        rt.spawn(async move { conn.call_tool("set_value", args).await })
    };
    let b = Browser::new(900, 900);
    show_view(&b, &rt, &conn);
    let mut host = AppHost {
        browser: &b,
        rt,
        conn: conn.clone(),
        arguments,
        statuses: Vec::new(),
    };
    host.pump_until("pending");
    b.enter_frame("#view");
    b.wait_text("#status", "pending");
    assert_eq!(
        b.text_css("#operator"),
        "An operator decides this write, on the approver page or with purra approvals; this \
         view shows its state."
    );
    assert_eq!(
        b.script(
            "return ['choose', 'approve', 'deny'].map(i => document.getElementById(i).hidden);"
        ),
        json!([true, true, true])
    );
    assert_eq!(
        b.text_css("#arguments"),
        "{\n  \"value\": \"notes\\u202etxt.exe\\u200b\"\n}"
    );
    assert_eq!(
        b.text_css("#hidden-characters"),
        "Hidden characters: the arguments contain invisible or direction-changing characters, \
         shown here as \\u escapes; what is sent is exactly this JSON."
    );
    let shown = b.body_text();
    assert!(
        !shown.contains('\u{202e}') && !shown.contains('\u{200b}'),
        "{shown:?}"
    );
    b.leave_frame();

    // The approver page shows the same arguments escaped, under its warning; ada approves.
    let p = Browser::new(1100, 1200);
    sign_in(&p, &page, &token, "ada");
    p.wait_for("#approve-approval-1");
    let card = p.text_css("#pending-approval-1");
    for part in [
        "hidden characters These arguments contain invisible or direction-changing characters \
         (such as U+202E or U+200B), shown as \\u escapes; what is sent is exactly the JSON below.",
        "value\nnotes\\u202etxt.exe\\u200b",
    ] {
        assert!(card.contains(part), "{part:?} not in {card:?}");
    }
    assert!(
        !card.contains('\u{202e}') && !card.contains('\u{200b}'),
        "{card:?}"
    );
    p.click_css("#pending-approval-1 details summary");
    assert_eq!(
        p.text_css("#pending-approval-1 .exact-json"),
        "{\"value\":\"notes\\u202etxt.exe\\u200b\"}"
    );
    p.click_css("#approve-approval-1");
    p.wait_text("#status", "approval-1 approved by ada");
    let start = Instant::now();
    while !call.is_finished() {
        assert!(start.elapsed() < WAIT, "the write never finished");
        host.pump();
        std::thread::sleep(Duration::from_millis(50));
    }
    let result = host
        .rt
        .block_on(call)
        .expect("join")
        .expect("the model's call");
    assert_eq!(result.structured_content, Some(json!({ "stored": value })));
    host.pump_until("committed");
    b.enter_frame("#view");
    b.wait_text("#status", "committed");
    assert_eq!(b.text_css("#decided-by"), "ada (page)");
    b.leave_frame();
    assert_eq!(sc.writes(), 1);
    let shown = sc.show("approval-1");
    assert_eq!(shown["effect"], "committed");
    assert_eq!(shown["decision"]["approver"], "ada (page)");
    assert_eq!(shown["arguments"], json!({ "value": value }));
    drop(gw);
}

/// `HOST:PORT` of an `http://HOST:PORT/…` URL.
fn authority(url: &str) -> String {
    let rest = url.strip_prefix("http://").expect("an http URL");
    rest.split('/').next().expect("authority").to_owned()
}

/// Opens a connection to `url`'s server and sends half a request head (no blank line), then
/// waits for the server to close it: `Ok(what it sent)` when it did, `Err` when it still held
/// the connection after `within`.
fn stalled_header(url: &str, within: Duration) -> Result<Vec<u8>, String> {
    let host = authority(url);
    let mut s = std::net::TcpStream::connect(&host).expect("connect");
    write!(s, "GET / HTTP/1.1\r\nHost: {host}\r\n").expect("write");
    s.set_read_timeout(Some(within)).expect("timeout");
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Ok(answer),
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(answer),
            Err(e) => return Err(format!("{url}: still open ({e})")),
        }
    }
}

/// Finding 2 of the approver page's security review, through the binary: the page served by
/// `purra gateway --page` and by `purra approvals serve` closes a connection that never finishes
/// its request head, without a byte of answer, as the gateway's MCP endpoint does (the same
/// accept loop and limits: 10 s to send the headers).
#[test]
fn finding_2_the_cli_pages_close_a_stalled_header_as_the_mcp_endpoint_does() {
    let sc = Scenario::new("stalled");
    let (_gw, mcp, gateway_page, _) = gateway(&sc);
    let (_ap, approvals_page, _, _) = approvals_serve(&sc);
    let waits: Vec<_> = [mcp, gateway_page, approvals_page]
        .into_iter()
        .map(|url| std::thread::spawn(move || stalled_header(&url, Duration::from_secs(40))))
        .collect();
    for w in waits {
        assert_eq!(w.join().expect("thread"), Ok(Vec::new()));
    }
}

/// POSTs the sign-in form with `token` to `page`; the response's `Set-Cookie` value.
fn sign_in_cookie(page: &str, token: &str) -> String {
    let host = authority(page);
    let mut s = std::net::TcpStream::connect(&host).expect("connect");
    let body = format!("token={token}");
    write!(
        s,
        "POST /login HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/x-www-form-urlencoded\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("write");
    let mut answer = String::new();
    s.read_to_string(&mut answer).expect("read");
    assert!(answer.starts_with("HTTP/1.1 303 See Other\r\n"), "{answer}");
    answer
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .unwrap_or_else(|| panic!("no cookie: {answer}"))
        .to_owned()
}

/// Finding 7 of the approver page's security review, through the binary: `--page-secure-cookie`
/// (and `secure_cookie = true` in the gateway file's `[page]`) make the session cookie `Secure`
/// and `__Host-` prefixed, said at start; without them the cookie stays as it was. Chromium
/// keeps the secure cookie of a page on a loopback address (a secure context) and signs in.
#[test]
fn finding_7_the_secure_cookie_by_flag_and_by_the_gateway_file() {
    let secure = "; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age=43200";
    let said = "the page's cookies are Secure (__Host-purra_page_session): browsers must reach it \
                over https";
    let sc = Scenario::new("secure");
    sc.prepare("\"v1\"");
    let p = Purra::start(&[
        "approvals",
        "serve",
        "--db",
        &sc.db(),
        "--listen",
        "127.0.0.1:0",
        "--page-approver",
        "ada",
        "--page-secure-cookie",
    ]);
    let page = p.line("purra approvals: approver page at ");
    assert_eq!(
        p.line("purra approvals: the page's cookies"),
        said["the page's cookies".len()..]
    );
    let token = p.line("purra approvals: sign-in token for ada: ");
    let cookie = sign_in_cookie(&page, &token);
    assert!(cookie.starts_with("__Host-purra_page_session="), "{cookie}");
    assert!(cookie.ends_with(secure), "{cookie}");
    let b = Browser::new(1000, 800);
    sign_in(&b, &page, &token, "ada");

    let config = sc.write_config_with("\n[page]\nsecure_cookie = true\n");
    let gw = Purra::start(&[
        "gateway",
        "--config",
        &config,
        "--page",
        "127.0.0.1:0",
        "--page-approver",
        "ada",
    ]);
    let page = gw.line("purra gateway: approver page at ");
    assert_eq!(
        gw.line("purra gateway: the page's cookies"),
        said["the page's cookies".len()..]
    );
    let token = gw.line("purra gateway: sign-in token for ada: ");
    let cookie = sign_in_cookie(&page, &token);
    assert!(cookie.starts_with("__Host-purra_page_session="), "{cookie}");
    assert!(cookie.ends_with(secure), "{cookie}");

    let (_plain, page, ada, _) = approvals_serve(&sc);
    let cookie = sign_in_cookie(&page, &ada);
    assert!(cookie.starts_with("purra_page_session="), "{cookie}");
    assert!(
        cookie.ends_with("; Path=/; HttpOnly; SameSite=Strict; Max-Age=43200"),
        "{cookie}"
    );
}

/// Signs `user` in at oidc-provider's forms the browser is on (the login form, then the consent
/// form when the provider asks for it), until `done` shows on the page.
fn provider_sign_in(b: &Browser, user: &str, done: &str) {
    b.type_css("input[name=login]", user);
    b.type_css("input[name=password]", "any");
    b.click_css("button.login-submit");
    b.wait_for(&format!("{done}, input[name=prompt][value=consent]"));
    if b.find(done).is_none() {
        b.click_css("button.login-submit");
        b.wait_for(done);
    }
}

/// The receiver's ledger entries on `path` so far.
fn received(file: &std::path::Path, path: &str) -> Vec<Value> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["path"] == path)
        .collect()
}

/// Issue 47 item 6 with real peers: the gateway's `approval.pending` notice reaches a receiver
/// that verifies it with the Standard Webhooks library, and its `approve` link, opened in
/// Chromium, asks for a sign-in at oidc-provider, comes back to the approval with approve
/// preselected and decides nothing; the Slack-format notice carries the same links as Block Kit
/// buttons. The binding's `approver_max_age` is 5 s: a confirmation by a sign-in older than that
/// is refused and sent to sign in again (the provider asked for `max_age`, its `auth_time`
/// checked), and the confirmation after the fresh sign-in decides; the write is sent once.
#[test]
fn a_webhook_link_opens_the_approval_preselected_and_an_old_sign_in_signs_in_again() {
    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let issuer = peers::oidc_issuer();
    let sc = Scenario::new("notice-links");
    std::fs::write(sc.dir.join("page-secret.txt"), "page-secret\n").expect("secret");
    std::fs::write(sc.dir.join("ops.whsec"), format!("{SECRET}\n")).expect("secret");
    let port = peers::free_port();
    let ledger = sc.dir.join("received.jsonl");
    let _receiver = peers::webhook_receiver(&ledger, &sc.dir.join("ops.whsec"), port);
    let config = sc.write_config_with(&format!(
        r#"
[page]
token_login = false

[page.oidc]
issuer = {issuer:?}
client_id = "purra-page"
client_secret_file = "page-secret.txt"
scopes = ["openid", "email", "profile", "groups"]
label = "the test provider"
allow_subjects = ["alice"]

[webhooks.ops]
url = "http://127.0.0.1:{port}/hooks/ops"
secret_file = "ops.whsec"
events = ["approval.pending"]

[webhooks.chat]
url = "http://127.0.0.1:{port}/hooks/chat"
format = "slack"
events = ["approval.pending"]
"#
    ));
    // The binding demands a sign-in of at most 5 s to decide.
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(
        &config,
        text.replacen(
            "scope_revision = \"1\"\n",
            "scope_revision = \"1\"\napprover_max_age = \"5s\"\n",
            1,
        ),
    )
    .expect("config");
    let gw = Purra::start(&["gateway", "--config", &config, "--page", "127.0.0.1:0"]);
    let page = gw.line("purra gateway: approver page at ");
    let mcp = gw.line("purra gateway: serving ");
    let client = Client::set_value(&mcp, "from-a-link");

    // The notice, verified by the Standard Webhooks library, links to the approval.
    let start = Instant::now();
    let (ops, chat) = loop {
        let (ops, chat) = (
            received(&ledger, "/hooks/ops"),
            received(&ledger, "/hooks/chat"),
        );
        if !ops.is_empty() && !chat.is_empty() {
            break (ops[0].clone(), chat[0].clone());
        }
        assert!(start.elapsed() < WAIT, "no notice arrived");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(ops["verified"], true, "{ops}");
    assert_eq!(ops["body"]["type"], "approval.pending");
    let at = format!("{page}approvals/approval-1");
    let approve = format!("{at}?decision=approve");
    assert_eq!(
        ops["body"]["data"]["links"],
        json!({"page": at, "approve": approve, "deny": format!("{at}?decision=deny")})
    );
    // Slack's format: Block Kit, the summary and the buttons with the same links.
    let summary = chat["body"]["blocks"][0]["text"]["text"]
        .as_str()
        .expect("a section")
        .to_owned();
    assert!(
        summary.starts_with("Approval approval-1 waits for a decision: set_value, asked by "),
        "{summary}"
    );
    assert_eq!(
        chat["body"],
        json!({
            "text": format!("{summary} <{at}|Open it on the approver page>"),
            "blocks": [
                {"type": "section", "text": {"type": "mrkdwn", "text": summary}},
                {"type": "actions", "elements": [
                    {"type": "button", "action_id": "approve", "style": "primary",
                     "text": {"type": "plain_text", "text": "Approve\u{2026}"}, "url": approve},
                    {"type": "button", "action_id": "deny", "style": "danger",
                     "text": {"type": "plain_text", "text": "Deny\u{2026}"},
                     "url": format!("{at}?decision=deny")},
                    {"type": "button", "action_id": "open",
                     "text": {"type": "plain_text", "text": "Open"}, "url": at}
                ]}
            ]
        })
    );

    // The link asks for a sign-in first, then opens the approval with approve preselected.
    let b = Browser::new(1100, 1000);
    b.goto(&approve);
    b.click_css("#login-oidc");
    provider_sign_in(&b, "alice", "#confirm");
    let signed_in = Instant::now();
    assert_eq!(b.url(), approve);
    assert!(b
        .text_css("#preselected")
        .starts_with("You chose to approve this call. Nothing is decided until you confirm."));
    // Opening the link decided nothing.
    let id = ApprovalId("approval-1".into());
    assert_eq!(sc.state(&id), ApprovalState::Prepared);

    // The sign-in grows older than 5 s: the confirmation is refused and signs in again.
    std::thread::sleep(Duration::from_secs(6).saturating_sub(signed_in.elapsed()));
    b.click_css("#confirm");
    b.wait_text(
        "#login-again",
        "Deciding this approval needs a sign-in within the last 5 s: sign in again.",
    );
    assert_eq!(sc.state(&id), ApprovalState::Prepared);
    assert_eq!(sc.writes(), 0);
    b.click_css("#login-oidc");
    // The provider signs alice in again (its session is older than max_age).
    b.wait_for("input[name=login]");
    provider_sign_in(&b, "alice", "#confirm");
    assert_eq!(b.url(), approve);
    b.click_css("#confirm");
    assert_eq!(
        client.result()["structuredContent"],
        json!({"stored": "from-a-link"})
    );
    match sc.state(&id) {
        ApprovalState::Decided(d) | ApprovalState::Claimed(d) => {
            assert_eq!(d.verdict, Verdict::Approve)
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(sc.writes(), 1);
    let shown = sc.show("approval-1");
    assert_eq!(shown["dispatches"], 1);
    assert_eq!(
        shown["decision"]["approver"],
        format!("alice (test) <alice@example.com>, sub alice at {issuer} (page)").as_str()
    );
}

/// Issue 47: a write needing 2 votes from `group:sre`, decided in Chromium by approvers signed
/// in through oidc-provider whose ID tokens carry their groups: alice's vote leaves the call
/// waiting ("1 of 2 votes"); dave (no group) is refused; bob's vote sends the write once.
#[test]
fn two_oidc_approvers_from_a_group_make_a_quorum_in_the_browser() {
    let issuer = peers::oidc_issuer();
    let sc = Scenario::new("quorum");
    std::fs::write(sc.dir.join("page-secret.txt"), "page-secret\n").expect("secret");
    let config = sc.write_config_with(&format!(
        r#"
[writes.set_value.approval]
required = 2
from = ["group:sre"]

[page]
token_login = false

[page.oidc]
issuer = {issuer:?}
client_id = "purra-page"
client_secret_file = "page-secret.txt"
scopes = ["openid", "email", "profile", "groups"]
allow_subjects = ["alice", "bob", "dave"]
"#
    ));
    let gw = Purra::start(&["gateway", "--config", &config, "--page", "127.0.0.1:0"]);
    let page = gw.line("purra gateway: approver page at ");
    let mcp = gw.line("purra gateway: serving ");
    let client = Client::set_value(&mcp, "two-of-two");

    let alice = Browser::new(1100, 1000);
    oidc_sign_in(&alice, &page, "alice");
    alice.wait_for("#approve-approval-1");
    alice.click_css("#approve-approval-1");
    alice.wait_text(
        "#status",
        "approval-1: your vote is recorded, 1 of 2 votes; the write is sent once the rest approve",
    );
    alice.goto(&format!("{page}approvals/approval-1"));
    alice.wait_text(".votes", "1 of 2 votes from group:sre");
    assert!(alice.text_css(".voters").contains("alice (test)"));
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(sc.writes(), 0);

    let dave = Browser::new(1100, 1000);
    oidc_sign_in(&dave, &page, "dave");
    dave.wait_for("#approve-approval-1");
    dave.click_css("#approve-approval-1");
    dave.wait_text(
        "#status",
        &format!(
            "refused: approval-1: dave (test) <dave@example.com>, sub dave at {issuer} may not \
             decide this approval: only group:sre may"
        ),
    );
    assert_eq!(sc.writes(), 0);

    let bob = Browser::new(1100, 1000);
    oidc_sign_in(&bob, &page, "bob");
    bob.wait_for("#approve-approval-1");
    bob.click_css("#approve-approval-1");
    bob.wait_text(
        "#status",
        &format!("approval-1 approved by bob (test) <bob@example.com>, sub bob at {issuer}"),
    );
    assert_eq!(
        client.result()["structuredContent"],
        json!({"stored": "two-of-two"})
    );
    assert_eq!(sc.writes(), 1);
    let shown = sc.show("approval-1");
    assert_eq!(shown["votes"]["approving"], 2, "{shown}");
    assert_eq!(shown["effect"], "committed");
}
