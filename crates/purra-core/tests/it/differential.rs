//! Property tests: inside the profile the verdict equals the `jsonschema` crate's (draft 2020-12,
//! and draft-07 and 2019-09 for the same schemas declaring those dialects); outside the profile
//! compilation always fails, at the pointer of the offending keyword.

use proptest::prelude::*;
use proptest::sample::Index;
use purra_core::schema::Dialect;
use purra_core::{CompileOptions, CompiledSchema, SchemaErrorKind};
use serde_json::{json, Map, Value};

const NAMES: &[&str] = &["a", "b", "c"];
const TYPES: &[&str] = &[
    "null", "boolean", "object", "array", "number", "string", "integer",
];
/// ECMA-262 patterns whose meaning the `jsonschema` crate and this profile share on the generated strings
/// (which never contain line terminators).
const PATTERNS: &[&str] = &[
    "^a",
    "b$",
    "^[a-c]*$",
    "\\d",
    "^\\w*$",
    "a|é",
    "^(ab)*$",
    "[^a]",
    "😀",
    "^.{2}$",
    "^[\\d_]+$",
    "\\s",
];

fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => (-1i64..3).prop_map(|n| json!(n)),
        2 => prop::sample::select(vec![0.5f64, 1.0, 2.0, 2.5, 1e20, -0.0]).prop_map(|f| json!(f)),
    ]
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::Bool),
        4 => number(),
        3 => prop::sample::select(vec!["", "a", "ab", "abc", "é", "😀a", "1", "a_b", " ", "ba", "12", "aé😀"])
            .prop_map(|s| json!(s)),
    ]
}

fn instance() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(3, 20, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(
                (prop::sample::select(vec!["a", "b", "c", "d"]), inner),
                0..4
            )
            .prop_map(|kv| {
                Value::Object(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
            }),
        ]
    })
}

fn type_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        prop::sample::select(TYPES).prop_map(|t| json!(t)),
        prop::sample::subsequence(TYPES, 1..4).prop_map(|ts| json!(ts)),
    ]
}

fn leaf_keyword() -> impl Strategy<Value = (String, Value)> {
    let k = |name: &'static str| name.to_owned();
    prop_oneof![
        type_value().prop_map(move |v| (k("type"), v)),
        (0u64..4).prop_map(move |n| (k("minLength"), json!(n))),
        (0u64..4).prop_map(move |n| (k("maxLength"), json!(n))),
        (0u64..3).prop_map(move |n| (k("minItems"), json!(n))),
        (0u64..3).prop_map(move |n| (k("maxItems"), json!(n))),
        prop::sample::select(PATTERNS).prop_map(move |p| (k("pattern"), json!(p))),
        number().prop_map(move |n| (k("minimum"), n)),
        number().prop_map(move |n| (k("maximum"), n)),
        number().prop_map(move |n| (k("exclusiveMinimum"), n)),
        number().prop_map(move |n| (k("exclusiveMaximum"), n)),
        prop::sample::select(vec![1u64, 2, 3]).prop_map(move |n| (k("multipleOf"), json!(n))),
        prop::collection::vec(scalar(), 0..3).prop_map(move |v| (k("enum"), Value::Array(v))),
        instance().prop_map(move |v| (k("const"), v)),
        Just((k("description"), json!("d"))),
        Just((k("title"), json!("t"))),
        prop::sample::subsequence(NAMES, 0..3).prop_map(move |r| (k("required"), json!(r))),
        any::<bool>().prop_map(move |b| (k("additionalProperties"), json!(b))),
    ]
}

