//! The gateway: one MCP server whose tools are the bound upstream tools, under their local names.
//!
//! Starting connects every upstream and discovers its bindings (an upstream tool that is not
//! listed, or whose schema is outside the strict profile, is a configuration mistake reported
//! before anything is served, at the binding's key and line with the place in the tool and the
//! reason; a configuration without an upstream or a binding is one too; so are a read bound over
//! a tool the upstream marks `destructiveHint: true` or `readOnlyHint: false` without
//! `asserted_read_only = true`, and an argument rule on an argument the tool does not take). A
//! write bound with `effect = "write"` over a tool the upstream marks `destructiveHint: true`,
//! and an asserted read over one marked writing, are started with a warning through the [`Log`]. Each bound tool is registered on a purra-protocol [`Server`] with
//! its strict-profile schemas; nothing else upstream is visible. Reads run through Core's
//! `execute` and the adapter's bounded call; writes go through durable approvals ([`crate::runtime::write`]).
//!
//! An upstream's `tools/list_changed` makes its registrations stale at once (the adapter's
//! monitor); the gateway rediscovers in the background and between calls, replaces the
//! registrations whole, and changes the downstream tool list (which sends downstream
//! `list_changed`). An upstream whose connection closed is reconnected with backoff.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use purra_core::{
    execute, ApprovalGateway, ErrorCode, Execution, Lease, RunContext, RunId, RunStore,
    ScheduleLimits, StoreError,
};
use purra_protocol::types::{methods, CallToolResult, JsonObject, Tool};
use purra_protocol::{RequestCtx, Server};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::catalog::{Binding, Catalog};
use crate::config::ConfigSource;
use crate::config::{ApprovalBy, ConfigErrors, GatewayConfig, Listen, Settings};
use crate::rules::limit::CallLimiter;
use crate::rules::policy::Refusal;
use crate::rules::scope::Caller;
use crate::runtime::metrics::Metrics;
use crate::runtime::results;
use crate::runtime::secrets::AuthPlan;
use crate::runtime::store::{Decisions, GatewayStore};
use crate::runtime::webhooks::Webhooks;
use crate::upstream::{Bound, Upstream, UpstreamError};

/// Why the gateway did not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum StartError {
    /// The configuration has mistakes (each with its file, line and key).
    Config(ConfigErrors),
    /// The store failed.
    Store(StoreError),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Config(e) => e.fmt(f),
            StartError::Store(e) => write!(f, "the store failed: {e}"),
        }
    }
}

impl std::error::Error for StartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StartError::Config(e) => Some(e),
            StartError::Store(e) => Some(e),
        }
    }
}

/// Receives the gateway's operational messages (an upstream that cannot be reached, a store
/// that failed in the background); a library never prints on its own.
pub type Log = Arc<dyn Fn(&str) + Send + Sync>;

/// Options of [`Gateway::start_with`].
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct StartOptions {
    /// Where operational messages go (default: nowhere).
    pub log: Option<Log>,
    /// Whether a refused tool's mistake also shows the listed JSON around the refused place
    /// (a bounded excerpt of the upstream's schema; default false).
    pub excerpts: bool,
    /// Hears every webhook delivery attempt (for traces and metrics; default: none).
    pub webhook_observer: Option<crate::runtime::webhooks::Observer>,
}

impl StartOptions {
    /// Sends operational messages to `log`.
    pub fn log(mut self, log: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.log = Some(Arc::new(log));
        self
    }

    /// Shows the listed JSON around each refused place in the mistakes (see
    /// [`StartOptions::excerpts`]).
    pub fn excerpts(mut self, yes: bool) -> Self {
        self.excerpts = yes;
        self
    }

    /// Tells `observer` of every webhook delivery attempt (see
    /// [`StartOptions::webhook_observer`]).
    pub fn webhook_observer(
        mut self,
        observer: impl Fn(&crate::runtime::webhooks::Attempt) + Send + Sync + 'static,
    ) -> Self {
        self.webhook_observer = Some(Arc::new(observer));
        self
    }
}

impl std::fmt::Debug for StartOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StartOptions")
            .field("log", &self.log.is_some())
            .field("excerpts", &self.excerpts)
            .field("webhook_observer", &self.webhook_observer.is_some())
            .finish()
    }
}

/// A running gateway. Cheap to clone.
#[derive(Clone)]
pub struct Gateway {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("name", &self.inner.settings.name)
            .finish_non_exhaustive()
    }
}

pub(crate) struct Inner {
    pub settings: Settings,
    pub store: Arc<dyn GatewayStore>,
    pub approvals: Arc<dyn ApprovalGateway>,
    pub runs: Arc<dyn RunStore>,
    pub server: Server,
    /// What is served now: upstreams, bindings, policies (a reload replaces it whole).
    catalog: Arc<RwLock<Arc<Catalog>>>,
    /// Whether a refused tool's mistake shows the listed JSON (`StartOptions::excerpts`).
    pub excerpts: bool,
    /// The page's connect flow for the upstreams called with each principal's OAuth connection.
    pub connections: Option<Arc<purra_page::connect::Connections>>,
    /// One reload at a time.
    pub reloading: tokio::sync::Mutex<()>,
    /// Calls in flight, and whether the gateway is draining.
    pub drain: crate::runtime::drain::Drain,
    pub decisions: Decisions,
    /// Write runs a caller in this process is waiting on (the sweeper leaves them alone).
    pub waiting: Mutex<HashSet<RunId>>,
    /// One flow at a time per write run (identical concurrent calls queue).
    pub run_locks: Mutex<HashMap<RunId, Arc<tokio::sync::Mutex<()>>>>,
    /// What downstream clients are shown now, by local name.
    shown: Mutex<BTreeMap<String, Tool>>,
    /// Stops the background tasks.
    pub stop: CancellationToken,
    /// The guard of the HTTP listener (`[gateway.auth]`).
    pub auth: Option<AuthPlan>,
    /// The webhook endpoints this gateway delivers to.
    webhooks: Webhooks,
    /// The calls each principal made this minute (`max_calls_per_minute_per_caller`).
    calls: Arc<CallLimiter>,
    /// The other requests each principal made this minute (every one but `tools/call`), counted
    /// by the server's request gate.
    requests: Arc<CallLimiter>,
    log: Option<Log>,
    /// What the Prometheus endpoint and the OTLP exporter read.
    pub metrics: Arc<Metrics>,
    /// The bearer token a scrape of the Prometheus endpoint must carry
    /// (`[telemetry] metrics_token_file`), when one is configured.
    pub metrics_token: Option<String>,
    /// `/readyz`'s last store probe and when it was made (reused for
    /// [`crate::health::STORE_PROBE_CACHE`]). An async lock: concurrent checks wait for the one
    /// probe in flight instead of each reading the store.
    pub store_probe: tokio::sync::Mutex<Option<(std::time::Instant, Result<(), String>)>>,
    /// What `/readyz` last logged of why it is (not) ready, so a change is logged once.
    pub readiness_logged: Mutex<String>,
    weak: Weak<Inner>,
}

