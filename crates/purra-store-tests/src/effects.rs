//! Contract tests of the operator's effects: claims listed newest first (the `unknown` ones
//! alone when asked), one effect with its approval's tool and arguments, an `unknown` one
//! changed only by an operator's recorded decision (who and bounded evidence, audited, the
//! `effect.reconciled` event) or by its one resend.

use crate::*;
use serde_json::{json, Value};

fn endpoint_all() -> WebhookEndpoint {
    WebhookEndpoint {
        name: "ops".into(),
        events: WebhookEventType::ALL.to_vec(),
    }
}

/// An approved, claimed call of `args` completed with `outcome`; its key.
async fn claimed<S: OperatorStore>(
    store: &S,
    args: &str,
    outcome: EffectOutcome,
) -> IdempotencyKey {
    let id = store.prepare(request(args)).await.unwrap();
    store
        .decide(id.clone(), decision(Verdict::Approve, None))
        .await
        .unwrap();
    let ClaimVerdict::Claimed(key) = store
        .check_and_claim(id, intent(args).digest(), at(20))
        .await
        .unwrap()
    else {
        panic!("not claimed")
    };
    store.complete(key.clone(), outcome).await.unwrap();
    key
}

/// Contract test.
pub async fn unknown_effects_are_listed_shown_and_changed_only_by_a_recorded_decision<
    H: Harness,
>(
    h: &H,
) {
    let store = h.open(&h.fresh("effects")).await.unwrap();
    store
        .set_webhook_endpoints(vec![endpoint_all()])
        .await
        .unwrap();
    let ka = claimed(
        &store,
        "a",
        EffectOutcome::Committed {
            receipt: json!({"n": 1}),
        },
    )
    .await;
    let kb = claimed(&store, "b", unknown("mcp_timeout")).await;
    let kc = claimed(&store, "c", unknown("mcp_connection_closed")).await;
    let words = |p: &EffectPage| -> Vec<(String, &'static str)> {
        p.effects
            .iter()
            .map(|e| (e.key.0.clone(), e.effect_word()))
            .collect()
    };
    // Newest first; the unknown ones alone; a page at a time with a cursor.
    let all = store.effects(EffectQuery::all()).await.unwrap();
    assert_eq!(
        words(&all),
        vec![
            (kc.0.clone(), "unknown"),
            (kb.0.clone(), "unknown"),
            (ka.0.clone(), "committed")
        ]
    );
    assert_eq!(all.next, None);
    let first = store
        .effects(EffectQuery::unknown().limit(1))
        .await
        .unwrap();
    assert_eq!(words(&first), vec![(kc.0.clone(), "unknown")]);
    assert_eq!(first.next, Some(kc.clone()));
    let second = store
        .effects(EffectQuery::unknown().limit(1).before(kc.clone()))
        .await
        .unwrap();
    assert_eq!(
        (words(&second), second.next),
        (vec![(kb.0.clone(), "unknown")], None)
    );
    assert_eq!(
        store
            .effects(EffectQuery::all().before(IdempotencyKey("nope".into())))
            .await,
        Err(StoreError::NotFound)
    );
    // One effect: who claimed it, the approval, the tool and the arguments sent.
    let b = store.effect(kb.clone()).await.unwrap().unwrap();
    assert_eq!(b.owner, store.owner());
    assert_eq!(b.approval, Some(ApprovalId("approval-2".into())));
    assert_eq!(
        (b.tool.as_deref(), b.arguments.clone()),
        (Some("update"), Some(json!("b")))
    );
    assert_eq!(
        b.state,
        ClaimState::Completed {
            outcome: unknown("mcp_timeout")
        }
    );
    assert_eq!((b.reconciled.clone(), b.resend.clone()), (None, None));
    assert_eq!(store.effect(IdempotencyKey("nope".into())).await, Ok(None));

    // Refused, nothing changed: no operator, evidence over the bound.
    let committed = EffectOutcome::Committed {
        receipt: json!({"reconciled": true}),
    };
    assert_eq!(
        store
            .reconcile_effect(kb.clone(), " ".into(), "ledger".into(), committed.clone())
            .await,
        Err(StoreError::Conflict("a reconciliation names who decided"))
    );
    assert_eq!(
        store
            .reconcile_effect(
                kb.clone(),
                "ada".into(),
                "x".repeat(MAX_EVIDENCE_BYTES + 1),
                committed.clone()
            )
            .await,
        Err(StoreError::Conflict(
            "the evidence is longer than 4096 bytes"
        ))
    );
    assert_eq!(store.effect(kb.clone()).await.unwrap().unwrap(), b);
    let evidence = "the upstream's ledger has entry 7 for b";
    store
        .reconcile_effect(kb.clone(), "ada".into(), evidence.into(), committed.clone())
        .await
        .unwrap();
    let b = store.effect(kb.clone()).await.unwrap().unwrap();
    assert_eq!(
        b.state,
        ClaimState::Completed {
            outcome: committed.clone()
        }
    );
    let r = b.reconciled.unwrap();
    assert_eq!((r.by.as_str(), r.evidence.as_str()), ("ada", evidence));
    let last = store.audit(0, 1000).await.unwrap().pop().unwrap();
    assert_eq!(
        (last.event.as_str(), last.claim_key.as_deref()),
        ("reconciled", Some(kb.0.as_str()))
    );
    assert_eq!(last.detail["by"], "ada");
    assert_eq!(last.detail["evidence"], evidence);
    // The queue moved on.
    let queue = store.effects(EffectQuery::unknown()).await.unwrap();
    assert_eq!(words(&queue), vec![(kc.0.clone(), "unknown")]);
    // The events of the reconciliation, in its transaction.
    let views = store.webhook_deliveries(WebhookQuery::all()).await.unwrap();
    let tail: Vec<(&str, Value)> = views
        .iter()
        .rev()
        .take(2)
        .map(|v| {
            let p: Value = serde_json::from_str(&v.payload).unwrap();
            (v.event_type.as_str(), p["data"].clone())
        })
        .collect();
    assert_eq!(
        tail,
        vec![
            (
                "effect.reconciled",
                json!({"approval": "approval-2", "tool": "update", "principal": null,
                       "key": kb.0, "outcome": "committed", "by": "ada", "evidence": evidence})
            ),
            (
                "effect.committed",
                json!({"approval": "approval-2", "tool": "update", "principal": null,
                       "key": kb.0, "effect": "committed", "reconciled": true})
            ),
        ]
    );
}

