//! Reading a configuration file: every mistake reported at once, each with the file, the line
//! and the dotted key.
//!
//! The TOML document is parsed with spans; each table is walked with its known keys, and each
//! value is deserialized on its own with serde (so one wrong value never hides another, and an
//! unknown key is found beside a wrong type). Then [`GatewayConfig::check`] runs on what could be
//! read, and its problems get the line of their key. Nothing is started before all of this.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use toml::de::{DeTable, DeValue, ValueDeserializer};
use toml::Spanned;

use crate::config::{
    AuthSettings, ConfigError, ConfigErrors, GatewayConfig, IntrospectionSettings, LimitsConfig,
    PageOidc, PageSettings, PoliciesConfig, ReadConfig, ScopeConfig, ScopeRules, Settings,
    SkillConfig, TelemetrySettings, UpstreamConfig, WebhookConfig, WriteConfig,
};

/// Whether a `db` setting is a PostgreSQL URL (kept as written) rather than a file path.
fn is_postgres_url(db: &Path) -> bool {
    db.to_str()
        .is_some_and(|d| d.starts_with("postgres://") || d.starts_with("postgresql://"))
}

/// Reads and checks the configuration file at `path` (relative paths in it are resolved against
/// its directory). Every mistake is in the error, in file order; a file that configures no
/// upstream or binds nothing is one ([`GatewayConfig::check_serves`]).
pub fn load(path: &Path) -> Result<Loaded, ConfigErrors> {
    let file = path.display().to_string();
    let text = read_bounded(path).map_err(|message| {
        ConfigErrors(vec![ConfigError {
            file: file.clone(),
            line: None,
            key: String::new(),
            message,
        }])
    })?;
    let Loaded { mut config, source } =
        read_str(&file, &text, true).map_err(|p| ConfigErrors(p.errors))?;
    let base = base_dir(path);
    if config.gateway.db.is_relative() && !is_postgres_url(&config.gateway.db) {
        config.gateway.db = base.join(&config.gateway.db);
    }
    if let Some(f) = config
        .gateway
        .auth
        .as_mut()
        .and_then(|a| a.introspection.as_mut())
        .and_then(|i| i.client_secret_file.as_mut())
    {
        if f.is_relative() {
            *f = base.join(&*f);
        }
    }
    if let Some(f) = config
        .page
        .oidc
        .as_mut()
        .and_then(|o| o.client_secret_file.as_mut())
    {
        if f.is_relative() {
            *f = base.join(&*f);
        }
    }
    if let Some(f) = config.telemetry.metrics_token_file.as_mut() {
        if f.is_relative() {
            *f = base.join(&*f);
        }
    }
    for w in config.webhooks.values_mut() {
        if let Some(f) = w.secret_file.as_mut() {
            if f.is_relative() {
                *f = base.join(&*f);
            }
        }
    }
    for u in config.upstreams.values_mut() {
        if let Some(cwd) = &u.cwd {
            if cwd.is_relative() {
                u.cwd = Some(base.join(cwd));
            }
        } else if u.command.is_some() {
            u.cwd = Some(base.to_path_buf());
        }
    }
    if let Some(p) = config.policies.as_mut() {
        resolve_policy_files(path, p);
        let mut mistakes = crate::policy::file_mistakes(p, &source);
        if !mistakes.is_empty() {
            sort_mistakes(&mut mistakes, &source.file);
            return Err(ConfigErrors(mistakes));
        }
    }
    Ok(Loaded { config, source })
}

/// Puts the mistakes in the order they are read in: the configuration file's by line, then each
/// policy file's by line.
fn sort_mistakes(errors: &mut [ConfigError], config: &str) {
    errors.sort_by(|a, b| {
        (a.file != config, &a.file, a.line.unwrap_or(0)).cmp(&(
            b.file != config,
            &b.file,
            b.line.unwrap_or(0),
        ))
    });
}

