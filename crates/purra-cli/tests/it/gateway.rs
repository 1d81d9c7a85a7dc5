//! `purra gateway` end to end, as people run it: the official TypeScript and Python SDK clients
//! as downstream clients (over stdio, where they start the gateway, and over Streamable HTTP),
//! an upstream written with the official Python SDK whose fsynced ledger records every request
//! it received (`peers/python/gateway_upstream.py`), approvals decided by `purra approvals` in
//! another process or by the client's own elicitation handler, and the faults: the gateway
//! killed with SIGKILL while a write waits and while it dispatches, the upstream exiting
//! mid-call, the upstream's tool list changing between approval and dispatch. Each proves one
//! request at most reached the upstream, and that the recorded effect is the conservative one.

use std::path::PathBuf;
use std::process::Command;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::clients::{gateway_client, json_lines, serving, spawn_gateway, wait_for, Sdk};
use crate::support::peers;
use crate::support::run::{
    approvals_json, http_get, ledger_lines, purra, purra_bin, result_text, steps_of, wait_approval,
    wait_ledger, Killed, LIMIT,
};

use peers::{fresh_dir, peer, python, repo_root};

/// A fresh directory for one scenario (removed when dropped): config, store, upstream ledger.
struct Scenario {
    dir: PathBuf,
}

impl Drop for Scenario {
    fn drop(&mut self) {
        if !self.dir.as_os_str().is_empty() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// How a scenario's gateway is configured.
#[derive(Clone)]
struct Setup {
    listen: &'static str,
    approval_wait: &'static str,
    elicitation: bool,
    apps: bool,
    /// `set_value`'s `approval` key (`""`: left out, an operator decides).
    approval: &'static str,
    run_decided_without_caller: bool,
    lease: &'static str,
    scenario: &'static str,
    /// `set_value`'s `binding_revision`.
    binding_revision: &'static str,
    /// How long the upstream's `set_value` waits before it writes.
    write_delay_ms: u64,
    drain_timeout: &'static str,
    /// `[gateway] on_catalog_change`.
    on_catalog_change: &'static str,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            listen: "stdio",
            approval_wait: "90s",
            elicitation: false,
            apps: false,
            approval: "",
            run_decided_without_caller: false,
            lease: "60s",
            scenario: "normal",
            binding_revision: "1",
            write_delay_ms: 0,
            drain_timeout: "30s",
            on_catalog_change: "hold",
        }
    }
}

impl Scenario {
    fn new(name: &str) -> Scenario {
        Scenario {
            dir: fresh_dir("gateway", name),
        }
    }

    /// No scenario (for clients of a gateway the test started: they need no configuration).
    fn none() -> Scenario {
        Scenario {
            dir: PathBuf::new(),
        }
    }

    /// Asserts what the store says of approval `id`: its effect and how many claims it had.
    fn assert_effect(&self, id: &str, effect: &str, dispatches: u64) {
        let shown = self.approvals(&["show", id]);
        assert_eq!(shown["effect"], effect, "{shown}");
        assert_eq!(shown["dispatches"], dispatches, "{shown}");
    }

    fn db(&self) -> String {
        self.dir.join("gateway.db").to_string_lossy().into_owned()
    }

    fn config(&self) -> String {
        self.dir.join("gateway.toml").to_string_lossy().into_owned()
    }

    /// Writes the configuration: one upstream (the Python SDK server), `get_value` bound as a
    /// read, `set_value` as a write for the two test clients; `admin_reset` is not bound.
    fn write_config(&self, s: &Setup) {
        let upstream = peer(repo_root().join("peers/python/gateway_upstream.py"));
        let text = format!(
            r#"[gateway]
name = "gw"
db = "gateway.db"
listen = "{listen}"
approval_wait = "{wait}"
progress_interval = "1s"
elicitation = {elicitation}
apps = {apps}
approval_ttl = "10m"
run_decided_without_caller = {run}
lease = "{lease}"
drain_timeout = "{drain}"
on_catalog_change = "{on_change}"

[upstreams.values]
command = [{python:?}, {upstream:?}, "--dir", {dir:?}, "--scenario", "{scenario}", "--write-delay-ms", "{delay}"]

[reads.get_value]
upstream = "values"
title = "Read the value"
concurrency = "safe"
scope = "open"

[writes.set_value]
upstream = "values"
title = "Set the value"
effect = "write"
binding_id = "values"
binding_revision = "{revision}"
scope_id = "values-clients"
scope_revision = "1"
{approval}

[writes.set_value.scope]
clients = ["gateway-client-python", "gateway-client-node"]
arguments = ["len(value) <= 40"]
"#,
            listen = s.listen,
            wait = s.approval_wait,
            elicitation = s.elicitation,
            apps = s.apps,
            approval = if s.approval.is_empty() {
                String::new()
            } else {
                format!("approval = {:?}", s.approval)
            },
            run = s.run_decided_without_caller,
            lease = s.lease,
            python = python(),
            dir = self.dir.to_string_lossy(),
            scenario = s.scenario,
            revision = s.binding_revision,
            delay = s.write_delay_ms,
            drain = s.drain_timeout,
            on_change = s.on_catalog_change,
        );
        std::fs::write(self.config(), text).expect("config");
    }

    /// The upstream's ledger, one event per line.
    fn ledger(&self) -> Vec<String> {
        ledger_lines(&self.dir.join("ledger.txt"))
    }

    /// How many `set_value` requests reached the upstream.
    fn writes(&self) -> usize {
        self.ledger()
            .iter()
            .filter(|l| l.starts_with("call set_value"))
            .count()
    }

    /// Waits until the ledger has a line starting with `prefix`.
    fn wait_ledger(&self, prefix: &str) {
        wait_ledger(&self.dir.join("ledger.txt"), prefix);
    }

    /// `purra approvals ARGS --db DB --json`.
    fn approvals(&self, args: &[&str]) -> Value {
        approvals_json(&self.db(), args)
    }

    /// Waits until an approval is pending in the store; returns its id.
    fn wait_pending(&self) -> String {
        wait_approval(&self.db(), "a pending approval", |a| {
            a["state"] == "pending"
        })
    }

    /// Approves `id` from another process, as an operator does.
    fn approve(&self, id: &str) -> Value {
        self.approvals(&["approve", id, "--approver", "ada"])
    }

    fn trigger_catalog_change(&self) {
        std::fs::write(self.dir.join("change-catalog"), "").expect("trigger");
    }
}

