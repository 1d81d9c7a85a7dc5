//! Two host processes race to dispatch the same approved intent, 100 rounds: exactly one request
//! reaches the server in every round (counted by the server itself).
//!
//! Usage: `dispatch-race [--db DIR|URL] <purra-adapter-fixture binary> <work dir>` (the store is a
//! SQLite file, or a schema of the `postgres://` database URL); it runs `race-host` from the same
//! directory as itself.

use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, SystemTime};

use host_smoke::{fixture_write_agent, open_store, store_for, take_db};
use purra_core::{Decision, Lease, RunId, RunOutcome, RunRequest, Verdict};
use purra_protocol::{Client, ClientOptions, HttpClientOptions};
use serde_json::json;

const ROUNDS: u64 = 100;

/// How many `tools/call`s of `lookup` the fixture server has received.
async fn server_calls(url: &str) -> Result<u64, String> {
    let conn = Client::connect_http(url, HttpClientOptions::default(), ClientOptions::default())
        .await
        .map_err(|e| e.to_string())?;
    let r = conn
        .call_tool("observed", json!({"tool": "lookup"}))
        .await
        .map_err(|e| e.to_string())?;
    conn.close().await;
    let text: String = r.texts().collect();
    text.strip_prefix("calls=")
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .ok_or(format!("unexpected answer {text}"))
}

async fn race(fixture: &str, work: &std::path::Path, db: Option<&str>) -> Result<String, String> {
    std::fs::create_dir_all(work).map_err(|e| e.to_string())?;
    let db = store_for(db, work, "race");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port();
    let mut server = Command::new(fixture)
        .args(["--http", &format!("127.0.0.1:{port}")])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("fixture: {e}"))?;
    let url = format!("http://127.0.0.1:{port}/mcp");
    let result = async {
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let host = std::env::current_exe().map_err(|e| e.to_string())?.with_file_name("race-host");
        let store = open_store(&db, None).await?;
        let mut split = [0u64; 2];
        let mut last_seq = 0i64;
        for round in 0..ROUNDS {
            let run = format!("race-{round}");
            // Prepare and approve the write in this process.
            let (conn, agent) = fixture_write_agent(&url, &store, round, false).await?;
            let outcome = agent
                .run(RunRequest {
                    run_id: RunId::new(run.as_str()),
                    root_run_id: None,
                    input: "write".into(),
                    lease: Lease::unbounded(),
                })
                .await;
            conn.close().await;
            let RunOutcome::Suspended { approval_id, .. } = outcome else {
                return Err(format!("round {round}: expected a suspension, got {outcome:?}"));
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
                        note: None,
                    },
                )
                .await
                .map_err(|e| e.to_string())?;
            let before = server_calls(&url).await?;
            // Two hosts resume the same run at once.
            let spawn = || {
                Command::new(&host)
                    .args([url.as_str(), &db, &run, &round.to_string()])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .map_err(|e| format!("race-host: {e}"))
            };
            let (a, b) = (spawn()?, spawn()?);
            let outs = [a.wait_with_output(), b.wait_with_output()];
            let mut owners = Vec::new();
            for out in outs {
                let out = out.map_err(|e| e.to_string())?;
                if !out.status.success() {
                    return Err(format!(
                        "round {round}: a host failed: {}",
                        String::from_utf8_lossy(&out.stderr)
                    ));
                }
                let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
                let owner = stdout
                    .lines()
                    .find_map(|l| l.strip_prefix("owner "))
                    .ok_or("a host printed no owner")?
                    .to_owned();
                owners.push(owner);
            }
            let after = server_calls(&url).await?;
            // The store's append-only audit says who claimed: exactly one claim this round.
            let entries = store.ops().audit(last_seq, 1000).await.map_err(|e| e.to_string())?;
            last_seq = entries.last().map_or(last_seq, |e| e.seq);
            let claimed: Vec<&str> = entries
                .iter()
                .filter(|e| e.event == "claimed")
                .map(|e| e.owner.as_str())
                .collect();
            let winners: Vec<usize> = (0..2).filter(|i| claimed.contains(&owners[*i].as_str())).collect();
            if after - before != 1 || claimed.len() != 1 || winners.len() != 1 {
                return Err(format!(
                    "round {round}: {} requests reached the server; claims by {claimed:?}; hosts {owners:?}",
                    after - before
                ));
            }
            split[winners[0]] += 1;
        }
        Ok(format!(
            "{ROUNDS} rounds, exactly one request each; the first host won {} rounds, the second {}",
            split[0], split[1]
        ))
    }
    .await;
    let _ = server.kill();
    let _ = server.wait();
    result
}

#[tokio::main]
async fn main() -> ExitCode {
    let mut a: Vec<String> = std::env::args().skip(1).collect();
    let db = take_db(&mut a);
    let [fixture, work] = a.as_slice() else {
        eprintln!("usage: dispatch-race [--db DIR|URL] <purra-adapter-fixture> <work dir>");
        return ExitCode::from(2);
    };
    match race(fixture, std::path::Path::new(work), db.as_deref()).await {
        Ok(s) => {
            eprintln!("dispatch-race: ok: {s}");
            eprintln!("dispatch-race: 1 passed, 0 failed");
            ExitCode::SUCCESS
        }
        Err(why) => {
            eprintln!("dispatch-race: FAILED: {why}");
            eprintln!("dispatch-race: 0 passed, 1 failed");
            ExitCode::FAILURE
        }
    }
}
