//! The server's 2026-07-28 path: one request at a time, each with its own envelope, whatever the
//! transport. A stream connection (stdio, WebSocket) whose first request carried the envelope
//! comes here for every request; the Streamable HTTP server comes here for each POST whose
//! headers name the revision.
//!
//! Handlers are the same as in the handshake era: they get a [`RequestCtx`] whose version,
//! capabilities, client and log level come from the request, and whose sampling, elicitation and
//! roots calls become `input_required` rounds (see `mrtr`).

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::Value;

use super::listen;
use super::mrtr::{self, Outcome, Round};
use super::{RequestCtx, SessionState};
use crate::jsonrpc::{ErrorObject, RpcErrorCode};
use crate::modern::envelope::{classify, unsupported_version, RequestEnvelope};
use crate::modern::raw;
use crate::modern::{
    headers, methods as modern_methods, result, DiscoverResult, CACHEABLE_METHODS,
    INPUT_REQUIRED_METHODS, REMOVED_METHODS,
};
use crate::session::RequestContext;
use crate::types::methods;

/// What a handler's [`RequestCtx`] knows about its 2026-07-28 request.
pub(crate) struct Scope {
    /// The request's declared version, capabilities, client and log level.
    pub envelope: RequestEnvelope,
    /// The request's method.
    pub method: String,
    /// The multi round-trip state, on the methods that may answer `input_required`.
    pub round: Option<Arc<Round>>,
    /// How many unnamed input calls the handler made (their keys count up).
    pub input_calls: AtomicUsize,
    /// Where a call of an `input_before_task` tool becomes a task (see `RequestCtx::start_task`).
    pub escalation: Option<Arc<Escalation>>,
}

/// A call that may become a task midway: the handler asks, the server creates the task.
#[derive(Debug, Default)]
pub(crate) struct Escalation {
    /// The handler asked for the task.
    pub requested: std::sync::atomic::AtomicBool,
    /// The task, once created.
    pub task: std::sync::OnceLock<Arc<super::tasks::Live>>,
    /// Wakes the handler when the task exists.
    pub ready: tokio::sync::Notify,
}

/// What only a Streamable HTTP request brings: its `Mcp-Param-*` headers and its principal.
#[derive(Debug, Clone, Default)]
pub(crate) struct Extras {
    /// `Mcp-Param-*` headers, names lowercased, values as sent; `None` off HTTP.
    pub param_headers: Option<Vec<(String, String)>>,
    /// The authenticated principal.
    pub principal: Option<String>,
}

/// A request on a stream connection that is in the 2026-07-28 revision.
pub(super) async fn serve_on_connection(
    session: Arc<SessionState>,
    req: RequestContext,
    method: String,
    params: Option<Box<RawValue>>,
) -> Result<Box<RawValue>, ErrorObject> {
    if method == methods::INITIALIZE {
        // The connection's first request chose the modern revision; a handshake now is a client
        // that lost track: name what this connection speaks.
        #[derive(serde::Deserialize)]
        struct P {
            #[serde(default, rename = "protocolVersion")]
            version: Option<String>,
        }
        let requested = params
            .as_deref()
            .and_then(|p| serde_json::from_str::<P>(p.get()).ok())
            .and_then(|p| p.version)
            .unwrap_or_default();
        let mut e = unsupported_version(&requested);
        e.message = "Unsupported protocol version: this connection speaks 2026-07-28 and accepts no initialize handshake".into();
        return Err(e);
    }
    let envelope = classify(&method, params.as_deref(), None)?;
    // The engine's request span learns the revision here (the handshake's is the connection's).
    tracing::Span::current().record("revision", envelope.protocol_version.as_str());
    serve(session, req, method, params, envelope, Extras::default()).await
}

