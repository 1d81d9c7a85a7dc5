//! What the interop tests share: where the installed peers are, running a process with a time
//! limit, and HTTP servers on free local ports.

#![allow(dead_code)] // each test binary uses its own part

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

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
