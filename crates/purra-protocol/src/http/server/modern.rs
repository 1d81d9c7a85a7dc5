//! The 2026-07-28 revision on the Streamable HTTP endpoint, decided per request: a POST whose
//! `MCP-Protocol-Version` header is not a handshake revision (or that carries the modern envelope
//! without the header) is one self-contained exchange: no session, no GET stream, no replay.
//!
//! The headers are checked against the body (`Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`, the
//! version), then the request runs with a peer of its own. Its answer is plain JSON when the
//! handler sends nothing before its result, otherwise an SSE stream scoped to the request that
//! carries its notifications, then the result, then ends. Closing the stream cancels the request.
//! Errors map to statuses: -32601 is 404; -32700, -32600, -32602, -32020, -32021 and -32022 are
//! 400; everything else is 200.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{status, HttpShared, PROTOCOL_VERSION};
use crate::http::PROTOCOL_VERSION_HEADER;
use crate::http_context::HttpContext;
use crate::jsonrpc::{
    decode_frame, encode_error, encode_response, ErrorObject, Frame, Message, RequestId,
    RpcErrorCode,
};
use crate::modern::envelope::{classify, has_modern_envelope, HttpFacts};
use crate::modern::headers::{METHOD_HEADER, NAME_HEADER, PARAM_HEADER_PREFIX};
use crate::server::modern::Extras;
use crate::session::{detached_peer, RequestContext};
use crate::transport::{Outbound, TransportContext};
use crate::types::methods;

/// How often an idle request stream (a subscription) sends a keep-alive comment.
const KEEPALIVE: Duration = Duration::from_secs(15);

/// Whether a request with these headers is for the modern path, judged from the headers alone:
/// its `MCP-Protocol-Version` names a modern revision, or an unknown one outside any
/// handshake-era session (answered -32022 there; inside a session, the session's own rules).
pub(super) fn by_header(headers: &HeaderMap) -> bool {
    let Some(v) = headers
        .get(&PROTOCOL_VERSION)
        .map(|v| v.to_str().unwrap_or("").trim())
    else {
        return false;
    };
    crate::modern::is_modern(v)
        || (!crate::modern::is_handshake(v) && !headers.contains_key(&super::SESSION_ID))
}

/// Whether a POST without a version header is still a modern request: one request, not
/// `initialize`, carrying the modern envelope (answered -32020 for the missing header).
pub(super) fn by_body(headers: &HeaderMap, body: &[u8]) -> bool {
    if headers.contains_key(&PROTOCOL_VERSION)
        || memchr::memmem::find(body, crate::modern::meta::PROTOCOL_VERSION.as_bytes()).is_none()
    {
        return false;
    }
    match decode_frame(body) {
        Frame::Single(Ok(Message::Request { method, params, .. })) => {
            method != methods::INITIALIZE && has_modern_envelope(params.as_deref())
        }
        _ => false,
    }
}

/// GET and DELETE are not part of this revision.
pub(super) fn not_allowed() -> Response {
    (StatusCode::METHOD_NOT_ALLOWED, [(header::ALLOW, "POST")]).into_response()
}

/// The HTTP status of a JSON-RPC error code.
fn status_of(code: RpcErrorCode) -> StatusCode {
    match code {
        RpcErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        RpcErrorCode::PARSE_ERROR
        | RpcErrorCode::INVALID_REQUEST
        | RpcErrorCode::INVALID_PARAMS
        | RpcErrorCode::HEADER_MISMATCH
        | RpcErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
        | RpcErrorCode::UNSUPPORTED_PROTOCOL_VERSION => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    }
}

fn json(status: StatusCode, body: Vec<u8>) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

fn error(id: Option<&RequestId>, e: &ErrorObject) -> Response {
    json(status_of(e.code), encode_error(id, e))
}

