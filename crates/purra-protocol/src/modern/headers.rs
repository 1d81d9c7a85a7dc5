//! The Streamable HTTP header rules of the modern revision: `Mcp-Method`, `Mcp-Name`, the
//! `Mcp-Param-{Name}` headers mirrored from tool arguments whose schema property carries
//! `x-mcp-header`, and the `=?base64?…?=` wrapper for values that are not plain header text.
//!
//! Client and server read the same functions, so what one side emits the other accepts.

use base64::Engine as _;
use serde_json::Value;

use crate::jsonrpc::{ErrorObject, RpcErrorCode};
use crate::types::methods;

/// `Mcp-Method`: the request's method.
pub const METHOD_HEADER: &str = "mcp-method";
/// `Mcp-Name`: the tool or prompt name, the resource URI, or the task id.
pub const NAME_HEADER: &str = "mcp-name";
/// The prefix of the headers mirrored from tool arguments.
pub const PARAM_HEADER_PREFIX: &str = "mcp-param-";
/// The schema keyword naming a mirrored argument's header.
pub const X_MCP_HEADER: &str = "x-mcp-header";

const SENTINEL_START: &str = "=?base64?";
const SENTINEL_END: &str = "?=";

/// The params member `Mcp-Name` mirrors for `method`, if it has one.
pub fn name_param(method: &str) -> Option<&'static str> {
    match method {
        methods::TOOLS_CALL | methods::PROMPTS_GET => Some("name"),
        methods::RESOURCES_READ => Some("uri"),
        crate::tasks::methods::GET
        | crate::tasks::methods::UPDATE
        | crate::tasks::methods::CANCEL => Some("taskId"),
        _ => None,
    }
}

fn is_plain(value: &str) -> bool {
    value.bytes().all(|b| (0x20..=0x7e).contains(&b))
        && value.trim() == value
        && !(value.starts_with(SENTINEL_START) && value.ends_with(SENTINEL_END))
}

/// Encodes a header value: plain printable ASCII without surrounding whitespace is sent as is;
/// anything else (non-ASCII, control characters, edge whitespace, or a value that looks like the
/// wrapper) as `=?base64?{base64 of the UTF-8}?=`.
pub fn encode_value(value: &str) -> String {
    if is_plain(value) {
        value.to_owned()
    } else {
        format!(
            "{SENTINEL_START}{}{SENTINEL_END}",
            base64::engine::general_purpose::STANDARD.encode(value.as_bytes())
        )
    }
}

/// Decodes a header value: the wrapper's payload as UTF-8, anything else verbatim. A malformed
/// wrapper (bad or non-canonical base64, invalid UTF-8) is `None`, so it never matches a body.
pub fn decode_value(value: &str) -> Option<String> {
    let Some(payload) = value
        .strip_prefix(SENTINEL_START)
        .and_then(|v| v.strip_suffix(SENTINEL_END))
    else {
        return Some(value.to_owned());
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(payload)
        .ok()?;
    if base64::engine::general_purpose::STANDARD.encode(&bytes) != payload {
        return None;
    }
    String::from_utf8(bytes).ok()
}

/// Whether `token` is an RFC 9110 token (what a header name may be made of).
fn is_token(token: &str) -> bool {
    !token.is_empty()
        && token.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(
                    b,
                    b'!' | b'#'
                        | b'$'
                        | b'%'
                        | b'&'
                        | b'\''
                        | b'*'
                        | b'+'
                        | b'-'
                        | b'.'
                        | b'^'
                        | b'_'
                        | b'`'
                        | b'|'
                        | b'~'
                )
        })
}

/// Keywords whose value is one subschema, a list of them, or a map of them: crossing one leaves
/// the pure `properties` chain an `x-mcp-header` must sit on.
const SUBSCHEMA_ONE: [&str; 11] = [
    "items",
    "contains",
    "unevaluatedItems",
    "additionalProperties",
    "propertyNames",
    "unevaluatedProperties",
    "not",
    "if",
    "then",
    "else",
    "contentSchema",
];
const SUBSCHEMA_LIST: [&str; 4] = ["allOf", "anyOf", "oneOf", "prefixItems"];
const SUBSCHEMA_MAP: [&str; 4] = [
    "patternProperties",
    "dependentSchemas",
    "$defs",
    "definitions",
];

/// One annotated property: its path of `properties` keys, its header token and declared type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamHeader {
    /// The chain of `properties` keys from the schema root.
    pub path: Vec<String>,
    /// The `x-mcp-header` token (the header is `Mcp-Param-{token}`).
    pub token: String,
    /// The property's `type`.
    pub kind: String,
}

