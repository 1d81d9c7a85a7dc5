//! What the gateway needs of a durable store, behind one small seam.
//!
//! The gateway keeps every write in purra-core's contracts: the approval (with its decision and
//! claim) in an [`ApprovalGateway`], the claim's outcome in its receipt store, and the waiting
//! call (tool, arguments, approval id, intent digest) as a suspended run in a [`RunStore`]. Two
//! things the contracts do not offer yet are here: listing the suspended runs (a restarted
//! gateway finds the calls it was holding) and marking claims of a killed process `unknown`.
//! [`GatewayStore`] is implemented for [`SqliteStore`]; another store (PostgreSQL) plugs in by
//! implementing it.
//!
//! Waiting for a decision is [`Decisions`]: an in-process wake-up (a decision made through this
//! gateway, by elicitation or by an embedding host) plus a bounded poll of the store, since a
//! decision another process writes into a SQLite file cannot notify this one.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use purra_core::{
    ApprovalGateway, ApprovalId, ApprovalRecord, ApprovalState, BoxFuture, RunId, RunStore,
    StoreError,
};
use purra_sqlite::SqliteStore;
use tokio::sync::Notify;

/// A durable store the gateway keeps its writes in.
pub trait GatewayStore: Send + Sync {
    /// The approval gateway (durable).
    fn approvals(&self) -> Arc<dyn ApprovalGateway>;
    /// The run store the waiting calls are saved in (durable).
    fn runs(&self) -> Arc<dyn RunStore>;
    /// The ids of every saved suspended run.
    fn suspended_run_ids(&self) -> BoxFuture<'_, Result<Vec<RunId>, StoreError>>;
    /// Marks claims without outcome whose owner is gone as `unknown` (`interrupted`); returns
    /// how many.
    fn reconcile_interrupted(&self, now: SystemTime) -> BoxFuture<'_, Result<usize, StoreError>>;
}

impl GatewayStore for SqliteStore {
    fn approvals(&self) -> Arc<dyn ApprovalGateway> {
        Arc::new(self.clone())
    }

    fn runs(&self) -> Arc<dyn RunStore> {
        Arc::new(self.clone())
    }

    fn suspended_run_ids(&self) -> BoxFuture<'_, Result<Vec<RunId>, StoreError>> {
        Box::pin(SqliteStore::suspended_run_ids(self))
    }

    fn reconcile_interrupted(&self, now: SystemTime) -> BoxFuture<'_, Result<usize, StoreError>> {
        Box::pin(async move {
            Ok(self
                .reconcile_interrupted_claims(now)
                .await?
                .interrupted
                .len())
        })
    }
}

/// How often a waiting call reads the store for a decision made by another process.
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
    /// last record read. Wakes at once on [`Decisions::wake`], otherwise every [`POLL_INTERVAL`].
    pub async fn wait(
        &self,
        approvals: &dyn ApprovalGateway,
        id: &ApprovalId,
        until: tokio::time::Instant,
    ) -> Result<ApprovalRecord, StoreError> {
        loop {
            // Registered before reading, so a wake between the read and the sleep is not lost.
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
            let next = (now + POLL_INTERVAL).min(until);
            tokio::select! {
                () = &mut woken => {}
                () = tokio::time::sleep_until(next) => {}
            }
        }
    }
}
