//! The Streamable HTTP client transport: each outbound message is a POST; responses come back as
//! JSON or as an SSE stream; a lost stream is resumed with GET and `Last-Event-ID`; the session's
//! standalone GET stream is opened when the server offers one.
//!
//! Error kinds stay distinct: a connection that cannot be made is [`Error::Transport`], an error
//! status is [`Error::Http`], and a response that is not valid MCP over HTTP is
//! [`Error::InvalidResponse`]. They fail the one request whose POST failed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use reqwest::header::{
    HeaderMap, HeaderName, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE,
};
use serde_json::value::RawValue;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::sse::{Item, Parser};
use super::{PROTOCOL_VERSION_HEADER, SESSION_ID_HEADER};
use crate::error::Error;
use crate::jsonrpc::{decode_frame, Frame, Message, RequestId};
use crate::session::BoxFuture;
use crate::transport::{Inbound, Outbound, Transport, CHANNEL_CAPACITY, DEFAULT_MAX_FRAME_BYTES};
use crate::types::{methods, CancelledParams};

/// Supplies headers that change over a connection's life (a refreshed token).
pub type HeaderProvider = Arc<dyn Fn() -> Vec<(String, String)> + Send + Sync>;

/// What the server answered when it refused a request with 401 or 403 (see
/// [`HttpAuth::challenged`]).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct AuthChallenge<'a> {
    /// 401 or 403.
    pub status: u16,
    /// The `WWW-Authenticate` header, if any.
    pub www_authenticate: Option<&'a str>,
    /// The `Authorization` value the refused request carried, if any.
    pub sent: Option<&'a str>,
    /// How many times this request was refused and retried before.
    pub attempt: u32,
}

/// Authorization of a Streamable HTTP connection's requests: a bearer token on every request,
/// and what to do when the server refuses one. [`auth::OAuthClient`](crate::auth::OAuthClient)
/// implements it (OAuth 2.1, the `auth` feature). The futures are boxed so `Arc<dyn HttpAuth>`
/// works.
pub trait HttpAuth: Send + Sync + 'static {
    /// The `Authorization` header value for the next request (`Bearer ...`), or none.
    fn authorization(&self) -> BoxFuture<'_, Result<Option<String>, Error>>;
    /// The server refused a request (401, or 403): `Ok` to send it again with a new
    /// [`authorization`](Self::authorization), `Err` to fail the request with that error.
    fn challenged<'a>(&'a self, challenge: AuthChallenge<'a>) -> BoxFuture<'a, Result<(), Error>>;
}

/// The bound on refusals one HTTP request goes through, whatever its [`HttpAuth`] says.
const MAX_AUTH_ROUNDS: u32 = 8;

/// Options of a Streamable HTTP connection.
///
/// The HTTP client is purra's own by default (rustls with the built-in webpki roots, the
/// `connect_timeout`); give [`root_certificate`](Self::root_certificate) to trust a private CA,
/// or [`http_client`](Self::http_client) to bring your own `reqwest::Client` (proxies, client
/// certificates, your own timeouts and roots):
///
/// ```no_run
/// use purra_protocol::http::reqwest;
/// use purra_protocol::{Client, ClientOptions, HttpClientOptions};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// // Trust the company CA and nothing else.
/// let ca = reqwest::Certificate::from_pem(&std::fs::read("company-ca.pem")?)?;
/// let http = HttpClientOptions::default()
///     .root_certificate(ca)
///     .built_in_roots(false);
/// let conn = Client::connect_http("https://mcp.internal/mcp", http, ClientOptions::default()).await?;
///
/// // Or a client of your own: a proxy, a client certificate, your timeouts.
/// let client = reqwest::Client::builder()
///     .proxy(reqwest::Proxy::https("http://proxy.internal:3128")?)
///     .build()?;
/// let http = HttpClientOptions::default().http_client(client);
/// let other = Client::connect_http("https://mcp.example/mcp", http, ClientOptions::default()).await?;
/// # drop((conn, other)); Ok(()) }
/// ```
#[derive(Clone)]
pub struct HttpClientOptions {
    /// Headers sent with every request of this connection (for example `Authorization`).
    pub headers: Vec<(String, String)>,
    /// Called before every HTTP request for headers that change (a refreshed token).
    pub dynamic_headers: Option<HeaderProvider>,
    /// Authorization (OAuth): the bearer token of every request, and the answer to 401/403.
    pub auth: Option<Arc<dyn HttpAuth>>,
    /// The bound on one response body or one SSE event.
    pub max_frame_bytes: usize,
    /// How long to wait before resuming a stream when the server gave no `retry` hint.
    pub default_retry: Duration,
    /// The shortest wait before resuming a stream, whatever `retry` says (`retry: 0` cannot make
    /// the client spin).
    pub min_retry: Duration,
    /// The longest wait before resuming a stream, whatever `retry` says.
    pub max_retry: Duration,
    /// How many times in a row a stream is resumed without delivering a message before the
    /// client gives up on it (the request it carries then fails).
    pub max_reconnects: u32,
    /// Whether to open the session's standalone GET stream after initialization.
    pub open_get_stream: bool,
    /// Timeout for connecting (not for the whole response: streams may be long). Applies to
    /// the client purra builds, not to one given with [`http_client`](Self::http_client).
    pub connect_timeout: Duration,
    /// How long a POST carrying a notification or a response may take (servers answer them
    /// 202 at once); one that stalls is abandoned, so it cannot hold back what follows.
    pub message_timeout: Duration,
    /// How many times in a row the client re-initializes a session the server forgot (404)
    /// before it fails requests with the 404 instead.
    pub max_reinitializations: u32,
    /// The HTTP client to use; when `None`, purra builds one from `connect_timeout`,
    /// `root_certificates` and `built_in_roots`.
    pub http_client: Option<reqwest::Client>,
    /// Extra TLS root certificates trusted by the client purra builds.
    pub root_certificates: Vec<reqwest::Certificate>,
    /// Whether the client purra builds trusts the built-in (webpki) roots too (default true).
    pub built_in_roots: bool,
    /// Which HTTP transport [`Client::connect_http`](crate::Client::connect_http) speaks
    /// (default [`HttpTransport::Auto`]).
    #[cfg(feature = "legacy-sse")]
    pub transport: HttpTransport,
}

