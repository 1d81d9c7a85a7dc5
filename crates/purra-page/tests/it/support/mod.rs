//! Helpers shared by the test modules: a page's directory and store, serving it on loopback, and
//! a client that shows redirects as they are.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::SystemTime;

use purra_page::Page;
use purra_sqlite::SqliteStore;

/// A test's directory, removed when dropped.
pub struct TempDir(pub PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fresh directory for test `name` of the module `kind` (`purra-page-KIND-NAME-PID-NANOS` in
/// the temporary directory) with a SQLite store `page.db` in it.
pub fn fresh_store(kind: &str, name: &str) -> (SqliteStore, TempDir) {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!(
        "purra-page-{kind}-{name}-{}-{nanos}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let store = SqliteStore::open(dir.join("page.db")).unwrap();
    (store, TempDir(dir))
}

/// Serves `page` on a fresh loopback port for the test's life; its address.
pub async fn serve(page: &Page) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let serving = page.clone();
    tokio::spawn(async move { serving.serve(listener, std::future::pending()).await });
    addr
}

/// An HTTP client that follows no redirect (the tests assert the page's own answers).
pub fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}
