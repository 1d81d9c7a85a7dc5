//! Running the `purra` binary to completion and reading what it printed; a test's directory; the
//! JSON the SDK clients print and an HTTP body sent in chunks.

#![allow(dead_code)] // each module uses its own part

use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The longest one step of a scenario may take (a process starting, a client finishing) on a
/// loaded machine.
pub const LIMIT: Duration = Duration::from_secs(120);

/// The bound of one line awaited from a quick scenario (the CLI's own commands against an
/// example server).
pub const QUICK_LIMIT: Duration = Duration::from_secs(60);

/// The run `purra demo` makes (its id is derived from the demo's fixed input).
pub const RUN: &str = "demo:set_note:fa9b9607bbb5e847";

/// The `purra` binary under test.
pub fn purra_bin() -> &'static str {
    env!("CARGO_BIN_EXE_purra")
}

/// Runs `purra args...` with stdin closed to completion (killed, and the test failed, past
/// [`LIMIT`]).
pub fn purra<S: AsRef<OsStr>>(args: &[S]) -> Output {
    purra_within(None, args, LIMIT)
}

/// [`purra`] in the directory `dir`.
pub fn purra_in<S: AsRef<OsStr>>(dir: &Path, args: &[S]) -> Output {
    purra_within(Some(dir), args, LIMIT)
}

/// Runs `purra args...` (in `dir` if given) with stdin closed to completion; killed, and the test
/// failed with what it printed, past `limit`.
pub fn purra_within<S: AsRef<OsStr>>(dir: Option<&Path>, args: &[S], limit: Duration) -> Output {
    let mut cmd = Command::new(purra_bin());
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(dir) = dir {
        cmd.current_dir(dir);
    }
    finish_within(cmd.spawn().expect("spawn purra"), limit)
}

/// Waits for `child` to end and returns its output, read as it comes (a full pipe never stalls
/// it); kills it, and fails the test with what it printed, past `limit`.
pub fn finish_within(mut child: Child, limit: Duration) -> Output {
    fn drain(from: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut all = Vec::new();
            if let Some(mut from) = from {
                let _ = from.read_to_end(&mut all);
            }
            all
        })
    }
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let start = Instant::now();
    let mut late = false;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            late = true;
            break child.wait().expect("wait");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let out = Output {
        status,
        stdout: stdout.join().expect("stdout"),
        stderr: stderr.join().expect("stderr"),
    };
    assert!(!late, "purra ran past {limit:?}\n{}", describe(&out));
    out
}

/// A process's exit code, stdout and stderr, for a failed assertion's message.
pub fn describe(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// What a process printed on stdout.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Asserts the exit code and returns stdout.
pub fn expect_code(out: &Output, code: i32) -> String {
    assert_eq!(out.status.code(), Some(code), "{}", describe(out));
    stdout(out)
}

/// Stdout as one JSON document.
pub fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e})\n{}", describe(out)))
}

