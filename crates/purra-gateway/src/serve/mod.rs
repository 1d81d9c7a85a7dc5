//! The `serve` layer: how downstream clients and operators reach a running gateway: stdio
//! ([`stdio`]), Streamable HTTP ([`http`]) behind the OAuth guard ([`auth`]), the health checks
//! in front of it ([`health`]), and the Prometheus listener ([`metrics`]).
//!
//! It is the top layer: it may import every other (`config`, `rules`, `upstream`, `catalog`,
//! `runtime`), and none of them imports it (the test
//! `layers::gateway_modules_import_only_their_own_layer_or_below`).

pub(crate) mod auth;
pub mod health;
pub(crate) mod http;
pub(crate) mod metrics;
pub(crate) mod stdio;
