//! The protocol engine one connection runs, whichever side it is: it decodes inbound frames,
//! answers requests through a service under a concurrency bound, hands notifications to the
//! service in order, and matches responses to the requests this side sent.
//!
//! **Architecture invariant:** no lock is held across an `.await`; the pending-request and
//! in-flight maps are `std::sync::Mutex`es touched only in short critical sections.

// Without `client` or `server` nothing starts an engine; the crate then only offers the types.
#![cfg_attr(not(any(feature = "client", feature = "server")), allow(dead_code))]

use std::future::Future;
use std::ops::ControlFlow;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::value::RawValue;
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, Span};

use crate::error::Error;
use crate::jsonrpc::{
    decode_frame, encode_error, encode_notification, encode_request, to_raw, Answer, DecodeError,
    ErrorObject, Frame, IdMap, Message, RequestId, RpcErrorCode,
};
use crate::peek::{Peek, PeekId};
use crate::telemetry::{RequestOutcome, RequestRecord};
use crate::transport::{
    DecodedFrame, Inbound, InboundSource, Outbound, OutboundRequest, OutboundSink, Transport,
    TransportContext, DEFAULT_MAX_FRAME_BYTES,
};
use crate::typed_reply::TypedDecode;
use crate::types::{methods, CancelledParams, ProgressParams};

/// A boxed, sendable future: the `futures` ecosystem's own alias, which purra-core re-exports
/// too, so both crates name one type.
pub use futures_core::future::BoxFuture;

/// Limits and defaults of one connection's engine.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// The bound on one inbound frame; longer frames are answered with -32600 and dropped.
    pub max_frame_bytes: usize,
    /// How many inbound requests run at once; further requests wait (back-pressure).
    pub max_concurrent_requests: usize,
    /// How many notifications may queue for in-order handling.
    pub notification_queue: usize,
    /// The default timeout of an outbound request.
    pub request_timeout: Duration,
    /// How long a cancelled handler may take to observe its cancellation before it is dropped.
    pub cancel_grace: Duration,
    /// At end of input, how long in-flight requests may finish before they are cancelled.
    pub drain_timeout: Duration,
    /// How long a broadcast notification (`list_changed`, resource updates) waits for room in
    /// a connection's full output queue before that peer, which stopped reading, is
    /// disconnected (default 10 s).
    pub slow_peer_timeout: Duration,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            max_concurrent_requests: 64,
            notification_queue: 1024,
            request_timeout: Duration::from_secs(60),
            cancel_grace: Duration::from_secs(1),
            drain_timeout: Duration::from_secs(2),
            slow_peer_timeout: Duration::from_secs(10),
        }
    }
}

/// A progress callback for an outbound request.
pub type ProgressCallback = Arc<dyn Fn(&ProgressParams) + Send + Sync>;

/// Per-request options for an outbound request.
#[derive(Clone, Default)]
pub struct RequestOptions {
    /// The timeout; the connection's default when `None`.
    pub timeout: Option<Duration>,
    /// Whether a progress notification restarts the timeout.
    pub reset_timeout_on_progress: bool,
    /// A hard maximum that progress cannot extend past.
    pub max_total_timeout: Option<Duration>,
    /// Receives `notifications/progress` for this request; setting it adds a progress token.
    pub on_progress: Option<ProgressCallback>,
    /// Cancels the request when cancelled.
    pub cancel: Option<CancellationToken>,
    /// Extra headers for transports that have them (Streamable HTTP).
    pub headers: Vec<(String, String)>,
}

impl std::fmt::Debug for RequestOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestOptions")
            .field("timeout", &self.timeout)
            .field("reset_timeout_on_progress", &self.reset_timeout_on_progress)
            .field("max_total_timeout", &self.max_total_timeout)
            .field("on_progress", &self.on_progress.is_some())
            .field("cancel", &self.cancel)
            .field("headers", &self.headers)
            .finish()
    }
}

impl RequestOptions {
    /// Sets the timeout.
    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = Some(t);
        self
    }
    /// Receives progress; progress restarts the timeout, up to `max_total`.
    pub fn on_progress(
        mut self,
        f: impl Fn(&ProgressParams) + Send + Sync + 'static,
        max_total: Option<Duration>,
    ) -> Self {
        self.on_progress = Some(Arc::new(f));
        self.reset_timeout_on_progress = true;
        self.max_total_timeout = max_total;
        self
    }
    /// Adds a header sent with this request (Streamable HTTP; ignored by other transports).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
    /// Cancels the request when `token` is cancelled.
    pub fn cancel_with(mut self, token: CancellationToken) -> Self {
        self.cancel = Some(token);
        self
    }
}

enum Reply {
    Ok(Box<RawValue>),
    /// The result, decoded by the request's [`TypedDecode`] as its frame was read.
    Typed(Box<dyn std::any::Any + Send>),
    Err(ErrorObject),
    Failed(Error),
    Closed,
    /// The request's deadline passed ([`Sweeper`]); the caller tells the peer it is cancelled.
    TimedOut,
}

struct ProgressState {
    callback: ProgressCallback,
    last: Mutex<Instant>,
}

struct PendingEntry {
    tx: oneshot::Sender<Reply>,
    progress: Option<Arc<ProgressState>>,
    /// When the request times out; set once it is sent (the clock starts then).
    deadline: Option<Deadline>,
    /// Whether the peer is told with `notifications/cancelled` when it times out (not for
    /// `initialize`, which MCP forbids cancelling).
    tell_on_timeout: bool,
    /// Decodes a usual response's result into what the caller wants (see `typed_reply`).
    decode: Option<TypedDecode>,
}

/// What an outbound request was answered with: the raw result, or the result its
/// [`TypedDecode`] gave (only a client's requests leave one).
#[cfg_attr(not(feature = "client"), allow(dead_code))]
pub(crate) enum Answered {
    Raw(Box<RawValue>),
    Typed(Box<dyn std::any::Any + Send>),
}

impl Answered {
    /// The raw result of a request that left no decoder (so was answered raw).
    fn raw(self) -> Result<Box<RawValue>, Error> {
        match self {
            Answered::Raw(raw) => Ok(raw),
            Answered::Typed(_) => Err(Error::Protocol(
                "a typed answer to a request that wanted the raw result".into(),
            )),
        }
    }
}

/// An outbound request's timeout: `timeout` after it was sent, or after its last progress
/// notification when progress resets it, never past the hard maximum.
#[derive(Clone, Copy)]
struct Deadline {
    start: Instant,
    timeout: Duration,
    hard: Option<Instant>,
    reset_on_progress: bool,
}

/// The [`Sweeper`]'s task: sleeps until the armed deadline (or until woken to re-arm), then
/// expires what is due. Ends with the connection; holds it weakly.
async fn sweep(
    shared: std::sync::Weak<Shared>,
    wake: Arc<tokio::sync::Notify>,
    closed: CancellationToken,
) {
    loop {
        let armed = match shared.upgrade() {
            Some(s) => s.sweeper.lock().expect("sweeper lock").armed,
            None => return,
        };
        match armed {
            None => tokio::select! {
                _ = wake.notified() => continue,
                _ = closed.cancelled() => return,
            },
            Some(at) => tokio::select! {
                _ = tokio::time::sleep_until(at) => {}
                _ = wake.notified() => continue,
                _ = closed.cancelled() => return,
            },
        }
        match shared.upgrade() {
            Some(s) => s.expire(Instant::now()),
            None => return,
        }
    }
}

impl PendingEntry {
    /// When this request times out, as of now (progress may have moved it later).
    fn due(&self) -> Option<Instant> {
        let d = self.deadline?;
        let base = match (&self.progress, d.reset_on_progress) {
            (Some(p), true) => *p.last.lock().expect("progress lock"),
            _ => d.start,
        };
        let due = base + d.timeout;
        Some(d.hard.map_or(due, |h| due.min(h)))
    }
}

/// The connection's timer for its outbound requests' deadlines: one task, started with the
/// first request, that sleeps until the earliest deadline, fails what is due, and sleeps again.
///
/// Why not a timer per request: arming a tokio timer from a thread outside the runtime's workers
/// (a client called from `#[tokio::main]`'s body) wakes the thread parked in the I/O driver
/// whenever the new deadline is the earliest, which it is whenever no other request is pending:
/// a thread wake-up per sequential call. With one deadline per connection, a request whose
/// deadline is no earlier than the one armed (every request, with one timeout for all) touches
/// no timer at all.
#[derive(Default)]
struct Sweeper {
    /// The deadline the task sleeps until; never later than any pending request's.
    armed: Option<Instant>,
    /// Wakes the task to re-arm earlier; `None` until the task is started.
    wake: Option<Arc<tokio::sync::Notify>>,
}

/// Counters of one connection, for hosts and tests.
#[derive(Debug, Default)]
pub struct Stats {
    unmatched_responses: AtomicU64,
    malformed_frames: AtomicU64,
    cancelled_by_peer: AtomicU64,
    slow_peer_disconnects: AtomicU64,
}

