//! `purra serve-example`: purra's example server (`purra_examples::fixture_server`, the surface
//! of `peers/FIXTURES.md`) over stdio, Streamable HTTP or WebSocket.

use purra_protocol::ws::{self, WsServerOptions};
use purra_protocol::{HttpServerConfig, StreamableHttpServer};
use tokio::net::TcpListener;

use crate::cli::ServeArgs;
use crate::cmd::interrupted;
use crate::exit::Failure;

/// Runs `purra serve-example`. Over HTTP and WebSocket it prints `listening on <url>` to stderr
/// once bound (with the port the OS chose for port 0) and serves until SIGINT or SIGTERM.
pub async fn run(args: ServeArgs) -> Result<(), Failure> {
    let server = purra_examples::fixture_server::build();
    if let Some(addr) = &args.http {
        let listener = bind(addr).await?;
        let local = listener.local_addr().map_err(io_failure)?;
        eprintln!("listening on http://{local}/mcp");
        StreamableHttpServer::new(server, HttpServerConfig::default())
            .serve(listener, interrupted())
            .await
            .map_err(io_failure)?;
    } else if let Some(addr) = &args.ws {
        let listener = bind(addr).await?;
        let local = listener.local_addr().map_err(io_failure)?;
        eprintln!("listening on ws://{local}");
        ws::serve(server, listener, WsServerOptions::default(), interrupted()).await;
    } else {
        server.serve_stdio().await;
    }
    Ok(())
}

async fn bind(addr: &str) -> Result<TcpListener, Failure> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| Failure::usage(format!("cannot listen on {addr}: {e}")))
}

fn io_failure(e: std::io::Error) -> Failure {
    Failure::protocol("serving", purra_protocol::Error::Transport(e.to_string()))
}
