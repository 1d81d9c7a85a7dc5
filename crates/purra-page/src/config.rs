//! The page's settings: who signs in and how, and the bounds it keeps.

use std::time::Duration;

use purra_protocol::http::ConnectionLimits;
use purra_protocol::HostPolicy;

use crate::oidc::{self, OidcLogin};
use crate::throttle::SignInLimits;

/// The page's settings.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct PageConfig {
    /// Who may sign in (each gets an access token); `operator` when none is named.
    pub approvers: Vec<String>,
    /// The Host and Origin policy (loopback names by default).
    pub host_policy: HostPolicy,
    /// How long an approval made on the page authorizes dispatch.
    pub approval_ttl: Duration,
    /// How long a session lasts.
    pub session_ttl: Duration,
    /// The most sessions open at once (the oldest is closed to make room).
    pub max_sessions: usize,
    /// The most live-update streams open at once (beyond: 503).
    pub max_streams: usize,
    /// The most pending approvals shown on one page (the newest first; a link leads to the
    /// older ones, after how many there are). At least 1, at most `purra_core::MAX_PAGE`.
    pub pending_page: usize,
    /// The most history entries shown on one page (the newest first; a link leads to the older
    /// ones). At least 1, at most `purra_core::MAX_PAGE`.
    pub history_limit: usize,
    /// Sign-in through an OpenID Connect provider, when configured.
    pub oidc: Option<OidcLogin>,
    /// Whether the printed access tokens sign in (default true; may be turned off only when
    /// [`oidc`](PageConfig::oidc) is configured).
    pub token_login: bool,
    /// The bounds on failed token sign-ins per client address (5 free, then a backoff from 1 s
    /// doubling to 5 min, answered 429 with `Retry-After`).
    pub sign_in: SignInLimits,
    /// The connection limits [`Page::serve`](crate::Page::serve) serves with: by default the MCP endpoint's own
    /// (`ConnectionLimits::default()`: 1024 connections, 10 s to send a request's headers).
    pub connections: ConnectionLimits,
    /// Whether the session cookie is `Secure` and named with the `__Host-` prefix (and the
    /// pre-login cookie `Secure`, `__Secure-`): set it when browsers reach the page over TLS
    /// (behind a proxy that terminates it). Also on, whatever this says, when the OpenID Connect
    /// redirect URI is `https://`: that is the page's address then.
    pub secure_cookie: bool,
    /// Per-user OAuth connections to upstreams (`/connect`), when configured.
    pub oauth: Option<std::sync::Arc<crate::connect::Connections>>,
    /// The ID token claim an OpenID Connect sign-in's approver groups are read from (a list of
    /// strings, or one string), for a workflow's `group:NAME` entries. Default `groups`.
    pub groups_claim: String,
    /// Approver groups by name (a gateway's `[approvers.groups]`): an approver whose name a
    /// group lists belongs to it, however they signed in.
    pub groups: std::collections::BTreeMap<String, Vec<String>>,
}

impl Default for PageConfig {
    fn default() -> Self {
        PageConfig {
            approvers: Vec::new(),
            host_policy: HostPolicy::loopback(),
            approval_ttl: Duration::from_secs(3600),
            session_ttl: Duration::from_secs(12 * 3600),
            max_sessions: 256,
            max_streams: 64,
            pending_page: 50,
            history_limit: 50,
            oidc: None,
            token_login: true,
            sign_in: SignInLimits::default(),
            connections: ConnectionLimits::default(),
            secure_cookie: false,
            oauth: None,
            groups_claim: "groups".into(),
            groups: Default::default(),
        }
    }
}

impl PageConfig {
    /// Adds an approver who may sign in.
    pub fn approver(mut self, name: impl Into<String>) -> Self {
        self.approvers.push(name.into());
        self
    }

    /// Replaces the Host and Origin policy.
    pub fn host_policy(mut self, policy: HostPolicy) -> Self {
        self.host_policy = policy;
        self
    }

