//! The Streamable HTTP client transport: each outbound message is a POST; responses come back as
//! JSON or as an SSE stream; a lost stream is resumed with GET and `Last-Event-ID`; the session's
//! standalone GET stream is opened when the server offers one.
//!
//! Error kinds stay distinct: a connection that cannot be made is [`Error::Transport`], an error
//! status is [`Error::Http`], and a response that is not valid MCP over HTTP is
//! [`Error::InvalidResponse`]. They fail the one request whose POST failed.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE};
use serde_json::value::RawValue;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::sse::Parser;
use super::{PROTOCOL_VERSION_HEADER, SESSION_ID_HEADER};
use crate::error::Error;
use crate::jsonrpc::{decode_frame, Frame, Message, RequestId};
use crate::transport::{Inbound, Outbound, Transport, CHANNEL_CAPACITY, DEFAULT_MAX_FRAME_BYTES};
use crate::types::methods;

/// Supplies headers that change over a connection's life (a refreshed token).
pub type HeaderProvider = Arc<dyn Fn() -> Vec<(String, String)> + Send + Sync>;

/// Options of a Streamable HTTP connection.
#[derive(Clone)]
pub struct HttpClientOptions {
    /// Headers sent with every request of this connection (for example `Authorization`).
    pub headers: Vec<(String, String)>,
    /// Called before every HTTP request for headers that change (a refreshed token).
    pub dynamic_headers: Option<HeaderProvider>,
    /// The bound on one response body or one SSE event.
    pub max_frame_bytes: usize,
    /// How long to wait before resuming a stream when the server gave no `retry` hint.
    pub default_retry: Duration,
    /// How many times in a row a stream is resumed before the client gives up on it.
    pub max_reconnects: u32,
    /// Whether to open the session's standalone GET stream after initialization.
    pub open_get_stream: bool,
    /// Timeout for connecting (not for the whole response: streams may be long).
    pub connect_timeout: Duration,
}

impl std::fmt::Debug for HttpClientOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClientOptions")
            .field(
                "headers",
                &self.headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .field("max_frame_bytes", &self.max_frame_bytes)
            .field("default_retry", &self.default_retry)
            .field("max_reconnects", &self.max_reconnects)
            .field("open_get_stream", &self.open_get_stream)
            .finish()
    }
}

impl Default for HttpClientOptions {
    fn default() -> Self {
        HttpClientOptions {
            headers: Vec::new(),
            dynamic_headers: None,
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            default_retry: Duration::from_secs(1),
            max_reconnects: 5,
            open_get_stream: true,
            connect_timeout: Duration::from_secs(10),
        }
    }
}

impl HttpClientOptions {
    /// Adds a header sent with every request.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
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
    closed: CancellationToken,
}

/// Starts a Streamable HTTP transport to `url` (`http://` or `https://`). Nothing is sent until
/// the engine writes its first message (`initialize`).
pub fn connect(url: &str, options: HttpClientOptions) -> Result<Transport, Error> {
    let url = reqwest::Url::parse(url)
        .map_err(|e| Error::Transport(format!("invalid URL {url:?}: {e}")))?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(Error::Transport(format!("not an http(s) URL: {url}")));
    }
    let http = reqwest::Client::builder()
        .connect_timeout(options.connect_timeout)
        .build()
        .map_err(|e| Error::Transport(format!("HTTP client: {e}")))?;
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
        closed: CancellationToken::new(),
    });
    tokio::spawn(write_loop(state, out_rx, close.clone()));
    Ok(Transport::from_channels(in_rx, out_tx, close))
}

