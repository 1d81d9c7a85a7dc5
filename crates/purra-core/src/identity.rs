//! JSON identity `purra.json-identity/v1`: `sha256:` + lowercase hex SHA-256 of the RFC 8785 (JCS) form.
//!
//! The canonical form follows RFC 8785:
//! - object members are sorted by their names compared as arrays of UTF-16 code units (section 3.2.3);
//! - numbers are serialized as ECMAScript's `Number.prototype.toString` does (section 3.2.2.3), through
//!   the `ryu-js` crate; integers held as `u64`/`i64` are converted to the double they equal;
//! - strings keep every character literally except `"` and `\` (escaped as `\"`, `\\`), the five
//!   control characters with short escapes (`\b \t \n \f \r`), and other code points below U+0020,
//!   written as `\u00xx` with lowercase hex (section 3.2.2.2);
//! - no whitespace.
//!
//! Input must be I-JSON (RFC 7493): integers must be exactly representable as IEEE-754 doubles (so that
//! the canonical form does not silently change the value) and nesting is bounded by
//! [`MAX_DEPTH_CEILING`]. Duplicate keys and lone surrogates
//! cannot exist in a `serde_json::Value`; for text use [`json_identity_of_text`], which rejects both.

use crate::json_text::{
    i128_is_exact_double, parse_json, JsonError, JsonLimits, MAX_DEPTH_CEILING,
};
use serde_json::{Map, Number, Value};
use sha2::{Digest, Sha256};
use std::fmt;

/// The name of this identity profile.
pub const JSON_IDENTITY_PROFILE: &str = "purra.json-identity/v1";

/// A JSON identity: `sha256:` followed by 64 lowercase hex digits.
#[derive(
    Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(try_from = "String", into = "String")]
pub struct JsonIdentity(String);

impl JsonIdentity {
    /// The identity as text (`sha256:…`).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Parses an identity written as `sha256:` + 64 lowercase hex digits.
    pub fn parse(text: &str) -> Option<JsonIdentity> {
        let hex = text.strip_prefix("sha256:")?;
        (hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
        .then(|| JsonIdentity(text.to_owned()))
    }
}

impl fmt::Display for JsonIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for JsonIdentity {
    type Error = &'static str;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        JsonIdentity::parse(&value).ok_or("a JSON identity is sha256: and 64 lowercase hex digits")
    }
}

impl From<JsonIdentity> for Value {
    fn from(value: JsonIdentity) -> Value {
        Value::String(value.0)
    }
}

impl From<JsonIdentity> for String {
    fn from(value: JsonIdentity) -> String {
        value.0
    }
}

/// Why a value has no JSON identity.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum IdentityError {
    /// A number is not exactly representable as a finite IEEE-754 double; `pointer` locates it.
    NumberNotIJson {
        /// JSON pointer of the number.
        pointer: String,
    },
    /// The value nests deeper than [`MAX_DEPTH_CEILING`].
    TooDeep,
    /// The JSON text was refused before a value existed.
    Text(JsonError),
}

impl fmt::Display for IdentityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IdentityError::NumberNotIJson { pointer } => write!(
                f,
                "number at {pointer:?} is not an exact IEEE-754 double, so it is outside I-JSON"
            ),
            IdentityError::TooDeep => {
                write!(f, "value nests deeper than {MAX_DEPTH_CEILING} levels")
            }
            IdentityError::Text(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for IdentityError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            IdentityError::Text(e) => Some(e),
            _ => None,
        }
    }
}

/// Writes the RFC 8785 canonical form of `value`.
pub fn canonicalize(value: &Value) -> Result<String, IdentityError> {
    let mut out = String::with_capacity(256);
    let mut path = Vec::new();
    write_value(value, &mut out, &mut path, 0)?;
    Ok(out)
}

/// The `purra.json-identity/v1` identity of `value`.
pub fn json_identity(value: &Value) -> Result<JsonIdentity, IdentityError> {
    Ok(identity_of_canonical(&canonicalize(value)?))
}

/// Decodes `text` within `limits` (rejecting duplicate keys, lone surrogates and non-I-JSON numbers)
/// and returns its identity.
pub fn json_identity_of_text(
    text: &[u8],
    limits: &JsonLimits,
) -> Result<JsonIdentity, IdentityError> {
    json_identity(&parse_json(text, limits).map_err(IdentityError::Text)?)
}

