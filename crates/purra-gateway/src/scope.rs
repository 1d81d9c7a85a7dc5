//! Scope rules as data: which callers may use a binding, and what its arguments must satisfy.
//!
//! A caller is the principal it acts as and the client name it declared in `initialize`
//! (`clientInfo.name`). An argument rule is one line `TERM OP VALUE`:
//!
//! | part | forms |
//! |---|---|
//! | `TERM` | a path into the arguments, `name` or `name.inner` (names are `[A-Za-z_][A-Za-z0-9_-]*`), or `len(PATH)`: characters of a string, items of an array, members of an object |
//! | `OP` | `==`, `!=`, `<`, `<=`, `>`, `>=` (numbers), `in`, `not in` (a JSON array), `matches` (an ECMA-262 pattern, as JSON Schema's `pattern`), `starts_with`, `ends_with` (strings) |
//! | `VALUE` | one JSON value |
//!
//! For example `len(text) <= 200`, `path starts_with "/srv/notes/"`, `mode in ["draft", "final"]`,
//! `count <= 10`. A rule whose path is missing from the arguments, or whose value has the wrong
//! type for the operator, does not hold: the call is outside the scope. Every rule must hold.

use std::fmt;
use std::sync::Arc;

use purra_core::{CompiledSchema, RunContext, ScopeCheck, ScopeDecision};
use serde_json::{json, Value};

use crate::config::{ScopeConfig, ScopeRules};

/// Who is calling through the gateway.
#[derive(Debug, Clone, PartialEq)]
pub struct Caller {
    /// The principal the caller acts as.
    pub principal: String,
    /// The client's declared name (`clientInfo.name`), empty when it gave none.
    pub client: String,
    /// The authenticated identity behind `principal` (issuer, subject, scopes and every claim
    /// of its token), when an authentication layer in front of the gateway vouched for one;
    /// `None` for stdio callers, who act as the configured local principal.
    pub identity: Option<purra_protocol::Principal>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
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
}

/// One parsed argument rule.
#[derive(Clone)]
pub struct ArgumentRule {
    text: String,
    len: bool,
    path: Vec<String>,
    op: Op,
    value: Value,
    /// For `matches`: a compiled schema `{"type":"string","pattern":…}` under one property.
    pattern: Option<Arc<CompiledSchema>>,
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
        let ops: [(&str, Op); 11] = [
            ("not in ", Op::NotIn),
            ("in ", Op::In),
            ("matches ", Op::Matches),
            ("starts_with ", Op::StartsWith),
            ("ends_with ", Op::EndsWith),
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
                    "unknown operator {found:?} (expected ==, !=, <, <=, >, >=, in, not in, matches, starts_with or ends_with, followed by a space)"
                )
            })?;
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

    /// Whether the rule holds for `arguments`.
    pub fn holds(&self, arguments: &Value) -> bool {
        let mut at = arguments;
        for p in &self.path {
            match at.get(p) {
                Some(v) => at = v,
                None => return false,
            }
        }
        let subject = if self.len {
            let n = match at {
                Value::String(s) => s.chars().count(),
                Value::Array(a) => a.len(),
                Value::Object(o) => o.len(),
                _ => return false,
            };
            json!(n)
        } else {
            at.clone()
        };
        let num = |v: &Value| v.as_f64();
        match self.op {
            Op::Eq => json_eq(&subject, &self.value),
            Op::Ne => !json_eq(&subject, &self.value),
            Op::Lt | Op::Le | Op::Gt | Op::Ge => {
                let (Some(a), Some(b)) = (num(&subject), num(&self.value)) else {
                    return false;
                };
                match self.op {
                    Op::Lt => a < b,
                    Op::Le => a <= b,
                    Op::Gt => a > b,
                    _ => a >= b,
                }
            }
            Op::In | Op::NotIn => {
                let found = self
                    .value
                    .as_array()
                    .is_some_and(|items| items.iter().any(|i| json_eq(i, &subject)));
                found == (self.op == Op::In)
            }
            Op::StartsWith | Op::EndsWith => {
                let (Some(s), Some(affix)) = (subject.as_str(), self.value.as_str()) else {
                    return false;
                };
                if self.op == Op::StartsWith {
                    s.starts_with(affix)
                } else {
                    s.ends_with(affix)
                }
            }
            Op::Matches => {
                subject.is_string()
                    && self
                        .pattern
                        .as_ref()
                        .is_some_and(|p| p.is_valid(&json!({ "v": subject })))
            }
        }
    }
}

/// JSON equality with numbers compared by value (`1` equals `1.0`).
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// A binding's compiled scope.
#[derive(Debug, Clone)]
pub enum Scope {
    /// No scope check (reads only, explicitly configured).
    Open,
    /// Caller and argument rules.
    Rules {
        /// Allowed principals (`None`: any).
        principals: Option<Vec<String>>,
        /// Allowed client names (`None`: any).
        clients: Option<Vec<String>>,
        /// Argument rules; all must hold.
        arguments: Vec<ArgumentRule>,
    },
}

impl Scope {
    /// Compiles configured rules (already checked by [`crate::GatewayConfig::check`]).
    pub fn compile(config: &ScopeConfig) -> Result<Scope, String> {
        match config {
            ScopeConfig::Open => Ok(Scope::Open),
            ScopeConfig::Rules(r) => Scope::from_rules(r),
        }
    }

