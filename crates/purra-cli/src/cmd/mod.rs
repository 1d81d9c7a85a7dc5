//! One module per subcommand; `store` holds what the durable-store subcommands share.

pub mod approvals;
pub mod call;
pub mod catalog;
pub mod credentials;
pub mod demo;
pub mod effects;
pub mod gateway;
pub mod grants;
pub mod inspect;
pub mod login;
pub mod page;
pub mod prompt;
pub mod read;
pub mod runs;
pub mod serve_example;
pub mod store;
pub mod tasks;
pub mod webhooks;

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

/// Prints `value` as one pretty JSON document on stdout (exact JSON; on a terminal, the control
/// characters serde_json leaves as they are are escaped, which means the same JSON).
pub fn print_json(value: &serde_json::Value) {
    let text = crate::render::pretty(value);
    if crate::term::stdout_is_terminal() {
        println!("{}", crate::term::safe_json(&text));
    } else {
        println!("{text}");
    }
}

/// Prints readable output on stdout as it is, made safe when stdout is a terminal.
pub fn print_readable(text: &str) {
    print!("{}", crate::term::for_stdout(text));
}

/// Runs `work` on an open connection with server logs shown on stderr, then closes the
/// connection (a stdio server gets end of input, then SIGTERM, then SIGKILL).
pub async fn with_status<T, F>(conn: Connection, status: &Status, work: F) -> Result<T, Failure>
where
    F: AsyncFnOnce(&Connection, &Status) -> Result<T, Failure>,
{
    status.show_logs(&conn);
    let result = work(&conn, status).await;
    status.finish();
    conn.close().await;
    result
}
