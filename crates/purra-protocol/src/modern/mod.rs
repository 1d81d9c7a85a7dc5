//! The 2026-07-28 revision ("modern"): no handshake, every request carries its protocol version
//! and client capabilities in `params._meta`, every result carries `resultType`, server-to-client
//! requests become `input_required` results (multi round-trip requests), and change notifications
//! arrive on `subscriptions/listen`.
//!
//! This module holds what both sides share: the reserved `_meta` keys and methods, the wire types
//! the revision adds ([`DiscoverResult`], [`SubscriptionFilter`], [`InputRequest`],
//! [`InputResponse`], caching hints), the per-request envelope ([`envelope`]), the HTTP header
//! rules ([`headers`]) and the shaping of results ([`result`]).

pub mod envelope;
pub mod headers;
pub mod result;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::version::ProtocolVersion;

use crate::types::{
    ClientCapabilities, CreateMessageParams, CreateMessageResult, ElicitParams, ElicitResult,
    Implementation, JsonObject, ListRootsResult, ServerCapabilities,
};

/// The reserved `_meta` keys of the revision.
pub mod meta {
    /// The request's protocol version (required on every request).
    pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
    /// The client's name and version (should be on every request).
    pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
    /// The client's capabilities for this request (required on every request).
    pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
    /// The least severe log level the client wants for this request (absent: no log messages).
    pub const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
    /// The server's name and version, on results.
    pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
    /// The `subscriptions/listen` request a notification belongs to.
    pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
}

/// The methods the revision adds.
pub mod methods {
    /// `server/discover`: supported versions, capabilities and identity.
    pub const DISCOVER: &str = "server/discover";
    /// `subscriptions/listen`: a long-lived stream of change notifications.
    pub const SUBSCRIPTIONS_LISTEN: &str = "subscriptions/listen";
    /// `notifications/subscriptions/acknowledged`: the first message of a listen stream.
    pub const SUBSCRIPTIONS_ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";
}

/// The methods the revision removed; a modern request for one is answered -32601.
pub const REMOVED_METHODS: [&str; 5] = [
    crate::types::methods::INITIALIZE,
    crate::types::methods::PING,
    crate::types::methods::LOGGING_SET_LEVEL,
    crate::types::methods::RESOURCES_SUBSCRIBE,
    crate::types::methods::RESOURCES_UNSUBSCRIBE,
];

/// The methods whose result may be `input_required` (multi round-trip requests).
pub const INPUT_REQUIRED_METHODS: [&str; 3] = [
    crate::types::methods::TOOLS_CALL,
    crate::types::methods::PROMPTS_GET,
    crate::types::methods::RESOURCES_READ,
];

/// The methods whose complete results carry `ttlMs` and `cacheScope`.
pub const CACHEABLE_METHODS: [&str; 6] = [
    methods::DISCOVER,
    crate::types::methods::TOOLS_LIST,
    crate::types::methods::PROMPTS_LIST,
    crate::types::methods::RESOURCES_LIST,
    crate::types::methods::RESOURCES_TEMPLATES_LIST,
    crate::types::methods::RESOURCES_READ,
];

/// `resultType` of a result that completes its request.
pub const RESULT_COMPLETE: &str = "complete";
/// `resultType` of a result asking the client for input before it retries.
pub const RESULT_INPUT_REQUIRED: &str = "input_required";

/// Who may keep a cached result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum CacheScope {
    /// The result holds nothing user-specific: any cache may share it.
    Public,
    /// The result may be reused only within the authorization context that produced it.
    Private,
}

impl std::fmt::Display for CacheScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CacheScope::Public => "public",
            CacheScope::Private => "private",
        })
    }
}

/// A freshness hint a server puts on a cacheable result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheHint {
    /// How long, in milliseconds, the result may be considered fresh (0: immediately stale).
    pub ttl_ms: u64,
    /// Who may keep it.
    pub scope: CacheScope,
}

impl CacheHint {
    /// A hint of `ttl_ms` milliseconds with `scope`.
    pub fn new(ttl_ms: u64, scope: CacheScope) -> Self {
        CacheHint { ttl_ms, scope }
    }
}

impl Default for CacheHint {
    /// Immediately stale and private: what a server claims when it promises nothing.
    fn default() -> Self {
        CacheHint {
            ttl_ms: 0,
            scope: CacheScope::Private,
        }
    }
}

/// The `server/discover` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscoverResult {
    /// The protocol versions the server serves on the modern path.
    pub supported_versions: Vec<String>,
    /// The server's capabilities.
    #[serde(default)]
    pub capabilities: ServerCapabilities,
    /// Instructions for the model, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Freshness of this result, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<i64>,
    /// Who may cache this result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_scope: Option<CacheScope>,
    /// Metadata; `io.modelcontextprotocol/serverInfo` names the server.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

