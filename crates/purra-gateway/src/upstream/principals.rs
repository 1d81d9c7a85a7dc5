//! Upstream connections of one principal each: for an upstream called as the person who asked
//! (`[upstreams.ID.auth]` token exchange, or a stdio server started with the principal's own
//! stored secret), each principal gets its own connection (its own process for stdio) made with
//! its own credential, from a bounded pool.
//!
//! - A connection is made for the principal that asked and used only for its calls: the pool is
//!   keyed by the principal, never shared between two.
//! - At most `max` connections are open; one more closes the least recently used idle one (no
//!   call using it); when every one is in use the call is refused (`upstream_busy`), nothing
//!   sent.
//! - A connection idle for `idle_timeout` is closed (its process stopped) by [`Principals::reap`].
//! - A principal's connection lists the upstream's tools itself; a bound tool whose listing
//!   differs from the upstream's shared (discovered, served) one is refused for that principal
//!   (`mcp_catalog_changed`), so a principal's process never serves a definition nobody bound.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use purra_protocol::auth::ValidatedToken;
use purra_protocol::http::HttpAuth;
use tokio::sync::Semaphore;

use crate::upstream::Live;

/// Who a call is made for: the principal (`ISSUER#SUBJECT`, or the configured one) and the
/// bearer token it proved itself with, when it came with one (the subject of a token exchange;
/// never sent on itself).
#[derive(Clone, Debug)]
pub(crate) struct Who {
    /// The principal's name.
    pub principal: String,
    /// The caller's validated inbound token, if any.
    pub token: Option<ValidatedToken>,
}

/// What one principal's connection is made with.
#[derive(Default)]
pub(crate) struct ConnectAs {
    /// Environment variables added to a stdio command's (the principal's secrets).
    pub env: Vec<(String, String)>,
    /// The authorization of a Streamable HTTP connection's requests.
    pub auth: Option<Arc<dyn HttpAuth>>,
}

impl std::fmt::Debug for ConnectAs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectAs")
            .field("env", &self.env.iter().map(|(k, _)| k).collect::<Vec<_>>())
            .field("auth", &self.auth.is_some())
            .finish()
    }
}

/// Why a principal's connection cannot be made; the text is for the caller and the log, and
/// names no secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CredentialError {
    /// The principal has no credential for this upstream: the text says how to get one.
    Missing(String),
    /// The principal has no connection to this upstream yet: it makes one at `url` (the
    /// approver page's `/connect/ID`), which the text names too.
    Unconnected {
        /// What the caller is told.
        why: String,
        /// Where the principal connects.
        url: String,
    },
    /// The credential could not be obtained now (the authorization server refused or is
    /// unreachable); the text names the reason, never a token.
    Unavailable(String),
}

impl std::fmt::Display for CredentialError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CredentialError::Missing(why)
            | CredentialError::Unavailable(why)
            | CredentialError::Unconnected { why, .. } => f.write_str(why),
        }
    }
}

/// How an upstream's connections of one principal are made: the credential is obtained for
/// `who` when its connection is made, and again whenever a request needs it.
pub(crate) trait Credentials: Send + Sync + 'static {
    /// What a connection of `who` is made with, or why there is none.
    fn connect_as<'a>(
        &'a self,
        who: &'a Who,
    ) -> purra_protocol::auth::BoxFuture<'a, Result<ConnectAs, CredentialError>>;
    /// Whether the credential is made from the caller's own inbound token (token exchange):
    /// then nothing is sent as a principal without its call (a decided write waits for it).
    fn needs_caller_token(&self) -> bool {
        false
    }
    /// Whether `who` still holds its credential, checked on each call of its open connection:
    /// cheap (no secret opened, nothing written); `Err` refuses the call and closes the
    /// connection made with it. By default nothing to check (each request obtains its own).
    fn still_held<'a>(
        &'a self,
        _who: &'a Who,
    ) -> purra_protocol::auth::BoxFuture<'a, Result<(), CredentialError>> {
        Box::pin(std::future::ready(Ok(())))
    }
    /// Tells the credential of `who` that a newer inbound token came (a refreshed one): the
    /// next request of its connection exchanges that one.
    fn update(&self, _who: &Who) {}
    /// Drops what is cached for `who`, so the next request carries a credential obtained
    /// now (a write's dispatch, after its approval and claim).
    fn renew(&self, _who: &Who) {}
    /// Who the upstream was called as for `who` (`sub`, and `act` when the gateway is named
    /// as actor), for the receipt and the audit: never a token.
    fn called_as(&self, _who: &Who) -> Option<String> {
        None
    }
}

/// One principal's connection in the pool.
pub(crate) struct Slot {
    /// The principal it is for.
    pub principal: String,
    live: RwLock<Option<Arc<Live>>>,
    /// One (re)connection at a time.
    pub gate: Semaphore,
    users: AtomicUsize,
    last_used: Mutex<Instant>,
}

impl Slot {
    fn new(principal: &str) -> Slot {
        Slot {
            principal: principal.to_owned(),
            live: RwLock::new(None),
            gate: Semaphore::new(1),
            users: AtomicUsize::new(0),
            last_used: Mutex::new(Instant::now()),
        }
    }

