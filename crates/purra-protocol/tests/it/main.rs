//! purra-protocol's integration tests in one binary: a module for each area, the helpers they
//! share in `support` (tool_errors.rs stays its own binary: it re-executes itself as a server).

mod support;

#[cfg(feature = "auth")]
mod auth_oidc;
#[cfg(feature = "auth")]
mod auth_revoke;
#[cfg(feature = "auth")]
mod auth_urls;
mod child;
mod client_tasks;
mod client_tasks_everything;
mod hostile_client;
mod hostile_server;
mod http;
mod http_client_streams;
mod http_session_store;
mod http_sessions;
mod legacy_sse;
mod modern_client;
mod modern_http;
mod modern_server;
mod protocol;
mod server_hardening;
mod skills;
mod skills_dir;
mod tasks;
mod telemetry;
#[cfg(feature = "auth")]
mod token_exchange;
mod typed;
