//! Typed tools, prompts and templates: definitions ([`ToolDef`], [`PromptDef`]), what handlers
//! may return ([`IntoToolResult`], [`Json`], [`IntoPromptResult`]), and how arguments are
//! derived from a Rust type and decoded into it.

use std::collections::HashSet;

use schemars::JsonSchema;
use serde::de::{self, DeserializeOwned, Deserializer, Visitor};
use serde::Serialize;
use serde_json::Value;

use super::error::{HandlerError, RegistrationError};
use super::schema::{describe_root, ensure_object_root, generate, Contract};
use crate::jsonrpc::ErrorObject;
use crate::types::*;

/// What a tool handler may return: text (`String`, `&'static str`), content blocks
/// (`Content`, `Vec<Content>`), a whole [`CallToolResult`], [`Json<T>`] for structured output,
/// `()` for no content, or a `Result` of any of these whose error converts into a
/// [`HandlerError`] (an `isError` result, or a JSON-RPC error for an [`ErrorObject`]).
pub trait IntoToolResult {
    /// The `outputSchema` this return type declares: `Json<T>` declares `T`'s, the others none.
    fn output_schema() -> Option<JsonObject> {
        None
    }
    /// The result the client gets, or the JSON-RPC error it gets instead.
    fn into_tool_result(self) -> Result<CallToolResult, ErrorObject>;
}

impl IntoToolResult for CallToolResult {
    fn into_tool_result(self) -> Result<CallToolResult, ErrorObject> {
        Ok(self)
    }
}
impl IntoToolResult for String {
    fn into_tool_result(self) -> Result<CallToolResult, ErrorObject> {
        Ok(CallToolResult::text(self))
    }
}
impl IntoToolResult for &'static str {
    fn into_tool_result(self) -> Result<CallToolResult, ErrorObject> {
        Ok(CallToolResult::text(self))
    }
}
impl IntoToolResult for Content {
    fn into_tool_result(self) -> Result<CallToolResult, ErrorObject> {
        Ok(CallToolResult::new(vec![self]))
    }
}
impl IntoToolResult for Vec<Content> {
    fn into_tool_result(self) -> Result<CallToolResult, ErrorObject> {
        Ok(CallToolResult::new(self))
    }
}
impl IntoToolResult for () {
    fn into_tool_result(self) -> Result<CallToolResult, ErrorObject> {
        Ok(CallToolResult::new(Vec::new()))
    }
}
impl<T: IntoToolResult, E: Into<HandlerError>> IntoToolResult for Result<T, E> {
    fn output_schema() -> Option<JsonObject> {
        T::output_schema()
    }
    fn into_tool_result(self) -> Result<CallToolResult, ErrorObject> {
        match self {
            Ok(v) => v.into_tool_result(),
            Err(e) => e.into().into_tool_result(),
        }
    }
}

/// Structured output: the value is sent as `structuredContent` (and mirrored as one text block
/// of its JSON for older clients), and `T`'s schema becomes the tool's `outputSchema`, which
/// the server enforces.
///
/// ```
/// use purra_protocol::{Json, IntoToolResult};
///
/// #[derive(serde::Serialize, schemars::JsonSchema)]
/// struct Sum { sum: f64 }
///
/// let r = Json(Sum { sum: 3.0 }).into_tool_result().unwrap();
/// assert_eq!(r.structured_content, Some(serde_json::json!({"sum": 3.0})));
/// assert_eq!(r.texts().collect::<Vec<_>>(), [r#"{"sum":3.0}"#]);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Json<T>(pub T);

impl<T: Serialize + JsonSchema> IntoToolResult for Json<T> {
    fn output_schema() -> Option<JsonObject> {
        Some(generate::<T>(Contract::Output))
    }
    fn into_tool_result(self) -> Result<CallToolResult, ErrorObject> {
        serde_json::to_value(&self.0)
            .map(CallToolResult::structured)
            .map_err(|e| ErrorObject::internal(format!("the tool's output cannot be encoded: {e}")))
    }
}

/// A method parameter holding a tool's or prompt's whole arguments as one type, in a
/// `#[handlers]` impl (`fn forecast(&self, Args(f): Args<Forecast>)`): the type's fields are the
/// arguments, and their doc comments describe them. Without `Args`, each parameter is one
/// argument.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Args<T>(pub T);

