//! Two Streamable HTTP servers sharing one session store, as two processes of a fleet behind a
//! balancer without stickiness: a session initialized on one is served by the other without a
//! new `initialize`, only for the principal that created it; `DELETE` on one ends it on both;
//! an event emitted while the client was away is replayed by the other after `Last-Event-ID`; a
//! running call's stream is followed there, taken over once its process stopped renewing its
//! lease (`take_over_streams`), and handed over at once by `release_streams`.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use std::time::SystemTime;

use purra_protocol::session_store::{
    EventLogBounds, MemorySessionStore, SessionRecord, SessionStore, SessionStoreError,
    StoredEvent, StreamRecord, StreamReplay,
};
use purra_protocol::types::{LoggingLevel, ReadResourceResult, Resource};
use purra_protocol::BoxFuture;
use purra_protocol::{
    HandlerResult, HttpServerConfig, Principal, RequestCtx, Server, StreamableHttpServer,
};

use crate::support::{Nothing, INIT};

const V: &str = "2025-11-25";

/// One "process": its own `Server` (registries, engines) and HTTP front, on the shared store.
fn instance(store: &Arc<dyn SessionStore>) -> (Server, StreamableHttpServer) {
    let server = Server::builder("fleet", "1").logging().build();
    server
        .tool(
            "who",
            "the session's revision, client and log level as this process sees them",
            |_: Nothing, c: RequestCtx| async move {
                HandlerResult::Ok(format!(
                    "{} {}",
                    c.protocol_version().as_str(),
                    c.client_info().map(|i| i.name).unwrap_or_default()
                ))
            },
        )
        .unwrap();
    server
        .tool(
            "chatty",
            "logs at info, then answers",
            |_: Nothing, c: RequestCtx| async move {
                c.log(LoggingLevel::Info, None, serde_json::json!("hello"))
                    .await
                    .unwrap();
                HandlerResult::Ok("ok")
            },
        )
        .unwrap();
    server.resource(Resource::new("mem://x", "x"), |uri, _c| async move {
        HandlerResult::Ok(ReadResourceResult::text(uri, "X"))
    });
    let http = StreamableHttpServer::new(
        server.clone(),
        HttpServerConfig {
            session_store: Some(store.clone()),
            ..HttpServerConfig::default()
        },
    );
    (server, http)
}

/// One request to `http` as a tower service, with `user`'s principal as an authentication
/// layer in front would put it: status, `Mcp-Session-Id` and the response.
async fn send(
    http: &StreamableHttpServer,
    user: &str,
    method: &str,
    session: Option<&str>,
    last_event: Option<&str>,
    body: &str,
) -> (u16, Option<String>, axum::response::Response) {
    send_at(http, user, method, session, last_event, body, V).await
}

