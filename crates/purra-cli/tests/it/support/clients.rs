//! The processes of a gateway scenario: `purra gateway` with its stderr lines as they come, and
//! the official SDKs' gateway clients (`peers/python/gateway_client.py`,
//! `peers/node/gateway_client.mjs`) with the JSON lines they print.

#![allow(dead_code)] // each module uses its own part

use std::ffi::OsStr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::peers::{lines_of, node, peer, python, repo_root};
use super::run::{purra_bin, LIMIT};

/// What `purra gateway` prints when it serves Streamable HTTP, before the URL.
pub const SERVING: &str = "purra gateway: serving ";

/// An official SDK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sdk {
    Python,
    Node,
}

/// The SDK's gateway client, its arguments to follow.
pub fn gateway_client(sdk: Sdk) -> Command {
    let (program, script) = match sdk {
        Sdk::Python => (python(), "peers/python/gateway_client.py"),
        Sdk::Node => (node(), "peers/node/gateway_client.mjs"),
    };
    let mut cmd = Command::new(program);
    cmd.arg(peer(repo_root().join(script)));
    cmd
}

/// Starts `cmd` (stdin closed, stderr inherited), which prints one JSON document a line on
/// stdout: the child and its lines as they come (a line that is not JSON fails the test).
pub fn json_lines(cmd: &mut Command) -> (Child, Receiver<Value>) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn client");
    let lines = lines_of(child.stdout.take().expect("stdout"), |line| {
        Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
    });
    (child, lines)
}

/// The first line of `seen` and then of `lines` that `pred` holds for; every line read is kept
/// in `seen`. Fails, naming `what`, when none came within `limit`.
pub fn wait_for(
    lines: &Receiver<Value>,
    seen: &mut Vec<Value>,
    what: &str,
    limit: Duration,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    if let Some(v) = seen.iter().find(|v| pred(v)) {
        return v.clone();
    }
    let start = Instant::now();
    loop {
        let v = lines
            .recv_timeout(limit.saturating_sub(start.elapsed()))
            .unwrap_or_else(|_| panic!("the client printed no {what}; it printed {seen:?}"));
        seen.push(v.clone());
        if pred(&v) {
            return v;
        }
    }
}

/// Starts `purra gateway --config CONFIG` (stdin and stdout closed): the child and its stderr
/// lines as they come, each echoed to this test's stderr as `[gateway] LINE`.
pub fn spawn_gateway(config: impl AsRef<OsStr>) -> (Child, Receiver<String>) {
    let mut child = Command::new(purra_bin())
        .arg("gateway")
        .arg("--config")
        .arg(config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn gateway");
    let lines = lines_of(child.stderr.take().expect("stderr"), |line| {
        eprintln!("[gateway] {line}");
        Some(line)
    });
    (child, lines)
}

/// The lines read from `lines` up to and with the first one `last` holds for; fails, naming
/// `what`, when it did not come within `limit`.
pub fn lines_until(
    lines: &Receiver<String>,
    what: &str,
    limit: Duration,
    mut last: impl FnMut(&str) -> bool,
) -> Vec<String> {
    let start = Instant::now();
    let mut read = Vec::new();
    loop {
        let line = lines
            .recv_timeout(limit.saturating_sub(start.elapsed()))
            .unwrap_or_else(|_| panic!("{what}"));
        let done = last(&line);
        read.push(line);
        if done {
            return read;
        }
    }
}

/// Reads the gateway's stderr `lines` until it says where it serves: the URL and the lines it
/// printed before.
pub fn serving(lines: &Receiver<String>, limit: Duration) -> (String, Vec<String>) {
    let mut started = lines_until(
        lines,
        "the gateway did not say where it serves",
        limit,
        |l| l.starts_with(SERVING),
    );
    let url = started.pop().expect("the line")[SERVING.len()..].to_owned();
    (url, started)
}

/// A downstream SDK client over Streamable HTTP with a user's bearer token (none: no
/// `Authorization` header); its JSON lines arrive on a channel as it prints them.
pub struct SdkClient {
    child: Child,
    lines: Receiver<Value>,
    pub seen: Vec<Value>,
}

impl SdkClient {
    pub fn start(sdk: Sdk, url: &str, token: Option<&str>, steps: Value) -> SdkClient {
        let mut cmd = gateway_client(sdk);
        if let Some(t) = token {
            // The token travels in the environment, never on a command line.
            cmd.env("GATEWAY_TOKEN", t)
                .args(["--bearer-env", "GATEWAY_TOKEN"]);
        }
        let (child, lines) = json_lines(cmd.args(["--steps", &steps.to_string(), "--http", url]));
        SdkClient {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits for the client to finish; returns every line it printed.
    pub fn finish(mut self) -> Vec<Value> {
        wait_for(&self.lines, &mut self.seen, "done", LIMIT, |v| {
            v["event"] == "done"
        });
        let _ = self.child.wait();
        std::mem::take(&mut self.seen)
    }

    /// Whether the client is still running (its call still waiting).
    pub fn running(&mut self) -> bool {
        while let Ok(v) = self.lines.try_recv() {
            self.seen.push(v);
        }
        self.child.try_wait().expect("wait").is_none()
            && !self.seen.iter().any(|v| v["step"] == "call")
    }
}

impl Drop for SdkClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