/// A tool's definition: everything `tools/list` shows except the schemas, which come from the
/// handler's types.
///
/// ```
/// use purra_protocol::types::{Icon, TaskSupport, ToolAnnotations};
/// use purra_protocol::ToolDef;
///
/// let def = ToolDef::new("forecast")
///     .description("The forecast for a city")
///     .title("Forecast")
///     .annotations(ToolAnnotations::new().with_read_only(true))
///     .icon(Icon::new("https://example.com/sun.png").with_mime_type("image/png"))
///     .task_support(TaskSupport::Optional);
/// assert_eq!(def.name(), "forecast");
/// ```
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct ToolDef {
    pub(crate) tool: Tool,
    pub(crate) input_before_task: bool,
    pub(crate) idempotent: bool,
}

impl ToolDef {
    /// A tool named `name`.
    pub fn new(name: impl Into<String>) -> Self {
        ToolDef {
            tool: Tool::new(name, JsonObject::new()),
            input_before_task: false,
            idempotent: false,
        }
    }
    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.tool.name
    }
    /// What the tool does (the model reads it).
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.tool.description = Some(text.into());
        self
    }
    /// A display name.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.tool.title = Some(title.into());
        self
    }
    /// Hints about its behaviour (never authority for a host).
    pub fn annotations(mut self, annotations: ToolAnnotations) -> Self {
        self.tool.annotations = Some(annotations);
        self
    }
    /// Adds an icon.
    pub fn icon(mut self, icon: Icon) -> Self {
        self.tool.icons.get_or_insert_with(Vec::new).push(icon);
        self
    }
    /// Metadata (`_meta`).
    pub fn meta(mut self, meta: JsonObject) -> Self {
        self.tool.meta = Some(meta);
        self
    }
    /// Binds the tool to the MCP App at `resource_uri` (`ui://...`, served with
    /// [`Server::add_app`](crate::Server::add_app)): sets `_meta.ui.resourceUri`, beside any other
    /// `_meta`. A URI without the `ui://` scheme is refused at registration.
    pub fn ui(mut self, resource_uri: impl Into<String>) -> Self {
        crate::apps::set_tool_ui(&mut self.tool, resource_uri);
        self
    }
    /// Execution properties.
    pub fn execution(mut self, execution: ToolExecution) -> Self {
        self.tool.execution = Some(execution);
        self
    }
    /// Whether it runs as a task (`execution.taskSupport`).
    pub fn task_support(self, support: TaskSupport) -> Self {
        self.execution(ToolExecution::new().with_task_support(support))
    }
    /// For a task tool called in the 2026-07-28 tasks extension: the task is created only when
    /// the handler calls [`RequestCtx::start_task`](crate::RequestCtx::start_task); the
    /// questions it asks before are `input_required` rounds of the call itself (SEP-2663's
    /// composition of the two). Elsewhere the task starts with the call, as usual.
    pub fn input_before_task(mut self) -> Self {
        self.input_before_task = true;
        self
    }
    /// Marks the tool idempotent: its `idempotentHint` annotation is set, and a call carrying an
    /// idempotency key runs the handler once per key, a repeat with the same arguments getting
    /// the stored result (see [`crate::idempotency`]). A call without a key runs as usual.
    pub fn idempotent(mut self) -> Self {
        let annotations = self.tool.annotations.take().unwrap_or_default();
        self.tool.annotations = Some(annotations.with_idempotent(true));
        self.idempotent = true;
        self
    }
    /// An explicit `outputSchema`, for a handler that builds `structuredContent` itself (a
    /// handler returning [`Json<T>`] declares `T`'s schema without this).
    pub fn output_schema(mut self, schema: JsonObject) -> Self {
        self.tool.output_schema = Some(schema);
        self
    }
}

/// How a tool's or prompt's arguments reach its type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ArgsShape {
    /// An object decoded into the type.
    Object,
    /// No arguments (`()`): the type is decoded from `null`, whatever object was sent.
    Unit,
}

/// The input schema for a tool whose arguments are `A`, and how they are decoded.
pub(crate) fn tool_arguments<A: JsonSchema>(
    name: &str,
) -> Result<(JsonObject, ArgsShape), RegistrationError> {
    let mut schema = generate::<A>(Contract::Input);
    if schema.is_empty() {
        // `serde_json::Value`: any arguments object.
        schema.insert("type".into(), Value::String("object".into()));
        return Ok((schema, ArgsShape::Object));
    }
    if schema.get("type").and_then(Value::as_str) == Some("null") {
        // `()`: a tool without arguments.
        schema.insert("type".into(), Value::String("object".into()));
        schema.insert("properties".into(), Value::Object(JsonObject::new()));
        return Ok((schema, ArgsShape::Unit));
    }
    if !ensure_object_root(&mut schema) {
        return Err(RegistrationError::ArgumentsNotObject {
            name: name.to_owned(),
            found: describe_root(&schema),
        });
    }
    Ok((schema, ArgsShape::Object))
}

