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
//! It also implements [`purra_core::OperatorStore`] (listings, the audit log, reconciliations) and
//! streams [`purra_core::StoreEvent`]s: this store's own commits at once, other processes' commits on
//! the same file within [`SqliteOptions::event_poll`] (a file cannot notify).
//!
//! Two things only the host or an operator does, never anything automatic:
//! [`purra_core::OperatorStore::reconcile_interrupted_claims`] (on startup: claims left without outcome by a store
//! that is gone become `unknown` with reason `interrupted`; a live process's claims are told apart by
//! their owner's lease, see [`SqliteStore`]), and [`purra_core::OperatorStore::reconcile_unknown`] (an operator's decision,
//! with independent evidence, that an `unknown` outcome was in fact `committed` or `not_started`).
//! Every change is also a row of the append-only audit log ([`purra_core::OperatorStore::audit`]).
//!
//! It keeps purra-core's webhook outbox ([`purra_core::WebhookOutbox`]) too: once endpoints are
//! registered, each prepare, decision, outcome and reconciliation records its event for them in
//! its own transaction; with none registered nothing more is written.
//!
//! And purra-core's credential store ([`purra_core::CredentialStore`]): each principal's upstream
//! credentials, only ever sealed (the store never sees a plaintext), with a version per record
//! for compare-and-swap.
//!
//! ```
//! use purra_core::*;
//! use purra_sqlite::SqliteStore;
//! use std::time::SystemTime;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let dir = std::env::temp_dir().join(format!("purra-sqlite-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! # let _ = std::fs::remove_file(dir.join("host.db"));
//! let store = SqliteStore::open(dir.join("host.db"))?;
//! // On startup: claims a dead host left without outcome become `unknown` (`interrupted`).
//! store.reconcile_interrupted_claims(SystemTime::now()).await?;
//!
//! let digest = |v: serde_json::Value| json_identity(&v).unwrap();
//! let binding = ApprovalBinding {
//!     binding_id: "documents".into(),
//!     binding_revision: "1".into(),
//!     scope_id: "sandbox".into(),
//!     scope_revision: "1".into(),
//! };
//! let arguments = serde_json::json!({"id": "d1"});
//! let intent = ApprovalIntent {
//!     tool: "update_document".into(),
//!     arguments_digest: digest(arguments.clone()),
//!     approval_binding: binding.identity(),
//!     checkpoint_call: CheckpointCall { call_id: "w1".into(), tool: "update_document".into() },
//!     run_id: RunId::new("run-1"),
//!     preset_fingerprint: digest(serde_json::json!("preset")),
//! };
//! let id = store
//!     .prepare(ApprovalRequest {
//!         intent: intent.clone(),
//!         arguments,
//!         binding,
//!         requested_by: "writer".into(),
//!         requested_at: SystemTime::now(),
//!         expires_at: None,
//!         labels: Default::default(),
//!     })
//!     .await?;
//! let approve = Decision {
//!     verdict: Verdict::Approve,
//!     approver: "alice".into(),
//!     decided_at: SystemTime::now(),
//!     expires_at: None,
//!     note: Some("once".into()),
//! };
//! store.decide(id.clone(), approve).await?;
//! let ClaimVerdict::Claimed(key) =
//!     store.check_and_claim(id.clone(), intent.digest(), SystemTime::now()).await?
//! else {
//!     unreachable!()
//! };
//! // … dispatch the call exactly once, then record what is known about its effect:
//! store.complete(key, EffectOutcome::NotStarted).await?;
//! assert_eq!(
//!     store.check_and_claim(id, intent.digest(), SystemTime::now()).await?,
//!     ClaimVerdict::AlreadyClaimed
//! );
//! # drop(store);
//! # let _ = std::fs::remove_dir_all(&dir);
//! # Ok::<(), StoreError>(())
//! # }).unwrap();
//! ```

mod audit;
mod credential;
mod edit;
mod effects;
mod grant;
mod idempotent;
mod migrate;
mod pins;
#[cfg(feature = "sessions")]
mod sessions;
mod store;
mod tasks;
mod webhook;
mod workflow;

pub use purra_core::{AuditEntry, Reconciliation, INTERRUPTED};
pub use store::{SqliteOptions, SqliteStore};
