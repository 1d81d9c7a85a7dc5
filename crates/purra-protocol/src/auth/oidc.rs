//! OpenID Connect sign-in for a web page (a relying party): discovery of the issuer's
//! configuration, the authorization code request with PKCE S256, `state` and `nonce`, the code
//! exchange (bounded response, timeouts), and the ID token's validation (signature against the
//! issuer's JWKS through [`JwtValidator`], `iss`, `aud`, `exp`, `iat`, `nonce`, `azp`).
//!
//! What the page keeps between the redirect and the callback (a [`PendingLogin`]) and who may sign
//! in are the caller's business; this module only proves who signed in ([`OidcIdentity`]).

use std::fmt;
use std::time::Duration;

use reqwest::Url;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::guard::{JwtValidator, TokenRejection, TokenValidator};
use super::metadata::AuthorizationServerMetadata;
use super::policy::{secure_or_loopback, HTTPS_ONLY};
use super::{b64, b64url, bounded, error_chain, get_json, now_secs, random_string, read_body};
use crate::error::AuthError;

/// How a page signs in with an OpenID Connect provider.
#[derive(Clone)]
#[non_exhaustive]
pub struct OidcConfig {
    /// The issuer, exactly as the provider names itself (its discovery document must agree).
    pub issuer: String,
    /// The client id registered with the provider (the ID token's audience).
    pub client_id: String,
    /// The client secret of a confidential client (`client_secret_basic`, or
    /// `client_secret_post` when the provider supports only that); `None` for a public client.
    pub client_secret: Option<String>,
    /// The scopes asked for (`openid` is always asked for).
    pub scopes: Vec<String>,
    /// The clock skew allowed on `exp`, `nbf` and `iat` (default 60 s).
    pub leeway: Duration,
    /// The bound on each request to the provider (default 10 s).
    pub request_timeout: Duration,
}

impl fmt::Debug for OidcConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OidcConfig")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "…"))
            .field("scopes", &self.scopes)
            .field("leeway", &self.leeway)
            .finish_non_exhaustive()
    }
}

impl OidcConfig {
    /// Signs in at `issuer` as the public client `client_id`, asking for `openid email profile`.
    pub fn new(issuer: impl Into<String>, client_id: impl Into<String>) -> Self {
        OidcConfig {
            issuer: issuer.into(),
            client_id: client_id.into(),
            client_secret: None,
            scopes: vec!["openid".into(), "email".into(), "profile".into()],
            leeway: Duration::from_secs(60),
            request_timeout: Duration::from_secs(10),
        }
    }
    /// The secret of a confidential client.
    pub fn client_secret(mut self, secret: impl Into<String>) -> Self {
        self.client_secret = Some(secret.into());
        self
    }
    /// Replaces the scopes asked for (`openid` is added when missing).
    pub fn scopes<I, S>(mut self, scopes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }
    /// The clock skew allowed on the ID token's times.
    pub fn leeway(mut self, d: Duration) -> Self {
        self.leeway = d;
        self
    }
    /// The bound on each request to the provider, end to end.
    pub fn request_timeout(mut self, d: Duration) -> Self {
        self.request_timeout = d;
        self
    }

    /// Whether this configuration can work, before anything is sent: the issuer must be an
    /// https URL (plain http only on a loopback host, for development), since its discovery
    /// document and keys decide who signs in.
    pub fn check(&self) -> Result<Url, AuthError> {
        let issuer = Url::parse(&self.issuer)
            .map_err(|_| AuthError::Config(format!("issuer {:?} is not a URL", self.issuer)))?;
        if !matches!(issuer.scheme(), "https" | "http") {
            return Err(AuthError::Config(format!(
                "issuer {:?} is not an http(s) URL",
                self.issuer
            )));
        }
        if !secure_or_loopback(&issuer) {
            return Err(AuthError::Config(format!(
                "issuer {:?} {HTTPS_ONLY}",
                self.issuer
            )));
        }
        Ok(issuer)
    }
}

/// What a sign-in keeps between sending the browser to the provider and its return: the
/// `state`, the `nonce`, the PKCE verifier and the redirect URI. Never shown to anyone.
#[derive(Clone)]
pub struct PendingLogin {
    /// The `state` sent (the callback must bring it back).
    pub state: String,
    nonce: String,
    verifier: String,
    redirect_uri: String,
    /// The `max_age` asked for, in seconds: the ID token must then carry an `auth_time` no older.
    max_age: Option<u64>,
}

