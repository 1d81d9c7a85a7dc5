//! Project conventions checked on every source file: each Rust file opens with a `//!` line
//! saying what it is for, and no stub macro is left behind; and ARCHITECTURE.md stays a map
//! whose invariants each name a test that exists.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name();
        if name == "target" || name == "node_modules" || name.to_string_lossy().starts_with('.') {
            continue;
        }
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn every_rust_file_opens_with_a_module_doc_line_and_has_no_stubs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for dir in ["crates", "bench", "consumers"] {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(files.len() > 50, "found only {} files", files.len());
    let stub_macros = [concat!("todo", "!("), concat!("unimplemented", "!(")];
    let mut bad = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        if !text.starts_with("//!") {
            bad.push(format!("{}: does not open with a //! line", f.display()));
        }
        for m in stub_macros {
            if text.contains(m) {
                bad.push(format!("{}: contains {m}", f.display()));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// The names of the functions defined (`fn NAME`) in the given files.
fn defined_fns(files: &[PathBuf]) -> std::collections::HashSet<String> {
    let mut names = std::collections::HashSet::new();
    for f in files {
        let text = std::fs::read_to_string(f).unwrap();
        for (i, _) in text.match_indices("fn ") {
            if i > 0 && text[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let name: String = text[i + 3..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                names.insert(name);
            }
        }
    }
    names
}

/// ARCHITECTURE.md stays a map: at most 40 000 bytes, no line over 120 characters, and every
/// invariant is one line, `Invariant: WHAT (`TEST`)`, whose test is a `fn TEST` under crates/ or
/// consumers/ (specifications, defaults and test lists live in the guide, docs/src).
#[test]
fn architecture_is_a_map_whose_invariants_name_tests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    assert!(
        text.len() <= 40_000,
        "ARCHITECTURE.md is {} bytes, over 40 000: move specifications to the guide",
        text.len()
    );
    let long: Vec<String> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.chars().count() > 120)
        .map(|(i, l)| format!("line {}: {} characters", i + 1, l.chars().count()))
        .collect();
    assert!(
        long.is_empty(),
        "ARCHITECTURE.md lines over 120 characters:\n{long:#?}"
    );

    let mut files = Vec::new();
    for dir in ["crates", "consumers"] {
        rust_files(&root.join(dir), &mut files);
    }
    let defined = defined_fns(&files);
    let mut invariants = 0;
    let mut bad = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let Some(rest) = line.strip_prefix("Invariant: ") else {
            if line.contains("Invariant:") {
                bad.push(format!(
                    "line {}: an invariant not in the one-line form",
                    i + 1
                ));
            }
            continue;
        };
        invariants += 1;
        let test = rest
            .strip_suffix("`)")
            .and_then(|r| r.rsplit_once("(`"))
            .map(|(_, name)| name);
        match test {
            Some(name) if defined.contains(name) => {}
            Some(name) => bad.push(format!(
                "line {}: no `fn {name}` under crates/ or consumers/",
                i + 1
            )),
            None => bad.push(format!(
                "line {}: names no test as (`TEST`) at its end",
                i + 1
            )),
        }
    }
    assert!(
        invariants >= 50,
        "only {invariants} invariant lines in ARCHITECTURE.md"
    );
    assert!(bad.is_empty(), "ARCHITECTURE.md invariants:\n{bad:#?}");
}
