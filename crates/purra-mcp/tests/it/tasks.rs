//! Task-only remote tools (`execution.taskSupport: "required"`) under host authority, against
//! purra's own server over the in-memory transport, in both forms (a 2025-11-25 handshake
//! session and a 2026-07-28 connection with the tasks extension): without the read binding's
//! opt-in the call fails closed and the handler never runs; with it the call runs as a task and
//! its result is judged like any other; a task that asks for input, or outlives the call's
//! timeout, or whose run is cancelled, is cancelled remotely and its handler observes it; a write
//! binding never runs a task.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use purra_core::{Effect, ErrorCode, Lease, Risk, ScopeCheck, ScopeDecision, ToolError};
use purra_mcp::{
    codes, discover_read_tools, discover_write_tools, CatalogMonitor, Limits, ReadBinding,
    ReadCatalog, WriteBinding, WriteEffect,
};
use purra_protocol::memory;
use purra_protocol::modern::InputRequest;
use purra_protocol::types::{ElicitParams, TaskSupport};
use purra_protocol::{
    Client, ClientOptions, Connection, HandlerResult, ProtocolMode, RequestCtx, Server,
    TaskOptions, ToolDef,
};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::support::run;

#[derive(Deserialize, schemars::JsonSchema)]
struct Topic {
    topic: String,
}

/// What the server's handlers did.
struct Seen {
    runs: AtomicUsize,
    cancelled: mpsc::Sender<&'static str>,
}

/// A server whose tools all run only as tasks: `report` answers after a pause, `ask` asks the
/// client a question first, `slow` waits until cancelled.
fn server(seen: Arc<Seen>) -> Server {
    let server = Server::builder("tasks", "1")
        .tasks(TaskOptions::default().poll_interval(Duration::from_millis(20)))
        .build();
    let s = seen.clone();
    server
        .add_tool(
            ToolDef::new("report")
                .description("Writes a report")
                .task_support(TaskSupport::Required),
            move |Topic { topic }, _ctx: RequestCtx| {
                let s = s.clone();
                async move {
                    s.runs.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(60)).await;
                    HandlerResult::Ok(format!("report on {topic}"))
                }
            },
        )
        .unwrap();
    let s = seen.clone();
    server
        .add_tool(
            ToolDef::new("ask")
                .description("Asks first")
                .task_support(TaskSupport::Required),
            move |_: Topic, ctx: RequestCtx| {
                let s = s.clone();
                async move {
                    s.runs.fetch_add(1, Ordering::SeqCst);
                    let form = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}});
                    let asked = ctx.input(
                        "ok",
                        InputRequest::Elicit(ElicitParams::form(
                            "Sure?",
                            form.as_object().cloned().unwrap(),
                        )),
                    );
                    // In a handshake revision the question is a request that the task's
                    // cancellation cancels too: either branch may see it first.
                    tokio::select! {
                        _ = asked => {}
                        () = ctx.cancelled() => {}
                    }
                    if ctx.is_cancelled() {
                        let _ = s.cancelled.send("ask").await;
                    }
                    HandlerResult::Ok("done".to_owned())
                }
            },
        )
        .unwrap();
    server
        .add_tool(
            ToolDef::new("slow")
                .description("Waits")
                .task_support(TaskSupport::Required),
            move |_: Topic, ctx: RequestCtx| {
                let s = seen.clone();
                async move {
                    s.runs.fetch_add(1, Ordering::SeqCst);
                    ctx.cancelled().await;
                    let _ = s.cancelled.send("slow").await;
                    HandlerResult::Ok("stopped")
                }
            },
        )
        .unwrap();
    server
}

/// Whether the connection speaks the 2025-11-25 handshake or the 2026-07-28 revision.
#[derive(Clone, Copy, Debug)]
enum Form {
    Handshake,
    Modern,
}

const FORMS: [Form; 2] = [Form::Handshake, Form::Modern];

struct Fixture {
    conn: Arc<Connection>,
    monitor: CatalogMonitor,
    seen: Arc<Seen>,
    cancelled: mpsc::Receiver<&'static str>,
}

async fn fixture(form: Form) -> Fixture {
    let (tx, cancelled) = mpsc::channel(8);
    let seen = Arc::new(Seen {
        runs: AtomicUsize::new(0),
        cancelled: tx,
    });
    let (a, b) = memory::pair();
    let s = server(seen.clone());
    tokio::spawn(async move { s.serve(b).await });
    let mut options = ClientOptions::default()
        // The adapter answers no questions, but a client that can be asked makes the handshake
        // server's task reach `input_required` instead of failing at once.
        .on_elicitation(false, |_params| std::future::pending());
    if let Form::Modern = form {
        options = options.mode(ProtocolMode::Pinned("2026-07-28".into()));
    }
    let conn = Client::connect(a, options).await.expect("connects");
    assert_eq!(conn.is_modern(), matches!(form, Form::Modern));
    let monitor = CatalogMonitor::attach(&conn);
    Fixture {
        conn: Arc::new(conn),
        monitor,
        seen,
        cancelled,
    }
}

async fn discover_tasks(f: &Fixture, tasks: bool, limits: Limits) -> ReadCatalog {
    let bindings = ["report", "ask", "slow"]
        .into_iter()
        .map(|n| {
            (
                n.to_owned(),
                ReadBinding::new(n, format!("Read {n}"), ScopeCheck::OptOut).run_tasks(tasks),
            )
        })
        .collect::<BTreeMap<_, _>>();
    discover_read_tools(&f.conn, "tasks", &bindings, &f.monitor, limits)
        .await
        .expect("discovers")
}

