//! One upstream server: its connection, its catalog monitor, and the registrations discovered
//! from it through purra-mcp's read and write discovery.
//!
//! The live state (connection, registrations, the generation they were discovered at) is an
//! immutable [`Live`] behind an `Arc`, swapped whole; a call takes the current `Arc` and never
//! sees half a refresh. A refresh (reconnect when the connection closed, rediscovery when the
//! tool list changed) runs one at a time behind a one-permit gate; calls in flight keep the
//! registrations they started with, whose handlers answer `mcp_catalog_stale` once the list
//! changed (a registration never widens itself).
//!
//! A reload that changes an upstream's bindings makes a new `Upstream` that shares the old one's
//! connection (its *seed*); one that changes the upstream's own table, or removes it, makes a new
//! connection. Either way the old `Upstream` is *retired*: it refreshes nothing any more, its
//! listeners are removed, and a connection of its own is closed once no call uses it (each call
//! holds an [`InUse`] while it runs, its dispatch included).
//!
//! The `upstream` layer: this module and [`skills`] (the skills an upstream serves, pinned and
//! passed through). It may import `config` and `rules`, never `catalog`, `runtime` or `serve`
//! (the test `layers::gateway_modules_import_only_their_own_layer_or_below`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use purra_core::{CatalogPins, ErrorCode, SeenChange, ToolPin, ToolRegistration};
use purra_mcp::{
    discover_pinned, discover_read_tools, discover_read_tools_pinned, discover_write_tools,
    discover_write_tools_pinned, tool_definition, AdapterError, CatalogMonitor, Limits,
    PinnedDiscovery, PinnedSnapshot, ReadBinding, WriteBinding,
};
use purra_protocol::types::{Tool, ToolAnnotations};
use purra_protocol::{
    Client, ClientOptions, Connection, HttpClientOptions, ListenerHandle, StderrMode, StdioCommand,
    WsClientOptions,
};
use serde_json::Value;
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::config::UpstreamConfig;
use principals::{ConnectAs, CredentialError, Credentials, Principals, SlotInUse, Who};

pub(crate) mod connected;
pub(crate) mod credentials;
pub(crate) mod identity;
pub(crate) mod principals;
pub(crate) mod skills;

/// How many times an upstream's tools are listed when each listing is announced as changed while
/// it is read (then `mcp_catalog_stale` is reported).
const STALE_LISTINGS: u32 = 3;

/// The most characters of an upstream command's stderr line a message repeats.
const MAX_STDERR_CHARS: usize = 300;

/// A bound tool as discovered: its registration and what downstream clients are shown.
pub(crate) struct Bound {
    /// Core's registration (its handler makes one bounded `tools/call`).
    pub registration: Arc<ToolRegistration>,
    /// The downstream tool: local name, title, strict-profile schemas.
    pub tool: Tool,
}

/// One discovery's result on one connection.
pub(crate) struct Live {
    /// The connection.
    pub conn: Arc<Connection>,
    /// Its monitor.
    pub monitor: CatalogMonitor,
    /// The monitor's generation when this was discovered.
    pub generation: u64,
    /// Bound tools by local name.
    pub tools: BTreeMap<String, Bound>,
    /// Bound tools served as pinned but not callable, by local name: the upstream lists them
    /// differently from their pin (`mcp_catalog_changed`) or no longer lists them
    /// (`mcp_tool_removed`).
    pub withheld: BTreeMap<String, ErrorCode>,
    /// The pins' digests this was discovered against, by remote name (empty without pins).
    pub pinned: BTreeMap<String, String>,
    /// Set when the store's pins moved since (an operator approved a change): rediscover.
    repinned: std::sync::atomic::AtomicBool,
}

impl Live {
    /// Whether this is still current: connection open, tool list unchanged, pins unchanged.
    pub fn is_current(&self) -> bool {
        !self.monitor.is_closed()
            && !self.conn.peer().is_closed()
            && self.monitor.generation() == self.generation
            && !self.repinned.load(Ordering::SeqCst)
    }
}

/// Where an upstream's bound tools are pinned, and who pins them.
#[derive(Clone)]
pub(crate) struct Pins {
    /// The store's pins and catalog changes (shared by a fleet).
    pub store: Arc<dyn CatalogPins>,
    /// The instance that pins and sees changes (the gateway's name).
    pub instance: String,
}

/// A listing compared with the store's pins ([`Upstream::pinned_listing`]).
struct Listing {
    /// The listing with every pinned tool as pinned, and the differences.
    found: PinnedDiscovery,
    /// Bound tools withheld, by local name, with their code.
    withheld: BTreeMap<String, ErrorCode>,
    /// The pins' digests by remote name.
    pinned: BTreeMap<String, String>,
    /// Bound tools not pinned yet, as listed (remote name, definition).
    to_pin: Vec<(String, Value)>,
}

