//! purra-conformance's integration tests in one binary: the fixtures over an in-memory
//! connection, and the official SDKs' task clients against the conformance server.

mod fixtures;
mod tasks_interop;
