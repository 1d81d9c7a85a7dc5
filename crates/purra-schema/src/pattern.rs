//! Translation of JSON Schema `pattern` (ECMA-262 syntax) into the `regex` crate's syntax.
//!
//! JSON Schema patterns are ECMA-262 regular expressions; the `regex` crate has a different dialect and
//! guarantees linear-time matching, so `(a+)+$` cannot backtrack catastrophically. Only a common subset
//! of ECMA-262 is accepted, and within it the meaning is preserved:
//!
//! | ECMA-262 | translated to | why |
//! |---|---|---|
//! | `\d` `\D` | `[0-9]` `[^0-9]` | `regex` makes them Unicode-aware |
//! | `\w` `\W` | `[A-Za-z0-9_]` and its negation | same |
//! | `\s` `\S` | ECMA-262 WhiteSpace and LineTerminator code points | `regex` uses the Unicode White_Space property |
//! | `\b` `\B` | `(?-u:\b)` `(?-u:\B)` (ASCII word boundary); `[\b]` is U+0008 | same |
//! | `.` | any code point but `\n`, `\r`, U+2028, U+2029 | `regex` only excludes `\n` |
//! | `[` `&` `~` inside a class | escaped | `regex` has nested classes and set operations |
//! | `{` that does not start a quantifier | `\{` | ECMA-262 Annex B reads it literally |
//! | `\uXXXX` | `\x{XXXX}` | a surrogate code unit is refused |
//!
//! Refused, because `regex` cannot express them or reads them differently: look-ahead and look-behind
//! (`(?=`, `(?!`, `(?<=`, `(?<!`), back-references and octal escapes (`\1`, `\0`, `\k<name>`), inline
//! flags (`(?i)`), `(?P<`, Unicode property escapes (`\p{…}`), `\c` control escapes, `\u{…}`, an
//! empty class `[]` or `[^]`, a `--` inside a class, and escapes of letters other than those listed.
//! Patterns are unanchored searches, as in ECMA-262 `RegExp.prototype.test`.

/// ECMA-262 WhiteSpace and LineTerminator code points, as the body of a character class.
const ECMA_SPACE: &str =
    "\\t\\n\\x0B\\x0C\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}";

