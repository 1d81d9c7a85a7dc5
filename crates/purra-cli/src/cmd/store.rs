//! What the durable-store subcommands share: where the store is (`--db`: a SQLite file or a
//! `postgres://` URL), opening it, and the JSON and readable forms of approvals.
//!
//! Everything shown comes from the store's operator view (`purra_core::OperatorStore`), the same for
//! both stores: the approval's request (tool, arguments, binding, who asked, when), its decision with
//! the approver's note, its claim (effect, receipt) and its audit trail.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use purra_core::{ApprovalId, ApprovalState, ApprovalView, Decision, StoreError};
pub use purra_store::{AnyStore as Store, StoreLocation as Location};
use serde_json::{json, Value};

use crate::cli::StoreArgs;
use crate::exit::Failure;

/// Reads `--db`: a `postgres://` URL, else a file path.
pub fn location(db: &str) -> Result<Location, Failure> {
    Location::parse(db).map_err(|_| Failure::usage("--db needs a file path or a postgres:// URL"))
}

/// The default store file, in the current directory.
pub const DEFAULT_DB: &str = "purra.db";

/// The gateway file looked for in the current directory when there is no `--db`, no `--config`
/// and no [`DEFAULT_DB`].
pub const DEFAULT_GATEWAY_FILE: &str = "gateway.toml";

/// Where a store subcommand's store is, and the gateway file it was read from, if any.
pub struct Located {
    /// The store.
    pub location: Location,
    /// The gateway configuration whose `[gateway] db` named it.
    pub gateway_file: Option<std::path::PathBuf>,
}

/// Finds the store of `approvals` and `runs`: `--db`; else `--config FILE`'s `[gateway] db`
/// (relative to the file's directory, as `purra gateway` reads it); else `./purra.db` when it
/// exists; else `./gateway.toml`'s `db` when that file exists; else a failure naming what was
/// looked for. A gateway file is read with the gateway's own reader: its mistakes exit 78.
pub fn locate(args: &StoreArgs) -> Result<Located, Failure> {
    if let Some(db) = &args.db {
        return Ok(Located {
            location: location(db)?,
            gateway_file: None,
        });
    }
    let file = match &args.config {
        Some(file) => file.clone(),
        None if Path::new(DEFAULT_DB).exists() => {
            return Ok(Located {
                location: location(DEFAULT_DB)?,
                gateway_file: None,
            })
        }
        None if Path::new(DEFAULT_GATEWAY_FILE).is_file() => PathBuf::from(DEFAULT_GATEWAY_FILE),
        None => {
            return Err(Failure::store(
                "not_found",
                format!(
                    "no store: no --db or --config given, and neither ./{DEFAULT_DB} nor \
                     ./{DEFAULT_GATEWAY_FILE} (whose [gateway] db would name it) is here (give \
                     --db PATH|URL or --config FILE, or run `purra demo` to make ./{DEFAULT_DB})"
                ),
            ))
        }
    };
    let loaded = purra_gateway::load(&file).map_err(|e| Failure::Config(e.to_string()))?;
    let db = loaded.config.gateway.db.display().to_string();
    Ok(Located {
        location: Location::parse(&db)
            .map_err(|e| Failure::Config(format!("{}: gateway.db: {e}", file.display())))?,
        gateway_file: Some(file),
    })
}

/// Finds ([`locate`]) and opens the existing store of a store subcommand.
pub async fn open_located(args: &StoreArgs) -> Result<(Location, Store), Failure> {
    let found = locate(args)?;
    if let (Location::File(path), Some(file)) = (&found.location, &found.gateway_file) {
        if !path.exists() {
            return Err(Failure::store(
                "not_found",
                format!(
                    "no store at {} (the [gateway] db of {}; `purra gateway --config {1}` makes it when it starts)",
                    path.display(),
                    file.display()
                ),
            ));
        }
    }
    let store = open(&found.location, false).await?;
    Ok((found.location, store))
}

/// Opens the store at `db`: an existing one (`create` false) or one created if missing (a
/// PostgreSQL schema is created when missing either way).
pub async fn open(db: &Location, create: bool) -> Result<Store, Failure> {
    if let Location::File(path) = db {
        if !create && !path.exists() {
            return Err(Failure::store(
                "not_found",
                format!(
                    "no store at {} (run `purra demo --db {0}` to make one)",
                    path.display()
                ),
            ));
        }
    }
    Store::open(db, None)
        .await
        .map_err(|e| Failure::store("store", format!("cannot open {db}: {e}")))
}

/// A store error while doing `context`.
pub fn failure(context: &str, e: StoreError) -> Failure {
    match e {
        StoreError::NotFound => Failure::store("not_found", format!("{context}: not found")),
        StoreError::Conflict(why) => Failure::store("conflict", format!("{context}: {why}")),
        other => Failure::store("store", format!("{context}: {other}")),
    }
}

/// The view of `id`, or an unknown-id failure.
pub async fn view(store: &Store, id: &str) -> Result<ApprovalView, Failure> {
    store
        .ops()
        .approval(ApprovalId(id.to_owned()))
        .await
        .map_err(|e| failure(&format!("approval {id}"), e))?
        .ok_or_else(|| Failure::store("not_found", format!("unknown approval id: {id}")))
}

