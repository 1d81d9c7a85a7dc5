//! The append-only audit log: one row per prepare, decision, claim, refusal, outcome, reconciliation,
//! suspended-run change and owner open/close.
//!
//! Rows are only ever inserted (by [`append`], inside the transaction whose change they record); triggers
//! in the schema abort any `UPDATE` or `DELETE` on the table, whoever issues it.

use crate::store::backend;
use purra_core::stored::from_ns;
use purra_core::{AuditEntry, StoreError};
use rusqlite::{params, Connection};
use serde_json::Value;

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

const COLUMNS: &str = "seq, at_ns, owner, event, approval_id, claim_key, run_id, detail";

/// Rows after `after_seq`, oldest first, at most `limit`.
pub(crate) fn read(
    conn: &Connection,
    after_seq: i64,
    limit: u32,
) -> Result<Vec<AuditEntry>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM audit WHERE seq > ?1 ORDER BY seq LIMIT ?2");
    rows(conn, &sql, params![after_seq, limit])
}

/// The trail of approval `approval` (its id) whose claim, if it made one, has key `claim_key`.
pub(crate) fn read_for_approval(
    conn: &Connection,
    approval: &str,
    claim_key: Option<&str>,
) -> Result<Vec<AuditEntry>, StoreError> {
    let sql = format!(
        "SELECT {COLUMNS} FROM audit
         WHERE approval_id = ?1 OR (approval_id IS NULL AND claim_key = ?2) ORDER BY seq"
    );
    rows(conn, &sql, params![approval, claim_key])
}

fn rows(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<AuditEntry>, StoreError> {
    let mut stmt = conn.prepare_cached(sql).map_err(backend)?;
    let rows = stmt
        .query_map(params, |row| {
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
        let detail: Value = serde_json::from_str(&detail)
            .map_err(|e| StoreError::Backend(format!("stored JSON: {e}")))?;
        out.push(AuditEntry::new(
            seq,
            from_ns(at),
            owner,
            event,
            approval_id,
            claim_key,
            run_id,
            detail,
        ));
    }
    Ok(out)
}
