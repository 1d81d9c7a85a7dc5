//! Tasks the client runs for the server (2025-11-25): a client that opts in
//! ([`ClientOptions::run_server_tasks`](super::ClientOptions::run_server_tasks)) declares
//! `tasks.requests.sampling.createMessage` and `tasks.requests.elicitation.create` (for the
//! handlers it has) with `tasks.list` and `tasks.cancel`; a task-augmented request of those kinds
//! is answered at once with a `CreateTaskResult` while its handler runs on, and the server's
//! `tasks/get`, `tasks/result`, `tasks/list` and `tasks/cancel` are answered from a bounded store
//! of the connection's own. Each change of status is sent as `notifications/tasks/status`.
//!
//! Without the opt-in (or below 2025-11-25) nothing is declared, `task` in a request is ignored
//! (the request runs as a normal one, as the revision prescribes) and the task methods are
//! unknown. The 2026-07-28 tasks extension has no client-run tasks: its server never asks the
//! client anything but through a result's input requests.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::ClientService;
use crate::jsonrpc::{encode_notification, from_params, ErrorObject, RpcErrorCode};
use crate::modern::raw;
use crate::session::{BoxFuture, Peer};
use crate::tasks::{
    final_response, methods as task_methods, mint_id, wire, InMemoryTaskStore, TaskChange,
    TaskLimits, TaskOutcome, TaskRecord, TaskStore, TaskStoreError, RELATED_TASK_META,
};
use crate::types::methods;

/// The one owner of a connection's store: the server at the other end.
const OWNER: &str = "server";
/// How many tasks one `tasks/list` page shows.
const PAGE: usize = 50;
/// How long a status notification may wait for room in a full outbound queue.
const PATIENCE: Duration = Duration::from_secs(5);

/// How a client runs the server's task-augmented requests: the bounds of the connection's task
/// store, how long a task is kept, and the poll interval it suggests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientTaskOptions {
    /// The bounds: `per_owner` is the most tasks one connection may hold (default 16),
    /// `max_result_bytes` the largest result kept (a larger one fails the task).
    pub limits: TaskLimits,
    /// How long a task is kept when the server asks for no ttl (default 10 minutes).
    pub default_ttl: Duration,
    /// The longest ttl the server may ask for (default 1 hour); a longer one is cut to it.
    pub max_ttl: Duration,
    /// The poll interval suggested to the server (default 500 ms).
    pub poll_interval: Duration,
}

impl Default for ClientTaskOptions {
    fn default() -> Self {
        ClientTaskOptions {
            limits: TaskLimits::default().per_owner(16),
            default_ttl: Duration::from_secs(600),
            max_ttl: Duration::from_secs(3600),
            poll_interval: Duration::from_millis(500),
        }
    }
}

impl ClientTaskOptions {
    /// Sets the most tasks one connection may hold (at least 1).
    pub fn max_tasks(mut self, n: usize) -> Self {
        self.limits = self.limits.per_owner(n);
        self
    }
    /// Sets the largest result kept, in bytes of JSON.
    pub fn max_result_bytes(mut self, n: usize) -> Self {
        self.limits = self.limits.max_result_bytes(n);
        self
    }
    /// Sets the ttl of a task the server asks none for.
    pub fn default_ttl(mut self, ttl: Duration) -> Self {
        self.default_ttl = ttl;
        self
    }
    /// Sets the longest ttl.
    pub fn max_ttl(mut self, ttl: Duration) -> Self {
        self.max_ttl = ttl;
        self
    }
    /// Sets the suggested poll interval (at least 1 ms).
    pub fn poll_interval(mut self, every: Duration) -> Self {
        self.poll_interval = every.max(Duration::from_millis(1));
        self
    }
}

/// A task whose handler runs in this client.
struct Live {
    cancel: CancellationToken,
    done: watch::Receiver<bool>,
}

/// The tasks of one connection.
pub(super) struct Receiver {
    options: ClientTaskOptions,
    store: InMemoryTaskStore,
    live: Mutex<HashMap<String, Live>>,
}

