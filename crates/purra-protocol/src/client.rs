//! The MCP client: connect, handshake, catalogs kept in sync, typed calls, and the handlers that
//! answer the server's requests (sampling, elicitation, roots).

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use serde_json::value::RawValue;
use serde_json::Value;

use crate::error::Error;
use crate::jsonrpc::{from_params, to_raw, ErrorObject};
use crate::session::{
    self, BoxFuture, EngineConfig, Peer, RequestContext, RequestOptions, Service,
};
#[cfg(feature = "stdio")]
use crate::stdio::{ChildProcess, ExitHandle, StderrHandle, StdioCommand};
use crate::transport::Transport;
use crate::types::*;
use crate::version::ProtocolVersion;
#[cfg(not(feature = "stdio"))]
use std::convert::Infallible as ChildProcess;

mod call_params;
mod modern;
mod receiver;
mod skills;
mod tasks;
use call_params::{object_arguments, CallParams, IdempotencyMeta, ObjectOnly};
pub use modern::{CacheMode, ProtocolMode};
pub use receiver::ClientTaskOptions;
pub use skills::SkillContent;
pub use tasks::TaskSubscription;

/// Answers `sampling/createMessage`.
pub type SamplingHandler = Arc<
    dyn Fn(CreateMessageParams) -> BoxFuture<'static, Result<CreateMessageResult, ErrorObject>>
        + Send
        + Sync,
>;
/// Answers `elicitation/create`.
pub type ElicitationHandler = Arc<
    dyn Fn(ElicitParams) -> BoxFuture<'static, Result<ElicitResult, ErrorObject>> + Send + Sync,
>;

/// How a client connects: its identity, the revision it asks for, and the handlers it offers.
/// Capabilities are declared only for the handlers provided.
#[derive(Clone)]
pub struct ClientOptions {
    /// Sent in `initialize`.
    pub client_info: Implementation,
    /// The revision to ask for (default: the latest handshake revision).
    pub protocol_version: ProtocolVersion,
    /// Engine limits and the default request timeout.
    pub engine: EngineConfig,
    /// The most pages one catalog may take; more is a protocol error.
    pub max_catalog_pages: usize,
    /// Which revision to speak and how to find out (default: the handshake).
    pub mode: ProtocolMode,
    /// The most `input_required` rounds one 2026-07-28 call may take (default 10).
    pub max_input_rounds: usize,
    /// The most bytes one catalog's pages may take together (each page is also bounded by the
    /// frame size); more is a protocol error.
    pub max_catalog_bytes: usize,
    sampling: Option<SamplingHandler>,
    elicitation: Option<(ElicitationHandler, bool, bool)>,
    apply_elicitation_defaults: bool,
    roots: Option<Vec<Root>>,
    server_tasks: Option<ClientTaskOptions>,
    extensions: crate::extensions::Extensions,
}

impl std::fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientOptions")
            .field("client_info", &self.client_info)
            .field("protocol_version", &self.protocol_version)
            .field("mode", &self.mode)
            .field("sampling", &self.sampling.is_some())
            .field("elicitation", &self.elicitation.is_some())
            .field("roots", &self.roots)
            .field("server_tasks", &self.server_tasks)
            .finish()
    }
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            client_info: Implementation::new("purra", env!("CARGO_PKG_VERSION")),
            protocol_version: ProtocolVersion::LATEST_HANDSHAKE,
            engine: EngineConfig::default(),
            max_catalog_pages: 64,
            mode: ProtocolMode::Legacy,
            max_input_rounds: 10,
            max_catalog_bytes: 16 * 1024 * 1024,
            sampling: None,
            elicitation: None,
            apply_elicitation_defaults: true,
            roots: None,
            server_tasks: None,
            extensions: Default::default(),
        }
    }
}

impl ClientOptions {
    /// Sets the client's name and version.
    pub fn client_info(mut self, name: impl Into<String>, version: impl Into<String>) -> Self {
        self.client_info = Implementation::new(name, version);
        self
    }
    /// Sets the revision to ask for.
    pub fn protocol_version(mut self, v: impl Into<ProtocolVersion>) -> Self {
        self.protocol_version = v.into();
        self
    }
    /// Sets how the revision is chosen: the handshake, the auto probe, or a pinned modern
    /// revision.
    pub fn mode(mut self, mode: ProtocolMode) -> Self {
        self.mode = mode;
        self
    }
    /// Sets the bound on `input_required` rounds of one 2026-07-28 call.
    pub fn max_input_rounds(mut self, n: usize) -> Self {
        self.max_input_rounds = n;
        self
    }
    /// Sets the default request timeout.
    pub fn request_timeout(mut self, t: std::time::Duration) -> Self {
        self.engine.request_timeout = t;
        self
    }
    /// Answers `sampling/createMessage` with `f` (declares the sampling capability).
    pub fn on_sampling<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(CreateMessageParams) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<CreateMessageResult, ErrorObject>> + Send + 'static,
    {
        self.sampling = Some(Arc::new(move |p| Box::pin(f(p))));
        self
    }
    /// Answers `elicitation/create` with `f`, for form mode and, when `url` is true, URL mode
    /// (declares the elicitation capability).
    pub fn on_elicitation<F, Fut>(mut self, url: bool, f: F) -> Self
    where
        F: Fn(ElicitParams) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ElicitResult, ErrorObject>> + Send + 'static,
    {
        self.elicitation = Some((Arc::new(move |p| Box::pin(f(p))), true, url));
        self
    }
    /// Whether an accepted form elicitation gets the schema's defaults for fields the handler
    /// left out (default: true).
    pub fn apply_elicitation_defaults(mut self, yes: bool) -> Self {
        self.apply_elicitation_defaults = yes;
        self
    }
    /// Offers these roots (declares the roots capability with `listChanged`).
    pub fn roots(mut self, roots: Vec<Root>) -> Self {
        self.roots = Some(roots);
        self
    }
    /// Declares the extension `name` (reverse-DNS, `com.example/feature`) with its `settings`
    /// under `capabilities.extensions`; a malformed name is refused, before anything connects.
    pub fn extension(mut self, name: &str, settings: JsonObject) -> Result<Self, Error> {
        if !crate::extensions::is_valid_name(name) {
            return Err(Error::Protocol(format!(
                "{name:?} is not an extension name (reverse-DNS/name, such as com.example/feature)"
            )));
        }
        self.extensions.insert(name.to_owned(), settings);
        Ok(self)
    }
    /// Declares that this client renders MCP Apps (`io.modelcontextprotocol/ui` with the app
    /// MIME type; see [`crate::apps`]).
    pub fn apps(mut self) -> Self {
        self.extensions.insert(
            crate::apps::EXTENSION_ID.to_owned(),
            crate::apps::client_settings(),
        );
        self
    }

    /// Runs the server's task-augmented `sampling/createMessage` and `elicitation/create` as
    /// tasks of this client (2025-11-25 handshake sessions): declares
    /// `tasks.requests.sampling.createMessage` and `tasks.requests.elicitation.create` for the
    /// handlers given, with `tasks.list` and `tasks.cancel`. Such a request is answered at once
    /// with a task while its handler runs on; the server reads it with `tasks/get`,
    /// `tasks/result`, `tasks/list` and may `tasks/cancel` it, which drops the handler's future
    /// at once. Each connection keeps its tasks in a store bounded by `options`.
    pub fn run_server_tasks(mut self, options: ClientTaskOptions) -> Self {
        self.server_tasks = Some(options);
        self
    }

    /// The `tasks` capability at revision `v`: only in a 2025-11-25 or later handshake revision,
    /// only when opted in, and only for the request kinds this client has handlers for.
    fn tasks_capability(&self, v: &str) -> Option<JsonObject> {
        if self.server_tasks.is_none()
            || crate::modern::is_modern(v)
            || v < ProtocolVersion::V2025_11_25.as_str()
        {
            return None;
        }
        let mut requests = JsonObject::new();
        if self.sampling.is_some() {
            requests.insert("sampling".into(), serde_json::json!({"createMessage": {}}));
        }
        if self.elicitation.is_some() {
            requests.insert("elicitation".into(), serde_json::json!({"create": {}}));
        }
        if requests.is_empty() {
            return None;
        }
        Some(obj(serde_json::json!({
            "list": {},
            "cancel": {},
            "requests": requests,
        })))
    }

