//! MCP message types (schema revisions 2024-11-05 to 2025-11-25), serde at the protocol boundary.
//!
//! Field names follow the specification (camelCase on the wire). Optional members are `Option` and
//! are skipped when absent, so what purra sends is exactly what the specification shows. Members a
//! peer sends that purra does not model are ignored on input; capability objects, whose shape
//! varies between revisions, are kept as raw JSON objects.
//!
//! Every type is `#[non_exhaustive]`, so a later revision can add members without breaking code
//! that uses these types: build them with their constructors and `with_*` builders
//! (`Tool::new(name, schema).with_title(..)`, `CallToolResult::text(..)`,
//! `Resource::new(uri, name).with_mime_type(..)`), and match with `..`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::version::ProtocolVersion;

/// A JSON object.
pub type JsonObject = Map<String, Value>;

/// Writes the wire names of a unit enum as its `Display`.
macro_rules! wire_display {
    ($ty:ident { $($variant:ident => $text:literal),* $(,)? }) => {
        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(match self {
                    $($ty::$variant => $text,)*
                })
            }
        }
    };
}

/// Writes `with_*` builders that set optional members.
macro_rules! builders {
    ($ty:ident { $($(#[doc = $doc:literal])* $method:ident => $field:ident: $t:ty;)* }) => {
        impl $ty {
            $(
                $(#[doc = $doc])*
                #[must_use]
                pub fn $method(mut self, value: impl Into<$t>) -> Self {
                    self.$field = Some(value.into());
                    self
                }
            )*
        }
    };
}

/// An icon a client may show for an implementation, tool, resource or prompt (2025-11-25).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Icon {
    /// An `http(s)` URL or a `data:` URI.
    pub src: String,
    /// MIME type override (`image/png`, `image/svg+xml`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Sizes it can be shown at (`"48x48"`, `"any"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sizes: Option<Vec<String>>,
    /// The background it is designed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub theme: Option<IconTheme>,
}

impl Icon {
    /// An icon at `src`.
    pub fn new(src: impl Into<String>) -> Self {
        Icon {
            src: src.into(),
            mime_type: None,
            sizes: None,
            theme: None,
        }
    }
}

builders!(Icon {
    /// Sets `mimeType`.
    with_mime_type => mime_type: String;
    /// Sets `sizes`.
    with_sizes => sizes: Vec<String>;
    /// Sets `theme`.
    with_theme => theme: IconTheme;
});

/// The background an icon is designed for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum IconTheme {
    /// A light background.
    Light,
    /// A dark background.
    Dark,
}

wire_display!(IconTheme { Light => "light", Dark => "dark" });

/// Hints for the client about a resource or a content block: who it is for, how important it
/// is, when it last changed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Annotations {
    /// Who it is meant for (`user`, `assistant` or both).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<Vec<Role>>,
    /// Importance from 0 (optional) to 1 (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<f64>,
    /// When it last changed (ISO 8601).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<String>,
}

builders!(Annotations {
    /// Sets `audience`.
    with_audience => audience: Vec<Role>;
    /// Sets `priority` (0 to 1).
    with_priority => priority: f64;
    /// Sets `lastModified` (ISO 8601).
    with_last_modified => last_modified: String;
});

/// Name and version of a client or server implementation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Implementation {
    /// Programmatic name.
    pub name: String,
    /// Version string.
    pub version: String,
    /// Display name (2025-06-18).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it does (2025-11-25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Icons (2025-11-25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icons: Option<Vec<Icon>>,
    /// Its website (2025-11-25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub website_url: Option<String>,
}

impl Implementation {
    /// An implementation with a name and a version.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Implementation {
            name: name.into(),
            version: version.into(),
            title: None,
            description: None,
            icons: None,
            website_url: None,
        }
    }
}

builders!(Implementation {
    /// Sets `title`.
    with_title => title: String;
    /// Sets `description`.
    with_description => description: String;
    /// Sets `icons`.
    with_icons => icons: Vec<Icon>;
    /// Sets `websiteUrl`.
    with_website_url => website_url: String;
});

/// What a client can do for the server.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ClientCapabilities {
    /// Roots: `{listChanged?}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roots: Option<JsonObject>,
    /// Sampling: `{}` (2025-11-25 may add `tools`, `context`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<JsonObject>,
    /// Elicitation: `{}` or `{form: {}, url: {}}` (2025-11-25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elicitation: Option<JsonObject>,
    /// Experimental, non-standard capabilities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experimental: Option<JsonObject>,
    /// Tasks (2025-11-25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<JsonObject>,
    /// Extensions, keyed by reverse-DNS name, each with its settings (see
    /// [`crate::extensions`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<crate::extensions::Extensions>,
}

builders!(ClientCapabilities {
    /// Sets `roots`.
    with_roots => roots: JsonObject;
    /// Sets `sampling`.
    with_sampling => sampling: JsonObject;
    /// Sets `elicitation`.
    with_elicitation => elicitation: JsonObject;
    /// Sets `experimental`.
    with_experimental => experimental: JsonObject;
    /// Sets `tasks`.
    with_tasks => tasks: JsonObject;
    /// Sets `extensions`.
    with_extensions => extensions: crate::extensions::Extensions;
});

/// What a server offers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ServerCapabilities {
    /// Tools: `{listChanged?}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<JsonObject>,
    /// Resources: `{subscribe?, listChanged?}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<JsonObject>,
    /// Prompts: `{listChanged?}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts: Option<JsonObject>,
    /// Logging: `{}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logging: Option<JsonObject>,
    /// Completions: `{}` (2025-03-26).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completions: Option<JsonObject>,
    /// Experimental, non-standard capabilities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experimental: Option<JsonObject>,
    /// Tasks (2025-11-25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<JsonObject>,
    /// Extensions, keyed by reverse-DNS name, each with its settings (see
    /// [`crate::extensions`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<crate::extensions::Extensions>,
}

builders!(ServerCapabilities {
    /// Sets `tools`.
    with_tools => tools: JsonObject;
    /// Sets `resources`.
    with_resources => resources: JsonObject;
    /// Sets `prompts`.
    with_prompts => prompts: JsonObject;
    /// Sets `logging`.
    with_logging => logging: JsonObject;
    /// Sets `completions`.
    with_completions => completions: JsonObject;
    /// Sets `experimental`.
    with_experimental => experimental: JsonObject;
    /// Sets `tasks`.
    with_tasks => tasks: JsonObject;
    /// Sets `extensions`.
    with_extensions => extensions: crate::extensions::Extensions;
});

