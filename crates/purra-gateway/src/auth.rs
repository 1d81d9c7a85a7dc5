//! Authenticated callers: the OAuth resource-server guard `[gateway.auth]` puts in front of the
//! gateway's Streamable HTTP listener, and the principal a caller's token proves.
//!
//! The guard is purra-protocol's [`AuthLayer`]: it serves the protected resource metadata (RFC
//! 9728) at `/.well-known/oauth-protected-resource/mcp`, answers a request without a valid token
//! 401 with a `WWW-Authenticate` challenge naming that metadata (403 `insufficient_scope` for a
//! token without the required scopes), and puts the token's [`Principal`] into the request, where
//! the gateway reads it. Tokens are JWTs checked against the issuer's keys ([`JwtValidator`]:
//! signature, `iss`, `aud` = the gateway's resource URL, expiry), or checked by token
//! introspection ([`Introspection`]).
//!
//! An authenticated caller's principal is its token's issuer and subject, written
//! `ISSUER#SUBJECT` ([`purra_core::principal_name`]): it is what scope rules' `principals` match,
//! what the write run id digests (so runs, approvals and receipts are the caller's own), what an
//! approval request names as who asked, and what separation of duties compares. A client-only
//! token (one without `sub`) proves `ISSUER#client:CLIENT_ID`, and a token whose own `sub`
//! starts with `client:` is refused (401), so a client never takes a user's principal
//! ([`purra_protocol::auth::CLIENT_SUBJECT_PREFIX`]). A token whose subject is empty, longer
//! than [`MAX_SUBJECT_CHARS`] or holds control characters is refused (401): a principal is
//! printable, and bounded.
//!
//! Tokens checked by introspection are answered from a cache of earlier answers (by the
//! token's hash; see [`Introspection`]), bounded as `[gateway.auth.introspection]` says
//! (`cache_max_age`, `cache_inactive`, `cache_max_entries`, `max_concurrent_per_address`).

use std::net::SocketAddr;
use std::path::Path;

use purra_protocol::auth::{
    AuthLayer, BoxFuture, Introspection, JwtValidator, TokenRejection, TokenValidator,
};
use purra_protocol::{AuthError, Principal};

use crate::config::AuthSettings;
use crate::config::ConfigSource;
use crate::ConfigError;

/// The longest subject a caller's token may carry, in characters: OpenID Connect's bound on `sub`.
pub const MAX_SUBJECT_CHARS: usize = 255;

/// The largest client secret file read (4 KiB): bounded before it is read whole.
const MAX_SECRET_BYTES: u64 = 4096;

/// The guard as configured, with the introspection client's secret read at start.
pub(crate) struct AuthPlan {
    settings: AuthSettings,
    /// The introspection client's secret (never logged, never in a message).
    secret: Option<String>,
}

impl AuthPlan {
    /// Reads what the guard needs besides the configuration: the introspection client's secret
    /// from its file or environment variable. A secret that cannot be read is a mistake at its key.
    pub(crate) fn read(
        settings: &AuthSettings,
        source: &ConfigSource,
    ) -> Result<AuthPlan, ConfigError> {
        let key = "gateway.auth.introspection";
        let secret = match &settings.introspection {
            None => None,
            Some(i) => Some(match (&i.client_secret_file, &i.client_secret_env) {
                (Some(file), _) => read_secret_file(file)
                    .map_err(|why| source.error(&format!("{key}.client_secret_file"), why))?,
                (None, Some(var)) => match std::env::var(var) {
                    Ok(v) if !v.trim().is_empty() => v.trim().to_owned(),
                    _ => {
                        return Err(source.error(
                            &format!("{key}.client_secret_env"),
                            format!("the environment variable {var} is not set or empty"),
                        ))
                    }
                },
                (None, None) => {
                    return Err(source.error(key, "needs client_secret_file or client_secret_env"))
                }
            }),
        };
        Ok(AuthPlan {
            settings: settings.clone(),
            secret,
        })
    }

    /// The issuer tokens must come from.
    pub(crate) fn issuer(&self) -> &str {
        &self.settings.issuer
    }

    /// The resource a listener bound to `local` guards: the configured one, else
    /// `http://LOCAL/mcp`.
    pub(crate) fn resource(&self, local: SocketAddr) -> String {
        self.settings
            .resource
            .clone()
            .unwrap_or_else(|| format!("http://{local}/mcp"))
    }

