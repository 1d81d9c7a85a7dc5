//! Which URLs the OAuth client follows when a server or a metadata document names them
//! ([`UrlPolicy`]): https only (plain http on a loopback host only by an explicit option, for
//! development), and never an address that is not public unless the option for its kind is on
//! (loopback; private), checked on the addresses a name resolves to. Also the rule every
//! configured issuer follows ([`secure_or_loopback`]).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use reqwest::Url;

use crate::error::AuthError;

/// Which URLs an [`OAuthClient`](super::OAuthClient) follows when a server or a metadata
/// document names them: the challenge's `resource_metadata`, the well-known metadata URLs, the
/// authorization server, its metadata and its endpoints.
///
/// Strict by default: https only, and only hosts whose every address is public. Two options
/// widen it, each for a reason the caller states by turning it on:
/// [`allow_loopback`](Self::allow_loopback) (loopback hosts, over plain http too: development
/// against servers on this machine) and [`allow_private_addresses`](Self::allow_private_addresses)
/// (an authorization server inside a private network). Link-local addresses (169.254.0.0/16,
/// fe80::/10, where cloud metadata services answer) and addresses that are not unicast are
/// never followed.
///
/// The origins the caller chose (the MCP server's, the configured authorization server's) are
/// not checked for their addresses (their scheme is). Addresses are checked after resolution, so a name that
/// resolves to a private address is refused like the address itself; purra's own HTTP client
/// checks them again where it connects (a name that resolves differently the second time gains
/// nothing), a client of the caller's own ([`OAuthConfig::http_client`](super::OAuthConfig::http_client))
/// only by the resolution just before each request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UrlPolicy {
    allow_loopback: bool,
    allow_private_addresses: bool,
}

/// What kind of address an IP address is, when it is not a public one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Loopback,
    Private,
    LinkLocal,
    NotUnicast,
}

impl Kind {
    fn describe(self) -> &'static str {
        match self {
            Kind::Loopback => {
                "a loopback address, followed only with allow_loopback (for development)"
            }
            Kind::Private => "a private address, followed only with allow_private_addresses",
            Kind::LinkLocal => "a link-local address, never followed",
            Kind::NotUnicast => "not a unicast address, never followed",
        }
    }
}

/// The kind of a non-public IPv4 address; `None` for a public one.
fn kind_v4(ip: Ipv4Addr) -> Option<Kind> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        (127, _, _) => Kind::Loopback,
        (10, _, _) | (192, 168, _) => Kind::Private,
        (172, 16..=31, _) => Kind::Private,
        // Shared address space (carrier-grade NAT), IETF protocol assignments, benchmarking.
        (100, 64..=127, _) | (192, 0, 0) | (198, 18..=19, _) => Kind::Private,
        (169, 254, _) => Kind::LinkLocal,
        // "This network" (0.0.0.0 reaches the local host), multicast, reserved and broadcast.
        (0, _, _) | (224..=255, _, _) => Kind::NotUnicast,
        _ => return None,
    })
}

/// The kind of a non-public IPv6 address (the IPv4 address inside an IPv4-mapped, NAT64 or
/// 6to4 one is what counts); `None` for a public one.
fn kind_v6(ip: Ipv6Addr) -> Option<Kind> {
    if ip.is_loopback() {
        return Some(Kind::Loopback);
    }
    if ip.is_unspecified() || ip.is_multicast() {
        return Some(Kind::NotUnicast);
    }
    if let Some(v4) = ip.to_ipv4_mapped() {
        return kind_v4(v4);
    }
    let s = ip.segments();
    let embedded = |hi: u16, lo: u16| Ipv4Addr::from(((hi as u32) << 16) | lo as u32);
    match s[0] {
        // NAT64 (64:ff9b::/96): the IPv4 address in the last 32 bits.
        0x0064 if s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] => kind_v4(embedded(s[6], s[7])),
        // 6to4 (2002::/16): the IPv4 address in bits 16 to 48.
        0x2002 => kind_v4(embedded(s[1], s[2])),
        // Unique local (fc00::/7) and the deprecated site-local (fec0::/10).
        x if x & 0xfe00 == 0xfc00 || x & 0xffc0 == 0xfec0 => Some(Kind::Private),
        // Link-local (fe80::/10).
        x if x & 0xffc0 == 0xfe80 => Some(Kind::LinkLocal),
        _ => None,
    }
}

