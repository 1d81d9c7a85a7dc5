//! purra-page: the approver page, served over any purra store (SQLite or PostgreSQL).
//!
//! A person who approves writes signs in with a random access token (one per approver, printed by
//! whoever starts the page; wrong tokens from one client address back off, [`SignInLimits`]), or
//! through an OpenID Connect provider ([`OidcLogin`]: the code flow with PKCE, `state` bound to
//! the browser, `nonce`, the ID token checked, an [`AllowList`] of who may approve), and gets a
//! session in an `HttpOnly`, `SameSite=Strict` cookie (`Secure`, named `__Host-…`, when the page
//! is reached over TLS: [`PageConfig::secure_cookie`]). Browsers keep cookies by host, not by
//! port: on a loopback address, any other web server on the same host name (another port) is
//! sent the page's session cookie, so run no untrusted web server on the page's host. The page
//! lists pending approvals with everything the approver approves (tool, upstream, arguments readably
//! and as exact JSON, intent digest, binding and scope revisions, who asked and when, time left),
//! updates live from the store's events (server-sent events, no reload), approves or denies with a
//! note (the approver's identity goes into the decision), and shows the history: decisions, effects
//! (`committed`, `not_started`, `unknown`), receipts and audit trails, with the reconciliation of an
//! `unknown` outcome, only with evidence. Both lists show one page, the newest first
//! ([`PageConfig::pending_page`], [`PageConfig::history_limit`]), with a link to the older ones
//! (`?before=ID`): the pending list says how many wait in all and how many more are older, so a
//! flood of requests cannot hide the real ones, and no refresh reads the whole store. Each
//! approval also has a page of its own, `/approvals/ID` (its decide form while it waits, its
//! decision, effect and trail after): where a gateway's webhook events link.
//!
//! With [`PageConfig::oauth`], signed-in users also connect themselves to the gateway's `oauth`
//! upstreams (`/connect`: the upstream's own authorization server, PKCE, tokens kept sealed in
//! the credential store) and revoke their connections; [`connect`] holds the flow and the
//! gateway's side of each call.
//!
//! Every request passes the MCP endpoints' Host and Origin policy ([`HostPolicy`], loopback by
//! default); every state-changing request must come from the page's own origin and repeat the
//! session's CSRF token. [`Page::serve`] runs on the MCP endpoint's own accept loop
//! (`purra_protocol::http::serve_with`) with the same [`ConnectionLimits`]: a bound on open
//! connections (the longest-idle makes room) and a header-read timeout. A live-update stream
//! ends when its session does (logout, expiry) or the page stops. The HTML is rendered on the server; one small script (live updates, time
//! left, decisions without leaving the page) and one style sheet are served by the page itself.
//!
//! ```no_run
//! # async fn run(store: std::sync::Arc<dyn purra_core::OperatorStore>) -> std::io::Result<()> {
//! let page = purra_page::Page::new(store, purra_page::PageConfig::default().approver("ada"));
//! for (approver, token) in page.tokens() {
//!     eprintln!("sign-in token for {approver}: {token}");
//! }
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! page.serve(listener, std::future::pending()).await
//! # }
//! ```

mod approvals;
mod assets;
mod catalog;
mod config;
pub mod connect;
mod connect_routes;
mod effects;
mod grants;
mod guard;
mod login;
mod oidc;
mod render;
mod respond;
mod routes;
mod session;
mod throttle;

use std::future::Future;
use std::sync::{Arc, OnceLock};

pub use config::PageConfig;
pub use oidc::{AllowList, OidcLogin};
use purra_core::{ApprovalId, BoxFuture, Decision, OperatorStore, StoreError};
pub use purra_protocol::auth::OidcConfig;
use purra_protocol::auth::OidcProvider;
pub use purra_protocol::http::{ConnectionLimits, ConnectionStats};
use purra_protocol::CancellationToken;
pub use purra_protocol::HostPolicy;
use tokio::sync::Semaphore;

use login::Cookies;
use routes::WithPeer;
use session::Sessions;
pub use throttle::SignInLimits;
use throttle::Throttle;

/// How a decision is recorded: the store's own `decide` by default; a gateway in the same process
/// records it through itself so its waiting calls wake at once.
pub type Decide =
    Arc<dyn Fn(ApprovalId, Decision) -> BoxFuture<'static, Result<(), StoreError>> + Send + Sync>;

