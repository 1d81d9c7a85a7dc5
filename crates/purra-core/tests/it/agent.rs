//! Agent loop tests with the scripted model: overlap of safe reads, ordering of exclusive calls, batch
//! admission before dispatch, checkpoints with suspension and resumption, and the durability guarantee.

use purra_core::*;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::binding;

fn schema(v: Value) -> CompiledSchema {
    CompiledSchema::compile(&v).unwrap()
}

fn query_schema() -> CompiledSchema {
    schema(
        json!({"type": "object", "required": ["q"], "additionalProperties": false, "properties": {"q": {"type": "string", "maxLength": 20}}}),
    )
}

#[derive(Default)]
struct Probe {
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    dispatched: AtomicUsize,
    events: Mutex<Vec<String>>,
    /// The idempotency key each dispatch of a write ran with.
    keys: Mutex<Vec<Option<IdempotencyKey>>>,
}

impl Probe {
    fn enter(&self, label: String) -> usize {
        let others = self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.max_in_flight.fetch_max(others + 1, Ordering::SeqCst);
        self.dispatched.fetch_add(1, Ordering::SeqCst);
        self.events
            .lock()
            .unwrap()
            .push(format!("start {label} others={others}"));
        others
    }
    fn leave(&self, label: String) {
        self.events.lock().unwrap().push(format!("end {label}"));
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

fn read_tool(name: &str, concurrency: Concurrency, probe: Arc<Probe>) -> ToolRegistration {
    ToolRegistration::builder(name)
        .description(format!("{name} things"))
        .input_schema(query_schema())
        .output_schema(schema(json!({"type": "object", "required": ["hits"], "properties": {"hits": {"type": "integer"}}})))
        .read(format!("Run {name}"))
        .scope(ScopeCheck::check(|args, ctx| {
            if args["q"] == "forbidden" {
                ScopeDecision::DenyWithReason(format!("{} may not ask that", ctx.agent))
            } else {
                ScopeDecision::Allow
            }
        }))
        .concurrency(concurrency)
        .handler(move |args: Value, _ctx| {
            let probe = Arc::clone(&probe);
            async move {
                let label = args["q"].as_str().unwrap_or("").to_owned();
                probe.enter(label.clone());
                tokio::time::sleep(Duration::from_millis(50)).await;
                probe.leave(label.clone());
                if label == "huge" {
                    return Ok(json!({"hits": 1, "blob": "x".repeat(10_000)}));
                }
                if label == "wrong" {
                    return Ok(json!({"hits": "many"}));
                }
                Ok(json!({"hits": label.len()}))
            }
        })
        .build()
        .unwrap()
}

fn write_tool(probe: Arc<Probe>, fail_with: Option<ToolError>) -> ToolRegistration {
    ToolRegistration::builder("update_document")
        .description("Update a document")
        .input_schema(schema(
            json!({"type": "object", "required": ["id", "text"], "additionalProperties": false,
            "properties": {"id": {"type": "string"}, "text": {"type": "string"}}}),
        ))
        .confirm("Update document", Risk::Write, binding())
        .scope(ScopeCheck::check(|args, _| {
            if args["id"] == "d1" {
                ScopeDecision::Allow
            } else {
                ScopeDecision::Deny
            }
        }))
        .concurrency(Concurrency::Exclusive)
        .handler(move |args: Value, ctx: RunContext| {
            let probe = Arc::clone(&probe);
            let fail_with = fail_with.clone();
            probe.keys.lock().unwrap().push(ctx.idempotency_key.clone());
            async move {
                probe.enter(args["id"].as_str().unwrap_or("").to_owned());
                probe.leave(String::new());
                match fail_with {
                    Some(e) => Err(e),
                    None => Ok(json!({"updated": args["id"]})),
                }
            }
        })
        .build()
        .unwrap()
}

/// A test-only wrapper that declares a store durable: the in-memory stores refuse to claim durability,
/// and the agent refuses confirm tools without it.
struct DeclaredDurable<T: ?Sized>(Arc<T>);

impl IdempotencyStore for DeclaredDurable<dyn IdempotencyStore> {
    fn is_durable(&self) -> bool {
        true
    }
    fn claim(&self, key: IdempotencyKey) -> BoxFuture<'_, Result<ClaimResult, StoreError>> {
        self.0.claim(key)
    }
    fn complete(
        &self,
        key: IdempotencyKey,
        outcome: EffectOutcome,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        self.0.complete(key, outcome)
    }
    fn state(&self, key: IdempotencyKey) -> BoxFuture<'_, Result<Option<ClaimState>, StoreError>> {
        self.0.state(key)
    }
}

