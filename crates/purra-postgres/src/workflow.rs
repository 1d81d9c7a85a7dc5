//! Approval workflows in PostgreSQL (purra-core's `workflow`), as purra-sqlite's: the rules an
//! approval was prepared with, its votes, escalation and the denial at expiry. A vote runs in the
//! decision's transaction, which holds the approval's row lock, so concurrent votes on one
//! approval (from any instance) are counted one after the other.

use crate::store::{append, exec, query, query_opt, Audit, Error, PostgresStore, Tx};
use purra_core::stored::{approval_id, approval_seq, from_ns, to_ns};
use purra_core::{
    voter_name, ApprovalId, ApprovalRef, ApprovalRequest, BoxFuture, Decision, StoreError, Verdict,
    Vote, WebhookEvent, WebhookEventType, EXPIRY_APPROVER, EXPIRY_NOTE,
};
use serde_json::{json, Value};
use std::time::SystemTime;

/// The most approvals one sweep escalates or denies (the next sweep takes the rest).
const SWEEP_BATCH: i64 = 100;

fn verdict_word(v: Verdict) -> &'static str {
    match v {
        Verdict::Approve => "approve",
        Verdict::Deny => "deny",
    }
}

/// Records the workflow rules of `request`, prepared as approval `seq` (nothing without any).
pub(crate) async fn insert_rules(
    tx: &Tx<'_>,
    seq: i64,
    request: &ApprovalRequest,
) -> Result<(), Error> {
    let required = request.votes_required().map(i64::from);
    let escalate = request
        .escalates_at()
        .filter(|_| !request.escalate_to().is_empty())
        .map(to_ns)
        .transpose()?;
    let deny = match request.expires_at {
        Some(at) if request.denies_on_expiry() => Some(to_ns(at)?),
        _ => None,
    };
    if required.is_none() && escalate.is_none() && deny.is_none() {
        return Ok(());
    }
    exec(
        tx,
        "INSERT INTO approval_rules (approval_seq, votes_required, escalate_at_ns, deny_at_ns)
         VALUES ($1, $2, $3, $4)",
        &[&seq, &required, &escalate, &deny],
    )
    .await?;
    Ok(())
}

/// Whether a decision decides the approval or was one vote that leaves it pending.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Voted {
    /// The approval is decided now (no quorum rule, a deny, or the vote that completes it).
    Decides,
    /// The vote is recorded; the approval still waits for more.
    Pending,
}

async fn approving_votes(tx: &Tx<'_>, seq: i64) -> Result<i64, Error> {
    Ok(query_opt(
        tx,
        "SELECT COUNT(*) FROM approval_votes WHERE approval_seq = $1 AND verdict = 'approve'",
        &[&seq],
    )
    .await?
    .map_or(0, |r| r.get::<_, i64>(0)))
}

/// Records `decision` on pending approval `seq` (its row locked by the caller) as a vote when
/// the approval needs a quorum (`required`, its rule's votes, read with that lock): `Conflict("already voted")` for a second vote of the same
/// voter; the `voted` audit row (witnessed by `op`); and for an approving vote short of the
/// quorum the `approval.voted` event.
#[allow(clippy::too_many_arguments)] // One vote's parts and the rule read with the approval.
pub(crate) async fn vote_in(
    tx: &Tx<'_>,
    me: &str,
    op: &str,
    seq: i64,
    required: Option<i64>,
    decision: &Decision,
    approval: &ApprovalRef,
) -> Result<Voted, Error> {
    let Some(required) = required else {
        return Ok(Voted::Decides);
    };
    let voter = voter_name(&decision.approver);
    let verdict = verdict_word(decision.verdict);
    let at = to_ns(decision.decided_at)?;
    let added = exec(
        tx,
        "INSERT INTO approval_votes (approval_seq, voter, approver, verdict, at_ns, note)
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
        &[
            &seq,
            &voter,
            &decision.approver,
            &verdict,
            &at,
            &decision.note,
        ],
    )
    .await?;
    if added != 1 {
        return Err(StoreError::Conflict("already voted").into());
    }
    let approves = approving_votes(tx, seq).await?;
    append(
        tx,
        me,
        Some(op),
        Audit::new(
            "voted",
            json!({"voter": voter, "approver": decision.approver, "verdict": verdict,
                   "note": decision.note, "votes": approves, "required": required}),
        )
        .approval(&approval.id.0),
    )
    .await?;
    if decision.verdict == Verdict::Deny || approves >= required {
        return Ok(Voted::Decides);
    }
    if crate::webhook::wanted(tx, WebhookEventType::ApprovalVoted).await? {
        let vote = Vote {
            voter: voter.to_owned(),
            approver: decision.approver.clone(),
            verdict: decision.verdict,
            at: decision.decided_at,
            note: decision.note.clone(),
        };
        let event = WebhookEvent::voted(
            approval,
            &vote,
            u32::try_from(approves).unwrap_or(u32::MAX),
            u32::try_from(required).unwrap_or(u32::MAX),
            SystemTime::now(),
        );
        crate::webhook::insert(tx, &event).await?;
    }
    Ok(Voted::Pending)
}

