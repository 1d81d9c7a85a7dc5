//! The Streamable HTTP server transport (2025 revisions): one endpoint for POST, GET and DELETE,
//! sessions, per-request SSE streams with bounded replay, and the header and origin rules.
//!
//! Each session runs one protocol engine. A router task takes what the engine writes and puts
//! each message on a stream: a message that belongs to a request goes on that request's POST
//! stream, everything else on the session's standalone (GET) stream. Every stream keeps its
//! recent events for replay, so a client that lost a stream resumes it with GET and
//! `Last-Event-ID`; a dropped connection is never a cancellation.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use http::request::Parts;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use self::channel::{Live, Reader};
use self::stored::{StoreLink, LOCAL_MASK};
use super::listen::{self, ConnectionLimits, ConnectionStats};
use super::sse::encode_event;
use crate::host_policy::HostPolicy;
use crate::http_context::HttpContext;
use crate::jsonrpc::{
    decode_frame, encode_error, ErrorObject, Frame, IdMap, Message, RequestId, RpcErrorCode,
};
use crate::limit::Limiter;
use crate::server::{Server, ServerSession, SessionSnapshot};
use crate::session::BoxFuture;
use crate::session_store::{EventLogBounds, SessionStore};
use crate::transport::{
    queue, DecodedFrame, DeliverOutbound, Inbound, Outbound, Transport, TransportControl,
    CHANNEL_CAPACITY,
};
use crate::version::ProtocolVersion;

mod channel;
#[cfg(feature = "legacy-sse")]
mod legacy;
mod modern;
mod stored;

#[cfg(feature = "legacy-sse")]
pub use legacy::LegacySse;

use super::{PROTOCOL_VERSION, SESSION_ID};

/// `Last-Event-ID` as a header name (lookups by it skip parsing the name).
const LAST_EVENT_ID: http::HeaderName = http::HeaderName::from_static("last-event-id");

/// The SSE comment sent on an idle stream so proxies and clients see it is alive.
const KEEP_ALIVE_COMMENT: &[u8] = b": keep-alive\n\n";

/// How long the engine may take to answer `initialize` (it answers at once; this only bounds a
/// stuck engine).
const INITIALIZE_TIMEOUT: Duration = Duration::from_secs(10);

/// How a Streamable HTTP server behaves. The defaults are safe for a local server; every bound
/// is listed with its reason in the guide's configuration reference
/// (docs/src/reference/configuration.md).
#[derive(Debug, Clone)]
pub struct HttpServerConfig {
    /// The address [`StreamableHttpServer::bind`] listens on (default `127.0.0.1:0`: loopback,
    /// any free port). Bind a public address only behind authentication.
    pub bind: SocketAddr,
    /// The path of the MCP endpoint in [`router`](StreamableHttpServer::router) and the
    /// standalone server (default `/mcp`); the server as a tower service answers any path.
    pub endpoint: String,
    /// Which hosts (the request's authority) and browser origins are accepted; checked before
    /// anything else (403). Default: loopback names only.
    pub host_policy: HostPolicy,
    /// The largest request body accepted (default 4 MiB); larger is 413.
    pub max_body_bytes: usize,
    /// How long a client may take to send a request's body once its headers are in (default
    /// 30 s); slower is 408.
    pub body_read_timeout: Duration,
    /// The most established sessions (default 10 000): sessions whose `initialize` succeeded
    /// and that the client used again. An `initialize` beyond it is 503.
    pub max_sessions: usize,
    /// The most sessions one principal may hold, established and pending together (default
    /// 1000). Sessions are keyed by the [`Principal`](crate::Principal) a layer in front put
    /// in the request (unauthenticated sessions share one key). An `initialize` at the bound
    /// closes that principal's own least recently used idle session (one without an open
    /// stream), never another's; when all of its sessions are busy it is answered 429. So no
    /// principal can take `max_sessions` from the others.
    pub max_sessions_per_principal: usize,
    /// The most sessions that answered `initialize` and have not been used since (default
    /// 1024); a new one beyond it closes the oldest. Bare initializations never fill the
    /// table of established sessions.
    pub max_pending_sessions: usize,
    /// How long a session that answered `initialize` waits for its client's next request
    /// before it is closed (default 30 s).
    pub pending_session_timeout: Duration,
    /// How long a session may stay idle, with no open stream, before it is closed and its
    /// memory reclaimed (default 10 minutes).
    pub session_idle_timeout: Duration,
    /// The most streams one session may hold for replay (default 64).
    pub max_streams_per_session: usize,
    /// Events each stream keeps for replay (default 256).
    pub replay_events: usize,
    /// Bytes of events each session keeps for replay across its streams (default 1 MiB); the
    /// oldest events go first, the newest is always kept. A client asking for events that are
    /// gone gets 410. It also bounds what is queued for one connection that reads slowly: past
    /// it, that connection is ended and its client resumes from its last event id.
    pub replay_bytes: usize,
    /// How long a POST stream stays resumable after its last response was queued (default
    /// 60 s): a connection can die unnoticed with that response in flight, so the client may
    /// come back for it with `Last-Event-ID`. Its events count against `replay_bytes` and
    /// `max_streams_per_session` meanwhile; then they are dropped.
    pub resume_window: Duration,
    /// The `retry` hint in milliseconds sent with the priming event (default 1000).
    pub sse_retry_ms: u64,
    /// How often an idle SSE stream carries a keep-alive comment (default 15 s; `None`:
    /// never), so proxies do not cut it and dead connections are noticed.
    pub sse_keep_alive: Option<Duration>,
    /// How long a POST's SSE response holds its head back waiting for its first message
    /// (default 1 s). A request answered within it leaves in one write: the head, the answer
    /// and the end of the stream together, instead of the head first and the answer in a
    /// second write (and a second wake-up of the client). A slower request gets its head
    /// when the wait ends, and its messages as they come. `Duration::ZERO`: the head at once.
    /// A 2025-11-25 stream does not wait: its priming event (the id a client resumes from) is
    /// sent at once, as that revision asks, after one turn of the scheduler in which a quick
    /// handler may answer (the answer then leaves with it).
    pub sse_head_wait: Duration,
    /// Answer requests with a JSON body instead of an SSE stream.
    pub json_response: bool,
    /// No sessions: every POST is served on its own, without a handshake (for deployments
    /// behind a load balancer). GET and DELETE answer 405.
    pub stateless: bool,
    /// In stateless mode, how many POSTs are served at once (default 256); beyond it 503.
    pub max_stateless_requests: usize,
    /// The standalone server's connection limits ([`serve`](StreamableHttpServer::serve),
    /// [`bind`](StreamableHttpServer::bind)); an application that mounts the endpoint passes
    /// its own to [`http::serve`](super::serve).
    pub connections: ConnectionLimits,
    /// Also serve the HTTP+SSE transport of 2024-11-05 at these paths (default `None`): for
    /// clients that speak only it. Its sessions count against `max_sessions`, and every check
    /// of the Streamable HTTP endpoint applies to it.
    #[cfg(feature = "legacy-sse")]
    pub legacy_sse: Option<LegacySse>,
    /// Where sessions live beyond this process (default `None`: in its memory only, as
    /// sessions always did). With a store, a session is saved at `initialize` and when its log
    /// level or subscriptions change; a request for a session this process does not hold loads
    /// it from the store and resumes it here, for the principal that created it only (another
    /// gets 404, as for an unknown id); `DELETE` ends it in the store, so everywhere; idle
    /// expiry counts from the last use anywhere; and every SSE event a client could resume is
    /// also kept in the store's bounded log ([`event_log`](Self::event_log)), so a client
    /// resumes a stream with `Last-Event-ID` at any process (a stream's first event that is
    /// also its last, with no priming event before it, is not: the client has no id to resume
    /// it with). See [`crate::session_store`].
    pub session_store: Option<Arc<dyn SessionStore>>,
    /// The bounds of each session's event log in the [`session_store`](Self::session_store)
    /// (default 256 events, 1 MiB, 5 minutes).
    pub event_log: EventLogBounds,
    /// How often a session's last-seen time in the store is written while it is used (default
    /// 5 s): idle expiry is fleet-wide to within this. Between those writes a request on a
    /// session this process holds reads it only when the store's
    /// [`sessions_version`](SessionStore::sessions_version) moved since it last did (a session
    /// was ended, expired or changed somewhere), so a `DELETE` elsewhere takes effect at the
    /// next request (with PostgreSQL, once its notification arrived); a store that cannot tell
    /// is read on every request.
    pub session_touch_interval: Duration,
    /// How long this process holds a running request's stream in the
    /// [`session_store`](Self::session_store) (default 5 s; renewed every third of it while the
    /// request runs). A request's stream is recorded there with its first event that is not its
    /// response (a progress notification, a server-to-client request); a fast call writes no
    /// record. A client that resumes such a stream with `Last-Event-ID` at another process gets
    /// what the store's log has, then follows the log while the holder lives (polled, up to
    /// 30 s a connection; the client then resumes again).
    pub stream_lease: Duration,
    /// Take over a recorded request whose holder's lease ran out (default `false`): the
    /// process a client resumes its stream at claims the lease (exactly one process wins) and
    /// runs the stored request again through the session's handler, with the same request id,
    /// its events continuing the same stream. This runs a request twice when its first run got
    /// far before its process died: turn it on only for handlers that tolerate that (reads,
    /// writes claimed once in a durable store, as the gateway's are).
    pub take_over_streams: bool,
    /// Shuts the endpoint down when cancelled: every SSE stream ends, every session closes,
    /// and later requests are answered 503. [`serve`](StreamableHttpServer::serve) cancels it
    /// when its shutdown future resolves; an application that mounts the endpoint cancels it
    /// when its own graceful shutdown begins, so open streams do not hold that shutdown up.
    pub shutdown: CancellationToken,
}

