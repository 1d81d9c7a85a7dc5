//! Each principal's upstream credentials (purra-core's `CredentialStore`) in the store's schema:
//! one row per principal, upstream and name in `credentials`, holding the sealed secret as the
//! caller sealed it (this store never sees a plaintext), what may be shown of it, and a version
//! that every write moves on by one.
//!
//! A compare-and-swap is one `UPDATE … WHERE version = $4`: under PostgreSQL's row locks two
//! instances racing on one record apply it once, the other's update matching no row. A write
//! retried after its connection failed first looks whether its own earlier attempt was committed
//! (its sealed bytes, unique by their random nonce, are the record's), so a lost answer never
//! turns a won race into a lost one.

use crate::store::{exec, query, query_opt, Error, PostgresStore};
use purra_core::stored::{from_ns, to_ns};
use purra_core::{
    BoxFuture, CredentialFilter, CredentialInfo, CredentialKey, CredentialKind, CredentialMeta,
    CredentialRecord, CredentialStore, CredentialWrite, SealedSecret, StoreError,
};
use std::sync::Arc;
use std::time::SystemTime;
use tokio_postgres::Row;

const INFO_COLUMNS: &str = "principal, upstream, name, kind, issuer, scopes, subject, \
                            expires_at_ns, created_at_ns, updated_at_ns, last_used_at_ns, version";

fn info_of(r: &Row) -> Result<CredentialInfo, Error> {
    let kind: &str = r.get(3);
    let Some(kind) = CredentialKind::parse(kind) else {
        return Err(Error::Store(StoreError::Backend(format!(
            "stored credential kind `{kind}` is unknown"
        ))));
    };
    Ok(CredentialInfo {
        key: CredentialKey::new(
            r.get::<_, String>(0),
            r.get::<_, String>(1),
            r.get::<_, String>(2),
        ),
        kind,
        meta: CredentialMeta {
            issuer: r.get(4),
            scopes: r.get(5),
            subject: r.get(6),
            expires_at: r.get::<_, Option<i64>>(7).map(from_ns),
        },
        created_at: from_ns(r.get(8)),
        updated_at: from_ns(r.get(9)),
        last_used_at: r.get::<_, Option<i64>>(10).map(from_ns),
        version: u64::try_from(r.get::<_, i64>(11)).unwrap_or(0),
    })
}

/// A write's values, checked and converted once before its transaction (retries reuse them).
struct Prepared {
    key: CredentialKey,
    kind: &'static str,
    sealed: Vec<u8>,
    meta: CredentialMeta,
    expires: Option<i64>,
    at: i64,
}

impl Prepared {
    fn of(key: CredentialKey, write: CredentialWrite) -> Result<Arc<Prepared>, StoreError> {
        write.check(&key)?;
        Ok(Arc::new(Prepared {
            kind: write.kind.as_str(),
            expires: write.meta.expires_at.map(to_ns).transpose()?,
            at: to_ns(write.at)?,
            sealed: write.sealed.0,
            meta: write.meta,
            key,
        }))
    }
}

/// The record's version when its sealed bytes are `sealed` (a retried write's own, committed).
async fn own_version(tx: &crate::store::Tx<'_>, row: &Prepared) -> Result<Option<i64>, Error> {
    Ok(query_opt(
        tx,
        "SELECT version FROM credentials
         WHERE principal = $1 AND upstream = $2 AND name = $3 AND sealed = $4",
        &[
            &row.key.principal,
            &row.key.upstream,
            &row.key.name,
            &row.sealed,
        ],
    )
    .await?
    .map(|r| r.get(0)))
}