/// Contract test.
pub async fn an_unknown_effect_is_resent_at_most_once_and_records_what_came_back<H: Harness>(
    h: &H,
) {
    let path = h.fresh("resend");
    let a = h.open(&path).await.unwrap();
    let b = h.open(&path).await.unwrap();
    let done = claimed(&a, "a", EffectOutcome::Committed { receipt: json!({}) }).await;
    assert_eq!(
        a.claim_resend(done, "ada".into()).await,
        Err(StoreError::Conflict("only an unknown effect is resent"))
    );
    assert_eq!(
        a.claim_resend(IdempotencyKey("nope".into()), "ada".into())
            .await,
        Err(StoreError::NotFound)
    );
    let k = claimed(&a, "b", unknown("mcp_connection_closed")).await;
    assert_eq!(
        a.complete_resend(k.clone(), unknown("x")).await,
        Err(StoreError::Conflict(
            "no resend of this effect is waiting for its outcome"
        ))
    );
    // Nothing left: the claim is released and may be made again.
    assert_eq!(
        a.claim_resend(k.clone(), "ada".into()).await,
        Ok(ResendClaim::Claimed)
    );
    a.complete_resend(k.clone(), EffectOutcome::NotStarted)
        .await
        .unwrap();
    assert_eq!(a.effect(k.clone()).await.unwrap().unwrap().resend, None);
    // Claimed once, whichever instance asks.
    assert_eq!(
        a.claim_resend(k.clone(), "ada".into()).await,
        Ok(ResendClaim::Claimed)
    );
    let ResendClaim::AlreadyResent(first) = b.claim_resend(k.clone(), "bob".into()).await.unwrap()
    else {
        panic!("a second resend was claimed")
    };
    assert_eq!(
        (first.by.as_str(), first.owner.as_str(), &first.outcome),
        ("ada", a.owner(), &None)
    );
    let receipt = EffectOutcome::Committed {
        receipt: json!({"text": ["done"], "structured": null}),
    };
    a.complete_resend(k.clone(), receipt.clone()).await.unwrap();
    let view = b.effect(k.clone()).await.unwrap().unwrap();
    assert_eq!(
        view.state,
        ClaimState::Completed {
            outcome: receipt.clone()
        }
    );
    let resend = view.resend.unwrap();
    assert_eq!(
        (resend.by.as_str(), resend.outcome),
        ("ada", Some(receipt.clone()))
    );
    assert!(matches!(
        b.claim_resend(k.clone(), "bob".into()).await,
        Ok(ResendClaim::AlreadyResent(_))
    ));
    assert_eq!(
        a.complete_resend(k.clone(), receipt).await,
        Err(StoreError::Conflict(
            "no resend of this effect is waiting for its outcome"
        ))
    );
    let events: Vec<String> = a
        .audit(0, 1000)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.claim_key.as_deref() == Some(k.0.as_str()))
        .map(|e| e.event)
        .collect();
    assert_eq!(
        events,
        [
            "claimed",
            "outcome",
            "resend_claimed",
            "resend_not_sent",
            "resend_claimed",
            "resent"
        ]
    );
}
