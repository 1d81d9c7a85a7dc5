//! Who an upstream is called as, made from its configuration: the configured headers and
//! environment only; a service identity (`[upstreams.ID.auth] mode = "client_credentials"`); each
//! caller's own exchanged token (`mode = "token_exchange"`), the gateway's client credentials
//! token serving discovery and, with `actor`, the exchange's actor token; or, for a stdio upstream
//! with `per_principal`, a process per principal with its stored secrets in its environment; or
//! each principal's own OAuth connection made on the page (`mode = "oauth"`).

use std::sync::Arc;
use std::time::Duration;

use purra_core::vault::Keyring;
use purra_core::CredentialStore;
use purra_protocol::auth::{
    ExchangeCache, OAuthClient, OAuthConfig, SigningAlgorithm, SigningKey, TokenExchangeConfig,
    UrlPolicy,
};

use crate::config::secret::{read_secret_env, read_secret_file};
use crate::config::{
    OAuthClientAuth, UpstreamAuth, UpstreamConfig, DEFAULT_MAX_PRINCIPALS,
    DEFAULT_PRINCIPAL_IDLE_TIMEOUT,
};
use crate::upstream::connected::Connected;
use crate::upstream::credentials::{Exchanged, StoredSecrets};
use crate::upstream::principals::Principals;
use crate::upstream::Identity;

/// What identities are made with beyond the configuration: the store's credentials and the key
/// that opens them.
#[derive(Clone, Default)]
pub(crate) struct IdentityDeps {
    /// The store's credentials, when the store keeps them (every durable one does).
    pub credentials: Option<Arc<dyn CredentialStore>>,
    /// The keyring (`[gateway] credential_keys`, else `PURRA_CREDENTIAL_KEYS`), when one is set.
    pub keys: Option<Arc<Keyring>>,
    /// The approver page's public URL (`[page] url`): where principals connect.
    pub page_url: Option<String>,
    /// Where bound tools are pinned (`on_catalog_change = "hold"` with a durable store).
    pub pins: Option<crate::upstream::Pins>,
}

/// How the gateway authenticates as its client: the secret, or the key for `private_key_jwt`.
enum ClientSecret {
    Secret(String),
    Key(SigningKey),
}

fn client_secret(c: &OAuthClientAuth) -> Result<ClientSecret, (String, String)> {
    if let Some(file) = &c.private_key_file {
        let pem = std::fs::read(file).map_err(|e| {
            (
                "private_key_file".into(),
                format!("cannot read {}: {e}", file.display()),
            )
        })?;
        let alg_name = c.private_key_alg.as_deref().unwrap_or("ES256");
        let alg = SigningAlgorithm::from_name(alg_name).ok_or_else(|| {
            (
                "private_key_alg".to_owned(),
                format!("{alg_name:?} is not a signing algorithm purra knows (ES256, RS256, EdDSA, ...)"),
            )
        })?;
        let mut key = SigningKey::from_pkcs8(&pem, alg).map_err(|e| {
            (
                "private_key_file".to_owned(),
                format!("{}: {e}", file.display()),
            )
        })?;
        if let Some(kid) = &c.key_id {
            key = key.with_kid(kid.as_str());
        }
        return Ok(ClientSecret::Key(key));
    }
    if let Some(file) = &c.client_secret_file {
        return read_secret_file(file)
            .map(ClientSecret::Secret)
            .map_err(|why| ("client_secret_file".into(), why));
    }
    if let Some(var) = &c.client_secret_env {
        return read_secret_env(var)
            .map(ClientSecret::Secret)
            .map_err(|why| ("client_secret_env".into(), why));
    }
    Err((
        String::new(),
        "no client_secret_file, client_secret_env or private_key_file".into(),
    ))
}

/// The gateway's own client credentials at `c`'s authorization server, for the upstream at
/// `url` (its token's resource).
fn service(url: &str, c: &OAuthClientAuth, secret: &ClientSecret) -> Result<OAuthClient, String> {
    let mut config = match secret {
        ClientSecret::Secret(s) => {
            OAuthConfig::client_credentials(c.client_id.as_str(), s.as_str())
        }
        ClientSecret::Key(k) => {
            OAuthConfig::client_credentials_jwt(c.client_id.as_str(), k.clone())
        }
    }
    .authorization_server(c.issuer.as_str())
    .url_policy(UrlPolicy::strict().allow_loopback(true));
    if let Some(scope) = &c.scope {
        config = config.scopes(scope.split_whitespace());
    }
    OAuthClient::new(url, config).map_err(|e| e.to_string())
}

