//! The operator's view of effects (claims): listing them newest first (all, or the `unknown`
//! ones), one effect with what was sent and what came back last, an operator's recorded
//! reconciliation of an `unknown` one (who, and the evidence), and a resend under the same key,
//! itself claimed so it happens at most once.
//!
//! An `unknown` effect changes only by an operator's recorded decision
//! ([`OperatorStore::reconcile_effect`](crate::OperatorStore::reconcile_effect)) or by a resend under
//! the same idempotency key ([`OperatorStore::claim_resend`](crate::OperatorStore::claim_resend),
//! then [`OperatorStore::complete_resend`](crate::OperatorStore::complete_resend)).

use crate::approval::ApprovalId;
use crate::idempotency::{ClaimState, EffectOutcome, IdempotencyKey};
use crate::store::StoreError;
use crate::visible::WHO_MAX_CHARS;
use serde_json::Value;
use std::time::SystemTime;

/// The most bytes of evidence a reconciliation records; more is refused, nothing recorded.
pub const MAX_EVIDENCE_BYTES: usize = 4096;

/// An operator's recorded reconciliation of an effect.
#[derive(Clone, Debug, PartialEq)]
pub struct EffectReconciled {
    /// Who decided (the operator).
    pub by: String,
    /// The evidence they gave.
    pub evidence: String,
    /// When it was recorded.
    pub at: SystemTime,
}

/// A resend of an effect: claimed once, by whom, and what came of it.
#[derive(Clone, Debug, PartialEq)]
pub struct ResendView {
    /// Who asked for the resend (the operator).
    pub by: String,
    /// The store owner that claimed it (the process that sent it).
    pub owner: String,
    /// When it was claimed.
    pub at: SystemTime,
    /// What came back, once recorded (`None`: claimed, no outcome recorded yet).
    pub outcome: Option<EffectOutcome>,
    /// When the outcome was recorded.
    pub completed_at: Option<SystemTime>,
}

/// One effect as an operator sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct EffectView {
    /// The idempotency key (the intent digest).
    pub key: IdempotencyKey,
    /// The store owner (instance) that claimed it.
    pub owner: String,
    /// When it was claimed.
    pub claimed_at: SystemTime,
    /// In flight, or its outcome now (the receipt of a committed one, the reason of an unknown one).
    pub state: ClaimState,
    /// When the outcome was last recorded.
    pub completed_at: Option<SystemTime>,
    /// The approval that made the claim, if one did.
    pub approval: Option<ApprovalId>,
    /// The local tool, when an approval made the claim.
    pub tool: Option<String>,
    /// The arguments sent (operators only: they may be secret), when the approval kept them.
    pub arguments: Option<Value>,
    /// The last reconciliation, if an operator reconciled it.
    pub reconciled: Option<EffectReconciled>,
    /// Its resend, if one was claimed.
    pub resend: Option<ResendView>,
}

impl EffectView {
    /// `in_flight`, `committed`, `not_started` or `unknown`.
    pub fn effect_word(&self) -> &'static str {
        self.state.effect_word()
    }
}

/// Which effects a listing selects: newest claim first, at most `limit` (capped at
/// [`MAX_PAGE`](crate::operator::MAX_PAGE)), after the cursor `before` (the last key of the page
/// before).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EffectQuery {
    /// Only the `unknown` ones.
    pub unknown_only: bool,
    /// Continue after this key (exclusive).
    pub before: Option<IdempotencyKey>,
    /// At most this many.
    pub limit: u32,
}

impl EffectQuery {
    /// Every effect, newest first, 50 a page.
    pub fn all() -> EffectQuery {
        EffectQuery {
            unknown_only: false,
            before: None,
            limit: 50,
        }
    }

    /// The `unknown` effects, newest first, 50 a page.
    pub fn unknown() -> EffectQuery {
        EffectQuery {
            unknown_only: true,
            ..EffectQuery::all()
        }
    }

