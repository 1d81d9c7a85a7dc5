//! What the gateway serves, built from a configuration: the upstreams, the bound tools and the
//! policies, discovered and validated as one [`Catalog`] that calls read whole and a reload
//! replaces whole.
//!
//! Building connects every upstream, discovers its bindings and validates the policies against
//! the tools as discovered; every mistake is reported at once, placed in the configuration. A
//! reload builds the next catalog beside the running one, reusing what did not change: an
//! upstream whose table, bindings, limits and policies are the same is kept as it is (its
//! connection, its registrations); one whose bindings changed gets a new [`Upstream`] on the same
//! connection; one whose own table changed gets a new connection. Nothing of the running catalog
//! changes until the next one is complete, so a reload that fails leaves it serving.
//!
//! The `catalog` layer: it may import `config`, `rules` and `upstream`, never `runtime` or `serve`
//! (the test `layers::gateway_modules_import_only_their_own_layer_or_below`); the running gateway
//! reads catalogs, a catalog knows nothing of it.

use std::collections::BTreeMap;
use std::sync::Arc;

use purra_mcp::{Limits, ReadBinding, WriteBinding};

use crate::config::ConfigSource;
use crate::config::{
    ApprovalBy, ConfigError, ConfigErrors, EffectConfig, GatewayConfig, ScopeRules,
};
use crate::rules::policy::{Policies, Sources, ToolKind, ToolSpec};
use crate::rules::scope::Scope;
use crate::upstream::{Upstream, UpstreamError};

/// One bound tool as configured.
pub(crate) struct Binding {
    pub upstream: Arc<Upstream>,
    pub local: String,
    pub remote: String,
    pub scope: Scope,
    /// `Some` for writes.
    pub effect: Option<EffectConfig>,
    /// Who may decide its approvals (writes; a read has none).
    pub approval: ApprovalBy,
    /// The dotted key of the binding in the configuration.
    pub key: String,
    /// A read whose binding asserts the tool only reads (`asserted_read_only`).
    pub asserted_read_only: bool,
    /// The title the approver sees.
    pub title: String,
    /// How long a write's receipt answers the same call (`receipt_ttl`; `None`: for ever).
    pub receipt_ttl: Option<std::time::Duration>,
    /// How recent a page approver's sign-in must be to decide (`approver_max_age`; writes).
    pub approver_max_age: Option<std::time::Duration>,
    /// Whether an approver may approve with edited arguments (`allow_edit`; writes).
    pub allow_edit: bool,
    /// Whether an approved call is sent as soon as its approval lands (`dispatch =
    /// "on_approval"`; writes).
    pub dispatch_on_approval: bool,
    /// The workflow its approvals are decided under (writes whose `approval` is a table).
    pub approval_rule: Option<crate::config::ApprovalRule>,
}

/// The upstreams, bindings and policies of one configuration, as discovered.
pub(crate) struct Catalog {
    /// The configuration it was built from (a reload compares the next one with it).
    pub config: GatewayConfig,
    /// 1 for the configuration the gateway started with, one more for each reload.
    pub revision: u64,
    /// The adapter's limits.
    pub limits: Limits,
    /// Bound tools by local name.
    pub bindings: BTreeMap<String, Arc<Binding>>,
    /// Upstreams by id.
    pub upstreams: BTreeMap<String, Arc<Upstream>>,
    /// The Cedar policies every call of a bound tool must be allowed by (`[policies]`).
    pub policies: Option<Policies>,
    /// The digest of the policy files and declared claims (empty without `[policies]`).
    pub policy_digest: String,
}

/// A catalog just built, and what it took from the one it replaces.
pub(crate) struct Built {
    pub catalog: Catalog,
    /// Upstreams of the earlier catalog whose connection a new upstream shares (retired without
    /// closing it).
    pub shared: Vec<Arc<Upstream>>,
    /// Upstreams made for this catalog (to watch once it serves), each with whether its
    /// connection is its own (not shared with an upstream of the earlier catalog).
    pub new: Vec<(Arc<Upstream>, bool)>,
    /// Upstreams not discovered yet because their discovery principal has not connected: why,
    /// for the log (their tools are served once it has).
    pub waiting: Vec<String>,
}

