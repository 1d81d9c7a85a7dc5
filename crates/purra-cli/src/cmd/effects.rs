//! `purra effects list [--unknown] | show KEY | reconcile KEY | resend KEY`: the effects (claimed
//! writes) in a store, and the two ways an `unknown` one changes: an operator's recorded decision
//! and a resend under the same key (the gateway's `resend`, which decides whether it is allowed).

use std::time::{SystemTime, UNIX_EPOCH};

use purra_core::visible::{one_line, WHO_MAX_CHARS};
use purra_core::{ApprovalId, EffectOutcome, EffectQuery, EffectView, IdempotencyKey};
use serde_json::{json, Value};

use crate::cli::EffectsCommand;
use crate::cmd::print_json;
use crate::cmd::store::{self, Store};
use crate::exit::Failure;

/// Runs one `purra effects` subcommand.
pub async fn run(command: EffectsCommand) -> Result<(), Failure> {
    let args = command.store_args();
    let json_out = args.json;
    if matches!(command, EffectsCommand::Resend { .. }) && args.config.is_none() {
        return Err(Failure::usage(
            "purra effects resend needs --config FILE: the gateway file that binds the tool \
             (its [writes.NAME] and [upstreams.ID])",
        ));
    }
    let (location, db) = store::open_located(args).await?;
    match &command {
        EffectsCommand::List {
            unknown,
            before,
            limit,
            ..
        } => {
            let mut query = if *unknown {
                EffectQuery::unknown()
            } else {
                EffectQuery::all()
            }
            .limit(*limit);
            if let Some(key) = before {
                query = query.before(IdempotencyKey(key.clone()));
            }
            let page = db
                .ops()
                .effects(query)
                .await
                .map_err(|e| store::failure("listing effects", e))?;
            let all: Vec<Value> = page.effects.iter().map(effect_json).collect();
            let next = page.next.as_ref().map(|k| k.0.clone());
            if json_out {
                print_json(&json!({ "effects": all, "next": next }));
            } else if all.is_empty() {
                let what = if *unknown {
                    "unknown effects"
                } else {
                    "effects"
                };
                println!("no {what} in {}", location.shown());
            } else {
                let rows: Vec<Vec<String>> = page
                    .effects
                    .iter()
                    .map(|e| {
                        vec![
                            e.key.0.clone(),
                            e.effect_word().to_owned(),
                            reason(e).unwrap_or_else(|| "-".into()),
                            e.tool.clone().unwrap_or_else(|| "-".into()),
                            e.approval.as_ref().map_or("-".into(), |a| a.0.clone()),
                            when(e.claimed_at),
                        ]
                    })
                    .collect();
                print!(
                    "{}",
                    crate::render::table(
                        &["KEY", "EFFECT", "REASON", "TOOL", "APPROVAL", "CLAIMED"],
                        &rows
                    )
                );
                if let Some(next) = next {
                    println!("more, older: see them with --before {next}");
                }
            }
        }
        EffectsCommand::Show { key, .. } => {
            let e = effect(&db, key).await?;
            if json_out {
                print_json(&effect_json(&e));
            } else {
                print_effect(&e);
            }
        }
        EffectsCommand::Reconcile {
            key,
            committed,
            not_sent,
            evidence,
            by,
            ..
        } => {
            let e = effect(&db, key).await?;
            let by = format!("{by} (cli)");
            let outcome = match (committed, not_sent) {
                (true, false) => EffectOutcome::Committed {
                    receipt: json!({"reconciled": {"by": by, "evidence": evidence}}),
                },
                (false, true) => EffectOutcome::NotStarted,
                _ => {
                    return Err(Failure::usage(
                        "give exactly one of --committed and --not-sent",
                    ))
                }
            };
            db.ops()
                .reconcile_effect(e.key.clone(), by.clone(), evidence.clone(), outcome)
                .await
                .map_err(|err| store::failure(&format!("reconciling {}", e.key.0), err))?;
            let after = effect(&db, &e.key.0).await?;
            if json_out {
                print_json(&effect_json(&after));
            } else {
                println!(
                    "{} reconciled as {} by {by}; the audit log keeps the evidence",
                    e.key.0,
                    after.effect_word()
                );
            }
        }
        EffectsCommand::Resend { key, by, .. } => {
            let e = effect(&db, key).await?;
            let file = args.config.as_ref().expect("checked above");
            let loaded =
                purra_gateway::load(file).map_err(|err| Failure::Config(err.to_string()))?;
            let by = format!("{by} (cli)");
            let resent = purra_gateway::resend(&loaded.config, db.ops(), e.key.clone(), &by)
                .await
                .map_err(|err| match err {
                    purra_gateway::ResendError::Store(s) => {
                        store::failure(&format!("resending {}", e.key.0), s)
                    }
                    other => Failure::store("conflict", format!("resending {}: {other}", e.key.0)),
                })?;
            let after = effect(&db, &e.key.0).await?;
            let word = purra_core::stored::outcome_kind(&resent.outcome);
            if json_out {
                let mut v = effect_json(&after);
                v["resent"] = json!({
                    "outcome": word,
                    "declared": resent.declared,
                    "notSent": resent.not_sent.as_ref().map(|c| c.as_str()),
                });
                print_json(&v);
            } else {
                match &resent.outcome {
                    EffectOutcome::Committed { .. } => println!(
                        "{} resent under the same key: committed; the receipt is recorded",
                        e.key.0
                    ),
                    EffectOutcome::Unknown { reason } => println!(
                        "{} resent under the same key: still unknown ({reason}); reconcile it \
                         with evidence",
                        e.key.0
                    ),
                    EffectOutcome::NotStarted => println!(
                        "{} was not resent ({}): nothing left; a resend may be tried again",
                        e.key.0,
                        resent.not_sent.as_ref().map_or("-", |c| c.as_str())
                    ),
                }
            }
            if !matches!(resent.outcome, EffectOutcome::Committed { .. }) {
                return Err(Failure::store(
                    "conflict",
                    format!(
                        "resending {}: the effect is {}",
                        e.key.0,
                        after.effect_word()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The effect named by `key`: an idempotency key, or the id of the approval that claimed one.
async fn effect(db: &Store, key: &str) -> Result<EffectView, Failure> {
    let key = if purra_core::stored::approval_seq(&ApprovalId(key.to_owned())).is_some() {
        let v = store::view(db, key).await?;
        match v.claim {
            Some(c) => c.key,
            None => {
                return Err(Failure::store(
                    "not_found",
                    format!("{key} was never claimed: it has no effect"),
                ))
            }
        }
    } else {
        IdempotencyKey(key.to_owned())
    };
    db.ops()
        .effect(key.clone())
        .await
        .map_err(|e| store::failure(&format!("effect {}", key.0), e))?
        .ok_or_else(|| Failure::store("not_found", format!("unknown effect key: {}", key.0)))
}

fn millis(t: SystemTime) -> u128 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis())
}

fn when(t: SystemTime) -> String {
    let s = purra_core::webhook::rfc3339(t);
    format!("{} {} UTC", &s[..10], &s[11..19])
}

/// The reason of an `unknown` effect.
fn reason(e: &EffectView) -> Option<String> {
    match &e.state {
        purra_core::ClaimState::Completed {
            outcome: EffectOutcome::Unknown { reason },
        } => Some(reason.as_str().to_owned()),
        _ => None,
    }
}

/// The JSON form of an effect (the arguments included: this is the operator's view).
fn effect_json(e: &EffectView) -> Value {
    json!({
        "key": e.key.0,
        "effect": e.effect_word(),
        "reason": reason(e),
        "owner": e.owner,
        "claimedAtMs": millis(e.claimed_at),
        "completedAtMs": e.completed_at.map(millis),
        "approval": e.approval.as_ref().map(|a| a.0.clone()),
        "tool": e.tool,
        "arguments": e.arguments,
        "receipt": e.state.receipt(),
        "reconciled": e.reconciled.as_ref().map(|r| json!({
            "by": r.by,
            "evidence": r.evidence,
            "atMs": millis(r.at),
        })),
        "resend": e.resend.as_ref().map(|r| json!({
            "by": r.by,
            "owner": r.owner,
            "atMs": millis(r.at),
            "outcome": r.outcome.as_ref().map(purra_core::stored::outcome_kind),
            "completedAtMs": r.completed_at.map(millis),
        })),
    })
}

/// Text from the store, one line, escaped and bounded, for a terminal.
fn shown(text: &str) -> String {
    one_line(text, WHO_MAX_CHARS).into_owned()
}

fn print_effect(e: &EffectView) {
    println!("effect: {}", e.key.0);
    match reason(e) {
        Some(r) => println!("state: unknown ({r})"),
        None => println!("state: {}", e.effect_word()),
    }
    println!(
        "claimed: {} by instance {}",
        when(e.claimed_at),
        shown(&e.owner)
    );
    if let Some(a) = &e.approval {
        println!("approval: {}", a.0);
    }
    if let Some(t) = &e.tool {
        println!("tool: {}", shown(t));
    }
    if let Some(args) = &e.arguments {
        println!("arguments sent: {}", shown(&args.to_string()));
    }
    if let Some(done) = e.completed_at {
        println!("last outcome: {}", when(done));
    }
    if let Some(receipt) = e.state.receipt() {
        println!("receipt: {}", shown(&receipt.to_string()));
    }
    if let Some(r) = &e.reconciled {
        println!(
            "reconciled: {} by {}: {}",
            when(r.at),
            shown(&r.by),
            shown(&r.evidence)
        );
    }
    if let Some(r) = &e.resend {
        let outcome = r
            .outcome
            .as_ref()
            .map_or("no outcome recorded yet", purra_core::stored::outcome_kind);
        println!(
            "resent: {} by {} (instance {}): {outcome}",
            when(r.at),
            shown(&r.by),
            shown(&r.owner)
        );
    }
    if e.effect_word() == "unknown" && e.resend.is_none() {
        println!(
            "settle it: purra effects reconcile {0} --committed|--not-sent --evidence TEXT, or \
             purra effects resend {0} --config FILE (idempotent writes only)",
            e.key.0
        );
    }
}