impl Stats {
    /// Responses whose id matched no pending request (late or unknown); dropped.
    pub fn unmatched_responses(&self) -> u64 {
        self.unmatched_responses.load(Ordering::Relaxed)
    }
    /// Inbound frames that could not be decoded.
    pub fn malformed_frames(&self) -> u64 {
        self.malformed_frames.load(Ordering::Relaxed)
    }
    /// Inbound requests cancelled by the peer.
    pub fn cancelled_by_peer(&self) -> u64 {
        self.cancelled_by_peer.load(Ordering::Relaxed)
    }
    /// Times the connection was closed because its output stayed full (the peer stopped
    /// reading) while a broadcast notification waited.
    pub fn slow_peer_disconnects(&self) -> u64 {
        self.slow_peer_disconnects.load(Ordering::Relaxed)
    }
}

pub(crate) struct Shared {
    /// Where the engine writes: a channel, a lane ([`crate::lane`]) or the transport itself.
    outbound: OutboundSink,
    pending: Mutex<IdMap<PendingEntry>>,
    /// The outbound requests' timer (lock order: `sweeper`, then `pending`).
    sweeper: Mutex<Sweeper>,
    inflight: Mutex<IdMap<CancellationToken>>,
    next_id: AtomicI64,
    /// Cancelled when the connection closes; only [`close`](Self::close) cancels it.
    closed: CancellationToken,
    /// `closed`, mirrored (set just before it is cancelled): read per frame and per answer, where
    /// the token's check would take its lock.
    closed_flag: AtomicBool,
    /// The peer's input ended: outbound requests can no longer be answered, but responses and
    /// notifications are still written until in-flight handlers have drained.
    input_done: AtomicBool,
    /// Whether a request ever left a decoder for its result (`typed_reply`): until then no
    /// frame is looked at for one (a server's connections, which make no such request).
    typed_requests: AtomicBool,
    /// Cancelled when the peer's input ends (long-lived requests such as a subscription end).
    input_closed: CancellationToken,
    batches_allowed: AtomicBool,
    request_timeout: Duration,
    pub(crate) control: Option<Arc<dyn crate::transport::TransportControl>>,
    pub(crate) stats: Stats,
    /// The connection's span (side, transport, session): every request and notification span is
    /// its child. Disabled, and free, when no subscriber listens.
    span: Span,
    /// The transport's kind (`stdio`, `http`, `sse`, `ws`, `memory`, `custom`).
    transport: &'static str,
    /// The revision the connection speaks, once known (the handshake's, or the 2026-07-28
    /// envelope's), for request spans.
    revision: OnceLock<Box<str>>,
}

impl Shared {
    /// Records what a request span says of its request: the tool or prompt, the span's name
    /// (`METHOD TARGET`) and the connection's revision.
    fn describe(&self, span: &Span, method: &str, target: Option<&str>) {
        if let Some(t) = target {
            span.record("tool", t);
        }
        span.record(
            "otel.name",
            crate::telemetry::span_name(method, target).as_str(),
        );
        if let Some(r) = self.revision.get() {
            span.record("revision", &**r);
        }
    }

    fn fail_pending(&self) {
        let drained: Vec<PendingEntry> = {
            let mut map = self.pending.lock().expect("pending lock");
            map.drain().map(|(_, v)| v).collect()
        };
        for entry in drained {
            let _ = entry.tx.send(Reply::Closed);
        }
    }

    /// Starts request `id`'s clock: it times out at `deadline` unless answered first.
    fn start_clock(self: &Arc<Self>, id: &RequestId, deadline: Deadline) {
        let due = {
            let mut pending = self.pending.lock().expect("pending lock");
            let Some(entry) = pending.get_mut(id) else {
                return;
            };
            entry.deadline = Some(deadline);
            entry.due()
        };
        let Some(due) = due else { return };
        let mut sweeper = self.sweeper.lock().expect("sweeper lock");
        if sweeper.armed.is_some_and(|armed| armed <= due) {
            return;
        }
        sweeper.armed = Some(due);
        match &sweeper.wake {
            Some(wake) => wake.notify_one(),
            None => {
                let wake = Arc::new(tokio::sync::Notify::new());
                sweeper.wake = Some(wake.clone());
                tokio::spawn(sweep(Arc::downgrade(self), wake, self.closed.clone()));
            }
        }
    }

    /// Fails every pending request whose deadline has passed, tells the peer, and re-arms for
    /// the earliest deadline left.
    fn expire(self: &Arc<Self>, now: Instant) {
        let mut sweeper = self.sweeper.lock().expect("sweeper lock");
        let mut due = Vec::new();
        let mut next: Option<Instant> = None;
        {
            let mut pending = self.pending.lock().expect("pending lock");
            for (id, entry) in pending.iter() {
                match entry.due() {
                    Some(at) if at <= now => due.push(id.clone()),
                    Some(at) => next = Some(next.map_or(at, |n| n.min(at))),
                    None => {}
                }
            }
            due.retain(|id| match pending.remove(id) {
                Some(entry) => {
                    let _ = entry.tx.send(Reply::TimedOut);
                    entry.tell_on_timeout
                }
                None => false,
            });
        }
        sweeper.armed = next;
        drop(sweeper);
        for id in due {
            if self.is_closed() {
                break;
            }
            // MCP's own params always serialize.
            if let Ok(params) = to_raw(&CancelledParams::new(id).with_reason("timeout")) {
                self.send_nowait(encode_notification(methods::CANCELLED, Some(&params)), None);
            }
        }
    }

    /// Whether the connection is closed (`closed` is cancelled), without taking the token's lock.
    fn is_closed(&self) -> bool {
        self.closed_flag.load(Ordering::Acquire)
    }

    /// Closes the connection: the mirror first, so that whoever sees the token cancelled also
    /// sees the flag set.
    fn close(&self) {
        self.closed_flag.store(true, Ordering::Release);
        self.closed.cancel();
    }

    /// Marks the connection closed and stops writing.
    #[cfg(any(feature = "client", feature = "server"))]
    pub(crate) fn shutdown(&self) {
        self.close();
        self.fail_pending();
        self.outbound.close();
    }

    async fn send(&self, frame: Vec<u8>, related: Option<RequestId>) -> Result<(), Error> {
        self.send_out(Outbound {
            frame,
            related,
            ..Outbound::default()
        })
        .await
    }

    async fn send_out(&self, out: Outbound) -> Result<(), Error> {
        if self.is_closed() {
            return Err(Error::ConnectionClosed);
        }
        self.queue(out).await.map_err(|_| Error::ConnectionClosed)
    }

    /// Hands `out` to the transport; waits for room.
    async fn queue(&self, out: Outbound) -> Result<(), Outbound> {
        self.outbound.send(out).await
    }

    /// [`queue`](Self::queue) without waiting.
    fn try_queue(&self, out: Outbound) -> Result<(), mpsc::error::TrySendError<Outbound>> {
        self.outbound.try_send(out)
    }

    /// Queues the response to request `id` when there is room (the usual case); returns it
    /// when the queue is full, for the caller to wait with. Nothing is sent once closed.
    fn answer(&self, id: RequestId, frame: Vec<u8>) -> Option<Outbound> {
        if self.is_closed() {
            return None;
        }
        let out = Outbound {
            frame,
            related: Some(id),
            completes: true,
            ..Outbound::default()
        };
        match self.try_queue(out) {
            Err(mpsc::error::TrySendError::Full(out)) => Some(out),
            _ => None,
        }
    }

    fn send_nowait(self: &Arc<Self>, frame: Vec<u8>, related: Option<RequestId>) {
        let out = Outbound {
            frame,
            related,
            ..Outbound::default()
        };
        match self.try_queue(out) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(m)) => {
                let shared = self.clone();
                tokio::spawn(async move {
                    let _ = shared.queue(m).await;
                });
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }
}

/// A handle to the other side of a connection: send requests and notifications to it.
///
/// A `Peer` given to a request handler is tied to that request, so what it sends is routed with
/// it (Streamable HTTP puts it on that request's stream).
#[derive(Clone)]
pub struct Peer {
    pub(crate) shared: Arc<Shared>,
    related: Option<RequestId>,
}

impl std::fmt::Debug for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peer")
            .field("related", &self.related)
            .finish()
    }
}

impl Peer {
    /// This peer, tied to request `id`.
    pub(crate) fn related_to(&self, id: RequestId) -> Peer {
        Peer {
            shared: self.shared.clone(),
            related: Some(id),
        }
    }

    /// Whether the connection is closed.
    pub fn is_closed(&self) -> bool {
        self.shared.is_closed()
    }

