//! The credential store contract: each principal's upstream credentials (the tokens of a per-user
//! OAuth connection, a personal secret for a stdio server), kept only sealed.
//!
//! A record is keyed by principal, upstream and name ([`CredentialKey`]) and holds its kind
//! ([`CredentialKind`]), the sealed secret bytes ([`SealedSecret`], opaque to the store: see
//! [`crate::vault`] for sealing and opening), what may be shown of it ([`CredentialMeta`]: issuer,
//! scopes, subject, the access token's expiry) and a `version` for compare-and-swap.
//!
//! ```text
//! put ──▶ version 1 ──put / replace_if_version(1)──▶ version 2 ──…──▶ delete (revoke)
//! ```
//!
//! Two gateway instances refreshing the same OAuth connection at once both read version `n`, both
//! obtain new tokens, and both call [`CredentialStore::replace_credential_if_version`] with `n`:
//! exactly one write wins (`true`, the record is now at `n + 1`); the loser gets `false`, re-reads,
//! and uses the winner's tokens. Tokens obtained by token exchange are never stored here.
//!
//! Listings ([`CredentialStore::credentials`]) return [`CredentialInfo`], which has no secret
//! bytes at all; only [`CredentialStore::credential`] returns the sealed bytes, and the store
//! never sees a plaintext.

use crate::store::{BoxFuture, StoreError};
use std::fmt;
use std::time::SystemTime;

/// The longest principal, upstream or credential name, in bytes.
pub const MAX_KEY_PART: usize = 256;
/// The longest sealed secret a store keeps, in bytes (a token pair with room to spare).
pub const MAX_SEALED: usize = 64 * 1024;
/// The longest metadata value (issuer, scopes, subject), in bytes.
pub const MAX_META: usize = 4096;

/// Where a credential belongs: the principal it acts for, the upstream it is for, and its name
/// there (`oauth` for a connection's tokens, or the name a stdio server's setting refers to).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CredentialKey {
    /// The principal (the caller's identity at the gateway).
    pub principal: String,
    /// The upstream id (`[upstreams.ID]`).
    pub upstream: String,
    /// The credential's name under that principal and upstream.
    pub name: String,
}

impl CredentialKey {
    /// The key `principal`, `upstream`, `name`.
    pub fn new(
        principal: impl Into<String>,
        upstream: impl Into<String>,
        name: impl Into<String>,
    ) -> CredentialKey {
        CredentialKey {
            principal: principal.into(),
            upstream: upstream.into(),
            name: name.into(),
        }
    }

    /// Checks the key's parts: each non-empty, at most [`MAX_KEY_PART`] bytes, without control
    /// characters.
    pub fn check(&self) -> Result<(), StoreError> {
        for (what, part) in [
            ("principal", &self.principal),
            ("upstream", &self.upstream),
            ("name", &self.name),
        ] {
            check_part(what, part)?;
        }
        Ok(())
    }
}

fn check_part(what: &'static str, part: &str) -> Result<(), StoreError> {
    if part.is_empty() || part.len() > MAX_KEY_PART || part.chars().any(char::is_control) {
        return Err(StoreError::Conflict(match what {
            "principal" => "a credential's principal is 1 to 256 bytes without control characters",
            "upstream" => "a credential's upstream is 1 to 256 bytes without control characters",
            _ => "a credential's name is 1 to 256 bytes without control characters",
        }));
    }
    Ok(())
}

impl fmt::Display for CredentialKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.principal, self.upstream, self.name)
    }
}

/// What a credential is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CredentialKind {
    /// The tokens of a per-user OAuth connection (refresh and access token).
    OAuth,
    /// A secret set by its principal or an operator (a personal access token for a stdio server).
    Secret,
}

impl CredentialKind {
    /// `oauth` or `secret`, as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            CredentialKind::OAuth => "oauth",
            CredentialKind::Secret => "secret",
        }
    }

    /// Reads [`CredentialKind::as_str`]'s words.
    pub fn parse(word: &str) -> Option<CredentialKind> {
        match word {
            "oauth" => Some(CredentialKind::OAuth),
            "secret" => Some(CredentialKind::Secret),
            _ => None,
        }
    }
}

impl fmt::Display for CredentialKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The sealed secret bytes of a record, as [`crate::vault::Keyring::seal`] made them: opaque to a
/// store. `Debug` shows only their length.
#[derive(Clone, PartialEq, Eq)]
pub struct SealedSecret(pub Vec<u8>);

impl fmt::Debug for SealedSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SealedSecret([{} bytes])", self.0.len())
    }
}

/// What may be shown of a credential: never a token or a secret.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CredentialMeta {
    /// The authorization server that issued it (OAuth).
    pub issuer: Option<String>,
    /// The scopes granted, space-separated (OAuth).
    pub scopes: Option<String>,
    /// Who the upstream knows the principal as (the token's `sub`), when known.
    pub subject: Option<String>,
    /// When the access token expires (OAuth).
    pub expires_at: Option<SystemTime>,
}

impl CredentialMeta {
    /// Checks each value: at most [`MAX_META`] bytes, without control characters.
    pub fn check(&self) -> Result<(), StoreError> {
        for value in [&self.issuer, &self.scopes, &self.subject]
            .into_iter()
            .flatten()
        {
            if value.len() > MAX_META || value.chars().any(char::is_control) {
                return Err(StoreError::Conflict(
                    "a credential's issuer, scopes and subject are at most 4096 bytes without \
                     control characters",
                ));
            }
        }
        Ok(())
    }
}

