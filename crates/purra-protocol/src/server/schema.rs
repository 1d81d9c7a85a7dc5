//! JSON Schemas derived from Rust types for tools, prompts and templates.
//!
//! schemars describes a type in full JSON Schema 2020-12, with extras that strict consumers
//! refuse: non-standard `format`s (`uint32`, `double`), `$defs`/`$ref` for nested types, a root
//! `$schema` and `title`, `default`, `uniqueItems`, boolean subschemas. [`schema_for`] generates
//! with nested types inlined and then rewrites each subschema to what a strict profile (such as
//! purra-core's `purra.output-schema/v1`) accepts, without changing which instances are valid
//! to the Rust type:
//!
//! - an integer `format` becomes `minimum`/`maximum` when the bounds are exact I-JSON numbers
//!   (8, 16 and 32 bits); wider integers keep only `minimum: 0` when unsigned (serde still
//!   rejects out-of-range values when the arguments are decoded);
//! - every other `format` is dropped (in 2020-12 it is an annotation, not an assertion);
//! - `default`, `examples`, `deprecated`, `readOnly`, `writeOnly`, `$comment` are dropped
//!   (annotations);
//! - `uniqueItems` is dropped (a set decodes duplicates into one element);
//! - the boolean subschema `true` (any value, e.g. `serde_json::Value`) becomes `{}`;
//! - the root loses `$schema` (MCP defaults to 2020-12) and the `title` schemars derives from
//!   the type's name.
//!
//! A recursive type keeps its `$defs`/`$ref` (it cannot be inlined); it is valid JSON Schema,
//! but outside a profile without references.

use schemars::generate::SchemaSettings;
use schemars::JsonSchema;
use serde_json::{Map, Value};

use crate::types::JsonObject;

/// The largest integer every JSON peer reads exactly (2^53 - 1).
const MAX_EXACT: i128 = (1 << 53) - 1;

/// Which way a schema describes a type: as arguments decoded from the client (serde's
/// deserialization contract) or as output encoded by the server (serialization contract).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Contract {
    /// Arguments the server decodes.
    Input,
    /// Output the server encodes.
    Output,
}

/// The schema of `T` as tool arguments (serde's deserialization view), rewritten for strict
/// profiles as the module explains.
///
/// ```
/// use schemars::JsonSchema;
///
/// #[derive(serde::Deserialize, JsonSchema)]
/// struct Forecast {
///     /// Days ahead.
///     days: u8,
///     city: String,
/// }
/// let schema = purra_protocol::schema_for::<Forecast>();
/// assert_eq!(serde_json::Value::Object(schema), serde_json::json!({
///     "type": "object",
///     "properties": {
///         "days": {"type": "integer", "minimum": 0, "maximum": 255, "description": "Days ahead."},
///         "city": {"type": "string"}
///     },
///     "required": ["days", "city"]
/// }));
/// ```
pub fn schema_for<T: JsonSchema + ?Sized>() -> JsonObject {
    generate::<T>(Contract::Input)
}

/// The schema of `T` as tool output (serde's serialization view), rewritten the same way.
pub fn output_schema_for<T: JsonSchema + ?Sized>() -> JsonObject {
    generate::<T>(Contract::Output)
}

pub(crate) fn generate<T: JsonSchema + ?Sized>(contract: Contract) -> JsonObject {
    let settings = SchemaSettings::draft2020_12().with(|s| {
        s.inline_subschemas = true;
        s.meta_schema = None;
    });
    let settings = match contract {
        Contract::Input => settings.for_deserialize(),
        Contract::Output => settings.for_serialize(),
    };
    let mut root = settings
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    strict(&mut root);
    match root {
        Value::Object(mut o) => {
            o.remove("title");
            o.remove("$schema");
            o
        }
        // `true`, after `strict`, is `{}`; `false` (no value at all) stays refusable.
        Value::Bool(b) => {
            let mut o = Map::new();
            if !b {
                o.insert("not".into(), Value::Object(Map::new()));
            }
            o
        }
        _ => JsonObject::new(),
    }
}

