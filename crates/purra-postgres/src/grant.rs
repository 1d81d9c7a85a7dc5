//! Standing grants (purra-core's `GrantStore`) in the store's schema: one row per grant in
//! `grants`, one per use in `grant_uses`.
//!
//! A use is one conditional `UPDATE grants SET used = used + 1 WHERE … used < max_uses AND
//! revoked_at_ns IS NULL AND until_ns > now`: PostgreSQL locks the grant's row for it, so of the
//! instances racing for the last use one updates it and the others, re-reading the row after
//! that commit, match nothing. The same transaction prepares the call's approval, approves it
//! by the grant and lists the use; a retry after a lost commit acknowledgement finds its own
//! committed approval by its operation token and takes no second use.

use crate::store::{
    append, claim_in, decide_in, exec, insert_prepared, now_ns, query, query_opt, witness, Audit,
    Error, NewApproval, PostgresStore, Tx,
};
use purra_core::stored::{approval_seq, from_ns, json_error, to_ns};
use purra_core::{
    ApprovalId, ApprovalRequest, BoxFuture, ClaimVerdict, Decision, GrantId, GrantStore, GrantUse,
    GrantView, NewGrant, StoreError, PRINCIPAL_LABEL,
};
use serde_json::json;
use std::sync::Arc;
use std::time::SystemTime;
use tokio_postgres::Row;

const COLUMNS: &str = "seq, principal, tool, rules_json, max_uses, used, until_ns, granted_by, \
                       granted_at_ns, note, revoked_at_ns, revoked_by";

fn view_of(r: &Row) -> Result<GrantView, Error> {
    let revoked_at: Option<i64> = r.get(10);
    let revoked_by: Option<String> = r.get(11);
    let rules: Vec<String> = serde_json::from_str(r.get::<_, &str>(3)).map_err(json_error)?;
    Ok(GrantView {
        id: GrantId::of_seq(r.get(0)),
        grant: NewGrant {
            principal: r.get(1),
            tool: r.get(2),
            rules,
            max_uses: u32::try_from(r.get::<_, i64>(4)).unwrap_or(u32::MAX),
            until: from_ns(r.get(6)),
            granted_by: r.get(7),
            note: r.get(9),
        },
        granted_at: from_ns(r.get(8)),
        used: u32::try_from(r.get::<_, i64>(5)).unwrap_or(u32::MAX),
        revoked: revoked_at.map(|at| (from_ns(at), revoked_by.unwrap_or_default())),
        uses: Vec::new(),
    })
}

