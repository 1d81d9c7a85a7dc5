//! MCP authorization (OAuth 2.1) for Streamable HTTP, both sides (the `auth` feature).
//!
//! The client side ([`OAuthClient`]) plugs into [`HttpClientOptions::auth`](crate::HttpClientOptions::auth):
//! on a 401 it discovers the protected resource metadata (RFC 9728) and the authorization
//! server's metadata (RFC 8414 / OpenID discovery), registers (pre-registered, Client ID
//! Metadata Document, or dynamic registration), runs the authorization code grant with PKCE S256
//! and the `resource` indicator (RFC 8707), keeps the tokens in a [`TokenStore`], refreshes them
//! before they expire and on a 401, and steps up on 403 `insufficient_scope`; or it uses the
//! client credentials grant (a secret, or a private-key JWT). What a server or a metadata
//! document names, it follows only as its [`UrlPolicy`] allows (https, public addresses), each
//! request bounded end to end; a configured client secret goes only to the configured
//! authorization server.
//!
//! The server side ([`AuthLayer`]) is a tower layer in front of the Streamable HTTP server: it
//! serves the protected resource metadata, validates bearer tokens (JWT access tokens typed
//! `at+jwt` against the authorization server's JWKS, or RFC 7662 introspection), answers 401/403 with the
//! `WWW-Authenticate` challenges MCP clients follow, enforces per-tool scopes, and puts the
//! [`Principal`](crate::Principal) into the request for the handlers.
//!
//! To call an upstream as the person who asked, [`TokenExchange`] trades the caller's token for
//! one whose audience is the upstream (RFC 8693), and [`ExchangeCache`] keeps those per principal.
//!
//! For a web page that signs people in (purra's approver page), [`OidcProvider`] is an OpenID
//! Connect relying party: discovery, the code flow with PKCE, `state` and `nonce`, and the ID
//! token's checks (through [`JwtValidator`]).

mod client;
mod exchange;
mod guard;
mod jwt;
mod loopback;
mod metadata;
mod oidc;
mod policy;
mod revoke;
mod store;

pub use client::{
    AuthorizationRequest, AuthorizationResponse, Authorizer, ClientAuthMethod, OAuthClient,
    OAuthConfig, SigningKey,
};
pub use exchange::{
    ExchangeCache, ExchangeRequest, ExchangedToken, TokenExchange, TokenExchangeConfig,
    ACCESS_TOKEN_TYPE, DEFAULT_EXCHANGE_CACHE_ENTRIES, ID_TOKEN_TYPE, JWT_TOKEN_TYPE,
    TOKEN_EXCHANGE_GRANT,
};
pub use guard::{
    AuthLayer, AuthService, Introspection, JwtValidator, TokenRejection, TokenValidator,
    ValidatedToken, CLIENT_SUBJECT_PREFIX, DEFAULT_INTROSPECTIONS_PER_ADDRESS,
    DEFAULT_INTROSPECTION_INACTIVE_TTL, DEFAULT_INTROSPECTION_MAX_AGE,
    DEFAULT_INTROSPECTION_MAX_ENTRIES,
};
pub use jwt::SigningAlgorithm;
pub use loopback::LoopbackAuthorizer;
pub use metadata::{AuthorizationServerMetadata, ProtectedResourceMetadata};
pub use oidc::{OidcConfig, OidcIdentity, OidcProvider, PendingLogin};
pub use policy::{secure_or_loopback, UrlPolicy};
pub use revoke::{revoke_at_authorization_server, RevocationClient};
pub use store::{
    ClientRegistration, FileTokenStore, MemoryTokenStore, StoredAuth, TokenStore, Tokens,
};

/// The boxed future [`Authorizer`], [`TokenStore`] and [`TokenValidator`] implementations return.
pub use crate::session::BoxFuture;

