//! purra-mcp's integration tests in one binary: a module for each area, the helpers they share
//! in `support`.

mod support;

mod dialects;
mod hostile_server;
mod modern_listen;
mod pinned;
mod tasks;
