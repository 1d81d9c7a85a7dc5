//! `purra gateway --config FILE`: serves the bound tools of upstream MCP servers to downstream
//! clients, with durable approvals for writes (purra-gateway), over stdio or Streamable HTTP.
//!
//! The configuration is read and checked first; every mistake is printed with its file, line
//! and key, and the command exits 78 before anything is served. Operational messages go to
//! stderr, prefixed `purra gateway:`; over HTTP the first line is `purra gateway: serving URL`.

use std::sync::Arc;

use purra_gateway::{Gateway, Listen, StartError, StartOptions};
use purra_sqlite::{SqliteOptions, SqliteStore};

use crate::cli::GatewayArgs;
use crate::cmd::interrupted;
use crate::exit::Failure;

/// Runs `purra gateway`.
pub async fn run(args: GatewayArgs) -> Result<(), Failure> {
    let loaded = purra_gateway::load_reporting_all(&args.config)
        .await
        .map_err(|e| Failure::Config(e.to_string()))?;
    let settings = loaded.config.gateway.clone();
    let store = if args.check {
        // A check touches no store.
        SqliteStore::open_in_memory()
    } else {
        SqliteStore::open_with(
            &settings.db,
            SqliteOptions::default().lease(settings.lease.0),
        )
    }
    .map_err(|e| {
        Failure::store(
            "store",
            format!("cannot open the store {}: {e}", settings.db.display()),
        )
    })?;
    let options = StartOptions::default().log(|m| eprintln!("purra gateway: {m}"));
    let gateway = Gateway::start_with(loaded.config, &loaded.source, Arc::new(store), options)
        .await
        .map_err(|e| match e {
            StartError::Config(e) => Failure::Config(e.to_string()),
            other => Failure::store("store", other.to_string()),
        })?;
    let tools = gateway.tool_names();
    if args.check {
        println!(
            "configuration ok: {} tools: {}",
            tools.len(),
            tools.join(", ")
        );
        gateway.shutdown().await;
        return Ok(());
    }
    eprintln!(
        "purra gateway: {}: {} tools ({}); store {}",
        settings.name,
        tools.len(),
        tools.join(", "),
        settings.db.display()
    );
    let result = match settings.listen {
        Listen::Stdio => {
            tokio::select! {
                () = gateway.serve_stdio() => Ok(()),
                () = interrupted() => Ok(()),
            }
        }
        Listen::Http(addr) => serve_http(&gateway, addr).await,
    };
    gateway.shutdown().await;
    result
}

async fn serve_http(gateway: &Gateway, addr: std::net::SocketAddr) -> Result<(), Failure> {
    let bound = gateway
        .http_server(addr)
        .bind()
        .await
        .map_err(|e| Failure::Config(format!("cannot listen on {addr}: {e}")))?;
    let local = bound.local_addr().map_err(|e| {
        Failure::protocol("serving", purra_protocol::Error::Transport(e.to_string()))
    })?;
    eprintln!("purra gateway: serving http://{local}/mcp");
    bound
        .serve(interrupted())
        .await
        .map_err(|e| Failure::protocol("serving", purra_protocol::Error::Transport(e.to_string())))
}
