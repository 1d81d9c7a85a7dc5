//! A consumer of the packaged crates: one binary that is an MCP server (`serve`, tools from
//! `#[handlers]`), a gateway (`gateway FILE`: purra-gateway over a SQLite store from
//! purra-store) and, with no argument, the client that runs both as child processes over stdio.
//!
//! The client: calls the server's tools directly (purra-protocol's client), binds its read tool
//! through purra-mcp into a purra-core agent and runs it, then starts the gateway over that
//! server and finds only the bound tool there and its answer through it; and builds an approver
//! page (purra-page) over the gateway's store. Every answer is checked exactly; it exits 0 only
//! when all hold.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use purra_core::{
    Agent, Catalog, Concurrency, Lease, RunId, RunOutcome, RunRequest, ScopeCheck, ScopeDecision,
    ScriptedModel,
};
use purra_gateway::{Gateway, GatewayStore};
use purra_mcp::{discover_read_tools, CatalogMonitor, Limits, ReadBinding};
use purra_page::{Page, PageConfig};
use purra_protocol::{Client, ClientOptions, Connection, Server, StdioCommand};
use purra_store::{AnyStore, StoreLocation};
use serde_json::json;

/// The server's state: how many times a tool ran.
#[derive(Default)]
struct Notes {
    calls: AtomicU64,
}

#[purra_protocol::handlers]
impl Notes {
    /// The note.
    #[tool(read_only)]
    fn get_note(&self) -> String {
        self.calls.fetch_add(1, Ordering::SeqCst);
        "packaged".to_owned()
    }

    /// Adds two integers.
    #[tool(read_only)]
    fn add(&self, a: i64, b: i64) -> String {
        self.calls.fetch_add(1, Ordering::SeqCst);
        (a + b).to_string()
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let outcome = match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["serve"] => serve().await,
        ["gateway", file] => gateway(Path::new(file)).await,
        [] => client().await,
        _ => Err("usage: packaged-smoke [serve | gateway FILE]".to_owned()),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("packaged-smoke: FAILED: {why}");
            ExitCode::FAILURE
        }
    }
}

async fn serve() -> Result<(), String> {
    let server = Server::builder("packaged-notes", "0.1.0").build();
    server.register(Notes::default()).map_err(|e| format!("register: {e}"))?;
    server.serve_stdio().await;
    Ok(())
}

async fn gateway(file: &Path) -> Result<(), String> {
    let loaded = purra_gateway::load(file).map_err(|e| format!("load: {e}"))?;
    let db = loaded.config.gateway.db.display().to_string();
    let location = StoreLocation::parse(&db).map_err(|e| format!("store location: {e}"))?;
    let store = AnyStore::open(&location, None).await.map_err(|e| format!("store: {e}"))?;
    let store: Arc<dyn GatewayStore> = Arc::new(store);
    let gateway = Gateway::start(loaded.config, &loaded.source, store)
        .await
        .map_err(|e| format!("gateway start: {e}"))?;
    gateway.serve_stdio().await;
    Ok(())
}

async fn connect(args: &[&str]) -> Result<Connection, String> {
    let me = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    Client::connect_stdio(StdioCommand::new(me).args(args.iter().copied()), ClientOptions::default())
        .await
        .map_err(|e| format!("connect {args:?}: {e}"))
}

fn text(result: &purra_protocol::types::CallToolResult) -> String {
    result.texts().collect::<Vec<_>>().concat()
}

