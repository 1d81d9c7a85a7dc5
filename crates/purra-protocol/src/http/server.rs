//! The Streamable HTTP server transport (2025 revisions): one endpoint for POST, GET and DELETE,
//! sessions, per-request SSE streams with bounded replay, and the header and origin rules.
//!
//! Each session runs one protocol engine. A router task takes what the engine writes and puts
//! each message on a stream: a message that belongs to a request goes on that request's POST
//! stream, everything else on the session's standalone (GET) stream. Every stream keeps its
//! recent events for replay, so a client that lost a stream resumes it with GET and
//! `Last-Event-ID`; a dropped connection is never a cancellation.

use std::collections::{HashMap, HashSet, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::sse::encode_event;
use crate::jsonrpc::{
    decode_frame, encode_error, ErrorCode, ErrorObject, Frame, Message, RequestId,
};
use crate::server::{Server, ServerSession};
use crate::transport::{Inbound, Outbound, Transport, TransportControl, CHANNEL_CAPACITY};
use crate::version;

use super::{PROTOCOL_VERSION_HEADER, SESSION_ID_HEADER};

/// How a Streamable HTTP server behaves. The defaults are safe for a local server.
#[derive(Debug, Clone)]
pub struct HttpServerConfig {
    /// The address [`StreamableHttpServer::bind`] listens on (default `127.0.0.1:0`: loopback,
    /// any free port). Bind a public address only behind authentication.
    pub bind: SocketAddr,
    /// The path of the MCP endpoint (default `/mcp`).
    pub endpoint: String,
    /// Host names (without port) accepted in the `Host` header; empty accepts any.
    /// Default: `localhost`, `127.0.0.1`, `[::1]`.
    pub allowed_hosts: Vec<String>,
    /// Origins accepted besides those whose host is in `allowed_hosts`
    /// (exact `scheme://host[:port]` strings).
    pub allowed_origins: Vec<String>,
    /// The largest request body accepted (default 4 MiB); larger is 413.
    pub max_body_bytes: usize,
    /// The most live sessions (default 10 000); an initialize beyond it is 503.
    pub max_sessions: usize,
    /// How long a session may stay idle, with no open stream, before it is closed and its
    /// memory reclaimed (default 10 minutes).
    pub session_idle_timeout: Duration,
    /// The most streams one session may hold for replay (default 64).
    pub max_streams_per_session: usize,
    /// Events each stream keeps for replay (default 256).
    pub replay_events: usize,
    /// The `retry` hint in milliseconds sent with the priming event (default 1000).
    pub sse_retry_ms: u64,
    /// Answer requests with a JSON body instead of an SSE stream.
    pub json_response: bool,
    /// No sessions: every POST is served on its own, without a handshake (for deployments
    /// behind a load balancer). GET and DELETE answer 405.
    pub stateless: bool,
}

impl Default for HttpServerConfig {
    fn default() -> Self {
        HttpServerConfig {
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            endpoint: "/mcp".into(),
            allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "[::1]".into()],
            allowed_origins: Vec::new(),
            max_body_bytes: crate::transport::DEFAULT_MAX_FRAME_BYTES,
            max_sessions: 10_000,
            session_idle_timeout: Duration::from_secs(600),
            max_streams_per_session: 64,
            replay_events: 256,
            sse_retry_ms: 1000,
            json_response: false,
            stateless: false,
        }
    }
}

/// A Streamable HTTP front for a [`Server`]: mount [`router`](Self::router) in an axum
/// application, or run it standalone with [`serve`](Self::serve).
#[derive(Clone)]
pub struct StreamableHttpServer {
    shared: Arc<HttpShared>,
}

impl std::fmt::Debug for StreamableHttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamableHttpServer")
            .field("config", &self.shared.config)
            .field("sessions", &self.session_count())
            .finish()
    }
}

struct HttpShared {
    server: Server,
    config: HttpServerConfig,
    sessions: Mutex<HashMap<String, Arc<HttpSession>>>,
    shutdown: CancellationToken,
}

