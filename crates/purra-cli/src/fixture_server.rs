//! The fixture server of `peers/FIXTURES.md`, as purra implements it (`fixture-purra`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use purra_protocol::types::*;
use purra_protocol::{HandlerResult, Json, RegistrationError, RequestCtx, Server};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Deserialize, JsonSchema)]
struct EchoArgs {
    text: String,
}

#[derive(Deserialize, JsonSchema)]
struct AddArgs {
    a: f64,
    b: f64,
}

#[derive(Serialize, JsonSchema)]
struct AddOut {
    sum: f64,
}

#[derive(Deserialize, JsonSchema)]
struct NoArgs {}

#[derive(Deserialize, JsonSchema)]
struct StepsArgs {
    steps: u32,
}

#[derive(Deserialize, JsonSchema)]
struct PromptArgs {
    prompt: String,
}

#[derive(Deserialize, JsonSchema)]
struct MessageArgs {
    message: String,
}

#[derive(Deserialize, JsonSchema)]
struct NameArgs {
    name: String,
}

#[derive(Deserialize, JsonSchema)]
struct UriArgs {
    uri: String,
}

#[derive(Deserialize, JsonSchema)]
struct GreetArgs {
    name: String,
    style: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
struct ItemVars {
    id: String,
}

fn text_resource(uri: &str, name: &str) -> Resource {
    Resource::new(uri, name).with_mime_type("text/plain")
}

fn read_text(uri: String, text: String) -> HandlerResult<ResourceContents> {
    Ok(ResourceContents::text(uri, text).with_mime_type("text/plain"))
}

/// Builds the fixture server; `page_size` is 2 as the contract requires.
pub fn build() -> Server {
    let server = Server::builder("fixture-purra", "1.0.0")
        .instructions("fixture server")
        .page_size(2)
        .logging()
        .build();
    register(&server).expect("the fixture's definitions are valid");
    server
}

fn register(server: &Server) -> Result<(), RegistrationError> {
    let cancellations = Arc::new(AtomicU64::new(0));

    server.tool(
        "echo",
        "Echoes the text",
        |a: EchoArgs, _ctx: RequestCtx| async move { HandlerResult::Ok(a.text) },
    )?;
    server.tool(
        "add",
        "Adds two numbers",
        |a: AddArgs, _ctx: RequestCtx| async move {
            HandlerResult::Ok(Json(AddOut { sum: a.a + a.b }))
        },
    )?;
    server.tool(
        "fail",
        "Always fails",
        |_: NoArgs, _ctx: RequestCtx| async move {
            HandlerResult::Ok(CallToolResult::error("fixture failure"))
        },
    )?;
    server.tool(
        "progress",
        "Reports progress",
        |a: StepsArgs, ctx: RequestCtx| async move {
            for i in 1..=a.steps {
                tokio::time::sleep(Duration::from_millis(20)).await;
                ctx.progress(
                    f64::from(i),
                    Some(f64::from(a.steps)),
                    Some(&format!("step {i}")),
                )
                .await?;
            }
            // typescript-sdk #2580: its client drops progress read together with the response.
            tokio::time::sleep(Duration::from_millis(20)).await;
            HandlerResult::Ok(format!("done {}", a.steps))
        },
    )?;
    let counter = cancellations.clone();
    server.tool("block", "Waits until cancelled", move |_: NoArgs, ctx: RequestCtx| {
        let counter = counter.clone();
        async move {
            tokio::select! {
                _ = ctx.cancelled() => {
                    counter.fetch_add(1, Ordering::SeqCst);
                    HandlerResult::Ok("cancelled".to_owned())
                }
                _ = tokio::time::sleep(Duration::from_secs(30)) => HandlerResult::Ok("not cancelled".to_owned()),
            }
        }
    })?;
    let counter = cancellations.clone();
    server.tool(
        "cancellations",
        "Counts cancellations",
        move |_: NoArgs, _ctx: RequestCtx| {
            let n = counter.load(Ordering::SeqCst);
            async move { HandlerResult::Ok(n.to_string()) }
        },
    )?;
    server.tool(
        "log",
        "Logs at four levels",
        |_: NoArgs, ctx: RequestCtx| async move {
            for (level, name) in [
                (LoggingLevel::Debug, "debug"),
                (LoggingLevel::Info, "info"),
                (LoggingLevel::Warning, "warning"),
                (LoggingLevel::Error, "error"),
            ] {
                ctx.log(level, Some("fixture"), json!(format!("{name} message")))
                    .await?;
            }
            HandlerResult::Ok("logged")
        },
    )?;
    server.tool(
        "sample",
        "Asks the client to sample",
        |a: PromptArgs, ctx: RequestCtx| async move {
            let r = ctx
                .create_message(CreateMessageParams::new(
                    vec![SamplingMessage::text_message(Role::User, a.prompt)],
                    64,
                ))
                .await?;
            let text = r
                .content
                .get("text")
                .and_then(|t| t.as_str())
                .unwrap_or_default();
            HandlerResult::Ok(text.to_owned())
        },
    )?;
    server.tool("elicit", "Asks the user for a name", |a: MessageArgs, ctx: RequestCtx| async move {
        let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
        let r = ctx
            .elicit(ElicitParams::form(a.message, schema.as_object().cloned().unwrap_or_default()))
            .await?;
        let action = match r.action {
            ElicitAction::Accept => "accept",
            ElicitAction::Decline => "decline",
            ElicitAction::Cancel => "cancel",
            _ => "unknown",
        };
        let name = r
            .content
            .as_ref()
            .and_then(|c| c.get("name"))
            .and_then(|n| n.as_str())
            .unwrap_or_default();
        HandlerResult::Ok(format!("{action}:{name}"))
    })?;
    server.tool(
        "roots",
        "Lists the client's roots",
        |_: NoArgs, ctx: RequestCtx| async move {
            let roots = ctx.list_roots().await?;
            HandlerResult::Ok(
                roots
                    .iter()
                    .map(|r| r.uri.as_str())
                    .collect::<Vec<_>>()
                    .join(","),
            )
        },
    )?;
    let handle = server.clone();
    server.tool(
        "add_tool",
        "Registers a tool at runtime",
        move |a: NameArgs, _ctx: RequestCtx| {
            let server = handle.clone();
            async move {
                let name = a.name.clone();
                server.tool(
                    &a.name,
                    "A tool added at runtime",
                    move |_: NoArgs, _ctx: RequestCtx| {
                        let text = format!("{name} called");
                        async move { HandlerResult::Ok(text) }
                    },
                )?;
                HandlerResult::Ok(format!("added {}", a.name))
            }
        },
    )?;
    let handle = server.clone();
    server.tool(
        "touch",
        "Announces a resource update",
        move |a: UriArgs, _ctx: RequestCtx| {
            let server = handle.clone();
            async move {
                server.notify_resource_updated(&a.uri).await;
                HandlerResult::Ok(format!("touched {}", a.uri))
            }
        },
    )?;

    for n in 1..=5 {
        server.resource(
            text_resource(&format!("fixture://static/{n}"), &format!("static-{n}")),
            move |uri, _ctx| async move { read_text(uri, format!("static {n}")) },
        );
    }
    server.resource(
        text_resource("fixture://watched", "watched"),
        |uri, _ctx| async move { read_text(uri, "watched".into()) },
    );
    server.resource_template(
        ResourceTemplate::new("fixture://items/{id}", "item").with_mime_type("text/plain"),
        |uri, ItemVars { id }, _ctx| async move { read_text(uri, format!("item {id}")) },
    )?;

    server.prompt(
        "greet",
        "Greeting",
        |a: GreetArgs, _ctx: RequestCtx| async move {
            let mut text = format!("Hello, {}!", a.name);
            if a.style.as_deref() == Some("loud") {
                text = text.to_uppercase();
            }
            HandlerResult::Ok(PromptMessage::user(text))
        },
    )?;
    server.completion(|p: CompleteParams, _ctx| async move {
        let values = match (&p.reference, p.argument.name.as_str()) {
            (CompletionReference::Prompt { name, .. }, "name") if name == "greet" => {
                ["alice", "alan", "bob"]
                    .iter()
                    .filter(|v| v.starts_with(&p.argument.value))
                    .map(|v| (*v).to_owned())
                    .collect()
            }
            _ => Vec::new(),
        };
        HandlerResult::Ok(Completion::new(values))
    });
    Ok(())
}
