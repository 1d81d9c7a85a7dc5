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

/// `sessions_version`, as another process's store on the same file changes sessions: it moves
/// at once (no wait, no poll) when a session is ended, expired or saved with another state, and
/// stays while only new sessions, last-seen times, events and other writes are committed (so a
/// process holding a session reads it again only after a change that can matter to it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sessions_version_moves_when_another_store_ends_or_changes_a_session() {
    use purra_protocol::session_store::{EventLogBounds, StoredEvent};
    use std::time::Duration;
    let path = fresh_db("sessions-version");
    let here = SqliteStore::open(&path).unwrap();
    let other = SqliteStore::open(&path).unwrap();
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let rec = |id: &str, state: &str, at: SystemTime| SessionRecord {
        id: id.into(),
        owner: Some("alice".into()),
        state: state.into(),
        last_seen: at,
    };
    let v0 = here.sessions_version().expect("a file store tells");
    assert_eq!(here.sessions_version(), Some(v0), "nothing committed");
    assert_eq!(other.sessions_version(), Some(v0));
    // What does not end or change a kept session leaves it as it was.
    other.save_session(rec("a", "{}", t0)).await.unwrap();
    other.save_session(rec("b", "{}", t0)).await.unwrap();
    other.save_session(rec("a", "{}", t0)).await.unwrap();
    let later = t0 + Duration::from_secs(60);
    other.touch_session("a".into(), Some(later)).await.unwrap();
    let event = StoredEvent {
        session: "a".into(),
        stream: 1,
        seq: 1,
        data: b"x".to_vec(),
        at: later,
    };
    other
        .append_events(vec![event], EventLogBounds::default())
        .await
        .unwrap();
    assert!(!other.end_session("zz".into()).await.unwrap());
    assert_eq!(here.sessions_version(), Some(v0));
    // Another state: moved, by the time the save is done.
    other
        .save_session(rec("a", "{\"level\":\"error\"}", later))
        .await
        .unwrap();
    let v1 = here.sessions_version().unwrap();
    assert_ne!(v1, v0, "a state saved elsewhere");
    assert_eq!(here.sessions_version(), Some(v1));
    // Ended, and expired.
    assert!(other.end_session("a".into()).await.unwrap());
    let v2 = here.sessions_version().unwrap();
    assert_ne!(v2, v1, "a session ended elsewhere");
    assert_eq!(other.expire_sessions(later).await.unwrap(), 1);
    let v3 = here.sessions_version().unwrap();
    assert_ne!(v3, v2, "a session expired elsewhere");
    // The writing store sees its own writes too (they are another connection's to its watch).
    assert_eq!(other.sessions_version(), Some(v3));
    // An in-memory store cannot be changed by another process, and does not tell.
    assert_eq!(
        SqliteStore::open_in_memory().unwrap().sessions_version(),
        None
    );
}
