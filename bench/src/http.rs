//! A raw Streamable HTTP client for load: the same bytes against every server (purra, rmcp, the
//! TypeScript and Python SDKs), so the server is what differs. One session per simulated client:
//! `initialize`, `notifications/initialized`, then `tools/call add` requests one at a time, each
//! answer (JSON body or SSE stream) checked for the exact sum. A 2026-07-28 client has no
//! session: every request is a self-contained POST carrying the `_meta` envelope and the
//! `Mcp-Method`/`Mcp-Name` headers.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The revision every session asks for (all four servers speak it).
pub const PROTOCOL_VERSION: &str = "2025-06-18";

/// The stateless revision: no session, the context in every request's `_meta`.
pub const MODERN_VERSION: &str = "2026-07-28";

/// Which revision a load run speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// A session (`initialize`, then the session id on every request) at this handshake revision.
    Session(&'static str),
    /// 2026-07-28: every request stands alone.
    Stateless,
}

/// One MCP session over Streamable HTTP (or, in 2026-07-28, a client without one).
#[derive(Debug)]
pub struct Session {
    http: reqwest::Client,
    url: String,
    id: Option<String>,
    next_id: u64,
    version: &'static str,
    stateless: bool,
}

/// What went wrong with a session or a call.
pub type HttpError = String;

impl Session {
    /// Opens a session at [`PROTOCOL_VERSION`]: `initialize` and `notifications/initialized`.
    pub async fn open(http: reqwest::Client, url: &str) -> Result<Session, HttpError> {
        Session::open_era(http, url, Era::Session(PROTOCOL_VERSION)).await
    }

    /// Opens a session at a handshake revision, or a stateless 2026-07-28 client (nothing is
    /// sent until the first request).
    pub async fn open_era(
        http: reqwest::Client,
        url: &str,
        era: Era,
    ) -> Result<Session, HttpError> {
        let (version, stateless) = match era {
            Era::Session(v) => (v, false),
            Era::Stateless => (MODERN_VERSION, true),
        };
        let mut s = Session {
            http,
            url: url.to_owned(),
            id: None,
            next_id: 1,
            version,
            stateless,
        };
        if stateless {
            return Ok(s);
        }
        let init = s
            .request(
                "initialize",
                json!({"protocolVersion": version, "capabilities": {},
                       "clientInfo": {"name": "purra-bench-http", "version": "1"}}),
            )
            .await?;
        if init.pointer("/result/protocolVersion") != Some(&json!(version)) {
            return Err(format!("initialize answered {init}"));
        }
        let body = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
        let resp = s.post(body).await?;
        if resp.status().as_u16() != 202 {
            return Err(format!("notifications/initialized: HTTP {}", resp.status()));
        }
        Ok(s)
    }

    fn post(
        &self,
        body: String,
    ) -> impl std::future::Future<Output = Result<reqwest::Response, HttpError>> {
        self.post_with(body, &[])
    }

    fn post_with(
        &self,
        body: String,
        headers: &[(&str, &str)],
    ) -> impl std::future::Future<Output = Result<reqwest::Response, HttpError>> {
        let mut req = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", self.version)
            .body(body);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        if let Some(id) = &self.id {
            req = req.header("mcp-session-id", id);
        }
        async move { req.send().await.map_err(|e| format!("POST: {e}")) }
    }

    /// Sends one request and returns its response message (from a JSON body or an SSE stream).
    pub async fn request(&mut self, method: &str, params: Value) -> Result<Value, HttpError> {
        let id = self.next_id;
        self.next_id += 1;
        let mut params = params;
        let name = params
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let mut headers = Vec::new();
        if self.stateless {
            params["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": self.version,
                "io.modelcontextprotocol/clientInfo": {"name": "purra-bench-http", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {},
            });
            headers.push(("mcp-method", method));
            if let Some(n) = &name {
                headers.push(("mcp-name", n.as_str()));
            }
        }
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let mut resp = self.post_with(body.to_string(), &headers).await?;
        if !resp.status().is_success() {
            return Err(format!("{method}: HTTP {}", resp.status()));
        }
        if let Some(sid) = resp.headers().get("mcp-session-id") {
            self.id = Some(sid.to_str().map_err(|e| e.to_string())?.to_owned());
        }
        let sse = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !sse {
            let bytes = resp.bytes().await.map_err(|e| e.to_string())?;
            return serde_json::from_slice(&bytes).map_err(|e| format!("{method}: {e}"));
        }
        // Read events until the response to this request (the stream may stay open after it).
        let mut buf = Vec::new();
        loop {
            let chunk = resp
                .chunk()
                .await
                .map_err(|e| format!("{method}: {e}"))?
                .ok_or_else(|| format!("{method}: stream ended without the response"))?;
            buf.extend_from_slice(&chunk);
            while let Some(end) = find_event_end(&buf) {
                let event: Vec<u8> = buf.drain(..end).collect();
                if let Some(msg) = event_data(&event) {
                    if msg.get("id") == Some(&json!(id)) {
                        return Ok(msg);
                    }
                }
            }
        }
    }

