//! purra-page's integration tests: one test binary, one module per area, shared helpers in `support`.

mod support;

mod connect;
mod connections;
mod http;
mod oidc;
