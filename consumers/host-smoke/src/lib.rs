//! What the consumer's hosts share: connecting to the independent write server, the host's write
//! binding, building the agent over a durable store, crash hooks, and reading the server ledger;
//! [`proxy`] injects network faults between a host and PostgreSQL.

pub mod proxy;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use purra_core::{
    Agent, Catalog, Handler, Policy, Risk, ScopeCheck, ScopeDecision, ScriptedModel, ToolRegistration,
};
use purra_mcp::{discover_write_tools, CatalogMonitor, Limits, WriteBinding, WriteEffect};
use purra_protocol::{Client, ClientOptions, Connection, StderrMode, StdioCommand};
use purra_store::{AnyStore, StoreLocation};
use serde_json::json;

/// Reads `--db PATH|URL` from the front of `args` (removing it): where the stores of a run go.
pub fn take_db(args: &mut Vec<String>) -> Option<String> {
    let at = args.iter().position(|a| a == "--db")?;
    if at + 1 >= args.len() {
        return None;
    }
    let db = args.remove(at + 1);
    args.remove(at);
    Some(db)
}

/// The store location of one scenario `name`: a fresh file under `dir` (a SQLite directory given
/// with `--db`, else the work directory), or a fresh schema of the `postgres://` database given.
pub fn store_for(db: Option<&str>, work: &Path, name: &str) -> String {
    match db {
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() % 1_000_000_000);
            let clean: String = name
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' })
                .collect();
            let sep = if url.contains('?') { '&' } else { '?' };
            format!("{url}{sep}schema=hs_{clean}_{}_{nanos}", std::process::id())
        }
        dir => {
            let path = dir.map_or_else(|| work.to_path_buf(), std::path::PathBuf::from).join(format!("{name}.db"));
            let _ = std::fs::create_dir_all(path.parent().unwrap_or(work));
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
            }
            path.display().to_string()
        }
    }
}

/// Opens the store at `location` (a file or a `postgres://` URL), with `lease` if given.
pub async fn open_store(location: &str, lease: Option<Duration>) -> Result<AnyStore, String> {
    let at = StoreLocation::parse(location).map_err(|e| e.to_string())?;
    AnyStore::open(&at, lease).await.map_err(|e| format!("open {at}: {e}"))
}

/// The only value the write server accepts.
pub const SYNTHETIC: &str = "purra-synthetic-7";

/// Where the host kills itself with SIGKILL, to test recovery at every transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashAt {
    /// Never.
    Nowhere,
    /// After the agent prepared the approval and suspended.
    AfterPrepare,
    /// After the approval was decided.
    AfterApprove,
    /// After the claim committed, before the request is sent.
    AfterClaim,
    /// After the request was sent and answered, before the outcome is recorded.
    AfterSend,
    /// After the outcome was recorded.
    AfterOutcome,
}

impl CrashAt {
    /// Parses `nowhere`, `after-prepare`, ….
    pub fn parse(s: &str) -> Option<CrashAt> {
        Some(match s {
            "nowhere" => CrashAt::Nowhere,
            "after-prepare" => CrashAt::AfterPrepare,
            "after-approve" => CrashAt::AfterApprove,
            "after-claim" => CrashAt::AfterClaim,
            "after-send" => CrashAt::AfterSend,
            "after-outcome" => CrashAt::AfterOutcome,
            _ => return None,
        })
    }
}

/// Ends this process at once, as a power cut or `kill -9` would.
pub fn kill_self() -> ! {
    let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
    std::process::abort()
}

/// Starts the write server (`python write_server.py --dir DIR --scenario S`) and connects.
pub async fn connect_write_server(
    python: &Path,
    server: &Path,
    dir: &Path,
    scenario: &str,
) -> Result<(Arc<Connection>, u32), String> {
    let cmd = StdioCommand::new(python)
        .args([server.as_os_str(), "--dir".as_ref(), dir.as_os_str(), "--scenario".as_ref(), scenario.as_ref()])
        .stderr(StderrMode::Null);
    let conn = Client::connect_stdio(cmd, ClientOptions::default())
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let pid = conn.pid().ok_or("no pid")?;
    Ok((Arc::new(conn), pid))
}

