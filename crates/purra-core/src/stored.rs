//! The stored spelling of store values, shared by every durable backend (SQLite, PostgreSQL): an
//! approval id is its sequence number, an outcome has a kind column beside its JSON, a claim row
//! without an outcome is in flight, and an instant is nanoseconds since the Unix epoch.
//!
//! No SQL here: only how values are written down, so two backends can never disagree on it (an
//! approval id minted by one store is parsed the same way by the page, the CLI and the other).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::{
    ApprovalId, ApprovalQuery, ApprovalStatus, ClaimState, EffectOutcome, StoreError, MAX_PAGE,
};

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

/// An [`ApprovalQuery`] lowered to the stored columns, which every durable backend turns into its
/// own SQL: the state and verdict as the literals stored (from a fixed set, so a backend may spell
/// them into its statement and let the planner pick a partial index), the cursors as sequence
/// numbers, instants as nanoseconds, the limit capped at [`MAX_PAGE`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApprovalFilter {
    /// Only the approval of this sequence number.
    pub seq: Option<i64>,
    /// Only approvals in this stored state (`prepared`, `decided`, `claimed`, `refused`).
    pub state: Option<&'static str>,
    /// Only decisions with this stored verdict (`approve`, `deny`).
    pub verdict: Option<&'static str>,
    /// Every state but `prepared` (the history).
    pub decided: bool,
    /// Only approvals of this run.
    pub run_id: Option<String>,
    /// Only approvals whose request names this principal.
    pub principal: Option<String>,
    /// Pending with a request that accepts a decision at this instant (ns).
    pub open_at: Option<i64>,
    /// Only sequence numbers above this one (0: from the first).
    pub after: i64,
    /// Only sequence numbers below this one.
    pub before: Option<i64>,
    /// Newest first instead of oldest first.
    pub newest_first: bool,
    /// At most this many.
    pub limit: u32,
}

impl ApprovalFilter {
    /// The one approval of sequence number `seq`.
    pub fn one(seq: i64) -> ApprovalFilter {
        ApprovalFilter {
            seq: Some(seq),
            limit: 1,
            ..ApprovalFilter::every()
        }
    }

    /// Every approval, oldest first, at most [`MAX_PAGE`].
    pub fn every() -> ApprovalFilter {
        ApprovalFilter {
            seq: None,
            state: None,
            verdict: None,
            decided: false,
            run_id: None,
            principal: None,
            open_at: None,
            after: 0,
            before: None,
            newest_first: false,
            limit: MAX_PAGE,
        }
    }

    /// The filter of `query` (`NotFound` for a cursor that is not an approval id).
    pub fn of(query: &ApprovalQuery) -> Result<ApprovalFilter, StoreError> {
        let cursor = |id: &Option<ApprovalId>| {
            id.as_ref()
                .map(|id| approval_seq(id).ok_or(StoreError::NotFound))
                .transpose()
        };
        let (state, verdict) = match query.status {
            None => (None, None),
            Some(ApprovalStatus::Pending) => (Some("prepared"), None),
            Some(ApprovalStatus::Approved) => (Some("decided"), Some("approve")),
            Some(ApprovalStatus::Denied) => (Some("decided"), Some("deny")),
            Some(ApprovalStatus::Claimed) => (Some("claimed"), None),
            Some(_) => (Some("refused"), None),
        };
        Ok(ApprovalFilter {
            seq: None,
            state,
            verdict,
            decided: query.decided,
            run_id: query.run_id.as_ref().map(|r| r.as_str().to_owned()),
            principal: query.principal.clone(),
            open_at: query.open_at.map(to_ns).transpose()?,
            after: cursor(&query.after)?.unwrap_or(0),
            before: cursor(&query.before)?,
            newest_first: query.newest_first,
            limit: query.limit.min(MAX_PAGE),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both durable stores lower a query through this one function: statuses to the stored
    /// literals, cursors to sequence numbers (a cursor that is no approval id is `NotFound`),
    /// the limit capped.
    #[test]
    fn a_query_is_lowered_to_the_stored_columns() {
        let mut q = ApprovalQuery {
            status: Some(ApprovalStatus::Denied),
            before: Some(approval_id(42)),
            limit: MAX_PAGE + 7,
            ..ApprovalQuery::default()
        };
        let f = ApprovalFilter::of(&q).unwrap();
        assert_eq!((f.state, f.verdict), (Some("decided"), Some("deny")));
        assert_eq!((f.after, f.before, f.limit), (0, Some(42), MAX_PAGE));
        q.status = Some(ApprovalStatus::Pending);
        assert_eq!(ApprovalFilter::of(&q).unwrap().state, Some("prepared"));
        q.after = Some(ApprovalId("approval-07".into()));
        assert!(matches!(ApprovalFilter::of(&q), Err(StoreError::NotFound)));
        assert_eq!(
            ApprovalFilter::one(7),
            ApprovalFilter {
                seq: Some(7),
                limit: 1,
                ..ApprovalFilter::every()
            }
        );
    }

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
