//! Streamable HTTP load against a running server, the suite's raw client on its own:
//! `http-load --url URL [--clients K] [--calls N]` opens K sessions, makes N `add` calls spread
//! over them (every answer checked for the exact sum) and prints one JSON line
//! (`calls_per_s`, `p50_us`, `p99_us`). `bench/hardening.sh` runs it against two builds.

#![allow(clippy::print_stdout)] // a benchmark program: stdout is its result

use purra_bench::http::load;
use serde_json::json;

fn usage() -> ! {
    eprintln!("usage: http-load --url URL [--clients K] [--calls N]");
    std::process::exit(64)
}

#[tokio::main]
async fn main() {
    let (mut url, mut clients, mut calls) = (None, 1usize, 5_000usize);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| usage());
        match a.as_str() {
            "--url" => url = Some(value()),
            "--clients" => clients = value().parse().unwrap_or_else(|_| usage()),
            "--calls" => calls = value().parse().unwrap_or_else(|_| usage()),
            _ => usage(),
        }
    }
    let Some(url) = url else { usage() };
    if clients == 0 {
        usage()
    }
    match load(&url, clients, calls).await {
        Ok(r) => println!(
            "{}",
            json!({
                "clients": clients,
                "calls_per_s": r.calls_per_s.round(),
                "p50_us": r.p50_us.round(),
                "p99_us": r.p99_us.round(),
            })
        ),
        Err(e) => {
            eprintln!("http-load: {e}");
            std::process::exit(1);
        }
    }
}
