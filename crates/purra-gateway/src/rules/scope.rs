//! Scope rules as data: which callers may use a binding, and what its arguments must satisfy.
//!
//! A caller is the principal it acts as and the client name it declared in `initialize`
//! (`clientInfo.name`). The client name is the caller's own claim, not authentication: any
//! client can call itself `claude-code`. Authority comes from the principal (with
//! `[gateway.auth]`, the token's `ISSUER#SUBJECT`) or from policies on the token's claims.
//! An argument rule is one line `TERM OP VALUE`:
//!
//! | part | forms |
//! |---|---|
//! | `TERM` | a path into the arguments, `name` or `name.inner` (names are `[A-Za-z_][A-Za-z0-9_-]*`), or `len(PATH)`: characters of a string, items of an array, members of an object |
//! | `OP` | `==`, `!=`, `<`, `<=`, `>`, `>=` (numbers), `in`, `not in` (a JSON array), `matches` (an ECMA-262 pattern, as JSON Schema's `pattern`), `starts_with`, `ends_with` (strings), `within` (a directory) |
//! | `VALUE` | one JSON value |
//!
//! For example `len(text) <= 200`, `path within "/srv/notes"`, `mode in ["draft", "final"]`,
//! `count <= 10`. A rule whose path is missing from the arguments, or whose value has the wrong
//! type for the operator, does not hold: the call is outside the scope. Every rule must hold.
//!
//! `starts_with` and `ends_with` compare strings as they are, character for character: they know
//! nothing of paths, so `path starts_with "/srv/notes/"` admits `"/srv/notes/../../etc/passwd"`.
//! For paths use `within`: `path within "/srv/notes"` holds when the argument is `/srv/notes`
//! itself or a path below it, in normal form, compared segment by segment. The directory must be
//! an absolute path in normal form, and so must the argument, or the rule does not hold: it
//! starts with `/`, has no empty segment (no `//`, no trailing `/`), no `.` or `..` segment, and
//! no NUL or other control character, no `\` (another system's separator) and no `%` (an
//! upstream that decodes percent-encoding would read `%2e%2e` as `..`). Nothing is resolved:
//! a path that would need normalizing is refused rather than normalized, since the gateway cannot
//! know what the upstream does with it (symbolic links included). `path within "/"` admits every
//! absolute path in normal form.
//!
//! Numbers are compared exactly, by their mathematical value: an argument that is an integer is
//! compared as that integer (`id == 9007199254740993` does not admit `9007199254740992`), a
//! decimal as the binary64 number it was read as (and is sent upstream as), and an integer with
//! a decimal by value, so `1.0 == 1` holds and `1.5 > 1` holds. A rule's number must mean exactly
//! what it says, or the rule is a configuration mistake: an integer literal (no fraction, no
//! exponent) must lie within -9223372036854775808 to 18446744073709551615 (the integers an
//! argument carries exactly), and a decimal literal must be the shortest form of a binary64
//! number (`0.1`, `2.5`, `1e-3` are; `1e400` and `0.30000000000000001` are not). `==`, `!=`,
//! `in` and `not in` compare every number inside arrays and objects the same way.

use std::cmp::Ordering;

use purra_core::{RunContext, ScopeCheck, ScopeDecision};
use serde_json::{json, Number, Value};

pub use crate::config::rule::ArgumentRule;
use crate::config::rule::{normal_path, Op};
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

impl ArgumentRule {
    /// The rule as the configuration wrote it.
    pub fn text(&self) -> &str {
        self.text.trim()
    }

    /// The path of the value the rule looks at, dotted (`path`, `doc.path`).
    pub fn path(&self) -> String {
        self.path.join(".")
    }