/// A scenario with `setup` and its gateway started on Streamable HTTP.
fn served(name: &str, setup: Setup) -> (Scenario, Gateway) {
    let sc = Scenario::new(name);
    sc.write_config(&Setup {
        listen: "127.0.0.1:0",
        ..setup
    });
    let gateway = Gateway::start(&sc);
    (sc, gateway)
}

/// Every row of the store's audit log.
fn audit(db: &str) -> Vec<purra_sqlite::AuditEntry> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let store = purra_sqlite::SqliteStore::open(db).expect("store");
        purra_core::OperatorStore::audit(&store, 0, 100_000)
            .await
            .expect("audit")
    })
}

/// A gateway started by the test (Streamable HTTP), killed when dropped.
struct Gateway {
    child: Killed,
    url: String,
    /// What it printed on stderr before saying where it serves.
    started: Vec<String>,
    /// What it prints on stderr since.
    lines: Receiver<String>,
}

impl Gateway {
    fn start(sc: &Scenario) -> Gateway {
        let (child, rx) = spawn_gateway(sc.config());
        let (url, started) = serving(&rx, LIMIT);
        Gateway {
            child: Killed(child),
            url,
            started,
            lines: rx,
        }
    }

    /// Waits for the next stderr line starting with `prefix` (skipping others); returns it.
    fn wait_line(&self, prefix: &str) -> String {
        let start = Instant::now();
        loop {
            let line = self
                .lines
                .recv_timeout(LIMIT.saturating_sub(start.elapsed()))
                .unwrap_or_else(|_| panic!("the gateway printed no line {prefix:?}"));
            if line.starts_with(prefix) {
                return line;
            }
        }
    }

    /// Sends `signal` (`HUP`, `TERM`) to the gateway's process.
    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.0.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    /// `HOST:PORT` it serves on.
    fn authority(&self) -> String {
        self.url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_owned()
    }

    /// SIGKILL: no cleanup of any kind.
    fn kill(self) {
        drop(self.child);
    }
}

/// A downstream client process: its JSON lines arrive on a channel as it prints them.
struct Client {
    child: Killed,
    lines: Receiver<Value>,
    seen: Vec<Value>,
}

impl Client {
    /// Starts `sdk`'s client with `steps`, on `url` or (None) starting the gateway over stdio.
    fn start(
        sdk: Sdk,
        sc: &Scenario,
        url: Option<&str>,
        elicit: Option<&str>,
        steps: Value,
    ) -> Client {
        Client::start_with(sdk, sc, url, elicit, false, steps)
    }

    /// [`Client::start`], declaring MCP Apps support when `apps` (Python only).
    fn start_with(
        sdk: Sdk,
        sc: &Scenario,
        url: Option<&str>,
        elicit: Option<&str>,
        apps: bool,
        steps: Value,
    ) -> Client {
        let mut cmd = gateway_client(sdk);
        if let Some(e) = elicit {
            cmd.args(["--elicit", e]);
        }
        if apps {
            cmd.arg("--apps");
        }
        cmd.args(["--steps", &steps.to_string()]);
        match url {
            Some(u) => {
                cmd.args(["--http", u]);
            }
            None => {
                cmd.args(["--", purra_bin(), "gateway", "--config", &sc.config()]);
            }
        }
        let (child, rx) = json_lines(&mut cmd);
        Client {
            child: Killed(child),
            lines: rx,
            seen: Vec::new(),
        }
    }

    /// A client of the gateway `g` over Streamable HTTP, without elicitation.
    fn http(sdk: Sdk, g: &Gateway, steps: Value) -> Client {
        Client::start(sdk, &Scenario::none(), Some(&g.url), None, steps)
    }

    /// Waits for a line matching `pred`; returns it.
    fn wait_for(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        wait_for(&self.lines, &mut self.seen, what, LIMIT, pred)
    }

    /// Waits for the client to finish; returns every line it printed.
    fn finish(mut self) -> Vec<Value> {
        self.wait_for("done", |v| v["event"] == "done");
        let _ = self.child.0.wait();
        std::mem::take(&mut self.seen)
    }
}

fn call(tool: &str, args: Value) -> Value {
    json!({"call": tool, "args": args})
}

/// What the two SDK clients list: exactly the bound tools, under their local names, with the
/// strict-profile schemas and the binding titles.
fn expected_tools() -> Value {
    json!([
        {
            "name": "get_value",
            "title": "Read the value",
            "description": "Reads the stored value",
            "inputSchema": {"type": "object", "properties": {}, "additionalProperties": false},
            "outputSchema": {
                "type": "object",
                "properties": {"value": {"type": "string"}},
                "required": ["value"],
                "additionalProperties": false
            },
            "annotations": {"readOnlyHint": true}
        },
        {
            "name": "set_value",
            "title": "Set the value",
            "description": format!("Sets the stored value\n\n{}", purra_gateway::WRITE_WAITS),
            "inputSchema": {
                "type": "object",
                "properties": {"value": {"type": "string"}},
                "required": ["value"],
                "additionalProperties": false
            },
            "outputSchema": {
                "type": "object",
                "properties": {"stored": {"type": "string"}},
                "required": ["stored"],
                "additionalProperties": false
            },
            "annotations": {"readOnlyHint": false, "destructiveHint": false, "idempotentHint": true},
            // A held write may be called as a task (the store keeps tasks for the fleet).
            "execution": {"taskSupport": "optional"}
        }
    ])
}

