//! `purra demo`: the gateway as people run it, with a scripted client in place of an assistant.
//!
//! Writes a gateway configuration binding the demo server's `get_note` as a read and `set_note`
//! as an approval-gated write (its `clear_note` is not bound), starts `purra gateway` on it as a
//! child process (which starts `purra serve-demo` as its upstream), and connects to the gateway
//! over stdio as a downstream MCP client: it lists the tools, reads the note, and asks to set it.
//! The gateway holds the write until its durable approval is decided: the demo approves it with
//! `purra approvals approve` in another process (or leaves it with `--no-approve`, or waits for a
//! decision made elsewhere with `--interactive`); the write is sent once and its receipt kept in
//! the store. The same call made again, in this run or a later one, is answered from the store
//! and sends nothing.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use purra_protocol::types::CallToolResult;
use purra_protocol::{Client, ClientOptions, Connection, RequestOptions, StderrMode, StdioCommand};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use purra_store::StoreLocation;

use crate::cli::DemoArgs;
use crate::exit::Failure;

/// The note the client asks to write.
pub const NOTE: &str = "hello from purra";

/// Runs `purra demo`.
pub async fn run(args: DemoArgs) -> Result<(), Failure> {
    let exe = std::env::current_exe().map_err(|e| io("finding the purra binary", &e))?;
    let location = StoreLocation::parse(&args.db)
        .map_err(|e| Failure::store("store", format!("--db {}: {e}", args.db)))?;
    // The gateway's `db`: a PostgreSQL URL as given, a file as an absolute path (the configuration
    // is written into a temporary directory, against which a relative path would be read).
    let db = match &location {
        StoreLocation::File(path) => absolute(path)?.display().to_string(),
        _ => args.db.clone(),
    };
    let db_text = location.shown();
    let dir = TempDir::new()?;
    let config = dir.0.join("gateway.toml");
    let wait = if args.interactive {
        "1h"
    } else if args.no_approve {
        "1s"
    } else {
        "2m"
    };
    std::fs::write(&config, gateway_config(&exe, &db, wait))
        .map_err(|e| io("writing the gateway configuration", &e))?;
    println!(
        "store: {db_text} ({}: approvals, claims and receipts survive restarts)",
        location.kind()
    );
    println!("gateway: `purra gateway` over the demo server `purra serve-demo` (get_note, set_note, clear_note),");
    println!("  binding get_note as a read and set_note as a write that needs an approval; clear_note is not bound");

    let command = StdioCommand::new(&exe)
        .args(["gateway", "--config"])
        .args([config.as_os_str()])
        .stderr(StderrMode::Null);
    let mut options = ClientOptions::default();
    options.client_info =
        purra_protocol::types::Implementation::new("purra-demo", env!("CARGO_PKG_VERSION"));
    let conn = Client::connect_stdio(command, options)
        .await
        .map_err(|e| Failure::protocol("starting the gateway", e))?;
    println!("client: connected to the gateway over stdio (MCP), as an assistant would");
    let result = script(&args, &exe, &db, &db_text, &conn).await;
    conn.close().await;
    result
}

async fn script(
    args: &DemoArgs,
    exe: &Path,
    db: &str,
    db_text: &str,
    conn: &Connection,
) -> Result<(), Failure> {
    let names: Vec<String> = conn.tools().iter().map(|t| t.name.clone()).collect();
    println!("client: tools/list -> {}", names.join(", "));
    let read = call(conn, "get_note", json!({}), RequestOptions::default()).await?;
    println!("client: get_note -> {}", shown(&read));
    let before = read.structured_content.clone().unwrap_or(Value::Null);

    println!(
        "client: set_note {{\"text\":\"{NOTE}\"}} (the gateway holds a write until it is approved)"
    );
    // The gateway's first progress notification names the approval it waits for.
    let (tx, mut approvals) = mpsc::unbounded_channel::<String>();
    let sent = Arc::new(Mutex::new(false));
    let progress = RequestOptions::default()
        .timeout(Duration::from_secs(3600))
        .on_progress(
            move |p| {
                let id = p
                    .message
                    .as_deref()
                    .and_then(|m| m.strip_prefix("waiting for approval "))
                    // `approval-N: 3 s of 60 s`
                    .map(|rest| rest.split(':').next().unwrap_or(rest));
                let mut once = sent.lock().unwrap_or_else(|e| e.into_inner());
                if let (Some(id), false) = (id, *once) {
                    *once = true;
                    let _ = tx.send(id.to_owned());
                }
            },
            None,
        );
    let write = call(conn, "set_note", json!({ "text": NOTE }), progress);
    tokio::pin!(write);
    let purra = self_command();
    let result = loop {
        tokio::select! {
            r = &mut write => break r?,
            Some(id) = approvals.recv() => {
                println!("pending approval: {id}");
                if args.interactive {
                    println!(
                        "waiting: approve it from another terminal with `{purra} approvals approve {id} --db {db_text}` (or deny it)"
                    );
                } else if !args.no_approve {
                    println!("approving: `{purra} approvals approve {id} --db {db_text}` (another process, as an operator would)");
                    approve(exe, &id, db).await?;
                }
            }
        }
    };
    let text = result.texts().next().unwrap_or("").to_owned();
    if result.is_error() {
        println!("client: set_note -> {text}");
        if text.contains("is pending") {
            println!("left pending. Decide it with `{purra} approvals approve ID --db {db_text}` (ID as above),");
            println!(
                "then run `{purra} demo --db {db_text}` again: the same call is then sent, once."
            );
        }
        let after = call(conn, "get_note", json!({}), RequestOptions::default()).await?;
        println!(
            "server: write requests this server process received = {}",
            after.structured_content.unwrap_or(Value::Null)["writes"]
        );
        return Ok(());
    }
    println!("client: set_note -> {}", shown(&result));
    let again = call(
        conn,
        "set_note",
        json!({ "text": NOTE }),
        RequestOptions::default(),
    )
    .await?;
    println!(
        "client: set_note again, same arguments -> {} (the stored receipt)",
        shown(&again)
    );
    let after = call(conn, "get_note", json!({}), RequestOptions::default()).await?;
    let writes = after.structured_content.unwrap_or(Value::Null)["writes"]
        .as_u64()
        .unwrap_or(0);
    let earlier = before["writes"].as_u64().unwrap_or(0);
    println!(
        "server: write requests this server process received = {}",
        writes - earlier.min(writes)
    );
    if writes == earlier {
        println!("already done: an earlier run sent this write; its receipt is in {db_text}, so nothing was sent now.");
    } else {
        println!(
            "sent once: the claim was recorded in {db_text} before the request left the gateway."
        );
        println!("Run `{purra} demo --db {db_text}` again: the same call is answered from the store and nothing is sent.");
    }
    Ok(())
}

