//! Tasks from the client: task-augmented `tools/call`, `tasks/get`, `tasks/result`, `tasks/list`,
//! `tasks/cancel`, and [`Connection::run_tool_task`], which drives one task to its end polling at
//! the server's interval, in the connection's form.
//!
//! 2025-11-25 (a handshake session at that revision or later): the client asks with `task`; the
//! server's requests made in the task's name (elicitation, sampling) reach the connection's
//! handlers as any other request does, while `tasks/result` waits.
//! 2026-07-28: the task calls declare the `io.modelcontextprotocol/tasks` extension on the request
//! and the server decides; a task's questions (`inputRequests` on `tasks/get`) are answered with
//! the same handlers through `tasks/update`; the result is inlined in `tasks/get`; there is no
//! `tasks/list`; [`Connection::follow_tasks`] opens a `subscriptions/listen` stream on which the
//! server pushes `notifications/tasks` for the tasks named.

use std::time::Duration;

use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use super::{CacheMode, Connection};
use crate::error::Error;
use crate::jsonrpc::ErrorObject;
use crate::modern::meta;
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

/// A `subscriptions/listen` stream following tasks (2026-07-28); ended by
/// [`end`](Self::end) or by dropping it.
#[derive(Debug)]
pub struct TaskSubscription {
    tasks: Vec<String>,
    stop: tokio_util::sync::CancellationToken,
}

impl TaskSubscription {
    /// The tasks the server agreed to send notifications for (those it knows of this client).
    pub fn tasks(&self) -> &[String] {
        &self.tasks
    }

    /// Ends the stream.
    pub fn end(self) {}
}

impl Drop for TaskSubscription {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Connection {
    /// Follows tasks without polling (the 2026-07-28 tasks extension): opens a
    /// `subscriptions/listen` stream asking for `notifications/tasks` of `ids`, declaring the
    /// extension, and returns once the server acknowledged it. Each notification carries the task
    /// as `tasks/get` shows it (with its result or error once it ended) and reaches the listeners
    /// of [`on`](Self::on) for [`methods::NOTIFICATION`](crate::tasks::methods::NOTIFICATION).
    /// A handshake session has no listen streams: its server sends `notifications/tasks/status`
    /// unasked.
    pub async fn follow_tasks(&self, ids: &[&str]) -> Result<TaskSubscription, Error> {
        let Some(m) = self.service.modern.get() else {
            return Err(Error::Protocol(
                "task notifications over subscriptions/listen are a 2026-07-28 feature; this connection speaks a handshake revision"
                    .into(),
            ));
        };
        let filter = crate::modern::SubscriptionFilter {
            task_ids: Some(ids.iter().map(|s| (*s).to_owned()).collect()),
            ..Default::default()
        };
        let (stop, ack) = super::modern::subscribe(
            self.service.clone(),
            m.clone(),
            self.peer.clone(),
            filter,
            self.service.options.engine.request_timeout,
        )
        .await?;
        Ok(TaskSubscription {
            tasks: ack.task_ids.unwrap_or_default(),
            stop,
        })
    }

    fn check_task_form(&self) -> Result<(), Error> {
        if self.is_modern() {
            return Ok(());
        }
        if self.protocol_version().as_str() < crate::ProtocolVersion::V2025_11_25.as_str() {
            return Err(Error::Protocol(format!(
                "tasks need protocol revision 2025-11-25 or later; this session negotiated {}",
                self.protocol_version().as_str()
            )));
        }
        Ok(())
    }

    /// A 2026-07-28 request declaring the tasks extension, its `input_required` rounds driven.
    async fn extension_request(&self, method: &str, mut params: Value) -> Result<Value, Error> {
        let Some(m) = self.service.modern.get() else {
            return Err(Error::Protocol("not a 2026-07-28 connection".into()));
        };
        params["_meta"] = json!({
            meta::CLIENT_CAPABILITIES: { "extensions": { crate::extensions::TASKS: {} } }
        });
        let raw = super::modern::send(
            &self.service,
            m,
            &self.peer,
            method,
            &params,
            RequestOptions::default(),
            CacheMode::Bypass,
            true,
        )
        .await?;
        serde_json::from_str(raw.get()).map_err(|e| Error::Protocol(format!("{method}: {e}")))
    }

