//! The transport boundary: every transport turns its pipe or socket into two channels of frames.
//!
//! **Architecture invariant:** only transports touch pipes and sockets. The protocol engine sees
//! [`Inbound`] frames (already bounded in size) and hands back [`Outbound`] frames; it never
//! performs I/O itself. This is what lets stdio, WebSocket, Streamable HTTP and the in-memory pair
//! share one engine.

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::jsonrpc::RequestId;
#[cfg(feature = "stdio")]
use crate::stdio::ChildProcess;
#[cfg(not(feature = "stdio"))]
use std::convert::Infallible as ChildProcess;

/// The default bound on one inbound frame: 4 MiB.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 4 * 1024 * 1024;

/// What a transport delivers to the engine.
#[derive(Debug)]
#[non_exhaustive]
pub enum Inbound {
    /// One complete frame (one line, one text frame, one body), at most the frame bound.
    Frame(Bytes),
    /// One complete frame with what the transport knows of the request that carried it (the
    /// Streamable HTTP server attaches the HTTP request's parts and the session id); handlers
    /// reach it through `RequestCtx`. The engine passes it on without looking inside.
    FrameWithContext {
        /// The frame.
        frame: Bytes,
        /// The transport's data for the requests in this frame.
        context: TransportContext,
    },
    /// A frame that exceeded the bound and was discarded; `len` is how much was seen. Its first
    /// and last few KiB are kept, so the engine can tell which request it answers (or which
    /// request it is) and fail or answer that one at once.
    Oversize {
        /// Bytes seen before the frame was discarded.
        len: usize,
        /// The frame's first bytes (at most 4 KiB).
        head: Bytes,
        /// The frame's last bytes (at most 4 KiB).
        tail: Bytes,
    },
    /// The transport failed; the connection is over.
    Failed(String),
    /// The transport could not deliver one request (an HTTP POST failed): that request fails
    /// with `error`; the connection goes on.
    RequestFailed {
        /// The request's id.
        id: RequestId,
        /// Why it failed.
        error: crate::Error,
    },
    /// A frame the transport has already decoded (only purra's own transports make these: the
    /// Streamable HTTP server decodes each POST to route it, and the engine does not decode it
    /// again).
    #[doc(hidden)]
    Decoded(Box<DecodedFrame>),
}

impl Inbound {
    /// The frame this item carries, whole (what the engine bounds before it reads it).
    pub(crate) fn frame_bytes(&self) -> Option<&Bytes> {
        match self {
            Inbound::Frame(frame) | Inbound::FrameWithContext { frame, .. } => Some(frame),
            Inbound::Decoded(d) => Some(&d.frame),
            Inbound::Oversize { .. } | Inbound::Failed(_) | Inbound::RequestFailed { .. } => None,
        }
    }
}

/// A frame and the one message decoded from it, with the transport's context; see
/// [`Inbound::Decoded`].
#[doc(hidden)]
#[derive(Debug)]
pub struct DecodedFrame {
    /// The frame as received (its length is checked against the engine's bound, and an oversize
    /// frame is peeked at like any other).
    pub(crate) frame: Bytes,
    /// The message `frame` decodes to.
    pub(crate) message: crate::jsonrpc::Message,
    /// The transport's data for the request.
    pub(crate) context: TransportContext,
}

/// Per-request data a transport attaches to inbound frames, opaque to the engine (for
/// Streamable HTTP an `http::HttpContext`).
pub type TransportContext = std::sync::Arc<dyn std::any::Any + Send + Sync>;

/// What the engine hands to a transport: one encoded JSON-RPC message. Only the engine makes
/// them; a custom transport reads them.
#[derive(Debug, Default)]
pub struct Outbound {
    /// The encoded message, without delimiter.
    pub(crate) frame: Vec<u8>,
    /// The inbound request this message belongs to, if any (Streamable HTTP routes on it).
    pub(crate) related: Option<RequestId>,
    /// Whether this message is the response that completes `related`.
    pub(crate) completes: bool,
    /// The outbound request's own id and extra headers, when this message is a request. Boxed:
    /// most messages are responses and notifications, and the engine's outbound channel
    /// allocates 32 slots of this struct per connection up front, idle or not.
    pub(crate) request: Option<Box<OutboundRequest>>,
}

