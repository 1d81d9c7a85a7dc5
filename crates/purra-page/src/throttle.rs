//! Failed sign-ins per client address, with a backoff: after [`SignInLimits::free_failures`]
//! wrong access tokens from one address, each further one shuts that address out of token
//! sign-in for a while (doubling from [`SignInLimits::first_backoff`] up to
//! [`SignInLimits::max_backoff`]), answered 429 with `Retry-After`; other addresses sign in as
//! before. The table is bounded ([`SignInLimits::max_clients`]): a flood of distinct addresses
//! makes room by forgetting the address whose last failure is oldest, never by growing.
//!
//! The address is the connection's peer (an IPv6 client by its /64, which one host usually
//! holds whole): forwarded headers are not believed, so behind a reverse proxy every client
//! counts as the proxy.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The bounds on failed sign-ins ([`PageConfig::sign_in`](crate::PageConfig::sign_in)).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SignInLimits {
    /// Wrong access tokens one address may send before backoffs begin (default 5).
    pub free_failures: u32,
    /// The first backoff, doubled at each further failure (default 1 s).
    pub first_backoff: Duration,
    /// The longest backoff (default 5 min).
    pub max_backoff: Duration,
    /// How long after its last failure an address's count is forgotten, once no backoff holds
    /// (default 15 min).
    pub forget_after: Duration,
    /// The most addresses remembered at once (default 4096).
    pub max_clients: usize,
}

impl Default for SignInLimits {
    fn default() -> Self {
        SignInLimits {
            free_failures: 5,
            first_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(300),
            forget_after: Duration::from_secs(900),
            max_clients: 4096,
        }
    }
}