/// [`send`] with `version` as the request's `MCP-Protocol-Version`.
async fn send_at(
    http: &StreamableHttpServer,
    user: &str,
    method: &str,
    session: Option<&str>,
    last_event: Option<&str>,
    body: &str,
    version: &str,
) -> (u16, Option<String>, axum::response::Response) {
    use tower::ServiceExt;
    let accept = if method == "GET" {
        "text/event-stream"
    } else {
        "application/json, text/event-stream"
    };
    let mut req = axum::http::Request::builder()
        .method(method)
        .uri("/mcp")
        .header("host", "localhost")
        .header("content-type", "application/json")
        .header("accept", accept);
    if let Some(id) = session {
        req = req
            .header("mcp-session-id", id)
            .header("mcp-protocol-version", version);
    }
    if let Some(last) = last_event {
        req = req.header("last-event-id", last);
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

/// A POST's whole (complete) body.
async fn text(resp: axum::response::Response) -> String {
    let b = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .unwrap();
    String::from_utf8(b.to_vec()).unwrap()
}

/// What an open SSE stream carries within `wait` (it is then dropped: the client goes away).
async fn read_for(resp: axum::response::Response, wait: Duration) -> String {
    let mut stream = resp.into_body().into_data_stream();
    let mut out = String::new();
    let until = tokio::time::Instant::now() + wait;
    while let Ok(Some(Ok(chunk))) = tokio::time::timeout_at(until, stream.next()).await {
        out.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    out
}

fn call(id: u32, name: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}","arguments":{{}}}}}}"#
    )
}

/// Opens alice's session on `http`: its id.
async fn initialize(http: &StreamableHttpServer, user: &str) -> String {
    let (code, id, resp) = send(http, user, "POST", None, None, INIT).await;
    assert_eq!(code, 200);
    assert!(text(resp)
        .await
        .contains(r#""protocolVersion":"2025-11-25""#));
    id.expect("a session id")
}

/// A session initialized on A serves requests on B without a new `initialize`, with what was
/// negotiated on A (revision, client info, log level); another principal's token on B (and on
/// A) gets the 404 of an unknown session; `DELETE` on B ends it on A too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_moves_between_servers_for_its_principal_only() {
    let store: Arc<dyn SessionStore> = Arc::new(MemorySessionStore::new());
    let (_, a) = instance(&store);
    let (_, b) = instance(&store);
    let id = initialize(&a, "alice").await;
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let (code, _, _) = send(&b, "alice", "POST", Some(&id), None, initialized).await;
    assert_eq!(code, 202, "B resumed the session without initialize");
    assert_eq!(b.session_count(), 1);
    let (code, _, resp) = send(&b, "alice", "POST", Some(&id), None, &call(2, "who")).await;
    assert_eq!(code, 200);
    let body = text(resp).await;
    assert!(
        body.contains(r#""text":"2025-11-25 raw""#),
        "B serves the revision and client info negotiated on A: {body}"
    );
    // The log level set on A holds on B, which already holds its own copy of the session.
    let (_, _, resp) = send(&b, "alice", "POST", Some(&id), None, &call(6, "chatty")).await;
    assert!(
        text(resp).await.contains(r#""data":"hello""#),
        "no level set yet"
    );
    let quiet =
        r#"{"jsonrpc":"2.0","id":7,"method":"logging/setLevel","params":{"level":"error"}}"#;
    let (code, _, resp) = send(&a, "alice", "POST", Some(&id), None, quiet).await;
    assert_eq!(code, 200);
    assert!(text(resp).await.contains(r#""result":{}"#));
    tokio::time::sleep(Duration::from_millis(50)).await;
    let (_, _, resp) = send(&b, "alice", "POST", Some(&id), None, &call(8, "chatty")).await;
    let body = text(resp).await;
    assert!(
        body.contains(r#""text":"ok""#) && !body.contains("hello"),
        "B took A's level: {body}"
    );
    // Another principal: the answer of an unknown session, on both, and nothing leaks.
    for (name, server) in [("B", &b), ("A", &a)] {
        let (code, _, resp) = send(server, "bob", "POST", Some(&id), None, &call(3, "who")).await;
        assert_eq!(code, 404, "bob on {name}");
        assert_eq!(
            text(resp).await,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Not Found: unknown or expired session"}}"#
        );
    }
    // A still serves alice (it holds the session too), then B ends it everywhere.
    let (code, _, _) = send(&a, "alice", "POST", Some(&id), None, &call(4, "who")).await;
    assert_eq!(code, 200);
    let (code, _, _) = send(&b, "alice", "DELETE", Some(&id), None, "").await;
    assert_eq!(code, 200);
    assert_eq!(store.load_session(id.clone()).await.unwrap(), None);
    let (code, _, _) = send(&a, "alice", "POST", Some(&id), None, &call(5, "who")).await;
    assert_eq!(code, 404, "A answers 404 once B deleted the session");
    assert_eq!(a.session_count(), 0, "A let its copy go");
}

/// The log level and resource subscriptions set on A are saved as they change and hold on B;
/// a notification emitted on A while the client's GET stream was gone is replayed by B after
/// `Last-Event-ID`, and B's stream then goes on live (B's own notifications follow on it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missed_notification_is_replayed_by_another_server() {
    let store: Arc<dyn SessionStore> = Arc::new(MemorySessionStore::new());
    let (server_a, a) = instance(&store);
    let (server_b, b) = instance(&store);
    let id = initialize(&a, "alice").await;
    let subscribe =
        r#"{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"mem://x"}}"#;
    let (code, _, resp) = send(&a, "alice", "POST", Some(&id), None, subscribe).await;
    assert_eq!(code, 200);
    assert!(text(resp).await.contains(r#""result":{}"#));
    // The GET stream on A: its priming event names where the client would resume from.
    let (code, _, resp) = send(&a, "alice", "GET", Some(&id), None, "").await;
    assert_eq!(code, 200);
    let primed = read_for(resp, Duration::from_millis(200)).await;
    let last = primed
        .lines()
        .find_map(|l| l.strip_prefix("id: "))
        .expect("a priming event id")
        .to_owned();
    // The client is gone (its stream dropped); A emits to its subscribed session.
    server_a.notify_resource_updated("mem://x").await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    // The client comes back at B.
    let (code, _, resp) = send(&b, "alice", "GET", Some(&id), Some(&last), "").await;
    assert_eq!(code, 200);
    let mut stream = resp.into_body().into_data_stream();
    let first = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .expect("the replay")
        .unwrap()
        .unwrap();
    let first = String::from_utf8(first.to_vec()).unwrap();
    assert!(
        first.contains(r#""method":"notifications/resources/updated","params":{"uri":"mem://x"}"#),
        "{first}"
    );
    let (stream_id, seq) = last.trim_start_matches('s').split_once('e').unwrap();
    let next = format!("id: s{stream_id}e{}", seq.parse::<u64>().unwrap() + 1);
    assert!(first.starts_with(&next), "{first}");
    // B resumed the subscription: its own update reaches the same (now live) stream.
    server_b.notify_resource_updated("mem://x").await;
    let more = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .expect("B's live event")
        .unwrap()
        .unwrap();
    let more = String::from_utf8(more.to_vec()).unwrap();
    assert!(more.contains(r#""uri":"mem://x""#), "{more}");
    assert!(
        !more.contains(&format!("s{stream_id}e")),
        "B's own stream: {more}"
    );
    // An event id the store never held: 404, not a silent empty stream.
    let (code, _, _) = send(&b, "alice", "GET", Some(&id), Some("s77e1"), "").await;
    assert_eq!(code, 404);
}

/// A memory store that counts the reads of a session a request makes
/// ([`SessionStore::touch_session`]).
#[derive(Default)]
struct Reads {
    inner: MemorySessionStore,
    touches: std::sync::atomic::AtomicUsize,
}

impl Reads {
    fn touches(&self) -> usize {
        self.touches.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl SessionStore for Reads {
    fn save_session(&self, r: SessionRecord) -> BoxFuture<'_, Result<(), SessionStoreError>> {
        self.inner.save_session(r)
    }
    fn load_session(
        &self,
        id: String,
    ) -> BoxFuture<'_, Result<Option<SessionRecord>, SessionStoreError>> {
        self.inner.load_session(id)
    }
    fn touch_session(
        &self,
        id: String,
        seen: Option<SystemTime>,
    ) -> BoxFuture<'_, Result<Option<SessionRecord>, SessionStoreError>> {
        self.touches
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.touch_session(id, seen)
    }
    fn sessions_version(&self) -> Option<u64> {
        self.inner.sessions_version()
    }
    fn end_session(&self, id: String) -> BoxFuture<'_, Result<bool, SessionStoreError>> {
        self.inner.end_session(id)
    }
    fn expire_sessions(&self, before: SystemTime) -> BoxFuture<'_, Result<u64, SessionStoreError>> {
        self.inner.expire_sessions(before)
    }
    fn append_events(
        &self,
        events: Vec<StoredEvent>,
        bounds: EventLogBounds,
    ) -> BoxFuture<'_, Result<(), SessionStoreError>> {
        self.inner.append_events(events, bounds)
    }
    fn events_after(
        &self,
        session: String,
        stream: u64,
        after: u64,
    ) -> BoxFuture<'_, Result<StreamReplay, SessionStoreError>> {
        self.inner.events_after(session, stream, after)
    }
    fn save_stream(&self, r: StreamRecord) -> BoxFuture<'_, Result<(), SessionStoreError>> {
        self.inner.save_stream(r)
    }
    fn load_stream(
        &self,
        session: String,
        stream: u64,
    ) -> BoxFuture<'_, Result<Option<StreamRecord>, SessionStoreError>> {
        self.inner.load_stream(session, stream)
    }
    fn lease_stream(
        &self,
        session: String,
        stream: u64,
        holder: String,
        now: SystemTime,
        until: SystemTime,
    ) -> BoxFuture<'_, Result<bool, SessionStoreError>> {
        self.inner.lease_stream(session, stream, holder, now, until)
    }
    fn finish_stream(
        &self,
        session: String,
        stream: u64,
    ) -> BoxFuture<'_, Result<(), SessionStoreError>> {
        self.inner.finish_stream(session, stream)
    }
}

/// A session this server holds is not read from the store on its requests while no session
/// was ended, expired or changed anywhere (the store's `sessions_version` stays); after such a
/// change it is read once more: a level set on B holds on A at A's next request, and a `DELETE`
/// on B, or an expiry by another process's sweep, is refused at A's next request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_sessions_are_read_after_a_change_only() {
    let reads = Arc::new(Reads::default());
    let store: Arc<dyn SessionStore> = reads.clone();
    let (_, a) = instance(&store);
    let (_, b) = instance(&store);
    let id = initialize(&a, "alice").await;
    for n in 0..20 {
        let (code, _, _) = send(&a, "alice", "POST", Some(&id), None, &call(10 + n, "who")).await;
        assert_eq!(code, 200);
    }
    let first = reads.touches();
    assert_eq!(first, 1, "only the first request read the session");
    // A session opened elsewhere changes none held here.
    let _bob = initialize(&b, "bob").await;
    for n in 0..5 {
        let (code, _, _) = send(&a, "alice", "POST", Some(&id), None, &call(40 + n, "who")).await;
        assert_eq!(code, 200);
    }
    assert_eq!(reads.touches(), first);
    // B serves the session and sets its level: A reads it once and takes the level.
    let quiet =
        r#"{"jsonrpc":"2.0","id":50,"method":"logging/setLevel","params":{"level":"error"}}"#;
    let (code, _, resp) = send(&b, "alice", "POST", Some(&id), None, quiet).await;
    assert_eq!(code, 200);
    assert!(text(resp).await.contains(r#""result":{}"#));
    let b_reads = reads.touches() - first;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let (_, _, resp) = send(&a, "alice", "POST", Some(&id), None, &call(51, "chatty")).await;
    let body = text(resp).await;
    assert!(
        body.contains(r#""text":"ok""#) && !body.contains("hello"),
        "A took B's level: {body}"
    );
    assert_eq!(reads.touches(), first + b_reads + 1, "A read it once");
    for n in 0..5 {
        let (code, _, _) = send(&a, "alice", "POST", Some(&id), None, &call(60 + n, "who")).await;
        assert_eq!(code, 200);
    }
    assert_eq!(reads.touches(), first + b_reads + 1);
    // Ended on B: refused at A's next request.
    let (code, _, _) = send(&b, "alice", "DELETE", Some(&id), None, "").await;
    assert_eq!(code, 200);
    let (code, _, _) = send(&a, "alice", "POST", Some(&id), None, &call(70, "who")).await;
    assert_eq!(code, 404, "A answers 404 once B deleted the session");
    // Expired by another process's sweep: refused at A's next request.
    let id = initialize(&a, "alice").await;
    let (code, _, _) = send(&a, "alice", "POST", Some(&id), None, &call(80, "who")).await;
    assert_eq!(code, 200);
    let (code, _, _) = send(&a, "alice", "POST", Some(&id), None, &call(81, "who")).await;
    assert_eq!(code, 200);
    let swept = store
        .expire_sessions(SystemTime::now() + Duration::from_secs(1))
        .await
        .unwrap();
    assert!(swept >= 1, "{swept}");
    let (code, _, _) = send(&a, "alice", "POST", Some(&id), None, &call(82, "who")).await;
    assert_eq!(
        code, 404,
        "A answers 404 once the session expired elsewhere"
    );
}

/// Fleet-wide idle expiry: a session nobody used within `session_idle_timeout` is ended in the
/// store by any server's sweep, and is then unknown everywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_expires_in_the_store_for_every_server() {
    let store: Arc<dyn SessionStore> = Arc::new(MemorySessionStore::new());
    let config = || HttpServerConfig {
        session_store: Some(store.clone()),
        session_idle_timeout: Duration::from_millis(300),
        ..HttpServerConfig::default()
    };
    let a = StreamableHttpServer::new(Server::builder("a", "1").build(), config());
    let b = StreamableHttpServer::new(Server::builder("b", "1").build(), config());
    let id = initialize(&a, "alice").await;
    assert!(store.load_session(id.clone()).await.unwrap().is_some());
    tokio::time::sleep(Duration::from_millis(400)).await;
    b.sweep_idle_sessions();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(store.load_session(id.clone()).await.unwrap(), None);
    let ping = r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#;
    let (code, _, _) = send(&b, "alice", "POST", Some(&id), None, ping).await;
    assert_eq!(code, 404);
}

/// A request's stream this process has already forgotten (past `resume_window`) is still
/// resumed from the store's log while the log keeps it: the answer is replayed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_forgotten_here_is_replayed_from_the_store() {
    let store: Arc<dyn SessionStore> = Arc::new(MemorySessionStore::new());
    let server = Server::builder("one", "1").build();
    server
        .tool("echo", "answers", |_: Nothing, _c: RequestCtx| async move {
            HandlerResult::Ok("answered")
        })
        .unwrap();
    let a = StreamableHttpServer::new(
        server,
        HttpServerConfig {
            session_store: Some(store.clone()),
            resume_window: Duration::from_millis(20),
            ..HttpServerConfig::default()
        },
    );
    let id = initialize(&a, "alice").await;
    let (code, _, resp) = send(&a, "alice", "POST", Some(&id), None, &call(2, "echo")).await;
    assert_eq!(code, 200);
    let body = text(resp).await;
    assert!(body.contains("answered"), "{body}");
    let primed = body
        .lines()
        .find_map(|l| l.strip_prefix("id: "))
        .expect("a priming id")
        .to_owned();
    tokio::time::sleep(Duration::from_millis(60)).await;
    a.sweep_idle_sessions();
    let (code, _, resp) = send(&a, "alice", "GET", Some(&id), Some(&primed), "").await;
    assert_eq!(code, 200, "resumed from the store");
    let replay = text(resp).await;
    assert!(replay.contains(r#""text":"answered""#), "{replay}");
}

/// A call answered at once, on a stream that opened with no priming event (2025-06-18), writes
/// no event to the store: its client holds no id of that stream to resume it with anywhere. At
/// 2025-11-25 the stream opens with a priming id, and the same answer is kept in the store's log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_with_no_event_id_before_it_is_not_kept_in_the_store() {
    let store = Arc::new(MemorySessionStore::new());
    let shared: Arc<dyn SessionStore> = store.clone();
    let (_server, a) = instance(&shared);
    for (version, kept) in [("2025-06-18", false), ("2025-11-25", true)] {
        let init = INIT.replace("2025-11-25", version);
        let (code, id, resp) = send_at(&a, "alice", "POST", None, None, &init, version).await;
        assert_eq!(code, 200);
        text(resp).await;
        let id = id.expect("a session id");
        let (code, _, resp) = send_at(
            &a,
            "alice",
            "POST",
            Some(&id),
            None,
            &call(2, "who"),
            version,
        )
        .await;
        assert_eq!(code, 200);
        let body = text(resp).await;
        assert!(body.contains(&format!("{version} raw")), "{body}");
        let ids: Vec<&str> = body
            .lines()
            .filter_map(|l| l.strip_prefix("id: "))
            .collect();
        assert_eq!(ids.len(), if kept { 2 } else { 1 }, "{body}");
        let (stream, seq) = ids[ids.len() - 1]
            .strip_prefix('s')
            .and_then(|r| r.split_once('e'))
            .map(|(s, e)| (s.parse::<u64>().unwrap(), e.parse::<u64>().unwrap()))
            .expect("an event id");
        // The session's writes go in order off the request path: wait until they settle.
        let mut found = Vec::new();
        for _ in 0..50 {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let replay = store.events_after(id.clone(), stream, 0).await.unwrap();
            found = replay.events.iter().map(|e| e.seq).collect();
            if !found.is_empty() {
                break;
            }
        }
        let want = if kept { vec![seq] } else { Vec::new() };
        assert_eq!(
            found, want,
            "{version}: the answer's event in the store's log"
        );
    }
}

/// A call's progress survives the move while the process running it lives: the client loses the
/// call's stream on A and resumes it at B with `Last-Event-ID`, where the store's log replays
/// the progress A sent meanwhile; B then follows the log (the call is recorded as running at
/// A), so the response A sends later reaches the client on the same connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_s_progress_and_response_reach_a_client_resuming_at_another_server() {
    let store: Arc<dyn SessionStore> = Arc::new(MemorySessionStore::new());
    let release = Arc::new(tokio::sync::Notify::new());
    let a_server = Server::builder("a", "1").build();
    let gate = release.clone();
    a_server
        .tool(
            "slow",
            "progress, then waits",
            move |_: Nothing, c: RequestCtx| {
                let gate = gate.clone();
                async move {
                    c.progress(1.0, Some(2.0), Some("half")).await.unwrap();
                    gate.notified().await;
                    HandlerResult::Ok("finished")
                }
            },
        )
        .unwrap();
    let config = || HttpServerConfig {
        session_store: Some(store.clone()),
        ..HttpServerConfig::default()
    };
    let a = StreamableHttpServer::new(a_server, config());
    let (_, b) = instance(&store);
    let id = initialize(&a, "alice").await;
    let slow = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow","arguments":{},"_meta":{"progressToken":"p"}}}"#;
    let (code, _, resp) = send(&a, "alice", "POST", Some(&id), None, slow).await;
    assert_eq!(code, 200);
    // The client reads the priming event, then its connection is gone.
    let seen = read_for(resp, Duration::from_millis(200)).await;
    let primed = seen
        .lines()
        .find_map(|l| l.strip_prefix("id: "))
        .expect("a priming id")
        .to_owned();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let (code, _, resp) = send(&b, "alice", "GET", Some(&id), Some(&primed), "").await;
    assert_eq!(code, 200);
    let reading = tokio::spawn(text(resp));
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!reading.is_finished(), "B follows the running call");
    release.notify_one();
    let replay = tokio::time::timeout(Duration::from_secs(5), reading)
        .await
        .expect("the stream ends with the response")
        .unwrap();
    assert!(
        replay.contains(r#""method":"notifications/progress""#),
        "{replay}"
    );
    assert!(replay.contains(r#""message":"half""#), "{replay}");
    assert!(
        replay.contains(r#""id":2,"result""#) && replay.contains("finished"),
        "{replay}"
    );
    // The record went with the response: a later resume replays what followed and ends.
    let last = replay
        .lines()
        .find_map(|l| l.strip_prefix("id: "))
        .expect("an event id")
        .to_owned();
    let (code, _, resp) = send(&b, "alice", "GET", Some(&id), Some(&last), "").await;
    assert_eq!(code, 200);
    let replay = text(resp).await;
    assert!(replay.contains("finished"), "{replay}");
    assert!(!replay.contains("half"), "only what followed: {replay}");
}

/// A call whose process stopped (its lease not renewed) is taken over where its client resumes,
/// with `take_over_streams`: B claims the stream's lease and runs the stored request again
/// through its handler, with the same request id, its events continuing the same stream's
/// numbering; without `take_over_streams`, C only follows and never runs it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_process_stopped_is_taken_over_where_its_client_resumes() {
    let store: Arc<dyn SessionStore> = Arc::new(MemorySessionStore::new());
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let process = |label: &'static str, take_over: bool| {
        let server = Server::builder(label, "1").build();
        let runs = runs.clone();
        server
            .tool(
                "held",
                "progress, then waits (at a) or answers",
                move |_: Nothing, c: RequestCtx| {
                    let runs = runs.clone();
                    async move {
                        runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        c.progress(1.0, None, Some(&format!("run at {label}")))
                            .await
                            .unwrap();
                        if label == "a" {
                            std::future::pending::<()>().await;
                        }
                        HandlerResult::Ok(format!("answered at {label}"))
                    }
                },
            )
            .unwrap();
        StreamableHttpServer::new(
            server,
            HttpServerConfig {
                session_store: Some(store.clone()),
                take_over_streams: take_over,
                stream_lease: Duration::from_millis(300),
                ..HttpServerConfig::default()
            },
        )
    };
    let a = process("a", true);
    let b = process("b", true);
    let c = process("c", false);
    let id = initialize(&a, "alice").await;
    let held = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"held","arguments":{},"_meta":{"progressToken":"p"}}}"#;
    let (code, _, resp) = send(&a, "alice", "POST", Some(&id), None, held).await;
    assert_eq!(code, 200);
    let seen = read_for(resp, Duration::from_millis(700)).await;
    assert!(seen.contains("run at a"), "{seen}");
    let last = seen
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("id: "))
        .expect("an event id")
        .to_owned();
    let (stream, seq) = last.split_once('e').unwrap();
    let seq: u64 = seq.parse().unwrap();
    // A lives (it renews its lease): C follows and takes nothing over.
    let (code, _, resp) = send(&c, "alice", "GET", Some(&id), Some(&last), "").await;
    assert_eq!(code, 200);
    assert_eq!(read_for(resp, Duration::from_millis(800)).await, "");
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 1);
    // A stops: its lease runs out, and B, where the client resumes, runs the call again.
    a.shutdown();
    let (code, _, resp) = send(&b, "alice", "GET", Some(&id), Some(&last), "").await;
    assert_eq!(code, 200);
    let rest = tokio::time::timeout(Duration::from_secs(5), text(resp))
        .await
        .expect("the taken-over call is answered");
    assert!(rest.contains(r#""message":"run at b""#), "{rest}");
    assert!(
        rest.contains(r#""id":7,"result""#) && rest.contains("answered at b"),
        "{rest}"
    );
    let ids: Vec<String> = rest
        .lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .map(str::to_owned)
        .collect();
    assert_eq!(
        ids,
        vec![
            format!("{stream}e{}", seq + 1),
            format!("{stream}e{}", seq + 2)
        ],
        "{rest}"
    );
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 2);
    // Answered: the record is gone, a later resume anywhere replays the answer and ends.
    let (code, _, resp) = send(&c, "alice", "GET", Some(&id), Some(&last), "").await;
    assert_eq!(code, 200);
    assert!(text(resp).await.contains("answered at b"));
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 2);
}