impl ServerCapabilities {
    fn flag(obj: &Option<JsonObject>, key: &str) -> bool {
        obj.as_ref()
            .and_then(|o| o.get(key))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }
    /// Whether the server supports `resources/subscribe`.
    pub fn resources_subscribe(&self) -> bool {
        Self::flag(&self.resources, "subscribe")
    }
    /// Whether the server sends `notifications/tools/list_changed`.
    pub fn tools_list_changed(&self) -> bool {
        Self::flag(&self.tools, "listChanged")
    }
}

/// `initialize` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct InitializeParams {
    /// The revision the client asks for.
    pub protocol_version: ProtocolVersion,
    /// The client's capabilities.
    #[serde(default)]
    pub capabilities: ClientCapabilities,
    /// The client's name and version.
    pub client_info: Implementation,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

impl InitializeParams {
    /// Params asking for `protocol_version`.
    pub fn new(
        protocol_version: ProtocolVersion,
        capabilities: ClientCapabilities,
        client_info: Implementation,
    ) -> Self {
        InitializeParams {
            protocol_version,
            capabilities,
            client_info,
            meta: None,
        }
    }
}

/// `initialize` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct InitializeResult {
    /// The revision the server chose.
    pub protocol_version: ProtocolVersion,
    /// The server's capabilities.
    #[serde(default)]
    pub capabilities: ServerCapabilities,
    /// The server's name and version.
    pub server_info: Implementation,
    /// Instructions for the model, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

impl InitializeResult {
    /// A result choosing `protocol_version`.
    pub fn new(
        protocol_version: ProtocolVersion,
        capabilities: ServerCapabilities,
        server_info: Implementation,
    ) -> Self {
        InitializeResult {
            protocol_version,
            capabilities,
            server_info,
            instructions: None,
            meta: None,
        }
    }
}

builders!(InitializeResult {
    /// Sets `instructions`.
    with_instructions => instructions: String;
});

/// Params of every `*/list` request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PaginatedParams {
    /// The cursor from the previous page's `nextCursor`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

impl PaginatedParams {
    /// The page at `cursor` (the first page for `None`).
    pub fn new(cursor: Option<String>) -> Self {
        PaginatedParams { cursor, meta: None }
    }
}

/// Hints about a tool's behaviour. Hints are never authority: a host decides for itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ToolAnnotations {
    /// A display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// It does not modify its environment (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    /// It may destroy data, when not read-only (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    /// Calling it again with the same arguments has no further effect (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    /// It talks to an open world of external entities (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
}

impl ToolAnnotations {
    /// No hints.
    pub fn new() -> Self {
        ToolAnnotations::default()
    }
}

builders!(ToolAnnotations {
    /// Sets `title`.
    with_title => title: String;
    /// Sets `readOnlyHint`.
    with_read_only => read_only_hint: bool;
    /// Sets `destructiveHint`.
    with_destructive => destructive_hint: bool;
    /// Sets `idempotentHint`.
    with_idempotent => idempotent_hint: bool;
    /// Sets `openWorldHint`.
    with_open_world => open_world_hint: bool;
});

/// Whether a tool runs as a task (2025-11-25 `execution.taskSupport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum TaskSupport {
    /// Never as a task (the default).
    Forbidden,
    /// As a task when the client asks.
    Optional,
    /// Only as a task.
    Required,
}

wire_display!(TaskSupport { Forbidden => "forbidden", Optional => "optional", Required => "required" });

/// How a tool executes (2025-11-25).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ToolExecution {
    /// Whether it runs as a task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_support: Option<TaskSupport>,
}

impl ToolExecution {
    /// No execution properties.
    pub fn new() -> Self {
        ToolExecution::default()
    }
}

builders!(ToolExecution {
    /// Sets `taskSupport`.
    with_task_support => task_support: TaskSupport;
});

/// A tool's description in `tools/list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Tool {
    /// The tool's name.
    pub name: String,
    /// Display name (2025-06-18).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the tool does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the arguments (an object schema).
    pub input_schema: JsonObject,
    /// JSON Schema of `structuredContent` (2025-06-18).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<JsonObject>,
    /// Hints (never authority).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<ToolAnnotations>,
    /// Execution properties such as `taskSupport` (2025-11-25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<ToolExecution>,
    /// Icons (2025-11-25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icons: Option<Vec<Icon>>,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

impl Tool {
    /// A tool with a name and the JSON Schema of its arguments.
    pub fn new(name: impl Into<String>, input_schema: JsonObject) -> Self {
        Tool {
            name: name.into(),
            title: None,
            description: None,
            input_schema,
            output_schema: None,
            annotations: None,
            execution: None,
            icons: None,
            meta: None,
        }
    }
    /// Whether the tool can only run as a task (`execution.taskSupport` is `required`).
    pub fn requires_task(&self) -> bool {
        self.execution.as_ref().and_then(|e| e.task_support) == Some(TaskSupport::Required)
    }
}

builders!(Tool {
    /// Sets `title`.
    with_title => title: String;
    /// Sets `description`.
    with_description => description: String;
    /// Sets `outputSchema`.
    with_output_schema => output_schema: JsonObject;
    /// Sets `annotations`.
    with_annotations => annotations: ToolAnnotations;
    /// Sets `execution`.
    with_execution => execution: ToolExecution;
    /// Sets `icons`.
    with_icons => icons: Vec<Icon>;
    /// Sets `_meta`.
    with_meta => meta: JsonObject;
});

/// `tools/list` result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ListToolsResult {
    /// One page of tools.
    pub tools: Vec<Tool>,
    /// The cursor of the next page, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

impl ListToolsResult {
    /// One page of tools.
    pub fn new(tools: Vec<Tool>) -> Self {
        ListToolsResult {
            tools,
            ..Default::default()
        }
    }
}

builders!(ListToolsResult {
    /// Sets `nextCursor`.
    with_next_cursor => next_cursor: String;
});

