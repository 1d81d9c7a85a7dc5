//! Approval workflows: a quorum of votes counted in the claim's transaction (one vote per voter,
//! any deny closes, racing voters on two instances decide once), escalation recorded once for a
//! fleet, and the denial of an undecided approval at its expiry.

use crate::{intent, Harness};
use purra_core::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

fn request_of(args: &str, labels: &[(&str, &str)], ttl: Duration) -> ApprovalRequest {
    let mut i = intent(args);
    i.run_id = RunId::new(format!("workflow-run-{args}"));
    let mut all = BTreeMap::from([(PRINCIPAL_LABEL.to_owned(), "carol".to_owned())]);
    for (k, v) in labels {
        all.insert((*k).to_owned(), (*v).to_owned());
    }
    ApprovalRequest {
        intent: i,
        arguments: json!(args),
        binding: crate::binding(),
        requested_by: "carol".into(),
        requested_at: SystemTime::now(),
        expires_at: Some(SystemTime::now() + ttl),
        labels: all,
    }
}

fn vote(verdict: Verdict, who: &str) -> Decision {
    let now = SystemTime::now();
    Decision {
        verdict,
        approver: DecisionPath::Cli.approver(who),
        decided_at: now,
        expires_at: Some(now + Duration::from_secs(600)),
        note: Some(format!("{who} looked")),
    }
}

fn current(args: &str) -> JsonIdentity {
    let mut i = intent(args);
    i.run_id = RunId::new(format!("workflow-run-{args}"));
    i.digest()
}

async fn events<S: WebhookOutbox>(store: &S, t: WebhookEventType) -> Vec<Value> {
    store
        .webhook_deliveries(WebhookQuery::all())
        .await
        .unwrap()
        .into_iter()
        .filter(|d| d.event_type == t)
        .map(|d| serde_json::from_str::<Value>(&d.payload).unwrap()["data"].clone())
        .collect()
}

/// 2 votes required: one approving vote leaves the approval pending and the claim refuses it
/// (`Pending`, counted in the claim's transaction); the same voter by another path cannot vote
/// again; the second voter's approval decides it and the claim succeeds once. Every vote is
/// recorded and audited, the first with `approval.voted` (1 of 2). A deny by either voter
/// closes another approval at once.
pub async fn a_claim_needs_the_quorum_and_a_deny_closes<H: Harness>(h: &H) {
    let path = h.fresh("quorum");
    let store = h.open(&path).await.unwrap();
    store
        .set_webhook_endpoints(vec![WebhookEndpoint {
            name: "ops".into(),
            events: WebhookEventType::ALL.to_vec(),
        }])
        .await
        .unwrap();
    let two = [(VOTES_REQUIRED_LABEL, "2"), (VOTES_FROM_LABEL, "group:sre")];
    let ttl = Duration::from_secs(600);
    let a = store.prepare(request_of("q1", &two, ttl)).await.unwrap();
    store
        .decide(a.clone(), vote(Verdict::Approve, "alice"))
        .await
        .unwrap();
    let v = store.approval(a.clone()).await.unwrap().unwrap();
    assert_eq!(v.state, ApprovalState::Prepared);
    assert_eq!(
        store
            .check_and_claim(a.clone(), current("q1"), SystemTime::now())
            .await,
        Ok(ClaimVerdict::Pending)
    );
    let mut again = vote(Verdict::Approve, "alice");
    again.approver = DecisionPath::Page.approver("alice");
    assert_eq!(
        store.decide(a.clone(), again).await,
        Err(StoreError::Conflict("already voted"))
    );
    let voted = events(&store, WebhookEventType::ApprovalVoted).await;
    assert_eq!(voted.len(), 1);
    assert_eq!(
        (
            &voted[0]["approval"],
            &voted[0]["votes"],
            &voted[0]["required"]
        ),
        (&json!(a.0), &json!(1), &json!(2))
    );
    assert_eq!(voted[0]["approver"], json!("alice (cli)"));
    store
        .decide(a.clone(), vote(Verdict::Approve, "bob"))
        .await
        .unwrap();
    let v = store.approval(a.clone()).await.unwrap().unwrap();
    assert_eq!(v.status(), ApprovalStatus::Approved);
    let votes = store.votes(a.clone()).await.unwrap();
    let who: Vec<(&str, Verdict)> = votes
        .iter()
        .map(|v| (v.voter.as_str(), v.verdict))
        .collect();
    assert_eq!(
        who,
        [("alice", Verdict::Approve), ("bob", Verdict::Approve)]
    );
    assert_eq!(votes[0].note.as_deref(), Some("alice looked"));
    let key = IdempotencyKey(current("q1").to_string());
    assert_eq!(
        store
            .check_and_claim(a.clone(), current("q1"), SystemTime::now())
            .await,
        Ok(ClaimVerdict::Claimed(key))
    );
    assert_eq!(
        store
            .check_and_claim(a.clone(), current("q1"), SystemTime::now())
            .await,
        Ok(ClaimVerdict::AlreadyClaimed)
    );
    let trail: Vec<String> = store
        .approval_audit(a.clone())
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.event)
        .collect();
    assert_eq!(
        trail,
        [
            "prepared",
            "voted",
            "voted",
            "decided",
            "claimed",
            "claim_refused"
        ],
        "{trail:?}"
    );
    // Only the vote that left it pending is `approval.voted`; the one that decided is
    // `approval.decided`.
    assert_eq!(
        events(&store, WebhookEventType::ApprovalVoted).await.len(),
        1
    );

    // A deny by either closes it, after one approval or before any.
    for (n, first) in [(2, Some("alice")), (3, None)] {
        let args = format!("q{n}");
        let b = store.prepare(request_of(&args, &two, ttl)).await.unwrap();
        if let Some(first) = first {
            store
                .decide(b.clone(), vote(Verdict::Approve, first))
                .await
                .unwrap();
        }
        store
            .decide(b.clone(), vote(Verdict::Deny, "bob"))
            .await
            .unwrap();
        let v = store.approval(b.clone()).await.unwrap().unwrap();
        assert_eq!(v.status(), ApprovalStatus::Denied, "{args}");
        assert_eq!(
            store
                .decide(b.clone(), vote(Verdict::Approve, "dave"))
                .await,
            Err(StoreError::Conflict("already decided"))
        );
        assert_eq!(
            store
                .check_and_claim(b, current(&args), SystemTime::now())
                .await,
            Ok(ClaimVerdict::Denied)
        );
    }
}

