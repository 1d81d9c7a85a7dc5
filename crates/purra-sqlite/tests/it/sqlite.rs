//! What only the SQLite store has: WAL and the pragmas, the in-memory store (not durable), and files
//! made by schema versions 1, 2, 3 and 4, migrated in place.

use purra_core::*;
use purra_sqlite::*;
use purra_store_tests::*;
use std::time::Duration;

use crate::support::fresh_db;

#[tokio::test]
async fn wal_pragmas_and_the_in_memory_store() {
    let path = fresh_db("pragmas");
    let store = SqliteStore::open(&path).unwrap();
    let raw = rusqlite::Connection::open(&path).unwrap();
    let mode: String = raw
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    drop(store);

    let memory = SqliteStore::open_in_memory().unwrap();
    assert!(!durable(&memory));
    let id = memory.prepare(request("m")).await.unwrap();
    assert_eq!(id, ApprovalId("approval-1".into()));
    // Events work in memory too (the pump reads through the store's own connection).
    let mut events = memory.subscribe();
    memory
        .decide(id.clone(), decision(Verdict::Approve, None))
        .await
        .unwrap();
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(10), events.next()).await,
        Ok(Some(StoreEvent::Decided {
            id,
            verdict: Verdict::Approve
        }))
    );
}

#[tokio::test]
async fn a_schema_1_file_is_migrated_and_its_approvals_keep_their_intent() {
    let path = fresh_db("v1");
    {
        // What version 1 made: the tables of its first migration, one prepared approval.
        let raw = rusqlite::Connection::open(&path).unwrap();
        raw.execute_batch(include_str!("v1.sql")).unwrap();
        let text = serde_json::to_string(&intent("old")).unwrap();
        raw.execute(
            "INSERT INTO owners (owner, pid, opened_at_ns, heartbeat_at_ns, lease_ns)
             VALUES ('old-owner', 1, 7000000000, 7000000000, 1)",
            [],
        )
        .unwrap();
        raw.execute(
            "INSERT INTO approvals (intent_json, intent_digest, tool, run_id, prepared_at_ns,
                                    prepared_by, state)
             VALUES (?1, ?2, 'update', 'r1', 7000000000, 'old-owner', 'prepared')",
            rusqlite::params![text, intent("old").digest().as_str()],
        )
        .unwrap();
        raw.pragma_update(None, "user_version", 1).unwrap();
    }
    let store = SqliteStore::open(&path).unwrap();
    let id = ApprovalId("approval-1".into());
    let view = store.approval(id.clone()).await.unwrap().unwrap();
    assert_eq!(view.request.intent, intent("old"));
    assert_eq!(view.request.arguments, serde_json::Value::Null);
    assert_eq!(view.request.requested_at, at(7));
    assert_eq!(view.state, ApprovalState::Prepared);
    let noted = Decision {
        note: Some("kept".into()),
        ..decision(Verdict::Approve, None)
    };
    store.decide(id.clone(), noted.clone()).await.unwrap();
    assert_eq!(
        store.record(id).await.unwrap().unwrap().state,
        ApprovalState::Decided(noted)
    );
    assert_eq!(
        store.prepare(request("new")).await,
        Ok(ApprovalId("approval-2".into()))
    );
}

