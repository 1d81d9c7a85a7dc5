//! Fuzz target: the SSE parser (the invariants are purra_fuzz::sse's).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| purra_fuzz::sse::check(data));