async fn client() -> Result<(), String> {
    // 1. purra-protocol and purra-macros: the server's tools, called directly.
    let conn = connect(&["serve"]).await?;
    let mut names: Vec<String> = conn.tools().iter().map(|t| t.name.clone()).collect();
    names.sort();
    check("tools", names, vec!["add".to_owned(), "get_note".to_owned()])?;
    let sum = conn
        .call_tool("add", json!({"a": 2, "b": 3}))
        .await
        .map_err(|e| format!("add: {e}"))?;
    check("add's answer", text(&sum), "5".to_owned())?;

    // 2. purra-mcp and purra-core: the read tool bound, called by an agent.
    let conn = Arc::new(conn);
    let monitor = CatalogMonitor::attach(&conn);
    let bindings = BTreeMap::from([(
        "get_note".to_owned(),
        ReadBinding::new(
            "note",
            "Read the note",
            ScopeCheck::check(|_args, run| {
                if run.agent == "packaged" { ScopeDecision::Allow } else { ScopeDecision::Deny }
            }),
        )
        .concurrency(Concurrency::Safe),
    )]);
    let discovered = discover_read_tools(&conn, "notes", &bindings, &monitor, Limits::default())
        .await
        .map_err(|e| format!("discovery: {e}"))?;
    let model = Arc::new(ScriptedModel::new(
        "scripted",
        vec![
            ScriptedModel::calls(&[("c1", "note", json!({}))]),
            ScriptedModel::text("read it"),
        ],
    ));
    let catalog = Arc::new(Catalog::new(discovered.registrations).map_err(|e| format!("catalog: {e}"))?);
    let agent = Agent::builder("packaged", model.clone(), catalog)
        .build()
        .map_err(|e| format!("agent: {e}"))?;
    let outcome = agent
        .run(RunRequest {
            run_id: RunId::new("packaged-1"),
            root_run_id: None,
            input: "read the note".into(),
            lease: Lease::unbounded(),
        })
        .await;
    check("the agent's outcome", outcome, RunOutcome::Completed { text: "read it".into() })?;
    let transcript = format!("{:?}", model.transcripts().last());
    if !transcript.contains("packaged") {
        return Err(format!("the tool's answer is not in the transcript: {transcript}"));
    }
    drop(agent);
    drop(monitor);
    match Arc::try_unwrap(conn) {
        Ok(conn) => conn.close().await,
        Err(_) => return Err("the connection is still shared after the run".to_owned()),
    }

    // 3. purra-gateway and purra-store: the gateway over the same server, only the bound tool seen.
    let dir = scratch_dir()?;
    let me = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let config = dir.join("gateway.toml");
    let toml = format!(
        "[gateway]\ndb = \"purra.db\"\n\n[upstreams.notes]\ncommand = [{me}, \"serve\"]\n\n\
         [reads.get_note]\nupstream = \"notes\"\ntitle = \"Read the note\"\nscope = \"open\"\n",
        me = json!(me.display().to_string()),
    );
    std::fs::write(&config, toml).map_err(|e| format!("write {}: {e}", config.display()))?;
    let config = config.display().to_string();
    let gw = connect(&["gateway", &config]).await?;
    let names: Vec<String> = gw.tools().iter().map(|t| t.name.clone()).collect();
    check("the gateway's tools", names, vec!["get_note".to_owned()])?;
    let note = gw
        .call_tool("get_note", json!({}))
        .await
        .map_err(|e| format!("get_note through the gateway: {e}"))?;
    check("get_note through the gateway", text(&note), "packaged".to_owned())?;
    gw.close().await;

    // 4. purra-page: an approver page over the gateway's store (built, not served).
    let store = AnyStore::open(&StoreLocation::File(dir.join("purra.db")), None)
        .await
        .map_err(|e| format!("reopen the store: {e}"))?;
    let page = Page::new(store.operator(), PageConfig::default().approver("ada"));
    check("the page's approvers", page.tokens().len(), 1)?;
    std::fs::remove_dir_all(&dir).map_err(|e| format!("remove {}: {e}", dir.display()))?;

    eprintln!(
        "packaged-smoke: ok: server and client over stdio (add, get_note), an agent through \
         purra-mcp, the gateway serving only get_note, a page over its store"
    );
    Ok(())
}

fn check<T: PartialEq + std::fmt::Debug>(what: &str, got: T, want: T) -> Result<(), String> {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what}: got {got:?}, want {want:?}"))
    }
}

fn scratch_dir() -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("packaged-smoke-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    Ok(dir)
}
