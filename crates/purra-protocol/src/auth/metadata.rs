//! Protected resource metadata (RFC 9728) and authorization server metadata (RFC 8414, OpenID
//! Connect discovery): the documents, where to look for them, and the checks a client makes.

use reqwest::Url;
use serde::{Deserialize, Serialize};

use super::get_json;
use crate::error::AuthError;

/// What a protected resource says about itself (RFC 9728).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ProtectedResourceMetadata {
    /// The resource identifier: the MCP server's canonical URL.
    pub resource: String,
    /// The issuers of the authorization servers that issue tokens for it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub authorization_servers: Vec<String>,
    /// The scopes it understands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes_supported: Option<Vec<String>>,
    /// How a token may be sent (`header` only, for MCP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_methods_supported: Option<Vec<String>>,
    /// A name for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_name: Option<String>,
}

impl ProtectedResourceMetadata {
    /// Metadata for `resource`, issued for by `authorization_servers`.
    pub fn new(resource: impl Into<String>, authorization_servers: Vec<String>) -> Self {
        ProtectedResourceMetadata {
            resource: resource.into(),
            authorization_servers,
            scopes_supported: None,
            bearer_methods_supported: Some(vec!["header".to_owned()]),
            resource_name: None,
        }
    }
}

/// What an authorization server says about itself (RFC 8414; OpenID discovery has the same
/// fields). Only the fields MCP uses are kept.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AuthorizationServerMetadata {
    /// The issuer identifier.
    pub issuer: String,
    /// The authorization endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization_endpoint: Option<String>,
    /// The token endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_endpoint: Option<String>,
    /// The dynamic client registration endpoint (RFC 7591).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registration_endpoint: Option<String>,
    /// The JWKS with the keys that sign its tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwks_uri: Option<String>,
    /// The token introspection endpoint (RFC 7662).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub introspection_endpoint: Option<String>,
    /// The token revocation endpoint (RFC 7009), where a client revokes a token it holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revocation_endpoint: Option<String>,
    /// The scopes it knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes_supported: Option<Vec<String>>,
    /// The grant types it supports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_types_supported: Option<Vec<String>>,
    /// The PKCE methods it supports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_challenge_methods_supported: Option<Vec<String>>,
    /// The client authentication methods its token endpoint accepts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    /// The JWS algorithms it accepts for `private_key_jwt`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_endpoint_auth_signing_alg_values_supported: Option<Vec<String>>,
    /// Whether a URL may serve as a client id (Client ID Metadata Documents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id_metadata_document_supported: Option<bool>,
    /// Whether the authorization response carries `iss` (RFC 9207).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization_response_iss_parameter_supported: Option<bool>,
}

impl AuthorizationServerMetadata {
    /// The endpoints a 2025-03-26 client falls back to when the server publishes no metadata:
    /// `/authorize`, `/token` and `/register` at the root of `base`.
    pub(crate) fn fallback(base: &Url) -> AuthorizationServerMetadata {
        let at = |p: &str| {
            let mut u = base.clone();
            u.set_path(p);
            u.set_query(None);
            u.set_fragment(None);
            u.to_string()
        };
        AuthorizationServerMetadata {
            issuer: origin(base),
            authorization_endpoint: Some(at("/authorize")),
            token_endpoint: Some(at("/token")),
            registration_endpoint: Some(at("/register")),
            code_challenge_methods_supported: Some(vec!["S256".to_owned()]),
            ..AuthorizationServerMetadata::default()
        }
    }

    fn supports(list: &Option<Vec<String>>, what: &str) -> bool {
        list.as_ref().is_some_and(|l| l.iter().any(|m| m == what))
    }

    pub(crate) fn supports_auth_method(&self, method: &str) -> bool {
        match &self.token_endpoint_auth_methods_supported {
            Some(l) => l.iter().any(|m| m == method),
            // RFC 8414: when omitted, the default is client_secret_basic.
            None => method == "client_secret_basic",
        }
    }

    pub(crate) fn supports_scope(&self, scope: &str) -> bool {
        Self::supports(&self.scopes_supported, scope)
    }
}

/// `scheme://host[:port]` of a URL.
pub(crate) fn origin(url: &Url) -> String {
    url.origin().ascii_serialization()
}

/// `origin + /.well-known/<name> + path` (RFC 8414 / RFC 9728 insertion), without the path's
/// trailing slash; with `path` empty, the root well-known URL.
fn well_known(url: &Url, name: &str, path: &str) -> Option<Url> {
    let path = path.trim_end_matches('/');
    Url::parse(&format!("{}/.well-known/{name}{path}", origin(url))).ok()
}

/// The candidate protected resource metadata URLs for an MCP server URL when the 401 named
/// none: the path-based one first, then the root (RFC 9728 section 3.1).
pub(crate) fn resource_metadata_urls(server: &Url) -> Vec<Url> {
    let mut out = Vec::new();
    let path = server.path().trim_end_matches('/');
    if !path.is_empty() {
        out.extend(well_known(server, "oauth-protected-resource", path));
    }
    out.extend(well_known(server, "oauth-protected-resource", ""));
    out
}

