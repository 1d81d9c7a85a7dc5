//! The client's 2026-07-28 path: choosing the era (the `server/discover` probe of auto mode),
//! the per-request envelope and HTTP headers, the `input_required` loop answered by the same
//! sampling, elicitation and roots handlers as the handshake era, caching by `ttlMs`, and the
//! `subscriptions/listen` stream that keeps the catalogs in sync.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::ClientService;
use crate::error::Error;
use crate::jsonrpc::{RequestId, RpcErrorCode};
use crate::modern::envelope::{request_meta, UnsupportedVersionData};
use crate::modern::raw;
use crate::modern::{
    canonical_json, headers, meta, methods as modern_methods, result, CacheScope, DiscoverResult,
    InputRequest, SubscriptionFilter, CACHEABLE_METHODS, INPUT_REQUIRED_METHODS, RESULT_COMPLETE,
    RESULT_INPUT_REQUIRED,
};
use crate::session::{Peer, RequestOptions};
use crate::types::{methods, ClientCapabilities, Implementation, LoggingLevel, Tool};
use crate::version::ProtocolVersion;

/// Which revision a client speaks, and how it finds out.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ProtocolMode {
    /// The `initialize` handshake at [`ClientOptions::protocol_version`](super::ClientOptions)
    /// (the default: what every server before 2026-07-28 speaks).
    #[default]
    Legacy,
    /// Probe with `server/discover` at the newest modern revision and speak it when the server
    /// does; otherwise (any error, a result that is not a discover result, no shared modern
    /// version, no answer within the probe timeout) fall back to the handshake.
    Auto,
    /// Speak this modern revision and nothing else: no probe, no fallback (the connection
    /// still asks `server/discover` for the server's capabilities).
    Pinned(ProtocolVersion),
}

impl std::fmt::Display for ProtocolMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProtocolMode::Legacy => f.write_str("legacy"),
            ProtocolMode::Auto => f.write_str("auto"),
            ProtocolMode::Pinned(v) => write!(f, "pinned {v}"),
        }
    }
}

/// Whether a cacheable request may be answered from the client's cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CacheMode {
    /// A fresh cached result (within its `ttlMs`, not invalidated by a notification) is used;
    /// otherwise the server is asked and the answer cached.
    #[default]
    Use,
    /// The server is asked and the answer cached.
    Refresh,
    /// The server is asked and nothing is cached.
    Bypass,
}

/// The most results one connection caches.
const CACHE_ENTRIES: usize = 1024;
/// How long the auto-mode probe waits for an answer before taking the server for a legacy one.
pub(super) const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

struct Entry {
    stored: Instant,
    ttl: Duration,
    result: Box<RawValue>,
}

/// The state of a connection that speaks the modern revision.
pub(crate) struct Modern {
    /// The revision every request declares.
    pub version: String,
    pub client_info: Implementation,
    pub capabilities: ClientCapabilities,
    /// The level asked of the server on every request (`logging/setLevel` is gone).
    pub log_level: Mutex<Option<LoggingLevel>>,
    /// The bound on `input_required` rounds of one call.
    pub max_rounds: usize,
    /// Results by method and params, with the time they were received and their TTL.
    cache: Mutex<HashMap<String, Entry>>,
    /// Acknowledgments of `subscriptions/listen`: the filter the server agreed to, by id.
    acks: Mutex<Vec<(RequestId, SubscriptionFilter)>>,
    acked: Notify,
    /// Ends the catalog subscription when the connection closes.
    pub stop: CancellationToken,
    /// How often the catalog subscription was (re)established.
    pub listens: AtomicU64,
    /// Whether list changes reach the client now: the catalog subscription is acknowledged and
    /// has not ended (or the server declares no list that can change).
    pub following: AtomicBool,
}

impl Modern {
    pub fn new(
        version: String,
        client_info: Implementation,
        capabilities: ClientCapabilities,
        max_rounds: usize,
    ) -> Modern {
        Modern {
            version,
            client_info,
            capabilities,
            log_level: Mutex::new(None),
            max_rounds,
            cache: Mutex::new(HashMap::new()),
            acks: Mutex::new(Vec::new()),
            acked: Notify::new(),
            stop: CancellationToken::new(),
            listens: AtomicU64::new(0),
            following: AtomicBool::new(false),
        }
    }

