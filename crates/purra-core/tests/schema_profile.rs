//! Exact behaviour of the `purra.output-schema/v1` profile: accepted keywords, rejections with pointers,
//! verdicts with instance and schema pointers.

use purra_core::schema::DIALECT_2020_12;
use purra_core::{CompileOptions, CompiledSchema, SchemaErrorKind, ValidationErrorKind};
use serde_json::{json, Value};

fn compile(schema: Value) -> CompiledSchema {
    CompiledSchema::compile(&schema).unwrap()
}

fn rejected(schema: Value) -> (SchemaErrorKind, String) {
    let e = CompiledSchema::compile(&schema).unwrap_err();
    (e.kind, e.pointer)
}

fn verdict(schema: &CompiledSchema, instance: Value) -> Result<(), (String, String)> {
    schema.validate(&instance).map_err(|e| {
        assert_eq!(e.kind, ValidationErrorKind::Invalid);
        (e.instance_pointer, e.schema_pointer)
    })
}

#[test]
fn metadata_and_unknown_keywords_are_rejected_with_their_pointer() {
    for keyword in [
        "default",
        "examples",
        "x-fastmcp-wrap-result",
        "$ref",
        "$defs",
        "$id",
        "$comment",
        "format",
        "uniqueItems",
        "allOf",
        "not",
        "if",
        "prefixItems",
        "patternProperties",
        "minProperties",
        "deprecated",
        "readOnly",
        "$anchor",
        "definitions",
        "contains",
    ] {
        let mut inner = serde_json::Map::new();
        inner.insert("type".into(), json!("string"));
        inner.insert(keyword.into(), json!(1));
        let schema =
            json!({"type": "object", "properties": {"a/b": {"type": "array", "items": inner}}});
        assert_eq!(
            rejected(schema),
            (
                SchemaErrorKind::UnsupportedKeyword,
                format!("/properties/a~1b/items/{}", keyword.replace('/', "~1"))
            ),
            "{keyword}"
        );
    }
}

#[test]
fn root_must_be_an_object_schema() {
    assert_eq!(
        rejected(json!(true)),
        (SchemaErrorKind::RootNotObject, "".into())
    );
    assert_eq!(
        rejected(json!({})),
        (SchemaErrorKind::RootNotObject, "/type".into())
    );
    assert_eq!(
        rejected(json!({"type": ["object", "null"]})),
        (SchemaErrorKind::RootNotObject, "/type".into())
    );
    assert_eq!(
        rejected(json!({"type": "object", "properties": {"a": true}})),
        (SchemaErrorKind::InvalidKeywordValue, "/properties/a".into())
    );
}

#[test]
fn keyword_values_are_checked() {
    let cases = [
        (
            json!({"type": "object", "minProperties": 1}),
            SchemaErrorKind::UnsupportedKeyword,
            "/minProperties",
        ),
        (
            json!({"type": "object", "required": ["a", "a"]}),
            SchemaErrorKind::InvalidKeywordValue,
            "/required",
        ),
        (
            json!({"type": "object", "properties": {"n": {"type": "wat"}}}),
            SchemaErrorKind::InvalidKeywordValue,
            "/properties/n/type",
        ),
        (
            json!({"type": "object", "properties": {"n": {"minLength": -1}}}),
            SchemaErrorKind::InvalidKeywordValue,
            "/properties/n/minLength",
        ),
        (
            json!({"type": "object", "properties": {"n": {"multipleOf": 0.5}}}),
            SchemaErrorKind::InvalidKeywordValue,
            "/properties/n/multipleOf",
        ),
        (
            json!({"type": "object", "properties": {"n": {"anyOf": []}}}),
            SchemaErrorKind::InvalidKeywordValue,
            "/properties/n/anyOf",
        ),
        (
            json!({"type": "object", "properties": {"n": {"pattern": "(?=a)"}}}),
            SchemaErrorKind::UnsupportedPattern,
            "/properties/n/pattern",
        ),
        (
            json!({"type": "object", "properties": {"n": {"pattern": "(a)\\1"}}}),
            SchemaErrorKind::UnsupportedPattern,
            "/properties/n/pattern",
        ),
        (
            json!({"type": "object", "$schema": DIALECT_2020_12}),
            SchemaErrorKind::UnsupportedDialect,
            "/$schema",
        ),
    ];
    for (schema, kind, pointer) in cases {
        assert_eq!(
            rejected(schema.clone()),
            (kind, pointer.to_owned()),
            "{schema}"
        );
    }
}

#[test]
fn root_dialect_is_accepted_only_by_the_mcp_entry_point_and_only_at_the_root() {
    let schema = json!({"$schema": DIALECT_2020_12, "type": "object"});
    let compiled = CompiledSchema::compile_mcp(&schema).unwrap();
    assert!(compiled.declares_dialect_2020_12());
    assert_eq!(compiled.source(), &schema);
    let other = json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"});
    assert_eq!(
        CompiledSchema::compile_mcp(&other).unwrap_err().kind,
        SchemaErrorKind::UnsupportedDialect
    );
    let nested = json!({"type": "object", "properties": {"a": {"$schema": DIALECT_2020_12}}});
    let e = CompiledSchema::compile_mcp(&nested).unwrap_err();
    assert_eq!(
        (e.kind, e.pointer.as_str()),
        (SchemaErrorKind::UnsupportedDialect, "/properties/a/$schema")
    );
    let opts = CompileOptions {
        allow_root_dialect_2020_12: true,
        ..CompileOptions::default()
    };
    assert!(CompiledSchema::compile_with(&schema, &opts).is_ok());
}

