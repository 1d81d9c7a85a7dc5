//! purra-fuzz: the invariants purra's fuzz targets check, shared by the cargo-fuzz targets in the
//! repository's `fuzz/` directory and by the corpus replay test, which runs them on stable.
//!
//! Each module's `check(data)` decodes one fuzz input, drives one part of purra with it, and
//! panics when an invariant fails (a panic is what libFuzzer reports as a crash).
//! [`TARGETS`] names every target; [`check`] dispatches by name.

pub mod canonical;
pub mod engine;
pub mod frame;
pub mod host;
pub mod http_router;
mod input;
pub mod json;
pub mod judge;
pub mod schema;
pub mod sse;
pub mod stdio_lines;

/// A target's check: panics when an invariant fails.
pub type Check = fn(&[u8]);

/// Every fuzz target: its name (the `fuzz/fuzz_targets/NAME.rs` file and the `fuzz/corpus/NAME`
/// directory) and its check.
pub const TARGETS: &[(&str, Check)] = &[
    ("frame", frame::check),
    ("stdio_lines", stdio_lines::check),
    ("sse", sse::check),
    ("host", host::check),
    ("engine", engine::check),
    ("http_router", http_router::check),
    ("json", json::check),
    ("canonical", canonical::check),
    ("schema", schema::check),
    ("judge", judge::check),
];

/// Runs the check of the target named `target` on `data`; `false` when there is no such target.
pub fn check(target: &str, data: &[u8]) -> bool {
    match TARGETS.iter().find(|(name, _)| *name == target) {
        Some((_, f)) => {
            f(data);
            true
        }
        None => false,
    }
}

/// A current-thread runtime whose clock is paused: timers fire as soon as every task is idle, so
/// the targets that wait for timeouts cost no wall-clock time and behave the same on every run.
pub(crate) fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime")
}
