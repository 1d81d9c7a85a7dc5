//! Sign-in through an OpenID Connect provider: the configuration ([`OidcLogin`], [`AllowList`]),
//! the sign-ins under way (single-use `state`, short-lived, bound to the browser that started
//! them by a pre-login cookie, bounded per client address), and who may approve.
//!
//! The protocol work (discovery, PKCE, the code exchange, the ID token's checks) is the protocol
//! crate's [`OidcProvider`]; this module decides what a sign-in is worth on the page.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use purra_protocol::auth::{OidcConfig, OidcIdentity, PendingLogin};
use serde_json::Value;

use crate::session::{random_token, same_secret};

/// The pre-login cookie's name: set when a sign-in starts, required at its callback.
pub const LOGIN_COOKIE: &str = "purra_page_login";
/// The pre-login cookie's name when the page is reached over TLS (`Secure`; the `__Secure-`
/// prefix, since its `Path=/login` rules out `__Host-`).
pub const SECURE_LOGIN_COOKIE: &str = "__Secure-purra_page_login";
/// The callback's path on the page.
pub const CALLBACK: &str = "/login/callback";
/// How long a sign-in may take between leaving for the provider and coming back.
pub const LOGIN_TTL: Duration = Duration::from_secs(600);
/// The most sign-ins under way at once. At the bound, the oldest sign-in of the client address
/// holding the most makes room, so a flood from a few addresses drops only their own.
pub const MAX_PENDING: usize = 1024;
/// The most sign-ins under way from one client address (its oldest makes room for a new one).
pub const MAX_PENDING_PER_CLIENT: usize = 8;

/// Who may approve after signing in with the provider: anyone whose subject or verified email
/// is listed, and who has the required claim value when one is set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AllowList {
    /// Subjects (`sub`) allowed.
    pub subjects: Vec<String>,
    /// Emails allowed (compared without regard to case; only when the ID token says
    /// `email_verified: true`: some providers let users set an email they do not own).
    pub emails: Vec<String>,
    /// A claim every approver must carry: (name, value); a list claim must contain the value.
    pub claim: Option<(String, String)>,
}

impl AllowList {
    /// Whether nothing is listed (such a list admits no one; the page refuses to start with it).
    pub fn is_empty(&self) -> bool {
        self.subjects.is_empty() && self.emails.is_empty() && self.claim.is_none()
    }

    /// Allows the subject `sub`.
    pub fn subject(mut self, sub: impl Into<String>) -> Self {
        self.subjects.push(sub.into());
        self
    }

    /// Allows the email `email`.
    pub fn email(mut self, email: impl Into<String>) -> Self {
        self.emails.push(email.into());
        self
    }

    /// Requires the claim `name` to be (or contain) `value`.
    pub fn require_claim(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.claim = Some((name.into(), value.into()));
        self
    }

    /// Whether `who` may approve.
    pub fn admits(&self, who: &OidcIdentity) -> bool {
        if self.is_empty() {
            return false;
        }
        let listed = self.subjects.is_empty() && self.emails.is_empty()
            || self.subjects.contains(&who.subject)
            || (who.email_verified == Some(true)
                && who
                    .email
                    .as_deref()
                    .is_some_and(|e| self.emails.iter().any(|a| a.eq_ignore_ascii_case(e))));
        let claimed = match &self.claim {
            None => true,
            Some((name, value)) => match who.claims.get(name) {
                Some(Value::String(s)) => s == value,
                Some(Value::Array(a)) => a.iter().any(|v| v.as_str() == Some(value)),
                _ => false,
            },
        };
        listed && claimed
    }
}

/// Sign-in through an OpenID Connect provider.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct OidcLogin {
    /// The provider and this page's client there.
    pub provider: OidcConfig,
    /// The provider's name on the sign-in button ("Sign in with …").
    pub label: String,
    /// The callback URL registered with the provider; by default `http://ADDR/login/callback`
    /// on the page's bound address.
    pub redirect_uri: Option<String>,
    /// Who may approve.
    pub allow: AllowList,
}

impl OidcLogin {
    /// Sign-in with `provider`, admitting whoever `allow` lists.
    pub fn new(provider: OidcConfig, allow: AllowList) -> Self {
        OidcLogin {
            provider,
            label: "OpenID Connect".to_owned(),
            redirect_uri: None,
            allow,
        }
    }

    /// The name on the sign-in button.
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = label.into();
        self
    }

    /// The callback URL registered with the provider.
    pub fn redirect_uri(mut self, uri: impl Into<String>) -> Self {
        self.redirect_uri = Some(uri.into());
        self
    }
}

/// How an approver who signed in with the provider is named in decisions and audit entries:
/// their name and email when the token has them, then the subject at the issuer.
pub fn approver_name(who: &OidcIdentity) -> String {
    let display = match (&who.name, &who.email) {
        (Some(n), Some(e)) => format!("{n} <{e}>, "),
        (Some(n), None) => format!("{n}, "),
        (None, Some(e)) => format!("{e}, "),
        (None, None) => String::new(),
    };
    let text = format!("{display}sub {} at {}", who.subject, who.issuer);
    // The provider's text goes into the audit log: one line, no control characters.
    text.chars().filter(|c| !c.is_control()).collect()
}

