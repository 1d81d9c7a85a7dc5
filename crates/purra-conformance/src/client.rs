//! The client scenarios of the conformance suite 0.1.16 that purra implements, each run with
//! purra's Streamable HTTP client against the suite's mock server.

use std::time::Duration;

use purra_protocol::types::{CallToolResult, ElicitAction, ElicitResult};
use purra_protocol::{Client, ClientOptions, Connection, HttpClientOptions};
use serde_json::json;

/// The scenarios [`run`] knows, by the names the suite gives them.
pub const SCENARIOS: [&str; 4] = [
    "initialize",
    "tools_call",
    "elicitation-sep1034-client-defaults",
    "sse-retry",
];

/// How long one request may take; the suite's own per-scenario timeout is 30 s.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

fn options() -> ClientOptions {
    ClientOptions::default()
        .client_info("purra-conformance-client", env!("CARGO_PKG_VERSION"))
        .request_timeout(REQUEST_TIMEOUT)
}

async fn connect(url: &str, options: ClientOptions) -> Result<Connection, String> {
    Client::connect_http(url, HttpClientOptions::default(), options)
        .await
        .map_err(|e| format!("connecting to {url}: {e}"))
}

async fn call(
    conn: &Connection,
    tool: &str,
    args: serde_json::Value,
) -> Result<CallToolResult, String> {
    if !conn.tools().iter().any(|t| t.name == tool) {
        return Err(format!("the server does not list the tool {tool}"));
    }
    let r = conn
        .call_tool(tool, args)
        .await
        .map_err(|e| format!("calling {tool}: {e}"))?;
    if r.is_error() {
        return Err(format!(
            "{tool} failed: {}",
            r.texts().collect::<Vec<_>>().join(" ")
        ));
    }
    Ok(r)
}

/// Runs `scenario` against the mock server at `url`; `Err` says what went wrong.
pub async fn run(scenario: &str, url: &str) -> Result<(), String> {
    match scenario {
        // Initialize (2025-11-25, clientInfo), then close.
        "initialize" => {
            let conn = connect(url, options()).await?;
            conn.close().await;
            Ok(())
        }
        // Initialize, list the tools, call add_numbers {a: 5, b: 3}.
        "tools_call" => {
            let conn = connect(url, options()).await?;
            let r = call(&conn, "add_numbers", json!({"a": 5, "b": 3})).await;
            conn.close().await;
            let r = r?;
            if !r.texts().any(|t| t.trim_end().ends_with(" 8")) {
                return Err(format!("add_numbers(5, 3) did not answer 8: {r:?}"));
            }
            Ok(())
        }
        // Accept the elicitation with nothing filled in: the client applies the schema's
        // defaults (SEP-1034) before it answers.
        "elicitation-sep1034-client-defaults" => {
            let opts = options()
                .apply_elicitation_defaults(true)
                .on_elicitation(false, |_params| async move {
                    Ok(ElicitResult::action(ElicitAction::Accept))
                });
            let conn = connect(url, opts).await?;
            let r = call(&conn, "test_client_elicitation_defaults", json!({})).await;
            conn.close().await;
            r.map(drop)
        }
        // SEP-1699: the server ends the tools/call stream after a priming event with
        // `retry: 500`; the client waits that long, resumes with GET and Last-Event-ID, and
        // reads the result there.
        "sse-retry" => {
            let conn = connect(url, options()).await?;
            let r = call(&conn, "test_reconnection", json!({})).await;
            conn.close().await;
            r.map(drop)
        }
        other => Err(format!(
            "unknown scenario {other:?} (known: {})",
            SCENARIOS.join(", ")
        )),
    }
}
