//! The official SDKs' task clients running 2025-11-25 tasks on purra's conformance server: the
//! TypeScript SDK's (`peers/node/task_client.mjs`, SDK pinned in `peers/node/package.json`) over
//! Streamable HTTP, and the Python SDK 1.30.0's (`peers/python/task_client.py`, run in the second
//! venv `scripts/setup-peers.sh` makes, since 2.x has no tasks client) over stdio and Streamable
//! HTTP: a task whose handler asks for confirmation (`input_required`, answered by the client's
//! elicitation handler) to its result, a running task cancelled, and `tasks/list`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repo root")
}

fn existing(p: PathBuf) -> PathBuf {
    assert!(
        p.exists(),
        "{} is missing: run scripts/setup-peers.sh (the test command does) before these tests",
        p.display()
    );
    p
}

/// Kills the server when the test ends, however it ends.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn peers() -> PathBuf {
    std::env::var_os("PURRA_PEERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".peers"))
}

/// Starts the conformance server on a free port; the server and its URL.
fn http_server(tag: &str) -> (Server, String) {
    let log = std::env::temp_dir().join(format!(
        "purra-tasks-interop-{tag}-{}.log",
        std::process::id()
    ));
    let server = Server(
        Command::new(env!("CARGO_BIN_EXE_purra-conformance-server"))
            .args(["--port", "0"])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("a log file"))
            .spawn()
            .expect("start the server"),
    );
    let start = Instant::now();
    let port = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(rest) = text.split("listening on http://127.0.0.1:").nth(1) {
            if let Some(p) = rest.split('/').next().and_then(|p| p.parse::<u16>().ok()) {
                break p;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no listening line: {text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = std::fs::remove_file(&log);
    (server, format!("http://127.0.0.1:{port}/mcp"))
}

#[test]
fn the_typescript_sdk_client_runs_tasks_on_purra() {
    let node = existing(peers().join("bin/node"));
    let script = existing(repo_root().join("peers/node/task_client.mjs"));
    let (server, url) = http_server("ts");
    let out = Command::new(node)
        .arg(script)
        .arg(url)
        .current_dir(repo_root().join("peers/node"))
        .output()
        .expect("run the TypeScript client");
    drop(server);
    assert!(
        out.status.success(),
        "exit {:?}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(got["asked"], json!(["Delete a.txt?"]), "{got}");
    assert_eq!(got["confirm"]["result"], "Deleted a.txt", "{got}");
    assert_eq!(got["confirm"]["messages"][0], "taskCreated", "{got}");
    assert_eq!(
        got["confirm"]["messages"].as_array().unwrap().last(),
        Some(&json!("result")),
        "{got}"
    );
    assert_eq!(
        got["cancel"],
        json!({"created": "working", "ack": "cancelled", "after": "cancelled"})
    );
    assert_eq!(got["listed"], json!(["cancelled", "completed"]));
}

/// Runs the Python SDK 1.30.0 task client with `args` and checks what it saw.
fn python_task_client(args: &[&str]) {
    let python = existing(peers().join("venv-mcp1/bin/python"));
    let script = existing(repo_root().join("peers/python/task_client.py"));
    let out = Command::new(python)
        .args(["-W", "ignore::DeprecationWarning"])
        .arg(script)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run the Python client");
    assert!(
        out.status.success(),
        "exit {:?}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut got: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let id = got["confirm"]["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"]
        .as_str()
        .expect("the result names its task")
        .to_owned();
    assert!(
        id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()),
        "{got}"
    );
    got["confirm"]["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"] =
        json!("ID");
    assert_eq!(
        got,
        json!({
            "protocol": "2025-11-25",
            "server_tasks": true,
            "asked": ["Delete a.txt?"],
            "confirm": {
                "created": "working",
                // input_required while the elicitation waits, working once answered, then done.
                "notified": ["input_required", "working", "completed"],
                "result": {
                    "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "ID"}},
                    "content": [{"type": "text", "text": "Deleted a.txt"}],
                    "isError": false,
                },
                "after": "completed",
                "ttl": 60000,
                "same_id": true,
            },
            "cancel": {
                "created": "working",
                "ack": "cancelled",
                "after": "cancelled",
                "result_error": {"code": -32600, "message": "Invalid request: task \"ID\" was cancelled"},
            },
            "listed": ["cancelled", "completed"],
            "unknown": {"code": -32602, "message": "Invalid params: unknown task \"no-such-task\""},
        })
    );
}

#[test]
fn the_python_sdk_1_30_client_runs_tasks_on_purra_over_stdio() {
    python_task_client(&[
        "--",
        env!("CARGO_BIN_EXE_purra-conformance-server"),
        "--stdio",
    ]);
}

#[test]
fn the_python_sdk_1_30_client_runs_tasks_on_purra_over_streamable_http() {
    let (server, url) = http_server("py");
    python_task_client(&["--http", &url]);
    drop(server);
}
