//! The MCP server: registries of tools, resources, templates and prompts with async handlers;
//! per-connection sessions; validation of tool input and output; logging, progress,
//! cancellation, completion, pagination and server-to-client requests from handlers.
//!
//! Typed tools and prompts derive their schemas from Rust types ([`schema`]); a handler's
//! `Err` becomes what [`HandlerError`] says; registration refusals are [`RegistrationError`]
//! values, never panics.

mod checked;
mod error;
mod flat;
mod schema;
mod template;
mod typed;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use self::error::{BoxError, HandlerError, HandlerResult, RegistrationError};
pub use self::schema::{output_schema_for, schema_for};
pub use self::typed::{Args, IntoPromptResult, IntoToolResult, Json, PromptDef, ToolDef};

use self::template::{match_template, parse_template, variables, TemplatePart};
use self::typed::{decode, string_arguments, tool_arguments, tool_output, ArgsShape};
use crate::error::Error;
use crate::jsonrpc::{
    encode_notification, from_params, to_raw, Answer, ErrorObject, RequestId, RpcErrorCode,
};
use crate::modern::{CacheHint, InputRequest, InputResponse};
use crate::request_state::RequestStateSecurity;
use crate::session::{
    self, BoxFuture, EngineConfig, Peer, RequestContext, RequestOptions, Service,
};
use crate::transport::Transport;
use crate::types::*;
use crate::version::ProtocolVersion;

mod listen;
pub(crate) mod modern;
mod mrtr;
mod skills;
mod tasks;

pub use self::tasks::TaskOptions;

type ToolFn = Arc<
    dyn Fn(JsonObject, RequestCtx) -> BoxFuture<'static, Result<CallToolResult, ErrorObject>>
        + Send
        + Sync,
>;
/// A typed tool's handler called with its arguments' JSON text: decoded straight into its type
/// when its flat schema admits them, checked in the same scan (`Err` hands the request back
/// when the check or the decode fails, for the general way to answer).
type TypedFn = Arc<
    dyn Fn(
            &str,
            &flat::FlatSchema,
            RequestCtx,
        ) -> Result<BoxFuture<'static, Result<CallToolResult, ErrorObject>>, RequestCtx>
        + Send
        + Sync,
>;
type ReadFn = Arc<
    dyn Fn(
            String,
            HashMap<String, String>,
            RequestCtx,
        ) -> BoxFuture<'static, Result<ReadResourceResult, ErrorObject>>
        + Send
        + Sync,
>;
type PromptFn = Arc<
    dyn Fn(
            BTreeMap<String, String>,
            RequestCtx,
        ) -> BoxFuture<'static, Result<GetPromptResult, ErrorObject>>
        + Send
        + Sync,
>;
/// Which tools `tools/list` shows to a request ([`Server::tool_filter`]).
type ToolFilter = Arc<dyn Fn(&Tool, &RequestCtx) -> bool + Send + Sync>;

type CompleteFn = Arc<
    dyn Fn(CompleteParams, RequestCtx) -> BoxFuture<'static, HandlerResult<Completion>>
        + Send
        + Sync,
>;

struct ToolEntry {
    tool: Tool,
    input: Validator,
    output: Option<Validator>,
    /// The arguments mirrored into `Mcp-Param-*` headers over 2026-07-28 Streamable HTTP.
    param_headers: Vec<crate::modern::headers::ParamHeader>,
    /// The task starts when the handler calls `start_task` (see `ToolDef::input_before_task`).
    input_before_task: bool,
    /// A call carrying an idempotency key runs once per key (see `ToolDef::idempotent`).
    idempotent: bool,
    handler: ToolFn,
    /// A typed tool whose input schema is flat: its arguments, when the flat check admits
    /// them, are decoded from their bytes (see `flat`).
    typed: Option<(flat::FlatSchema, TypedFn)>,
}

struct ResourceEntry {
    resource: Resource,
    handler: ReadFn,
}

struct TemplateEntry {
    template: ResourceTemplate,
    parts: Vec<TemplatePart>,
    handler: ReadFn,
}

struct PromptEntry {
    prompt: Prompt,
    handler: PromptFn,
}

/// Insertion-ordered registry. Every request that names a tool, prompt or resource looks it
/// up by the peer's text, so the hash is seeded (per process) and fast, as for request ids.
struct Registry<T> {
    order: Vec<String>,
    items: HashMap<String, Arc<T>, foldhash::fast::RandomState>,
}

impl<T> Default for Registry<T> {
    fn default() -> Self {
        Registry {
            order: Vec::new(),
            items: HashMap::default(),
        }
    }
}

impl<T> Registry<T> {
    fn insert(&mut self, key: String, item: T) {
        if self.items.insert(key.clone(), Arc::new(item)).is_none() {
            self.order.push(key);
        }
    }
    fn remove(&mut self, key: &str) -> bool {
        if self.items.remove(key).is_some() {
            self.order.retain(|k| k != key);
            true
        } else {
            false
        }
    }
    fn get(&self, key: &str) -> Option<Arc<T>> {
        self.items.get(key).cloned()
    }
    fn page(&self, offset: usize, size: usize) -> (Vec<Arc<T>>, Option<usize>) {
        // A cursor is the client's text: any offset must be safe, `purra-ffffffffffffffff` too.
        let end = offset.saturating_add(size).min(self.order.len());
        let items = self.order[offset.min(end)..end]
            .iter()
            .map(|k| self.items[k].clone())
            .collect();
        (items, (end < self.order.len()).then_some(end))
    }
    fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}

struct ServerInner {
    info: Implementation,
    /// `info` as JSON, written once: every 2026-07-28 result carries it in `_meta`.
    info_json: Box<serde_json::value::RawValue>,
    instructions: Option<String>,
    engine: EngineConfig,
    page_size: usize,
    logging: bool,
    enforce_output: bool,
    max_subscriptions: usize,
    tools: RwLock<Registry<ToolEntry>>,
    /// Whether any tool may run as a task (optional or required task support): kept with every
    /// change of `tools`, under its lock, so every request can ask without walking the tools.
    task_tools: std::sync::atomic::AtomicBool,
    /// Whether any tool annotates arguments for `Mcp-Param-*` headers (2026-07-28), kept the
    /// same way: without one, a `tools/call`'s params are not read for that rule.
    header_tools: std::sync::atomic::AtomicBool,
    /// Whether any tool is idempotent (the server then declares `tools.idempotency`), kept the
    /// same way.
    idempotent_tools: std::sync::atomic::AtomicBool,
    /// Where idempotent tools' results are kept by key.
    idempotent_results: Arc<dyn crate::idempotency::IdempotentResults>,
    /// How long a repeat of a key running elsewhere polls the store for its result.
    idempotent_wait: std::time::Duration,
    /// The idempotent runs going on in this process, by key: a repeat waits on its channel,
    /// which closes when the run ends.
    idempotent_runs: Mutex<HashMap<String, tokio::sync::watch::Receiver<()>>>,
    resources: RwLock<Registry<ResourceEntry>>,
    templates: RwLock<Registry<TemplateEntry>>,
    prompts: RwLock<Registry<PromptEntry>>,
    /// The skills served (the Skills extension).
    skills: RwLock<skills::Catalog>,
    completion: RwLock<Option<CompleteFn>>,
    /// Which tools `tools/list` shows to a request's caller ([`Server::tool_filter`]).
    tool_filter: RwLock<Option<ToolFilter>>,
    /// Seals and opens the `requestState` of 2026-07-28 multi round-trip requests.
    request_state: RequestStateSecurity,
    /// Caching hints of 2026-07-28 results, by method.
    cache_hints: HashMap<&'static str, CacheHint>,
    /// Open `subscriptions/listen` streams.
    listeners: listen::Listeners,
    /// Extensions the server declares itself (tasks' is added while a tool may run as a task).
    extensions: crate::extensions::Extensions,
    /// Running tasks and their store.
    tasks: tasks::Engine,
    /// Live sessions by a private key; each removes itself when dropped.
    sessions: Mutex<HashMap<u64, Weak<SessionState>>>,
    next_session: std::sync::atomic::AtomicU64,
    /// Told of every answered request (`ServerBuilder::observe_requests`).
    observer: Option<crate::RequestObserver>,
    /// Asked before every inbound request is served (`ServerBuilder::admit_requests`).
    admit: Option<RequestGate>,
    /// Asked before a call of a tool the server does not have is answered
    /// (`ServerBuilder::admit_unknown_tools`).
    admit_unknown: Option<RequestGate>,
}

/// A server's request gate ([`ServerBuilder::admit_requests`]): given a request's method and
/// the principal a layer in front proved (none on stdio or without one), `Ok` serves it and an
/// error answers it at once. It runs on the request's task before anything else, so it must be
/// quick (count, not wait).
pub type RequestGate =
    Arc<dyn Fn(&str, Option<&crate::Principal>) -> Result<(), ErrorObject> + Send + Sync>;

/// How often a repeat of an idempotency key running elsewhere asks the store for its result.
const IDEMPOTENT_POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// The default bound on one session's resource subscriptions.
pub const DEFAULT_MAX_SUBSCRIPTIONS: usize = 1024;

/// Configures a [`Server`].
#[derive(Debug, Clone)]
pub struct ServerBuilder {
    info: Implementation,
    instructions: Option<String>,
    engine: EngineConfig,
    page_size: usize,
    logging: bool,
    enforce_output: bool,
    max_subscriptions: usize,
    request_state: Option<RequestStateSecurity>,
    cache_hints: HashMap<&'static str, CacheHint>,
    extensions: crate::extensions::Extensions,
    tasks: TaskOptions,
    skills: Option<crate::skills::LoadedSkills>,
    observer: Option<Observer>,
    admit: Option<Gate>,
    admit_unknown: Option<Gate>,
    idempotent_results: Option<IdempotentStore>,
    idempotent_wait: std::time::Duration,
}

/// An idempotent results store in a `Debug` builder.
#[derive(Clone)]
struct IdempotentStore(Arc<dyn crate::idempotency::IdempotentResults>);

impl std::fmt::Debug for IdempotentStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IdempotentResults")
    }
}

/// A request observer in a `Debug` builder.
#[derive(Clone)]
struct Observer(crate::RequestObserver);

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RequestObserver")
    }
}

/// A request gate in a `Debug` builder.
#[derive(Clone)]
struct Gate(RequestGate);

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RequestGate")
    }
}

impl ServerBuilder {
    /// Serves the skills of a folder of skill folders (the Skills extension, see
    /// [`crate::skills`]): each folder below `path` holding a `SKILL.md` is a skill at
    /// `skill://<its path>/SKILL.md`. The folder is read now, within
    /// [`SkillsDirOptions::default`](crate::skills::SkillsDirOptions)'s bounds; a tree that breaks
    /// one (too many entries, a file too large, a symbolic link, a skill over SEP-2640's limits)
    /// is refused whole with `SkillsFolder` naming the path and the reason. The extension is
    /// declared (with `directoryRead`) even when the folder holds no skill.
    pub fn skills_dir(self, path: impl AsRef<std::path::Path>) -> Result<Self, RegistrationError> {
        self.skills_dir_with(path, &crate::skills::SkillsDirOptions::default())
    }
    /// [`skills_dir`](Self::skills_dir) with other bounds, or a prefix for every skill's path.
    /// A second folder adds its skills to the first's.
    pub fn skills_dir_with(
        mut self,
        path: impl AsRef<std::path::Path>,
        options: &crate::skills::SkillsDirOptions,
    ) -> Result<Self, RegistrationError> {
        let loaded = crate::skills::load_dir(path.as_ref(), options)
            .map_err(RegistrationError::SkillsFolder)?;
        let all = self.skills.get_or_insert_with(Default::default);
        all.skills.extend(loaded.skills);
        all.files.extend(loaded.files);
        Ok(self)
    }

