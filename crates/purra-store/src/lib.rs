//! Opens a purra store by where it is: a SQLite file path or a `postgres://` URL.
//!
//! [`StoreLocation::parse`] reads what a user writes (`--db`, a configuration's `db`);
//! [`AnyStore::open`] opens it; [`AnyStore`] hands out the store as each contract an agent, a CLI or a
//! gateway needs (`Arc<dyn ApprovalGateway>`, `Arc<dyn RunStore>`, `&dyn OperatorStore`,
//! `Arc<dyn WebhookOutbox>`, `Arc<dyn CredentialStore>`), whichever store it is.
//!
//! ```no_run
//! # async fn demo() -> Result<(), purra_core::StoreError> {
//! use purra_store::{AnyStore, StoreLocation};
//! let store = AnyStore::open(&StoreLocation::parse("purra.db")?, None).await?;
//! let shared = AnyStore::open(&StoreLocation::parse("postgres://purra@db.internal/purra")?, None).await?;
//! # Ok(()) }
//! ```

use purra_core::{
    ApprovalGateway, CredentialStore, GrantStore, OperatorStore, RunStore, StoreError,
    WebhookOutbox,
};
use purra_postgres::{PostgresOptions, PostgresStore};
use purra_sqlite::{SqliteOptions, SqliteStore};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Where a store is.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreLocation {
    /// A SQLite file.
    File(PathBuf),
    /// A PostgreSQL database: a `postgres://` or `postgresql://` URL (`?schema=NAME` picks the schema,
    /// `purra` by default).
    Postgres(String),
}

impl StoreLocation {
    /// Reads a location: a `postgres://` (or `postgresql://`) URL, else a file path.
    pub fn parse(text: &str) -> Result<StoreLocation, StoreError> {
        if text.is_empty() {
            return Err(StoreError::Backend(
                "a store is a file path or a postgres:// URL".into(),
            ));
        }
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            return Ok(StoreLocation::Postgres(text.to_owned()));
        }
        Ok(StoreLocation::File(PathBuf::from(text)))
    }

    /// The location for messages (a URL without its password).
    pub fn shown(&self) -> String {
        match self {
            StoreLocation::File(path) => path.display().to_string(),
            StoreLocation::Postgres(url) => purra_postgres::redact_url(url),
        }
    }

    /// `SQLite` or `PostgreSQL`.
    pub fn kind(&self) -> &'static str {
        match self {
            StoreLocation::File(_) => "SQLite",
            StoreLocation::Postgres(_) => "PostgreSQL",
        }
    }
}

impl std::fmt::Display for StoreLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown())
    }
}

/// An open store of either kind; cloning shares it.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum AnyStore {
    /// A SQLite file.
    Sqlite(Arc<SqliteStore>),
    /// A PostgreSQL schema.
    Postgres(Arc<PostgresStore>),
}

impl AnyStore {
    /// Opens (creating if needed) the store at `location`, with `lease` for this owner's claims (the
    /// store's default, 60 s, when `None`).
    pub async fn open(
        location: &StoreLocation,
        lease: Option<Duration>,
    ) -> Result<AnyStore, StoreError> {
        AnyStore::open_with(location, lease, None).await
    }

    /// Opens the store at `location` like [`AnyStore::open`], with at most `pool_size`
    /// connections to PostgreSQL (its default, 16, when `None`; a SQLite file ignores it).
    pub async fn open_with(
        location: &StoreLocation,
        lease: Option<Duration>,
        pool_size: Option<usize>,
    ) -> Result<AnyStore, StoreError> {
        match location {
            StoreLocation::File(path) => {
                let mut options = SqliteOptions::default();
                if let Some(lease) = lease {
                    options = options.lease(lease);
                }
                Ok(AnyStore::Sqlite(Arc::new(SqliteStore::open_with(
                    path, options,
                )?)))
            }
            StoreLocation::Postgres(url) => {
                let mut options = PostgresOptions::default();
                if let Some(lease) = lease {
                    options = options.lease(lease);
                }
                if let Some(size) = pool_size {
                    options = options.pool_size(size);
                }
                Ok(AnyStore::Postgres(Arc::new(
                    PostgresStore::connect_with(url, options).await?,
                )))
            }
        }
    }

    /// The operator's view (and every contract, through its supertraits).
    pub fn ops(&self) -> &dyn OperatorStore {
        match self {
            AnyStore::Sqlite(s) => s.as_ref(),
            AnyStore::Postgres(s) => s.as_ref(),
        }
    }

    /// The operator's view, shared (an approver page holds it).
    pub fn operator(&self) -> Arc<dyn OperatorStore> {
        match self {
            AnyStore::Sqlite(s) => s.clone(),
            AnyStore::Postgres(s) => s.clone(),
        }
    }

    /// The store as an agent's approval gateway.
    pub fn gateway(&self) -> Arc<dyn ApprovalGateway> {
        match self {
            AnyStore::Sqlite(s) => s.clone(),
            AnyStore::Postgres(s) => s.clone(),
        }
    }

    /// The store as an agent's run store.
    pub fn runs(&self) -> Arc<dyn RunStore> {
        match self {
            AnyStore::Sqlite(s) => s.clone(),
            AnyStore::Postgres(s) => s.clone(),
        }
    }

    /// The store's webhook outbox (registered endpoints, deliveries to claim and record).
    pub fn outbox(&self) -> Arc<dyn WebhookOutbox> {
        match self {
            AnyStore::Sqlite(s) => s.clone(),
            AnyStore::Postgres(s) => s.clone(),
        }
    }

    /// The store's credential store (each principal's upstream credentials, sealed).
    pub fn credentials(&self) -> Arc<dyn CredentialStore> {
        match self {
            AnyStore::Sqlite(s) => s.clone(),
            AnyStore::Postgres(s) => s.clone(),
        }
    }

    /// The store's pinned tool definitions and catalog changes.
    pub fn pins(&self) -> Arc<dyn purra_core::CatalogPins> {
        match self {
            AnyStore::Sqlite(s) => s.clone(),
            AnyStore::Postgres(s) => s.clone(),
        }
    }

    /// The store's standing grants.
    pub fn grants(&self) -> Arc<dyn GrantStore> {
        match self {
            AnyStore::Sqlite(s) => s.clone(),
            AnyStore::Postgres(s) => s.clone(),
        }
    }

    /// The store's approve-with-edit record.
    pub fn edits(&self) -> Arc<dyn purra_core::EditStore> {
        match self {
            AnyStore::Sqlite(s) => s.clone(),
            AnyStore::Postgres(s) => s.clone(),
        }
    }

    /// The store's table of MCP tasks.
    pub fn tasks(&self) -> Arc<dyn purra_core::TaskTable> {
        match self {
            AnyStore::Sqlite(s) => s.clone(),
            AnyStore::Postgres(s) => s.clone(),
        }
    }

    /// This store's owner id.
    pub fn owner(&self) -> &str {
        self.ops().owner()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_are_files_or_postgres_urls() {
        assert_eq!(
            StoreLocation::parse("purra.db"),
            Ok(StoreLocation::File("purra.db".into()))
        );
        let url = "postgresql://ada:secret@db:5432/purra?schema=team";
        let pg = StoreLocation::parse(url).unwrap();
        assert_eq!(pg, StoreLocation::Postgres(url.into()));
        assert_eq!(pg.shown(), "postgresql://ada:***@db:5432/purra?schema=team");
        assert_eq!(
            (pg.kind(), StoreLocation::File("x".into()).kind()),
            ("PostgreSQL", "SQLite")
        );
        assert!(StoreLocation::parse("").is_err());
    }
}
