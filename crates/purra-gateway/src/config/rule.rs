//! Argument rules as configuration data: `len(text) <= 200`, `path within "/srv/notes"`, parsed
//! (and their literals and patterns checked) when the file is read; [`crate::scope`] evaluates them.

use std::fmt;
use std::sync::Arc;

use purra_core::CompiledSchema;
use serde_json::{json, Value};

/// A rule's operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
    NotIn,
    Matches,
    StartsWith,
    EndsWith,
    Within,
}

/// One parsed argument rule.
#[derive(Clone)]
pub struct ArgumentRule {
    pub(crate) text: String,
    pub(crate) len: bool,
    pub(crate) path: Vec<String>,
    pub(crate) op: Op,
    pub(crate) value: Value,
    /// For `matches`: a compiled schema `{"type":"string","pattern":…}` under one property.
    pub(crate) pattern: Option<Arc<CompiledSchema>>,
}

impl fmt::Debug for ArgumentRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ArgumentRule({:?})", self.text)
    }
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

fn parse_path(text: &str) -> Result<Vec<String>, String> {
    let parts: Vec<String> = text.split('.').map(str::to_owned).collect();
    for p in &parts {
        let ok = p.starts_with(is_name_start) && p.chars().all(is_name_char);
        if !ok {
            return Err(format!(
                "{text:?} is not a path such as `name` or `name.inner`"
            ));
        }
    }
    Ok(parts)
}

impl ArgumentRule {
    /// Parses one rule, or says why it cannot be parsed.
    pub fn parse(text: &str) -> Result<ArgumentRule, String> {
        let rest = text.trim_start();
        let term_end = if rest.starts_with("len(") {
            rest.find(')')
                .map(|i| i + 1)
                .ok_or("`len(` is not closed")?
        } else {
            rest.find(char::is_whitespace)
                .ok_or("expected `TERM OP VALUE`, such as `len(text) <= 200`")?
        };
        let (term, rest) = rest.split_at(term_end);
        let (len, path) = match term.strip_prefix("len(").and_then(|t| t.strip_suffix(')')) {
            Some(inner) => (true, parse_path(inner.trim())?),
            None => (false, parse_path(term)?),
        };
        let rest = rest.trim_start();
        let ops: [(&str, Op); 12] = [
            ("not in ", Op::NotIn),
            ("in ", Op::In),
            ("matches ", Op::Matches),
            ("starts_with ", Op::StartsWith),
            ("ends_with ", Op::EndsWith),
            ("within ", Op::Within),
            ("== ", Op::Eq),
            ("!= ", Op::Ne),
            ("<= ", Op::Le),
            (">= ", Op::Ge),
            ("< ", Op::Lt),
            ("> ", Op::Gt),
        ];
        let (op, value_text) = ops
            .iter()
            .find_map(|(word, op)| rest.strip_prefix(word).map(|v| (*op, v)))
            .ok_or_else(|| {
                let found = rest.split_whitespace().next().unwrap_or("");
                format!(
                    "unknown operator {found:?} (expected ==, !=, <, <=, >, >=, in, not in, matches, starts_with, ends_with or within, followed by a space)"
                )
            })?;
        // Every number must mean exactly what it says before anything is compared with it.
        for number in number_tokens(value_text) {
            exact_literal(number)?;
        }
        let value: Value = serde_json::from_str(value_text.trim())
            .map_err(|_| format!("{:?} is not one JSON value", value_text.trim()))?;
        let mut pattern = None;
        match op {
            Op::Lt | Op::Le | Op::Gt | Op::Ge if !value.is_number() => {
                return Err("a comparison needs a number".into())
            }
            Op::In | Op::NotIn if !value.is_array() => {
                return Err("`in` and `not in` need a JSON array".into())
            }
            Op::StartsWith | Op::EndsWith if !value.is_string() => {
                return Err("`starts_with` and `ends_with` need a string".into())
            }
            Op::Within if !value.as_str().is_some_and(normal_path) => {
                return Err(
                    "`within` needs an absolute directory path in normal form, such as \"/srv/notes\" \
                     (starting with /; no empty, . or .. segment, so no trailing /; no NUL or other \
                     control character, \\ or %)"
                        .into(),
                )
            }
            Op::Matches => {
                let Some(p) = value.as_str() else {
                    return Err("`matches` needs a pattern string".into());
                };
                let schema = json!({
                    "type": "object",
                    "properties": {"v": {"type": "string", "pattern": p}},
                });
                let compiled = CompiledSchema::compile(&schema)
                    .map_err(|_| format!("{p:?} is not a supported pattern"))?;
                pattern = Some(Arc::new(compiled));
            }
            _ => {}
        }
        if len && !matches!(op, Op::Eq | Op::Ne | Op::Lt | Op::Le | Op::Gt | Op::Ge) {
            return Err("`len(…)` is compared with ==, !=, <, <=, > or >=".into());
        }
        if len && !value.is_number() {
            return Err("`len(…)` is compared with a number".into());
        }
        Ok(ArgumentRule {
            text: text.to_owned(),
            len,
            path,
            op,
            value,
            pattern,
        })
    }
}