impl StreamableHttpServer {
    /// Wraps `server` with `config`, and starts the idle-session sweeper.
    pub fn new(server: Server, config: HttpServerConfig) -> Self {
        let shared = Arc::new(HttpShared {
            server,
            config,
            sessions: Mutex::new(HashMap::new()),
            shutdown: CancellationToken::new(),
        });
        let weak = Arc::downgrade(&shared);
        let idle = shared.config.session_idle_timeout;
        let every = (idle / 4).clamp(Duration::from_millis(10), Duration::from_secs(30));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                let Some(shared) = weak.upgrade() else { return };
                if shared.shutdown.is_cancelled() {
                    return;
                }
                shared.sweep(idle);
            }
        });
        StreamableHttpServer { shared }
    }

    /// The number of live sessions.
    pub fn session_count(&self) -> usize {
        self.shared.sessions.lock().expect("sessions lock").len()
    }

    /// Closes idle sessions now (the sweeper also does this periodically).
    pub fn sweep_idle_sessions(&self) {
        self.shared.sweep(self.shared.config.session_idle_timeout);
    }

    /// An axum router serving the endpoint (POST, GET, DELETE); merge or nest it into an
    /// existing application.
    pub fn router(&self) -> axum::Router {
        axum::Router::new().route(
            &self.shared.config.endpoint,
            axum::routing::any(handle).with_state(self.shared.clone()),
        )
    }

    /// Serves on `listener` until `shutdown` resolves; then ends every stream and session and
    /// returns when connections have closed.
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let token = self.shared.shutdown.clone();
        let shared = self.shared.clone();
        let app = self.router();
        // SSE events are small writes: without TCP_NODELAY, Nagle's algorithm holds them back
        // until the peer's delayed ACK (tens of milliseconds per response).
        use axum::serve::ListenerExt;
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                shutdown.await;
                token.cancel();
                let sessions: Vec<Arc<HttpSession>> = shared
                    .sessions
                    .lock()
                    .expect("sessions lock")
                    .drain()
                    .map(|(_, s)| s)
                    .collect();
                for s in sessions {
                    s.close();
                }
            })
            .await
    }

    /// Binds the configured address (`127.0.0.1:0` by default).
    pub async fn bind(self) -> std::io::Result<BoundHttpServer> {
        let listener = tokio::net::TcpListener::bind(self.shared.config.bind).await?;
        Ok(BoundHttpServer {
            server: self,
            listener,
        })
    }
}

/// A server bound to its address, ready to serve.
#[derive(Debug)]
pub struct BoundHttpServer {
    server: StreamableHttpServer,
    listener: tokio::net::TcpListener,
}

impl BoundHttpServer {
    /// The address it listens on.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` resolves (see [`StreamableHttpServer::serve`]).
    pub async fn serve(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        self.server.serve(self.listener, shutdown).await
    }
}

impl HttpShared {
    fn sweep(&self, idle: Duration) {
        let now = Instant::now();
        let expired: Vec<Arc<HttpSession>> = {
            let mut sessions = self.sessions.lock().expect("sessions lock");
            let ids: Vec<String> = sessions
                .iter()
                .filter(|(_, s)| s.idle_since(now) >= idle)
                .map(|(id, _)| id.clone())
                .collect();
            ids.iter().filter_map(|id| sessions.remove(id)).collect()
        };
        for s in expired {
            s.close();
        }
    }
}

/// One stream of SSE events: a POST's response stream, or the standalone stream (id 0).
struct Stream {
    /// Recent events for replay: (sequence number, encoded message).
    events: VecDeque<(u64, Bytes)>,
    next_seq: u64,
    /// The highest sequence number handed to a live connection.
    delivered: u64,
    /// The connection currently reading this stream, if any.
    live: Option<mpsc::Sender<Bytes>>,
    /// Requests of this stream still waiting for their response.
    pending: HashSet<RequestId>,
    /// Collects responses instead of streaming (JSON response mode).
    json: bool,
}

impl Stream {
    fn new(json: bool) -> Self {
        Stream {
            events: VecDeque::new(),
            next_seq: 1,
            delivered: 0,
            live: None,
            pending: HashSet::new(),
            json,
        }
    }
}

struct Streams {
    next_id: u64,
    map: HashMap<u64, Stream>,
    /// Which stream each in-flight request's messages go to.
    by_request: HashMap<RequestId, u64>,
}

