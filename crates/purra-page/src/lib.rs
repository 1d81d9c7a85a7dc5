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

mod oidc;
mod render;
mod session;
mod throttle;

use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use http::request::Parts;
use http::{header, HeaderValue, Method, StatusCode};
pub use oidc::{AllowList, OidcLogin};
use purra_core::{
    ApprovalId, ApprovalQuery, ApprovalState, ApprovalStatus, ApprovalView, BoxFuture, Decision,
    EffectOutcome, OperatorStore, StoreError, Verdict, MAX_PAGE,
};
pub use purra_protocol::auth::OidcConfig;
use purra_protocol::auth::OidcProvider;
pub use purra_protocol::http::{ConnectionLimits, ConnectionStats};
use purra_protocol::CancellationToken;
pub use purra_protocol::HostPolicy;
use serde_json::json;
use tokio::sync::Semaphore;

use render::{Item, Listing, View};
use session::{Session, Sessions};
pub use throttle::SignInLimits;
use throttle::Throttle;

/// How a decision is recorded: the store's own `decide` by default; a gateway in the same process
/// records it through itself so its waiting calls wake at once.
pub type Decide =
    Arc<dyn Fn(ApprovalId, Decision) -> BoxFuture<'static, Result<(), StoreError>> + Send + Sync>;

/// The page's settings.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct PageConfig {
    /// Who may sign in (each gets an access token); `operator` when none is named.
    pub approvers: Vec<String>,
    /// The Host and Origin policy (loopback names by default).
    pub host_policy: HostPolicy,
    /// How long an approval made on the page authorizes dispatch.
    pub approval_ttl: Duration,
    /// How long a session lasts.
    pub session_ttl: Duration,
    /// The most sessions open at once (the oldest is closed to make room).
    pub max_sessions: usize,
    /// The most live-update streams open at once (beyond: 503).
    pub max_streams: usize,
    /// The most pending approvals shown on one page (the newest first; a link leads to the
    /// older ones, after how many there are). At least 1, at most `purra_core::MAX_PAGE`.
    pub pending_page: usize,
    /// The most history entries shown on one page (the newest first; a link leads to the older
    /// ones). At least 1, at most `purra_core::MAX_PAGE`.
    pub history_limit: usize,
    /// Sign-in through an OpenID Connect provider, when configured.
    pub oidc: Option<OidcLogin>,
    /// Whether the printed access tokens sign in (default true; may be turned off only when
    /// [`oidc`](PageConfig::oidc) is configured).
    pub token_login: bool,
    /// The bounds on failed token sign-ins per client address (5 free, then a backoff from 1 s
    /// doubling to 5 min, answered 429 with `Retry-After`).
    pub sign_in: SignInLimits,
    /// The connection limits [`Page::serve`] serves with: by default the MCP endpoint's own
    /// (`ConnectionLimits::default()`: 1024 connections, 10 s to send a request's headers).
    pub connections: ConnectionLimits,
    /// Whether the session cookie is `Secure` and named with the `__Host-` prefix (and the
    /// pre-login cookie `Secure`, `__Secure-`): set it when browsers reach the page over TLS
    /// (behind a proxy that terminates it). Also on, whatever this says, when the OpenID Connect
    /// redirect URI is `https://`: that is the page's address then.
    pub secure_cookie: bool,
}

impl Default for PageConfig {
    fn default() -> Self {
        PageConfig {
            approvers: Vec::new(),
            host_policy: HostPolicy::loopback(),
            approval_ttl: Duration::from_secs(3600),
            session_ttl: Duration::from_secs(12 * 3600),
            max_sessions: 256,
            max_streams: 64,
            pending_page: 50,
            history_limit: 50,
            oidc: None,
            token_login: true,
            sign_in: SignInLimits::default(),
            connections: ConnectionLimits::default(),
            secure_cookie: false,
        }
    }
}

impl PageConfig {
    /// Adds an approver who may sign in.
    pub fn approver(mut self, name: impl Into<String>) -> Self {
        self.approvers.push(name.into());
        self
    }

    /// Replaces the Host and Origin policy.
    pub fn host_policy(mut self, policy: HostPolicy) -> Self {
        self.host_policy = policy;
        self
    }

    /// How long an approval made on the page authorizes dispatch.
    pub fn approval_ttl(mut self, ttl: Duration) -> Self {
        self.approval_ttl = ttl;
        self
    }

    /// Signs approvers in through an OpenID Connect provider too.
    pub fn oidc(mut self, login: OidcLogin) -> Self {
        self.oidc = Some(login);
        self
    }

    /// Whether the printed access tokens sign in.
    pub fn token_login(mut self, yes: bool) -> Self {
        self.token_login = yes;
        self
    }