/// The identity of upstream `u`: `Err((key under upstreams.ID, message))` when it cannot be made
/// (a secret file unreadable, no credential key for per-principal secrets).
pub(crate) fn identity(
    id: &str,
    u: &UpstreamConfig,
    deps: &IdentityDeps,
) -> Result<Identity, (String, String)> {
    let pool = || {
        Principals::new(
            u.max_principals.unwrap_or(DEFAULT_MAX_PRINCIPALS) as usize,
            u.idle_timeout
                .map_or(DEFAULT_PRINCIPAL_IDLE_TIMEOUT, |d| d.0)
                .max(Duration::from_secs(1)),
        )
    };
    let url = u.url.as_deref().unwrap_or_default();
    let at = |(k, why): (String, String)| {
        if k.is_empty() {
            ("auth".to_owned(), why)
        } else {
            (format!("auth.{k}"), why)
        }
    };
    match &u.auth {
        None if u.per_principal => {
            let (Some(store), Some(keys)) = (&deps.credentials, &deps.keys) else {
                return Err((
                    "per_principal".into(),
                    "the principals' stored credentials need a key: set [gateway] \
                     credential_keys or the PURRA_CREDENTIAL_KEYS environment variable"
                        .into(),
                ));
            };
            let credentials = StoredSecrets::new(
                id,
                store.clone(),
                keys.clone(),
                u.env_from_credential.clone(),
            );
            Ok(Identity {
                service: None,
                per_principal: Some((Arc::new(credentials), pool())),
                deferred: false,
            })
        }
        None => Ok(Identity::default()),
        Some(UpstreamAuth::Oauth(o)) => {
            let (Some(store), Some(keys), Some(page)) =
                (&deps.credentials, &deps.keys, &deps.page_url)
            else {
                return Err((
                    "auth".into(),
                    "the principals' OAuth connections need the store's credentials, a key \
                     ([gateway] credential_keys or PURRA_CREDENTIAL_KEYS) and [page] url"
                        .into(),
                ));
            };
            let credentials = Connected::new(id, page, store.clone(), keys.clone());
            Ok(Identity {
                // The tools are listed as the discovery principal, with its own connection.
                service: Some(credentials.auth_of(&o.discovery_principal)),
                per_principal: Some((Arc::new(credentials), pool())),
                deferred: true,
            })
        }
        Some(UpstreamAuth::ClientCredentials(c)) => {
            let secret = client_secret(c).map_err(at)?;
            let svc = service(url, c, &secret).map_err(|why| ("auth".to_owned(), why))?;
            Ok(Identity {
                service: Some(Arc::new(svc)),
                per_principal: None,
                deferred: false,
            })
        }
        Some(UpstreamAuth::TokenExchange(c)) => {
            let secret = client_secret(c).map_err(at)?;
            let svc: Arc<dyn purra_protocol::http::HttpAuth> =
                Arc::new(service(url, c, &secret).map_err(|why| ("auth".to_owned(), why))?);
            let endpoint = c.token_endpoint.clone().unwrap_or_default();
            let exchange = match &secret {
                ClientSecret::Secret(s) => TokenExchangeConfig::client_secret(
                    &endpoint,
                    &c.issuer,
                    &c.client_id,
                    s.as_str(),
                ),
                ClientSecret::Key(k) => TokenExchangeConfig::private_key_jwt(
                    &endpoint,
                    &c.issuer,
                    &c.client_id,
                    k.clone(),
                ),
            }
            .url_policy(UrlPolicy::strict().allow_loopback(true))
            .build()
            .map_err(|e| ("auth".to_owned(), e.to_string()))?;
            let audience = if c.audience.is_empty() && c.resource.is_empty() {
                vec![url.to_owned()]
            } else {
                c.audience.clone()
            };
            let credentials = Exchanged::new(
                id,
                ExchangeCache::new(exchange),
                audience,
                c.resource.clone(),
                c.scope.clone(),
                c.actor.then(|| svc.clone()),
            );
            Ok(Identity {
                service: Some(svc),
                per_principal: Some((Arc::new(credentials), pool())),
                deferred: false,
            })
        }
    }
}
