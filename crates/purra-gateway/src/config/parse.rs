//! Reading configuration text: every mistake reported at once, each with the file, the line and
//! the dotted key, from the one set of types.
//!
//! The TOML text is parsed with spans (the line of every key) and as a JSON value, which is
//! validated against the JSON Schema generated from the types ([`super::json_schema`]), every
//! error at once: unknown keys, wrong types, missing keys, unknown names, patterns. Each wrong
//! value is removed and the rest deserialized with serde; a mistake only a custom parser finds is
//! reported with its key too, and removed, until the rest reads. Then
//! [`GatewayConfig::check`] runs on what could be read (when nothing required was missing), and its
//! problems get the line of their key. Nothing is started, and nothing connected, by any of this.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

use super::schema::{deref, node_at, pattern_expected, validator};
use super::{
    check_rules, ConfigError, ConfigErrors, GatewayConfig, LimitsConfig, PoliciesConfig,
    ScopeRules, UpstreamConfig,
};

/// Whether a `db` setting is a PostgreSQL URL (kept as written) rather than a file path.
fn is_postgres_url(db: &Path) -> bool {
    db.to_str()
        .is_some_and(|d| d.starts_with("postgres://") || d.starts_with("postgresql://"))
}

/// Reads and checks the configuration file at `path` (relative paths in it are resolved against
/// its directory, policy files named but not read: [`crate::load`] reads them). Every mistake is
/// in the error, in file order; a file that configures no upstream or binds nothing is one
/// ([`GatewayConfig::check_serves`]).
pub fn load_file(path: &Path) -> Result<Loaded, ConfigErrors> {
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
        read(&file, &text, true).map_err(|p| ConfigErrors(p.errors))?;
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
    if let Some(f) = config.gateway.credential_keys.as_mut() {
        if f.is_relative() {
            *f = base.join(&*f);
        }
    }
    for u in config.upstreams.values_mut() {
        if let Some(auth) = u.auth.as_mut() {
            for f in auth.files_mut() {
                if f.is_relative() {
                    *f = base.join(&*f);
                }
            }
        }
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
    }
    Ok(Loaded { config, source })
}