/// Asks for a request to run as a task (2025-11-25 `task`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TaskMetadata {
    /// How long to keep the task after it was created, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<u64>,
}

builders!(TaskMetadata {
    /// Sets `ttl` (milliseconds).
    with_ttl => ttl: u64;
});

/// `tools/call` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CallToolParams {
    /// The tool's name.
    pub name: String,
    /// The arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<JsonObject>,
    /// Run as a task (2025-11-25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskMetadata>,
    /// Metadata (progress token, idempotency key: see [`crate::idempotency`]).
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
    /// The SEP-3182 idempotency key, sent only to a server that declared
    /// `capabilities.tools.idempotency` (see [`crate::idempotency`]).
    #[serde(
        default,
        rename = "idempotencyKey",
        skip_serializing_if = "Option::is_none"
    )]
    pub idempotency_key: Option<String>,
}

impl CallToolParams {
    /// A call of the tool `name`, without arguments.
    pub fn new(name: impl Into<String>) -> Self {
        CallToolParams {
            name: name.into(),
            arguments: None,
            task: None,
            meta: None,
            idempotency_key: None,
        }
    }
}

builders!(CallToolParams {
    /// Sets `arguments`.
    with_arguments => arguments: JsonObject;
    /// Sets `task`.
    with_task => task: TaskMetadata;
    /// Sets `_meta`.
    with_meta => meta: JsonObject;
});

/// The contents of a resource: text or base64 binary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ResourceContents {
    /// The resource's URI.
    pub uri: String,
    /// MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Text contents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Base64 binary contents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

impl ResourceContents {
    /// Text contents for `uri`.
    pub fn text(uri: impl Into<String>, text: impl Into<String>) -> Self {
        ResourceContents {
            uri: uri.into(),
            mime_type: None,
            text: Some(text.into()),
            blob: None,
            meta: None,
        }
    }
    /// Binary contents for `uri`, already base64-encoded.
    pub fn blob(uri: impl Into<String>, base64: impl Into<String>) -> Self {
        ResourceContents {
            uri: uri.into(),
            mime_type: None,
            text: None,
            blob: Some(base64.into()),
            meta: None,
        }
    }
}

builders!(ResourceContents {
    /// Sets `mimeType`.
    with_mime_type => mime_type: String;
    /// Sets `_meta`.
    with_meta => meta: JsonObject;
});

/// A text block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TextContent {
    /// The text.
    pub text: String,
    /// Annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

/// An image or audio block: base64 data and its MIME type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct MediaContent {
    /// Base64 data.
    pub data: String,
    /// MIME type.
    pub mime_type: String,
    /// Annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

/// A resource's contents embedded in a result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct EmbeddedResource {
    /// The contents.
    pub resource: ResourceContents,
    /// Annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

/// A content block of a tool result or a prompt message.
///
/// On the wire an object tagged by its `type` member. Deserializing reads a block whose `type`
/// comes first (as every SDK writes it) straight into its variant; a block with `type`
/// elsewhere is buffered first, as serde's internally tagged enums always do.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Content {
    /// Text.
    Text(TextContent),
    /// An image, base64.
    Image(MediaContent),
    /// Audio, base64 (2025-03-26).
    Audio(MediaContent),
    /// A link to a resource (2025-06-18): a [`Resource`] description.
    ResourceLink(Resource),
    /// An embedded resource.
    Resource(EmbeddedResource),
}

/// The `type` of each [`Content`] variant, as serialized.
const CONTENT_TYPES: &[&str] = &["text", "image", "audio", "resource_link", "resource"];

/// A [`Content`] block's `type`, read without allocating.
#[derive(Clone, Copy)]
enum ContentType {
    Text,
    Image,
    Audio,
    ResourceLink,
    Resource,
}

impl ContentType {
    fn of<E: serde::de::Error>(tag: &str) -> Result<Self, E> {
        Ok(match tag {
            "text" => ContentType::Text,
            "image" => ContentType::Image,
            "audio" => ContentType::Audio,
            "resource_link" => ContentType::ResourceLink,
            "resource" => ContentType::Resource,
            other => return Err(E::unknown_variant(other, CONTENT_TYPES)),
        })
    }

    /// The block of this type, deserialized from the block's other members.
    fn read<'de, D: serde::Deserializer<'de>>(self, rest: D) -> Result<Content, D::Error> {
        Ok(match self {
            ContentType::Text => Content::Text(TextContent::deserialize(rest)?),
            ContentType::Image => Content::Image(MediaContent::deserialize(rest)?),
            ContentType::Audio => Content::Audio(MediaContent::deserialize(rest)?),
            ContentType::ResourceLink => Content::ResourceLink(Resource::deserialize(rest)?),
            ContentType::Resource => Content::Resource(EmbeddedResource::deserialize(rest)?),
        })
    }
}

impl<'de> Deserialize<'de> for ContentType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Tag;
        impl serde::de::Visitor<'_> for Tag {
            type Value = ContentType;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a content type")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ContentType, E> {
                ContentType::of(v)
            }
        }
        d.deserialize_str(Tag)
    }
}

/// A member name of a content block: its tag, or any other (kept only when buffering).
enum BlockKey {
    Type,
    Other(String),
}

impl<'de> Deserialize<'de> for BlockKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Key;
        impl serde::de::Visitor<'_> for Key {
            type Value = BlockKey;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a member name")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<BlockKey, E> {
                Ok(match v {
                    "type" => BlockKey::Type,
                    other => BlockKey::Other(other.to_owned()),
                })
            }
        }
        d.deserialize_identifier(Key)
    }
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Block;
        impl<'de> serde::de::Visitor<'de> for Block {
            type Value = Content;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a content block (an object with a `type`)")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Content, A::Error> {
                use serde::de::Error as _;
                let mut block = Map::new();
                let mut tag = None;
                match map.next_key::<BlockKey>()? {
                    // The common case: the tag first, the rest read straight into its variant.
                    Some(BlockKey::Type) => {
                        let tag: ContentType = map.next_value()?;
                        return tag.read(serde::de::value::MapAccessDeserializer::new(map));
                    }
                    Some(BlockKey::Other(k)) => {
                        block.insert(k, map.next_value()?);
                    }
                    None => return Err(A::Error::missing_field("type")),
                }
                // The tag later: buffer the other members, then read them into its variant.
                while let Some(k) = map.next_key::<BlockKey>()? {
                    match k {
                        BlockKey::Type if tag.is_some() => {
                            return Err(A::Error::duplicate_field("type"))
                        }
                        BlockKey::Type => tag = Some(map.next_value::<ContentType>()?),
                        BlockKey::Other(k) => {
                            block.insert(k, map.next_value()?);
                        }
                    }
                }
                let tag = tag.ok_or_else(|| A::Error::missing_field("type"))?;
                tag.read(Value::Object(block)).map_err(A::Error::custom)
            }
        }
        d.deserialize_map(Block)
    }
}

