//! `purra gateway` with `[gateway.auth]`: authenticated callers end to end. A real authorization
//! server (oidc-provider, `peers/oidc/server.mjs`) issues tokens to users through its real
//! authorization code flow (`peers/oidc/token.mjs` plays the native client and the user at its
//! login and consent forms); the official Python and TypeScript SDK clients call the guarded
//! gateway with those tokens over Streamable HTTP; the upstream is the Python SDK server whose
//! fsynced ledger counts every request (`peers/python/gateway_upstream.py`). What is proved: no
//! token or a token for another resource is refused 401 with the challenge naming the metadata;
//! the metadata's exact JSON; two users making the same write get two approvals, each naming its
//! principal; approving one releases only that user's call (the other still pending, the ledger
//! counting one) and its receipt never answers the other user's identical call; a principal
//! outside the scope rules is refused before anything is prepared; and with
//! `approvers_must_differ` the user who asked can decide neither on the approver page nor with
//! `purra approvals`, while the other user can.
//!
//! The scenario is built by [`Guarded::start`] with the configuration's extra tables, so a case
//! for a policy (a per-principal rule that refuses before any approval is prepared) adds its
//! table and its assertions to the same users, gateway and ledger.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::clients::{Sdk, SdkClient};
use crate::support::peers;
use crate::support::run::{http, page_decide, purra_bin, result_text, steps_of, LIMIT};

use peers::{
    fresh_dir, lines_of, oidc_issuer, peer, python, repo_root, token_for, token_with_scope,
};

/// A guarded gateway serving Streamable HTTP with its approver page beside it, and what the test
/// learned from its start: where it serves and the page's sign-in tokens.
struct Guarded {
    dir: PathBuf,
    child: Child,
    url: String,
    page: String,
    tokens: Vec<(String, String)>,
    issuer: String,
}

impl Drop for Guarded {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Guarded {
    /// Starts `purra gateway --page` with `[gateway.auth]` for the test's authorization server,
    /// `approvers_must_differ`, `set_value` bound as a write for `alice` and `bob` only, the page's
    /// token approvers named as those two principals, and `extra` appended to the file.
    fn start(name: &str, extra: &str) -> Guarded {
        Guarded::start_with(name, "", extra, &[])
    }

    /// [`Guarded::start`] with `settings` added to the `[gateway]` table and `files` (name and
    /// text) written beside the configuration file.
    fn start_with(name: &str, settings: &str, extra: &str, files: &[(&str, &str)]) -> Guarded {
        Guarded::start_full(name, settings, extra, files, None)
    }

    /// [`Guarded::start`] with `--log-format json -v`: every line the gateway writes on stderr
    /// is parsed as a JSON object (the test fails on one that is not) and kept in `log`.
    fn start_logged(name: &str, log: std::sync::Arc<std::sync::Mutex<Vec<Value>>>) -> Guarded {
        Guarded::start_full(name, "", "", &[], Some(log))
    }

