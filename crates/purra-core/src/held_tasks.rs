//! Tasks kept in a durable store: the rows behind an MCP server's tasks when a fleet of
//! processes shares them (a task created on one instance is read, waited on and cancelled on
//! any). A row is opaque to the store but for what it bounds and finds tasks by: its id, its
//! owner, its creation and expiry times and whether it ended.

use crate::{BoxFuture, StoreError};

/// One stored task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredTask {
    /// The task's id (unguessable, minted by the server).
    pub id: String,
    /// Who may see and cancel it.
    pub owner: String,
    /// When it was created, in milliseconds since the Unix epoch.
    pub created_ms: i64,
    /// When it is forgotten, in milliseconds since the Unix epoch.
    pub expires_ms: i64,
    /// Whether it ended (completed, failed or cancelled): an ended task is never replaced.
    pub terminal: bool,
    /// What the server keeps of it (JSON text).
    pub body: String,
}

/// What [`TaskTable::insert_task`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskInsert {
    /// The task is stored.
    Inserted,
    /// Its owner already has the most tasks not yet ended allowed; nothing was stored.
    OwnerFull,
    /// The store holds the most live tasks allowed; nothing was stored.
    StoreFull,
}

/// The store's table of tasks. Every read skips expired tasks and is by owner: a task of
/// another owner is absent.
pub trait TaskTable: Send + Sync {
    /// Forgets expired tasks, then stores `task` unless its owner has `per_owner` tasks not yet
    /// ended or the store has `total` tasks (ended ones included).
    fn insert_task(
        &self,
        task: StoredTask,
        per_owner: u32,
        total: u32,
    ) -> BoxFuture<'_, Result<TaskInsert, StoreError>>;
    /// The live task `id` of `owner`.
    fn task(
        &self,
        owner: String,
        id: String,
    ) -> BoxFuture<'_, Result<Option<StoredTask>, StoreError>>;
    /// Replaces the task of the same id and owner unless it has ended or expired; whether it
    /// did.
    fn replace_task(&self, task: StoredTask) -> BoxFuture<'_, Result<bool, StoreError>>;
    /// `owner`'s live tasks, oldest first, after the task `after` (a cursor), at most `limit`.
    fn tasks_of(
        &self,
        owner: String,
        after: Option<String>,
        limit: u32,
    ) -> BoxFuture<'_, Result<Vec<StoredTask>, StoreError>>;
}

/// Now, in milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
