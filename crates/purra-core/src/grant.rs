//! Standing grants: an approver's decision made once for a bounded number of calls.
//!
//! A grant names a principal, a write tool (the gateway's local name), optional argument rules
//! (the gateway's rule grammar, such as `path within "/srv/notes"`, kept as text and evaluated by
//! the gateway), at most `max_uses` uses, and an instant after which it is not used; an approver
//! makes it with a note and may revoke it. A call inside a live grant takes one use with
//! [`GrantStore::use_grant`]: in ONE transaction the store takes the use (a conditional update
//! that cannot take more than `max_uses`, whichever process on the store races it), prepares the
//! call's approval, records its approval by the grant (the approver names the grant, path
//! `grant`) and lists the use with the grant, audited as `grant_used`. The call is then claimed
//! like any approved call; without a use left, the call waits for an approval as any other.

use crate::approval::{ApprovalId, ApprovalRequest, Decision};
use crate::store::{BoxFuture, StoreError};
use std::time::SystemTime;

/// The most uses one grant may allow (its uses are listed with it).
pub const MAX_GRANT_USES: u32 = 10_000;

/// The most argument rules of one grant.
pub const MAX_GRANT_RULES: usize = 32;

/// The most bytes of a grant's text fields (principal, tool, each rule, approver, note).
pub const MAX_GRANT_TEXT: usize = 4096;

/// The identifier of one grant (`grant-N`).
#[derive(
    Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct GrantId(pub String);

impl GrantId {
    /// The id of the grant stored as row `seq`.
    pub fn of_seq(seq: i64) -> GrantId {
        GrantId(format!("grant-{seq}"))
    }

    /// The row of a `grant-N` id; `None` for anything else.
    pub fn seq(&self) -> Option<i64> {
        self.0
            .strip_prefix("grant-")
            .and_then(|n| n.parse::<i64>().ok())
            .filter(|n| *n > 0)
    }
}

impl std::fmt::Display for GrantId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A grant to record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewGrant {
    /// The principal whose calls it covers (exactly as the gateway names callers).
    pub principal: String,
    /// The write tool (the gateway's local name).
    pub tool: String,
    /// Argument rules every covered call satisfies (none: any arguments).
    pub rules: Vec<String>,
    /// At most this many uses (1 to [`MAX_GRANT_USES`]).
    pub max_uses: u32,
    /// Not used at or after this instant.
    pub until: SystemTime,
    /// The approver who granted it.
    pub granted_by: String,
    /// The approver's note.
    pub note: Option<String>,
}

impl NewGrant {
    /// Checks the bounds (`Conflict` naming the first one broken).
    pub fn check(&self, now: SystemTime) -> Result<(), StoreError> {
        if self.principal.is_empty() || self.tool.is_empty() || self.granted_by.is_empty() {
            return Err(StoreError::Conflict(
                "a grant names a principal, a tool and who granted it",
            ));
        }
        if self.max_uses == 0 || self.max_uses > MAX_GRANT_USES {
            return Err(StoreError::Conflict("a grant allows 1 to 10000 uses"));
        }
        if self.until <= now {
            return Err(StoreError::Conflict("a grant ends in the future"));
        }
        if self.rules.len() > MAX_GRANT_RULES {
            return Err(StoreError::Conflict("a grant has at most 32 rules"));
        }
        let texts = [&self.principal, &self.tool, &self.granted_by]
            .into_iter()
            .chain(self.rules.iter())
            .chain(self.note.iter());
        for t in texts {
            if t.len() > MAX_GRANT_TEXT {
                return Err(StoreError::Conflict("a grant's text is at most 4096 bytes"));
            }
        }
        Ok(())
    }
}

/// One use of a grant: the approval it approved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrantUse {
    /// The approval prepared and approved by the grant.
    pub approval_id: ApprovalId,
    /// When the use was taken.
    pub at: SystemTime,
}

/// A stored grant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrantView {
    /// Its id.
    pub id: GrantId,
    /// The grant as made.
    pub grant: NewGrant,
    /// When it was made.
    pub granted_at: SystemTime,
    /// How many uses were taken.
    pub used: u32,
    /// When it was revoked, and by whom.
    pub revoked: Option<(SystemTime, String)>,
    /// Its uses, oldest first (read by [`GrantStore::grant`]; empty in listings).
    pub uses: Vec<GrantUse>,
}

impl GrantView {
    /// Uses left (0 once revoked or ended is still the count; see [`GrantView::is_live`]).
    pub fn uses_left(&self) -> u32 {
        self.grant.max_uses.saturating_sub(self.used)
    }

