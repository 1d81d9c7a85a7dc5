//! The OAuth 2.1 client of MCP authorization: [`OAuthClient`] answers the Streamable HTTP
//! client's 401 and 403 challenges (discovery, registration, authorization code with PKCE and the
//! resource indicator, client credentials, refresh, step-up) and supplies the bearer token of
//! every request.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::Url;
use serde::Deserialize;
use serde_json::json;

use super::jwt::{PrivateKey, SigningAlgorithm};
use super::metadata::{
    authorization_server_metadata_urls, canonical_resource, origin, resource_covers,
    resource_metadata_urls, AuthorizationServerMetadata, ProtectedResourceMetadata,
};
use super::policy::{secure_or_loopback, UrlPolicy, HTTPS_ONLY};
use super::store::{ClientRegistration, MemoryTokenStore, StoredAuth, TokenStore, Tokens};
use super::{b64, b64url, bounded, config_error, error_chain, now_secs, random_string};
use super::{exchange, get_json, BearerChallenge, ExchangeError};
use crate::error::{AuthError, Error};
use crate::http::client::{AuthChallenge, HttpAuth};
use crate::session::BoxFuture;

/// What the host shows the user: the authorization URL to open, the redirect URI the
/// authorization server will send the browser back to, and the `state` it must carry.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AuthorizationRequest {
    /// The complete authorization URL (PKCE challenge, state, scope and resource included).
    pub url: Url,
    /// The redirect URI registered for this client.
    pub redirect_uri: String,
    /// The `state` the redirect must carry back.
    pub state: String,
}

/// What came back on the redirect URI. `Debug` shows no code.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AuthorizationResponse {
    /// The authorization code.
    pub code: String,
    /// The `state` parameter, as sent back.
    pub state: Option<String>,
    /// The `iss` parameter (RFC 9207), when the authorization server sends one.
    pub iss: Option<String>,
}

impl fmt::Debug for AuthorizationResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthorizationResponse")
            .field("code", &"<redacted>")
            .field("state", &self.state)
            .field("iss", &self.iss)
            .finish()
    }
}

impl AuthorizationResponse {
    /// A response carrying `code` and `state`.
    pub fn new(code: impl Into<String>, state: Option<String>) -> Self {
        AuthorizationResponse {
            code: code.into(),
            state,
            iss: None,
        }
    }

    /// Reads the redirect URL the authorization server sent the browser to (or just its query
    /// string): `code`, `state` and `iss`, or the `error` it reports.
    pub fn from_redirect(redirect: &str) -> Result<Self, AuthError> {
        let query = match Url::parse(redirect) {
            Ok(u) => u.query().unwrap_or("").to_owned(),
            Err(_) => redirect.trim_start_matches('?').to_owned(),
        };
        let mut code = None;
        let mut state = None;
        let mut iss = None;
        let mut error = None;
        let mut description = None;
        for (k, v) in reqwest::Url::parse(&format!("http://x/?{query}"))
            .map_err(|_| AuthError::Authorization("the redirect is not a URL".into()))?
            .query_pairs()
        {
            match k.as_ref() {
                "code" => code = Some(v.into_owned()),
                "state" => state = Some(v.into_owned()),
                "iss" => iss = Some(v.into_owned()),
                "error" => error = Some(v.into_owned()),
                "error_description" => description = Some(v.into_owned()),
                _ => {}
            }
        }
        if let Some(error) = error {
            let mut why = format!("the authorization server answered {}", bounded(&error, 64));
            if let Some(d) = description {
                why.push_str(&format!(" ({})", bounded(&d, 200)));
            }
            return Err(AuthError::Authorization(why));
        }
        let code = code.ok_or_else(|| {
            AuthError::Authorization("the redirect carries no authorization code".into())
        })?;
        Ok(AuthorizationResponse { code, state, iss })
    }
}

/// How the user authorizes: the host decides how the URL is shown (printed, opened in a
/// browser) and how the redirect comes back ([`LoopbackAuthorizer`](super::LoopbackAuthorizer)
/// listens on a loopback port). The futures are boxed so `Arc<dyn Authorizer>` works.
pub trait Authorizer: Send + Sync + 'static {
    /// The redirect URI to register and to send in the authorization request.
    fn redirect_uri(&self) -> String;
    /// Lets the user authorize `request.url` and returns what came back on the redirect URI.
    fn authorize(
        &self,
        request: AuthorizationRequest,
    ) -> BoxFuture<'_, Result<AuthorizationResponse, AuthError>>;
}

/// How the client authenticates at the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientAuthMethod {
    /// HTTP Basic with the client id and secret.
    ClientSecretBasic,
    /// The client id and secret in the form body.
    ClientSecretPost,
    /// A JWT signed with the client's private key (RFC 7523).
    PrivateKeyJwt,
    /// A public client: the client id in the body, no secret.
    None,
}

impl ClientAuthMethod {
    /// The registered name (`client_secret_basic`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ClientAuthMethod::ClientSecretBasic => "client_secret_basic",
            ClientAuthMethod::ClientSecretPost => "client_secret_post",
            ClientAuthMethod::PrivateKeyJwt => "private_key_jwt",
            ClientAuthMethod::None => "none",
        }
    }
    /// The method named `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "client_secret_basic" => ClientAuthMethod::ClientSecretBasic,
            "client_secret_post" => ClientAuthMethod::ClientSecretPost,
            "private_key_jwt" => ClientAuthMethod::PrivateKeyJwt,
            "none" => ClientAuthMethod::None,
            _ => return None,
        })
    }
}

impl fmt::Display for ClientAuthMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A private key for `private_key_jwt` client authentication.
#[derive(Clone)]
pub struct SigningKey {
    key: Arc<PrivateKey>,
    kid: Option<String>,
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKey")
            .field("algorithm", &self.key.algorithm())
            .field("kid", &self.kid)
            .finish()
    }
}

impl SigningKey {
    /// Reads a PKCS#8 private key (PEM `-----BEGIN PRIVATE KEY-----`, or DER) for `alg`.
    pub fn from_pkcs8(pem_or_der: &[u8], alg: SigningAlgorithm) -> Result<Self, AuthError> {
        Ok(SigningKey {
            key: Arc::new(PrivateKey::from_pkcs8(pem_or_der, alg).map_err(config_error)?),
            kid: None,
        })
    }
    /// Names the key (`kid` in the assertion's header).
    pub fn with_kid(mut self, kid: impl Into<String>) -> Self {
        self.kid = Some(kid.into());
        self
    }
    /// The public half as a JWK, to register with the authorization server.
    pub fn public_jwk(&self) -> serde_json::Value {
        self.key.public_jwk(self.kid.as_deref())
    }
    /// Signs `claims` as a compact JWS (header `alg`, `typ: JWT`, and the `kid` when named): a
    /// client assertion, or a token for a test's own issuer.
    pub fn sign(&self, claims: &serde_json::Value) -> Result<String, AuthError> {
        self.key
            .sign(self.kid.as_deref(), claims)
            .map_err(config_error)
    }
}

