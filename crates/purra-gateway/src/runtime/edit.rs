//! Approve with edit at the gateway: an approver approves a waiting write with arguments of their
//! own, when its binding says `allow_edit = true`.
//!
//! The edited call is checked by [`Inner::identify`], the very function every write call goes
//! through first (the scope's caller and argument rules, the current registration, the input
//! schema, the policies), for the caller the original request names (its principal and client),
//! and is refused with a clear reason when any check fails: nothing is recorded then. A valid edit
//! becomes a new intent for the same run (its own digest), recorded by the store's
//! [`EditStore`](purra_core::EditStore) in one transaction: the edited request prepared and
//! approved, the original decided and settled as refused, both audited. The caller's call, waiting
//! on the original, is then settled with the edited approval and its arguments (claimed once, as
//! always), and its answer says it was edited ([`results::edited`]).

use std::time::SystemTime;

use purra_core::{
    allows_edit, edited_from, ApprovalId, ApprovalRequest, ApprovalState, ApprovalView, Decision,
    ErrorCode, RunId, StoreError, EDITED_BY_LABEL, EDITED_FROM_LABEL, MAX_EDIT_BYTES,
    ORIGINAL_ARGUMENTS_LABEL,
};
use serde_json::Value;

use crate::runtime::gateway::Inner;
use crate::runtime::results;
use crate::runtime::write::requester;

/// Why an edit was not recorded: said to the approver as it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EditRefused(pub String);

impl std::fmt::Display for EditRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EditRefused {}

fn refused(why: impl Into<String>) -> EditRefused {
    EditRefused(why.into())
}

impl Inner {
    /// Approves `original` with `arguments` in place of the caller's, decided as `decision` by
    /// `decider` (the identity separation of duties compares): the edited approval, or why
    /// nothing was recorded.
    pub(crate) async fn approve_with_edit(
        &self,
        original: ApprovalId,
        arguments: Value,
        decision: Decision,
        decider: &str,
    ) -> Result<ApprovalId, EditRefused> {
        let id = original.0.clone();
        if !arguments.is_object() {
            return Err(refused("the edited arguments must be a JSON object"));
        }
        if arguments.to_string().len() > MAX_EDIT_BYTES {
            return Err(refused(format!(
                "the edited arguments are over {MAX_EDIT_BYTES} bytes"
            )));
        }
        let store_failed = |e: StoreError| refused(format!("the store failed: {e}"));
        let view = self
            .store
            .approval(original.clone())
            .await
            .map_err(store_failed)?
            .ok_or_else(|| refused(format!("unknown approval id: {id}")))?;
        if view.state != ApprovalState::Prepared {
            return Err(refused(format!("{id} was already decided")));
        }
        if view.request.expired_at(decision.decided_at) {
            return Err(refused(format!("the request of {id} expired")));
        }
        view.request
            .check_decider(decider)
            .map_err(|e| refused(e.to_string()))?;
        let tool = view.request.intent.tool.clone();
        let Some(b) = self.binding(&tool) else {
            return Err(refused(format!("{tool} is not bound any more")));
        };
        if !b.allow_edit || !allows_edit(&view.request) {
            return Err(refused(format!(
                "{tool} does not allow edits (its binding's allow_edit is off)"
            )));
        }
        if arguments == view.request.arguments {
            return Err(refused("the edited arguments are the original ones"));
        }
        // Exactly the checks the caller's own call went through, for the caller who asked.
        let caller = requester(&view.request.labels);
        let call = match self.identify(&b, &caller, &arguments).await {
            Ok(call) => call,
            Err(code) => {
                let why = self.edit_refusal(&b, &caller, &arguments, &code).await;
                return Err(refused(why));
            }
        };
        let run_id: &RunId = &view.request.intent.run_id;
        let intent = self
            .intent(&call.bound.registration, run_id, &arguments)
            .map_err(|code| refused(format!("the edited call has no intent: {code}")))?;
        let Some(binding) = call.bound.registration.approval_binding().cloned() else {
            return Err(refused(format!("{tool} has no approval binding")));
        };
        let mut labels = view.request.labels.clone();
        labels.insert(EDITED_FROM_LABEL.to_owned(), original.0.clone());
        labels.insert(EDITED_BY_LABEL.to_owned(), decision.approver.clone());
        labels.insert(
            ORIGINAL_ARGUMENTS_LABEL.to_owned(),
            view.request.intent.arguments_digest.to_string(),
        );
        let edited = ApprovalRequest {
            intent,
            arguments,
            binding,
            requested_by: view.request.requested_by.clone(),
            requested_at: SystemTime::now(),
            expires_at: view.request.expires_at,
            labels,
        };
        let Some(edits) = self.store.edits() else {
            return Err(refused("this store cannot record an edit"));
        };
        let approved = edits
            .approve_with_edit(original, edited, decision)
            .await
            .map_err(|e| match e {
                StoreError::Conflict(why) => refused(format!("{id}: {why}")),
                e => store_failed(e),
            })?;
        self.decisions.wake();
        Ok(approved)
    }

