//! Every transition of the durable write state machine, with exact expected values: prepare, decide,
//! expiry, mismatch, claim once, outcomes, retained `unknown`, reconciliation, the interrupted-claim rule,
//! the append-only audit log, and the schema version check.

use crate::*;
use serde_json::json;
use std::time::{Duration, SystemTime};

/// Contract test.
pub async fn prepare_is_pending_until_one_decision_is_recorded<H: Harness>(h: &H) {
    let store = h.open(&h.fresh("prepare")).await.unwrap();
    assert!(durable(&store));
    let a = store.prepare(request("a")).await.unwrap();
    assert_eq!(a, ApprovalId("approval-1".into()));
    assert_eq!(
        store.record(a.clone()).await.unwrap(),
        Some(ApprovalRecord {
            intent: intent("a"),
            intent_digest: intent("a").digest(),
            state: ApprovalState::Prepared
        })
    );
    assert_eq!(
        store
            .check_and_claim(a.clone(), intent("a").digest(), at(20))
            .await,
        Ok(ClaimVerdict::Pending)
    );
    let approve = decision(Verdict::Approve, Some(at(100)));
    store.decide(a.clone(), approve.clone()).await.unwrap();
    assert_eq!(
        store.decide(a.clone(), decision(Verdict::Deny, None)).await,
        Err(StoreError::Conflict("already decided"))
    );
    assert_eq!(
        store.record(a.clone()).await.unwrap().unwrap().state,
        ApprovalState::Decided(approve)
    );
    let missing = ApprovalId("approval-99".into());
    assert_eq!(
        store
            .decide(missing.clone(), decision(Verdict::Approve, None))
            .await,
        Err(StoreError::NotFound)
    );
    assert_eq!(store.record(missing.clone()).await, Ok(None));
    assert_eq!(store.record(ApprovalId("nonsense".into())).await, Ok(None));
    assert_eq!(
        store
            .check_and_claim(missing, intent("a").digest(), at(20))
            .await,
        Err(StoreError::NotFound)
    );

    let d = store.prepare(request("d")).await.unwrap();
    assert_eq!(d, ApprovalId("approval-2".into()));
    let deny = decision(Verdict::Deny, None);
    store.decide(d.clone(), deny.clone()).await.unwrap();
    for _ in 0..2 {
        assert_eq!(
            store
                .check_and_claim(d.clone(), intent("d").digest(), at(20))
                .await,
            Ok(ClaimVerdict::Denied)
        );
    }
    assert_eq!(
        store.record(d).await.unwrap().unwrap().state,
        ApprovalState::Decided(deny)
    );
    assert_eq!(store.state(key_of(&intent("d"))).await, Ok(None));
}

/// Contract test.
pub async fn expiry_is_checked_against_the_given_time_and_refuses_for_good<H: Harness>(h: &H) {
    let store = h.open(&h.fresh("expiry")).await.unwrap();
    let approve = decision(Verdict::Approve, Some(at(100)));
    // Just before the expiry: claimed.
    let a = store.prepare(request("a")).await.unwrap();
    store.decide(a.clone(), approve.clone()).await.unwrap();
    assert_eq!(
        store
            .check_and_claim(
                a.clone(),
                intent("a").digest(),
                at(100) - Duration::from_nanos(1)
            )
            .await,
        Ok(ClaimVerdict::Claimed(key_of(&intent("a"))))
    );
    // At the expiry: refused, nothing claimed, and never claimable afterwards.
    let b = store.prepare(request("b")).await.unwrap();
    store.decide(b.clone(), approve.clone()).await.unwrap();
    assert_eq!(
        store
            .check_and_claim(b.clone(), intent("b").digest(), at(100))
            .await,
        Ok(ClaimVerdict::Expired)
    );
    assert_eq!(
        store.record(b.clone()).await.unwrap().unwrap().state,
        ApprovalState::Refused(approve)
    );
    assert_eq!(store.state(key_of(&intent("b"))).await, Ok(None));
    assert_eq!(
        store.check_and_claim(b, intent("b").digest(), at(50)).await,
        Ok(ClaimVerdict::AlreadyClaimed)
    );
}

