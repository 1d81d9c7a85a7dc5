//! The configuration's JSON Schema (draft 2020-12), generated from the types: derived beside serde
//! on every table, written by hand for the values a custom parser reads (durations, addresses,
//! claim types, a binding's scope), each a string with a pattern and a description.

use std::borrow::Cow;
use std::sync::OnceLock;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde_json::Value;

use super::{Address, ClaimType, Dur, GatewayConfig, Listen, ScopeConfig, ScopeRules};

/// A duration's pattern: a whole number and a unit.
pub(crate) const DUR_PATTERN: &str = "^[0-9]+(ms|s|m|h)$";

/// An address's pattern: `IP:PORT`, `[IPv6]:PORT` or `localhost:PORT`.
const ADDRESS_PATTERN: &str = r"^(localhost|[0-9.]+|\[[0-9A-Fa-f:.]+\]):[0-9]{1,5}$";

/// `listen`'s pattern: `stdio` or an address.
const LISTEN_PATTERN: &str = r"^(stdio|(localhost|[0-9.]+|\[[0-9A-Fa-f:.]+\]):[0-9]{1,5})$";

/// What a value that does not match `pattern` was expected to be, in words.
pub(crate) fn pattern_expected(pattern: &str) -> Option<&'static str> {
    match pattern {
        DUR_PATTERN => Some("a duration with a unit ms, s, m or h (such as \"30s\")"),
        ADDRESS_PATTERN => Some("an address such as \"127.0.0.1:9464\" or \"localhost:9464\""),
        LISTEN_PATTERN => {
            Some("\"stdio\" or an address such as \"127.0.0.1:8787\" or \"localhost:8787\"")
        }
        _ => None,
    }
}

impl JsonSchema for Dur {
    fn schema_name() -> Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": DUR_PATTERN,
            "description": "A whole number and a unit, ms, s, m or h: \"500ms\", \"30s\", \"10m\", \"24h\".",
        })
    }
}

impl JsonSchema for Address {
    fn schema_name() -> Cow<'static, str> {
        "Address".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": ADDRESS_PATTERN,
            "description": "An address to listen on: IP:PORT, or localhost:PORT (127.0.0.1).",
        })
    }
}

impl JsonSchema for Listen {
    fn schema_name() -> Cow<'static, str> {
        "Listen".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": LISTEN_PATTERN,
            "description": "\"stdio\", or an address to serve Streamable HTTP on: IP:PORT, or localhost:PORT (127.0.0.1).",
        })
    }
}

impl JsonSchema for ClaimType {
    fn schema_name() -> Cow<'static, str> {
        "ClaimType".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let names: Vec<&str> = ClaimType::ALL.iter().map(|t| t.as_str()).collect();
        json_schema!({
            "type": "string",
            "enum": names,
            "description": "The Cedar type of a token claim.",
        })
    }
}

impl JsonSchema for ScopeConfig {
    fn schema_name() -> Cow<'static, str> {
        "ScopeConfig".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let rules = generator.subschema_for::<ScopeRules>();
        json_schema!({
            "description": "\"open\" (no scope check: reads only), or a table of rules.",
            "anyOf": [
                { "const": "open" },
                rules,
            ],
        })
    }
}

/// The configuration's JSON Schema (draft 2020-12): what editors (Taplo, Even Better TOML)
/// complete and validate `gateway.toml` with, and what [`crate::load`] checks a file against.
pub fn json_schema() -> Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA
        .get_or_init(|| {
            let generator = schemars::generate::SchemaSettings::draft2020_12().into_generator();
            let mut schema = generator.into_root_schema_for::<GatewayConfig>();
            schema.insert("title".into(), "purra gateway configuration".into());
            let mut value = schema.to_value();
            plain_descriptions(&mut value);
            value
        })
        .clone()
}

/// The compiled validator of [`json_schema`].
pub(crate) fn validator() -> &'static jsonschema::Validator {
    static VALIDATOR: OnceLock<jsonschema::Validator> = OnceLock::new();
    VALIDATOR.get_or_init(|| {
        jsonschema::draft202012::new(&json_schema())
            .expect("the configuration's generated schema compiles")
    })
}

/// The schema node describing the value at `segments` (object keys and array indexes) below
/// `node`, following `$ref`s and the first `anyOf`/`oneOf` branch that has one.
pub(crate) fn node_at<'a>(
    root: &'a Value,
    node: &'a Value,
    segments: &[String],
) -> Option<&'a Value> {
    let node = deref(root, node);
    let Some((first, rest)) = segments.split_first() else {
        return Some(node);
    };
    if let Some(p) = node.get("properties").and_then(|p| p.get(first)) {
        return node_at(root, p, rest);
    }
    if let Some(a) = node.get("additionalProperties").filter(|a| a.is_object()) {
        return node_at(root, a, rest);
    }
    if let Some(i) = node.get("items").filter(|i| i.is_object()) {
        return node_at(root, i, rest);
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(branches) = node.get(key).and_then(Value::as_array) {
            if let Some(found) = branches.iter().find_map(|b| node_at(root, b, segments)) {
                return Some(found);
            }
        }
    }
    None
}

/// `node`, or the definition its `$ref` names.
pub(crate) fn deref<'a>(root: &'a Value, node: &'a Value) -> &'a Value {
    match node.get("$ref").and_then(Value::as_str) {
        Some(r) => r
            .strip_prefix("#/$defs/")
            .and_then(|name| root.get("$defs").and_then(|d| d.get(name)))
            .map_or(node, |n| deref(root, n)),
        None => node,
    }
}

/// Rewrites every description's rustdoc links as plain text: `` [`X`](path) `` and `` [`X`] ``
/// become `` `X` ``; web links stay.
fn plain_descriptions(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for (k, item) in map.iter_mut() {
                match item {
                    Value::String(d) if k == "description" => *d = unlink(d),
                    other => plain_descriptions(other),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(plain_descriptions),
        _ => {}
    }
}

/// `text` without its intra-doc links (their text kept).
fn unlink(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find(']') else {
            out.push_str(&rest[open..]);
            return out;
        };
        let inner = &after[..close];
        let tail = &after[close + 1..];
        match tail
            .strip_prefix('(')
            .and_then(|t| t.find(')').map(|e| (&t[..e], &t[e + 1..])))
        {
            Some((target, t)) if !target.contains("://") => {
                out.push_str(inner);
                rest = t;
            }
            Some(_) => {
                out.push('[');
                rest = after;
            }
            None if inner.starts_with('`') => {
                out.push_str(inner);
                rest = tail;
            }
            None => {
                out.push('[');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}