impl ApprovalGateway for DeclaredDurable<InMemoryApprovalGateway> {
    fn is_durable(&self) -> bool {
        true
    }
    fn prepare(&self, request: ApprovalRequest) -> BoxFuture<'_, Result<ApprovalId, StoreError>> {
        self.0.prepare(request)
    }
    fn decide(&self, id: ApprovalId, decision: Decision) -> BoxFuture<'_, Result<(), StoreError>> {
        self.0.decide(id, decision)
    }
    fn record(&self, id: ApprovalId) -> BoxFuture<'_, Result<Option<ApprovalRecord>, StoreError>> {
        self.0.record(id)
    }
    fn check_and_claim(
        &self,
        id: ApprovalId,
        current: JsonIdentity,
        now: std::time::SystemTime,
    ) -> BoxFuture<'_, Result<ClaimVerdict, StoreError>> {
        self.0.check_and_claim(id, current, now)
    }
    fn receipts(&self) -> Arc<dyn IdempotencyStore> {
        Arc::new(DeclaredDurable(self.0.receipts()))
    }
    fn subscribe(&self) -> StoreEvents {
        self.0.subscribe()
    }
}

fn request(run: &str, input: &str) -> RunRequest {
    RunRequest {
        run_id: RunId::new(run),
        root_run_id: None,
        input: input.into(),
        lease: Lease::unbounded(),
    }
}