/// The longest pause between two reconnection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How often the sweeper looks at waiting writes whose caller has gone.
const SWEEP_INTERVAL: Duration = Duration::from_secs(1);
impl Gateway {
    /// Starts a gateway: checks the configuration, reconciles claims a killed process left,
    /// connects every upstream and discovers its bindings. Every mistake, including bound tools
    /// an upstream does not list, is reported at once (placed with `source`). Nothing is served
    /// yet: see [`Gateway::serve_stdio`] and [`Gateway::serve_http`].
    pub async fn start(
        config: GatewayConfig,
        source: &ConfigSource,
        store: Arc<dyn GatewayStore>,
    ) -> Result<Gateway, StartError> {
        Gateway::start_with(config, source, store, StartOptions::default()).await
    }

    /// [`Gateway::start`] with options.
    pub async fn start_with(
        config: GatewayConfig,
        source: &ConfigSource,
        store: Arc<dyn GatewayStore>,
        options: StartOptions,
    ) -> Result<Gateway, StartError> {
        let mut problems = config.check();
        problems.extend(config.check_serves());
        if !problems.is_empty() {
            return Err(StartError::Config(ConfigErrors(
                problems
                    .into_iter()
                    .map(|(k, m)| source.error(&k, m))
                    .collect(),
            )));
        }
        let auth = match &config.gateway.auth {
            Some(a) => Some(
                AuthPlan::read(a, source).map_err(|e| StartError::Config(ConfigErrors(vec![e])))?,
            ),
            None => None,
        };
        let webhooks = Webhooks::read(&config, source).map_err(StartError::Config)?;
        let metrics_token = match &config.telemetry.metrics_token_file {
            Some(file) => Some(
                crate::runtime::secrets::read_secret_file(file).map_err(|why| {
                    StartError::Config(ConfigErrors(vec![
                        source.error("telemetry.metrics_token_file", why)
                    ]))
                })?,
            ),
            None => None,
        };
        let deps = identity_deps(&config, source, store.as_ref())?;
        let built = crate::catalog::build(&config, source, options.excerpts, None, &deps)
            .await
            .map_err(StartError::Config)?;
        let catalog = built.catalog;

        if let Some(log) = &options.log {
            if deps.pins.is_none() {
                log(&catalog_serve_warning(&config));
            }
            for warning in crate::catalog::destructive_warnings(&catalog.bindings, source) {
                log(&warning);
            }
            for waiting in &built.waiting {
                log(waiting);
            }
        }

        // The store records events for exactly the configured endpoints from now on (before the
        // reconciliation below, whose interrupted claims are events too).
        let outbox = match store.outbox() {
            Some(outbox) => {
                outbox
                    .set_webhook_endpoints(webhooks.endpoints())
                    .await
                    .map_err(StartError::Store)?;
                Some(outbox)
            }
            None if !webhooks.is_empty() => {
                return Err(StartError::Config(ConfigErrors(vec![source.error(
                    "webhooks",
                    "the gateway's store keeps no webhook outbox (a SQLite or PostgreSQL store does)",
                )])))
            }
            None => None,
        };
        store
            .reconcile_interrupted(std::time::SystemTime::now())
            .await
            .map_err(StartError::Store)?;
        let mut builder = Server::builder(server_name(&config.gateway.name), env!("CARGO_PKG_VERSION"))
        .instructions(
            "Tools of upstream MCP servers under host authority. Writes wait for a durable approval; \
             a write that returns a pending approval can be called again with the same arguments \
             once it is decided.",
        );
        if config.gateway.apps {
            builder = builder.apps();
        }
        // Held writes may run as MCP tasks, kept in the store for every instance of a fleet.
        if let Some(table) = store.tasks() {
            builder = builder.tasks(crate::runtime::tasks::options(
                table,
                config.gateway.approval_request_ttl.0,
                &config.gateway.principal,
            ));
        }
        // Every request but a tool call counts against its caller's rate of other requests:
        // opening sessions, pings and listings included, so one caller cannot flood them
        // either. Every tool call counts against the rate of calls: a bound tool's in
        // `Inner::call`, a call naming any other tool before it is answered `Unknown tool`.
        let calls = Arc::new(CallLimiter::new(
            config.gateway.max_calls_per_minute_per_caller,
        ));
        let limiter = Arc::new(CallLimiter::new(
            config
                .gateway
                .max_calls_per_minute_per_caller
                .max(crate::rules::limit::MIN_REQUESTS_PER_MINUTE),
        ));
        let requests = limiter.clone();
        let configured = config.gateway.principal.clone();
        builder = builder.admit_requests(move |method, principal| {
            if method == purra_protocol::types::methods::TOOLS_CALL {
                return Ok(());
            }
            let caller = crate::rules::principal::caller_principal(principal, &configured);
            limiter
                .check(&caller, std::time::Instant::now())
                .map_err(|wait| results::rate_limited_request(limiter.per_minute(), wait))
        });
        let unknown = calls.clone();
        let configured = config.gateway.principal.clone();
        builder = builder.admit_unknown_tools(move |_, principal| {
            let caller = crate::rules::principal::caller_principal(principal, &configured);
            unknown
                .check(&caller, std::time::Instant::now())
                .map_err(|wait| results::rate_limited_unknown_tool(unknown.per_minute(), wait))
        });
        let metrics = Arc::new(Metrics::new());
        let recorder = metrics.clone();
        // Labels carry only values the gateway controls: a known method or `other`, a bound
        // tool (the server names only tools it has) or `(unbound)`, never the caller's text.
        builder = builder.observe_requests(move |r| {
            let method = purra_protocol::method_label(r.method);
            // Room for the outcome's label too: one label set for both series.
            let mut labels = Vec::with_capacity(3);
            labels.push(("method", method.to_owned()));
            if matches!(method, "tools/call" | "prompts/get") {
                let tool = r.tool.unwrap_or(crate::runtime::metrics::UNBOUND);
                labels.push(("tool", tool.to_owned()));
            }
            recorder.request(labels, r.outcome.label(), r.duration);
        });
        for id in catalog.upstreams.keys() {
            metrics.set(
                crate::runtime::metrics::UPSTREAM_UP,
                vec![("upstream", id.clone())],
                1,
            );
            // Every series of an upstream exists from the start, at zero.
            let labels = vec![("upstream", id.clone())];
            metrics.add(
                crate::runtime::metrics::UPSTREAM_FAILURES,
                labels.clone(),
                0,
            );
            metrics.set_count(crate::runtime::metrics::UPSTREAM_RECONNECTS, labels, 0);
        }
        let server = builder.build();
        let upstreams = catalog.upstreams.clone();
        let cell = Arc::new(RwLock::new(Arc::new(catalog)));
        // A skill's files are read from its upstream as the running catalog has it.
        let resolve: crate::upstream::skills::Resolve = {
            let cell = cell.clone();
            Arc::new(move |id: &str| {
                let catalog = cell.read().unwrap_or_else(|p| p.into_inner()).clone();
                catalog.upstreams.get(id).cloned()
            })
        };
        let skill_errors =
            crate::upstream::skills::bind(&config, &upstreams, &server, source, resolve).await;
        if !skill_errors.is_empty() {
            for u in upstreams.values() {
                u.close().await;
            }
            return Err(StartError::Config(ConfigErrors(skill_errors)));
        }
        let inner = Arc::new_cyclic(|weak| Inner {
            settings: config.gateway.clone(),
            approvals: store.approvals(),
            runs: store.runs(),
            store,
            server,
            catalog: cell,
            excerpts: options.excerpts,
            connections: connections(&config, &deps),
            reloading: tokio::sync::Mutex::new(()),
            drain: crate::runtime::drain::Drain::default(),
            webhooks,
            decisions: Decisions::default(),
            waiting: Mutex::new(HashSet::new()),
            run_locks: Mutex::new(HashMap::new()),
            shown: Mutex::new(BTreeMap::new()),
            stop: CancellationToken::new(),
            auth,
            calls,
            requests,
            log: options.log,
            metrics,
            metrics_token,
            store_probe: tokio::sync::Mutex::new(None),
            readiness_logged: Mutex::new(String::new()),
            weak: weak.clone(),
        });
        // Each caller is listed only the tools its caller rules let it call.
        let weak = inner.weak.clone();
        inner.server.tool_filter(move |tool, ctx| {
            weak.upgrade()
                .is_none_or(|inner| inner.lists_to(&tool.name, ctx))
        });
        if inner.settings.apps {
            inner.serve_approval_views(source)?;
        }
        for warning in client_decision_warnings(&config)
            .into_iter()
            .chain(client_name_warnings(&config, source))
        {
            inner.log(&warning);
        }
        inner.publish();
        for upstream in inner.catalog().upstreams.values() {
            inner.watch(upstream.clone());
        }
        tokio::spawn(inner.clone().sweeper());
        if let Some(outbox) = outbox {
            // Every attempt is counted in the metrics, then told to the host's observer.
            let metrics = inner.metrics.clone();
            let host = options.webhook_observer;
            let observer: crate::runtime::webhooks::Observer = Arc::new(move |a| {
                metrics.observe(
                    crate::runtime::metrics::WEBHOOK_DURATION,
                    vec![("endpoint", a.endpoint.clone())],
                    a.elapsed,
                );
                metrics.add(
                    crate::runtime::metrics::WEBHOOK_ATTEMPTS,
                    vec![
                        ("endpoint", a.endpoint.clone()),
                        ("event", a.event_type.as_str().to_owned()),
                        ("result", a.result.name().to_owned()),
                    ],
                    1,
                );
                if let Some(host) = &host {
                    host(a);
                }
            });
            inner.webhooks.spawn(
                outbox,
                Some(inner.approvals.clone()),
                inner.log.clone(),
                Some(observer),
                inner.stop.clone(),
            );
        }
        Ok(Gateway { inner })
    }