    /// Calls `observer` with every inbound request once it is answered (cancelled, or its
    /// handler panicked): the method, the tool or prompt it named, the outcome and how long it
    /// took; what a metrics registry counts. It runs on the request's task, so it must be quick.
    /// Without one, nothing is measured.
    pub fn observe_requests(
        mut self,
        observer: impl Fn(&crate::RequestRecord<'_>) + Send + Sync + 'static,
    ) -> Self {
        self.observer = Some(Observer(Arc::new(observer)));
        self
    }

    /// Calls `gate` before serving every inbound request (`initialize` and `ping` included)
    /// with its method and the [`Principal`](crate::Principal) a layer in front proved: an
    /// error answers the request at once (a refused `initialize` opens no session). A host
    /// counts each caller's requests against its rate here. Without one, every request is
    /// served.
    pub fn admit_requests(
        mut self,
        gate: impl Fn(&str, Option<&crate::Principal>) -> Result<(), ErrorObject>
            + Send
            + Sync
            + 'static,
    ) -> Self {
        self.admit = Some(Gate(Arc::new(gate)));
        self
    }

    /// Calls `gate` before answering a `tools/call` that names a tool this server does not
    /// have, with the method and the [`Principal`](crate::Principal) as
    /// [`admit_requests`](Self::admit_requests) does (never the name asked for): an error
    /// answers the call instead of the unknown-tool error. A host that counts the calls of its
    /// tools against a caller's rate counts these here too, so naming tools that do not exist
    /// is held to the same rate. Without one, such a call is answered `Unknown tool`.
    pub fn admit_unknown_tools(
        mut self,
        gate: impl Fn(&str, Option<&crate::Principal>) -> Result<(), ErrorObject>
            + Send
            + Sync
            + 'static,
    ) -> Self {
        self.admit_unknown = Some(Gate(Arc::new(gate)));
        self
    }

    /// Declares the extension `name` (reverse-DNS, `com.example/feature`) with its `settings`
    /// under `capabilities.extensions` (see [`crate::extensions`]). A malformed name is refused
    /// with `InvalidExtension`; the tasks extension is declared by the server itself while a
    /// tool may run as a task, and the Skills extension while it serves skills (refused here
    /// too).
    pub fn extension(
        mut self,
        name: &str,
        settings: JsonObject,
    ) -> Result<Self, RegistrationError> {
        if !crate::extensions::is_valid_name(name)
            || name == crate::extensions::TASKS
            || name == crate::skills::EXTENSION_ID
        {
            return Err(RegistrationError::InvalidExtension(name.to_owned()));
        }
        self.extensions.insert(name.to_owned(), settings);
        Ok(self)
    }
    /// Declares MCP Apps (`io.modelcontextprotocol/ui`, see [`crate::apps`]): tools bound to a
    /// UI with [`ToolDef::ui`], UIs served with [`Server::add_app`].
    pub fn apps(mut self) -> Self {
        self.extensions
            .insert(crate::apps::EXTENSION_ID.to_owned(), JsonObject::new());
        self
    }
    /// How tasks are run and kept (default: [`TaskOptions::default`], an in-memory store).
    pub fn tasks(mut self, options: TaskOptions) -> Self {
        self.tasks = options;
        self
    }
    /// The server's display name, description, icons or website (sent in `serverInfo`).
    pub fn info(mut self, info: Implementation) -> Self {
        self.info = info;
        self
    }
    /// How many resources one session may subscribe to at once (default 1024); one more is
    /// refused with -32602 until it unsubscribes. Each URI is at most 4 KiB.
    pub fn max_subscriptions(mut self, n: usize) -> Self {
        self.max_subscriptions = n;
        self
    }
    /// Instructions for the model, sent in the `initialize` result.
    pub fn instructions(mut self, text: impl Into<String>) -> Self {
        self.instructions = Some(text.into());
        self
    }
    /// How many items one page of a `*/list` result holds (default 100).
    pub fn page_size(mut self, n: usize) -> Self {
        self.page_size = n.max(1);
        self
    }
    /// Declares the logging capability: handlers may log with [`RequestCtx::log`].
    pub fn logging(mut self) -> Self {
        self.logging = true;
        self
    }
    /// Whether declared output schemas are enforced on tool results (default: true). Turning
    /// it off is for testing clients against a server that breaks its own contract.
    pub fn enforce_output_schemas(mut self, yes: bool) -> Self {
        self.enforce_output = yes;
        self
    }
    /// Engine limits (frame size, concurrency, timeouts of server-to-client requests).
    pub fn engine(mut self, config: EngineConfig) -> Self {
        self.engine = config;
        self
    }
    /// How the `requestState` of 2026-07-28 multi round-trip requests is protected (default: a
    /// key made at build time, known to this process only; instances behind one load balancer
    /// must share keys).
    pub fn request_state_security(mut self, security: RequestStateSecurity) -> Self {
        self.request_state = Some(security);
        self
    }
    /// The caching hint (`ttlMs`, `cacheScope`) of 2026-07-28 results of `method`, one of
    /// `server/discover`, `tools/list`, `prompts/list`, `resources/list`,
    /// `resources/templates/list`, `resources/read`, and the Skills extension's `skills/list`,
    /// `skills/get` and `resources/directory/read` (default for each: immediately stale and
    /// private). Another method is refused with `InvalidCacheMethod`.
    pub fn cache_hint(mut self, method: &str, hint: CacheHint) -> Result<Self, RegistrationError> {
        let Some(m) = crate::modern::CACHEABLE_METHODS
            .iter()
            .chain(modern::SKILLS_CACHEABLE.iter())
            .find(|m| **m == method)
        else {
            return Err(RegistrationError::InvalidCacheMethod(method.to_owned()));
        };
        self.cache_hints.insert(m, hint);
        Ok(self)
    }
    /// Keeps idempotent tools' results in `store` (a durable one survives a restart, and one
    /// shared by instances answers a key for all of them) instead of the bounded in-memory
    /// default (see [`crate::idempotency`]).
    pub fn idempotent_results(
        mut self,
        store: Arc<dyn crate::idempotency::IdempotentResults>,
    ) -> Self {
        self.idempotent_results = Some(IdempotentStore(store));
        self
    }
    /// How long a repeat of an idempotency key that runs elsewhere (another instance on the
    /// shared store [`idempotent_results`](Self::idempotent_results) gives) polls the store for its
    /// result before it is refused as of unknown outcome (default zero: refused at once). A key
    /// whose run was interrupted is refused after this wait too. A repeat of a key running in this
    /// process always waits for it.
    pub fn idempotent_wait(mut self, wait: std::time::Duration) -> Self {
        self.idempotent_wait = wait;
        self
    }
    /// Builds the server.
    pub fn build(mut self) -> Server {
        let skills = self.skills.take();
        let server = self.build_inner();
        if let Some(loaded) = skills {
            server.insert_loaded(loaded);
        }
        server
    }

    fn build_inner(self) -> Server {
        Server {
            inner: Arc::new(ServerInner {
                info_json: crate::modern::raw(&self.info),
                info: self.info,
                instructions: self.instructions,
                engine: self.engine,
                page_size: self.page_size,
                logging: self.logging,
                enforce_output: self.enforce_output,
                max_subscriptions: self.max_subscriptions,
                tools: RwLock::default(),
                task_tools: std::sync::atomic::AtomicBool::new(false),
                header_tools: std::sync::atomic::AtomicBool::new(false),
                idempotent_tools: std::sync::atomic::AtomicBool::new(false),
                idempotent_results: self.idempotent_results.map(|s| s.0).unwrap_or_else(|| {
                    Arc::new(crate::idempotency::InMemoryIdempotentResults::default())
                }),
                idempotent_runs: Mutex::default(),
                idempotent_wait: self.idempotent_wait,
                resources: RwLock::default(),
                templates: RwLock::default(),
                prompts: RwLock::default(),
                skills: RwLock::default(),
                completion: RwLock::new(None),
                tool_filter: RwLock::new(None),
                request_state: self
                    .request_state
                    .unwrap_or_else(RequestStateSecurity::ephemeral),
                cache_hints: self.cache_hints,
                listeners: listen::Listeners::default(),
                extensions: self.extensions,
                tasks: tasks::Engine::new(self.tasks),
                sessions: Mutex::new(HashMap::new()),
                next_session: std::sync::atomic::AtomicU64::new(0),
                observer: self.observer.map(|o| o.0),
                admit: self.admit.map(|g| g.0),
                admit_unknown: self.admit_unknown.map(|g| g.0),
            }),
        }
    }
}

/// An MCP server: a set of registries shared by every connection it serves. Cloning is cheap
/// and shares the registries; registering while serving sends the matching `list_changed`.
///
/// Registration returns `Result<&Server, RegistrationError>`, so definitions chain with `?`:
///
/// ```
/// use purra_protocol::{HandlerResult, Json, RequestCtx, Server};
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Add { a: f64, b: f64 }
/// #[derive(serde::Serialize, schemars::JsonSchema)]
/// struct Sum { sum: f64 }
///
/// # fn main() -> Result<(), purra_protocol::RegistrationError> {
/// let server = Server::builder("calc", "1.0.0").build();
/// server
///     .tool("add", "Adds two numbers", |Add { a, b }, _ctx: RequestCtx| async move {
///         Ok(Json(Sum { sum: a + b })) // structured output; the output schema comes from Sum
///     })?
///     .tool("div", "Divides a by b", |Add { a, b }, _ctx: RequestCtx| async move {
///         if b == 0.0 {
///             return Err("division by zero".into()); // an isError result the model reads
///         }
///         HandlerResult::Ok(format!("{}", a / b))
///     })?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Server {
    inner: Arc<ServerInner>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("info", &self.inner.info)
            .finish()
    }
}

/// Tools and prompts backed by the methods of one value holding shared state; written by
/// `#[purra_protocol::handlers]` on an `impl` block, registered with [`Server::register`].
pub trait Handlers: Send + Sync + 'static {
    /// Registers every tool and prompt of `self` on `server`.
    fn register(self: Arc<Self>, server: &Server) -> Result<(), RegistrationError>;
}

/// A compiled tool schema. With the `validation` feature it is a JSON Schema 2020-12 validator;
/// without it only the root (`type: "object"`) is checked, and typed tools' arguments are
/// checked by their `Deserialize` impl alone.
///
/// A schema inside purra's strict profile (`purra-schema`: every schema derived from a Rust type,
/// and most hand-written tool schemas) is validated by that profile's compiled form, the same
/// verdict with a fraction of the memory; the `jsonschema` crate compiles it only when an
/// instance fails (to word the errors) or exceeds the profile's budgets (to decide it). Any other
/// schema is compiled by `jsonschema` at registration, as before.
#[cfg(feature = "validation")]
enum Validator {
    Strict {
        schema: purra_schema::CompiledSchema,
        full: std::sync::OnceLock<Result<jsonschema::Validator, String>>,
    },
    Full(jsonschema::Validator),
}
#[cfg(not(feature = "validation"))]
struct Validator;

#[cfg(feature = "validation")]
fn full_validator(schema: &Value) -> Result<jsonschema::Validator, String> {
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .build(schema)
        .map_err(|e| e.to_string())
}

fn compile(schema: &JsonObject, name: &str, what: &str) -> Result<Validator, RegistrationError> {
    let invalid = |reason: String| RegistrationError::InvalidSchema {
        name: name.to_owned(),
        reason,
    };
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err(invalid(format!(
            "the {what} schema's root must have type \"object\""
        )));
    }
    #[cfg(feature = "validation")]
    {
        let value = Value::Object(schema.clone());
        if let Ok(schema) = purra_schema::CompiledSchema::compile_mcp(&value) {
            return Ok(Validator::Strict {
                schema,
                full: std::sync::OnceLock::new(),
            });
        }
        full_validator(&value)
            .map(Validator::Full)
            .map_err(|e| invalid(format!("{what} schema: {e}")))
    }
    #[cfg(not(feature = "validation"))]
    Ok(Validator)
}

/// The first eight validation errors of `instance`, each with its instance path.
fn validation_errors(validator: &Validator, instance: &Value) -> Vec<String> {
    #[cfg(feature = "validation")]
    {
        let words = |full: &jsonschema::Validator| -> Vec<String> {
            full.iter_errors(instance)
                .take(8)
                .map(|e| {
                    let at = e.instance_path().to_string();
                    if at.is_empty() {
                        e.to_string()
                    } else {
                        format!("{at}: {e}")
                    }
                })
                .collect()
        };
        match validator {
            // `is_valid` stops early and builds no error values.
            Validator::Full(full) if full.is_valid(instance) => Vec::new(),
            Validator::Full(full) => words(full),
            Validator::Strict { schema, full } => {
                // The profile's verdict decides; valid is the common case, and it builds nothing.
                let verdict = schema.verdict(instance);
                if verdict == Ok(true) {
                    return Vec::new();
                }
                let full = full.get_or_init(|| full_validator(schema.source()));
                match (verdict, full) {
                    // Over the profile's budgets: the full validator decides.
                    (Err(_), Ok(full)) if full.is_valid(instance) => Vec::new(),
                    (Err(_), Ok(full)) => words(full),
                    // Invalid: worded as the full validator words it, or, where it sees nothing
                    // wrong (their regular expressions differ on line terminators; the profile's
                    // follow ECMA-262), as the profile does.
                    (_, full) => {
                        let worded = full.as_ref().map(words).unwrap_or_default();
                        if !worded.is_empty() {
                            return worded;
                        }
                        match schema.validate(instance) {
                            Ok(()) => Vec::new(),
                            Err(e) => vec![e.to_string()],
                        }
                    }
                }
            }
        }
    }
    #[cfg(not(feature = "validation"))]
    {
        let _ = validator;
        match instance {
            Value::Object(_) => Vec::new(),
            _ => vec!["the value is not an object".to_owned()],
        }
    }
}

impl Server {
    /// Asks the request gate ([`ServerBuilder::admit_requests`]) whether to serve `method`.
    pub(crate) fn admit(&self, req: &RequestContext, method: &str) -> Result<(), ErrorObject> {
        Self::ask(self.inner.admit.as_ref(), req, method)
    }

    /// Asks the unknown-tool gate ([`ServerBuilder::admit_unknown_tools`]) whether a call of a
    /// tool this server does not have may be answered as such.
    fn admit_unknown(&self, req: &RequestContext) -> Result<(), ErrorObject> {
        Self::ask(self.inner.admit_unknown.as_ref(), req, methods::TOOLS_CALL)
    }

    /// Asks `gate` (if any) about `method` with the principal a layer in front proved.
    fn ask(
        gate: Option<&RequestGate>,
        req: &RequestContext,
        method: &str,
    ) -> Result<(), ErrorObject> {
        let Some(gate) = gate else {
            return Ok(());
        };
        #[cfg(any(feature = "http-server", feature = "ws"))]
        let principal = req
            .transport
            .as_deref()
            .and_then(|t| t.downcast_ref::<crate::HttpContext>())
            .and_then(|h| h.parts().extensions.get::<crate::Principal>());
        #[cfg(not(any(feature = "http-server", feature = "ws")))]
        let principal: Option<&crate::Principal> = {
            let _ = req;
            None
        };
        gate(method, principal)
    }