/// The identity of `{"<head_key>": "<head>", "<list_key>": [items...]}` computed from the items in
/// place, without first assembling that document (its members written in canonical order, so the
/// result is exactly [`json_identity`] of the assembled value). `head_key` must sort before
/// `list_key` (RFC 8785 orders members by their UTF-16 code units).
pub(crate) fn identity_of_list<'a>(
    head_key: &str,
    head: &str,
    list_key: &'a str,
    items: impl IntoIterator<Item = &'a Value>,
) -> Result<JsonIdentity, IdentityError> {
    debug_assert!(head_key.encode_utf16().lt(list_key.encode_utf16()));
    let mut out = String::with_capacity(256);
    out.push('{');
    write_string(head_key, &mut out);
    out.push(':');
    write_string(head, &mut out);
    out.push(',');
    write_string(list_key, &mut out);
    out.push_str(":[");
    let mut path = vec![PathSeg::Key(list_key)];
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        path.push(PathSeg::Index(i));
        // The root object is depth 0, the list 1, its items 2.
        write_value(item, &mut out, &mut path, 2)?;
        path.pop();
    }
    out.push_str("]}");
    Ok(identity_of_canonical(&out))
}

/// The identity of an already canonical text.
pub(crate) fn identity_of_canonical(canonical: &str) -> JsonIdentity {
    let digest = Sha256::digest(canonical.as_bytes());
    let mut text = String::with_capacity(71);
    text.push_str("sha256:");
    for b in digest {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        text.push(HEX[(b >> 4) as usize] as char);
        text.push(HEX[(b & 15) as usize] as char);
    }
    JsonIdentity(text)
}

/// Converts a JSON number to the double it denotes, refusing integers a double cannot hold exactly.
pub(crate) fn number_as_exact_f64(n: &Number) -> Option<f64> {
    if let Some(u) = n.as_u64() {
        i128_is_exact_double(u as i128).then_some(u as f64)
    } else if let Some(i) = n.as_i64() {
        i128_is_exact_double(i as i128).then_some(i as f64)
    } else {
        n.as_f64().filter(|f| f.is_finite())
    }
}

enum PathSeg<'a> {
    Key(&'a str),
    Index(usize),
}

fn pointer_of(path: &[PathSeg<'_>]) -> String {
    let mut out = String::new();
    for seg in path {
        out.push('/');
        match seg {
            PathSeg::Key(k) => out.push_str(&k.replace('~', "~0").replace('/', "~1")),
            PathSeg::Index(i) => out.push_str(&i.to_string()),
        }
    }
    out
}

fn write_value<'a>(
    value: &'a Value,
    out: &mut String,
    path: &mut Vec<PathSeg<'a>>,
    depth: usize,
) -> Result<(), IdentityError> {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => {
            let f = number_as_exact_f64(n).ok_or_else(|| IdentityError::NumberNotIJson {
                pointer: pointer_of(path),
            })?;
            // An exact integer below 10^21 prints as its plain digits in ECMAScript; every u64/i64 is
            // below 10^21, so integers skip the double formatter.
            if let Some(u) = n.as_u64() {
                out.push_str(itoa::Buffer::new().format(u));
            } else if let Some(i) = n.as_i64() {
                out.push_str(itoa::Buffer::new().format(i));
            } else {
                out.push_str(ryu_js::Buffer::new().format_finite(f));
            }
        }
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            if depth >= MAX_DEPTH_CEILING {
                return Err(IdentityError::TooDeep);
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                path.push(PathSeg::Index(i));
                write_value(item, out, path, depth + 1)?;
                path.pop();
            }
            out.push(']');
        }
        Value::Object(map) => {
            if depth >= MAX_DEPTH_CEILING {
                return Err(IdentityError::TooDeep);
            }
            write_object(map, out, path, depth)?;
        }
    }
    Ok(())
}

/// RFC 8785 section 3.2.3 order: member names compared as UTF-16 code units. ASCII names compare
/// the same as bytes, which is the fast path.
fn key_order(a: &str, b: &str) -> std::cmp::Ordering {
    if a.is_ascii() && b.is_ascii() {
        a.as_bytes().cmp(b.as_bytes())
    } else {
        a.encode_utf16().cmp(b.encode_utf16())
    }
}

fn write_member<'a>(
    i: usize,
    key: &'a str,
    value: &'a Value,
    out: &mut String,
    path: &mut Vec<PathSeg<'a>>,
    depth: usize,
) -> Result<(), IdentityError> {
    if i > 0 {
        out.push(',');
    }
    write_string(key, out);
    out.push(':');
    path.push(PathSeg::Key(key));
    write_value(value, out, path, depth + 1)?;
    path.pop();
    Ok(())
}

fn write_object<'a>(
    map: &'a Map<String, Value>,
    out: &mut String,
    path: &mut Vec<PathSeg<'a>>,
    depth: usize,
) -> Result<(), IdentityError> {
    out.push('{');
    // serde_json's default map is already in byte order, which equals UTF-16 order for most keys; sort
    // only when the iteration order is not the canonical one (non-BMP keys, or `preserve_order`).
    let sorted = map
        .keys()
        .zip(map.keys().skip(1))
        .all(|(a, b)| key_order(a, b) == std::cmp::Ordering::Less);
    if sorted {
        for (i, (key, value)) in map.iter().enumerate() {
            write_member(i, key, value, out, path, depth)?;
        }
    } else {
        let mut members: Vec<(&String, &Value)> = map.iter().collect();
        members.sort_by(|a, b| key_order(a.0, b.0));
        for (i, (key, value)) in members.into_iter().enumerate() {
            write_member(i, key, value, out, path, depth)?;
        }
    }
    out.push('}');
    Ok(())
}

