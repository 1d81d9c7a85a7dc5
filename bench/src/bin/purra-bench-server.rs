//! purra's one-tool benchmark server, written as the README shows: `echo {text}` and
//! `add {a, b}` (structured `{sum}`).
//!
//! Usage: `purra-bench-server` (stdio, a current-thread runtime like the README's server),
//! `purra-bench-server --http PORT` (Streamable HTTP on 127.0.0.1:PORT at `/mcp`, the default
//! configuration, a multi-thread runtime), `purra-bench-server --ws PORT` (WebSocket on
//! 127.0.0.1:PORT, multi-thread).

use purra_protocol::{
    HandlerResult, HttpServerConfig, Json, RequestCtx, Server, StreamableHttpServer,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, JsonSchema)]
struct Echo {
    text: String,
}

#[derive(Deserialize, JsonSchema)]
struct Add {
    a: f64,
    b: f64,
}

#[derive(Serialize, JsonSchema)]
struct Sum {
    sum: f64,
}

fn server() -> Server {
    let server = Server::builder("purra-bench", "0.1.0").build();
    server
        .tool(
            "echo",
            "Echo the text",
            |Echo { text }, _ctx: RequestCtx| async move { HandlerResult::Ok(text) },
        )
        .expect("echo registers");
    server
        .tool(
            "add",
            "Add two numbers",
            |Add { a, b }, _ctx: RequestCtx| async move {
                HandlerResult::Ok(Json(Sum { sum: a + b }))
            },
        )
        .expect("add registers");
    server
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let port = |i: usize| -> u16 {
        args.get(i).and_then(|p| p.parse().ok()).unwrap_or_else(|| {
            eprintln!("usage: purra-bench-server [--http PORT | --ws PORT]");
            std::process::exit(2)
        })
    };
    match args.first().map(String::as_str) {
        None => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(server().serve_stdio()),
        Some("--http") => {
            let port = port(1);
            multi_thread().block_on(async move {
                let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
                    .await
                    .expect("bind");
                let http = StreamableHttpServer::new(server(), HttpServerConfig::default());
                let _ = http.serve(listener, std::future::pending()).await;
            })
        }
        Some("--ws") => {
            let port = port(1);
            multi_thread().block_on(async move {
                let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
                    .await
                    .expect("bind");
                purra_protocol::ws::serve(
                    server(),
                    listener,
                    purra_protocol::WsServerOptions::default(),
                    std::future::pending(),
                )
                .await
            })
        }
        Some(_) => {
            let _ = port(usize::MAX);
        }
    }
}

fn multi_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime")
}
