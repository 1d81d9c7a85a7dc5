//! The store contract suite (purra-store-tests) against a real PostgreSQL server: the one the test
//! command starts (`scripts/postgres.sh`), named by `PURRA_TEST_POSTGRES`. Each test gets a schema of
//! its own.

use purra_core::{BoxFuture, StoreError};
use purra_postgres::{PostgresOptions, PostgresStore};
use purra_store_tests::*;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::support::{self, raw, url};

use purra_store_tests::pg_dump;

/// PostgreSQL: a location is a schema in the test database.
struct Postgres;

impl Harness for Postgres {
    type Store = PostgresStore;

    fn fresh(&self, name: &str) -> String {
        static N: AtomicU32 = AtomicU32::new(0);
        let name: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .take(24)
            .collect();
        format!(
            "t{}_{}_{name}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        )
    }

    fn open(&self, location: &str) -> BoxFuture<'_, Result<PostgresStore, StoreError>> {
        let schema = location.to_owned();
        Box::pin(async move { support::open(&schema).await })
    }

    fn open_with_lease(
        &self,
        location: &str,
        lease: Duration,
    ) -> BoxFuture<'_, Result<PostgresStore, StoreError>> {
        let options = PostgresOptions::default().schema(location).lease(lease);
        Box::pin(async move { PostgresStore::connect_with(&url(), options).await })
    }

    fn raw_execute(&self, location: &str, sql: &str) -> BoxFuture<'_, Result<(), String>> {
        let (location, sql) = (location.to_owned(), sql.to_owned());
        Box::pin(async move {
            raw(&location)
                .await
                .batch_execute(&sql)
                .await
                .map_err(|e| match e.as_db_error() {
                    Some(db) => db.message().to_owned(),
                    None => e.to_string(),
                })
        })
    }

    fn schema_version(&self, location: &str) -> BoxFuture<'_, i64> {
        let location = location.to_owned();
        Box::pin(async move {
            raw(&location)
                .await
                .query_one("SELECT version FROM schema_version", &[])
                .await
                .unwrap()
                .get(0)
        })
    }

    fn set_schema_version(&self, location: &str, version: i64) -> BoxFuture<'_, ()> {
        let location = location.to_owned();
        Box::pin(async move {
            raw(&location)
                .await
                .execute("UPDATE schema_version SET version = $1", &[&version])
                .await
                .unwrap();
        })
    }

    fn known_version(&self) -> i64 {
        15
    }

    fn newer_schema_error(&self, found: i64) -> StoreError {
        StoreError::Backend(format!(
            "schema version {found} is newer than this build of purra-postgres knows (15)"
        ))
    }

    fn at_rest(&self, location: &str) -> BoxFuture<'_, Vec<u8>> {
        let schema = location.to_owned();
        Box::pin(async move {
            let out = std::process::Command::new(pg_dump())
                .arg("--schema")
                .arg(&schema)
                .arg("--dbname")
                .arg(url())
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "pg_dump: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            out.stdout
        })
    }

    fn truncate_audit_sql(&self) -> Option<&'static str> {
        Some("TRUNCATE audit")
    }

    fn foreign_event_delay(&self) -> Duration {
        // LISTEN/NOTIFY delivers at commit; this only gives a wrong wake-up time to show.
        Duration::from_millis(300)
    }
}

contract_tests!(Postgres);

/// A write dropped while its transaction is open (here the decision is recorded and the claim
/// waits on a key another connection holds) leaves nothing: the store sends `BEGIN` with the
/// first statement and `COMMIT` with the audit rows, so the connection of an unfinished
/// transaction is closed, never handed to the next operation (with one connection in the pool,
/// that next operation would otherwise read, and commit, the half-done write).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_dropped_mid_transaction_leaves_nothing_and_its_connection_is_not_reused() {
    use purra_core::{ApprovalGateway, ApprovalState, ClaimVerdict, OperatorStore, Verdict};
    let schema = Postgres.fresh("dropped_mid_transaction");
    let store = PostgresStore::connect_with(
        &url(),
        PostgresOptions::default().schema(&schema).pool_size(1),
    )
    .await
    .unwrap();
    let asked = request("\"dropped\"");
    let digest = asked.intent.digest();
    let key = key_of(&asked.intent);
    let id = store.prepare(asked).await.unwrap();
    // Another connection holds the claim's key, uncommitted: the claim's insert waits for it.
    let holder = raw(&schema).await;
    holder.batch_execute("BEGIN").await.unwrap();
    holder
        .execute(
            "INSERT INTO claims (key, owner, approval_seq, claimed_at_ns) VALUES ($1, $2, NULL, 0)",
            &[&key.0, &store.owner()],
        )
        .await
        .unwrap();
    let waiting = store.decide_and_claim(
        id.clone(),
        decision(Verdict::Approve, None),
        digest.clone(),
        at(20),
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(500), waiting)
            .await
            .is_err(),
        "the claim should wait for the key held by the other connection"
    );
    holder.batch_execute("ROLLBACK").await.unwrap();
    // The next operation on the pool's one connection sees nothing of the dropped write.
    let record = store.record(id.clone()).await.unwrap().unwrap();
    assert_eq!(record.state, ApprovalState::Prepared);
    let events: Vec<String> = store
        .approval_audit(id.clone())
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.event)
        .collect();
    assert_eq!(events, ["prepared"]);
    // And the write made again commits once, whole.
    let verdict = store
        .decide_and_claim(id.clone(), decision(Verdict::Approve, None), digest, at(20))
        .await
        .unwrap();
    assert_eq!(verdict, ClaimVerdict::Claimed(key));
    let events: Vec<String> = store
        .approval_audit(id)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.event)
        .collect();
    assert_eq!(events, ["prepared", "decided", "claimed"]);
}

/// A claim made while its owner's lease is fresh does not touch the owner's row: another
/// transaction holding that row (as a concurrent claim renewing the lease would, until its
/// commit) does not hold the claim up. Claims used to renew the lease each time, so a process's
/// concurrent claims queued on its one `owners` row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_with_a_fresh_lease_does_not_wait_for_its_owner_s_row() {
    use purra_core::{ApprovalGateway, ClaimVerdict, Verdict};
    let schema = Postgres.fresh("claim_owner_row");
    let store = support::open(&schema).await.unwrap();
    let asked = request("\"fresh lease\"");
    let digest = asked.intent.digest();
    let key = key_of(&asked.intent);
    let id = store.prepare(asked).await.unwrap();
    store
        .decide(id.clone(), decision(Verdict::Approve, None))
        .await
        .unwrap();
    let holder = raw(&schema).await;
    holder.batch_execute("BEGIN").await.unwrap();
    holder
        .execute(
            "SELECT 1 FROM owners WHERE owner = $1 FOR NO KEY UPDATE",
            &[&store.owner()],
        )
        .await
        .unwrap();
    let claimed = tokio::time::timeout(
        Duration::from_secs(10),
        store.check_and_claim(id, digest, at(20)),
    )
    .await;
    holder.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(
        claimed
            .expect("the claim waited for the owner's row")
            .unwrap(),
        ClaimVerdict::Claimed(key)
    );
}