    /// Replaces the bounds on failed token sign-ins.
    pub fn sign_in(mut self, limits: SignInLimits) -> Self {
        self.sign_in = limits;
        self
    }

    /// Replaces the connection limits [`Page::serve`] serves with.
    pub fn connections(mut self, limits: ConnectionLimits) -> Self {
        self.connections = limits;
        self
    }

    /// Whether the cookies are `Secure` (and prefixed `__Host-`/`__Secure-`): the page is
    /// reached over TLS.
    pub fn secure_cookie(mut self, yes: bool) -> Self {
        self.secure_cookie = yes;
        self
    }

    /// Whether the cookies are `Secure`: [`secure_cookie`](PageConfig::secure_cookie), or an
    /// `https://` OpenID Connect redirect URI.
    pub fn secure(&self) -> bool {
        self.secure_cookie
            || self
                .oidc
                .as_ref()
                .and_then(|o| o.redirect_uri.as_deref())
                .and_then(|u| u.parse::<http::Uri>().ok())
                .is_some_and(|u| u.scheme_str() == Some("https"))
    }

    /// The mistakes that would leave the page unusable or open: no way to sign in, an empty
    /// allow-list (it would admit no one), a provider whose issuer is not https (plain http only
    /// on a loopback host), a redirect URI that is not an http(s) URL ending in the page's
    /// callback path.
    pub fn check(&self) -> Result<(), String> {
        let Some(o) = &self.oidc else {
            return if self.token_login {
                Ok(())
            } else {
                Err("token sign-in can be turned off only when OpenID Connect sign-in is configured".into())
            };
        };
        if o.allow.is_empty() {
            return Err(
                "OpenID Connect sign-in needs an allow-list: subjects, emails or a required claim"
                    .into(),
            );
        }
        if o.provider.client_id.is_empty() {
            return Err("OpenID Connect sign-in needs a client id".into());
        }
        if let Err(e) = o.provider.check() {
            let why = match e {
                purra_protocol::AuthError::Config(why) => why,
                other => other.to_string(),
            };
            return Err(format!("OpenID Connect sign-in: {why}"));
        }
        if let Some(uri) = &o.redirect_uri {
            let ok = http::Uri::try_from(uri.as_str()).is_ok_and(|u| {
                matches!(u.scheme_str(), Some("http" | "https"))
                    && u.path() == oidc::CALLBACK
                    && u.query().is_none()
            });
            if !ok {
                return Err(format!(
                    "the redirect URI {uri:?} must be an http(s) URL whose path is {}",
                    oidc::CALLBACK
                ));
            }
        }
        Ok(())
    }
}

/// The longest request body the page reads (forms are small).
const MAX_BODY: usize = 16 * 1024;
/// The longest note kept with a decision, in characters.
const MAX_NOTE: usize = 2000;
/// The longest reconciliation evidence, in characters.
const MAX_EVIDENCE: usize = 4000;
/// A comment on an idle live-update stream this often (and a check that its session still lives).
const KEEP_ALIVE: Duration = Duration::from_secs(15);

const SCRIPT: &str = include_str!("page.js");
const STYLE: &str = include_str!("page.css");
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

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
}

/// The cookies' names and their `Secure` attribute, plain or for a page reached over TLS.
struct Cookies {
    session: &'static str,
    login: &'static str,
    secure: &'static str,
}

impl Cookies {
    fn new(secure: bool) -> Cookies {
        if secure {
            Cookies {
                session: session::SECURE_COOKIE,
                login: oidc::SECURE_LOGIN_COOKIE,
                secure: "; Secure",
            }
        } else {
            Cookies {
                session: session::COOKIE,
                login: oidc::LOGIN_COOKIE,
                secure: "",
            }
        }
    }
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
            }),
        }
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
        axum::Router::new()
            .fallback(handle)
            .with_state(self.inner.clone())
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

/// The page's router for one connection: each request carries the peer's address
/// (`ConnectInfo`), as axum's own connect-info service would put it.
#[derive(Clone)]
struct WithPeer {
    router: axum::Router,
    peer: SocketAddr,
}

impl<B> tower_service::Service<http::Request<B>> for WithPeer
where
    axum::Router: tower_service::Service<http::Request<B>>,
{
    type Response = <axum::Router as tower_service::Service<http::Request<B>>>::Response;
    type Error = <axum::Router as tower_service::Service<http::Request<B>>>::Error;
    type Future = <axum::Router as tower_service::Service<http::Request<B>>>::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        tower_service::Service::<http::Request<B>>::poll_ready(&mut self.router, cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        req.extensions_mut().insert(ConnectInfo(self.peer));
        self.router.call(req)
    }
}

