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
        14
    }

    fn newer_schema_error(&self, found: i64) -> StoreError {
        StoreError::Backend(format!(
            "schema version {found} is newer than this build of purra-postgres knows (14)"
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