    /// The live state, if any (possibly no longer current).
    pub fn live(&self) -> Option<Arc<Live>> {
        self.live.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Replaces the live state.
    pub fn set_live(&self, live: Option<Arc<Live>>) {
        *self.live.write().unwrap_or_else(|p| p.into_inner()) = live;
    }

    fn idle_since(&self) -> Option<Instant> {
        (self.users.load(Ordering::SeqCst) == 0)
            .then(|| *self.last_used.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Closes its connection (its process, for stdio), if any.
    pub async fn close(&self) {
        let live = self.live.write().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(live) = live {
            live.monitor.close();
            live.conn.close().await;
        }
    }
}

/// A call's use of a principal's slot: while it is held the slot is not evicted.
pub(crate) struct SlotInUse(pub Arc<Slot>);

impl Drop for SlotInUse {
    fn drop(&mut self) {
        *self.0.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
        self.0.users.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The pool was full of connections in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PoolFull;

/// The per-principal connections of one upstream.
pub(crate) struct Principals {
    max: usize,
    idle_timeout: Duration,
    slots: Mutex<BTreeMap<String, Arc<Slot>>>,
    /// Connections closed to make room or because they were idle, for the log and the tests.
    pub evicted: AtomicUsize,
}

impl Principals {
    /// A pool of at most `max` connections (at least 1), each closed after `idle_timeout` idle.
    pub fn new(max: usize, idle_timeout: Duration) -> Principals {
        Principals {
            max: max.max(1),
            idle_timeout,
            slots: Mutex::new(BTreeMap::new()),
            evicted: AtomicUsize::new(0),
        }
    }

    /// The slot of `principal`, held for one call: its own when it has one; else a new one,
    /// closing the least recently used idle slot first when the pool is full. `PoolFull` when
    /// every slot is in use.
    pub fn take(&self, principal: &str) -> Result<SlotInUse, PoolFull> {
        let (slot, evict) = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            let slot = match slots.get(principal) {
                Some(s) => (s.clone(), None),
                None => {
                    let mut evict = None;
                    if slots.len() >= self.max {
                        let oldest = slots
                            .iter()
                            .filter_map(|(k, s)| s.idle_since().map(|t| (t, k.clone())))
                            .min();
                        let Some((_, key)) = oldest else {
                            return Err(PoolFull);
                        };
                        evict = slots.remove(&key);
                    }
                    let s = Arc::new(Slot::new(principal));
                    slots.insert(principal.to_owned(), s.clone());
                    (s, evict)
                }
            };
            slot.0.users.fetch_add(1, Ordering::SeqCst);
            slot
        };
        if let Some(old) = evict {
            self.evicted.fetch_add(1, Ordering::Relaxed);
            tracing::info!(principal = %old.principal, "closing the least recently used idle upstream connection");
            tokio::spawn(async move { old.close().await });
        }
        Ok(SlotInUse(slot))
    }

    /// Closes the connections idle for longer than the idle timeout.
    pub async fn reap(&self) {
        let now = Instant::now();
        let idle: Vec<Arc<Slot>> = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            let keys: Vec<String> = slots
                .iter()
                .filter(|(_, s)| {
                    s.idle_since()
                        .is_some_and(|t| now.duration_since(t) >= self.idle_timeout)
                })
                .map(|(k, _)| k.clone())
                .collect();
            keys.iter().filter_map(|k| slots.remove(k)).collect()
        };
        for s in idle {
            self.evicted.fetch_add(1, Ordering::Relaxed);
            s.close().await;
        }
    }

    /// The principals with a slot now (connected or connecting).
    #[cfg(test)]
    pub fn principals(&self) -> Vec<String> {
        self.slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect()
    }

    /// Closes every connection.
    pub async fn close(&self) {
        let all: Vec<Arc<Slot>> =
            std::mem::take(&mut *self.slots.lock().unwrap_or_else(|p| p.into_inner()))
                .into_values()
                .collect();
        for s in all {
            s.close().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_full_pool_evicts_its_least_recently_used_idle_slot_and_never_one_in_use() {
        let pool = Principals::new(2, Duration::from_secs(600));
        let alice = pool.take("alice").unwrap();
        drop(pool.take("bob").unwrap());
        // alice is in use, bob idle: carol takes bob's place.
        let carol = pool.take("carol").unwrap();
        assert_eq!(pool.principals(), vec!["alice", "carol"]);
        assert_eq!(pool.evicted.load(Ordering::Relaxed), 1);
        // Both in use: one more is refused, nothing evicted.
        assert_eq!(pool.take("dave").err(), Some(PoolFull));
        assert_eq!(pool.principals(), vec!["alice", "carol"]);
        // The same principal again gets its own slot back.
        let again = pool.take("alice").unwrap();
        assert!(Arc::ptr_eq(&again.0, &alice.0));
        drop((alice, again));
        std::thread::sleep(Duration::from_millis(5));
        drop(carol);
        // alice was idle first: she goes when dave comes.
        let _dave = pool.take("dave").unwrap();
        assert_eq!(pool.principals(), vec!["carol", "dave"]);
    }

    #[tokio::test]
    async fn idle_slots_are_closed_after_the_idle_timeout() {
        let pool = Principals::new(4, Duration::from_millis(20));
        let busy = pool.take("alice").unwrap();
        drop(pool.take("bob").unwrap());
        tokio::time::sleep(Duration::from_millis(40)).await;
        pool.reap().await;
        assert_eq!(pool.principals(), vec!["alice"]);
        drop(busy);
    }
}
