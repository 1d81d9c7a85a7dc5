//! `purra runs list | show ID`: the runs a store knows of.

use purra_core::{ApprovalQuery, RunId};
use serde_json::{json, Value};

use crate::cli::RunsCommand;
use crate::cmd::approvals::text;
use crate::cmd::print_json;
use crate::cmd::store::{self, Store};
use crate::exit::Failure;

/// Runs one `purra runs` subcommand.
pub async fn run(command: RunsCommand) -> Result<(), Failure> {
    let args = command.store_args();
    let json_out = args.json;
    let (location, db) = store::open_located(args).await?;
    let known = db
        .ops()
        .run_ids()
        .await
        .map_err(|e| store::failure("listing runs", e))?;
    match &command {
        RunsCommand::List { .. } => {
            let mut all = Vec::new();
            for id in &known {
                all.push(run_json(&db, id).await?);
            }
            if json_out {
                print_json(&json!({ "runs": all }));
            } else if all.is_empty() {
                println!("no runs in {}", location.shown());
            } else {
                let rows: Vec<Vec<String>> = all
                    .iter()
                    .map(|r| {
                        let ids: Vec<String> = r["approvals"]
                            .as_array()
                            .map(|a| a.iter().map(|x| text(&x["id"])).collect())
                            .unwrap_or_default();
                        vec![text(&r["id"]), text(&r["state"]), ids.join(", ")]
                    })
                    .collect();
                print!(
                    "{}",
                    crate::render::table(&["ID", "STATE", "APPROVALS"], &rows)
                );
            }
        }
        RunsCommand::Show { id, .. } => {
            let run_id = RunId::new(id.clone());
            if !known.contains(&run_id) {
                return Err(Failure::store("not_found", format!("unknown run id: {id}")));
            }
            let view = run_json(&db, &run_id).await?;
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
pub async fn run_json(db: &Store, id: &RunId) -> Result<Value, Failure> {
    let suspended = db
        .runs()
        .load_suspended(id.clone())
        .await
        .map_err(|e| store::failure(&format!("run {id}"), e))?;
    let mut approvals = Vec::new();
    for v in store::approvals(db, ApprovalQuery::all().run(id.clone())).await? {
        approvals.push(store::approval_json(db, &v).await?);
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
