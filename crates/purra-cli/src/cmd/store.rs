//! What the durable-store subcommands share: opening the store, finding approvals and runs in
//! its audit log, and their JSON and readable forms.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use purra_core::{
    ApprovalGateway, ApprovalId, ApprovalRecord, ApprovalState, ClaimState, Decision,
    EffectOutcome, IdempotencyKey, RunId, RunStore, StoreError, Verdict,
};
use purra_sqlite::{AuditEntry, SqliteStore};
use serde_json::{json, Value};

use crate::exit::Failure;

/// Opens an existing store file (`create` false) or opens, creating it if missing.
pub fn open(db: &Path, create: bool) -> Result<SqliteStore, Failure> {
    if !create && !db.exists() {
        return Err(Failure::store(
            "not_found",
            format!(
                "no store at {} (run `purra demo --db {0}` to make one)",
                db.display()
            ),
        ));
    }
    SqliteStore::open(db)
        .map_err(|e| Failure::store("store", format!("cannot open {}: {e}", db.display())))
}

/// A store error while doing `context`.
pub fn failure(context: &str, e: StoreError) -> Failure {
    match e {
        StoreError::NotFound => Failure::store("not_found", format!("{context}: not found")),
        StoreError::Conflict(why) => Failure::store("conflict", format!("{context}: {why}")),
        other => Failure::store("store", format!("{context}: {other}")),
    }
}

/// The whole audit log, oldest first.
pub async fn audit(store: &SqliteStore) -> Result<Vec<AuditEntry>, Failure> {
    let mut all = Vec::new();
    loop {
        let after = all.last().map_or(0, |e: &AuditEntry| e.seq);
        let page = store
            .audit(after, 1000)
            .await
            .map_err(|e| failure("reading the audit log", e))?;
        if page.is_empty() {
            return Ok(all);
        }
        all.extend(page);
    }
}

/// Every approval id ever prepared in the store, oldest first.
pub fn approval_ids(log: &[AuditEntry]) -> Vec<ApprovalId> {
    log.iter()
        .filter(|e| e.event == "prepared")
        .filter_map(|e| e.approval_id.clone().map(ApprovalId))
        .collect()
}

/// The record of `id`, or an unknown-id failure.
pub async fn record(store: &SqliteStore, id: &str) -> Result<ApprovalRecord, Failure> {
    store
        .record(ApprovalId(id.to_owned()))
        .await
        .map_err(|e| failure(&format!("approval {id}"), e))?
        .ok_or_else(|| Failure::store("not_found", format!("unknown approval id: {id}")))
}

/// The one-word state of an approval: `pending`, `approved`, `denied`, `claimed` or `refused`.
pub fn state_word(state: &ApprovalState) -> &'static str {
    match state {
        ApprovalState::Prepared => "pending",
        ApprovalState::Decided(d) if d.verdict == Verdict::Approve => "approved",
        ApprovalState::Decided(_) => "denied",
        ApprovalState::Claimed(_) => "claimed",
        ApprovalState::Refused(_) => "refused",
    }
}

fn decision(state: &ApprovalState) -> Option<&Decision> {
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

/// The effect of a claimed approval: `None` if never claimed, else its claim state.
pub async fn effect(store: &SqliteStore, digest: &str) -> Result<Option<ClaimState>, Failure> {
    store
        .receipts()
        .state(IdempotencyKey(digest.to_owned()))
        .await
        .map_err(|e| failure("reading the claim", e))
}

/// `in_flight`, `committed`, `not_started` or `unknown`.
pub fn effect_word(state: &ClaimState) -> &'static str {
    match state {
        ClaimState::InFlight => "in_flight",
        ClaimState::Completed { outcome } => match outcome {
            EffectOutcome::Committed { .. } => "committed",
            EffectOutcome::NotStarted => "not_started",
            EffectOutcome::Unknown { .. } => "unknown",
        },
    }
}

/// The receipt of a committed effect.
pub fn receipt(state: &ClaimState) -> Option<&Value> {
    match state {
        ClaimState::Completed {
            outcome: EffectOutcome::Committed { receipt },
        } => Some(receipt),
        _ => None,
    }
}

/// The arguments of the call an approval is for, while its run waits for it.
pub async fn pending_arguments(store: &SqliteStore, rec: &ApprovalRecord) -> Option<Value> {
    let run = store
        .load_suspended(rec.intent.run_id.clone())
        .await
        .ok()??;
    (run.intent_digest == rec.intent_digest
        && run.pending_call.id == rec.intent.checkpoint_call.call_id)
        .then_some(run.pending_call.arguments)
}

/// How many claims (dispatch authorizations) the audit log records for `digest`.
pub fn dispatches(log: &[AuditEntry], digest: &str) -> usize {
    log.iter()
        .filter(|e| e.event == "claimed" && e.claim_key.as_deref() == Some(digest))
        .count()
}

/// The JSON form of one approval.
pub async fn approval_json(
    store: &SqliteStore,
    log: &[AuditEntry],
    id: &str,
    rec: &ApprovalRecord,
) -> Result<Value, Failure> {
    let digest = rec.intent_digest.as_str();
    let effect = effect(store, digest).await?;
    let decision = decision(&rec.state).map(|d| {
        json!({
            "verdict": d.verdict,
            "approver": d.approver,
            "decidedAtMs": millis(d.decided_at),
            "expiresAtMs": d.expires_at.map(millis),
        })
    });
    Ok(json!({
        "id": id,
        "state": state_word(&rec.state),
        "tool": rec.intent.tool,
        "arguments": pending_arguments(store, rec).await,
        "argumentsDigest": rec.intent.arguments_digest.as_str(),
        "runId": rec.intent.run_id.as_str(),
        "intentDigest": digest,
        "decision": decision,
        "effect": effect.as_ref().map(effect_word),
        "receipt": effect.as_ref().and_then(receipt),
        "dispatches": dispatches(log, digest),
    }))
}

/// Approval ids of run `run_id`, oldest first.
pub fn run_approvals(log: &[AuditEntry], run_id: &RunId) -> Vec<ApprovalId> {
    log.iter()
        .filter(|e| e.event == "prepared" && e.run_id.as_deref() == Some(run_id.as_str()))
        .filter_map(|e| e.approval_id.clone().map(ApprovalId))
        .collect()
}

/// Every run id the audit log mentions, in order of first mention.
pub fn run_ids(log: &[AuditEntry]) -> Vec<RunId> {
    let mut ids: Vec<RunId> = Vec::new();
    for e in log {
        if let Some(r) = &e.run_id {
            if !ids.iter().any(|i| i.as_str() == r) {
                ids.push(RunId::new(r.clone()));
            }
        }
    }
    ids
}
