-- Schema version 3 of purra-sqlite: its third migration, applied after v2.sql (for the migration test).
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
