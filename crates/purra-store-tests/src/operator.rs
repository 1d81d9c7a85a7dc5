//! The operator's view and store events: approvals listed by state with their request, decision (and
//! its note) and claim; the audit trail of one approval; the request's expiry for decisions; the events
//! a subscriber hears; and a decision made through another store instance waking a waiter.

use crate::*;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// How long a test waits for an event before failing (a generous bound, not a measurement).
const PATIENCE: Duration = Duration::from_secs(10);

fn noted(verdict: Verdict, note: &str) -> Decision {
    Decision {
        note: Some(note.into()),
        ..decision(verdict, Some(at(1000)))
    }
}

/// Contract test.
pub async fn approvals_are_listed_with_request_decision_note_and_claim<H: Harness>(h: &H) {
    let store = h.open(&h.fresh("listing")).await.unwrap();
    let before = SystemTime::now();
    let a = store.prepare(request("a")).await.unwrap();
    let b = store.prepare(request("b")).await.unwrap();
    let c = store.prepare(request("c")).await.unwrap();
    let mut other_run = request("d");
    other_run.intent.run_id = RunId::new("r2");
    other_run.expires_at = Some(at(500));
    let d = store.prepare(other_run.clone()).await.unwrap();
    let approve = noted(Verdict::Approve, "once, before noon");
    store.decide(a.clone(), approve.clone()).await.unwrap();
    let deny = noted(Verdict::Deny, "wrong document");
    store.decide(b.clone(), deny.clone()).await.unwrap();
    store
        .decide(c.clone(), decision(Verdict::Approve, None))
        .await
        .unwrap();
    let key = key_of(&intent("a"));
    assert_eq!(
        store
            .check_and_claim(a.clone(), intent("a").digest(), at(20))
            .await,
        Ok(ClaimVerdict::Claimed(key.clone()))
    );
    let receipt = json!({"updated": "a"});
    store
        .complete(
            key.clone(),
            EffectOutcome::Committed {
                receipt: receipt.clone(),
            },
        )
        .await
        .unwrap();
    assert_eq!(
        store
            .check_and_claim(c.clone(), intent("other").digest(), at(20))
            .await,
        Ok(ClaimVerdict::Mismatch)
    );
    let after = SystemTime::now();

    let all = store.approvals(ApprovalQuery::all()).await.unwrap();
    assert_eq!(
        all.iter().map(|v| v.id.clone()).collect::<Vec<_>>(),
        [a.clone(), b.clone(), c.clone(), d.clone()]
    );
    assert_eq!(
        all.iter().map(|v| v.status()).collect::<Vec<_>>(),
        [
            ApprovalStatus::Claimed,
            ApprovalStatus::Denied,
            ApprovalStatus::Refused,
            ApprovalStatus::Pending
        ]
    );
    // The claimed approval, field by field (the claim's times are the store's own).
    let view = &all[0];
    assert_eq!(view.request, request("a"));
    assert_eq!(view.intent_digest, intent("a").digest());
    assert_eq!(view.state, ApprovalState::Claimed(approve));
    let claim = view.claim.clone().unwrap();
    assert_eq!(claim.key, key);
    assert_eq!(claim.owner, store.owner());
    assert_eq!(
        claim.state,
        ClaimState::Completed {
            outcome: EffectOutcome::Committed {
                receipt: receipt.clone()
            }
        }
    );
    assert_eq!(
        (claim.effect_word(), claim.receipt()),
        ("committed", Some(&receipt))
    );
    let completed = claim.completed_at.unwrap();
    assert!(before <= claim.claimed_at && claim.claimed_at <= completed && completed <= after);
    // Denied with its note; refused; pending with its own run and expiry; none of them claimed.
    assert_eq!(all[1].state, ApprovalState::Decided(deny));
    assert_eq!(
        all[2].state,
        ApprovalState::Refused(decision(Verdict::Approve, None))
    );
    assert_eq!(all[3].request, other_run);
    assert_eq!(all[3].state, ApprovalState::Prepared);
    assert!(all[1..].iter().all(|v| v.claim.is_none()));
    assert!(all[3].is_open(at(499)) && !all[3].is_open(at(500)));
    assert!(!all[3].expired_undecided(at(499)) && all[3].expired_undecided(at(500)));
    assert!(!all[0].is_open(at(0)));
    assert!(!all[0].expired_undecided(at(10_000)));
    // One approval; filters; paging.
    assert_eq!(
        store.approval(a.clone()).await.unwrap().as_ref(),
        Some(view)
    );
    assert_eq!(
        store.approval(ApprovalId("approval-9".into())).await,
        Ok(None)
    );
    assert_eq!(
        store.approval(ApprovalId("nonsense".into())).await,
        Ok(None)
    );
    let ids = |views: Vec<ApprovalView>| views.into_iter().map(|v| v.id).collect::<Vec<_>>();
    for (status, want) in [
        (ApprovalStatus::Pending, vec![d.clone()]),
        (ApprovalStatus::Approved, vec![]),
        (ApprovalStatus::Denied, vec![b.clone()]),
        (ApprovalStatus::Claimed, vec![a.clone()]),
        (ApprovalStatus::Refused, vec![c.clone()]),
    ] {
        let got = store
            .approvals(ApprovalQuery::all().status(status))
            .await
            .unwrap();
        assert_eq!(ids(got), want, "{status}");
    }
    let r1 = store
        .approvals(ApprovalQuery::all().run(RunId::new("r1")))
        .await
        .unwrap();
    assert_eq!(ids(r1), [a.clone(), b.clone(), c.clone()]);
    let page = store
        .approvals(ApprovalQuery::all().after(a.clone()).limit(2))
        .await
        .unwrap();
    assert_eq!(ids(page), [b.clone(), c.clone()]);
    assert_eq!(
        store
            .approvals(ApprovalQuery::all().after(ApprovalId("nonsense".into())))
            .await,
        Err(StoreError::NotFound)
    );
    assert_eq!(
        store.run_ids().await,
        Ok(vec![RunId::new("r1"), RunId::new("r2")])
    );
    // A request whose arguments or binding are not the intent's is refused.
    let mut forged = request("e");
    forged.arguments = json!("something else");
    assert_eq!(
        store.prepare(forged).await,
        Err(StoreError::Conflict(
            "the arguments are not the ones the intent names"
        ))
    );
    let mut forged = request("e");
    forged.binding.scope_revision = "scope-2".into();
    assert_eq!(
        store.prepare(forged).await,
        Err(StoreError::Conflict(
            "the binding is not the one the intent names"
        ))
    );
    assert_eq!(
        store.approvals(ApprovalQuery::all()).await.unwrap().len(),
        4
    );
}

