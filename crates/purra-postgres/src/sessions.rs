//! Streamable HTTP sessions in the database (feature `sessions`): purra-protocol's
//! [`SessionStore`], so every instance of a fleet resumes any session and its streams. One row
//! per session in `http_sessions` (owner, state JSON, last-seen time) and its SSE events in
//! `http_session_events`, pruned to their bounds (count, bytes, age; the newest always stays)
//! in the transaction that appends; a running request's stream (its request and the lease of
//! the instance holding it) in `http_session_streams`.

use crate::store::{exec, query, query_opt, PostgresStore};
use purra_core::stored::{from_ns, to_ns};
use purra_core::StoreError;
use purra_protocol::session_store::{
    EventLogBounds, SessionRecord, SessionStore, SessionStoreError, StoredEvent, StreamRecord,
    StreamReplay,
};
use purra_protocol::BoxFuture;
use std::sync::Arc;
use std::time::SystemTime;

fn err(e: StoreError) -> SessionStoreError {
    SessionStoreError(e.to_string())
}

const RECORD: &str = "SELECT owner, state, last_seen_ns FROM http_sessions WHERE id = $1";

fn record_of(id: &str, row: tokio_postgres::Row) -> SessionRecord {
    SessionRecord {
        id: id.to_owned(),
        owner: row.get(0),
        state: row.get(1),
        last_seen: from_ns(row.get(2)),
    }
}

/// A stream id as stored: `BIGINT` is signed, so the id's bits as an `i64`.
fn stream_key(stream: u64) -> i64 {
    i64::from_ne_bytes(stream.to_ne_bytes())
}

