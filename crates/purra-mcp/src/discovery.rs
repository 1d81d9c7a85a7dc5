//! Read discovery: paginated `tools/list` under limits, host bindings, strict schemas, an
//! immutable snapshot with its digest, and Core registrations whose handlers make single bounded
//! `tools/call` requests.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use purra_core::json_text::MAX_DEPTH_CEILING;
use purra_core::{
    json_identity, parse_json, CompileOptions, CompiledSchema, Concurrency, JsonIdentity,
    JsonLimits, SchemaError, ScopeCheck, ToolRegistration,
};
use purra_protocol::modern::RESULT_COMPLETE;
use purra_protocol::types::{methods, ListToolsResult, PaginatedParams, Tool};
use purra_protocol::{Connection, RequestOptions};
use serde_json::{json, Value};

use crate::call::{map_error, CallTarget, TaskUse};
use crate::codes;
use crate::limits::Limits;
use crate::monitor::{CatalogMonitor, SUPPORTED_VERSIONS};
use crate::{AdapterError, Refusal};

/// The host's authorization of one remote tool as a read tool, built with [`ReadBinding::new`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ReadBinding {
    /// The local name the agent sees (`^[a-z][a-z0-9_]{0,63}$`).
    pub local_name: String,
    /// The title of the read policy.
    pub title: String,
    /// The host's scope check: a function of the arguments and the run context, or an explicit
    /// opt-out.
    pub scope: ScopeCheck,
    /// Whether calls may overlap (a declaration; Core's scheduler decides).
    pub concurrency: Concurrency,
    /// Whether a tool the server runs only as a task (`execution.taskSupport: "required"`) may
    /// run: as a task, polled within the call's limits and cancelled remotely when the call
    /// times out or its run is cancelled. Off by default: such a tool then fails closed with
    /// `mcp_result_unsupported`, sending nothing. Write bindings have no such opt-in.
    pub tasks: bool,
}

impl ReadBinding {
    /// A binding of a read tool under `local_name`, with its policy `title` and the host's
    /// `scope` check; calls run alone ([`Concurrency::Exclusive`]) and task-only tools are
    /// refused until [`ReadBinding::run_tasks`] opts in.
    pub fn new(local_name: impl Into<String>, title: impl Into<String>, scope: ScopeCheck) -> Self {
        ReadBinding {
            local_name: local_name.into(),
            title: title.into(),
            scope,
            concurrency: Concurrency::Exclusive,
            tasks: false,
        }
    }

    /// Declares whether calls may overlap with other concurrency-safe calls.
    pub fn concurrency(mut self, concurrency: Concurrency) -> Self {
        self.concurrency = concurrency;
        self
    }

    /// Opts in to running a task-only remote tool as a task (see [`ReadBinding::tasks`]). The
    /// snapshot records the opt-in in the entry's policy, so it is part of what the host
    /// reviewed.
    pub fn run_tasks(mut self, yes: bool) -> Self {
        self.tasks = yes;
        self
    }
}

/// What read discovery produced: the snapshot and the registrations to hand to Core.
#[derive(Debug)]
pub struct ReadCatalog {
    /// The immutable snapshot.
    pub snapshot: Snapshot,
    /// One registration per binding, in local-name order.
    pub registrations: Vec<ToolRegistration>,
}

/// An immutable record of what was discovered.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    value: Value,
    digest: JsonIdentity,
}

impl Snapshot {
    /// The snapshot document: `schemaVersion`, `serverId`, `protocolVersion`, `revisionDigest`
    /// and `entries` sorted by local name.
    pub fn as_json(&self) -> &Value {
        &self.value
    }

    /// The revision digest: Core's JSON identity of the document without `revisionDigest`.
    pub fn revision_digest(&self) -> &JsonIdentity {
        &self.digest
    }

    /// Assembles and seals the document of `entries`, moving them in (`json!` would copy every
    /// schema in them once more).
    pub(crate) fn of_entries(
        schema_version: u32,
        server_id: &str,
        monitor: &CatalogMonitor,
        entries: Vec<Value>,
    ) -> Result<Snapshot, AdapterError> {
        let mut doc = serde_json::Map::new();
        doc.insert("schemaVersion".into(), schema_version.into());
        doc.insert("serverId".into(), server_id.into());
        doc.insert(
            "protocolVersion".into(),
            monitor
                .protocol_version()
                .map_or(Value::Null, Value::String),
        );
        doc.insert("entries".into(), Value::Array(entries));
        Snapshot::seal(Value::Object(doc))
    }

