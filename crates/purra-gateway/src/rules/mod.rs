//! The `rules` layer: what the configuration's rules compile to, and the decisions they make:
//! scope rules ([`scope`]), Cedar policies ([`policy`]), per-caller rate limits ([`limit`]) and
//! who a request is from ([`principal`]). No connection, no task, no store: the only I/O is
//! reading the policy files named in `[policies]`.
//!
//! It may import `config` and nothing above it (`upstream`, `catalog`, `runtime`, `serve`); the
//! test `layers::gateway_modules_import_only_their_own_layer_or_below` fails otherwise.

pub mod limit;
pub mod policy;
pub(crate) mod principal;
pub mod scope;