/// Acceptance 1 for one SDK and one transport: only bound tools, a read through, a write sent
/// once after `purra approvals approve` from another process, the same call again answered
/// from the stored receipt.
fn write_once_after_cli_approval(sdk: Sdk, http: bool) {
    let sc = Scenario::new(&format!("a1-{sdk:?}-{http}"));
    sc.write_config(&Setup {
        listen: if http { "127.0.0.1:0" } else { "stdio" },
        ..Setup::default()
    });
    let gateway = http.then(|| Gateway::start(&sc));
    let value = format!("v-{sdk:?}-{http}");
    let client = Client::start(
        sdk,
        &sc,
        gateway.as_ref().map(|g| g.url.as_str()),
        None,
        json!([
            {"list": true},
            call("get_value", json!({})),
            call("set_value", json!({"value": value})),
            call("set_value", json!({"value": value})),
            call("get_value", json!({})),
        ]),
    );
    let id = sc.wait_pending();
    assert_eq!(id, "approval-1");
    // The write waits; nothing reached the upstream yet.
    assert_eq!(sc.writes(), 0);
    let approved = sc.approve(&id);
    assert_eq!(approved["state"], "approved");
    let lines = client.finish();
    let steps = steps_of(&lines);
    assert_eq!(steps.len(), 5, "{lines:?}");
    assert_eq!(steps[0]["tools"], expected_tools(), "{sdk:?}");
    assert_eq!(
        steps[1]["result"]["structuredContent"],
        json!({"value": ""})
    );
    for i in [2, 3] {
        assert_eq!(
            steps[i]["result"]["structuredContent"],
            json!({"stored": value}),
            "{sdk:?} http={http} step {i}: {}",
            steps[i]
        );
    }
    assert_eq!(
        steps[2]["result"]["content"],
        json!([{"type": "text", "text": format!("stored {value}")}])
    );
    // The same call again: answered from the receipt, and said so (issue 44, defect 5).
    let replay = &steps[3]["result"];
    let at = replay["_meta"]["io.purra/replay"]["receiptAt"]
        .as_str()
        .unwrap_or_else(|| panic!("no replay marker: {replay}"));
    assert_eq!(
        replay["_meta"]["io.purra/replay"]["approval"], "approval-1",
        "{replay}"
    );
    assert_eq!(
        replay["content"],
        json!([
            {"type": "text", "text": format!(
                "answered from the receipt of approval-1, {} {} UTC; nothing was sent",
                &at[..10],
                &at[11..19]
            )},
            {"type": "text", "text": format!("stored {value}")}
        ])
    );
    assert_eq!(
        steps[4]["result"]["structuredContent"],
        json!({"value": value})
    );
    // Progress came while the write waited for the decision.
    assert!(
        lines.iter().any(|l| l["event"] == "progress"
            && l["message"] == "waiting for approval approval-1: 0 s of 90 s"),
        "{lines:?}"
    );
    // The upstream's fsynced ledger: one request, though the call was made twice.
    assert_eq!(sc.writes(), 1, "{:?}", sc.ledger());
    assert!(!sc.ledger().iter().any(|l| l.contains("admin_reset")));
    let shown = sc.approvals(&["show", "approval-1"]);
    assert_eq!(shown["state"], "claimed");
    assert_eq!(shown["effect"], "committed");
    assert_eq!(shown["dispatches"], 1);
    assert_eq!(shown["tool"], "set_value");
    assert_eq!(
        shown["receipt"],
        json!({"text": [format!("stored {value}")], "structured": {"stored": value}})
    );
    drop(gateway);
}

#[test]
fn python_client_over_stdio_and_http_writes_once_after_cli_approval() {
    write_once_after_cli_approval(Sdk::Python, false);
    write_once_after_cli_approval(Sdk::Python, true);
}

#[test]
fn typescript_client_over_stdio_and_http_writes_once_after_cli_approval() {
    write_once_after_cli_approval(Sdk::Node, false);
    write_once_after_cli_approval(Sdk::Node, true);
}

/// Acceptance 2: the client that declared elicitation approves from its own handler.
#[test]
fn elicitation_approve_and_deny_from_the_clients_own_handler() {
    for (sdk, answer, http) in [
        (Sdk::Python, "approve", false),
        (Sdk::Node, "deny", true),
        (Sdk::Node, "approve", false),
        (Sdk::Python, "deny", true),
    ] {
        let sc = Scenario::new(&format!("a2-{sdk:?}-{answer}"));
        sc.write_config(&Setup {
            listen: if http { "127.0.0.1:0" } else { "stdio" },
            elicitation: true,
            // The operator's explicit choice: the client's user may decide.
            approval: "client",
            ..Setup::default()
        });
        let gateway = http.then(|| Gateway::start(&sc));
        let client = Client::start(
            sdk,
            &sc,
            gateway.as_ref().map(|g| g.url.as_str()),
            Some(answer),
            json!([call("set_value", json!({"value": "asked"}))]),
        );
        let lines = client.finish();
        let asked: Vec<&Value> = lines.iter().filter(|l| l["event"] == "elicit").collect();
        assert_eq!(asked.len(), 1, "{lines:?}");
        let message = asked[0]["message"].as_str().expect("message");
        let shown = sc.approvals(&["show", "approval-1"]);
        let digest = shown["intentDigest"].as_str().expect("digest");
        assert_eq!(
            message,
            format!(
                "Approve this write?\ntool: set_value (upstream \"values\", remote tool \"set_value\")\narguments: {{\"value\":\"asked\"}}\nintent digest: {digest}\napproval: approval-1 (gateway gw)"
            )
        );
        let steps = steps_of(&lines);
        let client_name = match sdk {
            Sdk::Python => "gateway-client-python",
            Sdk::Node => "gateway-client-node",
        };
        let note = match sdk {
            Sdk::Python => "from the python client",
            Sdk::Node => "from the node client",
        };
        let approver = format!("{client_name} (elicitation)");
        assert_eq!(shown["decision"]["approver"], approver.as_str());
        assert_eq!(shown["decision"]["note"], note);
        if answer == "approve" {
            assert_eq!(
                steps[0]["result"]["structuredContent"],
                json!({"stored": "asked"}),
                "{lines:?}"
            );
            assert_eq!(shown["effect"], "committed");
            assert_eq!(sc.writes(), 1, "{:?}", sc.ledger());
        } else {
            assert_eq!(
                result_text(steps[0]),
                (
                    format!(
                        "set_value was not sent: approval approval-1 was denied by {approver} (note: {note}) (approval_denied); calling set_value again with the same arguments asks for a new approval"
                    ),
                    true
                )
            );
            assert_eq!(shown["state"], "denied");
            assert_eq!(shown["effect"], Value::Null);
            assert_eq!(sc.writes(), 0, "{:?}", sc.ledger());
        }
    }
}

/// The steps of the self-approval reproduction: the write, the app-only `purra_approval` tool
/// approving it, the write again.
fn self_approval_steps() -> Value {
    let args = json!({"value": "self"});
    json!([
        call("set_value", args.clone()),
        call(
            "purra_approval",
            json!({"tool": "set_value", "arguments": args, "decision": "approve"})
        ),
        call("set_value", args),
    ])
}

fn pending_text(sc: &Scenario, id: &str) -> String {
    format!(
        "set_value was not sent: approval {id} is pending (intent {}). Once it is decided (purra approvals approve {id}), call set_value again with the same arguments: an approved call is sent once; a denied one is not sent, and the same call made again after a denial asks for a new approval.",
        sc.approvals(&["show", id])["intentDigest"].as_str().unwrap_or("")
    )
}

