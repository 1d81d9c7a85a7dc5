//! The server's tasks: a task-augmented `tools/call` answered at once with a task while its
//! handler keeps running, and the `tasks/*` methods, in the 2025-11-25 form (handshake sessions)
//! and the `io.modelcontextprotocol/tasks` extension form (2026-07-28 requests).
//!
//! What a client may read lives in the [`TaskStore`]; what only this process has lives here: the
//! running handler (its own task on the runtime), its cancellation, and the questions it waits
//! on. A handler in a task asks through its `RequestCtx` as usual: in the extension form the
//! question is parked on the task (`input_required`, answered by `tasks/update`); in the
//! 2025-11-25 form it is sent to the client while the task shows `input_required`.
//!
//! Every write to the store for one task goes through that task's writer lock, each writing a
//! snapshot taken under it, so the store always ends with the latest state.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;

use super::{RequestCtx, Server, SessionState};
use crate::error::Error;
use crate::extensions;
use crate::jsonrpc::{encode_notification, from_params, ErrorObject, RpcErrorCode};
use crate::modern::envelope::RequestEnvelope;
use crate::modern::{raw, InputRequest, InputResponse};
use crate::session::{Peer, RequestContext};
use crate::tasks::{
    methods as task_methods, InMemoryTaskStore, TaskChange, TaskOutcome, TaskRecord, TaskStatus,
    TaskStore, TaskStoreError, RELATED_TASK_META,
};
use crate::types::{methods, CallToolParams, ClientCapabilities, JsonObject, TaskSupport};

/// How a server runs tasks: where they are kept, how long, how often clients should poll.
#[derive(Clone)]
pub struct TaskOptions {
    store: Arc<dyn TaskStore>,
    default_ttl: Duration,
    max_ttl: Duration,
    min_ttl: Duration,
    poll_interval: Duration,
    grace: Duration,
    anonymous_owner: Option<String>,
    watch_store: Option<Duration>,
}

impl std::fmt::Debug for TaskOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskOptions")
            .field("default_ttl", &self.default_ttl)
            .field("max_ttl", &self.max_ttl)
            .field("min_ttl", &self.min_ttl)
            .field("poll_interval", &self.poll_interval)
            .field("grace", &self.grace)
            .field("anonymous_owner", &self.anonymous_owner)
            .field("watch_store", &self.watch_store)
            .finish_non_exhaustive()
    }
}

impl Default for TaskOptions {
    fn default() -> Self {
        TaskOptions {
            store: Arc::new(InMemoryTaskStore::default()),
            default_ttl: Duration::from_secs(600),
            max_ttl: Duration::from_secs(3600),
            min_ttl: Duration::from_millis(1),
            poll_interval: Duration::from_millis(500),
            grace: Duration::from_secs(5),
            anonymous_owner: None,
            watch_store: None,
        }
    }
}

impl TaskOptions {
    /// The store (default: an [`InMemoryTaskStore`] with its default bounds).
    pub fn store(mut self, store: Arc<dyn TaskStore>) -> Self {
        self.store = store;
        self
    }
    /// How long a task is kept after its creation when the client asks for nothing (default
    /// 10 minutes).
    pub fn default_ttl(mut self, ttl: Duration) -> Self {
        self.default_ttl = ttl;
        self
    }
    /// The longest ttl a client may ask for (default 1 hour); a longer one is cut to it.
    pub fn max_ttl(mut self, ttl: Duration) -> Self {
        self.max_ttl = ttl;
        self
    }
    /// The shortest ttl a task gets (default 1 ms); a shorter one asked for is raised to it (the
    /// task's answer says the ttl it got). For tasks that wait on people, whose clients may ask
    /// for a minute.
    pub fn min_ttl(mut self, ttl: Duration) -> Self {
        self.min_ttl = ttl.max(Duration::from_millis(1));
        self
    }
    /// How often clients should poll (default 500 ms).
    pub fn poll_interval(mut self, every: Duration) -> Self {
        self.poll_interval = every.max(Duration::from_millis(1));
        self
    }
    /// How long a cancelled handler may run on to observe its cancellation before it is
    /// dropped (default 5 s).
    pub fn cancellation_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }
    /// The owner of the tasks of requests without a principal (default: their session, or one
    /// anonymous owner for stateless HTTP). A server whose unauthenticated callers are one
    /// configured caller names it here, so its tasks are found from any session (and, with a
    /// shared store, any process).
    pub fn anonymous_owner(mut self, owner: impl Into<String>) -> Self {
        self.anonymous_owner = Some(owner.into());
        self
    }
    /// Re-reads each task running here from the store every `every` (default: never): a task
    /// another process cancelled (a store shared by a fleet) cancels its handler here too.
    pub fn watch_store(mut self, every: Duration) -> Self {
        self.watch_store = Some(every.max(Duration::from_millis(10)));
        self
    }
}

