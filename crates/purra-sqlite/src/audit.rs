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

/// The claim an audit row is about: its idempotency key and, when the claim row exists, its
/// sequence number (what the trail of a claim is looked up by).
pub(crate) type ClaimRef<'a> = (&'a str, Option<i64>);

/// How an approval's trail finds an audit row about it again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Trail {
    /// Through `audit_by_approval`: a row the approval's own row does not point at (a refused
    /// repeat claim, a suspended run).
    Indexed,
    /// Through a column of the approval's row (`prepared_audit`, `decided_audit`,
    /// `settled_audit`), which the caller sets to the returned sequence number in the same
    /// savepoint: the row costs no index page of its own.
    FromApproval,
}

/// Appends one row and returns its sequence number; `at` is nanoseconds since the Unix epoch. An
/// [`Trail::Indexed`] row about an approval keeps the approval's sequence number (parsed from its
/// id, none if it is not an id this store mints) for `audit_by_approval`; a row about a claim keeps
/// the claim's for `audit_by_claim`.
#[allow(clippy::too_many_arguments)] // One row's columns, named at every call site.
pub(crate) fn append(
    conn: &Connection,
    at: i64,
    owner: &str,
    event: &str,
    approval: Option<(&str, Trail)>,
    claim: Option<ClaimRef<'_>>,
    run_id: Option<&str>,
    detail: &Value,
) -> Result<i64, StoreError> {
    let trail_approval = match approval {
        Some((id, Trail::Indexed)) => seq_of(id),
        _ => None,
    };
    conn.prepare_cached(
        "INSERT INTO audit (at_ns, owner, event, approval_id, claim_key, run_id, detail,
                            trail_approval, claim_seq)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )
    .and_then(|mut stmt| {
        stmt.execute(params![
            at,
            owner,
            event,
            approval.map(|(id, _)| id),
            claim.map(|(key, _)| key),
            run_id,
            detail.to_string(),
            trail_approval,
            claim.and_then(|(_, seq)| seq),
        ])
    })
    .map_err(backend)?;
    Ok(conn.last_insert_rowid())
}

/// The sequence number of an approval id as this store mints them: what purra-core's
/// [`purra_core::stored::approval_seq_of`] parses, never negative (no approval's is).
fn seq_of(id: &str) -> Option<i64> {
    purra_core::stored::approval_seq_of(id).filter(|seq| *seq >= 0)
}

pub(crate) const COLUMNS: &str = "seq, at_ns, owner, event, approval_id, claim_key, run_id, detail";

/// Rows after `after_seq`, oldest first, at most `limit`.
pub(crate) fn read(
    conn: &Connection,
    after_seq: i64,
    limit: u32,
) -> Result<Vec<AuditEntry>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM audit WHERE seq > ?1 ORDER BY seq LIMIT ?2");
    rows(conn, &sql, params![after_seq, limit])
}

/// Where an approval's trail is: the approval's sequence number, the rows its own row points at,
/// and its claim's sequence number if it made one.
pub(crate) struct TrailOf {
    pub(crate) approval: i64,
    pub(crate) pointed: [Option<i64>; 3],
    pub(crate) claim: Option<i64>,
}

/// The trail of an approval, oldest first: the rows its row points at, its indexed rows, and its
/// claim's rows that name no approval (the outcome, a reconciliation). One statement; each of the
/// three terms is looked up by key or by its index (the tests check the plan).
pub(crate) fn read_for_approval(
    conn: &Connection,
    trail: &TrailOf,
) -> Result<Vec<AuditEntry>, StoreError> {
    rows(conn, &trail_sql(), trail_params(trail))
}

pub(crate) fn trail_sql() -> String {
    format!(
        "SELECT {COLUMNS} FROM audit
         WHERE seq IN (?2, ?3, ?4) OR trail_approval = ?1
            OR (claim_seq = ?5 AND approval_id IS NULL)
         ORDER BY seq"
    )
}

pub(crate) fn trail_params(trail: &TrailOf) -> [Option<i64>; 5] {
    let [p, d, s] = trail.pointed;
    [Some(trail.approval), p, d, s, trail.claim]
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

#[cfg(test)]
mod tests {
    use super::{seq_of, trail_params, trail_sql, TrailOf};
    use purra_core::stored::approval_seq;
    use purra_core::ApprovalId;

    /// The trail is read by key and through the two partial indexes, never by reading the log.
    #[test]
    fn an_approvals_trail_is_looked_up_never_scanned() {
        let mut conn = rusqlite::Connection::open_in_memory().unwrap();
        crate::migrate::plan_once(&conn).unwrap();
        crate::migrate::migrate(&mut conn).unwrap();
        let trail = TrailOf {
            approval: 3,
            pointed: [Some(10), Some(12), None],
            claim: Some(4),
        };
        let mut stmt = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {}", trail_sql()))
            .unwrap();
        let plan: Vec<String> = stmt
            .query_map(rusqlite::params_from_iter(trail_params(&trail)), |r| {
                r.get(3)
            })
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let plan = plan.join("; ");
        assert!(plan.contains("audit_by_approval"), "{plan}");
        assert!(plan.contains("audit_by_claim"), "{plan}");
        assert!(!plan.contains("SCAN audit"), "{plan}");
    }

    #[test]
    fn only_a_minted_approval_id_has_a_sequence_number() {
        for id in [
            "approval-1",
            "approval-0",
            "approval-01",
            "approval-+1",
            "approval-1x",
            "x",
        ] {
            assert_eq!(seq_of(id), approval_seq(&ApprovalId(id.into())), "{id}");
        }
        assert_eq!(seq_of("approval-1"), Some(1));
        assert_eq!(seq_of("approval-0"), Some(0));
        assert_eq!(seq_of("approval-9223372036854775807"), Some(i64::MAX));
        for other in [
            "approval-",
            "approval-01",
            "approval-+1",
            "approval--1",
            "approval-1x",
            "approval-9223372036854775808",
            "Approval-1",
            "1",
        ] {
            assert_eq!(seq_of(other), None, "{other}");
        }
    }
}