    fn capabilities(&self) -> ClientCapabilities {
        self.capabilities_at(&self.protocol_version)
    }

    /// The capabilities declared at revision `v` (elicitation's form/URL split is 2025-11-25's).
    fn capabilities_at(&self, v: &str) -> ClientCapabilities {
        let modern_elicitation =
            v == ProtocolVersion::V2025_11_25.as_str() || crate::modern::is_modern(v);
        ClientCapabilities {
            roots: self
                .roots
                .as_ref()
                .map(|_| obj(serde_json::json!({"listChanged": true}))),
            sampling: self.sampling.as_ref().map(|_| JsonObject::new()),
            elicitation: self.elicitation.as_ref().map(|(_, form, url)| {
                if !modern_elicitation {
                    return JsonObject::new();
                }
                let mut o = JsonObject::new();
                if *form {
                    o.insert("form".into(), serde_json::json!({}));
                }
                if *url {
                    o.insert("url".into(), serde_json::json!({}));
                }
                o
            }),
            experimental: None,
            tasks: self.tasks_capability(v),
            extensions: (!self.extensions.is_empty()).then(|| self.extensions.clone()),
        }
    }
}

fn obj(v: Value) -> JsonObject {
    match v {
        Value::Object(o) => o,
        _ => JsonObject::new(),
    }
}

/// A notification listener.
type Listener = Arc<dyn Fn(&Value) + Send + Sync>;

struct Catalog<T> {
    items: RwLock<(u64, Arc<Vec<T>>)>,
    generation: AtomicU64,
}

impl<T> Default for Catalog<T> {
    fn default() -> Self {
        Catalog {
            items: RwLock::new((0, Arc::new(Vec::new()))),
            generation: AtomicU64::new(0),
        }
    }
}

impl<T> Catalog<T> {
    fn get(&self) -> Arc<Vec<T>> {
        self.items.read().expect("catalog lock").1.clone()
    }
    fn begin(&self) -> u64 {
        self.generation.fetch_add(1, Ordering::Relaxed) + 1
    }
    fn store(&self, generation: u64, items: Vec<T>) {
        let mut slot = self.items.write().expect("catalog lock");
        if generation > slot.0 {
            *slot = (generation, Arc::new(items));
        }
    }
}

/// The refetches of one catalog that `list_changed` asks for: at most one runs, and at most one
/// more is owed (every notification that arrived after the running one started).
#[derive(Default)]
struct Refetch {
    /// `list_changed` notifications seen on arrival (in the reader).
    requested: u64,
    /// How many of them the refetch that started last covers.
    covered: u64,
    running: bool,
    /// The params of the latest notification, for the listeners.
    params: Value,
}

/// Which catalog a `list_changed` is about.
#[derive(Clone, Copy)]
enum Kind {
    Tools,
    Resources,
    Prompts,
}

impl Kind {
    fn of(method: &str) -> Option<Kind> {
        match method {
            methods::TOOLS_LIST_CHANGED => Some(Kind::Tools),
            methods::RESOURCES_LIST_CHANGED => Some(Kind::Resources),
            methods::PROMPTS_LIST_CHANGED => Some(Kind::Prompts),
            _ => None,
        }
    }
}

struct ClientService {
    options: ClientOptions,
    /// Tools, resources (with templates), prompts.
    refetch: [Mutex<Refetch>; 3],
    roots: RwLock<Vec<Root>>,
    tools: Catalog<Tool>,
    resources: Catalog<Resource>,
    templates: Catalog<ResourceTemplate>,
    prompts: Catalog<Prompt>,
    /// The Skills extension's listing, when the server declares it.
    skills: Catalog<crate::skills::Skill>,
    /// Whether the server declared the Skills extension (set before the catalogs are fetched).
    skills_declared: std::sync::atomic::AtomicBool,
    listeners: Mutex<HashMap<String, Vec<(u64, Listener)>>>,
    /// Listeners called on arrival, before any refetch.
    early_listeners: Mutex<HashMap<String, Vec<(u64, Listener)>>>,
    next_listener: AtomicU64,
    /// Each tool's output validator, looked up on every call: by a seeded fast hash (the ids'
    /// maps' own), not SipHash.
    #[cfg(feature = "validation")]
    output_validators:
        Mutex<HashMap<String, Option<Arc<jsonschema::Validator>>, foldhash::fast::RandomState>>,
    /// Set once the connection speaks 2026-07-28.
    modern: OnceLock<Arc<modern::Modern>>,
    /// Whether the transport is Streamable HTTP (where `x-mcp-header` rules apply).
    http: bool,
    /// The tasks this client runs for the server, once a handshake declared them.
    receiver: OnceLock<Arc<receiver::Receiver>>,
}

impl ClientService {
    /// Sends a request in the connection's era: as is in a handshake revision; with the
    /// envelope, the headers, the cache and the `input_required` rounds in 2026-07-28.
    async fn call(
        self: &Arc<Self>,
        peer: &Peer,
        method: &str,
        params: &(impl serde::Serialize + ?Sized),
        options: RequestOptions,
        cache: CacheMode,
    ) -> Result<Box<RawValue>, Error> {
        match self.modern.get() {
            Some(m) => modern::call(self, m, peer, method, params, options, cache).await,
            None => peer.request_serialized(method, params, options).await,
        }
    }

    /// [`call`](Self::call) with a typed result.
    async fn call_typed<R: serde::de::DeserializeOwned + Send + 'static>(
        self: &Arc<Self>,
        peer: &Peer,
        method: &str,
        params: &(impl serde::Serialize + ?Sized),
        options: RequestOptions,
        cache: CacheMode,
    ) -> Result<R, Error> {
        // Over a handshake-era connection the result may be decoded as its frame is read.
        let raw = match self.modern.get() {
            Some(_) => self.call(peer, method, params, options, cache).await?,
            None => match peer
                .request_serialized_typed::<_, R>(method, params, options)
                .await?
            {
                Ok(result) => return Ok(result),
                Err(raw) => raw,
            },
        };
        serde_json::from_str(raw.get())
            .map_err(|e| Error::Protocol(format!("invalid {method} result: {e}")))
    }

    fn fan_out_early(&self, method: &str, params: &Value) {
        let ls: Vec<Listener> = self
            .early_listeners
            .lock()
            .expect("listeners lock")
            .get(method)
            .map(|v| v.iter().map(|(_, l)| l.clone()).collect())
            .unwrap_or_default();
        for l in ls {
            l(params);
        }
    }

    fn fan_out(&self, method: &str, params: &Value) {
        let ls: Vec<Listener> = self
            .listeners
            .lock()
            .expect("listeners lock")
            .get(method)
            .map(|v| v.iter().map(|(_, l)| l.clone()).collect())
            .unwrap_or_default();
        for l in ls {
            l(params);
        }
    }
}

impl Service for ClientService {
    const SIDE: &'static str = "client";

    fn notification_received(&self, method: &str, params: Option<&RawValue>) {
        if let Some(kind) = Kind::of(method) {
            self.refetch[kind as usize]
                .lock()
                .expect("refetch lock")
                .requested += 1;
        }
        let has_listeners = self
            .early_listeners
            .lock()
            .expect("listeners lock")
            .get(method)
            .is_some_and(|v| !v.is_empty());
        if has_listeners {
            let value: Value = params
                .and_then(|p| serde_json::from_str(p.get()).ok())
                .unwrap_or(Value::Null);
            self.fan_out_early(method, &value);
        }
    }

