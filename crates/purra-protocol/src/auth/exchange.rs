//! OAuth 2.0 Token Exchange (RFC 8693): [`TokenExchange`] trades a caller's token (the
//! `subject_token`, never forwarded itself) at an authorization server's token endpoint for a
//! token whose audience is an upstream, the client authenticating as itself; [`ExchangeCache`]
//! keeps the issued tokens per principal, upstream and scope until shortly before they expire,
//! with one exchange at a time per key.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::Url;
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::client::{url_encode, ClientAuthMethod, SigningKey};
use super::policy::{secure_or_loopback, UrlPolicy, HTTPS_ONLY};
use super::{b64, bounded, config_error, error_chain, exchange, now_secs};
use super::{random_string, ExchangeError};
use crate::error::AuthError;

/// The grant type of a token exchange request.
pub const TOKEN_EXCHANGE_GRANT: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// The token type URI of an OAuth access token (RFC 8693 section 3).
pub const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";
/// The token type URI of a JWT (RFC 8693 section 3).
pub const JWT_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:jwt";
/// The token type URI of an ID token (RFC 8693 section 3).
pub const ID_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:id_token";

/// What to exchange and for what: the subject token and its type, an optional actor token, the
/// audience and/or resource the issued token is for, and the scope. `Debug` shows no token.
#[derive(Clone)]
#[non_exhaustive]
pub struct ExchangeRequest {
    /// The token representing the party the issued token acts for (the caller's inbound token).
    pub subject_token: String,
    /// Its type URI (default [`ACCESS_TOKEN_TYPE`]).
    pub subject_token_type: String,
    /// A token representing the acting party (with its type URI), so the issued token names it
    /// in `act`.
    pub actor_token: Option<(String, String)>,
    /// `audience` values: the logical names of the target service.
    pub audience: Vec<String>,
    /// `resource` values (URIs of the target service).
    pub resource: Vec<String>,
    /// The scope asked for (space separated), if any.
    pub scope: Option<String>,
    /// The type of token asked for, if any (`requested_token_type`).
    pub requested_token_type: Option<String>,
}

impl fmt::Debug for ExchangeRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExchangeRequest")
            .field("subject_token", &"<redacted>")
            .field("subject_token_type", &self.subject_token_type)
            .field(
                "actor_token",
                &self.actor_token.as_ref().map(|(_, t)| ("<redacted>", t)),
            )
            .field("audience", &self.audience)
            .field("resource", &self.resource)
            .field("scope", &self.scope)
            .field("requested_token_type", &self.requested_token_type)
            .finish()
    }
}

impl ExchangeRequest {
    /// Exchanges `subject_token`, an access token.
    pub fn new(subject_token: impl Into<String>) -> Self {
        ExchangeRequest {
            subject_token: subject_token.into(),
            subject_token_type: ACCESS_TOKEN_TYPE.to_owned(),
            actor_token: None,
            audience: Vec::new(),
            resource: Vec::new(),
            scope: None,
            requested_token_type: None,
        }
    }
    /// The subject token's type URI (default [`ACCESS_TOKEN_TYPE`]).
    pub fn subject_token_type(mut self, t: impl Into<String>) -> Self {
        self.subject_token_type = t.into();
        self
    }
    /// An actor token and its type URI: the issued token then names its subject in `act`.
    pub fn actor_token(mut self, token: impl Into<String>, token_type: impl Into<String>) -> Self {
        self.actor_token = Some((token.into(), token_type.into()));
        self
    }
    /// Adds an `audience` value.
    pub fn audience(mut self, a: impl Into<String>) -> Self {
        self.audience.push(a.into());
        self
    }
    /// Adds a `resource` value.
    pub fn resource(mut self, r: impl Into<String>) -> Self {
        self.resource.push(r.into());
        self
    }
    /// The scope to ask for (space separated).
    pub fn scope(mut self, s: impl Into<String>) -> Self {
        self.scope = Some(s.into());
        self
    }
    /// The token type to ask for.
    pub fn requested_token_type(mut self, t: impl Into<String>) -> Self {
        self.requested_token_type = Some(t.into());
        self
    }
}