#[derive(Clone)]
enum Grant {
    /// The user authorizes through the host's authorizer.
    AuthorizationCode(Arc<dyn Authorizer>),
    /// The client acts for itself (`client_credentials`).
    ClientCredentials,
    /// Only what is stored (and refreshing it); a new authorization is an error.
    StoredOnly,
}

/// How an [`OAuthClient`] obtains tokens: the grant, the client's identity (pre-registered, a
/// Client ID Metadata Document URL, or dynamic registration), the scopes, the store.
#[derive(Clone)]
pub struct OAuthConfig {
    grant: Grant,
    client_id: Option<String>,
    client_secret: Option<String>,
    auth_method: Option<ClientAuthMethod>,
    signing_key: Option<SigningKey>,
    client_metadata_url: Option<String>,
    client_name: String,
    scopes: Option<Vec<String>>,
    offline_access: bool,
    store: Arc<dyn TokenStore>,
    http: Option<reqwest::Client>,
    refresh_before: Duration,
    max_authorizations: u32,
    request_timeout: Duration,
    url_policy: UrlPolicy,
    authorization_server: Option<String>,
}

impl fmt::Debug for OAuthConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthConfig")
            .field(
                "grant",
                &match self.grant {
                    Grant::AuthorizationCode(_) => "authorization_code",
                    Grant::ClientCredentials => "client_credentials",
                    Grant::StoredOnly => "stored tokens only",
                },
            )
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("auth_method", &self.auth_method)
            .field("signing_key", &self.signing_key)
            .field("client_metadata_url", &self.client_metadata_url)
            .field("client_name", &self.client_name)
            .field("scopes", &self.scopes)
            .field("refresh_before", &self.refresh_before)
            .field("max_authorizations", &self.max_authorizations)
            .field("request_timeout", &self.request_timeout)
            .field("url_policy", &self.url_policy)
            .field("authorization_server", &self.authorization_server)
            .finish()
    }
}

impl OAuthConfig {
    fn with_grant(grant: Grant) -> Self {
        OAuthConfig {
            grant,
            client_id: None,
            client_secret: None,
            auth_method: None,
            signing_key: None,
            client_metadata_url: None,
            client_name: "purra".to_owned(),
            scopes: None,
            offline_access: true,
            store: Arc::new(MemoryTokenStore::new()),
            http: None,
            refresh_before: Duration::from_secs(60),
            max_authorizations: 3,
            request_timeout: Duration::from_secs(30),
            url_policy: UrlPolicy::strict(),
            authorization_server: None,
        }
    }

    /// The authorization code grant: the user authorizes through `authorizer`. The client is
    /// pre-registered ([`client_id`](Self::client_id)), identified by a metadata document URL
    /// ([`client_metadata_url`](Self::client_metadata_url), when the authorization server
    /// supports it), or registered dynamically, in that order of preference.
    pub fn authorization_code(authorizer: Arc<dyn Authorizer>) -> Self {
        Self::with_grant(Grant::AuthorizationCode(authorizer))
    }

    /// The client credentials grant with a client secret (`client_secret_basic`, or
    /// `client_secret_post` when the server accepts only that). The secret goes only to the
    /// authorization server it was issued by, which [`authorization_server`](Self::authorization_server)
    /// must name.
    pub fn client_credentials(client_id: impl Into<String>, secret: impl Into<String>) -> Self {
        let mut c = Self::with_grant(Grant::ClientCredentials);
        c.client_id = Some(client_id.into());
        c.client_secret = Some(secret.into());
        c
    }

    /// The client credentials grant, authenticating with a JWT signed by `key`
    /// (`private_key_jwt`).
    pub fn client_credentials_jwt(client_id: impl Into<String>, key: SigningKey) -> Self {
        let mut c = Self::with_grant(Grant::ClientCredentials);
        c.client_id = Some(client_id.into());
        c.signing_key = Some(key);
        c.auth_method = Some(ClientAuthMethod::PrivateKeyJwt);
        c
    }

    /// Only the tokens in the store (refreshed when they expire); a server that needs a new
    /// authorization fails the request with [`AuthError::Required`]. What a CLI uses after a
    /// separate login.
    pub fn stored_only() -> Self {
        Self::with_grant(Grant::StoredOnly)
    }

    /// A pre-registered client id (tried before metadata documents and dynamic registration).
    pub fn client_id(mut self, id: impl Into<String>) -> Self {
        self.client_id = Some(id.into());
        self
    }
    /// The pre-registered client's secret. It goes only to the authorization server it was
    /// issued by, which [`authorization_server`](Self::authorization_server) must name.
    pub fn client_secret(mut self, secret: impl Into<String>) -> Self {
        self.client_secret = Some(secret.into());
        self
    }
    /// Forces a token endpoint authentication method (otherwise: what the registration says,
    /// else what the server supports).
    pub fn auth_method(mut self, method: ClientAuthMethod) -> Self {
        self.auth_method = Some(method);
        self
    }
    /// The HTTPS URL of this client's metadata document, used as its client id when the
    /// authorization server supports Client ID Metadata Documents.
    pub fn client_metadata_url(mut self, url: impl Into<String>) -> Self {
        self.client_metadata_url = Some(url.into());
        self
    }
    /// The `client_name` sent in dynamic registration (default `purra`).
    pub fn client_name(mut self, name: impl Into<String>) -> Self {
        self.client_name = name.into();
        self
    }
    /// Requests these scopes instead of the ones the server asks for.
    pub fn scopes<I, S>(mut self, scopes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.scopes = Some(scopes.into_iter().map(Into::into).collect());
        self
    }
    /// Whether to ask for `offline_access` (a refresh token) when the authorization server
    /// lists it (default true).
    pub fn offline_access(mut self, yes: bool) -> Self {
        self.offline_access = yes;
        self
    }
    /// Where tokens and the registration are kept (default: in memory).
    pub fn store(mut self, store: Arc<dyn TokenStore>) -> Self {
        self.store = store;
        self
    }
    /// The HTTP client for discovery, registration and token requests (it must not follow
    /// redirects). Default: one of purra's own.
    pub fn http_client(mut self, client: reqwest::Client) -> Self {
        self.http = Some(client);
        self
    }
    /// How long before its expiry a token is refreshed (default 60 s).
    pub fn refresh_before(mut self, d: Duration) -> Self {
        self.refresh_before = d;
        self
    }
    /// How many authorizations (the first one and step-ups) one request may go through
    /// before it fails (default 3).
    pub fn max_authorizations(mut self, n: u32) -> Self {
        self.max_authorizations = n.max(1);
        self
    }
    /// The bound on each discovery, registration and token request, end to end: connecting,
    /// the headers and the whole body (default 30 s).
    pub fn request_timeout(mut self, d: Duration) -> Self {
        self.request_timeout = d;
        self
    }
    /// Which URLs the client follows when a server or a metadata document names them
    /// (default [`UrlPolicy::strict`]: https only, public addresses only).
    pub fn url_policy(mut self, policy: UrlPolicy) -> Self {
        self.url_policy = policy;
        self
    }
    /// The authorization server (its issuer URL) the client id and secret were issued by: the
    /// client then authorizes only there (a server naming another is refused before anything is
    /// sent to it), and a configured client secret goes only to a token endpoint on its origin.
    /// Required with a client secret.
    pub fn authorization_server(mut self, issuer: impl Into<String>) -> Self {
        self.authorization_server = Some(issuer.into());
        self
    }
}