/// Finding 1 of issue 40, as reproduced: the official Python SDK client declaring MCP Apps
/// support (and elicitation, answering every form with approve) calls the write, then the
/// app-only `purra_approval` tool with `decision: "approve"`, then the write again, over
/// Streamable HTTP against the real gateway binary with `apps` and `elicitation` on. The binding
/// leaves `approval` out: no form is asked, the tool refuses, the upstream's fsynced ledger
/// counts no write, and the gateway warned at start what the settings trust. An operator's
/// `purra approvals approve` then sends it, once.
#[test]
fn a_client_approves_its_own_write_only_when_the_binding_says_client() {
    let (sc, gateway) = served(
        "self-approval",
        Setup {
            approval_wait: "1s",
            elicitation: true,
            apps: true,
            ..Setup::default()
        },
    );
    // The warnings name the configured listener.
    let trusted = [
        "purra gateway: warning: gateway.elicitation is on and clients connect over HTTP (127.0.0.1:0): it trusts every client to show the elicitation form to a person and to send back only that person's answer; a client that answers the form itself decides its own write; no write binding says approval = \"client\", so an operator decides every write",
        "purra gateway: warning: gateway.apps is on and clients connect over HTTP (127.0.0.1:0): it trusts every client's host to show the approval view to a person and to keep the app-only tool purra_approval from its model; a client that calls purra_approval itself decides its own write; no write binding says approval = \"client\", so an operator decides every write",
    ];
    for line in trusted {
        assert!(
            gateway.started.iter().any(|l| l == line),
            "{line:?} not in {:?}",
            gateway.started
        );
    }
    let client = Client::start_with(
        Sdk::Python,
        &Scenario::none(),
        Some(&gateway.url),
        Some("approve"),
        true,
        self_approval_steps(),
    );
    let lines = client.finish();
    let steps = steps_of(&lines);
    assert_eq!(steps.len(), 3, "{lines:?}");
    assert!(!lines.iter().any(|l| l["event"] == "elicit"), "{lines:?}");
    assert_eq!(
        result_text(steps[0]),
        (pending_text(&sc, "approval-1"), true)
    );
    assert_eq!(
        result_text(steps[1]),
        (
            "approval approval-1 of set_value: pending; nothing was decided: an operator decides this write (on the approver page or with purra approvals), not this view (operator_approval)".to_owned(),
            true
        ),
        "{lines:?}"
    );
    assert_eq!(
        steps[1]["result"]["structuredContent"]["approvalBy"],
        "operator"
    );
    assert_eq!(
        result_text(steps[2]),
        (pending_text(&sc, "approval-1"), true)
    );
    assert_eq!(sc.writes(), 0, "{:?}", sc.ledger());
    let shown = sc.approvals(&["show", "approval-1"]);
    assert_eq!(
        (shown["state"].clone(), shown["decision"].clone()),
        (json!("pending"), Value::Null)
    );

    // An operator decides it; the same call sends it once, the approver naming the path.
    sc.approve("approval-1");
    let client = Client::start_with(
        Sdk::Python,
        &Scenario::none(),
        Some(&gateway.url),
        Some("approve"),
        true,
        json!([call("set_value", json!({"value": "self"}))]),
    );
    let lines = client.finish();
    assert_eq!(
        steps_of(&lines)[0]["result"]["structuredContent"],
        json!({"stored": "self"}),
        "{lines:?}"
    );
    assert_eq!(sc.writes(), 1, "{:?}", sc.ledger());
    let shown = sc.approvals(&["show", "approval-1"]);
    assert_eq!(shown["decision"]["approver"], "ada (cli)");
    assert_eq!(shown["effect"], "committed");
    drop(gateway);
}

/// Finding 1 of issue 40, the operator's explicit choice: the same reproduction (the Python SDK
/// client with Apps, over stdio, starting the gateway itself) against a binding that says
/// `approval = "client"`: the app-only tool approves and the write is sent exactly once.
#[test]
fn a_binding_that_says_client_lets_the_apps_client_approve_and_sends_once() {
    let sc = Scenario::new("client-approval");
    sc.write_config(&Setup {
        approval_wait: "1s",
        apps: true,
        approval: "client",
        ..Setup::default()
    });
    let client = Client::start_with(Sdk::Python, &sc, None, None, true, self_approval_steps());
    let lines = client.finish();
    let steps = steps_of(&lines);
    assert_eq!(steps.len(), 3, "{lines:?}");
    assert_eq!(
        result_text(steps[0]),
        (pending_text(&sc, "approval-1"), true)
    );
    assert_eq!(
        result_text(steps[1]),
        (
            "approval approval-1 of set_value: approved (decided here)".to_owned(),
            false
        ),
        "{lines:?}"
    );
    assert_eq!(
        steps[1]["result"]["structuredContent"]["approvalBy"],
        "client"
    );
    assert_eq!(
        steps[2]["result"]["structuredContent"],
        json!({"stored": "self"}),
        "{lines:?}"
    );
    assert_eq!(sc.writes(), 1, "{:?}", sc.ledger());
    let shown = sc.approvals(&["show", "approval-1"]);
    assert_eq!(shown["decision"]["approver"], "gateway-client-python (app)");
    assert_eq!(shown["effect"], "committed");
    assert_eq!(shown["dispatches"], 1);
}

/// Acceptance 3: the gateway killed with SIGKILL while a write waits for its decision; the
/// approval made while it is down is dispatched once when the same call is made again.
#[test]
fn killed_while_a_write_waits_then_the_repeated_call_sends_once() {
    let (sc, gateway) = served("kill-wait", Setup { ..Setup::default() });
    let mut client = Client::http(
        Sdk::Python,
        &gateway,
        json!([call("set_value", json!({"value": "survives"}))]),
    );
    let id = sc.wait_pending();
    gateway.kill();
    let failed = client.wait_for("the failed call", |l| l["step"] == "call");
    assert!(failed["error"].is_string(), "{failed}");
    drop(client);
    sc.approve(&id);
    assert_eq!(sc.writes(), 0);

    let gateway = Gateway::start(&sc);
    let client = Client::http(
        Sdk::Python,
        &gateway,
        json!([
            call("set_value", json!({"value": "survives"})),
            call("set_value", json!({"value": "survives"}))
        ]),
    );
    let lines = client.finish();
    let steps = steps_of(&lines);
    for step in &steps {
        assert_eq!(
            step["result"]["structuredContent"],
            json!({"stored": "survives"}),
            "{lines:?}"
        );
    }
    assert_eq!(steps.len(), 2);
    assert_eq!(sc.writes(), 1, "{:?}", sc.ledger());
    sc.assert_effect(&id, "committed", 1);
    drop(gateway);
}

