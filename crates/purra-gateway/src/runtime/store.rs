//! What the gateway needs of a durable store, behind one small seam.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use purra_core::{
    ApprovalGateway, ApprovalId, ApprovalRecord, ApprovalRequest, ApprovalState, ApprovalView,
    BoxFuture, EffectOutcome, IdempotencyKey, OperatorStore, RunId, RunStore, StoreError,
    StoreEvent, SuspendedRun, WebhookOutbox,
};
use purra_postgres::PostgresStore;
use purra_sqlite::SqliteStore;
use purra_store::AnyStore;
use tokio::sync::Notify;

/// A durable store the gateway keeps its writes in.
///
/// The gateway keeps every write in purra-core's contracts: the approval (with its decision and
/// claim) in an [`ApprovalGateway`], the claim's outcome in its receipt store, and the waiting
/// call (tool, arguments, approval id, intent digest) as a suspended run in a [`RunStore`]; a
/// restarted gateway lists the suspended runs and marks claims of a killed process `unknown`
/// through the store's [`OperatorStore`] view. [`GatewayStore`] is implemented for
/// [`SqliteStore`], [`PostgresStore`] and [`AnyStore`] (either, by the configuration's `db`).
///
/// Waiting for a decision is [`Decisions`]: an in-process wake-up (a decision made through this
/// gateway, by elicitation or by an embedding host) plus the store's event stream
/// ([`ApprovalGateway::subscribe`]): PostgreSQL hears another process's decision at once by
/// `LISTEN`; a SQLite file cannot notify, so its store polls the file for the stream (every
/// `SqliteOptions::event_poll`, 200 ms by default).
pub trait GatewayStore: Send + Sync {
    /// The approval gateway (durable).
    fn approvals(&self) -> Arc<dyn ApprovalGateway>;
    /// The run store the waiting calls are saved in (durable).
    fn runs(&self) -> Arc<dyn RunStore>;
    /// The ids of every saved suspended run.
    fn suspended_run_ids(&self) -> BoxFuture<'_, Result<Vec<RunId>, StoreError>>;
    /// One approval with its request (and so the request's expiry), if it exists.
    fn approval(&self, id: ApprovalId) -> BoxFuture<'_, Result<Option<ApprovalView>, StoreError>>;
    /// The latest approvals of one run (at most 16, `RUN_APPROVALS`, the newest first), with their
    /// claims: where a stored outcome's approval and time are read.
    fn run_approvals(&self, run: RunId) -> BoxFuture<'_, Result<Vec<ApprovalView>, StoreError>>;
    /// Marks claims without outcome whose owner is gone as `unknown` (`interrupted`); returns
    /// how many.
    fn reconcile_interrupted(&self, now: SystemTime) -> BoxFuture<'_, Result<usize, StoreError>>;
    /// Prepares `request` unless the principal it names already has `limit` approvals open at
    /// `now` ([`OperatorStore::prepare_within`]: counted with the insert, for every process on
    /// the store); `None` then, and nothing is written.
    fn prepare_within(
        &self,
        request: ApprovalRequest,
        limit: u32,
        now: SystemTime,
    ) -> BoxFuture<'_, Result<Option<ApprovalId>, StoreError>>;
    /// Prepares `request` as [`GatewayStore::prepare_within`] does and, in the same transaction,
    /// saves `run` (the call waiting for it) with the new approval's id: one durable write.
    fn prepare_waiting(
        &self,
        request: ApprovalRequest,
        limit: u32,
        now: SystemTime,
        run: SuspendedRun,
    ) -> BoxFuture<'_, Result<Option<ApprovalId>, StoreError>>;
    /// The votes cast on approval `id` (one that needs a quorum), in the order they were cast.
    fn votes(&self, id: ApprovalId) -> BoxFuture<'_, Result<Vec<purra_core::Vote>, StoreError>>;
    /// Records the outcome of the claim under `key` and, in the same transaction, drops the
    /// suspended run `run` it answers: one durable write.
    fn complete_run(
        &self,
        key: IdempotencyKey,
        outcome: EffectOutcome,
        run: RunId,
    ) -> BoxFuture<'_, Result<(), StoreError>>;
    /// The store's webhook outbox, when it keeps one (every durable store does); a gateway with
    /// `[webhooks]` needs it.
    fn outbox(&self) -> Option<Arc<dyn WebhookOutbox>> {
        None
    }
    /// The store's credentials (sealed), when it keeps them (every durable store does): what
    /// upstreams called as each principal read.
    fn credentials(&self) -> Option<Arc<dyn purra_core::CredentialStore>> {
        None
    }
    /// The store's pinned tool definitions and catalog changes, when it keeps them (every
    /// durable store does): without them a gateway serves what its upstreams list (as
    /// `on_catalog_change = "serve"`).
    fn pins(&self) -> Option<Arc<dyn purra_core::CatalogPins>> {
        None
    }
    /// The store's standing grants, when it keeps them (every durable store does): a write call
    /// inside a live grant takes a use instead of waiting.
    fn grants(&self) -> Option<Arc<dyn purra_core::GrantStore>> {
        None
    }
    /// The store's approve-with-edit record, when it keeps one (every durable store does):
    /// without it an edit is refused.
    fn edits(&self) -> Option<Arc<dyn purra_core::EditStore>> {
        None
    }
    /// The store's table of MCP tasks, when it keeps one (every durable store does): held writes
    /// a client called as tasks are found there by every instance of a fleet.
    fn tasks(&self) -> Option<Arc<dyn purra_core::TaskTable>> {
        None
    }
    /// The store's Streamable HTTP sessions, when it keeps them (every durable store does): a
    /// session initialized at one instance of a fleet is served by any other, `DELETE` ends it
    /// everywhere, idle expiry is fleet-wide. `None` (an in-memory store): sessions live in the
    /// process, as before.
    fn sessions(&self) -> Option<Arc<dyn purra_protocol::session_store::SessionStore>> {
        None
    }
    /// Whether instances on other machines share this store (PostgreSQL): a drain then hands
    /// the SSE streams of the calls it holds over to them
    /// ([`StreamableHttpServer::release_streams`](purra_protocol::StreamableHttpServer::release_streams))
    /// instead of answering waiting writes pending. A SQLite file is one machine's: there,
    /// a stopping instance answers them pending, as a lone gateway always did.
    fn shared_by_a_fleet(&self) -> bool {
        false
    }
    /// How many approvals wait for a decision (every gateway's; read through the store's pending
    /// index), for the metrics.
    fn pending_count(&self) -> BoxFuture<'_, Result<u64, StoreError>>;
    /// Marks the escalations due at `now` ([`OperatorStore::escalate_due`]).
    fn escalate_due(&self, now: SystemTime) -> BoxFuture<'_, Result<Vec<ApprovalId>, StoreError>>;
    /// Denies the approvals due at `now` under `on_expiry = "deny"`
    /// ([`OperatorStore::expire_due`]).
    fn expire_due(&self, now: SystemTime) -> BoxFuture<'_, Result<Vec<ApprovalId>, StoreError>>;

