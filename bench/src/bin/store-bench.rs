//! The durable store under concurrency: approval cycles per second on one purra-sqlite file for 1
//! and for 16 concurrent runs, beside the disk's fsync rate measured in the same directory.
//!
//! A cycle is what a resumed run does for one approved write: `decide` (approve),
//! `check_and_claim`, and `complete` (committed with a small receipt), three durable
//! transactions; the intents are prepared before the clock starts. Each cycle's answers are
//! checked (the claim is `Claimed`, the receipt reads back as committed at the end).
//!
//! The store's floor, measured the same way on another file of the same directory: SQLite
//! itself (WAL, `synchronous=FULL`, as purra-sqlite opens it) with each durable write one small
//! row inserted into a table with no index, the writes of concurrent runs committed together by
//! one writer thread, each run a thread of its own waiting for its write's commit: what any store
//! on SQLite could at best reach with three durable writes a cycle.
//!
//! Then the floor of a gateway's write cycle ([`cycle_floor`]): the rows a cycle leaves, in
//! purra-sqlite's schema, written by plain SQL one cycle at a time.
//!
//! Usage: `store-bench --dir DIR [--seconds S]`; prints one JSON line with `fsync_per_s`,
//! `cycles_per_s_1`, `cycles_per_s_16`, `floor_cycles_per_s_1`, `floor_cycles_per_s_16`,
//! `cycle_floor_per_s`.

#![allow(clippy::print_stdout)] // a benchmark program: stdout is its result

use std::fs::OpenOptions;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
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
    // Prepare enough intents for the whole measurement up front (prepare is not timed): room for
    // 3 000 cycles a second for one run, 12 000 for four runs or more, so that no run runs out
    // before the deadline. Each run's intents are prepared together (their prepares share group
    // commits) and before the next run's, so each run's approvals are one range of the table and
    // concurrent runs decide and claim in different parts of it.
    let per_second = 3000.0 * runs.min(4) as f64;
    let mut prepared = Vec::new();
    for _ in 0..runs {
        let mut preparing = tokio::task::JoinSet::new();
        for _ in 0..(seconds * per_second / runs as f64).max(64.0) as usize {
            let store = store.clone();
            preparing.spawn(async move {
                let request = purra_bench::fresh_request("");
                let intent = request.intent.clone();
                let id = store.prepare(request).await.map_err(|e| e.to_string())?;
                let seq = purra_core::stored::approval_seq(&id).ok_or("an approval id")?;
                Ok::<_, String>((seq, id, intent))
            });
        }
        let mut mine = Vec::new();
        while let Some(r) = preparing.join_next().await {
            mine.push(r.map_err(|e| e.to_string())??);
        }
        // In the order they were made, as one caller preparing them one by one would use them.
        mine.sort_by_key(|(seq, _, _)| *seq);
        prepared.push(
            mine.into_iter()
                .map(|(_, id, intent)| (id, intent))
                .collect::<Vec<_>>(),
        );
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

/// One queued floor write: set to its row id once committed (0 if the commit failed).
type Slot = Arc<(Mutex<Option<i64>>, Condvar)>;

/// The floor's queue: the writes waiting for the writer thread.
type Queue = Arc<(Mutex<Vec<Slot>>, Condvar)>;

/// The writer thread: commits everything queued in one transaction, one row a write.
fn floor_writer(mut conn: rusqlite::Connection, queue: Queue, stop: Arc<AtomicBool>) {
    loop {
        let slots = {
            let mut q = queue.0.lock().expect("queue");
            while q.is_empty() {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                q = queue
                    .1
                    .wait_timeout(q, Duration::from_millis(50))
                    .expect("queue")
                    .0;
            }
            std::mem::take(&mut *q)
        };
        let mut ids = Vec::with_capacity(slots.len());
        let committed = (|| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            for _ in &slots {
                tx.execute(
                    "INSERT INTO writes (detail) VALUES ('a small row of a cycle')",
                    [],
                )?;
                ids.push(tx.last_insert_rowid());
            }
            tx.commit()
        })();
        for (i, slot) in slots.into_iter().enumerate() {
            let id = if committed.is_ok() { ids[i] } else { 0 };
            *slot.0.lock().expect("slot") = Some(id);
            slot.1.notify_one();
        }
    }
}

