//! Strict schema profile `purra.output-schema/v1`: a small subset of JSON Schema 2020-12, compiled once.
//!
//! A schema in this profile is a JSON object whose root declares `"type": "object"`. Every keyword in
//! the table below is accepted, with exactly its JSON Schema 2020-12 meaning; **every other keyword is
//! rejected** at compile time with [`SchemaErrorKind::UnsupportedKeyword`] and the JSON pointer of the
//! offending keyword — validation keywords and metadata alike (`default`, `examples`, `x-*`, `$ref`,
//! `$defs`, `$id`, `$comment`, `format`, `deprecated`, ...). Nothing is stripped or ignored, so a schema
//! that compiles means exactly what a full 2020-12 validator would make of it.
//!
//! | keyword | accepted value | meaning (2020-12) |
//! |---|---|---|
//! | `type` | a type name or a non-empty array of distinct type names (`null`, `boolean`, `object`, `array`, `number`, `string`, `integer`) | `integer` is any number with a zero fractional part, so `1.0` is an integer |
//! | `properties` | object of subschemas | each present member validates against its subschema |
//! | `required` | array of distinct strings | each named member is present |
//! | `additionalProperties` | `true`, `false` or a subschema | members not named in `properties` |
//! | `items` | subschema | every array element |
//! | `minItems`, `maxItems` | non-negative integer | array length |
//! | `minLength`, `maxLength` | non-negative integer | string length in Unicode code points |
//! | `pattern` | string in the ECMA-262 subset of [`crate::pattern`]'s table | unanchored search |
//! | `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum` | number | compared by mathematical value |
//! | `multipleOf` | positive integer up to 2^53 | the number divided by it is an integer (fractional divisors are rejected: their floating-point meaning differs between validators) |
//! | `enum` | array | equal to one element; numbers compare by value (`1` equals `1.0`) |
//! | `const` | any value | equal, as for `enum` |
//! | `anyOf`, `oneOf` | non-empty array of subschemas | at least one / exactly one subschema is valid |
//! | `title`, `description` | string | annotations only: they never change a verdict, but they count toward the schema's identity |
//! | `$schema` | exactly `https://json-schema.org/draft/2020-12/schema`; with the opt-ins also draft-07 and 2019-09 (see [Dialects](#dialects)) | only at the root and only with [`CompileOptions::allow_root_dialect_2020_12`]; kept in the schema's source so the caller retains it |
//!
//! Deliberately absent: `uniqueItems` (its pairwise comparison of instance values is quadratic and
//! depth-unbounded), `allOf`/`not`/`if` (rarely needed by tool schemas), `prefixItems`/`contains`,
//! `patternProperties`, `minProperties`/`maxProperties`, `format` (an annotation in 2020-12 whose
//! assertion behaviour varies), boolean subschemas other than `additionalProperties: true|false`, and
//! every reference keyword (no schema document is ever fetched).
//!
//! # Dialects
//!
//! A schema without a root `$schema` is read as 2020-12 (MCP's default dialect). With
//! [`CompileOptions::allow_root_dialect_draft_07`] or [`CompileOptions::allow_root_dialect_2019_09`]
//! a root may also declare JSON Schema draft-07 (`http://json-schema.org/draft-07/schema#`, with or
//! without the `#`, as the TypeScript SDK writes it) or 2019-09
//! (`https://json-schema.org/draft/2019-09/schema`, with or without an empty `#` fragment). Every
//! keyword of the table above means the same in those dialects as in 2020-12 (checked against the
//! draft-07 and 2019-09 validation and core texts: the same `integer`, the same numeric bounds,
//! string lengths in code points, equality by mathematical value, `items` as one schema applied to
//! every element, `additionalProperties` over the names `properties` does not list), so such a
//! schema is accepted with its declaration kept in [`CompiledSchema::source`], and validated
//! exactly as it would be in 2020-12. What differs is refused, with its pointer and a reason
//! naming the dialect:
//!
//! | keyword or form | draft-07 | 2019-09 | why it is refused |
//! |---|---|---|---|
//! | `items` as an array | tuple | tuple | positional schemas (2020-12's `prefixItems`) |
//! | `additionalItems` | elements after the tuple | the same | 2020-12's `items` after `prefixItems` |
//! | `dependencies` | required names or a schema per member | not a keyword (split into `dependentRequired`, `dependentSchemas`) | conditional validation |
//! | `definitions`, `$ref` | `$ref` ignores its siblings | `$ref` beside siblings | no reference is ever resolved |
//! | `$recursiveRef`, `$recursiveAnchor` | not keywords | dynamic references | 2020-12's `$dynamicRef` |
//! | `format` | may assert | an annotation unless the format vocabulary is required | validators disagree |
//! | boolean `exclusiveMinimum`/`exclusiveMaximum` | invalid (the boolean form is draft-04's) | invalid | not a bound |
//!
//! Every other keyword outside the table is refused as in 2020-12.
//!
//! Budgets: compilation measures the schema document first ([`SchemaLimits`]: depth, nodes, pattern
//! length, compiled regex size); validation measures the instance first ([`ValidationLimits`]: depth,
//! nodes; depth checked before descending and never deeper than
//! [`MAX_DEPTH_CEILING`](crate::json_text::MAX_DEPTH_CEILING)) and then bounds the work
//! ([`ValidationLimits::max_steps`]). Recursion during validation follows the compiled schema, whose
//! depth is bounded, so no input can overflow the stack.
//! Validation never coerces: `"1"` is not a number and a JSON-looking string is not an object.
//! Errors carry the instance pointer, the schema pointer and a short reason that never repeats instance
//! values; pointer segments longer than 64 bytes are cut and end in `…`.

use crate::json_text::{parse_json, JsonErrorKind, JsonLimits};
use crate::num::{cmp_num, is_multiple_of, json_equal, Num};
use crate::pattern;
use regex::Regex;
use serde_json::{Map, Value};
use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

/// The name of this schema profile.
pub const OUTPUT_SCHEMA_PROFILE: &str = "purra.output-schema/v1";

/// The 2020-12 dialect URI, the only one a root `$schema` may name unless [`CompileOptions`]
/// also allows draft-07 or 2019-09.
pub const DIALECT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";

/// The 2019-09 dialect URI (also accepted with an empty `#` fragment).
pub const DIALECT_2019_09: &str = "https://json-schema.org/draft/2019-09/schema";

/// The draft-07 dialect URI as its meta-schema names itself and the TypeScript SDK writes it (also
/// accepted without the `#`).
pub const DIALECT_DRAFT_07: &str = "http://json-schema.org/draft-07/schema#";

