//! Approve with edit (purra-core's `EditStore`) on PostgreSQL: in one transaction holding the
//! original approval's row lock, the edited request prepared and approved, the original decided
//! and settled as refused, and the `edited` audit row (a retried commit is found by its witness).

use crate::store::{
    append, decide_in, exec, insert_prepared, query_opt, read_views, witness, Audit, NewApproval,
    PostgresStore,
};
use purra_core::edit::original_note;
use purra_core::stored::{approval_seq, ApprovalFilter};
use purra_core::{
    check_edit, ApprovalId, ApprovalRequest, ApprovalState, BoxFuture, Decision, EditStore,
    StoreError,
};
use serde_json::json;
use std::sync::Arc;

impl EditStore for PostgresStore {
    fn approve_with_edit(
        &self,
        original: ApprovalId,
        edited: ApprovalRequest,
        decision: Decision,
    ) -> BoxFuture<'_, Result<ApprovalId, StoreError>> {
        let op = self.op_token();
        Box::pin(async move {
            let seq = approval_seq(&original).ok_or(StoreError::NotFound)?;
            let row = Arc::new(NewApproval::of(&edited)?);
            let parts = Arc::new((original, edited, decision));
            self.transact(move |tx, me, retry| {
                let (op, row, parts) = (op.clone(), Arc::clone(&row), Arc::clone(&parts));
                Box::pin(async move {
                    let (original, edited, decision) = &*parts;
                    // The original's row lock orders this edit with every decision on it.
                    query_opt(
                        tx,
                        "SELECT state FROM approvals WHERE seq = $1 FOR UPDATE",
                        &[&seq],
                    )
                    .await?
                    .ok_or(StoreError::NotFound)?;
                    if retry {
                        if let Some((_, Some(approval), _, _)) = witness(tx, me, &op).await? {
                            return Ok(ApprovalId(approval));
                        }
                    }
                    let view = read_views(tx, &ApprovalFilter::one(seq))
                        .await?
                        .pop()
                        .ok_or(StoreError::NotFound)?;
                    if view.state != ApprovalState::Prepared {
                        return Err(StoreError::Conflict("already decided").into());
                    }
                    check_edit(original, &view.request, edited, decision)?;
                    let id = insert_prepared(tx, me, &op, &row, false).await?;
                    decide_in(tx, me, &op, &id, decision).await?;
                    let edited_intent = edited.intent.digest();
                    let mut on_original = decision.clone();
                    on_original.note = Some(original_note(
                        &id,
                        edited_intent.as_str(),
                        decision.note.as_deref(),
                    ));
                    decide_in(tx, me, &op, original, &on_original).await?;
                    // The original is never claimed: settled as refused (the call stands for
                    // the edited intent now).
                    exec(
                        tx,
                        "UPDATE approvals SET state = 'refused', refused_reason = 'mismatch'
                         WHERE seq = $1",
                        &[&seq],
                    )
                    .await?;
                    append(
                        tx,
                        me,
                        Some(&op),
                        Audit::new(
                            "refused",
                            json!({"reason": "mismatch", "edited": id.0,
                                   "currentIntent": edited_intent.as_str(),
                                   "effect": "not_started"}),
                        )
                        .approval(&original.0),
                    )
                    .await?;
                    append(
                        tx,
                        me,
                        Some(&op),
                        Audit::new(
                            "edited",
                            json!({
                                "edited": id.0,
                                "editedIntent": edited_intent.as_str(),
                                "originalIntent": view.intent_digest.as_str(),
                                "originalArguments": view.request.intent.arguments_digest.as_str(),
                                "editedArguments": edited.intent.arguments_digest.as_str(),
                                "approver": decision.approver,
                                "reason": "edited",
                                "effect": "not_started",
                            }),
                        )
                        .approval(&original.0)
                        .run(view.request.intent.run_id.as_str()),
                    )
                    .await?;
                    Ok(id)
                })
            })
            .await
        })
    }
}
