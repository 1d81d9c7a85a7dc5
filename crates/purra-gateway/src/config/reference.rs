//! The configuration reference page (`docs/src/reference/configuration.md`), generated from the
//! JSON Schema of the types: every table and key with its type, default and description.

use serde_json::{Map, Value};

use super::schema::deref;

/// The page's opening, before the generated tables.
const INTRO: &str = r#"# Gateway configuration

<!-- Generated from the configuration's types (purra_gateway::config::reference): do not edit.
     Refresh with `PURRA_BLESS=1 cargo test -p purra-gateway --test config`. -->

The gateway reads one TOML file (`purra gateway --config gateway.toml`); every mistake in it is
reported at once with its file, line and key, and nothing starts (exit 78). The chapters show each
table in use: `[gateway]`, `[upstreams.NAME]` and the bindings in [the gateway](../gateway/index.md)
and [bindings](../gateway/bindings.md) (`[reads.NAME]`, `[writes.NAME]`, `[writes.NAME.scope]`,
`[skills.NAME]`, `[limits]`), `[gateway.auth]` and `[policies]` in [auth and policies](../gateway/auth.md),
`[webhooks.NAME]` in [webhooks](../gateway/webhooks.md), `[telemetry]`, `[page]` and `[page.oidc]` in
[operations](../gateway/operations.md) and [approvals](../gateway/approvals.md), and a complete file over
the official servers in [`official-servers.toml`](../examples/official-servers.toml).

## Editor support

The same types give a JSON Schema (draft 2020-12), [`gateway.schema.json`](gateway.schema.json), which
the gateway checks every file against. Editors that read TOML with Taplo (Even Better TOML in VS Code,
Helix, Zed, Neovim) complete and validate `gateway.toml` with it: start the file with a directive
(a URL, or a path relative to the file)

```toml
#:schema https://raw.githubusercontent.com/purra-dev/purra/main/docs/src/reference/gateway.schema.json
```

or name it for the file in `.taplo.toml`:

```toml
[[rule]]
include = ["**/gateway.toml"]
schema = { path = "docs/src/reference/gateway.schema.json" }
```

## Every key

Each table of the file and its keys; an unknown key is a mistake. Durations are a whole number and
a unit, `ms`, `s`, `m` or `h`: `"500ms"`, `"30s"`, `"10m"`, `"24h"`. `NAME` stands for a name the
file chooses (an upstream's id, a binding's local name).
"#;

/// The configuration reference page, in Markdown.
pub fn reference_markdown() -> String {
    let schema = super::json_schema();
    let mut out = String::from(INTRO);
    section(&schema, &schema, "", &mut out);
    out
}

/// One table's keys, then each table below it.
fn section(root: &Value, node: &Value, path: &str, out: &mut String) {
    let node = deref(root, node);
    let Some(props) = node.get("properties").and_then(Value::as_object) else {
        return;
    };
    let required: Vec<&str> = node
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if path.is_empty() {
        out.push_str("\n### The file's top-level tables\n\n");
    } else {
        // A variant of a table chosen by its `mode` says so in its heading.
        let mode = props
            .get("mode")
            .and_then(|m| m.get("const"))
            .and_then(Value::as_str);
        match mode {
            Some(mode) => out.push_str(&format!("\n### `[{path}]` with `mode = \"{mode}\"`\n\n")),
            None => out.push_str(&format!("\n### `[{path}]`\n\n")),
        }
        if let Some(d) = node.get("description").and_then(Value::as_str) {
            out.push_str(&one_line(d));
            out.push_str("\n\n");
        }
    }
    out.push_str("| key | type | default | description |\n|---|---|---|---|\n");
    for (key, p) in props {
        let default = match p.get("default") {
            _ if required.contains(&key.as_str()) => "required".to_owned(),
            // A table's defaults are its keys' own, in its section.
            _ if table_of(root, p).is_some() => String::new(),
            Some(d) if !is_empty(d) => format!("`{}`", toml_value(d)),
            _ => String::new(),
        };
        let description = p
            .get("description")
            .or_else(|| deref(root, p).get("description"))
            .and_then(Value::as_str)
            .map(one_line)
            .unwrap_or_default();
        out.push_str(&format!(
            "| `{key}` | {} | {default} | {description} |\n",
            type_of(root, p).replace('|', "\\|")
        ));
    }
    for (key, p) in props {
        let inner = table_of(root, p).unwrap_or_else(|| non_null(root, p));
        let here = if path.is_empty() {
            key.clone()
        } else {
            format!("{path}.{key}")
        };
        if let Some(variants) = tagged_variants(root, p) {
            for v in variants {
                section(root, v, &here, out);
            }
        } else if inner.get("properties").is_some() {
            section(root, inner, &here, out);
        } else if let Some(item) = inner
            .get("additionalProperties")
            .map(|a| deref(root, a))
            .filter(|a| a.get("properties").is_some())
        {
            section(root, item, &format!("{here}.NAME"), out);
        }
    }
}

