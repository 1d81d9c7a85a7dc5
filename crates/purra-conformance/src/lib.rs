//! purra under the official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in
//! `peers/conformance`, and its 2026-07-28 prerelease in `peers/conformance-next`): the server
//! fixtures its server scenarios expect ([`server`], with the 2026-07-28 ones in
//! [`modern_server`], the tasks extension's in [`tasks_server`]) and the client scenarios it drives ([`client`]). `scripts/conformance.sh`
//! runs both suites.

pub mod client;
pub mod modern_server;
pub mod server;
pub mod skills_server;
pub mod tasks_server;
