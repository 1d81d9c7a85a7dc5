//! The Host and Origin policy shared by the Streamable HTTP and WebSocket servers: protection
//! against DNS rebinding (the request's authority must name an allowed host) and cross-site
//! requests from browsers (an `Origin`, when sent, must be allowed).
//!
//! The authority is the request URI's (HTTP/2 carries `:authority` there, and so does an
//! HTTP/1.1 request in absolute form), else the `Host` header; both are parsed as an
//! [`http::uri::Authority`], so case, ports and IPv6 literals are compared as URIs define them.

use std::fmt;

use http::uri::{Authority, Scheme, Uri};
use http::{header, HeaderMap};

/// Which hosts and origins a server accepts.
///
/// The default ([`HostPolicy::loopback`]) accepts the loopback names `localhost`, `127.0.0.1`
/// and `[::1]` on any port, and browser origins (`http` or `https`) whose host is one of them.
/// A server reachable under another name adds it with [`allow_host`](Self::allow_host); a
/// browser application served elsewhere adds its origin with
/// [`allow_origin`](Self::allow_origin). [`HostPolicy::any`] turns both checks off, for servers
/// behind a proxy that does them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPolicy {
    /// Allowed hosts; `None` accepts any authority.
    hosts: Option<Vec<HostEntry>>,
    /// Origins allowed besides those whose host is allowed; `None` accepts any origin.
    origins: Option<Vec<String>>,
}

/// One allowed host: a name (compared ignoring case) and, optionally, the only port allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct HostEntry {
    host: String,
    port: Option<u16>,
}

/// The last `Host` header a server's policy allowed (see
/// [`HostPolicy::check_remembering`]).
#[cfg(feature = "http-server")]
#[derive(Debug, Default)]
pub(crate) struct AllowedHost(std::sync::Mutex<Option<http::HeaderValue>>);

impl HostEntry {
    fn parse(entry: &str) -> Option<HostEntry> {
        let authority: Authority = entry.trim().parse().ok()?;
        if authority.as_str().contains('@') {
            return None;
        }
        // A port that is not a number is an invalid entry, not "any port" (found by the fuzz
        // target `host`: `api.test:8443x` allowed `api.test` on every port).
        let has_port = authority.as_str().len() > authority.host().len();
        if has_port && authority.port_u16().is_none() {
            return None;
        }
        Some(HostEntry {
            host: authority.host().to_ascii_lowercase(),
            port: authority.port_u16(),
        })
    }

    fn matches(&self, authority: &Authority) -> bool {
        self.host.eq_ignore_ascii_case(authority.host())
            && self.port.is_none_or(|p| authority.port_u16() == Some(p))
    }
}

/// Why a request was refused; its `Display` is the reason sent with the 403.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HostRejection {
    /// The authority (`:authority` or `Host`) is missing, malformed or not allowed.
    Host(String),
    /// The `Origin` header is malformed or not allowed.
    Origin(String),
}

impl fmt::Display for HostRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostRejection::Host(h) if h.is_empty() => {
                write!(f, "the request names no host")
            }
            HostRejection::Host(h) => write!(f, "Host {h:?} is not allowed"),
            HostRejection::Origin(o) => write!(f, "Origin {o:?} is not allowed"),
        }
    }
}

impl std::error::Error for HostRejection {}

impl Default for HostPolicy {
    fn default() -> Self {
        HostPolicy::loopback()
    }
}

impl HostPolicy {
    /// Loopback names only (`localhost`, `127.0.0.1`, `[::1]`, any port), and origins whose
    /// host is one of them.
    pub fn loopback() -> Self {
        HostPolicy {
            hosts: Some(
                ["localhost", "127.0.0.1", "[::1]"]
                    .iter()
                    .filter_map(|h| HostEntry::parse(h))
                    .collect(),
            ),
            origins: Some(Vec::new()),
        }
    }

    /// Any host and any origin: no check at all (for servers behind a proxy that checks).
    pub fn any() -> Self {
        HostPolicy {
            hosts: None,
            origins: None,
        }
    }

    /// Allows a host: a name (`mcp.example.com`, `[2001:db8::1]`) on any port, or `name:port`
    /// on that port only. Its browser origins are allowed too. An entry that is not a valid
    /// authority is ignored.
    pub fn allow_host(mut self, host: impl AsRef<str>) -> Self {
        if let (Some(list), Some(entry)) = (&mut self.hosts, HostEntry::parse(host.as_ref())) {
            list.push(entry);
        }
        self
    }

    /// Allows one more browser origin, exactly as the browser sends it
    /// (`https://app.example.com`, `http://localhost:5173`); compared ignoring case.
    pub fn allow_origin(mut self, origin: impl Into<String>) -> Self {
        if let Some(list) = &mut self.origins {
            list.push(origin.into().trim().trim_end_matches('/').to_owned());
        }
        self
    }

    /// Accepts any host (the `Origin` check stays: origins of any host are then allowed).
    pub fn allow_any_host(mut self) -> Self {
        self.hosts = None;
        self
    }