    fn request(
        self: &Arc<Self>,
        ctx: RequestContext,
        method: String,
        params: Option<Box<RawValue>>,
    ) -> BoxFuture<'static, crate::session::HandlerOutput> {
        let answer = match self.receiver.get() {
            Some(r) => match receiver::route(self, r, &ctx.peer, &method, params) {
                Ok(task) => task,
                Err(params) => self.answer(method, params),
            },
            None => self.answer(method, params),
        };
        // A client's answers are raw results; the engine writes their frames.
        Box::pin(async move { answer.await.map(crate::jsonrpc::Answer::Raw) })
    }

    fn notification(
        self: &Arc<Self>,
        peer: &Peer,
        method: String,
        params: Option<Box<RawValue>>,
    ) -> BoxFuture<'static, ()> {
        self.handle_notification(peer, method, params)
    }
}

impl ClientService {
    /// Answers a server's request, or (2026-07-28) one input request of an `input_required`
    /// result: the same handlers in both eras.
    fn answer(
        self: &Arc<Self>,
        method: String,
        params: Option<Box<RawValue>>,
    ) -> BoxFuture<'static, Result<Box<RawValue>, ErrorObject>> {
        let this = self.clone();
        Box::pin(async move {
            match method.as_str() {
                methods::PING => Ok(to_raw(&EmptyResult {})?),
                methods::SAMPLING_CREATE_MESSAGE => {
                    let Some(h) = this.options.sampling.clone() else {
                        return Err(ErrorObject::method_not_found(&method));
                    };
                    let p: CreateMessageParams = from_params(params.as_deref())?;
                    Ok(to_raw(&h(p).await?)?)
                }
                methods::ELICITATION_CREATE => {
                    let Some((h, _, url)) = this.options.elicitation.clone() else {
                        return Err(ErrorObject::method_not_found(&method));
                    };
                    let p: ElicitParams = from_params(params.as_deref())?;
                    if p.is_url_mode() && !url {
                        return Err(ErrorObject::invalid_params(
                            "URL-mode elicitation is not supported by this client",
                        ));
                    }
                    let schema = p.requested_schema.clone();
                    let mut res = h(p).await?;
                    if this.options.apply_elicitation_defaults {
                        apply_defaults(&mut res, schema.as_ref());
                    }
                    Ok(to_raw(&res)?)
                }
                methods::ROOTS_LIST if this.options.roots.is_some() => {
                    let roots = this.roots.read().expect("roots lock").clone();
                    Ok(to_raw(&ListRootsResult::new(roots))?)
                }
                _ => Err(ErrorObject::method_not_found(&method)),
            }
        })
    }

    fn handle_notification(
        self: &Arc<Self>,
        peer: &Peer,
        method: String,
        params: Option<Box<RawValue>>,
    ) -> BoxFuture<'static, ()> {
        let this = self.clone();
        let peer = peer.clone();
        Box::pin(async move {
            let value: Value = params
                .as_deref()
                .and_then(|p| serde_json::from_str(p.get()).ok())
                .unwrap_or(Value::Null);
            if let Some(m) = this.modern.get() {
                m.invalidate(&method, Some(&value));
                if method == crate::modern::methods::SUBSCRIPTIONS_ACKNOWLEDGED {
                    m.acknowledged(&value);
                }
            }
            let Some(kind) = Kind::of(&method) else {
                this.fan_out(&method, &value);
                return;
            };
            {
                let mut state = this.refetch[kind as usize].lock().expect("refetch lock");
                state.params = value;
                if state.running || state.requested == state.covered {
                    // The running refetch sees this one when it ends; or one that started after
                    // it arrived already covers it.
                    return;
                }
                state.running = true;
            }
            // Refetch off the notification queue (its responses arrive through the same engine),
            // then tell the listeners.
            tokio::spawn(refetch_loop(this, peer, kind, method));
        })
    }
}

/// Acts as if the server had sent `list_changed` for each kind `filter` follows: early
/// listeners see it at once, the catalog is refetched, then the listeners run. For what may
/// have changed unseen (a subscription that was reopened).
fn synthesize_list_changed(
    service: &Arc<ClientService>,
    peer: &Peer,
    filter: &crate::modern::SubscriptionFilter,
) {
    for method in followed_lists(filter) {
        service.notification_received(method, None);
        tokio::spawn(service.handle_notification(peer, method.to_owned(), None));
    }
}

/// The `list_changed` methods of the lists `filter` follows.
fn followed_lists(
    filter: &crate::modern::SubscriptionFilter,
) -> impl Iterator<Item = &'static str> {
    [
        (filter.tools_list_changed, methods::TOOLS_LIST_CHANGED),
        (filter.prompts_list_changed, methods::PROMPTS_LIST_CHANGED),
        (
            filter.resources_list_changed,
            methods::RESOURCES_LIST_CHANGED,
        ),
    ]
    .into_iter()
    .filter(|(on, _)| *on == Some(true))
    .map(|(_, method)| method)
}

/// Tells the early listeners ([`Connection::on_received`]) of each kind `filter` follows that
/// the list may change unseen from now on (the subscription ended): they hear a `list_changed`
/// with null params; the catalogs are refetched when the subscription reopens.
fn signal_unfollowed(service: &ClientService, filter: &crate::modern::SubscriptionFilter) {
    for method in followed_lists(filter) {
        service.fan_out_early(method, &Value::Null);
    }
}

/// Refetches a catalog until no `list_changed` arrived after the last refetch started; the
/// listeners run after each refetch. A flood of notifications costs at most two refetches at a
/// time: the running one and one more.
async fn refetch_loop(this: Arc<ClientService>, peer: Peer, kind: Kind, method: String) {
    loop {
        {
            let mut state = this.refetch[kind as usize].lock().expect("refetch lock");
            state.covered = state.requested;
        }
        let _ = match kind {
            Kind::Tools => refresh_tools(&this, &peer).await.map(drop),
            Kind::Resources => {
                let r = refresh_resources(&this, &peer).await.map(drop);
                let _ = refresh_templates(&this, &peer).await;
                // The Skills extension has no notification of its own: its skills are resources.
                if this.skills_declared.load(Ordering::Acquire) {
                    let _ = skills::refresh(&this, &peer).await;
                }
                r
            }
            Kind::Prompts => refresh_prompts(&this, &peer).await.map(drop),
        };
        let params = {
            let mut state = this.refetch[kind as usize].lock().expect("refetch lock");
            if state.requested == state.covered || peer.is_closed() {
                state.running = false;
            }
            (state.running, state.params.clone())
        };
        this.fan_out(&method, &params.1);
        if !params.0 {
            return;
        }
    }
}

/// Fills fields the user left out of an accepted form with the schema's defaults.
fn apply_defaults(res: &mut ElicitResult, schema: Option<&JsonObject>) {
    if res.action != ElicitAction::Accept {
        return;
    }
    let Some(props) = schema
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object)
    else {
        return;
    };
    let content = res.content.get_or_insert_with(JsonObject::new);
    for (name, prop) in props {
        if let Some(default) = prop.get("default") {
            content
                .entry(name.clone())
                .or_insert_with(|| default.clone());
        }
    }
}

async fn fetch_all<R, T>(
    s: &Arc<ClientService>,
    peer: &Peer,
    method: &str,
    options: &ClientOptions,
    split: impl Fn(R) -> (Vec<T>, Option<String>),
) -> Result<Vec<T>, Error>
where
    R: serde::de::DeserializeOwned,
{
    let max_pages = options.max_catalog_pages;
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    let mut bytes = 0usize;
    for _ in 0..max_pages {
        let raw = s
            .call(
                peer,
                method,
                &PaginatedParams::new(cursor.take()),
                RequestOptions::default(),
                CacheMode::Refresh,
            )
            .await?;
        bytes += raw.get().len();
        if bytes > options.max_catalog_bytes {
            return Err(Error::Protocol(format!(
                "{method} exceeds {} bytes over its pages",
                options.max_catalog_bytes
            )));
        }
        let page: R = serde_json::from_str(raw.get())
            .map_err(|e| Error::Protocol(format!("invalid {method} result: {e}")))?;
        drop(raw);
        let (mut got, next) = split(page);
        items.append(&mut got);
        match next {
            Some(c) => cursor = Some(c),
            None => return Ok(items),
        }
    }
    Err(Error::Protocol(format!(
        "{method} did not end within {max_pages} pages"
    )))
}

