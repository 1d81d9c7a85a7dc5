//! Where Streamable HTTP sessions live, so that any process of a fleet serves any session.
//!
//! A [`SessionStore`] keeps what a session needs to continue in another process (its
//! [`SessionRecord`]: the principal it is bound to and its negotiated state — revision, client
//! capabilities and info, log level, resource subscriptions — as JSON), a last-seen time for
//! fleet-wide idle expiry, and a bounded log of the events its SSE streams carried, so a client
//! that reconnects with `Last-Event-ID` to any process gets what it missed.
//!
//! Without a store ([`HttpServerConfig::session_store`](crate::HttpServerConfig::session_store)
//! `None`, the default) sessions live in the process's memory as before, at no extra cost.
//! [`MemorySessionStore`] shares sessions between servers of one process (tests, several
//! endpoints); purra-sqlite and purra-postgres implement the trait for a fleet.
//!
//! Why a store and not the state sealed in the session id: a sealed id cannot be ended
//! everywhere (`DELETE` would need a revocation list, which is a store), cannot carry a changing
//! log level or subscription set without handing the client a new id (the protocol has no way to
//! do that), and carries no event log; a store costs one indexed read per request on a process
//! that does not hold the session yet (see `BENCHMARKS.md`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use crate::session::BoxFuture;

/// A store's failure (its backend's message). A request that needs the store then fails with
/// `503`; nothing is lost in the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionStoreError(pub String);

impl std::fmt::Display for SessionStoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "session store: {}", self.0)
    }
}

impl std::error::Error for SessionStoreError {}

/// One session as kept in a store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRecord {
    /// The session id (`Mcp-Session-Id`).
    pub id: String,
    /// The principal that created it (`None`: created without one), as [`stored_owner`] keeps
    /// its [`Principal::binding_key`](crate::Principal::binding_key); only that principal may
    /// resume it. Text without NUL.
    pub owner: Option<String>,
    /// The session's negotiated state, JSON written and read by the server (opaque to stores).
    pub state: String,
    /// When the session was last used anywhere (touched at most every
    /// [`session_touch_interval`](crate::HttpServerConfig::session_touch_interval)).
    pub last_seen: SystemTime,
}

/// How a session's owner is kept in a store: its
/// [`Principal::binding_key`](crate::Principal::binding_key) as a JSON string. The key joins
/// issuer and subject with NUL, which a PostgreSQL text column refuses; the JSON form has none
/// and is as unambiguous.
pub fn stored_owner(binding_key: &str) -> String {
    serde_json::Value::from(binding_key).to_string()
}

/// One event of a session's SSE stream, kept for resumption.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEvent {
    /// The session it belongs to.
    pub session: String,
    /// The stream's id (the `s…` part of the event id; unique within the session across the
    /// fleet).
    pub stream: u64,
    /// The event's number in its stream (the `e…` part).
    pub seq: u64,
    /// The encoded SSE event, as it was sent.
    pub data: Vec<u8>,
    /// When it was kept.
    pub at: SystemTime,
}

/// The bounds of one session's event log: past any of them its oldest events go (the newest
/// is always kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventLogBounds {
    /// Events kept per session.
    pub max_events: usize,
    /// Bytes of events kept per session.
    pub max_bytes: usize,
    /// How long an event is kept.
    pub max_age: Duration,
}

impl Default for EventLogBounds {
    /// 256 events, 1 MiB, 5 minutes.
    fn default() -> Self {
        EventLogBounds {
            max_events: 256,
            max_bytes: 1024 * 1024,
            max_age: Duration::from_secs(300),
        }
    }
}

/// What a store holds of one stream after an event: the events that followed it, and the
/// number of the oldest event it still keeps of that stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamReplay {
    /// The oldest kept event's number (`None`: nothing kept of this stream).
    pub oldest: Option<u64>,
    /// The events after the one asked for, oldest first.
    pub events: Vec<StoredEvent>,
}

/// A request's stream still running in some process, kept so another process can follow it
/// or, once its holder's lease ran out, take it over (run the request again, continuing the
/// stream). Kept from the stream's first event that is not its response (a fast call writes
/// none) until its response is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamRecord {
    /// The session it belongs to.
    pub session: String,
    /// The stream's id (as in [`StoredEvent::stream`]).
    pub stream: u64,
    /// The JSON-RPC request the stream answers, as posted.
    pub request: String,
    /// The token of the process running the request.
    pub holder: String,
    /// Until when the holder holds it; it renews the lease while the request runs.
    pub lease_until: SystemTime,
}