fn clamp(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl SessionStore for PostgresStore {
    fn save_session(&self, record: SessionRecord) -> BoxFuture<'_, Result<(), SessionStoreError>> {
        Box::pin(async move {
            let seen = to_ns(record.last_seen).map_err(err)?;
            let record = Arc::new(record);
            let saved = self
                .transact(move |tx, _, _| {
                    let r = Arc::clone(&record);
                    Box::pin(async move {
                        exec(
                            tx,
                            "INSERT INTO http_sessions (id, owner, state, last_seen_ns)
                         VALUES ($1, $2, $3, $4)
                         ON CONFLICT (id) DO UPDATE SET owner = $2, state = $3,
                             last_seen_ns = greatest(http_sessions.last_seen_ns, $4)",
                            &[&r.id, &r.owner, &r.state, &seen],
                        )
                        .await?;
                        Ok(())
                    })
                })
                .await
                .map_err(err);
            // This instance's own change counts before the caller hears it is done (another
            // instance counts the trigger's notification).
            self.session_watch().moved();
            saved
        })
    }

    fn sessions_version(&self) -> Option<u64> {
        self.session_watch().version()
    }

    fn load_session(
        &self,
        id: String,
    ) -> BoxFuture<'_, Result<Option<SessionRecord>, SessionStoreError>> {
        let id = Arc::new(id);
        let done = self.read(move |c| {
            let id = Arc::clone(&id);
            async move {
                let row = query_opt(&c, RECORD, &[&*id]).await?;
                Ok(row.map(|r| record_of(&id, r)))
            }
        });
        Box::pin(async move { done.await.map_err(err) })
    }

    fn touch_session(
        &self,
        id: String,
        seen: Option<SystemTime>,
    ) -> BoxFuture<'_, Result<Option<SessionRecord>, SessionStoreError>> {
        let Some(seen) = seen else {
            return self.load_session(id);
        };
        Box::pin(async move {
            let seen = to_ns(seen).map_err(err)?;
            let id = Arc::new(id);
            self.transact(move |tx, _, _| {
                let id = Arc::clone(&id);
                Box::pin(async move {
                    let row = query_opt(
                        tx,
                        "UPDATE http_sessions SET last_seen_ns = greatest(last_seen_ns, $2)
                         WHERE id = $1 RETURNING owner, state, last_seen_ns",
                        &[&*id, &seen],
                    )
                    .await?;
                    Ok(row.map(|r| record_of(&id, r)))
                })
            })
            .await
            .map_err(err)
        })
    }

    fn end_session(&self, id: String) -> BoxFuture<'_, Result<bool, SessionStoreError>> {
        let id = Arc::new(id);
        let done = self.transact(move |tx, _, _| {
            let id = Arc::clone(&id);
            Box::pin(async move {
                exec(
                    tx,
                    "DELETE FROM http_session_events WHERE session = $1",
                    &[&*id],
                )
                .await?;
                exec(
                    tx,
                    "DELETE FROM http_session_streams WHERE session = $1",
                    &[&*id],
                )
                .await?;
                let n = exec(tx, "DELETE FROM http_sessions WHERE id = $1", &[&*id]).await?;
                Ok(n > 0)
            })
        });
        Box::pin(async move {
            let ended = done.await.map_err(err);
            self.session_watch().moved();
            ended
        })
    }

    fn expire_sessions(&self, before: SystemTime) -> BoxFuture<'_, Result<u64, SessionStoreError>> {
        Box::pin(async move {
            let cut = to_ns(before).map_err(err)?;
            let expired = self
                .transact(move |tx, _, _| {
                    Box::pin(async move {
                        exec(
                            tx,
                            "DELETE FROM http_session_events WHERE session IN
                             (SELECT id FROM http_sessions WHERE last_seen_ns < $1)",
                            &[&cut],
                        )
                        .await?;
                        exec(
                            tx,
                            "DELETE FROM http_session_streams WHERE session IN
                             (SELECT id FROM http_sessions WHERE last_seen_ns < $1)",
                            &[&cut],
                        )
                        .await?;
                        exec(
                            tx,
                            "DELETE FROM http_sessions WHERE last_seen_ns < $1",
                            &[&cut],
                        )
                        .await
                    })
                })
                .await
                .map_err(err);
            if expired != Ok(0) {
                self.session_watch().moved();
            }
            expired
        })
    }

    fn append_events(
        &self,
        events: Vec<StoredEvent>,
        bounds: EventLogBounds,
    ) -> BoxFuture<'_, Result<(), SessionStoreError>> {
        Box::pin(async move {
            let max_age = i64::try_from(bounds.max_age.as_nanos()).unwrap_or(i64::MAX);
            let max_events = clamp(bounds.max_events.max(1));
            let max_bytes = clamp(bounds.max_bytes);
            let mut rows = Vec::with_capacity(events.len());
            for e in events {
                let at = to_ns(e.at).map_err(err)?;
                let num = i64::try_from(e.seq).unwrap_or(i64::MAX);
                rows.push((e.session, stream_key(e.stream), num, e.data, at));
            }
            let rows = Arc::new(rows);
            self.transact(move |tx, _, _| {
                let rows = Arc::clone(&rows);
                Box::pin(async move {
                    // What the events are for (a client resuming at another process while the
                    // server runs) needs no wait for the WAL flush: a server crash may lose the
                    // last ones (the client gets 410), never leave the log inconsistent.
                    exec(tx, "SET LOCAL synchronous_commit = off", &[]).await?;
                    // Each session's log is pruned once, after its last event of the batch.
                    let mut last: Vec<(&str, i64)> = Vec::new();
                    for (session, stream, num, data, at) in rows.iter() {
                        let added = exec(
                            tx,
                            "INSERT INTO http_session_events (session, stream, num, data, at_ns)
                             SELECT $1, $2, $3, $4, $5
                             WHERE EXISTS (SELECT 1 FROM http_sessions WHERE id = $1)",
                            &[session, stream, num, data, at],
                        )
                        .await?;
                        if added == 0 {
                            continue;
                        }
                        match last.iter_mut().find(|(s, _)| s == session) {
                            Some(l) => l.1 = l.1.max(*at),
                            None => last.push((session, *at)),
                        }
                    }
                    for (session, at) in last {
                        let cut = at.saturating_sub(max_age);
                        // The newest event stays whatever the bounds; older ones go past any of
                        // them.
                        exec(
                            tx,
                            "DELETE FROM http_session_events WHERE seq IN (
                                 SELECT seq FROM (
                                     SELECT seq, at_ns,
                                            row_number() OVER w AS n,
                                            sum(octet_length(data)) OVER w AS bytes
                                     FROM http_session_events WHERE session = $1
                                     WINDOW w AS (ORDER BY seq DESC)) kept
                                 WHERE n > 1 AND (n > $2 OR bytes > $3 OR at_ns < $4))",
                            &[&session, &max_events, &max_bytes, &cut],
                        )
                        .await?;
                    }
                    Ok(())
                })
            })
            .await
            .map_err(err)
        })
    }

    fn events_after(
        &self,
        session: String,
        stream: u64,
        after: u64,
    ) -> BoxFuture<'_, Result<StreamReplay, SessionStoreError>> {
        let session = Arc::new(session);
        let done = self.read(move |c| {
            let session = Arc::clone(&session);
            async move {
                let rows = query(
                    &c,
                    "SELECT num, data, at_ns FROM http_session_events
                     WHERE session = $1 AND stream = $2 ORDER BY num",
                    &[&*session, &stream_key(stream)],
                )
                .await?;
                let mut replay = StreamReplay::default();
                for row in rows {
                    let seq = u64::try_from(row.get::<_, i64>(0)).unwrap_or(0);
                    replay.oldest.get_or_insert(seq);
                    if seq > after {
                        replay.events.push(StoredEvent {
                            session: (*session).clone(),
                            stream,
                            seq,
                            data: row.get(1),
                            at: from_ns(row.get(2)),
                        });
                    }
                }
                Ok(replay)
            }
        });
        Box::pin(async move { done.await.map_err(err) })
    }

    fn save_stream(&self, record: StreamRecord) -> BoxFuture<'_, Result<(), SessionStoreError>> {
        Box::pin(async move {
            let until = to_ns(record.lease_until).map_err(err)?;
            let stream = stream_key(record.stream);
            let record = Arc::new(record);
            self.transact(move |tx, _, _| {
                let r = Arc::clone(&record);
                Box::pin(async move {
                    exec(
                        tx,
                        "INSERT INTO http_session_streams
                             (session, stream, request, holder, lease_until_ns)
                         SELECT $1, $2, $3, $4, $5
                         WHERE EXISTS (SELECT 1 FROM http_sessions WHERE id = $1)
                         ON CONFLICT (session, stream) DO UPDATE SET request = $3, holder = $4,
                             lease_until_ns = $5",
                        &[&r.session, &stream, &r.request, &r.holder, &until],
                    )
                    .await?;
                    Ok(())
                })
            })
            .await
            .map_err(err)
        })
    }

    fn load_stream(
        &self,
        session: String,
        stream: u64,
    ) -> BoxFuture<'_, Result<Option<StreamRecord>, SessionStoreError>> {
        let session = Arc::new(session);
        let done = self.read(move |c| {
            let session = Arc::clone(&session);
            async move {
                let row = query_opt(
                    &c,
                    "SELECT request, holder, lease_until_ns FROM http_session_streams
                     WHERE session = $1 AND stream = $2",
                    &[&*session, &stream_key(stream)],
                )
                .await?;
                Ok(row.map(|r| StreamRecord {
                    session: (*session).clone(),
                    stream,
                    request: r.get(0),
                    holder: r.get(1),
                    lease_until: from_ns(r.get(2)),
                }))
            }
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
        Box::pin(async move {
            let now = to_ns(now).map_err(err)?;
            let until = to_ns(until).map_err(err)?;
            let key = stream_key(stream);
            let names = Arc::new((session, holder));
            self.transact(move |tx, _, _| {
                let names = Arc::clone(&names);
                Box::pin(async move {
                    let n = exec(
                        tx,
                        "UPDATE http_session_streams SET holder = $3, lease_until_ns = $5
                         WHERE session = $1 AND stream = $2
                             AND (holder = $3 OR lease_until_ns < $4)",
                        &[&names.0, &key, &names.1, &now, &until],
                    )
                    .await?;
                    Ok(n > 0)
                })
            })
            .await
            .map_err(err)
        })
    }

    fn finish_stream(
        &self,
        session: String,
        stream: u64,
    ) -> BoxFuture<'_, Result<(), SessionStoreError>> {
        let session = Arc::new(session);
        let key = stream_key(stream);
        let done = self.transact(move |tx, _, _| {
            let session = Arc::clone(&session);
            Box::pin(async move {
                exec(
                    tx,
                    "DELETE FROM http_session_streams WHERE session = $1 AND stream = $2",
                    &[&*session, &key],
                )
                .await?;
                Ok(())
            })
        });
        Box::pin(async move { done.await.map_err(err) })
    }
}