/// One session: its engine's input, its streams, and its activity clock.
struct HttpSession {
    inbound: mpsc::Sender<Inbound>,
    streams: Mutex<Streams>,
    last_active: Mutex<Instant>,
    session: ServerSession,
    replay: usize,
    max_streams: usize,
    closed: CancellationToken,
}

impl std::fmt::Debug for HttpSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpSession").finish_non_exhaustive()
    }
}

impl TransportControl for HttpSessionControl {
    fn close_request_stream(&self, request: &RequestId) -> bool {
        let Some(s) = self.0.upgrade() else {
            return false;
        };
        let mut streams = s.streams.lock().expect("streams lock");
        let Some(id) = streams.by_request.get(request).copied() else {
            return false;
        };
        match streams.map.get_mut(&id) {
            Some(stream) if !stream.json => stream.live.take().is_some(),
            _ => false,
        }
    }
}

/// The session's control, held weakly by its engine.
#[derive(Debug)]
struct HttpSessionControl(std::sync::Weak<HttpSession>);

const STANDALONE: u64 = 0;

fn event_id(stream: u64, seq: u64) -> String {
    format!("s{stream}e{seq}")
}

pub(crate) fn parse_event_id(id: &str) -> Option<(u64, u64)> {
    let rest = id.strip_prefix('s')?;
    let (stream, seq) = rest.split_once('e')?;
    Some((stream.parse().ok()?, seq.parse().ok()?))
}

impl HttpSession {
    /// Starts a session's engine and router.
    fn start(
        server: &Server,
        config: &HttpServerConfig,
        stateless_version: Option<&str>,
        id: Option<&str>,
    ) -> Arc<HttpSession> {
        let (in_tx, in_rx) = mpsc::channel(CHANNEL_CAPACITY);
        let (out_tx, out_rx) = mpsc::channel(CHANNEL_CAPACITY);
        let close_write = CancellationToken::new();
        Arc::new_cyclic(|weak: &std::sync::Weak<HttpSession>| {
            let transport = Transport::from_channels(in_rx, out_tx, close_write.clone())
                .with_control(Arc::new(HttpSessionControl(weak.clone())))
                .labeled("http", id.map(str::to_owned));
            let (session, _join) = match stateless_version {
                Some(v) => server.start_stateless(transport, v),
                None => server.start(transport),
            };
            let mut map = HashMap::new();
            map.insert(STANDALONE, Stream::new(false));
            let weak = weak.clone();
            tokio::spawn(route(weak, out_rx, close_write));
            HttpSession {
                inbound: in_tx,
                streams: Mutex::new(Streams {
                    next_id: 1,
                    map,
                    by_request: HashMap::new(),
                }),
                last_active: Mutex::new(Instant::now()),
                session,
                replay: config.replay_events,
                max_streams: config.max_streams_per_session,
                closed: CancellationToken::new(),
            }
        })
    }

    fn touch(&self) {
        *self.last_active.lock().expect("activity lock") = Instant::now();
    }

    /// How long the session has been idle; a session with a live stream is never idle.
    fn idle_since(&self, now: Instant) -> Duration {
        let streams = self.streams.lock().expect("streams lock");
        if streams
            .map
            .values()
            .any(|s| s.live.as_ref().is_some_and(|l| !l.is_closed()))
        {
            return Duration::ZERO;
        }
        now.saturating_duration_since(*self.last_active.lock().expect("activity lock"))
    }

    /// Ends the session: the engine sees end of input, every stream ends.
    fn close(&self) {
        self.closed.cancel();
        let mut streams = self.streams.lock().expect("streams lock");
        for s in streams.map.values_mut() {
            s.live = None;
        }
        streams.map.clear();
        streams.by_request.clear();
    }

