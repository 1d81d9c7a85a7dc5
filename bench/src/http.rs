//! A raw Streamable HTTP client for load: the same bytes against every server (purra, rmcp, the
//! TypeScript and Python SDKs), so the server is what differs. One session per simulated client:
//! `initialize`, `notifications/initialized`, then `tools/call add` requests one at a time, each
//! answer (JSON body or SSE stream) checked for the exact sum. A 2026-07-28 client has no
//! session: every request is a self-contained POST carrying the `_meta` envelope and the
//! `Mcp-Method`/`Mcp-Name` headers.
//!
//! The client is HTTP/1.1 written by hand over one keep-alive TCP connection per session
//! (`TCP_NODELAY`, the request in one write, the response read to the end of its body in the
//! session's own task), so that the load generator spends as little CPU per call as it can on
//! the same cores as the server it measures.

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

/// One MCP session over Streamable HTTP (or, in 2026-07-28, a client without one), on a
/// keep-alive connection of its own.
#[derive(Debug)]
pub struct Session {
    conn: Option<Conn>,
    target: Target,
    id: Option<String>,
    next_id: u64,
    version: &'static str,
    stateless: bool,
    /// An `Authorization` header value sent with every request (a gateway that wants a token).
    auth: Option<String>,
    /// The name the benchmark server's `add` has here (a gateway may prefix it).
    tool: String,
}

/// What went wrong with a session or a call.
pub type HttpError = String;

/// How long one request may take, head to the end of its body.
const REQUEST_LIMIT: Duration = Duration::from_secs(60);

impl Session {
    /// Opens a session at [`PROTOCOL_VERSION`]: `initialize` and `notifications/initialized`.
    pub async fn open(url: &str) -> Result<Session, HttpError> {
        Session::open_era(url, Era::Session(PROTOCOL_VERSION)).await
    }

    /// Opens a session at a handshake revision, or a stateless 2026-07-28 client (nothing is
    /// sent until the first request).
    pub async fn open_era(url: &str, era: Era) -> Result<Session, HttpError> {
        Session::open_with(url, era, None).await
    }

