//! Durability across reopening: approvals, claims and suspended runs survive a dropped store, and
//! purra-core's agent suspended on one store instance resumes on another, dispatching exactly once.

use crate::*;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

/// Contract test.
pub async fn an_approval_prepared_and_approved_before_reopening_claims_exactly_once<H: Harness>(
    h: &H,
) {
    let path = h.fresh("reopen-claim");
    let store = h.open(&path).await.unwrap();
    let a = store.prepare(request("a")).await.unwrap();
    let approve = decision(Verdict::Approve, None);
    store.decide(a.clone(), approve.clone()).await.unwrap();
    drop(store);

    let store = h.open(&path).await.unwrap();
    assert_eq!(
        store.record(a.clone()).await.unwrap(),
        Some(ApprovalRecord {
            intent: intent("a"),
            intent_digest: intent("a").digest(),
            state: ApprovalState::Decided(approve.clone())
        })
    );
    let key = key_of(&intent("a"));
    assert_eq!(
        store
            .check_and_claim(a.clone(), intent("a").digest(), at(20))
            .await,
        Ok(ClaimVerdict::Claimed(key.clone()))
    );
    assert_eq!(
        store
            .check_and_claim(a.clone(), intent("a").digest(), at(20))
            .await,
        Ok(ClaimVerdict::AlreadyClaimed)
    );
    store
        .complete(
            key.clone(),
            EffectOutcome::Committed {
                receipt: json!({"ok": 1}),
            },
        )
        .await
        .unwrap();
    drop(store);

    let store = h.open(&path).await.unwrap();
    assert_eq!(
        store
            .check_and_claim(a.clone(), intent("a").digest(), at(20))
            .await,
        Ok(ClaimVerdict::AlreadyClaimed)
    );
    assert_eq!(
        store.record(a).await.unwrap().unwrap().state,
        ApprovalState::Claimed(approve)
    );
    assert_eq!(
        store.state(key).await,
        Ok(Some(ClaimState::Completed {
            outcome: EffectOutcome::Committed {
                receipt: json!({"ok": 1})
            }
        }))
    );
    // The next prepared approval continues the sequence.
    assert_eq!(
        store.prepare(request("b")).await,
        Ok(ApprovalId("approval-2".into()))
    );
}

/// Contract test.
pub async fn a_suspended_run_saved_before_reopening_is_loaded_after<H: Harness>(h: &H) {
    let path = h.fresh("reopen-run");
    let run = suspended_run("run-7", "approval-1");
    let store = h.open(&path).await.unwrap();
    store.save_suspended(run.clone()).await.unwrap();
    drop(store);
    let store = h.open(&path).await.unwrap();
    assert_eq!(
        store.suspended_run_ids().await,
        Ok(vec![RunId::new("run-7")])
    );
    assert_eq!(
        store.load_suspended(RunId::new("run-7")).await,
        Ok(Some(run.clone()))
    );
    assert_eq!(store.load_suspended(RunId::new("run-8")).await, Ok(None));
    // Saving again replaces; removing is durable too.
    let mut newer = run.clone();
    newer.turns_used = 2;
    store.save_suspended(newer.clone()).await.unwrap();
    assert_eq!(
        store.load_suspended(RunId::new("run-7")).await,
        Ok(Some(newer))
    );
    store.remove_suspended(RunId::new("run-7")).await.unwrap();
    drop(store);
    let store = h.open(&path).await.unwrap();
    assert_eq!(store.load_suspended(RunId::new("run-7")).await, Ok(None));
    assert_eq!(store.suspended_run_ids().await, Ok(vec![]));
}

fn schema(v: Value) -> CompiledSchema {
    CompiledSchema::compile(&v).unwrap()
}

