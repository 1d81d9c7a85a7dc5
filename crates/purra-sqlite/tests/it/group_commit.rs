//! Group commit: many concurrent writers on one store, some of whose writes fail, get exactly
//! the answers they would get one at a time; a failing write rolls back only itself, and after
//! reopening the file every answered write is there and no failed one is. Writers that stop
//! leave the rest answered, and a pause leaves no write without a leader.

use purra_core::*;
use purra_sqlite::SqliteStore;
use purra_store_tests::{decision, intent, key_of, request};
use serde_json::json;
use std::collections::BTreeMap;
use std::time::SystemTime;

use crate::support::fresh_db;

const RUNS: usize = 48;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_get_one_at_a_time_answers_and_failures_roll_back_only_themselves() {
    let path = fresh_db("group");
    let store = SqliteStore::open(&path).unwrap();
    let mut prepared = Vec::new();
    for i in 0..RUNS {
        let args = format!("group-{i}");
        let intent = intent(&args);
        let id = store.prepare(request(&args)).await.unwrap();
        prepared.push((id, intent));
    }
    // Every run: approve, claim, then complete; odd runs also try a second decision (a conflict)
    // and a completion of a key never claimed (not found) between their good writes.
    let mut tasks = tokio::task::JoinSet::new();
    for (i, (id, intent)) in prepared.iter().cloned().enumerate() {
        let store = store.clone();
        tasks.spawn(async move {
            let mut answers = Vec::new();
            answers.push(format!(
                "{:?}",
                store
                    .decide(id.clone(), decision(Verdict::Approve, None))
                    .await
            ));
            if i % 2 == 1 {
                answers.push(format!(
                    "{:?}",
                    store
                        .decide(id.clone(), decision(Verdict::Deny, None))
                        .await
                ));
                let stray = IdempotencyKey(format!("never-claimed-{i}"));
                answers.push(format!(
                    "{:?}",
                    store.complete(stray, EffectOutcome::NotStarted).await
                ));
            }
            let claim = store
                .check_and_claim(id, intent.digest(), SystemTime::now())
                .await;
            answers.push(format!("{claim:?}"));
            let receipt = EffectOutcome::Committed {
                receipt: json!({"run": i}),
            };
            answers.push(format!(
                "{:?}",
                store.complete(key_of(&intent), receipt).await
            ));
            (i, answers)
        });
    }
    let mut all = BTreeMap::new();
    while let Some(r) = tasks.join_next().await {
        let (i, answers) = r.unwrap();
        all.insert(i, answers);
    }
    for (i, (_, intent)) in prepared.iter().enumerate() {
        let claimed = format!("Ok(Claimed({:?}))", key_of(intent));
        let expected: Vec<String> = if i % 2 == 1 {
            vec![
                "Ok(())".into(),
                "Err(Conflict(\"already decided\"))".into(),
                "Err(NotFound)".into(),
                claimed,
                "Ok(())".into(),
            ]
        } else {
            vec!["Ok(())".into(), claimed, "Ok(())".into()]
        };
        assert_eq!(all[&i], expected, "run {i}");
    }
    drop(store);

    let store = SqliteStore::open(&path).unwrap();
    for (i, (id, intent)) in prepared.iter().enumerate() {
        assert_eq!(
            store.state(key_of(intent)).await,
            Ok(Some(ClaimState::Completed {
                outcome: EffectOutcome::Committed {
                    receipt: json!({"run": i})
                }
            }))
        );
        let record = store.record(id.clone()).await.unwrap().unwrap();
        assert!(
            matches!(&record.state, ApprovalState::Claimed(d) if d.verdict == Verdict::Approve),
            "run {i}: {:?}",
            record.state
        );
    }
    // The audit log: exactly one row per successful write, none for the failed ones.
    let mut counts = BTreeMap::new();
    for e in store.audit(0, 10_000).await.unwrap() {
        *counts.entry(e.event).or_insert(0usize) += 1;
    }
    let expected: BTreeMap<String, usize> = [
        ("opened", 2),
        ("closed", 1),
        ("prepared", RUNS),
        ("decided", RUNS),
        ("claimed", RUNS),
        ("outcome", RUNS),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(counts, expected);
}

/// One approval's whole cycle (prepare, approve, claim, complete); every answer checked.
async fn cycle(store: &SqliteStore, name: &str) {
    let intent = intent(name);
    let id = store.prepare(request(name)).await.unwrap();
    assert_eq!(
        store
            .decide(id.clone(), decision(Verdict::Approve, None))
            .await,
        Ok(())
    );
    assert_eq!(
        store
            .check_and_claim(id, intent.digest(), SystemTime::now())
            .await,
        Ok(ClaimVerdict::Claimed(key_of(&intent)))
    );
    let receipt = EffectOutcome::Committed {
        receipt: json!({"name": name}),
    };
    assert_eq!(
        store.complete(key_of(&intent), receipt.clone()).await,
        Ok(())
    );
    assert_eq!(
        store.state(key_of(&intent)).await,
        Ok(Some(ClaimState::Completed { outcome: receipt }))
    );
}

/// The leader gathers as many writes as there were writers at its last answer. When most of them
/// stop, the one left still gets every answer (a group waits for the missing writes at most one
/// commit's time); after a pause longer than any wait the leader has stepped down, and the next
/// write starts one.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writers_that_stop_leave_the_rest_answered_and_a_pause_a_new_leader() {
    let store = SqliteStore::open(fresh_db("gather")).unwrap();
    let mut burst = tokio::task::JoinSet::new();
    for i in 0..16 {
        let store = store.clone();
        burst.spawn(async move {
            for round in 0..4 {
                cycle(&store, &format!("burst-{i}-{round}")).await;
            }
        });
    }
    while let Some(r) = burst.join_next().await {
        r.unwrap();
    }
    for round in 0..8 {
        cycle(&store, &format!("alone-{round}")).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    cycle(&store, "after-a-pause").await;
    let outcomes = store
        .audit(0, 10_000)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.event == "outcome")
        .count();
    assert_eq!(outcomes, 16 * 4 + 8 + 1);
}
