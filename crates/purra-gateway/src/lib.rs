//! purra-gateway: an MCP server that puts upstream MCP servers under host authority.
//!
//! A configuration ([`GatewayConfig`], read from TOML by [`load`]) names upstream servers (stdio
//! commands, Streamable HTTP or WebSocket URLs) and, per upstream tool a downstream client may
//! use, a read binding or a write binding exactly as purra-mcp's discovery takes them: local
//! name, title, scope rules (data: principals, client names, argument rules), concurrency, and
//! whether a task-only tool may run as a task (reads only); for
//! writes the effect and the host's binding and scope ids and revisions. [`Gateway::start`]
//! connects and discovers everything, then serves one MCP server whose tools are only the bound
//! ones, under their local names, with strict-profile schemas.
//!
//! - Reads go through Core's `execute` and the adapter's bounded call: its limits, its codes,
//!   never remote error text.
//! - Writes wait for a durable approval bound to the intent, decided by an operator on the store
//!   (`purra approvals approve`, an approver page, [`Gateway::decide`]), or by the downstream
//!   client's user (elicitation, the approval view) only when the binding says
//!   `approval = "client"`; an approved write is claimed before it is
//!   sent, sent once, and its outcome recorded; the same call made again returns the decided
//!   outcome or the stored receipt without sending again, saying it is a replay (past the
//!   binding's `receipt_ttl` the same call asks anew) (see [`write`](crate#writes)). A write
//!   tool's description ends with [`WRITE_WAITS`]: the model is told its call waits for a person.
//! - Each caller is listed only the tools its caller rules (principals, client names) let it
//!   call.
//! - With `[policies]`, every call of a bound tool is a Cedar request (the caller with its
//!   token's claims, the tool, its typed arguments), evaluated before anything is prepared or
//!   sent; the policies are validated against a schema generated from the bound tools, each
//!   mistake at its policy file and line ([`policy`]).
//! - Each caller (principal) may make `max_calls_per_minute_per_caller` calls a minute
//!   ([`limit`]; its other requests, sessions opened included, count apart at that rate) and
//!   have `max_pending_per_caller` writes waiting for a decision; one more is refused at once,
//!   nothing prepared. Over HTTP it holds at most `max_sessions_per_caller` sessions: a new one
//!   closes its own least recently used idle session, never another caller's.
//! - Metric labels and span names carry only values the gateway controls ([`metrics`]).
//! - An upstream `tools/list_changed` makes its registrations stale at once; the gateway
//!   rediscovers, replaces the downstream tool list (downstream `list_changed`), and an approval
//!   prepared for the old binding can no longer be claimed.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! let loaded = purra_gateway::load(std::path::Path::new("gateway.toml"))?;
//! // `db`: a SQLite file or a `postgres://` URL (a fleet of gateways sharing one database).
//! let db = loaded.config.gateway.db.display().to_string();
//! let store = Arc::new(purra_store::AnyStore::open(&purra_store::StoreLocation::parse(&db)?, None).await?);
//! let gateway = purra_gateway::Gateway::start(loaded.config, &loaded.source, store).await?;
//! gateway.serve_stdio().await; // or gateway.http_server(addr).bind().await?.serve(shutdown)
//! # Ok(()) }
//! ```
//!
//! # Skills
//!
//! `[skills.NAME]` passes one skill an upstream serves (the Skills extension, SEP-2640) through
//! to downstream clients as `skill://NAME/…`; nothing else an upstream serves as a skill is
//! visible. Its entry is pinned at start (`skills/get` at the binding's `uri`, or the one skill
//! the upstream lists as NAME): downstream clients see that entry, and a file is answered only
//! when the upstream's bytes are the pinned entry's (size and digest), so a skill changed
//! upstream is refused until the gateway restarts. An upstream without the extension, a missing,
//! `"dynamic"`, misnamed or oversized skill is a start mistake at its binding.
//!
//! # Webhooks
//!
//! `[webhooks.NAME]` endpoints get the approval and effect events (`approval.pending`,
//! `approval.decided`, `effect.committed`, `effect.unknown`) as signed Standard Webhooks (or
//! Slack-compatible messages): the store records each in the transaction of the change it
//! reports, whichever process makes the change, and the gateway delivers them at least once,
//! with retries, surviving restarts ([`webhooks`]).
//!
//! # Reload, drain, health, fleet
//!
//! [`Gateway::reload`] replaces the upstreams, bindings, limits and policies while serving (a
//! configuration with mistakes is refused and the running one serves on);
//! [`Gateway::drain`] stops taking calls, answers waiting writes as pending and waits for what is
//! in flight; [`Gateway::serve_http`] answers `/healthz` and `/readyz` beside `/mcp`
//! ([`health`]). Several gateways on one PostgreSQL store make a fleet: they share nothing but
//! the store, so a call repeated on another instance finds its approval, claim or receipt, and a
//! decision made anywhere wakes the call waiting on any instance.
//!
//! # Writes
//!
//! A write call is identified by the gateway's name, the tool, the caller and the arguments; its
//! approval's intent is Core's `ApprovalIntent` (its binding revision is the upstream write
//! catalog's digest). The same call again finds the same records: a completed claim answers
//! with its stored outcome; a pending approval is waited for again (a request undecided past
//! `approval_request_ttl` is replaced by a new one); a decided one is claimed.
//! A new approval is prepared only while the caller's principal has fewer than
//! `max_pending_per_caller` approvals waiting (16 by default, counted by the store with the
//! insert); one more new call is refused with `approval_limit`, preparing nothing.
//! A decided approval whose caller has gone is dispatched only when
//! `run_decided_without_caller` is set; otherwise it waits for the call to be made again, and
//! once it expires it is refused (recorded) and dropped.