/// Keywords whose value is one subschema.
const ONE: &[&str] = &[
    "additionalProperties",
    "items",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
];
/// Keywords whose value is an array of subschemas.
const MANY: &[&str] = &["anyOf", "oneOf", "allOf", "prefixItems"];
/// Keywords whose value is an object of subschemas.
const NAMED: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];
/// Annotations strict profiles refuse and no validator asserts.
const DROPPED: &[&str] = &[
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$comment",
    "uniqueItems",
];

/// Rewrites one subschema and, recursively, every subschema it holds.
fn strict(schema: &mut Value) {
    let obj = match schema {
        Value::Bool(true) => {
            *schema = Value::Object(Map::new());
            return;
        }
        Value::Object(o) => o,
        _ => return,
    };
    for k in DROPPED {
        obj.remove(*k);
    }
    if let Some(Value::String(format)) = obj.remove("format") {
        if let Some((min, max)) = integer_range(&format) {
            tighten(obj, "minimum", min, |new, old| new > old);
            if let Some(max) = max {
                tighten(obj, "maximum", max, |new, old| new < old);
            }
        }
    }
    for (k, v) in obj.iter_mut() {
        let k = k.as_str();
        if ONE.contains(&k) {
            strict(v);
        } else if MANY.contains(&k) {
            if let Value::Array(items) = v {
                items.iter_mut().for_each(strict);
            }
        } else if NAMED.contains(&k) {
            if let Value::Object(named) = v {
                named.values_mut().for_each(strict);
            }
        }
    }
}

/// The exact bounds of an integer format: a minimum, and a maximum when it is exact in I-JSON.
fn integer_range(format: &str) -> Option<(i128, Option<i128>)> {
    let (min, max): (i128, i128) = match format {
        "int8" => (i8::MIN.into(), i8::MAX.into()),
        "int16" => (i16::MIN.into(), i16::MAX.into()),
        "int32" => (i32::MIN.into(), i32::MAX.into()),
        "uint8" => (0, u8::MAX.into()),
        "uint16" => (0, u16::MAX.into()),
        "uint32" => (0, u32::MAX.into()),
        "uint64" | "uint128" | "uint" => (0, i128::MAX),
        _ => return None,
    };
    (min >= -MAX_EXACT).then_some((min, (max <= MAX_EXACT).then_some(max)))
}

/// Sets `key` to `bound` unless the schema already has a tighter one.
fn tighten(obj: &mut JsonObject, key: &str, bound: i128, tighter: fn(i128, i128) -> bool) {
    let old = obj.get(key).and_then(|v| {
        v.as_i64()
            .map(i128::from)
            .or_else(|| v.as_u64().map(i128::from))
    });
    let keep_old = match old {
        Some(old) => !tighter(bound, old),
        // A fractional or huge bound the schema already has: leave it.
        None => obj.contains_key(key),
    };
    if !keep_old {
        let n = i64::try_from(bound).expect("bounds are within I-JSON");
        obj.insert(key.to_owned(), Value::from(n));
    }
}

/// What a root schema says its instances are, for a registration error.
pub(crate) fn describe_root(schema: &JsonObject) -> String {
    match schema.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(t) => t.to_string(),
        None if schema.contains_key("anyOf") || schema.contains_key("oneOf") => {
            "a choice of schemas, not all of them objects".to_owned()
        }
        None if schema.contains_key("enum") => "an enumeration of values".to_owned(),
        None if schema.contains_key("const") => "a constant".to_owned(),
        None => "any value".to_owned(),
    }
}