/// A token the authorization server issued. `Debug` shows no token.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExchangedToken {
    /// The issued token.
    pub access_token: String,
    /// Its type URI (`issued_token_type`).
    pub issued_token_type: String,
    /// How it is used (`token_type`: `Bearer`, or `N_A` for a token that is no access token).
    pub token_type: String,
    /// When it expires (seconds since the epoch): the earlier of `expires_in` and, for a JWT,
    /// its `exp` claim; `None` when neither says.
    pub expires_at: Option<u64>,
    /// The scope granted (`scope`, else the scope asked for).
    pub scope: Option<String>,
}

impl fmt::Debug for ExchangedToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExchangedToken")
            .field("access_token", &"<redacted>")
            .field("issued_token_type", &self.issued_token_type)
            .field("token_type", &self.token_type)
            .field("expires_at", &self.expires_at)
            .field("scope", &self.scope)
            .finish()
    }
}

impl ExchangedToken {
    /// The `Authorization` header value for it (`Bearer ...`).
    pub fn bearer(&self) -> String {
        format!("Bearer {}", self.access_token)
    }
}

#[derive(Deserialize)]
struct ExchangeResponse {
    access_token: String,
    #[serde(default)]
    issued_token_type: Option<String>,
    #[serde(default)]
    token_type: Option<String>,
    #[serde(default)]
    expires_in: Option<serde_json::Value>,
    #[serde(default)]
    scope: Option<String>,
}

#[derive(Deserialize)]
struct ErrorBody {
    error: Option<String>,
    error_description: Option<String>,
}

/// The client side of RFC 8693 at one authorization server: its token endpoint, the client's
/// identity (`client_secret_basic`, `client_secret_post` or `private_key_jwt`), the bound on each
/// request. Cheap to clone.
#[derive(Clone)]
pub struct TokenExchange {
    inner: Arc<ExchangeInner>,
}

struct ExchangeInner {
    endpoint: Url,
    issuer: String,
    client_id: String,
    secret: Option<String>,
    key: Option<SigningKey>,
    method: ClientAuthMethod,
    http: reqwest::Client,
    timeout: Duration,
}

impl fmt::Debug for TokenExchange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenExchange")
            .field("token_endpoint", &self.inner.endpoint.as_str())
            .field("issuer", &self.inner.issuer)
            .field("client_id", &self.inner.client_id)
            .field("method", &self.inner.method)
            .field("timeout", &self.inner.timeout)
            .finish()
    }
}

/// How a [`TokenExchange`] is built: the authorization server, the client, the bounds.
#[derive(Clone)]
pub struct TokenExchangeConfig {
    token_endpoint: String,
    issuer: String,
    client_id: String,
    secret: Option<String>,
    key: Option<SigningKey>,
    method: ClientAuthMethod,
    http: Option<reqwest::Client>,
    timeout: Duration,
    url_policy: UrlPolicy,
}

impl fmt::Debug for TokenExchangeConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenExchangeConfig")
            .field("token_endpoint", &self.token_endpoint)
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("secret", &self.secret.as_ref().map(|_| "<redacted>"))
            .field("key", &self.key)
            .field("method", &self.method)
            .field("timeout", &self.timeout)
            .field("url_policy", &self.url_policy)
            .finish()
    }
}