    /// Whether this server has the tool (`tools/call`) or prompt (`prompts/get`) `name`: what
    /// a request's telemetry may name (see [`crate::RequestRecord::tool`]).
    pub(crate) fn knows_target(&self, method: &str, name: &str) -> bool {
        match method {
            methods::TOOLS_CALL => self
                .inner
                .tools
                .read()
                .expect("tools lock")
                .items
                .contains_key(name),
            methods::PROMPTS_GET => self
                .inner
                .prompts
                .read()
                .expect("prompts lock")
                .items
                .contains_key(name),
            _ => false,
        }
    }

    /// Starts configuring a server with this name and version.
    pub fn builder(name: impl Into<String>, version: impl Into<String>) -> ServerBuilder {
        ServerBuilder {
            info: Implementation::new(name, version),
            instructions: None,
            engine: EngineConfig::default(),
            page_size: 100,
            logging: false,
            enforce_output: true,
            max_subscriptions: DEFAULT_MAX_SUBSCRIPTIONS,
            request_state: None,
            cache_hints: HashMap::new(),
            extensions: crate::extensions::Extensions::new(),
            tasks: TaskOptions::default(),
            skills: None,
            observer: None,
            admit: None,
            admit_unknown: None,
            idempotent_results: None,
            idempotent_wait: std::time::Duration::ZERO,
        }
    }

    /// How many sessions are open: connections (stdio, WebSocket) and Streamable HTTP sessions
    /// being served, each until it closes.
    pub fn open_sessions(&self) -> usize {
        self.inner
            .sessions
            .lock()
            .expect("sessions lock")
            .values()
            .filter(|s| s.strong_count() > 0)
            .count()
    }

