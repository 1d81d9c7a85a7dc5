//! The write cycle's merged transactions: a decision recorded with its claim
//! ([`ApprovalGateway::decide_and_claim`]) and a grant's use taken with its claim
//! ([`GrantStore::use_grant_and_claim`]), each one transaction: both or nothing, a refused
//! decision or an unusable grant writing nothing, and racing store instances deciding and
//! claiming each approval (each intent) exactly once.

use crate::{intent, Harness};
use purra_core::*;
use serde_json::json;
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

/// The request of carol's call of `update` with the JSON string `args`, accepting a decision for
/// `ttl` from now.
fn request_of(args: &str, ttl: Duration) -> ApprovalRequest {
    let mut i = intent(args);
    i.run_id = RunId::new(format!("cycle-run-{args}"));
    ApprovalRequest {
        intent: i,
        arguments: json!(args),
        binding: crate::binding(),
        requested_by: "carol".into(),
        requested_at: SystemTime::now(),
        expires_at: Some(SystemTime::now() + ttl),
        labels: BTreeMap::from([(PRINCIPAL_LABEL.to_owned(), "carol".to_owned())]),
    }
}

/// A decision by `who` now, approving for ten minutes (or denying).
fn by(verdict: Verdict, who: &str) -> Decision {
    let now = SystemTime::now();
    Decision {
        verdict,
        approver: DecisionPath::Elicitation.approver(who),
        decided_at: now,
        expires_at: (verdict == Verdict::Approve).then(|| now + Duration::from_secs(600)),
        note: None,
    }
}

async fn trail<S: OperatorStore>(store: &S, id: &ApprovalId) -> Vec<String> {
    store
        .approval_audit(id.clone())
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.event)
        .collect()
}

/// A decision and its claim commit together: approved, the approval is claimed with the
/// decision's approver and its key is in flight, audited `prepared`, `decided`, `claimed`; a
/// denial is recorded and answers `Denied` (nothing claimed); a digest that no longer matches
/// records the decision and refuses the claim in the same step; a decision the store refuses
/// (the request expired, or decided first) writes nothing. Two instances racing 12 approvals
/// with two deciders each: every approval is decided once and claimed once, by the decider
/// whose decision it records; the other is told `already decided`.
pub async fn a_decision_and_its_claim_commit_together_and_racing_instances_claim_once<
    H: Harness,