/// A JSON Schema dialect a root `$schema` may declare.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Dialect {
    /// JSON Schema draft-07 ([`DIALECT_DRAFT_07`]).
    Draft07,
    /// JSON Schema 2019-09 ([`DIALECT_2019_09`]).
    Draft2019_09,
    /// JSON Schema 2020-12 ([`DIALECT_2020_12`]), MCP's default dialect.
    Draft2020_12,
}

impl Dialect {
    /// The dialect a `$schema` URI names, spelled exactly as one of [`DIALECT_2020_12`],
    /// [`DIALECT_2019_09`] (or with an empty `#` fragment) or [`DIALECT_DRAFT_07`] (or without its
    /// `#`); `None` for anything else.
    pub fn from_uri(uri: &str) -> Option<Dialect> {
        match uri {
            DIALECT_2020_12 => Some(Dialect::Draft2020_12),
            "https://json-schema.org/draft/2019-09/schema"
            | "https://json-schema.org/draft/2019-09/schema#" => Some(Dialect::Draft2019_09),
            "http://json-schema.org/draft-07/schema#"
            | "http://json-schema.org/draft-07/schema" => Some(Dialect::Draft07),
            _ => None,
        }
    }

    /// The dialect's URI.
    pub fn uri(self) -> &'static str {
        match self {
            Dialect::Draft07 => DIALECT_DRAFT_07,
            Dialect::Draft2019_09 => DIALECT_2019_09,
            Dialect::Draft2020_12 => DIALECT_2020_12,
        }
    }

    /// The dialect's short name: `draft-07`, `2019-09` or `2020-12`.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Draft07 => "draft-07",
            Dialect::Draft2019_09 => "2019-09",
            Dialect::Draft2020_12 => "2020-12",
        }
    }
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Budgets for compiling a schema document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SchemaLimits {
    /// Maximum nesting of the schema document's JSON (each subschema level costs two: keyword, schema);
    /// capped at [`MAX_DEPTH_CEILING`](crate::json_text::MAX_DEPTH_CEILING).
    pub max_depth: usize,
    /// Maximum number of JSON values in the schema document.
    pub max_nodes: usize,
    /// Maximum length of one `pattern`, in bytes.
    pub max_pattern_bytes: usize,
    /// Maximum compiled size of one `pattern` (passed to `regex::RegexBuilder::size_limit`).
    pub max_regex_size: usize,
}

impl Default for SchemaLimits {
    /// Depth 64, 10 000 values, 1 KiB patterns, 1 MiB compiled regex.
    fn default() -> Self {
        SchemaLimits {
            max_depth: 64,
            max_nodes: 10_000,
            max_pattern_bytes: 1024,
            max_regex_size: 1 << 20,
        }
    }
}

/// Budgets for validating one instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValidationLimits {
    /// Maximum nesting depth of the instance (a scalar has depth 0); capped at
    /// [`MAX_DEPTH_CEILING`](crate::json_text::MAX_DEPTH_CEILING).
    pub max_depth: usize,
    /// Maximum number of JSON values in the instance.
    pub max_nodes: usize,
    /// Maximum number of validation steps (one per subschema application and per member or element visited).
    pub max_steps: usize,
    /// Maximum size of an instance given as text ([`CompiledSchema::validate_text`]).
    pub max_text_bytes: usize,
}

impl Default for ValidationLimits {
    /// Depth 64, 100 000 values, 1 000 000 steps, 4 MiB of text.
    fn default() -> Self {
        ValidationLimits {
            max_depth: 64,
            max_nodes: 100_000,
            max_steps: 1_000_000,
            max_text_bytes: 4 << 20,
        }
    }
}

/// Options for [`CompiledSchema::compile_with`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompileOptions {
    /// Accept a root `"$schema": "https://json-schema.org/draft/2020-12/schema"` (MCP's dialect
    /// declaration). Nested `$schema` and any other URI stay rejected. The two earlier dialects
    /// below are accepted only together with this one.
    pub allow_root_dialect_2020_12: bool,
    /// Also accept a root `$schema` naming 2019-09 ([`DIALECT_2019_09`]): the schema is compiled
    /// as 2019-09, which refuses what means something else there (see [Dialects](self#dialects)).
    pub allow_root_dialect_2019_09: bool,
    /// Also accept a root `$schema` naming draft-07 ([`DIALECT_DRAFT_07`], as the TypeScript SDK
    /// declares every tool schema), compiled as draft-07 likewise.
    pub allow_root_dialect_draft_07: bool,
    /// Compile-time budgets.
    pub limits: SchemaLimits,
    /// Budgets the compiled schema applies to each instance.
    pub validation: ValidationLimits,
}

/// Why a schema is outside the profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchemaErrorKind {
    /// The root is not an object schema declaring `"type": "object"`.
    RootNotObject,
    /// A keyword outside the profile's table (including metadata such as `default` and `x-*`).
    UnsupportedKeyword,
    /// A keyword of the table with a value the profile does not accept.
    InvalidKeywordValue,
    /// A `$schema` that is nested, not allowed, or names another dialect.
    UnsupportedDialect,
    /// A `pattern` outside the supported ECMA-262 subset, or longer than its budget.
    UnsupportedPattern,
    /// The schema nests deeper than [`SchemaLimits::max_depth`].
    TooDeep,
    /// The schema has more values than [`SchemaLimits::max_nodes`].
    TooManyNodes,
}

/// A schema refused by the profile, with the JSON pointer of the offending keyword.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaError {
    /// What is wrong.
    pub kind: SchemaErrorKind,
    /// JSON pointer into the schema document.
    pub pointer: String,
    /// A short reason (never a copy of the schema's text).
    pub detail: &'static str,
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            SchemaErrorKind::RootNotObject => "root must be an object schema",
            SchemaErrorKind::UnsupportedKeyword => "keyword outside purra.output-schema/v1",
            SchemaErrorKind::InvalidKeywordValue => "invalid keyword value",
            SchemaErrorKind::UnsupportedDialect => "unsupported $schema",
            SchemaErrorKind::UnsupportedPattern => "unsupported pattern",
            SchemaErrorKind::TooDeep => "schema too deep",
            SchemaErrorKind::TooManyNodes => "schema too large",
        };
        write!(f, "{kind} at {:?}: {}", self.pointer, self.detail)
    }
}

impl std::error::Error for SchemaError {}

/// Why an instance was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ValidationErrorKind {
    /// The instance breaks the keyword at `schema_pointer`.
    Invalid,
    /// The instance nests deeper than [`ValidationLimits::max_depth`].
    TooDeep,
    /// The instance has more values than [`ValidationLimits::max_nodes`].
    TooManyNodes,
    /// Validation needed more than [`ValidationLimits::max_steps`] steps.
    TooManySteps,
    /// The instance text was refused before decoding finished.
    Text(JsonErrorKind),
}

