//! The server fixtures of the `io.modelcontextprotocol/tasks` extension scenarios of the
//! conformance suite 0.2.0-alpha.12 (`tasks-*`): a sync-only `greet`, task-supporting tools that
//! sleep, fail, fail at the protocol level and ask for input, and a required-task tool that
//! gathers input through input_required rounds before it becomes a task.

use std::time::Duration;

use purra_protocol::modern::{InputRequest, InputResponse};
use purra_protocol::types::*;
use purra_protocol::{ErrorObject, HandlerError, HandlerResult, RegistrationError, RequestCtx};
use purra_protocol::{Server, ToolDef};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

#[derive(Deserialize, JsonSchema)]
struct Greet {
    /// Whom to greet.
    name: String,
}

#[derive(Deserialize, JsonSchema)]
struct SlowCompute {
    /// How long to work, in seconds.
    seconds: f64,
    /// A label echoed in the result.
    #[serde(default)]
    label: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
struct ConfirmDelete {
    /// The file to delete.
    filename: String,
}

#[derive(Deserialize, JsonSchema)]
struct NoArgs {}

fn confirm(message: &str) -> InputRequest {
    let schema = json!({
        "type": "object",
        "properties": {"confirm": {"type": "boolean"}, "name": {"type": "string"}},
    });
    InputRequest::Elicit(ElicitParams::form(
        message,
        schema.as_object().cloned().unwrap_or_default(),
    ))
}

fn accepted(r: &InputResponse, field: &str) -> Option<Value> {
    match r {
        InputResponse::Elicit(e) if e.action == ElicitAction::Accept => {
            e.content.as_ref().and_then(|c| c.get(field)).cloned()
        }
        _ => None,
    }
}

/// Adds the tasks fixtures to `server`.
pub fn add(server: &Server) -> Result<(), RegistrationError> {
    server.tool(
        "greet",
        "Greets by name (never a task)",
        |Greet { name }, _ctx: RequestCtx| async move { HandlerResult::Ok(format!("Hello, {name}!")) },
    )?;
    server.add_tool(
        ToolDef::new("slow_compute")
            .description(
                "Works for `seconds` seconds, then reports; settles cancelled when cancelled",
            )
            .task_support(TaskSupport::Optional),
        |SlowCompute { seconds, label }, ctx: RequestCtx| async move {
            let nap = Duration::from_secs_f64(seconds.clamp(0.0, 3600.0));
            tokio::select! {
                _ = tokio::time::sleep(nap) => {}
                _ = ctx.cancelled() => return Err("cancelled".into()),
            }
            HandlerResult::Ok(format!(
                "Computed for {seconds} s ({})",
                label.as_deref().unwrap_or("no label")
            ))
        },
    )?;
    server.add_tool(
        ToolDef::new("failing_job")
            .description("Fails as a tool (isError) after about a second")
            .task_support(TaskSupport::Required),
        |_: NoArgs, _ctx: RequestCtx| async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            HandlerResult::<String>::Err("the job failed".into())
        },
    )?;
    server.add_tool(
        ToolDef::new("protocol_error_job")
            .description("Fails with a protocol-level error")
            .task_support(TaskSupport::Optional),
        |_: NoArgs, _ctx: RequestCtx| async move {
            HandlerResult::<String>::Err(HandlerError::rpc(ErrorObject::internal(
                "Internal error: the job crashed",
            )))
        },
    )?;
    server.add_tool(
        ToolDef::new("confirm_delete")
            .description("Asks the user to confirm, then deletes (pretends to)")
            .task_support(TaskSupport::Optional),
        |ConfirmDelete { filename }, ctx: RequestCtx| async move {
            let r = ctx
                .input("confirm", confirm(&format!("Delete {filename}?")))
                .await?;
            let yes = accepted(&r, "confirm") == Some(Value::Bool(true));
            HandlerResult::Ok(if yes {
                format!("Deleted {filename}")
            } else {
                format!("Kept {filename}")
            })
        },
    )?;
    server.add_tool(
        ToolDef::new("multi_input")
            .description("Asks two questions at once")
            .task_support(TaskSupport::Optional),
        |_: NoArgs, ctx: RequestCtx| async move {
            let (a, b) = tokio::join!(
                ctx.input("first", confirm("First question")),
                ctx.input("second", confirm("Second question")),
            );
            let (a, b) = (a?, b?);
            let name = |r: &InputResponse| {
                accepted(r, "name")
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default()
            };
            HandlerResult::Ok(format!("Answers: {}, {}", name(&a), name(&b)))
        },
    )?;
    server.add_tool(
        ToolDef::new("test_tool_with_task")
            .description("Asks the user's name through input_required, then works on as a task")
            .task_support(TaskSupport::Required)
            .input_before_task(),
        |_: NoArgs, ctx: RequestCtx| async move {
            let form = json!({
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"]
            });
            let r = ctx
                .input(
                    "user_name",
                    InputRequest::Elicit(ElicitParams::form(
                        "What is your name?",
                        form.as_object().cloned().unwrap_or_default(),
                    )),
                )
                .await?;
            let name = accepted(&r, "name")
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            ctx.start_task().await?;
            tokio::time::sleep(Duration::from_millis(200)).await;
            HandlerResult::Ok(format!("Hello, {name}! (from the task)"))
        },
    )?;
    Ok(())
}
