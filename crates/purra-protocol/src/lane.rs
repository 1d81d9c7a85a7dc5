//! The inline lane: a stdio transport's write side that a sender outside the runtime's tasks
//! writes to directly while the writer task is idle, instead of waking a worker thread for it.
//!
//! Why: a client called from `#[tokio::main]`'s body (or any thread that is not one of the
//! runtime's workers) hands each request to the writer task through a channel, and waking that
//! task from outside the runtime wakes a worker thread (an `eventfd` write and a thread wake-up
//! per call). Writing the frame with one non-blocking `write` from the caller's thread costs a
//! system call and no wake-up. Inside a task the channel stays: waking the writer there is a task
//! switch on the same thread, and the writer coalesces every frame queued meanwhile into one
//! write, which inline writes would lose.
//!
//! **Invariant:** frames reach the pipe in the order their sends completed. A frame is written
//! inline only while the writer task owns nothing (`busy` is false: the channel is empty and the
//! writer is not writing); every frame that goes to the channel sets `busy` under the same lock
//! it was queued under, and only the writer clears it, after writing everything and finding the
//! channel empty under that lock. A partial inline write queues its rest first, as the channel's
//! only item. No lock is held across an `.await`.

use std::io::{self, IoSlice};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

use crate::transport::Outbound;

/// A write side that can be written without waiting: `tokio::net::unix::pipe::Sender` and
/// `UnixStream` (their `try_write_vectored` takes `&self`).
pub(crate) trait InlineWrite: Send + Sync {
    /// One non-blocking vectored write; `WouldBlock` when the pipe is full.
    fn try_write_vectored(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize>;
}

/// The shared state of a lane: the channel to the writer task and who owns the write side.
#[derive(Debug)]
pub(crate) struct Lane {
    tx: mpsc::Sender<Outbound>,
    state: Mutex<LaneState>,
}

struct LaneState {
    /// The writer task owns the write side: frames are queued, or it is writing them.
    busy: bool,
    /// The write side, while inline writes may use it; `None` once the writer closes or fails.
    out: Option<Arc<dyn InlineWrite>>,
}

impl std::fmt::Debug for LaneState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LaneState")
            .field("busy", &self.busy)
            .field("open", &self.out.is_some())
            .finish()
    }
}

/// How an inline write went.
enum Inline {
    /// The whole frame and its newline are written.
    Done,
    /// This many bytes of the frame were written (less than the frame and its newline).
    Partial(usize),
    /// Nothing was written (the pipe is full, or the write failed: the writer task retries it
    /// and meets the same error itself, so failure takes its usual path).
    Nothing,
}

// Only stdio over pipes and sockets makes lanes; the engine's sends compile for every build.
#[cfg_attr(not(all(unix, feature = "stdio")), allow(dead_code))]
impl Lane {
    /// A lane over `out`, whose writer task reads the other end of `tx`.
    pub(crate) fn new(tx: mpsc::Sender<Outbound>, out: Arc<dyn InlineWrite>) -> Lane {
        Lane {
            tx,
            state: Mutex::new(LaneState {
                busy: false,
                out: Some(out),
            }),
        }
    }

    /// Sends one frame: inline when the caller is outside the runtime's tasks and the writer is
    /// idle, else through the writer's channel (waiting for room). Fails when the writer is gone.
    pub(crate) async fn send(&self, out: Outbound) -> Result<(), Outbound> {
        let out = match self.try_send(out) {
            Ok(()) => return Ok(()),
            Err(mpsc::error::TrySendError::Closed(out)) => return Err(out),
            Err(mpsc::error::TrySendError::Full(out)) => out,
        };
        // Full: wait for room without the lock, then queue under it. Until then the frame is not
        // sent, so anything written meanwhile goes before it, as with any concurrent send.
        let Ok(permit) = self.tx.reserve().await else {
            return Err(out);
        };
        let mut state = self.state.lock().expect("lane lock");
        state.busy = true;
        permit.send(out);
        Ok(())
    }

    /// [`send`](Self::send) without waiting: a full channel hands the frame back.
    pub(crate) fn try_send(
        &self,
        mut out: Outbound,
    ) -> Result<(), mpsc::error::TrySendError<Outbound>> {
        let mut state = self.state.lock().expect("lane lock");
        if !state.busy && tokio::task::try_id().is_none() {
            if let Some(w) = &state.out {
                match write_inline(&**w, &out.frame) {
                    Inline::Done => return Ok(()),
                    Inline::Partial(n) => {
                        out.frame.drain(..n);
                    }
                    Inline::Nothing => {}
                }
            }
        }
        self.tx.try_send(out)?;
        state.busy = true;
        Ok(())
    }

    /// The writer task wrote everything it had: unless `rx` holds more (returned, and the
    /// writer keeps the write side), inline writes may go on.
    pub(crate) fn idle(&self, rx: &mut mpsc::Receiver<Outbound>) -> Option<Outbound> {
        let mut state = self.state.lock().expect("lane lock");
        match rx.try_recv() {
            Ok(m) => Some(m),
            Err(_) => {
                state.busy = false;
                None
            }
        }
    }

