//! The server fixtures the 2026-07-28 scenarios of the conformance suite 0.2.0-alpha.12 add:
//! input_required round trips (`test_input_required_result_*`), the stateless diagnostics
//! (`test_missing_capability`, `test_streaming_elicitation`, `test_logging_tool`, the list
//! mutation hooks) and a tool with `x-mcp-header` parameters. They are ordinary handlers: the
//! same `RequestCtx` calls serve both eras.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use purra_protocol::modern::{InputRequest, InputResponse};
use purra_protocol::types::*;
use purra_protocol::{Error, HandlerResult, RegistrationError, RequestCtx, Server};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

#[derive(Deserialize, JsonSchema)]
struct NoArgs {}

fn form(message: &str, field: &str, kind: &str) -> InputRequest {
    let schema = json!({
        "type": "object",
        "properties": {field: {"type": kind}},
        "required": [field]
    });
    InputRequest::Elicit(ElicitParams::form(
        message,
        schema.as_object().cloned().unwrap_or_default(),
    ))
}

fn sample(text: &str, max_tokens: u64) -> InputRequest {
    InputRequest::Sample(CreateMessageParams::new(
        vec![SamplingMessage::text_message(Role::User, text)],
        max_tokens,
    ))
}

/// The value of `field` in an accepted elicitation, as text.
fn field(r: &InputResponse, field: &str) -> String {
    match r {
        InputResponse::Elicit(e) => e
            .content
            .as_ref()
            .and_then(|c| c.get(field))
            .map(|v| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .unwrap_or_default(),
        _ => String::new(),
    }
}

fn sampled_text(r: &InputResponse) -> String {
    match r {
        InputResponse::Sample(s) => SamplingMessage::new(s.role, s.content.clone())
            .text()
            .unwrap_or_default()
            .to_owned(),
        _ => String::new(),
    }
}

fn roots(r: &InputResponse) -> String {
    match r {
        InputResponse::Roots(r) => r
            .roots
            .iter()
            .map(|r| r.uri.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        _ => String::new(),
    }
}

/// Adds the 2026-07-28 fixtures to `server`.
pub fn add(server: &Server) -> Result<(), RegistrationError> {
    add_input_required(server)?;
    add_diagnostics(server)?;
    add_custom_headers(server)
}

fn add_input_required(server: &Server) -> Result<(), RegistrationError> {
    server.tool(
        "test_input_required_result_elicitation",
        "MRTR: asks the user's name (input request user_name), then greets",
        |_: NoArgs, ctx: RequestCtx| async move {
            let r = ctx
                .input("user_name", form("What is your name?", "name", "string"))
                .await?;
            HandlerResult::Ok(format!("Hello, {}!", field(&r, "name")))
        },
    )?;
    server.tool(
        "test_input_required_result_sampling",
        "MRTR: asks the client's model a question (input request capital_question)",
        |_: NoArgs, ctx: RequestCtx| async move {
            let r = ctx
                .input(
                    "capital_question",
                    sample("What is the capital of France?", 100),
                )
                .await?;
            HandlerResult::Ok(format!("The model said: {}", sampled_text(&r)))
        },
    )?;
    server.tool(
        "test_input_required_result_list_roots",
        "MRTR: asks the client's roots (input request client_roots)",
        |_: NoArgs, ctx: RequestCtx| async move {
            let r = ctx.input("client_roots", InputRequest::ListRoots).await?;
            HandlerResult::Ok(format!("Client roots: {}", roots(&r)))
        },
    )?;
    server.tool(
        "test_input_required_result_request_state",
        "MRTR: asks for confirmation and checks the state it carried across the round",
        |_: NoArgs, ctx: RequestCtx| async move {
            let carried = ctx.request_state();
            ctx.set_request_state(json!("awaiting-confirm"));
            let r = ctx
                .input("confirm", form("Please confirm", "ok", "boolean"))
                .await?;
            let verdict = if carried == Some(json!("awaiting-confirm")) {
                "state-ok"
            } else {
                "state-missing"
            };
            HandlerResult::Ok(format!("{verdict}: confirmed={}", field(&r, "ok")))
        },
    )?;
    server.tool(
        "test_input_required_result_multiple_inputs",
        "MRTR: asks a name, a greeting and the roots at once",
        |_: NoArgs, ctx: RequestCtx| async move {
            let (name, greeting, client_roots) = tokio::join!(
                ctx.input("user_name", form("What is your name?", "name", "string")),
                ctx.input("greeting", sample("Generate a greeting", 50)),
                ctx.input("client_roots", InputRequest::ListRoots),
            );
            let (name, greeting, client_roots) = (name?, greeting?, client_roots?);
            HandlerResult::Ok(format!(
                "{} {} (roots: {})",
                sampled_text(&greeting),
                field(&name, "name"),
                roots(&client_roots)
            ))
        },
    )?;
    server.tool(
        "test_input_required_result_multi_round",
        "MRTR: asks a name, then a colour, in two rounds",
        |_: NoArgs, ctx: RequestCtx| async move {
            let name = ctx
                .input(
                    "step1",
                    form("Step 1: What is your name?", "name", "string"),
                )
                .await?;
            let colour = ctx
                .input(
                    "step2",
                    form("Step 2: What is your favorite color?", "color", "string"),
                )
                .await?;
            HandlerResult::Ok(format!(
                "{} likes {}",
                field(&name, "name"),
                field(&colour, "color")
            ))
        },
    )?;
    server.tool(
        "test_input_required_result_tampered_state",
        "MRTR: asks for confirmation under a sealed requestState",
        |_: NoArgs, ctx: RequestCtx| async move {
            ctx.set_request_state(json!({"purpose": "tamper test"}));
            let r = ctx
                .input("confirm", form("Please confirm", "ok", "boolean"))
                .await?;
            HandlerResult::Ok(format!("confirmed={}", field(&r, "ok")))
        },
    )?;
    server.tool(
        "test_input_required_result_capabilities",
        "MRTR: asks only for what the client declared (sampling, elicitation)",
        |_: NoArgs, ctx: RequestCtx| async move {
            let caps = ctx.client_capabilities();
            let mut said = Vec::new();
            if caps.sampling.is_some() {
                let r = ctx.input("question", sample("Say something", 20)).await?;
                said.push(sampled_text(&r));
            }
            if caps.elicitation.is_some() {
                let r = ctx
                    .input("user_name", form("What is your name?", "name", "string"))
                    .await?;
                said.push(field(&r, "name"));
            }
            HandlerResult::Ok(format!("answers: {}", said.join(", ")))
        },
    )?;
    server.prompt(
        "test_input_required_result_prompt",
        "MRTR: a prompt that asks the user for context first",
        |(), ctx: RequestCtx| async move {
            let r = ctx
                .input(
                    "user_context",
                    form("What context should the prompt use?", "context", "string"),
                )
                .await?;
            HandlerResult::Ok(
                GetPromptResult::new(vec![PromptMessage::user(format!(
                    "Context: {}",
                    field(&r, "context")
                ))])
                .with_description("A prompt built from elicited context"),
            )
        },
    )?;
    Ok(())
}

fn add_diagnostics(server: &Server) -> Result<(), RegistrationError> {
    server.tool(
        "test_missing_capability",
        "Needs the client's sampling capability (-32021 without it)",
        |_: NoArgs, ctx: RequestCtx| async move {
            if ctx.client_capabilities().sampling.is_none() {
                return Err(Error::MissingClientCapability("sampling".into()).into());
            }
            HandlerResult::Ok("Success")
        },
    )?;
    server.tool(
        "test_streaming_elicitation",
        "Reports progress, then asks the user through input_required",
        |_: NoArgs, ctx: RequestCtx| async move {
            ctx.progress(50.0, Some(100.0), None).await?;
            let r = ctx
                .input("answer", form("Streaming question", "answer", "string"))
                .await?;
            HandlerResult::Ok(format!("Streaming complete: {}", field(&r, "answer")))
        },
    )?;
    server.tool(
        "test_logging_tool",
        "Logs once (delivered only to requests that set a log level)",
        |_: NoArgs, ctx: RequestCtx| async move {
            ctx.log(
                LoggingLevel::Info,
                Some("conformance-test-server"),
                json!("Diagnostic trace logging activated"),
            )
            .await?;
            HandlerResult::Ok("Logging evaluated")
        },
    )?;
    // The mutation hooks toggle a registration, which notifies the listen streams that asked.
    let tools_toggled = Arc::new(AtomicBool::new(false));
    let handle = server.clone();
    server.tool(
        "test_trigger_tool_change",
        "Adds or removes test_dynamic_tool (tools list changed)",
        move |_: NoArgs, _ctx: RequestCtx| {
            let server = handle.clone();
            let toggled = tools_toggled.clone();
            async move {
                if toggled.fetch_xor(true, Ordering::SeqCst) {
                    server.remove_tool("test_dynamic_tool");
                } else {
                    server.tool(
                        "test_dynamic_tool",
                        "Appears and disappears with test_trigger_tool_change",
                        |_: NoArgs, _c: RequestCtx| async move { HandlerResult::Ok("dynamic") },
                    )?;
                }
                HandlerResult::Ok("Mutation triggered")
            }
        },
    )?;
    let prompts_toggled = Arc::new(AtomicBool::new(false));
    let handle = server.clone();
    server.tool(
        "test_trigger_prompt_change",
        "Adds or removes test_dynamic_prompt (prompts list changed)",
        move |_: NoArgs, _ctx: RequestCtx| {
            let server = handle.clone();
            let toggled = prompts_toggled.clone();
            async move {
                if toggled.fetch_xor(true, Ordering::SeqCst) {
                    server.remove_prompt("test_dynamic_prompt");
                } else {
                    server.prompt(
                        "test_dynamic_prompt",
                        "Appears and disappears with test_trigger_prompt_change",
                        |(), _c: RequestCtx| async move {
                            HandlerResult::Ok(PromptMessage::user("dynamic"))
                        },
                    )?;
                }
                HandlerResult::Ok("Mutation triggered")
            }
        },
    )?;
    Ok(())
}

fn add_custom_headers(server: &Server) -> Result<(), RegistrationError> {
    let schema = json!({
        "type": "object",
        "properties": {
            "region": {
                "type": "string",
                "description": "Mirrored into the Mcp-Param-Region header",
                "x-mcp-header": "Region"
            },
            "query": {"type": "string", "description": "Not mirrored"}
        },
        "required": ["region"]
    });
    server.raw_tool(
        Tool::new(
            "test_custom_headers",
            schema.as_object().cloned().unwrap_or_default(),
        )
        .with_description("Echoes its region, which travels in Mcp-Param-Region"),
        |args, _ctx: RequestCtx| async move {
            let region = args.get("region").and_then(Value::as_str).unwrap_or("");
            HandlerResult::Ok(CallToolResult::text(format!("Region: {region}")))
        },
    )?;
    Ok(())
}
