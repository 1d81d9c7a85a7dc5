//! The `purra` binary against hostile stdio servers (`peers/hostile/stdio_server.py`): terminal
//! escapes in results, log messages and the child's stderr are shown, never obeyed, on a
//! terminal (`peers/hostile/pty_run.py` gives purra one) and passed through exactly to pipes; a
//! server reporting progress forever cannot keep `purra call` alive past `--max-time`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn hostile() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../peers/hostile")
}

/// `purra ARGS -- python3 stdio_server.py MODE`, waited for at most `limit`.
fn purra(args: &[&str], mode: &str, on_pty: bool, limit: Duration) -> (Output, Duration) {
    let server = hostile().join("stdio_server.py");
    let mut cmd = if on_pty {
        let mut c = Command::new("python3");
        c.arg(hostile().join("pty_run.py"))
            .arg(env!("CARGO_BIN_EXE_purra"));
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_purra"))
    };
    cmd.args(args)
        .arg("--")
        .arg("python3")
        .arg(server)
        .arg(mode)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd.spawn().expect("purra runs");
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("purra {args:?} ran past {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    (child.wait_with_output().expect("output"), start.elapsed())
}

const EVIL: &str = "\u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}31m";
const SHOWN: &str = "\\x1b]0;pwned\\x07\\x1b[2J\\u{9b}31m";

#[test]
fn escapes_are_shown_not_obeyed_on_a_terminal() {
    let (out, _) = purra(&["call", "t"], "escapes", true, Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let seen = String::from_utf8_lossy(&out.stdout);
    // The result, the log message and the child's stderr line all reached the terminal...
    for line in [
        format!("result {SHOWN}"),
        format!("[error] log {SHOWN}"),
        format!("stderr {SHOWN}"),
    ] {
        assert!(seen.contains(&line), "{line:?} not in {seen:?}");
    }
    // ...and not one escape or C1 control with them.
    assert!(!seen.contains('\u{1b}'), "{seen:?}");
    assert!(!seen.contains('\u{9b}'), "{seen:?}");

    // --json on a terminal: exact JSON, the same value.
    let (out, _) = purra(
        &["call", "--json", "t"],
        "escapes",
        true,
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let seen = String::from_utf8_lossy(&out.stdout);
    let start = seen.find("{\r\n").expect("a JSON document");
    let doc: Value = serde_json::from_str(&seen[start..].replace("\r\n", "\n")).expect("JSON");
    assert_eq!(doc["content"][0]["text"], format!("result {EVIL}"));
    assert!(
        !seen.contains('\u{1b}') && !seen.contains('\u{9b}'),
        "{seen:?}"
    );
}

#[test]
fn pipes_get_the_text_exactly_as_sent() {
    let (out, _) = purra(&["call", "t"], "escapes", false, Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("result {EVIL}\n")
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("[error] log {EVIL}\n")), "{err:?}");
    assert!(err.contains(&format!("stderr {EVIL}\n")), "{err:?}");
}

#[test]
fn endless_progress_stops_at_max_time() {
    let (out, took) = purra(
        &["call", "--timeout", "3", "--max-time", "6", "t"],
        "progress",
        false,
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.ends_with("purra: calling tool t: no result within --max-time 6s: request timed out\n"),
        "{err:?}"
    );
    // Progress kept restarting the 3 s timeout; the 6 s maximum ended the call.
    assert!(err.matches("progress ").count() >= 20, "{err:?}");
    assert!(took < Duration::from_secs(30), "{took:?}");
}
