//! A held write's stream outlives its instance (issue 48): HAProxy in plain round robin in front
//! of three instances on PostgreSQL, the official TypeScript SDK client
//! (`peers/node/resume_client.mjs`) calling a write bound `approval = "operator"` with
//! `onprogress`. The instance holding the waiting call is SIGKILLed, or stopped as a deploy does
//! (SIGTERM, then started again); the client resumes the call's stream with `Last-Event-ID` at
//! another instance, with no new `initialize`; that instance takes the call over (its lease ran
//! out, or was released by the drain), so progress emitted after the stop reaches the client;
//! `purra approvals approve` decides, and the call completes with the upstream's result, one
//! write at the upstream.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{config_text, writes_of, Fleet};
use crate::support::peers::{lines_of, node, peer, repo_root};
use crate::support::run::LIMIT;

/// The fleet's configuration with the write decided by an operator only, for this client.
fn operator_config(db: &str, port: u16, upstream: &str) -> String {
    config_text(db, port, upstream)
        .replace("approval = \"client\"", "approval = \"operator\"")
        .replace(
            "clients = [\"gateway-client-python\"]",
            "clients = [\"gateway-client-python\", \"resume-client-node\"]",
        )
}

/// How the instance holding the call goes away.
#[derive(Clone, Copy, PartialEq)]
enum Stop {
    /// SIGKILL: no cleanup; another instance takes over once the stream's lease ran out.
    Kill,
    /// SIGTERM, then the instance starts again (same configuration), as a deploy does: the
    /// drain releases the stream's lease and ends its connection.
    Deploy,
}

/// The client's lines, as they come.
struct Lines {
    rx: std::sync::mpsc::Receiver<Value>,
    seen: Vec<Value>,
}

impl Lines {
    /// Waits for a line matching `pred` among those after the first `from`; its index.
    fn wait_for(&mut self, what: &str, from: usize, pred: impl Fn(&Value) -> bool) -> usize {
        if let Some(i) = self.seen.iter().skip(from).position(&pred) {
            return from + i;
        }
        let start = Instant::now();
        loop {
            let v = self
                .rx
                .recv_timeout(LIMIT.saturating_sub(start.elapsed()))
                .unwrap_or_else(|_| panic!("the client printed no {what}: {:?}", self.seen));
            assert_ne!(v["event"], "failed", "{v}");
            self.seen.push(v);
            if pred(self.seen.last().unwrap_or(&Value::Null)) {
                return self.seen.len() - 1;
            }
        }
    }
}

/// `peers/node/resume_client.mjs` calling `set_value {value}` through the fleet's balancer,
/// with `extra` arguments; the process and its lines.
fn resume_client(fleet: &Fleet, value: &str, extra: &[&str]) -> (std::process::Child, Lines) {
    let mut child = Command::new(node())
        .arg(peer(repo_root().join("peers/node/resume_client.mjs")))
        .args(["--url", &fleet.url, "--tool", "set_value"])
        .args(["--args", &json!({"value": value}).to_string()])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the resume client");
    let rx = lines_of(child.stdout.take().expect("stdout"), |line| {
        eprintln!("[client] {line}");
        Some(
            serde_json::from_str::<Value>(&line)
                .unwrap_or_else(|e| panic!("the client printed non-JSON ({e}): {line}")),
        )
    });
    let lines = Lines {
        rx,
        seen: Vec::new(),
    };
    (child, lines)
}

