//! A bounded JSON text decoder that enforces I-JSON (RFC 7493) before a value exists.
//!
//! `serde_json::from_slice` stops at a fixed recursion limit of 128 but accepts duplicate keys (the last
//! one wins), lone surrogate escapes (as U+FFFD when lossy, or an error) and integers that silently lose
//! precision. [`parse_json`] is the entry point for untrusted text: it checks the byte size first, then
//! checks depth *before* descending into an array or object and counts nodes as it goes, so a
//! 10 000-deep document costs at most `max_depth` stack frames and ends in [`JsonErrorKind::TooDeep`].
//!
//! I-JSON rules enforced here (and by purra-core's `identity` module for values built in memory):
//! - object member names are unique ([`JsonErrorKind::DuplicateKey`]);
//! - strings are valid Unicode: no lone surrogate escapes ([`JsonErrorKind::LoneSurrogate`]);
//! - numbers are IEEE-754 doubles: an integer literal (no fraction, no exponent) must be exactly
//!   representable as a double or be that double's own ECMAScript spelling (`295147905179352830000`
//!   is 2^68 as RFC 8785 writes it; `9007199254740993` is refused because it would silently become
//!   `9007199254740992`), and no literal may overflow to infinity ([`JsonErrorKind::NumberNotIJson`]).
//!   Literals with a fraction or exponent are rounded to the nearest double, as ECMAScript's `JSON.parse` does.

use serde_json::{Map, Number, Value};
use std::fmt;

/// The hard ceiling for any configured depth: recursion in this crate never goes deeper.
pub const MAX_DEPTH_CEILING: usize = 512;

/// Budgets applied while decoding JSON text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JsonLimits {
    /// Maximum size of the text in bytes.
    pub max_bytes: usize,
    /// Maximum nesting depth of arrays and objects (a scalar root has depth 0); capped at [`MAX_DEPTH_CEILING`].
    pub max_depth: usize,
    /// Maximum number of values (scalars, arrays, objects; member names are not counted).
    pub max_nodes: usize,
}

impl Default for JsonLimits {
    /// 1 MiB, depth 64, 100 000 nodes.
    fn default() -> Self {
        JsonLimits {
            max_bytes: 1 << 20,
            max_depth: 64,
            max_nodes: 100_000,
        }
    }
}

/// Why a JSON text was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum JsonErrorKind {
    /// The text exceeds `max_bytes`.
    TooLarge,
    /// Nesting exceeds `max_depth`.
    TooDeep,
    /// The document has more than `max_nodes` values.
    TooManyNodes,
    /// The text is not JSON.
    Syntax,
    /// The text is not valid UTF-8.
    InvalidUtf8,
    /// A `\u` escape names a lone surrogate.
    LoneSurrogate,
    /// An object repeats a member name.
    DuplicateKey,
    /// A number is not representable as an IEEE-754 double as I-JSON requires.
    NumberNotIJson,
}

/// A refused JSON text: what went wrong and the byte offset where it was noticed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JsonError {
    /// What went wrong.
    pub kind: JsonErrorKind,
    /// Byte offset in the text.
    pub offset: usize,
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            JsonErrorKind::TooLarge => "JSON text exceeds the byte limit",
            JsonErrorKind::TooDeep => "JSON nesting exceeds the depth limit",
            JsonErrorKind::TooManyNodes => "JSON document exceeds the node limit",
            JsonErrorKind::Syntax => "invalid JSON syntax",
            JsonErrorKind::InvalidUtf8 => "JSON text is not valid UTF-8",
            JsonErrorKind::LoneSurrogate => "JSON string contains a lone surrogate",
            JsonErrorKind::DuplicateKey => "JSON object repeats a member name",
            JsonErrorKind::NumberNotIJson => "JSON number is not an exact IEEE-754 double (I-JSON)",
        };
        write!(f, "{what} at byte {}", self.offset)
    }
}

impl std::error::Error for JsonError {}

/// Decodes `text` as I-JSON within `limits`.
pub fn parse_json(text: &[u8], limits: &JsonLimits) -> Result<Value, JsonError> {
    if text.len() > limits.max_bytes {
        return Err(JsonError {
            kind: JsonErrorKind::TooLarge,
            offset: limits.max_bytes,
        });
    }
    let mut parser = Parser {
        text,
        pos: 0,
        nodes: 0,
        max_nodes: limits.max_nodes,
        max_depth: limits.max_depth.min(MAX_DEPTH_CEILING),
    };
    parser.skip_ws();
    let value = parser.value(0)?;
    parser.skip_ws();
    if parser.pos != text.len() {
        return Err(parser.err(JsonErrorKind::Syntax));
    }
    Ok(value)
}

