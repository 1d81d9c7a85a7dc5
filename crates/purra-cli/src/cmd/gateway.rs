//! `purra gateway --config FILE`: serves the bound tools of upstream MCP servers to downstream
//! clients, with durable approvals for writes (purra-gateway), over stdio or Streamable HTTP.
//!
//! The configuration is read and checked first; every mistake is printed with its file, line
//! and key (a bound tool the upstream refuses also names the place in the tool and the reason;
//! with `-v`, the listed JSON there), and the command exits 78 before anything is served.
//! Warnings (a write bound with `effect = "write"` over a tool the upstream marks destructive, a
//! read with `asserted_read_only = true` over one it marks writing) are printed at `--check` and
//! at start. `--check` also opens the store as the start would (removing a SQLite file it
//! created) and tries each address the start would listen on (`listen`, `metrics_listen`,
//! `--page`): one that cannot be used is a mistake at its key and line, as at start. With
//! `--for-reload` (a file for a running gateway's `SIGHUP`, which keeps its listeners) the
//! addresses are not tried. With `[policies]`, `--check` also says how many Cedar
//! policies were validated (a policy naming an unknown tool or attribute is a mistake at its
//! file and line), and with `-v` prints the schema generated for them. Operational messages go to
//! stderr, prefixed `purra gateway:`; over HTTP the first line is `purra gateway: serving URL`,
//! followed by where the protected resource metadata is when `[gateway.auth]` guards the
//! listener (else by a warning that HTTP callers are not authenticated).
//! With `--page`, the approver page is served beside it (`purra gateway: approver page at URL`,
//! then one sign-in token per approver); its decisions go through [`Gateway::decide`], which wakes
//! this process's waiting calls at once. With `[webhooks.NAME]` endpoints the start names them
//! (`purra gateway: webhooks: NAMES ...`), and what their deliveries meet (an endpoint failing
//! and answering again, a delivery given up, `410 Gone`) is printed as it happens.
//!
//! Signals ([`lifecycle`]): `SIGHUP` reloads the file (`purra gateway: reloaded FILE: revision
//! N: ...`, or `purra gateway: reload refused ...` with every mistake, the running configuration
//! serving on); `SIGTERM` or `SIGINT` drains (no new calls, waiting writes answered as pending,
//! calls in flight finished within `[gateway] drain_timeout`) and then exits; a second one exits
//! at once. Over HTTP, `/healthz` and `/readyz` are served beside `/mcp`.

use std::sync::Arc;

use purra_gateway::{
    ConfigError, ConfigErrors, ConfigSource, Gateway, GatewayStore, Listen, StartError,
    StartOptions,
};
use purra_sqlite::SqliteStore;
use purra_store::{AnyStore, StoreLocation};

use crate::cli::GatewayArgs;
use crate::exit::Failure;
use crate::telemetry::{say, Export, LogFormat};

/// Whether a gateway started from `loaded` serves its one client over stdio without an OTLP
/// exporter: it runs on a current-thread runtime then, as purra's stdio servers do (a read's
/// request is polled in place on the thread that read it, with no hand-off between worker
/// threads). The exporter's shutdown blocks while its requests run on the runtime, so a gateway
/// exporting spans keeps the multi-thread one; so does a file that does not load (its start
/// reports why).
pub fn serves_one_client_on_stdio(loaded: &purra_gateway::Loaded) -> bool {
    let exporting = loaded.config.telemetry.otlp_endpoint.is_some()
        || std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT").is_ok_and(|v| !v.trim().is_empty());
    matches!(loaded.config.gateway.listen, Listen::Stdio) && !exporting
}

