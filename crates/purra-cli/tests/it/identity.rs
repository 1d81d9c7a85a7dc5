//! Issue 45: every call reaches the upstream as the person who asked. A real authorization
//! server that implements RFC 8693 itself (idpyoidc, `peers/idpyoidc/server.py`) issues alice's
//! and bob's tokens for the gateway; `purra gateway` with `[gateway.auth]` checks them and, for
//! an upstream with `[upstreams.ID.auth] mode = "token_exchange"`, exchanges each caller's token
//! for one whose audience is the upstream, naming the gateway as actor. The upstream is the
//! Python SDK's resource server (`peers/python/exchange_upstream.py`: the SDK's own bearer auth,
//! `aud` must be itself), which records the subject of every call it receives. Downstream: the
//! official Python and TypeScript SDK clients, and purra's own client for 1 000 interleaved
//! concurrent calls. A second upstream is the Python SDK's stdio server that reads its token
//! from the environment, started once per principal from a pool of two.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use purra_protocol::{Client, ClientOptions, HttpClientOptions};
use serde_json::{json, Value};

use crate::support::clients::{serving, Sdk, SdkClient};
use crate::support::peers::{
    free_port, fresh_dir, lines_of, node, oidc_issuer, oidc_sign_in, peer, peers_dir, python,
    repo_root, token_with_scope,
};
use crate::support::run::{http, purra_bin, result_text, steps_of, Killed, LIMIT};
use purra_store_tests::webdriver::Browser;

const GATEWAY_CLIENT: &str = "purra-gateway";
const GATEWAY_SECRET: &str = "gateway-secret";

/// Starts `cmd` and returns it with what follows `prefix` on the first stdout line that has it.
fn start_peer(mut cmd: Command, prefix: &str) -> (Killed, String) {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start a peer");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let found = loop {
        let line = lines
            .next()
            .expect("the peer ended before it was ready")
            .expect("a line");
        if let Some(rest) = line.strip_prefix(prefix) {
            break rest.to_owned();
        }
    };
    std::thread::spawn(move || lines.for_each(drop));
    (Killed(child), found)
}

