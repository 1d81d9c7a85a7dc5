//! What starting says, exactly: an upstream whose tools declare draft-07 (as every TypeScript-SDK
//! server's do) binds by default and is refused with `[limits] earlier_schema_dialects = false`;
//! every refused bound tool is named at its binding's key and line with the upstream tool, the
//! JSON pointer in it and the reason (and, with excerpts, the listed JSON there); a write bound
//! with `effect = "write"` over a tool the upstream marks destructive starts with a warning; a
//! configuration without an upstream or a binding is refused; a tool is pinned only by the start
//! that binds it. The upstream is a purra server on
//! loopback Streamable HTTP in this process.

use std::sync::{Arc, Mutex};

use purra_gateway::{load, load_str, Gateway, GatewayConfig, StartError, StartOptions};
use purra_protocol::types::{CallToolResult, Tool, ToolAnnotations};
use purra_protocol::Server;
use purra_sqlite::SqliteStore;
use serde_json::{json, Value};

use crate::support::{object, serve_upstream, start_text, TempDir};

const DRAFT_07: &str = "http://json-schema.org/draft-07/schema#";

/// The upstream: `read_text_file` and `write_file` (server-filesystem's schemas, draft-07;
/// `write_file` marked destructive as there), `edit_file` (a `default`), `rows` (a draft-07
/// tuple in its output schema).
async fn upstream() -> String {
    let server = Server::builder("upstream", "1.0.0").build();
    let path_only = json!({"$schema": DRAFT_07, "type": "object",
        "properties": {"path": {"type": "string"}}, "required": ["path"]});
    let content = json!({"$schema": DRAFT_07, "type": "object", "additionalProperties": false,
        "properties": {"content": {"type": "string"}}, "required": ["content"]});
    let tools = [
        Tool::new("read_text_file", object(path_only))
            .with_output_schema(object(content.clone()))
            .with_annotations(ToolAnnotations::new().with_read_only(true)),
        Tool::new(
            "write_file",
            object(json!({"$schema": DRAFT_07, "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"]})),
        )
        .with_output_schema(object(content))
        .with_annotations(
            ToolAnnotations::new()
                .with_read_only(false)
                .with_destructive(true),
        ),
        Tool::new(
            "edit_file",
            object(json!({"$schema": DRAFT_07, "type": "object",
                "properties": {"dryRun": {"type": "boolean", "default": false}}})),
        ),
        Tool::new("rows", object(json!({"type": "object"}))).with_output_schema(object(json!({
            "$schema": DRAFT_07, "type": "object",
            "properties": {"rows": {"type": "array", "items": {"type": "string"}, "additionalItems": false}}
        }))),
    ];
    for tool in tools {
        server
            .raw_tool(tool, |_, _| async {
                Ok(
                    CallToolResult::text("done")
                        .with_structured_content(json!({"content": "done"})),
                )
            })
            .expect("tool");
    }
    serve_upstream(server, std::future::pending()).await
}

/// A configuration binding `read` (a read) and `write` (a write with `effect`) over `url`, and
/// `extra` appended.
fn text(url: &str, read: &str, write: &str, effect: &str, extra: &str) -> String {
    format!(
        r#"[upstreams.fs]
url = "{url}"

[reads.read]
upstream = "fs"
tool = "{read}"
title = "Read"
scope = "open"

[writes.write]
upstream = "fs"
tool = "{write}"
title = "Write"
effect = "{effect}"
binding_id = "fs"
binding_revision = "1"
scope_id = "fs"
scope_revision = "1"
scope = {{ clients = ["x"] }}
{extra}"#
    )
}

/// The directory of test `name`.
fn dir(name: &str) -> TempDir {
    TempDir::new("start", name)
}