impl ValidationErrorKind {
    /// Whether this is a budget error rather than a verdict about the instance.
    pub fn is_budget(self) -> bool {
        !matches!(self, ValidationErrorKind::Invalid)
    }
}

/// An instance refused by a compiled schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidationError {
    /// Verdict or budget.
    pub kind: ValidationErrorKind,
    /// JSON pointer into the instance.
    pub instance_pointer: String,
    /// JSON pointer of the keyword in the schema (the subschema for budget errors).
    pub schema_pointer: String,
    /// A short reason that never repeats instance values.
    pub detail: String,
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "instance {:?} fails schema {:?}: {}",
            self.instance_pointer, self.schema_pointer, self.detail
        )
    }
}

impl std::error::Error for ValidationError {}

const T_NULL: u8 = 1;
const T_BOOL: u8 = 2;
const T_OBJECT: u8 = 4;
const T_ARRAY: u8 = 8;
const T_NUMBER: u8 = 16;
const T_STRING: u8 = 32;
const T_INTEGER: u8 = 64;

fn type_bit(name: &str) -> Option<u8> {
    Some(match name {
        "null" => T_NULL,
        "boolean" => T_BOOL,
        "object" => T_OBJECT,
        "array" => T_ARRAY,
        "number" => T_NUMBER,
        "string" => T_STRING,
        "integer" => T_INTEGER,
        _ => return None,
    })
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Object(_) => "object",
        Value::Array(_) => "array",
        Value::Number(_) => "number",
        Value::String(_) => "string",
    }
}

fn type_matches(mask: u8, v: &Value) -> bool {
    match v {
        Value::Null => mask & T_NULL != 0,
        Value::Bool(_) => mask & T_BOOL != 0,
        Value::Object(_) => mask & T_OBJECT != 0,
        Value::Array(_) => mask & T_ARRAY != 0,
        Value::String(_) => mask & T_STRING != 0,
        Value::Number(n) => {
            mask & T_NUMBER != 0 || (mask & T_INTEGER != 0 && Num::of(n).is_integer())
        }
    }
}

fn mask_names(mask: u8) -> String {
    let names = [
        "null", "boolean", "object", "array", "number", "string", "integer",
    ];
    let picked: Vec<&str> = names
        .iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(_, n)| *n)
        .collect();
    picked.join(" or ")
}

enum Additional {
    Any,
    Forbidden,
    Schema(Box<Node>),
}

/// One compiled subschema.
struct Node {
    ptr: Box<str>,
    types: Option<u8>,
    /// Sorted by name for binary search; the flag says whether the name is also `required`.
    properties: Vec<(String, Node, bool)>,
    /// `required` in schema order.
    required: Vec<String>,
    /// How many `required` names are also in `properties` (counted off during the member pass).
    required_described: usize,
    additional: Additional,
    min_length: Option<u64>,
    max_length: Option<u64>,
    pattern: Option<Regex>,
    enumeration: Option<Vec<Value>>,
    /// The keywords most subschemas lack, kept apart so that a property node (a large tool
    /// schema has thousands) stays under half the size it would otherwise have.
    rare: Option<Box<Rare>>,
}

/// The array, number, `const` and combinator keywords of a [`Node`].
#[derive(Default)]
struct Rare {
    items: Option<Node>,
    min_items: Option<u64>,
    max_items: Option<u64>,
    minimum: Option<Num>,
    maximum: Option<Num>,
    exclusive_minimum: Option<Num>,
    exclusive_maximum: Option<Num>,
    multiple_of: Option<u64>,
    constant: Option<Value>,
    any_of: Vec<Node>,
    one_of: Vec<Node>,
}

impl Node {
    /// The rarely used keywords, made present.
    fn rare(&mut self) -> &mut Rare {
        self.rare.get_or_insert_with(Box::default)
    }

    /// The subschema of property `key`, if `properties` names it.
    fn property(&self, key: &str) -> Option<(&Node, bool)> {
        if self.properties.len() <= 8 {
            self.properties
                .iter()
                .find(|(name, _, _)| name.len() == key.len() && name == key)
                .map(|(_, sub, required)| (sub, *required))
        } else {
            self.properties
                .binary_search_by(|(name, _, _)| name.as_str().cmp(key))
                .ok()
                .map(|i| (&self.properties[i].1, self.properties[i].2))
        }
    }
}

struct Inner {
    root: Node,
    source: Value,
    limits: ValidationLimits,
    dialect: Option<Dialect>,
}

/// A schema compiled into a reusable validator. Cheap to clone; `Send + Sync`.
#[derive(Clone)]
pub struct CompiledSchema {
    inner: Arc<Inner>,
}

impl fmt::Debug for CompiledSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompiledSchema")
            .field("source", &self.inner.source)
            .finish_non_exhaustive()
    }
}

/// Appends one JSON pointer segment (escaped per RFC 6901, cut at 64 bytes).
fn push_segment(out: &mut String, seg: &str) {
    out.push('/');
    let mut cut = seg;
    let long = seg.len() > 64;
    if long {
        let mut end = 64;
        while !seg.is_char_boundary(end) {
            end -= 1;
        }
        cut = &seg[..end];
    }
    for c in cut.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
    if long {
        out.push('…');
    }
}

fn child_ptr(ptr: &str, seg: &str) -> String {
    let mut out = String::from(ptr);
    push_segment(&mut out, seg);
    out
}

/// Whether a value is within the depth and node budgets, without tracking paths or allocating.
///
/// Recursive, but the depth is checked before descending and capped at
/// [`MAX_DEPTH_CEILING`](crate::json_text::MAX_DEPTH_CEILING), so the stack stays small.
fn measure_fits(value: &Value, max_depth: usize, max_nodes: usize) -> bool {
    fn walk(
        v: &Value,
        depth: usize,
        max_depth: usize,
        nodes: &mut usize,
        max_nodes: usize,
    ) -> bool {
        let n = match v {
            Value::Array(items) => items.len(),
            Value::Object(map) => map.len(),
            _ => return true,
        };
        if n == 0 {
            return true;
        }
        *nodes += n;
        if depth >= max_depth || *nodes > max_nodes {
            return false;
        }
        match v {
            Value::Array(items) => items
                .iter()
                .all(|c| walk(c, depth + 1, max_depth, nodes, max_nodes)),
            Value::Object(map) => map
                .values()
                .all(|c| walk(c, depth + 1, max_depth, nodes, max_nodes)),
            _ => true,
        }
    }
    let mut nodes = 1;
    nodes <= max_nodes
        && walk(
            value,
            0,
            max_depth.min(crate::json_text::MAX_DEPTH_CEILING),
            &mut nodes,
            max_nodes,
        )
}

