-- Schema version 1 of purra-sqlite, as its first migration made it (for the migration test).
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