/// The floor: `runs` threads, each doing cycles of three durable writes for `seconds`; cycles
/// per second, after checking that every write committed and the table holds exactly them.
fn floor_cycles(dir: &Path, runs: usize, seconds: f64) -> Result<f64, String> {
    let db = dir.join(format!("floor-{runs}.db"));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    let conn = rusqlite::Connection::open(&db).map_err(|e| e.to_string())?;
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
        .map_err(|e| e.to_string())?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(format!("journal_mode {mode}"));
    }
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(|e| e.to_string())?;
    conn.execute_batch("CREATE TABLE writes (id INTEGER PRIMARY KEY, detail TEXT NOT NULL)")
        .map_err(|e| e.to_string())?;
    let queue: Queue = Arc::new((Mutex::new(Vec::new()), Condvar::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = std::thread::spawn({
        let (queue, stop) = (queue.clone(), stop.clone());
        move || floor_writer(conn, queue, stop)
    });
    let writes = Arc::new(AtomicU64::new(0));
    let deadline = Duration::from_secs_f64(seconds);
    let start = Instant::now();
    let threads: Vec<_> = (0..runs)
        .map(|_| {
            let (queue, writes) = (queue.clone(), writes.clone());
            std::thread::spawn(move || -> Result<u64, String> {
                let mut cycles = 0;
                while start.elapsed() < deadline {
                    for _ in 0..3 {
                        let slot: Slot = Arc::new((Mutex::new(None), Condvar::new()));
                        queue.0.lock().expect("queue").push(slot.clone());
                        queue.1.notify_one();
                        let mut done = slot.0.lock().expect("slot");
                        while done.is_none() {
                            done = slot.1.wait(done).expect("slot");
                        }
                        if *done == Some(0) {
                            return Err("a floor write did not commit".into());
                        }
                        writes.fetch_add(1, Ordering::Relaxed);
                    }
                    cycles += 1;
                }
                Ok(cycles)
            })
        })
        .collect();
    let mut cycles = 0;
    for t in threads {
        cycles += t.join().map_err(|_| "a floor run panicked".to_owned())??;
    }
    let rate = cycles as f64 / start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    writer
        .join()
        .map_err(|_| "the floor writer panicked".to_owned())?;
    let conn = rusqlite::Connection::open(&db).map_err(|e| e.to_string())?;
    let rows: i64 = conn
        .query_row("SELECT count(*) FROM writes", [], |r| r.get(0))
        .map_err(|e| e.to_string())?;
    let rows = u64::try_from(rows).map_err(|e| e.to_string())?;
    if rows != writes.load(Ordering::Relaxed) || rows != cycles * 3 {
        return Err(format!("the floor holds {rows} rows for {cycles} cycles"));
    }
    Ok(rate)
}

/// The floor of a write cycle on SQLite: the rows a gateway's client-approved cycle leaves, in a
/// file purra-sqlite migrated (its tables, indexes and constraints), written one cycle at a time
/// by plain SQL on one connection with the store's settings (WAL, `synchronous=FULL`, foreign
/// keys on) and nothing else: (1) the grant and pending-quota reads, the approval, its suspended
/// run and two audit rows; (2) the decision with the claim and two audit rows; (3) the outcome,
/// the run dropped and two audit rows, each one durable transaction. Sizes are those of the
/// gateway benchmark's cycle. Cycles per second, after checking every cycle's rows.
fn cycle_floor(dir: &Path, seconds: f64) -> Result<f64, String> {
    let db = dir.join("cycle-floor.db");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    drop(SqliteStore::open(&db).map_err(|e| e.to_string())?);
    let mut conn = rusqlite::Connection::open(&db).map_err(|e| e.to_string())?;
    for (pragma, value) in [
        ("journal_mode", "WAL"),
        ("synchronous", "FULL"),
        ("foreign_keys", "ON"),
    ] {
        conn.pragma_update(None, pragma, value)
            .map_err(|e| e.to_string())?;
    }
    conn.execute(
        "INSERT INTO owners (owner, pid, opened_at_ns, heartbeat_at_ns, lease_ns) \
         VALUES ('floor', 0, 1, 1, 1000000000)",
        [],
    )
    .map_err(|e| e.to_string())?;
    let (intent, request, run, detail, outcome) = (
        "i".repeat(386),
        "q".repeat(976),
        "j".repeat(1500),
        "d".repeat(145),
        "o".repeat(78),
    );
    let deadline = Duration::from_secs_f64(seconds);
    let start = Instant::now();
    let mut cycles: u64 = 0;
    let audit = "INSERT INTO audit (at_ns, owner, event, approval_id, claim_key, run_id, detail, \
                 trail_approval, claim_seq) VALUES (?1, 'floor', ?2, ?3, ?4, ?5, ?6, ?7, ?8)";
    while start.elapsed() < deadline {
        let n = cycles as i64;
        let run_id = format!("run-{n}");
        let key = format!("sha256:{n:064}");
        let approval = format!("approval-{}", n + 1);
        let durable =
            |conn: &mut rusqlite::Connection,
             write: &dyn Fn(&rusqlite::Transaction) -> rusqlite::Result<()>| {
                let tx = conn
                    .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                    .map_err(|e| e.to_string())?;
                write(&tx).map_err(|e| e.to_string())?;
                tx.commit().map_err(|e| e.to_string())
            };
        durable(&mut conn, &|tx| {
            let granted: i64 = tx
                .prepare_cached(
                    "SELECT count(*) FROM grants WHERE principal = 'bench' AND tool = 'note' \
                     AND revoked_at_ns IS NULL AND until_ns > 0 AND used < max_uses",
                )?
                .query_row([], |r| r.get(0))?;
            let pending: i64 = tx
                .prepare_cached(
                    "SELECT count(*) FROM (SELECT 1 FROM approvals WHERE state = 'prepared' \
                     AND principal = 'bench' \
                     AND coalesce(request_expires_at_ns, 9223372036854775807) > 0 LIMIT 1000)",
                )?
                .query_row([], |r| r.get(0))?;
            if granted != 0 || pending >= 1000 {
                return Err(rusqlite::Error::QueryReturnedNoRows);
            }
            tx.prepare_cached(
                "INSERT INTO approvals (intent_json, intent_digest, tool, run_id, prepared_at_ns, \
                 prepared_by, state, request_json, principal) \
                 VALUES (?1, ?2, 'note', ?3, 1, 'floor', 'prepared', ?4, 'bench')",
            )?
            .execute(rusqlite::params![intent, key, run_id, request])?;
            // A fresh file: the n-th cycle's approval is the n-th row, which the next two
            // transactions name.
            let seq = tx.last_insert_rowid();
            if seq != n + 1 {
                return Err(rusqlite::Error::QueryReturnedNoRows);
            }
            tx.prepare_cached(
                "INSERT INTO suspended_runs (run_id, agent, run_json, saved_at_ns) \
                 VALUES (?1, 'bench', ?2, 1)",
            )?
            .execute(rusqlite::params![run_id, run])?;
            let mut a = tx.prepare_cached(audit)?;
            a.execute(rusqlite::params![
                1,
                "prepared",
                approval,
                None::<String>,
                None::<String>,
                detail,
                None::<i64>,
                None::<i64>
            ])?;
            a.execute(rusqlite::params![
                1,
                "run_suspended",
                approval,
                None::<String>,
                run_id,
                detail,
                seq,
                None::<i64>
            ])?;
            Ok(())
        })?;
        durable(&mut conn, &|tx| {
            let seq = n + 1;
            let state: String = tx
                .prepare_cached("SELECT state FROM approvals WHERE seq = ?1")?
                .query_row([seq], |r| r.get(0))?;
            if state != "prepared" {
                return Err(rusqlite::Error::QueryReturnedNoRows);
            }
            tx.prepare_cached(
                "UPDATE approvals SET state = 'claimed', verdict = 'approve', approver = 'floor', \
                 decided_at_ns = 2, expires_at_ns = 3 WHERE seq = ?1",
            )?
            .execute([seq])?;
            tx.prepare_cached(
                "INSERT INTO claims (key, owner, approval_seq, claimed_at_ns) \
                 VALUES (?1, 'floor', ?2, 2)",
            )?
            .execute(rusqlite::params![key, seq])?;
            let claim = tx.last_insert_rowid();
            let mut a = tx.prepare_cached(audit)?;
            a.execute(rusqlite::params![
                2,
                "decided",
                approval,
                None::<String>,
                None::<String>,
                detail,
                None::<i64>,
                None::<i64>
            ])?;
            a.execute(rusqlite::params![
                2,
                "claimed",
                approval,
                key,
                None::<String>,
                detail,
                None::<i64>,
                claim
            ])?;
            Ok(())
        })?;
        durable(&mut conn, &|tx| {
            let done = tx
                .prepare_cached(
                    "UPDATE claims SET outcome = 'committed', outcome_json = ?1, \
                     completed_at_ns = 3 WHERE key = ?2 AND outcome_json IS NULL",
                )?
                .execute(rusqlite::params![outcome, key])?;
            let dropped = tx
                .prepare_cached("DELETE FROM suspended_runs WHERE run_id = ?1")?
                .execute([&run_id])?;
            if done != 1 || dropped != 1 {
                return Err(rusqlite::Error::QueryReturnedNoRows);
            }
            let mut a = tx.prepare_cached(audit)?;
            a.execute(rusqlite::params![
                3,
                "outcome",
                None::<String>,
                key,
                None::<String>,
                detail,
                None::<i64>,
                n + 1
            ])?;
            a.execute(rusqlite::params![
                3,
                "run_removed",
                None::<String>,
                None::<String>,
                run_id,
                detail,
                None::<i64>,
                None::<i64>
            ])?;
            Ok(())
        })?;
        cycles += 1;
    }
    let rate = cycles as f64 / start.elapsed().as_secs_f64();
    let counted: (i64, i64, i64) = conn
        .query_row(
            "SELECT (SELECT count(*) FROM claims WHERE outcome = 'committed'), \
                    (SELECT count(*) FROM audit WHERE owner = 'floor'), \
                    (SELECT count(*) FROM suspended_runs)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .map_err(|e| e.to_string())?;
    let n = i64::try_from(cycles).map_err(|e| e.to_string())?;
    if counted != (n, 6 * n, 0) {
        return Err(format!(
            "the cycle floor left {counted:?} (committed claims, audit rows, runs) for {n} cycles"
        ));
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
    let (floor_one, floor_sixteen, cycle_floor) = tokio::task::spawn_blocking(move || {
        Ok::<_, String>((
            floor_cycles(&dir, 1, seconds)?,
            floor_cycles(&dir, 16, seconds)?,
            cycle_floor(&dir, seconds)?,
        ))
    })
    .await
    .map_err(|e| e.to_string())??;
    Ok(
        json!({"fsync_per_s": fsync, "cycles_per_s_1": one, "cycles_per_s_16": sixteen,
              "floor_cycles_per_s_1": floor_one, "floor_cycles_per_s_16": floor_sixteen,
              "cycle_floor_per_s": cycle_floor}),
    )
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
