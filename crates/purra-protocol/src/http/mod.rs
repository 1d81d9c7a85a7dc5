//! Streamable HTTP (the 2025 revisions' HTTP transport), server and client.

pub mod client;
pub mod server;
mod sse;

pub use client::{connect, HttpClientOptions};
/// The HTTP client crate the Streamable HTTP client is built on, for
/// [`HttpClientOptions::http_client`] and [`HttpClientOptions::root_certificate`].
pub use reqwest;
pub use server::{
    HttpServerConfig, StreamableHttpServer, PROTOCOL_VERSION_HEADER, SESSION_ID_HEADER,
};