/// Who the request counts as for the per-client bounds: its connection's peer address.
fn client(parts: &Parts) -> IpAddr {
    throttle::client_of(
        parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0),
    )
}

async fn handle(State(page): State<Arc<Inner>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let mut resp = route(&page, &parts, body).await;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

async fn route(page: &Arc<Inner>, parts: &Parts, body: Body) -> Response {
    if let Err(e) = page.config.host_policy.check(&parts.uri, &parts.headers) {
        return refusal(parts, StatusCode::FORBIDDEN, &format!("refused: {e}"));
    }
    let path = parts.uri.path();
    let get = parts.method == Method::GET;
    let post = parts.method == Method::POST;
    match path {
        "/page.js" if get => asset(SCRIPT, "text/javascript; charset=utf-8"),
        "/page.css" if get => asset(STYLE, "text/css; charset=utf-8"),
        "/login" if get => login_page(page, StatusCode::OK, None),
        "/login" if post => login(page, parts, body).await,
        "/login/oidc" if get && page.config.oidc.is_some() => oidc_start(page, parts).await,
        oidc::CALLBACK if get && page.config.oidc.is_some() => oidc_callback(page, parts).await,
        "/logout" if post => logout(page, parts, body).await,
        "/" if get => whole(page, parts, View::Pending).await,
        "/history" if get => whole(page, parts, View::History).await,
        "/fragment/pending" if get => fragment(page, parts, View::Pending).await,
        "/fragment/history" if get => fragment(page, parts, View::History).await,
        "/events" if get => events(page, parts),
        _ if path.starts_with("/approvals/") && get => {
            one(page, parts, &path["/approvals/".len()..]).await
        }
        _ if path.starts_with("/approvals/") && post => {
            let rest = &path["/approvals/".len()..];
            match rest.rsplit_once('/') {
                Some((id, "decide")) if !id.is_empty() => decide(page, parts, body, id).await,
                Some((id, "reconcile")) if !id.is_empty() => reconcile(page, parts, body, id).await,
                _ => not_found(),
            }
        }
        "/login/oidc" | oidc::CALLBACK if page.config.oidc.is_some() => {
            text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed")
        }
        "/page.js" | "/page.css" | "/login" | "/logout" | "/" | "/history"
        | "/fragment/pending" | "/fragment/history" | "/events" => {
            text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed")
        }
        _ => not_found(),
    }
}

fn not_found() -> Response {
    text(StatusCode::NOT_FOUND, "not found")
}

fn text(status: StatusCode, body: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body.to_owned(),
    )
        .into_response()
}

fn html(status: StatusCode, body: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        body,
    )
        .into_response()
}

fn asset(body: &'static str, kind: &'static str) -> Response {
    ([(header::CONTENT_TYPE, kind)], body).into_response()
}

fn see_other(to: &'static str) -> Response {
    (StatusCode::SEE_OTHER, [(header::LOCATION, to)]).into_response()
}

/// Whether the client asked for JSON (the page's script does).
fn wants_json(parts: &Parts) -> bool {
    parts
        .headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/json"))
}

/// A refusal or an answer to a state-changing request: JSON `{ok, message}` for the script, a
/// small page for a form posted without it.
fn answer(parts: &Parts, status: StatusCode, message: &str) -> Response {
    if wants_json(parts) {
        let body = json!({"ok": status.is_success(), "message": message}).to_string();
        (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
    } else {
        let title = if status.is_success() {
            "Done"
        } else {
            "Refused"
        };
        html(status, render::message(title, message))
    }
}

fn refusal(parts: &Parts, status: StatusCode, message: &str) -> Response {
    answer(parts, status, message)
}

/// The session of the request's cookie, if it is live.
fn session(page: &Inner, parts: &Parts) -> Option<(String, Session)> {
    let id = session::cookie_session(&parts.headers, page.cookies.session)?;
    let s = page.sessions.get(&id)?;
    Some((id, s))
}

/// A state-changing request must come from the page itself: its `Origin`, when sent, is exactly
/// the page's own (`http://` or `https://` and the `Host` the request names), and a browser's
/// `Sec-Fetch-Site` says `same-origin` (or `none`: typed by the user).
fn same_origin(parts: &Parts) -> Result<(), &'static str> {
    if let Some(site) = parts.headers.get("sec-fetch-site") {
        if !matches!(site.to_str(), Ok("same-origin" | "none")) {
            return Err("refused: a cross-site request cannot change anything here");
        }
    }
    if let Some(origin) = parts.headers.get(header::ORIGIN) {
        let host = parts
            .headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        // `https://` too: behind a proxy that terminates TLS the page's origin is that.
        let own = |scheme: &str| format!("{scheme}://{host}");
        let origin = origin.to_str().unwrap_or("");
        if host.is_empty() || (origin != own("http") && origin != own("https")) {
            return Err("refused: the request does not come from this page's origin");
        }
    }
    Ok(())
}

