//! Token revocation (RFC 7009): the hook `purra credentials revoke` and the gateway's connection
//! page call to revoke a per-user OAuth connection's refresh token at the authorization server
//! that issued it, where that server offers a `revocation_endpoint` (its RFC 8414 metadata).
//!
//! One bounded `POST` of `token` and `token_type_hint`, authenticated as the client the token was
//! issued to (HTTP Basic, the form body, or a public client's id). The server answers 200 whether
//! or not it knew the token (RFC 7009 §2.2), so `Ok` means "the server no longer honours it";
//! `503` is [`AuthError::Token`] with error `temporarily_unavailable` (try again later). The token
//! is never in an error or a log line.

use std::time::Duration;

use reqwest::Url;
use serde::Deserialize;

use super::client::url_encode;
use super::{b64, bounded, config_error, exchange, ClientAuthMethod, ExchangeError};
use crate::AuthError;

/// How the client authenticates at the revocation endpoint.
#[derive(Clone, Copy)]
pub struct RevocationClient<'a> {
    /// The client id the token was issued to.
    pub client_id: &'a str,
    /// Its secret, for `client_secret_basic` and `client_secret_post`.
    pub client_secret: Option<&'a str>,
    /// `ClientSecretBasic`, `ClientSecretPost` or `None` (a public client);
    /// `PrivateKeyJwt` is not supported here.
    pub method: ClientAuthMethod,
}

impl std::fmt::Debug for RevocationClient<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RevocationClient")
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.map(|_| "[redacted]"))
            .field("method", &self.method)
            .finish()
    }
}

#[derive(Deserialize)]
struct ErrorBody {
    error: Option<String>,
}

/// Revokes `token` (a `refresh_token` or an `access_token`, as `token_type_hint` says) at
/// `revocation_endpoint`, as `client`, within `timeout` end to end.
pub async fn revoke_at_authorization_server(
    http: &reqwest::Client,
    revocation_endpoint: &Url,
    token: &str,
    token_type_hint: &str,
    client: RevocationClient<'_>,
    timeout: Duration,
) -> Result<(), AuthError> {
    let mut form: Vec<(&str, &str)> = vec![("token", token), ("token_type_hint", token_type_hint)];
    let mut rb = http
        .post(revocation_endpoint.clone())
        .header("accept", "application/json");
    match client.method {
        ClientAuthMethod::ClientSecretBasic => {
            let secret = client.client_secret.unwrap_or("");
            let mut value = reqwest::header::HeaderValue::from_str(&format!(
                "Basic {}",
                b64(format!("{}:{}", url_encode(client.client_id), url_encode(secret)).as_bytes())
            ))
            .map_err(|_| config_error("the client id or secret cannot go in a header"))?;
            value.set_sensitive(true);
            rb = rb.header("authorization", value);
        }
        ClientAuthMethod::ClientSecretPost => {
            form.push(("client_id", client.client_id));
            form.push(("client_secret", client.client_secret.unwrap_or("")));
        }
        ClientAuthMethod::None => form.push(("client_id", client.client_id)),
        _ => {
            return Err(config_error(
                "token revocation supports client_secret_basic, client_secret_post and none",
            ))
        }
    }
    let (status, body) = exchange(rb.form(&form), timeout)
        .await
        .map_err(|e| AuthError::Token {
            error: match e {
                ExchangeError::Body(_) => "invalid_response".into(),
                _ => "request_failed".into(),
            },
            description: Some(format!("POST {revocation_endpoint}: {e}")),
        })?;
    if status.is_success() {
        return Ok(());
    }
    let error = serde_json::from_slice::<ErrorBody>(&body)
        .ok()
        .and_then(|b| b.error)
        .map(|e| bounded(&e, 64));
    Err(AuthError::Token {
        error: match (status.as_u16(), error) {
            (_, Some(e)) => e,
            (503, None) => "temporarily_unavailable".into(),
            (s, None) => format!("status {s}"),
        },
        description: Some(format!(
            "POST {revocation_endpoint}: status {}",
            status.as_u16()
        )),
    })
}