    /// The transport's kind: `stdio`, `http` (Streamable HTTP), `sse` (HTTP+SSE of 2024-11-05),
    /// `ws`, `memory`, or `custom` (a transport built with `Transport::from_channels`).
    pub fn transport(&self) -> &'static str {
        self.shared.transport
    }

    /// Resolves when the connection closes.
    pub async fn closed(&self) {
        self.shared.closed.cancelled().await
    }

    /// Resolves when the peer's input has ended (it can send nothing more), which may be before
    /// the connection closes: responses still go out while in-flight handlers drain.
    pub async fn input_closed(&self) {
        self.shared.input_closed.cancelled().await
    }

    /// Ends the stream carrying this peer's request, if the transport has such streams (see
    /// [`TransportControl`](crate::transport::TransportControl)).
    pub fn close_request_stream(&self) -> bool {
        match (&self.shared.control, &self.related) {
            (Some(c), Some(id)) => c.close_request_stream(id),
            _ => false,
        }
    }

    /// The connection's counters.
    pub fn stats(&self) -> &Stats {
        &self.shared.stats
    }

    /// Sends a notification.
    pub async fn notify<P: Serialize + ?Sized>(
        &self,
        method: &str,
        params: &P,
    ) -> Result<(), Error> {
        let raw = to_raw(params)?;
        self.send_notification(method, encode_notification(method, Some(&raw)))
            .await
    }

    /// Sends a notification without params.
    pub async fn notify_empty(&self, method: &str) -> Result<(), Error> {
        self.send_notification(method, encode_notification(method, None))
            .await
    }

    async fn send_notification(&self, method: &str, frame: Vec<u8>) -> Result<(), Error> {
        let span =
            tracing::debug_span!(parent: &self.shared.span, "notification", dir = "out", method);
        let res = self
            .shared
            .send(frame, self.related.clone())
            .instrument(span.clone())
            .await;
        tracing::debug!(parent: &span, outcome = outcome_of(&res), "sent");
        res
    }

    /// Sends a request with typed params and decodes the typed result.
    pub async fn request<P: Serialize + ?Sized, R: DeserializeOwned>(
        &self,
        method: &str,
        params: &P,
        options: RequestOptions,
    ) -> Result<R, Error> {
        let raw = self.request_serialized(method, params, options).await?;
        serde_json::from_str(raw.get())
            .map_err(|e| Error::Protocol(format!("invalid {method} result: {e}")))
    }

    /// Sends a request with raw params and returns the raw result.
    ///
    /// Its `request` span (when a subscriber enables it) names the method, the tool or prompt,
    /// the connection's revision and, once answered, the outcome; with the `otel` feature it is
    /// a child of the caller's span in OpenTelemetry, and the request carries its trace context
    /// in `_meta` (`traceparent`, `tracestate`).
    pub async fn request_raw(
        &self,
        method: &str,
        params: Option<Box<RawValue>>,
        options: RequestOptions,
    ) -> Result<Box<RawValue>, Error> {
        let span = self.request_span(method);
        self.request_raw_in(span, method, params, options).await
    }

    /// [`request_raw`](Self::request_raw) with params to serialize. When nothing reads or
    /// changes them on the way (no enabled span, no progress token to add), they are written
    /// straight into the request's frame: no raw copy of them first. A `Serialize` that fails
    /// fails the call before anything is sent, as [`to_raw`] would.
    pub(crate) async fn request_serialized<P: Serialize + ?Sized>(
        &self,
        method: &str,
        params: &P,
        options: RequestOptions,
    ) -> Result<Box<RawValue>, Error> {
        self.request_serialized_with(method, params, options, None)
            .await?
            .raw()
    }

    /// [`request_serialized`](Self::request_serialized) for a caller that wants the result as
    /// `R`: where that writes the params straight into the frame (nothing reads the request on
    /// the way), a usual response's result is decoded into `R` as its frame is read, in the one
    /// scan that checks it (see `typed_reply`); `Ok(Err(raw))` is the raw result otherwise (for
    /// the caller's decode, which words any error).
    #[cfg_attr(not(feature = "client"), allow(dead_code))]
    pub(crate) async fn request_serialized_typed<
        P: Serialize + ?Sized,
        R: serde::de::DeserializeOwned + Send + 'static,
    >(
        &self,
        method: &str,
        params: &P,
        options: RequestOptions,
    ) -> Result<Result<R, Box<RawValue>>, Error> {
        let decode: TypedDecode = crate::typed_reply::decode_as::<R>;
        match self
            .request_serialized_with(method, params, options, Some(decode))
            .await?
        {
            Answered::Raw(raw) => Ok(Err(raw)),
            Answered::Typed(any) => match any.downcast::<R>() {
                Ok(r) => Ok(Ok(*r)),
                Err(_) => Err(Error::Protocol(format!(
                    "invalid {method} result: not of the type decoded"
                ))),
            },
        }
    }

    /// Both of the above: the params written straight into the frame, with `decode` left for
    /// the response, when nothing reads the request on the way; the general way otherwise
    /// (answered raw).
    async fn request_serialized_with<P: Serialize + ?Sized>(
        &self,
        method: &str,
        params: &P,
        options: RequestOptions,
        decode: Option<TypedDecode>,
    ) -> Result<Answered, Error> {
        let span = self.request_span(method);
        if span.is_disabled() && options.on_progress.is_none() {
            let id = RequestId::Number(self.shared.next_id.fetch_add(1, Ordering::Relaxed));
            let frame = crate::jsonrpc::encode_request_serialized(&id, method, params)?;
            let prepared = Prepared::Frame { id, frame };
            return self
                .request_raw_traced(method, prepared, options, &span, decode)
                .await;
        }
        let params = Some(to_raw(params)?);
        self.request_raw_in(span, method, params, options)
            .await
            .map(Answered::Raw)
    }

    /// The span of one outbound request.
    fn request_span(&self, method: &str) -> Span {
        tracing::debug_span!(
            parent: &self.shared.span,
            "request",
            dir = "out",
            method,
            id = tracing::field::Empty,
            tool = tracing::field::Empty,
            revision = tracing::field::Empty,
            outcome = tracing::field::Empty,
            otel.name = tracing::field::Empty,
            otel.kind = "client",
            otel.status_code = tracing::field::Empty,
        )
    }

    async fn request_raw_in(
        &self,
        span: Span,
        method: &str,
        params: Option<Box<RawValue>>,
        options: RequestOptions,
    ) -> Result<Box<RawValue>, Error> {
        #[cfg_attr(not(feature = "otel"), allow(unused_mut))]
        let mut params = params;
        let started = if span.is_disabled() {
            None
        } else {
            let facts = crate::telemetry::Facts::read(params.as_deref());
            self.shared.describe(&span, method, facts.target(method));
            #[cfg(feature = "otel")]
            {
                crate::telemetry::join_current(&span);
                params = crate::telemetry::inject(&span, params)?;
            }
            Some(std::time::Instant::now())
        };
        let res = self
            .request_raw_traced(method, Prepared::Raw(params), options, &span, None)
            .instrument(span.clone())
            .await
            .and_then(Answered::raw);
        if let Some(started) = started {
            let outcome = outcome_of(&res);
            span.record("outcome", outcome.as_str());
            if res.is_err() {
                span.record("otel.status_code", "ERROR");
            }
            tracing::debug!(
                parent: &span,
                outcome,
                duration_us = started.elapsed().as_micros() as u64,
                "answered"
            );
        }
        res
    }

    async fn request_raw_traced(
        &self,
        method: &str,
        params: Prepared,
        options: RequestOptions,
        span: &Span,
        decode: Option<TypedDecode>,
    ) -> Result<Answered, Error> {
        let shared = &self.shared;
        let (id, params) = match params {
            Prepared::Raw(params) => (
                RequestId::Number(shared.next_id.fetch_add(1, Ordering::Relaxed)),
                Ok(params),
            ),
            Prepared::Frame { id, frame } => (id, Err(frame)),
        };
        span.record("id", tracing::field::display(&id));
        let params = match (&options.on_progress, params) {
            (Some(_), Ok(params)) => Ok(Some(with_progress_token(params, &id)?)),
            (_, params) => params,
        };
        let progress = options.on_progress.clone().map(|callback| {
            Arc::new(ProgressState {
                callback,
                last: Mutex::new(Instant::now()),
            })
        });
        let (tx, mut rx) = oneshot::channel();
        if decode.is_some() && !shared.typed_requests.load(Ordering::Relaxed) {
            shared.typed_requests.store(true, Ordering::Relaxed);
        }
        shared.pending.lock().expect("pending lock").insert(
            id.clone(),
            PendingEntry {
                tx,
                progress: progress.clone(),
                deadline: None,
                tell_on_timeout: method != methods::INITIALIZE,
                decode,
            },
        );
        let mut guard = PendingGuard {
            shared,
            id: id.clone(),
            armed: method != methods::INITIALIZE,
            in_map: true,
        };
        if shared.is_closed() || shared.input_done.load(Ordering::Acquire) {
            guard.disarm();
            return Err(Error::ConnectionClosed);
        }
        let frame = match params {
            Ok(params) => encode_request(&id, method, params.as_deref()),
            Err(frame) => frame,
        };
        let out = Outbound {
            frame,
            related: self.related.clone(),
            completes: false,
            request: shared.outbound.reads_requests().then(|| {
                Box::new(OutboundRequest {
                    id: id.clone(),
                    headers: options.headers.clone(),
                })
            }),
        };
        if let Err(e) = shared.send_out(out).await {
            guard.disarm();
            return Err(e);
        }
        let start = Instant::now();
        shared.start_clock(
            &id,
            Deadline {
                start,
                timeout: options.timeout.unwrap_or(shared.request_timeout),
                hard: options.max_total_timeout.map(|m| start + m),
                reset_on_progress: options.reset_timeout_on_progress,
            },
        );
        // Without a cancellation token the reply is all there is to wait for.
        let reply = match &options.cancel {
            None => rx.await,
            Some(token) => tokio::select! {
                // A reply that has come is the answer, even if the token fired meanwhile.
                biased;
                reply = &mut rx => reply,
                _ = token.cancelled() => {
                    guard.cancel("cancelled");
                    return Err(Error::Cancelled);
                }
            },
        };
        // Whoever answered (the engine, the sweeper, the close) took the entry off the map
        // first; the sweeper has told the peer of a timeout.
        guard.answered();
        match reply {
            Ok(Reply::Ok(v)) => Ok(Answered::Raw(v)),
            Ok(Reply::Typed(v)) => Ok(Answered::Typed(v)),
            Ok(Reply::Err(e)) => Err(Error::Rpc(e)),
            Ok(Reply::Failed(e)) => Err(e),
            Ok(Reply::TimedOut) => Err(Error::Timeout),
            Ok(Reply::Closed) | Err(_) => Err(Error::ConnectionClosed),
        }
    }
}