/// Contract test.
pub async fn the_audit_trail_of_one_approval_includes_its_claims_outcomes<H: Harness>(h: &H) {
    let store = h.open(&h.fresh("trail")).await.unwrap();
    let a = store.prepare(request("a")).await.unwrap();
    let a2 = store.prepare(request("a")).await.unwrap();
    for id in [&a, &a2] {
        store
            .decide(id.clone(), decision(Verdict::Approve, None))
            .await
            .unwrap();
    }
    let key = key_of(&intent("a"));
    store
        .check_and_claim(a.clone(), intent("a").digest(), at(20))
        .await
        .unwrap();
    // The second approval of the same intent cannot claim it: its trail says so, and no more.
    assert_eq!(
        store
            .check_and_claim(a2.clone(), intent("a").digest(), at(20))
            .await,
        Ok(ClaimVerdict::AlreadyClaimed)
    );
    store
        .complete(key.clone(), unknown("mcp_timeout"))
        .await
        .unwrap();
    store
        .reconcile_unknown(
            key.clone(),
            "the ledger shows it".into(),
            EffectOutcome::NotStarted,
        )
        .await
        .unwrap();
    // An unrelated claim's rows belong to no approval's trail.
    store.claim(IdempotencyKey("bare".into())).await.unwrap();
    let events = |trail: Vec<AuditEntry>| {
        trail
            .into_iter()
            .map(|e| (e.event, e.approval_id, e.claim_key))
            .collect::<Vec<_>>()
    };
    let k = Some(key.0.clone());
    let id = Some(a.0.clone());
    assert_eq!(
        events(store.approval_audit(a.clone()).await.unwrap()),
        [
            ("prepared".to_owned(), id.clone(), None),
            ("decided".to_owned(), id.clone(), None),
            ("claimed".to_owned(), id.clone(), k.clone()),
            ("outcome".to_owned(), None, k.clone()),
            ("reconciled".to_owned(), None, k.clone()),
        ]
    );
    let id2 = Some(a2.0.clone());
    assert_eq!(
        events(store.approval_audit(a2.clone()).await.unwrap()),
        [
            ("prepared".to_owned(), id2.clone(), None),
            ("decided".to_owned(), id2.clone(), None),
            ("claim_refused".to_owned(), id2.clone(), k.clone()),
        ]
    );
    let view = store.approval(a2).await.unwrap().unwrap();
    assert_eq!(view.claim, None);
    // An approval refused (its decision expired) and then claimed again: the refusal and the
    // refused repeat are both on its trail, in order.
    let a3 = store.prepare(request("c")).await.unwrap();
    store
        .decide(a3.clone(), decision(Verdict::Approve, Some(at(30))))
        .await
        .unwrap();
    for (now, verdict) in [
        (40, ClaimVerdict::Expired),
        (41, ClaimVerdict::AlreadyClaimed),
    ] {
        assert_eq!(
            store
                .check_and_claim(a3.clone(), intent("c").digest(), at(now))
                .await,
            Ok(verdict)
        );
    }
    let (id3, k3) = (Some(a3.0.clone()), Some(key_of(&intent("c")).0));
    assert_eq!(
        events(store.approval_audit(a3.clone()).await.unwrap()),
        [
            ("prepared".to_owned(), id3.clone(), None),
            ("decided".to_owned(), id3.clone(), None),
            ("refused".to_owned(), id3.clone(), k3.clone()),
            ("claim_refused".to_owned(), id3.clone(), k3.clone()),
        ]
    );
    assert_eq!(
        store.approval_audit(ApprovalId("approval-7".into())).await,
        Ok(vec![])
    );
    assert_eq!(
        store.approval_audit(ApprovalId("x".into())).await,
        Ok(vec![])
    );
}

