//! PostgreSQL faults during a durable write, against the independent official-SDK write server whose
//! fsynced ledger counts the requests that reached it:
//!
//! - `restart-after-claim` / `restart-after-send`: PostgreSQL restarted with a fast shutdown after the
//!   claim committed (before the send), and after the send (before the outcome is recorded);
//! - `commit-ack-lost`: the connection cut between the claim's commit and its acknowledgement (a proxy
//!   swallows the server's answer to that `COMMIT` and drops the connection);
//! - `partition`: the host cut off from the database (the proxy holds every byte) for longer than its
//!   lease: another host leaves the claim alone while the lease is valid and reconciles it after; the
//!   host's late outcome is refused and kept in the audit log.
//!
//! In each: exactly one request reaches the server, the stored outcome is the conservative one, and
//! the approval's audit trail says what happened.
//!
//! Usage: `pg-faults --db URL --ctl CTL <python> <write_server.py> <work dir>`, with CTL the test
//! server's control script (`scripts/postgres.sh` writes it: `restart-fast`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use host_smoke::proxy::Proxy;
use host_smoke::{
    close_and_check_exit, connect_write_server, ledger, open_store, store_for, take_db,
    write_agent_with, Hook, Hooks,
};
use purra_core::{
    ClaimState, Decision, EffectOutcome, ErrorCode, IdempotencyKey, Lease, RunId, RunOutcome,
    RunRequest, Verdict,
};
use purra_store::AnyStore;

struct Env {
    python: PathBuf,
    server: PathBuf,
    work: PathBuf,
    db: String,
    ctl: PathBuf,
}

const SCENARIOS: [&str; 4] = [
    "restart-after-claim",
    "restart-after-send",
    "commit-ack-lost",
    "partition",
];

/// Restarts PostgreSQL with a fast shutdown (every connection is terminated).
async fn restart(ctl: &Path) {
    let status = tokio::process::Command::new(ctl)
        .arg("restart-fast")
        .status()
        .await;
    if !status.as_ref().is_ok_and(|s| s.success()) {
        eprintln!("pg-faults: restarting PostgreSQL failed: {status:?}");
    }
}

/// The database URL with its host and port replaced by `addr` (the proxy), and the host and port.
fn through(url: &str, addr: std::net::SocketAddr) -> Option<(String, String)> {
    let (scheme, rest) = url.split_once("://")?;
    let (user, rest) = rest.split_once('@')?;
    let (hostport, tail) = rest.split_once('/')?;
    Some((
        format!("{scheme}://{user}@{addr}/{tail}"),
        hostport.to_owned(),
    ))
}

/// The database's `HOST:PORT`.
fn upstream(url: &str) -> Result<String, String> {
    let any = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    through(url, any)
        .map(|(_, hp)| hp)
        .ok_or_else(|| "the database URL has no host".into())
}

/// Prepares the write (a run that suspends) and approves it; returns the intent digest.
async fn prepare_and_approve(
    env: &Env,
    store: &AnyStore,
    dir: &Path,
    run: &RunId,
) -> Result<String, String> {
    let (conn, pid) = connect_write_server(&env.python, &env.server, dir, "success").await?;
    let agent = write_agent_with(&conn, store, Hooks::default(), false).await?;
    let outcome = agent
        .run(RunRequest {
            run_id: run.clone(),
            root_run_id: None,
            input: "set it".into(),
            lease: Lease::unbounded(),
        })
        .await;
    close_and_check_exit(conn, pid).await?;
    let RunOutcome::Suspended {
        approval_id,
        intent_digest,
    } = outcome
    else {
        return Err(format!("expected a suspension, got {outcome:?}"));
    };
    store
        .gateway()
        .decide(
            approval_id,
            Decision {
                verdict: Verdict::Approve,
                approver: "operator".into(),
                decided_at: SystemTime::now(),
                expires_at: None,
                note: Some("pg-faults".into()),
            },
        )
        .await
        .map_err(|e| format!("decide: {e}"))?;
    Ok(intent_digest.to_string())
}