/// A file as schema version 2 left it, with every kind of row a cycle writes: approvals claimed,
/// pending and refused, a claim with an outcome and one in flight of an owner that is gone, a
/// suspended run and a repeated claim in the audit log. Migrated to version 3, every trail, view and
/// claim reads as before, the owner's claim is reconciled, and new rows continue every sequence.
#[tokio::test]
async fn a_schema_2_file_is_migrated_with_every_trail_and_claim_intact() {
    let path = fresh_db("v2");
    let k1 = key_of(&intent("one")).0;
    let k3 = key_of(&intent("three")).0;
    let committed = EffectOutcome::Committed {
        receipt: serde_json::json!({"ok": true}),
    };
    {
        let raw = rusqlite::Connection::open(&path).unwrap();
        raw.execute_batch(include_str!("v1.sql")).unwrap();
        raw.execute_batch(include_str!("v2.sql")).unwrap();
        raw.execute(
            "INSERT INTO owners (owner, pid, opened_at_ns, heartbeat_at_ns, lease_ns)
             VALUES ('old-owner', 1, 7000000000, 7000000000, 1)",
            [],
        )
        .unwrap();
        for (args, state, verdict, expires, refused) in [
            ("one", "claimed", Some("approve"), None, None),
            ("two", "prepared", None, None, None),
            (
                "three",
                "refused",
                Some("approve"),
                Some(9_000_000_000i64),
                Some("expired"),
            ),
        ] {
            raw.execute(
                "INSERT INTO approvals (intent_json, intent_digest, tool, run_id, prepared_at_ns,
                    prepared_by, state, verdict, approver, decided_at_ns, expires_at_ns,
                    refused_reason, request_json)
                 VALUES (?1, ?2, 'update', 'r1', 7000000000, 'old-owner', ?3, ?4,
                    CASE WHEN ?4 IS NULL THEN NULL ELSE 'alice' END,
                    CASE WHEN ?4 IS NULL THEN NULL ELSE 8000000000 END, ?5, ?6, ?7)",
                rusqlite::params![
                    serde_json::to_string(&intent(args)).unwrap(),
                    intent(args).digest().as_str(),
                    state,
                    verdict,
                    expires,
                    refused,
                    serde_json::to_string(&request(args)).unwrap(),
                ],
            )
            .unwrap();
        }
        raw.execute(
            "INSERT INTO claims (key, owner, approval_seq, claimed_at_ns, outcome, outcome_json,
                                 completed_at_ns)
             VALUES (?1, 'old-owner', 1, 8500000000, 'committed', ?2, 8600000000),
                    ('bare', 'old-owner', NULL, 8700000000, NULL, NULL, NULL)",
            rusqlite::params![k1, serde_json::to_string(&committed).unwrap()],
        )
        .unwrap();
        for (event, approval, key, run) in [
            ("prepared", Some("approval-1"), None, Some("r1")),
            ("prepared", Some("approval-2"), None, Some("r1")),
            ("prepared", Some("approval-3"), None, Some("r1")),
            ("decided", Some("approval-1"), None, None),
            ("claimed", Some("approval-1"), Some(k1.as_str()), None),
            ("decided", Some("approval-3"), None, None),
            ("outcome", None, Some(k1.as_str()), None),
            ("refused", Some("approval-3"), Some(k3.as_str()), None),
            ("claimed", None, Some("bare"), None),
            ("run_suspended", Some("approval-2"), None, Some("r1")),
            ("claim_refused", Some("approval-1"), Some(k1.as_str()), None),
        ] {
            raw.execute(
                "INSERT INTO audit (at_ns, owner, event, approval_id, claim_key, run_id, detail)
                 VALUES (8000000000, 'old-owner', ?1, ?2, ?3, ?4, '{}')",
                rusqlite::params![event, approval, key, run],
            )
            .unwrap();
        }
        raw.pragma_update(None, "user_version", 2).unwrap();
    }
    let store = SqliteStore::open(&path).unwrap();
    let trail = |id: &str| {
        let store = store.clone();
        let id = ApprovalId(id.into());
        async move {
            store
                .approval_audit(id)
                .await
                .unwrap()
                .into_iter()
                .map(|e| (e.seq, e.event))
                .collect::<Vec<_>>()
        }
    };
    let s = |rows: &[(i64, &str)]| {
        rows.iter()
            .map(|(seq, e)| (*seq, e.to_string()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        trail("approval-1").await,
        s(&[
            (1, "prepared"),
            (4, "decided"),
            (5, "claimed"),
            (7, "outcome"),
            (11, "claim_refused")
        ])
    );
    assert_eq!(
        trail("approval-2").await,
        s(&[(2, "prepared"), (10, "run_suspended")])
    );
    assert_eq!(
        trail("approval-3").await,
        s(&[(3, "prepared"), (6, "decided"), (8, "refused")])
    );
    let one = store
        .approval(ApprovalId("approval-1".into()))
        .await
        .unwrap()
        .unwrap();
    let claim = one.claim.unwrap();
    assert_eq!(claim.key.0, k1);
    assert_eq!(
        claim.state,
        ClaimState::Completed {
            outcome: committed.clone()
        }
    );
    let three = store
        .approval(ApprovalId("approval-3".into()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(three.claim, None);
    assert!(matches!(three.state, ApprovalState::Refused(_)));
    assert_eq!(
        store.state(IdempotencyKey("bare".into())).await,
        Ok(Some(ClaimState::InFlight))
    );
    // The gone owner's claim in flight is found and settled through its new key.
    let report = store
        .reconcile_interrupted_claims(std::time::SystemTime::now())
        .await
        .unwrap();
    assert_eq!(report.interrupted, vec![IdempotencyKey("bare".into())]);

    // New rows continue every sequence; the pending approval claims with the next claim key.
    let two = ApprovalId("approval-2".into());
    store
        .decide(two.clone(), decision(Verdict::Approve, None))
        .await
        .unwrap();
    let Ok(ClaimVerdict::Claimed(key)) = store
        .check_and_claim(
            two.clone(),
            intent("two").digest(),
            std::time::SystemTime::now(),
        )
        .await
    else {
        panic!("approval-2 claims")
    };
    store
        .complete(key.clone(), EffectOutcome::NotStarted)
        .await
        .unwrap();
    let events: Vec<String> = trail("approval-2")
        .await
        .into_iter()
        .map(|(_, e)| e)
        .collect();
    assert_eq!(
        events,
        ["prepared", "run_suspended", "decided", "claimed", "outcome"]
    );
    let log = store.audit(0, 100).await.unwrap();
    let seqs: Vec<i64> = log.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=seqs.len() as i64).collect::<Vec<_>>());
    assert_eq!(log[10].event, "claim_refused");
    assert_eq!(
        store.prepare(request("four")).await,
        Ok(ApprovalId("approval-4".into()))
    );
    drop(store);

    let raw = rusqlite::Connection::open(&path).unwrap();
    let version: i64 = raw
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, 16);
    let claim_seqs: Vec<(i64, String)> = raw
        .prepare("SELECT seq, key FROM claims ORDER BY seq")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        claim_seqs,
        vec![(1, k1.clone()), (2, "bare".into()), (3, key.0.clone())]
    );
    let autoincrement: i64 = raw
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE sql LIKE '%AUTOINCREMENT%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(autoincrement, 0);
    assert!(raw
        .execute("UPDATE audit SET event = 'forged' WHERE seq = 1", [])
        .unwrap_err()
        .to_string()
        .contains("append-only"));
    assert!(raw
        .execute("DELETE FROM audit WHERE seq = 1", [])
        .unwrap_err()
        .to_string()
        .contains("append-only"));
}

