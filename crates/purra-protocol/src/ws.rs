//! WebSocket: one JSON-RPC message per text frame over `ws://` or `wss://`, with the `mcp`
//! subprotocol, bounded messages and ping/pong keep-alive — a client ([`connect`]) and a server
//! ([`serve`], [`serve_connection`], [`accept`]).
//!
//! Like every transport, this one only turns a socket into the two channels of
//! [`Transport`]: a reader task feeds the engine, a writer task drains it.
//!
//! How a connection ends:
//!
//! * **Binary frame** from the peer: the connection is closed with code 1003 (unsupported data)
//!   and the reason `purra: binary frames are not supported; send JSON-RPC as text frames`; the
//!   engine sees end of input.
//! * **Oversized message** (more than `max_message_bytes`, default [`DEFAULT_MAX_FRAME_BYTES`]):
//!   tungstenite is configured with that bound as its maximum frame and message size, so nothing
//!   larger is ever buffered. The connection is closed with code 1009 (message too big) and the engine sees
//!   **end of input** — not [`Inbound::Oversize`]: the rest of the frame was never read, so the
//!   stream cannot continue, and the close code already tells the peer why.
//! * **Invalid UTF-8** in a text frame: close code 1007; a WebSocket protocol violation: 1002.
//! * **Keep-alive**: with `ping_interval` set (default 15 s), the side sends a ping at that
//!   interval; when nothing at all (a pong or any other frame) arrives for `pong_timeout`
//!   (default 30 s) the connection is closed with code 1011 and the engine sees end of input.
//!   Pings from the peer are answered with pongs automatically while the connection is read.
//! * The engine ending (end of input, `close`) closes with code 1000 after writing what is
//!   queued; a server shutting down ([`serve`]'s `shutdown`) ends input, lets the engine finish
//!   and closes with 1001 (going away).
//!
//! * **Idle**: a server connection that has received no message for `idle_timeout` (default 10
//!   minutes; pings and pongs do not count) and has no request in flight is closed with code 1000.
//! * **Connection limit** ([`serve`]): at `max_connections`, a new client takes the slot of the
//!   connection idle longest (no request in flight), which is closed with code 1013 (try again
//!   later); only when every connection is busy do new clients wait in the listen backlog.
//!
//! Handshake rules on the server: the request's host (and its `Origin`, when a browser sends
//! one) must pass the [`HostPolicy`] — by default only `localhost`, `127.0.0.1` and `[::1]`,
//! against DNS rebinding and cross-site WebSocket hijacking, the same policy type the
//! Streamable HTTP server uses — or the request is refused with **HTTP 403**.
//! A client that does not offer the `mcp` subprotocol is refused with **HTTP 400**; an accepted
//! connection is answered with `Sec-WebSocket-Protocol: mcp`. Handlers see the handshake
//! request (headers, URI) through `RequestCtx::http`.

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
#[cfg(feature = "server")]
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::time::{sleep_until, timeout, timeout_at, Instant, Interval};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::error::CapacityError;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::{header, HeaderName, HeaderValue, StatusCode};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::{self, Message, Utf8Bytes};
use tokio_tungstenite::{Connector, WebSocketStream};
use tokio_util::sync::CancellationToken;

use crate::error::Error;
use crate::host_policy::HostPolicy;
use crate::http_context::HttpContext;
#[cfg(feature = "server")]
use crate::limit::Limiter;
use crate::limit::SlotGuard;
#[cfg(feature = "server")]
use crate::server::Server;
use crate::transport::{
    queue, Inbound, Outbound, Transport, TransportContext, CHANNEL_CAPACITY,
    DEFAULT_MAX_FRAME_BYTES,
};

/// The WebSocket subprotocol MCP connections use (`Sec-WebSocket-Protocol: mcp`).
pub const SUBPROTOCOL: &str = "mcp";

/// The default interval between keep-alive pings: 15 s.
pub const DEFAULT_PING_INTERVAL: Duration = Duration::from_secs(15);

/// The default time without any frame from the peer after which the connection is closed: 30 s.
pub const DEFAULT_PONG_TIMEOUT: Duration = Duration::from_secs(30);

/// The default time a server connection may go without a message (and without a request in
/// flight) before it is closed: 10 minutes.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(600);

/// How long closing may take (sending the close frame, waiting for the peer's, or writing what
/// is queued once the engine is done).
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// The close reason sent when a binary frame arrives.
pub const BINARY_FRAME_REASON: &str =
    "purra: binary frames are not supported; send JSON-RPC as text frames";

