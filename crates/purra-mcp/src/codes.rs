//! The adapter's error codes: the only thing a failure tells the model, never remote text.
//!
//! | code | when |
//! |---|---|
//! | `mcp_invalid_arguments` | arguments fail the input schema, or exceed the result budget once decoded; nothing was sent |
//! | `scope_denied` | the host's scope check denied the call; nothing was sent (Core's code, one code for every scope refusal) |
//! | `mcp_catalog_stale` | the server's tool list changed since discovery (nothing sent), or changed while the call was in flight (result discarded) |
//! | `mcp_catalog_changed` | the server lists a pinned tool differently from its pin: it is served as pinned and refused until an operator approves the change (`purra catalog diff`); nothing was sent |
//! | `mcp_tool_removed` | the server no longer lists a pinned tool: it is withheld until an operator approves the removal; nothing was sent |
//! | `mcp_connection_closed` | the connection (or its monitor) is closed |
//! | `mcp_timeout` | no answer within the adapter's timeout (`notifications/cancelled` was sent) |
//! | `mcp_protocol_error` | the server answered with a JSON-RPC error |
//! | `mcp_transport_error` | the transport failed (an HTTP connection failure or error status) |
//! | `mcp_tool_error` | the result had `isError: true` |
//! | `mcp_result_invalid` | the result is malformed or not I-JSON (a repeated member name, a lone surrogate, an inexact number), or its `structuredContent` is missing or fails the output schema |
//! | `mcp_result_unsupported` | the result holds media, resource contents or links, or the tool requires tasks |
//! | `mcp_result_too_large` | the result exceeds `max_result_bytes` or `max_content_blocks` |
//!
//! Discovery fails with these too, and with:
//!
//! | code | when |
//! |---|---|
//! | `mcp_config_invalid` | limits outside their allowed range, or invalid bindings |
//! | `mcp_protocol_version_unsupported` | the negotiated revision is not one the adapter supports |
//! | `mcp_catalog_too_large` | more pages, tools or bytes than the limits allow |
//! | `mcp_tool_missing` | a selected remote tool is not in the server's list |
//! | `mcp_catalog_ambiguous` | the server's list names a selected remote tool more than once (no copy is picked) |
//! | `mcp_schema_unsupported` | a selected tool's schema is outside `purra.output-schema/v1` (never stripped, never fetched) |
//! | `mcp_schema_too_large` | a selected tool's schema exceeds `max_schema_bytes` |
//! | `mcp_description_too_large` | a selected tool's description exceeds `max_description_bytes` |
//!
//! A cancelled run's call ends with Core's `run_cancelled`.

use purra_core::ErrorCode;

macro_rules! codes {
    ($($(#[$doc:meta])* $name:ident = $text:literal;)*) => {
        $($(#[$doc])* pub fn $name() -> ErrorCode {
            ErrorCode::new($text).expect("adapter codes match the code pattern")
        })*
        /// Every code of this module.
        pub fn all() -> Vec<ErrorCode> {
            vec![$($name()),*]
        }
    };
}

codes! {
    /// `mcp_invalid_arguments`.
    invalid_arguments = "mcp_invalid_arguments";
    /// `scope_denied`: Core's code ([`ErrorCode::SCOPE_DENIED`]), so a scope refusal has one
    /// code wherever it is made.
    scope_denied = "scope_denied";
    /// `mcp_catalog_stale`.
    catalog_stale = "mcp_catalog_stale";
    /// `mcp_catalog_changed`: a pinned tool's listing differs from its pin.
    catalog_changed = "mcp_catalog_changed";
    /// `mcp_tool_removed`: a pinned tool is no longer listed.
    tool_removed = "mcp_tool_removed";
    /// `mcp_connection_closed`.
    connection_closed = "mcp_connection_closed";
    /// `mcp_timeout`.
    timeout = "mcp_timeout";
    /// `mcp_protocol_error`.
    protocol_error = "mcp_protocol_error";
    /// `mcp_transport_error`.
    transport_error = "mcp_transport_error";
    /// `mcp_tool_error`.
    tool_error = "mcp_tool_error";
    /// `mcp_result_invalid`.
    result_invalid = "mcp_result_invalid";
    /// `mcp_result_unsupported`.
    result_unsupported = "mcp_result_unsupported";
    /// `mcp_result_too_large`.
    result_too_large = "mcp_result_too_large";
    /// `mcp_config_invalid`.
    config_invalid = "mcp_config_invalid";
    /// `mcp_protocol_version_unsupported`.
    protocol_version_unsupported = "mcp_protocol_version_unsupported";
    /// `mcp_catalog_too_large`.
    catalog_too_large = "mcp_catalog_too_large";
    /// `mcp_tool_missing`.
    tool_missing = "mcp_tool_missing";
    /// `mcp_catalog_ambiguous`.
    catalog_ambiguous = "mcp_catalog_ambiguous";
    /// `mcp_schema_unsupported`.
    schema_unsupported = "mcp_schema_unsupported";
    /// `mcp_schema_too_large`.
    schema_too_large = "mcp_schema_too_large";
    /// `mcp_description_too_large`.
    description_too_large = "mcp_description_too_large";
}