fn held_call_survives(stop: Stop) {
    let name = if stop == Stop::Kill {
        "resume_kill"
    } else {
        "resume_deploy"
    };
    let value = format!("{name}-value");
    let mut fleet = Fleet::start_with(name, false, operator_config);
    let (mut child, mut lines) = resume_client(&fleet, &value, &[]);

    // The call waits: two progress notifications, on the stream of the instance holding it.
    let first = lines.wait_for("progress", 0, |l| l["event"] == "progress");
    lines.wait_for("more progress", first + 1, |l| l["event"] == "progress");
    let holder = lines
        .seen
        .iter()
        .find(|l| l["event"] == "http" && l["call"] == true)
        .and_then(|l| l["instance"].as_str())
        .expect("the instance serving the call")
        .to_owned();
    let approval = super::approval_of(&lines.seen[first]);
    let i = fleet.index_of(&holder);
    let stopped_at = lines.seen.len();
    match stop {
        Stop::Kill => fleet.instances[i].kill(),
        Stop::Deploy => {
            let pid = fleet.instances[i].child.as_ref().expect("running").id();
            let status = Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status()
                .expect("kill -TERM");
            assert!(status.success());
            let mut c = fleet.instances[i].child.take().expect("running");
            c.wait().expect("the instance stops");
            // It said it hands the waiting write over rather than answering it pending.
            let said: Vec<String> = fleet.instances[i]
                .lines
                .take()
                .map(|rx| rx.iter().collect())
                .unwrap_or_default();
            assert!(
                said.iter().any(|l| l.starts_with(
                    "purra gateway: draining: no new calls; waiting writes on SSE streams are \
                     handed over to the fleet's other instances, the others answered as pending; "
                )),
                "{said:?}"
            );
        }
    }

    // The client resumes with Last-Event-ID at another instance, which goes on with the call:
    // a progress notification of its wait (from 0 s again) comes after the stop.
    let resumed = lines.wait_for("a resumed stream", stopped_at, |l| {
        l["event"] == "http"
            && l["method"] == "GET"
            && l["status"] == 200
            && l["last_event_id"].is_string()
            && l["instance"].as_str().is_some_and(|i| i != holder)
    });
    let fresh = lines.wait_for("progress after the stop", resumed, |l| {
        l["event"] == "progress"
            && l["message"]
                .as_str()
                .is_some_and(|m| m.starts_with(&format!("waiting for approval {approval}: 0 s")))
    });
    assert!(fresh > stopped_at);
    if stop == Stop::Deploy {
        // The deploy starts the instance again, same configuration.
        fleet.instances[i].start();
        super::wait_ready(fleet.instances[i].port);
    }
    assert_eq!(writes_of(&fleet.upstream, &value), 0);

    fleet.approvals(&["approve", &approval, "--approver", "ada"]);
    let done = lines.wait_for("the result", fresh, |l| l["event"] == "result");
    let done = lines.seen[done].clone();
    assert_eq!(done["initializes"], 1, "{done}");
    assert_ne!(done["result"]["isError"], true, "{done}");
    assert_eq!(
        done["result"]["structuredContent"],
        json!({"stored": value}),
        "{done}"
    );
    // One write at the upstream, after the decision; no other approval was asked for.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(writes_of(&fleet.upstream, &value), 1);
    let list = fleet.approvals(&["list"]);
    assert_eq!(
        list["approvals"].as_array().map(Vec::len),
        Some(1),
        "one approval: {list}"
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// Acceptance (issue 48): the instance holding a waiting write is SIGKILLed; the TypeScript
/// SDK client's stream resumes at another instance, which takes the call over once the lease
/// ran out; the approval completes it, one write at the upstream.
#[test]
fn a_held_call_survives_its_instance_killed() {
    held_call_survives(Stop::Kill);
}

/// Acceptance (issue 48): the same with a deploy-style restart (SIGTERM, then the instance
/// starts again): the drain hands the call's stream over instead of answering "pending".
#[test]
fn a_held_call_survives_a_deploy_restart() {
    held_call_survives(Stop::Deploy);
}

/// Acceptance (issue 48): notifications sent while the client was reconnecting are delivered
/// after `Last-Event-ID`. The TypeScript SDK client breaks the held call's stream itself after
/// its second progress notification (the instance holding the call goes on, sending progress
/// every second), waits 3.5 s, and resumes straight at another instance. That instance replays
/// from the store what the holder sent meanwhile, with no event missing, and follows the
/// holder's stream; the approval completes the call there, one write at the upstream.
#[test]
fn notifications_sent_while_the_client_reconnects_arrive_after_last_event_id() {
    let value = "resume_gap-value";
    let fleet = Fleet::start_with("resume_gap", false, operator_config);
    let instances: Vec<String> = fleet
        .instances
        .iter()
        .map(|i| format!("{}=http://127.0.0.1:{}/mcp", i.name, i.port))
        .collect();
    let (mut child, mut lines) = resume_client(
        &fleet,
        value,
        &[
            "--drop-after",
            "2",
            "--gap-ms",
            "3500",
            "--instances",
            &instances.join(","),
        ],
    );
    let dropped = lines.wait_for("the broken stream", 0, |l| l["event"] == "dropped");
    let holder = lines
        .seen
        .iter()
        .find(|l| l["event"] == "http" && l["call"] == true)
        .and_then(|l| l["instance"].as_str())
        .expect("the instance serving the call")
        .to_owned();
    // The resuming GET goes to another instance, with the last event id the client saw.
    let resumed = lines.wait_for("the resumed stream", dropped, |l| {
        l["event"] == "http" && l["method"] == "GET" && l["last_event_id"].is_string()
    });
    let before: Vec<&Value> = lines.seen[..resumed]
        .iter()
        .filter(|l| l["event"] == "progress")
        .collect();
    assert_eq!(before.len(), 2, "{:?}", lines.seen);
    let approval = super::approval_of(before[1]);
    let last_before = before[1]["progress"].as_u64().expect("a whole second");
    let other = fleet
        .instances
        .iter()
        .find(|i| i.name != holder)
        .expect("another instance");
    assert_eq!(
        (
            lines.seen[resumed]["status"].clone(),
            lines.seen[resumed]["host"].clone()
        ),
        (json!(200), json!(format!("127.0.0.1:{}", other.port))),
        "{:?}",
        lines.seen
    );
    // Five seconds of progress arrive after the resume: those the holder sent during the gap
    // (replayed from the store) and those after (followed). None is missing: each second
    // follows the one before, from the one after the last seen before the break.
    let mut after = Vec::new();
    let mut at = resumed;
    while after.len() < 5 {
        at = lines.wait_for("progress after the resume", at + 1, |l| {
            l["event"] == "progress"
        });
        after.push(lines.seen[at]["progress"].as_u64().expect("a whole second"));
    }
    let expected: Vec<u64> = (last_before + 1..last_before + 6).collect();
    assert_eq!(after, expected, "{:?}", lines.seen);
    assert_eq!(writes_of(&fleet.upstream, value), 0);

    // The holder is alive and still holds the call: the decision completes it, once.
    assert!(fleet.instances[fleet.index_of(&holder)].alive());
    fleet.approvals(&["approve", &approval, "--approver", "ada"]);
    let done = lines.wait_for("the result", at, |l| l["event"] == "result");
    let done = lines.seen[done].clone();
    assert_eq!(done["initializes"], 1, "{done}");
    assert_eq!(
        done["result"]["structuredContent"],
        json!({"stored": value}),
        "{done}"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(writes_of(&fleet.upstream, value), 1);
    let _ = child.kill();
    let _ = child.wait();
}

/// The resource every instance of the guarded fleet names in its metadata (tokens are for it).
const GUARDED_RESOURCE: &str = "http://mcp.fleet.test/mcp";

/// The fleet's configuration with `[gateway.auth]`: callers need a token of the test's
/// authorization server (oidc-provider) for [`GUARDED_RESOURCE`], on every instance.
fn guarded_config(db: &str, port: u16, upstream: &str) -> String {
    format!(
        "{}\n[gateway.auth]\nissuer = {:?}\nresource = {GUARDED_RESOURCE:?}\n",
        operator_config(db, port, upstream),
        crate::support::peers::oidc_issuer()
    )
}

/// Acceptance (issue 48): a session resumed with another principal's token is refused. Alice
/// opens a session at one instance of a guarded fleet (real tokens from oidc-provider); bob,
/// with his own valid token and her session id, is answered as for an unknown session at an
/// instance that does not hold it yet (the resume path) and at one that does, and nothing of
/// hers moves: her session goes on at every instance without a new `initialize`.
#[test]
fn a_session_resumed_with_another_principal_s_token_is_refused() {
    let fleet = Fleet::start_with("resume_principal", false, guarded_config);
    let issuer = crate::support::peers::oidc_issuer();
    let alice = crate::support::peers::token_for(issuer, "alice", GUARDED_RESOURCE);
    let bob = crate::support::peers::token_for(issuer, "bob", GUARDED_RESOURCE);
    let at = |i: usize| format!("http://127.0.0.1:{}/mcp", fleet.instances[i].port);
    let post = crate::support::run::bearer_post;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}})
    .to_string();
    let r = post(&at(0), &alice, None, &init);
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.header("mcp-session-id").expect("a session").to_owned();
    let done = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    assert_eq!(post(&at(0), &alice, Some(&id), done).status, 202);
    let ping = |i: usize, token: &str| {
        let r = post(
            &at(i),
            token,
            Some(&id),
            r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#,
        );
        (r.status, r.body)
    };
    let unknown = (
        404,
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Not Found: unknown or expired session"}}"#
            .to_owned(),
    );
    // At the second instance, which has never served it: bob first, then alice resumes it.
    assert_eq!(ping(1, &bob), unknown, "bob at an instance resuming it");
    assert_eq!(ping(1, &alice).0, 200, "alice resumes her session there");
    assert_eq!(ping(1, &bob), unknown, "bob at an instance holding it");
    assert_eq!(ping(0, &bob), unknown, "bob where it began");
    // The third instance, and the first again: alice's session is intact everywhere.
    assert_eq!(ping(2, &bob), unknown);
    assert_eq!((ping(2, &alice).0, ping(0, &alice).0), (200, 200));
}

