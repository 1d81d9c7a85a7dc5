//! Processes by id (`/proc`), and where the peers the tests run are installed.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Whether `pid` names a process, one that exited and is not reaped yet (a zombie) included.
pub fn exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Whether `pid` is a live process (a zombie is not).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            let state = s.rsplit_once(") ").map(|(_, rest)| rest.chars().next());
            state != Some(Some('Z'))
        })
        .unwrap_or(false)
}

/// Whether `still(pid)` turned false within `limit` (asked every 20 ms).
pub async fn gone_within(pid: u32, limit: Duration, still: fn(u32) -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if !still(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    !still(pid)
}

/// The repository's root directory.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repo root")
}

/// The node binary of the installed peers (`PURRA_PEERS_DIR`, else `.peers` in the repository).
pub fn node() -> PathBuf {
    let peers = std::env::var_os("PURRA_PEERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".peers"));
    peers.join("bin/node")
}