/// Runs `purra gateway` from its file as `preloaded` holds it (read when the runtime was
/// chosen), or reads it now, reporting every mistake; `-v` adds the listed JSON around a
/// refused tool's place. Telemetry (log lines, the OTLP exporter) starts once the file's
/// `[telemetry]` is read.
pub async fn run(
    args: GatewayArgs,
    preloaded: Option<purra_gateway::Loaded>,
    verbose: u8,
    log_format: LogFormat,
) -> Result<(), Failure> {
    // Listening for SIGHUP before anything else: its default action would end the process.
    let hangups = lifecycle::hangups();
    let excerpts = verbose > 0;
    let loaded = match preloaded {
        Some(loaded) => loaded,
        None => purra_gateway::load_reporting_all_with(&args.config, excerpts)
            .await
            .map_err(|e| Failure::Config(e.to_string()))?,
    };
    let t = &loaded.config.telemetry;
    let export = Export::configured(
        t.otlp_endpoint.as_deref(),
        t.service_name.as_deref(),
        "purra-gateway",
    );
    let metrics_interval = t.metrics_interval.0;
    let metrics_listen = t.metrics_listen;
    let telemetry = crate::telemetry::init(verbose, log_format, &export)
        .map_err(|e| Failure::Config(format!("telemetry: {e}")))?;
    let result = serve(
        args,
        hangups,
        loaded,
        excerpts,
        export,
        metrics_interval,
        metrics_listen,
    )
    .await;
    telemetry.shutdown_async().await;
    result
}

