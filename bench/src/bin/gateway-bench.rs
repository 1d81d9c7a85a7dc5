//! Write cycles through one `purra gateway`: call → approval → claim → send → receipt, each cycle
//! whole, per second, on the store the gateway is given (a SQLite file or a PostgreSQL URL).
//!
//! The gateway runs as a child over stdio with one write binding (`note`, the benchmark server's
//! `echo` bound as a write whose binding says `approval = "client"`) and elicitation on; the
//! client is purra's, whose elicitation handler approves every form. So one `tools/call` is one
//! full cycle: the approval prepared with the call saved (one commit), the form asked and
//! answered, the decision recorded with the claim (one), the request sent to the upstream, the
//! outcome recorded with the call's run dropped (one), the receipt answered. Every
//! call's arguments differ (a new intent each time) and every answer is checked (the echoed
//! text).
//!
//! Usage: `gateway-bench --purra PURRA --server SERVER --dir DIR --db DB [--calls N]
//! [--concurrency K]`: N cycles one at a time (the latency of each), then N with K in flight on
//! the same connection; prints one JSON line (`sequential_cycles_per_s`, `p50_us`, `p99_us`,
//! `concurrent_cycles_per_s`).

#![allow(clippy::print_stdout)] // a benchmark program: stdout is its result

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use purra_bench::{micros_since, Latencies};
use purra_protocol::types::ElicitResult;
use purra_protocol::{Client, ClientOptions, Connection, StderrMode, StdioCommand};
use serde_json::json;

struct Args {
    purra: String,
    server: String,
    dir: PathBuf,
    db: String,
    calls: usize,
    concurrency: usize,
}

fn usage() -> ! {
    eprintln!(
        "usage: gateway-bench --purra PURRA --server SERVER --dir DIR --db DB [--calls N] [--concurrency K]"
    );
    std::process::exit(64)
}

fn parse() -> Args {
    let mut a = Args {
        purra: String::new(),
        server: String::new(),
        dir: PathBuf::new(),
        db: String::new(),
        calls: 400,
        concurrency: 16,
    };
    let mut args = std::env::args().skip(1);
    while let Some(k) = args.next() {
        let mut v = || args.next().unwrap_or_else(|| usage());
        match k.as_str() {
            "--purra" => a.purra = v(),
            "--server" => a.server = v(),
            "--dir" => a.dir = PathBuf::from(v()),
            "--db" => a.db = v(),
            "--calls" => a.calls = v().parse().unwrap_or_else(|_| usage()),
            "--concurrency" => a.concurrency = v().parse().unwrap_or_else(|_| usage()),
            _ => usage(),
        }
    }
    if a.purra.is_empty() || a.server.is_empty() || a.db.is_empty() || a.calls == 0 {
        usage()
    }
    a
}

/// The gateway's configuration: one write, decided by the client's own user.
fn config(server: &str, db: &str) -> String {
    format!(
        r#"[gateway]
name = "bench"
db = {db:?}
listen = "stdio"
elicitation = true
approval_wait = "60s"
progress_interval = "60s"
max_pending_per_caller = 1000
max_calls_per_minute_per_caller = 60000

[upstreams.bench]
command = [{server:?}]

[writes.note]
upstream = "bench"
tool = "echo"
title = "Echo, bound as a write"
effect = "write"
binding_id = "bench"
binding_revision = "1"
scope_id = "bench"
scope_revision = "1"
approval = "client"

[writes.note.scope]
clients = ["gateway-bench"]
arguments = ["len(text) <= 64"]
"#
    )
}

/// One write cycle; checks the receipt is the echoed text.
async fn cycle(conn: &Connection, n: usize, tag: &str) -> Result<(), String> {
    let text = format!("write {tag}{n}");
    let r = conn
        .call_tool("note", json!({ "text": text }))
        .await
        .map_err(|e| format!("call {n}: {e}"))?;
    match r.content.first() {
        Some(c) if c.as_text() == Some(text.as_str()) && r.is_error != Some(true) => Ok(()),
        other => Err(format!("call {n}: wrong answer {other:?}")),
    }
}

async fn run(a: Args) -> Result<(), String> {
    std::fs::create_dir_all(&a.dir).map_err(|e| e.to_string())?;
    let file = a.dir.join("gateway.toml");
    std::fs::write(&file, config(&a.server, &a.db)).map_err(|e| e.to_string())?;
    let mut options = ClientOptions::default().on_elicitation(false, |_| async {
        Ok(ElicitResult::accept(
            json!({"decision": "approve"})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        ))
    });
    options.client_info = purra_protocol::types::Implementation::new("gateway-bench", "1");
    let cmd = StdioCommand::new(&a.purra)
        .args(["gateway", "--config", &file.display().to_string()])
        .stderr(StderrMode::Null);
    let conn = Arc::new(
        Client::connect_stdio(cmd, options)
            .await
            .map_err(|e| format!("connect: {e}"))?,
    );
    for i in 0..20 {
        cycle(&conn, i, "warm ").await?;
    }
    let mut lat = Vec::with_capacity(a.calls);
    let start = Instant::now();
    for i in 0..a.calls {
        let t = Instant::now();
        cycle(&conn, i, "seq ").await?;
        lat.push(micros_since(t));
    }
    let sequential = start.elapsed();
    let per = (a.calls / a.concurrency).max(1);
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for k in 0..a.concurrency {
        let conn = conn.clone();
        tasks.spawn(async move {
            for i in 0..per {
                cycle(&conn, k * per + i, "conc ").await?;
            }
            Ok::<(), String>(())
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.map_err(|e| e.to_string())??;
    }
    let concurrent = start.elapsed();
    let lat = Latencies::new(lat);
    println!(
        "{}",
        json!({
            "calls": a.calls,
            "sequential_cycles_per_s": (a.calls as f64 / sequential.as_secs_f64()).round(),
            "p50_us": lat.quantile(0.5).round(),
            "p99_us": lat.quantile(0.99).round(),
            "concurrency": a.concurrency,
            "concurrent_cycles_per_s": ((per * a.concurrency) as f64 / concurrent.as_secs_f64()).round(),
        })
    );
    conn.close().await;
    Ok(())
}

#[tokio::main]
async fn main() {
    if let Err(e) = run(parse()).await {
        eprintln!("gateway-bench: {e}");
        std::process::exit(1);
    }
}
