//! Effects as an operator sees them (purra-core's `effect`), as purra-sqlite's `effects`: claims
//! listed newest first (`claims_unknown`, `claims_by_time`), one claim with its approval's tool
//! and arguments, its last reconciliation (from the audit log) and its resend (`resends`), an
//! operator's reconciliation, and the one resend of an `unknown` effect. Every write is one
//! transaction retried with its operation token, as the store's other writes are.

use crate::store::{
    append, now_ns, query, query_opt, read_claim, record_effect, witness, Audit, Error,
    PostgresStore, Tx,
};
use purra_core::stored::{approval_id, claim_state, from_ns, json_error, outcome_kind};
use purra_core::{
    check_reconciler, check_reconciliation, BoxFuture, EffectOutcome, EffectPage, EffectQuery,
    EffectReconciled, EffectView, IdempotencyKey, ResendClaim, ResendView, StoreError,
    WebhookEvent, WebhookEventType,
};
use serde_json::{json, Value};
use std::time::SystemTime;
use tokio_postgres::Row;

/// The columns of one effect: the claim, its approval, its resend.
const SELECT: &str = "SELECT c.key, c.owner, c.claimed_at_ns, c.outcome_json, c.completed_at_ns,
        a.seq, a.tool, a.request_json, r.by_who, r.owner, r.at_ns, r.outcome_json, r.completed_at_ns
     FROM claims c LEFT JOIN approvals a ON a.seq = c.approval_seq
     LEFT JOIN resends r ON r.key = c.key";

/// The last reconciliation of claim `key`, from the audit log (`audit_by_claim`).
async fn reconciled<C: crate::store::Conn>(
    c: &C,
    key: &str,
) -> Result<Option<EffectReconciled>, Error> {
    let Some(row) = query_opt(
        c,
        "SELECT detail, owner, at_ns FROM audit WHERE claim_key = $1 AND event = 'reconciled'
         ORDER BY seq DESC LIMIT 1",
        &[&key],
    )
    .await?
    else {
        return Ok(None);
    };
    let detail: Value = serde_json::from_str(row.get::<_, &str>(0)).map_err(json_error)?;
    let owner: String = row.get(1);
    Ok(Some(EffectReconciled {
        // Rows written before the operator was recorded name the store's owner.
        by: detail["by"].as_str().map(str::to_owned).unwrap_or(owner),
        evidence: detail["evidence"].as_str().unwrap_or_default().to_owned(),
        at: from_ns(row.get(2)),
    }))
}

async fn view<C: crate::store::Conn>(c: &C, r: &Row) -> Result<EffectView, Error> {
    let key: String = r.get(0);
    let arguments = match r.get::<_, Option<&str>>(7) {
        Some(text) => {
            let request: Value = serde_json::from_str(text).map_err(json_error)?;
            request.get("arguments").cloned()
        }
        None => None,
    };
    let resend = match r.get::<_, Option<String>>(8) {
        None => None,
        Some(by) => Some(ResendView {
            by,
            owner: r.get(9),
            at: from_ns(r.get(10)),
            outcome: r
                .get::<_, Option<&str>>(11)
                .map(|t| serde_json::from_str(t).map_err(json_error))
                .transpose()?,
            completed_at: r.get::<_, Option<i64>>(12).map(from_ns),
        }),
    };
    Ok(EffectView {
        reconciled: reconciled(c, &key).await?,
        key: IdempotencyKey(key),
        owner: r.get(1),
        claimed_at: from_ns(r.get(2)),
        state: claim_state(r.get(3))?,
        completed_at: r.get::<_, Option<i64>>(4).map(from_ns),
        approval: r.get::<_, Option<i64>>(5).map(approval_id),
        tool: r.get(6),
        arguments,
        resend,
    })
}