>(
    h: &H,
) {
    let path = h.fresh("decide-claim");
    let one = h.open(&path).await.unwrap();
    let two = h.open(&path).await.unwrap();
    let ttl = Duration::from_secs(600);

    // Approved: decided and claimed in one step.
    let req = request_of("a", ttl);
    let digest = req.intent.digest();
    let a = one.prepare(req).await.unwrap();
    let verdict = one
        .decide_and_claim(
            a.clone(),
            by(Verdict::Approve, "dora"),
            digest.clone(),
            SystemTime::now(),
        )
        .await
        .unwrap();
    assert_eq!(
        verdict,
        ClaimVerdict::Claimed(IdempotencyKey(digest.to_string()))
    );
    match one.record(a.clone()).await.unwrap().unwrap().state {
        ApprovalState::Claimed(d) => assert_eq!(d.approver, "dora (elicitation)"),
        other => panic!("not claimed: {other:?}"),
    }
    assert_eq!(
        one.receipts()
            .state(IdempotencyKey(digest.to_string()))
            .await
            .unwrap(),
        Some(ClaimState::InFlight)
    );
    assert_eq!(trail(&one, &a).await, ["prepared", "decided", "claimed"]);

    // Denied: recorded, nothing claimed.
    let req = request_of("d", ttl);
    let digest = req.intent.digest();
    let d = one.prepare(req).await.unwrap();
    let verdict = two
        .decide_and_claim(
            d.clone(),
            by(Verdict::Deny, "dora"),
            digest.clone(),
            SystemTime::now(),
        )
        .await
        .unwrap();
    assert_eq!(verdict, ClaimVerdict::Denied);
    assert!(matches!(
        one.record(d.clone()).await.unwrap().unwrap().state,
        ApprovalState::Decided(Decision {
            verdict: Verdict::Deny,
            ..
        })
    ));
    assert_eq!(
        one.receipts()
            .state(IdempotencyKey(digest.to_string()))
            .await
            .unwrap(),
        None
    );

    // A digest that no longer matches: the decision stands, the claim is refused with it.
    let m = one.prepare(request_of("m", ttl)).await.unwrap();
    let other = request_of("m-changed", ttl).intent.digest();
    let verdict = one
        .decide_and_claim(
            m.clone(),
            by(Verdict::Approve, "dora"),
            other,
            SystemTime::now(),
        )
        .await
        .unwrap();
    assert_eq!(verdict, ClaimVerdict::Mismatch);
    assert_eq!(trail(&one, &m).await, ["prepared", "decided", "refused"]);

    // Refused decisions write nothing: the request expired; decided first.
    let req = request_of("x", Duration::from_millis(1));
    let digest = req.intent.digest();
    let x = one.prepare(req).await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let late = one
        .decide_and_claim(
            x.clone(),
            by(Verdict::Approve, "dora"),
            digest.clone(),
            SystemTime::now(),
        )
        .await;
    assert_eq!(
        late,
        Err(StoreError::Conflict("the approval request expired"))
    );
    assert_eq!(trail(&one, &x).await, ["prepared"]);
    assert_eq!(
        one.record(x.clone()).await.unwrap().unwrap().state,
        ApprovalState::Prepared
    );
    assert_eq!(
        one.receipts()
            .state(IdempotencyKey(digest.to_string()))
            .await
            .unwrap(),
        None
    );
    let again = two
        .decide_and_claim(
            a.clone(),
            by(Verdict::Approve, "erin"),
            request_of("a", ttl).intent.digest(),
            SystemTime::now(),
        )
        .await;
    assert_eq!(again, Err(StoreError::Conflict("already decided")));
    assert_eq!(trail(&one, &a).await, ["prepared", "decided", "claimed"]);

    // Racing instances: each approval decided once and claimed once.
    let mut ids = Vec::new();
    for n in 0..12 {
        let req = request_of(&format!("race-{n}"), ttl);
        let digest = req.intent.digest();
        ids.push((one.prepare(req).await.unwrap(), digest));
    }
    let mut tasks = tokio::task::JoinSet::new();
    for (id, digest) in &ids {
        for (store, who) in [(one.clone(), "dora"), (two.clone(), "erin")] {
            let (id, digest) = (id.clone(), digest.clone());
            tasks.spawn(async move {
                let verdict = store
                    .decide_and_claim(
                        id.clone(),
                        by(Verdict::Approve, who),
                        digest,
                        SystemTime::now(),
                    )
                    .await;
                (id, who, verdict)
            });
        }
    }
    let mut winners = BTreeMap::new();
    let mut late = 0;
    while let Some(r) = tasks.join_next().await {
        match r.unwrap() {
            (id, who, Ok(ClaimVerdict::Claimed(_))) => {
                assert_eq!(winners.insert(id, who), None, "claimed twice");
            }
            (_, _, Err(StoreError::Conflict("already decided"))) => late += 1,
            (_, _, other) => panic!("{other:?}"),
        }
    }
    assert_eq!((winners.len(), late), (12, 12));
    for (id, digest) in &ids {
        let who = winners[id];
        match two.record(id.clone()).await.unwrap().unwrap().state {
            ApprovalState::Claimed(d) => assert_eq!(d.approver, format!("{who} (elicitation)")),
            other => panic!("not claimed: {other:?}"),
        }
        assert_eq!(trail(&two, id).await, ["prepared", "decided", "claimed"]);
        assert_eq!(
            two.receipts()
                .state(IdempotencyKey(digest.to_string()))
                .await
                .unwrap(),
            Some(ClaimState::InFlight)
        );
    }
}

fn grant(uses: u32) -> NewGrant {
    NewGrant {
        principal: "carol".into(),
        tool: "update".into(),
        rules: vec![],
        max_uses: uses,
        until: SystemTime::now() + Duration::from_secs(3600),
        granted_by: "ada".into(),
        note: None,
    }
}

fn granted(id: &GrantId) -> Decision {
    let now = SystemTime::now();
    Decision {
        verdict: Verdict::Approve,
        approver: DecisionPath::Grant.approver(&format!("{id} by ada")),
        decided_at: now,
        expires_at: Some(now + Duration::from_secs(600)),
        note: None,
    }
}

/// A grant's use and its claim commit together: 10 different calls raced by two instances
/// against a grant of 6 take exactly 6 uses, each approval claimed (its key in flight) and
/// audited `prepared`, `decided`, `grant_used`, `claimed`; the other 4 write nothing. The same
/// call raced 4 times against a grant of 4 by two instances is claimed once: the other uses are
/// taken (audited) and answer `AlreadyClaimed`, and its key holds one claim.
pub async fn a_grants_use_and_its_claim_commit_together_and_racing_instances_claim_once<
    H: Harness,
