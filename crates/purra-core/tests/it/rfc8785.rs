//! RFC 8785 (JSON Canonicalization Scheme) test vectors, typed from the RFC text, plus stability checks.
//!
//! Sources, all in RFC 8785 (June 2020):
//! - section 3.2.2 and 3.2.4: the complete example (input, canonical output, and its UTF-8 bytes);
//! - section 3.2.3: the property sorting example;
//! - Appendix B: the number serialization samples (IEEE-754 bit patterns and their JSON form).

use purra_core::{
    canonicalize, json_identity, json_identity_of_text, parse_json, IdentityError, JsonErrorKind,
    JsonLimits,
};
use serde_json::{json, Value};

fn canon_text(text: &str) -> String {
    canonicalize(&parse_json(text.as_bytes(), &JsonLimits::default()).unwrap()).unwrap()
}

/// RFC 8785 section 3.2.2 input and section 3.2.4 output (as text and as UTF-8 bytes in hex).
#[test]
fn rfc8785_section_3_2_4_complete_example() {
    let input = r#"{
  "numbers": [333333333.33333329, 1E30, 4.50,
              2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}"#;
    let expected = r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#;
    let canonical = canon_text(input);
    assert_eq!(canonical, expected);
    let hex = "7b 22 6c 69 74 65 72 61 6c 73 22 3a 5b 6e 75 6c 6c 2c 74 72 \
               75 65 2c 66 61 6c 73 65 5d 2c 22 6e 75 6d 62 65 72 73 22 3a \
               5b 33 33 33 33 33 33 33 33 33 2e 33 33 33 33 33 33 33 2c 31 \
               65 2b 33 30 2c 34 2e 35 2c 30 2e 30 30 32 2c 31 65 2d 32 37 \
               5d 2c 22 73 74 72 69 6e 67 22 3a 22 e2 82 ac 24 5c 75 30 30 \
               30 66 5c 6e 41 27 42 5c 22 5c 5c 5c 5c 5c 22 2f 22 7d";
    let bytes: Vec<u8> = hex
        .split_whitespace()
        .map(|h| u8::from_str_radix(h, 16).unwrap())
        .collect();
    assert_eq!(canonical.as_bytes(), bytes.as_slice());
}

/// RFC 8785 section 3.2.3: properties sort by UTF-16 code units.
#[test]
fn rfc8785_section_3_2_3_sorting_example() {
    let input = r#"{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}"#;
    let canonical = canon_text(input);
    let reparsed: Value = serde_json::from_str(&canonical).unwrap();
    assert_eq!(reparsed, serde_json::from_str::<Value>(input).unwrap());
    // The RFC lists the expected order of the property values.
    let order = [
        "Carriage Return",
        "One",
        "Control",
        "Latin Small Letter O With Diaeresis",
        "Euro Sign",
        "Emoji: Grinning Face",
        "Hebrew Letter Dalet With Dagesh",
    ];
    let mut last = 0;
    for value in order {
        let at = canonical.find(&format!("\"{value}\"")).unwrap();
        assert!(at > last, "{value} is out of order in {canonical}");
        last = at;
    }
    // U+1F600 (surrogates D83D DE00) sorts before U+FB33 in UTF-16 although it is after it in UTF-8.
    assert!(canonical.find('\u{1f600}').unwrap() < canonical.find('\u{fb33}').unwrap());
}