/// An outbound request's params: raw (read, and changed, on the way), or already written into
/// the request's frame under its id.
enum Prepared {
    Raw(Option<Box<RawValue>>),
    Frame { id: RequestId, frame: Vec<u8> },
}

fn with_progress_token(
    params: Option<Box<RawValue>>,
    id: &RequestId,
) -> Result<Box<RawValue>, Error> {
    let mut value: serde_json::Value = match params {
        Some(p) => serde_json::from_str(p.get()).map_err(|e| Error::Protocol(e.to_string()))?,
        None => serde_json::json!({}),
    };
    let obj = value.as_object_mut().ok_or_else(|| {
        Error::Protocol("params must be an object to carry a progress token".into())
    })?;
    let meta = obj.entry("_meta").or_insert_with(|| serde_json::json!({}));
    if let Some(meta) = meta.as_object_mut() {
        meta.insert(
            "progressToken".into(),
            serde_json::to_value(id).expect("id serializes"),
        );
    }
    Ok(to_raw(&value)?)
}

/// How an outbound message ended, for its span: `ok`, `error CODE` (the peer's JSON-RPC error),
/// `timeout`, `cancelled`, `closed`, or the local failure's kind.
fn outcome_of<T>(res: &Result<T, Error>) -> String {
    match res {
        Ok(_) => "ok".to_owned(),
        Err(Error::Rpc(e)) => format!("error {}", e.code),
        Err(Error::Timeout) => "timeout".to_owned(),
        Err(Error::Cancelled) => "cancelled".to_owned(),
        Err(Error::ConnectionClosed) => "closed".to_owned(),
        // The failure's kind, never its text: a protocol error quotes what the peer sent.
        Err(e) => format!("failed: {}", e.kind()),
    }
}

/// Removes a pending request when its future ends early, and tells the peer.
struct PendingGuard<'a> {
    shared: &'a Arc<Shared>,
    id: RequestId,
    /// Whether dropping the guard cancels the request (tells the peer).
    armed: bool,
    /// Whether the entry may still be on the pending map (false once it is known to be off it).
    in_map: bool,
}

impl PendingGuard<'_> {
    fn disarm(&mut self) {
        self.armed = false;
        self.in_map = false;
        self.shared
            .pending
            .lock()
            .expect("pending lock")
            .remove(&self.id);
    }

    /// The request's reply came: its entry is off the map (taken by whoever sent the reply,
    /// or dropped with its sender), so nothing is left to remove or cancel.
    fn answered(&mut self) {
        self.armed = false;
        self.in_map = false;
    }

    fn cancel(&mut self, reason: &str) {
        let was_pending = self
            .shared
            .pending
            .lock()
            .expect("pending lock")
            .remove(&self.id)
            .is_some();
        if self.armed && was_pending && !self.shared.is_closed() {
            // MCP's own params always serialize.
            if let Ok(params) = to_raw(&CancelledParams::new(self.id.clone()).with_reason(reason)) {
                self.shared
                    .send_nowait(encode_notification(methods::CANCELLED, Some(&params)), None);
            }
        }
        self.armed = false;
        self.in_map = false;
    }
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.cancel("request dropped");
        } else if self.in_map {
            self.shared
                .pending
                .lock()
                .expect("pending lock")
                .remove(&self.id);
        }
    }
}

/// The context of one inbound request (only a server's handlers read it).
#[derive(Debug, Clone)]
#[cfg_attr(not(feature = "server"), allow(dead_code))]
pub(crate) struct RequestContext {
    /// The request's id.
    pub id: RequestId,
    /// The peer, tied to this request.
    pub peer: Peer,
    /// Cancelled when the peer cancels the request or the connection closes.
    pub cancel: CancellationToken,
    /// What the transport attached to the frame that carried the request.
    pub transport: Option<TransportContext>,
}

/// What handles the inbound traffic of one connection.
pub(crate) trait Service: Send + Sync + 'static {
    /// `client` or `server`, for the connection's span.
    const SIDE: &'static str;

    /// Answers one request.
    fn request(
        self: &Arc<Self>,
        ctx: RequestContext,
        method: String,
        params: Option<Box<RawValue>>,
    ) -> BoxFuture<'static, HandlerOutput>;

    /// Sees a notification the moment it is read, before any later frame is processed (so a
    /// response that followed it on the wire is completed after this returns). Must not block.
    fn notification_received(&self, _method: &str, _params: Option<&RawValue>) {}

    /// Whether [`notification`](Self::notification) does anything. A service whose handler
    /// does nothing (the server's: everything it needs it does in `notification_received`)
    /// says so, and its connections get no notification queue and no task to run it.
    const HANDLES_NOTIFICATIONS: bool = true;

    /// Handles one notification; notifications are handled one at a time, in order.
    fn notification(
        self: &Arc<Self>,
        peer: &Peer,
        method: String,
        params: Option<Box<RawValue>>,
    ) -> BoxFuture<'static, ()>;

    /// The connection closed.
    fn closed(&self) {}

    /// Whether [`observe`](Self::observe) wants to hear of answered requests (a server with a
    /// request observer); when false, nothing is measured for it.
    fn observes(&self) -> bool {
        false
    }

    /// One inbound request was answered (or cancelled, or its handler panicked).
    fn observe(&self, _record: &RequestRecord<'_>) {}

    /// Whether this service has the tool (`tools/call`) or prompt (`prompts/get`) `name`: only
    /// a known name goes into a request's span name, `tool` field and observed record (any
    /// other is the caller's text, unbounded in number and length).
    fn knows_target(&self, _method: &str, _name: &str) -> bool {
        false
    }
}

/// Starts the engine over `transport`; returns the peer handle and the join handle of its loop.
#[cfg(feature = "client")]
pub(crate) fn start<S: Service>(
    transport: Transport,
    service: Arc<S>,
    config: EngineConfig,
) -> (Peer, tokio::task::JoinHandle<()>) {
    start_with(transport, service, config, |_| {})
}

/// Like [`start`], calling `before_reading` with the peer before the first frame is read, so a
/// service can register itself (and its peer) where handlers will look for it.
pub(crate) fn start_with<S: Service>(
    transport: Transport,
    service: Arc<S>,
    config: EngineConfig,
    before_reading: impl FnOnce(&Peer),
) -> (Peer, tokio::task::JoinHandle<()>) {
    let Transport {
        inbound,
        outbound,
        control,
        flushed,
        label: (transport_kind, session_id),
        ..
    } = transport;
    // A root: a connection outlives the span it was opened in (an upstream's, a discovery).
    let span = tracing::debug_span!(
        parent: None,
        "mcp.connection",
        side = S::SIDE,
        transport = transport_kind,
        session = session_id.as_deref().unwrap_or("")
    );
    let shared = Arc::new(Shared {
        outbound,
        pending: Mutex::new(IdMap::default()),
        sweeper: Mutex::new(Sweeper::default()),
        inflight: Mutex::new(IdMap::default()),
        next_id: AtomicI64::new(0),
        closed: CancellationToken::new(),
        closed_flag: AtomicBool::new(false),
        input_done: AtomicBool::new(false),
        typed_requests: AtomicBool::new(false),
        input_closed: CancellationToken::new(),
        batches_allowed: AtomicBool::new(false),
        request_timeout: config.request_timeout,
        control,
        stats: Stats::default(),
        span,
        transport: transport_kind,
        revision: OnceLock::new(),
    });
    let peer = Peer {
        shared: shared.clone(),
        related: None,
    };
    before_reading(&peer);
    let engine = Engine {
        peer: peer.clone(),
        permits: Arc::new(Semaphore::new(config.max_concurrent_requests)),
        service,
        config,
        notes: OnceLock::new(),
    };
    let join = tokio::spawn(run(engine, inbound, flushed));
    (peer, join)
}

#[cfg(feature = "http-server")]
/// A peer with no engine behind it, for one exchange that a transport serves itself (a
/// 2026-07-28 request over Streamable HTTP): what it sends goes to `outbound`; it cannot send
/// requests (there is no reader for their answers); `input_closed` ends its long-lived requests.
pub(crate) fn detached_peer(
    outbound: mpsc::Sender<Outbound>,
    related: RequestId,
    input_closed: CancellationToken,
) -> Peer {
    Peer {
        shared: Arc::new(Shared {
            outbound: OutboundSink::Channel {
                tx: outbound,
                close: CancellationToken::new(),
            },
            pending: Mutex::new(IdMap::default()),
            sweeper: Mutex::new(Sweeper::default()),
            inflight: Mutex::new(IdMap::default()),
            next_id: AtomicI64::new(0),
            closed: CancellationToken::new(),
            closed_flag: AtomicBool::new(false),
            input_done: AtomicBool::new(true),
            typed_requests: AtomicBool::new(false),
            input_closed,
            batches_allowed: AtomicBool::new(false),
            request_timeout: Duration::from_secs(60),
            control: None,
            stats: Stats::default(),
            span: Span::none(),
            transport: "http",
            revision: OnceLock::new(),
        }),
        related: Some(related),
    }
}