impl Receiver {
    pub(super) fn new(options: ClientTaskOptions) -> Receiver {
        Receiver {
            options,
            store: InMemoryTaskStore::new(options.limits),
            live: Mutex::new(HashMap::new()),
        }
    }

    async fn get(&self, id: &str) -> Result<TaskRecord, ErrorObject> {
        self.store
            .get(OWNER, id)
            .await
            .map_err(store_error)?
            .ok_or_else(|| {
                ErrorObject::invalid_params(format!("Invalid params: unknown task {id:?}"))
                    .with_data(json!({ "taskId": id }))
            })
    }

    /// Applies `change` and tells the server the task's new status.
    async fn change(&self, peer: &Peer, id: &str, change: TaskChange) -> Option<TaskRecord> {
        match self.store.update(OWNER, id, change).await {
            Ok(Some(r)) => {
                let params = raw(&Value::Object(wire(&r, false)));
                peer.notify_detached(
                    encode_notification(task_methods::STATUS, Some(&params)),
                    PATIENCE,
                );
                Some(r)
            }
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(task = %id, error = %e, "task store update failed");
                None
            }
        }
    }
}

fn store_error(e: TaskStoreError) -> ErrorObject {
    match e {
        TaskStoreError::OwnerFull { limit } | TaskStoreError::StoreFull { limit } => {
            ErrorObject::new(
                RpcErrorCode::INVALID_REQUEST,
                format!(
                    "Invalid request: too many tasks: this client already runs {limit} tasks for the server (the limit)"
                ),
            )
        }
        other => ErrorObject::internal(format!("Internal error: {other}")),
    }
}

#[derive(serde::Deserialize)]
struct TaskIdParams {
    #[serde(rename = "taskId")]
    task_id: String,
}

#[derive(serde::Deserialize, Default)]
struct ListParams {
    #[serde(default)]
    cursor: Option<String>,
}

/// What `task` asks for on a request: the ttl, when one is given.
#[derive(serde::Deserialize)]
struct TaskParams {
    #[serde(default)]
    ttl: Option<f64>,
}

/// The request's `task`, if it carries one (malformed: the handler's -32602 decides).
fn task_of(params: Option<&RawValue>) -> Option<TaskParams> {
    #[derive(serde::Deserialize)]
    struct Peek {
        #[serde(default)]
        task: Option<TaskParams>,
    }
    params
        .and_then(|p| serde_json::from_str::<Peek>(p.get()).ok())
        .and_then(|p| p.task)
}

/// The answer to one of the server's requests.
type Answer = BoxFuture<'static, Result<Box<RawValue>, ErrorObject>>;

