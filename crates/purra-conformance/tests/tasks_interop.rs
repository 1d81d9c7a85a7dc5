//! The official TypeScript SDK client (`peers/node/task_client.mjs`, SDK pinned in
//! `peers/node/package.json`) running 2025-11-25 tasks on purra's conformance server over
//! Streamable HTTP: a task whose handler asks for confirmation (`input_required`, answered by the
//! client's elicitation handler) to its result, a running task cancelled, and `tasks/list`.

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

#[test]
fn the_typescript_sdk_client_runs_tasks_on_purra() {
    let peers = std::env::var_os("PURRA_PEERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".peers"));
    let node = existing(peers.join("bin/node"));
    let script = existing(repo_root().join("peers/node/task_client.mjs"));
    let log = std::env::temp_dir().join(format!("purra-tasks-interop-{}.log", std::process::id()));
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
    let out = Command::new(node)
        .arg(script)
        .arg(format!("http://127.0.0.1:{port}/mcp"))
        .current_dir(repo_root().join("peers/node"))
        .output()
        .expect("run the TypeScript client");
    drop(server);
    let _ = std::fs::remove_file(&log);
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