/// Resolves the policy files named by the configuration at `path` against its directory (a
/// file in the current directory keeps its names as written, so messages name them so).
fn resolve_policy_files(path: &Path, p: &mut PoliciesConfig) {
    let Some(base) = path.parent().filter(|b| !b.as_os_str().is_empty()) else {
        return;
    };
    for f in &mut p.files {
        if f.is_relative() {
            *f = base.join(&*f);
        }
    }
}

/// The largest configuration file read (1 MiB): bounded before it is parsed.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

fn read_bounded(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read the file: {e}"))?;
    let mut text = String::new();
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read the file: {e}"))?;
    if text.len() as u64 > MAX_CONFIG_BYTES {
        return Err(format!("the file is larger than {MAX_CONFIG_BYTES} bytes"));
    }
    Ok(text)
}

/// The directory relative paths of the configuration at `path` are resolved against.
fn base_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// A configuration read from a file, with where each key is.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The configuration.
    pub config: GatewayConfig,
    /// The file and the line of each key, to place mistakes found later (at start).
    pub source: ConfigSource,
}

/// Where a configuration came from: the file, and the line of every key in it.
#[derive(Debug, Clone, Default)]
pub struct ConfigSource {
    /// The file as named by the user (empty for a configuration built in code).
    pub file: String,
    /// The 1-based line of every dotted key.
    pub keys: BTreeMap<String, usize>,
}

impl ConfigSource {
    /// A mistake at `key` (placed on the line of the key, or of its closest enclosing key).
    pub fn error(&self, key: &str, message: impl Into<String>) -> ConfigError {
        ConfigError {
            file: self.file.clone(),
            line: line_of(&self.keys, key),
            key: key.to_owned(),
            message: message.into(),
        }
    }
}

/// The line of `key`, or of its closest enclosing key (`a.b[2]` → `a.b` → `a`).
fn line_of(keys: &BTreeMap<String, usize>, key: &str) -> Option<usize> {
    let mut k = key;
    loop {
        if let Some(line) = keys.get(k) {
            return Some(*line);
        }
        let cut = k.rfind(['.', '['])?;
        k = &k[..cut];
    }
}

/// Reads and checks configuration text; `file` names it in messages. A fragment (no upstream,
/// nothing bound) is checked as far as it goes: [`load`] and [`crate::Gateway::start`] refuse it.
pub fn load_str(file: &str, text: &str) -> Result<Loaded, ConfigErrors> {
    read_str(file, text, false).map_err(|p| ConfigErrors(p.errors))
}

/// What a configuration with mistakes still says: enough to look for more mistakes upstream.
struct Partial {
    errors: Vec<ConfigError>,
    keys: BTreeMap<String, usize>,
    /// Upstreams that could be read.
    upstreams: BTreeMap<String, UpstreamConfig>,
    /// Every binding's (key, upstream, upstream tool), also of bindings with mistakes.
    refs: Vec<(String, String, String)>,
    /// What the upstream's listing is checked against, by binding table.
    facts: BTreeMap<String, Facts>,
    /// The `[limits]` table, when it could be read.
    limits: Option<Box<LimitsConfig>>,
    /// The `[policies]` table, when it could be read.
    policies: Option<Box<PoliciesConfig>>,
}