    /// The MCP server downstream clients are served by (to serve it over another transport).
    pub fn server(&self) -> &Server {
        &self.inner.server
    }

    /// The schema the policies of `[policies]` were validated against, in Cedar's schema syntax
    /// (generated at start from the bound tools and the declared claims), and how many policies
    /// the files hold; `None` without `[policies]`.
    pub fn policy_schema(&self) -> Option<(usize, String)> {
        self.inner
            .catalog()
            .policies
            .as_ref()
            .map(|p| (p.count(), p.schema_text().to_owned()))
    }

    /// The approver page's connect flow (`/connect/ID`) for the upstreams with `[upstreams.ID.auth]
    /// mode = "oauth"`, over the gateway's store and keys: give it to the page
    /// (`PageConfig::oauth`). None when no upstream is called that way.
    pub fn connections(&self) -> Option<Arc<purra_page::connect::Connections>> {
        self.inner.connections.clone()
    }

    /// The webhook endpoints this gateway delivers to (and the approver page's URL their events
    /// link under: [`Webhooks::default_page_url`]).
    pub fn webhooks(&self) -> &Webhooks {
        &self.inner.webhooks
    }

    /// The names downstream clients see now, sorted.
    pub fn tool_names(&self) -> Vec<String> {
        self.inner.lock_shown().keys().cloned().collect()
    }

    /// The gateway's metrics (see [`crate::metrics`]); [`Gateway::refresh_metrics`] first brings
    /// the values read from elsewhere up to date.
    pub fn metrics(&self) -> Arc<Metrics> {
        self.inner.metrics.clone()
    }

    /// Reads what the metrics do not count as it happens: the approvals pending in the store,
    /// the sessions open, each upstream's reconnections.
    pub async fn refresh_metrics(&self) {
        let inner = &self.inner;
        let m = &inner.metrics;
        if let Ok(n) = m.store("count_pending", inner.store.pending_count()).await {
            m.set(
                crate::runtime::metrics::APPROVALS_PENDING,
                Vec::new(),
                i64::try_from(n).unwrap_or(i64::MAX),
            );
        }
        m.set(
            crate::runtime::metrics::SESSIONS_OPEN,
            Vec::new(),
            i64::try_from(inner.server.open_sessions()).unwrap_or(i64::MAX),
        );
        let catalog = inner.catalog();
        for (id, u) in &catalog.upstreams {
            let made = u.connections.load(std::sync::atomic::Ordering::Relaxed);
            m.set_count(
                crate::runtime::metrics::UPSTREAM_RECONNECTS,
                vec![("upstream", id.clone())],
                made.saturating_sub(1),
            );
        }
    }

    /// Records a decision made outside the store's other writers (an approver page, an
    /// embedding host) and wakes the calls waiting in this process at once. This is an
    /// operator's path: it decides any write, whatever its binding's `approval`.
    ///
    /// The approver is recorded naming the path the decision came by: an approver that already
    /// ends with an operator's path (`ada (page)`: the approver page served beside the gateway
    /// names its own) is kept as it is; any other is recorded as `NAME (api)`.
    ///
    /// Separation of duties is checked with the approver's name (without its path) as who
    /// decides: when the request says approvers must differ and that name is the principal that
    /// asked, nothing is recorded (`Conflict(SelfDecision::CONFLICT)`).
    ///
    /// A workflow's `from` (and `escalate_to` once escalated) is checked here for an approver
    /// recorded as `NAME (api)`: the name, or a member of the groups the configuration's
    /// `[approvers.groups]` lists it in; someone else is refused and nothing is recorded
    /// (`Conflict(NotAVoter::CONFLICT)`). An approver already naming an operator's path (the
    /// approver page's `NAME (page)`) was checked by that path, with the groups it knows (the
    /// sign-in's claims too).
    pub async fn decide(
        &self,
        id: purra_core::ApprovalId,
        mut decision: purra_core::Decision,
    ) -> Result<(), StoreError> {
        let decider = match purra_core::DecisionPath::of(&decision.approver) {
            Some((name, _)) => name.to_owned(),
            None => decision.approver.clone(),
        };
        let named =
            purra_core::DecisionPath::of(&decision.approver).is_some_and(|(_, p)| p.is_operator());
        if named {
            return self.inner.decide_as(id, decision, &decider).await;
        }
        let view = self.approval_view(&id).await?;
        self.check_voter(&view, &decision.approver)?;
        decision.approver = purra_core::DecisionPath::Api.approver(&decision.approver);
        self.inner.decide_seen(id, &view, decision, &decider).await
    }

    /// Approval `id`'s view, or `NotFound`.
    async fn approval_view(
        &self,
        id: &purra_core::ApprovalId,
    ) -> Result<purra_core::ApprovalView, StoreError> {
        self.inner
            .store
            .approval(id.clone())
            .await?
            .ok_or(StoreError::NotFound)
    }