impl Default for HttpServerConfig {
    fn default() -> Self {
        HttpServerConfig {
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            endpoint: "/mcp".into(),
            host_policy: HostPolicy::loopback(),
            max_body_bytes: crate::transport::DEFAULT_MAX_FRAME_BYTES,
            body_read_timeout: Duration::from_secs(30),
            max_sessions: 10_000,
            max_sessions_per_principal: 1000,
            max_pending_sessions: 1024,
            pending_session_timeout: Duration::from_secs(30),
            session_idle_timeout: Duration::from_secs(600),
            max_streams_per_session: 64,
            replay_events: 256,
            replay_bytes: 1024 * 1024,
            resume_window: Duration::from_secs(60),
            sse_retry_ms: 1000,
            sse_keep_alive: Some(Duration::from_secs(15)),
            sse_head_wait: Duration::from_secs(1),
            json_response: false,
            stateless: false,
            max_stateless_requests: 256,
            connections: ConnectionLimits::default(),
            #[cfg(feature = "legacy-sse")]
            legacy_sse: None,
            session_store: None,
            event_log: EventLogBounds::default(),
            session_touch_interval: Duration::from_secs(5),
            stream_lease: Duration::from_secs(5),
            take_over_streams: false,
            shutdown: CancellationToken::new(),
        }
    }
}

/// A Streamable HTTP front for a [`Server`]: a `tower::Service` of HTTP requests to mount in
/// any application (axum's `route_service`, or any server that takes a tower service), an
/// axum [`router`](Self::router), or a standalone server ([`serve`](Self::serve)).
#[derive(Clone)]
pub struct StreamableHttpServer {
    shared: Arc<HttpShared>,
    /// Served standalone ([`serve`](Self::serve)): the server matches its own paths, exactly,
    /// and answers `404` with an empty body at any other, as its [`router`](Self::router)
    /// does, without a router's work per request (a boxed route cloned, the matched path looked
    /// up and put in the request's extensions). Mounted, the application routes.
    standalone: bool,
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
    sessions: Mutex<Sessions>,
    shutdown: CancellationToken,
    /// Serves 2026-07-28 requests (each POST on its own).
    exchanges: crate::server::modern::Exchanges,
    /// Bounds the 2026-07-28 requests in flight (`max_sessions`: each is a one-request session).
    exchange_permits: Arc<tokio::sync::Semaphore>,
    /// Stateless POSTs in flight.
    stateless: Arc<Semaphore>,
    /// The standalone server's connections.
    limiter: Arc<Limiter>,
    connection_stats: ConnectionStats,
    /// The last `Host` the policy allowed, so keep-alive requests skip re-parsing it.
    allowed_host: crate::host_policy::AllowedHost,
    /// The POSTs' head waits (`sse_head_wait`): one timer for all, not one per request.
    head_wait: crate::http::wait::WaitTimer,
    /// This process's token as the holder of running requests' streams in the session store.
    holder: String,
    /// HTTP+SSE (2024-11-05) sessions by id.
    #[cfg(feature = "legacy-sse")]
    legacy: Mutex<HashMap<String, Arc<legacy::LegacySession>>>,
}

/// Live sessions by id.
#[derive(Default)]
struct Sessions {
    /// Initialized and used again: these count against `max_sessions`.
    established: HashMap<String, Arc<HttpSession>>,
    /// Answered `initialize`, not used since: bounded apart, and short-lived.
    pending: HashMap<String, Arc<HttpSession>>,
    /// Pending ids, oldest first (ids that left `pending` since are skipped and compacted).
    pending_order: VecDeque<String>,
}

/// See [`HttpShared::owner_room`].
enum OwnerRoom {
    /// Below its bound.
    Fits,
    /// At its bound, with an idle session the new one replaces: the total does not grow.
    Replaces,
    /// At its bound, every session with an open stream.
    Busy,
}

impl Sessions {
    /// The sessions, established and pending, that `owner` created.
    fn owned_by<'a>(
        &'a self,
        owner: &'a Option<String>,
    ) -> impl Iterator<Item = &'a Arc<HttpSession>> + 'a {
        self.established
            .values()
            .chain(self.pending.values())
            .filter(move |s| s.owner == *owner)
    }
}

impl StreamableHttpServer {
    /// Wraps `server` with `config`, and starts the sweeper that expires sessions and streams.
    pub fn new(server: Server, config: HttpServerConfig) -> Self {
        let (connection_stats, limiter) = listen::stats_for(&config.connections);
        let shared = Arc::new(HttpShared {
            exchanges: server.exchanges(),
            exchange_permits: Arc::new(tokio::sync::Semaphore::new(config.max_sessions)),
            server,
            stateless: Arc::new(Semaphore::new(config.max_stateless_requests.max(1))),
            shutdown: config.shutdown.clone(),
            config,
            sessions: Mutex::new(Sessions::default()),
            limiter,
            connection_stats,
            allowed_host: Default::default(),
            head_wait: crate::http::wait::WaitTimer::new(),
            holder: stored::new_holder(),
            #[cfg(feature = "legacy-sse")]
            legacy: Mutex::new(HashMap::new()),
        });
        let weak = Arc::downgrade(&shared);
        let c = &shared.config;
        let every = (c
            .session_idle_timeout
            .min(c.pending_session_timeout)
            .min(c.resume_window)
            / 4)
        .clamp(Duration::from_millis(10), Duration::from_secs(30));
        let shutdown = shared.shutdown.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = shutdown.cancelled() => {
                        if let Some(shared) = weak.upgrade() {
                            shared.close_all();
                        }
                        return;
                    }
                }
                let Some(shared) = weak.upgrade() else { return };
                shared.sweep();
            }
        });
        StreamableHttpServer {
            shared,
            standalone: false,
        }
    }

    /// The number of established sessions: initialized, and used again by their client (what
    /// [`HttpServerConfig::max_sessions`] bounds).
    pub fn session_count(&self) -> usize {
        self.shared
            .sessions
            .lock()
            .expect("sessions lock")
            .established
            .len()
    }

    /// The number of sessions that answered `initialize` and have not been used since (what
    /// [`HttpServerConfig::max_pending_sessions`] bounds).
    pub fn pending_session_count(&self) -> usize {
        self.shared
            .sessions
            .lock()
            .expect("sessions lock")
            .pending
            .len()
    }

    /// The number of open HTTP+SSE (2024-11-05) sessions: each lives as long as its stream.
    #[cfg(feature = "legacy-sse")]
    pub fn legacy_session_count(&self) -> usize {
        legacy::count(&self.shared)
    }

    /// The standalone server's open connections.
    pub fn connection_stats(&self) -> &ConnectionStats {
        &self.shared.connection_stats
    }

    /// Closes expired sessions and streams now (the sweeper also does this periodically).
    pub fn sweep_idle_sessions(&self) {
        self.shared.sweep();
    }

    /// Releases this process's leases on the running requests' streams recorded in the
    /// [`session_store`](HttpServerConfig::session_store) and ends their connections: their
    /// clients resume with `Last-Event-ID` at another process, which takes them over at once
    /// (with [`take_over_streams`](HttpServerConfig::take_over_streams)). What this process
    /// would still put on those streams (an answer given while stopping) is dropped. For a
    /// deploy's drain, before the handlers answer what they wait for; returns how many were
    /// released.
    pub async fn release_streams(&self) -> usize {
        let sessions: Vec<Arc<HttpSession>> = {
            let s = self.shared.sessions.lock().expect("sessions lock");
            s.established.values().cloned().collect()
        };
        let mut released = 0;
        for s in sessions {
            released += s.release_streams().await;
        }
        released
    }

    /// Shuts the endpoint down (cancels [`HttpServerConfig::shutdown`]).
    pub fn shutdown(&self) {
        self.shared.shutdown.cancel();
    }

    /// An axum router serving the endpoint at [`HttpServerConfig::endpoint`]; merge or nest it
    /// into an existing application (or mount the server itself as a service).
    pub fn router(&self) -> axum::Router {
        let router = axum::Router::new().route_service(&self.shared.config.endpoint, self.clone());
        #[cfg(feature = "legacy-sse")]
        if let Some(l) = &self.shared.config.legacy_sse {
            return router
                .route_service(&l.sse_path, self.clone())
                .route_service(&l.messages_path, self.clone());
        }
        router
    }

    /// Whether `path` is one this server answers at: its endpoint, or a legacy HTTP+SSE path.
    fn serves(&self, path: &str) -> bool {
        #[cfg(feature = "legacy-sse")]
        if legacy::route(&self.shared, path).is_some() {
            return true;
        }
        path == self.shared.config.endpoint
    }

    /// Serves on `listener` until `shutdown` resolves, with the configured
    /// [`connections`](HttpServerConfig::connections) limits and `TCP_NODELAY`; then ends every
    /// stream and session and returns when connections have closed.
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let token = self.shared.shutdown.clone();
        let limits = self.shared.config.connections.clone();
        let limiter = self.shared.limiter.clone();
        let trigger = token.clone();
        let watch = async move {
            tokio::select! {
                _ = shutdown => trigger.cancel(),
                _ = trigger.cancelled() => {}
            }
        };
        let (served, ()) = tokio::join!(
            listen::serve_limited(
                listener,
                {
                    let standalone = StreamableHttpServer {
                        standalone: true,
                        ..self
                    };
                    move |_| standalone.clone()
                },
                limits,
                limiter,
                token
            ),
            watch
        );
        served
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

impl<B> tower_service::Service<http::Request<B>> for StreamableHttpServer
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if self.standalone && !self.serves(req.uri().path()) {
            return Box::pin(std::future::ready(
                Ok(StatusCode::NOT_FOUND.into_response()),
            ));
        }
        let shared = self.shared.clone();
        Box::pin(async move { Ok(handle(shared, req.map(Body::new)).await) })
    }
}