impl ParamHeader {
    /// The header's name as sent: `Mcp-Param-{token}`.
    pub fn header_name(&self) -> String {
        format!("Mcp-Param-{}", self.token)
    }
}

/// Reads every `x-mcp-header` annotation of an input schema. An annotation off the pure
/// `properties` chain, on a type other than string, integer or boolean, with a value that is not
/// a token, or duplicating another (case-insensitively) makes the whole tool invalid: the error
/// says why.
pub fn param_headers(input_schema: &Value) -> Result<Vec<ParamHeader>, String> {
    // Iterative walk (a hostile schema may be deep): (path or None once off the chain, node).
    let mut stack: Vec<(Option<Vec<String>>, &Value)> = vec![(Some(Vec::new()), input_schema)];
    let mut found: Vec<ParamHeader> = Vec::new();
    while let Some((path, node)) = stack.pop() {
        let Value::Object(schema) = node else {
            continue;
        };
        if let Some(token) = schema.get(X_MCP_HEADER) {
            let path = match &path {
                Some(p) if !p.is_empty() => p.clone(),
                _ => {
                    return Err(format!(
                        "{X_MCP_HEADER} is only allowed on a property reached through `properties` alone"
                    ))
                }
            };
            let at = path.join(".");
            let Value::String(token) = token else {
                return Err(format!("property {at:?}: {X_MCP_HEADER} must be a string"));
            };
            if !is_token(token) {
                return Err(format!(
                    "property {at:?}: {X_MCP_HEADER} {token:?} is not an HTTP header token"
                ));
            }
            let kind = schema.get("type").and_then(Value::as_str).unwrap_or("");
            if !matches!(kind, "string" | "integer" | "boolean") {
                return Err(format!(
                    "property {at:?}: {X_MCP_HEADER} is only allowed on string, integer and boolean properties"
                ));
            }
            if let Some(other) = found.iter().find(|h| h.token.eq_ignore_ascii_case(token)) {
                return Err(format!(
                    "property {at:?}: {X_MCP_HEADER} {token:?} duplicates property {:?}",
                    other.path.join(".")
                ));
            }
            found.push(ParamHeader {
                path,
                token: token.clone(),
                kind: kind.to_owned(),
            });
        }
        for (kw, value) in schema {
            if kw == "properties" {
                if let Value::Object(props) = value {
                    for (name, sub) in props {
                        let p = path.as_ref().map(|p| {
                            let mut p = p.clone();
                            p.push(name.clone());
                            p
                        });
                        stack.push((p, sub));
                    }
                }
            } else if SUBSCHEMA_ONE.contains(&kw.as_str()) {
                stack.push((None, value));
            } else if SUBSCHEMA_LIST.contains(&kw.as_str()) {
                if let Value::Array(items) = value {
                    stack.extend(items.iter().map(|s| (None, s)));
                }
            } else if SUBSCHEMA_MAP.contains(&kw.as_str()) {
                if let Value::Object(m) = value {
                    stack.extend(m.values().map(|s| (None, s)));
                }
            }
        }
    }
    found.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(found)
}

fn value_at<'a>(arguments: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut node = arguments;
    for key in path {
        node = node.as_object()?.get(key)?;
    }
    (!node.is_null()).then_some(node)
}

