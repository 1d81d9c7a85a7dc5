//! Idempotency contract: claim a call once, then record exactly one outcome.
//!
//! ```text
//! (none) ──claim──▶ in_flight ──complete──▶ committed (receipt) | not_started | unknown (reason)
//! ```
//! A key is claimed at most once, ever: claiming a key that exists returns its state instead, whatever
//! the outcome. `unknown` is a stored outcome that keeps its claim; nothing retries it, and only an
//! operator's reconciliation with independent evidence may move it on (outside this contract). A claim
//! found `in_flight` after a restart has no outcome and is never dispatched again.
//!
//! [`InMemoryIdempotencyStore`] is for tests: it is not durable and says so.

use crate::error_code::ErrorCode;
use crate::events::{EventSender, StoreEvent};
use crate::store::{BoxFuture, StoreError};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Mutex;

/// The key of one claim (Core uses the approval intent digest).
#[derive(
    Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct IdempotencyKey(pub String);

impl IdempotencyKey {
    /// The key an upstream sees for this claim (in `_meta` `io.purra/idempotency-key`, the wire
    /// constant is `purra_protocol::idempotency::META_KEY`): `purra-idem-v1-` and the 64 hexadecimal digits of
    /// SHA-256 over a domain tag and the claim key (the intent digest). Every retry or resend of one
    /// intent carries the same key; two intents never share one (short of a SHA-256 collision); the
    /// upstream learns nothing of the intent from it.
    pub fn upstream(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut hasher = Sha256::new();
        hasher.update(b"io.purra/idempotency-key/v1\n");
        hasher.update(self.0.as_bytes());
        let mut text = String::with_capacity(78);
        text.push_str("purra-idem-v1-");
        for b in hasher.finalize() {
            text.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
            text.push(char::from(b"0123456789abcdef"[usize::from(b & 15)]));
        }
        text
    }
}

/// The recorded outcome of a claimed call.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum EffectOutcome {
    /// The call succeeded with a validated result, kept as the receipt.
    Committed {
        /// The result.
        receipt: Value,
    },
    /// The call was refused before anything left the host.
    NotStarted,
    /// The call may or may not have had an effect.
    Unknown {
        /// Why the effect is unknown.
        reason: ErrorCode,
    },
}

/// The state of a key.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ClaimState {
    /// Claimed, no outcome recorded yet.
    InFlight,
    /// Completed with this outcome.
    Completed {
        /// The outcome.
        outcome: EffectOutcome,
    },
}

impl ClaimState {
    /// `in_flight`, `committed`, `not_started` or `unknown`.
    pub fn effect_word(&self) -> &'static str {
        match self {
            ClaimState::InFlight => "in_flight",
            ClaimState::Completed { outcome } => match outcome {
                EffectOutcome::Committed { .. } => "committed",
                EffectOutcome::NotStarted => "not_started",
                EffectOutcome::Unknown { .. } => "unknown",
            },
        }
    }

    /// The receipt of a `committed` outcome.
    pub fn receipt(&self) -> Option<&Value> {
        match self {
            ClaimState::Completed {
                outcome: EffectOutcome::Committed { receipt },
            } => Some(receipt),
            _ => None,
        }
    }
}

/// The answer to a claim.
#[derive(Clone, Debug, PartialEq)]
pub enum ClaimResult {
    /// The key is now claimed by the caller, who must complete it.
    Claimed,
    /// The key was claimed before; the caller must not dispatch.
    Existing(ClaimState),
}

/// The idempotency contract.
pub trait IdempotencyStore: Send + Sync {
    /// Whether claims and outcomes survive a crash of the host.
    fn is_durable(&self) -> bool;
    /// Claims `key` if it has never been claimed.
    fn claim(&self, key: IdempotencyKey) -> BoxFuture<'_, Result<ClaimResult, StoreError>>;
    /// Records the outcome of an in-flight claim (`Conflict` if it has one already, `NotFound` if never claimed).
    fn complete(
        &self,
        key: IdempotencyKey,
        outcome: EffectOutcome,
    ) -> BoxFuture<'_, Result<(), StoreError>>;
    /// The state of `key`, if it was ever claimed.
    fn state(&self, key: IdempotencyKey) -> BoxFuture<'_, Result<Option<ClaimState>, StoreError>>;
}

/// An in-memory idempotency store for tests. Not durable.
#[derive(Debug, Default)]
pub struct InMemoryIdempotencyStore {
    claims: Mutex<HashMap<IdempotencyKey, ClaimState>>,
    events: EventSender,
}

