//! One of two hosts racing to dispatch the same approved write: it resumes run `RUN` from the
//! shared store (a SQLite file or a `postgres://` URL) against the fixture server at `URL`, and
//! prints whether it dispatched.
//!
//! Usage: `race-host <url> <db> <run-id> <item-id>`.

#![allow(clippy::print_stdout)] // the race driver reads this program's stdout

use std::process::ExitCode;

use host_smoke::{fixture_write_agent, open_store};
use purra_core::{Lease, RunId, RunOutcome};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let [url, db, run, id] = a.as_slice() else {
        eprintln!("usage: race-host <url> <db> <run-id> <item-id>");
        return ExitCode::from(2);
    };
    let Ok(id) = id.parse::<u64>() else {
        return ExitCode::from(2);
    };
    let store = match open_store(db, None).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("race-host: open: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (conn, agent) = match fixture_write_agent(url, &store, id, true).await {
        Ok(x) => x,
        Err(e) => {
            eprintln!("race-host: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("owner {}", store.owner());
    let outcome = agent.resume(RunId::new(run.as_str()), Lease::unbounded()).await;
    conn.close().await;
    match outcome {
        // Both hosts complete the run; the loser's model was told the approval was claimed.
        RunOutcome::Completed { .. } | RunOutcome::Failed { .. } => {
            println!("outcome {outcome:?}");
            ExitCode::SUCCESS
        }
        other => {
            eprintln!("race-host: unexpected {other:?}");
            ExitCode::FAILURE
        }
    }
}