impl Catalog {
    /// Whether `upstream` (an `Arc` of this catalog or not) is one of this catalog's.
    pub fn holds(&self, upstream: &Arc<Upstream>) -> bool {
        self.upstreams.values().any(|u| Arc::ptr_eq(u, upstream))
    }
}

/// What of `config` concerns upstream `id`: its bindings, the limits, the policies' digest.
fn same_bindings(a: &GatewayConfig, b: &GatewayConfig, id: &str, digests: (&str, &str)) -> bool {
    let reads = |c: &GatewayConfig| {
        c.reads
            .iter()
            .filter(|(_, r)| r.upstream == id)
            .map(|(k, r)| (k.clone(), r.clone()))
            .collect::<BTreeMap<_, _>>()
    };
    let writes = |c: &GatewayConfig| {
        c.writes
            .iter()
            .filter(|(_, w)| w.upstream == id)
            .map(|(k, w)| (k.clone(), w.clone()))
            .collect::<BTreeMap<_, _>>()
    };
    a.limits == b.limits && reads(a) == reads(b) && writes(a) == writes(b) && digests.0 == digests.1
}

/// The digest of a write binding's scope table (its caller rules and argument rules), as the
/// first 16 hex digits of its JSON identity: part of the binding's effective scope revision, so
/// that an approval prepared under other rules is a mismatch even when `scope_revision` was not
/// changed.
pub(crate) fn scope_digest(rules: &ScopeRules) -> String {
    let value = serde_json::to_value(rules).unwrap_or(serde_json::Value::Null);
    match purra_core::json_identity(&value) {
        Ok(id) => {
            let hex = id.as_str().trim_start_matches("sha256:");
            hex[..16.min(hex.len())].to_owned()
        }
        // A table that has no identity (it cannot happen for strings) matches nothing earlier.
        Err(_) => "unidentified".to_owned(),
    }
}

