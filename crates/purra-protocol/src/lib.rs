//! purra-protocol: a complete, fast Model Context Protocol implementation — client, server and
//! transports — usable on its own.
//!
//! ```no_run
//! use purra_protocol::{HandlerResult, RegistrationError, RequestCtx, Server};
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct Zip { zip: String }
//!
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() -> Result<(), RegistrationError> {
//!     let server = Server::builder("weather", "0.1.0").build();
//!     server.tool("get_temp", "Current temperature for a US ZIP",
//!         |Zip { zip }, _ctx: RequestCtx| async move { HandlerResult::Ok(format!("{zip}: 72°F")) })?;
//!     server.serve_stdio().await;
//!     Ok(())
//! }
//! ```
//!
//! The server side: [`Server::tool`] derives the input schema from the arguments type (and the
//! output schema from [`Json<T>`]); a handler's `Err` is a result with `isError` the model
//! reads, and only an [`ErrorObject`] a JSON-RPC error ([`HandlerError`]); [`ToolDef`] and
//! [`PromptDef`] carry titles, annotations, icons, `_meta` and execution hints;
//! [`macro@handlers`] turns the methods of one shared value into tools and prompts. Registration
//! returns [`RegistrationError`] values and never panics. The protocol types in [`types`] are
//! `#[non_exhaustive]`, built with constructors and `with_*` builders; revisions are
//! [`ProtocolVersion`]s.
//!
//! The layers, bottom up: the frame codec (one-pass decoding into raw params), the
//! [`Transport`] boundary every transport produces ([`stdio`], [`http`], [`ws`], [`memory`]),
//! the engine (pending requests, timeouts, cancellation, bounded concurrency) behind [`Peer`],
//! then [`Client`] and [`Server`]. The message types are in [`types`], the revisions in
//! [`version`].
//!
//! The public API is what this page lists; the guide's design notes (docs/src/reference/design.md)
//! list it too, for review. Engine internals are private. Cargo features pick the sides and
//! transports (all on by default): `client`, `server`, `stdio`, `http-server`, `http-client`, `ws`,
//! `legacy-sse`, `validation`;
//! `auth` (OAuth 2.1) is off by default. On docs.rs every item behind a feature says which.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod apps;
#[cfg(feature = "auth")]
pub mod auth;
#[cfg(feature = "client")]
mod client;
mod error;
pub mod extensions;
#[cfg(any(feature = "http-server", feature = "ws"))]
mod host_policy;
#[cfg(any(feature = "http-server", feature = "http-client"))]
pub mod http;
#[cfg(any(feature = "http-server", feature = "ws"))]
mod http_context;
pub mod idempotency;
mod jsonrpc;
mod lane;
#[cfg(any(feature = "http-server", feature = "ws"))]
mod limit;
pub mod modern;
mod peek;
// Exported with the server; a client-only build (purra-mcp's) compiles it unused.
#[cfg_attr(not(feature = "server"), allow(dead_code))]
mod principal;
#[cfg(feature = "server")]
pub mod request_state;
#[cfg(feature = "server")]
mod server;
mod session;
pub mod session_store;
pub mod skills;
#[cfg(feature = "stdio")]
pub mod stdio;
pub mod tasks;
mod telemetry;
mod transport;
mod typed_reply;
pub mod types;
pub mod version;
#[cfg(feature = "ws")]
pub mod ws;

#[cfg(feature = "client")]
pub use client::{
    CacheMode, Client, ClientOptions, ClientTaskOptions, Connection, ElicitationHandler,
    ListenerHandle, ProtocolMode, ResourceSubscription, SamplingHandler, SkillContent,
    TaskSubscription,
};
pub use error::{AuthError, Error};
#[cfg(any(feature = "http-server", feature = "ws"))]
pub use host_policy::HostPolicy;
#[cfg(feature = "http-client")]
pub use http::HttpClientOptions;
#[cfg(feature = "http-server")]
pub use http::{HttpServerConfig, StreamableHttpServer};
#[cfg(any(feature = "http-server", feature = "ws"))]
pub use http_context::HttpContext;
pub use jsonrpc::{ErrorObject, RequestId, RpcErrorCode};
#[cfg(feature = "server")]
pub use principal::Principal;
#[cfg(feature = "server")]
pub use server::{
    output_schema_for, schema_for, Args, BoxError, HandlerError, HandlerResult, Handlers,
    IntoPromptResult, IntoToolResult, Json, PromptDef, RegistrationError, RequestCtx, RequestGate,
    Server, ServerBuilder, ServerSession, SessionSnapshot, TaskOptions, ToolDef,
};
pub use session::{BoxFuture, EngineConfig, Peer, ProgressCallback, RequestOptions, Stats};
#[cfg(feature = "stdio")]
pub use stdio::{StderrMode, StdioCommand};
pub use telemetry::{method_label, RequestObserver, RequestOutcome, RequestRecord};
pub use tokio_util::sync::CancellationToken;
pub use transport::{
    memory, Inbound, Outbound, Transport, TransportControl, DEFAULT_MAX_FRAME_BYTES,
};
pub use version::{Era, ProtocolVersion};
#[cfg(feature = "ws")]
pub use ws::{WsClientOptions, WsServerOptions};

/// Registers the `#[tool]` and `#[prompt]` methods of an `impl` block as the tools and prompts
/// of one value shared by every call: a method-based server for shared state.
///
/// ```
/// use std::sync::atomic::{AtomicI64, Ordering};
/// use purra_protocol::{Args, Json, RequestCtx, Server};
///
/// #[derive(Default)]
/// struct Counter {
///     n: AtomicI64,
/// }
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Step {
///     /// How much to add (negative to subtract).
///     by: i64,
/// }
///
/// #[derive(serde::Serialize, schemars::JsonSchema)]
/// struct Value { value: i64 }
///
/// #[purra_protocol::handlers]
/// impl Counter {
///     /// Adds `by` to the counter and returns the new value.
///     #[tool]
///     fn add(&self, Args(step): Args<Step>) -> Json<Value> {
///         Json(Value { value: self.n.fetch_add(step.by, Ordering::SeqCst) + step.by })
///     }
///
///     /// The counter's value.
///     #[tool(read_only, title = "Current value")]
///     async fn get(&self) -> String {
///         self.n.load(Ordering::SeqCst).to_string()
///     }
///
///     /// Resets the counter to `to`; refuses negative values (the model reads why).
///     #[tool(destructive)]
///     async fn reset(&self, to: i64, _ctx: RequestCtx) -> Result<String, String> {
///         if to < 0 {
///             return Err(format!("{to} is negative"));
///         }
///         self.n.store(to, Ordering::SeqCst);
///         Ok(format!("reset to {to}"))
///     }
///
///     /// Asks the model to pick a next step towards `goal`.
///     #[prompt]
///     fn plan(&self, goal: i64) -> String {
///         format!("The counter is at {}; plan the steps to reach {goal}.", self.n.load(Ordering::SeqCst))
///     }
/// }
///
/// # fn main() -> Result<(), purra_protocol::RegistrationError> {
/// let server = Server::builder("counter", "1.0.0").build();
/// server.register(Counter::default())?;
/// # Ok(()) }
/// ```
///
/// The macro writes an implementation of [`Handlers`]; [`Server::register`] adds its tools and
/// prompts. Each marked method:
/// - takes `&self` (the value is shared, in an `Arc`, by every call: keep mutable state behind
///   atomics or a `Mutex`);
/// - takes its arguments as parameters (`city: String, days: u8`: each is one argument, its
///   schema derived from its type), or all of them as one type with `Args(x): Args<T>` (the
///   fields of `T` are the arguments and their doc comments describe them), plus optionally a
///   [`RequestCtx`] for progress, logging, cancellation and requests to the client;
/// - may be `async` or not, and returns anything [`IntoToolResult`] accepts (a tool: text,
///   content, [`Json<T>`] for structured output with a derived output schema, a `Result` whose
///   error becomes an `isError` result) or [`IntoPromptResult`] accepts (a prompt);
/// - is named after the method, and described by its doc comment.
///
/// Options: `#[tool(name = "..", title = "..", description = "..", read_only, destructive,
/// idempotent, open_world)]` (the hints may be given as `= false`) and `#[prompt(name = "..",
/// title = "..", description = "..")]`. `idempotent` also makes the tool honour idempotency keys
/// ([`ToolDef::idempotent`], see [`idempotency`]). For icons, `_meta` or execution hints, register
/// with [`Server::add_tool`] and a [`ToolDef`].
#[cfg(feature = "server")]
pub use purra_macros::handlers;

#[cfg(feature = "server")]
#[doc(hidden)]
pub mod __macro_support {
    //! What `#[handlers]` expands to refers to, so users need no `serde`/`schemars` of their own.
    pub use schemars;
    pub use serde;
}

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
