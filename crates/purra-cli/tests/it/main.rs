//! purra-cli's integration tests: one test binary, one module per area, shared helpers in `support`.

mod support;

mod auth;
mod cli;
mod credentials;
mod durable;
mod edit;
mod effects;
mod everything;
mod first_hour;
mod fleet;
mod gateway;
mod gateway_auth;
mod grants;
mod held_tasks;
mod hostile;
mod identity;
mod page;
mod pins;
mod quorum;
mod real_upstreams;
mod skills;
mod store_location;
mod telemetry;
mod webhooks;
