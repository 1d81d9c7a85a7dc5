//! A purra server's idempotent results (purra-core's `IdempotentResults`) in the store's file:
//! one row per key in `idempotent_results`, with the digest of the request it began for, when it
//! began, and its result once finished (`NULL` while running). `begin` is one write in the group
//! commit, so of two callers of a new key one runs it; a row left running by a process that
//! stopped stays running (its repeats are refused as of unknown outcome) until its `ttl` passes.

use crate::store::{backend, SqliteStore};
use purra_core::idempotent_results::{IdempotentBegin, IdempotentBounds, IdempotentResults};
use purra_core::stored::to_ns;
use purra_core::{BoxFuture, StoreError};
use rusqlite::{params, OptionalExtension};
use std::time::SystemTime;

impl IdempotentResults for SqliteStore {
    fn begin_idempotent(
        &self,
        key: String,
        request: String,
        bounds: IdempotentBounds,
    ) -> BoxFuture<'_, Result<IdempotentBegin, StoreError>> {
        let now = SystemTime::now();
        self.write(move |conn, _| {
            let now_ns = to_ns(now)?;
            let ttl_ns = i64::try_from(bounds.ttl.as_nanos()).unwrap_or(i64::MAX);
            conn.prepare_cached("DELETE FROM idempotent_results WHERE began_at_ns < ?1")
                .and_then(|mut s| s.execute(params![now_ns.saturating_sub(ttl_ns)]))
                .map_err(backend)?;
            let found: Option<(String, Option<String>)> = conn
                .prepare_cached("SELECT request, result FROM idempotent_results WHERE key = ?1")
                .and_then(|mut s| {
                    s.query_row(params![key], |r| Ok((r.get(0)?, r.get(1)?)))
                        .optional()
                })
                .map_err(backend)?;
            if let Some((kept, result)) = found {
                return Ok(match (kept == request, result) {
                    (false, _) => IdempotentBegin::Conflict,
                    (true, Some(result)) => IdempotentBegin::Done(result),
                    (true, None) => IdempotentBegin::Running,
                });
            }
            let count: i64 = conn
                .prepare_cached("SELECT count(*) FROM idempotent_results")
                .and_then(|mut s| s.query_row([], |r| r.get(0)))
                .map_err(backend)?;
            if u64::try_from(count).unwrap_or(0) >= bounds.max_keys {
                let forgotten = conn
                    .prepare_cached(
                        "DELETE FROM idempotent_results WHERE key = (
                             SELECT key FROM idempotent_results WHERE result IS NOT NULL
                             ORDER BY began_at_ns LIMIT 1)",
                    )
                    .and_then(|mut s| s.execute([]))
                    .map_err(backend)?;
                if forgotten == 0 {
                    return Err(StoreError::Backend(format!(
                        "all {} kept idempotency keys are still running",
                        bounds.max_keys
                    )));
                }
            }
            conn.prepare_cached(
                "INSERT INTO idempotent_results (key, request, began_at_ns) VALUES (?1, ?2, ?3)",
            )
            .and_then(|mut s| s.execute(params![key, request, now_ns]))
            .map_err(backend)?;
            Ok(IdempotentBegin::Run)
        })
    }

    fn finish_idempotent(
        &self,
        key: String,
        result: String,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        self.write(move |conn, _| {
            conn.prepare_cached(
                "UPDATE idempotent_results SET result = ?2 WHERE key = ?1 AND result IS NULL",
            )
            .and_then(|mut s| s.execute(params![key, result]))
            .map_err(backend)?;
            Ok(())
        })
    }

    fn release_idempotent(&self, key: String) -> BoxFuture<'_, Result<(), StoreError>> {
        self.write(move |conn, _| {
            conn.prepare_cached("DELETE FROM idempotent_results WHERE key = ?1 AND result IS NULL")
                .and_then(|mut s| s.execute(params![key]))
                .map_err(backend)?;
            Ok(())
        })
    }
}