/// Options of a WebSocket client connection.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct WsClientOptions {
    /// Extra request headers, e.g. `Authorization`.
    pub headers: Vec<(String, String)>,
    /// The bound on one inbound message (and frame).
    pub max_message_bytes: usize,
    /// How often to ping the server; `None` turns keep-alive off.
    pub ping_interval: Option<Duration>,
    /// With keep-alive on, how long the server may stay silent before the connection is closed.
    pub pong_timeout: Duration,
    /// The bound on connecting: TCP, TLS and the WebSocket handshake.
    pub connect_timeout: Duration,
    /// The TLS configuration for `wss://`; by default rustls (ring) with the webpki roots.
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

impl Default for WsClientOptions {
    fn default() -> Self {
        WsClientOptions {
            headers: Vec::new(),
            max_message_bytes: DEFAULT_MAX_FRAME_BYTES,
            ping_interval: Some(DEFAULT_PING_INTERVAL),
            pong_timeout: DEFAULT_PONG_TIMEOUT,
            connect_timeout: Duration::from_secs(30),
            tls: None,
        }
    }
}

impl WsClientOptions {
    /// Adds a request header.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
    /// Sets the bound on one inbound message.
    pub fn max_message_bytes(mut self, n: usize) -> Self {
        self.max_message_bytes = n;
        self
    }
    /// Sets the keep-alive: ping every `interval` (`None`: never), close after `timeout` of
    /// silence.
    pub fn keep_alive(mut self, interval: Option<Duration>, timeout: Duration) -> Self {
        self.ping_interval = interval;
        self.pong_timeout = timeout;
        self
    }
    /// Sets the bound on connecting.
    pub fn connect_timeout(mut self, t: Duration) -> Self {
        self.connect_timeout = t;
        self
    }
    /// Sets the TLS configuration for `wss://`.
    pub fn tls(mut self, config: Arc<rustls::ClientConfig>) -> Self {
        self.tls = Some(config);
        self
    }
    fn settings(&self) -> Settings {
        Settings {
            max_message_bytes: self.max_message_bytes,
            ping_interval: self.ping_interval,
            pong_timeout: self.pong_timeout,
            idle_timeout: None,
        }
    }
}

/// Options of a WebSocket server.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct WsServerOptions {
    /// The bound on one inbound message (and frame).
    pub max_message_bytes: usize,
    /// How often to ping each client; `None` turns keep-alive off.
    pub ping_interval: Option<Duration>,
    /// With keep-alive on, how long a client may stay silent before its connection is closed.
    pub pong_timeout: Duration,
    /// How many connections [`serve`] serves at once (default 256). At the limit a new client
    /// takes the slot of the connection idle longest (no request in flight), which is closed
    /// with 1013; when every connection is busy, further clients wait in the listen backlog.
    pub max_connections: usize,
    /// The bound on one opening handshake.
    pub handshake_timeout: Duration,
    /// How long a connection may go without a message from the client (pings and pongs do not
    /// count) while no request of it is in flight, before it is closed with 1000 (default 10
    /// minutes; `None`: never).
    pub idle_timeout: Option<Duration>,
    /// Which hosts and browser origins may connect (loopback names by default), the same
    /// policy as the Streamable HTTP server's.
    pub host_policy: HostPolicy,
}

impl Default for WsServerOptions {
    fn default() -> Self {
        WsServerOptions {
            max_message_bytes: DEFAULT_MAX_FRAME_BYTES,
            ping_interval: Some(DEFAULT_PING_INTERVAL),
            pong_timeout: DEFAULT_PONG_TIMEOUT,
            max_connections: 256,
            handshake_timeout: Duration::from_secs(10),
            idle_timeout: Some(DEFAULT_IDLE_TIMEOUT),
            host_policy: HostPolicy::loopback(),
        }
    }
}

impl WsServerOptions {
    /// Sets the bound on one inbound message.
    pub fn max_message_bytes(mut self, n: usize) -> Self {
        self.max_message_bytes = n;
        self
    }
    /// Sets the keep-alive: ping every `interval` (`None`: never), close after `timeout` of
    /// silence.
    pub fn keep_alive(mut self, interval: Option<Duration>, timeout: Duration) -> Self {
        self.ping_interval = interval;
        self.pong_timeout = timeout;
        self
    }
    /// Sets how many connections are served at once.
    pub fn max_connections(mut self, n: usize) -> Self {
        self.max_connections = n;
        self
    }
    /// Sets the idle timeout (`None`: never).
    pub fn idle_timeout(mut self, t: Option<Duration>) -> Self {
        self.idle_timeout = t;
        self
    }
    /// Allows a host (and its browser origins); see [`HostPolicy::allow_host`].
    pub fn allow_host(mut self, host: impl AsRef<str>) -> Self {
        self.host_policy = self.host_policy.allow_host(host);
        self
    }
    /// Allows a browser origin; see [`HostPolicy::allow_origin`].
    pub fn allow_origin(mut self, origin: impl Into<String>) -> Self {
        self.host_policy = self.host_policy.allow_origin(origin);
        self
    }
    /// Turns the host and origin checks off (for servers behind a proxy that checks them).
    pub fn allow_any_host(mut self) -> Self {
        self.host_policy = HostPolicy::any();
        self
    }
    /// Sets the host and origin policy.
    pub fn host_policy(mut self, policy: HostPolicy) -> Self {
        self.host_policy = policy;
        self
    }
    fn settings(&self) -> Settings {
        Settings {
            max_message_bytes: self.max_message_bytes,
            ping_interval: self.ping_interval,
            pong_timeout: self.pong_timeout,
            idle_timeout: self.idle_timeout,
        }
    }
}