/// Whether an integer literal of any length denotes exactly the double `f`.
fn i128_is_exact_double_text(literal: &str, f: f64) -> bool {
    literal.len() <= 39
        && literal
            .parse::<i128>()
            .is_ok_and(|n| i128_is_exact_double(n) && n as f64 == f)
}

/// Whether an integer is exactly representable as an IEEE-754 double.
#[doc(hidden)] // for purra-core's `identity`, not a public item of this crate
pub fn i128_is_exact_double(n: i128) -> bool {
    let f = n as f64;
    f.is_finite() && f.abs() < 1.7e38 && (f as i128) == n
}

struct Parser<'a> {
    text: &'a [u8],
    pos: usize,
    nodes: usize,
    max_nodes: usize,
    max_depth: usize,
}

impl Parser<'_> {
    fn err(&self, kind: JsonErrorKind) -> JsonError {
        JsonError {
            kind,
            offset: self.pos,
        }
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.text.get(self.pos) {
            self.pos += 1;
        }
    }

    fn expect_literal(&mut self, lit: &[u8]) -> Result<(), JsonError> {
        if self.text[self.pos..].starts_with(lit) {
            self.pos += lit.len();
            Ok(())
        } else {
            Err(self.err(JsonErrorKind::Syntax))
        }
    }

    fn count_node(&mut self) -> Result<(), JsonError> {
        self.nodes += 1;
        if self.nodes > self.max_nodes {
            return Err(self.err(JsonErrorKind::TooManyNodes));
        }
        Ok(())
    }

    /// Parses one value whose container nesting is `depth`.
    fn value(&mut self, depth: usize) -> Result<Value, JsonError> {
        self.count_node()?;
        match self.text.get(self.pos) {
            None => Err(self.err(JsonErrorKind::Syntax)),
            Some(b'n') => self.expect_literal(b"null").map(|()| Value::Null),
            Some(b't') => self.expect_literal(b"true").map(|()| Value::Bool(true)),
            Some(b'f') => self.expect_literal(b"false").map(|()| Value::Bool(false)),
            Some(b'"') => self.string().map(Value::String),
            Some(b'[') => {
                // Depth is checked before descending: this is what bounds the recursion.
                if depth >= self.max_depth {
                    return Err(self.err(JsonErrorKind::TooDeep));
                }
                self.pos += 1;
                let mut items = Vec::new();
                self.skip_ws();
                if self.text.get(self.pos) == Some(&b']') {
                    self.pos += 1;
                    return Ok(Value::Array(items));
                }
                loop {
                    self.skip_ws();
                    items.push(self.value(depth + 1)?);
                    self.skip_ws();
                    match self.text.get(self.pos) {
                        Some(b',') => self.pos += 1,
                        Some(b']') => {
                            self.pos += 1;
                            return Ok(Value::Array(items));
                        }
                        _ => return Err(self.err(JsonErrorKind::Syntax)),
                    }
                }
            }
            Some(b'{') => {
                if depth >= self.max_depth {
                    return Err(self.err(JsonErrorKind::TooDeep));
                }
                self.pos += 1;
                let mut map = Map::new();
                self.skip_ws();
                if self.text.get(self.pos) == Some(&b'}') {
                    self.pos += 1;
                    return Ok(Value::Object(map));
                }
                loop {
                    self.skip_ws();
                    if self.text.get(self.pos) != Some(&b'"') {
                        return Err(self.err(JsonErrorKind::Syntax));
                    }
                    let key_offset = self.pos;
                    let key = self.string()?;
                    self.skip_ws();
                    if self.text.get(self.pos) != Some(&b':') {
                        return Err(self.err(JsonErrorKind::Syntax));
                    }
                    self.pos += 1;
                    self.skip_ws();
                    let value = self.value(depth + 1)?;
                    if map.contains_key(&key) {
                        return Err(JsonError {
                            kind: JsonErrorKind::DuplicateKey,
                            offset: key_offset,
                        });
                    }
                    map.insert(key, value);
                    self.skip_ws();
                    match self.text.get(self.pos) {
                        Some(b',') => self.pos += 1,
                        Some(b'}') => {
                            self.pos += 1;
                            return Ok(Value::Object(map));
                        }
                        _ => return Err(self.err(JsonErrorKind::Syntax)),
                    }
                }
            }
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.err(JsonErrorKind::Syntax)),
        }
    }

    fn hex4(&mut self) -> Result<u32, JsonError> {
        let digits = self
            .text
            .get(self.pos..self.pos + 4)
            .ok_or_else(|| self.err(JsonErrorKind::Syntax))?;
        let mut n = 0u32;
        for d in digits {
            let v = (*d as char)
                .to_digit(16)
                .ok_or_else(|| self.err(JsonErrorKind::Syntax))?;
            n = n * 16 + v;
        }
        self.pos += 4;
        Ok(n)
    }

    fn string(&mut self) -> Result<String, JsonError> {
        self.pos += 1; // opening quote
        let mut out = String::new();
        loop {
            let start = self.pos;
            while let Some(&b) = self.text.get(self.pos) {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            let run = std::str::from_utf8(&self.text[start..self.pos]).map_err(|e| JsonError {
                kind: JsonErrorKind::InvalidUtf8,
                offset: start + e.valid_up_to(),
            })?;
            out.push_str(run);
            match self.text.get(self.pos) {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let esc = *self
                        .text
                        .get(self.pos)
                        .ok_or_else(|| self.err(JsonErrorKind::Syntax))?;
                    self.pos += 1;
                    match esc {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let at = self.pos - 2;
                            let hi = self.hex4()?;
                            let lone = JsonError {
                                kind: JsonErrorKind::LoneSurrogate,
                                offset: at,
                            };
                            let c = if (0xD800..0xDC00).contains(&hi) {
                                if self.text.get(self.pos..self.pos + 2) != Some(b"\\u") {
                                    return Err(lone);
                                }
                                self.pos += 2;
                                let lo = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return Err(lone);
                                }
                                0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                            } else if (0xDC00..0xE000).contains(&hi) {
                                return Err(lone);
                            } else {
                                hi
                            };
                            out.push(char::from_u32(c).ok_or(lone)?);
                        }
                        _ => return Err(self.err(JsonErrorKind::Syntax)),
                    }
                }
                // A raw control character or the end of the text.
                _ => return Err(self.err(JsonErrorKind::Syntax)),
            }
        }
    }

    fn number(&mut self) -> Result<Value, JsonError> {
        let start = self.pos;
        let digits = |p: &mut Parser<'_>| {
            let s = p.pos;
            while let Some(b'0'..=b'9') = p.text.get(p.pos) {
                p.pos += 1;
            }
            p.pos - s
        };
        if self.text.get(self.pos) == Some(&b'-') {
            self.pos += 1;
        }
        let int_start = self.pos;
        let n_int = digits(self);
        if n_int == 0 || (n_int > 1 && self.text[int_start] == b'0') {
            return Err(self.err(JsonErrorKind::Syntax));
        }
        let mut integral = true;
        if self.text.get(self.pos) == Some(&b'.') {
            self.pos += 1;
            integral = false;
            if digits(self) == 0 {
                return Err(self.err(JsonErrorKind::Syntax));
            }
        }
        if let Some(b'e' | b'E') = self.text.get(self.pos) {
            self.pos += 1;
            integral = false;
            if let Some(b'+' | b'-') = self.text.get(self.pos) {
                self.pos += 1;
            }
            if digits(self) == 0 {
                return Err(self.err(JsonErrorKind::Syntax));
            }
        }
        // The slice holds only ASCII digits, signs, '.', 'e' by construction.
        let literal = std::str::from_utf8(&self.text[start..self.pos]).unwrap_or("");
        let not_ijson = JsonError {
            kind: JsonErrorKind::NumberNotIJson,
            offset: start,
        };
        if integral && n_int <= 38 {
            let n: i128 = literal.parse().map_err(|_| not_ijson)?;
            if let Ok(u) = u64::try_from(n) {
                if i128_is_exact_double(n) {
                    return Ok(Value::Number(u.into()));
                }
            } else if let Ok(i) = i64::try_from(n) {
                if i128_is_exact_double(n) {
                    return Ok(Value::Number(i.into()));
                }
            }
        }
        let f: f64 = literal.parse().map_err(|_| not_ijson)?;
        if !f.is_finite() {
            return Err(not_ijson);
        }
        // An integer literal that a double cannot hold exactly is accepted only when it is the double's
        // own ECMAScript spelling (as RFC 8785 writes 2^68 as 295147905179352830000); anything else,
        // such as 9007199254740993, would silently change value.
        if integral
            && !(i128_is_exact_double_text(literal, f)
                || ryu_js::Buffer::new().format_finite(f) == literal)
        {
            return Err(not_ijson);
        }
        Number::from_f64(f).map(Value::Number).ok_or(not_ijson)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(s: &str) -> Result<Value, JsonErrorKind> {
        parse_json(s.as_bytes(), &JsonLimits::default()).map_err(|e| e.kind)
    }

    #[test]
    fn parses_plain_json() {
        assert_eq!(
            parse(r#" {"a": [1, -2, 3.5, true, null, "x\u00e9\ud83d\ude00"]} "#),
            Ok(json!({"a": [1, -2, 3.5, true, null, "x\u{e9}\u{1f600}"]}))
        );
    }

    #[test]
    fn rejects_non_ijson() {
        assert_eq!(parse(r#"{"a":1,"a":2}"#), Err(JsonErrorKind::DuplicateKey));
        assert_eq!(parse(r#""\ud800""#), Err(JsonErrorKind::LoneSurrogate));
        assert_eq!(parse(r#""\udc00x""#), Err(JsonErrorKind::LoneSurrogate));
        assert_eq!(
            parse(r#""\ud800\u0041""#),
            Err(JsonErrorKind::LoneSurrogate)
        );
        assert_eq!(
            parse("9007199254740993"),
            Err(JsonErrorKind::NumberNotIJson)
        );
        assert_eq!(parse("1e400"), Err(JsonErrorKind::NumberNotIJson));
        assert_eq!(parse("-1e400"), Err(JsonErrorKind::NumberNotIJson));
        assert_eq!(
            parse("295147905179352830000"),
            Ok(json!(295147905179352830000.0))
        );
        assert_eq!(
            parse("295147905179352830001"),
            Err(JsonErrorKind::NumberNotIJson)
        );
        assert_eq!(parse("9007199254740992"), Ok(json!(9007199254740992u64)));
        assert_eq!(parse("-9223372036854775808"), Ok(json!(i64::MIN)));
        assert_eq!(
            parse("18446744073709551616"),
            Ok(json!(18446744073709551616.0))
        );
        assert_eq!(parse("01"), Err(JsonErrorKind::Syntax));
        assert_eq!(parse("1."), Err(JsonErrorKind::Syntax));
        assert_eq!(parse("\"a\u{1}\""), Err(JsonErrorKind::Syntax));
        assert_eq!(parse("[1,]"), Err(JsonErrorKind::Syntax));
        assert_eq!(parse("[1] x"), Err(JsonErrorKind::Syntax));
        assert_eq!(
            parse_json(b"\"\xff\"", &JsonLimits::default()).map_err(|e| e.kind),
            Err(JsonErrorKind::InvalidUtf8)
        );
    }

    #[test]
    fn budgets_end_deep_and_wide_documents() {
        let deep = "[".repeat(10_000) + &"]".repeat(10_000);
        let err = parse_json(deep.as_bytes(), &JsonLimits::default()).unwrap_err();
        assert_eq!(
            err,
            JsonError {
                kind: JsonErrorKind::TooDeep,
                offset: 64
            }
        );
        let limits = JsonLimits {
            max_depth: 100_000,
            ..JsonLimits::default()
        };
        let err = parse_json(deep.as_bytes(), &limits).unwrap_err();
        assert_eq!(err.kind, JsonErrorKind::TooDeep);
        assert_eq!(err.offset, MAX_DEPTH_CEILING);
        let wide = format!("[{}0]", "0,".repeat(100_000));
        assert_eq!(
            parse_json(
                wide.as_bytes(),
                &JsonLimits {
                    max_bytes: 1 << 30,
                    ..JsonLimits::default()
                }
            )
            .unwrap_err()
            .kind,
            JsonErrorKind::TooManyNodes
        );
        let small = JsonLimits {
            max_bytes: 3,
            ..JsonLimits::default()
        };
        assert_eq!(
            parse_json(b"[1,2]", &small).unwrap_err().kind,
            JsonErrorKind::TooLarge
        );
    }
}
