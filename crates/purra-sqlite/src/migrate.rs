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

/// Schema version 3: what a write touches, cut to what it must (see the guide's design notes,
/// "the durable store's pages"). Approvals, claims and audit rows are keyed by increasing integers with no
/// `AUTOINCREMENT` (no row of the three is ever deleted, so `max(rowid) + 1` never reuses a key, and no
/// write rewrites `sqlite_sequence`); a claim has an integer key of its own, its idempotency key in one
/// unique index, and its approval points at it (`approvals.claim_seq`, written by the update that marks
/// the approval claimed), so no index is keyed by approval on `claims`; the audit log's two lookup
/// indexes are on those integers instead of the text ids, so an outcome's audit row lands at the index's
/// end; `approvals_by_state` gives way to `approvals_pending`, a partial index of the approvals
/// waiting for a decision (the approver's listing, which now names the state in its statement so the
/// index applies), small whatever the history; an approval's own audit rows (prepared, decided, claimed or refused) are pointed at from its
/// row (`prepared_audit`, `decided_audit`, `settled_audit`, written by the updates its writes make
/// anyway) instead of being indexed by approval, and only its other rows (a refused repeat claim, a
/// suspended run) are in `audit_by_approval` (by `trail_approval`). The three tables are rebuilt, every
/// row kept with its key; rows written before version 3 stay found through the index; the audit
/// log's triggers are made again.
const V3: &str = r#"
CREATE TABLE approvals_v3 (
    seq                   INTEGER PRIMARY KEY,
    intent_json           TEXT NOT NULL,
    intent_digest         TEXT NOT NULL,
    tool                  TEXT NOT NULL,
    run_id                TEXT NOT NULL,
    prepared_at_ns        INTEGER NOT NULL,
    prepared_by           TEXT NOT NULL REFERENCES owners(owner),
    state                 TEXT NOT NULL CHECK (state IN ('prepared', 'decided', 'claimed', 'refused')),
    verdict               TEXT CHECK (verdict IN ('approve', 'deny')),
    approver              TEXT,
    decided_at_ns         INTEGER,
    expires_at_ns         INTEGER,
    refused_reason        TEXT CHECK (refused_reason IN ('expired', 'mismatch')),
    request_json          TEXT,
    request_expires_at_ns INTEGER,
    note                  TEXT,
    claim_seq             INTEGER,
    prepared_audit        INTEGER,
    decided_audit         INTEGER,
    settled_audit         INTEGER,
    CHECK ((state = 'prepared') = (verdict IS NULL)),
    CHECK ((verdict IS NULL) = (approver IS NULL) AND (verdict IS NULL) = (decided_at_ns IS NULL)),
    CHECK ((state = 'refused') = (refused_reason IS NOT NULL))
);
INSERT INTO approvals_v3 (seq, intent_json, intent_digest, tool, run_id, prepared_at_ns, prepared_by,
                          state, verdict, approver, decided_at_ns, expires_at_ns, refused_reason,
                          request_json, request_expires_at_ns, note)
SELECT seq, intent_json, intent_digest, tool, run_id, prepared_at_ns, prepared_by, state, verdict,
       approver, decided_at_ns, expires_at_ns, refused_reason, request_json, request_expires_at_ns, note
FROM approvals ORDER BY seq;

