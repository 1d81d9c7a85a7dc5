//! The third way an upstream is called as the person who asked (`[upstreams.ID.auth] mode =
//! "oauth"`): with the principal's own OAuth connection to the upstream's authorization server,
//! made once on the page (`/connect/ID`) and kept sealed in the credential store
//! ([`purra_page::connect`] holds the format, the refresh and the connect flow).
//!
//! Each request of a principal's connection carries that principal's access token
//! ([`ConnectionAuth`]); an expired one (or one the upstream refuses with 401) is refreshed and
//! the rotated tokens stored with compare-and-swap, so two gateway instances refreshing at once
//! end with one valid refresh token. No connection, or one the authorization server no longer
//! honours: the call fails with the connect URL. What the upstream was called as is the token's
//! `sub`; never a token.

use std::sync::Arc;

use purra_core::vault::Keyring;
use purra_core::CredentialStore;
use purra_page::connect::{ConnectError, ConnectionAuth, Connector};
use purra_protocol::auth::BoxFuture;

use crate::upstream::principals::{ConnectAs, CredentialError, Credentials, Who};

/// An upstream called with each principal's stored OAuth connection.
#[derive(Clone)]
pub(crate) struct Connected(Arc<Connector>);

impl Connected {
    /// The connections of `upstream` in `store`, opened with `keys`; a principal without one is
    /// sent to `{page_url}/connect/{upstream}`.
    pub fn new(
        upstream: &str,
        page_url: &str,
        store: Arc<dyn CredentialStore>,
        keys: Arc<Keyring>,
    ) -> Connected {
        Connected::with(Connector::new(upstream, page_url, store, keys))
    }

    /// The authorization of `principal`'s requests through its stored connection (the
    /// discovery principal's, for the shared connection that lists the tools).
    pub fn auth_of(&self, principal: &str) -> Arc<dyn purra_protocol::http::HttpAuth> {
        Arc::new(ConnectionAuth::new(self.0.clone(), principal))
    }

    /// Over a [`Connector`] set up by the caller (its refresh margin).
    pub fn with(connector: Connector) -> Connected {
        Connected(Arc::new(connector))
    }
}

fn credential_error(e: ConnectError, url: &str) -> CredentialError {
    match e {
        ConnectError::Missing(why) => CredentialError::Unconnected {
            why,
            url: url.to_owned(),
        },
        ConnectError::Unavailable(t) => CredentialError::Unavailable(t),
    }
}

impl Credentials for Connected {
    fn connect_as<'a>(&'a self, who: &'a Who) -> BoxFuture<'a, Result<ConnectAs, CredentialError>> {
        Box::pin(async move {
            // Obtained now: a principal without a connection is told where to make one before
            // anything is sent.
            self.0
                .access(&who.principal, None)
                .await
                .map_err(|e| credential_error(e, self.0.connect_url()))?;
            Ok(ConnectAs {
                env: Vec::new(),
                auth: Some(Arc::new(ConnectionAuth::new(
                    self.0.clone(),
                    &who.principal,
                ))),
            })
        })
    }

    fn still_held<'a>(&'a self, who: &'a Who) -> BoxFuture<'a, Result<(), CredentialError>> {
        Box::pin(async move {
            self.0
                .access(&who.principal, None)
                .await
                .map(drop)
                .map_err(|e| credential_error(e, self.0.connect_url()))
        })
    }

    fn called_as(&self, who: &Who) -> Option<String> {
        self.0.called_as(&who.principal).map(|s| format!("sub={s}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;
    use purra_core::{CredentialKey, CredentialKind, CredentialMeta, CredentialWrite};
    use purra_page::connect::{Connection, CONNECTION};

    fn keys() -> Arc<Keyring> {
        Arc::new(Keyring::parse(&Keyring::new_key_line("k1").unwrap()).unwrap())
    }

    fn who(principal: &str) -> Who {
        Who {
            principal: principal.to_owned(),
            token: None,
        }
    }

    /// No connection: the error names the connect URL, nothing is connected. A fresh stored
    /// connection: its token on each request, and the receipt names the token's `sub`.
    #[tokio::test]
    async fn a_principal_is_called_with_its_own_stored_connection_or_told_where_to_connect() {
        let store: Arc<dyn CredentialStore> =
            Arc::new(purra_sqlite::SqliteStore::open_in_memory().unwrap());
        let keys = keys();
        let connected = Connected::new("files", "https://gw.example/", store.clone(), keys.clone());
        let err = connected.connect_as(&who("bob")).await.unwrap_err();
        assert_eq!(
            err,
            CredentialError::Unconnected {
                why: "bob has no connection to upstream \"files\": connect at \
                      https://gw.example/connect/files"
                    .into(),
                url: "https://gw.example/connect/files".into(),
            }
        );
        assert_eq!(connected.called_as(&who("bob")), None);

        let b64 = |v: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
        let jwt = format!(
            "{}.{}.sig",
            b64(r#"{"alg":"ES256"}"#),
            b64(r#"{"sub":"alice"}"#)
        );
        let conn: Connection = serde_json::from_value(serde_json::json!({
            "access_token": jwt,
            "refresh_token": "r1",
            "expires_at": 4_000_000_000u64,
            "token_endpoint": "https://as.example/token",
            "client_id": "c1",
        }))
        .unwrap();
        let key = CredentialKey::new("alice", "files", CONNECTION);
        let sealed = keys
            .seal(
                &key,
                CredentialKind::OAuth,
                &purra_core::vault::Secret::new(serde_json::to_vec(&conn).unwrap()),
            )
            .unwrap();
        let meta = CredentialMeta {
            subject: Some("alice".into()),
            ..CredentialMeta::default()
        };
        store
            .put_credential(
                key,
                CredentialWrite {
                    kind: CredentialKind::OAuth,
                    sealed,
                    meta,
                    at: std::time::SystemTime::now(),
                },
            )
            .await
            .unwrap();
        let auth = connected
            .connect_as(&who("alice"))
            .await
            .unwrap()
            .auth
            .unwrap();
        assert_eq!(
            auth.authorization().await.unwrap(),
            Some(format!("Bearer {jwt}"))
        );
        assert_eq!(
            connected.called_as(&who("alice")).as_deref(),
            Some("sub=alice")
        );
        assert!(!format!("{err:?}").contains("r1"));
    }
}