/// The read buffer of each connection (tungstenite's default is 128 KiB).
const READ_BUFFER_BYTES: usize = 4 * 1024;

/// What both sides of a connection need after the handshake.
#[derive(Debug, Clone, Copy)]
struct Settings {
    max_message_bytes: usize,
    ping_interval: Option<Duration>,
    pong_timeout: Duration,
    /// Server connections: close after this long without a message and without work.
    idle_timeout: Option<Duration>,
}

impl Settings {
    fn ws_config(&self) -> WebSocketConfig {
        // tungstenite allocates its read buffer eagerly (and zero-fills it before the first
        // read), 128 KiB per connection by default: most of an idle connection's memory. 4 KiB
        // reads a typical message, or several, at once; larger ones take more reads into a
        // buffer that grows to the message's length (measured: no change in calls/s, small
        // messages 16 in flight or 64 KiB ones, against 8 KiB).
        WebSocketConfig::default()
            .read_buffer_size(READ_BUFFER_BYTES)
            .max_message_size(Some(self.max_message_bytes))
            .max_frame_size(Some(self.max_message_bytes))
    }
}

// ---------------------------------------------------------------------------------------------
// Client

fn default_tls() -> Arc<rustls::ClientConfig> {
    static TLS: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    TLS.get_or_init(|| {
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        // ring, not aws-lc-rs: purra builds without a C toolchain for aws-lc. rustls 0.23.48
        // deprecated ring's provider for lacking post-quantum key exchange; it stays supported
        // within 0.23, and a caller who wants post-quantum key exchange passes its own
        // `ClientConfig` with `WsClientOptions::tls`.
        #[allow(deprecated)]
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        Arc::new(
            rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .expect("ring supports the default TLS versions")
                .with_root_certificates(roots)
                .with_no_client_auth(),
        )
    })
    .clone()
}

fn describe(url: &str, e: tungstenite::Error) -> Error {
    let why = match e {
        tungstenite::Error::Http(resp) => {
            let body = resp
                .body()
                .as_deref()
                .map(|b| String::from_utf8_lossy(b).trim().to_owned())
                .unwrap_or_default();
            if body.is_empty() {
                format!("HTTP {}", resp.status())
            } else {
                format!("HTTP {}: {body}", resp.status())
            }
        }
        other => other.to_string(),
    };
    Error::Transport(format!("WebSocket connection to {url} failed: {why}"))
}

/// Connects to a WebSocket MCP server at `url` (`ws://` or `wss://`), offering the `mcp`
/// subprotocol, and starts a transport over the connection. Fails with
/// [`Error::Transport`] (with the reason) when the URL is invalid, the connection or the
/// handshake fails, or the server does not select `mcp`.
pub async fn connect(url: &str, options: WsClientOptions) -> Result<Transport, Error> {
    let bad =
        |why: String| Error::Transport(format!("WebSocket connection to {url} failed: {why}"));
    let mut request = url
        .into_client_request()
        .map_err(|e| bad(format!("invalid URL: {e}")))?;
    for (name, value) in &options.headers {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|e| bad(format!("invalid header name {name:?}: {e}")))?;
        let value = HeaderValue::from_str(value)
            .map_err(|e| bad(format!("invalid value for header {name}: {e}")))?;
        request.headers_mut().append(name, value);
    }
    request.headers_mut().insert(
        header::SEC_WEBSOCKET_PROTOCOL,
        HeaderValue::from_static(SUBPROTOCOL),
    );
    let connector = match request.uri().scheme_str() {
        Some("wss") => Connector::Rustls(options.tls.clone().unwrap_or_else(default_tls)),
        Some("ws") => Connector::Plain,
        _ => return Err(bad("invalid URL: the scheme must be ws or wss".into())),
    };
    let settings = options.settings();
    let (ws, response) = timeout(
        options.connect_timeout,
        tokio_tungstenite::connect_async_tls_with_config(
            request,
            Some(settings.ws_config()),
            true,
            Some(connector),
        ),
    )
    .await
    .map_err(|_| bad(format!("timed out after {:?}", options.connect_timeout)))?
    .map_err(|e| describe(url, e))?;
    let selected = response
        .headers()
        .get(header::SEC_WEBSOCKET_PROTOCOL)
        .and_then(|v| v.to_str().ok());
    if selected != Some(SUBPROTOCOL) {
        return Err(bad(format!(
            "the server did not select the {SUBPROTOCOL:?} subprotocol (selected {selected:?})"
        )));
    }
    Ok(start(ws, settings, CancellationToken::new(), None, None))
}