/// Whether a schema's root describes only JSON objects, declaring `"type": "object"` at the
/// root when every alternative of an `anyOf`/`oneOf` root is an object schema (an internally
/// tagged enum of struct variants, for example).
pub(crate) fn ensure_object_root(schema: &mut JsonObject) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => return t == "object",
        Some(_) => return false,
        None => {}
    }
    let all_objects = ["anyOf", "oneOf"].iter().any(|k| {
        schema
            .get(*k)
            .and_then(Value::as_array)
            .is_some_and(|alts| {
                !alts.is_empty()
                    && alts
                        .iter()
                        .all(|a| a.get("type").and_then(Value::as_str) == Some("object"))
            })
    });
    if all_objects {
        schema.insert("type".into(), Value::String("object".into()));
    }
    all_objects
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::{BTreeSet, HashMap};

    #[allow(dead_code)]
    #[derive(serde::Deserialize, serde::Serialize, JsonSchema)]
    struct Inner {
        /// A flag.
        on: bool,
    }

    #[allow(dead_code)]
    #[derive(serde::Deserialize, serde::Serialize, JsonSchema)]
    #[serde(rename_all = "lowercase")]
    enum Unit {
        Celsius,
        Fahrenheit,
    }

    #[allow(dead_code)]
    #[derive(serde::Deserialize, serde::Serialize, JsonSchema)]
    struct Everything {
        a: u8,
        b: i16,
        c: u32,
        d: i32,
        e: u64,
        f: i64,
        g: usize,
        h: f32,
        i: f64,
        j: Option<u32>,
        k: Inner,
        l: Vec<Inner>,
        m: Unit,
        n: HashMap<String, u16>,
        o: BTreeSet<String>,
        p: serde_json::Value,
        q: std::num::NonZeroU32,
        #[serde(default)]
        r: String,
        s: Option<Inner>,
        t: char,
    }

    #[test]
    fn ordinary_types_become_strict_schemas() {
        let s = Value::Object(schema_for::<Everything>());
        let inner = json!({"type": "object", "properties": {"on": {"type": "boolean", "description": "A flag."}}, "required": ["on"]});
        assert_eq!(
            s,
            json!({
                "type": "object",
                "properties": {
                    "a": {"type": "integer", "minimum": 0, "maximum": 255},
                    "b": {"type": "integer", "minimum": -32768, "maximum": 32767},
                    "c": {"type": "integer", "minimum": 0, "maximum": 4294967295u64},
                    "d": {"type": "integer", "minimum": -2147483648i64, "maximum": 2147483647},
                    "e": {"type": "integer", "minimum": 0},
                    "f": {"type": "integer"},
                    "g": {"type": "integer", "minimum": 0},
                    "h": {"type": "number"},
                    "i": {"type": "number"},
                    "j": {"type": ["integer", "null"], "minimum": 0, "maximum": 4294967295u64},
                    "k": inner,
                    "l": {"type": "array", "items": inner},
                    "m": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                    "n": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 65535}},
                    "o": {"type": "array", "items": {"type": "string"}},
                    "p": {},
                    "q": {"type": "integer", "minimum": 1, "maximum": 4294967295u64},
                    "r": {"type": "string"},
                    "s": {"type": ["object", "null"], "properties": {"on": {"type": "boolean", "description": "A flag."}}, "required": ["on"]},
                    "t": {"type": "string", "minLength": 1, "maxLength": 1}
                },
                "required": ["a", "b", "c", "d", "e", "f", "g", "h", "i", "k", "l", "m", "n", "o", "p", "q", "t"]
            })
        );
    }

    #[test]
    fn output_schemas_follow_serialization() {
        #[derive(serde::Serialize, JsonSchema)]
        struct Out {
            #[serde(default)]
            r: String,
        }
        assert_eq!(
            Value::Object(output_schema_for::<Out>()),
            json!({"type": "object", "properties": {"r": {"type": "string"}}, "required": ["r"]})
        );
    }

    #[test]
    fn object_roots_are_recognized() {
        #[allow(dead_code)]
        #[derive(serde::Deserialize, JsonSchema)]
        #[serde(tag = "op", rename_all = "lowercase")]
        enum Op {
            Add { by: i32 },
            Reset {},
        }
        let mut s = schema_for::<Op>();
        assert!(ensure_object_root(&mut s));
        assert_eq!(s["type"], "object");
        let mut s = schema_for::<Unit>();
        assert!(!ensure_object_root(&mut s));
        assert_eq!(describe_root(&s), "string");
        let mut s = schema_for::<()>();
        assert!(!ensure_object_root(&mut s));
        assert_eq!(describe_root(&s), "null");
        assert_eq!(
            describe_root(&schema_for::<serde_json::Value>()),
            "any value"
        );
    }
}