/// Which HTTP transport a connection speaks.
#[cfg(feature = "legacy-sse")]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum HttpTransport {
    /// Streamable HTTP first; when its `initialize` POST is answered with a 4xx status other
    /// than 401 and 403 (an HTTP+SSE server answers 404 or 405), a GET of the same URL for the
    /// HTTP+SSE transport of 2024-11-05, as the specification's backwards-compatibility section
    /// describes. A server that speaks Streamable HTTP is never downgraded.
    #[default]
    Auto,
    /// Streamable HTTP only.
    Streamable,
    /// The HTTP+SSE transport of 2024-11-05 only (the URL is the event stream's).
    Sse,
}

#[cfg(feature = "legacy-sse")]
impl std::fmt::Display for HttpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HttpTransport::Auto => "auto",
            HttpTransport::Streamable => "streamable-http",
            HttpTransport::Sse => "sse",
        })
    }
}

impl std::fmt::Debug for HttpClientOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClientOptions")
            .field(
                "headers",
                &self.headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .field("auth", &self.auth.is_some())
            .field("max_frame_bytes", &self.max_frame_bytes)
            .field("default_retry", &self.default_retry)
            .field("min_retry", &self.min_retry)
            .field("max_retry", &self.max_retry)
            .field("max_reconnects", &self.max_reconnects)
            .field("open_get_stream", &self.open_get_stream)
            .field("connect_timeout", &self.connect_timeout)
            .field("message_timeout", &self.message_timeout)
            .field("max_reinitializations", &self.max_reinitializations)
            .field("http_client", &self.http_client.is_some())
            .field("root_certificates", &self.root_certificates.len())
            .field("built_in_roots", &self.built_in_roots)
            .finish_non_exhaustive()
    }
}

impl Default for HttpClientOptions {
    fn default() -> Self {
        HttpClientOptions {
            headers: Vec::new(),
            dynamic_headers: None,
            auth: None,
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            default_retry: Duration::from_secs(1),
            min_retry: Duration::from_millis(100),
            max_retry: Duration::from_secs(30),
            max_reconnects: 5,
            open_get_stream: true,
            connect_timeout: Duration::from_secs(10),
            message_timeout: Duration::from_secs(10),
            max_reinitializations: 3,
            http_client: None,
            root_certificates: Vec::new(),
            built_in_roots: true,
            #[cfg(feature = "legacy-sse")]
            transport: HttpTransport::Auto,
        }
    }
}

impl HttpClientOptions {
    /// Adds a header sent with every request.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
    /// Authorizes every request with `auth` (an [`OAuthClient`](crate::auth::OAuthClient)):
    /// its bearer token goes on each request, and a 401 or 403 goes to it before the request
    /// is sent again or fails.
    pub fn auth(mut self, auth: impl HttpAuth) -> Self {
        self.auth = Some(Arc::new(auth));
        self
    }
    /// Uses `client` for every HTTP request of the connection (its TLS roots, proxies and
    /// timeouts); `connect_timeout`, `root_certificates` and `built_in_roots` are then unused.
    pub fn http_client(mut self, client: reqwest::Client) -> Self {
        self.http_client = Some(client);
        self
    }
    /// Trusts `cert` as a TLS root, besides the built-in roots unless
    /// [`built_in_roots`](Self::built_in_roots) is false.
    pub fn root_certificate(mut self, cert: reqwest::Certificate) -> Self {
        self.root_certificates.push(cert);
        self
    }
    /// Whether the built-in (webpki) roots are trusted (default true).
    pub fn built_in_roots(mut self, yes: bool) -> Self {
        self.built_in_roots = yes;
        self
    }
    /// Which HTTP transport to speak (default [`HttpTransport::Auto`]).
    #[cfg(feature = "legacy-sse")]
    pub fn transport(mut self, transport: HttpTransport) -> Self {
        self.transport = transport;
        self
    }

