//! Per-user OAuth connections to remote MCP servers (`[upstreams.ID.auth] mode = "oauth"`): the
//! page's connect flow ([`Connections`]: `/connect/ID`, authorization code with PKCE at the
//! upstream's own authorization server, found and registered the way purra's OAuth client does)
//! and the gateway's side of each call ([`Connector`]: the principal's access token, refreshed
//! when it expires, the rotated tokens stored with compare-and-swap).
//!
//! A connection is one credential record at (principal, upstream, [`CONNECTION`]), kind `oauth`,
//! sealed with the gateway's keyring: its JSON ([`Connection`]) holds the access and refresh
//! tokens, the access token's expiry, the token endpoint and the client; the record's metadata
//! holds the issuer, the scopes, the token's `sub` and the expiry (what the page and `purra
//! credentials list` show). No token ever reaches a log line, an error text or the page.
//!
//! Refreshing in a fleet: a refresh token is used once (the authorization server rotates it, and
//! one used twice may revoke the whole grant), so an instance first claims the refresh by
//! writing a lease into the record with compare-and-swap; only the winner goes to the token
//! endpoint, the others wait for the record to change and use the winner's tokens. A lease left
//! by an instance that died expires ([`LEASE`]) and is taken over.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use purra_core::vault::{Keyring, Secret};
use purra_core::{
    CredentialFilter, CredentialInfo, CredentialKey, CredentialKind, CredentialMeta,
    CredentialStore, CredentialWrite,
};
use purra_protocol::auth::{
    AuthorizationRequest, AuthorizationResponse, Authorizer, BoxFuture, ClientRegistration,
    MemoryTokenStore, OAuthClient, OAuthConfig, StoredAuth, TokenStore, UrlPolicy,
};
use purra_protocol::http::{AuthChallenge, HttpAuth};
use purra_protocol::AuthError;
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

/// The credential name a connection is stored under.
pub const CONNECTION: &str = "oauth";
/// How long an instance's claim to refresh a connection holds before another may take it over.
pub const LEASE: Duration = Duration::from_secs(30);
/// How long a started connection waits for the browser to come back.
pub const PENDING_TTL: Duration = Duration::from_secs(600);
/// The most connections being made at once (the oldest is dropped to make room).
pub const MAX_PENDING: usize = 256;
/// The bound on a token or revocation endpoint's answer.
const MAX_BODY: usize = 64 * 1024;

/// One upstream a principal may connect to: its MCP URL and how purra registers there.
#[derive(Clone)]
#[non_exhaustive]
pub struct OAuthUpstream {
    /// The upstream's id (`[upstreams.ID]`).
    pub id: String,
    /// The upstream's MCP endpoint (the protected resource).
    pub url: String,
    /// A pre-registered client id (without one: a client ID metadata document or dynamic
    /// registration).
    pub client_id: Option<String>,
    /// The pre-registered client's secret (sent only to `authorization_server`).
    pub client_secret: Option<String>,
    /// The authorization server the configured client belongs to (its issuer).
    pub authorization_server: Option<String>,
    /// The scopes to ask for (none: what the upstream's challenge or metadata names).
    pub scopes: Vec<String>,
    /// Whether the upstream and its authorization server may be on loopback addresses (tests,
    /// a local upstream); off by default.
    pub allow_loopback: bool,
}

impl fmt::Debug for OAuthUpstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthUpstream")
            .field("id", &self.id)
            .field("url", &self.url)
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("authorization_server", &self.authorization_server)
            .field("scopes", &self.scopes)
            .field("allow_loopback", &self.allow_loopback)
            .finish()
    }
}

impl OAuthUpstream {
    /// The upstream `id` at `url`, registered dynamically (or by metadata document).
    pub fn new(id: impl Into<String>, url: impl Into<String>) -> OAuthUpstream {
        OAuthUpstream {
            id: id.into(),
            url: url.into(),
            client_id: None,
            client_secret: None,
            authorization_server: None,
            scopes: Vec::new(),
            allow_loopback: false,
        }
    }

    /// A pre-registered client of `issuer` (with its secret, for a confidential one).
    pub fn client(
        mut self,
        issuer: impl Into<String>,
        id: impl Into<String>,
        secret: Option<String>,
    ) -> OAuthUpstream {
        self.authorization_server = Some(issuer.into());
        self.client_id = Some(id.into());
        self.client_secret = secret;
        self
    }