CREATE TABLE claims_v3 (
    seq             INTEGER PRIMARY KEY,
    key             TEXT NOT NULL UNIQUE,
    owner           TEXT NOT NULL REFERENCES owners(owner),
    approval_seq    INTEGER REFERENCES approvals_v3(seq),
    claimed_at_ns   INTEGER NOT NULL,
    outcome         TEXT CHECK (outcome IN ('committed', 'not_started', 'unknown')),
    outcome_json    TEXT,
    completed_at_ns INTEGER,
    CHECK ((outcome IS NULL) = (outcome_json IS NULL) AND (outcome IS NULL) = (completed_at_ns IS NULL))
);
INSERT INTO claims_v3 (key, owner, approval_seq, claimed_at_ns, outcome, outcome_json, completed_at_ns)
SELECT key, owner, approval_seq, claimed_at_ns, outcome, outcome_json, completed_at_ns
FROM claims ORDER BY claimed_at_ns, rowid;
CREATE INDEX claims_v3_by_approval ON claims_v3(approval_seq);
UPDATE approvals_v3 SET claim_seq = (SELECT c.seq FROM claims_v3 c WHERE c.approval_seq = approvals_v3.seq)
WHERE state = 'claimed';
DROP INDEX claims_v3_by_approval;

CREATE TABLE audit_v3 (
    seq            INTEGER PRIMARY KEY,
    at_ns          INTEGER NOT NULL,
    owner          TEXT NOT NULL,
    event          TEXT NOT NULL,
    approval_id    TEXT,
    claim_key      TEXT,
    run_id         TEXT,
    detail         TEXT NOT NULL,
    trail_approval INTEGER,
    claim_seq      INTEGER
);
INSERT INTO audit_v3 (seq, at_ns, owner, event, approval_id, claim_key, run_id, detail, trail_approval,
                      claim_seq)
SELECT a.seq, a.at_ns, a.owner, a.event, a.approval_id, a.claim_key, a.run_id, a.detail,
       CASE WHEN a.approval_id GLOB 'approval-[1-9]*' AND substr(a.approval_id, 10) NOT GLOB '*[^0-9]*'
                 AND length(a.approval_id) <= 27
            THEN CAST(substr(a.approval_id, 10) AS INTEGER) END,
       (SELECT c.seq FROM claims_v3 c WHERE c.key = a.claim_key)
FROM audit a ORDER BY a.seq;

DROP TABLE audit;
DROP TABLE claims;
DROP TABLE approvals;
ALTER TABLE approvals_v3 RENAME TO approvals;
ALTER TABLE claims_v3 RENAME TO claims;
ALTER TABLE audit_v3 RENAME TO audit;

CREATE INDEX approvals_by_run ON approvals(run_id);
CREATE INDEX approvals_pending ON approvals(seq) WHERE state = 'prepared';
CREATE INDEX claims_in_flight ON claims(owner) WHERE outcome IS NULL;
CREATE INDEX audit_by_approval ON audit(trail_approval) WHERE trail_approval IS NOT NULL;
CREATE INDEX audit_by_claim ON audit(claim_seq) WHERE claim_seq IS NOT NULL;
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
"#;

/// Schema version 4: the principal an approval was asked for (its request's `principal` label,
/// written by `prepare`; `NULL` for approvals prepared before, and for requests without the label),
/// and `approvals_open_by_principal`, a partial index of the pending approvals that name one, by
/// principal and request expiry (a request without one sorts as never expiring; the expiry column
/// itself is kept too, so the index covers the count), so a principal's open approvals are counted
/// by a seek that reads only them. Only approvals with the label enter
/// it: a host's own approvals (and the store benchmark's) write nothing more; a gateway's write one
/// entry more when prepared and remove it when decided (see the guide's design notes). Nothing is
/// rebuilt:
/// a new column is a change of the table's definition only.
const V4: &str = r#"
ALTER TABLE approvals ADD COLUMN principal TEXT;
CREATE INDEX approvals_open_by_principal
    ON approvals(principal, coalesce(request_expires_at_ns, 9223372036854775807),
                 request_expires_at_ns)
    WHERE state = 'prepared' AND principal IS NOT NULL;
"#;

