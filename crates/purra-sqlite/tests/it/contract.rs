//! The store contract suite (purra-store-tests) against SQLite files.

use purra_core::{BoxFuture, StoreError};
use purra_sqlite::{SqliteOptions, SqliteStore};
use purra_store_tests::*;
use std::time::Duration;

use crate::support::fresh_db;

/// SQLite: a location is a file path in a fresh directory under the test target's temporary directory.
struct Sqlite;

impl Harness for Sqlite {
    type Store = SqliteStore;

    fn fresh(&self, name: &str) -> String {
        fresh_db(name).display().to_string()
    }

    fn open(&self, location: &str) -> BoxFuture<'_, Result<SqliteStore, StoreError>> {
        let result = SqliteStore::open(location);
        Box::pin(async move { result })
    }

    fn open_with_lease(
        &self,
        location: &str,
        lease: Duration,
    ) -> BoxFuture<'_, Result<SqliteStore, StoreError>> {
        let result = SqliteStore::open_with(location, SqliteOptions::default().lease(lease));
        Box::pin(async move { result })
    }

    fn raw_execute(&self, location: &str, sql: &str) -> BoxFuture<'_, Result<(), String>> {
        let result = rusqlite::Connection::open(location)
            .and_then(|c| c.execute(sql, []))
            .map(|_| ())
            .map_err(|e| e.to_string());
        Box::pin(async move { result })
    }

    fn schema_version(&self, location: &str) -> BoxFuture<'_, i64> {
        let raw = rusqlite::Connection::open(location).unwrap();
        let version = raw
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        Box::pin(async move { version })
    }

    fn set_schema_version(&self, location: &str, version: i64) -> BoxFuture<'_, ()> {
        let raw = rusqlite::Connection::open(location).unwrap();
        raw.pragma_update(None, "user_version", version).unwrap();
        Box::pin(async {})
    }

    fn known_version(&self) -> i64 {
        16
    }

    fn newer_schema_error(&self, found: i64) -> StoreError {
        StoreError::Backend(format!(
            "schema version {found} is newer than this build of purra-sqlite knows (16)"
        ))
    }

    fn at_rest(&self, location: &str) -> BoxFuture<'_, Vec<u8>> {
        let mut bytes = Vec::new();
        for suffix in ["", "-wal", "-shm"] {
            if let Ok(b) = std::fs::read(format!("{location}{suffix}")) {
                bytes.extend_from_slice(&b);
            }
        }
        Box::pin(async move { bytes })
    }

    fn truncate_audit_sql(&self) -> Option<&'static str> {
        None
    }

    fn foreign_event_delay(&self) -> Duration {
        // Another instance's commit is found by the poll (200 ms by default).
        Duration::from_millis(600)
    }
}

contract_tests!(Sqlite);
