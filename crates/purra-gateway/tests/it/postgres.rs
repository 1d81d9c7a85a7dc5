//! The gateway's store seam on PostgreSQL: a write waiting for its decision wakes when another
//! process (another connection pool and listener) decides it, by `LISTEN`, with no poll.

use std::time::Duration;

use purra_core::{ApprovalState, Verdict};
use purra_gateway::{Decisions, GatewayStore};
use purra_store::{AnyStore, StoreLocation};
use purra_store_tests::{decision, request};

/// A store in a fresh schema of the test command's PostgreSQL server (never skipped).
fn location(name: &str) -> StoreLocation {
    let url = std::env::var("PURRA_TEST_POSTGRES").unwrap_or_else(|_| {
        panic!("PURRA_TEST_POSTGRES is not set: run the tests with scripts/test.sh")
    });
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() % 1_000_000_000);
    let url = format!("{url}?schema=gw_{name}_{}_{nanos}", std::process::id());
    StoreLocation::parse(&url).expect("location")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_write_wakes_on_a_decision_from_another_store() {
    let at = location("wake");
    let gateway = AnyStore::open(&at, None).await.expect("gateway's store");
    let operator = AnyStore::open(&at, None).await.expect("operator's store");
    assert!(matches!(gateway, AnyStore::Postgres(_)));
    let approvals = GatewayStore::approvals(&gateway);
    let id = approvals.prepare(request("x")).await.expect("prepare");
    assert_eq!(
        GatewayStore::suspended_run_ids(&gateway)
            .await
            .expect("runs"),
        []
    );

    let decisions = Decisions::default();
    // Far beyond the test's bound: only an event can end the wait in time.
    let until = tokio::time::Instant::now() + Duration::from_secs(3600);
    let waiter = {
        let approvals = approvals.clone();
        let id = id.clone();
        tokio::spawn(async move { decisions.wait(approvals.as_ref(), &id, until).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "nothing was decided yet");
    operator
        .gateway()
        .decide(id.clone(), decision(Verdict::Approve, None))
        .await
        .expect("decide");
    let record = tokio::time::timeout(Duration::from_secs(30), waiter)
        .await
        .expect("woken within 30 s")
        .expect("join")
        .expect("wait");
    assert_eq!(
        record.state,
        ApprovalState::Decided(decision(Verdict::Approve, None))
    );
    assert_eq!(
        GatewayStore::reconcile_interrupted(&gateway, std::time::SystemTime::now())
            .await
            .expect("reconcile"),
        0
    );
}
