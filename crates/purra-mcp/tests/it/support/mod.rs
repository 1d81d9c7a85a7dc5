//! Helpers shared by purra-mcp's integration tests: a scripted server speaking raw frames over
//! `memory::raw()`, a connection to it with its catalog monitor, read discovery of its `search`
//! tool, and a call through a registration's handler.

#![allow(dead_code)] // each test module uses what it needs

use std::collections::BTreeMap;
use std::sync::Arc;

use purra_core::{Concurrency, ErrorCode, Lease, RunContext, RunId, ScopeCheck};
use purra_mcp::{discover_read_tools, CatalogMonitor, Limits, ReadBinding, ReadCatalog};
use purra_protocol::memory::{self, RawEnd};
use purra_protocol::{Client, ClientOptions, Connection};
use serde_json::Value;

/// Serves `initialize`, then answers every `tools/list` with `list` and every `tools/call` with
/// `result` (raw JSON text, sent as written).
pub fn scripted(mut raw: RawEnd, list: String, result: String) {
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

/// A client connected to a [`scripted`] server, and its catalog monitor.
pub async fn connect(list: String, result: String) -> (Arc<Connection>, CatalogMonitor) {
    let (client, server) = memory::raw();
    scripted(server, list, result);
    let conn = Client::connect(client, ClientOptions::default())
        .await
        .unwrap();
    let monitor = CatalogMonitor::attach(&conn);
    (Arc::new(conn), monitor)
}

/// The read binding of the scripted servers' `search` tool.
pub fn search_bindings() -> BTreeMap<String, ReadBinding> {
    BTreeMap::from([(
        "search".to_owned(),
        ReadBinding::new("search", "Search", ScopeCheck::OptOut).concurrency(Concurrency::Safe),
    )])
}

/// Read discovery of the `search` tool on the server `scripted`.
pub async fn discover(
    conn: &Arc<Connection>,
    monitor: &CatalogMonitor,
) -> Result<ReadCatalog, ErrorCode> {
    discover_read_tools(
        conn,
        "scripted",
        &search_bindings(),
        monitor,
        Limits::default(),
    )
    .await
    .map_err(|e| e.code)
}

/// The run a test's calls belong to, with `lease`.
pub fn run(lease: Lease) -> RunContext {
    RunContext {
        run_id: RunId::new("run-1"),
        root_run_id: RunId::new("run-1"),
        agent: "tester".into(),
        lease,
        idempotency_key: None,
    }
}

/// Calls the first registration of `cat` with `args` (unbounded lease); the error's code.
pub async fn call(cat: &ReadCatalog, args: Value) -> Result<Value, ErrorCode> {
    (cat.registrations[0].handler())(args, run(Lease::unbounded()))
        .await
        .map_err(|e| e.code)
}