    /// The writer is closing or failed: no more inline writes (what is queued is the writer's).
    pub(crate) fn stop(&self) {
        let mut state = self.state.lock().expect("lane lock");
        state.busy = true;
        state.out = None;
    }
}

/// Writes `frame` and its newline in one non-blocking vectored write.
fn write_inline(w: &dyn InlineWrite, frame: &[u8]) -> Inline {
    let want = frame.len() + 1;
    match w.try_write_vectored(&[IoSlice::new(frame), IoSlice::new(b"\n")]) {
        Ok(n) if n >= want => Inline::Done,
        Ok(0) | Err(_) => Inline::Nothing,
        // All of the frame but its newline: an empty rest still gets its newline from the writer.
        Ok(n) => Inline::Partial(n.min(frame.len())),
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Sink {
        written: Mutex<Vec<u8>>,
        /// How many bytes each call accepts at most; 0 means `WouldBlock`.
        room: Mutex<Vec<usize>>,
    }

    impl InlineWrite for Sink {
        fn try_write_vectored(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
            let limit = self.room.lock().unwrap().pop().unwrap_or(usize::MAX);
            if limit == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let mut n = 0;
            let mut w = self.written.lock().unwrap();
            for b in bufs {
                let take = b.len().min(limit - n);
                w.extend_from_slice(&b[..take]);
                n += take;
                if n == limit {
                    break;
                }
            }
            Ok(n)
        }
    }

    fn out(s: &str) -> Outbound {
        Outbound {
            frame: s.as_bytes().to_vec(),
            ..Outbound::default()
        }
    }

    fn frames(rx: &mut mpsc::Receiver<Outbound>) -> Vec<String> {
        let mut v = Vec::new();
        while let Ok(m) = rx.try_recv() {
            v.push(String::from_utf8(m.frame).unwrap());
        }
        v
    }

    /// A current-thread runtime, a sink, a lane over it and the writer's end of its channel.
    fn fixture() -> (
        tokio::runtime::Runtime,
        Arc<Sink>,
        Lane,
        mpsc::Receiver<Outbound>,
    ) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let sink = Arc::new(Sink::default());
        let (tx, rx) = mpsc::channel(4);
        let lane = Lane::new(tx, sink.clone());
        (rt, sink, lane, rx)
    }

    #[test]
    fn outside_a_task_an_idle_lane_writes_inline_and_a_busy_one_queues() {
        let (rt, sink, lane, mut rx) = fixture();
        rt.block_on(async {
            lane.send(out("a")).await.unwrap();
            assert_eq!(*sink.written.lock().unwrap(), b"a\n");
            assert!(frames(&mut rx).is_empty());
            // The pipe is full: the frame is queued and the writer owns the side from then on.
            sink.room.lock().unwrap().push(0);
            lane.send(out("b")).await.unwrap();
            lane.send(out("c")).await.unwrap();
            assert_eq!(*sink.written.lock().unwrap(), b"a\n");
            assert_eq!(frames(&mut rx), ["b", "c"]);
            // Still busy until the writer says it is idle with nothing queued.
            lane.send(out("d")).await.unwrap();
            assert_eq!(lane.idle(&mut rx).map(|m| m.frame), Some(b"d".to_vec()));
            assert!(lane.idle(&mut rx).is_none());
            lane.send(out("e")).await.unwrap();
            assert_eq!(*sink.written.lock().unwrap(), b"a\ne\n");
        });
    }

    #[test]
    fn a_partial_inline_write_queues_the_rest_first() {
        let (rt, sink, lane, mut rx) = fixture();
        rt.block_on(async {
            sink.room.lock().unwrap().push(2);
            lane.send(out("hello")).await.unwrap();
            lane.send(out("next")).await.unwrap();
            assert_eq!(*sink.written.lock().unwrap(), b"he");
            assert_eq!(frames(&mut rx), ["llo", "next"]);
            // Everything but the newline: the rest is an empty frame, which the writer ends.
            assert!(lane.idle(&mut rx).is_none());
            sink.room.lock().unwrap().push(3);
            lane.send(out("xyz")).await.unwrap();
            assert_eq!(frames(&mut rx), [""]);
        });
    }

    #[test]
    fn inside_a_task_frames_go_to_the_writer() {
        let (rt, sink, lane, mut rx) = fixture();
        let lane = Arc::new(lane);
        let l = lane.clone();
        rt.block_on(
            async move { tokio::spawn(async move { l.send(out("t")).await.unwrap() }).await },
        )
        .unwrap();
        assert!(sink.written.lock().unwrap().is_empty());
        assert_eq!(frames(&mut rx), ["t"]);
    }

    #[test]
    fn a_stopped_lane_queues_and_a_closed_channel_refuses() {
        let (rt, sink, lane, mut rx) = fixture();
        rt.block_on(async {
            lane.stop();
            lane.send(out("q")).await.unwrap();
            assert!(sink.written.lock().unwrap().is_empty());
            assert_eq!(frames(&mut rx), ["q"]);
            drop(rx);
            assert!(lane.send(out("r")).await.is_err());
        });
    }
}