    /// Whether the store answers: one read of an approval that never exists (`/readyz`).
    fn ping(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            self.approval(ApprovalId("approval-0".into()))
                .await
                .map(|_| ())
        })
    }
}

/// Counts the pending approvals of an operator's view.
fn pending(store: &dyn OperatorStore) -> BoxFuture<'_, Result<u64, StoreError>> {
    store.count_approvals(
        purra_core::ApprovalQuery::all().status(purra_core::ApprovalStatus::Pending),
    )
}

/// How many of a run's approvals [`GatewayStore::run_approvals`] reads.
pub const RUN_APPROVALS: u32 = 16;

/// The latest approvals of `run` in an operator's view.
fn of_run(
    store: &dyn OperatorStore,
    run: RunId,
) -> BoxFuture<'_, Result<Vec<ApprovalView>, StoreError>> {
    store.approvals(
        purra_core::ApprovalQuery::all()
            .run(run)
            .newest_first()
            .limit(RUN_APPROVALS),
    )
}

/// Lists the suspended runs of an operator's view.
fn suspended(store: &dyn OperatorStore) -> BoxFuture<'_, Result<Vec<RunId>, StoreError>> {
    store.suspended_run_ids()
}

/// Reconciles the interrupted claims of an operator's view; returns how many.
fn reconcile(
    store: &dyn OperatorStore,
    now: SystemTime,
) -> BoxFuture<'_, Result<usize, StoreError>> {
    Box::pin(async move {
        Ok(store
            .reconcile_interrupted_claims(now)
            .await?
            .interrupted
            .len())
    })
}

