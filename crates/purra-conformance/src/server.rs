//! The server fixtures of the conformance suite 0.1.16 (the names and behaviours its server
//! scenarios check, the same as the suite's TypeScript everything-server).

use std::time::Duration;

use purra_protocol::types::*;
use purra_protocol::{HandlerResult, RegistrationError, RequestCtx, Server};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

/// A 1×1 PNG, base64.
pub const TEST_IMAGE_BASE64: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

/// A WAV file (8 kHz mono 16-bit PCM, one silent sample), base64.
pub const TEST_AUDIO_BASE64: &str =
    "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQIAAAAAAA==";

/// The logger name of the fixtures' log messages.
const LOGGER: &str = "conformance-test-server";

#[derive(Deserialize, JsonSchema)]
struct NoArgs {}

#[derive(Deserialize, JsonSchema)]
struct SamplingArgs {
    /// The prompt to send to the LLM.
    prompt: String,
}

#[derive(Deserialize, JsonSchema)]
struct ElicitationArgs {
    /// The message to show the user.
    message: String,
}

#[derive(Deserialize, JsonSchema)]
struct PromptArgs {
    /// First test argument
    arg1: String,
    /// Second test argument
    arg2: String,
}

#[derive(Deserialize, JsonSchema)]
struct EmbedArgs {
    /// URI of the resource to embed
    #[serde(rename = "resourceUri")]
    resource_uri: String,
}

#[derive(Deserialize, JsonSchema)]
struct TemplateVars {
    id: String,
}

/// The input schema of `json_schema_2020_12_tool`, served as written: the suite's canonical
/// fixture (SEP-1613, and SEP-2106's composition, conditional and anchor keywords).
fn json_schema_2020_12_input() -> JsonObject {
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "$anchor": "addressDef",
                "type": "object",
                "properties": {
                    "street": {"type": "string"},
                    "city": {"type": "string"}
                }
            }
        },
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"}
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {
            "properties": {"contactMethod": {"const": "phone"}},
            "required": ["contactMethod"]
        },
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": false
    });
    match schema {
        serde_json::Value::Object(o) => o,
        _ => unreachable!("an object literal"),
    }
}

fn resource(uri: &str, name: &str, description: &str, mime: &str) -> Resource {
    Resource::new(uri, name)
        .with_description(description)
        .with_mime_type(mime)
}

fn image() -> Content {
    Content::image(TEST_IMAGE_BASE64, "image/png")
}

fn embedded_text(uri: &str, mime: &str, text: &str) -> Content {
    Content::embedded(ResourceContents::text(uri, text).with_mime_type(mime))
}

async fn elicit(
    ctx: &RequestCtx,
    message: &str,
    schema: serde_json::Value,
) -> HandlerResult<String> {
    let r = ctx
        .elicit(ElicitParams::form(
            message,
            schema.as_object().cloned().unwrap_or_default(),
        ))
        .await?;
    let action = serde_json::to_value(r.action)?;
    let content = serde_json::Value::Object(r.content.unwrap_or_default());
    Ok(format!(
        "Elicitation completed: action={}, content={content}",
        action.as_str().unwrap_or_default()
    ))
}

/// Builds the conformance server: every tool, resource, template and prompt the 0.1.16 server
/// scenarios use, with logging, completions and resource subscriptions declared, and the
/// fixtures of the 2026-07-28 suite's modern, tasks and skills scenarios.
pub fn build() -> Server {
    let server = Server::builder("purra-conformance-server", env!("CARGO_PKG_VERSION"))
        .logging()
        .build();
    add_tools(&server)
        .and_then(|()| add_resources(&server))
        .and_then(|()| add_prompts(&server))
        .and_then(|()| crate::modern_server::add(&server))
        .and_then(|()| crate::tasks_server::add(&server))
        .and_then(|()| crate::skills_server::add(&server))
        .expect("the conformance fixtures are valid definitions");
    server.completion(|p: CompleteParams, _ctx| async move {
        let values = match (&p.reference, p.argument.name.as_str()) {
            (CompletionReference::Prompt { name, .. }, "arg1" | "arg2")
                if name == "test_prompt_with_arguments" =>
            {
                ["testValue1", "testValue2"]
                    .iter()
                    .filter(|v| v.starts_with(&p.argument.value))
                    .map(|v| (*v).to_owned())
                    .collect()
            }
            _ => Vec::new(),
        };
        HandlerResult::Ok(Completion::new(values).with_has_more(false))
    });
    server
}