/// Schema version 5: the webhook outbox (see purra-core's `webhook`). `webhook_subscriptions`
/// holds one row per registered endpoint and event type it subscribes to, keyed by the type so
/// that a write asks "who wants this?" with one seek; with no endpoint registered it is empty and a
/// write changes no page for it. `webhook_outbox` holds each undelivered delivery: its
/// `webhook-id`, fixed when recorded, the payload as recorded, its attempts, when it is due next
/// (a claim moves that past its lease) and who claimed it last, its last failure; a delivered one
/// is deleted (so the table holds only what is pending or failed), a given-up one stays `failed`.
/// `webhook_outbox_due` is a partial index of the pending deliveries by endpoint and due
/// instant: a deliverer's next due delivery is one seek. Keys are increasing integers without
/// `AUTOINCREMENT` (a deleted last row's key can come back, so a claim is named by key, message
/// id and attempt together). Nothing existing is touched.
const V5: &str = r#"
CREATE TABLE webhook_subscriptions (
    event    TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    PRIMARY KEY (event, endpoint)
) WITHOUT ROWID;
CREATE TABLE webhook_outbox (
    seq           INTEGER PRIMARY KEY,
    msg_id        TEXT NOT NULL,
    endpoint      TEXT NOT NULL,
    event         TEXT NOT NULL,
    payload       TEXT NOT NULL,
    created_at_ns INTEGER NOT NULL,
    state         TEXT NOT NULL CHECK (state IN ('pending', 'failed')),
    attempts      INTEGER NOT NULL CHECK (attempts >= 0),
    next_at_ns    INTEGER NOT NULL,
    leased_by     TEXT,
    last_status   INTEGER,
    last_error    TEXT
);
CREATE INDEX webhook_outbox_due ON webhook_outbox(endpoint, next_at_ns) WHERE state = 'pending';
"#;

/// Schema version 6: each principal's upstream credentials (purra-core's `credential`), one row
/// per principal, upstream and name, holding only the sealed secret (opaque here), what may be
/// shown of it, and its version for compare-and-swap. `credentials_by_upstream` serves listings by
/// upstream. Nothing existing is touched.
const V6: &str = r#"
CREATE TABLE credentials (
    principal       TEXT NOT NULL,
    upstream        TEXT NOT NULL,
    name            TEXT NOT NULL,
    kind            TEXT NOT NULL CHECK (kind IN ('oauth', 'secret')),
    sealed          BLOB NOT NULL,
    issuer          TEXT,
    scopes          TEXT,
    subject         TEXT,
    expires_at_ns   INTEGER,
    created_at_ns   INTEGER NOT NULL,
    updated_at_ns   INTEGER NOT NULL,
    last_used_at_ns INTEGER,
    version         INTEGER NOT NULL CHECK (version > 0),
    PRIMARY KEY (principal, upstream, name)
) WITHOUT ROWID;
CREATE INDEX credentials_by_upstream ON credentials(upstream, principal, name);
"#;

/// Schema version 7 (idempotency keys, issue 46): a purra server's idempotent results, one row
/// per key: the digest of the request it began for, when, and its result (`NULL` while it runs).
/// `idempotent_results_by_age` serves the sweep by age and the eviction of the oldest finished key.
/// Nothing existing is touched.
const V7_IDEMPOTENT_RESULTS: &str = r#"
CREATE TABLE idempotent_results (
    key         TEXT PRIMARY KEY,
    request     TEXT NOT NULL,
    began_at_ns INTEGER NOT NULL,
    result      TEXT
) WITHOUT ROWID;
CREATE INDEX idempotent_results_by_age ON idempotent_results(began_at_ns);
"#;

// ---- Issue 46, reconciling `unknown` effects (one schema step of its own) ----

