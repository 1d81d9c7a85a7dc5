//! Fuzz target: canonicalize (RFC 8785), idempotent (the invariants are purra_fuzz::canonical's).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| purra_fuzz::canonical::check(data));