    /// Answers a 2026-07-28 task's questions with the connection's handlers (`tasks/update`).
    async fn answer_task(&self, id: &str, requests: &Map<String, Value>) -> Result<(), Error> {
        let answers = super::modern::answer_all(&self.service, requests.clone()).await?;
        self.extension_request(
            task_methods::UPDATE,
            json!({ "taskId": id, "inputResponses": answers }),
        )
        .await
        .map(drop)
    }

    /// The tool result inlined in a terminal 2026-07-28 task, or its error.
    fn inlined_result(v: &Value, task: &Task) -> Result<CallToolResult, Error> {
        match task.status {
            TaskStatus::Completed => {
                let r = v
                    .get("result")
                    .cloned()
                    .ok_or_else(|| Error::Protocol("a completed task without its result".into()))?;
                serde_json::from_value(r).map_err(|e| {
                    Error::Protocol(format!("the task's result is not a tool result: {e}"))
                })
            }
            TaskStatus::Failed => match v
                .get("error")
                .cloned()
                .map(serde_json::from_value::<ErrorObject>)
            {
                Some(Ok(e)) => Err(Error::Rpc(e)),
                _ => Err(Error::Protocol(format!("task {} failed", task.id))),
            },
            other => Err(Error::Protocol(format!(
                "task {} ended {other}{}",
                task.id,
                task.status_message
                    .as_deref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default()
            ))),
        }
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
        self.call_tool_as_task_keyed(name, arguments, ttl, None)
            .await
    }

