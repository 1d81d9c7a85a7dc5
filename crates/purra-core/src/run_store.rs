//! Run store contract: suspended runs survive until they are resumed.
//!
//! A run that reaches a checkpoint is saved as a [`SuspendedRun`] (serde-serializable, so a durable store
//! can keep it as JSON) before the agent returns `Suspended`. Resuming loads it, and removes it once the
//! checkpoint call has an outcome. [`InMemoryRunStore`] is for tests.

use crate::approval::ApprovalId;
use crate::identity::JsonIdentity;
use crate::model::Message;
use crate::run::RunId;
use crate::store::{BoxFuture, StoreError};
use crate::tool::ToolCall;
use std::collections::HashMap;
use std::sync::Mutex;

/// Everything needed to resume a run after an approval decision.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SuspendedRun {
    /// The run.
    pub run_id: RunId,
    /// Its root run.
    pub root_run_id: RunId,
    /// The agent's name.
    pub agent: String,
    /// The preset fingerprint the intent was prepared under.
    pub preset_fingerprint: JsonIdentity,
    /// The transcript up to and including the model turn with the checkpoint call.
    pub transcript: Vec<Message>,
    /// The checkpoint call.
    pub pending_call: ToolCall,
    /// The prepared approval.
    pub approval_id: ApprovalId,
    /// Its intent digest.
    pub intent_digest: JsonIdentity,
    /// Model turns used so far.
    pub turns_used: usize,
    /// Until when a caller waits for the decision (a gateway writes it when a call starts
    /// waiting and clears it when the wait ends early): what an approver is told approving
    /// does. `None`, or past: nobody waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_until: Option<std::time::SystemTime>,
}

/// The run store contract.
pub trait RunStore: Send + Sync {
    /// Whether saved runs survive a crash of the host.
    fn is_durable(&self) -> bool;
    /// Saves (or replaces) a suspended run.
    fn save_suspended(&self, run: SuspendedRun) -> BoxFuture<'_, Result<(), StoreError>>;
    /// Loads a suspended run.
    fn load_suspended(
        &self,
        run_id: RunId,
    ) -> BoxFuture<'_, Result<Option<SuspendedRun>, StoreError>>;
    /// Removes a suspended run once its checkpoint call has an outcome.
    fn remove_suspended(&self, run_id: RunId) -> BoxFuture<'_, Result<(), StoreError>>;
}

/// An in-memory run store for tests. Not durable.
#[derive(Debug, Default)]
pub struct InMemoryRunStore {
    runs: Mutex<HashMap<RunId, SuspendedRun>>,
}

impl InMemoryRunStore {
    /// An empty store.
    pub fn new() -> InMemoryRunStore {
        InMemoryRunStore::default()
    }
}

impl RunStore for InMemoryRunStore {
    fn is_durable(&self) -> bool {
        false
    }

    fn save_suspended(&self, run: SuspendedRun) -> BoxFuture<'_, Result<(), StoreError>> {
        self.runs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(run.run_id.clone(), run);
        Box::pin(async { Ok(()) })
    }

    fn load_suspended(
        &self,
        run_id: RunId,
    ) -> BoxFuture<'_, Result<Option<SuspendedRun>, StoreError>> {
        let run = self
            .runs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&run_id)
            .cloned();
        Box::pin(async move { Ok(run) })
    }

    fn remove_suspended(&self, run_id: RunId) -> BoxFuture<'_, Result<(), StoreError>> {
        self.runs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&run_id);
        Box::pin(async { Ok(()) })
    }
}
