//! Fuzz target: the Streamable HTTP router through tower's oneshot (the invariants are purra_fuzz::http_router's).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| purra_fuzz::http_router::check(data));
