//! The `runtime` layer: the running gateway ([`gateway::Gateway`]) and what it does while it
//! runs: the read path ([`gateway`]), approval-gated writes ([`write`]), the approval app
//! ([`app`]), reload ([`reload`]), drain ([`drain`]), webhook delivery ([`webhooks`]), the store
//! seam ([`store`]), the results clients receive ([`results`]), the metric families
//! ([`metrics`]) and the secrets read at start ([`secrets`]).
//!
//! It may import `config`, `rules`, `upstream` and `catalog`, never `serve` (the transports and
//! listeners in front of it); the test `layers::gateway_modules_import_only_their_own_layer_or_below`
//! fails otherwise.

pub(crate) mod app;
pub(crate) mod drain;
pub(crate) mod edit;
pub(crate) mod gateway;
pub(crate) mod grants;
pub mod metrics;
pub(crate) mod reload;
pub(crate) mod resend;
pub(crate) mod results;
pub(crate) mod secrets;
pub(crate) mod store;
pub(crate) mod tasks;
pub mod webhooks;
pub(crate) mod write;