impl Peer {
    /// Sets the revision the connection speaks (once; later calls change nothing), which its
    /// request spans name.
    pub(crate) fn set_revision(&self, revision: &str) {
        let _ = self.shared.revision.set(revision.into());
    }

    /// Allows or refuses inbound batches (only 2025-03-26 allows them).
    pub(crate) fn set_batches_allowed(&self, allowed: bool) {
        self.shared
            .batches_allowed
            .store(allowed, Ordering::Relaxed);
    }

    /// Whether requests from the peer are being handled.
    #[cfg(all(feature = "server", feature = "ws"))]
    pub(crate) fn has_inflight_requests(&self) -> bool {
        !self
            .shared
            .inflight
            .lock()
            .expect("inflight lock")
            .is_empty()
    }

    /// Sends a notification to one of many peers (a broadcast) without waiting on this one: it
    /// is queued at once when the connection's queue has room; otherwise a task waits up to
    /// `patience` for room, and a peer whose output stays full that long (it stopped reading)
    /// is disconnected. A slow peer never delays the others, and nothing is dropped silently.
    #[cfg(any(feature = "server", feature = "client"))]
    pub(crate) fn notify_detached(&self, frame: Vec<u8>, patience: Duration) {
        let shared = &self.shared;
        if shared.is_closed() {
            return;
        }
        let out = Outbound {
            frame,
            ..Outbound::default()
        };
        match shared.try_queue(out) {
            Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => {}
            Err(mpsc::error::TrySendError::Full(out)) => {
                let shared = shared.clone();
                tokio::spawn(async move {
                    let sent = tokio::time::timeout(patience, shared.queue(out)).await;
                    if sent.is_err() {
                        shared
                            .stats
                            .slow_peer_disconnects
                            .fetch_add(1, Ordering::Relaxed);
                        shared.shutdown();
                    }
                });
            }
        }
    }
}

/// The engine's loop: reads until the input ends, then drains. Its future lives as long as the
/// connection (idle or not), so everything it holds is held once: the engine owns the peer, the
/// service and the configuration, and the rarely taken paths (oversize frames, malformed
/// frames, batches, refusals) are boxed where they are awaited.
async fn run<S: Service>(
    engine: Engine<S>,
    mut inbound: InboundSource,
    flushed: Option<CancellationToken>,
) {
    let shared = &engine.peer.shared;
    let config = &engine.config;
    tracing::debug!(parent: &shared.span, "connection open");
    // One wait for the close, made once: a new one per frame costs a registration per frame.
    let closed = shared.closed.cancelled();
    tokio::pin!(closed);
    let reason = loop {
        // A local close is seen before the next frame, as a biased select would see it; but a
        // frame already read (the usual case under load) costs only a look at the token, and
        // the wait is polled (registered) only when there is no frame to take.
        let recv = inbound.recv();
        tokio::pin!(recv);
        let item = std::future::poll_fn(|cx| {
            if shared.is_closed() {
                return Poll::Ready(None);
            }
            if let Poll::Ready(item) = recv.as_mut().poll(cx) {
                return Poll::Ready(Some(item));
            }
            closed.as_mut().poll(cx).map(|()| None)
        })
        .await;
        let Some(item) = item else {
            break "closed locally".to_owned();
        };
        let flow = match item {
            None => break "end of input".to_owned(),
            Some(Inbound::Failed(why)) => break format!("transport failed: {why}"),
            Some(Inbound::RequestFailed { id, error }) => {
                let entry = shared.pending.lock().expect("pending lock").remove(&id);
                if let Some(e) = entry {
                    let _ = e.tx.send(Reply::Failed(error));
                }
                ControlFlow::Continue(())
            }
            Some(Inbound::Oversize { len, head, tail }) => {
                Box::pin(engine.oversize(len, Peek::read(&head, &tail))).await
            }
            Some(item)
                if item
                    .frame_bytes()
                    .is_some_and(|b| b.len() > config.max_frame_bytes) =>
            {
                let bytes: &[u8] = item.frame_bytes().map_or(&[], |b| b);
                Box::pin(engine.oversize(bytes.len(), Peek::frame(bytes))).await
            }
            Some(Inbound::Frame(bytes)) => engine.frame(bytes, None).await,
            Some(Inbound::FrameWithContext { frame, context }) => {
                engine.frame(frame, Some(context)).await
            }
            Some(Inbound::Decoded(d)) => {
                let DecodedFrame {
                    message, context, ..
                } = *d;
                engine.message(message, Some(context)).await
            }
        };
        if let ControlFlow::Break(e) = flow {
            let reason = format!("protocol violation: {e}");
            engine.violation(e);
            break reason;
        }
    };
    // End of input: no new work, and pending outbound requests fail now (no answer can come).
    // Output stays open while in-flight handlers drain, so their responses still go out.
    shared.input_done.store(true, Ordering::Release);
    shared.input_closed.cancel();
    shared.fail_pending();
    // The notification queue closes here; its task ends after what is queued.
    let notes = engine.notes.into_inner().map(|(_, task)| task);
    let all = config.max_concurrent_requests as u32;
    if tokio::time::timeout(config.drain_timeout, engine.permits.acquire_many(all))
        .await
        .is_err()
    {
        let tokens: Vec<CancellationToken> = shared
            .inflight
            .lock()
            .expect("inflight lock")
            .values()
            .cloned()
            .collect();
        for t in tokens {
            t.cancel();
        }
    }
    if let Some(notes) = notes {
        let _ = notes.await;
    }
    shared.close();
    shared.fail_pending();
    shared.outbound.close();
    // Return only once the output is written: a stdio server exits when this returns.
    if let Some(flushed) = flushed {
        let _ = tokio::time::timeout(config.drain_timeout, flushed.cancelled()).await;
    }
    tracing::debug!(parent: &shared.span, reason = %reason, "connection closed");
    engine.service.closed();
}

/// A notification for the service's handler: method, params and its span. Boxed, because a
/// tokio channel allocates its slots in blocks of 32 when it is created: a 72-byte item costs
/// every connection about 2.3 KiB more, idle or not, than a pointer does; notifications are
/// rare next to requests, so the allocation per notification is the cheaper side.
type Note = Box<(String, Option<Box<RawValue>>, Span)>;

struct Engine<S> {
    peer: Peer,
    service: Arc<S>,
    permits: Arc<Semaphore>,
    config: EngineConfig,
    /// The notification queue and the task that handles it, started by the first notification
    /// the service's handler must see: a connection that receives none (and every server
    /// connection, whose handler does nothing) costs neither the queue's block of slots nor the
    /// task.
    notes: OnceLock<(mpsc::Sender<Note>, tokio::task::JoinHandle<()>)>,
}

impl<S: Service> Engine<S> {
    /// Hands a notification to the service's handler, in order behind the earlier ones.
    async fn handle_notification(&self, method: String, params: Option<Box<RawValue>>, span: Span) {
        if !S::HANDLES_NOTIFICATIONS {
            tracing::debug!(parent: &span, duration_us = 0u64, "handled");
            return;
        }
        let (notes, _) = self.notes.get_or_init(|| {
            let (tx, mut rx) = mpsc::channel::<Note>(self.config.notification_queue);
            let service = self.service.clone();
            let peer = self.peer.clone();
            let task = tokio::spawn(async move {
                while let Some(note) = rx.recv().await {
                    let (method, params, span) = *note;
                    let started = (!span.is_disabled()).then(std::time::Instant::now);
                    service
                        .notification(&peer, method, params)
                        .instrument(span.clone())
                        .await;
                    if let Some(started) = started {
                        tracing::debug!(
                            parent: &span,
                            duration_us = started.elapsed().as_micros() as u64,
                            "handled"
                        );
                    }
                }
            });
            (tx, task)
        });
        let _ = notes.send(Box::new((method, params, span))).await;
    }
}

/// An encoded frame and the request it belongs to.
type Out = (Vec<u8>, Option<RequestId>);

impl<S: Service> Engine<S> {
    /// One frame within the bound, with what its transport attached.
    async fn frame(
        &self,
        bytes: bytes::Bytes,
        context: Option<TransportContext>,
    ) -> ControlFlow<Error> {
        if self.typed_reply(&bytes) {
            return ControlFlow::Continue(());
        }
        match decode_frame(&bytes) {
            Frame::Single(Ok(msg)) => self.message(msg, context).await,
            Frame::Single(Err(e)) => Box::pin(self.malformed(&bytes, e)).await,
            Frame::Batch(items) => Box::pin(self.batch(items, context.as_ref())).await,
        }
    }

    /// Answers the request a frame answers when the frame is the usual response to a request
    /// that left a decoder, and the decoder reads its result (see `typed_reply`): what reading
    /// the frame then answering it would do, the result decoded once. `false` (nothing done)
    /// otherwise: the frame is read the general way.
    fn typed_reply(&self, bytes: &[u8]) -> bool {
        // Set before any such request is sent; a stale `false` would only send the frame the
        // general way.
        if !self.peer.shared.typed_requests.load(Ordering::Relaxed) {
            return false;
        }
        let Some((id, text)) = crate::typed_reply::usual_result(bytes) else {
            return false;
        };
        let id = RequestId::Number(id);
        let mut pending = self.peer.shared.pending.lock().expect("pending lock");
        let Some(decode) = pending.get(&id).and_then(|e| e.decode) else {
            return false;
        };
        // Decoded under the lock: the entry is taken only when it is answered.
        let Some(value) = decode(text) else {
            return false;
        };
        let entry = pending.remove(&id);
        drop(pending);
        if let Some(e) = entry {
            let _ = e.tx.send(Reply::Typed(value));
        }
        true
    }