fn any_schema() -> impl Strategy<Value = Value> {
    let leaf = prop::collection::vec(leaf_keyword(), 0..3)
        .prop_map(|kws| Value::Object(kws.into_iter().collect::<Map<String, Value>>()));
    leaf.prop_recursive(3, 24, 4, |inner| {
        let k = |name: &'static str| name.to_owned();
        let keyword = prop_oneof![
            3 => leaf_keyword(),
            2 => prop::collection::vec((prop::sample::select(NAMES), inner.clone()), 1..3).prop_map(move |ps| {
                (k("properties"), Value::Object(ps.into_iter().map(|(n, s)| (n.to_owned(), s)).collect()))
            }),
            1 => inner.clone().prop_map(move |s| (k("items"), s)),
            1 => inner.clone().prop_map(move |s| (k("additionalProperties"), s)),
            1 => prop::collection::vec(inner.clone(), 1..3).prop_map(move |v| (k("anyOf"), Value::Array(v))),
            1 => prop::collection::vec(inner, 1..3).prop_map(move |v| (k("oneOf"), Value::Array(v))),
        ];
        prop::collection::vec(keyword, 0..4)
            .prop_map(|kws| Value::Object(kws.into_iter().collect::<Map<String, Value>>()))
    })
}

/// A root object schema that always describes some members, so that the inner keywords meet values.
fn root_schema() -> impl Strategy<Value = Value> {
    (
        any_schema(),
        prop::collection::vec((prop::sample::select(NAMES), any_schema()), 1..4),
    )
        .prop_map(|(mut s, props)| {
            let map = s.as_object_mut().unwrap();
            map.insert("type".into(), json!("object"));
            let props: Map<String, Value> =
                props.into_iter().map(|(n, s)| (n.to_owned(), s)).collect();
            map.insert("properties".into(), Value::Object(props));
            s
        })
}

fn root_instance() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => prop::collection::vec((prop::sample::select(vec!["a", "b", "c", "d"]), instance()), 0..4)
            .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
        1 => instance(),
    ]
}

