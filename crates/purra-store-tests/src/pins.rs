//! Pinned tool definitions and catalog changes: the first pin of a tool wins and is kept; three
//! instances recording the same difference at once keep one change and one `catalog.changed`
//! event; approving re-pins (a removal keeps its pin) in the same step and refuses a change whose
//! pin moved since; a decision is final.

use crate::*;
use purra_core::pins::definition_digest;
use purra_core::{
    CatalogChangeKind, CatalogChangeState, CatalogDecision, CatalogPins, SeenChange, ToolPin,
};
use serde_json::Value;

fn definition(description: &str) -> Value {
    json!({"description": description, "inputSchema": {"type": "object"}})
}

fn seen(pin: &ToolPin, new: Option<Value>, by: &str) -> SeenChange {
    SeenChange {
        pin: pin.clone(),
        new_definition: new,
        seen_by: by.into(),
        seen_at: at(30),
    }
}

fn decision(approve: bool, by: &str) -> CatalogDecision {
    CatalogDecision {
        approve,
        by: by.into(),
        note: Some("reviewed".into()),
        at: at(40),
    }
}

/// Contract test.
pub async fn a_difference_is_kept_once_and_approving_it_re_pins<H: Harness>(h: &H) {
    let location = h.fresh("pins");
    let store = h.open(&location).await.unwrap();
    store
        .set_webhook_endpoints(vec![WebhookEndpoint {
            name: "ops".into(),
            events: vec![WebhookEventType::CatalogChanged],
        }])
        .await
        .unwrap();

    // The first pin wins; a later one of another definition changes nothing.
    let first = ToolPin::new("docs", "lookup", definition("Looks up q."), "gw-1", at(10)).unwrap();
    assert_eq!(store.pin_tool(first.clone()).await, Ok(first.clone()));
    let other = ToolPin::new("docs", "lookup", definition("Other."), "gw-2", at(11)).unwrap();
    assert_eq!(store.pin_tool(other).await, Ok(first.clone()));
    assert_eq!(
        store.tool_pins("docs".into()).await,
        Ok(vec![first.clone()])
    );
    assert_eq!(store.tool_pins("elsewhere".into()).await, Ok(vec![]));

    // Three instances see the same difference at once: one change, recorded by one of them.
    let instances = [
        h.open(&location).await.unwrap(),
        h.open(&location).await.unwrap(),
        h.open(&location).await.unwrap(),
    ];
    let changed = definition("Looks up q. Then mails it elsewhere.");
    let [a, b, c] = &instances;
    let (ra, rb, rc) = tokio::join!(
        a.note_catalog_change(seen(&first, Some(changed.clone()), "gw-0")),
        b.note_catalog_change(seen(&first, Some(changed.clone()), "gw-1")),
        c.note_catalog_change(seen(&first, Some(changed.clone()), "gw-2")),
    );
    let results = [ra, rb, rc];
    let results: Vec<_> = results.into_iter().map(Result::unwrap).collect();
    assert_eq!(
        results.iter().filter(|(_, new)| *new).count(),
        1,
        "{results:?}"
    );
    let change = results[0].0.clone();
    assert!(results.iter().all(|(c, _)| c == &change));
    assert_eq!(change.id, 1);
    assert_eq!(
        (
            change.kind,
            change.state,
            change.upstream.as_str(),
            change.tool.as_str()
        ),
        (
            CatalogChangeKind::Changed,
            CatalogChangeState::Pending,
            "docs",
            "lookup"
        )
    );
    assert_eq!(change.old_definition, first.definition);
    assert_eq!(change.old_digest, first.digest);
    assert_eq!(change.new_definition.as_ref(), Some(&changed));
    assert_eq!(
        change.new_digest,
        Some(definition_digest(&changed).unwrap())
    );
    assert_eq!(change.seen_at, at(30));
    // Seen again later (a refresh): the same change, nothing new recorded.
    assert_eq!(
        store
            .note_catalog_change(seen(&first, Some(changed.clone()), "gw-9"))
            .await,
        Ok((change.clone(), false))
    );
    let events = store.webhook_deliveries(WebhookQuery::all()).await.unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].event_type, WebhookEventType::CatalogChanged);
    let payload: Value = serde_json::from_str(&events[0].payload).unwrap();
    assert_eq!(payload["type"], "catalog.changed");
    assert_eq!(
        (
            &payload["data"]["change"],
            &payload["data"]["upstream"],
            &payload["data"]["tool"],
            &payload["data"]["kind"],
        ),
        (
            &json!(1),
            &json!("docs"),
            &json!("lookup"),
            &json!("changed")
        )
    );
    assert_eq!(payload["data"]["newDigest"], json!(change.new_digest));

    // Another difference from the same pin: a second change.
    let again = definition("Looks up q, differently.");
    let (second, new) = store
        .note_catalog_change(seen(&first, Some(again.clone()), "gw-1"))
        .await
        .unwrap();
    assert!(new);
    assert_eq!(second.id, 2);
    let pending = store.catalog_changes(true).await.unwrap();
    assert_eq!(pending.iter().map(|c| c.id).collect::<Vec<_>>(), [2, 1]);

    // Approving re-pins; the decision is final; the other change's pin moved since.
    let blank = CatalogDecision {
        by: " ".into(),
        ..decision(true, "x")
    };
    assert!(matches!(
        store.decide_catalog_change(1, blank).await,
        Err(StoreError::Conflict(_))
    ));
    let approved = store
        .decide_catalog_change(1, decision(true, "ada"))
        .await
        .unwrap();
    assert_eq!(approved.state, CatalogChangeState::Approved);
    assert_eq!(approved.decided_by.as_deref(), Some("ada"));
    assert_eq!(approved.decided_at, Some(at(40)));
    assert_eq!(approved.note.as_deref(), Some("reviewed"));
    let pins = store.tool_pins("docs".into()).await.unwrap();
    assert_eq!(pins.len(), 1);
    assert_eq!(pins[0].definition, changed);
    assert_eq!(pins[0].digest, definition_digest(&changed).unwrap());
    assert_eq!(
        (pins[0].pinned_by.as_str(), pins[0].pinned_at),
        ("ada", at(40))
    );
    assert!(matches!(
        store.decide_catalog_change(1, decision(false, "bob")).await,
        Err(StoreError::Conflict(_))
    ));
    assert!(matches!(
        store.decide_catalog_change(2, decision(true, "ada")).await,
        Err(StoreError::Conflict(_))
    ));
    let denied = store
        .decide_catalog_change(2, decision(false, "bob"))
        .await
        .unwrap();
    assert_eq!(denied.state, CatalogChangeState::Denied);
    assert_eq!(store.catalog_changes(true).await, Ok(vec![]));
    assert_eq!(store.catalog_changes(false).await.unwrap().len(), 2);
    assert_eq!(store.catalog_change(2).await, Ok(Some(denied)));
    assert_eq!(store.catalog_change(99).await, Ok(None));
    assert_eq!(
        store.decide_catalog_change(99, decision(true, "ada")).await,
        Err(StoreError::NotFound)
    );

    // No longer listed: a removal; approving it acknowledges it and keeps the pin.
    let pin = store.tool_pins("docs".into()).await.unwrap().remove(0);
    let (removed, new) = store
        .note_catalog_change(seen(&pin, None, "gw-1"))
        .await
        .unwrap();
    assert!(new);
    assert_eq!(
        (
            removed.kind,
            removed.new_definition.clone(),
            removed.new_digest.clone()
        ),
        (CatalogChangeKind::Removed, None, None)
    );
    store
        .decide_catalog_change(removed.id, decision(true, "ada"))
        .await
        .unwrap();
    assert_eq!(store.tool_pins("docs".into()).await, Ok(vec![pin]));
    assert_eq!(
        store
            .webhook_deliveries(WebhookQuery::all())
            .await
            .unwrap()
            .len(),
        3
    );
}
