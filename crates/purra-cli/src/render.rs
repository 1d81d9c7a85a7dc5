//! Readable forms of results: text as is, structured content pretty-printed, media summarized;
//! and the tables of the store subcommands, each column as wide as its widest value.

use purra_protocol::types::{Content, ResourceContents};
use serde_json::Value;

/// A byte count for people: `512 B`, `1.2 KiB`, `3.4 MiB`.
pub fn human_size(bytes: u64) -> String {
    const KIB: f64 = 1024.0;
    // Precision is irrelevant for a display size.
    #[allow(clippy::cast_precision_loss)]
    let b = bytes as f64;
    if bytes < 1024 {
        format!("{bytes} B")
    } else if b < KIB * KIB {
        format!("{:.1} KiB", b / KIB)
    } else if b < KIB * KIB * KIB {
        format!("{:.1} MiB", b / (KIB * KIB))
    } else {
        format!("{:.1} GiB", b / (KIB * KIB * KIB))
    }
}

/// The decoded size of base64 text, without decoding it.
pub fn base64_len(data: &str) -> u64 {
    let chars = data.bytes().filter(|b| !b.is_ascii_whitespace()).count() as u64;
    let padding = data
        .trim_end()
        .bytes()
        .rev()
        .take_while(|b| *b == b'=')
        .count() as u64;
    (chars * 3 / 4).saturating_sub(padding.min(2))
}

/// `[kind mime, size]`.
fn media(kind: &str, mime: Option<&str>, data: &str) -> String {
    let size = human_size(base64_len(data));
    match mime {
        Some(m) => format!("[{kind} {m}, {size}]"),
        None => format!("[{kind}, {size}]"),
    }
}

/// One content block of a tool result or prompt message as text (no trailing newline).
pub fn content(c: &Content) -> String {
    match c {
        Content::Text(t) => t.text.clone(),
        Content::Image(m) => media("image", Some(&m.mime_type), &m.data),
        Content::Audio(m) => media("audio", Some(&m.mime_type), &m.data),
        Content::ResourceLink(link) => {
            let mut s = format!("[resource link {} ({}", link.uri, link.name);
            if let Some(m) = &link.mime_type {
                s.push_str(", ");
                s.push_str(m);
            }
            s.push(')');
            if let Some(d) = &link.description {
                s.push_str(": ");
                s.push_str(d);
            }
            s.push(']');
            s
        }
        Content::Resource(embedded) => {
            let resource = &embedded.resource;
            match &resource.text {
                Some(text) => format!("[resource {}]\n{text}", resource.uri),
                None => resource_contents(resource),
            }
        }
        // A block kind of a later revision: its JSON, as sent.
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

/// The contents of a resource as text: its text, or a summary of a blob.
pub fn resource_contents(r: &ResourceContents) -> String {
    match (&r.text, &r.blob) {
        (Some(text), _) => text.clone(),
        (None, Some(blob)) => {
            let kind = format!("blob {}", r.uri);
            media(&kind, r.mime_type.as_deref(), blob)
        }
        (None, None) => format!("[empty resource {}]", r.uri),
    }
}

/// Pretty JSON (two-space indent).
pub fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

/// Whether a text block only mirrors the structured content as JSON (then it is not shown twice).
pub fn mirrors(text: &str, structured: &Value) -> bool {
    serde_json::from_str::<Value>(text).is_ok_and(|v| json_eq(&v, structured))
}

/// JSON equality with numbers compared by value (`5` equals `5.0`).
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// Appends a newline unless `s` ends with one.
pub fn line(s: &str) -> String {
    if s.ends_with('\n') {
        s.to_owned()
    } else {
        format!("{s}\n")
    }
}

/// A table: a header line and one line per row, every column but the last padded to its widest
/// cell (the header's included, counted in characters), columns two spaces apart, no trailing
/// spaces. Each line ends with a newline.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let columns = header.len();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate().take(columns) {
            if i > 0 {
                line.push_str("  ");
            }
            line.push_str(cell);
            if i + 1 < columns {
                let pad = widths[i].saturating_sub(cell.chars().count());
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sizes() {
        assert_eq!(human_size(0), "0 B");
        assert_eq!(human_size(1023), "1023 B");
        assert_eq!(human_size(1229), "1.2 KiB");
        assert_eq!(human_size(3 * 1024 * 1024), "3.0 MiB");
    }

    #[test]
    fn base64_lengths() {
        assert_eq!(base64_len(""), 0);
        assert_eq!(base64_len("aGk="), 2);
        assert_eq!(base64_len("aGkh"), 3);
        assert_eq!(base64_len("aA=="), 1);
    }

    #[test]
    fn media_is_summarized() {
        let data = "A".repeat(1640); // 1230 bytes
        let c = Content::image(data, "image/png");
        assert_eq!(content(&c), "[image image/png, 1.2 KiB]");
    }

    #[test]
    fn a_json_mirror_is_recognized() {
        assert!(mirrors("{\"sum\": 5}", &json!({"sum": 5.0})));
        assert!(!mirrors("sum is 5", &json!({"sum": 5})));
        assert!(!mirrors("{\"sum\": 6}", &json!({"sum": 5})));
    }

    #[test]
    fn table_columns_fit_their_widest_value() {
        let rows = vec![
            vec![
                "approval-1".to_owned(),
                "pending".to_owned(),
                "-".to_owned(),
            ],
            vec![
                "approval-10".to_owned(),
                "claimed".to_owned(),
                "committed".to_owned(),
            ],
            vec!["a-é".to_owned(), "x".to_owned(), String::new()],
        ];
        assert_eq!(
            table(&["ID", "STATE", "EFFECT"], &rows),
            "ID           STATE    EFFECT\n\
             approval-1   pending  -\n\
             approval-10  claimed  committed\n\
             a-é          x\n"
        );
        assert_eq!(table(&["ID", "STATE"], &[]), "ID  STATE\n");
    }
}
