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