    /// Whether `approver` may decide approval `id` by its workflow's `from` (by name, or as a
    /// member of the configuration's `[approvers.groups]`).
    fn check_voter(
        &self,
        view: &purra_core::ApprovalView,
        approver: &str,
    ) -> Result<(), purra_core::NotAVoter> {
        let groups = self.inner.catalog().config.approvers.groups_of(approver);
        view.request
            .check_voter(&[approver], &groups, std::time::SystemTime::now())
    }

    /// Approves the waiting write `id` with `arguments` in place of its caller's (its binding
    /// says `allow_edit = true`), decided as `decision` (an approval; the approver named as
    /// [`decide`](Gateway::decide) names it). The edited call is checked as if its caller had
    /// sent it (scope, input schema, policies) and recorded in one transaction with the
    /// original's decision; the caller's call is answered with the edited call's result. `Err`
    /// says why nothing was recorded.
    pub async fn approve_with_edit(
        &self,
        id: purra_core::ApprovalId,
        arguments: serde_json::Value,
        mut decision: purra_core::Decision,
    ) -> Result<purra_core::ApprovalId, crate::runtime::edit::EditRefused> {
        let decider = match purra_core::DecisionPath::of(&decision.approver) {
            Some((name, _)) => name.to_owned(),
            None => decision.approver.clone(),
        };
        let named =
            purra_core::DecisionPath::of(&decision.approver).is_some_and(|(_, p)| p.is_operator());
        if !named {
            let refused =
                |e: &dyn std::fmt::Display| crate::runtime::edit::EditRefused(e.to_string());
            let view = self.approval_view(&id).await.map_err(|e| refused(&e))?;
            self.check_voter(&view, &decision.approver)
                .map_err(|e| refused(&e))?;
            decision.approver = purra_core::DecisionPath::Api.approver(&decision.approver);
        }
        self.inner
            .approve_with_edit(id, arguments, decision, &decider)
            .await
    }

    /// Stops the background tasks and closes every upstream connection.
    pub async fn shutdown(&self) {
        self.inner.stop.cancel();
        for u in self.inner.catalog().upstreams.values() {
            u.close().await;
        }
    }
}

/// What the gateway warns about at start (and with `--check`) on an HTTP listener with
/// `[gateway.auth]`: a write binding whose only caller rule is `clients = [...]`. A client
/// chooses its own `clientInfo.name`, so any caller with a valid token passes that rule by
/// giving an allowed name; it is not authentication.
pub(crate) fn client_name_warnings(config: &GatewayConfig, source: &ConfigSource) -> Vec<String> {
    let g = &config.gateway;
    if !matches!(g.listen, Listen::Http(_)) || g.auth.is_none() {
        return Vec::new();
    }
    config
        .writes
        .iter()
        .filter(|(_, w)| {
            w.scope.principals.is_none() && w.scope.clients.as_ref().is_some_and(|c| !c.is_empty())
        })
        .map(|(name, _)| {
            let at = source.error(
                &format!("writes.{name}.scope.clients"),
                "the write's only caller rule is clients, and a client chooses its own name \
                 (clientInfo.name): any caller with a valid token that gives one of these names \
                 passes; clients is not authentication: name who may write with principals = \
                 [...] or with [policies] on the token's claims",
            );
            format!("warning: {at}")
        })
        .collect()
}

/// What the gateway warns about at start (and with `--check`) when clients that connect over
/// HTTP could decide writes: `elicitation` and `apps` trust the downstream client, and a client
/// that answers its own elicitation form or calls the app-only tool itself decides its own write.
/// The name the gateway's MCP server gives in `initialize`: `purra-gateway-NAME`, or
/// `purra-gateway` for the default name `gateway` (not `purra-gateway-gateway`) and for a name
/// that already starts with it.
pub(crate) fn server_name(name: &str) -> String {
    if name == "gateway" || name.starts_with("purra-gateway") {
        "purra-gateway".to_owned() + name.strip_prefix("purra-gateway").unwrap_or("")
    } else {
        format!("purra-gateway-{name}")
    }
}

/// Each warning names what it trusts and the write bindings that let a client decide.
pub(crate) fn client_decision_warnings(config: &GatewayConfig) -> Vec<String> {
    let g = &config.gateway;
    let Listen::Http(addr) = g.listen else {
        return Vec::new();
    };
    let by_client: Vec<&str> = config
        .writes
        .iter()
        .filter(|(_, w)| w.approval == ApprovalBy::Client)
        .map(|(name, _)| name.as_str())
        .collect();
    let decided = if by_client.is_empty() {
        "no write binding says approval = \"client\", so an operator decides every write".to_owned()
    } else {
        format!(
            "writes whose binding says approval = \"client\" can be decided that way: {}",
            by_client.join(", ")
        )
    };
    let mut out = Vec::new();
    if g.elicitation {
        out.push(format!(
            "warning: gateway.elicitation is on and clients connect over HTTP ({addr}): it trusts \
             every client to show the elicitation form to a person and to send back only that \
             person's answer; a client that answers the form itself decides its own write; \
             {decided}"
        ));
    }
    if g.apps {
        out.push(format!(
            "warning: gateway.apps is on and clients connect over HTTP ({addr}): it trusts every \
             client's host to show the approval view to a person and to keep the app-only tool \
             {tool} from its model; a client that calls {tool} itself decides its own write; \
             {decided}",
            tool = crate::runtime::app::APPROVAL_TOOL
        ));
    }
    out
}

impl Inner {
    pub(crate) fn log(&self, message: &str) {
        if let Some(log) = &self.log {
            log(message);
        }
    }