/// Contract test.
pub async fn a_decision_after_the_request_expired_is_refused<H: Harness>(h: &H) {
    let store = h.open(&h.fresh("request-expiry")).await.unwrap();
    let mut asked = request("a");
    asked.expires_at = Some(at(50));
    let a = store.prepare(asked.clone()).await.unwrap();
    let b = store.prepare(asked).await.unwrap();
    let late = Decision {
        decided_at: at(50),
        ..decision(Verdict::Approve, None)
    };
    assert_eq!(
        store.decide(a.clone(), late).await,
        Err(StoreError::Conflict("the approval request expired"))
    );
    assert_eq!(
        store.record(a.clone()).await.unwrap().unwrap().state,
        ApprovalState::Prepared
    );
    let in_time = Decision {
        decided_at: at(49),
        ..decision(Verdict::Deny, None)
    };
    store.decide(b.clone(), in_time.clone()).await.unwrap();
    assert_eq!(
        store.record(b).await.unwrap().unwrap().state,
        ApprovalState::Decided(in_time)
    );
}

async fn next(events: &mut StoreEvents) -> StoreEvent {
    tokio::time::timeout(PATIENCE, events.next())
        .await
        .expect("an event within the patience bound")
        .expect("the store is open")
}

/// Contract test.
pub async fn subscribers_hear_of_every_change_of_this_store<H: Harness>(h: &H) {
    let store = h.open(&h.fresh("events")).await.unwrap();
    let mut events = store.subscribe();
    let a = store.prepare(request("a")).await.unwrap();
    assert_eq!(
        next(&mut events).await,
        StoreEvent::Prepared { id: a.clone() }
    );
    store
        .decide(a.clone(), decision(Verdict::Approve, None))
        .await
        .unwrap();
    assert_eq!(
        next(&mut events).await,
        StoreEvent::Decided {
            id: a.clone(),
            verdict: Verdict::Approve
        }
    );
    let key = key_of(&intent("a"));
    store
        .check_and_claim(a.clone(), intent("a").digest(), at(20))
        .await
        .unwrap();
    assert_eq!(
        next(&mut events).await,
        StoreEvent::Claimed {
            id: a.clone(),
            key: key.clone()
        }
    );
    // A bare idempotency claim concerns no approval: nothing is heard of it, only of its outcome.
    store.claim(IdempotencyKey("bare".into())).await.unwrap();
    store
        .complete(key.clone(), EffectOutcome::NotStarted)
        .await
        .unwrap();
    assert_eq!(
        next(&mut events).await,
        StoreEvent::Outcome { key: key.clone() }
    );
    let b = store.prepare(request("b")).await.unwrap();
    store
        .decide(b.clone(), decision(Verdict::Approve, None))
        .await
        .unwrap();
    store
        .check_and_claim(b.clone(), intent("other").digest(), at(20))
        .await
        .unwrap();
    assert_eq!(
        [
            next(&mut events).await,
            next(&mut events).await,
            next(&mut events).await
        ],
        [
            StoreEvent::Prepared { id: b.clone() },
            StoreEvent::Decided {
                id: b.clone(),
                verdict: Verdict::Approve
            },
            StoreEvent::Refused { id: b }
        ]
    );
}

