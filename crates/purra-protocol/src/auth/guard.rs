//! The resource-server guard: a tower layer ([`AuthLayer`]) in front of the Streamable HTTP
//! server (or any axum service) that serves the protected resource metadata (RFC 9728), checks
//! the bearer token of every other request with a [`TokenValidator`] ([`JwtValidator`]:
//! signature against the issuer's JWKS, issuer, audience, expiry; [`Introspection`]: RFC 7662),
//! answers 401/403 with the challenges MCP clients follow, enforces per-tool scopes, and puts
//! the [`Principal`] into the request's extensions.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes, HttpBody};
use axum::http::{header, HeaderMap, Method, Request, Response, StatusCode};
use reqwest::Url;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::jwt::{self, Jwk, JwkSet, SigningAlgorithm};
use super::metadata::{
    authorization_server_metadata_urls, first_found, AuthorizationServerMetadata,
};
use super::policy::{secure_or_loopback, HTTPS_ONLY};
use super::{
    b64, bounded, exchange, get_json, now_secs, BearerChallenge, ExchangeError,
    ProtectedResourceMetadata,
};
use crate::error::AuthError;
use crate::principal::Principal;
use crate::session::BoxFuture;

/// Why a token was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenRejection {
    /// The token is not valid here (401 `invalid_token`); the text goes to the client as
    /// `error_description` and never contains the token.
    Invalid(String),
    /// The token could not be checked now (the JWKS or the introspection endpoint is
    /// unreachable): 503, so a client does not throw a good token away.
    Unavailable(String),
}

impl fmt::Display for TokenRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenRejection::Invalid(why) => write!(f, "invalid token: {why}"),
            TokenRejection::Unavailable(why) => write!(f, "token validation unavailable: {why}"),
        }
    }
}

/// The prefix of the subject of a client-only token (one without `sub`, such as some
/// client-credentials tokens): its [`Principal::subject`] is `client:CLIENT_ID`. A token whose
/// own `sub` starts with it is refused, so a client named `alice` never takes the identity of
/// the user `alice` (nor of a user whose subject is literally `client:alice`).
pub const CLIENT_SUBJECT_PREFIX: &str = "client:";

/// Turns a bearer token into a [`Principal`], or refuses it. The futures are boxed so
/// `Arc<dyn TokenValidator>` works.
pub trait TokenValidator: Send + Sync + 'static {
    /// Validates `token`.
    fn validate<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Principal, TokenRejection>>;

    /// Validates `token` sent from `peer`, the client's address when the listener knows it
    /// ([`PeerAddr`](crate::http::PeerAddr)): a validator that bounds its work per client
    /// ([`Introspection`]) tells clients apart by it. By default the address is not used.
    fn validate_from<'a>(
        &'a self,
        token: &'a str,
        peer: Option<IpAddr>,
    ) -> BoxFuture<'a, Result<Principal, TokenRejection>> {
        let _ = peer;
        self.validate(token)
    }
}

/// The scopes of a token's claims: `scope` (space-separated) or `scp` (an array or a string).
fn claim_scopes(claims: &Map<String, Value>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for key in ["scope", "scp"] {
        match claims.get(key) {
            Some(Value::String(s)) => out.extend(s.split_ascii_whitespace().map(str::to_owned)),
            Some(Value::Array(a)) => {
                out.extend(a.iter().filter_map(Value::as_str).map(str::to_owned))
            }
            _ => {}
        }
    }
    out
}

fn claim_u64(claims: &Map<String, Value>, key: &str) -> Option<u64> {
    match claims.get(key)? {
        Value::Number(n) => n.as_u64().or_else(|| n.as_f64().map(|f| f.max(0.0) as u64)),
        _ => None,
    }
}

fn audience_matches(claims: &Map<String, Value>, wanted: &[String]) -> bool {
    let norm = |s: &str| s.trim_end_matches('/').to_owned();
    let wanted: Vec<String> = wanted.iter().map(|w| norm(w)).collect();
    let has = |a: &str| wanted.contains(&norm(a));
    match claims.get("aud") {
        Some(Value::String(a)) => has(a),
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).any(has),
        _ => false,
    }
}

/// The principal of validated claims: subject (`sub`; for a token without one, a client-only
/// token, `client:` and the client id, see [`CLIENT_SUBJECT_PREFIX`]), scopes, client id
/// (`client_id`, else `azp`), issuer, expiry. A `sub` that itself starts with `client:` is
/// refused, so no user's subject is ever a client's.
fn principal_of(claims: Map<String, Value>) -> Result<Principal, TokenRejection> {
    let s = |k: &str| claims.get(k).and_then(Value::as_str).map(str::to_owned);
    let client_id = s("client_id").or_else(|| s("azp"));
    let subject = match s("sub") {
        Some(sub) if sub.starts_with(CLIENT_SUBJECT_PREFIX) => {
            return Err(TokenRejection::Invalid(
                "the token's subject starts with `client:`, which names client-only tokens".into(),
            ))
        }
        Some(sub) => sub,
        None => match &client_id {
            Some(id) => format!("{CLIENT_SUBJECT_PREFIX}{id}"),
            None => return Err(TokenRejection::Invalid("the token names no subject".into())),
        },
    };
    let mut p = Principal::new(subject);
    p.issuer = s("iss");
    p.scopes = claim_scopes(&claims);
    p.client_id = client_id;
    p.expires_at = claim_u64(&claims, "exp");
    p.claims = claims;
    Ok(p)
}

/// The time checks shared by both validators: `exp` (required for JWTs), `nbf`, with `leeway`.
fn check_times(
    claims: &Map<String, Value>,
    leeway: Duration,
    exp_required: bool,
) -> Result<(), TokenRejection> {
    let now = now_secs();
    let leeway = leeway.as_secs();
    match claim_u64(claims, "exp") {
        Some(exp) if now >= exp.saturating_add(leeway) => {
            return Err(TokenRejection::Invalid("the token has expired".into()))
        }
        None if exp_required => {
            return Err(TokenRejection::Invalid("the token has no expiry".into()))
        }
        _ => {}
    }
    if claim_u64(claims, "nbf").is_some_and(|nbf| nbf > now + leeway) {
        return Err(TokenRejection::Invalid("the token is not valid yet".into()));
    }
    Ok(())
}

/// The bound on each request to the authorization server (metadata, JWKS, introspection), end
/// to end, whatever HTTP client the caller gives.
const FETCH_TIMEOUT: Duration = Duration::from_secs(30);

fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(10))
        .timeout(FETCH_TIMEOUT)
        .build()
        .expect("an HTTP client with rustls")
}

/// `url` parsed, when it may name an issuer or one of its endpoints (https, or plain http on a
/// loopback host).
fn secure_url(what: &str, url: &str) -> Result<Url, AuthError> {
    let u = Url::parse(url).map_err(|e| AuthError::Config(format!("{what} {url:?}: {e}")))?;
    if !secure_or_loopback(&u) {
        return Err(AuthError::Config(format!("{what} {url:?} {HTTPS_ONLY}")));
    }
    Ok(u)
}

struct JwksCache {
    keys: Arc<Vec<Jwk>>,
    fetched: Option<Instant>,
    jwks_uri: Option<Url>,
    /// The last failed fetch and how many failed in a row since the last one that worked: no
    /// fetch is tried again before [`jwks_backoff`] has passed since it.
    failed: Option<(Instant, u32)>,
}

/// The longest wait between two JWKS fetches after failures.
const MAX_JWKS_BACKOFF: Duration = Duration::from_secs(300);

/// How long no JWKS fetch is tried after the `failures`-th failure in a row: `min_refresh` (at
/// least one second), doubled for each further failure, at most [`MAX_JWKS_BACKOFF`] (or
/// `min_refresh` when that is longer).
fn jwks_backoff(min_refresh: Duration, failures: u32) -> Duration {
    let base = min_refresh.max(Duration::from_secs(1));
    let doubled = base.saturating_mul(1u32 << failures.saturating_sub(1).min(16));
    doubled.min(MAX_JWKS_BACKOFF.max(base))
}

