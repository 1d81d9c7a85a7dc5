//! The per-request envelope of the modern revision: what `params._meta` must carry, how it is
//! read, and the validation ladder a server runs before a request reaches its handler.
//!
//! The ladder, first failure wins: the envelope is present with its two required keys (-32602),
//! on HTTP the headers agree with the body (-32020), the version is a string the server serves
//! (-32602, then -32022 naming the supported versions), the capabilities are an object (-32602).

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::{headers, meta};
use crate::jsonrpc::{ErrorObject, RpcErrorCode};
use crate::types::{ClientCapabilities, Implementation, LoggingLevel, ProgressToken};

/// What a modern request declares about itself in `params._meta`.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestEnvelope {
    /// The protocol version of this request.
    pub protocol_version: String,
    /// The client's name and version, when it sent them.
    pub client_info: Option<Implementation>,
    /// The client's capabilities for this request.
    pub client_capabilities: ClientCapabilities,
    /// The least severe log level the client wants; `None`: no log messages for this request.
    pub log_level: Option<LoggingLevel>,
    /// The progress token, when the client asked for progress.
    pub progress_token: Option<ProgressToken>,
}

/// The `_meta` members the envelope reads, kept raw until each is checked.
#[derive(Deserialize, Default)]
struct MetaFields<'a> {
    #[serde(borrow, default, rename = "io.modelcontextprotocol/protocolVersion")]
    protocol_version: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "io.modelcontextprotocol/clientInfo")]
    client_info: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "io.modelcontextprotocol/clientCapabilities")]
    client_capabilities: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "io.modelcontextprotocol/logLevel")]
    log_level: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "progressToken")]
    progress_token: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct ParamsMeta<'a> {
    #[serde(borrow, default, rename = "_meta")]
    meta: Option<&'a RawValue>,
}

/// Whether `params._meta` carries the modern protocol-version key: the sign of a modern request
/// (legacy requests never carry it; a bare `_meta` with a progress token is not a sign).
pub fn has_modern_envelope(params: Option<&RawValue>) -> bool {
    let Some(p) = params else { return false };
    let Ok(ParamsMeta { meta: Some(m) }) = serde_json::from_str::<ParamsMeta<'_>>(p.get()) else {
        return false;
    };
    matches!(
        serde_json::from_str::<MetaFields<'_>>(m.get()),
        Ok(MetaFields {
            protocol_version: Some(_),
            ..
        })
    )
}

/// The HTTP facts the ladder checks on Streamable HTTP (absent on stdio and WebSocket).
#[derive(Debug, Clone, Default)]
pub struct HttpFacts {
    /// `MCP-Protocol-Version`.
    pub protocol_version: Option<String>,
    /// `Mcp-Method`.
    pub method: Option<String>,
    /// `Mcp-Name`, as sent (possibly base64-wrapped).
    pub name: Option<String>,
    /// Every `Mcp-Param-*` header, name lowercased, as sent (possibly base64-wrapped).
    pub params: Vec<(String, String)>,
    /// A routing header (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`) sent more than once.
    pub duplicated: Option<String>,
}

fn invalid_params(message: impl Into<String>) -> ErrorObject {
    ErrorObject::new(RpcErrorCode::INVALID_PARAMS, message)
}

fn header_mismatch(message: impl Into<String>) -> ErrorObject {
    ErrorObject::new(RpcErrorCode::HEADER_MISMATCH, message)
}

/// -32022 naming the versions served on the modern path and echoing `requested`.
pub fn unsupported_version(requested: &str) -> ErrorObject {
    ErrorObject::new(
        RpcErrorCode::UNSUPPORTED_PROTOCOL_VERSION,
        "Unsupported protocol version",
    )
    .with_data(
        serde_json::to_value(UnsupportedVersionData {
            supported: super::modern_versions(),
            requested: requested.to_owned(),
        })
        .expect("data serializes"),
    )
}

