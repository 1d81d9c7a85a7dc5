//! The YAML frontmatter of a `SKILL.md`, read into JSON: the subset of YAML 1.2 that skills are
//! written in, and nothing read differently from a full YAML parser.
//!
//! Read: block mappings and sequences (a mapping's sequence may sit at the key's own indent),
//! plain scalars (continued on more-indented lines), single- and double-quoted scalars on one
//! line, literal (`|`) and folded (`>`) block scalars with their chomping indicator, flow
//! sequences and mappings on one line, comments. Plain scalars are typed by YAML 1.2's core
//! schema (`null`, `true`, `12`, `0x1f`, `1.5e3`; anything else is a string).
//!
//! Refused, each with the line it is on: anchors, aliases and tags (no alias can multiply the
//! document), complex keys, duplicate keys, tabs in indentation, directives, quoted scalars that
//! span lines, block scalar indentation indicators, numbers JSON cannot hold (`.inf`, `.nan`),
//! nesting deeper than [`MAX_DEPTH`], and frontmatter over [`MAX_FRONTMATTER_BYTES`].

use std::fmt;

use serde_json::{Map, Number, Value};

/// The most bytes of YAML between the `---` lines that are read.
pub const MAX_FRONTMATTER_BYTES: usize = 256 * 1024;
/// The deepest nesting of mappings and sequences read.
pub const MAX_DEPTH: usize = 32;

/// Why a `SKILL.md`'s frontmatter cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrontmatterError {
    /// The 1-based line of `SKILL.md` it is on, when it has one.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for FrontmatterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "line {l}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for FrontmatterError {}

fn err<T>(line: usize, message: impl Into<String>) -> Result<T, FrontmatterError> {
    Err(FrontmatterError {
        line: Some(line),
        message: message.into(),
    })
}

/// A `SKILL.md` split into its frontmatter (as JSON) and the markdown after it.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillMarkdown {
    /// The frontmatter, every field as written.
    pub frontmatter: Map<String, Value>,
    /// The markdown after the closing `---` line.
    pub body: String,
}

/// Reads a `SKILL.md`: a byte order mark is skipped, CRLF read as LF; the first line must be
/// `---`, and the frontmatter ends at the next line that is `---` (trailing blanks allowed).
pub fn parse_skill_md(text: &str) -> Result<SkillMarkdown, FrontmatterError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut rest = text;
    let mut lines: Vec<&str> = Vec::new();
    let mut first = true;
    let mut closed = false;
    let mut bytes = 0usize;
    while !rest.is_empty() {
        let (line, next) = match rest.find('\n') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, ""),
        };
        rest = next;
        let line = line.strip_suffix('\r').unwrap_or(line);
        if first {
            if line.trim_end_matches([' ', '\t']) != "---" {
                return err(1, "SKILL.md must begin with a \"---\" line");
            }
            first = false;
            continue;
        }
        if line.trim_end_matches([' ', '\t']) == "---" {
            closed = true;
            break;
        }
        bytes += line.len() + 1;
        if bytes > MAX_FRONTMATTER_BYTES {
            return err(
                lines.len() + 2,
                format!("the frontmatter is longer than {MAX_FRONTMATTER_BYTES} bytes"),
            );
        }
        lines.push(line);
    }
    if first {
        return err(1, "SKILL.md must begin with a \"---\" line");
    }
    if !closed {
        return Err(FrontmatterError {
            line: None,
            message: "the frontmatter has no closing \"---\" line".into(),
        });
    }
    let frontmatter = parse_yaml(&lines, 2)?;
    Ok(SkillMarkdown {
        frontmatter,
        body: rest.to_owned(),
    })
}