/// Shrinks a table that a burst grew far beyond what it holds now.
fn shrink<V>(map: &mut HashMap<String, V>) {
    if map.capacity() > 4 * map.len() + 64 {
        map.shrink_to(2 * map.len());
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
    fn sweep(&self) {
        let now = Instant::now();
        let cfg = &self.config;
        let (expired, live): (Vec<Arc<HttpSession>>, Vec<Arc<HttpSession>>) = {
            let mut sessions = self.sessions.lock().expect("sessions lock");
            let mut expired = Vec::new();
            sessions.established.retain(|_, s| {
                let keep = s.idle_since(now) < cfg.session_idle_timeout;
                if !keep {
                    expired.push(s.clone());
                }
                keep
            });
            sessions.pending.retain(|_, s| {
                let keep = s.idle_since(now) < cfg.pending_session_timeout;
                if !keep {
                    expired.push(s.clone());
                }
                keep
            });
            // Give back what a flood left: stale ids, and room the tables no longer need.
            let s = &mut *sessions;
            let pending = &s.pending;
            s.pending_order.retain(|id| pending.contains_key(id));
            shrink(&mut s.established);
            shrink(&mut s.pending);
            if s.pending_order.capacity() > 4 * s.pending_order.len() + 64 {
                s.pending_order.shrink_to(2 * s.pending_order.len());
            }
            let live = s.established.values().cloned().collect();
            (expired, live)
        };
        for s in expired {
            s.close();
        }
        for s in &live {
            s.expire_streams(now, cfg.resume_window);
        }
        if let Some(store) = &cfg.session_store {
            // A session with an open stream is in use: its last-seen time is kept fresh. Idle
            // expiry is fleet-wide: each process ends what nobody used within the timeout.
            let busy: Vec<Arc<StoreLink>> = live
                .iter()
                .filter(|s| s.is_busy())
                .filter_map(|s| s.link.clone())
                .collect();
            let store = store.clone();
            let before = std::time::SystemTime::now().checked_sub(cfg.session_idle_timeout);
            tokio::spawn(async move {
                for link in busy {
                    let _ = link.alive(false).await;
                }
                if let Some(before) = before {
                    if let Err(e) = store.expire_sessions(before).await {
                        tracing::warn!(error = %e, "session store: expiry failed");
                    }
                }
            });
        }
    }

    fn close_all(&self) {
        let all: Vec<Arc<HttpSession>> = {
            let mut sessions = self.sessions.lock().expect("sessions lock");
            let s = &mut *sessions;
            s.pending_order.clear();
            s.established
                .drain()
                .chain(s.pending.drain())
                .map(|(_, s)| s)
                .collect()
        };
        for s in all {
            s.close();
        }
    }

    /// What a new session of `owner` would do to its count: fit, replace one of its own idle
    /// sessions (it is at `max_sessions_per_principal`), or find every one of them busy.
    fn owner_room(&self, owner: &Option<String>) -> OwnerRoom {
        let sessions = self.sessions.lock().expect("sessions lock");
        let (mut held, mut idle) = (0, false);
        for s in sessions.owned_by(owner) {
            held += 1;
            idle |= !s.is_busy();
        }
        if held < self.config.max_sessions_per_principal.max(1) {
            OwnerRoom::Fits
        } else if idle {
            OwnerRoom::Replaces
        } else {
            OwnerRoom::Busy
        }
    }

    /// Keeps a session that answered `initialize` until its client uses it; the oldest such
    /// session makes room when there are too many. Its principal's least recently used idle
    /// session is closed when that principal is at `max_sessions_per_principal`; with none
    /// idle, the new session is refused (429) and the principal's others are kept. Returns the
    /// sessions closed to make room: the caller ends those in the store too (else another
    /// request would resume them there, past the bound).
    fn add_pending(
        &self,
        id: String,
        session: Arc<HttpSession>,
    ) -> Result<Vec<Arc<HttpSession>>, Reject> {
        let (victim, own_victims) = {
            let mut guard = self.sessions.lock().expect("sessions lock");
            let sessions = &mut *guard;
            let cap = self.config.max_sessions_per_principal.max(1);
            let mut own_victims: Vec<Arc<HttpSession>> = Vec::new();
            loop {
                let mine: Vec<&Arc<HttpSession>> = sessions.owned_by(&session.owner).collect();
                if mine.len() < cap {
                    break;
                }
                let oldest_idle = mine
                    .into_iter()
                    .filter(|s| !s.is_busy())
                    .min_by_key(|s| *s.last_active.lock().expect("activity lock"))
                    .cloned();
                let Some(oldest) = oldest_idle else {
                    drop(guard);
                    for v in own_victims {
                        v.close();
                    }
                    return Err(too_many_own_sessions());
                };
                sessions.established.retain(|_, s| !Arc::ptr_eq(s, &oldest));
                sessions.pending.retain(|_, s| !Arc::ptr_eq(s, &oldest));
                own_victims.push(oldest);
            }
            let mut victim = None;
            if sessions.pending.len() >= self.config.max_pending_sessions.max(1) {
                while let Some(oldest) = sessions.pending_order.pop_front() {
                    if let Some(s) = sessions.pending.remove(&oldest) {
                        victim = Some(s);
                        break;
                    }
                }
            }
            if sessions.pending_order.len() > 2 * sessions.pending.len() + 64 {
                let pending = &sessions.pending;
                sessions.pending_order.retain(|id| pending.contains_key(id));
            }
            sessions.pending_order.push_back(id.clone());
            sessions.pending.insert(id, session);
            (victim, own_victims)
        };
        let closed: Vec<Arc<HttpSession>> = victim.into_iter().chain(own_victims).collect();
        for v in &closed {
            v.close();
        }
        Ok(closed)
    }
}

/// One event kept for replay.
struct Event {
    seq: u64,
    /// Arrival order across the session's streams: the oldest event goes first.
    arrival: u64,
    data: Bytes,
}

/// One stream of SSE events: a POST's response stream, or the standalone stream (id 0).
struct Stream {
    /// Recent events for replay.
    events: VecDeque<Event>,
    next_seq: u64,
    /// The highest sequence number handed to a live connection.
    delivered: u64,
    /// The connection currently reading this stream, if any.
    live: Option<Live>,
    /// Requests of this stream still waiting for their response.
    pending: Pending,
    /// Collects responses instead of streaming (JSON response mode).
    json: bool,
    /// When its last response was queued: the stream stays resumable for the resume window.
    finished_at: Option<Instant>,
    /// Its id in event ids and the store (this process's tag and the local id; a stream taken
    /// over from another process keeps that process's id).
    wire: u64,
    /// The lone request it answers, as posted, until the stream is recorded in the store.
    request: Option<Bytes>,
    /// Recorded in the session store as running here (see `HttpServerConfig::stream_lease`).
    recorded: bool,
    /// Its lease was released (a drain): another process answers its request, so what this
    /// process would still put on it is dropped.
    released: bool,
}

impl Stream {
    fn new(json: bool, wire: u64) -> Self {
        Stream {
            wire,
            request: None,
            recorded: false,
            released: false,
            events: VecDeque::new(),
            next_seq: 1,
            delivered: 0,
            live: None,
            pending: Pending::None,
            json,
            finished_at: None,
        }
    }

    fn is_live(&self) -> bool {
        self.live.as_ref().is_some_and(Live::is_open)
    }
}

/// The requests of a stream still waiting for their response. Most POSTs carry one, kept as
/// is; a batch's go in a set, so each response's removal stays O(1) however large the batch.
enum Pending {
    None,
    One(RequestId),
    Many(HashSet<RequestId>),
}

impl Pending {
    fn of(requests: &[RequestId]) -> Pending {
        match requests {
            [] => Pending::None,
            [r] => Pending::One(r.clone()),
            rs => Pending::Many(rs.iter().cloned().collect()),
        }
    }

    fn remove(&mut self, request: &RequestId) {
        match self {
            Pending::One(r) if r == request => *self = Pending::None,
            Pending::Many(set) => {
                set.remove(request);
            }
            _ => {}
        }
    }

    fn is_empty(&self) -> bool {
        match self {
            Pending::None => true,
            Pending::One(_) => false,
            Pending::Many(set) => set.is_empty(),
        }
    }

    fn iter(&self) -> impl Iterator<Item = &RequestId> {
        let (one, many) = match self {
            Pending::None => (None, None),
            Pending::One(r) => (Some(r), None),
            Pending::Many(set) => (None, Some(set.iter())),
        };
        one.into_iter().chain(many.into_iter().flatten())
    }
}

struct Streams {
    next_id: u64,
    /// By id, which is also the order of opening: the oldest come first when room is made.
    /// Boxed: a B-tree node holds eleven values inline, and an idle session has two streams.
    map: BTreeMap<u64, Box<Stream>>,
    /// Which stream each in-flight request's messages go to.
    by_request: IdMap<u64>,
    /// Bytes of events kept for replay, across streams.
    bytes: usize,
    next_arrival: u64,
}

impl Streams {
    /// Forgets a stream and its replay events.
    fn remove(&mut self, id: u64) {
        if let Some(stream) = self.map.remove(&id) {
            self.bytes -= stream.events.iter().map(|e| e.data.len()).sum::<usize>();
            for r in stream.pending.iter() {
                self.by_request.remove(r);
            }
        }
    }

    /// The local id of the stream `wire` names: one this process opened (its tag), or one it
    /// took over.
    fn local_of(&self, tag: u64, wire: u64) -> Option<u64> {
        let id = wire & LOCAL_MASK;
        if wire & !LOCAL_MASK == tag && self.map.contains_key(&id) {
            return Some(id);
        }
        self.map
            .iter()
            .find(|(_, s)| s.wire == wire)
            .map(|(id, _)| *id)
    }

    /// Keeps `data` as event `seq` of stream `id`, within the per-stream count and the
    /// session's byte budget (the session's oldest events go first).
    fn keep(&mut self, id: u64, seq: u64, data: Bytes, max_events: usize, max_bytes: usize) {
        let arrival = self.next_arrival;
        self.next_arrival += 1;
        let Some(stream) = self.map.get_mut(&id) else {
            return;
        };
        self.bytes += data.len();
        stream.events.push_back(Event { seq, arrival, data });
        while stream.events.len() > max_events {
            if let Some(e) = stream.events.pop_front() {
                self.bytes -= e.data.len();
            }
        }
        while self.bytes > max_bytes {
            let oldest = self
                .map
                .iter()
                .filter_map(|(id, s)| s.events.front().map(|e| (e.arrival, *id)))
                .min();
            // The newest event stays, whatever its size: the last response is resumable.
            let Some((_, id)) = oldest.filter(|(a, _)| *a != arrival) else {
                break;
            };
            if let Some(e) = self.map.get_mut(&id).and_then(|s| s.events.pop_front()) {
                self.bytes -= e.data.len();
            }
        }
    }
}

/// One session: its engine's input, its streams, and its activity clock.
struct HttpSession {
    inbound: queue::Sender<Inbound>,
    streams: Mutex<Streams>,
    last_active: Mutex<Instant>,
    session: ServerSession,
    replay: usize,
    replay_bytes: usize,
    max_streams: usize,
    closed: CancellationToken,
    /// The [`Principal::binding_key`](crate::Principal::binding_key) of the principal that
    /// created the session, when a layer in front put one in the request: only that principal
    /// may use the session.
    owner: Option<String>,
    /// The high bits of this session's stream ids in this process (zero without a store).
    tag: u64,
    /// Its place in the [`HttpServerConfig::session_store`], if any.
    link: Option<Arc<StoreLink>>,
    /// Itself, for the tasks that renew its streams' leases.
    me: std::sync::Weak<HttpSession>,
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

/// The session's control and output, held weakly by its engine.
#[derive(Debug)]
struct HttpSessionControl(std::sync::Weak<HttpSession>);

impl DeliverOutbound for HttpSessionControl {
    fn deliver(&self, out: Outbound) -> bool {
        match self.0.upgrade() {
            Some(s) => {
                s.deliver(out);
                true
            }
            None => false,
        }
    }

    /// The engine stopped: every stream ends.
    fn close(&self) {
        if let Some(s) = self.0.upgrade() {
            s.close();
        }
    }
}

const STANDALONE: u64 = 0;

fn event_id(stream: u64, seq: u64) -> String {
    format!("s{stream}e{seq}")
}

pub(crate) fn parse_event_id(id: &str) -> Option<(u64, u64)> {
    let rest = id.strip_prefix('s')?;
    let (stream, seq) = rest.split_once('e')?;
    Some((stream.parse().ok()?, seq.parse().ok()?))
}

/// Why a POST's stream could not be opened.
enum OpenError {
    /// The session holds too many streams.
    TooManyStreams,
    /// A request id of this POST is already in flight in the session (or twice in the POST).
    DuplicateId(RequestId),
}

impl HttpSession {
    /// Starts a session's engine and router.
    fn start(
        server: &Server,
        config: &HttpServerConfig,
        stateless_version: Option<ProtocolVersion>,
        id: Option<&str>,
        owner: Option<String>,
        resume: Option<SessionSnapshot>,
        holder: &str,
    ) -> Arc<HttpSession> {
        let (in_tx, in_rx) = queue::bounded(CHANNEL_CAPACITY);
        let link = match (&config.session_store, id, &stateless_version) {
            (Some(store), Some(id), None) => Some(StoreLink::new(
                store.clone(),
                id.to_owned(),
                owner.clone(),
                config.event_log,
                config.session_touch_interval,
                holder.to_owned(),
                config.stream_lease,
            )),
            _ => None,
        };
        Arc::new_cyclic(|weak: &std::sync::Weak<HttpSession>| {
            // The engine puts each message on its stream itself: delivery never waits, so a
            // queue and a task to drain it would only cost every session their memory.
            let control = Arc::new(HttpSessionControl(weak.clone()));
            let transport = Transport::direct(in_rx, control.clone())
                .with_control(control)
                .labeled("http", id.map(str::to_owned));
            let (session, _join) = match (stateless_version, resume) {
                (Some(v), _) => server.start_stateless(transport, v),
                (None, Some(snapshot)) => server.start_resumed(transport, snapshot),
                (None, None) => server.start(transport),
            };
            if link.is_some() {
                let weak = weak.clone();
                session.on_change(move || {
                    if let Some(s) = weak.upgrade() {
                        s.save_later();
                    }
                });
            }
            let tag = if link.is_some() { stored::new_tag() } else { 0 };
            let mut map = BTreeMap::new();
            map.insert(STANDALONE, Box::new(Stream::new(false, tag | STANDALONE)));
            HttpSession {
                inbound: in_tx,
                streams: Mutex::new(Streams {
                    next_id: 1,
                    map,
                    by_request: IdMap::default(),
                    bytes: 0,
                    next_arrival: 0,
                }),
                last_active: Mutex::new(Instant::now()),
                session,
                replay: config.replay_events,
                replay_bytes: config.replay_bytes,
                max_streams: config.max_streams_per_session,
                closed: CancellationToken::new(),
                owner,
                tag,
                link,
                me: weak.clone(),
            }
        })
    }

    /// Queues a save of the session's state in its store (it changed).
    fn save_later(&self) {
        if let (Some(link), Some(snapshot)) = (&self.link, self.session.snapshot()) {
            link.save_later(&snapshot);
        }
    }

    /// Whether `wire` names a stream this process keeps (opened here or taken over).
    fn holds_stream(&self, wire: u64) -> bool {
        self.streams
            .lock()
            .expect("streams lock")
            .local_of(self.tag, wire)
            .is_some()
    }

    /// Whether stream `wire` is kept here and still waits for its response.
    fn runs(&self, wire: u64) -> bool {
        let streams = self.streams.lock().expect("streams lock");
        streams
            .local_of(self.tag, wire)
            .and_then(|id| streams.map.get(&id))
            .is_some_and(|s| !s.pending.is_empty() && !s.released)
    }

    /// Renews this process's lease on the recorded stream `wire` every third of the lease
    /// while its request runs here; stops when it is answered, the session closes, or another
    /// process holds the lease.
    fn keep_leased(&self, link: &Arc<StoreLink>, wire: u64) {
        let (me, link) = (self.me.clone(), link.clone());
        tokio::spawn(async move {
            let every = (link.lease / 3).max(Duration::from_millis(10));
            loop {
                tokio::time::sleep(every).await;
                match me.upgrade() {
                    Some(s) if !s.closed.is_cancelled() && s.runs(wire) => {}
                    _ => return,
                }
                match link.lease_stream(wire).await {
                    Ok(true) => {}
                    Ok(false) => {
                        tracing::warn!(session = %link.id, stream = wire, "a running request's stream is no longer leased here");
                        return;
                    }
                    Err(e) => {
                        tracing::warn!(session = %link.id, error = %e, "a stream's lease was not renewed")
                    }
                }
            }
        });
    }

    /// Ends this process's leases on the recorded streams still running here, so other
    /// processes take them over at once (a deploy's drain), and ends their connections (their
    /// clients resume with `Last-Event-ID` elsewhere). Streams whose lease was released.
    async fn release_streams(&self) -> usize {
        let Some(link) = &self.link else {
            return 0;
        };
        let recorded: Vec<u64> = {
            let mut streams = self.streams.lock().expect("streams lock");
            streams
                .map
                .values_mut()
                .filter(|s| s.recorded && !s.pending.is_empty() && !s.released)
                .map(|s| {
                    s.live = None;
                    s.released = true;
                    s.recorded = false;
                    s.wire
                })
                .collect()
        };
        let mut released = 0;
        for wire in recorded {
            match link.release_stream(wire).await {
                Ok(true) => released += 1,
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(session = %link.id, error = %e, "a stream's lease was not released")
                }
            }
        }
        released
    }

    /// Takes over stream `wire` of another process (this process claimed its lease): it
    /// continues here at event `next_seq` on the connection `live`, answering `request`.
    fn adopt(
        &self,
        wire: u64,
        next_seq: u64,
        request: RequestId,
        frame: Bytes,
        live: Live,
    ) -> Result<(), OpenError> {
        let mut streams = self.streams.lock().expect("streams lock");
        if streams.by_request.contains_key(&request) || streams.local_of(self.tag, wire).is_some() {
            return Err(OpenError::DuplicateId(request));
        }
        let id = streams.next_id;
        streams.next_id += 1;
        let mut stream = Box::new(Stream::new(false, wire));
        stream.next_seq = next_seq;
        stream.delivered = next_seq.saturating_sub(1);
        stream.live = Some(live);
        stream.pending = Pending::One(request.clone());
        stream.request = Some(frame);
        stream.recorded = true;
        streams.map.insert(id, stream);
        streams.by_request.insert(request, id);
        drop(streams);
        if let Some(link) = &self.link {
            self.keep_leased(link, wire);
        }
        Ok(())
    }

    fn touch(&self) {
        *self.last_active.lock().expect("activity lock") = Instant::now();
    }

    /// Whether a stream of the session is open (a GET stream, a POST waiting or streaming).
    fn is_busy(&self) -> bool {
        let streams = self.streams.lock().expect("streams lock");
        streams.map.values().any(|s| s.is_live())
    }

    /// How long the session has been idle; a session with a live stream is never idle.
    fn idle_since(&self, now: Instant) -> Duration {
        let streams = self.streams.lock().expect("streams lock");
        if streams.map.values().any(|s| s.is_live()) {
            return Duration::ZERO;
        }
        now.saturating_duration_since(*self.last_active.lock().expect("activity lock"))
    }

    /// Forgets finished streams nobody resumed within `window`.
    fn expire_streams(&self, now: Instant, window: Duration) {
        let mut streams = self.streams.lock().expect("streams lock");
        let expired: Vec<u64> = streams
            .map
            .iter()
            .filter(|(_, s)| {
                s.finished_at
                    .is_some_and(|t| now.saturating_duration_since(t) >= window)
                    && !s.is_live()
            })
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            streams.remove(id);
        }
    }

    /// Ends the session: the engine sees end of input, every stream ends.
    fn close(&self) {
        self.closed.cancel();
        let mut streams = self.streams.lock().expect("streams lock");
        streams.map.clear();
        streams.by_request.clear();
        streams.bytes = 0;
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
        let Some(stream) = streams.map.get_mut(&target) else {
            return;
        };
        if stream.released {
            // Another process answers this stream's request now.
            if out.completes {
                if let Some(r) = &out.related {
                    streams.by_request.remove(r);
                }
                self.finish_request(streams, target, out.related.as_ref());
            }
            return;
        }
        let seq = stream.next_seq;
        stream.next_seq += 1;
        let json = stream.json;
        let wire = stream.wire;
        let data = if json {
            Bytes::from(out.frame)
        } else {
            let data = encode_event(&event_id(wire, seq), None, &out.frame);
            if let Some(link) = &self.link {
                // A request still running after an event that is not its answer is recorded
                // (with that event), so another process can follow or take over its stream.
                if !out.completes && !stream.recorded {
                    if let Some(request) = stream.request.take() {
                        stream.recorded = true;
                        link.stream_started(wire, &request);
                        self.keep_leased(link, wire);
                    }
                }
                if !(out.completes && seq == 1 && self.answer_only(stream, out.related.as_ref())) {
                    link.event(wire, seq, &data);
                }
            }
            data
        };
        if let Some(live) = &stream.live {
            match live.send(data.clone(), self.replay_bytes) {
                true => stream.delivered = seq,
                // Too slow or gone: drop the connection; the client resumes from its last id.
                false => stream.live = None,
            }
        }
        if !json {
            streams.keep(target, seq, data, self.replay, self.replay_bytes);
        }
        if out.completes {
            if let Some(r) = &out.related {
                streams.by_request.remove(r);
            }
            self.finish_request(streams, target, out.related.as_ref());
        }
    }

    /// Whether the stream's first event, the answer to `request`, is also its last and the
    /// client holds no id of it before (no priming event: the session's revision is known and is
    /// not 2025-11-25). Such an event is not kept in the session store: a client that lost it
    /// has no `Last-Event-ID` of the stream to resume it with anywhere, so the store write
    /// would only cost (one per call answered at once). This process still keeps it for replay.
    fn answer_only(&self, stream: &Stream, request: Option<&RequestId>) -> bool {
        let last = match (&stream.pending, request) {
            (Pending::One(r), Some(q)) => r == q,
            _ => false,
        };
        last && self
            .session
            .protocol_version()
            .is_some_and(|v| !primes(Some(v.as_str())))
    }

    /// Takes `request` off stream `target`; a POST stream whose requests are all done ends
    /// its connection once that has written what is queued. Its events stay resumable for the
    /// resume window: whether they reached the client, only the client knows.
    fn finish_request(&self, streams: &mut Streams, target: u64, request: Option<&RequestId>) {
        let Some(stream) = streams.map.get_mut(&target) else {
            return;
        };
        if let Some(r) = request {
            stream.pending.remove(r);
        }
        if target != STANDALONE && stream.pending.is_empty() {
            stream.live = None;
            stream.request = None;
            if stream.recorded {
                stream.recorded = false;
                if let Some(link) = &self.link {
                    link.stream_finished(stream.wire);
                }
            }
            if stream.json {
                // A JSON response is not resumable.
                streams.remove(target);
            } else {
                stream.finished_at = Some(Instant::now());
            }
        }
    }

    /// The client cancelled `request`: no response will come, so its stream must not wait
    /// for one.
    fn cancelled(&self, request: &RequestId) {
        let mut guard = self.streams.lock().expect("streams lock");
        let streams = &mut *guard;
        if let Some(target) = streams.by_request.remove(request) {
            self.finish_request(streams, target, Some(request));
        }
    }

    /// Opens a stream for the requests of one POST.
    fn open_stream(
        &self,
        requests: &[RequestId],
        json: bool,
        request: Option<Bytes>,
    ) -> Result<(u64, Reader), OpenError> {
        let mut streams = self.streams.lock().expect("streams lock");
        // Twice in the POST: a lone request needs no set (and allocates none).
        let mut seen = HashSet::new();
        for r in requests {
            let twice = requests.len() > 1 && !seen.insert(r);
            if streams.by_request.contains_key(r) || twice {
                return Err(OpenError::DuplicateId(r.clone()));
            }
        }
        if streams.map.len() > self.max_streams {
            // Forget the oldest finished streams first (the map is in opening order, so this
            // stops at the first `excess` finished ones instead of sorting them all).
            let excess = streams.map.len() - self.max_streams;
            let finished: Vec<u64> = streams
                .map
                .iter()
                .filter(|(id, s)| **id != STANDALONE && s.pending.is_empty())
                .map(|(id, _)| *id)
                .take(excess)
                .collect();
            for id in finished {
                streams.remove(id);
            }
            if streams.map.len() > self.max_streams {
                return Err(OpenError::TooManyStreams);
            }
        }
        let id = streams.next_id;
        streams.next_id += 1;
        let (live, reader) = channel::channel(self.replay.max(16));
        let mut stream = Box::new(Stream::new(json, self.tag | id));
        stream.live = Some(live);
        stream.pending = Pending::of(requests);
        if self.link.is_some() && !json && requests.len() == 1 {
            stream.request = request.filter(|r| r.len() <= stored::MAX_STATE_BYTES);
        }
        streams.map.insert(id, stream);
        for r in requests {
            streams.by_request.insert(r.clone(), id);
        }
        Ok((self.tag | id, reader))
    }

    /// Attaches a GET connection: resumes `last` if given, else the standalone stream.
    fn attach(&self, last: Option<(u64, u64)>) -> Result<(u64, u64, Reader), StatusCode> {
        let mut guard = self.streams.lock().expect("streams lock");
        let streams = &mut *guard;
        let (id, after) = match last {
            Some((wire, seq)) => match streams.local_of(self.tag, wire) {
                Some(id) => (id, seq),
                None => return Err(StatusCode::NOT_FOUND),
            },
            None => (STANDALONE, u64::MAX),
        };
        let Some(stream) = streams.map.get_mut(&id) else {
            // The stream is gone (finished and forgotten, or never existed).
            return Err(StatusCode::NOT_FOUND);
        };
        if id == STANDALONE && last.is_none() && stream.is_live() {
            return Err(StatusCode::CONFLICT);
        }
        let (live, reader) = channel::channel(self.replay.max(16));
        // Resuming replays what followed the client's last id; a fresh standalone stream
        // delivers what was queued while no GET stream was open.
        let from = if after == u64::MAX {
            stream.delivered
        } else {
            after
        };
        let oldest_kept = stream.events.front().map_or(stream.next_seq, |e| e.seq);
        if after != u64::MAX && from + 1 < oldest_kept {
            // Events the client missed have left the replay buffer: it cannot resume losslessly.
            return Err(StatusCode::GONE);
        }
        let mut last_sent = from;
        for e in stream.events.iter().filter(|e| e.seq > from) {
            // The replay itself is bounded by the replay budget: everything kept fits.
            if !live.send(e.data.clone(), usize::MAX) {
                break;
            }
            last_sent = e.seq;
        }
        stream.delivered = stream.delivered.max(last_sent);
        let next_seq = stream.next_seq;
        // A finished stream is replayed and the connection ends there (the stream stays for
        // the rest of its window); a running one goes on live.
        if id == STANDALONE || !stream.pending.is_empty() {
            stream.live = Some(live);
        }
        Ok((stream.wire, next_seq, reader))
    }
}