    /// Registers a tool whose arguments are `A`: the input schema is derived from `A` (and the
    /// output schema from the return type when it is [`Json<T>`]). The handler returns
    /// `HandlerResult<R>` where `R` is text, content, a whole result or `Json<T>`
    /// ([`IntoToolResult`]); an `Err` is an `isError` result (a JSON-RPC error only for an
    /// [`ErrorObject`]). `()` as `A` means no arguments.
    pub fn tool<A, F, Fut, R>(
        &self,
        name: impl Into<String>,
        description: impl Into<String>,
        handler: F,
    ) -> Result<&Self, RegistrationError>
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        F: Fn(A, RequestCtx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult<R>> + Send + 'static,
        R: IntoToolResult,
    {
        self.add_tool(ToolDef::new(name).description(description), handler)
    }

    /// Registers a typed tool from its full definition (title, annotations, icons, `_meta`,
    /// execution): [`Server::tool`] with a [`ToolDef`].
    pub fn add_tool<A, F, Fut, R>(
        &self,
        def: ToolDef,
        handler: F,
    ) -> Result<&Self, RegistrationError>
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        F: Fn(A, RequestCtx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult<R>> + Send + 'static,
        R: IntoToolResult,
    {
        let mut tool = def.tool;
        let input_before_task = def.input_before_task;
        let idempotent = def.idempotent;
        let (input, shape) = tool_arguments::<A>(&tool.name)?;
        tool.input_schema = input;
        if tool.output_schema.is_none() {
            tool.output_schema = tool_output::<R>(&tool.name)?;
        }
        let handler = Arc::new(handler);
        let direct = handler.clone();
        let typed: TypedFn = Arc::new(move |text, schema, ctx| {
            let a = match shape {
                ArgsShape::Object => schema.decode::<A>(text),
                ArgsShape::Unit if schema.admits(text) => decode::<A>(Value::Null, shape).ok(),
                ArgsShape::Unit => None,
            };
            match a {
                Some(a) => {
                    let fut = direct(a, ctx);
                    Ok(Box::pin(async move { fut.await.into_tool_result() }))
                }
                None => Err(ctx),
            }
        });
        self.insert_tool_with(
            tool,
            input_before_task,
            idempotent,
            Arc::new(move |args, ctx| {
                let handler = handler.clone();
                Box::pin(async move {
                    match decode::<A>(Value::Object(args), shape) {
                        Ok(a) => handler(a, ctx).await.into_tool_result(),
                        Err(e) => Ok(CallToolResult::error(format!("Invalid arguments: {e}"))),
                    }
                })
            }),
            Some(typed),
        )
    }

    /// Registers a tool from its full description and a handler of raw JSON arguments (for
    /// dynamic tools). Arguments are validated against `inputSchema` before the handler runs;
    /// an `outputSchema` is enforced on the handler's structured results.
    pub fn raw_tool<F, Fut>(&self, tool: Tool, handler: F) -> Result<&Self, RegistrationError>
    where
        F: Fn(JsonObject, RequestCtx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult<CallToolResult>> + Send + 'static,
    {
        let handler = Arc::new(handler);
        self.insert_tool(
            tool,
            false,
            false,
            Arc::new(move |args, ctx| {
                let fut = handler(args, ctx);
                Box::pin(async move { fut.await.into_tool_result() })
            }),
        )
    }

    fn insert_tool(
        &self,
        tool: Tool,
        input_before_task: bool,
        idempotent: bool,
        handler: ToolFn,
    ) -> Result<&Self, RegistrationError> {
        self.insert_tool_with(tool, input_before_task, idempotent, handler, None)
    }

    fn insert_tool_with(
        &self,
        tool: Tool,
        input_before_task: bool,
        idempotent: bool,
        handler: ToolFn,
        typed: Option<TypedFn>,
    ) -> Result<&Self, RegistrationError> {
        // `_meta.ui` may carry only a visibility (an app-only tool); a resource it names must be
        // an app's.
        if let Some(uri) = tool
            .meta
            .as_ref()
            .and_then(|m| m.get("ui"))
            .and_then(|ui| ui.get("resourceUri"))
            .map(Value::as_str)
        {
            if !uri.is_some_and(crate::apps::is_app_uri) {
                return Err(RegistrationError::InvalidAppUri {
                    name: tool.name.clone(),
                    uri: uri.unwrap_or_default().to_owned(),
                });
            }
        }
        let input = compile(&tool.input_schema, &tool.name, "input")?;
        let param_headers =
            crate::modern::headers::param_headers(&Value::Object(tool.input_schema.clone()))
                .map_err(|why| RegistrationError::InvalidSchema {
                    name: tool.name.clone(),
                    reason: format!("input schema: {why}"),
                })?;
        let output = tool
            .output_schema
            .as_ref()
            .map(|s| compile(s, &tool.name, "output"))
            .transpose()?;
        let typed = typed.and_then(|t| Some((flat::FlatSchema::of(&tool.input_schema)?, t)));
        let name = tool.name.clone();
        {
            let mut tools = self.inner.tools.write().expect("tools lock");
            tools.insert(
                name,
                ToolEntry {
                    tool,
                    input,
                    output,
                    param_headers,
                    input_before_task,
                    idempotent,
                    handler,
                    typed,
                },
            );
            self.note_tool_flags(&tools);
        }
        self.list_changed(Kind::Tools);
        Ok(self)
    }

    /// Runs `run`, a call of an idempotent tool carrying `key` for `request` (its digest), once
    /// per key (see [`crate::idempotency`]): a repeat in this process waits for the first, a
    /// finished key answers its stored result, another request under the key is refused
    /// (-32602), and a key that began without finishing here is refused as of unknown outcome
    /// (-32603).
    async fn run_idempotent(
        &self,
        key: &str,
        request: &str,
        run: BoxFuture<'static, Result<CallToolResult, ErrorObject>>,
    ) -> Result<CallToolResult, ErrorObject> {
        use crate::idempotency::Begin;
        let inner = &self.inner;
        // This process's run of `key`: ends (waking the repeats) when dropped.
        struct Mine<'a> {
            runs: &'a Mutex<HashMap<String, tokio::sync::watch::Receiver<()>>>,
            key: &'a str,
            _tx: tokio::sync::watch::Sender<()>,
        }
        impl Drop for Mine<'_> {
            fn drop(&mut self) {
                self.runs
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(self.key);
            }
        }
        let mine = loop {
            let waiting = {
                let mut runs = inner
                    .idempotent_runs
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                match runs.get(key) {
                    Some(rx) => Some(rx.clone()),
                    None => {
                        let (tx, rx) = tokio::sync::watch::channel(());
                        runs.insert(key.to_owned(), rx);
                        break Mine {
                            runs: &inner.idempotent_runs,
                            key,
                            _tx: tx,
                        };
                    }
                }
            };
            if let Some(mut rx) = waiting {
                // Closed when the first run ends, however it ends.
                while rx.changed().await.is_ok() {}
            }
        };
        let store_failed = |e: crate::idempotency::IdempotentStoreError| {
            ErrorObject::internal(format!("{e}: nothing was run"))
        };
        let deadline = tokio::time::Instant::now() + inner.idempotent_wait;
        let result = loop {
            match inner
                .idempotent_results
                .begin(key, request)
                .await
                .map_err(store_failed)?
            {
                Begin::Done(text) => {
                    return serde_json::from_str(&text).map_err(|_| {
                        ErrorObject::internal(
                            "the stored result of this idempotency key is unreadable",
                        )
                    })
                }
                Begin::Conflict => return Err(ErrorObject::invalid_params(
                    "this idempotency key was used before for another tool or other arguments: refused, nothing was run",
                )),
                // Running elsewhere (another instance), or interrupted: polled for a while.
                Begin::Running if tokio::time::Instant::now() < deadline => {
                    let now = tokio::time::Instant::now();
                    tokio::time::sleep((deadline - now).min(IDEMPOTENT_POLL)).await;
                }
                Begin::Running => return Err(ErrorObject::internal(
                    "a call with this idempotency key began before and did not finish here (the server stopped or the call was cancelled while it ran, or another instance runs it): its outcome is unknown and it is not run again",
                )),
                Begin::Run => break run.await,
            }
        };
        match &result {
            Ok(r) => {
                let text = serde_json::to_string(r).unwrap_or_default();
                if let Err(e) = inner.idempotent_results.finish(key, &text).await {
                    tracing::warn!(error = %e, "an idempotent result was not kept");
                }
            }
            // A protocol error is no result to keep: a repeat runs again.
            Err(_) => {
                if let Err(e) = inner.idempotent_results.release(key).await {
                    tracing::warn!(error = %e, "an idempotency key was not released");
                }
            }
        }
        drop(mine);
        result
    }

    /// Removes a tool; sends `list_changed` if it existed.
    pub fn remove_tool(&self, name: &str) -> bool {
        let removed = {
            let mut tools = self.inner.tools.write().expect("tools lock");
            let removed = tools.remove(name);
            self.note_tool_flags(&tools);
            removed
        };
        if removed {
            self.list_changed(Kind::Tools);
        }
        removed
    }

    /// Records whether any tool of `tools` (the registry, under its write lock) may run as a task,
    /// and whether any annotates arguments for `Mcp-Param-*` headers.
    fn note_tool_flags(&self, tools: &Registry<ToolEntry>) {
        let any = tools.items.values().any(|e| {
            matches!(
                e.tool.execution.as_ref().and_then(|x| x.task_support),
                Some(crate::types::TaskSupport::Optional | crate::types::TaskSupport::Required)
            )
        });
        self.inner
            .task_tools
            .store(any, std::sync::atomic::Ordering::Release);
        let headers = tools.items.values().any(|e| !e.param_headers.is_empty());
        self.inner
            .header_tools
            .store(headers, std::sync::atomic::Ordering::Release);
        let idempotent = tools.items.values().any(|e| e.idempotent);
        self.inner
            .idempotent_tools
            .store(idempotent, std::sync::atomic::Ordering::Release);
    }

    /// Removes a prompt; sends `list_changed` if it existed.
    pub fn remove_prompt(&self, name: &str) -> bool {
        let removed = self
            .inner
            .prompts
            .write()
            .expect("prompts lock")
            .remove(name);
        if removed {
            self.list_changed(Kind::Prompts);
        }
        removed
    }

    /// Registers every tool and prompt of a value written with `#[purra_protocol::handlers]`
    /// (its methods are the handlers; the value is shared by every call).
    pub fn register<H: Handlers>(&self, handlers: H) -> Result<&Self, RegistrationError> {
        Arc::new(handlers).register(self)?;
        Ok(self)
    }

    /// Serves an MCP App: its HTML as a `ui://` resource with the app MIME type and its `_meta.ui`
    /// (CSP domains, domain, border), for tools bound with [`ToolDef::ui`]. A URI without the
    /// `ui://` scheme is refused.
    pub fn add_app(&self, app: crate::apps::AppResource) -> Result<&Self, RegistrationError> {
        if !crate::apps::is_app_uri(&app.uri) {
            return Err(RegistrationError::InvalidAppUri {
                name: app.name.clone(),
                uri: app.uri.clone(),
            });
        }
        let contents = app.contents();
        Ok(self.resource(app.resource(), move |_uri, _ctx| {
            let contents = contents.clone();
            async move { HandlerResult::Ok(contents) }
        }))
    }

    /// Registers a resource with a read handler, which returns a [`ReadResourceResult`] or
    /// what converts into one (a `ResourceContents`, or a `Vec` of them).
    pub fn resource<F, Fut, R>(&self, resource: Resource, handler: F) -> &Self
    where
        F: Fn(String, RequestCtx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult<R>> + Send + 'static,
        R: Into<ReadResourceResult>,
    {
        let uri = resource.uri.clone();
        self.inner
            .resources
            .write()
            .expect("resources lock")
            .insert(
                uri,
                ResourceEntry {
                    resource,
                    handler: Arc::new(move |u, _, c| {
                        let fut = handler(u, c);
                        Box::pin(async move { read_result(fut.await) })
                    }),
                },
            );
        self.list_changed(Kind::Resources);
        self
    }

    /// Registers a resource template (RFC 6570 simple `{var}` expressions); the handler gets the
    /// URI and the variables it matched, decoded into `V` (a struct whose fields are the
    /// variables, or `HashMap<String, String>`). Every required field of `V` must be a variable
    /// of the template.
    pub fn resource_template<V, F, Fut, R>(
        &self,
        template: ResourceTemplate,
        handler: F,
    ) -> Result<&Self, RegistrationError>
    where
        V: DeserializeOwned + JsonSchema + Send + 'static,
        F: Fn(String, V, RequestCtx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult<R>> + Send + 'static,
        R: Into<ReadResourceResult>,
    {
        let parts = parse_template(&template.uri_template)?;
        let invalid = |reason: String| RegistrationError::InvalidTemplate {
            template: template.uri_template.clone(),
            reason,
        };
        let (fields, decoder) = string_arguments::<V>(&template.uri_template)
            .map_err(|e| invalid(format!("the variables type: {e}")))?;
        let vars: HashSet<&str> = variables(&parts).collect();
        if let Some(missing) = fields
            .iter()
            .find(|f| f.required == Some(true) && !vars.contains(f.name.as_str()))
        {
            return Err(invalid(format!(
                "the variables type requires {:?}, which the template does not have",
                missing.name
            )));
        }
        let key = template.uri_template.clone();
        let handler = Arc::new(handler);
        let read: ReadFn = Arc::new(move |uri, vars, ctx| {
            let handler = handler.clone();
            let decoded = decoder.decode::<V>(vars);
            Box::pin(async move {
                let vars = decoded
                    .map_err(|e| ErrorObject::invalid_params(format!("Invalid URI {uri}: {e}")))?;
                read_result(handler(uri, vars, ctx).await)
            })
        });
        self.inner
            .templates
            .write()
            .expect("templates lock")
            .insert(
                key,
                TemplateEntry {
                    template,
                    parts,
                    handler: read,
                },
            );
        self.list_changed(Kind::Resources);
        Ok(self)
    }

    /// Registers a prompt whose arguments are the fields of `A` (name, description from the
    /// doc comment, required unless `Option`); string arguments are decoded into `A` (a number
    /// or boolean field is read as JSON). The handler returns messages or a whole result
    /// ([`IntoPromptResult`]). `()` as `A` means no arguments.
    pub fn prompt<A, F, Fut, R>(
        &self,
        name: impl Into<String>,
        description: impl Into<String>,
        handler: F,
    ) -> Result<&Self, RegistrationError>
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        F: Fn(A, RequestCtx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult<R>> + Send + 'static,
        R: IntoPromptResult,
    {
        self.add_prompt(PromptDef::new(name).description(description), handler)
    }

    /// Registers a typed prompt from its full definition: [`Server::prompt`] with a
    /// [`PromptDef`].
    pub fn add_prompt<A, F, Fut, R>(
        &self,
        def: PromptDef,
        handler: F,
    ) -> Result<&Self, RegistrationError>
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        F: Fn(A, RequestCtx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult<R>> + Send + 'static,
        R: IntoPromptResult,
    {
        let mut prompt = def.prompt;
        let (arguments, decoder) = string_arguments::<A>(&prompt.name)?;
        prompt.arguments = (!arguments.is_empty()).then_some(arguments);
        let name = prompt.name.clone();
        let handler = Arc::new(handler);
        self.insert_prompt(
            prompt,
            Arc::new(move |args, ctx| {
                let handler = handler.clone();
                let decoded = decoder.decode::<A>(args);
                let name = name.clone();
                Box::pin(async move {
                    let args = decoded.map_err(|e| {
                        ErrorObject::invalid_params(format!(
                            "Invalid arguments for prompt {name}: {e}"
                        ))
                    })?;
                    handler(args, ctx).await.into_prompt_result()
                })
            }),
        );
        Ok(self)
    }

    /// Registers a prompt from its full description and a handler of its string arguments
    /// (for dynamic prompts); arguments marked required are checked before the handler runs.
    pub fn raw_prompt<F, Fut, R>(&self, prompt: Prompt, handler: F) -> &Self
    where
        F: Fn(BTreeMap<String, String>, RequestCtx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult<R>> + Send + 'static,
        R: IntoPromptResult,
    {
        self.insert_prompt(
            prompt,
            Arc::new(move |a, c| {
                let fut = handler(a, c);
                Box::pin(async move { fut.await.into_prompt_result() })
            }),
        );
        self
    }

    fn insert_prompt(&self, prompt: Prompt, handler: PromptFn) {
        let name = prompt.name.clone();
        self.inner
            .prompts
            .write()
            .expect("prompts lock")
            .insert(name, PromptEntry { prompt, handler });
        self.list_changed(Kind::Prompts);
    }

    /// Lists to each request only the tools `filter` keeps for it (a host that authorizes
    /// tools per caller lists only what the caller may call); the others are still callable as
    /// far as this server is concerned: the host refuses those calls itself. Pages are pages of
    /// the tools kept.
    pub fn tool_filter<F>(&self, filter: F) -> &Self
    where
        F: Fn(&Tool, &RequestCtx) -> bool + Send + Sync + 'static,
    {
        *self.inner.tool_filter.write().expect("tool filter lock") = Some(Arc::new(filter));
        self
    }

    /// Answers `completion/complete` (declares the completions capability).
    pub fn completion<F, Fut>(&self, handler: F) -> &Self
    where
        F: Fn(CompleteParams, RequestCtx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult<Completion>> + Send + 'static,
    {
        *self.inner.completion.write().expect("completion lock") =
            Some(Arc::new(move |p, c| Box::pin(handler(p, c))));
        self
    }

    /// Sends `notifications/resources/updated` to the sessions subscribed to `uri`, and only those,
    /// and to the `subscriptions/listen` streams (2026-07-28) that asked for `uri`.
    /// It never waits on a session that stopped reading (see
    /// [`EngineConfig::slow_peer_timeout`]).
    pub async fn notify_resource_updated(&self, uri: &str) {
        self.inner.listeners.resource_updated(uri);
        // A URI string always serializes; a failure would be a serde_json bug, so it is logged.
        let params = match to_raw(&UriParams::new(uri)) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = ?e, "resource update notification not encodable");
                return;
            }
        };
        let frame = encode_notification(methods::RESOURCE_UPDATED, Some(&params));
        for s in self.live_sessions() {
            let subscribed = s.subscriptions.lock().expect("subs lock").contains(uri);
            if let (true, Some(peer)) = (subscribed, s.peer.get()) {
                peer.notify_detached(frame.clone(), self.inner.engine.slow_peer_timeout);
            }
        }
    }

    fn live_sessions(&self) -> Vec<Arc<SessionState>> {
        let sessions = self.inner.sessions.lock().expect("sessions lock");
        sessions.values().filter_map(Weak::upgrade).collect()
    }

    fn list_changed(&self, kind: Kind) {
        self.inner.listeners.list_changed(kind);
        let targets: Vec<Peer> = self
            .live_sessions()
            .into_iter()
            .filter(|s| s.initialized.load(Ordering::Acquire) && s.advertised().kind(kind))
            .filter_map(|s| s.peer.get().cloned())
            .collect();
        if targets.is_empty() {
            return;
        }
        if tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        let method = match kind {
            Kind::Tools => methods::TOOLS_LIST_CHANGED,
            Kind::Resources => methods::RESOURCES_LIST_CHANGED,
            Kind::Prompts => methods::PROMPTS_LIST_CHANGED,
        };
        // Each session on its own: one that stopped reading never delays the others.
        let frame = encode_notification(method, None);
        for p in targets {
            p.notify_detached(frame.clone(), self.inner.engine.slow_peer_timeout);
        }
    }

    /// What [`capabilities`](Self::capabilities) advertises, read without building them: every
    /// 2026-07-28 request and every task asks, and the whole capabilities object (its maps, the
    /// extensions copied) was built and dropped for five bits.
    fn advertised(&self) -> Advertised {
        let i = &self.inner;
        let bit = |on: bool, b: u8| if on { b } else { 0 };
        let skills = i.skills.read().expect("lock").advertised();
        let has_resources = !i.resources.read().expect("lock").is_empty()
            || !i.templates.read().expect("lock").is_empty()
            || skills;
        Advertised(
            bit(!i.tools.read().expect("lock").is_empty(), Advertised::TOOLS)
                | bit(has_resources, Advertised::RESOURCES)
                | bit(
                    !i.prompts.read().expect("lock").is_empty(),
                    Advertised::PROMPTS,
                )
                | bit(
                    i.completion.read().expect("lock").is_some(),
                    Advertised::COMPLETIONS,
                )
                | bit(i.logging, Advertised::LOGGING)
                | bit(skills, Advertised::SKILLS),
        )
    }

    fn capabilities(&self) -> ServerCapabilities {
        let i = &self.inner;
        let list_changed = || {
            let mut o = JsonObject::new();
            o.insert("listChanged".into(), Value::Bool(true));
            o
        };
        let skills = i.skills.read().expect("lock").advertised();
        // Skill files are resources: a server serving skills has the resources capability.
        let has_resources = !i.resources.read().expect("lock").is_empty()
            || !i.templates.read().expect("lock").is_empty()
            || skills;
        let offers_tasks = self.offers_tasks();
        let mut extensions = i.extensions.clone();
        if skills {
            extensions.insert(
                crate::skills::EXTENSION_ID.to_owned(),
                crate::skills::server_settings(true),
            );
        }
        if offers_tasks {
            extensions.insert(crate::extensions::TASKS.to_owned(), JsonObject::new());
        }
        ServerCapabilities {
            tools: (!i.tools.read().expect("lock").is_empty()).then(|| {
                let mut o = list_changed();
                if i.idempotent_tools.load(Ordering::Acquire) {
                    o.insert(
                        crate::idempotency::CAPABILITY.into(),
                        Value::Object(JsonObject::new()),
                    );
                }
                o
            }),
            resources: has_resources.then(|| {
                let mut o = list_changed();
                o.insert("subscribe".into(), Value::Bool(true));
                o
            }),
            prompts: (!i.prompts.read().expect("lock").is_empty()).then(list_changed),
            logging: i.logging.then(JsonObject::new),
            completions: i
                .completion
                .read()
                .expect("lock")
                .is_some()
                .then(JsonObject::new),
            experimental: None,
            tasks: offers_tasks.then(|| {
                let o = |v: Value| match v {
                    Value::Object(o) => o,
                    _ => JsonObject::new(),
                };
                o(serde_json::json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}))
            }),
            extensions: (!extensions.is_empty()).then_some(extensions),
        }
    }

    /// Serves one connection over `transport`; returns when it closes.
    pub async fn serve(&self, transport: Transport) {
        let (session, join) = self.start(transport);
        let _ = join.await;
        drop(session);
    }

    /// Serves one connection over this process's stdin and stdout; returns at EOF on stdin.
    #[cfg(feature = "stdio")]
    pub async fn serve_stdio(&self) {
        self.serve(crate::stdio::server_transport(
            self.inner.engine.max_frame_bytes,
        ))
        .await
    }

    /// Starts one session that behaves as already initialized at `version`, for stateless
    /// deployments (Streamable HTTP without sessions): every request is served without a
    /// handshake, and the client is taken to declare no capabilities.
    pub fn start_stateless(
        &self,
        transport: Transport,
        version: impl Into<ProtocolVersion>,
    ) -> (ServerSession, tokio::task::JoinHandle<()>) {
        let (session, join) = self.start(transport);
        let version = ProtocolVersion::negotiate(&version.into());
        *session.state.init.write().expect("init lock") = Some((
            version,
            ClientCapabilities::default(),
            Implementation::new("stateless", ""),
        ));
        session
            .state
            .advertised
            .store(self.advertised().0, Ordering::Release);
        session.state.era.store(ERA_HANDSHAKE, Ordering::Release);
        session.state.initialized.store(true, Ordering::Release);
        (session, join)
    }

    /// Starts one session that continues `snapshot` (taken with [`ServerSession::snapshot`],
    /// maybe in another process): initialized at its revision, with its client's capabilities
    /// and info, log level and resource subscriptions, without a handshake.
    pub fn start_resumed(
        &self,
        transport: Transport,
        snapshot: SessionSnapshot,
    ) -> (ServerSession, tokio::task::JoinHandle<()>) {
        let (session, join) = self.start(transport);
        let version = ProtocolVersion::negotiate(&ProtocolVersion::new(&snapshot.protocol_version));
        if let Some(peer) = session.state.peer.get() {
            peer.set_batches_allowed(version.allows_batches());
            peer.set_revision(version.as_str());
        }
        let state = &session.state;
        *state.init.write().expect("init lock") =
            Some((version, snapshot.capabilities, snapshot.client_info));
        *state.log_level.lock().expect("level lock") = snapshot.log_level;
        *state.subscriptions.lock().expect("subs lock") =
            snapshot.subscriptions.into_iter().collect();
        let mut caps = self.capabilities();
        if let Some(e) = &mut caps.extensions {
            e.remove(crate::extensions::TASKS);
        }
        state
            .advertised
            .store(Advertised::of(&caps).0, Ordering::Release);
        state.era.store(ERA_HANDSHAKE, Ordering::Release);
        state.initialized.store(true, Ordering::Release);
        (session, join)
    }

    /// Starts serving one connection and returns its session handle and the engine's task.
    pub fn start(&self, transport: Transport) -> (ServerSession, tokio::task::JoinHandle<()>) {
        let key = self.inner.next_session.fetch_add(1, Ordering::Relaxed);
        let state = Arc::new(SessionState {
            key,
            server: self.clone(),
            peer: OnceLock::new(),
            initialized: AtomicBool::new(false),
            init: RwLock::new(None),
            log_level: Mutex::new(None),
            subscriptions: Mutex::new(HashSet::new()),
            advertised: AtomicU8::new(Advertised::NONE.0),
            era: AtomicU8::new(ERA_UNDECIDED),
            on_change: OnceLock::new(),
        });
        // The session is findable (by list_changed and resource updates) with its peer before
        // the engine reads its first frame: a handler can never run before that.
        let inner = self.inner.clone();
        let registered = state.clone();
        let (_peer, join) = session::start_with(
            transport,
            state.clone(),
            self.inner.engine.clone(),
            move |peer| {
                let _ = registered.peer.set(peer.clone());
                inner
                    .sessions
                    .lock()
                    .expect("sessions lock")
                    .insert(key, Arc::downgrade(&registered));
            },
        );
        (ServerSession { state }, join)
    }
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Tools,
    Resources,
    Prompts,
}

/// A handle to one served connection.
#[derive(Clone)]
pub struct ServerSession {
    state: Arc<SessionState>,
}

impl std::fmt::Debug for ServerSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerSession").finish_non_exhaustive()
    }
}

