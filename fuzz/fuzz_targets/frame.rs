//! Fuzz target: frame decoding (the invariants are purra_fuzz::frame's).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| purra_fuzz::frame::check(data));
