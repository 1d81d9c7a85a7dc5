//! Progress, server log messages and a stdio child's stderr on stderr: an indicatif progress bar
//! when stderr is a terminal (it fits the terminal's width, whatever the message), plain lines
//! otherwise. What a server wrote is made safe for the terminal (see `term`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use purra_protocol::types::{LoggingMessageParams, ProgressParams};
use purra_protocol::Connection;
use serde_json::Value;

use crate::term;

/// Positions of a bar with a known total: progress is shown in thousandths of the total.
const SCALE: u64 = 1000;

/// What stderr shows while a request runs.
#[derive(Debug, Clone)]
pub struct Status {
    tty: bool,
    /// The bar, once progress was reported on a terminal.
    bar: Arc<Mutex<Option<ProgressBar>>>,
}

impl Status {
    /// Live output when stderr is a terminal, lines otherwise.
    pub fn new() -> Self {
        Status {
            tty: term::stderr_is_terminal(),
            bar: Arc::new(Mutex::new(None)),
        }
    }

    /// Whether stderr is a terminal.
    pub fn is_terminal(&self) -> bool {
        self.tty
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
        // A bar shows one line: a message's own line breaks are flattened.
        let text = term::safe(&format!("{count}{message}")).replace(['\n', '\t'], " ");
        let mut slot = self.bar.lock().expect("bar lock");
        let bar = slot.get_or_insert_with(|| {
            let bar = ProgressBar::new(SCALE);
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        match p.total {
            Some(total) if total > 0.0 => {
                bar.set_style(
                    ProgressStyle::with_template("[{bar:24}] {percent:>3}% {wide_msg}")
                        .expect("a valid template")
                        .progress_chars("#>-"),
                );
                let fraction = (p.progress / total).clamp(0.0, 1.0);
                // Thousandths of the total; rounding down is what a bar does.
                #[allow(
                    clippy::cast_possible_truncation,
                    clippy::cast_sign_loss,
                    clippy::cast_precision_loss
                )]
                bar.set_position((fraction * SCALE as f64) as u64);
            }
            _ => bar.set_style(
                ProgressStyle::with_template("{spinner} {wide_msg}").expect("a valid template"),
            ),
        }
        bar.set_message(text);
    }

    /// Removes the bar (before the result is printed).
    pub fn finish(&self) {
        if let Some(bar) = self.bar.lock().expect("bar lock").take() {
            bar.finish_and_clear();
        }
    }

    /// Prints a line on stderr (above the bar, if one is drawn), made safe for a terminal.
    pub fn print_line(&self, line: &str) {
        let slot = self.bar.lock().expect("bar lock");
        if !self.tty {
            eprintln!("{line}");
            return;
        }
        let line = term::safe(line);
        match slot.as_ref() {
            Some(bar) => bar.suspend(|| eprintln!("{line}")),
            None => eprintln!("{line}"),
        }
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
