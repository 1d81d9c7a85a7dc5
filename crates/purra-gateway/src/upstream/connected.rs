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

    /// Over a [`Connector`] set up by the caller (its refresh margin).
    pub fn with(connector: Connector) -> Connected {
        Connected(Arc::new(connector))
    }
}

fn credential_error(e: ConnectError) -> CredentialError {
    match e {
        ConnectError::Missing(t) => CredentialError::Missing(t),
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
                .map_err(credential_error)?;
            Ok(ConnectAs {
                env: Vec::new(),
                auth: Some(Arc::new(ConnectionAuth::new(
                    self.0.clone(),
                    &who.principal,
                ))),
            })
        })
    }

    fn called_as(&self, who: &Who) -> Option<String> {
        self.0.called_as(&who.principal).map(|s| format!("sub={s}"))
    }
}