/// Contract test.
pub async fn a_decision_made_through_another_store_instance_wakes_a_waiter<H: Harness>(h: &H) {
    let path = h.fresh("wake");
    let host = Arc::new(h.open(&path).await.unwrap());
    let a = host.prepare(request("a")).await.unwrap();
    let b = host.prepare(request("b")).await.unwrap();
    let waiter = {
        let host = Arc::clone(&host);
        let a = a.clone();
        tokio::spawn(async move { host.wait_for_decision(a).await })
    };
    // Another instance (as another process would) decides another approval, then this one.
    let approver = h.open(&path).await.unwrap();
    approver
        .decide(b, decision(Verdict::Deny, None))
        .await
        .unwrap();
    tokio::time::sleep(h.foreign_event_delay()).await;
    assert!(!waiter.is_finished());
    let approve = Decision {
        note: Some("from the other instance".into()),
        ..decision(Verdict::Approve, None)
    };
    approver.decide(a.clone(), approve.clone()).await.unwrap();
    let woke = tokio::time::timeout(PATIENCE, waiter)
        .await
        .expect("woken within the patience bound")
        .unwrap();
    assert_eq!(woke, Ok(ApprovalState::Decided(approve.clone())));
    assert_eq!(
        host.wait_for_decision(a).await,
        Ok(ApprovalState::Decided(approve))
    );
    assert_eq!(
        host.wait_for_decision(ApprovalId("approval-9".into()))
            .await,
        Err(StoreError::NotFound)
    );
}

/// `request(args)` asked for `principal`, accepting a decision until `expires` (if any).
fn asked_by(args: &str, principal: &str, expires: Option<SystemTime>) -> ApprovalRequest {
    let mut r = request(args);
    r.labels.insert(PRINCIPAL_LABEL.into(), principal.into());
    r.expires_at = expires;
    r
}

fn seqs(views: &[ApprovalView]) -> Vec<u64> {
    views
        .iter()
        .map(|v| v.id.0["approval-".len()..].parse().unwrap())
        .collect()
}

