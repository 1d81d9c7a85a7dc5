//! `purra approvals list | show ID | approve ID | deny ID`: the approvals in a store.

use std::time::{Duration, SystemTime};

use purra_core::{ApprovalGateway, ApprovalId, Decision, Verdict};
use serde_json::{json, Value};

use crate::cli::ApprovalsCommand;
use crate::cmd::{print_json, store};
use crate::exit::Failure;

/// Runs one `purra approvals` subcommand.
pub async fn run(command: ApprovalsCommand) -> Result<(), Failure> {
    let args = command.store_args();
    let json_out = args.json;
    let db = store::open(&args.db, false)?;
    match &command {
        ApprovalsCommand::List { .. } => {
            let log = store::audit(&db).await?;
            let mut all = Vec::new();
            for id in store::approval_ids(&log) {
                let rec = store::record(&db, &id.0).await?;
                all.push(store::approval_json(&db, &log, &id.0, &rec).await?);
            }
            if json_out {
                print_json(&json!({ "approvals": all }));
            } else if all.is_empty() {
                println!("no approvals in {}", args.db.display());
            } else {
                println!(
                    "{:<14} {:<9} {:<12} {:<12} EFFECT",
                    "ID", "STATE", "TOOL", "RUN"
                );
                for a in &all {
                    println!(
                        "{:<14} {:<9} {:<12} {:<12} {}",
                        text(&a["id"]),
                        text(&a["state"]),
                        text(&a["tool"]),
                        text(&a["runId"]),
                        a["effect"].as_str().unwrap_or("-"),
                    );
                }
            }
        }
        ApprovalsCommand::Show { id, .. } => {
            let log = store::audit(&db).await?;
            let rec = store::record(&db, id).await?;
            let view = store::approval_json(&db, &log, id, &rec).await?;
            if json_out {
                print_json(&view);
            } else {
                print_approval(&view);
            }
        }
        ApprovalsCommand::Approve {
            id,
            approver,
            note,
            ttl,
            ..
        } => {
            let now = SystemTime::now();
            let expires = now + Duration::from_secs(*ttl);
            decide(
                &db,
                id,
                Verdict::Approve,
                approver,
                note.as_deref(),
                Some(expires),
            )
            .await?;
            report(&db, id, json_out, "approved").await?;
            if !json_out {
                println!("a gateway call waiting on it sends the write once; otherwise the same call made again does (for the demo: `purra demo` on the same --db)");
            }
        }
        ApprovalsCommand::Deny {
            id, approver, note, ..
        } => {
            decide(&db, id, Verdict::Deny, approver, note.as_deref(), None).await?;
            report(&db, id, json_out, "denied").await?;
            if !json_out {
                println!("the call is never sent");
            }
        }
    }
    Ok(())
}

async fn decide(
    db: &purra_sqlite::SqliteStore,
    id: &str,
    verdict: Verdict,
    approver: &str,
    note: Option<&str>,
    expires_at: Option<SystemTime>,
) -> Result<(), Failure> {
    // An unknown id is reported as such before deciding.
    let rec = store::record(db, id).await?;
    if rec.state != purra_core::ApprovalState::Prepared {
        return Err(Failure::store(
            "conflict",
            format!(
                "approval {id} is already decided ({}); a decision is final",
                store::state_word(&rec.state)
            ),
        ));
    }
    let approver = match note {
        Some(n) => format!("{approver} (note: {n})"),
        None => approver.to_owned(),
    };
    db.decide(
        ApprovalId(id.to_owned()),
        Decision {
            verdict,
            approver,
            decided_at: SystemTime::now(),
            expires_at,
        },
    )
    .await
    .map_err(|e| store::failure(&format!("approval {id}"), e))
}

async fn report(
    db: &purra_sqlite::SqliteStore,
    id: &str,
    json_out: bool,
    what: &str,
) -> Result<(), Failure> {
    let log = store::audit(db).await?;
    let rec = store::record(db, id).await?;
    let view = store::approval_json(db, &log, id, &rec).await?;
    if json_out {
        print_json(&view);
    } else {
        println!(
            "{what}: {id} ({} {})",
            text(&view["tool"]),
            text(&view["runId"])
        );
    }
    Ok(())
}

/// Prints one approval's readable form.
pub fn print_approval(a: &Value) {
    println!("approval: {}", text(&a["id"]));
    println!("state: {}", text(&a["state"]));
    println!("tool: {}", text(&a["tool"]));
    match &a["arguments"] {
        Value::Null => println!(
            "arguments: (not stored once the run stops waiting; digest {})",
            text(&a["argumentsDigest"])
        ),
        args => println!("arguments: {args}"),
    }
    println!("run: {}", text(&a["runId"]));
    println!("intent digest: {}", text(&a["intentDigest"]));
    if let Value::Object(d) = &a["decision"] {
        println!(
            "decision: {} by {}",
            d.get("verdict").map(text).unwrap_or_default(),
            d.get("approver").map(text).unwrap_or_default()
        );
    }
    if let Some(e) = a["effect"].as_str() {
        println!("effect: {e}");
    }
    if !a["receipt"].is_null() {
        println!("receipt: {}", a["receipt"]);
    }
    println!("dispatches: {}", a["dispatches"]);
}

/// A JSON string as text (other values as JSON).
pub fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
