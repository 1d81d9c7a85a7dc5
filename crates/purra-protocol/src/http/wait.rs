//! One timer for many short waits: every POST's head wait sleeps on it instead of arming a tokio
//! timer of its own.
//!
//! Why: a POST's SSE response holds its head back until its first message or until
//! [`crate::http::HttpServerConfig::sse_head_wait`] passes, and almost every request is answered
//! long before. A tokio `Sleep` per request is armed when the request is first polled (the
//! handler has not run yet), and arming a timer whose deadline is the runtime's earliest wakes
//! the thread parked in the I/O driver: measured at about 0.9 thread wake-ups (`futex` or an
//! `eventfd` write) per call under load. Here a request whose deadline is no earlier than the
//! one already armed (every request, with one wait for all) touches no timer: it registers with
//! a [`Notify`] and returns to waiting for its answer.
//!
//! How: one task sleeps until the earliest armed deadline, then wakes every waiter; each waiter
//! checks its own deadline and, if it has not passed, arms it again and waits on. A waiter is
//! registered with the [`Notify`] before it looks at the clock and arms, and the armed deadline
//! only ever moves earlier until the task clears it just before it wakes the waiters, so no
//! waiter can sleep past its deadline.

use std::sync::{Arc, Mutex};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// A shared timer for waits until a deadline; dropping it ends its task.
pub(crate) struct WaitTimer {
    inner: Arc<Inner>,
}

struct Inner {
    armed: Mutex<Armed>,
    /// Wakes every waiter when the armed deadline passes; each checks its own.
    tick: Notify,
    /// Wakes the task to sleep until an earlier deadline.
    rearm: Notify,
    /// Cancelled when the [`WaitTimer`] is dropped: the task ends.
    ended: CancellationToken,
}

#[derive(Default)]
struct Armed {
    /// The deadline the task sleeps until; never later than a waiting waiter's.
    at: Option<Instant>,
    /// The task, started lazily by the first wait (a runtime is needed), and again by a wait
    /// that finds it gone with the runtime that ran it (a server kept across runtimes).
    task: Option<tokio::task::JoinHandle<()>>,
}

impl WaitTimer {
    pub(crate) fn new() -> WaitTimer {
        WaitTimer {
            inner: Arc::new(Inner {
                armed: Mutex::new(Armed::default()),
                tick: Notify::new(),
                rearm: Notify::new(),
                ended: CancellationToken::new(),
            }),
        }
    }

    /// Resolves once `at` has passed (within the runtime timer's resolution).
    pub(crate) async fn until(&self, at: Instant) {
        loop {
            let tick = self.inner.tick.notified();
            tokio::pin!(tick);
            // Registered before the clock is read: a tick from now on wakes this waiter.
            tick.as_mut().enable();
            if Instant::now() >= at {
                return;
            }
            self.arm(at);
            tick.await;
        }
    }

    /// Makes the task sleep until `at` at the latest.
    fn arm(&self, at: Instant) {
        let mut armed = self.inner.armed.lock().expect("wait timer lock");
        if armed.task.as_ref().is_none_or(|t| t.is_finished()) {
            // No task, or it went with its runtime, leaving its deadline armed: the waiters
            // that counted on it (theirs are no earlier) are woken by the new task's first tick.
            armed.at = Some(armed.at.map_or(at, |a| a.min(at)));
            armed.task = Some(tokio::spawn(run(self.inner.clone())));
            return;
        }
        if armed.at.is_some_and(|a| a <= at) {
            return;
        }
        armed.at = Some(at);
        self.inner.rearm.notify_one();
    }
}

impl Drop for WaitTimer {
    fn drop(&mut self) {
        self.inner.ended.cancel();
    }
}