/// Validates JWT access tokens (RFC 9068) against the authorization server's JWKS: the header's
/// `typ` (`at+jwt`, so an ID token from the same issuer is no access token), the signature
/// (asymmetric algorithms only), `iss`, `aud` (must name this resource), `exp` and `nbf` within a
/// bounded clock skew. The JWKS is fetched on first use (from `jwks_uri`, or the
/// issuer's metadata), cached for `jwks_max_age`, and fetched again when a token names a key it
/// does not hold (rotation), at most once per `jwks_min_refresh`. A fetch that fails (the
/// metadata or the JWKS) is not tried again before `jwks_min_refresh` (at least a second) has
/// passed, doubled for each further failure in a row up to five minutes, whatever the tokens
/// name: meanwhile the keys fetched last are used (a token they do not verify is refused), or,
/// with none, tokens are answered as unavailable without a request.
pub struct JwtValidator {
    issuer: String,
    audience: Vec<String>,
    algorithms: Vec<SigningAlgorithm>,
    leeway: Duration,
    jwks_max_age: Duration,
    jwks_min_refresh: Duration,
    require_at_jwt: bool,
    http: reqwest::Client,
    cache: Mutex<JwksCache>,
    /// One JWKS fetch at a time (a gate held across the fetch; it guards no data).
    fetching: tokio::sync::Mutex<()>,
}

impl fmt::Debug for JwtValidator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JwtValidator")
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field("algorithms", &self.algorithms)
            .field("leeway", &self.leeway)
            .finish()
    }
}

impl JwtValidator {
    /// Accepts tokens issued by `issuer` for `audience` (the resource identifier, the MCP
    /// server's URL). The issuer must be an https URL (plain http only on a loopback host, for
    /// development): its metadata and keys decide which tokens pass.
    pub fn new(issuer: impl Into<String>, audience: impl Into<String>) -> Result<Self, AuthError> {
        let issuer = issuer.into();
        secure_url("the issuer", &issuer)?;
        Ok(JwtValidator {
            issuer,
            audience: vec![audience.into()],
            algorithms: vec![
                SigningAlgorithm::RS256,
                SigningAlgorithm::RS384,
                SigningAlgorithm::RS512,
                SigningAlgorithm::PS256,
                SigningAlgorithm::PS384,
                SigningAlgorithm::PS512,
                SigningAlgorithm::ES256,
                SigningAlgorithm::ES384,
                SigningAlgorithm::EdDSA,
            ],
            leeway: Duration::from_secs(30),
            jwks_max_age: Duration::from_secs(600),
            jwks_min_refresh: Duration::from_secs(10),
            require_at_jwt: true,
            http: http_client(),
            cache: Mutex::new(JwksCache {
                keys: Arc::new(Vec::new()),
                fetched: None,
                jwks_uri: None,
                failed: None,
            }),
            fetching: tokio::sync::Mutex::new(()),
        })
    }
    /// The JWKS URL (otherwise read from the issuer's metadata); https, or plain http on a
    /// loopback host.
    pub fn jwks_uri(self, url: &str) -> Result<Self, AuthError> {
        let u = secure_url("jwks_uri", url)?;
        self.cache.lock().expect("jwks lock").jwks_uri = Some(u);
        Ok(self)
    }
    /// Another accepted audience.
    pub fn also_audience(mut self, audience: impl Into<String>) -> Self {
        self.audience.push(audience.into());
        self
    }
    /// The signature algorithms accepted (default: every asymmetric one purra knows).
    pub fn algorithms(mut self, algorithms: impl IntoIterator<Item = SigningAlgorithm>) -> Self {
        self.algorithms = algorithms.into_iter().collect();
        self
    }
    /// The clock skew allowed on `exp` and `nbf` (default 30 s).
    pub fn leeway(mut self, d: Duration) -> Self {
        self.leeway = d;
        self
    }
    /// How long a fetched JWKS is used before it is fetched again (default 10 minutes).
    pub fn jwks_max_age(mut self, d: Duration) -> Self {
        self.jwks_max_age = d;
        self
    }
    /// The shortest interval between two fetches prompted by unknown keys (default 10 s), and
    /// the first wait after a failed fetch (at least a second, doubled for each further failure
    /// up to five minutes): a stream of tokens naming made-up keys cannot make the guard hammer
    /// the JWKS endpoint, whether it answers or not.
    pub fn jwks_min_refresh(mut self, d: Duration) -> Self {
        self.jwks_min_refresh = d;
        self
    }
    /// Whether the header's `typ` must be `at+jwt` (RFC 9068; default true). Off, any JWT the
    /// issuer signs for this audience passes, an ID token among them (`typ: JWT`, audience the
    /// client id): turn it off only for an authorization server that does not type its access
    /// tokens and never issues ID tokens whose audience is this resource.
    pub fn require_at_jwt(mut self, yes: bool) -> Self {
        self.require_at_jwt = yes;
        self
    }
    /// The HTTP client for the JWKS and metadata.
    pub fn http_client(mut self, client: reqwest::Client) -> Self {
        self.http = client;
        self
    }

    /// The keys, fetched again when `stale` says the cache is not good enough.
    async fn keys(&self, unknown_key: bool) -> Result<Arc<Vec<Jwk>>, TokenRejection> {
        let fresh_enough = |c: &JwksCache| match c.fetched {
            None => false,
            Some(at) if unknown_key => at.elapsed() < self.jwks_min_refresh,
            Some(at) => at.elapsed() < self.jwks_max_age,
        };
        // Fresh enough, or not to be fetched yet after a failure: the keys held (none held:
        // unavailable, without a request).
        let held = |c: &JwksCache| -> Option<Result<Arc<Vec<Jwk>>, TokenRejection>> {
            if fresh_enough(c) {
                return Some(Ok(c.keys.clone()));
            }
            let (at, failures) = c.failed?;
            let wait = jwks_backoff(self.jwks_min_refresh, failures);
            let left = wait.checked_sub(at.elapsed()).filter(|l| !l.is_zero())?;
            Some(if c.fetched.is_some() {
                Ok(c.keys.clone())
            } else {
                Err(TokenRejection::Unavailable(format!(
                    "the JWKS could not be fetched; it is asked for again in {} s",
                    left.as_secs().max(1)
                )))
            })
        };
        if let Some(r) = held(&self.cache.lock().expect("jwks lock")) {
            return r;
        }
        let _one = self.fetching.lock().await;
        let jwks_uri = {
            let c = self.cache.lock().expect("jwks lock");
            if let Some(r) = held(&c) {
                return r;
            }
            c.jwks_uri.clone()
        };
        let fetched = self.fetch_keys(jwks_uri).await;
        let mut c = self.cache.lock().expect("jwks lock");
        match &fetched {
            Ok(keys) => {
                c.keys = keys.clone();
                c.fetched = Some(Instant::now());
                c.failed = None;
            }
            Err(_) => {
                let failures = c.failed.map_or(0, |(_, n)| n).saturating_add(1);
                c.failed = Some((Instant::now(), failures));
            }
        }
        fetched
    }

    /// One fetch of the JWKS (from `jwks_uri`, or the issuer's metadata first).
    async fn fetch_keys(&self, jwks_uri: Option<Url>) -> Result<Arc<Vec<Jwk>>, TokenRejection> {
        let jwks_uri = match jwks_uri {
            Some(u) => u,
            None => {
                let issuer = Url::parse(&self.issuer)
                    .map_err(|_| TokenRejection::Unavailable("the issuer is not a URL".into()))?;
                let meta = first_found::<AuthorizationServerMetadata>(
                    &self.http,
                    &authorization_server_metadata_urls(&issuer),
                    FETCH_TIMEOUT,
                )
                .await
                .map_err(|e| TokenRejection::Unavailable(e.to_string()))?
                .ok_or_else(|| {
                    TokenRejection::Unavailable("the issuer publishes no metadata".into())
                })?
                .1;
                let uri = meta.jwks_uri.ok_or_else(|| {
                    TokenRejection::Unavailable("the issuer's metadata has no jwks_uri".into())
                })?;
                let u = Url::parse(&uri).map_err(|_| {
                    TokenRejection::Unavailable("the issuer's jwks_uri is not a URL".into())
                })?;
                if !secure_or_loopback(&u) {
                    return Err(TokenRejection::Unavailable(format!(
                        "the issuer's jwks_uri {HTTPS_ONLY}"
                    )));
                }
                self.cache.lock().expect("jwks lock").jwks_uri = Some(u.clone());
                u
            }
        };
        let set = get_json::<JwkSet>(&self.http, &jwks_uri, &[], FETCH_TIMEOUT)
            .await
            .map_err(TokenRejection::Unavailable)?
            .ok_or_else(|| TokenRejection::Unavailable("the JWKS could not be fetched".into()))?;
        Ok(Arc::new(set.keys))
    }

