//! Schema compile and validate under small budgets: validation is deterministic, `is_valid`
//! agrees with `validate`, a text instance and its decoded value get the same verdict, a bigger
//! step budget never flips a verdict that was not a budget refusal. (The verdicts' agreement with
//! the `jsonschema` crate is purra-core's property test `tests/it/differential.rs`.)

use purra_core::{
    parse_json, CompileOptions, CompiledSchema, JsonLimits, SchemaLimits, ValidationLimits,
};

/// Checks one input: a flag byte, then the schema text and the instance text separated by a NUL.
pub fn check(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let (schema_text, instance_text) = match rest.iter().position(|b| *b == 0) {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &b"null"[..]),
    };
    let options = |steps: usize| CompileOptions {
        allow_root_dialect_2020_12: flags & 1 != 0,
        allow_root_dialect_2019_09: flags & 1 != 0,
        allow_root_dialect_draft_07: flags & 1 != 0,
        limits: SchemaLimits {
            max_depth: 32,
            max_nodes: 500,
            max_pattern_bytes: 64,
            max_regex_size: 1 << 16,
        },
        validation: ValidationLimits {
            max_depth: 32,
            max_nodes: 1000,
            max_steps: steps,
            max_text_bytes: 1 << 16,
        },
    };
    let small = 1 + usize::from(flags >> 1) * 16;
    let Ok(tight) = CompiledSchema::compile_text(schema_text, &options(small)) else {
        return;
    };
    let roomy = CompiledSchema::compile_text(schema_text, &options(1_000_000))
        .expect("a schema that compiles with a small step budget compiles with a big one");
    let first = tight.validate_text(instance_text).map_err(|e| e.kind);
    assert_eq!(
        first,
        tight.validate_text(instance_text).map_err(|e| e.kind),
        "not deterministic"
    );
    let wide = roomy.validate_text(instance_text).map_err(|e| e.kind);
    match &first {
        Err(kind) if kind.is_budget() => {}
        _ => assert_eq!(
            first.is_ok(),
            wide.is_ok(),
            "a bigger budget flipped the verdict"
        ),
    }
    let limits = JsonLimits {
        max_bytes: 1 << 16,
        max_depth: 32,
        max_nodes: 1000,
    };
    let Ok(instance) = parse_json(instance_text, &limits) else {
        assert!(first.is_err(), "an instance that does not decode was valid");
        return;
    };
    let by_value = roomy.validate(&instance).map_err(|e| e.kind);
    assert_eq!(
        by_value.is_ok(),
        wide.is_ok(),
        "text and value verdicts differ"
    );
    assert_eq!(roomy.is_valid(&instance), by_value.is_ok());
}
