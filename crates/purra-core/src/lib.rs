//! purra Core: the MCP-independent half of a host that runs AI agents against tools.
//!
//! Core decides what an agent may do; adapters (such as the MCP adapter) only supply registrations and
//! handlers. It depends on no MCP crate and no SQL crate. The pieces, in dependency order:
//!
//! - [`identity`]: `purra.json-identity/v1`, the RFC 8785 (JCS) canonical form and its SHA-256;
//!   [`json_text`]: a bounded I-JSON decoder for untrusted text.
//! - [`schema`]: the strict `purra.output-schema/v1` profile, compiled once into a budgeted validator
//!   ([`pattern`] documents the regular-expression dialect).
//! - [`tool`] and [`catalog`]: registrations with explicit policy, scope check, concurrency declaration
//!   and approval binding; an immutable catalog with a revision.
//! - [`run`]: run ids, leases (deadline and cancellation) and the run preset fingerprint.
//! - [`admission`] and [`schedule`]: a model turn is admitted as a whole before any call runs; safe calls
//!   overlap, the others run alone, results are bounded.
//! - [`approval`], [`idempotency`], [`run_store`]: the contracts durable stores implement, with
//!   in-memory versions for tests; [`operator`]: what an operator (CLI, approver page) sees of a durable
//!   store; [`events`]: the store events hosts wait on instead of polling; [`webhook`]: the outbox
//!   a store records approval and effect events in, in the transaction that makes them, for
//!   webhook deliverers; [`credential`]: each principal's upstream credentials, kept sealed
//!   ([`vault`]: the keyring, sealing and rotation); [`grant`]: standing grants, one use taken
//!   with the approval it approves, in one transaction.
//! - [`model`] and [`agent`]: the `Model` trait, a scripted model, and the agent loop with checkpoints.
//! - [`approver`]: the path a decision came by, recorded in its approver (`ada (page)`);
//!   [`visible`]: the characters shown as escapes wherever a person reads what a write sends.
//!
//! Every failure the model sees is an [`ErrorCode`] from [`error_code`]'s table, never remote text.
//! Async traits return boxed futures ([`BoxFuture`]) so they stay object-safe without `async-trait`.
//!
//! The crate README follows (its example is compiled and run as a doctest).
#![doc = include_str!("../README.md")]

pub mod admission;
pub mod agent;
pub mod approval;
pub mod approver;
pub mod catalog;
pub mod credential;
pub mod edit;
pub mod effect;
pub mod error_code;
pub mod events;
pub mod grant;
pub mod held_tasks;
pub mod idempotency;
pub mod idempotent_results;
pub mod identity;
pub use purra_schema::{json_text, pattern, schema};
pub mod model;
pub mod operator;
pub mod pins;
pub mod run;
pub mod run_store;
pub mod schedule;
pub mod store;
pub mod stored;
pub mod tool;
pub mod vault;
pub mod visible;
pub mod webhook;
pub mod workflow;

pub use admission::{admit_batch, Admission, AdmissionLimits, AdmittedCall, Rejection};
pub use agent::{Agent, AgentBuildError, AgentBuilder, AgentLimits, RunOutcome, RunRequest};
pub use approval::{
    principal_name, ApprovalGateway, ApprovalId, ApprovalIntent, ApprovalRecord, ApprovalRequest,
    ApprovalState, CheckpointCall, ClaimVerdict, Decision, InMemoryApprovalGateway, IntentError,
    SelfDecision, Verdict, APPROVERS_MUST_DIFFER_LABEL, APPROVER_MAX_AGE_LABEL,
};
pub use approver::DecisionPath;
pub use catalog::{Catalog, CatalogError};
pub use credential::{
    CredentialFilter, CredentialInfo, CredentialKey, CredentialKind, CredentialMeta,
    CredentialRecord, CredentialStore, CredentialWrite, SealedSecret,
};
pub use edit::{
    allows_edit, check_edit, edited_from, EditStore, ALLOW_EDIT_LABEL, EDITED_BY_LABEL,
    EDITED_FROM_LABEL, INPUT_SCHEMA_LABEL, MAX_EDIT_BYTES, ORIGINAL_ARGUMENTS_LABEL,
};
pub use effect::{
    check_reconciler, EffectPage, EffectQuery, EffectReconciled, EffectView, ResendClaim,
    ResendView, MAX_EVIDENCE_BYTES,
};
pub use error_code::ErrorCode;
pub use events::{EventSender, StoreEvent, StoreEvents};
pub use grant::{GrantId, GrantStore, GrantUse, GrantView, NewGrant};
pub use held_tasks::{StoredTask, TaskInsert, TaskTable};
pub use idempotency::{
    ClaimResult, ClaimState, EffectOutcome, IdempotencyKey, IdempotencyStore,
    InMemoryIdempotencyStore,
};
pub use identity::{
    canonicalize, json_identity, json_identity_of_text, IdentityError, JsonIdentity,
};
pub use json_text::{parse_json, JsonError, JsonErrorKind, JsonLimits};
pub use model::{
    Message, Model, ModelError, ModelRequest, ModelResponse, ScriptedModel, ToolMessage,
};
pub use operator::{
    check_reconciliation, counted_text, request_principal, ApprovalPage, ApprovalQuery,
    ApprovalStatus, ApprovalView, AuditEntry, ClaimView, OnApprove, OperatorStore, Reconciliation,
    COUNTED_UP_TO, EFFECT_LABEL, INTERRUPTED, MAX_PAGE, PRINCIPAL_LABEL,
    SENDS_WITHOUT_CALLER_LABEL, TITLE_LABEL,
};
pub use pins::{
    CatalogChange, CatalogChangeKind, CatalogChangeState, CatalogDecision, CatalogPins, SeenChange,
    ToolPin,
};
pub use run::{preset_fingerprint, Lease, RunContext, RunId};
pub use run_store::{InMemoryRunStore, RunStore, SuspendedRun};
pub use schedule::{dispatch_batch, execute, CallResult, Execution, ScheduleLimits};
pub use schema::{
    CompileOptions, CompiledSchema, SchemaError, SchemaErrorKind, SchemaLimits, ValidationError,
    ValidationErrorKind, ValidationLimits,
};
pub use store::{BoxFuture, CommitCounts, StoreError};
pub use tool::{
    ApprovalBinding, Concurrency, Effect, Handler, Policy, Risk, ScopeCheck, ScopeDecision,
    ToolCall, ToolError, ToolFuture, ToolRegistration, ToolRegistrationError, ToolSpec,
};
pub use webhook::{
    ApprovalRef, WebhookDelivery, WebhookDeliveryView, WebhookEndpoint, WebhookEvent,
    WebhookEventType, WebhookFailure, WebhookLease, WebhookOutbox, WebhookQuery, WebhookState,
};
pub use workflow::{
    voter_name, NotAVoter, Vote, ESCALATE_AFTER_LABEL, ESCALATE_TO_LABEL, EXPIRY_APPROVER,
    EXPIRY_NOTE, ON_EXPIRY_LABEL, VOTES_FROM_LABEL, VOTES_REQUIRED_LABEL,
};