async fn refresh_tools(s: &Arc<ClientService>, peer: &Peer) -> Result<Arc<Vec<Tool>>, Error> {
    let gen = s.tools.begin();
    let items = fetch_all(
        s,
        peer,
        methods::TOOLS_LIST,
        &s.options,
        |r: ListToolsResult| (r.tools, r.next_cursor),
    )
    .await?;
    // Over Streamable HTTP in 2026-07-28 a tool with invalid x-mcp-header annotations cannot be
    // called correctly: it is not offered.
    let items = if s.http && s.modern.get().is_some() {
        modern::drop_invalid_header_tools(items)
    } else {
        items
    };
    #[cfg(feature = "validation")]
    s.output_validators.lock().expect("validators lock").clear();
    s.tools.store(gen, items);
    Ok(s.tools.get())
}

async fn refresh_resources(
    s: &Arc<ClientService>,
    peer: &Peer,
) -> Result<Arc<Vec<Resource>>, Error> {
    let gen = s.resources.begin();
    let items = fetch_all(
        s,
        peer,
        methods::RESOURCES_LIST,
        &s.options,
        |r: ListResourcesResult| (r.resources, r.next_cursor),
    )
    .await?;
    s.resources.store(gen, items);
    Ok(s.resources.get())
}

async fn refresh_templates(
    s: &Arc<ClientService>,
    peer: &Peer,
) -> Result<Arc<Vec<ResourceTemplate>>, Error> {
    let gen = s.templates.begin();
    let items = match fetch_all(
        s,
        peer,
        methods::RESOURCES_TEMPLATES_LIST,
        &s.options,
        |r: ListResourceTemplatesResult| (r.resource_templates, r.next_cursor),
    )
    .await
    {
        Ok(items) => items,
        // Servers that advertise resources without templates answer -32601; that is no templates.
        Err(Error::Rpc(e)) if e.code == crate::jsonrpc::RpcErrorCode::METHOD_NOT_FOUND => {
            Vec::new()
        }
        Err(e) => return Err(e),
    };
    s.templates.store(gen, items);
    Ok(s.templates.get())
}

async fn refresh_prompts(s: &Arc<ClientService>, peer: &Peer) -> Result<Arc<Vec<Prompt>>, Error> {
    let gen = s.prompts.begin();
    let items = fetch_all(
        s,
        peer,
        methods::PROMPTS_LIST,
        &s.options,
        |r: ListPromptsResult| (r.prompts, r.next_cursor),
    )
    .await?;
    s.prompts.store(gen, items);
    Ok(s.prompts.get())
}

/// Connects to MCP servers.
#[derive(Debug, Clone, Copy)]
pub struct Client;

impl Client {
    /// Spawns `command` and connects to it over stdio.
    #[cfg(feature = "stdio")]
    pub async fn connect_stdio(
        command: StdioCommand,
        options: ClientOptions,
    ) -> Result<Connection, Error> {
        let transport = command
            .spawn()
            .map_err(|e| Error::Transport(format!("could not start {:?}: {e}", command.program)))?;
        Self::connect(transport, options).await
    }

    /// Connects to an MCP server over HTTP (`http://` or `https://`): Streamable HTTP, falling
    /// back to the HTTP+SSE transport of 2024-11-05 when the server answers the `initialize`
    /// POST as an HTTP+SSE server does (see [`HttpTransport`](crate::http::HttpTransport),
    /// which [`HttpClientOptions::transport`](crate::http::HttpClientOptions::transport) sets).
    #[cfg(feature = "http-client")]
    pub async fn connect_http(
        url: &str,
        http: crate::http::HttpClientOptions,
        options: ClientOptions,
    ) -> Result<Connection, Error> {
        #[cfg(feature = "legacy-sse")]
        match http.transport {
            crate::http::HttpTransport::Sse => return Self::connect_sse(url, http, options).await,
            crate::http::HttpTransport::Auto => {
                let transport = crate::http::connect(url, http.clone())?;
                return match Self::connect_inner(transport, options.clone(), true).await {
                    Err(e) if crate::http::legacy_client::means_legacy(&e) => {
                        tracing::debug!(%e, "Streamable HTTP refused; trying HTTP+SSE");
                        match Self::connect_sse(url, http, options).await {
                            Ok(conn) => Ok(conn),
                            Err(legacy) => Err(crate::http::legacy_client::both_failed(e, &legacy)),
                        }
                    }
                    other => other,
                };
            }
            _ => {}
        }
        let transport = crate::http::connect(url, http)?;
        Self::connect_inner(transport, options, true).await
    }

    /// Connects to an HTTP+SSE server of 2024-11-05 whose event stream is at `url`; see
    /// [`http::connect_sse`](crate::http::connect_sse).
    ///
    /// The transport carries the handshake revisions only: [`ProtocolMode::Auto`] speaks the
    /// handshake here without probing, and a modern revision pinned is refused before connecting.
    #[cfg(all(feature = "http-client", feature = "legacy-sse"))]
    pub async fn connect_sse(
        url: &str,
        http: crate::http::HttpClientOptions,
        mut options: ClientOptions,
    ) -> Result<Connection, Error> {
        match &options.mode {
            ProtocolMode::Pinned(v) if crate::modern::is_modern(v.as_str()) => {
                return Err(Error::Protocol(format!(
                    "{} is not spoken over the HTTP+SSE transport, which carries the handshake revisions only",
                    v.as_str()
                )))
            }
            ProtocolMode::Auto => options.mode = ProtocolMode::Legacy,
            _ => {}
        }
        let transport = crate::http::connect_sse(url, http).await?;
        Self::connect_inner(transport, options, false).await
    }

    /// Connects to a WebSocket server at `url` (`ws://` or `wss://`, the `mcp` subprotocol); see
    /// [`ws::connect`](crate::ws::connect).
    #[cfg(feature = "ws")]
    pub async fn connect_ws(
        url: &str,
        ws_options: crate::ws::WsClientOptions,
        options: ClientOptions,
    ) -> Result<Connection, Error> {
        let transport = crate::ws::connect(url, ws_options).await?;
        Self::connect(transport, options).await
    }

    /// Connects over a started transport: settles the revision as `options.mode` says (the
    /// `initialize` handshake; or 2026-07-28 with `server/discover`, probed in auto mode), then
    /// fetches every page of the catalogs the server advertises. In 2026-07-28 a
    /// `subscriptions/listen` stream for the lists the server says can change is opened first.
    pub async fn connect(
        transport: Transport,
        options: ClientOptions,
    ) -> Result<Connection, Error> {
        Self::connect_inner(transport, options, false).await
    }

