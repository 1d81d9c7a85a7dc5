//! The examples of purra-protocol, each a Cargo example of this package (`cargo run -p examples
//! --example NAME`), compiled by the workspace's tests:
//!
//! - `weather`: a stdio server with three typed tools (one with structured output), a
//!   resource, a resource template and a typed prompt;
//! - `counter`: a stateful server whose tools and prompt are methods of one shared value
//!   (`#[purra_protocol::handlers]`).
//!
//! `tests/bind.rs` checks that every typed tool they declare binds through purra-mcp's strict
//! read discovery unchanged.