fn add_tools(server: &Server) -> Result<(), RegistrationError> {
    server.tool(
        "test_simple_text",
        "Tests simple text content response",
        |_: NoArgs, _ctx: RequestCtx| async move {
            HandlerResult::Ok("This is a simple text response for testing.")
        },
    )?;
    server.tool(
        "test_image_content",
        "Tests image content response",
        |_: NoArgs, _ctx: RequestCtx| async move { HandlerResult::Ok(vec![image()]) },
    )?;
    server.tool(
        "test_audio_content",
        "Tests audio content response",
        |_: NoArgs, _ctx: RequestCtx| async move {
            HandlerResult::Ok(vec![Content::audio(TEST_AUDIO_BASE64, "audio/wav")])
        },
    )?;
    server.tool(
        "test_embedded_resource",
        "Tests embedded resource content response",
        |_: NoArgs, _ctx: RequestCtx| async move {
            HandlerResult::Ok(vec![embedded_text(
                "test://embedded-resource",
                "text/plain",
                "This is an embedded resource content.",
            )])
        },
    )?;
    server.tool(
        "test_multiple_content_types",
        "Tests response with multiple content types (text, image, resource)",
        |_: NoArgs, _ctx: RequestCtx| async move {
            HandlerResult::Ok(vec![
                Content::text("Multiple content types test:"),
                image(),
                embedded_text(
                    "test://mixed-content-resource",
                    "application/json",
                    r#"{"test":"data","value":123}"#,
                ),
            ])
        },
    )?;
    server.tool(
        "test_tool_with_logging",
        "Tests tool that emits log messages during execution",
        |_: NoArgs, ctx: RequestCtx| async move {
            let steps = [
                "Tool execution started",
                "Tool processing data",
                "Tool execution completed",
            ];
            for (i, text) in steps.iter().enumerate() {
                if i > 0 {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                ctx.log(LoggingLevel::Info, Some(LOGGER), json!(text))
                    .await?;
            }
            HandlerResult::Ok("Tool with logging executed successfully")
        },
    )?;
    server.tool(
        "test_tool_with_progress",
        "Tests tool that reports progress notifications",
        |_: NoArgs, ctx: RequestCtx| async move {
            for (i, step) in [0.0, 50.0, 100.0].into_iter().enumerate() {
                if i > 0 {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                ctx.progress(
                    step,
                    Some(100.0),
                    Some(&format!("Completed step {step} of 100")),
                )
                .await?;
            }
            // The suite's client (TypeScript SDK 1.32.2) drops a progress notification read in
            // the same chunk as the response (typescript-sdk #2580).
            tokio::time::sleep(Duration::from_millis(20)).await;
            let token = ctx
                .progress_token()
                .map(|t| serde_json::to_value(t).unwrap_or_default())
                .map(|t| match t {
                    serde_json::Value::String(s) => s,
                    other => other.to_string(),
                })
                .unwrap_or_else(|| "no progress token".to_owned());
            HandlerResult::Ok(token)
        },
    )?;
    server.tool(
        "test_error_handling",
        "Tests error response handling",
        |_: NoArgs, _ctx: RequestCtx| async move {
            HandlerResult::Ok(CallToolResult::error(
                "This tool intentionally returns an error for testing",
            ))
        },
    )?;
    server.tool(
        "test_reconnection",
        "Tests SSE stream disconnection and client reconnection (SEP-1699): the server closes \
         the stream mid-call and the result arrives after the client reconnects",
        |_: NoArgs, ctx: RequestCtx| async move {
            ctx.close_sse_stream();
            tokio::time::sleep(Duration::from_millis(100)).await;
            HandlerResult::Ok(
                "Reconnection test completed successfully. If you received this, the client \
                 properly reconnected after stream closure.",
            )
        },
    )?;
    server.tool(
        "test_sampling",
        "Tests server-initiated sampling (LLM completion request)",
        |a: SamplingArgs, ctx: RequestCtx| async move {
            let r = ctx
                .create_message(CreateMessageParams::new(
                    vec![SamplingMessage::text_message(Role::User, a.prompt)],
                    100,
                ))
                .await?;
            let block = match &r.content {
                serde_json::Value::Array(items) => items.first().cloned().unwrap_or_default(),
                other => other.clone(),
            };
            let text = block
                .get("text")
                .and_then(|t| t.as_str())
                .unwrap_or("No response");
            HandlerResult::Ok(format!("LLM response: {text}"))
        },
    )?;
    server.tool(
        "test_elicitation",
        "Tests server-initiated elicitation (user input request)",
        |a: ElicitationArgs, ctx: RequestCtx| async move {
            let schema = json!({
                "type": "object",
                "properties": {"response": {"type": "string", "description": "User's response"}},
                "required": ["response"]
            });
            elicit(&ctx, &a.message, schema).await
        },
    )?;
    server.tool(
        "test_elicitation_sep1034_defaults",
        "Tests elicitation with default values per SEP-1034",
        |_: NoArgs, ctx: RequestCtx| async move {
            let schema = json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "User name", "default": "John Doe"},
                    "age": {"type": "integer", "description": "User age", "default": 30},
                    "score": {"type": "number", "description": "User score", "default": 95.5},
                    "status": {
                        "type": "string",
                        "description": "User status",
                        "enum": ["active", "inactive", "pending"],
                        "default": "active"
                    },
                    "verified": {"type": "boolean", "description": "Verification status", "default": true}
                },
                "required": []
            });
            elicit(
                &ctx,
                "Please review and update the form fields with defaults",
                schema,
            )
            .await
        },
    )?;
    server.tool(
        "test_elicitation_sep1330_enums",
        "Tests elicitation with enum schema improvements per SEP-1330",
        |_: NoArgs, ctx: RequestCtx| async move {
            let schema = json!({
                "type": "object",
                "properties": {
                    "untitledSingle": {
                        "type": "string",
                        "description": "Select one option",
                        "enum": ["option1", "option2", "option3"]
                    },
                    "titledSingle": {
                        "type": "string",
                        "description": "Select one option with titles",
                        "oneOf": [
                            {"const": "value1", "title": "First Option"},
                            {"const": "value2", "title": "Second Option"},
                            {"const": "value3", "title": "Third Option"}
                        ]
                    },
                    "legacyEnum": {
                        "type": "string",
                        "description": "Select one option (legacy)",
                        "enum": ["opt1", "opt2", "opt3"],
                        "enumNames": ["Option One", "Option Two", "Option Three"]
                    },
                    "untitledMulti": {
                        "type": "array",
                        "description": "Select multiple options",
                        "minItems": 1,
                        "maxItems": 3,
                        "items": {"type": "string", "enum": ["option1", "option2", "option3"]}
                    },
                    "titledMulti": {
                        "type": "array",
                        "description": "Select multiple options with titles",
                        "minItems": 1,
                        "maxItems": 3,
                        "items": {
                            "anyOf": [
                                {"const": "value1", "title": "First Choice"},
                                {"const": "value2", "title": "Second Choice"},
                                {"const": "value3", "title": "Third Choice"}
                            ]
                        }
                    }
                },
                "required": []
            });
            elicit(&ctx, "Please select options from the enum fields", schema).await
        },
    )?;
    server.raw_tool(
        Tool::new("json_schema_2020_12_tool", json_schema_2020_12_input()).with_description(
            "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
        ),
        |args, _ctx| async move {
            HandlerResult::Ok(CallToolResult::text(format!(
                "JSON Schema 2020-12 tool called with: {}",
                serde_json::Value::Object(args)
            )))
        },
    )?;
    Ok(())
}