/// Reads YAML lines (numbered from `first_line`) as a mapping; no lines is an empty mapping.
pub fn parse_yaml(
    lines: &[&str],
    first_line: usize,
) -> Result<Map<String, Value>, FrontmatterError> {
    let lines: Vec<Line<'_>> = lines
        .iter()
        .enumerate()
        .map(|(i, raw)| {
            let indent = raw.len() - raw.trim_start_matches(' ').len();
            Line {
                no: first_line + i,
                indent,
                text: &raw[indent..],
                raw,
            }
        })
        .collect();
    let mut p = Parser { lines, at: 0 };
    let Some(first) = p.peek()? else {
        return Ok(Map::new());
    };
    if first.text.starts_with('\u{feff}') {
        return err(
            first.no,
            "a byte order mark inside the frontmatter is not supported",
        );
    }
    if first.text.starts_with('%') {
        return err(first.no, "directives are not supported");
    }
    if is_item(first.text) || key_of(first.text, first.no)?.is_none() {
        return err(
            first.no,
            "the frontmatter must be a mapping of keys to values",
        );
    }
    let map = p.mapping(first.indent, 1)?;
    if let Some(extra) = p.peek()? {
        return err(extra.no, "unexpected content");
    }
    Ok(map)
}

#[derive(Clone, Copy)]
struct Line<'a> {
    no: usize,
    /// Spaces before the text.
    indent: usize,
    /// The line after its indentation.
    text: &'a str,
    raw: &'a str,
}

impl Line<'_> {
    fn blank_or_comment(&self) -> bool {
        let t = self.text.trim_start_matches([' ', '\t']);
        t.is_empty() || t.starts_with('#')
    }
}

struct Parser<'a> {
    lines: Vec<Line<'a>>,
    at: usize,
}

/// Whether `text` starts a block sequence item (`-` then a blank or the end).
fn is_item(text: &str) -> bool {
    text == "-" || text.starts_with("- ") || text.starts_with("-\t")
}

/// `text` without a trailing comment (` #...`) and trailing blanks.
fn strip_comment(text: &str) -> &str {
    let b = text.as_bytes();
    let mut end = text.len();
    for i in 1..b.len() {
        if b[i] == b'#' && (b[i - 1] == b' ' || b[i - 1] == b'\t') {
            end = i;
            break;
        }
    }
    text[..end].trim_end_matches([' ', '\t'])
}

/// Whether the rest after a value is only blanks and a comment.
fn only_comment(rest: &str, no: usize) -> Result<(), FrontmatterError> {
    let t = rest.trim_start_matches([' ', '\t']);
    if t.is_empty() || (t.starts_with('#') && rest.len() > t.len()) {
        Ok(())
    } else {
        err(no, "unexpected text after the value")
    }
}

/// The key of a `key: value` line and the text after its colon; `None` when the line is no
/// mapping entry.
fn key_of(text: &str, no: usize) -> Result<Option<(String, &str)>, FrontmatterError> {
    let first = text.chars().next();
    match first {
        Some('"') | Some('\'') => {
            let (key, end) = quoted(text, no)?;
            let after = &text[end..];
            if after == ":" || after.starts_with(": ") || after.starts_with(":\t") {
                return Ok(Some((key, after[1..].trim_start_matches([' ', '\t']))));
            }
            Ok(None)
        }
        Some('?') if text == "?" || text.starts_with("? ") => {
            err(no, "complex keys (\"?\") are not supported")
        }
        None => Ok(None),
        Some(c) if "[]{}&*!|>%@`#,".contains(c) => Ok(None),
        Some(_) => {
            let b = text.as_bytes();
            for i in 0..b.len() {
                if b[i] == b'#' && i > 0 && (b[i - 1] == b' ' || b[i - 1] == b'\t') {
                    return Ok(None);
                }
                if b[i] == b':' && (i + 1 == b.len() || b[i + 1] == b' ' || b[i + 1] == b'\t') {
                    let key = text[..i].trim_end_matches([' ', '\t']);
                    if key.is_empty() {
                        return Ok(None);
                    }
                    if !matches!(scalar(key, no)?, Value::String(_)) {
                        return err(no, format!("the key {key:?} must be a string; quote it"));
                    }
                    return Ok(Some((
                        key.to_owned(),
                        text[i + 1..].trim_start_matches([' ', '\t']),
                    )));
                }
            }
            Ok(None)
        }
    }
}

