//! Helpers shared by the test modules: a scenario's directory, an upstream purra server on
//! loopback, the configuration pieces every gateway under test binds, a gateway started on a
//! SQLite file, an in-memory downstream client, decisions, waits, and a test run alone.
#![allow(dead_code)] // each module uses its own part

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use purra_core::{ApprovalGateway, ApprovalId, Decision, Verdict};
use purra_gateway::{
    ApprovalBy, ConfigSource, Dur, EffectConfig, Gateway, GatewayConfig, ReadConfig, ScopeConfig,
    ScopeRules, StartError, StartOptions, UpstreamConfig, WriteConfig,
};
use purra_protocol::types::{CallToolResult, Implementation, JsonObject};
use purra_protocol::{
    memory, Client, ClientOptions, Connection, HttpServerConfig, Server, StreamableHttpServer,
};
use purra_sqlite::SqliteStore;
use serde_json::Value;

/// The longest any one wait lasts (a process starting on a loaded machine).
pub const PATIENCE: Duration = Duration::from_secs(60);

/// `v` as a JSON object (an empty one for anything else).
pub fn object(v: Value) -> JsonObject {
    match v {
        Value::Object(o) => o,
        _ => JsonObject::new(),
    }
}

/// The input schema of `set_value`: one string `value`, nothing else.
pub fn value_input() -> Value {
    serde_json::json!({"type": "object", "properties": {"value": {"type": "string"}},
        "required": ["value"], "additionalProperties": false})
}

