//! Fuzz target: the engine driven by frame sequences over memory::raw() (the invariants are purra_fuzz::engine's).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| purra_fuzz::engine::check(data));