/// Acceptance 3: a decided write whose caller has gone (the gateway was killed) is dispatched
/// after a restart only when the configuration says so, and then once.
#[test]
fn a_decided_write_without_its_caller_runs_only_when_configured() {
    let (sc, gateway) = served("no-caller", Setup { ..Setup::default() });
    let mut client = Client::http(
        Sdk::Python,
        &gateway,
        json!([call("set_value", json!({"value": "later"}))]),
    );
    let id = sc.wait_pending();
    gateway.kill();
    client.wait_for("the failed call", |l| l["step"] == "call");
    drop(client);
    sc.approve(&id);

    // Default: a restarted gateway does not send it without a caller.
    let gateway = Gateway::start(&sc);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(sc.writes(), 0, "{:?}", sc.ledger());
    assert_eq!(sc.approvals(&["show", &id])["state"], "approved");
    drop(gateway);

    // Configured to run decided writes without a caller: sent once, by the gateway itself.
    sc.write_config(&Setup {
        listen: "127.0.0.1:0",
        run_decided_without_caller: true,
        ..Setup::default()
    });
    let gateway = Gateway::start(&sc);
    sc.wait_ledger("responded");
    let start = Instant::now();
    while sc.approvals(&["show", &id])["effect"] != "committed" {
        assert!(start.elapsed() < LIMIT);
        std::thread::sleep(Duration::from_millis(100));
    }
    // The caller comes back: the stored receipt, nothing sent again.
    let client = Client::http(
        Sdk::Python,
        &gateway,
        json!([call("set_value", json!({"value": "later"}))]),
    );
    let lines = client.finish();
    assert_eq!(
        steps_of(&lines)[0]["result"]["structuredContent"],
        json!({"stored": "later"}),
        "{lines:?}"
    );
    assert_eq!(sc.writes(), 1, "{:?}", sc.ledger());
    drop(gateway);
}

/// Acceptance 3: the gateway killed with SIGKILL while the upstream is handling the write. The
/// restarted gateway never sends it again; once the dead gateway's lease lapsed its claim is
/// `unknown` (`interrupted`), and that is what the repeated call answers.
#[test]
fn killed_while_a_write_dispatches_it_is_never_sent_again() {
    let (sc, gateway) = served(
        "kill-dispatch",
        Setup {
            lease: "1s",
            scenario: "slow-write",
            ..Setup::default()
        },
    );
    let mut client = Client::http(
        Sdk::Python,
        &gateway,
        json!([call("set_value", json!({"value": "cut"}))]),
    );
    let id = sc.wait_pending();
    sc.approve(&id);
    sc.wait_ledger("call set_value cut");
    gateway.kill();
    client.wait_for("the failed call", |l| l["step"] == "call");
    drop(client);

    // Restarted with an upstream that would answer at once: still nothing is sent again.
    sc.write_config(&Setup {
        listen: "127.0.0.1:0",
        lease: "1s",
        approval_wait: "20s",
        ..Setup::default()
    });
    let gateway = Gateway::start(&sc);
    let client = Client::http(
        Sdk::Python,
        &gateway,
        json!([call("set_value", json!({"value": "cut"}))]),
    );
    let lines = client.finish();
    let steps = steps_of(&lines);
    assert_eq!(
        result_text(steps[0]),
        (
            "set_value was claimed once (intent ".to_owned()
                + sc.approvals(&["show", &id])["intentDigest"]
                    .as_str()
                    .unwrap_or("")
                + ") and its effect is unknown: interrupted. It is never sent again; an operator reconciles it with evidence.",
            true
        ),
        "{lines:?}"
    );
    assert_eq!(sc.writes(), 1, "{:?}", sc.ledger());
    sc.assert_effect(&id, "unknown", 1);
    drop(gateway);
}

/// Acceptance 3: the upstream exits in the middle of the call. The effect is `unknown` (the
/// request was sent), kept with its claim; the same call again is answered from the store; the
/// gateway restarts the upstream for the next call.
#[test]
fn upstream_exits_mid_call_the_effect_is_unknown_and_kept() {
    let (sc, gateway) = served(
        "upstream-exit",
        Setup {
            scenario: "exit-on-call",
            ..Setup::default()
        },
    );
    let client = Client::http(
        Sdk::Node,
        &gateway,
        json!([
            call("set_value", json!({"value": "lost"})),
            call("set_value", json!({"value": "lost"})),
            call("get_value", json!({})),
        ]),
    );
    let id = sc.wait_pending();
    sc.approve(&id);
    let lines = client.finish();
    let steps = steps_of(&lines);
    assert_eq!(steps.len(), 3, "{lines:?}");
    assert_eq!(
        result_text(steps[0]),
        (
            "set_value was claimed once (approval approval-1) and its effect is unknown: mcp_connection_closed. It is never sent again; an operator reconciles it with evidence.".to_owned(),
            true
        )
    );
    let digest = sc.approvals(&["show", &id])["intentDigest"]
        .as_str()
        .expect("digest")
        .to_owned();
    assert_eq!(
        result_text(steps[1]),
        (
            format!("set_value was claimed once (intent {digest}) and its effect is unknown: mcp_connection_closed. It is never sent again; an operator reconciles it with evidence."),
            true
        )
    );
    // The upstream was started again for the read; the value it wrote before exiting is there.
    assert_eq!(
        steps[2]["result"]["structuredContent"],
        json!({"value": "lost"})
    );
    assert_eq!(sc.writes(), 1, "{:?}", sc.ledger());
    let ledger = sc.ledger();
    assert_eq!(
        ledger.iter().filter(|l| l.starts_with("started")).count(),
        2,
        "{ledger:?}"
    );
    sc.assert_effect(&id, "unknown", 1);
    drop(gateway);
}

