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
    /// A server started as a command (stdio) ended on its own before the connection was set
    /// up: how it ended, and what it had not answered. (A connection already set up whose
    /// command ends reports [`Error::ConnectionClosed`].)
    ProcessExited {
        /// How it ended, in words: `exited with status 3`, `was killed by signal 9 (SIGKILL)`.
        status: String,
        /// What it had not answered: `initialize`, `server/discover`, or the listing of its
        /// catalogs.
        before: String,
    },
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
    /// A handler needs a client capability (`sampling`, `elicitation`, `roots`) the client did
    /// not declare; a handler that returns it answers -32021 naming the capability.
    MissingClientCapability(String),
    /// The server kept answering `input_required` past the client's bound on rounds.
    InputRoundsExceeded(usize),
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
    /// The server requires authorization and it could not be obtained (OAuth 2.1; the `auth`
    /// feature). Never carries a token.
    Auth(AuthError),
    /// A skill file read through the Skills extension is not what its entry says (not listed,
    /// another size or digest, or a `SKILL.md` whose frontmatter differs from the entry's): its
    /// content is not returned.
    SkillVerification {
        /// The file's URI.
        uri: String,
        /// What differs.
        reason: String,
    },
}

/// Why authorization failed. The messages name URLs, statuses and the authorization server's
/// `error` codes, never a token, a code or a secret.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AuthError {
    /// The server asked for authorization and nothing can obtain it here: no authorization
    /// callback and no client credentials, or a stored login is missing or no longer valid.
    Required {
        /// The MCP server's URL.
        resource: String,
        /// The scope the server asked for, if it named one.
        scope: Option<String>,
    },
    /// Metadata (protected resource or authorization server) is missing or malformed.
    Discovery(String),
    /// The protected resource metadata names another resource than the server being reached.
    ResourceMismatch {
        /// The URL the client connects to.
        expected: String,
        /// The `resource` the metadata names.
        found: String,
    },
    /// The client could not be registered with the authorization server.
    Registration(String),
    /// The authorization step failed (refused, state mismatch, no code, callback error).
    Authorization(String),
    /// The token endpoint refused the request (`error` and `error_description` as sent).
    Token {
        /// The OAuth `error` code (or the HTTP status when the body had none).
        error: String,
        /// The `error_description`, if any (bounded).
        description: Option<String>,
    },
    /// The server kept asking for scope the client already requested (`insufficient_scope`),
    /// or for more step-ups than the bound allows.
    InsufficientScope {
        /// The scope the server asked for last.
        scope: Option<String>,
    },
    /// The token store failed.
    Store(String),
    /// Client configuration that cannot work (a key that does not parse, a bad URL).
    Config(String),
    /// A URL a server or a metadata document named, which the client's
    /// `auth::UrlPolicy` does not follow (not https, an address that is not
    /// public), or an endpoint a configured client secret must not go to. Nothing was sent to
    /// it.
    UrlRefused {
        /// The URL refused.
        url: String,
        /// Why.
        reason: String,
    },
}

impl fmt::Display for AuthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuthError::Required { resource, scope } => {
                write!(f, "{resource} requires authorization")?;
                if let Some(scope) = scope {
                    write!(f, " (scope {scope:?})")?;
                }
                Ok(())
            }
            AuthError::Discovery(why) => write!(f, "authorization discovery failed: {why}"),
            AuthError::ResourceMismatch { expected, found } => write!(
                f,
                "the protected resource metadata is for {found:?}, not for {expected:?}; refusing to authorize"
            ),
            AuthError::Registration(why) => write!(f, "client registration failed: {why}"),
            AuthError::Authorization(why) => write!(f, "authorization failed: {why}"),
            AuthError::Token { error, description } => {
                write!(f, "the token endpoint refused the request: {error}")?;
                if let Some(d) = description {
                    write!(f, " ({d})")?;
                }
                Ok(())
            }
            AuthError::InsufficientScope { scope } => {
                f.write_str("the server refused the token for insufficient scope")?;
                if let Some(scope) = scope {
                    write!(f, " (it asks for {scope:?})")?;
                }
                f.write_str(" and asking again cannot help")
            }
            AuthError::Store(why) => write!(f, "token store: {why}"),
            AuthError::Config(why) => write!(f, "authorization configuration: {why}"),
            AuthError::UrlRefused { url, reason } => write!(f, "refusing {url}: {reason}"),
        }
    }
}

