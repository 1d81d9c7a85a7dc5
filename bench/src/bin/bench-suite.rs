//! The side-by-side benchmark suite (`bench/run.sh` builds everything and runs it): purra beside
//! rmcp 3.11.0, the official TypeScript SDK 1.32.2, the official Python SDK 2.3.0 and a pipe
//! floor, in interleaved rounds, every call's answer checked by the clients.
//!
//! Each round runs, in this order: every stdio pair (a client process against a server process
//! it starts; sequential calls, then 16 in flight), Streamable HTTP (each server with 1, 16 and
//! 256 concurrent sessions driven by one raw HTTP client), the gateway (`purra gateway` over
//! stdio and HTTP beside the direct server and the proxies `supergateway` and `mcp-proxy`, write
//! cycles on SQLite and PostgreSQL, 1 to 3 instances behind HAProxy: `bench-suite/gateway.rs`),
//! memory (idle resident size, bytes per HTTP session and per WebSocket connection), the large
//! catalog through the adapter, the durable store, and the store at scale (`store-scale` on a
//! store filled once per run: `bench-suite/scale.rs`). The gateway's PostgreSQL rows use the
//! server `PURRA_BENCH_POSTGRES` names (`bench/run.sh` starts one). The medians of the rounds,
//! the ratios (paired round by round: `purra_bench::rounds`) and SVG charts go into BENCHMARKS.md
//! (between the `suite` markers) and `bench/charts/`; the raw rounds into
//! `target/bench/results.json`. A pair whose client reported a wrong or missing answer (or
//! failed otherwise) is marked FAILED in every table and the suite exits 1.
//!
//! Usage: `bench-suite [--rounds R] [--calls N] [--http-calls N] [--quick] [--memory] [--gateway]`
//! from the repository root; `--quick` is a smoke run (2 rounds, few calls) that writes nothing;
//! `--memory` runs only the memory measurements and `--gateway` only the gateway's rows (with
//! the direct pairs they compare with), and neither writes anything.

#![allow(clippy::print_stdout)] // a benchmark program: stdout is its result

#[path = "bench-suite/gateway.rs"]
mod gateway;
#[path = "bench-suite/scale.rs"]
mod scale;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use purra_bench::http::{load, load_era, wait_listening, Era, Session};
use purra_bench::rounds::{Rounds, Spread};
use purra_bench::rss_of;
use purra_bench::svg::{human, Bar, Chart};
use purra_protocol::{Client, ClientOptions, StderrMode, StdioCommand, WsClientOptions};
use serde_json::{json, Value};

/// Where the programs are.
struct Env {
    release: PathBuf,
    node: PathBuf,
    python: PathBuf,
    /// ContextForge's venv (`PURRA_CONTEXTFORGE_VENV`, else `.peers/venv-contextforge`).
    contextforge: PathBuf,
    /// Debian's haproxy, for the fleet rows.
    haproxy: Option<String>,
}

impl Env {
    fn bin(&self, name: &str) -> String {
        self.release.join(name).display().to_string()
    }

    /// The stdio server command of implementation `which`.
    fn server(&self, which: &str) -> Vec<String> {
        match which {
            "purra" => vec![self.bin("purra-bench-server")],
            "purra-novalidation" => vec![self.bin("purra-bench-server-novalidation")],
            "rmcp" => vec![self.bin("rmcp-server")],
            "rmcp-pipes" => vec![self.bin("rmcp-server"), "--pipes".into()],
            "ts" => vec![
                self.node.display().to_string(),
                "peers/node/bench_server.mjs".into(),
            ],
            "py" => vec![
                self.python.display().to_string(),
                "peers/python/bench_server.py".into(),
            ],
            "floor" => vec![self.bin("floor"), "server".into()],
            "floor-serde" => vec![
                self.bin("floor"),
                "server".into(),
                "--json".into(),
                "--tokio".into(),
            ],
            other => unreachable!("server {other}"),
        }
    }

    /// The stdio client command of implementation `which`.
    fn client(&self, which: &str) -> Vec<String> {
        match which {
            "purra" => vec![self.bin("bench-client")],
            "rmcp" => vec![self.bin("rmcp-client")],
            "ts" => vec![
                self.node.display().to_string(),
                "peers/node/bench_client.mjs".into(),
            ],
            "py" => vec![
                self.python.display().to_string(),
                "peers/python/bench_client.py".into(),
            ],
            "floor" => vec![self.bin("floor"), "client".into()],
            "floor-serde" => vec![
                self.bin("floor"),
                "client".into(),
                "--json".into(),
                "--tokio".into(),
                "--mt".into(),
            ],
            other => unreachable!("client {other}"),
        }
    }

    /// The Streamable HTTP server command of implementation `which` on `port`.
    fn http_server(&self, which: &str, port: u16) -> Vec<String> {
        let mut cmd = match which {
            "purra" => self.server("purra"),
            "rmcp" | "rmcp-nodelay" => self.server("rmcp"),
            "ts" => self.server("ts"),
            "py" => self.server("py"),
            other => unreachable!("http server {other}"),
        };
        cmd.extend(["--http".to_owned(), port.to_string()]);
        if which == "rmcp-nodelay" {
            cmd.push("--nodelay".to_owned());
        }
        cmd
    }
}

/// The implementation's name where the transport is not stdio (rmcp has one HTTP server).
fn http_name(which: &str) -> &'static str {
    match which {
        "rmcp" => "rmcp",
        "rmcp-nodelay" => "rmcp + TCP_NODELAY",
        _ => name(which),
    }
}

fn name(which: &str) -> &'static str {
    match which {
        "purra" => "purra",
        "purra-novalidation" => "purra without `validation`",
        "rmcp" => "rmcp stdio()",
        "rmcp-pipes" => "rmcp stdio_pipes()",
        "rmcp-client" => "rmcp",
        "ts" => "TypeScript SDK",
        "py" => "Python SDK",
        "floor" => "floor",
        "floor-serde" => "serde floor",
        _ => "?",
    }
}

/// The stdio pairs: (client, server).
const PAIRS: &[(&str, &str)] = &[
    ("floor", "floor"),
    ("floor-serde", "floor-serde"),
    ("purra", "purra"),
    ("rmcp", "rmcp"),
    ("rmcp", "rmcp-pipes"),
    ("ts", "ts"),
    ("py", "py"),
    ("purra", "rmcp"),
    ("purra", "rmcp-pipes"),
    ("purra", "ts"),
    ("purra", "py"),
    ("rmcp", "purra"),
    ("ts", "purra"),
    ("py", "purra"),
];

/// rmcp's server twice: as its examples serve it (Nagle's algorithm on), and with `TCP_NODELAY`,
/// the fair comparison for throughput and latency.
const HTTP_SERVERS: &[&str] = &["purra", "rmcp", "rmcp-nodelay", "ts", "py"];
const HTTP_CLIENTS: &[usize] = &[1, 16, 256];
/// Clients of the era pair on purra's HTTP server: one round trip at a time, and 16 at once.
const ERA_CLIENTS: &[usize] = &[1, 16];
/// The era pair: (key, era) — a 2025-11-25 session request and a stateless 2026-07-28 request.
const ERAS: &[(&str, Era)] = &[
    ("session", Era::Session("2025-11-25")),
    ("stateless", Era::Stateless),
];