/// Acceptance 3: the upstream's tool list changes between the approval and the dispatch. With
/// `on_catalog_change = "serve"` (definitions not pinned, as before issue 46; `pins.rs` has the
/// default) the gateway rediscovers and tells the downstream client (`list_changed`); the
/// approval prepared for the old binding is refused as a mismatch (recorded in the audit log)
/// and nothing is sent; calling again asks for a new approval, which is sent once.
#[test]
fn list_change_between_approval_and_dispatch_refuses_the_old_approval() {
    let (sc, gateway) = served(
        "list-change",
        Setup {
            approval_wait: "2s",
            on_catalog_change: "serve",
            ..Setup::default()
        },
    );
    let client = Client::http(
        Sdk::Python,
        &gateway,
        json!([call("set_value", json!({"value": "changed"}))]),
    );
    let lines = client.finish();
    assert_eq!(
        result_text(steps_of(&lines)[0]).0,
        format!(
            "set_value was not sent: approval approval-1 is pending (intent {}). Once it is decided (purra approvals approve approval-1), call set_value again with the same arguments: an approved call is sent once; a denied one is not sent, and the same call made again after a denial asks for a new approval.",
            sc.approvals(&["show", "approval-1"])["intentDigest"].as_str().unwrap_or("")
        )
    );
    sc.approve("approval-1");

    let mut client = Client::http(
        Sdk::Python,
        &gateway,
        json!([
            {"list": true},
            {"wait_list_changed": true},
            {"list": true},
            call("set_value", json!({"value": "changed"})),
        ]),
    );
    client.wait_for("the first list", |l| l["step"] == "list");
    sc.trigger_catalog_change();
    let lines = client.finish();
    let steps = steps_of(&lines);
    assert_eq!(steps.len(), 4, "{lines:?}");
    assert_eq!(steps[1]["step"], "list_changed");
    assert_eq!(
        steps[2]["tools"][1]["description"],
        format!(
            "Sets the stored value (revision 2)\n\n{}",
            purra_gateway::WRITE_WAITS
        )
        .as_str()
    );
    assert_eq!(
        result_text(steps[3]),
        (
            "set_value was not sent: approval approval-1 was for an earlier binding of the tool, which changed since (approval_mismatch); call set_value again to ask for a new approval".to_owned(),
            true
        )
    );
    assert_eq!(sc.writes(), 0, "{:?}", sc.ledger());
    let shown = sc.approvals(&["show", "approval-1"]);
    assert_eq!(shown["state"], "refused");
    assert_eq!(shown["dispatches"], 0);
    // The audit log says why: a binding mismatch, nothing started.
    let refusals: Vec<Value> = audit(&sc.db())
        .into_iter()
        .filter(|e| e.event == "refused" && e.approval_id.as_deref() == Some("approval-1"))
        .map(|e| e.detail)
        .collect();
    assert_eq!(refusals.len(), 1, "{refusals:?}");
    assert_eq!(refusals[0]["reason"], "mismatch");
    assert_eq!(refusals[0]["effect"], "not_started");
    assert_ne!(refusals[0]["currentIntent"], shown["intentDigest"]);

    // Again: a new approval for the new binding, sent once.
    let client = Client::http(
        Sdk::Python,
        &gateway,
        json!([call("set_value", json!({"value": "changed"}))]),
    );
    let id = sc.wait_pending();
    assert_eq!(id, "approval-2");
    sc.approve(&id);
    let lines = client.finish();
    assert_eq!(
        steps_of(&lines)[0]["result"]["structuredContent"],
        json!({"stored": "changed"}),
        "{lines:?}"
    );
    assert_eq!(sc.writes(), 1, "{:?}", sc.ledger());
    drop(gateway);
}

/// Acceptance 4: a configuration with every kind of mistake is refused before anything starts,
/// with one message per mistake naming the file, the line and the key.
#[test]
fn a_configuration_with_every_kind_of_mistake_is_refused_before_anything_starts() {
    let sc = Scenario::new("config");
    let upstream = peer(repo_root().join("peers/python/gateway_upstream.py"));
    let text = format!(
        r#"[gateway]
name = "gw"
db = "gateway.db"
aproval_wait = "30s"

[upstreams.values]
command = [{python:?}, {upstream:?}, "--dir", {dir:?}]

[reads.get_value]
upstream = "values"
tool = "get_valeu"
title = "Read the value"
scope = "open"

[writes.set_value]
upstream = "values"
title = "Set the value"
effect = "write"
binding_id = "values"
scope_id = "values"

[writes.set_value.scope]
arguments = ["len(value) <== 40"]
"#,
        python = python(),
        dir = sc.dir.to_string_lossy(),
    );
    std::fs::write(sc.config(), text).expect("config");
    let out = purra(&["gateway", "--config", &sc.config()]);
    assert_eq!(out.status.code(), Some(78));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    let file = sc.config();
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "purra: the configuration has 5 mistakes:
  {file}:4: gateway.aproval_wait: unknown key (expected one of: allowed_hosts, approval_request_ttl, approval_ttl, approval_wait, approvers_must_differ, apps, auth, credential_keys, db, drain_timeout, elicitation, lease, listen, max_calls_per_minute_per_caller, max_pending_per_caller, max_sessions, max_sessions_per_caller, name, on_catalog_change, principal, progress_interval, run_decided_without_caller, session_idle_timeout, sessions)
  {file}:11: reads.get_value.tool: upstream \"values\" has no tool \"get_valeu\" (it lists: get_value, set_value, admin_reset)
  {file}:15: writes.set_value.binding_revision: required: the binding's revision: change it whenever the authorization changes
  {file}:15: writes.set_value.scope_revision: required: the scope's revision: change it whenever the scope rules change
  {file}:23: writes.set_value.scope.arguments[0]: cannot parse \"len(value) <== 40\": unknown operator \"<==\" (expected ==, !=, <, <=, >, >=, in, not in, matches, starts_with, ends_with or within, followed by a space)
"
        )
    );
    // Nothing started: no store, and the upstream (asked only for its tool list) got no call.
    assert!(!sc.dir.join("gateway.db").exists());
    assert_eq!(sc.ledger(), ["started normal"]);
}

