//! The webhook outbox (purra-core's `WebhookOutbox`) in the store's file: events recorded by the
//! writes that make them ([`record`], called inside their savepoint), and the deliverers' claims,
//! results and listings.
//!
//! A write asks `webhook_subscriptions` whether any endpoint wants its event type (one seek in a
//! table that is empty unless endpoints are registered) and only then builds the payload and
//! inserts one delivery per subscribed endpoint, in the same transaction as the change.

use crate::store::{backend, SqliteStore};
use purra_core::stored::{from_ns, to_ns};
use purra_core::webhook::{check_endpoints, new_message_id, types_of, ENDPOINT_REMOVED};
use purra_core::{
    ApprovalId, ApprovalRef, BoxFuture, StoreError, WebhookDelivery, WebhookDeliveryView,
    WebhookEndpoint, WebhookEvent, WebhookEventType, WebhookFailure, WebhookLease, WebhookOutbox,
    WebhookQuery, WebhookState,
};
use rusqlite::{params, Connection, OptionalExtension};
use std::time::{Duration, SystemTime};

fn now_ns() -> Result<i64, StoreError> {
    to_ns(SystemTime::now())
}

fn nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// Records `event_type` for every endpoint subscribed to it, in the caller's transaction; `event`
/// builds the event only when one is (reading what it needs through the connection). Nothing is
/// written, and `event` is not called, when none is.
pub(crate) fn record(
    tx: &Connection,
    event_type: WebhookEventType,
    event: impl FnOnce(&Connection) -> Result<WebhookEvent, StoreError>,
) -> Result<(), StoreError> {
    let wanted: bool = tx
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM webhook_subscriptions WHERE event = ?1)")
        .and_then(|mut s| s.query_row(params![event_type.as_str()], |r| r.get(0)))
        .map_err(backend)?;
    if !wanted {
        return Ok(());
    }
    let event = event(tx)?;
    let at = to_ns(event.at)?;
    let msg_id = new_message_id()?;
    tx.prepare_cached(
        "INSERT INTO webhook_outbox (msg_id, endpoint, event, payload, created_at_ns, state,
                                     attempts, next_at_ns)
         SELECT ?1, endpoint, event, ?3, ?4, 'pending', 0, ?4
         FROM webhook_subscriptions WHERE event = ?2 ORDER BY endpoint",
    )
    .and_then(|mut s| s.execute(params![msg_id, event_type.as_str(), event.payload(), at]))
    .map_err(backend)?;
    Ok(())
}

/// The approval the claim of row `claim_seq` was made by, if an approval made it.
pub(crate) fn approval_of_claim(
    conn: &Connection,
    claim_seq: i64,
) -> Result<Option<ApprovalRef>, StoreError> {
    conn.prepare_cached(
        "SELECT a.seq, a.tool, a.principal FROM claims c JOIN approvals a ON a.seq = c.approval_seq
         WHERE c.seq = ?1",
    )
    .and_then(|mut s| {
        s.query_row(params![claim_seq], |r| {
            Ok(ApprovalRef {
                id: purra_core::stored::approval_id(r.get(0)?),
                tool: r.get(1)?,
                principal: r.get(2)?,
            })
        })
        .optional()
    })
    .map_err(backend)
}

/// The approval of row `seq` as an event names it.
pub(crate) fn approval_ref(
    id: &ApprovalId,
    tool: String,
    principal: Option<String>,
) -> ApprovalRef {
    ApprovalRef {
        id: id.clone(),
        tool,
        principal,
    }
}

/// Gives up `endpoint`'s pending deliveries with `reason`; how many.
fn give_up(tx: &Connection, endpoint: &str, reason: &str) -> Result<u64, StoreError> {
    let n = tx
        .prepare_cached(
            "UPDATE webhook_outbox SET state = 'failed', leased_by = NULL, last_error = ?2
             WHERE state = 'pending' AND endpoint = ?1",
        )
        .and_then(|mut s| s.execute(params![endpoint, reason]))
        .map_err(backend)?;
    Ok(n as u64)
}

const VIEW_COLUMNS: &str = "seq, msg_id, endpoint, event, payload, state, attempts, created_at_ns,
                            next_at_ns, last_status, last_error";

