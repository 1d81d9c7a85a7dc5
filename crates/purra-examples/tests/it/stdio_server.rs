//! The stdio server over real pipes: stdout carries nothing but protocol, and serving ends at
//! EOF on stdin.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn stdout_is_protocol_only_and_eof_ends_the_server() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_purra-example-server"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let frames = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"log","arguments":{}}}"#,
        "this is not json",
        r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#,
    ];
    for f in frames {
        writeln!(stdin, "{f}").unwrap();
    }
    drop(stdin); // EOF: the server answers what it has, then exits
    let start = Instant::now();
    let out = BufReader::new(child.stdout.take().unwrap());
    let lines: Vec<String> = out.lines().map(Result::unwrap).collect();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(start.elapsed() < Duration::from_secs(5));
    for line in &lines {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        assert_eq!(v["jsonrpc"], "2.0", "{line}");
    }
    assert!(
        lines.iter().any(|l| l.contains(r#""id":1,"result""#)),
        "{lines:#?}"
    );
    assert!(
        lines.iter().any(|l| l.contains(r#""id":2,"result""#)),
        "{lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l == r#"{"jsonrpc":"2.0","id":3,"result":{}}"#),
        "{lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700"#)),
        "{lines:#?}"
    );
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.contains("notifications/message"))
            .count(),
        4,
        "{lines:#?}"
    );
    // initialize, four log messages, the log result, the parse error, the ping: nothing else.
    assert_eq!(lines.len(), 8, "{lines:#?}");
}
