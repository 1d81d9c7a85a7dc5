//! Streamable HTTP sessions in the file (feature `sessions`): purra-protocol's `SessionStore`
//! contract, and two stores on one file seeing each other's sessions and events.

use purra_protocol::session_store::{check_contract, SessionRecord, SessionStore};
use purra_sqlite::SqliteStore;
use std::time::SystemTime;

use crate::support::fresh_db;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_session_store_meets_the_contract() {
    let store = SqliteStore::open(fresh_db("sessions-contract")).unwrap();
    check_contract(&store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_saved_by_one_store_is_loaded_by_another_on_the_same_file() {
    let path = fresh_db("sessions-two");
    let a = SqliteStore::open(&path).unwrap();
    let b = SqliteStore::open(&path).unwrap();
    let record = SessionRecord {
        id: "s1".into(),
        owner: Some("alice".into()),
        state: "{}".into(),
        last_seen: SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_800_000_000),
    };
    a.save_session(record.clone()).await.unwrap();
    assert_eq!(b.load_session("s1".into()).await.unwrap(), Some(record));
    assert!(b.end_session("s1".into()).await.unwrap());
    assert_eq!(a.load_session("s1".into()).await.unwrap(), None);
}
