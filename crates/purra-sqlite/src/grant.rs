//! Standing grants (purra-core's `GrantStore`) in the store's file: one row per grant in
//! `grants`, one per use in `grant_uses`.
//!
//! A use is taken in the group commit's `BEGIN IMMEDIATE` transaction (no other writer of the
//! file, in this process or another, runs between its steps): one conditional
//! `UPDATE grants SET used = used + 1 WHERE … used < max_uses AND revoked_at_ns IS NULL AND
//! until_ns > now`, then the call's approval is prepared and approved by the grant and the use
//! listed, all in the same savepoint, so a failed step takes no use.

use crate::audit::{append, Trail};
use crate::store::{backend, claim_in, decide_in, insert_prepared, now_ns, SqliteStore};
use purra_core::stored::{from_ns, json_error, to_ns};
use purra_core::{
    ApprovalId, ApprovalRequest, BoxFuture, ClaimVerdict, Decision, GrantId, GrantStore, GrantUse,
    GrantView, NewGrant, StoreError, PRINCIPAL_LABEL,
};
use rusqlite::{params, Connection, OptionalExtension, Row};
use serde_json::json;
use std::time::SystemTime;

const COLUMNS: &str = "seq, principal, tool, rules_json, max_uses, used, until_ns, granted_by, \
                       granted_at_ns, note, revoked_at_ns, revoked_by";

fn view_of(r: &Row<'_>) -> rusqlite::Result<(GrantView, String)> {
    let revoked_at: Option<i64> = r.get(10)?;
    let revoked_by: Option<String> = r.get(11)?;
    Ok((
        GrantView {
            id: GrantId::of_seq(r.get(0)?),
            grant: NewGrant {
                principal: r.get(1)?,
                tool: r.get(2)?,
                rules: Vec::new(),
                max_uses: u32::try_from(r.get::<_, i64>(4)?).unwrap_or(u32::MAX),
                until: from_ns(r.get(6)?),
                granted_by: r.get(7)?,
                note: r.get(9)?,
            },
            granted_at: from_ns(r.get(8)?),
            used: u32::try_from(r.get::<_, i64>(5)?).unwrap_or(u32::MAX),
            revoked: revoked_at.map(|at| (from_ns(at), revoked_by.unwrap_or_default())),
            uses: Vec::new(),
        },
        r.get(3)?,
    ))
}

fn read(
    conn: &Connection,
    sql: &str,
    p: impl rusqlite::Params,
) -> Result<Vec<GrantView>, StoreError> {
    let mut stmt = conn.prepare_cached(sql).map_err(backend)?;
    let rows = stmt
        .query_map(p, view_of)
        .map_err(backend)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(backend)?;
    rows.into_iter()
        .map(|(mut v, rules)| {
            v.grant.rules = serde_json::from_str(&rules).map_err(json_error)?;
            Ok(v)
        })
        .collect()
}

