//! Versioned schema migrations, all inside the store's own PostgreSQL schema.
//!
//! Migration N (1-based) is the N-th entry of [`MIGRATIONS`]; migrations run in one transaction that
//! first takes a transaction-scoped advisory lock on the schema's name, so hosts starting together
//! migrate once. The version is the one row of `schema_version`; a schema whose version is newer than
//! this build knows is refused, never downgraded.

use tokio_postgres::Client;

/// Schema version 1: owners (leases), approvals (with the whole request and the decision's note),
/// claims, suspended runs, and the audit log (append-only by triggers; every row notifies listeners).
const V1: &str = r#"
CREATE FUNCTION now_ns() RETURNS BIGINT LANGUAGE sql VOLATILE
    AS $$ SELECT (extract(epoch FROM clock_timestamp()) * 1000000000)::BIGINT $$;

CREATE TABLE owners (
    owner           TEXT PRIMARY KEY,
    pid             BIGINT NOT NULL,
    opened_at_ns    BIGINT NOT NULL,
    heartbeat_at_ns BIGINT NOT NULL,
    lease_ns        BIGINT NOT NULL CHECK (lease_ns > 0),
    closed_at_ns    BIGINT
);

CREATE TABLE approvals (
    seq                   BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    intent_json           TEXT NOT NULL,
    intent_digest         TEXT NOT NULL,
    tool                  TEXT NOT NULL,
    run_id                TEXT NOT NULL,
    prepared_at_ns        BIGINT NOT NULL,
    prepared_by           TEXT NOT NULL REFERENCES owners(owner),
    request_json          TEXT NOT NULL,
    request_expires_at_ns BIGINT,
    state                 TEXT NOT NULL CHECK (state IN ('prepared', 'decided', 'claimed', 'refused')),
    verdict               TEXT CHECK (verdict IN ('approve', 'deny')),
    approver              TEXT,
    decided_at_ns         BIGINT,
    expires_at_ns         BIGINT,
    note                  TEXT,
    refused_reason        TEXT CHECK (refused_reason IN ('expired', 'mismatch')),
    CHECK ((state = 'prepared') = (verdict IS NULL)),
    CHECK ((verdict IS NULL) = (approver IS NULL) AND (verdict IS NULL) = (decided_at_ns IS NULL)),
    CHECK ((state = 'refused') = (refused_reason IS NOT NULL))
);
CREATE INDEX approvals_by_state ON approvals(state, seq);
CREATE INDEX approvals_by_run ON approvals(run_id, seq);

CREATE TABLE claims (
    key             TEXT PRIMARY KEY,
    owner           TEXT NOT NULL REFERENCES owners(owner),
    approval_seq    BIGINT REFERENCES approvals(seq),
    claimed_at_ns   BIGINT NOT NULL,
    outcome         TEXT CHECK (outcome IN ('committed', 'not_started', 'unknown')),
    outcome_json    TEXT,
    completed_at_ns BIGINT,
    CHECK ((outcome IS NULL) = (outcome_json IS NULL) AND (outcome IS NULL) = (completed_at_ns IS NULL))
);
CREATE INDEX claims_in_flight ON claims(owner) WHERE outcome IS NULL;
CREATE INDEX claims_by_approval ON claims(approval_seq);

CREATE TABLE suspended_runs (
    run_id      TEXT PRIMARY KEY,
    agent       TEXT NOT NULL,
    run_json    TEXT NOT NULL,
    saved_at_ns BIGINT NOT NULL
);

CREATE TABLE audit (
    seq         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at_ns       BIGINT NOT NULL,
    owner       TEXT NOT NULL,
    event       TEXT NOT NULL,
    approval_id TEXT,
    claim_key   TEXT,
    run_id      TEXT,
    detail      TEXT NOT NULL,
    op          TEXT
);
CREATE INDEX audit_by_approval ON audit(approval_id) WHERE approval_id IS NOT NULL;
CREATE INDEX audit_by_claim ON audit(claim_key) WHERE claim_key IS NOT NULL;
CREATE INDEX audit_by_op ON audit(op) WHERE op IS NOT NULL;

CREATE FUNCTION audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'the audit log is append-only'; END $$;
CREATE TRIGGER audit_no_update_or_delete BEFORE UPDATE OR DELETE ON audit
    FOR EACH ROW EXECUTE FUNCTION audit_append_only();
CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON audit
    FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only();

CREATE FUNCTION audit_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('purra:' || TG_TABLE_SCHEMA, json_build_object(
        'seq', NEW.seq, 'event', NEW.event, 'approval', NEW.approval_id, 'key', NEW.claim_key,
        'verdict', CASE WHEN NEW.event = 'decided' THEN NEW.detail::json->>'verdict' END)::text);
    RETURN NULL;
END $$;
CREATE TRIGGER audit_notify AFTER INSERT ON audit FOR EACH ROW EXECUTE FUNCTION audit_notify();
"#;

/// Schema version 2: the principal an approval was asked for (its request's `principal` label,
/// written by `prepare`; `NULL` for approvals prepared before and for requests without the label),
/// and `approvals_open_by_principal`, a partial index of the pending approvals that name one, by
/// principal and request expiry (a request without one sorts as never expiring), so a principal's
/// open approvals are counted by a seek that reads only them. Adding a column without a default
/// rewrites nothing.
const V2: &str = r#"
ALTER TABLE approvals ADD COLUMN principal TEXT;
CREATE INDEX approvals_open_by_principal
    ON approvals (principal, (coalesce(request_expires_at_ns, 9223372036854775807)),
                  request_expires_at_ns)
    WHERE state = 'prepared' AND principal IS NOT NULL;
"#;

/// Schema version 3: the webhook outbox, as purra-sqlite's schema 5: `webhook_subscriptions`
/// (one row per registered endpoint and event type, keyed by the type; empty unless endpoints
/// are registered, so a write without them changes nothing more) and `webhook_outbox` (each
/// undelivered delivery with its `webhook-id`, payload, attempts, due instant on the database's
/// clock, last claimant and last failure; deleted when delivered, kept `failed` when given up),
/// with `webhook_outbox_due`, a partial index of the pending deliveries by endpoint and due
/// instant. Keys come from an identity column, never reused. Nothing existing is touched.
const V3: &str = r#"
CREATE TABLE webhook_subscriptions (
    event    TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    PRIMARY KEY (event, endpoint)
);
CREATE TABLE webhook_outbox (
    seq           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    msg_id        TEXT NOT NULL,
    endpoint      TEXT NOT NULL,
    event         TEXT NOT NULL,
    payload       TEXT NOT NULL,
    created_at_ns BIGINT NOT NULL,
    state         TEXT NOT NULL CHECK (state IN ('pending', 'failed')),
    attempts      INTEGER NOT NULL CHECK (attempts >= 0),
    next_at_ns    BIGINT NOT NULL,
    leased_by     TEXT,
    last_status   INTEGER,
    last_error    TEXT
);
CREATE INDEX webhook_outbox_due ON webhook_outbox (endpoint, next_at_ns, seq) WHERE state = 'pending';
"#;

/// Schema version 4: each principal's upstream credentials, as purra-sqlite's schema 6: one row
/// per principal, upstream and name, holding only the sealed secret (opaque here), what may be
/// shown of it, and its version for compare-and-swap; `credentials_by_upstream` serves listings by
/// upstream. Nothing existing is touched. Like every migration it runs under the schema's advisory
/// lock, so instances starting together create the table once.
const V4: &str = r#"
CREATE TABLE credentials (
    principal       TEXT NOT NULL,
    upstream        TEXT NOT NULL,
    name            TEXT NOT NULL,
    kind            TEXT NOT NULL CHECK (kind IN ('oauth', 'secret')),
    sealed          BYTEA NOT NULL,
    issuer          TEXT,
    scopes          TEXT,
    subject         TEXT,
    expires_at_ns   BIGINT,
    created_at_ns   BIGINT NOT NULL,
    updated_at_ns   BIGINT NOT NULL,
    last_used_at_ns BIGINT,
    version         BIGINT NOT NULL CHECK (version > 0),
    PRIMARY KEY (principal, upstream, name)
);
CREATE INDEX credentials_by_upstream ON credentials (upstream, principal, name);
"#;