/// Builds the catalog of `config`: connects (or reuses, from `previous`) every upstream,
/// discovers its bindings and validates the policies. Every mistake is reported at once, placed
/// with `source`; on failure every connection this call made is closed and `previous` is as it
/// was.
pub(crate) async fn build(
    config: &GatewayConfig,
    source: &ConfigSource,
    excerpts: bool,
    previous: Option<&Catalog>,
    deps: &crate::upstream::identity::IdentityDeps,
) -> Result<Built, ConfigErrors> {
    // The policy files are read before anything connects: their digest is part of every write
    // binding's scope revision.
    let sources = match &config.policies {
        Some(p) => Some(Sources::read(p, source).map_err(ConfigErrors)?),
        None => None,
    };
    let digest = sources.as_ref().map_or("", |s| s.digest()).to_owned();
    let previous_digest = previous.map_or("", |c| c.policy_digest.as_str()).to_owned();
    let limits = config.limits.limits();
    let mut upstreams = BTreeMap::new();
    let mut bindings = BTreeMap::new();
    let mut shared = Vec::new();
    let mut new = Vec::new();
    for (id, u) in &config.upstreams {
        let before = previous.and_then(|p| p.upstreams.get(id).map(|up| (p, up)));
        if let Some((p, up)) = before {
            if p.config.upstreams.get(id) == Some(u)
                && same_bindings(&p.config, config, id, (&previous_digest, &digest))
            {
                // Nothing of it changed: the same upstream, connection and bindings.
                upstreams.insert(id.clone(), up.clone());
                for (name, b) in &p.bindings {
                    if Arc::ptr_eq(&b.upstream, up) {
                        bindings.insert(name.clone(), b.clone());
                    }
                }
                continue;
            }
        }
        let mut reads = BTreeMap::new();
        let mut writes = BTreeMap::new();
        let mut scopes = Vec::new();
        for (local, r) in config.reads.iter().filter(|(_, r)| &r.upstream == id) {
            let scope = Scope::compile(&r.scope).map_err(|e| {
                ConfigErrors(vec![source.error(&format!("reads.{local}.scope"), e)])
            })?;
            let remote = r.tool.clone().unwrap_or_else(|| local.clone());
            reads.insert(
                remote.clone(),
                ReadBinding::new(local.clone(), r.title.clone(), scope.scope_check())
                    .concurrency(r.concurrency.into())
                    .run_tasks(r.tasks),
            );
            scopes.push((
                format!("reads.{local}"),
                local.clone(),
                remote,
                scope,
                None,
                (ApprovalBy::Operator, None),
                r.asserted_read_only,
                (r.title.clone(), None, None, false, false),
            ));
        }
        for (local, w) in config.writes.iter().filter(|(_, w)| &w.upstream == id) {
            let scope = Scope::from_rules(&w.scope).map_err(|e| {
                ConfigErrors(vec![source.error(&format!("writes.{local}.scope"), e)])
            })?;
            let remote = w.tool.clone().unwrap_or_else(|| local.clone());
            writes.insert(
                remote.clone(),
                WriteBinding {
                    local_name: local.clone(),
                    title: w.title.clone(),
                    risk: w.effect.risk(),
                    effect: w.effect.effect(),
                    scope: scope.scope_check(),
                    binding_id: w.binding_id.clone(),
                    binding_revision: w.binding_revision.clone(),
                    scope_id: w.scope_id.clone(),
                    // An approval prepared under other scope rules (caller or argument rules,
                    // even with the same `scope_revision`) or other policies is refused as a
                    // mismatch.
                    scope_revision: {
                        let rules = scope_digest(&w.scope);
                        match &sources {
                            Some(s) => format!(
                                "{}+scope:{rules}+policies:{}",
                                w.scope_revision,
                                s.digest()
                            ),
                            None => format!("{}+scope:{rules}", w.scope_revision),
                        }
                    },
                },
            );
            scopes.push((
                format!("writes.{local}"),
                local.clone(),
                remote,
                scope,
                Some(w.effect),
                (w.approval.by(), w.approval.rule().cloned()),
                false,
                (
                    w.title.clone(),
                    w.receipt_ttl.map(|t| t.0),
                    w.approver_max_age.map(|t| t.0),
                    w.allow_edit,
                    w.dispatch == crate::config::Dispatch::OnApproval,
                ),
            ));
        }
        let identity = crate::upstream::identity::identity(id, u, deps).map_err(|(key, why)| {
            ConfigErrors(vec![source.error(&format!("upstreams.{id}.{key}"), why)])
        })?;
        let upstream = Arc::new(
            Upstream::new(id.clone(), u.clone(), limits, reads, writes)
                .with_identity(identity)
                .with_pins(deps.pins.clone()),
        );
        // Only the bindings changed: the same connection, discovered again.
        let mut own = true;
        if let Some((p, up)) = before {
            if p.config.upstreams.get(id) == Some(u) && upstream.share_connection(up) {
                shared.push(up.clone());
                own = false;
            }
        }
        for (
            key,
            local,
            remote,
            scope,
            effect,
            (approval, approval_rule),
            asserted_read_only,
            (title, receipt_ttl, approver_max_age, allow_edit, dispatch_on_approval),
        ) in scopes
        {
            bindings.insert(
                local.clone(),
                Arc::new(Binding {
                    upstream: upstream.clone(),
                    local,
                    remote,
                    scope,
                    effect,
                    approval,
                    key,
                    asserted_read_only,
                    title,
                    receipt_ttl,
                    approver_max_age,
                    allow_edit,
                    dispatch_on_approval,
                    approval_rule,
                }),
            );
        }
        new.push((upstream.clone(), own));
        upstreams.insert(id.clone(), upstream);
    }

    // Discover everything before serving anything; collect every mistake.
    let mut errors = Vec::new();
    let mut waiting = Vec::new();
    for (upstream, _) in &new {
        if let Err(e) = upstream.current().await {
            if upstream.deferred() {
                waiting.push(format!(
                    "upstream {} is not discovered yet ({e}); its tools are served once its \
                     discovery principal has connected",
                    upstream.id
                ));
                continue;
            }
            errors.extend(start_errors(upstream, &bindings, source, &e, excerpts).await);
        }
    }
    // A connection shared with a running upstream stays open.
    let close_new = |new: Vec<(Arc<Upstream>, bool)>| async move {
        for (u, own) in new {
            if own {
                u.close().await;
            }
        }
    };
    if errors.is_empty() {
        // What the discovered tools show of the bindings: a read over a tool its upstream marks
        // as writing, an argument rule on an argument the tool does not take.
        for (upstream, _) in &new {
            errors.extend(listed_tool_mistakes(upstream, &bindings, source));
        }
    }
    if !errors.is_empty() {
        close_new(new).await;
        errors.sort_by_key(|e: &ConfigError| e.line.unwrap_or(0));
        return Err(ConfigErrors(errors));
    }
    let policies = match sources {
        Some(sources) => match compile_policies(sources, &bindings, source) {
            Ok(p) => Some(p),
            Err(errors) => {
                close_new(new).await;
                return Err(ConfigErrors(errors));
            }
        },
        None => None,
    };
    Ok(Built {
        catalog: Catalog {
            config: config.clone(),
            revision: previous.map_or(1, |p| p.revision + 1),
            limits,
            bindings,
            upstreams,
            policies,
            policy_digest: digest,
        },
        shared,
        new,
        waiting,
    })
}