impl TokenExchangeConfig {
    fn new(token_endpoint: &str, issuer: &str, client_id: &str, method: ClientAuthMethod) -> Self {
        TokenExchangeConfig {
            token_endpoint: token_endpoint.to_owned(),
            issuer: issuer.to_owned(),
            client_id: client_id.to_owned(),
            secret: None,
            key: None,
            method,
            http: None,
            timeout: Duration::from_secs(30),
            url_policy: UrlPolicy::strict(),
        }
    }
    /// The client `client_id` with `secret` (`client_secret_basic`; see
    /// [`auth_method`](Self::auth_method)) at the token endpoint of the authorization server
    /// `issuer`.
    pub fn client_secret(
        token_endpoint: &str,
        issuer: &str,
        client_id: &str,
        secret: impl Into<String>,
    ) -> Self {
        let mut c = Self::new(
            token_endpoint,
            issuer,
            client_id,
            ClientAuthMethod::ClientSecretBasic,
        );
        c.secret = Some(secret.into());
        c
    }
    /// The client `client_id` authenticating with a JWT signed by `key` (`private_key_jwt`, its
    /// `aud` the token endpoint URL).
    pub fn private_key_jwt(
        token_endpoint: &str,
        issuer: &str,
        client_id: &str,
        key: SigningKey,
    ) -> Self {
        let mut c = Self::new(
            token_endpoint,
            issuer,
            client_id,
            ClientAuthMethod::PrivateKeyJwt,
        );
        c.key = Some(key);
        c
    }
    /// `client_secret_basic` (the default with a secret) or `client_secret_post`.
    pub fn auth_method(mut self, method: ClientAuthMethod) -> Self {
        self.method = method;
        self
    }
    /// The bound on each exchange, end to end (default 30 s).
    pub fn request_timeout(mut self, d: Duration) -> Self {
        self.timeout = d;
        self
    }
    /// Which token endpoint URLs are accepted (default [`UrlPolicy::strict`]: https only; plain
    /// http only on a loopback host with [`UrlPolicy::allow_loopback`]).
    pub fn url_policy(mut self, policy: UrlPolicy) -> Self {
        self.url_policy = policy;
        self
    }
    /// The HTTP client (it must not follow redirects). Default: one of purra's own.
    pub fn http_client(mut self, client: reqwest::Client) -> Self {
        self.http = Some(client);
        self
    }
    /// Checks the configuration and builds the client.
    pub fn build(self) -> Result<TokenExchange, AuthError> {
        let endpoint = Url::parse(&self.token_endpoint).map_err(|e| {
            config_error(format!(
                "invalid token endpoint {:?}: {e}",
                self.token_endpoint
            ))
        })?;
        if !secure_or_loopback(&endpoint) {
            return Err(config_error(format!(
                "the token endpoint {endpoint} {HTTPS_ONLY}"
            )));
        }
        // Configured by the operator: the scheme is checked, not the address.
        self.url_policy.check_url(&endpoint, true)?;
        let issuer = Url::parse(&self.issuer)
            .map_err(|e| config_error(format!("invalid issuer {:?}: {e}", self.issuer)))?;
        if issuer.origin() != endpoint.origin() {
            return Err(config_error(format!(
                "the token endpoint {endpoint} is not on the issuer's origin ({})",
                self.issuer
            )));
        }
        if self.client_id.is_empty() {
            return Err(config_error("token exchange needs a client id"));
        }
        match self.method {
            ClientAuthMethod::ClientSecretBasic | ClientAuthMethod::ClientSecretPost
                if self.secret.is_none() =>
            {
                return Err(config_error(format!(
                    "{} needs a client secret",
                    self.method
                )))
            }
            ClientAuthMethod::PrivateKeyJwt if self.key.is_none() => {
                return Err(config_error("private_key_jwt needs a signing key"))
            }
            ClientAuthMethod::None => {
                return Err(config_error(
                    "token exchange needs an authenticated client (a secret or a signing key)",
                ))
            }
            _ => {}
        }
        let http = match self.http {
            Some(c) => c,
            None => reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .connect_timeout(Duration::from_secs(10))
                .build()
                .map_err(|e| config_error(format!("HTTP client: {}", error_chain(&e))))?,
        };
        Ok(TokenExchange {
            inner: Arc::new(ExchangeInner {
                endpoint,
                issuer: self.issuer,
                client_id: self.client_id,
                secret: self.secret,
                key: self.key,
                method: self.method,
                http,
                timeout: self.timeout,
            }),
        })
    }
}

/// `text` with every occurrence of the secrets in it replaced: an error description an
/// authorization server wrote never carries a token back out.
fn scrub(text: &str, secrets: &[&str]) -> String {
    let mut out = text.to_owned();
    for s in secrets.iter().filter(|s| s.len() >= 8) {
        out = out.replace(s, "<redacted>");
    }
    out
}