/// What discovery found for the server.
#[derive(Clone)]
struct Discovered {
    prm: Option<ProtectedResourceMetadata>,
    resource: String,
    issuer: String,
    meta: AuthorizationServerMetadata,
    /// Metadata was found (not the 2025-03-26 fallback endpoints).
    found: bool,
}

struct State {
    loaded: bool,
    stored: StoredAuth,
    discovered: Option<Discovered>,
}

struct Inner {
    server: Url,
    key: String,
    config: OAuthConfig,
    /// For the MCP server and the token endpoint a login stored (the caller's choices).
    http: reqwest::Client,
    /// For what discovery finds: purra's own client resolves names through the URL policy (and
    /// takes no proxy from the environment, whose resolution it could not check); a client of
    /// the caller's own serves both.
    discovery: reqwest::Client,
    /// The origins the caller chose, whose addresses are not checked: the MCP server's and the
    /// configured authorization server's.
    trusted: Vec<String>,
    /// The configured authorization server, as given and parsed.
    authorization_server: Option<(String, Url)>,
    state: Mutex<State>,
    /// One refresh or authorization at a time; the others wait and use its result. A tokio
    /// mutex held across the flow's awaits on purpose (a gate, guarding no data).
    flow: tokio::sync::Mutex<()>,
}

/// The OAuth 2.1 client for one MCP server. Cheap to clone; give it to
/// [`HttpClientOptions::auth`](crate::HttpClientOptions::auth):
///
/// ```no_run
/// use std::sync::Arc;
/// use purra_protocol::auth::{FileTokenStore, LoopbackAuthorizer, OAuthClient, OAuthConfig};
/// use purra_protocol::{Client, ClientOptions, HttpClientOptions};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let url = "https://mcp.example/mcp";
/// let authorizer = LoopbackAuthorizer::bind("127.0.0.1:0", |request| {
///     eprintln!("open {} to authorize", request.url);
/// }).await?;
/// let config = OAuthConfig::authorization_code(Arc::new(authorizer))
///     .store(Arc::new(FileTokenStore::new("tokens.json")));
/// let auth = OAuthClient::new(url, config)?;
/// let http = HttpClientOptions::default().auth(auth);
/// let conn = Client::connect_http(url, http, ClientOptions::default()).await?;
/// # drop(conn); Ok(()) }
/// ```
#[derive(Clone)]
pub struct OAuthClient {
    inner: Arc<Inner>,
}

impl fmt::Debug for OAuthClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthClient")
            .field("server", &self.inner.key)
            .field("config", &self.inner.config)
            .finish()
    }
}

/// A token endpoint's answer.
#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    #[serde(default)]
    token_type: Option<String>,
    #[serde(default)]
    expires_in: Option<serde_json::Value>,
    #[serde(default)]
    refresh_token: Option<String>,
    #[serde(default)]
    scope: Option<String>,
}

#[derive(Deserialize)]
struct OAuthErrorBody {
    error: Option<String>,
    error_description: Option<String>,
}

/// A scope string as a set.
fn scope_set(s: Option<&str>) -> BTreeSet<String> {
    s.unwrap_or("")
        .split_ascii_whitespace()
        .map(str::to_owned)
        .collect()
}

fn join(set: &BTreeSet<String>) -> Option<String> {
    (!set.is_empty()).then(|| set.iter().cloned().collect::<Vec<_>>().join(" "))
}

impl OAuthClient {
    /// A client for the MCP server at `server_url` (its tokens are stored under that URL).
    pub fn new(server_url: &str, config: OAuthConfig) -> Result<Self, AuthError> {
        let server = Url::parse(server_url)
            .map_err(|e| config_error(format!("invalid server URL {server_url:?}: {e}")))?;
        if server.scheme() != "http" && server.scheme() != "https" {
            return Err(config_error(format!("not an http(s) URL: {server}")));
        }
        if let Grant::ClientCredentials = config.grant {
            if config.client_secret.is_none() && config.signing_key.is_none() {
                return Err(config_error(
                    "client credentials need a client secret or a signing key",
                ));
            }
        }
        let authorization_server = match &config.authorization_server {
            Some(given) => {
                let u = Url::parse(given).map_err(|e| {
                    config_error(format!("invalid authorization server {given:?}: {e}"))
                })?;
                if !secure_or_loopback(&u) {
                    return Err(config_error(format!(
                        "the authorization server {given:?} {HTTPS_ONLY}"
                    )));
                }
                config.url_policy.check_url(&u, true)?;
                Some((given.clone(), u))
            }
            None => None,
        };
        if config.client_secret.is_some() && authorization_server.is_none() {
            return Err(config_error(
                "a client secret goes only to the authorization server it was issued by: name it \
                 (OAuthConfig::authorization_server)",
            ));
        }
        if let Some(u) = &config.client_metadata_url {
            let parsed = Url::parse(u)
                .map_err(|e| config_error(format!("invalid client metadata URL {u:?}: {e}")))?;
            if parsed.scheme() != "https" || parsed.path() == "/" {
                return Err(config_error(format!(
                    "a client metadata document URL must be https with a path: {u}"
                )));
            }
        }
        let mut trusted = vec![origin(&server)];
        let mut trusted_hosts: Vec<String> =
            server.host_str().into_iter().map(Into::into).collect();
        if let Some((_, u)) = &authorization_server {
            trusted.push(origin(u));
            trusted_hosts.extend(u.host_str().map(Into::into));
        }
        let builder = || {
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .connect_timeout(Duration::from_secs(10))
        };
        let built = |r: reqwest::Result<reqwest::Client>| {
            r.map_err(|e| config_error(format!("HTTP client: {}", error_chain(&e))))
        };
        let (http, discovery) = match &config.http {
            Some(c) => (c.clone(), c.clone()),
            None => (
                built(builder().build())?,
                built(
                    builder()
                        .no_proxy()
                        .dns_resolver(config.url_policy.resolver(trusted_hosts))
                        .build(),
                )?,
            ),
        };
        Ok(OAuthClient {
            inner: Arc::new(Inner {
                key: canonical_resource(&server),
                server,
                config,
                http,
                discovery,
                trusted,
                authorization_server,
                state: Mutex::new(State {
                    loaded: false,
                    stored: StoredAuth::default(),
                    discovered: None,
                }),
                flow: tokio::sync::Mutex::new(()),
            }),
        })
    }

