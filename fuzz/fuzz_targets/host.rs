//! Fuzz target: the Host/Origin checks and the Last-Event-ID parser (the invariants are purra_fuzz::host's).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| purra_fuzz::host::check(data));
