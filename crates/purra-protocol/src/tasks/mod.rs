//! Tasks: requests that outlive their response. A task-augmented `tools/call` is answered at once
//! with a task; the handler keeps running, and the client polls (`tasks/get`), answers the
//! handler's questions, fetches the result and may cancel.
//!
//! Two wire forms share one machinery and one [`TaskStore`]: the 2025-11-25 form (the client
//! asks with `task` on `tools/call`; `tasks/get`, `tasks/result`, `tasks/list`, `tasks/cancel`,
//! `notifications/tasks/status`) and the `io.modelcontextprotocol/tasks` extension of 2026-07-28
//! (the server decides; `tasks/get` inlines the result, `tasks/update` carries answers,
//! `tasks/cancel`). Which one a request gets follows its revision.
//!
//! Tasks are scoped to an owner: the authenticated principal when there is one, else the session
//! (or stream connection) that created them; one owner never sees or cancels another's tasks.

mod store;

pub use store::{
    InMemoryTaskStore, TaskChange, TaskLimits, TaskOutcome, TaskRecord, TaskStore, TaskStoreError,
};

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::jsonrpc::{ErrorObject, RpcErrorCode};

/// Where a task is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TaskStatus {
    /// The handler is running.
    Working,
    /// The handler waits for the client's answer to a question.
    InputRequired,
    /// The handler finished with a result (possibly a tool error, `isError`).
    Completed,
    /// The request failed with a protocol error.
    Failed,
    /// The client cancelled the task.
    Cancelled,
}

impl TaskStatus {
    /// Whether the task is over (completed, failed or cancelled).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
        )
    }
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Working => "working",
            TaskStatus::InputRequired => "input_required",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }
}

impl std::fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The task methods and notifications.
pub mod methods {
    /// `tasks/get` (both forms).
    pub const GET: &str = "tasks/get";
    /// `tasks/result` (2025-11-25).
    pub const RESULT: &str = "tasks/result";
    /// `tasks/list` (2025-11-25).
    pub const LIST: &str = "tasks/list";
    /// `tasks/cancel` (both forms).
    pub const CANCEL: &str = "tasks/cancel";
    /// `tasks/update` (2026-07-28 extension): answers to a task's questions.
    pub const UPDATE: &str = "tasks/update";
    /// `notifications/tasks/status` (2025-11-25).
    pub const STATUS: &str = "notifications/tasks/status";
    /// `notifications/tasks` (2026-07-28 extension): a followed task changed, on a
    /// `subscriptions/listen` stream.
    pub const NOTIFICATION: &str = "notifications/tasks";
}

/// The `_meta` key that ties a message to its task (2025-11-25).
pub const RELATED_TASK_META: &str = "io.modelcontextprotocol/related-task";

/// Milliseconds since the Unix epoch, as RFC 3339 UTC with milliseconds
/// (`2026-07-28T12:00:00.000Z`).
pub fn rfc3339(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil_from_days.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

/// Now, in milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A fresh unguessable task id (128 random bits, hex).
#[cfg(any(feature = "server", feature = "client"))]
pub(crate) fn mint_id() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the OS random source");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The task as the wire shows it, without result, error or questions: `ttl`/`pollInterval` in
/// the 2025-11-25 form, `ttlMs`/`pollIntervalMs` in the extension's (`extension`).
#[cfg_attr(not(any(feature = "server", feature = "client")), allow(dead_code))]
pub(crate) fn wire(r: &TaskRecord, extension: bool) -> Map<String, Value> {
    let mut o = Map::new();
    o.insert("taskId".into(), Value::String(r.id.clone()));
    o.insert("status".into(), Value::String(r.status.as_str().into()));
    if let Some(m) = &r.status_message {
        o.insert("statusMessage".into(), Value::String(m.clone()));
    }
    o.insert("createdAt".into(), Value::String(rfc3339(r.created_at)));
    o.insert(
        "lastUpdatedAt".into(),
        Value::String(rfc3339(r.last_updated_at)),
    );
    let (ttl, poll) = if extension {
        ("ttlMs", "pollIntervalMs")
    } else {
        ("ttl", "pollInterval")
    };
    o.insert(ttl.into(), json!(r.ttl_ms));
    o.insert(poll.into(), json!(r.poll_interval_ms));
    o
}

/// The 2025-11-25 `tasks/result` answer of a terminal task: what the request would have
/// answered (its result, with the task named in `_meta`, or its error); a cancelled task is an
/// invalid request naming its status.
#[cfg_attr(not(any(feature = "server", feature = "client")), allow(dead_code))]
pub(crate) fn final_response(r: TaskRecord) -> Result<Value, ErrorObject> {
    let related = json!({ "taskId": r.id });
    match r.outcome {
        Some(TaskOutcome::Result(Value::Object(mut o))) => {
            let meta = o
                .entry("_meta")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(m) = meta {
                m.insert(RELATED_TASK_META.into(), related);
            }
            Ok(Value::Object(o))
        }
        Some(TaskOutcome::Result(other)) => Ok(other),
        Some(TaskOutcome::Error(e)) => Err(e),
        None => Err(ErrorObject::new(
            RpcErrorCode::INVALID_REQUEST,
            format!("Invalid request: task {:?} was cancelled", r.id),
        )
        .with_data(json!({ "taskId": r.id, "status": r.status.as_str() }))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(rfc3339(1_785_240_000_000), "2026-07-28T12:00:00.000Z");
    }
}

/// A task as a server reports it, in either wire form.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Task {
    /// The task's id.
    pub id: String,
    /// Where it is.
    pub status: TaskStatus,
    /// The server's note on the status.
    pub status_message: Option<String>,
    /// When it was created (RFC 3339), as the server wrote it.
    pub created_at: Option<String>,
    /// When it last changed (RFC 3339), as the server wrote it.
    pub last_updated_at: Option<String>,
    /// How long the server keeps it, in milliseconds (`None`: unlimited).
    pub ttl_ms: Option<u64>,
    /// How often the server would like to be polled, in milliseconds.
    pub poll_interval_ms: Option<u64>,
}

impl Task {
    /// Reads a task object of either form (`ttl`/`pollInterval` of 2025-11-25, `ttlMs`/
    /// `pollIntervalMs` of the extension); what is missing or malformed is named.
    pub fn from_wire(v: &serde_json::Value) -> Result<Task, String> {
        let id = v
            .get("taskId")
            .and_then(serde_json::Value::as_str)
            .ok_or("a task needs a string taskId")?
            .to_owned();
        let status = v
            .get("status")
            .cloned()
            .ok_or("a task needs a status")
            .and_then(|s| {
                serde_json::from_value::<TaskStatus>(s).map_err(|_| "unknown task status")
            })?;
        let text = |k: &str| {
            v.get(k)
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
        };
        let ms = |a: &str, b: &str| {
            v.get(a)
                .or_else(|| v.get(b))
                .and_then(serde_json::Value::as_f64)
                .filter(|n| *n >= 0.0)
                .map(|n| n as u64)
        };
        Ok(Task {
            id,
            status,
            status_message: text("statusMessage"),
            created_at: text("createdAt"),
            last_updated_at: text("lastUpdatedAt"),
            ttl_ms: ms("ttlMs", "ttl"),
            poll_interval_ms: ms("pollIntervalMs", "pollInterval"),
        })
    }
}
