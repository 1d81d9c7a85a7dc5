//! Exit codes and the failure every subcommand ends with when it does not succeed.

use std::fmt;

use purra_protocol::Error;
use serde_json::{json, Value};

/// The tool answered with a result whose `isError` is true.
pub const TOOL_ERROR: i32 = 1;
/// A protocol or transport error: no connection, a JSON-RPC error, a timeout, a closed connection.
pub const PROTOCOL_ERROR: i32 = 2;
/// A conflict with the stored state, e.g. deciding an approval a second time.
pub const CONFLICT: i32 = 3;
/// Bad arguments (BSD `EX_USAGE`).
pub const USAGE: i32 = 64;
/// A configuration file with mistakes (BSD `EX_CONFIG`).
pub const CONFIG: i32 = 78;
/// Interrupted by Ctrl-C (128 + SIGINT).
pub const INTERRUPTED: i32 = 130;

/// Why a subcommand failed, and the exit code that says so.
#[derive(Debug)]
pub enum Failure {
    /// The command line is wrong.
    Usage(String),
    /// The server or the transport failed; `context` says what was being done.
    Protocol {
        /// What was being done, e.g. `calling tool echo`.
        context: String,
        /// The error (boxed: a failure stays small whatever the error holds).
        error: Box<Error>,
    },
    /// The tool reported an error; its content was already printed.
    ToolError,
    /// A store subcommand failed: an unknown id, a conflict or a store failure.
    Store {
        /// `not_found`, `conflict` or `store`.
        kind: &'static str,
        /// What went wrong, for a person.
        message: String,
    },
    /// The gateway's configuration has mistakes (the text lists each).
    Config(String),
    /// Ctrl-C.
    Interrupted,
}

impl Failure {
    /// A usage failure.
    pub fn usage(why: impl Into<String>) -> Self {
        Failure::Usage(why.into())
    }

    /// A protocol failure while doing `context`.
    pub fn protocol(context: impl Into<String>, error: Error) -> Self {
        Failure::Protocol {
            context: context.into(),
            error: Box::new(error),
        }
    }

    /// A store failure of `kind` (`not_found`, `conflict`, `store`).
    pub fn store(kind: &'static str, message: impl Into<String>) -> Self {
        Failure::Store {
            kind,
            message: message.into(),
        }
    }

    /// The process exit code.
    pub fn code(&self) -> i32 {
        match self {
            Failure::Usage(_) => USAGE,
            Failure::Protocol { .. } => PROTOCOL_ERROR,
            Failure::ToolError => TOOL_ERROR,
            Failure::Store { kind, .. } if *kind == "conflict" => CONFLICT,
            Failure::Store { .. } => PROTOCOL_ERROR,
            Failure::Config(_) => CONFIG,
            Failure::Interrupted => INTERRUPTED,
        }
    }

    /// The machine form of a protocol or store failure, for `--json` (`None` for the others).
    pub fn to_json(&self) -> Option<Value> {
        if let Failure::Store { kind, message } = self {
            return Some(json!({"error": {"kind": kind, "message": message}}));
        }
        let Failure::Protocol { context, error } = self else {
            return None;
        };
        let mut e = match &**error {
            Error::Rpc(o) => json!({
                "kind": "rpc",
                "code": o.code.0,
                "message": o.message,
                "data": o.data,
            }),
            Error::Timeout => json!({"kind": "timeout"}),
            Error::Cancelled => json!({"kind": "cancelled"}),
            Error::ConnectionClosed => json!({"kind": "connection_closed"}),
            Error::Transport(_) => json!({"kind": "transport"}),
            Error::Http { status, .. } => json!({"kind": "http", "status": status}),
            Error::InvalidResponse(_) => json!({"kind": "invalid_response"}),
            Error::Protocol(_) => json!({"kind": "protocol"}),
            Error::UnsupportedProtocolVersion(v) => {
                json!({"kind": "unsupported_protocol_version", "version": v})
            }
            Error::ResponseTooLarge { len, limit } => {
                json!({"kind": "response_too_large", "bytes": len, "limit": limit})
            }
            Error::SkillVerification { uri, .. } => {
                json!({"kind": "skill_verification", "uri": uri})
            }
            _ => json!({"kind": "other"}),
        };
        if let Value::Object(o) = &mut e {
            o.entry("message").or_insert(json!(error.to_string()));
            o.insert("context".into(), json!(context));
        }
        Some(json!({ "error": e }))
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Usage(why) => write!(f, "{why}"),
            Failure::Protocol { context, error } => write!(f, "{context}: {error}"),
            Failure::ToolError => f.write_str("the tool reported an error"),
            Failure::Store { message, .. } => f.write_str(message),
            Failure::Config(text) => f.write_str(text),
            Failure::Interrupted => f.write_str("interrupted"),
        }
    }
}
