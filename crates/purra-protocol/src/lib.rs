//! purra-protocol: a complete, fast Model Context Protocol implementation — client, server and
//! transports — usable on its own.
//!
//! ```no_run
//! use purra_protocol::{Server, RequestCtx, HandlerResult};
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct Zip { zip: String }
//!
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() {
//!     let server = Server::builder("weather", "0.1.0").build();
//!     server.tool("get_temp", "Current temperature for a US ZIP",
//!         |Zip { zip }, _ctx: RequestCtx| async move { HandlerResult::Ok(format!("{zip}: 72°F")) });
//!     server.serve_stdio().await;
//! }
//! ```
//!
//! The layers, bottom up: [`jsonrpc`] (framing, one-pass decoding), [`transport`] (the channel
//! boundary every transport produces, and the in-memory pair), [`stdio`] and [`ws`] (WebSocket),
//! the engine in [`session`] (pending requests, timeouts, cancellation, bounded concurrency), then
//! [`client`] and [`server`].

#[cfg(feature = "client")]
pub mod client;
pub mod error;
#[cfg(any(feature = "http-server", feature = "http-client"))]
pub mod http;
pub mod jsonrpc;
mod peek;
#[cfg(feature = "server")]
pub mod server;
pub mod session;
#[cfg(feature = "stdio")]
pub mod stdio;
pub mod transport;
pub mod types;
pub mod version;
#[cfg(feature = "ws")]
pub mod ws;

#[cfg(feature = "client")]
pub use client::{Client, ClientOptions, Connection, ListenerHandle, ResourceSubscription};
pub use error::Error;
#[cfg(feature = "http-client")]
pub use http::HttpClientOptions;
#[cfg(feature = "http-server")]
pub use http::{HttpServerConfig, StreamableHttpServer};
pub use jsonrpc::{ErrorCode, ErrorObject, RequestId};
#[cfg(feature = "server")]
pub use server::{
    HandlerError, HandlerResult, RegistrationError, RequestCtx, Server, ServerSession,
};
pub use session::{EngineConfig, Peer, RequestOptions};
#[cfg(feature = "stdio")]
pub use stdio::{StderrMode, StdioCommand};
pub use tokio_util::sync::CancellationToken;
pub use transport::{memory, Transport};
#[cfg(feature = "ws")]
pub use ws::{WsClientOptions, WsServerOptions};
