//! `purra approvals list | show ID | approve ID | deny ID | serve`: the approvals in a store, and
//! the approver page over it.

use std::time::{Duration, SystemTime};

use purra_core::{ApprovalId, ApprovalQuery, ApprovalState, ApprovalStatus, Decision, Verdict};
use serde_json::{json, Value};

use crate::cli::ApprovalsCommand;
use crate::cmd::print_json;
use crate::cmd::store::{self, Store};
use crate::exit::Failure;

/// Runs one `purra approvals` subcommand.
pub async fn run(command: ApprovalsCommand) -> Result<(), Failure> {
    let args = command.store_args();
    let json_out = args.json;
    let (location, db) = store::open_located(args).await?;
    match &command {
        ApprovalsCommand::List { before, limit, .. } => {
            let mut query = ApprovalQuery::all().newest_first().limit(*limit);
            if let Some(id) = before {
                let id = ApprovalId(id.clone());
                if purra_core::stored::approval_seq(&id).is_none() {
                    return Err(Failure::usage(
                        "--before needs an approval id such as approval-12",
                    ));
                }
                query = query.before(id);
            }
            let ops = db.ops();
            let page = ops
                .approval_page(query.clone())
                .await
                .map_err(|e| store::failure("listing approvals", e))?;
            // How many are older than this page: counted (once, for this listing) up to one past
            // COUNTED_UP_TO, never every row of a large store.
            let more = match &page.next {
                Some(next) => ops
                    .count_approvals_up_to(
                        query.continued(next.clone()),
                        purra_core::COUNTED_UP_TO + 1,
                    )
                    .await
                    .map_err(|e| store::failure("counting approvals", e))?,
                None => 0,
            };
            let mut all = Vec::new();
            for v in &page.approvals {
                all.push(store::approval_json(&db, v).await?);
            }
            let next = page.next.as_ref().map(|id| id.0.clone());
            if json_out {
                // `more` stops at COUNTED_UP_TO; `moreAtLeast` says whether more follow still.
                print_json(&json!({
                    "approvals": all,
                    "next": next,
                    "more": more.min(purra_core::COUNTED_UP_TO),
                    "moreAtLeast": more > purra_core::COUNTED_UP_TO,
                }));
            } else if all.is_empty() {
                match before {
                    Some(id) => println!("no approval older than {id} in {}", location.shown()),
                    None => println!("no approvals in {}", location.shown()),
                }
            } else {
                let rows: Vec<Vec<String>> = all
                    .iter()
                    .map(|a| {
                        vec![
                            text(&a["id"]),
                            text(&a["state"]),
                            text(&a["tool"]),
                            text(&a["runId"]),
                            a["effect"].as_str().unwrap_or("-").to_owned(),
                        ]
                    })
                    .collect();
                print!(
                    "{}",
                    crate::render::table(&["ID", "STATE", "TOOL", "RUN", "EFFECT"], &rows)
                );
                if let Some(next) = next {
                    println!(
                        "{} more, older: see them with --before {next}",
                        purra_core::counted_text(more)
                    );
                }
            }
        }
        ApprovalsCommand::Show { id, .. } => {
            let v = store::view(&db, id).await?;
            let view = store::approval_json(&db, &v).await?;
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
            let groups = groups_of(args, approver)?;
            decide(
                &db,
                id,
                Verdict::Approve,
                approver,
                &groups,
                note.clone(),
                Some(expires),
            )
            .await?;
            let v = store::view(&db, id).await?;
            if v.state == ApprovalState::Prepared {
                // One vote of a quorum: the approval waits for more.
                report(&db, id, json_out, "voted").await?;
                if !json_out {
                    let view = store::approval_json(&db, &v).await?;
                    let votes = &view["votes"];
                    println!(
                        "{} of {} approving votes: the write is sent once the rest approve",
                        text(&votes["approving"]),
                        text(&votes["required"])
                    );
                }
            } else {
                report(&db, id, json_out, "approved").await?;
                if !json_out {
                    println!("a gateway call waiting on it sends the write once; otherwise the same call made again does");
                }
            }
        }
        ApprovalsCommand::Deny {
            id, approver, note, ..
        } => {
            let groups = groups_of(args, approver)?;
            decide(
                &db,
                id,
                Verdict::Deny,
                approver,
                &groups,
                note.clone(),
                None,
            )
            .await?;
            report(&db, id, json_out, "denied").await?;
            if !json_out {
                println!("this call is not sent; the same call made again asks for a new approval");
            }
        }
        ApprovalsCommand::Serve { listen, page, .. } => {
            // Found through a gateway file: the page is the one `purra gateway --page` serves
            // from it (its [page] table, and its [approvers.groups] for a workflow's `from`).
            let file = store::locate(args)?.gateway_file;
            let loaded = file
                .as_ref()
                .map(|f| purra_gateway::load(f).map_err(|e| Failure::Config(e.to_string())))
                .transpose()?;
            let bound = crate::cmd::page::bind(
                db.operator(),
                Some(db.pins()),
                None,
                *listen,
                page,
                loaded.as_ref().map(|l| crate::cmd::page::FilePage {
                    page: &l.config.page,
                    source: &l.source,
                    connections: None,
                    groups: l.config.approvers.groups.clone(),
                }),
                "purra approvals",
            )
            .await?;
            bound.set_grants(db.grants());
            // Found through a gateway file: the queue of unknown effects may resend through its
            // bindings; without one the page says why it cannot.
            if let Some(file) = file {
                bound.set_resend(crate::cmd::page::resend_through(file, db.operator()));
            }
            crate::telemetry::say("purra approvals", &format!("store {}", location.shown()));
            // Found through a gateway file with [webhooks]: this process delivers too (beside
            // the gateway, or while it is down).
            let stop = purra_protocol::CancellationToken::new();
            if let Some(loaded) = loaded {
                // The page serves whatever becomes of the webhooks: a secret this process
                // cannot read (it may be in the gateway's environment alone) is said, and this
                // process delivers nothing.
                let hooks = purra_gateway::Webhooks::read(&loaded.config, &loaded.source)
                    .map_err(|e| {
                        crate::telemetry::say(
                            "purra approvals",
                            &format!("not delivering webhooks (the gateway does): {e}"),
                        );
                    })
                    .ok()
                    .filter(|h| !h.is_empty());
                if let Some(hooks) = hooks {
                    hooks.default_page_url(bound.url());
                    let names: Vec<String> =
                        hooks.endpoints().into_iter().map(|e| e.name).collect();
                    crate::telemetry::say(
                        "purra approvals",
                        &format!("delivering webhooks: {}", names.join(", ")),
                    );
                    hooks.spawn(
                        db.outbox(),
                        Some(db.gateway()),
                        Some(std::sync::Arc::new(|m: &str| {
                            crate::telemetry::say("purra approvals", m)
                        })),
                        None,
                        stop.clone(),
                    );
                }
            }
            let served = bound.serve(crate::cmd::interrupted()).await;
            stop.cancel();
            served?;
        }
    }
    Ok(())
}