/// What only an outbound request carries.
#[derive(Debug)]
pub(crate) struct OutboundRequest {
    /// The request's own id.
    pub(crate) id: RequestId,
    /// Extra headers for this message (Streamable HTTP sends them with its POST).
    pub(crate) headers: Vec<(String, String)>,
}

impl Outbound {
    /// The encoded message (one JSON-RPC message or batch, without delimiter).
    pub fn frame(&self) -> &[u8] {
        &self.frame
    }
    /// The encoded message, owned.
    pub fn into_frame(self) -> Vec<u8> {
        self.frame
    }
    /// The inbound request this message belongs to (a response, or a notification or request a
    /// handler sent while serving it), for transports with per-request streams.
    pub fn related(&self) -> Option<&RequestId> {
        self.related.as_ref()
    }
    /// Whether this message is the response that completes [`related`](Self::related).
    pub fn completes(&self) -> bool {
        self.completes
    }
    /// The id of the request this message is, when it is an outbound request.
    pub fn request(&self) -> Option<&RequestId> {
        self.request.as_ref().map(|r| &r.id)
    }
    /// Extra headers the caller asked to send with this message (HTTP transports).
    pub fn headers(&self) -> &[(String, String)] {
        self.request.as_ref().map_or(&[], |r| &r.headers)
    }
}

/// What a transport with per-request streams lets handlers do.
pub trait TransportControl: Send + Sync + std::fmt::Debug {
    /// Ends the stream that carries `request`'s messages without cancelling the request; the
    /// client resumes it later (SEP-1699 polling). Returns whether there was such a stream.
    fn close_request_stream(&self, request: &RequestId) -> bool;
}

/// A transport that takes the engine's messages as they are sent, with no queue and no task
/// between them: for transports whose delivery never waits (the Streamable HTTP server's
/// sessions put each message on a stream under a lock, and drop a connection that reads too
/// slowly rather than wait for it).
pub(crate) trait DeliverOutbound: Send + Sync + std::fmt::Debug {
    /// Takes one message, in the order the engine sends them; false when the transport is gone
    /// (the engine's send then fails, as on a closed channel).
    fn deliver(&self, out: Outbound) -> bool;
    /// The engine stopped writing (what cancelling `close_write` tells a channel's reader).
    fn close(&self);
}

/// Where the engine writes.
#[derive(Debug, Clone)]
pub(crate) enum OutboundSink {
    /// A channel that the transport's writer drains, and the signal that closes its write side.
    Channel {
        tx: mpsc::Sender<Outbound>,
        close: CancellationToken,
    },
    /// A channel whose writer also lets senders outside the runtime's tasks write inline while
    /// it is idle (stdio over pipes and sockets, [`crate::lane`]), and the signal that closes it.
    #[cfg_attr(not(all(unix, feature = "stdio")), allow(dead_code))]
    Lane {
        lane: std::sync::Arc<crate::lane::Lane>,
        close: CancellationToken,
    },
    /// A [`queue`] that the transport's writer drains (it allocates as it fills: WebSocket
    /// connections, many of them idle), and the signal that closes its write side.
    #[cfg(feature = "ws")]
    Queue {
        tx: queue::Sender<Outbound>,
        close: CancellationToken,
    },
    /// The transport itself (see [`DeliverOutbound`]).
    #[cfg_attr(not(feature = "http-server"), allow(dead_code))]
    Direct(std::sync::Arc<dyn DeliverOutbound>),
}

impl OutboundSink {
    /// Whether the transport reads an outbound request's id and headers
    /// ([`Outbound::request`], [`Outbound::headers`]). A lane's writer (stdio) writes frames
    /// and nothing else, so a request sent there carries neither (one allocation less a call).
    pub(crate) fn reads_requests(&self) -> bool {
        !matches!(self, OutboundSink::Lane { .. })
    }

