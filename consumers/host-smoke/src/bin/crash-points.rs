//! Crash points: the writing host is killed with SIGKILL at each transition (after prepare,
//! after approve, after the claim commits and before the send, after the send and before the
//! outcome, after the outcome). After each, a restarted host never sends a second request for
//! the same intent (checked on the server's ledger), every claim ends committed, not_started or
//! unknown truthfully, and every server process has exited.
//!
//! Usage: `crash-points [--db DIR|URL] <python> <write_server.py> <work dir>` (the stores are SQLite
//! files, or schemas of the `postgres://` database URL); it runs `crash-host` from the same
//! directory as itself.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Duration;

use host_smoke::{calls, ledger, open_store, store_for, take_db, wait_exit};
use purra_core::{ClaimState, EffectOutcome};

/// The claims' lease in the crash tests: a dead host's claim is reconciled after it lapses.
const LEASE_MS: u64 = 300;

struct Env {
    host: PathBuf,
    python: PathBuf,
    server: PathBuf,
    work: PathBuf,
    db: Option<String>,
}

struct Step {
    killed: bool,
    stdout: String,
}

fn step(env: &Env, dir: &Path, db: &str, name: &str, crash: &str) -> Result<Step, String> {
    let out = Command::new(&env.host)
        .args([&env.python, &env.server, dir])
        .arg(db)
        .args([LEASE_MS.to_string().as_str(), name, crash])
        .output()
        .map_err(|e| format!("spawn crash-host: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let killed = out.status.signal() == Some(9);
    if !killed && !out.status.success() {
        return Err(format!(
            "{name} failed: {:?}\n{stdout}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    if killed != (crash != "nowhere") {
        return Err(format!("{name} with crash point {crash}: killed = {killed}\n{stdout}"));
    }
    Ok(Step { killed, stdout })
}

fn server_pids(s: &Step) -> Vec<u32> {
    s.stdout
        .lines()
        .filter_map(|l| l.strip_prefix("server-pid ")?.parse().ok())
        .collect()
}

async fn all_exited(steps: &[&Step]) -> Result<(), String> {
    for s in steps {
        for pid in server_pids(s) {
            if !wait_exit(pid, Duration::from_secs(10)).await {
                return Err(format!("server process {pid} is still running"));
            }
        }
    }
    Ok(())
}

async fn claim_state(db: &str, digest: &str) -> Result<Option<ClaimState>, String> {
    let store = open_store(db, None).await?;
    store
        .ops()
        .state(purra_core::IdempotencyKey(digest.to_owned()))
        .await
        .map_err(|e| e.to_string())
}

async fn point(env: &Env, crash: &str) -> Result<String, String> {
    let dir = env.work.join(crash);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let db = store_for(env.db.as_deref(), &env.work, crash);
    let at = |p: &str| if p == crash { crash } else { "nowhere" };
    let prepare = step(env, &dir, &db, "prepare", at("after-prepare"))?;
    let approve = step(env, &dir, &db, "approve", at("after-approve"))?;
    let dispatch_crash = ["after-claim", "after-send", "after-outcome"]
        .into_iter()
        .find(|p| *p == crash)
        .unwrap_or("nowhere");
    let dispatch = step(env, &dir, &db, "dispatch", dispatch_crash)?;
    if dispatch.killed {
        // Let the dead host's lease lapse, so the restarted host may reconcile its claim.
        tokio::time::sleep(Duration::from_millis(LEASE_MS * 2)).await;
    }
    let restart = step(env, &dir, &db, "dispatch", "nowhere")?;
    let again = step(env, &dir, &db, "dispatch", "nowhere")?;
    all_exited(&[&prepare, &approve, &dispatch, &restart, &again]).await?;
    let sent = calls(&dir);
    let digest = prepare
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("intent "))
        .ok_or("prepare printed no intent digest")?
        .to_owned();
    let state = claim_state(&db, &digest).await?;
    let expect_sent = usize::from(crash != "after-claim");
    if sent != expect_sent {
        return Err(format!("{sent} requests reached the server (want {expect_sent}): {:?}", ledger(&dir)));
    }
    let truthful = match (crash, &state) {
        ("after-claim" | "after-send", Some(ClaimState::Completed { outcome: EffectOutcome::Unknown { reason } })) => {
            reason.as_str() == "interrupted"
        }
        (_, Some(ClaimState::Completed { outcome: EffectOutcome::Committed { .. } })) => {
            !matches!(crash, "after-claim" | "after-send")
        }
        _ => false,
    };
    if !truthful {
        return Err(format!("claim state {state:?} after a crash {crash}; ledger {:?}", ledger(&dir)));
    }
    Ok(format!("{sent} request(s) sent; claim {state:?}"))
}

#[tokio::main]
async fn main() -> ExitCode {
    let mut a: Vec<String> = std::env::args().skip(1).collect();
    let db = take_db(&mut a);
    let [python, server, work] = a.as_slice() else {
        eprintln!("usage: crash-points [--db DIR|URL] <python> <write_server.py> <work dir>");
        return ExitCode::from(2);
    };
    let host = std::env::current_exe().expect("own path").with_file_name("crash-host");
    let env = Env {
        host,
        python: python.into(),
        server: server.into(),
        work: work.into(),
        db,
    };
    let mut failed = 0;
    let points = ["after-prepare", "after-approve", "after-claim", "after-send", "after-outcome"];
    for crash in points {
        match point(&env, crash).await {
            Ok(s) => eprintln!("crash-points: ok {crash}: {s}"),
            Err(why) => {
                failed += 1;
                eprintln!("crash-points: FAILED {crash}: {why}");
            }
        }
    }
    eprintln!("crash-points: {} passed, {failed} failed", points.len() - failed);
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