/// Whether two secrets (bearer tokens, CSRF tokens, sign-in states) are equal, compared in time
/// independent of where they differ (only their lengths may show).
pub fn same_secret(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

use std::time::Duration;

use base64::Engine as _;

use crate::error::AuthError;

/// The bound on any metadata, JWKS, registration, token or introspection response body.
pub(crate) const MAX_AUTH_BODY: usize = 256 * 1024;

pub(crate) fn b64url(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The claims of a JWT (`HEADER.PAYLOAD.SIGNATURE`, at most 64 KiB) read without checking
/// anything: only for labelling or timing a token that came from its issuer just now (its `sub`
/// for a receipt, its `exp` to renew it sooner), never to trust it.
pub fn unverified_jwt_claims(token: &str) -> Option<serde_json::Value> {
    if token.len() > 64 * 1024 {
        return None;
    }
    let mut parts = token.split('.');
    let (_, payload) = (parts.next()?, parts.next()?);
    parts.next()?;
    serde_json::from_slice(&b64url_decode(payload)?).ok()
}

pub(crate) fn b64url_decode(s: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s.trim_end_matches('='))
        .ok()
}

pub(crate) fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// `n` random bytes from the OS, base64url: state, PKCE verifiers, JWT ids.
pub(crate) fn random_string(n: usize) -> String {
    let mut bytes = vec![0u8; n];
    getrandom::fill(&mut bytes).expect("the OS random source");
    b64url(&bytes)
}

pub(crate) fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The parameters of a `Bearer` challenge in a `WWW-Authenticate` header (RFC 6750, RFC 9728).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BearerChallenge {
    /// `error`: `invalid_token`, `insufficient_scope`, `invalid_request`.
    pub error: Option<String>,
    /// `error_description`.
    pub error_description: Option<String>,
    /// `scope`: the scopes the resource asks for.
    pub scope: Option<String>,
    /// `resource_metadata`: where the protected resource metadata is (RFC 9728).
    pub resource_metadata: Option<String>,
}

impl BearerChallenge {
    /// Reads the `Bearer` challenge out of a `WWW-Authenticate` value that may hold several
    /// challenges; `None` when there is none.
    pub fn parse(header: &str) -> Option<BearerChallenge> {
        let mut out = None;
        for (scheme, params) in parse_challenges(header) {
            if scheme.eq_ignore_ascii_case("bearer") {
                let mut c = BearerChallenge::default();
                for (k, v) in params {
                    match k.to_ascii_lowercase().as_str() {
                        "error" => c.error = Some(v),
                        "error_description" => c.error_description = Some(v),
                        "scope" => c.scope = Some(v),
                        "resource_metadata" => c.resource_metadata = Some(v),
                        _ => {}
                    }
                }
                out = Some(c);
                break;
            }
        }
        out
    }

    /// The header value: `Bearer k="v", ...` with the parameters that are set.
    pub fn to_header(&self) -> String {
        let mut parts = Vec::new();
        for (k, v) in [
            ("error", &self.error),
            ("error_description", &self.error_description),
            ("scope", &self.scope),
            ("resource_metadata", &self.resource_metadata),
        ] {
            if let Some(v) = v {
                parts.push(format!("{k}=\"{}\"", quote(v)));
            }
        }
        if parts.is_empty() {
            "Bearer".to_owned()
        } else {
            format!("Bearer {}", parts.join(", "))
        }
    }
}

/// Escapes a quoted-string's content; control characters (which a header cannot carry) are
/// dropped.
fn quote(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '"' | '\\' => {
                s.push('\\');
                s.push(c);
            }
            c if c.is_control() => {}
            c => s.push(c),
        }
    }
    s
}

/// Splits a `WWW-Authenticate` value into challenges: `(scheme, [(param, value)])`. Tolerant:
/// what does not parse ends the current challenge.
fn parse_challenges(header: &str) -> Vec<(String, Vec<(String, String)>)> {
    let b = header.as_bytes();
    let mut i = 0;
    let mut out: Vec<(String, Vec<(String, String)>)> = Vec::new();
    let is_tchar = |c: u8| c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~/".contains(&c);
    let skip_ws = |i: &mut usize| {
        while *i < b.len() && (b[*i] == b' ' || b[*i] == b'\t' || b[*i] == b',') {
            *i += 1;
        }
    };
    loop {
        skip_ws(&mut i);
        if i >= b.len() {
            break;
        }
        let start = i;
        while i < b.len() && is_tchar(b[i]) {
            i += 1;
        }
        if start == i {
            // Not a token: skip a byte and go on.
            i += 1;
            continue;
        }
        let word = &header[start..i];
        // A parameter of the current challenge is `token = value`; anything else starts a new
        // challenge.
        let mut j = i;
        while j < b.len() && (b[j] == b' ' || b[j] == b'\t') {
            j += 1;
        }
        if j < b.len() && b[j] == b'=' && !out.is_empty() {
            // token68 (trailing '=') or a parameter.
            j += 1;
            while j < b.len() && (b[j] == b' ' || b[j] == b'\t') {
                j += 1;
            }
            let value = if j < b.len() && b[j] == b'"' {
                j += 1;
                let mut v = String::new();
                while j < b.len() && b[j] != b'"' {
                    if b[j] == b'\\' && j + 1 < b.len() {
                        j += 1;
                    }
                    let ch_len = utf8_len(b[j]);
                    v.push_str(&header[j..(j + ch_len).min(b.len())]);
                    j += ch_len;
                }
                j += 1;
                v
            } else {
                let vs = j;
                while j < b.len() && b[j] != b',' && b[j] != b' ' && b[j] != b'\t' {
                    j += 1;
                }
                header[vs..j].to_owned()
            };
            if let Some(last) = out.last_mut() {
                last.1.push((word.to_owned(), value));
            }
            i = j;
        } else {
            out.push((word.to_owned(), Vec::new()));
        }
    }
    out
}

fn utf8_len(first: u8) -> usize {
    match first {
        0x00..=0x7f => 1,
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        _ => 4,
    }
}

/// How a request to an authorization server or a metadata URL failed.
#[derive(Debug)]
pub(crate) enum ExchangeError {
    /// The request could not be sent, or no answer came (the error chain).
    Send(String),
    /// The body could not be read, or is over [`MAX_AUTH_BODY`].
    Body(String),
    /// No complete answer (headers and body) within the bound.
    Timeout(Duration),
}