// ---------------------------------------------------------------------------------------------
// Server

fn refuse(status: StatusCode, why: String) -> ErrorResponse {
    let mut resp = ErrorResponse::new(Some(why));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

/// The server's handshake rules: Host and Origin allow-lists (403), the `mcp` subprotocol (400).
// The result type is tungstenite's handshake callback signature.
#[allow(clippy::result_large_err)]
fn check_handshake(
    request: &Request,
    mut response: Response,
    options: &WsServerOptions,
) -> Result<Response, ErrorResponse> {
    let headers = request.headers();
    if let Err(why) = options.host_policy.check(request.uri(), headers) {
        return Err(refuse(StatusCode::FORBIDDEN, format!("purra: {why}")));
    }
    let offered = headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|p| p.trim() == SUBPROTOCOL);
    if !offered {
        return Err(refuse(
            StatusCode::BAD_REQUEST,
            format!("purra: the {SUBPROTOCOL:?} subprotocol is required (Sec-WebSocket-Protocol: {SUBPROTOCOL})"),
        ));
    }
    response.headers_mut().insert(
        header::SEC_WEBSOCKET_PROTOCOL,
        HeaderValue::from_static(SUBPROTOCOL),
    );
    Ok(response)
}

/// Performs the server side of the opening handshake on an accepted stream (plain TCP, or TLS
/// wrapped by the host) and starts a transport over it. Refused handshakes (Host, Origin,
/// subprotocol) are answered with the HTTP error and fail with [`Error::Transport`].
pub async fn accept<S>(stream: S, options: &WsServerOptions) -> Result<Transport, Error>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    accept_with_stop(stream, options, CancellationToken::new(), None).await
}

async fn accept_with_stop<S>(
    stream: S,
    options: &WsServerOptions,
    stop: CancellationToken,
    slot: Option<Arc<SlotGuard>>,
) -> Result<Transport, Error>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let settings = options.settings();
    let mut handshake: Option<http::request::Parts> = None;
    #[allow(clippy::result_large_err)] // tungstenite's callback signature
    let callback = |req: &Request, resp: Response| {
        let checked = check_handshake(req, resp, options);
        if checked.is_ok() {
            let mut parts = http::Request::new(()).into_parts().0;
            parts.method = req.method().clone();
            parts.uri = req.uri().clone();
            parts.version = req.version();
            parts.headers = req.headers().clone();
            handshake = Some(parts);
        }
        checked
    };
    let ws = timeout(
        options.handshake_timeout,
        tokio_tungstenite::accept_hdr_async_with_config(
            stream,
            callback,
            Some(settings.ws_config()),
        ),
    )
    .await
    .map_err(|_| Error::Transport("WebSocket handshake timed out".into()))?
    .map_err(|e| Error::Transport(format!("WebSocket handshake failed: {e}")))?;
    let context: Option<TransportContext> =
        handshake.map(|parts| Arc::new(HttpContext::new(parts, None)) as TransportContext);
    Ok(start(ws, settings, stop, slot, context))
}

/// Serves one already-accepted connection (for hosts that run their own accept loop): the
/// handshake, then `server` over it until the connection closes.
#[cfg(feature = "server")]
pub async fn serve_connection<S>(
    server: &Server,
    stream: S,
    options: &WsServerOptions,
) -> Result<(), Error>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    server.serve(accept(stream, options).await?).await;
    Ok(())
}