/// A file as schema version 3 left it, with approvals pending (one of them labelled with a
/// principal by a host, which version 3 never read) and decided. Migrated to version 4: the new
/// column is empty for every old row, the open approvals of a principal are counted through the
/// new index from the first labelled approval prepared after, the old ones page newest first as
/// before, and new rows continue the sequence.
#[tokio::test]
async fn a_schema_3_file_is_migrated_and_counts_principals_from_then_on() {
    let path = fresh_db("v3");
    {
        let raw = rusqlite::Connection::open(&path).unwrap();
        raw.execute_batch(include_str!("v1.sql")).unwrap();
        raw.execute_batch(include_str!("v2.sql")).unwrap();
        raw.execute_batch(include_str!("v3.sql")).unwrap();
        raw.execute(
            "INSERT INTO owners (owner, pid, opened_at_ns, heartbeat_at_ns, lease_ns)
             VALUES ('old-owner', 1, 7000000000, 7000000000, 1)",
            [],
        )
        .unwrap();
        let mut labelled = request("two");
        labelled
            .labels
            .insert(PRINCIPAL_LABEL.into(), "local".into());
        for (args, req, state) in [
            ("one", request("one"), "prepared"),
            ("two", labelled, "prepared"),
            ("three", request("three"), "decided"),
        ] {
            let decided = state == "decided";
            raw.execute(
                "INSERT INTO approvals (intent_json, intent_digest, tool, run_id, prepared_at_ns,
                    prepared_by, state, verdict, approver, decided_at_ns, request_json)
                 VALUES (?1, ?2, 'update', 'r1', 7000000000, 'old-owner', ?3, ?4, ?5, ?6, ?7)",
                rusqlite::params![
                    serde_json::to_string(&intent(args)).unwrap(),
                    intent(args).digest().as_str(),
                    state,
                    decided.then_some("deny"),
                    decided.then_some("alice"),
                    decided.then_some(8_000_000_000i64),
                    serde_json::to_string(&req).unwrap(),
                ],
            )
            .unwrap();
        }
        raw.pragma_update(None, "user_version", 3).unwrap();
    }
    let store = SqliteStore::open(&path).unwrap();
    let ids = |views: &[ApprovalView]| views.iter().map(|v| v.id.0.clone()).collect::<Vec<_>>();
    let pending = ApprovalQuery::all()
        .status(ApprovalStatus::Pending)
        .newest_first();
    let page = store.approval_page(pending.clone().limit(1)).await.unwrap();
    assert_eq!(ids(&page.approvals), ["approval-2"]);
    assert_eq!(page.next, Some(ApprovalId("approval-2".into())));
    assert_eq!(store.count_approvals(pending.clone()).await, Ok(2));
    let history = store
        .approval_page(ApprovalQuery::all().decided().newest_first())
        .await
        .unwrap();
    assert_eq!(
        (ids(&history.approvals), history.next),
        (vec!["approval-3".to_owned()], None)
    );
    let now = std::time::SystemTime::now();
    let open = ApprovalQuery::all().principal("local").open_at(now);
    // The labelled approval of version 3 has no principal column: it does not count.
    assert_eq!(store.count_approvals(open.clone()).await, Ok(0));
    let mut asked = request("four");
    asked.labels.insert(PRINCIPAL_LABEL.into(), "local".into());
    assert_eq!(
        store.prepare_within(asked.clone(), 1, now).await,
        Ok(Some(ApprovalId("approval-4".into())))
    );
    asked.arguments = serde_json::json!("five");
    asked.intent = intent("five");
    assert_eq!(store.prepare_within(asked, 1, now).await, Ok(None));
    assert_eq!(store.count_approvals(open).await, Ok(1));
    assert_eq!(store.count_approvals(pending).await, Ok(3));
    drop(store);

    let raw = rusqlite::Connection::open(&path).unwrap();
    let version: i64 = raw
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, 16);
    let principals: Vec<(i64, Option<String>)> = raw
        .prepare("SELECT seq, principal FROM approvals ORDER BY seq")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        principals,
        [
            (1, None),
            (2, None),
            (3, None),
            (4, Some("local".to_owned()))
        ]
    );
    let index: i64 = raw
        .query_row(
            "SELECT count(*) FROM sqlite_master
             WHERE type = 'index' AND name = 'approvals_open_by_principal'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(index, 1);
}

