//! The one-tool server written with rmcp 3.11.0 as its documentation shows (`#[tool_router]`,
//! `Parameters`, `Json`): `echo {text}` and `add {a, b}` (structured `{sum}`).
//!
//! Usage: `rmcp-server` (stdio with `stdio()`), `rmcp-server --pipes` (stdio with
//! `stdio_pipes()`), `rmcp-server --http PORT [--nodelay]` (Streamable HTTP on 127.0.0.1:PORT at
//! `/mcp`, rmcp's default configuration and local session manager, served with `axum::serve` as
//! rmcp's examples do; `--nodelay` sets `TCP_NODELAY` on every accepted socket, as a tuned
//! deployment would).

use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{schemars, tool, tool_router, ServiceExt};
use serde::{Deserialize, Serialize};

#[derive(Clone)]
struct Bench;

#[derive(Deserialize, schemars::JsonSchema)]
struct EchoParams {
    text: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct AddParams {
    a: f64,
    b: f64,
}

#[derive(Serialize, schemars::JsonSchema)]
struct AddOutput {
    sum: f64,
}

#[tool_router(server_handler)]
impl Bench {
    #[tool(description = "Echo the text")]
    fn echo(&self, Parameters(p): Parameters<EchoParams>) -> String {
        p.text
    }

    #[tool(description = "Add two numbers")]
    fn add(&self, Parameters(p): Parameters<AddParams>) -> Json<AddOutput> {
        Json(AddOutput { sum: p.a + p.b })
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        None => {
            Bench
                .serve(rmcp::transport::stdio())
                .await?
                .waiting()
                .await?
        }
        Some("--pipes") => {
            Bench
                .serve(rmcp::transport::io::stdio_pipes())
                .await?
                .waiting()
                .await?
        }
        Some("--http") => {
            let port: u16 = args.get(1).ok_or("--http PORT")?.parse()?;
            let service = StreamableHttpService::new(
                || Ok(Bench),
                LocalSessionManager::default().into(),
                StreamableHttpServerConfig::default(),
            );
            let router = axum::Router::new().nest_service("/mcp", service);
            // As rmcp's examples serve it, `axum::serve` leaves Nagle's algorithm on (no
            // TCP_NODELAY); `--nodelay` turns it off on every accepted socket.
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
            if args.get(2).map(String::as_str) == Some("--nodelay") {
                use axum::serve::ListenerExt;
                let listener = listener.tap_io(|tcp| {
                    let _ = tcp.set_nodelay(true);
                });
                axum::serve(listener, router).await?;
            } else {
                axum::serve(listener, router).await?;
            }
            return Ok(());
        }
        Some(other) => return Err(format!("unknown argument {other}").into()),
    };
    Ok(())
}