/// Which wire form a task speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    /// 2025-11-25: `ttl`, `pollInterval`, `tasks/result`, status notifications.
    Legacy,
    /// The 2026-07-28 extension: `ttlMs`, `pollIntervalMs`, results inlined, `tasks/update`.
    Extension,
}

/// A question a running task waits on.
struct Question {
    key: String,
    request: InputRequest,
    answer: oneshot::Sender<Value>,
}

/// A task whose handler runs in this process.
pub(crate) struct Live {
    id: String,
    owner: String,
    form: Form,
    cancel: CancellationToken,
    caps: ClientCapabilities,
    questions: Mutex<Vec<Question>>,
    writer: tokio::sync::Mutex<()>,
    store: Arc<dyn TaskStore>,
    /// The session's peer, for 2025-11-25 status notifications.
    peer: Option<Peer>,
    /// The server, for the extension's notifications on listen streams (weak: the server
    /// holds this task).
    server: std::sync::Weak<super::ServerInner>,
    patience: Duration,
    done: watch::Sender<bool>,
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live").field("id", &self.id).finish()
    }
}

/// The task machinery of one server.
pub(crate) struct Engine {
    options: TaskOptions,
    live: Mutex<HashMap<String, Arc<Live>>>,
}

impl Engine {
    pub(crate) fn new(options: TaskOptions) -> Engine {
        Engine {
            options,
            live: Mutex::new(HashMap::new()),
        }
    }

    /// The task `id` when its handler runs in this process.
    fn running(&self, id: &str) -> Option<Arc<Live>> {
        self.live.lock().expect("live lock").get(id).cloned()
    }
}

fn store_error(e: TaskStoreError) -> ErrorObject {
    match e {
        TaskStoreError::OwnerFull { .. } | TaskStoreError::StoreFull { .. } => ErrorObject::new(
            RpcErrorCode::INVALID_REQUEST,
            format!("Invalid request: {e}"),
        ),
        other => ErrorObject::internal(format!("Internal error: {other}")),
    }
}

fn unknown_task(id: &str) -> ErrorObject {
    ErrorObject::invalid_params(format!("Invalid params: unknown task {id:?}"))
        .with_data(json!({ "taskId": id }))
}

/// Who owns the tasks a request creates: its principal (its binding key as
/// [`stored_owner`](crate::session_store::stored_owner) writes it: text without NUL, which a
/// PostgreSQL task table refuses), else its session (or stream connection); stateless HTTP
/// requests without a principal share the anonymous owner (their task ids, unguessable, are then
/// the only key).
pub(crate) fn owner_of(session: &SessionState, principal: Option<&str>) -> String {
    let configured = &session.server.engine().options.anonymous_owner;
    match (principal, configured) {
        (Some(p), _) => format!("principal:{}", crate::session_store::stored_owner(p)),
        (None, Some(o)) => o.clone(),
        (None, None) if session.key == u64::MAX => "anonymous".to_owned(),
        (None, None) => format!("session:{}", session.key),
    }
}

/// The task as the wire shows it (without result, error or questions).
fn task_json(r: &TaskRecord, form: Form) -> Map<String, Value> {
    crate::tasks::wire(r, form == Form::Extension)
}

/// The 2026-07-28 `tasks/get` result: the task with its questions, result or error inlined.
fn detailed(r: &TaskRecord) -> Value {
    let mut o = Map::new();
    o.insert("resultType".into(), Value::String("complete".into()));
    o.extend(task_json(r, Form::Extension));
    if r.status == TaskStatus::InputRequired {
        let q: Map<String, Value> = r.input_requests.iter().cloned().collect();
        o.insert("inputRequests".into(), Value::Object(q));
    }
    match &r.outcome {
        Some(TaskOutcome::Result(v)) => {
            o.insert("result".into(), v.clone());
        }
        Some(TaskOutcome::Error(e)) => {
            o.insert(
                "error".into(),
                serde_json::to_value(e).unwrap_or(Value::Null),
            );
        }
        None => {}
    }
    Value::Object(o)
}

