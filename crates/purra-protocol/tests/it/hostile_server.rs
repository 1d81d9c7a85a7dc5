//! Hostile peers against purra's Streamable HTTP and WebSocket servers (issue 10, server side):
//! slowloris headers and bodies, floods of idle connections and of bare initializations (10 000
//! of each, from `peers/hostile/flood.py`), stateless floods, replay bounds, request-id reuse,
//! batches per revision, peers that stop reading, idle WebSocket clients.
//!
//! Each test asserts the outcome, the time to it, and a bound on purra's memory: purra runs in
//! the test process, whose global allocator counts live heap bytes and their peak
//! (`support::heap`). Each test runs alone in a child process of the test binary, one at a time
//! (a lock), so each measures only its own server.

use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use purra_protocol::http::ConnectionLimits;
use purra_protocol::types::*;
use purra_protocol::ws::{self, WsServerOptions};
use purra_protocol::{
    Client, ClientOptions, EngineConfig, HandlerResult, HttpClientOptions, HttpServerConfig,
    RequestCtx, Server, WsClientOptions,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_util::sync::CancellationToken;

use crate::support::{
    self,
    heap::Heap,
    heap::MIB,
    http::{post, serve_http},
    Nothing, INIT,
};

/// One test at a time: each measures the heap of its own server.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[derive(Deserialize, JsonSchema)]
struct Ms {
    ms: u64,
}

#[derive(Deserialize, JsonSchema)]
struct Spam {
    n: usize,
    size: usize,
}

fn hostile_server() -> Server {
    let server = Server::builder("hostile", "1")
        .logging()
        .engine(EngineConfig {
            slow_peer_timeout: Duration::from_secs(1),
            ..EngineConfig::default()
        })
        .build();
    server
        .tool("noop", "answers ok", |_: Nothing, _c: RequestCtx| async {
            HandlerResult::Ok("ok")
        })
        .unwrap();
    server
        .tool(
            "sleep",
            "answers after ms",
            |a: Ms, _c: RequestCtx| async move {
                tokio::time::sleep(Duration::from_millis(a.ms)).await;
                HandlerResult::Ok(format!("slept {}", a.ms))
            },
        )
        .unwrap();
    server
        .tool(
            "spam",
            "logs n messages of size bytes, then answers",
            |a: Spam, c: RequestCtx| async move {
                for _ in 0..a.n {
                    c.log(LoggingLevel::Info, None, json!("x".repeat(a.size)))
                        .await?;
                }
                HandlerResult::Ok("spammed")
            },
        )
        .unwrap();
    let resource: Resource =
        serde_json::from_value(json!({"uri": "res://one", "name": "one"})).unwrap();
    server.resource(resource, |uri, _c: RequestCtx| async move {
        let r: ReadResourceResult =
            serde_json::from_value(json!({"contents": [{"uri": uri, "text": "one"}]})).unwrap();
        HandlerResult::Ok(r)
    });
    server
}

/// A well-behaved client: connects, calls a tool, closes. Returns how long it took.
async fn probe(url: &str) -> Duration {
    let t = Instant::now();
    let http = HttpClientOptions {
        open_get_stream: false,
        ..HttpClientOptions::default()
    };
    let conn = Client::connect_http(url, http, ClientOptions::default())
        .await
        .expect("a well-behaved client connects");
    let r = conn
        .call_tool("noop", json!({}))
        .await
        .expect("and calls a tool");
    assert_eq!(r.texts().collect::<Vec<_>>(), ["ok"]);
    let took = t.elapsed();
    conn.close().await;
    took
}

fn init_at(version: &str) -> String {
    INIT.replace("2025-11-25", version)
}

/// Initializes a session at `version` and uses it once (`notifications/initialized`).
async fn session_at(url: &str, version: &str) -> String {
    let resp = post(url, None, None, &init_at(version)).await;
    assert_eq!(resp.status(), 200);
    let id = resp.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    resp.text().await.unwrap();
    let resp = post(
        url,
        Some(&id),
        Some(version),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .await;
    assert_eq!(resp.status(), 202);
    id
}

/// The data lines of an SSE body (empty priming data left out).
fn sse_data(body: &str) -> Vec<&str> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| !d.is_empty())
        .collect()
}

/// Reads an SSE response up to the end of its first event, and returns that event.
async fn priming(resp: &mut reqwest::Response) -> String {
    let mut buf = String::new();
    while !buf.contains("\n\n") {
        let chunk = tokio::time::timeout(Duration::from_secs(5), resp.chunk())
            .await
            .expect("an event within 5 s")
            .unwrap()
            .expect("the stream is open");
        buf.push_str(&String::from_utf8_lossy(&chunk));
    }
    buf[..buf.find("\n\n").unwrap() + 2].to_owned()
}