/// Measures a value without recursion: `Err((too_deep, pointer))` when a budget is exceeded.
fn measure(value: &Value, max_depth: usize, max_nodes: usize) -> Result<(), (bool, String)> {
    enum Seg<'a> {
        Key(&'a str),
        Index(usize),
    }
    let mut stack: Vec<(&Value, usize, Option<Seg<'_>>)> = vec![(value, 0, None)];
    let mut path: Vec<Seg<'_>> = Vec::new();
    let mut nodes = 0usize;
    while let Some((v, depth, seg)) = stack.pop() {
        path.truncate(depth.saturating_sub(1));
        if let Some(seg) = seg {
            path.push(seg);
        }
        nodes += 1;
        let too_deep = depth > max_depth;
        if too_deep || nodes > max_nodes {
            let mut ptr = String::new();
            for seg in &path {
                match seg {
                    Seg::Key(k) => push_segment(&mut ptr, k),
                    Seg::Index(i) => push_segment(&mut ptr, &i.to_string()),
                }
            }
            return Err((too_deep, ptr));
        }
        match v {
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate().rev() {
                    stack.push((item, depth + 1, Some(Seg::Index(i))));
                }
            }
            Value::Object(map) => {
                for (k, item) in map.iter().rev() {
                    stack.push((item, depth + 1, Some(Seg::Key(k))));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

struct Compiler<'o> {
    options: &'o CompileOptions,
    /// The dialect the root declares (2020-12 when it declares none).
    dialect: Dialect,
}

/// Why a keyword outside the table is refused, in the schema's dialect: what it means there when
/// that differs from 2020-12, else the profile's plain reason.
fn unsupported_reason(dialect: Dialect, keyword: &str) -> &'static str {
    match (dialect, keyword) {
        (Dialect::Draft07, "additionalItems") => {
            "draft-07 additionalItems applies to the elements after an array items (2020-12's items after prefixItems), outside the profile"
        }
        (Dialect::Draft2019_09, "additionalItems") => {
            "2019-09 additionalItems applies to the elements after an array items (2020-12's items after prefixItems), outside the profile"
        }
        (Dialect::Draft07, "dependencies") => {
            "draft-07 dependencies (2020-12's dependentRequired and dependentSchemas) is outside the profile"
        }
        (Dialect::Draft2019_09, "dependencies") => {
            "dependencies is not a 2019-09 keyword (2019-09 split it into dependentRequired and dependentSchemas), outside the profile"
        }
        (Dialect::Draft07, "definitions") | (Dialect::Draft2019_09, "definitions") => {
            "definitions holds subschemas for $ref, and references are outside the profile"
        }
        (Dialect::Draft07, "$ref") => {
            "$ref is outside the profile (no reference is resolved; in draft-07 it also makes its sibling keywords ignored)"
        }
        (Dialect::Draft2019_09, "$recursiveRef") | (Dialect::Draft2019_09, "$recursiveAnchor") => {
            "2019-09 $recursiveRef and $recursiveAnchor are dynamic references (2020-12's $dynamicRef), outside the profile"
        }
        (Dialect::Draft07, "format") => {
            "draft-07 format may be an assertion or an annotation (validators differ), outside the profile"
        }
        (Dialect::Draft2019_09, "format") => {
            "2019-09 format is an annotation unless a validator asserts it (validators differ), outside the profile"
        }
        _ => "keyword outside purra.output-schema/v1",
    }
}

/// Why an array `items` is refused in `dialect`.
fn items_array_reason(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Draft07 => {
            "draft-07 items as an array is a tuple (2020-12's prefixItems), outside the profile"
        }
        Dialect::Draft2019_09 => {
            "2019-09 items as an array is a tuple (2020-12's prefixItems), outside the profile"
        }
        Dialect::Draft2020_12 => "a subschema must be an object",
    }
}

/// The dialect a root `$schema` declares, if the options allow it; the refusal otherwise.
fn root_dialect(v: &Value, options: &CompileOptions) -> Result<Dialect, SchemaError> {
    let refuse = |detail| {
        err(
            SchemaErrorKind::UnsupportedDialect,
            "/$schema".into(),
            detail,
        )
    };
    if !options.allow_root_dialect_2020_12 {
        return Err(refuse(
            "$schema is accepted only at the root of an MCP tool schema",
        ));
    }
    let earlier = options.allow_root_dialect_draft_07 || options.allow_root_dialect_2019_09;
    let Some(uri) = v.as_str() else {
        return Err(refuse("$schema must be a dialect URI (a string)"));
    };
    match Dialect::from_uri(uri) {
        Some(Dialect::Draft2020_12) => Ok(Dialect::Draft2020_12),
        Some(Dialect::Draft07) if options.allow_root_dialect_draft_07 => Ok(Dialect::Draft07),
        Some(Dialect::Draft2019_09) if options.allow_root_dialect_2019_09 => {
            Ok(Dialect::Draft2019_09)
        }
        Some(Dialect::Draft07) => Err(refuse(
            "draft-07 is not accepted here: only https://json-schema.org/draft/2020-12/schema is (the host did not opt in to earlier dialects)",
        )),
        Some(Dialect::Draft2019_09) => Err(refuse(
            "2019-09 is not accepted here: only https://json-schema.org/draft/2020-12/schema is (the host did not opt in to earlier dialects)",
        )),
        None if earlier => Err(refuse(
            "only the 2020-12, 2019-09 and draft-07 dialect URIs are accepted",
        )),
        None => Err(refuse(
            "only https://json-schema.org/draft/2020-12/schema is accepted",
        )),
    }
}

fn err(kind: SchemaErrorKind, pointer: String, detail: &'static str) -> SchemaError {
    SchemaError {
        kind,
        pointer,
        detail,
    }
}

fn non_negative_integer(v: &Value, ptr: &str, keyword: &str) -> Result<u64, SchemaError> {
    let bad = || {
        err(
            SchemaErrorKind::InvalidKeywordValue,
            child_ptr(ptr, keyword),
            "expected a non-negative integer",
        )
    };
    let n = v.as_number().ok_or_else(bad)?;
    match Num::of(n) {
        Num::Int(i) if i >= 0 => u64::try_from(i).map_err(|_| bad()),
        Num::Float(f) if f >= 0.0 && f.fract() == 0.0 && f < 1.8e19 => Ok(f as u64),
        _ => Err(bad()),
    }
}

impl Compiler<'_> {
    fn subschema(&self, v: &Value, ptr: String) -> Result<Node, SchemaError> {
        match v {
            Value::Object(map) => self.node(map, ptr, false),
            Value::Bool(_) => Err(err(
                SchemaErrorKind::InvalidKeywordValue,
                ptr,
                "boolean subschemas are outside the profile",
            )),
            _ => Err(err(
                SchemaErrorKind::InvalidKeywordValue,
                ptr,
                "a subschema must be an object",
            )),
        }
    }

    fn node(&self, map: &Map<String, Value>, ptr: String, root: bool) -> Result<Node, SchemaError> {
        let mut node = Node {
            ptr: ptr.clone().into_boxed_str(),
            types: None,
            properties: Vec::new(),
            required: Vec::new(),
            required_described: 0,
            additional: Additional::Any,
            min_length: None,
            max_length: None,
            pattern: None,
            enumeration: None,
            rare: None,
        };
        let invalid = |keyword: &str, detail: &'static str| {
            err(
                SchemaErrorKind::InvalidKeywordValue,
                child_ptr(&ptr, keyword),
                detail,
            )
        };
        let number = |v: &Value, keyword: &str| {
            v.as_number().map(Num::of).ok_or_else(|| {
                let exclusive = keyword == "exclusiveMinimum" || keyword == "exclusiveMaximum";
                if exclusive && v.is_boolean() {
                    invalid(
                        keyword,
                        "a boolean is draft-04's form; draft-06 and later take the bound itself (a number)",
                    )
                } else {
                    invalid(keyword, "expected a number")
                }
            })
        };
        for (keyword, v) in map {
            match keyword.as_str() {
                "type" => {
                    let mut mask = 0u8;
                    match v {
                        Value::String(s) => {
                            mask =
                                type_bit(s).ok_or_else(|| invalid(keyword, "unknown type name"))?
                        }
                        Value::Array(names) if !names.is_empty() => {
                            for name in names {
                                let bit = name
                                    .as_str()
                                    .and_then(type_bit)
                                    .ok_or_else(|| invalid(keyword, "unknown type name"))?;
                                if mask & bit != 0 {
                                    return Err(invalid(keyword, "type names must be distinct"));
                                }
                                mask |= bit;
                            }
                        }
                        _ => {
                            return Err(invalid(
                                keyword,
                                "expected a type name or a non-empty array of type names",
                            ))
                        }
                    }
                    node.types = Some(mask);
                }
                "properties" => {
                    let props = v
                        .as_object()
                        .ok_or_else(|| invalid(keyword, "expected an object of subschemas"))?;
                    let base = child_ptr(&ptr, keyword);
                    // Exactly as many slots as members: a compiled schema lives as long as its
                    // tool, and doubling growth would leave up to half of a large one unused.
                    node.properties.reserve_exact(props.len());
                    for (name, sub) in props {
                        let compiled = self.subschema(sub, child_ptr(&base, name))?;
                        node.properties.push((name.clone(), compiled, false));
                    }
                    node.properties.sort_by(|a, b| a.0.cmp(&b.0));
                }
                "required" => {
                    let names = v
                        .as_array()
                        .ok_or_else(|| invalid(keyword, "expected an array of strings"))?;
                    for name in names {
                        let name = name
                            .as_str()
                            .ok_or_else(|| invalid(keyword, "expected an array of strings"))?;
                        if node.required.iter().any(|r| r == name) {
                            return Err(invalid(keyword, "required names must be distinct"));
                        }
                        node.required.push(name.to_owned());
                    }
                }
                "additionalProperties" => {
                    node.additional = match v {
                        Value::Bool(true) => Additional::Any,
                        Value::Bool(false) => Additional::Forbidden,
                        other => Additional::Schema(Box::new(
                            self.subschema(other, child_ptr(&ptr, keyword))?,
                        )),
                    }
                }
                "items" => {
                    if v.is_array() {
                        return Err(invalid(keyword, items_array_reason(self.dialect)));
                    }
                    node.rare().items = Some(self.subschema(v, child_ptr(&ptr, keyword))?)
                }
                "minItems" => node.rare().min_items = Some(non_negative_integer(v, &ptr, keyword)?),
                "maxItems" => node.rare().max_items = Some(non_negative_integer(v, &ptr, keyword)?),
                "minLength" => node.min_length = Some(non_negative_integer(v, &ptr, keyword)?),
                "maxLength" => node.max_length = Some(non_negative_integer(v, &ptr, keyword)?),
                "pattern" => {
                    let text = v
                        .as_str()
                        .ok_or_else(|| invalid(keyword, "expected a string"))?;
                    let unsupported = |detail| {
                        err(
                            SchemaErrorKind::UnsupportedPattern,
                            child_ptr(&ptr, keyword),
                            detail,
                        )
                    };
                    if text.len() > self.options.limits.max_pattern_bytes {
                        return Err(unsupported("pattern exceeds the length budget"));
                    }
                    let translated = pattern::translate(text).map_err(unsupported)?;
                    let regex = regex::RegexBuilder::new(&translated)
                        .size_limit(self.options.limits.max_regex_size)
                        .dfa_size_limit(self.options.limits.max_regex_size)
                        .build()
                        .map_err(|e| match e {
                            regex::Error::CompiledTooBig(_) => {
                                unsupported("pattern exceeds the compiled size budget")
                            }
                            _ => unsupported("pattern does not compile"),
                        })?;
                    node.pattern = Some(regex);
                }
                "minimum" => node.rare().minimum = Some(number(v, keyword)?),
                "maximum" => node.rare().maximum = Some(number(v, keyword)?),
                "exclusiveMinimum" => node.rare().exclusive_minimum = Some(number(v, keyword)?),
                "exclusiveMaximum" => node.rare().exclusive_maximum = Some(number(v, keyword)?),
                "multipleOf" => {
                    let k = match number(v, keyword)? {
                        Num::Int(i) if i > 0 && i <= 1 << 53 => i as u64,
                        Num::Float(f) if f > 0.0 && f.fract() == 0.0 && f <= 9007199254740992.0 => {
                            f as u64
                        }
                        Num::Int(_) | Num::Float(_) => {
                            return Err(invalid(
                                keyword,
                                "multipleOf must be a positive integer up to 2^53",
                            ))
                        }
                    };
                    node.rare().multiple_of = Some(k);
                }
                "enum" => {
                    let values = v
                        .as_array()
                        .ok_or_else(|| invalid(keyword, "expected an array"))?;
                    node.enumeration = Some(values.clone());
                }
                "const" => node.rare().constant = Some(v.clone()),
                "anyOf" | "oneOf" => {
                    let subs = v.as_array().filter(|a| !a.is_empty()).ok_or_else(|| {
                        invalid(keyword, "expected a non-empty array of subschemas")
                    })?;
                    let base = child_ptr(&ptr, keyword);
                    let mut compiled = Vec::with_capacity(subs.len());
                    for (i, sub) in subs.iter().enumerate() {
                        compiled.push(self.subschema(sub, child_ptr(&base, &i.to_string()))?);
                    }
                    if keyword == "anyOf" {
                        node.rare().any_of = compiled;
                    } else {
                        node.rare().one_of = compiled;
                    }
                }
                "title" | "description" => {
                    if !v.is_string() {
                        return Err(invalid(keyword, "expected a string"));
                    }
                }
                "$schema" => {
                    if !(root && self.options.allow_root_dialect_2020_12) {
                        return Err(err(
                            SchemaErrorKind::UnsupportedDialect,
                            child_ptr(&ptr, keyword),
                            "$schema is accepted only at the root of an MCP tool schema",
                        ));
                    }
                    // Read (and refused, when it must be) before any other keyword.
                }
                _ => {
                    return Err(err(
                        SchemaErrorKind::UnsupportedKeyword,
                        child_ptr(&ptr, keyword),
                        unsupported_reason(self.dialect, keyword),
                    ))
                }
            }
        }
        for (name, _, required) in &mut node.properties {
            *required = node.required.contains(name);
        }
        node.required_described = node.properties.iter().filter(|p| p.2).count();
        Ok(node)
    }
}