/// What a session keeps in a store is bounded: an `initialize` whose client capabilities make
/// its state larger than 64 KiB is refused (413) and nothing is kept, here or in the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_state_over_the_bound_is_refused_and_not_kept() {
    let store: Arc<dyn SessionStore> = Arc::new(MemorySessionStore::new());
    let (_, a) = instance(&store);
    let big = "x".repeat(70 * 1024);
    let init = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{"experimental":{{"big":"{big}"}}}},"clientInfo":{{"name":"raw","version":"1"}}}}}}"#
    );
    let (code, id, resp) = send(&a, "alice", "POST", None, None, &init).await;
    assert_eq!(code, 413);
    assert_eq!(id, None);
    assert!(text(resp).await.contains("is over 65536 bytes"));
    assert_eq!(a.pending_session_count() + a.session_count(), 0);
    // A usual one still fits.
    let id = initialize(&a, "alice").await;
    assert!(store.load_session(id).await.unwrap().is_some());
}

/// A session A closes to make room for its principal's next one (`max_sessions_per_principal`)
/// is ended in the store, not only on A: B answers 404 for it as A does, so the bound is not
/// walked around by sending the next request elsewhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_closed_to_make_room_is_ended_in_the_store() {
    let store: Arc<dyn SessionStore> = Arc::new(MemorySessionStore::new());
    let (server, _) = instance(&store);
    let a = StreamableHttpServer::new(
        server,
        HttpServerConfig {
            session_store: Some(store.clone()),
            max_sessions_per_principal: 1,
            ..HttpServerConfig::default()
        },
    );
    let (_, b) = instance(&store);
    let first = initialize(&a, "alice").await;
    let second = initialize(&a, "alice").await;
    assert_eq!(store.load_session(first.clone()).await.unwrap(), None);
    for (name, server) in [("B", &b), ("A", &a)] {
        let (code, _, _) = send(server, "alice", "POST", Some(&first), None, &call(2, "who")).await;
        assert_eq!(code, 404, "the first session on {name}");
    }
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let (code, _, _) = send(&b, "alice", "POST", Some(&second), None, initialized).await;
    assert_eq!(code, 202);
    let (code, _, resp) = send(&b, "alice", "POST", Some(&second), None, &call(3, "who")).await;
    assert_eq!(code, 200);
    assert!(text(resp).await.contains(r#""text":"2025-11-25 raw""#));
}

/// A deploy's drain (`release_streams`) hands a running call over at once: A ends the call's
/// connection and its lease, B takes the call over where the client resumes without waiting for
/// the (long) lease, and what A's handler still answers is dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn released_streams_are_taken_over_at_once_and_their_old_answers_dropped() {
    let store: Arc<dyn SessionStore> = Arc::new(MemorySessionStore::new());
    let release = Arc::new(tokio::sync::Notify::new());
    let process = |label: &'static str| {
        let server = Server::builder(label, "1").build();
        let gate = release.clone();
        server
            .tool(
                "held",
                "progress, then waits (at a) or answers",
                move |_: Nothing, c: RequestCtx| {
                    let gate = gate.clone();
                    async move {
                        c.progress(1.0, None, Some(&format!("run at {label}")))
                            .await
                            .unwrap();
                        if label == "a" {
                            gate.notified().await;
                        }
                        HandlerResult::Ok(format!("answered at {label}"))
                    }
                },
            )
            .unwrap();
        StreamableHttpServer::new(
            server,
            HttpServerConfig {
                session_store: Some(store.clone()),
                take_over_streams: true,
                stream_lease: Duration::from_secs(30),
                ..HttpServerConfig::default()
            },
        )
    };
    let a = process("a");
    let b = process("b");
    let id = initialize(&a, "alice").await;
    let held = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"held","arguments":{},"_meta":{"progressToken":"p"}}}"#;
    let (code, _, resp) = send(&a, "alice", "POST", Some(&id), None, held).await;
    assert_eq!(code, 200);
    let reading = tokio::spawn(text(resp));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(a.release_streams().await, 1);
    let seen = tokio::time::timeout(Duration::from_secs(5), reading)
        .await
        .expect("A ends the call's connection")
        .unwrap();
    assert!(
        seen.contains("run at a") && !seen.contains("answered"),
        "{seen}"
    );
    // A's handler answers now: dropped, never on the stream nor in the log.
    release.notify_one();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let last = seen
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("id: "))
        .expect("an event id")
        .to_owned();
    let (code, _, resp) = send(&b, "alice", "GET", Some(&id), Some(&last), "").await;
    assert_eq!(code, 200);
    let rest = tokio::time::timeout(Duration::from_secs(5), text(resp))
        .await
        .expect("taken over at once, not after the 30 s lease");
    assert!(
        rest.contains("run at b") && rest.contains("answered at b"),
        "{rest}"
    );
    assert!(!rest.contains("answered at a"), "{rest}");
}
