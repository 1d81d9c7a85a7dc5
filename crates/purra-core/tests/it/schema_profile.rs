//! Exact behaviour of the `purra.output-schema/v1` profile: accepted keywords, rejections with pointers,
//! verdicts with instance and schema pointers.

use purra_core::schema::{Dialect, DIALECT_2019_09, DIALECT_2020_12, DIALECT_DRAFT_07};
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

/// The options of a host that opted in to draft-07 and 2019-09 root declarations.
fn earlier_dialects() -> CompileOptions {
    CompileOptions {
        allow_root_dialect_2020_12: true,
        allow_root_dialect_2019_09: true,
        allow_root_dialect_draft_07: true,
        ..CompileOptions::default()
    }
}

/// `(kind, pointer, detail)` of a refusal.
fn refusal(schema: &Value, options: &CompileOptions) -> (SchemaErrorKind, String, &'static str) {
    let e = CompiledSchema::compile_with(schema, options).unwrap_err();
    (e.kind, e.pointer, e.detail)
}

#[test]
fn draft_07_and_2019_09_are_accepted_only_with_their_opt_ins_and_kept_in_the_source() {
    let body = json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "minLength": 1},
            "lines": {"type": "array", "items": {"type": "integer", "minimum": 0}},
        },
        "required": ["path"],
        "additionalProperties": false,
    });
    for (uri, dialect) in [
        ("http://json-schema.org/draft-07/schema#", Dialect::Draft07),
        ("http://json-schema.org/draft-07/schema", Dialect::Draft07),
        (
            "https://json-schema.org/draft/2019-09/schema",
            Dialect::Draft2019_09,
        ),
        (
            "https://json-schema.org/draft/2019-09/schema#",
            Dialect::Draft2019_09,
        ),
    ] {
        let mut schema = body.clone();
        schema["$schema"] = json!(uri);
        // Seed 000's MCP entry point: 2020-12 only, and the refusal names the dialect.
        let e = CompiledSchema::compile_mcp(&schema).unwrap_err();
        assert_eq!(
            (e.kind, e.pointer.as_str(), e.detail),
            (
                SchemaErrorKind::UnsupportedDialect,
                "/$schema",
                if dialect == Dialect::Draft07 {
                    "draft-07 is not accepted here: only https://json-schema.org/draft/2020-12/schema is (the host did not opt in to earlier dialects)"
                } else {
                    "2019-09 is not accepted here: only https://json-schema.org/draft/2020-12/schema is (the host did not opt in to earlier dialects)"
                }
            ),
            "{uri}"
        );
        // Only the opt-in for that dialect admits it.
        let only_the_other = CompileOptions {
            allow_root_dialect_draft_07: dialect != Dialect::Draft07,
            allow_root_dialect_2019_09: dialect != Dialect::Draft2019_09,
            ..earlier_dialects()
        };
        assert_eq!(
            refusal(&schema, &only_the_other).0,
            SchemaErrorKind::UnsupportedDialect,
            "{uri}"
        );
        // Without the 2020-12 declaration allowed, no declaration is.
        let none = CompileOptions {
            allow_root_dialect_2020_12: false,
            ..earlier_dialects()
        };
        assert_eq!(
            refusal(&schema, &none),
            (
                SchemaErrorKind::UnsupportedDialect,
                "/$schema".to_owned(),
                "$schema is accepted only at the root of an MCP tool schema"
            )
        );
        let compiled = CompiledSchema::compile_with(&schema, &earlier_dialects()).unwrap();
        assert_eq!(compiled.dialect(), Some(dialect), "{uri}");
        assert!(!compiled.declares_dialect_2020_12());
        // The declaration is kept as written, for the snapshot and its digest.
        assert_eq!(compiled.source(), &schema);
        // The same verdicts as the undeclared schema.
        assert_eq!(
            verdict(&compiled, json!({"path": "a", "lines": [0, 2.0]})),
            Ok(())
        );
        assert_eq!(
            verdict(&compiled, json!({"path": "a", "lines": [1.5]})),
            Err(("/lines/0".into(), "/properties/lines/items/type".into()))
        );
        assert_eq!(
            verdict(&compiled, json!({"path": ""})),
            Err(("/path".into(), "/properties/path/minLength".into()))
        );
    }
    assert_eq!(Dialect::from_uri(DIALECT_DRAFT_07), Some(Dialect::Draft07));
    assert_eq!(
        Dialect::from_uri(DIALECT_2019_09),
        Some(Dialect::Draft2019_09)
    );
    assert_eq!(
        Dialect::from_uri(DIALECT_2020_12),
        Some(Dialect::Draft2020_12)
    );
    // Other spellings and other dialects are not guessed at.
    for uri in [
        "https://json-schema.org/draft-07/schema#",
        "http://json-schema.org/draft-07/schema##",
        "https://json-schema.org/draft/2020-12/schema#",
        "http://json-schema.org/draft-04/schema#",
        "http://json-schema.org/draft-06/schema#",
        "http://json-schema.org/schema#",
    ] {
        assert_eq!(Dialect::from_uri(uri), None, "{uri}");
        let schema = json!({"$schema": uri, "type": "object"});
        assert_eq!(
            refusal(&schema, &earlier_dialects()),
            (
                SchemaErrorKind::UnsupportedDialect,
                "/$schema".to_owned(),
                "only the 2020-12, 2019-09 and draft-07 dialect URIs are accepted"
            ),
            "{uri}"
        );
        assert_eq!(
            CompiledSchema::compile_mcp(&schema).unwrap_err().detail,
            "only https://json-schema.org/draft/2020-12/schema is accepted"
        );
    }
    let not_a_string = json!({"$schema": 7, "type": "object"});
    assert_eq!(
        refusal(&not_a_string, &earlier_dialects()).2,
        "$schema must be a dialect URI (a string)"
    );
    // Nested declarations stay refused in every dialect.
    let nested = json!({"$schema": DIALECT_DRAFT_07, "type": "object", "properties": {"a": {"$schema": DIALECT_DRAFT_07}}});
    assert_eq!(
        refusal(&nested, &earlier_dialects()),
        (
            SchemaErrorKind::UnsupportedDialect,
            "/properties/a/$schema".to_owned(),
            "$schema is accepted only at the root of an MCP tool schema"
        )
    );
}

