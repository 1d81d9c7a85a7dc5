//! A schema as version 2 left it, migrated to version 3 (the webhook outbox) with every row
//! intact, against the test command's PostgreSQL server (`PURRA_TEST_POSTGRES`; the test fails,
//! never skips, without it).

use purra_core::*;
use purra_store_tests::*;
use serde_json::json;

use crate::support::{open, raw};

/// Every row of `table`, as JSON text, in `order`.
async fn dump(client: &tokio_postgres::Client, table: &str, order: &str) -> Vec<String> {
    client
        .query(
            &format!("SELECT row_to_json(t)::text FROM {table} t ORDER BY {order}"),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// Version 3 only adds the outbox's two tables, so the schema is made by this build's store
/// with every kind of row (a pending approval with a principal, a committed, an unknown and a
/// refused claim, a bare claim, a suspended run, owners, the audit log) and put back to version
/// 2 by dropping them, which leaves exactly what version 2 wrote. Migrated: every row as it was,
/// the outbox empty, and events reported from the first endpoint registered, with the principal
/// version 2 stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_2_database_is_migrated_with_every_row_intact_and_reports_from_then_on() {
    let schema = format!("t{}_migrate_v2", std::process::id());
    {
        let store = open(&schema).await.unwrap();
        let mut asked = request("one");
        asked.labels.insert(PRINCIPAL_LABEL.into(), "local".into());
        store
            .prepare_within(asked, 16, at(1))
            .await
            .unwrap()
            .unwrap();
        for (args, outcome) in [
            (
                "two",
                EffectOutcome::Committed {
                    receipt: json!({"ok": 1}),
                },
            ),
            ("three", unknown("mcp_timeout")),
        ] {
            let id = store.prepare(request(args)).await.unwrap();
            store
                .decide(id.clone(), decision(Verdict::Approve, None))
                .await
                .unwrap();
            let ClaimVerdict::Claimed(key) = store
                .check_and_claim(id, intent(args).digest(), at(20))
                .await
                .unwrap()
            else {
                panic!("not claimed")
            };
            store.complete(key, outcome).await.unwrap();
        }
        let four = store.prepare(request("four")).await.unwrap();
        store
            .decide(four.clone(), decision(Verdict::Approve, Some(at(15))))
            .await
            .unwrap();
        store
            .check_and_claim(four, intent("four").digest(), at(20))
            .await
            .unwrap();
        store.claim(IdempotencyKey("bare".into())).await.unwrap();
    }
    let client = raw(&schema).await;
    client
        .batch_execute(
            "DROP TABLE idempotent_results; DROP TABLE resends; DROP INDEX claims_unknown; DROP INDEX claims_by_time;
             DROP TABLE tool_pins; DROP TABLE catalog_changes;
             DROP TABLE grant_uses; DROP TABLE grants; DROP TABLE mcp_tasks;
             DROP TABLE approval_votes; DROP TABLE approval_rules;
             DROP TABLE credentials; DROP TABLE webhook_outbox; DROP TABLE webhook_subscriptions;
             DROP TABLE http_session_streams; DROP TABLE http_session_events; DROP TABLE http_sessions;
             DROP FUNCTION http_session_notify();
             DROP INDEX approvals_decided;
             UPDATE schema_version SET version = 2;",
        )
        .await
        .unwrap();
    let tables = [
        ("owners", "opened_at_ns, owner"),
        ("approvals", "seq"),
        ("claims", "claimed_at_ns, key"),
        ("suspended_runs", "run_id"),
        ("audit", "seq"),
    ];
    let mut before = Vec::new();
    for (table, order) in tables {
        before.push(dump(&client, table, order).await);
    }
    let store = open(&schema).await.unwrap();
    let version: i64 = client
        .query_one("SELECT version FROM schema_version", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(version, 15);
    for ((table, order), rows) in tables.iter().zip(&before) {
        let after = dump(&client, table, order).await;
        // Opening adds this store's owner and its `opened` row; nothing else changed.
        let added = usize::from(matches!(*table, "owners" | "audit"));
        assert_eq!(after.len(), rows.len() + added, "{table}");
        assert_eq!(&after[..rows.len()], &rows[..], "{table}");
    }
    assert_eq!(before[2].len(), 3);
    assert_eq!(
        store.webhook_deliveries(WebhookQuery::all()).await,
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
            &json!("approval.decided"),
            &json!("approval-1"),
            &json!("local")
        )
    );
}