    /// Whether a call at `now` may use it: not revoked, not ended, a use left.
    pub fn is_live(&self, now: SystemTime) -> bool {
        self.revoked.is_none() && self.grant.until > now && self.uses_left() > 0
    }

    /// `live`, `revoked`, `ended` (its time passed) or `used_up`.
    pub fn status(&self, now: SystemTime) -> &'static str {
        if self.revoked.is_some() {
            "revoked"
        } else if self.grant.until <= now {
            "ended"
        } else if self.uses_left() == 0 {
            "used_up"
        } else {
            "live"
        }
    }
}

/// A durable store's standing grants, shared by every process on it.
pub trait GrantStore: Send + Sync {
    /// Records a grant ([`NewGrant::check`] first); its id. Audited (`grant_added`).
    fn add_grant(&self, grant: NewGrant) -> BoxFuture<'_, Result<GrantId, StoreError>>;
    /// Every grant, newest first, at most `limit` (uses not read).
    fn grants(&self, limit: u32) -> BoxFuture<'_, Result<Vec<GrantView>, StoreError>>;
    /// One grant with its uses.
    fn grant(&self, id: GrantId) -> BoxFuture<'_, Result<Option<GrantView>, StoreError>>;
    /// The grants of `principal` for `tool` live at `now` (uses not read), oldest first.
    fn live_grants(
        &self,
        principal: String,
        tool: String,
        now: SystemTime,
    ) -> BoxFuture<'_, Result<Vec<GrantView>, StoreError>>;
    /// Revokes a grant: no use is taken after this commits. Audited (`grant_revoked`).
    /// `NotFound`; `Conflict("already revoked")`.
    fn revoke_grant(&self, id: GrantId, by: String) -> BoxFuture<'_, Result<(), StoreError>>;
    /// Takes one use of grant `id` for `request` at `now`, in one transaction: the use (only if
    /// the grant is not revoked, has not ended at `now`, has a use left and names the request's
    /// principal and tool), the approval prepared from `request`, `decision` recorded on it
    /// (an approval), the use listed with the grant and audited (`grant_used`). `Ok(None)` and
    /// nothing written when the grant cannot be used.
    fn use_grant(
        &self,
        id: GrantId,
        request: ApprovalRequest,
        decision: Decision,
        now: SystemTime,
    ) -> BoxFuture<'_, Result<Option<ApprovalId>, StoreError>>;
    /// [`GrantStore::use_grant`] and, in the same transaction, the claim of the approval it
    /// prepares ([`ApprovalGateway::check_and_claim`](crate::ApprovalGateway::check_and_claim)
    /// against the request's own intent at `now`): one durable write where the two calls make
    /// two, so a crash leaves either no use or a use whose claim is committed (never sent twice:
    /// a claim without an outcome becomes `unknown`). `Ok(None)` and nothing written when the
    /// grant cannot be used; otherwise the approval and its claim's verdict (`AlreadyClaimed`
    /// when another approval of the same intent claimed it first: the use is kept, audited).
    fn use_grant_and_claim(
        &self,
        id: GrantId,
        request: ApprovalRequest,
        decision: Decision,
        now: SystemTime,
    ) -> BoxFuture<'_, Result<Option<(ApprovalId, crate::ClaimVerdict)>, StoreError>>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn grant() -> NewGrant {
        NewGrant {
            principal: "alice".into(),
            tool: "notes_write".into(),
            rules: vec![],
            max_uses: 3,
            until: SystemTime::now() + Duration::from_secs(60),
            granted_by: "bob".into(),
            note: None,
        }
    }

    #[test]
    fn grant_ids_and_bounds() {
        assert_eq!(GrantId::of_seq(7).0, "grant-7");
        assert_eq!(GrantId("grant-7".into()).seq(), Some(7));
        assert_eq!(GrantId("grant-0".into()).seq(), None);
        assert_eq!(GrantId("approval-7".into()).seq(), None);
        let now = SystemTime::now();
        assert!(grant().check(now).is_ok());
        let zero = NewGrant {
            max_uses: 0,
            ..grant()
        };
        assert!(zero.check(now).is_err());
        let past = NewGrant {
            until: now - Duration::from_secs(1),
            ..grant()
        };
        assert!(past.check(now).is_err());
        let view = GrantView {
            id: GrantId::of_seq(1),
            grant: grant(),
            granted_at: now,
            used: 3,
            revoked: None,
            uses: vec![],
        };
        assert_eq!((view.uses_left(), view.status(now)), (0, "used_up"));
        assert!(!view.is_live(now));
    }
}