/// Sessions and their event logs, shared by the processes that serve them. Every method is
/// one short operation of the backend; the server calls them off its locks.
pub trait SessionStore: Send + Sync + 'static {
    /// Creates or replaces the session `record.id` (at `initialize` and when its state
    /// changes).
    fn save_session(&self, record: SessionRecord) -> BoxFuture<'_, Result<(), SessionStoreError>>;

    /// The session `id`, if kept.
    fn load_session(
        &self,
        id: String,
    ) -> BoxFuture<'_, Result<Option<SessionRecord>, SessionStoreError>>;

    /// The session `id` if kept (`None`: ended or expired); with `seen`, its last-seen time is
    /// set first. Called on every request a process serves from its own copy: the state it
    /// returns carries changes other processes saved (a log level, subscriptions).
    fn touch_session(
        &self,
        id: String,
        seen: Option<SystemTime>,
    ) -> BoxFuture<'_, Result<Option<SessionRecord>, SessionStoreError>>;

    /// A number that changes whenever a kept session is ended, expired, or saved with another
    /// state or owner, by any process of the fleet (keeping a new session need not change it),
    /// read at once without waiting on the backend; `None` when the store cannot tell now (the
    /// default: then every request reads its session).
    ///
    /// A server that read a session while this was `v` and reads `v` again knows the session
    /// is kept as it read it, and serves the request without reading it
    /// ([`touch_session`](Self::touch_session) still writes its last-seen time every
    /// [`session_touch_interval`](crate::HttpServerConfig::session_touch_interval)). So a
    /// store that answers `Some` must change the number, before the write that ends or changes
    /// a session is reported done to its caller, in every process that shares it.
    fn sessions_version(&self) -> Option<u64> {
        None
    }

    /// Ends the session `id` and forgets its events; whether it was kept.
    fn end_session(&self, id: String) -> BoxFuture<'_, Result<bool, SessionStoreError>>;

    /// Ends every session last seen before `before`, with its events; how many.
    fn expire_sessions(&self, before: SystemTime) -> BoxFuture<'_, Result<u64, SessionStoreError>>;

    /// Keeps `events`, oldest first, each in its session's log within `bounds` (what a
    /// session's writer queued while the store was busy); an event of a session the store does
    /// not keep is dropped. A durable store writes them as one transaction and prunes each
    /// session's log once.
    fn append_events(
        &self,
        events: Vec<StoredEvent>,
        bounds: EventLogBounds,
    ) -> BoxFuture<'_, Result<(), SessionStoreError>>;

    /// Keeps one `event`, as [`SessionStore::append_events`] keeps each.
    fn append_event(
        &self,
        event: StoredEvent,
        bounds: EventLogBounds,
    ) -> BoxFuture<'_, Result<(), SessionStoreError>> {
        self.append_events(vec![event], bounds)
    }

    /// The events of stream `stream` of session `session` after event `after`.
    fn events_after(
        &self,
        session: String,
        stream: u64,
        after: u64,
    ) -> BoxFuture<'_, Result<StreamReplay, SessionStoreError>>;

    /// Creates or replaces the record of stream `record.stream` of its session; a record of a
    /// session the store does not keep is dropped. Ending or expiring the session forgets it.
    fn save_stream(&self, record: StreamRecord) -> BoxFuture<'_, Result<(), SessionStoreError>>;

    /// The record of stream `stream` of session `session`, if kept (`None`: its request was
    /// answered, or it was never recorded).
    fn load_stream(
        &self,
        session: String,
        stream: u64,
    ) -> BoxFuture<'_, Result<Option<StreamRecord>, SessionStoreError>>;

    /// Leases the stream to `holder` until `until`, in one conditional step: when it is kept
    /// and `holder` already holds it (a renewal, or with `until` at or before `now` a release)
    /// or its lease ended before `now` (a take-over: of processes racing for it exactly one
    /// wins). Whether it did.
    fn lease_stream(
        &self,
        session: String,
        stream: u64,
        holder: String,
        now: SystemTime,
        until: SystemTime,
    ) -> BoxFuture<'_, Result<bool, SessionStoreError>>;

    /// Forgets the record of a stream whose request was answered.
    fn finish_stream(
        &self,
        session: String,
        stream: u64,
    ) -> BoxFuture<'_, Result<(), SessionStoreError>>;
}

