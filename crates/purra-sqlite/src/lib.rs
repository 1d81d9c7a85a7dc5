//! purra on SQLite: a durable approval gateway, idempotency claims and receipts, suspended runs, and an
//! append-only audit log, all in one file.
//!
//! [`SqliteStore`] implements purra-core's three store contracts with exactly the semantics of the
//! in-memory versions, durably:
//!
//! - [`purra_core::ApprovalGateway`]: `prepare` stores a pending approval; `decide` records the verdict,
//!   approver, time and optional expiry; `check_and_claim` checks decision, expiry and the current intent
//!   digest and records the claim in the same `BEGIN IMMEDIATE` transaction. A claimed or refused
//!   approval never claims again. `receipts()` is the store itself.
//! - [`purra_core::IdempotencyStore`]: a key is claimed once, ever, then completed as `committed`
//!   (receipt), `not_started` or `unknown` (reason); `unknown` keeps its claim.
//! - [`purra_core::RunStore`]: suspended runs as JSON, so a restarted host resumes from the file.
//!
//! The file uses WAL, `synchronous=FULL`, a busy timeout and foreign keys; its schema is versioned with
//! `PRAGMA user_version`, and a file from a newer build is refused.
//!
//! Two things only the host or an operator does, never anything automatic:
//! [`SqliteStore::reconcile_interrupted_claims`] (on startup: claims left without outcome by a store
//! that is gone become `unknown` with reason `interrupted`; a live process's claims are told apart by
//! their owner's lease, see [`SqliteStore`]), and [`SqliteStore::reconcile_unknown`] (an operator's decision,
//! with independent evidence, that an `unknown` outcome was in fact `committed` or `not_started`).
//! Every change is also a row of the append-only audit log ([`SqliteStore::audit`]).

mod audit;
mod migrate;
mod store;

pub use audit::AuditEntry;
pub use store::{Reconciliation, SqliteOptions, SqliteStore, INTERRUPTED};