/// Reads `text`; `whole` adds the checks of a whole configuration (something to serve).
fn read_str(file: &str, text: &str, whole: bool) -> Result<Loaded, Box<Partial>> {
    let mut cx = Cx {
        file: file.to_owned(),
        lines: LineIndex::new(text),
        errors: Vec::new(),
        keys: BTreeMap::new(),
        upstreams: BTreeMap::new(),
        refs: Vec::new(),
        facts: BTreeMap::new(),
        limits: None,
        policies: None,
    };
    let (doc, syntax) = DeTable::parse_recoverable(text);
    if !syntax.is_empty() {
        let errors = syntax
            .into_iter()
            .map(|e| ConfigError {
                file: file.to_owned(),
                line: e.span().map(|s| cx.lines.line(s.start)),
                key: String::new(),
                message: format!("invalid TOML: {}", e.message().trim()),
            })
            .collect();
        return Err(Box::new(Partial {
            errors,
            keys: BTreeMap::new(),
            upstreams: BTreeMap::new(),
            refs: Vec::new(),
            facts: BTreeMap::new(),
            limits: None,
            policies: None,
        }));
    }
    let config = cx.document(doc.get_ref(), doc.span());
    if let Some(config) = &config {
        let serves = if whole {
            config.check_serves()
        } else {
            Vec::new()
        };
        for (key, message) in config.check().into_iter().chain(serves) {
            let line = line_of(&cx.keys, &key);
            cx.errors.push(ConfigError {
                file: file.to_owned(),
                line,
                key,
                message,
            });
        }
    }
    let mut seen = std::collections::HashSet::new();
    cx.errors
        .retain(|e| seen.insert((e.key.clone(), e.message.clone())));
    match config {
        Some(config) if cx.errors.is_empty() => Ok(Loaded {
            config,
            source: ConfigSource {
                file: file.to_owned(),
                keys: cx.keys,
            },
        }),
        _ => {
            let mut errors = cx.errors;
            errors.sort_by_key(|e| e.line.unwrap_or(0));
            Err(Box::new(Partial {
                errors,
                keys: cx.keys,
                upstreams: cx.upstreams,
                refs: cx.refs,
                facts: cx.facts,
                limits: cx.limits.map(Box::new),
                policies: cx.policies.map(Box::new),
            }))
        }
    }
}

/// Like [`load`], and when the file has mistakes, also connects to each upstream that could be
/// read and adds a mistake for every bound tool it does not list or whose description or schema
/// discovery would refuse: every mistake at once, before anything is served. (A file without
/// mistakes is checked against its upstreams by [`crate::Gateway::start`], which connects
/// anyway.)
pub async fn load_reporting_all(path: &Path) -> Result<Loaded, ConfigErrors> {
    load_reporting_all_with(path, false).await
}

/// [`load_reporting_all`], with `excerpts`: a refused tool's mistake also shows the listed JSON
/// around the refused place (as [`crate::StartOptions::excerpts`] does at start).
pub async fn load_reporting_all_with(path: &Path, excerpts: bool) -> Result<Loaded, ConfigErrors> {
    let text = match read_bounded(path) {
        Ok(t) => t,
        Err(_) => return load(path),
    };
    let file = path.display().to_string();
    let partial = match read_str(&file, &text, true) {
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
        let probe =
            crate::upstream::Upstream::new(id.clone(), u, limits, BTreeMap::new(), BTreeMap::new());
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
                    let b = crate::catalog::BindingFacts {
                        key,
                        tool_key,
                        read: facts.read,
                        asserted_read_only: facts.asserted_read_only,
                        rules: &rules,
                    };
                    found.extend(crate::catalog::tool_mistakes(&id, &b, tool));
                }
                errors.extend(found.into_iter().map(|(k, m)| source.error(&k, m)));
            }
            Err(e) => errors.push(source.error(&format!("upstreams.{id}"), e.to_string())),
        }
    }
    sort_mistakes(&mut errors, &source.file);
    Err(ConfigErrors(errors))
}

/// What of a binding the upstream's listing of its tool is checked against
/// ([`crate::catalog::tool_mistakes`]).
struct Facts {
    read: bool,
    asserted_read_only: bool,
    /// Its argument rules as written.
    rules: Vec<String>,
}

/// Byte offsets to 1-based line numbers.
pub(crate) struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    pub(crate) fn new(text: &str) -> LineIndex {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        LineIndex { starts }
    }

    pub(crate) fn line(&self, offset: usize) -> usize {
        match self.starts.binary_search(&offset) {
            Ok(i) => i + 1,
            Err(i) => i,
        }
    }
}

struct Cx {
    file: String,
    lines: LineIndex,
    errors: Vec<ConfigError>,
    /// The line of every key seen, by dotted path (for the problems of the semantic check).
    keys: BTreeMap<String, usize>,
    /// Upstreams that could be read.
    upstreams: BTreeMap<String, UpstreamConfig>,
    /// Every binding's (key of its tool, upstream, upstream tool).
    refs: Vec<(String, String, String)>,
    /// What the upstream's listing is checked against, by binding table.
    facts: BTreeMap<String, Facts>,
    /// The `[limits]` table, when it could be read.
    limits: Option<LimitsConfig>,
    /// The `[policies]` table, when it could be read.
    policies: Option<PoliciesConfig>,
}

