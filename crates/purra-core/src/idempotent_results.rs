//! Idempotent results: what a server keeps of each idempotency key it was called with, so that an
//! idempotent tool runs once per key (the durable side of `purra_protocol::idempotency`, which
//! `purra_mcp::DurableIdempotentResults` adapts to this contract; it knows no MCP).
//!
//! ```text
//! (none) ──begin──▶ running ──finish──▶ done (result)
//!                      └──release──▶ (none)
//! ```
//! A key is kept with the digest of the request it began for; `begin` with another digest is a
//! [`IdempotentBegin::Conflict`]. A `running` key found by a process that did not begin it (the one
//! that did stopped, or is another instance) answers [`IdempotentBegin::Running`]: the caller never
//! runs it again blindly. Keys are bounded by count and age: `begin` first forgets keys older than
//! its `ttl`, then, at `max_keys`, the oldest finished key; a new key is refused when every kept
//! key is still running.

use crate::store::{BoxFuture, StoreError};
use std::time::Duration;

/// What [`IdempotentResults::begin_idempotent`] found for a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IdempotentBegin {
    /// The key was new and now runs: the caller runs the call, then finishes or releases it.
    Run,
    /// The same request under the key began and has no result.
    Running,
    /// The same request under the key finished with this result (JSON text).
    Done(String),
    /// The key was used for another request.
    Conflict,
}

/// The bounds `begin` keeps a store within.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdempotentBounds {
    /// Keys kept at most.
    pub max_keys: u64,
    /// How long a key is kept after it began.
    pub ttl: Duration,
}

/// The idempotent results contract.
pub trait IdempotentResults: Send + Sync {
    /// Begins `key` for `request` (a digest) if it is new, within `bounds`; otherwise what it holds.
    fn begin_idempotent(
        &self,
        key: String,
        request: String,
        bounds: IdempotentBounds,
    ) -> BoxFuture<'_, Result<IdempotentBegin, StoreError>>;
    /// Records `result` for the running `key` (a finished key keeps its first result).
    fn finish_idempotent(
        &self,
        key: String,
        result: String,
    ) -> BoxFuture<'_, Result<(), StoreError>>;
    /// Forgets the running `key` (a finished key stays).
    fn release_idempotent(&self, key: String) -> BoxFuture<'_, Result<(), StoreError>>;
}