/// The `exp` claim of a JWT, read without checking anything (only to expire a token sooner).
fn jwt_exp(token: &str) -> Option<u64> {
    super::unverified_jwt_claims(token)?.get("exp")?.as_u64()
}

impl TokenExchange {
    /// The client id it authenticates as.
    pub fn client_id(&self) -> &str {
        &self.inner.client_id
    }

    /// Exchanges `request.subject_token` once. An answer other than 2xx is
    /// [`AuthError::Token`] with the authorization server's `error` code (and its description,
    /// bounded, with any token of the request taken out); a transport failure, a timeout or an
    /// unreadable answer is [`AuthError::Token`] too (`request_failed`, `invalid_response`).
    pub async fn exchange(&self, request: &ExchangeRequest) -> Result<ExchangedToken, AuthError> {
        let inner = &self.inner;
        let mut form: Vec<(&str, String)> = vec![
            ("grant_type", TOKEN_EXCHANGE_GRANT.to_owned()),
            ("subject_token", request.subject_token.clone()),
            ("subject_token_type", request.subject_token_type.clone()),
        ];
        if let Some((token, ty)) = &request.actor_token {
            form.push(("actor_token", token.clone()));
            form.push(("actor_token_type", ty.clone()));
        }
        for a in &request.audience {
            form.push(("audience", a.clone()));
        }
        for r in &request.resource {
            form.push(("resource", r.clone()));
        }
        if let Some(s) = &request.scope {
            form.push(("scope", s.clone()));
        }
        if let Some(t) = &request.requested_token_type {
            form.push(("requested_token_type", t.clone()));
        }
        let mut rb = inner
            .http
            .post(inner.endpoint.clone())
            .header("accept", "application/json");
        match inner.method {
            ClientAuthMethod::ClientSecretBasic => {
                let secret = inner.secret.as_deref().unwrap_or("");
                let mut value = reqwest::header::HeaderValue::from_str(&format!(
                    "Basic {}",
                    b64(
                        format!("{}:{}", url_encode(&inner.client_id), url_encode(secret))
                            .as_bytes()
                    )
                ))
                .map_err(|_| config_error("the client id or secret cannot go in a header"))?;
                value.set_sensitive(true);
                rb = rb.header("authorization", value);
            }
            ClientAuthMethod::ClientSecretPost => {
                form.push(("client_id", inner.client_id.clone()));
                form.push(("client_secret", inner.secret.clone().unwrap_or_default()));
            }
            ClientAuthMethod::PrivateKeyJwt => {
                let key = inner.key.as_ref().expect("checked in build");
                let now = now_secs();
                // `aud`: the token endpoint URL (RFC 7523 section 3, OpenID Connect Core 9).
                let assertion = key.sign(&json!({
                    "iss": inner.client_id, "sub": inner.client_id, "aud": inner.endpoint.as_str(),
                    "iat": now, "exp": now + 300, "jti": random_string(16),
                }))?;
                form.push(("client_id", inner.client_id.clone()));
                form.push((
                    "client_assertion_type",
                    "urn:ietf:params:oauth:client-assertion-type:jwt-bearer".to_owned(),
                ));
                form.push(("client_assertion", assertion));
            }
            ClientAuthMethod::None => unreachable!("refused in build"),
        }
        let secrets: Vec<&str> = std::iter::once(request.subject_token.as_str())
            .chain(request.actor_token.as_ref().map(|(t, _)| t.as_str()))
            .chain(inner.secret.as_deref())
            .collect();
        let (status, bytes) =
            exchange(rb.form(&form), inner.timeout)
                .await
                .map_err(|e| match e {
                    ExchangeError::Body(why) => AuthError::Token {
                        error: "invalid_response".into(),
                        description: Some(scrub(&why, &secrets)),
                    },
                    e => AuthError::Token {
                        error: "request_failed".into(),
                        description: Some(scrub(
                            &format!("POST {}: {e}", inner.endpoint),
                            &secrets,
                        )),
                    },
                })?;
        if !status.is_success() {
            let e: Option<ErrorBody> = serde_json::from_slice(&bytes).ok();
            let (error, description) = e
                .map(|e| (e.error, e.error_description))
                .unwrap_or_default();
            return Err(AuthError::Token {
                error: error
                    .map(|e| scrub(&bounded(&e, 64), &secrets))
                    .unwrap_or_else(|| format!("status {}", status.as_u16())),
                description: description.map(|d| scrub(&bounded(&d, 200), &secrets)),
            });
        }
        let t: ExchangeResponse = serde_json::from_slice(&bytes).map_err(|_| AuthError::Token {
            error: "invalid_response".into(),
            description: Some("the token exchange response is not the JSON expected".into()),
        })?;
        let issued_token_type = t.issued_token_type.ok_or_else(|| AuthError::Token {
            error: "invalid_response".into(),
            description: Some("the token exchange response has no issued_token_type".into()),
        })?;
        let token_type = t.token_type.unwrap_or_else(|| "Bearer".to_owned());
        if !token_type.eq_ignore_ascii_case("bearer") && token_type != "N_A" {
            return Err(AuthError::Token {
                error: "unsupported_token_type".into(),
                description: Some(format!(
                    "token type {:?} is not Bearer",
                    bounded(&token_type, 32)
                )),
            });
        }
        let expires_in = match &t.expires_in {
            Some(serde_json::Value::Number(n)) => n.as_u64(),
            Some(serde_json::Value::String(s)) => s.parse().ok(),
            _ => None,
        };
        let by_expires_in = expires_in.map(|s| now_secs() + s);
        let expires_at = match (by_expires_in, jwt_exp(&t.access_token)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Ok(ExchangedToken {
            access_token: t.access_token,
            issued_token_type,
            token_type,
            expires_at,
            scope: t.scope.or_else(|| request.scope.clone()),
        })
    }
}

/// What an [`ExchangeCache`] entry is keyed by: the principal, a digest of the subject token
/// (never the token), the audience and resource, and the scope.
#[derive(Clone, PartialEq, Eq, Hash)]
struct CacheKey {
    principal: String,
    subject: [u8; 32],
    target: Vec<String>,
    scope: Option<String>,
}

struct Entry {
    slot: Arc<tokio::sync::Mutex<Option<ExchangedToken>>>,
    used: Instant,
}

/// The default bound on an [`ExchangeCache`]'s entries.
pub const DEFAULT_EXCHANGE_CACHE_ENTRIES: usize = 10_000;

/// Exchanged tokens per principal, subject token, upstream (audience and resource) and scope,
/// reused until `refresh_before` their expiry. An entry is never shared across principals: the
/// key holds the principal's stable id and a SHA-256 digest of the subject token (never the
/// token). Concurrent misses for one key make one exchange (the others wait for it); a failed
/// exchange is not kept. At most `max_entries` keys are held (the least recently used go first).
#[derive(Clone)]
pub struct ExchangeCache {
    inner: Arc<CacheInner>,
}

struct CacheInner {
    exchange: TokenExchange,
    refresh_before: Duration,
    max_entries: usize,
    entries: Mutex<HashMap<CacheKey, Entry>>,
    exchanges: std::sync::atomic::AtomicU64,
}

impl fmt::Debug for ExchangeCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExchangeCache")
            .field("exchange", &self.inner.exchange)
            .field("refresh_before", &self.inner.refresh_before)
            .field("max_entries", &self.inner.max_entries)
            .finish()
    }
}