    fn start_full(
        name: &str,
        settings: &str,
        extra: &str,
        files: &[(&str, &str)],
        log: Option<std::sync::Arc<std::sync::Mutex<Vec<Value>>>>,
    ) -> Guarded {
        let dir = fresh_dir("gateway-auth", name);
        for (file, text) in files {
            std::fs::write(dir.join(file), text).expect("a file beside the configuration");
        }
        let issuer = oidc_issuer().to_owned();
        let upstream = peer(repo_root().join("peers/python/gateway_upstream.py"));
        let (alice, bob) = (principal(&issuer, "alice"), principal(&issuer, "bob"));
        let text = format!(
            r#"[gateway]
name = "gw"
db = "gateway.db"
listen = "127.0.0.1:0"
approval_wait = "80s"
progress_interval = "1s"
approvers_must_differ = true
{settings}
[gateway.auth]
issuer = {issuer:?}
scopes = ["mcp:read"]

[upstreams.values]
command = [{python:?}, {upstream:?}, "--dir", {dir:?}]

[reads.get_value]
upstream = "values"
title = "Read the value"
scope = "open"

[writes.set_value]
upstream = "values"
title = "Set the value"
effect = "write"
binding_id = "values"
binding_revision = "1"
scope_id = "values-users"
scope_revision = "1"

[writes.set_value.scope]
principals = [{alice:?}, {bob:?}]
arguments = ["len(value) <= 40"]
{extra}"#,
            python = python(),
            dir = dir.to_string_lossy(),
        );
        let config = dir.join("gateway.toml");
        std::fs::write(&config, text).expect("config");
        let mut cmd = Command::new(purra_bin());
        cmd.args(["gateway", "--config"])
            .arg(&config)
            .args(["--page", "127.0.0.1:0", "--page-approver", &alice])
            .args(["--page-approver", &bob]);
        if log.is_some() {
            cmd.args(["--log-format", "json", "-v"]);
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn gateway");
        let rx = lines_of(child.stderr.take().expect("stderr"), move |line| {
            eprintln!("[gateway] {line}");
            let Some(log) = &log else {
                return Some(line);
            };
            let v: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("a log line that is not JSON ({e}): {line}"));
            assert!(v.is_object(), "{line}");
            log.lock().expect("log").push(v.clone());
            // The start's operational lines, read as the text lines they say.
            match (v["target"].as_str(), v["message"].as_str()) {
                (Some(t @ "purra gateway"), Some(m)) => Some(format!("{t}: {m}")),
                _ => None,
            }
        });
        let (mut url, mut page, mut tokens) = (None, None, Vec::new());
        let start = Instant::now();
        while url.is_none() {
            let line = rx
                .recv_timeout(LIMIT.saturating_sub(start.elapsed()))
                .expect("the gateway did not say where it serves");
            if let Some(u) = line.strip_prefix("purra gateway: serving ") {
                url = Some(u.to_owned());
            } else if let Some(p) = line.strip_prefix("purra gateway: approver page at ") {
                page = Some(p.trim_end_matches('/').to_owned());
            } else if let Some(rest) = line.strip_prefix("purra gateway: sign-in token for ") {
                let (who, token) = rest.rsplit_once(": ").expect("NAME: TOKEN");
                tokens.push((who.to_owned(), token.to_owned()));
            }
        }
        let url = url.expect("url");
        // The next line says where the metadata is.
        let guard = rx
            .recv_timeout(LIMIT.saturating_sub(start.elapsed()))
            .expect("the guard's line");
        assert_eq!(
            guard,
            format!(
                "purra gateway: callers need a token from {issuer} for {url}; protected resource metadata at {}",
                url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
            )
        );
        std::thread::spawn(move || rx.into_iter().for_each(drop));
        Guarded {
            dir,
            child,
            url,
            page: page.expect("the page's address"),
            tokens,
            issuer,
        }
    }

    /// An access token of `user` for the gateway's resource, from the authorization server's
    /// code flow.
    fn token(&self, user: &str) -> String {
        token_for(&self.issuer, user, &self.url)
    }

    fn db(&self) -> String {
        self.dir.join("gateway.db").to_string_lossy().into_owned()
    }

