//! Who is calling: the authenticated principal an authentication layer in front of the server
//! (purra's resource-server guard, or a host's own) puts in the HTTP request's extensions, and
//! every handler reads through `RequestCtx::principal`.

use std::collections::BTreeSet;
use std::fmt;

use serde_json::{Map, Value};

/// An authenticated caller: the subject of an access token, the scopes it grants, the client it
/// was issued to, and every claim it carried.
///
/// Built by [`auth::AuthLayer`](crate::auth::AuthLayer) from a validated token; an
/// authentication layer of a host's own builds one with [`Principal::new`] and inserts it into
/// the HTTP request's extensions. Streamable HTTP sessions are bound to the principal that
/// created them ([`binding_key`](Self::binding_key)).
#[derive(Clone, PartialEq)]
#[non_exhaustive]
pub struct Principal {
    /// The issuer (`iss`) that vouches for the subject, when known.
    pub issuer: Option<String>,
    /// The subject (`sub`): the user, or the client itself for client credentials. A token
    /// without `sub` (client-only) has the subject `client:CLIENT_ID`, and a token whose `sub`
    /// starts with `client:` is refused, so the two never collide
    /// (`purra_protocol::auth::CLIENT_SUBJECT_PREFIX`, feature `auth`).
    pub subject: String,
    /// The scopes the token grants.
    pub scopes: BTreeSet<String>,
    /// The OAuth client the token was issued to (`client_id`, else `azp`).
    pub client_id: Option<String>,
    /// Expiry of the token, in seconds since the Unix epoch.
    pub expires_at: Option<u64>,
    /// Every claim of the token (JWT) or of the introspection answer, as sent.
    pub claims: Map<String, Value>,
}

impl Principal {
    /// A principal for `subject` with no issuer, scopes, client or claims.
    pub fn new(subject: impl Into<String>) -> Self {
        Principal {
            issuer: None,
            subject: subject.into(),
            scopes: BTreeSet::new(),
            client_id: None,
            expires_at: None,
            claims: Map::new(),
        }
    }
    /// Sets the issuer.
    pub fn with_issuer(mut self, issuer: impl Into<String>) -> Self {
        self.issuer = Some(issuer.into());
        self
    }
    /// Adds scopes.
    pub fn with_scopes<I, S>(mut self, scopes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.scopes.extend(scopes.into_iter().map(Into::into));
        self
    }
    /// Sets the client id.
    pub fn with_client_id(mut self, client_id: impl Into<String>) -> Self {
        self.client_id = Some(client_id.into());
        self
    }
    /// Whether the principal holds `scope`.
    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes.contains(scope)
    }
    /// The identity sessions and other per-caller state are bound to: issuer and subject
    /// (`iss` + NUL + `sub`), so equal subjects of two issuers never match. Stable across token
    /// refreshes; the same for every token of one user.
    pub fn binding_key(&self) -> String {
        format!("{}\0{}", self.issuer.as_deref().unwrap_or(""), self.subject)
    }
}

impl fmt::Debug for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Claims are left out: a host may log principals, and claims can carry personal data.
        f.debug_struct("Principal")
            .field("issuer", &self.issuer)
            .field("subject", &self.subject)
            .field("scopes", &self.scopes)
            .field("client_id", &self.client_id)
            .field("expires_at", &self.expires_at)
            .field("claims", &self.claims.len())
            .finish()
    }
}
