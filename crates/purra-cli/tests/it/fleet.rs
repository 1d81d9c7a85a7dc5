//! A fleet of `purra gateway` instances behind a real load balancer on one PostgreSQL store, as a
//! team that outgrew one machine runs them: three instances on Streamable HTTP, each with its
//! approver page, behind Debian's HAProxy (`scripts/haproxy.sh`; sessions sticky by
//! `Mcp-Session-Id`, health checked on `/readyz`), one upstream written with the official Python
//! SDK whose fsynced ledger counts every request it received (`peers/python/gateway_upstream.py`
//! over HTTP, so the whole fleet shares it), and the official Python SDK as the client
//! (`peers/python/fleet_client.py`, which follows the specification's rule: a 404 for its session
//! means a new session, then the call again).
//!
//! - 100 rounds (`PURRA_FLEET_ROUNDS`; the seed is printed, `PURRA_FLEET_SEED` replays one): a
//!   write waits on the instance the client's session lives on; that instance is killed with
//!   SIGKILL at a random point (while the write waits, or after the approval made on another
//!   instance's page, while it may be claiming, sending or recording); the client repeats the
//!   call on its session (kept in the store, so a live instance serves it). Each round: at most
//!   one request at the upstream; the answer is the store's outcome (the receipt, or `unknown`
//!   once the dead instance's lease lapsed); a kill while waiting always ends with one request
//!   and the receipt, on the same session (no new `initialize`); every `unknown` effect is in
//!   `purra approvals list`.
//! - A decision on any instance (its page, `purra approvals approve`, a client's elicitation on
//!   another instance) wakes the call waiting on another (PostgreSQL's `LISTEN`).
//! - Stateless 2026-07-28 requests go to any instance, and a write repeated on another instance
//!   finds its receipt.
//! - With HAProxy in plain round robin (no stickiness; sessions in the store): one session of
//!   the Python SDK client (`peers/python/session_fleet_client.py`) makes 1 000 reads spread over
//!   every instance with one `initialize`, and goes on at the others when one is SIGKILLed.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::support::peers;
use crate::support::peers::{free_port, HttpUpstream};
use crate::support::run::{approvals_json, dechunk, purra_bin, result_text, LIMIT};

use peers::{fresh_dir, lines_of, peer, postgres_url, python, repo_root};

mod resume;

/// Debian's haproxy: `PURRA_HAPROXY`, else on PATH, else where Debian puts it.
fn haproxy_bin() -> String {
    if let Some(p) = std::env::var_os("PURRA_HAPROXY") {
        return p.to_string_lossy().into_owned();
    }
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|d| d.join("haproxy"))
        .chain([PathBuf::from("/usr/sbin/haproxy")])
        .find(|p| p.exists());
    on_path
        .unwrap_or_else(|| {
            panic!(
                "haproxy is missing: run scripts/setup-peers.sh (scripts/haproxy.sh installs it)"
            )
        })
        .to_string_lossy()
        .into_owned()
}

/// A small deterministic generator (splitmix64) for the kill points.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// How many `set_value` requests for `value` reached `upstream`.
fn writes_of(upstream: &HttpUpstream, value: &str) -> usize {
    upstream.writes().iter().filter(|v| *v == value).count()
}

/// One `purra gateway` instance: its MCP port, its page, its process while it runs.
struct Instance {
    name: String,
    port: u16,
    page: u16,
    config: PathBuf,
    child: Option<Child>,
    /// The page's sign-in token of this process, and the session cookie once signed in.
    token: String,
    cookie: Option<String>,
    /// What the running process printed on stderr.
    lines: Option<Receiver<String>>,
}

impl Instance {
    /// Starts the process and waits until it serves. A port freed by a killed instance can be
    /// held for a moment by another socket (an outbound connection's local port is taken from
    /// the same range): the process then refuses to start ("is in use") and is started again.
    fn start(&mut self) {
        let start = Instant::now();
        loop {
            match self.try_start(start) {
                Ok(()) => return,
                Err(why) => {
                    assert!(
                        start.elapsed() < LIMIT,
                        "{} did not start: {why}",
                        self.name
                    );
                    std::thread::sleep(Duration::from_millis(250));
                }
            }
        }
    }

