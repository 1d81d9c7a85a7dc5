//! The demo server `purra demo` runs: one note kept in the server's memory, a read tool
//! (`get_note`), a write tool with a side effect (`set_note`), and a second write
//! (`clear_note`) that the demo's gateway does not bind, so clients never see it. Not part of
//! the fixture contract of `peers/FIXTURES.md`.

use std::sync::{Arc, Mutex};

use purra_protocol::{HandlerResult, Json, RequestCtx, Server};
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
}

/// Builds the demo server: `get_note` reads the note and the write count, `set_note {text}`
/// replaces the note, `clear_note` clears it (state lives in this process only). All are typed
/// tools: their schemas come from the types above and pass the strict profile hosts use.
pub fn build() -> Server {
    let server = Server::builder("purra-demo", "1.0.0")
        .instructions("keeps one note in memory")
        .build();
    let state = Arc::new(Mutex::new(State::default()));
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
        st.writes += 1;
        st.note = a.text;
        let out = Stored {
            stored: st.note.clone(),
            writes: st.writes,
        };
        async move { HandlerResult::Ok(Json(out)) }
    };
    server
        .tool(
            "get_note",
            "Reads the note and how many writes the server received",
            read,
        )
        .and_then(|s| s.tool("clear_note", "Clears the note", clear))
        .and_then(|s| s.tool("set_note", "Replaces the note", write))
        .expect("the demo's tools are valid");
    server
}