/// Accepts WebSocket connections on `listener` and serves each with `server`, at most
/// `options.max_connections` at once, until `shutdown` completes. Then it stops accepting, ends
/// the input of every open connection (in-flight requests may finish; each connection is closed
/// with code 1001) and returns when all of them are closed.
#[cfg(feature = "server")]
pub async fn serve(
    server: Server,
    listener: TcpListener,
    options: WsServerOptions,
    shutdown: impl Future<Output = ()>,
) {
    let options = Arc::new(options);
    let stop = CancellationToken::new();
    let limiter = Limiter::new(options.max_connections);
    let mut tasks = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            _ = limiter.ready() => {}
        };
        let stream = tokio::select! {
            _ = &mut shutdown => break,
            r = listener.accept() => match r {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of descriptors: give up an idle connection's; otherwise back off
                    // instead of spinning.
                    if !(crate::limit::out_of_descriptors(&e) && limiter.shed_one()) {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let slot = Arc::new(limiter.admit().await);
        while tasks.try_join_next().is_some() {}
        let server = server.clone();
        let options = options.clone();
        let stop = stop.clone();
        tasks.spawn(async move {
            // Boxed: the handshake's state (its buffers and futures, about 1 KiB) is freed once
            // it completes instead of sizing the task that lives as long as the connection.
            let accepted =
                Box::pin(accept_with_stop(stream, &options, stop, Some(slot.clone()))).await;
            if let Ok(transport) = accepted {
                let (session, join) = server.start(transport);
                let peer = session.peer().clone();
                slot.set_probe(Box::new(move || peer.has_inflight_requests()));
                let _ = join.await;
            }
        });
    }
    stop.cancel();
    while tasks.join_next().await.is_some() {}
}

// ---------------------------------------------------------------------------------------------
// The connection: a reader task and a writer task around the engine's channels.

/// A close the reader asks the writer to send; the writer hands the sink back afterwards so the
/// reader can finish the connection on the raw stream.
type CloseRequest<S> = (
    CloseFrame,
    oneshot::Sender<SplitSink<WebSocketStream<S>, Message>>,
);

fn start<S>(
    ws: WebSocketStream<S>,
    settings: Settings,
    stop: CancellationToken,
    slot: Option<Arc<SlotGuard>>,
    context: Option<TransportContext>,
) -> Transport
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    // Both sides are queues that allocate as they fill: a tokio channel allocates a block of 32
    // slots up front, which an idle connection never uses.
    let (in_tx, in_rx) = queue::bounded(CHANNEL_CAPACITY);
    let (out_tx, out_rx) = queue::bounded(CHANNEL_CAPACITY);
    let close_write = CancellationToken::new();
    let (ctl_tx, ctl_rx) = oneshot::channel();
    let closing = CancellationToken::new();
    let abort = CancellationToken::new();
    let (sink, stream) = ws.split();
    tokio::spawn(read_frames(
        stream,
        in_tx,
        ctl_tx,
        settings,
        Signals {
            stop: stop.clone(),
            closing: closing.clone(),
            abort: abort.clone(),
        },
        ServerSide { slot, context },
    ));
    tokio::spawn(write_frames(
        sink,
        out_rx,
        close_write.clone(),
        ctl_rx,
        settings,
        Signals {
            stop,
            closing,
            abort,
        },
    ));
    Transport::from_queues(in_rx, out_tx, close_write).labeled("ws", None)
}

/// What the reader of a server connection has besides the stream.
struct ServerSide {
    /// Its place under the connection limit: activity, work in flight, eviction.
    slot: Option<Arc<SlotGuard>>,
    /// The handshake request, attached to every inbound frame.
    context: Option<TransportContext>,
}

/// Signals shared by the reader and the writer of one connection.
struct Signals {
    /// The server is shutting down: end input, let the engine finish, close with 1001.
    stop: CancellationToken,
    /// The writer has finished (it sent a close frame, or failed).
    closing: CancellationToken,
    /// The reader has finished: the writer stops at once.
    abort: CancellationToken,
}

fn close_frame(code: CloseCode, reason: impl Into<Utf8Bytes>) -> CloseFrame {
    CloseFrame {
        code,
        reason: reason.into(),
    }
}

