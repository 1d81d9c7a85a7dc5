//! Approve with edit: the edited request prepared and approved, the original decided and settled
//! as refused, and the `edited` audit row, in one transaction; only the edited intent is ever
//! claimed, once; an edit refused by its checks writes nothing; racing edits and decisions of one
//! approval through two instances: exactly one wins.

use crate::{intent, Harness};
use purra_core::*;
use serde_json::json;
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

/// alice's request for `update` with the JSON string `args` in run `run`.
fn asked(run: &str, args: &str) -> ApprovalRequest {
    let mut i = intent(args);
    i.run_id = RunId::new(run);
    ApprovalRequest {
        intent: i,
        arguments: json!(args),
        binding: crate::binding(),
        requested_by: "alice".into(),
        requested_at: SystemTime::now(),
        expires_at: Some(SystemTime::now() + Duration::from_secs(600)),
        labels: BTreeMap::from([
            (PRINCIPAL_LABEL.to_owned(), "alice".to_owned()),
            (ALLOW_EDIT_LABEL.to_owned(), "true".to_owned()),
        ]),
    }
}

/// `original`'s request edited to `args`, by ada.
fn edited(original: &ApprovalId, run: &str, args: &str) -> ApprovalRequest {
    let mut r = asked(run, args);
    r.labels
        .insert(EDITED_FROM_LABEL.to_owned(), original.0.clone());
    r.labels
        .insert(EDITED_BY_LABEL.to_owned(), "ada (page)".to_owned());
    r
}

fn by_ada(verdict: Verdict) -> Decision {
    let now = SystemTime::now();
    Decision {
        verdict,
        approver: "ada (page)".into(),
        decided_at: now,
        expires_at: Some(now + Duration::from_secs(600)),
        note: Some("fixed the path".into()),
    }
}

/// Every check refuses without writing; a valid edit records both approvals and the audit in one
/// step, after which only the edited intent is claimed, once, and the original never.
pub async fn an_edit_is_recorded_in_one_step_and_only_the_edited_intent_is_ever_claimed<
    H: Harness,
