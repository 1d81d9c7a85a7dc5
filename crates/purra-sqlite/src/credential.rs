//! Each principal's upstream credentials (purra-core's `CredentialStore`) in the store's file:
//! one row per principal, upstream and name in `credentials`, holding the sealed secret as the
//! caller sealed it (this store never sees a plaintext), what may be shown of it, and a version
//! that every write moves on by one, so a compare-and-swap names the state it replaces.
//!
//! Writes go through the group commit like every other write; a compare-and-swap is one
//! `UPDATE … WHERE version = ?` inside it, so of two racing it is applied once.

use crate::store::{backend, SqliteStore};
use purra_core::stored::{from_ns, to_ns};
use purra_core::{
    BoxFuture, CredentialFilter, CredentialInfo, CredentialKey, CredentialKind, CredentialMeta,
    CredentialRecord, CredentialStore, CredentialWrite, SealedSecret, StoreError,
};
use rusqlite::{params, OptionalExtension, Row};
use std::time::SystemTime;

const INFO_COLUMNS: &str = "principal, upstream, name, kind, issuer, scopes, subject, \
                            expires_at_ns, created_at_ns, updated_at_ns, last_used_at_ns, version";

fn info_of(r: &Row<'_>) -> rusqlite::Result<(CredentialInfo, String)> {
    let kind: String = r.get(3)?;
    Ok((
        CredentialInfo {
            key: CredentialKey::new(
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
            ),
            // Checked after the read: a word this build does not know is a backend failure.
            kind: CredentialKind::parse(&kind).unwrap_or(CredentialKind::Secret),
            meta: CredentialMeta {
                issuer: r.get(4)?,
                scopes: r.get(5)?,
                subject: r.get(6)?,
                expires_at: r.get::<_, Option<i64>>(7)?.map(from_ns),
            },
            created_at: from_ns(r.get(8)?),
            updated_at: from_ns(r.get(9)?),
            last_used_at: r.get::<_, Option<i64>>(10)?.map(from_ns),
            version: u64::try_from(r.get::<_, i64>(11)?).unwrap_or(0),
        },
        kind,
    ))
}

fn checked((info, kind): (CredentialInfo, String)) -> Result<CredentialInfo, StoreError> {
    if CredentialKind::parse(&kind).is_none() {
        return Err(StoreError::Backend(format!(
            "stored credential kind `{kind}` is unknown"
        )));
    }
    Ok(info)
}

fn expires_ns(meta: &CredentialMeta) -> Result<Option<i64>, StoreError> {
    meta.expires_at.map(to_ns).transpose()
}

