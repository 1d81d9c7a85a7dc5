//! Protocol round trips over real stdio pipes: purra's client calls a server's `echo` tool,
//! sequentially and with K calls in flight, and prints one JSON line of results.
//!
//! Usage: `stdio-echo [--calls N] [--concurrency K] -- SERVER COMMAND...`. The server must have
//! an `echo {text}` tool (every fixture server of `peers/FIXTURES.md` does). `bench/run-protocol.sh`
//! runs it against purra's and the official SDKs' servers, beside the SDK clients.

#![allow(clippy::print_stdout)] // a benchmark program: stdout is its result

use std::sync::Arc;
use std::time::{Duration, Instant};

use purra_protocol::{Client, ClientOptions, StderrMode, StdioCommand};
use serde_json::json;

#[tokio::main]
async fn main() {
    let mut calls = 20_000usize;
    let mut concurrency = 16usize;
    let mut command = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--calls" => calls = args.next().and_then(|v| v.parse().ok()).expect("--calls N"),
            "--concurrency" => {
                concurrency = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--concurrency K")
            }
            "--" => command.extend(args.by_ref()),
            other => panic!("unknown argument {other}"),
        }
    }
    assert!(
        !command.is_empty(),
        "usage: stdio-echo [--calls N] [--concurrency K] -- SERVER..."
    );
    let cmd = StdioCommand::new(&command[0])
        .args(&command[1..])
        .stderr(StderrMode::Null);
    let conn = Arc::new(
        Client::connect_stdio(cmd, ClientOptions::default())
            .await
            .expect("connect"),
    );
    let args = json!({"text": "hello, purra"});
    for _ in 0..500 {
        conn.call_tool("echo", args.clone())
            .await
            .expect("warm-up call");
    }
    // Sequential: one call at a time; latency of each.
    let mut lat = Vec::with_capacity(calls);
    let start = Instant::now();
    for _ in 0..calls {
        let t = Instant::now();
        conn.call_tool("echo", args.clone()).await.expect("call");
        lat.push(t.elapsed());
    }
    let seq = calls as f64 / start.elapsed().as_secs_f64();
    lat.sort();
    let p = |q: f64| lat[((lat.len() as f64 - 1.0) * q) as usize].as_secs_f64() * 1e6;
    // Concurrent: K tasks share the connection.
    let start = Instant::now();
    let per = calls / concurrency;
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let conn = conn.clone();
        let args = args.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..per {
                conn.call_tool("echo", args.clone()).await.expect("call");
            }
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
    let conc = (per * concurrency) as f64 / start.elapsed().as_secs_f64();
    println!(
        "{}",
        json!({
            "client": "purra",
            "calls": calls,
            "sequential_calls_per_s": seq.round(),
            "p50_us": p(0.5).round(),
            "p99_us": p(0.99).round(),
            "concurrency": concurrency,
            "concurrent_calls_per_s": conc.round(),
        })
    );
    conn.close().await;
    let _ = Duration::ZERO;
}