    /// The scopes to ask for.
    pub fn scopes<I: IntoIterator<Item = S>, S: Into<String>>(
        mut self,
        scopes: I,
    ) -> OAuthUpstream {
        self.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// Allows loopback addresses for the upstream and its authorization server.
    pub fn allow_loopback(mut self, yes: bool) -> OAuthUpstream {
        self.allow_loopback = yes;
        self
    }

    fn policy(&self) -> UrlPolicy {
        UrlPolicy::strict().allow_loopback(self.allow_loopback)
    }
}

/// What the page's connect flow needs: its own public URL (the callback is
/// `{page_url}/connect/ID/callback`), the upstreams, and where connections are kept.
#[derive(Clone)]
#[non_exhaustive]
pub struct ConnectConfig {
    /// The page's URL as browsers reach it, without a trailing slash.
    pub page_url: String,
    /// The upstreams principals may connect to.
    pub upstreams: Vec<OAuthUpstream>,
    /// Where connections are stored.
    pub store: Arc<dyn CredentialStore>,
    /// The gateway's keyring (seals and opens connections).
    pub keys: Arc<Keyring>,
}

impl fmt::Debug for ConnectConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectConfig")
            .field("page_url", &self.page_url)
            .field("upstreams", &self.upstreams)
            .finish_non_exhaustive()
    }
}

impl ConnectConfig {
    /// Connections to `upstreams` through the page at `page_url`, kept in `store` sealed with
    /// `keys`.
    pub fn new(
        page_url: impl Into<String>,
        upstreams: Vec<OAuthUpstream>,
        store: Arc<dyn CredentialStore>,
        keys: Arc<Keyring>,
    ) -> ConnectConfig {
        ConnectConfig {
            page_url: page_url.into().trim_end_matches('/').to_owned(),
            upstreams,
            store,
            keys,
        }
    }
}

/// The connect URL of `upstream` on the page at `page_url`.
pub fn connect_url(page_url: &str, upstream: &str) -> String {
    format!("{}/connect/{upstream}", page_url.trim_end_matches('/'))
}

/// The sealed part of a connection. `Debug` shows no token.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Connection {
    /// The access token.
    pub access_token: String,
    /// The refresh token, when the authorization server issued one.
    #[serde(default)]
    pub refresh_token: Option<String>,
    /// When the access token expires (seconds since the Unix epoch).
    #[serde(default)]
    pub expires_at: Option<u64>,
    /// The token endpoint (refresh needs no discovery).
    pub token_endpoint: String,
    /// The revocation endpoint (RFC 7009), when the authorization server offers one.
    #[serde(default)]
    pub revocation_endpoint: Option<String>,
    /// The client id.
    pub client_id: String,
    /// The client secret of a confidential client.
    #[serde(default)]
    pub client_secret: Option<String>,
    /// How the client authenticates at the token endpoint (`none`, `client_secret_basic`,
    /// `client_secret_post`).
    #[serde(default)]
    pub auth_method: Option<String>,
    /// Until when (seconds since the Unix epoch) an instance holds the claim to refresh it.
    #[serde(default)]
    pub lease_until: Option<u64>,
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("expires_at", &self.expires_at)
            .field("token_endpoint", &self.token_endpoint)
            .field("client_id", &self.client_id)
            .field("lease_until", &self.lease_until)
            .finish_non_exhaustive()
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn at_secs(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

/// `sub` of a JWT access token, read without checking it (it only labels the receipt).
pub fn token_subject(jwt: &str) -> Option<String> {
    purra_protocol::auth::unverified_jwt_claims(jwt)?["sub"]
        .as_str()
        .map(str::to_owned)
}

/// Why a connection cannot be used; the text names no token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConnectError {
    /// The principal has no (more) connection: the text names the connect URL.
    Missing(String),
    /// The connection cannot be used now (the store or the authorization server failed).
    Unavailable(String),
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectError::Missing(t) | ConnectError::Unavailable(t) => f.write_str(t),
        }
    }
}

impl std::error::Error for ConnectError {}

/// An access token to send, and who it names.
#[derive(Clone)]
pub struct Access {
    /// The access token.
    pub token: String,
    /// Its `sub` (from the record's metadata).
    pub subject: Option<String>,
}

impl fmt::Debug for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Access")
            .field("subject", &self.subject)
            .finish_non_exhaustive()
    }
}

enum RefreshFailure {
    /// The authorization server refused the refresh token (revoked, expired, reused).
    Refused(String),
    /// It could not be asked, or failed otherwise.
    Unavailable(String),
}

fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(30))
        .build()
        .expect("an HTTP client")
}