    /// At most `limit` (1 to [`MAX_PAGE`](crate::operator::MAX_PAGE)).
    pub fn limit(mut self, limit: u32) -> EffectQuery {
        self.limit = limit.clamp(1, crate::operator::MAX_PAGE);
        self
    }

    /// Continuing after `key`.
    pub fn before(mut self, key: IdempotencyKey) -> EffectQuery {
        self.before = Some(key);
        self
    }

    /// The limit a store reads with: one more than the page, so it knows whether more follow.
    pub fn read_limit(&self) -> u32 {
        self.limit.clamp(1, crate::operator::MAX_PAGE) + 1
    }
}

/// One page of effects.
#[derive(Clone, Debug, PartialEq)]
pub struct EffectPage {
    /// The effects, newest first.
    pub effects: Vec<EffectView>,
    /// The cursor of the next page, when more follow.
    pub next: Option<IdempotencyKey>,
}

impl EffectPage {
    /// The page of `query` from rows read with [`EffectQuery::read_limit`].
    pub fn from_read(mut effects: Vec<EffectView>, query: &EffectQuery) -> EffectPage {
        let limit = query.limit.clamp(1, crate::operator::MAX_PAGE) as usize;
        let next = if effects.len() > limit {
            effects.truncate(limit);
            effects.last().map(|e| e.key.clone())
        } else {
            None
        };
        EffectPage { effects, next }
    }
}

/// What [`OperatorStore::claim_resend`](crate::OperatorStore::claim_resend) found.
#[derive(Clone, Debug, PartialEq)]
pub enum ResendClaim {
    /// Claimed now: this process sends it, once.
    Claimed,
    /// Already claimed by an earlier resend (who, when, what came of it): nothing is sent.
    AlreadyResent(ResendView),
}

/// The checks a reconciliation's `by` and `evidence` must pass before anything is touched: both
/// non-empty, `by` at most [`WHO_MAX_CHARS`] characters, the evidence at most
/// [`MAX_EVIDENCE_BYTES`] bytes.
pub fn check_reconciler(by: &str, evidence: &str) -> Result<(), StoreError> {
    if by.trim().is_empty() {
        return Err(StoreError::Conflict("a reconciliation names who decided"));
    }
    if by.chars().count() > WHO_MAX_CHARS {
        return Err(StoreError::Conflict(
            "who decided is longer than 512 characters",
        ));
    }
    if evidence.len() > MAX_EVIDENCE_BYTES {
        return Err(StoreError::Conflict(
            "the evidence is longer than 4096 bytes",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evidence_and_reconciler_are_bounded() {
        assert_eq!(
            check_reconciler("ada", &"e".repeat(MAX_EVIDENCE_BYTES)),
            Ok(())
        );
        assert_eq!(
            check_reconciler("ada", &"e".repeat(MAX_EVIDENCE_BYTES + 1)),
            Err(StoreError::Conflict(
                "the evidence is longer than 4096 bytes"
            ))
        );
        assert_eq!(
            check_reconciler(" ", "e"),
            Err(StoreError::Conflict("a reconciliation names who decided"))
        );
        assert!(check_reconciler(&"a".repeat(WHO_MAX_CHARS + 1), "e").is_err());
    }

    #[test]
    fn a_page_read_one_past_its_limit_names_its_last_key() {
        let view = |k: &str| EffectView {
            key: IdempotencyKey(k.into()),
            owner: "o".into(),
            claimed_at: SystemTime::UNIX_EPOCH,
            state: ClaimState::InFlight,
            completed_at: None,
            approval: None,
            tool: None,
            arguments: None,
            reconciled: None,
            resend: None,
        };
        let q = EffectQuery::all().limit(2);
        assert_eq!(q.read_limit(), 3);
        let page = EffectPage::from_read(vec![view("c"), view("b"), view("a")], &q);
        assert_eq!(page.effects.len(), 2);
        assert_eq!(page.next, Some(IdempotencyKey("b".into())));
        let page = EffectPage::from_read(vec![view("c"), view("b")], &q);
        assert_eq!(page.next, None);
    }
}
