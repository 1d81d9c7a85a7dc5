//! The floor of an HTTP front in front of an HTTP upstream: purra's Streamable HTTP server (the
//! default configuration, sessions in memory, no store) whose one tool `add` hands each call to
//! purra's HTTP client, one upstream session shared by every caller, and returns the upstream's
//! result as it came. No adapter: no policy, no scopes, no receipts, no session store.
//!
//! Usage: `http-forward --port PORT --upstream URL` (serves 127.0.0.1:PORT at `/mcp`, a
//! multi-thread runtime like `purra gateway`). The suite's HTTP-upstream rows name it beside the
//! gateway; `http-load` or `bench-suite --upstream` drive it.

use std::sync::Arc;

use purra_protocol::{
    Client, ClientOptions, HandlerResult, HttpClientOptions, HttpServerConfig, RequestCtx, Server,
    StreamableHttpServer,
};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Deserialize, JsonSchema)]
struct Add {
    a: f64,
    b: f64,
}

fn usage() -> ! {
    eprintln!("usage: http-forward --port PORT --upstream URL");
    std::process::exit(64)
}

#[tokio::main]
async fn main() {
    let (mut port, mut upstream) = (None, None);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| usage());
        match a.as_str() {
            "--port" => port = Some(value().parse::<u16>().unwrap_or_else(|_| usage())),
            "--upstream" => upstream = Some(value()),
            _ => usage(),
        }
    }
    let (Some(port), Some(upstream)) = (port, upstream) else {
        usage()
    };
    let conn = Client::connect_http(
        &upstream,
        HttpClientOptions::default(),
        ClientOptions::default(),
    )
    .await
    .unwrap_or_else(|e| {
        eprintln!("http-forward: cannot connect to {upstream}: {e}");
        std::process::exit(1)
    });
    let conn = Arc::new(conn);
    let server = Server::builder("http-forward", "0.1.0").build();
    server
        .tool(
            "add",
            "Add two numbers (upstream)",
            move |Add { a, b }, _ctx: RequestCtx| {
                let conn = conn.clone();
                async move {
                    let args = serde_json::json!({"a": a, "b": b});
                    HandlerResult::Ok(conn.call_tool("add", args).await?)
                }
            },
        )
        .expect("add registers");
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("bind");
    let http = StreamableHttpServer::new(server, HttpServerConfig::default());
    let _ = http.serve(listener, std::future::pending()).await;
}