    /// Sends one message, waiting for room in a channel; gives it back when the transport is
    /// gone.
    pub(crate) async fn send(&self, out: Outbound) -> Result<(), Outbound> {
        match self {
            OutboundSink::Channel { tx, .. } => tx.send(out).await.map_err(|e| e.0),
            OutboundSink::Lane { lane, .. } => lane.send(out).await,
            #[cfg(feature = "ws")]
            OutboundSink::Queue { tx, .. } => tx.send(out).await,
            OutboundSink::Direct(d) => {
                if d.deliver(out) {
                    Ok(())
                } else {
                    Err(Outbound::default())
                }
            }
        }
    }

    /// Sends one message if there is room now (a direct transport always has room).
    pub(crate) fn try_send(
        &self,
        out: Outbound,
    ) -> Result<(), mpsc::error::TrySendError<Outbound>> {
        match self {
            OutboundSink::Channel { tx, .. } => tx.try_send(out),
            OutboundSink::Lane { lane, .. } => lane.try_send(out),
            #[cfg(feature = "ws")]
            OutboundSink::Queue { tx, .. } => tx.try_send(out),
            OutboundSink::Direct(d) => {
                if d.deliver(out) {
                    Ok(())
                } else {
                    Err(mpsc::error::TrySendError::Closed(Outbound::default()))
                }
            }
        }
    }

    /// Closes the write side: the transport writes what it was given, then stops.
    pub(crate) fn close(&self) {
        match self {
            OutboundSink::Channel { close, .. } | OutboundSink::Lane { close, .. } => {
                close.cancel()
            }
            #[cfg(feature = "ws")]
            OutboundSink::Queue { close, .. } => close.cancel(),
            OutboundSink::Direct(d) => d.close(),
        }
    }

    /// The signal that closes a channel's write side (`None` for a direct transport).
    #[cfg_attr(not(any(feature = "stdio", test)), allow(dead_code))]
    pub(crate) fn close_token(&self) -> Option<&CancellationToken> {
        match self {
            OutboundSink::Channel { close, .. } | OutboundSink::Lane { close, .. } => Some(close),
            #[cfg(feature = "ws")]
            OutboundSink::Queue { close, .. } => Some(close),
            OutboundSink::Direct(_) => None,
        }
    }
}

/// Where the engine reads.
#[derive(Debug)]
pub(crate) enum InboundSource {
    /// A tokio channel (custom transports, stdio, WebSocket, memory).
    Channel(mpsc::Receiver<Inbound>),
    /// A queue that allocates as it fills (see [`queue`]).
    #[cfg_attr(not(any(feature = "http-server", feature = "ws")), allow(dead_code))]
    Queue(queue::Receiver<Inbound>),
    /// Lines read in place from a pipe or socket (stdio): no task or channel between the two.
    #[cfg(feature = "stdio")]
    Lines(Box<crate::stdio::LineReader<Box<dyn tokio::io::AsyncRead + Unpin + Send>>>),
}

impl InboundSource {
    /// The next item; `None` once every sender is gone and nothing is left. Cancel-safe.
    pub(crate) async fn recv(&mut self) -> Option<Inbound> {
        match self {
            InboundSource::Channel(rx) => rx.recv().await,
            InboundSource::Queue(rx) => rx.recv().await,
            #[cfg(feature = "stdio")]
            InboundSource::Lines(lines) => lines.next().await,
        }
    }
}

/// A bounded queue with one receiver that allocates as it fills, for transports that keep
/// many idle connections (the Streamable HTTP server's sessions, WebSocket connections): a tokio
/// channel allocates a block of 32 slots and its cache-padded state when it is made, about
/// 3 KiB for `Inbound`, used or not.
#[cfg_attr(not(any(feature = "http-server", feature = "ws")), allow(dead_code))]
pub(crate) mod queue {
    use std::collections::VecDeque;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    use tokio::sync::{Notify, Semaphore};

    struct Shared<T> {
        items: Mutex<VecDeque<T>>,
        /// One permit per free place; closed when the receiver is gone.
        room: Semaphore,
        /// The receiver waits here for an item or the last sender's end.
        ready: Notify,
        senders: AtomicUsize,
    }

    /// Sends into the queue.
    pub(crate) struct Sender<T>(Arc<Shared<T>>);