/// Resumes the run with `hooks` on `store` and returns its outcome.
async fn resume(
    env: &Env,
    store: &AnyStore,
    dir: &Path,
    run: &RunId,
    hooks: Hooks,
) -> Result<RunOutcome, String> {
    let (conn, pid) = connect_write_server(&env.python, &env.server, dir, "success").await?;
    let agent = write_agent_with(&conn, store, hooks, true).await?;
    let outcome = agent.resume(run.clone(), Lease::unbounded()).await;
    close_and_check_exit(conn, pid).await?;
    Ok(outcome)
}

/// The events of the approval's audit trail, in order.
async fn trail(store: &AnyStore) -> Result<Vec<String>, String> {
    let id = purra_core::ApprovalId("approval-1".into());
    let rows = store
        .ops()
        .approval_audit(id)
        .await
        .map_err(|e| e.to_string())?;
    Ok(rows.into_iter().map(|e| e.event).collect())
}

fn calls(dir: &Path) -> usize {
    ledger(dir).iter().filter(|l| l.starts_with("call")).count()
}

async fn scenario(env: &Env, name: &str) -> Result<String, String> {
    let dir = env.work.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let db = store_for(Some(&env.db), &env.work, name);
    let run = RunId::new(format!("run-{name}"));
    let direct = open_store(&db, None).await?;
    let digest = prepare_and_approve(env, &direct, &dir, &run).await?;
    let key = IdempotencyKey(digest.clone());
    let committed = |s: &Option<ClaimState>| {
        matches!(
            s,
            Some(ClaimState::Completed {
                outcome: EffectOutcome::Committed { .. }
            })
        )
    };
    let summary = match name {
        "restart-after-claim" | "restart-after-send" => {
            let ctl = env.ctl.clone();
            let hook: Hook = Arc::new(move || {
                let ctl = ctl.clone();
                Box::pin(async move { restart(&ctl).await })
            });
            let hooks = if name == "restart-after-claim" {
                Hooks {
                    before_send: Some(hook),
                    ..Hooks::default()
                }
            } else {
                Hooks {
                    after_send: Some(hook),
                    ..Hooks::default()
                }
            };
            let outcome = resume(env, &direct, &dir, &run, hooks).await?;
            let state = direct
                .ops()
                .state(key.clone())
                .await
                .map_err(|e| e.to_string())?;
            let events = trail(&direct).await?;
            // The store rode out the restart: the outcome was recorded once the server was back.
            if outcome
                != (RunOutcome::Completed {
                    text: "write attempted".into(),
                })
                || !committed(&state)
            {
                return Err(format!(
                    "outcome {outcome:?}, claim {state:?}, trail {events:?}"
                ));
            }
            if events != ["prepared", "run_suspended", "decided", "claimed", "outcome"] {
                return Err(format!("trail {events:?}"));
            }
            format!("claim committed after the restart; trail {events:?}")
        }
        "commit-ack-lost" => {
            let proxy = Proxy::start(upstream(&db)?)
                .await
                .map_err(|e| e.to_string())?;
            let (proxied, _) = through(&db, proxy.addr).ok_or("the database URL has no host")?;
            let host = open_store(&proxied, None).await?;
            proxy.cut_next_claim_commit();
            let outcome = resume(env, &host, &dir, &run, Hooks::default()).await?;
            let state = direct
                .ops()
                .state(key.clone())
                .await
                .map_err(|e| e.to_string())?;
            let events = trail(&direct).await?;
            if proxy.cuts() != 1 {
                return Err(format!("the proxy cut {} acknowledgements", proxy.cuts()));
            }
            // The retry found its own committed claim (the audit row of its operation token): the
            // write was sent once, under that claim, and the log says the acknowledgement was lost.
            if outcome
                != (RunOutcome::Completed {
                    text: "write attempted".into(),
                })
                || !committed(&state)
            {
                return Err(format!(
                    "outcome {outcome:?}, claim {state:?}, trail {events:?}"
                ));
            }
            if events
                != [
                    "prepared",
                    "run_suspended",
                    "decided",
                    "claimed",
                    "commit_confirmed",
                    "outcome",
                ]
            {
                return Err(format!("trail {events:?}"));
            }
            format!("acknowledgement cut once; trail {events:?}")
        }
        "partition" => {
            let proxy = Proxy::start(upstream(&db)?)
                .await
                .map_err(|e| e.to_string())?;
            let (proxied, _) = through(&db, proxy.addr).ok_or("the database URL has no host")?;
            let lease = Duration::from_secs(1);
            let host = open_store(&proxied, Some(lease)).await?;
            let other = open_store(&db, None).await?;
            let seen: Arc<Mutex<Vec<String>>> = Arc::default();
            let checks = {
                let (proxy, other, seen, key) =
                    (proxy.clone(), other.clone(), Arc::clone(&seen), key.clone());
                let hook: Hook = Arc::new(move || {
                    let (proxy, other, seen, key) =
                        (proxy.clone(), other.clone(), Arc::clone(&seen), key.clone());
                    Box::pin(async move {
                        // The request was answered; the host loses the database before recording it.
                        proxy.partition(true);
                        tokio::spawn(async move {
                            let note =
                                |s: String| seen.lock().unwrap_or_else(|p| p.into_inner()).push(s);
                            let early = other
                                .ops()
                                .reconcile_interrupted_claims(SystemTime::now())
                                .await;
                            note(format!("early {early:?}"));
                            tokio::time::sleep(lease * 2).await;
                            let late = other
                                .ops()
                                .reconcile_interrupted_claims(SystemTime::now())
                                .await;
                            note(format!("late {late:?}"));
                            let state = other.ops().state(key).await;
                            note(format!("state {state:?}"));
                            proxy.partition(false);
                        });
                    })
                });
                Hooks {
                    after_send: Some(hook),
                    ..Hooks::default()
                }
            };
            let outcome = resume(env, &host, &dir, &run, checks).await?;
            let seen = seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
            let state = direct
                .ops()
                .state(key.clone())
                .await
                .map_err(|e| e.to_string())?;
            let events = trail(&direct).await?;
            let interrupted = Some(ClaimState::Completed {
                outcome: EffectOutcome::Unknown {
                    reason: ErrorCode::new("interrupted").map_err(|e| e.to_string())?,
                },
            });
            let early_ok = seen.first().is_some_and(|s| {
                s.contains("interrupted: []") && s.contains("in_flight_elsewhere: 1")
            });
            let late_ok = seen.get(1).is_some_and(|s| s.contains(&digest));
            // The host's outcome came after the other host reconciled: refused, kept as evidence.
            if !early_ok || !late_ok || state != interrupted {
                return Err(format!(
                    "checks {seen:?}; claim {state:?}; outcome {outcome:?}"
                ));
            }
            if events
                != [
                    "prepared",
                    "run_suspended",
                    "decided",
                    "claimed",
                    "interrupted",
                    "outcome_rejected",
                ]
            {
                return Err(format!("trail {events:?}"));
            }
            format!("left alone within the lease, interrupted after it; trail {events:?}; the host's run: {outcome:?}")
        }
        other => return Err(format!("unknown scenario {other}")),
    };
    let sent = calls(&dir);
    if sent != 1 {
        return Err(format!(
            "{sent} requests reached the server: {:?}",
            ledger(&dir)
        ));
    }
    Ok(format!("1 request; {summary}"))
}

#[tokio::main]
async fn main() -> ExitCode {
    let mut a: Vec<String> = std::env::args().skip(1).collect();
    let db = take_db(&mut a);
    let ctl = a.iter().position(|x| x == "--ctl").and_then(|at| {
        let v = a.get(at + 1).cloned();
        a.drain(at..(at + 2).min(a.len()));
        v
    });
    let (Some(db), Some(ctl), [python, server, work]) = (db, ctl, a.as_slice()) else {
        eprintln!("usage: pg-faults --db URL --ctl CTL <python> <write_server.py> <work dir>");
        return ExitCode::from(2);
    };
    let env = Env {
        python: python.into(),
        server: server.into(),
        work: work.into(),
        db,
        ctl: ctl.into(),
    };
    let mut failed = 0;
    for name in SCENARIOS {
        match scenario(&env, name).await {
            Ok(s) => eprintln!("pg-faults: ok {name}: {s}"),
            Err(why) => {
                failed += 1;
                eprintln!("pg-faults: FAILED {name}: {why}");
            }
        }
    }
    eprintln!(
        "pg-faults: {} passed, {failed} failed",
        SCENARIOS.len() - failed
    );
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
