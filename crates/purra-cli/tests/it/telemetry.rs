//! `purra gateway` in production: its traces, metrics and logs read by the real collectors.
//!
//! - Traces: an OTLP/HTTP receiver the test starts (`peers/python/otlp_receiver.py`, decoding
//!   with the official `opentelemetry-proto` package) receives the spans of one call made by the
//!   official Python SDK client (which passes `_meta.traceparent` explicitly: it sends one only
//!   when an OpenTelemetry SDK is installed) through `purra gateway` to `purra serve-example`:
//!   one trace id from the client's span to the example server's, each span the child of the
//!   one before it, with the documented names.
//! - Metrics: Debian's Prometheus server, started by the test with a configuration of its own,
//!   scrapes the gateway's `/metrics` listener during a scripted session (a read, a write
//!   approved, a write denied, a write whose upstream exits mid-call), and its HTTP API
//!   (`/api/v1/query`) answers the exact counter values; the same session's metrics reach the
//!   OTLP receiver.
//!
//! The JSON log lines are proved in `gateway_auth.rs`, where a real bearer token exists.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::clients::{
    gateway_client, json_lines, lines_until, spawn_gateway, wait_for, Sdk, SERVING,
};
use crate::support::peers;
use crate::support::run::{dechunk, http_get, purra_bin, result_text, Killed as Proc, LIMIT};

use peers::{fresh_dir, lines_of, peer, peers_dir, python, repo_root};

/// The OTLP/HTTP receiver: its base URL and the JSON lines file it writes.
struct Otlp {
    _proc: Proc,
    url: String,
    out: PathBuf,
}