impl Live {
    /// The task's id.
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    /// Writes the pending questions to the store (working again when there are none).
    async fn sync(&self) {
        let _w = self.writer.lock().await;
        let snapshot: Vec<(String, Value)> = self
            .questions
            .lock()
            .expect("questions lock")
            .iter()
            .map(|q| (q.key.clone(), q.request.to_value()))
            .collect();
        self.write(TaskChange::Questions(snapshot)).await;
    }

    async fn write(&self, change: TaskChange) {
        match self.store.update(&self.owner, &self.id, change).await {
            Ok(Some(r)) => self.notify(&r),
            Ok(None) => {} // expired or gone: nobody can read it any more
            Err(e) => tracing::warn!(task = %self.id, error = %e, "task store update failed"),
        }
    }

    /// Sets the task's status message (a running task only).
    pub(crate) async fn status(&self, message: String) {
        let _w = self.writer.lock().await;
        self.write(TaskChange::Status(message)).await;
    }

    /// Ends the task with `outcome` (ignored when it already ended, cancelled for instance).
    async fn finish(&self, outcome: TaskOutcome) {
        let _w = self.writer.lock().await;
        self.write(TaskChange::Finish(outcome)).await;
    }

    /// Sends `notifications/tasks/status` (2025-11-25 form), or queues `notifications/tasks` to
    /// the listen streams that follow the task (the extension's form).
    fn notify(&self, r: &TaskRecord) {
        if self.form == Form::Extension {
            if let Some(server) = self.server.upgrade() {
                let mut task = detailed(r);
                if let Value::Object(o) = &mut task {
                    o.remove("resultType");
                }
                server.listeners.task_changed(&self.owner, &self.id, &task);
            }
            return;
        }
        let Some(peer) = &self.peer else {
            return;
        };
        let params = raw(&Value::Object(task_json(r, Form::Legacy)));
        let frame = encode_notification(task_methods::STATUS, Some(&params));
        peer.notify_detached(frame, self.patience);
    }

    /// A handler's question in the extension form: parked on the task until `tasks/update`
    /// answers it or the task is cancelled.
    pub(crate) async fn ask(
        &self,
        key: &str,
        request: InputRequest,
    ) -> Result<InputResponse, Error> {
        if !request.declared_by(&self.caps) {
            return Err(Error::MissingClientCapability(
                request.capability().to_owned(),
            ));
        }
        let (tx, rx) = oneshot::channel();
        {
            let mut q = self.questions.lock().expect("questions lock");
            q.retain(|q| q.key != key);
            q.push(Question {
                key: key.to_owned(),
                request: request.clone(),
                answer: tx,
            });
        }
        self.sync().await;
        let answer = tokio::select! {
            a = rx => a.map_err(|_| Error::Cancelled)?,
            _ = self.cancel.cancelled() => return Err(Error::Cancelled),
        };
        // tasks/update checked the answer against this very request.
        InputResponse::from_value(&request, answer).map_err(Error::Protocol)
    }

    /// A handler's question in the 2025-11-25 form: sent to the client while the task shows
    /// `input_required`.
    pub(crate) async fn around_legacy_input<F, T>(
        &self,
        key: &str,
        request: &InputRequest,
        fut: F,
    ) -> T
    where
        F: std::future::Future<Output = T>,
    {
        {
            let _w = self.writer.lock().await;
            self.write(TaskChange::Questions(vec![(
                key.to_owned(),
                request.to_value(),
            )]))
            .await;
        }
        let r = fut.await;
        self.sync().await;
        r
    }

    /// Delivers `tasks/update` answers: each known key's answer is checked against its question
    /// first (one malformed answer refuses the whole update, -32602); unknown keys are ignored.
    async fn answer(&self, responses: &Map<String, Value>) -> Result<(), ErrorObject> {
        let delivered = {
            let mut q = self.questions.lock().expect("questions lock");
            for question in q.iter() {
                if let Some(v) = responses.get(&question.key) {
                    InputResponse::from_value(&question.request, v.clone()).map_err(|why| {
                        ErrorObject::invalid_params(format!(
                            "Invalid params: inputResponses[{:?}] is {why}",
                            question.key
                        ))
                    })?;
                }
            }
            let (answered, pending): (Vec<Question>, Vec<Question>) = q
                .drain(..)
                .partition(|question| responses.contains_key(&question.key));
            *q = pending;
            answered
        };
        if delivered.is_empty() {
            return Ok(());
        }
        self.sync().await;
        for q in delivered {
            let v = responses.get(&q.key).cloned().unwrap_or(Value::Null);
            let _ = q.answer.send(v);
        }
        Ok(())
    }
}

