//! One module per subcommand; `store` holds what the durable-store subcommands share.

pub mod approvals;
pub mod call;
pub mod demo;
pub mod gateway;
pub mod inspect;
pub mod prompt;
pub mod read;
pub mod runs;
pub mod serve_example;
pub mod store;

use purra_protocol::Connection;

use crate::exit::Failure;
use crate::status::Status;

/// Completes on SIGINT or SIGTERM (the servers stop gracefully on either).
pub async fn interrupted() {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// Prints `value` as one pretty JSON document on stdout.
pub fn print_json(value: &serde_json::Value) {
    println!("{}", crate::render::pretty(value));
}

/// Runs `work` on an open connection with server logs shown on stderr, then closes the
/// connection (a stdio server gets end of input, then SIGTERM, then SIGKILL).
pub async fn with_status<T, F>(conn: Connection, work: F) -> Result<T, Failure>
where
    F: AsyncFnOnce(&Connection, &Status) -> Result<T, Failure>,
{
    let status = Status::new();
    status.show_logs(&conn);
    let result = work(&conn, &status).await;
    status.finish();
    conn.close().await;
    result
}
