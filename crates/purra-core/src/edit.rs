//! Approve with edit: an approver approves a call with arguments of their own, in one decision.
//!
//! The edited call is a new [`ApprovalRequest`] (a new intent, its own digest) for the same tool,
//! run and principal as the original; the host checks it exactly as if the caller had sent it
//! before asking the store to record it. [`EditStore::approve_with_edit`] then records, in ONE
//! transaction:
//!
//! 1. the edited request prepared and approved with the approver's decision;
//! 2. the original approval decided by the same approver (an approval whose note names the
//!    edited approval and its intent digest), then settled as refused (`mismatch`: the call now
//!    stands for the edited intent), so it can never be claimed;
//! 3. an `edited` audit row on the original naming both intents, the arguments' digests and who
//!    edited.
//!
//! So exactly one of the two can ever be claimed: the edited one, once, as any approved call. The
//! edited request carries [`EDITED_FROM_LABEL`], [`EDITED_BY_LABEL`] and
//! [`ORIGINAL_ARGUMENTS_LABEL`], by which the host finds it from the original's run and tells the
//! caller the call was edited.

use crate::approval::{ApprovalId, ApprovalRequest, Decision, Verdict};
use crate::operator::PRINCIPAL_LABEL;
use crate::store::{BoxFuture, StoreError};

/// The [`ApprovalRequest::labels`] entry that, set to `"true"`, lets an approver approve the
/// request with edited arguments (a gateway binding's `allow_edit`).
pub const ALLOW_EDIT_LABEL: &str = "allow_edit";

/// The [`ApprovalRequest::labels`] entry with the tool's input schema (JSON text) an edit is
/// validated against on the approver page (the host validates it again).
pub const INPUT_SCHEMA_LABEL: &str = "input_schema";

/// The label of an edited request naming the approval it was edited from.
pub const EDITED_FROM_LABEL: &str = "edited_from";

/// The label of an edited request naming who edited it (the approver, with the path).
pub const EDITED_BY_LABEL: &str = "edited_by";

/// The label of an edited request with the digest of the original call's arguments.
pub const ORIGINAL_ARGUMENTS_LABEL: &str = "original_arguments_digest";

/// The most bytes of edited arguments (as JSON text) an approver may submit.
pub const MAX_EDIT_BYTES: usize = 16 * 1024;

/// Whether `request` lets an approver edit it ([`ALLOW_EDIT_LABEL`] is `"true"`).
pub fn allows_edit(request: &ApprovalRequest) -> bool {
    request
        .labels
        .get(ALLOW_EDIT_LABEL)
        .is_some_and(|v| v == "true")
}

/// The approval `request` was edited from, when it is an edited request.
pub fn edited_from(request: &ApprovalRequest) -> Option<ApprovalId> {
    request
        .labels
        .get(EDITED_FROM_LABEL)
        .map(|id| ApprovalId(id.clone()))
}

/// Checks what a store is asked to record before it writes anything: an approving decision, an
/// edited request that names `original` as its origin and the same principal as `original_request`,
/// for the same tool and run, with arguments that differ. `Conflict` naming the first broken.
pub fn check_edit(
    original: &ApprovalId,
    original_request: &ApprovalRequest,
    edited: &ApprovalRequest,
    decision: &Decision,
) -> Result<(), StoreError> {
    if decision.verdict != Verdict::Approve {
        return Err(StoreError::Conflict("an edit is approved, never denied"));
    }
    if edited_from(edited).as_ref() != Some(original) {
        return Err(StoreError::Conflict(
            "the edited request does not name the approval it edits",
        ));
    }
    if edited.intent.tool != original_request.intent.tool
        || edited.intent.run_id != original_request.intent.run_id
        || edited.labels.get(PRINCIPAL_LABEL) != original_request.labels.get(PRINCIPAL_LABEL)
    {
        return Err(StoreError::Conflict(
            "an edit keeps the tool, the run and the principal of the call",
        ));
    }
    if edited.intent.arguments_digest == original_request.intent.arguments_digest {
        return Err(StoreError::Conflict(
            "the edited arguments are the original ones",
        ));
    }
    edited.check()
}

/// The note recorded on the original approval's decision: the edited approval and intent, then
/// the approver's own note.
pub fn original_note(edited: &ApprovalId, edited_intent: &str, note: Option<&str>) -> String {
    match note {
        Some(n) => format!(
            "approved with edit as {} (intent {edited_intent}): {n}",
            edited.0
        ),
        None => format!(
            "approved with edit as {} (intent {edited_intent})",
            edited.0
        ),
    }
}

/// A durable store that records approve-with-edit atomically.
pub trait EditStore: Send + Sync {
    /// In ONE transaction: prepares `edited` and records `decision` on it, decides `original`
    /// with the same approver (note: [`original_note`]) and settles it as refused (`mismatch`),
    /// and audits `edited` on the original. `NotFound` for an unknown original;
    /// `Conflict("already decided")`, `Conflict("the approval request expired")` as a decision;
    /// the [`check_edit`] conflicts. Nothing is written on any error.
    fn approve_with_edit(
        &self,
        original: ApprovalId,
        edited: ApprovalRequest,
        decision: Decision,
    ) -> BoxFuture<'_, Result<ApprovalId, StoreError>>;
}
