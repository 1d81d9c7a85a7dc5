//! Tasks the client runs for the server (2025-11-25): the capability declared only when opted
//! in, a task-augmented `elicitation/create` or `sampling/createMessage` answered at once with a
//! task while the handler runs on, the server's `tasks/get`, `tasks/result`, `tasks/list`,
//! `tasks/cancel`, status notifications, the store's bounds, and a request that runs normally when
//! no task was offered. The server here is the test, speaking bytes on an in-memory transport;
//! `client_tasks_everything.rs` runs the reference server's async tools.

use std::sync::Arc;
use std::time::Duration;

use purra_protocol::memory::{self, RawEnd};
use purra_protocol::types::{CreateMessageResult, ElicitResult, JsonObject};
use purra_protocol::{Client, ClientOptions, ClientTaskOptions, Connection};
use serde_json::{json, Value};
use tokio::sync::{mpsc, Notify};

/// The server's end: reads the client's frames, keeping notifications aside.
struct Server {
    raw: RawEnd,
    notes: Vec<Value>,
}

impl Server {
    async fn next(&mut self) -> Value {
        let frame = tokio::time::timeout(Duration::from_secs(5), self.raw.recv())
            .await
            .expect("a frame within 5 s")
            .expect("open");
        serde_json::from_str(&frame).expect("JSON")
    }

    /// Sends a request and returns the client's response to it (notifications are kept).
    async fn ask(&mut self, id: u64, method: &str, params: Value) -> Value {
        let frame = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.raw.send(frame.to_string()).await;
        loop {
            let v = self.next().await;
            if v.get("id") == Some(&json!(id)) {
                return v;
            }
            assert!(v.get("id").is_none(), "an unexpected frame: {v}");
            self.notes.push(v);
        }
    }

    /// Waits for the next notification of `method` (earlier ones kept are taken first).
    async fn note(&mut self, method: &str) -> Value {
        if let Some(i) = self.notes.iter().position(|n| n["method"] == method) {
            return self.notes.remove(i);
        }
        loop {
            let v = self.next().await;
            if v["method"] == method {
                return v;
            }
            self.notes.push(v);
        }
    }
}

/// Connects `options` to the test's server, which answers `initialize` with `version`; returns
/// the connection, the server's end, and the `initialize` params the client sent.
async fn connect(options: ClientOptions, version: &str) -> (Connection, Server, Value) {
    let (t, raw) = memory::raw();
    let client = tokio::spawn(Client::connect(t, options));
    let mut server = Server {
        raw,
        notes: Vec::new(),
    };
    let init = server.next().await;
    assert_eq!(init["method"], "initialize", "{init}");
    let reply = json!({"jsonrpc": "2.0", "id": init["id"], "result": {
        "protocolVersion": version,
        "capabilities": {},
        "serverInfo": {"name": "s", "version": "1"},
    }});
    server.raw.send(reply.to_string()).await;
    let initialized = server.next().await;
    assert_eq!(initialized["method"], "notifications/initialized");
    let conn = client.await.expect("join").expect("connected");
    (conn, server, init["params"].clone())
}

/// The task object without its timestamps (checked to be RFC 3339 UTC).
fn untimed(task: &Value) -> Value {
    let mut t = task.clone();
    for k in ["createdAt", "lastUpdatedAt"] {
        let s = t[k].as_str().unwrap_or_else(|| panic!("{k} in {task}"));
        assert!(s.len() == 24 && s.ends_with('Z'), "{k}: {s}");
        t.as_object_mut().unwrap().remove(k);
    }
    t
}

fn elicit_params(task: Value) -> Value {
    json!({
        "message": "Name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
        "task": task,
    })
}

fn sampling_params(task: Value) -> Value {
    json!({
        "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
        "maxTokens": 10,
        "task": task,
    })
}

fn accept_ada() -> ElicitResult {
    let mut content = JsonObject::new();
    content.insert("name".into(), json!("Ada"));
    ElicitResult::accept(content)
}