/// Reads a form body (bounded) into its fields.
async fn form(body: Body) -> Result<Vec<(String, String)>, &'static str> {
    let bytes = axum::body::to_bytes(body, MAX_BODY)
        .await
        .map_err(|_| "refused: the form is too large")?;
    Ok(form_urlencoded::parse(&bytes).into_owned().collect())
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// The checks every state-changing request passes: same origin, a live session, its CSRF token.
async fn checked(
    page: &Inner,
    parts: &Parts,
    body: Body,
) -> Result<(String, Session, Vec<(String, String)>), Response> {
    same_origin(parts).map_err(|m| refusal(parts, StatusCode::FORBIDDEN, m))?;
    let Some((id, s)) = session(page, parts) else {
        return Err(refusal(
            parts,
            StatusCode::UNAUTHORIZED,
            "refused: sign in first (no session)",
        ));
    };
    let fields = form(body)
        .await
        .map_err(|m| refusal(parts, StatusCode::PAYLOAD_TOO_LARGE, m))?;
    let csrf_ok = field(&fields, "csrf").is_some_and(|t| session::same_secret(t, &s.csrf));
    if !csrf_ok {
        return Err(refusal(
            parts,
            StatusCode::FORBIDDEN,
            "refused: the form's CSRF token is missing or wrong (reload the page)",
        ));
    }
    Ok((id, s, fields))
}

/// The sign-in page with what this page offers, and `message` above it.
fn login_page(page: &Inner, status: StatusCode, message: Option<&str>) -> Response {
    let label = page.config.oidc.as_ref().map(|o| o.label.as_str());
    html(
        status,
        render::login(message, page.config.token_login, label),
    )
}

/// The session cookie of a new session for `approver` whose identity (what separation of duties
/// compares) is `identity`.
fn session_cookie(page: &Inner, approver: &str, identity: &str) -> Option<HeaderValue> {
    let id = page.sessions.open(approver, identity);
    let cookie = format!(
        "{}={id}; Path=/{}; HttpOnly; SameSite=Strict; Max-Age={}",
        page.cookies.session,
        page.cookies.secure,
        page.config.session_ttl.as_secs()
    );
    HeaderValue::from_str(&cookie).ok()
}

async fn login(page: &Inner, parts: &Parts, body: Body) -> Response {
    if !page.config.token_login {
        return login_page(
            page,
            StatusCode::FORBIDDEN,
            Some("Sign-in with an access token is turned off here."),
        );
    }
    if let Err(m) = same_origin(parts) {
        return login_page(page, StatusCode::FORBIDDEN, Some(m));
    }
    // An address backing off is refused before its token is even read: no answer tells it
    // whether a token it sends now is right.
    let client = client(parts);
    if let Err(wait) = page.throttle.check(client, Instant::now()) {
        let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        let secs = secs.max(1);
        let mut resp = login_page(
            page,
            StatusCode::TOO_MANY_REQUESTS,
            Some(&format!(
                "Too many wrong access tokens from your address: try again in {secs} s."
            )),
        );
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        return resp;
    }
    let fields = match form(body).await {
        Ok(f) => f,
        Err(m) => return login_page(page, StatusCode::PAYLOAD_TOO_LARGE, Some(m)),
    };
    let given = field(&fields, "token").unwrap_or("").trim();
    // Every token is compared, so the time taken does not tell which approver nearly matched.
    let mut found = None;
    for (approver, token) in &page.tokens {
        if session::same_secret(given, token) {
            found = Some(approver.clone());
        }
    }
    let Some(approver) = found else {
        page.throttle.failed(client, Instant::now());
        return login_page(
            page,
            StatusCode::UNAUTHORIZED,
            Some("That access token is not valid."),
        );
    };
    page.throttle.succeeded(client);
    let mut resp = see_other("/");
    // A token approver's identity is its name.
    if let Some(v) = session_cookie(page, &approver, &approver) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    resp
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

/// Starts a sign-in with the provider: remembers its `state`, `nonce` and PKCE verifier, bound to
/// this browser by a pre-login cookie, and sends the browser to the provider. A browser that
/// reached the page under another name than the callback's is first sent to that name, so the
/// cookie and the callback meet.
async fn oidc_start(page: &Inner, parts: &Parts) -> Response {
    let Some(redirect_uri) = page.redirect_uri.get() else {
        return login_page(
            page,
            StatusCode::SERVICE_UNAVAILABLE,
            Some("Sign-in with the provider is not ready: the page has no callback address."),
        );
    };
    let callback = redirect_uri.parse::<http::Uri>().ok();
    let own = callback
        .as_ref()
        .and_then(|u| u.authority())
        .map(|a| a.as_str());
    let host = parts
        .headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok());
    // Only for a callback on a loopback address (the page's own, typically): behind a proxy the
    // Host the page sees may differ from the public name by design, and sending the browser
    // there again would loop.
    let loopback = callback
        .as_ref()
        .and_then(|u| u.host())
        .is_some_and(|h| h == "127.0.0.1" || h == "[::1]" || h == "localhost");
    if let (Some(own), Some(u), true) = (own, &callback, loopback) {
        if host != Some(own) {
            let to = format!("{}://{own}/login/oidc", u.scheme_str().unwrap_or("http"));
            return redirect_to(&to);
        }
    }
    let provider = match page.provider().await {
        Ok(p) => p,
        Err(e) => {
            return login_page(
                page,
                StatusCode::SERVICE_UNAVAILABLE,
                Some(&format!("The sign-in provider cannot be used now: {e}")),
            )
        }
    };
    let (url, login) = provider.begin(redirect_uri);
    let browser = page.pending.start(login, client(parts));
    let mut resp = redirect_to(url.as_str());
    // Lax, not Strict: it must come back with the provider's redirect, a cross-site navigation.
    let cookie = format!(
        "{}={browser}; Path=/login{}; HttpOnly; SameSite=Lax; Max-Age={}",
        page.cookies.login,
        page.cookies.secure,
        oidc::LOGIN_TTL.as_secs()
    );
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    resp
}