/// Schema version 8: the resend of an `unknown` effect (purra-core's `effect`), one row per claim
/// at most (its key is the claim's), so a resend is claimed once whichever process asks: who
/// asked, the store owner that sent it, when, and what came back. `claims_unknown`, a partial
/// index of the claims whose outcome is `unknown`, serves the operator's queue newest first
/// whatever the history. Nothing existing is rewritten.
const V8_EFFECTS: &str = r#"
CREATE TABLE resends (
    claim_seq       INTEGER PRIMARY KEY REFERENCES claims(seq),
    by_who          TEXT NOT NULL,
    owner           TEXT NOT NULL,
    at_ns           INTEGER NOT NULL,
    outcome_json    TEXT,
    completed_at_ns INTEGER,
    CHECK ((outcome_json IS NULL) = (completed_at_ns IS NULL))
);
CREATE INDEX claims_unknown ON claims(seq) WHERE outcome = 'unknown';
"#;

/// Schema version 9 ("catalog pins", issue 46): each bound upstream tool's pinned definition, and the
/// catalog changes (a listing that differs from the pin) waiting for or decided by an operator;
/// one change per distinct difference (`UNIQUE`), however many processes see it.
const V9_CATALOG_PINS: &str = r#"
CREATE TABLE tool_pins (
    upstream        TEXT NOT NULL,
    tool            TEXT NOT NULL,
    definition      TEXT NOT NULL,
    digest          TEXT NOT NULL,
    pinned_by       TEXT NOT NULL,
    pinned_at_ns    INTEGER NOT NULL,
    PRIMARY KEY (upstream, tool)
) WITHOUT ROWID;

CREATE TABLE catalog_changes (
    seq             INTEGER PRIMARY KEY,
    upstream        TEXT NOT NULL,
    tool            TEXT NOT NULL,
    kind            TEXT NOT NULL CHECK (kind IN ('changed', 'removed')),
    old_definition  TEXT NOT NULL,
    old_digest      TEXT NOT NULL,
    new_definition  TEXT,
    new_digest      TEXT NOT NULL,
    state           TEXT NOT NULL CHECK (state IN ('pending', 'approved', 'denied')),
    seen_by         TEXT NOT NULL,
    seen_at_ns      INTEGER NOT NULL,
    decided_by      TEXT,
    decided_at_ns   INTEGER,
    note            TEXT,
    CHECK ((kind = 'removed') = (new_definition IS NULL)),
    CHECK ((state = 'pending') = (decided_by IS NULL)),
    UNIQUE (upstream, tool, old_digest, new_digest)
);
CREATE INDEX catalog_changes_pending ON catalog_changes(state, seq);
"#;

// ---- Issue 47, standing grants (one schema step of its own) ----

/// Schema version 10: standing grants (purra-core's `grant`): who may call which tool, under
/// which argument rules (JSON text), how many times (`used` never passes `max_uses`: a use is a
/// conditional update in the transaction that prepares and approves the call's approval) and
/// until when; who granted and revoked it. `grant_uses` lists each use with its approval;
/// `grants_by_principal` serves a call's look-up of its live grants. Nothing existing is touched.
const V10_GRANTS: &str = r#"
CREATE TABLE grants (
    seq           INTEGER PRIMARY KEY,
    principal     TEXT NOT NULL,
    tool          TEXT NOT NULL,
    rules_json    TEXT NOT NULL,
    max_uses      INTEGER NOT NULL CHECK (max_uses > 0),
    used          INTEGER NOT NULL DEFAULT 0,
    until_ns      INTEGER NOT NULL,
    granted_by    TEXT NOT NULL,
    granted_at_ns INTEGER NOT NULL,
    note          TEXT,
    revoked_at_ns INTEGER,
    revoked_by    TEXT,
    CHECK (used >= 0 AND used <= max_uses)
);
CREATE INDEX grants_by_principal ON grants(principal, tool) WHERE revoked_at_ns IS NULL;
CREATE TABLE grant_uses (
    grant_seq   INTEGER NOT NULL REFERENCES grants(seq),
    approval_id TEXT NOT NULL,
    at_ns       INTEGER NOT NULL,
    PRIMARY KEY (grant_seq, approval_id)
);
"#;

// ---- Issue 47, held writes as MCP tasks (one schema step of its own) ----