/// Whether process `pid` is gone (reaped).
pub fn exited(pid: u32) -> bool {
    !Path::new(&format!("/proc/{pid}")).exists()
}

/// Waits up to `limit` for `pid` to be gone.
pub async fn wait_exit(pid: u32, limit: Duration) -> bool {
    let start = std::time::Instant::now();
    while start.elapsed() < limit {
        if exited(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    exited(pid)
}

/// Closes the connection and checks that the server process has exited.
pub async fn close_and_check_exit(conn: Arc<Connection>, pid: u32) -> Result<(), String> {
    conn.close().await;
    drop(conn);
    if wait_exit(pid, Duration::from_secs(6)).await {
        Ok(())
    } else {
        Err(format!("server process {pid} has not exited"))
    }
}

/// The host's explicit authorization of the server's `set_value` as a write.
pub fn write_binding() -> WriteBinding {
    WriteBinding {
        local_name: "set_value".into(),
        title: "Set the stored value".into(),
        risk: Risk::Write,
        effect: WriteEffect::Write,
        scope: ScopeCheck::check(|args, run| {
            // The host's real authorization: only this agent, only the synthetic value.
            if run.agent == "writer" && args["value"] == SYNTHETIC {
                ScopeDecision::Allow
            } else {
                ScopeDecision::Deny
            }
        }),
        binding_id: "value-service".into(),
        binding_revision: "host-config-1".into(),
        scope_id: "sandbox-values".into(),
        scope_revision: "scope-1".into(),
    }
}

/// Something a host does around the request (after the claim committed, before the send; after the
/// send, before the outcome is recorded).
pub type Hook = Arc<dyn Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> + Send + Sync>;

/// Hooks around the write request.
#[derive(Clone, Default)]
pub struct Hooks {
    /// After the claim committed, before the request is sent.
    pub before_send: Option<Hook>,
    /// After the request was answered, before the outcome is recorded.
    pub after_send: Option<Hook>,
}

impl Hooks {
    fn of_crash(crash: CrashAt) -> Hooks {
        let kill: Hook = Arc::new(|| Box::pin(async { kill_self() }));
        Hooks {
            before_send: (crash == CrashAt::AfterClaim).then(|| kill.clone()),
            after_send: (crash == CrashAt::AfterSend).then_some(kill),
        }
    }
}

/// The same registration with a handler that runs `hooks` around the request.
fn with_hooks(reg: ToolRegistration, hooks: Hooks) -> Result<ToolRegistration, String> {
    let inner = reg.handler().clone();
    let handler: Handler = Arc::new(move |args, run| {
        let inner = inner.clone();
        let hooks = hooks.clone();
        Box::pin(async move {
            if let Some(h) = &hooks.before_send {
                h().await;
            }
            let result = inner(args, run).await;
            if let Some(h) = &hooks.after_send {
                h().await;
            }
            result
        })
    });
    let Policy::Confirm { title, risk } = reg.policy().clone() else {
        return Err("not a write".into());
    };
    let mut b = ToolRegistration::builder(reg.name())
        .description(reg.description())
        .input_schema(reg.input_schema().clone())
        .confirm(title, risk, reg.approval_binding().cloned().ok_or("no binding")?)
        .scope(reg.scope().clone())
        .concurrency(reg.concurrency())
        .boxed_handler(handler);
    if let Some(out) = reg.output_schema() {
        b = b.output_schema(out.clone());
    }
    b.build().map_err(|e| format!("rebuild: {e}"))
}

/// Discovers the write tool and builds the writing agent over `store`. A `restarted` host's
/// model continues the stored transcript, so only its last turn is left to script.
pub async fn write_agent(
    conn: &Arc<Connection>,
    store: &AnyStore,
    crash: CrashAt,
    restarted: bool,
) -> Result<Agent, String> {
    write_agent_with(conn, store, Hooks::of_crash(crash), restarted).await
}

/// [`write_agent`] with any hooks around the request.
pub async fn write_agent_with(
    conn: &Arc<Connection>,
    store: &AnyStore,
    hooks: Hooks,
    restarted: bool,
) -> Result<Agent, String> {
    let monitor = CatalogMonitor::attach(conn);
    let limits = Limits {
        timeout: Duration::from_secs(2),
        ..Limits::default()
    };
    let bindings = BTreeMap::from([("set_value".to_owned(), write_binding())]);
    let cat = discover_write_tools(conn, "values", &bindings, &monitor, limits)
        .await
        .map_err(|e| format!("write discovery: {e}"))?;
    let registrations = cat
        .registrations
        .into_iter()
        .map(|r| with_hooks(r, hooks.clone()))
        .collect::<Result<Vec<_>, _>>()?;
    let catalog = Arc::new(Catalog::new(registrations).map_err(|e| format!("catalog: {e}"))?);
    let script = if restarted {
        vec![ScriptedModel::text("write attempted")]
    } else {
        vec![
            ScriptedModel::calls(&[("w1", "set_value", json!({"value": SYNTHETIC}))]),
            ScriptedModel::text("write attempted"),
        ]
    };
    let model = Arc::new(ScriptedModel::new("scripted", script));
    Agent::builder("writer", model, catalog)
        .instructions("store the synthetic value")
        .approval(store.gateway())
        .run_store(store.runs())
        .tool_checkpoint_names(["set_value"])
        .build()
        .map_err(|e| format!("agent: {e}"))
}

/// The server's fsynced event ledger in `dir`.
pub fn ledger(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("ledger.txt"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// How many `tools/call` requests reached the server.
pub fn calls(dir: &Path) -> usize {
    ledger(dir).iter().filter(|l| l.starts_with("call")).count()
}

/// The host's binding of the adapter fixture's `lookup` as a write (for the dispatch race).
fn fixture_write_binding() -> WriteBinding {
    WriteBinding {
        local_name: "write_item".into(),
        title: "Write an item".into(),
        risk: Risk::Write,
        effect: WriteEffect::Write,
        scope: ScopeCheck::check(|_args, run| {
            if run.agent == "writer" {
                ScopeDecision::Allow
            } else {
                ScopeDecision::Deny
            }
        }),
        binding_id: "fixture-writes".into(),
        binding_revision: "host-config-1".into(),
        scope_id: "sandbox".into(),
        scope_revision: "scope-1".into(),
    }
}

/// A writing agent for purra's adapter fixture server reached over Streamable HTTP at `url`:
/// it writes item `id` once; a `restarted` host scripts only the last turn.
pub async fn fixture_write_agent(
    url: &str,
    store: &AnyStore,
    id: u64,
    restarted: bool,
) -> Result<(Arc<Connection>, Agent), String> {
    let conn = Client::connect_http(url, purra_protocol::HttpClientOptions::default(), ClientOptions::default())
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let conn = Arc::new(conn);
    let monitor = CatalogMonitor::attach(&conn);
    let bindings = BTreeMap::from([("lookup".to_owned(), fixture_write_binding())]);
    let cat = discover_write_tools(&conn, "fixture", &bindings, &monitor, Limits::default())
        .await
        .map_err(|e| format!("write discovery: {e}"))?;
    let catalog = Arc::new(Catalog::new(cat.registrations).map_err(|e| format!("catalog: {e}"))?);
    let script = if restarted {
        vec![ScriptedModel::text("done")]
    } else {
        vec![ScriptedModel::calls(&[("w1", "write_item", json!({"id": id}))]), ScriptedModel::text("done")]
    };
    let agent = Agent::builder("writer", Arc::new(ScriptedModel::new("scripted", script)), catalog)
        .instructions("write the item")
        .approval(store.gateway())
        .run_store(store.runs())
        .tool_checkpoint_names(["write_item"])
        .build()
        .map_err(|e| format!("agent: {e}"))?;
    Ok((conn, agent))
}