/// The key a binding's mistakes about its upstream tool are placed at: its `tool` key when it
/// has one, else the binding's table.
fn tool_key(b: &Binding, source: &ConfigSource) -> String {
    let tool = format!("{}.tool", b.key);
    if source.keys.contains_key(&tool) {
        tool
    } else {
        b.key.clone()
    }
}

/// The configuration mistakes behind a failed discovery of `upstream`: every bound tool it does
/// not list or whose description or schema discovery refuses, each at its binding's key, with
/// the place in the tool and the reason (and with `excerpts` the listed JSON there).
async fn start_errors(
    upstream: &Arc<Upstream>,
    bindings: &BTreeMap<String, Arc<Binding>>,
    source: &ConfigSource,
    e: &UpstreamError,
    excerpts: bool,
) -> Vec<ConfigError> {
    let mine: Vec<&Arc<Binding>> = bindings
        .values()
        .filter(|b| Arc::ptr_eq(&b.upstream, upstream))
        .collect();
    let key = format!("upstreams.{}", upstream.id);
    let err = match e {
        UpstreamError::Connect(why) => {
            return vec![source.error(&key, format!("cannot connect: {why}"))]
        }
        UpstreamError::Discovery(err) => err,
        other @ (UpstreamError::Credential(_) | UpstreamError::Busy) => {
            return vec![source.error(&key, other.to_string())]
        }
    };
    let Some(refusal) = &err.refusal else {
        return vec![source.error(&key, format!("discovery failed: {}", err.code))];
    };
    // Discovery stopped at the first refused tool: look at every bound one.
    let refs: Vec<(String, String)> = mine
        .iter()
        .map(|b| (tool_key(b, source), b.remote.clone()))
        .collect();
    let found = match upstream.probe().await {
        Ok(tools) => crate::upstream::binding_mistakes(
            &upstream.id,
            &refs,
            &tools,
            upstream.limits(),
            excerpts,
        ),
        Err(_) => Vec::new(),
    };
    if !found.is_empty() {
        return found
            .into_iter()
            .map(|(k, m)| source.error(&k, m))
            .collect();
    }
    // What discovery saw, placed at the binding of the tool it names.
    let at = mine
        .iter()
        .find(|b| b.remote == refusal.tool)
        .map_or(key, |b| tool_key(b, source));
    vec![source.error(
        &at,
        crate::upstream::refusal_message(&upstream.id, err, excerpts),
    )]
}