fn status(code: StatusCode, message: &str) -> Response {
    let body = encode_error(
        None,
        &ErrorObject::new(RpcErrorCode::INVALID_REQUEST, message),
    );
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

impl HttpShared {
    /// The session named by the request; a pending session becomes established on this, its
    /// first use after `initialize`. A session created by one principal is not found for
    /// another (404, as for an unknown id: its existence is not revealed).
    fn local_session(&self, parts: &Parts) -> Result<Arc<HttpSession>, Reject> {
        let headers = &parts.headers;
        let caller = owner_of(parts);
        let Some(id) = headers.get(&SESSION_ID).and_then(|v| v.to_str().ok()) else {
            return Err(Reject::new(
                StatusCode::BAD_REQUEST,
                "Bad Request: missing Mcp-Session-Id header",
            ));
        };
        let gone = unknown_session;
        let mut sessions = self.sessions.lock().expect("sessions lock");
        if let Some(s) = sessions.established.get(id) {
            return match s.closed.is_cancelled() || s.owner != caller {
                false => Ok(s.clone()),
                true => Err(gone()),
            };
        }
        if sessions.pending.get(id).is_some_and(|s| s.owner != caller) {
            return Err(gone());
        }
        let Some(s) = sessions.pending.remove(id) else {
            return Err(gone());
        };
        if s.closed.is_cancelled() {
            return Err(gone());
        }
        if sessions.established.len() + self.legacy_count() >= self.config.max_sessions {
            drop(sessions);
            s.close();
            return Err(too_many_sessions());
        }
        sessions.established.insert(id.to_owned(), s.clone());
        Ok(s)
    }

    /// The session named by the request: held here, or, with a session store, resumed from
    /// it. A held session is checked against the store on every request (a `DELETE` or an
    /// expiry elsewhere ends it here too).
    async fn session(&self, parts: &Parts) -> Result<Arc<HttpSession>, Reject> {
        let found = self.local_session(parts);
        let Some(store) = &self.config.session_store else {
            return found;
        };
        let session = match found {
            Ok(s) => s,
            Err(r) if r.0 == StatusCode::NOT_FOUND => self.resume(store, parts).await?,
            Err(r) => return Err(r),
        };
        if let Some(link) = &session.link {
            match link.alive(false).await.map_err(store_failed)? {
                stored::Alive::Same => {}
                stored::Alive::Changed(snapshot) => session.session.apply_changes(*snapshot),
                stored::Alive::Gone => {
                    self.forget(&session);
                    return Err(unknown_session());
                }
            }
        }
        Ok(session)
    }

    /// Loads the request's session from `store` and starts it here, for the principal that
    /// created it only, unless it has been idle `session_idle_timeout` (fleet-wide).
    async fn resume(
        &self,
        store: &Arc<dyn SessionStore>,
        parts: &Parts,
    ) -> Result<Arc<HttpSession>, Reject> {
        let Some(id) = parts.headers.get(&SESSION_ID).and_then(|v| v.to_str().ok()) else {
            return Err(unknown_session());
        };
        let record = store
            .load_session(id.to_owned())
            .await
            .map_err(store_failed)?
            .ok_or_else(unknown_session)?;
        let owner = owner_of(parts);
        if record.owner != owner.as_deref().map(crate::session_store::stored_owner) {
            return Err(unknown_session());
        }
        let idle = std::time::SystemTime::now()
            .duration_since(record.last_seen)
            .unwrap_or_default();
        if idle >= self.config.session_idle_timeout {
            return Err(unknown_session());
        }
        if record.state.len() > stored::MAX_STATE_BYTES {
            tracing::warn!("a stored session's state is over the bound: not resumed");
            return Err(unknown_session());
        }
        let snapshot: SessionSnapshot = serde_json::from_str(&record.state).map_err(|e| {
            tracing::warn!(error = %e, "a stored session's state does not decode");
            unknown_session()
        })?;
        let session = HttpSession::start(
            &self.server,
            &self.config,
            None,
            Some(id),
            owner,
            Some(snapshot),
            &self.holder,
        );
        if let Some(link) = &session.link {
            link.known_state(&record.state);
        }
        let mut sessions = self.sessions.lock().expect("sessions lock");
        if let Some(held) = sessions.established.get(id).cloned() {
            // Another request resumed it meanwhile: one copy per process.
            drop(sessions);
            session.close();
            return Ok(held);
        }
        if sessions.established.len() + self.legacy_count() >= self.config.max_sessions {
            drop(sessions);
            session.close();
            return Err(too_many_sessions());
        }
        sessions.established.insert(id.to_owned(), session.clone());
        Ok(session)
    }

    /// Drops `session` from this process's tables and closes it here.
    fn forget(&self, session: &Arc<HttpSession>) {
        {
            let mut sessions = self.sessions.lock().expect("sessions lock");
            sessions.established.retain(|_, s| !Arc::ptr_eq(s, session));
            sessions.pending.retain(|_, s| !Arc::ptr_eq(s, session));
        }
        session.close();
    }

    fn established_full(&self) -> bool {
        self.established_count() + self.legacy_count() >= self.config.max_sessions
    }

    fn established_count(&self) -> usize {
        self.sessions
            .lock()
            .expect("sessions lock")
            .established
            .len()
    }

    /// Open HTTP+SSE sessions, which count against `max_sessions` too.
    fn legacy_count(&self) -> usize {
        #[cfg(feature = "legacy-sse")]
        return legacy::count(self);
        #[cfg(not(feature = "legacy-sse"))]
        0
    }
}

/// The binding key of the principal a layer in front put in the request's extensions.
fn owner_of(parts: &Parts) -> Option<String> {
    parts
        .extensions
        .get::<crate::principal::Principal>()
        .map(crate::principal::Principal::binding_key)
}

fn unknown_session() -> Reject {
    Reject::new(
        StatusCode::NOT_FOUND,
        "Not Found: unknown or expired session",
    )
}

fn store_failed(e: crate::session_store::SessionStoreError) -> Reject {
    tracing::warn!(error = %e, "session store failed");
    Reject::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "Service Unavailable: the session store did not answer",
    )
}