/// The data of -32022: the version asked for and the versions served.
///
/// The fields are in name order, so the data reads the same whether or not serde_json keeps
/// insertion order (its `preserve_order` feature, which another crate in a build may turn on).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize)]
pub struct UnsupportedVersionData {
    /// The version the request asked for.
    pub requested: String,
    /// The versions the server serves (on the modern path).
    pub supported: Vec<String>,
}

/// Runs the ladder over one request: `method`, its raw `params`, and on HTTP its headers.
pub fn classify(
    method: &str,
    params: Option<&RawValue>,
    http: Option<&HttpFacts>,
) -> Result<RequestEnvelope, ErrorObject> {
    let missing = || {
        invalid_params(format!(
            "Invalid params: params._meta must be an object carrying {:?} and {:?}",
            meta::PROTOCOL_VERSION,
            meta::CLIENT_CAPABILITIES
        ))
    };
    let raw_meta = params
        .and_then(|p| serde_json::from_str::<ParamsMeta<'_>>(p.get()).ok())
        .and_then(|p| p.meta)
        .ok_or_else(missing)?;
    let fields: MetaFields<'_> = serde_json::from_str(raw_meta.get()).map_err(|_| missing())?;
    let (Some(version_raw), Some(caps_raw)) = (fields.protocol_version, fields.client_capabilities)
    else {
        let mut absent = Vec::new();
        if fields.protocol_version.is_none() {
            absent.push(meta::PROTOCOL_VERSION);
        }
        if fields.client_capabilities.is_none() {
            absent.push(meta::CLIENT_CAPABILITIES);
        }
        return Err(invalid_params(format!(
            "Invalid params: params._meta is missing the required key(s): {}",
            absent.join(", ")
        )));
    };
    let version: Option<String> = serde_json::from_str(version_raw.get()).ok();
    if let Some(h) = http {
        check_headers(method, params, version.as_deref(), h)?;
    }
    let Some(version) = version else {
        return Err(invalid_params(format!(
            "Invalid params: {} must be a string",
            meta::PROTOCOL_VERSION
        )));
    };
    if !super::is_modern(&version) {
        return Err(unsupported_version(&version));
    }
    // An object reads straight into its type; anything else (or an object that does not read)
    // goes the long way, which words the error.
    let quick = caps_raw
        .get()
        .starts_with('{')
        .then(|| serde_json::from_str::<ClientCapabilities>(caps_raw.get()).ok())
        .flatten();
    let client_capabilities: ClientCapabilities = match quick {
        Some(c) => c,
        None => match serde_json::from_str::<Value>(caps_raw.get()) {
            Ok(v @ Value::Object(_)) => serde_json::from_value(v).map_err(|e| {
                invalid_params(format!(
                    "Invalid params: {} is malformed: {e}",
                    meta::CLIENT_CAPABILITIES
                ))
            })?,
            _ => {
                return Err(invalid_params(format!(
                    "Invalid params: {} must be an object",
                    meta::CLIENT_CAPABILITIES
                )))
            }
        },
    };
    // clientInfo is a SHOULD: a malformed one is treated as absent, never a reason to refuse.
    let client_info = fields
        .client_info
        .and_then(|r| serde_json::from_str::<Implementation>(r.get()).ok());
    let log_level = match fields.log_level {
        None => None,
        Some(r) if r.get() == "null" => None,
        Some(r) => Some(serde_json::from_str::<LoggingLevel>(r.get()).map_err(|_| {
            invalid_params(format!(
                "Invalid params: {} must be a log level",
                meta::LOG_LEVEL
            ))
        })?),
    };
    let progress_token = fields
        .progress_token
        .and_then(|r| serde_json::from_str::<ProgressToken>(r.get()).ok());
    Ok(RequestEnvelope {
        protocol_version: version,
        client_info,
        client_capabilities,
        log_level,
        progress_token,
    })
}

/// The string member `key` of a params object, as `Value::get(key).as_str()` would give it,
/// without building a `Value` when the object reads as plain members (the last of duplicate
/// keys wins either way).
fn string_member(params: &RawValue, key: &str) -> Option<String> {
    struct Seek<'k>(&'k str);
    impl<'de> serde::de::Visitor<'de> for Seek<'_> {
        type Value = Option<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            let mut found = None;
            while let Some(k) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                if k == self.0 {
                    let v: &RawValue = map.next_value()?;
                    found = serde_json::from_str::<String>(v.get()).ok();
                } else {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
            Ok(found)
        }
    }
    use serde::Deserializer as _;
    let mut de = serde_json::Deserializer::from_str(params.get());
    de.deserialize_map(Seek(key)).ok().flatten()
}

