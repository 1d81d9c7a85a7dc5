//! The webhook outbox: nothing recorded without a registered endpoint; each change's event
//! recorded for each subscribed endpoint in the change's own transaction (a refused change records
//! none), also when another instance makes it; claims under a lease, a retry keeping the
//! `webhook-id`, a lapsed lease claimed again by another instance, results only under the current
//! claim, given-up deliveries kept until an operator retries them, endpoints retired visibly,
//! concurrent deliverers never claiming one delivery twice.

use crate::*;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use WebhookEventType::{ApprovalDecided, ApprovalPending, EffectUnknown};

/// How long a test waits for a lease to lapse or an instance to see a commit.
const PATIENCE: Duration = Duration::from_secs(20);

fn endpoint(name: &str, events: &[WebhookEventType]) -> WebhookEndpoint {
    WebhookEndpoint {
        name: name.into(),
        events: events.to_vec(),
    }
}

/// Every undelivered delivery, oldest first.
async fn all<S: WebhookOutbox>(store: &S) -> Vec<WebhookDeliveryView> {
    store.webhook_deliveries(WebhookQuery::all()).await.unwrap()
}

/// A delivery's payload, parsed.
fn payload(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

/// The (endpoint, type, approval) of each delivery, oldest first.
fn summary(views: &[WebhookDeliveryView]) -> Vec<(String, &'static str, Value)> {
    views
        .iter()
        .map(|v| {
            (
                v.endpoint.clone(),
                v.event_type.as_str(),
                payload(&v.payload)["data"]["approval"].clone(),
            )
        })
        .collect()
}

/// Contract test.
pub async fn no_event_is_recorded_without_a_registered_endpoint<H: Harness>(h: &H) {
    let store = h.open(&h.fresh("wh-none")).await.unwrap();
    assert_eq!(store.webhook_endpoints().await, Ok(vec![]));
    let a = store.prepare(request("a")).await.unwrap();
    store
        .decide(a.clone(), decision(Verdict::Approve, None))
        .await
        .unwrap();
    let ClaimVerdict::Claimed(key) = store
        .check_and_claim(a, intent("a").digest(), at(20))
        .await
        .unwrap()
    else {
        panic!("not claimed")
    };
    store
        .complete(key, EffectOutcome::Committed { receipt: json!({}) })
        .await
        .unwrap();
    assert_eq!(all(&store).await, vec![]);
    assert_eq!(store.next_webhook_due("ops".into()).await, Ok(None));
    assert_eq!(
        store
            .claim_webhook("ops".into(), Duration::from_secs(60))
            .await,
        Ok(None)
    );
}

/// Contract test.
pub async fn each_change_records_its_event_for_each_subscribed_endpoint<H: Harness>(h: &H) {
    let store = h.open(&h.fresh("wh-each")).await.unwrap();
    store
        .set_webhook_endpoints(vec![
            endpoint("ops", &WebhookEventType::ALL),
            endpoint("chat", &[ApprovalDecided]),
        ])
        .await
        .unwrap();
    assert_eq!(
        store.webhook_endpoints().await.unwrap(),
        vec![
            endpoint("chat", &[ApprovalDecided]),
            endpoint("ops", &WebhookEventType::ALL)
        ]
    );
    let mut asked = request("a");
    asked.labels.insert(PRINCIPAL_LABEL.into(), "local".into());
    asked.expires_at = Some(at(1000));
    let a = store.prepare(asked.clone()).await.unwrap();
    let approve = Decision {
        note: Some("once".into()),
        ..decision(Verdict::Approve, Some(at(500)))
    };
    store.decide(a.clone(), approve).await.unwrap();
    let ClaimVerdict::Claimed(key) = store
        .check_and_claim(a.clone(), intent("a").digest(), at(20))
        .await
        .unwrap()
    else {
        panic!("not claimed")
    };
    store
        .complete(
            key.clone(),
            EffectOutcome::Committed {
                receipt: json!({"secret": "receipt"}),
            },
        )
        .await
        .unwrap();
    // A denial; a claim completed not_started (no event) and one unknown, then reconciled.
    let b = store.prepare(request("b")).await.unwrap();
    store
        .decide(b.clone(), decision(Verdict::Deny, None))
        .await
        .unwrap();
    let c = store.prepare(request("c")).await.unwrap();
    store
        .decide(c.clone(), decision(Verdict::Approve, None))
        .await
        .unwrap();
    let ClaimVerdict::Claimed(kc) = store
        .check_and_claim(c.clone(), intent("c").digest(), at(20))
        .await
        .unwrap()
    else {
        panic!("not claimed")
    };
    store
        .complete(kc.clone(), unknown("mcp_timeout"))
        .await
        .unwrap();
    store
        .reconcile_unknown(
            kc.clone(),
            "the server's log shows it".into(),
            EffectOutcome::Committed { receipt: json!({}) },
        )
        .await
        .unwrap();
    let bare = IdempotencyKey("bare".into());
    store.claim(bare.clone()).await.unwrap();
    store
        .complete(bare.clone(), EffectOutcome::NotStarted)
        .await
        .unwrap();

    let views = all(&store).await;
    let id = |s: &str| json!(s);
    assert_eq!(
        summary(&views),
        vec![
            ("ops".to_owned(), "approval.pending", id("approval-1")),
            ("chat".into(), "approval.decided", id("approval-1")),
            ("ops".into(), "approval.decided", id("approval-1")),
            ("ops".into(), "effect.committed", id("approval-1")),
            ("ops".into(), "approval.pending", id("approval-2")),
            ("chat".into(), "approval.decided", id("approval-2")),
            ("ops".into(), "approval.decided", id("approval-2")),
            ("ops".into(), "approval.pending", id("approval-3")),
            ("chat".into(), "approval.decided", id("approval-3")),
            ("ops".into(), "approval.decided", id("approval-3")),
            ("ops".into(), "effect.unknown", id("approval-3")),
            ("ops".into(), "effect.committed", id("approval-3")),
            ("ops".into(), "effect.reconciled", id("approval-3")),
        ]
    );
    // One webhook-id per event: the same for every endpoint it is recorded for.
    assert_eq!(views[1].msg_id, views[2].msg_id);
    let ids: BTreeSet<&str> = views.iter().map(|v| v.msg_id.as_str()).collect();
    assert_eq!(ids.len(), 10);
    for v in &views {
        assert_eq!(v.state, WebhookState::Pending);
        assert_eq!(v.attempts, 0);
        assert_eq!((v.last_status, v.last_error.as_deref()), (None, None));
        assert!(v.next_at.is_some());
        let p = payload(&v.payload);
        assert_eq!(p["type"], v.event_type.as_str());
        assert!(p["timestamp"].as_str().unwrap().ends_with('Z'), "{p}");
        assert!(!v.payload.contains("receipt"), "{}", v.payload);
    }
    // The data, exactly.
    assert_eq!(
        payload(&views[0].payload)["data"],
        json!({
            "approval": "approval-1", "tool": "update", "run": "r1",
            "intentDigest": intent("a").digest().as_str(), "principal": "local",
            "requestedBy": "writer", "requestedAt": "1970-01-01T00:00:05.000000Z",
            "expiresAt": "1970-01-01T00:16:40.000000Z",
            "labels": {"principal": "local", "upstream": "documents"}
        })
    );
    assert_eq!(
        payload(&views[2].payload)["data"],
        json!({
            "approval": "approval-1", "tool": "update", "principal": "local",
            "verdict": "approve", "approver": "alice", "note": "once",
            "decidedAt": "1970-01-01T00:00:10.000000Z", "expiresAt": "1970-01-01T00:08:20.000000Z"
        })
    );
    assert_eq!(
        payload(&views[3].payload)["data"],
        json!({"approval": "approval-1", "tool": "update", "principal": "local",
               "key": key.0, "effect": "committed", "reconciled": false})
    );
    assert_eq!(payload(&views[6].payload)["data"]["verdict"], "deny");
    assert_eq!(payload(&views[6].payload)["data"]["principal"], Value::Null);
    assert_eq!(
        payload(&views[10].payload)["data"],
        json!({"approval": "approval-3", "tool": "update", "principal": null,
               "key": kc.0, "effect": "unknown", "reason": "mcp_timeout", "reconciled": false})
    );
    assert_eq!(payload(&views[11].payload)["data"]["reconciled"], true);
    // The reconciliation itself: who decided (here the store's owner) and the evidence.
    assert_eq!(
        payload(&views[12].payload)["data"],
        json!({"approval": "approval-3", "tool": "update", "principal": null, "key": kc.0,
               "outcome": "committed", "by": store.owner(), "evidence": "the server's log shows it"})
    );
    // Listings filter by endpoint and state and page by row.
    let chat = store
        .webhook_deliveries(WebhookQuery::all().endpoint("chat"))
        .await
        .unwrap();
    assert_eq!(chat.len(), 3);
    let page = store
        .webhook_deliveries(WebhookQuery::all().after(views[1].seq).limit(2))
        .await
        .unwrap();
    assert_eq!(
        page.iter().map(|v| v.seq).collect::<Vec<_>>(),
        [views[2].seq, views[3].seq]
    );
    assert_eq!(
        store
            .webhook_deliveries(WebhookQuery::all().state(WebhookState::Failed))
            .await,
        Ok(vec![])
    );
}

/// Contract test.
pub async fn a_refused_change_records_no_event<H: Harness>(h: &H) {
    let store = h.open(&h.fresh("wh-refused")).await.unwrap();
    store
        .set_webhook_endpoints(vec![endpoint("ops", &WebhookEventType::ALL)])
        .await
        .unwrap();
    // A request whose arguments are not the intent's: nothing prepared, nothing recorded.
    let mut wrong = request("a");
    wrong.arguments = json!("b");
    assert!(store.prepare(wrong).await.is_err());
    assert_eq!(all(&store).await, vec![]);
    let mut expiring = request("a");
    expiring.expires_at = Some(at(50));
    let a = store.prepare(expiring).await.unwrap();
    assert_eq!(all(&store).await.len(), 1);
    // A decision after the request expired, and a second decision: rolled back, no event.
    let mut late = decision(Verdict::Approve, None);
    late.decided_at = at(50);
    assert_eq!(
        store.decide(a.clone(), late).await,
        Err(StoreError::Conflict("the approval request expired"))
    );
    store
        .decide(a.clone(), decision(Verdict::Approve, None))
        .await
        .unwrap();
    assert_eq!(
        store.decide(a.clone(), decision(Verdict::Deny, None)).await,
        Err(StoreError::Conflict("already decided"))
    );
    assert_eq!(
        store
            .decide(
                ApprovalId("approval-9".into()),
                decision(Verdict::Deny, None)
            )
            .await,
        Err(StoreError::NotFound)
    );
    let ClaimVerdict::Claimed(key) = store
        .check_and_claim(a, intent("a").digest(), at(20))
        .await
        .unwrap()
    else {
        panic!("not claimed")
    };
    store
        .complete(key.clone(), unknown("mcp_timeout"))
        .await
        .unwrap();
    // A late outcome is refused (kept in the audit log as evidence): no second effect event.
    assert!(store
        .complete(key.clone(), EffectOutcome::Committed { receipt: json!({}) })
        .await
        .is_err());
    // A reconciliation without evidence is refused; one to not_started reports no effect, only
    // the operator's decision (`effect.reconciled`).
    assert!(store
        .reconcile_unknown(key.clone(), " ".into(), EffectOutcome::NotStarted)
        .await
        .is_err());
    store
        .reconcile_unknown(
            key,
            "never reached the server".into(),
            EffectOutcome::NotStarted,
        )
        .await
        .unwrap();
    assert_eq!(
        all(&store)
            .await
            .iter()
            .map(|v| v.event_type)
            .collect::<Vec<_>>(),
        [
            ApprovalPending,
            ApprovalDecided,
            EffectUnknown,
            WebhookEventType::EffectReconciled
        ]
    );
}

/// Contract test.
pub async fn a_decision_made_through_another_instance_records_its_event<H: Harness>(h: &H) {
    let path = h.fresh("wh-other");
    let gateway = h.open(&path).await.unwrap();
    gateway
        .set_webhook_endpoints(vec![endpoint("ops", &[ApprovalDecided, EffectUnknown])])
        .await
        .unwrap();
    let a = gateway.prepare(request("a")).await.unwrap();
    assert_eq!(all(&gateway).await, vec![]);
    // Another instance (a CLI, an approver page) that registered nothing decides.
    let cli = h.open(&path).await.unwrap();
    cli.decide(a.clone(), decision(Verdict::Approve, None))
        .await
        .unwrap();
    let ClaimVerdict::Claimed(key) = gateway
        .check_and_claim(a, intent("a").digest(), at(20))
        .await
        .unwrap()
    else {
        panic!("not claimed")
    };
    // A host killed mid-call, reconciled by another instance after its lease: effect.unknown.
    drop(gateway);
    let later = h.open(&path).await.unwrap();
    let report = later
        .reconcile_interrupted_claims(SystemTime::now())
        .await
        .unwrap();
    assert_eq!(report.interrupted, vec![key.clone()]);
    let d = later
        .claim_webhook("ops".into(), Duration::from_secs(60))
        .await
        .unwrap()
        .expect("the decision's delivery");
    assert_eq!(d.event_type, ApprovalDecided);
    assert_eq!(payload(&d.payload)["data"]["approver"], "alice");
    let u = later
        .claim_webhook("ops".into(), Duration::from_secs(60))
        .await
        .unwrap()
        .expect("the interruption's delivery");
    assert_eq!(
        payload(&u.payload)["data"],
        json!({"approval": "approval-1", "tool": "update", "principal": null, "key": key.0,
               "effect": "unknown", "reason": "interrupted", "reconciled": false})
    );
    drop(cli);
}

/// Contract test.
pub async fn a_claim_leases_the_delivery_and_a_retry_keeps_its_id<H: Harness>(h: &H) {
    let store = h.open(&h.fresh("wh-lease")).await.unwrap();
    store
        .set_webhook_endpoints(vec![endpoint("ops", &[ApprovalPending])])
        .await
        .unwrap();
    let started = std::time::Instant::now();
    store.prepare(request("a")).await.unwrap();
    let recorded = all(&store).await.remove(0);
    assert_eq!(
        store.next_webhook_due("ops".into()).await,
        Ok(Some(Duration::ZERO))
    );
    assert_eq!(store.next_webhook_due("chat".into()).await, Ok(None));
    assert_eq!(
        store
            .claim_webhook("chat".into(), Duration::from_secs(60))
            .await,
        Ok(None)
    );
    let first = store
        .claim_webhook("ops".into(), Duration::from_secs(60))
        .await
        .unwrap()
        .expect("due");
    assert_eq!(
        first.lease,
        WebhookLease {
            seq: recorded.seq,
            msg_id: recorded.msg_id.clone(),
            attempt: 1
        }
    );
    assert_eq!(
        (first.endpoint.as_str(), first.event_type, &first.payload),
        ("ops", ApprovalPending, &recorded.payload)
    );
    // Its age is counted from when it was recorded (the store's clock, this machine's).
    assert!(
        first.age <= started.elapsed() + Duration::from_secs(1),
        "{:?}",
        first.age
    );
    // Leased: nobody claims it again until the lease has passed.
    assert_eq!(
        store
            .claim_webhook("ops".into(), Duration::from_secs(60))
            .await,
        Ok(None)
    );
    let due = store.next_webhook_due("ops".into()).await.unwrap().unwrap();
    assert!(due <= Duration::from_secs(60), "{due:?}");
    let failure = WebhookFailure {
        status: Some(503),
        error: "HTTP 503".into(),
    };
    assert_eq!(
        store
            .webhook_failed(first.lease.clone(), failure.clone(), Some(Duration::ZERO))
            .await,
        Ok(true)
    );
    let shown = all(&store).await.remove(0);
    assert_eq!(
        (
            shown.attempts,
            shown.last_status,
            shown.last_error.as_deref()
        ),
        (1, Some(503), Some("HTTP 503"))
    );
    let second = store
        .claim_webhook("ops".into(), Duration::from_secs(60))
        .await
        .unwrap()
        .expect("due again");
    assert_eq!(second.lease.msg_id, recorded.msg_id);
    assert_eq!(second.lease.attempt, 2);
    assert_eq!(second.payload, recorded.payload);
    // The first claim's late failure changes nothing: the second claim is current.
    assert_eq!(
        store
            .webhook_failed(first.lease.clone(), failure.clone(), None)
            .await,
        Ok(false)
    );
    assert_eq!(all(&store).await[0].state, WebhookState::Pending);
    assert_eq!(
        store.webhook_delivered(second.lease.clone()).await,
        Ok(true)
    );
    assert_eq!(all(&store).await, vec![]);
    assert_eq!(
        store.webhook_delivered(second.lease.clone()).await,
        Ok(false)
    );
    assert_eq!(
        store.webhook_failed(second.lease, failure, None).await,
        Ok(false)
    );
    assert_eq!(store.next_webhook_due("ops".into()).await, Ok(None));
}

/// Contract test.
pub async fn a_lapsed_lease_is_claimed_again_by_another_instance<H: Harness>(h: &H) {
    let path = h.fresh("wh-lapse");
    let dying = h.open(&path).await.unwrap();
    dying
        .set_webhook_endpoints(vec![endpoint("ops", &WebhookEventType::ALL)])
        .await
        .unwrap();
    dying.prepare(request("a")).await.unwrap();
    let first = dying
        .claim_webhook("ops".into(), Duration::from_millis(300))
        .await
        .unwrap()
        .expect("due");
    // Another instance (the restarted deliverer) finds it once the lease has lapsed.
    let restarted = h.open(&path).await.unwrap();
    let started = std::time::Instant::now();
    let second = loop {
        if let Some(d) = restarted
            .claim_webhook("ops".into(), Duration::from_secs(60))
            .await
            .unwrap()
        {
            break d;
        }
        assert!(started.elapsed() < PATIENCE, "the lease never lapsed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        (second.lease.seq, &second.lease.msg_id, second.lease.attempt),
        (first.lease.seq, &first.lease.msg_id, 2)
    );
    assert_eq!(second.payload, first.payload);
    let failure = WebhookFailure {
        status: None,
        error: "connection refused".into(),
    };
    assert_eq!(
        dying
            .webhook_failed(first.lease.clone(), failure, Some(Duration::ZERO))
            .await,
        Ok(false)
    );
    // A late success under the lapsed claim is still a delivery.
    assert_eq!(dying.webhook_delivered(first.lease).await, Ok(true));
    assert_eq!(restarted.webhook_delivered(second.lease).await, Ok(false));
    assert_eq!(all(&restarted).await, vec![]);
}

/// Contract test.
pub async fn given_up_deliveries_stay_failed_until_an_operator_retries_them<H: Harness>(h: &H) {
    let store = h.open(&h.fresh("wh-failed")).await.unwrap();
    store
        .set_webhook_endpoints(vec![
            endpoint("ops", &[ApprovalPending]),
            endpoint("chat", &[ApprovalPending]),
        ])
        .await
        .unwrap();
    store.prepare(request("a")).await.unwrap();
    let d = store
        .claim_webhook("ops".into(), Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    let gone = WebhookFailure {
        status: Some(410),
        error: "HTTP 410 Gone".into(),
    };
    assert_eq!(
        store.webhook_failed(d.lease.clone(), gone, None).await,
        Ok(true)
    );
    let failed = store
        .webhook_deliveries(WebhookQuery::all().state(WebhookState::Failed))
        .await
        .unwrap();
    assert_eq!(failed.len(), 1);
    assert_eq!(
        (
            failed[0].endpoint.as_str(),
            failed[0].attempts,
            failed[0].last_status,
            failed[0].next_at
        ),
        ("ops", 1, Some(410), None)
    );
    assert_eq!(store.next_webhook_due("ops".into()).await, Ok(None));
    assert_eq!(
        store
            .claim_webhook("ops".into(), Duration::from_secs(60))
            .await,
        Ok(None)
    );
    assert_eq!(store.webhook_delivered(d.lease.clone()).await, Ok(false));
    // Another endpoint's retry leaves it alone; its own brings it back, attempts kept.
    assert_eq!(
        store.retry_failed_webhooks(Some("chat".into())).await,
        Ok(0)
    );
    assert_eq!(store.retry_failed_webhooks(None).await, Ok(1));
    let again = store
        .claim_webhook("ops".into(), Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (again.lease.msg_id, again.lease.attempt),
        (d.lease.msg_id, 2)
    );
}

/// Contract test.
pub async fn endpoints_no_longer_registered_give_up_their_pending_deliveries<H: Harness>(h: &H) {
    let store = h.open(&h.fresh("wh-retire")).await.unwrap();
    store
        .set_webhook_endpoints(vec![
            endpoint("ops", &[ApprovalPending]),
            endpoint("chat", &[ApprovalPending]),
        ])
        .await
        .unwrap();
    assert_eq!(
        store
            .set_webhook_endpoints(vec![
                endpoint("ops", &[]),
                endpoint("x", &[ApprovalPending])
            ])
            .await,
        Err(StoreError::Conflict(
            "a webhook endpoint subscribes to no event type"
        ))
    );
    assert_eq!(
        store
            .set_webhook_endpoints(vec![
                endpoint("ops", &[ApprovalPending]),
                endpoint("ops", &[ApprovalDecided])
            ])
            .await,
        Err(StoreError::Conflict("a webhook endpoint is named twice"))
    );
    // The refused registrations changed nothing.
    assert_eq!(store.webhook_endpoints().await.unwrap().len(), 2);
    store.prepare(request("a")).await.unwrap();
    store
        .set_webhook_endpoints(vec![endpoint("ops", &[ApprovalPending, ApprovalDecided])])
        .await
        .unwrap();
    let views = all(&store).await;
    let by_endpoint: BTreeMap<&str, (WebhookState, Option<&str>)> = views
        .iter()
        .map(|v| (v.endpoint.as_str(), (v.state, v.last_error.as_deref())))
        .collect();
    assert_eq!(
        by_endpoint,
        BTreeMap::from([
            (
                "chat",
                (
                    WebhookState::Failed,
                    Some(purra_core::webhook::ENDPOINT_REMOVED)
                )
            ),
            ("ops", (WebhookState::Pending, None)),
        ])
    );
    let b = store.prepare(request("b")).await.unwrap();
    store
        .decide(b, decision(Verdict::Deny, None))
        .await
        .unwrap();
    assert_eq!(
        summary(&all(&store).await)
            .into_iter()
            .map(|(e, t, _)| (e, t))
            .collect::<Vec<_>>(),
        [
            ("chat".to_owned(), "approval.pending"),
            ("ops".to_owned(), "approval.pending"),
            ("ops".to_owned(), "approval.pending"),
            ("ops".to_owned(), "approval.decided"),
        ]
    );
    // Retired (as a deliverer does on 410 Gone): its pending ones given up, nothing more recorded.
    assert_eq!(
        store
            .retire_webhook_endpoint("ops".into(), "HTTP 410 Gone".into())
            .await,
        Ok(3)
    );
    assert_eq!(store.webhook_endpoints().await, Ok(vec![]));
    store.prepare(request("c")).await.unwrap();
    let views = all(&store).await;
    assert_eq!(views.len(), 4);
    assert!(views.iter().all(|v| v.state == WebhookState::Failed));
}

/// Contract test.
pub async fn deliveries_waiting_for_a_retry_become_due_when_the_endpoint_answers_again<
    H: Harness,
>(
    h: &H,
) {
    let store = h.open(&h.fresh("wh-due")).await.unwrap();
    store
        .set_webhook_endpoints(vec![
            endpoint("ops", &[ApprovalPending]),
            endpoint("chat", &[ApprovalPending]),
        ])
        .await
        .unwrap();
    for args in ["a", "b", "c"] {
        store.prepare(request(args)).await.unwrap();
    }
    let refused = WebhookFailure {
        status: None,
        error: "connection refused".into(),
    };
    let hour = Duration::from_secs(3600);
    for _ in 0..2 {
        let d = store
            .claim_webhook("ops".into(), hour)
            .await
            .unwrap()
            .unwrap();
        store
            .webhook_failed(d.lease, refused.clone(), Some(hour))
            .await
            .unwrap();
    }
    // The third is being attempted (leased for an hour): left alone.
    let leased = store
        .claim_webhook("ops".into(), hour)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        store.claim_webhook("ops".into(), hour).await,
        Ok(None),
        "everything waits"
    );
    assert_eq!(store.webhooks_due_now("ops".into()).await, Ok(2));
    assert_eq!(store.webhooks_due_now("ops".into()).await, Ok(0));
    let mut again = BTreeSet::new();
    while let Some(d) = store.claim_webhook("ops".into(), hour).await.unwrap() {
        assert_eq!(d.lease.attempt, 2);
        again.insert(d.lease.seq);
    }
    assert_eq!(again.len(), 2);
    assert!(!again.contains(&leased.lease.seq));
    // The other endpoint's deliveries were never touched: all three due.
    let chat = store
        .webhook_deliveries(WebhookQuery::all().endpoint("chat"))
        .await
        .unwrap();
    assert_eq!(
        chat.iter().map(|v| v.attempts).collect::<Vec<_>>(),
        [0, 0, 0]
    );
}

/// Contract test.
pub async fn concurrent_deliverers_claim_each_delivery_once<H: Harness>(h: &H) {
    let path = h.fresh("wh-race");
    let first = Arc::new(h.open(&path).await.unwrap());
    first
        .set_webhook_endpoints(vec![endpoint("ops", &[ApprovalPending])])
        .await
        .unwrap();
    for n in 0..24 {
        first.prepare(request(&format!("r{n}"))).await.unwrap();
    }
    let second = Arc::new(h.open(&path).await.unwrap());
    let deliverer = |store: Arc<H::Store>| {
        tokio::spawn(async move {
            let mut claimed = Vec::new();
            while let Some(d) = store
                .claim_webhook("ops".into(), Duration::from_secs(600))
                .await
                .unwrap()
            {
                claimed.push(d.lease.msg_id);
                tokio::task::yield_now().await;
            }
            claimed
        })
    };
    let (a, b) = (deliverer(first.clone()), deliverer(second.clone()));
    let (a, b) = (a.await.unwrap(), b.await.unwrap());
    let mut every: Vec<String> = a.into_iter().chain(b).collect();
    assert_eq!(every.len(), 24);
    every.sort();
    every.dedup();
    assert_eq!(every.len(), 24, "a delivery was claimed twice");
}