/// Schema version 5 (idempotency keys, issue 46): a purra server's idempotent results, as
/// purra-sqlite's schema 7: one row per key with the digest of the request it began for, when, and
/// its result (`NULL` while it runs); `idempotent_results_by_age` serves the sweep by age and the
/// eviction of the oldest finished key. Nothing existing is touched.
const V5_IDEMPOTENT_RESULTS: &str = r#"
CREATE TABLE idempotent_results (
    key         TEXT PRIMARY KEY,
    request     TEXT NOT NULL,
    began_at_ns BIGINT NOT NULL,
    result      TEXT
);
CREATE INDEX idempotent_results_by_age ON idempotent_results (began_at_ns);
"#;

// ---- Issue 46, reconciling `unknown` effects (one schema step of its own) ----

/// Schema version 6: the resend of an `unknown` effect, as purra-sqlite's schema 8: one row per
/// claim at most (keyed by the claim's key), so a resend is claimed once whichever instance asks.
/// `claims_unknown` (the claims whose outcome is `unknown`) and `claims_by_time` serve the
/// operator's listings newest first, a page at a time, whatever the history. Nothing existing is
/// rewritten.
const V6_EFFECTS: &str = r#"
CREATE TABLE resends (
    key             TEXT PRIMARY KEY REFERENCES claims(key),
    by_who          TEXT NOT NULL,
    owner           TEXT NOT NULL,
    at_ns           BIGINT NOT NULL,
    outcome_json    TEXT,
    completed_at_ns BIGINT,
    CHECK ((outcome_json IS NULL) = (completed_at_ns IS NULL))
);
CREATE INDEX claims_unknown ON claims (claimed_at_ns, key) WHERE outcome = 'unknown';
CREATE INDEX claims_by_time ON claims (claimed_at_ns, key);
"#;

/// Schema version 7 ("catalog pins", issue 46), as purra-sqlite's: each bound upstream tool's pinned
/// definition, and the catalog changes waiting for or decided by an operator, one per distinct
/// difference (`UNIQUE`), so a fleet's instances seeing the same difference find one row.
const V7_CATALOG_PINS: &str = r#"
CREATE TABLE tool_pins (
    upstream        TEXT NOT NULL,
    tool            TEXT NOT NULL,
    definition      TEXT NOT NULL,
    digest          TEXT NOT NULL,
    pinned_by       TEXT NOT NULL,
    pinned_at_ns    BIGINT NOT NULL,
    PRIMARY KEY (upstream, tool)
);

CREATE TABLE catalog_changes (
    seq             BIGSERIAL PRIMARY KEY,
    upstream        TEXT NOT NULL,
    tool            TEXT NOT NULL,
    kind            TEXT NOT NULL CHECK (kind IN ('changed', 'removed')),
    old_definition  TEXT NOT NULL,
    old_digest      TEXT NOT NULL,
    new_definition  TEXT,
    new_digest      TEXT NOT NULL,
    state           TEXT NOT NULL CHECK (state IN ('pending', 'approved', 'denied')),
    seen_by         TEXT NOT NULL,
    seen_at_ns      BIGINT NOT NULL,
    decided_by      TEXT,
    decided_at_ns   BIGINT,
    note            TEXT,
    CHECK ((kind = 'removed') = (new_definition IS NULL)),
    CHECK ((state = 'pending') = (decided_by IS NULL)),
    UNIQUE (upstream, tool, old_digest, new_digest)
);
CREATE INDEX catalog_changes_pending ON catalog_changes (state, seq);
"#;

// ---- Issue 47, standing grants (one schema step of its own) ----

/// Schema version 8: standing grants, as purra-sqlite's schema 10: `used` never passes `max_uses`
/// (a use is one conditional `UPDATE`, which PostgreSQL serializes on the grant's row across
/// every instance, in the transaction that prepares and approves the call's approval);
/// `grant_uses` lists each use with its approval. Nothing existing is touched.
const V8_GRANTS: &str = r#"
CREATE TABLE grants (
    seq           BIGSERIAL PRIMARY KEY,
    principal     TEXT NOT NULL,
    tool          TEXT NOT NULL,
    rules_json    TEXT NOT NULL,
    max_uses      BIGINT NOT NULL CHECK (max_uses > 0),
    used          BIGINT NOT NULL DEFAULT 0,
    until_ns      BIGINT NOT NULL,
    granted_by    TEXT NOT NULL,
    granted_at_ns BIGINT NOT NULL,
    note          TEXT,
    revoked_at_ns BIGINT,
    revoked_by    TEXT,
    CHECK (used >= 0 AND used <= max_uses)
);
CREATE INDEX grants_by_principal ON grants (principal, tool) WHERE revoked_at_ns IS NULL;
CREATE TABLE grant_uses (
    grant_seq   BIGINT NOT NULL REFERENCES grants(seq),
    approval_id TEXT NOT NULL,
    at_ns       BIGINT NOT NULL,
    PRIMARY KEY (grant_seq, approval_id)
);
"#;