/// Every approval matching `query`, all pages.
pub async fn approvals(
    store: &Store,
    query: purra_core::ApprovalQuery,
) -> Result<Vec<ApprovalView>, Failure> {
    let mut all: Vec<ApprovalView> = Vec::new();
    loop {
        let mut page = query.clone();
        page.after = all.last().map(|v| v.id.clone());
        let got = store
            .ops()
            .approvals(page)
            .await
            .map_err(|e| failure("listing approvals", e))?;
        let done = got.len() < query.limit as usize;
        all.extend(got);
        if done {
            return Ok(all);
        }
    }
}

/// The decision of a decided approval.
pub fn decision(state: &ApprovalState) -> Option<&Decision> {
    match state {
        ApprovalState::Prepared => None,
        ApprovalState::Decided(d) | ApprovalState::Claimed(d) | ApprovalState::Refused(d) => {
            Some(d)
        }
    }
}

fn millis(t: SystemTime) -> u128 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis())
}

/// How many claims (dispatch authorizations) the audit trail of `id` records: 0 or 1.
pub async fn dispatches(store: &Store, id: &ApprovalId) -> Result<usize, Failure> {
    let trail = store
        .ops()
        .approval_audit(id.clone())
        .await
        .map_err(|e| failure("reading the audit log", e))?;
    Ok(trail.iter().filter(|e| e.event == "claimed").count())
}

/// The JSON form of one approval.
pub async fn approval_json(store: &Store, v: &ApprovalView) -> Result<Value, Failure> {
    let r = &v.request;
    let decision = decision(&v.state).map(|d| {
        json!({
            "verdict": d.verdict,
            "approver": d.approver,
            "note": d.note,
            "decidedAtMs": millis(d.decided_at),
            "expiresAtMs": d.expires_at.map(millis),
        })
    });
    let claim = v.claim.as_ref().map(|c| {
        json!({
            "owner": c.owner,
            "claimedAtMs": millis(c.claimed_at),
            "completedAtMs": c.completed_at.map(millis),
        })
    });
    // What approving does while it is open: whether a caller waits (the run says until when).
    let now = SystemTime::now();
    let on_approve = if v.is_open(now) {
        let run = store
            .ops()
            .load_suspended(r.intent.run_id.clone())
            .await
            .map_err(|e| failure("reading the suspended run", e))?;
        v.on_approve(run.as_ref(), now).map(|on| {
            let until = match on {
                purra_core::OnApprove::CallerWaiting(until) => Some(millis(until)),
                _ => None,
            };
            json!({"what": on.as_str(), "text": on.text(), "waitingUntilMs": until})
        })
    } else {
        None
    };
    // A request nobody decided before its expiry will not accept a decision any more.
    let state = if v.expired_undecided(now) {
        "expired"
    } else {
        v.status().as_str()
    };
    Ok(json!({
        "id": v.id.0,
        "state": state,
        "tool": r.intent.tool,
        "title": r.labels.get(purra_core::TITLE_LABEL),
        "writeEffect": r.labels.get(purra_core::EFFECT_LABEL),
        "onApprove": on_approve,
        "arguments": r.arguments,
        "argumentsDigest": r.intent.arguments_digest.as_str(),
        "binding": {
            "bindingId": r.binding.binding_id,
            "bindingRevision": r.binding.binding_revision,
            "scopeId": r.binding.scope_id,
            "scopeRevision": r.binding.scope_revision,
        },
        "runId": r.intent.run_id.as_str(),
        "requestedBy": r.requested_by,
        "requestedAtMs": millis(r.requested_at),
        "requestExpiresAtMs": r.expires_at.map(millis),
        "labels": r.labels,
        "intentDigest": v.intent_digest.as_str(),
        "decision": decision,
        "effect": v.claim.as_ref().map(|c| c.effect_word()),
        "receipt": v.claim.as_ref().and_then(|c| c.receipt()),
        "claim": claim,
        "dispatches": dispatches(store, &v.id).await?,
        "votes": votes_json(store, v).await?,
    }))
}

/// The votes of an approval that needs a quorum: how many approving votes it needs, from whom,
/// and each vote cast (`null` for an approval decided by one decision).
async fn votes_json(store: &Store, v: &ApprovalView) -> Result<Value, Failure> {
    let Some(required) = v.request.votes_required() else {
        return Ok(Value::Null);
    };
    let cast = store
        .ops()
        .votes(v.id.clone())
        .await
        .map_err(|e| failure("reading the votes", e))?;
    let approving = cast
        .iter()
        .filter(|c| c.verdict == purra_core::Verdict::Approve)
        .count();
    Ok(json!({
        "required": required,
        "approving": approving,
        "from": v.request.votes_from(),
        "escalatesAtMs": v.request.escalates_at().map(millis),
        "escalateTo": v.request.escalate_to(),
        "cast": cast.iter().map(|c| json!({
            "voter": c.voter,
            "approver": c.approver,
            "verdict": c.verdict,
            "note": c.note,
            "atMs": millis(c.at),
        })).collect::<Vec<_>>(),
    }))
}
