//! The stored spelling of store values, shared by every durable backend (SQLite, PostgreSQL): an
//! approval id is its sequence number, an outcome has a kind column beside its JSON, a claim row
//! without an outcome is in flight, and an instant is nanoseconds since the Unix epoch.
//!
//! No SQL here: only how values are written down, so two backends can never disagree on it (an
//! approval id minted by one store is parsed the same way by the page, the CLI and the other).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::{ApprovalId, ClaimState, EffectOutcome, StoreError};

/// The approval id of sequence number `seq`: `approval-{seq}`.
pub fn approval_id(seq: i64) -> ApprovalId {
    ApprovalId(format!("approval-{seq}"))
}

/// The sequence number of an approval id, if it is exactly one [`approval_id`] writes (no sign,
/// no leading zero, nothing after the number).
pub fn approval_seq(id: &ApprovalId) -> Option<i64> {
    approval_seq_of(&id.0)
}

/// [`approval_seq`] of an id held as text (a stored column, a request's field), without building
/// an [`ApprovalId`].
pub fn approval_seq_of(id: &str) -> Option<i64> {
    let n: i64 = id.strip_prefix("approval-")?.parse().ok()?;
    (format!("approval-{n}") == id).then_some(n)
}

/// The kind column of an outcome: `committed`, `not_started` or `unknown`.
pub fn outcome_kind(outcome: &EffectOutcome) -> &'static str {
    match outcome {
        EffectOutcome::Committed { .. } => "committed",
        EffectOutcome::NotStarted => "not_started",
        EffectOutcome::Unknown { .. } => "unknown",
    }
}

/// The state of a claim row from its outcome column: none yet is in flight.
pub fn claim_state(outcome_json: Option<String>) -> Result<ClaimState, StoreError> {
    Ok(match outcome_json {
        None => ClaimState::InFlight,
        Some(text) => ClaimState::Completed {
            outcome: serde_json::from_str(&text).map_err(json_error)?,
        },
    })
}

/// A stored JSON column that does not decode: a backend failure, named as such.
pub fn json_error(e: serde_json::Error) -> StoreError {
    StoreError::Backend(format!("stored JSON: {e}"))
}

/// Nanoseconds since the Unix epoch (the stored form of every instant); instants before 1970 or
/// after 2262 are refused.
pub fn to_ns(t: SystemTime) -> Result<i64, StoreError> {
    let d = t
        .duration_since(UNIX_EPOCH)
        .map_err(|_| StoreError::Backend("instant before 1970".into()))?;
    i64::try_from(d.as_nanos()).map_err(|_| StoreError::Backend("instant after 2262".into()))
}

/// The instant of a stored nanosecond count (a negative one reads as the epoch).
pub fn from_ns(ns: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(ns.max(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approval_ids_round_trip_and_reject_other_spellings() {
        assert_eq!(approval_seq(&approval_id(42)), Some(42));
        for bad in [
            "approval-",
            "approval-01",
            "approval-+1",
            "approval-x",
            "42",
            "",
        ] {
            assert_eq!(approval_seq(&ApprovalId(bad.into())), None, "{bad}");
        }
    }

    #[test]
    fn instants_are_stored_to_the_nanosecond() {
        let t = UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789);
        assert_eq!(to_ns(t), Ok(1_700_000_000_123_456_789));
        assert_eq!(from_ns(to_ns(t).unwrap()), t);
        assert!(to_ns(UNIX_EPOCH - Duration::from_secs(1)).is_err());
    }

    #[test]
    fn claim_rows_read_back() {
        assert_eq!(claim_state(None), Ok(ClaimState::InFlight));
        assert_eq!(
            claim_state(Some(r#"{"outcome":"not_started"}"#.into())),
            Ok(ClaimState::Completed {
                outcome: EffectOutcome::NotStarted
            })
        );
        assert!(matches!(
            claim_state(Some("{".into())),
            Err(StoreError::Backend(m)) if m.starts_with("stored JSON: ")
        ));
        assert_eq!(outcome_kind(&EffectOutcome::NotStarted), "not_started");
    }
}