impl CredentialStore for PostgresStore {
    fn credential(
        &self,
        key: CredentialKey,
    ) -> BoxFuture<'_, Result<Option<CredentialRecord>, StoreError>> {
        self.read(move |c| {
            let key = key.clone();
            async move {
                let row = query_opt(
                    &c,
                    &format!(
                        "SELECT {INFO_COLUMNS}, sealed FROM credentials
                         WHERE principal = $1 AND upstream = $2 AND name = $3"
                    ),
                    &[&key.principal, &key.upstream, &key.name],
                )
                .await?;
                row.map(|r| {
                    Ok(CredentialRecord {
                        info: info_of(&r)?,
                        sealed: SealedSecret(r.get(12)),
                    })
                })
                .transpose()
            }
        })
    }

    fn credentials(
        &self,
        filter: CredentialFilter,
    ) -> BoxFuture<'_, Result<Vec<CredentialInfo>, StoreError>> {
        self.read(move |c| {
            let filter = filter.clone();
            async move {
                let rows = query(
                    &c,
                    &format!(
                        "SELECT {INFO_COLUMNS} FROM credentials
                         WHERE ($1::TEXT IS NULL OR principal = $1)
                           AND ($2::TEXT IS NULL OR upstream = $2)
                         ORDER BY principal, upstream, name"
                    ),
                    &[&filter.principal, &filter.upstream],
                )
                .await?;
                rows.iter().map(info_of).collect()
            }
        })
    }

    fn put_credential(
        &self,
        key: CredentialKey,
        write: CredentialWrite,
    ) -> BoxFuture<'_, Result<u64, StoreError>> {
        let row = Prepared::of(key, write);
        Box::pin(async move {
            let row = row?;
            self.transact(move |tx, _, retry| {
                let row = Arc::clone(&row);
                Box::pin(async move {
                    if retry {
                        if let Some(v) = own_version(tx, &row).await? {
                            return Ok(u64::try_from(v).unwrap_or(0));
                        }
                    }
                    let r = query_opt(
                        tx,
                        "INSERT INTO credentials (principal, upstream, name, kind, sealed, issuer,
                                                  scopes, subject, expires_at_ns, created_at_ns,
                                                  updated_at_ns, version)
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10, 1)
                         ON CONFLICT (principal, upstream, name) DO UPDATE SET
                             kind = excluded.kind, sealed = excluded.sealed,
                             issuer = excluded.issuer, scopes = excluded.scopes,
                             subject = excluded.subject, expires_at_ns = excluded.expires_at_ns,
                             updated_at_ns = excluded.updated_at_ns,
                             version = credentials.version + 1
                         RETURNING version",
                        &[
                            &row.key.principal,
                            &row.key.upstream,
                            &row.key.name,
                            &row.kind,
                            &row.sealed,
                            &row.meta.issuer,
                            &row.meta.scopes,
                            &row.meta.subject,
                            &row.expires,
                            &row.at,
                        ],
                    )
                    .await?;
                    let version: i64 = r.map(|r| r.get(0)).unwrap_or(0);
                    Ok(u64::try_from(version).unwrap_or(0))
                })
            })
            .await
        })
    }

    fn replace_credential_if_version(
        &self,
        key: CredentialKey,
        expected: u64,
        write: CredentialWrite,
    ) -> BoxFuture<'_, Result<bool, StoreError>> {
        let row = Prepared::of(key, write);
        Box::pin(async move {
            let row = row?;
            let Ok(expected) = i64::try_from(expected) else {
                return Ok(false);
            };
            self.transact(move |tx, _, retry| {
                let row = Arc::clone(&row);
                Box::pin(async move {
                    if retry && own_version(tx, &row).await? == Some(expected + 1) {
                        return Ok(true);
                    }
                    let n = exec(
                        tx,
                        "UPDATE credentials SET kind = $5, sealed = $6, issuer = $7, scopes = $8,
                             subject = $9, expires_at_ns = $10, updated_at_ns = $11,
                             version = version + 1
                         WHERE principal = $1 AND upstream = $2 AND name = $3 AND version = $4",
                        &[
                            &row.key.principal,
                            &row.key.upstream,
                            &row.key.name,
                            &expected,
                            &row.kind,
                            &row.sealed,
                            &row.meta.issuer,
                            &row.meta.scopes,
                            &row.meta.subject,
                            &row.expires,
                            &row.at,
                        ],
                    )
                    .await?;
                    Ok(n == 1)
                })
            })
            .await
        })
    }

    fn touch_credential(
        &self,
        key: CredentialKey,
        at: SystemTime,
    ) -> BoxFuture<'_, Result<bool, StoreError>> {
        let at = to_ns(at);
        Box::pin(async move {
            let at = at?;
            self.transact(move |tx, _, _| {
                let key = key.clone();
                Box::pin(async move {
                    let n = exec(
                        tx,
                        "UPDATE credentials
                         SET last_used_at_ns = greatest(coalesce(last_used_at_ns, $4), $4)
                         WHERE principal = $1 AND upstream = $2 AND name = $3",
                        &[&key.principal, &key.upstream, &key.name, &at],
                    )
                    .await?;
                    Ok(n == 1)
                })
            })
            .await
        })
    }

    fn delete_credential(&self, key: CredentialKey) -> BoxFuture<'_, Result<bool, StoreError>> {
        self.transact(move |tx, _, _| {
            let key = key.clone();
            Box::pin(async move {
                let n = exec(
                    tx,
                    "DELETE FROM credentials WHERE principal = $1 AND upstream = $2 AND name = $3",
                    &[&key.principal, &key.upstream, &key.name],
                )
                .await?;
                Ok(n == 1)
            })
        })
    }
}
