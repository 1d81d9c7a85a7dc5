//! The gateway's rows of the suite: what `purra gateway` costs a call beside a direct connection,
//! beside the MCP proxies a user would pick instead, for a durable write, and across a fleet.
//!
//! - stdio: purra's `bench-client` against `purra gateway` (stdio, `echo` bound as a read) in
//!   front of `purra-bench-server`, beside the direct pair of the stdio table;
//! - Streamable HTTP: the raw load client (1 and 16 sessions, `add`) against `purra gateway`
//!   (HTTP, the same server behind it over stdio), `supergateway` 4.0.0 (`--stateful`, a child
//!   per session; and as it runs by default, stateless: a child per request) and `mcp-proxy`
//!   6.7.19 (`--server stream`), each in front of the same stdio `purra-bench-server`, beside the
//!   direct HTTP server of the HTTP table;
//! - write cycles (`gateway-bench`: call, approval by the client's own elicitation, claim, send,
//!   receipt) through one gateway on a SQLite file and on PostgreSQL, one at a time and 16 in
//!   flight, beside PostgreSQL's own commit rate at 16 clients (pgbench) in the same round;
//! - a fleet: 1, 2 and 3 gateways (HTTP, one PostgreSQL store, each with its own stdio upstream)
//!   behind HAProxy (sessions sticky by `Mcp-Session-Id`), 16 sessions of `add`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use purra_bench::http::load;
use purra_bench::svg::{Bar, Chart};

use purra_bench::rounds::Spread;

use super::{cell, field, fmt_ratio, free_port, run_json, stdio_run, Env, Results, Running};

/// The proxies of the HTTP rows, in table order: (key, label).
pub(super) const HTTP_FRONTS: &[(&str, &str)] = &[
    ("gateway", "purra gateway"),
    ("supergateway", "supergateway --stateful"),
    (
        "supergateway-stateless",
        "supergateway (default: stateless)",
    ),
    ("mcp-proxy", "mcp-proxy"),
];

/// Session counts of the HTTP rows.
pub(super) const FRONT_CLIENTS: &[usize] = &[1, 16];

/// Instances of the fleet rows.
pub(super) const FLEET: &[usize] = &[1, 2, 3];

/// Sessions of the fleet rows.
pub(super) const FLEET_CLIENTS: usize = 16;

/// The durable commits of one write cycle decided by the client's user (the approval with its
/// run, the decision with the claim, the outcome with its receipt): what divides PostgreSQL's own
/// commit rate into the cycles it allows.
pub(super) const COMMITS_PER_CYCLE: f64 = 3.0;

/// Runs `cmd` to its end with no input, its output and errors kept: what it printed.
async fn output(mut cmd: tokio::process::Command) -> Result<std::process::Output, String> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| format!("cannot start {:?}: {e}", cmd.as_std().get_program()))
}