/// How an argument is written into its header (before encoding): strings as they are, integers
/// in decimal, booleans as `true`/`false`; anything else has no header form.
fn render(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The `Mcp-Param-*` headers a `tools/call` with `arguments` carries: one per annotated property
/// that has a non-null value, encoded.
pub fn param_header_values(headers: &[ParamHeader], arguments: &Value) -> Vec<(String, String)> {
    headers
        .iter()
        .filter_map(|h| {
            let v = value_at(arguments, &h.path)?;
            Some((h.header_name(), encode_value(&render(v)?)))
        })
        .collect()
}

fn mismatch(message: String) -> ErrorObject {
    ErrorObject::new(RpcErrorCode::HEADER_MISMATCH, message)
}

/// Checks a `tools/call`'s `Mcp-Param-*` headers (`sent`: lowercased name, raw value) against its
/// arguments: present together and equal after decoding (integers compared as numbers), or absent
/// together. The first disagreement is -32020.
pub fn check_param_headers(
    headers: &[ParamHeader],
    arguments: &Value,
    sent: &[(String, String)],
) -> Result<(), ErrorObject> {
    for h in headers {
        let name = h.header_name();
        let lower = name.to_ascii_lowercase();
        let mut copies = sent.iter().filter(|(k, _)| *k == lower).map(|(_, v)| v);
        let raw = copies.next();
        if copies.next().is_some() {
            return Err(mismatch(format!(
                "Header mismatch: the {name} header appears more than once"
            )));
        }
        let at = h.path.join(".");
        let value = value_at(arguments, &h.path);
        let rendered = value.and_then(render);
        match (raw, rendered) {
            (None, None) => {}
            (Some(_), None) => {
                return Err(mismatch(format!(
                    "Header mismatch: the {name} header is present but argument {at:?} has no value"
                )))
            }
            (None, Some(_)) => {
                return Err(mismatch(format!(
                    "Header mismatch: the {name} header is missing but argument {at:?} has a value"
                )))
            }
            (Some(raw), Some(rendered)) => {
                let Some(decoded) = decode_value(raw) else {
                    return Err(mismatch(format!(
                        "Header mismatch: the {name} header carries a malformed value"
                    )));
                };
                let equal = decoded == rendered
                    || (h.kind == "integer" && value.is_some_and(|v| numbers_equal(&decoded, v)));
                if !equal {
                    return Err(mismatch(format!(
                        "Header mismatch: the {name} header does not match argument {at:?}"
                    )));
                }
            }
        }
    }
    Ok(())
}

/// An integer header compared numerically with the body (`42.0` equals `42`).
fn numbers_equal(header: &str, body: &Value) -> bool {
    let (whole, fraction) = header.split_once('.').unwrap_or((header, ""));
    if !fraction.bytes().all(|b| b == b'0') {
        return false;
    }
    let Ok(h) = whole.parse::<i128>() else {
        return false;
    };
    match body {
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                h == i128::from(i)
            } else if let Some(u) = n.as_u64() {
                h == i128::from(u)
            } else {
                n.as_f64().is_some_and(|f| {
                    f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15 && h == f as i128
                })
            }
        }
        _ => false,
    }
}

/// Whether a header value is sendable as is: visible ASCII, space and tab only.
pub fn is_valid_header_text(value: &str) -> bool {
    value
        .bytes()
        .all(|b| b == b'\t' || (0x20..=0x7e).contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_wrapped_exactly_when_they_must_be() {
        assert_eq!(encode_value("us-west1"), "us-west1");
        assert_eq!(
            encode_value("Hello, 世界"),
            "=?base64?SGVsbG8sIOS4lueVjA==?="
        );
        assert_eq!(encode_value(" padded "), "=?base64?IHBhZGRlZCA=?=");
        assert_eq!(encode_value("line1\nline2"), "=?base64?bGluZTEKbGluZTI=?=");
        assert_eq!(
            encode_value("=?base64?literal?="),
            "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="
        );
        for v in ["us-west1", "Hello, 世界", " padded ", "=?base64?literal?="] {
            assert_eq!(decode_value(&encode_value(v)).as_deref(), Some(v));
        }
        assert_eq!(decode_value("=?base64?!!?="), None);
    }

    #[test]
    fn annotations_are_read_and_invalid_ones_refused() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "n": {"type": "object", "properties": {"id": {"type": "integer", "x-mcp-header": "Id"}}},
            "q": {"type": "string"}
        }});
        let hs = param_headers(&schema).unwrap();
        assert_eq!(
            hs.iter().map(|h| h.header_name()).collect::<Vec<_>>(),
            ["Mcp-Param-Id", "Mcp-Param-Region"]
        );
        let args = json!({"region": "é", "n": {"id": 42}, "q": "x"});
        assert_eq!(
            param_header_values(&hs, &args),
            [
                ("Mcp-Param-Id".to_owned(), "42".to_owned()),
                ("Mcp-Param-Region".to_owned(), "=?base64?w6k=?=".to_owned())
            ]
        );
        let sent = vec![
            ("mcp-param-id".to_owned(), "42.0".to_owned()),
            ("mcp-param-region".to_owned(), "=?base64?w6k=?=".to_owned()),
        ];
        assert_eq!(check_param_headers(&hs, &args, &sent), Ok(()));
        let e = check_param_headers(&hs, &args, &sent[..1]).unwrap_err();
        assert_eq!(
            e.message,
            "Header mismatch: the Mcp-Param-Region header is missing but argument \"region\" has a value"
        );
        for bad in [
            json!({"type": "object", "properties": {"a": {"type": "number", "x-mcp-header": "A"}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "A B"}}}),
            json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "A"}, "b": {"type": "string", "x-mcp-header": "a"}}}),
        ] {
            assert!(param_headers(&bad).is_err(), "{bad}");
        }
    }
}