impl Server {
    fn engine(&self) -> &Engine {
        &self.inner.tasks
    }

    /// Where this server keeps its tasks.
    pub(crate) fn tasks_store(&self) -> &Arc<dyn TaskStore> {
        &self.engine().options.store
    }

    /// Whether any registered tool may run as a task.
    pub(crate) fn offers_tasks(&self) -> bool {
        self.inner
            .task_tools
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// The tool's task support (forbidden when it declares none or does not exist).
    fn task_support(&self, name: &str) -> TaskSupport {
        self.inner
            .tools
            .read()
            .expect("tools lock")
            .get(name)
            .and_then(|e| e.tool.execution.as_ref().and_then(|x| x.task_support))
            .unwrap_or(TaskSupport::Forbidden)
    }
}

/// What a task-augmented call needs from the request that creates it.
pub(crate) struct Creation {
    pub session: Arc<SessionState>,
    pub req: RequestContext,
    pub ctx_modern: Option<Arc<super::modern::Scope>>,
    pub progress_token: Option<crate::types::ProgressToken>,
    pub params: Option<Box<RawValue>>,
    pub owner: String,
    pub form: Form,
    pub caps: ClientCapabilities,
    pub ttl_ms: Option<u64>,
}

/// Creates the task (durably, before answering), starts its handler and returns its record.
pub(crate) async fn start(c: Creation) -> Result<TaskRecord, ErrorObject> {
    let server = c.session.server.clone();
    let cancel = CancellationToken::new();
    let (record, live) = create(&c.session, c.owner, c.form, c.caps, c.ttl_ms, cancel).await?;
    let ctx = RequestCtx {
        req: RequestContext {
            id: c.req.id,
            peer: c.req.peer,
            cancel: live.cancel.clone(),
            transport: c.req.transport,
        },
        session: c.session.clone(),
        progress_token: c.progress_token,
        modern: c.ctx_modern,
        task: Some(live.clone()),
    };
    let caps = server.advertised();
    let handler = c
        .session
        .serve(ctx, methods::TOOLS_CALL.to_owned(), c.params, caps);
    supervise(server, live, Box::pin(handler));
    Ok(record)
}

/// Stores a new task of `owner` and registers it as running here, cancelled by `cancel`.
pub(crate) async fn create(
    session: &SessionState,
    owner: String,
    form: Form,
    caps: ClientCapabilities,
    ttl_ms: Option<u64>,
    cancel: CancellationToken,
) -> Result<(TaskRecord, Arc<Live>), ErrorObject> {
    let server = &session.server;
    let engine = server.engine();
    let o = &engine.options;
    let ttl = ttl_ms
        .unwrap_or(o.default_ttl.as_millis() as u64)
        .min(o.max_ttl.as_millis() as u64)
        .max(o.min_ttl.as_millis() as u64)
        .max(1);
    let record = TaskRecord::new(
        crate::tasks::mint_id(),
        owner,
        ttl,
        o.poll_interval.as_millis() as u64,
    );
    o.store.create(record.clone()).await.map_err(store_error)?;
    let (done, _) = watch::channel(false);
    let live = Arc::new(Live {
        id: record.id.clone(),
        owner: record.owner.clone(),
        form,
        cancel,
        caps,
        questions: Mutex::new(Vec::new()),
        writer: tokio::sync::Mutex::new(()),
        store: o.store.clone(),
        peer: session.peer.get().cloned(),
        server: Arc::downgrade(&server.inner),
        patience: server.inner.engine.slow_peer_timeout,
        done,
    });
    engine
        .live
        .lock()
        .expect("live lock")
        .insert(record.id.clone(), live.clone());
    Ok((record, live))
}

/// Runs a task's handler on its own: its outcome ends the task; once the task is cancelled the
/// handler has the grace period to observe it, then it is dropped.
pub(crate) fn supervise(
    server: Server,
    live: Arc<Live>,
    handler: crate::session::BoxFuture<'static, Result<Box<RawValue>, ErrorObject>>,
) {
    let grace = server.engine().options.grace;
    let watch_every = server.engine().options.watch_store;
    let handler = tokio::spawn(handler);
    tokio::spawn(async move {
        let abort = handler.abort_handle();
        // With a shared store: a cancellation written by another process cancels it here.
        let watched = live.clone();
        let watch = async move {
            if let Some(every) = watch_every {
                loop {
                    tokio::time::sleep(every).await;
                    match watched.store.get(&watched.owner, &watched.id).await {
                        Ok(Some(r)) if r.status != TaskStatus::Cancelled => continue,
                        Ok(_) => {
                            watched.cancel.cancel();
                            break;
                        }
                        Err(_) => continue,
                    }
                }
            }
            std::future::pending::<()>().await
        };
        let outcome = tokio::select! {
            r = handler => Some(match r {
                Ok(Ok(result)) => match serde_json::from_str::<Value>(result.get()) {
                    Ok(v) => TaskOutcome::Result(v),
                    Err(e) => TaskOutcome::Error(ErrorObject::internal(format!("Internal error: {e}"))),
                },
                Ok(Err(e)) => TaskOutcome::Error(e),
                Err(e) if e.is_panic() => TaskOutcome::Error(ErrorObject::internal(
                    "Internal error: the tool's handler panicked",
                )),
                Err(_) => TaskOutcome::Error(ErrorObject::internal(
                    "Internal error: the tool's handler was stopped",
                )),
            }),
            _ = async { live.cancel.cancelled().await; tokio::time::sleep(grace).await } => {
                abort.abort();
                None
            }
            () = watch => None,
        };
        if let Some(outcome) = outcome {
            live.finish(outcome).await;
        }
        server
            .engine()
            .live
            .lock()
            .expect("live lock")
            .remove(&live.id);
        let _ = live.done.send(true);
    });
}

#[derive(serde::Deserialize)]
struct TaskIdParams {
    #[serde(rename = "taskId")]
    task_id: String,
}

#[derive(serde::Deserialize)]
struct UpdateParams {
    #[serde(rename = "taskId")]
    task_id: String,
    #[serde(default, rename = "inputResponses")]
    input_responses: Option<Value>,
}

#[derive(serde::Deserialize, Default)]
struct ListParams {
    #[serde(default)]
    cursor: Option<String>,
}

async fn get(server: &Server, owner: &str, id: &str) -> Result<TaskRecord, ErrorObject> {
    server
        .engine()
        .options
        .store
        .get(owner, id)
        .await
        .map_err(store_error)?
        .ok_or_else(|| unknown_task(id))
}

/// Cancels the task; the record after (unchanged when it had already ended).
async fn cancel(server: &Server, owner: &str, id: &str) -> Result<TaskRecord, ErrorObject> {
    let before = get(server, owner, id).await?;
    if before.status.is_terminal() {
        return Ok(before);
    }
    let live = server.engine().running(id);
    let after = match &live {
        Some(l) => {
            let _w = l.writer.lock().await;
            let r = server
                .engine()
                .options
                .store
                .update(owner, id, TaskChange::Cancel)
                .await
                .map_err(store_error)?;
            if let Some(r) = &r {
                l.notify(r);
            }
            r
        }
        None => server
            .engine()
            .options
            .store
            .update(owner, id, TaskChange::Cancel)
            .await
            .map_err(store_error)?,
    };
    if let Some(l) = live {
        l.cancel.cancel();
        l.questions.lock().expect("questions lock").clear();
    }
    after.ok_or_else(|| unknown_task(id))
}

/// 2026-07-28: the extension's methods and task-augmented `tools/call`; `None` when the request
/// is not the extension's (it is then served as usual).
pub(crate) async fn route_extension(
    session: &Arc<SessionState>,
    req: &RequestContext,
    method: &str,
    params: Option<&RawValue>,
    envelope: &RequestEnvelope,
    principal: Option<&str>,
) -> Option<Result<Box<RawValue>, ErrorObject>> {
    let server = &session.server;
    let caps = &envelope.client_capabilities;
    // (tools/call checks the tool itself: a task tool means the server offers tasks.)
    let declared = extensions::client_declares(caps, extensions::TASKS)
        && (method == methods::TOOLS_CALL || server.offers_tasks());
    let owner = || owner_of(session, principal);
    let ack = || Ok(raw(&json!({ "resultType": "complete" })));
    let missing = || {
        Err(ErrorObject::new(
            RpcErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
            format!(
                "Missing required client capability: the {} extension",
                extensions::TASKS
            ),
        )
        .with_data(extensions::required_data(extensions::TASKS)))
    };
    match method {
        task_methods::RESULT | task_methods::LIST => {
            Some(Err(ErrorObject::method_not_found(method)))
        }
        task_methods::GET | task_methods::CANCEL | task_methods::UPDATE if !declared => {
            Some(missing())
        }
        task_methods::GET => Some(
            async {
                let p: TaskIdParams = from_params(params)?;
                let r = get(server, &owner(), &p.task_id).await?;
                Ok(raw(&detailed(&r)))
            }
            .await,
        ),
        task_methods::CANCEL => Some(
            async {
                let p: TaskIdParams = from_params(params)?;
                cancel(server, &owner(), &p.task_id).await?;
                ack()
            }
            .await,
        ),
        task_methods::UPDATE => Some(
            async {
                let p: UpdateParams = from_params(params)?;
                let responses = match p.input_responses {
                    None | Some(Value::Null) => Map::new(),
                    Some(Value::Object(m)) => m,
                    Some(_) => {
                        return Err(ErrorObject::invalid_params(
                            "Invalid params: inputResponses must be an object",
                        ))
                    }
                };
                let r = get(server, &owner(), &p.task_id).await?;
                let live = server.engine().running(&r.id);
                if let Some(l) = live {
                    l.answer(&responses).await?;
                }
                ack()
            }
            .await,
        ),
        methods::TOOLS_CALL => {
            if !server.offers_tasks() {
                // No tool may run as a task: its params are not read here.
                return None;
            }
            #[derive(serde::Deserialize)]
            struct Name {
                name: String,
            }
            let name = params.and_then(|p| serde_json::from_str::<Name>(p.get()).ok())?;
            let deferred = server
                .inner
                .tools
                .read()
                .expect("tools lock")
                .get(&name.name)
                .is_some_and(|e| e.input_before_task);
            match (server.task_support(&name.name), declared) {
                (TaskSupport::Forbidden, _) => None,
                (TaskSupport::Required, false) => Some(missing()),
                (_, false) => None,
                (_, true) if deferred => Some(
                    escalating(session, req, method, params, envelope, principal, owner()).await,
                ),
                (_, true) => {
                    let modern = Arc::new(super::modern::Scope {
                        envelope: envelope.clone(),
                        method: method.to_owned(),
                        round: None,
                        input_calls: Default::default(),
                        escalation: None,
                    });
                    let created = start(Creation {
                        session: session.clone(),
                        req: req.clone(),
                        ctx_modern: Some(modern),
                        progress_token: envelope.progress_token.clone(),
                        params: params.map(|p| p.to_owned()),
                        owner: owner(),
                        form: Form::Extension,
                        caps: caps.clone(),
                        ttl_ms: None,
                    })
                    .await;
                    Some(created.map(|r| {
                        let mut o = Map::new();
                        o.insert("resultType".into(), Value::String("task".into()));
                        o.extend(task_json(&r, Form::Extension));
                        raw(&Value::Object(o))
                    }))
                }
            }
        }
        _ => None,
    }
}

/// A call of an `input_before_task` tool: its handler runs as an ordinary 2026-07-28 call
/// (`input_required` rounds) until it calls `start_task`; then the task is created, the client
/// gets it, and the handler runs on in it.
async fn escalating(
    session: &Arc<SessionState>,
    req: &RequestContext,
    method: &str,
    params: Option<&RawValue>,
    envelope: &RequestEnvelope,
    principal: Option<&str>,
    owner: String,
) -> Result<Box<RawValue>, ErrorObject> {
    let server = session.server.clone();
    let inner = &server.inner;
    let caps = envelope.client_capabilities.clone();
    let round = Arc::new(super::mrtr::Round::open(
        &inner.request_state,
        method,
        params,
        &inner.info.name,
        principal.map(str::to_owned),
        caps.clone(),
    )?);
    let escalation = Arc::new(super::modern::Escalation::default());
    let modern = Arc::new(super::modern::Scope {
        envelope: envelope.clone(),
        method: method.to_owned(),
        round: Some(round.clone()),
        input_calls: Default::default(),
        escalation: Some(escalation.clone()),
    });
    // The handler's own cancellation: the task's, should it become one.
    let cancel = CancellationToken::new();
    let ctx = RequestCtx {
        req: RequestContext {
            id: req.id.clone(),
            peer: req.peer.clone(),
            cancel: cancel.clone(),
            transport: req.transport.clone(),
        },
        session: session.clone(),
        progress_token: envelope.progress_token.clone(),
        modern: Some(modern),
        task: None,
    };
    let fut: crate::session::BoxFuture<'static, _> = Box::pin(session.clone().serve(
        ctx,
        method.to_owned(),
        params.map(|p| p.to_owned()),
        server.advertised(),
    ));
    match super::mrtr::run_or_escalate(round, fut, &escalation).await {
        super::mrtr::Step::Done(Ok(super::mrtr::Outcome::Complete(r)))
        | super::mrtr::Step::Done(Ok(super::mrtr::Outcome::InputRequired(r))) => Ok(r),
        super::mrtr::Step::Done(Err(e)) => Err(e),
        super::mrtr::Step::Escalate(fut) => {
            let (record, live) =
                create(session, owner, Form::Extension, caps, None, cancel).await?;
            let _ = escalation.task.set(live.clone());
            escalation.ready.notify_one();
            supervise(server.clone(), live, fut);
            let mut o = Map::new();
            o.insert("resultType".into(), Value::String("task".into()));
            o.extend(task_json(&record, Form::Extension));
            Ok(raw(&Value::Object(o)))
        }
    }
}

