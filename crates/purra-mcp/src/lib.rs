//! purra-mcp: MCP tools under host authority, for purra-core agents.
//!
//! The host binds each remote tool it trusts to a local name, a read policy, a scope check and a
//! concurrency declaration; discovery checks the server's list against those bindings and the
//! [`Limits`], compiles every selected schema with Core's strict profile, and returns an
//! immutable [`Snapshot`] and Core registrations. A registration's handler makes one bounded
//! `tools/call` and turns every failure into a code from [`codes`]; no remote text reaches the
//! model. A [`CatalogMonitor`] makes registrations stale as soon as the tool list changes. A
//! remote tool that runs only as a task fails closed unless its read binding opts in
//! ([`ReadBinding::run_tasks`]); write bindings never run tasks.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::collections::BTreeMap;
//! use std::sync::Arc;
//! use purra_core::{Concurrency, ScopeCheck, ScopeDecision};
//! use purra_mcp::{discover_read_tools, CatalogMonitor, Limits, ReadBinding};
//! use purra_protocol::{Client, ClientOptions, StdioCommand};
//!
//! let conn = Arc::new(Client::connect_stdio(StdioCommand::new("docs-server"), ClientOptions::default()).await?);
//! let monitor = CatalogMonitor::attach(&conn);
//! let bindings = BTreeMap::from([(
//!     "remote.search".to_owned(),
//!     ReadBinding::new(
//!         "search_documents",
//!         "Search documents",
//!         // Replace with the application's real authorization.
//!         ScopeCheck::check(|_args, run| {
//!             if run.run_id.as_str().is_empty() { ScopeDecision::Deny } else { ScopeDecision::Allow }
//!         }),
//!     )
//!     .concurrency(Concurrency::Safe),
//! )]);
//! let catalog = discover_read_tools(&conn, "documents", &bindings, &monitor, Limits::default()).await?;
//! // Hand catalog.registrations to a purra_core::Catalog while the connection stays open.
//! # Ok(()) }
//! ```

mod call;
pub mod codes;
mod discovery;
mod limits;
mod monitor;
mod write;

use purra_core::ErrorCode;

pub use discovery::{discover_read_tools, ReadBinding, ReadCatalog, Snapshot};
pub use limits::{Limits, MAX_TIMEOUT};
pub use monitor::{CatalogMonitor, SUPPORTED_VERSIONS};
pub use write::{
    confirm_bindings_for_all, discover_write_tools, WriteBinding, WriteCatalog, WriteEffect,
};

/// Internals the fuzz targets (the repository's `fuzz/` crate and `crates/purra-fuzz`) drive
/// directly. **Unstable:** no semver promise; only with the non-default `fuzzing` feature.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod __private {
    use purra_core::{CompiledSchema, ErrorCode};
    use serde_json::Value;

    use crate::Limits;

    /// Judges a `tools/call` result's raw text as a read or write call does once the response
    /// arrived: the `{text, structured}` the model sees, or a code from [`crate::codes`].
    pub fn judge_result(
        raw: &str,
        limits: &Limits,
        output: Option<&CompiledSchema>,
    ) -> Result<Value, ErrorCode> {
        crate::call::judge_result(raw, limits, output)
    }
}

/// A sanitized adapter failure: a code from [`codes`], nothing else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdapterError {
    /// The code.
    pub code: ErrorCode,
}

impl AdapterError {
    /// An error with `code`.
    pub fn new(code: ErrorCode) -> Self {
        AdapterError { code }
    }
}

impl std::fmt::Display for AdapterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MCP adapter error: {}", self.code.as_str())
    }
}

impl std::error::Error for AdapterError {}
