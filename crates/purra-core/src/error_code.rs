//! Sanitized error codes: the only failure information a model or an approver ever sees.
//!
//! Core never forwards remote or free-form error text. Every failure that reaches the transcript is an
//! [`ErrorCode`]: a short identifier matching `^[a-z][a-z0-9_]{0,63}$`. Core's own codes are the associated
//! constants below; an adapter (for example the MCP adapter) may construct its own codes such as
//! `mcp_timeout` with [`ErrorCode::new`], which enforces the same pattern so that no sentence, URL or
//! remote message can travel through a code.
//!
//! | code | raised when |
//! |---|---|
//! | `unknown_tool` | a model called a name that is not in the catalog |
//! | `invalid_arguments` | the arguments are not an object or fail the tool's input schema |
//! | `arguments_too_large` | the serialized arguments exceed the byte limit, or validating them exceeded a budget |
//! | `scope_denied` | the tool's scope check denied the call |
//! | `approval_required` | a confirm-policy tool was called outside a checkpoint |
//! | `checkpoint_not_alone` | a checkpoint call shared its model turn with other calls |
//! | `batch_not_dispatched` | this call was valid, but another call of the same turn was rejected |
//! | `tool_result_too_large` | the serialized tool result exceeds the byte limit |
//! | `tool_result_invalid` | the tool result fails the tool's output schema, or is too complex to validate |
//! | `tool_failed` | a handler failed without a more specific code |
//! | `tool_panicked` | a handler panicked |
//! | `tool_timeout` | the run lease's deadline passed while a handler ran |
//! | `run_cancelled` | the run lease was cancelled |
//! | `lease_expired` | the run lease's deadline passed between steps |
//! | `approval_denied` | the approver denied the checkpoint call |
//! | `approval_expired` | the approval expired before dispatch |
//! | `approval_mismatch` | the current registration, arguments or preset no longer match the approved intent |
//! | `approval_already_claimed` | the approved call was already claimed once; it is never dispatched again |
//! | `approval_gateway_not_durable` | a confirm-policy tool was configured with a non-durable approval gateway |
//! | `model_failed` | the model returned an error |
//! | `max_turns_exceeded` | the run used its turn budget without a final answer |
//! | `store_failed` | an approval, idempotency or run store failed |
//! | `run_not_suspended` | a resume named a run that is not suspended for this agent |

use std::borrow::Cow;
use std::fmt;

/// A sanitized error code matching `^[a-z][a-z0-9_]{0,63}$`.
#[derive(
    Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(try_from = "String", into = "String")]
pub struct ErrorCode(Cow<'static, str>);

/// The error returned by [`ErrorCode::new`] for a string that is not a valid code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidErrorCode;

impl fmt::Display for InvalidErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an error code must match ^[a-z][a-z0-9_]{0,63}$")
    }
}

impl std::error::Error for InvalidErrorCode {}

/// Whether `s` matches `^[a-z][a-z0-9_]{0,63}$` (the pattern shared by error codes and tool names).
pub(crate) fn is_identifier(s: &str) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 64
        && bytes[0].is_ascii_lowercase()
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_')
}

macro_rules! codes {
    ($($(#[$doc:meta])* $name:ident = $text:literal;)*) => {
        impl ErrorCode {
            $($(#[$doc])* pub const $name: ErrorCode = ErrorCode(Cow::Borrowed($text));)*
            /// Every code Core itself raises, in the order of the module's table.
            pub const CORE_CODES: &'static [ErrorCode] = &[$(ErrorCode::$name),*];
        }
    };
}

codes! {
    /// `unknown_tool`
    UNKNOWN_TOOL = "unknown_tool";
    /// `invalid_arguments`
    INVALID_ARGUMENTS = "invalid_arguments";
    /// `arguments_too_large`
    ARGUMENTS_TOO_LARGE = "arguments_too_large";
    /// `scope_denied`
    SCOPE_DENIED = "scope_denied";
    /// `approval_required`
    APPROVAL_REQUIRED = "approval_required";
    /// `checkpoint_not_alone`
    CHECKPOINT_NOT_ALONE = "checkpoint_not_alone";
    /// `batch_not_dispatched`
    BATCH_NOT_DISPATCHED = "batch_not_dispatched";
    /// `tool_result_too_large`
    TOOL_RESULT_TOO_LARGE = "tool_result_too_large";
    /// `tool_result_invalid`
    TOOL_RESULT_INVALID = "tool_result_invalid";
    /// `tool_failed`
    TOOL_FAILED = "tool_failed";
    /// `tool_panicked`
    TOOL_PANICKED = "tool_panicked";
    /// `tool_timeout`
    TOOL_TIMEOUT = "tool_timeout";
    /// `run_cancelled`
    RUN_CANCELLED = "run_cancelled";
    /// `lease_expired`
    LEASE_EXPIRED = "lease_expired";
    /// `approval_denied`
    APPROVAL_DENIED = "approval_denied";
    /// `approval_expired`
    APPROVAL_EXPIRED = "approval_expired";
    /// `approval_mismatch`
    APPROVAL_MISMATCH = "approval_mismatch";
    /// `approval_already_claimed`
    APPROVAL_ALREADY_CLAIMED = "approval_already_claimed";
    /// `approval_gateway_not_durable`
    APPROVAL_GATEWAY_NOT_DURABLE = "approval_gateway_not_durable";
    /// `model_failed`
    MODEL_FAILED = "model_failed";
    /// `max_turns_exceeded`
    MAX_TURNS_EXCEEDED = "max_turns_exceeded";
    /// `store_failed`
    STORE_FAILED = "store_failed";
    /// `run_not_suspended`
    RUN_NOT_SUSPENDED = "run_not_suspended";
}

impl ErrorCode {
    /// Builds a code from text, refusing anything that does not match `^[a-z][a-z0-9_]{0,63}$`.
    pub fn new(code: &str) -> Result<ErrorCode, InvalidErrorCode> {
        if is_identifier(code) {
            Ok(ErrorCode(Cow::Owned(code.to_owned())))
        } else {
            Err(InvalidErrorCode)
        }
    }

    /// The code as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for ErrorCode {
    type Error = InvalidErrorCode;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        if is_identifier(&value) {
            Ok(ErrorCode(Cow::Owned(value)))
        } else {
            Err(InvalidErrorCode)
        }
    }
}

impl From<ErrorCode> for String {
    fn from(value: ErrorCode) -> String {
        value.0.into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_the_pattern_and_reject_text() {
        for code in ErrorCode::CORE_CODES {
            assert!(is_identifier(code.as_str()), "{code}");
        }
        assert_eq!(
            ErrorCode::new("mcp_timeout").unwrap().as_str(),
            "mcp_timeout"
        );
        assert_eq!(ErrorCode::new("Connection refused"), Err(InvalidErrorCode));
        assert_eq!(ErrorCode::new(""), Err(InvalidErrorCode));
        assert_eq!(ErrorCode::new(&"a".repeat(65)), Err(InvalidErrorCode));
        assert!(serde_json::from_str::<ErrorCode>("\"bad code\"").is_err());
    }
}