    /// One decoded message, with what its transport attached.
    async fn message(&self, msg: Message, context: Option<TransportContext>) -> ControlFlow<Error> {
        match self.dispatch(msg, false, context.as_ref()).await {
            Dispatched::Send((frame, related)) => {
                let _ = Box::pin(self.peer.shared.send(frame, related)).await;
                ControlFlow::Continue(())
            }
            Dispatched::Close(e) => ControlFlow::Break(e),
            _ => ControlFlow::Continue(()),
        }
    }

    async fn reject(&self, e: DecodeError) {
        self.peer
            .shared
            .stats
            .malformed_frames
            .fetch_add(1, Ordering::Relaxed);
        let _ = self
            .peer
            .shared
            .send(encode_error(e.id.as_ref(), &e.error), None)
            .await;
    }

    /// A frame over the bound, of which only `peek` was read. A response fails the request it
    /// names at once; a request is answered -32600 with its id; what names nothing goes to
    /// [`Engine::unnamed`] when it may answer a request in flight.
    async fn oversize(&self, len: usize, peek: Peek) -> ControlFlow<Error> {
        let limit = self.config.max_frame_bytes;
        let too_large = || Error::ResponseTooLarge { len, limit };
        if !peek.method {
            // A response, or nothing readable: it fails the request it names, if any.
            let done = match &peek.id {
                PeekId::Id(id) => {
                    // Not a response to anything of ours, and not known to be a response: it is
                    // answered below, like a request.
                    self.take_pending(id, Reply::Failed(too_large())) || peek.response
                }
                _ if peek.response || !self.no_pending() => {
                    self.count_malformed();
                    return self.unnamed(
                        Reply::Failed(too_large()),
                        &format!(
                            "a frame of {len} bytes, over the {limit}-byte limit, names no request"
                        ),
                    );
                }
                _ => false,
            };
            if done {
                self.count_malformed();
                return ControlFlow::Continue(());
            }
        }
        let id = match peek.id {
            PeekId::Id(id) => Some(id),
            _ => None,
        };
        self.reject(DecodeError {
            id,
            error: Box::new(ErrorObject::new(
                RpcErrorCode::INVALID_REQUEST,
                format!("Invalid request: frame of {len} bytes exceeds the {limit}-byte limit"),
            )),
        })
        .await;
        ControlFlow::Continue(())
    }

    /// A frame that could not be decoded. A response is never answered: it fails the request it
    /// names (or goes to [`Engine::unnamed`]); anything else is answered with the error.
    async fn malformed(&self, bytes: &[u8], e: DecodeError) -> ControlFlow<Error> {
        let peek = Peek::frame(bytes);
        if !peek.is_response() {
            self.reject(e).await;
            return ControlFlow::Continue(());
        }
        self.count_malformed();
        let why = Error::Protocol(format!("malformed response: {}", e.error.message));
        match peek.id {
            PeekId::Id(id) => {
                self.take_pending(&id, Reply::Failed(why));
                ControlFlow::Continue(())
            }
            PeekId::Null => self.unnamed(
                Reply::Failed(Error::Protocol("the peer answered with id null".into())),
                "a response with id null",
            ),
            PeekId::Unknown => self.unnamed(Reply::Failed(why), "a malformed response"),
        }
    }

    /// A response that names no request (id null, or unreadable). With no request in flight it
    /// is counted and dropped; with exactly one it can only answer that one, which ends with
    /// `reply`; with several no request can be named: the connection closes as a protocol
    /// violation rather than leaving them to time out.
    fn unnamed(&self, reply: Reply, what: &str) -> ControlFlow<Error> {
        let shared = &self.peer.shared;
        let mut pending = shared.pending.lock().expect("pending lock");
        match pending.len() {
            0 => {
                drop(pending);
                shared
                    .stats
                    .unmatched_responses
                    .fetch_add(1, Ordering::Relaxed);
                ControlFlow::Continue(())
            }
            1 => {
                let entry = pending.drain().map(|(_, e)| e).next();
                drop(pending);
                if let Some(entry) = entry {
                    let _ = entry.tx.send(reply);
                }
                ControlFlow::Continue(())
            }
            n => ControlFlow::Break(Error::Protocol(format!(
                "{what} while {n} requests were in flight; connection closed"
            ))),
        }
    }

    /// Ends every pending request with `error`; the caller stops reading (the connection ends).
    fn violation(&self, error: Error) {
        let drained: Vec<PendingEntry> = {
            let mut map = self.peer.shared.pending.lock().expect("pending lock");
            map.drain().map(|(_, v)| v).collect()
        };
        for entry in drained {
            let _ = entry.tx.send(Reply::Failed(error.clone()));
        }
    }

