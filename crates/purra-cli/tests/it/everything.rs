//! `purra inspect` and `purra call` against the reference server
//! `@modelcontextprotocol/server-everything` (pinned in `peers/node/package.json`, installed by
//! `scripts/setup-peers.sh`), run over stdio on the pinned Node 22.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::peers::{node, peer, repo_root};
use crate::support::run::{describe, purra};

/// `purra <sub> words... -- node .../server-everything/dist/index.js stdio`.
fn on_everything(sub: &str, words: &[&str]) -> Output {
    let node = node();
    let server = peer(
        repo_root()
            .join("peers/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"),
    );
    let mut args = vec![sub];
    args.extend_from_slice(words);
    args.extend(["--", &node, &server, "stdio"]);
    purra(&args)
}

fn ok_stdout(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(0), "{}", describe(out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn inspect_lists_the_reference_servers_tools() {
    let out = on_everything("inspect", &["--json"]);
    let doc: Value = serde_json::from_str(&ok_stdout(&out)).expect("one JSON document");
    assert_eq!(doc["serverInfo"]["name"], "mcp-servers/everything", "{doc}");
    // It speaks only the handshake era: auto's `server/discover` probe falls back to it.
    assert_eq!(doc["protocolVersion"], "2025-11-25");
    assert_eq!(doc["era"], "handshake");
    assert_eq!(doc["protocolChoice"], "auto");
    let names: Vec<&str> = doc["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().expect("name"))
        .collect();
    for tool in [
        "echo",
        "get-sum",
        "get-tiny-image",
        "get-structured-content",
        "trigger-long-running-operation",
    ] {
        assert!(names.contains(&tool), "{tool} not in {names:?}");
    }
    let echo = doc["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "echo")
        .unwrap();
    assert_eq!(
        echo["inputSchema"]["properties"]["message"]["type"],
        "string"
    );

    let text = ok_stdout(&on_everything("inspect", &[]));
    assert!(
        text.starts_with("server:       mcp-servers/everything "),
        "{text}"
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[1..4],
        [
            "title:        Everything Reference Server",
            "protocol:     2025-11-25",
            "era:          handshake (auto)"
        ],
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("  echo ") && l.ends_with("Echoes back the input string")),
        "{text}"
    );
}

#[test]
fn call_gives_real_results() {
    let out = on_everything("call", &["echo", "message=hi there"]);
    assert_eq!(ok_stdout(&out), "Echo: hi there\n");

    let out = on_everything("call", &["--json", "echo", "message=hi"]);
    let doc: Value = serde_json::from_str(&ok_stdout(&out)).expect("one JSON document");
    assert_eq!(doc["content"][0]["type"], "text");
    assert_eq!(doc["content"][0]["text"], "Echo: hi");

    // KEY=VALUE numbers are JSON numbers.
    let out = on_everything("call", &["get-sum", "a=2", "b=3"]);
    assert_eq!(ok_stdout(&out), "The sum of 2 and 3 is 5.\n");

    // Structured content is pretty-printed and its JSON mirror in a text block is not repeated.
    let out = on_everything("call", &["get-structured-content", "location=Chicago"]);
    let text = ok_stdout(&out);
    let v: Value = serde_json::from_str(&text).expect("only the structured content");
    assert!(v["temperature"].is_number(), "{text}");
    assert!(text.starts_with("{\n  \""), "{text}");

    // Media are summarized, never dumped.
    let out = on_everything("call", &["get-tiny-image"]);
    let text = ok_stdout(&out);
    assert!(
        text.lines()
            .any(|l| l.starts_with("[image image/png, ") && l.ends_with(" KiB]")),
        "{text}"
    );
    assert!(text.len() < 1000, "{text}");
}

#[test]
fn progress_from_a_long_running_operation_reaches_stderr() {
    let out = on_everything(
        "call",
        &["trigger-long-running-operation", "duration=1", "steps=2"],
    );
    let stdout = ok_stdout(&out);
    assert!(stdout.contains("completed"), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let progress: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("progress "))
        .collect();
    assert_eq!(progress.len(), 2, "{stderr}");
    assert!(progress[0].starts_with("progress 1/2"), "{stderr}");
    assert!(progress[1].starts_with("progress 2/2"), "{stderr}");
}

/// Checks a `purra call simulate-research-query topic=rust` run: the report on stdout, the
/// task's statuses on stderr (one task id, working first, completed last).
fn check_research_task(out: &Output) {
    let stdout = ok_stdout(out);
    assert!(
        stdout.starts_with("# Research Report: rust\n"),
        "{}",
        describe(out)
    );
    assert!(
        stdout.contains("3. Status progressed: `working` → `completed`"),
        "{}",
        describe(out)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("purra: task "))
        .collect();
    assert!(lines.len() >= 2, "{}", describe(out));
    let id = lines[0]["purra: task ".len()..]
        .split(' ')
        .next()
        .unwrap()
        .to_owned();
    assert_eq!(id.len(), 32, "the server's 32-hex-digit id: {id}");
    for l in &lines {
        assert!(l.starts_with(&format!("purra: task {id} ")), "{l}");
    }
    assert!(
        lines[0].starts_with(&format!("purra: task {id} working")),
        "{}",
        describe(out)
    );
    assert_eq!(
        lines[lines.len() - 1],
        format!("purra: task {id} completed: Generating report..."),
        "{}",
        describe(out)
    );
}

#[test]
fn call_runs_a_task_required_tool_as_a_task_over_stdio() {
    check_research_task(&on_everything(
        "call",
        &["simulate-research-query", "topic=rust"],
    ));
}

#[test]
fn call_runs_a_task_required_tool_as_a_task_over_streamable_http() {
    let node = node();
    let server = peer(
        repo_root()
            .join("peers/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"),
    );
    // The server prints the port it was given, not the one it got: pick a free one.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new(&node)
        .args([&server, "streamableHttp"])
        .env("PORT", port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn server-everything");
    let start = Instant::now();
    while !accepting(port) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "server-everything did not listen on {port}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let url = format!("http://127.0.0.1:{port}/mcp");
    let out = purra(&["call", &url, "simulate-research-query", "topic=rust"]);
    let _ = child.kill();
    let _ = child.wait();
    check_research_task(&out);
}

#[test]
fn tasks_lists_and_gets_against_the_reference_server() {
    // A fresh stdio server has no task of this session.
    let out = on_everything("tasks", &["list", "--json"]);
    assert_eq!(ok_stdout(&out), "[]\n");
    let out = on_everything("tasks", &["get", "nope"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "purra: getting task nope: JSON-RPC error -32602: MCP error -32602: Failed to retrieve task: Task not found"
        ),
        "{}",
        describe(&out)
    );
    let out = on_everything("tasks", &["list", "extra"]);
    assert_eq!(out.status.code(), Some(64), "{}", describe(&out));
}

/// Whether a server accepts connections on the local `port`; a connection that was given `port`
/// as its own source and connected to itself (TCP simultaneous open, possible on an ephemeral
/// port nothing listens on) does not count.
fn accepting(port: u16) -> bool {
    std::net::TcpStream::connect(("127.0.0.1", port))
        .is_ok_and(|s| s.local_addr().ok() != s.peer_addr().ok())
}