    /// Puts one outbound message on its stream.
    fn deliver(&self, out: Outbound) {
        let mut guard = self.streams.lock().expect("streams lock");
        let streams = &mut *guard;
        let mut target = out
            .related
            .as_ref()
            .and_then(|r| streams.by_request.get(r).copied())
            .unwrap_or(STANDALONE);
        if target != STANDALONE
            && !out.completes
            && streams.map.get(&target).is_some_and(|s| s.json)
        {
            // A JSON response carries only responses; the rest goes on the standalone stream.
            target = STANDALONE;
        }
        let replay = self.replay;
        let Some(stream) = streams.map.get_mut(&target) else {
            return;
        };
        let seq = stream.next_seq;
        stream.next_seq += 1;
        let data = if stream.json {
            Bytes::from(out.frame)
        } else {
            encode_event(&event_id(target, seq), None, &out.frame)
        };
        stream.events.push_back((seq, data.clone()));
        while stream.events.len() > replay {
            stream.events.pop_front();
        }
        if let Some(live) = &stream.live {
            match live.try_send(data) {
                Ok(()) => stream.delivered = seq,
                // Too slow or gone: drop the connection; the client resumes from its last id.
                Err(_) => stream.live = None,
            }
        }
        if out.completes {
            if let Some(r) = &out.related {
                stream.pending.remove(r);
                streams.by_request.remove(r);
            }
            if target != STANDALONE && stream.pending.is_empty() {
                // Every response of this stream is out: end the connection.
                stream.live = None;
                if stream.delivered + 1 >= stream.next_seq {
                    streams.map.remove(&target);
                }
            }
        }
    }

    /// Opens a stream for the requests of one POST.
    fn open_stream(
        &self,
        requests: &[RequestId],
        json: bool,
    ) -> Result<(u64, mpsc::Receiver<Bytes>), StatusCode> {
        let mut streams = self.streams.lock().expect("streams lock");
        if streams.map.len() > self.max_streams {
            // Forget the oldest finished streams first.
            let mut finished: Vec<u64> = streams
                .map
                .iter()
                .filter(|(id, s)| **id != STANDALONE && s.pending.is_empty())
                .map(|(id, _)| *id)
                .collect();
            finished.sort_unstable();
            for id in finished
                .into_iter()
                .take(streams.map.len() - self.max_streams)
            {
                streams.map.remove(&id);
            }
            if streams.map.len() > self.max_streams {
                return Err(StatusCode::TOO_MANY_REQUESTS);
            }
        }
        let id = streams.next_id;
        streams.next_id += 1;
        let (tx, rx) = mpsc::channel(self.replay.max(16));
        let mut stream = Stream::new(json);
        stream.live = Some(tx);
        stream.pending = requests.iter().cloned().collect();
        streams.map.insert(id, stream);
        for r in requests {
            streams.by_request.insert(r.clone(), id);
        }
        Ok((id, rx))
    }

    /// Attaches a GET connection: resumes `last` if given, else the standalone stream.
    fn attach(
        &self,
        last: Option<(u64, u64)>,
    ) -> Result<(u64, u64, mpsc::Receiver<Bytes>), StatusCode> {
        let mut streams = self.streams.lock().expect("streams lock");
        let (id, after) = match last {
            Some((id, seq)) => (id, seq),
            None => (STANDALONE, u64::MAX),
        };
        let Some(stream) = streams.map.get_mut(&id) else {
            // The stream is gone (finished and forgotten, or never existed).
            return Err(StatusCode::NOT_FOUND);
        };
        if id == STANDALONE
            && last.is_none()
            && stream.live.as_ref().is_some_and(|l| !l.is_closed())
        {
            return Err(StatusCode::CONFLICT);
        }
        let (tx, rx) = mpsc::channel(self.replay.max(16));
        // Resuming replays what followed the client's last id; a fresh standalone stream
        // delivers what was queued while no GET stream was open.
        let from = if after == u64::MAX {
            stream.delivered
        } else {
            after
        };
        let oldest_kept = stream.events.front().map_or(stream.next_seq, |e| e.0);
        if after != u64::MAX && from + 1 < oldest_kept {
            // Events the client missed have left the replay buffer: it cannot resume losslessly.
            return Err(StatusCode::GONE);
        }
        let mut last_sent = from;
        for (seq, data) in stream.events.iter().filter(|(seq, _)| *seq > from) {
            if tx.try_send(data.clone()).is_err() {
                break;
            }
            last_sent = *seq;
        }
        stream.delivered = stream.delivered.max(last_sent);
        let finished = id != STANDALONE && stream.pending.is_empty();
        if finished {
            if stream.delivered + 1 >= stream.next_seq {
                streams.map.remove(&id);
            }
        } else {
            stream.live = Some(tx);
        }
        Ok((id, stream_next_seq(&streams, id), rx))
    }
}