/// Translates an ECMA-262 pattern, or says why it is outside the accepted subset.
pub(crate) fn translate(pattern: &str) -> Result<String, &'static str> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut in_class = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        match c {
            '\\' => {
                let e = *chars
                    .get(i)
                    .ok_or("a pattern cannot end with a backslash")?;
                i += 1;
                match e {
                    'd' => out.push_str(if in_class { "0-9" } else { "[0-9]" }),
                    'D' => out.push_str("[^0-9]"),
                    'w' => out.push_str(if in_class {
                        "A-Za-z0-9_"
                    } else {
                        "[A-Za-z0-9_]"
                    }),
                    'W' => out.push_str("[^A-Za-z0-9_]"),
                    's' if in_class => out.push_str(ECMA_SPACE),
                    's' => {
                        out.push('[');
                        out.push_str(ECMA_SPACE);
                        out.push(']');
                    }
                    'S' => {
                        out.push_str("[^");
                        out.push_str(ECMA_SPACE);
                        out.push(']');
                    }
                    'b' if in_class => out.push_str("\\x08"),
                    'b' => out.push_str("(?-u:\\b)"),
                    'B' if !in_class => out.push_str("(?-u:\\B)"),
                    't' | 'n' | 'r' | 'f' | 'v' => {
                        out.push('\\');
                        out.push(e);
                    }
                    'x' => {
                        let hex: String = chars.get(i..i + 2).unwrap_or(&[]).iter().collect();
                        if hex.len() != 2 || !hex.chars().all(|h| h.is_ascii_hexdigit()) {
                            return Err("\\x needs two hex digits");
                        }
                        i += 2;
                        out.push_str("\\x");
                        out.push_str(&hex);
                    }
                    'u' => {
                        let hex: String = chars.get(i..i + 4).unwrap_or(&[]).iter().collect();
                        let code = (hex.len() == 4)
                            .then(|| u32::from_str_radix(&hex, 16).ok())
                            .flatten()
                            .ok_or("\\u needs four hex digits")?;
                        if (0xD800..0xE000).contains(&code) {
                            return Err("surrogate escapes are not supported");
                        }
                        i += 4;
                        out.push_str(&format!("\\x{{{code:X}}}"));
                    }
                    e if e.is_ascii_punctuation() => {
                        out.push('\\');
                        out.push(e);
                    }
                    '0'..='9' => return Err("back-references and octal escapes are not supported"),
                    _ => return Err("this escape is not supported"),
                }
            }
            '[' if in_class => out.push_str("\\["),
            '[' => {
                in_class = true;
                out.push('[');
                if chars.get(i) == Some(&'^') {
                    out.push('^');
                    i += 1;
                }
                if chars.get(i) == Some(&']') {
                    return Err("empty character classes are not supported");
                }
            }
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            '&' | '~' if in_class => {
                out.push('\\');
                out.push(c);
            }
            '-' if in_class && chars.get(i) == Some(&'-') => {
                return Err("'--' inside a class is not supported")
            }
            '.' if !in_class => out.push_str("[^\\n\\r\\x{2028}\\x{2029}]"),
            '(' if !in_class && chars.get(i) == Some(&'?') => {
                match (chars.get(i + 1), chars.get(i + 2)) {
                    (Some(':'), _) => {
                        out.push_str("(?:");
                        i += 2;
                    }
                    (Some('<'), Some(n)) if *n != '=' && *n != '!' => {
                        out.push_str("(?<");
                        i += 2;
                    }
                    (Some('=' | '!'), _) | (Some('<'), _) => {
                        return Err("look-around is not supported")
                    }
                    _ => return Err("inline flags are not supported"),
                }
            }
            '{' if !in_class => {
                // A quantifier is `{n}`, `{n,}` or `{n,m}`; anything else is a literal brace.
                let rest: String = chars[i..].iter().take_while(|c| **c != '}').collect();
                let closed = i + rest.chars().count() < chars.len();
                let mut parts = rest.splitn(2, ',');
                let first = parts.next().unwrap_or("");
                let second = parts.next();
                let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
                let quantifier =
                    closed && digits(first) && second.is_none_or(|s| s.is_empty() || digits(s));
                if quantifier {
                    out.push('{');
                    out.push_str(&rest);
                    out.push('}');
                    i += rest.chars().count() + 1;
                } else {
                    out.push_str("\\{");
                }
            }
            '}' if !in_class => out.push_str("\\}"),
            _ => out.push(c),
        }
    }
    if in_class {
        return Err("unclosed character class");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::translate;

    #[test]
    fn translates_ecma_classes_and_refuses_the_rest() {
        assert_eq!(translate(r"^\d+$").unwrap(), "^[0-9]+$");
        assert_eq!(translate(r"[\w-]").unwrap(), "[A-Za-z0-9_-]");
        assert_eq!(translate(r"a.b").unwrap(), "a[^\\n\\r\\x{2028}\\x{2029}]b");
        assert_eq!(translate(r"a{2,3}b{").unwrap(), "a{2,3}b\\{");
        assert_eq!(translate(r"x{,3}").unwrap(), "x\\{,3\\}");
        assert_eq!(translate(r"[[&]").unwrap(), "[\\[\\&]");
        assert_eq!(translate(r"\u00e9\/").unwrap(), "\\x{E9}\\/");
        assert_eq!(translate(r"(?:a)(?<n>b)").unwrap(), "(?:a)(?<n>b)");
        assert_eq!(translate(r"a(?=b)"), Err("look-around is not supported"));
        assert_eq!(translate(r"(?<!a)b"), Err("look-around is not supported"));
        assert_eq!(
            translate(r"(a)\1"),
            Err("back-references and octal escapes are not supported")
        );
        assert_eq!(translate(r"(?i)a"), Err("inline flags are not supported"));
        assert_eq!(translate(r"\p{L}"), Err("this escape is not supported"));
        assert_eq!(
            translate(r"[]a]"),
            Err("empty character classes are not supported")
        );
        assert_eq!(translate(r"[a"), Err("unclosed character class"));
    }
}
