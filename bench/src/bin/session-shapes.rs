//! Where a Streamable HTTP session's state lives in a fleet, both shapes measured (issue 48):
//! in a shared store (purra-protocol's `SessionStore`: in memory, and purra-sqlite's file), or
//! sealed into the session id itself (AES-256-GCM under a fleet key, base64url, as purra seals a
//! `requestState`).
//!
//! Per shape, the mean time of what a request costs: with a store, a process holding the session
//! reads whether it is still kept (`touch_session` without a write; `DELETE` and expiry elsewhere
//! then hold at once), one not holding it loads and decodes it (a "miss"), and a change (a log
//! level) saves it. Sealed, every request opens the id (base64, AEAD, JSON), and every change
//! seals a new one, which the client would have to be handed. Also the bytes one session costs:
//! its stored state, and the sealed id's length (sent on every request).
//!
//! With `--postgres URL`, purra-postgres's store too (a fresh schema on that server): a fleet's
//! store, and what one stored session takes there (the sessions table with its indexes, over
//! the sessions kept).
//!
//! Usage: `session-shapes --dir DIR [--n N] [--postgres URL]`; prints one JSON line.

#![allow(clippy::print_stdout)] // a benchmark program: stdout is its result

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use base64::Engine as _;
use purra_protocol::session_store::{MemorySessionStore, SessionRecord, SessionStore};
use purra_protocol::SessionSnapshot;
use purra_sqlite::SqliteStore;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};

/// A typical 2025-11-25 client's session: capabilities as the TypeScript SDK's client sends
/// them, a log level, two subscriptions.
fn snapshot() -> SessionSnapshot {
    serde_json::from_value(serde_json::json!({
        "protocolVersion": "2025-11-25",
        "capabilities": {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {"listChanged": true}},
        "clientInfo": {"name": "claude-code", "version": "2.0.31"},
        "logLevel": "info",
        "subscriptions": ["file:///repo/README.md", "file:///repo/src/main.rs"]
    }))
    .expect("a snapshot")
}

fn seal(key: &LessSafeKey, owner: &str, snapshot: &SessionSnapshot, n: u64) -> String {
    let mut body = serde_json::to_vec(&(owner, snapshot)).expect("json");
    let mut nonce = [0u8; 12];
    nonce[4..].copy_from_slice(&n.to_be_bytes());
    key.seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut body)
        .expect("seal");
    let mut raw = nonce.to_vec();
    raw.extend_from_slice(&body);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

fn open(key: &LessSafeKey, id: &str) -> (String, SessionSnapshot) {
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(id)
        .expect("base64");
    let (nonce, sealed) = raw.split_at(12);
    let mut sealed = sealed.to_vec();
    let nonce = Nonce::try_assume_unique_for_key(nonce).expect("nonce");
    let plain = key
        .open_in_place(nonce, Aad::empty(), &mut sealed)
        .expect("open");
    serde_json::from_slice(plain).expect("json")
}

/// The mean of `n` runs of `f`, in microseconds.
async fn mean_us<F, Fut>(n: u32, mut f: F) -> f64
where
    F: FnMut(u32) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let start = Instant::now();
    for i in 0..n {
        f(i).await;
    }
    start.elapsed().as_secs_f64() * 1e6 / f64::from(n)
}

/// A store's costs: held (a read), miss (load and decode), change (save).
async fn store_costs(store: Arc<dyn SessionStore>, n: u32) -> serde_json::Value {
    let state = serde_json::to_string(&snapshot()).expect("json");
    let sessions = 1000u32;
    for i in 0..sessions {
        store
            .save_session(SessionRecord {
                id: format!("{i:032x}"),
                owner: Some("alice".into()),
                state: state.clone(),
                last_seen: SystemTime::now(),
            })
            .await
            .expect("save");
    }
    let id = |i: u32| format!("{:032x}", i % sessions);
    let held = mean_us(n, |i| {
        let store = store.clone();
        async move {
            let r = store.touch_session(id(i), None).await.expect("touch");
            assert!(r.is_some());
        }
    })
    .await;
    let miss = mean_us(n, |i| {
        let store = store.clone();
        async move {
            let r = store
                .load_session(id(i))
                .await
                .expect("load")
                .expect("kept");
            let s: SessionSnapshot = serde_json::from_str(&r.state).expect("decode");
            assert_eq!(s.protocol_version, "2025-11-25");
        }
    })
    .await;
    let change = mean_us(n / 10, |i| {
        let (store, state) = (store.clone(), state.clone());
        async move {
            store
                .save_session(SessionRecord {
                    id: id(i),
                    owner: Some("alice".into()),
                    state,
                    last_seen: SystemTime::now(),
                })
                .await
                .expect("save");
        }
    })
    .await;
    serde_json::json!({"held_us": held, "miss_us": miss, "change_us": change})
}

/// purra-postgres's costs on a fresh schema of the server at `url`, with the bytes one stored
/// session takes there.
async fn postgres_costs(url: &str, n: u32) -> serde_json::Value {
    let schema = format!("session_shapes_{}", std::process::id());
    let store = purra_postgres::PostgresStore::connect_with(
        url,
        purra_postgres::PostgresOptions::default().schema(schema.clone()),
    )
    .await
    .expect("the PostgreSQL store");
    let mut costs = store_costs(Arc::new(store), n).await;
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("a PostgreSQL connection");
    tokio::spawn(connection);
    let row = client
        .query_one(
            &format!(
                "SELECT pg_total_relation_size('{schema}.http_sessions'), \
                 (SELECT count(*) FROM {schema}.http_sessions)"
            ),
            &[],
        )
        .await
        .expect("the table's size");
    let (bytes, kept): (i64, i64) = (row.get(0), row.get(1));
    costs["bytes_per_session"] = serde_json::json!(bytes / kept.max(1));
    costs["sessions_kept"] = serde_json::json!(kept);
    client
        .execute(&format!("DROP SCHEMA {schema} CASCADE"), &[])
        .await
        .expect("drop the schema");
    costs
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let dir = PathBuf::from(arg("--dir").expect("--dir DIR"));
    let n: u32 = arg("--n").map_or(20_000, |v| v.parse().expect("--n N"));
    std::fs::create_dir_all(&dir).expect("the directory");
    let file = dir.join("sessions.db");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
    }

    let memory = store_costs(Arc::new(MemorySessionStore::new()), n).await;
    let sqlite = store_costs(Arc::new(SqliteStore::open(&file).expect("the store")), n).await;
    let postgres = match arg("--postgres") {
        Some(url) => postgres_costs(&url, n).await,
        None => serde_json::Value::Null,
    };

    let key = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &[7u8; 32]).expect("key"));
    let snap = snapshot();
    let sealed_id = seal(&key, "alice", &snap, 0);
    let per_request = mean_us(n, |_| {
        let (key, id) = (&key, &sealed_id);
        async move {
            let (owner, s) = open(key, id);
            assert_eq!(owner, "alice");
            assert_eq!(s.protocol_version, "2025-11-25");
        }
    })
    .await;
    let per_change = mean_us(n, |i| {
        let (key, snap) = (&key, &snap);
        async move {
            assert!(!seal(key, "alice", snap, u64::from(i)).is_empty());
        }
    })
    .await;
    let state_bytes = serde_json::to_string(&snap).expect("json").len();
    println!(
        "{}",
        serde_json::json!({
            "n": n,
            "state_bytes": state_bytes,
            "store_memory": memory,
            "store_sqlite": sqlite,
            "store_postgres": postgres,
            "sealed": {"request_us": per_request, "change_us": per_change, "id_bytes": sealed_id.len()},
        })
    );
}