    /// One start; `Err` with the line that said the address is in use, or a panic for any
    /// other failure.
    fn try_start(&mut self, start: Instant) -> Result<(), String> {
        let mut child = Command::new(purra_bin())
            .args(["gateway", "--config", &self.config.to_string_lossy()])
            .args(["--page", &format!("127.0.0.1:{}", self.page)])
            .args(["--page-approver", "ada"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn gateway");
        let name = self.name.clone();
        let rx = lines_of(child.stderr.take().expect("stderr"), move |line| {
            eprintln!("[{name}] {line}");
            Some(line)
        });
        let mut token = None;
        let mut in_use = None;
        loop {
            let line = match rx.recv_timeout(LIMIT.saturating_sub(start.elapsed())) {
                Ok(line) => line,
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    match in_use {
                        Some(line) => return Err(line),
                        None => panic!("{} did not say where it serves", self.name),
                    }
                }
            };
            if line.contains(" is in use (another process listens on it") {
                in_use = Some(line.clone());
            }
            if let Some(t) = line.strip_prefix("purra gateway: sign-in token for ada: ") {
                token = Some(t.to_owned());
            }
            if line.starts_with("purra gateway: serving ") {
                break;
            }
        }
        self.token = token.expect("a sign-in token");
        self.cookie = None;
        self.child = Some(child);
        self.lines = Some(rx);
        Ok(())
    }

    /// SIGKILL: no cleanup of any kind.
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn alive(&self) -> bool {
        self.child.is_some()
    }

    /// One request to the page; the whole answer.
    fn page_request(&self, head: &str, body: &str) -> String {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.page)).expect("connect");
        write!(
            s,
            "{head}\r\nHost: 127.0.0.1:{}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.page,
            body.len()
        )
        .expect("write");
        let mut answer = String::new();
        s.read_to_string(&mut answer).expect("read");
        answer
    }

    /// Approves `id` on this instance's approver page as `ada`, as a browser would (sign-in
    /// cookie, the form's CSRF token).
    fn approve_on_page(&mut self, id: &str) {
        if self.cookie.is_none() {
            let answer = self.page_request(
                "POST /login HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded",
                &format!("token={}", self.token),
            );
            let cookie = answer
                .lines()
                .find_map(|l| l.strip_prefix("set-cookie: "))
                .and_then(|c| c.split(';').next())
                .unwrap_or_else(|| panic!("no cookie: {answer}"))
                .to_owned();
            self.cookie = Some(cookie);
        }
        let cookie = self.cookie.clone().unwrap_or_default();
        let page = self.page_request(
            &format!("GET /approvals/{id} HTTP/1.1\r\nCookie: {cookie}"),
            "",
        );
        let csrf = page
            .split("name=\"csrf\" value=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or_else(|| panic!("no CSRF token on the page: {page}"))
            .to_owned();
        let answer = self.page_request(
            &format!(
                "POST /approvals/{id}/decide HTTP/1.1\r\nCookie: {cookie}\r\n\
                 Accept: application/json\r\nContent-Type: application/x-www-form-urlencoded"
            ),
            &format!("csrf={csrf}&verdict=approve"),
        );
        assert!(
            answer.starts_with("HTTP/1.1 200 OK\r\n")
                && answer.ends_with(&format!(
                    "{{\"ok\":true,\"message\":\"{id} approved by ada\"}}"
                )),
            "{}: {answer}",
            self.name
        );
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Three instances, HAProxy in front, the upstream, one fresh schema of the test server.
struct Fleet {
    dir: PathBuf,
    db: String,
    upstream: HttpUpstream,
    instances: Vec<Instance>,
    haproxy: Child,
    url: String,
}

impl Drop for Fleet {
    fn drop(&mut self) {
        let _ = self.haproxy.kill();
        let _ = self.haproxy.wait();
        for i in &mut self.instances {
            i.kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Fleet {
    /// The fleet with HAProxy sticky by `Mcp-Session-Id`.
    fn new(name: &str) -> Fleet {
        Fleet::start(name, true)
    }

    /// The fleet with HAProxy sticky by `Mcp-Session-Id` or (`sticky` false) in plain round
    /// robin: every request to the next live instance.
    fn start(name: &str, sticky: bool) -> Fleet {
        Fleet::start_with(name, sticky, config_text)
    }

    /// [`Fleet::start`] with each instance's configuration written by `config` (database,
    /// port, upstream URL).
    fn start_with(name: &str, sticky: bool, config: fn(&str, u16, &str) -> String) -> Fleet {
        let dir = fresh_dir("fleet", name);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() % 1_000_000_000);
        let db = format!(
            "{}?schema=fleet_{name}_{}_{nanos}",
            postgres_url(),
            std::process::id()
        );
        let upstream = HttpUpstream::start(&dir, &["--write-delay-ms", "150"]);
        let mut instances = Vec::new();
        for n in 1..=3 {
            let port = free_port();
            let file = dir.join(format!("g{n}.toml"));
            std::fs::write(&file, config(&db, port, &upstream.url)).expect("config");
            instances.push(Instance {
                name: format!("g{n}"),
                port,
                page: free_port(),
                config: file,
                child: None,
                token: String::new(),
                cookie: None,
                lines: None,
            });
        }
        // The first instance migrates the schema; the others find it.
        for i in &mut instances {
            i.start();
        }
        let lb = free_port();
        let cfg = dir.join("haproxy.cfg");
        std::fs::write(&cfg, haproxy_config(lb, &instances, sticky)).expect("haproxy.cfg");
        let check = Command::new(haproxy_bin())
            .args(["-c", "-q", "-f", &cfg.to_string_lossy()])
            .output()
            .expect("haproxy -c");
        assert!(
            check.status.success(),
            "{}",
            String::from_utf8_lossy(&check.stderr)
        );
        let haproxy = Command::new(haproxy_bin())
            .args(["-db", "-f", &cfg.to_string_lossy()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn haproxy");
        let fleet = Fleet {
            dir,
            db,
            upstream,
            instances,
            haproxy,
            url: format!("http://127.0.0.1:{lb}/mcp"),
        };
        // Every instance answers /readyz through its own port, and HAProxy listens.
        for i in &fleet.instances {
            wait_ready(i.port);
        }
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", lb)).is_err() {
            assert!(start.elapsed() < LIMIT, "haproxy does not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        fleet
    }

    fn index_of(&self, instance: &str) -> usize {
        self.instances
            .iter()
            .position(|i| i.name == instance)
            .unwrap_or_else(|| panic!("no instance {instance:?}"))
    }

    /// `purra approvals ARGS --db DB --json`.
    fn approvals(&self, args: &[&str]) -> Value {
        approvals_json(&self.db, args)
    }
}

/// One instance's configuration: the same for all but the address.
fn config_text(db: &str, port: u16, upstream: &str) -> String {
    format!(
        r#"[gateway]
name = "fleet"
db = "{db}"
listen = "127.0.0.1:{port}"
approval_wait = "60s"
progress_interval = "1s"
# A short lease: a killed instance's claim is recovered within seconds.
lease = "2s"
elicitation = true
drain_timeout = "5s"

[upstreams.values]
url = "{upstream}"

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
binding_revision = "1"
scope_id = "values-clients"
scope_revision = "1"
# The client's own user may decide too (by elicitation); the pages decide any write.
approval = "client"

[writes.set_value.scope]
clients = ["gateway-client-python"]
"#
    )
}

/// HAProxy in front of the instances: with `sticky`, sessions sticky by `Mcp-Session-Id` (stored
/// from the `initialize` answer, matched on every request), requests without one (a new session,
/// a stateless 2026-07-28 request) round robin; without, every request round robin; `/readyz` checked every 200 ms, an instance down
/// after two failures (or at once when it refuses connections: redispatched); the serving
/// instance named in `X-Purra-Instance` for the test.
fn haproxy_config(port: u16, instances: &[Instance], sticky: bool) -> String {
    let stick = if sticky {
        "    stick-table type string len 128 size 100k expire 30m
    stick match req.hdr(Mcp-Session-Id)
    stick store-response res.hdr(Mcp-Session-Id)
"
    } else {
        ""
    };
    let mut servers = String::new();
    for i in instances {
        servers.push_str(&format!(
            "    server {} 127.0.0.1:{} check\n",
            i.name, i.port
        ));
    }
    format!(
        "global
    maxconn 4096

defaults
    mode http
    timeout connect 1s
    timeout client 300s
    timeout server 300s
    timeout http-keep-alive 10s
    timeout check 3s
    option redispatch 1
    retries 2

listen mcp
    bind 127.0.0.1:{port}
    balance roundrobin
{stick}    option httpchk GET /readyz
    http-check expect status 200
    default-server inter 200ms fall 2 rise 1
    http-response set-header X-Purra-Instance %s
{servers}"
    )
}

/// Waits until the instance on `port` answers `/readyz` with 200.
fn wait_ready(port: u16) {
    let start = Instant::now();
    loop {
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            let _ = write!(
                s,
                "GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
            );
            let mut answer = String::new();
            let _ = s.read_to_string(&mut answer);
            if answer.starts_with("HTTP/1.1 200 OK") {
                return;
            }
        }
        assert!(
            start.elapsed() < LIMIT,
            "127.0.0.1:{port} never became ready"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The fleet client: one long-lived Python SDK process, commands on its stdin, JSON lines back.
struct FleetClient {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<Value>,
    seen: Vec<Value>,
}

impl FleetClient {
    fn start(url: &str) -> FleetClient {
        FleetClient::spawn("peers/python/fleet_client.py", &["--http", url])
    }

    /// Starts the Python client `script` (in the repository) with `args`; returns once ready.
    fn spawn(script: &str, args: &[&str]) -> FleetClient {
        let mut child = Command::new(python())
            .arg(peer(repo_root().join(script)))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the fleet client");
        let stdin = child.stdin.take().expect("stdin");
        let lines = lines_of(child.stdout.take().expect("stdout"), |line| {
            eprintln!("[client] {line}");
            let v: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("the client printed non-JSON ({e}): {line}"));
            Some(v)
        });
        let mut client = FleetClient {
            child,
            stdin,
            lines,
            seen: Vec::new(),
        };
        client.wait_for("ready", |l| l["event"] == "ready");
        client
    }

    fn call(&mut self, tool: &str, args: Value, tag: u64) {
        self.send(&json!({"call": tool, "args": args, "tag": tag}));
    }

    /// One command on the client's stdin.
    fn send(&mut self, command: &Value) {
        writeln!(self.stdin, "{command}").expect("to the client");
        self.stdin.flush().expect("flush");
    }

    /// Waits for a line matching `pred` (among those not yet looked at, then new ones).
    fn wait_for(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        if let Some(v) = self.seen.iter().find(|v| pred(v)) {
            return v.clone();
        }
        let start = Instant::now();
        loop {
            let v = match self
                .lines
                .recv_timeout(LIMIT.saturating_sub(start.elapsed()))
            {
                Ok(v) => v,
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                    panic!("the client printed no {what}; it printed {:?}", self.seen)
                }
            };
            self.seen.push(v.clone());
            assert_ne!(v["event"], "failed", "{v}");
            if pred(&v) {
                return v;
            }
        }
    }

    /// Every line printed about the call tagged `tag`.
    fn about(&self, tag: u64) -> Vec<&Value> {
        self.seen.iter().filter(|l| l["tag"] == tag).collect()
    }
}

impl Drop for FleetClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The approval a progress line names (`waiting for approval approval-N: 0 s of 60 s`).
fn approval_of(progress: &Value) -> String {
    progress["message"]
        .as_str()
        .and_then(|m| m.strip_prefix("waiting for approval "))
        .and_then(|rest| rest.split(':').next())
        .unwrap_or_else(|| panic!("not a waiting write: {progress}"))
        .to_owned()
}

/// How a round's instance dies.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kill {
    /// While the write waits for its decision; then approved on another instance's page.
    Waiting,
    /// After the approval on another instance's page, this many milliseconds later: while the
    /// write may be claimed, sent (the upstream takes 150 ms) or recorded.
    AfterApproval(u64),
}

/// Acceptance: 100 rounds, each killing the instance a waiting write lives on at a random point;
/// never two requests for one write, the answer always the store's outcome, every `unknown` in
/// `purra approvals list`.
#[test]
fn instances_killed_at_random_points_never_send_a_write_twice() {
    let rounds: u64 = std::env::var("PURRA_FLEET_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(100);
    let seed: u64 = std::env::var("PURRA_FLEET_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    eprintln!("fleet: {rounds} rounds, PURRA_FLEET_SEED={seed}");
    let mut rng = Rng(seed);
    let mut fleet = Fleet::new("rounds");
    let mut client = FleetClient::start(&fleet.url);
    let mut unknown = Vec::new();
    let mut tally = std::collections::BTreeMap::<String, u32>::new();
    for round in 0..rounds {
        let value = format!("r{round}");
        client.call("set_value", json!({"value": value}), round);
        let progress = client.wait_for("the write waiting", |l| {
            l["event"] == "progress" && l["tag"] == round
        });
        // What the client saw before the kill (its session may have died with the instance
        // killed in the round before, if the answer had come back first: one failover then).
        let before = client.seen.len();
        let id = approval_of(&progress);
        let victim = fleet.index_of(progress["instance"].as_str().expect("instance"));
        let others: Vec<usize> = (0..3).filter(|i| *i != victim).collect();
        let approver = others[rng.below(2) as usize];
        let kill = if rng.below(2) == 0 {
            Kill::Waiting
        } else {
            Kill::AfterApproval(rng.below(400))
        };
        match kill {
            Kill::Waiting => {
                fleet.instances[victim].kill();
                fleet.instances[approver].approve_on_page(&id);
            }
            Kill::AfterApproval(ms) => {
                fleet.instances[approver].approve_on_page(&id);
                std::thread::sleep(Duration::from_millis(ms));
                fleet.instances[victim].kill();
            }
        }
        let step = client.wait_for("the call's result", |l| {
            l["step"] == "call" && l["tag"] == round
        });
        assert!(
            step["result"].is_object(),
            "round {round} ({kill:?}): {step}"
        );
        // The killed instance comes back on its address for the rounds that follow.
        fleet.instances[victim].start();

        let sent = writes_of(&fleet.upstream, &value);
        let shown = fleet.approvals(&["show", &id]);
        let effect = shown["effect"].as_str().unwrap_or("-").to_owned();
        let context = format!(
            "round {round} ({kill:?}, victim {}, approver {}): {shown}\n{:?}",
            fleet.instances[victim].name,
            fleet.instances[approver].name,
            client.about(round)
        );
        assert!(sent <= 1, "sent {sent} times: {context}");
        assert!(shown["dispatches"].as_u64() <= Some(1), "{context}");
        assert_eq!(shown["state"], "claimed", "{context}");
        match effect.as_str() {
            "committed" => {
                assert_eq!(sent, 1, "{context}");
                assert_eq!(
                    step["result"]["structuredContent"],
                    json!({"stored": value}),
                    "{context}"
                );
            }
            "unknown" => {
                let (text, is_error) = result_text(&step);
                assert!(is_error, "{context}");
                assert!(
                    text.starts_with("set_value was claimed once (")
                        && text.ends_with(
                            ") and its effect is unknown: interrupted. It is never sent again; an operator reconciles it with evidence."
                        ),
                    "{text}: {context}"
                );
                unknown.push(id.clone());
            }
            other => panic!("effect {other}: {context}"),
        }
        let lost: Vec<&Value> = client.seen[before..]
            .iter()
            .filter(|l| l["event"] == "session_lost")
            .collect();
        let lost_count = lost.len();
        // The sessions live in the store: no instance answers 404 for one. The client still
        // starts a new session when the SDK closed the session's transport for good after its
        // instance died ("Connection closed": its streams' reconnections gave up), its own choice.
        for l in &lost {
            let why = l["error"].as_str().unwrap_or("");
            assert!(
                why.ends_with("MCPError: Connection closed"),
                "the session was lost at the gateways: {why}: {context}"
            );
        }
        if kill == Kill::Waiting {
            // The acceptance's own case: one request, the receipt, at another instance; on the
            // same session (no new `initialize`) unless the SDK closed its transport.
            assert_eq!((effect.as_str(), sent), ("committed", 1), "{context}");
            let initialized = client.seen[before..]
                .iter()
                .filter(|l| l["event"] == "initialized")
                .count();
            assert_eq!(initialized, lost_count, "{context}");
            // Made again at another instance, or not made again at all: the SDK resumed the
            // call's stream (through the load balancer, at another instance, which serves it
            // from the store) and the answer came on it before a ping saw the move; the client
            // names its instance from answered POSTs, so it still names the victim then.
            match step["tries"].as_u64() {
                Some(2) => assert_ne!(step["instance"], progress["instance"], "{context}"),
                Some(1) => assert_eq!(step["instance"], progress["instance"], "{context}"),
                _ => panic!("one try, or two: {context}"),
            }
        }
        *tally
            .entry(format!(
                "{} {effect} sent {sent}{}",
                match kill {
                    Kill::Waiting => "killed waiting,",
                    Kill::AfterApproval(_) => "killed after the approval,",
                },
                if lost_count > 0 { ", new session" } else { "" }
            ))
            .or_default() += 1;
    }
    // Every unknown effect is where an operator looks.
    let list = fleet.approvals(&["list", "--limit", "1000"]);
    let listed = list["approvals"].as_array().expect("approvals");
    assert_eq!(listed.len() as u64, rounds, "{list}");
    for id in &unknown {
        let entry = listed
            .iter()
            .find(|a| a["id"] == id.as_str())
            .unwrap_or_else(|| panic!("{id} is not listed"));
        assert_eq!(entry["effect"], "unknown", "{entry}");
    }
    let unknown_listed = listed.iter().filter(|a| a["effect"] == "unknown").count();
    assert_eq!(unknown_listed, unknown.len());
    let total: usize = fleet
        .upstream
        .ledger()
        .iter()
        .filter(|l| l.starts_with("call set_value "))
        .count();
    eprintln!(
        "fleet: {rounds} rounds, seed {seed}: {total} requests at the upstream, {} unknown; {tally:?}",
        unknown.len()
    );
    for i in &mut fleet.instances {
        assert!(i.alive());
    }
}

/// A decision on one instance wakes the write waiting on another, whichever way it is made: the
/// approver page of another instance, `purra approvals approve` in another process, and another
/// client's elicitation answered through another instance; each sends once, and the waiting
/// call gets the receipt without failing over.
#[test]
fn a_decision_on_any_instance_wakes_the_write_waiting_on_another() {
    let mut fleet = Fleet::new("wake");
    let mut client = FleetClient::start(&fleet.url);

    // The page of another instance.
    client.call("set_value", json!({"value": "paged"}), 1);
    let progress = client.wait_for("the write waiting", |l| {
        l["event"] == "progress" && l["tag"] == 1
    });
    let waiting_on = fleet.index_of(progress["instance"].as_str().expect("instance"));
    let id = approval_of(&progress);
    let other = (waiting_on + 1) % 3;
    fleet.instances[other].approve_on_page(&id);
    let step = client.wait_for("the receipt", |l| l["step"] == "call" && l["tag"] == 1);
    assert_eq!(
        step["result"]["structuredContent"],
        json!({"stored": "paged"})
    );
    assert_eq!(
        (step["instance"].clone(), step["tries"].clone()),
        (progress["instance"].clone(), json!(1))
    );
    let shown = fleet.approvals(&["show", &id]);
    assert_eq!(
        (
            shown["effect"].clone(),
            shown["decision"]["approver"].clone()
        ),
        (json!("committed"), json!("ada (page)"))
    );

    // purra approvals approve, another process on the same store.
    client.call("set_value", json!({"value": "cli"}), 2);
    let progress = client.wait_for("the write waiting", |l| {
        l["event"] == "progress" && l["tag"] == 2
    });
    let id = approval_of(&progress);
    fleet.approvals(&["approve", &id, "--approver", "ada"]);
    let step = client.wait_for("the receipt", |l| l["step"] == "call" && l["tag"] == 2);
    assert_eq!(
        step["result"]["structuredContent"],
        json!({"stored": "cli"})
    );
    assert_eq!(step["tries"], 1);
    assert_eq!(
        fleet.approvals(&["show", &id])["decision"]["approver"],
        "ada (cli)"
    );

    // Another client (the same client name and arguments: the same call) on another instance,
    // which asks its user by elicitation; its approval wakes the first client's wait.
    client.call("set_value", json!({"value": "elicited"}), 3);
    let progress = client.wait_for("the write waiting", |l| {
        l["event"] == "progress" && l["tag"] == 3
    });
    let id = approval_of(&progress);
    let waiting_on = fleet.index_of(progress["instance"].as_str().expect("instance"));
    let other = &fleet.instances[(waiting_on + 1) % 3];
    let out = Command::new(python())
        .arg(peer(repo_root().join("peers/python/gateway_client.py")))
        .args(["--elicit", "approve", "--http"])
        .arg(format!("http://127.0.0.1:{}/mcp", other.port))
        .args([
            "--steps",
            &json!([{"call": "set_value", "args": {"value": "elicited"}}]).to_string(),
        ])
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .expect("run the second client");
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    let answered = lines
        .iter()
        .find(|l| l["step"] == "call")
        .unwrap_or_else(|| panic!("{lines:?}"));
    assert_eq!(
        answered["result"]["structuredContent"],
        json!({"stored": "elicited"}),
        "{lines:?}"
    );
    assert_eq!(
        lines.iter().filter(|l| l["event"] == "elicit").count(),
        1,
        "{lines:?}"
    );
    let step = client.wait_for("the receipt", |l| l["step"] == "call" && l["tag"] == 3);
    assert_eq!(
        step["result"]["structuredContent"],
        json!({"stored": "elicited"})
    );
    assert_eq!(step["tries"], 1);
    let shown = fleet.approvals(&["show", &id]);
    assert_eq!(
        (
            shown["effect"].clone(),
            shown["decision"]["approver"].clone(),
            shown["dispatches"].clone()
        ),
        (
            json!("committed"),
            json!("gateway-client-python (elicitation)"),
            json!(1)
        )
    );
    for value in ["paged", "cli", "elicited"] {
        assert_eq!(
            writes_of(&fleet.upstream, value),
            1,
            "{:?}",
            fleet.upstream.ledger()
        );
    }
    // Nobody failed over.
    assert!(
        !client.seen.iter().any(|l| l["event"] == "session_lost"),
        "{:?}",
        client.seen
    );
}

/// A stateless 2026-07-28 POST through HAProxy: status, the serving instance, the body (SSE
/// events or JSON, de-chunked).
fn stateless(lb: &str, tool: &str, args: Value) -> (String, String, String) {
    let authority = lb
        .strip_prefix("http://")
        .and_then(|r| r.split('/').next())
        .expect("authority")
        .to_owned();
    let body = json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": tool,
            "arguments": args,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "gateway-client-python", "version": "1"}
            }
        }
    })
    .to_string();
    let mut s = std::net::TcpStream::connect(&authority).expect("connect");
    write!(
        s,
        "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: {tool}\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("write");
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).expect("read");
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, rest) = answer.split_once("\r\n\r\n").expect("a head");
    let status = head.lines().next().unwrap_or("").to_owned();
    let instance = head
        .lines()
        .find_map(|l| l.strip_prefix("x-purra-instance: "))
        .unwrap_or("")
        .to_owned();
    let chunked = head
        .lines()
        .any(|l| l.eq_ignore_ascii_case("transfer-encoding: chunked"));
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_owned()
    };
    (status, instance, body)
}

/// The JSON-RPC result in a stateless answer's body (one SSE `data:` event, or the JSON).
fn rpc_result(body: &str) -> Value {
    let json = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .find(|v| v.get("result").is_some())
        .or_else(|| serde_json::from_str::<Value>(body).ok())
        .unwrap_or_else(|| panic!("no result in {body:?}"));
    json["result"].clone()
}

/// Stateless 2026-07-28 requests go to any instance (round robin: no session to stick to), and
/// a write made again on another instance finds the receipt the first one recorded.
#[test]
fn stateless_requests_reach_any_instance_and_share_the_store() {
    let fleet = Fleet::new("stateless");
    let mut served = std::collections::BTreeSet::new();
    for _ in 0..3 {
        let (status, instance, body) = stateless(&fleet.url, "get_value", json!({}));
        assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
        assert_eq!(rpc_result(&body)["resultType"], "complete", "{body}");
        served.insert(instance);
    }
    assert_eq!(served.into_iter().collect::<Vec<_>>(), ["g1", "g2", "g3"]);

    let url = fleet.url.clone();
    let first =
        std::thread::spawn(move || stateless(&url, "set_value", json!({"value": "stateless"})));
    let start = Instant::now();
    let id = loop {
        let list = fleet.approvals(&["list"]);
        if let Some(a) = list["approvals"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| a["state"] == "pending")
        {
            break a["id"].as_str().expect("id").to_owned();
        }
        assert!(start.elapsed() < LIMIT, "no pending approval");
        std::thread::sleep(Duration::from_millis(100));
    };
    fleet.approvals(&["approve", &id, "--approver", "ada"]);
    let (status, first_instance, body) = first.join().expect("join");
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    assert_eq!(
        rpc_result(&body)["structuredContent"],
        json!({"stored": "stateless"}),
        "{body}"
    );
    let (status, again_instance, body) =
        stateless(&fleet.url, "set_value", json!({"value": "stateless"}));
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    assert_eq!(
        rpc_result(&body)["structuredContent"],
        json!({"stored": "stateless"}),
        "{body}"
    );
    assert_ne!(first_instance, again_instance);
    assert_eq!(writes_of(&fleet.upstream, "stateless"), 1);
    assert_eq!(fleet.approvals(&["show", &id])["effect"], "committed");
}

/// The instances that answered a batch of the session client's reads, by name.
fn answered_by(step: &Value) -> Vec<String> {
    step["instances"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

/// Acceptance (issue 48): HAProxy in plain round robin, no stickiness, in front of three
/// instances keeping their sessions in the PostgreSQL store. The Python SDK client makes 1 000
/// reads (`PURRA_SESSION_READS`) in one session, every answer checked, spread over every
/// instance, with one `initialize`; then one instance is killed (SIGKILL) while the client
/// reads, and the same session goes on at the others, still without a new `initialize`.
#[test]
fn no_session_is_lost_with_an_instance_under_round_robin() {
    let reads: u64 = std::env::var("PURRA_SESSION_READS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let mut fleet = Fleet::start("roundrobin", false);
    std::fs::write(fleet.dir.join("value.txt"), "round-robin").expect("the value");
    let mut client = FleetClient::spawn(
        "peers/python/session_fleet_client.py",
        &["--http", &fleet.url, "--expect", "round-robin"],
    );
    let session = client.wait_for("ready", |l| l["event"] == "ready")["session"].clone();
    assert!(session.is_string(), "{session}");

    client.send(&json!({"reads": reads, "batch": 1}));
    let step = client.wait_for("the reads", |l| l["step"] == "reads" && l["batch"] == 1);
    assert_eq!(
        (
            step["ok"].clone(),
            step["wrong"].clone(),
            step["initializes"].clone(),
            step["sessions"].clone()
        ),
        (json!(reads), json!([]), json!(1), json!([session.clone()])),
        "{step}"
    );
    assert_eq!(answered_by(&step), ["g1", "g2", "g3"], "{step}");

    // SIGKILL one instance while the session's reads go on.
    client.send(&json!({"reads": 200, "batch": 2}));
    client.wait_for("reads under way", |l| {
        l["event"] == "progress" && l["batch"] == 2 && l["done"] == 50
    });
    let g2 = fleet.index_of("g2");
    fleet.instances[g2].kill();
    let step = client.wait_for("the reads", |l| l["step"] == "reads" && l["batch"] == 2);
    assert_eq!(
        (
            step["ok"].clone(),
            step["wrong"].clone(),
            step["initializes"].clone(),
            step["sessions"].clone()
        ),
        (json!(200), json!([]), json!(1), json!([session.clone()])),
        "{step}"
    );

    // Afterwards only the two live instances answer, the same session.
    client.send(&json!({"reads": 100, "batch": 3}));
    let step = client.wait_for("the reads", |l| l["step"] == "reads" && l["batch"] == 3);
    assert_eq!(
        (
            step["ok"].clone(),
            step["wrong"].clone(),
            step["initializes"].clone(),
            step["sessions"].clone()
        ),
        (json!(100), json!([]), json!(1), json!([session])),
        "{step}"
    );
    assert_eq!(answered_by(&step), ["g1", "g3"], "{step}");

    // Every checked answer came from the upstream: no read answered from nowhere.
    let upstream_reads = fleet
        .upstream
        .ledger()
        .iter()
        .filter(|l| *l == "call get_value")
        .count();
    assert!(
        upstream_reads >= usize::try_from(reads + 300).unwrap_or(usize::MAX),
        "{upstream_reads} reads reached the upstream"
    );
}
