//! `purra demo`: a durable, approval-gated write from start to receipt.
//!
//! Starts the demo server (`purra serve-demo`) as a child process over stdio, discovers its
//! `get_note` as a read tool and `set_note` as an approval-gated write through host bindings
//! (with scope checks), and runs a scripted agent that reads the note and then asks to set it.
//! The run suspends with a durable pending approval in the store; the demo shows it, approves
//! it (or leaves it, or waits for a decision made elsewhere), resumes the run, which claims the
//! approval and dispatches the write once, and prints the receipt. Run again on the same store,
//! it finds the completed claim and sends nothing.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use purra_core::{
    Agent, ApprovalQuery, ApprovalState, ApprovalStatus, ApprovalView, Catalog, ClaimState,
    Concurrency, Decision, IdempotencyKey, Lease, Risk, RunId, RunOutcome, RunRequest, ScopeCheck,
    ScopeDecision, ScriptedModel, Verdict,
};
use purra_mcp::{
    discover_read_tools, discover_write_tools, CatalogMonitor, Limits, ReadBinding, WriteBinding,
    WriteEffect,
};
use purra_protocol::{Client, ClientOptions, Connection, StderrMode, StdioCommand};
use serde_json::{json, Value};

use crate::cli::DemoArgs;
use crate::cmd::store::{self, Store};
use crate::exit::Failure;

/// The demo's run id.
pub const RUN_ID: &str = "demo";
/// The demo agent's name (the scope checks allow only it).
const AGENT: &str = "demo_writer";
/// The note the agent asks to write.
pub const NOTE: &str = "hello from purra";

/// Runs `purra demo`.
pub async fn run(args: DemoArgs) -> Result<(), Failure> {
    let location = store::location(&args.db)?;
    let db_text = location.shown();
    let db = store::open(&location, true).await?;
    println!(
        "store: {db_text} ({}: approvals, claims and receipts survive restarts)",
        location.kind()
    );
    // A host reconciles on startup: claims left without outcome by a process that is gone
    // become `unknown` (never sent again).
    let reconciled = db
        .ops()
        .reconcile_interrupted_claims(SystemTime::now())
        .await
        .map_err(|e| store::failure("reconciling interrupted claims", e))?;
    for key in &reconciled.interrupted {
        println!(
            "interrupted: a claim left by a process that stopped is now unknown ({})",
            key.0
        );
    }
    let run_id = RunId::new(RUN_ID);
    let suspended = db
        .runs()
        .load_suspended(run_id.clone())
        .await
        .map_err(|e| store::failure("loading the demo run", e))?;
    let earlier = store::approvals(&db, ApprovalQuery::all().run(run_id.clone())).await?;

    if suspended.is_none() {
        if let Some(view) = earlier.last() {
            return finished_before(&db, view).await;
        }
    }

    let conn = start_server().await?;
    let result = drive(&args, &db, &db_text, &conn, suspended.is_some()).await;
    // End of input, then SIGTERM, then SIGKILL: the server child does not outlive the demo.
    conn.close().await;
    result
}

/// The demo run is over: say what became of its write and send nothing.
async fn finished_before(db: &Store, view: &ApprovalView) -> Result<(), Failure> {
    let id = &view.id;
    let tool = &view.request.intent.tool;
    let effect = effect(db, view.intent_digest.as_str()).await?;
    let n = store::dispatches(db, id).await?;
    match &effect {
        Some(state) => {
            let times = if n == 1 {
                "once".to_owned()
            } else {
                format!("{n} times")
            };
            println!(
                "already done: run {RUN_ID} finished; its {tool} call ({}) was claimed and sent {times} (effect {}).",
                id.0,
                state.effect_word()
            );
            if let Some(r) = state.receipt() {
                println!("receipt: {}", shown_receipt(r));
            }
        }
        None => println!(
            "already done: run {RUN_ID} finished without dispatching {tool} ({} is {}).",
            id.0,
            view.status()
        ),
    }
    println!("not sending it again: this run sent 0 write requests.");
    println!("(to start over, use a new --db)");
    Ok(())
}

/// Starts `purra serve-demo` as a child process and connects over stdio.
async fn start_server() -> Result<Arc<Connection>, Failure> {
    let exe = std::env::current_exe().map_err(|e| {
        Failure::protocol(
            "finding the purra binary",
            purra_protocol::Error::Transport(e.to_string()),
        )
    })?;
    let cmd = StdioCommand::new(exe)
        .args(["serve-demo"])
        .stderr(StderrMode::Null);
    let conn = Client::connect_stdio(cmd, ClientOptions::default())
        .await
        .map_err(|e| Failure::protocol("starting the demo server", e))?;
    println!("server: started `purra serve-demo` as a child process (MCP over stdio)");
    Ok(Arc::new(conn))
}