/// The store failed while pins were read or written: discovery fails closed.
fn pin_store_failed(e: &purra_core::StoreError) -> UpstreamError {
    tracing::warn!(error = %e, "the store failed while tool pins were read or written");
    UpstreamError::Discovery(AdapterError::new(ErrorCode::STORE_FAILED))
}

/// Why an upstream could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum UpstreamError {
    /// Connecting failed (the text is for the operator's log, never for a client).
    Connect(String),
    /// Discovery failed with an adapter code.
    Discovery(AdapterError),
    /// The caller's credential for this upstream could not be had.
    Credential(CredentialError),
    /// Every per-principal connection is in use.
    Busy,
}

impl std::fmt::Display for UpstreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UpstreamError::Connect(why) => write!(f, "cannot connect: {why}"),
            UpstreamError::Discovery(e) => match &e.refusal {
                Some(r) => write!(f, "discovery failed: {} ({r})", e.code),
                None => write!(f, "discovery failed: {}", e.code),
            },
            UpstreamError::Credential(e) => write!(f, "no credential: {e}"),
            UpstreamError::Busy => f.write_str("every per-principal connection is in use"),
        }
    }
}

/// An upstream server and its bindings.
pub(crate) struct Upstream {
    /// The upstream's id in the configuration.
    pub id: String,
    config: UpstreamConfig,
    limits: Limits,
    /// Read bindings by remote name.
    reads: BTreeMap<String, ReadBinding>,
    /// Write bindings by remote name.
    writes: BTreeMap<String, WriteBinding>,
    /// Titles by local name (the downstream tool's title).
    titles: BTreeMap<String, String>,
    live: RwLock<Option<Arc<Live>>>,
    /// One refresh at a time.
    gate: Semaphore,
    /// Connections made (the first, then each reconnection), for the metrics.
    pub connections: std::sync::atomic::AtomicU64,
    /// A connection to use instead of connecting, once (an earlier `Upstream`'s, shared when a
    /// reload changed only the bindings).
    seed: Mutex<Option<(Arc<Connection>, CatalogMonitor)>>,
    /// Cancelled when a reload replaced this upstream: it refreshes nothing any more.
    retired: CancellationToken,
    /// The listeners it put on its connections (removed when it is retired).
    listeners: Mutex<Vec<ListenerHandle>>,
    /// Calls using it now ([`InUse`]).
    users: AtomicUsize,
    /// Woken when the last user is done.
    idle: Notify,
    /// Who the upstream is called as.
    identity: Identity,
    /// Where its bound tools are pinned (`None`: served as listed).
    pins: Option<Pins>,
    /// What the operator is told of catalog changes this upstream recorded, until the running
    /// gateway logs it ([`Upstream::take_notices`]).
    notices: Mutex<Vec<String>>,
}

/// Who an upstream is called as: its configured headers and environment only (the default), a
/// service identity on its shared connection, and/or a connection per principal made with that
/// principal's own credential.
#[derive(Default)]
pub(crate) struct Identity {
    /// The authorization of the shared connection's HTTP requests (a service identity).
    pub service: Option<Arc<dyn purra_protocol::http::HttpAuth>>,
    /// How each principal's own connection is made, and the pool of them.
    pub per_principal: Option<(Arc<dyn Credentials>, Principals)>,
    /// Whether the upstream is discovered only once its discovery principal has connected
    /// (`mode = "oauth"`): until then its tools are not served and the gateway runs on.
    pub deferred: bool,
}

/// One principal's current state of an upstream, held for one call.
pub(crate) struct PrincipalLive {
    /// The principal's connection and what it discovered.
    pub live: Arc<Live>,
    /// The slot it is in (not evicted while held).
    pub slot: SlotInUse,
}

/// A call's use of an upstream: while any is held, a retired upstream's own connection stays
/// open.
pub(crate) struct InUse(Arc<Upstream>);

impl InUse {
    pub fn new(upstream: &Arc<Upstream>) -> InUse {
        upstream.users.fetch_add(1, Ordering::SeqCst);
        InUse(upstream.clone())
    }
}