/// Reads from a raw connection until the peer closes it (EOF or reset); returns what it sent.
async fn read_until_closed(stream: &mut TcpStream, within: Duration) -> Option<Vec<u8>> {
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some(all),
            Ok(Ok(n)) => all.extend_from_slice(&buf[..n]),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_headers_are_cut_at_the_header_read_timeout() {
    if !support::alone(
        module_path!(),
        "slowloris_headers_are_cut_at_the_header_read_timeout",
    ) {
        return;
    }
    let _serial = SERIAL.lock().await;
    let srv = serve_http(
        hostile_server(),
        HttpServerConfig {
            connections: ConnectionLimits::default()
                .header_read_timeout(Some(Duration::from_secs(1))),
            ..HttpServerConfig::default()
        },
    )
    .await;
    let heap = Heap::start();
    // 50 clients each drip a request's headers, one byte every 100 ms: never complete.
    let mut drips = Vec::new();
    for _ in 0..50 {
        let addr = srv.addr;
        drips.push(tokio::spawn(async move {
            let stream = TcpStream::connect(addr).await.unwrap();
            let started = Instant::now();
            let (mut rd, mut wr) = stream.into_split();
            let writer = tokio::spawn(async move {
                let headers = format!(
                    "POST /mcp HTTP/1.1\r\nHost: localhost\r\nX-Pad: {}",
                    "a".repeat(200)
                );
                for b in headers.bytes() {
                    if wr.write_all(&[b]).await.is_err() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            });
            let mut buf = [0u8; 1024];
            let closed = loop {
                match tokio::time::timeout(Duration::from_secs(5), rd.read(&mut buf)).await {
                    Ok(Ok(0)) | Ok(Err(_)) => break Some(started.elapsed()),
                    Ok(Ok(_)) => continue,
                    Err(_) => break None,
                }
            };
            writer.abort();
            closed
        }));
    }
    // A well-behaved client meanwhile.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let took = probe(&srv.url).await;
    assert!(took < Duration::from_secs(1), "the probe took {took:?}");
    for d in drips {
        let closed = d
            .await
            .unwrap()
            .expect("a dripping client is closed within 5 s");
        assert!(
            closed >= Duration::from_millis(900) && closed < Duration::from_secs(3),
            "closed after {closed:?}, the header timeout is 1 s"
        );
    }
    heap.assert_peak_below(8 * MIB, "50 slowloris clients");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_bodies_are_answered_408_at_the_body_read_timeout() {
    if !support::alone(
        module_path!(),
        "slow_bodies_are_answered_408_at_the_body_read_timeout",
    ) {
        return;
    }
    let _serial = SERIAL.lock().await;
    let srv = serve_http(
        hostile_server(),
        HttpServerConfig {
            body_read_timeout: Duration::from_secs(1),
            ..HttpServerConfig::default()
        },
    )
    .await;
    let heap = Heap::start();
    let mut stream = TcpStream::connect(srv.addr).await.unwrap();
    let t = Instant::now();
    stream
        .write_all(
            b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
              Accept: application/json, text/event-stream\r\nContent-Length: 200\r\n\r\n",
        )
        .await
        .unwrap();
    let (mut rd, mut wr) = stream.into_split();
    let writer = tokio::spawn(async move {
        for _ in 0..200 {
            if wr.write_all(b" ").await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !String::from_utf8_lossy(&head).contains("\"}}") {
        let n = tokio::time::timeout(Duration::from_secs(5), rd.read(&mut buf))
            .await
            .expect("answered within 5 s")
            .unwrap();
        assert!(n > 0, "closed without an answer");
        head.extend_from_slice(&buf[..n]);
    }
    let took = t.elapsed();
    writer.abort();
    let text = String::from_utf8_lossy(&head);
    assert!(
        text.starts_with("HTTP/1.1 408 Request Timeout\r\n"),
        "{text}"
    );
    assert!(
        text.ends_with(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Request Timeout: the body did not arrive within 1s"}}"#),
        "{text}"
    );
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(3),
        "answered after {took:?}"
    );
    heap.assert_peak_below(4 * MIB, "a slow body");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_give_their_slots_to_new_clients() {
    if !support::alone(
        module_path!(),
        "idle_connections_give_their_slots_to_new_clients",
    ) {
        return;
    }
    let _serial = SERIAL.lock().await;
    let srv = serve_http(
        hostile_server(),
        HttpServerConfig {
            connections: ConnectionLimits::default().max_connections(32),
            ..HttpServerConfig::default()
        },
    )
    .await;
    let heap = Heap::start();
    let mut idle = Vec::new();
    for i in 0..200 {
        let mut s = TcpStream::connect(srv.addr).await.unwrap();
        if i % 2 == 1 {
            s.write_all(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\n")
                .await
                .unwrap();
        }
        idle.push(s);
    }
    let stats = srv.http.connection_stats().clone();
    for _ in 0..100 {
        if stats.evicted() >= 168 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(stats.evicted(), 168, "200 idle connections, 32 slots");
    assert_eq!(stats.open(), 32);
    let took = probe(&srv.url).await;
    assert!(took < Duration::from_secs(1), "the probe took {took:?}");
    // The oldest idle connections were the ones closed.
    let first = read_until_closed(&mut idle[0], Duration::from_secs(2)).await;
    assert_eq!(first, Some(Vec::new()), "closed without a byte");
    heap.assert_peak_below(16 * MIB, "200 idle connections, 32 slots");
}

/// Raises this process's descriptor limit to its hard limit; fails clearly below `need`.
fn raise_fd_limit(need: u64) {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    assert!(
        hard >= need,
        "this test needs {need} file descriptors (10 000 idle connections held by purra); \
         the hard limit is {hard}: raise it (ulimit -Hn) to run it"
    );
    if soft < need {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard).unwrap();
    }
}

fn flood_script() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/../../peers/hostile/flood.py").to_owned()
}

/// Reads the flood peer's next line; fails on its `error` lines.
async fn next_line(
    lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    within: Duration,
) -> String {
    let line = tokio::time::timeout(within, lines.next_line())
        .await
        .expect("the flood peer answers in time")
        .unwrap()
        .expect("the flood peer is running");
    assert!(!line.starts_with("error"), "flood.py: {line}");
    line
}

/// Issue 10, acceptance 3: under 10 000 concurrent idle TCP connections and 10 000 bare
/// initializations, a well-behaved client still connects and calls a tool within 1 s, and
/// purra's heap stays under 256 MiB above its baseline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_idle_connections_and_bare_initializations() {
    const IDLE_CONNECTIONS: usize = 10_000;
    const INITS: usize = 10_000;
    const MEMORY_BOUND: usize = 256 * MIB;
    if !support::alone(
        module_path!(),
        "ten_thousand_idle_connections_and_bare_initializations",
    ) {
        return;
    }
    let _serial = SERIAL.lock().await;
    raise_fd_limit(IDLE_CONNECTIONS as u64 + 1_000);
    // Every idle connection is held (the limit is above 10 000, the header timeout longer than
    // the test): the flood is really concurrent. The session bounds are the defaults.
    let server = Server::builder("acceptance", "1").build();
    server
        .tool("noop", "answers ok", |_: Nothing, _c: RequestCtx| async {
            HandlerResult::Ok("ok")
        })
        .unwrap();
    let srv = serve_http(
        server,
        HttpServerConfig {
            connections: ConnectionLimits::default()
                .max_connections(IDLE_CONNECTIONS + 2_000)
                .header_read_timeout(Some(Duration::from_secs(120))),
            ..HttpServerConfig::default()
        },
    )
    .await;
    probe(&srv.url).await; // warm up
    let heap = Heap::start();
    let mut peer = tokio::process::Command::new(crate::support::process::python("venv"))
        .arg(flood_script())
        .args(["--port", &srv.addr.port().to_string()])
        .args([
            "--idle",
            &IDLE_CONNECTIONS.to_string(),
            "--inits",
            &INITS.to_string(),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python runs peers/hostile/flood.py");
    let mut stdin = peer.stdin.take().unwrap();
    let mut lines = BufReader::new(peer.stdout.take().unwrap()).lines();

    let line = next_line(&mut lines, Duration::from_secs(120)).await;
    assert!(
        line.starts_with(&format!("idle {IDLE_CONNECTIONS} ")),
        "{line}"
    );
    let stats = srv.http.connection_stats().clone();
    for _ in 0..200 {
        if stats.open() >= IDLE_CONNECTIONS {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        stats.open() >= IDLE_CONNECTIONS,
        "purra holds {} connections",
        stats.open()
    );
    assert_eq!(stats.evicted(), 0);
    eprintln!("{line}; purra holds {} connections", stats.open());
    let took = probe(&srv.url).await;
    eprintln!("probe under {IDLE_CONNECTIONS} idle connections: {took:?}");
    assert!(took < Duration::from_secs(1), "the probe took {took:?}");

    // The bare initializations, with a well-behaved client probing every 250 ms meanwhile.
    stdin.write_all(b"go\n").await.unwrap();
    stdin.flush().await.unwrap();
    let done = tokio::spawn(async move { next_line(&mut lines, Duration::from_secs(240)).await });
    let mut probes = Vec::new();
    while !done.is_finished() {
        probes.push(probe(&srv.url).await);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let line = done.await.unwrap();
    assert!(line.starts_with(&format!("inits {INITS} ")), "{line}");
    probes.push(probe(&srv.url).await);
    eprintln!("{line}; probes during and after: {probes:?}");
    let slowest = probes.iter().max().unwrap();
    assert!(
        *slowest < Duration::from_secs(1),
        "a probe took {slowest:?}"
    );
    assert!(probes.len() >= 2);
    // Bare initializations never became established sessions; the pending ones are bounded.
    let pending = srv.http.pending_session_count();
    assert!(pending <= 1024, "{pending} pending sessions");
    // The probes' own sessions end with their DELETE, which may still be on its way.
    let t = Instant::now();
    while srv.http.session_count() > 0 && t.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(srv.http.session_count(), 0);
    heap.assert_peak_below(
        MEMORY_BOUND,
        "10 000 idle connections and 10 000 bare initializations",
    );
    drop(stdin);
    let _ = tokio::time::timeout(Duration::from_secs(30), peer.wait()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bare_initializations_never_fill_the_session_table() {
    if !support::alone(
        module_path!(),
        "bare_initializations_never_fill_the_session_table",
    ) {
        return;
    }
    let _serial = SERIAL.lock().await;
    let srv = serve_http(
        hostile_server(),
        HttpServerConfig {
            max_sessions: 16,
            max_pending_sessions: 32,
            pending_session_timeout: Duration::from_millis(500),
            ..HttpServerConfig::default()
        },
    )
    .await;
    let heap = Heap::start();
    let t = Instant::now();
    for _ in 0..300 {
        let resp = post(&srv.url, None, None, INIT).await;
        assert_eq!(resp.status(), 200);
        resp.text().await.unwrap();
    }
    eprintln!("300 bare initializations in {:?}", t.elapsed());
    assert_eq!(srv.http.pending_session_count(), 32);
    assert_eq!(srv.http.session_count(), 0);
    let took = probe(&srv.url).await;
    assert!(took < Duration::from_secs(1), "the probe took {took:?}");
    // Unused sessions expire fast.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(srv.http.pending_session_count(), 0);
    // Established sessions are bounded as before: the 17th is refused.
    for _ in 0..16 {
        session_at(&srv.url, "2025-11-25").await;
    }
    let resp = post(&srv.url, None, None, INIT).await;
    assert_eq!(resp.status(), 503);
    assert_eq!(
        resp.text().await.unwrap(),
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Service Unavailable: too many sessions"}}"#
    );
    heap.assert_peak_below(32 * MIB, "300 bare initializations");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_requests_are_capped() {
    if !support::alone(module_path!(), "stateless_requests_are_capped") {
        return;
    }
    let _serial = SERIAL.lock().await;
    let srv = serve_http(
        hostile_server(),
        HttpServerConfig {
            stateless: true,
            json_response: true,
            max_stateless_requests: 4,
            ..HttpServerConfig::default()
        },
    )
    .await;
    let heap = Heap::start();
    let call = |id: u32, tool: &str, args: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{args}}}}}"#
        )
    };
    let mut slow = Vec::new();
    for i in 0..4 {
        let (url, body) = (srv.url.clone(), call(i, "sleep", r#"{"ms":1000}"#));
        slow.push(tokio::spawn(async move {
            post(&url, None, None, &body).await.text().await.unwrap()
        }));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let t = Instant::now();
    let resp = post(&srv.url, None, None, &call(9, "noop", "{}")).await;
    assert_eq!(resp.status(), 503);
    assert_eq!(
        resp.text().await.unwrap(),
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Service Unavailable: too many concurrent requests"}}"#
    );
    assert!(t.elapsed() < Duration::from_millis(500));
    for (i, s) in slow.into_iter().enumerate() {
        assert_eq!(
            s.await.unwrap(),
            format!(
                r#"{{"jsonrpc":"2.0","id":{i},"result":{{"content":[{{"type":"text","text":"slept 1000"}}]}}}}"#
            )
        );
    }
    let resp = post(&srv.url, None, None, &call(10, "noop", "{}")).await;
    assert_eq!(
        resp.text().await.unwrap(),
        r#"{"jsonrpc":"2.0","id":10,"result":{"content":[{"type":"text","text":"ok"}]}}"#
    );
    heap.assert_peak_below(8 * MIB, "a stateless flood");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_is_bounded_in_bytes_and_abandoned_streams_expire() {
    if !support::alone(
        module_path!(),
        "replay_is_bounded_in_bytes_and_abandoned_streams_expire",
    ) {
        return;
    }
    let _serial = SERIAL.lock().await;
    let srv = serve_http(
        hostile_server(),
        HttpServerConfig {
            replay_bytes: 256 * 1024,
            // Long enough that a loaded machine still resumes within it below.
            resume_window: Duration::from_millis(1500),
            ..HttpServerConfig::default()
        },
    )
    .await;
    let id = session_at(&srv.url, "2025-11-25").await;
    let get = |last: String| {
        reqwest::Client::new()
            .get(&srv.url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &id)
            .header("mcp-protocol-version", "2025-11-25")
            .header("last-event-id", last)
            .send()
    };
    let heap = Heap::start();
    // 200 log messages of 32 KiB (6.4 MB) on a stream whose client read the priming event and
    // hung up: only the newest 256 KiB stay.
    let mut resp = post(
        &srv.url,
        Some(&id),
        Some("2025-11-25"),
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"spam","arguments":{"n":200,"size":32768}}}"#,
    )
    .await;
    assert_eq!(
        priming(&mut resp).await,
        "id: s2e0\nretry: 1000\ndata: \n\n"
    );
    drop(resp);
    // Once the tool has run, the first events are gone: resuming from the start is 410.
    let t = Instant::now();
    loop {
        let resp = get("s2e0".into()).await.unwrap();
        if resp.status() == 410 {
            break;
        }
        assert_eq!(resp.status(), 200);
        drop(resp);
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "still resumable from the start"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Kept: 256 KiB of replay, at most as much queued for the connection, and what is being
    // encoded (the count bound alone would keep 256 events, 8 MiB).
    heap.assert_peak_below(6 * MIB, "6.4 MB of events for a client that hung up");
    // The abandoned stream expires with the window, and its bytes with it.
    tokio::time::sleep(Duration::from_millis(1600)).await;

    // A call whose client hung up before its response: resumable within the window...
    let call = |n: u32| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{n},"method":"tools/call","params":{{"name":"sleep","arguments":{{"ms":100}}}}}}"#
        )
    };
    let mut resp = post(&srv.url, Some(&id), Some("2025-11-25"), &call(3)).await;
    assert_eq!(
        priming(&mut resp).await,
        "id: s3e0\nretry: 1000\ndata: \n\n"
    );
    drop(resp);
    tokio::time::sleep(Duration::from_millis(250)).await;
    let resumed = get("s3e0".into()).await.unwrap();
    assert_eq!(resumed.status(), 200);
    assert_eq!(
        resumed.text().await.unwrap(),
        "id: s3e1\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"slept 100\"}]}}\n\n"
    );
    // ... and forgotten after it.
    let mut resp = post(&srv.url, Some(&id), Some("2025-11-25"), &call(4)).await;
    assert_eq!(
        priming(&mut resp).await,
        "id: s4e0\nretry: 1000\ndata: \n\n"
    );
    drop(resp);
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let forgotten = get("s4e0".into()).await.unwrap();
    assert_eq!(forgotten.status(), 404);
    assert_eq!(
        forgotten.text().await.unwrap(),
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Not Found: no such stream"}}"#
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reused_in_flight_id_is_refused_and_the_first_request_completes() {
    if !support::alone(
        module_path!(),
        "a_reused_in_flight_id_is_refused_and_the_first_request_completes",
    ) {
        return;
    }
    let _serial = SERIAL.lock().await;
    let srv = serve_http(hostile_server(), HttpServerConfig::default()).await;
    let id = session_at(&srv.url, "2025-11-25").await;
    let heap = Heap::start();
    let first = {
        let (url, id) = (srv.url.clone(), id.clone());
        tokio::spawn(async move {
            let body = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":500}}}"#;
            let resp = post(&url, Some(&id), Some("2025-11-25"), body).await;
            let t = Instant::now();
            let text = tokio::time::timeout(Duration::from_secs(5), resp.text())
                .await
                .expect("the first request completes")
                .unwrap();
            (text, t.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let t = Instant::now();
    let second = post(
        &srv.url,
        Some(&id),
        Some("2025-11-25"),
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"noop","arguments":{}}}"#,
    )
    .await;
    assert_eq!(second.status(), 409);
    assert_eq!(
        second.text().await.unwrap(),
        r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"Invalid request: request id 7 is already in use"}}"#
    );
    assert!(t.elapsed() < Duration::from_millis(500));
    let (text, _) = first.await.unwrap();
    assert_eq!(
        sse_data(&text),
        [r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"slept 500"}]}}"#]
    );
    // Done: the id may be used again.
    let again = post(
        &srv.url,
        Some(&id),
        Some("2025-11-25"),
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"noop","arguments":{}}}"#,
    )
    .await;
    assert_eq!(
        sse_data(&again.text().await.unwrap()),
        [r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"ok"}]}}"#]
    );
    // A cancelled request's stream ends at once (no response will come), and its id is free.
    let (url, sid) = (srv.url.clone(), id.clone());
    let cancelled = tokio::spawn(async move {
        let body = r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":5000}}}"#;
        let resp = post(&url, Some(&sid), Some("2025-11-25"), body).await;
        tokio::time::timeout(Duration::from_secs(2), resp.text()).await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let resp = post(
        &srv.url,
        Some(&id),
        Some("2025-11-25"),
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":8}}"#,
    )
    .await;
    assert_eq!(resp.status(), 202);
    let text = cancelled
        .await
        .unwrap()
        .expect("the cancelled request's stream ends")
        .unwrap();
    assert_eq!(sse_data(&text), Vec::<&str>::new());
    let reuse = post(
        &srv.url,
        Some(&id),
        Some("2025-11-25"),
        r#"{"jsonrpc":"2.0","id":8,"method":"ping"}"#,
    )
    .await;
    assert_eq!(
        sse_data(&reuse.text().await.unwrap()),
        [r#"{"jsonrpc":"2.0","id":8,"result":{}}"#]
    );
    heap.assert_peak_below(4 * MIB, "request id reuse");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_are_accepted_only_in_2025_03_26() {
    if !support::alone(module_path!(), "batches_are_accepted_only_in_2025_03_26") {
        return;
    }
    let _serial = SERIAL.lock().await;
    let srv = serve_http(hostile_server(), HttpServerConfig::default()).await;
    let batch =
        r#"[{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","id":3,"method":"ping"}]"#;
    let refused = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid request: batches are only allowed in protocol version 2025-03-26"}}"#;
    for version in ["2024-11-05", "2025-06-18", "2025-11-25"] {
        let id = session_at(&srv.url, version).await;
        let resp = post(&srv.url, Some(&id), Some(version), batch).await;
        assert_eq!(resp.status(), 400, "{version}");
        assert_eq!(resp.text().await.unwrap(), refused, "{version}");
    }
    let id = session_at(&srv.url, "2025-03-26").await;
    let resp = post(&srv.url, Some(&id), Some("2025-03-26"), batch).await;
    assert_eq!(resp.status(), 200);
    let body = resp.text().await.unwrap();
    let mut got = sse_data(&body);
    got.sort_unstable();
    assert_eq!(
        got,
        [
            r#"{"jsonrpc":"2.0","id":2,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":3,"result":{}}"#
        ]
    );
    // Stateless: the header names the revision (absent: 2025-03-26).
    let stateless = serve_http(
        hostile_server(),
        HttpServerConfig {
            stateless: true,
            json_response: true,
            ..HttpServerConfig::default()
        },
    )
    .await;
    let resp = post(&stateless.url, None, Some("2025-06-18"), batch).await;
    assert_eq!(resp.status(), 400);
    assert_eq!(resp.text().await.unwrap(), refused);
    let resp = post(&stateless.url, None, None, batch).await;
    assert_eq!(resp.status(), 200);
    // One JSON array, the responses in the order they completed.
    let body = resp.text().await.unwrap();
    let a = r#"{"jsonrpc":"2.0","id":2,"result":{}}"#;
    let b = r#"{"jsonrpc":"2.0","id":3,"result":{}}"#;
    assert!(
        body == format!("[{a},{b}]") || body == format!("[{b},{a}]"),
        "{body}"
    );
}

/// A raw WebSocket client that initializes, subscribes to `uri`, and then reads no more (its
/// receive buffer is small, so the server's side fills quickly).
async fn stuck_ws_client(
    addr: SocketAddr,
    uri: &str,
) -> tokio_tungstenite::WebSocketStream<TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let tcp = socket.connect(addr).await.unwrap();
    let mut req = format!("ws://{addr}/").into_client_request().unwrap();
    req.headers_mut()
        .insert("sec-websocket-protocol", "mcp".parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::client_async(req, tcp).await.unwrap();
    ws.send(WsMessage::text(INIT)).await.unwrap();
    ws.next().await.unwrap().unwrap();
    ws.send(WsMessage::text(
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    ))
    .await
    .unwrap();
    let sub =
        json!({"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": {"uri": uri}});
    ws.send(WsMessage::text(sub.to_string())).await.unwrap();
    loop {
        let m = ws.next().await.unwrap().unwrap();
        if m.to_text().unwrap().contains(r#""id":2"#) {
            return ws;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_never_blocks_notifications_to_others() {
    if !support::alone(
        module_path!(),
        "a_client_that_stops_reading_never_blocks_notifications_to_others",
    ) {
        return;
    }
    let _serial = SERIAL.lock().await;
    // 1 KiB notifications, 15 MB in all: well over what the kernel's buffers (up to 4 MiB
    // sending, 4 KiB receiving here) and the connection's queue (1024 messages) hold for the
    // client that stops reading, so it is disconnected on every run, however fast it drains.
    const N: usize = 14_000;
    let server = hostile_server();
    // One server, over WebSocket and Streamable HTTP.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let ws_addr = listener.local_addr().unwrap();
    let ws_url = format!("ws://{ws_addr}/");
    let stop = CancellationToken::new();
    let token = stop.clone();
    let ws_server = server.clone();
    let ws_task = tokio::spawn(async move {
        ws::serve(
            ws_server,
            listener,
            WsServerOptions::default(),
            token.cancelled_owned(),
        )
        .await
    });
    let srv = serve_http(
        server.clone(),
        HttpServerConfig {
            legacy_sse: Some(purra_protocol::http::LegacySse::default()),
            ..HttpServerConfig::default()
        },
    )
    .await;
    let uri = format!("res://{}", "u".repeat(1024));
    let heap = Heap::start();
    // An HTTP+SSE (2024-11-05) session subscribed, whose stream is never read after its
    // `endpoint` event.
    let mut stuck_sse = stuck_sse_client(srv.addr, &uri).await;

    let mut stuck_ws = stuck_ws_client(ws_addr, &uri).await;
    // An HTTP session subscribed, whose GET stream is open and never read.
    let sid = session_at(&srv.url, "2025-11-25").await;
    let sub =
        json!({"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": {"uri": uri}});
    let resp = post(&srv.url, Some(&sid), Some("2025-11-25"), &sub.to_string()).await;
    assert_eq!(resp.status(), 200);
    resp.text().await.unwrap();
    let mut stuck_http = TcpStream::connect(srv.addr).await.unwrap();
    stuck_http
        .write_all(
            format!(
                "GET /mcp HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n\
                 Mcp-Session-Id: {sid}\r\nMcp-Protocol-Version: 2025-11-25\r\n\r\n"
            )
            .as_bytes(),
        )
        .await
        .unwrap();

    // A well-behaved client, subscribed too.
    let good = Client::connect_ws(
        &ws_url,
        WsClientOptions::default(),
        ClientOptions::default(),
    )
    .await
    .unwrap();
    let received = Arc::new(AtomicUsize::new(0));
    let sink = received.clone();
    good.on(methods::RESOURCE_UPDATED, move |_| {
        sink.fetch_add(1, Ordering::Relaxed);
    });
    let _sub = good.subscribe_resource(&uri).await.unwrap();

    let t = Instant::now();
    for _ in 0..N {
        server.notify_resource_updated(&uri).await;
    }
    let sent = t.elapsed();
    let flood_end = Instant::now();
    eprintln!("{N} notifications sent in {sent:?}");
    // Without a stuck client this takes about as long; with one waited on, forever.
    assert!(sent < Duration::from_secs(30), "sending took {sent:?}");
    for _ in 0..400 {
        if received.load(Ordering::Relaxed) == N {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(received.load(Ordering::Relaxed), N);
    eprintln!(
        "the well-behaved client had all {N} after {:?}",
        t.elapsed()
    );
    // The WebSocket client that stopped reading was disconnected after the slow-peer timeout
    // (1 s here): reading again, it finds its connection ending before all N arrived. Its
    // queue was full before the flood ended, so the wait for room that gives up first began
    // before `flood_end`; the client reads only well after that wait's 1 s ran out. Reading
    // earlier would make room and rightly keep the connection: a reader that resumes within
    // the timeout is slow, not stuck.
    tokio::time::sleep_until((flood_end + Duration::from_secs(3)).into()).await;
    let mut got = 0;
    let ended = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match stuck_ws.next().await {
                Some(Ok(WsMessage::Text(_))) => got += 1,
                Some(Ok(WsMessage::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => {}
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the stuck client's connection is still open");
    eprintln!("the stuck client got {got} of {N} before its connection ended");
    assert!(got < N, "the stuck client got everything");
    // So was the HTTP+SSE client: its session is gone at once, and its stream, read again,
    // ends (the chunked body's last chunk) before all N arrived.
    for _ in 0..200 {
        if srv.http.legacy_session_count() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        srv.http.legacy_session_count(),
        0,
        "the stuck HTTP+SSE session is open"
    );
    let mut drained = 0usize;
    let mut buf = vec![0u8; 64 * 1024];
    let mut tail: Vec<u8> = Vec::new();
    let sse_ended = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match stuck_sse.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    drained += n;
                    tail.extend_from_slice(&buf[..n]);
                    let keep = tail.len().saturating_sub(16);
                    tail.drain(..keep);
                    if tail.ends_with(b"\r\n0\r\n\r\n") {
                        break;
                    }
                }
            }
        }
    })
    .await;
    assert!(sse_ended.is_ok(), "the stuck HTTP+SSE stream is still open");
    assert!(
        drained < N * 1024,
        "the stuck HTTP+SSE client got everything"
    );
    heap.assert_peak_below(64 * MIB, "three clients that stopped reading");
    drop(stuck_http);
    good.close().await;
    stop.cancel();
    let _ = ws_task.await;
}

/// An HTTP+SSE client over a raw socket: opens the stream, reads up to its `endpoint` event,
/// initializes and subscribes to `uri` through it, then never reads again.
async fn stuck_sse_client(addr: SocketAddr, uri: &str) -> TcpStream {
    let mut sock = TcpStream::connect(addr).await.unwrap();
    sock.write_all(b"GET /sse HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n\r\n")
        .await
        .unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    let endpoint = loop {
        let n = sock.read(&mut buf).await.unwrap();
        assert!(n > 0, "the stream ended before its endpoint event");
        seen.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&seen);
        if let Some(at) = text.find("event: endpoint\ndata: ") {
            let rest = &text[at + "event: endpoint\ndata: ".len()..];
            if let Some(end) = rest.find('\n') {
                break rest[..end].to_owned();
            }
        }
    };
    let url = format!("http://{addr}{endpoint}");
    let client = reqwest::Client::new();
    let sub =
        json!({"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": {"uri": uri}});
    for body in [
        INIT.to_owned(),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned(),
        sub.to_string(),
    ] {
        let r = client
            .post(&url)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 202);
    }
    // The subscription holds once its answer is on the stream: read up to it, no further.
    while !String::from_utf8_lossy(&seen).contains(r#""id":2,"result""#) {
        let n = sock.read(&mut buf).await.unwrap();
        assert!(n > 0, "the stream ended before the subscription's answer");
        seen.extend_from_slice(&buf[..n]);
    }
    sock
}

/// A WebSocket client that answers pings and otherwise stays silent; resolves to the close
/// frame it gets and when.
fn idle_ws_client(url: String) -> tokio::task::JoinHandle<Option<(CloseCode, String, Instant)>> {
    tokio::spawn(async move {
        let mut req = url.into_client_request().unwrap();
        req.headers_mut()
            .insert("sec-websocket-protocol", "mcp".parse().unwrap());
        let (mut ws, _) = tokio_tungstenite::connect_async(req).await.ok()?;
        while let Some(Ok(m)) = ws.next().await {
            if let WsMessage::Close(Some(f)) = m {
                return Some((f.code, f.reason.to_string(), Instant::now()));
            }
        }
        None
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_websocket_clients_never_hold_every_slot() {
    if !support::alone(
        module_path!(),
        "idle_websocket_clients_never_hold_every_slot",
    ) {
        return;
    }
    let _serial = SERIAL.lock().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/", listener.local_addr().unwrap());
    let stop = CancellationToken::new();
    let token = stop.clone();
    let options = WsServerOptions::default()
        .max_connections(8)
        .idle_timeout(None)
        .keep_alive(Some(Duration::from_millis(100)), Duration::from_secs(2));
    let task = tokio::spawn(async move {
        ws::serve(hostile_server(), listener, options, token.cancelled_owned()).await
    });
    let heap = Heap::start();
    let mut idle = Vec::new();
    for _ in 0..24 {
        idle.push(idle_ws_client(url.clone()));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t = Instant::now();
    let good = Client::connect_ws(&url, WsClientOptions::default(), ClientOptions::default())
        .await
        .expect("a well-behaved client connects");
    let r = good.call_tool("noop", json!({})).await.unwrap();
    let took = t.elapsed();
    assert_eq!(r.texts().collect::<Vec<_>>(), ["ok"]);
    assert!(took < Duration::from_secs(1), "took {took:?}");
    good.close().await;
    stop.cancel();
    let _ = task.await;
    let mut evicted = 0;
    for c in idle {
        if let Some((code, reason, _)) = c.await.unwrap() {
            if code == CloseCode::Again {
                assert_eq!(
                    reason,
                    "purra: the server is at its connection limit and closed this idle connection"
                );
                evicted += 1;
            }
        }
    }
    // 24 idle clients and one more, 8 slots: 17 were closed to make room.
    assert_eq!(evicted, 17);
    heap.assert_peak_below(16 * MIB, "24 idle WebSocket clients, 8 slots");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_websocket_clients_are_closed_after_the_idle_timeout() {
    if !support::alone(
        module_path!(),
        "silent_websocket_clients_are_closed_after_the_idle_timeout",
    ) {
        return;
    }
    let _serial = SERIAL.lock().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/", listener.local_addr().unwrap());
    let stop = CancellationToken::new();
    let token = stop.clone();
    let options = WsServerOptions::default()
        .idle_timeout(Some(Duration::from_millis(500)))
        .keep_alive(Some(Duration::from_millis(100)), Duration::from_secs(2));
    let task = tokio::spawn(async move {
        ws::serve(hostile_server(), listener, options, token.cancelled_owned()).await
    });
    let heap = Heap::start();
    let t = Instant::now();
    let (code, reason, at) = idle_ws_client(url.clone())
        .await
        .unwrap()
        .expect("closed by the server");
    let after = at - t;
    assert_eq!(code, CloseCode::Normal);
    assert_eq!(reason, "purra: idle for 500ms");
    assert!(
        after >= Duration::from_millis(450) && after < Duration::from_secs(3),
        "closed after {after:?}"
    );
    // A request in flight is not idleness: a 1.2 s call completes on a 500 ms idle timeout.
    let conn = Client::connect_ws(&url, WsClientOptions::default(), ClientOptions::default())
        .await
        .unwrap();
    let r = conn
        .call_tool("sleep", json!({"ms": 1200}))
        .await
        .expect("the call completes");
    assert_eq!(r.texts().collect::<Vec<_>>(), ["slept 1200"]);
    conn.close().await;
    stop.cancel();
    let _ = task.await;
    heap.assert_peak_below(8 * MIB, "idle WebSocket clients");
}