impl Content {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Content::Text(TextContent {
            text: text.into(),
            annotations: None,
            meta: None,
        })
    }
    /// An image block (base64 data).
    pub fn image(base64: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Content::Image(MediaContent::new(base64, mime_type))
    }
    /// An audio block (base64 data).
    pub fn audio(base64: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Content::Audio(MediaContent::new(base64, mime_type))
    }
    /// A link to a resource.
    pub fn resource_link(resource: Resource) -> Self {
        Content::ResourceLink(resource)
    }
    /// An embedded resource.
    pub fn embedded(resource: ResourceContents) -> Self {
        Content::Resource(EmbeddedResource {
            resource,
            annotations: None,
            meta: None,
        })
    }
    /// The same block with `annotations` (a resource link keeps its own).
    #[must_use]
    pub fn with_annotations(mut self, annotations: Annotations) -> Self {
        match &mut self {
            Content::Text(c) => c.annotations = Some(annotations),
            Content::Image(c) | Content::Audio(c) => c.annotations = Some(annotations),
            Content::ResourceLink(r) => r.annotations = Some(annotations),
            Content::Resource(c) => c.annotations = Some(annotations),
        }
        self
    }
    /// The text of a text block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Content::Text(t) => Some(&t.text),
            _ => None,
        }
    }
}

impl MediaContent {
    /// Base64 data of a MIME type.
    pub fn new(base64: impl Into<String>, mime_type: impl Into<String>) -> Self {
        MediaContent {
            data: base64.into(),
            mime_type: mime_type.into(),
            annotations: None,
            meta: None,
        }
    }
}

impl From<String> for Content {
    fn from(text: String) -> Self {
        Content::text(text)
    }
}

impl From<&str> for Content {
    fn from(text: &str) -> Self {
        Content::text(text)
    }
}

/// `tools/call` result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct CallToolResult {
    /// Unstructured content.
    #[serde(default)]
    pub content: Vec<Content>,
    /// Structured content (2025-06-18), conforming to the tool's output schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    /// Whether the tool failed; the content says why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

impl CallToolResult {
    /// A successful result with these blocks.
    pub fn new(content: Vec<Content>) -> Self {
        CallToolResult {
            content,
            ..Default::default()
        }
    }
    /// A successful result with one text block.
    pub fn text(text: impl Into<String>) -> Self {
        CallToolResult::new(vec![Content::text(text)])
    }
    /// A failed result (`isError: true`) with one text block, which the model reads.
    pub fn error(text: impl Into<String>) -> Self {
        CallToolResult {
            content: vec![Content::text(text)],
            is_error: Some(true),
            ..Default::default()
        }
    }
    /// A successful result with `structuredContent`, mirrored as one text block of its JSON
    /// (for clients older than 2025-06-18).
    pub fn structured(value: Value) -> Self {
        CallToolResult {
            content: vec![Content::text(value.to_string())],
            structured_content: Some(value),
            ..Default::default()
        }
    }
    /// Whether `isError` is true.
    pub fn is_error(&self) -> bool {
        self.is_error == Some(true)
    }
    /// The text blocks, in order.
    pub fn texts(&self) -> impl Iterator<Item = &str> {
        self.content.iter().filter_map(Content::as_text)
    }
}

builders!(CallToolResult {
    /// Sets `structuredContent`.
    with_structured_content => structured_content: Value;
    /// Sets `isError`.
    with_is_error => is_error: bool;
    /// Sets `_meta`.
    with_meta => meta: JsonObject;
});

/// A resource in `resources/list` (and the body of a resource link).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Resource {
    /// The URI.
    pub uri: String,
    /// The name.
    pub name: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Size in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// Icons (2025-11-25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icons: Option<Vec<Icon>>,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

impl Resource {
    /// A resource with a URI and a name.
    pub fn new(uri: impl Into<String>, name: impl Into<String>) -> Self {
        Resource {
            uri: uri.into(),
            name: name.into(),
            title: None,
            description: None,
            mime_type: None,
            size: None,
            annotations: None,
            icons: None,
            meta: None,
        }
    }
}

builders!(Resource {
    /// Sets `title`.
    with_title => title: String;
    /// Sets `description`.
    with_description => description: String;
    /// Sets `mimeType`.
    with_mime_type => mime_type: String;
    /// Sets `size` (bytes).
    with_size => size: u64;
    /// Sets `annotations`.
    with_annotations => annotations: Annotations;
    /// Sets `icons`.
    with_icons => icons: Vec<Icon>;
    /// Sets `_meta`.
    with_meta => meta: JsonObject;
});

/// `resources/list` result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ListResourcesResult {
    /// One page of resources.
    pub resources: Vec<Resource>,
    /// The cursor of the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

impl ListResourcesResult {
    /// One page of resources.
    pub fn new(resources: Vec<Resource>) -> Self {
        ListResourcesResult {
            resources,
            ..Default::default()
        }
    }
}

builders!(ListResourcesResult {
    /// Sets `nextCursor`.
    with_next_cursor => next_cursor: String;
});

/// A resource template (RFC 6570 URI template).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ResourceTemplate {
    /// The URI template.
    pub uri_template: String,
    /// The name.
    pub name: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// Icons (2025-11-25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icons: Option<Vec<Icon>>,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

impl ResourceTemplate {
    /// A template with a URI template and a name.
    pub fn new(uri_template: impl Into<String>, name: impl Into<String>) -> Self {
        ResourceTemplate {
            uri_template: uri_template.into(),
            name: name.into(),
            title: None,
            description: None,
            mime_type: None,
            annotations: None,
            icons: None,
            meta: None,
        }
    }
}

