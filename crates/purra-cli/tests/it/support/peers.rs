//! The set-up the CLI's end-to-end tests share: the repository's root,
//! the pinned peers `scripts/setup-peers.sh` installs (the Python SDK's venv, Node 22, the
//! OpenID Connect provider), a fresh scenario directory, and a child's output lines on a
//! channel as they come.

#![allow(dead_code)] // each module uses its own part

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

/// The repository's root.
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

/// `p`, which must exist (a peer the test command installs).
pub fn peer(p: PathBuf) -> String {
    assert!(
        p.exists(),
        "{} is missing: run scripts/setup-peers.sh (the test command does) before these tests",
        p.display()
    );
    p.to_string_lossy().into_owned()
}

/// Node 22, which runs the TypeScript SDK and the other Node peers.
pub fn node() -> String {
    peer(peers_dir().join("bin/node"))
}

/// The Python of the venv with the pinned Python SDK.
pub fn python() -> String {
    peer(peers_dir().join("venv/bin/python"))
}

/// A fresh, empty directory `purra-{kind}-{name}-PID-NANOS` under the temporary directory.
pub fn fresh_dir(kind: &str, name: &str) -> PathBuf {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!(
        "purra-{kind}-{name}-{}-{nanos}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// The lines `from` prints, as `keep` maps them (None: dropped), on a channel as they come.
pub fn lines_of<T: Send + 'static>(
    from: impl Read + Send + 'static,
    keep: impl Fn(String) -> Option<T> + Send + 'static,
) -> Receiver<T> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines().map_while(Result::ok) {
            if let Some(v) = keep(line) {
                if tx.send(v).is_err() {
                    return;
                }
            }
        }
    });
    rx
}

/// The issuer URL of the OpenID Connect provider (`peers/oidc/server.mjs`, oidc-provider),
/// started on first use and living as long as this test binary (it exits when its stdin
/// closes).
pub fn oidc_issuer() -> &'static str {
    static OIDC: OnceLock<(String, Mutex<Child>)> = OnceLock::new();
    &OIDC
        .get_or_init(|| {
            let node = peer(peers_dir().join("bin/node"));
            let dir = repo_root().join("peers/oidc");
            peer(dir.join("node_modules/oidc-provider"));
            let mut child = Command::new(node)
                .arg("server.mjs")
                .current_dir(&dir)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("start peers/oidc/server.mjs");
            let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
            let issuer = loop {
                let line = lines
                    .next()
                    .expect("the provider ended before printing its issuer")
                    .expect("a line");
                if let Some(v) = line
                    .starts_with('{')
                    .then(|| serde_json::from_str::<serde_json::Value>(&line).ok())
                    .flatten()
                {
                    break v["issuer"].as_str().expect("issuer").to_owned();
                }
            };
            std::thread::spawn(move || lines.for_each(drop));
            (issuer, Mutex::new(child))
        })
        .0
}

/// The lines of `purra gateway`'s own on stderr (upstream servers write theirs there too): those
/// starting with `purra`, each with the indented lines that follow it.
pub fn own_lines(stderr: &[u8]) -> Vec<String> {
    own(String::from_utf8_lossy(stderr).lines())
}

/// [`own_lines`] of lines already read.
pub fn own<'a>(lines: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for l in lines {
        inside = l.starts_with("purra") || (inside && l.starts_with("  "));
        if inside {
            out.push(l.to_owned());
        }
    }
    out
}

/// The test command's PostgreSQL server (`PURRA_TEST_POSTGRES`; the tests never skip it).
pub fn postgres_url() -> String {
    std::env::var("PURRA_TEST_POSTGRES").unwrap_or_else(|_| {
        panic!(
            "PURRA_TEST_POSTGRES is not set: run the tests with scripts/test.sh, or start a \
             server with `eval \"$(scripts/postgres.sh start DIR)\"` first"
        )
    })
}

/// A store in a fresh schema `PREFIX_PID_NANOS` of the test command's PostgreSQL server.
pub fn postgres_schema(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() % 1_000_000_000);
    format!(
        "{}?schema={prefix}_{}_{nanos}",
        postgres_url(),
        std::process::id()
    )
}

