//! The gateway's layers, enforced: a module imports only from its own layer or the layers below.
//!
//! The order, lowest first: `config` → `rules` → `upstream` → `catalog` →
//! `runtime` → `serve`. [`gateway_modules_import_only_their_own_layer_or_below`] reads every file
//! under `src/`, finds each path that leaves its module (`crate::X`, `$crate::X`, `super::`, in
//! `use` lines and in code; comments, doc comments and string literals are left out), resolves it
//! to the top-level module it names (through `lib.rs`'s re-exports, so `crate::scope` is
//! `rules`) and fails naming file:line and both layers for every import of a higher layer.
//! `lib.rs` declares the layers and is in none; so is this file.
//!
//! Metrics are not cross-cutting here: the families and their registry (`runtime::metrics`) are
//! recorded by the running gateway and rendered by the listener (`serve::metrics`); no lower
//! layer counts anything, so no module is exempt from the order.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The layers, lowest first, each with its top-level modules.
const LAYERS: &[(&str, &[&str])] = &[
    ("config", &["config"]),
    ("rules", &["rules"]),
    ("upstream", &["upstream"]),
    ("catalog", &["catalog"]),
    ("runtime", &["runtime"]),
    ("serve", &["serve"]),
];

/// Files in no layer: the crate root (it declares the layers and re-exports from all of them)
/// and this test.
const UNLAYERED: &[&str] = &["lib.rs", "layers.rs"];

/// Known upward imports, each `(file, module it names, why)`: the test fails on any other, and
/// on one of these that is no longer there (so the list only shrinks).
const ALLOWED: &[(&str, &str, &str)] = &[];

/// One path that leaves its module: where it is and the top-level name it reaches.
#[derive(Debug)]
struct Import {
    line: usize,
    /// The first name after the crate root (`scope` in `crate::scope::Caller`).
    name: String,
    /// The path as written, for the message.
    text: String,
}

/// `text` with comments, string literals and character literals replaced by spaces (newlines
/// kept, so lines keep their numbers).
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let blank = |out: &mut Vec<u8>, c: u8| out.push(if c == b'\n' { b'\n' } else { b' ' });
    let mut i = 0;
    while i < b.len() {
        let rest = &b[i..];
        if rest.starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                out.push(b' ');
                i += 1;
            }
        } else if rest.starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    out.extend_from_slice(b"  ");
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    out.extend_from_slice(b"  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, b[i]);
                    i += 1;
                }
            }
        } else if let Some((open, hashes)) = raw_string_start(rest).filter(|_| starts_word(b, i)) {
            // r"..." or r#"..."#: ends at the quote followed by as many hashes.
            out.extend(std::iter::repeat_n(b' ', open));
            i += open;
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            while i < b.len() && !b[i..].starts_with(&close) {
                blank(&mut out, b[i]);
                i += 1;
            }
            out.extend(std::iter::repeat_n(b' ', close.len().min(b.len() - i)));
            i += close.len();
        } else if b[i] == b'"' {
            out.push(b' ');
            i += 1;
            while i < b.len() && b[i] != b'"' {
                let n = if b[i] == b'\\' { 2 } else { 1 };
                for k in 0..n.min(b.len() - i) {
                    blank(&mut out, b[i + k]);
                }
                i += n;
            }
            out.push(b' ');
            i += 1;
        } else if b[i] == b'\'' && is_char_literal(rest) {
            let mut j = i + 1;
            if b[j] == b'\\' {
                j += 2;
            }
            while j < b.len() && b[j] != b'\'' {
                j += 1;
            }
            out.extend(std::iter::repeat_n(b' ', j + 1 - i));
            i = j + 1;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out.truncate(b.len());
    String::from_utf8_lossy(&out).into_owned()
}

/// Where the text of a raw string starting at `rest` begins and how many `#` close it
/// (`r"`: 2 and 0; `br#"`: 4 and 1), or `None` when none starts there.
fn raw_string_start(rest: &[u8]) -> Option<(usize, usize)> {
    let after_r = rest
        .strip_prefix(b"r")
        .or_else(|| rest.strip_prefix(b"br"))?;
    let hashes = after_r.iter().take_while(|&&c| c == b'#').count();
    let prefix = rest.len() - after_r.len();
    (after_r.get(hashes) == Some(&b'"')).then_some((prefix + hashes + 1, hashes))
}

/// Whether the `'` at the start of `rest` opens a character literal (not a lifetime or label).
fn is_char_literal(rest: &[u8]) -> bool {
    match rest.get(1) {
        Some(b'\\') => true,
        Some(_) => {
            // One character (1 to 4 UTF-8 bytes), then the closing quote.
            let next = &rest[1..rest.len().min(5)];
            let valid = match std::str::from_utf8(next) {
                Ok(s) => s,
                Err(e) => std::str::from_utf8(&next[..e.valid_up_to()]).unwrap_or(""),
            };
            let len = valid.chars().next().map_or(1, char::len_utf8);
            rest.get(1 + len) == Some(&b'\'')
        }
        None => false,
    }
}

