//! purra's strict JSON Schema profile `purra.output-schema/v1` ([`schema`]): a subset of JSON
//! Schema 2020-12 with exactly its meaning, compiled once and validated within budgets, with the
//! ECMA-262 pattern subset it accepts ([`pattern`]) and the bounded JSON text reader it stands on
//! ([`json_text`]).
//!
//! purra-core re-exports these modules (its tool registrations and approvals compile schemas in
//! this profile); purra-protocol's server validates a tool's arguments with it whenever the
//! tool's schema is inside the profile, as every schema purra derives from a Rust type is.

pub mod json_text;
mod num;
pub mod pattern;
pub mod schema;

pub use json_text::{parse_json, JsonError, JsonErrorKind, JsonLimits};
pub use schema::{
    CompileOptions, CompiledSchema, Dialect, SchemaError, SchemaErrorKind, SchemaLimits,
    ValidationError, ValidationErrorKind, ValidationLimits,
};
