//! purra-core's integration tests in one binary: a module for each area, the helpers they share
//! in `support`.

mod support;

mod agent;
mod catalog;
mod differential;
mod hostile;
mod rfc8785;
mod schema_profile;