/// Runs `sql` with `psql` on `url`, unaligned and tuples only: its output.
async fn psql(url: &str, sql: &str) -> Result<String, String> {
    let mut cmd = tokio::process::Command::new("psql");
    cmd.args(["-q", "-X", "-At", "-v", "ON_ERROR_STOP=1", url, "-c", sql]);
    let out = output(cmd).await?;
    if !out.status.success() {
        return Err(format!(
            "psql: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Debian's `pgbench` (`-j 2`, 5 s, no vacuum) at `clients` clients on `url` with the script
/// `script` and any `more` arguments: (transactions per second, transactions processed).
async fn pgbench(
    url: &str,
    clients: usize,
    script: &Path,
    more: &[&str],
) -> Result<(f64, u64), String> {
    let mut cmd = tokio::process::Command::new("pgbench");
    cmd.args(["-n", "-j", "2", "-T", "5", "-c", &clients.to_string()])
        .args(more)
        .arg("-f")
        .arg(script)
        .arg(url);
    let out = output(cmd).await?;
    let text = String::from_utf8_lossy(&out.stdout);
    let after = |prefix: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .and_then(|rest| rest.split_whitespace().next())
            .map(str::to_owned)
    };
    let tps = after("tps = ").and_then(|n| n.parse().ok());
    let processed = after("number of transactions actually processed: ")
        .and_then(|n| n.split('/').next().and_then(|n| n.parse().ok()));
    match (out.status.success(), tps, processed) {
        (true, Some(tps), Some(processed)) => Ok((tps, processed)),
        _ => Err(format!(
            "pgbench {}: {} {}",
            out.status,
            text.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

/// PostgreSQL's own commit rate at `clients` clients on the server of `url`: `pgbench`, each
/// transaction one `INSERT` committed on its own into a table of a schema of its own (created
/// first with `psql`, dropped after).
async fn pgbench_tps(url: &str, clients: usize) -> Result<f64, String> {
    let schema = format!("bench_floor_{}", std::process::id());
    psql(
        url,
        &format!(
            "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}; \
             CREATE TABLE {schema}.floor (id bigserial PRIMARY KEY, at timestamptz DEFAULT now())"
        ),
    )
    .await?;
    let script = dir().join(format!("{schema}.sql"));
    std::fs::write(
        &script,
        format!("INSERT INTO {schema}.floor DEFAULT VALUES;\n"),
    )
    .map_err(|e| format!("cannot write {}: {e}", script.display()))?;
    let ran = pgbench(url, clients, &script, &[]).await;
    let _ = std::fs::remove_file(&script);
    let _ = psql(url, &format!("DROP SCHEMA IF EXISTS {schema} CASCADE")).await;
    ran.map(|(tps, _)| tps)
}

/// The script of [`pgbench_cycles`].
const CYCLE_FLOOR: &str = "bench/pg-cycle-floor.sql";

/// The floor of a write cycle on PostgreSQL at `clients` clients: `pgbench` running
/// `bench/pg-cycle-floor.sql` (a cycle's rows in three one-statement transactions, each announced
/// after its commit) on a fresh schema that purra-postgres migrated; cycles per second. Every
/// cycle pgbench counts is checked in the schema afterwards (a cycle the clock cut may be left
/// part done, at most one a client), then the schema is dropped.
async fn pgbench_cycles(url: &str, clients: usize) -> Result<f64, String> {
    let schema = format!("bench_cycle_floor_{}_{clients}", std::process::id());
    let sep = if url.contains('?') { '&' } else { '?' };
    let _ = psql(url, &format!("DROP SCHEMA IF EXISTS {schema} CASCADE")).await;
    drop(
        purra_postgres::PostgresStore::connect(&format!("{url}{sep}schema={schema}"))
            .await
            .map_err(|e| format!("cannot migrate {schema}: {e}"))?,
    );
    psql(
        url,
        &format!(
            "INSERT INTO {schema}.owners (owner, pid, opened_at_ns, heartbeat_at_ns, lease_ns) \
             VALUES ('pgbench', 0, 1, 1, 1000000000)"
        ),
    )
    .await?;
    let on_schema = format!("{url}{sep}options=-csearch_path%3D{schema}");
    let ran = pgbench(
        &on_schema,
        clients,
        Path::new(CYCLE_FLOOR),
        &["-M", "prepared"],
    )
    .await;
    let counted = psql(
        url,
        &format!(
            "SELECT (SELECT count(*) FROM {schema}.approvals), \
                    (SELECT count(*) FROM {schema}.claims), \
                    (SELECT count(*) FROM {schema}.claims WHERE outcome = 'committed'), \
                    (SELECT count(*) FROM {schema}.audit WHERE owner = 'pgbench')"
        ),
    )
    .await;
    let _ = psql(url, &format!("DROP SCHEMA IF EXISTS {schema} CASCADE")).await;
    let (tps, cycles) = ran?;
    let n: Vec<u64> = counted?.split('|').filter_map(|n| n.parse().ok()).collect();
    let [approvals, claims, committed, audit] = n[..] else {
        return Err(format!("{schema}: cannot count its rows"));
    };
    let cut = clients as u64;
    if committed < cycles
        || approvals - committed > cut
        || claims - committed > cut
        || audit != 2 * (approvals + claims + committed)
    {
        return Err(format!(
            "{schema}: {cycles} cycles left {approvals} approvals, {claims} claims \
             ({committed} committed) and {audit} audit rows"
        ));
    }
    Ok(tps)
}

fn dir() -> PathBuf {
    PathBuf::from("target/bench/gateway")
}

fn absolute(p: &str) -> String {
    std::fs::canonicalize(p).map_or_else(|_| p.to_owned(), |p| p.display().to_string())
}

/// A gateway configuration binding the benchmark server's `echo` and `add` as reads, the server
/// behind it over stdio.
fn read_config(env: &Env, name: &str, listen: &str, db: &str) -> Result<String, String> {
    let server = absolute(&env.bin("purra-bench-server"));
    config_with(name, listen, db, &format!("command = [{server:?}]"))
}

/// [`read_config`] with `upstream` as the upstream's line (`command = […]` or `url = "…"`).
fn config_with(name: &str, listen: &str, db: &str, upstream: &str) -> Result<String, String> {
    std::fs::create_dir_all(dir()).map_err(|e| e.to_string())?;
    let text = format!(
        r#"[gateway]
name = "bench"
db = {db:?}
listen = "{listen}"
max_calls_per_minute_per_caller = 60000

[upstreams.bench]
{upstream}

[reads.echo]
upstream = "bench"
title = "Echo"
concurrency = "safe"
scope = "open"

[reads.add]
upstream = "bench"
title = "Add"
concurrency = "safe"
scope = "open"
"#
    );
    let file = dir().join(format!("{name}.toml"));
    std::fs::write(&file, text).map_err(|e| e.to_string())?;
    Ok(absolute(&file.display().to_string()))
}

/// `bench-client` against `purra gateway` over stdio.
pub(super) async fn stdio(env: &Env, res: &mut Results, calls: usize) {
    let key = "gw/stdio";
    let config = match read_config(env, "read-stdio", "stdio", "read-stdio.db") {
        Ok(c) => c,
        Err(e) => return res.fail(key, e),
    };
    let front = [
        absolute(&env.bin("purra")),
        "gateway".into(),
        "--config".into(),
        config,
    ];
    let cmd = client_against(env, calls, front);
    stdio_run(res, key, "purra → purra gateway → purra", &cmd).await;
}

/// `bench-client` against `stdio-relay` in front of the benchmark server: what a process in the
/// middle costs before it does any work (the floor of the gateway's added p50).
pub(super) async fn relay(env: &Env, res: &mut Results, calls: usize) {
    let front = [
        absolute(&env.bin("stdio-relay")),
        "--".into(),
        absolute(&env.bin("purra-bench-server")),
    ];
    let cmd = client_against(env, calls, front);
    stdio_run(res, "gw/relay", "purra → stdio-relay → purra", &cmd).await;
}

/// `bench-client` making `calls` calls one at a time, then with 16 in flight, to `server`.
fn client_against(
    env: &Env,
    calls: usize,
    server: impl IntoIterator<Item = String>,
) -> Vec<String> {
    let mut cmd = vec![
        env.bin("bench-client"),
        "--calls".into(),
        calls.to_string(),
        "--concurrency".into(),
        "16".into(),
        "--".into(),
    ];
    cmd.extend(server);
    cmd
}

/// The command of front `which` on `port`, in front of the stdio benchmark server.
fn front(env: &Env, which: &str, port: u16) -> Result<Vec<String>, String> {
    let server = absolute(&env.bin("purra-bench-server"));
    let node = env.node.display().to_string();
    Ok(match which {
        "gateway" => {
            let config = read_config(
                env,
                "read-http",
                &format!("127.0.0.1:{port}"),
                "read-http.db",
            )?;
            vec![
                absolute(&env.bin("purra")),
                "gateway".into(),
                "--config".into(),
                config,
            ]
        }
        "supergateway" | "supergateway-stateless" => {
            let mut cmd = vec![
                node,
                "peers/proxies/node_modules/supergateway/dist/index.js".into(),
                "--stdio".into(),
                server,
                "--outputTransport".into(),
                "streamableHttp".into(),
                "--port".into(),
                port.to_string(),
                "--logLevel".into(),
                "none".into(),
            ];
            if which == "supergateway" {
                cmd.push("--stateful".into());
            }
            cmd
        }
        "mcp-proxy" => vec![
            node,
            "peers/proxies/node_modules/mcp-proxy/dist/bin/mcp-proxy.mjs".into(),
            "--host".into(),
            "127.0.0.1".into(),
            "--port".into(),
            port.to_string(),
            "--server".into(),
            "stream".into(),
            "--".into(),
            server,
        ],
        other => return Err(format!("no front {other}")),
    })
}

/// How many calls a run through front `which` makes, of `calls`: the proxies answer in
/// milliseconds (supergateway's default starts a process per request), so fewer.
fn calls_for(which: &str, calls: usize) -> usize {
    match which {
        "gateway" => calls,
        "supergateway-stateless" => calls / 200,
        _ => calls / 20,
    }
}

/// The raw load client through each front, at 1 and 16 sessions: a fresh front process for each
/// session count (so the gateway's per-caller limit, at its largest, 60 000 a minute with every
/// HTTP session one caller, starts full for each run).
pub(super) async fn http(env: &Env, res: &mut Results, calls: usize) {
    for &(which, label) in HTTP_FRONTS {
        for &clients in FRONT_CLIENTS {
            let key = format!("gw/http/{which}/{clients}");
            let port = free_port();
            let cmd = match front(env, which, port) {
                Ok(c) => c,
                Err(e) => {
                    res.fail(&key, e);
                    continue;
                }
            };
            let running = match Running::start(&cmd, port).await {
                Ok(r) => r,
                Err(e) => {
                    res.fail(&key, e);
                    continue;
                }
            };
            let url = format!("http://127.0.0.1:{port}/mcp");
            let n = calls_for(which, calls).max(clients * 4);
            match tokio::time::timeout(Duration::from_secs(300), load(&url, clients, n)).await {
                Ok(Ok(r)) => {
                    eprintln!(
                        "  HTTP {label:<34} {clients:>3} clients {:>7.0} calls/s p50 {:>7.0} µs p99 {:>8.0} µs",
                        r.calls_per_s, r.p50_us, r.p99_us
                    );
                    res.put(&format!("{key}/rps"), r.calls_per_s);
                    res.put(&format!("{key}/p50"), r.p50_us);
                    res.put(&format!("{key}/p99"), r.p99_us);
                }
                Ok(Err(e)) => res.fail(&key, e),
                Err(_) => res.fail(&key, "no end within 300 s".into()),
            }
            drop(running);
        }
    }
}

/// The fronts of the rows with an HTTP upstream, in table order: (key, label).
pub(super) const UPSTREAM_FRONTS: &[(&str, &str)] = &[
    ("gateway", "purra gateway"),
    ("contextforge", "ContextForge 1.0.7"),
];

/// A process group killed when dropped (ContextForge: a helper, gunicorn and its workers).
struct Group {
    child: tokio::process::Child,
}

impl Drop for Group {
    fn drop(&mut self) {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// A front in front of the HTTP upstream: its MCP endpoint, the `Authorization` it wants and
/// its processes (ended when dropped).
struct Front {
    url: String,
    auth: Option<String>,
    /// The name `add` has through it.
    tool: String,
    _gateway: Option<Running>,
    _group: Option<Group>,
}

/// Starts front `which` before the HTTP upstream at `upstream`.
async fn upstream_front(env: &Env, which: &str, upstream: &str) -> Result<Front, String> {
    let port = free_port();
    match which {
        "gateway" => {
            let config = config_with(
                "read-http-upstream",
                &format!("127.0.0.1:{port}"),
                "read-http-upstream.db",
                &format!("url = {upstream:?}"),
            )?;
            let cmd = vec![
                absolute(&env.bin("purra")),
                "gateway".into(),
                "--config".into(),
                config,
            ];
            let running = Running::start(&cmd, port).await?;
            Ok(Front {
                url: format!("http://127.0.0.1:{port}/mcp"),
                auth: None,
                tool: "add".into(),
                _gateway: Some(running),
                _group: None,
            })
        }
        "contextforge" => contextforge(env, port, upstream).await,
        other => Err(format!("no front {other}")),
    }
}

/// ContextForge as its own scripts run it, started by `bench/contextforge.py` (in its venv),
/// which registers `upstream` through the admin API and prints the virtual server's MCP URL and
/// a JWT on its first line of output.
async fn contextforge(env: &Env, port: u16, upstream: &str) -> Result<Front, String> {
    use tokio::io::AsyncBufReadExt;
    let python = env.contextforge.join("bin/python");
    if !python.exists() {
        return Err(format!(
            "ContextForge is not installed ({}: scripts/setup-peers.sh --bench)",
            python.display()
        ));
    }
    let state = dir().join("contextforge");
    let _ = std::fs::remove_dir_all(&state);
    std::fs::create_dir_all(&state).map_err(|e| e.to_string())?;
    let mut child = tokio::process::Command::new(&python)
        .args([
            "bench/contextforge.py",
            "--port",
            &port.to_string(),
            "--upstream",
            upstream,
            "--dir",
            &absolute(&state.display().to_string()),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start ContextForge: {e}"))?;
    let stdout = child.stdout.take().expect("piped");
    let group = Group { child };
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let line = tokio::time::timeout(Duration::from_secs(240), lines.next_line())
        .await
        .map_err(|_| "ContextForge: not ready within 240 s".to_owned())?
        .map_err(|e| e.to_string())?
        .ok_or("ContextForge: its helper ended before it was ready")?;
    let v: serde_json::Value =
        serde_json::from_str(&line).map_err(|e| format!("ContextForge: {e}: {line}"))?;
    if let Some(e) = v.get("error").and_then(serde_json::Value::as_str) {
        return Err(format!("ContextForge: {e}"));
    }
    let url = v["url"].as_str().ok_or("ContextForge: no url")?.to_owned();
    let token = v["token"].as_str().ok_or("ContextForge: no token")?;
    // The helper keeps running (and its group with it) until the group is killed.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(Front {
        url,
        auth: Some(format!("Bearer {token}")),
        // ContextForge names a tool by its gateway's slug and its own name.
        tool: "bench-add".into(),
        _gateway: None,
        _group: Some(group),
    })
}

/// How many calls a run through front `which` of the HTTP-upstream rows makes, of `calls`:
/// ContextForge answers in tens of milliseconds, so a few hundredths.
fn upstream_calls_for(which: &str, calls: usize, clients: usize) -> usize {
    match which {
        "contextforge" => (calls / 200).clamp(clients * 4, 400),
        _ => calls.max(clients * 4),
    }
}

/// The rows with an HTTP upstream: `purra-bench-server --http` alone, then each front of
/// [`UPSTREAM_FRONTS`] in front of it, at 1 and 16 sessions, in the same round (so each front's
/// ratio to the upstream alone is paired). The gateway starts afresh for each session count;
/// ContextForge (a minute to start and register) once a round.
pub(super) async fn http_upstream(env: &Env, res: &mut Results, calls: usize) {
    let port = free_port();
    let upstream = match Running::start(&env.http_server("purra", port), port).await {
        Ok(r) => r,
        Err(e) => return res.fail("gw/up", e),
    };
    let url = format!("http://127.0.0.1:{port}/mcp");
    let mut forge: Option<Result<Front, String>> = None;
    for &clients in FRONT_CLIENTS {
        let key = format!("gw/up/direct/{clients}");
        let target = (url.as_str(), None, "add");
        measure(res, &key, "upstream alone", target, clients, calls).await;
        for &(which, label) in UPSTREAM_FRONTS {
            let key = format!("gw/up/{which}/{clients}");
            let n = upstream_calls_for(which, calls, clients);
            let fresh;
            let front = if which == "contextforge" {
                // Started at its first row only: a second start would wipe the running one's
                // state directory (its SQLite database) under it.
                if forge.is_none() {
                    forge = Some(upstream_front(env, which, &url).await);
                }
                forge.as_ref().expect("started")
            } else {
                fresh = upstream_front(env, which, &url).await;
                &fresh
            };
            match front {
                Ok(f) => {
                    let target = (f.url.as_str(), f.auth.as_deref(), f.tool.as_str());
                    measure(res, &key, label, target, clients, n).await;
                }
                Err(e) => res.fail(&key, e.clone()),
            }
        }
    }
    drop(forge);
    drop(upstream);
}

/// One load run of `calls` over `clients` sessions against `target` (its URL, the
/// `Authorization` it wants, the name `add` has there), recorded under `key`.
async fn measure(
    res: &mut Results,
    key: &str,
    label: &str,
    (url, auth, tool): (&str, Option<&str>, &str),
    clients: usize,
    calls: usize,
) {
    let run = purra_bench::http::load_with(
        url,
        clients,
        calls,
        purra_bench::http::Era::Session(purra_bench::http::PROTOCOL_VERSION),
        auth,
        tool,
    );
    match tokio::time::timeout(Duration::from_secs(300), run).await {
        Ok(Ok(r)) => {
            eprintln!(
                "  HTTP→HTTP {label:<30} {clients:>3} clients {:>7.0} calls/s p50 {:>7.0} µs p99 {:>8.0} µs",
                r.calls_per_s, r.p50_us, r.p99_us
            );
            res.put(&format!("{key}/rps"), r.calls_per_s);
            res.put(&format!("{key}/p50"), r.p50_us);
            res.put(&format!("{key}/p99"), r.p99_us);
        }
        Ok(Err(e)) => res.fail(key, e),
        Err(_) => res.fail(key, "no end within 300 s".into()),
    }
}

/// The table of the rows with an HTTP upstream.
pub(super) fn upstream_report(res: &Results, s: &mut String, http_calls: usize) {
    let m = |k: &str| res.median(k);
    let _ = writeln!(s, "In front of an HTTP upstream: `purra-bench-server --http` alone, then the same server behind `purra gateway` (`url = \"http://127.0.0.1:PORT/mcp\"`, its default SQLite store holding the HTTP sessions and their event logs) and behind ContextForge 1.0.7 (`mcp-contextforge-gateway` from PyPI, started by `bench/contextforge.py` as its own scripts start it: gunicorn with uvicorn workers, SQLite, JWT on; every setting in BENCHMARKS.md), in the same round, the raw load client as above ({http_calls} calls a run; ContextForge a two-hundredth, at least 4 per session and at most 400). supergateway and mcp-proxy have no row: neither fronts an HTTP server with an HTTP endpoint (supergateway's HTTP inputs, `--sse` and `--streamableHttp`, bridge to stdio only; mcp-proxy starts a stdio command).\n");
    let _ = writeln!(
        s,
        "| front → HTTP server | sessions | calls/s | p50 µs | p99 µs | calls/s ÷ upstream alone | purra gateway ÷ it (calls/s) |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|");
    for &c in FRONT_CLIENTS {
        let rows = std::iter::once(("direct", "purra-bench-server --http alone"))
            .chain(UPSTREAM_FRONTS.iter().copied());
        for (which, label) in rows {
            let k = format!("gw/up/{which}/{c}");
            // Exactly this key: a prefix would take the 16-session row's failure for the 1's.
            if res.failures.contains_key(&k) || m(&format!("{k}/rps")).is_none() {
                let why = res
                    .failures
                    .get(&k)
                    .or_else(|| res.failures.get("gw/up"))
                    .map_or("", String::as_str);
                let _ = writeln!(s, "| {label} | {c} | FAILED: {why} | | | | |");
                continue;
            }
            let _ = writeln!(
                s,
                "| {label} | {c} | {} | {} | {} | {} | {} |",
                cell(m(&format!("{k}/rps"))),
                cell(m(&format!("{k}/p50"))),
                cell(m(&format!("{k}/p99"))),
                fmt_ratio(res.paired(&format!("{k}/rps"), &format!("gw/up/direct/{c}/rps"))),
                if which == "gateway" {
                    "—".to_owned()
                } else {
                    fmt_ratio(res.paired(&format!("gw/up/gateway/{c}/rps"), &format!("{k}/rps")))
                },
            );
        }
    }
    let _ = writeln!(s);
}

/// Write cycles through one gateway on SQLite and on PostgreSQL (`postgres`: the server's URL;
/// each run a fresh schema).
pub(super) async fn writes(env: &Env, res: &mut Results, calls: usize, postgres: Option<&str>) {
    let base = dir().join("writes");
    // A fresh SQLite file each round; the directory exists before its path is made absolute.
    let _ = std::fs::remove_dir_all(&base);
    if let Err(e) = std::fs::create_dir_all(&base) {
        for which in ["sqlite", "postgres"] {
            res.fail(
                &format!("gw/writes/{which}"),
                format!("cannot create {}: {e}", base.display()),
            );
        }
        return;
    }
    let n = std::process::id();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() % 1_000_000_000);
    let stores = [
        (
            "sqlite",
            Some(absolute(&base.display().to_string()) + "/writes.db"),
        ),
        (
            "postgres",
            postgres.map(|u| format!("{u}?schema=bench_gw_{n}_{nanos}")),
        ),
    ];
    for (which, db) in stores {
        let key = format!("gw/writes/{which}");
        let Some(db) = db else {
            res.fail(
                &key,
                "no PostgreSQL server: PURRA_BENCH_POSTGRES is not set (bench/run.sh starts one)"
                    .into(),
            );
            continue;
        };
        let cmd = vec![
            env.bin("gateway-bench"),
            "--purra".into(),
            absolute(&env.bin("purra")),
            "--server".into(),
            absolute(&env.bin("purra-bench-server")),
            "--dir".into(),
            base.join(which).display().to_string(),
            "--db".into(),
            db,
            "--calls".into(),
            calls.to_string(),
        ];
        match run_json(&cmd, Duration::from_secs(600))
            .await
            .and_then(|v| {
                Ok([
                    field(&v, "sequential_cycles_per_s")?,
                    field(&v, "p50_us")?,
                    field(&v, "p99_us")?,
                    field(&v, "concurrent_cycles_per_s")?,
                ])
            }) {
            Ok([seq, p50, p99, conc]) => {
                eprintln!(
                    "  write cycles through the gateway on {which}: {seq:.0}/s one at a time (p50 {p50:.0} µs, p99 {p99:.0} µs), {conc:.0}/s with 16 in flight"
                );
                res.put(&format!("{key}/seq"), seq);
                res.put(&format!("{key}/p50"), p50);
                res.put(&format!("{key}/p99"), p99);
                res.put(&format!("{key}/conc"), conc);
            }
            Err(e) => res.fail(&key, e),
        }
    }
    // PostgreSQL's own commit rate at 16 clients, in the same round as its cycles.
    if let Some(url) = postgres {
        match pgbench_tps(url, 16).await {
            Ok(tps) => {
                eprintln!("  PostgreSQL's own commit rate (pgbench, 16 clients): {tps:.0} tps");
                res.put("gw/writes/pgbench16", tps);
                res.put("gw/writes/pgfloor16", tps / COMMITS_PER_CYCLE);
            }
            Err(e) => res.fail("gw/writes/pgbench16", e),
        }
        // The cycle's own floor: its rows in the fewest round trips, run by pgbench.
        for clients in [1, 16] {
            let key = format!("gw/writes/pgcycle{clients}");
            match pgbench_cycles(url, clients).await {
                Ok(rate) => {
                    eprintln!(
                        "  a write cycle's rows run by pgbench ({clients} client{}): {rate:.0} cycles/s",
                        if clients == 1 { "" } else { "s" }
                    );
                    res.put(&key, rate);
                }
                Err(e) => res.fail(&key, e),
            }
        }
    }
}

/// HAProxy's configuration in front of `ports` on `port`: round robin, with `sticky` sessions
/// sticky by `Mcp-Session-Id` (without, every request goes to the next instance and sessions
/// are resumed from the store), `/readyz` checked.
fn haproxy_config(port: u16, ports: &[u16], sticky: bool) -> String {
    let stick = if sticky {
        "stick-table type string len 128 size 100k expire 30m\n    \
         stick match req.hdr(Mcp-Session-Id)\n    stick store-response res.hdr(Mcp-Session-Id)\n    "
    } else {
        ""
    };
    let mut s = format!(
        "global\n    maxconn 4096\n\ndefaults\n    mode http\n    timeout connect 1s\n    \
         timeout client 300s\n    timeout server 300s\n    timeout http-keep-alive 10s\n    \
         timeout check 3s\n    option redispatch 1\n    retries 2\n\nlisten mcp\n    \
         bind 127.0.0.1:{port}\n    balance roundrobin\n    {stick}\
         option httpchk GET /readyz\n    http-check expect status 200\n    \
         default-server inter 1s fall 2 rise 1\n"
    );
    for (i, p) in ports.iter().enumerate() {
        let _ = writeln!(s, "    server g{} 127.0.0.1:{p} check", i + 1);
    }
    s
}

/// Whether `port` answers `/readyz` with 200.
async fn ready(port: u16) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut s) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return false;
    };
    let _ = s
        .write_all(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await;
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer).await;
    answer.starts_with(b"HTTP/1.1 200 OK")
}

/// The fleets measured: 1, 2 and 3 instances with sticky sessions (key `gw/fleet/N`), then 3 in
/// plain round robin, every session resumed from the store wherever a request lands
/// (`gw/fleet/rrN`: no key is another's prefix, so a failure shows on its own row).
pub(super) fn fleets() -> impl Iterator<Item = (usize, bool, String)> {
    FLEET
        .iter()
        .map(|&n| (n, true, format!("gw/fleet/{n}")))
        .chain(std::iter::once((3, false, "gw/fleet/rr3".to_owned())))
}

/// 1, 2 and 3 gateways behind HAProxy on one PostgreSQL schema, and 3 without stickiness.
pub(super) async fn fleet(env: &Env, res: &mut Results, calls: usize, postgres: Option<&str>) {
    let Some(postgres) = postgres else {
        res.fail(
            "gw/fleet",
            "no PostgreSQL server: PURRA_BENCH_POSTGRES is not set (bench/run.sh starts one)"
                .into(),
        );
        return;
    };
    let Some(haproxy) = env.haproxy.clone() else {
        res.fail("gw/fleet", "haproxy is missing (scripts/haproxy.sh)".into());
        return;
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() % 1_000_000_000);
    let db = format!(
        "{postgres}?schema=bench_fleet_{}_{nanos}",
        std::process::id()
    );
    for (n, sticky, key) in fleets() {
        let outcome = async {
            let mut instances = Vec::new();
            let mut ports = Vec::new();
            for i in 0..n {
                let port = free_port();
                let config = read_config(
                    env,
                    &format!("fleet-{n}-{sticky}-{i}"),
                    &format!("127.0.0.1:{port}"),
                    &db,
                )?;
                let cmd = vec![
                    absolute(&env.bin("purra")),
                    "gateway".into(),
                    "--config".into(),
                    config,
                ];
                instances.push(Running::start(&cmd, port).await?);
                ports.push(port);
            }
            for &p in &ports {
                let start = Instant::now();
                while !ready(p).await {
                    if start.elapsed() > Duration::from_secs(30) {
                        return Err(format!("127.0.0.1:{p} is not ready"));
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
            let lb = free_port();
            let cfg = dir().join(format!("haproxy-{n}-{sticky}.cfg"));
            std::fs::write(&cfg, haproxy_config(lb, &ports, sticky)).map_err(|e| e.to_string())?;
            let proxy = tokio::process::Command::new(&haproxy)
                .args(["-db", "-f", &cfg.display().to_string()])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| format!("cannot start haproxy: {e}"))?;
            purra_bench::http::wait_listening(([127, 0, 0, 1], lb).into(), Duration::from_secs(30))
                .await?;
            // HAProxy's first checks pass.
            tokio::time::sleep(Duration::from_millis(1500)).await;
            let url = format!("http://127.0.0.1:{lb}/mcp");
            let r = tokio::time::timeout(
                Duration::from_secs(300),
                load(&url, FLEET_CLIENTS, calls.max(FLEET_CLIENTS * 4)),
            )
            .await
            .map_err(|_| "no end within 300 s".to_owned())??;
            drop(proxy);
            drop(instances);
            Ok::<_, String>(r)
        }
        .await;
        match outcome {
            Ok(r) => {
                let how = if sticky { "sticky" } else { "round robin" };
                eprintln!(
                    "  fleet of {n} behind HAProxy ({how}), {FLEET_CLIENTS} sessions: {:>7.0} calls/s p50 {:>6.0} µs p99 {:>7.0} µs",
                    r.calls_per_s, r.p50_us, r.p99_us
                );
                res.put(&format!("{key}/rps"), r.calls_per_s);
                res.put(&format!("{key}/p50"), r.p50_us);
                res.put(&format!("{key}/p99"), r.p99_us);
            }
            Err(e) => res.fail(&key, e),
        }
    }
}

/// The gateway's section of the report.
pub(super) fn report(res: &Results, s: &mut String, calls: usize, http_calls: usize) {
    let m = |k: &str| res.median(k);
    let _ = writeln!(s, "### The gateway: what it adds to a call\n");
    let _ = writeln!(s, "`purra gateway` (release build) with the benchmark server's `echo` and `add` bound as reads (`scope = \"open\"`, `concurrency = \"safe\"`), the server behind it over stdio. Over stdio purra's `bench-client` makes the stdio table's calls ({calls} one at a time, then {calls} with 16 in flight) through the gateway, beside the direct pair of that table. The added latency is the difference of the p50s.\n");
    let _ = writeln!(s, "| client → server | sequential calls/s | p50 µs | p99 µs | 16 in flight calls/s | ÷ direct (sequential) | ÷ direct (16 in flight) |");
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|");
    let direct = "stdio/purra/purra";
    let gw = "gw/stdio";
    for (label, k) in [
        ("purra → purra (direct)", direct),
        (
            "purra → stdio-relay → purra (bytes copied, nothing else)",
            "gw/relay",
        ),
        ("purra → purra gateway → purra", gw),
    ] {
        if res.failed(k) {
            let _ = writeln!(
                s,
                "| {label} | FAILED: {} | | | | | |",
                res.failures.get(k).map_or("", String::as_str)
            );
            continue;
        }
        let _ = writeln!(
            s,
            "| {label} | {} | {} | {} | {} | {} | {} |",
            cell(m(&format!("{k}/seq"))),
            cell(m(&format!("{k}/p50"))),
            cell(m(&format!("{k}/p99"))),
            cell(m(&format!("{k}/conc"))),
            fmt_ratio(res.paired(&format!("{k}/seq"), &format!("{direct}/seq"))),
            fmt_ratio(res.paired(&format!("{k}/conc"), &format!("{direct}/conc"))),
        );
    }
    let added = added_p50(res);
    let _ = writeln!(
        s,
        "\nThe gateway adds {} to the p50 of a read over stdio (the gateway row's p50 less the direct row's, in each round; the median over rounds and the range). A process that only copies the bytes each way (`stdio-relay`: a blocking thread per direction, no parsing) adds {}: the two more pipe hops and their wake-ups any front pays before its own work.\n",
        added.map_or_else(|| "FAILED".into(), micros),
        relay_p50(res).map_or_else(|| "FAILED".into(), micros)
    );
    let _ = writeln!(
        s,
        "![A read over stdio, direct and through the gateway](bench/charts/gateway-stdio.svg)\n"
    );

    let _ = writeln!(s, "Over Streamable HTTP the raw load client of the HTTP table (1 and 16 sessions, `add`, every sum checked) drives each front, all of them in front of the same stdio `purra-bench-server`: `purra gateway`, `supergateway` 4.0.0 (`--outputTransport streamableHttp`; with `--stateful`, which keeps a server process per session, and as it runs without it, stateless, starting a server process for every request), `mcp-proxy` 6.7.19 (`--server stream`); and, for scale, the benchmark server's own HTTP endpoint with no proxy (the HTTP table's purra row). {http_calls} calls a run through the gateway, a twentieth of that through the proxies and a two-hundredth through stateless supergateway, whose runs would otherwise take minutes (always at least 4 per session). Each front is started afresh for each session count; the gateway's per-caller limit is set to its largest, 60 000 calls a minute (every HTTP session is the one configured caller), which no run reaches.\n");
    let _ = writeln!(
        s,
        "| front → stdio server | sessions | calls/s | p50 µs | p99 µs | calls/s ÷ direct HTTP | purra gateway ÷ it (calls/s) |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|");
    for &c in FRONT_CLIENTS {
        let direct = m(&format!("http/purra/{c}/rps"));
        let _ = writeln!(
            s,
            "| purra-bench-server's own HTTP (no proxy) | {c} | {} | {} | {} | 1.00× | {} |",
            cell(direct),
            cell(m(&format!("http/purra/{c}/p50"))),
            cell(m(&format!("http/purra/{c}/p99"))),
            fmt_ratio(res.paired(
                &format!("gw/http/gateway/{c}/rps"),
                &format!("http/purra/{c}/rps")
            )),
        );
        for &(which, label) in HTTP_FRONTS {
            let k = format!("gw/http/{which}/{c}");
            if res.failed(&k)
                || res.failed(&format!("gw/http/{which}")) && m(&format!("{k}/rps")).is_none()
            {
                let why = res
                    .failures
                    .get(&k)
                    .or_else(|| res.failures.get(&format!("gw/http/{which}")))
                    .map_or("", String::as_str);
                let _ = writeln!(s, "| {label} | {c} | FAILED: {why} | | | | |");
                continue;
            }
            let rps = m(&format!("{k}/rps"));
            let _ = writeln!(
                s,
                "| {label} | {c} | {} | {} | {} | {} | {} |",
                cell(rps),
                cell(m(&format!("{k}/p50"))),
                cell(m(&format!("{k}/p99"))),
                fmt_ratio(res.paired(&format!("{k}/rps"), &format!("http/purra/{c}/rps"))),
                if which == "gateway" {
                    "—".to_owned()
                } else {
                    fmt_ratio(res.paired(&format!("gw/http/gateway/{c}/rps"), &format!("{k}/rps")))
                },
            );
        }
    }
    let _ = writeln!(
        s,
        "\n![The gateway beside the proxies](bench/charts/gateway-http.svg)\n"
    );

    upstream_report(res, s, http_calls);

    let _ = writeln!(s, "### Write cycles through one gateway\n");
    let _ = writeln!(s, "`gateway-bench`: `purra gateway` over stdio with the benchmark server's `echo` bound as a write whose binding says `approval = \"client\"`, and purra's client, whose elicitation handler approves every form: one `tools/call` is one whole cycle (the approval prepared with the call saved, the form asked and answered, the decision recorded with the claim, the request sent, the outcome recorded with the run dropped: three durable commits, then the receipt). Every call's arguments differ and every receipt is checked; 400 cycles one at a time, then 400 with 16 in flight, on a SQLite file in `target/bench/gateway` and on a fresh schema of a PostgreSQL server on the same machine (`scripts/postgres.sh`: `fsync` on, loopback).\n");
    let _ = writeln!(
        s,
        "| store | one at a time: cycles/s | p50 µs | p99 µs | 16 in flight: cycles/s |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|");
    for (which, label) in [("sqlite", "SQLite"), ("postgres", "PostgreSQL")] {
        let k = format!("gw/writes/{which}");
        if res.failed(&k) {
            let _ = writeln!(
                s,
                "| {label} | FAILED: {} | | | |",
                res.failures.get(&k).map_or("", String::as_str)
            );
            continue;
        }
        let _ = writeln!(
            s,
            "| {label} | {} | {} | {} | {} |",
            cell(m(&format!("{k}/seq"))),
            cell(m(&format!("{k}/p50"))),
            cell(m(&format!("{k}/p99"))),
            cell(m(&format!("{k}/conc"))),
        );
    }
    let _ = writeln!(
        s,
        "\nPostgreSQL's own commit rate in the same rounds (`pgbench -n -j 2 -T 5 -c 16`, one `INSERT` committed on its own): {} tps, so {} cycles/s of {} commits (the approval with its run, the decision with the claim, the outcome with its receipt). 16 in flight ÷ one at a time on PostgreSQL: {}; 16 in flight ÷ that floor: {}.",
        cell(m("gw/writes/pgbench16")),
        cell(m("gw/writes/pgfloor16")),
        COMMITS_PER_CYCLE,
        fmt_ratio(res.paired("gw/writes/postgres/conc", "gw/writes/postgres/seq")),
        fmt_ratio(res.paired("gw/writes/postgres/conc", "gw/writes/pgfloor16")),
    );
    let _ = writeln!(
        s,
        "\nThe cycle's own floor on PostgreSQL (`bench/pg-cycle-floor.sql`, pgbench `-M prepared` on a fresh schema purra-postgres migrated): the rows of a cycle with the schema's indexes, constraints and triggers, in the fewest round trips a store could use (each durable transaction one statement, each announced after its commit in one more), no MCP, no gateway, every cycle counted back in the schema: {} cycles/s with 1 client, {} with 16. Its 16 ÷ 1: {}; its 16 clients ÷ (pgbench 16 ÷ 3): {}. purra's gateway at 16 in flight ÷ it: {}.",
        cell(m("gw/writes/pgcycle1")),
        cell(m("gw/writes/pgcycle16")),
        fmt_ratio(res.paired("gw/writes/pgcycle16", "gw/writes/pgcycle1")),
        fmt_ratio(res.paired("gw/writes/pgcycle16", "gw/writes/pgfloor16")),
        fmt_ratio(res.paired("gw/writes/postgres/conc", "gw/writes/pgcycle16")),
    );
    let _ = writeln!(
        s,
        "\n![Write cycles through one gateway](bench/charts/gateway-writes.svg)"
    );

    let _ = writeln!(s, "\n### A fleet behind HAProxy\n");
    let _ = writeln!(s, "1, 2 and 3 `purra gateway` instances (HTTP, one PostgreSQL schema, each with its own stdio `purra-bench-server`) behind Debian's HAProxy 2.6 (round robin, sessions sticky by `Mcp-Session-Id`, `/readyz` checked every second), and 3 in plain round robin without stickiness (each request to the next instance: a session is resumed from the PostgreSQL store by every instance it reaches, and each read of it there is a store round trip); the raw load client opens {FLEET_CLIENTS} sessions through HAProxy and makes {http_calls} `add` calls. Every process of the run (the client, HAProxy, the instances and their upstreams) shares this machine's two cores, so more instances add no CPU: the rows show what a fleet costs on one machine of this size, not how it scales across machines (no machine with more cores was available for this run).\n");
    let _ = writeln!(
        s,
        "| instances | calls/s | p50 µs | p99 µs | ÷ 1 instance |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|");
    for (n, sticky, k) in fleets() {
        let n = if sticky {
            n.to_string()
        } else {
            format!("{n}, round robin")
        };
        if res.failed(&k) || res.failed("gw/fleet") && m(&format!("{k}/rps")).is_none() {
            let why = res
                .failures
                .get(&k)
                .or_else(|| res.failures.get("gw/fleet"))
                .map_or("", String::as_str);
            let _ = writeln!(s, "| {n} | FAILED: {why} | | | |");
            continue;
        }
        let _ = writeln!(
            s,
            "| {n} | {} | {} | {} | {} |",
            cell(m(&format!("{k}/rps"))),
            cell(m(&format!("{k}/p50"))),
            cell(m(&format!("{k}/p99"))),
            fmt_ratio(res.paired(&format!("{k}/rps"), "gw/fleet/1/rps")),
        );
    }
    let _ = writeln!(
        s,
        "\n![A fleet behind HAProxy](bench/charts/gateway-fleet.svg)\n"
    );
}

/// The gateway's added p50 over stdio in µs: the gateway row's p50 less the direct row's, in
/// each round.
pub(super) fn added_p50(res: &Results) -> Option<Spread> {
    res.rounds
        .combine(&["gw/stdio/p50", "stdio/purra/purra/p50"], |v| v[0] - v[1])
}

/// What `stdio-relay` adds to the p50 over stdio in µs, in each round (the floor of
/// [`added_p50`]).
pub(super) fn relay_p50(res: &Results) -> Option<Spread> {
    res.rounds
        .combine(&["gw/relay/p50", "stdio/purra/purra/p50"], |v| v[0] - v[1])
}

/// `114 µs (98–160 µs)`: a spread of microseconds.
pub(super) fn micros(a: Spread) -> String {
    if a.rounds > 1 {
        format!("{:.0} µs ({:.0}–{:.0} µs)", a.median, a.min, a.max)
    } else {
        format!("{:.0} µs", a.median)
    }
}

/// A bar of a median; a failed or missing one is drawn as failed (no bar, FAILED).
fn bar(label: String, value: Option<f64>, accent: bool) -> Bar {
    Bar {
        label,
        value,
        accent,
    }
}

/// The gateway's charts: stdio beside the direct pair, HTTP beside the proxies, write cycles,
/// the fleet.
pub(super) fn charts(res: &Results, dir: &Path) {
    let m = |k: &str| res.median(k);
    let stdio = Chart {
        title: "A read over stdio, direct and through purra gateway: calls/s (median)".into(),
        unit: "/s".into(),
        bars: [("seq", "one at a time"), ("conc", "16 in flight")]
            .iter()
            .flat_map(|&(metric, how)| {
                [
                    bar(
                        format!("purra → purra, {how}"),
                        m(&format!("stdio/purra/purra/{metric}")),
                        false,
                    ),
                    bar(
                        format!("purra → purra gateway → purra, {how}"),
                        m(&format!("gw/stdio/{metric}")),
                        true,
                    ),
                ]
            })
            .collect(),
        reference: None,
    };
    let mut bars = Vec::new();
    for &c in FRONT_CLIENTS {
        bars.push(bar(
            format!("no proxy (the server's own HTTP), {c} sessions"),
            m(&format!("http/purra/{c}/rps")),
            false,
        ));
        for &(which, label) in HTTP_FRONTS {
            bars.push(bar(
                format!("{label}, {c} sessions"),
                m(&format!("gw/http/{which}/{c}/rps")),
                which == "gateway",
            ));
        }
    }
    let http = Chart {
        title: "Streamable HTTP in front of one stdio server: calls/s (median)".into(),
        unit: "/s".into(),
        bars,
        reference: None,
    };
    let writes = Chart {
        title: "Write cycles through one purra gateway: cycles/s (median)".into(),
        unit: "/s".into(),
        bars: [("sqlite", "SQLite"), ("postgres", "PostgreSQL")]
            .iter()
            .flat_map(|&(which, label)| {
                [
                    bar(
                        format!("{label}, one at a time"),
                        m(&format!("gw/writes/{which}/seq")),
                        true,
                    ),
                    bar(
                        format!("{label}, 16 in flight"),
                        m(&format!("gw/writes/{which}/conc")),
                        true,
                    ),
                ]
            })
            .collect(),
        reference: None,
    };
    let fleet = Chart {
        title: format!(
            "purra gateway instances behind HAProxy, {FLEET_CLIENTS} sessions: calls/s (median)"
        ),
        unit: "/s".into(),
        bars: fleets()
            .map(|(n, sticky, k)| {
                bar(
                    format!(
                        "{n} instance{}{}",
                        if n == 1 { "" } else { "s" },
                        if sticky { "" } else { ", round robin" }
                    ),
                    m(&format!("{k}/rps")),
                    true,
                )
            })
            .collect(),
        reference: None,
    };
    for (file, chart) in [
        ("gateway-stdio.svg", stdio),
        ("gateway-http.svg", http),
        ("gateway-writes.svg", writes),
        ("gateway-fleet.svg", fleet),
    ] {
        let _ = std::fs::write(dir.join(file), chart.render());
    }
}
