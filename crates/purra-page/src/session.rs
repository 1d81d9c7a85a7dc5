//! Logins and sessions: approvers' access tokens, session cookies and their CSRF tokens.
//!
//! Each approver has a random access token (printed at start); logging in with it opens a session
//! whose id travels only in an `HttpOnly`, `SameSite=Strict` cookie (`Secure` and named with the
//! `__Host-` prefix when the page is reached over TLS) and whose CSRF token every state-changing
//! request must repeat. Sessions live in memory, bounded in number and in age; each carries a
//! token that is cancelled the moment it ends (logout, expiry, making room), so whatever it keeps
//! open (a live-update stream) ends with it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use base64::Engine as _;
use purra_protocol::CancellationToken;

/// The session cookie's name over plain HTTP.
pub const COOKIE: &str = "purra_page_session";
/// The session cookie's name when the page is reached over TLS: the `__Host-` prefix makes the
/// browser keep it only when it is `Secure`, set by this host (no `Domain`) for `Path=/`.
pub const SECURE_COOKIE: &str = "__Host-purra_page_session";

/// 32 random bytes, URL-safe base64 without padding (43 characters).
pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the OS random source");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

pub use purra_protocol::auth::same_secret;

/// Drops the entries of `map` older than `ttl`, then the oldest until fewer than `max` remain
/// (room for one more); `opened` says when an entry was made.
pub fn make_room<V>(
    map: &mut HashMap<String, V>,
    max: usize,
    ttl: Duration,
    opened: impl Fn(&V) -> Instant,
) {
    map.retain(|_, v| opened(v).elapsed() < ttl);
    while map.len() >= max.max(1) {
        let oldest = map
            .iter()
            .min_by_key(|(_, v)| opened(v))
            .map(|(k, _)| k.clone());
        match oldest {
            Some(k) => map.remove(&k),
            None => break,
        };
    }
}

/// One logged-in browser.
#[derive(Clone, Debug)]
pub struct Session {
    /// Who decides through this session (recorded as the approver).
    pub approver: String,
    /// Who decides, as separation of duties compares it with the principal that asked: a token
    /// approver's name, an OpenID Connect sign-in's `ISSUER#SUBJECT`.
    pub identity: String,
    /// The token every state-changing request repeats.
    pub csrf: String,
    /// Cancelled when the session ends: logout, expiry, or closed to make room.
    pub ended: CancellationToken,
    /// When the session expires (`None`: a time-to-live too long to add to now).
    pub expires: Option<Instant>,
    /// When the approver last proved who they are: an OpenID Connect sign-in's `auth_time` (when
    /// its ID token has one), else the moment the session opened. A binding's
    /// `approver_max_age` compares it with the moment of the decision.
    pub signed_in: SystemTime,
    /// The approver groups the approver belongs to (an OpenID Connect sign-in's groups claim,
    /// and the configured groups listing the approver's name), for a workflow's `group:NAME`.
    pub groups: Vec<String>,
    opened: Instant,
}

/// A session as the table holds it: removing it from the table, for whatever reason, cancels its
/// `ended` token.
#[derive(Debug)]
struct Open(Session);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.ended.cancel();
    }
}

/// The open sessions, bounded in number (the oldest is closed to make room) and in age.
#[derive(Debug)]
pub struct Sessions {
    open: Mutex<HashMap<String, Open>>,
    max: usize,
    ttl: Duration,
}

impl Sessions {
    /// At most `max` sessions, each valid for `ttl`.
    pub fn new(max: usize, ttl: Duration) -> Sessions {
        Sessions {
            open: Mutex::new(HashMap::new()),
            max: max.max(1),
            ttl,
        }
    }

    /// Opens a session for `approver` whose identity (what separation of duties compares) is
    /// `identity`, who proved who they are at `signed_in` (a token sign-in's moment, an OpenID
    /// Connect `auth_time`); returns its id.
    #[cfg(test)]
    pub fn open(&self, approver: &str, identity: &str, signed_in: SystemTime) -> String {
        self.open_in(approver, identity, signed_in, Vec::new())
    }

    /// [`Sessions::open`] for an approver who belongs to `groups`.
    pub fn open_in(
        &self,
        approver: &str,
        identity: &str,
        signed_in: SystemTime,
        groups: Vec<String>,
    ) -> String {
        let id = random_token();
        let opened = Instant::now();
        let session = Session {
            approver: approver.to_owned(),
            identity: identity.to_owned(),
            csrf: random_token(),
            ended: CancellationToken::new(),
            expires: opened.checked_add(self.ttl),
            signed_in,
            groups,
            opened,
        };
        let mut open = self.open.lock().expect("sessions lock");
        make_room(&mut open, self.max, self.ttl, |s| s.0.opened);
        open.insert(id.clone(), Open(session));
        id
    }

