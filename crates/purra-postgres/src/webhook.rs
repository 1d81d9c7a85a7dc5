//! The webhook outbox (purra-core's `WebhookOutbox`) in the store's schema: events recorded by the
//! writes that make them ([`wanted`], then [`insert`], inside their transaction), and the
//! deliverers' claims (`FOR UPDATE SKIP LOCKED`, so concurrent hosts never wait on one another's
//! claim), results and listings. Due instants and leases are the database's clock (`now_ns()`),
//! as the owners' leases are.

use crate::store::{exec, query, query_opt, Error, PostgresStore, Tx};
use purra_core::stored::{approval_id, from_ns};
use purra_core::webhook::{check_endpoints, new_message_id, types_of, ENDPOINT_REMOVED};
use purra_core::{
    ApprovalRef, BoxFuture, StoreError, WebhookDelivery, WebhookDeliveryView, WebhookEndpoint,
    WebhookEvent, WebhookEventType, WebhookFailure, WebhookLease, WebhookOutbox, WebhookQuery,
    WebhookState,
};
use std::time::Duration;
use tokio_postgres::Row;

fn nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// Whether any endpoint subscribes to `event_type` (one seek in a table empty unless endpoints
/// are registered).
pub(crate) async fn wanted(tx: &Tx<'_>, event_type: WebhookEventType) -> Result<bool, Error> {
    Ok(query_opt(
        tx,
        "SELECT 1 FROM webhook_subscriptions WHERE event = $1 LIMIT 1",
        &[&event_type.as_str()],
    )
    .await?
    .is_some())
}

/// Records `event` for every endpoint subscribed to its type, in `tx`, under a new `webhook-id`.
pub(crate) async fn insert(tx: &Tx<'_>, event: &WebhookEvent) -> Result<(), Error> {
    let msg_id = new_message_id()?;
    exec(
        tx,
        "INSERT INTO webhook_outbox (msg_id, endpoint, event, payload, created_at_ns, state,
                                     attempts, next_at_ns)
         SELECT $1, endpoint, event, $3, now_ns(), 'pending', 0, now_ns()
         FROM webhook_subscriptions WHERE event = $2 ORDER BY endpoint",
        &[&msg_id, &event.event_type.as_str(), &event.payload()],
    )
    .await?;
    Ok(())
}

/// The approval the claim of `key` was made by, if an approval made it.
pub(crate) async fn approval_of_claim(
    tx: &Tx<'_>,
    key: &str,
) -> Result<Option<ApprovalRef>, Error> {
    Ok(query_opt(
        tx,
        "SELECT a.seq, a.tool, a.principal FROM claims c JOIN approvals a ON a.seq = c.approval_seq
         WHERE c.key = $1",
        &[&key],
    )
    .await?
    .map(|r| ApprovalRef {
        id: approval_id(r.get(0)),
        tool: r.get(1),
        principal: r.get(2),
    }))
}

/// Gives up `endpoint`'s pending deliveries with `reason`; how many.
async fn give_up(tx: &Tx<'_>, endpoint: &str, reason: &str) -> Result<u64, Error> {
    exec(
        tx,
        "UPDATE webhook_outbox SET state = 'failed', leased_by = NULL, last_error = $2
         WHERE state = 'pending' AND endpoint = $1",
        &[&endpoint, &reason],
    )
    .await
}

const VIEW_COLUMNS: &str = "seq, msg_id, endpoint, event, payload, state, attempts, created_at_ns,
                            next_at_ns, last_status, last_error";

fn view_of(r: &Row) -> Result<WebhookDeliveryView, Error> {
    let state: &str = r.get(5);
    let event: &str = r.get(3);
    let pending = state == "pending";
    Ok(WebhookDeliveryView {
        seq: r.get(0),
        msg_id: r.get(1),
        endpoint: r.get(2),
        event_type: types_of([event])?[0],
        payload: r.get(4),
        state: if pending {
            WebhookState::Pending
        } else {
            WebhookState::Failed
        },
        attempts: u32::try_from(r.get::<_, i32>(6)).unwrap_or(0),
        created_at: from_ns(r.get(7)),
        next_at: pending.then(|| from_ns(r.get(8))),
        last_status: r
            .get::<_, Option<i32>>(9)
            .and_then(|s| u16::try_from(s).ok()),
        last_error: r.get(10),
    })
}

