//! Store events: what changed in a store, for hosts that wait on a decision and pages that update live.
//!
//! Every durable change a store makes is an audit row; the events are those rows, named by what they
//! concern ([`StoreEvent`]) and derived from them with [`StoreEvent::from_audit`], so every store emits
//! the same events for the same changes. An event says *what* changed, never the new state: a subscriber
//! re-reads what it shows (`record`, `approval`), which is always the committed truth.
//!
//! A subscriber that falls behind, or whose store lost its notification channel for a while, receives
//! [`StoreEvent::Resync`]: events may have been missed, so everything shown must be re-read. The order of
//! work is therefore: subscribe, then read, then re-read on each event (see
//! [`crate::ApprovalGateway::wait_for_decision`]).
//!
//! [`EventSender`] is the sending half stores keep; [`StoreEvents`] the receiving half a subscriber holds.

use crate::approval::{ApprovalId, Verdict};
use crate::idempotency::IdempotencyKey;
use tokio::sync::broadcast;

/// How many events a subscriber may fall behind before it is told to resynchronize.
pub const EVENT_BUFFER: usize = 1024;

/// One change in a store.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreEvent {
    /// An approval was prepared (it waits for a decision).
    Prepared {
        /// The approval.
        id: ApprovalId,
    },
    /// An approval was decided.
    Decided {
        /// The approval.
        id: ApprovalId,
        /// Approve or deny (the record has the rest).
        verdict: Verdict,
    },
    /// An approval was claimed for dispatch.
    Claimed {
        /// The approval.
        id: ApprovalId,
        /// The claim's key.
        key: IdempotencyKey,
    },
    /// An approval was refused at dispatch (expired or mismatched); it never dispatches.
    Refused {
        /// The approval.
        id: ApprovalId,
    },
    /// An approval's workflow moved without deciding it: a vote of a quorum was cast, or it
    /// escalated (the `voted` and `escalated` audit rows).
    Workflow {
        /// The approval.
        id: ApprovalId,
    },
    /// A claim's outcome was recorded, found interrupted, or reconciled by an operator.
    Outcome {
        /// The claim's key.
        key: IdempotencyKey,
    },
    /// Events may have been missed: re-read everything shown.
    Resync,
}

impl std::fmt::Display for StoreEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreEvent::Prepared { id } => write!(f, "prepared {}", id.0),
            StoreEvent::Decided { id, verdict } => {
                let word = match verdict {
                    Verdict::Approve => "approved",
                    Verdict::Deny => "denied",
                };
                write!(f, "{word} {}", id.0)
            }
            StoreEvent::Claimed { id, key } => write!(f, "claimed {} ({})", id.0, key.0),
            StoreEvent::Refused { id } => write!(f, "refused {}", id.0),
            StoreEvent::Workflow { id } => write!(f, "workflow {}", id.0),
            StoreEvent::Outcome { key } => write!(f, "outcome {}", key.0),
            StoreEvent::Resync => f.write_str("resync"),
        }
    }
}

impl StoreEvent {
    /// The event an audit row records, if it is one subscribers hear of: `prepared`, `decided`
    /// (`verdict` from its detail), `claimed` of an approval, `refused`, and the outcome rows
    /// (`outcome`, `interrupted`, `reconciled`). Other rows (`opened`, `claim_refused`, runs...) are none.
    pub fn from_audit(
        event: &str,
        approval_id: Option<&str>,
        claim_key: Option<&str>,
        detail: &serde_json::Value,
    ) -> Option<StoreEvent> {
        let id = || approval_id.map(|a| ApprovalId(a.to_owned()));
        let key = || claim_key.map(|k| IdempotencyKey(k.to_owned()));
        Some(match event {
            "prepared" => StoreEvent::Prepared { id: id()? },
            "decided" => StoreEvent::Decided {
                id: id()?,
                verdict: match detail.get("verdict")?.as_str()? {
                    "approve" => Verdict::Approve,
                    "deny" => Verdict::Deny,
                    _ => return None,
                },
            },
            "claimed" => StoreEvent::Claimed {
                id: id()?,
                key: key()?,
            },
            "refused" => StoreEvent::Refused { id: id()? },
            "voted" | "escalated" => StoreEvent::Workflow { id: id()? },
            "outcome" | "interrupted" | "reconciled" => StoreEvent::Outcome { key: key()? },
            _ => return None,
        })
    }