    /// The wait before resuming when the server asked for `wanted`, within the bounds.
    fn retry(&self, wanted: Duration) -> Duration {
        wanted.clamp(self.min_retry, self.max_retry.max(self.min_retry))
    }

    pub(crate) fn build_client(&self) -> Result<reqwest::Client, Error> {
        if let Some(client) = &self.http_client {
            return Ok(client.clone());
        }
        let mut builder = reqwest::Client::builder()
            .connect_timeout(self.connect_timeout)
            .tls_built_in_root_certs(self.built_in_roots);
        for cert in &self.root_certificates {
            builder = builder.add_root_certificate(cert.clone());
        }
        builder
            .build()
            .map_err(|e| Error::Transport(format!("HTTP client: {}", error_chain(&e))))
    }
}

struct State {
    http: reqwest::Client,
    url: reqwest::Url,
    options: HttpClientOptions,
    session_id: Mutex<Option<String>>,
    protocol_version: Mutex<Option<String>>,
    inbound: mpsc::Sender<Inbound>,
    /// The client's `initialize` and `notifications/initialized`, replayed after a 404.
    init_frame: Mutex<Option<Vec<u8>>>,
    initialized_frame: Mutex<Option<Vec<u8>>>,
    get_started: AtomicBool,
    reinit_seq: AtomicU64,
    /// One re-initialization at a time: requests that meet the same 404 wait for it and retry.
    reinit_lock: tokio::sync::Mutex<()>,
    /// Re-initializations since a POST last succeeded.
    reinits_in_a_row: AtomicU32,
    /// Each request's POST (and the stream that answers it), cancelled when the engine gives up
    /// on the request (`notifications/cancelled` goes out): reading stops, the stream is dropped.
    requests: Mutex<HashMap<RequestId, CancellationToken>>,
    closed: CancellationToken,
    /// 2026-07-28 requests in flight: closing a request's stream is its cancellation.
    modern_inflight: Mutex<std::collections::HashMap<RequestId, tokio::task::AbortHandle>>,
}

/// Whether an outbound message is a 2026-07-28 request (its headers name a modern revision).
fn is_modern(out: &Outbound) -> bool {
    out.headers().iter().any(|(k, v)| {
        k.eq_ignore_ascii_case(PROTOCOL_VERSION_HEADER) && crate::modern::is_modern(v)
    })
}

/// The request a `notifications/cancelled` names.
fn cancelled_request(frame: &[u8]) -> Option<RequestId> {
    #[derive(serde::Deserialize)]
    struct N {
        params: crate::types::CancelledParams,
    }
    serde_json::from_slice::<N>(frame)
        .ok()
        .map(|n| n.params.request_id)
}

/// Starts a Streamable HTTP transport to `url` (`http://` or `https://`). Nothing is sent until
/// the engine writes its first message (`initialize`).
pub fn connect(url: &str, options: HttpClientOptions) -> Result<Transport, Error> {
    let url = reqwest::Url::parse(url)
        .map_err(|e| Error::Transport(format!("invalid URL {url:?}: {e}")))?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(Error::Transport(format!("not an http(s) URL: {url}")));
    }
    let http = options.build_client()?;
    let (in_tx, in_rx) = mpsc::channel(CHANNEL_CAPACITY);
    let (out_tx, out_rx) = mpsc::channel(CHANNEL_CAPACITY);
    let close = CancellationToken::new();
    let state = Arc::new(State {
        http,
        url,
        options,
        session_id: Mutex::new(None),
        protocol_version: Mutex::new(None),
        inbound: in_tx,
        init_frame: Mutex::new(None),
        initialized_frame: Mutex::new(None),
        get_started: AtomicBool::new(false),
        reinit_seq: AtomicU64::new(0),
        reinit_lock: tokio::sync::Mutex::new(()),
        reinits_in_a_row: AtomicU32::new(0),
        requests: Mutex::new(HashMap::new()),
        closed: CancellationToken::new(),
        modern_inflight: Mutex::new(std::collections::HashMap::new()),
    });
    tokio::spawn(write_loop(state, out_rx, close.clone()));
    Ok(Transport::from_channels(in_rx, out_tx, close).labeled("http", None))
}

/// What the write loop needs to know of an outbound message.
fn classify(frame: &[u8]) -> (Option<RequestId>, Option<String>, Option<RequestId>) {
    match decode_frame(frame) {
        Frame::Single(Ok(Message::Request { id, method, .. })) => (Some(id), Some(method), None),
        Frame::Single(Ok(Message::Notification { method, params })) => {
            let cancelled = (method == methods::CANCELLED)
                .then(|| crate::jsonrpc::from_params::<CancelledParams>(params.as_deref()).ok())
                .flatten()
                .map(|p| p.request_id);
            (None, Some(method), cancelled)
        }
        _ => (None, None, None),
    }
}

