//! Approval workflows in SQLite (purra-core's `workflow`): the rules an approval was prepared
//! with, its votes, escalation and the denial at expiry. Every function runs inside the caller's
//! IMMEDIATE transaction, so a vote, its count and the decision it makes commit together.

use crate::audit::{append, Trail};
use crate::store::{backend, now_ns, Cached};
use purra_core::stored::{approval_id, from_ns, to_ns};
use purra_core::{
    voter_name, ApprovalId, ApprovalRequest, Decision, StoreError, Verdict, Vote, WebhookEvent,
    WebhookEventType, EXPIRY_APPROVER, EXPIRY_NOTE,
};
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::json;

/// The most approvals one sweep escalates or denies (the next sweep takes the rest).
const SWEEP_BATCH: i64 = 100;

fn verdict_word(v: Verdict) -> &'static str {
    match v {
        Verdict::Approve => "approve",
        Verdict::Deny => "deny",
    }
}

/// Records the workflow rules of `request`, prepared as approval `seq` (nothing without any).
pub(crate) fn insert_rules(
    tx: &Connection,
    seq: i64,
    request: &ApprovalRequest,
) -> Result<(), StoreError> {
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
    tx.exec(
        "INSERT INTO approval_rules (approval_seq, votes_required, escalate_at_ns, deny_at_ns)
         VALUES (?1, ?2, ?3, ?4)",
        params![seq, required, escalate, deny],
    )
    .map_err(backend)?;
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

/// Records `decision` on pending approval `seq` as a vote when the approval needs a quorum:
/// `Conflict("already voted")` for a second vote of the same voter; the `voted` audit row; and
/// for an approving vote short of the quorum the `approval.voted` event.
pub(crate) fn vote_in(
    tx: &Connection,
    me: &str,
    seq: i64,
    id: &ApprovalId,
    decision: &Decision,
    approval: impl FnOnce() -> purra_core::ApprovalRef,
) -> Result<Voted, StoreError> {
    let required: Option<i64> = tx
        .row(
            "SELECT votes_required FROM approval_rules WHERE approval_seq = ?1",
            params![seq],
            |r| r.get(0),
        )
        .optional()
        .map_err(backend)?
        .flatten();
    let Some(required) = required else {
        return Ok(Voted::Decides);
    };
    let voter = voter_name(&decision.approver);
    let verdict = verdict_word(decision.verdict);
    let at = to_ns(decision.decided_at)?;
    let added = tx
        .exec(
            "INSERT INTO approval_votes (approval_seq, voter, approver, verdict, at_ns, note)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO NOTHING",
            params![seq, voter, decision.approver, verdict, at, decision.note],
        )
        .map_err(backend)?;
    if added != 1 {
        return Err(StoreError::Conflict("already voted"));
    }
    let approves = approving_votes(tx, seq)?;
    let now = now_ns()?;
    append(
        tx,
        now,
        me,
        "voted",
        Some((&id.0, Trail::Indexed)),
        None,
        None,
        &json!({"voter": voter, "approver": decision.approver, "verdict": verdict,
                "note": decision.note, "votes": approves, "required": required}),
    )?;
    if decision.verdict == Verdict::Deny || approves >= required {
        return Ok(Voted::Decides);
    }
    let vote = Vote {
        voter: voter.to_owned(),
        approver: decision.approver.clone(),
        verdict: decision.verdict,
        at: decision.decided_at,
        note: decision.note.clone(),
    };
    crate::webhook::record(tx, WebhookEventType::ApprovalVoted, |_| {
        Ok(WebhookEvent::voted(
            &approval(),
            &vote,
            u32::try_from(approves).unwrap_or(u32::MAX),
            u32::try_from(required).unwrap_or(u32::MAX),
            from_ns(now),
        ))
    })?;
    Ok(Voted::Pending)
}

fn approving_votes(tx: &Connection, seq: i64) -> Result<i64, StoreError> {
    tx.row(
        "SELECT COUNT(*) FROM approval_votes WHERE approval_seq = ?1 AND verdict = 'approve'",
        params![seq],
        |r| r.get(0),
    )
    .map_err(backend)
}

/// Whether approval `seq` needs more approving votes than it has (counted in the claim's
/// transaction: a claim without its quorum is refused).
pub(crate) fn quorum_missing(tx: &Connection, seq: i64) -> Result<bool, StoreError> {
    let required: Option<i64> = tx
        .row(
            "SELECT votes_required FROM approval_rules WHERE approval_seq = ?1",
            params![seq],
            |r| r.get(0),
        )
        .optional()
        .map_err(backend)?
        .flatten();
    match required {
        None => Ok(false),
        Some(required) => Ok(approving_votes(tx, seq)? < required),
    }
}

/// Clears the timers of approval `seq`, decided now (it neither escalates nor expires any more).
pub(crate) fn clear_timers(tx: &Connection, seq: i64) -> Result<(), StoreError> {
    tx.exec(
        "UPDATE approval_rules SET escalate_at_ns = NULL, deny_at_ns = NULL
         WHERE approval_seq = ?1 AND (escalate_at_ns IS NOT NULL OR deny_at_ns IS NOT NULL)",
        params![seq],
    )
    .map_err(backend)?;
    Ok(())
}

/// The votes on approval `seq`, in the order they were cast.
pub(crate) fn votes(conn: &Connection, seq: i64) -> Result<Vec<Vote>, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT voter, approver, verdict, at_ns, note FROM approval_votes
             WHERE approval_seq = ?1 ORDER BY at_ns, voter",
        )
        .map_err(backend)?;
    let rows = stmt
        .query_map(params![seq], |r| {
            Ok(Vote {
                voter: r.get(0)?,
                approver: r.get(1)?,
                verdict: if r.get::<_, String>(2)? == "approve" {
                    Verdict::Approve
                } else {
                    Verdict::Deny
                },
                at: from_ns(r.get(3)?),
                note: r.get(4)?,
            })
        })
        .map_err(backend)?;
    rows.collect::<Result<Vec<_>, _>>().map_err(backend)
}