builders!(ResourceTemplate {
    /// Sets `title`.
    with_title => title: String;
    /// Sets `description`.
    with_description => description: String;
    /// Sets `mimeType`.
    with_mime_type => mime_type: String;
    /// Sets `annotations`.
    with_annotations => annotations: Annotations;
    /// Sets `icons`.
    with_icons => icons: Vec<Icon>;
    /// Sets `_meta`.
    with_meta => meta: JsonObject;
});

/// `resources/templates/list` result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ListResourceTemplatesResult {
    /// One page of templates.
    pub resource_templates: Vec<ResourceTemplate>,
    /// The cursor of the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

impl ListResourceTemplatesResult {
    /// One page of templates.
    pub fn new(resource_templates: Vec<ResourceTemplate>) -> Self {
        ListResourceTemplatesResult {
            resource_templates,
            ..Default::default()
        }
    }
}

builders!(ListResourceTemplatesResult {
    /// Sets `nextCursor`.
    with_next_cursor => next_cursor: String;
});

/// Params naming one resource (`resources/read`, `subscribe`, `unsubscribe`, `updated`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct UriParams {
    /// The resource URI.
    pub uri: String,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

impl UriParams {
    /// Params naming `uri`.
    pub fn new(uri: impl Into<String>) -> Self {
        UriParams {
            uri: uri.into(),
            meta: None,
        }
    }
}

/// `resources/read` result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ReadResourceResult {
    /// The contents (one resource may have several parts).
    pub contents: Vec<ResourceContents>,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

impl ReadResourceResult {
    /// A result with these parts.
    pub fn new(contents: Vec<ResourceContents>) -> Self {
        ReadResourceResult {
            contents,
            meta: None,
        }
    }
    /// A result with one text part.
    pub fn text(uri: impl Into<String>, text: impl Into<String>) -> Self {
        ReadResourceResult::new(vec![ResourceContents::text(uri, text)])
    }
}

impl From<ResourceContents> for ReadResourceResult {
    fn from(c: ResourceContents) -> Self {
        ReadResourceResult::new(vec![c])
    }
}

impl From<Vec<ResourceContents>> for ReadResourceResult {
    fn from(c: Vec<ResourceContents>) -> Self {
        ReadResourceResult::new(c)
    }
}

/// A prompt argument.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PromptArgument {
    /// The argument's name.
    pub name: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether it must be given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
}

impl PromptArgument {
    /// An argument named `name`.
    pub fn new(name: impl Into<String>) -> Self {
        PromptArgument {
            name: name.into(),
            title: None,
            description: None,
            required: None,
        }
    }
}

builders!(PromptArgument {
    /// Sets `title`.
    with_title => title: String;
    /// Sets `description`.
    with_description => description: String;
    /// Sets `required`.
    with_required => required: bool;
});

/// A prompt in `prompts/list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Prompt {
    /// The name.
    pub name: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Vec<PromptArgument>>,
    /// Icons (2025-11-25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icons: Option<Vec<Icon>>,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

impl Prompt {
    /// A prompt named `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Prompt {
            name: name.into(),
            title: None,
            description: None,
            arguments: None,
            icons: None,
            meta: None,
        }
    }
}

builders!(Prompt {
    /// Sets `title`.
    with_title => title: String;
    /// Sets `description`.
    with_description => description: String;
    /// Sets `arguments`.
    with_arguments => arguments: Vec<PromptArgument>;
    /// Sets `icons`.
    with_icons => icons: Vec<Icon>;
    /// Sets `_meta`.
    with_meta => meta: JsonObject;
});

/// `prompts/list` result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ListPromptsResult {
    /// One page of prompts.
    pub prompts: Vec<Prompt>,
    /// The cursor of the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

impl ListPromptsResult {
    /// One page of prompts.
    pub fn new(prompts: Vec<Prompt>) -> Self {
        ListPromptsResult {
            prompts,
            ..Default::default()
        }
    }
}

builders!(ListPromptsResult {
    /// Sets `nextCursor`.
    with_next_cursor => next_cursor: String;
});

/// `prompts/get` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct GetPromptParams {
    /// The prompt's name.
    pub name: String,
    /// String arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<BTreeMap<String, String>>,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

impl GetPromptParams {
    /// Params getting the prompt `name` without arguments.
    pub fn new(name: impl Into<String>) -> Self {
        GetPromptParams {
            name: name.into(),
            arguments: None,
            meta: None,
        }
    }
}

builders!(GetPromptParams {
    /// Sets `arguments`.
    with_arguments => arguments: BTreeMap<String, String>;
});

/// A message of a prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PromptMessage {
    /// `user` or `assistant`.
    pub role: Role,
    /// The content.
    pub content: Content,
}

impl PromptMessage {
    /// A message.
    pub fn new(role: Role, content: impl Into<Content>) -> Self {
        PromptMessage {
            role,
            content: content.into(),
        }
    }
    /// A user message with one text block.
    pub fn user(text: impl Into<String>) -> Self {
        PromptMessage::new(Role::User, Content::text(text))
    }
    /// An assistant message with one text block.
    pub fn assistant(text: impl Into<String>) -> Self {
        PromptMessage::new(Role::Assistant, Content::text(text))
    }
}

/// Who speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Role {
    /// The user.
    User,
    /// The assistant.
    Assistant,
}

wire_display!(Role { User => "user", Assistant => "assistant" });

/// `prompts/get` result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct GetPromptResult {
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The messages.
    pub messages: Vec<PromptMessage>,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

impl GetPromptResult {
    /// A result with these messages.
    pub fn new(messages: Vec<PromptMessage>) -> Self {
        GetPromptResult {
            messages,
            ..Default::default()
        }
    }
}

builders!(GetPromptResult {
    /// Sets `description`.
    with_description => description: String;
    /// Sets `_meta`.
    with_meta => meta: JsonObject;
});

impl From<Vec<PromptMessage>> for GetPromptResult {
    fn from(messages: Vec<PromptMessage>) -> Self {
        GetPromptResult::new(messages)
    }
}

impl From<PromptMessage> for GetPromptResult {
    fn from(message: PromptMessage) -> Self {
        GetPromptResult::new(vec![message])
    }
}