async fn bounded_body(resp: reqwest::Response) -> Result<Vec<u8>, String> {
    if resp.content_length().is_some_and(|n| n > MAX_BODY as u64) {
        return Err("the answer is too large".into());
    }
    let mut resp = resp;
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| e.to_string())? {
        if body.len() + chunk.len() > MAX_BODY {
            return Err("the answer is too large".into());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Adds the client's authentication to a token or revocation request.
fn client_auth(
    rb: reqwest::RequestBuilder,
    conn: &Connection,
    form: &mut Vec<(&'static str, String)>,
) -> reqwest::RequestBuilder {
    match (conn.auth_method.as_deref(), &conn.client_secret) {
        (Some("client_secret_post"), Some(secret)) => {
            form.push(("client_id", conn.client_id.clone()));
            form.push(("client_secret", secret.clone()));
            rb
        }
        (_, Some(secret)) => rb.basic_auth(
            form_urlencoded::byte_serialize(conn.client_id.as_bytes()).collect::<String>(),
            Some(form_urlencoded::byte_serialize(secret.as_bytes()).collect::<String>()),
        ),
        (_, None) => {
            form.push(("client_id", conn.client_id.clone()));
            rb
        }
    }
}

fn encode(form: &[(&str, String)]) -> String {
    let mut s = form_urlencoded::Serializer::new(String::new());
    for (k, v) in form {
        s.append_pair(k, v);
    }
    s.finish()
}

/// Refreshes `conn` at its token endpoint: the new connection (the old refresh token kept when
/// no new one came), and the scope granted.
async fn refresh(
    http: &reqwest::Client,
    conn: &Connection,
) -> Result<(Connection, Option<String>), RefreshFailure> {
    let Some(refresh_token) = &conn.refresh_token else {
        return Err(RefreshFailure::Refused(
            "the connection has no refresh token".into(),
        ));
    };
    let mut form = vec![
        ("grant_type", "refresh_token".to_owned()),
        ("refresh_token", refresh_token.clone()),
    ];
    let rb = client_auth(http.post(&conn.token_endpoint), conn, &mut form);
    let resp = rb
        .header("content-type", "application/x-www-form-urlencoded")
        .header("accept", "application/json")
        .body(encode(&form))
        .send()
        .await
        .map_err(|e| {
            RefreshFailure::Unavailable(format!("the token endpoint cannot be reached: {e}"))
        })?;
    let status = resp.status();
    let body = bounded_body(resp)
        .await
        .map_err(|e| RefreshFailure::Unavailable(format!("the token endpoint: {e}")))?;
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    if !status.is_success() {
        let error = json["error"]
            .as_str()
            .unwrap_or("")
            .chars()
            .take(64)
            .collect::<String>();
        let why = format!(
            "the authorization server refused the refresh (HTTP {}{}{error})",
            status.as_u16(),
            if error.is_empty() { "" } else { ": " }
        );
        return Err(
            if matches!(
                error.as_str(),
                "invalid_grant" | "invalid_client" | "unauthorized_client"
            ) {
                RefreshFailure::Refused(why)
            } else {
                RefreshFailure::Unavailable(why)
            },
        );
    }
    let Some(access) = json["access_token"].as_str() else {
        return Err(RefreshFailure::Unavailable(
            "the token endpoint's answer has no access_token".into(),
        ));
    };
    let mut next = conn.clone();
    next.access_token = access.to_owned();
    if let Some(r) = json["refresh_token"].as_str() {
        next.refresh_token = Some(r.to_owned());
    }
    next.expires_at = json["expires_in"].as_u64().map(|s| now_secs() + s);
    next.lease_until = None;
    Ok((next, json["scope"].as_str().map(str::to_owned)))
}

fn seal(
    keys: &Keyring,
    key: &CredentialKey,
    conn: &Connection,
    meta: CredentialMeta,
) -> Result<CredentialWrite, String> {
    let json = serde_json::to_vec(conn).map_err(|e| e.to_string())?;
    let sealed = keys
        .seal(key, CredentialKind::OAuth, &Secret::new(json))
        .map_err(|e| e.to_string())?;
    Ok(CredentialWrite {
        kind: CredentialKind::OAuth,
        sealed,
        meta,
        at: SystemTime::now(),
    })
}

/// A connection as read from the store.
struct Loaded {
    conn: Connection,
    meta: CredentialMeta,
    version: u64,
}

async fn load(
    store: &dyn CredentialStore,
    keys: &Keyring,
    key: &CredentialKey,
) -> Result<Option<Loaded>, String> {
    let Some(record) = store
        .credential(key.clone())
        .await
        .map_err(|e| format!("the store failed: {e}"))?
    else {
        return Ok(None);
    };
    if record.info.kind != CredentialKind::OAuth {
        return Err(format!("the credential {key} is not an OAuth connection"));
    }
    let plain = keys
        .open(key, CredentialKind::OAuth, &record.sealed)
        .map_err(|e| e.to_string())?;
    let conn: Connection = serde_json::from_slice(plain.expose())
        .map_err(|_| format!("the credential {key} is not a readable OAuth connection"))?;
    Ok(Some(Loaded {
        conn,
        meta: record.info.meta,
        version: record.info.version,
    }))
}

/// Revokes `conn`'s refresh token (or else its access token) at its authorization server
/// (RFC 7009), when it has a revocation endpoint. Errors are reported, never fatal to the
/// local revocation.
async fn revoke_at_server(http: &reqwest::Client, conn: &Connection) -> Result<bool, String> {
    let Some(endpoint) = &conn.revocation_endpoint else {
        return Ok(false);
    };
    let (token, hint) = match &conn.refresh_token {
        Some(r) => (r.clone(), "refresh_token"),
        None => (conn.access_token.clone(), "access_token"),
    };
    let mut form = vec![("token", token), ("token_type_hint", hint.to_owned())];
    let rb = client_auth(http.post(endpoint), conn, &mut form);
    let resp = rb
        .header("content-type", "application/x-www-form-urlencoded")
        .body(encode(&form))
        .send()
        .await
        .map_err(|e| format!("the revocation endpoint cannot be reached: {e}"))?;
    if resp.status().is_success() {
        Ok(true)
    } else {
        Err(format!(
            "the revocation endpoint answered HTTP {}",
            resp.status().as_u16()
        ))
    }
}

/// The gateway's side of one `oauth` upstream: each principal's access token from its stored
/// connection, refreshed when it expires (or the upstream refused it), safely across instances
/// sharing one store.
pub struct Connector {
    upstream: String,
    connect_url: String,
    store: Arc<dyn CredentialStore>,
    keys: Arc<Keyring>,
    http: reqwest::Client,
    refresh_before: Duration,
    refreshes: AtomicU64,
    /// Each principal's `sub` at the upstream, as last seen (for receipts).
    subjects: Mutex<HashMap<String, String>>,
    /// When each principal's use was last recorded (`last_used_at` is written at most once a
    /// minute per principal, not at every request).
    touched: Mutex<HashMap<String, Instant>>,
}

/// How often a connection's `last_used_at` is written while it is used.
const TOUCH_EVERY: Duration = Duration::from_secs(60);

/// The most principals whose `sub` a [`Connector`] remembers.
const MAX_SUBJECTS: usize = 10_000;

impl fmt::Debug for Connector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connector")
            .field("upstream", &self.upstream)
            .field("connect_url", &self.connect_url)
            .finish_non_exhaustive()
    }
}

impl Connector {
    /// The connections to `upstream` in `store` (sealed with `keys`); a principal without one
    /// is sent to `{page_url}/connect/{upstream}`.
    pub fn new(
        upstream: &str,
        page_url: &str,
        store: Arc<dyn CredentialStore>,
        keys: Arc<Keyring>,
    ) -> Connector {
        Connector {
            upstream: upstream.to_owned(),
            connect_url: connect_url(page_url, upstream),
            store,
            keys,
            http: http_client(),
            refresh_before: Duration::from_secs(30),
            refreshes: AtomicU64::new(0),
            subjects: Mutex::new(HashMap::new()),
            touched: Mutex::new(HashMap::new()),
        }
    }

    fn due_for_touch(&self, principal: &str) -> bool {
        let mut touched = self.touched.lock().unwrap_or_else(|p| p.into_inner());
        if touched
            .get(principal)
            .is_some_and(|at| at.elapsed() < TOUCH_EVERY)
        {
            return false;
        }
        if touched.len() >= MAX_SUBJECTS {
            touched.retain(|_, at| at.elapsed() < TOUCH_EVERY);
            if touched.len() >= MAX_SUBJECTS {
                touched.clear();
            }
        }
        touched.insert(principal.to_owned(), Instant::now());
        true
    }

    /// `principal`'s `sub` at the upstream as its last access token named it (`None` before
    /// its first call through this instance, or for an opaque token).
    pub fn called_as(&self, principal: &str) -> Option<String> {
        self.subjects
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(principal)
            .cloned()
    }

    fn remember(&self, principal: &str, access: &Access) {
        if let Some(sub) = &access.subject {
            let mut subjects = self.subjects.lock().unwrap_or_else(|p| p.into_inner());
            if subjects.len() >= MAX_SUBJECTS && !subjects.contains_key(principal) {
                subjects.clear();
            }
            subjects.insert(principal.to_owned(), sub.clone());
        }
    }

    /// Refreshes an access token this long before it expires (default 30 s).
    pub fn refresh_before(mut self, d: Duration) -> Connector {
        self.refresh_before = d;
        self
    }

    /// Where a principal connects.
    pub fn connect_url(&self) -> &str {
        &self.connect_url
    }

    /// How many refreshes this instance made at the token endpoint.
    pub fn refreshes(&self) -> u64 {
        self.refreshes.load(Ordering::Relaxed)
    }

    fn missing_text(&self, principal: &str, again: bool) -> String {
        format!(
            "{principal} {} upstream {:?}: connect{} at {}",
            if again {
                "must connect again to"
            } else {
                "has no connection to"
            },
            self.upstream,
            if again { " again" } else { "" },
            self.connect_url
        )
    }

    /// `principal`'s access token: the stored one while it is fresh; else (or when it is
    /// `refused`, the token the upstream just refused) a refreshed one. A refresh the
    /// authorization server refuses deletes the connection: [`ConnectError::Missing`], naming
    /// the connect URL.
    pub async fn access(
        &self,
        principal: &str,
        refused: Option<&str>,
    ) -> Result<Access, ConnectError> {
        let access = self.access_inner(principal, refused).await?;
        self.remember(principal, &access);
        Ok(access)
    }

    async fn access_inner(
        &self,
        principal: &str,
        refused: Option<&str>,
    ) -> Result<Access, ConnectError> {
        let key = CredentialKey::new(principal, &self.upstream, CONNECTION);
        key.check()
            .map_err(|e| ConnectError::Unavailable(e.to_string()))?;
        let deadline = Instant::now() + LEASE + Duration::from_secs(5);
        let mut wait = Duration::from_millis(20);
        loop {
            let Some(l) = load(&*self.store, &self.keys, &key)
                .await
                .map_err(ConnectError::Unavailable)?
            else {
                return Err(ConnectError::Missing(self.missing_text(principal, false)));
            };
            let now = now_secs();
            let due = l
                .conn
                .expires_at
                .is_some_and(|at| now + self.refresh_before.as_secs() >= at)
                || refused
                    .is_some_and(|r| purra_protocol::auth::same_secret(r, &l.conn.access_token));
            if !due {
                if self.due_for_touch(principal) {
                    let _ = self.store.touch_credential(key, SystemTime::now()).await;
                }
                return Ok(Access {
                    token: l.conn.access_token,
                    subject: l.meta.subject,
                });
            }
            if Instant::now() > deadline {
                return Err(ConnectError::Unavailable(format!(
                    "the connection of {principal} to upstream {:?} is being refreshed elsewhere \
                     and did not change in time",
                    self.upstream
                )));
            }
            if l.conn.lease_until.is_some_and(|until| until > now) {
                // Another instance is refreshing: wait for its tokens.
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_millis(500));
                continue;
            }
            // Claim the refresh.
            let mut claim = l.conn.clone();
            claim.lease_until = Some(now + LEASE.as_secs());
            let write = seal(&self.keys, &key, &claim, l.meta.clone())
                .map_err(ConnectError::Unavailable)?;
            let won = self
                .store
                .replace_credential_if_version(key.clone(), l.version, write)
                .await
                .map_err(|e| ConnectError::Unavailable(format!("the store failed: {e}")))?;
            if !won {
                continue;
            }
            let claimed = l.version + 1;
            self.refreshes.fetch_add(1, Ordering::Relaxed);
            match refresh(&self.http, &l.conn).await {
                Ok((next, scope)) => {
                    let mut meta = l.meta.clone();
                    meta.expires_at = next.expires_at.map(at_secs);
                    if let Some(s) = token_subject(&next.access_token) {
                        meta.subject = Some(s);
                    }
                    if scope.is_some() {
                        meta.scopes = scope;
                    }
                    let write = seal(&self.keys, &key, &next, meta.clone())
                        .map_err(ConnectError::Unavailable)?;
                    let stored = self
                        .store
                        .replace_credential_if_version(key.clone(), claimed, write)
                        .await
                        .map_err(|e| ConnectError::Unavailable(format!("the store failed: {e}")))?;
                    if !stored {
                        // The lease ran out and another instance took over: use its tokens.
                        continue;
                    }
                    return Ok(Access {
                        token: next.access_token,
                        subject: meta.subject,
                    });
                }
                Err(RefreshFailure::Refused(why)) => {
                    // Revoked (or expired) at the authorization server: the connection is gone.
                    if let Ok(Some(now)) = load(&*self.store, &self.keys, &key).await {
                        if now.version == claimed {
                            let _ = self.store.delete_credential(key.clone()).await;
                        } else {
                            continue;
                        }
                    }
                    return Err(ConnectError::Missing(format!(
                        "{} ({why})",
                        self.missing_text(principal, true)
                    )));
                }
                Err(RefreshFailure::Unavailable(why)) => {
                    // Give the claim back so the next call may try again at once.
                    let mut back = l.conn.clone();
                    back.lease_until = None;
                    if let Ok(write) = seal(&self.keys, &key, &back, l.meta.clone()) {
                        let _ = self
                            .store
                            .replace_credential_if_version(key.clone(), claimed, write)
                            .await;
                    }
                    return Err(ConnectError::Unavailable(format!(
                        "the connection of {principal} to upstream {:?} could not be refreshed: {why}",
                        self.upstream
                    )));
                }
            }
        }
    }

    /// `principal`'s connection's `sub`, from the stored metadata.
    pub async fn subject(&self, principal: &str) -> Option<String> {
        let key = CredentialKey::new(principal, &self.upstream, CONNECTION);
        self.store
            .credential(key)
            .await
            .ok()
            .flatten()
            .and_then(|r| r.info.meta.subject)
    }
}