/// The approver groups `approver` belongs to, from the `[approvers.groups]` of the gateway
/// file the store was found through (none without one).
fn groups_of(args: &crate::cli::StoreArgs, approver: &str) -> Result<Vec<String>, Failure> {
    match store::locate(args)?.gateway_file {
        Some(file) => {
            let loaded = purra_gateway::load(&file).map_err(|e| Failure::Config(e.to_string()))?;
            Ok(loaded.config.approvers.groups_of(approver))
        }
        None => Ok(Vec::new()),
    }
}

#[allow(clippy::too_many_arguments)] // One decision's parts.
async fn decide(
    db: &Store,
    id: &str,
    verdict: Verdict,
    approver: &str,
    groups: &[String],
    note: Option<String>,
    expires_at: Option<SystemTime>,
) -> Result<(), Failure> {
    // An unknown id is reported as such before deciding.
    let v = store::view(db, id).await?;
    let already = |status: ApprovalStatus| {
        Failure::store(
            "conflict",
            format!("approval {id} is already decided ({status}); a decision is final"),
        )
    };
    if v.state != ApprovalState::Prepared {
        return Err(already(v.status()));
    }
    let expired = || {
        Failure::store(
            "conflict",
            format!(
                "approval {id} expired undecided; a decision is no longer accepted (the same \
                 call made again asks for a new approval)"
            ),
        )
    };
    if v.request.expired_at(SystemTime::now()) {
        return Err(expired());
    }
    // Separation of duties: the approver named here must not be the principal that asked.
    if let Err(refused) = v.request.check_decider(approver) {
        return Err(Failure::store(
            "conflict",
            format!("approval {id}: {refused}"),
        ));
    }
    // A workflow's `from` (and `escalate_to` once escalated): the approver by name, or a
    // member of a group the gateway file's [approvers.groups] lists them in.
    if let Err(refused) = v
        .request
        .check_voter(&[approver], groups, SystemTime::now())
    {
        return Err(Failure::store(
            "conflict",
            format!("approval {id}: refused: {refused}"),
        ));
    }
    let decided = db
        .gateway()
        .decide(
            ApprovalId(id.to_owned()),
            Decision {
                verdict,
                approver: purra_core::DecisionPath::Cli.approver(approver),
                decided_at: SystemTime::now(),
                expires_at,
                note,
            },
        )
        .await;
    match decided {
        // Another decision won the race since the state was read: report it as decided.
        Err(purra_core::StoreError::Conflict("already decided")) => {
            let v = store::view(db, id).await?;
            Err(already(v.status()))
        }
        // It expired since the state was read.
        Err(purra_core::StoreError::Conflict("the approval request expired")) => Err(expired()),
        Err(purra_core::StoreError::Conflict("already voted")) => Err(Failure::store(
            "conflict",
            format!("approval {id}: {approver} already voted on it; one approver votes once"),
        )),
        other => other.map_err(|e| store::failure(&format!("approval {id}"), e)),
    }
}