#[test]
fn verdicts_carry_instance_and_schema_pointers() {
    let s = compile(json!({
        "type": "object",
        "title": "t",
        "description": "d",
        "required": ["name"],
        "additionalProperties": false,
        "properties": {
            "name": {"type": "string", "minLength": 2, "maxLength": 3, "pattern": "^\\w+$"},
            "tags": {"type": "array", "maxItems": 2, "items": {"enum": ["a", 1]}},
            "n": {"type": "integer", "minimum": 0, "exclusiveMaximum": 10, "multipleOf": 2},
            "v": {"oneOf": [{"type": "string"}, {"type": "number"}]},
            "w": {"anyOf": [{"const": {"k": 1}}, {"type": "null"}]}
        }
    }));
    assert_eq!(verdict(&s, json!({"name": "ab"})), Ok(()));
    assert_eq!(verdict(&s, json!({})), Err(("".into(), "/required".into())));
    assert_eq!(
        verdict(&s, json!({"name": "ab", "x": 1})),
        Err(("/x".into(), "/additionalProperties".into()))
    );
    assert_eq!(
        verdict(&s, json!({"name": 5})),
        Err(("/name".into(), "/properties/name/type".into()))
    );
    assert_eq!(
        verdict(&s, json!({"name": "a"})),
        Err(("/name".into(), "/properties/name/minLength".into()))
    );
    // Code points, not bytes or UTF-16 units: three astral characters have length 3.
    assert_eq!(
        verdict(&s, json!({"name": "😀😀😀"})),
        Err(("/name".into(), "/properties/name/pattern".into()))
    );
    assert_eq!(
        verdict(&s, json!({"name": "éé"})),
        Err(("/name".into(), "/properties/name/pattern".into()))
    );
    assert_eq!(
        verdict(&s, json!({"name": "abcd"})),
        Err(("/name".into(), "/properties/name/maxLength".into()))
    );
    assert_eq!(
        verdict(&s, json!({"name": "ab", "tags": ["a", 1.0]})),
        Ok(())
    );
    assert_eq!(
        verdict(&s, json!({"name": "ab", "tags": ["a", "b"]})),
        Err(("/tags/1".into(), "/properties/tags/items/enum".into()))
    );
    assert_eq!(
        verdict(&s, json!({"name": "ab", "tags": [1, 1, 1]})),
        Err(("/tags".into(), "/properties/tags/maxItems".into()))
    );
    assert_eq!(verdict(&s, json!({"name": "ab", "n": 4.0})), Ok(()));
    assert_eq!(
        verdict(&s, json!({"name": "ab", "n": 4.5})),
        Err(("/n".into(), "/properties/n/type".into()))
    );
    assert_eq!(
        verdict(&s, json!({"name": "ab", "n": -2})),
        Err(("/n".into(), "/properties/n/minimum".into()))
    );
    assert_eq!(
        verdict(&s, json!({"name": "ab", "n": 10})),
        Err(("/n".into(), "/properties/n/exclusiveMaximum".into()))
    );
    assert_eq!(
        verdict(&s, json!({"name": "ab", "n": 3})),
        Err(("/n".into(), "/properties/n/multipleOf".into()))
    );
    assert_eq!(
        verdict(&s, json!({"name": "ab", "v": true})),
        Err(("/v".into(), "/properties/v/oneOf".into()))
    );
    assert_eq!(verdict(&s, json!({"name": "ab", "w": {"k": 1.0}})), Ok(()));
    assert_eq!(
        verdict(&s, json!({"name": "ab", "w": {"k": 2}})),
        Err(("/w".into(), "/properties/w/anyOf".into()))
    );
}

#[test]
fn no_coercion() {
    let s = compile(
        json!({"type": "object", "properties": {"n": {"type": "number"}, "o": {"type": "object"}}}),
    );
    assert!(s.validate(&json!({"n": "1"})).is_err());
    assert!(s.validate(&json!({"o": "{\"a\":1}"})).is_err());
    assert!(s.validate(&json!({"n": 1, "o": {}})).is_ok());
}

#[test]
fn errors_do_not_echo_instance_values() {
    let s = compile(
        json!({"type": "object", "properties": {"a": {"enum": ["x"]}}, "additionalProperties": false}),
    );
    let secret = "s3cr3t-".repeat(100);
    let e = s.validate(&json!({"a": secret})).unwrap_err();
    assert!(!e.to_string().contains("s3cr3t"), "{e}");
    assert_eq!(e.detail, "value is not one of the 1 allowed values");
    let e = s.validate(&json!({ secret.clone(): 1 })).unwrap_err();
    // The offending member's name is cut to 64 bytes in the pointer.
    assert_eq!(e.instance_pointer, format!("/{}…", &secret[..64]));
}

#[test]
fn text_entry_point_rejects_non_ijson_instances() {
    let s = compile(json!({"type": "object"}));
    let e = s.validate_text(br#"{"a":1,"a":2}"#).unwrap_err();
    assert_eq!(
        e.kind,
        ValidationErrorKind::Text(purra_core::JsonErrorKind::DuplicateKey)
    );
    assert_eq!(
        s.validate_text(br#"{"a":[1,2]}"#).unwrap(),
        json!({"a": [1, 2]})
    );
}
