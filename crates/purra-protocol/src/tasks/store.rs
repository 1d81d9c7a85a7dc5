//! Where tasks live: the [`TaskStore`] trait and its bounded in-memory default.
//!
//! A store keeps what a client may read about a task (status, timestamps, questions, outcome);
//! what only the running process has (the handler, its cancellation, the channels its questions
//! wait on) stays with the server. Every read and write names the task's owner: a task is found
//! only by the owner that created it.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::Value;

use super::{now_ms, TaskStatus};
use crate::jsonrpc::{ErrorObject, RpcErrorCode};
use crate::session::BoxFuture;

/// How a task ended.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum TaskOutcome {
    /// The request's result (a tool error is a result with `isError`).
    Result(Value),
    /// The request's protocol error.
    Error(ErrorObject),
}

/// What a store keeps of one task.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TaskRecord {
    /// The task's id: unguessable, minted by the server.
    pub id: String,
    /// Who may see and cancel it (a principal's or a session's key).
    pub owner: String,
    /// Where it is.
    pub status: TaskStatus,
    /// A human-readable note on the status.
    pub status_message: Option<String>,
    /// When it was created, in milliseconds since the Unix epoch.
    pub created_at: u64,
    /// When it last changed, in milliseconds since the Unix epoch.
    pub last_updated_at: u64,
    /// How long it is kept after its creation, in milliseconds.
    pub ttl_ms: u64,
    /// How often the client should poll, in milliseconds.
    pub poll_interval_ms: u64,
    /// The questions the handler waits on, by key, each a request object
    /// (`{"method": ..., "params": ...}`), in the order asked.
    pub input_requests: Vec<(String, Value)>,
    /// The outcome, once terminal (none for a cancelled task).
    pub outcome: Option<TaskOutcome>,
}

impl TaskRecord {
    /// A new working task of `owner`, created now.
    pub fn new(id: String, owner: String, ttl_ms: u64, poll_interval_ms: u64) -> TaskRecord {
        let now = now_ms();
        TaskRecord {
            id,
            owner,
            status: TaskStatus::Working,
            status_message: None,
            created_at: now,
            last_updated_at: now,
            ttl_ms,
            poll_interval_ms,
            input_requests: Vec::new(),
            outcome: None,
        }
    }

    /// Whether its ttl has run out at `now` (milliseconds since the epoch).
    pub fn expired_at(&self, now: u64) -> bool {
        self.created_at.saturating_add(self.ttl_ms) <= now
    }

    /// Applies `change` unless the task is already terminal; returns whether it changed.
    pub fn apply(&mut self, change: TaskChange, max_result_bytes: usize) -> bool {
        if self.status.is_terminal() {
            return false;
        }
        match change {
            TaskChange::Questions(q) => {
                self.status = if q.is_empty() {
                    TaskStatus::Working
                } else {
                    TaskStatus::InputRequired
                };
                self.input_requests = q;
            }
            TaskChange::Finish(TaskOutcome::Result(v)) => {
                let size = serde_json::to_string(&v).map(|s| s.len()).unwrap_or(0);
                self.input_requests.clear();
                if size > max_result_bytes {
                    self.status = TaskStatus::Failed;
                    self.outcome = Some(TaskOutcome::Error(ErrorObject::new(
                        RpcErrorCode::INTERNAL_ERROR,
                        format!(
                            "Internal error: the task's result of {size} bytes exceeds the store's bound of {max_result_bytes} bytes"
                        ),
                    )));
                } else {
                    self.status = TaskStatus::Completed;
                    self.outcome = Some(TaskOutcome::Result(v));
                }
            }
            TaskChange::Finish(TaskOutcome::Error(e)) => {
                self.input_requests.clear();
                self.status = TaskStatus::Failed;
                self.status_message = Some(e.message.clone());
                self.outcome = Some(TaskOutcome::Error(e));
            }
            TaskChange::Status(message) => {
                self.status_message = Some(message);
            }
            TaskChange::Cancel => {
                self.input_requests.clear();
                self.status = TaskStatus::Cancelled;
                self.status_message = Some("The task was cancelled by its requestor".into());
            }
        }
        self.last_updated_at = now_ms().max(self.last_updated_at);
        true
    }
}

/// A change to a running task.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum TaskChange {
    /// The questions now pending (none: back to working).
    Questions(Vec<(String, Value)>),
    /// The task ended with this outcome.
    Finish(TaskOutcome),
    /// The client cancelled it.
    Cancel,
    /// The handler's note on a running task (its status is unchanged).
    Status(String),
}

/// Why a store refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskStoreError {
    /// The owner already has as many live tasks as the store allows.
    OwnerFull {
        /// The bound.
        limit: usize,
    },
    /// The store holds as many tasks as it allows.
    StoreFull {
        /// The bound.
        limit: usize,
    },
    /// The backing store failed.
    Backend(String),
}

impl std::fmt::Display for TaskStoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TaskStoreError::OwnerFull { limit } => write!(
                f,
                "too many tasks: this client already has {limit} tasks (the limit)"
            ),
            TaskStoreError::StoreFull { limit } => {
                write!(
                    f,
                    "too many tasks: the server holds {limit} tasks (the limit)"
                )
            }
            TaskStoreError::Backend(why) => write!(f, "task store failure: {why}"),
        }
    }
}

impl std::error::Error for TaskStoreError {}

