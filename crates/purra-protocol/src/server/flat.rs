//! The usual `tools/call` read once: its params with the name borrowed and the arguments left
//! raw, and a flat input schema's verdict read from the arguments' bytes.
//!
//! A typed tool's arguments are decoded straight from their bytes into its type only when a
//! [`FlatSchema`] admits them: then the instance is valid under the tool's input schema (the
//! check is that schema's own rules, read from the bytes), and the type's decode from the bytes
//! gives what its decode from the parsed value gives. Anything the flat check does not admit,
//! and any decode that fails, goes the general way (a `Value`, the compiled validator, its
//! wording), so every verdict and error text is the one that way gives.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::types::{JsonObject, TaskMetadata};

/// `tools/call` params as the usual call sends them, borrowed from the frame.
pub(super) struct UsualCall<'a> {
    pub(super) name: Cow<'a, str>,
    /// The arguments' text. Read in one scan ([`read_plain`](Self::read_plain)) it is not yet
    /// known to be one value: whoever reads it reads it whole (`serde_json::from_str`, which
    /// refuses anything after the value), and anything else leaves the call to the general way.
    arguments: Option<&'a str>,
}

/// `tools/call` params read the general way, borrowed from the frame.
#[derive(Deserialize)]
struct Params<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(default, borrow)]
    arguments: Option<&'a RawValue>,
    #[serde(default)]
    task: Option<TaskMetadata>,
    #[serde(default, rename = "_meta", borrow)]
    meta: Option<&'a RawValue>,
    #[serde(default, rename = "idempotencyKey", borrow)]
    key: Option<&'a RawValue>,
}

