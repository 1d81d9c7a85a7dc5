//! `canonicalize` (RFC 8785): the canonical text decodes to the same value (numbers bit for bit),
//! canonicalizing it again changes nothing, and the identity of the text is the identity of its
//! value.

use purra_core::{canonicalize, json_identity, json_identity_of_text, parse_json, JsonLimits};
use serde_json::Value;

/// Checks one input: a JSON text.
pub fn check(data: &[u8]) {
    let limits = JsonLimits::default();
    let Ok(value) = parse_json(data, &limits) else {
        assert!(json_identity_of_text(data, &limits).is_err());
        return;
    };
    let canonical = match canonicalize(&value) {
        Ok(c) => c,
        Err(_) => {
            assert!(json_identity(&value).is_err());
            return;
        }
    };
    let again = parse_json(canonical.as_bytes(), &limits)
        .unwrap_or_else(|e| panic!("the canonical form {canonical} does not decode: {e}"));
    assert!(
        exact(&value, &again),
        "{value} canonicalized to {canonical}, which decodes to {again}"
    );
    assert_eq!(
        canonicalize(&again).expect("canonical again"),
        canonical,
        "not idempotent"
    );
    assert_eq!(
        json_identity_of_text(data, &limits).expect("identity of the text"),
        json_identity(&value).expect("identity of the value")
    );
    assert_eq!(
        json_identity_of_text(canonical.as_bytes(), &limits)
            .expect("identity of the canonical text"),
        json_identity(&value).expect("identity of the value")
    );
}

/// Equal values, numbers equal as doubles (RFC 8785 compares numbers as IEEE-754 values).
fn exact(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| exact(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| exact(v, w)))
        }
        _ => a == b,
    }
}
