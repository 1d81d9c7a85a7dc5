//! Shared pieces of the store contracts: the boxed future type and the store error.
//!
//! Store traits return [`BoxFuture`] so they stay object-safe (`Arc<dyn ApprovalGateway>`) without the
//! `async-trait` crate; an implementation writes `Box::pin(async move { … })`.

use std::fmt;

/// A boxed, `Send` future borrowed for `'a`: the `futures` ecosystem's own alias
/// (`Pin<Box<dyn Future<Output = T> + Send + 'a>>`), which purra-protocol re-exports too, so the
/// two crates name one type.
pub use futures_core::future::BoxFuture;

/// A failure of an approval, idempotency or run store.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreError {
    /// The record does not exist.
    NotFound,
    /// The operation does not fit the record's state (for example deciding twice, or completing a claim
    /// that already has an outcome).
    Conflict(&'static str),
    /// The backing store failed; the text is for the host's logs, never for the model.
    Backend(String),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::NotFound => f.write_str("record not found"),
            StoreError::Conflict(why) => write!(f, "conflict: {why}"),
            StoreError::Backend(why) => write!(f, "store failure: {why}"),
        }
    }
}

impl std::error::Error for StoreError {}

/// How many durable writes a store has committed for its callers since it was opened: what a
/// write path costs, counted rather than timed (a test asserts the count of each of the
/// gateway's write-cycle paths, so a regression in commits fails).
///
/// `writes` counts the operations that changed at least one row (an operation that only read,
/// such as a claim of an approval still pending, is not one); `commits` the transactions that
/// made them durable. One caller at a time, each write is its own commit; concurrent writes share
/// group commits, so `commits` is then smaller. Housekeeping (an owner's lease heartbeat, opening
/// and closing) and the operator's moves of `unknown` effects are not counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CommitCounts {
    /// Operations that changed a row, committed.
    pub writes: u64,
    /// Transactions committed with at least one of them.
    pub commits: u64,
}
