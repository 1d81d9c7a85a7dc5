//! Helpers shared by purra-sqlite's integration tests: a path for a new store file.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

/// A path for a new database file in a fresh directory under the test target's temporary
/// directory: `name`, the process and a count make it unique among the tests of this binary.
pub fn fresh_db(name: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "purra-sqlite-{name}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("store.db")
}
