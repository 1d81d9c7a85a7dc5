//! Characters an approver cannot see: the one place that decides which characters are shown as
//! visible escapes wherever a person reads what a write sends (the approver page, the gateway's
//! approval view, `purra approvals show`).
//!
//! A bidi control such as U+202E reorders the text around it, a zero-width space or a tag
//! character is not drawn at all, and a control character can move or erase what a terminal
//! shows: text that reads `/srv/notes/a.txt` may send something else. [`is_hidden`] names those
//! characters; [`escape_hidden`] shows each as `\u202e` (`\u{e0041}` beyond the Basic Multilingual
//! Plane), and [`escape_hidden_json`] does the same to JSON text with JSON's own escapes, so the
//! escaped text is still exactly the same JSON value. A surface that escapes something also says
//! so ([`has_hidden`], [`value_has_hidden`]), since `\u202e` could otherwise be read as text.
//!
//! Hidden characters (Unicode 15.1):
//!
//! | class | characters |
//! |---|---|
//! | bidi controls | U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069 |
//! | zero-width and invisible operators | U+200B–U+200D, U+2060–U+2065, U+FEFF |
//! | other format characters (`Cf`) | U+00AD, U+0600–U+0605, U+06DD, U+070F, U+0890, U+0891, U+08E2, U+180E, U+206A–U+206F, U+FFF9–U+FFFB, U+110BD, U+110CD, U+13430–U+1343F, U+1BCA0–U+1BCA3, U+1D173–U+1D17A |
//! | control characters (`Cc`) but line feed and tab | U+0000–U+0008, U+000B–U+001F, U+007F–U+009F |
//! | line and paragraph separators | U+2028, U+2029 |
//! | tag characters | U+E0000–U+E007F |
//! | variation selectors | U+180B–U+180D, U+180F, U+FE00–U+FE0F, U+E0100–U+E01EF |
//! | other default-ignorable characters (drawn as nothing) | U+034F, U+115F, U+1160, U+17B4, U+17B5, U+3164, U+FFA0, U+FFF0–U+FFF8, U+E0080–U+E00FF, U+E01F0–U+E0FFF |
//!
//! Line feed and tab stay as they are: they are layout a reader sees, and multi-line text stays
//! readable. Variation selectors are escaped although emoji use U+FE0F: a run of them can carry
//! data that nothing shows, and `❤\ufe0f` still reads as what it is.

use std::borrow::Cow;
use std::fmt::Write as _;

use serde_json::Value;

/// Whether `c` is shown as an escape wherever a person reads what a write sends.
pub fn is_hidden(c: char) -> bool {
    matches!(
        c as u32,
        // Control characters, but line feed (0x0A) and tab (0x09).
        0x00..=0x08 | 0x0B..=0x1F | 0x7F..=0x9F
        // Bidi controls: the Arabic letter mark, LRM and RLM, embeddings and overrides, isolates.
        | 0x061C | 0x200E | 0x200F | 0x202A..=0x202E | 0x2066..=0x2069
        // Zero-width space, non-joiner and joiner; word joiner and the invisible operators
        // (U+2065 is reserved as default-ignorable); the byte order mark.
        | 0x200B..=0x200D | 0x2060..=0x2065 | 0xFEFF
        // Other format characters.
        | 0x00AD | 0x0600..=0x0605 | 0x06DD | 0x070F | 0x0890 | 0x0891 | 0x08E2 | 0x180E
        | 0x206A..=0x206F | 0xFFF9..=0xFFFB | 0x110BD | 0x110CD | 0x13430..=0x1343F
        | 0x1BCA0..=0x1BCA3 | 0x1D173..=0x1D17A
        // Line and paragraph separators.
        | 0x2028 | 0x2029
        // Tag characters.
        | 0xE0000..=0xE007F
        // Variation selectors (Mongolian, the 16 of the BMP, the 240 supplementary ones).
        | 0x180B..=0x180D | 0x180F | 0xFE00..=0xFE0F | 0xE0100..=0xE01EF
        // Other default-ignorable code points: the combining grapheme joiner, the Hangul fillers,
        // the Khmer inherent vowels, and the reserved default-ignorable ranges.
        | 0x034F | 0x115F | 0x1160 | 0x17B4 | 0x17B5 | 0x3164 | 0xFFA0 | 0xFFF0..=0xFFF8
        | 0xE0080..=0xE00FF | 0xE01F0..=0xE0FFF
    )
}

/// Whether `text` has a character [`is_hidden`] names.
pub fn has_hidden(text: &str) -> bool {
    text.chars().any(is_hidden)
}

/// Whether any string of `value`, or any member name, has a character [`is_hidden`] names (at
/// any depth; walked without recursion).
pub fn value_has_hidden(value: &Value) -> bool {
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) if has_hidden(s) => return true,
            Value::Array(items) => stack.extend(items),
            Value::Object(members) => {
                for (k, v) in members {
                    if has_hidden(k) {
                        return true;
                    }
                    stack.push(v);
                }
            }
            _ => {}
        }
    }
    false
}