/// Validates the policies against the schema of the bound tools as discovered (each with its
/// strict input schema): every mistake at its policy file and line.
fn compile_policies(
    sources: Sources,
    bindings: &BTreeMap<String, Arc<Binding>>,
    source: &ConfigSource,
) -> Result<Policies, Vec<ConfigError>> {
    let mut inputs = Vec::new();
    for b in bindings.values() {
        let input = b
            .upstream
            .live()
            .and_then(|live| {
                live.tools
                    .get(&b.local)
                    .map(|t| t.tool.input_schema.clone())
            })
            .map(serde_json::Value::Object);
        let kind = match b.effect {
            None => ToolKind::Read,
            Some(EffectConfig::Write) => ToolKind::Write,
            Some(EffectConfig::Destructive) => ToolKind::Destructive,
        };
        inputs.push((b.local.as_str(), kind, input.unwrap_or_default()));
    }
    let specs: Vec<ToolSpec<'_>> = inputs
        .iter()
        .map(|(local, kind, input)| ToolSpec {
            local,
            kind: *kind,
            input,
        })
        .collect();
    Policies::compile(sources, &specs, source)
}

/// A warning for every write bound with `effect = "write"` over a tool its upstream marks
/// `destructiveHint: true` (the approver is told the call writes, the upstream says it may
/// destroy), and for every read bound with `asserted_read_only = true` over a tool its upstream
/// marks destructive or not read-only.
pub(crate) fn destructive_warnings(
    bindings: &BTreeMap<String, Arc<Binding>>,
    source: &ConfigSource,
) -> Vec<String> {
    let mut out = Vec::new();
    for b in bindings.values() {
        let Some(live) = b.upstream.live() else {
            continue;
        };
        if b.effect.is_none() {
            // A read the host asserts only reads, over a tool its upstream marks as writing.
            let marks = live
                .conn
                .tools()
                .iter()
                .find(|t| t.name == b.remote)
                .and_then(marked_writing);
            if let (true, Some(marks)) = (b.asserted_read_only, marks) {
                let at = source.error(
                    &format!("{}.asserted_read_only", b.key),
                    format!(
                        "upstream {:?} marks the tool {:?} {marks}; it is served as a read, without \
                         approval, because the binding asserts it only reads",
                        b.upstream.id, b.remote
                    ),
                );
                out.push(format!("warning: {at}"));
            }
            continue;
        }
        if b.effect != Some(EffectConfig::Write) {
            continue;
        }
        let marked = live.conn.tools().iter().any(|t| {
            t.name == b.remote
                && t.annotations
                    .as_ref()
                    .and_then(|a| a.destructive_hint)
                    .unwrap_or(false)
        });
        if marked {
            let at = source.error(
                &format!("{}.effect", b.key),
                format!(
                    "upstream {:?} marks the tool {:?} destructive (destructiveHint: true), but the binding declares effect = \"write\": approvers are told it writes; declare effect = \"destructive\" if it can destroy data",
                    b.upstream.id, b.remote
                ),
            );
            out.push(format!("warning: {at}"));
        }
    }
    out
}

/// What the upstream's annotations say of a tool: `Some(why)` when it marks the tool as one that
/// writes (`destructiveHint: true` or `readOnlyHint: false`).
fn marked_writing(tool: &purra_protocol::types::Tool) -> Option<String> {
    let a = tool.annotations.as_ref()?;
    let mut marks = Vec::new();
    if a.destructive_hint == Some(true) {
        marks.push("destructive (destructiveHint: true)");
    }
    if a.read_only_hint == Some(false) {
        marks.push("not read-only (readOnlyHint: false)");
    }
    if marks.is_empty() {
        None
    } else {
        Some(marks.join(" and "))
    }
}