impl Cx {
    fn line_of(&self, key: &str) -> Option<usize> {
        line_of(&self.keys, key)
    }

    fn reference(&mut self, binding: &str, upstream: Option<&String>, tool: Option<&String>) {
        let Some(upstream) = upstream else { return };
        let local = binding.rsplit('.').next().unwrap_or(binding);
        let key = if tool.is_some() {
            format!("{binding}.tool")
        } else {
            binding.to_owned()
        };
        let remote = tool.cloned().unwrap_or_else(|| local.to_owned());
        self.refs.push((key, upstream.clone(), remote));
    }
}

impl Cx {
    fn error(&mut self, span: Range<usize>, key: &str, message: impl Into<String>) {
        self.errors.push(ConfigError {
            file: self.file.clone(),
            line: Some(self.lines.line(span.start)),
            key: key.to_owned(),
            message: message.into(),
        });
    }

    fn document(&mut self, doc: &DeTable<'_>, span: Range<usize>) -> Option<GatewayConfig> {
        let mut t = Fields::new(self, doc, "", span);
        let gateway = t.table("gateway", |cx, table, key, span| {
            Some(cx.settings(table, key, span))
        });
        let limits = t.table("limits", |cx, table, key, span| {
            let mut f = Fields::new(cx, table, key, span);
            let l = LimitsConfig {
                max_pages: f.opt("max_pages"),
                max_tools: f.opt("max_tools"),
                max_catalog_bytes: f.opt("max_catalog_bytes"),
                max_schema_bytes: f.opt("max_schema_bytes"),
                max_description_bytes: f.opt("max_description_bytes"),
                max_result_bytes: f.opt("max_result_bytes"),
                max_content_blocks: f.opt("max_content_blocks"),
                timeout: f.opt("timeout"),
                earlier_schema_dialects: f.opt("earlier_schema_dialects"),
            };
            f.finish();
            cx.limits = Some(l);
            Some(l)
        });
        let upstreams = t.map("upstreams", |cx, table, key, span| {
            let mut f = Fields::new(cx, table, key, span);
            let u = UpstreamConfig {
                command: f.opt("command"),
                env: f.opt("env").unwrap_or_default(),
                cwd: f.opt("cwd"),
                url: f.opt("url"),
                headers: f.opt("headers").unwrap_or_default(),
            };
            f.finish();
            cx.upstreams
                .insert(key.rsplit('.').next().unwrap_or(key).to_owned(), u.clone());
            Some(u)
        });
        let reads = t.map("reads", |cx, table, key, span| {
            let mut f = Fields::new(cx, table, key, span);
            let upstream = f.req("upstream");
            let tool = f.opt("tool");
            let title = f.req("title");
            let concurrency = f.opt("concurrency").unwrap_or_default();
            let scope = f.scope(false);
            let tasks = f.opt("tasks").unwrap_or(false);
            let asserted_read_only = f.opt("asserted_read_only").unwrap_or(false);
            f.finish();
            cx.reference(key, upstream.as_ref(), tool.as_ref());
            let rules = match &scope {
                Some(ScopeConfig::Rules(r)) => r.arguments.clone(),
                _ => Vec::new(),
            };
            cx.facts.insert(
                key.to_owned(),
                Facts {
                    read: true,
                    asserted_read_only,
                    rules,
                },
            );
            Some(ReadConfig {
                upstream: upstream?,
                tool,
                title: title?,
                concurrency,
                scope: scope?,
                tasks,
                asserted_read_only,
            })
        });
        let writes = t.map("writes", |cx, table, key, span| {
            let mut f = Fields::new(cx, table, key, span);
            let upstream = f.req("upstream");
            let tool = f.opt("tool");
            let title = f.req("title");
            let effect = f.req("effect");
            let risk = f.opt("risk");
            let binding_id = f.req("binding_id");
            let binding_revision = f.req_why(
                "binding_revision",
                "a write binding needs its binding revision (change it whenever the authorization changes)",
            );
            let scope_id = f.req("scope_id");
            let scope_revision = f.req_why(
                "scope_revision",
                "a write binding needs its scope revision (change it whenever the scope rules change)",
            );
            let scope = match f.scope(true) {
                Some(ScopeConfig::Rules(r)) => Some(r),
                _ => None,
            };
            let approval = f.opt("approval").unwrap_or_default();
            let receipt_ttl = f.opt("receipt_ttl");
            f.finish();
            cx.reference(key, upstream.as_ref(), tool.as_ref());
            cx.facts.insert(
                key.to_owned(),
                Facts {
                    read: false,
                    asserted_read_only: false,
                    rules: scope.as_ref().map(|r| r.arguments.clone()).unwrap_or_default(),
                },
            );
            Some(WriteConfig {
                upstream: upstream?,
                tool,
                title: title?,
                effect: effect?,
                risk,
                binding_id: binding_id?,
                binding_revision: binding_revision?,
                scope_id: scope_id?,
                scope_revision: scope_revision?,
                scope: scope?,
                approval,
                receipt_ttl,
            })
        });
        let skills = t.map("skills", |cx, table, key, span| {
            let mut f = Fields::new(cx, table, key, span);
            let upstream = f.req("upstream");
            let uri = f.opt("uri");
            f.finish();
            Some(SkillConfig {
                upstream: upstream?,
                uri,
            })
        });
        let page = t.table("page", |cx, table, key, span| {
            let mut f = Fields::new(cx, table, key, span);
            let token_login = f.opt("token_login");
            let secure_cookie = f.opt("secure_cookie");
            let url = f.opt("url");
            let oidc = f.table("oidc", |cx, table, key, span| {
                let mut f = Fields::new(cx, table, key, span);
                let issuer = f.req("issuer");
                let client_id = f.req("client_id");
                let o = PageOidc {
                    issuer: issuer?,
                    client_id: client_id?,
                    client_secret_file: f.opt("client_secret_file"),
                    client_secret_env: f.opt("client_secret_env"),
                    redirect_uri: f.opt("redirect_uri"),
                    scopes: f.opt("scopes"),
                    label: f.opt("label"),
                    allow_subjects: f.opt("allow_subjects").unwrap_or_default(),
                    allow_emails: f.opt("allow_emails").unwrap_or_default(),
                    require_claim: f.opt("require_claim"),
                };
                f.finish();
                Some(o)
            });
            f.finish();
            Some(PageSettings {
                token_login: token_login.unwrap_or(true),
                secure_cookie: secure_cookie.unwrap_or(false),
                url,
                oidc: match oidc {
                    Some(o) => Some(o?),
                    None => None,
                },
            })
        });
        let policies = t.table("policies", |cx, table, key, span| {
            let mut f = Fields::new(cx, table, key, span);
            let files = f.req_why(
                "files",
                "name the Cedar policy files, such as files = [\"policies.cedar\"]",
            );
            let claims = f.opt("claims").unwrap_or_default();
            f.finish();
            let p = PoliciesConfig {
                files: files?,
                claims,
            };
            cx.policies = Some(p.clone());
            Some(p)
        });
        let webhooks = t.map("webhooks", |cx, table, key, span| {
            let mut f = Fields::new(cx, table, key, span);
            let d = WebhookConfig::new("");
            let url = f.req("url");
            let secret_file = f.opt("secret_file");
            let secret_env = f.opt("secret_env");
            let events = f.opt("events").unwrap_or(d.events);
            let format = f.opt("format").unwrap_or(d.format);
            let timeout = f.opt("timeout").unwrap_or(d.timeout);
            let backoff = f.opt("backoff").unwrap_or(d.backoff);
            let max_backoff = f.opt("max_backoff").unwrap_or(d.max_backoff);
            let give_up_after = f.opt("give_up_after").unwrap_or(d.give_up_after);
            f.finish();
            Some(WebhookConfig {
                url: url?,
                secret_file,
                secret_env,
                events,
                format,
                timeout,
                backoff,
                max_backoff,
                give_up_after,
            })
        });
        let telemetry = t.table("telemetry", |cx, table, key, span| {
            let d = TelemetrySettings::default();
            let mut f = Fields::new(cx, table, key, span);
            let s = TelemetrySettings {
                otlp_endpoint: f.opt("otlp_endpoint"),
                service_name: f.opt("service_name"),
                metrics_listen: f
                    .opt::<crate::config::Address>("metrics_listen")
                    .map(|a| a.0),
                metrics_interval: f.opt("metrics_interval").unwrap_or(d.metrics_interval),
                metrics_token_file: f.opt("metrics_token_file"),
            };
            f.finish();
            Some(s)
        });
        t.finish();
        Some(GatewayConfig {
            telemetry: telemetry.unwrap_or_else(|| Some(TelemetrySettings::default()))?,
            policies: match policies {
                Some(p) => Some(p?),
                None => None,
            },
            webhooks: webhooks?,
            page: page.unwrap_or_else(|| Some(PageSettings::default()))?,
            gateway: gateway.unwrap_or_else(|| Some(Settings::default()))?,
            limits: limits.unwrap_or_else(|| Some(LimitsConfig::default()))?,
            upstreams: upstreams?,
            reads: reads?,
            writes: writes?,
            skills: skills?,
        })
    }