    /// Completes pending request `id` with `reply`; false (and counted) when there is none.
    fn take_pending(&self, id: &RequestId, reply: Reply) -> bool {
        let entry = self
            .peer
            .shared
            .pending
            .lock()
            .expect("pending lock")
            .remove(id);
        match entry {
            Some(e) => {
                let _ = e.tx.send(reply);
                true
            }
            None => {
                self.peer
                    .shared
                    .stats
                    .unmatched_responses
                    .fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    fn no_pending(&self) -> bool {
        self.peer
            .shared
            .pending
            .lock()
            .expect("pending lock")
            .is_empty()
    }

    fn count_malformed(&self) {
        self.peer
            .shared
            .stats
            .malformed_frames
            .fetch_add(1, Ordering::Relaxed);
    }

    async fn batch(
        &self,
        items: Vec<Result<Message, DecodeError>>,
        context: Option<&TransportContext>,
    ) -> ControlFlow<Error> {
        if !self.peer.shared.batches_allowed.load(Ordering::Relaxed) {
            self.reject(DecodeError {
                id: None,
                error: Box::new(ErrorObject::new(
                    RpcErrorCode::INVALID_REQUEST,
                    "Invalid request: batches are only allowed in protocol version 2025-03-26",
                )),
            })
            .await;
            return ControlFlow::Continue(());
        }
        let mut ready: Vec<Vec<u8>> = Vec::new();
        // Requests' answers, in the order the requests came (whether answered in place or by a
        // task), after the rejections.
        let mut waits: Vec<BatchAnswer> = Vec::new();
        for item in items {
            match item {
                Ok(msg) => match self.dispatch(msg, true, context).await {
                    Dispatched::Nothing => {}
                    Dispatched::Send((frame, _)) => ready.push(frame),
                    Dispatched::Task(task) => waits.push(Err(task)),
                    Dispatched::Ready(frame) => waits.push(Ok(frame)),
                    Dispatched::Close(e) => return ControlFlow::Break(e),
                },
                Err(e) => ready.push(encode_error(e.id.as_ref(), &e.error)),
            }
        }
        let shared = self.peer.shared.clone();
        tokio::spawn(async move {
            let mut frames = ready;
            for w in waits {
                match w {
                    Ok(f) => frames.push(f),
                    Err(task) => {
                        if let Ok(Some(f)) = task.await {
                            frames.push(f);
                        }
                    }
                }
            }
            if frames.is_empty() {
                return;
            }
            let mut joined =
                Vec::with_capacity(frames.iter().map(|f| f.len() + 1).sum::<usize>() + 2);
            joined.push(b'[');
            for (i, f) in frames.iter().enumerate() {
                if i > 0 {
                    joined.push(b',');
                }
                joined.extend_from_slice(f);
            }
            joined.push(b']');
            let _ = shared.send(joined, None).await;
        });
        ControlFlow::Continue(())
    }

    /// Handles one message. Outside a batch, a request's response is sent by its task; inside a
    /// batch, the task returns the encoded response for the batch to collect.
    async fn dispatch(
        &self,
        msg: Message,
        in_batch: bool,
        context: Option<&TransportContext>,
    ) -> Dispatched {
        let shared = &self.peer.shared;
        match msg {
            Message::Request { id, method, params } => {
                // On a current-thread runtime (a stdio server's) the request is polled once in
                // place before the next frame is read (below). Nothing else runs while it is, so
                // a request that answers then can be neither cancelled nor counted by anyone: it
                // enters the in-flight map, and takes a permit when one is free, only if it
                // waits. When every permit is taken it waits for one here, as everywhere.
                let in_place = tokio::runtime::Handle::try_current().is_ok_and(|h| {
                    h.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread
                });
                let token = CancellationToken::new();
                {
                    let mut inflight = shared.inflight.lock().expect("inflight lock");
                    if inflight.contains_key(&id) {
                        drop(inflight);
                        let err = ErrorObject::new(
                            RpcErrorCode::INVALID_REQUEST,
                            format!("Invalid request: request id {id} is already in use"),
                        );
                        return Dispatched::Send((encode_error(Some(&id), &err), Some(id)));
                    }
                    if !in_place {
                        inflight.insert(id.clone(), token.clone());
                    }
                }
                let permit = if in_place && self.permits.available_permits() > 0 {
                    None
                } else {
                    Some(
                        self.permits
                            .clone()
                            .acquire_owned()
                            .await
                            .expect("semaphore never closed"),
                    )
                };
                let ctx = RequestContext {
                    id: id.clone(),
                    peer: self.peer.related_to(id.clone()),
                    cancel: token.clone(),
                    transport: context.cloned(),
                };
                // Polled in place, its task holds the permit if it waits.
                let (permit, task_permit) = match in_place {
                    true => (permit, None),
                    false => (None, permit),
                };
                // `initialize` completes before the next frame is read, so a client that sends
                // more right behind it finds the session initialized.
                let handshake = method == methods::INITIALIZE && !in_batch;
                let span = tracing::debug_span!(
                    parent: &shared.span,
                    "request",
                    dir = "in",
                    method = crate::telemetry::method_label(&method),
                    %id,
                    tool = tracing::field::Empty,
                    revision = tracing::field::Empty,
                    outcome = tracing::field::Empty,
                    otel.name = tracing::field::Empty,
                    otel.kind = "server",
                    otel.status_code = tracing::field::Empty,
                );
                // The request's facts are read only for an enabled span or an observer.
                let observer = self.service.observes().then(|| self.service.clone());
                let traced = !span.is_disabled();
                let mut target: Option<Box<str>> = None;
                let started = if traced || observer.is_some() {
                    let facts = crate::telemetry::Facts::read(params.as_deref());
                    target = facts
                        .target(&method)
                        .filter(|t| self.service.knows_target(&method, t))
                        .map(Box::from);
                    if traced {
                        let label = crate::telemetry::method_label(&method);
                        shared.describe(&span, label, target.as_deref());
                        #[cfg(feature = "otel")]
                        {
                            let meta = facts.meta.as_ref();
                            crate::telemetry::join_remote(
                                &span,
                                meta.and_then(|m| m.traceparent.as_deref()),
                                meta.and_then(|m| m.tracestate.as_deref()),
                            );
                        }
                    }
                    Some(std::time::Instant::now())
                } else {
                    None
                };
                let observed_method = observer.is_some().then(|| method.clone());
                let mut fut = CatchUnwind(self.service.request(ctx, method, params));
                let answering = Answering {
                    id,
                    token,
                    started,
                    traced,
                    span: span.clone(),
                    observer,
                    observed_method,
                    target,
                };
                // On a current-thread runtime (a stdio server's) the handler is polled once in
                // place first: one that answers without waiting (most do) costs no task, no
                // task switch, not even the future that would wait for it, and its response is
                // queued before the next frame is read. Only one that waits moves into a task
                // of its own (the handler's future is boxed, so what it registered while polled
                // here still finds it; its first poll there registers the task's waker). On a
                // multi-thread runtime every request gets its task as before: polled in place
                // there, a gateway's read answered later one at a time (its handler waits on
                // the upstream), paired against main in four runs.
                if in_place {
                    let first = std::future::poll_fn(|cx| {
                        let _in = span.enter();
                        Poll::Ready(Pin::new(&mut fut).poll(cx))
                    })
                    .await;
                    if let Poll::Ready(res) = first {
                        drop(permit);
                        let frame = {
                            let _in = span.enter();
                            answering.frame(Some(res))
                        };
                        let Some(frame) = frame else {
                            return Dispatched::Nothing;
                        };
                        if in_batch {
                            return Dispatched::Ready(frame);
                        }
                        if let Some(out) = shared.answer(answering.id, frame) {
                            let _ = Box::pin(shared.send_out(out)).await;
                        }
                        return Dispatched::Nothing;
                    }
                }
                // Polled in place and waiting: from now on it is in flight (cancellable, counted,
                // drained) as on any runtime, until its task has answered. The guard its task
                // holds takes it out of the map, then gives the permit back, as the task ends
                // (kept in the task's own future: a wrapper future around the task would hold
                // the task twice, as its capture and as what it awaits, and a task of 1 KiB or
                // more is an allocation that makes the allocator consolidate its bins).
                let in_flight = match (in_place, permit) {
                    (false, _) => None,
                    (true, permit) => {
                        let id = answering.id.clone();
                        shared
                            .inflight
                            .lock()
                            .expect("inflight lock")
                            .insert(id.clone(), answering.token.clone());
                        let permit = match permit {
                            Some(p) => p,
                            None => match self.permits.clone().try_acquire_owned() {
                                Ok(p) => p,
                                // Not reached (nothing ran since a permit was seen free), but
                                // a wait is what a full engine does.
                                Err(_) => self
                                    .permits
                                    .clone()
                                    .acquire_owned()
                                    .await
                                    .expect("semaphore never closed"),
                            },
                        };
                        Some(InFlight {
                            shared: shared.clone(),
                            id,
                            _permit: permit,
                        })
                    }
                };
                let shared = shared.clone();
                let grace = self.config.cancel_grace;
                let task = async move {
                    // Dropped last: after the answer is queued (the peer may reuse the id as
                    // soon as it has it), before anything else runs.
                    let _in_flight = in_flight;
                    let _permit = task_permit;
                    let res = tokio::select! {
                        biased;
                        r = &mut fut => Some(r),
                        _ = answering.token.cancelled() => None,
                    };
                    // Polled in place, the request entered the map only if it waited, and
                    // then its guard removes it (above).
                    if !in_place {
                        shared
                            .inflight
                            .lock()
                            .expect("inflight lock")
                            .remove(&answering.id);
                    }
                    let cancelled = res.is_none();
                    let Some(frame) = answering.frame(res) else {
                        if cancelled {
                            // Cancelled: let the handler observe it, then drop it. No response.
                            let _ = Box::pin(tokio::time::timeout(grace, &mut fut)).await;
                        }
                        return None;
                    };
                    if in_batch {
                        return Some(frame);
                    }
                    // Queued at once when there is room (the usual case); only a full queue
                    // waits, in a future of its own, so that this task stays small: it is
                    // moved into its task cell, and every byte of it is copied per request.
                    if let Some(out) = shared.answer(answering.id, frame) {
                        let _ = Box::pin(shared.send_out(out)).await;
                    }
                    None
                }
                .instrument(span);
                let task = tokio::spawn(task);
                if handshake {
                    let _ = task.await;
                    return Dispatched::Nothing;
                }
                Dispatched::Task(task)
            }
            Message::Notification { method, params } => {
                let span = tracing::debug_span!(
                    parent: &shared.span,
                    "notification",
                    dir = "in",
                    method = crate::telemetry::method_label(&method)
                );
                tracing::trace!(parent: &span, "received");
                if method == methods::CANCELLED {
                    if let Ok(p) = crate::jsonrpc::from_params::<CancelledParams>(params.as_deref())
                    {
                        let token = shared
                            .inflight
                            .lock()
                            .expect("inflight lock")
                            .get(&p.request_id)
                            .cloned();
                        if let Some(t) = token {
                            shared
                                .stats
                                .cancelled_by_peer
                                .fetch_add(1, Ordering::Relaxed);
                            t.cancel();
                        }
                    }
                    return Dispatched::Nothing;
                }
                if method == methods::PROGRESS {
                    if let Ok(p) = crate::jsonrpc::from_params::<ProgressParams>(params.as_deref())
                    {
                        let state = shared
                            .pending
                            .lock()
                            .expect("pending lock")
                            .get(&p.progress_token)
                            .and_then(|e| e.progress.clone());
                        if let Some(state) = state {
                            *state.last.lock().expect("progress lock") = Instant::now();
                            (state.callback)(&p);
                        }
                    }
                }
                self.service
                    .notification_received(&method, params.as_deref());
                self.handle_notification(method, params, span).await;
                Dispatched::Nothing
            }
            Message::Response { id, result } => {
                self.complete(&id, Reply::Ok(result));
                Dispatched::Nothing
            }
            Message::Error {
                id: Some(id),
                error,
            } => {
                self.complete(&id, Reply::Err(error));
                Dispatched::Nothing
            }
            Message::Error { id: None, error } => {
                let what = format!("an error response with id null ({error})");
                match self.unnamed(Reply::Err(error), &what) {
                    ControlFlow::Continue(()) => Dispatched::Nothing,
                    ControlFlow::Break(e) => Dispatched::Close(e),
                }
            }
        }
    }

    fn complete(&self, id: &RequestId, reply: Reply) {
        self.take_pending(id, reply);
    }
}

/// A batch element's answer: made while it was dispatched, or to come from its task.
type BatchAnswer = Result<Vec<u8>, tokio::task::JoinHandle<Option<Vec<u8>>>>;

/// What dispatching one message produced.
enum Dispatched {
    /// Nothing to send now.
    Nothing,
    /// A frame to send now (a rejection).
    Send(Out),
    /// A request's task; it sends its own response, or returns it inside a batch.
    Task(tokio::task::JoinHandle<Option<Vec<u8>>>),
    /// A batch element's response, answered while it was dispatched.
    Ready(Vec<u8>),
    /// A protocol violation that ends the connection.
    Close(Error),
}

/// Polls a future, turning a panic into an error message.
/// What answering a request takes once its handler is done: its id, its cancellation, and what
/// its span and its observer are told.
/// A request polled in place that went on waiting in a task of its own: its entry in the
/// in-flight map and its permit, taken out and given back (in that order) when the task ends,
/// answered, cancelled or dropped.
struct InFlight {
    shared: Arc<Shared>,
    id: RequestId,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.shared
            .inflight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.id);
    }
}

struct Answering<S> {
    id: RequestId,
    token: CancellationToken,
    started: Option<std::time::Instant>,
    traced: bool,
    span: Span,
    observer: Option<Arc<S>>,
    observed_method: Option<String>,
    target: Option<Box<str>>,
}

impl<S: Service> Answering<S> {
    /// Records how the request ended (`None`: cancelled before its handler answered) and
    /// encodes its response; `None` when it gets none (cancelled, even if the handler then
    /// returned: the peer gets no response after a cancel).
    fn frame(&self, res: Option<Result<HandlerOutput, String>>) -> Option<Vec<u8>> {
        let token = &self.token;
        if let Some(started) = self.started {
            let duration = started.elapsed();
            let outcome = match &res {
                _ if token.is_cancelled() => RequestOutcome::Cancelled,
                Some(Ok(Ok(v)))
                    if self.target.is_some()
                        && crate::telemetry::is_tool_error(v.result_text()) =>
                {
                    RequestOutcome::ToolError
                }
                Some(Ok(Ok(_))) => RequestOutcome::Ok,
                Some(Ok(Err(e))) => RequestOutcome::Error(e.code),
                Some(Err(_)) => RequestOutcome::Panicked,
                None => RequestOutcome::Cancelled,
            };
            if self.traced {
                crate::telemetry::answered(&self.span, outcome, duration);
            }
            if let (Some(service), Some(method)) = (&self.observer, &self.observed_method) {
                service.observe(&RequestRecord {
                    method,
                    tool: self.target.as_deref(),
                    outcome,
                    duration,
                });
            }
        }
        let id = &self.id;
        match res? {
            _ if token.is_cancelled() => None,
            Ok(Ok(v)) => Some(v.into_frame(id)),
            Ok(Err(e)) => Some(encode_error(Some(id), &e)),
            Err(panic) => {
                // The panic text is the handler's business (paths, values): it goes to the
                // host's log, and the peer learns only that it failed.
                tracing::error!(%id, panic = %panic, "request handler panicked");
                Some(encode_error(
                    Some(id),
                    &ErrorObject::internal("Internal error"),
                ))
            }
        }
    }
}

/// What a request's handler returns: its result (raw, or already in its response frame) or
/// the error the peer gets.
pub(crate) type HandlerOutput = Result<Answer, ErrorObject>;

struct CatchUnwind<F>(Pin<Box<F>>)
where
    F: Future + ?Sized;

impl<T> Future for CatchUnwind<dyn Future<Output = T> + Send> {
    type Output = Result<T, String>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match std::panic::catch_unwind(AssertUnwindSafe(|| self.0.as_mut().poll(cx))) {
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(panic) => {
                let msg = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "handler panicked".to_owned());
                Poll::Ready(Err(msg))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::memory;

    /// A service whose `now` answers at once and whose `wait` answers after its gate opens;
    /// each records how many requests the connection's in-flight map held while it ran.
    struct Probe {
        held: Mutex<Vec<(String, usize)>>,
        gate: tokio::sync::Notify,
    }

    impl Service for Probe {
        const SIDE: &'static str = "server";

        fn request(
            self: &Arc<Self>,
            ctx: RequestContext,
            method: String,
            _params: Option<Box<RawValue>>,
        ) -> BoxFuture<'static, HandlerOutput> {
            let this = self.clone();
            Box::pin(async move {
                if method == "wait" {
                    this.gate.notified().await;
                }
                let n = ctx
                    .peer
                    .shared
                    .inflight
                    .lock()
                    .expect("inflight lock")
                    .len();
                this.held.lock().expect("held lock").push((method, n));
                Ok(to_raw(&()).expect("null serializes").into())
            })
        }

        fn notification(
            self: &Arc<Self>,
            _peer: &Peer,
            _method: String,
            _params: Option<Box<RawValue>>,
        ) -> BoxFuture<'static, ()> {
            Box::pin(async {})
        }
    }