    /// `params` with the envelope in `_meta` (kept beside what the caller put there), and the
    /// HTTP headers the request carries (ignored by the other transports).
    fn envelope(&self, method: &str, mut params: Value) -> (Value, Vec<(String, String)>) {
        if !params.is_object() {
            params = Value::Object(Default::default());
        }
        let obj = params.as_object_mut().expect("an object");
        let level = *self.log_level.lock().expect("level lock");
        let mut m = request_meta(&self.version, &self.client_info, &self.capabilities, level);
        if let Some(Value::Object(existing)) = obj.remove("_meta") {
            for (k, v) in existing {
                // Extensions the caller declares for this one request join the capabilities.
                if let (meta::CLIENT_CAPABILITIES, Some(Value::Object(ext))) =
                    (k.as_str(), v.get("extensions"))
                {
                    if let Some(Value::Object(caps)) = m.get_mut(meta::CLIENT_CAPABILITIES) {
                        let mine = caps
                            .entry("extensions")
                            .or_insert_with(|| Value::Object(Default::default()));
                        if let Value::Object(mine) = mine {
                            for (name, settings) in ext {
                                mine.entry(name.clone()).or_insert(settings.clone());
                            }
                        }
                    }
                    continue;
                }
                m.entry(k).or_insert(v);
            }
        }
        obj.insert("_meta".into(), Value::Object(m));
        let mut h = vec![
            ("MCP-Protocol-Version".to_owned(), self.version.clone()),
            ("Mcp-Method".to_owned(), method.to_owned()),
        ];
        if let Some(key) = headers::name_param(method) {
            if let Some(v) = obj.get(key).and_then(Value::as_str) {
                h.push(("Mcp-Name".to_owned(), headers::encode_value(v)));
            }
        }
        (params, h)
    }

    fn cache_key(method: &str, params: &Value) -> String {
        let mut p = params.clone();
        if let Some(o) = p.as_object_mut() {
            o.remove("_meta");
        }
        format!("{method}\n{}", canonical_json(&p))
    }

    fn cached(&self, key: &str) -> Option<Box<RawValue>> {
        let cache = self.cache.lock().expect("cache lock");
        cache
            .get(key)
            .filter(|e| e.stored.elapsed() < e.ttl)
            .map(|e| e.result.clone())
    }

    fn store(&self, key: String, result: &RawValue) {
        #[derive(serde::Deserialize)]
        struct Hint {
            #[serde(default, rename = "ttlMs")]
            ttl_ms: Option<i64>,
            #[serde(default, rename = "cacheScope")]
            _scope: Option<CacheScope>,
        }
        let ttl = serde_json::from_str::<Hint>(result.get())
            .ok()
            .and_then(|h| h.ttl_ms)
            .unwrap_or(0)
            .max(0);
        if ttl == 0 {
            return;
        }
        let mut cache = self.cache.lock().expect("cache lock");
        if cache.len() >= CACHE_ENTRIES && !cache.contains_key(&key) {
            let oldest = cache
                .iter()
                .min_by_key(|(_, e)| e.stored)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                cache.remove(&k);
            }
        }
        cache.insert(
            key,
            Entry {
                stored: Instant::now(),
                ttl: Duration::from_millis(u64::try_from(ttl).unwrap_or(0)),
                result: result.to_owned(),
            },
        );
    }

    /// Drops what a notification made stale: every cached page of a list that changed, or the
    /// read of a resource that was updated.
    pub fn invalidate(&self, method: &str, params: Option<&Value>) {
        let mut cache = self.cache.lock().expect("cache lock");
        let prefixes: &[&str] = match method {
            methods::TOOLS_LIST_CHANGED => &[methods::TOOLS_LIST],
            methods::PROMPTS_LIST_CHANGED => &[methods::PROMPTS_LIST],
            methods::RESOURCES_LIST_CHANGED => {
                &[methods::RESOURCES_LIST, methods::RESOURCES_TEMPLATES_LIST]
            }
            methods::RESOURCE_UPDATED => {
                let uri = params
                    .and_then(|p| p.get("uri"))
                    .cloned()
                    .unwrap_or(Value::Null);
                let key =
                    Self::cache_key(methods::RESOURCES_READ, &serde_json::json!({ "uri": uri }));
                cache.remove(&key);
                return;
            }
            _ => return,
        };
        cache.retain(|k, _| !prefixes.iter().any(|p| k.split('\n').next() == Some(*p)));
    }

    /// Records a `notifications/subscriptions/acknowledged`.
    pub fn acknowledged(&self, params: &Value) {
        let id = params
            .get("_meta")
            .and_then(|m| m.get(meta::SUBSCRIPTION_ID))
            .and_then(|v| serde_json::from_value::<RequestId>(v.clone()).ok());
        let filter = params
            .get("notifications")
            .and_then(|n| serde_json::from_value::<SubscriptionFilter>(n.clone()).ok())
            .unwrap_or_default();
        if let Some(id) = id {
            let mut acks = self.acks.lock().expect("acks lock");
            acks.push((id, filter));
            // Only the newest acknowledgments matter; keep the list bounded.
            let n = acks.len();
            if n > 64 {
                acks.drain(..n - 64);
            }
        }
        self.acked.notify_waiters();
    }

    /// Waits (up to `timeout`) for an acknowledgment after `seen` whose filter `wants` accepts.
    async fn wait_ack(
        &self,
        seen: usize,
        wants: impl Fn(&SubscriptionFilter) -> bool,
        timeout: Duration,
    ) -> Option<SubscriptionFilter> {
        let deadline = Instant::now() + timeout;
        loop {
            let notified = self.acked.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(f) = self
                .acks
                .lock()
                .expect("acks lock")
                .iter()
                .skip(seen)
                .find(|(_, f)| wants(f))
                .map(|(_, f)| f.clone())
            {
                return Some(f);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return None;
            }
        }
    }

    fn acks_seen(&self) -> usize {
        self.acks.lock().expect("acks lock").len()
    }
}

