//! The host adapter's fixture server: one tool per outcome the adapter must classify, with
//! schemas inside Core's strict profile (except `with_default`, which must be refused), a
//! configurable page size and padding for limit edges, and a canary string in every error text.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use purra_protocol::types::*;
use purra_protocol::{ErrorObject, HandlerError, HandlerResult, RequestCtx, RpcErrorCode, Server};
use serde_json::{json, Value};

/// How to build the fixture.
#[derive(Debug, Clone)]
pub struct AdapterFixture {
    /// Tools per `tools/list` page.
    pub page_size: usize,
    /// Extra tools `pad_0`, `pad_1`, … (for catalog limits).
    pub pad_tools: usize,
    /// Description length of every pad tool.
    pub pad_description_bytes: usize,
    /// Text that every error message and error result carries.
    pub canary: String,
}

impl Default for AdapterFixture {
    fn default() -> Self {
        AdapterFixture {
            page_size: 100,
            pad_tools: 0,
            pad_description_bytes: 8,
            canary: "CANARY-7f3a".into(),
        }
    }
}

/// What the fixture observed, for tests to check on the server side.
#[derive(Debug, Default)]
pub struct Observed {
    /// How many `tools/call` requests each tool received.
    pub calls: Mutex<HashMap<String, u64>>,
    /// How many calls were cancelled by the client.
    pub cancellations: AtomicU64,
}

impl Observed {
    /// Calls of `tool` so far.
    pub fn calls_of(&self, tool: &str) -> u64 {
        self.calls
            .lock()
            .expect("calls lock")
            .get(tool)
            .copied()
            .unwrap_or(0)
    }
    fn record(&self, tool: &str) {
        *self
            .calls
            .lock()
            .expect("calls lock")
            .entry(tool.to_owned())
            .or_default() += 1;
    }
}

fn obj(v: Value) -> JsonObject {
    match v {
        Value::Object(o) => o,
        _ => JsonObject::new(),
    }
}

fn tool(name: &str, description: &str, input: Value, output: Option<Value>) -> Tool {
    let tool = Tool::new(name, obj(input)).with_description(description);
    match output {
        Some(o) => tool.with_output_schema(obj(o)),
        None => tool,
    }
}

fn int_arg(name: &str) -> Value {
    json!({"type": "object", "properties": {name: {"type": "integer", "minimum": 0}}, "required": [name], "additionalProperties": false})
}

fn no_args() -> Value {
    json!({"type": "object", "additionalProperties": false})
}

const LOOKUP_OUT: &str = r#"{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string"}},"required":["id","name"],"additionalProperties":false}"#;

