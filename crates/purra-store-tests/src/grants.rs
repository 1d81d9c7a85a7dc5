//! Standing grants: uses taken at most `max_uses` times by racing store instances, each with the
//! approval it approves in the same transaction; nothing taken for another principal or tool,
//! after a revocation or after the grant's end.

use crate::{intent, Harness};
use purra_core::*;
use serde_json::json;
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

/// The request of `principal`'s call of `update` with the JSON string `args`.
fn request_of(principal: &str, args: &str) -> ApprovalRequest {
    let mut i = intent(args);
    i.run_id = RunId::new(format!("grant-run-{args}"));
    ApprovalRequest {
        intent: i,
        arguments: json!(args),
        binding: crate::binding(),
        requested_by: principal.into(),
        requested_at: SystemTime::now(),
        expires_at: Some(SystemTime::now() + Duration::from_secs(600)),
        labels: BTreeMap::from([(PRINCIPAL_LABEL.to_owned(), principal.to_owned())]),
    }
}

fn approved_by(grant: &GrantId) -> Decision {
    let now = SystemTime::now();
    Decision {
        verdict: Verdict::Approve,
        approver: DecisionPath::Grant.approver(&format!("{grant} by ada")),
        decided_at: now,
        expires_at: Some(now + Duration::from_secs(600)),
        note: Some("standing".into()),
    }
}

fn grant(principal: &str, uses: u32, until: SystemTime) -> NewGrant {
    NewGrant {
        principal: principal.into(),
        tool: "update".into(),
        rules: vec!["len(text) <= 10".into()],
        max_uses: uses,
        until,
        granted_by: "ada".into(),
        note: Some("standing".into()),
    }
}

/// 40 uses raced by two instances of the store against a grant of 7: exactly 7 taken, each
/// with its approval approved by the grant and audited; the grant lists them.
pub async fn grant_uses_are_taken_at_most_max_uses_times_by_racing_instances<H: Harness>(h: &H) {
    let path = h.fresh("grants");
    let one = h.open(&path).await.unwrap();
    let two = h.open(&path).await.unwrap();
    let until = SystemTime::now() + Duration::from_secs(3600);
    let id = one.add_grant(grant("alice", 7, until)).await.unwrap();
    assert_eq!(id, GrantId("grant-1".into()));
    let mut tasks = tokio::task::JoinSet::new();
    for n in 0..40 {
        let store = if n % 2 == 0 { one.clone() } else { two.clone() };
        let id = id.clone();
        tasks.spawn(async move {
            store
                .use_grant(
                    id.clone(),
                    request_of("alice", &format!("call-{n}")),
                    approved_by(&id),
                    SystemTime::now(),
                )
                .await
                .unwrap()
        });
    }
    let mut approvals = Vec::new();
    while let Some(r) = tasks.join_next().await {
        approvals.extend(r.unwrap());
    }
    assert_eq!(approvals.len(), 7);
    let view = two.grant(id.clone()).await.unwrap().unwrap();
    assert_eq!((view.used, view.uses_left()), (7, 0));
    assert_eq!(view.grant.rules, ["len(text) <= 10"]);
    let mut listed: Vec<_> = view.uses.iter().map(|u| u.approval_id.clone()).collect();
    listed.sort();
    approvals.sort();
    assert_eq!(listed, approvals);
    let record = one.approval(approvals[0].clone()).await.unwrap().unwrap();
    match &record.state {
        ApprovalState::Decided(d) => {
            assert_eq!(d.approver, "grant-1 by ada (grant)");
            assert_eq!(d.verdict, Verdict::Approve);
        }
        other => panic!("not approved by the grant: {other:?}"),
    }
    let trail = one.approval_audit(approvals[0].clone()).await.unwrap();
    let events: Vec<&str> = trail.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(events, ["prepared", "decided", "grant_used"]);
    assert_eq!(trail[2].detail["grant"], "grant-1");
    // Used up: nothing more, and nothing is written.
    let before = one.count_approvals(ApprovalQuery::all()).await.unwrap();
    let more = one
        .use_grant(
            id.clone(),
            request_of("alice", "late"),
            approved_by(&id),
            SystemTime::now(),
        )
        .await
        .unwrap();
    assert_eq!(more, None);
    assert_eq!(
        one.count_approvals(ApprovalQuery::all()).await.unwrap(),
        before
    );
    assert_eq!(
        one.live_grants("alice".into(), "update".into(), SystemTime::now())
            .await
            .unwrap(),
        vec![]
    );
}

/// A grant is used only by its principal for its tool, before its end and until revoked.
pub async fn grants_cover_their_principal_tool_and_time_until_revoked<H: Harness>(h: &H) {
    let path = h.fresh("grants-bounds");
    let store = h.open(&path).await.unwrap();
    let now = SystemTime::now();
    let id = store
        .add_grant(grant("alice", 5, now + Duration::from_secs(60)))
        .await
        .unwrap();
    let take = |principal: &str, args: &str, at: SystemTime| {
        let (store, id, req) = (store.clone(), id.clone(), request_of(principal, args));
        async move {
            let d = approved_by(&id);
            store.use_grant(id, req, d, at).await.unwrap()
        }
    };
    assert_eq!(take("bob", "b", now).await, None);
    let mut other_tool = request_of("alice", "t");
    other_tool.intent.tool = "delete".into();
    other_tool.intent.checkpoint_call.tool = "delete".into();
    assert_eq!(
        store
            .use_grant(id.clone(), other_tool, approved_by(&id), now)
            .await
            .unwrap(),
        None
    );
    // At or after its end: not used.
    assert_eq!(
        take("alice", "late", now + Duration::from_secs(60)).await,
        None
    );
    assert!(take("alice", "a", now).await.is_some());
    let live = store
        .live_grants("alice".into(), "update".into(), now)
        .await
        .unwrap();
    assert_eq!(live.len(), 1);
    assert_eq!((live[0].used, live[0].status(now)), (1, "live"));
    store
        .revoke_grant(id.clone(), "ada (cli)".into())
        .await
        .unwrap();
    assert_eq!(take("alice", "after", now).await, None);
    assert_eq!(
        store.revoke_grant(id.clone(), "ada (cli)".into()).await,
        Err(StoreError::Conflict("already revoked"))
    );
    assert_eq!(
        store
            .revoke_grant(GrantId("grant-99".into()), "ada".into())
            .await,
        Err(StoreError::NotFound)
    );
    let view = store.grant(id.clone()).await.unwrap().unwrap();
    assert_eq!(view.status(now), "revoked");
    assert_eq!(view.revoked.map(|(_, by)| by), Some("ada (cli)".to_owned()));
    assert_eq!(store.grants(10).await.unwrap().len(), 1);
    // Out of bounds: refused, nothing recorded.
    assert!(store
        .add_grant(grant("alice", 0, now + Duration::from_secs(60)))
        .await
        .is_err());
    assert!(store
        .add_grant(grant("alice", 1, now - Duration::from_secs(1)))
        .await
        .is_err());
    assert_eq!(store.grants(10).await.unwrap().len(), 1);
}