/// The HTTP rung: `MCP-Protocol-Version` equals the envelope's version, `Mcp-Method` the body's
/// method, and `Mcp-Name` (decoded) the body's name or URI for the methods that have one.
fn check_headers(
    method: &str,
    params: Option<&RawValue>,
    version: Option<&str>,
    h: &HttpFacts,
) -> Result<(), ErrorObject> {
    if let Some(name) = &h.duplicated {
        return Err(header_mismatch(format!(
            "Header mismatch: the {name} header appears more than once"
        )));
    }
    match (&h.protocol_version, version) {
        (None, _) => {
            return Err(header_mismatch(
                "Header mismatch: the MCP-Protocol-Version header is missing",
            ))
        }
        (Some(hv), Some(bv)) if hv == bv => {}
        (Some(hv), _) => {
            return Err(header_mismatch(format!(
                "Header mismatch: MCP-Protocol-Version header value {hv:?} does not match the body's {}",
                meta::PROTOCOL_VERSION
            )))
        }
    }
    match &h.method {
        None => {
            return Err(header_mismatch(
                "Header mismatch: the Mcp-Method header is missing",
            ))
        }
        Some(m) if m == method => {}
        Some(m) => {
            return Err(header_mismatch(format!(
            "Header mismatch: Mcp-Method header value {m:?} does not match body value {method:?}"
        )))
        }
    }
    if let Some(key) = headers::name_param(method) {
        let body_value = params.and_then(|p| string_member(p, key));
        if let Some(body_value) = body_value {
            match &h.name {
                None => {
                    return Err(header_mismatch(
                        "Header mismatch: the Mcp-Name header is missing",
                    ))
                }
                Some(raw) => match headers::decode_value(raw) {
                    Some(decoded) if decoded == body_value => {}
                    Some(decoded) => {
                        return Err(header_mismatch(format!(
                            "Header mismatch: Mcp-Name header value {decoded:?} does not match body value {body_value:?}"
                        )))
                    }
                    None => {
                        return Err(header_mismatch(
                            "Header mismatch: the Mcp-Name header carries a malformed value",
                        ))
                    }
                },
            }
        }
    }
    Ok(())
}

