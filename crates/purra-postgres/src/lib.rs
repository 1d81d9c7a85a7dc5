//! purra on PostgreSQL: the durable approval gateway, idempotency claims and receipts, suspended runs
//! and an append-only audit log in one PostgreSQL schema, shared by a fleet of hosts.
//!
//! [`PostgresStore`] implements purra-core's contracts with exactly the semantics of purra-sqlite (one
//! contract test suite, purra-store-tests, runs against both):
//!
//! - [`purra_core::ApprovalGateway`]: `prepare`, `decide` (with the approver's note), and
//!   `check_and_claim`, which locks the approval's row, checks decision, expiry and the current
//!   intent digest, inserts the claim and commits before it returns `Claimed`;
//! - [`purra_core::IdempotencyStore`]: a key is claimed once, ever (its primary key), then completed as
//!   `committed`, `not_started` or `unknown`; `unknown` keeps its claim;
//! - [`purra_core::RunStore`]: suspended runs as JSON;
//! - [`purra_core::OperatorStore`]: approvals by state with their request, decision and claim, the
//!   audit log, runs, and the two reconciliations (owners with leases and heartbeats, as in
//!   purra-sqlite, measured on the database's clock);
//! - events: a trigger notifies every committed audit row; the store `LISTEN`s, so
//!   [`purra_core::ApprovalGateway::wait_for_decision`] wakes at once on a decision made by any host.
//!
//! - [`purra_core::WebhookOutbox`]: once endpoints are registered, each prepare, decision, outcome
//!   and reconciliation records its event for them in its own transaction; deliverers on every
//!   host claim deliveries with `FOR UPDATE SKIP LOCKED` under a lease on the database's clock.
//! - [`purra_core::CredentialStore`]: each principal's upstream credentials, only ever sealed,
//!   with a version per record so instances refreshing one connection at once write it once.
//!
//! The audit table is append-only in the database itself: triggers abort any `UPDATE`, `DELETE` or
//! `TRUNCATE`, whoever issues it. Migrations are versioned; a schema from a newer build is refused.
//!
//! ```no_run
//! # async fn demo() -> Result<(), purra_core::StoreError> {
//! use purra_core::OperatorStore;
//! let store = purra_postgres::PostgresStore::connect("postgres://purra@127.0.0.1:5432/purra").await?;
//! // On startup: claims a dead host left without outcome become `unknown` (`interrupted`).
//! store.reconcile_interrupted_claims(std::time::SystemTime::now()).await?;
//! # Ok(()) }
//! ```

mod credential;
mod edit;
mod effects;
mod grant;
mod idempotent;
mod listen;
mod migrate;
mod pins;
#[cfg(feature = "sessions")]
mod sessions;
mod store;
mod tasks;
mod webhook;
mod workflow;

pub use purra_core::{AuditEntry, Reconciliation, INTERRUPTED};
pub use store::{redact_url, PostgresOptions, PostgresStore};