    fn settings(&mut self, table: &DeTable<'_>, key: &str, span: Range<usize>) -> Settings {
        let d = Settings::default();
        let mut f = Fields::new(self, table, key, span);
        let s = Settings {
            name: f.opt("name").unwrap_or(d.name),
            db: f.opt("db").unwrap_or(d.db),
            listen: f.opt("listen").unwrap_or(d.listen),
            principal: f.opt("principal").unwrap_or(d.principal),
            approval_wait: f.opt("approval_wait").unwrap_or(d.approval_wait),
            progress_interval: f.opt("progress_interval").unwrap_or(d.progress_interval),
            elicitation: f.opt("elicitation").unwrap_or(d.elicitation),
            approval_ttl: f.opt("approval_ttl").unwrap_or(d.approval_ttl),
            approval_request_ttl: f
                .opt("approval_request_ttl")
                .unwrap_or(d.approval_request_ttl),
            apps: f.opt("apps").unwrap_or(d.apps),
            run_decided_without_caller: f
                .opt("run_decided_without_caller")
                .unwrap_or(d.run_decided_without_caller),
            lease: f.opt("lease").unwrap_or(d.lease),
            max_pending_per_caller: f
                .opt("max_pending_per_caller")
                .unwrap_or(d.max_pending_per_caller),
            max_calls_per_minute_per_caller: f
                .opt("max_calls_per_minute_per_caller")
                .unwrap_or(d.max_calls_per_minute_per_caller),
            max_sessions: f.opt("max_sessions").unwrap_or(d.max_sessions),
            max_sessions_per_caller: f
                .opt("max_sessions_per_caller")
                .unwrap_or(d.max_sessions_per_caller),
            session_idle_timeout: f
                .opt("session_idle_timeout")
                .unwrap_or(d.session_idle_timeout),
            approvers_must_differ: f
                .opt("approvers_must_differ")
                .unwrap_or(d.approvers_must_differ),
            drain_timeout: f.opt("drain_timeout").unwrap_or(d.drain_timeout),
            allowed_hosts: f.opt("allowed_hosts").unwrap_or(d.allowed_hosts),
            auth: f
                .table("auth", |cx, table, key, span| cx.auth(table, key, span))
                .flatten(),
        };
        f.finish();
        s
    }