    /// [`Session::open_era`], sending `auth` as the `Authorization` header of every request.
    pub async fn open_with(
        url: &str,
        era: Era,
        auth: Option<String>,
    ) -> Result<Session, HttpError> {
        let (version, stateless) = match era {
            Era::Session(v) => (v, false),
            Era::Stateless => (MODERN_VERSION, true),
        };
        let mut s = Session {
            conn: None,
            target: Target::parse(url)?,
            id: None,
            next_id: 1,
            version,
            stateless,
            auth,
            tool: "add".into(),
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
        let resp = s.post(&body, &[]).await?;
        if resp.status != 202 {
            return Err(format!("notifications/initialized: HTTP {}", resp.status));
        }
        Ok(s)
    }

    /// Closes the session's connection, keeping the session: the next request connects again.
    /// Sessions held only to be counted hold no connection of their own.
    pub fn disconnect(&mut self) {
        self.conn = None;
    }

    /// One POST, its response read to the end of its body. A connection the server closed
    /// while it was idle (nothing of the response read) is replaced once.
    async fn post(&mut self, body: &str, headers: &[(&str, &str)]) -> Result<Response, HttpError> {
        let mut head = String::with_capacity(256 + body.len());
        let t = &self.target;
        head.push_str(&format!(
            "POST {} HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
             accept: application/json, text/event-stream\r\nmcp-protocol-version: {}\r\n\
             content-length: {}\r\n",
            t.path,
            t.authority,
            self.version,
            body.len()
        ));
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        if let Some(id) = &self.id {
            head.push_str(&format!("mcp-session-id: {id}\r\n"));
        }
        if let Some(auth) = &self.auth {
            head.push_str(&format!("authorization: {auth}\r\n"));
        }
        head.push_str("\r\n");
        head.push_str(body);
        for attempt in 0..2 {
            let reused = self.conn.is_some();
            let conn = match &mut self.conn {
                Some(c) => c,
                None => self.conn.insert(Conn::connect(&self.target).await?),
            };
            match tokio::time::timeout(REQUEST_LIMIT, conn.exchange(head.as_bytes())).await {
                Err(_) => {
                    self.conn = None;
                    return Err(format!("no complete response in {REQUEST_LIMIT:?}"));
                }
                Ok(Ok(resp)) => {
                    if resp.close {
                        self.conn = None;
                    }
                    return Ok(resp);
                }
                Ok(Err(e)) => {
                    self.conn = None;
                    if !(reused && e.idle_close && attempt == 0) {
                        return Err(e.message);
                    }
                }
            }
        }
        unreachable!("the second attempt returns")
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
        let mut headers: Vec<(&str, &str)> = Vec::new();
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
        let resp = self.post(&body.to_string(), &headers).await?;
        if !(200..300).contains(&resp.status) {
            return Err(format!("{method}: HTTP {}", resp.status));
        }
        if let Some(sid) = resp.session {
            self.id = Some(sid);
        }
        if !resp.sse {
            return serde_json::from_slice(&resp.body).map_err(|e| format!("{method}: {e}"));
        }
        // The stream's events, in order, until the response to this request.
        let mut rest = &resp.body[..];
        while let Some(end) = find_event_end(rest) {
            if let Some(msg) = event_data(&rest[..end]) {
                if msg.get("id") == Some(&json!(id)) {
                    return Ok(msg);
                }
            }
            rest = &rest[end..];
        }
        Err(format!("{method}: stream ended without the response"))
    }

    /// Calls `add {a, b}` and checks the answer is the exact sum (structured content, or the text
    /// mirroring it).
    pub async fn add(&mut self, a: u64, b: u64) -> Result<(), HttpError> {
        let msg = self
            .request(
                "tools/call",
                json!({"name": self.tool, "arguments": {"a": a, "b": b}}),
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
    load_with(url, clients, calls, era, None, "add").await
}

/// [`load_era`] with `auth` as every request's `Authorization` header (`Bearer …`), calling
/// the benchmark server's `add` by the name `tool` (a gateway that prefixes names).
pub async fn load_with(
    url: &str,
    clients: usize,
    calls: usize,
    era: Era,
    auth: Option<&str>,
    tool: &str,
) -> Result<LoadResult, HttpError> {
    let mut sessions = Vec::with_capacity(clients);
    for _ in 0..clients {
        let mut s = Session::open_with(url, era, auth.map(str::to_owned)).await?;
        tool.clone_into(&mut s.tool);
        sessions.push(s);
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

/// Where a URL's requests go: `host:port` to connect to and the path to ask for.
#[derive(Debug, Clone)]
struct Target {
    authority: String,
    path: String,
}

impl Target {
    fn parse(url: &str) -> Result<Target, HttpError> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("not an http:// URL: {url}"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if authority.is_empty() {
            return Err(format!("no host in {url}"));
        }
        Ok(Target {
            authority: authority.to_owned(),
            path: path.to_owned(),
        })
    }
}

/// A response read to the end of its body.
#[derive(Debug)]
struct Response {
    status: u16,
    /// `Mcp-Session-Id`, when the response carries one.
    session: Option<String>,
    /// The body is an SSE stream (`text/event-stream`).
    sse: bool,
    /// The server ends the connection after this response.
    close: bool,
    body: Vec<u8>,
}

/// A failed exchange; `idle_close` when the server closed the connection before any byte of
/// the response, as a server does with a keep-alive connection it has timed out.
#[derive(Debug)]
struct ExchangeError {
    message: String,
    idle_close: bool,
}

impl ExchangeError {
    fn new(message: impl Into<String>) -> ExchangeError {
        ExchangeError {
            message: message.into(),
            idle_close: false,
        }
    }
}

/// Most headers a response may have.
const MAX_HEADERS: usize = 64;
/// Most bytes a response head or body may have.
const MAX_RESPONSE: usize = 16 << 20;

/// One HTTP/1.1 keep-alive connection: requests are written whole, responses read whole
/// (`Content-Length`, chunked, or to the connection's end), one at a time.
#[derive(Debug)]
struct Conn {
    stream: tokio::net::TcpStream,
    /// Bytes read and not yet consumed.
    buf: Vec<u8>,
}

impl Conn {
    async fn connect(target: &Target) -> Result<Conn, HttpError> {
        let stream = tokio::net::TcpStream::connect(&target.authority)
            .await
            .map_err(|e| format!("connect {}: {e}", target.authority))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        Ok(Conn {
            stream,
            buf: Vec::with_capacity(8192),
        })
    }

    /// Reads more bytes into `buf`; `Ok(false)` at the end of the stream.
    async fn fill(&mut self) -> Result<bool, ExchangeError> {
        use tokio::io::AsyncReadExt;
        if self.buf.len() > MAX_RESPONSE {
            return Err(ExchangeError::new("response larger than 16 MiB"));
        }
        self.buf.reserve(8192);
        let n = self
            .stream
            .read_buf(&mut self.buf)
            .await
            .map_err(|e| ExchangeError::new(format!("read: {e}")))?;
        Ok(n > 0)
    }

    async fn exchange(&mut self, request: &[u8]) -> Result<Response, ExchangeError> {
        use tokio::io::AsyncWriteExt;
        if let Err(e) = self.stream.write_all(request).await {
            return Err(ExchangeError {
                message: format!("write: {e}"),
                idle_close: true,
            });
        }
        // The head.
        let (status, head_len, session, sse, close, framing) = loop {
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut parsed = httparse::Response::new(&mut headers);
            match parsed.parse(&self.buf) {
                Ok(httparse::Status::Complete(len)) => {
                    let status = parsed.code.unwrap_or(0);
                    let (mut session, mut sse, mut close) = (None, false, false);
                    let (mut length, mut chunked) = (None, false);
                    for h in parsed.headers.iter() {
                        let value = std::str::from_utf8(h.value).unwrap_or("").trim();
                        let name = h.name;
                        if name.eq_ignore_ascii_case("mcp-session-id") {
                            session = Some(value.to_owned());
                        } else if name.eq_ignore_ascii_case("content-type") {
                            sse = value.starts_with("text/event-stream");
                        } else if name.eq_ignore_ascii_case("connection") {
                            close = value.eq_ignore_ascii_case("close");
                        } else if name.eq_ignore_ascii_case("content-length") {
                            length = Some(value.parse::<usize>().map_err(|_| {
                                ExchangeError::new(format!("bad content-length {value:?}"))
                            })?);
                        } else if name.eq_ignore_ascii_case("transfer-encoding") {
                            chunked = value.to_ascii_lowercase().ends_with("chunked");
                        }
                    }
                    let framing = if status == 204 || status == 304 || (100..200).contains(&status)
                    {
                        Framing::Length(0)
                    } else if chunked {
                        Framing::Chunked
                    } else if let Some(n) = length {
                        Framing::Length(n)
                    } else {
                        Framing::ToEnd
                    };
                    break (status, len, session, sse, close, framing);
                }
                Ok(httparse::Status::Partial) => {}
                Err(e) => return Err(ExchangeError::new(format!("bad response head: {e}"))),
            }
            let nothing_yet = self.buf.is_empty();
            if !self.fill().await? {
                return Err(ExchangeError {
                    message: "connection closed before the response".into(),
                    idle_close: nothing_yet,
                });
            }
        };
        self.buf.drain(..head_len);
        // The body.
        let mut close = close;
        let body = match framing {
            Framing::Length(n) => {
                if n > MAX_RESPONSE {
                    return Err(ExchangeError::new("response larger than 16 MiB"));
                }
                while self.buf.len() < n {
                    if !self.fill().await? {
                        return Err(ExchangeError::new("connection closed inside a body"));
                    }
                }
                self.buf.drain(..n).collect()
            }
            Framing::ToEnd => {
                while self.fill().await? {}
                close = true;
                std::mem::take(&mut self.buf)
            }
            Framing::Chunked => self.chunked().await?,
        };
        Ok(Response {
            status,
            session,
            sse,
            close,
            body,
        })
    }

    /// A chunked body, decoded, through its last chunk and trailer.
    async fn chunked(&mut self) -> Result<Vec<u8>, ExchangeError> {
        let mut body = Vec::new();
        loop {
            let line = self.line().await?;
            let size = line.split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size, 16)
                .map_err(|_| ExchangeError::new(format!("bad chunk size {size:?}")))?;
            if size == 0 {
                // Trailer lines, up to the empty one.
                while !self.line().await?.is_empty() {}
                return Ok(body);
            }
            if body.len() + size > MAX_RESPONSE {
                return Err(ExchangeError::new("response larger than 16 MiB"));
            }
            while self.buf.len() < size + 2 {
                if !self.fill().await? {
                    return Err(ExchangeError::new("connection closed inside a chunk"));
                }
            }
            if &self.buf[size..size + 2] != b"\r\n" {
                return Err(ExchangeError::new("a chunk not ended by CRLF"));
            }
            body.extend_from_slice(&self.buf[..size]);
            self.buf.drain(..size + 2);
        }
    }

    /// One CRLF-ended line, without its end.
    async fn line(&mut self) -> Result<String, ExchangeError> {
        loop {
            if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8_lossy(&self.buf[..i]).into_owned();
                self.buf.drain(..i + 2);
                return Ok(line);
            }
            if self.buf.len() > 4096 {
                return Err(ExchangeError::new("a chunk line longer than 4 KiB"));
            }
            if !self.fill().await? {
                return Err(ExchangeError::new(
                    "connection closed inside a chunked body",
                ));
            }
        }
    }
}

/// How a response body ends.
#[derive(Debug, Clone, Copy)]
enum Framing {
    Length(usize),
    Chunked,
    ToEnd,
}
