//! `purra runs list | show ID`: the runs a store knows of.

use purra_core::{RunId, RunStore};
use serde_json::{json, Value};

use crate::cli::RunsCommand;
use crate::cmd::approvals::text;
use crate::cmd::{print_json, store};
use crate::exit::Failure;

/// Runs one `purra runs` subcommand.
pub async fn run(command: RunsCommand) -> Result<(), Failure> {
    let args = command.store_args();
    let json_out = args.json;
    let db = store::open(&args.db, false)?;
    let log = store::audit(&db).await?;
    match &command {
        RunsCommand::List { .. } => {
            let mut all = Vec::new();
            for id in store::run_ids(&log) {
                all.push(run_json(&db, &log, &id).await?);
            }
            if json_out {
                print_json(&json!({ "runs": all }));
            } else if all.is_empty() {
                println!("no runs in {}", args.db.display());
            } else {
                println!("{:<14} {:<10} APPROVALS", "ID", "STATE");
                for r in &all {
                    let ids: Vec<String> = r["approvals"]
                        .as_array()
                        .map(|a| a.iter().map(|x| text(&x["id"])).collect())
                        .unwrap_or_default();
                    println!(
                        "{:<14} {:<10} {}",
                        text(&r["id"]),
                        text(&r["state"]),
                        ids.join(", ")
                    );
                }
            }
        }
        RunsCommand::Show { id, .. } => {
            let run_id = RunId::new(id.clone());
            if !store::run_ids(&log).contains(&run_id) {
                return Err(Failure::store("not_found", format!("unknown run id: {id}")));
            }
            let view = run_json(&db, &log, &run_id).await?;
            if json_out {
                print_json(&view);
            } else {
                print_run(&view);
            }
        }
    }
    Ok(())
}

/// The JSON form of one run: `suspended` (waiting at a checkpoint) or `finished`.
pub async fn run_json(
    db: &purra_sqlite::SqliteStore,
    log: &[purra_sqlite::AuditEntry],
    id: &RunId,
) -> Result<Value, Failure> {
    let suspended = db
        .load_suspended(id.clone())
        .await
        .map_err(|e| store::failure(&format!("run {id}"), e))?;
    let mut approvals = Vec::new();
    for a in store::run_approvals(log, id) {
        let rec = store::record(db, &a.0).await?;
        approvals.push(store::approval_json(db, log, &a.0, &rec).await?);
    }
    let pending = suspended.as_ref().map(|s| {
        json!({
            "tool": s.pending_call.name,
            "arguments": s.pending_call.arguments,
            "approvalId": s.approval_id.0,
        })
    });
    Ok(json!({
        "id": id.as_str(),
        "state": if suspended.is_some() { "suspended" } else { "finished" },
        "agent": suspended.as_ref().map(|s| s.agent.clone()),
        "turnsUsed": suspended.as_ref().map(|s| s.turns_used),
        "pendingCall": pending,
        "approvals": approvals,
    }))
}

fn print_run(r: &Value) {
    println!("run: {}", text(&r["id"]));
    println!("state: {}", text(&r["state"]));
    if let Value::Object(p) = &r["pendingCall"] {
        println!("agent: {}", text(&r["agent"]));
        println!(
            "waiting for: {} to call {} {}",
            p.get("approvalId").map(text).unwrap_or_default(),
            p.get("tool").map(text).unwrap_or_default(),
            p.get("arguments").cloned().unwrap_or_default()
        );
    }
    for a in r["approvals"].as_array().into_iter().flatten() {
        println!(
            "approval {}: {} {}, effect {}, dispatches {}",
            text(&a["id"]),
            text(&a["state"]),
            text(&a["tool"]),
            a["effect"].as_str().unwrap_or("none"),
            a["dispatches"]
        );
        if !a["receipt"].is_null() {
            println!("  receipt: {}", a["receipt"]);
        }
    }
}