/// Whether position `i` of `b` starts a word (is not inside an identifier or after `$`).
fn starts_word(b: &[u8], i: usize) -> bool {
    i == 0 || !(is_ident(b[i - 1]) || b[i - 1] == b'$')
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The identifier at the start of `s`.
fn ident(s: &str) -> &str {
    let end = s.bytes().position(|c| !is_ident(c)).unwrap_or(s.len());
    &s[..end]
}

/// Every path in `code` (comments and literals already blanked) that leaves the file's module
/// `module` (its path below the crate root: `["rules", "scope"]` for `rules/scope.rs`): `crate::`
/// paths, and `super::` chains that climb out of `module`'s top-level module. Inline modules
/// (`mod tests { ... }`) are followed, so `super::` inside one stays in the file.
fn imports(code: &str, module: &[String]) -> Vec<Import> {
    let b = code.as_bytes();
    let mut found = Vec::new();
    // Inline modules open now: (name, the brace depth inside it).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut line = 1;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let starts_word = starts_word(b, i);
        let at_word = |w: &str| starts_word && b[i..].starts_with(w.as_bytes());
        if c == b'\n' {
            line += 1;
        } else if c == b'{' {
            depth += 1;
        } else if c == b'}' {
            if inline.last().is_some_and(|(_, d)| *d == depth) {
                inline.pop();
            }
            depth = depth.saturating_sub(1);
        } else if at_word("mod ") {
            let name = ident(code[i + 4..].trim_start());
            let after = code[i + 4..].trim_start()[name.len()..].trim_start();
            if after.starts_with('{') {
                inline.push((name.to_owned(), depth + 1));
            }
        } else if at_word("crate::") || at_word("$crate::") {
            let at = i + if c == b'$' { 8 } else { 7 };
            for name in first_names(&code[at..]) {
                found.push(Import {
                    line,
                    text: format!("crate::{}", path_from(&code[at..], &name)),
                    name,
                });
            }
            i = at;
            continue;
        } else if at_word("super::") {
            let mut at = i;
            let mut ups = 0;
            while b[at..].starts_with(b"super::") {
                ups += 1;
                at += "super::".len();
            }
            // Where `super` is counted from: the file's module, then its open inline modules.
            let here: Vec<&str> = module
                .iter()
                .map(String::as_str)
                .chain(inline.iter().map(|(n, _)| n.as_str()))
                .collect();
            if ups >= here.len() {
                // Climbs to the crate root: the next names are top-level modules.
                let text = code[i..at].to_owned();
                for name in first_names(&code[at..]) {
                    found.push(Import {
                        line,
                        text: format!("{text}{}", path_from(&code[at..], &name)),
                        name,
                    });
                }
            }
            i = at;
            continue;
        }
        i += 1;
    }
    found
}

/// The first names of the path(s) starting at `s`: `scope::Caller` gives `scope`;
/// `{scope::Caller, policy}` gives `scope` and `policy`; `*` gives `*`.
fn first_names(s: &str) -> Vec<String> {
    let s = s.trim_start();
    if let Some(group) = s.strip_prefix('{') {
        let mut names = Vec::new();
        let mut level = 0;
        let mut start = true;
        for (k, c) in group.char_indices() {
            match c {
                '{' => level += 1,
                '}' if level == 0 => break,
                '}' => level -= 1,
                ',' if level == 0 => start = true,
                c if start && !c.is_whitespace() => {
                    start = false;
                    let name = if c == '*' { "*" } else { ident(&group[k..]) };
                    names.push(name.to_owned());
                }
                _ => {}
            }
        }
        names
    } else if s.starts_with('*') {
        vec!["*".to_owned()]
    } else {
        vec![ident(s).to_owned()]
    }
}

/// The path starting with `name` in `s` (`scope::Caller` in `{scope::Caller, policy}`), for
/// messages.
fn path_from(s: &str, name: &str) -> String {
    let start = s
        .match_indices(name)
        .map(|(k, _)| k)
        .find(|&k| starts_word(s.as_bytes(), k))
        .unwrap_or(0);
    let rest = &s[start..];
    let end = rest
        .bytes()
        .position(|c| !(is_ident(c) || c == b':'))
        .unwrap_or(rest.len());
    rest[..end].trim_end_matches(':').to_owned()
}