/// The `Mcp-Param-*` headers of a call to `tool` with `arguments`, from the catalog's schema.
pub(super) fn param_headers(
    tools: &[Tool],
    tool: &str,
    arguments: &Value,
) -> Vec<(String, String)> {
    tools
        .iter()
        .find(|t| t.name == tool)
        .and_then(|t| headers::param_headers(&Value::Object(t.input_schema.clone())).ok())
        .map(|hs| headers::param_header_values(&hs, arguments))
        .unwrap_or_default()
}

/// Keeps only the tools a conforming client may call over Streamable HTTP: a tool whose
/// `x-mcp-header` annotations are invalid is dropped.
pub(super) fn drop_invalid_header_tools(tools: Vec<Tool>) -> Vec<Tool> {
    tools
        .into_iter()
        .filter(|t| headers::param_headers(&Value::Object(t.input_schema.clone())).is_ok())
        .collect()
}

/// Sends one modern request and drives its `input_required` rounds to the end.
pub(super) async fn call(
    service: &Arc<ClientService>,
    modern: &Modern,
    peer: &Peer,
    method: &str,
    params: &(impl Serialize + ?Sized),
    options: RequestOptions,
    cache: CacheMode,
) -> Result<Box<RawValue>, Error> {
    send(service, modern, peer, method, params, options, cache, true).await
}

