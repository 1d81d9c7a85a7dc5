//! Run context: run id, root run id, agent, and a lease with a deadline and cancellation.
//!
//! Every scope check and every handler receives the [`RunContext`] of the run that called it. The
//! [`Lease`] is checked between steps of the agent loop and raced against every handler, so cancelling
//! the token or passing the deadline stops local waiting (it cannot prove a remote effect stopped).

use crate::error_code::ErrorCode;
use crate::identity::{json_identity, IdentityError, JsonIdentity};
use serde_json::json;
use std::fmt;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The identifier of one run (a host-chosen opaque string).
#[derive(
    Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct RunId(pub String);

impl RunId {
    /// Wraps a host-chosen identifier.
    pub fn new(id: impl Into<String>) -> RunId {
        RunId(id.into())
    }

    /// The identifier as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// How long a run may go on: an optional deadline and a cancellation token.
#[derive(Clone, Debug)]
pub struct Lease {
    deadline: Option<Instant>,
    cancel: CancellationToken,
}

impl Lease {
    /// A lease with an optional deadline and the given cancellation token.
    pub fn new(deadline: Option<Instant>, cancel: CancellationToken) -> Lease {
        Lease { deadline, cancel }
    }

    /// A lease with no deadline and a fresh token.
    pub fn unbounded() -> Lease {
        Lease::new(None, CancellationToken::new())
    }

    /// The deadline, if any.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// The cancellation token (cancel it to stop the run).
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancel
    }

    /// `Err(run_cancelled)` or `Err(lease_expired)` when the run must stop now.
    pub fn check(&self) -> Result<(), ErrorCode> {
        if self.cancel.is_cancelled() {
            return Err(ErrorCode::RUN_CANCELLED);
        }
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(ErrorCode::LEASE_EXPIRED);
        }
        Ok(())
    }
}

/// What Core supplies to scope checks and handlers about the run that made a call.
#[derive(Clone, Debug)]
pub struct RunContext {
    /// This run.
    pub run_id: RunId,
    /// The run at the root of this run's tree (equal to `run_id` for a top-level run).
    pub root_run_id: RunId,
    /// The agent's name.
    pub agent: String,
    /// The run's lease.
    pub lease: Lease,
    /// The claim this run dispatches, when it dispatches a claimed write (Core's and the
    /// gateway's: the intent digest); `None` otherwise. A handler that calls an upstream carries
    /// [`IdempotencyKey::upstream`](crate::IdempotencyKey::upstream) of it, so every retry or
    /// resend of one intent carries one key.
    pub idempotency_key: Option<crate::IdempotencyKey>,
}

/// The run preset fingerprint: the JSON identity of
/// `{"catalogRevision": …, "instructions": …, "modelId": …, "profile": "purra.run-preset/v1"}`.
///
/// An approval is bound to it, so changing the model, the instructions or the catalog invalidates
/// prepared approvals.
pub fn preset_fingerprint(
    model_id: &str,
    instructions: &str,
    catalog_revision: &JsonIdentity,
) -> Result<JsonIdentity, IdentityError> {
    json_identity(&json!({
        "profile": "purra.run-preset/v1",
        "modelId": model_id,
        "instructions": instructions,
        "catalogRevision": catalog_revision.as_str(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn lease_reports_cancellation_and_expiry() {
        let token = CancellationToken::new();
        let lease = Lease::new(
            Some(Instant::now() + std::time::Duration::from_secs(5)),
            token.clone(),
        );
        assert_eq!(lease.check(), Ok(()));
        tokio::time::advance(std::time::Duration::from_secs(5)).await;
        assert_eq!(lease.check(), Err(ErrorCode::LEASE_EXPIRED));
        token.cancel();
        assert_eq!(lease.check(), Err(ErrorCode::RUN_CANCELLED));
    }

    #[test]
    fn fingerprint_changes_with_each_part() {
        let rev = json_identity(&json!({"tools": []})).unwrap();
        let a = preset_fingerprint("m", "be brief", &rev).unwrap();
        assert_eq!(a, preset_fingerprint("m", "be brief", &rev).unwrap());
        assert_ne!(a, preset_fingerprint("m2", "be brief", &rev).unwrap());
        assert_ne!(a, preset_fingerprint("m", "be briefer", &rev).unwrap());
        let rev2 = json_identity(&json!({"tools": [1]})).unwrap();
        assert_ne!(a, preset_fingerprint("m", "be brief", &rev2).unwrap());
    }
}