/// Waits until something accepts connections at `url`'s port (uvicorn prints before binding).
fn wait_listening(url: &str) {
    let port = url
        .rsplit_once(':')
        .and_then(|(_, rest)| rest.split('/').next())
        .expect("a port");
    let start = Instant::now();
    while std::net::TcpStream::connect(format!("127.0.0.1:{port}")).is_err() {
        assert!(start.elapsed() < LIMIT, "nothing listens at {url}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The scenario: idpyoidc, the resource server, the gateway in front of it and of the stdio
/// server, and a key file for the principals' stored secrets.
struct Scenario {
    dir: PathBuf,
    issuer: String,
    url: String,
    record: PathBuf,
    gateway: Child,
    log: Arc<std::sync::Mutex<Vec<String>>>,
    metrics: String,
    _peers: Vec<Killed>,
}

impl Drop for Scenario {
    fn drop(&mut self) {
        let _ = self.gateway.kill();
        let _ = self.gateway.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Scenario {
    fn start(name: &str) -> Scenario {
        let dir = fresh_dir("identity", name);
        let mut idp = Command::new(peer(peers_dir().join("venv-idp/bin/python")));
        idp.arg(peer(repo_root().join("peers/idpyoidc/server.py")))
            .arg("0")
            .arg(dir.join("gateway-key.pem"))
            .current_dir(&dir);
        let (idp, issuer) = start_peer(idp, "issuer ");
        let record = dir.join("record.txt");
        let mut up = Command::new(python());
        up.arg(peer(repo_root().join("peers/python/exchange_upstream.py")))
            .arg(free_port().to_string())
            .arg(&issuer)
            .arg(&record);
        let (up, upstream) = start_peer(up, "ready ");
        wait_listening(&upstream);
        std::fs::write(dir.join("gateway.secret"), GATEWAY_SECRET).expect("secret file");
        let key = purra_core::vault::Keyring::new_key_line("k1").expect("a key line");
        std::fs::write(dir.join("credential.keys"), key.as_str()).expect("key file");
        let env_server = peer(repo_root().join("peers/python/token_env_server.py"));
        let metrics = format!("127.0.0.1:{}", free_port());
        // Spans go to the OTLP receiver, approval and effect events to the webhook receiver:
        // both are scanned for tokens and secrets with the log.
        let mut otlp = Command::new(peer(peers_dir().join("venv-otel/bin/python")));
        otlp.arg(peer(repo_root().join("peers/python/otlp_receiver.py")))
            .arg("--out")
            .arg(dir.join("otlp.jsonl"));
        let (otlp, otlp_url) = start_peer(otlp, "listening ");
        // A Standard Webhooks signing secret (the receiver verifies every delivery with it).
        std::fs::write(
            dir.join("ops.whsec"),
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        )
        .expect("webhook secret");
        let mut hooks = Command::new(peer(peers_dir().join("venv-webhooks/bin/python")));
        hooks
            .arg(peer(repo_root().join("peers/python/webhook_receiver.py")))
            .arg("--ledger")
            .arg(dir.join("hooks.jsonl"))
            .arg("--secret-file")
            .arg(dir.join("ops.whsec"))
            .args(["--port", "0"]);
        let (hooks, port) = start_peer(hooks, "{\"port\": ");
        let hooks_url = format!("http://127.0.0.1:{}/hooks/ops", port.trim_end_matches('}'));
        let text = format!(
            r#"[gateway]
name = "gw"
db = "gateway.db"
listen = "127.0.0.1:0"
approval_wait = "60s"
progress_interval = "1s"
credential_keys = "credential.keys"
max_calls_per_minute_per_caller = 60000

[telemetry]
metrics_listen = {metrics:?}
otlp_endpoint = {otlp_url:?}
metrics_interval = "1s"

[webhooks.ops]
url = {hooks_url:?}
secret_file = "ops.whsec"
events = ["approval.pending", "approval.decided", "effect.committed", "effect.unknown"]

[gateway.auth]
issuer = {issuer:?}
require_at_jwt = false

[upstreams.values]
url = {upstream:?}

[upstreams.values.auth]
mode = "token_exchange"
issuer = {issuer:?}
token_endpoint = "{issuer}/token"
client_id = {GATEWAY_CLIENT:?}
client_secret_file = "gateway.secret"
actor = true

[upstreams.personal]
command = [{python:?}, {env_server:?}]
per_principal = true
env_from_credential = {{ PURRA_TEST_TOKEN = "token" }}
max_principals = 2

[reads.whoami]
upstream = "values"
title = "Who the upstream says is calling"
scope = "open"

[reads.token_hash]
upstream = "personal"
tool = "whoami"
title = "The digest of the token the caller's own process holds"
scope = "open"

[writes.set_value]
upstream = "values"
title = "Set the value"
effect = "write"
binding_id = "values"
binding_revision = "1"
scope_id = "values-users"
scope_revision = "1"

[writes.set_value.scope]
arguments = ["len(value) <= 40"]
"#,
            python = python(),
        );
        let config = dir.join("gateway.toml");
        std::fs::write(&config, text).expect("config");
        // JSON log lines at -v, every one kept: none may carry a token or a secret.
        let log = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut gateway = Command::new(purra_bin())
            .args(["gateway", "--log-format", "json", "-v", "--config"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn gateway");
        let kept = log.clone();
        let lines = lines_of(gateway.stderr.take().expect("stderr"), move |line| {
            eprintln!("[gateway] {line}");
            kept.lock().expect("log").push(line.clone());
            let v: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("a log line that is not JSON ({e}): {line}"));
            match (v["target"].as_str(), v["message"].as_str()) {
                (Some(t @ "purra gateway"), Some(m)) => Some(format!("{t}: {m}")),
                _ => None,
            }
        });
        let (url, _) = serving(&lines, LIMIT);
        std::thread::spawn(move || lines.into_iter().for_each(drop));
        Scenario {
            dir,
            issuer,
            url,
            record,
            gateway,
            log,
            metrics,
            _peers: vec![idp, up, otlp, hooks],
        }
    }

    /// An access token of `user` for the gateway (idpyoidc's code flow, without a browser).
    fn token(&self, user: &str) -> String {
        let r = http(
            "POST",
            &format!("{}/test/login", self.issuer),
            &[("content-type", "application/x-www-form-urlencoded")],
            &format!("user={user}&audience={}", self.url),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        let v: Value = serde_json::from_str(&r.body).expect("the token endpoint's JSON");
        v["access_token"].as_str().expect("access_token").to_owned()
    }

    /// The upstream's record: `TOOL SUB ACT VALUE` a call.
    fn recorded(&self) -> Vec<String> {
        std::fs::read_to_string(&self.record)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Fails when a log line, the metrics page, an exported span or a webhook delivery carries
    /// any of `secrets`, the gateway's client secret, or a JWT
    /// (an inbound or an exchanged token: `eyJ...` header and payload).
    fn assert_log_holds_no_secret(&self, secrets: &[&str]) {
        let mut log = self.log.lock().expect("log").clone();
        assert!(!log.is_empty());
        // The spans exported so far (at least one is waited for) and the webhook deliveries.
        let start = Instant::now();
        let spans = loop {
            let text = std::fs::read_to_string(self.dir.join("otlp.jsonl")).unwrap_or_default();
            if text.contains("\"signal\": \"span\"") {
                break text;
            }
            assert!(start.elapsed() < LIMIT, "no span was exported");
            std::thread::sleep(Duration::from_millis(200));
        };
        log.extend(spans.lines().map(str::to_owned));
        let hooks = std::fs::read_to_string(self.dir.join("hooks.jsonl")).unwrap_or_default();
        log.extend(hooks.lines().map(str::to_owned));
        // The Prometheus endpoint's page too.
        let scraped = http("GET", &format!("http://{}/metrics", self.metrics), &[], "");
        assert_eq!(scraped.status, 200);
        assert!(
            scraped.body.contains("purra_gateway_requests_total"),
            "{}",
            scraped.body
        );
        log.extend(scraped.body.lines().map(str::to_owned));
        for line in log.iter() {
            for s in secrets.iter().chain([&GATEWAY_SECRET]) {
                assert!(!line.contains(s), "a log line carries a secret: {line}");
            }
            assert!(
                !line
                    .split(|c: char| !(c.is_ascii_alphanumeric() || "-_.".contains(c)))
                    .any(|w| w.starts_with("eyJ") && w.matches('.').count() >= 2),
                "a log line carries a token: {line}"
            );
        }
    }

    fn db(&self) -> String {
        self.dir.join("gateway.db").display().to_string()
    }

    /// `purra credentials set` of `secret` for `user` at the `personal` upstream.
    fn set_secret(&self, user: &str, secret: &str) {
        let mut child = Command::new(purra_bin())
            .args(["credentials", "set", "--db", &self.db(), "--keys"])
            .arg(self.dir.join("credential.keys"))
            .args(["--principal", &principal(&self.issuer, user)])
            .args(["--upstream", "personal", "token"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("purra credentials set");
        use std::io::Write as _;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(secret.as_bytes())
            .expect("write the secret");
        let out = child.wait_with_output().expect("wait");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn principal(issuer: &str, user: &str) -> String {
    format!("{issuer}#{user}")
}

/// purra's own client on the gateway with `token`.
async fn connect(url: &str, token: &str) -> purra_protocol::Connection {
    let http = HttpClientOptions::default().header("Authorization", format!("Bearer {token}"));
    Client::connect_http(url, http, ClientOptions::default())
        .await
        .expect("connect to the gateway")
}

fn text(r: &purra_protocol::types::CallToolResult) -> String {
    serde_json::to_value(r).expect("json")["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn alice_and_bob_reach_the_upstream_as_themselves() {
    let sc = Scenario::start("exchange");
    let (alice, bob) = (sc.token("alice"), sc.token("bob"));

    // The official SDK clients: alice through Python, bob through TypeScript.
    for (sdk, token, user) in [(Sdk::Python, &alice, "alice"), (Sdk::Node, &bob, "bob")] {
        let lines = SdkClient::start(
            sdk,
            &sc.url,
            Some(token),
            json!([{"call": "whoami", "args": {}}]),
        )
        .finish();
        let steps = steps_of(&lines);
        let (answer, is_error) = result_text(steps[0]);
        assert!(!is_error, "{answer}");
        let v: Value = serde_json::from_str(&answer).expect("the upstream's JSON");
        assert_eq!(v, json!({"sub": user, "act": GATEWAY_CLIENT}), "{sdk:?}");
    }
    // The upstream's own record: each call as its caller, the gateway as actor.
    assert_eq!(
        sc.recorded(),
        vec![
            format!("whoami alice {GATEWAY_CLIENT} -"),
            format!("whoami bob {GATEWAY_CLIENT} -")
        ]
    );

    // 1 000 interleaved concurrent calls by the two: every recorded subject is its caller's.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let counts = rt.block_on(async {
        let a = Arc::new(connect(&sc.url, &alice).await);
        let b = Arc::new(connect(&sc.url, &bob).await);
        // As many in flight as a session's streams allow, alice's and bob's interleaved.
        let gate = Arc::new(tokio::sync::Semaphore::new(24));
        let mut tasks = Vec::new();
        for i in 0..1000 {
            let (conn, user) = if i % 2 == 0 {
                (a.clone(), "alice")
            } else {
                (b.clone(), "bob")
            };
            let gate = gate.clone();
            tasks.push(tokio::spawn(async move {
                let _permit = gate.acquire().await.expect("gate");
                let r = conn.call_tool("whoami", json!({})).await.expect("a result");
                let v: Value = serde_json::from_str(&text(&r)).expect("JSON");
                assert_eq!(v["sub"], user, "{v}");
            }));
        }
        for t in tasks {
            t.await.expect("a call");
        }
        let mut counts = BTreeMap::new();
        for line in sc.recorded() {
            *counts.entry(line).or_insert(0) += 1;
        }
        counts
    });
    assert_eq!(
        counts,
        BTreeMap::from([
            (format!("whoami alice {GATEWAY_CLIENT} -"), 501),
            (format!("whoami bob {GATEWAY_CLIENT} -"), 501),
        ])
    );
    sc.assert_log_holds_no_secret(&[&alice, &bob]);
}

#[test]
fn a_write_is_sent_with_a_credential_obtained_after_its_approval() {
    let sc = Scenario::start("write");
    let users = [("alice", Sdk::Python), ("bob", Sdk::Node)];
    let tokens: Vec<String> = users.iter().map(|(u, _)| sc.token(u)).collect();
    let mut clients: Vec<SdkClient> = users
        .iter()
        .zip(&tokens)
        .map(|((user, sdk), token)| {
            SdkClient::start(
                *sdk,
                &sc.url,
                Some(token),
                json!([{"call": "set_value", "args": {"value": format!("v-{user}")}}]),
            )
        })
        .collect();
    // Both approvals wait; nothing reached the upstream.
    let start = Instant::now();
    let pending = loop {
        let list = crate::support::run::approvals_json(&sc.db(), &["list"]);
        let ids: Vec<String> = list["approvals"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["state"] == "pending")
            .map(|a| a["id"].as_str().expect("id").to_owned())
            .collect();
        if ids.len() == 2 {
            break ids;
        }
        assert!(
            start.elapsed() < LIMIT,
            "two pending approvals expected: {list}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(clients.iter_mut().all(SdkClient::running));
    assert!(sc.recorded().is_empty(), "{:?}", sc.recorded());
    std::thread::sleep(Duration::from_millis(1100));
    let approved_at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("now")
        .as_secs();
    for id in &pending {
        let out = Command::new(purra_bin())
            .args([
                "approvals",
                "approve",
                id,
                "--db",
                &sc.db(),
                "--approver",
                "ops",
            ])
            .output()
            .expect("purra approvals approve");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for (client, (user, _)) in clients.into_iter().zip(users) {
        let lines = client.finish();
        let steps = steps_of(&lines);
        let (answer, is_error) = result_text(steps[0]);
        assert!(!is_error, "{user}: {answer}");
        let v: Value = serde_json::from_str(&answer).expect("the upstream's JSON");
        assert_eq!(v["sub"], user);
        assert_eq!(v["act"], GATEWAY_CLIENT);
        // The token it went with was issued after the approval (exchanged at dispatch).
        let iat = v["iat"].as_u64().expect("iat");
        assert!(
            iat >= approved_at,
            "{user}: issued at {iat}, approved at {approved_at}"
        );
        // The receipt names who the upstream was called as, never a token.
        assert_eq!(
            steps[0]["result"]["_meta"]["io.purra/calledAs"],
            format!("sub={user} act={GATEWAY_CLIENT}"),
            "{}",
            steps[0]
        );
    }
    let mut recorded = sc.recorded();
    recorded.sort();
    assert_eq!(
        recorded,
        vec![
            format!("set_value alice {GATEWAY_CLIENT} v-alice"),
            format!("set_value bob {GATEWAY_CLIENT} v-bob"),
        ]
    );
    // The two approvals' pending and decided events and the two effects' were delivered,
    // each verified by the receiver (and all are scanned below).
    let start = Instant::now();
    while std::fs::read_to_string(sc.dir.join("hooks.jsonl"))
        .unwrap_or_default()
        .matches("\"verified\": true")
        .count()
        < 6
    {
        assert!(
            start.elapsed() < LIMIT,
            "the effects' webhook events did not come"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    sc.assert_log_holds_no_secret(&[&tokens[0], &tokens[1]]);
}

#[test]
fn each_principal_gets_its_own_process_with_only_its_own_secret() {
    let sc = Scenario::start("stdio");
    let users = ["alice", "bob", "carol"];
    let secrets: Vec<String> = users
        .iter()
        .map(|u| format!("{u}-personal-token-{}", std::process::id()))
        .collect();
    let tokens: Vec<String> = users.iter().map(|u| sc.token(u)).collect();
    // carol has no stored secret yet: a clear error naming how to set one.
    let lines = SdkClient::start(
        Sdk::Python,
        &sc.url,
        Some(&tokens[2]),
        json!([{"call": "token_hash", "args": {}}]),
    )
    .finish();
    let (answer, is_error) = result_text(steps_of(&lines)[0]);
    assert!(is_error);
    assert!(
        answer.contains("upstream_credential_missing")
            && answer.contains("purra credentials set --principal"),
        "{answer}"
    );
    for (u, s) in users.iter().zip(&secrets) {
        sc.set_secret(u, s);
    }
    let digest = |s: &str| {
        let out = Command::new(python())
            .args([
                "-c",
                "import hashlib,sys; print(hashlib.sha256(sys.argv[1].encode()).hexdigest())",
            ])
            .arg(s)
            .output()
            .expect("python");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    // Each call's process holds its caller's secret and no other's (a pool of two: the third
    // principal's process takes the least recently used idle one's place).
    for round in 0..2 {
        for (i, token) in tokens.iter().enumerate() {
            let lines = SdkClient::start(
                Sdk::Python,
                &sc.url,
                Some(token),
                json!([{"call": "token_hash", "args": {}}]),
            )
            .finish();
            let (answer, is_error) = result_text(steps_of(&lines)[0]);
            assert!(!is_error, "round {round}, {}: {answer}", users[i]);
            assert_eq!(answer, digest(&secrets[i]), "round {round}, {}", users[i]);
        }
    }
    // The shared process (discovery) and at most two of the principals', children of the gateway.
    let start = Instant::now();
    loop {
        let children = children_running(sc.gateway.id(), "token_env_server.py");
        if children <= 3 {
            break;
        }
        assert!(
            start.elapsed() < LIMIT,
            "{children} processes of the stdio upstream"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut secret_refs: Vec<&str> = secrets.iter().map(String::as_str).collect();
    secret_refs.extend(tokens.iter().map(String::as_str));
    sc.assert_log_holds_no_secret(&secret_refs);
}

/// How many processes whose parent is `parent` run `script`.
fn children_running(parent: u32, script: &str) -> usize {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            // pid (comm) state ppid ...: the fields after the command's closing parenthesis.
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok());
            ppid == Some(parent)
                && std::fs::read(e.path().join("cmdline"))
                    .map(|c| String::from_utf8_lossy(&c).contains(script))
                    .unwrap_or(false)
        })
        .count()
}

/// The upstream's own authorization server: oidc-provider naming itself `http://localhost:PORT`
/// (another site than the page's `127.0.0.1`), its issuer URL.
fn upstream_issuer() -> (Killed, String) {
    let mut cmd = Command::new(node());
    cmd.arg("server.mjs")
        .current_dir(repo_root().join("peers/oidc"))
        .env("PURRA_OIDC_HOST", "localhost");
    let (peer, rest) = start_peer(cmd, "{");
    let v: Value = serde_json::from_str(&format!("{{{rest}")).expect("the issuer line");
    (peer, v["issuer"].as_str().expect("issuer").to_owned())
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Nothing {}

/// A resource server behind purra's guard trusting `issuer`: `whoami` answers the subject of
/// the token it validated. Serves until `stop` is cancelled.
async fn resource_server(issuer: &str, stop: purra_protocol::CancellationToken) -> String {
    use purra_protocol::auth::{AuthLayer, JwtValidator};
    use purra_protocol::{
        HandlerResult, HttpServerConfig, RequestCtx, Server, StreamableHttpServer,
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
    let server = Server::builder("files", "1").build();
    server
        .tool(
            "whoami",
            "Who is calling",
            |_: Nothing, ctx: RequestCtx| async move {
                let p = ctx.principal().expect("the guard's principal");
                let r: HandlerResult<String> = Ok(p.subject.clone());
                r
            },
        )
        .expect("a tool");
    let config = HttpServerConfig {
        json_response: true,
        ..HttpServerConfig::default()
    };
    let validator = JwtValidator::new(issuer, &url).expect("validator");
    let guard = AuthLayer::new(&url, issuer, validator)
        .expect("guard")
        .required_scopes(["mcp:read"])
        .scopes_supported(["mcp:read"]);
    let service = guard.layer(StreamableHttpServer::new(server, config).router());
    tokio::spawn(purra_protocol::http::serve(
        listener,
        service,
        purra_protocol::http::ConnectionLimits::default(),
        stop,
    ));
    url
}

/// In the browser `b`, signed in on the page: connects to upstream `files` at `url` as `user`
/// at the upstream's own authorization server.
fn connect_in_browser(b: &Browser, url: &str, user: &str) {
    b.goto(url);
    b.type_css("input[name=login]", user);
    b.type_css("input[name=password]", "any");
    b.click_css("button.login-submit");
    b.wait_for("input[name=prompt][value=consent]");
    b.click_css("button.login-submit");
    b.wait_text("#connect-message", "You are connected to files.");
}

/// `mode = "oauth"`: each caller's own OAuth connection to the upstream's authorization server,
/// made on the gateway's page in the browser. The gateway starts before anyone is connected and
/// lists the upstream's tools once its discovery principal (alice) has connected; bob, not
/// connected, is told the connect URL (an SDK client without URL elicitation) or sent it as a
/// URL-mode elicitation (purra's 2025-11-25 client), and once he has connected in Chromium the
/// same call goes on and reaches the upstream as bob.
#[test]
fn a_caller_without_a_connection_is_sent_the_connect_url_and_then_called_as_themselves() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let issuer = oidc_issuer().to_owned();
    let (_upstream_as, upstream_issuer) = upstream_issuer();
    let stop = purra_protocol::CancellationToken::new();
    let _stop = stop.clone().drop_guard();
    let files = rt.block_on(resource_server(&upstream_issuer, stop));
    let dir = fresh_dir("identity", "oauth");
    std::fs::write(dir.join("page-secret.txt"), "page-secret\n").expect("secret");
    let key = purra_core::vault::Keyring::new_key_line("k1").expect("a key line");
    std::fs::write(dir.join("credential.keys"), key.as_str()).expect("key file");
    let page_port = free_port();
    let page = format!("http://127.0.0.1:{page_port}");
    let alice = purra_core::principal_name(&issuer, "alice");
    let file = format!(
        r#"[gateway]
name = "gw"
db = "gateway.db"
listen = "127.0.0.1:0"
credential_keys = "credential.keys"
approval_wait = "90s"

[gateway.auth]
issuer = {issuer:?}
scopes = ["mcp:read"]

[page]
url = {page:?}
token_login = false

[page.oidc]
issuer = {issuer:?}
client_id = "purra-page"
client_secret_file = "page-secret.txt"
scopes = ["openid", "email", "profile", "groups"]
allow_subjects = ["alice", "bob"]

[upstreams.files]
url = {files:?}

[upstreams.files.auth]
mode = "oauth"
scopes = ["mcp:read"]
discovery_principal = {alice:?}

[reads.whoami]
upstream = "files"
title = "Who the upstream says is calling"
scope = "open"
"#
    );
    let config = dir.join("gateway.toml");
    std::fs::write(&config, file).expect("config");
    let mut gateway = Command::new(purra_bin())
        .args(["gateway", "--config"])
        .arg(&config)
        .args(["--page", &format!("127.0.0.1:{page_port}")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn gateway");
    let lines = lines_of(gateway.stderr.take().expect("stderr"), |line| {
        eprintln!("[gateway] {line}");
        Some(line)
    });
    let _gateway = crate::support::run::Killed(gateway);
    let (url, before) = serving(&lines, LIMIT);
    assert!(
        before
            .iter()
            .any(|l| l.contains("upstream files is not discovered yet")),
        "{before:?}"
    );
    std::thread::spawn(move || lines.into_iter().for_each(drop));
    let token = |user: &str| token_with_scope(&issuer, user, &url, "mcp:read");
    let (alice_token, bob_token) = (token("alice"), token("bob"));

    // Nothing listed until alice (the discovery principal) has connected on the page.
    let listed = |token: &str| -> Vec<String> {
        rt.block_on(async {
            let conn = connect(&url, token).await;
            let names = conn.tools().iter().map(|t| t.name.clone()).collect();
            conn.close().await;
            names
        })
    };
    assert_eq!(listed(&alice_token), Vec::<String>::new());
    let b = Browser::new(1000, 900);
    oidc_sign_in(&b, &format!("{page}/"), "alice");
    b.wait_for("#approver");
    connect_in_browser(&b, &format!("{page}/connect/files"), "alice");
    let start = Instant::now();
    while listed(&alice_token) != ["whoami"] {
        assert!(start.elapsed() < LIMIT, "the gateway did not list whoami");
        std::thread::sleep(Duration::from_millis(300));
    }
    let lines = SdkClient::start(
        Sdk::Python,
        &url,
        Some(&alice_token),
        json!([{"call": "whoami", "args": {}}]),
    )
    .finish();
    assert_eq!(
        result_text(steps_of(&lines)[0]),
        ("alice".to_owned(), false)
    );

    // bob is not connected: a client without URL elicitation is told where to connect.
    let lines = SdkClient::start(
        Sdk::Python,
        &url,
        Some(&bob_token),
        json!([{"call": "whoami", "args": {}}]),
    )
    .finish();
    let (answer, is_error) = result_text(steps_of(&lines)[0]);
    assert!(is_error);
    assert!(
        answer.contains("upstream_not_connected")
            && answer.contains(&format!("{page}/connect/files")),
        "{answer}"
    );

    // purra's 2025-11-25 client takes URL elicitations: it is sent the connect URL, bob
    // connects in the browser, and the same call goes on.
    let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = asked.clone();
    let page_for_bob = format!("{page}/");
    let (url_for_bob, token_for_bob) = (url.clone(), bob_token.clone());
    let answer = rt.block_on(async move {
        let mut options = ClientOptions::default();
        options.protocol_version = purra_protocol::ProtocolVersion::V2025_11_25;
        let options =
            options.on_elicitation(true, move |p: purra_protocol::types::ElicitParams| {
                let seen = seen.clone();
                let page = page_for_bob.clone();
                async move {
                    let target = p.url.clone().expect("a URL-mode elicitation");
                    seen.lock()
                        .expect("asked")
                        .push((p.mode.clone(), target.clone()));
                    tokio::task::spawn_blocking(move || {
                        let b = Browser::new(1000, 900);
                        oidc_sign_in(&b, &page, "bob");
                        b.wait_for("#approver");
                        connect_in_browser(&b, &target, "bob");
                    })
                    .await
                    .expect("the browser");
                    Ok(purra_protocol::types::ElicitResult::action(
                        purra_protocol::types::ElicitAction::Accept,
                    ))
                }
            });
        let http =
            HttpClientOptions::default().header("Authorization", format!("Bearer {token_for_bob}"));
        let conn = Client::connect_http(&url_for_bob, http, options)
            .await
            .expect("connect");
        let r = conn.call_tool("whoami", json!({})).await.expect("a result");
        conn.close().await;
        r
    });
    assert_eq!(text(&answer), "bob", "{answer:?}");
    assert_eq!(
        *asked.lock().expect("asked"),
        vec![(Some("url".to_owned()), format!("{page}/connect/files"))]
    );

    // An operator revokes bob's connection: at the upstream's authorization server too (RFC
    // 7009), and bob is asked to connect again.
    let bob = purra_core::principal_name(&issuer, "bob");
    let out = Command::new(purra_bin())
        .args([
            "credentials",
            "revoke",
            "--principal",
            &bob,
            "--upstream",
            "files",
            "--db",
        ])
        .arg(dir.join("gateway.db"))
        .arg("--keys")
        .arg(dir.join("credential.keys"))
        .output()
        .expect("purra credentials revoke");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!(
            "revoked oauth of principal {bob} at upstream files (and at its authorization \
             server)\n"
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = SdkClient::start(
        Sdk::Python,
        &url,
        Some(&bob_token),
        json!([{"call": "whoami", "args": {}}]),
    )
    .finish();
    let (answer, is_error) = result_text(steps_of(&lines)[0]);
    assert!(
        is_error && answer.contains("upstream_not_connected"),
        "{answer}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