    /// The `[gateway.auth]` table (every key read before a missing one makes it unreadable).
    fn auth(&mut self, table: &DeTable<'_>, key: &str, span: Range<usize>) -> Option<AuthSettings> {
        let mut f = Fields::new(self, table, key, span);
        let issuer = f.req("issuer");
        let resource = f.opt("resource");
        let jwks_uri = f.opt("jwks_uri");
        let require_at_jwt = f.opt("require_at_jwt");
        let scopes = f.opt("scopes").unwrap_or_default();
        let scopes_supported = f.opt("scopes_supported");
        let introspection = f.table("introspection", |cx, table, key, span| {
            let mut f = Fields::new(cx, table, key, span);
            let endpoint = f.req("endpoint");
            let client_id = f.req("client_id");
            let client_secret_file = f.opt("client_secret_file");
            let client_secret_env = f.opt("client_secret_env");
            let cache_max_age = f.opt("cache_max_age");
            let cache_inactive = f.opt("cache_inactive");
            let cache_max_entries = f.opt("cache_max_entries");
            let max_concurrent_per_address = f.opt("max_concurrent_per_address");
            f.finish();
            Some(IntrospectionSettings {
                endpoint: endpoint?,
                client_id: client_id?,
                client_secret_file,
                client_secret_env,
                cache_max_age,
                cache_inactive,
                cache_max_entries,
                max_concurrent_per_address,
            })
        });
        f.finish();
        Some(AuthSettings {
            issuer: issuer?,
            resource,
            jwks_uri,
            require_at_jwt,
            scopes,
            scopes_supported,
            introspection: match introspection {
                Some(i) => Some(i?),
                None => None,
            },
        })
    }
}