#[tokio::test]
async fn an_elicitation_runs_as_a_task_the_server_polls_lists_and_reads() {
    let gate = Arc::new(Notify::new());
    let options = ClientOptions::default()
        .on_elicitation(false, {
            let gate = gate.clone();
            move |_| {
                let gate = gate.clone();
                async move {
                    gate.notified().await;
                    Ok(accept_ada())
                }
            }
        })
        .run_server_tasks(ClientTaskOptions::default());
    let (_conn, mut s, init) = connect(options, "2025-11-25").await;
    assert_eq!(
        init["capabilities"],
        json!({
            "elicitation": {"form": {}},
            "tasks": {"list": {}, "cancel": {}, "requests": {"elicitation": {"create": {}}}},
        })
    );

    let created = s
        .ask(
            1,
            "elicitation/create",
            elicit_params(json!({"ttl": 60000})),
        )
        .await;
    let task = &created["result"]["task"];
    let id = task["taskId"].as_str().expect("a task id").to_owned();
    assert_eq!(id.len(), 32, "{id}");
    assert_eq!(
        untimed(task),
        json!({"taskId": id, "status": "working", "ttl": 60000, "pollInterval": 500})
    );
    assert_eq!(
        created["result"]["_meta"],
        json!({"io.modelcontextprotocol/related-task": {"taskId": id}})
    );

    let got = s.ask(2, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(
        untimed(&got["result"]),
        json!({"taskId": id, "status": "working", "ttl": 60000, "pollInterval": 500})
    );
    let listed = s.ask(3, "tasks/list", json!({})).await;
    assert_eq!(listed["result"]["tasks"].as_array().map(Vec::len), Some(1));
    assert_eq!(listed["result"]["tasks"][0]["taskId"], json!(id));
    assert!(listed["result"].get("nextCursor").is_none(), "{listed}");

    // tasks/result waits for the handler: release it, the answer follows.
    gate.notify_one();
    let result = s.ask(4, "tasks/result", json!({"taskId": id})).await;
    assert_eq!(
        result["result"],
        json!({
            "action": "accept",
            "content": {"name": "Ada"},
            "_meta": {"io.modelcontextprotocol/related-task": {"taskId": id}},
        })
    );
    let status = s.note("notifications/tasks/status").await;
    assert_eq!(
        untimed(&status["params"]),
        json!({"taskId": id, "status": "completed", "ttl": 60000, "pollInterval": 500})
    );
    let done = s.ask(5, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(done["result"]["status"], "completed");
    // A finished task cannot be cancelled (-32602), and an unknown one is -32602 too.
    let late = s.ask(6, "tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(late["error"]["code"], -32602, "{late}");
    let unknown = s.ask(7, "tasks/get", json!({"taskId": "nope"})).await;
    assert_eq!(
        unknown["error"],
        json!({"code": -32602, "message": "Invalid params: unknown task \"nope\"", "data": {"taskId": "nope"}})
    );
}

/// Sends `tx` a message when dropped: the handler's future saw its end.
struct Dropped(mpsc::UnboundedSender<&'static str>);

impl Drop for Dropped {
    fn drop(&mut self) {
        let _ = self.0.send("dropped");
    }
}

#[tokio::test]
async fn a_cancelled_sampling_task_drops_its_handler() {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let options = ClientOptions::default()
        .on_sampling(move |_| {
            let guard = Dropped(tx.clone());
            async move {
                let _guard = guard;
                std::future::pending::<()>().await;
                Ok(CreateMessageResult::text("m", "never"))
            }
        })
        .run_server_tasks(ClientTaskOptions::default().default_ttl(Duration::from_secs(30)));
    let (_conn, mut s, init) = connect(options, "2025-11-25").await;
    assert_eq!(
        init["capabilities"]["tasks"]["requests"],
        json!({"sampling": {"createMessage": {}}})
    );
    let created = s
        .ask(1, "sampling/createMessage", sampling_params(json!({})))
        .await;
    let id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    // No ttl asked: the default.
    assert_eq!(created["result"]["task"]["ttl"], 30000);
    let cancelled = s.ask(2, "tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(
        untimed(&cancelled["result"]),
        json!({
            "taskId": id, "status": "cancelled",
            "statusMessage": "The task was cancelled by its requestor",
            "ttl": 30000, "pollInterval": 500,
        })
    );
    let seen = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await;
    assert_eq!(seen, Ok(Some("dropped")));
    let status = s.note("notifications/tasks/status").await;
    assert_eq!(status["params"]["status"], "cancelled");
    let result = s.ask(3, "tasks/result", json!({"taskId": id})).await;
    assert_eq!(
        result["error"],
        json!({
            "code": -32600,
            "message": format!("Invalid request: task {id:?} was cancelled"),
            "data": {"taskId": id, "status": "cancelled"},
        })
    );
    let again = s.ask(4, "tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(
        again["error"]["message"],
        format!("Invalid params: task {id:?} is already cancelled and cannot be cancelled")
    );
}

#[tokio::test]
async fn the_store_bounds_tasks_and_results() {
    let gate = Arc::new(Notify::new());
    let options = ClientOptions::default()
        .on_sampling({
            let gate = gate.clone();
            move |_| {
                let gate = gate.clone();
                async move {
                    gate.notified().await;
                    Ok(CreateMessageResult::text("m", "x".repeat(400)))
                }
            }
        })
        .run_server_tasks(
            ClientTaskOptions::default()
                .max_tasks(1)
                .max_result_bytes(200),
        );
    let (_conn, mut s, _) = connect(options, "2025-11-25").await;
    let first = s
        .ask(1, "sampling/createMessage", sampling_params(json!({})))
        .await;
    let id = first["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let second = s
        .ask(2, "sampling/createMessage", sampling_params(json!({})))
        .await;
    assert_eq!(
        second["error"],
        json!({
            "code": -32600,
            "message": "Invalid request: too many tasks: this client already runs 1 tasks for the server (the limit)",
        })
    );
    gate.notify_one();
    let result = s.ask(3, "tasks/result", json!({"taskId": id})).await;
    assert_eq!(result["error"]["code"], -32603, "{result}");
    let msg = result["error"]["message"].as_str().unwrap();
    assert!(
        msg.starts_with("Internal error: the task's result of ")
            && msg.ends_with(" bytes exceeds the store's bound of 200 bytes"),
        "{msg}"
    );
    let got = s.ask(4, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(got["result"]["status"], "failed");
}

#[tokio::test]
async fn a_client_that_offers_no_tasks_answers_task_requests_normally() {
    // Not opted in: nothing declared, `task` ignored, the task methods unknown.
    let options = ClientOptions::default().on_elicitation(false, |_| async { Ok(accept_ada()) });
    let (_conn, mut s, init) = connect(options, "2025-11-25").await;
    assert_eq!(init["capabilities"], json!({"elicitation": {"form": {}}}));
    let r = s
        .ask(1, "elicitation/create", elicit_params(json!({"ttl": 1000})))
        .await;
    assert_eq!(
        r["result"],
        json!({"action": "accept", "content": {"name": "Ada"}})
    );
    let get = s.ask(2, "tasks/get", json!({"taskId": "x"})).await;
    assert_eq!(get["error"]["code"], -32601, "{get}");

    // Opted in, but the server chose 2025-06-18 (no tasks there): the same.
    let options = ClientOptions::default()
        .on_elicitation(false, |_| async { Ok(accept_ada()) })
        .run_server_tasks(ClientTaskOptions::default());
    let (_conn, mut s, _) = connect(options, "2025-06-18").await;
    let r = s
        .ask(1, "elicitation/create", elicit_params(json!({"ttl": 1000})))
        .await;
    assert_eq!(
        r["result"],
        json!({"action": "accept", "content": {"name": "Ada"}})
    );
    let list = s.ask(2, "tasks/list", json!({})).await;
    assert_eq!(list["error"]["code"], -32601, "{list}");

    // Opted in with a sampling handler only: an elicitation is no task (and no handler: -32601).
    let options = ClientOptions::default()
        .on_sampling(|_| async { Ok(CreateMessageResult::text("m", "hi")) })
        .run_server_tasks(ClientTaskOptions::default());
    let (_conn, mut s, _) = connect(options, "2025-11-25").await;
    let r = s
        .ask(1, "elicitation/create", elicit_params(json!({})))
        .await;
    assert_eq!(r["error"]["code"], -32601, "{r}");
}
