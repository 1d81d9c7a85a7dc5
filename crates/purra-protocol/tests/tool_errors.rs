//! A tool handler's `Err` reaches the client as a result with `isError` (the model reads it);
//! only an `ErrorObject` becomes a JSON-RPC error, code and data kept. Asserted as exact JSON
//! over stdio (this test binary re-executed as a server, on real pipes) and over Streamable
//! HTTP (a real socket). `harness = false`: `main` is either the server or the test.

use std::process::Stdio;
use std::time::Duration;

use purra_protocol::{
    ErrorObject, HandlerError, HandlerResult, HttpServerConfig, Json, RequestCtx, Server,
    StreamableHttpServer,
};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct City {
    city: String,
}

#[derive(serde::Serialize, schemars::JsonSchema)]
struct Forecast {
    city: String,
    high: i32,
}

/// A failure with a cause, as `anyhow` and `thiserror` errors have.
#[derive(Debug)]
struct Upstream(std::io::Error);

impl std::fmt::Display for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the weather service failed")
    }
}

impl std::error::Error for Upstream {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

fn server() -> Server {
    let server = Server::builder("errors", "1").build();
    server
        .tool(
            "forecast",
            "A forecast",
            |c: City, _: RequestCtx| async move {
                match c.city.as_str() {
                    "Oslo" => Ok(Json(Forecast {
                        city: c.city,
                        high: 9,
                    })),
                    // A plain message: the model reads it and can try another city.
                    "Atlantis" => Err(format!("{} is not a city I know", c.city).into()),
                    // An error with a cause: the message and its sources.
                    "Lisbon" => Err(Upstream(std::io::Error::other("connection reset")).into()),
                    // An explicit protocol error.
                    _ => Err(HandlerError::from(
                        ErrorObject::invalid_params("unknown city")
                            .with_data(json!({"city": c.city})),
                    )),
                }
            },
        )
        .expect("registers");
    server
        .tool(
            "boxed",
            "Fails with a boxed error",
            |(), _: RequestCtx| async move {
                let e: Box<dyn std::error::Error + Send + Sync> = "boxed failure".into();
                HandlerResult::<String>::Err(e.into())
            },
        )
        .expect("registers");
    server
}

/// The calls and the exact answers, whatever the transport.
const CALLS: [(&str, &str); 5] = [
    (
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"forecast","arguments":{"city":"Oslo"}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"{\"city\":\"Oslo\",\"high\":9}"}],"structuredContent":{"city":"Oslo","high":9}}}"#,
    ),
    (
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"forecast","arguments":{"city":"Atlantis"}}}"#,
        r#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"Atlantis is not a city I know"}],"isError":true}}"#,
    ),
    (
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"forecast","arguments":{"city":"Lisbon"}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"the weather service failed: connection reset"}],"isError":true}}"#,
    ),
    (
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"forecast","arguments":{"city":"Nowhere"}}}"#,
        r#"{"jsonrpc":"2.0","id":4,"error":{"code":-32602,"message":"unknown city","data":{"city":"Nowhere"}}}"#,
    ),
    (
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"boxed","arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"boxed failure"}],"isError":true}}"#,
    ),
];

const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

async fn over_stdio() {
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .arg("--serve-stdio")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    stdin
        .write_all(format!("{INIT}\n").as_bytes())
        .await
        .unwrap();
    let init = lines.next_line().await.unwrap().unwrap();
    assert!(
        init.starts_with(r#"{"jsonrpc":"2.0","id":0,"result":"#),
        "{init}"
    );
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .await
        .unwrap();
    for (call, answer) in CALLS {
        stdin
            .write_all(format!("{call}\n").as_bytes())
            .await
            .unwrap();
        let got = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
            .await
            .expect("an answer within 10 s")
            .unwrap()
            .unwrap();
        assert_eq!(got, answer, "over stdio");
    }
    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("the server exits at EOF")
        .unwrap();
    assert!(status.success(), "{status:?}");
}

async fn over_http() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let config = HttpServerConfig {
        stateless: true,
        json_response: true,
        ..HttpServerConfig::default()
    };
    let http = StreamableHttpServer::new(server(), config);
    let stop = tokio_util::sync::CancellationToken::new();
    let token = stop.clone();
    tokio::spawn(async move {
        http.serve(listener, async move { token.cancelled().await })
            .await
    });
    let client = reqwest::Client::new();
    for (call, answer) in CALLS {
        let resp = client
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .body(call)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "over HTTP: {call}");
        assert_eq!(resp.text().await.unwrap(), answer, "over HTTP");
    }
    stop.cancel();
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    if std::env::args().any(|a| a == "--serve-stdio") {
        rt.block_on(server().serve_stdio());
        return;
    }
    rt.block_on(async {
        over_stdio().await;
        over_http().await;
    });
    eprintln!("tool_errors: 5 calls over stdio and over Streamable HTTP answered as expected");
}