/// Truncates a close reason to the 123 bytes a close frame can carry.
fn short_reason(mut s: String) -> String {
    if s.len() > 123 {
        let mut end = 123;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

async fn read_frames<S>(
    mut stream: SplitStream<WebSocketStream<S>>,
    tx: queue::Sender<Inbound>,
    ctl: oneshot::Sender<CloseRequest<S>>,
    settings: Settings,
    signals: Signals,
    side: ServerSide,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let _abort = signals.abort.clone().drop_guard();
    let evicted = side.slot.as_ref().map(|s| s.evicted().clone());
    let mut last_message = Instant::now();
    let mut tx = Some(tx);
    // Once the peer has sent a close frame or input has ended for good, only the end of the
    // stream is awaited, within this deadline.
    let mut drain_until: Option<Instant> = None;
    enum End {
        /// The stream ended (EOF, error, the close handshake completed).
        Ended,
        /// The writer finished; read until the peer's close or the deadline.
        WriterDone,
        /// Ask the writer to close with this frame.
        Close(CloseFrame),
    }
    let end = loop {
        let silence = match (settings.ping_interval, drain_until) {
            (_, Some(d)) => Some(d),
            (Some(_), None) => Some(Instant::now() + settings.pong_timeout),
            (None, None) => None,
        };
        let idle_at = match (settings.idle_timeout, drain_until) {
            (Some(idle), None) => Some(last_message + idle),
            _ => None,
        };
        let next = tokio::select! {
            biased;
            _ = signals.stop.cancelled(), if tx.is_some() => {
                tx = None;
                continue;
            }
            _ = signals.closing.cancelled() => break End::WriterDone,
            _ = cancelled(evicted.as_ref()), if drain_until.is_none() => {
                break End::Close(close_frame(
                    CloseCode::Again,
                    "purra: the server is at its connection limit and closed this idle connection",
                ));
            }
            _ = sleep_until(idle_at.unwrap_or_else(Instant::now)), if idle_at.is_some() => {
                if side.slot.as_ref().is_some_and(|s| s.is_busy()) {
                    // A request is still being handled: idle only once it is done.
                    last_message = Instant::now();
                    continue;
                }
                break End::Close(close_frame(
                    CloseCode::Normal,
                    format!("purra: idle for {:?}", settings.idle_timeout.unwrap_or_default()),
                ));
            }
            _ = sleep_until(silence.unwrap_or_else(Instant::now)), if silence.is_some() => {
                if drain_until.is_some() {
                    break End::Ended;
                }
                break End::Close(close_frame(
                    CloseCode::Error,
                    format!("purra: keep-alive timeout: no frame for {:?}", settings.pong_timeout),
                ));
            }
            next = stream.next() => next,
        };
        match next {
            None => break End::Ended,
            Some(Ok(Message::Text(text))) => {
                last_message = Instant::now();
                if let Some(slot) = &side.slot {
                    slot.touch();
                }
                if let Some(sender) = &tx {
                    let frame = Bytes::from(text);
                    let inbound = match &side.context {
                        Some(context) => Inbound::FrameWithContext {
                            frame,
                            context: context.clone(),
                        },
                        None => Inbound::Frame(frame),
                    };
                    if sender.send(inbound).await.is_err() {
                        tx = None;
                    }
                }
            }
            Some(Ok(Message::Binary(_))) => {
                break End::Close(close_frame(CloseCode::Unsupported, BINARY_FRAME_REASON))
            }
            Some(Ok(Message::Close(_))) => {
                // tungstenite queues the close reply; reading on flushes it and ends the stream.
                tx = None;
                drain_until.get_or_insert(Instant::now() + CLOSE_TIMEOUT);
            }
            Some(Ok(_)) => {} // ping (answered by tungstenite), pong, raw frame: the peer is alive
            Some(Err(tungstenite::Error::Capacity(e))) => {
                let why = match e {
                    CapacityError::MessageTooLong { size, max_size } => {
                        format!("purra: message too big: {size} bytes, the limit is {max_size}")
                    }
                    other => format!("purra: message too big: {other}"),
                };
                break End::Close(close_frame(CloseCode::Size, short_reason(why)));
            }
            Some(Err(tungstenite::Error::Utf8(_))) => {
                break End::Close(close_frame(
                    CloseCode::Invalid,
                    "purra: text frame is not valid UTF-8",
                ))
            }
            Some(Err(tungstenite::Error::Protocol(e))) => {
                break End::Close(close_frame(
                    CloseCode::Protocol,
                    short_reason(format!("purra: WebSocket protocol error: {e}")),
                ))
            }
            Some(Err(e)) => {
                if let Some(sender) = tx.take() {
                    let _ = sender
                        .send(Inbound::Failed(format!("WebSocket read failed: {e}")))
                        .await;
                }
                break End::Ended;
            }
        }
    };
    // End of input for the engine.
    drop(tx);
    match end {
        End::Ended => {}
        End::WriterDone => {
            let deadline = Instant::now() + CLOSE_TIMEOUT;
            while let Ok(Some(Ok(_))) = timeout_at(deadline, stream.next()).await {}
        }
        End::Close(frame) => {
            let deadline = Instant::now() + CLOSE_TIMEOUT;
            let (back_tx, back_rx) = oneshot::channel();
            if ctl.send((frame, back_tx)).is_err() {
                return;
            }
            let Ok(Ok(sink)) = timeout_at(deadline, back_rx).await else {
                return;
            };
            let Ok(mut ws) = stream.reunite(sink) else {
                return;
            };
            // The stream may be mid-frame (an oversized message): finish on the raw bytes. Send
            // FIN after the close frame, then read (and discard) until the peer closes, so the
            // socket is not reset with unread data and the close frame reaches the peer.
            let raw = ws.get_mut();
            let _ = timeout_at(deadline, raw.shutdown()).await;
            let mut buf = vec![0u8; 16 * 1024];
            while let Ok(Ok(n)) = timeout_at(deadline, raw.read(&mut buf)).await {
                if n == 0 {
                    break;
                }
            }
        }
    }
}

/// Runs `f` unless `abort` fires first.
async fn unless<F: Future>(abort: &CancellationToken, f: F) -> Option<F::Output> {
    tokio::select! {
        biased;
        _ = abort.cancelled() => None,
        r = f => Some(r),
    }
}

/// Runs a write unless `abort` fires first, or the engine is done (`close`) and the write has
/// not finished `CLOSE_TIMEOUT` later: a peer that stopped reading cannot hold the connection.
async fn write_unless<F: Future>(
    abort: &CancellationToken,
    close: &CancellationToken,
    f: F,
) -> Option<F::Output> {
    let stuck = async {
        close.cancelled().await;
        tokio::time::sleep(CLOSE_TIMEOUT).await;
    };
    tokio::select! {
        biased;
        _ = abort.cancelled() => None,
        r = f => Some(r),
        _ = stuck => None,
    }
}

/// Resolves when `token` is cancelled; never without one.
async fn cancelled(token: Option<&CancellationToken>) {
    match token {
        Some(t) => t.cancelled().await,
        None => std::future::pending().await,
    }
}

async fn tick(ping: &mut Option<Interval>) {
    match ping {
        Some(i) => {
            i.tick().await;
        }
        None => std::future::pending().await,
    }
}

fn text(m: Outbound) -> Message {
    match String::from_utf8(m.frame) {
        Ok(t) => Message::Text(t.into()),
        Err(e) => Message::Text(String::from_utf8_lossy(e.as_bytes()).into_owned().into()),
    }
}

async fn write_frames<S>(
    mut sink: SplitSink<WebSocketStream<S>, Message>,
    mut rx: queue::Receiver<Outbound>,
    close: CancellationToken,
    mut ctl: oneshot::Receiver<CloseRequest<S>>,
    settings: Settings,
    signals: Signals,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let _closing = signals.closing.clone().drop_guard();
    let abort = &signals.abort;
    let mut ping = settings.ping_interval.map(|d| {
        let mut i = tokio::time::interval_at(Instant::now() + d, d);
        i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        i
    });
    loop {
        tokio::select! {
            biased;
            _ = abort.cancelled() => return,
            // Either arm returns, so the one-shot receiver is never polled after it resolved.
            req = &mut ctl => {
                if let Ok((frame, back)) = req {
                    let send = timeout(CLOSE_TIMEOUT, sink.send(Message::Close(Some(frame))));
                    if unless(abort, send).await.is_some() {
                        let _ = back.send(sink);
                    }
                }
                return;
            }
            m = rx.recv() => {
                let Some(m) = m else { break };
                let batch = async {
                    sink.feed(text(m)).await?;
                    while let Some(m) = rx.try_recv() {
                        sink.feed(text(m)).await?;
                    }
                    sink.flush().await
                };
                match write_unless(abort, &close, batch).await {
                    Some(Ok(())) => {}
                    _ => return,
                }
            }
            _ = close.cancelled() => break,
            _ = tick(&mut ping) => {
                match write_unless(abort, &close, sink.send(Message::Ping(Bytes::new()))).await {
                    Some(Ok(())) => {}
                    _ => return,
                }
            }
        }
    }
    // The engine is done: write what is queued, then close.
    let code = if signals.stop.is_cancelled() {
        CloseCode::Away
    } else {
        CloseCode::Normal
    };
    let finish = async {
        while let Some(m) = rx.try_recv() {
            sink.feed(text(m)).await?;
        }
        sink.send(Message::Close(Some(close_frame(code, "")))).await
    };
    let _ = unless(abort, timeout(CLOSE_TIMEOUT, finish)).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_tungstenite::tungstenite::protocol::Role;

    fn settings(max: usize, ping: Option<Duration>, timeout: Duration) -> Settings {
        Settings {
            max_message_bytes: max,
            ping_interval: ping,
            pong_timeout: timeout,
            idle_timeout: None,
        }
    }

    /// A purra transport (server role) and a raw tungstenite client on the other end of a pipe.
    async fn pair(s: Settings) -> (Transport, WebSocketStream<tokio::io::DuplexStream>) {
        let (a, b) = tokio::io::duplex(1 << 20);
        let server = WebSocketStream::from_raw_socket(a, Role::Server, Some(s.ws_config())).await;
        let client = WebSocketStream::from_raw_socket(b, Role::Client, None).await;
        (
            start(server, s, CancellationToken::new(), None, None),
            client,
        )
    }

    async fn next_close(peer: &mut WebSocketStream<tokio::io::DuplexStream>) -> CloseFrame {
        loop {
            match timeout(Duration::from_secs(5), peer.next()).await {
                Ok(Some(Ok(Message::Close(Some(f))))) => return f,
                Ok(Some(Ok(_))) => continue,
                other => panic!("expected a close frame, got {other:?}"),
            }
        }
    }

    async fn input_ends(t: &mut Transport) {
        match timeout(Duration::from_secs(5), t.inbound.recv()).await {
            Ok(None) => {}
            other => panic!("expected end of input, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn text_frames_both_ways() {
        let (mut t, mut peer) = pair(settings(1024, None, DEFAULT_PONG_TIMEOUT)).await;
        peer.send(Message::text(r#"{"jsonrpc":"2.0","method":"x"}"#))
            .await
            .unwrap();
        match t.inbound.recv().await {
            Some(Inbound::Frame(b)) => assert_eq!(&b[..], br#"{"jsonrpc":"2.0","method":"x"}"#),
            other => panic!("got {other:?}"),
        }
        t.outbound
            .send(Outbound {
                frame: br#"{"jsonrpc":"2.0","id":1,"result":{}}"#.to_vec(),
                ..Outbound::default()
            })
            .await
            .unwrap();
        match peer.next().await {
            Some(Ok(Message::Text(s))) => {
                assert_eq!(s.as_str(), r#"{"jsonrpc":"2.0","id":1,"result":{}}"#)
            }
            other => panic!("got {other:?}"),
        }
        // The engine closing the write side sends a normal close after what is queued.
        t.outbound
            .send(Outbound {
                frame: b"{}".to_vec(),
                ..Outbound::default()
            })
            .await
            .unwrap();
        t.outbound.close();
        match peer.next().await {
            Some(Ok(Message::Text(s))) => assert_eq!(s.as_str(), "{}"),
            other => panic!("got {other:?}"),
        }
        assert_eq!(next_close(&mut peer).await.code, CloseCode::Normal);
    }

    #[tokio::test]
    async fn binary_frame_closes_with_1003() {
        let (mut t, mut peer) = pair(settings(1024, None, DEFAULT_PONG_TIMEOUT)).await;
        peer.send(Message::binary(b"{}".to_vec())).await.unwrap();
        let f = next_close(&mut peer).await;
        assert_eq!(f.code, CloseCode::Unsupported);
        assert_eq!(f.reason.as_str(), BINARY_FRAME_REASON);
        input_ends(&mut t).await;
    }

    #[tokio::test]
    async fn oversized_message_closes_with_1009() {
        let (mut t, mut peer) = pair(settings(64, None, DEFAULT_PONG_TIMEOUT)).await;
        peer.send(Message::text("x".repeat(65))).await.unwrap();
        let f = next_close(&mut peer).await;
        assert_eq!(f.code, CloseCode::Size);
        assert!(
            f.reason.as_str().starts_with("purra: message too big"),
            "{f:?}"
        );
        input_ends(&mut t).await;
    }

    #[tokio::test]
    async fn message_at_the_limit_is_delivered() {
        let (mut t, mut peer) = pair(settings(64, None, DEFAULT_PONG_TIMEOUT)).await;
        peer.send(Message::text("y".repeat(64))).await.unwrap();
        match t.inbound.recv().await {
            Some(Inbound::Frame(b)) => assert_eq!(b.len(), 64),
            other => panic!("got {other:?}"),
        }
    }

    #[tokio::test]
    async fn keep_alive_timeout_closes_a_silent_connection() {
        let s = settings(
            1024,
            Some(Duration::from_millis(50)),
            Duration::from_millis(300),
        );
        let (mut t, mut peer) = pair(s).await;
        // The peer does not read, so it answers no ping: input ends after the timeout.
        let started = Instant::now();
        input_ends(&mut t).await;
        assert!(started.elapsed() >= Duration::from_millis(300));
        // What the peer then reads: pings, then the close.
        let f = next_close(&mut peer).await;
        assert_eq!(f.code, CloseCode::Error);
        assert!(f.reason.as_str().contains("keep-alive timeout"), "{f:?}");
    }

    #[tokio::test]
    async fn keep_alive_pongs_keep_a_connection_open() {
        let s = settings(
            1024,
            Some(Duration::from_millis(50)),
            Duration::from_millis(400),
        );
        let (mut t, mut peer) = pair(s).await;
        // The peer reads (so tungstenite answers the pings) but sends nothing else.
        let reading = tokio::spawn(async move {
            let mut pings = 0;
            while let Ok(Some(Ok(m))) = timeout(Duration::from_millis(2000), peer.next()).await {
                if m.is_ping() {
                    pings += 1;
                }
            }
            pings
        });
        // Three times the timeout without any frame but pongs: still open.
        let r = timeout(Duration::from_millis(1200), t.inbound.recv()).await;
        assert!(r.is_err(), "input ended early: {r:?}");
        t.outbound.close();
        assert!(reading.await.unwrap() >= 5);
    }
}
