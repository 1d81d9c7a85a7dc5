//! A session's link to its [`SessionStore`]: the writes it makes (its state, its events) in
//! order and off the request path, and the check that it is still kept (fleet-wide `DELETE`
//! and idle expiry).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::server::SessionSnapshot;
use crate::session_store::{
    EventLogBounds, SessionRecord, SessionStore, SessionStoreError, StoredEvent, StreamRecord,
};

/// The largest state a session may keep in a store (its JSON: mostly the client's capabilities
/// and info, which only the request body's bound limits otherwise). A larger `initialize` is
/// refused (413); a larger stored state is not decoded. It bounds a running request kept for
/// take-over too: a larger one is not recorded, and a larger stored one is not run.
pub(super) const MAX_STATE_BYTES: usize = 64 * 1024;

/// Writes queued for one session at most; past it the oldest queued event is dropped (a
/// client resuming past it gets 410, as for an event the log's bounds dropped).
const MAX_QUEUED: usize = 1024;

/// The low bits of a stream id: the stream's number in the process that opened it. The high
/// bits are that process's tag for the session (zero without a store), so the streams two
/// processes open for one session never share an id.
pub(super) const LOCAL_MASK: u64 = 0xFFFF_FFFF;

/// A fresh tag for a session held by this process (its streams' high bits), never zero.
pub(super) fn new_tag() -> u64 {
    let mut b = [0u8; 4];
    getrandom::fill(&mut b).expect("the OS random source");
    u64::from(u32::from_le_bytes(b) | 1) << 32
}

/// A fresh token for this process as the holder of running requests' streams.
pub(super) fn new_holder() -> String {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).expect("the OS random source");
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// What [`StoreLink::alive`] found.
pub(super) enum Alive {
    /// The store no longer keeps the session (ended, expired).
    Gone,
    /// Kept, as this process knows it.
    Same,
    /// Kept, changed by another process: this state is the newer.
    Changed(Box<SessionSnapshot>),
}

/// One session's link to the store.
pub(super) struct StoreLink {
    pub(super) store: Arc<dyn SessionStore>,
    pub(super) id: String,
    owner: Option<String>,
    bounds: EventLogBounds,
    queue: Mutex<Queue>,
    /// When this process last wrote the session's last-seen time.
    touched: Mutex<Option<Instant>>,
    /// The state this process last saved or loaded: a different one in the store was saved
    /// by another process.
    known: Mutex<String>,
    /// The store's [`SessionStore::sessions_version`] just before this process last read the
    /// session from it (`None`: not read yet, or the store could not tell): while the store
    /// reports the same, the session is kept as read and a request does not read it again.
    checked: Mutex<Option<u64>>,
    touch_every: Duration,
    /// This process's token as the holder of a running request's stream.
    pub(super) holder: String,
    /// How long a lease on a running request's stream lasts (renewed every third of it).
    pub(super) lease: Duration,
}

#[derive(Default)]
struct Queue {
    ops: VecDeque<Op>,
    running: bool,
}

enum Op {
    Save(SessionRecord),
    Event(StoredEvent),
    /// A running request's stream, recorded before its first event is kept.
    Stream(StreamRecord),
    /// A recorded stream's request was answered (after its response is kept).
    Finish(u64),
}

impl StoreLink {
    pub(super) fn new(
        store: Arc<dyn SessionStore>,
        id: String,
        owner: Option<String>,
        bounds: EventLogBounds,
        touch_every: Duration,
        holder: String,
        lease: Duration,
    ) -> Arc<StoreLink> {
        Arc::new(StoreLink {
            store,
            id,
            owner: owner.as_deref().map(crate::session_store::stored_owner),
            bounds,
            queue: Mutex::new(Queue::default()),
            touched: Mutex::new(None),
            known: Mutex::new(String::new()),
            checked: Mutex::new(None),
            touch_every,
            holder,
            lease,
        })
    }