async fn call_local(cat: &ReadCatalog, local: &str, lease: Lease) -> Result<Value, ToolError> {
    let reg = cat
        .registrations
        .iter()
        .find(|r| r.name() == local)
        .expect("registered");
    (reg.handler())(json!({"topic": "rust"}), run(lease)).await
}

fn code(r: Result<Value, ToolError>) -> (ErrorCode, Effect) {
    let e = r.expect_err("fails");
    (e.code, e.effect)
}

async fn observed(f: &mut Fixture) -> &'static str {
    tokio::time::timeout(Duration::from_secs(5), f.cancelled.recv())
        .await
        .expect("the handler observes its cancellation within 5 s")
        .expect("open")
}

#[tokio::test]
async fn without_the_opt_in_a_task_only_tool_fails_closed_and_never_runs() {
    for form in FORMS {
        let f = fixture(form).await;
        let cat = discover_tasks(&f, false, Limits::default()).await;
        for tool in ["report", "ask", "slow"] {
            assert_eq!(
                code(call_local(&cat, tool, Lease::unbounded()).await),
                (codes::result_unsupported(), Effect::NotStarted),
                "{form:?} {tool}"
            );
        }
        assert_eq!(f.seen.runs.load(Ordering::SeqCst), 0, "{form:?}");
        // The snapshot's policy says nothing of tasks.
        let entries = &cat.snapshot.as_json()["entries"];
        assert_eq!(
            entries[1]["policy"],
            json!({"mode": "read", "title": "Read report"})
        );
    }
}

#[tokio::test]
async fn with_the_opt_in_the_tool_runs_as_a_task_and_its_result_is_judged() {
    for form in FORMS {
        let f = fixture(form).await;
        let cat = discover_tasks(&f, true, Limits::default()).await;
        // The opt-in is part of what the host reviewed.
        let entries = &cat.snapshot.as_json()["entries"];
        assert_eq!(entries[1]["localName"], json!("report"));
        assert_eq!(
            entries[1]["policy"],
            json!({"mode": "read", "title": "Read report", "tasks": true})
        );
        assert_eq!(
            call_local(&cat, "report", Lease::unbounded())
                .await
                .unwrap(),
            json!({"text": ["report on rust"], "structured": null}),
            "{form:?}"
        );
        assert_eq!(f.seen.runs.load(Ordering::SeqCst), 1, "{form:?}");
        // Arguments outside the schema are still refused before anything is sent.
        let reg = cat
            .registrations
            .iter()
            .find(|r| r.name() == "report")
            .unwrap();
        let e = (reg.handler())(json!({"topic": 7}), run(Lease::unbounded()))
            .await
            .unwrap_err();
        assert_eq!(e.code, codes::invalid_arguments());
        assert_eq!(f.seen.runs.load(Ordering::SeqCst), 1, "{form:?}");
    }
}

#[tokio::test]
async fn a_task_that_asks_for_input_is_unsupported_and_cancelled_remotely() {
    for form in FORMS {
        let mut f = fixture(form).await;
        let cat = discover_tasks(&f, true, Limits::default()).await;
        assert_eq!(
            code(call_local(&cat, "ask", Lease::unbounded()).await),
            (codes::result_unsupported(), Effect::NotStarted),
            "{form:?}"
        );
        assert_eq!(observed(&mut f).await, "ask", "{form:?}");
    }
}

#[tokio::test]
async fn a_task_past_the_timeout_or_a_cancelled_run_cancels_the_remote_task() {
    for form in FORMS {
        let mut f = fixture(form).await;
        let limits = Limits {
            timeout: Duration::from_millis(300),
            ..Limits::default()
        };
        let cat = discover_tasks(&f, true, limits).await;
        assert_eq!(
            code(call_local(&cat, "slow", Lease::unbounded()).await),
            (codes::timeout(), Effect::NotStarted),
            "{form:?}"
        );
        assert_eq!(observed(&mut f).await, "slow", "{form:?}");

        let cat = discover_tasks(&f, true, Limits::default()).await;
        let lease = Lease::unbounded();
        let cancel = lease.cancellation().clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            cancel.cancel();
        });
        assert_eq!(
            code(call_local(&cat, "slow", lease).await),
            (ErrorCode::RUN_CANCELLED, Effect::NotStarted),
            "{form:?}"
        );
        assert_eq!(observed(&mut f).await, "slow", "{form:?}");
        assert_eq!(f.seen.runs.load(Ordering::SeqCst), 2, "{form:?}");
    }
}

#[tokio::test]
async fn a_write_binding_never_runs_a_task() {
    for form in FORMS {
        let f = fixture(form).await;
        let binding = WriteBinding {
            local_name: "report".into(),
            title: "Write a report".into(),
            risk: Risk::Write,
            effect: WriteEffect::Write,
            scope: ScopeCheck::check(|_args, _run| ScopeDecision::Allow),
            binding_id: "reports".into(),
            binding_revision: "1".into(),
            scope_id: "sandbox".into(),
            scope_revision: "1".into(),
        };
        let bindings = BTreeMap::from([("report".to_owned(), binding)]);
        let cat = discover_write_tools(&f.conn, "tasks", &bindings, &f.monitor, Limits::default())
            .await
            .expect("discovers");
        let e = (cat.registrations[0].handler())(json!({"topic": "rust"}), run(Lease::unbounded()))
            .await
            .unwrap_err();
        assert_eq!(
            (e.code, e.effect),
            (codes::result_unsupported(), Effect::NotStarted),
            "{form:?}"
        );
        assert_eq!(f.seen.runs.load(Ordering::SeqCst), 0, "{form:?}");
    }
}