/// `GatewayStore` for a store type that is each contract itself (cloning shares it).
macro_rules! gateway_store {
    ($store:ty, $fleet:expr) => {
        impl GatewayStore for $store {
            fn shared_by_a_fleet(&self) -> bool {
                $fleet
            }

            fn approvals(&self) -> Arc<dyn ApprovalGateway> {
                Arc::new(self.clone())
            }

            fn runs(&self) -> Arc<dyn RunStore> {
                Arc::new(self.clone())
            }

            fn suspended_run_ids(&self) -> BoxFuture<'_, Result<Vec<RunId>, StoreError>> {
                suspended(self)
            }

            fn approval(
                &self,
                id: ApprovalId,
            ) -> BoxFuture<'_, Result<Option<ApprovalView>, StoreError>> {
                OperatorStore::approval(self, id)
            }

            fn run_approvals(
                &self,
                run: RunId,
            ) -> BoxFuture<'_, Result<Vec<ApprovalView>, StoreError>> {
                of_run(self, run)
            }

            fn reconcile_interrupted(
                &self,
                now: SystemTime,
            ) -> BoxFuture<'_, Result<usize, StoreError>> {
                reconcile(self, now)
            }

            fn prepare_within(
                &self,
                request: ApprovalRequest,
                limit: u32,
                now: SystemTime,
            ) -> BoxFuture<'_, Result<Option<ApprovalId>, StoreError>> {
                OperatorStore::prepare_within(self, request, limit, now)
            }

            fn prepare_waiting(
                &self,
                request: ApprovalRequest,
                limit: u32,
                now: SystemTime,
                run: SuspendedRun,
            ) -> BoxFuture<'_, Result<Option<ApprovalId>, StoreError>> {
                <$store>::prepare_waiting(self, request, limit, now, run)
            }

            fn complete_run(
                &self,
                key: IdempotencyKey,
                outcome: EffectOutcome,
                run: RunId,
            ) -> BoxFuture<'_, Result<(), StoreError>> {
                <$store>::complete_run(self, key, outcome, run)
            }

            fn votes(
                &self,
                id: ApprovalId,
            ) -> BoxFuture<'_, Result<Vec<purra_core::Vote>, StoreError>> {
                OperatorStore::votes(self, id)
            }

            fn outbox(&self) -> Option<Arc<dyn WebhookOutbox>> {
                Some(Arc::new(self.clone()))
            }

            fn credentials(&self) -> Option<Arc<dyn purra_core::CredentialStore>> {
                Some(Arc::new(self.clone()))
            }

            fn pins(&self) -> Option<Arc<dyn purra_core::CatalogPins>> {
                Some(Arc::new(self.clone()))
            }

            fn grants(&self) -> Option<Arc<dyn purra_core::GrantStore>> {
                Some(Arc::new(self.clone()))
            }

            fn edits(&self) -> Option<Arc<dyn purra_core::EditStore>> {
                Some(Arc::new(self.clone()))
            }

            fn tasks(&self) -> Option<Arc<dyn purra_core::TaskTable>> {
                Some(Arc::new(self.clone()))
            }

            fn sessions(&self) -> Option<Arc<dyn purra_protocol::session_store::SessionStore>> {
                Some(Arc::new(self.clone()))
            }

            fn pending_count(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
                pending(self)
            }

            fn escalate_due(
                &self,
                now: SystemTime,
            ) -> BoxFuture<'_, Result<Vec<ApprovalId>, StoreError>> {
                OperatorStore::escalate_due(self, now)
            }

            fn expire_due(
                &self,
                now: SystemTime,
            ) -> BoxFuture<'_, Result<Vec<ApprovalId>, StoreError>> {
                OperatorStore::expire_due(self, now)
            }
        }
    };
}

