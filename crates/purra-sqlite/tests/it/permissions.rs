//! The store file holds tool arguments and the audit log: it and its WAL and shared-memory files
//! are created private (0600) whatever the umask, and an existing file keeps the mode its
//! operator gave it. The umask is process-wide: this is the one test of the binary that sets it, to
//! the usual 022.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use nix::sys::stat::{umask, Mode};
use purra_core::*;
use purra_sqlite::SqliteStore;
use purra_store_tests::request;

use crate::support::fresh_db;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn sibling(path: &Path, suffix: &str) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    name.into()
}

#[tokio::test]
async fn a_new_store_and_its_wal_and_shm_are_private_whatever_the_umask() {
    // The usual umask, which left the file readable by everyone (0644) before.
    umask(Mode::from_bits_truncate(0o022));
    let path = fresh_db("permissions-new");
    let store = SqliteStore::open(&path).unwrap();
    // A write makes SQLite create the WAL and its index.
    store.prepare(request("a")).await.unwrap();
    assert_eq!(
        [
            mode(&path),
            mode(&sibling(&path, "-wal")),
            mode(&sibling(&path, "-shm"))
        ],
        [0o600, 0o600, 0o600]
    );
    drop(store);

    // An existing file keeps the mode its operator chose, and so do the files SQLite makes.
    let shared = fresh_db("permissions-existing");
    drop(SqliteStore::open(&shared).unwrap());
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(sibling(&shared, suffix));
    }
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o640)).unwrap();
    let store = SqliteStore::open(&shared).unwrap();
    store.prepare(request("b")).await.unwrap();
    assert_eq!(
        [mode(&shared), mode(&sibling(&shared, "-wal"))],
        [0o640, 0o640]
    );
}
