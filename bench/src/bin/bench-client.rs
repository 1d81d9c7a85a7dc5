//! purra's stdio benchmark client: `echo` calls with distinct texts to a child server, every
//! answer checked, first one at a time (latency of each), then K in flight on one connection.
//!
//! Usage: `bench-client [--calls N] [--concurrency K] -- SERVER COMMAND...`; prints one JSON line
//! (`purra_bench::result_line`); a wrong or missing answer exits 1 naming the call.

#![allow(clippy::print_stdout)] // a benchmark program: stdout is its result

use std::sync::Arc;
use std::time::Instant;

use purra_bench::{echo_text, micros_since, result_line, ClientArgs, Latencies};
use purra_protocol::{Client, ClientOptions, Connection, StderrMode, StdioCommand};

/// `echo`'s arguments, typed: written straight into the request (`Connection::call_tool_typed`).
#[derive(serde::Serialize)]
struct Echo<'a> {
    text: &'a str,
}

async fn call(conn: &Connection, n: usize) -> Result<(), String> {
    let text = echo_text(n);
    let res = conn
        .call_tool_typed("echo", &Echo { text: &text })
        .await
        .map_err(|e| format!("call {n}: {e}"))?;
    match res.content.first() {
        Some(c) if c.as_text() == Some(text.as_str()) && res.is_error != Some(true) => Ok(()),
        other => Err(format!("call {n}: wrong answer {other:?}")),
    }
}

async fn run(args: ClientArgs) -> Result<(), String> {
    let cmd = StdioCommand::new(&args.command[0])
        .args(&args.command[1..])
        .stderr(StderrMode::Null);
    let conn = Arc::new(
        Client::connect_stdio(cmd, ClientOptions::default())
            .await
            .map_err(|e| format!("connect: {e}"))?,
    );
    for i in 0..500 {
        call(&conn, i).await?;
    }
    let mut lat = Vec::with_capacity(args.calls);
    let start = Instant::now();
    for i in 0..args.calls {
        let t = Instant::now();
        call(&conn, i).await?;
        lat.push(micros_since(t));
    }
    let sequential = start.elapsed();
    let per = args.calls / args.concurrency;
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for k in 0..args.concurrency {
        let conn = conn.clone();
        tasks.spawn(async move {
            for i in 0..per {
                call(&conn, k * per + i).await?;
            }
            Ok::<(), String>(())
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.map_err(|e| e.to_string())??;
    }
    let concurrent = start.elapsed();
    let line = result_line(
        "purra",
        args.calls,
        sequential,
        &Latencies::new(lat),
        args.concurrency,
        per * args.concurrency,
        concurrent,
    );
    println!("{line}");
    conn.close().await;
    Ok(())
}

#[tokio::main]
async fn main() {
    let result = match ClientArgs::from_env() {
        Ok(args) => run(args).await,
        Err(e) => Err(e),
    };
    if let Err(e) = result {
        eprintln!("bench-client: {e}");
        std::process::exit(1);
    }
}