/// Contract test (issue 50, the store at scale): `count_approvals_up_to` answers the exact count
/// when it is at most the bound and the bound when more match, for every filter a listing counts
/// with (the pending list past a cursor, the whole store past a cursor, the history, a range);
/// a bound of 0 counts nothing.
pub async fn counts_up_to_a_bound_stop_at_it_and_are_exact_below_it<H: Harness>(h: &H) {
    let store = h.open(&h.fresh("bounded")).await.unwrap();
    for n in 1..=12 {
        assert_eq!(
            store.prepare(request(&format!("b{n}"))).await,
            Ok(ApprovalId(format!("approval-{n}")))
        );
    }
    let id = |n: u64| ApprovalId(format!("approval-{n}"));
    for n in [2, 5, 9] {
        store
            .decide(id(n), decision(Verdict::Approve, None))
            .await
            .unwrap();
    }
    let pending = ApprovalQuery::all()
        .status(ApprovalStatus::Pending)
        .newest_first()
        .limit(2);
    let past = pending.clone().continued(id(11));
    // Pending older than approval-11: 10, 8, 7, 6, 4, 3, 1.
    for (up_to, counted) in [(0, 0), (1, 1), (6, 6), (7, 7), (8, 7), (1001, 7)] {
        assert_eq!(
            store.count_approvals_up_to(past.clone(), up_to).await,
            Ok(counted),
            "pending past approval-11 up to {up_to}"
        );
    }
    let all = ApprovalQuery::all().newest_first().limit(3);
    for (up_to, counted) in [(5, 5), (9, 9), (10, 9)] {
        assert_eq!(
            store
                .count_approvals_up_to(all.clone().continued(id(10)), up_to)
                .await,
            Ok(counted),
            "every approval older than approval-10 up to {up_to}"
        );
    }
    let history = ApprovalQuery::all().decided().newest_first();
    assert_eq!(store.count_approvals_up_to(history.clone(), 2).await, Ok(2));
    assert_eq!(store.count_approvals_up_to(history, 3).await, Ok(3));
    let range = ApprovalQuery::all().after(id(3)).before(id(9));
    assert_eq!(store.count_approvals_up_to(range.clone(), 4).await, Ok(4));
    assert_eq!(store.count_approvals_up_to(range, 100).await, Ok(5));
}

/// Contract test (issue 50, the page's cards): `approval_audits` and `load_suspended_each`
/// answer, in the order asked, what `approval_audit` and `load_suspended` answer one by one,
/// for approvals decided, claimed, pending and unknown and for runs stored and not.
pub async fn a_listing_s_trails_and_runs_read_at_once_are_those_read_one_by_one<H: Harness>(h: &H) {
    let store = h.open(&h.fresh("cards")).await.unwrap();
    let id = |n: u64| ApprovalId(format!("approval-{n}"));
    for n in 1..=3 {
        assert_eq!(store.prepare(request(&format!("c{n}"))).await, Ok(id(n)));
    }
    store
        .decide(id(1), decision(Verdict::Approve, None))
        .await
        .unwrap();
    store
        .decide(id(2), decision(Verdict::Deny, None))
        .await
        .unwrap();
    let ids = vec![id(2), id(9), id(1), id(3), ApprovalId("not-an-id".into())];
    let mut one_by_one = Vec::new();
    for i in &ids {
        one_by_one.push(store.approval_audit(i.clone()).await.unwrap());
    }
    assert!(
        one_by_one[0].len() >= 2 && one_by_one[2].len() >= 2,
        "{one_by_one:?}"
    );
    assert_eq!(store.approval_audits(ids).await, Ok(one_by_one));
    assert_eq!(store.approval_audits(Vec::new()).await, Ok(Vec::new()));

    let (a, b) = (
        suspended_run("run-a", "approval-1"),
        suspended_run("run-b", "approval-3"),
    );
    store.save_suspended(a.clone()).await.unwrap();
    store.save_suspended(b.clone()).await.unwrap();
    let runs = ["run-b", "run-x", "run-a", "run-b"]
        .map(RunId::new)
        .to_vec();
    assert_eq!(
        store.load_suspended_each(runs).await,
        Ok(vec![Some(b.clone()), None, Some(a), Some(b)])
    );
    assert_eq!(store.load_suspended_each(Vec::new()).await, Ok(Vec::new()));
}