/// Serves one classified 2026-07-28 request and shapes its result (`resultType`, the server's
/// identity, caching hints).
async fn serve(
    session: Arc<SessionState>,
    req: RequestContext,
    method: String,
    params: Option<Box<RawValue>>,
    envelope: RequestEnvelope,
    extras: Extras,
) -> Result<Box<RawValue>, ErrorObject> {
    let server = session.server.clone();
    server.admit(&req, &method)?;
    let inner = &server.inner;
    let info = &inner.info;
    if REMOVED_METHODS.contains(&method.as_str()) {
        return Err(ErrorObject::method_not_found(&method));
    }
    if method == modern_methods::DISCOVER {
        return Ok(result::complete_with(
            discover(&server.capabilities(), inner.instructions.clone()),
            Some(&inner.info_json),
            Some(hint(&server, &method)),
        ));
    }
    if method == modern_methods::SUBSCRIPTIONS_LISTEN {
        let r = listen::listen(
            &session,
            &req,
            params.as_deref(),
            &envelope,
            extras.principal.as_deref(),
        )
        .await?;
        return Ok(result::complete_with(r, Some(&inner.info_json), None));
    }
    if let (Some(sent), methods::TOOLS_CALL) = (&extras.param_headers, method.as_str()) {
        check_param_headers(&session, params.as_deref(), sent)?;
    }
    if method.starts_with("tasks/") || method == methods::TOOLS_CALL {
        let principal = extras.principal.as_deref();
        if let Some(r) = super::tasks::route_extension(
            &session,
            &req,
            &method,
            params.as_deref(),
            &envelope,
            principal,
        )
        .await
        {
            return r.map(|r| result::complete_with(r, Some(&inner.info_json), None));
        }
    }
    let round = if INPUT_REQUIRED_METHODS.contains(&method.as_str()) {
        Some(Arc::new(Round::open(
            &inner.request_state,
            &method,
            params.as_deref(),
            &info.name,
            extras.principal,
            envelope.client_capabilities.clone(),
        )?))
    } else {
        None
    };
    let progress_token = envelope.progress_token.clone();
    let scope = Arc::new(Scope {
        envelope,
        method: method.clone(),
        round: round.clone(),
        input_calls: AtomicUsize::new(0),
        escalation: None,
    });
    let ctx = RequestCtx {
        req,
        session: session.clone(),
        progress_token,
        modern: Some(scope),
        task: None,
    };
    let caps = server.advertised();
    let fut = session.serve(ctx, method.clone(), params, caps);
    let outcome = match round {
        Some(round) => mrtr::run(round, fut).await,
        None => fut.await.map(Outcome::Complete),
    };
    match outcome {
        Ok(Outcome::Complete(r)) => {
            let cache = (CACHEABLE_METHODS.contains(&method.as_str())
                || SKILLS_CACHEABLE.contains(&method.as_str()))
            .then(|| hint(&server, &method));
            Ok(result::complete_with(r, Some(&inner.info_json), cache))
        }
        Ok(Outcome::InputRequired(r)) => Ok(result::complete_with(r, Some(&inner.info_json), None)),
        Err(e) => Err(modern_error(e)),
    }
}

/// The Skills extension's results, which carry the caching attributes as `resources/read`'s do
/// (SEP-2640 with SEP-2549).
pub(crate) const SKILLS_CACHEABLE: [&str; 3] = [
    crate::skills::methods::LIST,
    crate::skills::methods::GET,
    crate::skills::methods::DIRECTORY_READ,
];

/// The caching hint of `method`'s results (default: immediately stale, private).
fn hint(server: &super::Server, method: &str) -> crate::modern::CacheHint {
    server
        .inner
        .cache_hints
        .get(method)
        .copied()
        .unwrap_or_default()
}

/// The revision's codes for what the handshake era answered differently.
fn modern_error(mut e: ErrorObject) -> ErrorObject {
    if e.code == RpcErrorCode::RESOURCE_NOT_FOUND {
        // 2026-07-28 answers a missing resource with -32602, keeping the URI in data.
        e.code = RpcErrorCode::INVALID_PARAMS;
    }
    e
}

fn discover(
    caps: &crate::types::ServerCapabilities,
    instructions: Option<String>,
) -> Box<RawValue> {
    // The handshake era's `tasks` capability is the extension's here.
    let mut caps = caps.clone();
    caps.tasks = None;
    raw(&DiscoverResult {
        supported_versions: crate::modern::modern_versions(),
        capabilities: caps,
        instructions,
        ttl_ms: None,
        cache_scope: None,
        meta: None,
    })
}

/// The `Mcp-Param-*` rule: a `tools/call` over HTTP mirrors every annotated argument.
fn check_param_headers(
    session: &SessionState,
    params: Option<&RawValue>,
    sent: &[(String, String)],
) -> Result<(), ErrorObject> {
    #[derive(serde::Deserialize)]
    struct Call<'a> {
        #[serde(borrow)]
        name: std::borrow::Cow<'a, str>,
        #[serde(default, borrow)]
        arguments: Option<&'a RawValue>,
    }
    let inner = &session.server.inner;
    if !inner
        .header_tools
        .load(std::sync::atomic::Ordering::Acquire)
    {
        return Ok(()); // no tool annotates any argument
    }
    let Some(call) = params.and_then(|p| serde_json::from_str::<Call<'_>>(p.get()).ok()) else {
        return Ok(()); // malformed params are the handler's -32602
    };
    let entry = inner
        .tools
        .read()
        .expect("tools lock")
        .get(call.name.as_ref());
    let Some(entry) = entry else { return Ok(()) };
    let annotated = &entry.param_headers;
    if annotated.is_empty() {
        // Nothing to mirror: the arguments are not read here (the handler reads them).
        return Ok(());
    }
    let args = match call.arguments.map(|raw| serde_json::from_str(raw.get())) {
        Some(Ok(v)) => v,
        Some(Err(_)) => return Ok(()), // the handler's -32602, as above
        None => Value::Object(Default::default()),
    };
    headers::check_param_headers(annotated, &args, sent)
}

