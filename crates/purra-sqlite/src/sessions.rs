//! Streamable HTTP sessions in the store's file (feature `sessions`): purra-protocol's
//! [`SessionStore`], so every process that shares the file resumes any session and its
//! streams. One row per session in `http_sessions` (owner, state JSON, last-seen time) and its
//! SSE events in `http_session_events`, pruned to their bounds (count, bytes, age; the newest
//! always stays) in the transaction that appends; a running request's stream (its request and
//! the lease of the process holding it) in `http_session_streams`. Writes go through the group
//! commit.
//!
//! What a request waits for is cheap: a session's record is read on a reader connection of its
//! own ([`SqliteStore::read`]), never behind the writer's sync. Its events and last-seen time are
//! relaxed writes ([`SqliteStore::write_relaxed`]): a group of them only commits with
//! `synchronous=NORMAL`, which in WAL mode survives the process being killed (the WAL is in
//! the operating system's cache at once) but not a power loss. That is what they are for: a
//! client resuming with `Last-Event-ID` at another process of the fleet while this machine runs.
//! After a power loss every process restarts and every SSE connection is gone; a client that
//! resumes then may find the last events missing and gets `410`, as for events the log's bounds
//! dropped, and starts again. The session itself (`save_session`, `end_session`) is written
//! durably.

use crate::store::{backend, SqliteStore};
use purra_core::stored::{from_ns, to_ns};
use purra_core::StoreError;
use purra_protocol::session_store::{
    EventLogBounds, SessionRecord, SessionStore, SessionStoreError, StoredEvent, StreamRecord,
    StreamReplay,
};
use purra_protocol::BoxFuture;
use rusqlite::{params, Connection, OptionalExtension};
use std::time::SystemTime;

fn err(e: StoreError) -> SessionStoreError {
    SessionStoreError(e.to_string())
}

fn record(conn: &Connection, id: &str) -> Result<Option<SessionRecord>, StoreError> {
    conn.prepare_cached("SELECT owner, state, last_seen_ns FROM http_sessions WHERE id = ?1")
        .and_then(|mut s| {
            s.query_row(params![id], |r| {
                Ok(SessionRecord {
                    id: id.to_owned(),
                    owner: r.get(0)?,
                    state: r.get(1)?,
                    last_seen: from_ns(r.get(2)?),
                })
            })
            .optional()
        })
        .map_err(backend)
}

/// A stream id as stored: SQLite integers are signed, so the id's bits as an `i64`.
fn stream_key(stream: u64) -> i64 {
    i64::from_ne_bytes(stream.to_ne_bytes())
}

fn clamp(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Drops `session`'s oldest events past `bounds` as of `at` (the newest stays whatever the
/// bounds; older ones go past any of them).
///
/// A full log (the usual case: every append then drops the oldest event) is pruned by count
/// alone when the session's totals show that neither its bytes nor its age bound it: one
/// aggregate over its rows and a delete of its oldest numbers, instead of the window over all
/// its rows, sorted, that the general case takes (measured: about a tenth of the time with 256
/// events kept). The outcome is the same: with the bytes under their bound no running sum
/// passes it, and with no event too old only the count drops any.
fn prune(
    conn: &Connection,
    session: &str,
    at: i64,
    bounds: EventLogBounds,
) -> Result<(), StoreError> {
    let max_age = i64::try_from(bounds.max_age.as_nanos()).unwrap_or(i64::MAX);
    let cut = at.saturating_sub(max_age);
    let max_events = clamp(bounds.max_events.max(1));
    let (count, bytes, oldest): (i64, i64, Option<i64>) = conn
        .prepare_cached(
            "SELECT count(*), coalesce(sum(length(data)), 0), min(at_ns)
             FROM http_session_events WHERE session = ?1",
        )
        .and_then(|mut s| s.query_row(params![session], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))))
        .map_err(backend)?;
    if bytes <= clamp(bounds.max_bytes) && oldest.is_none_or(|a| a >= cut) {
        if count > max_events {
            conn.prepare_cached(
                "DELETE FROM http_session_events WHERE seq IN (
                     SELECT seq FROM http_session_events WHERE session = ?1
                     ORDER BY seq LIMIT ?2)",
            )
            .and_then(|mut s| s.execute(params![session, count - max_events]))
            .map_err(backend)?;
        }
        return Ok(());
    }
    conn.prepare_cached(
        "DELETE FROM http_session_events WHERE seq IN (
             SELECT seq FROM (
                 SELECT seq, at_ns,
                        row_number() OVER w AS n,
                        sum(length(data)) OVER w AS bytes
                 FROM http_session_events WHERE session = ?1
                 WINDOW w AS (ORDER BY seq DESC))
             WHERE n > 1 AND (n > ?2 OR bytes > ?3 OR at_ns < ?4))",
    )
    .and_then(|mut s| s.execute(params![session, max_events, clamp(bounds.max_bytes), cut]))
    .map_err(backend)?;
    Ok(())
}