/// Serves a task method or a task-augmented request; the params back when the request is
/// neither (or the client runs no tasks for its kind) and is answered as usual.
pub(super) fn route(
    service: &Arc<ClientService>,
    receiver: &Arc<Receiver>,
    peer: &Peer,
    method: &str,
    params: Option<Box<RawValue>>,
) -> Result<Answer, Option<Box<RawValue>>> {
    let receiver = receiver.clone();
    let peer = peer.clone();
    match method {
        task_methods::GET => Ok(Box::pin(async move {
            let p: TaskIdParams = from_params(params.as_deref())?;
            let r = receiver.get(&p.task_id).await?;
            Ok(raw(&Value::Object(wire(&r, false))))
        })),
        task_methods::LIST => Ok(Box::pin(async move {
            let p: ListParams = match params.as_deref() {
                Some(_) => from_params(params.as_deref())?,
                None => ListParams::default(),
            };
            if let Some(c) = &p.cursor {
                receiver.get(c).await.map_err(|_| {
                    ErrorObject::invalid_params(format!("Invalid params: unknown cursor {c:?}"))
                })?;
            }
            let tasks = receiver
                .store
                .list(OWNER, p.cursor.as_deref(), PAGE + 1)
                .await
                .map_err(store_error)?;
            let shown: Vec<Value> = tasks
                .iter()
                .take(PAGE)
                .map(|r| Value::Object(wire(r, false)))
                .collect();
            let mut o = Map::new();
            if tasks.len() > PAGE {
                o.insert("nextCursor".into(), json!(tasks[PAGE - 1].id));
            }
            o.insert("tasks".into(), Value::Array(shown));
            Ok(raw(&Value::Object(o)))
        })),
        task_methods::CANCEL => Ok(Box::pin(async move {
            let p: TaskIdParams = from_params(params.as_deref())?;
            let before = receiver.get(&p.task_id).await?;
            if before.status.is_terminal() {
                return Err(ErrorObject::invalid_params(format!(
                    "Invalid params: task {:?} is already {} and cannot be cancelled",
                    p.task_id, before.status
                )));
            }
            let after = receiver
                .change(&peer, &p.task_id, TaskChange::Cancel)
                .await
                .unwrap_or(before);
            if let Some(l) = receiver.live.lock().expect("live lock").get(&p.task_id) {
                l.cancel.cancel();
            }
            Ok(raw(&Value::Object(wire(&after, false))))
        })),
        task_methods::RESULT => Ok(Box::pin(async move {
            let p: TaskIdParams = from_params(params.as_deref())?;
            let mut r = receiver.get(&p.task_id).await?;
            if !r.status.is_terminal() {
                let done = receiver
                    .live
                    .lock()
                    .expect("live lock")
                    .get(&p.task_id)
                    .map(|l| l.done.clone());
                if let Some(mut done) = done {
                    let _ = done.wait_for(|d| *d).await;
                }
                r = receiver.get(&p.task_id).await?;
            }
            final_response(r).map(|v| raw(&v))
        })),
        methods::SAMPLING_CREATE_MESSAGE | methods::ELICITATION_CREATE => {
            let declared = match method {
                methods::SAMPLING_CREATE_MESSAGE => service.options.sampling.is_some(),
                _ => service.options.elicitation.is_some(),
            };
            let Some(task) = task_of(params.as_deref()).filter(|_| declared) else {
                return Err(params);
            };
            let handler = service.answer(method.to_owned(), params);
            Ok(Box::pin(start(receiver, peer, task, handler)))
        }
        _ => Err(params),
    }
}

/// Creates the task, starts `handler` on its own and answers the `CreateTaskResult`.
async fn start(
    receiver: Arc<Receiver>,
    peer: Peer,
    task: TaskParams,
    handler: Answer,
) -> Result<Box<RawValue>, ErrorObject> {
    let o = &receiver.options;
    let ttl = task
        .ttl
        .filter(|t| t.is_finite() && *t >= 0.0)
        .map_or(o.default_ttl.as_millis() as u64, |t| t as u64)
        .min(o.max_ttl.as_millis() as u64)
        .max(1);
    let record = TaskRecord::new(
        mint_id(),
        OWNER.into(),
        ttl,
        o.poll_interval.as_millis() as u64,
    );
    receiver
        .store
        .create(record.clone())
        .await
        .map_err(store_error)?;
    let id = record.id.clone();
    let cancel = CancellationToken::new();
    let (done_tx, done) = watch::channel(false);
    receiver.live.lock().expect("live lock").insert(
        id.clone(),
        Live {
            cancel: cancel.clone(),
            done,
        },
    );
    tokio::spawn({
        let receiver = receiver.clone();
        let peer = peer.clone();
        async move {
            // Cancelled (or the connection gone): the handler's future is dropped at once.
            let outcome = tokio::select! {
                r = handler => Some(match r {
                    Ok(result) => match serde_json::from_str::<Value>(result.get()) {
                        Ok(v) => TaskOutcome::Result(v),
                        Err(e) => TaskOutcome::Error(ErrorObject::internal(format!("Internal error: {e}"))),
                    },
                    Err(e) => TaskOutcome::Error(e),
                }),
                _ = cancel.cancelled() => None,
                _ = peer.closed() => None,
            };
            if let Some(outcome) = outcome {
                receiver
                    .change(&peer, &id, TaskChange::Finish(outcome))
                    .await;
            }
            receiver.live.lock().expect("live lock").remove(&id);
            let _ = done_tx.send(true);
        }
    });
    let mut meta = Map::new();
    meta.insert(RELATED_TASK_META.into(), json!({ "taskId": record.id }));
    Ok(raw(&json!({
        "task": Value::Object(wire(&record, false)),
        "_meta": meta,
    })))
}