/// Builds the demo agent over the discovered tools; `script` is what the model answers.
async fn agent(
    conn: &Arc<Connection>,
    db: &Store,
    script: Vec<purra_core::ModelResponse>,
) -> Result<Agent, Failure> {
    let monitor = CatalogMonitor::attach(conn);
    let reads = BTreeMap::from([(
        "get_note".to_owned(),
        ReadBinding {
            local_name: "get_note".into(),
            title: "Read the note".into(),
            // Only the demo agent may read.
            scope: ScopeCheck::check(|_, run| {
                if run.agent == AGENT {
                    ScopeDecision::Allow
                } else {
                    ScopeDecision::Deny
                }
            }),
            concurrency: Concurrency::Safe,
        },
    )]);
    let writes = BTreeMap::from([(
        "set_note".to_owned(),
        WriteBinding {
            local_name: "set_note".into(),
            title: "Replace the note".into(),
            risk: Risk::Write,
            effect: WriteEffect::Write,
            // Only the demo agent, only a short note.
            scope: ScopeCheck::check(|args, run| {
                let short = args["text"]
                    .as_str()
                    .is_some_and(|t| t.chars().count() <= 200);
                if run.agent == AGENT && short {
                    ScopeDecision::Allow
                } else {
                    ScopeDecision::Deny
                }
            }),
            binding_id: "demo-notes".into(),
            binding_revision: "demo-1".into(),
            scope_id: "demo-notes".into(),
            scope_revision: "demo-1".into(),
        },
    )]);
    let read = discover_read_tools(conn, "demo", &reads, &monitor, Limits::default())
        .await
        .map_err(|e| adapter("discovering read tools", &e))?;
    let write = discover_write_tools(conn, "demo", &writes, &monitor, Limits::default())
        .await
        .map_err(|e| adapter("discovering write tools", &e))?;
    let mut registrations = read.registrations;
    registrations.extend(write.registrations);
    let catalog = Arc::new(
        Catalog::new(registrations)
            .map_err(|e| Failure::store("store", format!("building the catalog: {e}")))?,
    );
    let model = Arc::new(ScriptedModel::new("scripted", script));
    Agent::builder(AGENT, model, catalog)
        .instructions("read the note, then set it")
        .approval(db.gateway())
        .run_store(db.runs())
        .tool_checkpoint_names(["set_note"])
        .build()
        .map_err(|e| Failure::store("store", format!("building the agent: {e}")))
}

fn adapter(context: &str, e: &impl std::fmt::Display) -> Failure {
    Failure::protocol(context, purra_protocol::Error::Protocol(e.to_string()))
}

