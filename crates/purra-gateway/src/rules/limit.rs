//! Per-principal limits: how many tool calls, and how many other requests (opening a
//! session, `ping`, listings), one caller may make a minute.
//!
//! `[gateway] max_calls_per_minute_per_caller` (N, default 600) is a generic cell rate (GCRA,
//! the algorithm of the `governor` crate's `Quota::per_minute`): each principal may make N calls
//! at once and then one every 60/N s, sustained; one call more is refused at once with the time
//! after which the next fits, sending and preparing nothing. The state of a principal is one
//! instant (its theoretical arrival time); a principal whose instant has passed is
//! indistinguishable from a fresh one, so it is forgotten (each sweep of the gateway, and when the
//! table is full). The table holds at most [`MAX_TRACKED_CALLERS`] principals: when it is full of
//! principals that called within the last minute, calls of any further principal share one
//! overflow cell of the same rate, so memory stays bounded whatever the number of identities an
//! authorization server vouches for, and the principals already tracked keep their own quota.
//!
//! governor itself is not used: its keyed state stores grow with every key between two
//! `retain_recent` calls and offer no bound with such an overflow; the algorithm is a few lines,
//! and the clock is a parameter here, so the tests step time instead of sleeping.
//!
//! Every `tools/call` counts against the first limiter: a bound tool's when the gateway's handler
//! runs (refused with a tool result, `rate_limited (nothing was sent ...)`), one naming a tool
//! the gateway does not have before it is answered `Unknown tool` (refused with the JSON-RPC
//! error `rate_limited: this caller's calls exceed ...`), so made-up names are no way around it.
//!
//! The gateway counts a caller's other requests (every one but `tools/call`: `initialize`, which
//! opens a session, `ping`, `tools/list`, ...) in a second limiter of the same kind, at N or
//! [`MIN_REQUESTS_PER_MINUTE`], whichever is more; one over it is answered with a JSON-RPC error
//! (`rate_limited: ...`), and a refused `initialize` opens no session.
//!
//! The count is per gateway process: a fleet of N gateways on one store allows up to N times as
//! many calls (the approvals waiting per principal, `max_pending_per_caller`, are counted in the
//! store, for the whole fleet).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The most principals whose calls are counted each on their own; beyond, they share one cell.
pub const MAX_TRACKED_CALLERS: usize = 10_000;

/// The least rate of a caller's requests other than tool calls (`initialize`, `ping`,
/// listings, ...): they are counted in a limiter of their own at
/// `max_calls_per_minute_per_caller`, or this, whichever is more, so a client's handshake and
/// listings never take its calls' quota and a small quota still lets a client connect.
pub const MIN_REQUESTS_PER_MINUTE: u32 = 60;

/// One minute, the period of the quota.
const PERIOD: Duration = Duration::from_secs(60);

/// Counts calls per principal (see the module's documentation).
#[derive(Debug)]
pub(crate) struct CallLimiter {
    per_minute: u32,
    /// The emission interval: 60 s / N.
    interval: Duration,
    /// How far ahead of now a principal's theoretical arrival time may run: N intervals.
    window: Duration,
    cap: usize,
    cells: Mutex<Cells>,
}

#[derive(Debug, Default)]
struct Cells {
    /// Each tracked principal's theoretical arrival time.
    tat: HashMap<String, Instant>,
    /// The cell principals beyond the cap share.
    overflow: Option<Instant>,
}

impl CallLimiter {
    /// A limiter of `per_minute` calls a minute per principal (at least 1).
    pub(crate) fn new(per_minute: u32) -> CallLimiter {
        CallLimiter::with_cap(per_minute, MAX_TRACKED_CALLERS)
    }

    fn with_cap(per_minute: u32, cap: usize) -> CallLimiter {
        let n = per_minute.max(1);
        let interval = PERIOD / n;
        CallLimiter {
            per_minute: n,
            interval,
            window: interval * n,
            cap,
            cells: Mutex::new(Cells::default()),
        }
    }