/// Puts the mistakes in the order they are read in: the configuration file's by line, then each
/// policy file's by line.
pub(crate) fn sort_mistakes(errors: &mut [ConfigError], config: &str) {
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
pub(crate) fn resolve_policy_files(path: &Path, p: &mut PoliciesConfig) {
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

pub(crate) fn read_bounded(path: &Path) -> Result<String, String> {
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
pub(crate) fn base_dir(path: &Path) -> &Path {
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
/// nothing bound) is checked as far as it goes: [`crate::load`] and [`crate::Gateway::start`]
/// refuse it.
pub fn load_str(file: &str, text: &str) -> Result<Loaded, ConfigErrors> {
    read(file, text, false).map_err(|p| ConfigErrors(p.errors))
}

/// What a configuration with mistakes still says: enough to look for more mistakes upstream
/// (`crate::catalog` probes them; reading a file connects nothing).
pub(crate) struct Partial {
    /// Every mistake, by line.
    pub(crate) errors: Vec<ConfigError>,
    /// The line of every dotted key.
    pub(crate) keys: BTreeMap<String, usize>,
    /// Upstreams that could be read.
    pub(crate) upstreams: BTreeMap<String, UpstreamConfig>,
    /// Every binding's (key of its tool, upstream, upstream tool), also of bindings with mistakes.
    pub(crate) refs: Vec<(String, String, String)>,
    /// What the upstream's listing is checked against, by binding key.
    pub(crate) facts: BTreeMap<String, Facts>,
    /// The `[limits]` table, when it could be read.
    pub(crate) limits: Option<LimitsConfig>,
    /// The `[policies]` table, when it could be read.
    pub(crate) policies: Option<PoliciesConfig>,
}

/// What of a binding the upstream's listing of its tool is checked against.
pub(crate) struct Facts {
    /// Whether it is a read binding.
    pub(crate) read: bool,
    /// Its `asserted_read_only`.
    pub(crate) asserted_read_only: bool,
    /// Its argument rules as written.
    pub(crate) rules: Vec<String>,
}

/// The most values a custom parser may refuse before the rest is given up on.
const MAX_RETRIES: usize = 256;

/// Reads `text`; `whole` adds the checks of a whole configuration (something to serve).
pub(crate) fn read(file: &str, text: &str, whole: bool) -> Result<Loaded, Box<Partial>> {
    let lines = LineIndex::new(text);
    let error = |line: Option<usize>, key: String, message: String| ConfigError {
        file: file.to_owned(),
        line,
        key,
        message,
    };
    let (doc, syntax) = DeTable::parse_recoverable(text);
    let parsed = if syntax.is_empty() {
        toml::from_str::<Value>(text).map_err(|e| vec![e])
    } else {
        Err(syntax)
    };
    let value = match parsed {
        Ok(v) => v,
        Err(syntax) => {
            let errors = syntax
                .into_iter()
                .map(|e| {
                    let line = e.span().map(|s| lines.line(s.start));
                    error(
                        line,
                        String::new(),
                        format!("invalid TOML: {}", e.message().trim()),
                    )
                })
                .collect();
            return Err(Box::new(Partial::empty(errors)));
        }
    };
    let mut keys = BTreeMap::new();
    key_lines(doc.get_ref(), "", &lines, &mut keys);
    let at = |key: &str, message: String| error(line_of(&keys, key), key.to_owned(), message);

    // The schema: every error at once; each wrong value is removed before serde reads the rest.
    let mut errors = Vec::new();
    let mut pruned = value.clone();
    let mut complete = true;
    let schema = super::json_schema();
    for e in validator().iter_errors(&value) {
        let mut found = Vec::new();
        leaves(
            &schema,
            e.instance_path().as_str(),
            e.kind(),
            e.instance(),
            &mut found,
        );
        for (segments, sub, message) in found {
            let key = dotted(&value, &segments);
            let mut place = segments.clone();
            match sub {
                Some(name) => {
                    place.push(name.clone());
                    let k = join_key(&key, &name);
                    if message.starts_with("required") {
                        complete = false;
                        errors.push(error(line_of(&keys, &key), k, message));
                        continue;
                    }
                    errors.push(at(&k, message));
                }
                None => errors.push(at(&key, message)),
            }
            remove(&mut pruned, &place);
        }
    }

    // What the bindings say even when they cannot be read whole: their rules are checked, and
    // what an upstream's listing would be checked against is kept.
    let mut partial = Partial::empty(Vec::new());
    for (table, read) in [("reads", true), ("writes", false)] {
        let Some(bindings) = pruned.get(table).and_then(Value::as_object) else {
            continue;
        };
        for (name, b) in bindings {
            let key = format!("{table}.{name}");
            let rules = b
                .get("scope")
                .filter(|s| s.is_object())
                .and_then(|s| serde_json::from_value::<ScopeRules>(s.clone()).ok());
            if let Some(rules) = &rules {
                let mut problems = Vec::new();
                check_rules(&format!("{key}.scope"), rules, &mut problems);
                errors.extend(problems.into_iter().map(|(k, m)| at(&k, m)));
            }
            let text = |k: &str| b.get(k).and_then(Value::as_str).map(str::to_owned);
            if let Some(upstream) = text("upstream") {
                let (tool_key, remote) = match text("tool") {
                    Some(t) => (format!("{key}.tool"), t),
                    None => (key.clone(), name.clone()),
                };
                partial.refs.push((tool_key, upstream, remote));
            }
            partial.facts.insert(
                key,
                Facts {
                    read,
                    asserted_read_only: b.get("asserted_read_only") == Some(&Value::Bool(true)),
                    rules: rules.map(|r| r.arguments).unwrap_or_default(),
                },
            );
        }
    }
    if let Some(ups) = pruned.get("upstreams").and_then(Value::as_object) {
        for (id, u) in ups {
            if let Ok(u) = serde_json::from_value::<UpstreamConfig>(u.clone()) {
                partial.upstreams.insert(id.clone(), u);
            }
        }
    }
    partial.limits = pruned
        .get("limits")
        .map_or(Some(LimitsConfig::default()), |l| {
            serde_json::from_value(l.clone()).ok()
        });
    partial.policies = pruned
        .get("policies")
        .and_then(|p| serde_json::from_value(p.clone()).ok());

    // Serde reads the rest; a value only a custom parser refuses is reported and removed.
    let mut config = None;
    for _ in 0..MAX_RETRIES {
        match serde_path_to_error::deserialize::<_, GatewayConfig>(&pruned) {
            Ok(c) => {
                config = Some(c);
                break;
            }
            Err(e) => {
                let segments = serde_segments(e.path());
                let key = dotted(&pruned, &segments);
                let message = e.inner().to_string();
                let table = segments.is_empty()
                    || pointer_value(&pruned, &segments).is_some_and(Value::is_object);
                if message.starts_with("missing field") || table {
                    // Something the table needs is missing (reported by the schema already):
                    // it cannot be read whole.
                    complete = false;
                }
                let reported = errors
                    .iter()
                    .any(|x| covers(&x.key, &key) || covers(&key, &x.key));
                if !message.starts_with("missing field") && !reported {
                    errors.push(at(&key, message));
                }
                // An array's item is replaced by nothing: the array goes whole.
                let place = match segments.split_last() {
                    Some((_, parent)) if dotted(&pruned, &segments).ends_with(']') => parent,
                    _ => &segments[..],
                };
                if place.is_empty() || !remove(&mut pruned, place) {
                    break;
                }
            }
        }
    }
    if let Some(c) = config.as_ref().filter(|_| complete) {
        let serves = if whole { c.check_serves() } else { Vec::new() };
        for (key, message) in c.check().into_iter().chain(serves) {
            errors.push(at(&key, message));
        }
    }
    let mut seen = std::collections::HashSet::new();
    errors.retain(|e| seen.insert((e.key.clone(), e.message.clone())));
    match config {
        Some(config) if errors.is_empty() => Ok(Loaded {
            config,
            source: ConfigSource {
                file: file.to_owned(),
                keys,
            },
        }),
        _ => {
            errors.sort_by_key(|e| e.line.unwrap_or(0));
            partial.errors = errors;
            partial.keys = keys;
            Err(Box::new(partial))
        }
    }
}

impl Partial {
    fn empty(errors: Vec<ConfigError>) -> Partial {
        Partial {
            errors,
            keys: BTreeMap::new(),
            upstreams: BTreeMap::new(),
            refs: Vec::new(),
            facts: BTreeMap::new(),
            limits: None,
            policies: None,
        }
    }
}

/// Whether a mistake at `reported` already covers one at `key` (the same key or one inside it).
fn covers(reported: &str, key: &str) -> bool {
    key == reported
        || key
            .strip_prefix(reported)
            .is_some_and(|rest| rest.starts_with(['.', '[']))
}

/// Records the line of every key of `table` below `prefix`.
fn key_lines(
    table: &DeTable<'_>,
    prefix: &str,
    lines: &LineIndex,
    keys: &mut BTreeMap<String, usize>,
) {
    for (k, v) in table.iter() {
        let key = join_key(prefix, k.get_ref());
        keys.insert(key.clone(), lines.line(k.span().start));
        value_lines(v, &key, lines, keys);
    }
}

fn value_lines(
    v: &Spanned<DeValue<'_>>,
    key: &str,
    lines: &LineIndex,
    keys: &mut BTreeMap<String, usize>,
) {
    match v.get_ref() {
        DeValue::Table(t) => key_lines(t, key, lines, keys),
        DeValue::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let k = format!("{key}[{i}]");
                keys.insert(k.clone(), lines.line(item.span().start));
                value_lines(item, &k, lines, keys);
            }
        }
        _ => {}
    }
}

fn join_key(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}.{name}")
    }
}

