//! A large catalog through the host adapter: a purra server lists N tools whose input schemas
//! are about B bytes each; the client connects (purra's client prefetches every page), then
//! `purra_mcp::discover_read_tools` binds every tool under the default `Limits` (pages, the
//! strict-profile compilation of each schema, the snapshot digest).
//!
//! `catalog run --tools N --schema-bytes B` prints one JSON line: milliseconds to connect and
//! to discover, the outcome (`ok` with the snapshot digest, or the adapter's error code: a
//! catalog above the adapter's 1 MiB bound is refused with `mcp_catalog_too_large`), and the
//! client process's peak resident size. `catalog serve --tools N --schema-bytes B` is the server
//! (stdio), which `run` starts as its child.

#![allow(clippy::print_stdout)] // a benchmark program: stdout is its result

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use purra_core::{Concurrency, ScopeCheck};
use purra_mcp::{discover_read_tools, CatalogMonitor, Limits, ReadBinding};
use purra_protocol::types::Tool;
use purra_protocol::{Client, ClientOptions, HandlerResult, Server, StderrMode, StdioCommand};
use serde_json::{json, Map, Value};

/// An object schema of about `bytes` bytes in Core's strict profile: string properties with a
/// description and a length bound, the first required.
fn schema(tool: usize, bytes: usize) -> Value {
    let mut props = Map::new();
    let mut size = 64;
    let mut i = 0;
    while size < bytes {
        let prop = json!({"type": "string", "maxLength": 256,
            "description": format!("Property {i} of tool {tool}: a filter the search applies.")});
        size += prop.to_string().len() + 8;
        props.insert(format!("p{i}"), prop);
        i += 1;
    }
    json!({"type": "object", "properties": props, "required": ["p0"]})
}

fn tool_name(i: usize) -> String {
    format!("search_{i:03}")
}

async fn serve(tools: usize, bytes: usize) {
    let server = Server::builder("catalog-bench", "0.1.0").build();
    for i in 0..tools {
        let tool: Tool = serde_json::from_value(json!({
            "name": tool_name(i), "description": format!("Search collection {i}"),
            "inputSchema": schema(i, bytes),
        }))
        .expect("tool");
        server
            .raw_tool(tool, |_args, _ctx| async {
                HandlerResult::Ok(purra_protocol::types::CallToolResult::default())
            })
            .expect("schema compiles");
    }
    server.serve_stdio().await;
}

async fn run(tools: usize, bytes: usize) -> Result<Value, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let cmd = StdioCommand::new(exe)
        .args([
            "serve",
            "--tools",
            &tools.to_string(),
            "--schema-bytes",
            &bytes.to_string(),
        ])
        .stderr(StderrMode::Null);
    let start = Instant::now();
    let conn = Arc::new(
        Client::connect_stdio(cmd, ClientOptions::default())
            .await
            .map_err(|e| format!("connect: {e}"))?,
    );
    let connect_ms = start.elapsed().as_secs_f64() * 1e3;
    let listed = conn.tools().len();
    let monitor = CatalogMonitor::attach(&conn);
    let bindings: BTreeMap<String, ReadBinding> = (0..tools)
        .map(|i| {
            (
                tool_name(i),
                ReadBinding::new(tool_name(i), format!("Search {i}"), ScopeCheck::OptOut)
                    .concurrency(Concurrency::Safe),
            )
        })
        .collect();
    let start = Instant::now();
    let outcome =
        discover_read_tools(&conn, "catalog", &bindings, &monitor, Limits::default()).await;
    let discover_ms = start.elapsed().as_secs_f64() * 1e3;
    let (outcome, digest, registrations) = match outcome {
        Ok(cat) => (
            "ok".to_owned(),
            cat.snapshot.revision_digest().to_string(),
            cat.registrations.len(),
        ),
        Err(e) => (e.to_string(), String::new(), 0),
    };
    let catalog_bytes: usize = conn
        .tools()
        .iter()
        .map(|t| serde_json::to_string(t).map_or(0, |s| s.len()))
        .sum();
    conn.close().await;
    let (_, peak) = purra_bench::rss_of(std::process::id()).unwrap_or_default();
    Ok(json!({
        "tools": tools, "schema_bytes": bytes, "listed": listed, "catalog_bytes": catalog_bytes,
        "connect_ms": connect_ms, "discover_ms": discover_ms, "outcome": outcome,
        "registrations": registrations, "digest": digest, "peak_rss_bytes": peak,
    }))
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_default();
    let (mut tools, mut bytes) = (256usize, 16 * 1024usize);
    while let Some(a) = args.next() {
        let v = args.next().and_then(|v| v.parse().ok());
        match (a.as_str(), v) {
            ("--tools", Some(n)) => tools = n,
            ("--schema-bytes", Some(n)) => bytes = n,
            _ => fail(&format!("bad argument {a:?}")),
        }
    }
    match mode.as_str() {
        "serve" => serve(tools, bytes).await,
        "run" => match run(tools, bytes).await {
            Ok(line) => println!("{line}"),
            Err(e) => fail(&e),
        },
        _ => fail("usage: catalog run|serve [--tools N] [--schema-bytes B]"),
    }
}

fn fail(why: &str) -> ! {
    eprintln!("catalog: {why}");
    std::process::exit(1)
}
