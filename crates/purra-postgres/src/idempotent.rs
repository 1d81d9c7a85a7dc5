//! A purra server's idempotent results (purra-core's `IdempotentResults`) in the store's schema:
//! one row per key in `idempotent_results`, with the digest of the request it began for, when it
//! began, and its result once finished (`NULL` while running). `begin` inserts with
//! `ON CONFLICT DO NOTHING`, so of two instances beginning one new key, one runs it and the other
//! finds it running. An attempt retried after its connection failed recognises its own row (same
//! request, same start instant) and runs it. A row left running by an instance that stopped stays
//! running (its repeats are refused as of unknown outcome) until its `ttl` passes.

use crate::store::{exec, query_opt, Error, PostgresStore};
use purra_core::idempotent_results::{IdempotentBegin, IdempotentBounds, IdempotentResults};
use purra_core::stored::to_ns;
use purra_core::{BoxFuture, StoreError};
use std::sync::Arc;
use std::time::SystemTime;

impl IdempotentResults for PostgresStore {
    fn begin_idempotent(
        &self,
        key: String,
        request: String,
        bounds: IdempotentBounds,
    ) -> BoxFuture<'_, Result<IdempotentBegin, StoreError>> {
        let args = Arc::new((key, request));
        Box::pin(async move {
            let now_ns = to_ns(SystemTime::now())?;
            let ttl_ns = i64::try_from(bounds.ttl.as_nanos()).unwrap_or(i64::MAX);
            let max_keys = i64::try_from(bounds.max_keys).unwrap_or(i64::MAX);
            self.transact(move |tx, _, retry| {
                let args = Arc::clone(&args);
                Box::pin(async move {
                    let (key, request) = &*args;
                    exec(
                        tx,
                        "DELETE FROM idempotent_results WHERE began_at_ns < $1",
                        &[&now_ns.saturating_sub(ttl_ns)],
                    )
                    .await?;
                    let found = |row: tokio_postgres::Row| {
                        let kept: String = row.get(0);
                        let result: Option<String> = row.get(1);
                        let began: i64 = row.get(2);
                        match (kept == *request, result) {
                            (false, _) => IdempotentBegin::Conflict,
                            (true, Some(result)) => IdempotentBegin::Done(result),
                            // This attempt's own row, committed before its connection failed.
                            (true, None) if retry && began == now_ns => IdempotentBegin::Run,
                            (true, None) => IdempotentBegin::Running,
                        }
                    };
                    const FIND: &str = "SELECT request, result, began_at_ns
                                        FROM idempotent_results WHERE key = $1";
                    if let Some(row) = query_opt(tx, FIND, &[key]).await? {
                        return Ok(found(row));
                    }
                    let count: i64 = query_opt(tx, "SELECT count(*) FROM idempotent_results", &[])
                        .await?
                        .map(|r| r.get(0))
                        .unwrap_or(0);
                    if count >= max_keys {
                        let forgotten = exec(
                            tx,
                            "DELETE FROM idempotent_results WHERE key = (
                                 SELECT key FROM idempotent_results WHERE result IS NOT NULL
                                 ORDER BY began_at_ns LIMIT 1)",
                            &[],
                        )
                        .await?;
                        if forgotten == 0 {
                            return Err(Error::Store(StoreError::Backend(format!(
                                "all {max_keys} kept idempotency keys are still running"
                            ))));
                        }
                    }
                    let inserted = exec(
                        tx,
                        "INSERT INTO idempotent_results (key, request, began_at_ns)
                         VALUES ($1, $2, $3) ON CONFLICT (key) DO NOTHING",
                        &[key, request, &now_ns],
                    )
                    .await?;
                    if inserted == 1 {
                        return Ok(IdempotentBegin::Run);
                    }
                    // Another instance began the key meanwhile.
                    match query_opt(tx, FIND, &[key]).await? {
                        Some(row) => Ok(found(row)),
                        None => Ok(IdempotentBegin::Running),
                    }
                })
            })
            .await
        })
    }

    fn finish_idempotent(
        &self,
        key: String,
        result: String,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        let args = Arc::new((key, result));
        self.transact(move |tx, _, _| {
            let args = Arc::clone(&args);
            Box::pin(async move {
                exec(
                    tx,
                    "UPDATE idempotent_results SET result = $2 WHERE key = $1 AND result IS NULL",
                    &[&args.0, &args.1],
                )
                .await?;
                Ok(())
            })
        })
    }

    fn release_idempotent(&self, key: String) -> BoxFuture<'_, Result<(), StoreError>> {
        let key = Arc::new(key);
        self.transact(move |tx, _, _| {
            let key = Arc::clone(&key);
            Box::pin(async move {
                exec(
                    tx,
                    "DELETE FROM idempotent_results WHERE key = $1 AND result IS NULL",
                    &[&*key],
                )
                .await?;
                Ok(())
            })
        })
    }
}