impl std::fmt::Debug for dyn SessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionStore")
    }
}

/// A [`SessionStore`] in this process's memory: servers of one process share sessions through
/// it (a fleet uses a database's).
#[derive(Debug, Default)]
pub struct MemorySessionStore {
    inner: Mutex<MemoryInner>,
}

#[derive(Debug, Default)]
struct MemoryInner {
    sessions: HashMap<String, SessionRecord>,
    /// Per session: events by arrival (a counter), each with its stream and number.
    events: HashMap<String, BTreeMap<u64, StoredEvent>>,
    /// Per session: its running streams' records by stream id.
    streams: HashMap<String, HashMap<u64, StreamRecord>>,
    next: u64,
    /// [`SessionStore::sessions_version`]: counts sessions ended or changed.
    version: u64,
}

impl MemorySessionStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn with<T>(&self, f: impl FnOnce(&mut MemoryInner) -> T) -> T {
        f(&mut self.inner.lock().expect("session store lock"))
    }
}

/// Drops a session log's oldest events past `bounds` (count, bytes, age); the newest stays.
pub(crate) fn prune<K: Ord + Copy>(
    log: &mut BTreeMap<K, StoredEvent>,
    bounds: EventLogBounds,
    now: SystemTime,
) {
    let mut bytes: usize = log.values().map(|e| e.data.len()).sum();
    while log.len() > 1 {
        let Some((&k, oldest)) = log.iter().next() else {
            break;
        };
        let old = now
            .duration_since(oldest.at)
            .is_ok_and(|d| d > bounds.max_age);
        if log.len() > bounds.max_events.max(1) || bytes > bounds.max_bytes || old {
            bytes -= oldest.data.len();
            log.remove(&k);
        } else {
            break;
        }
    }
}

fn ready<T: Send + 'static>(v: T) -> BoxFuture<'static, T> {
    Box::pin(std::future::ready(v))
}