/// The header facts the envelope ladder checks; values trimmed of surrounding whitespace.
fn facts(headers: &HeaderMap) -> HttpFacts {
    let one = |name: &str| {
        headers
            .get(name)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).trim().to_owned())
    };
    let duplicated = [PROTOCOL_VERSION_HEADER, METHOD_HEADER, NAME_HEADER]
        .into_iter()
        .find(|n| headers.get_all(*n).iter().count() > 1)
        .map(str::to_owned);
    let params = headers
        .iter()
        .filter(|(k, _)| k.as_str().starts_with(PARAM_HEADER_PREFIX))
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).trim().to_owned(),
            )
        })
        .collect();
    HttpFacts {
        protocol_version: one(PROTOCOL_VERSION_HEADER),
        method: one(METHOD_HEADER),
        name: one(NAME_HEADER),
        params,
        duplicated,
    }
}

/// Cancels the request when the response (or the wait for it) is dropped: a client that closes
/// its stream cancels its request.
struct CancelOnDrop(CancellationToken);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// Serves one modern POST whose body is read and bounded.
pub(super) async fn post(shared: Arc<HttpShared>, parts: Parts, body: Bytes) -> Response {
    let headers = &parts.headers;
    let principal = parts
        .extensions
        .get::<crate::Principal>()
        .map(crate::Principal::binding_key);
    let (id, method, params) = match decode_frame(&body) {
        Frame::Single(Ok(Message::Request { id, method, params })) => (id, method, params),
        Frame::Single(Ok(Message::Notification { .. })) => {
            // Nothing in this revision needs a client notification over HTTP (closing a stream
            // is the cancellation); accepted and ignored.
            return StatusCode::ACCEPTED.into_response();
        }
        Frame::Single(Ok(_)) => {
            return error(
                None,
                &ErrorObject::new(
                    RpcErrorCode::INVALID_REQUEST,
                    "Invalid request: a client sends no responses in this revision",
                ),
            )
        }
        Frame::Single(Err(e)) => return error(e.id.as_ref(), &e.error),
        Frame::Batch(_) => {
            return error(
                None,
                &ErrorObject::new(
                    RpcErrorCode::INVALID_REQUEST,
                    "Invalid request: batches are not allowed in this revision",
                ),
            )
        }
    };
    let facts = facts(headers);
    let envelope = match classify(&method, params.as_deref(), Some(&facts)) {
        Ok(e) => e,
        Err(e) => return error(Some(&id), &e),
    };
    let Ok(permit) = shared.exchange_permits.clone().try_acquire_owned() else {
        return status(
            StatusCode::SERVICE_UNAVAILABLE,
            "Service Unavailable: too many requests in flight",
        );
    };
    let cancel = CancellationToken::new();
    let guard = CancelOnDrop(cancel.clone());
    let (out_tx, mut out_rx) = mpsc::channel::<Outbound>(64);
    let peer = detached_peer(out_tx, id.clone(), shared.shutdown.clone());
    let ctx = RequestContext {
        id: id.clone(),
        peer,
        cancel: cancel.clone(),
        transport: Some(Arc::new(HttpContext::new(parts, None)) as TransportContext),
    };
    let extras = Extras {
        param_headers: Some(facts.params),
        principal,
    };
    let fut = shared
        .exchanges
        .serve(ctx, method, params, envelope, extras);
    let mut task = tokio::spawn(async move {
        let _permit = permit;
        tokio::select! {
            biased;
            r = fut => Some(r),
            _ = cancel.cancelled() => None,
        }
    });
    // Plain JSON when the result comes before anything else; otherwise a stream.
    let mut first = tokio::select! {
        biased;
        m = out_rx.recv() => First::Message(m),
        r = &mut task => First::Done(r.ok().flatten()),
    };
    if let First::Message(None) = first {
        // The handler's peer is gone (its task ended): only the result is left.
        first = First::Done((&mut task).await.ok().flatten());
    }
    let lead = match first {
        First::Done(result) => {
            let queued = drain_queued(&mut out_rx);
            match (queued.is_empty(), result) {
                (true, Some(Ok(v))) => return json(StatusCode::OK, encode_response(&id, &v)),
                (true, Some(Err(e))) => return error(Some(&id), &e),
                (true, None) => {
                    return status(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "Service Unavailable: shutting down",
                    )
                }
                (false, result) => {
                    let mut frames = queued;
                    match result {
                        Some(Ok(v)) => frames.push(encode_response(&id, &v)),
                        Some(Err(e)) => frames.push(encode_error(Some(&id), &e)),
                        None => {}
                    }
                    return sse(stream_of_frames(frames), guard);
                }
            }
        }
        First::Message(None) => unreachable!("waited for the result above"),
        First::Message(Some(m)) => vec![m.frame],
    };
    let stream = futures_util::stream::unfold(
        State {
            lead: lead.into_iter(),
            rx: Some(out_rx),
            task: Some(task),
            id,
        },
        next_event,
    );
    sse(stream, guard)
}

