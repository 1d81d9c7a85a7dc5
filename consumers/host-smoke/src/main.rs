//! Installed-consumer smoke: launch a separate stdio MCP server, discover one tool through host
//! bindings, call it through a Core agent, close, and check that the server process is gone.
//!
//! Usage: `host-smoke <path to an MCP server speaking the fixture contract>`.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use purra_core::{
    Agent, Catalog, Concurrency, Lease, RunId, RunOutcome, RunRequest, ScopeCheck, ScopeDecision, ScriptedModel,
};
use purra_mcp::{discover_read_tools, CatalogMonitor, Limits, ReadBinding};
use purra_protocol::{Client, ClientOptions, StdioCommand};
use serde_json::json;

#[tokio::main]
async fn main() -> ExitCode {
    let Some(server) = std::env::args().nth(1) else {
        eprintln!("usage: host-smoke <server binary>");
        return ExitCode::from(2);
    };
    match smoke(&server).await {
        Ok(summary) => {
            eprintln!("host-smoke: ok: {summary}");
            ExitCode::SUCCESS
        }
        Err(why) => {
            eprintln!("host-smoke: FAILED: {why}");
            ExitCode::FAILURE
        }
    }
}

async fn smoke(server: &str) -> Result<String, String> {
    let conn = Client::connect_stdio(StdioCommand::new(server), ClientOptions::default())
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let pid = conn.pid().ok_or("no child pid")?;
    let conn = Arc::new(conn);
    let monitor = CatalogMonitor::attach(&conn);
    let bindings = BTreeMap::from([(
        "echo".to_owned(),
        ReadBinding::new(
            "echo_text",
            "Echo text",
            ScopeCheck::check(|_args, run| {
                if run.agent == "smoke" {
                    ScopeDecision::Allow
                } else {
                    ScopeDecision::Deny
                }
            }),
        )
        .concurrency(Concurrency::Safe),
    )]);
    let catalog = discover_read_tools(&conn, "example", &bindings, &monitor, Limits::default())
        .await
        .map_err(|e| format!("discovery: {e}"))?;
    let digest = catalog.snapshot.revision_digest().as_str().to_owned();
    let model = Arc::new(ScriptedModel::new(
        "scripted",
        vec![
            ScriptedModel::calls(&[("c1", "echo_text", json!({"text": "smoke"}))]),
            ScriptedModel::text("echoed"),
        ],
    ));
    let catalog = Arc::new(Catalog::new(catalog.registrations).map_err(|e| format!("catalog: {e}"))?);
    let agent = Agent::builder("smoke", model.clone(), catalog)
        .build()
        .map_err(|e| format!("agent: {e}"))?;
    let outcome = agent
        .run(RunRequest {
            run_id: RunId::new("smoke-1"),
            root_run_id: None,
            input: "echo something".into(),
            lease: Lease::unbounded(),
        })
        .await;
    if outcome != (RunOutcome::Completed { text: "echoed".into() }) {
        return Err(format!("outcome {outcome:?}"));
    }
    let transcript = format!("{:?}", model.transcripts().last());
    if !transcript.contains("smoke") {
        return Err(format!("the tool result is not in the transcript: {transcript}"));
    }
    conn.close().await;
    for _ in 0..100 {
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            return Ok(format!("called echo_text through the agent; snapshot {digest}; server pid {pid} exited"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err(format!("the server process {pid} is still there after close"))
}