fn redirect_to(to: &str) -> Response {
    match HeaderValue::from_str(to) {
        Ok(v) => (StatusCode::SEE_OTHER, [(header::LOCATION, v)]).into_response(),
        Err(_) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "a redirect that is not a URL",
        ),
    }
}

/// Ends a sign-in with the provider on the browser's side: its pre-login cookie goes.
fn clear_login_cookie(page: &Inner, mut resp: Response) -> Response {
    let clear = format!(
        "{}=; Path=/login{}; HttpOnly; SameSite=Lax; Max-Age=0",
        page.cookies.login, page.cookies.secure
    );
    if let Ok(v) = HeaderValue::from_str(&clear) {
        resp.headers_mut().append(header::SET_COOKIE, v);
    }
    resp
}

/// The provider's redirect back: the `state` must be a live sign-in started by this browser
/// (single use), the code is exchanged and the ID token checked, and the person must be on the
/// allow-list; then the same session as a token sign-in opens, in the person's name.
async fn oidc_callback(page: &Inner, parts: &Parts) -> Response {
    let Some(o) = &page.config.oidc else {
        return not_found();
    };
    let query: Vec<(String, String)> =
        form_urlencoded::parse(parts.uri.query().unwrap_or("").as_bytes())
            .into_owned()
            .collect();
    // The sign-in is over either way: the pre-login cookie goes.
    let refused = |status: StatusCode, message: &str| {
        clear_login_cookie(page, login_page(page, status, Some(message)))
    };
    let Some(state) = field(&query, "state") else {
        return refused(
            StatusCode::BAD_REQUEST,
            "Refused: the sign-in came back without its state.",
        );
    };
    let login = match page.pending.take(
        state,
        session::cookie(&parts.headers, page.cookies.login).as_deref(),
    ) {
        Ok(l) => l,
        Err(oidc::StateRefusal::Unknown) => {
            return refused(
                StatusCode::BAD_REQUEST,
                "Refused: this sign-in is unknown, expired or already used. Start again.",
            )
        }
        Err(oidc::StateRefusal::OtherBrowser) => {
            return refused(
                StatusCode::BAD_REQUEST,
                "Refused: this sign-in was not started in this browser. Start again.",
            )
        }
    };
    if let Some(error) = field(&query, "error") {
        let error: String = error.chars().filter(|c| !c.is_control()).take(64).collect();
        return refused(
            StatusCode::UNAUTHORIZED,
            &format!("The provider did not sign you in: {error}."),
        );
    }
    let Some(code) = field(&query, "code") else {
        return refused(
            StatusCode::BAD_REQUEST,
            "Refused: the sign-in came back without a code.",
        );
    };
    let provider = match page.provider().await {
        Ok(p) => p,
        Err(e) => {
            return refused(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("The sign-in provider cannot be used now: {e}"),
            )
        }
    };
    let who = match provider.finish(&login, code, field(&query, "iss")).await {
        Ok(who) => who,
        Err(e) => return refused(StatusCode::UNAUTHORIZED, &format!("Refused: {e}.")),
    };
    let approver = oidc::approver_name(&who);
    if !o.allow.admits(&who) {
        return refused(
            StatusCode::FORBIDDEN,
            &format!("Refused: {approver} may not approve here."),
        );
    }
    let mut resp = html(StatusCode::OK, render::signed_in(&approver));
    let identity = purra_core::principal_name(&who.issuer, &who.subject);
    if let Some(v) = session_cookie(page, &approver, &identity) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    clear_login_cookie(page, resp)
}