    /// The live session with id `id`.
    pub fn get(&self, id: &str) -> Option<Session> {
        let mut open = self.open.lock().expect("sessions lock");
        match open.get(id) {
            Some(s) if s.0.opened.elapsed() < self.ttl => Some(s.0.clone()),
            Some(_) => {
                open.remove(id);
                None
            }
            None => None,
        }
    }

    /// Closes the session `id` (its `ended` token is cancelled).
    pub fn close(&self, id: &str) {
        let closed = self.open.lock().expect("sessions lock").remove(id);
        // Dropped, and so ended, outside the lock.
        drop(closed);
    }
}

/// The session id in the `Cookie` headers under the cookie name `name`, if any.
pub fn cookie_session(headers: &http::HeaderMap, name: &str) -> Option<String> {
    cookie(headers, name)
}

/// The value of the cookie `name` in the `Cookie` headers, if any.
pub fn cookie(headers: &http::HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, value)| value.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_bounded_and_expire() {
        let sessions = Sessions::new(2, Duration::from_secs(60));
        let a = sessions.open("ada", "ada", SystemTime::now());
        let b = sessions.open("bob", "bob", SystemTime::now());
        assert_eq!(sessions.get(&a).map(|s| s.approver), Some("ada".into()));
        let c = sessions.open("cy", "cy", SystemTime::now());
        // The oldest made room.
        assert!(sessions.get(&a).is_none());
        assert!(sessions.get(&b).is_some() && sessions.get(&c).is_some());
        sessions.close(&b);
        assert!(sessions.get(&b).is_none());
        let gone = Sessions::new(4, Duration::ZERO);
        let d = gone.open("dee", "dee", SystemTime::now());
        assert!(gone.get(&d).is_none());
    }

    /// Finding 8 of the approver page's security review: whatever a session keeps open must end
    /// with it. Its `ended` token is cancelled at logout, at expiry and when it is closed to make
    /// room, and never for a session that lives on.
    #[test]
    fn finding_8_a_session_ends_its_token_at_logout_expiry_and_eviction() {
        let sessions = Sessions::new(2, Duration::from_secs(60));
        let a = sessions.open("ada", "ada", SystemTime::now());
        let b = sessions.open("bob", "bob", SystemTime::now());
        let (ta, tb) = (
            sessions.get(&a).unwrap().ended,
            sessions.get(&b).unwrap().ended,
        );
        assert!(!ta.is_cancelled() && !tb.is_cancelled());
        sessions.close(&a);
        assert!(ta.is_cancelled(), "logout ends the session's token");
        assert!(!tb.is_cancelled());
        let c = sessions.open("cy", "cy", SystemTime::now());
        let d = sessions.open("dee", "dee", SystemTime::now());
        assert!(tb.is_cancelled(), "closed to make room: ended");
        let tc = sessions.get(&c).unwrap().ended;
        assert!(!tc.is_cancelled() && sessions.get(&d).is_some());
        let short = Sessions::new(4, Duration::ZERO);
        let e = short.open("eve", "eve", SystemTime::now());
        let te = short.open.lock().unwrap()[&e].0.ended.clone();
        assert!(short.get(&e).is_none());
        assert!(te.is_cancelled(), "expired: ended");
        let s = sessions.get(&c).unwrap();
        assert_eq!(s.expires, Some(s.opened + Duration::from_secs(60)));
    }

    #[test]
    fn tokens_are_random_and_compared_exactly() {
        let (a, b) = (random_token(), random_token());
        assert_eq!(a.len(), 43);
        assert_ne!(a, b);
        assert!(same_secret(&a, &a.clone()));
        assert!(!same_secret(&a, &b));
        assert!(!same_secret(&a, &a[..42]));
    }

    #[test]
    fn the_session_cookie_is_found_among_others() {
        let mut h = http::HeaderMap::new();
        h.insert(
            http::header::COOKIE,
            "a=1; purra_page_session=xyz; b=2".parse().unwrap(),
        );
        assert_eq!(cookie_session(&h, COOKIE), Some("xyz".into()));
        assert_eq!(cookie_session(&h, SECURE_COOKIE), None);
        assert_eq!(cookie_session(&http::HeaderMap::new(), COOKIE), None);
    }
}
