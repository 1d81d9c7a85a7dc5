//! purra's client against hostile servers: each test asserts the outcome, the time to it (a
//! generous bound: the outcome must not wait for a request timeout) and a bound on the heap the
//! test process grew while it ran. stdio servers are `peers/hostile/stdio_server.py`; the
//! Streamable HTTP servers are scripted here on raw sockets, byte for byte.
//!
//! Each test runs alone in a child process of the test binary, whose counting global allocator
//! measures live and peak heap bytes (`support::heap`), and one at a time so each measures only
//! itself.

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use purra_protocol::{
    Client, ClientOptions, Connection, Error, ErrorObject, HttpClientOptions, RpcErrorCode,
    StderrMode, StdioCommand,
};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::support::{
    self,
    heap::Heap,
    heap::MIB,
    process::{alive, gone_within},
};

/// One test at a time, and the heap it grows: the peak of live bytes above where it started.
struct Measured {
    _one: tokio::sync::MutexGuard<'static, ()>,
    heap: Heap,
}

async fn measure() -> Measured {
    static ONE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let one = ONE.lock().await;
    Measured {
        _one: one,
        heap: Heap::start(),
    }
}

impl Measured {
    /// Asserts the peak heap growth so far stayed under `limit` bytes.
    fn assert_heap_under(&self, limit: usize) {
        self.heap.assert_peak_below(limit, "the test");
    }

    /// Asserts the test took less than `secs` seconds so far.
    fn assert_within(&self, secs: u64) {
        self.heap.assert_within(secs);
    }
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../peers/hostile/stdio_server.py")
}

fn hostile(mode: &str) -> StdioCommand {
    StdioCommand::new("python3")
        .args([script().as_os_str(), std::ffi::OsStr::new(mode)])
        .stderr(StderrMode::Null)
}

async fn connect_stdio(mode: &str) -> Connection {
    Client::connect_stdio(hostile(mode), ClientOptions::default())
        .await
        .expect("the handshake completes")
}

