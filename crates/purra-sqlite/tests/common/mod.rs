//! Helpers shared by the integration tests: fresh database paths, intents and decisions.
#![allow(dead_code)]

use purra_core::*;
use serde_json::json;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime};

/// A path for a new database file in a fresh directory under the test target's temporary directory.
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

/// `t` seconds after the Unix epoch.
pub fn at(t: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(t)
}

/// An intent whose arguments digest is the identity of the string `args`.
pub fn intent(args: &str) -> ApprovalIntent {
    let id = |s: &str| json_identity(&json!(s)).unwrap();
    ApprovalIntent {
        tool: "update".into(),
        arguments_digest: id(args),
        approval_binding: id("binding"),
        checkpoint_call: CheckpointCall {
            call_id: "c1".into(),
            tool: "update".into(),
        },
        run_id: RunId::new("r1"),
        preset_fingerprint: id("preset"),
    }
}

/// A decision by alice at t=10, with an optional expiry.
pub fn decision(verdict: Verdict, expires_at: Option<SystemTime>) -> Decision {
    Decision {
        verdict,
        approver: "alice".into(),
        decided_at: at(10),
        expires_at,
    }
}

/// The idempotency key Core uses for `intent`.
pub fn key_of(intent: &ApprovalIntent) -> IdempotencyKey {
    IdempotencyKey(intent.digest().to_string())
}
