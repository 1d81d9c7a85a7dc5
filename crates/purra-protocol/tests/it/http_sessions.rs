//! 1000 unused Streamable HTTP sessions expire and give their memory back (run alone in a child
//! process of the test binary: its counting global allocator, `support::heap`, measures live
//! heap bytes exactly, which RSS cannot); one principal at its session bound closes only its own
//! sessions and never keeps another from opening one.

use std::time::Duration;

use purra_protocol::{
    HandlerResult, HttpServerConfig, Principal, RequestCtx, Server, StreamableHttpServer,
};

use crate::support::{self, heap, Nothing, INIT};

/// The expiry of unused sessions; the server's own sweeper (every quarter of it) does the
/// expiring. Opening the 1000 must take less.
const IDLE: Duration = Duration::from_secs(10);

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
    if !support::alone(
        module_path!(),
        "a_thousand_idle_sessions_expire_and_memory_returns_to_baseline",
    ) {
        return;
    }
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
    let baseline = heap::live();

    let t = std::time::Instant::now();
    open_sessions(&client, &url, 1000).await;
    eprintln!("1000 sessions opened in {:?}", t.elapsed());
    assert_eq!(http.pending_session_count(), 1000);
    let peak = heap::live();
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
    let mut after = heap::live();
    for _ in 0..200 {
        if after.saturating_sub(baseline) < bound {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        after = heap::live();
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

/// One request to `http` as a tower service, with `user`'s principal in its extensions as an
/// authentication layer in front would put it; status, `Mcp-Session-Id` and the response (the
/// body is not read for an SSE stream, which is returned open).
async fn send(
    http: &StreamableHttpServer,
    user: &str,
    method: &str,
    session: Option<&str>,
    body: &str,
) -> (u16, Option<String>, axum::response::Response) {
    use tower::ServiceExt;
    let mut req = axum::http::Request::builder()
        .method(method)
        .uri("/mcp")
        .header("host", "localhost")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if let Some(id) = session {
        req = req
            .header("mcp-session-id", id)
            .header("mcp-protocol-version", "2025-11-25");
    }
    let mut req = req.body(axum::body::Body::from(body.to_owned())).unwrap();
    req.extensions_mut().insert(Principal::new(user));
    let resp = http.clone().oneshot(req).await.unwrap();
    let id = resp
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    (resp.status().as_u16(), id, resp)
}

/// `user` opens a session and uses it (`notifications/initialized`): it is established.
async fn open(http: &StreamableHttpServer, user: &str) -> String {
    let (code, id, _) = send(http, user, "POST", None, INIT).await;
    assert_eq!(code, 200, "{user}'s initialize");
    let id = id.expect("a session id");
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let (code, _, _) = send(http, user, "POST", Some(&id), initialized).await;
    assert_eq!(code, 202);
    id
}

/// Whether `user` can still use session `id` (a ping answered 200, not 404).
async fn usable(http: &StreamableHttpServer, user: &str, id: &str) -> bool {
    let ping = r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#;
    let (code, _, _) = send(http, user, "POST", Some(id), ping).await;
    assert!(code == 200 || code == 404, "{code}");
    code == 200
}

/// Finding 2 of the second security review: principal A at its session bound does not keep B
/// from opening sessions (A cannot hold more than its own bound of the overall one), and A's new
/// session closes A's least recently used idle one, never B's, even with the overall bound
/// reached. With every one of A's sessions busy (a GET stream open), A's next `initialize` is
/// 429 and nothing of A's or B's is closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_2_one_principal_cannot_take_every_session() {
    let http = StreamableHttpServer::new(
        Server::builder("bound", "1").build(),
        HttpServerConfig {
            max_sessions: 4,
            max_sessions_per_principal: 2,
            json_response: true,
            ..HttpServerConfig::default()
        },
    );
    let a1 = open(&http, "alice").await;
    let a2 = open(&http, "alice").await;
    // a1 used last: a2 is A's least recently used.
    assert!(usable(&http, "alice", &a1).await);
    let a3 = open(&http, "alice").await;
    assert!(!usable(&http, "alice", &a2).await, "a2 was closed");
    assert!(usable(&http, "alice", &a1).await);
    assert!(usable(&http, "alice", &a3).await);
    assert_eq!(http.session_count(), 2);
    // B opens two: A holds only its two of the four.
    let b1 = open(&http, "bob").await;
    let b2 = open(&http, "bob").await;
    assert_eq!(http.session_count(), 4);
    // The overall bound reached, A's new session still replaces A's own least recently used
    // idle one (a1: a3 was used after it).
    let a4 = open(&http, "alice").await;
    assert!(!usable(&http, "alice", &a1).await, "a1 was closed");
    for (user, id) in [("alice", &a3), ("alice", &a4), ("bob", &b1), ("bob", &b2)] {
        assert!(usable(&http, user, id).await, "{user} {id}");
    }
    assert_eq!(http.session_count(), 4);
    // A's sessions both busy: A is refused, and B's sessions and A's are all kept.
    let (code, _, stream3) = send(&http, "alice", "GET", Some(&a3), "").await;
    assert_eq!(code, 200);
    let (code, _, stream4) = send(&http, "alice", "GET", Some(&a4), "").await;
    assert_eq!(code, 200);
    let (code, id, refused) = send(&http, "alice", "POST", None, INIT).await;
    assert_eq!((code, id), (429, None));
    let body = axum::body::to_bytes(refused.into_body(), 1 << 16)
        .await
        .unwrap();
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        body["error"]["message"],
        "Too Many Requests: this caller has too many sessions open, each in use; close one \
         (DELETE) or wait for one to end"
    );
    assert_eq!(http.session_count(), 4);
    assert!(usable(&http, "bob", &b1).await);
    assert!(usable(&http, "alice", &a3).await);
    assert!(
        !usable(&http, "bob", &a3).await,
        "sessions stay their owner's"
    );
    drop((stream3, stream4));
}
