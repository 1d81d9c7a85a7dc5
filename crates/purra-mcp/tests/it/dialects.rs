//! Tool schemas declaring draft-07 or 2019-09 (every TypeScript-SDK server declares draft-07):
//! refused by default (seed 000: 2020-12 only), bound with the host's opt-in
//! (`Limits::earlier_schema_dialects`) with the declaration kept in the snapshot and its digest,
//! and what means something else in those dialects refused; every refusal tells the host the
//! tool, the JSON pointer in it, the reason and the listed JSON around it, while the code stays
//! the only thing a model could see. The server is a task speaking raw frames over
//! `memory::raw()`.

use std::collections::BTreeMap;
use std::sync::Arc;

use purra_core::{Concurrency, ScopeCheck, ScopeDecision};
use purra_mcp::{
    codes, discover_read_tools, discover_write_tools, AdapterError, CatalogMonitor, Limits,
    ReadBinding, ReadCatalog, Refusal, WriteBinding, WriteEffect,
};
use purra_protocol::Connection;
use serde_json::{json, Value};

use crate::support::{call, connect};

fn earlier() -> Limits {
    Limits {
        earlier_schema_dialects: true,
        ..Limits::default()
    }
}

/// The input schema of server-filesystem's `write_file`, as the TypeScript SDK lists it.
fn write_file_schema(declaration: &str) -> Value {
    json!({
        "$schema": declaration,
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"]
    })
}

/// A client connected to a scripted server listing `tools`, whose calls answer `done`.
async fn connect_tools(tools: Value) -> (Arc<Connection>, CatalogMonitor) {
    let done = r#"{"content":[{"type":"text","text":"done"}]}"#;
    connect(json!({ "tools": tools }).to_string(), done.to_owned()).await
}

fn tool(name: &str, input: Value) -> Value {
    json!({"name": name, "description": "Writes a file", "inputSchema": input})
}

async fn read(
    conn: &Arc<Connection>,
    monitor: &CatalogMonitor,
    remote: &str,
    limits: Limits,
) -> Result<ReadCatalog, AdapterError> {
    let bindings = BTreeMap::from([(
        remote.to_owned(),
        ReadBinding::new("local", "Local", ScopeCheck::OptOut).concurrency(Concurrency::Safe),
    )]);
    discover_read_tools(conn, "scripted", &bindings, monitor, limits).await
}

fn refusal(e: &AdapterError) -> &Refusal {
    e.refusal.as_deref().expect("a refusal for the host")
}

#[tokio::test]
async fn draft_07_and_2019_09_bind_only_with_the_opt_in_and_keep_their_declaration() {
    for declaration in [
        "http://json-schema.org/draft-07/schema#",
        "http://json-schema.org/draft-07/schema",
        "https://json-schema.org/draft/2019-09/schema",
    ] {
        let schema = write_file_schema(declaration);
        let (conn, monitor) = connect_tools(json!([tool("write_file", schema.clone())])).await;
        // Seed 000's default: refused, and the host is told exactly why.
        let e = read(&conn, &monitor, "write_file", Limits::default())
            .await
            .unwrap_err();
        assert_eq!(e.code, codes::schema_unsupported());
        let dialect = if declaration.contains("draft-07") {
            "draft-07"
        } else {
            "2019-09"
        };
        let reason = format!(
            "{dialect} is not accepted here: only https://json-schema.org/draft/2020-12/schema is (the host did not opt in to earlier dialects)"
        );
        assert_eq!(
            (
                refusal(&e).tool.as_str(),
                refusal(&e).pointer.as_str(),
                refusal(&e).reason.as_str()
            ),
            ("write_file", "/inputSchema/$schema", reason.as_str())
        );
        // The excerpt is the object holding the refused keyword: here the schema itself.
        assert_eq!(refusal(&e).excerpt, Some(schema.to_string()));
        assert_eq!(
            e.to_string(),
            format!("MCP adapter error: mcp_schema_unsupported (tool \"write_file\" at \"/inputSchema/$schema\": {reason})")
        );

        // The host's opt-in: bound, the declaration kept as listed.
        let cat = read(&conn, &monitor, "write_file", earlier())
            .await
            .unwrap();
        let entry = &cat.snapshot.as_json()["entries"][0];
        assert_eq!(entry["inputSchema"], schema);
        assert_eq!(cat.registrations[0].input_schema().source(), &schema);
        // Arguments are checked with the same meaning as in 2020-12.
        assert_eq!(
            call(&cat, json!({"path": "a", "content": "b"})).await,
            Ok(json!({"text": ["done"], "structured": null}))
        );
        assert_eq!(
            call(&cat, json!({"path": "a"})).await,
            Err(codes::invalid_arguments())
        );

        // The declaration is part of the reviewed digest: the same tool without it (2020-12 by
        // default) seals another snapshot.
        let mut undeclared = schema.clone();
        undeclared.as_object_mut().unwrap().remove("$schema");
        let (plain_conn, plain_monitor) =
            connect_tools(json!([tool("write_file", undeclared)])).await;
        let plain = read(&plain_conn, &plain_monitor, "write_file", Limits::default())
            .await
            .unwrap();
        assert_ne!(
            plain.snapshot.revision_digest(),
            cat.snapshot.revision_digest()
        );

        // Writes take the same opt-in.
        let writes = BTreeMap::from([(
            "write_file".to_owned(),
            WriteBinding {
                local_name: "write_file".into(),
                title: "Write a file".into(),
                risk: purra_core::Risk::Destructive,
                effect: WriteEffect::Destructive,
                scope: ScopeCheck::check(|_, _| ScopeDecision::Allow),
                binding_id: "fs".into(),
                binding_revision: "1".into(),
                scope_id: "fs".into(),
                scope_revision: "1".into(),
            },
        )]);
        let e = discover_write_tools(&conn, "scripted", &writes, &monitor, Limits::default())
            .await
            .unwrap_err();
        assert_eq!(refusal(&e).pointer, "/inputSchema/$schema");
        let w = discover_write_tools(&conn, "scripted", &writes, &monitor, earlier())
            .await
            .unwrap();
        assert_eq!(w.snapshot.as_json()["entries"][0]["inputSchema"], schema);
    }
}