>(
    h: &H,
) {
    let path = h.fresh("edits");
    let store = h.open(&path).await.unwrap();
    let o = store.prepare(asked("edit-run", "draft")).await.unwrap();
    let now = SystemTime::now();
    let refusals = [
        (
            edited(&o, "edit-run", "final"),
            by_ada(Verdict::Deny),
            StoreError::Conflict("an edit is approved, never denied"),
        ),
        (
            edited(&ApprovalId("approval-9".into()), "edit-run", "final"),
            by_ada(Verdict::Approve),
            StoreError::Conflict("the edited request does not name the approval it edits"),
        ),
        (
            edited(&o, "another-run", "final"),
            by_ada(Verdict::Approve),
            StoreError::Conflict("an edit keeps the tool, the run and the principal of the call"),
        ),
        (
            edited(&o, "edit-run", "draft"),
            by_ada(Verdict::Approve),
            StoreError::Conflict("the edited arguments are the original ones"),
        ),
    ];
    for (request, decision, error) in refusals {
        assert_eq!(
            store.approve_with_edit(o.clone(), request, decision).await,
            Err(error)
        );
    }
    let mut broken = edited(&o, "edit-run", "final");
    broken.arguments = json!("other");
    assert_eq!(
        store
            .approve_with_edit(o.clone(), broken, by_ada(Verdict::Approve))
            .await,
        Err(StoreError::Conflict(
            "the arguments are not the ones the intent names"
        ))
    );
    assert_eq!(
        store
            .approve_with_edit(
                ApprovalId("approval-9".into()),
                edited(&ApprovalId("approval-9".into()), "edit-run", "final"),
                by_ada(Verdict::Approve)
            )
            .await,
        Err(StoreError::NotFound)
    );
    // Nothing was written by any refusal.
    let all = store.approvals(ApprovalQuery::all()).await.unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].state, ApprovalState::Prepared);
    assert_eq!(
        store
            .approval_audit(o.clone())
            .await
            .unwrap()
            .iter()
            .map(|e| e.event.as_str())
            .collect::<Vec<_>>(),
        ["prepared"]
    );

    let request = edited(&o, "edit-run", "final");
    let edited_intent = request.intent.digest();
    let decision = by_ada(Verdict::Approve);
    let e = store
        .approve_with_edit(o.clone(), request, decision.clone())
        .await
        .unwrap();
    assert_eq!(e, ApprovalId("approval-2".into()));
    let original = store.approval(o.clone()).await.unwrap().unwrap();
    let mut on_original = decision.clone();
    on_original.note = Some(format!(
        "approved with edit as approval-2 (intent {edited_intent}): fixed the path"
    ));
    assert_eq!(original.state, ApprovalState::Refused(on_original));
    let view = store.approval(e.clone()).await.unwrap().unwrap();
    assert_eq!(view.state, ApprovalState::Decided(decision.clone()));
    assert_eq!(view.intent_digest, edited_intent);
    assert_eq!(edited_from(&view.request), Some(o.clone()));
    assert_eq!(view.request.arguments, json!("final"));
    let trail = store.approval_audit(o.clone()).await.unwrap();
    assert_eq!(
        trail.iter().map(|e| e.event.as_str()).collect::<Vec<_>>(),
        ["prepared", "decided", "refused", "edited"]
    );
    let detail = &trail[3].detail;
    assert_eq!(detail["edited"], "approval-2");
    assert_eq!(detail["approver"], "ada (page)");
    assert_eq!(detail["editedIntent"], edited_intent.as_str());
    assert_eq!(detail["originalIntent"], original.intent_digest.as_str());

    // The original is never claimed, under either intent; the edited one once.
    let original_intent = original.intent_digest.clone();
    for current in [original_intent, edited_intent.clone()] {
        assert_eq!(
            store.check_and_claim(o.clone(), current, now).await,
            Ok(ClaimVerdict::AlreadyClaimed)
        );
    }
    assert_eq!(
        store
            .check_and_claim(e.clone(), edited_intent.clone(), SystemTime::now())
            .await,
        Ok(ClaimVerdict::Claimed(IdempotencyKey(
            edited_intent.to_string()
        )))
    );
    assert_eq!(
        store
            .check_and_claim(e.clone(), edited_intent, SystemTime::now())
            .await,
        Ok(ClaimVerdict::AlreadyClaimed)
    );
    // Decided for good: neither a second edit nor a decision.
    assert_eq!(
        store
            .approve_with_edit(
                o.clone(),
                edited(&o, "edit-run", "again"),
                by_ada(Verdict::Approve)
            )
            .await,
        Err(StoreError::Conflict("already decided"))
    );
    assert_eq!(
        store.decide(o, by_ada(Verdict::Approve)).await,
        Err(StoreError::Conflict("already decided"))
    );
}

/// Through two instances, 10 edits (each to other arguments) and 10 decisions race for each of 5
/// approvals: exactly one wins each, and an approval edited has exactly one edited approval.
pub async fn racing_edits_and_decisions_of_one_approval_record_exactly_one<H: Harness>(h: &H) {
    let path = h.fresh("edit-race");
    let one = h.open(&path).await.unwrap();
    let two = h.open(&path).await.unwrap();
    for round in 0..5 {
        let run = format!("race-{round}");
        let o = one.prepare(asked(&run, "draft")).await.unwrap();
        let mut tasks = tokio::task::JoinSet::new();
        for n in 0..20 {
            let store = if n % 2 == 0 { one.clone() } else { two.clone() };
            let (o, run) = (o.clone(), run.clone());
            tasks.spawn(async move {
                if n < 10 {
                    let args = format!("edit-{n}");
                    store
                        .approve_with_edit(
                            o.clone(),
                            edited(&o, &run, &args),
                            by_ada(Verdict::Approve),
                        )
                        .await
                        .map(|_| ())
                } else {
                    store.decide(o, by_ada(Verdict::Deny)).await
                }
            });
        }
        let mut won = 0;
        while let Some(r) = tasks.join_next().await {
            match r.unwrap() {
                Ok(()) => won += 1,
                Err(e) => assert_eq!(e, StoreError::Conflict("already decided")),
            }
        }
        assert_eq!(won, 1, "round {round}");
        let views = one
            .approvals(ApprovalQuery::all().run(RunId::new(&run)))
            .await
            .unwrap();
        let edits = views
            .iter()
            .filter(|v| edited_from(&v.request).as_ref() == Some(&o))
            .count();
        match &views.iter().find(|v| v.id == o).unwrap().state {
            ApprovalState::Refused(_) => assert_eq!(edits, 1),
            ApprovalState::Decided(d) => {
                assert_eq!(d.verdict, Verdict::Deny);
                assert_eq!(edits, 0);
            }
            other => panic!("round {round}: {other:?}"),
        }
    }
}