/// The variants of a table chosen by its `mode` key (`[upstreams.ID.auth]`), each an object
/// whose `mode` is a constant; none for any other value.
fn tagged_variants<'a>(root: &'a Value, p: &'a Value) -> Option<Vec<&'a Value>> {
    let p = non_null(root, p);
    let variants: Vec<&Value> = p
        .get("oneOf")
        .and_then(Value::as_array)?
        .iter()
        .map(|b| deref(root, b))
        .collect();
    variants
        .iter()
        .all(|v| v["properties"]["mode"].get("const").is_some())
        .then_some(variants)
}

/// `p` without the `null` of an optional value, its `$ref` followed.
fn non_null<'a>(root: &'a Value, p: &'a Value) -> &'a Value {
    let p = deref(root, p);
    if let Some(branches) = p.get("anyOf").and_then(Value::as_array) {
        let real: Vec<&Value> = branches
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) != Some("null"))
            .collect();
        if let [one] = real.as_slice() {
            return deref(root, one);
        }
    }
    p
}

/// The table a key holds, when it holds one (also as one alternative: a read's scope).
fn table_of<'a>(root: &'a Value, p: &'a Value) -> Option<&'a Value> {
    let p = deref(root, p);
    if p.get("properties").is_some() {
        return Some(p);
    }
    p.get("anyOf")
        .or_else(|| p.get("oneOf"))
        .and_then(Value::as_array)?
        .iter()
        .map(|b| deref(root, b))
        .find(|b| b.get("properties").is_some())
}

/// A key's type in words.
fn type_of(root: &Value, p: &Value) -> String {
    if let Some(name) = p
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/$defs/"))
    {
        match name {
            "Duration" => return "duration".into(),
            "Address" => return "address (`IP:PORT`, `localhost:PORT`)".into(),
            "Listen" => return "`\"stdio\"` or address".into(),
            "ScopeConfig" => return "`\"open\"` or table".into(),
            _ => {}
        }
    }
    let p = non_null(root, p);
    if let Some(values) = p.get("enum").and_then(Value::as_array) {
        return values
            .iter()
            .map(|v| format!("`{v}`"))
            .collect::<Vec<_>>()
            .join(" | ");
    }
    if let Some(branches) = p.get("oneOf").and_then(Value::as_array) {
        let consts: Vec<String> = branches
            .iter()
            .filter_map(|b| b.get("const").map(|c| format!("`{c}`")))
            .collect();
        if consts.len() == branches.len() {
            return consts.join(" | ");
        }
    }
    if p.get("properties").is_some() {
        return "table".into();
    }
    let ty = match p.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("")
            .to_owned(),
        _ => String::new(),
    };
    match ty.as_str() {
        "array" => match p.get("items") {
            Some(items) => format!("array of {}", type_of(root, items)),
            None => "array".into(),
        },
        "object" => match p.get("additionalProperties").filter(|a| a.is_object()) {
            Some(a) if deref(root, a).get("properties").is_some() => "tables".into(),
            Some(a) => format!("table of {}", type_of(root, a)),
            None => "table".into(),
        },
        "" => "value".into(),
        t => t.into(),
    }
}

/// Whether a default says nothing (an empty list or table).
fn is_empty(v: &Value) -> bool {
    match v {
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Null => true,
        _ => false,
    }
}

/// A default as TOML writes it.
fn toml_value(v: &Value) -> String {
    match v {
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(toml_value).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(map) => table_value(map),
        other => other.to_string(),
    }
}

fn table_value(map: &Map<String, Value>) -> String {
    let fields: Vec<String> = map
        .iter()
        .map(|(k, v)| format!("{k} = {}", toml_value(v)))
        .collect();
    format!("{{ {} }}", fields.join(", "))
}

/// A description on one table row: lines joined, `|` escaped.
fn one_line(d: &str) -> String {
    d.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}