impl WebhookOutbox for PostgresStore {
    fn set_webhook_endpoints(
        &self,
        endpoints: Vec<WebhookEndpoint>,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            check_endpoints(&endpoints)?;
            if endpoints.iter().any(|e| e.events.is_empty()) {
                return Err(StoreError::Conflict(
                    "a webhook endpoint subscribes to no event type",
                ));
            }
            let endpoints = std::sync::Arc::new(endpoints);
            self.transact(move |tx, _, _| {
                let endpoints = std::sync::Arc::clone(&endpoints);
                Box::pin(async move {
                    exec(tx, "DELETE FROM webhook_subscriptions", &[]).await?;
                    for e in endpoints.iter() {
                        for t in &e.events {
                            exec(
                                tx,
                                "INSERT INTO webhook_subscriptions (event, endpoint) VALUES ($1, $2)
                                 ON CONFLICT DO NOTHING",
                                &[&t.as_str(), &e.name],
                            )
                            .await?;
                        }
                    }
                    let pending = query(
                        tx,
                        "SELECT DISTINCT endpoint FROM webhook_outbox WHERE state = 'pending'",
                        &[],
                    )
                    .await?;
                    for row in pending {
                        let name: &str = row.get(0);
                        if !endpoints.iter().any(|e| e.name == name) {
                            give_up(tx, name, ENDPOINT_REMOVED).await?;
                        }
                    }
                    Ok(())
                })
            })
            .await
        })
    }

    fn webhook_endpoints(&self) -> BoxFuture<'_, Result<Vec<WebhookEndpoint>, StoreError>> {
        self.read(|c| async move {
            let rows = query(
                &c,
                "SELECT endpoint, event FROM webhook_subscriptions ORDER BY endpoint, event",
                &[],
            )
            .await?;
            let mut out: Vec<(String, Vec<String>)> = Vec::new();
            for r in &rows {
                let (endpoint, event): (String, String) = (r.get(0), r.get(1));
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
        self.transact(move |tx, _, _| {
            let (endpoint, reason) = (endpoint.clone(), reason.clone());
            Box::pin(async move {
                exec(
                    tx,
                    "DELETE FROM webhook_subscriptions WHERE endpoint = $1",
                    &[&endpoint],
                )
                .await?;
                give_up(tx, &endpoint, &reason).await
            })
        })
    }

    fn next_webhook_due(
        &self,
        endpoint: String,
    ) -> BoxFuture<'_, Result<Option<Duration>, StoreError>> {
        self.read(move |c| {
            let endpoint = endpoint.clone();
            async move {
                let row = query_opt(
                    &c,
                    "SELECT min(next_at_ns) - now_ns() FROM webhook_outbox
                     WHERE state = 'pending' AND endpoint = $1",
                    &[&endpoint],
                )
                .await?;
                let left: Option<i64> = row.and_then(|r| r.get(0));
                Ok(left.map(|n| Duration::from_nanos(n.max(0) as u64)))
            }
        })
    }

    fn claim_webhook(
        &self,
        endpoint: String,
        lease: Duration,
    ) -> BoxFuture<'_, Result<Option<WebhookDelivery>, StoreError>> {
        let lease_ns = nanos(lease);
        self.transact(move |tx, me, _| {
            let endpoint = endpoint.clone();
            Box::pin(async move {
                // A delivery another host is claiming is skipped, never waited for.
                let row = query_opt(
                    tx,
                    "UPDATE webhook_outbox SET attempts = attempts + 1,
                            next_at_ns = now_ns() + $2, leased_by = $3
                     WHERE seq = (SELECT seq FROM webhook_outbox
                                  WHERE state = 'pending' AND endpoint = $1
                                    AND next_at_ns <= now_ns()
                                  ORDER BY next_at_ns, seq LIMIT 1 FOR UPDATE SKIP LOCKED)
                     RETURNING seq, msg_id, event, payload, now_ns() - created_at_ns, attempts",
                    &[&endpoint, &lease_ns, &me],
                )
                .await?;
                let Some(r) = row else {
                    return Ok(None);
                };
                let event: &str = r.get(2);
                Ok(Some(WebhookDelivery {
                    lease: WebhookLease {
                        seq: r.get(0),
                        msg_id: r.get(1),
                        attempt: u32::try_from(r.get::<_, i32>(5)).unwrap_or(0),
                    },
                    endpoint,
                    event_type: types_of([event])?[0],
                    payload: r.get(3),
                    age: Duration::from_nanos(r.get::<_, i64>(4).max(0) as u64),
                }))
            })
        })
    }

    fn webhook_delivered(&self, lease: WebhookLease) -> BoxFuture<'_, Result<bool, StoreError>> {
        self.transact(move |tx, _, _| {
            let lease = lease.clone();
            Box::pin(async move {
                let n = exec(
                    tx,
                    "DELETE FROM webhook_outbox WHERE seq = $1 AND msg_id = $2 AND state = 'pending'",
                    &[&lease.seq, &lease.msg_id],
                )
                .await?;
                Ok(n == 1)
            })
        })
    }

    fn webhook_failed(
        &self,
        lease: WebhookLease,
        failure: WebhookFailure,
        retry: Option<Duration>,
    ) -> BoxFuture<'_, Result<bool, StoreError>> {
        self.transact(move |tx, _, _| {
            let (lease, failure) = (lease.clone(), failure.clone());
            Box::pin(async move {
                let attempt = i32::try_from(lease.attempt).unwrap_or(i32::MAX);
                let status = failure.status.map(i32::from);
                let n = match retry {
                    Some(after) => exec(
                        tx,
                        "UPDATE webhook_outbox SET next_at_ns = now_ns() + $4, leased_by = NULL,
                                    last_status = $5, last_error = $6
                             WHERE seq = $1 AND msg_id = $2 AND attempts = $3
                               AND state = 'pending'",
                        &[
                            &lease.seq,
                            &lease.msg_id,
                            &attempt,
                            &nanos(after),
                            &status,
                            &failure.error,
                        ],
                    )
                    .await?,
                    None => {
                        exec(
                            tx,
                            "UPDATE webhook_outbox SET state = 'failed', leased_by = NULL,
                                    last_status = $4, last_error = $5
                             WHERE seq = $1 AND msg_id = $2 AND attempts = $3
                               AND state = 'pending'",
                            &[&lease.seq, &lease.msg_id, &attempt, &status, &failure.error],
                        )
                        .await?
                    }
                };
                Ok(n == 1)
            })
        })
    }

    fn webhooks_due_now(&self, endpoint: String) -> BoxFuture<'_, Result<u64, StoreError>> {
        self.transact(move |tx, _, _| {
            let endpoint = endpoint.clone();
            Box::pin(async move {
                exec(
                    tx,
                    "UPDATE webhook_outbox SET next_at_ns = now_ns()
                     WHERE state = 'pending' AND endpoint = $1 AND leased_by IS NULL
                       AND next_at_ns > now_ns()",
                    &[&endpoint],
                )
                .await
            })
        })
    }

    fn webhook_deliveries(
        &self,
        query_: WebhookQuery,
    ) -> BoxFuture<'_, Result<Vec<WebhookDeliveryView>, StoreError>> {
        self.read(move |c| {
            let q = query_.clone();
            async move {
                let rows = query(
                    &c,
                    &format!(
                        "SELECT {VIEW_COLUMNS} FROM webhook_outbox
                         WHERE seq > $1 AND ($2::text IS NULL OR state = $2)
                           AND ($3::text IS NULL OR endpoint = $3)
                         ORDER BY seq LIMIT $4"
                    ),
                    &[
                        &q.after,
                        &q.state.map(WebhookState::as_str),
                        &q.endpoint,
                        &i64::from(q.page()),
                    ],
                )
                .await?;
                rows.iter().map(view_of).collect()
            }
        })
    }

    fn retry_failed_webhooks(
        &self,
        endpoint: Option<String>,
    ) -> BoxFuture<'_, Result<u64, StoreError>> {
        self.transact(move |tx, _, _| {
            let endpoint = endpoint.clone();
            Box::pin(async move {
                exec(
                    tx,
                    "UPDATE webhook_outbox SET state = 'pending', next_at_ns = now_ns(),
                            leased_by = NULL
                     WHERE state = 'failed' AND ($1::text IS NULL OR endpoint = $1)",
                    &[&endpoint],
                )
                .await
            })
        })
    }
}
