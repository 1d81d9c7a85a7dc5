//! `purra catalog changes | diff [ID] | approve ID | deny ID`: the catalog changes a gateway
//! holds in its store (bound tools an upstream lists differently from their pinned definition,
//! or no longer lists), their differences, and an operator's decision on each.

use std::time::SystemTime;

use purra_core::pins::{definition_diff, definition_diff_text};
use purra_core::{CatalogChange, CatalogDecision};
use serde_json::{json, Value};

use crate::cli::CatalogCommand;
use crate::cmd::print_json;
use crate::cmd::store;
use crate::exit::Failure;

/// A change as `--json` shows it: its fields, both definitions and the diff.
fn change_json(c: &CatalogChange) -> Value {
    let diff: Vec<Value> = definition_diff(&c.old_definition, c.new_definition.as_ref())
        .into_iter()
        .map(|f| {
            json!({
                "field": f.field,
                "lines": f.lines.iter().map(|l| format!("{}{}", l.sign, l.text)).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "id": c.id,
        "upstream": c.upstream,
        "tool": c.tool,
        "kind": c.kind.as_str(),
        "state": c.state.as_str(),
        "pinnedDigest": c.old_digest,
        "newDigest": c.new_digest,
        "pinned": c.old_definition,
        "listed": c.new_definition,
        "seenBy": c.seen_by,
        "seenAt": purra_core::webhook::rfc3339(c.seen_at),
        "decidedBy": c.decided_by,
        "decidedAt": c.decided_at.map(purra_core::webhook::rfc3339),
        "note": c.note,
        "diff": diff,
    })
}

/// The readable header and diff of one change.
fn print_change(c: &CatalogChange) {
    let visible =
        |s: &str| purra_core::visible::one_line(s, purra_core::visible::WHO_MAX_CHARS).to_string();
    println!(
        "catalog change {}: upstream {:?} {} tool {:?} ({})",
        c.id, c.upstream, c.kind, c.tool, c.state
    );
    println!(
        "seen by {} at {}",
        visible(&c.seen_by),
        purra_core::webhook::rfc3339(c.seen_at)
    );
    if let (Some(by), Some(at)) = (&c.decided_by, c.decided_at) {
        let note = c
            .note
            .as_deref()
            .map(|n| format!(": {}", visible(n)))
            .unwrap_or_default();
        println!(
            "{} by {} at {}{note}",
            c.state,
            visible(by),
            purra_core::webhook::rfc3339(at)
        );
    }
    // Upstream text: on a terminal, control characters are shown as escapes.
    let text = definition_diff_text(&c.old_definition, c.new_definition.as_ref());
    for line in text.lines() {
        println!("{}", crate::term::for_stdout(line));
    }
}

/// Runs one `purra catalog` subcommand.
pub async fn run(command: CatalogCommand) -> Result<(), Failure> {
    let args = command.store_args();
    let json_out = args.json;
    let (location, db) = store::open_located(args).await?;
    let pins = db.pins();
    match &command {
        CatalogCommand::Changes { all, .. } => {
            let changes = pins
                .catalog_changes(!*all)
                .await
                .map_err(|e| store::failure("listing catalog changes", e))?;
            if json_out {
                let all: Vec<Value> = changes.iter().map(change_json).collect();
                print_json(&json!({ "changes": all }));
            } else if changes.is_empty() {
                println!("no pending catalog changes in {}", location.shown());
            } else {
                let rows: Vec<Vec<String>> = changes
                    .iter()
                    .map(|c| {
                        vec![
                            c.id.to_string(),
                            c.state.to_string(),
                            c.kind.to_string(),
                            c.upstream.clone(),
                            c.tool.clone(),
                            purra_core::webhook::rfc3339(c.seen_at),
                        ]
                    })
                    .collect();
                print!(
                    "{}",
                    crate::render::table(
                        &["ID", "STATE", "KIND", "UPSTREAM", "TOOL", "SEEN"],
                        &rows
                    )
                );
                println!("see one with `purra catalog diff ID`");
            }
        }
        CatalogCommand::Diff { id, .. } => {
            let changes = match id {
                Some(id) => vec![pins
                    .catalog_change(*id)
                    .await
                    .map_err(|e| store::failure("reading the catalog change", e))?
                    .ok_or_else(|| {
                        Failure::store("not_found", format!("no catalog change {id}"))
                    })?],
                None => pins
                    .catalog_changes(true)
                    .await
                    .map_err(|e| store::failure("listing catalog changes", e))?,
            };
            if json_out {
                match (id, changes.first()) {
                    (Some(_), Some(c)) => print_json(&change_json(c)),
                    _ => print_json(&json!({
                        "changes": changes.iter().map(change_json).collect::<Vec<_>>()
                    })),
                }
            } else if changes.is_empty() {
                println!("no pending catalog changes in {}", location.shown());
            } else {
                for (i, c) in changes.iter().enumerate() {
                    if i > 0 {
                        println!();
                    }
                    print_change(c);
                }
            }
        }
        CatalogCommand::Approve { id, by, note, .. }
        | CatalogCommand::Deny { id, by, note, .. } => {
            let approve = matches!(command, CatalogCommand::Approve { .. });
            let decision = CatalogDecision {
                approve,
                by: by.clone(),
                note: note.clone(),
                at: SystemTime::now(),
            };
            let c = pins
                .decide_catalog_change(*id, decision)
                .await
                .map_err(|e| store::failure(&format!("deciding catalog change {id}"), e))?;
            if json_out {
                print_json(&change_json(&c));
            } else if approve && c.new_definition.is_some() {
                println!(
                    "catalog change {id} approved: upstream {:?} tool {:?} is re-pinned to what the \
                     upstream lists; every gateway on the store serves it within a few seconds",
                    c.upstream, c.tool
                );
            } else if approve {
                println!(
                    "catalog change {id} approved: the removal of upstream {:?} tool {:?} is \
                     acknowledged; it stays withheld while a binding names it (remove the binding \
                     from the configuration)",
                    c.upstream, c.tool
                );
            } else {
                println!(
                    "catalog change {id} denied: upstream {:?} tool {:?} keeps its pin and stays \
                     withheld while the upstream lists the difference",
                    c.upstream, c.tool
                );
            }
        }
    }
    Ok(())
}
