//! Streamable HTTP (the 2025 revisions' HTTP transport), server and client.

pub mod client;
pub mod server;
mod sse;

pub use client::{connect, HttpClientOptions};
pub use server::{
    HttpServerConfig, StreamableHttpServer, PROTOCOL_VERSION_HEADER, SESSION_ID_HEADER,
};
