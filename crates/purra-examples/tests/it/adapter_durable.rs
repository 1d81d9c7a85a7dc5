//! Durable approval-gated writes end to end against purra's synthetic adapter fixture server (a
//! separate process): approval across a host restart, a binding mismatch after rediscovery,
//! scope revoked between approval and dispatch, committed receipts, retained unknown claims, and
//! expired approvals — each checked on the local store and on what the server saw.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use purra_core::{
    Agent, ApprovalGateway, ApprovalId, Catalog, ClaimState, Decision, EffectOutcome,
    IdempotencyKey, IdempotencyStore, JsonIdentity, Lease, Risk, RunId, RunOutcome, RunRequest,
    ScopeCheck, ScopeDecision, ScriptedModel, Verdict,
};
use purra_mcp::{discover_write_tools, CatalogMonitor, Limits, WriteBinding, WriteEffect};
use purra_protocol::Connection;
use purra_sqlite::SqliteStore;
use serde_json::{json, Value};

use crate::support::{adapter_fixture, TempDir};

/// A host's directory and its SQLite file.
struct Db(TempDir);

impl Db {
    fn new(tag: &str) -> Db {
        Db(TempDir::new(&format!("durable-{tag}")))
    }
    fn path(&self) -> PathBuf {
        self.0 .0.join("host.db")
    }
    fn open(&self) -> Arc<SqliteStore> {
        Arc::new(SqliteStore::open(self.path()).unwrap())
    }
}

async fn connect() -> Arc<Connection> {
    adapter_fixture().await
}

/// The host's binding of a fixture tool as a write; `revoked` turns its scope check off.
fn binding(local: &str, scope_revision: &str, revoked: Arc<AtomicBool>) -> WriteBinding {
    WriteBinding {
        local_name: local.into(),
        title: format!("Write with {local}"),
        risk: Risk::Write,
        effect: WriteEffect::Write,
        scope: ScopeCheck::check(move |_args, run| {
            if run.agent == "writer" && !revoked.load(Ordering::SeqCst) {
                ScopeDecision::Allow
            } else {
                ScopeDecision::Deny
            }
        }),
        binding_id: "fixture-writes".into(),
        binding_revision: "host-config-1".into(),
        scope_id: "sandbox".into(),
        scope_revision: scope_revision.into(),
    }
}

struct Host {
    conn: Arc<Connection>,
    agent: Agent,
    model: Arc<ScriptedModel>,
}

impl Host {
    /// What the model saw last.
    fn last_transcript(&self) -> String {
        format!("{:?}", self.model.transcripts().last())
    }
}

/// Connects, discovers `remote` as the write `local`, and builds the agent over `store`. A
/// restarted host's model continues the transcript: only the last turn is left to script.
async fn host(
    store: Arc<SqliteStore>,
    remote: &str,
    local: &str,
    args: Value,
    b: WriteBinding,
) -> Host {
    host_with(store, remote, local, args, b, false).await
}

async fn restarted_host(
    store: Arc<SqliteStore>,
    remote: &str,
    local: &str,
    args: Value,
    b: WriteBinding,
) -> Host {
    host_with(store, remote, local, args, b, true).await
}

async fn host_with(
    store: Arc<SqliteStore>,
    remote: &str,
    local: &str,
    args: Value,
    b: WriteBinding,
    restarted: bool,
) -> Host {
    let conn = connect().await;
    let monitor = CatalogMonitor::attach(&conn);
    let mut b = b;
    b.local_name = local.into();
    let cat = discover_write_tools(
        &conn,
        "fixture",
        &BTreeMap::from([(remote.to_owned(), b)]),
        &monitor,
        Limits::default(),
    )
    .await
    .unwrap();
    let catalog = Arc::new(Catalog::new(cat.registrations).unwrap());
    let model = Arc::new(ScriptedModel::new(
        "scripted",
        if restarted {
            vec![ScriptedModel::text("finished")]
        } else {
            vec![
                ScriptedModel::calls(&[("w1", local, args)]),
                ScriptedModel::text("finished"),
            ]
        },
    ));
    let agent = Agent::builder("writer", model.clone(), catalog)
        .instructions("write once")
        .approval(store.clone())
        .run_store(store)
        .tool_checkpoint_names([local])
        .build()
        .unwrap();
    Host { conn, agent, model }
}