#[tokio::test]
async fn what_means_something_else_is_refused_with_the_tool_the_pointer_and_the_reason() {
    let tuple = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        // Members in name order: the excerpt reads the same whether or not serde_json keeps
        // insertion order (`preserve_order`, on in a workspace build with purra-gateway's Cedar).
        "properties": {"rows": {"items": [{"type": "string"}, {"type": "number"}], "type": "array"}}
    });
    let tools = json!([
        tool("ok", write_file_schema("http://json-schema.org/draft-07/schema#")),
        {"name": "tuple_output", "inputSchema": {"type": "object"}, "outputSchema": tuple},
        tool("defaults", json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {"dryRun": {"default": false, "description": "Preview", "type": "boolean"}}
        })),
        {"name": "long", "description": "x".repeat(101), "inputSchema": {"type": "object"}},
    ]);
    let (conn, monitor) = connect_tools(tools).await;
    assert!(read(&conn, &monitor, "ok", earlier()).await.is_ok());

    let e = read(&conn, &monitor, "tuple_output", earlier())
        .await
        .unwrap_err();
    assert_eq!(e.code, codes::schema_unsupported());
    assert_eq!(*refusal(&e), {
        let mut r = Refusal::new(
            "tuple_output",
            "/outputSchema/properties/rows/items",
            "draft-07 items as an array is a tuple (2020-12's prefixItems), outside the profile",
        );
        r.excerpt =
            Some(r#"{"items":[{"type":"string"},{"type":"number"}],"type":"array"}"#.to_owned());
        r
    });

    let e = read(&conn, &monitor, "defaults", earlier())
        .await
        .unwrap_err();
    assert_eq!(
        refusal(&e).to_string(),
        "tool \"defaults\" at \"/inputSchema/properties/dryRun/default\": keyword outside purra.output-schema/v1"
    );
    assert_eq!(
        refusal(&e).excerpt.as_deref(),
        Some(r#"{"default":false,"description":"Preview","type":"boolean"}"#)
    );

    let e = read(
        &conn,
        &monitor,
        "long",
        Limits {
            max_description_bytes: 100,
            ..earlier()
        },
    )
    .await
    .unwrap_err();
    assert_eq!(e.code, codes::description_too_large());
    assert_eq!(
        refusal(&e).to_string(),
        "tool \"long\" at \"/description\": the description takes 101 bytes, more than max_description_bytes (100)"
    );

    let e = read(
        &conn,
        &monitor,
        "ok",
        Limits {
            max_schema_bytes: 50,
            ..earlier()
        },
    )
    .await
    .unwrap_err();
    assert_eq!(e.code, codes::schema_too_large());
    assert_eq!(
        refusal(&e).to_string(),
        "tool \"ok\" at \"/inputSchema\": the schema takes more than max_schema_bytes (50 bytes)"
    );

    let e = read(&conn, &monitor, "nope", earlier()).await.unwrap_err();
    assert_eq!(e.code, codes::tool_missing());
    assert_eq!(
        refusal(&e).to_string(),
        "tool \"nope\": the server does not list it"
    );
}

#[tokio::test]
async fn an_excerpt_is_bounded() {
    let mut properties = serde_json::Map::new();
    for i in 0..100 {
        properties.insert(format!("field_{i:03}"), json!({"type": "string"}));
    }
    // In name order, as above.
    properties.insert("é_bad".into(), json!({"format": "uri", "type": "string"}));
    let mut input = json!({"type": "object", "properties": properties, "x-vendor": true});
    let (conn, monitor) = connect_tools(json!([tool("wide", input.clone())])).await;
    let e = read(&conn, &monitor, "wide", earlier()).await.unwrap_err();
    let r = refusal(&e);
    assert_eq!(r.pointer, "/inputSchema/properties/é_bad/format");
    assert_eq!(
        r.excerpt.as_deref(),
        Some(r#"{"format":"uri","type":"string"}"#)
    );
    // The holder of a root keyword is the whole, wide schema: cut at the bound.
    input.as_object_mut().unwrap()["properties"]
        .as_object_mut()
        .unwrap()
        .remove("é_bad");
    let (conn, monitor) = connect_tools(json!([tool("wide", input.clone())])).await;
    let e = read(&conn, &monitor, "wide", earlier()).await.unwrap_err();
    let r = refusal(&e);
    assert_eq!(r.pointer, "/inputSchema/x-vendor");
    let excerpt = r.excerpt.as_deref().unwrap();
    let whole = input.to_string();
    assert!(excerpt.ends_with('…'), "{excerpt}");
    let cut = excerpt.strip_suffix('…').unwrap();
    assert_eq!(cut.len(), Refusal::MAX_EXCERPT_BYTES);
    assert!(whole.starts_with(cut));
}