/// Serves 2026-07-28 requests that arrive outside any connection: each Streamable HTTP POST is
/// one exchange, with its own peer for what the handler sends before its result.
#[cfg(feature = "http-server")]
#[derive(Clone)]
pub(crate) struct Exchanges {
    state: Arc<SessionState>,
}

#[cfg(feature = "http-server")]
impl super::Server {
    /// The exchange front of this server (one per HTTP server).
    pub(crate) fn exchanges(&self) -> Exchanges {
        Exchanges {
            state: Arc::new(SessionState {
                key: u64::MAX,
                server: self.clone(),
                peer: std::sync::OnceLock::new(),
                initialized: std::sync::atomic::AtomicBool::new(false),
                init: std::sync::RwLock::new(None),
                log_level: std::sync::Mutex::new(None),
                subscriptions: std::sync::Mutex::new(Default::default()),
                advertised: std::sync::atomic::AtomicU8::new(0),
                era: std::sync::atomic::AtomicU8::new(super::ERA_MODERN),
                on_change: std::sync::OnceLock::new(),
            }),
        }
    }
}

#[cfg(feature = "http-server")]
impl Exchanges {
    /// Serves one classified request (see [`serve`]).
    pub(crate) fn serve(
        &self,
        req: RequestContext,
        method: String,
        params: Option<Box<RawValue>>,
        envelope: RequestEnvelope,
        extras: Extras,
    ) -> crate::session::BoxFuture<'static, Result<Box<RawValue>, ErrorObject>> {
        use crate::telemetry::{answered, Facts, RequestOutcome, RequestRecord};
        use tracing::Instrument;
        // The same `request` span and observer as a connection's requests (the engine's).
        let span = tracing::debug_span!(
            "request",
            dir = "in",
            method = crate::telemetry::method_label(&method),
            id = %req.id,
            tool = tracing::field::Empty,
            revision = %envelope.protocol_version,
            outcome = tracing::field::Empty,
            otel.name = tracing::field::Empty,
            otel.kind = "server",
            otel.status_code = tracing::field::Empty,
        );
        let observer = self.state.server.inner.observer.clone();
        let traced = !span.is_disabled();
        if !traced && observer.is_none() {
            return Box::pin(serve(
                self.state.clone(),
                req,
                method,
                params,
                envelope,
                extras,
            ));
        }
        let target: Option<Box<str>> = {
            let facts = Facts::read(params.as_deref());
            let target = facts
                .target(&method)
                .filter(|t| self.state.server.knows_target(&method, t))
                .map(Box::from);
            if traced {
                span.record("tool", target.as_deref());
                span.record(
                    "otel.name",
                    crate::telemetry::span_name(
                        crate::telemetry::method_label(&method),
                        target.as_deref(),
                    )
                    .as_str(),
                );
                #[cfg(feature = "otel")]
                {
                    let meta = facts.meta.as_ref();
                    crate::telemetry::join_remote(
                        &span,
                        meta.and_then(|m| m.traceparent.as_deref()),
                        meta.and_then(|m| m.tracestate.as_deref()),
                    );
                }
            }
            target
        };
        let name = method.clone();
        let started = std::time::Instant::now();
        let fut = serve(self.state.clone(), req, method, params, envelope, extras);
        Box::pin(async move {
            let res = fut.instrument(span.clone()).await;
            let outcome = match &res {
                Ok(v) if target.is_some() && crate::telemetry::is_tool_error(v.get()) => {
                    RequestOutcome::ToolError
                }
                Ok(_) => RequestOutcome::Ok,
                Err(e) => RequestOutcome::Error(e.code),
            };
            let duration = started.elapsed();
            if traced {
                answered(&span, outcome, duration);
            }
            if let Some(observer) = observer {
                observer(&RequestRecord {
                    method: &name,
                    tool: target.as_deref(),
                    outcome,
                    duration,
                });
            }
            res
        })
    }
}
