//! The connection limit the standalone HTTP and WebSocket servers share: at most `max`
//! connections at once, and a fair way to stay there.
//!
//! When the limit is reached, a new connection takes the slot of the connection that has been
//! idle longest (no request in flight, least recently active), which is closed; only when every
//! connection is busy does the accept loop wait, leaving new clients in the listen backlog.
//! So a flood of idle connections (slowloris, clients that connect and never speak, WebSocket
//! clients that only answer pings) can never lock out a client that has work to do.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Tells whether a connection has work in flight that the transport cannot see (the engine's
/// in-flight requests, for WebSocket).
pub(crate) type BusyProbe = Box<dyn Fn() -> bool + Send + Sync>;

/// A bounded set of connections.
pub(crate) struct Limiter {
    max: usize,
    epoch: Instant,
    slots: Mutex<HashMap<u64, Arc<Slot>>>,
    next: AtomicU64,
    /// Woken when a slot is freed or a connection goes idle.
    room: Notify,
    /// Connections closed to make room, for hosts and tests.
    evicted: AtomicU64,
}

/// One connection's place in the limiter.
pub(crate) struct Slot {
    /// Requests (or response bodies) in flight.
    busy: AtomicUsize,
    /// Milliseconds since the limiter's epoch at the last activity.
    last_active: AtomicU64,
    /// Cancelled when the connection is chosen to make room: its task closes it.
    evict: CancellationToken,
    /// Whether the connection is already on its way out.
    leaving: AtomicBool,
    probe: OnceLock<BusyProbe>,
}

impl std::fmt::Debug for Limiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limiter")
            .field("max", &self.max)
            .field("open", &self.len())
            .finish()
    }
}

impl Limiter {
    /// A limiter of `max` connections (at least one).
    pub(crate) fn new(max: usize) -> Arc<Limiter> {
        Arc::new(Limiter {
            max: max.max(1),
            epoch: Instant::now(),
            slots: Mutex::new(HashMap::new()),
            next: AtomicU64::new(0),
            room: Notify::new(),
            evicted: AtomicU64::new(0),
        })
    }

    /// The most connections open at once.
    #[cfg(any(feature = "http-server", test))]
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// Open connections.
    pub(crate) fn len(&self) -> usize {
        self.slots.lock().expect("limiter lock").len()
    }

    /// Connections closed so far to make room for new ones.
    #[cfg(any(feature = "http-server", test))]
    pub(crate) fn evicted(&self) -> u64 {
        self.evicted.load(Ordering::Relaxed)
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Resolves when a new connection can be admitted: there is room, or an idle connection
    /// can give up its slot.
    pub(crate) async fn ready(&self) {
        loop {
            let notified = self.room.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let slots = self.slots.lock().expect("limiter lock");
                if slots.len() < self.max || slots.values().any(|s| s.evictable()) {
                    return;
                }
            }
            notified.await;
        }
    }

    /// Admits a connection, closing the longest-idle one if the limit is reached. Waits when
    /// every connection is busy.
    pub(crate) async fn admit(self: &Arc<Self>) -> SlotGuard {
        loop {
            let notified = self.room.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(guard) = self.try_admit() {
                return guard;
            }
            notified.await;
        }
    }

    fn try_admit(self: &Arc<Self>) -> Option<SlotGuard> {
        let mut slots = self.slots.lock().expect("limiter lock");
        if slots.len() >= self.max {
            // Make room: the connection idle longest, with nothing in flight.
            let victim = slots
                .iter()
                .filter(|(_, s)| s.evictable())
                .min_by_key(|(_, s)| s.last_active.load(Ordering::Relaxed))
                .map(|(id, _)| *id)?;
            if let Some(s) = slots.remove(&victim) {
                s.leaving.store(true, Ordering::Relaxed);
                s.evict.cancel();
                self.evicted.fetch_add(1, Ordering::Relaxed);
            }
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let slot = Arc::new(Slot {
            busy: AtomicUsize::new(0),
            last_active: AtomicU64::new(self.now_ms()),
            evict: CancellationToken::new(),
            leaving: AtomicBool::new(false),
            probe: OnceLock::new(),
        });
        slots.insert(id, slot.clone());
        Some(SlotGuard {
            id,
            slot,
            limiter: self.clone(),
        })
    }

    /// Closes the longest-idle connection now (the process ran out of descriptors); returns
    /// whether there was one.
    pub(crate) fn shed_one(&self) -> bool {
        let mut slots = self.slots.lock().expect("limiter lock");
        let victim = slots
            .iter()
            .filter(|(_, s)| s.evictable())
            .min_by_key(|(_, s)| s.last_active.load(Ordering::Relaxed))
            .map(|(id, _)| *id);
        match victim.and_then(|v| slots.remove(&v)) {
            Some(s) => {
                s.leaving.store(true, Ordering::Relaxed);
                s.evict.cancel();
                self.evicted.fetch_add(1, Ordering::Relaxed);
                true
            }
            None => false,
        }
    }
}

impl Slot {
    fn evictable(&self) -> bool {
        !self.leaving.load(Ordering::Relaxed)
            && self.busy.load(Ordering::Relaxed) == 0
            && !self.probe.get().is_some_and(|p| p())
    }
}

/// A connection's slot; dropping it frees the slot.
pub(crate) struct SlotGuard {
    id: u64,
    slot: Arc<Slot>,
    limiter: Arc<Limiter>,
}

impl std::fmt::Debug for SlotGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlotGuard").field("id", &self.id).finish()
    }
}