/// One table being read: the keys taken so far, so that the rest are reported as unknown.
struct Fields<'c, 't, 'i> {
    cx: &'c mut Cx,
    table: &'t DeTable<'i>,
    path: String,
    span: Range<usize>,
    taken: Vec<&'static str>,
}

type Entry<'t, 'i> = (
    &'t Spanned<toml::de::DeString<'i>>,
    &'t Spanned<DeValue<'i>>,
);

impl<'c, 't, 'i> Fields<'c, 't, 'i> {
    fn new(cx: &'c mut Cx, table: &'t DeTable<'i>, path: &str, span: Range<usize>) -> Self {
        Fields {
            cx,
            table,
            path: path.to_owned(),
            span,
            taken: Vec::new(),
        }
    }

    fn key(&self, name: &str) -> String {
        if self.path.is_empty() {
            name.to_owned()
        } else {
            format!("{}.{name}", self.path)
        }
    }

    fn entry(&mut self, name: &'static str) -> Option<Entry<'t, 'i>> {
        self.taken.push(name);
        let entry = self.table.get_key_value(name)?;
        let line = self.cx.lines.line(entry.0.span().start);
        self.cx.keys.insert(self.key(name), line);
        Some(entry)
    }

    /// An optional value, deserialized on its own; a wrong one is reported and read as absent.
    fn opt<T: DeserializeOwned>(&mut self, name: &'static str) -> Option<T> {
        let (_, value) = self.entry(name)?;
        match T::deserialize(ValueDeserializer::from(value.clone())) {
            Ok(v) => Some(v),
            Err(e) => {
                let key = self.key(name);
                let span = e.span().unwrap_or(value.span());
                self.cx.error(span, &key, e.message().trim().to_owned());
                None
            }
        }
    }

    /// A required value.
    fn req<T: DeserializeOwned>(&mut self, name: &'static str) -> Option<T> {
        self.req_why(name, "required")
    }

    /// A required value, with what to say when it is missing.
    fn req_why<T: DeserializeOwned>(&mut self, name: &'static str, why: &str) -> Option<T> {
        if !self.table.contains_key(name) {
            self.taken.push(name);
            let key = self.key(name);
            self.cx.error(self.span.clone(), &key, why);
            return None;
        }
        self.opt(name)
    }

