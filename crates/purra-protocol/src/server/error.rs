//! The two ways registering or running a handler can fail: [`RegistrationError`] (a definition
//! the server refuses, returned by `Server::tool` and friends) and [`HandlerError`] (what a
//! handler's `Err` becomes on the wire).

use std::fmt;

use crate::jsonrpc::ErrorObject;
use crate::types::CallToolResult;

/// Any error a handler may return: `String`, `&str`, `std::io::Error`, `anyhow::Error`,
/// `Box<dyn Error>`, purra's `Error`, an [`ErrorObject`]...
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A handler's failure.
///
/// **In a tool**, a `HandlerError` becomes a *result* with `isError: true` and the error's
/// message as its text, so the model reads it and can correct itself (what the specification
/// asks of tool execution errors) — unless it was made from an [`ErrorObject`], which is sent
/// as that JSON-RPC error, code and data kept (for protocol-level failures: invalid params,
/// resource not found, URL elicitation required).
///
/// **In resource, prompt and completion handlers**, which have no `isError`, an `ErrorObject`
/// is sent as is and anything else as -32603 with the message.
///
/// Every error converts with `?` or `.into()`; which one it becomes is decided by its type, so
/// the call site says it:
///
/// ```
/// use purra_protocol::{ErrorObject, HandlerError, HandlerResult};
///
/// fn tool_step(n: i64) -> HandlerResult<i64> {
///     if n < 0 {
///         // The model reads "n must not be negative" in an isError result.
///         return Err("n must not be negative".into());
///     }
///     let parsed: i64 = "12".parse()?; // any std error: an isError result too
///     Ok(n + parsed)
/// }
/// fn protocol_step() -> HandlerResult<()> {
///     // The client gets JSON-RPC error -32602 with this data.
///     Err(ErrorObject::invalid_params("unknown city").with_data(serde_json::json!({"city": "x"})).into())
/// }
/// assert!(tool_step(-1).unwrap_err().as_rpc().is_none());
/// assert_eq!(protocol_step().unwrap_err().as_rpc().unwrap().code.0, -32602);
/// ```
pub struct HandlerError(Repr);

enum Repr {
    /// Sent as this JSON-RPC error.
    Rpc(ErrorObject),
    /// A failure of the handler's work: an `isError` result in a tool, -32603 elsewhere.
    Failed(BoxError),
}

/// What a handler returns.
pub type HandlerResult<T> = Result<T, HandlerError>;

impl<E: Into<BoxError>> From<E> for HandlerError {
    fn from(e: E) -> Self {
        let other = match e.into().downcast::<ErrorObject>() {
            Ok(rpc) => return HandlerError(Repr::Rpc(*rpc)),
            Err(other) => other,
        };
        // A `RequestCtx` call that needs a capability the client did not declare is a protocol
        // failure of the request (-32021 naming it), not the tool's.
        match other.downcast::<crate::Error>() {
            Ok(e) => match *e {
                crate::Error::MissingClientCapability(c) => {
                    HandlerError(Repr::Rpc(missing_capability(&c)))
                }
                e => HandlerError(Repr::Failed(Box::new(e))),
            },
            Err(other) => HandlerError(Repr::Failed(other)),
        }
    }
}

/// -32021 with the capability in `data.requiredCapabilities`.
fn missing_capability(c: &str) -> ErrorObject {
    ErrorObject::new(
        crate::jsonrpc::RpcErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
        format!("Missing required client capability: {c}"),
    )
    .with_data(serde_json::json!({ "requiredCapabilities": { c: {} } }))
}

impl HandlerError {
    /// A failure sent as the JSON-RPC error `e` (the same as `e.into()`).
    pub fn rpc(e: ErrorObject) -> Self {
        HandlerError(Repr::Rpc(e))
    }

    /// The JSON-RPC error this failure is sent as, if it was made from one.
    pub fn as_rpc(&self) -> Option<&ErrorObject> {
        match &self.0 {
            Repr::Rpc(e) => Some(e),
            Repr::Failed(_) => None,
        }
    }

    /// The text a client reads: the error's message followed by each of its sources, joined
    /// by `": "`.
    pub fn message(&self) -> String {
        match &self.0 {
            Repr::Rpc(e) => e.message.clone(),
            Repr::Failed(e) => {
                let mut text = e.to_string();
                let mut source = e.source();
                while let Some(s) = source {
                    let m = s.to_string();
                    if !text.ends_with(&m) {
                        text.push_str(": ");
                        text.push_str(&m);
                    }
                    source = s.source();
                }
                text
            }
        }
    }

    /// A tool's answer: an `isError` result with the message, or the JSON-RPC error.
    pub(crate) fn into_tool_result(self) -> Result<CallToolResult, ErrorObject> {
        match self.0 {
            Repr::Rpc(e) => Err(e),
            Repr::Failed(_) => Ok(CallToolResult::error(self.message())),
        }
    }

    /// Any other handler's answer: the JSON-RPC error, or -32603 with the message.
    pub(crate) fn into_error_object(self) -> ErrorObject {
        match self.0 {
            Repr::Rpc(e) => e,
            Repr::Failed(_) => ErrorObject::internal(self.message()),
        }
    }
}