impl<'a> Parser<'a> {
    /// The next line with content (comments and blank lines skipped); tabs in its indentation
    /// are refused.
    fn peek(&mut self) -> Result<Option<Line<'a>>, FrontmatterError> {
        while self.at < self.lines.len() && self.lines[self.at].blank_or_comment() {
            self.at += 1;
        }
        match self.lines.get(self.at) {
            Some(l) if l.text.starts_with('\t') => err(l.no, "tabs cannot be used for indentation"),
            Some(l) => Ok(Some(*l)),
            None => Ok(None),
        }
    }

    fn depth(depth: usize, no: usize) -> Result<(), FrontmatterError> {
        if depth > MAX_DEPTH {
            return err(
                no,
                format!("nesting deeper than {MAX_DEPTH} levels is not supported"),
            );
        }
        Ok(())
    }

    fn mapping(
        &mut self,
        indent: usize,
        depth: usize,
    ) -> Result<Map<String, Value>, FrontmatterError> {
        let mut map = Map::new();
        while let Some(line) = self.peek()? {
            Self::depth(depth, line.no)?;
            if line.indent < indent || (line.indent == indent && is_item(line.text)) {
                break;
            }
            if line.indent > indent {
                return err(line.no, "unexpected indentation");
            }
            let Some((key, rest)) = key_of(line.text, line.no)? else {
                return err(line.no, "expected \"key: value\"");
            };
            if map.contains_key(&key) {
                return err(line.no, format!("duplicate key {key:?}"));
            }
            self.at += 1;
            let value = self.value(rest, line, indent, depth, true)?;
            map.insert(key, value);
        }
        Ok(map)
    }

    fn sequence(&mut self, indent: usize, depth: usize) -> Result<Vec<Value>, FrontmatterError> {
        let mut items = Vec::new();
        while let Some(line) = self.peek()? {
            Self::depth(depth, line.no)?;
            if line.indent < indent || !is_item(line.text) {
                if line.indent > indent {
                    return err(line.no, "unexpected indentation");
                }
                break;
            }
            if line.indent > indent {
                return err(line.no, "unexpected indentation");
            }
            let after = &line.text[1..];
            let rest = after.trim_start_matches(' ');
            if after.len() > rest.len() && rest.starts_with('\t') {
                return err(line.no, "tabs cannot be used for indentation");
            }
            let column = line.indent + 1 + (after.len() - rest.len());
            let nested = !rest.is_empty()
                && !rest.starts_with('#')
                && (is_item(rest) || key_of(rest, line.no)?.is_some());
            if nested {
                // `- key: value` or `- - x`: the rest of the line is the first line of a block
                // at its own column.
                self.lines[self.at] = Line {
                    no: line.no,
                    indent: column,
                    text: rest,
                    raw: line.raw,
                };
                items.push(if is_item(rest) {
                    Value::Array(self.sequence(column, depth + 1)?)
                } else {
                    Value::Object(self.mapping(column, depth + 1)?)
                });
                continue;
            }
            self.at += 1;
            items.push(self.value(rest, line, indent, depth, false)?);
        }
        Ok(items)
    }

    /// The value after a key's colon or an item's dash: `rest` is the rest of `line`, whose
    /// key or dash is at `indent`.
    fn value(
        &mut self,
        rest: &str,
        line: Line<'a>,
        indent: usize,
        depth: usize,
        in_mapping: bool,
    ) -> Result<Value, FrontmatterError> {
        if rest.is_empty() || rest.starts_with('#') {
            let Some(next) = self.peek()? else {
                return Ok(Value::Null);
            };
            if next.indent > indent {
                Self::depth(depth + 1, next.no)?;
                if is_item(next.text) {
                    return Ok(Value::Array(self.sequence(next.indent, depth + 1)?));
                }
                if key_of(next.text, next.no)?.is_some() {
                    return Ok(Value::Object(self.mapping(next.indent, depth + 1)?));
                }
                self.at += 1;
                return self.value(next.text, next, indent, depth, false);
            }
            if in_mapping && next.indent == indent && is_item(next.text) {
                Self::depth(depth + 1, next.no)?;
                return Ok(Value::Array(self.sequence(indent, depth + 1)?));
            }
            return Ok(Value::Null);
        }
        let no = line.no;
        match rest.chars().next().unwrap_or(' ') {
            '|' | '>' => self.block_scalar(rest, no, indent),
            '"' | '\'' => {
                let (s, end) = quoted(rest, no)?;
                only_comment(&rest[end..], no)?;
                Ok(Value::String(s))
            }
            '[' | '{' => {
                let mut f = Flow {
                    text: rest,
                    at: 0,
                    no,
                };
                let v = f.value(depth + 1)?;
                only_comment(&rest[f.at..], no)?;
                Ok(v)
            }
            '&' | '*' | '!' => err(no, "anchors, aliases and tags are not supported"),
            c @ ('%' | '@' | '`' | ',' | ']' | '}') => {
                err(no, format!("{c:?} cannot start a plain value; quote it"))
            }
            _ if is_item(rest) => err(no, "a nested sequence must start on its own line"),
            '?' if rest == "?" || rest.starts_with("? ") => {
                err(no, "complex keys (\"?\") are not supported")
            }
            _ => self.plain(rest, no, indent),
        }
    }

    /// A plain scalar, folded over its more-indented continuation lines.
    fn plain(&mut self, first: &str, no: usize, indent: usize) -> Result<Value, FrontmatterError> {
        let mut text = check_plain(strip_comment(first), no)?.to_owned();
        let mut commented = strip_comment(first).len() < first.trim_end_matches([' ', '\t']).len();
        let mut multi = false;
        let mut blanks = 0usize;
        while let Some(next) = self.lines.get(self.at).copied() {
            let t = next.text.trim_start_matches([' ', '\t']);
            if t.is_empty() {
                blanks += 1;
                self.at += 1;
                continue;
            }
            if next.indent <= indent || t.starts_with('#') {
                break;
            }
            if next.text.starts_with('\t') {
                return err(next.no, "tabs cannot be used for indentation");
            }
            if commented {
                return err(
                    next.no,
                    "a comment ends a plain value; quote a value that continues past it",
                );
            }
            let part = check_plain(strip_comment(t), next.no)?;
            commented = strip_comment(t).len() < t.trim_end_matches([' ', '\t']).len();
            if blanks > 0 {
                text.push_str(&"\n".repeat(blanks));
            } else {
                text.push(' ');
            }
            text.push_str(part);
            blanks = 0;
            multi = true;
            self.at += 1;
        }
        if blanks > 0 {
            // Blank lines after the value belong to no one: step back so the caller sees them.
            self.at -= blanks;
        }
        if multi {
            return Ok(Value::String(text));
        }
        scalar(&text, no)
    }

    fn block_scalar(
        &mut self,
        header: &str,
        no: usize,
        indent: usize,
    ) -> Result<Value, FrontmatterError> {
        let folded = header.starts_with('>');
        let after = &header[1..];
        let (chomp, after) = match after.chars().next() {
            Some(c @ ('-' | '+')) => (c, &after[1..]),
            _ => (' ', after),
        };
        if after.starts_with(|c: char| c.is_ascii_digit()) {
            return err(no, "block scalar indentation indicators are not supported");
        }
        if !after.is_empty() && !after.starts_with([' ', '\t']) {
            return err(no, "invalid block scalar header");
        }
        only_comment(after, no)?;
        let mut content: Vec<&str> = Vec::new();
        let mut width: Option<usize> = None;
        while let Some(next) = self.lines.get(self.at).copied() {
            let spaces_only = next.text.is_empty();
            match width {
                None if !spaces_only && next.indent > indent => {
                    if next.text.starts_with('\t') {
                        return err(next.no, "tabs cannot be used for indentation");
                    }
                    width = Some(next.indent);
                }
                None if !spaces_only => break,
                _ => {}
            }
            match width {
                Some(w) if next.raw.len() >= w && next.indent >= w => content.push(&next.raw[w..]),
                Some(w) if spaces_only || next.raw.len() < w && next.raw.trim().is_empty() => {
                    content.push("")
                }
                Some(_) if next.raw.trim().is_empty() => content.push(""),
                Some(_) => break,
                None => content.push(""),
            }
            self.at += 1;
        }
        // Trailing empty lines are chomping's; the lines before are the content.
        let kept = content
            .iter()
            .rposition(|l| !l.is_empty())
            .map_or(0, |i| i + 1);
        let trailing = content.len() - kept;
        let body = &content[..kept];
        let mut out = String::new();
        if folded {
            let mut prev_normal = false;
            let mut empties = 0usize;
            let mut started = false;
            for l in body {
                if l.is_empty() {
                    empties += 1;
                    continue;
                }
                let more = l.starts_with([' ', '\t']);
                if !started {
                    out.push_str(&"\n".repeat(empties));
                } else if prev_normal && !more && empties == 0 {
                    out.push(' ');
                } else if prev_normal && !more {
                    out.push_str(&"\n".repeat(empties));
                } else {
                    out.push_str(&"\n".repeat(empties + 1));
                }
                out.push_str(l);
                prev_normal = !more;
                empties = 0;
                started = true;
            }
        } else {
            out = body.join("\n");
        }
        match chomp {
            '-' => {}
            '+' => out.push_str(&"\n".repeat(usize::from(kept > 0) + trailing)),
            _ if kept > 0 => out.push('\n'),
            _ => {}
        }
        Ok(Value::String(out))
    }
}