    /// Accepts any origin (the host check stays).
    pub fn allow_any_origin(mut self) -> Self {
        self.origins = None;
        self
    }

    /// Checks a request: its authority (the URI's, else the `Host` header), then its `Origin`
    /// header when it has one. Requests without `Origin` (not from a browser) pass that check.
    pub fn check(&self, uri: &Uri, headers: &HeaderMap) -> Result<(), HostRejection> {
        if let Some(hosts) = &self.hosts {
            let host_header = headers.get(header::HOST).map(|h| h.to_str().unwrap_or("?"));
            let shown = || {
                uri.authority()
                    .map(|a| a.as_str().to_owned())
                    .or_else(|| host_header.map(str::to_owned))
                    .unwrap_or_default()
            };
            let authority = match uri.authority() {
                Some(a) => Some(a.clone()),
                None => host_header.and_then(|h| h.trim().parse::<Authority>().ok()),
            };
            let allowed = authority
                .is_some_and(|a| !a.as_str().contains('@') && hosts.iter().any(|e| e.matches(&a)));
            if !allowed {
                return Err(HostRejection::Host(shown()));
            }
        }
        if let (Some(origins), Some(origin)) = (&self.origins, headers.get(header::ORIGIN)) {
            let origin = String::from_utf8_lossy(origin.as_bytes());
            if !self.origin_allowed(origins, origin.trim()) {
                return Err(HostRejection::Origin(origin.into_owned()));
            }
        }
        Ok(())
    }

    /// [`check`](Self::check), remembering the last `Host` it allowed in `memo`: a request
    /// with that same `Host`, no URI authority and no `Origin` passes without parsing it again
    /// (a keep-alive client sends the same `Host` on every request). Sound because the check
    /// is a pure function of the URI's authority and the `Host` and `Origin` headers, and a
    /// memo belongs to one server whose policy never changes.
    #[cfg(feature = "http-server")]
    pub(crate) fn check_remembering(
        &self,
        memo: &AllowedHost,
        uri: &Uri,
        headers: &HeaderMap,
    ) -> Result<(), HostRejection> {
        let host = match headers.get(header::HOST) {
            Some(h) if uri.authority().is_none() && !headers.contains_key(header::ORIGIN) => h,
            _ => return self.check(uri, headers),
        };
        if memo.0.lock().expect("host memo lock").as_ref() == Some(host) {
            return Ok(());
        }
        self.check(uri, headers)?;
        // A copy: the parsed value shares the connection's read buffer, which the memo must
        // not keep alive.
        if let Ok(copy) = http::HeaderValue::from_bytes(host.as_bytes()) {
            *memo.0.lock().expect("host memo lock") = Some(copy);
        }
        Ok(())
    }

