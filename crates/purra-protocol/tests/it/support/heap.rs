//! The heap this test process has live, counted exactly by its global allocator, and its peak
//! since a test took its baseline. A test that asserts on it runs alone in a child process of the
//! test binary ([`super::alone`]), so that what it counts is its own.
#![allow(unsafe_code)] // the counting allocator forwards to the system allocator

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

/// A mebibyte, the unit of the heap bounds.
pub const MIB: usize = 1024 * 1024;

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

fn grew(by: isize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call is forwarded unchanged to `System`; only counters are updated.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grew(layout.size() as isize);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        grew(new_size as isize - layout.size() as isize);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// The live heap bytes of the whole process now.
pub fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

/// The heap from a baseline (the highest it went since) and the time since it was taken.
pub struct Heap {
    baseline: isize,
    start: Instant,
}

impl Heap {
    /// Takes the baseline: the live bytes now, which also become the peak.
    pub fn start() -> Heap {
        let now = live();
        PEAK.store(now, Ordering::Relaxed);
        Heap {
            baseline: now,
            start: Instant::now(),
        }
    }

    /// How far the peak went above the baseline, in bytes.
    pub fn peak_growth(&self) -> isize {
        PEAK.load(Ordering::Relaxed) - self.baseline
    }

    /// Asserts the peak stayed under `bound` bytes above the baseline.
    pub fn assert_peak_below(&self, bound: usize, what: &str) {
        let peak = self.peak_growth();
        eprintln!(
            "{what}: heap peak {:.1} MiB above baseline",
            peak as f64 / MIB as f64
        );
        assert!(
            peak < bound as isize,
            "{what}: the heap grew {peak} B, above the {bound} B bound"
        );
    }

    /// Asserts less than `secs` seconds passed since the baseline.
    pub fn assert_within(&self, secs: u64) {
        let took = self.start.elapsed();
        assert!(took < Duration::from_secs(secs), "took {took:?}");
    }
}
