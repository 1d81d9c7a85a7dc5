//! Connection setup and versioned schema migrations (`PRAGMA user_version`).
//!
//! Migration N (1-based) is the N-th entry of [`MIGRATIONS`]; it runs once, inside a `BEGIN IMMEDIATE`
//! transaction that also advances `user_version`, so two processes opening a new file at once cannot both
//! run it. A file whose `user_version` is newer than this build knows is refused, never downgraded.

use crate::store::backend;
use purra_core::StoreError;
use rusqlite::{Connection, TransactionBehavior};
use std::time::Duration;

/// Schema version 1: approvals, claims (with their owner), owners (leases), suspended runs, audit.
const V1: &str = r#"
CREATE TABLE owners (
    owner           TEXT PRIMARY KEY,
    pid             INTEGER NOT NULL,
    opened_at_ns    INTEGER NOT NULL,
    heartbeat_at_ns INTEGER NOT NULL,
    lease_ns        INTEGER NOT NULL CHECK (lease_ns > 0),
    closed_at_ns    INTEGER
);

CREATE TABLE approvals (
    seq            INTEGER PRIMARY KEY AUTOINCREMENT,
    intent_json    TEXT NOT NULL,
    intent_digest  TEXT NOT NULL,
    tool           TEXT NOT NULL,
    run_id         TEXT NOT NULL,
    prepared_at_ns INTEGER NOT NULL,
    prepared_by    TEXT NOT NULL REFERENCES owners(owner),
    state          TEXT NOT NULL CHECK (state IN ('prepared', 'decided', 'claimed', 'refused')),
    verdict        TEXT CHECK (verdict IN ('approve', 'deny')),
    approver       TEXT,
    decided_at_ns  INTEGER,
    expires_at_ns  INTEGER,
    refused_reason TEXT CHECK (refused_reason IN ('expired', 'mismatch')),
    CHECK ((state = 'prepared') = (verdict IS NULL)),
    CHECK ((verdict IS NULL) = (approver IS NULL) AND (verdict IS NULL) = (decided_at_ns IS NULL)),
    CHECK ((state = 'refused') = (refused_reason IS NOT NULL))
);
CREATE INDEX approvals_by_state ON approvals(state);

CREATE TABLE claims (
    key             TEXT PRIMARY KEY,
    owner           TEXT NOT NULL REFERENCES owners(owner),
    approval_seq    INTEGER REFERENCES approvals(seq),
    claimed_at_ns   INTEGER NOT NULL,
    outcome         TEXT CHECK (outcome IN ('committed', 'not_started', 'unknown')),
    outcome_json    TEXT,
    completed_at_ns INTEGER,
    CHECK ((outcome IS NULL) = (outcome_json IS NULL) AND (outcome IS NULL) = (completed_at_ns IS NULL))
);
CREATE INDEX claims_in_flight ON claims(owner) WHERE outcome IS NULL;

CREATE TABLE suspended_runs (
    run_id      TEXT PRIMARY KEY,
    agent       TEXT NOT NULL,
    run_json    TEXT NOT NULL,
    saved_at_ns INTEGER NOT NULL
);

CREATE TABLE audit (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    at_ns       INTEGER NOT NULL,
    owner       TEXT NOT NULL,
    event       TEXT NOT NULL,
    approval_id TEXT,
    claim_key   TEXT,
    run_id      TEXT,
    detail      TEXT NOT NULL
);
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
"#;

/// Schema version 2: what an approver is shown (the whole request: arguments, binding, who asked, when,
/// until when, labels) and the decision's note. Approvals prepared under version 1 have no request.
const V2: &str = r#"
ALTER TABLE approvals ADD COLUMN request_json TEXT;
ALTER TABLE approvals ADD COLUMN request_expires_at_ns INTEGER;
ALTER TABLE approvals ADD COLUMN note TEXT;
CREATE INDEX approvals_by_run ON approvals(run_id);
CREATE INDEX audit_by_approval ON audit(approval_id) WHERE approval_id IS NOT NULL;
CREATE INDEX audit_by_claim ON audit(claim_key) WHERE claim_key IS NOT NULL;
CREATE INDEX claims_by_approval ON claims(approval_seq);
"#;

/// Every migration, in order; the schema version of a migrated file is `MIGRATIONS.len()`.
pub(crate) const MIGRATIONS: &[&str] = &[V1, V2];

/// Sets the pragmas every connection of a store uses. `file` is false for in-memory databases, which
/// cannot use WAL.
pub(crate) fn configure(
    conn: &Connection,
    busy_timeout: Duration,
    file: bool,
) -> Result<(), StoreError> {
    conn.busy_timeout(busy_timeout).map_err(backend)?;
    // Every statement of the store stays prepared (there are about twenty).
    conn.set_prepared_statement_cache_capacity(64);
    if file {
        let mode: String = conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
            .map_err(backend)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Backend(format!(
                "journal_mode is {mode}, WAL could not be enabled"
            )));
        }
    }
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(backend)?;
    conn.pragma_update(None, "foreign_keys", "ON")
        .map_err(backend)?;
    Ok(())
}

/// Brings the schema up to date, refusing a file from a newer build.
pub(crate) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(backend)?;
    let version: i64 = tx
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(backend)?;
    let known = MIGRATIONS.len() as i64;
    if version > known || version < 0 {
        return Err(StoreError::Backend(format!(
            "schema version {version} is newer than this build of purra-sqlite knows ({known})"
        )));
    }
    for (idx, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        tx.execute_batch(sql).map_err(backend)?;
        tx.pragma_update(None, "user_version", idx as i64 + 1)
            .map_err(backend)?;
    }
    tx.commit().map_err(backend)
}
