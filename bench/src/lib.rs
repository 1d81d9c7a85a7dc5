//! purra benchmarks live in `benches/` (one file per area: `core.rs` for purra-core, `sqlite.rs` for purra-sqlite); this library is empty.