fn add_resources(server: &Server) -> Result<(), RegistrationError> {
    server.resource(
        resource(
            "test://static-text",
            "static-text",
            "A static text resource for testing",
            "text/plain",
        ),
        |uri, _ctx| async move {
            HandlerResult::Ok(
                ResourceContents::text(uri, "This is the content of the static text resource.")
                    .with_mime_type("text/plain"),
            )
        },
    );
    server.resource(
        resource(
            "test://static-binary",
            "static-binary",
            "A static binary resource (image) for testing",
            "image/png",
        ),
        |uri, _ctx| async move {
            HandlerResult::Ok(
                ResourceContents::blob(uri, TEST_IMAGE_BASE64).with_mime_type("image/png"),
            )
        },
    );
    server.resource(
        resource(
            "test://watched-resource",
            "watched-resource",
            "A resource clients may subscribe to",
            "text/plain",
        ),
        |uri, _ctx| async move {
            HandlerResult::Ok(
                ResourceContents::text(uri, "Watched resource content")
                    .with_mime_type("text/plain"),
            )
        },
    );
    server.resource_template(
        ResourceTemplate::new("test://template/{id}/data", "template")
            .with_description("A resource template with parameter substitution")
            .with_mime_type("application/json"),
        |uri, TemplateVars { id }, _ctx| async move {
            let text =
                json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
            HandlerResult::Ok(
                ResourceContents::text(uri, text.to_string()).with_mime_type("application/json"),
            )
        },
    )?;
    Ok(())
}

fn add_prompts(server: &Server) -> Result<(), RegistrationError> {
    server.prompt(
        "test_simple_prompt",
        "A simple prompt without arguments",
        |(), _ctx: RequestCtx| async move {
            HandlerResult::Ok(PromptMessage::user("This is a simple prompt for testing."))
        },
    )?;
    server.prompt(
        "test_prompt_with_arguments",
        "A prompt with required arguments",
        |a: PromptArgs, _ctx: RequestCtx| async move {
            HandlerResult::Ok(PromptMessage::user(format!(
                "Prompt with arguments: arg1='{}', arg2='{}'",
                a.arg1, a.arg2
            )))
        },
    )?;
    server.prompt(
        "test_prompt_with_embedded_resource",
        "A prompt that includes an embedded resource",
        |a: EmbedArgs, _ctx: RequestCtx| async move {
            HandlerResult::Ok(vec![
                PromptMessage::new(
                    Role::User,
                    embedded_text(
                        &a.resource_uri,
                        "text/plain",
                        "Embedded resource content for testing.",
                    ),
                ),
                PromptMessage::user("Please process the embedded resource above."),
            ])
        },
    )?;
    server.prompt(
        "test_prompt_with_image",
        "A prompt that includes image content",
        |(), _ctx: RequestCtx| async move {
            HandlerResult::Ok(vec![
                PromptMessage::new(Role::User, image()),
                PromptMessage::user("Please analyze the image above."),
            ])
        },
    )?;
    Ok(())
}
