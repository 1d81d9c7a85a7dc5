//! Core's bounded I-JSON decoder against serde_json: what it accepts serde_json accepts with the
//! same value; what serde_json refuses it refuses; its syntax, UTF-8 and surrogate refusals are
//! serde_json's too; its depth, node and size refusals are true of the text.

use purra_core::{parse_json, JsonErrorKind, JsonLimits};
use serde_json::Value;

use crate::input::Input;

/// Checks one input: two bytes pick the depth (1 to 80) and node (1 to 2 000) limits, the rest is
/// the text.
pub fn check(data: &[u8]) {
    let mut input = Input::new(data);
    let limits = JsonLimits {
        max_bytes: 1 << 16,
        max_depth: 1 + usize::from(input.byte() % 80),
        max_nodes: 1 + usize::from(input.u16() % 2000),
    };
    let text = input.rest();
    let ours = parse_json(text, &limits);
    if contains(text, RAW_VALUE_TOKEN) {
        // serde_json (with `raw_value`, which purra-protocol turns on) reads an object whose
        // key is its private raw-value token as the JSON text in that member's string: not the
        // document, so not an oracle. Only the decoder's own bounds are checked.
        if let Ok(a) = &ours {
            assert!(depth(a) <= limits.max_depth && nodes(a) <= limits.max_nodes);
        }
        return;
    }
    let theirs = serde_json::from_slice::<Value>(text);
    match (&ours, &theirs) {
        (Ok(a), Ok(b)) => {
            assert!(same(a, b), "{a} differs from serde_json's {b}");
            assert!(depth(a) <= limits.max_depth && nodes(a) <= limits.max_nodes);
        }
        (Ok(a), Err(e)) => panic!("accepted {a}, serde_json refused: {e}"),
        (Err(e), theirs) => match e.kind {
            JsonErrorKind::Syntax | JsonErrorKind::InvalidUtf8 | JsonErrorKind::LoneSurrogate => {
                assert!(theirs.is_err(), "{e}, but serde_json accepted it")
            }
            // The text's nesting, not serde_json's value: a repeated member may hide a deep one.
            JsonErrorKind::TooDeep if theirs.is_ok() => {
                assert!(
                    text_depth(text) > limits.max_depth,
                    "{e}: depth {}",
                    text_depth(text)
                );
            }
            JsonErrorKind::TooLarge => assert!(text.len() > limits.max_bytes),
            _ => {}
        },
    }
}

/// The map key serde_json's `Value` takes as "the string member is raw JSON text".
const RAW_VALUE_TOKEN: &[u8] = b"$serde_json::private::RawValue";

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Nesting depth of a valid JSON text: the most brackets open at once outside strings.
fn text_depth(text: &[u8]) -> usize {
    let (mut open, mut most, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &b in text {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                open += 1;
                most = most.max(open);
            }
            b']' | b'}' => open = open.saturating_sub(1),
            _ => {}
        }
    }
    most
}

/// Nesting depth: a scalar is 0.
pub(crate) fn depth(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        Value::Object(o) => 1 + o.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// Number of values.
pub(crate) fn nodes(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(nodes).sum::<usize>(),
        Value::Object(o) => 1 + o.values().map(nodes).sum::<usize>(),
        _ => 1,
    }
}

/// Equal values; numbers compare by value (an integer equals the same double), and doubles may
/// differ by a few ulps: serde_json without `float_roundtrip` is not correctly rounded (the
/// corpus file `json/serde-json-two-ulps-off` is 2 ulps off; purra's double is the correctly
/// rounded one, and the `canonical` target checks purra's numbers exactly).
pub(crate) fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if let (Some(x), Some(y)) = (x.as_i64(), y.as_i64()) {
                return x == y;
            }
            if let (Some(x), Some(y)) = (x.as_u64(), y.as_u64()) {
                return x == y;
            }
            match (x.as_f64(), y.as_f64()) {
                (Some(x), Some(y)) => {
                    x == y || (x.to_bits().abs_diff(y.to_bits()) <= 8 && x.signum() == y.signum())
                }
                _ => false,
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}