    /// How long an approval made on the page authorizes dispatch.
    pub fn approval_ttl(mut self, ttl: Duration) -> Self {
        self.approval_ttl = ttl;
        self
    }

    /// Reads approver groups from the ID token claim `name` (default `groups`).
    pub fn groups_claim(mut self, name: impl Into<String>) -> Self {
        self.groups_claim = name.into();
        self
    }

    /// Approver groups by name (a gateway's `[approvers.groups]`).
    pub fn groups(mut self, groups: std::collections::BTreeMap<String, Vec<String>>) -> Self {
        self.groups = groups;
        self
    }

    /// The configured groups listing `name`.
    pub fn groups_of(&self, name: &str) -> Vec<String> {
        self.groups
            .iter()
            .filter(|(_, members)| members.iter().any(|m| m == name))
            .map(|(g, _)| g.clone())
            .collect()
    }

    /// Signs approvers in through an OpenID Connect provider too.
    pub fn oidc(mut self, login: OidcLogin) -> Self {
        self.oidc = Some(login);
        self
    }

    /// Whether the printed access tokens sign in.
    pub fn token_login(mut self, yes: bool) -> Self {
        self.token_login = yes;
        self
    }

    /// Replaces the bounds on failed token sign-ins.
    pub fn sign_in(mut self, limits: SignInLimits) -> Self {
        self.sign_in = limits;
        self
    }

    /// Replaces the connection limits [`Page::serve`](crate::Page::serve) serves with.
    pub fn connections(mut self, limits: ConnectionLimits) -> Self {
        self.connections = limits;
        self
    }

    /// Serves the connect routes over `connections`.
    pub fn oauth(mut self, connections: std::sync::Arc<crate::connect::Connections>) -> Self {
        self.oauth = Some(connections);
        self
    }

    /// Whether the cookies are `Secure` (and prefixed `__Host-`/`__Secure-`): the page is
    /// reached over TLS.
    pub fn secure_cookie(mut self, yes: bool) -> Self {
        self.secure_cookie = yes;
        self
    }

    /// Whether the cookies are `Secure`: [`secure_cookie`](PageConfig::secure_cookie), or an
    /// `https://` OpenID Connect redirect URI.
    pub fn secure(&self) -> bool {
        self.secure_cookie
            || self
                .oidc
                .as_ref()
                .and_then(|o| o.redirect_uri.as_deref())
                .and_then(|u| u.parse::<http::Uri>().ok())
                .is_some_and(|u| u.scheme_str() == Some("https"))
    }

    /// The mistakes that would leave the page unusable or open: no way to sign in, an empty
    /// allow-list (it would admit no one), a provider whose issuer is not https (plain http only
    /// on a loopback host), a redirect URI that is not an http(s) URL ending in the page's
    /// callback path.
    pub fn check(&self) -> Result<(), String> {
        let Some(o) = &self.oidc else {
            return if self.token_login {
                Ok(())
            } else {
                Err("token sign-in can be turned off only when OpenID Connect sign-in is configured".into())
            };
        };
        if o.allow.is_empty() {
            return Err(
                "OpenID Connect sign-in needs an allow-list: subjects, emails or a required claim"
                    .into(),
            );
        }
        if o.provider.client_id.is_empty() {
            return Err("OpenID Connect sign-in needs a client id".into());
        }
        if let Err(e) = o.provider.check() {
            let why = match e {
                purra_protocol::AuthError::Config(why) => why,
                other => other.to_string(),
            };
            return Err(format!("OpenID Connect sign-in: {why}"));
        }
        if let Some(uri) = &o.redirect_uri {
            let ok = http::Uri::try_from(uri.as_str()).is_ok_and(|u| {
                matches!(u.scheme_str(), Some("http" | "https"))
                    && u.path() == oidc::CALLBACK
                    && u.query().is_none()
            });
            if !ok {
                return Err(format!(
                    "the redirect URI {uri:?} must be an http(s) URL whose path is {}",
                    oidc::CALLBACK
                ));
            }
        }
        Ok(())
    }
}