async fn write_loop(state: Arc<State>, mut rx: mpsc::Receiver<Outbound>, close: CancellationToken) {
    loop {
        let next = tokio::select! {
            biased;
            m = rx.recv() => m,
            _ = close.cancelled() => None,
        };
        let Some(out) = next else { break };
        let (request, method) = match decode_frame(&out.frame) {
            Frame::Single(Ok(Message::Request { id, method, .. })) => (Some(id), Some(method)),
            Frame::Single(Ok(Message::Notification { method, .. })) => (None, Some(method)),
            _ => (None, None),
        };
        match (request, method.as_deref()) {
            (Some(id), m) => {
                let is_init = m == Some(methods::INITIALIZE);
                if is_init {
                    *state.init_frame.lock().expect("init lock") = Some(out.frame.clone());
                }
                let state = state.clone();
                let post = async move {
                    if let Err(error) =
                        post(&state, &out.frame, &out.headers, Some(&id), is_init).await
                    {
                        let _ = state
                            .inbound
                            .send(Inbound::RequestFailed { id, error })
                            .await;
                    }
                };
                if is_init {
                    // The session id must be known before anything else is sent.
                    post.await;
                } else {
                    tokio::spawn(post);
                }
            }
            (None, m) => {
                let initialized = m == Some(methods::INITIALIZED);
                if initialized {
                    *state.initialized_frame.lock().expect("init lock") = Some(out.frame.clone());
                }
                // Notifications and responses are sent in order; a failure has no request to fail.
                let _ = post(&state, &out.frame, &out.headers, None, false).await;
                if initialized
                    && state.options.open_get_stream
                    && !state.get_started.swap(true, Ordering::SeqCst)
                {
                    // Open the standalone stream before sending anything else: a server may send
                    // its requests (elicitation, sampling) there as soon as it has a request of
                    // ours, and a server with no stream open to take them drops them.
                    let opened = tokio::select! {
                        r = tokio::time::timeout(state.options.connect_timeout, resume(&state, None)) => r,
                        _ = close.cancelled() => break,
                    };
                    match opened {
                        Ok(None) => {} // the server offers no standalone stream
                        Ok(Some(resp)) => {
                            tokio::spawn(standalone_stream(state.clone(), Some(resp)));
                        }
                        Err(_) => {
                            tokio::spawn(standalone_stream(state.clone(), None));
                        }
                    }
                }
            }
        }
    }
    state.closed.cancel();
    let session = state.session_id.lock().expect("session lock").clone();
    if let Some(id) = session {
        let req = state
            .http
            .delete(state.url.clone())
            .headers(base_headers(&state, &[]))
            .header(SESSION_ID_HEADER, id);
        let _ = tokio::time::timeout(Duration::from_secs(2), req.send()).await;
    }
}