async fn logout(page: &Inner, parts: &Parts, body: Body) -> Response {
    match checked(page, parts, body).await {
        Ok((id, _, _)) => {
            page.sessions.close(&id);
            let mut resp = see_other("/login");
            let cookie = format!(
                "{}=; Path=/{}; HttpOnly; SameSite=Strict; Max-Age=0",
                page.cookies.session, page.cookies.secure
            );
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                resp.headers_mut().insert(header::SET_COOKIE, v);
            }
            resp
        }
        Err(resp) => resp,
    }
}

/// The cursor of the page a list request asks for: `?before=ID`, the approvals older than that
/// one (the first page without it). Other parameters are ignored.
fn before(parts: &Parts) -> Result<Option<ApprovalId>, &'static str> {
    let query = parts.uri.query().unwrap_or("");
    let Some((_, id)) = form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == "before")
    else {
        return Ok(None);
    };
    let id = ApprovalId(id.into_owned());
    if purra_core::stored::approval_seq(&id).is_none() {
        return Err("bad request: before must be an approval id such as approval-12");
    }
    Ok(Some(id))
}

/// A page size of the configuration, as a listing's limit.
fn page_size(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(MAX_PAGE).clamp(1, MAX_PAGE)
}

/// One page of `view` before `before`: the newest first, one page at a time (never the whole
/// store). Pending approvals with how many there are in all and how many follow (counted through
/// the store's index of pending approvals); decided ones with their trails and whether older ones
/// follow (one approval read past the page).
async fn listing(
    page: &Inner,
    view: View,
    before: Option<ApprovalId>,
) -> Result<Listing, StoreError> {
    let store = &page.store;
    let paged = before.is_some();
    let (query, limit) = match view {
        View::Pending => (
            ApprovalQuery::all().status(ApprovalStatus::Pending),
            page.config.pending_page,
        ),
        View::History => (ApprovalQuery::all().decided(), page.config.history_limit),
    };
    let mut query = query.newest_first().limit(page_size(limit));
    if let Some(id) = before {
        query = query.before(id);
    }
    let read = store.approval_page(query.clone()).await?;
    let mut items = Vec::with_capacity(read.approvals.len());
    for view_of in read.approvals {
        let (trail, run) = match view {
            View::Pending => (
                Vec::new(),
                store
                    .load_suspended(view_of.request.intent.run_id.clone())
                    .await?,
            ),
            View::History => (store.approval_audit(view_of.id.clone()).await?, None),
        };
        items.push(Item {
            view: view_of,
            trail,
            run,
        });
    }
    let (more, total) = match view {
        View::History => (None, None),
        View::Pending => {
            let more = match &read.next {
                Some(next) => store.count_approvals(query.continued(next.clone())).await?,
                None => 0,
            };
            let total = if paged {
                store
                    .count_approvals(ApprovalQuery::all().status(ApprovalStatus::Pending))
                    .await?
            } else {
                items.len() as u64 + more
            };
            (Some(more), Some(total))
        }
    };
    Ok(Listing {
        items,
        total,
        more,
        next: read.next,
        paged,
    })
}

async fn list_html(
    page: &Inner,
    parts: &Parts,
    view: View,
    csrf: &str,
) -> Result<String, Response> {
    let before = before(parts).map_err(|m| text(StatusCode::BAD_REQUEST, m))?;
    match listing(page, view, before).await {
        Ok(listing) => Ok(render::list(view, &listing, csrf, SystemTime::now())),
        Err(e) => Err(text(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!("the store could not be read: {e}"),
        )),
    }
}

async fn whole(page: &Inner, parts: &Parts, view: View) -> Response {
    let Some((_, s)) = session(page, parts) else {
        return see_other("/login");
    };
    match list_html(page, parts, view, &s.csrf).await {
        Ok(list) => {
            let main = format!(
                "<div id=\"list\">{list}</div><form method=\"post\" action=\"/logout\" class=\"logout\">\
                 <input type=\"hidden\" name=\"csrf\" value=\"{}\"><button type=\"submit\">Sign out</button></form>",
                render::esc(&s.csrf)
            );
            let title = match view {
                View::Pending => "Pending",
                View::History => "History",
            };
            html(
                StatusCode::OK,
                render::layout(title, Some(view), Some(&s.approver), &main),
            )
        }
        Err(resp) => resp,
    }
}