impl AdapterFixture {
    /// Builds the server and the handle on what it observes.
    pub fn build(&self) -> (Server, Arc<Observed>) {
        // Output schemas are not enforced here: lookup_text_only and lookup_wrong break theirs,
        // and the adapter must catch it.
        let server = Server::builder("adapter-fixture", "1.0.0")
            .page_size(self.page_size)
            .enforce_output_schemas(false)
            .build();
        let seen = Arc::new(Observed::default());
        let canary = self.canary.clone();
        let lookup_out: Value = serde_json::from_str(LOOKUP_OUT).expect("valid JSON");
        let reg = |t: Tool, f: fn(&Value, &str) -> HandlerResult<CallToolResult>| {
            let seen = seen.clone();
            let canary = canary.clone();
            let name = t.name.clone();
            server
                .raw_tool(t, move |args, _ctx: RequestCtx| {
                    seen.record(&name);
                    let out = f(&Value::Object(args), &canary);
                    async move { out }
                })
                .expect("fixture schemas compile");
        };
        reg(
            tool(
                "search",
                "Searches documents",
                json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "properties": {"query": {"type": "string", "minLength": 1}}, "required": ["query"], "additionalProperties": false}),
                None,
            ),
            |a, _| {
                Ok(CallToolResult::text(format!(
                    "found: {}",
                    a["query"].as_str().unwrap_or_default()
                )))
            },
        );
        reg(
            tool(
                "lookup",
                "Looks an item up",
                int_arg("id"),
                Some(lookup_out.clone()),
            ),
            |a, _| {
                let id = a["id"].as_i64().unwrap_or_default();
                let sc = json!({"id": id, "name": format!("item {id}")});
                Ok(CallToolResult::structured(sc))
            },
        );
        // Declares an output schema but answers with JSON-looking text only.
        reg(
            tool(
                "lookup_text_only",
                "Answers JSON text only",
                int_arg("id"),
                Some(lookup_out.clone()),
            ),
            |a, _| {
                Ok(CallToolResult::text(
                    json!({"id": a["id"], "name": "x"}).to_string(),
                ))
            },
        );
        reg(
            tool(
                "lookup_wrong",
                "Answers the wrong structure",
                int_arg("id"),
                Some(lookup_out),
            ),
            |_, _| Ok(CallToolResult::default().with_structured_content(json!({"id": "one"}))),
        );
        reg(
            tool("image", "Answers an image", no_args(), None),
            |_, _| {
                Ok(CallToolResult::new(vec![Content::image(
                    "iVBORw0KGgo=",
                    "image/png",
                )]))
            },
        );
        reg(
            tool("link", "Answers a resource link", no_args(), None),
            |_, _| {
                Ok(CallToolResult::new(vec![Content::resource_link(
                    Resource::new("file:///etc/passwd", "passwd"),
                )]))
            },
        );
        reg(
            tool("fails", "Fails with isError", no_args(), None),
            |_, canary| Ok(CallToolResult::error(format!("tool failed: {canary}"))),
        );
        reg(
            tool("rpc_fails", "Fails with a JSON-RPC error", no_args(), None),
            |_, canary| {
                Err(HandlerError::from(
                    ErrorObject::new(RpcErrorCode(-32000), format!("remote says {canary}"))
                        .with_data(json!({"detail": canary})),
                ))
            },
        );
        reg(
            tool("blocks", "Answers n text blocks", int_arg("n"), None),
            |a, _| {
                let n = a["n"].as_u64().unwrap_or_default();
                Ok(CallToolResult::new(
                    (0..n).map(|i| Content::text(format!("b{i}"))).collect(),
                ))
            },
        );
        reg(
            tool("big", "Answers n bytes of text", int_arg("bytes"), None),
            |a, _| {
                Ok(CallToolResult::text(
                    "x".repeat(a["bytes"].as_u64().unwrap_or_default() as usize),
                ))
            },
        );
        reg(
            tool(
                "with_default",
                "Has a default in its schema",
                json!({"type": "object", "properties": {"q": {"type": "string", "default": "x"}}}),
                None,
            ),
            |_, _| Ok(CallToolResult::text("never")),
        );
        let mut tasks = tool("tasks_required", "Runs only as a task", no_args(), None);
        tasks.execution = Some(ToolExecution::new().with_task_support(TaskSupport::Required));
        reg(tasks, |_, _| Ok(CallToolResult::text("never")));
        reg(
            tool("exit", "Ends the server process", no_args(), None),
            |_, _| {
                std::process::exit(3);
            },
        );
        let s1 = seen.clone();
        server
            .raw_tool(tool("observed", "What the server saw of a tool", json!({"type": "object", "properties": {"tool": {"type": "string"}}, "required": ["tool"]}), None), move |a, _ctx: RequestCtx| {
                let seen = s1.clone();
                async move {
                    let t = a.get("tool").and_then(Value::as_str).unwrap_or_default();
                    HandlerResult::Ok(CallToolResult::text(format!(
                        "calls={} cancellations={}",
                        seen.calls_of(t),
                        seen.cancellations.load(Ordering::SeqCst)
                    )))
                }
            })
            .expect("fixture schemas compile");
        for i in 0..self.pad_tools {
            let desc = "p".repeat(self.pad_description_bytes);
            reg(tool(&format!("pad_{i}"), &desc, no_args(), None), |_, _| {
                Ok(CallToolResult::text("pad"))
            });
        }
        // Tools whose handlers are async or need the server.
        let s2 = seen.clone();
        server
            .raw_tool(tool("slow", "Sleeps ms milliseconds", int_arg("ms"), None), move |a, ctx: RequestCtx| {
                let seen = s2.clone();
                async move {
                    seen.record("slow");
                    let ms = a.get("ms").and_then(Value::as_u64).unwrap_or_default();
                    tokio::select! {
                        _ = ctx.cancelled() => {
                            seen.cancellations.fetch_add(1, Ordering::SeqCst);
                            HandlerResult::Ok(CallToolResult::text("cancelled"))
                        }
                        _ = tokio::time::sleep(Duration::from_millis(ms)) => HandlerResult::Ok(CallToolResult::text("slept")),
                    }
                }
            })
            .expect("fixture schemas compile");
        let s3 = seen.clone();
        let handle = server.clone();
        server
            .raw_tool(
                tool(
                    "change_list",
                    "Changes the tool list while it runs",
                    no_args(),
                    None,
                ),
                move |_a, _ctx: RequestCtx| {
                    let seen = s3.clone();
                    let server = handle.clone();
                    async move {
                        seen.record("change_list");
                        let n = seen.calls_of("change_list");
                        server
                            .raw_tool(
                                tool(&format!("added_{n}"), "Added at runtime", no_args(), None),
                                |_a, _c| async { HandlerResult::Ok(CallToolResult::text("added")) },
                            )
                            .expect("fixture schemas compile");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        HandlerResult::Ok(CallToolResult::text("changed"))
                    }
                },
            )
            .expect("fixture schemas compile");
        (server, seen)
    }
}
