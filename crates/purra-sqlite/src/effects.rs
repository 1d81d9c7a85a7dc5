//! Effects as an operator sees them (purra-core's `effect`): claims listed newest first (the
//! `unknown` ones through the partial index `claims_unknown`), one claim with its approval's tool
//! and arguments, its last reconciliation (from the audit log) and its resend (`resends`), an
//! operator's reconciliation, and the one resend of an `unknown` effect.

use crate::audit::append;
use crate::store::{backend, immediate, now_ns, read_claim, record_effect};
use purra_core::stored::{claim_state, from_ns, json_error, outcome_kind};
use purra_core::{
    check_reconciler, check_reconciliation, EffectOutcome, EffectPage, EffectQuery,
    EffectReconciled, EffectView, IdempotencyKey, ResendClaim, ResendView, StoreError,
    WebhookEvent, WebhookEventType,
};
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Value};

/// The columns of one effect: the claim, its approval, its resend.
const SELECT: &str =
    "SELECT c.seq, c.key, c.owner, c.claimed_at_ns, c.outcome_json, c.completed_at_ns,
        a.seq, a.tool, a.request_json, r.by_who, r.owner, r.at_ns, r.outcome_json, r.completed_at_ns
     FROM claims c LEFT JOIN approvals a ON a.seq = c.approval_seq
     LEFT JOIN resends r ON r.claim_seq = c.seq";

/// A resend row as read: who, the owner that sent it, when, its outcome and when it came.
type ResendRow = (String, String, i64, Option<String>, Option<i64>);

/// An effect row as read.
struct Row {
    seq: i64,
    key: String,
    owner: String,
    claimed_at: i64,
    outcome_json: Option<String>,
    completed_at: Option<i64>,
    approval: Option<i64>,
    tool: Option<String>,
    request_json: Option<String>,
    resend: Option<ResendRow>,
}

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok(Row {
        seq: r.get(0)?,
        key: r.get(1)?,
        owner: r.get(2)?,
        claimed_at: r.get(3)?,
        outcome_json: r.get(4)?,
        completed_at: r.get(5)?,
        approval: r.get(6)?,
        tool: r.get(7)?,
        request_json: r.get(8)?,
        resend: match r.get::<_, Option<String>>(9)? {
            None => None,
            Some(by) => Some((by, r.get(10)?, r.get(11)?, r.get(12)?, r.get(13)?)),
        },
    })
}