/// Finding 1 of issue 40: `--check` says what `apps` trusts over HTTP, and which writes a
/// client may decide, before anything is served.
#[test]
fn check_warns_what_apps_trusts_over_http() {
    let sc = Scenario::new("check-warns");
    sc.write_config(&Setup {
        listen: "127.0.0.1:0",
        apps: true,
        approval: "client",
        ..Setup::default()
    });
    let out = purra(&["gateway", "--config", &sc.config(), "--check"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "configuration ok: 2 tools: get_value, set_value\n"
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "purra gateway: warning: gateway.apps is on and clients connect over HTTP (127.0.0.1:0): it trusts every client's host to show the approval view to a person and to keep the app-only tool purra_approval from its model; a client that calls purra_approval itself decides its own write; writes whose binding says approval = \"client\" can be decided that way: set_value\n"
    );
}

/// Issue 43 finding 8: with `[gateway.auth]` on an HTTP listener, `--check` warns of a write
/// binding whose only caller rule is `clients` (a name the caller chooses), at its key and line.
#[test]
fn finding_8_check_warns_of_a_write_whose_only_caller_rule_is_clients() {
    let sc = Scenario::new("check-clients-only");
    sc.write_config(&Setup {
        listen: "127.0.0.1:0",
        ..Setup::default()
    });
    let mut text = std::fs::read_to_string(sc.config()).expect("config");
    text.push_str("\n[gateway.auth]\nissuer = \"https://issuer.example\"\n");
    std::fs::write(sc.config(), &text).expect("config");
    let line = 1 + text
        .lines()
        .position(|l| l.starts_with("clients = "))
        .expect("the clients line");
    let out = purra(&["gateway", "--config", &sc.config(), "--check"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "configuration ok: 2 tools: get_value, set_value\n"
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "purra gateway: warning: {}:{line}: writes.set_value.scope.clients: the write's only \
             caller rule is clients, and a client chooses its own name (clientInfo.name): any \
             caller with a valid token that gives one of these names passes; clients is not \
             authentication: name who may write with principals = [...] or with [policies] on \
             the token's claims\n",
            sc.config()
        )
    );
    // A principals rule beside it: no warning.
    let text = text.replace(
        "[writes.set_value.scope]\n",
        "[writes.set_value.scope]\nprincipals = [\"https://issuer.example#alice\"]\n",
    );
    std::fs::write(sc.config(), &text).expect("config");
    let out = purra(&["gateway", "--config", &sc.config(), "--check"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

/// Item 4 at `--check`: Cedar policies are validated against the schema of the tools the
/// upstream lists as bound; a policy naming a tool that is not bound or an argument the tool
/// does not take is a mistake at its policy file and line (exit 78, nothing served, no store);
/// valid ones are counted, and with `-v` the generated schema is printed.
#[test]
fn check_validates_policies_against_the_bound_tools() {
    let sc = Scenario::new("check-policies");
    sc.write_config(&Setup::default());
    let mut text = std::fs::read_to_string(sc.config()).expect("config");
    text.push_str("\n[policies]\nfiles = [\"access.cedar\"]\n");
    std::fs::write(sc.config(), text).expect("config");
    let policies = sc.dir.join("access.cedar");
    std::fs::write(
        &policies,
        "permit (principal, action, resource);\n\
         forbid (principal, action == Action::\"set_values\", resource);\n\
         forbid (principal, action == Action::\"set_value\", resource)\n  \
           when { context.arguments.val == \"x\" };\n",
    )
    .expect("policies");
    let out = purra(&["gateway", "--config", &sc.config(), "--check"]);
    assert_eq!(out.status.code(), Some(78), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    let file = policies.display();
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "purra: the configuration has 2 mistakes:
  {file}:2: unrecognized action `Action::\"set_values\"` (did you mean `Action::\"set_value\"`?)
  {file}:4: attribute `arguments.val` in context for Action::\"set_value\" not found (did you mean `value`?)
"
        )
    );
    assert!(!sc.dir.join("gateway.db").exists());

    std::fs::write(
        &policies,
        "permit (principal, action in Action::\"Read\", resource);\n\
         permit (principal, action == Action::\"set_value\", resource)\n  \
           unless { context.arguments.value like \"*<*\" };\n",
    )
    .expect("policies");
    let out = purra(&["gateway", "--config", &sc.config(), "--check"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "configuration ok: 2 tools: get_value, set_value\n\
         policies ok: 2 policies in 1 file, valid against the schema of the bound tools\n"
    );
    let out = purra(&["-v", "gateway", "--config", &sc.config(), "--check"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let shown = String::from_utf8_lossy(&out.stdout);
    for line in [
        "policies ok: 2 policies in 1 file, valid against the schema of the bound tools",
        "entity Tool enum [\"get_value\", \"set_value\"];",
        "action \"set_value\" in [Action::\"Write\"] appliesTo {",
        "    \"value\": String",
    ] {
        assert!(shown.lines().any(|l| l == line), "{line:?} in:\n{shown}");
    }
}

/// One HTTP/1.1 GET on a new connection to `authority`: the status line and the body.
fn status_and_body(authority: &str, path: &str) -> (String, String) {
    let answer = http_get(authority, path).expect("GET");
    let (head, body) = answer.split_once("\r\n\r\n").expect("a head");
    (
        head.lines().next().unwrap_or("").to_owned(),
        body.to_owned(),
    )
}

/// `SIGHUP` reloads the file while a write waits: a changed binding revision (checked first
/// with `--check`) tells the client to list again, on the same session, and the approval
/// prepared under the old revision is refused as a mismatch when it is approved, nothing sent;
/// a broken file, and one changing a key only a restart applies, are refused with their
/// mistakes and the running configuration serves on; the same call then asks for a new approval
/// and is sent once.
#[test]
fn sighup_reloads_a_changed_binding_and_refuses_a_broken_file() {
    let (sc, gateway) = served("reload", Setup::default());
    let mut client = Client::http(
        Sdk::Python,
        &gateway,
        json!([
            call("set_value", json!({"value": "r"})),
            call("get_value", json!({}))
        ]),
    );
    let id = sc.wait_pending();
    let next = Setup {
        listen: "127.0.0.1:0",
        binding_revision: "2",
        ..Setup::default()
    };
    sc.write_config(&next);
    let check = purra(&["gateway", "--check", "--config", &sc.config()]);
    assert_eq!(
        (
            check.status.code(),
            String::from_utf8_lossy(&check.stdout).into_owned()
        ),
        (
            Some(0),
            "configuration ok: 2 tools: get_value, set_value\n".to_owned()
        ),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    gateway.signal("HUP");
    assert_eq!(
        gateway.wait_line("purra gateway: reload"),
        format!(
            "purra gateway: reloaded {}: revision 2: 2 tools (get_value, set_value); changed: set_value; added: none; removed: none",
            sc.config()
        )
    );
    client.wait_for("list_changed", |l| l["event"] == "list_changed");
    sc.approve(&id);
    let lines = client.finish();
    let steps = steps_of(&lines);
    assert_eq!(steps.len(), 2, "{lines:?}");
    assert_eq!(
        result_text(steps[0]),
        (
            format!("set_value was not sent: approval {id} was for an earlier binding of the tool, which changed since (approval_mismatch); call set_value again to ask for a new approval"),
            true
        )
    );
    // The same session goes on.
    assert_eq!(
        steps[1]["result"]["structuredContent"],
        json!({"value": ""}),
        "{lines:?}"
    );
    assert_eq!(sc.writes(), 0, "{:?}", sc.ledger());
    assert_eq!(sc.approvals(&["show", &id])["state"], "refused");

    // A broken file: refused with its mistake; revision 2 serves on.
    std::fs::write(sc.config(), "[gateway\nname = \"gw\"\n").expect("write");
    gateway.signal("HUP");
    assert_eq!(
        gateway.wait_line("purra gateway: reload"),
        format!(
            "purra gateway: reload of {} refused; revision 2 keeps serving: the configuration has 1 mistake:",
            sc.config()
        )
    );
    let mistake = gateway.wait_line("  ");
    assert!(
        mistake.starts_with(&format!("  {}:1: ", sc.config())),
        "{mistake}"
    );
    // A key only a restart applies: refused by name.
    sc.write_config(&Setup {
        approval_wait: "30s",
        ..next.clone()
    });
    gateway.signal("HUP");
    gateway.wait_line("purra gateway: reload of");
    let mistake = gateway.wait_line("  ");
    assert!(
        mistake.ends_with(
            ": gateway.approval_wait: cannot change while the gateway runs: it is read once at start; restart the gateway to apply it (SIGTERM drains it first)"
        ),
        "{mistake}"
    );

    // The same call again: a new approval, for revision 2, sent once.
    let client = Client::http(
        Sdk::Python,
        &gateway,
        json!([call("set_value", json!({"value": "r"}))]),
    );
    let again = sc.wait_pending();
    assert_ne!(again, id);
    sc.approve(&again);
    let lines = client.finish();
    assert_eq!(
        steps_of(&lines)[0]["result"]["structuredContent"],
        json!({"stored": "r"}),
        "{lines:?}"
    );
    assert_eq!(sc.writes(), 1, "{:?}", sc.ledger());
    drop(gateway);
}

/// Finding 3 of issue 43, end to end: a Python SDK client waits on a write; the file is rewritten
/// to drop that client from the binding's `clients` (the same `scope_revision`), `SIGHUP`, then
/// an operator approves: the caller gets the mismatch refusal, the upstream's ledger records no
/// write, the approval is refused in the store; a new call by the same client is refused
/// `scope_denied`.
#[test]
fn finding_3_sighup_dropping_the_waiting_client_sends_nothing() {
    let (sc, gateway) = served("revoked", Setup::default());
    let mut client = Client::http(
        Sdk::Python,
        &gateway,
        json!([
            call("set_value", json!({"value": "r"})),
            call("set_value", json!({"value": "r"}))
        ]),
    );
    let id = sc.wait_pending();
    let before = std::fs::read_to_string(sc.config()).expect("read");
    let dropped = before.replace(
        r#"clients = ["gateway-client-python", "gateway-client-node"]"#,
        r#"clients = ["gateway-client-node"]"#,
    );
    assert_ne!(before, dropped);
    std::fs::write(sc.config(), dropped).expect("write");
    gateway.signal("HUP");
    assert_eq!(
        gateway.wait_line("purra gateway: reload"),
        format!(
            "purra gateway: reloaded {}: revision 2: 2 tools (get_value, set_value); changed: set_value; added: none; removed: none",
            sc.config()
        )
    );
    client.wait_for("list_changed", |l| l["event"] == "list_changed");
    sc.approve(&id);
    let lines = client.finish();
    let steps = steps_of(&lines);
    assert_eq!(steps.len(), 2, "{lines:?}");
    assert_eq!(
        result_text(steps[0]),
        (
            format!("set_value was not sent: approval {id} was for an earlier binding of the tool, which changed since (approval_mismatch); call set_value again to ask for a new approval"),
            true
        )
    );
    assert_eq!(
        result_text(steps[1]),
        (
            "set_value failed: scope_denied (nothing was sent: the caller's client name is not one of scope.clients)".to_owned(),
            true
        )
    );
    assert_eq!(sc.writes(), 0, "{:?}", sc.ledger());
    assert_eq!(sc.approvals(&["show", &id])["state"], "refused");
    drop(gateway);
}

/// `SIGTERM` drains: the write waiting for its decision is answered as pending at once, `/readyz`
/// says 503 (draining) while `/healthz` still says the process is up, a new call is refused with
/// nothing sent, the dispatch in flight finishes with its receipt, and the gateway exits 0.
#[test]
fn sigterm_drains_and_exits_once_the_dispatch_in_flight_is_done() {
    let (sc, mut gateway) = served(
        "drain",
        Setup {
            scenario: "hold-write",
            ..Setup::default()
        },
    );
    let sending = Client::http(
        Sdk::Python,
        &gateway,
        json!([call("set_value", json!({"value": "sent"}))]),
    );
    let sent = sc.wait_pending();
    sc.approve(&sent);
    sc.wait_ledger("call set_value sent");
    let waiting = Client::http(
        Sdk::Python,
        &gateway,
        json!([call("set_value", json!({"value": "waits"}))]),
    );
    let pending = sc.wait_pending();
    assert_ne!(pending, sent);

    gateway.signal("TERM");
    assert_eq!(
        gateway.wait_line("purra gateway: draining"),
        "purra gateway: draining: no new calls; waiting writes are answered as pending; 2 calls and 1 dispatches in flight, waited for at most 30s"
    );
    let lines = waiting.finish();
    assert_eq!(
        result_text(steps_of(&lines)[0]),
        (pending_text(&sc, &pending), true)
    );
    let authority = gateway.authority();
    assert_eq!(
        status_and_body(&authority, "/readyz"),
        (
            "HTTP/1.1 503 Service Unavailable".to_owned(),
            r#"{"ready":false}"#.to_owned()
        )
    );
    assert_eq!(
        status_and_body(&authority, "/healthz"),
        ("HTTP/1.1 200 OK".to_owned(), "ok\n".to_owned())
    );
    let lines = Client::http(Sdk::Python, &gateway, json!([call("get_value", json!({}))])).finish();
    assert_eq!(
        result_text(steps_of(&lines)[0]),
        (
            "get_value failed: gateway_stopping (nothing was sent)".to_owned(),
            true
        )
    );

    std::fs::write(sc.dir.join("release-write"), "").expect("release");
    let lines = sending.finish();
    assert_eq!(steps_of(&lines).len(), 1, "{lines:?}");
    assert_eq!(
        steps_of(&lines)[0]["result"]["structuredContent"],
        json!({"stored": "sent"}),
        "{lines:?}"
    );
    assert_eq!(
        gateway.wait_line("purra gateway: drained"),
        "purra gateway: drained"
    );
    let start = Instant::now();
    let status = loop {
        if let Some(status) = gateway.child.0.try_wait().expect("wait") {
            break status;
        }
        assert!(start.elapsed() < LIMIT, "the gateway did not exit");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0));
    sc.assert_effect(&sent, "committed", 1);
    assert_eq!(sc.approvals(&["show", &pending])["state"], "pending");
    assert_eq!(sc.writes(), 1, "{:?}", sc.ledger());
}