    async fn check(&self, token: &str) -> Result<Principal, TokenRejection> {
        let d = jwt::decode(token).map_err(|e| TokenRejection::Invalid(e.into()))?;
        let alg = SigningAlgorithm::from_name(&d.header.alg)
            .filter(|a| self.algorithms.contains(a))
            .ok_or_else(|| {
                TokenRejection::Invalid("the token's algorithm is not accepted".into())
            })?;
        if d.header.crit.is_some() {
            return Err(TokenRejection::Invalid(
                "the token has critical header parameters".into(),
            ));
        }
        if self.require_at_jwt
            && !matches!(
                d.header
                    .typ
                    .as_deref()
                    .map(str::to_ascii_lowercase)
                    .as_deref(),
                Some("at+jwt" | "application/at+jwt")
            )
        {
            return Err(TokenRejection::Invalid(
                "the token is not an access token (typ)".into(),
            ));
        }
        let input = &token.as_bytes()[..d.signing_input_len];
        let candidates = |keys: &[Jwk]| -> Vec<Jwk> {
            keys.iter()
                .filter(|k| d.header.kid.is_none() || k.kid == d.header.kid)
                .filter(|k| k.fits(alg))
                .cloned()
                .collect()
        };
        let mut keys = candidates(&self.keys(false).await?);
        if keys.is_empty() {
            // A key this cache does not hold: the issuer may have rotated its keys.
            keys = candidates(&self.keys(true).await?);
        }
        if keys.is_empty() {
            return Err(TokenRejection::Invalid(
                "the token is signed with an unknown key".into(),
            ));
        }
        if !keys.iter().any(|k| k.verify(alg, input, &d.signature)) {
            return Err(TokenRejection::Invalid(
                "the token's signature is invalid".into(),
            ));
        }
        let claims = d.claims;
        if claims.get("iss").and_then(Value::as_str) != Some(self.issuer.as_str()) {
            return Err(TokenRejection::Invalid(
                "the token is from another issuer".into(),
            ));
        }
        if !audience_matches(&claims, &self.audience) {
            return Err(TokenRejection::Invalid(
                "the token is for another resource".into(),
            ));
        }
        check_times(&claims, self.leeway, true)?;
        principal_of(claims)
    }
}

impl TokenValidator for JwtValidator {
    fn validate<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Principal, TokenRejection>> {
        Box::pin(self.check(token))
    }
}

/// How long an active introspection answer is used at most by default: 60 s.
pub const DEFAULT_INTROSPECTION_MAX_AGE: Duration = Duration::from_secs(60);
/// How long a refused introspection answer is used by default: 10 s.
pub const DEFAULT_INTROSPECTION_INACTIVE_TTL: Duration = Duration::from_secs(10);
/// How many introspection answers are kept by default: 10 000.
pub const DEFAULT_INTROSPECTION_MAX_ENTRIES: usize = 10_000;
/// How many introspections run at once for one client address by default: 4.
pub const DEFAULT_INTROSPECTIONS_PER_ADDRESS: usize = 4;

/// An introspection answer kept for a while, by the token's SHA-256.
struct Answer {
    /// The principal of an active token, or why the token was refused.
    result: Result<Principal, String>,
    until: Instant,
}

/// The answers kept, and the introspections running per client address.
#[derive(Default)]
struct Answers {
    by_token: HashMap<[u8; 32], Answer>,
    running: HashMap<Option<IpAddr>, Arc<tokio::sync::Semaphore>>,
}

/// Validates tokens by asking the authorization server (RFC 7662 token introspection), as a
/// client of its own (HTTP Basic). The answer must be `active`, name this resource in `aud`
/// (unless [`require_audience`](Self::require_audience) is off), and not be expired.
///
/// Answers are kept, by the token's SHA-256 (never the token itself), so that a token used
/// again is not introspected again: an active one until its `exp` and for at most
/// [`cache_max_age`](Self::cache_max_age) (default 60 s: a token revoked at the authorization
/// server is still accepted for up to that long), a refused one (not active, another audience
/// or issuer, expired) for [`cache_inactive`](Self::cache_inactive) (default 10 s); an
/// unavailable endpoint is not remembered. At most
/// [`cache_max_entries`](Self::cache_max_entries) answers are kept (default 10 000; when full,
/// the one ending first goes), and at most
/// [`max_concurrent_per_address`](Self::max_concurrent_per_address) introspections run at
/// once for one client address (default 4; the others wait), so a stream of made-up tokens
/// from one client cannot hammer the endpoint or starve other clients' checks.
pub struct Introspection {
    endpoint: String,
    client_id: String,
    client_secret: String,
    audience: Vec<String>,
    issuer: Option<String>,
    require_audience: bool,
    leeway: Duration,
    http: reqwest::Client,
    max_age: Duration,
    inactive_ttl: Duration,
    max_entries: usize,
    per_address: usize,
    answers: Mutex<Answers>,
}

impl fmt::Debug for Introspection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Introspection")
            .field("endpoint", &self.endpoint)
            .field("client_id", &self.client_id)
            .field("audience", &self.audience)
            .finish()
    }
}

impl Introspection {
    /// Introspects at `endpoint`, authenticating as `client_id` / `client_secret`, for tokens
    /// whose audience is `audience`.
    pub fn new(
        endpoint: impl Into<String>,
        client_id: impl Into<String>,
        client_secret: impl Into<String>,
        audience: impl Into<String>,
    ) -> Self {
        Introspection {
            endpoint: endpoint.into(),
            client_id: client_id.into(),
            client_secret: client_secret.into(),
            audience: vec![audience.into()],
            issuer: None,
            require_audience: true,
            leeway: Duration::from_secs(30),
            http: http_client(),
            max_age: DEFAULT_INTROSPECTION_MAX_AGE,
            inactive_ttl: DEFAULT_INTROSPECTION_INACTIVE_TTL,
            max_entries: DEFAULT_INTROSPECTION_MAX_ENTRIES,
            per_address: DEFAULT_INTROSPECTIONS_PER_ADDRESS,
            answers: Mutex::new(Answers::default()),
        }
    }
    /// The longest an active answer is used before the token is introspected again (default
    /// 60 s; never past the token's `exp`; zero: not kept).
    pub fn cache_max_age(mut self, d: Duration) -> Self {
        self.max_age = d;
        self
    }
    /// How long a refused answer is used before the token is introspected again (default
    /// 10 s; zero: not kept).
    pub fn cache_inactive(mut self, d: Duration) -> Self {
        self.inactive_ttl = d;
        self
    }
    /// How many answers are kept at most (default 10 000; zero: none).
    pub fn cache_max_entries(mut self, n: usize) -> Self {
        self.max_entries = n;
        self
    }
    /// How many introspections run at once for one client address (default 4, at least 1);
    /// further checks from that address wait for one to end.
    pub fn max_concurrent_per_address(mut self, n: usize) -> Self {
        self.per_address = n.max(1);
        self
    }

    /// The answer kept for `key`, while it lasts.
    fn kept(&self, key: &[u8; 32]) -> Option<Result<Principal, TokenRejection>> {
        let answers = self.answers.lock().unwrap_or_else(|p| p.into_inner());
        let a = answers.by_token.get(key)?;
        (a.until > Instant::now()).then(|| a.result.clone().map_err(TokenRejection::Invalid))
    }

