//! Exact comparisons of JSON numbers and values, as JSON Schema 2020-12 defines them.
//!
//! JSON Schema compares numbers by their mathematical value: `1` and `1.0` are equal, and `minimum`
//! compares a `u64` with an `f64` exactly. Every number here is an `i128` (from `u64`/`i64`) or a finite
//! `f64`, and mixed comparisons never round.

use serde_json::{Number, Value};
use std::cmp::Ordering;

#[derive(Clone, Copy, Debug)]
pub(crate) enum Num {
    Int(i128),
    Float(f64),
}

impl Num {
    pub(crate) fn of(n: &Number) -> Num {
        if let Some(u) = n.as_u64() {
            Num::Int(u as i128)
        } else if let Some(i) = n.as_i64() {
            Num::Int(i as i128)
        } else {
            Num::Float(n.as_f64().unwrap_or(f64::NAN))
        }
    }

    /// Whether the value has no fractional part (JSON Schema's `integer`).
    pub(crate) fn is_integer(self) -> bool {
        match self {
            Num::Int(_) => true,
            Num::Float(f) => f.is_finite() && f.fract() == 0.0,
        }
    }
}

fn cmp_int_float(i: i128, f: f64) -> Ordering {
    // 2^127 as a double: every i128 is below it and at or above its negation.
    const LIMIT: f64 = 170_141_183_460_469_231_731_687_303_715_884_105_728.0;
    if f.is_nan() {
        return Ordering::Less;
    }
    if f >= LIMIT {
        return Ordering::Less;
    }
    if f < -LIMIT {
        return Ordering::Greater;
    }
    let t = f.trunc();
    match i.cmp(&(t as i128)) {
        Ordering::Equal => {
            let frac = f - t;
            if frac > 0.0 {
                Ordering::Less
            } else if frac < 0.0 {
                Ordering::Greater
            } else {
                Ordering::Equal
            }
        }
        other => other,
    }
}

/// Compares two numbers by mathematical value.
pub(crate) fn cmp_num(a: Num, b: Num) -> Ordering {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => x.cmp(&y),
        (Num::Float(x), Num::Float(y)) => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
        // Integers up to 2^53 convert to doubles exactly.
        (Num::Int(x), Num::Float(y)) if x.unsigned_abs() <= 1 << 53 => {
            (x as i64 as f64).partial_cmp(&y).unwrap_or(Ordering::Less)
        }
        (Num::Float(x), Num::Int(y)) if y.unsigned_abs() <= 1 << 53 => x
            .partial_cmp(&(y as i64 as f64))
            .unwrap_or(Ordering::Greater),
        (Num::Int(x), Num::Float(y)) => cmp_int_float(x, y),
        (Num::Float(x), Num::Int(y)) => cmp_int_float(y, x).reverse(),
    }
}

/// Whether `n` is a multiple of the positive integer `k` (exact: `%` on doubles is exact).
pub(crate) fn is_multiple_of(n: Num, k: u64) -> bool {
    match n {
        Num::Int(i) => i % (k as i128) == 0,
        Num::Float(f) => f.is_finite() && f.fract() == 0.0 && f % (k as f64) == 0.0,
    }
}

/// JSON Schema equality: numbers by value, objects regardless of member order.
///
/// Recursion is bounded by the shallower of the two values; callers pass one value from a compiled
/// schema, whose depth the compiler bounded.
pub(crate) fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Number(x), Value::Number(y)) => cmp_num(Num::of(x), Num::of(y)) == Ordering::Equal,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_equal(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn n(v: Value) -> Num {
        Num::of(v.as_number().unwrap())
    }

    #[test]
    fn mixed_comparisons_are_exact() {
        assert_eq!(cmp_num(n(json!(1)), n(json!(1.0))), Ordering::Equal);
        assert_eq!(cmp_num(n(json!(1)), n(json!(1.5))), Ordering::Less);
        assert_eq!(cmp_num(n(json!(-2)), n(json!(-1.5))), Ordering::Less);
        assert_eq!(
            cmp_num(n(json!(9007199254740993u64)), n(json!(9007199254740992.0))),
            Ordering::Greater
        );
        assert_eq!(cmp_num(n(json!(u64::MAX)), n(json!(1e300))), Ordering::Less);
        assert!(json_equal(&json!({"a": [1, 2.0]}), &json!({"a": [1.0, 2]})));
        assert!(!json_equal(&json!([1]), &json!([true])));
        assert!(is_multiple_of(n(json!(10.0)), 5));
        assert!(!is_multiple_of(n(json!(7.5)), 5));
        assert!(is_multiple_of(n(json!(-15)), 5));
    }
}