// ---- Issue 47, held writes as MCP tasks (one schema step of its own) ----

/// Schema version 9: MCP tasks kept for a fleet, as purra-sqlite's schema 11: one row per task,
/// its owner, creation and expiry (milliseconds) and whether it ended; the body is the server's
/// JSON. Nothing existing is touched.
const V9_TASKS: &str = r#"
CREATE TABLE mcp_tasks (
    id          TEXT PRIMARY KEY,
    owner       TEXT NOT NULL,
    created_ms  BIGINT NOT NULL,
    expires_ms  BIGINT NOT NULL,
    terminal    BOOLEAN NOT NULL DEFAULT FALSE,
    body        TEXT NOT NULL
);
CREATE INDEX mcp_tasks_by_owner ON mcp_tasks (owner, created_ms, id);
CREATE INDEX mcp_tasks_by_expiry ON mcp_tasks (expires_ms);
"#;

// ---- Issue 47, quorum, escalation and expiry (one schema step of its own) ----

/// Schema version 10: approval workflows, as purra-sqlite's schema 12: the rules an approval was
/// prepared with (`approval_rules`, timers cleared once decided) and its votes, one per voter
/// (the primary key). A vote locks the approval's row first, so concurrent votes are counted in
/// turn. Nothing existing is touched.
const V10_WORKFLOW: &str = r#"
CREATE TABLE approval_rules (
    approval_seq    BIGINT PRIMARY KEY REFERENCES approvals(seq),
    votes_required  BIGINT CHECK (votes_required > 0),
    escalate_at_ns  BIGINT,
    escalated_at_ns BIGINT,
    deny_at_ns      BIGINT
);
CREATE INDEX approval_rules_escalate ON approval_rules (escalate_at_ns)
    WHERE escalate_at_ns IS NOT NULL AND escalated_at_ns IS NULL;
CREATE INDEX approval_rules_deny ON approval_rules (deny_at_ns) WHERE deny_at_ns IS NOT NULL;
CREATE TABLE approval_votes (
    approval_seq BIGINT NOT NULL REFERENCES approvals(seq),
    voter        TEXT NOT NULL,
    approver     TEXT NOT NULL,
    verdict      TEXT NOT NULL CHECK (verdict IN ('approve', 'deny')),
    at_ns        BIGINT NOT NULL,
    note         TEXT,
    PRIMARY KEY (approval_seq, voter)
);
"#;

// ---- Issue 48, sessions that outlive an instance (one schema step of its own) ----

/// Schema version 11: Streamable HTTP sessions, as purra-sqlite's schema 13 (purra-protocol's
/// `SessionStore`, feature `sessions`): each session's owner, state (JSON) and last-seen time,
/// and its SSE events' bounded log. Nothing existing is touched.
const V11_HTTP_SESSIONS: &str = r#"
CREATE TABLE http_sessions (
    id           TEXT PRIMARY KEY,
    owner        TEXT,
    state        TEXT NOT NULL,
    last_seen_ns BIGINT NOT NULL
);
CREATE INDEX http_sessions_by_last_seen ON http_sessions (last_seen_ns);
CREATE TABLE http_session_events (
    seq     BIGSERIAL PRIMARY KEY,
    session TEXT NOT NULL,
    stream  BIGINT NOT NULL,
    num     BIGINT NOT NULL,
    data    BYTEA NOT NULL,
    at_ns   BIGINT NOT NULL
);
CREATE INDEX http_session_events_by_stream ON http_session_events (session, stream, num);
"#;

/// Schema version 12: running requests' streams of Streamable HTTP sessions, as purra-sqlite's
/// schema 14: the request, the process holding it and its lease, so another instance takes a
/// stream over once that lease ran out. Gone with the session. Nothing existing is touched.
const V12_HTTP_SESSION_STREAMS: &str = r#"
CREATE TABLE http_session_streams (
    session        TEXT NOT NULL,
    stream         BIGINT NOT NULL,
    request        TEXT NOT NULL,
    holder         TEXT NOT NULL,
    lease_until_ns BIGINT NOT NULL,
    PRIMARY KEY (session, stream)
);
"#;