/// A JSON pointer's segments, unescaped.
fn pointer_segments(pointer: &str) -> Vec<String> {
    if pointer.is_empty() {
        return Vec::new();
    }
    pointer
        .trim_start_matches('/')
        .split('/')
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect()
}

/// serde's path as segments.
fn serde_segments(path: &serde_path_to_error::Path) -> Vec<String> {
    use serde_path_to_error::Segment;
    path.iter()
        .filter_map(|s| match s {
            Segment::Seq { index } => Some(index.to_string()),
            Segment::Map { key } => Some(key.clone()),
            Segment::Enum { variant } => Some(variant.clone()),
            Segment::Unknown => None,
        })
        .collect()
}

/// The dotted key of the place `segments` in `value`: `a.b[2].c`.
fn dotted(value: &Value, segments: &[String]) -> String {
    let mut key = String::new();
    let mut at = Some(value);
    for s in segments {
        match at {
            Some(Value::Array(items)) => {
                key.push_str(&format!("[{s}]"));
                at = s.parse::<usize>().ok().and_then(|i| items.get(i));
            }
            other => {
                key = join_key(&key, s);
                at = other.and_then(|v| v.get(s));
            }
        }
    }
    key
}

/// The value at `segments`, if there is one.
fn pointer_value<'v>(value: &'v Value, segments: &[String]) -> Option<&'v Value> {
    segments.iter().try_fold(value, |at, s| match at {
        Value::Array(a) => s.parse::<usize>().ok().and_then(|i| a.get(i)),
        other => other.get(s),
    })
}