// The layers, lowest first: a module imports only from its own layer and the layers before it
// here (the test in `layers.rs` enforces it; ARCHITECTURE.md has the map).
// config: the configuration's data, text to values and mistakes.
pub mod config;
// rules: compiled scope rules, policies and limits (pure).
mod rules;
// upstream: the connections to upstream servers and what they serve.
mod upstream;
// catalog: what the gateway serves, built from a configuration.
mod catalog;
// runtime: the running gateway (read and write paths, reload, drain, webhooks, store, metrics).
mod runtime;
// serve: the transports and listeners (stdio, HTTP, auth, health, metrics).
mod serve;

#[cfg(test)]
mod layers;

// The public modules at their old paths (`purra_gateway::scope`, `purra_gateway::metrics`, ...).
// The other modules are crate-private: nothing outside the crate names them (their public items
// are re-exported below).
pub use rules::{limit, policy, scope};
pub use runtime::{metrics, webhooks};
pub use serve::health;

pub use catalog::{load, load_reporting_all, load_reporting_all_with};
pub use config::{load_str, ConfigSource, Loaded};
pub use config::{
    parse_claim, AuthSettings, ClaimType, ConfigError, ConfigErrors, Dur, EffectConfig,
    GatewayConfig, IntrospectionSettings, LimitsConfig, Listen, OnCatalogChange, PageOidc,
    PageSettings, PoliciesConfig, ReadConfig, ScopeConfig, ScopeRules, Settings, SkillConfig,
    TelemetrySettings, UpstreamConfig, WebhookConfig, WebhookEventName, WebhookFormat, WriteConfig,
    DEFAULT_METRICS_INTERVAL,
};
pub use config::{ApprovalBy, ApprovalConfig, ApprovalRule, Dispatch, OnExpiry, SessionsIn};
pub use runtime::app::{app_uri, APPROVAL_TOOL};
pub use runtime::drain::Drained;
pub use runtime::edit::EditRefused;
pub use runtime::gateway::{Gateway, Log, StartError, StartOptions};
pub use runtime::grants::check_grant_rule;
pub use runtime::reload::Reloaded;
pub use runtime::resend::{resend, ResendError, Resent};
pub use runtime::store::{Decisions, GatewayStore};
pub use runtime::webhooks::Webhooks;
pub use serve::health::{HealthService, Readiness};
pub use upstream::WRITE_WAITS;