    /// Seals `value` (without `revisionDigest`) by adding its digest.
    pub(crate) fn seal(mut value: Value) -> Result<Snapshot, AdapterError> {
        let digest =
            json_identity(&value).map_err(|_| AdapterError::new(codes::result_invalid()))?;
        value
            .as_object_mut()
            .expect("snapshots are objects")
            .insert(
                "revisionDigest".into(),
                Value::String(digest.as_str().to_owned()),
            );
        Ok(Snapshot { value, digest })
    }
}

/// Fetches every page of `tools/list` within the limits, and checks the monitor before and after.
pub(crate) async fn list_tools(
    conn: &Connection,
    monitor: &CatalogMonitor,
    limits: &Limits,
) -> Result<(Vec<Tool>, u64), AdapterError> {
    limits.validate()?;
    if monitor.is_closed() || conn.peer().is_closed() {
        return Err(AdapterError::new(codes::connection_closed()));
    }
    match monitor.protocol_version() {
        Some(v) if SUPPORTED_VERSIONS.contains(&v.as_str()) => {}
        _ => return Err(AdapterError::new(codes::protocol_version_unsupported())),
    }
    if !conn.follows_list_changes() {
        // 2026-07-28 without an open subscription: a change could go unseen.
        return Err(AdapterError::new(codes::catalog_stale()));
    }
    let generation = monitor.generation();
    let mut tools = Vec::new();
    let mut bytes = 0u64;
    let mut cursor: Option<String> = None;
    let mut pages = 0u32;
    loop {
        if pages == limits.max_pages {
            return Err(AdapterError::new(codes::catalog_too_large()));
        }
        pages += 1;
        let params =
            serde_json::to_value(PaginatedParams::new(cursor.take())).expect("params serialize");
        // The connection's revision: in 2026-07-28 with the request envelope, never cached.
        let raw = conn
            .request_raw(
                methods::TOOLS_LIST,
                params,
                RequestOptions::default().timeout(limits.timeout),
            )
            .await
            .map_err(|e| AdapterError::new(map_error(&e)))?;
        bytes += raw.get().len() as u64;
        if bytes > limits.max_catalog_bytes {
            return Err(AdapterError::new(codes::catalog_too_large()));
        }
        if !is_complete(conn, &raw) {
            return Err(AdapterError::new(codes::result_invalid()));
        }
        let page: ListToolsResult = decode_i_json(raw.get(), limits.max_catalog_bytes)
            .ok_or_else(|| AdapterError::new(codes::result_invalid()))?;
        tools.extend(page.tools);
        if tools.len() as u64 > u64::from(limits.max_tools) {
            return Err(AdapterError::new(codes::catalog_too_large()));
        }
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    if monitor.generation() != generation {
        // The list changed while it was being read: what we have may mix two catalogs.
        return Err(AdapterError::new(codes::catalog_stale()));
    }
    Ok((tools, generation))
}

/// Whether `raw` is a final result: in 2026-07-28 its `resultType` is `complete` (absent counts
/// as `complete`); a handshake revision has no other kind.
pub(crate) fn is_complete(conn: &Connection, raw: &serde_json::value::RawValue) -> bool {
    !conn.is_modern() || purra_protocol::modern::result::result_type(raw) == RESULT_COMPLETE
}

/// Decodes a result of at most `max_bytes` with Core's bounded I-JSON decoder (duplicate member
/// names, lone surrogates and inexact numbers refused, depth checked before descending), then
/// into `T`. `None` for anything refused: the caller has one code for it.
pub(crate) fn decode_i_json<T: serde::de::DeserializeOwned>(
    text: &str,
    max_bytes: u64,
) -> Option<T> {
    serde_json::from_value(decode_i_json_value(text, max_bytes)?).ok()
}

/// [`decode_i_json`]'s first step: the text as a `Value`, `None` when refused.
pub(crate) fn decode_i_json_value(text: &str, max_bytes: u64) -> Option<Value> {
    let max_bytes = usize::try_from(max_bytes).unwrap_or(usize::MAX);
    let limits = JsonLimits {
        max_bytes,
        max_depth: MAX_DEPTH_CEILING,
        // Every value takes at least one byte: the byte bound is the one that binds.
        max_nodes: max_bytes,
    };
    parse_json(text.as_bytes(), &limits).ok()
}

/// A selected remote tool, checked against the limits and compiled with the strict profile. It
/// keeps what the snapshot and the handler need, not the listed tool: its schemas live on in
/// their compiled form only.
pub(crate) struct Selected {
    /// The remote name.
    pub name: String,
    /// Whether the server runs it only as a task (`execution.taskSupport: "required"`).
    pub task_only: bool,
    pub input: CompiledSchema,
    pub output: Option<CompiledSchema>,
    pub description: String,
}

/// What discovery would say of one listed tool if the host selected it: `Ok` when its
/// description and schemas are within `limits` and the strict profile (with the dialects
/// `limits` allows), else the error discovery would fail with, its [`Refusal`] naming the place
/// and the reason. Sends nothing; for a host that checks several tools at once (a gateway
/// reporting every mistake of its configuration), since discovery stops at the first refusal.
pub fn check_tool(tool: &Tool, limits: &Limits) -> Result<(), AdapterError> {
    select(tool.clone(), limits).map(drop)
}

/// The compile options of a selected schema: the strict profile with a root 2020-12
/// declaration, and draft-07 and 2019-09 ones when the host opted in.
pub(crate) fn compile_options(limits: &Limits) -> CompileOptions {
    CompileOptions {
        allow_root_dialect_2020_12: true,
        allow_root_dialect_2019_09: limits.earlier_schema_dialects,
        allow_root_dialect_draft_07: limits.earlier_schema_dialects,
        ..CompileOptions::default()
    }
}

/// Checks a listed tool against the limits and compiles its schemas, which it moves into their
/// compiled form (no copy of them is made). A refusal names the tool, the place and the reason.
pub(crate) fn select(tool: Tool, limits: &Limits) -> Result<Selected, AdapterError> {
    let task_only = tool.requires_task();
    let name = tool.name;
    let description = tool.description.unwrap_or_default();
    if description.len() as u64 > limits.max_description_bytes {
        return Err(AdapterError::refused(
            codes::description_too_large(),
            Refusal::new(
                &name,
                "/description",
                format!(
                    "the description takes {} bytes, more than max_description_bytes ({})",
                    description.len(),
                    limits.max_description_bytes
                ),
            ),
        ));
    }
    let input = Value::Object(tool.input_schema);
    let output = tool.output_schema.map(Value::Object);
    for (at, schema) in
        std::iter::once(("/inputSchema", &input)).chain(output.iter().map(|o| ("/outputSchema", o)))
    {
        if !fits(schema, limits.max_schema_bytes) {
            let mut refusal = Refusal::new(
                &name,
                at,
                format!(
                    "the schema takes more than max_schema_bytes ({} bytes)",
                    limits.max_schema_bytes
                ),
            );
            refusal.excerpt = Some(excerpt(schema));
            return Err(AdapterError::refused(codes::schema_too_large(), refusal));
        }
    }
    let options = compile_options(limits);
    let input = compile_at(&name, "/inputSchema", input, &options)?;
    let output = output
        .map(|o| compile_at(&name, "/outputSchema", o, &options))
        .transpose()?;
    Ok(Selected {
        input,
        output,
        name,
        task_only,
        description,
    })
}

/// Compiles one of `tool`'s schemas (at `at` in the listed tool); a refusal names the keyword's
/// pointer in the tool, the profile's reason and the object holding it.
fn compile_at(
    tool: &str,
    at: &str,
    schema: Value,
    options: &CompileOptions,
) -> Result<CompiledSchema, AdapterError> {
    CompiledSchema::try_compile_owned_with(schema, options)
        .map_err(|(e, schema)| schema_refusal(tool, at, &schema, &e))
}

/// The refusal of a schema the profile refused with `e`.
fn schema_refusal(tool: &str, at: &str, schema: &Value, e: &SchemaError) -> AdapterError {
    let mut refusal = Refusal::new(tool, format!("{at}{}", e.pointer), e.detail);
    // The object holding the refused keyword (its parent pointer), else the schema itself.
    let parent = e.pointer.rfind('/').map_or("", |i| &e.pointer[..i]);
    let holder = schema
        .pointer(&lookup_pointer(parent))
        .filter(|v| v.is_object())
        .unwrap_or(schema);
    refusal.excerpt = Some(excerpt(holder));
    AdapterError::refused(codes::schema_unsupported(), refusal)
}

/// A pointer as written by the profile, usable for lookup: a segment the profile cut (ending in
/// `…`) cannot be looked up, so the pointer stops before it.
fn lookup_pointer(pointer: &str) -> String {
    match pointer.find('…') {
        Some(i) => pointer[..i]
            .rfind('/')
            .map_or(String::new(), |j| pointer[..j].to_owned()),
        None => pointer.to_owned(),
    }
}

/// `value` as compact JSON, cut after [`Refusal::MAX_EXCERPT_BYTES`] bytes (at a character
/// boundary) with `…`. The writing itself stops at the bound.
fn excerpt(value: &Value) -> String {
    struct Bounded {
        text: Vec<u8>,
    }
    impl std::io::Write for Bounded {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let room = Refusal::MAX_EXCERPT_BYTES + 4 - self.text.len();
            if buf.len() > room {
                self.text.extend_from_slice(&buf[..room]);
                return Err(std::io::ErrorKind::FileTooLarge.into());
            }
            self.text.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut out = Bounded { text: Vec::new() };
    let whole = serde_json::to_writer(&mut out, value).is_ok()
        && out.text.len() <= Refusal::MAX_EXCERPT_BYTES;
    let text = String::from_utf8_lossy(&out.text).into_owned();
    if whole {
        return text;
    }
    let mut end = Refusal::MAX_EXCERPT_BYTES.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Whether `value` written as compact JSON takes at most `max` bytes: counted as it is written,
/// and the writing stops at the first byte over.
fn fits(value: &Value, max: u64) -> bool {
    struct Count {
        left: u64,
    }
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.left = self
                .left
                .checked_sub(buf.len() as u64)
                .ok_or(std::io::ErrorKind::FileTooLarge)?;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    serde_json::to_writer(&mut Count { left: max }, value).is_ok()
}

/// The shared half of read and write discovery: local names must be unique, every selected
/// remote tool must be listed and pass [`select`]; the result is in local-name order. The listed
/// tools are consumed: a selected one moves into its compiled form, the others are dropped.
pub(crate) fn select_bindings<'b, B>(
    tools: Vec<Tool>,
    bindings: &'b BTreeMap<String, B>,
    local: impl Fn(&B) -> &str,
    limits: &Limits,
) -> Result<Vec<(&'b B, Selected)>, AdapterError> {
    let locals: HashSet<&str> = bindings.values().map(&local).collect();
    if locals.len() != bindings.len() {
        return Err(AdapterError::new(codes::config_invalid()));
    }
    let mut listed: Vec<Option<Tool>> = tools.into_iter().map(Some).collect();
    let mut selected = Vec::with_capacity(bindings.len());
    for (remote, binding) in bindings {
        let mut named = listed
            .iter()
            .enumerate()
            .filter(|(_, t)| t.as_ref().is_some_and(|t| &t.name == remote))
            .map(|(i, _)| i);
        let at = named.next().ok_or_else(|| {
            AdapterError::refused(
                codes::tool_missing(),
                Refusal::new(remote, "", "the server does not list it"),
            )
        })?;
        // Two entries under one name: which one the host reviewed is unknowable, so neither is
        // picked, whether or not they differ.
        if named.next().is_some() {
            return Err(AdapterError::refused(
                codes::catalog_ambiguous(),
                Refusal::new(remote, "", "the server lists it more than once"),
            ));
        }
        let tool = listed[at].take().expect("found above");
        selected.push((binding, select(tool, limits)?));
    }
    selected.sort_by(|a, b| local(a.0).cmp(local(b.0)));
    Ok(selected)
}

/// The snapshot entry fields read and write entries share.
pub(crate) fn base_entry(local_name: &str, s: &Selected) -> serde_json::Map<String, Value> {
    let v = json!({
        "localName": local_name,
        "remoteName": s.name,
        "description": s.description,
        "inputSchema": s.input.source(),
        "outputSchema": s.output.as_ref().map(CompiledSchema::source),
    });
    match v {
        Value::Object(o) => o,
        _ => unreachable!("built as an object"),
    }
}

/// The schema of what a registration's handler returns, `{text: [string], structured}`, with
/// `structured` held to the remote output schema (its root `$schema` declaration dropped, since
/// it only names the dialect), or to `null | object` when the tool declares none. Core validates
/// handler results against it, and the model sees the true shape of results.
pub(crate) fn envelope_schema(
    output: Option<&CompiledSchema>,
) -> Result<CompiledSchema, AdapterError> {
    let structured = match output {
        Some(s) => {
            let mut v = s.source().clone();
            if let Some(o) = v.as_object_mut() {
                o.remove("$schema");
            }
            v
        }
        None => json!({"anyOf": [{"type": "null"}, {"type": "object"}]}),
    };
    CompiledSchema::compile(&json!({
        "type": "object",
        "properties": {
            "text": {"type": "array", "items": {"type": "string"}},
            "structured": structured,
        },
        "required": ["text", "structured"],
        "additionalProperties": false,
    }))
    .map_err(|_| AdapterError::new(codes::schema_unsupported()))
}

/// Discovers the remote tools named in `bindings` (remote name → binding) as read tools.
///
/// Sends only paginated `tools/list` requests. Tools not selected never appear; a selected tool
/// missing remotely, or with a schema outside the profile, fails the whole discovery. Remote
/// annotations grant nothing.
pub async fn discover_read_tools(
    conn: &Arc<Connection>,
    server_id: &str,
    bindings: &BTreeMap<String, ReadBinding>,
    monitor: &CatalogMonitor,
    limits: Limits,
) -> Result<ReadCatalog, AdapterError> {
    if server_id.is_empty() {
        return Err(AdapterError::new(codes::config_invalid()));
    }
    let (tools, generation) = list_tools(conn, monitor, &limits).await?;
    read_catalog(
        conn, server_id, bindings, monitor, limits, tools, generation,
    )
}

/// Read discovery over a listing already made (`tools`, listed at `generation`).
pub(crate) fn read_catalog(
    conn: &Arc<Connection>,
    server_id: &str,
    bindings: &BTreeMap<String, ReadBinding>,
    monitor: &CatalogMonitor,
    limits: Limits,
    tools: Vec<Tool>,
    generation: u64,
) -> Result<ReadCatalog, AdapterError> {
    if server_id.is_empty() {
        return Err(AdapterError::new(codes::config_invalid()));
    }
    let selected = select_bindings(tools, bindings, |b| b.local_name.as_str(), &limits)?;
    let entries: Vec<Value> = selected
        .iter()
        .map(|(b, s)| {
            let mut e = base_entry(&b.local_name, s);
            let mut policy = json!({"mode": "read", "title": b.title});
            if b.tasks {
                policy["tasks"] = json!(true);
            }
            e.insert("policy".into(), policy);
            e.insert(
                "concurrencySafe".into(),
                json!(b.concurrency == Concurrency::Safe),
            );
            Value::Object(e)
        })
        .collect();
    let snapshot = Snapshot::of_entries(1, server_id, monitor, entries)?;
    let mut registrations = Vec::with_capacity(selected.len());
    for (binding, s) in selected {
        let target = Arc::new(CallTarget {
            conn: conn.clone(),
            remote: s.name.clone(),
            generation,
            monitor: monitor.clone(),
            limits,
            input: s.input.clone(),
            output: s.output.clone(),
            scope: binding.scope.clone(),
            task: match (s.task_only, binding.tasks) {
                (false, _) => TaskUse::Never,
                (true, false) => TaskUse::Refuse,
                (true, true) => TaskUse::Run,
            },
            write: false,
        });
        let builder = ToolRegistration::builder(binding.local_name.clone())
            .description(if s.description.is_empty() {
                binding.title.clone()
            } else {
                s.description.clone()
            })
            .input_schema(s.input)
            .read(binding.title.clone())
            .scope(binding.scope.clone())
            .concurrency(binding.concurrency)
            .boxed_handler(target.handler())
            .output_schema(envelope_schema(s.output.as_ref())?);
        registrations.push(
            builder
                .build()
                .map_err(|_| AdapterError::new(codes::config_invalid()))?,
        );
    }
    Ok(ReadCatalog {
        snapshot,
        registrations,
    })
}