/// Sends one modern request; with `rounds`, drives its `input_required` rounds to the end,
/// otherwise returns whatever result comes (for callers that drive the rounds themselves).
#[allow(clippy::too_many_arguments)]
pub(super) async fn send(
    service: &Arc<ClientService>,
    modern: &Modern,
    peer: &Peer,
    method: &str,
    params: &(impl Serialize + ?Sized),
    options: RequestOptions,
    cache: CacheMode,
    drive: bool,
) -> Result<Box<RawValue>, Error> {
    let params = serde_json::to_value(params)
        .map_err(|e| Error::Protocol(format!("params of {method}: {e}")))?;
    let key = (CACHEABLE_METHODS.contains(&method) && cache != CacheMode::Bypass)
        .then(|| Modern::cache_key(method, &params));
    if let (Some(k), CacheMode::Use) = (&key, cache) {
        if let Some(hit) = modern.cached(k) {
            return Ok(hit);
        }
    }
    let extra = options.headers.clone();
    let (mut params, mut hdrs) = modern.envelope(method, params);
    hdrs.extend(extra);
    let mut rounds = 0usize;
    let mut backoff = Duration::from_millis(50);
    loop {
        let mut opts = options.clone();
        opts.headers = hdrs.clone();
        let raw = peer.request_raw(method, Some(raw(&params)), opts).await?;
        let kind = result::result_type(&raw);
        if !drive {
            return Ok(raw);
        }
        // A task (the tasks extension) is the caller's to follow, as a complete result is.
        if kind == RESULT_COMPLETE
            || (kind == "task" && method == crate::types::methods::TOOLS_CALL)
        {
            if let Some(k) = key {
                modern.store(k, &raw);
            }
            return Ok(raw);
        }
        if kind != RESULT_INPUT_REQUIRED || !INPUT_REQUIRED_METHODS.contains(&method) {
            return Err(Error::Protocol(format!(
                "{method} answered with resultType {kind:?}, which this client does not know here"
            )));
        }
        rounds += 1;
        if rounds > modern.max_rounds {
            return Err(Error::InputRoundsExceeded(modern.max_rounds));
        }
        #[derive(serde::Deserialize)]
        struct InputRequired {
            #[serde(default, rename = "inputRequests")]
            input_requests: Option<serde_json::Map<String, Value>>,
            #[serde(default, rename = "requestState")]
            request_state: Option<String>,
        }
        let ir: InputRequired = serde_json::from_str(raw.get())
            .map_err(|e| Error::Protocol(format!("invalid input_required result: {e}")))?;
        let obj = params.as_object_mut().expect("an object");
        match ir.input_requests.filter(|r| !r.is_empty()) {
            Some(requests) => {
                backoff = Duration::from_millis(50);
                let answers = answer_all(service, requests).await?;
                obj.insert("inputResponses".into(), Value::Object(answers));
            }
            None => {
                // State only: the server wants the same request again a little later.
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_millis(250));
                obj.remove("inputResponses");
            }
        }
        match ir.request_state {
            Some(s) => obj.insert("requestState".into(), Value::String(s)),
            None => obj.remove("requestState"),
        };
    }
}

/// Answers every input request with the client's handlers, concurrently; the first refusal
/// fails the call.
pub(super) async fn answer_all(
    service: &Arc<ClientService>,
    requests: serde_json::Map<String, Value>,
) -> Result<serde_json::Map<String, Value>, Error> {
    let tasks: Vec<_> = requests
        .into_iter()
        .map(|(key, req)| {
            let service = service.clone();
            tokio::spawn(async move {
                let request = InputRequest::from_value(&req).map_err(Error::Protocol)?;
                let params = req
                    .get("params")
                    .map(raw)
                    .unwrap_or_else(|| raw(&serde_json::json!({})));
                let answer = service
                    .answer(request.method().to_owned(), Some(params))
                    .await
                    .map_err(Error::Rpc)?;
                let value: Value = serde_json::from_str(answer.get())
                    .map_err(|e| Error::Protocol(e.to_string()))?;
                Ok::<_, Error>((key, value))
            })
        })
        .collect();
    // Dropped early (a refusal), the rest are aborted: no answer is wanted any more.
    let guards: Vec<_> = tasks
        .iter()
        .map(|t| AbortOnDrop(t.abort_handle()))
        .collect();
    let mut answers = Vec::with_capacity(tasks.len());
    for t in tasks {
        answers.push(
            t.await
                .map_err(|e| Error::Protocol(format!("an input handler failed: {e}")))?,
        );
    }
    drop(guards);
    answers.into_iter().collect()
}

struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What the probe found.
pub(super) enum Probe {
    /// A modern server: the version to speak and its discover result.
    Modern(String, Box<DiscoverResult>),
    /// Not positive evidence of a modern server: speak the handshake.
    Legacy,
}

/// Sends `server/discover` at `version` as a plain request (no rounds, no cache).
pub(super) async fn discover(
    modern: &Modern,
    peer: &Peer,
    timeout: Duration,
) -> Result<Box<RawValue>, Error> {
    let (params, hdrs) =
        modern.envelope(modern_methods::DISCOVER, Value::Object(Default::default()));
    let mut opts = RequestOptions::default().timeout(timeout);
    opts.headers = hdrs;
    peer.request_raw(modern_methods::DISCOVER, Some(raw(&params)), opts)
        .await
}