/// A look at a `tools/call`'s name and whether `task` is there (malformed params are the
/// ordinary path's -32602); the whole params are read only for a task.
#[derive(serde::Deserialize)]
struct Peek<'a> {
    #[serde(borrow)]
    name: std::borrow::Cow<'a, str>,
    #[serde(default)]
    task: Option<serde::de::IgnoredAny>,
}

/// Whether [`route_legacy`] may answer this request: `false` for every request that is not about
/// 2025-11-25's tasks (every request of a session before 2025-11-25 or of a server with no task
/// tool, every `tools/call` without `task` of a tool that does not require one, and one whose
/// params do not even name a tool: the ordinary path's -32602), so that the router's future,
/// which is large, is made (and boxed) only for a request it may answer. The one place these
/// rules live: [`route_legacy`] assumes them.
pub(crate) fn may_route_legacy(
    session: &SessionState,
    method: &str,
    params: Option<&RawValue>,
) -> bool {
    let tasks_method = method.starts_with("tasks/");
    if !tasks_method && method != methods::TOOLS_CALL {
        return false;
    }
    let server = &session.server;
    if !server.offers_tasks() || !legacy_tasks_revision(session) {
        return false;
    }
    if tasks_method {
        return true;
    }
    let Some(peek) = params.and_then(|p| serde_json::from_str::<Peek<'_>>(p.get()).ok()) else {
        return false;
    };
    let support = server.task_support(&peek.name);
    !matches!(
        (peek.task.is_some(), support),
        (false, TaskSupport::Optional | TaskSupport::Forbidden)
    )
}