/// Who a request counts as: its peer's address, an IPv6 one by its /64 (an IPv4-mapped one as
/// the IPv4 address); the unspecified address when the peer is unknown (the page's router
/// mounted by a server that does not tell it).
pub fn client_of(peer: Option<SocketAddr>) -> IpAddr {
    match peer.map(|p| p.ip()) {
        None => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
        Some(IpAddr::V4(v4)) => IpAddr::V4(v4),
        Some(IpAddr::V6(v6)) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

#[derive(Debug)]
struct Failures {
    count: u32,
    last: Instant,
    /// No sign-in from this address before then.
    until: Option<Instant>,
}

impl Failures {
    fn blocked(&self, now: Instant) -> bool {
        self.until.is_some_and(|u| u > now)
    }
    /// Whether the entry can go: no backoff holds and its last failure is old.
    fn stale(&self, now: Instant, forget_after: Duration) -> bool {
        !self.blocked(now) && now.saturating_duration_since(self.last) >= forget_after
    }
}

/// Failed sign-ins by client address.
#[derive(Debug)]
pub struct Throttle {
    limits: SignInLimits,
    failed: Mutex<HashMap<IpAddr, Failures>>,
}

impl Throttle {
    /// An empty table with `limits`.
    pub fn new(limits: SignInLimits) -> Throttle {
        Throttle {
            limits,
            failed: Mutex::new(HashMap::new()),
        }
    }

    /// `Err(wait)` while `client` is backing off: how long until it may try again.
    pub fn check(&self, client: IpAddr, now: Instant) -> Result<(), Duration> {
        let mut failed = self.failed.lock().expect("throttle lock");
        match failed.get(&client) {
            Some(f) if f.blocked(now) => Err(f.until.map_or(Duration::ZERO, |u| u - now)),
            Some(f) if f.stale(now, self.limits.forget_after) => {
                failed.remove(&client);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Records a wrong access token from `client`; returns the backoff it starts, if any.
    pub fn failed(&self, client: IpAddr, now: Instant) -> Option<Duration> {
        let l = &self.limits;
        let mut failed = self.failed.lock().expect("throttle lock");
        if !failed.contains_key(&client) && failed.len() >= l.max_clients.max(1) {
            failed.retain(|_, f| !f.stale(now, l.forget_after));
            while failed.len() >= l.max_clients.max(1) {
                let oldest = failed.iter().min_by_key(|(_, f)| f.last).map(|(k, _)| *k);
                match oldest {
                    Some(k) => failed.remove(&k),
                    None => break,
                };
            }
        }
        let f = failed.entry(client).or_insert(Failures {
            count: 0,
            last: now,
            until: None,
        });
        if f.stale(now, l.forget_after) {
            f.count = 0;
        }
        f.count = f.count.saturating_add(1);
        f.last = now;
        let beyond = f.count.checked_sub(l.free_failures.saturating_add(1))?;
        let backoff = l
            .first_backoff
            .checked_mul(2u32.saturating_pow(beyond.min(31)))
            .unwrap_or(l.max_backoff)
            .min(l.max_backoff);
        f.until = now.checked_add(backoff);
        Some(backoff)
    }

    /// A sign-in from `client` succeeded: its failures are forgotten.
    pub fn succeeded(&self, client: IpAddr) {
        self.failed.lock().expect("throttle lock").remove(&client);
    }

    /// Addresses remembered now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.failed.lock().expect("throttle lock").len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(last: u8) -> IpAddr {
        IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, last))
    }

    #[test]
    fn backoffs_double_from_the_first_to_the_longest_and_success_forgets() {
        let t = Throttle::new(SignInLimits::default());
        let now = Instant::now();
        for _ in 0..5 {
            assert_eq!(t.check(v4(1), now), Ok(()));
            assert_eq!(t.failed(v4(1), now), None);
        }
        assert_eq!(t.failed(v4(1), now), Some(Duration::from_secs(1)));
        assert_eq!(t.check(v4(1), now), Err(Duration::from_secs(1)));
        assert_eq!(
            t.check(v4(1), now + Duration::from_millis(400)),
            Err(Duration::from_millis(600))
        );
        // Another address is not held back.
        assert_eq!(t.check(v4(2), now), Ok(()));
        let mut at = now + Duration::from_secs(1);
        assert_eq!(t.check(v4(1), at), Ok(()));
        let mut seen = Vec::new();
        for _ in 0..10 {
            let b = t.failed(v4(1), at).unwrap();
            seen.push(b.as_secs());
            at += b;
        }
        assert_eq!(seen, [2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
        t.succeeded(v4(1));
        assert_eq!(t.check(v4(1), at), Ok(()));
        assert_eq!(t.failed(v4(1), at), None);
    }

    #[test]
    fn a_quiet_address_is_forgotten() {
        let t = Throttle::new(SignInLimits::default());
        let now = Instant::now();
        for _ in 0..5 {
            t.failed(v4(1), now);
        }
        let later = now + Duration::from_secs(900);
        assert_eq!(t.check(v4(1), later), Ok(()));
        assert_eq!(t.len(), 0);
        // The count starts again: five more before a backoff.
        for _ in 0..5 {
            assert_eq!(t.failed(v4(1), later), None);
        }
        assert!(t.failed(v4(1), later).is_some());
    }

    #[test]
    fn a_flood_of_addresses_stays_within_the_bound() {
        let t = Throttle::new(SignInLimits {
            max_clients: 4,
            ..SignInLimits::default()
        });
        let now = Instant::now();
        for _ in 0..6 {
            t.failed(v4(1), now);
        }
        for i in 2..200u8 {
            t.failed(v4(i), now + Duration::from_millis(u64::from(i)));
            assert!(t.len() <= 4);
        }
        assert_eq!(t.len(), 4);
        // The oldest was forgotten to make room, the newest are remembered.
        assert_eq!(t.check(v4(1), now), Ok(()));
        assert!(t.failed.lock().unwrap().contains_key(&v4(199)));
    }

    #[test]
    fn ipv6_clients_count_by_their_64_and_mapped_ipv4_as_ipv4() {
        let a: SocketAddr = "[2001:db8:1:2:aaaa::1]:4000".parse().unwrap();
        let b: SocketAddr = "[2001:db8:1:2:bbbb::9]:5000".parse().unwrap();
        let c: SocketAddr = "[2001:db8:1:3::1]:4000".parse().unwrap();
        assert_eq!(client_of(Some(a)), client_of(Some(b)));
        assert_ne!(client_of(Some(a)), client_of(Some(c)));
        assert_eq!(
            client_of(Some("[::ffff:192.0.2.7]:80".parse().unwrap())),
            v4(7)
        );
        assert_eq!(client_of(Some("192.0.2.7:80".parse().unwrap())), v4(7));
        assert_eq!(client_of(None), "0.0.0.0".parse::<IpAddr>().unwrap());
    }
}