/// Whether approval `seq`, whose rule requires `required` approving votes (read with its row
/// lock), has fewer (counted in the claim's transaction: a claim without its quorum is refused).
pub(crate) async fn quorum_missing(
    tx: &Tx<'_>,
    seq: i64,
    required: Option<i64>,
) -> Result<bool, Error> {
    match required {
        None => Ok(false),
        Some(required) => Ok(approving_votes(tx, seq).await? < required),
    }
}

/// Clears the timers of approval `seq`, decided now (it neither escalates nor expires any more).
pub(crate) async fn clear_timers(tx: &Tx<'_>, seq: i64) -> Result<(), Error> {
    exec(
        tx,
        "UPDATE approval_rules SET escalate_at_ns = NULL, deny_at_ns = NULL
         WHERE approval_seq = $1 AND (escalate_at_ns IS NOT NULL OR deny_at_ns IS NOT NULL)",
        &[&seq],
    )
    .await?;
    Ok(())
}

/// The votes on approval `id`, in the order they were cast.
pub(crate) fn votes(
    store: &PostgresStore,
    id: ApprovalId,
) -> BoxFuture<'_, Result<Vec<Vote>, StoreError>> {
    Box::pin(async move {
        let Some(seq) = approval_seq(&id) else {
            return Ok(Vec::new());
        };
        store
            .read(move |c| async move {
                let rows = query(
                    &c,
                    "SELECT voter, approver, verdict, at_ns, note FROM approval_votes
                     WHERE approval_seq = $1 ORDER BY at_ns, voter",
                    &[&seq],
                )
                .await?;
                Ok(rows
                    .iter()
                    .map(|r| Vote {
                        voter: r.get(0),
                        approver: r.get(1),
                        verdict: if r.get::<_, &str>(2) == "approve" {
                            Verdict::Approve
                        } else {
                            Verdict::Deny
                        },
                        at: from_ns(r.get(3)),
                        note: r.get(4),
                    })
                    .collect())
            })
            .await
    })
}

struct Due {
    seq: i64,
    pending: bool,
    approval: ApprovalRef,
    request_expires: Option<i64>,
    request_json: Option<String>,
}

async fn due(tx: &Tx<'_>, escalate: bool, now: i64) -> Result<Vec<Due>, Error> {
    // The rows are locked in the order of their approvals, as every decision locks them.
    let sql = if escalate {
        "SELECT r.approval_seq, a.state, a.tool, a.principal, a.request_expires_at_ns,
                a.request_json
         FROM approval_rules r JOIN approvals a ON a.seq = r.approval_seq
         WHERE r.escalate_at_ns IS NOT NULL AND r.escalated_at_ns IS NULL
           AND r.escalate_at_ns <= $1
         ORDER BY r.approval_seq LIMIT $2 FOR UPDATE OF a, r"
    } else {
        "SELECT r.approval_seq, a.state, a.tool, a.principal, a.request_expires_at_ns,
                a.request_json
         FROM approval_rules r JOIN approvals a ON a.seq = r.approval_seq
         WHERE r.deny_at_ns IS NOT NULL AND r.deny_at_ns <= $1
         ORDER BY r.approval_seq LIMIT $2 FOR UPDATE OF a, r"
    };
    let rows = query(tx, sql, &[&now, &SWEEP_BATCH]).await?;
    Ok(rows
        .iter()
        .map(|r| {
            let seq: i64 = r.get(0);
            Due {
                seq,
                pending: r.get::<_, &str>(1) == "prepared",
                approval: ApprovalRef {
                    id: approval_id(seq),
                    tool: r.get(2),
                    principal: r.get(3),
                },
                request_expires: r.get(4),
                request_json: r.get(5),
            }
        })
        .collect())
}