    fn origin_allowed(&self, origins: &[String], origin: &str) -> bool {
        let bare = origin.trim_end_matches('/');
        if origins.iter().any(|o| o.eq_ignore_ascii_case(bare)) {
            return true;
        }
        // Otherwise a well-formed web origin (`http` or `https`, an authority, no path) whose
        // authority passes the host list.
        let Ok(uri) = bare.parse::<Uri>() else {
            return false;
        };
        let web = uri.scheme() == Some(&Scheme::HTTP) || uri.scheme() == Some(&Scheme::HTTPS);
        let no_path = uri
            .path_and_query()
            .is_none_or(|p| matches!(p.as_str(), "" | "/"));
        match (web && no_path, uri.authority()) {
            (true, Some(a)) if !a.as_str().contains('@') => match &self.hosts {
                None => true,
                Some(hosts) => hosts.iter().any(|e| e.matches(a)),
            },
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(host: Option<&str>, origin: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(v) = host {
            h.insert(header::HOST, HeaderValue::from_str(v).unwrap());
        }
        if let Some(v) = origin {
            h.insert(header::ORIGIN, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn an_entry_with_a_port_that_is_no_number_is_ignored() {
        let p = HostPolicy::loopback().allow_host("api.test:8443s1e1");
        assert!(check(&p, Some("api.test:443"), None).is_err());
        assert!(check(&p, Some("api.test"), None).is_err());
        let p = HostPolicy::loopback().allow_host(" api.test:8443 ");
        assert_eq!(check(&p, Some("api.test:8443"), None), Ok(()));
        assert!(check(&p, Some("api.test:443"), None).is_err());
    }

    fn check(p: &HostPolicy, host: Option<&str>, origin: Option<&str>) -> Result<(), String> {
        p.check(&Uri::from_static("/mcp"), &headers(host, origin))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn loopback_hosts_on_any_port() {
        let p = HostPolicy::loopback();
        for ok in [
            "localhost",
            "LOCALHOST:3000",
            "127.0.0.1:8080",
            "[::1]:9",
            "[::1]",
        ] {
            assert_eq!(check(&p, Some(ok), None), Ok(()), "{ok}");
        }
        assert_eq!(
            check(&p, Some("evil.example:8080"), None),
            Err(r#"Host "evil.example:8080" is not allowed"#.into())
        );
        assert_eq!(
            check(&p, None, None),
            Err("the request names no host".into())
        );
        // Userinfo is no part of a host; a name that merely starts like an allowed one is not it.
        assert!(check(&p, Some("evil@localhost"), None).is_err());
        assert!(check(&p, Some("localhost.evil.example"), None).is_err());
        assert!(check(&p, Some("127.0.0.1.nip.io"), None).is_err());
    }

    #[test]
    fn the_uri_authority_wins_over_host() {
        // HTTP/2 has no Host header: `:authority` arrives as the URI's authority.
        let p = HostPolicy::loopback();
        let uri = Uri::from_static("http://localhost:3000/mcp");
        assert_eq!(p.check(&uri, &HeaderMap::new()), Ok(()));
        let evil = Uri::from_static("http://evil.example/mcp");
        assert_eq!(
            p.check(&evil, &headers(Some("localhost"), None)),
            Err(HostRejection::Host("evil.example".into()))
        );
    }

    #[test]
    fn origins_follow_the_hosts_and_the_explicit_list() {
        let p = HostPolicy::loopback();
        assert_eq!(
            check(&p, Some("localhost"), Some("http://localhost:5173")),
            Ok(())
        );
        assert_eq!(check(&p, Some("localhost"), Some("https://[::1]")), Ok(()));
        assert_eq!(
            check(&p, Some("localhost"), Some("http://evil.example")),
            Err(r#"Origin "http://evil.example" is not allowed"#.into())
        );
        assert!(check(&p, Some("localhost"), Some("null")).is_err());
        assert!(check(&p, Some("localhost"), Some("file://localhost")).is_err());
        assert!(check(&p, Some("localhost"), Some("http://localhost/x")).is_err());
        let p = HostPolicy::loopback().allow_origin("https://app.example:8443");
        assert_eq!(
            check(&p, Some("localhost"), Some("https://APP.example:8443")),
            Ok(())
        );
        assert!(check(&p, Some("localhost"), Some("http://app.example:8443")).is_err());
    }

    #[test]
    fn added_hosts_with_and_without_ports() {
        let p = HostPolicy::loopback()
            .allow_host("mcp.example")
            .allow_host("api.example:8443");
        assert_eq!(check(&p, Some("MCP.example:1"), None), Ok(()));
        assert_eq!(check(&p, Some("api.example:8443"), None), Ok(()));
        assert!(check(&p, Some("api.example:8444"), None).is_err());
        assert!(check(&p, Some("api.example"), None).is_err());
        assert_eq!(
            check(&p, Some("mcp.example"), Some("https://mcp.example")),
            Ok(())
        );
    }

    #[test]
    fn any_turns_the_checks_off() {
        let p = HostPolicy::any();
        assert_eq!(check(&p, None, Some("null")), Ok(()));
        assert_eq!(check(&p, Some("evil.example"), None), Ok(()));
        let p = HostPolicy::loopback().allow_any_host();
        assert_eq!(
            check(&p, Some("x.example"), Some("https://x.example")),
            Ok(())
        );
        assert!(check(&p, Some("x.example"), Some("null")).is_err());
    }

    #[cfg(feature = "http-server")]
    #[test]
    fn a_remembered_host_skips_only_what_it_may() {
        let p = HostPolicy::loopback();
        let memo = AllowedHost::default();
        let mcp = Uri::from_static("/mcp");
        let check = |host: Option<&str>, origin: Option<&str>| {
            p.check_remembering(&memo, &mcp, &headers(host, origin))
                .map_err(|e| e.to_string())
        };
        assert_eq!(check(Some("localhost:3000"), None), Ok(()));
        let remembered = |memo: &AllowedHost| {
            let v = memo.0.lock().unwrap();
            v.as_ref().map(|v| v.to_str().unwrap().to_owned())
        };
        assert_eq!(remembered(&memo).as_deref(), Some("localhost:3000"));
        // The same host again passes; another one is checked in full and refused, and the
        // memo keeps the host it allowed.
        assert_eq!(check(Some("localhost:3000"), None), Ok(()));
        assert_eq!(
            check(Some("evil.example"), None),
            Err(r#"Host "evil.example" is not allowed"#.into())
        );
        assert_eq!(remembered(&memo).as_deref(), Some("localhost:3000"));
        // An Origin is always checked, even beside a remembered host.
        assert_eq!(
            check(Some("localhost:3000"), Some("http://evil.example")),
            Err(r#"Origin "http://evil.example" is not allowed"#.into())
        );
        // So is a URI authority, which wins over Host.
        let evil = Uri::from_static("http://evil.example/mcp");
        assert_eq!(
            p.check_remembering(&memo, &evil, &headers(Some("localhost:3000"), None)),
            Err(HostRejection::Host("evil.example".into()))
        );
        // No Host at all is refused, not taken for the remembered one.
        assert_eq!(check(None, None), Err("the request names no host".into()));
    }
}