    /// The queue's one receiver.
    pub(crate) struct Receiver<T>(Arc<Shared<T>>);

    impl<T> std::fmt::Debug for Sender<T> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("queue::Sender").finish_non_exhaustive()
        }
    }

    impl<T> std::fmt::Debug for Receiver<T> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("queue::Receiver").finish_non_exhaustive()
        }
    }

    /// A queue of at most `capacity` items.
    pub(crate) fn bounded<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
        let shared = Arc::new(Shared {
            items: Mutex::new(VecDeque::new()),
            room: Semaphore::new(capacity),
            ready: Notify::new(),
            senders: AtomicUsize::new(1),
        });
        (Sender(shared.clone()), Receiver(shared))
    }

    impl<T> Sender<T> {
        /// Queues `item`, waiting for room; gives it back when the receiver is gone.
        pub(crate) async fn send(&self, item: T) -> Result<(), T> {
            match self.0.room.acquire().await {
                Ok(permit) => permit.forget(),
                Err(_) => return Err(item),
            }
            self.push(item);
            Ok(())
        }

        /// Queues `item` into the place just taken, and wakes the receiver.
        fn push(&self, item: T) {
            self.0.items.lock().expect("queue lock").push_back(item);
            self.0.ready.notify_one();
        }

        /// Queues `item` if there is room now; gives it back otherwise.
        #[cfg_attr(not(feature = "ws"), allow(dead_code))]
        pub(crate) fn try_send(
            &self,
            item: T,
        ) -> Result<(), tokio::sync::mpsc::error::TrySendError<T>> {
            use tokio::sync::{mpsc::error::TrySendError, TryAcquireError};
            match self.0.room.try_acquire() {
                Ok(permit) => permit.forget(),
                Err(TryAcquireError::NoPermits) => return Err(TrySendError::Full(item)),
                Err(TryAcquireError::Closed) => return Err(TrySendError::Closed(item)),
            }
            self.push(item);
            Ok(())
        }
    }

    impl<T> Clone for Sender<T> {
        fn clone(&self) -> Self {
            self.0.senders.fetch_add(1, Ordering::Relaxed);
            Sender(self.0.clone())
        }
    }

    impl<T> Drop for Sender<T> {
        fn drop(&mut self) {
            if self.0.senders.fetch_sub(1, Ordering::AcqRel) == 1 {
                self.0.ready.notify_one();
            }
        }
    }

    impl<T> Receiver<T> {
        fn pop(&self) -> Option<T> {
            let mut items = self.0.items.lock().expect("queue lock");
            let item = items.pop_front()?;
            // Give back what a burst grew, once it has drained.
            if items.is_empty() && items.capacity() > 64 {
                items.shrink_to(4);
            }
            drop(items);
            self.0.room.add_permits(1);
            Some(item)
        }

        /// The next item if one is queued now.
        #[cfg_attr(not(feature = "ws"), allow(dead_code))]
        pub(crate) fn try_recv(&mut self) -> Option<T> {
            self.pop()
        }

        /// The next item, in order; `None` once every sender is gone and the queue is empty.
        /// Cancel-safe: an item is taken only when it is returned.
        pub(crate) async fn recv(&mut self) -> Option<T> {
            loop {
                if let Some(item) = self.pop() {
                    return Some(item);
                }
                if self.0.senders.load(Ordering::Acquire) == 0 {
                    // Whatever the last senders queued before they left is here now.
                    return self.pop();
                }
                // `notify_one` keeps a permit when nobody waits, so an item queued since the
                // check above wakes this at once.
                self.0.ready.notified().await;
            }
        }
    }

    impl<T> Drop for Receiver<T> {
        fn drop(&mut self) {
            self.0.room.close();
            let items = std::mem::take(&mut *self.0.items.lock().expect("queue lock"));
            drop(items);
        }
    }
}

