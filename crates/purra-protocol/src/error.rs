//! The error a request or a connection can end with.

use std::fmt;

use crate::jsonrpc::ErrorObject;
use crate::version::ProtocolVersion;

/// Why a request or a connection failed. Each kind is distinct so a host can act on it: a
/// JSON-RPC error came from the peer; a transport failure or a closed connection did not.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// The peer answered with a JSON-RPC error (code, message and data as sent).
    Rpc(ErrorObject),
    /// No response within the request's timeout; `notifications/cancelled` was sent.
    Timeout,
    /// The request was cancelled locally; `notifications/cancelled` was sent.
    Cancelled,
    /// The connection closed (the peer exited, closed its end, or `close` was called).
    ConnectionClosed,
    /// The transport failed: a spawn or I/O error, or an HTTP connection that could not be made.
    Transport(String),
    /// The HTTP server answered with an error status.
    Http {
        /// The status code.
        status: u16,
        /// The start of the response body (at most 1 KiB).
        body: String,
    },
    /// The HTTP response was not a valid MCP response (content type, framing, JSON).
    InvalidResponse(String),
    /// The peer broke the protocol: a malformed or unexpected response.
    Protocol(String),
    /// The server answered `initialize` with a revision purra does not speak.
    UnsupportedProtocolVersion(ProtocolVersion),
    /// What this side was to send could not be serialized to JSON (a `Serialize` impl failed);
    /// nothing was sent.
    Encode(String),
    /// The response exceeded the frame bound and was discarded unread.
    ResponseTooLarge {
        /// Bytes of it that were seen (all of it on stdio; where reading stopped on HTTP).
        len: usize,
        /// The bound it exceeded.
        limit: usize,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Rpc(e) => write!(f, "{e}"),
            Error::Timeout => f.write_str("request timed out"),
            Error::Cancelled => f.write_str("request cancelled"),
            Error::ConnectionClosed => f.write_str("connection closed"),
            Error::Transport(why) => write!(f, "transport failure: {why}"),
            Error::Http { status, body } => write!(f, "HTTP status {status}: {body}"),
            Error::InvalidResponse(why) => write!(f, "invalid response: {why}"),
            Error::Protocol(why) => write!(f, "protocol violation: {why}"),
            Error::Encode(why) => write!(f, "could not encode the message: {why}"),
            Error::UnsupportedProtocolVersion(v) => {
                write!(
                    f,
                    "the server chose protocol version {:?}, which this client does not support",
                    v.as_str()
                )
            }
            Error::ResponseTooLarge { len, limit } => write!(
                f,
                "the response exceeds the {limit}-byte frame limit ({len} bytes read); it was discarded"
            ),
        }
    }
}

impl std::error::Error for Error {}

impl From<ErrorObject> for Error {
    fn from(e: ErrorObject) -> Self {
        Error::Rpc(e)
    }
}