    /// What the approver is told when the edited call fails a check: the rule, the schema's
    /// complaint or the policy (never more than the caller would learn).
    async fn edit_refusal(
        &self,
        b: &crate::catalog::Binding,
        caller: &crate::rules::scope::Caller,
        arguments: &Value,
        code: &ErrorCode,
    ) -> String {
        if code == &results::policy_denied_code() {
            return "refused by the policies: they do not allow the edited call".into();
        }
        if code == &ErrorCode::SCOPE_DENIED {
            return match b.scope.refusal(caller, arguments) {
                Some(why) => format!("the edited call breaks the binding's rules: {why}"),
                None => "the edited call breaks the binding's rules".into(),
            };
        }
        if code == &ErrorCode::INVALID_ARGUMENTS {
            let why = match self.registration(b).await {
                Ok(bound) => bound.registration.input_schema().validate(arguments).err(),
                Err(_) => None,
            };
            return match why {
                Some(e) => {
                    format!("the edited arguments do not match the tool's input schema: {e}")
                }
                None => "the edited arguments do not match the tool's input schema".into(),
            };
        }
        format!("the edited call cannot be checked now: {code}")
    }

    /// The edited approval of run `run_id` that claimed, with its claim's state, when the run's
    /// call was approved with edit and sent (its original intent has no claim of its own).
    pub(crate) async fn edited_claim(
        &self,
        run_id: &RunId,
    ) -> Result<Option<(ApprovalView, purra_core::ClaimState)>, StoreError> {
        let views = self.store.run_approvals(run_id.clone()).await?;
        Ok(views.into_iter().rev().find_map(|v| {
            edited_from(&v.request)?;
            let state = v.claim.as_ref()?.state.clone();
            Some((v, state))
        }))
    }

    /// The approval `original` was edited into, when it was (it is settled as refused and an
    /// approval of the same run names it as its origin).
    pub(crate) async fn edit_of(
        &self,
        run_id: &RunId,
        original: &ApprovalId,
    ) -> Result<Option<ApprovalView>, StoreError> {
        Ok(match self.edit_or_original(run_id, original).await? {
            Edit::Edited(edited) => Some(edited),
            Edit::Not(_) => None,
        })
    }

    /// [`edit_of`](Inner::edit_of), and when `original` was not edited, the view of it read to
    /// tell (`None` when it does not exist): the claim that follows needs the same read.
    pub(crate) async fn edit_or_original(
        &self,
        run_id: &RunId,
        original: &ApprovalId,
    ) -> Result<Edit, StoreError> {
        match self.store.approval(original.clone()).await? {
            Some(v) if matches!(v.state, ApprovalState::Refused(_)) => {}
            other => return Ok(Edit::Not(other)),
        }
        let views = self.store.run_approvals(run_id.clone()).await?;
        Ok(
            match views
                .into_iter()
                .find(|v| edited_from(&v.request).as_ref() == Some(original))
            {
                Some(edited) => Edit::Edited(edited),
                None => Edit::Not(None),
            },
        )
    }
}

/// Whether an approval was edited ([`Inner::edit_or_original`]).
pub(crate) enum Edit {
    /// The approval it was edited into.
    Edited(ApprovalView),
    /// Not edited; the approval as read to tell, when it was read and exists.
    Not(Option<ApprovalView>),
}