async fn drive(
    args: &DemoArgs,
    db: &Store,
    db_text: &str,
    conn: &Arc<Connection>,
    resuming: bool,
) -> Result<(), Failure> {
    let run_id = RunId::new(RUN_ID);
    let (approval_id, digest) = if resuming {
        let s = db
            .runs()
            .load_suspended(run_id.clone())
            .await
            .map_err(|e| store::failure("loading the demo run", e))?
            .ok_or_else(|| Failure::store("store", "the demo run is no longer suspended"))?;
        println!(
            "resuming run {RUN_ID}: it stopped earlier at {}",
            s.approval_id.0
        );
        (s.approval_id, s.intent_digest)
    } else {
        let agent = agent(
            conn,
            db,
            vec![
                ScriptedModel::calls(&[("r1", "get_note", json!({}))]),
                ScriptedModel::calls(&[("w1", "set_note", json!({ "text": NOTE }))]),
                ScriptedModel::text("the note is set"),
            ],
        )
        .await?;
        println!("discovered: get_note (read), set_note (write: needs an approval)");
        println!("agent: reads the note with get_note, then asks to call set_note");
        let outcome = agent
            .run(RunRequest {
                run_id: run_id.clone(),
                root_run_id: None,
                input: "set the note".into(),
                lease: Lease::unbounded(),
            })
            .await;
        match outcome {
            RunOutcome::Suspended {
                approval_id,
                intent_digest,
            } => {
                println!("run {RUN_ID}: suspended, nothing written yet");
                (approval_id, intent_digest)
            }
            other => {
                return Err(Failure::store(
                    "store",
                    format!("the demo run did not stop for approval: {other:?}"),
                ))
            }
        }
    };
    let view = store::view(db, &approval_id.0).await?;
    if view.state == ApprovalState::Prepared {
        println!("pending approval: {}", approval_id.0);
    } else {
        println!("approval: {}", approval_id.0);
    }
    println!("  tool: {}", view.request.intent.tool);
    println!("  arguments: {}", view.request.arguments);
    println!("  intent digest: {}", digest.as_str());
    println!("  state: {}", view.status());

    if view.state == ApprovalState::Prepared {
        if args.no_approve {
            let purra = self_command();
            println!("left pending. Decide it with:");
            println!(
                "  {purra} approvals approve {} --db {db_text}",
                approval_id.0
            );
            println!("then run `{purra} demo --db {db_text}` to dispatch it.");
            return Ok(());
        }
        if args.interactive {
            println!(
                "waiting: approve it from another terminal with `{} approvals approve {} --db {db_text}` (or deny it)",
                self_command(),
                approval_id.0
            );
            // Woken by the store's events (PostgreSQL: LISTEN/NOTIFY; SQLite: this process's
            // commits at once, others' within the store's poll interval); no polling here.
            db.gateway()
                .wait_for_decision(approval_id.clone())
                .await
                .map_err(|e| store::failure(&format!("waiting for {}", approval_id.0), e))?;
        } else {
            db.gateway()
                .decide(
                    approval_id.clone(),
                    Decision {
                        verdict: Verdict::Approve,
                        approver: "purra demo".into(),
                        decided_at: SystemTime::now(),
                        expires_at: Some(SystemTime::now() + Duration::from_secs(600)),
                        note: None,
                    },
                )
                .await
                .map_err(|e| store::failure(&format!("approving {}", approval_id.0), e))?;
        }
    }
    let view = store::view(db, &approval_id.0).await?;
    println!("decision: {} ({})", view.status(), approver(&view.state));

    // A resumed agent's model continues the stored transcript: only its last turn is left.
    let agent = agent(conn, db, vec![ScriptedModel::text("the note is set")]).await?;
    let claimed_before = effect(db, digest.as_str()).await?;
    let outcome = agent.resume(run_id, Lease::unbounded()).await;
    let effect = effect(db, digest.as_str()).await?;
    let sent = match (&outcome, &effect) {
        (RunOutcome::Completed { .. }, Some(state)) if claimed_before.is_some() => {
            println!(
                "not sent again: {} was claimed by an earlier process (effect {})",
                approval_id.0,
                state.effect_word()
            );
            false
        }
        (RunOutcome::Completed { .. }, Some(state)) => {
            println!("dispatched: set_note, once (the claim was recorded before sending)");
            if let Some(r) = state.receipt() {
                println!("receipt: {}", shown_receipt(r));
            }
            println!("effect: {}", state.effect_word());
            true
        }
        (RunOutcome::Completed { .. }, None) => {
            let view = store::view(db, &approval_id.0).await?;
            let status: ApprovalStatus = view.status();
            println!(
                "not dispatched: {} was {status}; nothing was sent",
                approval_id.0
            );
            false
        }
        (other, _) => {
            return Err(Failure::store(
                "store",
                format!("the resumed run ended with {other:?}"),
            ))
        }
    };
    let seen = server_note(conn).await?;
    println!(
        "server: note = {}, write requests received = {}",
        seen["note"], seen["writes"]
    );
    if sent {
        println!(
            "run {RUN_ID}: completed. Run `{} demo --db {db_text}` again: the write is not sent twice.",
            self_command()
        );
    } else {
        println!("run {RUN_ID}: completed without the write.");
    }
    Ok(())
}

fn approver(state: &ApprovalState) -> String {
    match store::decision(state) {
        None => "undecided".into(),
        Some(Decision {
            approver,
            note: Some(note),
            ..
        }) => format!("by {approver}; note: {note}"),
        Some(d) => format!("by {}", d.approver),
    }
}

/// The claim of `digest` (the intent's idempotency key), if it was ever claimed.
async fn effect(db: &Store, digest: &str) -> Result<Option<ClaimState>, Failure> {
    db.gateway()
        .receipts()
        .state(IdempotencyKey(digest.to_owned()))
        .await
        .map_err(|e| store::failure("reading the claim", e))
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

/// The structured part of a receipt when it has one.
fn shown_receipt(r: &Value) -> &Value {
    r.get("structured").filter(|v| !v.is_null()).unwrap_or(r)
}

/// What the server itself reports (a direct read, outside the agent).
async fn server_note(conn: &Connection) -> Result<Value, Failure> {
    let result = conn
        .call_tool("get_note", json!({}))
        .await
        .map_err(|e| Failure::protocol("reading the note", e))?;
    Ok(result.structured_content.unwrap_or(Value::Null))
}