impl fmt::Debug for PendingLogin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PendingLogin")
            .field("redirect_uri", &self.redirect_uri)
            .finish_non_exhaustive()
    }
}

/// Who signed in, from a validated ID token.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct OidcIdentity {
    /// The issuer (`iss`).
    pub issuer: String,
    /// The subject at that issuer (`sub`).
    pub subject: String,
    /// `email`, when the token has one.
    pub email: Option<String>,
    /// `email_verified`, when the token says.
    pub email_verified: Option<bool>,
    /// `name`, when the token has one.
    pub name: Option<String>,
    /// Every claim of the ID token.
    pub claims: Map<String, Value>,
}

impl OidcIdentity {
    /// The identity `claims` (already validated) name at `issuer`; `None` without a `sub`.
    pub fn from_claims(issuer: &str, claims: Map<String, Value>) -> Option<OidcIdentity> {
        let s = |k: &str| claims.get(k).and_then(Value::as_str).map(str::to_owned);
        Some(OidcIdentity {
            issuer: issuer.to_owned(),
            subject: s("sub")?,
            email: s("email"),
            email_verified: claims.get("email_verified").and_then(Value::as_bool),
            name: s("name"),
            claims,
        })
    }
}

/// An OpenID Connect provider found by discovery, ready to sign people in.
pub struct OidcProvider {
    config: OidcConfig,
    authorization_endpoint: Url,
    token_endpoint: Url,
    secret_post: bool,
    validator: JwtValidator,
    http: reqwest::Client,
}