/// One tool call; a protocol failure ends the demo.
async fn call(
    conn: &Connection,
    tool: &str,
    args: Value,
    options: RequestOptions,
) -> Result<CallToolResult, Failure> {
    conn.call_tool_with(tool, args, options)
        .await
        .map_err(|e| Failure::protocol(format!("calling {tool}"), e))
}

/// A successful result as one line: its structured content, else its text.
fn shown(r: &CallToolResult) -> String {
    match &r.structured_content {
        Some(v) => v.to_string(),
        None => r.texts().collect::<Vec<_>>().join(" "),
    }
}

/// `purra approvals approve ID --db DB --approver "purra demo"`, as a separate process.
async fn approve(exe: &Path, id: &str, db: &str) -> Result<(), Failure> {
    let out = tokio::process::Command::new(exe)
        .args([
            "approvals",
            "approve",
            id,
            "--db",
            db,
            "--approver",
            "purra demo",
        ])
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| io("running purra approvals approve", &e))?;
    if !out.status.success() {
        return Err(Failure::store(
            "store",
            format!(
                "purra approvals approve {id} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ));
    }
    Ok(())
}

/// The demo's gateway configuration.
fn gateway_config(exe: &Path, db: &str, wait: &str) -> String {
    format!(
        r#"[gateway]
name = "demo"
db = {db}
approval_wait = "{wait}"
progress_interval = "10s"

[upstreams.notes]
command = [{exe}, "serve-demo"]

[reads.get_note]
upstream = "notes"
title = "Read the note"
concurrency = "safe"
scope = "open"

[writes.set_note]
upstream = "notes"
title = "Replace the note"
effect = "write"
binding_id = "demo-notes"
binding_revision = "1"
scope_id = "demo-notes"
scope_revision = "1"

[writes.set_note.scope]
clients = ["purra-demo"]
arguments = ["len(text) <= 200"]
"#,
        db = toml_string(db),
        exe = toml_string(&exe.display().to_string()),
    )
}

/// A TOML basic string (a JSON string is one).
fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

fn absolute(p: &Path) -> Result<PathBuf, Failure> {
    if p.is_absolute() {
        return Ok(p.to_path_buf());
    }
    let cwd = std::env::current_dir().map_err(|e| io("finding the current directory", &e))?;
    Ok(cwd.join(p))
}

fn io(context: &str, e: &std::io::Error) -> Failure {
    Failure::protocol(context, purra_protocol::Error::Transport(e.to_string()))
}

/// A directory for the demo's gateway configuration, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<TempDir, Failure> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!("purra-demo-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| io("making a temporary directory", &e))?;
        Ok(TempDir(dir))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// How to run this binary from the current directory: `purra` when that is it on `PATH`,
/// else its path (relative to the current directory when below it).
fn self_command() -> String {
    let Ok(exe) = std::env::current_exe().and_then(|p| p.canonicalize()) else {
        return "purra".into();
    };
    let on_path = std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths)
            .any(|d| d.join("purra").canonicalize().is_ok_and(|p| p == exe))
    });
    if on_path {
        return "purra".into();
    }
    let cwd = std::env::current_dir().and_then(|d| d.canonicalize());
    match cwd.as_ref().ok().and_then(|d| exe.strip_prefix(d).ok()) {
        Some(rel) => format!("./{}", rel.display()),
        None => exe.display().to_string(),
    }
}