#[test]
fn what_means_something_else_in_draft_07_or_2019_09_is_refused_with_its_pointer_and_reason() {
    let within =
        |uri: &str, sub: Value| json!({"$schema": uri, "type": "object", "properties": {"x": sub}});
    use SchemaErrorKind::{InvalidKeywordValue as Invalid, UnsupportedKeyword as Unsupported};
    let cases: Vec<(&str, Value, SchemaErrorKind, &str, &str)> = vec![
        (DIALECT_DRAFT_07, json!({"type": "array", "items": [{"type": "string"}]}), Invalid, "/properties/x/items",
            "draft-07 items as an array is a tuple (2020-12's prefixItems), outside the profile"),
        (DIALECT_2019_09, json!({"type": "array", "items": [{"type": "string"}]}), Invalid, "/properties/x/items",
            "2019-09 items as an array is a tuple (2020-12's prefixItems), outside the profile"),
        (DIALECT_2020_12, json!({"type": "array", "items": [{"type": "string"}]}), Invalid, "/properties/x/items",
            "a subschema must be an object"),
        (DIALECT_DRAFT_07, json!({"additionalItems": false}), Unsupported, "/properties/x/additionalItems",
            "draft-07 additionalItems applies to the elements after an array items (2020-12's items after prefixItems), outside the profile"),
        (DIALECT_2019_09, json!({"additionalItems": false}), Unsupported, "/properties/x/additionalItems",
            "2019-09 additionalItems applies to the elements after an array items (2020-12's items after prefixItems), outside the profile"),
        (DIALECT_DRAFT_07, json!({"dependencies": {"a": ["b"]}}), Unsupported, "/properties/x/dependencies",
            "draft-07 dependencies (2020-12's dependentRequired and dependentSchemas) is outside the profile"),
        (DIALECT_2019_09, json!({"dependencies": {"a": ["b"]}}), Unsupported, "/properties/x/dependencies",
            "dependencies is not a 2019-09 keyword (2019-09 split it into dependentRequired and dependentSchemas), outside the profile"),
        (DIALECT_DRAFT_07, json!({"definitions": {}}), Unsupported, "/properties/x/definitions",
            "definitions holds subschemas for $ref, and references are outside the profile"),
        (DIALECT_DRAFT_07, json!({"$ref": "#/definitions/a", "type": "string"}), Unsupported, "/properties/x/$ref",
            "$ref is outside the profile (no reference is resolved; in draft-07 it also makes its sibling keywords ignored)"),
        (DIALECT_2019_09, json!({"$recursiveRef": "#"}), Unsupported, "/properties/x/$recursiveRef",
            "2019-09 $recursiveRef and $recursiveAnchor are dynamic references (2020-12's $dynamicRef), outside the profile"),
        (DIALECT_2019_09, json!({"$recursiveAnchor": true}), Unsupported, "/properties/x/$recursiveAnchor",
            "2019-09 $recursiveRef and $recursiveAnchor are dynamic references (2020-12's $dynamicRef), outside the profile"),
        (DIALECT_DRAFT_07, json!({"type": "string", "format": "uri"}), Unsupported, "/properties/x/format",
            "draft-07 format may be an assertion or an annotation (validators differ), outside the profile"),
        (DIALECT_2019_09, json!({"type": "string", "format": "uri"}), Unsupported, "/properties/x/format",
            "2019-09 format is an annotation unless a validator asserts it (validators differ), outside the profile"),
        (DIALECT_DRAFT_07, json!({"maximum": 3, "exclusiveMaximum": true}), Invalid, "/properties/x/exclusiveMaximum",
            "a boolean is draft-04's form; draft-06 and later take the bound itself (a number)"),
        (DIALECT_2020_12, json!({"exclusiveMinimum": false}), Invalid, "/properties/x/exclusiveMinimum",
            "a boolean is draft-04's form; draft-06 and later take the bound itself (a number)"),
        // Keywords no dialect gives the profile's meaning keep the plain reason.
        (DIALECT_DRAFT_07, json!({"default": 1}), Unsupported, "/properties/x/default",
            "keyword outside purra.output-schema/v1"),
        (DIALECT_2019_09, json!({"$defs": {}}), Unsupported, "/properties/x/$defs",
            "keyword outside purra.output-schema/v1"),
        (DIALECT_2020_12, json!({"dependencies": {}}), Unsupported, "/properties/x/dependencies",
            "keyword outside purra.output-schema/v1"),
    ];
    for (uri, sub, kind, pointer, detail) in cases {
        let schema = within(uri, sub);
        assert_eq!(
            refusal(&schema, &earlier_dialects()),
            (kind, pointer.to_owned(), detail),
            "{schema}"
        );
    }
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
