-- Schema version 2 of purra-sqlite: its second migration, applied after v1.sql (for the migration test).
ALTER TABLE approvals ADD COLUMN request_json TEXT;
ALTER TABLE approvals ADD COLUMN request_expires_at_ns INTEGER;
ALTER TABLE approvals ADD COLUMN note TEXT;
CREATE INDEX approvals_by_run ON approvals(run_id);
CREATE INDEX audit_by_approval ON audit(approval_id) WHERE approval_id IS NOT NULL;
CREATE INDEX audit_by_claim ON audit(claim_key) WHERE claim_key IS NOT NULL;
CREATE INDEX claims_by_approval ON claims(approval_seq);