impl ServerSession {
    /// The peer (the client), for requests and notifications outside any handler.
    pub fn peer(&self) -> &Peer {
        self.state.peer.get().expect("set at start")
    }
    /// Whether `initialize` has been answered.
    pub fn is_initialized(&self) -> bool {
        self.state.init.read().expect("init lock").is_some()
    }

    /// What the session needs to continue elsewhere ([`Server::start_resumed`]), once
    /// initialized.
    pub fn snapshot(&self) -> Option<SessionSnapshot> {
        let state = &self.state;
        let (v, caps, info) = state.init.read().expect("init lock").clone()?;
        let mut subscriptions: Vec<String> = state
            .subscriptions
            .lock()
            .expect("subs lock")
            .iter()
            .cloned()
            .collect();
        subscriptions.sort();
        Some(SessionSnapshot {
            protocol_version: v.as_str().to_owned(),
            capabilities: caps,
            client_info: info,
            log_level: *state.log_level.lock().expect("level lock"),
            subscriptions,
        })
    }

    /// Takes the log level and resource subscriptions of `snapshot` (another process changed
    /// them); the rest of a session does not change after `initialize`.
    #[cfg(feature = "http-server")]
    pub(crate) fn apply_changes(&self, snapshot: SessionSnapshot) {
        *self.state.log_level.lock().expect("level lock") = snapshot.log_level;
        *self.state.subscriptions.lock().expect("subs lock") =
            snapshot.subscriptions.into_iter().collect();
    }

    /// Calls `f` whenever the session's log level or resource subscriptions change (once per
    /// session: a second hook is ignored).
    pub fn on_change(&self, f: impl Fn() + Send + Sync + 'static) {
        let _ = self.state.on_change.set(Box::new(f));
    }

    /// The negotiated revision, once initialized.
    pub fn protocol_version(&self) -> Option<ProtocolVersion> {
        self.state
            .init
            .read()
            .expect("init lock")
            .as_ref()
            .map(|i| i.0.clone())
    }
}

/// What a handshake session needs to continue in another process: the negotiated revision,
/// the client's capabilities and info, the log level it set and the resources it subscribed to.
/// Kept as JSON in a [`SessionStore`](crate::session_store::SessionStore).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSnapshot {
    /// The negotiated revision.
    pub protocol_version: String,
    /// The client's capabilities.
    pub capabilities: ClientCapabilities,
    /// The client's name and version.
    pub client_info: Implementation,
    /// The level `logging/setLevel` set, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_level: Option<LoggingLevel>,
    /// The resources subscribed to, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subscriptions: Vec<String>,
}

struct SessionState {
    /// This session's key in the server's session map.
    key: u64,
    server: Server,
    peer: OnceLock<Peer>,
    initialized: AtomicBool,
    /// Negotiated version, client capabilities and info.
    init: RwLock<Option<(ProtocolVersion, ClientCapabilities, Implementation)>>,
    log_level: Mutex<Option<LoggingLevel>>,
    subscriptions: Mutex<HashSet<String>>,
    /// Which features the handshake advertised: what this session's requests may use and which
    /// `list_changed` it is told about. A bitset, not the capabilities object: every session kept
    /// a copy of that (its JSON maps, about 0.6 KiB) and cloned it on every request.
    advertised: AtomicU8,
    /// The connection's era, decided by its first request: undecided, handshake or modern.
    era: AtomicU8,
    /// Called when the log level or the subscriptions change (a session store saves them).
    on_change: OnceLock<Box<dyn Fn() + Send + Sync>>,
}

/// [`SessionState::era`]: no request yet.
const ERA_UNDECIDED: u8 = 0;
/// [`SessionState::era`]: the first request was not a 2026-07-28 request (an `initialize`).
const ERA_HANDSHAKE: u8 = 1;
/// [`SessionState::era`]: the first request carried the 2026-07-28 envelope.
const ERA_MODERN: u8 = 2;

impl Drop for SessionState {
    fn drop(&mut self) {
        // A dead `Weak` would keep this allocation alive: leave the map now.
        if let Ok(mut sessions) = self.server.inner.sessions.lock() {
            sessions.remove(&self.key);
        }
    }
}

impl SessionState {
    /// Whether this request is served in the 2026-07-28 revision. The first request decides for
    /// the whole connection (called in the reader, so in arrival order): a request other than
    /// `initialize` carrying the modern envelope makes it modern, anything else handshake-era.
    fn is_modern(&self, method: &str, params: Option<&RawValue>) -> bool {
        let era = self.era.load(Ordering::Acquire);
        if era != ERA_UNDECIDED {
            return era == ERA_MODERN;
        }
        let decided = if method != methods::INITIALIZE
            && crate::modern::envelope::has_modern_envelope(params)
        {
            ERA_MODERN
        } else {
            ERA_HANDSHAKE
        };
        match self
            .era
            .compare_exchange(ERA_UNDECIDED, decided, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => decided == ERA_MODERN,
            Err(now) => now == ERA_MODERN,
        }
    }

    fn advertised(&self) -> Advertised {
        Advertised(self.advertised.load(Ordering::Acquire))
    }

    fn changed(&self) {
        if let Some(f) = self.on_change.get() {
            f();
        }
    }
}

/// The features a server's capabilities advertise, as bits: what a request may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Advertised(u8);

impl Advertised {
    const NONE: Advertised = Advertised(0);
    const TOOLS: u8 = 1;
    const RESOURCES: u8 = 1 << 1;
    const PROMPTS: u8 = 1 << 2;
    const COMPLETIONS: u8 = 1 << 3;
    const LOGGING: u8 = 1 << 4;
    const SKILLS: u8 = 1 << 5;

    /// What `caps` advertises.
    pub(crate) fn of(caps: &ServerCapabilities) -> Advertised {
        let bit = |on: bool, b: u8| if on { b } else { 0 };
        Advertised(
            bit(caps.tools.is_some(), Self::TOOLS)
                | bit(caps.resources.is_some(), Self::RESOURCES)
                | bit(caps.prompts.is_some(), Self::PROMPTS)
                | bit(caps.completions.is_some(), Self::COMPLETIONS)
                | bit(caps.logging.is_some(), Self::LOGGING)
                | bit(
                    caps.extensions
                        .as_ref()
                        .is_some_and(|e| e.contains_key(crate::skills::EXTENSION_ID)),
                    Self::SKILLS,
                ),
        )
    }

    fn has(self, b: u8) -> bool {
        self.0 & b != 0
    }
    fn kind(self, kind: Kind) -> bool {
        match kind {
            Kind::Tools => self.tools(),
            Kind::Resources => self.resources(),
            Kind::Prompts => self.prompts(),
        }
    }
    fn tools(self) -> bool {
        self.has(Self::TOOLS)
    }
    fn resources(self) -> bool {
        self.has(Self::RESOURCES)
    }
    fn prompts(self) -> bool {
        self.has(Self::PROMPTS)
    }
    fn completions(self) -> bool {
        self.has(Self::COMPLETIONS)
    }
    fn logging(self) -> bool {
        self.has(Self::LOGGING)
    }
    fn skills(self) -> bool {
        self.has(Self::SKILLS)
    }
}

/// The context a handler runs in: the request, its cancellation, and the client.
#[derive(Clone)]
pub struct RequestCtx {
    req: RequestContext,
    session: Arc<SessionState>,
    progress_token: Option<ProgressToken>,
    /// The request's own envelope and input round when it is a 2026-07-28 request.
    modern: Option<Arc<modern::Scope>>,
    /// The task this handler runs in, when the request was task-augmented.
    task: Option<Arc<tasks::Live>>,
}

impl std::fmt::Debug for RequestCtx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestCtx")
            .field("id", &self.req.id)
            .field("progress_token", &self.progress_token)
            .finish()
    }
}