async fn write_loop(state: Arc<State>, mut rx: mpsc::Receiver<Outbound>, close: CancellationToken) {
    // Notifications and responses go out in order on their own task, each POST bounded by
    // `message_timeout`: one that stalls holds back neither requests nor, for long, what follows.
    let (ordered_tx, ordered_rx) = mpsc::channel::<Outbound>(CHANNEL_CAPACITY);
    tokio::spawn(send_in_order(state.clone(), ordered_rx));
    loop {
        let next = tokio::select! {
            biased;
            m = rx.recv() => m,
            _ = close.cancelled() => None,
        };
        let Some(out) = next else { break };
        let (request, method, cancelled) = classify(&out.frame);
        if let Some(id) = cancelled {
            // The engine gave up on this request: stop its POST and its stream now, whatever
            // happens to the notification.
            let token = state.requests.lock().expect("requests lock").remove(&id);
            if let Some(token) = token {
                token.cancel();
            }
        }
        match (request, method.as_deref()) {
            (Some(id), _) if is_modern(&out) => {
                // One POST per request, no session; the task is aborted to cancel it.
                let task_state = state.clone();
                let task_id = id.clone();
                let task = tokio::spawn(async move {
                    let state = task_state;
                    let id = task_id;
                    let r = post_modern(&state, &out.frame, out.headers(), &id).await;
                    state
                        .modern_inflight
                        .lock()
                        .expect("inflight lock")
                        .remove(&id);
                    if let Err(error) = r {
                        let _ = state
                            .inbound
                            .send(Inbound::RequestFailed { id, error })
                            .await;
                    }
                });
                let mut inflight = state.modern_inflight.lock().expect("inflight lock");
                if !task.is_finished() {
                    inflight.insert(id, task.abort_handle());
                }
            }
            (None, Some(methods::CANCELLED))
                if cancelled_request(&out.frame).is_some_and(|id| {
                    state
                        .modern_inflight
                        .lock()
                        .expect("inflight lock")
                        .contains_key(&id)
                }) =>
            {
                // 2026-07-28 over HTTP: closing the request's stream is the cancellation.
                if let Some(id) = cancelled_request(&out.frame) {
                    let task = state
                        .modern_inflight
                        .lock()
                        .expect("inflight lock")
                        .remove(&id);
                    if let Some(t) = task {
                        t.abort();
                    }
                }
            }
            (Some(id), m) => {
                let is_init = m == Some(methods::INITIALIZE);
                if is_init {
                    *state.init_frame.lock().expect("init lock") = Some(out.frame.clone());
                }
                let token = CancellationToken::new();
                state
                    .requests
                    .lock()
                    .expect("requests lock")
                    .insert(id.clone(), token.clone());
                let task = request_post(state.clone(), out, id, is_init, token);
                if is_init {
                    // The session id must be known before anything else is sent.
                    task.await;
                } else {
                    tokio::spawn(task);
                }
            }
            (None, Some(methods::INITIALIZED)) => {
                *state.initialized_frame.lock().expect("init lock") = Some(out.frame.clone());
                // Requests wait for this one: the server may refuse them before it.
                let _ = tokio::time::timeout(
                    state.options.message_timeout,
                    post(&state, &out.frame, out.headers(), None, false),
                )
                .await;
                if state.options.open_get_stream && !state.get_started.swap(true, Ordering::SeqCst)
                {
                    // Open the standalone stream before sending anything else: a server may send
                    // its requests (elicitation, sampling) there as soon as it has a request of
                    // ours, and a server with no stream open to take them drops them.
                    let opened = tokio::select! {
                        r = tokio::time::timeout(state.options.connect_timeout, resume(&state, None)) => r,
                        _ = close.cancelled() => break,
                    };
                    match opened {
                        Ok(Err(_)) => {} // the server offers no standalone stream
                        Ok(Ok(resp)) => {
                            tokio::spawn(standalone_stream(state.clone(), Some(resp)));
                        }
                        Err(_) => {
                            tokio::spawn(standalone_stream(state.clone(), None));
                        }
                    }
                }
            }
            (None, _) => {
                if ordered_tx.send(out).await.is_err() {
                    break;
                }
            }
        }
    }
    state.closed.cancel();
    let session = state.session_id.lock().expect("session lock").clone();
    if let Some(id) = session {
        let close = async {
            let mut headers = base_headers(&state, &[]);
            set_authorization(
                &mut headers,
                authorization(&state.options).await.ok().flatten(),
            );
            let req = state
                .http
                .delete(state.url.clone())
                .headers(headers)
                .header(SESSION_ID_HEADER, id);
            let _ = req.send().await;
        };
        let _ = tokio::time::timeout(Duration::from_secs(2), close).await;
    }
}

/// One request's POST and whatever answers it, until the answer is in, the POST fails (which
/// fails the request), or the engine gives up on the request (`token`).
async fn request_post(
    state: Arc<State>,
    out: Outbound,
    id: RequestId,
    is_init: bool,
    token: CancellationToken,
) {
    let result = tokio::select! {
        r = post(&state, &out.frame, out.headers(), Some(&id), is_init) => r,
        _ = token.cancelled() => Ok(()),
    };
    state.requests.lock().expect("requests lock").remove(&id);
    if let Err(error) = result {
        let _ = state
            .inbound
            .send(Inbound::RequestFailed { id, error })
            .await;
    }
}