/// A scenario's directory, fresh and unique (`purra-gw-KIND-NAME-PID-NANOS` in the temporary
/// directory), removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// Creates the directory of test `name` of the module `kind`.
    pub fn new(kind: &str, name: &str) -> TempDir {
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!(
            "purra-gw-{kind}-{name}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Serves `server` on a loopback port over Streamable HTTP until `stop` completes; its URL.
pub async fn serve_upstream(
    server: Server,
    stop: impl Future<Output = ()> + Send + 'static,
) -> String {
    let bound = StreamableHttpServer::new(server, HttpServerConfig::default())
        .bind()
        .await
        .expect("bind");
    let url = format!("http://{}/mcp", bound.local_addr().expect("addr"));
    tokio::spawn(bound.serve(stop));
    url
}

/// A configuration named `name` on the SQLite file `db`, waiting `wait` for approvals, with one
/// upstream `up` at `url` and nothing bound.
pub fn base_config(name: &str, db: PathBuf, wait: Duration, url: &str) -> GatewayConfig {
    let mut c = GatewayConfig::default();
    c.gateway.name = name.into();
    c.gateway.db = db;
    c.gateway.approval_wait = Dur(wait);
    c.upstreams.insert(
        "up".into(),
        UpstreamConfig {
            url: Some(url.into()),
            ..UpstreamConfig::default()
        },
    );
    c
}

/// A read of `up`'s tool of the binding's name, titled `title`, open to every caller.
pub fn open_read(title: &str) -> ReadConfig {
    ReadConfig {
        upstream: "up".into(),
        tool: None,
        title: title.into(),
        concurrency: Default::default(),
        scope: ScopeConfig::Open,
        tasks: false,
        asserted_read_only: false,
    }
}

/// A write of `up`'s tool of the binding's name, titled `Set`, decided by an operator, binding
/// `b` and scope `s` at revision 1, callable as `scope` says.
pub fn set_write(scope: ScopeRules) -> WriteConfig {
    WriteConfig {
        upstream: "up".into(),
        tool: None,
        title: "Set".into(),
        effect: EffectConfig::Write,
        risk: None,
        binding_id: "b".into(),
        binding_revision: "1".into(),
        scope_id: "s".into(),
        scope_revision: "1".into(),
        scope,
        approval: ApprovalBy::Operator.into(),
        receipt_ttl: None,
        approver_max_age: None,
        allow_edit: false,
        dispatch: Default::default(),
        idempotent: false,
    }
}

/// A gateway started on a fresh SQLite file, with what it started from.
pub struct Started {
    pub gateway: Gateway,
    pub store: SqliteStore,
    /// The configuration the gateway started with (a second gateway on the store can share it).
    pub config: GatewayConfig,
    pub dir: TempDir,
}

/// Starts a gateway with `options` on the configuration `make` returns for the SQLite file
/// `KIND.db` in test `name`'s fresh directory.
pub async fn start_on_sqlite(
    kind: &str,
    name: &str,
    make: impl FnOnce(PathBuf) -> GatewayConfig,
    options: StartOptions,
) -> Started {
    let dir = TempDir::new(kind, name);
    let db = dir.0.join(format!("{kind}.db"));
    let store = SqliteStore::open(&db).expect("store");
    let config = make(db);
    // Boxed: the start's future is large, and each test's future holds the fixture's.
    let gateway = Box::pin(Gateway::start_with(
        config.clone(),
        &ConfigSource::default(),
        Arc::new(store.clone()),
        options,
    ))
    .await
    .expect("start");
    Started {
        gateway,
        store,
        config,
        dir,
    }
}

/// Starts a gateway with `options` on the configuration file text `text` (named `g.toml`) over an
/// in-memory store; the gateway or its configuration mistakes, one string each.
pub async fn start_text(text: &str, options: StartOptions) -> Result<Gateway, Vec<String>> {
    let loaded = purra_gateway::load_str("g.toml", text).expect("the file itself has no mistakes");
    let store = Arc::new(SqliteStore::open_in_memory().expect("store"));
    Gateway::start_with(loaded.config, &loaded.source, store, options)
        .await
        .map_err(mistakes)
}

/// The configuration mistakes a start was refused for, one string each.
pub fn mistakes(e: StartError) -> Vec<String> {
    match e {
        StartError::Config(errors) => errors.0.iter().map(ToString::to_string).collect(),
        other => panic!("not a configuration refusal: {other}"),
    }
}

/// A downstream client named `name` in this process, over an in-memory transport.
pub async fn client_named(gateway: &Gateway, name: &str, mut options: ClientOptions) -> Connection {
    let (a, b) = memory::pair();
    let server = gateway.server().clone();
    tokio::spawn(async move { server.serve(a).await });
    options.client_info = Implementation::new(name, "1");
    Client::connect(b, options).await.expect("connect")
}

/// A result's text and whether it is an error.
pub fn text(r: &CallToolResult) -> (String, bool) {
    (r.texts().collect::<Vec<_>>().join(""), r.is_error())
}

/// An approval by `approver`, made now and good for `ttl`.
pub fn approval_by(approver: &str, ttl: Duration) -> Decision {
    let now = SystemTime::now();
    Decision {
        verdict: Verdict::Approve,
        approver: approver.into(),
        decided_at: now,
        expires_at: Some(now + ttl),
        note: None,
    }
}

/// An approval by `ada (cli)`, made now and good for ten minutes.
pub fn approve() -> Decision {
    approval_by("ada (cli)", Duration::from_secs(600))
}

/// Waits until approval `id` exists in the store.
pub async fn wait_prepared(store: &SqliteStore, id: &ApprovalId) {
    let start = std::time::Instant::now();
    while store.record(id.clone()).await.expect("record").is_none() {
        assert!(start.elapsed() < PATIENCE, "{id:?} never prepared");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs the test `path` (as `module_path!()` names it, `it::flow::name`) alone in a child process
/// of this test binary with the variable `marker` set, and asserts that it ran and passed. Tests
/// that measure the whole process (its resident size) or set process-global state (the tracing
/// subscriber) use it: the other tests of the binary would run beside them. Returns true in that
/// child (the caller goes on with the test) and false in the parent (the caller returns).
pub fn in_own_process(marker: &str, path: &str) -> bool {
    if std::env::var_os(marker).is_some() {
        return true;
    }
    let name = path.split_once("::").map_or(path, |(_, name)| name);
    let out = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", name, "--test-threads=1", "--nocapture"])
        .env(marker, "1")
        .output()
        .expect("run the test alone");
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the test alone failed");
    assert!(
        text.contains("1 passed"),
        "the test did not run alone: {text}"
    );
    false
}