/// The timer's task: sleeps until the armed deadline, clears it, and wakes every waiter.
async fn run(inner: Arc<Inner>) {
    loop {
        let at = inner.armed.lock().expect("wait timer lock").at;
        let rearm = inner.rearm.notified();
        match at {
            None => tokio::select! {
                _ = rearm => continue,
                _ = inner.ended.cancelled() => return,
            },
            Some(at) => tokio::select! {
                _ = tokio::time::sleep_until(at) => {}
                _ = rearm => continue,
                _ = inner.ended.cancelled() => return,
            },
        }
        {
            let mut armed = inner.armed.lock().expect("wait timer lock");
            if armed.at.is_some_and(|a| a <= Instant::now()) {
                armed.at = None;
            }
        }
        inner.tick.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A wait that is never woken fails the test (after 10 s of the paused clock) instead of
    /// hanging it.
    async fn bounded<T>(f: impl std::future::Future<Output = T>) -> T {
        tokio::time::timeout(Duration::from_secs(10), f)
            .await
            .expect("a wait was never woken")
    }

    #[tokio::test(start_paused = true)]
    async fn each_wait_ends_at_its_own_deadline_in_any_order() {
        let timer = Arc::new(WaitTimer::new());
        let start = Instant::now();
        let mut waits = tokio::task::JoinSet::new();
        // Later deadlines first: each earlier one must re-arm the task.
        for ms in [300u64, 100, 200, 100, 50] {
            let timer = timer.clone();
            waits.spawn(async move {
                bounded(timer.until(start + Duration::from_millis(ms))).await;
                (ms, Instant::now() - start)
            });
        }
        let mut ended = Vec::new();
        while let Some(r) = waits.join_next().await {
            ended.push(r.unwrap());
        }
        ended.sort();
        for (ms, took) in ended {
            // Ends at its deadline: not before, and not at a later waiter's tick.
            assert!(
                took >= Duration::from_millis(ms),
                "{ms} ms ended at {took:?}"
            );
            assert!(
                took < Duration::from_millis(ms + 5),
                "{ms} ms ended at {took:?}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_armed_after_a_tick_still_ends() {
        let timer = WaitTimer::new();
        let start = Instant::now();
        bounded(timer.until(start + Duration::from_millis(10))).await;
        // The task cleared the armed deadline at the tick; the next wait arms it again.
        bounded(timer.until(start + Duration::from_millis(1010))).await;
        let took = Instant::now() - start;
        assert!(took >= Duration::from_millis(1010) && took < Duration::from_millis(1015));
        // A deadline already passed returns at once.
        timer.until(start).await;
        assert_eq!(Instant::now() - start, took);
    }

    #[tokio::test(start_paused = true)]
    async fn an_abandoned_wait_leaves_the_others_on_time() {
        let timer = Arc::new(WaitTimer::new());
        let start = Instant::now();
        // A wait dropped before its deadline (its request was answered) arms the task, and goes.
        let early = tokio::time::timeout(
            Duration::from_millis(5),
            timer.until(start + Duration::from_millis(20)),
        )
        .await;
        assert!(early.is_err());
        bounded(timer.until(start + Duration::from_millis(40))).await;
        let took = Instant::now() - start;
        assert!(took >= Duration::from_millis(40) && took < Duration::from_millis(45));
    }

    #[test]
    fn a_timer_outlives_the_runtime_that_ran_its_task() {
        let timer = WaitTimer::new();
        let runtime = || {
            tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .unwrap()
        };
        runtime().block_on(timer.until(Instant::now() + Duration::from_millis(1)));
        // That runtime is gone, and its task with it: the next wait starts another.
        runtime().block_on(async {
            bounded(timer.until(Instant::now() + Duration::from_millis(5))).await;
        });
        // A runtime that goes with a deadline armed (its wait abandoned) leaves it behind; a
        // later wait does not count on it.
        let stale = Instant::now() + Duration::from_millis(20);
        runtime().block_on(async {
            let _ = tokio::time::timeout(Duration::from_millis(1), timer.until(stale)).await;
        });
        runtime().block_on(async {
            bounded(timer.until(stale + Duration::from_millis(30))).await;
        });
    }

    #[tokio::test]
    async fn dropping_the_timer_ends_its_task() {
        let timer = WaitTimer::new();
        timer.until(Instant::now() + Duration::from_millis(1)).await;
        let inner = Arc::downgrade(&timer.inner);
        drop(timer);
        for _ in 0..100 {
            if inner.upgrade().is_none() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("the timer's task outlived the timer");
    }
}
