//! purra-sqlite's integration tests in one binary: a module for each area, the helpers they
//! share in `support`.

mod support;

mod contract;
mod group_commit;
#[cfg(unix)]
mod permissions;
#[cfg(feature = "sessions")]
mod sessions;
mod sqlite;