/// The output schema `R` declares, its root checked.
pub(crate) fn tool_output<R: IntoToolResult>(
    name: &str,
) -> Result<Option<JsonObject>, RegistrationError> {
    let Some(mut schema) = R::output_schema() else {
        return Ok(None);
    };
    if !ensure_object_root(&mut schema) {
        return Err(RegistrationError::OutputNotObject {
            name: name.to_owned(),
            found: describe_root(&schema),
        });
    }
    Ok(Some(schema))
}

/// Decodes arguments into `A`; the error is the text of an `isError` result or a -32602.
pub(crate) fn decode<A: DeserializeOwned>(args: Value, shape: ArgsShape) -> Result<A, String> {
    let v = match shape {
        ArgsShape::Object => args,
        ArgsShape::Unit => Value::Null,
    };
    serde_json::from_value(v).map_err(|e| e.to_string())
}

/// What a prompt handler may return: a whole [`GetPromptResult`], messages
/// (`Vec<PromptMessage>`, `PromptMessage`), text (one user message), or a `Result` of any of
/// these whose error converts into a [`HandlerError`].
pub trait IntoPromptResult {
    /// The result the client gets, or the JSON-RPC error it gets instead.
    fn into_prompt_result(self) -> Result<GetPromptResult, ErrorObject>;
}

impl IntoPromptResult for GetPromptResult {
    fn into_prompt_result(self) -> Result<GetPromptResult, ErrorObject> {
        Ok(self)
    }
}
impl IntoPromptResult for Vec<PromptMessage> {
    fn into_prompt_result(self) -> Result<GetPromptResult, ErrorObject> {
        Ok(GetPromptResult::new(self))
    }
}
impl IntoPromptResult for PromptMessage {
    fn into_prompt_result(self) -> Result<GetPromptResult, ErrorObject> {
        Ok(GetPromptResult::new(vec![self]))
    }
}
impl IntoPromptResult for String {
    fn into_prompt_result(self) -> Result<GetPromptResult, ErrorObject> {
        Ok(GetPromptResult::new(vec![PromptMessage::user(self)]))
    }
}
impl<T: IntoPromptResult, E: Into<HandlerError>> IntoPromptResult for Result<T, E> {
    fn into_prompt_result(self) -> Result<GetPromptResult, ErrorObject> {
        match self {
            Ok(v) => v.into_prompt_result(),
            Err(e) => Err(e.into().into_error_object()),
        }
    }
}

/// A prompt's definition: everything `prompts/list` shows except the arguments, which come
/// from the handler's arguments type.
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct PromptDef {
    pub(crate) prompt: Prompt,
}

impl PromptDef {
    /// A prompt named `name`.
    pub fn new(name: impl Into<String>) -> Self {
        PromptDef {
            prompt: Prompt::new(name),
        }
    }
    /// The prompt's name.
    pub fn name(&self) -> &str {
        &self.prompt.name
    }
    /// What the prompt is for.
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.prompt.description = Some(text.into());
        self
    }
    /// A display name.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.prompt.title = Some(title.into());
        self
    }
    /// Adds an icon.
    pub fn icon(mut self, icon: Icon) -> Self {
        self.prompt.icons.get_or_insert_with(Vec::new).push(icon);
        self
    }
    /// Metadata (`_meta`).
    pub fn meta(mut self, meta: JsonObject) -> Self {
        self.prompt.meta = Some(meta);
        self
    }
}

/// Named string arguments (prompt arguments, template variables) decoded into a type: a value
/// for a property that is not a string (a number, a boolean) is read as JSON.
#[derive(Debug, Clone)]
pub(crate) struct StringArgs {
    pub(crate) shape: ArgsShape,
    /// Properties whose schema does not admit strings.
    non_string: HashSet<String>,
}

impl StringArgs {
    pub(crate) fn decode<A: DeserializeOwned>(
        &self,
        args: impl IntoIterator<Item = (String, String)>,
    ) -> Result<A, String> {
        let obj: JsonObject = args
            .into_iter()
            .map(|(k, v)| {
                let value = if self.non_string.contains(&k) {
                    serde_json::from_str(&v).unwrap_or(Value::String(v))
                } else {
                    Value::String(v)
                };
                (k, value)
            })
            .collect();
        decode(Value::Object(obj), self.shape)
    }
}

