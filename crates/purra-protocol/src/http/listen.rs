//! A hardened accept loop for HTTP/1.1 services: `TCP_NODELAY` on every socket, a connection
//! limit that closes the longest-idle connection to make room, and hyper's header-read timeout
//! (which `axum::serve` does not set), with graceful shutdown.
//!
//! [`StreamableHttpServer::serve`](super::StreamableHttpServer::serve) runs on it; an
//! application that mounts the MCP endpoint in its own router serves that router with
//! [`serve`] to get the same defences, and a service that needs each connection's peer address
//! (the approver page, which limits sign-ins per client) is served by [`serve_with`]: one accept
//! loop for every HTTP listener.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::limit::{BusyGuard, Limiter, SlotGuard};

/// The peer address of the connection a request came on, in every request's extensions when it
/// is served by this accept loop ([`serve`], [`serve_with`],
/// [`StreamableHttpServer::serve`](super::StreamableHttpServer::serve)): what per-client
/// bounds (the token guard's introspection, for one) tell clients apart by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAddr(pub SocketAddr);

/// The default bound on concurrent connections: 1024.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// The default time a client has to send a request's headers: 10 s.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Limits of the accept loop.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ConnectionLimits {
    /// How many connections are open at once (default 1024). At the limit, a new connection
    /// takes the slot of the connection idle longest (no request in flight), which is closed;
    /// when every connection is busy, new clients wait in the listen backlog.
    pub max_connections: usize,
    /// How long a client may take to send a request's headers, counted from the moment the
    /// server waits for them: a new connection, or a kept-alive one between requests
    /// (default 10 s; `None`: no limit). Slow or silent clients are closed.
    pub header_read_timeout: Option<Duration>,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_read_timeout: Some(DEFAULT_HEADER_READ_TIMEOUT),
        }
    }
}

impl ConnectionLimits {
    /// Sets the bound on concurrent connections.
    pub fn max_connections(mut self, n: usize) -> Self {
        self.max_connections = n;
        self
    }
    /// Sets the header-read timeout (`None`: no limit).
    pub fn header_read_timeout(mut self, t: Option<Duration>) -> Self {
        self.header_read_timeout = t;
        self
    }
}

/// Open connections of a running accept loop, for hosts and tests.
#[derive(Debug, Clone)]
pub struct ConnectionStats {
    limiter: Arc<Limiter>,
}

impl ConnectionStats {
    /// The counters of an accept loop that will run with `limits` (their connection bound is
    /// these counters' too): give them to [`serve_with`] and read them while it runs.
    pub fn new(limits: &ConnectionLimits) -> ConnectionStats {
        stats_for(limits).0
    }
    /// Connections open now.
    pub fn open(&self) -> usize {
        self.limiter.len()
    }
    /// Connections closed so far to make room for new ones.
    pub fn evicted(&self) -> u64 {
        self.limiter.evicted()
    }
}

pub(crate) fn stats_for(limits: &ConnectionLimits) -> (ConnectionStats, Arc<Limiter>) {
    let limiter = Limiter::new(limits.max_connections);
    (
        ConnectionStats {
            limiter: limiter.clone(),
        },
        limiter,
    )
}

/// Serves `service` (an axum `Router`, a [`StreamableHttpServer`](super::StreamableHttpServer),
/// any tower service of HTTP requests) on `listener` over HTTP/1.1 until `shutdown` is
/// cancelled; then stops accepting, lets in-flight requests finish, closes idle connections, and
/// returns when every connection has closed. Streams that never end on their own (SSE) must end
/// on the same token, as the MCP endpoint's do (`HttpServerConfig::shutdown`).
pub async fn serve<S, B>(
    listener: TcpListener,
    service: S,
    limits: ConnectionLimits,
    shutdown: CancellationToken,
) -> std::io::Result<()>
where
    S: tower_service::Service<Request<Incoming>, Response = Response<B>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (_, limiter) = stats_for(&limits);
    serve_limited(
        listener,
        move |_| service.clone(),
        limits,
        limiter,
        shutdown,
    )
    .await
}

/// [`serve`] with a service made for each connection by `make` from the peer's address (so the
/// service can tell clients apart: the approver page limits failed sign-ins per address), its
/// connections counted in `stats` (made by [`ConnectionStats::new`] with the same `limits`:
/// counters made for another connection bound are refused, `InvalidInput`). The same accept
/// loop, limits and shutdown as [`serve`].
pub async fn serve_with<M, S, B>(
    listener: TcpListener,
    make: M,
    limits: ConnectionLimits,
    stats: &ConnectionStats,
    shutdown: CancellationToken,
) -> std::io::Result<()>
where
    M: FnMut(SocketAddr) -> S,
    S: tower_service::Service<Request<Incoming>, Response = Response<B>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    if stats.limiter.max() != limits.max_connections.max(1) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "the connection counters were made for {} connections, the limits say {}",
                stats.limiter.max(),
                limits.max_connections
            ),
        ));
    }
    serve_limited(listener, make, limits, stats.limiter.clone(), shutdown).await
}

