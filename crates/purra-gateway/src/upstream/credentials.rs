//! The credentials an upstream is called with as the person who asked: an RFC 8693 token
//! exchange of the caller's own validated token ([`Exchanged`]), or the principal's secrets from
//! the store, opened with the gateway's keyring, in a stdio server's environment
//! ([`StoredSecrets`]).
//!
//! Neither ever forwards the caller's inbound token, and neither puts a token or a secret in a
//! log line, an error text or a receipt: what the upstream was called as is its `sub` (and `act`
//! when the gateway is named as actor), read from the issued token's claims.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use purra_core::vault::Keyring;
use purra_core::{CredentialKey, CredentialKind, CredentialStore};
use purra_protocol::auth::{BoxFuture, ExchangeCache, ExchangeRequest, ValidatedToken};
use purra_protocol::http::{AuthChallenge, HttpAuth};
use purra_protocol::Error;

use crate::upstream::principals::{ConnectAs, CredentialError, Credentials, Who};

/// The most principals whose latest inbound token an [`Exchanged`] keeps (the pool's
/// connections need theirs; older entries are dropped first).
const MAX_SUBJECTS: usize = 10_000;

/// An upstream called with a token the authorization server issues for each principal in
/// exchange for its own validated inbound token (RFC 8693), cached per principal until shortly
/// before it expires.
#[derive(Clone)]
pub(crate) struct Exchanged(Arc<ExchangedInner>);

struct ExchangedInner {
    upstream: String,
    cache: ExchangeCache,
    audience: Vec<String>,
    resource: Vec<String>,
    scope: Option<String>,
    /// The gateway's own token, sent as `actor_token` so the issued token names it (`act`).
    actor: Option<Arc<dyn HttpAuth>>,
    /// The latest inbound token of each principal, and when it came.
    subjects: Mutex<HashMap<String, (ValidatedToken, SystemTime)>>,
    /// What each principal's last issued token says it is (`sub`, `act`).
    called_as: Mutex<HashMap<String, String>>,
}

impl Exchanged {
    /// Exchanges at `cache`'s authorization server for tokens naming `audience` and/or
    /// `resource` with `scope`; with `actor`, the gateway's own token goes as the actor token.
    pub fn new(
        upstream: &str,
        cache: ExchangeCache,
        audience: Vec<String>,
        resource: Vec<String>,
        scope: Option<String>,
        actor: Option<Arc<dyn HttpAuth>>,
    ) -> Exchanged {
        Exchanged(Arc::new(ExchangedInner {
            upstream: upstream.to_owned(),
            cache,
            audience,
            resource,
            scope,
            actor,
            subjects: Mutex::new(HashMap::new()),
            called_as: Mutex::new(HashMap::new()),
        }))
    }
}

impl ExchangedInner {
    async fn authorization(&self, principal: &str) -> Result<String, Error> {
        let subject = self
            .subjects
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(principal)
            .map(|(t, _)| t.clone())
            .ok_or_else(|| {
                Error::from(purra_protocol::AuthError::Authorization(format!(
                    "no token of {principal} to exchange for upstream {}",
                    self.upstream
                )))
            })?;
        let mut request = ExchangeRequest::new(subject.secret());
        for a in &self.audience {
            request = request.audience(a.as_str());
        }
        for r in &self.resource {
            request = request.resource(r.as_str());
        }
        if let Some(s) = &self.scope {
            request = request.scope(s.as_str());
        }
        if let Some(actor) = &self.actor {
            if let Some(bearer) = actor.authorization().await? {
                let token = bearer.strip_prefix("Bearer ").unwrap_or(&bearer);
                request = request.actor_token(token, purra_protocol::auth::ACCESS_TOKEN_TYPE);
            }
        }
        let issued = self.cache.token(principal, &request).await?;
        if let Some(who) = identity_of(&issued.access_token) {
            self.called_as
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(principal.to_owned(), who);
        }
        Ok(issued.bearer())
    }
}

/// `sub` (and `act.sub`) of a JWT, read without checking anything: the token came from the
/// authorization server just now; this only labels the receipt.
fn identity_of(jwt: &str) -> Option<String> {
    let claims = purra_protocol::auth::unverified_jwt_claims(jwt)?;
    let sub = claims["sub"].as_str()?;
    Some(match claims["act"]["sub"].as_str() {
        Some(actor) => format!("sub={sub} act={actor}"),
        None => format!("sub={sub}"),
    })
}

/// The authorization of one principal's connection: each request carries the token exchanged
/// for that principal's latest inbound token.
struct PrincipalAuth {
    inner: Arc<ExchangedInner>,
    principal: String,
}

impl HttpAuth for PrincipalAuth {
    fn authorization(&self) -> BoxFuture<'_, Result<Option<String>, Error>> {
        Box::pin(async move { self.inner.authorization(&self.principal).await.map(Some) })
    }

    fn challenged<'a>(&'a self, c: AuthChallenge<'a>) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            if c.attempt == 0 {
                // Revoked or expired early at the server: one fresh exchange, then give up.
                self.inner.cache.forget(&self.principal);
                return Ok(());
            }
            Err(purra_protocol::AuthError::Authorization(format!(
                "upstream {} refused the token exchanged for {} (HTTP {})",
                self.inner.upstream, self.principal, c.status
            ))
            .into())
        })
    }
}