/// The mistakes the tools `upstream` listed show in its bindings (every one at once), as
/// [`tool_mistakes`] finds them.
fn listed_tool_mistakes(
    upstream: &Arc<Upstream>,
    bindings: &BTreeMap<String, Arc<Binding>>,
    source: &ConfigSource,
) -> Vec<ConfigError> {
    let Some(live) = upstream.live() else {
        return Vec::new();
    };
    let tools = live.conn.tools();
    let mut out = Vec::new();
    for b in bindings
        .values()
        .filter(|b| Arc::ptr_eq(&b.upstream, upstream))
    {
        let Some(tool) = tools.iter().find(|t| t.name == b.remote) else {
            continue;
        };
        let rules = match &b.scope {
            crate::rules::scope::Scope::Rules { arguments, .. } => arguments.as_slice(),
            crate::rules::scope::Scope::Open => &[],
        };
        let facts = BindingFacts {
            key: &b.key,
            tool_key: &tool_key(b, source),
            read: b.effect.is_none(),
            asserted_read_only: b.asserted_read_only,
            rules,
        };
        out.extend(
            tool_mistakes(&upstream.id, &facts, tool)
                .into_iter()
                .map(|(k, m)| source.error(&k, m)),
        );
    }
    out
}

/// What [`tool_mistakes`] looks at of one binding.
pub(crate) struct BindingFacts<'a> {
    /// The binding's table (`reads.NAME`, `writes.NAME`).
    pub key: &'a str,
    /// Where a mistake about its upstream tool is placed (its `tool` key, or the table).
    pub tool_key: &'a str,
    /// A read binding.
    pub read: bool,
    /// `asserted_read_only = true`.
    pub asserted_read_only: bool,
    /// Its argument rules.
    pub rules: &'a [crate::rules::scope::ArgumentRule],
}

/// The mistakes the upstream's listing of `tool` shows in one binding, as (key, message): a
/// read bound over a tool the upstream marks as writing, without `asserted_read_only = true`
/// (it would run without approval); an argument rule on an argument the tool's input schema
/// does not take (it would deny every call).
pub(crate) fn tool_mistakes(
    upstream: &str,
    b: &BindingFacts<'_>,
    tool: &purra_protocol::types::Tool,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if b.read && !b.asserted_read_only {
        if let Some(marks) = marked_writing(tool) {
            let local = b.key.rsplit('.').next().unwrap_or(b.key);
            out.push((
                b.tool_key.to_owned(),
                format!(
                    "upstream {upstream:?} marks the tool {:?} {marks}, but it is bound as a read, \
                     which runs without approval: bind it as [writes.{local}], or, if it only \
                     reads, say asserted_read_only = true",
                    tool.name
                ),
            ));
        }
    }
    let schema = serde_json::Value::Object(tool.input_schema.clone());
    let whose = format!("the tool {:?} of upstream {upstream:?}", tool.name);
    for (i, rule) in b.rules.iter().enumerate() {
        if let Some(why) = rule.missing_in(&schema, &whose) {
            out.push((
                format!("{}.scope.arguments[{i}]", b.key),
                format!("the rule `{}` {why}: it would deny every call", rule.text()),
            ));
        }
    }
    out
}

/// Reads and checks the configuration file at `path` (relative paths in it are resolved against
/// its directory), and reads and parses the policy files it names. Every mistake is in the
/// error, in file order; a file that configures no upstream or binds nothing is one
/// ([`GatewayConfig::check_serves`]). Nothing is connected.
pub fn load(path: &std::path::Path) -> Result<crate::config::Loaded, ConfigErrors> {
    let loaded = crate::config::load_file(path)?;
    if let Some(p) = &loaded.config.policies {
        let mut mistakes = crate::policy::file_mistakes(p, &loaded.source);
        if !mistakes.is_empty() {
            crate::config::parse::sort_mistakes(&mut mistakes, &loaded.source.file);
            return Err(ConfigErrors(mistakes));
        }
    }
    Ok(loaded)
}

/// Like [`load`], and when the file has mistakes, also connects to each upstream that could be
/// read and adds a mistake for every bound tool it does not list or whose description or schema
/// discovery would refuse: every mistake at once, before anything is served. (A file without
/// mistakes is checked against its upstreams by [`crate::Gateway::start`], which connects
/// anyway.)
pub async fn load_reporting_all(
    path: &std::path::Path,
) -> Result<crate::config::Loaded, ConfigErrors> {
    load_reporting_all_with(path, false).await
}