    /// The record of `snapshot`, unless its state is over [`MAX_STATE_BYTES`].
    fn record(&self, snapshot: &SessionSnapshot) -> Option<SessionRecord> {
        let state = serde_json::to_string(snapshot).unwrap_or_default();
        if state.len() > MAX_STATE_BYTES {
            return None;
        }
        self.known_state(&state);
        Some(SessionRecord {
            id: self.id.clone(),
            owner: self.owner.clone(),
            state,
            last_seen: SystemTime::now(),
        })
    }

    /// The session's state as this process last saved or loaded it.
    pub(super) fn known_state(&self, state: &str) {
        let mut known = self.known.lock().expect("known lock");
        known.clear();
        known.push_str(state);
    }

    /// Saves the session now (at `initialize`: the answer waits for it, so the client's next
    /// request finds it at any process); `false` when its state is over [`MAX_STATE_BYTES`].
    pub(super) async fn save_now(
        &self,
        snapshot: &SessionSnapshot,
    ) -> Result<bool, SessionStoreError> {
        let Some(record) = self.record(snapshot) else {
            return Ok(false);
        };
        *self.touched.lock().expect("touch lock") = Some(Instant::now());
        self.store.save_session(record).await.map(|()| true)
    }

    /// Saves the session after the writes already queued (its state changed). A state grown
    /// over [`MAX_STATE_BYTES`] is not saved (the store keeps the last that fitted).
    pub(super) fn save_later(self: &Arc<Self>, snapshot: &SessionSnapshot) {
        match self.record(snapshot) {
            Some(record) => self.push(Op::Save(record)),
            None => tracing::warn!(session = %self.id, "a session's state is too large to keep"),
        }
    }

    /// Keeps one event of stream `stream` in the store's log.
    pub(super) fn event(self: &Arc<Self>, stream: u64, seq: u64, data: &[u8]) {
        self.push(Op::Event(StoredEvent {
            session: self.id.clone(),
            stream,
            seq,
            data: data.to_vec(),
            at: SystemTime::now(),
        }));
    }

    /// Records stream `stream`, running `request` here under a fresh lease (queued before the
    /// stream's first event, so a process that finds the event finds the record too).
    pub(super) fn stream_started(self: &Arc<Self>, stream: u64, request: &[u8]) {
        self.push(Op::Stream(StreamRecord {
            session: self.id.clone(),
            stream,
            request: String::from_utf8_lossy(request).into_owned(),
            holder: self.holder.clone(),
            lease_until: SystemTime::now() + self.lease,
        }));
    }

    /// Forgets the record of stream `stream`: its request was answered (queued after the
    /// response's event).
    pub(super) fn stream_finished(self: &Arc<Self>, stream: u64) {
        self.push(Op::Finish(stream));
    }

    /// Leases stream `stream` to this process for another `lease` (a renewal, or a take-over
    /// once its holder's lease ran out); whether it holds it now.
    pub(super) async fn lease_stream(&self, stream: u64) -> Result<bool, SessionStoreError> {
        let now = SystemTime::now();
        self.store
            .lease_stream(
                self.id.clone(),
                stream,
                self.holder.clone(),
                now,
                now + self.lease,
            )
            .await
    }

    /// Ends this process's lease on stream `stream` now, so another process takes it over at
    /// once.
    pub(super) async fn release_stream(&self, stream: u64) -> Result<bool, SessionStoreError> {
        let now = SystemTime::now();
        self.store
            .lease_stream(self.id.clone(), stream, self.holder.clone(), now, now)
            .await
    }