impl Credentials for Exchanged {
    fn connect_as<'a>(&'a self, who: &'a Who) -> BoxFuture<'a, Result<ConnectAs, CredentialError>> {
        Box::pin(async move {
            if who.token.is_none() {
                return Err(CredentialError::Missing(format!(
                    "upstream {:?} is called with the caller's own token, and this call came \
                     with none (call through the gateway's authenticated HTTP endpoint)",
                    self.0.upstream
                )));
            }
            let auth = PrincipalAuth {
                inner: self.0.clone(),
                principal: who.principal.clone(),
            };
            // The token is exchanged now: a refusal is the caller's, before anything is sent.
            auth.inner
                .authorization(&who.principal)
                .await
                .map_err(|e| {
                    CredentialError::Unavailable(format!("the token exchange failed: {e}"))
                })?;
            Ok(ConnectAs {
                env: Vec::new(),
                auth: Some(Arc::new(auth)),
            })
        })
    }

    fn needs_caller_token(&self) -> bool {
        true
    }

    fn update(&self, who: &Who) {
        let Some(token) = &who.token else { return };
        let mut subjects = self.0.subjects.lock().unwrap_or_else(|p| p.into_inner());
        if !subjects.contains_key(&who.principal) && subjects.len() >= MAX_SUBJECTS {
            if let Some(oldest) = subjects
                .iter()
                .min_by_key(|(_, (_, at))| *at)
                .map(|(k, _)| k.clone())
            {
                subjects.remove(&oldest);
            }
        }
        subjects.insert(who.principal.clone(), (token.clone(), SystemTime::now()));
    }

    fn renew(&self, who: &Who) {
        self.0.cache.forget(&who.principal);
    }

    fn called_as(&self, who: &Who) -> Option<String> {
        self.0
            .called_as
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&who.principal)
            .cloned()
    }
}

/// A stdio upstream started once per principal with that principal's stored secrets in its
/// environment (`env_from_credential`: variable name to credential name).
pub(crate) struct StoredSecrets {
    upstream: String,
    store: Arc<dyn CredentialStore>,
    keys: Arc<Keyring>,
    env_from_credential: BTreeMap<String, String>,
}

impl StoredSecrets {
    /// Reads `upstream`'s credentials from `store`, opened with `keys`.
    pub fn new(
        upstream: &str,
        store: Arc<dyn CredentialStore>,
        keys: Arc<Keyring>,
        env_from_credential: BTreeMap<String, String>,
    ) -> StoredSecrets {
        StoredSecrets {
            upstream: upstream.to_owned(),
            store,
            keys,
            env_from_credential,
        }
    }
}

impl StoredSecrets {
    /// `who`'s stored record `name`, or why there is none.
    async fn record(
        &self,
        who: &Who,
        name: &str,
    ) -> Result<(CredentialKey, purra_core::CredentialRecord), CredentialError> {
        let key = CredentialKey::new(&who.principal, &self.upstream, name);
        key.check()
            .map_err(|e| CredentialError::Unavailable(e.to_string()))?;
        let record = self
            .store
            .credential(key.clone())
            .await
            .map_err(|e| CredentialError::Unavailable(format!("the store failed: {e}")))?;
        match record {
            Some(r) => Ok((key, r)),
            None => Err(CredentialError::Missing(format!(
                "{} has no credential {name:?} for upstream {:?}: set it with `purra credentials \
                 set --principal {} --upstream {} {name}`",
                who.principal, self.upstream, who.principal, self.upstream
            ))),
        }
    }
}

impl Credentials for StoredSecrets {
    fn still_held<'a>(&'a self, who: &'a Who) -> BoxFuture<'a, Result<(), CredentialError>> {
        Box::pin(async move {
            for name in self.env_from_credential.values() {
                self.record(who, name).await?;
            }
            Ok(())
        })
    }

    fn connect_as<'a>(&'a self, who: &'a Who) -> BoxFuture<'a, Result<ConnectAs, CredentialError>> {
        Box::pin(async move {
            let mut env = Vec::new();
            for (var, name) in &self.env_from_credential {
                let (key, record) = self.record(who, name).await?;
                let secret = self
                    .keys
                    .open(&key, CredentialKind::Secret, &record.sealed)
                    .map_err(|e| CredentialError::Unavailable(e.to_string()))?;
                let text = String::from_utf8(secret.expose().to_vec()).map_err(|_| {
                    CredentialError::Unavailable(format!(
                        "the credential {name:?} of {} is not text",
                        who.principal
                    ))
                })?;
                let _ = self.store.touch_credential(key, SystemTime::now()).await;
                env.push((var.clone(), text));
            }
            Ok(ConnectAs { env, auth: None })
        })
    }

    fn called_as(&self, who: &Who) -> Option<String> {
        Some(format!("principal={} (stored credentials)", who.principal))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_receipt_names_sub_and_act_of_the_issued_token() {
        use base64::Engine as _;
        let b64 = |v: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
        let jwt = format!(
            "{}.{}.sig",
            b64(r#"{"alg":"RS256"}"#),
            b64(r#"{"sub":"alice","act":{"sub":"purra-gateway"}}"#)
        );
        assert_eq!(
            identity_of(&jwt).as_deref(),
            Some("sub=alice act=purra-gateway")
        );
        let jwt = format!("{}.{}.sig", b64("{}"), b64(r#"{"sub":"bob"}"#));
        assert_eq!(identity_of(&jwt).as_deref(), Some("sub=bob"));
        assert_eq!(identity_of("opaque-token"), None);
    }
}