/// Schema version 13, notifications after the commit: the audit log's trigger no longer
/// notifies inside the transaction (PostgreSQL holds one database-wide lock on its notification
/// queue from a notifying transaction's pre-commit through its commit record's flush, so
/// notifying transactions commit one after another); the store notifies the rows it committed
/// itself, right after the commit, in one statement of their own.
const V13_NOTIFY_AFTER_COMMIT: &str = r#"
DROP TRIGGER IF EXISTS audit_notify ON audit;
DROP FUNCTION IF EXISTS audit_notify();
"#;

/// Schema version 14, the store at scale (issue 50): an index of the decided approvals, as
/// purra-sqlite's schema 15, so the history reads one page of it whatever the number of pending
/// approvals newer than its decisions.
const V14_DECIDED: &str = r#"
CREATE INDEX approvals_decided ON approvals(seq) WHERE state <> 'prepared';
"#;

/// Schema version 15: a notification on the schema's channel each time a Streamable HTTP
/// session is ended (deleted, by `DELETE` or idle expiry) or saved with another state or owner,
/// so every instance's listener counts it (`SessionStore::sessions_version`): an instance that
/// holds a session serves its requests without reading it until one arrives. A new session and a
/// last-seen time do not notify. Sent inside the ending or changing transaction (rare: not one a
/// request makes), so it is delivered when that commits.
const V15_HTTP_SESSION_NOTIFY: &str = r#"
CREATE FUNCTION http_session_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('purra:' || TG_TABLE_SCHEMA, '{"event":"http_session"}');
    RETURN NULL;
END $$;
CREATE TRIGGER http_sessions_ended AFTER DELETE ON http_sessions
    FOR EACH ROW EXECUTE FUNCTION http_session_notify();
CREATE TRIGGER http_sessions_changed AFTER UPDATE OF owner, state ON http_sessions
    FOR EACH ROW
    WHEN (old.state IS DISTINCT FROM new.state OR old.owner IS DISTINCT FROM new.owner)
    EXECUTE FUNCTION http_session_notify();
"#;

/// Every migration, in order; the schema version of a migrated database is `MIGRATIONS.len()`.
pub(crate) const MIGRATIONS: &[&str] = &[
    V1,
    V2,
    V3,
    V4,
    V5_IDEMPOTENT_RESULTS,
    V6_EFFECTS,
    V7_CATALOG_PINS,
    V8_GRANTS,
    V9_TASKS,
    V10_WORKFLOW,
    V11_HTTP_SESSIONS,
    V12_HTTP_SESSION_STREAMS,
    V13_NOTIFY_AFTER_COMMIT,
    V14_DECIDED,
    V15_HTTP_SESSION_NOTIFY,
];

/// Why migrating failed.
pub(crate) enum MigrateError {
    /// The database said no.
    Db(tokio_postgres::Error),
    /// The schema is newer than this build.
    Newer(i64),
}

impl From<tokio_postgres::Error> for MigrateError {
    fn from(e: tokio_postgres::Error) -> Self {
        MigrateError::Db(e)
    }
}

/// Creates the schema if needed and brings it up to date, refusing a newer one. `schema` is a plain
/// identifier (checked by the caller).
pub(crate) async fn migrate(client: &mut Client, schema: &str) -> Result<(), MigrateError> {
    let tx = client.transaction().await?;
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtext($1))",
        &[&format!("purra:{schema}")],
    )
    .await?;
    tx.batch_execute(&format!(
        "CREATE SCHEMA IF NOT EXISTS \"{schema}\";
         SET LOCAL search_path TO \"{schema}\";
         CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL);"
    ))
    .await?;
    let row = tx
        .query_opt("SELECT version FROM schema_version", &[])
        .await?;
    let version: i64 = match row {
        Some(row) => row.get(0),
        None => {
            tx.execute("INSERT INTO schema_version (version) VALUES (0)", &[])
                .await?;
            0
        }
    };
    let known = MIGRATIONS.len() as i64;
    if version > known || version < 0 {
        return Err(MigrateError::Newer(version));
    }
    for (idx, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        tx.batch_execute(sql).await?;
        tx.execute(
            "UPDATE schema_version SET version = $1",
            &[&(idx as i64 + 1)],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(())
}
