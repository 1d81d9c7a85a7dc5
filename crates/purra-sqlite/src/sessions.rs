//! Streamable HTTP sessions in the store's file (feature `sessions`): purra-protocol's
//! [`SessionStore`], so every process that shares the file resumes any session and its
//! streams. One row per session in `http_sessions` (owner, state JSON, last-seen time) and its
//! SSE events in `http_session_events`, pruned to their bounds (count, bytes, age; the newest
//! always stays) in the transaction that appends; a running request's stream (its request and
//! the lease of the process holding it) in `http_session_streams`. Writes go through the group
//! commit.

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
        let done = self.run(move |conn, _| record(conn, &id));
        Box::pin(async move { done.await.map_err(err) })
    }

    fn touch_session(
        &self,
        id: String,
        seen: Option<SystemTime>,
    ) -> BoxFuture<'_, Result<Option<SessionRecord>, SessionStoreError>> {
        let done = match seen {
            Some(t) => self.write(move |conn, _| {
                let seen = to_ns(t)?;
                conn.prepare_cached(
                    "UPDATE http_sessions SET last_seen_ns = max(last_seen_ns, ?2) WHERE id = ?1",
                )
                .and_then(|mut s| s.execute(params![id, seen]))
                .map_err(backend)?;
                record(conn, &id)
            }),
            None => self.run(move |conn, _| record(conn, &id)),
        };
        Box::pin(async move { done.await.map_err(err) })
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

    fn append_event(
        &self,
        event: StoredEvent,
        bounds: EventLogBounds,
    ) -> BoxFuture<'_, Result<(), SessionStoreError>> {
        let done = self.write(move |conn, _| {
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
                return Ok(());
            }
            let max_age = i64::try_from(bounds.max_age.as_nanos()).unwrap_or(i64::MAX);
            // The newest event stays whatever the bounds; older ones go past any of them.
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
            .and_then(|mut s| {
                s.execute(params![
                    event.session,
                    clamp(bounds.max_events.max(1)),
                    clamp(bounds.max_bytes),
                    at.saturating_sub(max_age)
                ])
            })
            .map_err(backend)?;
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
        let done = self.run(move |conn, _| {
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