    /// What is served now (a reload replaces it whole; a call reads it once per look).
    pub(crate) fn catalog(&self) -> Arc<Catalog> {
        self.catalog
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Makes `next` what is served.
    pub(crate) fn set_catalog(&self, next: Arc<Catalog>) {
        *self.catalog.write().unwrap_or_else(|p| p.into_inner()) = next;
    }

    /// The current binding of local name `local`, if it is bound.
    pub(crate) fn binding(&self, local: &str) -> Option<Arc<Binding>> {
        self.catalog().bindings.get(local).cloned()
    }

    /// Serves the approval view of every write binding and the app-only tool behind it.
    fn serve_approval_views(&self, source: &ConfigSource) -> Result<(), StartError> {
        let failed = |e: purra_protocol::RegistrationError| {
            StartError::Config(ConfigErrors(vec![source.error(
                "gateway.apps",
                format!("the approval view cannot be served: {e}"),
            )]))
        };
        for b in self
            .catalog()
            .bindings
            .values()
            .filter(|b| b.effect.is_some())
        {
            self.server
                .add_app(crate::runtime::app::app_resource(&b.local))
                .map_err(failed)?;
        }
        let weak = self.weak.clone();
        self.server
            .raw_tool(crate::runtime::app::approval_tool(), move |args, ctx| {
                let weak = weak.clone();
                async move {
                    let stopping = || {
                        results::failed(
                            crate::runtime::app::APPROVAL_TOOL,
                            &results::stopping(),
                            "nothing was decided",
                        )
                    };
                    let Some(inner) = weak.upgrade() else {
                        return Ok(stopping());
                    };
                    // A draining gateway takes no new call.
                    let Some(_active) = inner.drain.enter() else {
                        return Ok(stopping());
                    };
                    Ok(inner.approval_view(args, ctx).await)
                }
            })
            .map_err(failed)?;
        Ok(())
    }

    fn lock_shown(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Tool>> {
        self.shown.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes the downstream tool list what the upstreams' current registrations say: changed
    /// and new tools are registered, tools no longer bound are removed (each change sends
    /// downstream `list_changed`).
    pub(crate) fn publish(&self) {
        self.publish_forcing(&BTreeSet::new());
    }

    /// [`Inner::publish`], registering the tools named in `force` again even where they look the
    /// same (a reload changed their binding: downstream clients are told to list again).
    pub(crate) fn publish_forcing(&self, force: &BTreeSet<String>) {
        let catalog = self.catalog();
        // Catalog changes recorded by the discoveries since: the operator is told once.
        for u in catalog.upstreams.values() {
            for notice in u.take_notices() {
                self.log(&notice);
            }
        }
        let mut want: BTreeMap<String, Tool> = BTreeMap::new();
        for u in catalog.upstreams.values() {
            if let Some(live) = u.live() {
                for (name, bound) in &live.tools {
                    let is_write = catalog
                        .bindings
                        .get(name)
                        .is_some_and(|b| b.effect.is_some());
                    let mut tool = if is_write && self.settings.apps {
                        crate::runtime::app::with_view(bound.tool.clone())
                    } else {
                        bound.tool.clone()
                    };
                    // A write may be called as a task (it waits for its decision in one) when
                    // the store keeps tasks for the fleet; a read is listed as its upstream lists it.
                    if is_write {
                        let mut execution = tool.execution.take().unwrap_or_default();
                        execution.task_support = self
                            .store
                            .tasks()
                            .map(|_| purra_protocol::types::TaskSupport::Optional);
                        tool.execution = (execution != Default::default()).then_some(execution);
                    }
                    want.insert(name.clone(), tool);
                }
            }
        }
        let mut shown = self.lock_shown();
        let gone: Vec<String> = shown
            .keys()
            .filter(|k| !want.contains_key(*k))
            .cloned()
            .collect();
        for name in gone {
            shown.remove(&name);
            self.server.remove_tool(&name);
        }
        for (name, tool) in want {
            if shown.get(&name) == Some(&tool) && !force.contains(&name) {
                continue;
            }
            let weak = self.weak.clone();
            let local = name.clone();
            let registered = self.server.raw_tool(tool.clone(), move |args, ctx| {
                let weak = weak.clone();
                let local = local.clone();
                async move {
                    let stopping =
                        || results::failed(&local, &results::stopping(), "nothing was sent");
                    let Some(inner) = weak.upgrade() else {
                        return Ok(stopping());
                    };
                    // A draining gateway takes no new call; those in flight are counted.
                    let Some(_active) = inner.drain.enter() else {
                        return Ok(stopping());
                    };
                    Ok(inner.call(&local, args, ctx).await)
                }
            });
            if registered.is_ok() {
                shown.insert(name, tool);
            }
        }
    }

    /// Watches an upstream: a tool list change triggers a rediscovery, a closed connection a
    /// reconnection with backoff.
    pub(crate) fn watch(&self, upstream: Arc<Upstream>) {
        let Some(live) = upstream.live() else {
            return;
        };
        let weak = self.weak.clone();
        let u = Arc::downgrade(&upstream);
        let listener = live.conn.on(methods::TOOLS_LIST_CHANGED, move |_| {
            if let (Some(inner), Some(u)) = (weak.upgrade(), u.upgrade()) {
                tokio::spawn(async move { inner.refresh(u).await });
            }
        });
        // Removed when a reload retires the upstream.
        upstream.keep_listener(listener);
        let weak = self.weak.clone();
        let peer = live.conn.peer().clone();
        let id = upstream.id.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = peer.closed() => {}
                // Replaced by a reload: the upstream that replaced it watches its connection.
                () = upstream.retired() => return,
            }
            if let Some(inner) = weak.upgrade() {
                inner.metrics.set(
                    crate::runtime::metrics::UPSTREAM_UP,
                    vec![("upstream", id.clone())],
                    0,
                );
                tracing::info!(upstream = %id, "upstream connection closed");
                if !inner.stop.is_cancelled() && !upstream.is_retired() {
                    inner.log(&format!(
                        "upstream {id}: the connection closed; reconnecting (with backoff, up to {}s between attempts)",
                        MAX_BACKOFF.as_secs()
                    ));
                }
            }
            let mut backoff = Duration::from_millis(100);
            loop {
                let Some(inner) = weak.upgrade() else { return };
                if inner.stop.is_cancelled() || upstream.is_retired() {
                    return;
                }
                if inner.refresh(upstream.clone()).await {
                    if !upstream.is_retired() {
                        inner.log(&format!("upstream {id}: reconnected"));
                    }
                    return;
                }
                let stop = inner.stop.clone();
                drop(inner);
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        });
    }

    /// Brings an upstream up to date; true when it is usable. A new connection gets watched.
    async fn refresh(&self, upstream: Arc<Upstream>) -> bool {
        if upstream.is_retired() {
            return true;
        }
        let before = upstream.live().map(|l| Arc::as_ptr(&l.conn) as usize);
        let result = upstream.current().await;
        self.publish();
        let labels = || vec![("upstream", upstream.id.clone())];
        match result {
            Ok((live, _)) => {
                if before != Some(Arc::as_ptr(&live.conn) as usize) {
                    self.note_up(&upstream.id);
                    self.watch(upstream);
                }
                true
            }
            Err(e) => {
                self.metrics
                    .set(crate::runtime::metrics::UPSTREAM_UP, labels(), 0);
                self.metrics
                    .add(crate::runtime::metrics::UPSTREAM_FAILURES, labels(), 1);
                self.log(&format!("upstream {}: {e}", upstream.id));
                false
            }
        }
    }

    /// A new connection to an upstream is up.
    pub(crate) fn note_up(&self, id: &str) {
        self.metrics.set(
            crate::runtime::metrics::UPSTREAM_UP,
            vec![("upstream", id.to_owned())],
            1,
        );
        self.metrics.add(
            crate::runtime::metrics::UPSTREAM_FAILURES,
            vec![("upstream", id.to_owned())],
            0,
        );
    }

    /// The current registration of a binding, rediscovering first when its upstream's list
    /// changed or its connection closed.
    pub(crate) async fn registration(&self, b: &Binding) -> Result<Arc<BoundTool>, ErrorCode> {
        let before = b.upstream.live().map(|l| Arc::as_ptr(&l.conn) as usize);
        let labels = || vec![("upstream", b.upstream.id.clone())];
        let (live, changed) = match b.upstream.current().await {
            Ok(r) => r,
            Err(UpstreamError::Connect(_)) => {
                self.metrics
                    .set(crate::runtime::metrics::UPSTREAM_UP, labels(), 0);
                self.metrics
                    .add(crate::runtime::metrics::UPSTREAM_FAILURES, labels(), 1);
                return Err(purra_mcp::codes::connection_closed());
            }
            Err(UpstreamError::Discovery(e)) => {
                self.metrics
                    .add(crate::runtime::metrics::UPSTREAM_FAILURES, labels(), 1);
                self.publish();
                return Err(e.code);
            }
            // The shared connection is made with the configured identity only.
            Err(UpstreamError::Credential(_) | UpstreamError::Busy) => {
                return Err(purra_mcp::codes::connection_closed())
            }
        };
        if changed {
            self.publish();
            if before != Some(Arc::as_ptr(&live.conn) as usize) {
                self.note_up(&b.upstream.id);
                self.watch(b.upstream.clone());
            }
        }
        // A bound tool the upstream lists differently from its pin (or no longer lists) is
        // served as pinned and never called until an operator approves the change.
        if let Some(code) = live.withheld.get(&b.local) {
            return Err(code.clone());
        }
        let bound: &Bound = live
            .tools
            .get(&b.local)
            .ok_or_else(purra_mcp::codes::tool_missing)?;
        Ok(Arc::new(BoundTool {
            registration: bound.registration.clone(),
            _in_use: crate::upstream::InUse::new(&b.upstream),
        }))
    }

    /// The registration of `b` on the connection of `who` when its upstream is called as the
    /// person who asked (`Ok(None)` when it is not: the shared registration serves). The
    /// principal's connection lists the tools itself: a bound tool it lists differently from
    /// the shared listing (what is served and what approvals are bound to) is refused for it.
    pub(crate) async fn as_principal(
        &self,
        b: &Binding,
        shared: &BoundTool,
        who: &crate::upstream::principals::Who,
    ) -> Result<Option<PrincipalTool>, NotAsPrincipal> {
        if b.upstream.credentials().is_none() {
            return Ok(None);
        }
        let code = |c: &str| ErrorCode::new(c).unwrap_or(ErrorCode::TOOL_FAILED);
        let mine = match b.upstream.current_as(who).await {
            Ok(l) => l,
            Err(UpstreamError::Credential(
                crate::upstream::principals::CredentialError::Missing(why),
            )) => {
                return Err(NotAsPrincipal {
                    code: code("upstream_credential_missing"),
                    why,
                    connect_url: None,
                })
            }
            Err(UpstreamError::Credential(
                crate::upstream::principals::CredentialError::Unconnected { why, url },
            )) => {
                return Err(NotAsPrincipal {
                    code: code("upstream_not_connected"),
                    why,
                    connect_url: Some(url),
                })
            }
            Err(UpstreamError::Credential(e)) => {
                return Err(NotAsPrincipal {
                    code: code("upstream_credential_unavailable"),
                    why: e.to_string(),
                    connect_url: None,
                })
            }
            Err(UpstreamError::Busy) => {
                return Err(NotAsPrincipal {
                    code: code("upstream_busy"),
                    why: format!(
                        "every connection to upstream {:?} is in use by other callers; call again",
                        b.upstream.id
                    ),
                    connect_url: None,
                })
            }
            Err(UpstreamError::Connect(why)) => {
                self.log(&format!(
                    "upstream {}: the connection of {} failed: {why}",
                    b.upstream.id, who.principal
                ));
                return Err(NotAsPrincipal {
                    code: purra_mcp::codes::connection_closed(),
                    why: "the upstream could not be reached as this caller".into(),
                    connect_url: None,
                });
            }
            Err(UpstreamError::Discovery(e)) => {
                return Err(NotAsPrincipal {
                    code: e.code,
                    why: "the upstream's tools could not be listed as this caller".into(),
                    connect_url: None,
                })
            }
        };
        let same = self.shared_tool(b).is_some_and(|shared_tool| {
            mine.live.tools.get(&b.local).is_some_and(|t| {
                t.tool == shared_tool
                    && t.registration.input_schema().source()
                        == shared.registration.input_schema().source()
            })
        });
        if !same {
            return Err(NotAsPrincipal {
                code: code("mcp_catalog_changed"),
                why: format!(
                    "upstream {:?} lists {:?} differently to this caller than the definition the \
                     gateway serves",
                    b.upstream.id, b.remote
                ),
                connect_url: None,
            });
        }
        let registration = mine.live.tools[&b.local].registration.clone();
        Ok(Some(PrincipalTool {
            registration,
            _slot: mine.slot,
        }))
    }

    /// [`as_principal`](Self::as_principal) for the caller of `ctx`; when what is missing is the
    /// principal's connection and its client takes URL-mode elicitations (2025-11-25), the
    /// client is sent the connect URL, and once the user accepted, the connection is waited for
    /// (up to `approval_wait`) before the call goes on.
    pub(crate) async fn as_principal_asking(
        &self,
        b: &Binding,
        shared: &BoundTool,
        ctx: &RequestCtx,
    ) -> Result<Option<PrincipalTool>, NotAsPrincipal> {
        // An upstream called as the configured identity (the usual case): nothing to look up.
        if b.upstream.credentials().is_none() {
            return Ok(None);
        }
        let who = self.who(ctx);
        let err = match self.as_principal(b, shared, &who).await {
            Err(e) if e.connect_url.is_some() => e,
            other => return other,
        };
        let url_mode = ctx
            .client_capabilities()
            .elicitation
            .is_some_and(|e| e.contains_key("url"));
        let Some(url) = err.connect_url.clone().filter(|_| url_mode) else {
            return Err(err);
        };
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let id = format!("connect-{}-{nanos}", b.upstream.id);
        let message = format!(
            "{} needs your own connection to {:?}: open the link to connect, then come back.",
            b.local, b.upstream.id
        );
        let answer = ctx
            .elicit(purra_protocol::types::ElicitParams::url(message, &url, &id))
            .await;
        if !matches!(answer, Ok(ref a) if a.action == purra_protocol::types::ElicitAction::Accept) {
            return Err(err);
        }
        let until = std::time::Instant::now() + self.settings.approval_wait.0;
        loop {
            tokio::select! {
                () = tokio::time::sleep(std::time::Duration::from_millis(500)) => {}
                () = ctx.cancellation().cancelled() => return Err(err),
            }
            match self.as_principal(b, shared, &who).await {
                Err(e) if e.connect_url.is_some() && std::time::Instant::now() < until => {}
                other => return other,
            }
        }
    }

    /// The downstream tool of `b` as its upstream's shared connection discovered it.
    fn shared_tool(&self, b: &Binding) -> Option<purra_protocol::types::Tool> {
        b.upstream
            .live()
            .and_then(|l| l.tools.get(&b.local).map(|t| t.tool.clone()))
    }

    /// Who a call is made for: the caller's principal and the token it proved itself with.
    pub(crate) fn who(&self, ctx: &RequestCtx) -> crate::upstream::principals::Who {
        crate::upstream::principals::Who {
            principal: self.caller(ctx).principal,
            token: ctx
                .extension::<purra_protocol::auth::ValidatedToken>()
                .cloned(),
        }
    }

    /// Who is calling: the principal the caller's token proves (`ISSUER#SUBJECT`), else (stdio,
    /// HTTP without `[gateway.auth]`) the configured one; never one the caller asserts.
    pub(crate) fn caller(&self, ctx: &RequestCtx) -> Caller {
        let identity = ctx.principal().cloned();
        Caller {
            principal: crate::rules::principal::caller_principal(
                identity.as_ref(),
                &self.settings.principal,
            ),
            client: ctx.client_name().unwrap_or_default(),
            identity,
        }
    }

    /// Whether `tools/list` shows the tool `name` to the caller of `ctx`: a bound tool when its
    /// caller rules (`principals`, `clients`) let this caller call it; anything else (the
    /// approval view's tool) always. Argument rules and policies are judged per call.
    pub(crate) fn lists_to(&self, name: &str, ctx: &RequestCtx) -> bool {
        match self.binding(name) {
            Some(b) => b.scope.allows_caller(&self.caller(ctx)),
            None => true,
        }
    }

    /// Whether a request that needs an authenticated caller came without one: with
    /// `[gateway.auth]`, a call that did not pass the guard (the server served another way) acts
    /// as nobody.
    pub(crate) fn unauthenticated(&self, ctx: &RequestCtx) -> bool {
        self.auth.is_some() && ctx.principal().is_none()
    }

    pub(crate) fn schedule_limits(&self) -> ScheduleLimits {
        ScheduleLimits {
            max_concurrency: 1,
            max_result_bytes: usize::try_from(self.catalog().limits.max_result_bytes)
                .unwrap_or(usize::MAX),
        }
    }

    /// One downstream `tools/call` of a bound tool.
    async fn call(&self, local: &str, args: JsonObject, ctx: RequestCtx) -> CallToolResult {
        let Some(binding) = self.binding(local) else {
            return results::failed(local, &purra_mcp::codes::tool_missing(), "nothing was sent");
        };
        if self.unauthenticated(&ctx) {
            return results::failed(local, &ErrorCode::SCOPE_DENIED, "nothing was sent");
        }
        let write = binding.effect.is_some();
        let caller = self.caller(&ctx);
        if let Err(wait) = self
            .calls
            .check(&caller.principal, std::time::Instant::now())
        {
            return results::rate_limited(local, self.calls.per_minute(), wait, write);
        }
        // Boxed: the write path's future is large, and a future is moved whole (every byte of
        // its largest state) each time it is moved; a read would otherwise pay for it.
        if write {
            return Box::pin(self.call_write(&binding, args, ctx)).await;
        }
        self.call_read(&binding, &caller, args, &ctx).await
    }

    /// Whether the policies of `[policies]` allow `caller` to call the bound tool with `args`
    /// (valid against its input schema); always without `[policies]`. A request that cannot be
    /// evaluated is refused too, and logged.
    pub(crate) fn allowed_by_policies(&self, b: &Binding, caller: &Caller, args: &Value) -> bool {
        let catalog = self.catalog();
        let Some(policies) = &catalog.policies else {
            return true;
        };
        let span = tracing::debug_span!(
            "gateway.policy",
            tool = %b.local,
            allowed = tracing::field::Empty
        );
        let _entered = span.enter();
        let decision = policies.authorize(&b.local, caller, args);
        span.record("allowed", decision.is_ok());
        match decision {
            Ok(()) => true,
            Err(Refusal::Denied) => false,
            Err(Refusal::Error(why)) => {
                // `why` names the policy and the kind of error, never a value it evaluated.
                self.log(&format!(
                    "policies: the call of {} by {} was refused: {why}",
                    b.local,
                    purra_core::visible::one_line(
                        &caller.principal,
                        purra_core::visible::WHO_MAX_CHARS
                    )
                ));
                false
            }
        }
    }

    /// A call outside the binding's scope, refused: `scope_denied`, with the rule that did not
    /// hold (the host's text and the path of the value, never the value), and logged.
    pub(crate) fn scope_refusal(
        &self,
        b: &Binding,
        caller: &Caller,
        args: &Value,
        what: &str,
    ) -> Option<CallToolResult> {
        let why = b.scope.refusal(caller, args)?;
        self.log(&format!(
            "scope: the call of {} by {} was refused ({}.scope): {why}",
            b.local,
            purra_core::visible::one_line(&caller.principal, purra_core::visible::WHO_MAX_CHARS),
            b.key
        ));
        Some(results::failed(
            &b.local,
            &ErrorCode::SCOPE_DENIED,
            &format!("{what}: {why}"),
        ))
    }

    /// A read: the caller's rules and policies, then one bounded call of the upstream's tool
    /// (as the person who asked when the upstream is called that way). `caller` is the caller
    /// of `ctx`, looked up once by [`Inner::call`].
    async fn call_read(
        &self,
        b: &Binding,
        caller: &Caller,
        args: JsonObject,
        ctx: &RequestCtx,
    ) -> CallToolResult {
        let args = Value::Object(args);
        if let Some(refused) = self.scope_refusal(b, caller, &args, "nothing was sent") {
            return refused;
        }
        let bound = match self.registration(b).await {
            Ok(r) => r,
            Err(code) => return results::failed(&b.local, &code, "nothing was sent"),
        };
        // The policies read typed arguments: arguments the schema refuses are refused by
        // `execute` below, as without policies (so without policies they are validated once).
        // One look at the catalog for the call's policies and limits.
        let (policies, max_result_bytes) = {
            let catalog = self.catalog();
            (
                catalog.policies.is_some(),
                usize::try_from(catalog.limits.max_result_bytes).unwrap_or(usize::MAX),
            )
        };
        if policies
            && bound.registration.input_schema().validate(&args).is_ok()
            && !self.allowed_by_policies(b, caller, &args)
        {
            return results::policy_denied(&b.local, false);
        }
        // Only an upstream called as the person who asked has anything to look up (boxed, as
        // it may wait for the person: reads of the configured identity do not carry its state).
        let mine = if b.upstream.credentials().is_none() {
            None
        } else {
            match Box::pin(self.as_principal_asking(b, &bound, ctx)).await {
                Ok(m) => m,
                Err(e) => {
                    return results::failed(
                        &b.local,
                        &e.code,
                        &format!("nothing was sent: {}", e.why),
                    )
                }
            }
        };
        let registration = match &mine {
            Some(m) => m.registration.clone(),
            None => bound.registration.clone(),
        };
        let mut id = String::with_capacity(self.settings.name.len() + 5);
        id.push_str(&self.settings.name);
        id.push_str(":read");
        let run_id = RunId::new(id);
        let run = RunContext {
            root_run_id: run_id.clone(),
            run_id,
            agent: self.settings.name.clone(),
            lease: Lease::new(None, ctx.cancellation().clone()),
            idempotency_key: None,
        };
        let limits = ScheduleLimits {
            max_concurrency: 1,
            max_result_bytes,
        };
        match execute(registration, args, run, limits)
            .instrument(tracing::debug_span!(
                "gateway.dispatch",
                tool = %b.local,
                upstream = %b.upstream.id
            ))
            .await
        {
            Execution::Succeeded(v) => results::success_from(v),
            // A read binding asserts no write: whatever happened, nothing was written.
            Execution::Failed { code, .. } => {
                results::failed(&b.local, &code, "nothing was written")
            }
        }
    }

    /// Looks at the waiting writes no caller in this process waits on: an approved one runs when
    /// the configuration says decided writes run without a caller; one whose approval expired is
    /// refused (recorded) and dropped.
    async fn sweeper(self: Arc<Self>) {
        let weak = Arc::downgrade(&self);
        let stop = self.stop.clone();
        drop(self);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(SWEEP_INTERVAL) => {}
            }
            let Some(inner) = weak.upgrade() else { return };
            // A draining gateway starts no dispatch of its own.
            if inner.drain.is_draining() {
                return;
            }
            inner.calls.prune(std::time::Instant::now());
            // Per-principal connections (processes) idle past their timeout are closed; an
            // upstream waiting for its discovery principal's connection is tried again.
            let upstreams: Vec<_> = inner.catalog().upstreams.values().cloned().collect();
            for u in upstreams {
                // Pins an operator moved (here, in another process, on another instance of a
                // fleet): rediscovered now, so every instance serves the approved definition.
                if u.check_pins().await && !u.is_retired() {
                    inner.refresh(u.clone()).await;
                }
                u.reap_idle().await;
                if u.deferred() && u.live().is_none() && !u.is_retired() {
                    if let Ok((_, true)) = u.current().await {
                        inner.log(&format!(
                            "upstream {} is discovered: its tools are served",
                            u.id
                        ));
                        inner.publish();
                        inner.note_up(&u.id);
                        inner.watch(u.clone());
                    }
                }
            }
            inner.requests.prune(std::time::Instant::now());
            if let Err(e) = inner.sweep().await {
                inner.log(&format!("looking at waiting writes failed: {e}"));
            }
        }
    }
}