pub use purra_store_tests::pg_dump;

/// An access token of `user` for `resource` (`peers/oidc/token.mjs`).
pub fn token_for(issuer: &str, user: &str, resource: &str) -> String {
    token_with_scope(issuer, user, resource, "mcp:read mcp:write")
}

/// An access token of `user` for `resource` granting `scope`.
pub fn token_with_scope(issuer: &str, user: &str, resource: &str, scope: &str) -> String {
    let out = Command::new(node())
        .arg(repo_root().join("peers/oidc/token.mjs"))
        .args([issuer, user, resource, scope])
        .stdin(Stdio::null())
        .output()
        .expect("run peers/oidc/token.mjs");
    assert!(
        out.status.success(),
        "token.mjs: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .trim()
        .to_owned()
}

/// Signs in on `page` as `user` through the OpenID Connect provider: the page offers only the
/// provider (token sign-in is off), and the provider's own login and consent forms are filled
/// in the browser.
pub fn oidc_sign_in(b: &purra_store_tests::webdriver::Browser, page: &str, user: &str) {
    b.goto(&format!("{page}login"));
    b.click_css("#login-oidc");
    b.type_css("input[name=login]", user);
    b.type_css("input[name=password]", "any");
    b.click_css("button.login-submit");
    b.wait_for("input[name=prompt][value=consent]");
    b.click_css("button.login-submit");
}

/// A port free on the loopback address now (for a peer that must be told its port up front).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// The Standard Webhooks receiver (`peers/python/webhook_receiver.py`, the `standardwebhooks`
/// library verifying every request with the secret in `secret_file`) on `port`, appending each
/// verified delivery to `ledger` as one JSON line; killed when dropped. Returns once it listens.
pub fn webhook_receiver(ledger: &Path, secret_file: &Path, port: u16) -> super::run::Killed {
    let py = peer(peers_dir().join("venv-webhooks/bin/python"));
    let mut child = Command::new(py)
        .arg(peer(repo_root().join("peers/python/webhook_receiver.py")))
        .arg("--ledger")
        .arg(ledger)
        .arg("--secret-file")
        .arg(secret_file)
        .args(["--port", &port.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the receiver");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the receiver's port");
    let listening: serde_json::Value =
        serde_json::from_str(&line).expect("the receiver's port line");
    assert_eq!(
        listening["port"],
        u64::from(port),
        "the receiver listens where asked"
    );
    super::run::Killed(child)
}

/// The shared write upstream `peers/python/gateway_upstream.py` (the Python SDK over Streamable
/// HTTP) with its ledger in `dir`; killed when dropped.
pub struct HttpUpstream {
    _child: super::run::Killed,
    dir: PathBuf,
    /// Its MCP endpoint.
    pub url: String,
}

impl HttpUpstream {
    /// Starts it with `extra` arguments (e.g. `--write-delay-ms 150`); returns once it listens.
    pub fn start(dir: &Path, extra: &[&str]) -> HttpUpstream {
        let mut child = Command::new(python())
            .arg(peer(repo_root().join("peers/python/gateway_upstream.py")))
            .args(["--dir", &dir.to_string_lossy(), "--http"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the upstream");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read");
        let port = serde_json::from_str::<serde_json::Value>(&line)
            .ok()
            .and_then(|v| v["listening"].as_u64())
            .unwrap_or_else(|| panic!("the upstream did not say where it listens: {line:?}"));
        HttpUpstream {
            _child: super::run::Killed(child),
            dir: dir.to_owned(),
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }

    /// Its ledger's lines.
    pub fn ledger(&self) -> Vec<String> {
        super::run::ledger_lines(&self.dir.join("ledger.txt"))
    }

    /// The values `set_value` received, in the order they arrived.
    pub fn writes(&self) -> Vec<String> {
        self.ledger()
            .into_iter()
            .filter_map(|l| l.strip_prefix("call set_value ").map(str::to_owned))
            .collect()
    }
}