/// Builds the `_meta` a modern client puts on a request.
pub fn request_meta(
    protocol_version: &str,
    client_info: &Implementation,
    capabilities: &ClientCapabilities,
    log_level: Option<LoggingLevel>,
) -> crate::types::JsonObject {
    let mut m = crate::types::JsonObject::new();
    m.insert(meta::PROTOCOL_VERSION.into(), Value::from(protocol_version));
    m.insert(
        meta::CLIENT_INFO.into(),
        serde_json::to_value(client_info).expect("implementation serializes"),
    );
    m.insert(
        meta::CLIENT_CAPABILITIES.into(),
        serde_json::to_value(capabilities).expect("capabilities serialize"),
    );
    if let Some(level) = log_level {
        m.insert(
            meta::LOG_LEVEL.into(),
            serde_json::to_value(level).expect("levels serialize"),
        );
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_owned()).unwrap()
    }

    const OK: &str = r#"{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},"io.modelcontextprotocol/logLevel":"info","progressToken":7}}"#;

    #[test]
    fn a_string_member_reads_as_a_value_would() {
        let member = |s: &str, k: &str| {
            let v: Value = serde_json::from_str(s).unwrap();
            let expected = v.get(k).and_then(Value::as_str).map(str::to_owned);
            assert_eq!(string_member(&raw(s), k), expected, "{s}");
            expected
        };
        assert_eq!(member(r#"{"name":"t"}"#, "name").as_deref(), Some("t"));
        assert_eq!(
            member(r#"{"na\u006de":"t\n"}"#, "name").as_deref(),
            Some("t\n")
        );
        assert_eq!(
            member(r#"{"name":"a","name":"b"}"#, "name").as_deref(),
            Some("b")
        );
        assert_eq!(member(r#"{"name":"a","name":5}"#, "name"), None);
        assert_eq!(member(r#"{"uri":"x"}"#, "name"), None);
        assert_eq!(member(r#"["name"]"#, "name"), None);
    }

    #[test]
    fn capabilities_read_the_same_by_either_path() {
        let caps = |c: &str| {
            let params = OK.replace(r#"{"sampling":{}}"#, c);
            classify("tools/call", Some(&raw(&params)), None).map(|e| e.client_capabilities)
        };
        assert!(caps(r#"{"elicitation":{}}"#).unwrap().elicitation.is_some());
        // A duplicate key goes the long way: the last one wins, as it did.
        let dup = caps(r#"{"sampling":null,"sampling":{}}"#).unwrap();
        assert!(dup.sampling.is_some());
        assert!(caps("[]")
            .unwrap_err()
            .message
            .ends_with("clientCapabilities must be an object"));
    }

    #[test]
    fn a_complete_envelope_is_read() {
        let e = classify("tools/call", Some(&raw(OK)), None).unwrap();
        assert_eq!(e.protocol_version, "2026-07-28");
        assert!(e.client_capabilities.sampling.is_some());
        assert_eq!(e.client_info, Some(Implementation::new("c", "1")));
        assert_eq!(e.log_level, Some(LoggingLevel::Info));
        assert_eq!(e.progress_token, Some(ProgressToken::Number(7)));
        assert!(has_modern_envelope(Some(&raw(OK))));
        assert!(!has_modern_envelope(Some(&raw(
            r#"{"_meta":{"progressToken":1}}"#
        ))));
    }

    #[test]
    fn the_ladder_answers_with_the_revisions_codes() {
        let e = classify("tools/list", None, None).unwrap_err();
        assert_eq!(e.code, RpcErrorCode::INVALID_PARAMS);
        let e = classify(
            "tools/list",
            Some(&raw(
                r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#,
            )),
            None,
        )
        .unwrap_err();
        assert_eq!(
            e.message,
            "Invalid params: params._meta is missing the required key(s): io.modelcontextprotocol/clientCapabilities"
        );
        let e = classify(
            "tools/list",
            Some(&raw(
                r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"1999-01-01","io.modelcontextprotocol/clientCapabilities":{}}}"#,
            )),
            None,
        )
        .unwrap_err();
        assert_eq!(e.code, RpcErrorCode::UNSUPPORTED_PROTOCOL_VERSION);
        assert_eq!(
            e.data,
            Some(serde_json::json!({"supported": ["2026-07-28"], "requested": "1999-01-01"}))
        );
    }

    #[test]
    fn headers_must_agree_with_the_body() {
        let facts = HttpFacts {
            protocol_version: Some("2026-07-28".into()),
            method: Some("tools/call".into()),
            name: Some("=?base64?dA==?=".into()),
            ..Default::default()
        };
        assert!(classify("tools/call", Some(&raw(OK)), Some(&facts)).is_ok());
        let wrong = HttpFacts {
            name: Some("u".into()),
            ..facts.clone()
        };
        let e = classify("tools/call", Some(&raw(OK)), Some(&wrong)).unwrap_err();
        assert_eq!(e.code, RpcErrorCode::HEADER_MISMATCH);
        assert_eq!(
            e.message,
            "Header mismatch: Mcp-Name header value \"u\" does not match body value \"t\""
        );
        let no_version = HttpFacts {
            protocol_version: None,
            ..facts
        };
        let e = classify("tools/call", Some(&raw(OK)), Some(&no_version)).unwrap_err();
        assert_eq!(e.code, RpcErrorCode::HEADER_MISMATCH);
    }
}