/// What the gateway says at start when bound tools are not pinned (`on_catalog_change =
/// "serve"`).
fn catalog_serve_warning(config: &GatewayConfig) -> String {
    let why = match config.gateway.on_catalog_change {
        crate::config::OnCatalogChange::Serve => "[gateway] on_catalog_change = \"serve\"",
        crate::config::OnCatalogChange::Hold => "the store keeps no pins",
    };
    format!(
        "warning: tool definitions are not pinned ({why}): whatever an upstream lists after a \
         change (a new description, schema or annotations) is served at once, unreviewed"
    )
}

/// The page's connect flow for `config`'s upstreams with `mode = "oauth"`, when there are any and
/// the store, keys and page URL they need are there (the catalog refuses them otherwise).
fn connections(
    config: &GatewayConfig,
    deps: &crate::upstream::identity::IdentityDeps,
) -> Option<Arc<purra_page::connect::Connections>> {
    use purra_page::connect::{ConnectConfig, Connections, OAuthUpstream};
    let upstreams: Vec<OAuthUpstream> = config
        .upstreams
        .iter()
        .filter_map(|(id, u)| match (&u.auth, &u.url) {
            (Some(crate::config::UpstreamAuth::Oauth(o)), Some(url)) => {
                let loopback = ["http://127.0.0.1", "http://localhost", "http://[::1]"]
                    .iter()
                    .any(|p| url.starts_with(p));
                let mut up = OAuthUpstream::new(id.as_str(), url.as_str()).allow_loopback(loopback);
                if let (Some(issuer), Some(client)) = (&o.issuer, &o.client_id) {
                    let secret = o
                        .client_secret_file
                        .as_deref()
                        .and_then(|f| crate::config::secret::read_secret_file(f).ok());
                    up = up.client(issuer.as_str(), client.as_str(), secret);
                }
                Some(up.scopes(o.scopes.iter().cloned()))
            }
            _ => None,
        })
        .collect();
    let (Some(store), Some(keys), Some(page)) = (&deps.credentials, &deps.keys, &deps.page_url)
    else {
        return None;
    };
    (!upstreams.is_empty()).then(|| {
        Arc::new(Connections::new(ConnectConfig::new(
            page.as_str(),
            upstreams,
            store.clone(),
            keys.clone(),
        )))
    })
}