/// The authorization of one principal's requests to an `oauth` upstream (what the gateway's
/// connection of that principal sends): its access token, refreshed when it expires; after a
/// 401 the next request refreshes first, and a second 401 in a row fails naming the connect URL.
pub struct ConnectionAuth {
    connector: Arc<Connector>,
    principal: String,
    /// The token last sent, and whether the upstream refused it.
    last: Mutex<(Option<String>, bool)>,
}

impl fmt::Debug for ConnectionAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectionAuth")
            .field("principal", &self.principal)
            .finish_non_exhaustive()
    }
}

impl ConnectionAuth {
    /// `principal`'s requests through `connector`.
    pub fn new(connector: Arc<Connector>, principal: &str) -> ConnectionAuth {
        ConnectionAuth {
            connector,
            principal: principal.to_owned(),
            last: Mutex::new((None, false)),
        }
    }
}

impl HttpAuth for ConnectionAuth {
    fn authorization(&self) -> BoxFuture<'_, Result<Option<String>, purra_protocol::Error>> {
        Box::pin(async move {
            let refused = {
                let last = self.last.lock().unwrap_or_else(|p| p.into_inner());
                if last.1 {
                    last.0.clone()
                } else {
                    None
                }
            };
            let access = self
                .connector
                .access(&self.principal, refused.as_deref())
                .await
                .map_err(|e| {
                    purra_protocol::Error::from(AuthError::Authorization(e.to_string()))
                })?;
            *self.last.lock().unwrap_or_else(|p| p.into_inner()) =
                (Some(access.token.clone()), false);
            Ok(Some(format!("Bearer {}", access.token)))
        })
    }

    fn challenged<'a>(
        &'a self,
        c: AuthChallenge<'a>,
    ) -> BoxFuture<'a, Result<(), purra_protocol::Error>> {
        Box::pin(async move {
            if c.attempt == 0 {
                // Revoked or expired early: the next request refreshes first.
                self.last.lock().unwrap_or_else(|p| p.into_inner()).1 = true;
                return Ok(());
            }
            Err(AuthError::Authorization(format!(
                "upstream refused the connection of {} (HTTP {}): connect again at {}",
                self.principal,
                c.status,
                self.connector.connect_url()
            ))
            .into())
        })
    }
}