/// The properties of `A` as named string arguments, in declaration order when `A` is a struct;
/// `Err(property)` names a property that is an object or an array.
pub(crate) fn string_arguments<A: JsonSchema + DeserializeOwned>(
    name: &str,
) -> Result<(Vec<PromptArgument>, StringArgs), RegistrationError> {
    let (schema, shape) = tool_arguments::<A>(name)?;
    let props = schema
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let required: HashSet<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut order: Vec<String> = field_order::<A>()
        .unwrap_or_default()
        .iter()
        .filter(|f| props.contains_key(**f))
        .map(|f| (*f).to_owned())
        .collect();
    for k in props.keys() {
        if !order.contains(k) {
            order.push(k.clone());
        }
    }
    let mut arguments = Vec::new();
    let mut non_string = HashSet::new();
    for key in order {
        let prop = &props[&key];
        let types: Vec<&str> = match prop.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !types.contains(&"string") && types.iter().any(|t| *t == "object" || *t == "array") {
            return Err(RegistrationError::InvalidPromptArgument {
                name: name.to_owned(),
                argument: key,
            });
        }
        if !types.contains(&"string") {
            non_string.insert(key.clone());
        }
        let mut arg =
            PromptArgument::new(key.clone()).with_required(required.contains(key.as_str()));
        if let Some(d) = prop.get("description").and_then(Value::as_str) {
            arg = arg.with_description(d);
        }
        if let Some(t) = prop.get("title").and_then(Value::as_str) {
            arg = arg.with_title(t);
        }
        arguments.push(arg);
    }
    Ok((arguments, StringArgs { shape, non_string }))
}

/// The field names of a struct `A`, in declaration order, as serde's derive lists them.
fn field_order<A: DeserializeOwned>() -> Option<&'static [&'static str]> {
    let mut fields = None;
    let _ = A::deserialize(FieldNames(&mut fields));
    fields
}

/// A deserializer that only records the field list a derived struct asks for.
struct FieldNames<'a>(&'a mut Option<&'static [&'static str]>);

impl<'de> Deserializer<'de> for FieldNames<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("not a struct"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = Some(fields);
        Err(de::Error::custom("fields recorded"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[allow(dead_code)]
    #[derive(Debug, serde::Deserialize, JsonSchema)]
    struct Forecast {
        /// The city.
        city: String,
        /// Days ahead.
        days: Option<u8>,
        metric: bool,
    }

    #[test]
    fn prompt_arguments_come_from_the_type_in_declaration_order() {
        let (args, decoder) = string_arguments::<Forecast>("forecast").unwrap();
        assert_eq!(
            args,
            vec![
                PromptArgument::new("city")
                    .with_required(true)
                    .with_description("The city."),
                PromptArgument::new("days")
                    .with_required(false)
                    .with_description("Days ahead."),
                PromptArgument::new("metric").with_required(true),
            ]
        );
        let f: Forecast = decoder
            .decode([
                ("city".to_owned(), "Oslo".to_owned()),
                ("days".to_owned(), "3".to_owned()),
                ("metric".to_owned(), "true".to_owned()),
            ])
            .unwrap();
        assert_eq!((f.city.as_str(), f.days, f.metric), ("Oslo", Some(3), true));
        let e = decoder
            .decode::<Forecast>([
                ("city".to_owned(), "Oslo".to_owned()),
                ("metric".to_owned(), "maybe".to_owned()),
            ])
            .unwrap_err();
        assert_eq!(e, "invalid type: string \"maybe\", expected a boolean");
    }

    #[test]
    fn nested_prompt_arguments_and_non_object_tool_arguments_are_refused() {
        #[allow(dead_code)]
        #[derive(serde::Deserialize, JsonSchema)]
        struct Nested {
            tags: Vec<String>,
        }
        assert_eq!(
            string_arguments::<Nested>("p").unwrap_err(),
            RegistrationError::InvalidPromptArgument {
                name: "p".into(),
                argument: "tags".into()
            }
        );
        assert_eq!(
            tool_arguments::<Vec<String>>("t").unwrap_err().to_string(),
            "the arguments of \"t\" must be a JSON object, but its arguments type describes array; use a struct (or `()` for no arguments)"
        );
        let (schema, shape) = tool_arguments::<()>("t").unwrap();
        assert_eq!(
            Value::Object(schema),
            json!({"type": "object", "properties": {}})
        );
        assert_eq!(decode::<()>(json!({"ignored": 1}), shape), Ok(()));
        let (schema, _) = tool_arguments::<Value>("t").unwrap();
        assert_eq!(Value::Object(schema), json!({"type": "object"}));
        assert_eq!(
            tool_output::<Json<Vec<u8>>>("t").unwrap_err().to_string(),
            "the structured output of \"t\" must be a JSON object, but its output type describes array; wrap it in a struct"
        );
        assert_eq!(tool_output::<String>("t"), Ok(None));
    }
}
