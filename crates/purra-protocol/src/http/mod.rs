//! Streamable HTTP (the 2025 revisions' HTTP transport), server and client.

#[cfg(feature = "http-client")]
pub(crate) mod client;
#[cfg(all(feature = "http-client", feature = "legacy-sse"))]
pub(crate) mod legacy_client;
#[cfg(feature = "http-server")]
mod listen;
#[cfg(feature = "http-server")]
pub(crate) mod server;
pub(crate) mod sse;
#[cfg(feature = "http-server")]
mod wait;

#[cfg(feature = "http-server")]
pub use crate::http_context::HttpContext;
#[cfg(all(feature = "http-client", feature = "legacy-sse"))]
pub use client::HttpTransport;
#[cfg(feature = "http-client")]
pub use client::{connect, AuthChallenge, HeaderProvider, HttpAuth, HttpClientOptions};
#[cfg(all(feature = "http-client", feature = "legacy-sse"))]
pub use legacy_client::connect_sse;
#[cfg(feature = "http-server")]
pub use listen::{
    serve, serve_with, ConnectionLimits, ConnectionStats, PeerAddr, DEFAULT_HEADER_READ_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
};
#[cfg(all(feature = "http-server", feature = "legacy-sse"))]
pub use server::LegacySse;
#[cfg(feature = "http-server")]
pub use server::{BoundHttpServer, HttpServerConfig, StreamableHttpServer};

/// The header carrying the session id.
pub const SESSION_ID_HEADER: &str = "mcp-session-id";
/// The header carrying the negotiated revision on every request after `initialize`.
pub const PROTOCOL_VERSION_HEADER: &str = "mcp-protocol-version";
/// [`SESSION_ID_HEADER`] as a header name: a lookup by it skips parsing the name.
#[cfg(feature = "http-server")]
pub(crate) const SESSION_ID: http::HeaderName = http::HeaderName::from_static(SESSION_ID_HEADER);
/// [`PROTOCOL_VERSION_HEADER`] as a header name.
#[cfg(feature = "http-server")]
pub(crate) const PROTOCOL_VERSION: http::HeaderName =
    http::HeaderName::from_static(PROTOCOL_VERSION_HEADER);
/// The HTTP client crate the Streamable HTTP client is built on, for
/// [`HttpClientOptions::http_client`] and [`HttpClientOptions::root_certificate`].
#[cfg(feature = "http-client")]
pub use reqwest;