/// A position in the instance, as a linked list on the stack (no allocation until an error).
#[derive(Clone, Copy)]
enum Path<'a> {
    Root,
    Key(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl Path<'_> {
    fn pointer(&self) -> String {
        let mut segs = Vec::new();
        let mut at = self;
        loop {
            match at {
                Path::Root => break,
                Path::Key(parent, k) => {
                    segs.push((*k).to_owned());
                    at = parent;
                }
                Path::Index(parent, i) => {
                    segs.push(i.to_string());
                    at = parent;
                }
            }
        }
        let mut out = String::new();
        for seg in segs.iter().rev() {
            push_segment(&mut out, seg);
        }
        out
    }
}

struct Run {
    steps: usize,
    max_steps: usize,
    detailed: bool,
}

/// An internal failure, kept small so the hot path moves 16 bytes instead of a full error.
enum Fail {
    /// A verdict of invalid; described only in detailed mode.
    Invalid(Option<Box<ValidationError>>),
    /// A budget error (always described).
    Budget(Box<ValidationError>),
}

impl Fail {
    fn into_error(self) -> ValidationError {
        match self {
            Fail::Invalid(Some(e)) | Fail::Budget(e) => *e,
            Fail::Invalid(None) => ValidationError {
                kind: ValidationErrorKind::Invalid,
                instance_pointer: String::new(),
                schema_pointer: String::new(),
                detail: String::new(),
            },
        }
    }
}