>(
    h: &H,
) {
    let path = h.fresh("grant-claim");
    let one = h.open(&path).await.unwrap();
    let two = h.open(&path).await.unwrap();
    let ttl = Duration::from_secs(600);
    let g = one.add_grant(grant(6)).await.unwrap();
    let mut tasks = tokio::task::JoinSet::new();
    for n in 0..10 {
        let store = if n % 2 == 0 { one.clone() } else { two.clone() };
        let g = g.clone();
        tasks.spawn(async move {
            let req = request_of(&format!("call-{n}"), ttl);
            let digest = req.intent.digest();
            let used = store
                .use_grant_and_claim(g.clone(), req, granted(&g), SystemTime::now())
                .await
                .unwrap();
            (used, digest)
        });
    }
    let mut claimed = Vec::new();
    let mut none = 0;
    while let Some(r) = tasks.join_next().await {
        match r.unwrap() {
            (Some((id, verdict)), digest) => {
                assert_eq!(
                    verdict,
                    ClaimVerdict::Claimed(IdempotencyKey(digest.to_string()))
                );
                claimed.push((id, digest));
            }
            (None, _) => none += 1,
        }
    }
    assert_eq!((claimed.len(), none), (6, 4));
    assert_eq!(one.count_approvals(ApprovalQuery::all()).await.unwrap(), 6);
    let view = two.grant(g.clone()).await.unwrap().unwrap();
    assert_eq!((view.used, view.uses_left()), (6, 0));
    for (id, digest) in &claimed {
        assert_eq!(
            trail(&two, id).await,
            ["prepared", "decided", "grant_used", "claimed"]
        );
        match two.record(id.clone()).await.unwrap().unwrap().state {
            ApprovalState::Claimed(d) => assert_eq!(d.approver, "grant-1 by ada (grant)"),
            other => panic!("not claimed: {other:?}"),
        }
        assert_eq!(
            one.receipts()
                .state(IdempotencyKey(digest.to_string()))
                .await
                .unwrap(),
            Some(ClaimState::InFlight)
        );
    }
    // Used up: nothing more, nothing written.
    let more = one
        .use_grant_and_claim(
            g.clone(),
            request_of("late", ttl),
            granted(&g),
            SystemTime::now(),
        )
        .await
        .unwrap();
    assert_eq!(more, None);
    assert_eq!(one.count_approvals(ApprovalQuery::all()).await.unwrap(), 6);

    // The same call four times at once: one claim.
    let same = one.add_grant(grant(4)).await.unwrap();
    let mut tasks = tokio::task::JoinSet::new();
    for n in 0..4 {
        let store = if n % 2 == 0 { one.clone() } else { two.clone() };
        let same = same.clone();
        tasks.spawn(async move {
            store
                .use_grant_and_claim(
                    same.clone(),
                    request_of("same", ttl),
                    granted(&same),
                    SystemTime::now(),
                )
                .await
                .unwrap()
        });
    }
    let (mut won, mut already) = (0, 0);
    while let Some(r) = tasks.join_next().await {
        match r.unwrap() {
            Some((_, ClaimVerdict::Claimed(_))) => won += 1,
            Some((_, ClaimVerdict::AlreadyClaimed)) => already += 1,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!((won, already), (1, 3));
    let key = IdempotencyKey(request_of("same", ttl).intent.digest().to_string());
    assert_eq!(
        two.receipts().state(key).await.unwrap(),
        Some(ClaimState::InFlight)
    );
}

/// A cap wide enough for prepares to run side by side (40 open approvals per principal) is still
/// exact when they race past it: 64 prepares of one principal through two instances open exactly
/// 40; then, with 40 open, one more is refused, and a decision frees exactly one place.
pub async fn a_wide_cap_is_exact_when_prepares_race_past_it<H: Harness>(h: &H) {
    let path = h.fresh("wide-cap");
    let one = h.open(&path).await.unwrap();
    let two = h.open(&path).await.unwrap();
    let ttl = Duration::from_secs(600);
    let racers: Vec<_> = (0..64)
        .map(|n| {
            let s = if n % 2 == 0 { one.clone() } else { two.clone() };
            tokio::spawn(async move {
                s.prepare_within(request_of(&format!("wide-{n}"), ttl), 40, SystemTime::now())
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut opened = Vec::new();
    for r in racers {
        opened.extend(r.await.unwrap());
    }
    assert_eq!(opened.len(), 40);
    let open = ApprovalQuery::all()
        .principal("carol")
        .open_at(SystemTime::now());
    assert_eq!(one.count_approvals(open.clone()).await, Ok(40));
    assert_eq!(
        two.prepare_within(request_of("one-more", ttl), 40, SystemTime::now())
            .await,
        Ok(None)
    );
    one.decide(opened[0].clone(), by(Verdict::Deny, "dora"))
        .await
        .unwrap();
    let (a, b) = tokio::join!(
        one.prepare_within(request_of("freed-a", ttl), 40, SystemTime::now()),
        two.prepare_within(request_of("freed-b", ttl), 40, SystemTime::now()),
    );
    let got = [a.unwrap(), b.unwrap()];
    assert_eq!(got.iter().filter(|g| g.is_some()).count(), 1, "{got:?}");
    assert_eq!(one.count_approvals(open).await, Ok(40));
}
