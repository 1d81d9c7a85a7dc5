//! Idempotency keys to a real upstream: the official Python SDK fixture
//! `peers/python/idempotent_server.py` (over stdio), which records the key every `tools/call`
//! carried in an fsynced ledger. A write dispatched after its approval carries
//! `IdempotencyKey(intent digest).upstream()` in `_meta`, and also as SEP-3182's `idempotencyKey`
//! when the upstream declared `capabilities.tools.idempotency`; a read carries no key.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use purra_core::{ApprovalGateway, ApprovalId, IdempotencyKey};
use purra_gateway::{ScopeRules, StartOptions, UpstreamConfig};
use purra_protocol::ClientOptions;
use serde_json::{json, Value};

use crate::support::{
    approve, base_config, client_named, open_read, set_write, start_on_sqlite, wait_prepared,
};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Python of the pinned MCP Python SDK.
fn python() -> PathBuf {
    let peers = std::env::var_os("PURRA_PEERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".peers"));
    let p = peers.join("venv/bin/python");
    assert!(
        p.exists(),
        "{} is missing: run scripts/setup-peers.sh (the test command does) first",
        p.display()
    );
    p
}

/// Every `tools/call` the fixture received, in order.
fn calls(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("calls.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("ledger line"))
        .collect()
}

/// One approved write `charge {amount: 7}` and one read `lookup` through a gateway whose upstream
/// is the fixture (declaring the capability when `declare`): the fixture's ledger and the key the
/// write's claim derives.
async fn write_and_read(name: &str, declare: bool) -> (Vec<Value>, String) {
    let ledger = crate::support::TempDir::new("idempotency", &format!("{name}-upstream"));
    let mut command = vec![
        python().display().to_string(),
        repo()
            .join("peers/python/idempotent_server.py")
            .display()
            .to_string(),
        "--dir".into(),
        ledger.0.display().to_string(),
    ];
    if declare {
        command.push("--declare".into());
    }
    let s = start_on_sqlite(
        "idempotency",
        name,
        |db| {
            let mut c = base_config("idem", db, Duration::from_secs(60), "http://unused");
            c.upstreams.insert(
                "up".into(),
                UpstreamConfig {
                    command: Some(command),
                    ..UpstreamConfig::default()
                },
            );
            c.writes.insert(
                "charge".into(),
                set_write(ScopeRules {
                    principals: None,
                    clients: Some(vec!["idem-client".into()]),
                    arguments: vec![],
                }),
            );
            c.reads.insert("lookup".into(), open_read("Lookup"));
            c
        },
        StartOptions::default(),
    )
    .await;
    let conn = Arc::new(client_named(&s.gateway, "idem-client", ClientOptions::default()).await);
    let call = {
        let conn = conn.clone();
        tokio::spawn(async move { conn.call_tool("charge", json!({"amount": 7})).await })
    };
    let id = ApprovalId("approval-1".into());
    wait_prepared(&s.store, &id).await;
    s.gateway
        .decide(id.clone(), approve())
        .await
        .expect("decide");
    let result = call.await.expect("join").expect("call");
    assert!(!result.is_error(), "{result:?}");
    assert_eq!(
        result.structured_content,
        Some(json!({"charged": 7, "execution": 1}))
    );
    let read = conn.call_tool("lookup", json!({})).await.expect("read");
    assert_eq!(read.structured_content, Some(json!({"executions": 1})));
    let record = s.store.record(id).await.expect("record").expect("approval");
    let key = IdempotencyKey(record.intent_digest.to_string()).upstream();
    drop(conn);
    drop(s);
    (calls(&ledger.0), key)
}

/// Without the capability: the write's `_meta` carries its claim's key and nothing else does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dispatched_write_carries_its_claims_key_and_a_read_none() {
    let (calls, key) = write_and_read("meta", false).await;
    assert!(key.starts_with("purra-idem-v1-"), "{key}");
    assert_eq!(
        calls,
        vec![
            json!({"tool": "charge", "arguments": {"amount": 7}, "meta_key": key, "param_key": null}),
            json!({"tool": "lookup", "arguments": {}, "meta_key": null, "param_key": null}),
        ]
    );
}

/// An upstream declaring `capabilities.tools.idempotency` also gets SEP-3182's `idempotencyKey`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_declaring_idempotency_also_gets_the_sep_3182_key() {
    let (calls, key) = write_and_read("declared", true).await;
    assert_eq!(
        calls,
        vec![
            json!({"tool": "charge", "arguments": {"amount": 7}, "meta_key": key, "param_key": key}),
            json!({"tool": "lookup", "arguments": {}, "meta_key": null, "param_key": null}),
        ]
    );
}
