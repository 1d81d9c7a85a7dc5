//! The demo server `purra demo` runs: one note kept in the server's memory, a read tool
//! (`get_note`), a write tool with a side effect (`set_note`), and a second write
//! (`clear_note`) that the demo's gateway does not bind, so clients never see it. Not part of
//! the fixture contract of `peers/FIXTURES.md`.
//!
//! `set_note` is idempotent by key (purra's server honours `io.purra/idempotency-key`): a write
//! sent again under the same key is answered with the stored result. With a state directory
//! (`purra serve-demo --state DIR`) the results are kept in `DIR/results.db` (SQLite) and every
//! executed `set_note` is appended to `DIR/writes.log` (fsynced), so a fresh process answers a key
//! an earlier one executed and a test counts the executions of every process.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use purra_protocol::idempotency::IdempotentLimits;
use purra_protocol::{HandlerResult, Json, RequestCtx, Server, ToolDef};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, JsonSchema)]
struct SetArgs {
    /// The new note.
    text: String,
}

#[derive(Serialize, JsonSchema)]
struct Note {
    /// The current note (empty before the first write).
    note: String,
    /// How many `set_note` calls this server process has received.
    writes: u64,
}

#[derive(Serialize, JsonSchema)]
struct Stored {
    /// The note as stored.
    stored: String,
    /// How many `set_note` calls this server process has received, this one included.
    writes: u64,
}

#[derive(Default)]
struct State {
    note: String,
    writes: u64,
    /// `DIR/writes.log`, when the server keeps its state in a directory.
    log: Option<PathBuf>,
}

/// Appends `text` to `log` and syncs it: the execution is on disk before it is answered.
fn log_write(log: &Path, text: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    writeln!(f, "set_note {text}")?;
    f.sync_all()
}

/// Builds the demo server: `get_note` reads the note and the write count, `set_note {text}`
/// replaces the note (idempotent by key), `clear_note` clears it (the note lives in this process
/// only). All are typed tools: their schemas come from the types above and pass the strict
/// profile hosts use. With `state`, `set_note`'s results are kept in `state/results.db` and its
/// executions logged in `state/writes.log` (see the module documentation).
pub fn build(state_dir: Option<&Path>) -> Result<Server, String> {
    let mut builder = Server::builder("purra-demo", "1.0.0");
    let mut log = None;
    if let Some(dir) = state_dir {
        let db = dir.join("results.db");
        let store = purra_sqlite::SqliteStore::open(&db)
            .map_err(|e| format!("cannot open {}: {e}", db.display()))?;
        builder = builder.idempotent_results(Arc::new(purra_mcp::DurableIdempotentResults::new(
            Arc::new(store),
            IdempotentLimits::default(),
        )));
        log = Some(dir.join("writes.log"));
    }
    let server = builder.instructions("keeps one note in memory").build();
    let state = Arc::new(Mutex::new(State {
        log,
        ..State::default()
    }));
    let s = state.clone();
    let read = move |(), _ctx: RequestCtx| {
        let st = s.lock().unwrap_or_else(|p| p.into_inner());
        let out = Note {
            note: st.note.clone(),
            writes: st.writes,
        };
        async move { HandlerResult::Ok(Json(out)) }
    };
    let s = state.clone();
    let clear = move |(), _ctx: RequestCtx| {
        let mut st = s.lock().unwrap_or_else(|p| p.into_inner());
        st.writes += 1;
        st.note.clear();
        async move { HandlerResult::Ok("cleared") }
    };
    let write = move |a: SetArgs, _ctx: RequestCtx| {
        let mut st = state.lock().unwrap_or_else(|p| p.into_inner());
        let logged = match &st.log {
            Some(log) => {
                log_write(log, &a.text).map_err(|e| format!("the write could not be logged: {e}"))
            }
            None => Ok(()),
        };
        let result = logged.map(|()| {
            st.writes += 1;
            st.note = a.text;
            Json(Stored {
                stored: st.note.clone(),
                writes: st.writes,
            })
        });
        async move { HandlerResult::Ok(result?) }
    };
    server
        .tool(
            "get_note",
            "Reads the note and how many writes the server received",
            read,
        )
        .and_then(|s| s.tool("clear_note", "Clears the note", clear))
        .and_then(|s| {
            s.add_tool(
                ToolDef::new("set_note")
                    .description("Replaces the note")
                    .idempotent(),
                write,
            )
        })
        .expect("the demo's tools are valid");
    Ok(server)
}
