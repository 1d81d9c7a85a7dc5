//! The interop fixtures of `peers/FIXTURES.md`, built on purra-protocol: the fixture server that
//! the example server binary runs, and the checks that the example client binary runs (those of
//! the handshake revisions in `checks`, those of 2026-07-28 in `modern_checks`).

pub mod adapter_fixture;
pub mod checks;
// The demo and fixture servers ship inside the published `purra` binary (`purra serve-demo`,
// `purra serve-example`), so their source lives in purra-cli; this crate (never published)
// compiles the same files for its binaries and the tests.
#[path = "../../purra-cli/src/demo_server.rs"]
pub mod demo_server;
#[path = "../../purra-cli/src/fixture_server.rs"]
pub mod fixture_server;
pub mod modern_checks;