struct Started {
    login: PendingLogin,
    /// Where the browser goes once signed in (an approval's page, checked by the caller).
    next: Option<String>,
    browser: String,
    client: IpAddr,
    at: Instant,
}

/// Why a callback's `state` was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum StateRefusal {
    /// No sign-in under way has it (never issued, already used, or expired).
    Unknown,
    /// The browser did not bring the pre-login cookie of the sign-in it claims (the sign-in
    /// stays under way for the browser that does).
    OtherBrowser,
}

/// The sign-ins under way, by `state`.
#[derive(Default)]
pub struct Pending {
    open: Mutex<HashMap<String, Started>>,
}

impl Pending {
    /// Records `login`, started by a browser at `client` (its address, as the page counts
    /// clients), bound to a new browser secret (the pre-login cookie's value), returned. Room is
    /// made from `client`'s own sign-ins first: at [`MAX_PENDING_PER_CLIENT`] its oldest goes;
    /// at [`MAX_PENDING`] in all, the oldest of the address holding the most.
    /// `next` is where the browser goes once signed in (returned by [`Pending::take`]).
    pub fn start(&self, login: PendingLogin, client: IpAddr, next: Option<String>) -> String {
        let browser = random_token();
        let mut open = self.open.lock().expect("pending lock");
        open.retain(|_, s| s.at.elapsed() < LOGIN_TTL);
        let mut per_client: HashMap<IpAddr, usize> = HashMap::new();
        for s in open.values() {
            *per_client.entry(s.client).or_default() += 1;
        }
        let from = if per_client.get(&client).copied().unwrap_or(0) >= MAX_PENDING_PER_CLIENT {
            Some(client)
        } else if open.len() >= MAX_PENDING {
            per_client.iter().max_by_key(|(_, n)| **n).map(|(c, _)| *c)
        } else {
            None
        };
        if let Some(from) = from {
            let oldest = open
                .iter()
                .filter(|(_, s)| s.client == from)
                .min_by_key(|(_, s)| s.at)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                open.remove(&k);
            }
        }
        open.insert(
            login.state.clone(),
            Started {
                login,
                next,
                browser: browser.clone(),
                client,
                at: Instant::now(),
            },
        );
        browser
    }

    /// Takes the sign-in of `state` (once: a second callback with it is refused), if it is live
    /// and `browser` (the pre-login cookie) is the one that started it. The browser is checked
    /// before anything is taken: a callback from another browser leaves the sign-in to the one
    /// that started it.
    /// With it comes where its browser goes once signed in.
    pub fn take(
        &self,
        state: &str,
        browser: Option<&str>,
    ) -> Result<(PendingLogin, Option<String>), StateRefusal> {
        let mut open = self.open.lock().expect("pending lock");
        let Some(started) = open.get(state) else {
            return Err(StateRefusal::Unknown);
        };
        if started.at.elapsed() >= LOGIN_TTL {
            open.remove(state);
            return Err(StateRefusal::Unknown);
        }
        if !browser.is_some_and(|b| same_secret(b, &started.browser)) {
            return Err(StateRefusal::OtherBrowser);
        }
        open.remove(state)
            .map(|s| (s.login, s.next))
            .ok_or(StateRefusal::Unknown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn who(sub: &str, email: Option<&str>, verified: Option<bool>, claims: Value) -> OidcIdentity {
        let mut claims = claims.as_object().cloned().unwrap_or_default();
        claims.insert("sub".into(), json!(sub));
        if let Some(e) = email {
            claims.insert("email".into(), json!(e));
        }
        if let Some(v) = verified {
            claims.insert("email_verified".into(), json!(v));
        }
        OidcIdentity::from_claims("https://id.example", claims).unwrap()
    }

    #[test]
    fn the_allow_list_admits_subjects_verified_emails_and_claim_holders() {
        let list = AllowList::default()
            .subject("alice")
            .email("Bob@Example.com");
        assert!(list.admits(&who("alice", None, None, json!({}))));
        assert!(list.admits(&who("b", Some("bob@example.com"), Some(true), json!({}))));
        assert!(!list.admits(&who("b", Some("bob@example.com"), None, json!({}))));
        assert!(!list.admits(&who("b", Some("bob@example.com"), Some(false), json!({}))));
        assert!(!list.admits(&who("eve", Some("eve@example.com"), Some(true), json!({}))));
        let grouped = list.clone().require_claim("groups", "approvers");
        assert!(!grouped.admits(&who("alice", None, None, json!({}))));
        assert!(grouped.admits(&who(
            "alice",
            None,
            None,
            json!({"groups": ["x", "approvers"]})
        )));
        let only_claim = AllowList::default().require_claim("role", "approver");
        assert!(only_claim.admits(&who("anyone", None, None, json!({"role": "approver"}))));
        assert!(!only_claim.admits(&who("anyone", None, None, json!({"role": "viewer"}))));
        assert!(!AllowList::default().admits(&who("alice", None, None, json!({}))));
    }
}