    fn probe(config: EngineConfig) -> (Arc<Probe>, memory::RawEnd) {
        let (service, raw, _) = probe_peer(config);
        (service, raw)
    }

    fn probe_peer(config: EngineConfig) -> (Arc<Probe>, memory::RawEnd, Peer) {
        let service = Arc::new(Probe {
            held: Mutex::new(Vec::new()),
            gate: tokio::sync::Notify::new(),
        });
        let (t, raw) = memory::raw();
        let (peer, _) = start(t, service.clone(), config);
        (service, raw, peer)
    }

    fn request(id: u32, method: &str) -> String {
        format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}"}}"#)
    }

    fn answer(id: u32) -> String {
        format!(r#"{{"jsonrpc":"2.0","id":{id},"result":null}}"#)
    }

    /// The closed flag mirrors the close token: open, neither says closed; once the connection
    /// has closed (its input ended), whoever sees the token cancelled sees the flag set.
    #[tokio::test]
    async fn the_closed_flag_mirrors_the_close_token() {
        let (_service, raw, peer) = probe_peer(EngineConfig::default());
        raw.send(request(1, "now")).await;
        assert!(!peer.is_closed() && !peer.shared.closed.is_cancelled());
        drop(raw);
        tokio::time::timeout(Duration::from_secs(5), peer.closed())
            .await
            .expect("closes");
        assert!(peer.is_closed() && peer.shared.closed.is_cancelled());
    }

    /// On a current-thread runtime a request answered while polled in place never enters the
    /// in-flight map (nothing could cancel it); one that waits does, for as long as it waits,
    /// and is cancellable there.
    #[tokio::test]
    async fn a_request_answered_in_place_is_never_in_flight() {
        let (service, mut raw) = probe(EngineConfig::default());
        raw.send(request(1, "now")).await;
        assert_eq!(raw.recv().await.unwrap(), answer(1));
        raw.send(request(2, "wait")).await;
        raw.send(request(3, "now")).await;
        assert_eq!(raw.recv().await.unwrap(), answer(3));
        service.gate.notify_one();
        assert_eq!(raw.recv().await.unwrap(), answer(2));
        // Its entry is gone with its answer: the id can be used again at once.
        raw.send(request(2, "now")).await;
        assert_eq!(raw.recv().await.unwrap(), answer(2));
        let held = service.held.lock().unwrap().clone();
        let held: Vec<(&str, usize)> = held.iter().map(|(m, n)| (m.as_str(), *n)).collect();
        assert_eq!(
            held,
            [("now", 0), ("now", 1), ("wait", 1), ("now", 0)],
            "requests in flight while each ran"
        );
    }

    /// The concurrency limit holds for requests polled in place: with one permit taken by a
    /// request that waits, the next request waits for it, even one that would answer at once.
    #[tokio::test]
    async fn a_request_polled_in_place_waits_for_a_permit_like_any_other() {
        let config = EngineConfig {
            max_concurrent_requests: 1,
            ..EngineConfig::default()
        };
        let (service, mut raw) = probe(config);
        raw.send(request(1, "wait")).await;
        raw.send(request(2, "now")).await;
        let early = tokio::time::timeout(Duration::from_millis(200), raw.recv()).await;
        assert!(early.is_err(), "answered beyond the limit: {early:?}");
        service.gate.notify_one();
        assert_eq!(raw.recv().await.unwrap(), answer(1));
        assert_eq!(raw.recv().await.unwrap(), answer(2));
        // Both answered, the permit is free again: an answer at once comes at once.
        raw.send(request(3, "now")).await;
        assert_eq!(raw.recv().await.unwrap(), answer(3));
    }

    /// Params that cannot be serialized.
    struct Unwritable;

    impl Serialize for Unwritable {
        fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
            Err(serde::ser::Error::custom("no JSON for this"))
        }
    }

    /// Typed params go straight into the request's frame: the bytes are those of raw params,
    /// and params that cannot be serialized fail the call before anything is sent or waited for.
    #[tokio::test]
    async fn typed_params_are_written_into_the_frame_and_a_failure_sends_nothing() {
        let (_, mut raw, peer) = probe_peer(EngineConfig::default());
        let failed = peer
            .request::<_, serde_json::Value>("m", &Unwritable, RequestOptions::default())
            .await;
        assert!(
            matches!(&failed, Err(Error::Encode(e)) if e.contains("no JSON for this")),
            "{failed:?}"
        );
        let quiet = tokio::time::timeout(Duration::from_millis(100), raw.recv()).await;
        assert!(quiet.is_err(), "sent: {quiet:?}");
        // (Its id, 0, was taken: ids need only be unique.)
        let params = serde_json::json!({"text": "a \"quoted\" line\n", "n": 1});
        let ask = peer.request::<_, serde_json::Value>("m", &params, RequestOptions::default());
        let answer = async {
            let frame = raw.recv().await.unwrap();
            raw.send(r#"{"jsonrpc":"2.0","id":1,"result":{"ok":true}}"#)
                .await;
            frame
        };
        let (got, frame) = tokio::join!(ask, answer);
        let raw_params = to_raw(&params).unwrap();
        assert_eq!(
            frame.as_bytes(),
            encode_request(&RequestId::Number(1), "m", Some(&raw_params))
        );
        assert_eq!(got.unwrap(), serde_json::json!({"ok": true}));
    }
}
