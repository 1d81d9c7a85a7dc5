//! purra-mcp: MCP tools under host authority, for purra-core agents.
//!
//! The host binds each remote tool it trusts to a local name, a read policy, a scope check and a
//! concurrency declaration; discovery checks the server's list against those bindings and the
//! [`Limits`], compiles every selected schema with Core's strict profile, and returns an
//! immutable [`Snapshot`] and Core registrations. A registration's handler makes one bounded
//! `tools/call` and turns every failure into a code from [`codes`]; no remote text reaches the
//! model. A [`CatalogMonitor`] makes registrations stale as soon as the tool list changes. A
//! remote tool that runs only as a task fails closed unless its read binding opts in
//! ([`ReadBinding::run_tasks`]); write bindings never run tasks. A write dispatched under a claim
//! (the run's `RunContext::idempotency_key`) carries `IdempotencyKey::upstream` of it in its
//! request's `_meta`, and as SEP-3182's `idempotencyKey` to a server declaring that capability;
//! reads carry none. [`DurableIdempotentResults`] keeps a purra server's idempotent results in a
//! purra store.
//!
//! A selected schema may declare JSON Schema 2020-12 at its root; draft-07 and 2019-09 (what
//! every TypeScript-SDK server declares) only when the host opts in with
//! [`Limits::earlier_schema_dialects`], and then only when every keyword means the same there as
//! in 2020-12. A discovery that refuses a selected tool says so with a code (all a model may
//! see) and, for the host, an [`AdapterError::refusal`]: the tool, the JSON pointer in it, the
//! reason and the listed JSON around it.
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
mod idempotent;
mod limits;
mod monitor;
mod pinned;
mod resend;
mod write;

use purra_core::ErrorCode;

pub use discovery::{check_tool, discover_read_tools, ReadBinding, ReadCatalog, Snapshot};
pub use idempotent::DurableIdempotentResults;
pub use limits::{Limits, MAX_TIMEOUT};
pub use monitor::{CatalogMonitor, SUPPORTED_VERSIONS};
pub use pinned::{
    discover_pinned, discover_read_tools_pinned, discover_write_tools_pinned, tool_definition,
    PinnedChange, PinnedDiscovery, PinnedSnapshot,
};
pub use resend::{resend_write, ResendFailure};
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

/// An adapter failure: a code from [`codes`] (all a model is ever given), and for a discovery
/// that refused a selected tool, the [`Refusal`] that tells the host what to fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdapterError {
    /// The code.
    pub code: ErrorCode,
    /// What discovery refused, for the host's operator (never handed to a model: it names
    /// remote tools and schema members). `None` for every call failure.
    pub refusal: Option<Box<Refusal>>,
}

impl AdapterError {
    /// An error with `code`.
    pub fn new(code: ErrorCode) -> Self {
        AdapterError {
            code,
            refusal: None,
        }
    }

    /// An error with `code` and the refusal behind it.
    pub fn refused(code: ErrorCode, refusal: Refusal) -> Self {
        AdapterError {
            code,
            refusal: Some(Box::new(refusal)),
        }
    }
}

/// Why discovery refused one selected remote tool, for the host: which tool, where in it, why,
/// and the listed JSON around that place.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Refusal {
    /// The remote tool's name, as the host selected it.
    pub tool: String,
    /// A JSON pointer into the listed tool (`/inputSchema/$schema`,
    /// `/outputSchema/properties/x/format`, `/description`); empty when the tool itself is the
    /// problem (not listed, listed twice).
    pub pointer: String,
    /// Why, in a sentence (the strict profile's reason for a schema).
    pub reason: String,
    /// The listed JSON object holding the refused place (compact, at most
    /// [`Refusal::MAX_EXCERPT_BYTES`] bytes and then cut with `…`), when there is one.
    pub excerpt: Option<String>,
}

impl Refusal {
    /// The longest excerpt kept, in bytes.
    pub const MAX_EXCERPT_BYTES: usize = 400;

    /// A refusal of `tool` at `pointer` for `reason`, without an excerpt.
    pub fn new(
        tool: impl Into<String>,
        pointer: impl Into<String>,
        reason: impl Into<String>,
    ) -> Refusal {
        Refusal {
            tool: tool.into(),
            pointer: pointer.into(),
            reason: reason.into(),
            excerpt: None,
        }
    }
}

impl std::fmt::Display for Refusal {
    /// `tool "NAME" at POINTER: REASON` (names and pointers quoted and escaped).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "tool {:?}", self.tool)?;
        if !self.pointer.is_empty() {
            write!(f, " at {:?}", self.pointer)?;
        }
        write!(f, ": {}", self.reason)
    }
}

impl std::fmt::Display for AdapterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MCP adapter error: {}", self.code.as_str())?;
        if let Some(r) = &self.refusal {
            write!(f, " ({r})")?;
        }
        Ok(())
    }
}

impl std::error::Error for AdapterError {}