/// A credential as written: its kind, sealed bytes, metadata, and when it is written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CredentialWrite {
    /// The kind.
    pub kind: CredentialKind,
    /// The sealed secret.
    pub sealed: SealedSecret,
    /// What may be shown.
    pub meta: CredentialMeta,
    /// When it is written (the record's `updated_at`, and `created_at` of a new one).
    pub at: SystemTime,
}

impl CredentialWrite {
    /// Checks `key` and this write before a store keeps them: the key's parts, the metadata, and
    /// the sealed bytes (non-empty, at most [`MAX_SEALED`]).
    pub fn check(&self, key: &CredentialKey) -> Result<(), StoreError> {
        key.check()?;
        self.meta.check()?;
        if self.sealed.0.is_empty() || self.sealed.0.len() > MAX_SEALED {
            return Err(StoreError::Conflict(
                "a sealed credential is 1 byte to 64 KiB",
            ));
        }
        Ok(())
    }
}

/// What a listing shows of a credential: everything but its secret bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CredentialInfo {
    /// Where it belongs.
    pub key: CredentialKey,
    /// The kind.
    pub kind: CredentialKind,
    /// What may be shown.
    pub meta: CredentialMeta,
    /// When it was first stored.
    pub created_at: SystemTime,
    /// When it was last written.
    pub updated_at: SystemTime,
    /// When it was last used for a call, if it was.
    pub last_used_at: Option<SystemTime>,
    /// Its version: 1 when first stored, one more at each write.
    pub version: u64,
}

/// A whole record: what a listing shows, and the sealed secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CredentialRecord {
    /// Everything but the secret.
    pub info: CredentialInfo,
    /// The sealed secret bytes.
    pub sealed: SealedSecret,
}

/// Which credentials a listing shows: all, or only a principal's, an upstream's, or both.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CredentialFilter {
    /// Only this principal's.
    pub principal: Option<String>,
    /// Only this upstream's.
    pub upstream: Option<String>,
}

/// Where a store keeps each principal's upstream credentials, sealed.
pub trait CredentialStore: Send + Sync {
    /// The record at `key`, if there is one.
    fn credential(
        &self,
        key: CredentialKey,
    ) -> BoxFuture<'_, Result<Option<CredentialRecord>, StoreError>>;

    /// The credentials `filter` selects, ordered by principal, upstream and name; never their
    /// secret bytes.
    fn credentials(
        &self,
        filter: CredentialFilter,
    ) -> BoxFuture<'_, Result<Vec<CredentialInfo>, StoreError>>;

    /// Stores `write` at `key`: a new record at version 1, or a replacement of the one there
    /// (its `created_at` and `last_used_at` kept, its version one more). Answers the new version.
    fn put_credential(
        &self,
        key: CredentialKey,
        write: CredentialWrite,
    ) -> BoxFuture<'_, Result<u64, StoreError>>;

    /// Replaces the record at `key` with `write` only if its version is still `expected`
    /// (compare-and-swap): `true` when this write won (the version is now `expected + 1`),
    /// `false` when the record changed or is gone meanwhile (re-read it).
    fn replace_credential_if_version(
        &self,
        key: CredentialKey,
        expected: u64,
        write: CredentialWrite,
    ) -> BoxFuture<'_, Result<bool, StoreError>>;

    /// Records that the credential at `key` was used at `at` (its version is not changed, so a
    /// use never makes a refresh lose its race). `false` when there is none.
    fn touch_credential(
        &self,
        key: CredentialKey,
        at: SystemTime,
    ) -> BoxFuture<'_, Result<bool, StoreError>>;

    /// Deletes the record at `key` (revokes it here); `false` when there was none.
    fn delete_credential(&self, key: CredentialKey) -> BoxFuture<'_, Result<bool, StoreError>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_writes_are_bounded() {
        let key = CredentialKey::new("alice", "github", "token");
        let write = CredentialWrite {
            kind: CredentialKind::Secret,
            sealed: SealedSecret(vec![1; 10]),
            meta: CredentialMeta::default(),
            at: SystemTime::UNIX_EPOCH,
        };
        assert_eq!(write.check(&key), Ok(()));
        let long = "x".repeat(MAX_KEY_PART + 1);
        assert!(CredentialKey::new(&long, "g", "t").check().is_err());
        assert!(CredentialKey::new("a", "", "t").check().is_err());
        assert!(CredentialKey::new("a", "g", "t\n").check().is_err());
        let mut big = write.clone();
        big.sealed = SealedSecret(vec![0; MAX_SEALED + 1]);
        assert!(big.check(&key).is_err());
        let mut empty = write.clone();
        empty.sealed = SealedSecret(Vec::new());
        assert!(empty.check(&key).is_err());
        assert_eq!(
            format!("{:?}", write.sealed),
            "SealedSecret([10 bytes])",
            "Debug never shows the bytes"
        );
        assert_eq!(CredentialKind::parse("oauth"), Some(CredentialKind::OAuth));
        assert_eq!(
            CredentialKind::parse("secret"),
            Some(CredentialKind::Secret)
        );
        assert_eq!(CredentialKind::parse("x"), None);
    }
}