/// A verdict of invalid. Without `detailed` (the boolean fast path) nothing is allocated: the caller
/// only needs to know that the instance failed, and [`CompiledSchema::validate`] re-runs in detailed
/// mode to describe the first failure.
fn fail(
    detailed: bool,
    node: &Node,
    keyword: &str,
    path: &Path<'_>,
    detail: impl FnOnce() -> String,
) -> Fail {
    if !detailed {
        return Fail::Invalid(None);
    }
    Fail::Invalid(Some(Box::new(ValidationError {
        kind: ValidationErrorKind::Invalid,
        instance_pointer: path.pointer(),
        schema_pointer: child_ptr(&node.ptr, keyword),
        detail: detail(),
    })))
}

impl Run {
    #[inline]
    fn step(&mut self, node: &Node, path: &Path<'_>) -> Result<(), Fail> {
        self.steps += 1;
        if self.steps > self.max_steps {
            return Err(self.out_of_steps(node, path));
        }
        Ok(())
    }

    #[cold]
    fn out_of_steps(&self, node: &Node, path: &Path<'_>) -> Fail {
        Fail::Budget(Box::new(ValidationError {
            kind: ValidationErrorKind::TooManySteps,
            instance_pointer: path.pointer(),
            schema_pointer: node.ptr.to_string(),
            detail: format!("validation exceeded {} steps", self.max_steps),
        }))
    }

    fn check(&mut self, node: &Node, v: &Value, path: &Path<'_>) -> Result<(), Fail> {
        self.step(node, path)?;
        if let Some(mask) = node.types {
            if !type_matches(mask, v) {
                return Err(fail(self.detailed, node, "type", path, || {
                    format!("expected {}, found {}", mask_names(mask), type_name(v))
                }));
            }
        }
        let rare = node.rare.as_deref();
        if let Some(c) = rare.and_then(|r| r.constant.as_ref()) {
            if !json_equal(c, v) {
                return Err(fail(self.detailed, node, "const", path, || {
                    "value differs from const".into()
                }));
            }
        }
        if let Some(values) = &node.enumeration {
            if !values.iter().any(|e| json_equal(e, v)) {
                return Err(fail(self.detailed, node, "enum", path, || {
                    format!("value is not one of the {} allowed values", values.len())
                }));
            }
        }
        match v {
            Value::Object(map) => self.check_object(node, map, path)?,
            Value::Array(items) => {
                let len = items.len() as u64;
                if let Some(min) = rare.and_then(|r| r.min_items) {
                    if len < min {
                        return Err(fail(self.detailed, node, "minItems", path, || {
                            format!("fewer than {min} items")
                        }));
                    }
                }
                if let Some(max) = rare.and_then(|r| r.max_items) {
                    if len > max {
                        return Err(fail(self.detailed, node, "maxItems", path, || {
                            format!("more than {max} items")
                        }));
                    }
                }
                if let Some(item_schema) = rare.and_then(|r| r.items.as_ref()) {
                    for (i, item) in items.iter().enumerate() {
                        self.check(item_schema, item, &Path::Index(path, i))?;
                    }
                }
            }
            Value::String(s) => {
                // Code points are at most the bytes and at least a quarter of them, so most strings
                // need no counting.
                let bytes = s.len() as u64;
                let mut count: Option<u64> = None;
                let mut chars = || *count.get_or_insert_with(|| s.chars().count() as u64);
                if let Some(min) = node.min_length {
                    if bytes < min || (bytes / 4 < min && chars() < min) {
                        return Err(fail(self.detailed, node, "minLength", path, || {
                            format!("shorter than {min} characters")
                        }));
                    }
                }
                if let Some(max) = node.max_length {
                    if bytes > max && chars() > max {
                        return Err(fail(self.detailed, node, "maxLength", path, || {
                            format!("longer than {max} characters")
                        }));
                    }
                }
                if let Some(re) = &node.pattern {
                    if !re.is_match(s) {
                        return Err(fail(self.detailed, node, "pattern", path, || {
                            "does not match the pattern".into()
                        }));
                    }
                }
            }
            Value::Number(n) => {
                let x = Num::of(n);
                let bound = |keyword: &'static str,
                             limit: Option<Num>,
                             ok: fn(Ordering) -> bool,
                             what: &str| {
                    match limit {
                        Some(l) if !ok(cmp_num(x, l)) => {
                            Err(fail(self.detailed, node, keyword, path, || {
                                format!("must be {what} the {keyword}")
                            }))
                        }
                        _ => Ok(()),
                    }
                };
                if let Some(rare) = rare {
                    bound("minimum", rare.minimum, |o| o != Ordering::Less, "at least")?;
                    bound(
                        "maximum",
                        rare.maximum,
                        |o| o != Ordering::Greater,
                        "at most",
                    )?;
                    bound(
                        "exclusiveMinimum",
                        rare.exclusive_minimum,
                        |o| o == Ordering::Greater,
                        "above",
                    )?;
                    bound(
                        "exclusiveMaximum",
                        rare.exclusive_maximum,
                        |o| o == Ordering::Less,
                        "below",
                    )?;
                    if let Some(k) = rare.multiple_of {
                        if !is_multiple_of(x, k) {
                            return Err(fail(self.detailed, node, "multipleOf", path, || {
                                format!("not a multiple of {k}")
                            }));
                        }
                    }
                }
            }
            Value::Null | Value::Bool(_) => {}
        }
        let (any_of, one_of) = rare.map_or((&[][..], &[][..]), |r| (&r.any_of[..], &r.one_of[..]));
        if !any_of.is_empty() {
            let mut matched = false;
            for sub in any_of {
                if self.branch(sub, v, path)? {
                    matched = true;
                    break;
                }
            }
            if !matched {
                return Err(fail(self.detailed, node, "anyOf", path, || {
                    format!("matches none of the {} subschemas", any_of.len())
                }));
            }
        }
        if !one_of.is_empty() {
            let mut matched = Vec::new();
            for (i, sub) in one_of.iter().enumerate() {
                if self.branch(sub, v, path)? {
                    matched.push(i);
                }
            }
            if matched.len() != 1 {
                let detail = if matched.is_empty() {
                    format!("matches none of the {} subschemas", one_of.len())
                } else {
                    format!("matches {} subschemas, not exactly one", matched.len())
                };
                return Err(fail(self.detailed, node, "oneOf", path, || detail));
            }
        }
        Ok(())
    }