    /// `purra approvals ARGS --db DB --json`, which must succeed.
    fn approvals(&self, args: &[&str]) -> Value {
        let out = self.approvals_raw(args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "purra approvals {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("json")
    }

    fn approvals_raw(&self, args: &[&str]) -> Output {
        let db = self.db();
        Command::new(purra_bin())
            .arg("approvals")
            .args(args)
            .args(["--db", &db, "--json"])
            .stdin(Stdio::null())
            .output()
            .expect("run purra approvals")
    }

    /// The ids of the pending approvals, oldest first (`approvals list` shows the newest first).
    fn pending(&self) -> Vec<String> {
        if !std::path::Path::new(&self.db()).exists() {
            return Vec::new();
        }
        let mut ids: Vec<String> = self.approvals(&["list"])["approvals"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["state"] == "pending")
            .map(|a| a["id"].as_str().expect("id").to_owned())
            .collect();
        ids.reverse();
        ids
    }

    /// Waits until `n` approvals are pending; returns their ids.
    fn wait_pending(&self, n: usize) -> Vec<String> {
        let start = Instant::now();
        loop {
            let p = self.pending();
            if p.len() == n {
                return p;
            }
            assert!(
                start.elapsed() < LIMIT,
                "{n} pending approvals expected: {p:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// How many `set_value` requests reached the upstream (its fsynced ledger).
    fn writes(&self) -> usize {
        std::fs::read_to_string(self.dir.join("ledger.txt"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with("call set_value"))
            .count()
    }

    /// Decides `id` on the approver page as `who` signed in; the status and the JSON answer.
    fn decide_on_page(&self, who: &str, id: &str, verdict: &str) -> (u16, Value) {
        let token = &self
            .tokens
            .iter()
            .find(|(a, _)| a == who)
            .unwrap_or_else(|| panic!("no sign-in token for {who}: {:?}", self.tokens))
            .1;
        page_decide(&self.page, token, id, verdict)
    }
}

/// How the gateway writes an authenticated principal.
fn principal(issuer: &str, user: &str) -> String {
    format!("{issuer}#{user}")
}

fn set_value(value: &str) -> Value {
    json!({"call": "set_value", "args": {"value": value}})
}

/// The guard: no token and a token for another resource are refused with the challenge that
/// names the metadata; the metadata document is exactly what clients read; an SDK client
/// without a token cannot connect, with one it can.
#[test]
fn the_guard_refuses_callers_without_a_token_for_the_gateway_and_serves_its_metadata() {
    let g = Guarded::start("guard", "");
    let metadata = g
        .url
        .replace("/mcp", "/.well-known/oauth-protected-resource/mcp");
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}})
    .to_string();
    let post = |auth: Option<&str>| {
        let mut h = vec![
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
        ];
        if let Some(a) = auth {
            h.push(("authorization", a));
        }
        http("POST", &g.url, &h, &initialize)
    };
    let r = post(None);
    assert_eq!(r.status, 401, "{}", r.body);
    assert_eq!(
        r.header("www-authenticate"),
        Some(format!("Bearer scope=\"mcp:read\", resource_metadata=\"{metadata}\"").as_str())
    );
    assert_eq!(
        serde_json::from_str::<Value>(&r.body).unwrap(),
        json!({"error": "unauthorized", "error_description": "authorization required"})
    );
    // A real token of a real user, for another resource.
    let elsewhere = token_for(&g.issuer, "alice", "http://127.0.0.1:9/mcp");
    let r = post(Some(&format!("Bearer {elsewhere}")));
    assert_eq!(r.status, 401, "{}", r.body);
    assert_eq!(
        r.header("www-authenticate"),
        Some(
            format!(
                "Bearer error=\"invalid_token\", error_description=\"the token is for another resource\", scope=\"mcp:read\", resource_metadata=\"{metadata}\""
            )
            .as_str()
        )
    );
    // The metadata, without a token.
    let m = http("GET", &metadata, &[], "");
    assert_eq!(m.status, 200);
    assert_eq!(m.header("content-type"), Some("application/json"));
    assert_eq!(
        serde_json::from_str::<Value>(&m.body).unwrap(),
        json!({
            "resource": g.url,
            "authorization_servers": [g.issuer],
            "bearer_methods_supported": ["header"]
        })
    );
    // The gateway's own token for it is accepted.
    let alice = g.token("alice");
    let r = post(Some(&format!("Bearer {alice}")));
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("\"serverInfo\""), "{}", r.body);

    // The TypeScript SDK's client: refused without a token, served with one.
    let lines = SdkClient::start(Sdk::Node, &g.url, None, json!([{"list": true}])).finish();
    assert_eq!(
        lines,
        [
            json!({"event": "failed", "error": "Error: Streamable HTTP error: Error POSTing to endpoint: {\"error\":\"unauthorized\",\"error_description\":\"authorization required\"}"}),
            json!({"event": "done"})
        ]
    );
    let lines = SdkClient::start(
        Sdk::Node,
        &g.url,
        Some(&alice),
        json!([{"list": true}, {"call": "get_value", "args": {}}]),
    )
    .finish();
    let steps = steps_of(&lines);
    assert_eq!(steps.len(), 2, "{lines:?}");
    let names: Vec<&str> = steps[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["get_value", "set_value"]);
    assert_eq!(
        steps[1]["result"]["structuredContent"],
        json!({"value": ""})
    );
}

/// Two users, the same write: two approvals, each naming its principal; the first user cannot
/// approve their own on the page or with the CLI; approved by the other user, it releases only
/// the first user's call (the second still waits, the ledger counts one); the first user's
/// receipt answers their repeated call and never the second user's; a user outside the scope
/// rules is refused before anything is prepared.
#[test]
fn two_users_making_the_same_write_get_their_own_approvals_receipts_and_separation_of_duties() {
    let g = Guarded::start("two-users", "");
    let (alice, bob) = (principal(&g.issuer, "alice"), principal(&g.issuer, "bob"));
    let (alice_token, bob_token) = (g.token("alice"), g.token("bob"));

    // The same client (the Python SDK's, the same clientInfo.name), the same arguments.
    let a = SdkClient::start(
        Sdk::Python,
        &g.url,
        Some(&alice_token),
        json!([set_value("same"), set_value("same")]),
    );
    assert_eq!(g.wait_pending(1), ["approval-1"]);
    let mut b = SdkClient::start(
        Sdk::Python,
        &g.url,
        Some(&bob_token),
        json!([set_value("same")]),
    );
    assert_eq!(g.wait_pending(2), ["approval-1", "approval-2"]);
    let (one, two) = (
        g.approvals(&["show", "approval-1"]),
        g.approvals(&["show", "approval-2"]),
    );
    assert_eq!(
        one["requestedBy"],
        format!("{alice} (gateway-client-python)").as_str()
    );
    assert_eq!(
        two["requestedBy"],
        format!("{bob} (gateway-client-python)").as_str()
    );
    assert_eq!(
        one["labels"],
        json!({"approvers_must_differ": "true", "client": "gateway-client-python",
               "effect": "write", "gateway": "gw", "principal": alice,
               "title": "Set the value", "upstream": "values",
               "upstream_tool": "set_value"})
    );
    assert_eq!(two["labels"]["principal"], bob.as_str());
    assert_eq!(one["arguments"], two["arguments"]);
    assert_ne!(one["runId"], two["runId"]);
    assert_ne!(one["intentDigest"], two["intentDigest"]);
    assert_eq!(g.writes(), 0);

    // Alice cannot decide Alice's write: not on the page, signed in as her principal...
    for verdict in ["approve", "deny"] {
        assert_eq!(
            g.decide_on_page(&alice, "approval-1", verdict),
            (
                403,
                json!({"ok": false, "message": format!("refused: approval-1: approvers must differ: {alice} asked for this approval and cannot decide it")})
            )
        );
    }
    // ...nor with the CLI.
    for verb in ["approve", "deny"] {
        let out = g.approvals_raw(&[verb, "approval-1", "--approver", &alice]);
        assert_eq!(out.status.code(), Some(3), "{verb}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!("purra: approval approval-1: approvers must differ: {alice} asked for this approval and cannot decide it\n")
        );
        assert_eq!(
            serde_json::from_slice::<Value>(&out.stdout).unwrap(),
            json!({"error": {"kind": "conflict", "message": format!("approval approval-1: approvers must differ: {alice} asked for this approval and cannot decide it")}})
        );
    }
    assert_eq!(g.pending(), ["approval-1", "approval-2"]);

    // Bob approves Alice's write on the page: only Alice's call is released.
    assert_eq!(
        g.decide_on_page(&bob, "approval-1", "approve"),
        (
            200,
            json!({"ok": true, "message": format!("approval-1 approved by {bob}")})
        )
    );
    let lines = a.finish();
    let steps = steps_of(&lines);
    assert_eq!(steps.len(), 2, "{lines:?}");
    for s in &steps {
        // The second: Alice's own receipt, nothing sent again.
        assert_eq!(
            s["result"]["structuredContent"],
            json!({"stored": "same"}),
            "{lines:?}"
        );
    }
    assert_eq!(g.writes(), 1);
    assert_eq!(g.approvals(&["show", "approval-1"])["effect"], "committed");
    // Bob's identical call did not get Alice's receipt: it still waits for its own approval.
    std::thread::sleep(Duration::from_secs(2));
    assert!(b.running(), "{:?}", b.seen);
    assert_eq!(g.pending(), ["approval-2"]);
    assert_eq!(g.writes(), 1);

    // Bob cannot approve Bob's with the CLI either; Alice can.
    let out = g.approvals_raw(&["approve", "approval-2", "--approver", &bob]);
    assert_eq!(out.status.code(), Some(3));
    let shown = g.approvals(&["approve", "approval-2", "--approver", &alice]);
    assert_eq!(shown["state"], "approved");
    assert_eq!(shown["decision"]["approver"], format!("{alice} (cli)"));
    let lines = b.finish();
    assert_eq!(
        steps_of(&lines)[0]["result"]["structuredContent"],
        json!({"stored": "same"}),
        "{lines:?}"
    );
    assert_eq!(g.writes(), 2);
    for id in ["approval-1", "approval-2"] {
        let shown = g.approvals(&["show", id]);
        assert_eq!(shown["effect"], "committed", "{id}");
        assert_eq!(shown["dispatches"], 1, "{id}");
    }

    // Carol is not among the scope's principals: refused, nothing prepared, nothing sent. (The
    // TypeScript SDK's client, with her token.)
    let carol = g.token("carol");
    let lines =
        SdkClient::start(Sdk::Node, &g.url, Some(&carol), json!([set_value("same")])).finish();
    assert_eq!(
        result_text(steps_of(&lines)[0]),
        (
            "set_value failed: scope_denied (nothing was sent: the caller's principal is not one of scope.principals)".to_owned(),
            true
        ),
        "{lines:?}"
    );
    assert_eq!(
        g.approvals(&["list"])["approvals"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(g.writes(), 2);
}

/// Cedar policies with real tokens (item 4): a policy forbidding Bob `set_value` refuses him
/// before any approval is prepared (nothing in `purra approvals list`, nothing in the upstream's
/// ledger) while Alice's identical write is prepared, approved by Bob and sent once; a permit
/// that needs the token's `mcp:write` scope refuses Alice's read-only token the write and serves
/// its read; the declared claim `client_id` is read from the real token (a forbid unless it names
/// the public client would refuse every write otherwise).
#[test]
fn a_cedar_policy_refuses_a_user_before_any_approval_is_prepared() {
    let issuer = oidc_issuer().to_owned();
    let (alice, bob) = (principal(&issuer, "alice"), principal(&issuer, "bob"));
    let policies = format!(
        r#"// Everyone reads; writing takes a token that grants mcp:write.
permit (principal, action in Action::"Read", resource);
permit (principal, action in Action::"Write", resource)
  when {{ principal.authenticated && principal.scopes.contains("mcp:write") }};

// Bob may not set the value, whatever his token grants.
forbid (principal == Caller::"{bob}", action == Action::"set_value", resource);

// Only the public client's tokens write.
forbid (principal, action in Action::"Write", resource)
  unless {{ principal.claims has client_id && principal.claims.client_id == "purra-public" }};
"#
    );
    let g = Guarded::start_with(
        "policy",
        "",
        "\n[policies]\nfiles = [\"access.cedar\"]\n\n[policies.claims]\nclient_id = \"String\"\n",
        &[("access.cedar", &policies)],
    );
    let denied = "set_value failed: policy_denied (nothing was sent and no approval was \
                  prepared: the gateway's policies do not allow this caller this call)";

    // Bob, through the TypeScript SDK's client: refused the write, served the read.
    let lines = SdkClient::start(
        Sdk::Node,
        &g.url,
        Some(&g.token("bob")),
        json!([set_value("from bob"), {"call": "get_value", "args": {}}]),
    )
    .finish();
    let steps = steps_of(&lines);
    assert_eq!(steps.len(), 2, "{lines:?}");
    assert_eq!(
        result_text(steps[0]),
        (denied.to_owned(), true),
        "{lines:?}"
    );
    assert_eq!(
        steps[1]["result"]["structuredContent"],
        json!({"value": ""}),
        "{lines:?}"
    );
    assert_eq!(g.approvals(&["list"])["approvals"], json!([]));
    assert_eq!(g.writes(), 0);

    // Alice with a read-only token: no permit for the write.
    let read_only = token_with_scope(&issuer, "alice", &g.url, "mcp:read");
    let lines = SdkClient::start(
        Sdk::Python,
        &g.url,
        Some(&read_only),
        json!([set_value("read only")]),
    )
    .finish();
    assert_eq!(
        result_text(steps_of(&lines)[0]),
        (denied.to_owned(), true),
        "{lines:?}"
    );
    assert_eq!(g.approvals(&["list"])["approvals"], json!([]));

    // Alice with a token that grants writes: prepared, and once Bob approves, sent once.
    let a = SdkClient::start(
        Sdk::Python,
        &g.url,
        Some(&g.token("alice")),
        json!([set_value("from alice")]),
    );
    assert_eq!(g.wait_pending(1), ["approval-1"]);
    let shown = g.approvals(&["show", "approval-1"]);
    assert_eq!(shown["labels"]["principal"], alice.as_str());
    let revision = shown["binding"]["scopeRevision"]
        .as_str()
        .expect("revision");
    assert!(
        revision.starts_with("1+scope:") && revision.contains("+policies:"),
        "{shown}"
    );
    let approved = g.approvals(&["approve", "approval-1", "--approver", &bob]);
    assert_eq!(approved["state"], "approved");
    let lines = a.finish();
    assert_eq!(
        steps_of(&lines)[0]["result"]["structuredContent"],
        json!({"stored": "from alice"}),
        "{lines:?}"
    );
    assert_eq!(g.writes(), 1);
    assert_eq!(
        g.approvals(&["list"])["approvals"]
            .as_array()
            .expect("approvals")
            .len(),
        1
    );
}

/// Calls a minute per principal (item 5), with real tokens: Alice's third call in a burst over
/// a quota of two is refused at once with `rate_limited`, while Bob, another principal through
/// the same gateway, is served.
#[test]
fn calls_a_minute_are_counted_per_principal() {
    let g = Guarded::start_with("rate", "max_calls_per_minute_per_caller = 2\n", "", &[]);
    let read = json!({"call": "get_value", "args": {}});
    let lines = SdkClient::start(
        Sdk::Python,
        &g.url,
        Some(&g.token("alice")),
        json!([read, read, read]),
    )
    .finish();
    let steps = steps_of(&lines);
    assert_eq!(steps.len(), 3, "{lines:?}");
    for s in &steps[..2] {
        assert_eq!(
            s["result"]["structuredContent"],
            json!({"value": ""}),
            "{lines:?}"
        );
    }
    let (text, is_error) = result_text(steps[2]);
    let prefix = "get_value failed: rate_limited (nothing was sent: this caller's calls exceed 2 \
                  a minute, the most max_calls_per_minute_per_caller allows; call again in ";
    let secs: u64 = text
        .strip_prefix(prefix)
        .and_then(|rest| rest.strip_suffix("s)"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert!(is_error && (1..=30).contains(&secs), "{text}");
    let lines =
        SdkClient::start(Sdk::Python, &g.url, Some(&g.token("bob")), json!([read])).finish();
    assert_eq!(
        steps_of(&lines)[0]["result"]["structuredContent"],
        json!({"value": ""}),
        "{lines:?}"
    );
}

/// `--log-format json -v`: every line the gateway writes during a session (start, a read, a
/// write approved from another process and sent) is one JSON object; the lines inside the
/// calls carry their trace ids; none carries the caller's bearer token or an argument value.
#[test]
fn json_log_lines_parse_and_carry_no_token_and_no_argument_value() {
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let g = Guarded::start_logged("json-logs", log.clone());
    let token = g.token("alice");
    let secret_value = "argument-value-7f3a9c";
    let client = SdkClient::start(
        Sdk::Python,
        &g.url,
        Some(&token),
        json!([{"call": "get_value", "args": {}}, set_value(secret_value)]),
    );
    let id = g.wait_pending(1);
    g.approvals(&["approve", &id[0], "--approver", "ada"]);
    let lines = client.finish();
    let steps = steps_of(&lines);
    assert_eq!(steps.len(), 2, "{lines:?}");
    assert_eq!(
        steps[1]["result"]["structuredContent"],
        json!({"stored": secret_value}),
        "{lines:?}"
    );
    assert_eq!(g.writes(), 1);
    // The gateway's last lines are written as the call ends: wait for the write's answer.
    let start = Instant::now();
    let answered = |log: &[Value]| {
        log.iter().any(|l| {
            l["message"] == "answered"
                && l["span"]["name"] == "request"
                && l["span"]["dir"] == "in"
                && l["span"]["method"] == "tools/call"
                && l["span"]["tool"] == "set_value"
                && l["span"]["outcome"] == "ok"
                && l["fields"]["outcome"] == "ok"
                && l.get("trace_id").is_some()
                && l["spans"].as_array().is_some_and(|s| s.len() == 2)
                && l["spans"][0]["name"] == "mcp.connection"
        })
    };
    while !answered(&log.lock().expect("log")) {
        assert!(start.elapsed() < LIMIT, "no answered line");
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(g);
    let log = log.lock().expect("log").clone();
    assert!(log.len() > 10, "{log:#?}");
    for line in &log {
        let text = line.to_string();
        for key in ["timestamp", "level", "target"] {
            assert!(line[key].is_string(), "{key}: {text}");
        }
        assert!(
            !text.contains(&token),
            "a log line carries the bearer token: {text}"
        );
        assert!(
            !text.contains(secret_value),
            "a log line carries an argument value: {text}"
        );
    }
    // The start's lines, the write's spans (approval wait, claim, dispatch) and its answer.
    let messages: Vec<&str> = log.iter().filter_map(|l| l["message"].as_str()).collect();
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with("gw: 2 tools (get_value, set_value); store ")),
        "{messages:?}"
    );
    // The upstream call's line is inside the write's dispatch span, in the call's trace.
    let done = log
        .iter()
        .find(|l| {
            l["message"] == "done"
                && l["spans"].as_array().is_some_and(|s| {
                    s.iter()
                        .any(|n| n["name"] == "gateway.dispatch" && n["approval"].is_string())
                })
        })
        .unwrap_or_else(|| panic!("{log:#?}"));
    assert_eq!(done["span"]["name"], "mcp.tool_call", "{done}");
    assert_eq!(done["span"]["tool"], "set_value", "{done}");
    let write_trace = log
        .iter()
        .find(|l| {
            l["message"] == "answered"
                && l["span"]["tool"] == "set_value"
                && l["span"]["dir"] == "in"
        })
        .and_then(|l| l["trace_id"].as_str())
        .expect("the write's trace");
    assert_eq!(done["trace_id"], write_trace, "{done}");
    let traced: std::collections::BTreeSet<&str> = log
        .iter()
        .filter(|l| l["span"]["name"] == "request" && l["message"] == "answered")
        .filter_map(|l| l["trace_id"].as_str())
        .collect();
    assert!(traced.len() >= 2, "each call its own trace: {traced:?}");
}

/// Finding 2 of the second security review, through the real guard with real tokens: Alice at
/// her `max_sessions_per_caller` (2) does not keep Bob from opening a session under
/// `max_sessions` (3); Alice's third session closes her own least recently used one, and a
/// session stays its owner's.
#[test]
fn finding_2_a_caller_at_its_session_bound_does_not_keep_another_from_a_session() {
    let g = Guarded::start_with(
        "sessions",
        "max_sessions = 3\nmax_sessions_per_caller = 2\n",
        "",
        &[],
    );
    let (alice, bob) = (g.token("alice"), g.token("bob"));
    let post = |token: &str, session: Option<&str>, body: &str| {
        crate::support::run::bearer_post(&g.url, token, session, body)
    };
    let open = |token: &str| {
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}})
        .to_string();
        let r = post(token, None, &init);
        assert_eq!(r.status, 200, "{}", r.body);
        let id = r.header("mcp-session-id").expect("a session").to_owned();
        let done = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        assert_eq!(post(token, Some(&id), done).status, 202);
        id
    };
    let ping = |token: &str, id: &str| {
        post(
            token,
            Some(id),
            r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#,
        )
        .status
    };
    let a1 = open(&alice);
    let a2 = open(&alice);
    let a3 = open(&alice);
    assert_eq!(
        (ping(&alice, &a1), ping(&alice, &a2), ping(&alice, &a3)),
        (404, 200, 200)
    );
    let b1 = open(&bob);
    assert_eq!(ping(&bob, &b1), 200);
    assert_eq!(ping(&alice, &b1), 404, "a session stays its owner's");
    assert_eq!((ping(&alice, &a2), ping(&alice, &a3)), (200, 200));
}
