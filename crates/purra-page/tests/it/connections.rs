//! The approver page's connections, as the MCP endpoint's are tested (purra-protocol's
//! `tests/hostile_server.rs`): clients that drip their headers are closed at the header-read
//! timeout, and a flood of stalled connections is held to the connection bound (the longest-idle
//! making room) and closed at the timeout, while a well-behaved browser is still served. The
//! page serves with the MCP endpoint's own limits by default.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use purra_page::{ConnectionLimits, Page, PageConfig};
use purra_protocol::HttpServerConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{fresh_store, serve, TempDir};

/// A page on a fresh store, served on a loopback port: the page, its address, its directory.
async fn served(name: &str, config: PageConfig) -> (Page, SocketAddr, TempDir) {
    let (store, dir) = fresh_store("conn", name);
    let page = Page::new(Arc::new(store), config.approver("ada"));
    let addr = serve(&page).await;
    (page, addr, dir)
}

/// A well-behaved browser: the sign-in form, whole.
async fn probe(addr: SocketAddr) {
    let r = reqwest::get(format!("http://{addr}/login")).await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("id=\"token\""));
}

/// Reads a raw connection until the server closes it (EOF or reset): what it sent, or `None`
/// if it is still open after `within`.
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

/// Waits until `done` holds, polling; fails with `what` after `within`.
async fn until(within: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + within;
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[test]
fn the_page_serves_with_the_mcp_endpoints_connection_limits() {
    let page = PageConfig::default().connections;
    let mcp = HttpServerConfig::default().connections;
    assert_eq!(page.max_connections, mcp.max_connections);
    assert_eq!(page.header_read_timeout, mcp.header_read_timeout);
    assert_eq!(page.max_connections, 1024);
    assert_eq!(page.header_read_timeout, Some(Duration::from_secs(10)));
}

/// Finding 2 of the approver page's security review: a header sent a byte at a time kept its
/// connection open past 40 s. Twenty clients drip a request's headers (one byte every 100 ms, a
/// drip of 30 s that never completes the head); with a 1 s header-read timeout each is closed
/// by the page without a byte of answer, long before its drip ends, while a browser is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_2_slow_headers_are_cut_at_the_header_read_timeout() {
    let config = PageConfig::default()
        .connections(ConnectionLimits::default().header_read_timeout(Some(Duration::from_secs(1))));
    let (page, addr, _dir) = served("slow", config).await;
    let mut drips = Vec::new();
    for _ in 0..20 {
        drips.push(tokio::spawn(async move {
            let stream = TcpStream::connect(addr).await.unwrap();
            let (mut rd, mut wr) = stream.into_split();
            let writer = tokio::spawn(async move {
                let head = format!(
                    "GET /login HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: {}",
                    "a".repeat(300)
                );
                for b in head.bytes() {
                    if wr.write_all(&[b]).await.is_err() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                // The drip is over and the head still unfinished: hold the connection.
                std::future::pending::<()>().await;
            });
            let mut answer = Vec::new();
            let mut buf = [0u8; 1024];
            let closed = loop {
                match tokio::time::timeout(Duration::from_secs(20), rd.read(&mut buf)).await {
                    Ok(Ok(0)) | Ok(Err(_)) => break true,
                    Ok(Ok(n)) => answer.extend_from_slice(&buf[..n]),
                    Err(_) => break false,
                }
            };
            writer.abort();
            (closed, answer)
        }));
    }
    probe(addr).await;
    for d in drips {
        let (closed, answer) = d.await.unwrap();
        assert!(
            closed,
            "a dripping client is closed by the header-read timeout"
        );
        assert_eq!(answer, b"", "closed without an answer");
    }
    let stats = page.connection_stats().clone();
    until(Duration::from_secs(10), "every connection closed", || {
        stats.open() == 0
    })
    .await;
}

/// Finding 2 of the approver page's security review: 1500 stalled connections all stayed open.
/// With the page's default limits (the MCP endpoint's: 1024 connections, 10 s for the headers)
/// 1500 connections that send half a request head and stall are held to 1024 (the 476 oldest
/// closed to make room, without a byte), a browser is served meanwhile, and every stalled
/// connection is closed by the header-read timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_2_fifteen_hundred_stalled_connections_are_bounded_and_closed() {
    const STALLED: usize = 1500;
    raise_fd_limit(4 * STALLED as u64);
    let (page, addr, _dir) = served("stalled", PageConfig::default()).await;
    let stats = page.connection_stats().clone();
    let mut stalled = Vec::with_capacity(STALLED);
    for _ in 0..STALLED {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /login HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            .await
            .unwrap();
        stalled.push(s);
    }
    until(Duration::from_secs(10), "476 connections evicted", || {
        stats.evicted() >= (STALLED - 1024) as u64
    })
    .await;
    assert_eq!(stats.evicted(), (STALLED - 1024) as u64);
    assert_eq!(stats.open(), 1024);
    probe(addr).await;
    // The oldest were the ones closed to make room.
    let first = read_until_closed(&mut stalled[0], Duration::from_secs(2)).await;
    assert_eq!(first, Some(Vec::new()), "closed without a byte");
    // Every one is closed by the header-read timeout, none answered.
    let closing: Vec<_> = stalled
        .into_iter()
        .map(|mut s| {
            tokio::spawn(async move { read_until_closed(&mut s, Duration::from_secs(40)).await })
        })
        .collect();
    for c in closing {
        assert_eq!(c.await.unwrap(), Some(Vec::new()), "closed without a byte");
    }
    until(Duration::from_secs(10), "every connection closed", || {
        stats.open() == 0
    })
    .await;
}

/// Raises this process's descriptor limit to its hard limit (the test holds both ends of up to
/// 1500 connections); fails clearly when the hard limit is below `need`.
fn raise_fd_limit(need: u64) {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    assert!(
        hard >= need,
        "this test needs {need} file descriptors; the hard limit is {hard}: raise it (ulimit -Hn)"
    );
    if soft < need {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard).unwrap();
    }
}
