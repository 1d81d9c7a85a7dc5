//! A small W3C WebDriver client for the browser tests of the crates (purra-cli's, purra-page's): one chromedriver per test binary (Debian's
//! `chromium-driver`, installed by scripts/setup-peers.sh), one headless Chromium per [`Browser`]
//! with a fresh profile, driven over the WebDriver HTTP protocol with blocking requests on a plain
//! TCP socket (JSON bodies, `Connection: close`).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// How long a browser test waits for anything it expects to see.
pub const WAIT: Duration = Duration::from_secs(90);

/// The W3C name of an element reference's member.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A program on PATH (or named by `env`), else a clear failure.
fn program(name: &str, env: &str) -> String {
    if let Some(p) = std::env::var_os(env) {
        return p.to_string_lossy().into_owned();
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|| {
            panic!("{name} is missing: run scripts/setup-peers.sh (it installs Debian's chromium and chromium-driver)")
        })
}

/// The chromedriver of this test binary. It runs under a shell that ends it when this process's
/// end of its stdin closes, so it never outlives the tests.
struct Driver {
    port: u16,
    _guard: Mutex<(Child, ChildStdin)>,
}

fn driver() -> &'static Driver {
    static DRIVER: OnceLock<Driver> = OnceLock::new();
    DRIVER.get_or_init(|| {
        let chromedriver = program("chromedriver", "PURRA_CHROMEDRIVER");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut child = Command::new("sh")
            .args([
                "-c",
                "\"$0\" --port=\"$1\" >/dev/null 2>&1 & d=$!; cat >/dev/null; kill $d",
                &chromedriver,
                &port.to_string(),
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let stdin = child.stdin.take().expect("stdin");
        let start = Instant::now();
        loop {
            if let Ok((200, v)) = request(port, "GET", "/status", None) {
                if v["value"]["ready"] == true {
                    break;
                }
            }
            assert!(start.elapsed() < WAIT, "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Driver {
            port,
            _guard: Mutex::new((child, stdin)),
        }
    })
}

/// One blocking WebDriver request; the status and the JSON answer.
fn request(
    port: u16,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> std::io::Result<(u16, Value)> {
    let body = body.map(Value::to_string).unwrap_or_default();
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(WAIT))?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    // chromedriver may keep the connection open: read the head, then exactly the body.
    let mut raw = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(i) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let n = s.read(&mut buf)?;
        if n == 0 {
            return Err(std::io::Error::other("connection closed in the head"));
        }
        raw.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&raw[..head_end]).to_ascii_lowercase();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok());
    let chunked = head
        .lines()
        .any(|l| l.starts_with("transfer-encoding: chunked"));
    let mut rest = raw[head_end + 4..].to_vec();
    loop {
        let done = match length {
            Some(n) => rest.len() >= n,
            None if chunked => rest.windows(5).any(|w| w == b"0\r\n\r\n"),
            None => false,
        };
        if done {
            break;
        }
        let n = s.read(&mut buf)?;
        if n == 0 {
            break;
        }
        rest.extend_from_slice(&buf[..n]);
    }
    let rest = String::from_utf8_lossy(&rest).into_owned();
    let body = if chunked { dechunk(&rest) } else { rest };
    Ok((status, serde_json::from_str(&body).unwrap_or(Value::Null)))
}

/// A headless Chromium with a fresh profile; quits when dropped.
pub struct Browser {
    session: String,
    profile: PathBuf,
}