impl CredentialStore for SqliteStore {
    fn credential(
        &self,
        key: CredentialKey,
    ) -> BoxFuture<'_, Result<Option<CredentialRecord>, StoreError>> {
        self.run(move |conn, _| {
            let row = conn
                .prepare_cached(&format!(
                    "SELECT {INFO_COLUMNS}, sealed FROM credentials
                     WHERE principal = ?1 AND upstream = ?2 AND name = ?3"
                ))
                .and_then(|mut s| {
                    s.query_row(params![key.principal, key.upstream, key.name], |r| {
                        Ok((info_of(r)?, r.get::<_, Vec<u8>>(12)?))
                    })
                    .optional()
                })
                .map_err(backend)?;
            row.map(|(info, sealed)| {
                Ok(CredentialRecord {
                    info: checked(info)?,
                    sealed: SealedSecret(sealed),
                })
            })
            .transpose()
        })
    }

    fn credentials(
        &self,
        filter: CredentialFilter,
    ) -> BoxFuture<'_, Result<Vec<CredentialInfo>, StoreError>> {
        self.run(move |conn, _| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {INFO_COLUMNS} FROM credentials
                     WHERE (?1 IS NULL OR principal = ?1) AND (?2 IS NULL OR upstream = ?2)
                     ORDER BY principal, upstream, name"
                ))
                .map_err(backend)?;
            let rows = stmt
                .query_map(params![filter.principal, filter.upstream], info_of)
                .map_err(backend)?;
            rows.map(|r| checked(r.map_err(backend)?)).collect()
        })
    }

    fn put_credential(
        &self,
        key: CredentialKey,
        write: CredentialWrite,
    ) -> BoxFuture<'_, Result<u64, StoreError>> {
        self.write(move |tx, _| {
            write.check(&key)?;
            let at = to_ns(write.at)?;
            let expires = expires_ns(&write.meta)?;
            let version: i64 = tx
                .prepare_cached(
                    "INSERT INTO credentials (principal, upstream, name, kind, sealed, issuer,
                                              scopes, subject, expires_at_ns, created_at_ns,
                                              updated_at_ns, version)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10, 1)
                     ON CONFLICT (principal, upstream, name) DO UPDATE SET
                         kind = excluded.kind, sealed = excluded.sealed, issuer = excluded.issuer,
                         scopes = excluded.scopes, subject = excluded.subject,
                         expires_at_ns = excluded.expires_at_ns,
                         updated_at_ns = excluded.updated_at_ns, version = version + 1
                     RETURNING version",
                )
                .and_then(|mut s| {
                    s.query_row(
                        params![
                            key.principal,
                            key.upstream,
                            key.name,
                            write.kind.as_str(),
                            write.sealed.0,
                            write.meta.issuer,
                            write.meta.scopes,
                            write.meta.subject,
                            expires,
                            at
                        ],
                        |r| r.get(0),
                    )
                })
                .map_err(backend)?;
            Ok(u64::try_from(version).unwrap_or(0))
        })
    }

    fn replace_credential_if_version(
        &self,
        key: CredentialKey,
        expected: u64,
        write: CredentialWrite,
    ) -> BoxFuture<'_, Result<bool, StoreError>> {
        self.write(move |tx, _| {
            write.check(&key)?;
            let Ok(expected) = i64::try_from(expected) else {
                return Ok(false);
            };
            let (expires, at) = (expires_ns(&write.meta)?, to_ns(write.at)?);
            let n = tx
                .prepare_cached(
                    "UPDATE credentials SET kind = ?5, sealed = ?6, issuer = ?7, scopes = ?8,
                         subject = ?9, expires_at_ns = ?10, updated_at_ns = ?11,
                         version = version + 1
                     WHERE principal = ?1 AND upstream = ?2 AND name = ?3 AND version = ?4",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        key.principal,
                        key.upstream,
                        key.name,
                        expected,
                        write.kind.as_str(),
                        write.sealed.0,
                        write.meta.issuer,
                        write.meta.scopes,
                        write.meta.subject,
                        expires,
                        at
                    ])
                })
                .map_err(backend)?;
            Ok(n == 1)
        })
    }

    fn touch_credential(
        &self,
        key: CredentialKey,
        at: SystemTime,
    ) -> BoxFuture<'_, Result<bool, StoreError>> {
        self.write(move |tx, _| {
            let at = to_ns(at)?;
            let n = tx
                .prepare_cached(
                    "UPDATE credentials SET last_used_at_ns = max(coalesce(last_used_at_ns, ?4), ?4)
                     WHERE principal = ?1 AND upstream = ?2 AND name = ?3",
                )
                .and_then(|mut s| {
                    s.execute(params![key.principal, key.upstream, key.name, at])
                })
                .map_err(backend)?;
            Ok(n == 1)
        })
    }

    fn delete_credential(&self, key: CredentialKey) -> BoxFuture<'_, Result<bool, StoreError>> {
        self.write(move |tx, _| {
            let n = tx
                .prepare_cached(
                    "DELETE FROM credentials WHERE principal = ?1 AND upstream = ?2 AND name = ?3",
                )
                .and_then(|mut s| s.execute(params![key.principal, key.upstream, key.name]))
                .map_err(backend)?;
            Ok(n == 1)
        })
    }
}