/// The principal holds `max_sessions_per_principal` sessions, each with an open stream.
fn too_many_own_sessions() -> Reject {
    Reject::new(
        StatusCode::TOO_MANY_REQUESTS,
        "Too Many Requests: this caller has too many sessions open, each in use; \
         close one (DELETE) or wait for one to end",
    )
}

fn too_many_sessions() -> Reject {
    Reject::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "Service Unavailable: too many sessions",
    )
}

fn accepts(headers: &HeaderMap, mime: &str) -> bool {
    accepts_all(headers, &[mime])
}

/// Whether the `Accept` header admits every one of `mimes` (at most 32): named exactly, by
/// `type/*` or by `*/*`. One pass over the header's values for all of them.
fn accepts_all(headers: &HeaderMap, mimes: &[&str]) -> bool {
    let mut missing: u32 = (1u32 << mimes.len()) - 1;
    if missing == 0 {
        return true;
    }
    for value in headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else { continue };
        for range in value.split(',') {
            let range = range.split(';').next().unwrap_or("").trim();
            for (i, mime) in mimes.iter().enumerate() {
                if range == *mime
                    || range == "*/*"
                    || (range.ends_with("/*") && mime.starts_with(&range[..range.len() - 1]))
                {
                    missing &= !(1 << i);
                }
            }
            if missing == 0 {
                return true;
            }
        }
    }
    false
}