fn stream_next_seq(streams: &Streams, id: u64) -> u64 {
    streams.map.get(&id).map_or(0, |s| s.next_seq)
}

/// Moves what the engine writes onto streams until the engine stops.
async fn route(
    session: std::sync::Weak<HttpSession>,
    mut out_rx: mpsc::Receiver<Outbound>,
    close_write: CancellationToken,
) {
    loop {
        let next = tokio::select! {
            biased;
            m = out_rx.recv() => m,
            _ = close_write.cancelled() => None,
        };
        let Some(out) = next else { break };
        let Some(s) = session.upgrade() else { break };
        s.deliver(out);
    }
    if let Some(s) = session.upgrade() {
        s.close();
    }
}

fn status(code: StatusCode, message: &str) -> Response {
    let body = encode_error(None, &ErrorObject::new(ErrorCode::INVALID_REQUEST, message));
    (code, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// A refused request: a status and a message, answered as a JSON-RPC error body.
struct Reject(StatusCode, String);

impl Reject {
    fn new(code: StatusCode, message: impl Into<String>) -> Self {
        Reject(code, message.into())
    }
}

impl IntoResponse for Reject {
    fn into_response(self) -> Response {
        status(self.0, &self.1)
    }
}

pub(crate) fn host_of_authority(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        return match rest.find(']') {
            Some(end) => &authority[..end + 2],
            None => authority,
        };
    }
    authority.split(':').next().unwrap_or(authority)
}

impl HttpShared {
    /// DNS-rebinding protection: the Host and Origin headers must name an allowed host.
    fn check_host_and_origin(&self, headers: &HeaderMap) -> Result<(), Reject> {
        let cfg = &self.config;
        if !cfg.allowed_hosts.is_empty() {
            let host = headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .unwrap_or("");
            let name = host_of_authority(host).to_ascii_lowercase();
            if !cfg
                .allowed_hosts
                .iter()
                .any(|h| h.eq_ignore_ascii_case(&name))
            {
                return Err(Reject::new(
                    StatusCode::FORBIDDEN,
                    "Forbidden: invalid Host header",
                ));
            }
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            let allowed_exact = cfg.allowed_origins.iter().any(|o| o == origin);
            let by_host = origin
                .split_once("://")
                .map(|(scheme, rest)| {
                    (scheme == "http" || scheme == "https")
                        && (cfg.allowed_hosts.is_empty()
                            || cfg.allowed_hosts.iter().any(|h| {
                                h.eq_ignore_ascii_case(host_of_authority(
                                    rest.trim_end_matches('/'),
                                ))
                            }))
                })
                .unwrap_or(false);
            if !allowed_exact && !by_host {
                return Err(Reject::new(
                    StatusCode::FORBIDDEN,
                    "Forbidden: invalid Origin header",
                ));
            }
        }
        Ok(())
    }

    fn session(&self, headers: &HeaderMap) -> Result<Arc<HttpSession>, Reject> {
        let Some(id) = headers.get(SESSION_ID_HEADER).and_then(|v| v.to_str().ok()) else {
            return Err(Reject::new(
                StatusCode::BAD_REQUEST,
                "Bad Request: missing Mcp-Session-Id header",
            ));
        };
        let sessions = self.sessions.lock().expect("sessions lock");
        match sessions.get(id) {
            Some(s) if !s.closed.is_cancelled() => Ok(s.clone()),
            _ => Err(Reject::new(
                StatusCode::NOT_FOUND,
                "Not Found: unknown or expired session",
            )),
        }
    }
}

fn accepts(headers: &HeaderMap, mime: &str) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|v| v.split(';').next().unwrap_or("").trim())
        .any(|v| {
            v == mime || v == "*/*" || (v.ends_with("/*") && mime.starts_with(&v[..v.len() - 1]))
        })
}