impl DiscoverResult {
    /// The server's name and version from `_meta`, if it sent them.
    pub fn server_info(&self) -> Option<Implementation> {
        self.meta
            .as_ref()
            .and_then(|m| m.get(meta::SERVER_INFO))
            .and_then(|v| serde_json::from_value(v.clone()).ok())
    }
}

/// Which notifications a `subscriptions/listen` stream carries. Every type is opt-in.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionFilter {
    /// `notifications/tools/list_changed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools_list_changed: Option<bool>,
    /// `notifications/prompts/list_changed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts_list_changed: Option<bool>,
    /// `notifications/resources/list_changed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources_list_changed: Option<bool>,
    /// `notifications/resources/updated` for these URIs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_subscriptions: Option<Vec<String>>,
    /// `notifications/tasks` for these tasks (the `io.modelcontextprotocol/tasks` extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_ids: Option<Vec<String>>,
}

impl SubscriptionFilter {
    /// Whether the filter asks for nothing.
    pub fn is_empty(&self) -> bool {
        self.tools_list_changed != Some(true)
            && self.prompts_list_changed != Some(true)
            && self.resources_list_changed != Some(true)
            && self
                .resource_subscriptions
                .as_ref()
                .is_none_or(|v| v.is_empty())
            && self.task_ids.as_ref().is_none_or(|v| v.is_empty())
    }
}

/// `subscriptions/listen` params (besides `_meta`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ListenParams {
    /// The notifications asked for.
    #[serde(default)]
    pub notifications: SubscriptionFilter,
}

/// What a server asks of the client inside an `input_required` result.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum InputRequest {
    /// `elicitation/create`.
    Elicit(ElicitParams),
    /// `sampling/createMessage`.
    Sample(CreateMessageParams),
    /// `roots/list`.
    ListRoots,
}

impl InputRequest {
    /// The method this input request stands for.
    pub fn method(&self) -> &'static str {
        match self {
            InputRequest::Elicit(_) => crate::types::methods::ELICITATION_CREATE,
            InputRequest::Sample(_) => crate::types::methods::SAMPLING_CREATE_MESSAGE,
            InputRequest::ListRoots => crate::types::methods::ROOTS_LIST,
        }
    }

    /// The client capability this request needs (`elicitation`, `sampling` or `roots`).
    pub fn capability(&self) -> &'static str {
        match self {
            InputRequest::Elicit(_) => "elicitation",
            InputRequest::Sample(_) => "sampling",
            InputRequest::ListRoots => "roots",
        }
    }

    /// Whether `caps` declares what this request needs (URL-mode elicitation needs `url`).
    pub fn declared_by(&self, caps: &ClientCapabilities) -> bool {
        match self {
            InputRequest::Elicit(p) => match &caps.elicitation {
                None => false,
                Some(e) if p.is_url_mode() => e.contains_key("url"),
                Some(_) => true,
            },
            InputRequest::Sample(_) => caps.sampling.is_some(),
            InputRequest::ListRoots => caps.roots.is_some(),
        }
    }

    /// The wire form: `{"method": ..., "params": ...}`.
    pub fn to_value(&self) -> Value {
        let params = match self {
            InputRequest::Elicit(p) => serde_json::to_value(p).expect("params serialize"),
            InputRequest::Sample(p) => serde_json::to_value(p).expect("params serialize"),
            InputRequest::ListRoots => Value::Object(JsonObject::new()),
        };
        serde_json::json!({ "method": self.method(), "params": params })
    }

    /// Reads the wire form; an unknown method or malformed params is an error naming why.
    pub fn from_value(v: &Value) -> Result<InputRequest, String> {
        let method = v
            .get("method")
            .and_then(Value::as_str)
            .ok_or("an input request needs a string method")?;
        let params = v
            .get("params")
            .cloned()
            .unwrap_or(Value::Object(JsonObject::new()));
        match method {
            crate::types::methods::ELICITATION_CREATE => serde_json::from_value(params)
                .map(InputRequest::Elicit)
                .map_err(|e| format!("invalid elicitation/create params: {e}")),
            crate::types::methods::SAMPLING_CREATE_MESSAGE => serde_json::from_value(params)
                .map(InputRequest::Sample)
                .map_err(|e| format!("invalid sampling/createMessage params: {e}")),
            crate::types::methods::ROOTS_LIST => Ok(InputRequest::ListRoots),
            other => Err(format!("unsupported input request method {other:?}")),
        }
    }
}