/// Pointers of every subschema in a generated schema.
fn subschema_pointers(schema: &Value, at: String, out: &mut Vec<String>) {
    out.push(at.clone());
    let Some(map) = schema.as_object() else {
        return;
    };
    if let Some(Value::Object(props)) = map.get("properties") {
        for (name, sub) in props {
            subschema_pointers(sub, format!("{at}/properties/{name}"), out);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(sub @ Value::Object(_)) = map.get(key) {
            subschema_pointers(sub, format!("{at}/{key}"), out);
        }
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(subs)) = map.get(key) {
            for (i, sub) in subs.iter().enumerate() {
                subschema_pointers(sub, format!("{at}/{key}/{i}"), out);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn verdicts_match_jsonschema_2020_12(schema in root_schema(), instances in prop::collection::vec(root_instance(), 1..8)) {
        let ours = CompiledSchema::compile(&schema).map_err(|e| TestCaseError::fail(format!("{e} in {schema}")))?;
        let theirs = jsonschema::draft202012::new(&schema).map_err(|e| TestCaseError::fail(format!("{e} in {schema}")))?;
        for instance in &instances {
            prop_assert_eq!(ours.is_valid(instance), theirs.is_valid(instance), "schema {} instance {}", schema, instance);
        }
    }

    #[test]
    fn schemas_outside_the_profile_never_compile(
        schema in root_schema(),
        at in any::<Index>(),
        keyword in prop::sample::select(vec![
            "default", "examples", "x-vendor", "$ref", "$defs", "$id", "$comment", "format", "uniqueItems",
            "allOf", "not", "if", "then", "prefixItems", "patternProperties", "minProperties", "maxProperties",
            "contains", "dependentRequired", "propertyNames", "unevaluatedProperties", "deprecated", "readOnly",
            "writeOnly", "contentMediaType", "$anchor", "$dynamicRef", "$vocabulary", "$schema",
        ]),
    ) {
        let mut pointers = Vec::new();
        subschema_pointers(&schema, String::new(), &mut pointers);
        let target = at.get(&pointers).clone();
        let mut bad = schema.clone();
        bad.pointer_mut(&target).unwrap().as_object_mut().unwrap().insert(keyword.to_owned(), json!({}));
        let e = CompiledSchema::compile(&bad).unwrap_err();
        let expected_kind = if keyword == "$schema" { SchemaErrorKind::UnsupportedDialect } else { SchemaErrorKind::UnsupportedKeyword };
        prop_assert_eq!(e.kind, expected_kind);
        prop_assert_eq!(e.pointer, format!("{target}/{keyword}"));
    }
}

/// The draft-07 and 2019-09 declarations the profile accepts, each spelling.
const EARLIER: &[&str] = &[
    "http://json-schema.org/draft-07/schema#",
    "http://json-schema.org/draft-07/schema",
    "https://json-schema.org/draft/2019-09/schema",
    "https://json-schema.org/draft/2019-09/schema#",
];

fn with_earlier_dialects() -> CompileOptions {
    CompileOptions {
        allow_root_dialect_2020_12: true,
        allow_root_dialect_2019_09: true,
        allow_root_dialect_draft_07: true,
        ..CompileOptions::default()
    }
}

fn declaring(schema: &Value, uri: &str) -> Value {
    let mut declared = schema.clone();
    declared
        .as_object_mut()
        .unwrap()
        .insert("$schema".into(), json!(uri));
    declared
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn verdicts_match_jsonschema_in_draft_07_and_2019_09(
        schema in root_schema(),
        uri in prop::sample::select(EARLIER),
        instances in prop::collection::vec(root_instance(), 1..8),
    ) {
        let declared = declaring(&schema, uri);
        let ours = CompiledSchema::compile_with(&declared, &with_earlier_dialects())
            .map_err(|e| TestCaseError::fail(format!("{e} in {declared}")))?;
        let plain = CompiledSchema::compile(&schema).map_err(|e| TestCaseError::fail(format!("{e} in {schema}")))?;
        let dialect = Dialect::from_uri(uri).unwrap();
        prop_assert_eq!(ours.dialect(), Some(dialect));
        prop_assert_eq!(ours.source(), &declared);
        let theirs = match dialect {
            Dialect::Draft07 => jsonschema::draft7::new(&declared),
            _ => jsonschema::draft201909::new(&declared),
        }
        .map_err(|e| TestCaseError::fail(format!("{e} in {declared}")))?;
        for instance in &instances {
            let verdict = ours.is_valid(instance);
            prop_assert_eq!(verdict, theirs.is_valid(instance), "schema {} instance {}", declared, instance);
            // The same meaning as the undeclared (2020-12) schema.
            prop_assert_eq!(verdict, plain.is_valid(instance), "schema {} instance {}", declared, instance);
        }
    }

    #[test]
    fn what_an_earlier_dialect_means_differently_never_compiles(
        schema in root_schema(),
        uri in prop::sample::select(EARLIER),
        at in any::<Index>(),
        keyword in prop::sample::select(vec![
            "items", "additionalItems", "dependencies", "definitions", "$ref", "$recursiveRef",
            "$recursiveAnchor", "format", "exclusiveMinimum", "exclusiveMaximum",
        ]),
    ) {
        let mut pointers = Vec::new();
        subschema_pointers(&schema, String::new(), &mut pointers);
        let target = at.get(&pointers).clone();
        let mut bad = declaring(&schema, uri);
        let value = match keyword {
            "items" => json!([{}]),
            "exclusiveMinimum" | "exclusiveMaximum" => json!(true),
            _ => json!({}),
        };
        bad.pointer_mut(&target).unwrap().as_object_mut().unwrap().insert(keyword.to_owned(), value);
        let e = CompiledSchema::compile_with(&bad, &with_earlier_dialects()).unwrap_err();
        let expected_kind = match keyword {
            "items" | "exclusiveMinimum" | "exclusiveMaximum" => SchemaErrorKind::InvalidKeywordValue,
            _ => SchemaErrorKind::UnsupportedKeyword,
        };
        prop_assert_eq!(e.kind, expected_kind);
        prop_assert_eq!(e.pointer, format!("{target}/{keyword}"));
    }
}