/// Contract test (finding 5: a flood of approvals must not hide real ones): pending approvals page
/// newest first by a `before` cursor with an exact count of the rest, ids ordered as numbers
/// (`approval-10` after `approval-9`); the history (every decided approval) pages newest first
/// and knows only whether more follow; filters by run and by a principal's open approvals count
/// exactly; a cursor that is no approval id is `NotFound`.
pub async fn a_flood_of_approvals_is_listed_by_page_newest_first_with_counts<H: Harness>(h: &H) {
    let store = h.open(&h.fresh("flood")).await.unwrap();
    for n in 1..=25 {
        let mut r = if n % 5 == 0 {
            asked_by(&format!("a{n}"), "local", Some(at(100)))
        } else {
            request(&format!("a{n}"))
        };
        if n > 20 {
            r.intent.run_id = RunId::new("r2");
        }
        assert_eq!(
            store.prepare(r).await,
            Ok(ApprovalId(format!("approval-{n}")))
        );
    }
    let id = |n: u64| ApprovalId(format!("approval-{n}"));
    for (n, verdict) in [
        (3, Verdict::Approve),
        (7, Verdict::Deny),
        (12, Verdict::Approve),
        (20, Verdict::Deny),
    ] {
        store.decide(id(n), decision(verdict, None)).await.unwrap();
    }
    let pending = ApprovalQuery::all()
        .status(ApprovalStatus::Pending)
        .newest_first()
        .limit(10);
    let first = store.approval_page(pending.clone()).await.unwrap();
    assert_eq!(
        seqs(&first.approvals),
        [25, 24, 23, 22, 21, 19, 18, 17, 16, 15]
    );
    assert_eq!(first.next, Some(id(15)));
    let rest = pending.clone().continued(id(15));
    assert_eq!(store.count_approvals(rest.clone()).await, Ok(11));
    assert_eq!(store.count_approvals(pending.clone()).await, Ok(21));
    let second = store.approval_page(rest).await.unwrap();
    assert_eq!(seqs(&second.approvals), [14, 13, 11, 10, 9, 8, 6, 5, 4, 2]);
    assert_eq!(second.next, Some(id(2)));
    let last = store
        .approval_page(pending.clone().continued(id(2)))
        .await
        .unwrap();
    assert_eq!((seqs(&last.approvals), last.next), (vec![1], None));
    // The same page through `approvals`, and oldest first between two cursors.
    assert_eq!(
        seqs(&store.approvals(pending.clone()).await.unwrap()),
        seqs(&first.approvals)
    );
    let between = store
        .approval_page(ApprovalQuery::all().after(id(8)).before(id(12)).limit(2))
        .await
        .unwrap();
    assert_eq!(
        (seqs(&between.approvals), between.next),
        (vec![9, 10], Some(id(10)))
    );
    assert_eq!(
        store
            .count_approvals(ApprovalQuery::all().after(id(8)).before(id(12)))
            .await,
        Ok(3)
    );
    // The history: decided approvals newest first, two a page.
    let history = ApprovalQuery::all().decided().newest_first().limit(2);
    let page = store.approval_page(history.clone()).await.unwrap();
    assert_eq!(
        (seqs(&page.approvals), page.next.clone()),
        (vec![20, 12], Some(id(12)))
    );
    let page = store
        .approval_page(history.clone().continued(id(12)))
        .await
        .unwrap();
    assert_eq!((seqs(&page.approvals), page.next), (vec![7, 3], None));
    assert_eq!(store.count_approvals(history).await, Ok(4));
    // By run, and a principal's open approvals (approval-20 is decided).
    assert_eq!(
        store
            .count_approvals(ApprovalQuery::all().run(RunId::new("r2")))
            .await,
        Ok(5)
    );
    let open = ApprovalQuery::all().principal("local").open_at(at(99));
    assert_eq!(store.count_approvals(open.clone()).await, Ok(4));
    assert_eq!(
        seqs(&store.approvals(open.newest_first()).await.unwrap()),
        [25, 15, 10, 5]
    );
    assert_eq!(
        store
            .count_approvals(ApprovalQuery::all().principal("local").open_at(at(100)))
            .await,
        Ok(0),
        "a request is open only before its expiry"
    );
    assert_eq!(
        store
            .count_approvals(ApprovalQuery::all().principal("someone else"))
            .await,
        Ok(0)
    );
    let nonsense = ApprovalId("nonsense".into());
    assert_eq!(
        store
            .approval_page(ApprovalQuery::all().before(nonsense.clone()))
            .await,
        Err(StoreError::NotFound)
    );
    assert_eq!(
        store
            .count_approvals(ApprovalQuery::all().after(nonsense))
            .await,
        Err(StoreError::NotFound)
    );
}

