//! Draining a gateway asked to stop (`SIGTERM` in `purra gateway`, [`Gateway::drain`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::runtime::gateway::Gateway;

/// Calls in flight, and whether the gateway is draining.
#[derive(Debug, Default)]
pub(crate) struct Drain {
    draining: CancellationToken,
    counts: Arc<Counts>,
    /// The Streamable HTTP servers whose running streams are released when a drain begins.
    servers: std::sync::Mutex<Vec<purra_protocol::StreamableHttpServer>>,
}

#[derive(Debug, Default)]
struct Counts {
    /// Downstream calls being answered.
    calls: AtomicUsize,
    /// Claimed writes being dispatched (in a task of their own: they outlive a caller that left).
    dispatches: AtomicUsize,
    /// Woken when either comes down to zero.
    idle: Notify,
}

/// One call or dispatch in flight (counted until dropped).
#[derive(Debug)]
pub(crate) struct Active {
    counts: Arc<Counts>,
    dispatch: bool,
}

impl Drop for Active {
    fn drop(&mut self) {
        let counter = if self.dispatch {
            &self.counts.dispatches
        } else {
            &self.counts.calls
        };
        if counter.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.counts.idle.notify_waiters();
        }
    }
}

impl Drain {
    /// A new downstream call: counted, or `None` when the gateway is draining (the call is
    /// refused, nothing sent).
    pub fn enter(&self) -> Option<Active> {
        if self.draining.is_cancelled() {
            return None;
        }
        self.counts.calls.fetch_add(1, Ordering::SeqCst);
        let active = Active {
            counts: self.counts.clone(),
            dispatch: false,
        };
        // Looked at again after counting, so a drain that began in between waits for it or it
        // is refused.
        if self.draining.is_cancelled() {
            return None;
        }
        Some(active)
    }

    /// A claimed write's dispatch: the drain waits for it whatever happens.
    pub fn hold(&self) -> Active {
        self.counts.dispatches.fetch_add(1, Ordering::SeqCst);
        Active {
            counts: self.counts.clone(),
            dispatch: true,
        }
    }

    /// Registers an HTTP server whose running streams a drain releases first.
    pub(crate) fn serves(&self, server: &purra_protocol::StreamableHttpServer) {
        self.servers
            .lock()
            .expect("drain servers lock")
            .push(server.clone());
    }

    /// Whether the gateway is draining.
    pub fn is_draining(&self) -> bool {
        self.draining.is_cancelled()
    }

    /// Completes when the gateway starts draining.
    pub async fn draining(&self) {
        self.draining.cancelled().await;
    }

    /// Downstream calls in flight now.
    pub fn calls(&self) -> usize {
        self.counts.calls.load(Ordering::SeqCst)
    }

    /// Claimed writes being dispatched now.
    pub fn dispatches(&self) -> usize {
        self.counts.dispatches.load(Ordering::SeqCst)
    }

    /// Starts draining; returns when nothing is in flight, or when `bound` passed: the calls and
    /// dispatches still in flight then.
    async fn run(&self, bound: Duration) -> (usize, usize) {
        self.draining.cancel();
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            let idle = self.counts.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.calls() == 0 && self.dispatches() == 0 {
                return (0, 0);
            }
            tokio::select! {
                () = &mut idle => {}
                () = tokio::time::sleep_until(deadline) => {
                    return (self.calls(), self.dispatches());
                }
            }
        }
    }
}

/// What a drain came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Drained {
    /// Downstream calls still being answered when the bound passed.
    pub calls_left: usize,
    /// Claimed writes still being dispatched when the bound passed: their claims become
    /// `unknown` once the lease lapses, if the process ends before they do.
    pub dispatches_left: usize,
    /// How long it took.
    pub took: Duration,
}

impl Gateway {
    /// Drains the gateway: from now on it takes no new call (each is answered
    /// `gateway_stopping`, nothing sent) and `/readyz` says it is not ready; every write waiting
    /// for its decision is answered at once with its pending result, except, on a fleet's store
    /// (PostgreSQL), one whose SSE stream is recorded in the session store (its client resumes
    /// it at another instance, which takes the call over:
    /// [`purra_protocol::StreamableHttpServer::release_streams`]); returns when the calls and
    /// dispatches in flight have finished, or when `bound` passed. Serving (the HTTP listener,
    /// the sessions) goes on until the caller stops it, so the pending answers reach their
    /// clients; then [`Gateway::shutdown`].
    ///
    /// The caller calls again, on another instance of the fleet, or after a restart: the
    /// approval is in the store. The bound is `[gateway] drain_timeout` in `purra gateway` (30 s
    /// by default). A dispatch still running at the bound is left to the process's end: its claim
    /// is in the store, so it becomes `unknown` (`interrupted`) once the lease lapses, and it is
    /// never sent again. A new call that reaches a draining gateway is answered
    /// `gateway_stopping` with nothing sent; `/readyz` answers 503 ([`crate::health`]), so a load
    /// balancer sends it no new session.
    pub async fn drain(&self, bound: Duration) -> Drained {
        let start = tokio::time::Instant::now();
        // A held call streamed over SSE (recorded in the session store) is not answered
        // "pending" here: its lease is released and its connection ended, so its client resumes
        // with `Last-Event-ID` at another instance, which takes the call over at once.
        let servers = self
            .inner
            .drain
            .servers
            .lock()
            .expect("drain servers lock")
            .clone();
        for server in servers {
            server.release_streams().await;
        }
        let (calls_left, dispatches_left) = self.inner.drain.run(bound).await;
        Drained {
            calls_left,
            dispatches_left,
            took: start.elapsed(),
        }
    }

    /// Whether the gateway is draining ([`Gateway::drain`]).
    pub fn is_draining(&self) -> bool {
        self.inner.drain.is_draining()
    }

    /// Whether a drain hands the SSE streams of waiting writes over to the fleet's other
    /// instances (a store shared by a fleet, PostgreSQL, keeping the sessions) rather than
    /// answering them pending.
    pub fn drain_hands_streams_over(&self) -> bool {
        self.inner.store.shared_by_a_fleet()
            && self.inner.settings.sessions == crate::config::SessionsIn::Store
    }

    /// Downstream calls in flight now (a write waiting for its decision or its dispatch is one).
    pub fn calls_in_flight(&self) -> usize {
        self.inner.drain.calls()
    }

    /// Claimed writes being dispatched now (each in a task of its own, which a caller that
    /// leaves does not stop).
    pub fn dispatches_in_flight(&self) -> usize {
        self.inner.drain.dispatches()
    }
}
