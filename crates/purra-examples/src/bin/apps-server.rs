//! An MCP Apps server over stdio (the `io.modelcontextprotocol/ui` extension): the tool
//! `show_note` is bound to the app `ui://notes/view.html`, an HTML page served with the app MIME
//! type and its sandbox's CSP domains. It answers text for every client, and says whether the
//! client declared that it renders apps.

use purra_protocol::apps::{AppResource, Csp};
use purra_protocol::{HandlerResult, RequestCtx, Server, ToolDef};
use schemars::JsonSchema;
use serde::Deserialize;

/// The note to show.
#[derive(Deserialize, JsonSchema)]
struct Note {
    /// Its text.
    text: String,
}

const VIEW: &str = "<!doctype html><html><body><main id=\"note\"></main>\
<script>window.addEventListener('message', e => { document.getElementById('note').textContent = JSON.stringify(e.data); });</script>\
</body></html>";

#[tokio::main]
async fn main() {
    let server = Server::builder("notes-app", "1.0.0").apps().build();
    server
        .add_app(
            AppResource::new("ui://notes/view.html", VIEW)
                .name("Note view")
                .csp(Csp::new().connect_domains(["https://api.notes.example"]))
                .prefers_border(true),
        )
        .expect("a ui:// app");
    server
        .add_tool(
            ToolDef::new("show_note")
                .description("Shows a note")
                .ui("ui://notes/view.html"),
            |Note { text }, ctx: RequestCtx| async move {
                // Apps degrade: the text is the answer for clients that render nothing.
                let shown = if ctx.client_supports_apps() {
                    "in the app"
                } else {
                    "as text"
                };
                HandlerResult::Ok(format!("note {shown}: {text}"))
            },
        )
        .expect("a valid tool");
    server.serve_stdio().await;
}
