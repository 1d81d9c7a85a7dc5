//! A writing host that kills itself with SIGKILL at a chosen transition of the durable-write
//! state machine; `crash-points` runs it step by step and restarts it.
//!
//! Usage: `crash-host <python> <write_server.py> <dir> <db> <lease-ms> <step> <crash-at>` (db: a
//! SQLite file or a `postgres://` URL) with
//! step `prepare`, `approve` or `dispatch`, and crash-at `nowhere`, `after-prepare`,
//! `after-approve`, `after-claim`, `after-send` or `after-outcome`. It prints `server-pid N`
//! for every server it starts, and its outcome.

#![allow(clippy::print_stdout)] // the driver reads this program's stdout

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use host_smoke::{close_and_check_exit, connect_write_server, kill_self, open_store, write_agent, CrashAt};
use purra_core::{Decision, Lease, RunId, RunOutcome, RunRequest, Verdict};
use purra_store::AnyStore;

const RUN: &str = "run-crash";

#[tokio::main]
async fn main() -> ExitCode {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let [python, server, dir, db, lease_ms, step, crash] = a.as_slice() else {
        eprintln!("usage: crash-host <python> <server> <dir> <db> <lease-ms> <step> <crash-at>");
        return ExitCode::from(2);
    };
    let (Some(crash), Ok(lease_ms)) = (CrashAt::parse(crash), lease_ms.parse::<u64>()) else {
        eprintln!("crash-host: bad crash point or lease");
        return ExitCode::from(2);
    };
    let python = PathBuf::from(python);
    let server = PathBuf::from(server);
    let dir = PathBuf::from(dir);
    let store = match open_store(db, Some(Duration::from_millis(lease_ms))).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("crash-host: open: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match step.as_str() {
        "prepare" => prepare(&python, &server, &dir, store, crash).await,
        "approve" => approve(store, crash).await,
        "dispatch" => dispatch(&python, &server, &dir, store, crash).await,
        other => Err(format!("unknown step {other}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("crash-host: {why}");
            ExitCode::FAILURE
        }
    }
}

async fn prepare(
    python: &std::path::Path,
    server: &std::path::Path,
    dir: &std::path::Path,
    store: AnyStore,
    crash: CrashAt,
) -> Result<(), String> {
    let (conn, pid) = connect_write_server(python, server, dir, "success").await?;
    println!("server-pid {pid}");
    let agent = write_agent(&conn, &store, crash, false).await?;
    let outcome = agent
        .run(RunRequest {
            run_id: RunId::new(RUN),
            root_run_id: None,
            input: "set it".into(),
            lease: Lease::unbounded(),
        })
        .await;
    let RunOutcome::Suspended { intent_digest, .. } = outcome else {
        return Err(format!("expected a suspension, got {outcome:?}"));
    };
    println!("intent {intent_digest}");
    if crash == CrashAt::AfterPrepare {
        kill_self();
    }
    close_and_check_exit(conn, pid).await
}

async fn approve(store: AnyStore, crash: CrashAt) -> Result<(), String> {
    let run = store
        .runs()
        .load_suspended(RunId::new(RUN))
        .await
        .map_err(|e| format!("load: {e}"))?
        .ok_or("no suspended run")?;
    store
        .gateway()
        .decide(
            run.approval_id,
            Decision {
                verdict: Verdict::Approve,
                approver: "operator".into(),
                decided_at: SystemTime::now(),
                expires_at: None,
                note: None,
            },
        )
        .await
        .map_err(|e| format!("decide: {e}"))?;
    println!("approved");
    if crash == CrashAt::AfterApprove {
        kill_self();
    }
    Ok(())
}

async fn dispatch(
    python: &std::path::Path,
    server: &std::path::Path,
    dir: &std::path::Path,
    store: AnyStore,
    crash: CrashAt,
) -> Result<(), String> {
    // A restarted host first records what is known about claims a dead host left behind.
    let rec = store
        .ops()
        .reconcile_interrupted_claims(SystemTime::now())
        .await
        .map_err(|e| format!("reconcile: {e}"))?;
    println!("reconciled {}", rec.interrupted.len());
    let (conn, pid) = connect_write_server(python, server, dir, "success").await?;
    println!("server-pid {pid}");
    let agent = write_agent(&conn, &store, crash, true).await?;
    let outcome = agent.resume(RunId::new(RUN), Lease::unbounded()).await;
    println!("outcome {outcome:?}");
    if crash == CrashAt::AfterOutcome {
        kill_self();
    }
    close_and_check_exit(conn, pid).await
}