    /// Why the rule cannot hold for any arguments `input_schema` admits: it names an argument
    /// the schema does not declare (`None` when every name of its path is declared, or the
    /// schema leaves the place open). The reason names the argument, `whose` schema it is and the
    /// arguments declared there, with the closest as a suggestion.
    pub fn missing_in(&self, input_schema: &Value, whose: &str) -> Option<String> {
        let mut at = input_schema;
        for (depth, name) in self.path.iter().enumerate() {
            let declared = at.get("properties").and_then(Value::as_object);
            let open = at.get("patternProperties").is_some()
                || matches!(at.get("additionalProperties"), Some(v) if v != &Value::Bool(false));
            match declared {
                Some(props) if props.contains_key(name) => at = &props[name],
                _ if open => return None,
                // Below the top, a value without declared members is not looked into.
                None if depth > 0 => return None,
                declared => {
                    let names: Vec<&str> = declared
                        .map(|p| p.keys().map(String::as_str).collect())
                        .unwrap_or_default();
                    let shown = self.path[..=depth].join(".");
                    let takes = if names.is_empty() {
                        "it takes none there".to_owned()
                    } else {
                        format!("it takes: {}", names.join(", "))
                    };
                    let hint = closest(name, &names)
                        .map(|c| {
                            let mut p = self.path[..depth].to_vec();
                            p.push(c.to_owned());
                            format!("; did you mean `{}`?", p.join("."))
                        })
                        .unwrap_or_default();
                    return Some(format!(
                        "names the argument `{shown}`, which {whose} does not take ({takes}{hint})"
                    ));
                }
            }
        }
        None
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
        match self.op {
            Op::Eq => json_eq(&subject, &self.value),
            Op::Ne => !json_eq(&subject, &self.value),
            Op::Lt | Op::Le | Op::Gt | Op::Ge => {
                let (Value::Number(a), Value::Number(b)) = (&subject, &self.value) else {
                    return false;
                };
                let order = cmp_num(Num::of(a), Num::of(b));
                match self.op {
                    Op::Lt => order == Ordering::Less,
                    Op::Le => order != Ordering::Greater,
                    Op::Gt => order == Ordering::Greater,
                    _ => order != Ordering::Less,
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
            Op::Within => {
                let (Some(path), Some(dir)) = (subject.as_str(), self.value.as_str()) else {
                    return false;
                };
                within(path, dir)
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

/// JSON equality with numbers compared exactly by value (`1` equals `1.0`, `9007199254740993`
/// is not `9007199254740992`) at any depth; objects regardless of member order. The recursion
/// goes no deeper than the rule's own value.
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => cmp_num(Num::of(x), Num::of(y)) == Ordering::Equal,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// A JSON number as it is held: an integer exactly (serde_json keeps every `u64` and `i64`
/// exactly), anything else as the binary64 number it was read as.
#[derive(Clone, Copy, Debug)]
enum Num {
    Int(i128),
    Float(f64),
}

impl Num {
    fn of(n: &Number) -> Num {
        if let Some(u) = n.as_u64() {
            Num::Int(i128::from(u))
        } else if let Some(i) = n.as_i64() {
            Num::Int(i128::from(i))
        } else {
            // serde_json holds no NaN or infinity: every other number is a finite f64.
            Num::Float(n.as_f64().unwrap_or(0.0))
        }
    }
}

/// Compares two numbers by their mathematical value; nothing is rounded.
fn cmp_num(a: Num, b: Num) -> Ordering {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => x.cmp(&y),
        // Finite on both sides (-0.0 and 0.0 are one number).
        (Num::Float(x), Num::Float(y)) => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
        (Num::Int(x), Num::Float(y)) => cmp_int_float(x, y),
        (Num::Float(x), Num::Int(y)) => cmp_int_float(y, x).reverse(),
    }
}

/// Compares an integer with a finite binary64 number exactly.
fn cmp_int_float(i: i128, f: f64) -> Ordering {
    // 2^127: every i128 is below it and at or above its negation.
    const LIMIT: f64 = 170_141_183_460_469_231_731_687_303_715_884_105_728.0;
    if f >= LIMIT {
        return Ordering::Less;
    }
    if f < -LIMIT {
        return Ordering::Greater;
    }
    // A float below 2^127 in magnitude without its fraction converts to i128 exactly.
    let whole = f.trunc();
    #[allow(clippy::cast_possible_truncation)]
    let w = whole as i128;
    match i.cmp(&w) {
        Ordering::Equal => {
            let fraction = f - whole;
            if fraction > 0.0 {
                Ordering::Less
            } else if fraction < 0.0 {
                Ordering::Greater
            } else {
                Ordering::Equal
            }
        }
        other => other,
    }
}

/// Whether `path` is the directory `dir` or below it, both in normal form.
fn within(path: &str, dir: &str) -> bool {
    if !normal_path(path) || !normal_path(dir) {
        return false;
    }
    dir == "/"
        || path
            .strip_prefix(dir)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// The name of `names` closest to `name` (at most two edits away, and fewer than its length),
/// for a did-you-mean.
fn closest<'a>(name: &str, names: &[&'a str]) -> Option<&'a str> {
    let distance = |a: &str, b: &str| {
        let b: Vec<char> = b.chars().collect();
        let mut row: Vec<usize> = (0..=b.len()).collect();
        for (i, ca) in a.chars().enumerate() {
            let mut prev = row[0];
            row[0] = i + 1;
            for (j, cb) in b.iter().enumerate() {
                let cur = row[j + 1];
                row[j + 1] = if ca == *cb {
                    prev
                } else {
                    1 + prev.min(cur).min(row[j])
                };
                prev = cur;
            }
        }
        row[b.len()]
    };
    names
        .iter()
        .map(|n| (distance(name, n), *n))
        .filter(|(d, _)| *d <= 2 && *d < name.chars().count())
        .min_by_key(|(d, _)| *d)
        .map(|(_, n)| n)
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

    /// Why `caller` may not call with `arguments`, or `None` when every rule holds. The reason
    /// is the host's own text: the rule that did not hold and the path of the value it looked
    /// at, never the value itself.
    pub fn refusal(&self, caller: &Caller, arguments: &Value) -> Option<String> {
        let Scope::Rules {
            principals,
            clients,
            arguments: rules,
        } = self
        else {
            return None;
        };
        if principals
            .as_ref()
            .is_some_and(|p| !p.contains(&caller.principal))
        {
            return Some("the caller's principal is not one of scope.principals".into());
        }
        if clients
            .as_ref()
            .is_some_and(|c| !c.contains(&caller.client))
        {
            return Some("the caller's client name is not one of scope.clients".into());
        }
        let failed = rules.iter().find(|r| !r.holds(arguments))?;
        let present = failed
            .path
            .iter()
            .try_fold(arguments, |at, p| at.get(p))
            .is_some();
        Some(if present {
            format!(
                "the argument rule `{}` does not hold for the value at `{}`",
                failed.text(),
                failed.path()
            )
        } else {
            format!(
                "the argument rule `{}` does not hold: the arguments have no value at `{}`",
                failed.text(),
                failed.path()
            )
        })
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

    /// Issue 44, defect 4: a refusal names the rule that did not hold and the value's path,
    /// never the value; a rule on an argument the schema does not declare is found.
    #[test]
    fn refusals_name_the_rule_and_the_path_never_the_value() {
        let scope = Scope::from_rules(&ScopeRules {
            principals: Some(vec!["local".into()]),
            clients: None,
            arguments: vec!["len(doc.text) <= 3".into(), "mode in [\"a\"]".into()],
        })
        .unwrap();
        let who = Caller {
            principal: "local".into(),
            client: "c".into(),
            identity: None,
        };
        assert_eq!(
            scope.refusal(&who, &json!({"doc": {"text": "secret value"}, "mode": "a"})),
            Some(
                "the argument rule `len(doc.text) <= 3` does not hold for the value at `doc.text`"
                    .into()
            )
        );
        assert_eq!(
            scope.refusal(&who, &json!({"doc": {"text": "ok"}})),
            Some("the argument rule `mode in [\"a\"]` does not hold: the arguments have no value at `mode`".into())
        );
        assert_eq!(
            scope.refusal(&who, &json!({"doc": {"text": "ok"}, "mode": "a"})),
            None
        );
        let stranger = Caller {
            principal: "mallory".into(),
            ..who
        };
        assert_eq!(
            scope.refusal(&stranger, &json!({})),
            Some("the caller's principal is not one of scope.principals".into())
        );

        let schema = json!({"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}});
        let rule = |r: &str| {
            ArgumentRule::parse(r)
                .unwrap()
                .missing_in(&schema, "the tool \"w\"")
        };
        assert_eq!(
            rule("pth within \"/srv\""),
            Some("names the argument `pth`, which the tool \"w\" does not take (it takes: path, content; did you mean `path`?)".into())
        );
        assert_eq!(
            rule("len(zzzzzz) <= 3"),
            Some("names the argument `zzzzzz`, which the tool \"w\" does not take (it takes: path, content)".into())
        );
        assert_eq!(rule("path within \"/srv\""), None);
        // Below a declared string, nothing is looked into; an open object is not checked.
        assert_eq!(rule("path.x == 1"), None);
        let open = json!({"type": "object", "additionalProperties": true});
        assert_eq!(
            ArgumentRule::parse("any == 1")
                .unwrap()
                .missing_in(&open, "t"),
            None
        );
    }

    #[test]
    fn rules_that_cannot_parse_say_why() {
        let err = |rule: &str| ArgumentRule::parse(rule).unwrap_err();
        assert_eq!(
            err("len(text) <== 200"),
            "unknown operator \"<==\" (expected ==, !=, <, <=, >, >=, in, not in, matches, starts_with, ends_with or within, followed by a space)"
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

    /// Finding 3 of issue 40 (paths): `path starts_with "/srv/notes/"` admitted
    /// `"/srv/notes/../../etc/passwd"`. `starts_with` stays a plain string comparison (it still
    /// admits it, as documented); `within` compares paths in normal form and refuses every
    /// spelling that would need normalizing.
    #[test]
    fn argument_rules_cannot_be_walked_around_with_paths() {
        let traversal = json!({"path": "/srv/notes/../../etc/passwd"});
        assert!(holds("path starts_with \"/srv/notes/\"", traversal.clone()));
        assert!(!holds("path within \"/srv/notes\"", traversal));
        for inside in [
            "/srv/notes",
            "/srv/notes/a.txt",
            "/srv/notes/sub/b",
            "/srv/notes/.hidden",
            "/srv/notes/a..b",
        ] {
            assert!(
                holds("path within \"/srv/notes\"", json!({ "path": inside })),
                "{inside}"
            );
        }
        for outside in [
            "/srv/notes/..",
            "/srv/notes/./a",
            "/srv/notes/.",
            "/srv/notes/a/../../../etc/passwd",
            "/srv/notes//a",
            "/srv//notes/a",
            "/srv/notes/",
            "/srv/notes/a/",
            "/srv/notesx/a",
            "/srv/note",
            "/srv",
            "srv/notes/a",
            "",
            "/srv/notes/a\u{0}.txt",
            "/srv/notes/a\n",
            "/srv/notes/..\\..\\etc",
            "/srv/notes/%2e%2e/%2e%2e/etc/passwd",
            "/srv/notes/a%2fb",
            "/srv/notes/..%2f..%2fetc",
        ] {
            assert!(
                !holds("path within \"/srv/notes\"", json!({ "path": outside })),
                "{outside:?}"
            );
        }
        // Not a string: does not hold.
        assert!(!holds(
            "path within \"/srv/notes\"",
            json!({"path": ["/srv/notes/a"]})
        ));
        assert!(!holds(
            "path within \"/srv/notes\"",
            json!({"other": "/srv/notes/a"})
        ));
        // The root admits every absolute path in normal form, and nothing else.
        assert!(holds("path within \"/\"", json!({"path": "/etc/passwd"})));
        assert!(holds("path within \"/\"", json!({"path": "/"})));
        assert!(!holds("path within \"/\"", json!({"path": "/etc/../x"})));
        // The directory itself must be in normal form.
        let err = |rule: &str| ArgumentRule::parse(rule).unwrap_err();
        let want =
            "`within` needs an absolute directory path in normal form, such as \"/srv/notes\" \
                    (starting with /; no empty, . or .. segment, so no trailing /; no NUL or other \
                    control character, \\ or %)";
        for dir in [
            "\"/srv/notes/\"",
            "\"srv/notes\"",
            "\"/srv/../etc\"",
            "\"/srv/./notes\"",
            "\"//srv\"",
            "\"/srv%2fnotes\"",
            "\"\"",
            "1",
            "[\"/srv\"]",
        ] {
            assert_eq!(err(&format!("path within {dir}")), want, "{dir}");
        }
        assert_eq!(
            err("len(path) within \"/srv\""),
            "`len(…)` is compared with ==, !=, <, <=, > or >="
        );
    }

    /// Finding 3 of issue 40 (numbers): `id == 9007199254740993` admitted `9007199254740992`
    /// (both compared as the same f64). Integers are compared exactly, decimals by their exact
    /// value, and a literal that cannot mean exactly what it says is refused.
    #[test]
    fn argument_rules_cannot_be_walked_around_with_numbers() {
        assert!(!holds(
            "id == 9007199254740993",
            json!({"id": 9_007_199_254_740_992u64})
        ));
        assert!(holds(
            "id == 9007199254740993",
            json!({"id": 9_007_199_254_740_993u64})
        ));
        assert!(holds(
            "id != 9007199254740993",
            json!({"id": 9_007_199_254_740_992u64})
        ));
        assert!(!holds(
            "id in [9007199254740993]",
            json!({"id": 9_007_199_254_740_992u64})
        ));
        assert!(holds(
            "id not in [9007199254740993]",
            json!({"id": 9_007_199_254_740_992u64})
        ));
        assert!(!holds(
            "id <= 9007199254740992",
            json!({"id": 9_007_199_254_740_993u64})
        ));
        assert!(holds(
            "id > 9007199254740992",
            json!({"id": 9_007_199_254_740_993u64})
        ));
        assert!(!holds("id < 18446744073709551615", json!({"id": u64::MAX})));
        assert!(holds("id <= 18446744073709551615", json!({"id": u64::MAX})));
        assert!(holds("id >= -9223372036854775808", json!({"id": i64::MIN})));
        assert!(!holds("id > -9223372036854775808", json!({"id": i64::MIN})));
        // An argument too large for u64 arrives as the binary64 number it is sent as: compared
        // with an integer by value, exactly.
        assert!(!holds(
            "id <= 18446744073709551615",
            json!({"id": 18_446_744_073_709_551_616.0})
        ));
        assert!(holds(
            "id > 18446744073709551615",
            json!({"id": 18_446_744_073_709_551_616.0})
        ));
        // A decimal argument that reads as 2^53 is 2^53, not 2^53 + 1.
        assert!(!holds(
            "id == 9007199254740993",
            json!({"id": 9_007_199_254_740_992.0})
        ));
        assert!(holds(
            "id < 9007199254740993",
            json!({"id": 9_007_199_254_740_992.0})
        ));
        // Integers and decimals by value: 1.0 is 1.
        assert!(holds("count == 1", json!({"count": 1.0})));
        assert!(holds("count == 1.0", json!({"count": 1})));
        assert!(holds("count == 0", json!({"count": -0.0})));
        assert!(!holds(
            "count == 1",
            json!({"count": 1.000_000_000_000_000_2})
        ));
        assert!(holds(
            "count > 1",
            json!({"count": 1.000_000_000_000_000_2})
        ));
        assert!(holds("ratio <= 0.5", json!({"ratio": 0.5})));
        assert!(!holds("ratio < 0.5", json!({"ratio": 0.5})));
        assert!(holds("price == 0.1", json!({"price": 0.1})));
        assert!(holds("pair == [1, 2.5]", json!({"pair": [1.0, 2.5]})));
        assert!(!holds("pair == [1, 2]", json!({"pair": [1, 3]})));
        assert!(holds("o == {\"a\": 1}", json!({"o": {"a": 1.0}})));
        assert!(!holds(
            "o == {\"a\": 9007199254740993}",
            json!({"o": {"a": 9_007_199_254_740_992u64}})
        ));
        assert!(holds("len(tags) <= 2.0", json!({"tags": [1, 2]})));
        // Literals that cannot mean what they say are configuration mistakes.
        let err = |rule: &str| ArgumentRule::parse(rule).unwrap_err();
        assert_eq!(
            err("id == 1e400"),
            "the number 1e400 cannot be represented: it is beyond the largest binary64 number"
        );
        assert_eq!(
            err("id == 1234567890123456789012345678901234567890"),
            "the integer 1234567890123456789012345678901234567890 cannot be compared exactly: \
             integers must lie within -9223372036854775808 to 18446744073709551615"
        );
        assert_eq!(
            err("id <= 18446744073709551616"),
            "the integer 18446744073709551616 cannot be compared exactly: integers must lie \
             within -9223372036854775808 to 18446744073709551615"
        );
        assert_eq!(
            err("id >= -9223372036854775809"),
            "the integer -9223372036854775809 cannot be compared exactly: integers must lie \
             within -9223372036854775808 to 18446744073709551615"
        );
        assert_eq!(
            err("id == 1.00000000000000000001"),
            "the number 1.00000000000000000001 cannot be represented exactly: it would be \
             compared as 1"
        );
        assert_eq!(
            err("x < 0.30000000000000001"),
            "the number 0.30000000000000001 cannot be represented exactly: it would be compared \
             as 0.3"
        );
        assert_eq!(
            err("id in [1, 2, 1e999]"),
            "the number 1e999 cannot be represented: it is beyond the largest binary64 number"
        );
        assert_eq!(
            err("o == {\"a\": [99999999999999999999]}"),
            "the integer 99999999999999999999 cannot be compared exactly: integers must lie \
             within -9223372036854775808 to 18446744073709551615"
        );
        // Numbers inside strings are text.
        assert!(holds("s == \"1e400\"", json!({"s": "1e400"})));
        for fine in [
            "x < 0.1",
            "x < 2.50",
            "x < 1e-3",
            "x < 1.5E+2",
            "x < -0.0",
            "x < 1e308",
        ] {
            assert!(ArgumentRule::parse(fine).is_ok(), "{fine}");
        }
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