impl Drop for InUse {
    fn drop(&mut self) {
        if self.0.users.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

impl Upstream {
    pub fn new(
        id: String,
        config: UpstreamConfig,
        limits: Limits,
        reads: BTreeMap<String, ReadBinding>,
        writes: BTreeMap<String, WriteBinding>,
    ) -> Upstream {
        let titles = reads
            .values()
            .map(|b| (b.local_name.clone(), b.title.clone()))
            .chain(
                writes
                    .values()
                    .map(|b| (b.local_name.clone(), b.title.clone())),
            )
            .collect();
        Upstream {
            id,
            config,
            limits,
            reads,
            writes,
            titles,
            live: RwLock::new(None),
            gate: Semaphore::new(1),
            connections: std::sync::atomic::AtomicU64::new(0),
            seed: Mutex::new(None),
            retired: CancellationToken::new(),
            listeners: Mutex::new(Vec::new()),
            users: AtomicUsize::new(0),
            idle: Notify::new(),
            identity: Identity::default(),
            pins: None,
            notices: Mutex::new(Vec::new()),
        }
    }

    /// The operator's messages about catalog changes recorded since the last call.
    pub fn take_notices(&self) -> Vec<String> {
        std::mem::take(&mut *self.notices.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// This upstream with its bound tools pinned in `pins` (`None`: served as listed).
    pub fn with_pins(mut self, pins: Option<Pins>) -> Upstream {
        self.pins = pins;
        self
    }

    /// Whether the store's pins of this upstream's bound tools moved since its current
    /// discovery (an operator approved a change, here or on another instance); when they did,
    /// the current discovery is no longer current. Reads the store once.
    pub async fn check_pins(&self) -> bool {
        let (Some(pins), Some(live)) = (&self.pins, self.live()) else {
            return false;
        };
        let Ok(stored) = pins.store.tool_pins(self.id.clone()).await else {
            return false;
        };
        let now: BTreeMap<String, String> = stored
            .into_iter()
            .filter(|p| self.binds(&p.tool))
            .map(|p| (p.tool, p.digest))
            .collect();
        if now != live.pinned {
            live.repinned.store(true, Ordering::SeqCst);
            return true;
        }
        false
    }

    /// Whether `remote` is one of this upstream's bound tools.
    fn binds(&self, remote: &str) -> bool {
        self.reads.contains_key(remote) || self.writes.contains_key(remote)
    }

    /// The local names `remote` is bound as (a read, a write, or both).
    fn locals_of(&self, remote: &str) -> Vec<&str> {
        self.reads
            .get(remote)
            .map(|b| b.local_name.as_str())
            .into_iter()
            .chain(self.writes.get(remote).map(|b| b.local_name.as_str()))
            .collect()
    }

    /// Lists the tools against the store's pins: records a catalog change for every bound tool
    /// whose listing differs from its pin, and answers the listing with the pinned definitions
    /// (a [`Listing`]). Bound tools listed once and not pinned yet are in `to_pin`, pinned by
    /// [`Upstream::pin_first`] once discovery has bound them.
    async fn pinned_listing(
        &self,
        pins: &Pins,
        conn: &Connection,
        monitor: &CatalogMonitor,
    ) -> Result<Listing, UpstreamError> {
        let stored: BTreeMap<String, ToolPin> = pins
            .store
            .tool_pins(self.id.clone())
            .await
            .map_err(|e| pin_store_failed(&e))?
            .into_iter()
            .filter(|p| self.binds(&p.tool))
            .map(|p| (p.tool.clone(), p))
            .collect();
        let mut snapshot = PinnedSnapshot::default();
        for (name, p) in &stored {
            snapshot.pin(name.clone(), p.definition.clone());
        }
        let found = discover_pinned(conn, monitor, self.limits, &snapshot)
            .await
            .map_err(UpstreamError::Discovery)?;
        // First binding: a bound tool listed once and not pinned yet (one not listed, or listed
        // twice, is refused by discovery).
        let mut to_pin = Vec::new();
        for remote in self.reads.keys().chain(self.writes.keys()) {
            if stored.contains_key(remote) {
                continue;
            }
            if let [tool] = found
                .served
                .iter()
                .filter(|t| &t.name == remote)
                .collect::<Vec<_>>()
                .as_slice()
            {
                to_pin.push((remote.clone(), tool_definition(tool)));
            }
        }
        let mut withheld = BTreeMap::new();
        for change in &found.changes {
            let Some(pin) = stored.get(&change.tool) else {
                continue;
            };
            let code = if change.listed.is_some() {
                purra_mcp::codes::catalog_changed()
            } else {
                purra_mcp::codes::tool_removed()
            };
            for local in self.locals_of(&change.tool) {
                withheld.insert(local.to_owned(), code.clone());
            }
            let seen = SeenChange {
                pin: pin.clone(),
                new_definition: change.listed.clone(),
                seen_by: pins.instance.clone(),
                seen_at: std::time::SystemTime::now(),
            };
            match pins.store.note_catalog_change(seen).await {
                Ok((c, true)) => {
                    let notice = format!(
                        "upstream {}: the tool {:?} {}: it is withheld and held as catalog change \
                         {} (purra catalog diff {})",
                        self.id,
                        change.tool,
                        if change.listed.is_some() {
                            "changed since it was approved"
                        } else {
                            "is no longer listed"
                        },
                        c.id,
                        c.id
                    );
                    tracing::warn!(upstream = %self.id, change = c.id, "{notice}");
                    self.notices
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(notice);
                }
                Ok(_) => {}
                // Withheld all the same; seen again at the next discovery.
                Err(e) => {
                    tracing::warn!(upstream = %self.id, error = %e, "a catalog change could not be recorded")
                }
            }
        }
        let pinned = stored.into_iter().map(|(k, p)| (k, p.digest)).collect();
        Ok(Listing {
            found,
            withheld,
            pinned,
            to_pin,
        })
    }

    /// Pins each of `to_pin` (remote name, definition as just bound) unless another process
    /// pinned it first; adds the pins in force to `pinned`. True when a pin in force is not what
    /// was bound (another process pinned another definition first): discover again.
    async fn pin_first(
        &self,
        pins: &Pins,
        to_pin: Vec<(String, Value)>,
        pinned: &mut BTreeMap<String, String>,
    ) -> Result<bool, UpstreamError> {
        let mut moved = false;
        for (remote, definition) in to_pin {
            let pin = ToolPin::new(
                self.id.clone(),
                remote.clone(),
                definition,
                pins.instance.clone(),
                std::time::SystemTime::now(),
            )
            .map_err(|e| pin_store_failed(&e))?;
            let digest = pin.digest.clone();
            let kept = pins
                .store
                .pin_tool(pin)
                .await
                .map_err(|e| pin_store_failed(&e))?;
            moved |= kept.digest != digest;
            pinned.insert(remote, kept.digest);
        }
        Ok(moved)
    }

    /// This upstream called as `identity` says.
    pub fn with_identity(mut self, identity: Identity) -> Upstream {
        self.identity = identity;
        self
    }

    /// Whether it is discovered only once its discovery principal has connected (an upstream
    /// called with each principal's OAuth connection): a start does not wait for it.
    pub fn deferred(&self) -> bool {
        self.identity.deferred
    }

    /// The credentials of per-principal connections, when calls go out as their principal.
    pub fn credentials(&self) -> Option<&Arc<dyn Credentials>> {
        self.identity.per_principal.as_ref().map(|(c, _)| c)
    }

    /// `who`'s own connection and what it discovered: made now with `who`'s credential when
    /// it has none open (or its tool list changed). Only for an upstream with per-principal
    /// connections.
    pub async fn current_as(&self, who: &Who) -> Result<PrincipalLive, UpstreamError> {
        let Some((credentials, pool)) = &self.identity.per_principal else {
            return Err(UpstreamError::Connect(
                "this upstream has no per-principal connections".into(),
            ));
        };
        credentials.update(who);
        let slot = pool.take(&who.principal).map_err(|_| UpstreamError::Busy)?;
        // An open connection's credential is checked on every call: one revoked or gone since
        // is refused now, cleanly, and the connection made with it is closed.
        if let Some(live) = slot.0.live().filter(|l| l.is_current()) {
            if let Err(e) = credentials.still_held(who).await {
                slot.0.close().await;
                return Err(UpstreamError::Credential(e));
            }
            return Ok(PrincipalLive { live, slot });
        }
        let held = slot.0.clone();
        let _permit = held
            .gate
            .acquire()
            .await
            .map_err(|_| UpstreamError::Connect("the gateway is stopping".into()))?;
        if let Some(live) = slot.0.live().filter(|l| l.is_current()) {
            return Ok(PrincipalLive { live, slot });
        }
        if self.is_retired() {
            return Err(UpstreamError::Connect(
                "replaced by a reload of the configuration".into(),
            ));
        }
        let reuse = slot
            .0
            .live()
            .filter(|l| !l.monitor.is_closed() && !l.conn.peer().is_closed())
            .map(|l| (l.conn.clone(), l.monitor.clone()));
        let (conn, monitor) = match reuse {
            Some(c) => c,
            None => {
                let with = credentials
                    .connect_as(who)
                    .await
                    .map_err(UpstreamError::Credential)?;
                let conn = Arc::new(self.connect(&with).await?);
                let monitor = CatalogMonitor::attach(&conn);
                (conn, monitor)
            }
        };
        match self.discover(&conn, &monitor).await {
            Ok(live) => {
                let live = Arc::new(live);
                slot.0.set_live(Some(live.clone()));
                Ok(PrincipalLive { live, slot })
            }
            Err(e) => {
                slot.0.set_live(None);
                Err(e)
            }
        }
    }

    /// Closes the per-principal connections idle past their timeout.
    pub async fn reap_idle(&self) {
        if let Some((_, pool)) = &self.identity.per_principal {
            pool.reap().await;
        }
    }

    /// Uses `from`'s connection (when it is open) instead of connecting: the binding-only change
    /// of a reload. Returns whether there was one to share.
    pub fn share_connection(&self, from: &Upstream) -> bool {
        let Some(live) = from
            .live()
            .filter(|l| !l.monitor.is_closed() && !l.conn.peer().is_closed())
        else {
            return false;
        };
        *self.seed.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((live.conn.clone(), live.monitor.clone()));
        true
    }

    /// Whether a reload replaced this upstream.
    pub fn is_retired(&self) -> bool {
        self.retired.is_cancelled()
    }

    /// Completes when a reload replaced this upstream.
    pub async fn retired(&self) {
        self.retired.cancelled().await;
    }

    /// Keeps `handle` to remove the listener when this upstream is retired.
    pub fn keep_listener(&self, handle: ListenerHandle) {
        self.listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(handle);
    }

    /// Retires this upstream (a reload replaced it): it refreshes nothing any more and its
    /// listeners are removed; with `close` (its connection is its own, not shared with the
    /// upstream that replaced it) the connection is closed once no call uses it, or at once when
    /// `stop` is cancelled.
    pub fn retire(self: &Arc<Self>, close: bool, stop: CancellationToken) {
        self.retired.cancel();
        let handles =
            std::mem::take(&mut *self.listeners.lock().unwrap_or_else(|p| p.into_inner()));
        for h in handles {
            h.cancel();
        }
        if !close {
            // The connection lives on in the upstream that replaced this one.
            return;
        }
        let me = self.clone();
        tokio::spawn(async move {
            loop {
                let idle = me.idle.notified();
                tokio::pin!(idle);
                idle.as_mut().enable();
                if me.users.load(Ordering::SeqCst) == 0 {
                    break;
                }
                tokio::select! {
                    () = &mut idle => {}
                    () = stop.cancelled() => break,
                }
            }
            me.close().await;
        });
    }

    /// The current live state, if any (possibly no longer current).
    pub fn live(&self) -> Option<Arc<Live>> {
        self.live.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set_live(&self, live: Option<Arc<Live>>) {
        *self.live.write().unwrap_or_else(|p| p.into_inner()) = live;
    }

    /// The current state, refreshed first when the connection closed or the tool list changed.
    /// `Ok(None)` is never returned with `refresh`; the error says why the upstream is unusable.
    /// `changed` is true when this call replaced the registrations.
    pub async fn current(&self) -> Result<(Arc<Live>, bool), UpstreamError> {
        if let Some(live) = self.live().filter(|l| l.is_current()) {
            return Ok((live, false));
        }
        // Boxed: connecting and discovering make a large future, which every call's future
        // would otherwise carry (and copy whole each time it is moved) for its fast path.
        Box::pin(self.refresh())
            .instrument(tracing::debug_span!("gateway.discovery", upstream = %self.id))
            .await
    }

    /// [`Upstream::current`] past its fast path: connects when the connection closed and
    /// discovers again.
    async fn refresh(&self) -> Result<(Arc<Live>, bool), UpstreamError> {
        // Whoever holds the gate refreshes; the others find its result.
        let _permit = self
            .gate
            .acquire()
            .await
            .map_err(|_| UpstreamError::Connect("the gateway is stopping".into()))?;
        if let Some(live) = self.live().filter(|l| l.is_current()) {
            return Ok((live, false));
        }
        if self.is_retired() {
            // Replaced by a reload: calls made since use the upstream that replaced it.
            return Err(UpstreamError::Connect(
                "replaced by a reload of the configuration".into(),
            ));
        }
        let seed = self
            .seed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .filter(|(c, m)| !m.is_closed() && !c.peer().is_closed());
        let reuse = self
            .live()
            .filter(|l| !l.monitor.is_closed() && !l.conn.peer().is_closed())
            .map(|l| (l.conn.clone(), l.monitor.clone()))
            .or(seed);
        let (conn, monitor) = match reuse {
            Some(c) => c,
            None => {
                let conn = Arc::new(self.connect(&ConnectAs::default()).await?);
                let monitor = CatalogMonitor::attach(&conn);
                // Under the gate: each new connection is counted once, whoever asked.
                if self
                    .connections
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                    > 0
                {
                    tracing::info!(upstream = %self.id, "upstream reconnected");
                }
                (conn, monitor)
            }
        };
        match self.discover(&conn, &monitor).await {
            Ok(live) => {
                let live = Arc::new(live);
                self.set_live(Some(live.clone()));
                Ok((live, true))
            }
            Err(e) => {
                // Unusable until the next refresh; nothing stale stays callable.
                self.set_live(None);
                Err(e)
            }
        }
    }

    /// Closes the connection (the child process, if any, is shut down).
    pub async fn close(&self) {
        let live = self.live.write().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(live) = live {
            live.monitor.close();
            live.conn.close().await;
        }
        if let Some((_, pool)) = &self.identity.per_principal {
            pool.close().await;
        }
    }

    /// Connects: the shared connection with `ConnectAs::default()` (the configured headers
    /// and environment, and the service identity if any), a principal's with its own.
    async fn connect(&self, with: &ConnectAs) -> Result<Connection, UpstreamError> {
        let mut options = ClientOptions::default();
        options.client_info =
            purra_protocol::types::Implementation::new("purra-gateway", env!("CARGO_PKG_VERSION"));
        // The handshake and the listing are bounded by `[limits] timeout`, as calls are.
        let timeout = self.limits.timeout;
        options.engine.request_timeout = timeout;
        // A command's stderr goes on to the gateway's; its last line is kept for the message
        // when the command ends before it answers.
        let last_line: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
        let result = match (&self.config.command, &self.config.url) {
            (Some(command), _) => {
                let keep = last_line.clone();
                let relay: Arc<dyn Fn(&str) + Send + Sync> = Arc::new(move |line: &str| {
                    use std::io::Write as _;
                    let _ = writeln!(std::io::stderr(), "{line}");
                    if !line.trim().is_empty() {
                        *keep.lock().unwrap_or_else(|p| p.into_inner()) =
                            Some(line.chars().take(MAX_STDERR_CHARS).collect());
                    }
                });
                let mut cmd = StdioCommand::new(&command[0])
                    .args(&command[1..])
                    .stderr(StderrMode::Capture(Some(relay)));
                for (k, v) in &self.config.env {
                    cmd = cmd.env(k, v);
                }
                for (k, v) in &with.env {
                    cmd = cmd.env(k, v);
                }
                if let Some(dir) = &self.config.cwd {
                    cmd = cmd.cwd(dir);
                }
                Client::connect_stdio(cmd, options).await
            }
            (None, Some(url)) if url.starts_with("ws://") || url.starts_with("wss://") => {
                Client::connect_ws(url, WsClientOptions::default(), options).await
            }
            (None, Some(url)) => {
                let mut http = HttpClientOptions {
                    headers: self
                        .config
                        .headers
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                    ..HttpClientOptions::default()
                };
                if let Some(auth) = with.auth.clone().or_else(|| self.identity.service.clone()) {
                    http.auth = Some(auth);
                }
                Client::connect_http(url, http, options).await
            }
            (None, None) => return Err(UpstreamError::Connect("no command and no url".into())),
        };
        match result {
            Ok(conn) => Ok(conn),
            Err(purra_protocol::Error::Timeout) => Err(UpstreamError::Connect(format!(
                "no answer within {} (the [limits] timeout bounds the handshake and the listing)",
                crate::config::Dur(timeout)
            ))),
            Err(e) if self.config.command.is_some() => {
                // The command's last words, once its stderr has been read to the end.
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                let last = last_line.lock().unwrap_or_else(|p| p.into_inner()).clone();
                Err(UpstreamError::Connect(match last {
                    Some(line) => format!("{e} (last stderr line: {line:?})"),
                    None => format!("{e} (it wrote nothing on stderr)"),
                }))
            }
            Err(e) => Err(UpstreamError::Connect(e.to_string())),
        }
    }

    /// Discovers the bound tools; a listing the upstream announced as changed while it was read
    /// (`mcp_catalog_stale`: a server that announces a change as it starts, say) is read again,
    /// up to [`STALE_LISTINGS`] times, before the change is reported.
    async fn discover(
        &self,
        conn: &Arc<Connection>,
        monitor: &CatalogMonitor,
    ) -> Result<Live, UpstreamError> {
        let mut read = 1;
        loop {
            let generation = monitor.generation();
            match self.discover_once(conn, monitor).await {
                Err(_) if read < STALE_LISTINGS && monitor.generation() != generation => {
                    read += 1;
                }
                done => return done,
            }
        }
    }

    async fn discover_once(
        &self,
        conn: &Arc<Connection>,
        monitor: &CatalogMonitor,
    ) -> Result<Live, UpstreamError> {
        let generation = monitor.generation();
        let err = UpstreamError::Discovery;
        // An upstream that binds no tool (only skills, say) is not listed at all.
        let binds_tools = !(self.reads.is_empty() && self.writes.is_empty());
        let (read, write, withheld, pinned) = match self.pins.as_ref().filter(|_| binds_tools) {
            Some(pins) => {
                let mut again = true;
                loop {
                    let Listing {
                        found,
                        withheld,
                        mut pinned,
                        to_pin,
                    } = self.pinned_listing(pins, conn, monitor).await?;
                    let read = if self.reads.is_empty() {
                        None
                    } else {
                        Some(
                            discover_read_tools_pinned(
                                conn,
                                &self.id,
                                &self.reads,
                                monitor,
                                self.limits,
                                &found,
                            )
                            .map_err(err)?,
                        )
                    };
                    let write = if self.writes.is_empty() {
                        None
                    } else {
                        Some(
                            discover_write_tools_pinned(
                                conn,
                                &self.id,
                                &self.writes,
                                monitor,
                                self.limits,
                                &found,
                            )
                            .map_err(err)?,
                        )
                    };
                    // Bound: what was bound is pinned now (the first binding), unless another
                    // process pinned another definition first, which is then discovered again.
                    if self.pin_first(pins, to_pin, &mut pinned).await? && again {
                        again = false;
                        continue;
                    }
                    break (read, write, withheld, pinned);
                }
            }
            None => {
                let read = if self.reads.is_empty() {
                    None
                } else {
                    Some(
                        discover_read_tools(conn, &self.id, &self.reads, monitor, self.limits)
                            .await
                            .map_err(err)?,
                    )
                };
                let write = if self.writes.is_empty() {
                    None
                } else {
                    Some(
                        discover_write_tools(conn, &self.id, &self.writes, monitor, self.limits)
                            .await
                            .map_err(err)?,
                    )
                };
                (read, write, BTreeMap::new(), BTreeMap::new())
            }
        };
        if monitor.generation() != generation {
            return Err(err(AdapterError::new(purra_mcp::codes::catalog_stale())));
        }
        let mut tools = BTreeMap::new();
        let snapshots = read
            .as_ref()
            .map(|r| &r.snapshot)
            .into_iter()
            .chain(write.as_ref().map(|w| &w.snapshot));
        let mut entries: BTreeMap<String, Value> = BTreeMap::new();
        for s in snapshots {
            for e in s.as_json()["entries"].as_array().into_iter().flatten() {
                if let Some(name) = e["localName"].as_str() {
                    entries.insert(name.to_owned(), e.clone());
                }
            }
        }
        let registrations = read
            .map(|r| r.registrations)
            .unwrap_or_default()
            .into_iter()
            .chain(write.map(|w| w.registrations).unwrap_or_default());
        for reg in registrations {
            let name = reg.name().to_owned();
            let entry = entries.get(&name).cloned().unwrap_or(Value::Null);
            let tool = downstream_tool(&name, self.titles.get(&name), &reg, &entry);
            tools.insert(
                name,
                Bound {
                    registration: Arc::new(reg),
                    tool,
                },
            );
        }
        Ok(Live {
            conn: conn.clone(),
            monitor: monitor.clone(),
            generation,
            tools,
            withheld,
            pinned,
            repinned: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// The shared connection made alone, as a resend of an `unknown` effect makes it (the
    /// configured headers and environment, the service identity if any), with its catalog
    /// monitor; the caller closes it.
    pub async fn connect_alone(&self) -> Result<(Connection, CatalogMonitor), UpstreamError> {
        let conn = self.connect(&ConnectAs::default()).await?;
        let monitor = CatalogMonitor::attach(&conn);
        Ok((conn, monitor))
    }

    /// Connects and lists the upstream's tools without binding anything (for the start checks
    /// of the configuration).
    pub async fn probe(&self) -> Result<Vec<Tool>, UpstreamError> {
        let conn = self.connect(&ConnectAs::default()).await?;
        let tools = conn.tools().as_ref().clone();
        conn.close().await;
        Ok(tools)
    }

    /// The limits discovery runs under.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }
}

/// The configuration mistakes of bindings of upstream `upstream` that its listed `tools` show:
/// for each `(key, remote tool)`, a tool it does not list, or one discovery would refuse (the
/// place in the tool and the reason; with `excerpts`, the listed JSON there). Every one at once,
/// where discovery stops at the first.
pub(crate) fn binding_mistakes(
    upstream: &str,
    refs: &[(String, String)],
    tools: &[Tool],
    limits: &Limits,
    excerpts: bool,
) -> Vec<(String, String)> {
    let names: Vec<String> = tools.iter().map(|t| t.name.clone()).collect();
    let mut out = Vec::new();
    for (key, remote) in refs {
        let listed: Vec<&Tool> = tools.iter().filter(|t| &t.name == remote).collect();
        match listed.as_slice() {
            [] => out.push((key.clone(), missing_tool(upstream, remote, &names))),
            [tool] => {
                if let Err(e) = purra_mcp::check_tool(tool, limits) {
                    out.push((key.clone(), refusal_message(upstream, &e, excerpts)));
                }
            }
            _ => out.push((
                key.clone(),
                format!("upstream {upstream:?} lists the tool {remote:?} more than once"),
            )),
        }
    }
    out
}

/// The message for a bound tool discovery refused: `upstream "ID" tool "NAME" at POINTER:
/// REASON (CODE)`, and with `excerpts` a second line with the listed JSON there.
pub(crate) fn refusal_message(upstream: &str, e: &AdapterError, excerpts: bool) -> String {
    let Some(r) = &e.refusal else {
        return format!("upstream {upstream:?}: discovery failed: {}", e.code);
    };
    let mut message = format!("upstream {upstream:?} tool {:?}", r.tool);
    if !r.pointer.is_empty() {
        message.push_str(" at ");
        message.push_str(&r.pointer);
    }
    message.push_str(&format!(": {} ({})", r.reason, e.code));
    if let (true, Some(excerpt)) = (excerpts, &r.excerpt) {
        message.push_str("\n      the listed JSON there: ");
        message.push_str(excerpt);
    }
    message
}

/// The message for a bound tool the upstream does not list.
pub(crate) fn missing_tool(upstream: &str, remote: &str, listed: &[String]) -> String {
    format!(
        "upstream {upstream:?} has no tool {remote:?} (it lists: {})",
        if listed.is_empty() {
            "no tools".to_owned()
        } else {
            listed.join(", ")
        }
    )
}

/// The sentence appended to a write tool's description in `tools/list`.
pub const WRITE_WAITS: &str = "A call of this tool waits for a person to approve it; if the \
    wait ends first, the result names the pending approval, and the same call made again once it \
    is approved is sent once.";

/// What downstream clients are shown for a bound tool: the local name, the binding's title, the
/// upstream description (a write's with [`WRITE_WAITS`]), the strict-profile input schema and the upstream's output schema, and
/// hints that say what the host declared (hints only: the gateway enforces the policy).
fn downstream_tool(
    name: &str,
    title: Option<&String>,
    reg: &ToolRegistration,
    entry: &Value,
) -> Tool {
    let object = |v: &Value| match v {
        Value::Object(o) => Some(o.clone()),
        _ => None,
    };
    let input = object(reg.input_schema().source()).unwrap_or_default();
    let output = object(&entry["outputSchema"]);
    let annotations = if reg.is_confirm() {
        let destructive = entry["effect"] == "destructive";
        ToolAnnotations::new()
            .with_read_only(false)
            .with_destructive(destructive)
            .with_idempotent(true)
    } else {
        ToolAnnotations::new().with_read_only(true)
    };
    // The model is told that a write waits for a person.
    let description = if reg.is_confirm() {
        match reg.description() {
            "" => WRITE_WAITS.to_owned(),
            d => format!("{d}\n\n{WRITE_WAITS}"),
        }
    } else {
        reg.description().to_owned()
    };
    let mut tool = Tool::new(name, input)
        .with_description(description)
        .with_annotations(annotations);
    if let Some(title) = title {
        tool = tool.with_title(title.as_str());
    }
    if let Some(output) = output {
        tool = tool.with_output_schema(output);
    }
    tool
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every call awaits `current`; its fast path (the upstream is live) must not carry the
    /// connect-and-discover path's state, which every move of a call's future would copy.
    #[test]
    fn the_future_of_current_carries_no_connect_and_discover_state() {
        let upstream = Upstream::new(
            "u".into(),
            UpstreamConfig {
                command: Some(vec!["true".into()]),
                ..UpstreamConfig::default()
            },
            Limits::default(),
            BTreeMap::new(),
            BTreeMap::new(),
        );
        let size = std::mem::size_of_val(&upstream.current());
        assert!(size <= 512, "Upstream::current's future is {size} bytes");
    }
}