async fn suspend(h: &Host, run: &str) -> (ApprovalId, JsonIdentity) {
    let outcome = h
        .agent
        .run(RunRequest {
            run_id: RunId::new(run),
            root_run_id: None,
            input: "go".into(),
            lease: Lease::unbounded(),
        })
        .await;
    match outcome {
        RunOutcome::Suspended {
            approval_id,
            intent_digest,
        } => (approval_id, intent_digest),
        other => panic!("expected a suspension, got {other:?}"),
    }
}

async fn approve(store: &SqliteStore, id: ApprovalId, expires_at: Option<SystemTime>) {
    store
        .decide(
            id,
            Decision {
                verdict: Verdict::Approve,
                approver: "operator".into(),
                decided_at: SystemTime::now(),
                expires_at,
                note: None,
            },
        )
        .await
        .unwrap();
}

async fn calls(conn: &Connection, tool: &str) -> String {
    let r = conn
        .call_tool("observed", json!({"tool": tool}))
        .await
        .unwrap();
    r.texts().collect::<String>()
}

async fn claim(store: &SqliteStore, digest: &JsonIdentity) -> Option<ClaimState> {
    store
        .state(IdempotencyKey(digest.to_string()))
        .await
        .unwrap()
}

#[tokio::test]
async fn approval_survives_a_host_restart_and_commits_a_receipt_once() {
    let db = Db::new("restart");
    let on = Arc::new(AtomicBool::new(false));
    let args = json!({"id": 5});
    let (id, digest) = {
        let h = host(
            db.open(),
            "lookup",
            "write_item",
            args.clone(),
            binding("w", "scope-1", on.clone()),
        )
        .await;
        let s = suspend(&h, "run-restart").await;
        assert_eq!(calls(&h.conn, "lookup").await, "calls=0 cancellations=0");
        h.conn.close().await;
        s
    };
    // The host restarts: a new store handle on the same file, then the decision.
    approve(&db.open(), id, None).await;
    let store = db.open();
    let h = restarted_host(
        store.clone(),
        "lookup",
        "write_item",
        args.clone(),
        binding("w", "scope-1", on.clone()),
    )
    .await;
    let outcome = h
        .agent
        .resume(RunId::new("run-restart"), Lease::unbounded())
        .await;
    assert_eq!(
        outcome,
        RunOutcome::Completed {
            text: "finished".into()
        }
    );
    assert_eq!(calls(&h.conn, "lookup").await, "calls=1 cancellations=0");
    assert_eq!(
        claim(&store, &digest).await,
        Some(ClaimState::Completed {
            outcome: EffectOutcome::Committed {
                receipt: json!({"text": ["{\"id\":5,\"name\":\"item 5\"}"], "structured": {"id": 5, "name": "item 5"}})
            }
        })
    );
    // Resuming again never dispatches again.
    let again = h
        .agent
        .resume(RunId::new("run-restart"), Lease::unbounded())
        .await;
    assert!(matches!(again, RunOutcome::Failed { .. }), "{again:?}");
    assert_eq!(calls(&h.conn, "lookup").await, "calls=1 cancellations=0");
}

#[tokio::test]
async fn a_binding_changed_by_rediscovery_refuses_the_old_approval() {
    let db = Db::new("mismatch");
    let on = Arc::new(AtomicBool::new(false));
    let args = json!({"id": 1});
    let (id, digest) = {
        let h = host(
            db.open(),
            "lookup",
            "write_item",
            args.clone(),
            binding("w", "scope-1", on.clone()),
        )
        .await;
        suspend(&h, "run-mismatch").await
    };
    approve(&db.open(), id, None).await;
    // The host's scope revision changed: rediscovery gives a new effective binding revision.
    let store = db.open();
    let h = restarted_host(
        store.clone(),
        "lookup",
        "write_item",
        args,
        binding("w", "scope-2", on),
    )
    .await;
    let outcome = h
        .agent
        .resume(RunId::new("run-mismatch"), Lease::unbounded())
        .await;
    // The model is told the approval no longer matches; the run goes on without the write.
    assert_eq!(
        outcome,
        RunOutcome::Completed {
            text: "finished".into()
        }
    );
    assert!(
        h.last_transcript().contains("approval_mismatch"),
        "{}",
        h.last_transcript()
    );
    assert_eq!(
        calls(&h.conn, "lookup").await,
        "calls=0 cancellations=0",
        "nothing may be sent: {outcome:?}"
    );
    let state = claim(&store, &digest).await;
    assert!(
        matches!(
            state,
            None | Some(ClaimState::Completed {
                outcome: EffectOutcome::NotStarted
            })
        ),
        "{state:?}"
    );
}

