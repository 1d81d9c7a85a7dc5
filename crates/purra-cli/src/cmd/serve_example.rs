//! `purra serve-example`: purra's example server (`fixture_server`, the surface
//! of `peers/FIXTURES.md`) over stdio, Streamable HTTP (with the HTTP+SSE transport of
//! 2024-11-05 beside it, at `/sse`) or WebSocket.

use purra_protocol::auth::{AuthLayer, JwtValidator};
use purra_protocol::http::{serve, LegacySse};
use purra_protocol::ws::{self, WsServerOptions};
use purra_protocol::{HttpServerConfig, StreamableHttpServer};
use tokio::net::TcpListener;

use crate::cli::ServeArgs;
use crate::cmd::interrupted;
use crate::exit::Failure;

/// Runs `purra serve-example`. Over HTTP and WebSocket it prints `listening on <url>` to stderr
/// once bound (with the port the OS chose for port 0) and serves until SIGINT or SIGTERM.
pub async fn run(args: ServeArgs) -> Result<(), Failure> {
    let server = crate::fixture_server::build();
    if let Some(addr) = &args.http {
        let listener = bind(addr).await?;
        let local = listener.local_addr().map_err(io_failure)?;
        let url = format!("http://{local}/mcp");
        eprintln!("listening on {url}");
        eprintln!("and for HTTP+SSE (2024-11-05) clients on http://{local}/sse");
        let config = || HttpServerConfig {
            legacy_sse: Some(LegacySse::default()),
            ..HttpServerConfig::default()
        };
        match &args.auth_issuer {
            None => StreamableHttpServer::new(server, config())
                .serve(listener, interrupted())
                .await
                .map_err(io_failure)?,
            Some(issuer) => {
                // The guard in front of the endpoint; one token ends the accept loop and the
                // endpoint's open streams.
                let validator = JwtValidator::new(issuer, &url)
                    .map_err(|e| Failure::usage(format!("--auth-issuer: {e}")))?;
                let guard = AuthLayer::new(&url, issuer, validator)
                    .map_err(|e| Failure::usage(format!("--auth-issuer: {e}")))?
                    .required_scopes(args.auth_scopes.iter().cloned());
                eprintln!("protected resource metadata at {}", guard.metadata_url());
                let config = config();
                let stop = config.shutdown.clone();
                let limits = config.connections.clone();
                let endpoint = StreamableHttpServer::new(server, config).router();
                let trigger = stop.clone();
                tokio::spawn(async move {
                    interrupted().await;
                    trigger.cancel();
                });
                serve(listener, guard.layer(endpoint), limits, stop)
                    .await
                    .map_err(io_failure)?;
            }
        }
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
