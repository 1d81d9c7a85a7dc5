//! purra benchmarks live in `benches/` (one file per area: `core.rs` for purra-core); this library is empty.