    /// Applies an `anyOf`/`oneOf` branch: `Ok(false)` for a verdict of invalid, `Err` for a budget error.
    fn branch(&mut self, sub: &Node, v: &Value, path: &Path<'_>) -> Result<bool, Fail> {
        match self.check(sub, v, path) {
            Ok(()) => Ok(true),
            Err(Fail::Budget(e)) => Err(Fail::Budget(e)),
            Err(Fail::Invalid(_)) => Ok(false),
        }
    }

    fn check_object(
        &mut self,
        node: &Node,
        map: &Map<String, Value>,
        path: &Path<'_>,
    ) -> Result<(), Fail> {
        // One pass over the instance's members when they must all be looked at anyway (or are few);
        // otherwise look up only the described members.
        if matches!(node.additional, Additional::Any) && map.len() > 16 {
            self.check_required(node, map, path)?;
            for (name, sub, _) in &node.properties {
                if let Some(value) = map.get(name) {
                    self.check(sub, value, &Path::Key(path, name))?;
                }
            }
            return Ok(());
        }
        let mut required_seen = 0;
        for (key, value) in map {
            self.step(node, path)?;
            let here = Path::Key(path, key);
            match node.property(key) {
                Some((sub, required)) => {
                    required_seen += usize::from(required);
                    self.check(sub, value, &here)?
                }
                None => match &node.additional {
                    Additional::Any => {}
                    Additional::Forbidden => {
                        return Err(fail(
                            self.detailed,
                            node,
                            "additionalProperties",
                            &here,
                            || "property is not allowed".into(),
                        ))
                    }
                    Additional::Schema(sub) => self.check(sub, value, &here)?,
                },
            }
        }
        if required_seen < node.required_described || node.required.len() > node.required_described
        {
            self.check_required(node, map, path)?;
        }
        Ok(())
    }

    fn check_required(
        &mut self,
        node: &Node,
        map: &Map<String, Value>,
        path: &Path<'_>,
    ) -> Result<(), Fail> {
        for name in &node.required {
            if !map.contains_key(name) {
                let mut shown = String::new();
                push_segment(&mut shown, name);
                return Err(fail(self.detailed, node, "required", path, || {
                    format!("missing required property {:?}", &shown[1..])
                }));
            }
        }
        Ok(())
    }
}

impl CompiledSchema {
    /// Compiles a schema with default options (no `$schema` accepted).
    pub fn compile(schema: &Value) -> Result<CompiledSchema, SchemaError> {
        CompiledSchema::compile_with(schema, &CompileOptions::default())
    }

    /// Compiles an MCP tool schema: like [`CompiledSchema::compile`], but a root `$schema` equal to
    /// [`DIALECT_2020_12`] is accepted and retained in [`CompiledSchema::source`].
    pub fn compile_mcp(schema: &Value) -> Result<CompiledSchema, SchemaError> {
        CompiledSchema::compile_with(
            schema,
            &CompileOptions {
                allow_root_dialect_2020_12: true,
                ..CompileOptions::default()
            },
        )
    }

    /// Compiles a schema given as text, decoding it within the schema budgets first (so a 10 000-deep
    /// document is refused by depth before any value exists).
    pub fn compile_text(
        text: &[u8],
        options: &CompileOptions,
    ) -> Result<CompiledSchema, SchemaError> {
        let limits = JsonLimits {
            max_bytes: options.limits.max_nodes.saturating_mul(64),
            max_depth: options.limits.max_depth,
            max_nodes: options.limits.max_nodes,
        };
        let value = parse_json(text, &limits).map_err(|e| {
            let kind = match e.kind {
                JsonErrorKind::TooDeep => SchemaErrorKind::TooDeep,
                JsonErrorKind::TooManyNodes | JsonErrorKind::TooLarge => {
                    SchemaErrorKind::TooManyNodes
                }
                _ => SchemaErrorKind::InvalidKeywordValue,
            };
            err(
                kind,
                String::new(),
                "the schema text was refused before decoding finished",
            )
        })?;
        CompiledSchema::compile_owned_with(value, options)
    }

    /// Like [`CompiledSchema::compile_mcp`], keeping `schema` itself as the
    /// [`CompiledSchema::source`] instead of a copy of it.
    pub fn compile_mcp_owned(schema: Value) -> Result<CompiledSchema, SchemaError> {
        CompiledSchema::compile_owned_with(
            schema,
            &CompileOptions {
                allow_root_dialect_2020_12: true,
                ..CompileOptions::default()
            },
        )
    }

    /// Compiles a schema with explicit options.
    pub fn compile_with(
        schema: &Value,
        options: &CompileOptions,
    ) -> Result<CompiledSchema, SchemaError> {
        let (root, dialect) = CompiledSchema::compile_root(schema, options)?;
        Ok(CompiledSchema::assemble(
            root,
            schema.clone(),
            options,
            dialect,
        ))
    }