impl GrantStore for PostgresStore {
    fn add_grant(&self, grant: NewGrant) -> BoxFuture<'_, Result<GrantId, StoreError>> {
        let op = self.op_token();
        Box::pin(async move {
            grant.check(SystemTime::now())?;
            let rules = serde_json::to_string(&grant.rules).map_err(json_error)?;
            let until = to_ns(grant.until)?;
            let grant = Arc::new((grant, rules));
            self.transact(move |tx, me, retry| {
                let (op, grant) = (op.clone(), Arc::clone(&grant));
                Box::pin(async move {
                    if retry {
                        if let Some((_, _, _, detail)) = witness(tx, me, &op).await? {
                            if let Some(id) = detail.get("grant").and_then(|g| g.as_str()) {
                                return Ok(GrantId(id.to_owned()));
                            }
                        }
                    }
                    let (g, rules) = &*grant;
                    let row = query_opt(
                        tx,
                        "INSERT INTO grants (principal, tool, rules_json, max_uses, until_ns,
                                             granted_by, granted_at_ns, note)
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING seq",
                        &[
                            &g.principal,
                            &g.tool,
                            rules,
                            &i64::from(g.max_uses),
                            &until,
                            &g.granted_by,
                            &now_ns(),
                            &g.note,
                        ],
                    )
                    .await?
                    .ok_or_else(|| StoreError::Backend("no grant inserted".into()))?;
                    let id = GrantId::of_seq(row.get(0));
                    append(
                        tx,
                        me,
                        Some(&op),
                        Audit::new(
                            "grant_added",
                            json!({"grant": id.0, "principal": g.principal, "tool": g.tool,
                                   "rules": g.rules, "maxUses": g.max_uses, "untilNs": until,
                                   "by": g.granted_by, "note": g.note}),
                        ),
                    )
                    .await?;
                    Ok(id)
                })
            })
            .await
        })
    }

    fn grants(&self, limit: u32) -> BoxFuture<'_, Result<Vec<GrantView>, StoreError>> {
        let limit = i64::from(limit.min(purra_core::MAX_PAGE));
        self.read(move |c| async move {
            query(
                &c,
                &format!("SELECT {COLUMNS} FROM grants ORDER BY seq DESC LIMIT $1"),
                &[&limit],
            )
            .await?
            .iter()
            .map(view_of)
            .collect()
        })
    }

    fn grant(&self, id: GrantId) -> BoxFuture<'_, Result<Option<GrantView>, StoreError>> {
        let seq = id.seq();
        self.read(move |c| async move {
            let Some(seq) = seq else {
                return Ok(None);
            };
            let Some(row) = query_opt(
                &c,
                &format!("SELECT {COLUMNS} FROM grants WHERE seq = $1"),
                &[&seq],
            )
            .await?
            else {
                return Ok(None);
            };
            let mut view = view_of(&row)?;
            view.uses = query(
                &c,
                "SELECT approval_id, at_ns FROM grant_uses WHERE grant_seq = $1
                 ORDER BY at_ns, approval_id",
                &[&seq],
            )
            .await?
            .iter()
            .map(|r| GrantUse {
                approval_id: ApprovalId(r.get(0)),
                at: from_ns(r.get(1)),
            })
            .collect();
            Ok(Some(view))
        })
    }

    fn live_grants(
        &self,
        principal: String,
        tool: String,
        now: SystemTime,
    ) -> BoxFuture<'_, Result<Vec<GrantView>, StoreError>> {
        Box::pin(async move {
            let now = to_ns(now)?;
            self.read(move |c| {
                let (principal, tool) = (principal.clone(), tool.clone());
                async move {
                    query(
                        &c,
                        &format!(
                            "SELECT {COLUMNS} FROM grants
                             WHERE principal = $1 AND tool = $2 AND revoked_at_ns IS NULL
                               AND until_ns > $3 AND used < max_uses
                             ORDER BY seq LIMIT 64"
                        ),
                        &[&principal, &tool, &now],
                    )
                    .await?
                    .iter()
                    .map(view_of)
                    .collect()
                }
            })
            .await
        })
    }

    fn revoke_grant(&self, id: GrantId, by: String) -> BoxFuture<'_, Result<(), StoreError>> {
        let op = self.op_token();
        Box::pin(async move {
            let seq = id.seq().ok_or(StoreError::NotFound)?;
            self.transact(move |tx, me, retry| {
                let (op, id, by) = (op.clone(), id.clone(), by.clone());
                Box::pin(async move {
                    let row = query_opt(
                        tx,
                        "SELECT revoked_at_ns FROM grants WHERE seq = $1 FOR UPDATE",
                        &[&seq],
                    )
                    .await?;
                    if retry && witness(tx, me, &op).await?.is_some() {
                        return Ok(());
                    }
                    match row {
                        None => return Err(StoreError::NotFound.into()),
                        Some(r) if r.get::<_, Option<i64>>(0).is_some() => {
                            return Err(StoreError::Conflict("already revoked").into())
                        }
                        Some(_) => {}
                    }
                    exec(
                        tx,
                        "UPDATE grants SET revoked_at_ns = $2, revoked_by = $3 WHERE seq = $1",
                        &[&seq, &now_ns(), &by],
                    )
                    .await?;
                    append(
                        tx,
                        me,
                        Some(&op),
                        Audit::new("grant_revoked", json!({"grant": id.0, "by": by})),
                    )
                    .await?;
                    Ok(())
                })
            })
            .await
        })
    }

    fn use_grant(
        &self,
        id: GrantId,
        request: ApprovalRequest,
        decision: Decision,
        now: SystemTime,
    ) -> BoxFuture<'_, Result<Option<ApprovalId>, StoreError>> {
        let op = self.op_token();
        Box::pin(async move {
            let Some(seq) = id.seq() else {
                return Ok(None);
            };
            let now = to_ns(now)?;
            let principal = request.labels.get(PRINCIPAL_LABEL).cloned();
            let row = Arc::new(NewApproval::of(&request)?);
            let parts = Arc::new((id, decision, principal, request));
            self.transact(move |tx, me, retry| {
                let (op, row, parts) = (op.clone(), Arc::clone(&row), Arc::clone(&parts));
                Box::pin(async move {
                    let (id, decision, principal, request) = &*parts;
                    let use_ = Use {
                        seq,
                        now,
                        row: &row,
                        id,
                        decision,
                        principal,
                        request,
                    };
                    use_in(tx, me, &op, retry, use_).await
                })
            })
            .await
        })
    }

    fn use_grant_and_claim(
        &self,
        id: GrantId,
        request: ApprovalRequest,
        decision: Decision,
        now: SystemTime,
    ) -> BoxFuture<'_, Result<Option<(ApprovalId, ClaimVerdict)>, StoreError>> {
        // Two operation tokens: a retry finds the use and the claim each by its own.
        let (used, claimed) = (self.op_token(), self.op_token());
        Box::pin(async move {
            let Some(seq) = id.seq() else {
                return Ok(None);
            };
            let now = to_ns(now)?;
            let principal = request.labels.get(PRINCIPAL_LABEL).cloned();
            let row = Arc::new(NewApproval::of(&request)?);
            let digest = request.intent.digest();
            let parts = Arc::new((id, decision, principal, request, digest));
            self.transact(move |tx, me, retry| {
                let (used, claimed, row, parts) = (
                    used.clone(),
                    claimed.clone(),
                    Arc::clone(&row),
                    Arc::clone(&parts),
                );
                Box::pin(async move {
                    let (id, decision, principal, request, digest) = &*parts;
                    let use_ = Use {
                        seq,
                        now,
                        row: &row,
                        id,
                        decision,
                        principal,
                        request,
                    };
                    let Some(approval) = use_in(tx, me, &used, retry, use_).await? else {
                        return Ok(None);
                    };
                    let approval_seq = approval_seq(&approval).ok_or(StoreError::NotFound)?;
                    let verdict = claim_in(
                        tx,
                        me,
                        &claimed,
                        retry,
                        approval_seq,
                        &approval,
                        digest,
                        now,
                    )
                    .await?;
                    Ok(Some((approval, verdict)))
                })
            })
            .await
        })
    }
}