fn pair_label(client: &str, server: &str) -> String {
    let c = if client == "rmcp" {
        "rmcp"
    } else {
        name(client)
    };
    format!("{c} → {}", name(server))
}

/// Every measurement of every round, keyed by a stable name; `None` is a failed run.
#[derive(Default)]
struct Results {
    rounds: Rounds,
    failures: BTreeMap<String, String>,
}

impl Results {
    fn put(&mut self, key: &str, v: f64) {
        self.rounds.record(key, Some(v));
    }

    fn fail(&mut self, key: &str, why: String) {
        eprintln!("bench-suite: FAILED {key}: {why}");
        self.rounds.record(key, None);
        self.failures.entry(key.to_owned()).or_insert(why);
    }

    /// The median over rounds, `None` if any round failed or none ran.
    fn median(&self, key: &str) -> Option<f64> {
        self.rounds.spread(key).map(|s| s.median)
    }

    /// `a ÷ b` paired round by round (see [`Rounds::paired`]).
    fn paired(&self, a: &str, b: &str) -> Option<Spread> {
        self.rounds.paired(a, b)
    }

    /// Whether any key starting with `prefix` failed.
    fn failed(&self, prefix: &str) -> bool {
        self.failures.keys().any(|k| k.starts_with(prefix))
    }
}