    /// Keeps `result` for `key` (an unavailable endpoint is not kept).
    fn keep(&self, key: [u8; 32], result: &Result<Principal, TokenRejection>) {
        let now = Instant::now();
        let (kept, ttl) = match result {
            Ok(p) => {
                // Never past the token's expiry.
                let left = p.expires_at.map_or(self.max_age, |exp| {
                    Duration::from_secs(exp.saturating_sub(now_secs()))
                });
                (Ok(p.clone()), self.max_age.min(left))
            }
            Err(TokenRejection::Invalid(why)) => (Err(why.clone()), self.inactive_ttl),
            Err(TokenRejection::Unavailable(_)) => return,
        };
        if ttl.is_zero() || self.max_entries == 0 {
            return;
        }
        let mut answers = self.answers.lock().unwrap_or_else(|p| p.into_inner());
        let by_token = &mut answers.by_token;
        if by_token.len() >= self.max_entries && !by_token.contains_key(&key) {
            by_token.retain(|_, a| a.until > now);
            while by_token.len() >= self.max_entries {
                let Some(first) = by_token
                    .iter()
                    .min_by_key(|(_, a)| a.until)
                    .map(|(k, _)| *k)
                else {
                    break;
                };
                by_token.remove(&first);
            }
        }
        by_token.insert(
            key,
            Answer {
                result: kept,
                until: now + ttl,
            },
        );
    }

    /// A place among the introspections running for `peer`, waited for.
    async fn admit(&self, peer: Option<IpAddr>) -> Option<tokio::sync::OwnedSemaphorePermit> {
        let gate = {
            let mut answers = self.answers.lock().unwrap_or_else(|p| p.into_inner());
            // Addresses with nothing running are forgotten.
            answers.running.retain(|_, g| Arc::strong_count(g) > 1);
            answers
                .running
                .entry(peer)
                .or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(self.per_address)))
                .clone()
        };
        gate.acquire_owned().await.ok()
    }

    async fn check_from(
        &self,
        token: &str,
        peer: Option<IpAddr>,
    ) -> Result<Principal, TokenRejection> {
        if token.len() > jwt::MAX_TOKEN_BYTES {
            return Err(TokenRejection::Invalid("the token is too long".into()));
        }
        let key: [u8; 32] = ring::digest::digest(&ring::digest::SHA256, token.as_bytes())
            .as_ref()
            .try_into()
            .unwrap_or([0; 32]);
        if let Some(kept) = self.kept(&key) {
            return kept;
        }
        let _running = self.admit(peer).await;
        // Another check of the same token may have ended while this one waited.
        if let Some(kept) = self.kept(&key) {
            return kept;
        }
        let result = self.check(token).await;
        self.keep(key, &result);
        result
    }
    /// Requires the answer's `iss` (when present) to be `issuer`.
    pub fn issuer(mut self, issuer: impl Into<String>) -> Self {
        self.issuer = Some(issuer.into());
        self
    }
    /// Whether the answer must name this resource in `aud` (default true).
    pub fn require_audience(mut self, yes: bool) -> Self {
        self.require_audience = yes;
        self
    }
    /// The clock skew allowed on `exp` and `nbf` (default 30 s).
    pub fn leeway(mut self, d: Duration) -> Self {
        self.leeway = d;
        self
    }
    /// The HTTP client for introspection requests.
    pub fn http_client(mut self, client: reqwest::Client) -> Self {
        self.http = client;
        self
    }

    async fn check(&self, token: &str) -> Result<Principal, TokenRejection> {
        if token.len() > jwt::MAX_TOKEN_BYTES {
            return Err(TokenRejection::Invalid("the token is too long".into()));
        }
        let mut auth = reqwest::header::HeaderValue::from_str(&format!(
            "Basic {}",
            b64(format!("{}:{}", self.client_id, self.client_secret).as_bytes())
        ))
        .map_err(|_| TokenRejection::Unavailable("bad introspection credentials".into()))?;
        auth.set_sensitive(true);
        let rb = self
            .http
            .post(&self.endpoint)
            .header("authorization", auth)
            .header("accept", "application/json")
            .form(&[("token", token), ("token_type_hint", "access_token")]);
        let (status, body) = exchange(rb, FETCH_TIMEOUT)
            .await
            .map_err(|e: ExchangeError| {
                TokenRejection::Unavailable(format!("introspection: {e}"))
            })?;
        if !status.is_success() {
            return Err(TokenRejection::Unavailable(format!(
                "introspection answered {}",
                status.as_u16()
            )));
        }
        let claims: Map<String, Value> = serde_json::from_slice(&body).map_err(|_| {
            TokenRejection::Unavailable("introspection answered something that is not JSON".into())
        })?;
        if claims.get("active") != Some(&Value::Bool(true)) {
            return Err(TokenRejection::Invalid("the token is not active".into()));
        }
        if let (Some(want), Some(iss)) = (&self.issuer, claims.get("iss").and_then(Value::as_str)) {
            if iss != want {
                return Err(TokenRejection::Invalid(
                    "the token is from another issuer".into(),
                ));
            }
        }
        if self.require_audience && !audience_matches(&claims, &self.audience) {
            return Err(TokenRejection::Invalid(
                "the token is for another resource".into(),
            ));
        }
        check_times(&claims, self.leeway, false)?;
        principal_of(claims)
    }
}

impl TokenValidator for Introspection {
    fn validate<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Principal, TokenRejection>> {
        Box::pin(self.check_from(token, None))
    }

    fn validate_from<'a>(
        &'a self,
        token: &'a str,
        peer: Option<IpAddr>,
    ) -> BoxFuture<'a, Result<Principal, TokenRejection>> {
        Box::pin(self.check_from(token, peer))
    }
}

struct GuardConfig {
    resource: String,
    metadata_path: String,
    metadata_url: String,
    metadata_json: Bytes,
    validator: Arc<dyn TokenValidator>,
    required_scopes: BTreeSet<String>,
    tool_scopes: HashMap<String, BTreeSet<String>>,
    challenge_scope: Option<String>,
    max_body_bytes: usize,
    body_timeout: Duration,
}

/// The tower layer that guards an MCP endpoint (see the module documentation):
///
/// ```no_run
/// use purra_protocol::auth::{AuthLayer, JwtValidator};
/// use purra_protocol::{HttpServerConfig, Server, StreamableHttpServer};
///
/// # fn run(server: Server) -> Result<(), Box<dyn std::error::Error>> {
/// let resource = "https://mcp.example/mcp";
/// let issuer = "https://auth.example";
/// let guard = AuthLayer::new(resource, issuer, JwtValidator::new(issuer, resource)?)?
///     .required_scopes(["mcp:read"])
///     .tool_scopes("delete_file", ["mcp:write"]);
/// let app = StreamableHttpServer::new(server, HttpServerConfig::default())
///     .router()
///     .layer(guard);
/// # drop(app); Ok(()) }
/// ```
#[derive(Clone)]
pub struct AuthLayer {
    resource: String,
    metadata_path: String,
    metadata_url: String,
    metadata: ProtectedResourceMetadata,
    validator: Arc<dyn TokenValidator>,
    required_scopes: BTreeSet<String>,
    tool_scopes: HashMap<String, BTreeSet<String>>,
    max_body_bytes: usize,
    body_timeout: Duration,
}

impl fmt::Debug for AuthLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthLayer")
            .field("resource", &self.resource)
            .field("metadata_url", &self.metadata_url)
            .field("required_scopes", &self.required_scopes)
            .field("tool_scopes", &self.tool_scopes)
            .finish()
    }
}

impl AuthLayer {
    /// Guards the resource `resource` (the MCP endpoint's public URL, which tokens must name as
    /// their audience) with tokens from `authorization_server` (its issuer URL), checked by
    /// `validator`.
    pub fn new(
        resource: &str,
        authorization_server: &str,
        validator: impl TokenValidator,
    ) -> Result<Self, AuthError> {
        let url = Url::parse(resource)
            .map_err(|e| AuthError::Config(format!("resource {resource:?}: {e}")))?;
        secure_url("the authorization server", authorization_server)?;
        if url.fragment().is_some() || url.query().is_some() {
            return Err(AuthError::Config(format!(
                "the resource {resource:?} must have no query or fragment"
            )));
        }
        let path = url.path().trim_end_matches('/');
        let metadata_path = format!("/.well-known/oauth-protected-resource{path}");
        let metadata_url = format!("{}{metadata_path}", super::metadata::origin(&url));
        let resource = resource.trim_end_matches('/').to_owned();
        Ok(AuthLayer {
            metadata: ProtectedResourceMetadata::new(
                resource.clone(),
                vec![authorization_server.to_owned()],
            ),
            resource,
            metadata_path,
            metadata_url,
            validator: Arc::new(validator),
            required_scopes: BTreeSet::new(),
            tool_scopes: HashMap::new(),
            max_body_bytes: crate::transport::DEFAULT_MAX_FRAME_BYTES,
            body_timeout: Duration::from_secs(30),
        })
    }

