//! Independent write-server acceptance, run as a user's host would: five fault scenarios against
//! a separate official-SDK server process, with durable approvals on SQLite or PostgreSQL.
//!
//! Usage: `write-acceptance [--db DIR|URL] <python> <write_server.py> <work dir>`: the stores are
//! SQLite files (in the work dir, or DIR), or schemas of the `postgres://` database URL.
//!
//! Each scenario: discover the write tool through host bindings; a scripted agent asks for the
//! write and suspends with a durable pending approval; the store is reopened before approving;
//! a fresh host (new connection, rediscovery, new agent) resumes and dispatches; the local
//! receipt or retained unknown claim is checked against the server's fsynced ledger; reopening
//! and resuming again never dispatches twice; every server process is checked to have exited.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use host_smoke::{
    close_and_check_exit, connect_write_server, ledger, open_store, store_for, take_db, write_agent, CrashAt,
    SYNTHETIC,
};
use purra_core::{ClaimState, Decision, EffectOutcome, IdempotencyKey, Lease, RunId, RunOutcome, RunRequest, Verdict};
use serde_json::json;
const SCENARIOS: [&str; 5] = ["success", "lost-response", "exit-before-write", "exit-after-write", "error-after-write"];

struct Env {
    python: PathBuf,
    server: PathBuf,
    work: PathBuf,
    db: Option<String>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let db = take_db(&mut args);
    let [python, server, work] = args.as_slice() else {
        eprintln!("usage: write-acceptance [--db DIR|URL] <python> <write_server.py> <work dir>");
        return ExitCode::from(2);
    };
    let env = Env {
        python: python.into(),
        server: server.into(),
        work: work.into(),
        db,
    };
    let kind = if env.db.as_deref().is_some_and(|d| d.starts_with("postgres")) { "PostgreSQL" } else { "SQLite" };
    eprintln!("write-acceptance: stores on {kind}");
    let mut failed = 0;
    for name in SCENARIOS {
        match scenario(&env, name).await {
            Ok(summary) => eprintln!("write-acceptance: ok {name}: {summary}"),
            Err(why) => {
                failed += 1;
                eprintln!("write-acceptance: FAILED {name}: {why}");
            }
        }
    }
    eprintln!("write-acceptance: {} passed, {failed} failed", SCENARIOS.len() - failed);
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

async fn scenario(env: &Env, name: &str) -> Result<String, String> {
    let dir = env.work.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let db = store_for(env.db.as_deref(), &env.work, name);
    let run_id = RunId::new(format!("run-{name}"));

    // 1. The agent asks for the write and suspends with a durable pending approval.
    let (approval_id, digest) = {
        let store = open_store(&db, None).await?;
        let (conn, pid) = connect_write_server(&env.python, &env.server, &dir, name).await?;
        let agent = write_agent(&conn, &store, CrashAt::Nowhere, false).await?;
        let outcome = agent
            .run(RunRequest {
                run_id: run_id.clone(),
                root_run_id: None,
                input: "set it".into(),
                lease: Lease::unbounded(),
            })
            .await;
        close_and_check_exit(conn, pid).await?;
        match outcome {
            RunOutcome::Suspended {
                approval_id,
                intent_digest,
            } => (approval_id, intent_digest),
            other => return Err(format!("expected a suspension, got {other:?}")),
        }
    };
    if ledger(&dir).iter().any(|l| l.starts_with("call")) {
        return Err("the server saw a call before approval".into());
    }

    // 2. Reopen the store, then approve.
    {
        let store = open_store(&db, None).await?;
        store
            .gateway()
            .decide(
                approval_id.clone(),
                Decision {
                    verdict: Verdict::Approve,
                    approver: "operator".into(),
                    decided_at: SystemTime::now(),
                    expires_at: Some(SystemTime::now() + Duration::from_secs(600)),
                    note: None,
                },
            )
            .await
            .map_err(|e| format!("decide: {e}"))?;
    }

    // 3. A fresh host resumes and dispatches once.
    let outcome = {
        let store = open_store(&db, None).await?;
        let (conn, pid) = connect_write_server(&env.python, &env.server, &dir, name).await?;
        let agent = write_agent(&conn, &store, CrashAt::Nowhere, true).await?;
        let outcome = agent.resume(run_id.clone(), Lease::unbounded()).await;
        close_and_check_exit(conn, pid).await?;
        if outcome != (RunOutcome::Completed { text: "write attempted".into() }) {
            return Err(format!("the resumed run ended with {outcome:?}"));
        }
        outcome
    };

    // 4. Local truth against the server's ledger.
    let store = open_store(&db, None).await?;
    let state = store
        .gateway()
        .receipts()
        .state(IdempotencyKey(digest.to_string()))
        .await
        .map_err(|e| format!("state: {e}"))?;
    let lines = ledger(&dir);
    let calls = lines.iter().filter(|l| l.starts_with("call")).count();
    if calls != 1 {
        return Err(format!("the server saw {calls} calls: {lines:?}"));
    }
    let wrote = lines.iter().any(|l| l.starts_with("wrote"));
    let stored = std::fs::read_to_string(dir.join("value.txt")).ok();
    match (name, &state) {
        ("success", Some(ClaimState::Completed { outcome: EffectOutcome::Committed { receipt } })) => {
            if receipt["structured"] != json!({"stored": SYNTHETIC}) || !wrote || stored.as_deref() != Some(SYNTHETIC) {
                return Err(format!("receipt {receipt} / ledger {lines:?}"));
            }
        }
        ("success", other) => return Err(format!("expected committed, got {other:?}; outcome {outcome:?}")),
        (_, Some(ClaimState::Completed { outcome: EffectOutcome::Unknown { reason } })) => {
            let want_write = name != "exit-before-write";
            if wrote != want_write || stored.is_some() != want_write {
                return Err(format!("ledger {lines:?} disagrees with the scenario"));
            }
            let _ = reason;
        }
        (_, other) => return Err(format!("expected an unknown claim, got {other:?}; outcome {outcome:?}")),
    }

    // 5. Reopening and resuming again never dispatches.
    {
        let store = open_store(&db, None).await?;
        let (conn, pid) = connect_write_server(&env.python, &env.server, &dir, name).await?;
        let agent = write_agent(&conn, &store, CrashAt::Nowhere, true).await?;
        let again = agent.resume(run_id, Lease::unbounded()).await;
        close_and_check_exit(conn, pid).await?;
        if !matches!(&again, RunOutcome::Failed { code } if code.as_str() == "run_not_suspended") {
            return Err(format!("a second resume did something: {again:?}"));
        }
    }
    let calls = ledger(&dir).iter().filter(|l| l.starts_with("call")).count();
    if calls != 1 {
        return Err(format!("after reopening, the server saw {calls} calls"));
    }
    Ok(format!("claim {state:?}; ledger {:?}", ledger(&dir)))
}