impl SessionStore for SqliteStore {
    fn save_session(&self, record: SessionRecord) -> BoxFuture<'_, Result<(), SessionStoreError>> {
        let done = self.write(move |conn, _| {
            let seen = to_ns(record.last_seen)?;
            conn.prepare_cached(
                "INSERT INTO http_sessions (id, owner, state, last_seen_ns) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (id) DO UPDATE SET owner = ?2, state = ?3,
                     last_seen_ns = max(last_seen_ns, ?4)",
            )
            .and_then(|mut s| s.execute(params![record.id, record.owner, record.state, seen]))
            .map_err(backend)?;
            Ok(())
        });
        Box::pin(async move { done.await.map_err(err) })
    }

    fn load_session(
        &self,
        id: String,
    ) -> BoxFuture<'_, Result<Option<SessionRecord>, SessionStoreError>> {
        let done = self.read(move |conn| record(conn, &id));
        Box::pin(async move { done.await.map_err(err) })
    }

    fn touch_session(
        &self,
        id: String,
        seen: Option<SystemTime>,
    ) -> BoxFuture<'_, Result<Option<SessionRecord>, SessionStoreError>> {
        let done = match seen {
            Some(t) => self.write_relaxed(move |conn, _| {
                let seen = to_ns(t)?;
                conn.prepare_cached(
                    "UPDATE http_sessions SET last_seen_ns = max(last_seen_ns, ?2) WHERE id = ?1",
                )
                .and_then(|mut s| s.execute(params![id, seen]))
                .map_err(backend)?;
                record(conn, &id)
            }),
            None => self.read(move |conn| record(conn, &id)),
        };
        Box::pin(async move { done.await.map_err(err) })
    }

    fn sessions_version(&self) -> Option<u64> {
        self.sessions_changes()
    }

    fn end_session(&self, id: String) -> BoxFuture<'_, Result<bool, SessionStoreError>> {
        let done = self.write(move |conn, _| {
            conn.prepare_cached("DELETE FROM http_session_events WHERE session = ?1")
                .and_then(|mut s| s.execute(params![id]))
                .map_err(backend)?;
            conn.prepare_cached("DELETE FROM http_session_streams WHERE session = ?1")
                .and_then(|mut s| s.execute(params![id]))
                .map_err(backend)?;
            let n = conn
                .prepare_cached("DELETE FROM http_sessions WHERE id = ?1")
                .and_then(|mut s| s.execute(params![id]))
                .map_err(backend)?;
            Ok(n > 0)
        });
        Box::pin(async move { done.await.map_err(err) })
    }

    fn expire_sessions(&self, before: SystemTime) -> BoxFuture<'_, Result<u64, SessionStoreError>> {
        let done = self.write(move |conn, _| {
            let cut = to_ns(before)?;
            conn.prepare_cached(
                "DELETE FROM http_session_events WHERE session IN
                     (SELECT id FROM http_sessions WHERE last_seen_ns < ?1)",
            )
            .and_then(|mut s| s.execute(params![cut]))
            .map_err(backend)?;
            conn.prepare_cached(
                "DELETE FROM http_session_streams WHERE session IN
                     (SELECT id FROM http_sessions WHERE last_seen_ns < ?1)",
            )
            .and_then(|mut s| s.execute(params![cut]))
            .map_err(backend)?;
            let n = conn
                .prepare_cached("DELETE FROM http_sessions WHERE last_seen_ns < ?1")
                .and_then(|mut s| s.execute(params![cut]))
                .map_err(backend)?;
            Ok(n as u64)
        });
        Box::pin(async move { done.await.map_err(err) })
    }

    fn append_events(
        &self,
        events: Vec<StoredEvent>,
        bounds: EventLogBounds,
    ) -> BoxFuture<'_, Result<(), SessionStoreError>> {
        let done = self.write_relaxed(move |conn, _| {
            // Each session's log is pruned once, after its last event of the batch.
            let mut last: Vec<(String, i64)> = Vec::new();
            for event in events {
                let at = to_ns(event.at)?;
                let added = conn
                    .prepare_cached(
                        "INSERT INTO http_session_events (session, stream, num, data, at_ns)
                         SELECT ?1, ?2, ?3, ?4, ?5
                         WHERE EXISTS (SELECT 1 FROM http_sessions WHERE id = ?1)",
                    )
                    .and_then(|mut s| {
                        s.execute(params![
                            event.session,
                            stream_key(event.stream),
                            i64::try_from(event.seq).unwrap_or(i64::MAX),
                            event.data,
                            at
                        ])
                    })
                    .map_err(backend)?;
                if added == 0 {
                    continue;
                }
                match last.iter_mut().find(|(s, _)| *s == event.session) {
                    Some(l) => l.1 = l.1.max(at),
                    None => last.push((event.session, at)),
                }
            }
            for (session, at) in last {
                prune(conn, &session, at, bounds)?;
            }
            Ok(())
        });
        Box::pin(async move { done.await.map_err(err) })
    }

    fn events_after(
        &self,
        session: String,
        stream: u64,
        after: u64,
    ) -> BoxFuture<'_, Result<StreamReplay, SessionStoreError>> {
        let done = self.read(move |conn| {
            let mut replay = StreamReplay::default();
            let mut s = conn
                .prepare_cached(
                    "SELECT num, data, at_ns FROM http_session_events
                     WHERE session = ?1 AND stream = ?2 ORDER BY num",
                )
                .map_err(backend)?;
            let rows = s
                .query_map(params![session, stream_key(stream)], |r| {
                    Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?, r.get(2)?))
                })
                .map_err(backend)?;
            for row in rows {
                let (num, data, at) = row.map_err(backend)?;
                let seq = u64::try_from(num).unwrap_or(0);
                replay.oldest.get_or_insert(seq);
                if seq > after {
                    replay.events.push(StoredEvent {
                        session: session.clone(),
                        stream,
                        seq,
                        data,
                        at: from_ns(at),
                    });
                }
            }
            Ok(replay)
        });
        Box::pin(async move { done.await.map_err(err) })
    }

    fn save_stream(&self, record: StreamRecord) -> BoxFuture<'_, Result<(), SessionStoreError>> {
        let done = self.write(move |conn, _| {
            let until = to_ns(record.lease_until)?;
            conn.prepare_cached(
                "INSERT INTO http_session_streams (session, stream, request, holder, lease_until_ns)
                 SELECT ?1, ?2, ?3, ?4, ?5
                 WHERE EXISTS (SELECT 1 FROM http_sessions WHERE id = ?1)
                 ON CONFLICT (session, stream) DO UPDATE SET request = ?3, holder = ?4,
                     lease_until_ns = ?5",
            )
            .and_then(|mut s| {
                s.execute(params![
                    record.session,
                    stream_key(record.stream),
                    record.request,
                    record.holder,
                    until
                ])
            })
            .map_err(backend)?;
            Ok(())
        });
        Box::pin(async move { done.await.map_err(err) })
    }

    fn load_stream(
        &self,
        session: String,
        stream: u64,
    ) -> BoxFuture<'_, Result<Option<StreamRecord>, SessionStoreError>> {
        let done = self.run(move |conn, _| {
            conn.prepare_cached(
                "SELECT request, holder, lease_until_ns FROM http_session_streams
                 WHERE session = ?1 AND stream = ?2",
            )
            .and_then(|mut s| {
                s.query_row(params![session, stream_key(stream)], |r| {
                    Ok(StreamRecord {
                        session: session.clone(),
                        stream,
                        request: r.get(0)?,
                        holder: r.get(1)?,
                        lease_until: from_ns(r.get(2)?),
                    })
                })
                .optional()
            })
            .map_err(backend)
        });
        Box::pin(async move { done.await.map_err(err) })
    }

    fn lease_stream(
        &self,
        session: String,
        stream: u64,
        holder: String,
        now: SystemTime,
        until: SystemTime,
    ) -> BoxFuture<'_, Result<bool, SessionStoreError>> {
        let done = self.write(move |conn, _| {
            let (now, until) = (to_ns(now)?, to_ns(until)?);
            let n = conn
                .prepare_cached(
                    "UPDATE http_session_streams SET holder = ?3, lease_until_ns = ?5
                     WHERE session = ?1 AND stream = ?2 AND (holder = ?3 OR lease_until_ns < ?4)",
                )
                .and_then(|mut s| {
                    s.execute(params![session, stream_key(stream), holder, now, until])
                })
                .map_err(backend)?;
            Ok(n > 0)
        });
        Box::pin(async move { done.await.map_err(err) })
    }

    fn finish_stream(
        &self,
        session: String,
        stream: u64,
    ) -> BoxFuture<'_, Result<(), SessionStoreError>> {
        let done = self.write(move |conn, _| {
            conn.prepare_cached(
                "DELETE FROM http_session_streams WHERE session = ?1 AND stream = ?2",
            )
            .and_then(|mut s| s.execute(params![session, stream_key(stream)]))
            .map_err(backend)?;
            Ok(())
        });
        Box::pin(async move { done.await.map_err(err) })
    }
}
