//! Logins and sessions: approvers' access tokens, session cookies and their CSRF tokens.
//!
//! Each approver has a random access token (printed at start); logging in with it opens a session
//! whose id travels only in an `HttpOnly`, `SameSite=Strict` cookie and whose CSRF token every
//! state-changing request must repeat. Sessions live in memory, bounded in number and in age.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine as _;

/// The session cookie's name.
pub const COOKIE: &str = "purra_page_session";

/// 32 random bytes, URL-safe base64 without padding (43 characters).
pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the OS random source");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// Compares two secrets in time independent of where they differ.
pub fn same_secret(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

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
    opened: Instant,
}

/// The open sessions, bounded in number (the oldest is closed to make room) and in age.
#[derive(Debug)]
pub struct Sessions {
    open: Mutex<HashMap<String, Session>>,
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
    /// `identity`; returns its id.
    pub fn open(&self, approver: &str, identity: &str) -> String {
        let id = random_token();
        let session = Session {
            approver: approver.to_owned(),
            identity: identity.to_owned(),
            csrf: random_token(),
            opened: Instant::now(),
        };
        let mut open = self.open.lock().expect("sessions lock");
        make_room(&mut open, self.max, self.ttl, |s| s.opened);
        open.insert(id.clone(), session);
        id
    }

    /// The live session with id `id`.
    pub fn get(&self, id: &str) -> Option<Session> {
        let mut open = self.open.lock().expect("sessions lock");
        match open.get(id) {
            Some(s) if s.opened.elapsed() < self.ttl => Some(s.clone()),
            Some(_) => {
                open.remove(id);
                None
            }
            None => None,
        }
    }

    /// Closes the session `id`.
    pub fn close(&self, id: &str) {
        self.open.lock().expect("sessions lock").remove(id);
    }
}

/// The session id in a `Cookie` header, if any.
pub fn cookie_session(headers: &http::HeaderMap) -> Option<String> {
    cookie(headers, COOKIE)
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
        let a = sessions.open("ada", "ada");
        let b = sessions.open("bob", "bob");
        assert_eq!(sessions.get(&a).map(|s| s.approver), Some("ada".into()));
        let c = sessions.open("cy", "cy");
        // The oldest made room.
        assert!(sessions.get(&a).is_none());
        assert!(sessions.get(&b).is_some() && sessions.get(&c).is_some());
        sessions.close(&b);
        assert!(sessions.get(&b).is_none());
        let gone = Sessions::new(4, Duration::ZERO);
        let d = gone.open("dee", "dee");
        assert!(gone.get(&d).is_none());
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
        assert_eq!(cookie_session(&h), Some("xyz".into()));
        assert_eq!(cookie_session(&http::HeaderMap::new()), None);
    }
}