/// A sign-in to an upstream's authorization server under way: the browser was sent there and
/// its answer is awaited on the callback.
struct Pending {
    principal: String,
    /// The random value of the browser's connect cookie (compared in constant time).
    browser: String,
    upstream: String,
    answer: oneshot::Sender<AuthorizationResponse>,
    done: oneshot::Receiver<Result<StoredAuth, String>>,
    opened: Instant,
}

/// Hands the authorization request to the page and waits for the browser's answer.
struct PageAuthorizer {
    redirect: String,
    request: Mutex<Option<oneshot::Sender<AuthorizationRequest>>>,
    answer: tokio::sync::Mutex<Option<oneshot::Receiver<AuthorizationResponse>>>,
}

impl Authorizer for PageAuthorizer {
    fn redirect_uri(&self) -> String {
        self.redirect.clone()
    }

    fn authorize(
        &self,
        request: AuthorizationRequest,
    ) -> BoxFuture<'_, Result<AuthorizationResponse, AuthError>> {
        Box::pin(async move {
            let tx = self
                .request
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
            let rx = self.answer.lock().await.take();
            let (Some(tx), Some(rx)) = (tx, rx) else {
                return Err(AuthError::Authorization(
                    "one authorization per connect".into(),
                ));
            };
            let _ = tx.send(request);
            match tokio::time::timeout(PENDING_TTL, rx).await {
                Ok(Ok(answer)) => Ok(answer),
                _ => Err(AuthError::Authorization(
                    "the browser did not come back in time".into(),
                )),
            }
        })
    }
}

