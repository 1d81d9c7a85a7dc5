//! Tasks on the server, over the raw in-memory transport (each connection its own session): the
//! 2026-07-28 extension form (created by the server, inlined results, `tasks/update`, the empty
//! acks, the -32021 gate) and the 2025-11-25 form (`task` on `tools/call`, `tasks/result`,
//! `tasks/list`, status notifications); one session's task invisible to another; the store's
//! bounds (tasks per owner, result bytes, the ttl sweep); a cancelled handler observing its
//! cancellation; the extension's `notifications/tasks` on a `subscriptions/listen` stream. Answers are asserted as exact JSON, the random task id and the timestamps
//! replaced by placeholders first.

use std::sync::Arc;
use std::time::Duration;

use purra_protocol::memory::{self, RawEnd};
use purra_protocol::modern::InputRequest;
use purra_protocol::tasks::{
    InMemoryTaskStore, TaskChange, TaskLimits, TaskOutcome, TaskRecord, TaskStatus, TaskStore,
    TaskStoreError,
};
use purra_protocol::types::*;
use purra_protocol::{HandlerResult, RequestCtx, Server, TaskOptions, ToolDef};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::support::{recv, start, Nothing, Size};

/// A server with a task tool that waits until cancelled (reporting it on `observed`), one that
/// asks for a confirmation, one that returns `bytes` bytes, a required one and a plain one.
fn tasks_server(options: TaskOptions, observed: mpsc::Sender<&'static str>) -> Server {
    let server = Server::builder("tasks", "1")
        .logging()
        .tasks(options)
        .build();
    server
        .add_tool(
            ToolDef::new("wait")
                .description("waits until cancelled")
                .task_support(TaskSupport::Optional),
            move |_: Nothing, ctx: RequestCtx| {
                let observed = observed.clone();
                async move {
                    ctx.cancelled().await;
                    let _ = observed.send("cancelled").await;
                    HandlerResult::Ok("stopped")
                }
            },
        )
        .unwrap();
    server
        .add_tool(
            ToolDef::new("confirm")
                .description("asks, then answers")
                .task_support(TaskSupport::Optional),
            |_: Nothing, ctx: RequestCtx| async move {
                let form = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}});
                let r = ctx
                    .input(
                        "ok",
                        InputRequest::Elicit(ElicitParams::form(
                            "Sure?",
                            form.as_object().cloned().unwrap(),
                        )),
                    )
                    .await?;
                let purra_protocol::modern::InputResponse::Elicit(e) = r else {
                    return HandlerResult::Ok("wrong kind".to_owned());
                };
                HandlerResult::Ok(format!("ok={}", e.content.unwrap()["ok"]))
            },
        )
        .unwrap();
    server
        .add_tool(
            ToolDef::new("big")
                .description("returns `bytes` bytes of text")
                .task_support(TaskSupport::Required),
            |Size { bytes }, _ctx: RequestCtx| async move { HandlerResult::Ok("x".repeat(bytes)) },
        )
        .unwrap();
    server
        .add_tool(
            ToolDef::new("chatty")
                .description("reports progress and logs, then answers")
                .task_support(TaskSupport::Optional),
            |_: Nothing, ctx: RequestCtx| async move {
                ctx.progress(1.0, Some(2.0), Some("half")).await?;
                ctx.log(LoggingLevel::Info, None, json!("working")).await?;
                HandlerResult::Ok("said")
            },
        )
        .unwrap();
    server
        .tool(
            "plain",
            "never a task",
            |_: Nothing, _ctx: RequestCtx| async move { HandlerResult::Ok("plain") },
        )
        .unwrap();
    server
}

async fn recv_value(raw: &mut RawEnd) -> Value {
    serde_json::from_str(&recv(raw).await).unwrap()
}

/// Sends `frame` and returns the response, keeping notifications aside in `notes`.
async fn ask_noting(raw: &mut RawEnd, frame: Value, notes: &mut Vec<Value>) -> Value {
    raw.send(frame.to_string()).await;
    loop {
        let v = recv_value(raw).await;
        if v.get("id").is_some() {
            return v;
        }
        notes.push(v);
    }
}

async fn ask_value(raw: &mut RawEnd, frame: Value) -> Value {
    ask_noting(raw, frame, &mut Vec::new()).await
}