/// Every number of the JSON text `text`, in order, whether or not the text is valid JSON
/// (numbers inside strings are not numbers).
fn number_tokens(text: &str) -> Vec<&str> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() {
                    match b[i] {
                        b'\\' => i += 2,
                        b'"' => {
                            i += 1;
                            break;
                        }
                        _ => i += 1,
                    }
                }
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                i += 1;
                while i < b.len() && matches!(b[i], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-')
                {
                    i += 1;
                }
                out.push(&text[start..i]);
            }
            _ => i += 1,
        }
    }
    out
}

/// Whether a rule's number literal means exactly what it says: an integer within the range
/// arguments carry exactly, or a decimal that is the shortest form of a binary64 number.
fn exact_literal(number: &str) -> Result<(), String> {
    if !number.contains(['.', 'e', 'E']) {
        let in_range = number.len() <= 21
            && number
                .parse::<i128>()
                .is_ok_and(|n| (i128::from(i64::MIN)..=i128::from(u64::MAX)).contains(&n));
        return if in_range {
            Ok(())
        } else {
            Err(format!(
                "the integer {number} cannot be compared exactly: integers must lie within \
                 -9223372036854775808 to 18446744073709551615"
            ))
        };
    }
    // Read as the arguments are read (serde_json), so the check is about the number compared.
    let Ok(read) = serde_json::from_str::<f64>(number) else {
        return Err(format!(
            "the number {number} cannot be represented: it is beyond the largest binary64 number"
        ));
    };
    if decimal(number).is_none() || decimal(number) != decimal(&format!("{read:e}")) {
        return Err(format!(
            "the number {number} cannot be represented exactly: it would be compared as {read}"
        ));
    }
    Ok(())
}

/// A decimal literal as (negative, significant digits without leading or trailing zeros, power
/// of ten): `-1.50e2` is `(true, "15", 1)`; zero has no digits.
fn decimal(text: &str) -> Option<(bool, String, i64)> {
    let (negative, rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text),
    };
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(i) => (&rest[..i], rest[i + 1..].parse::<i64>().ok()?),
        None => (rest, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let mut power = exponent.checked_sub(i64::try_from(fraction.len()).ok()?)?;
    let digits = format!("{whole}{fraction}");
    let mut digits = digits.trim_start_matches('0').to_owned();
    if digits.is_empty() {
        return Some((negative, digits, 0));
    }
    while digits.ends_with('0') {
        digits.pop();
        power = power.checked_add(1)?;
    }
    Some((negative, digits, power))
}

/// Whether `path` is an absolute path in normal form: `/`, or `/` and segments that are not
/// empty, `.` or `..`, without NUL or other control character, `\` or `%`.
pub(crate) fn normal_path(path: &str) -> bool {
    let Some(rest) = path.strip_prefix('/') else {
        return false;
    };
    if path
        .chars()
        .any(|c| c.is_control() || c == '\\' || c == '%')
    {
        return false;
    }
    path == "/"
        || rest
            .split('/')
            .all(|s| !s.is_empty() && s != "." && s != "..")
}
