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
//! Then the floors of a cycle's rows ([`SqlCycle`]): the rows purra's cycle above leaves
//! (`store_cycle_floor_per_s`) and the rows a gateway's client-approved cycle leaves
//! (`gateway_cycle_floor_per_s`), in purra-sqlite's schema, written by plain SQL one cycle at a
//! time: what the store and the gateway could at best reach on this disk with the rows they keep.
//!
//! Usage: `store-bench --dir DIR [--seconds S]`; prints one JSON line with `fsync_per_s`,
//! `cycles_per_s_1`, `cycles_per_s_16`, `floor_cycles_per_s_1`, `floor_cycles_per_s_16`,
//! `store_cycle_floor_per_s`, `gateway_cycle_floor_per_s`.

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

/// Removes the SQLite file `db` with its WAL and shared-memory files, so a run starts empty.
fn remove_db(db: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
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
    remove_db(&db);
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

/// The contents of a write cycle's rows: the sizes of the gateway benchmark's cycle.
struct Contents {
    intent: String,
    request: String,
    run: String,
    detail: String,
    outcome: String,
}

/// A write cycle's rows written by plain SQL on one connection of a file purra-sqlite migrated
/// (its tables, indexes and constraints), with the store's settings (WAL, `synchronous=FULL`,
/// foreign keys on) and nothing else: the floor under the store and the gateway. Each method
/// but [`SqlCycle::open`] is one durable transaction; approvals are the rows 1, 2, … of a fresh
/// file, so the n-th cycle names the n-th, and its claim key and run id are made from n.
struct SqlCycle {
    conn: rusqlite::Connection,
    rows: Contents,
}

/// An audit row of the cycle floor; what it does not name is `NULL`.
#[derive(Default)]
struct Audit<'a> {
    at: i64,
    event: &'a str,
    approval: Option<&'a str>,
    key: Option<&'a str>,
    run: Option<&'a str>,
    trail: Option<i64>,
    claim: Option<i64>,
}

impl Audit<'_> {
    /// Appends the row, with `detail`, in `tx`.
    fn append(&self, tx: &rusqlite::Transaction, detail: &str) -> rusqlite::Result<()> {
        tx.prepare_cached(
            "INSERT INTO audit (at_ns, owner, event, approval_id, claim_key, run_id, detail, \
             trail_approval, claim_seq) VALUES (?1, 'floor', ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?
        .execute(rusqlite::params![
            self.at,
            self.event,
            self.approval,
            self.key,
            self.run,
            detail,
            self.trail,
            self.claim
        ])?;
        Ok(())
    }
}

/// A statement that changed no row where the cycle needs one.
fn missing(what: &str) -> rusqlite::Error {
    rusqlite::Error::ToSqlConversionFailure(format!("the cycle floor: {what}").into())
}

impl SqlCycle {
    fn open(path: &Path) -> Result<SqlCycle, String> {
        remove_db(path);
        drop(SqliteStore::open(path).map_err(|e| e.to_string())?);
        let conn = rusqlite::Connection::open(path).map_err(|e| e.to_string())?;
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
        let rows = Contents {
            intent: "i".repeat(386),
            request: "q".repeat(976),
            run: "j".repeat(1500),
            detail: "d".repeat(145),
            outcome: "o".repeat(78),
        };
        Ok(SqlCycle { conn, rows })
    }

