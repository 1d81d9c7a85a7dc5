//! The durable store under concurrency: approval cycles per second on one purra-sqlite file for 1
//! and for 16 concurrent runs, beside the disk's fsync rate measured in the same directory.
//!
//! A cycle is what a resumed run does for one approved write: `decide` (approve),
//! `check_and_claim`, and `complete` (committed with a small receipt), three durable
//! transactions; the intents are prepared before the clock starts. Each cycle's answers are
//! checked (the claim is `Claimed`, the receipt reads back as committed at the end).
//!
//! Usage: `store-bench --dir DIR [--seconds S]`; prints one JSON line with `fsync_per_s`,
//! `cycles_per_s_1`, `cycles_per_s_16`.

#![allow(clippy::print_stdout)] // a benchmark program: stdout is its result

use std::fs::OpenOptions;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use purra_core::{ApprovalGateway, ClaimState, EffectOutcome, IdempotencyStore};
use purra_sqlite::SqliteStore;
use serde_json::json;

/// Write 4 KiB at offset 0 and fsync, for `seconds`; the rate.
fn fsync_rate(dir: &Path, seconds: f64) -> Result<f64, String> {
    let mut f = OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(dir.join("fsync.bin"))
        .map_err(|e| e.to_string())?;
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed().as_secs_f64() < seconds {
        f.seek(SeekFrom::Start(0)).map_err(|e| e.to_string())?;
        f.write_all(&[0x5a; 4096]).map_err(|e| e.to_string())?;
        f.sync_all().map_err(|e| e.to_string())?;
        n += 1;
    }
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

/// `runs` concurrent runs, each doing cycles one after another for `seconds`; cycles per second.
async fn cycles(store: &SqliteStore, runs: usize, seconds: f64) -> Result<f64, String> {
    // Prepare enough intents for the whole measurement up front (prepare is not timed).
    let mut prepared = Vec::new();
    for _ in 0..runs {
        let mut mine = Vec::new();
        for _ in 0..(seconds * 3000.0 / runs as f64).max(64.0) as usize {
            let request = purra_bench::fresh_request("");
            let intent = request.intent.clone();
            let id = store.prepare(request).await.map_err(|e| e.to_string())?;
            mine.push((id, intent));
        }
        prepared.push(mine);
    }
    let deadline = Duration::from_secs_f64(seconds);
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for mine in prepared {
        let store = store.clone();
        tasks.spawn(async move {
            let mut keys = Vec::new();
            for (id, intent) in mine {
                if start.elapsed() >= deadline {
                    break;
                }
                keys.push(purra_bench::approve_claim_commit(&store, id, &intent).await?);
            }
            Ok::<_, String>(keys)
        });
    }
    let mut keys = Vec::new();
    while let Some(r) = tasks.join_next().await {
        keys.extend(r.map_err(|e| e.to_string())??);
    }
    let rate = keys.len() as f64 / start.elapsed().as_secs_f64();
    for key in keys {
        match store.state(key.clone()).await {
            Ok(Some(ClaimState::Completed {
                outcome: EffectOutcome::Committed { .. },
            })) => {}
            other => return Err(format!("{key:?} reads back as {other:?}")),
        }
    }
    Ok(rate)
}

async fn run(dir: PathBuf, seconds: f64) -> Result<serde_json::Value, String> {
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let db = dir.join("store-bench.db");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    let store = SqliteStore::open(&db).map_err(|e| e.to_string())?;
    let fsync = tokio::task::spawn_blocking({
        let dir = dir.clone();
        move || fsync_rate(&dir, seconds)
    })
    .await
    .map_err(|e| e.to_string())??;
    let one = cycles(&store, 1, seconds).await?;
    let sixteen = cycles(&store, 16, seconds).await?;
    Ok(json!({"fsync_per_s": fsync, "cycles_per_s_1": one, "cycles_per_s_16": sixteen}))
}

#[tokio::main]
async fn main() {
    let mut dir = None;
    let mut seconds = 2.0;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match (a.as_str(), args.next()) {
            ("--dir", Some(d)) => dir = Some(PathBuf::from(d)),
            ("--seconds", Some(s)) => seconds = s.parse().unwrap_or(seconds),
            _ => fail("usage: store-bench --dir DIR [--seconds S]"),
        }
    }
    let dir = dir.unwrap_or_else(|| fail("usage: store-bench --dir DIR [--seconds S]"));
    match run(dir, seconds).await {
        Ok(line) => println!("{line}"),
        Err(e) => fail(&e),
    }
}

fn fail(why: &str) -> ! {
    eprintln!("store-bench: {why}");
    std::process::exit(1)
}