/// Every row of `table` in `path`, in key order, as SQLite values.
fn dump(path: &std::path::Path, table: &str) -> Vec<Vec<rusqlite::types::Value>> {
    let raw = rusqlite::Connection::open(path).unwrap();
    let mut stmt = raw
        .prepare(&format!("SELECT * FROM {table} ORDER BY rowid"))
        .unwrap();
    let n = stmt.column_count();
    stmt.query_map([], |r| (0..n).map(|i| r.get(i)).collect())
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// A file as schema version 4 left it, with every kind of row (approvals pending with a
/// principal, decided, claimed with a committed and an unknown outcome, refused; a bare claim; a
/// suspended run; the owners and the audit log). Version 5 only adds the outbox's two tables, so
/// the file is made by this build's store and then put back to version 4 by dropping them, which
/// leaves exactly what version 4 wrote. Migrated to version 5: every row of every table is as it
/// was, the outbox is empty, and from the first endpoint registered the old approvals' decisions
/// and outcomes are reported with what version 4 stored (the principal column).
#[tokio::test]
async fn a_schema_4_file_is_migrated_with_every_row_intact_and_reports_from_then_on() {
    let path = fresh_db("v4");
    {
        let store = SqliteStore::open(&path).unwrap();
        let mut asked = request("one");
        asked.labels.insert(PRINCIPAL_LABEL.into(), "local".into());
        let one = store
            .prepare_within(asked, 16, at(1))
            .await
            .unwrap()
            .unwrap();
        let two = store.prepare(request("two")).await.unwrap();
        store
            .decide(two.clone(), decision(Verdict::Approve, None))
            .await
            .unwrap();
        let ClaimVerdict::Claimed(k2) = store
            .check_and_claim(two.clone(), intent("two").digest(), at(20))
            .await
            .unwrap()
        else {
            panic!("not claimed")
        };
        store
            .complete(
                k2,
                EffectOutcome::Committed {
                    receipt: serde_json::json!({"ok": 1}),
                },
            )
            .await
            .unwrap();
        let three = store.prepare(request("three")).await.unwrap();
        store
            .decide(three.clone(), decision(Verdict::Approve, None))
            .await
            .unwrap();
        let ClaimVerdict::Claimed(k3) = store
            .check_and_claim(three.clone(), intent("three").digest(), at(20))
            .await
            .unwrap()
        else {
            panic!("not claimed")
        };
        store
            .save_suspended(suspended_run(&three, "three"))
            .await
            .unwrap();
        store.complete(k3, unknown("mcp_timeout")).await.unwrap();
        let four = store.prepare(request("four")).await.unwrap();
        store
            .decide(four.clone(), decision(Verdict::Approve, Some(at(15))))
            .await
            .unwrap();
        assert_eq!(
            store
                .check_and_claim(four, intent("four").digest(), at(20))
                .await,
            Ok(ClaimVerdict::Expired)
        );
        store.claim(IdempotencyKey("bare".into())).await.unwrap();
        assert_eq!(one, ApprovalId("approval-1".into()));
    }
    {
        let raw = rusqlite::Connection::open(&path).unwrap();
        raw.execute_batch(
            "DROP TABLE idempotent_results; DROP TABLE resends; DROP INDEX claims_unknown;
             DROP TABLE tool_pins; DROP TABLE catalog_changes;
             DROP TABLE grant_uses; DROP TABLE grants; DROP TABLE mcp_tasks;
             DROP TABLE approval_votes; DROP TABLE approval_rules;
             DROP TABLE credentials; DROP TABLE webhook_outbox; DROP TABLE webhook_subscriptions;
             DROP TABLE http_session_streams; DROP TABLE http_session_events; DROP TABLE http_sessions;
             DROP TABLE http_session_changes;
             DROP INDEX approvals_decided;
             PRAGMA user_version = 4;",
        )
        .unwrap();
    }
    let tables = ["owners", "approvals", "claims", "suspended_runs", "audit"];
    let before: Vec<_> = tables.iter().map(|t| dump(&path, t)).collect();
    let store = SqliteStore::open(&path).unwrap();
    let raw = rusqlite::Connection::open(&path).unwrap();
    let version: i64 = raw
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, 16);
    for (table, rows) in tables.iter().zip(&before) {
        let after = dump(&path, table);
        // Opening adds this store's owner and its `opened` row; nothing else changed.
        let added = usize::from(matches!(*table, "owners" | "audit"));
        assert_eq!(after.len(), rows.len() + added, "{table}");
        assert_eq!(&after[..rows.len()], &rows[..], "{table}");
    }
    assert!(!before[4].is_empty() && before[2].len() == 3);
    assert_eq!(
        WebhookOutbox::webhook_deliveries(&store, WebhookQuery::all()).await,
        Ok(vec![])
    );
    store
        .set_webhook_endpoints(vec![WebhookEndpoint {
            name: "ops".into(),
            events: WebhookEventType::ALL.to_vec(),
        }])
        .await
        .unwrap();
    store
        .decide(
            ApprovalId("approval-1".into()),
            decision(Verdict::Deny, None),
        )
        .await
        .unwrap();
    let views = store.webhook_deliveries(WebhookQuery::all()).await.unwrap();
    assert_eq!(views.len(), 1);
    let data: serde_json::Value = serde_json::from_str(&views[0].payload).unwrap();
    assert_eq!(
        (
            &data["type"],
            &data["data"]["approval"],
            &data["data"]["principal"]
        ),
        (
            &serde_json::json!("approval.decided"),
            &serde_json::json!("approval-1"),
            &serde_json::json!("local")
        )
    );
}

