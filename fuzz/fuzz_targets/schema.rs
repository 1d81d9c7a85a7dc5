//! Fuzz target: schema compile and validate under step budgets (the invariants are purra_fuzz::schema's).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| purra_fuzz::schema::check(data));