/// Sends notifications and responses in order; a failure has no request to fail.
async fn send_in_order(state: Arc<State>, mut rx: mpsc::Receiver<Outbound>) {
    while let Some(out) = rx.recv().await {
        tokio::select! {
            _ = tokio::time::timeout(
                state.options.message_timeout,
                post(&state, &out.frame, out.headers(), None, false),
            ) => {}
            _ = state.closed.cancelled() => return,
        }
    }
}

/// The connection's configured headers (fixed, dynamic, then `extra`), valid ones only.
pub(crate) fn option_headers(options: &HttpClientOptions, extra: &[(String, String)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    let dynamic = options
        .dynamic_headers
        .as_ref()
        .map(|f| f())
        .unwrap_or_default();
    for (k, v) in options
        .headers
        .iter()
        .chain(dynamic.iter())
        .chain(extra.iter())
    {
        if let (Ok(k), Ok(v)) = (
            HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(v),
        ) {
            h.insert(k, v);
        }
    }
    h
}

fn base_headers(state: &State, extra: &[(String, String)]) -> HeaderMap {
    let mut h = option_headers(&state.options, extra);
    if let Some(v) = state
        .protocol_version
        .lock()
        .expect("version lock")
        .as_deref()
    {
        if let Ok(v) = HeaderValue::from_str(v) {
            h.insert(PROTOCOL_VERSION_HEADER, v);
        }
    }
    h
}

/// The `Authorization` value for the next request, when the connection has [`HttpAuth`].
pub(crate) async fn authorization(options: &HttpClientOptions) -> Result<Option<String>, Error> {
    match &options.auth {
        Some(auth) => auth.authorization().await,
        None => Ok(None),
    }
}

/// Puts `value` in `headers` as `Authorization`, marked sensitive (never logged).
pub(crate) fn set_authorization(headers: &mut HeaderMap, value: Option<String>) {
    if let Some(mut v) = value.and_then(|v| HeaderValue::from_str(&v).ok()) {
        v.set_sensitive(true);
        headers.insert(AUTHORIZATION, v);
    }
}

/// After a 401 or 403: whether the connection's [`HttpAuth`] cleared the request to be sent
/// again (`Ok(true)`), or the status stands (`Ok(false)`: no auth, or the bound is reached).
pub(crate) async fn challenged(
    options: &HttpClientOptions,
    resp: &reqwest::Response,
    sent: Option<&str>,
    rounds: &mut u32,
) -> Result<bool, Error> {
    let status = resp.status().as_u16();
    let Some(auth) = &options.auth else {
        return Ok(false);
    };
    if (status != 401 && status != 403) || *rounds >= MAX_AUTH_ROUNDS {
        return Ok(false);
    }
    let www = resp
        .headers()
        .get(WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok());
    auth.challenged(AuthChallenge {
        status,
        www_authenticate: www,
        sent,
        attempt: *rounds,
    })
    .await?;
    *rounds += 1;
    Ok(true)
}

/// Sends one POST of `frame` on the current session; also returns the `Authorization` it
/// carried.
async fn send_post(
    state: &State,
    frame: &[u8],
    extra: &[(String, String)],
    is_init: bool,
) -> Result<(Option<String>, reqwest::Response, Option<String>), Error> {
    let session = state.session_id.lock().expect("session lock").clone();
    let mut headers = base_headers(state, extra);
    if is_init {
        headers.remove(PROTOCOL_VERSION_HEADER);
    }
    let sent = authorization(&state.options).await?;
    set_authorization(&mut headers, sent.clone());
    let mut rb = state
        .http
        .post(state.url.clone())
        .headers(headers)
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "application/json, text/event-stream")
        .body(frame.to_vec());
    if let (Some(id), false) = (&session, is_init) {
        rb = rb.header(SESSION_ID_HEADER, id.as_str());
    }
    let resp = rb
        .send()
        .await
        .map_err(|e| Error::Transport(format!("POST {}: {}", state.url, error_chain(&e))))?;
    Ok((session, resp, sent))
}

/// POSTs one message and delivers what comes back. Retries once after re-initializing when the
/// server has forgotten the session (404).
async fn post(
    state: &Arc<State>,
    frame: &[u8],
    extra: &[(String, String)],
    request: Option<&RequestId>,
    is_init: bool,
) -> Result<(), Error> {
    let mut reinitialized = false;
    let mut auth_rounds = 0;
    loop {
        let (session, resp, sent) = send_post(state, frame, extra, is_init).await?;
        if challenged(&state.options, &resp, sent.as_deref(), &mut auth_rounds).await? {
            continue;
        }
        let status = resp.status();
        if status == reqwest::StatusCode::NOT_FOUND && !is_init && !reinitialized {
            if let Some(stale) = session {
                reinitialized = true;
                recover(state, &stale).await?;
                continue;
            }
        }
        if is_init {
            if let Some(id) = resp
                .headers()
                .get(SESSION_ID_HEADER)
                .and_then(|v| v.to_str().ok())
            {
                *state.session_id.lock().expect("session lock") = Some(id.to_owned());
            }
        }
        if !status.is_success() {
            let body = read_bounded(resp, 1024).await.unwrap_or_default();
            return Err(Error::Http {
                status: status.as_u16(),
                body: String::from_utf8_lossy(&body).into_owned(),
            });
        }
        if !is_init {
            state.reinits_in_a_row.store(0, Ordering::Relaxed);
        }
        if status == reqwest::StatusCode::ACCEPTED || request.is_none() {
            // A notification or a response is answered 202 with no body; whatever a server
            // sends instead answers nothing of ours and is not a message for the engine.
            return Ok(());
        }
        return receive(state, resp, request, is_init, true).await;
    }
}

