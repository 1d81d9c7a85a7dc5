//! The examples of purra-protocol, each a Cargo example of this package (`cargo run -p examples
//! --example NAME`), compiled by the workspace's tests:
//!
//! - `weather`: a stdio server with three typed tools (one with structured output), a
//!   resource, a resource template and a typed prompt;
//! - `counter`: a stateful server whose tools and prompt are methods of one shared value
//!   (`#[purra_protocol::handlers]`);
//! - `axum_app`: the Streamable HTTP endpoint nested at `/mcp` in an axum app with a route of its
//!   own, served with graceful shutdown that ends the open SSE streams;
//! - `tls_client`: a Streamable HTTP client that trusts a CA loaded from a PEM file.
//!
//! `tests/bind.rs` checks that every typed tool they declare binds through purra-mcp's strict
//! read discovery unchanged; `tests/axum_app.rs` and `tests/tls_client.rs` run the two HTTP
//! examples as child processes over real sockets.

/// `docs/src/library/from-rmcp.md`, the guide from rmcp to purra: each purra block is a doctest of this
/// package (compiled, and run unless marked `no_run`); the rmcp blocks are marked `ignore`.
#[cfg(doctest)]
#[doc = include_str!("../docs/src/library/from-rmcp.md")]
pub struct FromRmcp;

/// The user guide's pages that have Rust blocks (docs/src, an mdBook): each purra block is a
/// doctest of this package (compiled, and run unless marked `no_run`); blocks that are not purra
/// code are marked `ignore` or `text`.
#[cfg(doctest)]
pub mod guide {
    /// Getting started: the server in 15 lines and the client in 10.
    #[doc = include_str!("../docs/src/getting-started.md")]
    pub struct GettingStarted;
    /// The server: the examples beside rmcp's, and skills.
    #[doc = include_str!("../docs/src/library/server.md")]
    pub struct Server;
    /// The client.
    #[doc = include_str!("../docs/src/library/client.md")]
    pub struct Client;
    /// The host adapter: read bindings.
    #[doc = include_str!("../docs/src/library/host-adapter.md")]
    pub struct HostAdapter;
    /// Durable writes.
    #[doc = include_str!("../docs/src/library/durable-writes.md")]
    pub struct DurableWrites;
}

/// The repository's README: every Rust sample in it is a whole program, compiled here (the
/// rmcp side of its comparison is marked `ignore`).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct Readme;

/// The examples in the READMEs of the published crates that have Rust code (purra-core's
/// README is its crate documentation, tested there).
#[cfg(doctest)]
pub mod readmes {
    /// purra-protocol's README.
    #[doc = include_str!("../crates/purra-protocol/README.md")]
    pub struct Protocol;
    /// purra-store's README.
    #[doc = include_str!("../crates/purra-store/README.md")]
    pub struct Store;
}