    /// Runs `write` in one durable transaction.
    fn durable(
        &mut self,
        write: impl FnOnce(&rusqlite::Transaction, &Contents) -> rusqlite::Result<()>,
    ) -> Result<(), String> {
        let SqlCycle { conn, rows } = self;
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| e.to_string())?;
        write(&tx, rows).map_err(|e| e.to_string())?;
        tx.commit().map_err(|e| e.to_string())
    }

    /// The approval of cycle `n` prepared: the grant and pending-quota reads, the approval and,
    /// with `run`, its suspended run; an audit row for each.
    fn prepare(&mut self, n: i64, run: bool) -> Result<(), String> {
        self.durable(|tx, c| {
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
                     AND coalesce(request_expires_at_ns, 9223372036854775807) > 0 LIMIT 100000)",
                )?
                .query_row([], |r| r.get(0))?;
            if granted != 0 || pending >= 100_000 {
                return Err(missing("a grant, or too many pending"));
            }
            let (key, run_id, approval) = (key(n), format!("run-{n}"), format!("approval-{n}"));
            tx.prepare_cached(
                "INSERT INTO approvals (intent_json, intent_digest, tool, run_id, prepared_at_ns, \
                 prepared_by, state, request_json, principal) \
                 VALUES (?1, ?2, 'note', ?3, 1, 'floor', 'prepared', ?4, 'bench')",
            )?
            .execute(rusqlite::params![c.intent, key, run_id, c.request])?;
            if tx.last_insert_rowid() != n {
                return Err(missing("the approval is not the n-th row"));
            }
            Audit {
                at: 1,
                event: "prepared",
                approval: Some(&approval),
                ..Audit::default()
            }
            .append(tx, &c.detail)?;
            if run {
                tx.prepare_cached(
                    "INSERT INTO suspended_runs (run_id, agent, run_json, saved_at_ns) \
                     VALUES (?1, 'bench', ?2, 1)",
                )?
                .execute(rusqlite::params![run_id, c.run])?;
                Audit {
                    at: 1,
                    event: "run_suspended",
                    approval: Some(&approval),
                    run: Some(&run_id),
                    trail: Some(n),
                    ..Audit::default()
                }
                .append(tx, &c.detail)?;
            }
            Ok(())
        })
    }

    /// Cycle `n`'s approval decided (read, then approved), with an audit row.
    fn decide(tx: &rusqlite::Transaction, c: &Contents, n: i64) -> rusqlite::Result<()> {
        let state: String = tx
            .prepare_cached("SELECT state FROM approvals WHERE seq = ?1")?
            .query_row([n], |r| r.get(0))?;
        if state != "prepared" {
            return Err(missing("the approval is not pending"));
        }
        tx.prepare_cached(
            "UPDATE approvals SET state = 'decided', verdict = 'approve', approver = 'floor', \
             decided_at_ns = 2, expires_at_ns = 3 WHERE seq = ?1",
        )?
        .execute([n])?;
        Audit {
            at: 2,
            event: "decided",
            approval: Some(&format!("approval-{n}")),
            ..Audit::default()
        }
        .append(tx, &c.detail)?;
        Ok(())
    }

    /// Cycle `n`'s claim: the approval claimed, the claim, with an audit row.
    fn claim(tx: &rusqlite::Transaction, c: &Contents, n: i64) -> rusqlite::Result<()> {
        let key = key(n);
        if tx
            .prepare_cached(
                "UPDATE approvals SET state = 'claimed' WHERE seq = ?1 AND state = 'decided'",
            )?
            .execute([n])?
            != 1
        {
            return Err(missing("the approval is not decided"));
        }
        tx.prepare_cached(
            "INSERT INTO claims (key, owner, approval_seq, claimed_at_ns) VALUES (?1, 'floor', ?2, 2)",
        )?
        .execute(rusqlite::params![key, n])?;
        let claim = tx.last_insert_rowid();
        Audit {
            at: 2,
            event: "claimed",
            approval: Some(&format!("approval-{n}")),
            key: Some(&key),
            claim: Some(claim),
            ..Audit::default()
        }
        .append(tx, &c.detail)?;
        Ok(())
    }

    /// Cycle `n`'s outcome, with an audit row; with `run`, its run dropped, with another.
    fn complete(
        tx: &rusqlite::Transaction,
        c: &Contents,
        n: i64,
        run: bool,
    ) -> rusqlite::Result<()> {
        let (key, run_id) = (key(n), format!("run-{n}"));
        if tx
            .prepare_cached(
                "UPDATE claims SET outcome = 'committed', outcome_json = ?1, completed_at_ns = 3 \
                 WHERE key = ?2 AND outcome_json IS NULL",
            )?
            .execute(rusqlite::params![c.outcome, key])?
            != 1
        {
            return Err(missing("the claim is gone or done"));
        }
        Audit {
            at: 3,
            event: "outcome",
            key: Some(&key),
            claim: Some(n),
            ..Audit::default()
        }
        .append(tx, &c.detail)?;
        if run {
            if tx
                .prepare_cached("DELETE FROM suspended_runs WHERE run_id = ?1")?
                .execute([&run_id])?
                != 1
            {
                return Err(missing("the run is gone"));
            }
            Audit {
                at: 3,
                event: "run_removed",
                run: Some(&run_id),
                ..Audit::default()
            }
            .append(tx, &c.detail)?;
        }
        Ok(())
    }

    /// Checks that `cycles` cycles left their rows: committed claims, `audit` audit rows and no
    /// suspended run.
    fn check(&self, cycles: u64, audit: u64) -> Result<(), String> {
        let counted: (i64, i64, i64) = self
            .conn
            .query_row(
                "SELECT (SELECT count(*) FROM claims WHERE outcome = 'committed'), \
                        (SELECT count(*) FROM audit WHERE owner = 'floor'), \
                        (SELECT count(*) FROM suspended_runs)",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .map_err(|e| e.to_string())?;
        let want = (cycles as i64, audit as i64, 0);
        if counted != want {
            return Err(format!(
                "the cycle floor left {counted:?} (committed claims, audit rows, runs), not {want:?}"
            ));
        }
        Ok(())
    }
}