enum First {
    Message(Option<Outbound>),
    Done(Option<Result<Box<serde_json::value::RawValue>, ErrorObject>>),
}

fn drain_queued(rx: &mut mpsc::Receiver<Outbound>) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while let Ok(m) = rx.try_recv() {
        out.push(m.frame);
    }
    out
}

type Task = tokio::task::JoinHandle<Option<Result<Box<serde_json::value::RawValue>, ErrorObject>>>;

struct State {
    lead: std::vec::IntoIter<Vec<u8>>,
    rx: Option<mpsc::Receiver<Outbound>>,
    task: Option<Task>,
    id: RequestId,
}

fn event(frame: &[u8]) -> Bytes {
    crate::http::sse::data_event(None, frame)
}

async fn next_event(mut s: State) -> Option<(Result<Bytes, Infallible>, State)> {
    if let Some(f) = s.lead.next() {
        return Some((Ok(event(&f)), s));
    }
    loop {
        let task = s.task.as_mut()?;
        let rx = s.rx.as_mut()?;
        let keepalive = tokio::time::sleep(KEEPALIVE);
        tokio::select! {
            biased;
            m = rx.recv() => match m {
                Some(m) => return Some((Ok(event(&m.frame)), s)),
                None => { s.rx = None; }
            },
            r = task => {
                s.task = None;
                // Whatever was queued before the result goes out before it.
                let mut frames = s.rx.as_mut().map(drain_queued).unwrap_or_default();
                match r.ok().flatten() {
                    Some(Ok(v)) => frames.push(encode_response(&s.id, &v)),
                    Some(Err(e)) => frames.push(encode_error(Some(&s.id), &e)),
                    None => {}
                }
                s.rx = None;
                let mut body = Vec::new();
                for f in frames {
                    body.extend_from_slice(&event(&f));
                }
                return (!body.is_empty()).then(|| (Ok(Bytes::from(body)), s));
            }
            _ = keepalive => return Some((Ok(Bytes::from_static(b":\n\n")), s)),
        }
        if s.rx.is_none() {
            // The handler's peer is gone but its task runs on: wait for the result alone.
            let task = s.task.take()?;
            let r = task.await.ok().flatten()?;
            let f = match r {
                Ok(v) => encode_response(&s.id, &v),
                Err(e) => encode_error(Some(&s.id), &e),
            };
            return Some((Ok(event(&f)), s));
        }
    }
}

fn stream_of_frames(
    frames: Vec<Vec<u8>>,
) -> impl futures_util::Stream<Item = Result<Bytes, Infallible>> + Send {
    futures_util::stream::iter(frames.into_iter().map(|f| Ok(event(&f))))
}

fn sse(
    stream: impl futures_util::Stream<Item = Result<Bytes, Infallible>> + Send + 'static,
    guard: CancelOnDrop,
) -> Response {
    use futures_util::StreamExt as _;
    // The guard lives as long as the body: dropping the body (the client went away) cancels.
    let stream = stream.map(move |item| {
        let _keep = &guard;
        item
    });
    let mut resp = Response::new(Body::from_stream(stream));
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}