fn base_headers(state: &State, extra: &[(String, String)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    let dynamic = state
        .options
        .dynamic_headers
        .as_ref()
        .map(|f| f())
        .unwrap_or_default();
    for (k, v) in state
        .options
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
    loop {
        let session = state.session_id.lock().expect("session lock").clone();
        let mut headers = base_headers(state, extra);
        if is_init {
            headers.remove(PROTOCOL_VERSION_HEADER);
        }
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
        let status = resp.status();
        if status == reqwest::StatusCode::NOT_FOUND
            && session.is_some()
            && !is_init
            && !reinitialized
        {
            reinitialized = true;
            reinitialize(state).await?;
            continue;
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
        if status == reqwest::StatusCode::ACCEPTED {
            return Ok(());
        }
        if !status.is_success() {
            let body = read_bounded(resp, 1024).await.unwrap_or_default();
            return Err(Error::Http {
                status: status.as_u16(),
                body: String::from_utf8_lossy(&body).into_owned(),
            });
        }
        if request.is_none() {
            // A notification or a response is answered 202 with no body; whatever a server
            // sends instead answers nothing of ours and is not a message for the engine.
            return Ok(());
        }
        return receive(state, resp, request, is_init, true).await;
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

async fn read_bounded(mut resp: reqwest::Response, max: usize) -> Result<Vec<u8>, Error> {
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
                    return Err(Error::InvalidResponse(format!(
                        "response body exceeds {max} bytes"
                    )));
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

/// Reads an SSE response; if it ends before the answer to `request`, resumes it with GET and
/// `Last-Event-ID`, waiting `retry` first. A stream that cannot be resumed leaves the request
/// pending until its timeout.
async fn read_sse(
    state: &Arc<State>,
    resp: reqwest::Response,
    request: Option<&RequestId>,
    is_init: bool,
    forward: bool,
) -> Result<(), Error> {
    let mut resp = resp;
    let mut last_id: Option<String> = None;
    let mut retry = state.options.default_retry;
    let mut reconnects = 0u32;
    loop {
        let mut parser = Parser::new(state.options.max_frame_bytes);
        let mut answered = false;
        loop {
            let chunk = tokio::select! {
                c = resp.chunk() => c,
                _ = state.closed.cancelled() => return Ok(()),
            };
            let bytes = match chunk {
                Ok(Some(b)) => b,
                Ok(None) | Err(_) => break,
            };
            let events = parser.feed(&bytes).map_err(|_| {
                Error::InvalidResponse(format!(
                    "an SSE event exceeds {} bytes",
                    state.options.max_frame_bytes
                ))
            })?;
            for ev in events {
                if let Some(id) = ev.id {
                    last_id = Some(id);
                }
                if let Some(ms) = ev.retry {
                    retry = Duration::from_millis(ms);
                }
                if ev.data.trim().is_empty() {
                    continue;
                }
                let frame = Bytes::from(ev.data.into_bytes());
                answered |= note_answer(state, &frame, request, is_init);
                if forward {
                    let _ = state.inbound.send(Inbound::Frame(frame)).await;
                }
            }
        }
        if answered || request.is_none() {
            return Ok(());
        }
        let Some(last) = last_id.clone() else {
            // Nothing to resume from: the request stays pending until its timeout.
            return Ok(());
        };
        if reconnects >= state.options.max_reconnects {
            return Ok(());
        }
        reconnects += 1;
        tokio::select! {
            _ = tokio::time::sleep(retry) => {}
            _ = state.closed.cancelled() => return Ok(()),
        }
        match resume(state, Some(&last)).await {
            Some(r) => resp = r,
            None => return Ok(()),
        }
    }
}

/// Opens a GET stream (resuming after `last` if given); `None` when the server offers none.
async fn resume(state: &Arc<State>, last: Option<&str>) -> Option<reqwest::Response> {
    let session = state.session_id.lock().expect("session lock").clone();
    let mut rb = state
        .http
        .get(state.url.clone())
        .headers(base_headers(state, &[]))
        .header(ACCEPT, "text/event-stream");
    if let Some(id) = session {
        rb = rb.header(SESSION_ID_HEADER, id);
    }
    if let Some(last) = last {
        rb = rb.header("last-event-id", last);
    }
    let resp = rb.send().await.ok()?;
    let is_sse = resp
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    (resp.status().is_success() && is_sse).then_some(resp)
}

/// The session's standalone stream: server requests and notifications outside any request.
/// A server that answers 405 (or 400) offers none; a dropped stream is resumed. `first` is the
/// stream's response when it was already opened.
async fn standalone_stream(state: Arc<State>, mut first: Option<reqwest::Response>) {
    let mut last_id: Option<String> = None;
    let mut retry = state.options.default_retry;
    let mut failures = 0u32;
    while !state.closed.is_cancelled() && failures <= state.options.max_reconnects {
        let opened = match first.take() {
            Some(r) => Some(r),
            None => resume(&state, last_id.as_deref()).await,
        };
        let Some(mut resp) = opened else {
            return;
        };
        failures += 1;
        let mut parser = Parser::new(state.options.max_frame_bytes);
        loop {
            let chunk = tokio::select! {
                c = resp.chunk() => c,
                _ = state.closed.cancelled() => return,
            };
            let Ok(Some(bytes)) = chunk else { break };
            let Ok(events) = parser.feed(&bytes) else {
                break;
            };
            for ev in events {
                failures = 0;
                if let Some(id) = ev.id {
                    last_id = Some(id);
                }
                if let Some(ms) = ev.retry {
                    retry = Duration::from_millis(ms);
                }
                if !ev.data.trim().is_empty() {
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
    let resp = state
        .http
        .post(state.url.clone())
        .headers(base_headers(state, &[]))
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "application/json, text/event-stream")
        .body(frame)
        .send()
        .await
        .map_err(|e| Error::Transport(format!("POST {}: {}", state.url, error_chain(&e))))?;
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
        Box::pin(post(state, &n, &[], None, false)).await?;
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
