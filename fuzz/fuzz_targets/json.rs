//! Fuzz target: Core's bounded JSON decoder, differential against serde_json (the invariants are purra_fuzz::json's).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| purra_fuzz::json::check(data));
