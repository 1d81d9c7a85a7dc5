//! The interop fixtures of `peers/FIXTURES.md`, built on purra-protocol: the fixture server that
//! the example server binary runs, and the checks that the example client binary runs.

pub mod adapter_fixture;
pub mod checks;
pub mod demo_server;
pub mod fixture_server;
