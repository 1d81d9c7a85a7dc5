//! The HTTP+SSE transport of 2024-11-05, beside the Streamable HTTP endpoint and under the same
//! front: a GET on the SSE path opens a session whose first event (`endpoint`) names the URL to
//! POST messages to (`?sessionId=`); every message of the server goes on that one stream as a
//! `message` event, and a POST is answered 202 once its message is queued for the engine.
//!
//! Everything the Streamable HTTP endpoint checks is checked here, by the same code: Host and
//! Origin first (in `handle`), the shutdown, the body bound and read timeout, JSON content type,
//! and the principal a session was opened by. A legacy session counts against
//! `max_sessions` with the established Streamable HTTP sessions; it ends when its stream does.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use http::request::Parts;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{
    accepts, new_session_id, owner_of, read_body, sse_response, status, EventSource, HttpShared,
    SseState,
};
use crate::http::sse::data_event;
use crate::http_context::HttpContext;
use crate::transport::{Inbound, Outbound, Transport, CHANNEL_CAPACITY};

/// The paths of the legacy HTTP+SSE endpoints (2024-11-05), served beside the Streamable HTTP
/// endpoint when [`HttpServerConfig::legacy_sse`](super::HttpServerConfig::legacy_sse) is set.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LegacySse {
    /// Where a client GETs its event stream (default `/sse`).
    pub sse_path: String,
    /// Where a client POSTs its messages, with `?sessionId=` (default `/messages`).
    pub messages_path: String,
}

impl Default for LegacySse {
    fn default() -> Self {
        LegacySse {
            sse_path: "/sse".into(),
            messages_path: "/messages".into(),
        }
    }
}

impl LegacySse {
    /// The endpoints at `sse_path` and `messages_path`.
    pub fn new(sse_path: impl Into<String>, messages_path: impl Into<String>) -> Self {
        LegacySse {
            sse_path: sse_path.into(),
            messages_path: messages_path.into(),
        }
    }
}

/// One legacy session: where its POSTs go, and who opened it.
pub(super) struct LegacySession {
    inbound: mpsc::Sender<Inbound>,
    owner: Option<String>,
}

/// Which legacy endpoint a request is for, if any.
pub(super) enum Route {
    Stream,
    Messages,
}

pub(super) fn route(shared: &HttpShared, path: &str) -> Option<Route> {
    let l = shared.config.legacy_sse.as_ref()?;
    if path == l.sse_path {
        Some(Route::Stream)
    } else if path == l.messages_path {
        Some(Route::Messages)
    } else {
        None
    }
}

/// The prefix an enclosing router stripped before this service saw the request (axum's
/// `nest`), so the `endpoint` event names the URL the client must use.
fn mount_prefix(parts: &Parts) -> String {
    let Some(original) = parts.extensions.get::<axum::extract::OriginalUri>() else {
        return String::new();
    };
    original
        .0
        .path()
        .strip_suffix(parts.uri.path())
        .unwrap_or("")
        .to_owned()
}

/// Removes the session when its stream's body is dropped (the client went away, or the stream
/// ended), so the engine sees its inbound close and ends the connection.
struct Guard {
    shared: Arc<HttpShared>,
    id: String,
    close: CancellationToken,
}

impl Drop for Guard {
    fn drop(&mut self) {
        forget(&self.shared, &self.id);
        self.close.cancel();
    }
}

/// Removes the session `id` from the table: its POSTs are 404 from now on, and its place under
/// `max_sessions` is free.
fn forget(shared: &HttpShared, id: &str) {
    shared.legacy.lock().expect("legacy lock").remove(id);
}

/// The session's outbound messages as `message` events.
struct Messages(mpsc::Receiver<Outbound>);

impl EventSource for Messages {
    async fn next_event(&mut self) -> Option<Bytes> {
        let out = self.0.recv().await?;
        Some(data_event(Some("message"), out.frame()))
    }
}