impl RequestCtx {
    /// The request's id.
    pub fn request_id(&self) -> &RequestId {
        &self.req.id
    }
    /// The peer (the client), tied to this request.
    pub fn peer(&self) -> &Peer {
        &self.req.peer
    }
    /// Cancelled when the client cancels this request or the connection closes.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.req.cancel
    }
    /// Whether the request was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.req.cancel.is_cancelled()
    }
    /// Resolves when the request is cancelled.
    pub async fn cancelled(&self) {
        self.req.cancel.cancelled().await
    }
    /// The revision of this request: the negotiated one, or the one a 2026-07-28 request declared.
    pub fn protocol_version(&self) -> ProtocolVersion {
        if let Some(m) = &self.modern {
            return ProtocolVersion::new(m.envelope.protocol_version.clone());
        }
        self.session
            .init
            .read()
            .expect("init lock")
            .as_ref()
            .map(|i| i.0.clone())
            .unwrap_or_default()
    }
    /// The client's capabilities (declared at the handshake, or on this very request).
    pub fn client_capabilities(&self) -> ClientCapabilities {
        if let Some(m) = &self.modern {
            return m.envelope.client_capabilities.clone();
        }
        self.session
            .init
            .read()
            .expect("init lock")
            .as_ref()
            .map(|i| i.1.clone())
            .unwrap_or_default()
    }
    /// The extensions negotiated for this request: those the server declares and the client
    /// declared (at the handshake, or on this very 2026-07-28 request), in name order.
    pub fn negotiated_extensions(&self) -> Vec<String> {
        let mut server = self.session.server.capabilities();
        if self.modern.is_none() {
            if let Some(e) = &mut server.extensions {
                e.remove(crate::extensions::TASKS);
            }
        }
        crate::extensions::negotiated(&server, &self.client_capabilities())
    }
    /// Whether the client renders MCP Apps: it declared `io.modelcontextprotocol/ui` with the app
    /// MIME type. An Apps tool still answers text for the others.
    pub fn client_supports_apps(&self) -> bool {
        crate::apps::settings_render_apps(self.client_extension(crate::apps::EXTENSION_ID).as_ref())
    }
    /// The settings the client declared for the extension `name`, when it declared it.
    pub fn client_extension(&self, name: &str) -> Option<JsonObject> {
        self.client_capabilities()
            .extensions
            .and_then(|mut e| e.remove(name))
    }
    /// The id of the task this handler runs in, when the request was task-augmented.
    pub fn task_id(&self) -> Option<String> {
        self.task_of().map(|t| t.id().to_owned())
    }

    /// Sets the status message of the task this handler runs in (what `tasks/get` shows while it
    /// works); nothing when it runs in none.
    pub async fn set_task_status(&self, message: impl Into<String>) {
        if let Some(t) = self.task_of() {
            t.status(message.into()).await;
        }
    }

    /// Whether this handler runs in a task of the 2026-07-28 extension, whose request has been
    /// answered: its progress and log messages have nowhere to go and are dropped (the client
    /// follows the task with `tasks/get`).
    fn in_extension_task(&self) -> bool {
        self.modern.is_some() && self.task_of().is_some()
    }

    /// The task this handler runs in: the one it started with, or the one
    /// [`start_task`](Self::start_task) made.
    fn task_of(&self) -> Option<Arc<tasks::Live>> {
        self.task.clone().or_else(|| {
            self.modern
                .as_ref()
                .and_then(|m| m.escalation.as_ref())
                .and_then(|e| e.task.get().cloned())
        })
    }

    /// Makes this call a task from here on, for a tool declared with
    /// [`ToolDef::input_before_task`] called with the 2026-07-28 tasks extension: the client is
    /// answered with the new task at once, and the handler runs on in it (its later questions
    /// are the task's). Elsewhere it returns at once: the call already is a task, or runs as
    /// an ordinary request.
    pub async fn start_task(&self) -> Result<(), Error> {
        let Some(e) = self.modern.as_ref().and_then(|m| m.escalation.as_ref()) else {
            return Ok(());
        };
        e.requested.store(true, Ordering::Release);
        while e.task.get().is_none() {
            e.ready.notified().await;
        }
        Ok(())
    }
    /// The client's name and version.
    pub fn client_info(&self) -> Option<Implementation> {
        self.with_client_info(Implementation::clone)
    }
    /// The client's name alone: [`client_info`](Self::client_info)`.name`, without copying the
    /// rest of it (its version, title, icons).
    pub fn client_name(&self) -> Option<String> {
        self.with_client_info(|i| i.name.clone())
    }
    /// `f` of the client's `Implementation`, wherever this request's era keeps it: the request's
    /// own envelope at 2026-07-28, the session's handshake before.
    fn with_client_info<T>(&self, f: impl FnOnce(&Implementation) -> T) -> Option<T> {
        if let Some(m) = &self.modern {
            return m.envelope.client_info.as_ref().map(f);
        }
        self.session
            .init
            .read()
            .expect("init lock")
            .as_ref()
            .map(|i| f(&i.2))
    }
    /// What the transport attached to this request (see
    /// [`Inbound::FrameWithContext`](crate::transport::Inbound::FrameWithContext)), for custom
    /// transports; Streamable HTTP's is reached more conveniently with [`http`](Self::http).
    pub fn transport_context(&self) -> Option<&(dyn std::any::Any + Send + Sync)> {
        self.req.transport.as_deref()
    }
    /// The HTTP request that carried this request (method, URI, headers, extensions) and its
    /// session, on Streamable HTTP (the handshake request on WebSocket); `None` on other
    /// transports.
    #[cfg(any(feature = "http-server", feature = "ws"))]
    pub fn http(&self) -> Option<&crate::HttpContext> {
        self.transport_context()?.downcast_ref()
    }
    /// The Streamable HTTP session id, when the request came with one.
    #[cfg(any(feature = "http-server", feature = "ws"))]
    pub fn session_id(&self) -> Option<&str> {
        self.http()?.session_id()
    }
    /// A value a layer in front of the MCP endpoint put in the HTTP request's extensions
    /// (an authenticated principal, for instance).
    #[cfg(any(feature = "http-server", feature = "ws"))]
    pub fn extension<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.http()?.parts().extensions.get::<T>()
    }
    /// Who is calling: the [`Principal`](crate::Principal) an authentication layer in front
    /// of the endpoint (the `auth` feature's `AuthLayer`, or a host's own) put in the HTTP
    /// request's extensions; `None` when there is none. Per-caller state (a session, a
    /// request state) binds to [`Principal::binding_key`](crate::Principal::binding_key).
    #[cfg(any(feature = "http-server", feature = "ws"))]
    pub fn principal(&self) -> Option<&crate::Principal> {
        self.extension::<crate::Principal>()
    }
    /// Ends the SSE stream carrying this request without cancelling it (SEP-1699): the client
    /// reconnects and receives the rest on the resumed stream. Returns false on transports
    /// without per-request streams.
    pub fn close_sse_stream(&self) -> bool {
        self.req.peer.close_request_stream()
    }

    /// The request's progress token, if the client asked for progress.
    pub fn progress_token(&self) -> Option<&ProgressToken> {
        self.progress_token.as_ref()
    }

    /// Sends `notifications/progress` if the client asked for progress; otherwise does nothing
    /// (nor in a task of the 2026-07-28 tasks extension).
    pub async fn progress(
        &self,
        progress: f64,
        total: Option<f64>,
        message: Option<&str>,
    ) -> Result<(), Error> {
        let Some(token) = &self.progress_token else {
            return Ok(());
        };
        if self.in_extension_task() {
            return Ok(());
        }
        self.req
            .peer
            .notify(
                methods::PROGRESS,
                &ProgressParams {
                    progress_token: token.clone(),
                    progress,
                    total,
                    message: message.map(str::to_owned),
                    meta: None,
                },
            )
            .await
    }

    /// Sends `notifications/message` if logging is declared and `level` is at or above the level
    /// the client set (all levels pass until it sets one).
    pub async fn log(
        &self,
        level: LoggingLevel,
        logger: Option<&str>,
        data: Value,
    ) -> Result<(), Error> {
        if !self.session.server.inner.logging {
            return Ok(());
        }
        let min = match &self.modern {
            // 2026-07-28: only a request that asked for a level gets log messages.
            Some(m) => match m.envelope.log_level {
                Some(l) => Some(l),
                None => return Ok(()),
            },
            None => *self.session.log_level.lock().expect("level lock"),
        };
        if min.is_some_and(|m| level < m) || self.in_extension_task() {
            return Ok(());
        }
        self.req
            .peer
            .notify(
                methods::MESSAGE,
                &LoggingMessageParams {
                    level,
                    logger: logger.map(str::to_owned),
                    data,
                    meta: None,
                },
            )
            .await
    }

    fn sub_request_options(&self) -> RequestOptions {
        RequestOptions::default().cancel_with(self.req.cancel.clone())
    }

    /// Asks the client to sample an LLM (`sampling/createMessage`). In the 2026-07-28 revision
    /// the request travels in an `input_required` result (see [`input`](Self::input)).
    pub async fn create_message(
        &self,
        params: CreateMessageParams,
    ) -> Result<CreateMessageResult, Error> {
        let key = self.next_input_key("sampling");
        match self.input(&key, InputRequest::Sample(params)).await? {
            InputResponse::Sample(r) => Ok(r),
            _ => unreachable!("a sampling request is answered by a sampling result"),
        }
    }

    /// Asks the client to elicit input from the user (`elicitation/create`). In the 2026-07-28
    /// revision the request travels in an `input_required` result (see [`input`](Self::input)).
    pub async fn elicit(&self, params: ElicitParams) -> Result<ElicitResult, Error> {
        let key = self.next_input_key("elicitation");
        match self.input(&key, InputRequest::Elicit(params)).await? {
            InputResponse::Elicit(r) => Ok(r),
            _ => unreachable!("an elicitation is answered by an elicitation result"),
        }
    }

    /// Asks the client for its roots (`roots/list`). In the 2026-07-28 revision the request
    /// travels in an `input_required` result (see [`input`](Self::input)).
    pub async fn list_roots(&self) -> Result<Vec<Root>, Error> {
        let key = self.next_input_key("roots");
        match self.input(&key, InputRequest::ListRoots).await? {
            InputResponse::Roots(r) => Ok(r.roots),
            _ => unreachable!("roots/list is answered by a roots result"),
        }
    }

    /// The key of the next unnamed input call: `{kind}-{n}`, n counting this request's calls.
    fn next_input_key(&self, kind: &str) -> String {
        match &self.modern {
            Some(m) => format!("{kind}-{}", m.input_calls.fetch_add(1, Ordering::Relaxed)),
            None => String::new(),
        }
    }

    /// Asks the client for input under `key` (sampling, elicitation or roots), in either era.
    ///
    /// In a handshake revision this sends the request to the client and waits for its answer
    /// (`key` is not used). In 2026-07-28, on `tools/call`, `prompts/get` and `resources/read`,
    /// the answer comes from the client's retry: the first time, the request is returned to the
    /// client in an `input_required` result under `key` and the handler is run again from the
    /// start when the client retries with the answer, so everything before this call runs once
    /// per round. Keys name questions: use a stable key per question. A request the client did
    /// not declare the capability for fails with [`Error::MissingClientCapability`] (returned
    /// from the handler it answers -32021).
    pub async fn input(&self, key: &str, request: InputRequest) -> Result<InputResponse, Error> {
        if let (Some(t), Some(_)) = (self.task_of(), &self.modern) {
            return t.ask(key, request).await;
        }
        if let Some(m) = &self.modern {
            let Some(round) = &m.round else {
                return Err(Error::Protocol(format!(
                    "{} cannot ask the client for input in the 2026-07-28 revision",
                    m.method
                )));
            };
            return round.input(key, request).await;
        }
        if !request.declared_by(&self.client_capabilities()) {
            return Err(Error::MissingClientCapability(
                request.capability().to_owned(),
            ));
        }
        let options = self.sub_request_options();
        let peer = &self.req.peer;
        if let Some(t) = &self.task {
            let key = if key.is_empty() {
                request.method()
            } else {
                key
            };
            let asked = request.clone();
            let fut = Box::pin(self.send_input(peer, request, options));
            return t.around_legacy_input(key, &asked, fut).await;
        }
        self.send_input(peer, request, options).await
    }

    async fn send_input(
        &self,
        peer: &Peer,
        request: InputRequest,
        options: RequestOptions,
    ) -> Result<InputResponse, Error> {
        // A request made in a task's name says so (2025-11-25 `related-task`).
        let params = |p: Value| match (&self.task, p) {
            (Some(t), Value::Object(mut o)) => {
                let meta = o
                    .entry("_meta")
                    .or_insert_with(|| Value::Object(JsonObject::new()));
                if let Value::Object(m) = meta {
                    m.insert(
                        crate::tasks::RELATED_TASK_META.into(),
                        serde_json::json!({ "taskId": t.id() }),
                    );
                }
                Value::Object(o)
            }
            (_, p) => p,
        };
        let method = request.method();
        let p = params(request.to_value()["params"].clone());
        match request {
            InputRequest::Sample(_) => peer
                .request(method, &p, options)
                .await
                .map(InputResponse::Sample),
            InputRequest::Elicit(_) => peer
                .request(method, &p, options)
                .await
                .map(InputResponse::Elicit),
            InputRequest::ListRoots => peer
                .request(method, &p, options)
                .await
                .map(InputResponse::Roots),
        }
    }

    /// The state this handler carried from the previous round of a 2026-07-28 multi round-trip
    /// request (see [`set_request_state`](Self::set_request_state)); verified, never what the
    /// client made up. `None` in the first round and in handshake revisions.
    pub fn request_state(&self) -> Option<Value> {
        self.modern
            .as_ref()
            .and_then(|m| m.round.as_ref())
            .and_then(|r| r.prior_state().cloned())
    }

    /// Carries `state` to the next round of this 2026-07-28 request, sealed in its `requestState`
    /// (for example a handle the server minted). Ignored when the request completes in this
    /// round, and in handshake revisions.
    pub fn set_request_state(&self, state: Value) {
        if let Some(r) = self.modern.as_ref().and_then(|m| m.round.as_ref()) {
            r.set_next_state(state);
        }
    }
}

fn read_result<R: Into<ReadResourceResult>>(
    r: HandlerResult<R>,
) -> Result<ReadResourceResult, ErrorObject> {
    r.map(Into::into).map_err(HandlerError::into_error_object)
}

/// The longest URI a session may subscribe to.
pub(crate) const MAX_SUBSCRIPTION_URI_BYTES: usize = 4096;

/// Whether one more subscription to `uri` fits the session's bounds (a repeated subscription is
/// free: the set already has it).
fn check_subscription(subs: &HashSet<String>, uri: &str, max: usize) -> Result<(), ErrorObject> {
    if uri.len() > MAX_SUBSCRIPTION_URI_BYTES {
        return Err(ErrorObject::invalid_params(format!(
            "Invalid params: a subscribed URI is at most {MAX_SUBSCRIPTION_URI_BYTES} bytes"
        )));
    }
    if subs.len() >= max && !subs.contains(uri) {
        return Err(ErrorObject::invalid_params(format!(
            "Invalid params: this session already has {max} resource subscriptions, the server's limit; unsubscribe from one first"
        )));
    }
    Ok(())
}

fn encode_cursor(offset: usize) -> String {
    format!("purra-{offset:x}")
}

fn decode_cursor(cursor: Option<&str>) -> Result<usize, ErrorObject> {
    match cursor {
        None => Ok(0),
        Some(c) => c
            .strip_prefix("purra-")
            .and_then(|h| usize::from_str_radix(h, 16).ok())
            .ok_or_else(|| ErrorObject::invalid_params("Invalid cursor")),
    }
}

/// Whether params' text may have a `_meta` member: it has the bytes `_meta`, or a `\u` escape
/// (the only escape that can spell a letter or `_` in a key). When not, the pass that reads
/// `_meta` is skipped: most requests carry none.
fn may_have_meta(text: &str) -> bool {
    let bytes = text.as_bytes();
    // Any backslash counts (cheaper than telling `\u` apart); most params have neither byte.
    memchr::memchr2_iter(b'_', b'\\', bytes)
        .any(|i| bytes[i] == b'\\' || bytes[i..].starts_with(b"_meta"))
}

#[derive(Deserialize)]
struct MetaOnly {
    #[serde(default, rename = "_meta")]
    meta: Option<ProgressMeta>,
}

#[derive(Deserialize)]
struct ProgressMeta {
    #[serde(default, rename = "progressToken")]
    progress_token: Option<ProgressToken>,
    /// The modern envelope's version key: never on a handshake-era request.
    #[serde(default, rename = "io.modelcontextprotocol/protocolVersion")]
    modern: Option<serde::de::IgnoredAny>,
}

fn not_initialized() -> ErrorObject {
    ErrorObject::new(
        RpcErrorCode::INVALID_REQUEST,
        "Invalid request: the session is not initialized; send initialize first",
    )
}

/// Validates a call's arguments against the tool's input schema (invalid: an `isError`
/// result naming what is wrong), runs the handler (once per idempotency key when `key` is
/// given) and checks its structured output.
async fn run_tool(
    server: &Server,
    entry: &ToolEntry,
    name: &str,
    args: JsonObject,
    key: Option<String>,
    ctx: RequestCtx,
) -> Result<CallToolResult, ErrorObject> {
    let args_value = Value::Object(args);
    let errors = validation_errors(&entry.input, &args_value);
    if !errors.is_empty() {
        // An `isError` result: no output schema applies to it.
        return Ok(CallToolResult::error(format!(
            "Invalid arguments for tool {}: {}",
            name,
            errors.join("; ")
        )));
    }
    let Value::Object(args) = args_value else {
        unreachable!("built as an object")
    };
    let result = match key {
        Some(key) => {
            let request = crate::idempotency::request_digest(name, &Value::Object(args.clone()));
            server
                .run_idempotent(&key, &request, (entry.handler)(args, ctx))
                .await?
        }
        None => (entry.handler)(args, ctx).await?,
    };
    check_output(&server.inner, entry, name, &result)?;
    Ok(result)
}