impl ExchangeCache {
    /// A cache in front of `exchange`: tokens are exchanged again 60 s before they expire, at
    /// most [`DEFAULT_EXCHANGE_CACHE_ENTRIES`] are held.
    pub fn new(exchange: TokenExchange) -> Self {
        Self::with_bounds(
            exchange,
            Duration::from_secs(60),
            DEFAULT_EXCHANGE_CACHE_ENTRIES,
        )
    }

    /// A cache that exchanges again `refresh_before` a token's expiry and holds at most
    /// `max_entries` keys (at least 1).
    pub fn with_bounds(
        exchange: TokenExchange,
        refresh_before: Duration,
        max_entries: usize,
    ) -> Self {
        ExchangeCache {
            inner: Arc::new(CacheInner {
                exchange,
                refresh_before,
                max_entries: max_entries.max(1),
                entries: Mutex::new(HashMap::new()),
                exchanges: std::sync::atomic::AtomicU64::new(0),
            }),
        }
    }

    /// The exchange it uses.
    pub fn exchange(&self) -> &TokenExchange {
        &self.inner.exchange
    }

    /// How many exchanges it has asked for, failed ones included (hits do not count).
    pub fn exchanges(&self) -> u64 {
        self.inner
            .exchanges
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How many keys it holds.
    pub fn len(&self) -> usize {
        self.inner.entries.lock().expect("exchange cache").len()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every token held for `principal` (signed out, revoked).
    pub fn forget(&self, principal: &str) {
        self.inner
            .entries
            .lock()
            .expect("exchange cache")
            .retain(|k, _| k.principal != principal);
    }

    fn fresh(&self, t: &ExchangedToken) -> bool {
        match t.expires_at {
            Some(at) => now_secs() + self.inner.refresh_before.as_secs() < at,
            // No expiry said: kept until forgotten or evicted.
            None => true,
        }
    }

    /// The token for `principal` (its stable id) calling the upstream `request` names: the one
    /// held while it is fresh, else a new exchange (one per key at a time).
    pub async fn token(
        &self,
        principal: &str,
        request: &ExchangeRequest,
    ) -> Result<ExchangedToken, AuthError> {
        let mut target: Vec<String> = request
            .audience
            .iter()
            .map(|a| format!("a:{a}"))
            .chain(request.resource.iter().map(|r| format!("r:{r}")))
            .collect();
        target.sort();
        let key = CacheKey {
            principal: principal.to_owned(),
            subject: Sha256::digest(request.subject_token.as_bytes()).into(),
            target,
            scope: request.scope.clone(),
        };
        let slot = {
            let mut entries = self.inner.entries.lock().expect("exchange cache");
            if !entries.contains_key(&key) && entries.len() >= self.inner.max_entries {
                self.evict(&mut entries);
            }
            let e = entries.entry(key).or_insert_with(|| Entry {
                slot: Arc::new(tokio::sync::Mutex::new(None)),
                used: Instant::now(),
            });
            e.used = Instant::now();
            e.slot.clone()
        };
        // Held across the exchange on purpose: the other callers for this key wait for it.
        let mut held = slot.lock().await;
        if let Some(t) = held.as_ref().filter(|t| self.fresh(t)) {
            return Ok(t.clone());
        }
        self.inner
            .exchanges
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let t = self.inner.exchange.exchange(request).await?;
        *held = Some(t.clone());
        Ok(t)
    }

    /// Makes room for one entry: drops those whose token is no longer fresh and nobody waits
    /// on, then the least recently used.
    fn evict(&self, entries: &mut HashMap<CacheKey, Entry>) {
        entries.retain(|_, e| match e.slot.try_lock() {
            Ok(held) => held.as_ref().is_some_and(|t| self.fresh(t)),
            Err(_) => true,
        });
        while entries.len() >= self.inner.max_entries {
            let Some(oldest) = entries
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            entries.remove(&oldest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrub_takes_tokens_out() {
        assert_eq!(
            scrub("token abcdefghij is bad", &["abcdefghij"]),
            "token <redacted> is bad"
        );
        // Short strings are not scrubbed (they would eat ordinary words).
        assert_eq!(scrub("a b", &["a"]), "a b");
    }

    #[test]
    fn jwt_exp_reads_the_claim() {
        let payload = super::super::b64url(br#"{"exp":1234,"sub":"x"}"#);
        assert_eq!(jwt_exp(&format!("e30.{payload}.sig")), Some(1234));
        assert_eq!(jwt_exp("opaque-token"), None);
        assert_eq!(jwt_exp("a.b"), None);
    }

    #[test]
    fn debug_shows_no_token() {
        let r = ExchangeRequest::new("secret-subject-token").actor_token("secret-actor", "t");
        let d = format!("{r:?}");
        assert!(!d.contains("secret-subject-token") && !d.contains("secret-actor"));
    }
}
