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

/// The installed peers (`PURRA_PEERS_DIR`, else `.peers` in the repository).
pub fn peers_dir() -> PathBuf {
    std::env::var_os("PURRA_PEERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".peers"))
}

/// The node binary of the installed peers.
pub fn node() -> PathBuf {
    peers_dir().join("bin/node")
}

/// The Python of the installed peers' virtual environment `venv` (`venv`: the SDK's and the
/// test peers'; `venv-idp`: idpyoidc's).
pub fn python(venv: &str) -> PathBuf {
    let p = peers_dir().join(venv).join("bin/python");
    assert!(
        p.exists(),
        "{} is missing: run scripts/setup-peers.sh (the test command does)",
        p.display()
    );
    p
}