/// GET on the SSE path: a new session and its stream, opening with the `endpoint` event.
pub(super) fn open(shared: Arc<HttpShared>, parts: Parts) -> Response {
    if parts.method != http::Method::GET {
        return (
            StatusCode::METHOD_NOT_ALLOWED,
            [(header::ALLOW, "GET")],
            "Method Not Allowed: GET the event stream",
        )
            .into_response();
    }
    if !accepts(&parts.headers, "text/event-stream") {
        return status(
            StatusCode::NOT_ACCEPTABLE,
            "Not Acceptable: the client must accept text/event-stream",
        );
    }
    let id = new_session_id();
    let (in_tx, in_rx) = mpsc::channel(CHANNEL_CAPACITY);
    let (out_tx, out_rx) = mpsc::channel(CHANNEL_CAPACITY);
    let close = CancellationToken::new();
    {
        let mut legacy = shared.legacy.lock().expect("legacy lock");
        if legacy.len() + shared.established_count() >= shared.config.max_sessions {
            return status(
                StatusCode::SERVICE_UNAVAILABLE,
                "Service Unavailable: too many sessions",
            );
        }
        legacy.insert(
            id.clone(),
            Arc::new(LegacySession {
                inbound: in_tx,
                owner: owner_of(&parts),
            }),
        );
    }
    let transport =
        Transport::from_channels(in_rx, out_tx, close.clone()).labeled("sse", Some(id.clone()));
    let _ = shared.server.start(transport);
    // The engine may end the connection while its stream is not being polled (a client that
    // stopped reading is cut off after the slow-peer timeout, and hyper polls a body only when
    // the socket takes more): the session leaves the table then, not when the socket goes.
    {
        let weak = Arc::downgrade(&shared);
        let (close, id) = (close.clone(), id.clone());
        tokio::spawn(async move {
            close.cancelled().await;
            if let Some(shared) = weak.upgrade() {
                forget(&shared, &id);
            }
        });
    }
    let messages = &shared
        .config
        .legacy_sse
        .as_ref()
        .expect("routed here only when configured")
        .messages_path;
    let endpoint = format!("{}{messages}?sessionId={id}", mount_prefix(&parts));
    let state = SseState {
        rx: Messages(out_rx),
        first: [data_event(Some("endpoint"), endpoint.as_bytes())].into(),
        keep_alive: shared.config.sse_keep_alive,
        shutdown: shared.shutdown.clone(),
        closed: close.clone(),
        _hold: Guard {
            shared: shared.clone(),
            id,
            close,
        },
    };
    sse_response(state, None)
}

/// POST on the messages path: the message goes to its session's engine; 202 once queued.
pub(super) async fn post(shared: Arc<HttpShared>, parts: Parts, body: Body) -> Response {
    if parts.method != http::Method::POST {
        return (
            StatusCode::METHOD_NOT_ALLOWED,
            [(header::ALLOW, "POST")],
            "Method Not Allowed: POST messages here",
        )
            .into_response();
    }
    let Some(id) = parts.uri.query().and_then(|q| {
        q.split('&')
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == "sessionId" || *k == "session_id")
            .map(|(_, v)| v.to_owned())
    }) else {
        return status(
            StatusCode::BAD_REQUEST,
            "Bad Request: missing sessionId query parameter",
        );
    };
    let session = {
        let legacy = shared.legacy.lock().expect("legacy lock");
        legacy
            .get(&id)
            .filter(|s| s.owner == owner_of(&parts))
            .cloned()
    };
    // Another principal's session is not found either: its existence is not revealed.
    let Some(session) = session else {
        return status(
            StatusCode::NOT_FOUND,
            "Not Found: unknown or expired session",
        );
    };
    let body = match read_body(&shared, &parts.headers, body).await {
        Ok(b) => b,
        Err(resp) => return resp,
    };
    // The engine answers malformed JSON itself, on the stream, as on any transport.
    let context: crate::transport::TransportContext = Arc::new(HttpContext::new(parts, Some(id)));
    let queued = tokio::time::timeout(
        shared.config.body_read_timeout,
        session.inbound.send(Inbound::FrameWithContext {
            frame: body,
            context,
        }),
    )
    .await;
    match queued {
        Ok(Ok(())) => (StatusCode::ACCEPTED, "Accepted").into_response(),
        Ok(Err(_)) => status(
            StatusCode::NOT_FOUND,
            "Not Found: unknown or expired session",
        ),
        Err(_) => status(
            StatusCode::SERVICE_UNAVAILABLE,
            "Service Unavailable: the session is not taking messages",
        ),
    }
}

/// Legacy sessions open now.
pub(super) fn count(shared: &HttpShared) -> usize {
    shared.legacy.lock().expect("legacy lock").len()
}