/// What `completion/complete` completes: a prompt argument or a resource template variable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
#[non_exhaustive]
pub enum CompletionReference {
    /// A prompt, by name.
    #[serde(rename = "ref/prompt")]
    #[non_exhaustive]
    Prompt {
        /// The prompt's name.
        name: String,
        /// Its display name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
    },
    /// A resource template, by URI template.
    #[serde(rename = "ref/resource")]
    #[non_exhaustive]
    Resource {
        /// The URI template.
        uri: String,
    },
}

impl CompletionReference {
    /// The prompt `name`.
    pub fn prompt(name: impl Into<String>) -> Self {
        CompletionReference::Prompt {
            name: name.into(),
            title: None,
        }
    }
    /// The resource template `uri_template`.
    pub fn resource(uri_template: impl Into<String>) -> Self {
        CompletionReference::Resource {
            uri: uri_template.into(),
        }
    }
}

/// The argument being completed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CompletionArgument {
    /// Its name.
    pub name: String,
    /// What has been typed so far.
    pub value: String,
}

impl CompletionArgument {
    /// The argument `name`, typed so far as `value`.
    pub fn new(name: impl Into<String>, value: impl Into<String>) -> Self {
        CompletionArgument {
            name: name.into(),
            value: value.into(),
        }
    }
}

/// What the client has already resolved (2025-06-18).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CompletionContext {
    /// Arguments or template variables already given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<BTreeMap<String, String>>,
}

/// `completion/complete` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CompleteParams {
    /// What is being completed.
    #[serde(rename = "ref")]
    pub reference: CompletionReference,
    /// The argument.
    pub argument: CompletionArgument,
    /// Already-resolved arguments (2025-06-18).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<CompletionContext>,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

impl CompleteParams {
    /// Completes `argument` of `reference`.
    pub fn new(reference: CompletionReference, argument: CompletionArgument) -> Self {
        CompleteParams {
            reference,
            argument,
            context: None,
            meta: None,
        }
    }
}

builders!(CompleteParams {
    /// Sets `context`.
    with_context => context: CompletionContext;
});

/// The completion values.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Completion {
    /// At most 100 values.
    pub values: Vec<String>,
    /// How many there are in all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// Whether more exist than were returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_more: Option<bool>,
}

impl Completion {
    /// These values (the server keeps the first 100 and sets `hasMore` and `total`).
    pub fn new(values: Vec<String>) -> Self {
        Completion {
            values,
            ..Default::default()
        }
    }
}

builders!(Completion {
    /// Sets `total`.
    with_total => total: u64;
    /// Sets `hasMore`.
    with_has_more => has_more: bool;
});

/// `completion/complete` result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CompleteResult {
    /// The completion.
    pub completion: Completion,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

impl CompleteResult {
    /// A result holding `completion`.
    pub fn new(completion: Completion) -> Self {
        CompleteResult {
            completion,
            meta: None,
        }
    }
}

/// Log levels (RFC 5424 severities), least severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum LoggingLevel {
    /// Debug.
    Debug,
    /// Info.
    Info,
    /// Notice.
    Notice,
    /// Warning.
    Warning,
    /// Error.
    Error,
    /// Critical.
    Critical,
    /// Alert.
    Alert,
    /// Emergency.
    Emergency,
}

wire_display!(LoggingLevel {
    Debug => "debug",
    Info => "info",
    Notice => "notice",
    Warning => "warning",
    Error => "error",
    Critical => "critical",
    Alert => "alert",
    Emergency => "emergency",
});

/// `logging/setLevel` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SetLevelParams {
    /// The least severe level the client wants.
    pub level: LoggingLevel,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

impl SetLevelParams {
    /// Params setting `level`.
    pub fn new(level: LoggingLevel) -> Self {
        SetLevelParams { level, meta: None }
    }
}

/// `notifications/message` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LoggingMessageParams {
    /// Severity.
    pub level: LoggingLevel,
    /// The logger's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logger: Option<String>,
    /// Any JSON.
    pub data: Value,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

impl LoggingMessageParams {
    /// A message at `level`.
    pub fn new(level: LoggingLevel, data: Value) -> Self {
        LoggingMessageParams {
            level,
            logger: None,
            data,
            meta: None,
        }
    }
}

builders!(LoggingMessageParams {
    /// Sets `logger`.
    with_logger => logger: String;
});

/// A progress token: string or integer.
pub type ProgressToken = crate::jsonrpc::RequestId;

/// `notifications/progress` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ProgressParams {
    /// The token from the request's `_meta.progressToken`.
    pub progress_token: ProgressToken,
    /// Progress so far; increases.
    pub progress: f64,
    /// The total, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    /// A message (2025-03-26).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

impl ProgressParams {
    /// Progress of the request that sent `progress_token`.
    pub fn new(progress_token: ProgressToken, progress: f64) -> Self {
        ProgressParams {
            progress_token,
            progress,
            total: None,
            message: None,
            meta: None,
        }
    }
}

builders!(ProgressParams {
    /// Sets `total`.
    with_total => total: f64;
    /// Sets `message`.
    with_message => message: String;
});

/// `notifications/cancelled` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct CancelledParams {
    /// The id of the request to cancel.
    pub request_id: crate::jsonrpc::RequestId,
    /// Why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

impl CancelledParams {
    /// Cancels the request `request_id`.
    pub fn new(request_id: crate::jsonrpc::RequestId) -> Self {
        CancelledParams {
            request_id,
            reason: None,
            meta: None,
        }
    }
}

builders!(CancelledParams {
    /// Sets `reason`.
    with_reason => reason: String;
});

/// A message in `sampling/createMessage`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SamplingMessage {
    /// Who speaks.
    pub role: Role,
    /// The content: a block, or (2025-11-25) an array of blocks; kept as JSON.
    pub content: Value,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

impl SamplingMessage {
    /// A message with one text block.
    pub fn text_message(role: Role, text: impl Into<String>) -> Self {
        SamplingMessage {
            role,
            content: serde_json::json!({"type": "text", "text": text.into()}),
            meta: None,
        }
    }
    /// A message with any content (one block or an array of blocks).
    pub fn new(role: Role, content: Value) -> Self {
        SamplingMessage {
            role,
            content,
            meta: None,
        }
    }
    /// The message's text, when its content is one text block or begins with one.
    pub fn text(&self) -> Option<&str> {
        let block = match &self.content {
            Value::Array(items) => items.first()?,
            other => other,
        };
        block.get("text").and_then(Value::as_str)
    }
}

