//! Streamable HTTP load against a running server, the suite's raw client on its own:
//! `http-load --url URL [--clients K] [--calls N] [--era REVISION]` opens K sessions, makes N `add`
//! calls spread over them (every answer checked for the exact sum) and prints one JSON line
//! (`calls_per_s`, `p50_us`, `p99_us`). `--era 2026-07-28` makes each call a stateless request of
//! that revision instead (no session); a handshake revision opens the sessions at that revision
//! (without `--era`, 2025-06-18 through the suite's `load`). `bench/hardening.sh` runs it against
//! two builds.

#![allow(clippy::print_stdout)] // a benchmark program: stdout is its result

use purra_bench::http::{load, load_era, Era};
use serde_json::json;

fn usage() -> ! {
    eprintln!("usage: http-load --url URL [--clients K] [--calls N] [--era REVISION]");
    std::process::exit(64)
}

#[tokio::main]
async fn main() {
    let (mut url, mut clients, mut calls) = (None, 1usize, 5_000usize);
    let mut era = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| usage());
        match a.as_str() {
            "--url" => url = Some(value()),
            "--clients" => clients = value().parse().unwrap_or_else(|_| usage()),
            "--calls" => calls = value().parse().unwrap_or_else(|_| usage()),
            "--era" => {
                era = Some(match value().as_str() {
                    "2026-07-28" => Era::Stateless,
                    "2024-11-05" => Era::Session("2024-11-05"),
                    "2025-03-26" => Era::Session("2025-03-26"),
                    "2025-06-18" => Era::Session("2025-06-18"),
                    "2025-11-25" => Era::Session("2025-11-25"),
                    _ => usage(),
                })
            }
            _ => usage(),
        }
    }
    let Some(url) = url else { usage() };
    if clients == 0 {
        usage()
    }
    let result = match era {
        None => load(&url, clients, calls).await,
        Some(era) => load_era(&url, clients, calls, era).await,
    };
    match result {
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