impl SessionStore for MemorySessionStore {
    fn save_session(&self, record: SessionRecord) -> BoxFuture<'_, Result<(), SessionStoreError>> {
        self.with(|m| {
            let changed = m
                .sessions
                .get(&record.id)
                .is_some_and(|r| r.state != record.state || r.owner != record.owner);
            m.version += u64::from(changed);
            m.sessions.insert(record.id.clone(), record)
        });
        ready(Ok(()))
    }

    fn load_session(
        &self,
        id: String,
    ) -> BoxFuture<'_, Result<Option<SessionRecord>, SessionStoreError>> {
        ready(Ok(self.with(|m| m.sessions.get(&id).cloned())))
    }

    fn touch_session(
        &self,
        id: String,
        seen: Option<SystemTime>,
    ) -> BoxFuture<'_, Result<Option<SessionRecord>, SessionStoreError>> {
        ready(Ok(self.with(|m| {
            let r = m.sessions.get_mut(&id)?;
            if let Some(t) = seen {
                r.last_seen = t;
            }
            Some(r.clone())
        })))
    }

    fn sessions_version(&self) -> Option<u64> {
        Some(self.with(|m| m.version))
    }

    fn end_session(&self, id: String) -> BoxFuture<'_, Result<bool, SessionStoreError>> {
        ready(Ok(self.with(|m| {
            m.events.remove(&id);
            m.streams.remove(&id);
            let kept = m.sessions.remove(&id).is_some();
            m.version += u64::from(kept);
            kept
        })))
    }

    fn expire_sessions(&self, before: SystemTime) -> BoxFuture<'_, Result<u64, SessionStoreError>> {
        ready(Ok(self.with(|m| {
            let gone: Vec<String> = m
                .sessions
                .values()
                .filter(|r| r.last_seen < before)
                .map(|r| r.id.clone())
                .collect();
            m.version += u64::from(!gone.is_empty());
            for id in &gone {
                m.sessions.remove(id);
                m.events.remove(id);
                m.streams.remove(id);
            }
            gone.len() as u64
        })))
    }

    fn append_events(
        &self,
        events: Vec<StoredEvent>,
        bounds: EventLogBounds,
    ) -> BoxFuture<'_, Result<(), SessionStoreError>> {
        self.with(|m| {
            for event in events {
                if !m.sessions.contains_key(&event.session) {
                    continue;
                }
                let n = m.next;
                m.next += 1;
                let now = event.at;
                let log = m.events.entry(event.session.clone()).or_default();
                log.insert(n, event);
                prune(log, bounds, now);
            }
        });
        ready(Ok(()))
    }

    fn events_after(
        &self,
        session: String,
        stream: u64,
        after: u64,
    ) -> BoxFuture<'_, Result<StreamReplay, SessionStoreError>> {
        ready(Ok(self.with(|m| {
            let mut replay = StreamReplay::default();
            for e in m.events.get(&session).into_iter().flat_map(|l| l.values()) {
                if e.stream != stream {
                    continue;
                }
                replay.oldest = Some(replay.oldest.map_or(e.seq, |o: u64| o.min(e.seq)));
                if e.seq > after {
                    replay.events.push(e.clone());
                }
            }
            replay.events.sort_by_key(|e| e.seq);
            replay
        })))
    }

    fn save_stream(&self, record: StreamRecord) -> BoxFuture<'_, Result<(), SessionStoreError>> {
        self.with(|m| {
            if m.sessions.contains_key(&record.session) {
                let streams = m.streams.entry(record.session.clone()).or_default();
                streams.insert(record.stream, record);
            }
        });
        ready(Ok(()))
    }

    fn load_stream(
        &self,
        session: String,
        stream: u64,
    ) -> BoxFuture<'_, Result<Option<StreamRecord>, SessionStoreError>> {
        ready(Ok(
            self.with(|m| m.streams.get(&session)?.get(&stream).cloned())
        ))
    }

    fn lease_stream(
        &self,
        session: String,
        stream: u64,
        holder: String,
        now: SystemTime,
        until: SystemTime,
    ) -> BoxFuture<'_, Result<bool, SessionStoreError>> {
        ready(Ok(self.with(|m| {
            let Some(r) = m.streams.get_mut(&session).and_then(|s| s.get_mut(&stream)) else {
                return false;
            };
            if r.holder != holder && r.lease_until >= now {
                return false;
            }
            r.holder = holder;
            r.lease_until = until;
            true
        })))
    }

    fn finish_stream(
        &self,
        session: String,
        stream: u64,
    ) -> BoxFuture<'_, Result<(), SessionStoreError>> {
        self.with(|m| {
            if let Some(s) = m.streams.get_mut(&session) {
                s.remove(&stream);
                if s.is_empty() {
                    m.streams.remove(&session);
                }
            }
        });
        ready(Ok(()))
    }
}

