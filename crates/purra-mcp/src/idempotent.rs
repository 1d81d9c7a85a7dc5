//! A purra server's idempotent results kept in a purra store: [`DurableIdempotentResults`] adapts
//! purra-core's store contract ([`purra_core::idempotent_results::IdempotentResults`], which
//! purra-sqlite and purra-postgres implement) to the server's
//! ([`purra_protocol::idempotency::IdempotentResults`]), so an idempotent tool runs once per key
//! across restarts and, on a shared store, across instances.

use std::sync::Arc;

use purra_core::idempotent_results::{IdempotentBegin, IdempotentBounds, IdempotentResults};
use purra_protocol::idempotency::{self, Begin, IdempotentLimits, IdempotentStoreError};
use purra_protocol::BoxFuture;

/// A server's idempotent results in a purra store, within [`IdempotentLimits`]: give it to
/// `ServerBuilder::idempotent_results`. A key that began in a process that stopped before it
/// finished stays running in the store: its repeats are refused as of unknown outcome, never
/// run again (until the key's `ttl` has passed).
#[derive(Clone)]
pub struct DurableIdempotentResults {
    store: Arc<dyn IdempotentResults>,
    limits: IdempotentLimits,
}

impl std::fmt::Debug for DurableIdempotentResults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DurableIdempotentResults")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl DurableIdempotentResults {
    /// Results kept in `store` within `limits`.
    pub fn new(store: Arc<dyn IdempotentResults>, limits: IdempotentLimits) -> Self {
        DurableIdempotentResults { store, limits }
    }
}

fn failed(e: purra_core::StoreError) -> IdempotentStoreError {
    IdempotentStoreError(e.to_string())
}

impl idempotency::IdempotentResults for DurableIdempotentResults {
    fn begin<'a>(
        &'a self,
        key: &'a str,
        request: &'a str,
    ) -> BoxFuture<'a, Result<Begin, IdempotentStoreError>> {
        let bounds = IdempotentBounds {
            max_keys: self.limits.max_keys as u64,
            ttl: self.limits.ttl,
        };
        Box::pin(async move {
            Ok(
                match self
                    .store
                    .begin_idempotent(key.to_owned(), request.to_owned(), bounds)
                    .await
                    .map_err(failed)?
                {
                    IdempotentBegin::Run => Begin::Run,
                    IdempotentBegin::Running => Begin::Running,
                    IdempotentBegin::Done(result) => Begin::Done(result),
                    IdempotentBegin::Conflict => Begin::Conflict,
                },
            )
        })
    }

    fn finish<'a>(
        &'a self,
        key: &'a str,
        result: &'a str,
    ) -> BoxFuture<'a, Result<(), IdempotentStoreError>> {
        let kept = if result.len() > self.limits.max_result_bytes {
            idempotency::result_too_large(self.limits.max_result_bytes)
        } else {
            result.to_owned()
        };
        Box::pin(async move {
            self.store
                .finish_idempotent(key.to_owned(), kept)
                .await
                .map_err(failed)
        })
    }

    fn release<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<(), IdempotentStoreError>> {
        Box::pin(async move {
            self.store
                .release_idempotent(key.to_owned())
                .await
                .map_err(failed)
        })
    }
}