fn tool_results(transcript: &[Message]) -> Vec<(String, Result<Value, String>)> {
    transcript
        .iter()
        .filter_map(|m| match m {
            Message::Tool {
                call_id, result, ..
            } => Some((
                call_id.clone(),
                match result {
                    ToolMessage::Ok { value } => Ok(value.clone()),
                    ToolMessage::Error { code } => Err(code.to_string()),
                },
            )),
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn safe_reads_overlap_within_the_bound_and_exclusive_calls_run_alone_in_order() {
    let probe = Arc::new(Probe::default());
    let catalog = Catalog::new(vec![
        read_tool("search", Concurrency::Safe, Arc::clone(&probe)),
        read_tool("log", Concurrency::Exclusive, Arc::clone(&probe)),
    ])
    .unwrap();
    let model = Arc::new(ScriptedModel::new(
        "scripted",
        vec![
            ScriptedModel::calls(&[
                ("c1", "search", json!({"q": "s1"})),
                ("c2", "search", json!({"q": "s2"})),
                ("c3", "search", json!({"q": "s3"})),
                ("c4", "log", json!({"q": "l1"})),
                ("c5", "log", json!({"q": "l2"})),
                ("c6", "search", json!({"q": "s4"})),
            ]),
            ScriptedModel::text("done"),
        ],
    ));
    let limits = AgentLimits {
        schedule: ScheduleLimits {
            max_concurrency: 2,
            ..ScheduleLimits::default()
        },
        ..AgentLimits::default()
    };
    let agent = Agent::builder("reader", model.clone(), Arc::new(catalog))
        .limits(limits)
        .build()
        .unwrap();
    assert_eq!(
        agent.run(request("r1", "go")).await,
        RunOutcome::Completed {
            text: "done".into()
        }
    );
    // Overlap was observed, and never beyond the bound of 2.
    assert_eq!(probe.max_in_flight.load(Ordering::SeqCst), 2);
    let events = probe.events.lock().unwrap().clone();
    let position = |e: &str| {
        events
            .iter()
            .position(|x| x == e)
            .unwrap_or_else(|| panic!("{e} in {events:?}"))
    };
    // The exclusive calls started with nothing else in flight, in call order, each after the previous ended.
    assert!(position("start l1 others=0") > position("end s3"));
    assert!(position("start l2 others=0") > position("end l1"));
    assert!(position("start s4 others=0") > position("end l2"));
    // Results come back in call order.
    let results = tool_results(&model.transcripts()[1]);
    let ids: Vec<&str> = results.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["c1", "c2", "c3", "c4", "c5", "c6"]);
    assert_eq!(results[0].1, Ok(json!({"hits": 2})));
}

#[tokio::test(start_paused = true)]
async fn batch_admission_rejects_a_bad_call_before_any_dispatch() {
    let probe = Arc::new(Probe::default());
    let catalog = Catalog::new(vec![read_tool(
        "search",
        Concurrency::Safe,
        Arc::clone(&probe),
    )])
    .unwrap();
    let long = "y".repeat(100);
    let model = Arc::new(ScriptedModel::new(
        "scripted",
        vec![
            ScriptedModel::calls(&[
                ("good", "search", json!({"q": "fine"})),
                ("bad", "search", json!({"q": 5})),
                ("extra", "search", json!({"q": "a", "x": 1})),
                ("missing", "nope", json!({})),
                ("denied", "search", json!({"q": "forbidden"})),
                ("big", "search", json!({"q": long})),
            ]),
            ScriptedModel::calls(&[
                ("huge", "search", json!({"q": "huge"})),
                ("wrong", "search", json!({"q": "wrong"})),
            ]),
            ScriptedModel::text("gave up"),
        ],
    ));
    let limits = AgentLimits {
        admission: AdmissionLimits {
            max_argument_bytes: 64,
        },
        schedule: ScheduleLimits {
            max_concurrency: 4,
            max_result_bytes: 1024,
        },
        ..AgentLimits::default()
    };
    let agent = Agent::builder("reader", model.clone(), Arc::new(catalog))
        .limits(limits)
        .build()
        .unwrap();
    assert_eq!(
        agent.run(request("r2", "go")).await,
        RunOutcome::Completed {
            text: "gave up".into()
        }
    );
    let after_first = tool_results(&model.transcripts()[1]);
    assert_eq!(
        after_first,
        vec![
            ("good".to_owned(), Err("batch_not_dispatched".to_owned())),
            ("bad".to_owned(), Err("invalid_arguments".to_owned())),
            ("extra".to_owned(), Err("invalid_arguments".to_owned())),
            ("missing".to_owned(), Err("unknown_tool".to_owned())),
            ("denied".to_owned(), Err("scope_denied".to_owned())),
            ("big".to_owned(), Err("arguments_too_large".to_owned())),
        ]
    );
    // Only the second turn's two calls were dispatched; the valid call of the rejected turn never ran.
    assert_eq!(probe.dispatched.load(Ordering::SeqCst), 2);
    let after_second = tool_results(&model.transcripts()[2]);
    assert_eq!(
        after_second[6..],
        [
            ("huge".to_owned(), Err("tool_result_too_large".to_owned())),
            ("wrong".to_owned(), Err("tool_result_invalid".to_owned())),
        ]
    );
}

#[test]
fn admission_keeps_the_scope_reason_for_the_host_only() {
    let probe = Arc::new(Probe::default());
    let catalog = Catalog::new(vec![read_tool("search", Concurrency::Safe, probe)]).unwrap();
    let ctx = RunContext {
        run_id: RunId::new("r"),
        root_run_id: RunId::new("r"),
        agent: "reader".into(),
        lease: Lease::unbounded(),
        idempotency_key: None,
    };
    let calls = vec![ToolCall {
        id: "1".into(),
        name: "search".into(),
        arguments: json!({"q": "forbidden"}),
    }];
    match admit_batch(
        &catalog,
        &calls,
        &ctx,
        &Default::default(),
        &AdmissionLimits::default(),
    ) {
        Admission::Rejected(r) => assert_eq!(
            r,
            vec![Rejection {
                call_id: "1".into(),
                code: ErrorCode::SCOPE_DENIED,
                host_reason: Some("reader may not ask that".into())
            }]
        ),
        Admission::Admitted(_) => panic!("admitted a denied call"),
    }
}

struct WriteSetup {
    agent: Agent,
    model: Arc<ScriptedModel>,
    gateway: Arc<DeclaredDurable<InMemoryApprovalGateway>>,
    store: Arc<InMemoryRunStore>,
    probe: Arc<Probe>,
}

fn write_setup(script: Vec<ModelResponse>, fail_with: Option<ToolError>) -> WriteSetup {
    let probe = Arc::new(Probe::default());
    let catalog = Arc::new(Catalog::new(vec![write_tool(Arc::clone(&probe), fail_with)]).unwrap());
    let model = Arc::new(ScriptedModel::new("scripted", script));
    let gateway = Arc::new(DeclaredDurable(Arc::new(InMemoryApprovalGateway::new())));
    let store = Arc::new(InMemoryRunStore::new());
    let agent = Agent::builder("writer", model.clone(), catalog)
        .instructions("update when asked")
        .approval(gateway.clone())
        .run_store(store.clone())
        .tool_checkpoint_names(["update_document"])
        .build()
        .unwrap();
    WriteSetup {
        agent,
        model,
        gateway,
        store,
        probe,
    }
}

fn decision(verdict: Verdict) -> Decision {
    Decision {
        verdict,
        approver: "alice".into(),
        decided_at: std::time::SystemTime::now(),
        expires_at: None,
        note: None,
    }
}

#[tokio::test]
async fn a_checkpoint_suspends_and_resumes_after_approval_dispatching_once() {
    let args = json!({"id": "d1", "text": "hello"});
    let s = write_setup(
        vec![
            ScriptedModel::calls(&[("w1", "update_document", args.clone())]),
            ScriptedModel::text("updated"),
        ],
        None,
    );
    let outcome = s.agent.run(request("run-1", "update d1")).await;
    let tool = s.agent.catalog().get("update_document").unwrap();
    let call = ToolCall {
        id: "w1".into(),
        name: "update_document".into(),
        arguments: args.clone(),
    };
    let expected_intent = ApprovalIntent::new(
        tool,
        &call,
        RunId::new("run-1"),
        s.agent.preset_fingerprint().clone(),
    )
    .unwrap();
    let approval_id = ApprovalId("approval-1".into());
    assert_eq!(
        outcome,
        RunOutcome::Suspended {
            approval_id: approval_id.clone(),
            intent_digest: expected_intent.digest()
        }
    );
    assert_eq!(s.probe.dispatched.load(Ordering::SeqCst), 0);
    let record = s
        .gateway
        .record(approval_id.clone())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.intent, expected_intent);
    assert_eq!(record.state, ApprovalState::Prepared);
    // Before a decision the run stays suspended.
    assert_eq!(
        s.agent
            .resume(RunId::new("run-1"), Lease::unbounded())
            .await,
        outcome
    );
    assert_eq!(s.probe.dispatched.load(Ordering::SeqCst), 0);
    s.gateway
        .decide(approval_id.clone(), decision(Verdict::Approve))
        .await
        .unwrap();
    assert_eq!(
        s.agent
            .resume(RunId::new("run-1"), Lease::unbounded())
            .await,
        RunOutcome::Completed {
            text: "updated".into()
        }
    );
    assert_eq!(s.probe.dispatched.load(Ordering::SeqCst), 1);
    let key = IdempotencyKey(expected_intent.digest().to_string());
    // The dispatch ran with its claim: an upstream call carries `key.upstream()`.
    assert_eq!(*s.probe.keys.lock().unwrap(), vec![Some(key.clone())]);
    assert_eq!(
        s.gateway.receipts().state(key).await.unwrap(),
        Some(ClaimState::Completed {
            outcome: EffectOutcome::Committed {
                receipt: json!({"updated": "d1"})
            }
        })
    );
    let last = s.model.transcripts().pop().unwrap();
    assert_eq!(
        tool_results(&last),
        vec![("w1".to_owned(), Ok(json!({"updated": "d1"})))]
    );
    // Never dispatched twice: the run is gone, and the approval is claimed.
    assert_eq!(
        s.agent
            .resume(RunId::new("run-1"), Lease::unbounded())
            .await,
        RunOutcome::Failed {
            code: ErrorCode::RUN_NOT_SUSPENDED
        }
    );
    assert_eq!(
        s.gateway
            .check_and_claim(
                approval_id,
                expected_intent.digest(),
                std::time::SystemTime::now()
            )
            .await,
        Ok(ClaimVerdict::AlreadyClaimed)
    );
    assert_eq!(s.probe.dispatched.load(Ordering::SeqCst), 1);
    assert!(s
        .store
        .load_suspended(RunId::new("run-1"))
        .await
        .unwrap()
        .is_none());
}

#[tokio::test]
async fn a_denied_checkpoint_shows_the_model_a_denial_code() {
    let s = write_setup(
        vec![
            ScriptedModel::calls(&[("w1", "update_document", json!({"id": "d1", "text": "x"}))]),
            ScriptedModel::text("ok, not updated"),
        ],
        None,
    );
    let RunOutcome::Suspended { approval_id, .. } = s.agent.run(request("run-2", "update")).await
    else {
        panic!("not suspended")
    };
    s.gateway
        .decide(approval_id, decision(Verdict::Deny))
        .await
        .unwrap();
    assert_eq!(
        s.agent
            .resume(RunId::new("run-2"), Lease::unbounded())
            .await,
        RunOutcome::Completed {
            text: "ok, not updated".into()
        }
    );
    assert_eq!(s.probe.dispatched.load(Ordering::SeqCst), 0);
    let last = s.model.transcripts().pop().unwrap();
    assert_eq!(
        tool_results(&last),
        vec![("w1".to_owned(), Err("approval_denied".to_owned()))]
    );
}

#[tokio::test]
async fn an_unknown_effect_is_recorded_and_keeps_its_claim() {
    let s = write_setup(
        vec![
            ScriptedModel::calls(&[("w1", "update_document", json!({"id": "d1", "text": "x"}))]),
            ScriptedModel::text("unsure"),
        ],
        Some(ToolError::unknown(ErrorCode::new("mcp_timeout").unwrap())),
    );
    let RunOutcome::Suspended {
        approval_id,
        intent_digest,
    } = s.agent.run(request("run-3", "update")).await
    else {
        panic!("not suspended")
    };
    s.gateway
        .decide(approval_id, decision(Verdict::Approve))
        .await
        .unwrap();
    assert_eq!(
        s.agent
            .resume(RunId::new("run-3"), Lease::unbounded())
            .await,
        RunOutcome::Completed {
            text: "unsure".into()
        }
    );
    let key = IdempotencyKey(intent_digest.to_string());
    let unknown = ClaimState::Completed {
        outcome: EffectOutcome::Unknown {
            reason: ErrorCode::new("mcp_timeout").unwrap(),
        },
    };
    assert_eq!(
        s.gateway.receipts().state(key.clone()).await.unwrap(),
        Some(unknown.clone())
    );
    assert_eq!(
        s.gateway.receipts().claim(key).await.unwrap(),
        ClaimResult::Existing(unknown)
    );
    let last = s.model.transcripts().pop().unwrap();
    assert_eq!(
        tool_results(&last),
        vec![("w1".to_owned(), Err("mcp_timeout".to_owned()))]
    );
}

#[tokio::test]
async fn a_changed_preset_refuses_the_approved_call() {
    let s = write_setup(
        vec![ScriptedModel::calls(&[(
            "w1",
            "update_document",
            json!({"id": "d1", "text": "x"}),
        )])],
        None,
    );
    let RunOutcome::Suspended { approval_id, .. } = s.agent.run(request("run-4", "update")).await
    else {
        panic!("not suspended")
    };
    s.gateway
        .decide(approval_id, decision(Verdict::Approve))
        .await
        .unwrap();
    // Same stores, new instructions: a new preset fingerprint, so the approved intent no longer matches.
    let changed_model = Arc::new(ScriptedModel::new(
        "scripted",
        vec![ScriptedModel::text("refused")],
    ));
    let changed = Agent::builder(
        "writer",
        changed_model.clone(),
        Arc::clone(s.agent.catalog()),
    )
    .instructions("different instructions")
    .approval(s.gateway.clone())
    .run_store(s.store.clone())
    .tool_checkpoint_names(["update_document"])
    .build()
    .unwrap();
    assert_ne!(changed.preset_fingerprint(), s.agent.preset_fingerprint());
    assert_eq!(
        changed
            .resume(RunId::new("run-4"), Lease::unbounded())
            .await,
        RunOutcome::Completed {
            text: "refused".into()
        }
    );
    assert_eq!(s.probe.dispatched.load(Ordering::SeqCst), 0);
    let last = changed_model.transcripts().pop().unwrap();
    assert_eq!(
        tool_results(&last),
        vec![("w1".to_owned(), Err("approval_mismatch".to_owned()))]
    );
}

#[tokio::test]
async fn checkpoint_calls_must_be_alone_and_confirm_tools_need_a_checkpoint() {
    let s = write_setup(
        vec![
            ScriptedModel::calls(&[
                ("w1", "update_document", json!({"id": "d1", "text": "x"})),
                ("w2", "update_document", json!({"id": "d1", "text": "y"})),
            ]),
            ScriptedModel::text("stopped"),
        ],
        None,
    );
    assert_eq!(
        s.agent.run(request("run-5", "two writes")).await,
        RunOutcome::Completed {
            text: "stopped".into()
        }
    );
    let last = s.model.transcripts().pop().unwrap();
    assert_eq!(
        tool_results(&last),
        vec![
            ("w1".to_owned(), Err("checkpoint_not_alone".to_owned())),
            ("w2".to_owned(), Err("checkpoint_not_alone".to_owned()))
        ]
    );
    // Without checkpoint names the confirm tool is never dispatched directly.
    let probe = Arc::new(Probe::default());
    let model = Arc::new(ScriptedModel::new(
        "scripted",
        vec![
            ScriptedModel::calls(&[("w1", "update_document", json!({"id": "d1", "text": "x"}))]),
            ScriptedModel::text("no"),
        ],
    ));
    let agent = Agent::builder(
        "writer",
        model.clone(),
        Arc::new(Catalog::new(vec![write_tool(probe.clone(), None)]).unwrap()),
    )
    .approval(Arc::new(DeclaredDurable(Arc::new(
        InMemoryApprovalGateway::new(),
    ))))
    .build()
    .unwrap();
    assert_eq!(
        agent.run(request("run-6", "write")).await,
        RunOutcome::Completed { text: "no".into() }
    );
    assert_eq!(
        tool_results(&model.transcripts()[1]),
        vec![("w1".to_owned(), Err("approval_required".to_owned()))]
    );
    assert_eq!(probe.dispatched.load(Ordering::SeqCst), 0);
}

#[test]
fn confirm_tools_with_a_non_durable_gateway_are_refused_at_build() {
    let catalog =
        Arc::new(Catalog::new(vec![write_tool(Arc::new(Probe::default()), None)]).unwrap());
    let model: Arc<dyn Model> = Arc::new(ScriptedModel::new("scripted", vec![]));
    let err = Agent::builder("writer", model.clone(), Arc::clone(&catalog))
        .approval(Arc::new(InMemoryApprovalGateway::new()))
        .run_store(Arc::new(InMemoryRunStore::new()))
        .tool_checkpoint_names(["update_document"])
        .build()
        .unwrap_err();
    assert_eq!(err, AgentBuildError::ApprovalGatewayNotDurable);
    assert_eq!(err.code(), Some(ErrorCode::APPROVAL_GATEWAY_NOT_DURABLE));
    assert_eq!(
        Agent::builder("writer", model.clone(), Arc::clone(&catalog))
            .build()
            .unwrap_err(),
        AgentBuildError::ApprovalGatewayNotDurable
    );
    // A durable gateway without a run store cannot hold checkpoints.
    assert_eq!(
        Agent::builder("writer", model.clone(), Arc::clone(&catalog))
            .approval(Arc::new(DeclaredDurable(Arc::new(
                InMemoryApprovalGateway::new()
            ))))
            .tool_checkpoint_names(["update_document"])
            .build()
            .unwrap_err(),
        AgentBuildError::RunStoreRequired
    );
    // Read-only catalogs need no gateway; checkpoints must name confirm tools.
    let reads = Arc::new(
        Catalog::new(vec![read_tool(
            "search",
            Concurrency::Safe,
            Arc::new(Probe::default()),
        )])
        .unwrap(),
    );
    assert!(Agent::builder("reader", model.clone(), Arc::clone(&reads))
        .build()
        .is_ok());
    assert_eq!(
        Agent::builder("reader", model, reads)
            .run_store(Arc::new(InMemoryRunStore::new()))
            .tool_checkpoint_names(["search"])
            .build()
            .unwrap_err(),
        AgentBuildError::CheckpointNotConfirm("search".into())
    );
}

#[tokio::test]
async fn a_cancelled_lease_stops_the_run() {
    let catalog = Arc::new(Catalog::new(vec![]).unwrap());
    let model = Arc::new(ScriptedModel::new(
        "scripted",
        vec![ScriptedModel::text("never")],
    ));
    let agent = Agent::builder("reader", model.clone(), catalog)
        .build()
        .unwrap();
    let token = tokio_util::sync::CancellationToken::new();
    token.cancel();
    let mut req = request("run-7", "hi");
    req.lease = Lease::new(None, token);
    assert_eq!(
        agent.run(req).await,
        RunOutcome::Failed {
            code: ErrorCode::RUN_CANCELLED
        }
    );
    assert!(model.transcripts().is_empty());
}

#[tokio::test(start_paused = true)]
async fn panics_timeouts_and_cancellation_become_codes() {
    let tool = |name: &str| {
        ToolRegistration::builder(name)
            .description("d")
            .input_schema(schema(json!({"type": "object"})))
            .read("T")
            .scope(ScopeCheck::OptOut)
            .concurrency(Concurrency::Safe)
            .handler(|args: Value, _ctx| async move {
                match args["mode"].as_str() {
                    Some("panic") => panic!("handler bug"),
                    Some("slow") => {
                        tokio::time::sleep(Duration::from_secs(60)).await;
                        Ok(json!({}))
                    }
                    _ => Err(ToolError::not_started(
                        ErrorCode::new("mcp_invalid_arguments").unwrap(),
                    )),
                }
            })
            .build()
            .unwrap()
    };
    let catalog = Catalog::new(vec![tool("t")]).unwrap();
    let token = tokio_util::sync::CancellationToken::new();
    let ctx = RunContext {
        run_id: RunId::new("r"),
        root_run_id: RunId::new("root"),
        agent: "a".into(),
        lease: Lease::new(
            Some(tokio::time::Instant::now() + Duration::from_secs(5)),
            token.clone(),
        ),
        idempotency_key: None,
    };
    let calls: Vec<ToolCall> = ["panic", "slow", "fail"]
        .iter()
        .map(|m| ToolCall {
            id: (*m).into(),
            name: "t".into(),
            arguments: json!({"mode": m}),
        })
        .collect();
    let Admission::Admitted(admitted) = admit_batch(
        &catalog,
        &calls,
        &ctx,
        &Default::default(),
        &AdmissionLimits::default(),
    ) else {
        panic!("rejected")
    };
    let results = dispatch_batch(admitted, &ctx, ScheduleLimits::default()).await;
    let executions: Vec<Execution> = results.into_iter().map(|r| r.execution).collect();
    assert_eq!(
        executions,
        vec![
            Execution::Failed {
                code: ErrorCode::TOOL_PANICKED,
                effect: Effect::Unknown
            },
            Execution::Failed {
                code: ErrorCode::TOOL_TIMEOUT,
                effect: Effect::Unknown
            },
            Execution::Failed {
                code: ErrorCode::new("mcp_invalid_arguments").unwrap(),
                effect: Effect::NotStarted
            },
        ]
    );
    // A cancelled lease: nothing starts.
    token.cancel();
    let tool = Arc::clone(catalog.get("t").unwrap());
    assert_eq!(
        execute(
            tool,
            json!({"mode": "slow"}),
            ctx,
            ScheduleLimits::default()
        )
        .await,
        Execution::Failed {
            code: ErrorCode::RUN_CANCELLED,
            effect: Effect::NotStarted
        }
    );
}

/// A model that never answers.
struct SilentModel;

impl Model for SilentModel {
    fn id(&self) -> &str {
        "silent"
    }
    fn respond<'a>(
        &'a self,
        _request: ModelRequest<'a>,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(std::future::pending())
    }
}