/// One page of effects, newest claim first.
pub(crate) async fn page<C: crate::store::Conn>(
    c: &C,
    q: &EffectQuery,
) -> Result<EffectPage, Error> {
    let filter = if q.unknown_only {
        " AND c.outcome = 'unknown'"
    } else {
        ""
    };
    let limit = i64::from(q.read_limit());
    let rows = match &q.before {
        None => {
            let sql = format!(
                "{SELECT} WHERE true{filter} ORDER BY c.claimed_at_ns DESC, c.key DESC LIMIT $1"
            );
            query(c, &sql, &[&limit]).await?
        }
        Some(key) => {
            let Some(at) = query_opt(
                c,
                "SELECT claimed_at_ns FROM claims WHERE key = $1",
                &[&key.0],
            )
            .await?
            else {
                return Err(StoreError::NotFound.into());
            };
            let at: i64 = at.get(0);
            let sql = format!(
                "{SELECT} WHERE (c.claimed_at_ns, c.key) < ($1, $2){filter}
                 ORDER BY c.claimed_at_ns DESC, c.key DESC LIMIT $3"
            );
            query(c, &sql, &[&at, &key.0, &limit]).await?
        }
    };
    let mut effects = Vec::with_capacity(rows.len());
    for r in &rows {
        effects.push(view(c, r).await?);
    }
    Ok(EffectPage::from_read(effects, q))
}

/// One effect.
pub(crate) async fn one<C: crate::store::Conn>(
    c: &C,
    key: &IdempotencyKey,
) -> Result<Option<EffectView>, Error> {
    let sql = format!("{SELECT} WHERE c.key = $1");
    match query_opt(c, &sql, &[&key.0]).await? {
        None => Ok(None),
        Some(r) => Ok(Some(view(c, &r).await?)),
    }
}

/// The `unknown` outcome of claim `key`, locked.
async fn unknown_claim(tx: &Tx<'_>, key: &str) -> Result<EffectOutcome, Error> {
    let before = match read_claim(tx, key, true).await? {
        None => return Err(StoreError::NotFound.into()),
        Some(None) => return Err(StoreError::Conflict("the claim has no outcome yet").into()),
        Some(Some(text)) => text,
    };
    let before: EffectOutcome = serde_json::from_str(&before).map_err(json_error)?;
    if !matches!(before, EffectOutcome::Unknown { .. }) {
        return Err(StoreError::Conflict("only an unknown outcome is reconciled").into());
    }
    Ok(before)
}

/// An operator's reconciliation, audited with who and the evidence, with its events.
pub(crate) fn reconcile(
    store: &PostgresStore,
    key: IdempotencyKey,
    by: String,
    evidence: String,
    outcome: EffectOutcome,
) -> BoxFuture<'_, Result<(), StoreError>> {
    let op = store.op_token();
    Box::pin(async move {
        check_reconciliation(&evidence, &outcome)?;
        check_reconciler(&by, &evidence)?;
        let outcome_json = serde_json::to_string(&outcome).map_err(json_error)?;
        store
            .transact(move |tx, me, retry| {
                let (op, key, by, evidence, outcome, outcome_json) = (
                    op.clone(),
                    key.clone(),
                    by.clone(),
                    evidence.clone(),
                    outcome.clone(),
                    outcome_json.clone(),
                );
                Box::pin(async move {
                    let existing = read_claim(tx, &key.0, true).await?;
                    if retry && witness(tx, me, &op).await?.is_some() {
                        return Ok(());
                    }
                    if existing.is_none() {
                        return Err(StoreError::NotFound.into());
                    }
                    let before = unknown_claim(tx, &key.0).await?;
                    crate::store::exec(
                        tx,
                        "UPDATE claims SET outcome = $1, outcome_json = $2, completed_at_ns = $3
                         WHERE key = $4",
                        &[&outcome_kind(&outcome), &outcome_json, &now_ns(), &key.0],
                    )
                    .await?;
                    append(
                        tx,
                        me,
                        Some(&op),
                        Audit::new(
                            "reconciled",
                            json!({"before": before, "after": outcome, "by": by,
                                   "evidence": evidence}),
                        )
                        .key(&key.0),
                    )
                    .await?;
                    record_effect(tx, &key, &outcome, true).await?;
                    if crate::webhook::wanted(tx, WebhookEventType::EffectReconciled).await? {
                        let approval = crate::webhook::approval_of_claim(tx, &key.0).await?;
                        let event = WebhookEvent::reconciled(
                            &key,
                            approval.as_ref(),
                            &outcome,
                            &by,
                            &evidence,
                            SystemTime::now(),
                        );
                        crate::webhook::insert(tx, &event).await?;
                    }
                    Ok(())
                })
            })
            .await
    })
}