gateway_store!(SqliteStore, false);
gateway_store!(PostgresStore, true);

impl GatewayStore for AnyStore {
    fn approvals(&self) -> Arc<dyn ApprovalGateway> {
        self.gateway()
    }

    fn runs(&self) -> Arc<dyn RunStore> {
        AnyStore::runs(self)
    }

    fn suspended_run_ids(&self) -> BoxFuture<'_, Result<Vec<RunId>, StoreError>> {
        suspended(self.ops())
    }

    fn approval(&self, id: ApprovalId) -> BoxFuture<'_, Result<Option<ApprovalView>, StoreError>> {
        self.ops().approval(id)
    }

    fn run_approvals(&self, run: RunId) -> BoxFuture<'_, Result<Vec<ApprovalView>, StoreError>> {
        of_run(self.ops(), run)
    }

    fn reconcile_interrupted(&self, now: SystemTime) -> BoxFuture<'_, Result<usize, StoreError>> {
        reconcile(self.ops(), now)
    }

    fn prepare_within(
        &self,
        request: ApprovalRequest,
        limit: u32,
        now: SystemTime,
    ) -> BoxFuture<'_, Result<Option<ApprovalId>, StoreError>> {
        self.ops().prepare_within(request, limit, now)
    }

    fn prepare_waiting(
        &self,
        request: ApprovalRequest,
        limit: u32,
        now: SystemTime,
        run: SuspendedRun,
    ) -> BoxFuture<'_, Result<Option<ApprovalId>, StoreError>> {
        match self {
            AnyStore::Sqlite(s) => s.prepare_waiting(request, limit, now, run),
            AnyStore::Postgres(s) => s.prepare_waiting(request, limit, now, run),
            // A kind of store this build does not know: the two writes one after the other.
            other => Box::pin(async move {
                let Some(id) = other.ops().prepare_within(request, limit, now).await? else {
                    return Ok(None);
                };
                let mut run = run;
                run.approval_id = id.clone();
                AnyStore::runs(other).save_suspended(run).await?;
                Ok(Some(id))
            }),
        }
    }

    fn votes(&self, id: ApprovalId) -> BoxFuture<'_, Result<Vec<purra_core::Vote>, StoreError>> {
        self.ops().votes(id)
    }

    fn complete_run(
        &self,
        key: IdempotencyKey,
        outcome: EffectOutcome,
        run: RunId,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        match self {
            AnyStore::Sqlite(s) => s.complete_run(key, outcome, run),
            AnyStore::Postgres(s) => s.complete_run(key, outcome, run),
            other => Box::pin(async move {
                let completed = other.gateway().receipts().complete(key, outcome).await;
                AnyStore::runs(other).remove_suspended(run).await?;
                completed
            }),
        }
    }

    fn outbox(&self) -> Option<Arc<dyn WebhookOutbox>> {
        Some(AnyStore::outbox(self))
    }

    fn credentials(&self) -> Option<Arc<dyn purra_core::CredentialStore>> {
        Some(AnyStore::credentials(self))
    }

    fn pins(&self) -> Option<Arc<dyn purra_core::CatalogPins>> {
        Some(AnyStore::pins(self))
    }

    fn grants(&self) -> Option<Arc<dyn purra_core::GrantStore>> {
        Some(AnyStore::grants(self))
    }

    fn edits(&self) -> Option<Arc<dyn purra_core::EditStore>> {
        Some(AnyStore::edits(self))
    }

    fn tasks(&self) -> Option<Arc<dyn purra_core::TaskTable>> {
        Some(AnyStore::tasks(self))
    }

    fn shared_by_a_fleet(&self) -> bool {
        matches!(self, AnyStore::Postgres(_))
    }

    fn sessions(&self) -> Option<Arc<dyn purra_protocol::session_store::SessionStore>> {
        match self {
            AnyStore::Sqlite(s) => Some(s.clone()),
            AnyStore::Postgres(s) => Some(s.clone()),
            _ => None,
        }
    }

    fn pending_count(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        pending(self.ops())
    }

    fn escalate_due(&self, now: SystemTime) -> BoxFuture<'_, Result<Vec<ApprovalId>, StoreError>> {
        self.ops().escalate_due(now)
    }

    fn expire_due(&self, now: SystemTime) -> BoxFuture<'_, Result<Vec<ApprovalId>, StoreError>> {
        self.ops().expire_due(now)
    }
}