    /// The guard for a listener bound to `local`.
    pub(crate) fn layer(&self, local: SocketAddr) -> Result<AuthLayer, AuthError> {
        let a = &self.settings;
        let resource = self.resource(local);
        let inner: Box<dyn TokenValidator> = match (&a.introspection, &self.secret) {
            (Some(i), Some(secret)) => {
                let mut v = Introspection::new(&i.endpoint, &i.client_id, secret, &resource)
                    .issuer(&a.issuer);
                if let Some(d) = i.cache_max_age {
                    v = v.cache_max_age(d.0);
                }
                if let Some(d) = i.cache_inactive {
                    v = v.cache_inactive(d.0);
                }
                if let Some(n) = i.cache_max_entries {
                    v = v.cache_max_entries(n as usize);
                }
                if let Some(n) = i.max_concurrent_per_address {
                    v = v.max_concurrent_per_address(n as usize);
                }
                Box::new(v)
            }
            _ => {
                let mut v = JwtValidator::new(&a.issuer, &resource)?;
                if let Some(uri) = &a.jwks_uri {
                    v = v.jwks_uri(uri)?;
                }
                if let Some(yes) = a.require_at_jwt {
                    v = v.require_at_jwt(yes);
                }
                Box::new(v)
            }
        };
        let validator = CallerTokens {
            inner,
            issuer: a.issuer.clone(),
        };
        let mut layer = AuthLayer::new(&resource, &a.issuer, validator)?
            .required_scopes(a.scopes.iter().cloned());
        if let Some(s) = &a.scopes_supported {
            layer = layer.scopes_supported(s.iter().cloned());
        }
        Ok(layer)
    }
}

pub(crate) fn read_secret_file(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let file =
        std::fs::File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut text = String::new();
    file.take(MAX_SECRET_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if text.len() as u64 > MAX_SECRET_BYTES {
        return Err(format!(
            "{} is larger than {MAX_SECRET_BYTES} bytes",
            path.display()
        ));
    }
    let secret = text.trim();
    if secret.is_empty() {
        return Err(format!("{} is empty", path.display()));
    }
    Ok(secret.to_owned())
}

/// The configured validator, then the gateway's own rules for the principal it proves: the
/// issuer is the configured one when the token does not say (an introspection answer without
/// `iss`), and the subject is printable and bounded.
struct CallerTokens {
    inner: Box<dyn TokenValidator>,
    issuer: String,
}

impl TokenValidator for CallerTokens {
    fn validate<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Principal, TokenRejection>> {
        self.validate_from(token, None)
    }

    fn validate_from<'a>(
        &'a self,
        token: &'a str,
        peer: Option<std::net::IpAddr>,
    ) -> BoxFuture<'a, Result<Principal, TokenRejection>> {
        Box::pin(async move {
            let mut p = self.inner.validate_from(token, peer).await?;
            caller_subject(&p.subject).map_err(|why| TokenRejection::Invalid(why.into()))?;
            if p.issuer.is_none() {
                p.issuer = Some(self.issuer.clone());
            }
            Ok(p)
        })
    }
}

/// Whether `subject` can be part of a caller's principal, or why not.
fn caller_subject(subject: &str) -> Result<(), &'static str> {
    if subject.is_empty() {
        return Err("the token's subject is empty");
    }
    if subject.chars().count() > MAX_SUBJECT_CHARS {
        return Err("the token's subject is longer than 255 characters");
    }
    if subject.chars().any(char::is_control) {
        return Err("the token's subject holds control characters");
    }
    Ok(())
}

/// The principal of an authenticated caller: its token's issuer and subject
/// (`ISSUER#SUBJECT`).
pub(crate) fn principal_of(p: &Principal) -> String {
    purra_core::principal_name(p.issuer.as_deref().unwrap_or(""), &p.subject)
}

/// Who a request is from: the principal its token proves, else (stdio, HTTP without
/// `[gateway.auth]`) the configured one; never one the caller asserts.
pub(crate) fn caller_principal(proved: Option<&Principal>, configured: &str) -> String {
    proved.map_or_else(|| configured.to_owned(), principal_of)
}

/// A validator that hands out one principal per token (for the unit test).
#[cfg(test)]
struct Fixed(Principal);

#[cfg(test)]
impl TokenValidator for Fixed {
    fn validate<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<Principal, TokenRejection>> {
        let p = self.0.clone();
        Box::pin(async move { Ok(p) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn checked(p: Principal) -> Result<Principal, TokenRejection> {
        CallerTokens {
            inner: Box::new(Fixed(p)),
            issuer: "https://auth.example".into(),
        }
        .validate("t")
        .await
    }

    #[tokio::test]
    async fn subjects_are_printable_and_bounded_and_the_issuer_is_filled_in() {
        let p = checked(Principal::new("alice")).await.unwrap();
        assert_eq!(p.issuer.as_deref(), Some("https://auth.example"));
        assert_eq!(principal_of(&p), "https://auth.example#alice");
        let p = checked(Principal::new("bob").with_issuer("https://other.example"))
            .await
            .unwrap();
        assert_eq!(principal_of(&p), "https://other.example#bob");
        let refusal = |r: Result<Principal, TokenRejection>| match r {
            Err(TokenRejection::Invalid(why)) => why,
            other => panic!("not refused: {other:?}"),
        };
        assert_eq!(
            refusal(checked(Principal::new("")).await),
            "the token's subject is empty"
        );
        assert_eq!(
            refusal(checked(Principal::new("a\nb")).await),
            "the token's subject holds control characters"
        );
        assert_eq!(
            refusal(checked(Principal::new("x".repeat(256))).await),
            "the token's subject is longer than 255 characters"
        );
        assert!(checked(Principal::new("é".repeat(255))).await.is_ok());
    }
}
