//! MCP Apps (`io.modelcontextprotocol/ui`, the first official extension of SEP-2133): a tool's
//! `_meta.ui.resourceUri` names a `ui://` resource, an HTML document served as
//! `text/html;profile=mcp-app` with its sandbox's Content-Security-Policy domains in
//! `_meta.ui.csp`, which a host renders next to the conversation.
//!
//! Server: declare the extension with [`ServerBuilder::apps`](crate::ServerBuilder::apps), bind a
//! tool to its UI with [`ToolDef::ui`](crate::ToolDef::ui), serve the UI with
//! [`Server::add_app`](crate::Server::add_app) and an [`AppResource`]; a tool keeps answering
//! text, so clients without Apps lose nothing (see
//! [`RequestCtx::client_supports_apps`](crate::RequestCtx::client_supports_apps)).
//! Client: [`ClientOptions::apps`](crate::ClientOptions::apps) declares that the client renders
//! them; [`tool_ui`] reads a tool's binding.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::types::{JsonObject, Resource, ResourceContents, Tool};

/// The extension's name under `capabilities.extensions`.
pub const EXTENSION_ID: &str = "io.modelcontextprotocol/ui";
/// The MIME type of an app's HTML resource.
pub const APP_MIME_TYPE: &str = "text/html;profile=mcp-app";
/// The scheme every app resource's URI has.
pub const URI_SCHEME: &str = "ui://";

/// The Content-Security-Policy domains an app's sandbox may use (`_meta.ui.csp`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Csp {
    /// Origins the app may connect to (fetch, WebSocket).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_domains: Option<Vec<String>>,
    /// Origins the app may load scripts, styles, images and fonts from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_domains: Option<Vec<String>>,
    /// Origins the app may embed in frames.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frame_domains: Option<Vec<String>>,
    /// Origins the app's `<base>` may name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_uri_domains: Option<Vec<String>>,
}

impl Csp {
    /// No domain at all: the app is self-contained.
    pub fn new() -> Self {
        Csp::default()
    }
    /// Origins the app may connect to.
    pub fn connect_domains<I: IntoIterator<Item = S>, S: Into<String>>(mut self, d: I) -> Self {
        self.connect_domains = Some(d.into_iter().map(Into::into).collect());
        self
    }
    /// Origins the app may load resources from.
    pub fn resource_domains<I: IntoIterator<Item = S>, S: Into<String>>(mut self, d: I) -> Self {
        self.resource_domains = Some(d.into_iter().map(Into::into).collect());
        self
    }
}

/// An app's HTML, served as a `ui://` resource with the app MIME type.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AppResource {
    /// The `ui://` URI tools name.
    pub uri: String,
    /// The resource's name (default: its URI).
    pub name: String,
    /// A display name.
    pub title: Option<String>,
    /// What the app shows.
    pub description: Option<String>,
    /// The HTML document.
    pub html: String,
    /// Its sandbox's CSP domains.
    pub csp: Option<Csp>,
    /// The dedicated origin the app asks to be served from.
    pub domain: Option<String>,
    /// Whether the host should draw a border around it.
    pub prefers_border: Option<bool>,
}

impl AppResource {
    /// The app at `uri` (`ui://...`) with this HTML.
    pub fn new(uri: impl Into<String>, html: impl Into<String>) -> Self {
        let uri = uri.into();
        AppResource {
            name: uri.clone(),
            uri,
            title: None,
            description: None,
            html: html.into(),
            csp: None,
            domain: None,
            prefers_border: None,
        }
    }
    /// Sets the name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }
    /// Sets the display name.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }
    /// Sets the description.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }
    /// Sets the CSP domains.
    pub fn csp(mut self, csp: Csp) -> Self {
        self.csp = Some(csp);
        self
    }
    /// Asks for a dedicated origin.
    pub fn domain(mut self, domain: impl Into<String>) -> Self {
        self.domain = Some(domain.into());
        self
    }
    /// Whether the host should draw a border.
    pub fn prefers_border(mut self, yes: bool) -> Self {
        self.prefers_border = Some(yes);
        self
    }

