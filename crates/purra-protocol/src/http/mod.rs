//! Streamable HTTP (the 2025 revisions' HTTP transport), server and client.

pub mod client;
mod listen;
pub mod server;
mod sse;

pub use client::{connect, HttpClientOptions};
pub use listen::{
    serve, ConnectionLimits, ConnectionStats, DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_MAX_CONNECTIONS,
};
pub use server::{
    HttpContext, HttpServerConfig, StreamableHttpServer, PROTOCOL_VERSION_HEADER, SESSION_ID_HEADER,
};