/// A plain scalar's text may not hold what would make it something else.
fn check_plain(text: &str, no: usize) -> Result<&str, FrontmatterError> {
    let b = text.as_bytes();
    for i in 0..b.len() {
        if b[i] == b':' && (i + 1 == b.len() || b[i + 1] == b' ' || b[i + 1] == b'\t') {
            return err(no, "a plain value cannot contain \": \"; quote the value");
        }
    }
    Ok(text)
}

/// A quoted scalar at the start of `text` (single- or double-quoted, closed on this line), and
/// the byte offset after its closing quote.
fn quoted(text: &str, no: usize) -> Result<(String, usize), FrontmatterError> {
    const UNCLOSED: &str =
        "a quoted value must close on its line (quoted values across lines are not supported)";
    let quote = text.as_bytes()[0];
    let mut out = String::new();
    let mut chars = text.char_indices().skip(1).peekable();
    while let Some((i, c)) = chars.next() {
        if quote == b'\'' {
            if c == '\'' {
                if let Some((_, '\'')) = chars.peek() {
                    chars.next();
                    out.push('\'');
                    continue;
                }
                return Ok((out, i + 1));
            }
            out.push(c);
            continue;
        }
        match c {
            '"' => return Ok((out, i + 1)),
            '\\' => {
                let Some((_, e)) = chars.next() else {
                    return err(no, UNCLOSED);
                };
                let simple = match e {
                    '0' => Some('\0'),
                    'a' => Some('\u{7}'),
                    'b' => Some('\u{8}'),
                    't' | '\t' => Some('\t'),
                    'n' => Some('\n'),
                    'v' => Some('\u{b}'),
                    'f' => Some('\u{c}'),
                    'r' => Some('\r'),
                    'e' => Some('\u{1b}'),
                    ' ' => Some(' '),
                    '"' => Some('"'),
                    '/' => Some('/'),
                    '\\' => Some('\\'),
                    'N' => Some('\u{85}'),
                    '_' => Some('\u{a0}'),
                    'L' => Some('\u{2028}'),
                    'P' => Some('\u{2029}'),
                    _ => None,
                };
                if let Some(s) = simple {
                    out.push(s);
                    continue;
                }
                let width = match e {
                    'x' => 2,
                    'u' => 4,
                    'U' => 8,
                    _ => return err(no, format!("unknown escape \"\\{e}\"")),
                };
                let mut hex = String::new();
                for _ in 0..width {
                    match chars.next() {
                        Some((_, h)) if h.is_ascii_hexdigit() => hex.push(h),
                        _ => return err(no, format!("\"\\{e}\" needs {width} hexadecimal digits")),
                    }
                }
                let code = u32::from_str_radix(&hex, 16).expect("hex digits");
                match char::from_u32(code) {
                    Some(ch) => out.push(ch),
                    None => return err(no, format!("\"\\{e}{hex}\" is not a character")),
                }
            }
            c => out.push(c),
        }
    }
    err(no, UNCLOSED)
}