/// A contract every [`SessionStore`] must meet, for implementations' tests: call it with a
/// fresh store (`purra-sqlite` and `purra-postgres` run it; so does this crate for
/// [`MemorySessionStore`]). Panics on the first broken rule.
pub async fn check_contract(store: &dyn SessionStore) {
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let rec = |id: &str, owner: Option<&str>, at: SystemTime| SessionRecord {
        id: id.into(),
        owner: owner.map(Into::into),
        state: format!("{{\"v\":\"{id}\"}}"),
        last_seen: at,
    };
    assert_eq!(store.load_session("a".into()).await.unwrap(), None);
    store
        .save_session(rec("a", Some("alice"), t0))
        .await
        .unwrap();
    store.save_session(rec("b", None, t0)).await.unwrap();
    let a = store.load_session("a".into()).await.unwrap().unwrap();
    assert_eq!(a, rec("a", Some("alice"), t0));
    assert_eq!(
        store.load_session("b".into()).await.unwrap().unwrap().owner,
        None
    );
    // An owner as the server keeps a principal's (issuer and subject) comes back as it went.
    let principal = stored_owner("https://issuer.example\0alice");
    assert!(!principal.contains('\0'), "{principal:?}");
    store
        .save_session(rec("p", Some(&principal), t0))
        .await
        .unwrap();
    assert_eq!(
        store.load_session("p".into()).await.unwrap(),
        Some(rec("p", Some(&principal), t0))
    );
    // A store that reports a version of its sessions changes it as each is ended or changed.
    let moved = |before: Option<u64>, what: &str| {
        let after = store.sessions_version();
        assert!(
            before.is_none() || after != before,
            "{what}: sessions_version stayed {before:?}"
        );
        after
    };
    let v = store.sessions_version();
    assert!(store.end_session("p".into()).await.unwrap());
    let v = moved(v, "a session ended");
    // Saving again replaces the state.
    let mut changed = rec("a", Some("alice"), t0);
    changed.state = "{\"level\":\"debug\"}".into();
    store.save_session(changed.clone()).await.unwrap();
    moved(v, "a session's state replaced");
    assert_eq!(
        store.load_session("a".into()).await.unwrap(),
        Some(changed.clone())
    );
    // Touching moves last_seen; an unknown id is not kept.
    let t1 = t0 + Duration::from_secs(60);
    let mut touched = changed.clone();
    touched.last_seen = t1;
    assert_eq!(
        store.touch_session("a".into(), Some(t1)).await.unwrap(),
        Some(touched.clone())
    );
    assert_eq!(
        store.touch_session("a".into(), None).await.unwrap(),
        Some(touched)
    );
    assert_eq!(
        store.touch_session("zz".into(), Some(t1)).await.unwrap(),
        None
    );
    assert_eq!(
        store
            .load_session("a".into())
            .await
            .unwrap()
            .unwrap()
            .last_seen,
        t1
    );
    // Events: per stream, after a number, bounded by count, bytes and age.
    let ev = |stream: u64, seq: u64, n: usize, at: SystemTime| StoredEvent {
        session: "a".into(),
        stream,
        seq,
        data: vec![b'x'; n],
        at,
    };
    let bounds = EventLogBounds {
        max_events: 3,
        max_bytes: 1000,
        max_age: Duration::from_secs(300),
    };
    store.append_event(ev(7, 1, 10, t1), bounds).await.unwrap();
    store.append_event(ev(7, 2, 10, t1), bounds).await.unwrap();
    store.append_event(ev(9, 1, 10, t1), bounds).await.unwrap();
    let r = store.events_after("a".into(), 7, 1).await.unwrap();
    assert_eq!(r.oldest, Some(1));
    assert_eq!(r.events, vec![ev(7, 2, 10, t1)]);
    assert_eq!(
        store.events_after("a".into(), 8, 0).await.unwrap(),
        StreamReplay::default()
    );
    // A fourth event: the session's oldest (stream 7's first) goes.
    store.append_event(ev(9, 2, 10, t1), bounds).await.unwrap();
    assert_eq!(
        store.events_after("a".into(), 7, 0).await.unwrap().oldest,
        Some(2)
    );
    // Bytes: a large event pushes out all older ones, and is itself kept.
    store.append_event(ev(9, 3, 995, t1), bounds).await.unwrap();
    let r = store.events_after("a".into(), 9, 0).await.unwrap();
    assert_eq!(r.oldest, Some(3));
    assert_eq!(r.events.len(), 1);
    assert_eq!(
        store.events_after("a".into(), 7, 0).await.unwrap(),
        StreamReplay::default()
    );
    // Age: an event older than max_age goes when the next is kept.
    let t2 = t1 + Duration::from_secs(301);
    store.append_event(ev(9, 4, 1, t2), bounds).await.unwrap();
    let r = store.events_after("a".into(), 9, 0).await.unwrap();
    assert_eq!(r.oldest, Some(4));
    // Events of an unknown session are dropped.
    let mut stray = ev(1, 1, 1, t2);
    stray.session = "zz".into();
    store.append_event(stray, bounds).await.unwrap();
    assert_eq!(
        store.events_after("zz".into(), 1, 0).await.unwrap(),
        StreamReplay::default()
    );
    // Streams: recorded, leased by one holder at a time, taken over once the lease ran out.
    let sr = |stream: u64, holder: &str, until: SystemTime| StreamRecord {
        session: "a".into(),
        stream,
        request: "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\"}".into(),
        holder: holder.into(),
        lease_until: until,
    };
    let lease = |s: u64, h: &str, now: SystemTime, until: SystemTime| {
        store.lease_stream("a".into(), s, h.into(), now, until)
    };
    assert_eq!(store.load_stream("a".into(), 5).await.unwrap(), None);
    let l1 = t2 + Duration::from_secs(5);
    store.save_stream(sr(5, "p1", l1)).await.unwrap();
    store.save_stream(sr(6, "p1", l1)).await.unwrap();
    assert_eq!(
        store.load_stream("a".into(), 5).await.unwrap(),
        Some(sr(5, "p1", l1))
    );
    // A stream of a session the store does not keep is dropped.
    let mut stray = sr(5, "p1", l1);
    stray.session = "zz".into();
    store.save_stream(stray).await.unwrap();
    assert_eq!(store.load_stream("zz".into(), 5).await.unwrap(), None);
    // The holder renews; another process cannot take a live lease.
    let l2 = l1 + Duration::from_secs(5);
    assert!(lease(5, "p1", t2, l2).await.unwrap());
    assert!(!lease(5, "p2", l1, l2 + Duration::from_secs(5))
        .await
        .unwrap());
    assert!(!lease(7, "p1", t2, l2).await.unwrap());
    assert_eq!(
        store.load_stream("a".into(), 5).await.unwrap(),
        Some(sr(5, "p1", l2))
    );
    // Past the lease one process takes it over, and the old holder no longer renews.
    let past = l2 + Duration::from_secs(1);
    let l3 = past + Duration::from_secs(5);
    assert!(lease(5, "p2", past, l3).await.unwrap());
    assert!(!lease(5, "p3", past, l3).await.unwrap());
    assert!(!lease(5, "p1", past, l3).await.unwrap());
    assert_eq!(
        store.load_stream("a".into(), 5).await.unwrap(),
        Some(sr(5, "p2", l3))
    );
    // A release (a lease until now) lets another take it at once.
    assert!(lease(5, "p2", past, past - Duration::from_secs(1))
        .await
        .unwrap());
    assert!(lease(5, "p3", past, l3).await.unwrap());
    // Finished: forgotten, and leased by nobody.
    store.finish_stream("a".into(), 5).await.unwrap();
    assert_eq!(store.load_stream("a".into(), 5).await.unwrap(), None);
    assert!(!lease(5, "p3", past, l3).await.unwrap());
    assert!(store.load_stream("a".into(), 6).await.unwrap().is_some());
    // A batch: kept in order as one by one, each session's log within its bounds after it, a
    // stray event of an unknown session dropped and the rest kept.
    let mut stray = ev(2, 1, 1, t2);
    stray.session = "zz".into();
    let mut of_b = ev(5, 1, 1, t2);
    of_b.session = "b".into();
    let batch = vec![
        ev(9, 5, 1, t2),
        stray,
        ev(9, 6, 1, t2),
        of_b.clone(),
        ev(9, 7, 1, t2),
        ev(9, 8, 1, t2),
    ];
    store.append_events(batch, bounds).await.unwrap();
    let r = store.events_after("a".into(), 9, 6).await.unwrap();
    assert_eq!(r.oldest, Some(6), "bounded to 3 events after the batch");
    assert_eq!(
        r.events,
        vec![ev(9, 7, 1, t2), ev(9, 8, 1, t2)],
        "in the batch's order"
    );
    assert_eq!(
        store.events_after("b".into(), 5, 0).await.unwrap().events,
        vec![of_b]
    );
    assert_eq!(
        store.events_after("zz".into(), 2, 0).await.unwrap(),
        StreamReplay::default()
    );
    store.append_events(Vec::new(), bounds).await.unwrap();
    // Expiry ends sessions last seen before the cut, with their events.
    let v = store.sessions_version();
    assert_eq!(store.expire_sessions(t1).await.unwrap(), 1); // "b", seen at t0
    let v = moved(v, "a session expired");
    assert_eq!(store.load_session("b".into()).await.unwrap(), None);
    assert!(store.load_session("a".into()).await.unwrap().is_some());
    // Ending forgets the session and its events, once.
    assert!(store.end_session("a".into()).await.unwrap());
    moved(v, "a session ended");
    assert!(!store.end_session("a".into()).await.unwrap());
    assert_eq!(store.load_session("a".into()).await.unwrap(), None);
    assert_eq!(
        store.events_after("a".into(), 9, 0).await.unwrap(),
        StreamReplay::default()
    );
    assert_eq!(store.load_stream("a".into(), 6).await.unwrap(), None);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn memory_store_meets_the_contract() {
        check_contract(&MemorySessionStore::new()).await;
    }
}