async fn serve(
    args: GatewayArgs,
    hangups: Option<tokio::signal::unix::Signal>,
    loaded: purra_gateway::Loaded,
    excerpts: bool,
    export: Export,
    metrics_interval: std::time::Duration,
    metrics_listen: Option<std::net::SocketAddr>,
) -> Result<(), Failure> {
    let settings = loaded.config.gateway.clone();
    let pool_size = loaded.config.store.pool_size;
    let policy_files = loaded.config.policies.as_ref().map_or(0, |p| p.files.len());
    let page_settings = loaded.config.page.clone();
    let approver_groups = loaded.config.approvers.groups.clone();
    let source = loaded.source.clone();
    // The approver page (`--page`) reads the same store through its operator view.
    let mut operator: Option<Arc<dyn purra_core::OperatorStore>> = None;
    // And its catalog changes (`/catalog`).
    let mut pins: Option<Arc<dyn purra_core::CatalogPins>> = None;
    // What the start would meet beyond the file: the store, and each address it would bind.
    let mut found = Vec::new();
    let store: Arc<dyn GatewayStore> =
        if args.check {
            if let Err(why) = check_store(&settings, pool_size).await {
                found.push(source.error("gateway.db", why));
            }
            let mut addresses = Vec::new();
            if let Listen::Http(addr) = settings.listen {
                addresses.push((Some("gateway.listen"), addr));
            }
            if let Some(addr) = metrics_listen {
                addresses.push((Some("telemetry.metrics_listen"), addr));
            }
            if let Some(addr) = args.page {
                addresses.push((None, addr));
            }
            // A reload keeps the running gateway's listeners (they are restart-only keys).
            if args.for_reload {
                addresses.clear();
            }
            for (key, addr) in addresses {
                if let Err(e) = std::net::TcpListener::bind(addr) {
                    found.push(bind_mistake(&source, key, addr, &e));
                }
            }
            // The rest of the check touches no store: the tools are discovered beside an
            // in-memory one.
            Arc::new(SqliteStore::open_in_memory().map_err(|e| {
                Failure::store("store", format!("cannot open an in-memory store: {e}"))
            })?)
        } else {
            let store = open_store(&settings, pool_size).await.map_err(|why| {
                Failure::store("store", source.error("gateway.db", why).to_string())
            })?;
            operator = Some(store.operator());
            pins = Some(store.pins());
            Arc::new(store)
        };
    let options = StartOptions::default()
        .log(|m| say("purra gateway", m))
        .excerpts(excerpts);
    // The page lists and revokes the store's standing grants.
    let grants = store.grants();
    let gateway = match Gateway::start_with(loaded.config, &loaded.source, store, options).await {
        Ok(g) => g,
        Err(StartError::Config(e)) => {
            found.extend(e.0);
            found.sort_by_key(|e| e.line.unwrap_or(0));
            return Err(Failure::Config(ConfigErrors(found).to_string()));
        }
        Err(other) => return Err(Failure::store("store", other.to_string())),
    };
    if !found.is_empty() {
        gateway.shutdown().await;
        return Err(Failure::Config(ConfigErrors(found).to_string()));
    }
    let tools = gateway.tool_names();
    let policies = gateway.policy_schema();
    // Bound skills ([skills.NAME]), when there are any.
    let skills: Vec<String> = gateway
        .server()
        .skills()
        .iter()
        .map(|s| s.name().to_owned())
        .collect();
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    if args.check {
        let also = if skills.is_empty() {
            String::new()
        } else {
            format!(
                "; {} skill{}: {}",
                skills.len(),
                plural(skills.len()),
                skills.join(", ")
            )
        };
        println!(
            "configuration ok: {} tools: {}{also}",
            tools.len(),
            tools.join(", ")
        );
        if let Some((count, schema)) = &policies {
            println!(
                "policies ok: {count} {} in {policy_files} {}, valid against the schema of the bound tools",
                if *count == 1 { "policy" } else { "policies" },
                if policy_files == 1 { "file" } else { "files" },
            );
            // With -v, the generated schema policies are written against.
            if excerpts {
                println!("{}", schema.trim_end());
            }
        }
        gateway.shutdown().await;
        return Ok(());
    }
    let policy_note = policies.map_or_else(String::new, |(count, _)| {
        format!(
            "; {count} {}",
            if count == 1 { "policy" } else { "policies" }
        )
    });
    let also = if skills.is_empty() {
        String::new()
    } else {
        format!(
            "; {} skill{} ({})",
            skills.len(),
            plural(skills.len()),
            skills.join(", ")
        )
    };
    say(
        "purra gateway",
        &format!(
            "{}: {} tools ({}){also}; store {}{policy_note}",
            settings.name,
            tools.len(),
            tools.join(", "),
            shown_db(&settings.db)
        ),
    );
    let hooks = gateway.webhooks().endpoints();
    if !hooks.is_empty() {
        let names: Vec<&str> = hooks.iter().map(|e| e.name.as_str()).collect();
        say(
            "purra gateway",
            &format!(
                "webhooks: {} (events recorded in the store, delivered from here)",
                names.join(", ")
            ),
        );
    }
    // The Prometheus endpoint on its own listener, and the OTLP metrics exporter.
    let telemetry_stop = purra_protocol::CancellationToken::new();
    let mut telemetry_tasks = Vec::new();
    if let Some(addr) = metrics_listen {
        let listener = match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => l,
            Err(e) => {
                gateway.shutdown().await;
                let mistake = bind_mistake(&source, Some("telemetry.metrics_listen"), addr, &e);
                return Err(Failure::Config(ConfigErrors(vec![mistake]).to_string()));
            }
        };
        let local = listener.local_addr().map_err(|e| {
            Failure::protocol("serving", purra_protocol::Error::Transport(e.to_string()))
        })?;
        say(
            "purra gateway",
            &format!("metrics at http://{local}/metrics"),
        );
        let g = gateway.clone();
        let stop = telemetry_stop.clone();
        telemetry_tasks.push(tokio::spawn(async move {
            let _ = g
                .serve_metrics(listener, async move { stop.cancelled().await })
                .await;
        }));
    }
    #[cfg(feature = "otel")]
    if export.endpoint.is_some() {
        telemetry_tasks.push(tokio::spawn(crate::telemetry::export_metrics(
            gateway.clone(),
            export.clone(),
            metrics_interval,
            telemetry_stop.clone(),
        )));
    }
    #[cfg(not(feature = "otel"))]
    let _ = (&export, metrics_interval);
    // The page decides through the gateway, so its waiting calls wake at once.
    let page_stop = purra_protocol::CancellationToken::new();
    let page_task = match (args.page, operator) {
        (Some(addr), Some(store)) => {
            let resend = crate::cmd::page::resend_through(args.config.clone(), store.clone());
            let g = gateway.clone();
            let decide: purra_page::Decide = Arc::new(move |id, decision| {
                let g = g.clone();
                Box::pin(async move { g.decide(id, decision).await })
            });
            let bound = match crate::cmd::page::bind(
                store,
                pins,
                Some(decide),
                addr,
                &args.page_options,
                Some(crate::cmd::page::FilePage {
                    page: &page_settings,
                    groups: approver_groups.clone(),
                    source: &source,
                    connections: gateway.connections(),
                }),
                "purra gateway",
            )
            .await
            {
                Ok(b) => b,
                Err(e) => {
                    gateway.shutdown().await;
                    return Err(e);
                }
            };
            bound.set_resend(resend);
            let g = gateway.clone();
            bound.set_edit(Arc::new(move |id, arguments, decision| {
                let g = g.clone();
                Box::pin(async move {
                    g.approve_with_edit(id, arguments, decision)
                        .await
                        .map_err(|e| e.to_string())
                })
            }));
            if let Some(g) = grants {
                bound.set_grants(g);
            }
            // Webhook events link under the page's address unless `[page] url` names another.
            gateway.webhooks().default_page_url(bound.url());
            let stop = page_stop.clone();
            Some(tokio::spawn(
                bound.serve(async move { stop.cancelled().await }),
            ))
        }
        _ => None,
    };
    let reloads = tokio::spawn(lifecycle::reload_on_hangup(
        hangups,
        gateway.clone(),
        args.config.clone(),
        excerpts,
    ));
    let drain_bound = settings.drain_timeout.0;
    let result = match settings.listen {
        Listen::Stdio => {
            tokio::select! {
                () = gateway.serve_stdio() => Ok(()),
                () = lifecycle::stop(gateway.clone(), drain_bound) => Ok(()),
            }
        }
        Listen::Http(addr) => serve_http(&gateway, addr, drain_bound, &source).await,
    };
    reloads.abort();
    page_stop.cancel();
    if let Some(task) = page_task {
        let _ = task.await;
    }
    // The last metrics go out before the gateway closes.
    telemetry_stop.cancel();
    for task in telemetry_tasks {
        let _ = task.await;
    }
    gateway.shutdown().await;
    result
}