/// A tool's result against its output schema (when the server enforces it and the result is
/// not an error).
fn check_output(
    inner: &ServerInner,
    entry: &ToolEntry,
    name: &str,
    result: &CallToolResult,
) -> Result<(), ErrorObject> {
    let enforce = inner.enforce_output && !result.is_error();
    if let (Some(out), true) = (&entry.output, enforce) {
        match &result.structured_content {
            Some(sc) if validation_errors(out, sc).is_empty() => {}
            Some(_) => {
                return Err(ErrorObject::internal(format!(
                    "Tool {name} returned structuredContent that does not match its output schema"
                )))
            }
            None => {
                return Err(ErrorObject::internal(format!(
                    "Tool {name} has an output schema but returned no structuredContent"
                )))
            }
        }
    }
    Ok(())
}

impl Service for SessionState {
    const SIDE: &'static str = "server";

    fn request(
        self: &Arc<Self>,
        ctx: RequestContext,
        method: String,
        params: Option<Box<RawValue>>,
    ) -> BoxFuture<'static, session::HandlerOutput> {
        let this = self.clone();
        if self.is_modern(&method, params.as_deref()) {
            return Box::pin(async move {
                modern::serve_on_connection(this, ctx, method, params)
                    .await
                    .map(Answer::Raw)
            });
        }
        Box::pin(async move { this.handle(ctx, method, params).await })
    }

    fn notification_received(&self, method: &str, _params: Option<&RawValue>) {
        // In the reader: every frame after `notifications/initialized` sees the session ready.
        if method == methods::INITIALIZED {
            self.initialized.store(true, Ordering::Release);
        }
    }

    /// Everything a server does with a notification is done in the reader (above).
    const HANDLES_NOTIFICATIONS: bool = false;

    fn observes(&self) -> bool {
        self.server.inner.observer.is_some()
    }

    fn observe(&self, record: &crate::RequestRecord<'_>) {
        if let Some(observer) = &self.server.inner.observer {
            observer(record);
        }
    }

    fn knows_target(&self, method: &str, name: &str) -> bool {
        self.server.knows_target(method, name)
    }

    fn notification(
        self: &Arc<Self>,
        _peer: &Peer,
        _method: String,
        _params: Option<Box<RawValue>>,
    ) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }
}

impl SessionState {
    async fn handle(
        self: Arc<Self>,
        req: RequestContext,
        method: String,
        params: Option<Box<RawValue>>,
    ) -> session::HandlerOutput {
        self.server.admit(&req, &method)?;
        if method == methods::INITIALIZE {
            return self.initialize(params.as_deref()).map(Answer::Raw);
        }
        if method == methods::PING {
            return Ok(to_raw(&EmptyResult {})?.into());
        }
        if self.init.read().expect("init lock").is_none() {
            return Err(not_initialized());
        }
        let meta = params
            .as_deref()
            .filter(|p| may_have_meta(p.get()))
            .and_then(|p| serde_json::from_str::<MetaOnly>(p.get()).ok())
            .and_then(|m| m.meta);
        if meta.as_ref().is_some_and(|m| m.modern.is_some()) {
            return Err(ErrorObject::new(
                RpcErrorCode::INVALID_REQUEST,
                "Invalid request: this connection speaks a handshake revision; requests carrying the 2026-07-28 envelope are not accepted on it",
            ));
        }
        let progress_token = meta.and_then(|m| m.progress_token);
        #[cfg(any(feature = "http-server", feature = "ws"))]
        let principal = req
            .transport
            .as_deref()
            .and_then(|t| t.downcast_ref::<crate::HttpContext>())
            .and_then(|h| h.parts().extensions.get::<crate::Principal>())
            .map(crate::Principal::binding_key);
        #[cfg(not(any(feature = "http-server", feature = "ws")))]
        let principal: Option<String> = None;
        // Boxed, and made only for a request it may answer: its future is large, and every
        // request's future (boxed itself) would carry it.
        if tasks::may_route_legacy(&self, &method, params.as_deref()) {
            if let Some(r) = Box::pin(tasks::route_legacy(
                &self,
                &req,
                &method,
                params.as_deref(),
                progress_token.as_ref(),
                principal.as_deref(),
            ))
            .await
            {
                return r.map(Answer::Raw);
            }
        }
        let ctx = RequestCtx {
            req,
            session: self.clone(),
            progress_token,
            modern: None,
            task: None,
        };
        let advertised = self.advertised();
        self.serve_answer(ctx, method, params, advertised).await
    }

    /// Answers a request of a feature (tools, resources, prompts, completion, logging) in either
    /// era; `advertised` is what this request may use.
    async fn serve(
        self: Arc<Self>,
        ctx: RequestCtx,
        method: String,
        params: Option<Box<RawValue>>,
        advertised: Advertised,
    ) -> Result<Box<RawValue>, ErrorObject> {
        self.serve_answer(ctx, method, params, advertised)
            .await
            .map(Answer::into_raw)
    }

    /// [`serve`](Self::serve), a `tools/call` of a handshake-era request on its connection
    /// answered in its response frame (the others raw).
    async fn serve_answer(
        self: Arc<Self>,
        ctx: RequestCtx,
        method: String,
        params: Option<Box<RawValue>>,
        advertised: Advertised,
    ) -> session::HandlerOutput {
        if method == methods::TOOLS_CALL && advertised.tools() {
            return self.call_tool(ctx, params).await;
        }
        self.serve_other(ctx, method, params, advertised)
            .await
            .map(Answer::Raw)
    }

    /// Answers a `tools/call`: the arguments validated against the tool's input schema, the
    /// handler run, its structured output checked against the output schema. A handshake-era
    /// call on its connection (no 2026-07-28 envelope, not a task) gets its result serialized
    /// straight into the response frame.
    async fn call_tool(
        self: Arc<Self>,
        ctx: RequestCtx,
        params: Option<Box<RawValue>>,
    ) -> session::HandlerOutput {
        let server = self.server.clone();
        let inner = &server.inner;
        let p = params.as_deref();
        let framed = (ctx.modern.is_none() && ctx.task.is_none()).then(|| ctx.req.id.clone());
        let answer = |result: &CallToolResult| -> session::HandlerOutput {
            Ok(match &framed {
                Some(id) => Answer::framed_tool_result(id, result)?,
                None => Answer::Raw(to_raw(result)?),
            })
        };
        // The usual call (no `_meta`, task or key; object arguments; a tool that is not
        // idempotent) is read once, its name borrowed from the frame; a typed tool's arguments
        // are decoded straight from their bytes, checked against its flat schema in the same
        // scan. Anything else, and anything that fails on the way, is read and answered the
        // general way below.
        let mut ctx = ctx;
        if let Some(call) = p.and_then(|p| flat::UsualCall::read(p.get())) {
            let found = inner.tools.read().expect("tools lock").get(&call.name);
            if let Some(entry) = found.filter(|e| !e.idempotent) {
                let text = call.arguments_text();
                if let Some((schema, typed)) = &entry.typed {
                    match typed(text, schema, ctx) {
                        Ok(run) => {
                            let result = run.await?;
                            check_output(inner, &entry, &call.name, &result)?;
                            return answer(&result);
                        }
                        Err(back) => ctx = back,
                    }
                }
                if let Ok(args) = serde_json::from_str::<JsonObject>(text) {
                    let result = run_tool(&server, &entry, &call.name, args, None, ctx).await?;
                    return answer(&result);
                }
            }
        }
        let call: CallToolParams = from_params(p)?;
        let found = inner.tools.read().expect("tools lock").get(&call.name);
        let Some(entry) = found else {
            server.admit_unknown(&ctx.req)?;
            return Err(ErrorObject::invalid_params(format!(
                "Unknown tool: {}",
                call.name
            )));
        };
        // The key is read (and bounded) only for a tool that honours it.
        let key = if entry.idempotent {
            crate::idempotency::carried_key(&call)
                .map_err(ErrorObject::invalid_params)?
                .map(str::to_owned)
        } else {
            None
        };
        let args = call.arguments.unwrap_or_default();
        let result = run_tool(&server, &entry, &call.name, args, key, ctx).await?;
        answer(&result)
    }

    /// Answers every request of [`serve`](Self::serve) but a `tools/call`.
    async fn serve_other(
        self: Arc<Self>,
        ctx: RequestCtx,
        method: String,
        params: Option<Box<RawValue>>,
        advertised: Advertised,
    ) -> Result<Box<RawValue>, ErrorObject> {
        let server = self.server.clone();
        let inner = &server.inner;
        let legacy = ctx.modern.is_none();
        let p = params.as_deref();
        match method.as_str() {
            methods::TOOLS_LIST if advertised.tools() => {
                let page: PaginatedParams = from_params(p)?;
                let offset = decode_cursor(page.cursor.as_deref())?;
                let filter = inner.tool_filter.read().expect("tool filter lock").clone();
                let (tools, next) = match filter {
                    None => {
                        let (items, next) = inner
                            .tools
                            .read()
                            .expect("tools lock")
                            .page(offset, inner.page_size);
                        (items.iter().map(|e| e.tool.clone()).collect(), next)
                    }
                    Some(keep) => {
                        let kept: Vec<Tool> = {
                            let tools = inner.tools.read().expect("tools lock");
                            tools
                                .order
                                .iter()
                                .map(|k| &tools.items[k].tool)
                                .filter(|t| keep(t, &ctx))
                                .cloned()
                                .collect()
                        };
                        let end = offset.saturating_add(inner.page_size).min(kept.len());
                        let next = (end < kept.len()).then_some(end);
                        (kept[offset.min(end)..end].to_vec(), next)
                    }
                };
                Ok(to_raw(&ListToolsResult {
                    tools,
                    next_cursor: next.map(encode_cursor),
                    meta: None,
                })?)
            }
            methods::RESOURCES_LIST if advertised.resources() => {
                let page: PaginatedParams = from_params(p)?;
                let offset = decode_cursor(page.cursor.as_deref())?;
                let (items, next) = inner
                    .resources
                    .read()
                    .expect("resources lock")
                    .page(offset, inner.page_size);
                let mut resources: Vec<Resource> =
                    items.iter().map(|e| e.resource.clone()).collect();
                let mut next = next;
                // Each skill's SKILL.md follows the registered resources, in the same pages.
                if next.is_none() {
                    let registered = inner.resources.read().expect("resources lock").order.len();
                    let listed = inner.skills.read().expect("skills lock").listings();
                    let from = offset.saturating_sub(registered);
                    let room = inner.page_size - resources.len().min(inner.page_size);
                    let end = from.saturating_add(room).min(listed.len());
                    if from < end {
                        resources.extend_from_slice(&listed[from..end]);
                    }
                    if end < listed.len() {
                        next = Some(registered + end);
                    }
                }
                Ok(to_raw(&ListResourcesResult {
                    resources,
                    next_cursor: next.map(encode_cursor),
                    meta: None,
                })?)
            }
            crate::skills::methods::LIST if advertised.skills() => {
                let page: PaginatedParams = from_params(p)?;
                let offset = decode_cursor(page.cursor.as_deref())?;
                let (skills, next) = inner
                    .skills
                    .read()
                    .expect("skills lock")
                    .page(offset, inner.page_size);
                Ok(to_raw(&crate::skills::ListSkillsResult {
                    skills,
                    next_cursor: next.map(encode_cursor),
                })?)
            }
            crate::skills::methods::GET if advertised.skills() => {
                let UriParams { uri, .. } = from_params(p)?;
                let skill = inner
                    .skills
                    .read()
                    .expect("skills lock")
                    .get(&uri)
                    .ok_or_else(|| {
                        ErrorObject::invalid_params(format!("No skill is served at {uri}"))
                    })?;
                Ok(to_raw(&crate::skills::GetSkillResult { skill })?)
            }
            crate::skills::methods::DIRECTORY_READ if advertised.skills() => {
                #[derive(Deserialize)]
                struct DirParams {
                    uri: String,
                    #[serde(default)]
                    cursor: Option<String>,
                }
                let DirParams { uri, cursor } = from_params(p)?;
                let offset = decode_cursor(cursor.as_deref())?;
                let catalog = inner.skills.read().expect("skills lock");
                let children = catalog.dir(&uri).ok_or_else(|| {
                    ErrorObject::invalid_params(format!(
                        "{uri} is not a folder of a skill this server serves"
                    ))
                })?;
                let end = offset.saturating_add(inner.page_size).min(children.len());
                let r = crate::skills::ReadDirectoryResult {
                    resources: children[offset.min(end)..end].to_vec(),
                    next_cursor: (end < children.len()).then(|| encode_cursor(end)),
                };
                drop(catalog);
                Ok(to_raw(&r)?)
            }
            methods::RESOURCES_TEMPLATES_LIST if advertised.resources() => {
                let page: PaginatedParams = from_params(p)?;
                let offset = decode_cursor(page.cursor.as_deref())?;
                let (items, next) = inner
                    .templates
                    .read()
                    .expect("templates lock")
                    .page(offset, inner.page_size);
                Ok(to_raw(&ListResourceTemplatesResult {
                    resource_templates: items.iter().map(|e| e.template.clone()).collect(),
                    next_cursor: next.map(encode_cursor),
                    meta: None,
                })?)
            }
            methods::RESOURCES_READ if advertised.resources() => {
                let UriParams { uri, .. } = from_params(p)?;
                let exact = inner.resources.read().expect("resources lock").get(&uri);
                // A skill's file (or folder) comes before the templates.
                if exact.is_none() && advertised.skills() {
                    if let Some(r) = skills::read(&server, &uri, ctx.clone()).await {
                        return Ok(to_raw(&r?)?);
                    }
                }
                let (handler, vars) = match exact {
                    Some(e) => (e.handler.clone(), HashMap::new()),
                    None => {
                        let templates = inner.templates.read().expect("templates lock");
                        let found = templates.order.iter().find_map(|k| {
                            let t = &templates.items[k];
                            match_template(&t.parts, &uri).map(|v| (t.handler.clone(), v))
                        });
                        drop(templates);
                        found.ok_or_else(|| {
                            ErrorObject::new(RpcErrorCode::RESOURCE_NOT_FOUND, "Resource not found")
                                .with_data(serde_json::json!({ "uri": uri }))
                        })?
                    }
                };
                let r = handler(uri, vars, ctx).await?;
                Ok(to_raw(&r)?)
            }
            methods::RESOURCES_SUBSCRIBE | methods::RESOURCES_UNSUBSCRIBE
                if legacy && advertised.resources() =>
            {
                let UriParams { uri, .. } = from_params(p)?;
                let mut subs = self.subscriptions.lock().expect("subs lock");
                if method == methods::RESOURCES_SUBSCRIBE {
                    check_subscription(&subs, &uri, inner.max_subscriptions)?;
                    subs.insert(uri);
                } else {
                    subs.remove(&uri);
                }
                drop(subs);
                self.changed();
                Ok(to_raw(&EmptyResult {})?)
            }
            methods::PROMPTS_LIST if advertised.prompts() => {
                let page: PaginatedParams = from_params(p)?;
                let offset = decode_cursor(page.cursor.as_deref())?;
                let (items, next) = inner
                    .prompts
                    .read()
                    .expect("prompts lock")
                    .page(offset, inner.page_size);
                Ok(to_raw(&ListPromptsResult {
                    prompts: items.iter().map(|e| e.prompt.clone()).collect(),
                    next_cursor: next.map(encode_cursor),
                    meta: None,
                })?)
            }
            methods::PROMPTS_GET if advertised.prompts() => {
                let get: GetPromptParams = from_params(p)?;
                let entry = inner
                    .prompts
                    .read()
                    .expect("prompts lock")
                    .get(&get.name)
                    .ok_or_else(|| {
                        ErrorObject::invalid_params(format!("Unknown prompt: {}", get.name))
                    })?;
                let args = get.arguments.unwrap_or_default();
                for a in entry.prompt.arguments.iter().flatten() {
                    if a.required == Some(true) && !args.contains_key(&a.name) {
                        return Err(ErrorObject::invalid_params(format!(
                            "Missing required argument: {}",
                            a.name
                        )));
                    }
                }
                let r = (entry.handler)(args, ctx).await?;
                Ok(to_raw(&r)?)
            }
            methods::COMPLETION_COMPLETE if advertised.completions() => {
                let params: CompleteParams = from_params(p)?;
                let handler = inner.completion.read().expect("completion lock").clone();
                let Some(handler) = handler else {
                    return Err(ErrorObject::method_not_found(&method));
                };
                let mut c = handler(params, ctx)
                    .await
                    .map_err(HandlerError::into_error_object)?;
                if c.values.len() > 100 {
                    c.total.get_or_insert(c.values.len() as u64);
                    c.values.truncate(100);
                    c.has_more = Some(true);
                }
                Ok(to_raw(&CompleteResult::new(c))?)
            }
            methods::LOGGING_SET_LEVEL if legacy && advertised.logging() => {
                let SetLevelParams { level, .. } = from_params(p)?;
                *self.log_level.lock().expect("level lock") = Some(level);
                self.changed();
                Ok(to_raw(&EmptyResult {})?)
            }
            _ => Err(ErrorObject::method_not_found(&method)),
        }
    }

