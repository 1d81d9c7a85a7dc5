//! Fuzz target: the stdio line reader under random chunking (the invariants are purra_fuzz::stdio_lines's).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| purra_fuzz::stdio_lines::check(data));