/// The layer of every name `crate::NAME` can be: the top-level modules, and what `lib.rs`
/// re-exports from them (`pub use rules::scope;` makes `scope` a name of `rules`).
fn names_to_layers(lib: &str) -> BTreeMap<String, usize> {
    let mut names = BTreeMap::new();
    for (rank, (_, modules)) in LAYERS.iter().enumerate() {
        for m in modules.iter() {
            names.insert((*m).to_owned(), rank);
        }
    }
    let code = code_only(lib);
    for statement in code.split(';') {
        let t = statement.trim();
        let Some(at) = (0..t.len())
            .find(|&k| starts_word(t.as_bytes(), k) && t.as_bytes()[k..].starts_with(b"use "))
        else {
            continue;
        };
        let path = t[at + 4..].trim();
        let Some(&rank) = names.get(ident(path)) else {
            continue;
        };
        for word in path[ident(path).len()..]
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty() && w != &"self")
        {
            names.insert(word.to_owned(), rank);
        }
    }
    names
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("src is readable") {
        let path = entry.expect("src is readable").path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// The module path of the file at `relative` (`rules/scope.rs`: `["rules", "scope"]`;
/// `rules/mod.rs`: `["rules"]`).
fn module_of(relative: &str) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_owned)
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The upward imports under `src`, each as a message, and the allowed ones that were seen.
fn violations(src: &Path) -> (Vec<String>, Vec<(String, String)>) {
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs is readable");
    let names = names_to_layers(&lib);
    let mut wrong = Vec::new();
    let mut allowed_seen = Vec::new();
    for path in rust_files(src) {
        let relative = path
            .strip_prefix(src)
            .expect("under src")
            .to_string_lossy()
            .replace('\\', "/");
        if UNLAYERED.contains(&relative.as_str()) {
            continue;
        }
        let module = module_of(&relative);
        let Some(&own) = names.get(&module[0]) else {
            wrong.push(format!(
                "src/{relative}: module `{}` is in no layer (add it to LAYERS in layers.rs)",
                module[0]
            ));
            continue;
        };
        let text = std::fs::read_to_string(&path).expect("readable");
        for import in imports(&code_only(&text), &module) {
            let Some(&theirs) = names.get(&import.name) else {
                wrong.push(format!(
                    "src/{relative}:{}: `{}` names no module of a layer (import it from its \
                     module, not from the crate root)",
                    import.line, import.text
                ));
                continue;
            };
            if theirs <= own {
                continue;
            }
            if ALLOWED
                .iter()
                .any(|(f, m, _)| *f == relative && *m == import.name)
            {
                allowed_seen.push((relative.clone(), import.name.clone()));
                continue;
            }
            wrong.push(format!(
                "src/{relative}:{}: `{}` imports layer `{}` from layer `{}` (a layer imports only \
                 its own and lower ones: {})",
                import.line,
                import.text,
                LAYERS[theirs].0,
                LAYERS[own].0,
                LAYERS
                    .iter()
                    .map(|(l, _)| *l)
                    .collect::<Vec<_>>()
                    .join(" -> ")
            ));
        }
    }
    (wrong, allowed_seen)
}

#[test]
fn gateway_modules_import_only_their_own_layer_or_below() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (mut wrong, seen) = violations(&src);
    for (file, name, why) in ALLOWED {
        if !seen.iter().any(|(f, n)| f == file && n == name) {
            wrong.push(format!(
                "layers.rs: the allowed import of `{name}` by src/{file} ({why}) is gone: remove it \
                 from ALLOWED"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} import(s) against the layers:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn the_scanner_sees_paths_in_code_and_not_in_comments_or_strings() {
    let code = code_only(
        "use crate::rules::scope; // crate::serve\n\
         /* crate::serve */ let s = \"crate::serve\"; let r = r#\"crate::serve\"#;\n\
         let c = '{'; fn f<'a>(x: &'a str) {}\n\
         use crate::{runtime::gateway::Gateway, serve};\n\
         mod tests { use super::*; fn g() { super::super::serve::x(); } }\n\
         x = super::super::catalog::y;\n",
    );
    let found: Vec<(usize, String)> = imports(&code, &["rules".into(), "scope".into()])
        .into_iter()
        .map(|i| (i.line, i.name))
        .collect();
    assert_eq!(
        found,
        [
            (1, "rules".to_owned()),
            (4, "runtime".to_owned()),
            (4, "serve".to_owned()),
            // In `mod tests` of rules/scope.rs, `super::super::` is `rules`: it stays in the file's
            // layer. Outside it, `super::super::` is the crate root.
            (6, "catalog".to_owned()),
        ]
    );
}

#[test]
fn lib_rs_re_exports_name_their_layer() {
    let names = names_to_layers(
        "mod rules;\npub use rules::{limit, policy};\npub use runtime::gateway::{Gateway, Log};\n\
         use upstream::skills;\n",
    );
    assert_eq!(names["policy"], 1);
    assert_eq!(names["Gateway"], 4);
    assert_eq!(names["skills"], 2);
    assert_eq!(names["serve"], 5);
}