/// The client's answer to one [`InputRequest`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum InputResponse {
    /// An `elicitation/create` result.
    Elicit(ElicitResult),
    /// A `sampling/createMessage` result.
    Sample(CreateMessageResult),
    /// A `roots/list` result.
    Roots(ListRootsResult),
}

impl InputResponse {
    /// The wire form (the plain result object).
    pub fn to_value(&self) -> Value {
        match self {
            InputResponse::Elicit(r) => serde_json::to_value(r),
            InputResponse::Sample(r) => serde_json::to_value(r),
            InputResponse::Roots(r) => serde_json::to_value(r),
        }
        .expect("results serialize")
    }

    /// Reads the answer to `request` from its wire form.
    pub fn from_value(request: &InputRequest, v: Value) -> Result<InputResponse, String> {
        match request {
            InputRequest::Elicit(_) => serde_json::from_value(v)
                .map(InputResponse::Elicit)
                .map_err(|e| format!("not an elicitation result: {e}")),
            InputRequest::Sample(_) => serde_json::from_value(v)
                .map(InputResponse::Sample)
                .map_err(|e| format!("not a sampling result: {e}")),
            InputRequest::ListRoots => serde_json::from_value(v)
                .map(InputResponse::Roots)
                .map_err(|e| format!("not a roots/list result: {e}")),
        }
    }
}

/// Raw JSON of a value that always serializes (purra's own types, JSON values, strings).
pub(crate) fn raw<T: Serialize + ?Sized>(v: &T) -> Box<serde_json::value::RawValue> {
    serde_json::value::to_raw_value(v).expect("purra's own values serialize to JSON")
}

#[cfg(any(feature = "server", feature = "client"))]
/// Writes `v` as canonical JSON: object keys sorted, no whitespace. What the revision's digests
/// (requestState bindings, input request identities) are computed over, whatever map order the
/// build's serde_json uses.
pub(crate) fn canonical_json(v: &Value) -> String {
    fn write(v: &Value, out: &mut String) {
        match v {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::to_string(k).expect("strings serialize"));
                    out.push(':');
                    write(&map[k], out);
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(item, out);
                }
                out.push(']');
            }
            other => out.push_str(&serde_json::to_string(other).expect("scalars serialize")),
        }
    }
    let mut out = String::new();
    write(v, &mut out);
    out
}

/// SHA-256 of `bytes`, base64url without padding, cut to `n` bytes of digest.
#[cfg(feature = "server")]
pub(crate) fn short_digest(bytes: &[u8], n: usize) -> String {
    use base64::Engine as _;
    let d = ring::digest::digest(&ring::digest::SHA256, bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&d.as_ref()[..n.min(32)])
}

/// Whether `v` names a modern revision purra speaks.
pub(crate) fn is_modern(v: &str) -> bool {
    ProtocolVersion::MODERN.iter().any(|k| k.as_str() == v)
}

/// Whether `v` names a handshake revision purra speaks.
#[cfg(any(feature = "client", feature = "http-server"))]
pub(crate) fn is_handshake(v: &str) -> bool {
    ProtocolVersion::HANDSHAKE.iter().any(|k| k.as_str() == v)
}

/// The newest modern revision purra speaks.
#[cfg(feature = "client")]
pub(crate) fn newest_modern() -> &'static str {
    ProtocolVersion::MODERN[ProtocolVersion::MODERN.len() - 1].as_str()
}

/// The modern revisions purra speaks, oldest first, as written on the wire.
pub(crate) fn modern_versions() -> Vec<String> {
    ProtocolVersion::MODERN
        .iter()
        .map(|v| v.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_json_sorts_keys_at_every_depth() {
        let v = serde_json::json!({"b": [ {"z": 1, "a": null} ], "a": "x"});
        assert_eq!(canonical_json(&v), r#"{"a":"x","b":[{"a":null,"z":1}]}"#);
    }

    #[test]
    fn input_requests_round_trip_their_wire_form() {
        let r = InputRequest::ListRoots;
        assert_eq!(
            r.to_value(),
            serde_json::json!({"method": "roots/list", "params": {}})
        );
        assert_eq!(InputRequest::from_value(&r.to_value()), Ok(r));
        assert_eq!(
            InputRequest::from_value(&serde_json::json!({"method": "ping"})),
            Err("unsupported input request method \"ping\"".to_owned())
        );
    }

    #[test]
    fn an_empty_filter_asks_for_nothing() {
        assert!(SubscriptionFilter::default().is_empty());
        let f = SubscriptionFilter {
            resource_subscriptions: Some(vec!["a://b".into()]),
            ..Default::default()
        };
        assert!(!f.is_empty());
    }
}