/// A plain scalar typed by YAML 1.2's core schema.
fn scalar(text: &str, no: usize) -> Result<Value, FrontmatterError> {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Ok(Value::Null),
        "true" | "True" | "TRUE" => return Ok(Value::Bool(true)),
        "false" | "False" | "FALSE" => return Ok(Value::Bool(false)),
        _ => {}
    }
    let unrepresentable = || {
        err(
            no,
            format!("{text:?} cannot be represented in JSON; quote it"),
        )
    };
    let digits = |s: &str, radix: u32| !s.is_empty() && s.chars().all(|c| c.is_digit(radix));
    let (sign, unsigned) = match text.as_bytes()[0] {
        b'-' => (-1i8, &text[1..]),
        b'+' => (1, &text[1..]),
        _ => (1, text),
    };
    if digits(unsigned, 10) {
        let n = if sign < 0 {
            format!("-{unsigned}").parse::<i64>().ok().map(Number::from)
        } else {
            unsigned.parse::<u64>().ok().map(Number::from)
        };
        return n.map(Value::Number).map_or_else(unrepresentable, Ok);
    }
    for (prefix, radix) in [("0o", 8), ("0x", 16)] {
        if let Some(d) = text.strip_prefix(prefix) {
            if digits(d, radix) {
                return u64::from_str_radix(d, radix)
                    .ok()
                    .map(|n| Value::Number(n.into()))
                    .map_or_else(unrepresentable, Ok);
            }
        }
    }
    if matches!(unsigned, ".inf" | ".Inf" | ".INF") || matches!(text, ".nan" | ".NaN" | ".NAN") {
        return unrepresentable();
    }
    if is_float(unsigned) {
        return match text.parse::<f64>().ok().and_then(Number::from_f64) {
            Some(n) => Ok(Value::Number(n)),
            None => unrepresentable(),
        };
    }
    Ok(Value::String(text.to_owned()))
}

