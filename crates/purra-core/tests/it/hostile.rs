//! Hostile inputs end in a budget error or a correct verdict, never a stack overflow.
//!
//! The 10 000-deep values are built and torn down iteratively here, because dropping a deep
//! `serde_json::Value` recurses; the library itself never recurses on instance depth.

use purra_core::{
    json_identity, CompileOptions, CompiledSchema, IdentityError, SchemaErrorKind, SchemaLimits,
    ValidationErrorKind, ValidationLimits,
};
use serde_json::{json, Map, Value};

const DEEP: usize = 10_000;

fn deep_array(depth: usize) -> Value {
    let mut v = json!(1);
    for _ in 0..depth {
        v = Value::Array(vec![v]);
    }
    v
}

fn deep_schema(depth: usize) -> Value {
    let mut v = json!({"type": "object"});
    for level in 0..depth {
        let mut props = Map::new();
        props.insert("a".into(), v);
        let mut node = Map::new();
        // Only the root says its type: with one member per level the value found past the
        // depth budget is the same whatever order serde_json keeps members in (sorted, or as
        // inserted with its `preserve_order`, on in a workspace build with purra-gateway).
        if level + 1 == depth {
            node.insert("type".into(), json!("object"));
        }
        node.insert("properties".into(), Value::Object(props));
        v = Value::Object(node);
    }
    v
}

/// Drops a deep value without recursion.
fn dismantle(v: Value) {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
}

#[test]
fn ten_thousand_deep_instance_is_refused_by_depth() {
    let schema =
        CompiledSchema::compile(&json!({"type": "object", "properties": {"a": {"type": "array"}}}))
            .unwrap();
    // Not `json!({"a": deep})`: the macro serializes an expression recursively.
    let mut map = Map::new();
    map.insert("a".into(), deep_array(DEEP));
    let instance = Value::Object(map);
    let e = schema.validate(&instance).unwrap_err();
    assert_eq!(e.kind, ValidationErrorKind::TooDeep);
    // Depth 65 is the first level over the default budget of 64: "/a" then 64 array levels.
    assert_eq!(e.instance_pointer, format!("/a{}", "/0".repeat(64)));
    dismantle(instance);
    let text = format!("{{\"a\":{}1{}}}", "[".repeat(DEEP), "]".repeat(DEEP));
    assert_eq!(
        schema.validate_text(text.as_bytes()).unwrap_err().kind,
        ValidationErrorKind::TooDeep
    );
    // Identity of a deep value is refused by depth too.
    let deep = deep_array(DEEP);
    assert_eq!(json_identity(&deep), Err(IdentityError::TooDeep));
    dismantle(deep);
}

#[test]
fn ten_thousand_deep_schema_is_refused_by_depth() {
    let schema = deep_schema(DEEP);
    let e = CompiledSchema::compile(&schema).unwrap_err();
    // Dismantled before anything is asserted: a failed assertion would drop it recursively.
    dismantle(schema);
    assert_eq!(e.kind, SchemaErrorKind::TooDeep, "{e}");
    // Each level is two JSON levels ("properties", "a"); the first value past depth 64 is reported.
    assert_eq!(e.pointer, "/properties/a".repeat(32) + "/properties");
    let text =
        "{\"type\":\"object\",\"properties\":{\"a\":".repeat(DEEP) + "{}" + &"}}".repeat(DEEP);
    let e = CompiledSchema::compile_text(text.as_bytes(), &CompileOptions::default()).unwrap_err();
    assert_eq!(e.kind, SchemaErrorKind::TooDeep);
}

#[test]
fn one_mebibyte_strings_get_a_correct_verdict() {
    let schema = CompiledSchema::compile(&json!({
        "type": "object",
        "properties": {"s": {"type": "string", "minLength": 1048576, "maxLength": 1048576, "pattern": "^(a+)+$"}}
    }))
    .unwrap();
    let mut s = "a".repeat(1 << 20);
    assert_eq!(schema.validate(&json!({ "s": s.clone() })), Ok(()));
    s.pop();
    s.push('b');
    let e = schema.validate(&json!({ "s": s })).unwrap_err();
    assert_eq!(
        (e.kind, e.schema_pointer.as_str()),
        (ValidationErrorKind::Invalid, "/properties/s/pattern")
    );
    let e = schema
        .validate(&json!({ "s": "é".repeat(1 << 19) }))
        .unwrap_err();
    assert_eq!(e.schema_pointer, "/properties/s/minLength");
}