impl SlotGuard {
    /// Cancelled when this connection must close to make room.
    pub(crate) fn evicted(&self) -> &CancellationToken {
        &self.slot.evict
    }

    /// Records activity (a request or a message).
    pub(crate) fn touch(&self) {
        self.slot
            .last_active
            .store(self.limiter.now_ms(), Ordering::Relaxed);
    }

    /// Marks one unit of work in flight until the returned guard is dropped.
    #[cfg(any(feature = "http-server", test))]
    pub(crate) fn enter(&self) -> BusyGuard {
        self.touch();
        self.slot.busy.fetch_add(1, Ordering::Relaxed);
        BusyGuard {
            slot: self.slot.clone(),
            limiter: self.limiter.clone(),
        }
    }

    /// Whether work is in flight (counted, or reported by the probe).
    #[cfg(any(feature = "ws", test))]
    pub(crate) fn is_busy(&self) -> bool {
        self.slot.busy.load(Ordering::Relaxed) > 0 || self.slot.probe.get().is_some_and(|p| p())
    }

    /// Installs a probe for work the transport cannot count itself.
    #[cfg(any(all(feature = "server", feature = "ws"), test))]
    pub(crate) fn set_probe(&self, probe: BusyProbe) {
        let _ = self.slot.probe.set(probe);
    }
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        self.limiter
            .slots
            .lock()
            .expect("limiter lock")
            .remove(&self.id);
        self.limiter.room.notify_waiters();
    }
}

/// Work in flight on a connection; dropping it ends that work.
#[cfg(any(feature = "http-server", test))]
pub(crate) struct BusyGuard {
    slot: Arc<Slot>,
    limiter: Arc<Limiter>,
}

#[cfg(any(feature = "http-server", test))]
impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.slot
            .last_active
            .store(self.limiter.now_ms(), Ordering::Relaxed);
        if self.slot.busy.fetch_sub(1, Ordering::Relaxed) == 1 {
            self.limiter.room.notify_waiters();
        }
    }
}

/// Whether `accept` failed because the process or the system ran out of file descriptors
/// (`EMFILE`, `ENFILE`: 24 and 23 on Linux and the BSDs).
pub(crate) fn out_of_descriptors(e: &std::io::Error) -> bool {
    cfg!(unix) && matches!(e.raw_os_error(), Some(23 | 24))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn the_longest_idle_connection_makes_room() {
        let limiter = Limiter::new(2);
        let a = limiter.admit().await;
        tokio::time::sleep(Duration::from_millis(5)).await;
        let b = limiter.admit().await;
        let busy = b.enter();
        // Full: the third takes a's slot (idle); b is busy and stays.
        let c = limiter.admit().await;
        assert!(a.evicted().is_cancelled());
        assert!(!b.evicted().is_cancelled());
        assert_eq!(limiter.len(), 2);
        assert_eq!(limiter.evicted(), 1);
        drop(a); // its task ends later; the slot was already given away
        assert_eq!(limiter.len(), 2);
        // c is idle, b busy: a fourth takes c's slot.
        let _d = limiter.admit().await;
        assert!(c.evicted().is_cancelled());
        drop(busy);
        drop(c);
    }

    #[tokio::test]
    async fn when_every_connection_is_busy_admission_waits() {
        let limiter = Limiter::new(1);
        let a = limiter.admit().await;
        let work = a.enter();
        let waiting = {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                limiter.ready().await;
                limiter.admit().await
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished());
        drop(work); // a is idle now: it gives up its slot
        let b = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("admitted")
            .unwrap();
        assert!(a.evicted().is_cancelled());
        assert!(!b.evicted().is_cancelled());
        // A probe counts as busy.
        b.set_probe(Box::new(|| true));
        assert!(b.is_busy());
        assert!(!limiter.shed_one());
    }
}