fn view_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<(WebhookDeliveryView, String)> {
    let state: String = r.get(5)?;
    let event: String = r.get(3)?;
    let pending = state == "pending";
    Ok((
        WebhookDeliveryView {
            seq: r.get(0)?,
            msg_id: r.get(1)?,
            endpoint: r.get(2)?,
            // Checked after the read (a word this build does not know is a backend failure).
            event_type: WebhookEventType::parse(&event)
                .unwrap_or(WebhookEventType::ApprovalPending),
            payload: r.get(4)?,
            state: if pending {
                WebhookState::Pending
            } else {
                WebhookState::Failed
            },
            attempts: u32::try_from(r.get::<_, i64>(6)?).unwrap_or(u32::MAX),
            created_at: from_ns(r.get(7)?),
            next_at: pending
                .then(|| r.get::<_, i64>(8).map(from_ns))
                .transpose()?,
            last_status: r
                .get::<_, Option<i64>>(9)?
                .and_then(|s| u16::try_from(s).ok()),
            last_error: r.get(10)?,
        },
        event,
    ))
}

impl WebhookOutbox for SqliteStore {
    fn set_webhook_endpoints(
        &self,
        endpoints: Vec<WebhookEndpoint>,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        self.write(move |tx, _| {
            check_endpoints(&endpoints)?;
            if endpoints.iter().any(|e| e.events.is_empty()) {
                return Err(StoreError::Conflict(
                    "a webhook endpoint subscribes to no event type",
                ));
            }
            tx.execute("DELETE FROM webhook_subscriptions", [])
                .map_err(backend)?;
            for e in &endpoints {
                for t in &e.events {
                    tx.prepare_cached(
                        "INSERT OR IGNORE INTO webhook_subscriptions (event, endpoint)
                         VALUES (?1, ?2)",
                    )
                    .and_then(|mut s| s.execute(params![t.as_str(), e.name]))
                    .map_err(backend)?;
                }
            }
            // What is still pending for an endpoint no longer configured would never be
            // delivered: given up, visibly.
            let gone: Vec<String> = {
                let mut stmt = tx
                    .prepare_cached(
                        "SELECT DISTINCT endpoint FROM webhook_outbox WHERE state = 'pending'",
                    )
                    .map_err(backend)?;
                let rows = stmt
                    .query_map([], |r| r.get::<_, String>(0))
                    .map_err(backend)?;
                rows.collect::<Result<_, _>>().map_err(backend)?
            };
            for name in gone {
                if !endpoints.iter().any(|e| e.name == name) {
                    give_up(tx, &name, ENDPOINT_REMOVED)?;
                }
            }
            Ok(())
        })
    }

