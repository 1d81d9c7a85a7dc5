//! purra-postgres's integration tests in one binary: a module for each area, the helpers they
//! share in `support`.

mod support;

mod migrate;
mod postgres;
#[cfg(feature = "sessions")]
mod sessions;