fn check_version_header(headers: &HeaderMap) -> Result<(), Reject> {
    match headers
        .get(PROTOCOL_VERSION_HEADER)
        .map(|v| v.to_str().unwrap_or(""))
    {
        None => Ok(()), // absent: the client speaks 2025-03-26
        Some(v) if version::is_handshake(v) => Ok(()),
        Some(v) => Err(Reject::new(
            StatusCode::BAD_REQUEST,
            format!("Bad Request: unsupported MCP-Protocol-Version {v:?}"),
        )),
    }
}

fn new_session_id() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the OS random source");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

async fn handle(State(shared): State<Arc<HttpShared>>, req: Request) -> Response {
    if let Err(r) = shared.check_host_and_origin(req.headers()) {
        return r.into_response();
    }
    match *req.method() {
        Method::POST => post(shared, req).await,
        Method::GET => get(shared, req.headers()),
        Method::DELETE => delete(shared, req.headers()),
        _ => (
            StatusCode::METHOD_NOT_ALLOWED,
            [(header::ALLOW, "GET, POST, DELETE")],
        )
            .into_response(),
    }
}

fn sse_response(
    rx: mpsc::Receiver<Bytes>,
    priming: Option<Bytes>,
    session_id: Option<&str>,
    shutdown: CancellationToken,
    closed: CancellationToken,
) -> Response {
    let first = priming.map(Ok::<Bytes, Infallible>);
    let stream = futures_util::stream::unfold((rx, first), move |(mut rx, first)| {
        let shutdown = shutdown.clone();
        let closed = closed.clone();
        async move {
            if let Some(f) = first {
                return Some((f, (rx, None)));
            }
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => None,
                _ = closed.cancelled() => None,
                m = rx.recv() => m.map(|b| (Ok(b), (rx, None))),
            }
        }
    });
    let mut resp = Response::new(Body::from_stream(stream));
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Some(id) = session_id.and_then(|id| HeaderValue::from_str(id).ok()) {
        h.insert(SESSION_ID_HEADER, id);
    }
    resp
}

fn priming_event(stream: u64, seq: u64, retry_ms: u64, protocol: Option<&str>) -> Option<Bytes> {
    // The priming event (an id and a retry hint, empty data) is a 2025-11-25 feature.
    (protocol == Some(version::V2025_11_25)).then(|| {
        encode_event(
            &event_id(stream, seq.saturating_sub(1)),
            Some(retry_ms),
            b"",
        )
    })
}

