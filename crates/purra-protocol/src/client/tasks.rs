//! Tasks from the client: task-augmented `tools/call`, `tasks/get`, `tasks/result`, `tasks/list`,
//! `tasks/cancel`, and [`Connection::run_tool_task`], which drives one task to its end polling at
//! the server's interval. The 2025-11-25 form (a handshake session at that revision or later);
//! the server's requests made in the task's name (elicitation, sampling) reach the connection's
//! handlers as any other request does, while `tasks/result` waits.

use std::time::Duration;

use serde_json::{json, Map, Value};

use super::Connection;
use crate::error::Error;
use crate::session::RequestOptions;
use crate::tasks::{methods as task_methods, Task, TaskStatus};
use crate::types::{methods, CallToolResult};

/// The poll interval used when a server names none.
const DEFAULT_POLL: Duration = Duration::from_secs(1);
/// Polling never runs faster than this, whatever the server asks.
const MIN_POLL: Duration = Duration::from_millis(50);
/// Nor slower than this.
const MAX_POLL: Duration = Duration::from_secs(30);

fn read_task(v: &Value) -> Result<Task, Error> {
    Task::from_wire(v).map_err(|why| Error::Protocol(format!("malformed task: {why}")))
}

impl Connection {
    fn check_task_form(&self) -> Result<(), Error> {
        if self.is_modern() {
            return Err(Error::Protocol(
                "this connection speaks 2026-07-28, where the server creates tasks (the io.modelcontextprotocol/tasks extension); the client's task methods speak the 2025-11-25 form"
                    .into(),
            ));
        }
        if self.protocol_version().as_str() < crate::ProtocolVersion::V2025_11_25.as_str() {
            return Err(Error::Protocol(format!(
                "tasks need protocol revision 2025-11-25 or later; this session negotiated {}",
                self.protocol_version().as_str()
            )));
        }
        Ok(())
    }

    async fn task_request(&self, method: &str, params: Value) -> Result<Value, Error> {
        self.check_task_form()?;
        let raw = self
            .request_raw(method, params, RequestOptions::default())
            .await?;
        serde_json::from_str(raw.get()).map_err(|e| Error::Protocol(format!("{method}: {e}")))
    }

    /// Whether the server accepts task-augmented `tools/call` (its `tasks.requests.tools.call`).
    pub fn supports_tool_tasks(&self) -> bool {
        self.server_capabilities()
            .tasks
            .as_ref()
            .and_then(|t| t.get("requests"))
            .and_then(|r| r.get("tools"))
            .and_then(|t| t.get("call"))
            .is_some()
    }

    /// Calls a tool as a task (`tools/call` with `task`, kept `ttl` when given): the task the
    /// server created, at once; its handler runs on. A server that does not accept
    /// task-augmented calls is refused here, before anything is sent.
    pub async fn call_tool_as_task(
        &self,
        name: &str,
        arguments: Value,
        ttl: Option<Duration>,
    ) -> Result<Task, Error> {
        self.check_task_form()?;
        if !self.supports_tool_tasks() {
            return Err(Error::Protocol(
                "the server does not accept task-augmented tools/call (no tasks.requests.tools.call capability)"
                    .into(),
            ));
        }
        let mut task = Map::new();
        if let Some(t) = ttl {
            task.insert("ttl".into(), json!(t.as_millis() as u64));
        }
        let mut params = json!({ "name": name, "task": task });
        match arguments {
            Value::Null => {}
            Value::Object(o) => {
                params["arguments"] = Value::Object(o);
            }
            _ => {
                return Err(Error::Protocol(
                    "tool arguments must be a JSON object".into(),
                ))
            }
        }
        let v = self.task_request(methods::TOOLS_CALL, params).await?;
        let Some(t) = v.get("task") else {
            return Err(Error::Protocol(
                "the server answered a task-augmented tools/call without a task".into(),
            ));
        };
        read_task(t)
    }

    /// The task `id` now (`tasks/get`).
    pub async fn get_task(&self, id: &str) -> Result<Task, Error> {
        let v = self
            .task_request(task_methods::GET, json!({ "taskId": id }))
            .await?;
        read_task(&v)
    }

    /// Cancels the task `id` (`tasks/cancel`); the task as the server left it.
    pub async fn cancel_task(&self, id: &str) -> Result<Task, Error> {
        let v = self
            .task_request(task_methods::CANCEL, json!({ "taskId": id }))
            .await?;
        read_task(&v)
    }

    /// One page of this client's tasks (`tasks/list`) and the cursor of the next.
    pub async fn list_tasks(
        &self,
        cursor: Option<&str>,
    ) -> Result<(Vec<Task>, Option<String>), Error> {
        let params = match cursor {
            Some(c) => json!({ "cursor": c }),
            None => json!({}),
        };
        let v = self.task_request(task_methods::LIST, params).await?;
        let tasks = v
            .get("tasks")
            .and_then(Value::as_array)
            .ok_or_else(|| Error::Protocol("tasks/list answered without tasks".into()))?
            .iter()
            .map(read_task)
            .collect::<Result<Vec<_>, _>>()?;
        let next = v
            .get("nextCursor")
            .and_then(Value::as_str)
            .map(str::to_owned);
        Ok((tasks, next))
    }

    /// The result of the tool task `id` (`tasks/result`), waiting for its end; the server's
    /// requests in its name are answered meanwhile by the connection's handlers.
    pub async fn task_result(&self, id: &str) -> Result<CallToolResult, Error> {
        self.check_task_form()?;
        let raw = self
            .request_raw(
                task_methods::RESULT,
                json!({ "taskId": id }),
                RequestOptions::default().timeout(Duration::from_secs(24 * 3600)),
            )
            .await?;
        serde_json::from_str(raw.get())
            .map_err(|e| Error::Protocol(format!("tasks/result is not a tool result: {e}")))
    }

    /// Runs the tool `name` as a task to its end: creates it, polls `tasks/get` at the server's
    /// interval (`on_status` sees every status read), and returns its result (`tasks/result`,
    /// called at once when the task needs input, so the server's questions reach this
    /// connection's handlers). A failed or cancelled task is an error naming its status.
    pub async fn run_tool_task(
        &self,
        name: &str,
        arguments: Value,
        ttl: Option<Duration>,
        mut on_status: impl FnMut(&Task),
    ) -> Result<CallToolResult, Error> {
        let mut task = self.call_tool_as_task(name, arguments, ttl).await?;
        on_status(&task);
        loop {
            match task.status {
                TaskStatus::Working => {}
                TaskStatus::Completed | TaskStatus::InputRequired | TaskStatus::Failed => {
                    return self.task_result(&task.id).await;
                }
                _ => {
                    return Err(Error::Protocol(format!(
                        "task {} ended {}{}",
                        task.id,
                        task.status,
                        task.status_message
                            .as_deref()
                            .map(|m| format!(": {m}"))
                            .unwrap_or_default()
                    )))
                }
            }
            let every = task
                .poll_interval_ms
                .map(Duration::from_millis)
                .unwrap_or(DEFAULT_POLL)
                .clamp(MIN_POLL, MAX_POLL);
            tokio::time::sleep(every).await;
            let now = self.get_task(&task.id).await?;
            if now != task {
                on_status(&now);
            }
            task = now;
        }
    }
}