/// Two instances race 6 voters on one approval needing 3: it is decided once, by the third
/// approving vote; every vote after it is refused as already decided; the claim succeeds once.
pub async fn racing_voters_on_two_instances_decide_once<H: Harness>(h: &H) {
    let path = h.fresh("quorum-race");
    let one = h.open(&path).await.unwrap();
    let two = h.open(&path).await.unwrap();
    let three = [(VOTES_REQUIRED_LABEL, "3")];
    let a = one
        .prepare(request_of("race", &three, Duration::from_secs(600)))
        .await
        .unwrap();
    let mut tasks = tokio::task::JoinSet::new();
    for n in 0..6 {
        let store = if n % 2 == 0 { one.clone() } else { two.clone() };
        let a = a.clone();
        tasks.spawn(async move {
            store
                .decide(a, vote(Verdict::Approve, &format!("voter-{n}")))
                .await
        });
    }
    let (mut ok, mut late) = (0, 0);
    while let Some(r) = tasks.join_next().await {
        match r.unwrap() {
            Ok(()) => ok += 1,
            Err(StoreError::Conflict("already decided")) => late += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!((ok, late), (3, 3));
    assert_eq!(one.votes(a.clone()).await.unwrap().len(), 3);
    let v = two.approval(a.clone()).await.unwrap().unwrap();
    assert_eq!(v.status(), ApprovalStatus::Approved);
    assert!(matches!(
        two.check_and_claim(a, current("race"), SystemTime::now())
            .await,
        Ok(ClaimVerdict::Claimed(_))
    ));
}

/// Escalation is marked once whichever instance sweeps (`approval.escalated` recorded once);
/// an approval whose request says `on_expiry = "deny"` is denied at its expiry by the expiry,
/// with the reason, `approval.expired` and a claim that answers `Denied`; one without the rule
/// stays pending (expired undecided).
pub async fn escalation_is_recorded_once_and_on_expiry_deny_closes<H: Harness>(h: &H) {
    let path = h.fresh("escalate");
    let one = h.open(&path).await.unwrap();
    let two = h.open(&path).await.unwrap();
    one.set_webhook_endpoints(vec![WebhookEndpoint {
        name: "ops".into(),
        events: WebhookEventType::ALL.to_vec(),
    }])
    .await
    .unwrap();
    let rules = [
        (VOTES_FROM_LABEL, "group:sre"),
        (ESCALATE_AFTER_LABEL, "0"),
        (ESCALATE_TO_LABEL, "group:leads"),
        (ON_EXPIRY_LABEL, "deny"),
    ];
    let ttl = Duration::from_secs(2);
    let a = one.prepare(request_of("esc", &rules, ttl)).await.unwrap();
    let plain = one
        .prepare(request_of("plain", &[(ESCALATE_AFTER_LABEL, "0")], ttl))
        .await
        .unwrap();
    let now = SystemTime::now();
    let (x, y) = tokio::join!(one.escalate_due(now), two.escalate_due(now));
    let mut marked = [x.unwrap(), y.unwrap()].concat();
    marked.sort();
    assert_eq!(marked, std::slice::from_ref(&a));
    assert_eq!(one.escalate_due(now).await, Ok(vec![]));
    let escalated = events(&one, WebhookEventType::ApprovalEscalated).await;
    assert_eq!(escalated.len(), 1);
    assert_eq!(escalated[0]["escalateTo"], json!(["group:leads"]));
    // Nothing is denied before the expiry.
    assert_eq!(one.expire_due(now).await, Ok(vec![]));
    let later = now + Duration::from_secs(3);
    let (x, y) = tokio::join!(one.expire_due(later), two.expire_due(later));
    let denied = [x.unwrap(), y.unwrap()].concat();
    assert_eq!(denied, std::slice::from_ref(&a));
    let v = two.approval(a.clone()).await.unwrap().unwrap();
    let ApprovalState::Decided(d) = &v.state else {
        panic!("{:?}", v.state)
    };
    assert_eq!(
        (d.verdict, d.approver.as_str(), d.note.as_deref()),
        (Verdict::Deny, EXPIRY_APPROVER, Some(EXPIRY_NOTE))
    );
    let expired = events(&one, WebhookEventType::ApprovalExpired).await;
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0]["approval"], json!(a.0));
    assert_eq!(
        one.check_and_claim(a, current("esc"), later).await,
        Ok(ClaimVerdict::Denied)
    );
    let p = one.approval(plain).await.unwrap().unwrap();
    assert_eq!(p.state, ApprovalState::Prepared);
}