/// Contract test.
pub async fn a_digest_mismatch_is_refused_and_not_started<H: Harness>(h: &H) {
    let store = h.open(&h.fresh("mismatch")).await.unwrap();
    let approve = decision(Verdict::Approve, None);
    let b = store.prepare(request("b")).await.unwrap();
    store.decide(b.clone(), approve.clone()).await.unwrap();
    assert_eq!(
        store
            .check_and_claim(b.clone(), intent("other").digest(), at(20))
            .await,
        Ok(ClaimVerdict::Mismatch)
    );
    assert_eq!(
        store.record(b.clone()).await.unwrap().unwrap().state,
        ApprovalState::Refused(approve)
    );
    // Not started: no claim exists for either digest.
    assert_eq!(store.state(key_of(&intent("b"))).await, Ok(None));
    assert_eq!(store.state(key_of(&intent("other"))).await, Ok(None));
    let refused = store.audit(0, 100).await.unwrap().pop().unwrap();
    assert_eq!(
        (refused.event.as_str(), refused.approval_id.as_deref()),
        ("refused", Some("approval-1"))
    );
    assert_eq!(
        refused.detail,
        json!({"reason": "mismatch", "currentIntent": intent("other").digest().as_str(),
               "nowNs": 20_000_000_000i64, "effect": "not_started"})
    );
    // A refused approval never claims, even with the right digest.
    assert_eq!(
        store.check_and_claim(b, intent("b").digest(), at(20)).await,
        Ok(ClaimVerdict::AlreadyClaimed)
    );
    assert_eq!(store.state(key_of(&intent("b"))).await, Ok(None));
}

/// Contract test.
pub async fn a_call_is_claimed_once_ever<H: Harness>(h: &H) {
    let store = h.open(&h.fresh("claim-once")).await.unwrap();
    let approve = decision(Verdict::Approve, None);
    let key = key_of(&intent("c"));
    let c = store.prepare(request("c")).await.unwrap();
    store.decide(c.clone(), approve.clone()).await.unwrap();
    assert_eq!(
        store
            .check_and_claim(c.clone(), intent("c").digest(), at(20))
            .await,
        Ok(ClaimVerdict::Claimed(key.clone()))
    );
    assert_eq!(
        store.record(c.clone()).await.unwrap().unwrap().state,
        ApprovalState::Claimed(approve.clone())
    );
    assert_eq!(
        store.receipts().state(key.clone()).await,
        Ok(Some(ClaimState::InFlight))
    );
    assert_eq!(
        store.check_and_claim(c, intent("c").digest(), at(20)).await,
        Ok(ClaimVerdict::AlreadyClaimed)
    );
    // A second approval of the very same intent cannot claim it again (and stays decided).
    let c2 = store.prepare(request("c")).await.unwrap();
    store.decide(c2.clone(), approve.clone()).await.unwrap();
    assert_eq!(
        store
            .check_and_claim(c2.clone(), intent("c").digest(), at(20))
            .await,
        Ok(ClaimVerdict::AlreadyClaimed)
    );
    assert_eq!(
        store.record(c2).await.unwrap().unwrap().state,
        ApprovalState::Decided(approve)
    );
    // The receipt store's own claim agrees.
    assert_eq!(
        store.claim(key.clone()).await,
        Ok(ClaimResult::Existing(ClaimState::InFlight))
    );
    let other = IdempotencyKey("other".into());
    assert_eq!(store.claim(other.clone()).await, Ok(ClaimResult::Claimed));
    assert_eq!(
        store.claim(other).await,
        Ok(ClaimResult::Existing(ClaimState::InFlight))
    );
}

/// Contract test.
pub async fn outcomes_are_recorded_once_and_unknown_keeps_its_claim<H: Harness>(h: &H) {
    let store = h.open(&h.fresh("outcomes")).await.unwrap();
    let receipt = json!({"updated": "d1", "n": 1.5, "nested": [null, true, "é"]});
    let cases = [
        ("committed", EffectOutcome::Committed { receipt }),
        ("not_started", EffectOutcome::NotStarted),
        ("unknown", unknown("mcp_timeout")),
    ];
    for (name, outcome) in cases {
        let key = IdempotencyKey(name.into());
        assert_eq!(store.claim(key.clone()).await, Ok(ClaimResult::Claimed));
        assert_eq!(store.complete(key.clone(), outcome.clone()).await, Ok(()));
        let done = ClaimState::Completed {
            outcome: outcome.clone(),
        };
        assert_eq!(store.state(key.clone()).await, Ok(Some(done.clone())));
        assert_eq!(
            store.complete(key.clone(), EffectOutcome::NotStarted).await,
            Err(StoreError::Conflict("the claim already has an outcome"))
        );
        // Never claimable again, whatever the outcome: `unknown` is retained, not retried.
        assert_eq!(
            store.claim(key.clone()).await,
            Ok(ClaimResult::Existing(done.clone()))
        );
        assert_eq!(store.state(key).await, Ok(Some(done)));
    }
    assert_eq!(
        store
            .complete(IdempotencyKey("never".into()), EffectOutcome::NotStarted)
            .await,
        Err(StoreError::NotFound)
    );
    assert_eq!(store.state(IdempotencyKey("never".into())).await, Ok(None));
}

