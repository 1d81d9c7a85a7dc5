//! Text from a server on the user's terminal: control characters (escape sequences, carriage
//! returns, C1 controls) are shown as visible escapes instead of being obeyed.
//!
//! A server chooses tool results, log messages and the stderr of a stdio child; written raw to a
//! terminal, `ESC ] 0 ; … BEL` sets the window title, `ESC [ 2 J` clears the screen, and worse.
//! What goes to a terminal in readable form is made safe here; what goes to a pipe or a file is
//! left exactly as the server sent it, and `--json` stays exact JSON.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::IsTerminal;

/// Whether `c` is shown as an escape: every control character but newline and tab.
fn escaped(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

/// `s` with control characters as `\x1b` (C0, DEL) or `\u{9b}` (C1); `\r\n` becomes `\n`.
pub fn safe(s: &str) -> Cow<'_, str> {
    if !s.chars().any(escaped) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\r' && chars.peek() == Some(&'\n') {
            continue;
        }
        if !escaped(c) {
            out.push(c);
        } else if (c as u32) < 0x80 {
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
    Cow::Owned(out)
}

/// JSON text for a terminal: DEL and the C1 controls, which serde_json writes as they are, are
/// written as `\u00XX` escapes. They can only occur inside strings, so the JSON means the same.
pub fn safe_json(s: &str) -> Cow<'_, str> {
    let c1 = |c: char| ('\u{7f}'..='\u{9f}').contains(&c);
    if !s.chars().any(c1) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if c1(c) {
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Whether stdout is a terminal.
pub fn stdout_is_terminal() -> bool {
    std::io::stdout().is_terminal()
}

/// Whether stderr is a terminal.
pub fn stderr_is_terminal() -> bool {
    std::io::stderr().is_terminal()
}

/// Readable output for stdout: made safe when stdout is a terminal.
pub fn for_stdout(s: &str) -> Cow<'_, str> {
    if stdout_is_terminal() {
        safe(s)
    } else {
        Cow::Borrowed(s)
    }
}

/// Text for stderr: made safe when stderr is a terminal.
pub fn for_stderr(s: &str) -> Cow<'_, str> {
    if stderr_is_terminal() {
        safe(s)
    } else {
        Cow::Borrowed(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_become_visible() {
        assert_eq!(safe("plain\ttext\nok"), "plain\ttext\nok");
        assert_eq!(
            safe("\u{1b}]0;pwned\u{7}\u{1b}[2J"),
            "\\x1b]0;pwned\\x07\\x1b[2J"
        );
        assert_eq!(
            safe("a\r\nb\rc\u{9b}31m\u{7f}"),
            "a\nb\\x0dc\\u{9b}31m\\x7f"
        );
        assert!(matches!(safe("nothing to do"), Cow::Borrowed(_)));
    }

    #[test]
    fn json_keeps_its_meaning() {
        let v = serde_json::json!({"t": "\u{1b}[31m\u{9b}0m\u{7f}"});
        let text = serde_json::to_string(&v).unwrap();
        let safe = safe_json(&text);
        assert_eq!(safe, r#"{"t":"\u001b[31m\u009b0m\u007f"}"#);
        assert_eq!(serde_json::from_str::<serde_json::Value>(&safe).unwrap(), v);
    }
}
