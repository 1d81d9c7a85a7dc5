//! purra-gateway's integration tests: one test binary, one module per area, shared helpers in `support`.

mod support;

mod config;
mod flow;
mod idempotency;
mod lifecycle;
mod postgres;
mod skills;
mod start;
mod tokens;
mod webhooks;
