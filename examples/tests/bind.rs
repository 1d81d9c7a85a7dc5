//! Every typed tool of the examples, of purra's example (fixture) server and of the demo server
//! binds through purra-mcp's read discovery unchanged: the schemas purra derives pass Core's
//! strict `purra.output-schema/v1` profile as they are.

use std::collections::BTreeMap;
use std::sync::Arc;

use purra_core::{Concurrency, ScopeCheck};
use purra_mcp::{discover_read_tools, CatalogMonitor, Limits, ReadBinding};
use purra_protocol::{memory, Client, ClientOptions, Server};

#[allow(dead_code)]
#[path = "../weather.rs"]
mod weather;

#[allow(dead_code)]
#[path = "../counter.rs"]
mod counter;

#[allow(dead_code)]
#[path = "../axum_app.rs"]
mod axum_app;

/// Binds every tool `server` lists as a read tool under its own name; returns the names.
async fn bind_every_tool(server: Server, catalog: &str) -> Vec<String> {
    let (ours, theirs) = memory::pair();
    let _session = server.start(ours);
    let conn = Arc::new(
        Client::connect(theirs, ClientOptions::default())
            .await
            .expect("connects"),
    );
    let monitor = CatalogMonitor::attach(&conn);
    let names: Vec<String> = conn.tools().iter().map(|t| t.name.clone()).collect();
    let bindings: BTreeMap<String, ReadBinding> = names
        .iter()
        .map(|n| {
            let binding = ReadBinding::new(n.clone(), format!("{catalog} {n}"), ScopeCheck::OptOut)
                .concurrency(Concurrency::Safe);
            (n.clone(), binding)
        })
        .collect();
    let bound = discover_read_tools(&conn, catalog, &bindings, &monitor, Limits::default())
        .await
        .unwrap_or_else(|e| panic!("{catalog}: a tool does not bind: {e:?}"));
    let mut got: Vec<String> = bound
        .registrations
        .iter()
        .map(|r| r.name().to_owned())
        .collect();
    got.sort();
    let mut want = names;
    want.sort();
    assert_eq!(got, want, "{catalog}: every listed tool is bound");
    want
}

#[tokio::test]
async fn every_typed_tool_binds_under_the_strict_profile() {
    let weather = bind_every_tool(weather::server().unwrap(), "weather").await;
    assert_eq!(weather, ["alerts", "forecast", "temperature"]);
    let counter = bind_every_tool(counter::server().unwrap(), "counter").await;
    assert_eq!(counter, ["decrement", "get", "increment", "set"]);
    let axum_app = bind_every_tool(axum_app::server().unwrap(), "axum_app").await;
    assert_eq!(axum_app, ["echo"]);
    let fixture = bind_every_tool(purra_examples::fixture_server::build(), "fixture").await;
    assert_eq!(
        fixture,
        [
            "add",
            "add_tool",
            "block",
            "cancellations",
            "echo",
            "elicit",
            "fail",
            "log",
            "progress",
            "roots",
            "sample",
            "touch"
        ]
    );
    let demo = bind_every_tool(
        purra_examples::demo_server::build(None).expect("the demo server"),
        "demo",
    )
    .await;
    assert_eq!(demo, ["clear_note", "get_note", "set_note"]);
}