    /// The approval this event concerns, if it names one.
    pub fn approval_id(&self) -> Option<&ApprovalId> {
        match self {
            StoreEvent::Prepared { id }
            | StoreEvent::Decided { id, .. }
            | StoreEvent::Claimed { id, .. }
            | StoreEvent::Refused { id }
            | StoreEvent::Workflow { id } => Some(id),
            StoreEvent::Outcome { .. } | StoreEvent::Resync => None,
        }
    }
}

/// The sending half a store keeps; cloning shares it. Sending never blocks and never fails (with no
/// subscriber the event is dropped).
#[derive(Clone, Debug)]
pub struct EventSender {
    tx: broadcast::Sender<StoreEvent>,
}

impl Default for EventSender {
    fn default() -> Self {
        EventSender::new()
    }
}

impl EventSender {
    /// A sender with no subscriber yet.
    pub fn new() -> EventSender {
        EventSender {
            tx: broadcast::channel(EVENT_BUFFER).0,
        }
    }

    /// Sends `event` to every current subscriber.
    pub fn send(&self, event: StoreEvent) {
        let _ = self.tx.send(event);
    }

    /// A new subscriber: it receives every event sent from now on.
    pub fn subscribe(&self) -> StoreEvents {
        StoreEvents {
            rx: self.tx.subscribe(),
        }
    }

    /// How many subscribers are listening.
    pub fn subscribers(&self) -> usize {
        self.tx.receiver_count()
    }
}

/// A subscriber's stream of [`StoreEvent`]s.
#[derive(Debug)]
pub struct StoreEvents {
    rx: broadcast::Receiver<StoreEvent>,
}

impl StoreEvents {
    /// The next event; [`StoreEvent::Resync`] when this subscriber fell behind; `None` once the store
    /// is gone.
    pub async fn next(&mut self) -> Option<StoreEvent> {
        match self.rx.recv().await {
            Ok(event) => Some(event),
            Err(broadcast::error::RecvError::Lagged(_)) => Some(StoreEvent::Resync),
            Err(broadcast::error::RecvError::Closed) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn audit_rows_name_their_events() {
        let none = json!({});
        assert_eq!(
            StoreEvent::from_audit("prepared", Some("approval-1"), None, &none),
            Some(StoreEvent::Prepared {
                id: ApprovalId("approval-1".into())
            })
        );
        assert_eq!(
            StoreEvent::from_audit(
                "decided",
                Some("approval-1"),
                None,
                &json!({"verdict": "deny"})
            ),
            Some(StoreEvent::Decided {
                id: ApprovalId("approval-1".into()),
                verdict: Verdict::Deny
            })
        );
        assert_eq!(
            StoreEvent::from_audit("claimed", Some("approval-1"), Some("k"), &none),
            Some(StoreEvent::Claimed {
                id: ApprovalId("approval-1".into()),
                key: IdempotencyKey("k".into())
            })
        );
        // A bare idempotency claim names no approval: no event.
        assert_eq!(
            StoreEvent::from_audit("claimed", None, Some("k"), &none),
            None
        );
        for e in ["outcome", "interrupted", "reconciled"] {
            assert_eq!(
                StoreEvent::from_audit(e, None, Some("k"), &none),
                Some(StoreEvent::Outcome {
                    key: IdempotencyKey("k".into())
                })
            );
        }
        for e in [
            "opened",
            "closed",
            "claim_refused",
            "run_suspended",
            "outcome_rejected",
        ] {
            assert_eq!(
                StoreEvent::from_audit(e, Some("approval-1"), Some("k"), &none),
                None
            );
        }
        assert_eq!(
            StoreEvent::Decided {
                id: ApprovalId("approval-2".into()),
                verdict: Verdict::Approve
            }
            .to_string(),
            "approved approval-2"
        );
    }

    #[tokio::test]
    async fn a_slow_subscriber_is_told_to_resync() {
        let tx = EventSender::new();
        let mut rx = tx.subscribe();
        assert_eq!(tx.subscribers(), 1);
        for n in 0..EVENT_BUFFER + 5 {
            tx.send(StoreEvent::Outcome {
                key: IdempotencyKey(n.to_string()),
            });
        }
        assert_eq!(rx.next().await, Some(StoreEvent::Resync));
        assert_eq!(
            rx.next().await,
            Some(StoreEvent::Outcome {
                key: IdempotencyKey("5".into())
            })
        );
        drop(tx);
        let mut rest = 0;
        while rx.next().await.is_some() {
            rest += 1;
        }
        assert_eq!(rest, EVENT_BUFFER - 1);
    }
}