    async fn connect_inner(
        mut transport: Transport,
        options: ClientOptions,
        http: bool,
    ) -> Result<Connection, Error> {
        let child = transport.child.take();
        let service = Arc::new(ClientService {
            roots: RwLock::new(options.roots.clone().unwrap_or_default()),
            options: options.clone(),
            refetch: Default::default(),
            tools: Catalog::default(),
            resources: Catalog::default(),
            templates: Catalog::default(),
            prompts: Catalog::default(),
            skills: Catalog::default(),
            skills_declared: std::sync::atomic::AtomicBool::new(false),
            listeners: Mutex::new(HashMap::new()),
            early_listeners: Mutex::new(HashMap::new()),
            next_listener: AtomicU64::new(0),
            #[cfg(feature = "validation")]
            output_validators: Mutex::new(HashMap::default()),
            modern: OnceLock::new(),
            http,
            receiver: OnceLock::new(),
        });
        let (peer, _join) = session::start(transport, service.clone(), options.engine.clone());
        // Read before the task below may take the child (a command that ends at once).
        #[cfg(feature = "stdio")]
        let (pid, stderr, exit) = (
            child.as_ref().and_then(ChildProcess::pid),
            child.as_ref().map(ChildProcess::stderr_handle),
            child.as_ref().map(ChildProcess::exit_handle),
        );
        let child = Arc::new(Mutex::new(child));
        // Whoever ends the connection (the peer exiting, close, drop), the child is reaped.
        tokio::spawn({
            let peer = peer.clone();
            let child = child.clone();
            async move {
                peer.closed().await;
                let taken = child.lock().expect("child lock").take();
                #[cfg(feature = "stdio")]
                if let Some(mut c) = taken {
                    c.shutdown().await;
                }
                #[cfg(not(feature = "stdio"))]
                let _ = taken;
            }
        });
        let conn = Connection {
            peer,
            service,
            init: InitializeResult::new(
                ProtocolVersion::new(""),
                ServerCapabilities::default(),
                Implementation::new("", ""),
            ),
            child,
            #[cfg(feature = "stdio")]
            pid,
            #[cfg(feature = "stdio")]
            stderr,
            #[cfg(feature = "stdio")]
            exit,
            discover: None,
        };
        conn.settle(options).await
    }
}

/// What a server had not answered when it failed after the handshake: the catalogs' pages.
const CATALOG_LISTING: &str = "the listing of its catalogs";

/// A connection to one MCP server. Dropping it closes the connection and releases its child.
pub struct Connection {
    peer: Peer,
    service: Arc<ClientService>,
    /// The handshake's result, or (2026-07-28) the same facts from `server/discover`.
    init: InitializeResult,
    /// The `server/discover` result, in 2026-07-28.
    discover: Option<crate::modern::DiscoverResult>,
    child: Arc<Mutex<Option<ChildProcess>>>,
    #[cfg(feature = "stdio")]
    pid: Option<u32>,
    #[cfg(feature = "stdio")]
    stderr: Option<StderrHandle>,
    #[cfg(feature = "stdio")]
    exit: Option<ExitHandle>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("server_info", &self.init.server_info)
            .field("protocol_version", &self.init.protocol_version)
            .finish()
    }
}

impl Connection {
    /// Settles the revision as `options.mode` says, then fetches the catalogs.
    async fn settle(mut self, options: ClientOptions) -> Result<Connection, Error> {
        let before = match &options.mode {
            ProtocolMode::Pinned(v) if v.is_modern() => crate::modern::methods::DISCOVER,
            _ => methods::INITIALIZE,
        };
        let outcome = match options.mode.clone() {
            ProtocolMode::Legacy => Ok(None),
            ProtocolMode::Pinned(v) if v.is_modern() => self
                .pinned_discover(&options, v.as_str().to_owned())
                .await
                .map(Some),
            // Only a modern revision can be pinned; a handshake revision is legacy mode's.
            ProtocolMode::Pinned(v) => Err(Error::UnsupportedProtocolVersion(v)),
            ProtocolMode::Auto => self.auto(&options).await,
        };
        match outcome {
            Ok(Some((v, d))) => self.adopt(&options, v, d).await,
            Ok(None) => self.handshake(options).await,
            Err(e) => Err(self.fail(e, before).await),
        }
    }

    /// Closes a connection whose setup failed. When the transport broke because the command
    /// serving it ended on its own, how it ended is the error ([`Error::ProcessExited`]), with
    /// what it had not answered (`before`).
    async fn fail(&self, e: Error, before: &str) -> Error {
        self.close().await;
        #[cfg(feature = "stdio")]
        if matches!(e, Error::ConnectionClosed | Error::Transport(_)) {
            if let Some(mut exit) = self.exit.clone() {
                // Whoever reaps the child (this close, or the task that follows the peer)
                // records its status at once: it has already ended.
                if let Some(status) = exit.status(std::time::Duration::from_secs(1)).await {
                    return Error::ProcessExited {
                        status: crate::stdio::describe_exit(status),
                        before: before.to_owned(),
                    };
                }
            }
        }
        #[cfg(not(feature = "stdio"))]
        let _ = before;
        e
    }

    /// `server/discover` at the pinned revision; an error is the connection's error.
    async fn pinned_discover(
        &self,
        options: &ClientOptions,
        v: String,
    ) -> Result<(String, crate::modern::DiscoverResult), Error> {
        let m = modern::Modern::new(
            v.clone(),
            options.client_info.clone(),
            options.capabilities_at(&v),
            0,
        );
        let raw = modern::discover(&m, &self.peer, options.engine.request_timeout).await?;
        let d = serde_json::from_str(raw.get())
            .map_err(|e| Error::Protocol(format!("invalid server/discover result: {e}")))?;
        Ok((v, d))
    }

    /// The auto mode: the probe, and the handshake when it finds no modern server. A
    /// handshake refused with -32022 (a server that took the probe late and chose the modern
    /// revision) is modern evidence: probed once more.
    async fn auto(
        &mut self,
        options: &ClientOptions,
    ) -> Result<Option<(String, crate::modern::DiscoverResult)>, Error> {
        let newest = ProtocolVersion::MODERN[ProtocolVersion::MODERN.len() - 1].as_str();
        let timeout = options.engine.request_timeout.min(modern::PROBE_TIMEOUT);
        match modern::probe(
            &options.client_info,
            &options.capabilities_at(newest),
            &self.peer,
            timeout,
        )
        .await?
        {
            modern::Probe::Modern(v, d) => Ok(Some((v, *d))),
            modern::Probe::Legacy => match self.initialize(options).await {
                Ok(()) => Ok(None),
                Err(Error::Rpc(e))
                    if e.code == crate::jsonrpc::RpcErrorCode::UNSUPPORTED_PROTOCOL_VERSION =>
                {
                    match modern::mutual_versions(&e) {
                        Some((mutual, _)) if !mutual.is_empty() => self
                            .pinned_discover(options, mutual[mutual.len() - 1].clone())
                            .await
                            .map(Some),
                        _ => Err(Error::Rpc(e)),
                    }
                }
                Err(e) => Err(e),
            },
        }
    }