/// `sampling/createMessage` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct CreateMessageParams {
    /// The conversation.
    pub messages: Vec<SamplingMessage>,
    /// The most tokens to sample.
    pub max_tokens: u64,
    /// A system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// Model preferences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_preferences: Option<Value>,
    /// Which context to include.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_context: Option<String>,
    /// Temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Stop sequences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_sequences: Option<Vec<String>>,
    /// Tools the model may use (2025-11-25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Tool>>,
    /// How the model may use them: `{mode: auto | required | none}` (2025-11-25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<JsonObject>,
    /// Provider metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    /// Run as a task (2025-11-25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskMetadata>,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

impl CreateMessageParams {
    /// Asks for at most `max_tokens` tokens continuing `messages`.
    pub fn new(messages: Vec<SamplingMessage>, max_tokens: u64) -> Self {
        CreateMessageParams {
            messages,
            max_tokens,
            system_prompt: None,
            model_preferences: None,
            include_context: None,
            temperature: None,
            stop_sequences: None,
            tools: None,
            tool_choice: None,
            metadata: None,
            task: None,
            meta: None,
        }
    }
}

builders!(CreateMessageParams {
    /// Sets `systemPrompt`.
    with_system_prompt => system_prompt: String;
    /// Sets `modelPreferences`.
    with_model_preferences => model_preferences: Value;
    /// Sets `includeContext`.
    with_include_context => include_context: String;
    /// Sets `temperature`.
    with_temperature => temperature: f64;
    /// Sets `stopSequences`.
    with_stop_sequences => stop_sequences: Vec<String>;
    /// Sets `tools`.
    with_tools => tools: Vec<Tool>;
    /// Sets `toolChoice`.
    with_tool_choice => tool_choice: JsonObject;
    /// Sets `metadata`.
    with_metadata => metadata: Value;
});

/// `sampling/createMessage` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct CreateMessageResult {
    /// Who speaks (the assistant).
    pub role: Role,
    /// The content, as JSON.
    pub content: Value,
    /// The model that answered.
    pub model: String,
    /// Why sampling stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

impl CreateMessageResult {
    /// What `model` answered as `role`.
    pub fn new(role: Role, content: Value, model: impl Into<String>) -> Self {
        CreateMessageResult {
            role,
            content,
            model: model.into(),
            stop_reason: None,
            meta: None,
        }
    }
    /// An assistant answer of one text block.
    pub fn text(model: impl Into<String>, text: impl Into<String>) -> Self {
        CreateMessageResult::new(
            Role::Assistant,
            serde_json::json!({"type": "text", "text": text.into()}),
            model,
        )
    }
}

builders!(CreateMessageResult {
    /// Sets `stopReason`.
    with_stop_reason => stop_reason: String;
});

/// `elicitation/create` params: a form (`requestedSchema`) or, in 2025-11-25, a URL.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ElicitParams {
    /// `form` or `url` (absent means form).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// What to ask the user.
    pub message: String,
    /// Form mode: a flat object schema of primitive properties.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_schema: Option<JsonObject>,
    /// URL mode: the URL to open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// URL mode: the id of this elicitation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elicitation_id: Option<String>,
    /// Run as a task (2025-11-25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskMetadata>,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

impl ElicitParams {
    /// A form asking `message`, with the fields of `requested_schema` (no `mode` member, which
    /// every revision reads as a form).
    pub fn form(message: impl Into<String>, requested_schema: JsonObject) -> Self {
        ElicitParams {
            mode: None,
            message: message.into(),
            requested_schema: Some(requested_schema),
            url: None,
            elicitation_id: None,
            task: None,
            meta: None,
        }
    }
    /// A URL-mode elicitation (2025-11-25): the user opens `url`.
    pub fn url(
        message: impl Into<String>,
        url: impl Into<String>,
        elicitation_id: impl Into<String>,
    ) -> Self {
        ElicitParams {
            mode: Some("url".into()),
            message: message.into(),
            requested_schema: None,
            url: Some(url.into()),
            elicitation_id: Some(elicitation_id.into()),
            task: None,
            meta: None,
        }
    }
    /// Whether this is a URL-mode elicitation.
    pub fn is_url_mode(&self) -> bool {
        self.mode.as_deref() == Some("url")
    }
}

builders!(ElicitParams {
    /// Sets `mode` (`form` or `url`).
    with_mode => mode: String;
});

/// What the user did with an elicitation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ElicitAction {
    /// Submitted.
    Accept,
    /// Declined.
    Decline,
    /// Dismissed.
    Cancel,
}

wire_display!(ElicitAction { Accept => "accept", Decline => "decline", Cancel => "cancel" });

/// `elicitation/create` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ElicitResult {
    /// What the user did.
    pub action: ElicitAction,
    /// The submitted values (form mode, accept only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<JsonObject>,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

impl ElicitResult {
    /// The user submitted `content` (form mode).
    pub fn accept(content: JsonObject) -> Self {
        ElicitResult {
            action: ElicitAction::Accept,
            content: Some(content),
            meta: None,
        }
    }
    /// The user did `action`, with no content (URL mode, decline, cancel).
    pub fn action(action: ElicitAction) -> Self {
        ElicitResult {
            action,
            content: None,
            meta: None,
        }
    }
}

/// A root the client exposes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Root {
    /// A `file://` URI.
    pub uri: String,
    /// A name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

impl Root {
    /// The root at `uri`.
    pub fn new(uri: impl Into<String>) -> Self {
        Root {
            uri: uri.into(),
            name: None,
            meta: None,
        }
    }
}

builders!(Root {
    /// Sets `name`.
    with_name => name: String;
});

/// `roots/list` result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ListRootsResult {
    /// The roots.
    pub roots: Vec<Root>,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

impl ListRootsResult {
    /// These roots.
    pub fn new(roots: Vec<Root>) -> Self {
        ListRootsResult { roots, meta: None }
    }
}