/// Removes the value at `segments` (whether it was there).
fn remove(value: &mut Value, segments: &[String]) -> bool {
    let Some((last, parents)) = segments.split_last() else {
        return false;
    };
    let mut at = value;
    for s in parents {
        let next = match at {
            Value::Object(m) => m.get_mut(s),
            Value::Array(a) => s.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
            _ => None,
        };
        match next {
            Some(n) => at = n,
            None => return false,
        }
    }
    match at {
        Value::Object(m) => m.remove(last).is_some(),
        Value::Array(a) => match last.parse::<usize>() {
            // An item is replaced, not removed, so the indexes of the others still hold.
            Ok(i) if i < a.len() => {
                a[i] = Value::Null;
                true
            }
            _ => false,
        },
        _ => false,
    }
}

/// The mistakes one schema error stands for, each as (the place, the key below it it is about,
/// the message): an `anyOf` or `oneOf` whose value has the type of one alternative only (an
/// optional table, a scope's table of rules) stands for that alternative's errors.
fn leaves(
    schema: &Value,
    pointer: &str,
    kind: &jsonschema::error::ValidationErrorKind,
    instance: &Value,
    out: &mut Vec<(Vec<String>, Option<String>, String)>,
) {
    use jsonschema::error::ValidationErrorKind as K;
    if let K::AnyOf { context } | K::OneOfNotValid { context } = kind {
        let fitting: Vec<_> = context
            .iter()
            .filter(|branch| {
                !branch.iter().any(|e| {
                    e.instance_path().as_str() == pointer
                        && matches!(
                            e.kind(),
                            K::Type { .. } | K::Constant { .. } | K::Enum { .. }
                        )
                })
            })
            .collect();
        if let [branch] = fitting.as_slice() {
            for e in branch.iter() {
                leaves(
                    schema,
                    e.instance_path().as_str(),
                    e.kind(),
                    e.instance(),
                    out,
                );
            }
            return;
        }
    }
    let segments = pointer_segments(pointer);
    for (sub, message) in schema_message(schema, &segments, kind, instance) {
        out.push((segments.clone(), sub, message));
    }
}