#[test]
fn hundred_thousand_properties_hit_the_node_budget_or_validate_correctly() {
    let mut map = Map::new();
    for i in 0..100_000 {
        map.insert(format!("k{i}"), json!(i));
    }
    let instance = Value::Object(map);
    let schema_json =
        json!({"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}});
    let schema = CompiledSchema::compile(&schema_json).unwrap();
    let e = schema.validate(&instance).unwrap_err();
    assert_eq!(e.kind, ValidationErrorKind::TooManyNodes);
    let roomy = CompiledSchema::compile_with(
        &schema_json,
        &CompileOptions {
            validation: ValidationLimits {
                max_nodes: 200_000,
                ..ValidationLimits::default()
            },
            ..CompileOptions::default()
        },
    )
    .unwrap();
    assert_eq!(roomy.validate(&instance), Ok(()));
    let tight = CompiledSchema::compile_with(
        &schema_json,
        &CompileOptions {
            validation: ValidationLimits {
                max_nodes: 200_000,
                max_steps: 1000,
                ..ValidationLimits::default()
            },
            ..CompileOptions::default()
        },
    )
    .unwrap();
    assert_eq!(
        tight.validate(&instance).unwrap_err().kind,
        ValidationErrorKind::TooManySteps
    );
}

#[test]
fn catastrophic_patterns_run_in_linear_time_or_are_refused() {
    let hostile = "a".repeat(100_000) + "!";
    for pattern in [
        "(a+)+$",
        "^(a|aa)+$",
        "^(a|a?)+$",
        "(x+x+)+y",
        "^(\\w+\\s?)*$",
        "(.*a){12}$",
    ] {
        let schema = CompiledSchema::compile(
            &json!({"type": "object", "properties": {"s": {"pattern": pattern}}}),
        )
        .unwrap_or_else(|e| panic!("{pattern}: {e}"));
        let e = schema.validate(&json!({ "s": hostile })).unwrap_err();
        assert_eq!(e.schema_pointer, "/properties/s/pattern", "{pattern}");
    }
    // A pattern whose compiled program exceeds the size budget is refused at compile time.
    let options = CompileOptions {
        limits: SchemaLimits {
            max_regex_size: 100_000,
            ..SchemaLimits::default()
        },
        ..CompileOptions::default()
    };
    let e = CompiledSchema::compile_with(
        &json!({"type": "object", "properties": {"s": {"pattern": "((a{100}){100}){100}"}}}),
        &options,
    )
    .unwrap_err();
    assert_eq!(
        (e.kind, e.pointer.as_str()),
        (SchemaErrorKind::UnsupportedPattern, "/properties/s/pattern")
    );
    assert_eq!(e.detail, "pattern exceeds the compiled size budget");
}

#[test]
fn wide_schemas_hit_the_node_budget() {
    let mut props = Map::new();
    for i in 0..20_000 {
        props.insert(format!("p{i}"), json!({}));
    }
    let e = CompiledSchema::compile(&json!({"type": "object", "properties": props})).unwrap_err();
    assert_eq!(e.kind, SchemaErrorKind::TooManyNodes);
}

#[test]
fn raised_depth_limits_are_capped_at_the_ceiling() {
    let options = CompileOptions {
        limits: SchemaLimits {
            max_depth: 1_000_000,
            ..SchemaLimits::default()
        },
        validation: ValidationLimits {
            max_depth: 1_000_000,
            max_nodes: 1_000_000,
            ..ValidationLimits::default()
        },
        ..CompileOptions::default()
    };
    let schema = CompiledSchema::compile_with(&json!({"type": "object"}), &options).unwrap();
    let mut map = Map::new();
    map.insert("a".into(), deep_array(DEEP));
    let instance = Value::Object(map);
    let e = schema.validate(&instance).unwrap_err();
    assert_eq!(e.kind, ValidationErrorKind::TooDeep);
    assert_eq!(
        e.instance_pointer,
        format!(
            "/a{}",
            "/0".repeat(purra_core::json_text::MAX_DEPTH_CEILING)
        )
    );
    dismantle(instance);
    let deep = deep_schema(DEEP);
    assert_eq!(
        CompiledSchema::compile_with(&deep, &options)
            .unwrap_err()
            .kind,
        SchemaErrorKind::TooDeep
    );
    dismantle(deep);
}