fn check_version_header(headers: &HeaderMap) -> Result<(), Reject> {
    match headers
        .get(&PROTOCOL_VERSION)
        .map(|v| v.to_str().unwrap_or(""))
    {
        None => Ok(()), // absent: the client speaks 2025-03-26
        Some(v) if crate::modern::is_handshake(v) => Ok(()),
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

async fn handle(shared: Arc<HttpShared>, req: http::Request<Body>) -> Response {
    let (parts, body) = req.into_parts();
    // DNS rebinding and cross-site requests: before anything else.
    let policy = &shared.config.host_policy;
    if let Err(why) = policy.check_remembering(&shared.allowed_host, &parts.uri, &parts.headers) {
        return status(StatusCode::FORBIDDEN, &format!("Forbidden: {why}"));
    }
    if shared.shutdown.is_cancelled() {
        return status(
            StatusCode::SERVICE_UNAVAILABLE,
            "Service Unavailable: the server is shutting down",
        );
    }
    #[cfg(feature = "legacy-sse")]
    match legacy::route(&shared, parts.uri.path()) {
        Some(legacy::Route::Stream) => return legacy::open(shared, parts),
        Some(legacy::Route::Messages) => return legacy::post(shared, parts, body).await,
        None => {}
    }
    match parts.method {
        Method::POST => post(shared, parts, body).await,
        // 2026-07-28 has no GET stream and no sessions to delete.
        Method::GET | Method::DELETE if modern::by_header(&parts.headers) => modern::not_allowed(),
        Method::GET => get(shared, parts).await,
        Method::DELETE => delete(shared, &parts).await,
        _ => (
            StatusCode::METHOD_NOT_ALLOWED,
            [(header::ALLOW, "GET, POST, DELETE")],
        )
            .into_response(),
    }
}

/// Where a long-lived event stream's events come from, already encoded.
pub(super) trait EventSource: Send + 'static {
    /// The next event; `None` once the source is done.
    fn next_event(&mut self) -> impl std::future::Future<Output = Option<Bytes>> + Send;
}

impl EventSource for Reader {
    fn next_event(&mut self) -> impl std::future::Future<Output = Option<Bytes>> + Send {
        self.recv()
    }
}

/// What an SSE response body holds besides its source.
pub(super) struct SseState<R, H> {
    pub(super) rx: R,
    /// Sent before anything from the source (the priming event, an initialize result, the
    /// legacy `endpoint` event).
    pub(super) first: VecDeque<Bytes>,
    pub(super) keep_alive: Option<Duration>,
    pub(super) shutdown: CancellationToken,
    pub(super) closed: CancellationToken,
    /// Kept alive as long as the response (a stateless session and its permit, a legacy
    /// session's place in its table).
    pub(super) _hold: H,
}

/// A stateless session lives as long as its response, and holds its place under
/// `max_stateless_requests` as long.
struct Hold {
    _session: Arc<HttpSession>,
    _permit: OwnedSemaphorePermit,
}

/// A `text/event-stream` response: the state's first events, then its source's, a keep-alive
/// comment after each quiet `keep_alive`, until the server shuts down or `closed` is cancelled.
pub(super) fn sse_response<R: EventSource, H: Send + 'static>(
    state: SseState<R, H>,
    session_id: Option<&str>,
) -> Response {
    let stream = futures_util::stream::unfold(state, |mut st| async move {
        if let Some(f) = st.first.pop_front() {
            return Some((Ok::<Bytes, Infallible>(f), st));
        }
        let keep_alive = async {
            match st.keep_alive {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            _ = st.shutdown.cancelled() => None,
            _ = st.closed.cancelled() => None,
            m = st.rx.next_event() => m.map(|b| (Ok(b), st)),
            _ = keep_alive => Some((Ok(Bytes::from_static(KEEP_ALIVE_COMMENT)), st)),
        }
    });
    let mut resp = Response::new(Body::from_stream(stream));
    sse_headers(resp.headers_mut(), session_id);
    resp
}

/// A `text/event-stream` response whose every event is already known: one body with its
/// length, written with the head (no chunked framing, no stream to poll).
fn sse_complete(events: VecDeque<Bytes>, session_id: Option<&str>) -> Response {
    let body = if events.len() == 1 {
        events.into_iter().next().unwrap_or_default()
    } else {
        let mut body = Vec::with_capacity(events.iter().map(Bytes::len).sum());
        for e in &events {
            body.extend_from_slice(e);
        }
        Bytes::from(body)
    };
    let mut resp = Response::new(Body::from(body));
    sse_headers(resp.headers_mut(), session_id);
    resp
}

fn sse_headers(h: &mut HeaderMap, session_id: Option<&str>) {
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Some(id) = session_id.and_then(|id| HeaderValue::from_str(id).ok()) {
        h.insert(SESSION_ID, id);
    }
}

/// Whether a POST stream of revision `protocol` opens with a priming event (an id and a retry
/// hint, empty data): a 2025-11-25 feature.
fn primes(protocol: Option<&str>) -> bool {
    protocol == Some(ProtocolVersion::V2025_11_25.as_str())
}

fn priming_event(stream: u64, seq: u64, retry_ms: u64, protocol: Option<&str>) -> Option<Bytes> {
    primes(protocol).then(|| {
        encode_event(
            &event_id(stream, seq.saturating_sub(1)),
            Some(retry_ms),
            b"",
        )
    })
}

fn batch_refused() -> Response {
    let error = ErrorObject::new(
        RpcErrorCode::INVALID_REQUEST,
        "Invalid request: batches are only allowed in protocol version 2025-03-26",
    );
    (
        StatusCode::BAD_REQUEST,
        [(header::CONTENT_TYPE, "application/json")],
        encode_error(None, &error),
    )
        .into_response()
}

/// One message of a POST: its bytes, its request id (for requests), whether it is
/// `initialize`, and the request it cancels (for `notifications/cancelled`).
struct Posted {
    frame: Bytes,
    /// The message `frame` decodes to: handed to the engine as it is, not decoded again.
    message: Message,
    id: Option<RequestId>,
    initialize: bool,
    cancels: Option<RequestId>,
}

impl Posted {
    fn new(frame: Bytes, m: Message) -> Self {
        let cancels = match &m {
            Message::Notification { method, params }
                if method == crate::types::methods::CANCELLED =>
            {
                crate::jsonrpc::from_params::<crate::types::CancelledParams>(params.as_deref())
                    .ok()
                    .map(|p| p.request_id)
            }
            _ => None,
        };
        Posted {
            frame,
            id: request_id(&m),
            initialize: is_initialize(&m),
            cancels,
            message: m,
        }
    }
}

/// Reads a POST's body under the endpoint's bounds: JSON content type (415), at most
/// `max_body_bytes` (413, refused from `Content-Length` before reading), within
/// `body_read_timeout` (408).
async fn read_body(
    shared: &HttpShared,
    headers: &HeaderMap,
    body: Body,
) -> Result<Bytes, Response> {
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
        return Err(status(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Unsupported Media Type: send application/json",
        ));
    }
    let cfg = &shared.config;
    let limit = cfg.max_body_bytes;
    let too_large = || {
        status(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("Payload Too Large: the limit is {limit} bytes"),
        )
    };
    if headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok())
        .is_some_and(|n| n > limit)
    {
        return Err(too_large());
    }
    match tokio::time::timeout(cfg.body_read_timeout, axum::body::to_bytes(body, limit)).await {
        Ok(Ok(b)) => Ok(b),
        Ok(Err(_)) => Err(too_large()),
        Err(_) => Err(status(
            StatusCode::REQUEST_TIMEOUT,
            &format!(
                "Request Timeout: the body did not arrive within {:?}",
                cfg.body_read_timeout
            ),
        )),
    }
}

