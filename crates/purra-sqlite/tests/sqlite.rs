//! What only the SQLite store has: WAL and the pragmas, the in-memory store (not durable), and a file
//! made by schema version 1 migrated in place.

use purra_core::*;
use purra_sqlite::*;
use purra_store_tests::*;
use std::path::PathBuf;
use std::time::Duration;

fn fresh(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("purra-sqlite-only-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("store.db")
}

#[tokio::test]
async fn wal_pragmas_and_the_in_memory_store() {
    let path = fresh("pragmas");
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
    let path = fresh("v1");
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
