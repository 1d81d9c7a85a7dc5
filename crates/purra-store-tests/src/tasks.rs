//! MCP tasks kept in the store (purra-core's `TaskTable`): found only by their owner, bounded
//! per owner (tasks not yet ended) and in all (racing instances store at most the bound), never changed once ended,
//! forgotten once expired, listed oldest first after a cursor.

use crate::Harness;
use purra_core::held_tasks::now_ms;
use purra_core::{StoredTask, TaskInsert, TaskTable};

fn task(id: &str, owner: &str, created_ms: i64, ttl_ms: i64) -> StoredTask {
    StoredTask {
        id: id.into(),
        owner: owner.into(),
        created_ms,
        expires_ms: created_ms + ttl_ms,
        terminal: false,
        body: format!("{{\"status\":\"working\",\"id\":\"{id}\"}}"),
    }
}

/// Owner, bounds, terminal, expiry and the cursor, through two instances of one store.
pub async fn tasks_are_owned_bounded_final_once_ended_and_expire<H: Harness>(h: &H) {
    let path = h.fresh("tasks");
    let one = h.open(&path).await.unwrap();
    let two = h.open(&path).await.unwrap();
    let now = now_ms();
    let t1 = task("t1", "principal:alice", now, 60_000);
    assert_eq!(
        one.insert_task(t1.clone(), 2, 10).await,
        Ok(TaskInsert::Inserted)
    );
    // Found by its owner on any instance; another owner finds nothing.
    assert_eq!(
        two.task("principal:alice".into(), "t1".into()).await,
        Ok(Some(t1.clone()))
    );
    assert_eq!(
        two.task("principal:bob".into(), "t1".into()).await,
        Ok(None)
    );
    // Another owner cannot replace it either.
    let mut stolen = t1.clone();
    stolen.owner = "principal:bob".into();
    stolen.body = "{}".into();
    assert_eq!(two.replace_task(stolen).await, Ok(false));
    // The per-owner bound, then the total one.
    let t2 = task("t2", "principal:alice", now + 1, 60_000);
    assert_eq!(
        two.insert_task(t2.clone(), 2, 10).await,
        Ok(TaskInsert::Inserted)
    );
    assert_eq!(
        one.insert_task(task("t3", "principal:alice", now + 2, 60_000), 2, 10)
            .await,
        Ok(TaskInsert::OwnerFull)
    );
    assert_eq!(
        one.insert_task(task("b1", "principal:bob", now + 2, 60_000), 5, 2)
            .await,
        Ok(TaskInsert::StoreFull)
    );
    // Listed oldest first, after a cursor.
    let ids = |v: Vec<StoredTask>| v.into_iter().map(|t| t.id).collect::<Vec<_>>();
    assert_eq!(
        one.tasks_of("principal:alice".into(), None, 10)
            .await
            .map(ids),
        Ok(vec!["t1".to_owned(), "t2".to_owned()])
    );
    assert_eq!(
        one.tasks_of("principal:alice".into(), Some("t1".into()), 10)
            .await
            .map(ids),
        Ok(vec!["t2".to_owned()])
    );
    assert_eq!(
        one.tasks_of("principal:bob".into(), None, 10)
            .await
            .map(ids),
        Ok(vec![])
    );
    // Ended once: never replaced again, whichever instance tries.
    let mut done = t1.clone();
    done.terminal = true;
    done.body = "{\"status\":\"completed\"}".into();
    assert_eq!(one.replace_task(done.clone()).await, Ok(true));
    let mut late = t1.clone();
    late.terminal = true;
    late.body = "{\"status\":\"cancelled\"}".into();
    assert_eq!(two.replace_task(late).await, Ok(false));
    assert_eq!(
        two.task("principal:alice".into(), "t1".into()).await,
        Ok(Some(done))
    );
    // An ended task no longer counts against its owner's bound.
    assert_eq!(
        one.insert_task(task("t3", "principal:alice", now + 3, 60_000), 2, 10)
            .await,
        Ok(TaskInsert::Inserted)
    );
    // An expired task is gone, and makes room.
    let old = task("old", "principal:carol", now - 10_000, 5_000);
    assert_eq!(one.insert_task(old, 5, 10).await, Ok(TaskInsert::Inserted));
    assert_eq!(
        one.task("principal:carol".into(), "old".into()).await,
        Ok(None)
    );
    assert_eq!(
        one.tasks_of("principal:carol".into(), None, 10)
            .await
            .map(ids),
        Ok(vec![])
    );
}

/// 30 inserts of one owner raced by two instances against a bound of 5: exactly 5 stored.
pub async fn racing_instances_store_at_most_the_bound<H: Harness>(h: &H) {
    let path = h.fresh("tasks-race");
    let one = h.open(&path).await.unwrap();
    let two = h.open(&path).await.unwrap();
    let now = now_ms();
    let mut set = tokio::task::JoinSet::new();
    for n in 0..30 {
        let store = if n % 2 == 0 { one.clone() } else { two.clone() };
        set.spawn(async move {
            store
                .insert_task(
                    task(&format!("r{n}"), "principal:alice", now, 60_000),
                    5,
                    100,
                )
                .await
        });
    }
    let mut inserted = 0;
    while let Some(r) = set.join_next().await {
        match r.unwrap().unwrap() {
            TaskInsert::Inserted => inserted += 1,
            other => assert_eq!(other, TaskInsert::OwnerFull),
        }
    }
    assert_eq!(inserted, 5);
    assert_eq!(
        one.tasks_of("principal:alice".into(), None, 100)
            .await
            .unwrap()
            .len(),
        5
    );
}