impl fmt::Display for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Repr::Rpc(e) => write!(f, "{e}"),
            Repr::Failed(_) => f.write_str(&self.message()),
        }
    }
}

impl fmt::Debug for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Repr::Rpc(e) => f.debug_tuple("HandlerError::Rpc").field(e).finish(),
            Repr::Failed(e) => f.debug_tuple("HandlerError::Failed").field(e).finish(),
        }
    }
}

/// Why the server refused a tool, prompt or resource template.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegistrationError {
    /// The arguments type does not describe a JSON object, which MCP requires of tool
    /// arguments (an enum of strings, a number, a sequence...): wrap it in a struct. `()`
    /// (no arguments) and `serde_json::Value` (any object) are accepted.
    ArgumentsNotObject {
        /// The tool or prompt.
        name: String,
        /// What the type's schema describes instead.
        found: String,
    },
    /// The output type does not describe a JSON object, which MCP requires of
    /// `structuredContent`: wrap it in a struct.
    OutputNotObject {
        /// The tool.
        name: String,
        /// What the type's schema describes instead.
        found: String,
    },
    /// A schema given to `raw_tool` is not a valid JSON Schema 2020-12, or its root is not an
    /// object schema.
    InvalidSchema {
        /// The tool.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// A prompt's arguments type has a property that cannot be given as a string argument
    /// (prompt arguments are strings: nested objects and arrays cannot be passed).
    InvalidPromptArgument {
        /// The prompt.
        name: String,
        /// The property.
        argument: String,
    },
    /// The URI template is malformed, or its variables do not give a required field of the
    /// variables type.
    InvalidTemplate {
        /// The URI template.
        template: String,
        /// What is wrong.
        reason: String,
    },
    /// A caching hint was given for a method whose results are not cacheable.
    InvalidCacheMethod(String),
    /// An extension name is not `reverse.dns/name`, or is one the server declares itself.
    InvalidExtension(String),
    /// An MCP App's URI (a tool's `_meta.ui.resourceUri`, or an app resource's) is not `ui://`.
    InvalidAppUri {
        /// The tool or the resource.
        name: String,
        /// The URI given.
        uri: String,
    },
    /// A skill breaks SEP-2640's rules or limits (or is `"dynamic"`, which cannot be served).
    InvalidSkill {
        /// The skill's path or URI.
        skill: String,
        /// What is wrong.
        reason: String,
    },
    /// A skills folder breaks a bound or a rule (see [`crate::skills::SkillsDirOptions`]).
    SkillsFolder(crate::skills::SkillsDirError),
}

impl fmt::Display for RegistrationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegistrationError::ArgumentsNotObject { name, found } => write!(
                f,
                "the arguments of {name:?} must be a JSON object, but its arguments type describes {found}; use a struct (or `()` for no arguments)"
            ),
            RegistrationError::OutputNotObject { name, found } => write!(
                f,
                "the structured output of {name:?} must be a JSON object, but its output type describes {found}; wrap it in a struct"
            ),
            RegistrationError::InvalidSchema { name, reason } => {
                write!(f, "invalid schema for {name:?}: {reason}")
            }
            RegistrationError::InvalidPromptArgument { name, argument } => write!(
                f,
                "prompt {name:?}: argument {argument:?} is an object or an array, but prompt arguments are strings"
            ),
            RegistrationError::InvalidTemplate { template, reason } => {
                write!(f, "invalid URI template {template:?}: {reason}")
            }
            RegistrationError::InvalidCacheMethod(m) => {
                write!(f, "{m} has no cacheable results (no caching hint applies)")
            }
            RegistrationError::InvalidAppUri { name, uri } => write!(
                f,
                "{name:?}: the MCP App URI {uri:?} must use the ui:// scheme"
            ),
            RegistrationError::InvalidExtension(n) => write!(
                f,
                "{n:?} cannot be declared as an extension: a name is reverse-DNS/name (com.example/feature), and the tasks and skills extensions are declared by the server itself"
            ),
            RegistrationError::InvalidSkill { skill, reason } => {
                write!(f, "the skill {skill} cannot be served: {reason}")
            }
            RegistrationError::SkillsFolder(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for RegistrationError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RegistrationError::SkillsFolder(e) => Some(e),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Outer(std::io::Error);
    impl fmt::Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("reading the forecast")
        }
    }
    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn errors_become_tool_results_unless_they_are_error_objects() {
        let r = HandlerError::from("city not found").into_tool_result();
        assert_eq!(r, Ok(CallToolResult::error("city not found")));
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let r = HandlerError::from(Outer(io)).into_tool_result();
        assert_eq!(
            r,
            Ok(CallToolResult::error("reading the forecast: no such file"))
        );
        let e = ErrorObject::invalid_params("bad").with_data(serde_json::json!({"x": 1}));
        assert_eq!(
            HandlerError::from(e.clone()).into_tool_result(),
            Err(e.clone())
        );
        // Boxed first, it is still found.
        let boxed: BoxError = Box::new(e.clone());
        assert_eq!(HandlerError::from(boxed).into_error_object(), e);
        assert_eq!(
            HandlerError::from(crate::Error::Timeout).into_error_object(),
            ErrorObject::internal("request timed out")
        );
    }
}
