//! purra-examples's integration tests: one test binary, one module per area, shared helpers in `support`.

mod support;

mod adapter_durable;
mod adapter_python;
mod adapter_read;
mod adapter_write;
mod apps;
mod idempotency;
mod interop;
mod modern_interop;
mod session_fleet;
mod skills_interop;
mod stdio_server;
mod tidy;
mod ws;
