//! purra under the official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in
//! `peers/conformance`): the server fixtures its server scenarios expect ([`server`]) and the
//! client scenarios it drives ([`client`]). `scripts/conformance.sh` runs both.

pub mod client;
pub mod server;
