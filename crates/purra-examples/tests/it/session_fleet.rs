//! The official TypeScript SDK's client against two purra server processes sharing one SQLite
//! session store, every HTTP request sent to the next server in turn (no stickiness): one
//! session serves every call on both without a second `initialize`, and goes on at the other
//! when one is killed (SIGKILL) mid-session.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::support::{http_server, node, script, HttpPeer};

fn session_server(name: &str, db: &Path) -> HttpPeer {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_purra-session-server"));
    cmd.arg("--name").arg(name).arg("--db").arg(db);
    http_server(cmd, |port| format!("127.0.0.1:{port}"))
}

fn fresh_db(name: &str) -> std::path::PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("session-fleet-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("sessions.db")
}

/// Runs the client over `servers` for `calls` calls; `on_pause` runs when it pauses (after
/// `pause_after` calls). Its final report.
fn client(
    servers: &[&str],
    calls: u32,
    pause_after: Option<u32>,
    on_pause: impl FnOnce(),
) -> Value {
    let mut cmd = Command::new(node());
    cmd.arg(script("node/session_client.mjs"))
        .arg("--servers")
        .arg(servers.join(","))
        .arg("--calls")
        .arg(calls.to_string());
    if let Some(k) = pause_after {
        cmd.arg("--pause-after").arg(k.to_string());
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("node");
    let mut stdin = child.stdin.take().unwrap();
    let mut on_pause = Some(on_pause);
    let mut report = Value::Null;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let doc: Value = serde_json::from_str(&line.unwrap()).expect("a JSON line");
        match doc["event"].as_str() {
            Some("paused") => {
                if let Some(f) = on_pause.take() {
                    f();
                }
                writeln!(stdin).unwrap();
            }
            Some("done") => report = doc,
            _ => {}
        }
    }
    child.wait().unwrap();
    report
}

fn served(report: &Value, name: &str) -> u64 {
    report["served"][name].as_u64().unwrap_or(0)
}

#[test]
fn the_typescript_client_keeps_one_session_across_two_servers_round_robin() {
    let db = fresh_db("rr");
    let a = session_server("A", &db);
    let b = session_server("B", &db);
    let report = client(&[&a.url, &b.url], 1000, None, || {});
    assert_eq!(report["failures"], serde_json::json!([]), "{report}");
    assert_eq!(report["initializes"], 1, "no re-initialization: {report}");
    assert_eq!(
        report["sessions"].as_array().map(Vec::len),
        Some(1),
        "{report}"
    );
    assert_eq!(
        served(&report, "A") + served(&report, "B"),
        1000,
        "{report}"
    );
    assert!(
        served(&report, "A") >= 250 && served(&report, "B") >= 250,
        "both served: {report}"
    );
}

#[test]
fn the_typescript_client_s_session_goes_on_when_a_server_is_killed() {
    let db = fresh_db("kill");
    let mut a = session_server("A", &db);
    let b = session_server("B", &db);
    let report = client(&[&a.url, &b.url], 100, Some(40), || {
        a.child.kill().unwrap(); // SIGKILL
        a.child.wait().unwrap();
    });
    assert_eq!(report["failures"], serde_json::json!([]), "{report}");
    assert_eq!(report["initializes"], 1, "no re-initialization: {report}");
    assert_eq!(
        report["sessions"].as_array().map(Vec::len),
        Some(1),
        "{report}"
    );
    assert!(served(&report, "A") <= 40, "{report}");
    assert!(served(&report, "B") >= 60, "B served the rest: {report}");
}