/// `text` with every hidden character as a visible escape: `\u202e`, and `\u{e0041}` beyond the
/// Basic Multilingual Plane (lowercase hexadecimal). Borrowed when there is none.
pub fn escape_hidden(text: &str) -> Cow<'_, str> {
    if !has_hidden(text) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if !is_hidden(c) {
            out.push(c);
        } else if (c as u32) <= 0xFFFF {
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
    Cow::Owned(out)
}

/// JSON text with every hidden character as a JSON escape (`\u202e`; a surrogate pair such as
/// `\udb40\udc41` beyond the Basic Multilingual Plane). Outside its strings JSON text has no such
/// character, so the result is exactly the same JSON value. Borrowed when there is none.
pub fn escape_hidden_json(json: &str) -> Cow<'_, str> {
    if !has_hidden(json) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    let mut units = [0u16; 2];
    for c in json.chars() {
        if is_hidden(c) {
            for unit in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// How many characters of a caller's self-declared name (`clientInfo.name`, `version`) are
/// kept wherever it is shown or sent ([`client_name`]).
pub const CLIENT_NAME_MAX_CHARS: usize = 128;

/// How many characters of a "who" (`requested by`, `approver`: a principal and a client's name)
/// are kept wherever it is shown or sent ([`one_line`]).
pub const WHO_MAX_CHARS: usize = 512;

/// The marker that ends text cut by [`one_line`].
pub const CUT_MARKER: char = '\u{2026}';

/// `text` shown on one line: every hidden character escaped as [`escape_hidden`] does, line
/// feed and tab too (`\n`, `\t`), and cut after `max_chars` characters of `text` with
/// [`CUT_MARKER`] (`…`) added. For text a caller chooses (a client's name) that a person reads
/// beside other facts or that a line-based log or chat message carries: a newline there could
/// forge a line. Escaping again changes nothing. Borrowed when nothing changes.
pub fn one_line(text: &str, max_chars: usize) -> Cow<'_, str> {
    let cut = text.char_indices().nth(max_chars).map(|(i, _)| i);
    let kept = &text[..cut.unwrap_or(text.len())];
    if cut.is_none() && !kept.chars().any(|c| is_hidden(c) || c == '\n' || c == '\t') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(kept.len() + 16);
    for c in kept.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if !is_hidden(c) => out.push(c),
            c if (c as u32) <= 0xFFFF => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    if cut.is_some() {
        out.push(CUT_MARKER);
    }
    Cow::Owned(out)
}

/// A client's self-declared name or version (`clientInfo`) as shown or sent anywhere: on one
/// line, escaped and bounded to [`CLIENT_NAME_MAX_CHARS`] ([`one_line`]).
pub fn client_name(name: &str) -> Cow<'_, str> {
    one_line(name, CLIENT_NAME_MAX_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Issue 43 finding 7: a client's name is shown on one line, escaped and bounded.
    #[test]
    fn finding_7_a_client_name_is_one_escaped_bounded_line() {
        assert_eq!(client_name("claude-code"), "claude-code");
        assert!(matches!(client_name("claude-code"), Cow::Borrowed(_)));
        assert_eq!(client_name("evil\u{202e}\nname"), "evil\\u202e\\nname");
        assert_eq!(client_name("a\tb\r\u{1b}[2J"), "a\\tb\\u000d\\u001b[2J");
        let long = "x".repeat(10_000);
        assert_eq!(client_name(&long), format!("{}\u{2026}", "x".repeat(128)));
        assert_eq!(client_name(&"x".repeat(128)), "x".repeat(128));
        // Counted in characters of the name, before escaping.
        let wide = "\u{e9}".repeat(200);
        assert_eq!(
            client_name(&wide),
            format!("{}\u{2026}", "\u{e9}".repeat(128))
        );
        // Escaping again changes nothing.
        let once = client_name("evil\u{202e}\nname").into_owned();
        assert_eq!(client_name(&once), once);
        assert_eq!(one_line("a\nb", 1), "a\u{2026}");
    }

    /// Every character of `chars` is hidden and escaped as `\uXXXX` (or `\u{X}`).
    fn all_hidden(class: &str, chars: &[u32]) {
        for &u in chars {
            let c = char::from_u32(u).expect("a character");
            assert!(is_hidden(c), "{class}: U+{u:04X} is not hidden");
            let want = if u <= 0xFFFF {
                format!("a\\u{u:04x}b")
            } else {
                format!("a\\u{{{u:x}}}b")
            };
            assert_eq!(escape_hidden(&format!("a{c}b")), want, "{class}: U+{u:04X}");
        }
    }

    #[test]
    fn bidi_controls_are_hidden() {
        all_hidden(
            "bidi",
            &[
                0x061C, 0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067,
                0x2068, 0x2069,
            ],
        );
        assert_eq!(
            escape_hidden("/srv/notes/\u{202e}txt.exe"),
            "/srv/notes/\\u202etxt.exe"
        );
    }

    #[test]
    fn zero_width_characters_are_hidden() {
        all_hidden(
            "zero-width",
            &[
                0x200B, 0x200C, 0x200D, 0x2060, 0x2061, 0x2062, 0x2063, 0x2064, 0xFEFF,
            ],
        );
    }

    #[test]
    fn other_format_characters_are_hidden() {
        all_hidden(
            "format",
            &[
                0x00AD, 0x0600, 0x0605, 0x06DD, 0x070F, 0x0890, 0x08E2, 0x180E, 0x206A, 0x206F,
                0xFFF9, 0xFFFB, 0x110BD, 0x110CD, 0x13430, 0x1BCA0, 0x1D173, 0x1D17A,
            ],
        );
    }

    #[test]
    fn control_characters_but_line_feed_and_tab_are_hidden() {
        all_hidden(
            "control",
            &[0x00, 0x07, 0x0B, 0x0D, 0x1B, 0x1F, 0x7F, 0x85, 0x9B, 0x9F],
        );
        assert_eq!(escape_hidden("one\ntwo\tthree"), "one\ntwo\tthree");
        assert!(matches!(escape_hidden("one\ntwo"), Cow::Borrowed(_)));
    }

    #[test]
    fn line_and_paragraph_separators_are_hidden() {
        all_hidden("separators", &[0x2028, 0x2029]);
    }

    #[test]
    fn tag_characters_are_hidden() {
        all_hidden("tags", &[0xE0000, 0xE0001, 0xE0020, 0xE0041, 0xE007F]);
        // "hi" smuggled in tags after a visible letter.
        assert_eq!(
            escape_hidden("x\u{e0068}\u{e0069}"),
            "x\\u{e0068}\\u{e0069}"
        );
    }

    #[test]
    fn variation_selectors_are_hidden() {
        all_hidden(
            "variation selectors",
            &[0x180B, 0x180D, 0x180F, 0xFE00, 0xFE0F, 0xE0100, 0xE01EF],
        );
        assert_eq!(escape_hidden("\u{2764}\u{fe0f}"), "\u{2764}\\ufe0f");
    }

    #[test]
    fn blank_default_ignorable_characters_are_hidden() {
        all_hidden(
            "default-ignorable",
            &[
                0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFFA0, 0xFFF0, 0xFFF8, 0xE0080,
                0xE01F0, 0xE0FFF,
            ],
        );
    }

    #[test]
    fn visible_text_is_left_alone() {
        for text in [
            "plain ASCII: /srv/notes/a.txt ~!@#$%^&*()",
            "héllo wörld ß ı",
            "日本語のテキスト",
            "مرحبا עברית",
            "😀 👍🏽 \u{2764}",
            "non\u{a0}breaking and\u{3000}ideographic spaces",
            "combining e\u{301}",
        ] {
            assert!(!has_hidden(text), "{text:?}");
            assert!(matches!(escape_hidden(text), Cow::Borrowed(t) if t == text));
            assert!(matches!(escape_hidden_json(text), Cow::Borrowed(_)));
        }
        for u in [
            0x0A, 0x09, 0x20, 0x7E, 0xA0, 0x2027, 0x202F, 0x2070, 0xFE10, 0xE1000,
        ] {
            let c = char::from_u32(u).expect("a character");
            assert!(!is_hidden(c), "U+{u:04X}");
        }
    }

    #[test]
    fn json_text_keeps_its_value() {
        // Members in name order: the text is the same whether or not serde_json keeps insertion
        // order (`preserve_order`, which a dependency of purra-gateway turns on in the workspace).
        let v = json!({"n": [1, "\u{7f}\u{85}"], "path": "/srv/\u{202e}a\u{200b}", "tag": "x\u{e0041}"});
        let text = serde_json::to_string(&v).expect("json");
        let shown = escape_hidden_json(&text);
        assert_eq!(
            shown,
            r#"{"n":[1,"\u007f\u0085"],"path":"/srv/\u202ea\u200b","tag":"x\udb40\udc41"}"#
        );
        assert_eq!(serde_json::from_str::<Value>(&shown).expect("json"), v);
    }

    #[test]
    fn values_are_searched_in_strings_and_member_names() {
        assert!(!value_has_hidden(&json!({"a": [1, "b", {"c": null}]})));
        assert!(value_has_hidden(&json!({"a": [1, "b", {"c": "\u{200b}"}]})));
        assert!(value_has_hidden(&json!({"a\u{202e}": 1})));
        assert!(value_has_hidden(&json!("\u{feff}")));
        assert!(!value_has_hidden(&json!(12)));
    }
}
