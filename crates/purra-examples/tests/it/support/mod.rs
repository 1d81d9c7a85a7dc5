//! What the test modules share: where the installed peers are, running a process with a time
//! limit, HTTP servers on free local ports, the example binaries, a test's directory, and the
//! host side of the adapter tests (the adapter fixture, a run, calling a bound tool).

#![allow(dead_code)] // each module uses its own part

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use purra_core::{Lease, RunContext, RunId, ToolError, ToolRegistration};
use purra_mcp::ReadBinding;
use purra_protocol::{Client, ClientOptions, Connection, StderrMode, StdioCommand};
use serde_json::Value;

/// What the fixture servers put in their internal error text: it must never reach the model.
pub const CANARY: &str = "CANARY-7f3a";

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repo root")
}

pub fn peers_dir() -> PathBuf {
    std::env::var_os("PURRA_PEERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".peers"))
}

pub fn peer_tool(rel: &str) -> PathBuf {
    let p = peers_dir().join(rel);
    assert!(
        p.exists(),
        "{} is missing: run scripts/setup-peers.sh (the test command does) before these tests",
        p.display()
    );
    p
}

pub fn python() -> PathBuf {
    peer_tool("venv/bin/python")
}

pub fn node() -> PathBuf {
    peer_tool("bin/node")
}

pub fn script(rel: &str) -> String {
    repo_root()
        .join("peers")
        .join(rel)
        .to_string_lossy()
        .into_owned()
}

/// Runs a command to completion with a time limit, killing it past the limit.
pub fn run(mut cmd: Command, limit: Duration) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "timed out after {limit:?}\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A server process on a free local port, killed when dropped.
pub struct HttpPeer {
    /// The server process.
    pub child: std::process::Child,
    /// Its MCP endpoint.
    pub url: String,
}

impl Drop for HttpPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free local port for a server process to bind, never the same twice in one test binary: a
/// port is free only until somebody binds it, and two servers started at once by parallel tests
/// could otherwise be handed the same one (the second fails to bind while its test talks to the
/// first's, and is refused once that test ends: seen in CI).
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if GIVEN.lock().unwrap().insert(port) {
            return port;
        }
    }
}

/// Whether a server accepts connections on the local `port`. A connection to a port of the
/// ephemeral range that nothing listens on can be given that same port as its source and connect
/// to itself (TCP simultaneous open); that one does not count, or a test would go on before its
/// server is up.
pub fn accepting(port: u16) -> bool {
    std::net::TcpStream::connect(("127.0.0.1", port))
        .is_ok_and(|s| s.local_addr().ok() != s.peer_addr().ok())
}

/// Whether an HTTP server answers on the local `port`: a `GET /` that gets any HTTP status line
/// back. Stricter than [`accepting`]: only a server that reads requests passes.
pub fn answering_http(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    if s.local_addr().ok() == s.peer_addr().ok() {
        return false;
    }
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    if s.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 5];
    s.read_exact(&mut head).is_ok() && &head == b"HTTP/"
}

/// Starts `program args... <port-arg>` and waits until the port accepts connections.
pub fn http_server(mut cmd: Command, port_arg: impl Fn(u16) -> String) -> HttpPeer {
    let port = free_port();
    cmd.arg(port_arg(port))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    let mut child = cmd.spawn().expect("spawn server");
    let start = Instant::now();
    while !answering_http(port) {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("server for port {port} exited before it answered: {status}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "server on port {port} did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    HttpPeer {
        child,
        url: format!("http://127.0.0.1:{port}/mcp"),
    }
}

/// Waits until a server accepts connections on the local `port`, failing as `what` after `limit`.
pub async fn until_accepting(port: u16, limit: Duration, what: &str) {
    let start = Instant::now();
    while !accepting(port) {
        assert!(start.elapsed() < limit, "{what} did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Starts `program args... <port>` (a peer's HTTP server taking its port as its last argument)
/// and waits until it answers.
pub fn peer_http_server(program: PathBuf, args: &[String]) -> HttpPeer {
    let mut cmd = Command::new(program);
    cmd.args(args);
    http_server(cmd, |port| port.to_string())
}

/// purra's example server over Streamable HTTP on a free local port.
pub fn example_server_http() -> HttpPeer {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_purra-example-server"));
    cmd.arg("--http");
    http_server(cmd, |port| format!("127.0.0.1:{port}"))
}

/// purra's example client run with `first` and then `rest` as its arguments, within two minutes.
pub fn example_client(first: &str, rest: &[String]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_purra-example-client"));
    cmd.arg(first).args(rest);
    run(cmd, Duration::from_secs(120))
}

/// A test's directory (`purra-TAG-PID-NANOS` in the temporary directory), removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// Creates a fresh directory for the test `tag`.
    pub fn new(tag: &str) -> TempDir {
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let dir = std::env::temp_dir().join(format!("purra-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// purra's client over stdio to the adapter fixture server (`purra-adapter-fixture`).
pub async fn adapter_fixture() -> Arc<Connection> {
    let cmd =
        StdioCommand::new(env!("CARGO_BIN_EXE_purra-adapter-fixture")).stderr(StderrMode::Null);
    Arc::new(
        Client::connect_stdio(cmd, ClientOptions::default())
            .await
            .unwrap(),
    )
}

/// The run `id` (its own root) of `agent`, with no lease bound.
pub fn run_context(id: &str, agent: &str) -> RunContext {
    RunContext {
        run_id: RunId::new(id),
        root_run_id: RunId::new(id),
        agent: agent.into(),
        lease: Lease::unbounded(),
        idempotency_key: None,
    }
}

/// Calls the registered tool `local` with `args` in `run`, as the host would.
pub async fn call_registered(
    registrations: &[ToolRegistration],
    local: &str,
    args: Value,
    run: RunContext,
) -> Result<Value, ToolError> {
    let reg = registrations
        .iter()
        .find(|r| r.name() == local)
        .expect("registered");
    (reg.handler())(args, run).await
}

/// Read bindings of the remote tools of `pairs` (remote, local), each made by `binding(local)`.
pub fn read_bindings(
    pairs: &[(&str, &str)],
    binding: impl Fn(&str) -> ReadBinding,
) -> BTreeMap<String, ReadBinding> {
    pairs
        .iter()
        .map(|(remote, local)| ((*remote).to_owned(), binding(local)))
        .collect()
}