#[tokio::test(start_paused = true)]
async fn the_lease_deadline_bounds_a_silent_model() {
    let agent = Agent::builder(
        "reader",
        Arc::new(SilentModel),
        Arc::new(Catalog::new(vec![]).unwrap()),
    )
    .build()
    .unwrap();
    let mut req = request("run-8", "hi");
    req.lease = Lease::new(
        Some(tokio::time::Instant::now() + Duration::from_secs(30)),
        tokio_util::sync::CancellationToken::new(),
    );
    assert_eq!(
        agent.run(req).await,
        RunOutcome::Failed {
            code: ErrorCode::LEASE_EXPIRED
        }
    );
}

#[tokio::test]
async fn execute_polls_the_handler_in_the_callers_task() {
    // No task of its own per call: the handler runs in the task that awaits `execute` (so a
    // call costs no spawn and no switch), and a cancelled lease drops it there.
    let tool = ToolRegistration::builder("where")
        .description("d")
        .input_schema(schema(json!({"type": "object"})))
        .read("T")
        .scope(ScopeCheck::OptOut)
        .concurrency(Concurrency::Safe)
        .handler(|_args: Value, _ctx| async move {
            Ok(json!({"task": tokio::task::try_id().map(|id| id.to_string())}))
        })
        .build()
        .unwrap();
    let ctx = RunContext {
        run_id: RunId::new("r"),
        root_run_id: RunId::new("root"),
        agent: "a".into(),
        lease: Lease::new(None, tokio_util::sync::CancellationToken::new()),
        idempotency_key: None,
    };
    let caller = tokio::spawn(async move {
        let here = tokio::task::id().to_string();
        let got = execute(Arc::new(tool), json!({}), ctx, ScheduleLimits::default()).await;
        (here, got)
    });
    let (here, got) = caller.await.unwrap();
    assert_eq!(got, Execution::Succeeded(json!({"task": here})));
}