pub(crate) async fn serve_limited<M, S, B>(
    listener: TcpListener,
    mut make: M,
    limits: ConnectionLimits,
    limiter: Arc<Limiter>,
    shutdown: CancellationToken,
) -> std::io::Result<()>
where
    M: FnMut(SocketAddr) -> S,
    S: tower_service::Service<Request<Incoming>, Response = Response<B>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => break,
            _ = limiter.ready() => {}
        }
        let (stream, peer) = tokio::select! {
            biased;
            _ = shutdown.cancelled() => break,
            r = listener.accept() => match r {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors: give up an idle connection's; otherwise back off
                    // instead of spinning.
                    if !(crate::limit::out_of_descriptors(&e) && limiter.shed_one()) {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    } else {
                        tokio::task::yield_now().await;
                    }
                    continue;
                }
            },
        };
        // SSE events are small writes: without TCP_NODELAY, Nagle's algorithm holds each back
        // until the peer's delayed ACK (~25 ms per response, measured).
        let _ = stream.set_nodelay(true);
        let slot = limiter.admit().await;
        while tasks.try_join_next().is_some() {}
        tasks.spawn(connection(
            stream,
            peer,
            make(peer),
            limits.header_read_timeout,
            slot,
            shutdown.clone(),
        ));
    }
    drop(listener);
    while tasks.join_next().await.is_some() {}
    Ok(())
}

async fn connection<S, B>(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    service: S,
    header_read_timeout: Option<Duration>,
    slot: SlotGuard,
    shutdown: CancellationToken,
) where
    S: tower_service::Service<Request<Incoming>, Response = Response<B>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let slot = Arc::new(slot);
    let tracked = Tracking {
        inner: service,
        slot: slot.clone(),
        peer: PeerAddr(peer),
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout);
    let conn = builder.serve_connection(TokioIo::new(stream), tracked);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        // Chosen to make room: nothing is in flight, so dropping the connection loses nothing.
        _ = slot.evicted().cancelled() => {}
        _ = shutdown.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

/// Counts each request, until its response body is dropped, as work on the connection.
struct Tracking<S> {
    inner: S,
    slot: Arc<SlotGuard>,
    peer: PeerAddr,
}

impl<S, B> hyper::service::Service<Request<Incoming>> for Tracking<S>
where
    S: tower_service::Service<Request<Incoming>, Response = Response<B>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
{
    type Response = Response<Tracked<B>>;
    type Error = Infallible;
    type Future = TrackedCall<S, S::Future>;

    fn call(&self, mut req: Request<Incoming>) -> Self::Future {
        req.extensions_mut().insert(self.peer);
        TrackedCall {
            svc: self.inner.clone(),
            req: Some(req),
            busy: Some(self.slot.enter()),
            fut: None,
        }
    }
}

pin_project_lite::pin_project! {
    /// One request's call: waits for the service to be ready, calls it, and hands the busy
    /// guard to the response body. A named future, so hyper holds it in place (no box).
    pub(crate) struct TrackedCall<S, F> {
        svc: S,
        req: Option<Request<Incoming>>,
        busy: Option<BusyGuard>,
        #[pin]
        fut: Option<F>,
    }
}

impl<S, B> Future for TrackedCall<S, S::Future>
where
    S: tower_service::Service<Request<Incoming>, Response = Response<B>, Error = Infallible>,
{
    type Output = Result<Response<Tracked<B>>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if this.fut.is_none() {
            std::task::ready!(this.svc.poll_ready(cx))?;
            let req = this
                .req
                .take()
                .expect("TrackedCall polled after it finished");
            this.fut.set(Some(this.svc.call(req)));
        }
        let Some(fut) = this.fut.as_pin_mut() else {
            unreachable!("the call was just made")
        };
        let resp = std::task::ready!(fut.poll(cx))?;
        let busy = this
            .busy
            .take()
            .expect("TrackedCall polled after it finished");
        Poll::Ready(Ok(resp.map(|inner| Tracked { inner, _busy: busy })))
    }
}

pin_project_lite::pin_project! {
    /// A response body that keeps its connection busy until it is dropped.
    pub(crate) struct Tracked<B> {
        #[pin]
        inner: B,
        _busy: BusyGuard,
    }
}

impl<B: http_body::Body> http_body::Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        self.project().inner.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
