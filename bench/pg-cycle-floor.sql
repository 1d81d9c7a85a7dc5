-- The floor of a write cycle on PostgreSQL, run by pgbench (`-M prepared`) on a schema that
-- purra-postgres migrated, with one `owners` row named `pgbench` (bench-suite's gateway rows):
-- the rows a client-approved write cycle leaves, with the schema's indexes, constraints and
-- triggers, written in the fewest round trips a store could use. Each durable transaction is one
-- statement (its writes in data-modifying CTEs, so no BEGIN or COMMIT goes over the wire), each
-- followed by its notification in a statement of its own, as purra-postgres sends it (`pg_notify`
-- inside the transaction would hold the notification queue's lock through the commit's flush and
-- commit the clients' transactions one after another). No MCP, no gateway, no client library.
--
-- 1. The approval prepared with its run saved: the grant and pending-quota reads, the approval,
--    the suspended run and two audit rows (prepared, run_suspended).
-- 2. The decision with the claim: the approval locked and decided, the claim, two audit rows
--    (decided, claimed).
-- 3. The outcome with the run dropped: the claim's outcome, the run deleted, two audit rows
--    (outcome, run_removed).
-- Sizes are those of the gateway benchmark's cycle: intent 386 bytes, request 976, run 1 500,
-- audit details 145, outcome 78.
\set r random(1, 2000000000)
WITH g AS (
    SELECT count(*) AS n FROM grants
    WHERE principal = 'bench' AND tool = 'note' AND revoked_at_ns IS NULL AND until_ns > 0
      AND used < max_uses
), o AS (
    SELECT count(*) AS n FROM (
        SELECT 1 FROM approvals
        WHERE state = 'prepared' AND principal = 'bench'
          AND coalesce(request_expires_at_ns, 9223372036854775807) > 0
        LIMIT 1000
    ) x
), a AS (
    INSERT INTO approvals (intent_json, intent_digest, tool, run_id, prepared_at_ns, prepared_by,
                           state, request_json, principal)
    SELECT repeat('i', 386), 'sha256:' || md5(:r::text) || md5((:r + 1)::text), 'note',
           'run-' || :r, 1, 'pgbench', 'prepared', repeat('q', 976), 'bench'
    FROM g, o WHERE g.n = 0 AND o.n < 1000
    RETURNING seq
), s AS (
    INSERT INTO suspended_runs (run_id, agent, run_json, saved_at_ns)
    SELECT 'run-' || seq, 'bench', repeat('j', 1500), 1 FROM a
), au AS (
    INSERT INTO audit (at_ns, owner, event, approval_id, claim_key, run_id, detail, op)
    SELECT 1, 'pgbench', e, 'approval-' || seq, NULL, 'run-' || seq, repeat('d', 145),
           'pgbench:' || seq || ':' || e
    FROM a, (VALUES ('prepared'), ('run_suspended')) v(e)
)
SELECT seq FROM a
\gset
SELECT pg_notify('purra_cycle_floor', :seq::text);
WITH cur AS (
    SELECT seq FROM approvals WHERE seq = :seq AND state = 'prepared' FOR UPDATE
), u AS (
    UPDATE approvals p SET state = 'claimed', verdict = 'approve', approver = 'pgbench',
                           decided_at_ns = 2, expires_at_ns = 3
    FROM cur WHERE p.seq = cur.seq
    RETURNING p.seq
), c AS (
    INSERT INTO claims (key, owner, approval_seq, claimed_at_ns)
    SELECT 'sha256:' || seq, 'pgbench', seq, 2 FROM u
    ON CONFLICT (key) DO NOTHING
    RETURNING key, approval_seq
), h AS (
    UPDATE owners SET heartbeat_at_ns = greatest(heartbeat_at_ns, 2)
    WHERE owner = 'pgbench' AND EXISTS (SELECT 1 FROM c) AND heartbeat_at_ns < 2 - lease_ns / 3
), au AS (
    INSERT INTO audit (at_ns, owner, event, approval_id, claim_key, run_id, detail, op)
    SELECT 2, 'pgbench', e, 'approval-' || approval_seq, key, NULL, repeat('d', 145),
           'pgbench:' || approval_seq || ':' || e
    FROM c, (VALUES ('decided'), ('claimed')) v(e)
)
SELECT key FROM c
\gset
SELECT pg_notify('purra_cycle_floor', :key::text);
WITH u AS (
    UPDATE claims SET outcome = 'committed', outcome_json = repeat('o', 78), completed_at_ns = 3
    WHERE key = :key AND outcome_json IS NULL
    RETURNING key
), d AS (
    DELETE FROM suspended_runs WHERE run_id = 'run-' || :seq
), au AS (
    INSERT INTO audit (at_ns, owner, event, approval_id, claim_key, run_id, detail, op)
    SELECT 3, 'pgbench', e, NULL, key, 'run-' || :seq, repeat('d', 145),
           'pgbench:' || :seq || ':' || e
    FROM u, (VALUES ('outcome'), ('run_removed')) v(e)
)
SELECT key AS done FROM u
\gset
SELECT pg_notify('purra_cycle_floor', :done::text);