/// Contract test (finding 5): a principal's open approvals are capped in one step with the insert:
/// at the limit nothing is written; decided, expired and other principals' approvals do not
/// count, a request without expiry always does; a request naming no principal is refused; and
/// twelve limited prepares racing through two store instances open exactly the limit.
pub async fn open_approvals_per_principal_are_capped_in_one_step<H: Harness>(h: &H) {
    let path = h.fresh("capped");
    let store = h.open(&path).await.unwrap();
    let now = at(50);
    for n in 1..=3 {
        assert_eq!(
            store
                .prepare_within(asked_by(&format!("p{n}"), "p1", Some(at(100))), 3, now)
                .await,
            Ok(Some(ApprovalId(format!("approval-{n}"))))
        );
    }
    assert_eq!(
        store
            .prepare_within(asked_by("p4", "p1", Some(at(100))), 3, now)
            .await,
        Ok(None)
    );
    assert_eq!(store.count_approvals(ApprovalQuery::all()).await, Ok(3));
    assert_eq!(
        store
            .prepare_within(asked_by("q1", "p2", None), 3, now)
            .await,
        Ok(Some(ApprovalId("approval-4".into())))
    );
    // A decision frees a place.
    store
        .decide(
            ApprovalId("approval-2".into()),
            decision(Verdict::Deny, None),
        )
        .await
        .unwrap();
    assert_eq!(
        store
            .prepare_within(asked_by("p5", "p1", None), 3, now)
            .await,
        Ok(Some(ApprovalId("approval-5".into())))
    );
    assert_eq!(
        store
            .prepare_within(asked_by("p6", "p1", None), 3, now)
            .await,
        Ok(None)
    );
    // Past the expiry of the first two, only the one without expiry is open.
    assert_eq!(
        store
            .count_approvals(ApprovalQuery::all().principal("p1").open_at(at(100)))
            .await,
        Ok(1)
    );
    assert_eq!(
        store
            .prepare_within(asked_by("p6", "p1", None), 2, at(100))
            .await,
        Ok(Some(ApprovalId("approval-6".into())))
    );
    assert_eq!(
        store.prepare_within(request("x"), 3, now).await,
        Err(StoreError::Conflict(
            "a limited prepare needs the request's principal label"
        ))
    );
    let mut forged = asked_by("y", "p3", None);
    forged.arguments = json!("something else");
    assert_eq!(
        store.prepare_within(forged, 3, now).await,
        Err(StoreError::Conflict(
            "the arguments are not the ones the intent names"
        ))
    );
    assert_eq!(store.count_approvals(ApprovalQuery::all()).await, Ok(6));

    // Racing through two instances (as two processes would): exactly the limit get in.
    let other = h.open(&path).await.unwrap();
    let racers: Vec<_> = (0..12)
        .map(|n| {
            let s = if n % 2 == 0 {
                store.clone()
            } else {
                other.clone()
            };
            tokio::spawn(async move {
                s.prepare_within(asked_by(&format!("r{n}"), "racer", None), 4, at(50))
                    .await
            })
        })
        .collect();
    let mut opened = 0;
    for r in racers {
        if r.await.unwrap().unwrap().is_some() {
            opened += 1;
        }
    }
    assert_eq!(opened, 4);
    assert_eq!(
        store
            .count_approvals(ApprovalQuery::all().principal("racer").open_at(at(50)))
            .await,
        Ok(4)
    );
    assert_eq!(store.count_approvals(ApprovalQuery::all()).await, Ok(10));
}