/// Claims the one resend of an `unknown` effect, or finds the earlier one.
pub(crate) fn claim_resend(
    store: &PostgresStore,
    key: IdempotencyKey,
    by: String,
) -> BoxFuture<'_, Result<ResendClaim, StoreError>> {
    let op = store.op_token();
    Box::pin(async move {
        check_reconciler(&by, "")?;
        store
            .transact(move |tx, me, retry| {
                let (op, key, by) = (op.clone(), key.clone(), by.clone());
                Box::pin(async move {
                    let existing = read_claim(tx, &key.0, true).await?;
                    if retry && witness(tx, me, &op).await?.is_some() {
                        return Ok(ResendClaim::Claimed);
                    }
                    if existing.is_none() {
                        return Err(StoreError::NotFound.into());
                    }
                    if let Some(earlier) = one(tx, &key).await?.and_then(|v| v.resend) {
                        return Ok(ResendClaim::AlreadyResent(earlier));
                    }
                    let before = match unknown_claim(tx, &key.0).await {
                        Err(Error::Store(StoreError::Conflict(_))) => {
                            return Err(
                                StoreError::Conflict("only an unknown effect is resent").into()
                            )
                        }
                        found => found?,
                    };
                    crate::store::exec(
                        tx,
                        "INSERT INTO resends (key, by_who, owner, at_ns) VALUES ($1, $2, $3, $4)",
                        &[&key.0, &by, &me, &now_ns()],
                    )
                    .await?;
                    append(
                        tx,
                        me,
                        Some(&op),
                        Audit::new("resend_claimed", json!({"by": by, "before": before}))
                            .key(&key.0),
                    )
                    .await?;
                    Ok(ResendClaim::Claimed)
                })
            })
            .await
    })
}

/// Records what the claimed resend came to.
pub(crate) fn complete_resend(
    store: &PostgresStore,
    key: IdempotencyKey,
    outcome: EffectOutcome,
) -> BoxFuture<'_, Result<(), StoreError>> {
    let op = store.op_token();
    Box::pin(async move {
        let outcome_json = serde_json::to_string(&outcome).map_err(json_error)?;
        store
            .transact(move |tx, me, retry| {
                let (op, key, outcome, outcome_json) = (
                    op.clone(),
                    key.clone(),
                    outcome.clone(),
                    outcome_json.clone(),
                );
                Box::pin(async move {
                    let Some(now) = read_claim(tx, &key.0, true).await? else {
                        return Err(StoreError::NotFound.into());
                    };
                    if retry && witness(tx, me, &op).await?.is_some() {
                        return Ok(());
                    }
                    let Some(by) = query_opt(
                        tx,
                        "SELECT by_who FROM resends WHERE key = $1 AND outcome_json IS NULL
                         FOR UPDATE",
                        &[&key.0],
                    )
                    .await?
                    .map(|r| r.get::<_, String>(0)) else {
                        return Err(StoreError::Conflict(
                            "no resend of this effect is waiting for its outcome",
                        )
                        .into());
                    };
                    if matches!(outcome, EffectOutcome::NotStarted) {
                        // Nothing left: the resend claim is released, another may be made.
                        crate::store::exec(tx, "DELETE FROM resends WHERE key = $1", &[&key.0])
                            .await?;
                        append(
                            tx,
                            me,
                            Some(&op),
                            Audit::new("resend_not_sent", json!({"by": by})).key(&key.0),
                        )
                        .await?;
                        return Ok(());
                    }
                    let at = now_ns();
                    crate::store::exec(
                        tx,
                        "UPDATE resends SET outcome_json = $1, completed_at_ns = $2 WHERE key = $3",
                        &[&outcome_json, &at, &key.0],
                    )
                    .await?;
                    let before: Option<EffectOutcome> = now
                        .map(|t| serde_json::from_str(&t).map_err(json_error))
                        .transpose()?;
                    // Only an effect still unknown takes the resend's outcome.
                    let still_unknown = matches!(before, Some(EffectOutcome::Unknown { .. }));
                    if still_unknown {
                        crate::store::exec(
                            tx,
                            "UPDATE claims SET outcome = $1, outcome_json = $2,
                                               completed_at_ns = $3
                             WHERE key = $4",
                            &[&outcome_kind(&outcome), &outcome_json, &at, &key.0],
                        )
                        .await?;
                    }
                    append(
                        tx,
                        me,
                        Some(&op),
                        Audit::new(
                            "resent",
                            json!({"by": by, "before": before, "after": outcome,
                                   "applied": still_unknown}),
                        )
                        .key(&key.0),
                    )
                    .await?;
                    if still_unknown {
                        record_effect(tx, &key, &outcome, false).await?;
                    }
                    Ok(())
                })
            })
            .await
    })
}