impl GrantStore for SqliteStore {
    fn add_grant(&self, grant: NewGrant) -> BoxFuture<'_, Result<GrantId, StoreError>> {
        self.write(move |tx, me| {
            grant.check(SystemTime::now())?;
            let rules = serde_json::to_string(&grant.rules).map_err(json_error)?;
            let at = now_ns()?;
            tx.execute(
                "INSERT INTO grants (principal, tool, rules_json, max_uses, until_ns, granted_by,
                                     granted_at_ns, note)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    grant.principal,
                    grant.tool,
                    rules,
                    i64::from(grant.max_uses),
                    to_ns(grant.until)?,
                    grant.granted_by,
                    at,
                    grant.note
                ],
            )
            .map_err(backend)?;
            let id = GrantId::of_seq(tx.last_insert_rowid());
            append(
                tx,
                at,
                me,
                "grant_added",
                None,
                None,
                None,
                &json!({"grant": id.0, "principal": grant.principal, "tool": grant.tool,
                        "rules": grant.rules, "maxUses": grant.max_uses,
                        "untilNs": to_ns(grant.until)?, "by": grant.granted_by,
                        "note": grant.note}),
            )?;
            Ok(id)
        })
    }

    fn grants(&self, limit: u32) -> BoxFuture<'_, Result<Vec<GrantView>, StoreError>> {
        self.run(move |conn, _| {
            read(
                conn,
                &format!("SELECT {COLUMNS} FROM grants ORDER BY seq DESC LIMIT ?1"),
                params![i64::from(limit.min(purra_core::MAX_PAGE))],
            )
        })
    }

    fn grant(&self, id: GrantId) -> BoxFuture<'_, Result<Option<GrantView>, StoreError>> {
        self.run(move |conn, _| {
            let Some(seq) = id.seq() else {
                return Ok(None);
            };
            let Some(mut view) = read(
                conn,
                &format!("SELECT {COLUMNS} FROM grants WHERE seq = ?1"),
                params![seq],
            )?
            .pop() else {
                return Ok(None);
            };
            let mut stmt = conn
                .prepare_cached(
                    "SELECT approval_id, at_ns FROM grant_uses WHERE grant_seq = ?1
                     ORDER BY at_ns, approval_id",
                )
                .map_err(backend)?;
            view.uses = stmt
                .query_map(params![seq], |r| {
                    Ok(GrantUse {
                        approval_id: ApprovalId(r.get(0)?),
                        at: from_ns(r.get(1)?),
                    })
                })
                .map_err(backend)?
                .collect::<rusqlite::Result<Vec<_>>>()
                .map_err(backend)?;
            Ok(Some(view))
        })
    }

    fn live_grants(
        &self,
        principal: String,
        tool: String,
        now: SystemTime,
    ) -> BoxFuture<'_, Result<Vec<GrantView>, StoreError>> {
        self.run(move |conn, _| {
            read(
                conn,
                &format!(
                    "SELECT {COLUMNS} FROM grants
                     WHERE principal = ?1 AND tool = ?2 AND revoked_at_ns IS NULL
                       AND until_ns > ?3 AND used < max_uses
                     ORDER BY seq LIMIT 64"
                ),
                params![principal, tool, to_ns(now)?],
            )
        })
    }

    fn revoke_grant(&self, id: GrantId, by: String) -> BoxFuture<'_, Result<(), StoreError>> {
        self.write(move |tx, me| {
            let seq = id.seq().ok_or(StoreError::NotFound)?;
            let revoked: Option<Option<i64>> = tx
                .query_row(
                    "SELECT revoked_at_ns FROM grants WHERE seq = ?1",
                    params![seq],
                    |r| r.get(0),
                )
                .optional()
                .map_err(backend)?;
            match revoked {
                None => return Err(StoreError::NotFound),
                Some(Some(_)) => return Err(StoreError::Conflict("already revoked")),
                Some(None) => {}
            }
            let at = now_ns()?;
            tx.execute(
                "UPDATE grants SET revoked_at_ns = ?2, revoked_by = ?3 WHERE seq = ?1",
                params![seq, at, by],
            )
            .map_err(backend)?;
            append(
                tx,
                at,
                me,
                "grant_revoked",
                None,
                None,
                None,
                &json!({"grant": id.0, "by": by}),
            )?;
            Ok(())
        })
    }

    fn use_grant(
        &self,
        id: GrantId,
        request: ApprovalRequest,
        decision: Decision,
        now: SystemTime,
    ) -> BoxFuture<'_, Result<Option<ApprovalId>, StoreError>> {
        self.write(move |tx, me| use_in(tx, me, &id, &request, &decision, now))
    }

    fn use_grant_and_claim(
        &self,
        id: GrantId,
        request: ApprovalRequest,
        decision: Decision,
        now: SystemTime,
    ) -> BoxFuture<'_, Result<Option<(ApprovalId, ClaimVerdict)>, StoreError>> {
        self.write(move |tx, me| {
            let Some(approval) = use_in(tx, me, &id, &request, &decision, now)? else {
                return Ok(None);
            };
            let verdict = claim_in(tx, me, &approval, &request.intent.digest(), now)?;
            Ok(Some((approval, verdict)))
        })
    }
}

/// Takes one use of grant `id` for `request` in `tx` ([`GrantStore::use_grant`]).
fn use_in(
    tx: &Connection,
    me: &str,
    id: &GrantId,
    request: &ApprovalRequest,
    decision: &Decision,
    now: SystemTime,
) -> Result<Option<ApprovalId>, StoreError> {
    let Some(seq) = id.seq() else {
        return Ok(None);
    };
    let principal = request.labels.get(PRINCIPAL_LABEL).cloned();
    // The use: one conditional update, never past `max_uses`.
    let taken = tx
        .execute(
            "UPDATE grants SET used = used + 1
             WHERE seq = ?1 AND used < max_uses AND revoked_at_ns IS NULL
               AND until_ns > ?2 AND principal = ?3 AND tool = ?4",
            params![seq, to_ns(now)?, principal, request.intent.tool],
        )
        .map_err(backend)?;
    if taken == 0 {
        return Ok(None);
    }
    let approval = insert_prepared(tx, me, request, false)?;
    decide_in(tx, me, &approval, decision)?;
    let at = now_ns()?;
    tx.execute(
        "INSERT INTO grant_uses (grant_seq, approval_id, at_ns) VALUES (?1, ?2, ?3)",
        params![seq, approval.0, at],
    )
    .map_err(backend)?;
    append(
        tx,
        at,
        me,
        "grant_used",
        Some((&approval.0, Trail::Indexed)),
        None,
        Some(request.intent.run_id.as_str()),
        &json!({"grant": id.0, "approver": decision.approver}),
    )?;
    Ok(Some(approval))
}