/// [`load_reporting_all`], with `excerpts`: a refused tool's mistake also shows the listed JSON
/// around the refused place (as [`crate::StartOptions::excerpts`] does at start).
pub async fn load_reporting_all_with(
    path: &std::path::Path,
    excerpts: bool,
) -> Result<crate::config::Loaded, ConfigErrors> {
    use crate::config::parse::{base_dir, read_bounded, resolve_policy_files, sort_mistakes};
    let text = match read_bounded(path) {
        Ok(t) => t,
        Err(_) => return load(path),
    };
    let file = path.display().to_string();
    let partial = match crate::config::read(&file, &text, true) {
        Ok(_) => return load(path),
        Err(p) => p,
    };
    let source = ConfigSource {
        file,
        keys: partial.keys,
    };
    let mut errors = partial.errors;
    if let Some(mut p) = partial.policies {
        resolve_policy_files(path, &mut p);
        errors.extend(crate::policy::file_mistakes(&p, &source));
    }
    let base = base_dir(path);
    // The gateway's own defaults (earlier dialects accepted), as at start: not the library's.
    let limits = partial.limits.unwrap_or_default().limits();
    for (id, mut u) in partial.upstreams {
        let refs: Vec<&(String, String, String)> =
            partial.refs.iter().filter(|r| r.1 == id).collect();
        if refs.is_empty() || (u.command.is_some() == u.url.is_some()) {
            continue;
        }
        if u.command.as_ref().is_some_and(|c| c.is_empty()) {
            continue;
        }
        u.cwd = Some(u.cwd.map_or_else(|| base.to_path_buf(), |c| base.join(c)));
        if let Some(auth) = u.auth.as_mut() {
            for f in auth.files_mut() {
                *f = base.join(&*f);
            }
        }
        // Probed with its service identity, if any (no store: per-principal ones list as the
        // shared connection does).
        let identity =
            crate::upstream::identity::identity(&id, &u, &Default::default()).unwrap_or_default();
        let probe = Upstream::new(id.clone(), u, limits, BTreeMap::new(), BTreeMap::new())
            .with_identity(identity);
        match probe.probe().await {
            Ok(tools) => {
                let refs: Vec<(String, String)> =
                    refs.iter().map(|r| (r.0.clone(), r.2.clone())).collect();
                let mut found =
                    crate::upstream::binding_mistakes(&id, &refs, &tools, &limits, excerpts);
                // What the listing shows of each binding: a read over a tool marked writing, a
                // rule on an argument the tool does not take.
                for (tool_key, remote) in &refs {
                    let key = tool_key.strip_suffix(".tool").unwrap_or(tool_key);
                    let listed: Vec<&purra_protocol::types::Tool> =
                        tools.iter().filter(|t| &t.name == remote).collect();
                    let (Some(facts), [tool]) = (partial.facts.get(key), listed.as_slice()) else {
                        continue;
                    };
                    // Rules that cannot parse are mistakes already; the rest are not looked at.
                    let Ok(rules) = facts
                        .rules
                        .iter()
                        .map(|r| crate::scope::ArgumentRule::parse(r))
                        .collect::<Result<Vec<_>, _>>()
                    else {
                        continue;
                    };
                    let b = BindingFacts {
                        key,
                        tool_key,
                        read: facts.read,
                        asserted_read_only: facts.asserted_read_only,
                        rules: &rules,
                    };
                    found.extend(tool_mistakes(&id, &b, tool));
                }
                errors.extend(found.into_iter().map(|(k, m)| source.error(&k, m)));
            }
            Err(e) => errors.push(source.error(&format!("upstreams.{id}"), e.to_string())),
        }
    }
    sort_mistakes(&mut errors, &source.file);
    Err(ConfigErrors(errors))
}
