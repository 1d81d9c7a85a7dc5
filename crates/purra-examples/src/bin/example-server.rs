//! The example MCP server: the fixture surface of `peers/FIXTURES.md`, over stdio (default),
//! Streamable HTTP (`--http ADDR`, endpoint `/mcp`, and beside it the HTTP+SSE transport of
//! 2024-11-05 at `/sse` and `/messages`) or WebSocket (`--ws ADDR`; it prints
//! `listening on ws://ADDR` to stderr, serves every connection with one shared fixture server
//! and stops on SIGINT or SIGTERM). In stdio mode nothing but protocol goes to stdout.

use purra_protocol::http::LegacySse;
use purra_protocol::ws::{self, WsServerOptions};
use purra_protocol::{HttpServerConfig, StreamableHttpServer};

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let server = purra_examples::fixture_server::build();
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        [] | ["--stdio"] => server.serve_stdio().await,
        ["--http", addr] => {
            let listener = match tokio::net::TcpListener::bind(addr).await {
                Ok(l) => l,
                Err(e) => {
                    eprintln!("purra-example-server: cannot bind {addr}: {e}");
                    std::process::exit(1);
                }
            };
            let local = listener.local_addr().expect("bound address");
            eprintln!("listening on http://{local}/mcp");
            let config = HttpServerConfig {
                legacy_sse: Some(LegacySse::default()),
                ..HttpServerConfig::default()
            };
            let http = StreamableHttpServer::new(server, config);
            let shutdown = async {
                let _ = tokio::signal::ctrl_c().await;
            };
            if let Err(e) = http.serve(listener, shutdown).await {
                eprintln!("purra-example-server: {e}");
                std::process::exit(1);
            }
        }
        ["--ws", addr] => {
            let listener = match tokio::net::TcpListener::bind(addr).await {
                Ok(l) => l,
                Err(e) => {
                    eprintln!("purra-example-server: cannot bind {addr}: {e}");
                    std::process::exit(1);
                }
            };
            let local = listener.local_addr().expect("bound address");
            eprintln!("listening on ws://{local}");
            ws::serve(server, listener, WsServerOptions::default(), interrupted()).await;
        }
        _ => {
            eprintln!("usage: purra-example-server [--stdio | --http ADDR | --ws ADDR]");
            std::process::exit(2);
        }
    }
}

/// Completes on SIGINT or SIGTERM.
async fn interrupted() {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