async fn post(shared: Arc<HttpShared>, parts: Parts, body: Body) -> Response {
    let headers = &parts.headers;
    if !accepts_all(headers, &["application/json", "text/event-stream"]) {
        return status(
            StatusCode::NOT_ACCEPTABLE,
            "Not Acceptable: the client must accept both application/json and text/event-stream",
        );
    }
    let body = match read_body(&shared, headers, body).await {
        Ok(b) => b,
        Err(resp) => return resp,
    };
    let cfg = &shared.config;
    // The era is decided per request: a 2026-07-28 request is an exchange of its own.
    if modern::by_header(headers) || modern::by_body(headers, &body) {
        return modern::post(shared, parts, body).await;
    }
    let (messages, batch): (Vec<Posted>, bool) = match decode_frame(&body) {
        Frame::Single(Ok(m)) => (vec![Posted::new(body.clone(), m)], false),
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
                    Ok(m) => out.push(Posted::new(Bytes::copy_from_slice(raw.get().as_bytes()), m)),
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
            (out, true)
        }
    };
    let has_initialize = messages.iter().any(|m| m.initialize);
    if has_initialize && (batch || messages.len() > 1) {
        return status(
            StatusCode::BAD_REQUEST,
            "Bad Request: initialize must be sent alone",
        );
    }
    let mut hold = None;
    let (session, session_id) = if cfg.stateless {
        if let Err(r) = check_version_header(headers) {
            return r.into_response();
        }
        let v = headers
            .get(&PROTOCOL_VERSION)
            .and_then(|v| v.to_str().ok())
            .map_or(ProtocolVersion::V2025_03_26, ProtocolVersion::new);
        if batch && !v.allows_batches() {
            return batch_refused();
        }
        let Ok(permit) = shared.stateless.clone().try_acquire_owned() else {
            return status(
                StatusCode::SERVICE_UNAVAILABLE,
                "Service Unavailable: too many concurrent requests",
            );
        };
        let stateless = (!has_initialize).then_some(v);
        let session = HttpSession::start(
            &shared.server,
            cfg,
            stateless,
            None,
            None,
            None,
            &shared.holder,
        );
        hold = Some(Hold {
            _session: session.clone(),
            _permit: permit,
        });
        (session, None)
    } else if has_initialize {
        // A caller at its own bound replaces its own idle session: that takes nothing from
        // the others, so the overall bound does not refuse it.
        let owner = owner_of(&parts);
        match shared.owner_room(&owner) {
            OwnerRoom::Busy => return too_many_own_sessions().into_response(),
            OwnerRoom::Fits if shared.established_full() => {
                return too_many_sessions().into_response()
            }
            OwnerRoom::Fits | OwnerRoom::Replaces => {}
        }
        let id = new_session_id();
        (
            HttpSession::start(
                &shared.server,
                cfg,
                None,
                Some(&id),
                owner,
                None,
                &shared.holder,
            ),
            Some(id),
        )
    } else {
        if let Err(r) = check_version_header(headers) {
            return r.into_response();
        }
        let session = match shared.session(&parts).await {
            Ok(s) => s,
            Err(r) => return r.into_response(),
        };
        let allowed = session
            .session
            .protocol_version()
            .is_some_and(|v| v.allows_batches());
        if batch && !allowed {
            return batch_refused();
        }
        let id = headers
            .get(&SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        (session, id)
    };
    session.touch();
    let requests: Vec<RequestId> = messages.iter().filter_map(|m| m.id.clone()).collect();
    let opened = if requests.is_empty() {
        None
    } else {
        // A lone request's frame, kept should its stream need recording in a session store.
        let lone = match messages.as_slice() {
            [m] if m.id.is_some() => Some(m.frame.clone()),
            _ => None,
        };
        match session.open_stream(&requests, cfg.json_response, lone) {
            Ok(o) => Some(o),
            Err(OpenError::TooManyStreams) => {
                return status(
                    StatusCode::TOO_MANY_REQUESTS,
                    "Too Many Requests: too many open streams in this session",
                )
            }
            Err(OpenError::DuplicateId(id)) => {
                // The first request with this id keeps its stream and gets its response.
                let error = ErrorObject::new(
                    RpcErrorCode::INVALID_REQUEST,
                    format!("Invalid request: request id {id} is already in use"),
                );
                return (
                    StatusCode::CONFLICT,
                    [(header::CONTENT_TYPE, "application/json")],
                    encode_error(Some(&id), &error),
                )
                    .into_response();
            }
        }
    };
    let context: crate::transport::TransportContext =
        Arc::new(HttpContext::new(parts, session_id.clone()));
    for m in messages {
        let inbound = Inbound::Decoded(Box::new(DecodedFrame {
            frame: m.frame,
            message: m.message,
            context: context.clone(),
        }));
        if session.inbound.send(inbound).await.is_err() {
            return status(StatusCode::NOT_FOUND, "Not Found: the session has ended");
        }
        if let Some(id) = &m.cancels {
            session.cancelled(id);
        }
    }
    let Some((stream_id, mut rx)) = opened else {
        return StatusCode::ACCEPTED.into_response();
    };
    let mut first = VecDeque::new();
    let mut session_id = session_id;
    if has_initialize && !cfg.stateless {
        // The session is kept only once its initialize succeeded: wait for the answer (the
        // engine answers initialize before reading anything else).
        let answer = tokio::time::timeout(INITIALIZE_TIMEOUT, rx.recv()).await;
        let Ok(Some(answer)) = answer else {
            session.close();
            return status(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Internal Server Error: initialize was not answered",
            );
        };
        first.push_back(answer);
        match (&session_id, session.session.is_initialized()) {
            (Some(id), true) => {
                let closed = match shared.add_pending(id.clone(), session.clone()) {
                    Ok(closed) => closed,
                    Err(r) => {
                        session.close();
                        return r.into_response();
                    }
                };
                // A session closed to make room is ended everywhere, not only here.
                for link in closed.iter().filter_map(|v| v.link.as_ref()) {
                    if let Err(e) = link.store.end_session(link.id.clone()).await {
                        shared.forget(&session);
                        return store_failed(e).into_response();
                    }
                }
                // Saved before the answer leaves: the client's next request may go anywhere.
                if let (Some(link), Some(snapshot)) = (&session.link, session.session.snapshot()) {
                    match link.save_now(&snapshot).await {
                        Ok(true) => {}
                        Ok(false) => {
                            shared.forget(&session);
                            return status(
                                StatusCode::PAYLOAD_TOO_LARGE,
                                &format!(
                                    "Payload Too Large: the session's state (client capabilities \
                                     and info) is over {} bytes",
                                    stored::MAX_STATE_BYTES
                                ),
                            );
                        }
                        Err(e) => {
                            shared.forget(&session);
                            return store_failed(e).into_response();
                        }
                    }
                }
            }
            _ => {
                // Refused (invalid params, unsupported): answered, and nothing is kept.
                session.close();
                session_id = None;
            }
        }
    }
    if cfg.json_response {
        return json_response(
            first,
            rx,
            requests.len(),
            session_id.as_deref(),
            session,
            hold,
        )
        .await;
    }
    let protocol = session
        .session
        .protocol_version()
        .or_else(|| headers_version(&context));
    let priming = priming_event(stream_id, 1, cfg.sse_retry_ms, protocol.as_deref());
    if first.is_empty() && !cfg.sse_head_wait.is_zero() {
        if priming.is_none() {
            // Hold the head back for the first message: a quick answer then leaves with it.
            tokio::select! {
                biased;
                m = rx.recv() => first.extend(m),
                _ = session.closed.cancelled() => {}
                _ = shared.shutdown.cancelled() => {}
                _ = shared.head_wait.until(tokio::time::Instant::now() + cfg.sse_head_wait) => {}
            }
        } else {
            // 2025-11-25: the priming event (the id to resume from) goes out at once; one turn
            // of the scheduler first lets a quick handler answer, so the answer leaves with it.
            tokio::task::yield_now().await;
        }
    }
    let ended = rx.drain(&mut first);
    let complete = ended && !first.is_empty();
    if let Some(p) = priming {
        first.push_front(p);
    }
    if complete {
        // Everything this stream will carry is here: one body of known length.
        return sse_complete(first, session_id.as_deref());
    }
    let state = SseState {
        rx,
        first,
        keep_alive: cfg.sse_keep_alive,
        shutdown: shared.shutdown.clone(),
        closed: session.closed.clone(),
        _hold: hold,
    };
    sse_response(state, session_id.as_deref())
}

/// The revision the request's header names, if any.
fn headers_version(context: &crate::transport::TransportContext) -> Option<ProtocolVersion> {
    let http: &HttpContext = context.downcast_ref()?;
    http.headers()
        .get(&PROTOCOL_VERSION)
        .and_then(|v| v.to_str().ok())
        .map(ProtocolVersion::new)
}

