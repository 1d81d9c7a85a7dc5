//! Token revocation (RFC 7009) against a real authorization server: oidc-provider
//! (`peers/oidc/server.mjs`, installed by `scripts/setup-peers.sh`) issues a token by the client
//! credentials grant; `auth::revoke_at_authorization_server` revokes it at the endpoint the
//! server's metadata names, and the server's own introspection (RFC 7662) then says it is no
//! longer active. A client with the wrong secret is refused with the server's error.

use std::time::Duration;

use purra_protocol::auth::{
    revoke_at_authorization_server, AuthorizationServerMetadata, ClientAuthMethod, RevocationClient,
};
use purra_protocol::AuthError;
use reqwest::Url;
use serde_json::Value;

use crate::auth_oidc::issuer;
use crate::support::client_credentials_token;

const SERVICE: (&str, &str) = ("purra-service", "service-secret");

async fn active(http: &reqwest::Client, endpoint: &str, token: &str) -> bool {
    let body: Value = http
        .post(endpoint)
        .basic_auth(SERVICE.0, Some(SERVICE.1))
        .form(&[("token", token)])
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .map(|b| serde_json::from_slice(&b).unwrap())
        .unwrap();
    body["active"].as_bool().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_token_is_no_longer_active_at_the_authorization_server() {
    let http = reqwest::Client::new();
    let meta: AuthorizationServerMetadata = http
        .get(format!("{}/.well-known/openid-configuration", issuer()))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .map(|b| serde_json::from_slice(&b).unwrap())
        .unwrap();
    let revocation: Url = meta
        .revocation_endpoint
        .as_deref()
        .expect("the metadata names a revocation endpoint")
        .parse()
        .unwrap();
    let token_endpoint = meta.token_endpoint.unwrap();
    let introspection = meta.introspection_endpoint.unwrap();

    let (kept, revoked) = (
        client_credentials_token(&http, &token_endpoint, SERVICE).await,
        client_credentials_token(&http, &token_endpoint, SERVICE).await,
    );
    assert!(active(&http, &introspection, &kept).await);
    assert!(active(&http, &introspection, &revoked).await);

    let wrong = RevocationClient {
        client_id: SERVICE.0,
        client_secret: Some("not-the-secret"),
        method: ClientAuthMethod::ClientSecretBasic,
    };
    let err = revoke_at_authorization_server(
        &http,
        &revocation,
        &revoked,
        "access_token",
        wrong,
        Duration::from_secs(10),
    )
    .await
    .unwrap_err();
    match &err {
        AuthError::Token { error, .. } => assert_eq!(error, "invalid_client"),
        other => panic!("{other:?}"),
    }
    assert!(!err.to_string().contains(&revoked), "no token in the error");
    assert!(!format!("{wrong:?}").contains("not-the-secret"));
    assert!(active(&http, &introspection, &revoked).await);

    let client = RevocationClient {
        client_id: SERVICE.0,
        client_secret: Some(SERVICE.1),
        method: ClientAuthMethod::ClientSecretBasic,
    };
    revoke_at_authorization_server(
        &http,
        &revocation,
        &revoked,
        "access_token",
        client,
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    assert!(!active(&http, &introspection, &revoked).await, "revoked");
    assert!(active(&http, &introspection, &kept).await, "only that one");
    // Revoking again is still 200 (RFC 7009: an unknown token is no error).
    revoke_at_authorization_server(
        &http,
        &revocation,
        &revoked,
        "access_token",
        client,
        Duration::from_secs(10),
    )
    .await
    .unwrap();
}
