//! The interop fixtures of `peers/FIXTURES.md`, built on purra-protocol: the fixture server that
//! the example server binary runs, and the checks that the example client binary runs (those of
//! the handshake revisions in `checks`, those of 2026-07-28 in `modern_checks`).

pub mod adapter_fixture;
pub mod checks;
pub mod demo_server;
pub mod fixture_server;
pub mod modern_checks;