    /// Whether the store still keeps the session, and its state when another process changed
    /// it; its last-seen time is written when the last write is `touch_every` old (or `force`).
    ///
    /// Between those writes the session is not read while the store's
    /// [`sessions_version`](SessionStore::sessions_version) is the one read just before this
    /// process last read it: no session was ended, expired or changed anywhere since, so the
    /// answer is [`Alive::Same`] without a store round trip.
    pub(super) async fn alive(&self, force: bool) -> Result<Alive, SessionStoreError> {
        let now = Instant::now();
        let due = {
            let mut t = self.touched.lock().expect("touch lock");
            let due =
                force || t.is_none_or(|t| now.saturating_duration_since(t) >= self.touch_every);
            if due {
                *t = Some(now);
            }
            due
        };
        // Read before the session is, so a change the read misses changes it again.
        let version = self.store.sessions_version();
        if !due && version.is_some() && *self.checked.lock().expect("checked lock") == version {
            return Ok(Alive::Same);
        }
        let seen = due.then(SystemTime::now);
        let Some(record) = self.store.touch_session(self.id.clone(), seen).await? else {
            return Ok(Alive::Gone);
        };
        let same = *self.known.lock().expect("known lock") == record.state;
        // A state this process did not take is read again at the next request.
        let running = self.queue.lock().expect("store queue lock").running;
        *self.checked.lock().expect("checked lock") = version.filter(|_| same || !running);
        // While this process's own writes are queued the store may be behind it: its own
        // copy is the newer then.
        if same || running {
            return Ok(Alive::Same);
        }
        self.known_state(&record.state);
        if record.state.len() > MAX_STATE_BYTES {
            return Ok(Alive::Same);
        }
        match serde_json::from_str(&record.state) {
            Ok(snapshot) => Ok(Alive::Changed(Box::new(snapshot))),
            Err(e) => {
                tracing::warn!(session = %self.id, error = %e, "a stored session's state does not decode");
                Ok(Alive::Same)
            }
        }
    }

    fn push(self: &Arc<Self>, op: Op) {
        let mut q = self.queue.lock().expect("store queue lock");
        if q.ops.len() >= MAX_QUEUED {
            if let Some(i) = q.ops.iter().position(|o| matches!(o, Op::Event(_))) {
                q.ops.remove(i);
                tracing::warn!(session = %self.id, "session store is behind: an event was not kept");
            }
        }
        q.ops.push_back(op);
        if !q.running {
            q.running = true;
            let me = self.clone();
            tokio::spawn(me.drain());
        }
    }

    /// Writes what is queued, in order: a save (or a stream's record, or its end) alone, the
    /// events queued one after another
    /// together (one [`SessionStore::append_events`]: one store transaction however many the
    /// session's streams carried while the last write ran).
    async fn drain(self: Arc<Self>) {
        loop {
            let batch = {
                let mut q = self.queue.lock().expect("store queue lock");
                match q.ops.pop_front() {
                    Some(Op::Save(r)) => Batch::Save(r),
                    Some(Op::Stream(r)) => Batch::Stream(r),
                    Some(Op::Finish(stream)) => Batch::Finish(stream),
                    Some(Op::Event(e)) => {
                        let mut events = vec![e];
                        while let Some(Op::Event(_)) = q.ops.front() {
                            if let Some(Op::Event(e)) = q.ops.pop_front() {
                                events.push(e);
                            }
                        }
                        Batch::Events(events)
                    }
                    None => {
                        q.running = false;
                        return;
                    }
                }
            };
            let result = match batch {
                Batch::Save(r) => self.store.save_session(r).await,
                Batch::Events(e) => self.store.append_events(e, self.bounds).await,
                Batch::Stream(r) => self.store.save_stream(r).await,
                Batch::Finish(stream) => self.store.finish_stream(self.id.clone(), stream).await,
            };
            if let Err(e) = result {
                tracing::warn!(session = %self.id, error = %e, "session store write failed");
            }
        }
    }
}

/// What [`StoreLink::drain`] writes at once.
enum Batch {
    Save(SessionRecord),
    Events(Vec<StoredEvent>),
    Stream(StreamRecord),
    Finish(u64),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::BoxFuture;
    use crate::session_store::{MemorySessionStore, StreamReplay};

    /// A memory store that records the size of each event write and holds the first one until
    /// released.
    struct Counting {
        inner: MemorySessionStore,
        writes: Mutex<Vec<usize>>,
        gate: tokio::sync::Semaphore,
    }

