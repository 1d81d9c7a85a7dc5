//! rmcp 3.11.0's stdio client as a benchmark client: the same protocol and output as purra's
//! `bench-client` (see bench/src/bin/bench-client.rs): `echo` calls with distinct texts, each
//! answer checked, sequentially and then K in flight on one connection (clones of the peer).
//!
//! Usage: `rmcp-client --calls N --concurrency K -- SERVER COMMAND...`; prints one JSON line.

use std::process::Stdio;
use std::time::Instant;

use rmcp::model::CallToolRequestParams;
use rmcp::service::{Peer, RoleClient};
use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;

async fn call(peer: &Peer<RoleClient>, n: usize) -> Result<(), String> {
    let text = format!("hello, purra {n}");
    let mut args = serde_json::Map::new();
    args.insert("text".into(), serde_json::Value::String(text.clone()));
    let res = peer
        .call_tool(CallToolRequestParams::new("echo").with_arguments(args))
        .await
        .map_err(|e| format!("call {n}: {e}"))?;
    let got = res
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.as_str());
    if got != Some(text.as_str()) || res.is_error == Some(true) {
        return Err(format!("call {n}: wrong answer {got:?}"));
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut calls = 20_000usize;
    let mut concurrency = 16usize;
    let mut command = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--calls" => calls = args.next().ok_or("--calls N")?.parse()?,
            "--concurrency" => concurrency = args.next().ok_or("--concurrency K")?.parse()?,
            "--" => command.extend(args.by_ref()),
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let mut cmd = tokio::process::Command::new(command.first().ok_or("no server command")?);
    cmd.args(&command[1..]);
    let (transport, _) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::null())
        .spawn()?;
    let client = ().serve(transport).await?;
    let peer = client.peer().clone();
    for i in 0..500 {
        call(&peer, i).await?;
    }
    let mut lat = Vec::with_capacity(calls);
    let start = Instant::now();
    for i in 0..calls {
        let t = Instant::now();
        call(&peer, i).await?;
        lat.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let seq = calls as f64 / start.elapsed().as_secs_f64();
    lat.sort_by(f64::total_cmp);
    let p = |q: f64| lat[((lat.len() as f64 - 1.0) * q) as usize].round();
    let per = calls / concurrency;
    let start = Instant::now();
    let mut tasks = Vec::new();
    for k in 0..concurrency {
        let peer = peer.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..per {
                call(&peer, k * per + i).await?;
            }
            Ok::<(), String>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let conc = (per * concurrency) as f64 / start.elapsed().as_secs_f64();
    println!(
        "{}",
        serde_json::json!({
            "client": "rmcp-3.11.0", "calls": calls, "sequential_calls_per_s": seq.round(),
            "p50_us": p(0.5), "p99_us": p(0.99), "concurrency": concurrency,
            "concurrent_calls_per_s": conc.round(),
        })
    );
    client.cancel().await?;
    Ok(())
}