/// After a 404 on session `stale`: re-initializes once for everyone who met it (the others
/// find a new session and retry), at most `max_reinitializations` times in a row.
async fn recover(state: &Arc<State>, stale: &str) -> Result<(), Error> {
    let _one = state.reinit_lock.lock().await;
    let current = state.session_id.lock().expect("session lock").clone();
    if current.as_deref() != Some(stale) {
        return Ok(());
    }
    let done = state.reinits_in_a_row.load(Ordering::Relaxed);
    if done >= state.options.max_reinitializations {
        return Err(Error::Http {
            status: 404,
            body: format!(
                "the server forgot the session again after {done} re-initializations in a row; not re-initializing"
            ),
        });
    }
    state.reinits_in_a_row.store(done + 1, Ordering::Relaxed);
    reinitialize(state).await
}

/// POSTs one 2026-07-28 request (no session, no replay), authorized like every other POST: its answer is the response, a JSON
/// body or a stream scoped to it; an error status that carries the JSON-RPC error answering it
/// (-32601 is 404, -32602/-32020/-32021/-32022 are 400) is that error, not a transport failure.
async fn post_modern(
    state: &Arc<State>,
    frame: &[u8],
    extra: &[(String, String)],
    request: &RequestId,
) -> Result<(), Error> {
    let mut auth_rounds = 0;
    let resp = loop {
        let mut headers = base_headers(state, extra);
        let sent = authorization(&state.options).await?;
        set_authorization(&mut headers, sent.clone());
        let resp = state
            .http
            .post(state.url.clone())
            .headers(headers)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream")
            .body(frame.to_vec())
            .send()
            .await
            .map_err(|e| Error::Transport(format!("POST {}: {}", state.url, error_chain(&e))))?;
        if !challenged(&state.options, &resp, sent.as_deref(), &mut auth_rounds).await? {
            break resp;
        }
    };
    let status = resp.status();
    if status.is_success() {
        return receive(state, resp, Some(request), false, true).await;
    }
    let body = read_bounded(resp, state.options.max_frame_bytes)
        .await
        .unwrap_or_default();
    if let Frame::Single(Ok(Message::Error { id: Some(id), .. })) = decode_frame(&body) {
        if &id == request {
            let _ = state.inbound.send(Inbound::Frame(Bytes::from(body))).await;
            return Ok(());
        }
    }
    let shown = &body[..body.len().min(1024)];
    Err(Error::Http {
        status: status.as_u16(),
        body: String::from_utf8_lossy(shown).into_owned(),
    })
}

/// An error and its sources, `: `-separated.
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

