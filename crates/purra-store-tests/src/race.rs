//! Two OS processes on one database: the test binary re-executes itself in a "racer" mode (selected by
//! an environment variable) so that two processes race to `check_and_claim` the same approved intent,
//! round after round; and a process killed (SIGKILL) after claiming leaves a claim that becomes
//! `interrupted` only once its lease has lapsed.

use crate::*;
use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Selects a child mode: `race|<db>|<start ns>|<slot ms>|<rounds>` or `crash|<db>`.
const MODE: &str = "PURRA_STORE_RACER";
const ROUNDS: usize = 100;

fn round_intent(round: usize) -> ApprovalIntent {
    intent(&format!("round-{round}"))
}

fn round_request(round: usize) -> ApprovalRequest {
    request(&format!("round-{round}"))
}

/// Whether this process is a re-executed child (its contract tests then do nothing).
pub fn is_child() -> bool {
    std::env::var_os(MODE).is_some()
}

/// The name libtest gives the `child` test [`contract_tests!`] defines in `module` (its
/// `module_path!()`): the path below the test crate's root, `child` when at the root.
pub fn child_test(module: &str) -> String {
    match module.split_once("::") {
        Some((_crate, path)) => format!("{path}::child"),
        None => "child".to_owned(),
    }
}

/// Runs this test binary's `child_test` in a new process with `spec` as its mode.
fn spawn_child(child_test: &str, spec: &str) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", child_test, "--nocapture", "--test-threads=1"])
        .env(MODE, spec)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The child process's work; in a normal test run (no mode set) it does nothing.
#[allow(clippy::print_stdout)] // The child reports to its parent on stdout.
pub fn child<H: Harness>(h: &H) {
    let Ok(spec) = std::env::var(MODE) else {
        return;
    };
    let parts: Vec<&str> = spec.split('|').collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        match parts[0] {
            "race" => {
                let store = h.open(parts[1]).await.unwrap();
                let start = UNIX_EPOCH + Duration::from_nanos(parts[2].parse().unwrap());
                let slot = Duration::from_millis(parts[3].parse().unwrap());
                let rounds: usize = parts[4].parse().unwrap();
                for round in 0..rounds {
                    // Both processes start each round at the same instant.
                    let go = start + slot * round as u32;
                    if let Ok(wait) = go.duration_since(SystemTime::now()) {
                        std::thread::sleep(wait);
                    }
                    let id = ApprovalId(format!("approval-{}", round + 1));
                    let verdict = store
                        .check_and_claim(id, round_intent(round).digest(), SystemTime::now())
                        .await;
                    let word = match verdict {
                        Ok(ClaimVerdict::Claimed(_)) => "claimed".to_owned(),
                        Ok(ClaimVerdict::AlreadyClaimed) => "already_claimed".to_owned(),
                        other => format!("error:{other:?}").replace(' ', "_"),
                    };
                    println!("RACE {round} {word}");
                }
            }
            "crash" => {
                let store = h
                    .open_with_lease(parts[1], Duration::from_secs(1))
                    .await
                    .unwrap();
                let claimed = store.claim(IdempotencyKey("crash".into())).await;
                let at = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
                println!("CLAIMED {claimed:?} {}", at.as_nanos());
                std::io::Write::flush(&mut std::io::stdout()).unwrap();
                // Wait to be killed between claim and outcome (SIGKILL: no destructor, no close).
                std::thread::sleep(Duration::from_secs(60));
            }
            other => panic!("unknown mode {other}"),
        }
    });
}

