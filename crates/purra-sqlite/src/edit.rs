//! Approve with edit (purra-core's `EditStore`) in the store's file: the edited request prepared
//! and approved, the original decided and settled as refused, and the `edited` audit row, in one
//! savepoint of the group commit's `BEGIN IMMEDIATE` transaction (a failed step writes nothing).

use crate::audit::{append, Trail};
use crate::store::{backend, decide_in, insert_prepared, now_ns, read_views, SqliteStore};
use purra_core::edit::original_note;
use purra_core::stored::ApprovalFilter;
use purra_core::{
    check_edit, ApprovalId, ApprovalRequest, ApprovalState, BoxFuture, Decision, EditStore,
    StoreError,
};
use rusqlite::params;
use serde_json::json;

impl EditStore for SqliteStore {
    fn approve_with_edit(
        &self,
        original: ApprovalId,
        edited: ApprovalRequest,
        decision: Decision,
    ) -> BoxFuture<'_, Result<ApprovalId, StoreError>> {
        self.write(move |tx, me| {
            let seq = purra_core::stored::approval_seq(&original).ok_or(StoreError::NotFound)?;
            let view = read_views(tx, &ApprovalFilter::one(seq))?
                .pop()
                .ok_or(StoreError::NotFound)?;
            if view.state != ApprovalState::Prepared {
                return Err(StoreError::Conflict("already decided"));
            }
            check_edit(&original, &view.request, &edited, &decision)?;
            let id = insert_prepared(tx, me, &edited, false)?;
            decide_in(tx, me, &id, &decision)?;
            let edited_intent = edited.intent.digest();
            let mut on_original = decision.clone();
            on_original.note = Some(original_note(
                &id,
                edited_intent.as_str(),
                decision.note.as_deref(),
            ));
            decide_in(tx, me, &original, &on_original)?;
            let at = now_ns()?;
            let detail = json!({
                "edited": id.0,
                "editedIntent": edited_intent.as_str(),
                "originalIntent": view.intent_digest.as_str(),
                "originalArguments": view.request.intent.arguments_digest.as_str(),
                "editedArguments": edited.intent.arguments_digest.as_str(),
                "approver": decision.approver,
                "reason": "edited",
                "effect": "not_started",
            });
            // The original is never claimed: settled as refused (the call stands for the edited
            // intent now), pointed at from its row like any refusal.
            let settled = append(
                tx,
                at,
                me,
                "refused",
                Some((&original.0, Trail::FromApproval)),
                None,
                None,
                &json!({"reason": "mismatch", "edited": id.0,
                        "currentIntent": edited_intent.as_str(), "effect": "not_started"}),
            )?;
            tx.execute(
                "UPDATE approvals SET state = 'refused', refused_reason = 'mismatch',
                        settled_audit = ?2
                 WHERE seq = ?1",
                params![seq, settled],
            )
            .map_err(backend)?;
            append(
                tx,
                at,
                me,
                "edited",
                Some((&original.0, Trail::Indexed)),
                None,
                Some(view.request.intent.run_id.as_str()),
                &detail,
            )?;
            Ok(id)
        })
    }
}