impl<'a> UsualCall<'a> {
    /// The params of a call without `_meta`, `task` or key whose arguments are an object (or
    /// absent); `None` for anything else, which `CallToolParams` reads and words as before.
    /// The arguments' text is that of an object only when read whole (see `arguments`).
    pub(super) fn read(params: &'a str) -> Option<UsualCall<'a>> {
        if let Some(call) = Self::read_plain(params) {
            return Some(call);
        }
        let call: Params<'a> = serde_json::from_str(params).ok()?;
        let object = call
            .arguments
            .is_none_or(|a| a.get().as_bytes().first() == Some(&b'{'));
        (object && call.task.is_none() && call.meta.is_none() && call.key.is_none()).then_some(
            UsualCall {
                name: call.name,
                arguments: call.arguments.map(RawValue::get),
            },
        )
    }

    /// The params as the usual call writes them, read in one scan of their fixed bytes:
    /// `{"name":"N"}`, or `{"name":"N","arguments":A}` with `A` starting with `{` (the name
    /// without escapes). `params` is one JSON value (the frame's decode checked it), so when
    /// `A` reads as one object followed by nothing but whitespace, the params are exactly those
    /// two members and `A` is the arguments the general way reads; `A` is not scanned here
    /// (whoever reads it reads it whole). `None` for anything else, which
    /// [`read`](Self::read) reads the general way.
    fn read_plain(params: &'a str) -> Option<UsualCall<'a>> {
        let (name, rest) = crate::jsonrpc::plain_str(params.strip_prefix(r#"{"name":""#)?)?;
        let arguments = match rest {
            "}" => None,
            rest => {
                let a = rest.strip_prefix(r#","arguments":"#)?.strip_suffix('}')?;
                a.starts_with('{').then_some(a)?;
                Some(a)
            }
        };
        Some(UsualCall {
            name: Cow::Borrowed(name),
            arguments,
        })
    }

    /// The arguments' JSON text (`{}` when absent): see `arguments` for how it is read.
    pub(super) fn arguments_text(&self) -> &'a str {
        self.arguments.unwrap_or("{}")
    }
}

/// The JSON type a flat property admits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    String,
    Boolean,
    Number,
    Integer,
}

/// An input schema whose verdict can be read from the arguments' bytes: an object of
/// `properties` each of one primitive type (optionally or null), some `required`, perhaps
/// `additionalProperties: false`, with annotations (`description`, `title`, `format`, ...)
/// beside them. Derived schemas of structs of strings, numbers and booleans are of this kind.
#[derive(Debug, Clone)]
pub(super) struct FlatSchema {
    props: Vec<(String, Kind, bool)>,
    required: u64,
}

/// Keywords that are annotations in 2020-12 (`format` too, asserted by neither validator).
const ANNOTATIONS: &[&str] = &[
    "description",
    "title",
    "format",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
];

impl FlatSchema {
    /// The flat form of `schema`, when it is flat.
    pub(super) fn of(schema: &JsonObject) -> Option<FlatSchema> {
        let mut props = Vec::new();
        let mut required = 0u64;
        for (k, v) in schema {
            match (k.as_str(), v) {
                ("type", Value::String(t)) if t == "object" => {}
                ("additionalProperties", Value::Bool(false)) => {}
                ("description" | "title", _) => {}
                ("properties", Value::Object(p)) => {
                    for (name, sub) in p {
                        let (kind, nullable) = Self::property(sub)?;
                        props.push((name.clone(), kind, nullable));
                    }
                }
                ("required", Value::Array(_)) => {}
                _ => return None,
            }
        }
        if props.len() > 64 {
            return None;
        }
        if let Some(req) = schema.get("required") {
            for r in req.as_array()? {
                let at = props
                    .iter()
                    .position(|(n, ..)| Some(n.as_str()) == r.as_str())?;
                required |= 1 << at;
            }
        }
        Some(FlatSchema { props, required })
    }

    fn property(sub: &Value) -> Option<(Kind, bool)> {
        let sub = sub.as_object()?;
        let mut found = None;
        for (k, v) in sub {
            match k.as_str() {
                "type" => {
                    found = match v {
                        Value::String(t) => Some((Self::kind(t)?, false)),
                        Value::Array(ts) => match ts.as_slice() {
                            [Value::String(a), Value::String(b)] if b == "null" => {
                                Some((Self::kind(a)?, true))
                            }
                            [Value::String(a), Value::String(b)] if a == "null" => {
                                Some((Self::kind(b)?, true))
                            }
                            _ => return None,
                        },
                        _ => return None,
                    }
                }
                k if ANNOTATIONS.contains(&k) => {}
                _ => return None,
            }
        }
        found
    }

    fn kind(t: &str) -> Option<Kind> {
        Some(match t {
            "string" => Kind::String,
            "boolean" => Kind::Boolean,
            "number" => Kind::Number,
            "integer" => Kind::Integer,
            _ => return None,
        })
    }

    /// Whether the object `text` is valid under the schema by this check alone: every key a
    /// property, once, its value of the property's type, every required key present. `false`
    /// says only that the general way decides.
    pub(super) fn admits(&self, text: &str) -> bool {
        let mut de = serde_json::Deserializer::from_str(text);
        de.deserialize_map(Check(self)).unwrap_or(false)
    }

    /// The bits of the required properties (bit `i`: property `i`).
    pub(super) fn required(&self) -> u64 {
        self.required
    }

    /// The position of the property `name`.
    pub(super) fn position(&self, name: &str) -> Option<usize> {
        self.props.iter().position(|(n, ..)| n == name)
    }

    /// The type of the property at `at`, and whether it admits `null`.
    pub(super) fn property_kind(&self, at: usize) -> (Kind, bool) {
        let (_, kind, nullable) = self.props[at];
        (kind, nullable)
    }

    fn value_admitted(kind: Kind, nullable: bool, raw: &str) -> bool {
        let b = raw.as_bytes();
        match b.first() {
            Some(b'n') => nullable,
            Some(b'"') => kind == Kind::String,
            Some(b't' | b'f') => kind == Kind::Boolean,
            Some(b'-' | b'0'..=b'9') => match kind {
                // Within a double's range, as the parsed value must be.
                Kind::Number => raw.parse::<f64>().is_ok_and(f64::is_finite),
                // Plainly an integer (`1.0` and `1e2` are integers too: the general way says).
                Kind::Integer => {
                    b.len() <= 20 && b.iter().all(|c| c.is_ascii_digit() || *c == b'-')
                }
                _ => false,
            },
            _ => false,
        }
    }
}

struct Check<'s>(&'s FlatSchema);

impl<'de> Visitor<'de> for Check<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<bool, M::Error> {
        let mut seen = 0u64;
        while let Some(key) = map.next_key_seed(Key)? {
            let Some(at) = self.0.props.iter().position(|(n, ..)| *n == *key) else {
                return Ok(false);
            };
            let raw: &'de RawValue = map.next_value()?;
            let (_, kind, nullable) = self.0.props[at];
            if seen & (1 << at) != 0 || !FlatSchema::value_admitted(kind, nullable, raw.get()) {
                return Ok(false);
            }
            seen |= 1 << at;
        }
        Ok(seen & self.0.required == self.0.required)
    }
}

/// A key, borrowed unless it has escapes.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Cow<'de, str>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(Key)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Cow<'de, str>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one-scan read of the usual params takes the usual ones, and whatever it reads the
    /// general way reads the same; what it reads of params that are not the usual ones is
    /// arguments text that no reader reads whole (so the call goes the general way).
    #[test]
    fn the_usual_params_read_in_one_scan_are_read_as_the_general_way_reads_them() {
        let general = |p| {
            serde_json::from_str::<Params<'_>>(p)
                .map(|c| (c.name.into_owned(), c.arguments.map(|a| a.get().to_owned())))
                .unwrap()
        };
        let whole = |text: &str| serde_json::from_str::<JsonObject>(text).is_ok();
        for p in [
            r#"{"name":"echo","arguments":{"text":"hi"}}"#,
            r#"{"name":"echo"}"#,
            r#"{"name":"é","arguments":{} }"#,
            r#"{"name":"","arguments":{"a":{"b":[1,"}"]}}}"#,
            r#"{"name":"e","arguments":{"t\"x":"\u0041}\"","n":{"}":[{},"{"]}}}"#,
            "{\"name\":\"e\",\"arguments\":{\"a\" :\n 1 }\t\n}",
        ] {
            let c = UsualCall::read_plain(p).unwrap_or_else(|| panic!("usual: {p}"));
            assert!(matches!(c.name, Cow::Borrowed(_)));
            assert!(c.arguments.is_none_or(whole), "{p}");
            // The text read is the value and the whitespace after it (a raw value's is not).
            let fast = (
                c.name.into_owned(),
                c.arguments.map(|a| a.trim_end().to_owned()),
            );
            assert_eq!(fast, general(p), "{p}");
        }
        for p in [
            r#"{"name":"e\"cho","arguments":{}}"#,
            r#"{"name":"echo","arguments":null}"#,
            r#"{"name":"echo","arguments":[]}"#,
            r#"{"name":"echo", "arguments":{}}"#,
            r#"{"arguments":{},"name":"echo"}"#,
        ] {
            assert!(UsualCall::read_plain(p).is_none(), "{p}");
        }
        // Members after the arguments: the text read is no object read whole.
        for p in [
            r#"{"name":"echo","arguments":{},"_meta":{}}"#,
            r#"{"name":"echo","arguments":{"a":"}"},"task":{}}"#,
            r#"{"name":"echo","arguments":{} ,"idempotencyKey":"k"}"#,
            r#"{"name":"echo","arguments":{},"name":"other"}"#,
            r#"{"name":"echo","arguments":{},"arguments":{}}"#,
        ] {
            let c = UsualCall::read_plain(p).unwrap_or_else(|| panic!("read: {p}"));
            assert!(!whole(c.arguments_text()), "{p}");
        }
        // The general way's verdicts on those it reads at all.
        let read = |p| UsualCall::read(p).map(|c| c.arguments_text());
        assert_eq!(read(r#"{"arguments":{},"name":"echo"}"#), Some("{}"));
        assert_eq!(read(r#"{"name":"echo","arguments":null}"#), Some("{}"));
        assert!(read(r#"{"name":"echo","arguments":[]}"#).is_none());
        assert!(read(r#"{"name":"e\"cho","arguments":{}}"#).is_some());
    }
}