/// How often a waiting call reads the store when the store cannot tell it of changes (and how
/// often a claim in flight is looked at again).
pub const POLL_INTERVAL: Duration = Duration::from_millis(200);

/// Wakes calls waiting for decisions.
#[derive(Debug, Default)]
pub struct Decisions {
    notify: Notify,
}

impl Decisions {
    /// Tells every waiting call to look at the store again (a decision was just recorded).
    pub fn wake(&self) {
        self.notify.notify_waiters();
    }

    /// Reads the record of `id` until it is no longer `Prepared`, or `until` passes; returns the
    /// last record read. Reads again at once on [`Decisions::wake`] and on every store event about
    /// `id`; only after the store's event stream ends or resyncs does it also read every
    /// `POLL_INTERVAL` (200 ms).
    pub async fn wait(
        &self,
        approvals: &dyn ApprovalGateway,
        id: &ApprovalId,
        until: tokio::time::Instant,
    ) -> Result<ApprovalRecord, StoreError> {
        let mut events = Some(approvals.subscribe());
        let mut resynced = false;
        loop {
            // Registered (and subscribed) before reading, so a decision between the read and the
            // wait is not lost.
            let woken = self.notify.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            let record = approvals
                .record(id.clone())
                .await?
                .ok_or(StoreError::NotFound)?;
            let now = tokio::time::Instant::now();
            if record.state != ApprovalState::Prepared || now >= until {
                return Ok(record);
            }
            let poll = if events.is_some() && !resynced {
                until
            } else {
                (now + POLL_INTERVAL).min(until)
            };
            tokio::select! {
                () = &mut woken => {}
                () = tokio::time::sleep_until(poll) => {}
                event = next_about(&mut events, id) => {
                    // A missed stretch, or a store whose stream could not start: from now on
                    // also read every POLL_INTERVAL.
                    resynced |= event == Some(StoreEvent::Resync);
                }
            }
        }
    }
}

/// The next event of `events` about `id` (or a resync); `None`, and `events` cleared, once the
/// stream ends; pending forever without a stream.
async fn next_about(
    events: &mut Option<purra_core::StoreEvents>,
    id: &ApprovalId,
) -> Option<StoreEvent> {
    let Some(stream) = events.as_mut() else {
        return std::future::pending().await;
    };
    loop {
        match stream.next().await {
            None => {
                *events = None;
                return None;
            }
            Some(StoreEvent::Resync) => return Some(StoreEvent::Resync),
            Some(e) if e.approval_id() == Some(id) => return Some(e),
            Some(_) => {}
        }
    }
}