async fn serve_http(
    gateway: &Gateway,
    addr: std::net::SocketAddr,
    drain_bound: std::time::Duration,
    source: &ConfigSource,
) -> Result<(), Failure> {
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        let mistake = bind_mistake(source, Some("gateway.listen"), addr, &e);
        Failure::Config(ConfigErrors(vec![mistake]).to_string())
    })?;
    let local = listener.local_addr().map_err(|e| {
        Failure::protocol("serving", purra_protocol::Error::Transport(e.to_string()))
    })?;
    say("purra gateway", &format!("serving http://{local}/mcp"));
    // Behind the guard of [gateway.auth] when it is set (the gateway logs its metadata URL),
    // else with a warning that HTTP callers are not authenticated. On SIGTERM it drains first:
    // the pending answers reach their clients before the listener closes.
    gateway
        .serve_http(listener, lifecycle::stop(gateway.clone(), drain_bound))
        .await
        .map_err(|e| Failure::protocol("serving", purra_protocol::Error::Transport(e.to_string())))
}

/// Opens the store `[gateway] db` names, as the start does; the reason when it cannot be used.
/// With at most `pool_size` connections to PostgreSQL (`[store] pool_size`).
async fn open_store(
    settings: &purra_gateway::Settings,
    pool_size: usize,
) -> Result<AnyStore, String> {
    let db = settings.db.display().to_string();
    let location =
        StoreLocation::parse(&db).map_err(|e| format!("cannot open the store {db}: {e}"))?;
    AnyStore::open_with(&location, Some(settings.lease.0), Some(pool_size))
        .await
        .map_err(|e| format!("cannot open the store {}: {e}", location.shown()))
}

/// Whether the start could open its store: opened as the start opens it (a SQLite file is
/// created as the start would create it, and removed again when this check created it), then
/// closed; the reason when it cannot be used.
async fn check_store(settings: &purra_gateway::Settings, pool_size: usize) -> Result<(), String> {
    let db = settings.db.display().to_string();
    let file = match StoreLocation::parse(&db) {
        Ok(StoreLocation::File(path)) if !path.exists() => Some(path),
        _ => None,
    };
    // Opened, then closed at once (dropped).
    let result = open_store(settings, pool_size).await.map(drop);
    if let Some(path) = file {
        // Nothing is left behind that the check created.
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut p = path.clone().into_os_string();
            p.push(suffix);
            let _ = std::fs::remove_file(p);
        }
    }
    result
}