/// A started transport: the inbound channel, where the engine writes (a channel and the signal
/// that closes its write side, or the transport itself), and the child process it may own.
#[derive(Debug)]
pub struct Transport {
    pub(crate) inbound: InboundSource,
    pub(crate) outbound: OutboundSink,
    #[cfg_attr(not(feature = "client"), allow(dead_code))]
    pub(crate) child: Option<ChildProcess>,
    pub(crate) control: Option<std::sync::Arc<dyn TransportControl>>,
    /// Cancelled when the writer has written everything and stopped (stdio), so the engine can
    /// return only once its output is out.
    pub(crate) flushed: Option<CancellationToken>,
    /// What the engine's tracing spans name: the transport kind and, if it has one, the session.
    pub(crate) label: (&'static str, Option<String>),
}

impl Transport {
    /// Builds a transport from channels, for custom transports: a task of yours feeds `inbound`
    /// and drains `outbound`, and stops writing when `close_write` is cancelled.
    pub fn from_channels(
        inbound: mpsc::Receiver<Inbound>,
        outbound: mpsc::Sender<Outbound>,
        close_write: CancellationToken,
    ) -> Self {
        Transport::over(
            InboundSource::Channel(inbound),
            OutboundSink::Channel {
                tx: outbound,
                close: close_write,
            },
        )
    }

    /// A transport with these two sides and nothing else, named `custom` until labeled.
    pub(crate) fn over(inbound: InboundSource, outbound: OutboundSink) -> Self {
        Transport {
            inbound,
            outbound,
            child: None,
            control: None,
            flushed: None,
            label: ("custom", None),
        }
    }

    /// [`Transport::from_channels`] with both sides a [`queue`], for transports that keep many
    /// idle connections.
    #[cfg(feature = "ws")]
    pub(crate) fn from_queues(
        inbound: queue::Receiver<Inbound>,
        outbound: queue::Sender<Outbound>,
        close_write: CancellationToken,
    ) -> Self {
        Transport::over(
            InboundSource::Queue(inbound),
            OutboundSink::Queue {
                tx: outbound,
                close: close_write,
            },
        )
    }

    /// A transport that the engine writes to directly (see [`DeliverOutbound`]).
    #[cfg(feature = "http-server")]
    pub(crate) fn direct(
        inbound: queue::Receiver<Inbound>,
        sink: std::sync::Arc<dyn DeliverOutbound>,
    ) -> Self {
        Transport::over(InboundSource::Queue(inbound), OutboundSink::Direct(sink))
    }

    /// Names the transport (and its session) in the engine's tracing spans.
    pub(crate) fn labeled(mut self, transport: &'static str, session: Option<String>) -> Self {
        self.label = (transport, session);
        self
    }

    /// Attaches a control that handlers can reach (see [`TransportControl`]).
    pub fn with_control(mut self, control: std::sync::Arc<dyn TransportControl>) -> Self {
        self.control = Some(control);
        self
    }
}

/// Channel capacity between a transport and the engine.
pub(crate) const CHANNEL_CAPACITY: usize = 1024;

/// In-memory transports: a connected pair, and a raw end for tests that speak bytes.
pub mod memory {
    use super::*;

    /// Two transports connected to each other, as a client and a server would be over a pipe.
    pub fn pair() -> (Transport, Transport) {
        let (a, a_raw) = raw();
        let (b, b_raw) = raw();
        let close = |t: &Transport| t.outbound.close_token().expect("a channel").clone();
        forward(a_raw.rx, b_raw.tx, close(&a));
        forward(b_raw.rx, a_raw.tx, close(&b));
        (a, b)
    }

    fn forward(
        mut from: mpsc::Receiver<Outbound>,
        to: mpsc::Sender<Inbound>,
        close: CancellationToken,
    ) {
        tokio::spawn(async move {
            loop {
                let next = tokio::select! {
                    biased;
                    m = from.recv() => m,
                    _ = close.cancelled() => None,
                };
                let Some(msg) = next else { break };
                if to
                    .send(Inbound::Frame(Bytes::from(msg.frame)))
                    .await
                    .is_err()
                {
                    break;
                }
            }
            // Flush what was queued before the close, as a pipe would.
            while let Ok(msg) = from.try_recv() {
                if to
                    .send(Inbound::Frame(Bytes::from(msg.frame)))
                    .await
                    .is_err()
                {
                    break;
                }
            }
        });
    }