/// The placeholders: any `taskId` value becomes `<id>`, timestamps `<time>`.
fn norm(mut v: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::Object(o) => {
                for (k, x) in o.iter_mut() {
                    match k.as_str() {
                        "taskId" => *x = json!("<id>"),
                        "createdAt" | "lastUpdatedAt" => *x = json!("<time>"),
                        _ => walk(x),
                    }
                }
            }
            Value::Array(a) => a.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut v);
    v
}

const TASKS_EXT: &str = "io.modelcontextprotocol/tasks";

fn modern(id: u64, method: &str, mut params: Value, with_tasks: bool) -> Value {
    let mut caps = json!({"elicitation": {}});
    if with_tasks {
        caps["extensions"] = json!({ TASKS_EXT: {} });
    }
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"},
    });
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// Polls `tasks/get` until the task has `status` (within 5 s).
async fn until(raw: &mut RawEnd, id: &str, status: &str) -> Value {
    for n in 0..250 {
        let got = ask_value(
            raw,
            modern(9000 + n, "tasks/get", json!({"taskId": id}), true),
        )
        .await;
        if got["result"]["status"] == status {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("task {id} never reached {status}");
}

#[tokio::test]
async fn extension_form_creates_inlines_and_isolates() {
    let (tx, mut observed) = mpsc::channel(4);
    let server = tasks_server(TaskOptions::default(), tx);
    let mut a = start(&server).await;
    let mut b = start(&server).await;

    let got = ask_value(&mut a, modern(1, "server/discover", json!({}), true)).await;
    assert_eq!(
        got["result"]["capabilities"],
        json!({"tools": {"listChanged": true}, "logging": {}, "extensions": {TASKS_EXT: {}}})
    );

    // The server decides: a task-supporting tool called with the extension is a task.
    let created = ask_value(
        &mut a,
        modern(2, "tools/call", json!({"name": "wait"}), true),
    )
    .await;
    let id = created["result"]["taskId"].as_str().unwrap().to_owned();
    assert_eq!(id.len(), 32);
    assert_eq!(
        norm(created),
        json!({"jsonrpc": "2.0", "id": 2, "result": {
            "resultType": "task", "taskId": "<id>", "status": "working",
            "createdAt": "<time>", "lastUpdatedAt": "<time>", "ttlMs": 600000, "pollIntervalMs": 500,
            "_meta": {SERVER_INFO: {"name": "tasks", "version": "1"}}
        }})
    );
    let got = ask_value(&mut a, modern(3, "tasks/get", json!({"taskId": id}), true)).await;
    assert_eq!(
        norm(got),
        json!({"jsonrpc": "2.0", "id": 3, "result": {
            "resultType": "complete", "taskId": "<id>", "status": "working",
            "createdAt": "<time>", "lastUpdatedAt": "<time>", "ttlMs": 600000, "pollIntervalMs": 500,
            "_meta": {SERVER_INFO: {"name": "tasks", "version": "1"}}
        }})
    );

    // Another connection neither sees nor cancels it.
    for (n, method) in [(4, "tasks/get"), (5, "tasks/cancel")] {
        let got = ask_value(&mut b, modern(n, method, json!({"taskId": id}), true)).await;
        assert_eq!(
            got,
            json!({"jsonrpc": "2.0", "id": n, "error": {"code": -32602,
                "message": format!("Invalid params: unknown task {id:?}"), "data": {"taskId": id}}})
        );
    }
    // Without the extension declared, the task methods are refused with -32021.
    let got = ask_value(&mut a, modern(6, "tasks/get", json!({"taskId": id}), false)).await;
    assert_eq!(
        got,
        json!({"jsonrpc": "2.0", "id": 6, "error": {"code": -32021,
            "message": "Missing required client capability: the io.modelcontextprotocol/tasks extension",
            "data": {"requiredCapabilities": {"extensions": {TASKS_EXT: {}}}}}})
    );
    // The removed 2025-11-25 methods.
    let got = ask_value(&mut a, modern(7, "tasks/list", json!({}), true)).await;
    assert_eq!(got["error"]["code"], -32601);

    // Cancelling: the empty ack; the handler observes it; the task reads cancelled.
    let got = ask_value(
        &mut a,
        modern(8, "tasks/cancel", json!({"taskId": id}), true),
    )
    .await;
    assert_eq!(
        got,
        json!({"jsonrpc": "2.0", "id": 8, "result": {"resultType": "complete",
            "_meta": {SERVER_INFO: {"name": "tasks", "version": "1"}}}})
    );
    let seen = tokio::time::timeout(Duration::from_secs(5), observed.recv()).await;
    assert_eq!(seen.unwrap(), Some("cancelled"));
    let got = ask_value(&mut a, modern(9, "tasks/get", json!({"taskId": id}), true)).await;
    assert_eq!(got["result"]["status"], "cancelled");
    assert_eq!(
        got["result"]["statusMessage"],
        "The task was cancelled by its requestor"
    );
    assert!(got["result"].get("result").is_none());

    // A required-task tool without the extension: -32021; a plain tool is never a task.
    let got = ask_value(
        &mut a,
        modern(
            10,
            "tools/call",
            json!({"name": "big", "arguments": {"bytes": 1}}),
            false,
        ),
    )
    .await;
    assert_eq!(got["error"]["code"], -32021);
    let got = ask_value(
        &mut a,
        modern(11, "tools/call", json!({"name": "plain"}), true),
    )
    .await;
    assert_eq!(
        got["result"]["content"],
        json!([{"type": "text", "text": "plain"}])
    );
    assert_eq!(got["result"]["resultType"], "complete");
}

#[tokio::test]
async fn an_extension_tasks_progress_and_logs_go_nowhere_and_fail_nothing() {
    let (tx, _observed) = mpsc::channel(4);
    let server = tasks_server(TaskOptions::default(), tx);
    let mut a = start(&server).await;
    let mut call = modern(1, "tools/call", json!({"name": "chatty"}), true);
    call["params"]["_meta"]["progressToken"] = json!("p");
    call["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = json!("debug");
    let mut notes = Vec::new();
    let created = ask_noting(&mut a, call, &mut notes).await;
    let id = created["result"]["taskId"].as_str().unwrap().to_owned();
    let done = until(&mut a, &id, "completed").await;
    assert_eq!(
        done["result"]["result"],
        json!({"content": [{"type": "text", "text": "said"}]})
    );
    assert_eq!(notes, Vec::<Value>::new());
}

#[tokio::test]
async fn a_question_parks_the_task_until_tasks_update() {
    let (tx, _observed) = mpsc::channel(4);
    let server = tasks_server(TaskOptions::default(), tx);
    let mut a = start(&server).await;
    let created = ask_value(
        &mut a,
        modern(1, "tools/call", json!({"name": "confirm"}), true),
    )
    .await;
    let id = created["result"]["taskId"].as_str().unwrap().to_owned();
    let parked = until(&mut a, &id, "input_required").await;
    assert_eq!(
        parked["result"]["inputRequests"],
        json!({"ok": {"method": "elicitation/create", "params": {
            "message": "Sure?",
            "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}}}})
    );
    // A malformed answer is refused and the question stays.
    let got = ask_value(
        &mut a,
        modern(
            2,
            "tasks/update",
            json!({"taskId": id, "inputResponses": {"ok": {"action": "maybe"}}}),
            true,
        ),
    )
    .await;
    assert_eq!(got["error"]["code"], -32602);
    let still = ask_value(&mut a, modern(3, "tasks/get", json!({"taskId": id}), true)).await;
    assert_eq!(still["result"]["status"], "input_required");
    // Unknown keys are ignored; the answer resumes the handler to completion.
    let got = ask_value(
        &mut a,
        modern(
            4,
            "tasks/update",
            json!({"taskId": id, "inputResponses": {
                "ok": {"action": "accept", "content": {"ok": true}}, "other": {}}}),
            true,
        ),
    )
    .await;
    assert_eq!(got["result"]["resultType"], "complete");
    let done = until(&mut a, &id, "completed").await;
    assert_eq!(
        done["result"]["result"],
        json!({"content": [{"type": "text", "text": "ok=true"}]})
    );
}

#[tokio::test]
async fn a_result_over_the_stores_bound_fails_the_task() {
    let (tx, _observed) = mpsc::channel(4);
    let store = Arc::new(InMemoryTaskStore::new(
        TaskLimits::default().max_result_bytes(200),
    ));
    let server = tasks_server(TaskOptions::default().store(store), tx);
    let mut a = start(&server).await;
    let small = ask_value(
        &mut a,
        modern(
            1,
            "tools/call",
            json!({"name": "big", "arguments": {"bytes": 10}}),
            true,
        ),
    )
    .await;
    let small = small["result"]["taskId"].as_str().unwrap().to_owned();
    let done = until(&mut a, &small, "completed").await;
    assert_eq!(
        done["result"]["result"]["content"][0]["text"],
        "x".repeat(10)
    );
    let big = ask_value(
        &mut a,
        modern(
            2,
            "tools/call",
            json!({"name": "big", "arguments": {"bytes": 500}}),
            true,
        ),
    )
    .await;
    let big = big["result"]["taskId"].as_str().unwrap().to_owned();
    let failed = until(&mut a, &big, "failed").await;
    assert_eq!(
        failed["result"]["error"],
        json!({"code": -32603, "message": "Internal error: the task's result of 539 bytes exceeds the store's bound of 200 bytes"})
    );
    assert!(failed["result"].get("result").is_none());
}

#[tokio::test]
async fn the_store_bounds_owners_and_sweeps_expired_tasks() {
    let store = InMemoryTaskStore::new(TaskLimits::default().per_owner(2).total(3));
    let rec = |id: &str, owner: &str, ttl| TaskRecord::new(id.into(), owner.into(), ttl, 100);
    store.create(rec("a1", "A", 60_000)).await.unwrap();
    store.create(rec("a2", "A", 60_000)).await.unwrap();
    assert_eq!(
        store.create(rec("a3", "A", 60_000)).await,
        Err(TaskStoreError::OwnerFull { limit: 2 })
    );
    // The oldest, expiring first, is swept to make room.
    store.create(rec("b1", "B", 1)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert_eq!(
        store.create(rec("c1", "C", 60_000)).await,
        Ok(()),
        "b1 expired and was swept"
    );
    assert_eq!(store.len(), 3);
    assert_eq!(store.get("B", "b1").await, Ok(None));
    assert_eq!(
        store.create(rec("d1", "D", 60_000)).await,
        Err(TaskStoreError::StoreFull { limit: 3 })
    );
    // Owners are separate: A's task is not B's.
    assert_eq!(store.get("B", "a1").await, Ok(None));
    assert_eq!(store.update("B", "a1", TaskChange::Cancel).await, Ok(None));
    let a1 = store.get("A", "a1").await.unwrap().unwrap();
    assert_eq!(a1.status, TaskStatus::Working);
    // A terminal task changes no more.
    let done = store
        .update(
            "A",
            "a1",
            TaskChange::Finish(TaskOutcome::Result(json!({"ok": 1}))),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(done.status, TaskStatus::Completed);
    let after = store
        .update("A", "a1", TaskChange::Cancel)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(after.status, TaskStatus::Completed);
    let listed: Vec<String> = store
        .list("A", None, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(listed.len(), 2);
    let page: Vec<String> = store
        .list("A", Some(&listed[0]), 10)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(page, vec![listed[1].clone()]);
}

async fn handshake(raw: &mut RawEnd) {
    let got = ask_value(
        raw,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "c", "version": "1"}}}),
    )
    .await;
    assert_eq!(
        got["result"]["capabilities"],
        json!({"tools": {"listChanged": true}, "logging": {},
            "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}})
    );
    raw.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string())
        .await;
}

fn rpc(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

#[tokio::test]
async fn the_2025_11_25_form_runs_tasks_in_a_session() {
    let (tx, mut observed) = mpsc::channel(4);
    let server = tasks_server(TaskOptions::default(), tx);
    let mut a = start(&server).await;
    let mut b = start(&server).await;
    handshake(&mut a).await;
    handshake(&mut b).await;
    let mut notes = Vec::new();

    // Required without `task`: -32601.
    let got = ask_value(
        &mut a,
        rpc(
            1,
            "tools/call",
            json!({"name": "big", "arguments": {"bytes": 3}}),
        ),
    )
    .await;
    assert_eq!(
        got,
        json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601,
            "message": "Method not found: tool big can only run as a task (taskSupport: required); call it with `task`"}})
    );
    // Forbidden (a tool without task support) with `task`: -32601.
    let got = ask_value(
        &mut a,
        rpc(2, "tools/call", json!({"name": "plain", "task": {}})),
    )
    .await;
    assert_eq!(got["error"]["code"], -32601);

    let created = ask_noting(
        &mut a,
        rpc(
            3,
            "tools/call",
            json!({"name": "big", "arguments": {"bytes": 3}, "task": {"ttl": 30000}}),
        ),
        &mut notes,
    )
    .await;
    assert_eq!(
        norm(created.clone()),
        json!({"jsonrpc": "2.0", "id": 3, "result": {
            "task": {"taskId": "<id>", "status": "working", "createdAt": "<time>",
                "lastUpdatedAt": "<time>", "ttl": 30000, "pollInterval": 500},
            "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "<id>"}}}})
    );
    let id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    // tasks/result waits for the end and answers the call's result, naming the task.
    let got = ask_noting(
        &mut a,
        rpc(4, "tasks/result", json!({"taskId": id})),
        &mut notes,
    )
    .await;
    assert_eq!(
        got,
        json!({"jsonrpc": "2.0", "id": 4, "result": {
            "content": [{"type": "text", "text": "xxx"}],
            "_meta": {"io.modelcontextprotocol/related-task": {"taskId": id}}}})
    );
    // The session was told the task completed.
    while !notes.iter().any(|n| n["params"]["status"] == "completed") {
        notes.push(recv_value(&mut a).await);
    }
    let note = notes
        .iter()
        .find(|n| n["params"]["status"] == "completed")
        .unwrap();
    assert_eq!(
        norm(note.clone()),
        json!({"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": {
            "taskId": "<id>", "status": "completed", "createdAt": "<time>",
            "lastUpdatedAt": "<time>", "ttl": 30000, "pollInterval": 500}})
    );
    let got = ask_value(&mut a, rpc(5, "tasks/get", json!({"taskId": id}))).await;
    assert_eq!(got["result"]["status"], "completed");
    // Cancelling a finished task is refused.
    let got = ask_value(&mut a, rpc(6, "tasks/cancel", json!({"taskId": id}))).await;
    assert_eq!(
        got["error"],
        json!({"code": -32602, "message": format!("Invalid params: task {id:?} is already completed and cannot be cancelled")})
    );
    // Another session lists nothing and reads nothing.
    let got = ask_value(&mut b, rpc(7, "tasks/list", json!({}))).await;
    assert_eq!(got["result"], json!({"tasks": []}));
    let got = ask_value(&mut b, rpc(8, "tasks/get", json!({"taskId": id}))).await;
    assert_eq!(got["error"]["code"], -32602);
    let got = ask_value(&mut a, rpc(9, "tasks/list", json!({}))).await;
    assert_eq!(got["result"]["tasks"].as_array().unwrap().len(), 1);

    // A running task cancelled: the task (cancelled) comes back, the handler observes it.
    let created = ask_value(
        &mut a,
        rpc(10, "tools/call", json!({"name": "wait", "task": {}})),
    )
    .await;
    let id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let got = ask_value(&mut a, rpc(11, "tasks/cancel", json!({"taskId": id}))).await;
    assert_eq!(got["result"]["status"], "cancelled");
    let seen = tokio::time::timeout(Duration::from_secs(5), observed.recv()).await;
    assert_eq!(seen.unwrap(), Some("cancelled"));
}

#[tokio::test]
async fn a_2025_11_25_task_asks_the_client_in_its_name() {
    let (tx, _observed) = mpsc::channel(4);
    let server = tasks_server(TaskOptions::default(), tx);
    let mut a = start(&server).await;
    handshake(&mut a).await;
    let created = ask_value(
        &mut a,
        rpc(1, "tools/call", json!({"name": "confirm", "task": {}})),
    )
    .await;
    let id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    // The elicitation arrives, tied to the task; meanwhile the task reads input_required.
    let request = loop {
        let v = recv_value(&mut a).await;
        if v["method"] == "elicitation/create" {
            break v;
        }
    };
    assert_eq!(
        request["params"]["_meta"],
        json!({"io.modelcontextprotocol/related-task": {"taskId": id}})
    );
    let mut notes = Vec::new();
    let got = ask_noting(
        &mut a,
        rpc(2, "tasks/get", json!({"taskId": id})),
        &mut notes,
    )
    .await;
    assert_eq!(got["result"]["status"], "input_required");
    a.send(
        json!({"jsonrpc": "2.0", "id": request["id"], "result": {"action": "accept", "content": {"ok": false}}})
            .to_string(),
    )
    .await;
    let got = ask_noting(
        &mut a,
        rpc(3, "tasks/result", json!({"taskId": id})),
        &mut notes,
    )
    .await;
    assert_eq!(
        got["result"]["content"],
        json!([{"type": "text", "text": "ok=false"}])
    );
}

#[tokio::test]
async fn the_client_runs_tasks_answers_their_questions_and_cancels() {
    use purra_protocol::{Client, ClientOptions, Error};
    let (tx, mut observed) = mpsc::channel(4);
    let server = tasks_server(
        TaskOptions::default().poll_interval(Duration::from_millis(20)),
        tx,
    );
    let (a, b) = memory::pair();
    tokio::spawn({
        let server = server.clone();
        async move { server.serve(b).await }
    });
    let options = ClientOptions::default().on_elicitation(false, |p: ElicitParams| async move {
        assert_eq!(p.message, "Sure?");
        Ok(ElicitResult::accept(
            json!({"ok": true}).as_object().cloned().unwrap(),
        ))
    });
    let conn = Client::connect(a, options).await.unwrap();
    assert!(conn.supports_tool_tasks());

    // A required-task tool to completion, every status seen.
    let mut seen = Vec::new();
    let r = conn
        .run_tool_task("big", json!({"bytes": 4}), None, |t| seen.push(t.status))
        .await
        .unwrap();
    assert_eq!(r.content, vec![Content::text("xxxx")]);
    assert_eq!(seen.first(), Some(&TaskStatus::Working));
    // A task with a question: the elicitation handler answers it in the task's name.
    let r = conn
        .run_tool_task("confirm", json!({}), Some(Duration::from_secs(60)), |_| {})
        .await
        .unwrap();
    assert_eq!(r.content, vec![Content::text("ok=true")]);

    // Listing, then cancelling a running one.
    let t = conn
        .call_tool_as_task("wait", json!({}), None)
        .await
        .unwrap();
    assert_eq!(t.status, TaskStatus::Working);
    assert_eq!(t.ttl_ms, Some(600_000));
    assert_eq!(t.poll_interval_ms, Some(20));
    let (all, next) = conn.list_tasks(None).await.unwrap();
    assert_eq!(all.len(), 3);
    assert_eq!(next, None);
    let cancelled = conn.cancel_task(&t.id).await.unwrap();
    assert_eq!(cancelled.status, TaskStatus::Cancelled);
    let seen = tokio::time::timeout(Duration::from_secs(5), observed.recv()).await;
    assert_eq!(seen.unwrap(), Some("cancelled"));
    let err = conn.task_result(&t.id).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "JSON-RPC error -32600: Invalid request: task {:?} was cancelled",
            t.id
        )
    );
    // A plain tool cannot run as a task.
    let err = conn
        .call_tool_as_task("plain", json!({}), None)
        .await
        .unwrap_err();
    assert_eq!(
        err,
        Error::Rpc(purra_protocol::ErrorObject::new(
            purra_protocol::RpcErrorCode::METHOD_NOT_FOUND,
            "Method not found: tool plain cannot run as a task (taskSupport: forbidden)"
        ))
    );
}

#[tokio::test]
async fn a_2026_07_28_client_follows_extension_tasks_and_answers_their_questions() {
    use purra_protocol::{Client, ClientOptions, Error, ProtocolMode, ProtocolVersion};
    let (tx, mut observed) = mpsc::channel(4);
    let server = tasks_server(
        TaskOptions::default().poll_interval(Duration::from_millis(20)),
        tx,
    );
    let (a, b) = memory::pair();
    tokio::spawn({
        let server = server.clone();
        async move { server.serve(b).await }
    });
    let options = ClientOptions::default()
        .mode(ProtocolMode::Pinned(ProtocolVersion::new("2026-07-28")))
        .on_elicitation(false, |_p: ElicitParams| async move {
            Ok(ElicitResult::accept(
                json!({"ok": false}).as_object().cloned().unwrap(),
            ))
        });
    let conn = Client::connect(a, options).await.unwrap();
    assert!(conn.is_modern());
    let mut seen = Vec::new();
    let r = conn
        .run_tool_task("confirm", json!({}), None, |t| seen.push(t.status))
        .await
        .unwrap();
    assert_eq!(r.content, vec![Content::text("ok=false")]);
    assert_eq!(seen.first(), Some(&TaskStatus::Working));
    assert_eq!(seen.last(), Some(&TaskStatus::Completed));
    assert!(seen.contains(&TaskStatus::InputRequired));
    // A result over no bound, read through the task.
    let r = conn
        .run_tool_task("big", json!({"bytes": 2}), None, |_| {})
        .await
        .unwrap();
    assert_eq!(r.content, vec![Content::text("xx")]);
    // Cancelling: the task reads cancelled, the handler observed it, its result is an error.
    let t = conn
        .call_tool_as_task("wait", json!({}), None)
        .await
        .unwrap();
    let c = conn.cancel_task(&t.id).await.unwrap();
    assert_eq!(c.status, TaskStatus::Cancelled);
    let seen = tokio::time::timeout(Duration::from_secs(5), observed.recv()).await;
    assert_eq!(seen.unwrap(), Some("cancelled"));
    let err = conn.task_result(&t.id).await.unwrap_err();
    assert_eq!(
        err,
        Error::Protocol(format!(
            "task {} ended cancelled: The task was cancelled by its requestor",
            t.id
        ))
    );
    assert_eq!(
        conn.list_tasks(None).await.unwrap_err(),
        Error::Protocol("the 2026-07-28 tasks extension has no tasks/list".into())
    );
}

#[tokio::test]
async fn a_listen_stream_follows_extension_tasks() {
    let (tx, _observed) = mpsc::channel(4);
    let server = tasks_server(TaskOptions::default(), tx);
    let mut raw = start(&server).await;
    let created = ask_value(
        &mut raw,
        modern(1, "tools/call", json!({"name": "wait"}), true),
    )
    .await;
    let id = created["result"]["taskId"].as_str().unwrap().to_owned();
    // Task notifications need the extension declared (-32021).
    let refused = ask_value(
        &mut raw,
        modern(
            2,
            "subscriptions/listen",
            json!({"notifications": {"taskIds": [id]}}),
            false,
        ),
    )
    .await;
    assert_eq!(
        refused["error"],
        json!({
            "code": -32021,
            "message": "Missing required client capability: the io.modelcontextprotocol/tasks extension (task notifications)",
            "data": {"requiredCapabilities": {"extensions": {TASKS_EXT: {}}}},
        })
    );
    // Acknowledged for the tasks this client has; an unknown one is left out.
    raw.send(
        modern(
            3,
            "subscriptions/listen",
            json!({"notifications": {"taskIds": [id, "nope"]}}),
            true,
        )
        .to_string(),
    )
    .await;
    let ack = recv_value(&mut raw).await;
    assert_eq!(
        ack,
        json!({
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": {
                "notifications": {"taskIds": [id]},
                "_meta": {"io.modelcontextprotocol/subscriptionId": 3},
            },
        })
    );
    // Another session cannot follow this one's task.
    let mut other = start(&server).await;
    other
        .send(
            modern(
                1,
                "subscriptions/listen",
                json!({"notifications": {"taskIds": [id]}}),
                true,
            )
            .to_string(),
        )
        .await;
    let ack = recv_value(&mut other).await;
    assert_eq!(ack["params"]["notifications"], json!({}));
    // A change is pushed as the task tasks/get would show, tagged with the subscription.
    let mut notes = Vec::new();
    let cancelled = ask_noting(
        &mut raw,
        modern(4, "tasks/cancel", json!({"taskId": id}), true),
        &mut notes,
    )
    .await;
    assert_eq!(cancelled["result"]["resultType"], "complete");
    while notes.is_empty() {
        notes.push(recv_value(&mut raw).await);
    }
    assert_eq!(
        norm(notes.remove(0)),
        json!({
            "jsonrpc": "2.0",
            "method": "notifications/tasks",
            "params": {
                "taskId": "<id>",
                "status": "cancelled",
                "statusMessage": "The task was cancelled by its requestor",
                "createdAt": "<time>",
                "lastUpdatedAt": "<time>",
                "ttlMs": 600000,
                "pollIntervalMs": 500,
                "_meta": {"io.modelcontextprotocol/subscriptionId": 3},
            },
        })
    );
    let quiet = tokio::time::timeout(Duration::from_millis(200), other.recv()).await;
    assert!(quiet.is_err(), "the other session heard {quiet:?}");
}

#[tokio::test]
async fn a_2026_07_28_client_follows_task_notifications() {
    use purra_protocol::{Client, ClientOptions, Error, ProtocolMode, ProtocolVersion};
    let (tx, _observed) = mpsc::channel(4);
    let server = tasks_server(TaskOptions::default(), tx);
    let (a, b) = memory::pair();
    tokio::spawn({
        let server = server.clone();
        async move { server.serve(b).await }
    });
    let options = ClientOptions::default()
        .mode(ProtocolMode::Pinned(ProtocolVersion::new("2026-07-28")))
        .on_elicitation(false, |_p: ElicitParams| async move {
            Ok(ElicitResult::accept(
                json!({"ok": true}).as_object().cloned().unwrap(),
            ))
        });
    let conn = Client::connect(a, options).await.unwrap();
    let (heard_tx, mut heard) = mpsc::unbounded_channel();
    let _l = conn.on(purra_protocol::tasks::methods::NOTIFICATION, move |p| {
        let _ = heard_tx.send(p.clone());
    });
    let t = conn
        .call_tool_as_task("confirm", json!({}), None)
        .await
        .unwrap();
    let sub = conn.follow_tasks(&[&t.id, "nope"]).await.unwrap();
    assert_eq!(sub.tasks(), std::slice::from_ref(&t.id));
    // Answering the question (tasks/update, driven by task_result) moves it on to its end.
    let r = conn.task_result(&t.id).await.unwrap();
    assert_eq!(r.content, vec![Content::text("ok=true")]);
    let mut statuses = Vec::new();
    let last = loop {
        let p = tokio::time::timeout(Duration::from_secs(5), heard.recv())
            .await
            .expect("a notification within 5 s")
            .unwrap();
        statuses.push(p["status"].as_str().unwrap().to_owned());
        if p["status"] == "completed" {
            break p;
        }
    };
    // (input_required is heard when the question was parked after the stream opened.)
    assert!(
        statuses.ends_with(&["working".to_owned(), "completed".to_owned()]),
        "{statuses:?}"
    );
    assert_eq!(
        last["result"],
        json!({"content": [{"type": "text", "text": "ok=true"}]})
    );
    assert_eq!(last["taskId"], json!(t.id));
    sub.end();
    // A handshake connection has no listen streams.
    let (a, b) = memory::pair();
    tokio::spawn(async move { server.serve(b).await });
    let conn = Client::connect(a, ClientOptions::default()).await.unwrap();
    assert_eq!(
        conn.follow_tasks(&["x"]).await.unwrap_err(),
        Error::Protocol("task notifications over subscriptions/listen are a 2026-07-28 feature; this connection speaks a handshake revision".into())
    );
}

/// A server of a fleet on `store`: one task tool that notes its status, then waits until
/// cancelled (reporting it on `observed`).
fn fleet_server(store: Arc<InMemoryTaskStore>, observed: mpsc::Sender<&'static str>) -> Server {
    let options = TaskOptions::default()
        .store(store)
        .anonymous_owner("principal:alice")
        .watch_store(Duration::from_millis(20))
        .min_ttl(Duration::from_secs(120));
    let server = Server::builder("fleet", "1").tasks(options).build();
    server
        .add_tool(
            ToolDef::new("held")
                .description("waits until cancelled")
                .task_support(TaskSupport::Optional),
            move |_: Nothing, ctx: RequestCtx| {
                let observed = observed.clone();
                async move {
                    ctx.set_task_status("waiting for approval approval-7").await;
                    ctx.cancelled().await;
                    let _ = observed.send("cancelled").await;
                    HandlerResult::Ok("stopped")
                }
            },
        )
        .unwrap();
    server
}

/// Two servers on one store (a fleet's processes): with `anonymous_owner`, a task created in a
/// session of one is found from a session of the other, with the handler's status message; a
/// cancellation through the other reaches the handler (`watch_store`); a ttl shorter than
/// `min_ttl` is raised to it.
#[tokio::test]
async fn a_task_is_followed_and_cancelled_through_another_server_on_its_store() {
    let store = Arc::new(InMemoryTaskStore::default());
    let (tx, mut observed) = mpsc::channel(4);
    let one = fleet_server(store.clone(), tx.clone());
    let two = fleet_server(store, tx);
    let mut a = start(&one).await;
    let mut b = start(&two).await;
    for raw in [&mut a, &mut b] {
        let got = ask_value(
            raw,
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "c", "version": "1"}}}),
        )
        .await;
        assert!(got["result"]["capabilities"]["tasks"].is_object(), "{got}");
        raw.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string())
            .await;
    }
    let created = ask_value(
        &mut a,
        rpc(
            1,
            "tools/call",
            json!({"name": "held", "task": {"ttl": 1000}}),
        ),
    )
    .await;
    // A minute asked for, the minimum given.
    assert_eq!(created["result"]["task"]["ttl"], 120_000, "{created}");
    let id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut seen = Value::Null;
    for n in 0..250 {
        seen = ask_value(&mut b, rpc(10 + n, "tasks/get", json!({"taskId": id}))).await;
        if seen["result"]["statusMessage"].is_string() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        (&seen["result"]["status"], &seen["result"]["statusMessage"]),
        (&json!("working"), &json!("waiting for approval approval-7"))
    );
    let cancelled = ask_value(&mut b, rpc(500, "tasks/cancel", json!({"taskId": id}))).await;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    let got = tokio::time::timeout(Duration::from_secs(5), observed.recv())
        .await
        .expect("the handler on the first server observes the cancellation");
    assert_eq!(got, Some("cancelled"));
}