impl fmt::Debug for OidcProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OidcProvider")
            .field("config", &self.config)
            .field(
                "authorization_endpoint",
                &self.authorization_endpoint.as_str(),
            )
            .field("token_endpoint", &self.token_endpoint.as_str())
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct Discovery {
    #[serde(flatten)]
    meta: AuthorizationServerMetadata,
    #[serde(default)]
    response_types_supported: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct TokenAnswer {
    #[serde(default)]
    id_token: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    error_description: Option<String>,
}

fn endpoint(
    meta: &AuthorizationServerMetadata,
    name: &str,
    value: Option<&String>,
) -> Result<Url, AuthError> {
    let value = value.ok_or_else(|| {
        AuthError::Discovery(format!("{}'s configuration has no {name}", meta.issuer))
    })?;
    let url = Url::parse(value).map_err(|_| {
        AuthError::Discovery(format!("{name} {:?} is not a URL", bounded(value, 200)))
    })?;
    if !secure_or_loopback(&url) {
        return Err(AuthError::Discovery(format!(
            "{name} {:?} {HTTPS_ONLY}",
            bounded(value, 200)
        )));
    }
    Ok(url)
}

impl OidcProvider {
    /// Checks the configuration ([`OidcConfig::check`]), reads
    /// `{issuer}/.well-known/openid-configuration` (bounded, within the request timeout), checks
    /// that it names the same issuer, supports the code flow and PKCE S256, and has the endpoints
    /// (https, or plain http on a loopback host) and the JWKS a sign-in needs.
    pub async fn discover(config: OidcConfig) -> Result<OidcProvider, AuthError> {
        config.check()?;
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(config.request_timeout)
            .timeout(config.request_timeout)
            .build()
            .map_err(|e| AuthError::Config(format!("an HTTP client: {e}")))?;
        let at = Url::parse(&format!(
            "{}/.well-known/openid-configuration",
            config.issuer.trim_end_matches('/')
        ))
        .map_err(|_| AuthError::Config(format!("issuer {:?} is not a URL", config.issuer)))?;
        let doc: Discovery = get_json(&http, &at, &[], config.request_timeout)
            .await
            .map_err(AuthError::Discovery)?
            .ok_or_else(|| AuthError::Discovery(format!("{at} answers no configuration")))?;
        let meta = doc.meta;
        if meta.issuer != config.issuer {
            return Err(AuthError::Discovery(format!(
                "{at} names issuer {:?}, not {:?}",
                bounded(&meta.issuer, 200),
                config.issuer
            )));
        }
        let has = |list: &Option<Vec<String>>, what: &str| {
            list.as_ref().is_some_and(|l| l.iter().any(|m| m == what))
        };
        if doc.response_types_supported.is_some() && !has(&doc.response_types_supported, "code") {
            return Err(AuthError::Discovery(format!(
                "{} does not support the authorization code flow",
                config.issuer
            )));
        }
        if !has(&meta.code_challenge_methods_supported, "S256") {
            return Err(AuthError::Discovery(format!(
                "{} does not support PKCE with S256; refusing to sign in through it",
                config.issuer
            )));
        }
        let authorization_endpoint = endpoint(
            &meta,
            "authorization_endpoint",
            meta.authorization_endpoint.as_ref(),
        )?;
        let token_endpoint = endpoint(&meta, "token_endpoint", meta.token_endpoint.as_ref())?;
        let jwks_uri = endpoint(&meta, "jwks_uri", meta.jwks_uri.as_ref())?;
        let secret_post = config.client_secret.is_some()
            && !meta.supports_auth_method("client_secret_basic")
            && meta.supports_auth_method("client_secret_post");
        // ID tokens say `typ: JWT` (or nothing): this validator is for them, never for access
        // tokens; nonce, iat and azp are checked on top of it.
        let validator = JwtValidator::new(config.issuer.clone(), config.client_id.clone())?
            .require_at_jwt(false)
            .jwks_uri(jwks_uri.as_str())?
            .leeway(config.leeway)
            .http_client(http.clone());
        Ok(OidcProvider {
            config,
            authorization_endpoint,
            token_endpoint,
            secret_post,
            validator,
            http,
        })
    }

    /// The configuration this provider was discovered with.
    pub fn config(&self) -> &OidcConfig {
        &self.config
    }

    /// A new sign-in returning to `redirect_uri`: the URL to send the browser to, and what to
    /// keep until it comes back.
    pub fn begin(&self, redirect_uri: &str) -> (Url, PendingLogin) {
        self.begin_with_max_age(redirect_uri, None)
    }

    /// A new sign-in, as [`OidcProvider::begin`], that asks the provider for an authentication
    /// no older than `max_age` (OpenID Connect's `max_age`, whole seconds): the provider signs the
    /// person in again when theirs is older, and [`OidcProvider::finish`] refuses an ID token
    /// without an `auth_time` or with one older than `max_age` (no leeway: the provider's clock
    /// and this one must agree to within the freshness asked).
    pub fn begin_with_max_age(
        &self,
        redirect_uri: &str,
        max_age: Option<std::time::Duration>,
    ) -> (Url, PendingLogin) {
        let pending = PendingLogin {
            state: random_string(32),
            nonce: random_string(32),
            verifier: random_string(48),
            redirect_uri: redirect_uri.to_owned(),
            max_age: max_age.map(|d| d.as_secs()),
        };
        let challenge = b64url(
            ring::digest::digest(&ring::digest::SHA256, pending.verifier.as_bytes()).as_ref(),
        );
        let mut scopes = vec!["openid"];
        scopes.extend(
            self.config
                .scopes
                .iter()
                .map(String::as_str)
                .filter(|s| *s != "openid"),
        );
        let mut url = self.authorization_endpoint.clone();
        url.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", &self.config.client_id)
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("scope", &scopes.join(" "))
            .append_pair("state", &pending.state)
            .append_pair("nonce", &pending.nonce)
            .append_pair("code_challenge", &challenge)
            .append_pair("code_challenge_method", "S256");
        if let Some(age) = pending.max_age {
            url.query_pairs_mut()
                .append_pair("max_age", &age.to_string());
        }
        (url, pending)
    }

    /// Finishes the sign-in `pending` with the callback's `code` (and its `iss`, RFC 9207, when
    /// sent): exchanges the code, validates the ID token, and says who signed in.
    pub async fn finish(
        &self,
        pending: &PendingLogin,
        code: &str,
        iss: Option<&str>,
    ) -> Result<OidcIdentity, AuthError> {
        if let Some(iss) = iss {
            if iss != self.config.issuer {
                return Err(AuthError::Authorization(format!(
                    "the callback comes from issuer {:?}, not {:?}",
                    bounded(iss, 200),
                    self.config.issuer
                )));
            }
        }
        let mut form = vec![
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", pending.redirect_uri.as_str()),
            ("code_verifier", pending.verifier.as_str()),
            ("client_id", self.config.client_id.as_str()),
        ];
        let mut rb = self
            .http
            .post(self.token_endpoint.clone())
            .header("accept", "application/json");
        match &self.config.client_secret {
            Some(secret) if self.secret_post => form.push(("client_secret", secret)),
            Some(secret) => {
                let mut value = reqwest::header::HeaderValue::from_str(&format!(
                    "Basic {}",
                    b64(format!(
                        "{}:{}",
                        super::client::url_encode(&self.config.client_id),
                        super::client::url_encode(secret)
                    )
                    .as_bytes())
                ))
                .map_err(|_| {
                    AuthError::Config("the client id or secret cannot go in a header".into())
                })?;
                value.set_sensitive(true);
                rb = rb.header("authorization", value);
            }
            None => {}
        }
        let resp = rb.form(&form).send().await.map_err(|e| AuthError::Token {
            error: "request_failed".into(),
            description: Some(format!("POST {}: {}", self.token_endpoint, error_chain(&e))),
        })?;
        let status = resp.status();
        let body = read_body(resp).await.map_err(|e| AuthError::Token {
            error: "invalid_response".into(),
            description: Some(e),
        })?;
        let answer: TokenAnswer = serde_json::from_slice(&body).map_err(|_| AuthError::Token {
            error: if status.is_success() {
                "invalid_response".into()
            } else {
                format!("status {}", status.as_u16())
            },
            description: Some("the token response is not the JSON expected".into()),
        })?;
        if !status.is_success() {
            return Err(AuthError::Token {
                error: answer
                    .error
                    .map(|e| bounded(&e, 64))
                    .unwrap_or_else(|| format!("status {}", status.as_u16())),
                description: answer.error_description.map(|d| bounded(&d, 200)),
            });
        }
        let id_token = answer
            .id_token
            .ok_or_else(|| AuthError::Authorization("the token response has no ID token".into()))?;
        self.validate(&id_token, &pending.nonce, pending.max_age)
            .await
    }

    /// Validates an ID token for this client: signature (JWKS), `iss`, `aud`, `exp`/`nbf`,
    /// `iat` (present, not in the future), `nonce` (the sign-in's), `azp` (this client when
    /// present; required when `aud` names several); with `max_age` (seconds), `auth_time`
    /// (present, not in the future, no older than `max_age`).
    async fn validate(
        &self,
        id_token: &str,
        nonce: &str,
        max_age: Option<u64>,
    ) -> Result<OidcIdentity, AuthError> {
        let invalid =
            |why: &str| AuthError::Authorization(format!("the ID token is refused: {why}"));
        let principal = self
            .validator
            .validate(id_token)
            .await
            .map_err(|e| match e {
                TokenRejection::Invalid(why) if why == "the token is for another resource" => {
                    invalid("it is for another client (aud)")
                }
                TokenRejection::Invalid(why) => invalid(&why),
                other => AuthError::Discovery(other.to_string()),
            })?;
        let claims = principal.claims;
        let now = now_secs();
        let leeway = self.config.leeway.as_secs();
        match claims.get("iat").and_then(Value::as_u64) {
            None => return Err(invalid("it has no iat")),
            Some(iat) if iat > now + leeway => return Err(invalid("it was issued in the future")),
            Some(_) => {}
        }
        if let Some(max_age) = max_age {
            match claims.get("auth_time").and_then(Value::as_u64) {
                None => return Err(invalid("it has no auth_time, and max_age was asked")),
                Some(t) if t > now + leeway => {
                    return Err(invalid("its auth_time is in the future"))
                }
                // No leeway here: a freshness of seconds would mean nothing with it (the
                // leeway is for clocks that disagree a little; `max_age` is asked on purpose).
                Some(t) if t.saturating_add(max_age) < now => {
                    return Err(invalid("its auth_time is older than the max_age asked"))
                }
                Some(_) => {}
            }
        }
        if claims.get("nonce").and_then(Value::as_str) != Some(nonce) {
            return Err(invalid("its nonce is not this sign-in's"));
        }
        let several = matches!(claims.get("aud"), Some(Value::Array(a)) if a.len() > 1);
        match claims.get("azp") {
            Some(Value::String(azp)) if *azp == self.config.client_id => {}
            None if !several => {}
            _ => return Err(invalid("it was issued to another party (azp)")),
        }
        OidcIdentity::from_claims(&self.config.issuer, claims)
            .ok_or_else(|| invalid("it has no sub"))
    }
}