async fn json_response(
    mut frames: VecDeque<Bytes>,
    mut rx: Reader,
    expected: usize,
    session_id: Option<&str>,
    session: Arc<HttpSession>,
    _hold: Option<Hold>,
) -> Response {
    while frames.len() < expected {
        tokio::select! {
            m = rx.recv() => match m {
                Some(f) => frames.push_back(f),
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
        frames.pop_front().unwrap_or_default().to_vec()
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
        resp.headers_mut().insert(SESSION_ID, id);
    }
    resp
}

async fn get(shared: Arc<HttpShared>, parts: Parts) -> Response {
    let headers = &parts.headers;
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
    let session = match shared.session(&parts).await {
        Ok(s) => s,
        Err(r) => return r.into_response(),
    };
    session.touch();
    let last = headers
        .get(&LAST_EVENT_ID)
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
    if let (Some((wire, seq)), Some(link)) = (last, &session.link) {
        // Another process's stream, or one of ours already forgotten here: the store's log.
        if !session.holds_stream(wire) {
            let link = link.clone();
            return replay_stored(&shared, &session, &link, wire, seq, parts).await;
        }
    }
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
            let state = SseState {
                rx,
                first: priming.into_iter().collect(),
                keep_alive: shared.config.sse_keep_alive,
                shutdown: shared.shutdown.clone(),
                closed: session.closed.clone(),
                _hold: (),
            };
            sse_response(state, None)
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

/// Resumes a stream another process opened, from the store's event log: what followed `seq`
/// is replayed; a standalone stream then goes on live here (this process's own standalone
/// stream). A request's stream whose request still runs (its record in the store) is followed
/// ([`follow_stored`]); any other ends after the replay (its client resumes again from its
/// last event for more).
async fn replay_stored(
    shared: &Arc<HttpShared>,
    session: &Arc<HttpSession>,
    link: &Arc<StoreLink>,
    wire: u64,
    seq: u64,
    parts: Parts,
) -> Response {
    let replay = match link.store.events_after(link.id.clone(), wire, seq).await {
        Ok(r) => r,
        Err(e) => return store_failed(e).into_response(),
    };
    let running = if wire & LOCAL_MASK == STANDALONE {
        None
    } else {
        match link.store.load_stream(link.id.clone(), wire).await {
            Ok(r) => r,
            Err(e) => return store_failed(e).into_response(),
        }
    };
    let oldest = match (replay.oldest, &running) {
        (Some(oldest), _) => oldest,
        // Recorded, its first event not yet kept: nothing to miss.
        (None, Some(_)) => seq.saturating_add(1),
        (None, None) => return status(StatusCode::NOT_FOUND, "Not Found: no such stream"),
    };
    if seq.saturating_add(1) < oldest {
        return status(
            StatusCode::GONE,
            "Gone: the events after Last-Event-ID are no longer kept",
        );
    }
    let last = replay.events.last().map_or(seq, |e| e.seq.max(seq));
    let events: VecDeque<Bytes> = replay
        .events
        .into_iter()
        .map(|e| Bytes::from(e.data))
        .collect();
    if running.is_some() {
        let (live, rx) = channel::channel(session.replay.max(16));
        tokio::spawn(follow_stored(
            shared.clone(),
            session.clone(),
            link.clone(),
            wire,
            seq,
            last,
            live,
            parts,
        ));
        let state = SseState {
            rx,
            first: events,
            keep_alive: shared.config.sse_keep_alive,
            shutdown: shared.shutdown.clone(),
            closed: session.closed.clone(),
            _hold: (),
        };
        return sse_response(state, None);
    }
    if wire & LOCAL_MASK == STANDALONE {
        if let Ok((_, _, rx)) = session.attach(None) {
            let state = SseState {
                rx,
                first: events,
                keep_alive: shared.config.sse_keep_alive,
                shutdown: shared.shutdown.clone(),
                closed: session.closed.clone(),
                _hold: (),
            };
            return sse_response(state, None);
        }
    }
    sse_complete(events, None)
}

/// How long one connection follows another process's running request through the store's log
/// before it ends (its client resumes again).
const FOLLOW_FOR: Duration = Duration::from_secs(30);

/// How often a followed stream's log and record are read.
const FOLLOW_POLL: Duration = Duration::from_millis(200);

/// Follows stream `wire` of a request running at another process, on the connection `live`
/// (the client resumed after `client_seq`; the store's events up to `last` are already on
/// it): passes on the events the store's log gains until the request is answered (its record
/// gone), the connection ends, or [`FOLLOW_FOR`] passed. When the holder's lease ran out and
/// [`HttpServerConfig::take_over_streams`] is on, claims it and runs the stored request here,
/// its events continuing the stream on this connection.
#[allow(clippy::too_many_arguments)]
async fn follow_stored(
    shared: Arc<HttpShared>,
    session: Arc<HttpSession>,
    link: Arc<StoreLink>,
    wire: u64,
    client_seq: u64,
    mut last: u64,
    live: Live,
    parts: Parts,
) {
    let store = &link.store;
    let deadline = Instant::now() + FOLLOW_FOR;
    // Passes on the log's events after `last`; false when the connection is gone.
    async fn pass_on(link: &StoreLink, wire: u64, last: &mut u64, live: &Live) -> Option<bool> {
        let replay = link
            .store
            .events_after(link.id.clone(), wire, *last)
            .await
            .ok()?;
        for e in replay.events {
            if !live.send(Bytes::from(e.data), usize::MAX) {
                return Some(false);
            }
            *last = e.seq;
        }
        Some(true)
    }
    loop {
        tokio::select! {
            _ = tokio::time::sleep(FOLLOW_POLL) => {}
            _ = session.closed.cancelled() => return,
            _ = shared.shutdown.cancelled() => return,
        }
        if !live.is_open() || pass_on(&link, wire, &mut last, &live).await != Some(true) {
            return;
        }
        let record = match store.load_stream(link.id.clone(), wire).await {
            Ok(Some(r)) => r,
            Ok(None) => {
                // Answered: its last events (the response) were kept before the record went.
                let _ = pass_on(&link, wire, &mut last, &live).await;
                return;
            }
            Err(e) => {
                tracing::warn!(session = %link.id, error = %e, "a followed stream's record was not read");
                return;
            }
        };
        let lapsed = record.lease_until < std::time::SystemTime::now();
        if lapsed && shared.config.take_over_streams && record.holder != link.holder {
            if let Ok(true) = link.lease_stream(wire).await {
                take_over(&session, &link, wire, client_seq, last, record, live, parts).await;
                return;
            }
        }
        if Instant::now() >= deadline {
            return;
        }
    }
}

/// Runs the stored request of stream `wire` again here (this process claimed its lease): the
/// events its old holder kept are passed on first, then the stream continues on `live`, its
/// numbers after the highest the client or the store has seen.
#[allow(clippy::too_many_arguments)]
async fn take_over(
    session: &Arc<HttpSession>,
    link: &Arc<StoreLink>,
    wire: u64,
    client_seq: u64,
    mut last: u64,
    record: crate::session_store::StreamRecord,
    live: Live,
    parts: Parts,
) {
    if let Ok(replay) = link.store.events_after(link.id.clone(), wire, last).await {
        for e in replay.events {
            if !live.send(Bytes::from(e.data), usize::MAX) {
                break;
            }
            last = e.seq;
        }
    }
    if record.request.len() > stored::MAX_STATE_BYTES {
        // Never recorded so large here: not decoded.
        tracing::warn!(session = %link.id, "a stored request is over the bound: not taken over");
        let _ = link.release_stream(wire).await;
        return;
    }
    let frame = Bytes::from(record.request.into_bytes());
    let message = match decode_frame(&frame) {
        Frame::Single(Ok(m @ Message::Request { .. })) => m,
        _ => {
            tracing::warn!(session = %link.id, "a stored request does not decode: not taken over");
            let _ = link.release_stream(wire).await;
            return;
        }
    };
    let Some(id) = request_id(&message) else {
        return;
    };
    let next_seq = last.max(client_seq) + 1;
    if session
        .adopt(wire, next_seq, id, frame.clone(), live)
        .is_err()
    {
        let _ = link.release_stream(wire).await;
        return;
    }
    tracing::info!(session = %link.id, stream = wire, "took over a request whose process stopped");
    let context: crate::transport::TransportContext =
        Arc::new(HttpContext::new(parts, Some(link.id.clone())));
    let inbound = Inbound::Decoded(Box::new(DecodedFrame {
        frame,
        message,
        context,
    }));
    let _ = session.inbound.send(inbound).await;
}

async fn delete(shared: Arc<HttpShared>, parts: &Parts) -> Response {
    let headers = &parts.headers;
    if shared.config.stateless {
        return (StatusCode::METHOD_NOT_ALLOWED, [(header::ALLOW, "POST")]).into_response();
    }
    let session = match shared.session(parts).await {
        Ok(s) => s,
        Err(r) => return r.into_response(),
    };
    if let Some(id) = headers.get(&SESSION_ID).and_then(|v| v.to_str().ok()) {
        let mut sessions = shared.sessions.lock().expect("sessions lock");
        sessions.established.remove(id);
        sessions.pending.remove(id);
    }
    session.close();
    // Ended in the store: every process answers 404 for it from now on.
    if let Some(link) = &session.link {
        if let Err(e) = link.store.end_session(link.id.clone()).await {
            return store_failed(e).into_response();
        }
    }
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
    fn accept_admits_each_type_by_name_by_wildcard_or_across_header_lines() {
        let both = ["application/json", "text/event-stream"];
        let with = |values: &[&str]| {
            let mut h = HeaderMap::new();
            for v in values {
                h.append(header::ACCEPT, v.parse().unwrap());
            }
            h
        };
        let admits = |values: &[&str]| accepts_all(&with(values), &both);
        assert!(admits(&["application/json, text/event-stream"]));
        assert!(admits(&["text/event-stream;q=0.5 , application/json;q=1"]));
        assert!(admits(&["application/json", "text/event-stream"]));
        assert!(admits(&["*/*"]));
        assert!(admits(&["application/*, text/*"]));
        assert!(!admits(&["application/json"]));
        assert!(!admits(&["text/*"]));
        assert!(!admits(&["application/jsonx, text/event-stream"]));
        assert!(!admits(&[]));
        assert!(accepts(&with(&["text/*"]), "text/event-stream"));
        assert!(!accepts(&with(&["text/plain"]), "text/event-stream"));
    }

    #[test]
    fn event_ids_round_trip() {
        assert_eq!(parse_event_id(&event_id(3, 17)), Some((3, 17)));
        assert_eq!(parse_event_id("garbage"), None);
    }

    fn streams_with(ids: &[u64]) -> Streams {
        let mut map = BTreeMap::new();
        for id in ids {
            map.insert(*id, Box::new(Stream::new(false, *id)));
        }
        Streams {
            next_id: 10,
            map,
            by_request: IdMap::default(),
            bytes: 0,
            next_arrival: 0,
        }
    }

    #[test]
    fn replay_is_bounded_in_bytes_across_streams_oldest_first() {
        let mut s = streams_with(&[0, 1]);
        let ev = |n: usize| Bytes::from(vec![b'x'; n]);
        s.keep(0, 1, ev(400), 256, 1000);
        s.keep(1, 1, ev(400), 256, 1000);
        assert_eq!(s.bytes, 800);
        // 1200 > 1000: the session's oldest event (stream 0's) goes.
        s.keep(1, 2, ev(400), 256, 1000);
        assert_eq!(s.bytes, 800);
        assert!(s.map[&0].events.is_empty());
        assert_eq!(
            s.map[&1].events.iter().map(|e| e.seq).collect::<Vec<_>>(),
            [1, 2]
        );
        // The per-stream count bound also gives bytes back.
        s.keep(0, 2, ev(10), 1, 1000);
        s.keep(0, 3, ev(10), 1, 1000);
        assert_eq!(s.bytes, 810);
        // Removing a stream gives back its bytes.
        s.remove(1);
        assert_eq!(s.bytes, 10);
        // The newest event is kept even when it alone exceeds the budget; the rest go.
        s.keep(0, 4, ev(2000), 256, 1000);
        assert_eq!(s.bytes, 2000);
        assert_eq!(
            s.map[&0].events.iter().map(|e| e.seq).collect::<Vec<_>>(),
            [4]
        );
    }
}