impl InMemoryIdempotencyStore {
    /// An empty store.
    pub fn new() -> InMemoryIdempotencyStore {
        InMemoryIdempotencyStore::default()
    }

    /// An empty store that announces outcomes on `events`.
    pub(crate) fn with_events(events: EventSender) -> InMemoryIdempotencyStore {
        InMemoryIdempotencyStore {
            claims: Mutex::default(),
            events,
        }
    }

    /// Claims synchronously (used by the in-memory gateway inside its own critical section).
    pub(crate) fn claim_now(&self, key: IdempotencyKey) -> ClaimResult {
        let mut claims = self.claims.lock().unwrap_or_else(|p| p.into_inner());
        match claims.get(&key) {
            Some(state) => ClaimResult::Existing(state.clone()),
            None => {
                claims.insert(key, ClaimState::InFlight);
                ClaimResult::Claimed
            }
        }
    }
}

impl IdempotencyStore for InMemoryIdempotencyStore {
    fn is_durable(&self) -> bool {
        false
    }

    fn claim(&self, key: IdempotencyKey) -> BoxFuture<'_, Result<ClaimResult, StoreError>> {
        let result = self.claim_now(key);
        Box::pin(async move { Ok(result) })
    }

    fn complete(
        &self,
        key: IdempotencyKey,
        outcome: EffectOutcome,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        let result = {
            let mut claims = self.claims.lock().unwrap_or_else(|p| p.into_inner());
            match claims.get_mut(&key) {
                None => Err(StoreError::NotFound),
                Some(ClaimState::Completed { .. }) => {
                    Err(StoreError::Conflict("the claim already has an outcome"))
                }
                Some(state) => {
                    *state = ClaimState::Completed { outcome };
                    self.events.send(StoreEvent::Outcome { key });
                    Ok(())
                }
            }
        };
        Box::pin(async move { result })
    }

    fn state(&self, key: IdempotencyKey) -> BoxFuture<'_, Result<Option<ClaimState>, StoreError>> {
        let result = self
            .claims
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .cloned();
        Box::pin(async move { Ok(result) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upstream_key_is_stable_per_intent_and_differs_between_intents() {
        let key = |s: &str| IdempotencyKey(s.to_owned()).upstream();
        let mut seen = std::collections::HashSet::new();
        for i in 0..1000 {
            let digest = format!("sha256:{i:064x}");
            let first = key(&digest);
            assert_eq!(
                first,
                key(&digest),
                "a retry of intent {i} carries the same key"
            );
            assert_eq!(first.len(), 78);
            assert!(first.starts_with("purra-idem-v1-"));
            assert!(
                !first.contains(&digest[7..]),
                "the key does not reveal the digest"
            );
            assert!(seen.insert(first), "intent {i} shares a key with another");
        }
        // A fixed vector, so the derivation cannot drift between releases (a resend after an
        // upgrade carries the key the first send did).
        assert_eq!(
            key("sha256:00"),
            "purra-idem-v1-7a270ce1bdaee2a9f39730d4a8136d0f178ea4bf049038ee912c494adb249f61"
        );
    }

    #[tokio::test]
    async fn a_key_is_claimed_once_and_unknown_keeps_its_claim() {
        let store = InMemoryIdempotencyStore::new();
        let key = IdempotencyKey("k".into());
        assert!(!store.is_durable());
        assert_eq!(store.claim(key.clone()).await, Ok(ClaimResult::Claimed));
        assert_eq!(
            store.claim(key.clone()).await,
            Ok(ClaimResult::Existing(ClaimState::InFlight))
        );
        let unknown = EffectOutcome::Unknown {
            reason: ErrorCode::TOOL_TIMEOUT,
        };
        assert_eq!(store.complete(key.clone(), unknown.clone()).await, Ok(()));
        assert_eq!(
            store.complete(key.clone(), EffectOutcome::NotStarted).await,
            Err(StoreError::Conflict("the claim already has an outcome"))
        );
        assert_eq!(
            store.claim(key.clone()).await,
            Ok(ClaimResult::Existing(ClaimState::Completed {
                outcome: unknown
            }))
        );
        assert_eq!(
            store
                .complete(IdempotencyKey("other".into()), EffectOutcome::NotStarted)
                .await,
            Err(StoreError::NotFound)
        );
    }
}