impl Browser {
    /// Starts a browser with a `width`×`height` window.
    pub fn new(width: u32, height: u32) -> Browser {
        let d = driver();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |t| t.as_nanos());
        let profile =
            std::env::temp_dir().join(format!("purra-chromium-{}-{nanos}", std::process::id()));
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": program("chromium", "PURRA_CHROMIUM"),
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update",
                    "--disable-sync", "--disable-dev-shm-usage", "--hide-scrollbars",
                    format!("--window-size={width},{height}"),
                    format!("--user-data-dir={}", profile.display()),
                ]
            }
        }}});
        let (status, v) = request(d.port, "POST", "/session", Some(&caps)).expect("new session");
        assert_eq!(status, 200, "chromedriver refused the session: {v}");
        let session = v["value"]["sessionId"]
            .as_str()
            .expect("session id")
            .to_owned();
        Browser { session, profile }
    }

    /// A command on this session; panics unless it succeeds.
    fn cmd(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let (status, v) = self.try_cmd(method, path, body);
        assert_eq!(status, 200, "{method} {path}: {v}");
        v["value"].clone()
    }

    fn try_cmd(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let full = format!("/session/{}{path}", self.session);
        request(driver().port, method, &full, body.as_ref()).expect("webdriver request")
    }

    /// Navigates to `url` (and waits for the load).
    pub fn goto(&self, url: &str) {
        self.cmd("POST", "/url", Some(json!({ "url": url })));
    }

    /// The first element matching `css`, if there is one now.
    pub fn find(&self, css: &str) -> Option<String> {
        let (status, v) = self.try_cmd(
            "POST",
            "/element",
            Some(json!({"using": "css selector", "value": css})),
        );
        (status == 200).then(|| v["value"][ELEMENT].as_str().unwrap_or("").to_owned())
    }

    /// Waits for an element matching `css`.
    pub fn wait_for(&self, css: &str) -> String {
        let start = Instant::now();
        loop {
            if let Some(e) = self.find(css) {
                return e;
            }
            assert!(
                start.elapsed() < WAIT,
                "no {css} appeared; the page shows: {}",
                self.body_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until the text of the element matching `css` is `want`.
    pub fn wait_text(&self, css: &str, want: &str) {
        let start = Instant::now();
        loop {
            if let Some(e) = self.find(css) {
                if self.text(&e) == want {
                    return;
                }
            }
            assert!(
                start.elapsed() < WAIT,
                "{css} never read {want:?}; the page shows: {}",
                self.body_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Clicks an element.
    pub fn click(&self, element: &str) {
        self.cmd(
            "POST",
            &format!("/element/{element}/click"),
            Some(json!({})),
        );
    }

    /// Finds the element matching `css` and clicks it, finding it again if the page replaced it
    /// in between (live updates do).
    pub fn click_css(&self, css: &str) {
        self.act_css(css, "click", json!({}));
    }

    /// Finds the element matching `css` and types `text` into it (found again if replaced).
    pub fn type_css(&self, css: &str, text: &str) {
        self.act_css(css, "value", json!({ "text": text }));
    }

    fn act_css(&self, css: &str, action: &str, body: Value) {
        let start = Instant::now();
        loop {
            let element = self.wait_for(css);
            let (status, v) = self.try_cmd(
                "POST",
                &format!("/element/{element}/{action}"),
                Some(body.clone()),
            );
            if status == 200 {
                return;
            }
            assert!(
                v["value"]["error"] == "stale element reference" && start.elapsed() < WAIT,
                "{action} on {css}: {v}"
            );
        }
    }

    /// The visible text of the element matching `css` (found again if the page replaced it).
    pub fn text_css(&self, css: &str) -> String {
        let start = Instant::now();
        loop {
            let element = self.wait_for(css);
            let (status, v) = self.try_cmd("GET", &format!("/element/{element}/text"), None);
            if status == 200 {
                return v["value"].as_str().unwrap_or("").to_owned();
            }
            assert!(
                v["value"]["error"] == "stale element reference" && start.elapsed() < WAIT,
                "text of {css}: {v}"
            );
        }
    }

    /// An element's visible text.
    pub fn text(&self, element: &str) -> String {
        let (status, v) = self.try_cmd("GET", &format!("/element/{element}/text"), None);
        if status != 200 {
            return String::new();
        }
        v["value"].as_str().unwrap_or("").to_owned()
    }

    /// The page's whole visible text.
    pub fn body_text(&self) -> String {
        self.script("return document.body ? document.body.innerText : ''")
            .as_str()
            .unwrap_or("")
            .to_owned()
    }

    /// Runs `js` in the page; its return value.
    pub fn script(&self, js: &str) -> Value {
        self.script_with(js, json!([]))
    }

    /// Runs `js` in the page with `args` (a JSON array, `arguments` in the script).
    pub fn script_with(&self, js: &str, args: Value) -> Value {
        self.cmd(
            "POST",
            "/execute/sync",
            Some(json!({"script": js, "args": args})),
        )
    }

    /// Makes the frame element matching `css` the context of the commands that follow.
    pub fn enter_frame(&self, css: &str) {
        let element = self.wait_for(css);
        self.cmd("POST", "/frame", Some(json!({"id": {ELEMENT: element}})));
    }

    /// Makes the enclosing page the context again.
    pub fn leave_frame(&self) {
        self.cmd("POST", "/frame/parent", Some(json!({})));
    }

    /// The current URL.
    pub fn url(&self) -> String {
        self.cmd("GET", "/url", None)
            .as_str()
            .unwrap_or("")
            .to_owned()
    }

    /// Deletes every cookie of the current site.
    pub fn delete_cookies(&self) {
        self.cmd("DELETE", "/cookie", None);
    }

    /// The cookies the browser holds for the current page.
    pub fn cookies(&self) -> Value {
        self.cmd("GET", "/cookie", None)
    }

    /// A PNG of the viewport.
    pub fn screenshot(&self) -> Vec<u8> {
        use base64::Engine as _;
        let b64 = self.cmd("GET", "/screenshot", None);
        base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().unwrap_or(""))
            .expect("base64 screenshot")
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = request(
            driver().port,
            "DELETE",
            &format!("/session/{}", self.session),
            None,
        );
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// An HTTP body sent with `Transfer-Encoding: chunked`, joined: its whole chunks up to the last
/// one (a chunk cut short ends it).
pub fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || after.len() < n {
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].trim_start_matches("\r\n");
    }
    out
}