/// Where an issuer's metadata may be, in the order MCP clients try them: for an issuer with a
/// path, RFC 8414 path insertion, OpenID path insertion, then OpenID path appending; for one
/// without, RFC 8414 then OpenID. The root URL is never tried for an issuer with a path (it is
/// another issuer's).
pub(crate) fn authorization_server_metadata_urls(issuer: &Url) -> Vec<Url> {
    let path = issuer.path().trim_end_matches('/');
    let mut out = Vec::new();
    if path.is_empty() {
        out.extend(well_known(issuer, "oauth-authorization-server", ""));
        out.extend(well_known(issuer, "openid-configuration", ""));
    } else {
        out.extend(well_known(issuer, "oauth-authorization-server", path));
        out.extend(well_known(issuer, "openid-configuration", path));
        out.extend(
            Url::parse(&format!(
                "{}{path}/.well-known/openid-configuration",
                origin(issuer)
            ))
            .ok(),
        );
    }
    out
}

/// The first metadata document found at `urls`, each request bounded by `timeout` end to end;
/// `Ok(None)` when none answers 2xx.
pub(crate) async fn first_found<T: serde::de::DeserializeOwned>(
    http: &reqwest::Client,
    urls: &[Url],
    timeout: std::time::Duration,
) -> Result<Option<(Url, T)>, AuthError> {
    for url in urls {
        if let Some(doc) = get_json::<T>(http, url, &[], timeout)
            .await
            .map_err(AuthError::Discovery)?
        {
            return Ok(Some((url.clone(), doc)));
        }
    }
    Ok(None)
}

/// The canonical form of a server URL used as the `resource` indicator: no fragment, the
/// scheme and host lower case (the URL parser does that), no trailing slash on a path.
pub(crate) fn canonical_resource(url: &Url) -> String {
    let mut u = url.clone();
    u.set_fragment(None);
    let s = u.to_string();
    if u.path() == "/" && u.query().is_none() {
        s.trim_end_matches('/').to_owned()
    } else {
        s
    }
}

/// Whether metadata for `resource` may be used for the server at `server`: same origin, and the
/// server's path lies under the resource's path (a resource of the whole host covers `/mcp`).
pub(crate) fn resource_covers(resource: &str, server: &Url) -> bool {
    let Ok(r) = Url::parse(resource) else {
        return false;
    };
    if r.fragment().is_some() || origin(&r) != origin(server) {
        return false;
    }
    let rp = r.path().trim_end_matches('/');
    let sp = server.path().trim_end_matches('/');
    sp == rp || sp.starts_with(&format!("{rp}/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(v: Vec<Url>) -> Vec<String> {
        v.into_iter().map(|u| u.to_string()).collect()
    }

    #[test]
    fn discovery_orders() {
        let s = Url::parse("http://localhost:3000/mcp").unwrap();
        assert_eq!(
            urls(resource_metadata_urls(&s)),
            [
                "http://localhost:3000/.well-known/oauth-protected-resource/mcp",
                "http://localhost:3000/.well-known/oauth-protected-resource"
            ]
        );
        let root = Url::parse("http://localhost:3000/").unwrap();
        assert_eq!(
            urls(resource_metadata_urls(&root)),
            ["http://localhost:3000/.well-known/oauth-protected-resource"]
        );
        let tenant = Url::parse("https://as.example/tenant1").unwrap();
        assert_eq!(
            urls(authorization_server_metadata_urls(&tenant)),
            [
                "https://as.example/.well-known/oauth-authorization-server/tenant1",
                "https://as.example/.well-known/openid-configuration/tenant1",
                "https://as.example/tenant1/.well-known/openid-configuration"
            ]
        );
        let plain = Url::parse("https://as.example").unwrap();
        assert_eq!(
            urls(authorization_server_metadata_urls(&plain)),
            [
                "https://as.example/.well-known/oauth-authorization-server",
                "https://as.example/.well-known/openid-configuration"
            ]
        );
    }

    #[test]
    fn resources_cover_servers() {
        let s = Url::parse("http://localhost:3000/mcp").unwrap();
        assert!(resource_covers("http://localhost:3000/mcp", &s));
        assert!(resource_covers("http://localhost:3000", &s));
        assert!(resource_covers("http://localhost:3000/", &s));
        assert!(!resource_covers("http://localhost:3000/mc", &s));
        assert!(!resource_covers("http://localhost:3001/mcp", &s));
        assert!(!resource_covers("https://evil.example.com/mcp", &s));
        assert!(!resource_covers("http://localhost:3000/mcp/other", &s));
        assert_eq!(canonical_resource(&s), "http://localhost:3000/mcp");
        assert_eq!(
            canonical_resource(&Url::parse("HTTP://LocalHost:3000/#x").unwrap()),
            "http://localhost:3000"
        );
    }
}