/// One approval's page (`/approvals/ID`): where webhook events link. 404 for an id that is not
/// an approval's.
async fn one(page: &Inner, parts: &Parts, id: &str) -> Response {
    let Some((_, s)) = session(page, parts) else {
        return see_other("/login");
    };
    let id = ApprovalId(id.to_owned());
    let found = match page.store.approval(id.clone()).await {
        Ok(found) => found,
        Err(e) => {
            return text(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("the store could not be read: {e}"),
            )
        }
    };
    let Some(view) = found else {
        return text(StatusCode::NOT_FOUND, "no such approval");
    };
    let read = if view.state == purra_core::ApprovalState::Prepared {
        page.store
            .load_suspended(view.request.intent.run_id.clone())
            .await
            .map(|run| (Vec::new(), run))
    } else {
        page.store
            .approval_audit(id.clone())
            .await
            .map(|trail| (trail, None))
    };
    let (trail, run) = {
        match read {
            Ok(read) => read,
            Err(e) => {
                return text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &format!("the store could not be read: {e}"),
                )
            }
        }
    };
    let body = render::one(
        &render::Item { view, trail, run },
        &s.csrf,
        SystemTime::now(),
    );
    let main = format!(
        "<div id=\"approval\">{body}</div><form method=\"post\" action=\"/logout\" class=\"logout\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{}\"><button type=\"submit\">Sign out</button></form>",
        render::esc(&s.csrf)
    );
    html(
        StatusCode::OK,
        render::layout(&id.0, None, Some(&s.approver), &main),
    )
}

async fn fragment(page: &Inner, parts: &Parts, view: View) -> Response {
    let Some((_, s)) = session(page, parts) else {
        return text(StatusCode::UNAUTHORIZED, "sign in first (no session)");
    };
    match list_html(page, parts, view, &s.csrf).await {
        Ok(list) => html(StatusCode::OK, list),
        Err(resp) => resp,
    }
}