/// The page's connect flow and the listing and revocation of a principal's own connections.
pub struct Connections {
    config: ConnectConfig,
    pending: Mutex<HashMap<String, Pending>>,
    http: reqwest::Client,
    /// Each upstream's client as registered at its authorization server (issuer, client), so
    /// one dynamic registration serves every later connection.
    registrations: Arc<Mutex<HashMap<String, (String, ClientRegistration)>>>,
}

impl fmt::Debug for Connections {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connections")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Connections {
    /// The connect flow over `config`.
    pub fn new(config: ConnectConfig) -> Connections {
        Connections {
            config,
            pending: Mutex::new(HashMap::new()),
            http: http_client(),
            registrations: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// The upstreams principals may connect to.
    pub fn upstreams(&self) -> &[OAuthUpstream] {
        &self.config.upstreams
    }

    /// The callback URL of `upstream`.
    pub fn redirect_uri(&self, upstream: &str) -> String {
        format!("{}/connect/{upstream}/callback", self.config.page_url)
    }

    /// Starts connecting `principal` (signed in on the page) to `upstream` from the browser
    /// holding `browser` (a random value the page puts in a cookie of that browser): discovers
    /// the upstream's authorization server, registers, and answers the URL to send the browser
    /// to. The state and the PKCE verifier stay here, bound to that principal and browser.
    pub async fn start(
        &self,
        principal: &str,
        browser: &str,
        upstream: &str,
    ) -> Result<String, String> {
        let up = self
            .config
            .upstreams
            .iter()
            .find(|u| u.id == upstream)
            .ok_or_else(|| format!("no upstream {upstream:?} takes OAuth connections"))?
            .clone();
        let (req_tx, req_rx) = oneshot::channel();
        let (ans_tx, ans_rx) = oneshot::channel();
        let mut oauth = OAuthConfig::authorization_code(Arc::new(PageAuthorizer {
            redirect: self.redirect_uri(upstream),
            request: Mutex::new(Some(req_tx)),
            answer: tokio::sync::Mutex::new(Some(ans_rx)),
        }))
        .url_policy(up.policy())
        .client_name("purra gateway");
        if !up.scopes.is_empty() {
            oauth = oauth.scopes(up.scopes.iter().cloned());
        }
        if let (Some(issuer), Some(id)) = (&up.authorization_server, &up.client_id) {
            oauth = oauth
                .authorization_server(issuer.clone())
                .client_id(id.clone());
            if let Some(secret) = &up.client_secret {
                oauth = oauth.client_secret(secret.clone());
            }
        }
        // A store of this connection's own (never another principal's tokens), holding only the
        // registration an earlier connection made.
        let tokens = Arc::new(MemoryTokenStore::new());
        oauth = oauth.store(tokens.clone());
        let client = OAuthClient::new(&up.url, oauth).map_err(|e| e.to_string())?;
        let known = self
            .registrations
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(upstream)
            .cloned();
        if let Some((issuer, registration)) = known {
            let mut seed = StoredAuth::default();
            seed.issuer = Some(issuer);
            seed.client = Some(registration);
            tokens
                .save(client.store_key(), seed)
                .await
                .map_err(|e| e.to_string())?;
        }
        let (done_tx, done_rx) = oneshot::channel();
        let registrations = self.registrations.clone();
        let id = upstream.to_owned();
        tokio::spawn(async move {
            let result = match client.login().await {
                Ok(_) => match tokens.load(client.store_key()).await {
                    Ok(Some(stored)) => {
                        if let (Some(issuer), Some(c)) = (&stored.issuer, &stored.client) {
                            registrations
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .insert(id, (issuer.clone(), c.clone()));
                        }
                        Ok(stored)
                    }
                    Ok(None) => Err("the authorization gave no tokens".to_owned()),
                    Err(e) => Err(e.to_string()),
                },
                Err(e) => Err(e.to_string()),
            };
            let _ = done_tx.send(result);
        });
        let request = match req_rx.await {
            Ok(r) => r,
            Err(_) => {
                let why = done_rx
                    .await
                    .ok()
                    .and_then(Result::err)
                    .unwrap_or_else(|| "the authorization did not start".into());
                return Err(format!("cannot connect to upstream {upstream:?}: {why}"));
            }
        };
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        pending.retain(|_, p| p.opened.elapsed() < PENDING_TTL && !p.answer.is_closed());
        while pending.len() >= MAX_PENDING {
            let oldest = pending
                .iter()
                .min_by_key(|(_, p)| p.opened)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => pending.remove(&k),
                None => break,
            };
        }
        pending.insert(
            request.state.clone(),
            Pending {
                principal: principal.to_owned(),
                browser: browser.to_owned(),
                upstream: upstream.to_owned(),
                answer: ans_tx,
                done: done_rx,
                opened: Instant::now(),
            },
        );
        Ok(request.url.to_string())
    }

    /// Finishes a connection on its callback (`query`, the callback URL's query string) in the
    /// browser holding `browser`: the state must be one this page started for `upstream` in
    /// that browser, not yet used nor expired (and, when the callback comes with a page session,
    /// for its principal, `signed_in`); the code is redeemed and the tokens stored sealed under
    /// the principal that started it.
    pub async fn finish(
        &self,
        signed_in: Option<&str>,
        browser: &str,
        upstream: &str,
        query: &str,
    ) -> Result<CredentialInfo, String> {
        let state = form_urlencoded::parse(query.as_bytes())
            .find(|(k, _)| k == "state")
            .map(|(_, v)| v.into_owned())
            .ok_or("the callback carries no state")?;
        let p = {
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            let fits = pending.get(&state).is_some_and(|p| {
                signed_in.is_none_or(|who| who == p.principal)
                    && purra_protocol::auth::same_secret(&p.browser, browser)
                    && p.upstream == upstream
                    && p.opened.elapsed() < PENDING_TTL
            });
            if !fits {
                return Err(
                    "this connection was not started here by you, or it expired: start \
                            again"
                        .into(),
                );
            }
            pending.remove(&state).expect("present")
        };
        let answer = AuthorizationResponse::from_redirect(query).map_err(|e| e.to_string())?;
        if p.answer.send(answer).is_err() {
            return Err("the connection attempt ended: start again".into());
        }
        let stored = tokio::time::timeout(Duration::from_secs(60), p.done)
            .await
            .map_err(|_| "the authorization server did not answer in time".to_owned())?
            .map_err(|_| "the connection attempt ended: start again".to_owned())??;
        self.store_connection(&p.principal, upstream, stored).await
    }

    async fn store_connection(
        &self,
        principal: &str,
        upstream: &str,
        stored: StoredAuth,
    ) -> Result<CredentialInfo, String> {
        let tokens = stored.tokens.ok_or("the authorization gave no tokens")?;
        let client = stored.client.ok_or("the authorization named no client")?;
        let token_endpoint = stored
            .token_endpoint
            .ok_or("the authorization server named no token endpoint")?;
        let revocation_endpoint = match &stored.issuer {
            Some(issuer) => self.revocation_endpoint(issuer).await,
            None => None,
        };
        let conn = Connection {
            access_token: tokens.access_token.clone(),
            refresh_token: tokens.refresh_token.clone(),
            expires_at: tokens.expires_at,
            token_endpoint,
            revocation_endpoint,
            client_id: client.client_id.clone(),
            client_secret: client.client_secret.clone(),
            auth_method: client.token_endpoint_auth_method.clone(),
            lease_until: None,
        };
        let meta = CredentialMeta {
            issuer: stored.issuer.clone(),
            scopes: tokens.scope.clone(),
            subject: token_subject(&tokens.access_token),
            expires_at: tokens.expires_at.map(at_secs),
        };
        let key = CredentialKey::new(principal, upstream, CONNECTION);
        let write = seal(&self.config.keys, &key, &conn, meta)?;
        self.config
            .store
            .put_credential(key.clone(), write)
            .await
            .map_err(|e| format!("the store failed: {e}"))?;
        self.config
            .store
            .credentials(CredentialFilter {
                principal: Some(principal.to_owned()),
                upstream: Some(upstream.to_owned()),
            })
            .await
            .map_err(|e| format!("the store failed: {e}"))?
            .into_iter()
            .find(|c| c.key == key)
            .ok_or_else(|| "the connection was not kept".to_owned())
    }

    async fn revocation_endpoint(&self, issuer: &str) -> Option<String> {
        let base = issuer.trim_end_matches('/');
        for path in [
            "/.well-known/oauth-authorization-server",
            "/.well-known/openid-configuration",
        ] {
            let Ok(resp) = self.http.get(format!("{base}{path}")).send().await else {
                continue;
            };
            if !resp.status().is_success() {
                continue;
            }
            let Ok(body) = bounded_body(resp).await else {
                continue;
            };
            let json: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            // Only where a token may go: https (or loopback, as the upstream's own policy allows).
            return json["revocation_endpoint"]
                .as_str()
                .and_then(|u| reqwest::Url::parse(u).ok())
                .filter(purra_protocol::auth::secure_or_loopback)
                .map(String::from);
        }
        None
    }

    /// `principal`'s own connections (never another's), without their tokens.
    pub async fn list(&self, principal: &str) -> Result<Vec<CredentialInfo>, String> {
        let all = self
            .config
            .store
            .credentials(CredentialFilter {
                principal: Some(principal.to_owned()),
                upstream: None,
            })
            .await
            .map_err(|e| format!("the store failed: {e}"))?;
        Ok(all
            .into_iter()
            .filter(|c| {
                c.kind == CredentialKind::OAuth
                    && c.key.name == CONNECTION
                    && self.config.upstreams.iter().any(|u| u.id == c.key.upstream)
            })
            .collect())
    }

    /// Revokes `principal`'s connection to `upstream`: at the authorization server (RFC 7009)
    /// when it offers that, and here (the record is deleted whatever the server said).
    /// `Ok(false)` when there was none; the text of a failed server revocation otherwise.
    pub async fn revoke(
        &self,
        principal: &str,
        upstream: &str,
    ) -> Result<(bool, Option<String>), String> {
        let key = CredentialKey::new(principal, upstream, CONNECTION);
        revoke_connection(&*self.config.store, &self.config.keys, &key).await
    }
}

/// Revokes the connection at `key` (for `purra credentials revoke` as for the page): its refresh
/// token at the authorization server (RFC 7009) when it names a revocation endpoint, and the
/// record here, whatever the server said. `(false, None)` when there was none; the second part
/// is the server revocation's failure, if it failed (the record is deleted all the same).
pub async fn revoke_connection(
    store: &dyn CredentialStore,
    keys: &Keyring,
    key: &CredentialKey,
) -> Result<(bool, Option<String>), String> {
    let (had, at_server) = revoke_connection_at_server(store, keys, key).await?;
    Ok((had, at_server.err()))
}

/// [`revoke_connection`], saying what the authorization server did: `Ok(true)` revoked there,
/// `Ok(false)` it names no revocation endpoint (or there was no connection), `Err` why it failed.
pub async fn revoke_connection_at_server(
    store: &dyn CredentialStore,
    keys: &Keyring,
    key: &CredentialKey,
) -> Result<(bool, Result<bool, String>), String> {
    let at_server = match load(store, keys, key).await {
        Ok(Some(l)) => revoke_at_server(&http_client(), &l.conn).await,
        Ok(None) => return Ok((false, Ok(false))),
        Err(e) => Err(e),
    };
    let had = store
        .delete_credential(key.clone())
        .await
        .map_err(|e| format!("the store failed: {e}"))?;
    Ok((had, at_server))
}