/// 256 MiB of text between `prefix` and `suffix`: the length of the line the server writes.
fn huge_len(prefix: &str, suffix: &str) -> usize {
    prefix.len() + 256 * MIB + suffix.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_256_mib_response_fails_its_request_at_once_whichever_end_names_it() {
    if !support::alone(
        module_path!(),
        "a_256_mib_response_fails_its_request_at_once_whichever_end_names_it",
    ) {
        return;
    }
    let m = measure().await;
    // Requests 0 and 1 are initialize and the tools prefetch; the call is 2.
    let cases = [
        (
            "huge-first",
            huge_len(
                r#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":""#,
                r#""}]}}"#,
            ),
        ),
        (
            "huge-last",
            huge_len(
                r#"{"result":{"content":[{"type":"text","text":""#,
                r#""}]},"jsonrpc":"2.0","id":2}"#,
            ),
        ),
    ];
    for (mode, len) in cases {
        let conn = connect_stdio(mode).await;
        let err = conn.call_tool("t", json!({})).await.unwrap_err();
        assert_eq!(
            err,
            Error::ResponseTooLarge {
                len,
                limit: 4 * MIB
            },
            "{mode}"
        );
        // The line was discarded, not the connection.
        conn.ping().await.unwrap();
        conn.close().await;
    }
    m.assert_within(60);
    m.assert_heap_under(16 * MIB);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversize_response_naming_no_request_closes_the_connection() {
    if !support::alone(
        module_path!(),
        "an_oversize_response_naming_no_request_closes_the_connection",
    ) {
        return;
    }
    let m = measure().await;
    let conn = connect_stdio("huge-anon").await;
    let (a, b) = tokio::join!(
        conn.call_tool("t", json!({})),
        conn.call_tool("t", json!({}))
    );
    let expected = Error::Protocol(format!(
        "a frame of {} bytes, over the 4194304-byte limit, names no request while 2 requests were in flight; connection closed",
        huge_len(r#"{"jsonrpc":"2.0","result":{"x":""#, r#""}}"#)
    ));
    assert_eq!(a.unwrap_err(), expected);
    assert_eq!(b.unwrap_err(), expected);
    assert_eq!(conn.ping().await.unwrap_err(), Error::ConnectionClosed);
    m.assert_within(30);
    m.assert_heap_under(16 * MIB);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_with_id_null_fails_the_one_request_in_flight() {
    if !support::alone(
        module_path!(),
        "a_response_with_id_null_fails_the_one_request_in_flight",
    ) {
        return;
    }
    let m = measure().await;
    let conn = connect_stdio("null-error").await;
    let err = conn.call_tool("t", json!({})).await.unwrap_err();
    assert_eq!(
        err,
        Error::Rpc(ErrorObject::new(RpcErrorCode::PARSE_ERROR, "Parse error"))
    );
    // Nothing else was failed: the connection goes on.
    conn.ping().await.unwrap();
    conn.close().await;

    // With two requests in flight, a result with id null answers neither that can be named.
    let conn = connect_stdio("null-result").await;
    let (a, b) = tokio::join!(
        conn.call_tool("t", json!({})),
        conn.call_tool("t", json!({}))
    );
    let expected = Error::Protocol(
        "a response with id null while 2 requests were in flight; connection closed".into(),
    );
    assert_eq!(a.unwrap_err(), expected);
    assert_eq!(b.unwrap_err(), expected);
    assert_eq!(conn.ping().await.unwrap_err(), Error::ConnectionClosed);
    m.assert_within(20);
    m.assert_heap_under(4 * MIB);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_changed_flood_costs_at_most_two_refetches() {
    if !support::alone(
        module_path!(),
        "a_list_changed_flood_costs_at_most_two_refetches",
    ) {
        return;
    }
    let m = measure().await;
    let conn = connect_stdio("flood").await;
    // The server sent 10000 tools/list_changed right after the prefetch; every tools/list after
    // them lists "final".
    let start = Instant::now();
    while conn.tools().first().map(|t| t.name.as_str()) != Some("final") {
        assert!(start.elapsed() < Duration::from_secs(20), "never refetched");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = conn.call_tool("count", json!({})).await.unwrap();
    let lists: usize = r.texts().next().unwrap().parse().unwrap();
    // The prefetch, the refetch the first notification started, and at most one more for all
    // the notifications that arrived while it ran.
    assert!((2..=3).contains(&lists), "{lists} tools/list requests");
    conn.close().await;
    m.assert_within(30);
    m.assert_heap_under(8 * MIB);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_catalog_prefetch_is_bounded_in_bytes() {
    if !support::alone(module_path!(), "the_catalog_prefetch_is_bounded_in_bytes") {
        return;
    }
    let m = measure().await;
    // 40 pages of about 1 MiB: within the page bound (64), over the byte bound (16 MiB).
    let err = Client::connect_stdio(hostile("pages"), ClientOptions::default())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        Error::Protocol("tools/list exceeds 16777216 bytes over its pages".into())
    );
    m.assert_within(60);
    m.assert_heap_under(40 * MIB);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_ends_a_forked_worker_and_a_wrapped_server() {
    if !support::alone(
        module_path!(),
        "close_ends_a_forked_worker_and_a_wrapped_server",
    ) {
        return;
    }
    let m = measure().await;
    // A server that forks a worker: both are gone after close.
    let conn = connect_stdio("fork").await;
    let pids: Vec<u32> = conn
        .server_info()
        .name
        .split(' ')
        .map(|p| p.parse().unwrap())
        .collect();
    assert!(pids.iter().all(|p| alive(*p)));
    conn.close().await;
    for pid in &pids {
        assert!(
            gone_within(*pid, Duration::from_secs(10), alive).await,
            "{pid} left"
        );
    }

    // A shell wrapper that forks the real server, which ignores end of input: SIGTERM to the
    // wrapper alone would leave it running.
    let line = format!("python3 '{}' ignore-eof; :", script().display());
    let mut cmd = StdioCommand::new("sh").args(["-c", &line]);
    cmd.shutdown_grace = Duration::from_millis(300);
    let conn = Client::connect_stdio(cmd, ClientOptions::default())
        .await
        .unwrap();
    let server: u32 = conn.server_info().name.parse().unwrap();
    assert_ne!(Some(server), conn.pid(), "the wrapper forked the server");
    conn.close().await;
    assert!(
        gone_within(server, Duration::from_secs(10), alive).await,
        "the wrapped server {server} outlived close"
    );
    m.assert_within(30);
    m.assert_heap_under(4 * MIB);
}

// ---- Streamable HTTP: servers scripted on raw sockets ----

/// One HTTP request as the scripted servers see it.
#[derive(Debug, Clone)]
struct Req {
    method: String,
    headers: HashMap<String, String>,
    body: Value,
}

impl Req {
    fn rpc_method(&self) -> &str {
        self.body["method"].as_str().unwrap_or("")
    }
}

async fn read_req(s: &mut TcpStream) -> Option<Req> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 8192];
    let head_end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p;
        }
        let n = s.read(&mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&tmp[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let method = lines.next()?.split(' ').next()?.to_owned();
    let headers: HashMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let len: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < len {
        let n = s.read(&mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&tmp[..n]);
    }
    Some(Req {
        method,
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    })
}

/// Serves each connection's one request with `f`; returns the endpoint URL.
async fn serve<F, Fut>(f: F) -> String
where
    F: Fn(Req, TcpStream) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let f = Arc::new(f);
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let f = f.clone();
            tokio::spawn(async move {
                if let Some(req) = read_req(&mut s).await {
                    f(req, s).await;
                }
            });
        }
    });
    url
}

async fn send_status(s: &mut TcpStream, status: &str) {
    let _ = s
        .write_all(
            format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await;
}

async fn send_json(s: &mut TcpStream, session: &str, body: &Value) {
    let body = body.to_string();
    let _ = s
        .write_all(
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nmcp-session-id: {session}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        )
        .await;
}

async fn sse_start(s: &mut TcpStream) {
    let _ = s
        .write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n",
        )
        .await;
}

/// `data` as one HTTP/1.1 chunk.
fn chunk(data: &[u8]) -> Vec<u8> {
    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    out
}

const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// The well-behaved part every scripted server shares: the handshake, notifications, the tools
/// list, no standalone stream. Returns the request when it is something else.
async fn basic(req: Req, s: &mut TcpStream) -> Option<Req> {
    match (req.method.as_str(), req.rpc_method()) {
        ("POST", "initialize") => {
            let reply = json!({"jsonrpc": "2.0", "id": req.body["id"], "result": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "scripted", "version": "1"}
            }});
            send_json(s, "s1", &reply).await;
        }
        ("POST", "tools/list") => {
            let reply = json!({"jsonrpc": "2.0", "id": req.body["id"], "result": {
                "tools": [{"name": "t", "inputSchema": {"type": "object"}}]
            }});
            send_json(s, "s1", &reply).await;
        }
        ("POST", _) if req.body.get("id").is_none() => send_status(s, "202 Accepted").await,
        ("POST", _) => return Some(req),
        ("GET", _) if req.headers.contains_key("last-event-id") => return Some(req),
        ("GET", _) => send_status(s, "405 Method Not Allowed").await,
        _ => send_status(s, "200 OK").await,
    }
    None
}