/// The mutual modern versions of a -32022's data, newest last.
pub(super) fn mutual_versions(e: &crate::jsonrpc::ErrorObject) -> Option<(Vec<String>, bool)> {
    let data: UnsupportedVersionData = serde_json::from_value(e.data.clone()?).ok()?;
    let mutual: Vec<String> = crate::modern::modern_versions()
        .into_iter()
        .filter(|v| data.supported.contains(v))
        .collect();
    let names_handshake = data
        .supported
        .iter()
        .any(|s| crate::modern::is_handshake(s));
    Some((mutual, names_handshake))
}

/// The auto-mode probe: `server/discover` at the newest modern revision (once more at a version
/// the server names in -32022). Transport failures are errors, never an era verdict.
pub(super) async fn probe(
    client_info: &Implementation,
    capabilities: &ClientCapabilities,
    peer: &Peer,
    timeout: Duration,
) -> Result<Probe, Error> {
    let mut version = crate::modern::newest_modern().to_owned();
    for attempt in 0..2 {
        let m = Modern::new(
            version.clone(),
            client_info.clone(),
            capabilities.clone(),
            0,
        );
        match discover(&m, peer, timeout).await {
            Ok(raw) => {
                let Ok(d) = serde_json::from_str::<DiscoverResult>(raw.get()) else {
                    return Ok(Probe::Legacy);
                };
                if d.supported_versions.contains(&version) {
                    return Ok(Probe::Modern(version, Box::new(d)));
                }
                let mutual = crate::modern::modern_versions()
                    .into_iter()
                    .rev()
                    .find(|v| d.supported_versions.contains(v));
                return Ok(match mutual {
                    Some(v) => Probe::Modern(v, Box::new(d)),
                    None => Probe::Legacy,
                });
            }
            Err(Error::Rpc(e)) if e.code == RpcErrorCode::UNSUPPORTED_PROTOCOL_VERSION => {
                match mutual_versions(&e) {
                    Some((mutual, _)) if !mutual.is_empty() && attempt == 0 => {
                        version = mutual[mutual.len() - 1].clone();
                        continue;
                    }
                    Some((_, false)) => {
                        // The server speaks only revisions purra does not: the newest it names.
                        let theirs = e
                            .data
                            .as_ref()
                            .and_then(|d| d.get("supported")?.as_array()?.last()?.as_str())
                            .unwrap_or(version.as_str());
                        return Err(Error::UnsupportedProtocolVersion(ProtocolVersion::new(
                            theirs,
                        )));
                    }
                    _ => return Ok(Probe::Legacy),
                }
            }
            Err(
                Error::Rpc(_) | Error::Http { .. } | Error::InvalidResponse(_) | Error::Timeout,
            ) => return Ok(Probe::Legacy),
            Err(e) => return Err(e),
        }
    }
    Ok(Probe::Legacy)
}

/// Opens a `subscriptions/listen` for `filter`, keeps it open, and opens it again (after a
/// pause that grows to 30 s) when it ends while the connection lives. Every reopening is
/// followed by the `list_changed` notifications of the filter's kinds, since changes made
/// while it was closed were missed. `opened` is notified of the first acknowledgment.
pub(super) fn keep_listening(
    service: Arc<ClientService>,
    modern: Arc<Modern>,
    peer: Peer,
    filter: SubscriptionFilter,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut pause = Duration::from_millis(250);
        let mut first = true;
        loop {
            let seen = modern.acks_seen();
            let listen = send_listen(&service, &modern, &peer, &filter);
            tokio::pin!(listen);
            // Wait for the acknowledgment (or the stream's end), then catch up if reopened.
            let acked = tokio::select! {
                _ = modern.stop.cancelled() => return,
                r = &mut listen => { let _ = r; false }
                a = modern.wait_ack(seen, |f| covers(f, &filter), Duration::from_secs(60)) => a.is_some(),
            };
            if acked {
                modern.following.store(true, Ordering::SeqCst);
                modern.listens.fetch_add(1, Ordering::Relaxed);
                if !first {
                    super::synthesize_list_changed(&service, &peer, &filter);
                }
                first = false;
                pause = Duration::from_millis(250);
                tokio::select! {
                    _ = modern.stop.cancelled() => return,
                    _ = &mut listen => {}
                }
                // From here on changes go unseen until the stream reopens: the early listeners
                // hear of it now (a host that must not act on a list it cannot follow).
                modern.following.store(false, Ordering::SeqCst);
                if !peer.is_closed() {
                    super::signal_unfollowed(&service, &filter);
                }
            }
            if peer.is_closed() {
                return;
            }
            tokio::select! {
                _ = modern.stop.cancelled() => return,
                _ = tokio::time::sleep(pause) => {}
            }
            pause = (pause * 2).min(Duration::from_secs(30));
        }
    })
}