/// Whether the session speaks a revision with 2025-11-25's tasks.
fn legacy_tasks_revision(session: &SessionState) -> bool {
    session
        .init
        .read()
        .expect("init lock")
        .as_ref()
        .map(|i| i.0.as_str() >= crate::ProtocolVersion::V2025_11_25.as_str())
        .unwrap_or(false)
}

/// Handshake sessions at 2025-11-25 or later: the 2025-11-25 task methods and task-augmented
/// `tools/call`, for a request [`may_route_legacy`] let through; `None` leaves it to the ordinary
/// path (a `task` on an unknown tool, a method it does not know).
pub(crate) async fn route_legacy(
    session: &Arc<SessionState>,
    req: &RequestContext,
    method: &str,
    params: Option<&RawValue>,
    progress_token: Option<&crate::types::ProgressToken>,
    principal: Option<&str>,
) -> Option<Result<Box<RawValue>, ErrorObject>> {
    // Its one caller asked [`may_route_legacy`] first: the revision, the tasks capability and a
    // `tools/call`'s `task` and tool are settled there, once.
    debug_assert!(
        may_route_legacy(session, method, params),
        "route_legacy called for a request may_route_legacy refuses"
    );
    let server = &session.server;
    let owner = || owner_of(session, principal);
    match method {
        task_methods::GET => Some(
            async {
                let p: TaskIdParams = from_params(params)?;
                let r = get(server, &owner(), &p.task_id).await?;
                Ok(raw(&Value::Object(task_json(&r, Form::Legacy))))
            }
            .await,
        ),
        task_methods::CANCEL => Some(
            async {
                let p: TaskIdParams = from_params(params)?;
                let before = get(server, &owner(), &p.task_id).await?;
                if before.status.is_terminal() {
                    return Err(ErrorObject::invalid_params(format!(
                        "Invalid params: task {:?} is already {} and cannot be cancelled",
                        p.task_id, before.status
                    )));
                }
                let r = cancel(server, &owner(), &p.task_id).await?;
                Ok(raw(&Value::Object(task_json(&r, Form::Legacy))))
            }
            .await,
        ),
        task_methods::LIST => Some(
            async {
                let p: ListParams = match params {
                    Some(_) => from_params(params)?,
                    None => ListParams::default(),
                };
                let page = server.inner.page_size;
                let tasks = server
                    .engine()
                    .options
                    .store
                    .list(&owner(), p.cursor.as_deref(), page + 1)
                    .await
                    .map_err(store_error)?;
                let more = tasks.len() > page;
                let shown: Vec<Value> = tasks
                    .iter()
                    .take(page)
                    .map(|r| Value::Object(task_json(r, Form::Legacy)))
                    .collect();
                let mut o = Map::new();
                if more {
                    if let Some(Value::Object(last)) = shown.last() {
                        o.insert("nextCursor".into(), last["taskId"].clone());
                    }
                }
                o.insert("tasks".into(), Value::Array(shown));
                Ok(raw(&Value::Object(o)))
            }
            .await,
        ),
        task_methods::RESULT => Some(result(server, req, &owner(), params).await),
        methods::TOOLS_CALL => {
            let call: CallToolParams = match from_params(params) {
                Ok(c) => c,
                Err(e) => return Some(Err(e)),
            };
            let support = server.task_support(&call.name);
            let known = server
                .inner
                .tools
                .read()
                .expect("tools lock")
                .get(&call.name)
                .is_some();
            match (call.task, support) {
                (None, TaskSupport::Required) => Some(Err(ErrorObject::new(
                    RpcErrorCode::METHOD_NOT_FOUND,
                    format!(
                        "Method not found: tool {} can only run as a task (taskSupport: required); call it with `task`",
                        call.name
                    ),
                ))),
                (Some(_), TaskSupport::Forbidden) if known => Some(Err(ErrorObject::new(
                    RpcErrorCode::METHOD_NOT_FOUND,
                    format!(
                        "Method not found: tool {} cannot run as a task (taskSupport: forbidden)",
                        call.name
                    ),
                ))),
                (Some(t), TaskSupport::Optional | TaskSupport::Required) => {
                    let caps = session
                        .init
                        .read()
                        .expect("init lock")
                        .as_ref()
                        .map(|i| i.1.clone())
                        .unwrap_or_default();
                    let created = start(Creation {
                        session: session.clone(),
                        req: req.clone(),
                        ctx_modern: None,
                        progress_token: progress_token.cloned(),
                        params: params.map(|p| p.to_owned()),
                        owner: owner(),
                        form: Form::Legacy,
                        caps,
                        ttl_ms: t.ttl,
                    })
                    .await;
                    Some(created.map(|r| {
                        let mut meta = JsonObject::new();
                        meta.insert(RELATED_TASK_META.into(), json!({ "taskId": r.id }));
                        raw(&json!({
                            "task": Value::Object(task_json(&r, Form::Legacy)),
                            "_meta": meta,
                        }))
                    }))
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// 2025-11-25 `tasks/result`: waits for the task to end, then answers what the request would
/// have answered (its result, with the task named in `_meta`, or its error).
async fn result(
    server: &Server,
    req: &RequestContext,
    owner: &str,
    params: Option<&RawValue>,
) -> Result<Box<RawValue>, ErrorObject> {
    let p: TaskIdParams = from_params(params)?;
    let mut r = get(server, owner, &p.task_id).await?;
    while !r.status.is_terminal() {
        let live = server.engine().running(&r.id);
        match live {
            Some(l) => {
                let mut done = l.done.subscribe();
                tokio::select! {
                    _ = done.wait_for(|d| *d) => {}
                    _ = req.cancel.cancelled() => {
                        return Err(ErrorObject::new(RpcErrorCode::INVALID_REQUEST, "Request cancelled"));
                    }
                }
            }
            // Another process runs it: poll at the task's interval.
            None => tokio::time::sleep(Duration::from_millis(r.poll_interval_ms.max(10))).await,
        }
        r = get(server, owner, &p.task_id).await?;
    }
    crate::tasks::final_response(r).map(|v| raw(&v))
}