/// Contract test.
pub async fn only_an_operator_with_evidence_moves_unknown_on<H: Harness>(h: &H) {
    let store = h.open(&h.fresh("reconcile")).await.unwrap();
    let key = IdempotencyKey("k".into());
    let committed = EffectOutcome::Committed {
        receipt: json!({"checked": "by hand"}),
    };
    assert_eq!(
        store
            .reconcile_unknown(key.clone(), "ledger".into(), committed.clone())
            .await,
        Err(StoreError::NotFound)
    );
    store.claim(key.clone()).await.unwrap();
    assert_eq!(
        store
            .reconcile_unknown(key.clone(), "ledger".into(), committed.clone())
            .await,
        Err(StoreError::Conflict("the claim has no outcome yet"))
    );
    store
        .complete(key.clone(), unknown("mcp_timeout"))
        .await
        .unwrap();
    assert_eq!(
        store
            .reconcile_unknown(key.clone(), "  ".into(), committed.clone())
            .await,
        Err(StoreError::Conflict("reconciliation requires evidence"))
    );
    assert_eq!(
        store
            .reconcile_unknown(key.clone(), "ledger".into(), unknown("still_unsure"))
            .await,
        Err(StoreError::Conflict(
            "reconciliation must resolve to committed or not_started"
        ))
    );
    // Nothing above changed the outcome.
    assert_eq!(
        store.state(key.clone()).await,
        Ok(Some(ClaimState::Completed {
            outcome: unknown("mcp_timeout")
        }))
    );
    let evidence = "server ledger entry 42 shows the write of d1 at 10:02";
    store
        .reconcile_unknown(key.clone(), evidence.into(), committed.clone())
        .await
        .unwrap();
    let done = ClaimState::Completed {
        outcome: committed.clone(),
    };
    assert_eq!(store.state(key.clone()).await, Ok(Some(done.clone())));
    let last = store.audit(0, 1000).await.unwrap().pop().unwrap();
    assert_eq!(
        (last.event.as_str(), last.claim_key.as_deref()),
        ("reconciled", Some("k"))
    );
    assert_eq!(
        last.detail,
        json!({"before": {"outcome": "unknown", "reason": "mcp_timeout"},
               "after": {"outcome": "committed", "receipt": {"checked": "by hand"}},
               "by": store.owner(), "evidence": evidence})
    );
    // Reconciled is final; the claim stays.
    assert_eq!(
        store
            .reconcile_unknown(key.clone(), evidence.into(), EffectOutcome::NotStarted)
            .await,
        Err(StoreError::Conflict(
            "only an unknown outcome is reconciled"
        ))
    );
    assert_eq!(store.claim(key).await, Ok(ClaimResult::Existing(done)));
}

/// Contract test.
pub async fn interrupted_claims_become_unknown_only_when_their_owner_is_gone<H: Harness>(h: &H) {
    let path = h.fresh("interrupted");
    let a = h.open(&path).await.unwrap();
    let b = h.open(&path).await.unwrap();
    assert_ne!(a.owner(), b.owner());
    let k1 = IdempotencyKey("k1".into());
    let k2 = IdempotencyKey("k2".into());
    let mine = IdempotencyKey("mine".into());
    a.claim(k1.clone()).await.unwrap();
    a.claim(k2.clone()).await.unwrap();
    a.complete(k2.clone(), EffectOutcome::NotStarted)
        .await
        .unwrap();
    b.claim(mine.clone()).await.unwrap();
    // A is alive (its lease is fresh): B's startup reconciliation leaves A's claim alone.
    let now = SystemTime::now();
    let report = b.reconcile_interrupted_claims(now).await.unwrap();
    assert_eq!(report.interrupted, Vec::<IdempotencyKey>::new());
    assert_eq!((report.in_flight_elsewhere, report.in_flight_here), (1, 1));
    assert_eq!(a.state(k1.clone()).await, Ok(Some(ClaimState::InFlight)));
    // Had A stopped renewing its 60 s lease, the same check two minutes on would find it gone.
    let later = b
        .reconcile_interrupted_claims(now + Duration::from_secs(120))
        .await
        .unwrap();
    assert_eq!(later.interrupted, vec![k1.clone()]);
    let interrupted = ClaimState::Completed {
        outcome: unknown(INTERRUPTED),
    };
    assert_eq!(a.state(k1.clone()).await, Ok(Some(interrupted.clone())));
    // A late outcome is refused and kept in the audit log as evidence.
    assert_eq!(
        a.complete(
            k1.clone(),
            EffectOutcome::Committed {
                receipt: json!({"late": true})
            }
        )
        .await,
        Err(StoreError::Conflict("the claim already has an outcome"))
    );
    let log = b.audit(0, 1000).await.unwrap();
    let rejected = log.last().unwrap();
    assert_eq!(rejected.event, "outcome_rejected");
    assert_eq!(rejected.owner, a.owner());
    assert_eq!(
        rejected.detail,
        json!({"stored": {"outcome": "unknown", "reason": "interrupted"},
               "offered": {"outcome": "committed", "receipt": {"late": true}}})
    );
    let marked = log.iter().find(|e| e.event == "interrupted").unwrap();
    assert_eq!(marked.owner, b.owner());
    assert_eq!(marked.claim_key.as_deref(), Some("k1"));
    assert_eq!(marked.detail["claimOwner"], json!(a.owner()));
    // B's own in-flight claim was never touched.
    assert_eq!(b.state(mine.clone()).await, Ok(Some(ClaimState::InFlight)));

    // A clean close makes A's remaining in-flight claims interrupted at once.
    let k3 = IdempotencyKey("k3".into());
    a.claim(k3.clone()).await.unwrap();
    drop(a);
    let c = h.open(&path).await.unwrap();
    let report = c
        .reconcile_interrupted_claims(SystemTime::now())
        .await
        .unwrap();
    assert_eq!(report.interrupted, vec![k3.clone()]);
    assert_eq!((report.in_flight_elsewhere, report.in_flight_here), (1, 0));
    assert_eq!(c.state(k3).await, Ok(Some(interrupted)));
    assert_eq!(c.state(mine).await, Ok(Some(ClaimState::InFlight)));
}