    /// The far end of a raw in-memory transport: tests push inbound items and read what the
    /// engine wrote, byte for byte.
    #[derive(Debug)]
    pub struct RawEnd {
        /// Feeds the engine.
        pub tx: mpsc::Sender<Inbound>,
        /// What the engine wrote.
        pub rx: mpsc::Receiver<Outbound>,
    }

    impl RawEnd {
        /// Sends one frame of bytes.
        pub async fn send(&self, bytes: impl Into<Vec<u8>>) {
            self.tx
                .send(Inbound::Frame(Bytes::from(bytes.into())))
                .await
                .expect("engine gone");
        }

        /// Receives the next frame the engine wrote, as a string.
        pub async fn recv(&mut self) -> Option<String> {
            self.rx
                .recv()
                .await
                .map(|m| String::from_utf8(m.frame).expect("engine writes UTF-8"))
        }
    }

    /// A transport whose other end is a [`RawEnd`].
    pub fn raw() -> (Transport, RawEnd) {
        let (in_tx, in_rx) = mpsc::channel(CHANNEL_CAPACITY);
        let (out_tx, out_rx) = mpsc::channel(CHANNEL_CAPACITY);
        (
            Transport::from_channels(in_rx, out_tx, CancellationToken::new())
                .labeled("memory", None),
            RawEnd {
                tx: in_tx,
                rx: out_rx,
            },
        )
    }
}

#[cfg(test)]
mod queue_tests {
    use super::queue;

    #[tokio::test]
    async fn items_come_out_in_order_and_the_end_after_the_last() {
        let (tx, mut rx) = queue::bounded(4);
        let tx2 = tx.clone();
        tx.send(1).await.unwrap();
        tx2.send(2).await.unwrap();
        drop(tx);
        tx2.send(3).await.unwrap();
        drop(tx2);
        assert_eq!(rx.recv().await, Some(1));
        assert_eq!(rx.recv().await, Some(2));
        assert_eq!(rx.recv().await, Some(3));
        assert_eq!(rx.recv().await, None);
    }

    #[tokio::test]
    async fn a_full_queue_makes_the_sender_wait_for_room() {
        let (tx, mut rx) = queue::bounded(2);
        tx.send(1).await.unwrap();
        tx.send(2).await.unwrap();
        let waiting = tokio::spawn(async move { tx.send(3).await });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        assert_eq!(rx.recv().await, Some(1));
        waiting.await.unwrap().unwrap();
        assert_eq!(rx.recv().await, Some(2));
        assert_eq!(rx.recv().await, Some(3));
        assert_eq!(rx.recv().await, None);
    }

    #[tokio::test]
    async fn a_waiting_receiver_is_woken_by_an_item_and_by_the_end() {
        let (tx, mut rx) = queue::bounded(2);
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            while let Some(i) = rx.recv().await {
                got.push(i);
            }
            got
        });
        tokio::task::yield_now().await;
        tx.send(7).await.unwrap();
        tokio::task::yield_now().await;
        tx.send(8).await.unwrap();
        drop(tx);
        assert_eq!(reader.await.unwrap(), vec![7, 8]);
    }

    #[tokio::test]
    async fn sending_to_a_dropped_receiver_gives_the_item_back() {
        let (tx, rx) = queue::bounded(2);
        drop(rx);
        assert_eq!(tx.send(5).await, Err(5));
    }

    #[tokio::test]
    async fn try_send_and_try_recv_never_wait() {
        use tokio::sync::mpsc::error::TrySendError;
        let (tx, mut rx) = queue::bounded(2);
        assert_eq!(rx.try_recv(), None);
        assert!(tx.try_send(1).is_ok());
        tx.send(2).await.unwrap();
        assert!(matches!(tx.try_send(3), Err(TrySendError::Full(3))));
        assert_eq!(rx.try_recv(), Some(1));
        // The place taken frees one for the next item, in order behind the first.
        assert!(tx.try_send(3).is_ok());
        assert_eq!(rx.try_recv(), Some(2));
        assert_eq!(rx.recv().await, Some(3));
        assert_eq!(rx.try_recv(), None);
        drop(rx);
        assert!(matches!(tx.try_send(4), Err(TrySendError::Closed(4))));
    }
}