/// One use of a grant to take: the grant's row `seq`, the time, the approval to prepare and the
/// decision to record on it.
struct Use<'a> {
    seq: i64,
    now: i64,
    row: &'a NewApproval,
    id: &'a GrantId,
    decision: &'a Decision,
    principal: &'a Option<String>,
    request: &'a ApprovalRequest,
}

/// Takes one use of a grant in `tx` under operation token `op` ([`GrantStore::use_grant`]); on a
/// `retry`, an earlier attempt's committed use is found by its token.
async fn use_in(
    tx: &Tx<'_>,
    me: &str,
    op: &str,
    retry: bool,
    use_: Use<'_>,
) -> Result<Option<ApprovalId>, Error> {
    let Use {
        seq,
        now,
        row,
        id,
        decision,
        principal,
        request,
    } = use_;
    if retry {
        if let Some((_, Some(approval), _, _)) = witness(tx, me, op).await? {
            return Ok(Some(ApprovalId(approval)));
        }
    }
    // The use: one conditional update on the grant's row, never past `max_uses`.
    let taken = exec(
        tx,
        "UPDATE grants SET used = used + 1
         WHERE seq = $1 AND used < max_uses AND revoked_at_ns IS NULL
           AND until_ns > $2 AND principal = $3 AND tool = $4",
        &[&seq, &now, principal, &request.intent.tool],
    )
    .await?;
    if taken == 0 {
        return Ok(None);
    }
    let approval = insert_prepared(tx, me, op, row, false).await?;
    decide_in(tx, me, op, &approval, decision).await?;
    exec(
        tx,
        "INSERT INTO grant_uses (grant_seq, approval_id, at_ns) VALUES ($1, $2, $3)",
        &[&seq, &approval.0, &now_ns()],
    )
    .await?;
    append(
        tx,
        me,
        Some(op),
        Audit::new(
            "grant_used",
            json!({"grant": id.0, "approver": decision.approver}),
        )
        .approval(&approval.0)
        .run(request.intent.run_id.as_str()),
    )
    .await?;
    Ok(Some(approval))
}