impl std::fmt::Display for ExchangeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExchangeError::Send(why) | ExchangeError::Body(why) => f.write_str(why),
            ExchangeError::Timeout(d) => write!(f, "no complete answer within {}", duration(*d)),
        }
    }
}

/// `d` for a message: whole seconds as `N s`, else milliseconds.
pub(crate) fn duration(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

/// Sends `rb` and reads the answer's body (at most [`MAX_AUTH_BODY`] bytes) within `timeout`,
/// end to end: connecting, the headers and the whole body. A server that sends its headers and
/// then trickles the body is cut off like one that never answers.
pub(crate) async fn exchange(
    rb: reqwest::RequestBuilder,
    timeout: Duration,
) -> Result<(reqwest::StatusCode, Vec<u8>), ExchangeError> {
    let work = async {
        let resp = rb
            .send()
            .await
            .map_err(|e| ExchangeError::Send(error_chain(&e)))?;
        let status = resp.status();
        let body = read_body(resp).await.map_err(ExchangeError::Body)?;
        Ok((status, body))
    };
    tokio::time::timeout(timeout, work)
        .await
        .unwrap_or(Err(ExchangeError::Timeout(timeout)))
}

/// GETs `url` and decodes a JSON body of at most [`MAX_AUTH_BODY`] bytes, all within
/// `timeout`: `Ok(None)` for a status other than 2xx (nothing there), `Err` for a transport
/// failure, a timeout or a body that is not the JSON expected.
pub(crate) async fn get_json<T: serde::de::DeserializeOwned>(
    http: &reqwest::Client,
    url: &reqwest::Url,
    headers: &[(&str, &str)],
    timeout: Duration,
) -> Result<Option<T>, String> {
    let mut rb = http.get(url.clone()).header("accept", "application/json");
    for (k, v) in headers {
        rb = rb.header(*k, *v);
    }
    let (status, body) = exchange(rb, timeout)
        .await
        .map_err(|e| format!("GET {url}: {e}"))?;
    if !status.is_success() {
        return Ok(None);
    }
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(|e| format!("GET {url}: malformed JSON: {e}"))
}

/// Reads a response body of at most [`MAX_AUTH_BODY`] bytes.
pub(crate) async fn read_body(mut resp: reqwest::Response) -> Result<Vec<u8>, String> {
    if resp
        .content_length()
        .is_some_and(|n| n > MAX_AUTH_BODY as u64)
    {
        return Err(format!("the body is over {MAX_AUTH_BODY} bytes"));
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| format!("reading the body: {}", error_chain(&e)))?
    {
        if body.len() + chunk.len() > MAX_AUTH_BODY {
            return Err(format!("the body is over {MAX_AUTH_BODY} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

pub(crate) use crate::http::client::error_chain;

/// At most `n` characters of text an authorization server sent, for an error message.
pub(crate) fn bounded(s: &str, n: usize) -> String {
    let s: String = s.chars().filter(|c| !c.is_control()).take(n).collect();
    s
}

pub(crate) fn config_error(why: impl Into<String>) -> AuthError {
    AuthError::Config(why.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_challenges_parse() {
        let c = BearerChallenge::parse(
            r#"Bearer error="insufficient_scope", scope="mcp:basic mcp:write", resource_metadata="http://localhost:1/.well-known/oauth-protected-resource/mcp""#,
        )
        .unwrap();
        assert_eq!(c.error.as_deref(), Some("insufficient_scope"));
        assert_eq!(c.scope.as_deref(), Some("mcp:basic mcp:write"));
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("http://localhost:1/.well-known/oauth-protected-resource/mcp")
        );
        // Several challenges, tokens unquoted, escapes, case of the scheme.
        let c = BearerChallenge::parse(
            r#"Basic realm="x", bearer error=invalid_token, error_description="say \"no\"""#,
        )
        .unwrap();
        assert_eq!(c.error.as_deref(), Some("invalid_token"));
        assert_eq!(c.error_description.as_deref(), Some("say \"no\""));
        assert_eq!(BearerChallenge::parse("Basic realm=\"x\""), None);
        assert_eq!(
            BearerChallenge::parse("Bearer"),
            Some(BearerChallenge::default())
        );
    }

    #[test]
    fn bearer_challenge_round_trips() {
        let c = BearerChallenge {
            error: Some("insufficient_scope".into()),
            error_description: Some("needs \"write\"".into()),
            scope: Some("a b".into()),
            resource_metadata: Some("http://h/.well-known/oauth-protected-resource/mcp".into()),
        };
        let h = c.to_header();
        assert_eq!(
            h,
            r#"Bearer error="insufficient_scope", error_description="needs \"write\"", scope="a b", resource_metadata="http://h/.well-known/oauth-protected-resource/mcp""#
        );
        assert_eq!(BearerChallenge::parse(&h), Some(c));
    }
}