/// A test's directory (`purra-KIND-NAME-PID-NANOS` in the temporary directory), removed when
/// dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// Creates a fresh directory for test `name` of the module `kind`.
    pub fn new(kind: &str, name: &str) -> TempDir {
        TempDir(super::peers::fresh_dir(kind, name))
    }

    /// The path of `name` in it, as text.
    pub fn path(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Kills the child when dropped, however the test ends.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The lines of an SDK client's output that are step results.
pub fn steps_of(lines: &[Value]) -> Vec<&Value> {
    lines.iter().filter(|l| l.get("step").is_some()).collect()
}

/// A step's result: its first text and whether it is an error.
pub fn result_text(step: &Value) -> (String, bool) {
    let r = &step["result"];
    assert!(r.is_object(), "not a result: {step}");
    let text = r["content"][0]["text"].as_str().unwrap_or("").to_owned();
    (text, r["isError"] == true)
}

pub use purra_store_tests::webdriver::dechunk;

/// The lines of the ledger file `path` (an upstream's fsynced record of each request it got);
/// none while it does not exist.
pub fn ledger_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Waits until the ledger `path` has a line starting with `prefix`.
pub fn wait_ledger(path: &Path, prefix: &str) {
    let start = Instant::now();
    while !ledger_lines(path).iter().any(|l| l.starts_with(prefix)) {
        assert!(
            start.elapsed() < LIMIT,
            "no ledger line {prefix:?}: {:?}",
            ledger_lines(path)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `purra approvals ARGS --db DB --json`, which must succeed: its JSON.
pub fn approvals_json(db: &str, args: &[&str]) -> Value {
    let mut all: Vec<&str> = vec!["approvals"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--db", db, "--json"]);
    let out = purra(&all);
    assert_eq!(
        out.status.code(),
        Some(0),
        "purra {all:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

/// Waits until the store `db` (a SQLite file, or a PostgreSQL URL) has an approval for which
/// `found` holds among its listed ones; its id.
pub fn wait_approval(db: &str, what: &str, found: impl Fn(&Value) -> bool) -> String {
    let start = Instant::now();
    loop {
        if db.starts_with("postgres") || Path::new(db).exists() {
            let list = approvals_json(db, &["list"]);
            if let Some(a) = list["approvals"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|a| found(a))
            {
                return a["id"].as_str().expect("id").to_owned();
            }
        }
        assert!(start.elapsed() < LIMIT, "{what} never appeared");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One raw HTTP/1.1 exchange's answer.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A bare HTTP/1.1 request (`Connection: close`), its answer read to the end.
pub fn http(method: &str, url: &str, headers: &[(&str, &str)], body: &str) -> Answer {
    let rest = url.strip_prefix("http://").expect("an http URL");
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    let mut s = std::net::TcpStream::connect(host).expect("connect");
    s.set_read_timeout(Some(LIMIT)).expect("timeout");
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    std::io::Write::write_all(&mut s, req.as_bytes()).expect("write");
    let mut raw = Vec::new();
    std::io::Read::read_to_end(&mut s, &mut raw).expect("read");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, rest) = text.split_once("\r\n\r\n").expect("a head");
    let mut lines = head.split("\r\n");
    let status = lines.next().expect("status line")[9..12]
        .parse()
        .expect("status");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v == "chunked");
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_owned()
    };
    Answer {
        status,
        headers,
        body,
    }
}

/// Signs in to the approver page at `page` (its URL, no trailing slash) with a sign-in
/// `token`: the session cookie and the CSRF token.
pub fn page_sign_in(page: &str, token: &str) -> (String, String) {
    let r = http(
        "POST",
        &format!("{page}/login"),
        &[
            ("content-type", "application/x-www-form-urlencoded"),
            ("origin", page),
        ],
        &format!("token={token}"),
    );
    assert_eq!(r.status, 303, "{}", r.body);
    let cookie = r
        .header("set-cookie")
        .expect("a session cookie")
        .split(';')
        .next()
        .expect("cookie")
        .to_owned();
    let shown = http("GET", &format!("{page}/"), &[("cookie", &cookie)], "");
    assert_eq!(shown.status, 200);
    let from = shown.body.find("name=\"csrf\" value=\"").expect("csrf") + 19;
    (cookie, shown.body[from..from + 43].to_owned())
}

/// Decides approval `id` (`verdict`: `approve` or `deny`) on the approver page at `page`,
/// signed in with `token`: the status and the JSON answer.
pub fn page_decide(page: &str, token: &str, id: &str, verdict: &str) -> (u16, Value) {
    let (cookie, csrf) = page_sign_in(page, token);
    let r = http(
        "POST",
        &format!("{page}/approvals/{id}/decide"),
        &[
            ("cookie", &cookie),
            ("origin", page),
            ("accept", "application/json"),
            ("content-type", "application/x-www-form-urlencoded"),
        ],
        &format!("csrf={csrf}&verdict={verdict}"),
    );
    (r.status, serde_json::from_str(&r.body).expect("json"))
}

/// `GET PATH` of the HTTP server at `authority` (`HOST:PORT`), `Connection: close`: its whole
/// answer, head and body, as text (reads give up after 10 s).
pub fn http_get(authority: &str, path: &str) -> std::io::Result<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(authority)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n"
    )?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// One POST of `body` to the MCP endpoint `url` as the bearer of `token`, in session `session`
/// (with its 2025-11-25 version header) or without one (an `initialize`).
pub fn bearer_post(url: &str, token: &str, session: Option<&str>, body: &str) -> Answer {
    let auth = format!("Bearer {token}");
    let mut h = vec![
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("authorization", auth.as_str()),
    ];
    if let Some(id) = session {
        h.push(("mcp-session-id", id));
        h.push(("mcp-protocol-version", "2025-11-25"));
    }
    http("POST", url, &h, body)
}

/// One stateless 2026-07-28 request `method` with `params` (which carry their `_meta`) to the
/// server on `port`, with `Mcp-Name` from the params' `name` (a tool) or `taskId` (a task): the
/// HTTP status line and the JSON-RPC answer (from an SSE `data:` line, or the JSON body).
pub fn stateless_post(port: u16, method: &str, params: Value) -> (String, Value) {
    use std::io::{Read, Write};
    // `Mcp-Name`: the tool's name, or the task's id.
    let name = params["name"]
        .as_str()
        .or_else(|| params["taskId"].as_str())
        .map(|n| format!("Mcp-Name: {n}\r\n"))
        .unwrap_or_default();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(LIMIT)).expect("timeout");
    write!(
        s,
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: {method}\r\n{name}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("write");
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).expect("read");
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, rest) = answer.split_once("\r\n\r\n").expect("a head");
    let status = head.lines().next().unwrap_or_default().to_owned();
    let chunked = head
        .lines()
        .any(|l| l.eq_ignore_ascii_case("transfer-encoding: chunked"));
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_owned()
    };
    let json = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .find(|v| v.get("id").is_some())
        .or_else(|| serde_json::from_str::<Value>(&body).ok())
        .unwrap_or_else(|| panic!("no answer in {answer:?}"));
    (status, json)
}

/// The audit trail of approval `id` in the store `db`, read through the store's own API.
pub fn audit_of(db: &str, id: &str) -> Vec<purra_core::AuditEntry> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let location = purra_store::StoreLocation::parse(db).expect("location");
        let store = purra_store::AnyStore::open(&location, None)
            .await
            .expect("store");
        store
            .ops()
            .approval_audit(purra_core::ApprovalId(id.to_owned()))
            .await
            .expect("audit")
    })
}