    /// Compiles a rules table.
    pub fn from_rules(r: &ScopeRules) -> Result<Scope, String> {
        Ok(Scope::Rules {
            principals: r.principals.clone(),
            clients: r.clients.clone(),
            arguments: r
                .arguments
                .iter()
                .map(|a| ArgumentRule::parse(a))
                .collect::<Result<_, _>>()?,
        })
    }

    /// Whether `caller` may use the binding.
    pub fn allows_caller(&self, caller: &Caller) -> bool {
        match self {
            Scope::Open => true,
            Scope::Rules {
                principals,
                clients,
                ..
            } => {
                principals
                    .as_ref()
                    .is_none_or(|p| p.contains(&caller.principal))
                    && clients.as_ref().is_none_or(|c| c.contains(&caller.client))
            }
        }
    }

    /// Whether every argument rule holds.
    pub fn allows_arguments(&self, arguments: &Value) -> bool {
        match self {
            Scope::Open => true,
            Scope::Rules { arguments: r, .. } => r.iter().all(|rule| rule.holds(arguments)),
        }
    }

    /// Core's scope check for the binding's registration: the argument rules, evaluated again by
    /// the adapter just before the request is sent (caller rules are checked by the gateway,
    /// which knows the caller).
    pub fn scope_check(&self) -> ScopeCheck {
        match self {
            Scope::Open => ScopeCheck::OptOut,
            Scope::Rules { .. } => {
                let scope = self.clone();
                ScopeCheck::check(move |args: &Value, _run: &RunContext| {
                    if scope.allows_arguments(args) {
                        ScopeDecision::Allow
                    } else {
                        ScopeDecision::Deny
                    }
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holds(rule: &str, args: Value) -> bool {
        ArgumentRule::parse(rule).unwrap().holds(&args)
    }

    #[test]
    fn rules_parse_and_hold_exactly() {
        assert!(holds("len(text) <= 5", json!({"text": "héllo"})));
        assert!(!holds("len(text) <= 5", json!({"text": "héllo!"})));
        assert!(!holds("len(text) <= 5", json!({"other": "x"})));
        assert!(holds("count < 10", json!({"count": 9.5})));
        assert!(!holds("count < 10", json!({"count": "9"})));
        assert!(holds("count == 1", json!({"count": 1.0})));
        assert!(holds("mode in [\"a\", \"b\"]", json!({"mode": "b"})));
        assert!(!holds("mode not in [\"a\", \"b\"]", json!({"mode": "b"})));
        assert!(holds(
            "doc.path starts_with \"/srv/\"",
            json!({"doc": {"path": "/srv/x"}})
        ));
        assert!(!holds(
            "doc.path starts_with \"/srv/\"",
            json!({"doc": {"path": "/etc/x"}})
        ));
        assert!(holds("name ends_with \".txt\"", json!({"name": "a.txt"})));
        assert!(holds("id matches \"^[a-z]+\\\\d$\"", json!({"id": "abc1"})));
        assert!(!holds("id matches \"^[a-z]+\\\\d$\"", json!({"id": "abc"})));
        assert!(holds("flag != true", json!({"flag": false})));
        assert!(holds("len(tags) >= 2", json!({"tags": [1, 2]})));
    }

    #[test]
    fn rules_that_cannot_parse_say_why() {
        let err = |rule: &str| ArgumentRule::parse(rule).unwrap_err();
        assert_eq!(
            err("len(text) <== 200"),
            "unknown operator \"<==\" (expected ==, !=, <, <=, >, >=, in, not in, matches, starts_with or ends_with, followed by a space)"
        );
        assert_eq!(
            err("text"),
            "expected `TERM OP VALUE`, such as `len(text) <= 200`"
        );
        assert_eq!(err("len(text <= 2"), "`len(` is not closed");
        assert_eq!(
            err("te/xt == 1"),
            "\"te/xt\" is not a path such as `name` or `name.inner`"
        );
        assert_eq!(err("text == nope"), "\"nope\" is not one JSON value");
        assert_eq!(err("count < \"9\""), "a comparison needs a number");
        assert_eq!(err("mode in \"a\""), "`in` and `not in` need a JSON array");
        assert_eq!(
            err("id matches \"(?=x)\""),
            "\"(?=x)\" is not a supported pattern"
        );
        assert_eq!(
            err("len(x) in [1]"),
            "`len(…)` is compared with ==, !=, <, <=, > or >="
        );
    }

    #[test]
    fn callers_are_matched_by_principal_and_client() {
        let scope = Scope::from_rules(&ScopeRules {
            principals: Some(vec!["local".into()]),
            clients: Some(vec!["fixture".into()]),
            arguments: vec![],
        })
        .unwrap();
        let caller = |p: &str, c: &str| Caller {
            identity: None,
            principal: p.into(),
            client: c.into(),
        };
        assert!(scope.allows_caller(&caller("local", "fixture")));
        assert!(!scope.allows_caller(&caller("local", "other")));
        assert!(!scope.allows_caller(&caller("alice", "fixture")));
        assert!(Scope::Open.allows_caller(&caller("x", "y")));
    }
}