/// The checkpoint tool: a confirm-policy write that counts its dispatches.
fn write_tool(dispatched: Arc<AtomicUsize>) -> ToolRegistration {
    ToolRegistration::builder("update_document")
        .description("Update a document")
        .input_schema(schema(
            json!({"type": "object", "required": ["id", "text"], "additionalProperties": false,
            "properties": {"id": {"type": "string"}, "text": {"type": "string"}}}),
        ))
        .confirm(
            "Update document",
            Risk::Write,
            ApprovalBinding {
                binding_id: "document-service".into(),
                binding_revision: "host-config-1".into(),
                scope_id: "sandbox-documents".into(),
                scope_revision: "scope-1".into(),
            },
        )
        .scope(ScopeCheck::check(|args, _| {
            if args["id"] == "d1" {
                ScopeDecision::Allow
            } else {
                ScopeDecision::Deny
            }
        }))
        .concurrency(Concurrency::Exclusive)
        .handler(move |args: Value, _ctx| {
            let dispatched = Arc::clone(&dispatched);
            async move {
                dispatched.fetch_add(1, Ordering::SeqCst);
                Ok(json!({"updated": args["id"]}))
            }
        })
        .build()
        .unwrap()
}

/// A host process: an agent over the store at `path`, with a scripted model.
async fn host<H: Harness>(
    h: &H,
    path: &str,
    script: Vec<ModelResponse>,
    dispatched: &Arc<AtomicUsize>,
) -> (Agent, H::Store, Arc<ScriptedModel>) {
    let store = h.open(path).await.unwrap();
    let catalog = Arc::new(Catalog::new(vec![write_tool(Arc::clone(dispatched))]).unwrap());
    let model = Arc::new(ScriptedModel::new("scripted", script));
    let agent = Agent::builder("writer", model.clone(), catalog)
        .instructions("update when asked")
        .approval(Arc::new(store.clone()))
        .run_store(Arc::new(store.clone()))
        .tool_checkpoint_names(["update_document"])
        .build()
        .unwrap();
    (agent, store, model)
}

fn run_request(run: &str) -> RunRequest {
    RunRequest {
        run_id: RunId::new(run),
        root_run_id: None,
        input: "update d1".into(),
        lease: Lease::unbounded(),
    }
}

fn now_decision(verdict: Verdict) -> Decision {
    Decision {
        verdict,
        approver: "alice".into(),
        decided_at: SystemTime::now(),
        expires_at: None,
        note: None,
    }
}

/// Contract test.
pub async fn the_agent_suspends_on_one_store_and_resumes_on_the_reopened_one_dispatching_once<
    H: Harness,
>(
    h: &H,
) {
    let path = h.fresh("agent");
    let dispatched = Arc::new(AtomicUsize::new(0));
    let args = json!({"id": "d1", "text": "hello"});

    // Host A: the run reaches the checkpoint and suspends.
    let (agent_a, store_a, _) = host(
        h,
        &path,
        vec![ScriptedModel::calls(&[(
            "w1",
            "update_document",
            args.clone(),
        )])],
        &dispatched,
    )
    .await;
    let outcome = agent_a.run(run_request("run-1")).await;
    let RunOutcome::Suspended {
        approval_id,
        intent_digest,
    } = outcome.clone()
    else {
        panic!("not suspended: {outcome:?}")
    };
    assert_eq!(approval_id, ApprovalId("approval-1".into()));
    assert_eq!(dispatched.load(Ordering::SeqCst), 0);
    drop(agent_a);
    drop(store_a);

    // Host B on the same file: the run waits, then the decision is recorded on B.
    let (agent_b, store_b, model_b) =
        host(h, &path, vec![ScriptedModel::text("updated")], &dispatched).await;
    assert_eq!(
        store_b.suspended_run_ids().await,
        Ok(vec![RunId::new("run-1")])
    );
    let record = store_b.record(approval_id.clone()).await.unwrap().unwrap();
    assert_eq!(record.intent_digest, intent_digest);
    assert_eq!(record.state, ApprovalState::Prepared);
    assert_eq!(
        agent_b
            .resume(RunId::new("run-1"), Lease::unbounded())
            .await,
        outcome
    );
    assert_eq!(dispatched.load(Ordering::SeqCst), 0);
    store_b
        .decide(approval_id.clone(), now_decision(Verdict::Approve))
        .await
        .unwrap();
    assert_eq!(
        agent_b
            .resume(RunId::new("run-1"), Lease::unbounded())
            .await,
        RunOutcome::Completed {
            text: "updated".into()
        }
    );
    assert_eq!(dispatched.load(Ordering::SeqCst), 1);
    let key = IdempotencyKey(intent_digest.to_string());
    let committed = ClaimState::Completed {
        outcome: EffectOutcome::Committed {
            receipt: json!({"updated": "d1"}),
        },
    };
    assert_eq!(
        store_b.state(key.clone()).await,
        Ok(Some(committed.clone()))
    );
    let last = model_b.transcripts().pop().unwrap();
    assert_eq!(
        last.last(),
        Some(&Message::Tool {
            call_id: "w1".into(),
            name: "update_document".into(),
            result: ToolMessage::Ok {
                value: json!({"updated": "d1"})
            }
        })
    );
    // Resuming again never dispatches again.
    assert_eq!(
        agent_b
            .resume(RunId::new("run-1"), Lease::unbounded())
            .await,
        RunOutcome::Failed {
            code: ErrorCode::RUN_NOT_SUSPENDED
        }
    );
    drop(agent_b);
    drop(store_b);

    // Host C after another restart: nothing to resume, nothing claimable.
    let (agent_c, store_c, _) =
        host(h, &path, vec![ScriptedModel::text("again")], &dispatched).await;
    assert_eq!(
        agent_c
            .resume(RunId::new("run-1"), Lease::unbounded())
            .await,
        RunOutcome::Failed {
            code: ErrorCode::RUN_NOT_SUSPENDED
        }
    );
    assert_eq!(
        store_c
            .check_and_claim(approval_id, intent_digest, SystemTime::now())
            .await,
        Ok(ClaimVerdict::AlreadyClaimed)
    );
    assert_eq!(store_c.state(key).await, Ok(Some(committed)));
    assert_eq!(dispatched.load(Ordering::SeqCst), 1);
}