fn write_string(s: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    // Every byte that needs escaping is ASCII, and ASCII bytes never occur inside a multi-byte UTF-8
    // sequence, so scanning bytes and slicing at them keeps char boundaries.
    let bytes = s.as_bytes();
    let mut run_start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            b'\t' => "\\t",
            b'\n' => "\\n",
            0x0c => "\\f",
            b'\r' => "\\r",
            0x00..=0x1f => "",
            _ => continue,
        };
        out.push_str(&s[run_start..i]);
        if escape.is_empty() {
            out.push_str("\\u00");
            out.push(HEX[(b >> 4) as usize] as char);
            out.push(HEX[(b & 15) as usize] as char);
        } else {
            out.push_str(escape);
        }
        run_start = i + 1;
    }
    out.push_str(&s[run_start..]);
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Issue 49: an error that wraps a cause returns it from `source()`, down the chain.
    #[test]
    fn wrapped_causes_are_sources() {
        use std::error::Error as _;
        let text = purra_schema::JsonError {
            kind: purra_schema::JsonErrorKind::Syntax,
            offset: 3,
        };
        let e = crate::CatalogError::Identity(IdentityError::Text(text));
        let identity = e.source().expect("the identity error");
        assert_eq!(
            identity.downcast_ref::<IdentityError>(),
            Some(&IdentityError::Text(text))
        );
        let json = identity.source().expect("the JSON error");
        assert_eq!(json.downcast_ref::<purra_schema::JsonError>(), Some(&text));
        assert!(json.source().is_none());
        assert!(crate::CatalogError::DuplicateName("x".into())
            .source()
            .is_none());
    }

    /// A value nested `levels` arrays deep around `null`.
    fn nested(levels: usize) -> Value {
        (0..levels).fold(Value::Null, |v, _| Value::Array(vec![v]))
    }

    #[test]
    fn a_list_identity_is_the_identity_of_the_assembled_document() {
        let items = [
            json!({"b": 1, "a": ["é", 1.5, null], "\u{10000}": true}),
            json!("text"),
            json!([]),
            nested(MAX_DEPTH_CEILING - 2),
        ];
        let assembled = json!({"tools": items.to_vec(), "profile": "p/1"});
        assert_eq!(
            identity_of_list("profile", "p/1", "tools", items.iter()).unwrap(),
            json_identity(&assembled).unwrap()
        );
        let none: [Value; 0] = [];
        assert_eq!(
            identity_of_list("profile", "p/1", "tools", none.iter()).unwrap(),
            json_identity(&json!({"profile": "p/1", "tools": []})).unwrap()
        );
        // The same refusals, at the same places, as the assembled document's.
        for bad in [
            json!({"x": 9007199254740993u64}),
            nested(MAX_DEPTH_CEILING - 1),
        ] {
            let items = [json!(1), bad];
            let assembled = json!({"profile": "p/1", "tools": items.to_vec()});
            assert_eq!(
                identity_of_list("profile", "p/1", "tools", items.iter()).unwrap_err(),
                json_identity(&assembled).unwrap_err()
            );
        }
    }

    #[test]
    fn identity_has_the_documented_shape() {
        let id = json_identity(&json!({})).unwrap();
        // SHA-256 of the two bytes "{}".
        assert_eq!(
            id.as_str(),
            "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
        assert_eq!(JsonIdentity::parse(id.as_str()), Some(id.clone()));
        assert_eq!(JsonIdentity::parse("sha256:ABC"), None);
    }

    #[test]
    fn unrepresentable_integers_are_refused_with_their_pointer() {
        let v = json!({"a": [1, 9007199254740993u64]});
        assert_eq!(
            canonicalize(&v),
            Err(IdentityError::NumberNotIJson {
                pointer: "/a/1".into()
            })
        );
        assert_eq!(
            canonicalize(&json!(u64::MAX)).unwrap_err().to_string(),
            "number at \"\" is not an exact IEEE-754 double, so it is outside I-JSON"
        );
        assert_eq!(
            canonicalize(&json!(9007199254740992u64)).unwrap(),
            "9007199254740992"
        );
        assert_eq!(canonicalize(&json!(-0.0)).unwrap(), "0");
    }

    #[test]
    fn control_characters_use_rfc_escapes() {
        assert_eq!(
            canonicalize(&json!("\u{8}\t\n\u{c}\r\u{1}\u{1f}\u{7f}\"\\/é")).unwrap(),
            "\"\\b\\t\\n\\f\\r\\u0001\\u001f\u{7f}\\\"\\\\/é\""
        );
    }
}