    fn initialize(&self, params: Option<&RawValue>) -> Result<Box<RawValue>, ErrorObject> {
        let init: InitializeParams = from_params(params)?;
        let mut slot = self.init.write().expect("init lock");
        if slot.is_some() {
            return Err(ErrorObject::new(
                RpcErrorCode::INVALID_REQUEST,
                "Invalid request: the session is already initialized",
            ));
        }
        let version = ProtocolVersion::negotiate(&init.protocol_version);
        *slot = Some((version.clone(), init.capabilities, init.client_info));
        drop(slot);
        if let Some(peer) = self.peer.get() {
            peer.set_batches_allowed(version.allows_batches());
            peer.set_revision(version.as_str());
        }
        let mut caps = self.server.capabilities();
        // The tasks extension is 2026-07-28's; a handshake session has the `tasks` capability.
        if let Some(e) = &mut caps.extensions {
            e.remove(crate::extensions::TASKS);
            if e.is_empty() {
                caps.extensions = None;
            }
        }
        self.advertised
            .store(Advertised::of(&caps).0, Ordering::Release);
        let inner = &self.server.inner;
        Ok(to_raw(&InitializeResult {
            protocol_version: version,
            capabilities: caps,
            server_info: inner.info.clone(),
            instructions: inner.instructions.clone(),
            meta: None,
        })?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_advertised_is_read_as_the_capabilities_say() {
        let same = |s: &Server| assert_eq!(s.advertised().0, Advertised::of(&s.capabilities()).0);
        let s = Server::builder("t", "1").build();
        same(&s);
        assert_eq!(s.advertised().0, 0);
        s.tool("t", "", |_: (), _: RequestCtx| async {
            HandlerResult::Ok("x")
        })
        .unwrap();
        same(&s);
        s.prompt("p", "", |_: (), _: RequestCtx| async {
            HandlerResult::Ok(String::new())
        })
        .unwrap();
        same(&s);
        s.resource(Resource::new("mem://a", "a"), |uri, _c| async move {
            HandlerResult::Ok(ReadResourceResult::text(uri, "A"))
        });
        same(&s);
        s.completion(|_: CompleteParams, _c| async { HandlerResult::Ok(Completion::default()) });
        same(&s);
        let all = Advertised::TOOLS
            | Advertised::PROMPTS
            | Advertised::RESOURCES
            | Advertised::COMPLETIONS;
        assert_eq!(s.advertised().0, all);
        let logs = Server::builder("t", "1").logging().build();
        same(&logs);
        assert_eq!(logs.advertised().0, Advertised::LOGGING);
    }

    /// The flat check admits only what the input schema's validator finds valid, and the
    /// schemas derived from structs of strings, numbers and booleans are flat (those with
    /// bounds, enums or nesting are not).
    #[test]
    fn what_a_flat_schema_admits_its_validator_finds_valid() {
        #[allow(dead_code)]
        #[derive(Deserialize, JsonSchema)]
        struct Plain {
            /// Text.
            text: String,
            n: Option<i64>,
            x: f64,
            on: bool,
        }
        #[allow(dead_code)]
        #[derive(Deserialize, JsonSchema)]
        struct Bounded {
            days: u8,
        }
        let (schema, _) = tool_arguments::<Plain>("p").unwrap();
        let flat = flat::FlatSchema::of(&schema).expect("flat");
        assert!(flat::FlatSchema::of(&tool_arguments::<Bounded>("b").unwrap().0).is_none());
        let mut strict = schema.clone();
        strict.insert("additionalProperties".into(), Value::Bool(false));
        let strict_flat = flat::FlatSchema::of(&strict).expect("flat");
        let validator = compile(&schema, "p", "input").unwrap();
        let strict_validator = compile(&strict, "p", "input").unwrap();
        let admitted = [
            r#"{"text":"a","x":1,"on":true}"#,
            r#"{"text":"a","n":null,"x":-1.5e3,"on":false}"#,
            r#"{"on":true,"x":0,"n":-3,"text":""}"#,
        ];
        let refused = [
            r#"{"text":"a","x":1}"#,
            r#"{"text":"a","x":1,"on":true,"y":1}"#,
            r#"{"text":"a","x":1,"on":true,"text":"b"}"#,
            r#"{"text":"a","x":1e400,"on":true}"#,
            r#"{"text":"a","n":1.0,"x":1,"on":true}"#,
            r#"{"text":1,"x":1,"on":true}"#,
            r#"{"text":"a","x":null,"on":true}"#,
            r#"{"text":"a","x":1,"on":"true"}"#,
            r#"[]"#,
        ];
        for text in admitted {
            assert!(flat.admits(text), "{text}");
            assert!(strict_flat.admits(text), "{text}");
            let v: Value = serde_json::from_str(text).unwrap();
            assert!(validation_errors(&validator, &v).is_empty(), "{text}");
            assert!(
                validation_errors(&strict_validator, &v).is_empty(),
                "{text}"
            );
        }
        for text in refused {
            assert!(!flat.admits(text), "{text}");
            assert!(!strict_flat.admits(text), "{text}");
        }
    }

    /// The pass that reads `_meta` is skipped only when params cannot have it: a key spelled
    /// with escapes still counts, and what it carries is read.
    #[test]
    fn only_params_that_cannot_name_meta_skip_its_pass() {
        assert!(!may_have_meta(
            r#"{"name":"echo","arguments":{"text":"meta"}}"#
        ));
        assert!(may_have_meta(r#"{"_meta":{"progressToken":1}}"#));
        assert!(may_have_meta(r#"{"a":{"_meta":1}}"#));
        let escaped = r#"{"\u005fmeta":{"progressToken":7},"name":"echo"}"#;
        assert!(may_have_meta(escaped));
        let m: MetaOnly = serde_json::from_str(escaped).unwrap();
        assert_eq!(
            m.meta.and_then(|m| m.progress_token),
            Some(RequestId::Number(7))
        );
    }

    #[test]
    fn cursors_are_opaque_and_checked() {
        assert_eq!(decode_cursor(Some(&encode_cursor(300))), Ok(300));
        assert_eq!(
            decode_cursor(Some("garbage")).unwrap_err().code,
            RpcErrorCode::INVALID_PARAMS
        );
    }
}

#[cfg(all(test, feature = "validation"))]
mod validation_tests {
    use super::*;
    use serde_json::json;

    fn compiled(schema: Value) -> Result<Validator, RegistrationError> {
        let Value::Object(schema) = schema else {
            panic!("not an object")
        };
        compile(&schema, "t", "input")
    }

    fn full_compiled(v: &Validator) -> bool {
        match v {
            Validator::Strict { full, .. } => full.get().is_some(),
            Validator::Full(_) => true,
        }
    }

    #[test]
    fn a_schema_in_the_profile_is_decided_by_it_and_worded_by_jsonschema() {
        let v = compiled(json!({
            "type": "object",
            "properties": {"a": {"type": "number"}, "s": {"type": "string", "maxLength": 2}},
            "required": ["a"],
            "additionalProperties": false
        }))
        .unwrap();
        assert!(matches!(v, Validator::Strict { .. }));
        assert!(validation_errors(&v, &json!({"a": 1.5, "s": "ok"})).is_empty());
        // No invalid instance yet: jsonschema has compiled nothing.
        assert!(!full_compiled(&v));
        assert_eq!(
            validation_errors(&v, &json!({"a": "x", "s": "long", "z": 1})),
            vec![
                "/a: \"x\" is not of type \"number\"".to_owned(),
                "/s: \"long\" is longer than 2 characters".to_owned(),
                "Additional properties are not allowed ('z' was unexpected)".to_owned(),
            ]
        );
        assert!(full_compiled(&v));
        assert_eq!(
            validation_errors(&v, &json!({})),
            vec!["\"a\" is a required property".to_owned()]
        );
    }

    #[test]
    fn an_instance_over_the_profiles_budgets_is_decided_by_jsonschema() {
        let v = compiled(json!({"type": "object"})).unwrap();
        let mut deep = json!(1);
        for _ in 0..100 {
            deep = json!([deep]);
        }
        assert!(validation_errors(&v, &json!({"a": deep})).is_empty());
        assert_eq!(
            validation_errors(&v, &json!([deep])),
            vec![format!("{} is not of type \"object\"", json!([deep]))]
        );
    }

    #[test]
    fn line_terminators_follow_ecma_262_inside_the_profile() {
        let v = compiled(json!({
            "type": "object",
            "properties": {"s": {"type": "string", "pattern": "^.$"}}
        }))
        .unwrap();
        assert!(validation_errors(&v, &json!({"s": "x"})).is_empty());
        // `.` matches no line terminator in ECMA-262; the profile's verdict decides.
        assert_eq!(validation_errors(&v, &json!({"s": "\n"})).len(), 1);
        assert_eq!(validation_errors(&v, &json!({"s": "\r"})).len(), 1);
    }

    #[test]
    fn other_schemas_are_compiled_by_jsonschema_and_refused_when_invalid() {
        let v = compiled(json!({
            "type": "object",
            "properties": {"p": {"$ref": "#/$defs/point"}},
            "$defs": {"point": {"type": "object", "required": ["x"]}}
        }))
        .unwrap();
        assert!(matches!(v, Validator::Full(_)));
        assert!(validation_errors(&v, &json!({"p": {"x": 1}})).is_empty());
        assert_eq!(
            validation_errors(&v, &json!({"p": {}})),
            vec!["/p: \"x\" is a required property".to_owned()]
        );
        let refused = compiled(json!({"type": "object", "properties": {"a": {"type": 5}}}));
        assert!(
            matches!(&refused, Err(RegistrationError::InvalidSchema { reason, .. }) if reason.starts_with("input schema: ")),
            "{:?}",
            refused.err()
        );
    }
}
