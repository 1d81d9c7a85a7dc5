//! 1000 unused Streamable HTTP sessions expire and give their memory back. Its own test binary:
//! a counting global allocator measures live heap bytes exactly, which RSS cannot.
#![allow(unsafe_code)] // the counting allocator below forwards to the system allocator

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Duration;

use purra_protocol::{HandlerResult, HttpServerConfig, RequestCtx, Server, StreamableHttpServer};
use schemars::JsonSchema;
use serde::Deserialize;

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded unchanged to `System`; only a counter is updated.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

#[derive(Deserialize, JsonSchema)]
struct Nothing {}

/// The expiry of unused sessions; the server's own sweeper (every quarter of it) does the
/// expiring. Opening the 1000 must take less.
const IDLE: Duration = Duration::from_secs(10);

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

/// Opens `n` sessions with bare initializations (16 at a time): each answered `initialize` and
/// was not used since, so it is pending and expires after `pending_session_timeout`.
async fn open_sessions(client: &reqwest::Client, url: &str, n: usize) {
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..16 {
        let (client, url) = (client.clone(), url.to_owned());
        tasks.spawn(async move {
            for _ in (w..n).step_by(16) {
                let resp = client
                    .post(&url)
                    .header("content-type", "application/json")
                    .header("accept", "application/json, text/event-stream")
                    .body(INIT)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(resp.status(), 200);
                resp.text().await.unwrap();
            }
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.unwrap();
    }
}

async fn settle() {
    // Let engines see end of input, drain and drop.
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_idle_sessions_expire_and_memory_returns_to_baseline() {
    let server = Server::builder("mem", "1").build();
    server
        .tool(
            "noop",
            "does nothing",
            |_: Nothing, _c: RequestCtx| async move { HandlerResult::Ok("ok") },
        )
        .unwrap();
    let config = HttpServerConfig {
        session_idle_timeout: IDLE,
        pending_session_timeout: IDLE,
        max_pending_sessions: 1000,
        ..HttpServerConfig::default()
    };
    let http = StreamableHttpServer::new(server, config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let serving = http.clone();
    tokio::spawn(async move { serving.serve(listener, std::future::pending()).await });
    let client = reqwest::Client::new();

    // Warm up with a flood of the same size (connection pools, lazily built tables, and what the
    // runtime and the client keep once they have grown to a flood: about 0.2 MB, whatever the
    // number of sessions), then take the baseline: what a second flood leaves is the sessions'.
    open_sessions(&client, &url, 1000).await;
    tokio::time::sleep(IDLE + IDLE / 2).await;
    settle().await;
    assert_eq!(http.pending_session_count(), 0);
    let baseline = LIVE.load(Ordering::Relaxed);

    let t = std::time::Instant::now();
    open_sessions(&client, &url, 1000).await;
    eprintln!("1000 sessions opened in {:?}", t.elapsed());
    assert_eq!(http.pending_session_count(), 1000);
    let peak = LIVE.load(Ordering::Relaxed);
    let per_session = (peak - baseline) / 1000;
    assert!(
        per_session > 1000,
        "sessions should cost memory: {per_session} B each"
    );

    tokio::time::sleep(IDLE + IDLE / 2).await;
    settle().await;
    assert_eq!(http.pending_session_count(), 0);
    // Near the baseline: less than 2% of what the sessions held at their peak. Expired sessions'
    // engines finish dropping on their own tasks, later on a loaded machine: wait for that (up
    // to 10 s) rather than for a fixed time; a leak never gets there.
    let bound = (peak - baseline) / 50;
    let mut after = LIVE.load(Ordering::Relaxed);
    for _ in 0..200 {
        if after.saturating_sub(baseline) < bound {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        after = LIVE.load(Ordering::Relaxed);
    }
    let leaked = after.saturating_sub(baseline);
    eprintln!(
        "baseline {baseline} B, peak {peak} B ({per_session} B/session), after expiry {after} B ({leaked} B above baseline)"
    );
    assert!(
        leaked < bound,
        "baseline {baseline} B, peak {peak} B ({per_session} B/session), after expiry {after} B"
    );
}