    impl SessionStore for Counting {
        fn save_session(&self, r: SessionRecord) -> BoxFuture<'_, Result<(), SessionStoreError>> {
            self.inner.save_session(r)
        }
        fn load_session(
            &self,
            id: String,
        ) -> BoxFuture<'_, Result<Option<SessionRecord>, SessionStoreError>> {
            self.inner.load_session(id)
        }
        fn touch_session(
            &self,
            id: String,
            seen: Option<SystemTime>,
        ) -> BoxFuture<'_, Result<Option<SessionRecord>, SessionStoreError>> {
            self.inner.touch_session(id, seen)
        }
        fn end_session(&self, id: String) -> BoxFuture<'_, Result<bool, SessionStoreError>> {
            self.inner.end_session(id)
        }
        fn expire_sessions(
            &self,
            before: SystemTime,
        ) -> BoxFuture<'_, Result<u64, SessionStoreError>> {
            self.inner.expire_sessions(before)
        }
        fn append_events(
            &self,
            events: Vec<StoredEvent>,
            bounds: EventLogBounds,
        ) -> BoxFuture<'_, Result<(), SessionStoreError>> {
            Box::pin(async move {
                self.gate.acquire().await.expect("gate").forget();
                self.writes.lock().unwrap().push(events.len());
                self.inner.append_events(events, bounds).await
            })
        }
        fn events_after(
            &self,
            session: String,
            stream: u64,
            after: u64,
        ) -> BoxFuture<'_, Result<StreamReplay, SessionStoreError>> {
            self.inner.events_after(session, stream, after)
        }
        fn save_stream(&self, r: StreamRecord) -> BoxFuture<'_, Result<(), SessionStoreError>> {
            self.inner.save_stream(r)
        }
        fn load_stream(
            &self,
            session: String,
            stream: u64,
        ) -> BoxFuture<'_, Result<Option<StreamRecord>, SessionStoreError>> {
            self.inner.load_stream(session, stream)
        }
        fn lease_stream(
            &self,
            session: String,
            stream: u64,
            holder: String,
            now: SystemTime,
            until: SystemTime,
        ) -> BoxFuture<'_, Result<bool, SessionStoreError>> {
            self.inner.lease_stream(session, stream, holder, now, until)
        }
        fn finish_stream(
            &self,
            session: String,
            stream: u64,
        ) -> BoxFuture<'_, Result<(), SessionStoreError>> {
            self.inner.finish_stream(session, stream)
        }
    }

    #[tokio::test]
    async fn events_queued_behind_a_store_write_go_in_one_append() {
        let store = Arc::new(Counting {
            inner: MemorySessionStore::new(),
            writes: Mutex::new(Vec::new()),
            gate: tokio::sync::Semaphore::new(0),
        });
        store
            .save_session(SessionRecord {
                id: "s".into(),
                owner: None,
                state: "{}".into(),
                last_seen: SystemTime::now(),
            })
            .await
            .unwrap();
        let link = StoreLink::new(
            store.clone(),
            "s".into(),
            None,
            EventLogBounds::default(),
            Duration::from_secs(5),
            "holder".into(),
            Duration::from_secs(5),
        );
        // The first event's write starts and waits at the gate; four more queue behind it.
        link.event(1, 0, b"e0");
        tokio::task::yield_now().await;
        for seq in 1..5 {
            link.event(1, seq, format!("e{seq}").as_bytes());
        }
        store.gate.add_permits(2);
        while link.queue.lock().unwrap().running {
            tokio::task::yield_now().await;
        }
        assert_eq!(*store.writes.lock().unwrap(), vec![1, 4]);
        let kept = store.events_after("s".into(), 1, 0).await.unwrap();
        let data: Vec<&[u8]> = kept.events.iter().map(|e| e.data.as_slice()).collect();
        assert_eq!(data, vec![&b"e1"[..], b"e2", b"e3", b"e4"], "in order");
        assert_eq!(kept.oldest, Some(0));
    }
}