/// The last reconciliation of claim `seq`, from the audit log (`audit_by_claim`).
fn reconciled(conn: &Connection, seq: i64) -> Result<Option<EffectReconciled>, StoreError> {
    let found: Option<(String, String, i64)> = conn
        .prepare_cached(
            "SELECT detail, owner, at_ns FROM audit WHERE claim_seq = ?1 AND event = 'reconciled'
             ORDER BY seq DESC LIMIT 1",
        )
        .and_then(|mut s| {
            s.query_row(params![seq], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .optional()
        })
        .map_err(backend)?;
    let Some((detail, owner, at)) = found else {
        return Ok(None);
    };
    let detail: Value = serde_json::from_str(&detail).map_err(json_error)?;
    Ok(Some(EffectReconciled {
        // Rows written before the operator was recorded name the store's owner.
        by: detail["by"].as_str().map(str::to_owned).unwrap_or(owner),
        evidence: detail["evidence"].as_str().unwrap_or_default().to_owned(),
        at: from_ns(at),
    }))
}

fn view(conn: &Connection, r: Row) -> Result<EffectView, StoreError> {
    let arguments = match &r.request_json {
        Some(text) => {
            let request: Value = serde_json::from_str(text).map_err(json_error)?;
            request.get("arguments").cloned()
        }
        None => None,
    };
    let resend = match r.resend {
        None => None,
        Some((by, owner, at, outcome, completed_at)) => Some(ResendView {
            by,
            owner,
            at: from_ns(at),
            outcome: outcome
                .map(|t| serde_json::from_str(&t).map_err(json_error))
                .transpose()?,
            completed_at: completed_at.map(from_ns),
        }),
    };
    Ok(EffectView {
        key: IdempotencyKey(r.key),
        owner: r.owner,
        claimed_at: from_ns(r.claimed_at),
        state: claim_state(r.outcome_json)?,
        completed_at: r.completed_at.map(from_ns),
        approval: r.approval.map(purra_core::stored::approval_id),
        tool: r.tool,
        arguments,
        reconciled: reconciled(conn, r.seq)?,
        resend,
    })
}

/// One page of effects, newest claim first.
pub(crate) fn page(conn: &Connection, query: &EffectQuery) -> Result<EffectPage, StoreError> {
    let before = match &query.before {
        None => i64::MAX,
        Some(key) => read_claim(conn, &key.0)?.ok_or(StoreError::NotFound)?.0,
    };
    let filter = if query.unknown_only {
        " AND c.outcome = 'unknown'"
    } else {
        ""
    };
    let sql = format!("{SELECT} WHERE c.seq < ?1{filter} ORDER BY c.seq DESC LIMIT ?2");
    let rows: Vec<Row> = conn
        .prepare_cached(&sql)
        .and_then(|mut s| {
            s.query_map(params![before, query.read_limit()], row)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(backend)?;
    let mut effects = Vec::with_capacity(rows.len());
    for r in rows {
        effects.push(view(conn, r)?);
    }
    Ok(EffectPage::from_read(effects, query))
}

/// One effect.
pub(crate) fn one(
    conn: &Connection,
    key: &IdempotencyKey,
) -> Result<Option<EffectView>, StoreError> {
    let sql = format!("{SELECT} WHERE c.key = ?1");
    let found = conn
        .prepare_cached(&sql)
        .and_then(|mut s| s.query_row(params![key.0], row).optional())
        .map_err(backend)?;
    found.map(|r| view(conn, r)).transpose()
}

/// The claim of `key` with an `unknown` outcome: its row, and the outcome.
fn unknown_claim(
    conn: &Connection,
    key: &IdempotencyKey,
) -> Result<(i64, EffectOutcome), StoreError> {
    let (seq, before) = match read_claim(conn, &key.0)? {
        None => return Err(StoreError::NotFound),
        Some((_, None)) => return Err(StoreError::Conflict("the claim has no outcome yet")),
        Some((seq, Some(text))) => (seq, text),
    };
    let before: EffectOutcome = serde_json::from_str(&before).map_err(json_error)?;
    if !matches!(before, EffectOutcome::Unknown { .. }) {
        return Err(StoreError::Conflict(
            "only an unknown outcome is reconciled",
        ));
    }
    Ok((seq, before))
}

/// An operator's reconciliation, audited with who and the evidence, with its events.
pub(crate) fn reconcile(
    conn: &mut Connection,
    me: &str,
    key: &IdempotencyKey,
    by: &str,
    evidence: &str,
    outcome: &EffectOutcome,
) -> Result<(), StoreError> {
    check_reconciliation(evidence, outcome)?;
    check_reconciler(by, evidence)?;
    let tx = immediate(conn)?;
    let (seq, before) = unknown_claim(&tx, key)?;
    let at = now_ns()?;
    let outcome_json = serde_json::to_string(outcome).map_err(json_error)?;
    tx.execute(
        "UPDATE claims SET outcome = ?1, outcome_json = ?2, completed_at_ns = ?3 WHERE seq = ?4",
        params![outcome_kind(outcome), outcome_json, at, seq],
    )
    .map_err(backend)?;
    append(
        &tx,
        at,
        me,
        "reconciled",
        None,
        Some((&key.0, Some(seq))),
        None,
        &json!({"before": before, "after": outcome, "by": by, "evidence": evidence}),
    )?;
    record_effect(&tx, key, seq, outcome, true, at)?;
    crate::webhook::record(&tx, WebhookEventType::EffectReconciled, |tx| {
        let approval = crate::webhook::approval_of_claim(tx, seq)?;
        Ok(WebhookEvent::reconciled(
            key,
            approval.as_ref(),
            outcome,
            by,
            evidence,
            from_ns(at),
        ))
    })?;
    tx.commit().map_err(backend)
}

/// Claims the one resend of an `unknown` effect, or finds the earlier one.
pub(crate) fn claim_resend(
    conn: &mut Connection,
    me: &str,
    key: &IdempotencyKey,
    by: &str,
) -> Result<ResendClaim, StoreError> {
    check_reconciler(by, "")?;
    let tx = immediate(conn)?;
    let Some(existing) = one(&tx, key)? else {
        return Err(StoreError::NotFound);
    };
    if let Some(earlier) = existing.resend {
        return Ok(ResendClaim::AlreadyResent(earlier));
    }
    let (seq, before) = match unknown_claim(&tx, key) {
        Err(StoreError::Conflict(_)) => {
            return Err(StoreError::Conflict("only an unknown effect is resent"))
        }
        found => found?,
    };
    let at = now_ns()?;
    tx.execute(
        "INSERT INTO resends (claim_seq, by_who, owner, at_ns) VALUES (?1, ?2, ?3, ?4)",
        params![seq, by, me, at],
    )
    .map_err(backend)?;
    append(
        &tx,
        at,
        me,
        "resend_claimed",
        None,
        Some((&key.0, Some(seq))),
        None,
        &json!({"by": by, "before": before}),
    )?;
    tx.commit().map_err(backend)?;
    Ok(ResendClaim::Claimed)
}

/// Records what the claimed resend came to.
pub(crate) fn complete_resend(
    conn: &mut Connection,
    me: &str,
    key: &IdempotencyKey,
    outcome: &EffectOutcome,
) -> Result<(), StoreError> {
    let tx = immediate(conn)?;
    let (seq, now) = match read_claim(&tx, &key.0)? {
        None => return Err(StoreError::NotFound),
        Some((seq, outcome)) => (seq, outcome),
    };
    let by: Option<String> = tx
        .query_row(
            "SELECT by_who FROM resends WHERE claim_seq = ?1 AND outcome_json IS NULL",
            params![seq],
            |r| r.get(0),
        )
        .optional()
        .map_err(backend)?;
    let Some(by) = by else {
        return Err(StoreError::Conflict(
            "no resend of this effect is waiting for its outcome",
        ));
    };
    let at = now_ns()?;
    let outcome_json = serde_json::to_string(outcome).map_err(json_error)?;
    if matches!(outcome, EffectOutcome::NotStarted) {
        // Nothing left: the resend claim is released, another may be made.
        tx.execute("DELETE FROM resends WHERE claim_seq = ?1", params![seq])
            .map_err(backend)?;
        append(
            &tx,
            at,
            me,
            "resend_not_sent",
            None,
            Some((&key.0, Some(seq))),
            None,
            &json!({"by": by}),
        )?;
        return tx.commit().map_err(backend);
    }
    tx.execute(
        "UPDATE resends SET outcome_json = ?1, completed_at_ns = ?2 WHERE claim_seq = ?3",
        params![outcome_json, at, seq],
    )
    .map_err(backend)?;
    let before: Option<EffectOutcome> = now
        .map(|t| serde_json::from_str(&t).map_err(json_error))
        .transpose()?;
    // Only an effect still unknown takes the resend's outcome (an operator may have decided
    // meanwhile; their decision stands, the resend's outcome is kept with the resend).
    let still_unknown = matches!(before, Some(EffectOutcome::Unknown { .. }));
    if still_unknown {
        tx.execute(
            "UPDATE claims SET outcome = ?1, outcome_json = ?2, completed_at_ns = ?3 WHERE seq = ?4",
            params![outcome_kind(outcome), outcome_json, at, seq],
        )
        .map_err(backend)?;
    }
    append(
        &tx,
        at,
        me,
        "resent",
        None,
        Some((&key.0, Some(seq))),
        None,
        &json!({"by": by, "before": before, "after": outcome, "applied": still_unknown}),
    )?;
    if still_unknown {
        record_effect(&tx, key, seq, outcome, false, at)?;
    }
    tx.commit().map_err(backend)
}