    /// Speaks the modern revision `v` from now on: opens the subscription for the lists the
    /// server says can change (and waits for its acknowledgment), then fetches the catalogs.
    async fn adopt(
        mut self,
        options: &ClientOptions,
        v: String,
        d: crate::modern::DiscoverResult,
    ) -> Result<Connection, Error> {
        let m = Arc::new(modern::Modern::new(
            v.clone(),
            options.client_info.clone(),
            options.capabilities_at(&v),
            options.max_input_rounds,
        ));
        let _ = self.service.modern.set(m.clone());
        let mut init = InitializeResult::new(
            ProtocolVersion::new(v),
            d.capabilities.clone(),
            d.server_info()
                .unwrap_or_else(|| Implementation::new("", "")),
        );
        init.instructions = d.instructions.clone();
        self.peer.set_revision(init.protocol_version.as_str());
        self.init = init;
        self.discover = Some(d);
        let caps = self.init.capabilities.clone();
        let flag = |o: &Option<JsonObject>| {
            o.as_ref()
                .and_then(|o| o.get("listChanged"))
                .and_then(Value::as_bool)
                .filter(|b| *b)
        };
        let filter = crate::modern::SubscriptionFilter {
            tools_list_changed: flag(&caps.tools),
            prompts_list_changed: flag(&caps.prompts),
            resources_list_changed: flag(&caps.resources),
            resource_subscriptions: None,
            task_ids: None,
        };
        if filter.is_empty() {
            // No list can change: there is nothing to follow.
            m.following.store(true, Ordering::SeqCst);
        } else {
            let seen_before = m.listens.load(Ordering::Relaxed);
            modern::keep_listening(self.service.clone(), m.clone(), self.peer.clone(), filter);
            // The catalogs are fetched once the stream is open, so no change is missed between.
            let deadline = tokio::time::Instant::now() + options.engine.request_timeout;
            while m.listens.load(Ordering::Relaxed) == seen_before
                && tokio::time::Instant::now() < deadline
                && !self.peer.is_closed()
            {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        }
        if let Err(e) = self.fetch_catalogs().await {
            return Err(self.fail(e, CATALOG_LISTING).await);
        }
        Ok(self)
    }

    /// `initialize` and `notifications/initialized` (the handshake without the catalogs).
    async fn initialize(&mut self, options: &ClientOptions) -> Result<(), Error> {
        let params = InitializeParams::new(
            options.protocol_version.clone(),
            options.capabilities(),
            options.client_info.clone(),
        );
        let init: InitializeResult = self
            .peer
            .request(methods::INITIALIZE, &params, RequestOptions::default())
            .await?;
        if !init.protocol_version.is_handshake() {
            return Err(Error::UnsupportedProtocolVersion(init.protocol_version));
        }
        self.peer
            .set_batches_allowed(init.protocol_version.allows_batches());
        // The server may ask for tasks once it has our capabilities: before `initialized`.
        if let Some(t) = options.server_tasks {
            if options
                .tasks_capability(init.protocol_version.as_str())
                .is_some()
            {
                let _ = self
                    .service
                    .receiver
                    .set(Arc::new(receiver::Receiver::new(t)));
            }
        }
        self.peer.set_revision(init.protocol_version.as_str());
        self.init = init;
        self.peer.notify_empty(methods::INITIALIZED).await
    }

    /// The handshake, then the catalogs.
    async fn handshake(mut self, options: ClientOptions) -> Result<Connection, Error> {
        // (The auto mode has already run `initialize` when it fell back.)
        let initialized = !self.init.protocol_version.is_empty();
        let mut r = if initialized {
            Ok(())
        } else {
            self.initialize(&options).await
        };
        if r.is_ok() {
            r = self.fetch_catalogs().await;
        }
        match r {
            Ok(()) => Ok(self),
            Err(e) => {
                let before = if self.init.protocol_version.is_empty() {
                    methods::INITIALIZE
                } else {
                    CATALOG_LISTING
                };
                Err(self.fail(e, before).await)
            }
        }
    }

    /// Fetches every page of the catalogs the server advertises.
    async fn fetch_catalogs(&self) -> Result<(), Error> {
        let caps = &self.init.capabilities;
        let s = &self.service;
        let p = &self.peer;
        let serves_skills = self.serves_skills();
        s.skills_declared.store(serves_skills, Ordering::Release);
        let (t, r, rt, pr, sk) = tokio::join!(
            async {
                if caps.tools.is_some() {
                    refresh_tools(s, p).await.map(drop)
                } else {
                    Ok(())
                }
            },
            async {
                if caps.resources.is_some() {
                    refresh_resources(s, p).await.map(drop)
                } else {
                    Ok(())
                }
            },
            async {
                if caps.resources.is_some() {
                    refresh_templates(s, p).await.map(drop)
                } else {
                    Ok(())
                }
            },
            async {
                if caps.prompts.is_some() {
                    refresh_prompts(s, p).await.map(drop)
                } else {
                    Ok(())
                }
            },
            async {
                if serves_skills {
                    skills::refresh(s, p).await.map(drop)
                } else {
                    Ok(())
                }
            },
        );
        t.and(r).and(rt).and(pr).and(sk)
    }

    /// The tools, as of the last fetch (kept in sync on `list_changed`).
    pub fn tools(&self) -> Arc<Vec<Tool>> {
        self.service.tools.get()
    }
    /// The resources, as of the last fetch.
    pub fn resources(&self) -> Arc<Vec<Resource>> {
        self.service.resources.get()
    }
    /// The resource templates, as of the last fetch.
    pub fn resource_templates(&self) -> Arc<Vec<ResourceTemplate>> {
        self.service.templates.get()
    }
    /// The prompts, as of the last fetch.
    pub fn prompts(&self) -> Arc<Vec<Prompt>> {
        self.service.prompts.get()
    }
    /// The server's name and version.
    pub fn server_info(&self) -> &Implementation {
        &self.init.server_info
    }
    /// The negotiated revision.
    pub fn protocol_version(&self) -> &ProtocolVersion {
        &self.init.protocol_version
    }
    /// The server's capabilities.
    pub fn server_capabilities(&self) -> &ServerCapabilities {
        &self.init.capabilities
    }
    /// The extensions both sides declared (see [`crate::extensions`]), in name order.
    pub fn negotiated_extensions(&self) -> Vec<String> {
        crate::extensions::negotiated(
            self.server_capabilities(),
            &self.service.options.capabilities(),
        )
    }
    /// The server's instructions, if any.
    pub fn instructions(&self) -> Option<&str> {
        self.init.instructions.as_deref()
    }
    /// The peer handle (raw requests and notifications).
    pub fn peer(&self) -> &Peer {
        &self.peer
    }
    /// The child's process id, for stdio connections.
    #[cfg(feature = "stdio")]
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }
    /// The last lines the child wrote to stderr (with [`StderrMode::Capture`](crate::stdio::StderrMode::Capture)).
    #[cfg(feature = "stdio")]
    pub fn stderr_tail(&self) -> Vec<String> {
        self.stderr
            .as_ref()
            .map(StderrHandle::lines)
            .unwrap_or_default()
    }

    /// Calls a tool. `arguments` is a JSON object, or `null` for none.
    pub async fn call_tool(&self, name: &str, arguments: Value) -> Result<CallToolResult, Error> {
        self.call_tool_with(name, arguments, RequestOptions::default())
            .await
    }

    /// Calls a tool with per-request options (timeout, progress, cancellation). A declared
    /// output schema is enforced on a successful result's `structuredContent`.
    pub async fn call_tool_with(
        &self,
        name: &str,
        arguments: Value,
        options: RequestOptions,
    ) -> Result<CallToolResult, Error> {
        let arguments = object_arguments(arguments)?;
        self.call_tool_keyed(name, arguments.as_ref(), None, options)
            .await
    }

    /// Calls a tool with typed arguments: any `Serialize` that writes a JSON object (a struct,
    /// a map), written straight into the request's frame, with no [`Value`] built on the way.
    /// Arguments that serialize to anything else (a string, a sequence, `null`) fail the call
    /// before anything is sent.
    ///
    /// ```no_run
    /// # async fn f(conn: &purra_protocol::Connection) -> Result<(), purra_protocol::Error> {
    /// #[derive(serde::Serialize)]
    /// struct Echo<'a> {
    ///     text: &'a str,
    /// }
    /// let result = conn.call_tool_typed("echo", &Echo { text: "hi" }).await?;
    /// # Ok(()) }
    /// ```
    pub async fn call_tool_typed<A: serde::Serialize + ?Sized>(
        &self,
        name: &str,
        arguments: &A,
    ) -> Result<CallToolResult, Error> {
        self.call_tool_typed_with(name, arguments, RequestOptions::default())
            .await
    }

    /// [`call_tool_typed`](Self::call_tool_typed) with per-request options, as
    /// [`call_tool_with`](Self::call_tool_with).
    pub async fn call_tool_typed_with<A: serde::Serialize + ?Sized>(
        &self,
        name: &str,
        arguments: &A,
        options: RequestOptions,
    ) -> Result<CallToolResult, Error> {
        self.call_tool_keyed(name, Some(arguments), None, options)
            .await
    }

    /// [`call_tool_with`](Self::call_tool_with) carrying the idempotency key `key` (see
    /// [`crate::idempotency`]): in `_meta` always, and as `idempotencyKey` when the server
    /// declared the capability ([`supports_idempotency`](Self::supports_idempotency)). Every
    /// retry of one logical call must carry the same key; a key longer than
    /// [`MAX_KEY_BYTES`](crate::idempotency::MAX_KEY_BYTES) is refused before sending.
    pub async fn call_tool_idempotent(
        &self,
        name: &str,
        arguments: Value,
        key: &str,
        options: RequestOptions,
    ) -> Result<CallToolResult, Error> {
        let arguments = object_arguments(arguments)?;
        self.call_tool_keyed(name, arguments.as_ref(), Some(key), options)
            .await
    }