/// How a page resends an `unknown` effect under the same key for an approver (the key, who is
/// recorded as asking): a gateway's resend, which decides whether it is allowed; `Ok` with what
/// came of it, `Err` with why nothing was sent. Without one ([`Page::set_resend`]) the page says
/// why resend is unavailable.
pub type Resend = Arc<
    dyn Fn(purra_core::IdempotencyKey, String) -> BoxFuture<'static, Result<String, String>>
        + Send
        + Sync,
>;

/// How a page approves a waiting write with edited arguments (the approval, the arguments, the
/// approver's decision): a gateway's, which checks the edited call as if its caller had sent it;
/// `Ok` with the edited approval, `Err` with why nothing was recorded. Without one
/// ([`Page::set_edit`]) the page refuses every edit.
pub type Edit = Arc<
    dyn Fn(
            ApprovalId,
            serde_json::Value,
            Decision,
        ) -> BoxFuture<'static, Result<ApprovalId, String>>
        + Send
        + Sync,
>;

/// The approver page over one store. Cheap to clone.
#[derive(Clone)]
pub struct Page {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Page {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Page")
            .field("approvers", &self.inner.config.approvers)
            .finish_non_exhaustive()
    }
}

struct Inner {
    store: Arc<dyn OperatorStore>,
    decide: Decide,
    config: PageConfig,
    /// (approver, access token), in the configuration's order.
    tokens: Vec<(String, String)>,
    sessions: Sessions,
    streams: Arc<Semaphore>,
    stop: CancellationToken,
    /// The OpenID Connect provider, discovered on first use (or by [`Page::discover`]).
    provider: tokio::sync::OnceCell<Arc<OidcProvider>>,
    /// The sign-ins through the provider under way.
    pending: oidc::Pending,
    /// The callback URL: configured, or the bound address's.
    redirect_uri: OnceLock<String>,
    /// Failed token sign-ins by client address.
    throttle: Throttle,
    /// The names of the session and pre-login cookies and the attributes they add (`; Secure`
    /// over TLS).
    cookies: Cookies,
    /// The connections [`Page::serve`] holds open.
    connection_stats: ConnectionStats,
    /// How the queue of unknown effects resends one, when this page can reach the upstreams.
    resend: OnceLock<Resend>,
    /// How an approver approves with edited arguments, when a gateway in this process checks them.
    edit: OnceLock<Edit>,
    /// The store's pinned tool definitions and catalog changes (`/catalog`), when given.
    catalog: Option<Arc<dyn purra_core::CatalogPins>>,
    /// The store's standing grants, listed (and revoked) at `/grants`, when set.
    grants: OnceLock<Arc<dyn purra_core::GrantStore>>,
}

impl Page {
    /// A page over `store`, deciding with the store's own `decide`; one fresh access token per
    /// approver.
    pub fn new(store: Arc<dyn OperatorStore>, config: PageConfig) -> Page {
        let decider = store.clone();
        let decide: Decide = Arc::new(move |id, decision| {
            let store = decider.clone();
            Box::pin(async move { store.decide(id, decision).await })
        });
        Page::with_decide(store, config, decide)
    }

    /// A page over `store` whose decisions are recorded by `decide` (a gateway's, which also
    /// wakes the calls waiting in its process). Run [`PageConfig::check`] first: with token
    /// sign-in off, no access token is made.
    pub fn with_decide(
        store: Arc<dyn OperatorStore>,
        mut config: PageConfig,
        decide: Decide,
    ) -> Page {
        if config.approvers.is_empty() {
            config.approvers.push("operator".to_owned());
        }
        config.approvers.dedup();
        let tokens = if config.token_login {
            config
                .approvers
                .iter()
                .map(|a| (a.clone(), session::random_token()))
                .collect()
        } else {
            Vec::new()
        };
        let redirect_uri = OnceLock::new();
        if let Some(uri) = config.oidc.as_ref().and_then(|o| o.redirect_uri.clone()) {
            let _ = redirect_uri.set(uri);
        }
        Page {
            inner: Arc::new(Inner {
                store,
                decide,
                sessions: Sessions::new(config.max_sessions, config.session_ttl),
                streams: Arc::new(Semaphore::new(config.max_streams)),
                throttle: Throttle::new(config.sign_in.clone()),
                cookies: Cookies::new(config.secure()),
                connection_stats: ConnectionStats::new(&config.connections),
                config,
                tokens,
                stop: CancellationToken::new(),
                provider: tokio::sync::OnceCell::new(),
                pending: oidc::Pending::default(),
                redirect_uri,
                resend: OnceLock::new(),
                edit: OnceLock::new(),
                catalog: None,
                grants: OnceLock::new(),
            }),
        }
    }