/// Keeps tasks. Implementations must be bounded (tasks per owner, result size) and forget a task
/// once its ttl has run out. Every lookup is by owner and id: a task of another owner is absent.
pub trait TaskStore: Send + Sync + 'static {
    /// Stores a new task (refused when a bound would be exceeded; expired tasks go first).
    fn create(&self, record: TaskRecord) -> BoxFuture<'_, Result<(), TaskStoreError>>;
    /// The task `id` of `owner`, if it exists and has not expired.
    fn get<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<TaskRecord>, TaskStoreError>>;
    /// Applies `change` to the task `id` of `owner` (a terminal task is left as it is); the
    /// record after the change, or `None` when there is no such task.
    fn update<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
        change: TaskChange,
    ) -> BoxFuture<'a, Result<Option<TaskRecord>, TaskStoreError>>;
    /// `owner`'s tasks, oldest first, starting after the task `after` (a cursor), at most `limit`.
    fn list<'a>(
        &'a self,
        owner: &'a str,
        after: Option<&'a str>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<TaskRecord>, TaskStoreError>>;
}

/// The bounds of an [`InMemoryTaskStore`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskLimits {
    /// Live tasks one owner may have (default 64).
    pub per_owner: usize,
    /// Tasks the store holds in all (default 4096).
    pub total: usize,
    /// The largest result kept, in bytes of JSON (default 4 MiB); a larger one fails the task.
    pub max_result_bytes: usize,
}

impl Default for TaskLimits {
    fn default() -> Self {
        TaskLimits {
            per_owner: 64,
            total: 4096,
            max_result_bytes: 4 << 20,
        }
    }
}

impl TaskLimits {
    /// Sets the per-owner bound.
    pub fn per_owner(mut self, n: usize) -> Self {
        self.per_owner = n.max(1);
        self
    }
    /// Sets the total bound.
    pub fn total(mut self, n: usize) -> Self {
        self.total = n.max(1);
        self
    }
    /// Sets the result bound, in bytes.
    pub fn max_result_bytes(mut self, n: usize) -> Self {
        self.max_result_bytes = n;
        self
    }
}

/// The default [`TaskStore`]: a bounded map in this process's memory, swept of expired tasks on
/// every write and skipping them on every read.
#[derive(Debug, Default)]
pub struct InMemoryTaskStore {
    limits: TaskLimits,
    tasks: Mutex<HashMap<String, TaskRecord>>,
}

impl InMemoryTaskStore {
    /// A store with these bounds.
    pub fn new(limits: TaskLimits) -> Self {
        InMemoryTaskStore {
            limits,
            tasks: Mutex::new(HashMap::new()),
        }
    }

    /// How many tasks it holds (expired ones not yet swept included).
    pub fn len(&self) -> usize {
        self.tasks.lock().expect("tasks lock").len()
    }

    /// Whether it holds no task.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn sweep(tasks: &mut HashMap<String, TaskRecord>, now: u64) {
        tasks.retain(|_, t| !t.expired_at(now));
    }

    fn find<'m>(
        tasks: &'m mut HashMap<String, TaskRecord>,
        owner: &str,
        id: &str,
        now: u64,
    ) -> Option<&'m mut TaskRecord> {
        tasks
            .get_mut(id)
            .filter(|t| t.owner == owner && !t.expired_at(now))
    }
}

impl TaskStore for InMemoryTaskStore {
    fn create(&self, record: TaskRecord) -> BoxFuture<'_, Result<(), TaskStoreError>> {
        let r = (|| {
            let mut tasks = self.tasks.lock().expect("tasks lock");
            Self::sweep(&mut tasks, now_ms());
            if tasks.len() >= self.limits.total {
                return Err(TaskStoreError::StoreFull {
                    limit: self.limits.total,
                });
            }
            let owned = tasks.values().filter(|t| t.owner == record.owner).count();
            if owned >= self.limits.per_owner {
                return Err(TaskStoreError::OwnerFull {
                    limit: self.limits.per_owner,
                });
            }
            tasks.insert(record.id.clone(), record);
            Ok(())
        })();
        Box::pin(std::future::ready(r))
    }

    fn get<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<TaskRecord>, TaskStoreError>> {
        let mut tasks = self.tasks.lock().expect("tasks lock");
        let r = Self::find(&mut tasks, owner, id, now_ms()).map(|t| t.clone());
        Box::pin(std::future::ready(Ok(r)))
    }

    fn update<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
        change: TaskChange,
    ) -> BoxFuture<'a, Result<Option<TaskRecord>, TaskStoreError>> {
        let mut tasks = self.tasks.lock().expect("tasks lock");
        let now = now_ms();
        Self::sweep(&mut tasks, now);
        let r = Self::find(&mut tasks, owner, id, now).map(|t| {
            t.apply(change, self.limits.max_result_bytes);
            t.clone()
        });
        Box::pin(std::future::ready(Ok(r)))
    }

    fn list<'a>(
        &'a self,
        owner: &'a str,
        after: Option<&'a str>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<TaskRecord>, TaskStoreError>> {
        let tasks = self.tasks.lock().expect("tasks lock");
        let now = now_ms();
        let mut mine: Vec<&TaskRecord> = tasks
            .values()
            .filter(|t| t.owner == owner && !t.expired_at(now))
            .collect();
        mine.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        let start = match after {
            Some(a) => mine
                .iter()
                .position(|t| t.id == a)
                .map_or(mine.len(), |i| i + 1),
            None => 0,
        };
        let r = mine.into_iter().skip(start).take(limit).cloned().collect();
        Box::pin(std::future::ready(Ok(r)))
    }
}