/// Contract test.
pub async fn the_audit_log_only_grows_and_rejects_updates_and_deletes<H: Harness>(h: &H) {
    let path = h.fresh("audit");
    let store = h.open(&path).await.unwrap();
    let mut seen = store.audit(0, 10_000).await.unwrap();
    assert_eq!(
        seen.iter().map(|e| e.event.as_str()).collect::<Vec<_>>(),
        ["opened"]
    );
    let a = store.prepare(request("a")).await.unwrap();
    store
        .decide(a.clone(), decision(Verdict::Approve, None))
        .await
        .unwrap();
    store
        .check_and_claim(a.clone(), intent("a").digest(), at(20))
        .await
        .unwrap();
    store
        .check_and_claim(a, intent("a").digest(), at(20))
        .await
        .unwrap();
    store
        .complete(key_of(&intent("a")), unknown("mcp_timeout"))
        .await
        .unwrap();
    store
        .reconcile_unknown(
            key_of(&intent("a")),
            "ledger".into(),
            EffectOutcome::NotStarted,
        )
        .await
        .unwrap();
    let now = store.audit(0, 10_000).await.unwrap();
    assert_eq!(
        now.iter().map(|e| e.event.as_str()).collect::<Vec<_>>(),
        [
            "opened",
            "prepared",
            "decided",
            "claimed",
            "claim_refused",
            "outcome",
            "reconciled"
        ]
    );
    assert!(now.starts_with(&seen));
    assert!(now.windows(2).all(|w| w[0].seq < w[1].seq));
    assert_eq!(now[1].approval_id.as_deref(), Some("approval-1"));
    assert_eq!(
        now[2].detail,
        json!({"verdict": "approve", "approver": "alice", "decidedAtNs": 10_000_000_000i64,
               "expiresAtNs": null, "note": null})
    );
    seen = now;

    // Nobody can rewrite history, not even with direct SQL on the database.
    let mut attempts = vec![
        "UPDATE audit SET event = 'nothing' WHERE seq = 2",
        "DELETE FROM audit WHERE seq = 2",
        "DELETE FROM audit",
    ];
    attempts.extend(h.truncate_audit_sql());
    for sql in attempts {
        let err = h.raw_execute(&path, sql).await.unwrap_err();
        assert!(err.contains("the audit log is append-only"), "{sql}: {err}");
    }
    drop(store);
    let reopened = h.open(&path).await.unwrap();
    let after = reopened.audit(0, 10_000).await.unwrap();
    assert!(after.starts_with(&seen));
    assert_eq!(
        after[seen.len()..]
            .iter()
            .map(|e| e.event.as_str())
            .collect::<Vec<_>>(),
        ["closed", "opened"]
    );
    // Paging.
    assert_eq!(reopened.audit(after[3].seq, 2).await.unwrap(), after[4..6]);
}

/// Contract test.
pub async fn schema_versions_are_migrated_once_and_a_newer_one_is_refused<H: Harness>(h: &H) {
    let path = h.fresh("versions");
    let store = h.open(&path).await.unwrap();
    assert_eq!(h.schema_version(&path).await, h.known_version());
    drop(store);
    // Reopening runs no migration twice.
    let store = h.open(&path).await.unwrap();
    let id = store.prepare(request("v")).await.unwrap();
    assert_eq!(id, ApprovalId("approval-1".into()));
    drop(store);
    assert_eq!(h.schema_version(&path).await, h.known_version());
    let newer = h.known_version() + 1;
    h.set_schema_version(&path, newer).await;
    assert_eq!(
        h.open(&path).await.unwrap_err(),
        h.newer_schema_error(newer)
    );
}