    /// Calls `add {a, b}` and checks the answer is the exact sum (structured content, or the text
    /// mirroring it).
    pub async fn add(&mut self, a: u64, b: u64) -> Result<(), HttpError> {
        let msg = self
            .request(
                "tools/call",
                json!({"name": "add", "arguments": {"a": a, "b": b}}),
            )
            .await?;
        let sum = (a + b) as f64;
        let structured = msg
            .pointer("/result/structuredContent/sum")
            .and_then(Value::as_f64);
        let text = msg
            .pointer("/result/content/0/text")
            .and_then(Value::as_str)
            .and_then(|t| serde_json::from_str::<Value>(t).ok())
            .and_then(|v| v.get("sum").and_then(Value::as_f64));
        if structured.or(text) != Some(sum) || msg.pointer("/result/isError") == Some(&json!(true))
        {
            return Err(format!("add {a} {b}: wrong answer {msg}"));
        }
        if self.stateless && msg.pointer("/result/resultType") != Some(&json!("complete")) {
            return Err(format!(
                "add {a} {b}: not a complete 2026-07-28 result {msg}"
            ));
        }
        Ok(())
    }
}

fn find_event_end(buf: &[u8]) -> Option<usize> {
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn event_data(event: &[u8]) -> Option<Value> {
    let text = std::str::from_utf8(event).ok()?;
    let data: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| d.strip_prefix(' ').unwrap_or(d))
        .collect();
    if data.is_empty() {
        return None;
    }
    serde_json::from_str(&data.join("\n")).ok()
}

/// An HTTP client fit for load: no proxy lookups, `TCP_NODELAY`, a large idle pool.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(1024)
        .build()
        .expect("reqwest client")
}

/// The outcome of one load run.
#[derive(Debug, Clone)]
pub struct LoadResult {
    /// Calls answered per second over the whole run (sessions already open).
    pub calls_per_s: f64,
    /// Median call latency in microseconds.
    pub p50_us: f64,
    /// 99th percentile call latency in microseconds.
    pub p99_us: f64,
}

/// `clients` sessions, each making `calls / clients` `add` calls one at a time; every answer is
/// checked. Sessions are opened before the clock starts.
pub async fn load(url: &str, clients: usize, calls: usize) -> Result<LoadResult, HttpError> {
    load_era(url, clients, calls, Era::Session(PROTOCOL_VERSION)).await
}

/// [`load`] in `era`: sessions at a handshake revision, or stateless 2026-07-28 clients (each
/// call one self-contained POST).
pub async fn load_era(
    url: &str,
    clients: usize,
    calls: usize,
    era: Era,
) -> Result<LoadResult, HttpError> {
    let http = client();
    let mut sessions = Vec::with_capacity(clients);
    for _ in 0..clients {
        sessions.push(Session::open_era(http.clone(), url, era).await?);
    }
    // Warm-up: every session makes a few calls.
    for (k, s) in sessions.iter_mut().enumerate() {
        for i in 0..4 {
            s.add(k as u64, i).await?;
        }
    }
    let per = (calls / clients).max(1);
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for (k, mut s) in sessions.into_iter().enumerate() {
        tasks.spawn(async move {
            let mut lat = Vec::with_capacity(per);
            for i in 0..per {
                let t = Instant::now();
                s.add(k as u64, i as u64).await?;
                lat.push(crate::micros_since(t));
            }
            Ok::<_, HttpError>(lat)
        });
    }
    let mut all = Vec::with_capacity(per * clients);
    while let Some(r) = tasks.join_next().await {
        all.extend(r.map_err(|e| e.to_string())??);
    }
    let elapsed = start.elapsed();
    let lat = crate::Latencies::new(all);
    Ok(LoadResult {
        calls_per_s: (per * clients) as f64 / elapsed.as_secs_f64(),
        p50_us: lat.quantile(0.5),
        p99_us: lat.quantile(0.99),
    })
}

/// Waits until `url` accepts a TCP connection (a server process starting), at most `limit`.
pub async fn wait_listening(addr: std::net::SocketAddr, limit: Duration) -> Result<(), HttpError> {
    let start = Instant::now();
    loop {
        // A connection that was given the port as its own source and connected to itself (TCP
        // simultaneous open on an ephemeral port nothing listens on) does not count.
        if let Ok(s) = tokio::net::TcpStream::connect(addr).await {
            if s.local_addr().ok() != s.peer_addr().ok() {
                return Ok(());
            }
        }
        if start.elapsed() > limit {
            return Err(format!("nothing listens on {addr} after {limit:?}"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
