//! The append-only audit log: one row per prepare, decision, claim, refusal, outcome, reconciliation,
//! suspended-run change and owner open/close.
//!
//! Rows are only ever inserted (by [`append`], inside the transaction whose change they record); triggers
//! in the schema abort any `UPDATE` or `DELETE` on the table, whoever issues it.

use crate::store::{backend, from_ns};
use purra_core::StoreError;
use rusqlite::{params, Connection};
use serde_json::Value;
use std::time::SystemTime;

/// One row of the audit log.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct AuditEntry {
    /// Position in the log (strictly increasing, never reused).
    pub seq: i64,
    /// Wall-clock time of the write.
    pub at: SystemTime,
    /// The store owner that wrote it.
    pub owner: String,
    /// What happened: `opened`, `closed`, `prepared`, `decided`, `claimed`, `refused`, `claim_refused`,
    /// `outcome`, `outcome_rejected`, `interrupted`, `reconciled`, `run_suspended`, `run_removed`.
    pub event: String,
    /// The approval concerned, if any.
    pub approval_id: Option<String>,
    /// The idempotency key concerned, if any.
    pub claim_key: Option<String>,
    /// The run concerned, if any.
    pub run_id: Option<String>,
    /// Event details (times in nanoseconds since the Unix epoch, camelCase members).
    pub detail: Value,
}

/// Appends one row; `at` is nanoseconds since the Unix epoch.
#[allow(clippy::too_many_arguments)] // One row's columns, named at every call site.
pub(crate) fn append(
    conn: &Connection,
    at: i64,
    owner: &str,
    event: &str,
    approval_id: Option<&str>,
    claim_key: Option<&str>,
    run_id: Option<&str>,
    detail: &Value,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO audit (at_ns, owner, event, approval_id, claim_key, run_id, detail)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )
    .and_then(|mut stmt| {
        stmt.execute(params![
            at,
            owner,
            event,
            approval_id,
            claim_key,
            run_id,
            detail.to_string()
        ])
    })
    .map_err(backend)?;
    Ok(())
}

/// Rows after `after_seq`, oldest first, at most `limit`.
pub(crate) fn read(
    conn: &Connection,
    after_seq: i64,
    limit: u32,
) -> Result<Vec<AuditEntry>, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT seq, at_ns, owner, event, approval_id, claim_key, run_id, detail FROM audit
             WHERE seq > ?1 ORDER BY seq LIMIT ?2",
        )
        .map_err(backend)?;
    let rows = stmt
        .query_map(params![after_seq, limit], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, i64>(1)?,
                row.get::<_, String>(2)?,
                row.get::<_, String>(3)?,
                row.get::<_, Option<String>>(4)?,
                row.get::<_, Option<String>>(5)?,
                row.get::<_, Option<String>>(6)?,
                row.get::<_, String>(7)?,
            ))
        })
        .map_err(backend)?;
    let mut out = Vec::new();
    for row in rows {
        let (seq, at, owner, event, approval_id, claim_key, run_id, detail) =
            row.map_err(backend)?;
        out.push(AuditEntry {
            seq,
            at: from_ns(at),
            owner,
            event,
            approval_id,
            claim_key,
            run_id,
            detail: serde_json::from_str(&detail)
                .map_err(|e| StoreError::Backend(format!("stored JSON: {e}")))?,
        });
    }
    Ok(out)
}