/// Contract test.
pub async fn a_claim_left_without_outcome_by_a_dead_host_is_never_dispatched_and_becomes_unknown<
    H: Harness,
>(
    h: &H,
) {
    let path = h.fresh("agent-crash");
    let dispatched = Arc::new(AtomicUsize::new(0));
    let (agent_a, store_a, _) = host(
        h,
        &path,
        vec![ScriptedModel::calls(&[(
            "w1",
            "update_document",
            json!({"id": "d1", "text": "x"}),
        )])],
        &dispatched,
    )
    .await;
    let RunOutcome::Suspended {
        approval_id,
        intent_digest,
    } = agent_a.run(run_request("run-2")).await
    else {
        panic!("not suspended")
    };
    store_a
        .decide(approval_id.clone(), now_decision(Verdict::Approve))
        .await
        .unwrap();
    // Host A claims, exactly as `Agent::resume` does, and dies before dispatching or recording.
    let key = IdempotencyKey(intent_digest.to_string());
    assert_eq!(
        store_a
            .check_and_claim(approval_id, intent_digest, SystemTime::now())
            .await,
        Ok(ClaimVerdict::Claimed(key.clone()))
    );
    drop(agent_a);
    drop(store_a);

    let (agent_b, store_b, model_b) = host(
        h,
        &path,
        vec![ScriptedModel::text("not again")],
        &dispatched,
    )
    .await;
    let report = store_b
        .reconcile_interrupted_claims(SystemTime::now())
        .await
        .unwrap();
    assert_eq!(report.interrupted, vec![key.clone()]);
    assert_eq!(
        store_b.state(key).await,
        Ok(Some(ClaimState::Completed {
            outcome: EffectOutcome::Unknown {
                reason: ErrorCode::new(INTERRUPTED).unwrap()
            }
        }))
    );
    assert_eq!(
        agent_b
            .resume(RunId::new("run-2"), Lease::unbounded())
            .await,
        RunOutcome::Completed {
            text: "not again".into()
        }
    );
    assert_eq!(dispatched.load(Ordering::SeqCst), 0);
    let last = model_b.transcripts().pop().unwrap();
    assert_eq!(
        last.last(),
        Some(&Message::Tool {
            call_id: "w1".into(),
            name: "update_document".into(),
            result: ToolMessage::Error {
                code: ErrorCode::APPROVAL_ALREADY_CLAIMED
            }
        })
    );
}