/// Contract test: two processes race for each of 100 approved intents; exactly one wins every round.
/// The processes run the binary's test `child_test` (named by [`child_test`]).
pub fn two_processes_race<H: Harness>(h: &H, child_test: &str) {
    if is_child() {
        return;
    }
    let path = h.fresh("race");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let store = rt.block_on(h.open(&path)).unwrap();
    rt.block_on(async {
        for round in 0..ROUNDS {
            let id = store.prepare(round_request(round)).await.unwrap();
            assert_eq!(id, ApprovalId(format!("approval-{}", round + 1)));
            store
                .decide(id, decision(Verdict::Approve, None))
                .await
                .unwrap();
        }
    });
    let start = SystemTime::now() + Duration::from_millis(1500);
    let start_ns = start.duration_since(UNIX_EPOCH).unwrap().as_nanos();
    let spec = format!("race|{path}|{start_ns}|20|{ROUNDS}");
    let children = [
        spawn_child(child_test, &spec),
        spawn_child(child_test, &spec),
    ];
    let mut wins: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    let mut losses: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    let mut per_process = [0usize; 2];
    for (proc_idx, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "racer {proc_idx} failed: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut reported = 0;
        for line in stdout.lines() {
            let Some(at) = line.find("RACE ") else {
                continue;
            };
            let mut words = line[at + 5..].split_whitespace();
            let round: usize = words.next().unwrap().parse().unwrap();
            match words.next().unwrap() {
                "claimed" => {
                    wins.entry(round).or_default().push(proc_idx);
                    per_process[proc_idx] += 1;
                }
                "already_claimed" => losses.entry(round).or_default().push(proc_idx),
                error => panic!("racer {proc_idx} round {round}: {error}"),
            }
            reported += 1;
        }
        assert_eq!(reported, ROUNDS, "racer {proc_idx} output: {stdout}");
    }
    for round in 0..ROUNDS {
        let won = wins.get(&round).cloned().unwrap_or_default();
        let lost = losses.get(&round).cloned().unwrap_or_default();
        assert_eq!(won.len(), 1, "round {round}: winners {won:?}");
        assert_eq!(lost.len(), 1, "round {round}: losers {lost:?}");
        assert_ne!(won, lost);
    }
    assert_eq!(per_process[0] + per_process[1], ROUNDS);
    // The file agrees: every round's key is claimed once, by one of the two racers.
    rt.block_on(async {
        for round in 0..ROUNDS {
            assert_eq!(
                store.state(key_of(&round_intent(round))).await,
                Ok(Some(ClaimState::InFlight))
            );
        }
        let log = store.audit(0, 100_000).await.unwrap();
        assert_eq!(log.iter().filter(|e| e.event == "claimed").count(), ROUNDS);
        assert_eq!(
            log.iter().filter(|e| e.event == "claim_refused").count(),
            ROUNDS
        );
    });
    eprintln!("race: wins per process {per_process:?}");
}

/// Contract test: a claimant killed with SIGKILL leaves a claim that becomes `interrupted` only once
/// its lease has lapsed. The claimant runs the binary's test `child_test` (named by [`child_test`]).
pub fn a_killed_claimant<H: Harness>(h: &H, child_test: &str) {
    if is_child() {
        return;
    }
    let path = h.fresh("crash");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let store = rt.block_on(h.open(&path)).unwrap();
    let mut child = spawn_child(child_test, &format!("crash|{path}"));
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("CLAIMED") {
        line.clear();
        assert_ne!(
            std::io::BufRead::read_line(&mut stdout, &mut line).unwrap(),
            0
        );
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let killed = SystemTime::now();
    let mut words = line[line.find("CLAIMED ").unwrap() + 8..].split_whitespace();
    assert_eq!(words.next(), Some("Ok(Claimed)"));
    let claimed_at = UNIX_EPOCH + Duration::from_nanos(words.next().unwrap().parse().unwrap());
    let key = IdempotencyKey("crash".into());
    rt.block_on(async {
        // Within the dead process's lease (1 s) nobody can tell it from a slow live one.
        let early = store
            .reconcile_interrupted_claims(claimed_at)
            .await
            .unwrap();
        assert_eq!(early.interrupted, Vec::<IdempotencyKey>::new());
        assert_eq!(early.in_flight_elsewhere, 1);
        assert_eq!(
            store.state(key.clone()).await,
            Ok(Some(ClaimState::InFlight))
        );
        // Whatever happens, the call is never claimed again.
        assert_eq!(
            store.claim(key.clone()).await,
            Ok(ClaimResult::Existing(ClaimState::InFlight))
        );
        // Its heartbeat stopped when it was killed; a lease later it is gone.
        let lapsed = killed + Duration::from_millis(1100);
        if let Ok(wait) = lapsed.duration_since(SystemTime::now()) {
            tokio::time::sleep(wait).await;
        }
        let later = store
            .reconcile_interrupted_claims(SystemTime::now())
            .await
            .unwrap();
        assert_eq!(later.interrupted, vec![key.clone()]);
        assert_eq!(
            store.state(key).await,
            Ok(Some(ClaimState::Completed {
                outcome: EffectOutcome::Unknown {
                    reason: ErrorCode::new(INTERRUPTED).unwrap()
                }
            }))
        );
    });
}