/// Starts a gateway on `text` (named `g.toml`); the log lines it wrote; the gateway or the
/// mistakes, one string each.
async fn start(text: &str, excerpts: bool) -> (Result<Gateway, Vec<String>>, Vec<String>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let sink = log.clone();
    let options = StartOptions::default()
        .log(move |m| sink.lock().unwrap().push(m.to_owned()))
        .excerpts(excerpts);
    let started = start_text(text, options).await;
    let lines = log.lock().unwrap().clone();
    (started, lines)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn draft_07_tools_bind_by_default_and_the_dialects_can_be_turned_off() {
    let url = upstream().await;
    let good = text(&url, "read_text_file", "write_file", "destructive", "");
    let (gateway, log) = start(&good, false).await;
    let gateway = gateway.expect("starts");
    assert_eq!(gateway.tool_names(), ["read", "write"]);
    assert_eq!(log, Vec::<String>::new());
    // Downstream clients are shown the declaration as the upstream lists it.
    let (a, b) = purra_protocol::memory::pair();
    let server = gateway.server().clone();
    tokio::spawn(async move { server.serve(a).await });
    let conn = purra_protocol::Client::connect(b, purra_protocol::ClientOptions::default())
        .await
        .expect("connect");
    let shown: Vec<Value> = conn
        .tools()
        .iter()
        .map(|t| Value::Object(t.input_schema.clone()))
        .collect();
    assert_eq!(shown[0]["$schema"], DRAFT_07);
    let read = conn
        .call_tool("read", json!({"path": "a"}))
        .await
        .expect("call");
    assert_eq!(read.structured_content, Some(json!({"content": "done"})));
    gateway.shutdown().await;

    let off = text(
        &url,
        "read_text_file",
        "write_file",
        "destructive",
        "\n[limits]\nearlier_schema_dialects = false\n",
    );
    let (refused, _) = start(&off, false).await;
    let reason = "draft-07 is not accepted here: only https://json-schema.org/draft/2020-12/schema is (the host did not opt in to earlier dialects)";
    assert_eq!(
        refused.expect_err("refused"),
        [
            format!("g.toml:6: reads.read.tool: upstream \"fs\" tool \"read_text_file\" at /inputSchema/$schema: {reason} (mcp_schema_unsupported)"),
            format!("g.toml:12: writes.write.tool: upstream \"fs\" tool \"write_file\" at /inputSchema/$schema: {reason} (mcp_schema_unsupported)"),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refused_tool_is_named_at_its_binding_with_the_pointer_and_the_reason() {
    let url = upstream().await;
    let bad = text(&url, "edit_file", "rows", "write", "");
    let (refused, _) = start(&bad, false).await;
    assert_eq!(
        refused.expect_err("refused"),
        [
            "g.toml:6: reads.read.tool: upstream \"fs\" tool \"edit_file\" at /inputSchema/properties/dryRun/default: keyword outside purra.output-schema/v1 (mcp_schema_unsupported)",
            "g.toml:12: writes.write.tool: upstream \"fs\" tool \"rows\" at /outputSchema/properties/rows/additionalItems: draft-07 additionalItems applies to the elements after an array items (2020-12's items after prefixItems), outside the profile (mcp_schema_unsupported)",
        ]
    );
    // With excerpts (`purra gateway -v`), the listed JSON around each place.
    let (refused, _) = start(&bad, true).await;
    assert_eq!(
        refused.expect_err("refused"),
        [
            "g.toml:6: reads.read.tool: upstream \"fs\" tool \"edit_file\" at /inputSchema/properties/dryRun/default: keyword outside purra.output-schema/v1 (mcp_schema_unsupported)\n      the listed JSON there: {\"type\":\"boolean\",\"default\":false}",
            "g.toml:12: writes.write.tool: upstream \"fs\" tool \"rows\" at /outputSchema/properties/rows/additionalItems: draft-07 additionalItems applies to the elements after an array items (2020-12's items after prefixItems), outside the profile (mcp_schema_unsupported)\n      the listed JSON there: {\"type\":\"array\",\"items\":{\"type\":\"string\"},\"additionalItems\":false}",
        ]
    );
    // A tool the upstream does not list beside a refused one: both at once.
    let (refused, _) = start(&text(&url, "edit_file", "nope", "write", ""), false).await;
    assert_eq!(
        refused.expect_err("refused"),
        [
            "g.toml:6: reads.read.tool: upstream \"fs\" tool \"edit_file\" at /inputSchema/properties/dryRun/default: keyword outside purra.output-schema/v1 (mcp_schema_unsupported)",
            "g.toml:12: writes.write.tool: upstream \"fs\" has no tool \"nope\" (it lists: read_text_file, write_file, edit_file, rows)",
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_declared_write_over_a_tool_marked_destructive_starts_with_a_warning() {
    let url = upstream().await;
    let (gateway, log) = start(
        &text(&url, "read_text_file", "write_file", "write", ""),
        false,
    )
    .await;
    let gateway = gateway.expect("a warning, not a mistake");
    assert_eq!(
        log,
        ["warning: g.toml:14: writes.write.effect: upstream \"fs\" marks the tool \"write_file\" destructive (destructiveHint: true), but the binding declares effect = \"write\": approvers are told it writes; declare effect = \"destructive\" if it can destroy data"]
    );
    gateway.shutdown().await;
    // Declared destructive, or over a tool not marked so: no warning.
    let (gateway, log) = start(
        &text(&url, "read_text_file", "write_file", "destructive", ""),
        false,
    )
    .await;
    assert!(log.is_empty(), "{log:?}");
    gateway.expect("starts").shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configuration_without_an_upstream_or_a_binding_is_refused() {
    let store = Arc::new(SqliteStore::open_in_memory().expect("store"));
    let e = Gateway::start(
        GatewayConfig::default(),
        &purra_gateway::ConfigSource::default(),
        store,
    )
    .await
    .expect_err("refused");
    assert_eq!(
        e.to_string(),
        "the configuration has 2 mistakes:
  upstreams: no upstream server is configured: add an [upstreams.ID] table with a command or a url
  reads: nothing is bound: add a [reads.NAME] or [writes.NAME] table naming an upstream tool"
    );
    // A file: the same, with the file's name; an upstream alone binds nothing.
    let d = dir("empty");
    let file = d.0.join("gateway.toml");
    std::fs::write(&file, "[gateway]\nname = \"gw\"\n").expect("write");
    let shown = file.display().to_string();
    assert_eq!(
        load(&file).expect_err("refused").to_string(),
        format!(
            "the configuration has 2 mistakes:
  {shown}: upstreams: no upstream server is configured: add an [upstreams.ID] table with a command or a url
  {shown}: reads: nothing is bound: add a [reads.NAME] or [writes.NAME] table naming an upstream tool"
        )
    );
    std::fs::write(&file, "[upstreams.fs]\nurl = \"http://127.0.0.1:9/mcp\"\n").expect("write");
    assert_eq!(
        load(&file).expect_err("refused").to_string(),
        format!(
            "the configuration has 1 mistake:
  {shown}: reads: nothing is bound: add a [reads.NAME] or [writes.NAME] table naming an upstream tool"
        )
    );
    // A fragment read as text is checked as far as it goes.
    assert!(load_str("g.toml", "[gateway]\nname = \"gw\"\n").is_ok());
}

/// Cedar policies are validated against the schema generated from the bound tools as the
/// upstream lists them: a policy naming an action that is no bound tool, a tool that is not
/// bound (an upstream name is not a local one), an argument the tool does not take or a claim
/// not declared is a mistake at its policy file and line, and nothing starts; valid policies
/// start, and the gateway tells the schema they were checked against. (Cedar's "did you mean"
/// picks among the nearest names; each misspelling here has one nearest.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policies_are_validated_against_the_schema_of_the_bound_tools() {
    let url = upstream().await;
    let d = dir("policies");
    let config = d.0.join("gateway.toml");
    std::fs::write(
        &config,
        text(
            &url,
            "read_text_file",
            "write_file",
            "destructive",
            "\n[policies]\nfiles = [\"access.cedar\"]\n\n[policies.claims]\ngroups = \"Set<String>\"\n",
        ),
    )
    .expect("config");
    let policies = d.0.join("access.cedar");
    std::fs::write(
        &policies,
        r#"permit (principal, action in Action::"Read", resource);
permit (principal, action == Action::"write", resource)
  when { context.arguments.path like "/srv/*" };
forbid (principal, action == Action::"writes", resource);
forbid (principal, action, resource == Tool::"read_text_file");
forbid (principal, action == Action::"write", resource)
  when { context.arguments.mode == "append" };
forbid (principal, action, resource)
  when { principal.claims.role == "guest" };
"#,
    )
    .expect("policies");
    let start_file = || async {
        let loaded = load(&config).expect("the file itself has no mistakes");
        let store = Arc::new(SqliteStore::open_in_memory().expect("store"));
        Gateway::start(loaded.config, &loaded.source, store).await
    };
    let shown = d.0.display().to_string();
    let mistakes: Vec<String> = match start_file().await {
        Err(StartError::Config(e)) => {
            e.0.iter()
                .map(|e| e.to_string().replace(&shown, "DIR"))
                .collect()
        }
        Err(other) => panic!("not a configuration error: {other}"),
        Ok(_) => panic!("started"),
    };
    assert_eq!(
        mistakes,
        [
            "DIR/access.cedar:4: unrecognized action `Action::\"writes\"` (did you mean `Action::\"write\"`?)",
            "DIR/access.cedar:5: entity `Tool::\"read_text_file\"` is of an enumerated entity type, but `\"read_text_file\"` is not declared as a valid eid (valid entity eids: \"read\", \"write\")",
            "DIR/access.cedar:7: attribute `arguments.mode` in context for Action::\"write\" not found (did you mean `path`?)",
            "DIR/access.cedar:9: attribute `claims.role` on entity type `Caller` not found (did you mean `groups`?)",
        ]
    );

    std::fs::write(
        &policies,
        r#"permit (principal, action in Action::"Read", resource);
permit (principal, action in Action::"Destructive", resource)
  when { context.arguments.path like "/srv/*" && principal.claims has groups
         && principal.claims.groups.contains("editors") };
"#,
    )
    .expect("policies");
    let gateway = start_file().await.expect("starts");
    let (count, schema) = gateway.policy_schema().expect("policies");
    assert_eq!(count, 2);
    // `write` is bound with effect = "destructive"; both tools take a required `path`.
    assert!(
        schema.contains("action \"write\" in [Action::\"Destructive\"] appliesTo {"),
        "{schema}"
    );
    assert!(
        schema.contains("\"arguments\": {\n    \"content\": String,\n    \"path\": String\n  },"),
        "{schema}"
    );
    gateway.shutdown().await;
}

/// Issue 46: a bound tool is pinned when it is first bound, and only once discovery bound it: a
/// start refused for its tools pins nothing; the start that binds them pins each as listed,
/// under the gateway's name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_is_pinned_only_once_discovery_bound_it() {
    use purra_core::CatalogPins;
    let url = upstream().await;
    let store = SqliteStore::open_in_memory().expect("store");
    let with_store = |text: &str| {
        let loaded = load_str("g.toml", text).expect("no mistakes in the file");
        (loaded, Arc::new(store.clone()))
    };
    let off = text(
        &url,
        "read_text_file",
        "write_file",
        "destructive",
        "\n[limits]\nearlier_schema_dialects = false\n",
    );
    let (loaded, s) = with_store(&off);
    let refused = Gateway::start(loaded.config, &loaded.source, s).await;
    assert!(matches!(refused, Err(StartError::Config(_))));
    assert_eq!(store.tool_pins("fs".into()).await, Ok(vec![]));

    let good = text(&url, "read_text_file", "write_file", "destructive", "");
    let (loaded, s) = with_store(&good);
    let gateway = Gateway::start(loaded.config, &loaded.source, s)
        .await
        .expect("started");
    let pins = store.tool_pins("fs".into()).await.expect("pins");
    let pinned: Vec<(&str, &str, &Value)> = pins
        .iter()
        .map(|p| {
            (
                p.tool.as_str(),
                p.pinned_by.as_str(),
                &p.definition["annotations"],
            )
        })
        .collect();
    assert_eq!(
        pinned,
        [
            ("read_text_file", "gateway", &json!({"readOnlyHint": true})),
            (
                "write_file",
                "gateway",
                &json!({"readOnlyHint": false, "destructiveHint": true})
            ),
        ]
    );
    assert_eq!(pins[0].definition["inputSchema"]["$schema"], DRAFT_07);
    gateway.shutdown().await;
}