/// The messages of one schema error at `segments`: each with the key below it it is about (an
/// unknown or missing key), or `None` for the value itself.
fn schema_message(
    schema: &Value,
    segments: &[String],
    kind: &jsonschema::error::ValidationErrorKind,
    instance: &Value,
) -> Vec<(Option<String>, String)> {
    use jsonschema::error::ValidationErrorKind as K;
    let node = node_at(schema, schema, segments);
    let found = found(instance);
    let one = |m: String| vec![(None, m)];
    match kind {
        K::AdditionalProperties { unexpected } => {
            let mut expected: Vec<&str> = node
                .and_then(|n| properties(schema, n))
                .map(|p| p.keys().map(String::as_str).collect())
                .unwrap_or_default();
            expected.sort_unstable();
            unexpected
                .iter()
                .map(|k| {
                    (
                        Some(k.clone()),
                        format!("unknown key (expected one of: {})", expected.join(", ")),
                    )
                })
                .collect()
        }
        K::Required { property } => {
            let name = property.as_str().unwrap_or_default().to_owned();
            let why = node
                .and_then(|n| properties(schema, n))
                .and_then(|p| p.get(&name))
                .and_then(|p| p.get("description"))
                .and_then(Value::as_str)
                .map(|d| format!("required: {}", first_sentence(d)))
                .unwrap_or_else(|| "required".to_owned());
            vec![(Some(name), why)]
        }
        K::Type { kind } => {
            let names: Vec<String> = match kind {
                jsonschema::error::TypeKind::Single(t) => vec![t.to_string()],
                jsonschema::error::TypeKind::Multiple(set) => {
                    set.iter().map(|t| t.to_string()).collect()
                }
            };
            let names: Vec<&str> = names
                .iter()
                .filter(|t| *t != "null")
                .map(|t| type_words(t))
                .collect();
            one(format!("expected {}, found {found}", names.join(" or ")))
        }
        K::Enum { options } => {
            let names: Vec<String> = options
                .as_array()
                .map(|o| o.iter().map(|v| v.to_string()).collect())
                .unwrap_or_default();
            one(format!(
                "expected one of {}, found {found}",
                names.join(", ")
            ))
        }
        K::Constant { expected_value } => one(format!("expected {expected_value}, found {found}")),
        K::Pattern { pattern } => one(match pattern_expected(pattern) {
            Some(what) => format!("expected {what}, found {found}"),
            None => format!("must match {pattern}, found {found}"),
        }),
        K::Minimum { limit } => one(format!("must be at least {limit}, found {found}")),
        K::Maximum { limit } => one(format!("must be at most {limit}, found {found}")),
        K::AnyOf { .. } | K::OneOfNotValid { .. } => {
            let what = node
                .map(|n| deref(schema, n))
                .map(|n| alternatives(schema, n))
                .unwrap_or_else(|| "another value".to_owned());
            one(format!("expected {what}, found {found}"))
        }
        other => one(format!("{other:?}")),
    }
}

/// The properties of a table's schema node (of its one alternative that is a table, when it
/// has alternatives).
fn properties<'s>(
    schema: &'s Value,
    node: &'s Value,
) -> Option<&'s serde_json::Map<String, Value>> {
    let node = deref(schema, node);
    if let Some(p) = node.get("properties").and_then(Value::as_object) {
        return Some(p);
    }
    ["anyOf", "oneOf"]
        .iter()
        .filter_map(|k| node.get(*k).and_then(Value::as_array))
        .flatten()
        .find_map(|b| properties(schema, b))
}

/// A JSON type in the configuration's words.
fn type_words(t: &str) -> &'static str {
    match t {
        "object" => "a table",
        "array" => "an array",
        "string" => "a string",
        "integer" => "an integer",
        "number" => "a number",
        "boolean" => "a boolean",
        _ => "another value",
    }
}

/// The alternatives of an `anyOf`/`oneOf` node, in words: `"open" or a table`.
fn alternatives(schema: &Value, node: &Value) -> String {
    let branches = node
        .get("anyOf")
        .or_else(|| node.get("oneOf"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let words: Vec<String> = branches
        .iter()
        .map(|b| deref(schema, b))
        .filter(|b| b.get("type").and_then(Value::as_str) != Some("null"))
        .map(
            |b| match (b.get("const"), b.get("type").and_then(Value::as_str)) {
                (Some(c), _) => c.to_string(),
                (None, Some(t)) => type_words(t).to_owned(),
                (None, None) if b.get("properties").is_some() => "a table".to_owned(),
                _ => "another value".to_owned(),
            },
        )
        .collect();
    words.join(" or ")
}

/// What a wrong value is, for a message: `integer 7`, `string "yes"`, `a table`.
fn found(v: &Value) -> String {
    match v {
        Value::Null => "nothing".to_owned(),
        Value::Bool(b) => format!("boolean {b}"),
        Value::Number(n) if n.is_f64() => format!("float {n}"),
        Value::Number(n) => format!("integer {n}"),
        Value::String(s) => format!("{s:?}"),
        Value::Array(_) => "an array".to_owned(),
        Value::Object(_) => "a table".to_owned(),
    }
}

/// The first sentence of a description (up to its first `. ` or `: `), without its end.
fn first_sentence(d: &str) -> String {
    let d = d.split("\n\n").next().unwrap_or(d).replace('\n', " ");
    let end = d.find(". ").unwrap_or(d.len());
    let s = d[..end].trim_end_matches('.');
    let mut c = s.chars();
    match c.next() {
        Some(first) => first.to_lowercase().chain(c).collect(),
        None => String::new(),
    }
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