fn kind(ip: IpAddr) -> Option<Kind> {
    match ip {
        IpAddr::V4(v4) => kind_v4(v4),
        IpAddr::V6(v6) => kind_v6(v6),
    }
}

/// A URL's host: an address, or a name to resolve.
enum Host<'a> {
    Address(IpAddr),
    Name(&'a str),
}

fn host(url: &Url) -> Option<Host<'_>> {
    let h = url.host_str()?;
    let bare = h
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(h);
    Some(match bare.parse::<IpAddr>() {
        Ok(ip) => Host::Address(ip),
        Err(_) => Host::Name(h),
    })
}

/// Whether `url`'s host is a loopback host: `localhost`, 127.0.0.0/8 or `[::1]`.
pub(crate) fn is_loopback_host(url: &Url) -> bool {
    match host(url) {
        Some(Host::Name(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(Host::Address(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// Whether `url` may name an authorization server, an OpenID Connect issuer or one of their
/// endpoints: https, or plain http on a loopback host (`localhost`, 127.0.0.0/8, `[::1]`), where
/// development servers run and nothing on the network can read or change the traffic.
pub fn secure_or_loopback(url: &Url) -> bool {
    url.host().is_some()
        && match url.scheme() {
            "https" => true,
            "http" => is_loopback_host(url),
            _ => false,
        }
}

/// The words every configuration refusal of a plain-http issuer or endpoint ends with.
pub(crate) const HTTPS_ONLY: &str =
    "must be https (plain http only on a loopback host: localhost, 127.0.0.1, [::1])";

fn refused(url: &Url, reason: impl Into<String>) -> AuthError {
    AuthError::UrlRefused {
        url: url.to_string(),
        reason: reason.into(),
    }
}

impl UrlPolicy {
    /// The default: https only, public addresses only.
    pub fn strict() -> Self {
        UrlPolicy::default()
    }

    /// Follows loopback hosts (`localhost`, 127.0.0.0/8, `[::1]`), over plain http too: for
    /// development against an authorization server on this machine. Off by default: a server
    /// must not be able to send the client to this machine's own services.
    pub fn allow_loopback(mut self, yes: bool) -> Self {
        self.allow_loopback = yes;
        self
    }

    /// Follows private addresses (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, 100.64.0.0/10,
    /// fc00::/7 and the like): for an authorization server inside a private network. Off by
    /// default: a server must not be able to send the client into the network it runs in.
    pub fn allow_private_addresses(mut self, yes: bool) -> Self {
        self.allow_private_addresses = yes;
        self
    }

    /// Whether loopback hosts are followed.
    pub fn allows_loopback(&self) -> bool {
        self.allow_loopback
    }

    /// Whether private addresses are followed.
    pub fn allows_private_addresses(&self) -> bool {
        self.allow_private_addresses
    }

    /// Why `ip` may not be followed, if it may not.
    fn address_refusal(&self, ip: IpAddr) -> Option<Kind> {
        match kind(ip)? {
            Kind::Loopback if self.allow_loopback => None,
            Kind::Private if self.allow_private_addresses => None,
            k => Some(k),
        }
    }

    /// The checks that need no resolution: the scheme, and the address when the host is one.
    /// A `trusted` URL (on an origin the caller chose: the MCP server's, the configured
    /// authorization server's) is not checked for its address, only for its scheme.
    pub(crate) fn check_url(&self, url: &Url, trusted: bool) -> Result<(), AuthError> {
        match url.scheme() {
            "https" => {}
            "http" if is_loopback_host(url) => {
                if !self.allow_loopback {
                    return Err(refused(
                        url,
                        "plain http on a loopback host, followed only with allow_loopback (for development)",
                    ));
                }
            }
            "http" => return Err(refused(url, "not https")),
            _ => return Err(refused(url, "not an https URL")),
        }
        if trusted {
            return Ok(());
        }
        let ip = match host(url) {
            Some(Host::Address(ip)) => ip,
            // A name is checked by what it resolves to (`check`), `localhost` included.
            Some(Host::Name(_)) => return Ok(()),
            None => return Err(refused(url, "no host")),
        };
        match self.address_refusal(ip) {
            Some(k) => Err(refused(url, format!("{ip} is {}", k.describe()))),
            None => Ok(()),
        }
    }

    /// Every check: [`check_url`](Self::check_url), then (unless `trusted`) each address the
    /// host's name resolves to (and, for plain http, that each is a loopback address).
    pub(crate) async fn check(&self, url: &Url, trusted: bool) -> Result<(), AuthError> {
        self.check_url(url, trusted)?;
        let Some(Host::Name(name)) = host(url) else {
            return Ok(());
        };
        if trusted {
            return Ok(());
        }
        let port = url.port_or_known_default().unwrap_or(443);
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host((name, port))
            .await
            .map_err(|e| refused(url, format!("{name} cannot be resolved: {e}")))?
            .collect();
        self.check_resolved(url, name, addrs.iter().map(SocketAddr::ip))
    }

    /// The address checks of `name`'s addresses, for `url`.
    fn check_resolved(
        &self,
        url: &Url,
        name: &str,
        addrs: impl IntoIterator<Item = IpAddr>,
    ) -> Result<(), AuthError> {
        let mut any = false;
        for ip in addrs {
            any = true;
            if let Some(k) = self.address_refusal(ip) {
                return Err(refused(
                    url,
                    format!("{name} resolves to {ip}, {}", k.describe()),
                ));
            }
            if url.scheme() == "http" && kind(ip) != Some(Kind::Loopback) {
                return Err(refused(
                    url,
                    format!(
                        "{name} resolves to {ip}, not a loopback address, and the URL is not https"
                    ),
                ));
            }
        }
        if !any {
            return Err(refused(url, format!("{name} resolves to no address")));
        }
        Ok(())
    }

    /// A resolver for purra's own discovery client: resolves like the system, and refuses a
    /// name any of whose addresses this policy refuses (the `trusted` hosts excepted: the MCP
    /// server's and the configured authorization server's).
    pub(crate) fn resolver(self, trusted: Vec<String>) -> Arc<PolicyResolver> {
        Arc::new(PolicyResolver {
            policy: self,
            trusted,
        })
    }
}

/// The DNS resolver of the OAuth client's discovery requests: the addresses are checked where
/// the connection is made, so a name cannot resolve to a public address for the check and to a
/// private one for the connection.
#[derive(Debug)]
pub(crate) struct PolicyResolver {
    policy: UrlPolicy,
    trusted: Vec<String>,
}

/// A name the resolver refused.
#[derive(Debug)]
pub(crate) struct AddressRefused(String);

impl std::fmt::Display for AddressRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for AddressRefused {}

impl reqwest::dns::Resolve for PolicyResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.policy;
        let trusted = self
            .trusted
            .iter()
            .any(|h| h.eq_ignore_ascii_case(name.as_str()));
        let name = name.as_str().to_owned();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((name.as_str(), 0)).await?.collect();
            if !trusted {
                for a in &addrs {
                    if let Some(k) = policy.address_refusal(a.ip()) {
                        let why = format!("{name} resolves to {}, {}", a.ip(), k.describe());
                        return Err(Box::new(AddressRefused(why)) as _);
                    }
                }
            }
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::dns::Resolve as _;

    fn url(u: &str) -> Url {
        Url::parse(u).unwrap()
    }

    fn why(r: Result<(), AuthError>) -> String {
        r.unwrap_err().to_string()
    }

    #[test]
    fn address_kinds() {
        let k = |s: &str| kind(s.parse().unwrap());
        for (ip, want) in [
            ("127.0.0.1", Some(Kind::Loopback)),
            ("127.255.0.9", Some(Kind::Loopback)),
            ("::1", Some(Kind::Loopback)),
            ("::ffff:127.0.0.1", Some(Kind::Loopback)),
            ("10.1.2.3", Some(Kind::Private)),
            ("172.16.0.1", Some(Kind::Private)),
            ("172.31.255.255", Some(Kind::Private)),
            ("192.168.1.1", Some(Kind::Private)),
            ("100.64.0.1", Some(Kind::Private)),
            ("fc00::1", Some(Kind::Private)),
            ("fd12:3456::1", Some(Kind::Private)),
            ("::ffff:10.0.0.1", Some(Kind::Private)),
            ("64:ff9b::a00:1", Some(Kind::Private)),
            ("2002:a00:1::1", Some(Kind::Private)),
            ("169.254.169.254", Some(Kind::LinkLocal)),
            ("fe80::1", Some(Kind::LinkLocal)),
            ("0.0.0.0", Some(Kind::NotUnicast)),
            ("::", Some(Kind::NotUnicast)),
            ("224.0.0.1", Some(Kind::NotUnicast)),
            ("255.255.255.255", Some(Kind::NotUnicast)),
            ("ff02::1", Some(Kind::NotUnicast)),
            ("172.32.0.1", None),
            ("100.128.0.1", None),
            ("8.8.8.8", None),
            ("2606:4700::1111", None),
            ("64:ff9b::808:808", None),
        ] {
            assert_eq!(k(ip), want, "{ip}");
        }
    }

    #[test]
    fn schemes_and_literal_addresses() {
        let strict = UrlPolicy::strict();
        assert_eq!(
            strict.check_url(&url("https://as.example/x"), false),
            Ok(())
        );
        assert_eq!(
            why(strict.check_url(&url("http://as.example/x"), false)),
            "refusing http://as.example/x: not https"
        );
        assert_eq!(
            why(strict.check_url(&url("ftp://as.example/x"), false)),
            "refusing ftp://as.example/x: not an https URL"
        );
        assert_eq!(
            why(strict.check_url(&url("http://127.0.0.1:9/m"), false)),
            "refusing http://127.0.0.1:9/m: plain http on a loopback host, followed only with allow_loopback (for development)"
        );
        assert_eq!(
            why(strict.check_url(&url("https://127.0.0.1:9/m"), false)),
            "refusing https://127.0.0.1:9/m: 127.0.0.1 is a loopback address, followed only with allow_loopback (for development)"
        );
        // A name waits for its resolution.
        assert_eq!(strict.check_url(&url("https://localhost/m"), false), Ok(()));
        assert_eq!(
            why(strict.check_url(&url("https://10.0.0.5/m"), false)),
            "refusing https://10.0.0.5/m: 10.0.0.5 is a private address, followed only with allow_private_addresses"
        );
        assert_eq!(
            why(strict.check_url(&url("https://[fe80::1]/m"), false)),
            "refusing https://[fe80::1]/m: fe80::1 is a link-local address, never followed"
        );
        // A trusted origin: its address is not checked, its scheme is.
        assert_eq!(strict.check_url(&url("https://10.0.0.5/m"), true), Ok(()));
        assert_eq!(
            why(strict.check_url(&url("http://10.0.0.5/m"), true)),
            "refusing http://10.0.0.5/m: not https"
        );

        let open = UrlPolicy::strict()
            .allow_loopback(true)
            .allow_private_addresses(true);
        assert_eq!(open.check_url(&url("http://127.0.0.1:9/m"), false), Ok(()));
        assert_eq!(open.check_url(&url("http://[::1]:9/m"), false), Ok(()));
        assert_eq!(open.check_url(&url("https://192.168.0.2/m"), false), Ok(()));
        assert_eq!(
            why(open.check_url(&url("http://192.168.0.2/m"), false)),
            "refusing http://192.168.0.2/m: not https"
        );
        // Link-local and non-unicast addresses whatever the options.
        assert_eq!(
            why(open.check_url(&url("https://169.254.169.254/latest"), false)),
            "refusing https://169.254.169.254/latest: 169.254.169.254 is a link-local address, never followed"
        );
        assert_eq!(
            why(open.check_url(&url("https://0.0.0.0/m"), false)),
            "refusing https://0.0.0.0/m: 0.0.0.0 is not a unicast address, never followed"
        );
    }

    #[test]
    fn resolved_addresses() {
        let strict = UrlPolicy::strict();
        let u = url("https://idp.example/m");
        let ips = |s: &[&str]| {
            s.iter()
                .map(|a| a.parse().unwrap())
                .collect::<Vec<IpAddr>>()
        };
        assert_eq!(
            strict.check_resolved(&u, "idp.example", ips(&["93.184.216.34"])),
            Ok(())
        );
        // One refused address among public ones refuses the name.
        assert_eq!(
            why(strict.check_resolved(&u, "idp.example", ips(&["93.184.216.34", "10.0.0.7"]))),
            "refusing https://idp.example/m: idp.example resolves to 10.0.0.7, a private address, followed only with allow_private_addresses"
        );
        assert_eq!(
            why(strict.check_resolved(&u, "idp.example", ips(&["fe80::1"]))),
            "refusing https://idp.example/m: idp.example resolves to fe80::1, a link-local address, never followed"
        );
        assert_eq!(
            why(strict.check_resolved(&u, "idp.example", ips(&[]))),
            "refusing https://idp.example/m: idp.example resolves to no address"
        );
        let private = UrlPolicy::strict().allow_private_addresses(true);
        assert_eq!(
            private.check_resolved(&u, "idp.example", ips(&["10.0.0.7"])),
            Ok(())
        );
        // Plain http only to loopback addresses, whatever the name says.
        let loopback = UrlPolicy::strict().allow_loopback(true);
        let h = url("http://localhost:9/m");
        assert_eq!(
            loopback.check_resolved(&h, "localhost", ips(&["127.0.0.1", "::1"])),
            Ok(())
        );
        let open = loopback.allow_private_addresses(true);
        assert_eq!(
            why(open.check_resolved(&h, "localhost", ips(&["10.0.0.7"]))),
            "refusing http://localhost:9/m: localhost resolves to 10.0.0.7, not a loopback address, and the URL is not https"
        );
    }

    #[tokio::test]
    async fn the_resolver_refuses_where_it_connects() {
        let name = |s: &str| s.parse::<reqwest::dns::Name>().unwrap();
        let strict = UrlPolicy::strict().resolver(Vec::new());
        let e = match strict.resolve(name("localhost")).await {
            Err(e) => e.to_string(),
            Ok(_) => panic!("localhost resolved under the strict policy"),
        };
        assert!(
            e.starts_with("localhost resolves to ")
                && e.ends_with(
                    ", a loopback address, followed only with allow_loopback (for development)"
                ),
            "{e}"
        );
        // A trusted host, and loopback when allowed, resolve.
        let own = UrlPolicy::strict().resolver(vec!["localhost".into()]);
        assert!(own.resolve(name("localhost")).await.is_ok());
        let loopback = UrlPolicy::strict()
            .allow_loopback(true)
            .resolver(Vec::new());
        let addrs: Vec<SocketAddr> = match loopback.resolve(name("localhost")).await {
            Ok(a) => a.collect(),
            Err(e) => panic!("{e}"),
        };
        assert!(addrs.iter().all(|a| a.ip().is_loopback()), "{addrs:?}");
    }

    #[test]
    fn configured_issuers() {
        for (u, ok) in [
            ("https://as.example", true),
            ("http://127.0.0.1:8080", true),
            ("http://localhost:8080/realms/x", true),
            ("http://[::1]:8080", true),
            ("http://as.example", false),
            ("http://10.0.0.5", false),
            ("ftp://as.example", false),
        ] {
            assert_eq!(secure_or_loopback(&url(u)), ok, "{u}");
        }
    }
}