fn http_options() -> HttpClientOptions {
    HttpClientOptions::default()
}

async fn connect_http(url: &str, http: HttpClientOptions, timeout: Duration) -> Connection {
    Client::connect_http(url, http, ClientOptions::default().request_timeout(timeout))
        .await
        .expect("the handshake completes")
}

fn answer(id: &Value, text: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": text}]}})
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_byte_sse_chunks_are_parsed_in_linear_time() {
    if !support::alone(
        module_path!(),
        "one_byte_sse_chunks_are_parsed_in_linear_time",
    ) {
        return;
    }
    let m = measure().await;
    let url = serve(|req, mut s| async move {
        let Some(req) = basic(req, &mut s).await else {
            return;
        };
        sse_start(&mut s).await;
        let event = format!(
            "id: e1\ndata: {}\n\n",
            answer(&req.body["id"], &"x".repeat(256 * 1024))
        );
        let mut body = Vec::with_capacity(event.len() * 7);
        for b in event.as_bytes() {
            body.extend(chunk(std::slice::from_ref(b)));
        }
        body.extend_from_slice(LAST_CHUNK);
        let _ = s.write_all(&body).await;
    })
    .await;
    let conn = connect_http(&url, http_options(), Duration::from_secs(60)).await;
    let r = conn.call_tool("t", json!({})).await.unwrap();
    assert_eq!(r.texts().next().map(str::len), Some(256 * 1024));
    conn.close().await;
    // About 20 s in a debug build; rescanning the buffer on every chunk took many minutes.
    m.assert_within(90);
    m.assert_heap_under(16 * MIB);
}

/// A POST stream that sends `first` and ends; each resumption (GET with Last-Event-ID) sends
/// `again` and ends. Counts the resumptions.
async fn resuming_server(first: &'static str, again: &'static str) -> (String, Arc<AtomicUsize>) {
    let resumes = Arc::new(AtomicUsize::new(0));
    let count = resumes.clone();
    let url = serve(move |req, mut s| {
        let count = count.clone();
        async move {
            let Some(req) = basic(req, &mut s).await else {
                return;
            };
            sse_start(&mut s).await;
            let text = if req.method == "GET" {
                count.fetch_add(1, Ordering::SeqCst);
                again.replace("ID", "2")
            } else {
                first.to_owned()
            };
            let _ = s.write_all(&chunk(text.as_bytes())).await;
            let _ = s.write_all(LAST_CHUNK).await;
        }
    })
    .await;
    (url, resumes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_zero_cannot_make_the_client_spin() {
    if !support::alone(module_path!(), "retry_zero_cannot_make_the_client_spin") {
        return;
    }
    let m = measure().await;
    let priming = "retry: 0\nid: e1\ndata:\n\n";
    let (url, resumes) = resuming_server(priming, priming).await;
    let conn = connect_http(&url, http_options(), Duration::from_secs(30)).await;
    let err = conn.call_tool("t", json!({})).await.unwrap_err();
    assert_eq!(
        err,
        Error::Transport(
            "the SSE stream was lost 5 times in a row before the response; gave up resuming it"
                .into()
        )
    );
    assert_eq!(resumes.load(Ordering::SeqCst), 5);
    conn.close().await;
    m.assert_within(10);
    m.assert_heap_under(8 * MIB);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_retry_is_capped() {
    if !support::alone(module_path!(), "a_huge_retry_is_capped") {
        return;
    }
    let m = measure().await;
    let (url, resumes) = resuming_server(
        "retry: 99999999999\nid: e1\ndata:\n\n",
        "id: e2\ndata: {\"jsonrpc\":\"2.0\",\"id\":ID,\"result\":{\"content\":[]}}\n\n",
    )
    .await;
    let http = HttpClientOptions {
        max_retry: Duration::from_millis(300),
        ..http_options()
    };
    let conn = connect_http(&url, http, Duration::from_secs(30)).await;
    let r = conn.call_tool("t", json!({})).await.unwrap();
    assert!(r.content.is_empty());
    assert_eq!(resumes.load(Ordering::SeqCst), 1);
    conn.close().await;
    m.assert_within(10);
    m.assert_heap_under(8 * MIB);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_lost_without_an_event_id_fails_its_request_at_once() {
    if !support::alone(
        module_path!(),
        "a_stream_lost_without_an_event_id_fails_its_request_at_once",
    ) {
        return;
    }
    let m = measure().await;
    let (url, resumes) = resuming_server(
        "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"working\"}}\n\n",
        "",
    )
    .await;
    let conn = connect_http(&url, http_options(), Duration::from_secs(30)).await;
    let err = conn.call_tool("t", json!({})).await.unwrap_err();
    assert_eq!(
        err,
        Error::InvalidResponse(
            "the SSE stream ended before the response and cannot be resumed (no event id)".into()
        )
    );
    assert_eq!(resumes.load(Ordering::SeqCst), 0);
    conn.close().await;
    m.assert_within(10);
    m.assert_heap_under(8 * MIB);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunk_error_is_not_a_normal_end() {
    if !support::alone(module_path!(), "a_chunk_error_is_not_a_normal_end") {
        return;
    }
    let m = measure().await;
    let url = serve(|req, mut s| async move {
        if basic(req, &mut s).await.is_none() {
            return;
        }
        sse_start(&mut s).await;
        let _ = s.write_all(&chunk(b": working\n\n")).await;
        // Not a chunk size: the body is broken.
        let _ = s.write_all(b"zz\r\n").await;
    })
    .await;
    let conn = connect_http(&url, http_options(), Duration::from_secs(30)).await;
    let err = conn.call_tool("t", json!({})).await.unwrap_err();
    assert!(
        matches!(&err, Error::Transport(why)
            if why.starts_with("the SSE stream failed before the response (")
                && why.ends_with(") and cannot be resumed (no event id)")),
        "{err:?}"
    );
    conn.close().await;
    m.assert_within(10);
    m.assert_heap_under(8 * MIB);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_notification_post_holds_back_nothing_for_long() {
    if !support::alone(
        module_path!(),
        "a_stalled_notification_post_holds_back_nothing_for_long",
    ) {
        return;
    }
    let m = measure().await;
    let events = Arc::new(Mutex::new(Vec::<&'static str>::new()));
    let log = events.clone();
    let url = serve(move |req, mut s| {
        let log = log.clone();
        async move {
            match req.rpc_method() {
                "notifications/stall" => {
                    log.lock().unwrap().push("stall");
                    // Never answered; the client gives up on it and closes the connection.
                    let mut buf = [0u8; 64];
                    while matches!(s.read(&mut buf).await, Ok(n) if n > 0) {}
                    log.lock().unwrap().push("stall dropped");
                    return;
                }
                "notifications/after" => log.lock().unwrap().push("after"),
                "tools/call" => {
                    log.lock().unwrap().push("call");
                    let reply: Value =
                        serde_json::from_str(&answer(&req.body["id"], "ok")).unwrap();
                    send_json(&mut s, "s1", &reply).await;
                    return;
                }
                _ => {}
            }
            let _ = basic(req, &mut s).await;
        }
    })
    .await;
    let http = HttpClientOptions {
        message_timeout: Duration::from_secs(2),
        ..http_options()
    };
    let conn = connect_http(&url, http, Duration::from_secs(20)).await;
    conn.peer()
        .notify("notifications/stall", &json!({}))
        .await
        .unwrap();
    // `notify` returns once the message is queued; wait until the server holds the stalled POST
    // so the order below is the client's doing, not the scheduler's.
    let start = Instant::now();
    while events.lock().unwrap().is_empty() && start.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    conn.peer()
        .notify("notifications/after", &json!({}))
        .await
        .unwrap();
    let r = conn.call_tool("t", json!({})).await.unwrap();
    assert_eq!(r.texts().collect::<Vec<_>>(), ["ok"]);
    let start = Instant::now();
    while events.lock().unwrap().len() < 4 && start.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The call overtook the stalled notification; the next notification waited for it, in
    // order, until it was abandoned (the last two are seen by two server tasks, in either order).
    let mut seen = events.lock().unwrap().clone();
    assert_eq!(seen[..2], ["stall", "call"]);
    seen[2..].sort_unstable();
    assert_eq!(seen[2..], ["after", "stall dropped"]);
    conn.close().await;
    m.assert_within(15);
    m.assert_heap_under(8 * MIB);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn re_initialization_after_404_is_bounded() {
    if !support::alone(module_path!(), "re_initialization_after_404_is_bounded") {
        return;
    }
    let m = measure().await;
    let inits = Arc::new(AtomicUsize::new(0));
    let count = inits.clone();
    // Every session is forgotten at once: everything sent with a session id meets 404.
    let url = serve(move |req, mut s| {
        let count = count.clone();
        async move {
            if req.rpc_method() == "initialize" {
                let n = count.fetch_add(1, Ordering::SeqCst);
                let reply = json!({"jsonrpc": "2.0", "id": req.body["id"], "result": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "serverInfo": {"name": "forgetful", "version": "1"}
                }});
                send_json(&mut s, &format!("s{n}"), &reply).await;
            } else if req.headers.contains_key("mcp-session-id") && req.method == "POST" {
                send_status(&mut s, "404 Not Found").await;
            } else {
                send_status(&mut s, "405 Method Not Allowed").await;
            }
        }
    })
    .await;
    let conn = connect_http(&url, http_options(), Duration::from_secs(20)).await;
    let refused = Error::Http {
        status: 404,
        body: "re-initialization: notifications/initialized was refused".into(),
    };
    // notifications/initialized met the first 404 (one re-initialization); two pings make two
    // more; after three in a row the client stops re-initializing.
    assert_eq!(conn.ping().await.unwrap_err(), refused);
    assert_eq!(conn.ping().await.unwrap_err(), refused);
    let given_up = Error::Http {
        status: 404,
        body: "the server forgot the session again after 3 re-initializations in a row; not re-initializing".into(),
    };
    assert_eq!(conn.ping().await.unwrap_err(), given_up);
    assert_eq!(conn.ping().await.unwrap_err(), given_up);
    assert_eq!(inits.load(Ordering::SeqCst), 4);
    conn.close().await;
    m.assert_within(10);
    m.assert_heap_under(8 * MIB);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_is_dropped_once_its_request_timed_out() {
    if !support::alone(
        module_path!(),
        "a_stream_is_dropped_once_its_request_timed_out",
    ) {
        return;
    }
    let m = measure().await;
    let dropped = Arc::new(Mutex::new(None::<Instant>));
    let seen = dropped.clone();
    let url = serve(move |req, mut s| {
        let seen = seen.clone();
        async move {
            let Some(_) = basic(req, &mut s).await else {
                return;
            };
            sse_start(&mut s).await;
            // Keep-alive comments forever, never an answer, until the client hangs up.
            let ping = chunk(b": keep-alive\n\n");
            while s.write_all(&ping).await.is_ok() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            *seen.lock().unwrap() = Some(Instant::now());
        }
    })
    .await;
    let conn = connect_http(&url, http_options(), Duration::from_secs(1)).await;
    let err = conn.call_tool("t", json!({})).await.unwrap_err();
    let timed_out = Instant::now();
    assert_eq!(err, Error::Timeout);
    while dropped.lock().unwrap().is_none() && timed_out.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let at = dropped
        .lock()
        .unwrap()
        .expect("the client kept reading after the timeout");
    assert!(at.duration_since(timed_out) < Duration::from_secs(5));
    conn.close().await;
    m.assert_within(10);
    m.assert_heap_under(8 * MIB);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_callers_http_client_is_used() {
    if !support::alone(module_path!(), "the_callers_http_client_is_used") {
        return;
    }
    let m = measure().await;
    let marks = Arc::new(Mutex::new(Vec::<Option<String>>::new()));
    let sink = marks.clone();
    let url = serve(move |req, mut s| {
        let sink = sink.clone();
        async move {
            sink.lock()
                .unwrap()
                .push(req.headers.get("x-caller").cloned());
            let _ = basic(req, &mut s).await;
        }
    })
    .await;
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("x-caller", "mine".parse().unwrap());
    let client = purra_protocol::http::reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .unwrap();
    let conn = connect_http(
        &url,
        http_options().http_client(client),
        Duration::from_secs(10),
    )
    .await;
    conn.close().await;
    let marks = marks.lock().unwrap().clone();
    // initialize, notifications/initialized, the standalone GET, tools/list (DELETE may race).
    assert!(marks.len() >= 4, "{marks:?}");
    assert!(
        marks.iter().all(|m| m.as_deref() == Some("mine")),
        "{marks:?}"
    );
    m.assert_within(10);
    m.assert_heap_under(8 * MIB);
}