/// Server-sent events: one `change` event per store event (its name, or `resync`); the script
/// re-reads the list on each. Ends the moment the session ends (logout, expiry, closed to make
/// room) or the page stops.
fn events(page: &Arc<Inner>, parts: &Parts) -> Response {
    let Some((sid, s)) = session(page, parts) else {
        return text(StatusCode::UNAUTHORIZED, "sign in first (no session)");
    };
    let Ok(permit) = page.streams.clone().try_acquire_owned() else {
        return text(
            StatusCode::SERVICE_UNAVAILABLE,
            "too many live-update streams are open",
        );
    };
    let expires = s.expires.map(tokio::time::Instant::from_std);
    let state = (page.store.subscribe(), page.clone(), sid, s.ended, permit);
    let stream = futures_util::stream::unfold(
        state,
        move |(mut events, page, sid, ended, permit)| async move {
            let expiry = async move {
                match expires {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            let event = tokio::select! {
                // The session's end wins over an event ready at the same time.
                biased;
                () = page.stop.cancelled() => return None,
                () = ended.cancelled() => return None,
                () = expiry => return None,
                e = events.next() => match e {
                    Some(e) => Event::default().event("change").data(e.to_string()),
                    None => return None,
                },
                () = tokio::time::sleep(KEEP_ALIVE) => {
                    page.sessions.get(&sid)?;
                    Event::default().comment("keep-alive")
                }
            };
            Some((
                Ok::<_, Infallible>(event),
                (events, page, sid, ended, permit),
            ))
        },
    );
    Sse::new(stream).into_response()
}

async fn decide(page: &Inner, parts: &Parts, body: Body, id: &str) -> Response {
    let (_, s, fields) = match checked(page, parts, body).await {
        Ok(c) => c,
        Err(resp) => return resp,
    };
    let verdict = match field(&fields, "verdict") {
        Some("approve") => Verdict::Approve,
        Some("deny") => Verdict::Deny,
        _ => {
            return answer(
                parts,
                StatusCode::BAD_REQUEST,
                "refused: the verdict must be approve or deny",
            )
        }
    };
    let note = field(&fields, "note").map(str::trim).unwrap_or("");
    if note.chars().count() > MAX_NOTE {
        return answer(
            parts,
            StatusCode::BAD_REQUEST,
            &format!("refused: a note is at most {MAX_NOTE} characters"),
        );
    }
    let aid = ApprovalId(id.to_owned());
    match view(page, parts, id).await {
        Ok(v) if v.state != ApprovalState::Prepared => {
            return answer(parts, StatusCode::CONFLICT, &already(&v))
        }
        // Separation of duties: the signed-in approver must not be the principal that asked.
        Ok(v) => {
            if let Err(refused) = v.request.check_decider(&s.identity) {
                return answer(
                    parts,
                    StatusCode::FORBIDDEN,
                    &format!("refused: {id}: {refused}"),
                );
            }
        }
        Err(resp) => return resp,
    }
    let now = SystemTime::now();
    let decision = Decision {
        verdict,
        approver: purra_core::DecisionPath::Page.approver(&s.approver),
        decided_at: now,
        expires_at: (verdict == Verdict::Approve).then(|| now + page.config.approval_ttl),
        note: (!note.is_empty()).then(|| note.to_owned()),
    };
    match (page.decide)(aid.clone(), decision).await {
        Ok(()) => {
            let word = match verdict {
                Verdict::Approve => "approved",
                Verdict::Deny => "denied",
            };
            let message = format!("{id} {word} by {}", s.approver);
            if wants_json(parts) {
                answer(parts, StatusCode::OK, &message)
            } else {
                see_other("/")
            }
        }
        // Another decision won the race since the state was read.
        Err(StoreError::Conflict("already decided")) => match page.store.approval(aid).await {
            Ok(Some(v)) => answer(parts, StatusCode::CONFLICT, &already(&v)),
            _ => answer(
                parts,
                StatusCode::CONFLICT,
                &format!("conflict: {id} was already decided"),
            ),
        },
        Err(StoreError::Conflict(why)) => answer(
            parts,
            StatusCode::CONFLICT,
            &format!("conflict: {id}: {why}"),
        ),
        Err(e) => store_failed(parts, &e),
    }
}

/// The approval `id`, or the answer saying it is unknown (404) or unreadable (503).
async fn view(page: &Inner, parts: &Parts, id: &str) -> Result<ApprovalView, Response> {
    match page.store.approval(ApprovalId(id.to_owned())).await {
        Ok(Some(v)) => Ok(v),
        Ok(None) => Err(answer(
            parts,
            StatusCode::NOT_FOUND,
            &format!("unknown approval id: {id}"),
        )),
        Err(e) => Err(store_failed(parts, &e)),
    }
}

/// The conflict message for a decided approval: who decided it and how.
fn already(v: &ApprovalView) -> String {
    match render::decision(&v.state) {
        Some(d) => {
            let word = match d.verdict {
                Verdict::Approve => "approved",
                Verdict::Deny => "denied",
            };
            format!(
                "conflict: {} was already decided: {word} by {} ({})",
                v.id.0,
                d.approver,
                v.status()
            )
        }
        None => format!("conflict: {} was already decided", v.id.0),
    }
}

fn store_failed(parts: &Parts, e: &StoreError) -> Response {
    answer(
        parts,
        StatusCode::SERVICE_UNAVAILABLE,
        &format!("the store failed: {e}"),
    )
}

async fn reconcile(page: &Inner, parts: &Parts, body: Body, id: &str) -> Response {
    let (_, s, fields) = match checked(page, parts, body).await {
        Ok(c) => c,
        Err(resp) => return resp,
    };
    let evidence = field(&fields, "evidence").map(str::trim).unwrap_or("");
    if evidence.is_empty() || evidence.chars().count() > MAX_EVIDENCE {
        return answer(
            parts,
            StatusCode::BAD_REQUEST,
            &format!("refused: a reconciliation needs evidence (1 to {MAX_EVIDENCE} characters)"),
        );
    }
    let view = match view(page, parts, id).await {
        Ok(v) => v,
        Err(resp) => return resp,
    };
    let outcome = match field(&fields, "outcome") {
        Some("committed") => EffectOutcome::Committed {
            receipt: json!({"reconciled": {"by": s.approver, "evidence": evidence}}),
        },
        Some("not_started") => EffectOutcome::NotStarted,
        _ => {
            return answer(
                parts,
                StatusCode::BAD_REQUEST,
                "refused: the outcome must be committed or not_started",
            )
        }
    };
    let Some(claim) = view.claim else {
        return answer(
            parts,
            StatusCode::CONFLICT,
            &format!("conflict: {id} was never dispatched; there is nothing to reconcile"),
        );
    };
    // The audit log keeps who reconciled, with their evidence.
    let recorded = format!("{} (on the approver page): {evidence}", s.approver);
    match page
        .store
        .reconcile_unknown(claim.key, recorded, outcome)
        .await
    {
        Ok(()) => {
            let message = format!("{id} reconciled by {}", s.approver);
            if wants_json(parts) {
                answer(parts, StatusCode::OK, &message)
            } else {
                see_other("/history")
            }
        }
        Err(StoreError::Conflict(why)) => answer(
            parts,
            StatusCode::CONFLICT,
            &format!("conflict: {id}: {why}"),
        ),
        Err(e) => store_failed(parts, &e),
    }
}
