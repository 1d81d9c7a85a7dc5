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
//! The layers, bottom up: the frame codec (one-pass decoding into raw params), the
//! [`Transport`] boundary every transport produces ([`stdio`], [`http`], [`ws`], [`memory`]),
//! the engine (pending requests, timeouts, cancellation, bounded concurrency) behind [`Peer`],
//! then [`Client`] and [`Server`]. The message types are in [`types`], the revisions in
//! [`version`].
//!
//! The public API is what this page lists; ARCHITECTURE.md lists it too, for review. Engine
//! internals are private. Cargo features pick the sides and transports (all on by default):
//! `client`, `server`, `stdio`, `http-server`, `http-client`, `ws`, `validation`.

#[cfg(feature = "client")]
mod client;
mod error;
#[cfg(any(feature = "http-server", feature = "ws"))]
mod host_policy;
#[cfg(any(feature = "http-server", feature = "http-client"))]
pub mod http;
#[cfg(any(feature = "http-server", feature = "ws"))]
mod http_context;
mod jsonrpc;
#[cfg(any(feature = "http-server", feature = "ws"))]
mod limit;
mod peek;
#[cfg(feature = "server")]
mod server;
mod session;
#[cfg(feature = "stdio")]
pub mod stdio;
mod transport;
pub mod types;
pub mod version;
#[cfg(feature = "ws")]
pub mod ws;

#[cfg(feature = "client")]
pub use client::{
    Client, ClientOptions, Connection, ElicitationHandler, ListenerHandle, ResourceSubscription,
    SamplingHandler,
};
pub use error::Error;
#[cfg(any(feature = "http-server", feature = "ws"))]
pub use host_policy::HostPolicy;
#[cfg(feature = "http-client")]
pub use http::HttpClientOptions;
#[cfg(feature = "http-server")]
pub use http::{HttpServerConfig, StreamableHttpServer};
#[cfg(any(feature = "http-server", feature = "ws"))]
pub use http_context::HttpContext;
pub use jsonrpc::{ErrorCode, ErrorObject, RequestId};
#[cfg(feature = "server")]
pub use server::{
    schema_for, HandlerError, HandlerResult, IntoToolResult, RegistrationError, RequestCtx, Server,
    ServerBuilder, ServerSession,
};
pub use session::{BoxFuture, EngineConfig, Peer, ProgressCallback, RequestOptions, Stats};
#[cfg(feature = "stdio")]
pub use stdio::{StderrMode, StdioCommand};
pub use tokio_util::sync::CancellationToken;
pub use transport::{
    memory, Inbound, Outbound, Transport, TransportControl, DEFAULT_MAX_FRAME_BYTES,
};
#[cfg(feature = "ws")]
pub use ws::{WsClientOptions, WsServerOptions};

/// Internals the fuzz targets (the repository's `fuzz/` crate and `crates/purra-fuzz`) drive
/// directly: the frame codec, the stdio line reader, the SSE parser and the Last-Event-ID helper
/// (the Host/Origin checks are the public [`HostPolicy`]). **Unstable:** no semver promise; only
/// with the non-default `fuzzing` feature.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod __private {
    pub use crate::jsonrpc::{
        decode_frame, encode_error, encode_notification, encode_request, encode_response,
        DecodeError, Frame, Message,
    };

    /// The stdio line reader: frames of at most `max_frame` bytes from `reader` into `tx`.
    #[cfg(feature = "stdio")]
    pub async fn read_lines<R: tokio::io::AsyncRead + Unpin>(
        reader: R,
        max_frame: usize,
        tx: tokio::sync::mpsc::Sender<crate::Inbound>,
    ) {
        crate::stdio::read_lines(reader, max_frame, tx).await
    }

    #[cfg(any(feature = "http-server", feature = "http-client"))]
    pub use crate::http::sse::{Event as SseEvent, Item as SseItem, Parser as SseParser};

    /// The stream and sequence number of a `Last-Event-ID` the HTTP server issued.
    #[cfg(feature = "http-server")]
    pub fn parse_event_id(id: &str) -> Option<(u64, u64)> {
        crate::http::server::parse_event_id(id)
    }
}
