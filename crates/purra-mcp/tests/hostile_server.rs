//! A scripted server that breaks the rules in ways a serde-based client would not notice: a
//! `tools/list` naming one tool twice with different schemas, and results or pages that repeat a
//! member name. Discovery and calls fail closed with a code, never by picking one reading.
//! The server is a task speaking raw frames over `memory::raw()`, so every byte it sends is
//! exactly what the test wrote.

use std::collections::BTreeMap;
use std::sync::Arc;

use purra_core::{Concurrency, ErrorCode, Lease, RunContext, RunId, ScopeCheck};
use purra_mcp::{codes, discover_read_tools, CatalogMonitor, Limits, ReadBinding, ReadCatalog};
use purra_protocol::memory::{self, RawEnd};
use purra_protocol::{Client, ClientOptions, Connection};
use serde_json::{json, Value};

const SCHEMA: &str = r#"{"type":"object","properties":{"q":{"type":"string"}},"required":["q"],"additionalProperties":false}"#;

/// Serves `initialize`, then answers every `tools/list` with `list` and every `tools/call` with
/// `result` (raw JSON text, sent as written).
fn scripted(mut raw: RawEnd, list: String, result: String) {
    tokio::spawn(async move {
        while let Some(frame) = raw.recv().await {
            let msg: Value = serde_json::from_str(&frame).unwrap();
            let Some(id) = msg.get("id").map(Value::to_string) else {
                continue; // notifications/initialized
            };
            let answer = match msg["method"].as_str().unwrap() {
                "initialize" => r#"{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"scripted","version":"1"}}"#.to_owned(),
                "tools/list" => list.clone(),
                "tools/call" => result.clone(),
                other => panic!("unexpected {other}"),
            };
            raw.send(format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{answer}}}"#
            ))
            .await;
        }
    });
}

async fn connect(list: String, result: String) -> (Arc<Connection>, CatalogMonitor) {
    let (client, server) = memory::raw();
    scripted(server, list, result);
    let conn = Client::connect(client, ClientOptions::default())
        .await
        .unwrap();
    let monitor = CatalogMonitor::attach(&conn);
    (Arc::new(conn), monitor)
}

fn tool(name: &str, schema: &str) -> String {
    format!(r#"{{"name":"{name}","description":"Searches","inputSchema":{schema}}}"#)
}

async fn discover(
    conn: &Arc<Connection>,
    monitor: &CatalogMonitor,
) -> Result<ReadCatalog, ErrorCode> {
    let bindings = BTreeMap::from([(
        "search".to_owned(),
        ReadBinding::new("search", "Search", ScopeCheck::OptOut).concurrency(Concurrency::Safe),
    )]);
    discover_read_tools(conn, "scripted", &bindings, monitor, Limits::default())
        .await
        .map_err(|e| e.code)
}

async fn call(cat: &ReadCatalog) -> Result<Value, ErrorCode> {
    let run = RunContext {
        run_id: RunId::new("run-1"),
        root_run_id: RunId::new("run-1"),
        agent: "tester".into(),
        lease: Lease::unbounded(),
    };
    (cat.registrations[0].handler())(json!({"q": "x"}), run)
        .await
        .map_err(|e| e.code)
}

const TEXT_RESULT: &str = r#"{"content":[{"type":"text","text":"found"}]}"#;

#[tokio::test]
async fn a_tool_listed_twice_makes_discovery_refuse_the_catalog() {
    // Control: listed once, it binds and calls.
    let once = format!(r#"{{"tools":[{}]}}"#, tool("search", SCHEMA));
    let (conn, monitor) = connect(once, TEXT_RESULT.into()).await;
    let cat = discover(&conn, &monitor).await.unwrap();
    assert_eq!(
        call(&cat).await,
        Ok(json!({"text": ["found"], "structured": null}))
    );

    // The same name with a second, wider schema: neither is picked.
    let wider =
        r#"{"type":"object","properties":{"q":{"type":"string"},"path":{"type":"string"}}}"#;
    let twice = format!(
        r#"{{"tools":[{},{}]}}"#,
        tool("search", SCHEMA),
        tool("search", wider)
    );
    let (conn, monitor) = connect(twice, TEXT_RESULT.into()).await;
    assert_eq!(
        discover(&conn, &monitor).await.err(),
        Some(codes::catalog_ambiguous())
    );

    // Listed twice identically is refused too: the catalog still has two entries for one name.
    let same = format!(
        r#"{{"tools":[{},{}]}}"#,
        tool("search", SCHEMA),
        tool("search", SCHEMA)
    );
    let (conn, monitor) = connect(same, TEXT_RESULT.into()).await;
    assert_eq!(
        discover(&conn, &monitor).await.err(),
        Some(codes::catalog_ambiguous())
    );

    // A duplicate of a tool the host did not select is not the host's concern.
    let other = format!(
        r#"{{"tools":[{},{},{}]}}"#,
        tool("search", SCHEMA),
        tool("other", SCHEMA),
        tool("other", wider)
    );
    let (conn, monitor) = connect(other, TEXT_RESULT.into()).await;
    assert!(discover(&conn, &monitor).await.is_ok());
}

#[tokio::test]
async fn a_result_that_repeats_a_member_name_is_refused_not_read_last_wins() {
    let list = format!(
        r#"{{"tools":[{}]}}"#,
        tool(
            "search",
            r#"{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}"#
        )
    );
    // serde's derive already refuses a repeated field of a struct; keep it refused.
    let twice_error =
        r#"{"content":[{"type":"text","text":"found"}],"isError":true,"isError":false}"#;
    let (conn, monitor) = connect(list.clone(), twice_error.into()).await;
    let cat = discover(&conn, &monitor).await.unwrap();
    assert_eq!(call(&cat).await, Err(codes::result_invalid()));

    // Inside structuredContent (a map) serde_json reads the last `n` and calls this a success.
    let twice_structured =
        r#"{"content":[{"type":"text","text":"{}"}],"structuredContent":{"n":1,"n":2}}"#;
    let (conn, monitor) = connect(list.clone(), twice_structured.into()).await;
    let cat = discover(&conn, &monitor).await.unwrap();
    assert_eq!(call(&cat).await, Err(codes::result_invalid()));

    // A lone surrogate is not I-JSON either.
    let surrogate = r#"{"content":[{"type":"text","text":"\ud800"}]}"#;
    let (conn, monitor) = connect(list.clone(), surrogate.into()).await;
    let cat = discover(&conn, &monitor).await.unwrap();
    assert_eq!(call(&cat).await, Err(codes::result_invalid()));

    // A tools/list page whose schema says `type` twice has two readings: refused.
    let two_types = format!(
        r#"{{"tools":[{}]}}"#,
        tool("search", r#"{"type":"string","type":"object"}"#)
    );
    let (conn, monitor) = connect(two_types, TEXT_RESULT.into()).await;
    assert_eq!(
        discover(&conn, &monitor).await.err(),
        Some(codes::result_invalid())
    );
}