/// Whether an acknowledged filter answers a request for `wanted` (same list kinds asked).
fn covers(ack: &SubscriptionFilter, wanted: &SubscriptionFilter) -> bool {
    let same = |a: Option<bool>, w: Option<bool>| w != Some(true) || a == Some(true);
    same(ack.tools_list_changed, wanted.tools_list_changed)
        && same(ack.prompts_list_changed, wanted.prompts_list_changed)
        && same(ack.resources_list_changed, wanted.resources_list_changed)
        && wanted.resource_subscriptions.as_ref().is_none_or(|w| {
            w.iter().all(|u| {
                ack.resource_subscriptions
                    .as_ref()
                    .is_some_and(|a| a.contains(u))
            })
        })
        // A task the server does not know is left out of its acknowledgment: any answer to a
        // task request settles it.
        && (wanted.task_ids.is_none() || ack.task_ids.is_some() || ack.is_empty())
}

/// One `subscriptions/listen` request: resolves when the server ends it (or it fails). A filter
/// that follows tasks declares the tasks extension on the request.
async fn send_listen(
    service: &Arc<ClientService>,
    modern: &Modern,
    peer: &Peer,
    filter: &SubscriptionFilter,
) -> Result<Box<RawValue>, Error> {
    // The answer comes only when the stream ends: no timeout (closing the connection, or
    // dropping this future, cancels it).
    let options = RequestOptions::default().timeout(Duration::from_secs(100 * 365 * 24 * 3600));
    let mut params = serde_json::json!({ "notifications": filter });
    if filter.task_ids.is_some() {
        params["_meta"] = serde_json::json!({
            meta::CLIENT_CAPABILITIES: { "extensions": { crate::extensions::TASKS: {} } }
        });
    }
    call(
        service,
        modern,
        peer,
        modern_methods::SUBSCRIPTIONS_LISTEN,
        &params,
        options,
        CacheMode::Bypass,
    )
    .await
}

/// A subscription to one resource's updates: its own listen stream, until cancelled.
pub(super) async fn subscribe_resource(
    service: Arc<ClientService>,
    modern: Arc<Modern>,
    peer: Peer,
    uri: String,
    timeout: Duration,
) -> Result<CancellationToken, Error> {
    let filter = SubscriptionFilter {
        resource_subscriptions: Some(vec![uri]),
        ..Default::default()
    };
    subscribe(service, modern, peer, filter, timeout)
        .await
        .map(|(stop, _)| stop)
}

/// A listen stream of its own for `filter`, open once the server acknowledged it: the token that
/// ends it and what the server acknowledged.
pub(super) async fn subscribe(
    service: Arc<ClientService>,
    modern: Arc<Modern>,
    peer: Peer,
    filter: SubscriptionFilter,
    timeout: Duration,
) -> Result<(CancellationToken, SubscriptionFilter), Error> {
    let stop = CancellationToken::new();
    let seen = modern.acks_seen();
    let (done_tx, mut done_rx) = tokio::sync::oneshot::channel();
    {
        let stop = stop.clone();
        let (service, modern, peer, filter) = (
            service.clone(),
            modern.clone(),
            peer.clone(),
            filter.clone(),
        );
        tokio::spawn(async move {
            tokio::select! {
                r = send_listen(&service, &modern, &peer, &filter) => { let _ = done_tx.send(r); }
                _ = stop.cancelled() => {}
                _ = modern.stop.cancelled() => {}
            }
        });
    }
    tokio::select! {
        ack = modern.wait_ack(seen, |f| covers(f, &filter), timeout) => match ack {
            Some(ack) => Ok((stop, ack)),
            None => {
                stop.cancel();
                Err(Error::Timeout)
            }
        },
        r = &mut done_rx => {
            stop.cancel();
            match r {
                Ok(Err(e)) => Err(e),
                _ => Err(Error::Protocol("the server ended the subscription before acknowledging it".into())),
            }
        }
    }
}