    /// The configured rate.
    pub(crate) fn per_minute(&self) -> u32 {
        self.per_minute
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cells> {
        self.cells.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts one call of `principal` at `now`; refused, how long until the next one fits.
    pub(crate) fn check(&self, principal: &str, now: Instant) -> Result<(), Duration> {
        let mut cells = self.lock();
        let limit = now + self.window;
        // A principal already tracked: one look-up, and it keeps its key (no allocation).
        if let Some(t) = cells.tat.get_mut(principal) {
            let next = (*t).max(now) + self.interval;
            if next > limit {
                return Err(next - limit);
            }
            *t = next;
            return Ok(());
        }
        if cells.tat.len() >= self.cap {
            cells.tat.retain(|_, tat| *tat > now);
        }
        // Not tracked: a new principal while there is room, else the shared overflow cell.
        let tracked = cells.tat.len() < self.cap;
        let cell = if tracked { None } else { cells.overflow };
        let next = cell.map_or(now, |t| t.max(now)) + self.interval;
        if next > limit {
            return Err(next - limit);
        }
        if tracked {
            cells.tat.insert(principal.to_owned(), next);
        } else {
            cells.overflow = Some(next);
        }
        Ok(())
    }

    /// Forgets the principals whose quota is whole again at `now`.
    pub(crate) fn prune(&self, now: Instant) {
        let mut cells = self.lock();
        cells.tat.retain(|_, tat| *tat > now);
        if cells.overflow.is_some_and(|t| t <= now) {
            cells.overflow = None;
        }
    }

    /// How many principals are tracked now.
    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.lock().tat.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn a_burst_of_the_quota_then_one_call_per_interval() {
        let l = CallLimiter::new(3);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(l.check("alice", t0), Ok(()));
        }
        // The fourth at once waits one interval (60 s / 3).
        assert_eq!(l.check("alice", t0), Err(20 * S));
        assert_eq!(l.check("alice", t0 + 5 * S), Err(15 * S));
        // Refused calls are not counted: at 20 s one more fits, and then none.
        assert_eq!(l.check("alice", t0 + 20 * S), Ok(()));
        assert_eq!(l.check("alice", t0 + 20 * S), Err(20 * S));
        // After a quiet minute the whole burst is back.
        let later = t0 + 20 * S + 60 * S;
        for _ in 0..3 {
            assert_eq!(l.check("alice", later), Ok(()));
        }
        assert_eq!(l.check("alice", later), Err(20 * S));
    }

    #[test]
    fn each_principal_has_its_own_quota() {
        let l = CallLimiter::new(2);
        let t0 = Instant::now();
        assert_eq!(l.check("alice", t0), Ok(()));
        assert_eq!(l.check("alice", t0), Ok(()));
        assert_eq!(l.check("alice", t0), Err(30 * S));
        assert_eq!(l.check("bob", t0), Ok(()));
        assert_eq!(l.check("bob", t0), Ok(()));
        assert_eq!(l.check("bob", t0), Err(30 * S));
        assert_eq!(l.check("alice", t0 + 30 * S), Ok(()));
    }

    #[test]
    fn whole_quotas_are_forgotten_and_the_table_stays_bounded() {
        let l = CallLimiter::with_cap(2, 3);
        let t0 = Instant::now();
        for who in ["a", "b", "c"] {
            assert_eq!(l.check(who, t0), Ok(()));
        }
        assert_eq!(l.tracked(), 3);
        // Full of principals that called within the minute: the fourth and fifth share one cell.
        assert_eq!(l.check("d", t0), Ok(()));
        assert_eq!(l.check("e", t0), Ok(()));
        assert_eq!(l.check("d", t0), Err(30 * S));
        assert_eq!(l.check("f", t0), Err(30 * S));
        assert_eq!(l.tracked(), 3);
        // The tracked ones keep their own quota.
        assert_eq!(l.check("a", t0), Ok(()));
        assert_eq!(l.check("a", t0), Err(30 * S));
        // Once a principal's quota is whole again it is forgotten, making room.
        l.prune(t0 + 30 * S);
        assert_eq!(l.tracked(), 1); // "a" called twice, so it is still owed 30 s.
        assert_eq!(l.check("d", t0 + 30 * S), Ok(()));
        assert_eq!(l.tracked(), 2);
        l.prune(t0 + 120 * S);
        assert_eq!(l.tracked(), 0);
        // A full table is pruned before a new principal is sent to the shared cell.
        for who in ["a", "b", "c"] {
            assert_eq!(l.check(who, t0 + 120 * S), Ok(()));
        }
        assert_eq!(l.check("z", t0 + 200 * S), Ok(()));
        assert_eq!(l.check("z", t0 + 200 * S), Ok(()));
        assert_eq!(l.check("z", t0 + 200 * S), Err(30 * S));
        assert_eq!(l.tracked(), 1);
    }
}
