//! One stream's channel, from the session that queues its events to the connection that writes
//! them: bounded in events and in bytes, one sender ([`Live`]) and one receiver ([`Reader`]).
//!
//! Every POST that carries a request opens one, so it is made with one small allocation (the
//! queue's buffer comes with its first event). A tokio channel allocates a block of 32 slots up
//! front, about a kilobyte for `Bytes`, and its cache-padded state: per request, for what is
//! nearly always one event.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use axum::body::Bytes;

struct Chan {
    state: Mutex<State>,
}

struct State {
    items: VecDeque<Bytes>,
    /// Bytes queued and not yet taken.
    bytes: usize,
    /// At most this many events queued.
    capacity: usize,
    /// The [`Live`] end is gone: once `items` is empty, the stream has ended.
    sender_gone: bool,
    /// The [`Reader`] is gone: nothing more is queued.
    receiver_gone: bool,
    /// The reader waiting for an event.
    waker: Option<Waker>,
}

impl Chan {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect("stream channel lock")
    }
}

/// A channel of at most `capacity` events.
pub(super) fn channel(capacity: usize) -> (Live, Reader) {
    let chan = Arc::new(Chan {
        state: Mutex::new(State {
            items: VecDeque::new(),
            bytes: 0,
            capacity,
            sender_gone: false,
            receiver_gone: false,
            waker: None,
        }),
    });
    (Live(chan.clone()), Reader(chan))
}

/// The session's end: the connection currently reading a stream.
pub(super) struct Live(Arc<Chan>);

impl Live {
    /// Queues `data` unless the connection is gone, `capacity` events are queued, or it already
    /// holds `max_bytes` unread (one event is always let through, whatever its size).
    pub(super) fn send(&self, data: Bytes, max_bytes: usize) -> bool {
        let waker = {
            let mut s = self.0.lock();
            if s.receiver_gone
                || s.items.len() >= s.capacity
                || (s.bytes > 0 && s.bytes + data.len() > max_bytes)
            {
                return false;
            }
            s.bytes += data.len();
            s.items.push_back(data);
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
        true
    }

    /// Whether the connection still reads.
    pub(super) fn is_open(&self) -> bool {
        !self.0.lock().receiver_gone
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        let waker = {
            let mut s = self.0.lock();
            s.sender_gone = true;
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// The connection's end.
pub(super) struct Reader(Arc<Chan>);

impl Reader {
    fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        let mut s = self.0.lock();
        if let Some(b) = s.items.pop_front() {
            s.bytes -= b.len();
            return Poll::Ready(Some(b));
        }
        if s.sender_gone {
            return Poll::Ready(None);
        }
        match &mut s.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            w => *w = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// The next event; `None` once the stream has ended and everything queued was taken.
    /// Cancel-safe: an event is taken only when it is returned.
    pub(super) async fn recv(&mut self) -> Option<Bytes> {
        poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// Takes what is queued now into `into`; true once the stream has ended (its last response
    /// queued, or the session gone), false if more may come.
    pub(super) fn drain(&mut self, into: &mut VecDeque<Bytes>) -> bool {
        let mut s = self.0.lock();
        s.bytes = 0;
        into.extend(s.items.drain(..));
        s.sender_gone
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        let items = {
            let mut s = self.0.lock();
            s.receiver_gone = true;
            s.bytes = 0;
            std::mem::take(&mut s.items)
        };
        drop(items);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn events_arrive_in_order_then_the_end() {
        let (live, mut reader) = channel(4);
        assert!(live.send(Bytes::from_static(b"a"), 100));
        assert!(live.send(Bytes::from_static(b"b"), 100));
        let waiting = tokio::spawn(async move {
            let mut got = Vec::new();
            while let Some(b) = reader.recv().await {
                got.push(b);
            }
            got
        });
        tokio::task::yield_now().await;
        assert!(live.send(Bytes::from_static(b"c"), 100));
        drop(live);
        assert_eq!(waiting.await.unwrap(), ["a", "b", "c"]);
    }

    #[test]
    fn bounded_in_events_and_in_bytes_but_one_event_always_passes() {
        let (live, mut reader) = channel(2);
        // Larger than the byte bound, but nothing is queued: it passes.
        assert!(live.send(Bytes::from(vec![0u8; 50]), 10));
        assert!(!live.send(Bytes::from_static(b"x"), 10), "over the bytes");
        let mut got = VecDeque::new();
        assert!(!reader.drain(&mut got), "not ended");
        assert_eq!(got.len(), 1);
        assert!(live.send(Bytes::from_static(b"1"), 10));
        assert!(live.send(Bytes::from_static(b"2"), 10));
        assert!(!live.send(Bytes::from_static(b"3"), 10), "over the count");
        drop(live);
        assert!(reader.drain(&mut got), "ended");
        assert_eq!(
            got,
            [
                Bytes::from(vec![0u8; 50]),
                Bytes::from("1"),
                Bytes::from("2")
            ]
        );
    }

    #[test]
    fn a_gone_reader_refuses_events_and_is_seen() {
        let (live, reader) = channel(4);
        assert!(live.is_open());
        drop(reader);
        assert!(!live.is_open());
        assert!(!live.send(Bytes::from_static(b"late"), 100));
    }
}
