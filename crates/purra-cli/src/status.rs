//! Progress and server log messages on stderr: a live progress bar when stderr is a terminal,
//! plain lines otherwise.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};

use purra_protocol::types::{LoggingMessageParams, ProgressParams};
use purra_protocol::Connection;
use serde_json::Value;

/// The width of the bar, in cells.
const BAR_CELLS: usize = 24;

/// What stderr shows while a request runs.
#[derive(Debug, Clone)]
pub struct Status {
    tty: bool,
    /// The bar currently drawn on the last line of a terminal, if any.
    bar: Arc<Mutex<Option<String>>>,
}

impl Status {
    /// Live output when stderr is a terminal, lines otherwise.
    pub fn new() -> Self {
        Status {
            tty: std::io::stderr().is_terminal(),
            bar: Arc::new(Mutex::new(None)),
        }
    }

    /// Shows the server's `notifications/message` on stderr from now on.
    pub fn show_logs(&self, conn: &Connection) {
        let status = self.clone();
        // The listener lives as long as the connection; the handle is not needed to stop it.
        // `on_received` runs in the connection's reader: every log message a server sent before
        // its response is printed before the call returns (and before the program exits).
        let _handle =
            conn.on_received(
                "notifications/message",
                move |params| match serde_json::from_value::<LoggingMessageParams>(params.clone()) {
                    Ok(m) => status.log(&m),
                    Err(_) => status.print_line(&format!("[log] {params}")),
                },
            );
    }

    /// Shows one log message.
    pub fn log(&self, m: &LoggingMessageParams) {
        let level = serde_json::to_value(m.level)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_else(|| format!("{:?}", m.level));
        let data = match &m.data {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let line = match &m.logger {
            Some(logger) => format!("[{level}] {logger}: {data}"),
            None => format!("[{level}] {data}"),
        };
        self.print_line(&line);
    }

    /// Shows one progress notification.
    pub fn progress(&self, p: &ProgressParams) {
        let count = match p.total {
            Some(total) => format!("{}/{}", number(p.progress), number(total)),
            None => number(p.progress),
        };
        let message = p
            .message
            .as_deref()
            .map(|m| format!(" {m}"))
            .unwrap_or_default();
        if !self.tty {
            self.print_line(&format!("progress {count}{message}"));
            return;
        }
        let bar = match p.total {
            Some(total) if total > 0.0 => {
                let fraction = (p.progress / total).clamp(0.0, 1.0);
                // The bar has BAR_CELLS cells; rounding down is what a bar does.
                #[allow(
                    clippy::cast_possible_truncation,
                    clippy::cast_sign_loss,
                    clippy::cast_precision_loss
                )]
                let filled = (fraction * BAR_CELLS as f64) as usize;
                format!(
                    "[{}{}] {:>3.0}% {count}{message}",
                    "#".repeat(filled),
                    "-".repeat(BAR_CELLS - filled),
                    fraction * 100.0
                )
            }
            _ => format!("[{}] {count}{message}", "?".repeat(BAR_CELLS)),
        };
        let mut slot = self.bar.lock().expect("bar lock");
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K{bar}");
        let _ = err.flush();
        *slot = Some(bar);
    }

    /// Removes the bar (before the result is printed).
    pub fn finish(&self) {
        let mut slot = self.bar.lock().expect("bar lock");
        if slot.take().is_some() {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        }
    }

    /// Prints a line on stderr above the bar, if one is drawn.
    fn print_line(&self, line: &str) {
        let slot = self.bar.lock().expect("bar lock");
        let mut err = std::io::stderr().lock();
        match slot.as_deref() {
            Some(bar) => {
                let _ = write!(err, "\r\x1b[2K{line}\n{bar}");
            }
            None => {
                let _ = writeln!(err, "{line}");
            }
        }
        let _ = err.flush();
    }
}

/// A progress number: integral values without a fraction.
fn number(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{x:.0}")
    } else {
        format!("{x}")
    }
}