/// What upstreams called as each principal are made with: the store's credentials and the
/// keyring (`[gateway] credential_keys`, else `PURRA_CREDENTIAL_KEYS`; none when neither is set).
pub(crate) fn identity_deps(
    config: &GatewayConfig,
    source: &ConfigSource,
    store: &dyn GatewayStore,
) -> Result<crate::upstream::identity::IdentityDeps, StartError> {
    use purra_core::vault::{Keyring, KEYS_ENV};
    let keys = match &config.gateway.credential_keys {
        Some(file) => Some(Keyring::from_file(file).map_err(|e| {
            StartError::Config(ConfigErrors(vec![
                source.error("gateway.credential_keys", e.to_string())
            ]))
        })?),
        None => Keyring::from_env(KEYS_ENV).map_err(|e| {
            StartError::Config(ConfigErrors(vec![
                source.error("gateway.credential_keys", format!("{KEYS_ENV}: {e}"))
            ]))
        })?,
    };
    // Bound tools are pinned unless the configuration says to serve what upstreams list.
    let pins = match config.gateway.on_catalog_change {
        crate::config::OnCatalogChange::Hold => store.pins().map(|store| crate::upstream::Pins {
            store,
            instance: config.gateway.name.clone(),
        }),
        crate::config::OnCatalogChange::Serve => None,
    };
    Ok(crate::upstream::identity::IdentityDeps {
        credentials: store.credentials(),
        keys: keys.map(Arc::new),
        page_url: config.page.url.clone(),
        pins,
    })
}