/// The claim key of cycle `n`.
fn key(n: i64) -> String {
    format!("sha256:{n:064}")
}

/// The floor of a gateway's client-approved write cycle on SQLite, one cycle at a time: (1) the
/// approval prepared with its run saved; (2) the decision with the claim; (3) the outcome with
/// the run dropped; two audit rows each. Cycles per second, every cycle's rows checked.
fn gateway_cycle_floor(dir: &Path, seconds: f64) -> Result<f64, String> {
    let mut floor = SqlCycle::open(&dir.join("gateway-cycle-floor.db"))?;
    let deadline = Duration::from_secs_f64(seconds);
    let start = Instant::now();
    let mut n = 0;
    while start.elapsed() < deadline {
        n += 1;
        floor.prepare(n, true)?;
        floor.durable(|tx, c| {
            SqlCycle::decide(tx, c, n)?;
            SqlCycle::claim(tx, c, n)
        })?;
        floor.durable(|tx, c| SqlCycle::complete(tx, c, n, true))?;
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    floor.check(n as u64, 6 * n as u64)?;
    Ok(rate)
}

/// The floor of [`cycles`] for one run: approvals prepared untimed, then cycles of three durable
/// transactions (decide, claim, complete; an audit row each) one at a time. Cycles per second,
/// every cycle's rows checked.
fn store_cycle_floor(dir: &Path, seconds: f64) -> Result<f64, String> {
    let mut floor = SqlCycle::open(&dir.join("store-cycle-floor.db"))?;
    // As [`cycles`] prepares them: room for 3 000 cycles a second.
    let prepared = (seconds * 3000.0).max(64.0) as i64;
    for n in 1..=prepared {
        floor.prepare(n, false)?;
    }
    let deadline = Duration::from_secs_f64(seconds);
    let start = Instant::now();
    let mut n = 0;
    while n < prepared && start.elapsed() < deadline {
        n += 1;
        floor.durable(|tx, c| SqlCycle::decide(tx, c, n))?;
        floor.durable(|tx, c| SqlCycle::claim(tx, c, n))?;
        floor.durable(|tx, c| SqlCycle::complete(tx, c, n, false))?;
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    floor.check(n as u64, (prepared + 3 * n) as u64)?;
    Ok(rate)
}

async fn run(dir: PathBuf, seconds: f64) -> Result<serde_json::Value, String> {
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let db = dir.join("store-bench.db");
    remove_db(&db);
    let store = SqliteStore::open(&db).map_err(|e| e.to_string())?;
    let fsync = tokio::task::spawn_blocking({
        let dir = dir.clone();
        move || fsync_rate(&dir, seconds)
    })
    .await
    .map_err(|e| e.to_string())??;
    let one = cycles(&store, 1, seconds).await?;
    let sixteen = cycles(&store, 16, seconds).await?;
    let (floor_one, floor_sixteen, store_floor, gateway_floor) =
        tokio::task::spawn_blocking(move || {
            Ok::<_, String>((
                floor_cycles(&dir, 1, seconds)?,
                floor_cycles(&dir, 16, seconds)?,
                store_cycle_floor(&dir, seconds)?,
                gateway_cycle_floor(&dir, seconds)?,
            ))
        })
        .await
        .map_err(|e| e.to_string())??;
    Ok(
        json!({"fsync_per_s": fsync, "cycles_per_s_1": one, "cycles_per_s_16": sixteen,
              "floor_cycles_per_s_1": floor_one, "floor_cycles_per_s_16": floor_sixteen,
              "store_cycle_floor_per_s": store_floor,
              "gateway_cycle_floor_per_s": gateway_floor}),
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