impl Otlp {
    fn start(dir: &Path) -> Otlp {
        let venv_python = peer(peers_dir().join("venv-otel/bin/python"));
        let out = dir.join("otlp.jsonl");
        let mut child = Command::new(venv_python)
            .arg(peer(repo_root().join("peers/python/otlp_receiver.py")))
            .arg("--out")
            .arg(&out)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the OTLP receiver");
        let rx = lines_of(child.stdout.take().expect("stdout"), Some);
        let line = rx.recv_timeout(LIMIT).expect("the receiver's address");
        let url = line
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("{line}"))
            .to_owned();
        Otlp {
            _proc: Proc(child),
            url,
            out,
        }
    }

    /// Everything received so far.
    fn received(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect()
    }

    /// Waits until `done` holds of what was received; returns it.
    fn wait(&self, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let start = Instant::now();
        loop {
            let got = self.received();
            if done(&got) {
                return got;
            }
            assert!(
                start.elapsed() < LIMIT,
                "{what} never arrived; received: {got:#?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The Python SDK client (`peers/python/gateway_client.py`) running `steps`, its JSON lines as
/// they come.
struct Client {
    _proc: Proc,
    lines: Receiver<Value>,
    seen: Vec<Value>,
}

impl Client {
    fn start(steps: Value, target: &[&str], env: &[(&str, &str)]) -> Client {
        let mut cmd = gateway_client(Sdk::Python);
        cmd.args(["--steps", &steps.to_string()]).args(target);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let (child, lines) = json_lines(&mut cmd);
        Client {
            _proc: Proc(child),
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits for the client to end; returns its call steps.
    fn finish(mut self) -> Vec<Value> {
        wait_for(&self.lines, &mut self.seen, "done", LIMIT, |v| {
            v["event"] == "done"
        });
        let _ = self._proc.0.wait();
        self.seen
            .into_iter()
            .filter(|l| l.get("step").is_some())
            .collect()
    }
}

/// A gateway serving Streamable HTTP, killed when dropped; where it serves and its metrics.
struct Gateway {
    _proc: Proc,
    url: String,
    metrics: String,
    /// Its stderr lines after the two it was waited for by.
    lines: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Gateway {
    fn start(config: &Path) -> Gateway {
        let (child, rx) = spawn_gateway(config);
        let (mut url, mut metrics) = (None, None);
        lines_until(
            &rx,
            "the gateway did not say where it serves",
            LIMIT,
            |line| {
                if let Some(u) = line.strip_prefix(SERVING) {
                    url = Some(u.to_owned());
                } else if let Some(m) = line.strip_prefix("purra gateway: metrics at ") {
                    metrics = Some(m.to_owned());
                }
                url.is_some() && metrics.is_some()
            },
        );
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let keep = lines.clone();
        std::thread::spawn(move || {
            rx.into_iter()
                .for_each(|l| keep.lock().expect("lines").push(l))
        });
        Gateway {
            _proc: Proc(child),
            url: url.expect("url"),
            metrics: metrics.expect("metrics"),
            lines,
        }
    }
}

/// `purra approvals ARGS --db DB --json`, which must succeed.
fn approvals(db: &Path, args: &[&str]) -> Value {
    let out = Command::new(purra_bin())
        .arg("approvals")
        .args(args)
        .arg("--db")
        .arg(db)
        .arg("--json")
        .stdin(Stdio::null())
        .output()
        .expect("run purra approvals");
    assert_eq!(
        out.status.code(),
        Some(0),
        "purra approvals {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

/// Waits for the one pending approval; returns its id.
fn pending_one(db: &Path) -> String {
    let start = Instant::now();
    loop {
        if db.exists() {
            let ids: Vec<String> = approvals(db, &["list"])["approvals"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|a| a["state"] == "pending")
                .map(|a| a["id"].as_str().expect("id").to_owned())
                .collect();
            if let [id] = ids.as_slice() {
                return id.clone();
            }
            assert!(ids.len() < 2, "one pending approval expected: {ids:?}");
        }
        assert!(start.elapsed() < LIMIT, "no pending approval");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The trace of one call: the Python SDK client (its `traceparent` given explicitly) calls the
/// gateway over stdio, the gateway calls `purra serve-example` over stdio; the receiver gets one
/// trace whose spans chain from the client's span id to the example server's handler.
#[test]
fn one_trace_spans_the_sdk_client_the_gateway_and_the_purra_server() {
    let dir = fresh_dir("telemetry", "trace");
    let receiver = Otlp::start(&dir);
    let config = dir.join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            r#"[gateway]
name = "gw"
db = "gateway.db"
listen = "stdio"

[telemetry]
otlp_endpoint = {endpoint:?}

[upstreams.example]
command = [{purra:?}, "serve-example"]
env = {{ OTEL_EXPORTER_OTLP_ENDPOINT = {endpoint:?} }}

[reads.add]
upstream = "example"
title = "Add two numbers"
scope = "open"
"#,
            endpoint = receiver.url,
            purra = purra_bin(),
        ),
    )
    .expect("config");
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let client_span = "00f067aa0ba902b7";
    let steps = json!([{
        "call": "add",
        "args": {"a": 2, "b": 3},
        "meta": {"traceparent": format!("00-{trace_id}-{client_span}-01")},
    }]);
    let config_arg = config.to_string_lossy().into_owned();
    let steps = Client::start(
        steps,
        &["--", purra_bin(), "gateway", "--config", &config_arg],
        &[],
    )
    .finish();
    assert_eq!(steps.len(), 1, "{steps:?}");
    assert_eq!(
        steps[0]["result"]["structuredContent"],
        json!({"sum": 5.0}),
        "{steps:?}"
    );

    // Both processes flush their spans as they exit (the client closed the gateway's stdin;
    // the gateway closed the example server's).
    let wanted = [
        "purra-gateway tools/call add SPAN_KIND_SERVER",
        "purra-gateway gateway.dispatch SPAN_KIND_INTERNAL",
        "purra-gateway mcp.tool_call SPAN_KIND_INTERNAL",
        "purra-gateway tools/call add SPAN_KIND_CLIENT",
        "purra-example-server tools/call add SPAN_KIND_SERVER",
    ];
    let key = |s: &Value| {
        format!(
            "{} {} {}",
            s["service"].as_str().unwrap_or(""),
            s["name"].as_str().unwrap_or(""),
            s["kind"].as_str().unwrap_or("")
        )
    };
    let got = receiver.wait("the call's spans", |got| {
        wanted.iter().all(|w| {
            got.iter()
                .any(|s| s["trace_id"] == trace_id && key(s) == *w)
        })
    });
    let in_trace: Vec<&Value> = got.iter().filter(|s| s["trace_id"] == trace_id).collect();
    // Exactly the chain, nothing else in the trace: each span the child of the one before.
    let mut names: Vec<String> = in_trace.iter().map(|s| key(s)).collect();
    names.sort();
    let mut expected: Vec<String> = wanted.iter().map(|w| (*w).to_owned()).collect();
    expected.sort();
    assert_eq!(names, expected, "{in_trace:#?}");
    let mut parent = client_span.to_owned();
    for w in wanted {
        let span = in_trace.iter().find(|s| key(s) == w).expect("span");
        assert_eq!(
            span["parent_span_id"],
            parent.as_str(),
            "{w}: {in_trace:#?}"
        );
        parent = span["span_id"].as_str().expect("span id").to_owned();
    }
    // What the request spans say: method, tool, revision and outcome.
    for span in in_trace.iter().filter(|s| s["name"] == "tools/call add") {
        let a = &span["attributes"];
        assert_eq!(a["method"], "tools/call", "{span}");
        assert_eq!(a["tool"], "add", "{span}");
        assert_eq!(a["outcome"], "ok", "{span}");
        assert_eq!(a["revision"], "2025-11-25", "{span}");
        assert_eq!(span["status"], "STATUS_CODE_UNSET", "{span}");
    }
    let dispatch = in_trace
        .iter()
        .find(|s| s["name"] == "gateway.dispatch")
        .expect("dispatch");
    assert_eq!(dispatch["attributes"]["tool"], "add");
    assert_eq!(dispatch["attributes"]["upstream"], "example");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Prometheus's own server scrapes the gateway during a session, and its query API answers the
/// exact counts; the OTLP receiver gets the same counts.
#[test]
fn prometheus_scrapes_the_counts_of_a_session_and_otlp_receives_them() {
    let prometheus = std::env::var("PURRA_PROMETHEUS").unwrap_or_else(|_| "prometheus".into());
    let dir = fresh_dir("telemetry", "metrics");
    let receiver = Otlp::start(&dir);
    let upstream = peer(repo_root().join("peers/python/gateway_upstream.py"));
    let crashy = dir.join("crashy");
    std::fs::create_dir_all(&crashy).expect("crashy dir");
    let config = dir.join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            r#"[gateway]
name = "gw"
db = "gateway.db"
listen = "127.0.0.1:0"
approval_wait = "90s"
progress_interval = "1s"

[telemetry]
metrics_listen = "127.0.0.1:0"
otlp_endpoint = {endpoint:?}
metrics_interval = "1s"

[upstreams.values]
command = [{python:?}, {upstream:?}, "--dir", {dir:?}]

[upstreams.crashy]
command = [{python:?}, {upstream:?}, "--dir", {crashy:?}, "--scenario", "exit-on-call"]

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
scope_id = "values-clients"
scope_revision = "1"

[writes.set_value.scope]
arguments = ["len(value) <= 40"]

[writes.crash_value]
upstream = "crashy"
tool = "set_value"
title = "Set the value where the upstream exits"
effect = "write"
binding_id = "crashy"
binding_revision = "1"
scope_id = "crashy-clients"
scope_revision = "1"

[writes.crash_value.scope]
arguments = ["len(value) <= 40"]
"#,
            endpoint = receiver.url,
            python = python(),
            dir = dir.to_string_lossy(),
            crashy = crashy.to_string_lossy(),
        ),
    )
    .expect("config");
    let gateway = Gateway::start(&config);
    let db = dir.join("gateway.db");

    // Prometheus, scraping every second, with a data directory of its own.
    let target = gateway
        .metrics
        .strip_prefix("http://")
        .and_then(|m| m.strip_suffix("/metrics"))
        .expect("metrics URL")
        .to_owned();
    let prom_config = dir.join("prometheus.yml");
    std::fs::write(
        &prom_config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: purra-gateway\n    static_configs:\n      - targets: [\"{target}\"]\n"
        ),
    )
    .expect("prometheus config");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a free port")
        .local_addr()
        .expect("addr")
        .port();
    let prom = Proc(
        Command::new(&prometheus)
            .arg(format!("--config.file={}", prom_config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {prometheus} (scripts/prometheus.sh install): {e}")),
    );

    // The session: a read, a write approved, a write denied, a write whose upstream exits.
    let http = ["--http", gateway.url.as_str()];
    let read = Client::start(json!([{"call": "get_value", "args": {}}]), &http, &[]).finish();
    assert_eq!(
        read[0]["result"]["structuredContent"],
        json!({"value": ""}),
        "{read:?}"
    );

    let write = |tool: &str, value: &str, verdict: &str| -> (String, bool) {
        let client = Client::start(
            json!([{"call": tool, "args": {"value": value}}]),
            &http,
            &[],
        );
        let id = pending_one(&db);
        approvals(&db, &[verdict, &id, "--approver", "ada"]);
        result_text(&client.finish()[0])
    };
    let (text, is_error) = write("set_value", "one", "approve");
    assert!(!is_error, "{text}");
    let (text, is_error) = write("set_value", "two", "deny");
    assert!(is_error && text.contains("denied"), "{text}");
    let (text, is_error) = write("crash_value", "three", "approve");
    assert!(is_error && text.contains("unknown"), "{text}");

    // The crashed upstream comes back (the gateway reconnects on its own).
    let expected: Vec<(String, &str)> = vec![
        (r#"purra_gateway_requests_total{method="tools/call",tool="get_value",outcome="ok"}"#.into(), "1"),
        (r#"purra_gateway_requests_total{method="tools/call",tool="set_value",outcome="ok"}"#.into(), "1"),
        (r#"purra_gateway_requests_total{method="tools/call",tool="set_value",outcome="tool_error"}"#.into(), "1"),
        (r#"purra_gateway_requests_total{method="tools/call",tool="crash_value",outcome="tool_error"}"#.into(), "1"),
        (r#"purra_gateway_request_duration_seconds_count{method="tools/call",tool="set_value"}"#.into(), "2"),
        ("purra_gateway_approvals_prepared_total".into(), "3"),
        ("purra_gateway_approvals_pending".into(), "0"),
        (r#"purra_gateway_approvals_decided_total{verdict="approve"}"#.into(), "2"),
        (r#"purra_gateway_approvals_decided_total{verdict="deny"}"#.into(), "1"),
        (r#"purra_gateway_effects_total{state="committed"}"#.into(), "1"),
        (r#"purra_gateway_effects_total{state="not_started"}"#.into(), "0"),
        (r#"purra_gateway_effects_total{state="unknown"}"#.into(), "1"),
        (r#"purra_gateway_upstream_reconnects_total{upstream="crashy"}"#.into(), "1"),
        (r#"purra_gateway_upstream_reconnects_total{upstream="values"}"#.into(), "0"),
        (r#"purra_gateway_upstream_up{upstream="crashy"}"#.into(), "1"),
        (r#"purra_gateway_upstream_up{upstream="values"}"#.into(), "1"),
        // Issue 44: every upstream's failure count exists from the start, at zero.
        (r#"purra_gateway_upstream_failures_total{upstream="values"}"#.into(), "0"),
        (r#"up{job="purra-gateway"}"#.into(), "1"),
    ];
    let start = Instant::now();
    let answers = loop {
        let answers: Vec<Option<String>> =
            expected.iter().map(|(q, _)| prom_query(port, q)).collect();
        if answers
            .iter()
            .zip(&expected)
            .all(|(a, (_, want))| a.as_deref() == Some(*want))
        {
            break answers;
        }
        assert!(
            start.elapsed() < LIMIT,
            "Prometheus answered {:#?}",
            expected
                .iter()
                .map(|(q, w)| (q, w))
                .zip(&answers)
                .collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(answers.len(), expected.len());
    // Issue 44: the upstream's end and its reconnection are logged at the default level.
    let said = gateway.lines.lock().expect("lines").clone();
    for line in [
        "purra gateway: upstream crashy: the connection closed; reconnecting (with backoff, up to 30s between attempts)",
        "purra gateway: upstream crashy: reconnected",
    ] {
        assert!(said.iter().any(|l| l == line), "{line:?} not in {said:#?}");
    }
    // One write reached the values upstream; the crashy one got its call and exited.
    let ledger = std::fs::read_to_string(dir.join("ledger.txt")).unwrap_or_default();
    assert_eq!(
        ledger
            .lines()
            .filter(|l| l.starts_with("call set_value"))
            .count(),
        1,
        "{ledger}"
    );

    // The same counts over OTLP (every second; the latest export of each series wins).
    let metric = |got: &[Value], name: &str, attrs: Value| -> Option<Value> {
        got.iter()
            .rev()
            .find(|m| m["signal"] == "metric" && m["name"] == name && m["attributes"] == attrs)
            .cloned()
    };
    receiver.wait("the session's metrics", |got| {
        metric(
            got,
            "purra_gateway_effects_total",
            json!({"state": "unknown"}),
        )
        .is_some_and(|m| m["value"] == 1)
            && metric(
                got,
                "purra_gateway_effects_total",
                json!({"state": "committed"}),
            )
            .is_some_and(|m| m["value"] == 1)
            && metric(
                got,
                "purra_gateway_approvals_decided_total",
                json!({"verdict": "deny"}),
            )
            .is_some_and(|m| m["value"] == 1)
            && metric(
                got,
                "purra_gateway_request_duration_seconds",
                json!({"method": "tools/call", "tool": "set_value"}),
            )
            .is_some_and(|m| m["type"] == "histogram" && m["count"] == 2)
    });
    drop(prom);
    drop(gateway);
    let _ = std::fs::remove_dir_all(&dir);
}

/// One instant query's single value (`None` when there is no series, or not yet).
fn prom_query(port: u16, query: &str) -> Option<String> {
    let encoded: String = form_encode(query);
    let body = ok_body(port, &format!("/api/v1/query?query={encoded}"))?;
    let v: Value = serde_json::from_str(&body).ok()?;
    let result = v["data"]["result"].as_array()?;
    match result.as_slice() {
        [one] => one["value"][1].as_str().map(str::to_owned),
        _ => None,
    }
}

fn form_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A plain HTTP/1.1 GET on loopback; the body of a 200.
fn ok_body(port: u16, path: &str) -> Option<String> {
    let text = http_get(&format!("127.0.0.1:{port}"), path).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    if !head.starts_with("HTTP/1.1 200") {
        return None;
    }
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return Some(dechunk(body));
    }
    Some(body.to_owned())
}