/// The suspended run of approval `id` for the call with arguments `args`.
fn suspended_run(id: &ApprovalId, args: &str) -> SuspendedRun {
    SuspendedRun {
        run_id: RunId::new("r1"),
        root_run_id: RunId::new("r1"),
        agent: "agent".into(),
        turns_used: 1,
        waiting_until: None,
        transcript: vec![],
        pending_call: ToolCall {
            id: "c1".into(),
            name: "update".into(),
            arguments: serde_json::json!(args),
        },
        approval_id: id.clone(),
        intent_digest: intent(args).digest(),
        preset_fingerprint: json_identity(&serde_json::json!("preset")).unwrap(),
    }
}

/// The plan SQLite picks for `sql` on the file at `path`, its lines joined.
fn plan(path: &std::path::Path, sql: &str) -> String {
    let raw = rusqlite::Connection::open(path).unwrap();
    let mut stmt = raw.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
    let rows = stmt.query_map([], |r| r.get::<_, String>(3)).unwrap();
    rows.map(Result::unwrap).collect::<Vec<_>>().join("; ")
}

/// Issue 50, the store at scale: the history (decided approvals, newest first, one page) reads
/// the index of decided approvals (schema 15), never stepping over the pending approvals newer
/// than its decisions; a count up to a bound reads at most that many rows of an index or the
/// table (the statements as the store writes them).
#[tokio::test]
async fn the_history_reads_the_index_of_decided_approvals() {
    let path = fresh_db("decided-index");
    let store = SqliteStore::open(&path).unwrap();
    drop(store);
    assert_eq!(
        plan(
            &path,
            "SELECT a.seq, a.state, c.key FROM approvals a LEFT JOIN claims c ON c.seq = a.claim_seq
             WHERE a.seq > 0 AND a.state <> 'prepared' ORDER BY a.seq DESC LIMIT 51"
        ),
        "SEARCH a USING INDEX approvals_decided (seq>?); \
         SEARCH c USING INTEGER PRIMARY KEY (rowid=?) LEFT-JOIN"
    );
    assert_eq!(
        plan(
            &path,
            "SELECT count(*) FROM (SELECT 1 FROM approvals a
             WHERE a.seq > 0 AND a.seq < 9 AND a.state = 'prepared' LIMIT 1001)"
        ),
        "CO-ROUTINE (subquery-1); SEARCH a USING COVERING INDEX approvals_pending (seq>? AND seq<?); \
         SCAN (subquery-1)"
    );
}