/// `(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`
fn is_float(s: &str) -> bool {
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let num = |d: &str| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit());
    let m_ok = match mantissa.split_once('.') {
        Some(("", frac)) => num(frac),
        Some((int, frac)) => num(int) && (frac.is_empty() || num(frac)),
        None => num(mantissa),
    };
    let e_ok = exponent.is_none_or(|e| num(e.strip_prefix(['-', '+']).unwrap_or(e)));
    m_ok && e_ok
}

/// A flow collection on one line.
struct Flow<'t> {
    text: &'t str,
    at: usize,
    no: usize,
}

impl Flow<'_> {
    fn blanks(&mut self) {
        while self.text[self.at..].starts_with([' ', '\t']) {
            self.at += 1;
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, FrontmatterError> {
        if depth > MAX_DEPTH {
            return err(
                self.no,
                format!("nesting deeper than {MAX_DEPTH} levels is not supported"),
            );
        }
        self.blanks();
        let rest = &self.text[self.at..];
        match rest.chars().next() {
            Some('[') => {
                self.at += 1;
                let mut items = Vec::new();
                loop {
                    self.blanks();
                    if self.text[self.at..].starts_with(']') {
                        self.at += 1;
                        return Ok(Value::Array(items));
                    }
                    items.push(self.value(depth + 1)?);
                    self.blanks();
                    if self.text[self.at..].starts_with(':') {
                        return err(
                            self.no,
                            "mappings inside flow sequences are not supported; quote the value",
                        );
                    }
                    match self.text[self.at..].chars().next() {
                        Some(',') => self.at += 1,
                        Some(']') => {}
                        _ => return err(self.no, "a flow sequence must close on its line"),
                    }
                }
            }
            Some('{') => {
                self.at += 1;
                let mut map = Map::new();
                loop {
                    self.blanks();
                    if self.text[self.at..].starts_with('}') {
                        self.at += 1;
                        return Ok(Value::Object(map));
                    }
                    let key = match self.value(depth + 1)? {
                        Value::String(s) => s,
                        _ => return err(self.no, "a flow mapping's keys must be strings"),
                    };
                    self.blanks();
                    let value = if self.text[self.at..].starts_with(':') {
                        self.at += 1;
                        self.blanks();
                        if self.text[self.at..].starts_with([',', '}']) {
                            Value::Null
                        } else {
                            self.value(depth + 1)?
                        }
                    } else {
                        Value::Null
                    };
                    if map.contains_key(&key) {
                        return err(self.no, format!("duplicate key {key:?}"));
                    }
                    map.insert(key, value);
                    self.blanks();
                    match self.text[self.at..].chars().next() {
                        Some(',') => self.at += 1,
                        Some('}') => {}
                        _ => return err(self.no, "a flow mapping must close on its line"),
                    }
                }
            }
            Some('"') | Some('\'') => {
                let (s, end) = quoted(rest, self.no)?;
                self.at += end;
                Ok(Value::String(s))
            }
            Some(c) if "&*!".contains(c) => {
                err(self.no, "anchors, aliases and tags are not supported")
            }
            Some(_) => {
                let b = rest.as_bytes();
                let mut end = 0;
                while end < b.len() {
                    let c = b[end];
                    if matches!(c, b',' | b'[' | b']' | b'{' | b'}') {
                        break;
                    }
                    if c == b':'
                        && (end + 1 == b.len()
                            || matches!(b[end + 1], b' ' | b'\t' | b',' | b']' | b'}'))
                    {
                        break;
                    }
                    if c == b'#' && end > 0 && matches!(b[end - 1], b' ' | b'\t') {
                        return err(self.no, "a flow collection must close on its line");
                    }
                    end += 1;
                }
                let word = rest[..end].trim_end_matches([' ', '\t']);
                self.at += end;
                scalar(word, self.no)
            }
            None => err(self.no, "a flow collection must close on its line"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fm(yaml: &str) -> Result<Value, FrontmatterError> {
        parse_skill_md(&format!("---\n{yaml}---\nbody\n")).map(|m| Value::Object(m.frontmatter))
    }

    #[test]
    fn the_shapes_skills_are_written_in() {
        let yaml = "name: pdf-processing\n\
description: >\n  Extract, fill\n  and assemble.\n\n  Second paragraph.\n\
license: Apache-2.0 # a comment\n\
allowed-tools: [Read, 'Bash(git:*)', \"x\\ty\"]\n\
metadata:\n  version: \"2.1.0\"\n  author: ada\n\
compat: |\n  line one\n    indented\n  line three\n\
tags:\n- a\n- b: 1\n  c: null\n-\n  - nested\n\
empty:\n\
numbers: {int: 12, neg: -3, hex: 0x1f, oct: 0o17, float: 1.5e3, yes: true, tilde: ~}\n\
plain: one\n  two\n\n  three\n";
        assert_eq!(
            fm(yaml).unwrap(),
            json!({
                "name": "pdf-processing",
                "description": "Extract, fill and assemble.\nSecond paragraph.\n",
                "license": "Apache-2.0",
                "allowed-tools": ["Read", "Bash(git:*)", "x\ty"],
                "metadata": {"version": "2.1.0", "author": "ada"},
                "compat": "line one\n  indented\nline three\n",
                "tags": ["a", {"b": 1, "c": null}, ["nested"]],
                "empty": null,
                "numbers": {"int": 12, "neg": -3, "hex": 31, "oct": 15, "float": 1500.0, "yes": true, "tilde": null},
                "plain": "one two\nthree"
            })
        );
    }

    #[test]
    fn chomping_and_the_body() {
        let md =
            parse_skill_md("\u{feff}---\r\na: |-\r\n  x\r\n\r\nb: |+\n  y\n\n---  \n# Title\n")
                .unwrap();
        assert_eq!(
            Value::Object(md.frontmatter),
            json!({"a": "x", "b": "y\n\n"})
        );
        assert_eq!(md.body, "# Title\n");
        assert_eq!(
            parse_skill_md("---\n---\n").unwrap().frontmatter,
            Map::new()
        );
    }

    #[test]
    fn what_is_refused_says_where() {
        let cases = [
            ("a: &x 1\n", "line 2: anchors, aliases and tags are not supported"),
            ("a: *x\n", "line 2: anchors, aliases and tags are not supported"),
            ("a: !!str 1\n", "line 2: anchors, aliases and tags are not supported"),
            ("a: 1\na: 2\n", "line 3: duplicate key \"a\""),
            ("a:\n\t- x\n", "line 3: tabs cannot be used for indentation"),
            ("a: \"open\n", "line 2: a quoted value must close on its line (quoted values across lines are not supported)"),
            ("a: .inf\n", "line 2: \".inf\" cannot be represented in JSON; quote it"),
            ("a: |2\n  x\n", "line 2: block scalar indentation indicators are not supported"),
            ("? a\n", "line 2: complex keys (\"?\") are not supported"),
            ("- a\n", "line 2: the frontmatter must be a mapping of keys to values"),
            ("a: b: c\n", "line 2: a plain value cannot contain \": \"; quote the value"),
            ("a: 1\n  b: 2\n", "line 3: a plain value cannot contain \": \"; quote the value"),
            ("a: [1, 2\n", "line 2: a flow sequence must close on its line"),
            ("a: 99999999999999999999\n", "line 2: \"99999999999999999999\" cannot be represented in JSON; quote it"),
            ("a: x # c\n  y\n", "line 3: a comment ends a plain value; quote a value that continues past it"),
        ];
        for (yaml, want) in cases {
            assert_eq!(fm(yaml).unwrap_err().to_string(), want, "{yaml:?}");
        }
        assert_eq!(
            parse_skill_md("# no frontmatter\n")
                .unwrap_err()
                .to_string(),
            "line 1: SKILL.md must begin with a \"---\" line"
        );
        assert_eq!(
            parse_skill_md("---\na: 1\n").unwrap_err().to_string(),
            "the frontmatter has no closing \"---\" line"
        );
        let mut deep = String::new();
        for i in 0..40 {
            deep.push_str(&format!("{}k{i}:\n", " ".repeat(i)));
        }
        assert_eq!(
            fm(&deep).unwrap_err().to_string(),
            "line 34: nesting deeper than 32 levels is not supported"
        );
        let long = format!("a: {}\n", "x".repeat(MAX_FRONTMATTER_BYTES));
        assert_eq!(
            fm(&long).unwrap_err().to_string(),
            "line 2: the frontmatter is longer than 262144 bytes"
        );
    }
}
