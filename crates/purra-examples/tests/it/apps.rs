//! MCP Apps (`io.modelcontextprotocol/ui`) with purra's Apps server (`purra-apps-server`, over
//! stdio): the official Python SDK 2.3.0's client negotiates the extension and sees the tool's
//! UI binding, the `ui://` resource with its MIME type and `_meta.ui`, and the answer for a
//! client that renders apps; purra's client sees the same, and a client without Apps gets the
//! text answer and no negotiated extension; a URI outside `ui://` is refused at registration.

use std::process::Command;
use std::time::Duration;

use purra_protocol::apps::{self, AppResource};
use purra_protocol::types::TaskSupport;
use purra_protocol::{
    Client, ClientOptions, HandlerResult, RegistrationError, RequestCtx, Server, StdioCommand,
    ToolDef,
};
use serde_json::json;

use crate::support;
use support::*;

#[test]
fn the_python_sdk_client_sees_purra_apps() {
    let mut cmd = Command::new(python());
    cmd.arg(script("python/apps_client.py"))
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_purra-apps-server"));
    let out = run(cmd, Duration::from_secs(60));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout,
        "extensions: io.modelcontextprotocol/ui\n\
         tool show_note ui: ui://notes/view.html\n\
         resource ui://notes/view.html: text/html;profile=mcp-app, 196 chars, ui {\"csp\": {\"connectDomains\": [\"https://api.notes.example\"]}, \"prefersBorder\": true}\n\
         call show_note: note in the app: hello\n"
    );
}

#[tokio::test]
async fn purras_client_negotiates_apps_and_a_client_without_them_gets_text() {
    for (options, negotiated, answer) in [
        (
            ClientOptions::default().apps(),
            vec![apps::EXTENSION_ID.to_owned()],
            "note in the app: hi",
        ),
        (ClientOptions::default(), vec![], "note as text: hi"),
    ] {
        let conn = Client::connect_stdio(
            StdioCommand::new(env!("CARGO_BIN_EXE_purra-apps-server")),
            options,
        )
        .await
        .unwrap();
        assert_eq!(conn.negotiated_extensions(), negotiated);
        let tools = conn.tools();
        assert_eq!(apps::tool_ui(&tools[0]), Some("ui://notes/view.html"));
        let read = conn.read_resource("ui://notes/view.html").await.unwrap();
        assert_eq!(
            read.contents[0].mime_type.as_deref(),
            Some(apps::APP_MIME_TYPE)
        );
        assert_eq!(
            read.contents[0].meta,
            json!({"ui": {"csp": {"connectDomains": ["https://api.notes.example"]}, "prefersBorder": true}})
                .as_object()
                .cloned()
        );
        let r = conn
            .call_tool("show_note", json!({"text": "hi"}))
            .await
            .unwrap();
        assert_eq!(r.texts().collect::<Vec<_>>(), [answer]);
        conn.close().await;
    }
}

#[test]
fn an_app_uri_outside_ui_is_refused_at_registration() {
    let server = Server::builder("apps", "1").apps().build();
    let e = server
        .add_tool(
            ToolDef::new("t").ui("https://example.com/app.html"),
            |_: (), _ctx: RequestCtx| async move { HandlerResult::Ok("x") },
        )
        .expect_err("refused");
    assert_eq!(
        e,
        RegistrationError::InvalidAppUri {
            name: "t".into(),
            uri: "https://example.com/app.html".into()
        }
    );
    assert_eq!(
        e.to_string(),
        "\"t\": the MCP App URI \"https://example.com/app.html\" must use the ui:// scheme"
    );
    let e = server
        .add_app(AppResource::new("ui://", "<p>"))
        .expect_err("refused");
    assert!(matches!(e, RegistrationError::InvalidAppUri { .. }), "{e}");
    // An app-only tool names no resource: `_meta.ui` with only its visibility registers.
    server
        .add_tool(
            ToolDef::new("app_only").meta(
                json!({"ui": {"visibility": ["app"]}})
                    .as_object()
                    .cloned()
                    .unwrap(),
            ),
            |_: (), _ctx: RequestCtx| async move { HandlerResult::Ok("x") },
        )
        .expect("registers");
    // The binding sits beside other `_meta` and execution settings.
    server
        .add_tool(
            ToolDef::new("ok")
                .meta(json!({"other": 1}).as_object().cloned().unwrap())
                .ui("ui://a/b.html")
                .task_support(TaskSupport::Forbidden),
            |_: (), _ctx: RequestCtx| async move { HandlerResult::Ok("x") },
        )
        .unwrap();
}