async fn report(db: &Store, id: &str, json_out: bool, what: &str) -> Result<(), Failure> {
    let v = store::view(db, id).await?;
    let view = store::approval_json(db, &v).await?;
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

/// The warning printed above arguments that have hidden characters.
pub const HIDDEN_CHARACTERS: &str = "warning: the arguments contain invisible or \
    direction-changing characters (such as U+202E or U+200B), shown as \\u escapes; what is sent \
    is exactly the JSON (--json shows it unescaped)";

/// Prints one approval's readable form. The arguments are shown as JSON whose hidden characters
/// (bidi controls, zero-width and other format characters: purra-core's `visible`) are JSON
/// escapes, under a warning; `--json` prints the exact data instead.
pub fn print_approval(a: &Value) {
    println!("approval: {}", text(&a["id"]));
    println!("state: {}", text(&a["state"]));
    if let Value::Object(on) = &a["onApprove"] {
        let until = on
            .get("waitingUntilMs")
            .and_then(Value::as_u64)
            .map(|ms| {
                let t = purra_protocol::tasks::rfc3339(ms);
                format!(" (the caller waits until {} {} UTC)", &t[..10], &t[11..19])
            })
            .unwrap_or_default();
        println!(
            "on approve: {}{until}",
            on.get("text").map(text).unwrap_or_default()
        );
    }
    if let Value::String(title) = &a["title"] {
        println!("title: {}", purra_core::visible::escape_hidden(title));
    }
    if let Value::String(effect) = &a["writeEffect"] {
        println!("effect of the write: {effect}");
    }
    if let Value::Object(votes) = &a["votes"] {
        let cast: Vec<String> = votes
            .get("cast")
            .and_then(Value::as_array)
            .map(|c| {
                c.iter()
                    .map(|v| {
                        purra_core::visible::escape_hidden(&format!(
                            "{} {}",
                            text(&v["approver"]),
                            text(&v["verdict"])
                        ))
                        .into_owned()
                    })
                    .collect()
            })
            .unwrap_or_default();
        let from: Vec<String> = votes
            .get("from")
            .and_then(Value::as_array)
            .map(|f| f.iter().map(text).collect())
            .unwrap_or_default();
        println!(
            "votes: {} of {}{}{}",
            votes.get("approving").map(text).unwrap_or_default(),
            votes.get("required").map(text).unwrap_or_default(),
            if from.is_empty() {
                String::new()
            } else {
                format!(" from {}", from.join(", "))
            },
            if cast.is_empty() {
                String::new()
            } else {
                format!(" ({})", cast.join(", "))
            }
        );
    }
    println!("tool: {}", text(&a["tool"]));
    match &a["arguments"] {
        Value::Null => println!(
            "arguments: (not kept by the store that prepared it; digest {})",
            text(&a["argumentsDigest"])
        ),
        args => {
            if purra_core::visible::value_has_hidden(args) {
                println!("{HIDDEN_CHARACTERS}");
            }
            println!(
                "arguments: {}",
                purra_core::visible::escape_hidden_json(&args.to_string())
            );
        }
    }
    println!("run: {}", text(&a["runId"]));
    // Who asked and who decided name downstream clients, which choose their names: one line,
    // escaped and bounded.
    let shown = |v: &Value| {
        purra_core::visible::one_line(&text(v), purra_core::visible::WHO_MAX_CHARS).into_owned()
    };
    println!("requested by: {}", shown(&a["requestedBy"]));
    let b = &a["binding"];
    println!(
        "binding: {} revision {}, scope {} revision {}",
        text(&b["bindingId"]),
        text(&b["bindingRevision"]),
        text(&b["scopeId"]),
        text(&b["scopeRevision"])
    );
    println!("intent digest: {}", text(&a["intentDigest"]));
    if let Value::Object(d) = &a["decision"] {
        println!(
            "decision: {} by {}",
            d.get("verdict").map(text).unwrap_or_default(),
            d.get("approver").map(shown).unwrap_or_default()
        );
        if let Some(Value::String(note)) = d.get("note") {
            println!("note: {}", purra_core::visible::escape_hidden(note));
        }
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