    /// The `scope` key: `"open"` (reads only) or a table of rules.
    fn scope(&mut self, write: bool) -> Option<ScopeConfig> {
        let Some((_, value)) = self.entry("scope") else {
            let key = self.key("scope");
            let why = if write {
                "a write binding needs scope rules (a table: principals, clients, arguments); writes cannot opt out"
            } else {
                "required: scope rules, or \"open\" to opt out explicitly"
            };
            self.cx.error(self.span.clone(), &key, why);
            return None;
        };
        let key = self.key("scope");
        match value.get_ref() {
            DeValue::String(s) if s.as_ref() == "open" && !write => Some(ScopeConfig::Open),
            DeValue::String(_) if write => {
                self.cx.error(
                    value.span(),
                    &key,
                    "writes cannot opt out of scope rules: give a table (principals, clients, arguments)",
                );
                None
            }
            DeValue::Table(t) => {
                let mut f = Fields::new(self.cx, t, &key, value.span());
                let rules = ScopeRules {
                    principals: f.opt("principals"),
                    clients: f.opt("clients"),
                    arguments: f.opt("arguments").unwrap_or_default(),
                };
                f.finish();
                // Reported here too, so a rule that cannot parse is found even when the rest of
                // its binding has mistakes (duplicates are dropped at the end).
                let mut problems = Vec::new();
                crate::config::check_rules(&key, &rules, &mut problems);
                for (k, m) in problems {
                    let line = self.cx.line_of(&k);
                    self.cx.errors.push(ConfigError {
                        file: self.cx.file.clone(),
                        line,
                        key: k,
                        message: m,
                    });
                }
                Some(ScopeConfig::Rules(rules))
            }
            _ => {
                self.cx.error(
                    value.span(),
                    &key,
                    "expected \"open\" or a table of rules (principals, clients, arguments)",
                );
                None
            }
        }
    }

    /// A sub-table read by `read`; `None` when absent, `Some(None)` when it could not be read.
    fn table<T>(
        &mut self,
        name: &'static str,
        read: impl FnOnce(&mut Cx, &DeTable<'i>, &str, Range<usize>) -> Option<T>,
    ) -> Option<Option<T>> {
        let (k, value) = self.entry(name)?;
        let key = self.key(name);
        match value.get_ref() {
            DeValue::Table(t) => Some(read(self.cx, t, &key, k.span())),
            other => {
                self.cx.error(
                    value.span(),
                    &key,
                    format!("expected a table, found {}", other.type_str()),
                );
                Some(None)
            }
        }
    }

    /// A table of named sub-tables, each read by `read`; `None` when any could not be read.
    fn map<T>(
        &mut self,
        name: &'static str,
        mut read: impl FnMut(&mut Cx, &DeTable<'i>, &str, Range<usize>) -> Option<T>,
    ) -> Option<BTreeMap<String, T>> {
        let Some((_, value)) = self.entry(name) else {
            return Some(BTreeMap::new());
        };
        let key = self.key(name);
        let DeValue::Table(t) = value.get_ref() else {
            self.cx.error(
                value.span(),
                &key,
                format!("expected a table, found {}", value.get_ref().type_str()),
            );
            return None;
        };
        let mut out = BTreeMap::new();
        let mut ok = true;
        for (k, v) in t.iter() {
            let item = format!("{key}.{}", k.get_ref());
            let line = self.cx.lines.line(k.span().start);
            self.cx.keys.insert(item.clone(), line);
            let read = match v.get_ref() {
                DeValue::Table(inner) => read(self.cx, inner, &item, k.span()),
                other => {
                    self.cx.error(
                        v.span(),
                        &item,
                        format!("expected a table, found {}", other.type_str()),
                    );
                    None
                }
            };
            match read {
                Some(r) => {
                    out.insert(k.get_ref().to_string(), r);
                }
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    /// Reports every key not taken.
    fn finish(self) {
        let mut expected = self.taken.clone();
        expected.sort_unstable();
        for (k, _) in self.table.iter() {
            if !self.taken.contains(&k.get_ref().as_ref()) {
                let key = self.key(k.get_ref());
                self.cx.error(
                    k.span(),
                    &key,
                    format!("unknown key (expected one of: {})", expected.join(", ")),
                );
            }
        }
    }
}

/// Deserializes a whole configuration with serde alone (no per-key messages): what an embedding
/// host does with a configuration in another format. Used by tests to keep both paths equal.
pub fn from_toml_serde(text: &str) -> Result<GatewayConfig, String> {
    GatewayConfig::deserialize(toml::de::Deserializer::parse(text).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())
}