    /// Lets the queue of unknown effects resend one through `resend` (a gateway's, with the
    /// configuration that binds the upstreams). Set once; `false` when one was set already.
    pub fn set_resend(&self, resend: Resend) -> bool {
        self.inner.resend.set(resend).is_ok()
    }

    /// Lets approvers approve with edited arguments through `edit` (a gateway's, which checks the
    /// edited call). Set once; `false` when one was set already.
    pub fn set_edit(&self, edit: Edit) -> bool {
        self.inner.edit.set(edit).is_ok()
    }

    /// This page with the catalog changes of `pins` at `/catalog`: the pending ones with their
    /// diffs, approved (re-pinned) or denied under the signed-in approver's name. Call before
    /// serving (a page already shared keeps its catalog as it was).
    pub fn with_catalog(mut self, pins: Arc<dyn purra_core::CatalogPins>) -> Page {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.catalog = Some(pins);
        }
        self
    }

    /// Lets the page list the store's standing grants at `/grants` and revoke them. Set once;
    /// `false` when set already.
    pub fn set_grants(&self, grants: Arc<dyn purra_core::GrantStore>) -> bool {
        self.inner.grants.set(grants).is_ok()
    }

    /// Each approver's access token (show them to the approvers, nowhere else); none when token
    /// sign-in is off.
    pub fn tokens(&self) -> &[(String, String)] {
        &self.inner.tokens
    }

    /// Finds the OpenID Connect provider (its discovery document and keys' address) now, so a
    /// mistake shows before the page serves; without it the first sign-in does this. `Ok` when
    /// no provider is configured.
    pub async fn discover(&self) -> Result<(), String> {
        if self.inner.config.oidc.is_none() {
            return Ok(());
        }
        self.inner.provider().await.map(|_| ())
    }

    /// The callback URL to register with the OpenID Connect provider: the configured one, or
    /// `http://ADDR/login/callback` for the address [`serve`](Page::serve) was given (`None`
    /// before that).
    pub fn redirect_uri(&self) -> Option<&str> {
        self.inner.redirect_uri.get().map(String::as_str)
    }

    /// The page as a router, to mount in another server. Serve it with the connections' peer
    /// addresses (axum's `ConnectInfo<SocketAddr>`, which [`serve`](Page::serve) provides):
    /// without them every client counts as one address, so failed sign-ins from anyone back off
    /// everyone's and one browser's pending provider sign-ins make room for another's.
    pub fn router(&self) -> axum::Router {
        routes::router(self.inner.clone())
    }

    /// The connections [`serve`](Page::serve) holds open (across every listener it serves).
    pub fn connection_stats(&self) -> &ConnectionStats {
        &self.inner.connection_stats
    }

    /// Serves the page on `listener` until `shutdown` completes (live-update streams end then
    /// too), on the MCP endpoint's accept loop with [`PageConfig::connections`]: the same bound on
    /// connections and the same header-read timeout.
    pub async fn serve(
        &self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        if self.inner.config.oidc.is_some() && self.inner.redirect_uri.get().is_none() {
            let addr = listener.local_addr()?;
            if addr.ip().is_unspecified() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("the page listens on {addr}, every address: name its OpenID Connect redirect URI"),
                ));
            }
            let _ = self
                .inner
                .redirect_uri
                .set(format!("http://{addr}{}", oidc::CALLBACK));
        }
        let stop = self.inner.stop.clone();
        let trigger = stop.clone();
        let watch = async move {
            tokio::select! {
                () = shutdown => trigger.cancel(),
                () = trigger.cancelled() => {}
            }
        };
        let router = self.router();
        let (served, ()) = tokio::join!(
            purra_protocol::http::serve_with(
                listener,
                |peer| WithPeer {
                    router: router.clone(),
                    peer,
                },
                self.inner.config.connections.clone(),
                &self.inner.connection_stats,
                stop,
            ),
            watch
        );
        served
    }
}

impl Inner {
    /// The OpenID Connect provider, discovered once (a failed discovery is tried again next time).
    async fn provider(&self) -> Result<Arc<OidcProvider>, String> {
        let Some(o) = &self.config.oidc else {
            return Err("OpenID Connect sign-in is not configured".into());
        };
        self.provider
            .get_or_try_init(|| async {
                OidcProvider::discover(o.provider.clone())
                    .await
                    .map(Arc::new)
                    .map_err(|e| e.to_string())
            })
            .await
            .cloned()
    }
}