    fn webhook_endpoints(&self) -> BoxFuture<'_, Result<Vec<WebhookEndpoint>, StoreError>> {
        self.run(|conn, _| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT endpoint, event FROM webhook_subscriptions ORDER BY endpoint, event",
                )
                .map_err(backend)?;
            let rows: Vec<(String, String)> = stmt
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(backend)?
                .collect::<Result<_, _>>()
                .map_err(backend)?;
            let mut out: Vec<(String, Vec<String>)> = Vec::new();
            for (endpoint, event) in rows {
                match out.last_mut() {
                    Some((name, events)) if *name == endpoint => events.push(event),
                    _ => out.push((endpoint, vec![event])),
                }
            }
            out.into_iter()
                .map(|(name, events)| {
                    Ok(WebhookEndpoint {
                        name,
                        events: types_of(events.iter().map(String::as_str))?,
                    })
                })
                .collect()
        })
    }

    fn retire_webhook_endpoint(
        &self,
        endpoint: String,
        reason: String,
    ) -> BoxFuture<'_, Result<u64, StoreError>> {
        self.write(move |tx, _| {
            tx.prepare_cached("DELETE FROM webhook_subscriptions WHERE endpoint = ?1")
                .and_then(|mut s| s.execute(params![endpoint]))
                .map_err(backend)?;
            give_up(tx, &endpoint, &reason)
        })
    }

    fn next_webhook_due(
        &self,
        endpoint: String,
    ) -> BoxFuture<'_, Result<Option<Duration>, StoreError>> {
        self.run(move |conn, _| {
            let next: Option<i64> = conn
                .prepare_cached(
                    "SELECT min(next_at_ns) FROM webhook_outbox
                     WHERE state = 'pending' AND endpoint = ?1",
                )
                .and_then(|mut s| s.query_row(params![endpoint], |r| r.get(0)))
                .map_err(backend)?;
            let now = now_ns()?;
            Ok(next.map(|at| Duration::from_nanos(at.saturating_sub(now).max(0) as u64)))
        })
    }

    fn claim_webhook(
        &self,
        endpoint: String,
        lease: Duration,
    ) -> BoxFuture<'_, Result<Option<WebhookDelivery>, StoreError>> {
        self.write(move |tx, me| {
            let now = now_ns()?;
            let row = tx
                .prepare_cached(
                    "SELECT seq, msg_id, event, payload, created_at_ns, attempts FROM webhook_outbox
                     WHERE state = 'pending' AND endpoint = ?1 AND next_at_ns <= ?2
                     ORDER BY next_at_ns, seq LIMIT 1",
                )
                .and_then(|mut s| {
                    s.query_row(params![endpoint, now], |r| {
                        Ok((
                            r.get::<_, i64>(0)?,
                            r.get::<_, String>(1)?,
                            r.get::<_, String>(2)?,
                            r.get::<_, String>(3)?,
                            r.get::<_, i64>(4)?,
                            r.get::<_, i64>(5)?,
                        ))
                    })
                    .optional()
                })
                .map_err(backend)?;
            let Some((seq, msg_id, event, payload, created, attempts)) = row else {
                return Ok(None);
            };
            let event_type = WebhookEventType::parse(&event).ok_or_else(|| {
                StoreError::Backend(format!("stored webhook event type {event:?}"))
            })?;
            tx.prepare_cached(
                "UPDATE webhook_outbox SET attempts = attempts + 1, next_at_ns = ?2, leased_by = ?3
                 WHERE seq = ?1",
            )
            .and_then(|mut s| s.execute(params![seq, now.saturating_add(nanos(lease)), me]))
            .map_err(backend)?;
            Ok(Some(WebhookDelivery {
                lease: WebhookLease {
                    seq,
                    msg_id,
                    attempt: u32::try_from(attempts + 1).unwrap_or(u32::MAX),
                },
                endpoint,
                event_type,
                payload,
                age: Duration::from_nanos(now.saturating_sub(created).max(0) as u64),
            }))
        })
    }

    fn webhook_delivered(&self, lease: WebhookLease) -> BoxFuture<'_, Result<bool, StoreError>> {
        self.write(move |tx, _| {
            let n = tx
                .prepare_cached(
                    "DELETE FROM webhook_outbox WHERE seq = ?1 AND msg_id = ?2 AND state = 'pending'",
                )
                .and_then(|mut s| s.execute(params![lease.seq, lease.msg_id]))
                .map_err(backend)?;
            Ok(n == 1)
        })
    }

    fn webhook_failed(
        &self,
        lease: WebhookLease,
        failure: WebhookFailure,
        retry: Option<Duration>,
    ) -> BoxFuture<'_, Result<bool, StoreError>> {
        self.write(move |tx, _| {
            let now = now_ns()?;
            let status = failure.status.map(i64::from);
            let n = match retry {
                Some(after) => tx
                    .prepare_cached(
                        "UPDATE webhook_outbox SET next_at_ns = ?4, leased_by = NULL,
                                last_status = ?5, last_error = ?6
                         WHERE seq = ?1 AND msg_id = ?2 AND attempts = ?3 AND state = 'pending'",
                    )
                    .and_then(|mut s| {
                        s.execute(params![
                            lease.seq,
                            lease.msg_id,
                            i64::from(lease.attempt),
                            now.saturating_add(nanos(after)),
                            status,
                            failure.error
                        ])
                    }),
                None => tx
                    .prepare_cached(
                        "UPDATE webhook_outbox SET state = 'failed', leased_by = NULL,
                                last_status = ?4, last_error = ?5
                         WHERE seq = ?1 AND msg_id = ?2 AND attempts = ?3 AND state = 'pending'",
                    )
                    .and_then(|mut s| {
                        s.execute(params![
                            lease.seq,
                            lease.msg_id,
                            i64::from(lease.attempt),
                            status,
                            failure.error
                        ])
                    }),
            }
            .map_err(backend)?;
            Ok(n == 1)
        })
    }

    fn webhooks_due_now(&self, endpoint: String) -> BoxFuture<'_, Result<u64, StoreError>> {
        self.write(move |tx, _| {
            let now = now_ns()?;
            let n = tx
                .prepare_cached(
                    "UPDATE webhook_outbox SET next_at_ns = ?2
                     WHERE state = 'pending' AND endpoint = ?1 AND leased_by IS NULL
                       AND next_at_ns > ?2",
                )
                .and_then(|mut s| s.execute(params![endpoint, now]))
                .map_err(backend)?;
            Ok(n as u64)
        })
    }

    fn webhook_deliveries(
        &self,
        query: WebhookQuery,
    ) -> BoxFuture<'_, Result<Vec<WebhookDeliveryView>, StoreError>> {
        self.run(move |conn, _| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {VIEW_COLUMNS} FROM webhook_outbox
                     WHERE seq > ?1 AND (?2 IS NULL OR state = ?2) AND (?3 IS NULL OR endpoint = ?3)
                     ORDER BY seq LIMIT ?4"
                ))
                .map_err(backend)?;
            let rows = stmt
                .query_map(
                    params![
                        query.after,
                        query.state.map(WebhookState::as_str),
                        query.endpoint,
                        i64::from(query.page())
                    ],
                    view_of,
                )
                .map_err(backend)?;
            let mut out = Vec::new();
            for row in rows {
                let (view, event) = row.map_err(backend)?;
                types_of([event.as_str()])?;
                out.push(view);
            }
            Ok(out)
        })
    }

    fn retry_failed_webhooks(
        &self,
        endpoint: Option<String>,
    ) -> BoxFuture<'_, Result<u64, StoreError>> {
        self.write(move |tx, _| {
            let now = now_ns()?;
            let n = tx
                .prepare_cached(
                    "UPDATE webhook_outbox SET state = 'pending', next_at_ns = ?2, leased_by = NULL
                     WHERE state = 'failed' AND (?1 IS NULL OR endpoint = ?1)",
                )
                .and_then(|mut s| s.execute(params![endpoint, now]))
                .map_err(backend)?;
            Ok(n as u64)
        })
    }
}

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    fn plan(conn: &Connection, sql: &str) -> String {
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let n = stmt.parameter_count();
        let params: Vec<rusqlite::types::Value> = (0..n).map(|_| 1i64.into()).collect();
        let rows: Vec<String> = stmt
            .query_map(rusqlite::params_from_iter(params), |r| r.get(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        rows.join("; ")
    }

    /// What the outbox's hot statements read: a write asks for subscribers with one seek of the
    /// subscriptions' key (an empty table without endpoints), and a deliverer's next due delivery
    /// and its due instant are seeks in the pending deliveries' partial index, in order, no sort.
    #[test]
    fn the_outbox_seeks_with_an_index() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::migrate::plan_once(&conn).unwrap();
        crate::migrate::migrate(&mut conn).unwrap();
        assert_eq!(
            plan(
                &conn,
                "SELECT EXISTS (SELECT 1 FROM webhook_subscriptions WHERE event = ?1)"
            ),
            "SCAN CONSTANT ROW; SCALAR SUBQUERY 1; \
             SEARCH webhook_subscriptions USING PRIMARY KEY (event=?)"
        );
        let claim = plan(
            &conn,
            "SELECT seq, msg_id, event, payload, created_at_ns, attempts FROM webhook_outbox
             WHERE state = 'pending' AND endpoint = ?1 AND next_at_ns <= ?2
             ORDER BY next_at_ns, seq LIMIT 1",
        );
        assert_eq!(
            claim,
            "SEARCH webhook_outbox USING INDEX webhook_outbox_due (endpoint=? AND next_at_ns<?)"
        );
        let due = plan(
            &conn,
            "SELECT min(next_at_ns) FROM webhook_outbox WHERE state = 'pending' AND endpoint = ?1",
        );
        assert_eq!(
            due,
            "SEARCH webhook_outbox USING COVERING INDEX webhook_outbox_due (endpoint=?)"
        );
    }
}