    /// The key its tokens are stored under (the server URL without a fragment or a trailing
    /// slash).
    pub fn store_key(&self) -> &str {
        &self.inner.key
    }

    /// The tokens held now (loaded from the store on first use), if any.
    pub async fn tokens(&self) -> Result<Option<Tokens>, AuthError> {
        self.load().await?;
        Ok(self
            .inner
            .state
            .lock()
            .expect("auth state")
            .stored
            .tokens
            .clone())
    }

    /// Authorizes now, before any MCP request: asks the server (an unauthenticated
    /// `initialize`) which authorization it wants and runs the flow; with no 401, looks for
    /// protected resource metadata. `Ok(false)` when the server needs no authorization.
    pub async fn login(&self) -> Result<bool, Error> {
        self.load().await?;
        let _flow = self.inner.flow.lock().await;
        let probe = json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": crate::ProtocolVersion::LATEST_HANDSHAKE.as_str(), "capabilities": {},
                       "clientInfo": {"name": self.inner.config.client_name, "version": env!("CARGO_PKG_VERSION")}},
        });
        let timeout = self.inner.config.request_timeout;
        let send = self
            .inner
            .http
            .post(self.inner.server.clone())
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(probe.to_string())
            .send();
        let resp = tokio::time::timeout(timeout, send)
            .await
            .map_err(|_| {
                Error::Transport(format!(
                    "POST {}: {}",
                    self.inner.server,
                    ExchangeError::Timeout(timeout)
                ))
            })?
            .map_err(|e| {
                Error::Transport(format!("POST {}: {}", self.inner.server, error_chain(&e)))
            })?;
        let status = resp.status().as_u16();
        let header = resp
            .headers()
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if let Some(session) = resp
            .headers()
            .get(crate::http::SESSION_ID_HEADER)
            .and_then(|v| v.to_str().ok())
        {
            // The probe opened a session: close it.
            let _ = self
                .inner
                .http
                .delete(self.inner.server.clone())
                .header(crate::http::SESSION_ID_HEADER, session)
                .timeout(Duration::from_secs(2))
                .send()
                .await;
        }
        let challenge = header.as_deref().and_then(BearerChallenge::parse);
        if status != 401 && status != 403 {
            // No challenge: authorize anyway when the server publishes metadata.
            if self.resource_metadata_at_server().await?.is_none() {
                return Ok(false);
            }
        }
        let challenge = challenge.unwrap_or_default();
        let scope = challenge.scope.clone();
        self.authorize(&challenge, scope).await?;
        Ok(true)
    }

    /// Forgets the stored tokens and registration for this server. `Ok(false)` when nothing
    /// was stored.
    pub async fn logout(&self) -> Result<bool, AuthError> {
        let _flow = self.inner.flow.lock().await;
        let had = self.inner.config.store.remove(&self.inner.key).await?;
        let mut st = self.inner.state.lock().expect("auth state");
        st.stored = StoredAuth::default();
        st.loaded = true;
        st.discovered = None;
        Ok(had)
    }

    /// Refreshes the access token now (with the stored refresh token).
    pub async fn refresh(&self) -> Result<Tokens, AuthError> {
        self.load().await?;
        let _flow = self.inner.flow.lock().await;
        self.refresh_locked().await
    }

    async fn load(&self) -> Result<(), AuthError> {
        if self.inner.state.lock().expect("auth state").loaded {
            return Ok(());
        }
        let stored = self.inner.config.store.load(&self.inner.key).await?;
        let mut st = self.inner.state.lock().expect("auth state");
        if !st.loaded {
            st.stored = stored.unwrap_or_default();
            st.loaded = true;
        }
        Ok(())
    }

    async fn save(&self, update: impl FnOnce(&mut StoredAuth)) -> Result<(), AuthError> {
        let stored = {
            let mut st = self.inner.state.lock().expect("auth state");
            update(&mut st.stored);
            st.stored.clone()
        };
        self.inner.config.store.save(&self.inner.key, stored).await
    }

    fn current(&self) -> StoredAuth {
        self.inner.state.lock().expect("auth state").stored.clone()
    }

    /// The bearer header for the next request, refreshing first when the token is about to
    /// expire.
    async fn bearer(&self) -> Result<Option<String>, Error> {
        self.load().await?;
        let due = |t: &Tokens| {
            t.expires_at
                .is_some_and(|at| now_secs() + self.inner.config.refresh_before.as_secs() >= at)
        };
        let tokens = self.current().tokens;
        if let Some(t) = &tokens {
            if due(t) {
                let _flow = self.inner.flow.lock().await;
                // Someone may have refreshed while this waited.
                let now = self.current();
                if let Some(t) = now.tokens.as_ref().filter(|t| due(t)) {
                    if t.refresh_token.is_some() && now.token_endpoint.is_some() {
                        if let Err(e) = self.refresh_locked().await {
                            if !matches!(e, AuthError::Token { .. }) {
                                return Err(e.into());
                            }
                            // The refresh token is no longer good: forget the tokens; the
                            // server's 401 starts a new authorization.
                            self.save(|s| s.tokens = None).await?;
                        }
                    } else if matches!(self.inner.config.grant, Grant::ClientCredentials)
                        && now.token_endpoint.is_some()
                    {
                        let d = self
                            .inner
                            .state
                            .lock()
                            .expect("auth state")
                            .discovered
                            .clone();
                        if let Some(d) = d {
                            let scope = t.scope.clone();
                            self.client_credentials(&d, scope).await?;
                        }
                    }
                }
            }
        }
        Ok(self
            .current()
            .tokens
            .map(|t| format!("Bearer {}", t.access_token)))
    }

    /// The server refused a request: refresh, authorize, or step up, or give up.
    async fn challenged(&self, c: AuthChallenge<'_>) -> Result<(), Error> {
        self.load().await?;
        let _flow = self.inner.flow.lock().await;
        let challenge = c
            .www_authenticate
            .and_then(BearerChallenge::parse)
            .unwrap_or_default();
        let now = self.current();
        let held = now
            .tokens
            .as_ref()
            .map(|t| format!("Bearer {}", t.access_token));
        if c.sent.is_some() && held.as_deref() != c.sent {
            // Another request replaced the token while this one was out: try the new one.
            return Ok(());
        }
        if c.attempt >= self.inner.config.max_authorizations {
            return Err(if c.status == 403 {
                AuthError::InsufficientScope {
                    scope: challenge.scope,
                }
            } else {
                AuthError::Required {
                    resource: self.inner.key.clone(),
                    scope: challenge.scope,
                }
            }
            .into());
        }
        if c.status == 403 {
            if challenge.error.as_deref() != Some("insufficient_scope") {
                return Err(Error::Http {
                    status: 403,
                    body: "forbidden (not an insufficient_scope challenge)".into(),
                });
            }
            // Step-up: what is held plus what is asked for; nothing new to ask for means
            // asking again cannot help.
            let granted = scope_set(now.tokens.as_ref().and_then(|t| t.scope.as_deref()));
            let required = scope_set(challenge.scope.as_deref());
            if required.is_empty() || required.is_subset(&granted) {
                return Err(AuthError::InsufficientScope {
                    scope: challenge.scope,
                }
                .into());
            }
            let wanted: BTreeSet<String> = granted.union(&required).cloned().collect();
            self.authorize(&challenge, join(&wanted)).await?;
            return Ok(());
        }
        // 401: a refresh first when there is a token that was refused.
        if c.sent.is_some() {
            if let Some(t) = &now.tokens {
                if t.refresh_token.is_some() && now.token_endpoint.is_some() {
                    match self.refresh_locked().await {
                        Ok(_) => return Ok(()),
                        Err(AuthError::Token { .. }) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
            }
            self.save(|s| s.tokens = None).await?;
        }
        let scope = challenge.scope.clone();
        self.authorize(&challenge, scope).await?;
        Ok(())
    }

    /// Whether `url` is on an origin the caller chose (the MCP server's, the configured
    /// authorization server's): its addresses are not checked, its scheme is.
    fn trusted(&self, url: &Url) -> bool {
        self.inner.trusted.contains(&origin(url))
    }

    /// GETs a metadata document at `url`: on the MCP server's own origin as the server is
    /// reached; elsewhere only what the URL policy allows, through the discovery client. Bounded
    /// by the request timeout end to end.
    async fn fetch_metadata<T: serde::de::DeserializeOwned>(
        &self,
        url: &Url,
    ) -> Result<Option<T>, AuthError> {
        let http = if origin(url) == origin(&self.inner.server) {
            &self.inner.http
        } else {
            self.inner
                .config
                .url_policy
                .check(url, self.trusted(url))
                .await?;
            &self.inner.discovery
        };
        get_json::<T>(http, url, &[], self.inner.config.request_timeout)
            .await
            .map_err(AuthError::Discovery)
    }

    /// The protected resource metadata at the server's well-known URLs, the first found.
    async fn resource_metadata_at_server(
        &self,
    ) -> Result<Option<ProtectedResourceMetadata>, AuthError> {
        for url in resource_metadata_urls(&self.inner.server) {
            if let Some(doc) = self.fetch_metadata(&url).await? {
                return Ok(Some(doc));
            }
        }
        Ok(None)
    }

    /// Refuses `issuer` when an authorization server is configured and this is another.
    fn check_configured_issuer(&self, issuer: &str) -> Result<(), AuthError> {
        match &self.inner.authorization_server {
            Some((given, _)) if issuer.trim_end_matches('/') != given.trim_end_matches('/') => {
                Err(AuthError::UrlRefused {
                    url: bounded(issuer, 200),
                    reason: format!("not the configured authorization server {given}"),
                })
            }
            _ => Ok(()),
        }
    }

    /// Discovery: the protected resource metadata (from the challenge, else the well-known
    /// URLs), then the authorization server's metadata (or the 2025-03-26 fallbacks). Every URL
    /// a server or a document names passes the URL policy before anything is sent to it; a
    /// configured authorization server is the only one used.
    async fn discover(&self, challenge: &BearerChallenge) -> Result<Discovered, AuthError> {
        let server = &self.inner.server;
        let mut prm = None;
        if let Some(u) = &challenge.resource_metadata {
            let url = Url::parse(u).map_err(|_| {
                AuthError::Discovery(format!("resource_metadata {u:?} is not a URL"))
            })?;
            prm = self
                .fetch_metadata::<ProtectedResourceMetadata>(&url)
                .await?;
        }
        if prm.is_none() {
            prm = self.resource_metadata_at_server().await?;
        }
        let (resource, issuer) = match &prm {
            Some(p) => {
                if !resource_covers(&p.resource, server) {
                    return Err(AuthError::ResourceMismatch {
                        expected: self.inner.key.clone(),
                        found: bounded(&p.resource, 200),
                    });
                }
                let issuer = p.authorization_servers.first().cloned().ok_or_else(|| {
                    AuthError::Discovery(
                        "the protected resource metadata names no authorization server".into(),
                    )
                })?;
                (p.resource.clone(), issuer)
            }
            // 2025-03-26: the MCP server's origin is the authorization server.
            None => (self.inner.key.clone(), origin(server)),
        };
        let issuer_url = Url::parse(&issuer).map_err(|_| {
            AuthError::Discovery(format!(
                "authorization server {:?} is not a URL",
                bounded(&issuer, 200)
            ))
        })?;
        self.check_configured_issuer(&issuer)?;
        self.inner
            .config
            .url_policy
            .check_url(&issuer_url, self.trusted(&issuer_url))?;
        let mut found = None;
        for url in authorization_server_metadata_urls(&issuer_url) {
            if let Some(doc) = self
                .fetch_metadata::<AuthorizationServerMetadata>(&url)
                .await?
            {
                found = Some(doc);
                break;
            }
        }
        let (meta, found) = match found {
            Some(meta) => {
                if prm.is_some()
                    && meta.issuer.trim_end_matches('/') != issuer.trim_end_matches('/')
                {
                    return Err(AuthError::Discovery(format!(
                        "the authorization server metadata names issuer {:?}, not {issuer:?}",
                        bounded(&meta.issuer, 200)
                    )));
                }
                self.check_configured_issuer(&meta.issuer)?;
                (meta, true)
            }
            None => (AuthorizationServerMetadata::fallback(&issuer_url), false),
        };
        if meta.token_endpoint.is_none() {
            return Err(AuthError::Discovery(
                "the authorization server metadata has no token_endpoint".into(),
            ));
        }
        let d = Discovered {
            prm,
            resource,
            issuer: if found { meta.issuer.clone() } else { issuer },
            meta,
            found,
        };
        self.inner.state.lock().expect("auth state").discovered = Some(d.clone());
        Ok(d)
    }

    /// An endpoint the authorization server's metadata names, parsed and passed through the URL
    /// policy before anything is sent to it (or the user sent to it).
    async fn endpoint(&self, name: &str, value: &str, resolve: bool) -> Result<Url, AuthError> {
        let url = Url::parse(value).map_err(|_| {
            AuthError::Discovery(format!("{name} {:?} is not a URL", bounded(value, 200)))
        })?;
        let policy = &self.inner.config.url_policy;
        if resolve {
            policy.check(&url, self.trusted(&url)).await?;
        } else {
            policy.check_url(&url, self.trusted(&url))?;
        }
        Ok(url)
    }

    /// The scopes to ask for: the explicit ones (a step-up's), else the challenge's, else the
    /// configured ones, else the resource's `scopes_supported`; plus `offline_access` when the
    /// authorization server lists it and the grant can use a refresh token.
    fn select_scope(&self, d: &Discovered, asked: Option<String>) -> Option<String> {
        let mut set = scope_set(asked.as_deref());
        if set.is_empty() {
            if let Some(s) = &self.inner.config.scopes {
                set.extend(s.iter().cloned());
            } else if let Some(s) = d.prm.as_ref().and_then(|p| p.scopes_supported.as_ref()) {
                set.extend(s.iter().cloned());
            }
        }
        if self.inner.config.offline_access
            && matches!(self.inner.config.grant, Grant::AuthorizationCode(_))
            && d.meta.supports_scope("offline_access")
        {
            set.insert("offline_access".to_owned());
        }
        join(&set)
    }

    /// A full authorization with `scope`.
    async fn authorize(
        &self,
        challenge: &BearerChallenge,
        scope: Option<String>,
    ) -> Result<(), AuthError> {
        if let Grant::StoredOnly = self.inner.config.grant {
            // Nothing here can authorize: no discovery, no request to anything a server names.
            return Err(AuthError::Required {
                resource: self.inner.key.clone(),
                scope,
            });
        }
        let d = self.discover(challenge).await?;
        let scope = self.select_scope(&d, scope);
        match &self.inner.config.grant {
            Grant::StoredOnly => unreachable!("returned above"),
            Grant::ClientCredentials => self.client_credentials(&d, scope).await,
            Grant::AuthorizationCode(authorizer) => {
                self.authorization_code(&d, scope, authorizer.clone()).await
            }
        }
    }

    async fn client_credentials(
        &self,
        d: &Discovered,
        scope: Option<String>,
    ) -> Result<(), AuthError> {
        let config = &self.inner.config;
        let mut client = ClientRegistration::new(config.client_id.clone().expect("checked in new"));
        client.client_secret = config.client_secret.clone();
        let mut form = vec![("grant_type", "client_credentials".to_owned())];
        if let Some(s) = &scope {
            form.push(("scope", s.clone()));
        }
        form.push(("resource", d.resource.clone()));
        let tokens = self
            .token_request(d, &client, form, scope.as_deref())
            .await?;
        self.save_grant(d, client, tokens).await
    }

    /// Stores what a grant produced: the tokens, the client they were issued to, and where.
    async fn save_grant(
        &self,
        d: &Discovered,
        client: ClientRegistration,
        tokens: Tokens,
    ) -> Result<(), AuthError> {
        let (issuer, endpoint, resource) = (
            d.issuer.clone(),
            d.meta.token_endpoint.clone(),
            d.resource.clone(),
        );
        self.save(|s| {
            s.issuer = Some(issuer);
            s.token_endpoint = endpoint;
            s.resource = Some(resource);
            s.client = Some(client);
            s.tokens = Some(tokens);
        })
        .await
    }

    async fn authorization_code(
        &self,
        d: &Discovered,
        scope: Option<String>,
        authorizer: Arc<dyn Authorizer>,
    ) -> Result<(), AuthError> {
        let meta = &d.meta;
        let authorization_endpoint = meta.authorization_endpoint.clone().ok_or_else(|| {
            AuthError::Discovery("the authorization server has no authorization_endpoint".into())
        })?;
        if d.found
            && !meta
                .code_challenge_methods_supported
                .as_ref()
                .is_some_and(|m| m.iter().any(|m| m == "S256"))
        {
            return Err(AuthError::Discovery(
                "the authorization server does not support PKCE with S256; refusing to authorize"
                    .into(),
            ));
        }
        // The user is sent there: the same rules as for what the client fetches itself.
        let mut url = self
            .endpoint("authorization_endpoint", &authorization_endpoint, false)
            .await?;
        let redirect_uri = authorizer.redirect_uri();
        let client = self.client_for(d, &redirect_uri).await?;
        let verifier = random_string(48);
        let challenge =
            b64url(ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes()).as_ref());
        let state = random_string(24);
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("response_type", "code")
                .append_pair("client_id", &client.client_id)
                .append_pair("redirect_uri", &redirect_uri)
                .append_pair("code_challenge", &challenge)
                .append_pair("code_challenge_method", "S256")
                .append_pair("state", &state);
            if let Some(s) = &scope {
                q.append_pair("scope", s);
                if scope_set(Some(s)).contains("offline_access") {
                    q.append_pair("prompt", "consent");
                }
            }
            q.append_pair("resource", &d.resource);
        }
        let response = authorizer
            .authorize(AuthorizationRequest {
                url,
                redirect_uri: redirect_uri.clone(),
                state: state.clone(),
            })
            .await?;
        if response.state.as_deref() != Some(state.as_str()) {
            return Err(AuthError::Authorization(
                "the redirect's state does not match the request's".into(),
            ));
        }
        match (
            &response.iss,
            meta.authorization_response_iss_parameter_supported,
        ) {
            (Some(iss), _) if iss.trim_end_matches('/') != d.issuer.trim_end_matches('/') => {
                return Err(AuthError::Authorization(format!(
                    "the redirect comes from issuer {:?}, not {:?}",
                    bounded(iss, 200),
                    d.issuer
                )))
            }
            (None, Some(true)) => {
                return Err(AuthError::Authorization(
                    "the redirect lacks the iss parameter its authorization server promises".into(),
                ))
            }
            _ => {}
        }
        let form = vec![
            ("grant_type", "authorization_code".to_owned()),
            ("code", response.code.clone()),
            ("redirect_uri", redirect_uri),
            ("code_verifier", verifier),
            ("resource", d.resource.clone()),
        ];
        let tokens = self
            .token_request(d, &client, form, scope.as_deref())
            .await?;
        self.save_grant(d, client, tokens).await
    }

    /// The client to authorize as: pre-registered, the stored registration with this issuer,
    /// a metadata document URL, or a new dynamic registration.
    async fn client_for(
        &self,
        d: &Discovered,
        redirect_uri: &str,
    ) -> Result<ClientRegistration, AuthError> {
        let config = &self.inner.config;
        if let Some(id) = &config.client_id {
            let mut c = ClientRegistration::new(id.clone());
            c.client_secret = config.client_secret.clone();
            c.token_endpoint_auth_method = config.auth_method.map(|m| m.name().to_owned());
            return Ok(c);
        }
        let stored = self.current();
        if let Some(c) = stored.client.filter(|c| {
            stored.issuer.as_deref() == Some(d.issuer.as_str())
                && (c.redirect_uris.is_empty() || c.redirect_uris.iter().any(|u| u == redirect_uri))
                && c.client_secret_expires_at
                    .is_none_or(|at| at == 0 || at > now_secs() + 60)
        }) {
            let cimd_ok = Some(&c.client_id) != config.client_metadata_url.as_ref()
                || d.meta.client_id_metadata_document_supported == Some(true);
            if cimd_ok {
                return Ok(c);
            }
        }
        if let (Some(url), Some(true)) = (
            &config.client_metadata_url,
            d.meta.client_id_metadata_document_supported,
        ) {
            let mut c = ClientRegistration::new(url.clone());
            c.token_endpoint_auth_method = Some("none".to_owned());
            return Ok(c);
        }
        let Some(endpoint) = &d.meta.registration_endpoint else {
            return Err(AuthError::Registration(
                "the authorization server offers no dynamic registration and no client id is configured"
                    .into(),
            ));
        };
        let endpoint = self
            .endpoint("registration_endpoint", endpoint, true)
            .await?;
        let method = if d.meta.supports_auth_method("none")
            || d.meta.token_endpoint_auth_methods_supported.is_none()
        {
            "none"
        } else if d.meta.supports_auth_method("client_secret_basic") {
            "client_secret_basic"
        } else if d.meta.supports_auth_method("client_secret_post") {
            "client_secret_post"
        } else {
            "none"
        };
        let body = json!({
            "client_name": config.client_name,
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": method,
        });
        let rb = self
            .inner
            .discovery
            .post(endpoint.clone())
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .body(body.to_string());
        let (status, bytes) = exchange(rb, config.request_timeout)
            .await
            .map_err(|e| AuthError::Registration(format!("POST {endpoint}: {e}")))?;
        if !status.is_success() {
            let e: Option<OAuthErrorBody> = serde_json::from_slice(&bytes).ok();
            let (error, description) = e
                .map(|e| (e.error, e.error_description))
                .unwrap_or_default();
            return Err(AuthError::Registration(format!(
                "status {}{}{}",
                status.as_u16(),
                error
                    .map(|e| format!(": {}", bounded(&e, 64)))
                    .unwrap_or_default(),
                description
                    .map(|d| format!(" ({})", bounded(&d, 200)))
                    .unwrap_or_default()
            )));
        }
        let mut c: ClientRegistration = serde_json::from_slice(&bytes).map_err(|e| {
            AuthError::Registration(format!("the registration response is malformed: {e}"))
        })?;
        if c.redirect_uris.is_empty() {
            c.redirect_uris = vec![redirect_uri.to_owned()];
        }
        if c.token_endpoint_auth_method.is_none() {
            c.token_endpoint_auth_method = Some(method.to_owned());
        }
        let (issuer, client) = (d.issuer.clone(), c.clone());
        self.save(|s| {
            if s.issuer.as_deref() != Some(issuer.as_str()) {
                s.tokens = None;
            }
            s.issuer = Some(issuer);
            s.client = Some(client);
        })
        .await?;
        Ok(c)
    }

    /// How `client` authenticates at `meta`'s token endpoint.
    fn auth_method(
        &self,
        client: &ClientRegistration,
        meta: Option<&AuthorizationServerMetadata>,
    ) -> ClientAuthMethod {
        if let Some(m) = self.inner.config.auth_method {
            return m;
        }
        if let Some(m) = client
            .token_endpoint_auth_method
            .as_deref()
            .and_then(ClientAuthMethod::from_name)
        {
            return m;
        }
        if self.inner.config.signing_key.is_some() {
            return ClientAuthMethod::PrivateKeyJwt;
        }
        if client.client_secret.is_none() {
            return ClientAuthMethod::None;
        }
        match meta {
            Some(m)
                if !m.supports_auth_method("client_secret_basic")
                    && m.supports_auth_method("client_secret_post") =>
            {
                ClientAuthMethod::ClientSecretPost
            }
            _ => ClientAuthMethod::ClientSecretBasic,
        }
    }

    /// One token request with client authentication; the tokens it answers, with `expires_at`
    /// computed and `scope` defaulting to `requested`.
    async fn token_request(
        &self,
        d: &Discovered,
        client: &ClientRegistration,
        form: Vec<(&'static str, String)>,
        requested: Option<&str>,
    ) -> Result<Tokens, AuthError> {
        let endpoint = d
            .meta
            .token_endpoint
            .as_deref()
            .expect("checked in discover");
        let endpoint = self.endpoint("token_endpoint", endpoint, true).await?;
        let http = self.inner.discovery.clone();
        self.post_token(
            &http,
            &endpoint,
            &d.issuer,
            client,
            Some(&d.meta),
            form,
            requested,
        )
        .await
    }

    /// Refuses to send the configured client secret to `endpoint` unless it is a token endpoint
    /// of the configured authorization server: that server's issuer, on its origin.
    fn check_secret_goes_home(
        &self,
        endpoint: &Url,
        issuer: &str,
        client: &ClientRegistration,
        method: ClientAuthMethod,
    ) -> Result<(), AuthError> {
        let config = &self.inner.config;
        let sends_secret = matches!(
            method,
            ClientAuthMethod::ClientSecretBasic | ClientAuthMethod::ClientSecretPost
        );
        if !sends_secret
            || config.client_secret.is_none()
            || client.client_secret != config.client_secret
        {
            return Ok(());
        }
        let (given, home) = self
            .inner
            .authorization_server
            .as_ref()
            .expect("checked in new: a client secret needs its authorization server");
        if issuer.trim_end_matches('/') != given.trim_end_matches('/')
            || origin(endpoint) != origin(home)
        {
            return Err(AuthError::UrlRefused {
                url: endpoint.to_string(),
                reason: format!(
                    "the client secret goes only to the configured authorization server {given}, \
                     on its origin"
                ),
            });
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    async fn post_token(
        &self,
        http: &reqwest::Client,
        endpoint: &Url,
        issuer: &str,
        client: &ClientRegistration,
        meta: Option<&AuthorizationServerMetadata>,
        mut form: Vec<(&'static str, String)>,
        requested: Option<&str>,
    ) -> Result<Tokens, AuthError> {
        let method = self.auth_method(client, meta);
        self.check_secret_goes_home(endpoint, issuer, client, method)?;
        let mut rb = http
            .post(endpoint.clone())
            .header("accept", "application/json");
        match method {
            ClientAuthMethod::ClientSecretBasic => {
                let secret = client.client_secret.as_deref().unwrap_or("");
                let enc = |s: &str| url_encode(s);
                let mut value = reqwest::header::HeaderValue::from_str(&format!(
                    "Basic {}",
                    b64(format!("{}:{}", enc(&client.client_id), enc(secret)).as_bytes())
                ))
                .map_err(|_| config_error("the client id or secret cannot go in a header"))?;
                value.set_sensitive(true);
                rb = rb.header("authorization", value);
            }
            ClientAuthMethod::ClientSecretPost => {
                form.push(("client_id", client.client_id.clone()));
                form.push((
                    "client_secret",
                    client.client_secret.clone().unwrap_or_default(),
                ));
            }
            ClientAuthMethod::None => form.push(("client_id", client.client_id.clone())),
            ClientAuthMethod::PrivateKeyJwt => {
                let key = self
                    .inner
                    .config
                    .signing_key
                    .as_ref()
                    .ok_or_else(|| config_error("private_key_jwt needs a signing key"))?;
                let now = now_secs();
                let claims = json!({
                    "iss": client.client_id, "sub": client.client_id, "aud": issuer,
                    "iat": now, "exp": now + 300, "jti": random_string(16),
                });
                let assertion = key
                    .key
                    .sign(key.kid.as_deref(), &claims)
                    .map_err(config_error)?;
                form.push(("client_id", client.client_id.clone()));
                form.push((
                    "client_assertion_type",
                    "urn:ietf:params:oauth:client-assertion-type:jwt-bearer".to_owned(),
                ));
                form.push(("client_assertion", assertion));
            }
        }
        let (status, bytes) = exchange(rb.form(&form), self.inner.config.request_timeout)
            .await
            .map_err(|e| match e {
                ExchangeError::Body(why) => AuthError::Token {
                    error: "invalid_response".into(),
                    description: Some(why),
                },
                e => AuthError::Token {
                    error: "request_failed".into(),
                    description: Some(format!("POST {endpoint}: {e}")),
                },
            })?;
        if !status.is_success() {
            let e: Option<OAuthErrorBody> = serde_json::from_slice(&bytes).ok();
            let (error, description) = e
                .map(|e| (e.error, e.error_description))
                .unwrap_or_default();
            return Err(AuthError::Token {
                error: error
                    .map(|e| bounded(&e, 64))
                    .unwrap_or_else(|| format!("status {}", status.as_u16())),
                description: description.map(|d| bounded(&d, 200)),
            });
        }
        let t: TokenResponse = serde_json::from_slice(&bytes).map_err(|_| AuthError::Token {
            error: "invalid_response".into(),
            description: Some("the token response is not the JSON expected".into()),
        })?;
        if let Some(tt) = &t.token_type {
            if !tt.eq_ignore_ascii_case("bearer") {
                return Err(AuthError::Token {
                    error: "unsupported_token_type".into(),
                    description: Some(format!("token type {:?} is not Bearer", bounded(tt, 32))),
                });
            }
        }
        let expires_in = match &t.expires_in {
            Some(serde_json::Value::Number(n)) => n.as_u64(),
            Some(serde_json::Value::String(s)) => s.parse().ok(),
            _ => None,
        };
        Ok(Tokens {
            access_token: t.access_token,
            token_type: "Bearer".to_owned(),
            refresh_token: t.refresh_token,
            expires_at: expires_in.map(|s| now_secs() + s),
            scope: t.scope.or_else(|| requested.map(str::to_owned)),
        })
    }

    /// A refresh with the stored refresh token; the caller holds the flow gate.
    async fn refresh_locked(&self) -> Result<Tokens, AuthError> {
        let stored = self.current();
        let (Some(tokens), Some(endpoint), Some(client)) =
            (&stored.tokens, &stored.token_endpoint, &stored.client)
        else {
            return Err(AuthError::Required {
                resource: self.inner.key.clone(),
                scope: None,
            });
        };
        let Some(refresh) = tokens.refresh_token.clone() else {
            return Err(AuthError::Token {
                error: "no_refresh_token".into(),
                description: Some("the authorization server issued no refresh token".into()),
            });
        };
        let meta = self
            .inner
            .state
            .lock()
            .expect("auth state")
            .discovered
            .as_ref()
            .map(|d| d.meta.clone());
        let mut form = vec![
            ("grant_type", "refresh_token".to_owned()),
            ("refresh_token", refresh.clone()),
        ];
        if let Some(r) = &stored.resource {
            form.push(("resource", r.clone()));
        }
        let issuer = stored.issuer.clone().unwrap_or_default();
        // The token endpoint the login stored (it passed the URL policy then): the caller's.
        let endpoint = Url::parse(endpoint).map_err(|_| AuthError::Token {
            error: "invalid_request".into(),
            description: Some("the stored token endpoint is not a URL".into()),
        })?;
        let http = self.inner.http.clone();
        let mut new = self
            .post_token(
                &http,
                &endpoint,
                &issuer,
                client,
                meta.as_ref(),
                form,
                tokens.scope.as_deref(),
            )
            .await?;
        if new.refresh_token.is_none() {
            new.refresh_token = Some(refresh);
        }
        let saved = new.clone();
        self.save(|s| s.tokens = Some(saved)).await?;
        Ok(new)
    }
}

/// `application/x-www-form-urlencoded` encoding of one value (RFC 6749 section 2.3.1 wants the
/// Basic credentials encoded this way).
pub(super) fn url_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

impl HttpAuth for OAuthClient {
    fn authorization(&self) -> BoxFuture<'_, Result<Option<String>, Error>> {
        Box::pin(self.bearer())
    }

    fn challenged<'a>(&'a self, challenge: AuthChallenge<'a>) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(self.challenged(challenge))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirects_parse() {
        let r = AuthorizationResponse::from_redirect(
            "http://127.0.0.1:5/callback?code=abc%2Fd&state=s1&iss=https%3A%2F%2Fas",
        )
        .unwrap();
        assert_eq!(r.code, "abc/d");
        assert_eq!(r.state.as_deref(), Some("s1"));
        assert_eq!(r.iss.as_deref(), Some("https://as"));
        let e = AuthorizationResponse::from_redirect(
            "http://127.0.0.1:5/callback?error=access_denied&error_description=no%0Athanks",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "authorization failed: the authorization server answered access_denied (nothanks)"
        );
        assert!(format!("{r:?}").contains("<redacted>") && !format!("{r:?}").contains("abc"));
    }

    #[test]
    fn form_encoding() {
        assert_eq!(url_encode("a b:c/é"), "a+b%3Ac%2F%C3%A9");
        assert_eq!(
            url_encode("conformance-test-client"),
            "conformance-test-client"
        );
    }
}