/// The fleet's configuration with `sessions = "process"`.
fn process_config(db: &str, port: u16, upstream: &str) -> String {
    config_text(db, port, upstream).replacen(
        "[gateway]\n",
        "[gateway]\nsessions = \"process\"\n",
        1,
    )
}

/// `[gateway] sessions = "process"`: a session lives in the process that opened it (no store
/// round trip per request; a fleet needs sticky routing): another instance of the same store
/// answers it as unknown, while the one holding it serves it.
#[test]
fn sessions_kept_in_the_process_stay_with_their_instance() {
    let fleet = Fleet::start_with("resume_process", true, process_config);
    let at = |i: usize| format!("http://127.0.0.1:{}/mcp", fleet.instances[i].port);
    let post = |i: usize, session: Option<&str>, body: &str| {
        let mut h = vec![
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
        ];
        if let Some(id) = session {
            h.push(("mcp-session-id", id));
            h.push(("mcp-protocol-version", "2025-11-25"));
        }
        crate::support::run::http("POST", &at(i), &h, body)
    };
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}})
    .to_string();
    let r = post(0, None, &init);
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.header("mcp-session-id").expect("a session").to_owned();
    let done = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    assert_eq!(post(0, Some(&id), done).status, 202);
    let ping = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
    assert_eq!(post(1, Some(&id), ping).status, 404, "not in the store");
    assert_eq!(post(2, Some(&id), ping).status, 404);
    assert_eq!(
        post(0, Some(&id), ping).status,
        200,
        "served where it lives"
    );
}