impl std::error::Error for AuthError {}

impl From<AuthError> for Error {
    fn from(e: AuthError) -> Self {
        Error::Auth(e)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Rpc(e) => write!(f, "{e}"),
            Error::Timeout => f.write_str("request timed out"),
            Error::Cancelled => f.write_str("request cancelled"),
            Error::ConnectionClosed => f.write_str("connection closed"),
            Error::ProcessExited { status, before } => {
                write!(f, "the command {status} before answering {before}")
            }
            Error::Transport(why) => write!(f, "transport failure: {why}"),
            Error::Http { status, body } => write!(f, "HTTP status {status}: {body}"),
            Error::InvalidResponse(why) => write!(f, "invalid response: {why}"),
            Error::Protocol(why) => write!(f, "protocol violation: {why}"),
            Error::MissingClientCapability(c) => {
                write!(f, "the client did not declare the {c} capability")
            }
            Error::InputRoundsExceeded(n) => write!(
                f,
                "the server asked for input in more than {n} rounds without completing"
            ),
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
            Error::Auth(e) => write!(f, "{e}"),
            Error::SkillVerification { uri, reason } => {
                write!(f, "the skill file {uri} failed verification: {reason}")
            }
        }
    }
}

impl Error {
    /// The kind of failure as one word (`rpc`, `timeout`, `transport`, `protocol`, ...), without
    /// any text from the peer: what a log line or a span may say about it.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Error::Rpc(_) => "rpc",
            Error::Timeout => "timeout",
            Error::Cancelled => "cancelled",
            Error::ConnectionClosed => "closed",
            Error::ProcessExited { .. } => "process_exited",
            Error::Transport(_) => "transport",
            Error::Http { .. } => "http",
            Error::InvalidResponse(_) => "invalid_response",
            Error::Protocol(_) => "protocol",
            Error::UnsupportedProtocolVersion(_) => "unsupported_protocol_version",
            Error::MissingClientCapability(_) => "missing_client_capability",
            Error::InputRoundsExceeded(_) => "input_rounds_exceeded",
            Error::Encode(_) => "encode",
            Error::ResponseTooLarge { .. } => "response_too_large",
            Error::Auth(_) => "auth",
            Error::SkillVerification { .. } => "skill_verification",
        }
    }
}

/// The peer's JSON-RPC error and an authorization failure are causes of their own (their text
/// is also this error's message).
impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Rpc(e) => Some(e),
            Error::Auth(e) => Some(e),
            _ => None,
        }
    }
}

impl From<ErrorObject> for Error {
    fn from(e: ErrorObject) -> Self {
        Error::Rpc(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    /// Issue 49: the peer's JSON-RPC error and an authorization failure are sources; a
    /// failure without an inner error has none.
    #[test]
    fn wrapped_causes_are_sources() {
        let auth = AuthError::Store("locked".into());
        let e = Error::Auth(auth.clone());
        assert_eq!(
            e.source().and_then(|s| s.downcast_ref::<AuthError>()),
            Some(&auth)
        );
        let rpc = ErrorObject::invalid_params("bad");
        let e = Error::Rpc(rpc.clone());
        assert_eq!(
            e.source().and_then(|s| s.downcast_ref::<ErrorObject>()),
            Some(&rpc)
        );
        assert!(Error::ConnectionClosed.source().is_none());
    }
}