/// Schema version 11: MCP tasks kept for a fleet (purra-core's `held_tasks`): one row per task,
/// its owner, creation and expiry (milliseconds) and whether it ended; the body is the server's
/// JSON. Nothing existing is touched.
const V11_TASKS: &str = r#"
CREATE TABLE mcp_tasks (
    id          TEXT PRIMARY KEY,
    owner       TEXT NOT NULL,
    created_ms  INTEGER NOT NULL,
    expires_ms  INTEGER NOT NULL,
    terminal    INTEGER NOT NULL DEFAULT 0 CHECK (terminal IN (0, 1)),
    body        TEXT NOT NULL
);
CREATE INDEX mcp_tasks_by_owner ON mcp_tasks(owner, created_ms, id);
CREATE INDEX mcp_tasks_by_expiry ON mcp_tasks(expires_ms);
"#;

// ---- Issue 47, quorum, escalation and expiry (one schema step of its own) ----

/// Schema version 12: approval workflows (purra-core's `workflow`). `approval_rules` holds the
/// rules of an approval prepared with any (the votes it needs; when it escalates and whether it
/// did; when it is denied undecided), its timers cleared once it is decided; `approval_votes`
/// each vote, one per voter (the primary key). Nothing existing is touched.
const V12_WORKFLOW: &str = r#"
CREATE TABLE approval_rules (
    approval_seq    INTEGER PRIMARY KEY REFERENCES approvals(seq),
    votes_required  INTEGER CHECK (votes_required > 0),
    escalate_at_ns  INTEGER,
    escalated_at_ns INTEGER,
    deny_at_ns      INTEGER
);
CREATE INDEX approval_rules_escalate ON approval_rules(escalate_at_ns)
    WHERE escalate_at_ns IS NOT NULL AND escalated_at_ns IS NULL;
CREATE INDEX approval_rules_deny ON approval_rules(deny_at_ns) WHERE deny_at_ns IS NOT NULL;
CREATE TABLE approval_votes (
    approval_seq INTEGER NOT NULL REFERENCES approvals(seq),
    voter        TEXT NOT NULL,
    approver     TEXT NOT NULL,
    verdict      TEXT NOT NULL CHECK (verdict IN ('approve', 'deny')),
    at_ns        INTEGER NOT NULL,
    note         TEXT,
    PRIMARY KEY (approval_seq, voter)
) WITHOUT ROWID;
"#;

// ---- Issue 48, sessions that outlive an instance (one schema step of its own) ----