/// Escalates every pending approval whose escalation time passed at `now` (once: the rows are
/// locked and marked in one transaction), with its `escalated` audit row and event.
pub(crate) fn escalate_due(
    store: &PostgresStore,
    now: SystemTime,
) -> BoxFuture<'_, Result<Vec<ApprovalId>, StoreError>> {
    let op = store.op_token();
    Box::pin(async move {
        let now = to_ns(now)?;
        store
            .transact(move |tx, me, _| {
                let op = op.clone();
                Box::pin(async move {
                    let mut out = Vec::new();
                    for d in due(tx, true, now).await? {
                        if !d.pending || d.request_expires.is_some_and(|e| e <= now) {
                            clear_timers(tx, d.seq).await?;
                            continue;
                        }
                        exec(
                            tx,
                            "UPDATE approval_rules SET escalated_at_ns = $2
                             WHERE approval_seq = $1",
                            &[&d.seq, &now],
                        )
                        .await?;
                        let to = d
                            .request_json
                            .as_deref()
                            .and_then(|j| serde_json::from_str::<ApprovalRequest>(j).ok())
                            .map(|r| r.escalate_to())
                            .unwrap_or_default();
                        append(
                            tx,
                            me,
                            Some(&op),
                            Audit::new("escalated", json!({"escalateTo": to, "atNs": now}))
                                .approval(&d.approval.id.0),
                        )
                        .await?;
                        notify(
                            tx,
                            WebhookEventType::ApprovalEscalated,
                            &d.approval,
                            ("escalateTo", json!(to)),
                            now,
                        )
                        .await?;
                        out.push(d.approval.id);
                    }
                    Ok(out)
                })
            })
            .await
    })
}

/// Denies every approval still pending at its request's expiry whose request says
/// `on_expiry = "deny"` (decided `deny` by [`EXPIRY_APPROVER`]), with the `decided` audit row
/// that wakes waiting callers, an `expired` row and the `approval.expired` event.
pub(crate) fn expire_due(
    store: &PostgresStore,
    now: SystemTime,
) -> BoxFuture<'_, Result<Vec<ApprovalId>, StoreError>> {
    let op = store.op_token();
    Box::pin(async move {
        let now = to_ns(now)?;
        store
            .transact(move |tx, me, _| {
                let op = op.clone();
                Box::pin(async move {
                    let mut out = Vec::new();
                    for d in due(tx, false, now).await? {
                        clear_timers(tx, d.seq).await?;
                        if !d.pending {
                            continue;
                        }
                        let decided_at = d.request_expires.unwrap_or(now);
                        exec(
                            tx,
                            "UPDATE approvals SET state = 'decided', verdict = 'deny',
                                    approver = $2, decided_at_ns = $3, expires_at_ns = NULL,
                                    note = $4
                             WHERE seq = $1",
                            &[&d.seq, &EXPIRY_APPROVER, &decided_at, &EXPIRY_NOTE],
                        )
                        .await?;
                        append(
                            tx,
                            me,
                            Some(&op),
                            Audit::new(
                                "decided",
                                json!({"verdict": "deny", "approver": EXPIRY_APPROVER,
                                       "decidedAtNs": decided_at, "expiresAtNs": null,
                                       "note": EXPIRY_NOTE, "expired": true}),
                            )
                            .approval(&d.approval.id.0),
                        )
                        .await?;
                        append(
                            tx,
                            me,
                            None,
                            Audit::new("expired", json!({"reason": EXPIRY_NOTE, "atNs": now}))
                                .approval(&d.approval.id.0),
                        )
                        .await?;
                        notify(
                            tx,
                            WebhookEventType::ApprovalExpired,
                            &d.approval,
                            ("reason", json!(EXPIRY_NOTE)),
                            now,
                        )
                        .await?;
                        out.push(d.approval.id);
                    }
                    Ok(out)
                })
            })
            .await
    })
}

/// Records the workflow event `kind` of `approval` (with its one extra field) in the outbox, in
/// `tx`, when an endpoint wants it.
async fn notify(
    tx: &Tx<'_>,
    kind: WebhookEventType,
    approval: &purra_core::ApprovalRef,
    field: (&str, Value),
    now: i64,
) -> Result<(), Error> {
    if crate::webhook::wanted(tx, kind).await? {
        let event = WebhookEvent::workflow(kind, approval, field, from_ns(now));
        crate::webhook::insert(tx, &event).await?;
    }
    Ok(())
}