#[tokio::test]
async fn scope_revoked_between_approval_and_dispatch_sends_nothing() {
    let db = Db::new("revoked");
    let revoked = Arc::new(AtomicBool::new(false));
    let args = json!({"id": 2});
    let store = db.open();
    let h = host(
        store.clone(),
        "lookup",
        "write_item",
        args,
        binding("w", "scope-1", revoked.clone()),
    )
    .await;
    let (id, digest) = suspend(&h, "run-revoked").await;
    approve(&store, id, None).await;
    revoked.store(true, Ordering::SeqCst);
    let outcome = h
        .agent
        .resume(RunId::new("run-revoked"), Lease::unbounded())
        .await;
    assert_eq!(
        calls(&h.conn, "lookup").await,
        "calls=0 cancellations=0",
        "{outcome:?}"
    );
    // The scope is re-checked at dispatch, before the claim: nothing is claimed, nothing sent.
    assert_eq!(claim(&store, &digest).await, None, "after {outcome:?}");
    assert_eq!(
        outcome,
        RunOutcome::Completed {
            text: "finished".into()
        }
    );
    assert!(
        h.last_transcript().contains("scope_denied"),
        "{}",
        h.last_transcript()
    );
}

#[tokio::test]
async fn an_uncertain_outcome_is_kept_as_unknown_and_never_retried() {
    let db = Db::new("unknown");
    let on = Arc::new(AtomicBool::new(false));
    let store = db.open();
    // `fails` answers isError after the request was sent: the effect is unknown.
    let h = host(
        store.clone(),
        "fails",
        "write_fails",
        json!({}),
        binding("w", "scope-1", on),
    )
    .await;
    let (id, digest) = suspend(&h, "run-unknown").await;
    approve(&store, id, None).await;
    let _ = h
        .agent
        .resume(RunId::new("run-unknown"), Lease::unbounded())
        .await;
    assert_eq!(calls(&h.conn, "fails").await, "calls=1 cancellations=0");
    let state = claim(&store, &digest).await;
    assert!(
        matches!(&state, Some(ClaimState::Completed { outcome: EffectOutcome::Unknown { reason } }) if reason.as_str() == "mcp_tool_error"),
        "{state:?}"
    );
    let again = h
        .agent
        .resume(RunId::new("run-unknown"), Lease::unbounded())
        .await;
    assert!(matches!(again, RunOutcome::Failed { .. }), "{again:?}");
    assert_eq!(calls(&h.conn, "fails").await, "calls=1 cancellations=0");
    // A reopened store still holds the unknown claim.
    assert_eq!(claim(&db.open(), &digest).await, state);
}

#[tokio::test]
async fn an_expired_approval_never_dispatches() {
    let db = Db::new("expired");
    let on = Arc::new(AtomicBool::new(false));
    let store = db.open();
    let h = host(
        store.clone(),
        "lookup",
        "write_item",
        json!({"id": 3}),
        binding("w", "scope-1", on),
    )
    .await;
    let (id, _digest) = suspend(&h, "run-expired").await;
    approve(
        &store,
        id,
        Some(SystemTime::now() + Duration::from_millis(50)),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let outcome = h
        .agent
        .resume(RunId::new("run-expired"), Lease::unbounded())
        .await;
    assert_eq!(
        calls(&h.conn, "lookup").await,
        "calls=0 cancellations=0",
        "{outcome:?}"
    );
    assert_eq!(
        outcome,
        RunOutcome::Completed {
            text: "finished".into()
        }
    );
    assert!(
        h.last_transcript().contains("approval_expired"),
        "{}",
        h.last_transcript()
    );
}
