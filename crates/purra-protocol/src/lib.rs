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

pub mod client;
pub mod error;
pub mod http;
pub mod jsonrpc;
pub mod modern;
pub mod request_state;
pub mod server;
pub mod session;
pub mod stdio;
pub mod transport;
pub mod types;
pub mod version;
pub mod ws;

pub use client::{
    CacheMode, Client, ClientOptions, Connection, ListenerHandle, ProtocolMode,
    ResourceSubscription,
};
pub use error::Error;
pub use http::{HttpClientOptions, HttpServerConfig, StreamableHttpServer};
pub use jsonrpc::{ErrorCode, ErrorObject, RequestId};
pub use server::{
    HandlerError, HandlerResult, RegistrationError, RequestCtx, Server, ServerSession,
};
pub use session::{EngineConfig, Peer, RequestOptions};
pub use stdio::{StderrMode, StdioCommand};
pub use tokio_util::sync::CancellationToken;
pub use transport::{memory, Transport};
pub use ws::{WsClientOptions, WsServerOptions};