pub(crate) async fn read_bounded(
    mut resp: reqwest::Response,
    max: usize,
) -> Result<Vec<u8>, Error> {
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| Error::Transport(format!("reading the response: {}", error_chain(&e))))?
    {
        if body.len() + chunk.len() > max {
            body.extend_from_slice(&chunk[..max - body.len()]);
            return Ok(body);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Delivers a successful response: a JSON body or an SSE stream. `forward` is false for the
/// private re-initialization, whose answer the engine must not see.
async fn receive(
    state: &Arc<State>,
    resp: reqwest::Response,
    request: Option<&RequestId>,
    is_init: bool,
    forward: bool,
) -> Result<(), Error> {
    let ct = resp
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .unwrap_or_default();
    let max = state.options.max_frame_bytes;
    match ct.as_str() {
        "application/json" => {
            let mut body = Vec::new();
            let mut resp = resp;
            while let Some(chunk) = resp.chunk().await.map_err(|e| {
                Error::Transport(format!("reading the response: {}", error_chain(&e)))
            })? {
                if body.len() + chunk.len() > max {
                    return Err(Error::ResponseTooLarge {
                        len: body.len() + chunk.len(),
                        limit: max,
                    });
                }
                body.extend_from_slice(&chunk);
            }
            let frames = split_json(&body)?;
            for f in frames {
                note_answer(state, &f, request, is_init);
                if forward {
                    let _ = state.inbound.send(Inbound::Frame(f)).await;
                }
            }
            Ok(())
        }
        "text/event-stream" => read_sse(state, resp, request, is_init, forward).await,
        other => Err(Error::InvalidResponse(format!(
            "unexpected content type {other:?}"
        ))),
    }
}

/// Splits a JSON body into messages (an array is a batch answer).
fn split_json(body: &[u8]) -> Result<Vec<Bytes>, Error> {
    let first = body.iter().find(|b| !b.is_ascii_whitespace()).copied();
    match first {
        Some(b'[') => {
            let items: Vec<&RawValue> = serde_json::from_slice(body)
                .map_err(|e| Error::InvalidResponse(format!("malformed JSON body: {e}")))?;
            Ok(items
                .into_iter()
                .map(|r| Bytes::copy_from_slice(r.get().as_bytes()))
                .collect())
        }
        Some(b'{') => {
            serde_json::from_slice::<serde::de::IgnoredAny>(body)
                .map_err(|e| Error::InvalidResponse(format!("malformed JSON body: {e}")))?;
            Ok(vec![Bytes::copy_from_slice(body)])
        }
        _ => Err(Error::InvalidResponse(
            "the JSON body is not a JSON-RPC message".into(),
        )),
    }
}

/// Whether `frame` answers `request`; records the negotiated version from an initialize answer.
fn note_answer(state: &State, frame: &[u8], request: Option<&RequestId>, is_init: bool) -> bool {
    let Some(request) = request else { return false };
    let (id, result) = match decode_frame(frame) {
        Frame::Single(Ok(Message::Response { id, result })) => (id, Some(result)),
        Frame::Single(Ok(Message::Error { id: Some(id), .. })) => (id, None),
        _ => return false,
    };
    if &id != request {
        return false;
    }
    if let (true, Some(result)) = (is_init, result) {
        #[derive(serde::Deserialize)]
        struct V {
            #[serde(rename = "protocolVersion")]
            protocol_version: String,
        }
        if let Ok(v) = serde_json::from_str::<V>(result.get()) {
            *state.protocol_version.lock().expect("version lock") = Some(v.protocol_version);
        }
    }
    true
}

/// Reads an SSE response until the answer to `request` is in; if the stream ends or fails
/// before, resumes it with GET and `Last-Event-ID`, waiting `retry` (within bounds) first. A
/// stream that cannot be resumed (no event id, refused, given up) fails the request at once, as
/// does an event over the frame bound.
async fn read_sse(
    state: &Arc<State>,
    resp: reqwest::Response,
    request: Option<&RequestId>,
    is_init: bool,
    forward: bool,
) -> Result<(), Error> {
    let max = state.options.max_frame_bytes;
    let mut resp = resp;
    let mut last_id: Option<String> = None;
    let mut retry = state.options.retry(state.options.default_retry);
    let mut reconnects = 0u32;
    loop {
        let mut parser = Parser::new(max);
        let mut answered = false;
        let ended = loop {
            let chunk = tokio::select! {
                c = resp.chunk() => c,
                _ = state.closed.cancelled() => return Ok(()),
            };
            let bytes = match chunk {
                Ok(Some(b)) => b,
                Ok(None) => break None,
                Err(e) => break Some(error_chain(&e)),
            };
            for item in parser.feed(&bytes) {
                let ev = match item {
                    Item::Event(ev) => ev,
                    // The stream belongs to the request: it cannot go on without this event.
                    Item::TooLarge => {
                        return Err(Error::ResponseTooLarge {
                            len: max + 1,
                            limit: max,
                        })
                    }
                };
                if let Some(id) = ev.id {
                    last_id = Some(id);
                }
                if let Some(ms) = ev.retry {
                    retry = state.options.retry(Duration::from_millis(ms));
                }
                if ev.data.trim().is_empty() {
                    continue;
                }
                reconnects = 0;
                let frame = Bytes::from(ev.data.into_bytes());
                answered |= note_answer(state, &frame, request, is_init);
                if forward {
                    let _ = state.inbound.send(Inbound::Frame(frame)).await;
                }
            }
            if answered || request.is_none() {
                // The answer is in: whatever else the server keeps on this stream is for nobody.
                return Ok(());
            }
        };
        let Some(last) = last_id.clone() else {
            return Err(match ended {
                Some(why) => Error::Transport(format!(
                    "the SSE stream failed before the response ({why}) and cannot be resumed (no event id)"
                )),
                None => Error::InvalidResponse(
                    "the SSE stream ended before the response and cannot be resumed (no event id)"
                        .into(),
                ),
            });
        };
        if reconnects >= state.options.max_reconnects {
            return Err(Error::Transport(format!(
                "the SSE stream was lost {reconnects} times in a row before the response; gave up resuming it"
            )));
        }
        reconnects += 1;
        tokio::select! {
            _ = tokio::time::sleep(retry) => {}
            _ = state.closed.cancelled() => return Ok(()),
        }
        resp = resume(state, Some(&last)).await?;
    }
}

/// Opens a GET stream (resuming after `last` if given); an error when the server offers none
/// or refuses it.
async fn resume(state: &Arc<State>, last: Option<&str>) -> Result<reqwest::Response, Error> {
    let mut auth_rounds = 0;
    let resp = loop {
        let session = state.session_id.lock().expect("session lock").clone();
        let mut headers = base_headers(state, &[]);
        let sent = authorization(&state.options).await?;
        set_authorization(&mut headers, sent.clone());
        let mut rb = state
            .http
            .get(state.url.clone())
            .headers(headers)
            .header(ACCEPT, "text/event-stream");
        if let Some(id) = session {
            rb = rb.header(SESSION_ID_HEADER, id);
        }
        if let Some(last) = last {
            rb = rb.header("last-event-id", last);
        }
        let resp = rb
            .send()
            .await
            .map_err(|e| Error::Transport(format!("GET {}: {}", state.url, error_chain(&e))))?;
        if !challenged(&state.options, &resp, sent.as_deref(), &mut auth_rounds).await? {
            break resp;
        }
    };
    let status = resp.status();
    if !status.is_success() {
        return Err(Error::Http {
            status: status.as_u16(),
            body: "the server refused the SSE stream".into(),
        });
    }
    let is_sse = resp
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !is_sse {
        return Err(Error::InvalidResponse(
            "the GET stream is not text/event-stream".into(),
        ));
    }
    Ok(resp)
}

/// The session's standalone stream: server requests and notifications outside any request.
/// A server that answers 405 (or 400) offers none; a dropped stream is resumed. `first` is the
/// stream's response when it was already opened. An event over the frame bound is skipped.
async fn standalone_stream(state: Arc<State>, mut first: Option<reqwest::Response>) {
    let mut last_id: Option<String> = None;
    let mut retry = state.options.retry(state.options.default_retry);
    let mut failures = 0u32;
    while !state.closed.is_cancelled() && failures <= state.options.max_reconnects {
        let opened = match first.take() {
            Some(r) => r,
            None => match resume(&state, last_id.as_deref()).await {
                Ok(r) => r,
                Err(_) => return,
            },
        };
        let mut resp = opened;
        failures += 1;
        let mut parser = Parser::new(state.options.max_frame_bytes);
        loop {
            let chunk = tokio::select! {
                c = resp.chunk() => c,
                _ = state.closed.cancelled() => return,
            };
            let Ok(Some(bytes)) = chunk else { break };
            for item in parser.feed(&bytes) {
                let Item::Event(ev) = item else { continue };
                if let Some(id) = ev.id {
                    last_id = Some(id);
                }
                if let Some(ms) = ev.retry {
                    retry = state.options.retry(Duration::from_millis(ms));
                }
                if !ev.data.trim().is_empty() {
                    failures = 0;
                    let _ = state
                        .inbound
                        .send(Inbound::Frame(Bytes::from(ev.data.into_bytes())))
                        .await;
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(retry) => {}
            _ = state.closed.cancelled() => return,
        }
    }
}

/// Re-runs the handshake on a fresh session after the server answered 404, with a private id;
/// the engine never sees it. Server-side state of the old session (subscriptions, log level)
/// is gone.
async fn reinitialize(state: &Arc<State>) -> Result<(), Error> {
    let init = state.init_frame.lock().expect("init lock").clone();
    let Some(init) = init else {
        return Err(Error::Http {
            status: 404,
            body: "the session expired before it was initialized".into(),
        });
    };
    let mut value: serde_json::Value = serde_json::from_slice(&init)
        .map_err(|e| Error::Transport(format!("replaying initialize: {e}")))?;
    let private = format!(
        "purra-reinit-{}",
        state.reinit_seq.fetch_add(1, Ordering::Relaxed)
    );
    value["id"] = serde_json::Value::String(private.clone());
    let frame = serde_json::to_vec(&value).expect("JSON");
    *state.session_id.lock().expect("session lock") = None;
    let (_, resp, _) = send_post(state, &frame, &[], true).await?;
    if !resp.status().is_success() {
        return Err(Error::Http {
            status: resp.status().as_u16(),
            body: "re-initialization failed".into(),
        });
    }
    if let Some(id) = resp
        .headers()
        .get(SESSION_ID_HEADER)
        .and_then(|v| v.to_str().ok())
    {
        *state.session_id.lock().expect("session lock") = Some(id.to_owned());
    }
    let id = RequestId::String(Arc::from(private.as_str()));
    receive(state, resp, Some(&id), true, false).await?;
    let initialized = state.initialized_frame.lock().expect("init lock").clone();
    if let Some(n) = initialized {
        // Sent directly, never through `post`: a 404 here is an error, not another round.
        let (_, resp, _) = tokio::time::timeout(
            state.options.message_timeout,
            send_post(state, &n, &[], false),
        )
        .await
        .map_err(|_| {
            Error::Transport("re-initialization: notifications/initialized timed out".into())
        })??;
        if !resp.status().is_success() {
            return Err(Error::Http {
                status: resp.status().as_u16(),
                body: "re-initialization: notifications/initialized was refused".into(),
            });
        }
    }
    // A new session may list other tools, resources and prompts: say so, so catalogs are
    // refetched and anything authorized against the old lists (purra-mcp registrations) goes
    // stale. Transport recovery never authorizes new tools.
    for method in [
        methods::TOOLS_LIST_CHANGED,
        methods::RESOURCES_LIST_CHANGED,
        methods::PROMPTS_LIST_CHANGED,
    ] {
        let note = crate::jsonrpc::encode_notification(method, None);
        let _ = state.inbound.send(Inbound::Frame(Bytes::from(note))).await;
    }
    Ok(())
}