    /// Scopes every request needs; a token without them is refused 403 `insufficient_scope`.
    /// They are also the `scope` of the 401 challenge.
    pub fn required_scopes<I, S>(mut self, scopes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.required_scopes
            .extend(scopes.into_iter().map(Into::into));
        self
    }

    /// Scopes a `tools/call` of `tool` needs besides the required ones; a token without them
    /// is refused 403 `insufficient_scope` naming every scope the call needs.
    pub fn tool_scopes<I, S>(mut self, tool: impl Into<String>, scopes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.tool_scopes
            .entry(tool.into())
            .or_default()
            .extend(scopes.into_iter().map(Into::into));
        self
    }

    /// The `scopes_supported` of the protected resource metadata; also the 401 challenge's
    /// `scope` when no scope is required.
    pub fn scopes_supported<I, S>(mut self, scopes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.metadata.scopes_supported = Some(scopes.into_iter().map(Into::into).collect());
        self
    }

    /// A name for people in the metadata.
    pub fn resource_name(mut self, name: impl Into<String>) -> Self {
        self.metadata.resource_name = Some(name.into());
        self
    }

    /// The bound on a request body the guard reads to find the tools called (only when
    /// per-tool scopes are set; default 4 MiB, like the server's).
    pub fn max_body_bytes(mut self, n: usize) -> Self {
        self.max_body_bytes = n;
        self
    }

    /// The URL of the protected resource metadata (what 401 challenges point to).
    pub fn metadata_url(&self) -> &str {
        &self.metadata_url
    }

    /// The path the metadata is served at (`/.well-known/oauth-protected-resource` + the
    /// resource's path).
    pub fn metadata_path(&self) -> &str {
        &self.metadata_path
    }

    /// Guards `inner` (what [`tower_layer::Layer::layer`] does, without the trait in scope).
    pub fn layer<S>(&self, inner: S) -> AuthService<S> {
        let challenge_scope = if !self.required_scopes.is_empty() {
            Some(
                self.required_scopes
                    .iter()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(" "),
            )
        } else {
            self.metadata
                .scopes_supported
                .as_ref()
                .filter(|s| !s.is_empty())
                .map(|s| s.join(" "))
        };
        AuthService {
            inner,
            config: Arc::new(GuardConfig {
                resource: self.resource.clone(),
                metadata_path: self.metadata_path.clone(),
                metadata_url: self.metadata_url.clone(),
                metadata_json: Bytes::from(serde_json::to_vec(&self.metadata).expect("JSON")),
                validator: self.validator.clone(),
                required_scopes: self.required_scopes.clone(),
                tool_scopes: self.tool_scopes.clone(),
                challenge_scope,
                max_body_bytes: self.max_body_bytes,
                body_timeout: self.body_timeout,
            }),
        }
    }
}

impl<S> tower_layer::Layer<S> for AuthLayer {
    type Service = AuthService<S>;
    fn layer(&self, inner: S) -> AuthService<S> {
        AuthLayer::layer(self, inner)
    }
}

/// The service [`AuthLayer`] wraps around an MCP endpoint.
#[derive(Clone)]
pub struct AuthService<S> {
    inner: S,
    config: Arc<GuardConfig>,
}

impl<S> fmt::Debug for AuthService<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthService")
            .field("resource", &self.config.resource)
            .finish()
    }
}

/// A JSON response with `status`, the body, and extra headers.
fn json_response(
    status: StatusCode,
    body: Value,
    headers: &[(header::HeaderName, String)],
) -> Response<Body> {
    let mut resp = Response::new(Body::from(body.to_string()));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    h.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    for (k, v) in headers {
        if let Ok(v) = header::HeaderValue::from_str(v) {
            h.insert(k.clone(), v);
        }
    }
    resp
}

impl GuardConfig {
    /// 401: no token (no `error`, RFC 6750 section 3.1) or an invalid one.
    fn unauthorized(&self, why: Option<&str>) -> Response<Body> {
        let c = BearerChallenge {
            error: why.map(|_| "invalid_token".to_owned()),
            error_description: why.map(str::to_owned),
            scope: self.challenge_scope.clone(),
            resource_metadata: Some(self.metadata_url.clone()),
        };
        json_response(
            StatusCode::UNAUTHORIZED,
            json!({
                "error": if why.is_some() { "invalid_token" } else { "unauthorized" },
                "error_description": why.unwrap_or("authorization required"),
            }),
            &[(header::WWW_AUTHENTICATE, c.to_header())],
        )
    }

    /// 403 `insufficient_scope`, naming every scope the request needs.
    fn insufficient(&self, needed: &BTreeSet<String>) -> Response<Body> {
        let scope = needed.iter().cloned().collect::<Vec<_>>().join(" ");
        let c = BearerChallenge {
            error: Some("insufficient_scope".into()),
            error_description: Some(format!("this request needs scope {scope:?}")),
            scope: Some(scope.clone()),
            resource_metadata: Some(self.metadata_url.clone()),
        };
        json_response(
            StatusCode::FORBIDDEN,
            json!({
                "error": "insufficient_scope",
                "error_description": format!("this request needs scope {scope:?}"),
            }),
            &[(header::WWW_AUTHENTICATE, c.to_header())],
        )
    }

    fn metadata(&self) -> Response<Body> {
        let mut resp = Response::new(Body::from(self.metadata_json.clone()));
        let h = resp.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("application/json"),
        );
        h.insert(
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            header::HeaderValue::from_static("*"),
        );
        h.insert(
            header::CACHE_CONTROL,
            header::HeaderValue::from_static("max-age=3600"),
        );
        resp
    }
}

/// The bearer token of `Authorization`; `Err` for a header that is present but not a bearer
/// token (or several of them).
/// The bearer token an [`AuthLayer`] validated, beside the [`Principal`] it proved, in the HTTP
/// request's extensions (`RequestCtx::extension::<ValidatedToken>()`).
///
/// It is for a host that calls on as the caller, for instance the `subject_token` of an RFC 8693
/// token exchange; it is never to be forwarded itself. `Debug` prints `[redacted]`, and it is
/// neither `Display` nor `Serialize`, so it cannot reach a log line by accident.
#[derive(Clone)]
pub struct ValidatedToken(Arc<str>);

impl ValidatedToken {
    /// A validated token of a host's own authentication layer (one that validates tokens
    /// itself and puts this beside its [`Principal`]).
    pub fn from_secret(token: &str) -> Self {
        ValidatedToken(Arc::from(token))
    }

    /// The token as the caller sent it.
    pub fn secret(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ValidatedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ValidatedToken([redacted])")
    }
}

fn bearer(headers: &HeaderMap) -> Result<Option<&str>, &'static str> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let Some(v) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err("several Authorization headers");
    }
    let v = v
        .to_str()
        .map_err(|_| "the Authorization header is not text")?;
    let (scheme, token) = v
        .split_once(' ')
        .ok_or("the Authorization header is not a bearer token")?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err("the Authorization header is not a bearer token");
    }
    let token = token.trim();
    if token.is_empty() {
        return Err("the bearer token is empty");
    }
    Ok(Some(token))
}

/// The tools a JSON-RPC body calls (`tools/call`), one message or a batch; none when it is not
/// JSON (the server answers that).
fn tools_called(body: &[u8]) -> Vec<String> {
    #[derive(Deserialize)]
    struct Params {
        name: Option<String>,
    }
    #[derive(Deserialize)]
    struct Msg {
        method: Option<String>,
        params: Option<Params>,
    }
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    let msgs: Vec<Msg> = match first {
        Some(b'[') => serde_json::from_slice(body).unwrap_or_default(),
        _ => serde_json::from_slice::<Msg>(body)
            .map(|m| vec![m])
            .unwrap_or_default(),
    };
    msgs.into_iter()
        .filter(|m| m.method.as_deref() == Some(crate::types::methods::TOOLS_CALL))
        .filter_map(|m| m.params.and_then(|p| p.name))
        .collect()
}

