//! Child-process lifecycle over real pipes: a server dying mid-call, close and drop leaving no
//! process behind, escalation to SIGKILL, and stderr kept apart from the protocol.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use purra_protocol::{Client, ClientOptions, Error, StderrMode, StdioCommand};
use serde_json::json;

use crate::support::process::{exists, gone_within};

const INIT_RESULT: &str = r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"sh","version":"0"}}}"#;
const TOOLS: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#;

/// A shell server that completes the handshake and then runs `rest`.
fn sh_server(rest: &str) -> StdioCommand {
    let script = format!(
        "read -r l; printf '%s\\n' '{INIT_RESULT}'; read -r l; read -r l; printf '%s\\n' '{TOOLS}'; {rest}"
    );
    StdioCommand::new("sh").args(["-c", &script])
}

#[tokio::test]
async fn a_server_exiting_mid_call_fails_the_call_promptly() {
    let cmd = sh_server("read -r l; exit 3").stderr(StderrMode::Null);
    let conn = Client::connect_stdio(cmd, ClientOptions::default())
        .await
        .unwrap();
    assert_eq!(conn.server_info().name, "sh");
    let start = Instant::now();
    let err = conn.call_tool("anything", json!({})).await.unwrap_err();
    assert_eq!(err, Error::ConnectionClosed);
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    let pid = conn.pid().unwrap();
    assert!(gone_within(pid, Duration::from_secs(5), exists).await);
}

/// A command that ends before it answers reports how it ended, not only "connection closed".
#[tokio::test]
async fn a_command_ending_before_the_handshake_names_its_exit_status() {
    let cmd = StdioCommand::new("sh")
        .args(["-c", "echo 'fatal: no token' >&2; exit 3"])
        .stderr(StderrMode::Null);
    let err = Client::connect_stdio(cmd, ClientOptions::default())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        Error::ProcessExited {
            status: "exited with status 3".into(),
            before: "initialize".into()
        }
    );
    assert_eq!(
        err.to_string(),
        "the command exited with status 3 before answering initialize"
    );
    // Killed by a signal while reading the request.
    let cmd = StdioCommand::new("sh")
        .args(["-c", "read -r l; kill -9 $$"])
        .stderr(StderrMode::Null);
    let err = Client::connect_stdio(cmd, ClientOptions::default())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the command was killed by signal 9 (SIGKILL) before answering initialize"
    );
    // Ending after the handshake, while its catalogs are listed.
    let script = format!("read -r l; printf '%s\\n' '{INIT_RESULT}'; read -r l; read -r l; exit 4");
    let cmd = StdioCommand::new("sh")
        .args(["-c", &script])
        .stderr(StderrMode::Null);
    let err = Client::connect_stdio(cmd, ClientOptions::default())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the command exited with status 4 before answering the listing of its catalogs"
    );
}

#[tokio::test]
async fn close_leaves_no_child_behind() {
    let cmd = sh_server("while read -r l; do :; done");
    let conn = Client::connect_stdio(cmd, ClientOptions::default())
        .await
        .unwrap();
    let pid = conn.pid().unwrap();
    assert!(exists(pid));
    conn.close().await;
    assert!(!exists(pid), "closed connection left pid {pid}");
    conn.close().await; // idempotent
    assert_eq!(conn.ping().await.unwrap_err(), Error::ConnectionClosed);
}

#[tokio::test]
async fn dropping_a_connection_releases_its_child() {
    let cmd = sh_server("while read -r l; do :; done");
    let conn = Client::connect_stdio(cmd, ClientOptions::default())
        .await
        .unwrap();
    let pid = conn.pid().unwrap();
    drop(conn);
    assert!(
        gone_within(pid, Duration::from_secs(5), exists).await,
        "dropped connection left pid {pid}"
    );
}

#[tokio::test]
async fn a_child_ignoring_eof_and_sigterm_is_killed() {
    let mut cmd = sh_server("trap '' TERM; while :; do sleep 0.05; done");
    cmd.shutdown_grace = Duration::from_millis(200);
    let conn = Client::connect_stdio(cmd, ClientOptions::default())
        .await
        .unwrap();
    let pid = conn.pid().unwrap();
    let start = Instant::now();
    conn.close().await;
    let took = start.elapsed();
    assert!(!exists(pid), "pid {pid} survived SIGKILL");
    // stdin close (200 ms) + SIGTERM (200 ms), then SIGKILL.
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_secs(3),
        "{took:?}"
    );
}

#[tokio::test]
async fn stderr_is_captured_and_never_parsed_as_protocol() {
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = seen.clone();
    let cmd = StdioCommand::new("sh")
        .args([
            "-c",
            &format!(
                "echo '{{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":\"not for you\"}}' >&2; read -r l; printf '%s\\n' '{INIT_RESULT}'; read -r l; read -r l; printf '%s\\n' '{TOOLS}'; echo second line >&2; while read -r l; do :; done"
            ),
        ])
        .stderr(StderrMode::Capture(Some(Arc::new(move |line: &str| {
            sink.lock().unwrap().push(line.to_owned())
        }))));
    let conn = Client::connect_stdio(cmd, ClientOptions::default())
        .await
        .unwrap();
    assert_eq!(conn.server_info().name, "sh");
    let start = Instant::now();
    while conn.stderr_tail().len() < 2 && start.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        conn.stderr_tail(),
        [
            r#"{"jsonrpc":"2.0","id":0,"result":"not for you"}"#,
            "second line"
        ]
    );
    assert_eq!(seen.lock().unwrap().len(), 2);
    conn.close().await;
}

#[tokio::test]
async fn env_and_cwd_reach_the_child() {
    let dir = std::env::temp_dir();
    let cmd = StdioCommand::new("sh")
        .args([
            "-c",
            "read -r l; printf '{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"serverInfo\":{\"name\":\"%s\",\"version\":\"%s\"}}}\\n' \"$PURRA_TEST_NAME\" \"$(pwd)\"; while read -r l; do :; done",
        ])
        .env("PURRA_TEST_NAME", "from-env")
        .cwd(&dir);
    let conn = Client::connect_stdio(cmd, ClientOptions::default().protocol_version("2025-06-18"))
        .await
        .unwrap();
    assert_eq!(conn.server_info().name, "from-env");
    assert_eq!(
        Path::new(&conn.server_info().version)
            .canonicalize()
            .unwrap(),
        dir.canonicalize().unwrap()
    );
    assert_eq!(conn.protocol_version(), "2025-06-18");
    conn.close().await;
}

#[tokio::test]
async fn a_missing_program_is_a_transport_error() {
    let err = Client::connect_stdio(
        StdioCommand::new("/nonexistent/purra-server"),
        ClientOptions::default(),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, Error::Transport(ref why) if why.contains("No such file")),
        "{err:?}"
    );
}
