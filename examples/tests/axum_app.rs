//! The `axum_app` example for real: it runs in a child process (this binary re-executed) on a
//! free port; the test checks the app's own route, initializes over HTTP, calls a tool, opens
//! the session's GET SSE stream, sends SIGINT, and asserts the stream ended and the process
//! exited 0 within 10 seconds (an open SSE stream must not hold graceful shutdown up).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

#[allow(dead_code)]
#[path = "../axum_app.rs"]
mod app;

/// Set in the child: run the example's `main`.
const CHILD: &str = "PURRA_TEST_AXUM_APP_CHILD";
const BOUND: Duration = Duration::from_secs(10);

/// Kills the child if the test fails before it exits.
struct Reap(Child);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::var_os(CHILD).is_some() {
        return app::main();
    }
    let mut child = Command::new(std::env::current_exe()?)
        .arg("127.0.0.1:0")
        .env(CHILD, "1")
        .stdout(Stdio::piped())
        .spawn()?;
    let stdout = child.stdout.take().expect("piped stdout");
    let mut child = Reap(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("the example's first line: {line:?}"))
        .to_owned();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let sse = rt.block_on(talk(&url));

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.0.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )?;
    let started = Instant::now();
    let rest = rt.block_on(async {
        let mut sse = sse;
        let mut rest = Vec::new();
        loop {
            match tokio::time::timeout(BOUND, sse.chunk()).await {
                Err(_) => panic!("the SSE stream is still open {BOUND:?} after SIGINT"),
                Ok(Err(e)) => panic!("the SSE stream broke instead of ending: {e}"),
                Ok(Ok(None)) => return rest,
                Ok(Ok(Some(bytes))) => rest.extend_from_slice(&bytes),
            }
        }
    });
    assert!(
        !String::from_utf8_lossy(&rest).contains("data:"),
        "no message on the standalone stream: {rest:?}"
    );
    let status = loop {
        if let Some(status) = child.0.try_wait()? {
            break status;
        }
        assert!(
            started.elapsed() < BOUND,
            "the example is still running {BOUND:?} after SIGINT"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0), "the example exits 0: {status}");
    eprintln!(
        "axum_app: /health, initialize, tools/call, GET stream; exit 0 {:?} after SIGINT",
        started.elapsed()
    );
    Ok(())
}

/// Talks to the endpoint at `url`; returns the session's open GET SSE stream.
async fn talk(url: &str) -> reqwest::Response {
    let http = reqwest::Client::new();
    let health = http
        .get(url.replace("/mcp", "/health"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    assert_eq!(health.text().await.unwrap(), "ok");

    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"}}});
    let (session, result) = post(&http, url, None, init).await;
    let session = session.expect("a session id");
    let result = result.expect("an initialize result");
    assert_eq!(
        result["result"]["serverInfo"],
        json!({"name": "axum-app", "version": "1.0.0"})
    );
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (_, none) = post(&http, url, Some(&session), initialized).await;
    assert_eq!(none, None);
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "hi"}}});
    let (_, answer) = post(&http, url, Some(&session), call).await;
    assert_eq!(
        answer,
        Some(json!({"jsonrpc": "2.0", "id": 2,
            "result": {"content": [{"type": "text", "text": "hi"}]}}))
    );

    let sse = http
        .get(url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .unwrap();
    assert_eq!(sse.status(), 200);
    assert_eq!(sse.headers()["content-type"], "text/event-stream");
    sse
}

/// POSTs `body`; returns the session id header and the JSON-RPC message answered, if any
/// (202 answers none).
async fn post(
    http: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    body: Value,
) -> (Option<String>, Option<Value>) {
    let mut req = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_string());
    if let Some(id) = session {
        req = req
            .header("mcp-session-id", id)
            .header("mcp-protocol-version", "2025-06-18");
    }
    let resp = req.send().await.unwrap();
    let session = resp
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    if resp.status() == 202 {
        return (session, None);
    }
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.unwrap();
    let data: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter(|d| !d.trim().is_empty())
        .map(|d| serde_json::from_str(d.trim()).unwrap())
        .collect();
    assert_eq!(data.len(), 1, "one message on the POST stream: {text}");
    (session, data.into_iter().next())
}