/// RFC 8785 Appendix B: number serialization samples (IEEE-754 hex, JSON representation).
#[test]
fn rfc8785_appendix_b_number_samples() {
    let samples: &[(u64, &str)] = &[
        (0x0000000000000000, "0"),
        (0x8000000000000000, "0"),
        (0x0000000000000001, "5e-324"),
        (0x8000000000000001, "-5e-324"),
        (0x7fefffffffffffff, "1.7976931348623157e+308"),
        (0xffefffffffffffff, "-1.7976931348623157e+308"),
        (0x4340000000000000, "9007199254740992"),
        (0xc340000000000000, "-9007199254740992"),
        (0x4430000000000000, "295147905179352830000"),
        (0x44b52d02c7e14af5, "9.999999999999997e+22"),
        (0x44b52d02c7e14af6, "1e+23"),
        (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
        (0x444b1ae4d6e2ef4e, "999999999999999700000"),
        (0x444b1ae4d6e2ef4f, "999999999999999900000"),
        (0x444b1ae4d6e2ef50, "1e+21"),
        (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
        (0x3eb0c6f7a0b5ed8d, "0.000001"),
        (0x41b3de4355555553, "333333333.3333332"),
        (0x41b3de4355555554, "333333333.33333325"),
        (0x41b3de4355555555, "333333333.3333333"),
        (0x41b3de4355555556, "333333333.3333334"),
        (0x41b3de4355555557, "333333333.33333343"),
        (0xbecbf647612f3696, "-0.0000033333333333333333"),
        (0x43143ff3c1cb0959, "1424953923781206.2"),
    ];
    for &(bits, expected) in samples {
        let f = f64::from_bits(bits);
        let value = Value::Number(serde_json::Number::from_f64(f).unwrap());
        assert_eq!(canonicalize(&value).unwrap(), expected, "bits {bits:016x}");
        // Round trip: parsing the canonical text gives the same double back.
        let back = parse_json(expected.as_bytes(), &JsonLimits::default()).unwrap();
        assert_eq!(
            back.as_f64().unwrap().to_bits() & !(1 << 63),
            bits & !(1 << 63)
        );
    }
    // Appendix B's NaN and Infinity rows have no JSON form; as text they do not parse, and an
    // overflowing literal is refused as outside I-JSON.
    assert!(serde_json::Number::from_f64(f64::NAN).is_none());
    assert_eq!(
        parse_json(b"1e309", &JsonLimits::default())
            .unwrap_err()
            .kind,
        JsonErrorKind::NumberNotIJson
    );
}

#[test]
fn canonical_form_is_stable_across_key_order_number_spelling_and_escapes() {
    let a = canon_text(r#"{"b": 100, "a": "\u00e9", "c": [1.0, 2e0]}"#);
    let b = canon_text(r#"{"c": [1, 2], "a": "é", "b": 1e2}"#);
    let c = canon_text(r#"{"a":"\u00E9","c":[10e-1,0.2e1],"b":100.0}"#);
    assert_eq!(a, r#"{"a":"é","b":100,"c":[1,2]}"#);
    assert_eq!(a, b);
    assert_eq!(a, c);
    let from_value = json_identity(&json!({"b": 100.0, "a": "é", "c": [1, 2.0]})).unwrap();
    let from_text = json_identity_of_text(
        br#"{"a":"\u00e9","b":1E2,"c":[1,2]}"#,
        &JsonLimits::default(),
    )
    .unwrap();
    assert_eq!(from_value, from_text);
    assert_ne!(
        from_value,
        json_identity(&json!({"a": "é", "b": 101, "c": [1, 2]})).unwrap()
    );
}

#[test]
fn text_outside_ijson_has_no_identity() {
    let limits = JsonLimits::default();
    let kind = |text: &[u8]| match json_identity_of_text(text, &limits) {
        Err(IdentityError::Text(e)) => e.kind,
        other => panic!("expected a text error, got {other:?}"),
    };
    assert_eq!(kind(br#"{"a":1,"a":1}"#), JsonErrorKind::DuplicateKey);
    assert_eq!(kind(br#"["\udead"]"#), JsonErrorKind::LoneSurrogate);
    assert_eq!(
        kind(b"[12345678901234567890123]"),
        JsonErrorKind::NumberNotIJson
    );
    assert_eq!(kind(b"[-1e999]"), JsonErrorKind::NumberNotIJson);
}

#[test]
fn ten_thousand_deep_text_ends_in_a_depth_error_without_overflow() {
    let deep = "{\"a\":".repeat(10_000) + "1" + &"}".repeat(10_000);
    match json_identity_of_text(deep.as_bytes(), &JsonLimits::default()) {
        Err(IdentityError::Text(e)) => assert_eq!(e.kind, JsonErrorKind::TooDeep),
        other => panic!("expected TooDeep, got {other:?}"),
    }
}

mod stability {
    use proptest::prelude::*;
    use purra_core::{canonicalize, parse_json, JsonLimits};
    use serde_json::{Map, Value};

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-(1i64 << 53) + 1..(1i64 << 53)).prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "\\PC{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 40, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::vec(("\\PC{0,6}", inner), 0..5)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<String, Value>>())),
            ]
        })
    }

    /// Writes `v` with members in reverse order, every string character as a `\u` escape, and every
    /// number in exponent form, so that only meaning is shared with the original text.
    fn respell(v: &Value, out: &mut String) {
        match v {
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(" , ");
                    }
                    respell(item, out);
                }
                out.push(']');
            }
            Value::Object(map) => {
                out.push_str("{ ");
                for (i, (k, item)) in map.iter().rev().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    respell(&Value::String(k.clone()), out);
                    out.push_str(" : ");
                    respell(item, out);
                }
                out.push('}');
            }
            Value::String(s) => {
                out.push('"');
                for unit in s.encode_utf16() {
                    out.push_str(&format!("\\u{unit:04X}"));
                }
                out.push('"');
            }
            Value::Number(n) => match n.as_f64() {
                Some(f) if n.is_f64() => out.push_str(&format!("{f:e}")),
                _ => out.push_str(&n.to_string()),
            },
            other => out.push_str(&other.to_string()),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

        /// The canonical form depends only on meaning: a respelled text (member order, escapes, number
        /// spelling, whitespace) canonicalizes to the same bytes, and the canonical text is a fixed point.
        #[test]
        fn canonical_form_depends_only_on_meaning(v in value()) {
            let canonical = canonicalize(&v).unwrap();
            let mut text = String::new();
            respell(&v, &mut text);
            let reparsed = parse_json(text.as_bytes(), &JsonLimits::default()).unwrap();
            prop_assert_eq!(&canonicalize(&reparsed).unwrap(), &canonical);
            let again = parse_json(canonical.as_bytes(), &JsonLimits::default()).unwrap();
            prop_assert_eq!(canonicalize(&again).unwrap(), canonical);
        }
    }
}