/// A listener that could not be bound, as a mistake at its key (`key` `None`: the `--page`
/// option's address).
fn bind_mistake(
    source: &ConfigSource,
    key: Option<&str>,
    addr: std::net::SocketAddr,
    e: &std::io::Error,
) -> ConfigError {
    let message = if e.kind() == std::io::ErrorKind::AddrInUse {
        format!("address {addr} is in use (another process listens on it: stop it or choose another address)")
    } else {
        format!("cannot listen on address {addr}: {e}")
    };
    match key {
        Some(key) => source.error(key, message),
        None => ConfigError {
            file: String::new(),
            line: None,
            key: "--page".into(),
            message,
        },
    }
}

/// The store for messages: a file's path, or a URL without its password.
fn shown_db(db: &std::path::Path) -> String {
    let text = db.display().to_string();
    StoreLocation::parse(&text).map_or(text, |l| l.shown())
}

/// What the gateway does on signals: reload on `SIGHUP`, drain and stop on `SIGTERM`/`SIGINT`.
mod lifecycle {
    use std::path::PathBuf;
    use std::time::Duration;

    use purra_gateway::{Gateway, StartError};
    use tokio::signal::unix::{signal, Signal, SignalKind};

    use crate::cmd::interrupted;

    /// One line on stderr, prefixed `purra gateway:` (a JSON object with `--log-format json`),
    /// never a panic when stderr is gone.
    fn say(message: &str) {
        crate::telemetry::say("purra gateway", message);
    }

    /// The `SIGHUP` stream (`None` where it cannot be had).
    pub fn hangups() -> Option<Signal> {
        signal(SignalKind::hangup()).ok()
    }

    fn names(list: &[String]) -> String {
        if list.is_empty() {
            "none".into()
        } else {
            list.join(", ")
        }
    }

    /// Reloads `file` on every `SIGHUP`, one at a time; what came of it is said on stderr.
    pub async fn reload_on_hangup(
        hangups: Option<Signal>,
        gateway: Gateway,
        file: PathBuf,
        excerpts: bool,
    ) {
        let Some(mut hangups) = hangups else { return };
        while hangups.recv().await.is_some() {
            let shown = file.display();
            let running = gateway.revision();
            let refused = |why: String| {
                say(&format!(
                    "reload of {shown} refused; revision {running} keeps serving: {why}"
                ));
            };
            let loaded = match purra_gateway::load_reporting_all_with(&file, excerpts).await {
                Ok(l) => l,
                Err(e) => {
                    refused(e.to_string());
                    continue;
                }
            };
            match gateway.reload(loaded.config, &loaded.source).await {
                Ok(r) => {
                    for w in &r.warnings {
                        say(w);
                    }
                    say(&format!(
                        "reloaded {shown}: revision {}: {} tools ({}); changed: {}; added: {}; removed: {}",
                        r.revision,
                        r.tools.len(),
                        r.tools.join(", "),
                        names(&r.changed),
                        names(&r.added),
                        names(&r.removed),
                    ));
                }
                Err(StartError::Config(e)) => refused(e.to_string()),
                Err(e) => refused(e.to_string()),
            }
        }
    }

    /// Completes once the gateway was told to stop (`SIGTERM` or `SIGINT`) and has drained:
    /// no new calls, the waiting writes answered as pending (on a fleet's store, those on SSE
    /// streams handed over to the other instances), the calls in flight finished, or
    /// `bound` passed. A second signal while it drains ends the wait at once.
    pub async fn stop(gateway: Gateway, bound: Duration) {
        interrupted().await;
        let waiting = if gateway.drain_hands_streams_over() {
            "waiting writes on SSE streams are handed over to the fleet's other instances, the \
             others answered as pending"
        } else {
            "waiting writes are answered as pending"
        };
        say(&format!(
            "draining: no new calls; {waiting}; {} calls and {} dispatches in flight, waited for \
             at most {}",
            gateway.calls_in_flight(),
            gateway.dispatches_in_flight(),
            purra_gateway::Dur(bound)
        ));
        tokio::select! {
            drained = gateway.drain(bound) => {
                if drained.calls_left == 0 && drained.dispatches_left == 0 {
                    say("drained");
                } else {
                    say(&format!(
                        "the drain bound passed with {} calls and {} dispatches in flight: a \
                         claimed write among them becomes unknown once the lease lapses, never \
                         sent again",
                        drained.calls_left, drained.dispatches_left
                    ));
                }
            }
            () = interrupted() => say("stopping at once (a second signal)"),
        }
    }
}