async fn run_json(cmd: &[String], limit: Duration) -> Result<Value, String> {
    let child = tokio::process::Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", cmd[0]))?;
    let out = tokio::time::timeout(limit, child.wait_with_output())
        .await
        .map_err(|_| format!("no answer within {limit:?}"))?
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(3).collect();
        return Err(format!(
            "{}: {}",
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .ok_or("no result line")?;
    serde_json::from_str(line).map_err(|e| format!("bad result line {line:?}: {e}"))
}

fn field(v: &Value, name: &str) -> Result<f64, String> {
    v.get(name)
        .and_then(Value::as_f64)
        .ok_or_else(|| format!("no {name} in {v}"))
}

async fn stdio_pair(env: &Env, res: &mut Results, client: &str, server: &str, calls: usize) {
    let mut cmd = env.client(client);
    cmd.extend([
        "--calls".into(),
        calls.to_string(),
        "--concurrency".into(),
        "16".into(),
        "--".into(),
    ]);
    cmd.extend(env.server(server));
    let key = format!("stdio/{client}/{server}");
    stdio_run(res, &key, &pair_label(client, server), &cmd).await;
}

/// Runs one stdio client command (its `--calls`, `--concurrency 16`, then the server's command)
/// and records its rates and latencies under `key`: `/seq`, `/p50`, `/p99`, `/conc`.
async fn stdio_run(res: &mut Results, key: &str, label: &str, cmd: &[String]) {
    let started = Instant::now();
    match run_json(cmd, Duration::from_secs(600)).await.and_then(|v| {
        Ok([
            field(&v, "sequential_calls_per_s")?,
            field(&v, "p50_us")?,
            field(&v, "p99_us")?,
            field(&v, "concurrent_calls_per_s")?,
        ])
    }) {
        Ok([seq, p50, p99, conc]) => {
            eprintln!(
                "  {label:<42} seq {seq:>7.0}/s p50 {p50:>5.0} µs p99 {p99:>6.0} µs | 16 in flight {conc:>7.0}/s ({:.1} s)",
                started.elapsed().as_secs_f64()
            );
            res.put(&format!("{key}/seq"), seq);
            res.put(&format!("{key}/p50"), p50);
            res.put(&format!("{key}/p99"), p99);
            res.put(&format!("{key}/conc"), conc);
        }
        Err(e) => res.fail(key, e),
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// A server process killed when dropped.
struct Running {
    child: tokio::process::Child,
}

impl Running {
    async fn start(cmd: &[String], port: u16) -> Result<Running, String> {
        let child = tokio::process::Command::new(&cmd[0])
            .args(&cmd[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", cmd[0]))?;
        wait_listening(([127, 0, 0, 1], port).into(), Duration::from_secs(30)).await?;
        Ok(Running { child })
    }

    fn pid(&self) -> u32 {
        self.child.id().unwrap_or(0)
    }
}

async fn http_round(env: &Env, res: &mut Results, calls: usize) {
    for &server in HTTP_SERVERS {
        let port = free_port();
        let running = match Running::start(&env.http_server(server, port), port).await {
            Ok(r) => r,
            Err(e) => {
                res.fail(&format!("http/{server}"), e);
                continue;
            }
        };
        let url = format!("http://127.0.0.1:{port}/mcp");
        for &clients in HTTP_CLIENTS {
            let n = http_calls_for(server, calls).max(clients * 4);
            let key = format!("http/{server}/{clients}");
            match tokio::time::timeout(Duration::from_secs(300), load(&url, clients, n)).await {
                Ok(Ok(r)) => {
                    eprintln!(
                        "  HTTP {:<16} {:>3} clients {:>7.0} calls/s p50 {:>6.0} µs p99 {:>7.0} µs",
                        http_name(server),
                        clients,
                        r.calls_per_s,
                        r.p50_us,
                        r.p99_us
                    );
                    res.put(&format!("{key}/rps"), r.calls_per_s);
                    res.put(&format!("{key}/p50"), r.p50_us);
                    res.put(&format!("{key}/p99"), r.p99_us);
                }
                Ok(Err(e)) => res.fail(&key, e),
                Err(_) => res.fail(&key, "no end within 300 s".into()),
            }
        }
        if server == "purra" {
            era_pair(res, &url, calls).await;
        }
        drop(running);
    }
}

/// How many calls a run against `server` makes, of `calls` (`--http-calls`): all of them for the
/// servers that answer in tens of µs (purra, rmcp + `TCP_NODELAY`), so that a run lasts about a
/// second and one scheduler hiccup on a shared machine does not decide its rate; fewer for the
/// slow ones, whose runs would otherwise take minutes (rmcp as its examples serve it waits about
/// 40 ms for the client's delayed ACK on every sequential call).
fn http_calls_for(server: &str, calls: usize) -> usize {
    match server {
        "ts" => calls / 4,
        "rmcp" | "py" => calls / 40,
        _ => calls,
    }
}

/// The same purra server process, the same raw client and `add` calls: 2025-11-25 session
/// requests, then stateless 2026-07-28 requests, for each of [`ERA_CLIENTS`].
async fn era_pair(res: &mut Results, url: &str, calls: usize) {
    for &clients in ERA_CLIENTS {
        let n = calls.max(clients * 4);
        for &(which, era) in ERAS {
            let key = format!("http-era/{which}/{clients}");
            match tokio::time::timeout(Duration::from_secs(300), load_era(url, clients, n, era))
                .await
            {
                Ok(Ok(r)) => {
                    eprintln!(
                        "  HTTP purra {which:<9} {clients:>3} clients {:>7.0} calls/s p50 {:>6.0} µs p99 {:>7.0} µs",
                        r.calls_per_s, r.p50_us, r.p99_us
                    );
                    res.put(&format!("{key}/rps"), r.calls_per_s);
                    res.put(&format!("{key}/p50"), r.p50_us);
                    res.put(&format!("{key}/p99"), r.p99_us);
                }
                Ok(Err(e)) => res.fail(&key, e),
                Err(_) => res.fail(&key, "no end within 300 s".into()),
            }
        }
    }
}

/// Idle resident size of each one-tool stdio server after one call.
async fn idle_rss(env: &Env, res: &mut Results) {
    for which in ["purra", "purra-novalidation", "rmcp", "ts", "py"] {
        let key = format!("mem/idle/{which}");
        let cmd = env.server(which);
        let outcome = async {
            let conn = Client::connect_stdio(
                StdioCommand::new(&cmd[0])
                    .args(&cmd[1..])
                    .stderr(StderrMode::Null),
                ClientOptions::default(),
            )
            .await
            .map_err(|e| e.to_string())?;
            let r = conn
                .call_tool("echo", json!({"text": "idle"}))
                .await
                .map_err(|e| e.to_string())?;
            if r.is_error == Some(true) {
                return Err("echo failed".to_owned());
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
            let rss = conn.pid().and_then(rss_of).ok_or("no /proc status")?.0;
            conn.close().await;
            Ok::<_, String>(rss as f64)
        }
        .await;
        match outcome {
            Ok(rss) => {
                eprintln!(
                    "  idle {:<16} {:>6.1} MiB",
                    http_name(which),
                    rss / 1048576.0
                );
                res.put(&key, rss);
            }
            Err(e) => res.fail(&key, e),
        }
    }
}

/// Sessions held open to measure bytes per HTTP session.
const HELD: usize = 500;
/// WebSocket connections held open (purra's server serves 256 at once by default).
const HELD_WS: usize = 200;

/// Resident bytes per open (idle, initialized) Streamable HTTP session of each server.
async fn session_bytes(env: &Env, res: &mut Results) {
    // The socket option changes nothing a session holds.
    for &server in HTTP_SERVERS.iter().filter(|&&s| s != "rmcp-nodelay") {
        let key = format!("mem/http-session/{server}");
        let port = free_port();
        let outcome = async {
            let running = Running::start(&env.http_server(server, port), port).await?;
            let url = format!("http://127.0.0.1:{port}/mcp");
            let mut first = Session::open(&url).await?;
            first.add(1, 2).await?;
            tokio::time::sleep(Duration::from_millis(300)).await;
            let before = rss_of(running.pid()).ok_or("no /proc status")?.0;
            let mut held = Vec::with_capacity(HELD);
            for _ in 0..HELD {
                // A session, not a connection: each held session's connection is closed.
                let mut s = Session::open(&url).await?;
                s.disconnect();
                held.push(s);
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
            let after = rss_of(running.pid()).ok_or("no /proc status")?.0;
            drop(held);
            Ok::<_, String>((after as f64 - before as f64) / HELD as f64)
        }
        .await;
        match outcome {
            Ok(b) => {
                eprintln!("  HTTP session {:<16} {:>7.0} bytes", http_name(server), b);
                res.put(&key, b);
            }
            Err(e) => res.fail(&key, e),
        }
    }
}

/// Resident bytes per open WebSocket connection of purra's server (rmcp has no WebSocket).
async fn ws_bytes(env: &Env, res: &mut Results) {
    let key = "mem/ws/purra";
    let port = free_port();
    let outcome = async {
        let cmd = vec![
            env.bin("purra-bench-server"),
            "--ws".into(),
            port.to_string(),
        ];
        let running = Running::start(&cmd, port).await?;
        let url = format!("ws://127.0.0.1:{port}/");
        let connect =
            || Client::connect_ws(&url, WsClientOptions::default(), ClientOptions::default());
        let first = connect().await.map_err(|e| e.to_string())?;
        first
            .call_tool("echo", json!({"text": "x"}))
            .await
            .map_err(|e| e.to_string())?;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let before = rss_of(running.pid()).ok_or("no /proc status")?.0;
        let mut held = Vec::with_capacity(HELD_WS);
        for _ in 0..HELD_WS {
            held.push(connect().await.map_err(|e| e.to_string())?);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let after = rss_of(running.pid()).ok_or("no /proc status")?.0;
        drop(held);
        Ok::<_, String>((after as f64 - before as f64) / HELD_WS as f64)
    }
    .await;
    match outcome {
        Ok(b) => {
            eprintln!("  WebSocket connection purra {b:>7.0} bytes");
            res.put(key, b);
        }
        Err(e) => res.fail(key, e),
    }
}

/// The catalog cases: (tools, schema bytes).
const CATALOGS: &[(usize, usize)] = &[(256, 16 * 1024), (56, 16 * 1024), (256, 3 * 1024)];

async fn catalog_round(env: &Env, res: &mut Results, notes: &mut BTreeMap<String, String>) {
    for &(tools, bytes) in CATALOGS {
        let key = format!("catalog/{tools}x{bytes}");
        let cmd = vec![
            env.bin("catalog"),
            "run".into(),
            "--tools".into(),
            tools.to_string(),
            "--schema-bytes".into(),
            bytes.to_string(),
        ];
        match run_json(&cmd, Duration::from_secs(300)).await {
            Ok(v) => {
                let outcome = v["outcome"].as_str().unwrap_or("?").to_owned();
                eprintln!(
                    "  catalog {tools} × {bytes} B: connect {:.1} ms, discover {:.1} ms, {outcome}, peak {:.1} MiB",
                    v["connect_ms"].as_f64().unwrap_or(0.0),
                    v["discover_ms"].as_f64().unwrap_or(0.0),
                    v["peak_rss_bytes"].as_f64().unwrap_or(0.0) / 1048576.0
                );
                for f in [
                    "connect_ms",
                    "discover_ms",
                    "peak_rss_bytes",
                    "catalog_bytes",
                ] {
                    res.put(&format!("{key}/{f}"), v[f].as_f64().unwrap_or(f64::NAN));
                }
                let expected_ok = tools * (bytes + 200) < 1024 * 1024;
                if (outcome == "ok") != expected_ok {
                    res.fail(&key, format!("unexpected outcome {outcome}"));
                }
                notes.insert(key, outcome);
            }
            Err(e) => res.fail(&key, e),
        }
    }
}

async fn store_round(env: &Env, res: &mut Results, seconds: f64) {
    let dir = Path::new("target/bench/store");
    let cmd = vec![
        env.bin("store-bench"),
        "--dir".into(),
        dir.display().to_string(),
        "--seconds".into(),
        seconds.to_string(),
    ];
    match run_json(&cmd, Duration::from_secs(300)).await {
        Ok(v) => {
            let f = v["fsync_per_s"].as_f64().unwrap_or(0.0);
            let one = v["cycles_per_s_1"].as_f64().unwrap_or(0.0);
            let sixteen = v["cycles_per_s_16"].as_f64().unwrap_or(0.0);
            let floor_one = v["floor_cycles_per_s_1"].as_f64().unwrap_or(0.0);
            let floor_sixteen = v["floor_cycles_per_s_16"].as_f64().unwrap_or(0.0);
            let store_rows = v["store_cycle_floor_per_s"].as_f64().unwrap_or(0.0);
            let gateway_rows = v["gateway_cycle_floor_per_s"].as_f64().unwrap_or(0.0);
            eprintln!(
                "  store: fsync {f:.0}/s, 1 run {one:.0} cycles/s, 16 runs {sixteen:.0} cycles/s; \
                 SQLite floor {floor_one:.0} and {floor_sixteen:.0}; the rows of a store cycle \
                 {store_rows:.0} cycles/s, of a gateway cycle {gateway_rows:.0}"
            );
            res.put("store/rows-floor", store_rows);
            res.put("store/gateway-rows-floor", gateway_rows);
            res.put("store/fsync", f);
            res.put("store/1", one);
            res.put("store/16", sixteen);
            res.put("store/ratio1", one / f);
            res.put("store/ratio16", sixteen / f);
            res.put("store/floor1", floor_one);
            res.put("store/floor16", floor_sixteen);
            res.put("store/floor-ratio1", floor_one / f);
            res.put("store/floor-ratio16", floor_sixteen / f);
        }
        Err(e) => res.fail("store", e),
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn command_line(cmd: &str, args: &[&str]) -> String {
    std::process::Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

fn machine(env: &Env) -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .unwrap_or("?")
        .trim()
        .to_owned();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            let kib: f64 = m.lines().next()?.split_whitespace().nth(1)?.parse().ok()?;
            Some(format!("{:.0} GiB", kib / 1048576.0))
        })
        .unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!(
        "{cores} cores ({model}), {mem} memory, Linux {}; {}; Node {}; {}",
        kernel.trim(),
        command_line("rustc", &["--version"]),
        command_line(&env.node.display().to_string(), &["--version"]),
        command_line(&env.python.display().to_string(), &["--version"]),
    )
}

struct Options {
    rounds: usize,
    calls: usize,
    http_calls: usize,
    store_seconds: f64,
    /// Only the memory measurements (idle, per HTTP session, per WebSocket connection), printed and
    /// not written to BENCHMARKS.md: the quick check after a change to what a connection holds.
    memory: bool,
    /// Only the gateway's rows (and the direct pairs they compare with), printed and not written.
    gateway: bool,
    /// Only the rows with an HTTP upstream (the upstream alone, the gateway and ContextForge in
    /// front of it), printed and not written.
    upstream: bool,
    /// The store-at-scale rows on PostgreSQL too: filling its store through the real APIs takes
    /// about ten minutes on this machine, so only a run that asks for them has them.
    scale_postgres: bool,
    quick: bool,
}

fn parse_options() -> Options {
    let mut o = Options {
        rounds: 5,
        calls: 20_000,
        http_calls: 40_000,
        store_seconds: 2.0,
        quick: false,
        memory: false,
        gateway: false,
        upstream: false,
        scale_postgres: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut num = || {
            args.next()
                .and_then(|v| v.parse::<usize>().ok())
                .filter(|n| *n > 0)
        };
        match a.as_str() {
            "--rounds" => o.rounds = num().unwrap_or_else(|| usage()),
            "--calls" => o.calls = num().unwrap_or_else(|| usage()),
            "--http-calls" => o.http_calls = num().unwrap_or_else(|| usage()),
            "--memory" => o.memory = true,
            "--gateway" => o.gateway = true,
            "--upstream" => o.upstream = true,
            "--scale-postgres" => o.scale_postgres = true,
            "--quick" => {
                o.quick = true;
                o.rounds = 2;
                o.calls = 1_000;
                o.http_calls = 1_200;
                o.store_seconds = 0.3;
            }
            _ => usage(),
        }
    }
    o
}

fn usage() -> ! {
    eprintln!(
        "usage: bench-suite [--rounds R] [--calls N] [--http-calls N] [--quick] [--memory] [--gateway] [--upstream] [--scale-postgres]"
    );
    std::process::exit(64)
}

#[tokio::main]
async fn main() {
    let o = parse_options();
    let env = Env {
        release: PathBuf::from("target/release"),
        node: PathBuf::from(".peers/bin/node"),
        python: PathBuf::from(".peers/venv/bin/python"),
        contextforge: std::env::var_os("PURRA_CONTEXTFORGE_VENV")
            .map_or_else(|| PathBuf::from(".peers/venv-contextforge"), PathBuf::from),
        haproxy: haproxy(),
    };
    let postgres = std::env::var("PURRA_BENCH_POSTGRES")
        .ok()
        .filter(|u| !u.is_empty());
    let started = Instant::now();
    let load_before = loadavg();
    let mut res = Results::default();
    let mut notes = BTreeMap::new();
    for round in 0..o.rounds {
        res.rounds.start(round);
        eprintln!("round {} of {} (load {})", round + 1, o.rounds, loadavg());
        if o.memory {
            idle_rss(&env, &mut res).await;
            session_bytes(&env, &mut res).await;
            ws_bytes(&env, &mut res).await;
            continue;
        }
        if o.upstream {
            gateway::http_upstream(&env, &mut res, o.http_calls).await;
            continue;
        }
        if o.gateway {
            for (c, sv) in [("floor-serde", "floor-serde"), ("purra", "purra")] {
                stdio_pair(&env, &mut res, c, sv, o.calls).await;
            }
            direct_http(&env, &mut res, o.http_calls).await;
            gateway_round(&env, &mut res, &o, postgres.as_deref()).await;
            continue;
        }
        // Rotate the pair order each round so no pair always runs first or last.
        for i in 0..PAIRS.len() {
            let (client, server) = PAIRS[(i + round) % PAIRS.len()];
            let calls = if client == "py" || server == "py" {
                o.calls / 10
            } else {
                o.calls
            };
            stdio_pair(&env, &mut res, client, server, calls.max(16)).await;
        }
        http_round(&env, &mut res, o.http_calls).await;
        gateway_round(&env, &mut res, &o, postgres.as_deref()).await;
        idle_rss(&env, &mut res).await;
        session_bytes(&env, &mut res).await;
        ws_bytes(&env, &mut res).await;
        catalog_round(&env, &mut res, &mut notes).await;
        store_round(&env, &mut res, o.store_seconds).await;
        let scale_postgres = postgres.as_deref().filter(|_| o.scale_postgres);
        scale::round(&env, &mut res, o.quick, scale_postgres).await;
    }
    let run = RunInfo {
        machine: machine(&env),
        load_before,
        load_after: loadavg(),
        minutes: started.elapsed().as_secs_f64() / 60.0,
        rounds: o.rounds,
        calls: o.calls,
        http_calls: o.http_calls,
        date: command_line("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
    };
    let report = if o.upstream {
        upstream_report(&res, &run)
    } else if o.gateway {
        gateway_report(&res, &run)
    } else {
        report(&res, &run, &notes)
    };
    println!("{report}");
    if !o.quick && !o.memory && !o.gateway && !o.upstream {
        write_outputs(&res, &report);
    }
    if !res.failures.is_empty() {
        eprintln!("bench-suite: {} measurement(s) FAILED", res.failures.len());
        std::process::exit(1);
    }
}

/// The gateway's rows of one round.
async fn gateway_round(env: &Env, res: &mut Results, o: &Options, postgres: Option<&str>) {
    gateway::stdio(env, res, o.calls).await;
    gateway::relay(env, res, o.calls).await;
    gateway::http(env, res, o.http_calls).await;
    gateway::http_upstream(env, res, o.http_calls).await;
    let writes = if o.quick { 40 } else { 400 };
    gateway::writes(env, res, writes, postgres).await;
    gateway::fleet(env, res, o.http_calls, postgres).await;
}

/// purra's own HTTP server alone, at the session counts the gateway's HTTP rows compare with.
async fn direct_http(env: &Env, res: &mut Results, calls: usize) {
    let port = free_port();
    let running = match Running::start(&env.http_server("purra", port), port).await {
        Ok(r) => r,
        Err(e) => return res.fail("http/purra", e),
    };
    let url = format!("http://127.0.0.1:{port}/mcp");
    for &clients in gateway::FRONT_CLIENTS {
        let key = format!("http/purra/{clients}");
        match load(&url, clients, calls.max(clients * 4)).await {
            Ok(r) => {
                res.put(&format!("{key}/rps"), r.calls_per_s);
                res.put(&format!("{key}/p50"), r.p50_us);
                res.put(&format!("{key}/p99"), r.p99_us);
            }
            Err(e) => res.fail(&key, e),
        }
    }
    drop(running);
}

/// Debian's haproxy: `PURRA_HAPROXY`, else on PATH, else where Debian puts it.
fn haproxy() -> Option<String> {
    if let Some(p) = std::env::var_os("PURRA_HAPROXY") {
        return Some(p.to_string_lossy().into_owned());
    }
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|d| d.join("haproxy"))
        .chain([PathBuf::from("/usr/sbin/haproxy")])
        .find(|p| p.exists())
        .map(|p| p.display().to_string())
}

struct RunInfo {
    machine: String,
    load_before: String,
    load_after: String,
    minutes: f64,
    rounds: usize,
    calls: usize,
    http_calls: usize,
    date: String,
}

fn cell(v: Option<f64>) -> String {
    v.map_or_else(|| "FAILED".to_owned(), human)
}

/// A paired ratio as the tables print it: the median over rounds and its range, `—` when a
/// round of either side failed.
fn fmt_ratio(r: Option<Spread>) -> String {
    r.map_or_else(|| "—".to_owned(), |r| r.ratio_text())
}

/// A target is met when the median of its per-round ratios is.
fn verdict(r: Option<Spread>, at_least: f64) -> &'static str {
    match r {
        Some(r) if r.median >= at_least => "met",
        Some(_) => "not met",
        None => "FAILED",
    }
}

fn report(res: &Results, run: &RunInfo, notes: &BTreeMap<String, String>) -> String {
    let m = |k: &str| res.median(k);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Measured {} by `bench/run.sh` ({} rounds, {:.0} minutes). Machine: {}.",
        run.date, run.rounds, run.minutes, run.machine
    );
    let _ = writeln!(s, "Load average (1, 5, 15 min) before the run: {}; after: {}. Other engineers' builds share this 2-core machine, so absolute numbers move from run to run; every ratio is paired round by round (both values of a ratio measured in the same round) and shown as the median over rounds with its range.", run.load_before, run.load_after);
    let _ = writeln!(s, "Every number is the median of the rounds; every call's answer was checked (the echoed text, the sum), and a pair with a wrong or missing answer would read FAILED.\n");

    let _ = writeln!(s, "### stdio round trips\n");
    let _ = writeln!(s, "`echo` with a distinct text per call over the pipes of a child process: {} calls one at a time, then {} with 16 in flight on one connection (a tenth of that for pairs with the Python SDK), after 500 warm-up calls. Clients: purra `bench-client`, rmcp `rmcp-client`, `peers/node/bench_client.mjs`, `peers/python/bench_client.py`, `floor client`; servers: `purra-bench-server`, `rmcp-server` (`stdio()`, or `--pipes` for `stdio_pipes()`), `bench_server.mjs`, `bench_server.py`, `floor server`. The floor is two programs of our own trading the same bytes with blocking I/O and no JSON work; the serde floor (`floor client --json --tokio --mt`, `floor server --json --tokio`) is the least a typed tokio implementation does: every message read into and written from serde structs, the I/O on tokio's non-blocking pipes, the client's calls made in the body of a multi-thread runtime's `block_on` as `#[tokio::main]` makes them (as purra's, rmcp's and every client here are), the server on a current-thread runtime (as purra's): no engine, no dispatch, no validation.\n", run.calls, run.calls);
    let _ = writeln!(s, "| client → server | sequential calls/s | p50 µs | p99 µs | ÷ floor | 16 in flight calls/s | ÷ floor |");
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|");
    for &(c, sv) in PAIRS {
        let k = format!("stdio/{c}/{sv}");
        if res.failed(&k) {
            let _ = writeln!(
                s,
                "| {} | FAILED: {} | | | | | |",
                pair_label(c, sv),
                res.failures.get(&k).map_or("", String::as_str)
            );
            continue;
        }
        let seq = m(&format!("{k}/seq"));
        let conc = m(&format!("{k}/conc"));
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} |",
            pair_label(c, sv),
            cell(seq),
            cell(m(&format!("{k}/p50"))),
            cell(m(&format!("{k}/p99"))),
            fmt_ratio(res.paired(&format!("{k}/seq"), "stdio/floor/floor/seq")),
            cell(conc),
            fmt_ratio(res.paired(&format!("{k}/conc"), "stdio/floor/floor/conc")),
        );
    }
    let _ = writeln!(s, "\n![stdio, sequential](bench/charts/stdio-sequential.svg)\n![stdio, 16 in flight](bench/charts/stdio-concurrent.svg)\n![stdio, ratio to the floor](bench/charts/stdio-floor-ratio.svg)\n");

    let _ = writeln!(s, "### Streamable HTTP over loopback\n");
    let _ = writeln!(s, "One raw HTTP client process (`purra_bench::http`: HTTP/1.1 written by hand, one keep-alive connection per session, the same bytes for every server, SSE or JSON answers read to the end of the body) opens 1, 16 or 256 sessions (`initialize`, `notifications/initialized`), then each session calls `add {{a, b}}` one call at a time and checks the sum; {} calls in all per run (a quarter of that for the TypeScript SDK, a fortieth for the Python SDK and for rmcp without `TCP_NODELAY`, whose runs would otherwise take minutes; always at least 4 per session). Servers: default configuration of each (`StreamableHttpServer`, rmcp's `StreamableHttpService` with its local session manager on `axum::serve` as rmcp's examples serve it, which leaves Nagle's algorithm on: each of its SSE answers then waits for the client's delayed ACK, about 40 ms per sequential call (purra's server sets `TCP_NODELAY` on accepted sockets); so it runs a second time as `rmcp + TCP_NODELAY`, the same server with the option set on every accepted socket, the fair comparison and the one the targets below use; the TypeScript SDK's `StreamableHTTPServerTransport` per session on `node:http`, the Python SDK's `MCPServer.run(\"streamable-http\")` on uvicorn).\n", run.http_calls);
    let _ = writeln!(
        s,
        "| server | sessions | calls/s | p50 µs | p99 µs | calls/s ÷ rmcp + TCP_NODELAY | calls/s ÷ rmcp |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|");
    for &sv in HTTP_SERVERS {
        for &c in HTTP_CLIENTS {
            let k = format!("http/{sv}/{c}");
            if res.failed(&k)
                || res.failed(&format!("http/{sv}/")) && m(&format!("{k}/rps")).is_none()
            {
                let why = res
                    .failures
                    .get(&k)
                    .or_else(|| res.failures.get(&format!("http/{sv}")))
                    .map_or("", String::as_str);
                let _ = writeln!(s, "| {} | {c} | FAILED: {why} | | | | |", http_name(sv));
                continue;
            }
            let rps = m(&format!("{k}/rps"));
            let _ = writeln!(
                s,
                "| {} | {c} | {} | {} | {} | {} | {} |",
                http_name(sv),
                cell(rps),
                cell(m(&format!("{k}/p50"))),
                cell(m(&format!("{k}/p99"))),
                fmt_ratio(res.paired(&format!("{k}/rps"), &format!("http/rmcp-nodelay/{c}/rps"))),
                fmt_ratio(res.paired(&format!("{k}/rps"), &format!("http/rmcp/{c}/rps"))),
            );
        }
    }
    let _ = writeln!(s, "\n![Streamable HTTP](bench/charts/http.svg)\n");

    let _ = writeln!(
        s,
        "### 2026-07-28 stateless requests beside 2025-11-25 sessions\n"
    );
    let _ = writeln!(s, "The same raw client against the same `purra-bench-server --http` process, right after the table above: {} `add` calls from 1 or 16 clients, each one call at a time, either in 2025-11-25 sessions (opened before the clock starts; every call carries the session id) or as stateless 2026-07-28 requests (every call a self-contained POST with the `_meta` envelope and the `Mcp-Method` and `Mcp-Name` headers; the answer checked for `resultType: complete` and the sum).\n", run.http_calls);
    let _ = writeln!(
        s,
        "| clients | session calls/s | p50 µs | p99 µs | stateless calls/s | p50 µs | p99 µs | stateless ÷ session (calls/s) |"
    );
    let _ = writeln!(s, "|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &c in ERA_CLIENTS {
        let session = m(&format!("http-era/session/{c}/rps"));
        let stateless = m(&format!("http-era/stateless/{c}/rps"));
        let _ = writeln!(
            s,
            "| {c} | {} | {} | {} | {} | {} | {} | {} |",
            cell(session),
            cell(m(&format!("http-era/session/{c}/p50"))),
            cell(m(&format!("http-era/session/{c}/p99"))),
            cell(stateless),
            cell(m(&format!("http-era/stateless/{c}/p50"))),
            cell(m(&format!("http-era/stateless/{c}/p99"))),
            fmt_ratio(res.paired(
                &format!("http-era/stateless/{c}/rps"),
                &format!("http-era/session/{c}/rps")
            )),
        );
    }
    let _ = writeln!(s);

    let _ = writeln!(s, "### Memory\n");
    let _ = writeln!(s, "Idle: resident size (`VmRSS`) of each one-tool stdio server 300 ms after one call; `purra without validation` is the same server built without purra-protocol's `validation` feature (JSON Schema 2020-12 validation of every tool's arguments; rmcp 3.11 has no JSON Schema validator and checks arguments by their `Deserialize` alone, as purra does without the feature), so that row and rmcp's compare feature for feature. Per session: the server's resident growth after {HELD} more sessions were opened (and left idle, initialized, each one's connection closed once it was: a session, not a connection), divided by {HELD}; per WebSocket connection the same with {HELD_WS} connections to purra's WebSocket server (it serves 256 at once by default; rmcp, the TypeScript and the Python SDK have no WebSocket server).\n");
    let _ = writeln!(
        s,
        "| server | idle resident | bytes per HTTP session | bytes per WebSocket connection |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|");
    for sv in ["purra", "purra-novalidation", "rmcp", "ts", "py"] {
        let ws = if sv == "purra" {
            cell(m("mem/ws/purra"))
        } else {
            "—".into()
        };
        let session = if sv == "purra-novalidation" {
            "—".into()
        } else {
            cell(m(&format!("mem/http-session/{sv}")))
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {ws} |",
            http_name(sv),
            m(&format!("mem/idle/{sv}"))
                .map_or_else(|| "FAILED".into(), |b| format!("{:.1} MiB", b / 1048576.0)),
            session,
        );
    }

    let _ = writeln!(s, "\n### A large catalog through the adapter\n");
    let _ = writeln!(s, "A purra server lists N tools with input schemas of about B bytes (string properties with descriptions and bounds, in Core's strict profile); the client process connects (this includes starting the server process, which compiles every schema at registration, and purra's client fetching every page, 100 tools a page), then `discover_read_tools` binds every tool under the default `Limits` (1 MiB catalog, 64 KiB per schema): pages, the strict-profile compilation of every schema, the snapshot and its digest. Peak is the client process's `VmHWM`.\n");
    let _ = writeln!(s, "| tools × schema bytes | catalog bytes | connect ms | discover ms | outcome | peak resident |");
    let _ = writeln!(s, "|---|---:|---:|---:|---|---:|");
    for &(t, b) in CATALOGS {
        let k = format!("catalog/{t}x{b}");
        let _ = writeln!(
            s,
            "| {t} × {b} | {} | {} | {} | `{}` | {} |",
            cell(m(&format!("{k}/catalog_bytes"))),
            m(&format!("{k}/connect_ms")).map_or_else(|| "FAILED".into(), |v| format!("{v:.1}")),
            m(&format!("{k}/discover_ms")).map_or_else(|| "FAILED".into(), |v| format!("{v:.1}")),
            notes.get(&k).map_or("FAILED", String::as_str),
            m(&format!("{k}/peak_rss_bytes"))
                .map_or_else(|| "FAILED".into(), |v| format!("{:.1} MiB", v / 1048576.0)),
        );
    }

    let _ = writeln!(s, "\n### The durable store under concurrency\n");
    let _ = writeln!(s, "`store-bench`: the disk's fsync rate (4 KiB written in place and `sync_all`), then approval cycles (`decide`, `check_and_claim`, `complete`: three durable transactions, answers checked and read back) for one run at a time and for 16 concurrent runs on one purra-sqlite store, in `target/bench/store`; then the same three durable writes a cycle on SQLite's floor: the same SQLite build and settings (WAL, `synchronous=FULL`), each write one small row in a table with no index, concurrent writes committed together by one writer thread, each run a thread waiting for its write's commit, every write counted back.\n");
    let _ = writeln!(
        s,
        "| store | fsync/s | 1 run: cycles/s | ÷ fsync rate | 16 runs: cycles/s | ÷ fsync rate |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|");
    for (label, one, sixteen) in [
        ("purra-sqlite", "store/1", "store/16"),
        ("SQLite floor", "store/floor1", "store/floor16"),
    ] {
        let _ = writeln!(
            s,
            "| {label} | {} | {} | {} | {} | {} |",
            cell(m("store/fsync")),
            cell(m(one)),
            fmt_ratio(res.paired(one, "store/fsync")),
            cell(m(sixteen)),
            fmt_ratio(res.paired(sixteen, "store/fsync")),
        );
    }

    let _ = writeln!(
        s,
        "\nThe floors of a cycle's rows, measured after them (`store-bench`'s `SqlCycle`): the rows the cycles above leave (the decision, the claim, the outcome, an audit row each; approvals prepared untimed), and the rows a gateway's client-approved cycle leaves (the approval with its run and two audit rows; the decision with the claim and two; the outcome with the run dropped and two), each in a file purra-sqlite migrated (its indexes and constraints), written by plain SQL on one connection with the store's settings, one cycle at a time, every cycle counted back: {} and {} cycles/s, {} and {} the SQLite floor's cycles. purra-sqlite's 1 run ÷ the floor of its rows: {}.\n",
        cell(m("store/rows-floor")),
        cell(m("store/gateway-rows-floor")),
        fmt_ratio(res.paired("store/rows-floor", "store/floor1")),
        fmt_ratio(res.paired("store/gateway-rows-floor", "store/floor1")),
        fmt_ratio(res.paired("store/1", "store/rows-floor")),
    );

    scale::report(res, &mut s);

    gateway::report(res, &mut s, run.calls, run.http_calls);
    targets(res, &mut s, false);
    s
}

/// The report of a `--gateway` run: the gateway's section and the targets it measured.
fn gateway_report(res: &Results, run: &RunInfo) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Measured {} by `bench-suite --gateway` ({} rounds, {:.0} minutes; load average before: {}, after: {}).\n",
        run.date, run.rounds, run.minutes, run.load_before, run.load_after
    );
    gateway::report(res, &mut s, run.calls, run.http_calls);
    targets(res, &mut s, true);
    s
}

fn upstream_report(res: &Results, run: &RunInfo) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Measured {} by `bench-suite --upstream` ({} rounds, {:.0} minutes; load average before: {}, after: {}).\n",
        run.date, run.rounds, run.minutes, run.load_before, run.load_after
    );
    gateway::upstream_report(res, &mut s, run.http_calls);
    let _ = writeln!(s, "| target | measured | |");
    let _ = writeln!(s, "|---|---:|---|");
    upstream_targets(res, &mut s);
    s
}

/// The targets of the rows with an HTTP upstream.
fn upstream_targets(res: &Results, s: &mut String) {
    let target = |s: &mut String, what: &str, r: Option<Spread>, at_least: f64| {
        let _ = writeln!(
            s,
            "| {what} | {} | {} |",
            fmt_ratio(r),
            verdict(r, at_least)
        );
    };
    target(
        s,
        "HTTP in front of HTTP, 16 sessions: purra gateway ≥ 0.5× the upstream alone",
        res.paired("gw/up/gateway/16/rps", "gw/up/direct/16/rps"),
        0.5,
    );
    for c in gateway::FRONT_CLIENTS {
        target(
            s,
            &format!(
                "HTTP in front of HTTP, {c} session{}: purra gateway ≥ 100× ContextForge's calls/s",
                if *c == 1 { "" } else { "s" }
            ),
            res.paired(
                &format!("gw/up/gateway/{c}/rps"),
                &format!("gw/up/contextforge/{c}/rps"),
            ),
            100.0,
        );
    }
}

/// The targets section; with `gateway_only`, the targets a `--gateway` run measures.
fn targets(res: &Results, s: &mut String, gateway_only: bool) {
    let _ = writeln!(s, "### Targets (ratios paired round by round)\n");
    let _ = writeln!(s, "Re-based on the floors measured: a typed tokio implementation cannot beat the serde floor, and no store on SQLite the SQLite floor, so purra's stdio round trips and the durable store are held to them (the blocking floor's ratio stays in the stdio table); the gateway to what it adds to a direct read and to the proxy a user would pick instead. Each ratio is computed in every round from the two values measured in that round and shown as the median over rounds with the lowest and highest in parentheses; a target is met when the median is. A pair with a failed round reads — and FAILED.\n");
    let _ = writeln!(s, "| target | measured | |");
    let _ = writeln!(s, "|---|---:|---|");
    let pp = "stdio/purra/purra";
    let sf = "stdio/floor-serde/floor-serde";
    // Not targets: a target's ratio for a write cycle's own floor (its rows in the store's
    // schema, no MCP, no gateway), which no gateway on that schema passes while it commits each
    // cycle's writes in transactions of their own (batching several callers' writes into one
    // transaction is the one way past it, and the targets' commits per cycle do not count it).
    let ceiling = |s: &mut String, what: &str, r: Option<Spread>, target: f64| {
        let _ = writeln!(
            s,
            "| {what} | {} | {} |",
            fmt_ratio(r),
            match r {
                Some(r) if r.median < target => "the ceiling: the target is above it",
                Some(_) => "the ceiling: the target is below it",
                None => "FAILED",
            }
        );
    };
    let target = |s: &mut String, what: &str, r: Option<Spread>, at_least: f64| {
        let _ = writeln!(
            s,
            "| {what} | {} | {} |",
            fmt_ratio(r),
            verdict(r, at_least)
        );
    };
    target(
        s,
        "purra, sequential, ≥ 0.9× the serde floor",
        res.paired(&format!("{pp}/seq"), &format!("{sf}/seq")),
        0.9,
    );
    target(
        s,
        "purra, 16 in flight, ≥ 0.9× the serde floor",
        res.paired(&format!("{pp}/conc"), &format!("{sf}/conc")),
        0.9,
    );
    if !gateway_only {
        target(
            s,
            "durable store, 1 run, ≥ 0.9× the SQLite floor",
            res.paired("store/1", "store/floor1"),
            0.9,
        );
        ceiling(
            s,
            "the one above for the floor of its rows (`store-bench`'s `SqlCycle`)",
            res.paired("store/rows-floor", "store/floor1"),
            0.9,
        );
        target(
            s,
            &format!(
                "SQLite write cycles through the gateway, one at a time, ≥ 0.8 × (the SQLite floor's commits/s ÷ {} commits)",
                gateway::COMMITS_PER_CYCLE
            ),
            // The floor's cycles are of three durable writes each: its commits/s is three times
            // its cycles/s.
            res.rounds.combine(&["gw/writes/sqlite/seq", "store/floor1"], |v| {
                v[0] / (v[1] * 3.0 / gateway::COMMITS_PER_CYCLE)
            }),
            0.8,
        );
        ceiling(
            s,
            "the one above for the floor of a gateway cycle's rows (`store-bench`'s `SqlCycle`)",
            res.paired("store/gateway-rows-floor", "store/floor1"),
            0.8,
        );
    }
    target(
        s,
        "a read through the gateway over stdio, 16 in flight, ≥ 0.5× the direct pair",
        res.paired("gw/stdio/conc", &format!("{pp}/conc")),
        0.5,
    );
    for c in gateway::FRONT_CLIENTS {
        target(
            s,
            &format!(
                "HTTP, {c} session{}: purra gateway ≥ 3× supergateway's calls/s (`--stateful`, its fastest)",
                if *c == 1 { "" } else { "s" }
            ),
            res.paired(&format!("gw/http/gateway/{c}/rps"), &format!("gw/http/supergateway/{c}/rps")),
            3.0,
        );
    }
    target(
        s,
        "PostgreSQL write cycles, 16 in flight ≥ 4× one at a time",
        res.paired("gw/writes/postgres/conc", "gw/writes/postgres/seq"),
        4.0,
    );
    target(
        s,
        "PostgreSQL write cycles, 16 in flight ≥ 0.5× (pgbench at 16 clients ÷ 3 commits)",
        res.paired("gw/writes/postgres/conc", "gw/writes/pgfloor16"),
        0.5,
    );
    ceiling(
        s,
        "the two above for a cycle's rows run by pgbench (`bench/pg-cycle-floor.sql`): 16 ÷ 1 clients",
        res.paired("gw/writes/pgcycle16", "gw/writes/pgcycle1"),
        4.0,
    );
    ceiling(
        s,
        "… and its 16 clients ÷ (pgbench at 16 clients ÷ 3 commits)",
        res.paired("gw/writes/pgcycle16", "gw/writes/pgfloor16"),
        0.5,
    );
    upstream_targets(res, s);
    let added = gateway::added_p50(res);
    let _ = writeln!(
        s,
        "| the gateway adds ≤ 50 µs to a read's p50 over stdio | {} | {} (a bare relay adds {}) |",
        added.map_or_else(|| "—".into(), gateway::micros),
        match added {
            Some(a) if a.median <= 50.0 => "met",
            Some(_) => "not met",
            None => "FAILED",
        },
        gateway::relay_p50(res).map_or_else(|| "—".into(), gateway::micros)
    );
    if !gateway_only {
        scale::targets(res, s);
    }

    if gateway_only {
        return;
    }
    let _ = writeln!(s, "\nTargets of issue 19 still tracked (the two it set against the blocking floor and the fsync rate are re-based above):\n");
    let _ = writeln!(s, "| target | measured | |");
    let _ = writeln!(s, "|---|---:|---|");
    let mut target = |what: &str, r: Option<Spread>, at_least: f64| {
        let _ = writeln!(
            s,
            "| {what} | {} | {} |",
            fmt_ratio(r),
            verdict(r, at_least)
        );
    };
    target(
        "16 in flight ≥ 3× rmcp `stdio_pipes()`",
        res.paired(&format!("{pp}/conc"), "stdio/rmcp/rmcp-pipes/conc"),
        3.0,
    );
    target(
        "16 in flight ≥ 7× the TypeScript SDK",
        res.paired(&format!("{pp}/conc"), "stdio/ts/ts/conc"),
        7.0,
    );
    target(
        "16 in flight ≥ 50× the Python SDK",
        res.paired(&format!("{pp}/conc"), "stdio/py/py/conc"),
        50.0,
    );
    for c in [16, 256] {
        target(
            &format!("HTTP, {c} sessions: ≥ 2× rmcp's calls/s (rmcp + TCP_NODELAY)"),
            res.paired(
                &format!("http/purra/{c}/rps"),
                &format!("http/rmcp-nodelay/{c}/rps"),
            ),
            2.0,
        );
        target(
            &format!(
                "HTTP, {c} sessions: p99 no worse than rmcp's (rmcp + TCP_NODELAY p99 ÷ purra p99)"
            ),
            res.paired(
                &format!("http/rmcp-nodelay/{c}/p99"),
                &format!("http/purra/{c}/p99"),
            ),
            1.0,
        );
    }
    target(
        "idle one-tool server ≤ rmcp's resident size (rmcp ÷ purra)",
        res.paired("mem/idle/rmcp", "mem/idle/purra"),
        1.0,
    );
    target(
        "the same, feature-equal: purra without `validation` (rmcp ÷ purra)",
        res.paired("mem/idle/rmcp", "mem/idle/purra-novalidation"),
        1.0,
    );
    target(
        "idle HTTP session ≤ 8 KiB (8 KiB ÷ purra's bytes)",
        res.rounds
            .combine(&["mem/http-session/purra"], |v| 8192.0 / v[0]),
        1.0,
    );
    target(
        "durable store, 16 runs ≥ 1× the fsync rate",
        res.rounds.spread("store/ratio16"),
        1.0,
    );
    let _ = writeln!(
        s,
        "\nFor scale, the serde floor (no engine at all) in the same run: sequential {} the \
         blocking floor; 16 in flight {} the TypeScript SDK.",
        fmt_ratio(res.paired(&format!("{sf}/seq"), "stdio/floor/floor/seq")),
        fmt_ratio(res.paired(&format!("{sf}/conc"), "stdio/ts/ts/conc")),
    );
    let _ = writeln!(
        s,
        "The SQLite floor (one small row a write) in the same run: 1 run {} the fsync rate, 16 \
         runs {}.",
        fmt_ratio(res.rounds.spread("store/floor-ratio1")),
        fmt_ratio(res.rounds.spread("store/floor-ratio16")),
    );
}

fn write_outputs(res: &Results, report: &str) {
    let m = |k: &str| res.median(k);
    let _ = std::fs::create_dir_all("target/bench");
    // Per key, `[round, value]` pairs (`null` for a failed run).
    let raw: BTreeMap<&String, Vec<(usize, Option<f64>)>> = res
        .rounds
        .all()
        .iter()
        .map(|(k, v)| (k, v.iter().map(|(r, x)| (*r, *x)).collect()))
        .collect();
    let _ = std::fs::write(
        "target/bench/results.json",
        json!({"rounds": raw, "failures": res.failures}).to_string(),
    );
    let _ = std::fs::create_dir_all("bench/charts");
    let pairs = |metric: &str| -> Vec<Bar> {
        PAIRS
            .iter()
            .map(|&(c, sv)| Bar {
                label: pair_label(c, sv),
                value: m(&format!("stdio/{c}/{sv}/{metric}")),
                accent: c == "purra" || sv == "purra",
            })
            .collect()
    };
    let floor_ratio = |metric: &str| -> Vec<Bar> {
        PAIRS
            .iter()
            .map(|&(c, sv)| Bar {
                label: format!(
                    "{} ({})",
                    pair_label(c, sv),
                    if metric == "seq" { 1 } else { 16 }
                ),
                value: res
                    .paired(
                        &format!("stdio/{c}/{sv}/{metric}"),
                        &format!("stdio/floor/floor/{metric}"),
                    )
                    .map(|r| r.median),
                accent: c == "purra" || sv == "purra",
            })
            .collect()
    };
    let charts = [
        (
            "stdio-sequential.svg",
            Chart {
                title: "stdio, one call at a time: calls/s (median)".into(),
                unit: "/s".into(),
                bars: pairs("seq"),
                reference: None,
            },
        ),
        (
            "stdio-concurrent.svg",
            Chart {
                title: "stdio, 16 calls in flight: calls/s (median)".into(),
                unit: "/s".into(),
                bars: pairs("conc"),
                reference: None,
            },
        ),
        (
            "stdio-floor-ratio.svg",
            Chart {
                title:
                    "stdio: calls/s ÷ the floor's, paired per round (sequential, then 16 in flight)"
                        .into(),
                unit: "×".into(),
                bars: floor_ratio("seq")
                    .into_iter()
                    .chain(floor_ratio("conc"))
                    .collect(),
                reference: Some(("floor = 1×".into(), 1.0)),
            },
        ),
        (
            "http.svg",
            Chart {
                title: "Streamable HTTP over loopback: calls/s (median)".into(),
                unit: "/s".into(),
                bars: HTTP_SERVERS
                    .iter()
                    .flat_map(|&sv| HTTP_CLIENTS.iter().map(move |&c| (sv, c)))
                    .map(|(sv, c)| Bar {
                        label: format!("{}, {c} sessions", http_name(sv)),
                        value: m(&format!("http/{sv}/{c}/rps")),
                        accent: sv == "purra",
                    })
                    .collect(),
                reference: None,
            },
        ),
    ];
    for (file, chart) in charts {
        let _ = std::fs::write(Path::new("bench/charts").join(file), chart.render());
    }
    gateway::charts(res, Path::new("bench/charts"));
    let path = "BENCHMARKS.md";
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let (begin, end) = ("<!-- suite:begin -->", "<!-- suite:end -->");
    let block = format!("{begin}\n{report}{end}");
    let new = match (text.find(begin), text.find(end)) {
        (Some(a), Some(b)) if b > a => format!("{}{block}{}", &text[..a], &text[b + end.len()..]),
        _ => format!("{text}\n## The side-by-side suite\n\n{block}\n"),
    };
    let _ = std::fs::write(path, new);
}