type Due = (i64, String, String, Option<String>, Option<i64>, String);

fn due(tx: &Connection, column: &str, now: i64) -> Result<Vec<Due>, StoreError> {
    let extra = if column == "escalate_at_ns" {
        " AND r.escalated_at_ns IS NULL"
    } else {
        ""
    };
    let sql = format!(
        "SELECT r.approval_seq, a.state, a.tool, a.principal, a.request_expires_at_ns,
                a.request_json
         FROM approval_rules r JOIN approvals a ON a.seq = r.approval_seq
         WHERE r.{column} IS NOT NULL AND r.{column} <= ?1{extra}
         ORDER BY r.{column} LIMIT ?2"
    );
    let mut stmt = tx.prepare_cached(&sql).map_err(backend)?;
    let rows = stmt
        .query_map(params![now, SWEEP_BATCH], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get::<_, Option<String>>(5)?.unwrap_or_default(),
            ))
        })
        .map_err(backend)?;
    rows.collect::<Result<Vec<_>, _>>().map_err(backend)
}

/// Escalates every pending approval whose escalation time passed at `now` (once: the
/// conditional update), with its `escalated` audit row and `approval.escalated` event.
pub(crate) fn escalate_due(
    tx: &Connection,
    me: &str,
    now: i64,
) -> Result<Vec<ApprovalId>, StoreError> {
    let mut out = Vec::new();
    for (seq, state, tool, principal, request_expires, request_json) in
        due(tx, "escalate_at_ns", now)?
    {
        if state != "prepared" || request_expires.is_some_and(|e| e <= now) {
            clear_timers(tx, seq)?;
            continue;
        }
        let marked = tx
            .exec(
                "UPDATE approval_rules SET escalated_at_ns = ?2
                 WHERE approval_seq = ?1 AND escalated_at_ns IS NULL",
                params![seq, now],
            )
            .map_err(backend)?;
        if marked != 1 {
            continue;
        }
        let id = approval_id(seq);
        let to = serde_json::from_str::<ApprovalRequest>(&request_json)
            .map(|r| r.escalate_to())
            .unwrap_or_default();
        append(
            tx,
            now,
            me,
            "escalated",
            Some((&id.0, Trail::Indexed)),
            None,
            None,
            &json!({"escalateTo": to, "atNs": now}),
        )?;
        crate::webhook::record(tx, WebhookEventType::ApprovalEscalated, |_| {
            let approval = crate::webhook::approval_ref(&id, tool, principal);
            Ok(WebhookEvent::workflow(
                WebhookEventType::ApprovalEscalated,
                &approval,
                ("escalateTo", json!(to)),
                from_ns(now),
            ))
        })?;
        out.push(id);
    }
    Ok(out)
}

/// Denies every approval still pending at its request's expiry whose request says
/// `on_expiry = "deny"`: decided `deny` by [`EXPIRY_APPROVER`] at the expiry, its `decided`
/// audit row (which wakes waiting callers) and the `approval.expired` event.
pub(crate) fn expire_due(
    tx: &Connection,
    me: &str,
    now: i64,
) -> Result<Vec<ApprovalId>, StoreError> {
    let mut out = Vec::new();
    for (seq, state, tool, principal, request_expires, _) in due(tx, "deny_at_ns", now)? {
        clear_timers(tx, seq)?;
        if state != "prepared" {
            continue;
        }
        let id = approval_id(seq);
        let decided_at = request_expires.unwrap_or(now);
        let audit = append(
            tx,
            now,
            me,
            "decided",
            Some((&id.0, Trail::FromApproval)),
            None,
            None,
            &json!({"verdict": "deny", "approver": EXPIRY_APPROVER, "decidedAtNs": decided_at,
                    "expiresAtNs": null, "note": EXPIRY_NOTE, "expired": true}),
        )?;
        append(
            tx,
            now,
            me,
            "expired",
            Some((&id.0, Trail::Indexed)),
            None,
            None,
            &json!({"reason": EXPIRY_NOTE, "atNs": now}),
        )?;
        tx.exec(
            "UPDATE approvals SET state = 'decided', verdict = 'deny', approver = ?2,
                    decided_at_ns = ?3, expires_at_ns = NULL, note = ?4, decided_audit = ?5
             WHERE seq = ?1 AND state = 'prepared'",
            params![seq, EXPIRY_APPROVER, decided_at, EXPIRY_NOTE, audit],
        )
        .map_err(backend)?;
        crate::webhook::record(tx, WebhookEventType::ApprovalExpired, |_| {
            let approval = crate::webhook::approval_ref(&id, tool, principal);
            Ok(WebhookEvent::workflow(
                WebhookEventType::ApprovalExpired,
                &approval,
                ("reason", json!(EXPIRY_NOTE)),
                from_ns(now),
            ))
        })?;
        out.push(id);
    }
    Ok(out)
}