/// A binding's current registration, held for one call (and its dispatch): while it is held,
/// the upstream it came from stays connected, even when a reload replaced it.
pub(crate) struct BoundTool {
    pub registration: Arc<purra_core::ToolRegistration>,
    _in_use: crate::upstream::InUse,
}

/// A binding's registration on the connection of the principal that asked (an upstream called
/// as the person who asked), held for one call and its dispatch.
pub(crate) struct PrincipalTool {
    /// The registration on the principal's own connection.
    pub registration: Arc<purra_core::ToolRegistration>,
    _slot: crate::upstream::principals::SlotInUse,
}

/// Why a call could not go out as the principal that asked: its code and what the caller is
/// told (nothing was sent).
pub(crate) struct NotAsPrincipal {
    pub code: ErrorCode,
    pub why: String,
    /// Where the principal connects to the upstream, when that is what is missing.
    pub connect_url: Option<String>,
}

#[cfg(test)]
mod tests {
    /// Issue 49: a start error is its cause's wrapper; the cause is its `source()`.
    #[test]
    fn a_start_error_gives_its_cause_as_source() {
        use std::error::Error as _;
        let e = super::StartError::Store(purra_core::StoreError::Backend("disk full".into()));
        assert_eq!(e.to_string(), "the store failed: store failure: disk full");
        let cause = e.source().expect("a cause");
        assert_eq!(
            cause.downcast_ref::<purra_core::StoreError>(),
            Some(&purra_core::StoreError::Backend("disk full".into()))
        );
    }

    /// Issue 44: the default name gave the server name `purra-gateway-gateway`.
    #[test]
    fn the_server_name_has_no_doubled_suffix() {
        assert_eq!(super::server_name("gateway"), "purra-gateway");
        assert_eq!(super::server_name("notes"), "purra-gateway-notes");
        assert_eq!(
            super::server_name("purra-gateway-team"),
            "purra-gateway-team"
        );
    }
}