    /// Like [`CompiledSchema::compile_with`], keeping `schema` itself as the
    /// [`CompiledSchema::source`] instead of a copy of it.
    pub fn compile_owned_with(
        schema: Value,
        options: &CompileOptions,
    ) -> Result<CompiledSchema, SchemaError> {
        let (root, dialect) = CompiledSchema::compile_root(&schema, options)?;
        Ok(CompiledSchema::assemble(root, schema, options, dialect))
    }

    /// Like [`CompiledSchema::compile_owned_with`], handing the schema back with the error, so a
    /// caller can show what was refused without keeping a copy of every schema it compiles.
    pub fn try_compile_owned_with(
        schema: Value,
        options: &CompileOptions,
    ) -> Result<CompiledSchema, (SchemaError, Value)> {
        match CompiledSchema::compile_root(&schema, options) {
            Ok((root, dialect)) => Ok(CompiledSchema::assemble(root, schema, options, dialect)),
            Err(e) => Err((e, schema)),
        }
    }

    fn assemble(
        root: Node,
        source: Value,
        options: &CompileOptions,
        dialect: Option<Dialect>,
    ) -> CompiledSchema {
        CompiledSchema {
            inner: Arc::new(Inner {
                root,
                source,
                limits: options.validation,
                dialect,
            }),
        }
    }

    /// Checks the budgets and compiles the root: the tree, and the dialect the root declares.
    fn compile_root(
        schema: &Value,
        options: &CompileOptions,
    ) -> Result<(Node, Option<Dialect>), SchemaError> {
        let max_depth = options
            .limits
            .max_depth
            .min(crate::json_text::MAX_DEPTH_CEILING);
        measure(schema, max_depth, options.limits.max_nodes).map_err(|(deep, ptr)| {
            if deep {
                err(
                    SchemaErrorKind::TooDeep,
                    ptr,
                    "the schema nests deeper than its budget",
                )
            } else {
                err(
                    SchemaErrorKind::TooManyNodes,
                    ptr,
                    "the schema has more values than its budget",
                )
            }
        })?;
        let map = schema.as_object().ok_or_else(|| {
            err(
                SchemaErrorKind::RootNotObject,
                String::new(),
                "the root must be a JSON object",
            )
        })?;
        if map.get("type").and_then(Value::as_str) != Some("object") {
            return Err(err(
                SchemaErrorKind::RootNotObject,
                "/type".into(),
                "the root must declare \"type\": \"object\"",
            ));
        }
        // The dialect decides what the other keywords mean, so it is read first.
        let dialect = map
            .get("$schema")
            .map(|v| root_dialect(v, options))
            .transpose()?;
        let compiler = Compiler {
            options,
            dialect: dialect.unwrap_or(Dialect::Draft2020_12),
        };
        let root = compiler.node(map, String::new(), true)?;
        Ok((root, dialect))
    }

    /// The schema document as given (including a retained root `$schema`).
    pub fn source(&self) -> &Value {
        &self.inner.source
    }

    /// Whether the root declared the 2020-12 dialect (only possible with
    /// `allow_root_dialect_2020_12`).
    pub fn declares_dialect_2020_12(&self) -> bool {
        self.inner.dialect == Some(Dialect::Draft2020_12)
    }

    /// The dialect the root's `$schema` declared, if it declared one (a schema without one is
    /// read as 2020-12).
    pub fn dialect(&self) -> Option<Dialect> {
        self.inner.dialect
    }

    /// The budgets applied to each instance.
    pub fn limits(&self) -> ValidationLimits {
        self.inner.limits
    }

    /// Validates an instance: measures its depth and size, then applies the schema. On failure the
    /// error names the first failing keyword, its instance pointer and its schema pointer.
    pub fn validate(&self, instance: &Value) -> Result<(), ValidationError> {
        match self.run(instance, false) {
            Ok(()) => Ok(()),
            Err(e) if e.kind.is_budget() => Err(e),
            // The fast pass allocates nothing; describe the failure with a second, detailed pass.
            Err(_) => self.run(instance, true),
        }
    }

    fn run(&self, instance: &Value, detailed: bool) -> Result<(), ValidationError> {
        let limits = &self.inner.limits;
        if !measure_fits(instance, limits.max_depth, limits.max_nodes) {
            let max_depth = limits.max_depth.min(crate::json_text::MAX_DEPTH_CEILING);
            let (deep, ptr) = measure(instance, max_depth, limits.max_nodes)
                .err()
                .unwrap_or((false, String::new()));
            return Err(ValidationError {
                kind: if deep {
                    ValidationErrorKind::TooDeep
                } else {
                    ValidationErrorKind::TooManyNodes
                },
                instance_pointer: ptr,
                schema_pointer: String::new(),
                detail: if deep {
                    format!("instance nests deeper than {}", limits.max_depth)
                } else {
                    format!("instance has more than {} values", limits.max_nodes)
                },
            });
        }
        let mut run = Run {
            steps: 0,
            max_steps: limits.max_steps,
            detailed,
        };
        run.check(&self.inner.root, instance, &Path::Root)
            .map_err(Fail::into_error)
    }

    /// Decodes an instance from text within the budgets (I-JSON, depth checked before descending),
    /// validates it, and returns it.
    pub fn validate_text(&self, text: &[u8]) -> Result<Value, ValidationError> {
        let limits = &self.inner.limits;
        let json_limits = JsonLimits {
            max_bytes: limits.max_text_bytes,
            max_depth: limits.max_depth,
            max_nodes: limits.max_nodes,
        };
        let value = parse_json(text, &json_limits).map_err(|e| ValidationError {
            kind: match e.kind {
                JsonErrorKind::TooDeep => ValidationErrorKind::TooDeep,
                JsonErrorKind::TooManyNodes => ValidationErrorKind::TooManyNodes,
                other => ValidationErrorKind::Text(other),
            },
            instance_pointer: String::new(),
            schema_pointer: String::new(),
            detail: e.to_string(),
        })?;
        self.validate(&value)?;
        Ok(value)
    }

    /// The verdict alone: `Ok(true)` or `Ok(false)`, or `Err` when a budget stopped validation
    /// before there was one (so a caller can decide another way). Allocates nothing on failure.
    pub fn verdict(&self, instance: &Value) -> Result<bool, ValidationError> {
        match self.run(instance, false) {
            Ok(()) => Ok(true),
            Err(e) if e.kind.is_budget() => Err(e),
            Err(_) => Ok(false),
        }
    }

    /// Whether the instance is valid (budget errors count as invalid). Allocates nothing on failure.
    pub fn is_valid(&self, instance: &Value) -> bool {
        self.run(instance, false).is_ok()
    }
}