    /// `_meta` of the resource and its contents: `{"ui": {csp, domain, prefersBorder}}`, or none.
    pub fn meta(&self) -> Option<JsonObject> {
        let mut ui = JsonObject::new();
        if let Some(csp) = &self.csp {
            ui.insert("csp".into(), json!(csp));
        }
        if let Some(d) = &self.domain {
            ui.insert("domain".into(), json!(d));
        }
        if let Some(b) = self.prefers_border {
            ui.insert("prefersBorder".into(), json!(b));
        }
        (!ui.is_empty()).then(|| {
            let mut meta = JsonObject::new();
            meta.insert("ui".into(), Value::Object(ui));
            meta
        })
    }

    /// What `resources/list` shows of it (for a server that serves it itself).
    pub fn resource(&self) -> Resource {
        let mut r = Resource::new(&self.uri, &self.name).with_mime_type(APP_MIME_TYPE.to_owned());
        r.title = self.title.clone();
        r.description = self.description.clone();
        r.meta = self.meta();
        r
    }

    /// What `resources/read` answers for it.
    pub fn contents(&self) -> ResourceContents {
        let mut c = ResourceContents::text(&self.uri, &self.html);
        c.mime_type = Some(APP_MIME_TYPE.to_owned());
        c.meta = self.meta();
        c
    }
}

/// Whether `uri` can name an app (`ui://` and something after it).
pub fn is_app_uri(uri: &str) -> bool {
    uri.strip_prefix(URI_SCHEME)
        .is_some_and(|rest| !rest.is_empty())
}

/// The `ui://` resource a tool is bound to (`_meta.ui.resourceUri`), if any.
pub fn tool_ui(tool: &Tool) -> Option<&str> {
    tool.meta.as_ref()?.get("ui")?.get("resourceUri")?.as_str()
}

/// Binds `tool` to the app at `resource_uri`: sets `_meta.ui.resourceUri`, keeping the rest of
/// `_meta` and of `_meta.ui` (a visibility, say). For tools built as data (`raw_tool`, a proxy
/// re-serving another server's tools); typed tools use [`ToolDef::ui`](crate::ToolDef::ui).
pub fn set_tool_ui(tool: &mut Tool, resource_uri: impl Into<String>) {
    let meta = tool.meta.get_or_insert_with(JsonObject::new);
    let ui = meta
        .entry("ui")
        .or_insert_with(|| Value::Object(JsonObject::new()));
    if !ui.is_object() {
        *ui = Value::Object(JsonObject::new());
    }
    if let Some(ui) = ui.as_object_mut() {
        ui.insert("resourceUri".into(), Value::String(resource_uri.into()));
    }
}

/// The settings a client declares for the extension: the MIME types it renders.
pub fn client_settings() -> JsonObject {
    let mut s = JsonObject::new();
    s.insert("mimeTypes".into(), json!([APP_MIME_TYPE]));
    s
}

/// Whether a client's settings for the extension say it renders apps (its `mimeTypes` name the
/// app MIME type); a client that declared the extension without them does not.
pub fn settings_render_apps(settings: Option<&JsonObject>) -> bool {
    settings
        .and_then(|s| s.get("mimeTypes"))
        .and_then(Value::as_array)
        .is_some_and(|m| m.iter().any(|t| t == APP_MIME_TYPE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_app_resource_carries_its_mime_type_and_ui_meta() {
        let app = AppResource::new("ui://clock/app.html", "<p>now</p>")
            .csp(Csp::new().connect_domains(["https://api.example"]))
            .prefers_border(true);
        assert_eq!(
            serde_json::to_value(app.contents()).unwrap(),
            json!({
                "uri": "ui://clock/app.html",
                "mimeType": "text/html;profile=mcp-app",
                "text": "<p>now</p>",
                "_meta": {"ui": {"csp": {"connectDomains": ["https://api.example"]}, "prefersBorder": true}}
            })
        );
        assert_eq!(
            serde_json::to_value(AppResource::new("ui://a", "x").resource()).unwrap(),
            json!({"uri": "ui://a", "name": "ui://a", "mimeType": "text/html;profile=mcp-app"})
        );
        assert!(is_app_uri("ui://a") && !is_app_uri("ui://") && !is_app_uri("https://a"));
        assert!(settings_render_apps(Some(&client_settings())));
        assert!(!settings_render_apps(Some(&JsonObject::new())));
        assert!(!settings_render_apps(None));
    }
}