/// Schema version 13: Streamable HTTP sessions (purra-protocol's `SessionStore`, feature
/// `sessions`): each session's owner (principal binding key), negotiated state (JSON) and
/// last-seen time for fleet-wide idle expiry, and the bounded log of its SSE events, so any
/// process resumes a session and its streams. Nothing existing is touched.
const V13_HTTP_SESSIONS: &str = r#"
CREATE TABLE http_sessions (
    id           TEXT PRIMARY KEY,
    owner        TEXT,
    state        TEXT NOT NULL,
    last_seen_ns INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX http_sessions_by_last_seen ON http_sessions(last_seen_ns);
CREATE TABLE http_session_events (
    seq     INTEGER PRIMARY KEY,
    session TEXT NOT NULL,
    stream  INTEGER NOT NULL,
    num     INTEGER NOT NULL,
    data    BLOB NOT NULL,
    at_ns   INTEGER NOT NULL
);
CREATE INDEX http_session_events_by_stream ON http_session_events(session, stream, num);
"#;

/// Schema version 14: running requests' streams of Streamable HTTP sessions (issue 48): the
/// request, the process holding it and its lease, so another process takes a stream over once
/// that lease ran out. Gone with the session. Nothing existing is touched.
const V14_HTTP_SESSION_STREAMS: &str = r#"
CREATE TABLE http_session_streams (
    session        TEXT NOT NULL,
    stream         INTEGER NOT NULL,
    request        TEXT NOT NULL,
    holder         TEXT NOT NULL,
    lease_until_ns INTEGER NOT NULL,
    PRIMARY KEY (session, stream)
) WITHOUT ROWID;
"#;

// ---- Issue 50, the store at scale ----

/// Schema version 15: an index of the decided approvals, newest first through it: the history
/// (the approver page's, `ApprovalQuery::decided`) reads one page of it whatever the number of
/// pending approvals, which it used to step over one row at a time (10 000 pending approvals
/// newer than every decision made each history page read them all).
const V15_DECIDED: &str = r#"
CREATE INDEX approvals_decided ON approvals(seq) WHERE state <> 'prepared';
"#;

/// Schema version 16: a count of Streamable HTTP sessions ended (deleted, by `DELETE` or idle
/// expiry) or saved with another state or owner, kept by triggers so every process, of any build
/// that writes the table, counts: a process that holds a session serves its requests without
/// reading it while the count and the file's `data_version` stay as they were when it last did
/// (`SqliteStore::sessions_changes`). A new session and a last-seen time do not count.
const V16_HTTP_SESSION_CHANGES: &str = r#"
CREATE TABLE http_session_changes (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    n   INTEGER NOT NULL
);
INSERT INTO http_session_changes (one, n) VALUES (1, 0);
CREATE TRIGGER http_sessions_ended AFTER DELETE ON http_sessions
BEGIN
    UPDATE http_session_changes SET n = n + 1;
END;
CREATE TRIGGER http_sessions_changed AFTER UPDATE OF owner, state ON http_sessions
WHEN old.state IS NOT new.state OR old.owner IS NOT new.owner
BEGIN
    UPDATE http_session_changes SET n = n + 1;
END;
"#;

/// Every migration, in order; the schema version of a migrated file is `MIGRATIONS.len()`.
pub(crate) const MIGRATIONS: &[&str] = &[
    V1,
    V2,
    V3,
    V4,
    V5,
    V6,
    V7_IDEMPOTENT_RESULTS,
    V8_EFFECTS,
    V9_CATALOG_PINS,
    V10_GRANTS,
    V11_TASKS,
    V12_WORKFLOW,
    V13_HTTP_SESSIONS,
    V14_HTTP_SESSION_STREAMS,
    V15_DECIDED,
    V16_HTTP_SESSION_CHANGES,
];

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
    plan_once(conn)?;
    if file {
        let mode = wal_mode(conn, busy_timeout)?;
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

/// Makes `conn`'s statements keep the plan they were prepared with, whatever values are bound
/// (SQLite's query planner stability guarantee). Without it SQLite compiles a cached statement
/// again at every run whose parameters it looked at while planning: a `LIMIT ?`, and a parameter
/// compared with a partial index's `WHERE` (most of the store's reads), so every read parsed and
/// planned its SQL anew (~14 % of a gateway's CPU in a write cycle). The store's partial indexes
/// are chosen by literals in the SQL (`state = 'prepared'`), never by a bound value.
pub(crate) fn plan_once(conn: &Connection) -> Result<(), StoreError> {
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .map(|_| ())
    .map_err(backend)
}

/// Switches the file to WAL and returns the journal mode it reports.
///
/// Switching a new file takes an exclusive lock, and SQLite answers `SQLITE_BUSY` at once, without
/// consulting the busy handler, to a connection that asks while another one is switching (a fleet
/// opening one new store at the same moment). That answer is retried here, within `busy_timeout`
/// like every other wait for a lock.
fn wal_mode(conn: &Connection, busy_timeout: Duration) -> Result<String, StoreError> {
    let deadline = std::time::Instant::now() + busy_timeout;
    let mut pause = Duration::from_millis(1);
    loop {
        match conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0)) {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            other => return other.map_err(backend),
        }
    }
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
