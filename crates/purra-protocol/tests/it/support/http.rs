//! A Streamable HTTP server on a loopback port chosen by the OS, served until the handle drops,
//! and a POST to it.

use std::net::SocketAddr;

use purra_protocol::{HttpServerConfig, Server, StreamableHttpServer};
use tokio_util::sync::CancellationToken;

/// A server being served: its endpoint, address and HTTP server; dropping it stops the serving.
pub struct Running {
    pub url: String,
    pub addr: SocketAddr,
    pub http: StreamableHttpServer,
    pub stop: CancellationToken,
}

impl Running {
    /// The server's origin, `http://ADDR`, for paths other than `/mcp`.
    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// POSTs `body` to `url` as a client would, with `session` and `version` as its
/// `Mcp-Session-Id` and `MCP-Protocol-Version` when given.
pub async fn post(
    url: &str,
    session: Option<&str>,
    version: Option<&str>,
    body: &str,
) -> reqwest::Response {
    let mut rb = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_owned());
    if let Some(s) = session {
        rb = rb.header("mcp-session-id", s);
    }
    if let Some(v) = version {
        rb = rb.header("mcp-protocol-version", v);
    }
    rb.send().await.unwrap()
}

/// Serves `server` with `config` at `http://127.0.0.1:PORT/mcp`.
pub async fn serve_http(server: Server, config: HttpServerConfig) -> Running {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let http = StreamableHttpServer::new(server, config);
    let stop = CancellationToken::new();
    let serve = http.clone();
    let token = stop.clone();
    tokio::spawn(async move {
        serve
            .serve(listener, async move { token.cancelled().await })
            .await
    });
    Running {
        url: format!("http://{addr}/mcp"),
        addr,
        http,
        stop,
    }
}