    /// [`call_tool_as_task`](Self::call_tool_as_task) carrying the idempotency key `key` when
    /// given, as [`call_tool_idempotent`](Self::call_tool_idempotent) does (see
    /// [`crate::idempotency`]).
    pub async fn call_tool_as_task_keyed(
        &self,
        name: &str,
        arguments: Value,
        ttl: Option<Duration>,
        key: Option<&str>,
    ) -> Result<Task, Error> {
        self.check_task_form()?;
        if key.is_some_and(|k| k.is_empty() || k.len() > crate::idempotency::MAX_KEY_BYTES) {
            return Err(Error::Protocol(format!(
                "an idempotency key is 1 to {} bytes long",
                crate::idempotency::MAX_KEY_BYTES
            )));
        }
        if !self.is_modern() && !self.supports_tool_tasks() {
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
        if let Some(key) = key {
            params["_meta"] = json!({ crate::idempotency::META_KEY: key });
            if self.supports_idempotency() {
                params["idempotencyKey"] = json!(key);
            }
        }
        if self.is_modern() {
            let v = self.extension_request(methods::TOOLS_CALL, params).await?;
            if v.get("resultType").and_then(Value::as_str) != Some("task") {
                return Err(Error::Protocol(format!(
                    "the server ran {name} at once instead of as a task (use run_tool_task, which takes either)"
                )));
            }
            return read_task(&v);
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
        if self.is_modern() {
            let v = self
                .extension_request(task_methods::GET, json!({ "taskId": id }))
                .await?;
            return read_task(&v);
        }
        let v = self
            .task_request(task_methods::GET, json!({ "taskId": id }))
            .await?;
        read_task(&v)
    }

    /// Cancels the task `id` (`tasks/cancel`); the task as the server left it.
    pub async fn cancel_task(&self, id: &str) -> Result<Task, Error> {
        if self.is_modern() {
            // The extension acknowledges with an empty result: read the task after.
            self.extension_request(task_methods::CANCEL, json!({ "taskId": id }))
                .await?;
            return self.get_task(id).await;
        }
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
        if self.is_modern() {
            return Err(Error::Protocol(
                "the 2026-07-28 tasks extension has no tasks/list".into(),
            ));
        }
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
        if self.is_modern() {
            return self.follow_extension_task(id, None, &mut |_| {}).await;
        }
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

    /// The raw result of the tool task `id`, for callers that decode result text themselves
    /// (under their own bounds, with their own JSON rules). 2025-11-25: `tasks/result` under
    /// `options` (it waits while the task runs). 2026-07-28: one `tasks/get`, whose inlined
    /// result is returned once the task completed. A failed task is its JSON-RPC error
    /// ([`Error::Rpc`]); a task still running (2026-07-28) or cancelled is [`Error::Protocol`].
    pub async fn task_result_raw(
        &self,
        id: &str,
        options: RequestOptions,
    ) -> Result<Box<RawValue>, Error> {
        self.check_task_form()?;
        if !self.is_modern() {
            return self
                .request_raw(task_methods::RESULT, json!({ "taskId": id }), options)
                .await;
        }
        let mut params = json!({ "taskId": id });
        params["_meta"] = json!({
            meta::CLIENT_CAPABILITIES: { "extensions": { crate::extensions::TASKS: {} } }
        });
        let raw = self.request_raw(task_methods::GET, params, options).await?;
        #[derive(serde::Deserialize)]
        struct Inlined<'a> {
            #[serde(borrow, default)]
            result: Option<&'a RawValue>,
            #[serde(default)]
            error: Option<ErrorObject>,
        }
        let inlined: Inlined<'_> = serde_json::from_str(raw.get())
            .map_err(|e| Error::Protocol(format!("tasks/get: {e}")))?;
        let v: Value = serde_json::from_str(raw.get())
            .map_err(|e| Error::Protocol(format!("tasks/get: {e}")))?;
        let task = read_task(&v)?;
        match (task.status, inlined.result, inlined.error) {
            (TaskStatus::Completed, Some(r), _) => Ok(r.to_owned()),
            (TaskStatus::Completed, None, _) => Err(Error::Protocol(
                "a completed task without its result".into(),
            )),
            (TaskStatus::Failed, _, Some(e)) => Err(Error::Rpc(e)),
            (status, _, _) => Err(Error::Protocol(format!(
                "task {} is {status}, not completed",
                task.id
            ))),
        }
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
        if self.is_modern() {
            let mut params = json!({ "name": name });
            match arguments {
                Value::Null => {}
                Value::Object(o) => params["arguments"] = Value::Object(o),
                _ => {
                    return Err(Error::Protocol(
                        "tool arguments must be a JSON object".into(),
                    ))
                }
            }
            let v = self.extension_request(methods::TOOLS_CALL, params).await?;
            if v.get("resultType").and_then(Value::as_str) != Some("task") {
                // The server answered at once: that is the result.
                return serde_json::from_value(v)
                    .map_err(|e| Error::Protocol(format!("tools/call: {e}")));
            }
            let task = read_task(&v)?;
            on_status(&task);
            let id = task.id.clone();
            return self
                .follow_extension_task(&id, Some(task), &mut on_status)
                .await;
        }
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

    /// Polls a 2026-07-28 task to its end at the server's interval, answering its questions.
    async fn follow_extension_task(
        &self,
        id: &str,
        mut last: Option<Task>,
        on_status: &mut dyn FnMut(&Task),
    ) -> Result<CallToolResult, Error> {
        let mut answered: Vec<String> = Vec::new();
        loop {
            let v = self
                .extension_request(task_methods::GET, json!({ "taskId": id }))
                .await?;
            let task = read_task(&v)?;
            if last.as_ref() != Some(&task) {
                on_status(&task);
            }
            if task.status.is_terminal() {
                return Self::inlined_result(&v, &task);
            }
            if let (TaskStatus::InputRequired, Some(Value::Object(q))) =
                (task.status, v.get("inputRequests"))
            {
                // Each question once: a key already answered is the server's to clear.
                let fresh: Map<String, Value> = q
                    .iter()
                    .filter(|(k, _)| !answered.contains(k))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                if !fresh.is_empty() {
                    self.answer_task(id, &fresh).await?;
                    answered.extend(fresh.keys().cloned());
                    last = Some(task);
                    continue;
                }
            }
            let every = task
                .poll_interval_ms
                .map(Duration::from_millis)
                .unwrap_or(DEFAULT_POLL)
                .clamp(MIN_POLL, MAX_POLL);
            last = Some(task);
            tokio::time::sleep(every).await;
        }
    }
}