/// An empty result (`ping`, `logging/setLevel`, subscribe).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct EmptyResult {}

/// MCP method names.
pub mod methods {
    /// `initialize`.
    pub const INITIALIZE: &str = "initialize";
    /// `ping`.
    pub const PING: &str = "ping";
    /// `tools/list`.
    pub const TOOLS_LIST: &str = "tools/list";
    /// `tools/call`.
    pub const TOOLS_CALL: &str = "tools/call";
    /// `resources/list`.
    pub const RESOURCES_LIST: &str = "resources/list";
    /// `resources/templates/list`.
    pub const RESOURCES_TEMPLATES_LIST: &str = "resources/templates/list";
    /// `resources/read`.
    pub const RESOURCES_READ: &str = "resources/read";
    /// `resources/subscribe`.
    pub const RESOURCES_SUBSCRIBE: &str = "resources/subscribe";
    /// `resources/unsubscribe`.
    pub const RESOURCES_UNSUBSCRIBE: &str = "resources/unsubscribe";
    /// `prompts/list`.
    pub const PROMPTS_LIST: &str = "prompts/list";
    /// `prompts/get`.
    pub const PROMPTS_GET: &str = "prompts/get";
    /// `completion/complete`.
    pub const COMPLETION_COMPLETE: &str = "completion/complete";
    /// `logging/setLevel`.
    pub const LOGGING_SET_LEVEL: &str = "logging/setLevel";
    /// `sampling/createMessage`.
    pub const SAMPLING_CREATE_MESSAGE: &str = "sampling/createMessage";
    /// `elicitation/create`.
    pub const ELICITATION_CREATE: &str = "elicitation/create";
    /// `roots/list`.
    pub const ROOTS_LIST: &str = "roots/list";
    /// `notifications/initialized`.
    pub const INITIALIZED: &str = "notifications/initialized";
    /// `notifications/cancelled`.
    pub const CANCELLED: &str = "notifications/cancelled";
    /// `notifications/progress`.
    pub const PROGRESS: &str = "notifications/progress";
    /// `notifications/message`.
    pub const MESSAGE: &str = "notifications/message";
    /// `notifications/resources/updated`.
    pub const RESOURCE_UPDATED: &str = "notifications/resources/updated";
    /// `notifications/resources/list_changed`.
    pub const RESOURCES_LIST_CHANGED: &str = "notifications/resources/list_changed";
    /// `notifications/tools/list_changed`.
    pub const TOOLS_LIST_CHANGED: &str = "notifications/tools/list_changed";
    /// `notifications/prompts/list_changed`.
    pub const PROMPTS_LIST_CHANGED: &str = "notifications/prompts/list_changed";
    /// `notifications/roots/list_changed`.
    pub const ROOTS_LIST_CHANGED: &str = "notifications/roots/list_changed";
    /// `notifications/elicitation/complete` (2025-11-25).
    pub const ELICITATION_COMPLETE: &str = "notifications/elicitation/complete";
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One block of every content type, as SDKs write them (`type` first).
    const BLOCKS: &[&str] = &[
        r#"{"type":"text","text":"hi \"there\"","annotations":{"priority":0.5},"_meta":{"k":1}}"#,
        r#"{"type":"image","data":"aGk=","mimeType":"image/png"}"#,
        r#"{"type":"audio","data":"aGk=","mimeType":"audio/wav"}"#,
        r#"{"type":"resource_link","uri":"file:///a","name":"a","mimeType":"text/plain"}"#,
        r#"{"type":"resource","resource":{"uri":"file:///a","text":"x"}}"#,
    ];

    /// `block` with its `type` member moved to the end.
    fn tag_last(block: &str) -> String {
        let (tag, rest) = block[1..].split_once(',').unwrap();
        format!("{{{},{tag}}}", rest.strip_suffix('}').unwrap())
    }

    #[test]
    fn every_block_reads_the_same_with_its_type_first_or_last_and_writes_back_as_read() {
        let kinds = ["Text", "Image", "Audio", "ResourceLink", "Resource"];
        for (block, kind) in BLOCKS.iter().zip(kinds) {
            let first: Content = serde_json::from_str(block).unwrap();
            assert!(format!("{first:?}").starts_with(kind), "{first:?}");
            let moved = tag_last(block);
            assert!(
                moved.ends_with(&format!(r#","type":"{}"}}"#, tag_of(&first))),
                "{moved}"
            );
            let last: Content = serde_json::from_str(&moved).unwrap();
            let value: Content =
                serde_json::from_value(serde_json::from_str(&moved).unwrap()).unwrap();
            assert_eq!(first, last);
            assert_eq!(first, value);
            assert_eq!(serde_json::to_string(&first).unwrap(), *block);
        }
    }

    fn tag_of(c: &Content) -> &'static str {
        match c {
            Content::Text(_) => "text",
            Content::Image(_) => "image",
            Content::Audio(_) => "audio",
            Content::ResourceLink(_) => "resource_link",
            Content::Resource(_) => "resource",
        }
    }

    #[test]
    fn bad_blocks_are_refused_with_the_reason() {
        let err = |json: &str| {
            serde_json::from_str::<Content>(json)
                .unwrap_err()
                .to_string()
        };
        let unknown = "unknown variant `video`, expected one of `text`, `image`, `audio`, `resource_link`, `resource`";
        assert!(err(r#"{"type":"video","data":"x"}"#).starts_with(unknown));
        assert!(err(r#"{"data":"x","type":"video"}"#).starts_with(unknown));
        assert!(err(r#"{"text":"x"}"#).starts_with("missing field `type`"));
        assert!(err(r#"{}"#).starts_with("missing field `type`"));
        assert!(err(r#"{"type":"text"}"#).starts_with("missing field `text`"));
        assert!(err(r#"{"text":"x","type":"text","type":"text"}"#)
            .starts_with("duplicate field `type`"));
        assert!(err(r#"{"type":7,"text":"x"}"#).starts_with("invalid type: integer `7`"));
        assert!(err(r#"["text"]"#).starts_with("invalid type: sequence"));
        // In a result, the error names where it is.
        let r = serde_json::from_str::<CallToolResult>(r#"{"content":[{"type":"text"}]}"#);
        assert!(r.unwrap_err().to_string().contains("missing field `text`"));
    }
}
