//! An MCP endpoint mounted at `/mcp` in an existing axum app beside its own `/health`, with
//! graceful shutdown on ctrl-c. `cargo run -p examples --example axum_app -- [ADDR]`.
#![allow(clippy::print_stdout)] // it prints the address it listens on

use axum::{routing::get, Router};
use purra_protocol::{HandlerResult, RegistrationError, RequestCtx, Server, StreamableHttpServer};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Echo {
    text: String,
}

/// The MCP server the app mounts.
pub fn server() -> Result<Server, RegistrationError> {
    let server = Server::builder("axum-app", "1.0.0").build();
    let echo = |e: Echo, _: RequestCtx| async move { HandlerResult::Ok(e.text) };
    server.tool("echo", "Says the text back", echo)?;
    Ok(server)
}

/// Serves the app on ADDR (default 127.0.0.1:8000) until ctrl-c, then shuts down gracefully.
#[tokio::main(flavor = "current_thread")]
pub async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mcp = StreamableHttpServer::new(server()?, Default::default());
    let app = Router::new()
        .route("/health", get(|| async { "ok" }))
        .nest_service("/mcp", mcp.clone());

    let addr = std::env::args().nth(1).unwrap_or("127.0.0.1:8000".into());
    let listener = tokio::net::TcpListener::bind(addr).await?;
    println!("listening on http://{}/mcp", listener.local_addr()?);
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            tokio::signal::ctrl_c().await.ok();
            mcp.shutdown(); // ends the open SSE streams, which would hold the shutdown up
        })
        .await?;
    Ok(())
}
