//! Fuzz target: the MCP adapter's result judging (the invariants are purra_fuzz::judge's).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| purra_fuzz::judge::check(data));