    /// Whether the server declared SEP-3182 request idempotency
    /// (`capabilities.tools.idempotency`, an object): a call's idempotency key then also goes as
    /// `params.idempotencyKey` (see [`crate::idempotency`]).
    pub fn supports_idempotency(&self) -> bool {
        self.server_capabilities()
            .tools
            .as_ref()
            .and_then(|t| t.get(crate::idempotency::CAPABILITY))
            .is_some_and(Value::is_object)
    }

    async fn call_tool_keyed<A: serde::Serialize + ?Sized>(
        &self,
        name: &str,
        arguments: Option<&A>,
        key: Option<&str>,
        options: RequestOptions,
    ) -> Result<CallToolResult, Error> {
        if key.is_some_and(|k| k.is_empty() || k.len() > crate::idempotency::MAX_KEY_BYTES) {
            return Err(Error::Protocol(format!(
                "an idempotency key is 1 to {} bytes long",
                crate::idempotency::MAX_KEY_BYTES
            )));
        }
        let arguments = arguments.map(ObjectOnly);
        let mut options = options;
        if self.service.modern.get().is_some() {
            let args = match &arguments {
                Some(a) => serde_json::to_value(a).map_err(|e| Error::Protocol(e.to_string()))?,
                None => Value::Null,
            };
            options
                .headers
                .extend(modern::param_headers(&self.tools(), name, &args));
        }
        let declared = key.is_some() && self.supports_idempotency();
        let params = CallParams {
            name,
            arguments,
            meta: key.map(|k| IdempotencyMeta { key: k }),
            idempotency_key: key.filter(|_| declared),
        };
        let result: CallToolResult = self
            .service
            .call_typed(
                &self.peer,
                methods::TOOLS_CALL,
                &params,
                options,
                CacheMode::Bypass,
            )
            .await?;
        #[cfg(feature = "validation")]
        if !result.is_error() {
            self.check_output(name, &result)?;
        }
        Ok(result)
    }

    #[cfg(feature = "validation")]
    fn check_output(&self, name: &str, result: &CallToolResult) -> Result<(), Error> {
        let validator = {
            let mut cache = self
                .service
                .output_validators
                .lock()
                .expect("validators lock");
            match cache.get(name) {
                Some(v) => v.clone(),
                None => {
                    let tools = self.service.tools.get();
                    let schema = tools
                        .iter()
                        .find(|t| t.name == name)
                        .and_then(|t| t.output_schema.clone());
                    let v = schema.and_then(|s| {
                        jsonschema::draft202012::new(&Value::Object(s))
                            .ok()
                            .map(Arc::new)
                    });
                    cache.insert(name.to_owned(), v.clone());
                    v
                }
            }
        };
        let Some(validator) = validator else {
            return Ok(());
        };
        match &result.structured_content {
            None => Err(Error::Protocol(format!(
                "tool {name} declares an output schema but returned no structuredContent"
            ))),
            Some(sc) if !validator.is_valid(sc) => Err(Error::Protocol(format!(
                "structuredContent of tool {name} does not match its output schema"
            ))),
            Some(_) => Ok(()),
        }
    }

    /// Refetches the tools.
    pub async fn refresh_tools(&self) -> Result<Arc<Vec<Tool>>, Error> {
        refresh_tools(&self.service, &self.peer).await
    }
    /// Refetches the resources.
    pub async fn refresh_resources(&self) -> Result<Arc<Vec<Resource>>, Error> {
        refresh_resources(&self.service, &self.peer).await
    }
    /// Refetches the resource templates.
    pub async fn refresh_resource_templates(&self) -> Result<Arc<Vec<ResourceTemplate>>, Error> {
        refresh_templates(&self.service, &self.peer).await
    }
    /// Refetches the prompts.
    pub async fn refresh_prompts(&self) -> Result<Arc<Vec<Prompt>>, Error> {
        refresh_prompts(&self.service, &self.peer).await
    }

    /// Fetches one page of `resources/list` (for hosts that page themselves).
    pub async fn list_resources_page(
        &self,
        cursor: Option<String>,
    ) -> Result<ListResourcesResult, Error> {
        self.service
            .call_typed(
                &self.peer,
                methods::RESOURCES_LIST,
                &PaginatedParams { cursor, meta: None },
                RequestOptions::default(),
                CacheMode::Use,
            )
            .await
    }

    /// Reads a resource. In 2026-07-28 a result read within its `ttlMs` (and not invalidated
    /// by an update notification) is answered from the cache.
    pub async fn read_resource(&self, uri: &str) -> Result<ReadResourceResult, Error> {
        self.read_resource_with(uri, CacheMode::Use).await
    }

    /// Reads a resource, choosing how the cache is used (2026-07-28; a handshake revision has
    /// no caching hints and always asks the server).
    pub async fn read_resource_with(
        &self,
        uri: &str,
        cache: CacheMode,
    ) -> Result<ReadResourceResult, Error> {
        self.service
            .call_typed(
                &self.peer,
                methods::RESOURCES_READ,
                &UriParams::new(uri),
                RequestOptions::default(),
                cache,
            )
            .await
    }

    /// Subscribes to a resource's updates; the handle unsubscribes. In 2026-07-28 this is a
    /// `subscriptions/listen` stream of its own, open once the server acknowledged it.
    pub async fn subscribe_resource(&self, uri: &str) -> Result<ResourceSubscription, Error> {
        if let Some(m) = self.service.modern.get() {
            let stop = modern::subscribe_resource(
                self.service.clone(),
                m.clone(),
                self.peer.clone(),
                uri.to_owned(),
                self.service.options.engine.request_timeout,
            )
            .await?;
            return Ok(ResourceSubscription {
                peer: self.peer.clone(),
                uri: Some(uri.to_owned()),
                listen: Some(stop),
            });
        }
        let _: EmptyResult = self
            .peer
            .request(
                methods::RESOURCES_SUBSCRIBE,
                &UriParams::new(uri),
                RequestOptions::default(),
            )
            .await?;
        Ok(ResourceSubscription {
            peer: self.peer.clone(),
            uri: Some(uri.to_owned()),
            listen: None,
        })
    }