async fn post(shared: Arc<HttpShared>, req: Request) -> Response {
    let headers = req.headers().clone();
    if !(accepts(&headers, "application/json") && accepts(&headers, "text/event-stream")) {
        return status(
            StatusCode::NOT_ACCEPTABLE,
            "Not Acceptable: the client must accept both application/json and text/event-stream",
        );
    }
    let json_ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .eq_ignore_ascii_case("application/json")
        });
    if !json_ct {
        return status(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Unsupported Media Type: send application/json",
        );
    }
    let limit = shared.config.max_body_bytes;
    if headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok())
        .is_some_and(|n| n > limit)
    {
        return status(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("Payload Too Large: the limit is {limit} bytes"),
        );
    }
    let body = match axum::body::to_bytes(req.into_body(), limit).await {
        Ok(b) => b,
        Err(_) => {
            return status(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("Payload Too Large: the limit is {limit} bytes"),
            )
        }
    };
    let messages: Vec<(Bytes, Option<RequestId>, bool)> = match decode_frame(&body) {
        Frame::Single(Ok(m)) => vec![(body.clone(), request_id(&m), is_initialize(&m))],
        Frame::Single(Err(e)) => {
            let body = encode_error(e.id.as_ref(), &e.error);
            return (
                StatusCode::BAD_REQUEST,
                [(header::CONTENT_TYPE, "application/json")],
                body,
            )
                .into_response();
        }
        Frame::Batch(items) => {
            // Each message of a batch (2025-03-26) goes to the engine on its own.
            let raw: Vec<&serde_json::value::RawValue> =
                serde_json::from_slice(&body).unwrap_or_default();
            let mut out = Vec::new();
            for (item, raw) in items.into_iter().zip(raw) {
                match item {
                    Ok(m) => out.push((
                        Bytes::copy_from_slice(raw.get().as_bytes()),
                        request_id(&m),
                        is_initialize(&m),
                    )),
                    Err(e) => {
                        let body = encode_error(e.id.as_ref(), &e.error);
                        return (
                            StatusCode::BAD_REQUEST,
                            [(header::CONTENT_TYPE, "application/json")],
                            body,
                        )
                            .into_response();
                    }
                }
            }
            out
        }
    };
    let has_initialize = messages.iter().any(|m| m.2);
    // The revision an initialize will settle on, known before the engine has answered it.
    let initialize_version = has_initialize
        .then(|| {
            #[derive(serde::Deserialize)]
            struct P {
                params: crate::types::InitializeParams,
            }
            serde_json::from_slice::<P>(&body).ok()
        })
        .flatten()
        .map(|p| version::negotiate(&p.params.protocol_version).to_owned());
    if has_initialize && messages.len() > 1 {
        return status(
            StatusCode::BAD_REQUEST,
            "Bad Request: initialize must be sent alone",
        );
    }
    let cfg = &shared.config;
    let (session, session_id) = if cfg.stateless {
        let v = headers
            .get(PROTOCOL_VERSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or(version::LATEST_HANDSHAKE_VERSION);
        if let Err(r) = check_version_header(&headers) {
            return r.into_response();
        }
        let stateless = (!has_initialize).then_some(v);
        (
            HttpSession::start(&shared.server, cfg, stateless, None),
            None,
        )
    } else if has_initialize {
        if shared.sessions.lock().expect("sessions lock").len() >= cfg.max_sessions {
            return status(
                StatusCode::SERVICE_UNAVAILABLE,
                "Service Unavailable: too many sessions",
            );
        }
        let id = new_session_id();
        let s = HttpSession::start(&shared.server, cfg, None, Some(&id));
        shared
            .sessions
            .lock()
            .expect("sessions lock")
            .insert(id.clone(), s.clone());
        (s, Some(id))
    } else {
        if let Err(r) = check_version_header(&headers) {
            return r.into_response();
        }
        match shared.session(&headers) {
            Ok(s) => {
                let id = headers
                    .get(SESSION_ID_HEADER)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                (s, id)
            }
            Err(r) => return r.into_response(),
        }
    };
    session.touch();
    let requests: Vec<RequestId> = messages.iter().filter_map(|m| m.1.clone()).collect();
    let opened = if requests.is_empty() {
        None
    } else {
        match session.open_stream(&requests, cfg.json_response) {
            Ok(o) => Some(o),
            Err(code) => {
                return status(
                    code,
                    "Too Many Requests: too many open streams in this session",
                )
            }
        }
    };
    for (frame, _, _) in messages {
        if session.inbound.send(Inbound::Frame(frame)).await.is_err() {
            return status(StatusCode::NOT_FOUND, "Not Found: the session has ended");
        }
    }
    let Some((stream_id, rx)) = opened else {
        return StatusCode::ACCEPTED.into_response();
    };
    if cfg.json_response {
        return json_response(rx, requests.len(), session_id.as_deref(), session).await;
    }
    let protocol = session
        .session
        .protocol_version()
        .or(initialize_version)
        .or_else(|| {
            headers
                .get(PROTOCOL_VERSION_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        });
    let priming = priming_event(stream_id, 1, cfg.sse_retry_ms, protocol.as_deref());
    let closed = session.closed.clone();
    // A stateless session lives as long as its response stream.
    let keep = cfg.stateless.then_some(session);
    let resp = sse_response(
        rx,
        priming,
        session_id.as_deref(),
        shared.shutdown.clone(),
        closed,
    );
    if let Some(s) = keep {
        tokio::spawn(async move {
            // Close the stateless session once its stream has completed.
            loop {
                let done = {
                    let streams = s.streams.lock().expect("streams lock");
                    !streams.map.contains_key(&stream_id)
                        || streams
                            .map
                            .get(&stream_id)
                            .is_some_and(|st| st.pending.is_empty())
                };
                if done || s.closed.is_cancelled() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            s.close();
        });
    }
    resp
}

async fn json_response(
    mut rx: mpsc::Receiver<Bytes>,
    expected: usize,
    session_id: Option<&str>,
    session: Arc<HttpSession>,
) -> Response {
    let mut frames = Vec::with_capacity(expected);
    while frames.len() < expected {
        tokio::select! {
            m = rx.recv() => match m {
                Some(f) => frames.push(f),
                None => break,
            },
            _ = session.closed.cancelled() => break,
        }
    }
    if frames.is_empty() {
        return status(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Internal Server Error: the session ended",
        );
    }
    let body = if expected == 1 {
        frames.remove(0).to_vec()
    } else {
        let mut b = vec![b'['];
        for (i, f) in frames.iter().enumerate() {
            if i > 0 {
                b.push(b',');
            }
            b.extend_from_slice(f);
        }
        b.push(b']');
        b
    };
    let mut resp = (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response();
    if let Some(id) = session_id.and_then(|id| HeaderValue::from_str(id).ok()) {
        resp.headers_mut().insert(SESSION_ID_HEADER, id);
    }
    resp
}

fn get(shared: Arc<HttpShared>, headers: &HeaderMap) -> Response {
    if shared.config.stateless {
        return (StatusCode::METHOD_NOT_ALLOWED, [(header::ALLOW, "POST")]).into_response();
    }
    if !accepts(headers, "text/event-stream") {
        return status(
            StatusCode::NOT_ACCEPTABLE,
            "Not Acceptable: the client must accept text/event-stream",
        );
    }
    if let Err(r) = check_version_header(headers) {
        return r.into_response();
    }
    let session = match shared.session(headers) {
        Ok(s) => s,
        Err(r) => return r.into_response(),
    };
    session.touch();
    let last = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(|v| parse_event_id(v).ok_or(()));
    let last = match last {
        None => None,
        Some(Ok(l)) => Some(l),
        Some(Err(())) => {
            return status(
                StatusCode::BAD_REQUEST,
                "Bad Request: malformed Last-Event-ID",
            )
        }
    };
    match session.attach(last) {
        Ok((stream_id, next_seq, rx)) => {
            let priming = if last.is_none() {
                priming_event(
                    stream_id,
                    next_seq,
                    shared.config.sse_retry_ms,
                    session.session.protocol_version().as_deref(),
                )
            } else {
                None
            };
            sse_response(
                rx,
                priming,
                None,
                shared.shutdown.clone(),
                session.closed.clone(),
            )
        }
        Err(StatusCode::CONFLICT) => status(
            StatusCode::CONFLICT,
            "Conflict: a GET stream is already open for this session",
        ),
        Err(StatusCode::GONE) => status(
            StatusCode::GONE,
            "Gone: the events after Last-Event-ID are no longer kept",
        ),
        Err(code) => status(code, "Not Found: no such stream"),
    }
}

fn delete(shared: Arc<HttpShared>, headers: &HeaderMap) -> Response {
    if shared.config.stateless {
        return (StatusCode::METHOD_NOT_ALLOWED, [(header::ALLOW, "POST")]).into_response();
    }
    let session = match shared.session(headers) {
        Ok(s) => s,
        Err(r) => return r.into_response(),
    };
    if let Some(id) = headers.get(SESSION_ID_HEADER).and_then(|v| v.to_str().ok()) {
        shared.sessions.lock().expect("sessions lock").remove(id);
    }
    session.close();
    StatusCode::OK.into_response()
}

fn request_id(m: &Message) -> Option<RequestId> {
    match m {
        Message::Request { id, .. } => Some(id.clone()),
        _ => None,
    }
}

fn is_initialize(m: &Message) -> bool {
    matches!(m, Message::Request { method, .. } if method == crate::types::methods::INITIALIZE)
}

impl Drop for HttpSession {
    fn drop(&mut self) {
        self.closed.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_ids_round_trip() {
        assert_eq!(parse_event_id(&event_id(3, 17)), Some((3, 17)));
        assert_eq!(parse_event_id("garbage"), None);
    }

    #[test]
    fn hosts_are_taken_from_authorities() {
        assert_eq!(host_of_authority("localhost:3000"), "localhost");
        assert_eq!(host_of_authority("[::1]:3000"), "[::1]");
        assert_eq!(host_of_authority("127.0.0.1"), "127.0.0.1");
    }
}