/// Reads `body` whole within `max` bytes and `timeout`.
async fn collect<B>(body: B, max: usize, timeout: Duration) -> Result<Bytes, StatusCode>
where
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    let limited = http_body_util_limited(body, max);
    match tokio::time::timeout(timeout, limited).await {
        Err(_) => Err(StatusCode::REQUEST_TIMEOUT),
        Ok(r) => r,
    }
}

async fn http_body_util_limited<B>(body: B, max: usize) -> Result<Bytes, StatusCode>
where
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    let mut body = std::pin::pin!(body);
    let mut out = Vec::new();
    while let Some(frame) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
        let frame = frame.map_err(|_| StatusCode::BAD_REQUEST)?;
        if let Ok(data) = frame.into_data() {
            if out.len() + data.len() > max {
                return Err(StatusCode::PAYLOAD_TOO_LARGE);
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(Bytes::from(out))
}

impl<S, B> tower_service::Service<Request<B>> for AuthService<S>
where
    S: tower_service::Service<Request<Body>, Response = Response<Body>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        // The service that was polled ready takes this request; its clone waits for the next.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let config = self.config.clone();
        Box::pin(async move {
            let (mut parts, body) = req.into_parts();
            if parts.uri.path() == config.metadata_path {
                if parts.method == Method::GET || parts.method == Method::HEAD {
                    return Ok(config.metadata());
                }
                if parts.method == Method::OPTIONS {
                    let mut resp = Response::new(Body::empty());
                    *resp.status_mut() = StatusCode::NO_CONTENT;
                    let h = resp.headers_mut();
                    h.insert(
                        header::ACCESS_CONTROL_ALLOW_ORIGIN,
                        header::HeaderValue::from_static("*"),
                    );
                    h.insert(
                        header::ACCESS_CONTROL_ALLOW_METHODS,
                        header::HeaderValue::from_static("GET, OPTIONS"),
                    );
                    return Ok(resp);
                }
            }
            let token = match bearer(&parts.headers) {
                Ok(Some(t)) => t,
                Ok(None) => return Ok(config.unauthorized(None)),
                Err(why) => return Ok(config.unauthorized(Some(why))),
            };
            let peer = parts
                .extensions
                .get::<crate::http::PeerAddr>()
                .map(|p| p.0.ip());
            let principal = match config.validator.validate_from(token, peer).await {
                Ok(p) => p,
                Err(TokenRejection::Invalid(why)) => {
                    return Ok(config.unauthorized(Some(&bounded(&why, 200))))
                }
                Err(TokenRejection::Unavailable(_)) => {
                    return Ok(json_response(
                        StatusCode::SERVICE_UNAVAILABLE,
                        json!({"error": "temporarily_unavailable",
                               "error_description": "the token cannot be checked now"}),
                        &[(header::RETRY_AFTER, "5".to_owned())],
                    ))
                }
            };
            if !config.required_scopes.is_subset(&principal.scopes) {
                return Ok(config.insufficient(&config.required_scopes));
            }
            let body = if !config.tool_scopes.is_empty() && parts.method == Method::POST {
                let bytes = match collect(body, config.max_body_bytes, config.body_timeout).await {
                    Ok(b) => b,
                    Err(status) => {
                        return Ok(json_response(
                            status,
                            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600,
                                   "message": "the request body could not be read"}}),
                            &[],
                        ))
                    }
                };
                let mut needed = config.required_scopes.clone();
                for tool in tools_called(&bytes) {
                    if let Some(s) = config.tool_scopes.get(&tool) {
                        needed.extend(s.iter().cloned());
                    }
                }
                if !needed.is_subset(&principal.scopes) {
                    return Ok(config.insufficient(&needed));
                }
                Body::from(bytes)
            } else {
                Body::new(body)
            };
            parts.extensions.insert(principal);
            parts.extensions.insert(ValidatedToken(Arc::from(token)));
            inner.call(Request::from_parts(parts, body)).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::b64url;

    #[test]
    fn tools_in_bodies() {
        assert_eq!(
            tools_called(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"rm","arguments":{}}}"#),
            ["rm"]
        );
        assert_eq!(
            tools_called(br#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"b"}}]"#),
            ["a", "b"]
        );
        assert!(tools_called(b"not json").is_empty());
        assert!(tools_called(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).is_empty());
    }

    #[test]
    fn bearer_headers() {
        let mut h = HeaderMap::new();
        assert_eq!(bearer(&h), Ok(None));
        h.insert(header::AUTHORIZATION, "Bearer abc".parse().unwrap());
        assert_eq!(bearer(&h), Ok(Some("abc")));
        h.insert(header::AUTHORIZATION, "bearer  abc ".parse().unwrap());
        assert_eq!(bearer(&h), Ok(Some("abc")));
        h.insert(header::AUTHORIZATION, "Basic abc".parse().unwrap());
        assert!(bearer(&h).is_err());
        h.insert(header::AUTHORIZATION, "Bearer ".parse().unwrap());
        assert!(bearer(&h).is_err());
    }

    #[test]
    fn claims_checks() {
        let claims: Map<String, Value> = serde_json::from_value(json!({
            "sub": "ada", "iss": "http://as", "aud": ["http://x/mcp/", "other"],
            "scope": "a b", "scp": ["c"], "client_id": "cli", "exp": now_secs() + 100,
        }))
        .unwrap();
        assert!(audience_matches(&claims, &["http://x/mcp".into()]));
        assert!(!audience_matches(&claims, &["http://y/mcp".into()]));
        assert_eq!(check_times(&claims, Duration::ZERO, true), Ok(()));
        let p = principal_of(claims).unwrap();
        assert_eq!(p.subject, "ada");
        assert_eq!(p.scopes.iter().collect::<Vec<_>>(), ["a", "b", "c"]);
        assert_eq!(p.client_id.as_deref(), Some("cli"));
        assert_eq!(p.binding_key(), "http://as\0ada");
        let old: Map<String, Value> =
            serde_json::from_value(json!({"exp": now_secs() - 10})).unwrap();
        assert_eq!(
            check_times(&old, Duration::ZERO, true),
            Err(TokenRejection::Invalid("the token has expired".into()))
        );
        assert_eq!(check_times(&old, Duration::from_secs(60), true), Ok(()));
    }

    const ISS: &str = "https://as.example";
    const AUD: &str = "https://rs.example/mcp";

    fn es256() -> jwt::PrivateKey {
        let rng = ring::rand::SystemRandom::new();
        let doc = ring::signature::EcdsaKeyPair::generate_pkcs8(
            &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            &rng,
        )
        .unwrap();
        jwt::PrivateKey::from_pkcs8(doc.as_ref(), SigningAlgorithm::ES256).unwrap()
    }

    /// A validator for `ISS`/`AUD` holding `key`'s public half as kid `k1`, fetched just now
    /// (so it never goes to the network), with a 5 s clock skew.
    fn validator(key: &jwt::PrivateKey) -> JwtValidator {
        let v = JwtValidator::new(ISS, AUD)
            .unwrap()
            .leeway(Duration::from_secs(5));
        let jwk: Jwk = serde_json::from_value(key.public_jwk(Some("k1"))).unwrap();
        {
            let mut c = v.cache.lock().unwrap();
            c.keys = Arc::new(vec![jwk]);
            c.fetched = Some(Instant::now());
        }
        v
    }

    fn claims(iss: &str, aud: &str, exp: u64) -> Value {
        json!({"iss": iss, "aud": aud, "sub": "ada", "exp": exp, "iat": now_secs(),
               "scope": "mcp:read", "client_id": "cli"})
    }

    /// Validates `token`, and checks the refusal, when there is one, never quotes it.
    async fn validate(v: &JwtValidator, token: &str) -> Result<Principal, TokenRejection> {
        let r = v.validate(token).await;
        if let Err(e) = &r {
            for part in token.split('.').filter(|p| p.len() >= 8) {
                assert!(!e.to_string().contains(part), "{e} quotes the token");
                assert!(!format!("{e:?}").contains(part), "{e:?} quotes the token");
            }
        }
        r
    }

    fn invalid(why: &str) -> Result<String, TokenRejection> {
        Err(TokenRejection::Invalid(why.into()))
    }

    /// A loopback HTTP server answering every request with `status`, counting them.
    async fn counting_server(status: StatusCode) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let hits = Arc::new(AtomicUsize::new(0));
        let counted = hits.clone();
        let app = axum::Router::new().fallback(move || {
            let counted = counted.clone();
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
                status
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (format!("http://{addr}"), hits)
    }

    /// Finding 5 of issue 43: while the issuer's JWKS endpoint fails, 50 requests whose tokens
    /// name unknown keys cause exactly one fetch (the first; the next is not tried before
    /// `jwks_min_refresh`, 10 s, has passed), each answered unavailable.
    #[tokio::test]
    async fn finding_5_a_failing_jwks_endpoint_is_not_fetched_again_within_the_backoff() {
        use std::sync::atomic::Ordering;
        let (issuer, hits) = counting_server(StatusCode::INTERNAL_SERVER_ERROR).await;
        let v = JwtValidator::new(&issuer, AUD)
            .unwrap()
            .jwks_uri(&format!("{issuer}/jwks"))
            .unwrap();
        let key = es256();
        let later = now_secs() + 300;
        for i in 0..50 {
            let token = key
                .sign_typed(
                    Some(&format!("made-up-{i}")),
                    "at+jwt",
                    &claims(&issuer, AUD, later),
                )
                .unwrap();
            match validate(&v, &token).await {
                Err(TokenRejection::Unavailable(_)) => {}
                other => panic!("request {i}: {other:?}"),
            }
        }
        assert_eq!(hits.load(Ordering::SeqCst), 1);
    }

    /// Finding 10 of issue 43: a client-only token (no `sub`) whose client id is `alice` is the
    /// subject `client:alice`, never the user `alice`'s; a token whose own `sub` is
    /// `client:alice` is refused; a token naming neither is refused.
    #[test]
    fn finding_10_client_only_tokens_never_take_a_users_subject() {
        let claims = |v: Value| -> Map<String, Value> { serde_json::from_value(v).unwrap() };
        let user = principal_of(claims(
            json!({"iss": ISS, "sub": "alice", "client_id": "web"}),
        ))
        .unwrap();
        let client = principal_of(claims(json!({"iss": ISS, "client_id": "alice"}))).unwrap();
        assert_eq!(user.subject, "alice");
        assert_eq!(client.subject, "client:alice");
        assert_eq!(client.client_id.as_deref(), Some("alice"));
        assert_ne!(user.binding_key(), client.binding_key());
        let azp = principal_of(claims(json!({"iss": ISS, "azp": "alice"}))).unwrap();
        assert_eq!(azp.subject, "client:alice");
        assert_eq!(
            principal_of(claims(json!({"iss": ISS, "sub": "client:alice"}))).map(|p| p.subject),
            Err(TokenRejection::Invalid(
                "the token's subject starts with `client:`, which names client-only tokens".into()
            ))
        );
        assert_eq!(
            principal_of(claims(json!({"iss": ISS}))).map(|p| p.subject),
            Err(TokenRejection::Invalid("the token names no subject".into()))
        );
    }

    /// An introspection endpoint on loopback: a token starting `active` is active (for `AUD`,
    /// expiring in an hour; `active-client` without `sub`), any other is not. Each request waits
    /// `delay` and is counted, with the most answered at once.
    async fn introspection_endpoint(
        delay: Duration,
    ) -> (
        String,
        Arc<std::sync::atomic::AtomicUsize>,
        Arc<std::sync::atomic::AtomicUsize>,
    ) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let hits = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let now = Arc::new(AtomicUsize::new(0));
        let (h, m) = (hits.clone(), most.clone());
        let app = axum::Router::new().route(
            "/introspect",
            axum::routing::post(move |body: String| {
                let (hits, most, now) = (h.clone(), m.clone(), now.clone());
                async move {
                    hits.fetch_add(1, Ordering::SeqCst);
                    let running = now.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(running, Ordering::SeqCst);
                    tokio::time::sleep(delay).await;
                    now.fetch_sub(1, Ordering::SeqCst);
                    let token = body
                        .split('&')
                        .find_map(|kv| kv.strip_prefix("token="))
                        .unwrap_or("")
                        .to_owned();
                    let answer = if token.starts_with("active") {
                        let mut a = json!({"active": true, "aud": AUD, "client_id": "cli",
                                           "exp": now_secs() + 3600, "scope": "mcp:read"});
                        if token != "active-client" {
                            a["sub"] = json!("ada");
                        }
                        a
                    } else {
                        json!({"active": false})
                    };
                    (
                        [(axum::http::header::CONTENT_TYPE, "application/json")],
                        answer.to_string(),
                    )
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (format!("http://{addr}/introspect"), hits, most)
    }

    /// Finding 6 of issue 43: 200 made-up tokens, each sent three times within the inactive
    /// answers' time, are introspected once each; an active token sent 100 times is introspected
    /// once; the answers kept never pass their bound (50 here, with 200 tokens).
    #[tokio::test]
    async fn finding_6_introspection_answers_are_kept_and_bounded() {
        use std::sync::atomic::Ordering;
        let (endpoint, hits, _) = introspection_endpoint(Duration::ZERO).await;
        let v = Introspection::new(&endpoint, "gw", "secret", AUD);
        for round in 0..3 {
            for i in 0..200 {
                match v.validate(&format!("made-up-{i}")).await {
                    Err(TokenRejection::Invalid(why)) => {
                        assert_eq!(why, "the token is not active", "round {round}, token {i}")
                    }
                    other => panic!("round {round}, token {i}: {other:?}"),
                }
            }
        }
        assert_eq!(hits.load(Ordering::SeqCst), 200);
        for _ in 0..100 {
            let p = v.validate("active-1").await.unwrap();
            assert_eq!(p.subject, "ada");
        }
        assert_eq!(hits.load(Ordering::SeqCst), 201);
        assert_eq!(v.answers.lock().unwrap().by_token.len(), 201);

        // Bounded: 50 answers at most, whatever comes.
        let (endpoint, hits, _) = introspection_endpoint(Duration::ZERO).await;
        let small = Introspection::new(&endpoint, "gw", "secret", AUD).cache_max_entries(50);
        for i in 0..200 {
            assert!(small.validate(&format!("made-up-{i}")).await.is_err());
            assert!(small.answers.lock().unwrap().by_token.len() <= 50);
        }
        assert_eq!(small.answers.lock().unwrap().by_token.len(), 50);
        assert_eq!(hits.load(Ordering::SeqCst), 200);
        // The newest are kept: the last token is answered from the cache.
        assert!(small.validate("made-up-199").await.is_err());
        assert_eq!(hits.load(Ordering::SeqCst), 200);

        // Not kept: an inactive time of zero asks every time.
        let (endpoint, hits, _) = introspection_endpoint(Duration::ZERO).await;
        let uncached =
            Introspection::new(&endpoint, "gw", "secret", AUD).cache_inactive(Duration::ZERO);
        for _ in 0..3 {
            assert!(uncached.validate("made-up").await.is_err());
        }
        assert_eq!(hits.load(Ordering::SeqCst), 3);
    }

    /// Finding 6 of issue 43: at most `max_concurrent_per_address` introspections run at once
    /// for one client address (the rest wait, and are answered); another address has its own.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn finding_6_introspections_are_bounded_per_client_address() {
        use std::sync::atomic::Ordering;
        let (endpoint, hits, most) = introspection_endpoint(Duration::from_millis(100)).await;
        let v = Arc::new(
            Introspection::new(&endpoint, "gw", "secret", AUD).max_concurrent_per_address(2),
        );
        let one: IpAddr = "192.0.2.1".parse().unwrap();
        let checks: Vec<_> = (0..8)
            .map(|i| {
                let v = v.clone();
                tokio::spawn(async move { v.validate_from(&format!("t-{i}"), Some(one)).await })
            })
            .collect();
        for c in checks {
            assert!(matches!(c.await.unwrap(), Err(TokenRejection::Invalid(_))));
        }
        assert_eq!(hits.load(Ordering::SeqCst), 8);
        assert_eq!(most.load(Ordering::SeqCst), 2);
        // Two addresses at once: two each.
        let two: IpAddr = "192.0.2.2".parse().unwrap();
        let checks: Vec<_> = (0..8)
            .map(|i| {
                let v = v.clone();
                let from = if i % 2 == 0 { one } else { two };
                tokio::spawn(async move { v.validate_from(&format!("u-{i}"), Some(from)).await })
            })
            .collect();
        for c in checks {
            assert!(c.await.unwrap().is_err());
        }
        assert_eq!(most.load(Ordering::SeqCst), 4);
    }

    /// The wait after failed JWKS fetches: `jwks_min_refresh` (at least a second), doubled per
    /// further failure, at most five minutes.
    #[test]
    fn jwks_backoff_doubles_to_its_bound() {
        let s = Duration::from_secs;
        let ten = s(10);
        let waits: Vec<Duration> = (1..=7).map(|n| jwks_backoff(ten, n)).collect();
        assert_eq!(waits, [s(10), s(20), s(40), s(80), s(160), s(300), s(300)]);
        assert_eq!(jwks_backoff(Duration::ZERO, 1), s(1));
        assert_eq!(jwks_backoff(Duration::ZERO, 3), s(4));
        assert_eq!(jwks_backoff(ten, u32::MAX), s(300));
        assert_eq!(jwks_backoff(s(600), 4), s(600));
    }

    #[tokio::test]
    async fn jwt_validation_failures() {
        let key = es256();
        let v = validator(&key);
        let later = now_secs() + 300;
        let subject = |r: Result<Principal, TokenRejection>| r.map(|p| p.subject);

        let good = key
            .sign_typed(Some("k1"), "at+jwt", &claims(ISS, AUD, later))
            .unwrap();
        let p = validate(&v, &good).await.unwrap();
        assert_eq!(p.subject, "ada");
        assert_eq!(p.issuer.as_deref(), Some(ISS));
        assert_eq!(p.client_id.as_deref(), Some("cli"));
        assert_eq!(p.scopes.iter().collect::<Vec<_>>(), ["mcp:read"]);

        // Expired beyond the skew; expired within it passes.
        let expired = key
            .sign_typed(Some("k1"), "at+jwt", &claims(ISS, AUD, now_secs() - 60))
            .unwrap();
        assert_eq!(
            subject(validate(&v, &expired).await),
            invalid("the token has expired")
        );
        let skewed = key
            .sign_typed(Some("k1"), "at+jwt", &claims(ISS, AUD, now_secs() - 2))
            .unwrap();
        assert_eq!(subject(validate(&v, &skewed).await), Ok("ada".into()));

        let wrong_aud = key
            .sign_typed(
                Some("k1"),
                "at+jwt",
                &claims(ISS, "https://other.example/mcp", later),
            )
            .unwrap();
        assert_eq!(
            subject(validate(&v, &wrong_aud).await),
            invalid("the token is for another resource")
        );

        let wrong_iss = key
            .sign_typed(
                Some("k1"),
                "at+jwt",
                &claims("https://evil.example", AUD, later),
            )
            .unwrap();
        assert_eq!(
            subject(validate(&v, &wrong_iss).await),
            invalid("the token is from another issuer")
        );

        // Signed by another key under the same kid; a payload changed after signing.
        let forged = es256()
            .sign_typed(Some("k1"), "at+jwt", &claims(ISS, AUD, later))
            .unwrap();
        assert_eq!(
            subject(validate(&v, &forged).await),
            invalid("the token's signature is invalid")
        );
        let (head, rest) = good.split_once('.').unwrap();
        let sig = rest.split_once('.').unwrap().1;
        let mut widened = claims(ISS, AUD, later);
        widened["scope"] = json!("mcp:read mcp:admin");
        let tampered = format!("{head}.{}.{sig}", b64url(widened.to_string().as_bytes()));
        assert_eq!(
            subject(validate(&v, &tampered).await),
            invalid("the token's signature is invalid")
        );

        // alg none, with and without a signature; an HMAC algorithm.
        let payload = b64url(claims(ISS, AUD, later).to_string().as_bytes());
        for alg in ["none", "None", "HS256"] {
            let header = b64url(format!(r#"{{"alg":"{alg}","kid":"k1"}}"#).as_bytes());
            for signature in ["", sig] {
                let token = format!("{header}.{payload}.{signature}");
                assert_eq!(
                    subject(validate(&v, &token).await),
                    invalid("the token's algorithm is not accepted"),
                    "alg {alg}"
                );
            }
        }

        // Not yet valid (nbf beyond the skew).
        let mut early = claims(ISS, AUD, later);
        early["nbf"] = json!(now_secs() + 120);
        let early = key.sign_typed(Some("k1"), "at+jwt", &early).unwrap();
        assert_eq!(
            subject(validate(&v, &early).await),
            invalid("the token is not valid yet")
        );
    }

    /// Finding 10 of the security review (token typing): an ID token, signed by the same
    /// issuer and naming this resource as its audience, is not an access token.
    #[tokio::test]
    async fn finding_10_id_tokens_are_not_access_tokens() {
        let key = es256();
        let v = validator(&key);
        let later = now_secs() + 300;
        let subject = |r: Result<Principal, TokenRejection>| r.map(|p| p.subject);
        let not_access = || invalid("the token is not an access token (typ)");
        // typ JWT (what an ID token says), no typ at all, another type.
        let id_token = key.sign(Some("k1"), &claims(ISS, AUD, later)).unwrap();
        assert_eq!(subject(validate(&v, &id_token).await), not_access());
        let payload = b64url(claims(ISS, AUD, later).to_string().as_bytes());
        let untyped = {
            let header = b64url(br#"{"alg":"ES256","kid":"k1"}"#);
            let input = format!("{header}.{payload}");
            let signed = key.sign_typed(Some("k1"), "x", &json!({})).unwrap();
            // Only the header and payload matter here: refused before the signature.
            format!("{input}.{}", signed.rsplit('.').next().unwrap())
        };
        assert_eq!(subject(validate(&v, &untyped).await), not_access());
        let other = key
            .sign_typed(Some("k1"), "dpop+jwt", &claims(ISS, AUD, later))
            .unwrap();
        assert_eq!(subject(validate(&v, &other).await), not_access());
        // Access tokens, in either spelling, pass.
        for typ in ["at+jwt", "application/at+jwt", "AT+JWT"] {
            let at = key
                .sign_typed(Some("k1"), typ, &claims(ISS, AUD, later))
                .unwrap();
            assert_eq!(subject(validate(&v, &at).await), Ok("ada".into()), "{typ}");
        }
        // Only a validator told so takes the ID token.
        let lax = validator(&key).require_at_jwt(false);
        assert_eq!(subject(validate(&lax, &id_token).await), Ok("ada".into()));
    }

    /// Finding 10 of the security review: a plain-http issuer (or its keys, or the
    /// authorization server a guard names) off loopback is refused when configured.
    #[test]
    fn finding_10_http_issuers_off_loopback_refused() {
        let refused = |r: Result<JwtValidator, AuthError>| r.map(|_| ()).unwrap_err().to_string();
        assert_eq!(
            refused(JwtValidator::new("http://as.example", AUD)),
            "authorization configuration: the issuer \"http://as.example\" must be https (plain http only on a loopback host: localhost, 127.0.0.1, [::1])"
        );
        assert_eq!(
            refused(JwtValidator::new("as.example", AUD)),
            "authorization configuration: the issuer \"as.example\": relative URL without a base"
        );
        assert_eq!(
            refused(JwtValidator::new(ISS, AUD).unwrap().jwks_uri("http://as.example/jwks")),
            "authorization configuration: jwks_uri \"http://as.example/jwks\" must be https (plain http only on a loopback host: localhost, 127.0.0.1, [::1])"
        );
        for dev in [
            "http://127.0.0.1:9000",
            "http://localhost:9000/realm",
            "http://[::1]:9000",
        ] {
            let v = JwtValidator::new(dev, AUD).unwrap();
            assert!(v.jwks_uri(&format!("{dev}/jwks")).is_ok(), "{dev}");
        }
        let v = JwtValidator::new(ISS, AUD).unwrap();
        assert_eq!(
            AuthLayer::new(AUD, "http://as.example", v).unwrap_err().to_string(),
            "authorization configuration: the authorization server \"http://as.example\" must be https (plain http only on a loopback host: localhost, 127.0.0.1, [::1])"
        );
    }
}