    /// Gets a prompt.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: impl IntoIterator<Item = (String, String)>,
    ) -> Result<GetPromptResult, Error> {
        let arguments: std::collections::BTreeMap<String, String> = arguments.into_iter().collect();
        let params = GetPromptParams {
            name: name.to_owned(),
            arguments: (!arguments.is_empty()).then_some(arguments),
            meta: None,
        };
        self.service
            .call_typed(
                &self.peer,
                methods::PROMPTS_GET,
                &params,
                RequestOptions::default(),
                CacheMode::Bypass,
            )
            .await
    }

    /// Asks for completions of an argument (`completion/complete`).
    pub async fn complete(
        &self,
        reference: CompletionReference,
        argument: &str,
        value: &str,
    ) -> Result<Completion, Error> {
        let params = CompleteParams::new(reference, CompletionArgument::new(argument, value));
        let r: CompleteResult = self
            .service
            .call_typed(
                &self.peer,
                methods::COMPLETION_COMPLETE,
                &params,
                RequestOptions::default(),
                CacheMode::Bypass,
            )
            .await?;
        Ok(r.completion)
    }

    /// Sets the least severe log level the server should send. In 2026-07-28 (where
    /// `logging/setLevel` is gone) every later request asks for it in its `_meta`.
    pub async fn set_logging_level(&self, level: LoggingLevel) -> Result<(), Error> {
        if let Some(m) = self.service.modern.get() {
            *m.log_level.lock().expect("level lock") = Some(level);
            return Ok(());
        }
        let _: EmptyResult = self
            .peer
            .request(
                methods::LOGGING_SET_LEVEL,
                &SetLevelParams::new(level),
                RequestOptions::default(),
            )
            .await?;
        Ok(())
    }

    /// Pings the server. In 2026-07-28 (where `ping` is gone) this is an uncached
    /// `server/discover`.
    pub async fn ping(&self) -> Result<(), Error> {
        if self.service.modern.get().is_some() {
            return self.discover(CacheMode::Bypass).await.map(drop);
        }
        let _: EmptyResult = self
            .peer
            .request(methods::PING, &EmptyResult {}, RequestOptions::default())
            .await?;
        Ok(())
    }

    /// Calls `f` with the params of every server notification of `method`, in arrival order.
    /// For `*/list_changed`, the matching catalog is refetched before `f` runs. The handle
    /// stops the listener; dropping the handle leaves it listening.
    pub fn on(&self, method: &str, f: impl Fn(&Value) + Send + Sync + 'static) -> ListenerHandle {
        let id = self.service.next_listener.fetch_add(1, Ordering::Relaxed);
        self.service
            .listeners
            .lock()
            .expect("listeners lock")
            .entry(method.to_owned())
            .or_default()
            .push((id, Arc::new(f)));
        ListenerHandle {
            service: Arc::downgrade(&self.service),
            method: method.to_owned(),
            id,
        }
    }

    /// Calls `f` with the params of every server notification of `method` as it arrives, in
    /// order, before any catalog refetch and before any later message is processed: a response
    /// that followed the notification on the wire completes only after `f` returned (for hosts
    /// that must react at once, such as marking tool registrations stale). `f` runs on the
    /// connection's reader and must not block. The handle stops the listener.
    pub fn on_received(
        &self,
        method: &str,
        f: impl Fn(&Value) + Send + Sync + 'static,
    ) -> ListenerHandle {
        let id = self.service.next_listener.fetch_add(1, Ordering::Relaxed);
        self.service
            .early_listeners
            .lock()
            .expect("listeners lock")
            .entry(method.to_owned())
            .or_default()
            .push((id, Arc::new(f)));
        ListenerHandle {
            service: Arc::downgrade(&self.service),
            method: method.to_owned(),
            id,
        }
    }

    /// Replaces the roots and sends `notifications/roots/list_changed`.
    pub async fn set_roots(&self, roots: Vec<Root>) -> Result<(), Error> {
        if self.service.options.roots.is_none() {
            return Err(Error::Protocol(
                "this client did not declare the roots capability".into(),
            ));
        }
        *self.service.roots.write().expect("roots lock") = roots;
        if self.service.modern.get().is_some() {
            // 2026-07-28 has no roots notification: the next roots input request gets them.
            return Ok(());
        }
        self.peer.notify_empty(methods::ROOTS_LIST_CHANGED).await
    }

    /// Sends one request in this connection's revision (in 2026-07-28 with the envelope and the
    /// HTTP headers) and returns its raw result, whatever it is: an `input_required` result is
    /// returned, not answered, so a caller can drive the rounds itself (send `inputResponses`
    /// and the `requestState` byte for byte in `params`).
    pub async fn request_raw(
        &self,
        method: &str,
        params: Value,
        options: RequestOptions,
    ) -> Result<Box<RawValue>, Error> {
        match self.service.modern.get() {
            // Boxed: a 2026-07-28 request's rounds are a large future, which every handshake
            // request would otherwise carry (and copy each time it is moved).
            Some(m) => {
                Box::pin(modern::send(
                    &self.service,
                    m,
                    &self.peer,
                    method,
                    &params,
                    options,
                    CacheMode::Bypass,
                    false,
                ))
                .await
            }
            None => {
                self.peer
                    .request_raw(method, Some(to_raw(&params)?), options)
                    .await
            }
        }
    }

    /// Whether this connection speaks the 2026-07-28 revision (no handshake).
    pub fn is_modern(&self) -> bool {
        self.service.modern.get().is_some()
    }

    /// Whether the server's list changes reach this connection now. In a handshake revision they
    /// arrive on the session itself: always. In 2026-07-28 only while the `subscriptions/listen`
    /// stream for the lists the server says can change is acknowledged and open (trivially when
    /// it names none); when the stream ends, the listeners of [`on_received`](Self::on_received)
    /// hear a `list_changed` with null params, and when it reopens the catalogs are refetched.
    pub fn follows_list_changes(&self) -> bool {
        self.service
            .modern
            .get()
            .is_none_or(|m| m.following.load(Ordering::SeqCst))
    }

    /// The server's `server/discover` result as of the connection (2026-07-28 only).
    pub fn discover_result(&self) -> Option<&crate::modern::DiscoverResult> {
        self.discover.as_ref()
    }

    /// Asks `server/discover` again (2026-07-28 only; honours its `ttlMs` with
    /// [`CacheMode::Use`]).
    pub async fn discover(&self, cache: CacheMode) -> Result<crate::modern::DiscoverResult, Error> {
        if self.service.modern.get().is_none() {
            return Err(Error::Protocol(
                "server/discover is a 2026-07-28 request; this connection speaks a handshake revision"
                    .into(),
            ));
        }
        self.service
            .call_typed(
                &self.peer,
                crate::modern::methods::DISCOVER,
                &serde_json::json!({}),
                RequestOptions::default(),
                cache,
            )
            .await
    }

    /// Closes the connection: stops writing, lets a child exit (SIGTERM, then SIGKILL if it
    /// lingers), and fails pending requests. Idempotent.
    pub async fn close(&self) {
        if let Some(m) = self.service.modern.get() {
            m.stop.cancel();
        }
        let child = self.child.lock().expect("child lock").take();
        #[cfg(feature = "stdio")]
        if let Some(mut child) = child {
            child.shutdown().await;
        }
        #[cfg(not(feature = "stdio"))]
        let _ = child;
        self.peer.shared.shutdown();
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        if let Some(m) = self.service.modern.get() {
            m.stop.cancel();
        }
        self.peer.shared.shutdown();
        // The child (if any) is dropped with its graceful shutdown running in the background.
    }
}

/// Stops a notification listener.
#[derive(Debug)]
pub struct ListenerHandle {
    service: std::sync::Weak<ClientService>,
    method: String,
    id: u64,
}

impl ListenerHandle {
    /// Removes the listener.
    pub fn cancel(self) {
        if let Some(s) = self.service.upgrade() {
            if let Some(v) = s
                .listeners
                .lock()
                .expect("listeners lock")
                .get_mut(&self.method)
            {
                v.retain(|(id, _)| *id != self.id);
            }
        }
    }
}

/// A resource subscription; `unsubscribe` ends it (dropping it unsubscribes in the background).
#[derive(Debug)]
pub struct ResourceSubscription {
    peer: Peer,
    uri: Option<String>,
    /// Ends the subscription's own listen stream (2026-07-28).
    listen: Option<tokio_util::sync::CancellationToken>,
}

impl ResourceSubscription {
    /// The subscribed URI.
    pub fn uri(&self) -> &str {
        self.uri.as_deref().unwrap_or_default()
    }

    /// Sends `resources/unsubscribe` (2026-07-28: ends the subscription's listen stream).
    pub async fn unsubscribe(mut self) -> Result<(), Error> {
        let uri = self.uri.take().expect("subscribed");
        if let Some(stop) = self.listen.take() {
            stop.cancel();
            return Ok(());
        }
        let _: EmptyResult = self
            .peer
            .request(
                methods::RESOURCES_UNSUBSCRIBE,
                &UriParams::new(uri),
                RequestOptions::default(),
            )
            .await?;
        Ok(())
    }
}

impl Drop for ResourceSubscription {
    fn drop(&mut self) {
        if let Some(stop) = self.listen.take() {
            stop.cancel();
            return;
        }
        if let (Some(uri), Ok(rt)) = (self.uri.take(), tokio::runtime::Handle::try_current()) {
            if self.peer.is_closed() {
                return;
            }
            let peer = self.peer.clone();
            rt.spawn(async move {
                let _: Result<EmptyResult, _> = peer
                    .request(
                        methods::RESOURCES_UNSUBSCRIBE,
                        &UriParams::new(uri),
                        RequestOptions::default(),
                    )
                    .await;
            });
        }
    }
}
