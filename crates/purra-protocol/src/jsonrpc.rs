//! JSON-RPC 2.0 framing: request ids, error objects, and one-pass decoding of inbound frames.
//!
//! A frame is decoded once into a [`Message`] whose `params` / `result` stay raw JSON
//! ([`RawValue`]); handlers deserialize typed params themselves. Nothing here tries every
//! message type in turn, and nothing goes through [`serde_json::Value`] on the hot path.

use std::fmt;
use std::sync::Arc;

use serde::de::{self, Deserializer, IgnoredAny, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// A JSON-RPC request id: a string or an integer, never null.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RequestId {
    /// An integer id.
    Number(i64),
    /// A string id.
    String(Arc<str>),
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestId::Number(n) => write!(f, "{n}"),
            RequestId::String(s) => write!(f, "{s:?}"),
        }
    }
}

impl From<i64> for RequestId {
    fn from(n: i64) -> Self {
        RequestId::Number(n)
    }
}

impl From<&str> for RequestId {
    fn from(s: &str) -> Self {
        RequestId::String(Arc::from(s))
    }
}

impl Serialize for RequestId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            RequestId::Number(n) => s.serialize_i64(*n),
            RequestId::String(v) => s.serialize_str(v),
        }
    }
}

impl<'de> Deserialize<'de> for RequestId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct IdVisitor;
        impl Visitor<'_> for IdVisitor {
            type Value = RequestId;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or an integer")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RequestId, E> {
                Ok(RequestId::Number(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RequestId, E> {
                i64::try_from(v)
                    .map(RequestId::Number)
                    .map_err(|_| E::custom("integer id out of range"))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RequestId, E> {
                Ok(RequestId::String(Arc::from(v)))
            }
        }
        d.deserialize_any(IdVisitor)
    }
}

/// A JSON-RPC error code. Open: MCP and applications add their own. (Named apart from
/// purra-core's `ErrorCode`, the sanitized string codes a model sees.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RpcErrorCode(pub i32);

impl RpcErrorCode {
    /// Invalid JSON was received.
    pub const PARSE_ERROR: RpcErrorCode = RpcErrorCode(-32700);
    /// The JSON sent is not a valid request object.
    pub const INVALID_REQUEST: RpcErrorCode = RpcErrorCode(-32600);
    /// The method does not exist or is not available.
    pub const METHOD_NOT_FOUND: RpcErrorCode = RpcErrorCode(-32601);
    /// Invalid method parameters.
    pub const INVALID_PARAMS: RpcErrorCode = RpcErrorCode(-32602);
    /// Internal error.
    pub const INTERNAL_ERROR: RpcErrorCode = RpcErrorCode(-32603);
    /// MCP: the resource does not exist (2025 revisions).
    pub const RESOURCE_NOT_FOUND: RpcErrorCode = RpcErrorCode(-32002);
    /// MCP 2025-11-25: a URL-mode elicitation is required before the request can proceed.
    pub const URL_ELICITATION_REQUIRED: RpcErrorCode = RpcErrorCode(-32042);
    /// MCP 2026-07-28: the HTTP headers do not match the body, or a required header is missing.
    pub const HEADER_MISMATCH: RpcErrorCode = RpcErrorCode(-32020);
    /// MCP 2026-07-28: the request needs a client capability the request did not declare.
    pub const MISSING_REQUIRED_CLIENT_CAPABILITY: RpcErrorCode = RpcErrorCode(-32021);
    /// MCP 2026-07-28: the request's protocol version is not served (data names those that are).
    pub const UNSUPPORTED_PROTOCOL_VERSION: RpcErrorCode = RpcErrorCode(-32022);
}

impl fmt::Display for RpcErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The `error` member of a JSON-RPC error response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    /// The error code.
    pub code: RpcErrorCode,
    /// A short description.
    pub message: String,
    /// Additional information, as the sender gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
}

impl ErrorObject {
    /// An error with a code and a message and no data.
    pub fn new(code: RpcErrorCode, message: impl Into<String>) -> Self {
        ErrorObject {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// Attaches `data`.
    pub fn with_data(mut self, data: serde_json::Value) -> Self {
        self.data = Some(data);
        self
    }

    /// -32602 with a message.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(RpcErrorCode::INVALID_PARAMS, message)
    }

    /// -32603 with a message.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(RpcErrorCode::INTERNAL_ERROR, message)
    }

    /// -32601 naming the method.
    pub fn method_not_found(method: &str) -> Self {
        Self::new(
            RpcErrorCode::METHOD_NOT_FOUND,
            format!("Method not found: {method}"),
        )
    }
}

impl fmt::Display for ErrorObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JSON-RPC error {}: {}", self.code, self.message)
    }
}

impl std::error::Error for ErrorObject {}

/// One decoded inbound JSON-RPC message.
#[derive(Debug)]
pub enum Message {
    /// A request: it expects a response with the same id.
    Request {
        /// The request id.
        id: RequestId,
        /// The method name.
        method: String,
        /// The raw params, if any.
        params: Option<Box<RawValue>>,
    },
    /// A notification: no response.
    Notification {
        /// The method name.
        method: String,
        /// The raw params, if any.
        params: Option<Box<RawValue>>,
    },
    /// A successful response.
    Response {
        /// The id of the request it answers.
        id: RequestId,
        /// The raw result.
        result: Box<RawValue>,
    },
    /// An error response; `id` is `None` when the peer answered with `id: null`.
    Error {
        /// The id of the request it answers, if known.
        id: Option<RequestId>,
        /// The error.
        error: ErrorObject,
    },
}

/// Why a frame could not be decoded, with the answer the protocol requires.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeError {
    /// The id to answer with, when the frame was well-formed enough to carry one.
    pub id: Option<RequestId>,
    /// The error to answer with (-32700 or -32600), boxed so that a decoded frame's `Result`
    /// stays small (an `ErrorObject` holds a `serde_json::Value`, larger when another crate in
    /// the build turns on serde_json's `preserve_order`).
    pub error: Box<ErrorObject>,
}

impl DecodeError {
    fn parse(e: impl fmt::Display) -> Self {
        DecodeError {
            id: None,
            error: Box::new(ErrorObject::new(
                RpcErrorCode::PARSE_ERROR,
                format!("Parse error: {e}"),
            )),
        }
    }
    fn invalid(id: Option<RequestId>, why: impl Into<String>) -> Self {
        DecodeError {
            id,
            error: Box::new(ErrorObject::new(
                RpcErrorCode::INVALID_REQUEST,
                format!("Invalid request: {}", why.into()),
            )),
        }
    }
}

/// A frame is either one message or a batch (an array, allowed by 2025-03-26).
#[derive(Debug)]
pub enum Frame {
    /// A single message.
    Single(Result<Message, DecodeError>),
    /// A batch: each element decoded on its own.
    Batch(Vec<Result<Message, DecodeError>>),
}

/// The fields of an envelope; `id` is kept raw to tell `null` from absent.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    jsonrpc: Option<&'a RawValue>,
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(default)]
    method: Option<serde_json::Value>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

/// A map keyed by request id. The ids come from the peer, so the hash is seeded (per process);
/// every such map is bounded by an in-flight limit, and a seeded fast hash (foldhash) serves
/// there at a fraction of SipHash's cost per request.
pub(crate) type IdMap<V> = std::collections::HashMap<RequestId, V, foldhash::fast::RandomState>;

/// Decodes one frame (one line, one WebSocket text frame, one HTTP body).
pub fn decode_frame(bytes: &[u8]) -> Frame {
    // JSON text is UTF-8: a bad byte anywhere, even in a member nobody reads (serde_json skips
    // those unchecked), makes the frame not JSON. serde_json's own error says where. Checked
    // once, here: the frame is then parsed as `str`, which serde_json does not check again.
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            let error = match serde_json::from_slice::<serde_json::Value>(bytes) {
                Err(e) => DecodeError::parse(e),
                Ok(_) => DecodeError::parse(e),
            };
            return Frame::Single(Err(error));
        }
    };
    let first = text.bytes().find(|b| !b.is_ascii_whitespace());
    if first == Some(b'[') {
        let items: Vec<&RawValue> = match serde_json::from_str(text) {
            Ok(items) => items,
            Err(e) => return Frame::Single(Err(DecodeError::parse(e))),
        };
        if items.is_empty() {
            return Frame::Single(Err(DecodeError::invalid(None, "empty batch")));
        }
        return Frame::Batch(
            items
                .into_iter()
                .map(|raw| decode_value(raw.get(), true))
                .collect(),
        );
    }
    Frame::Single(decode_value(text, false))
}

/// Decodes one message; `in_json` says the text is already known to be JSON (a batch element,
/// read as part of a JSON array).
fn decode_value(text: &str, in_json: bool) -> Result<Message, DecodeError> {
    match decode_usual(text) {
        Some(message) => Ok(message),
        None => decode_general(text, in_json),
    }
}

/// [`decode_value`] the general way: the envelope's members in any order, every error worded.
fn decode_general(text: &str, in_json: bool) -> Result<Message, DecodeError> {
    // Syntax first: a frame that is not JSON at all is a parse error, whatever its shape. An
    // element of a batch is JSON by then: if serde_json still cannot read it (a number beyond a
    // double's range, which RFC 8259 lets a parser refuse), it is no JSON-RPC message (-32600),
    // never a parse error inside a batch that parsed (found by the fuzz target `frame`).
    let env: Envelope<'_> = match serde_json::from_str(text) {
        Ok(env) => env,
        Err(_) if in_json => return Err(DecodeError::invalid(None, "not a JSON-RPC object")),
        Err(e) if e.is_syntax() || e.is_eof() => return Err(DecodeError::parse(e)),
        Err(_) => {
            // Valid JSON of the wrong shape (not an object, or a field of a wrong type).
            return match serde_json::from_str::<IgnoredAny>(text) {
                Ok(_) => Err(DecodeError::invalid(None, "not a JSON-RPC object")),
                Err(e) => Err(DecodeError::parse(e)),
            };
        }
    };
    let id = match env.id {
        None => IdField::Absent,
        Some(raw) if raw.get() == "null" => IdField::Null,
        // The usual id, an integer, without a second parse (the text is JSON already, so what
        // `i64` reads here is exactly a JSON integer in range).
        Some(raw) => match raw
            .get()
            .parse::<i64>()
            .map(RequestId::Number)
            .or_else(|_| serde_json::from_str::<RequestId>(raw.get()))
        {
            Ok(id) => IdField::Id(id),
            Err(_) => {
                return Err(DecodeError::invalid(
                    None,
                    "id must be a string or an integer",
                ))
            }
        },
    };
    let known_id = match &id {
        IdField::Id(id) => Some(id.clone()),
        _ => None,
    };
    match env.jsonrpc.map(RawValue::get) {
        Some("\"2.0\"") => {}
        _ => return Err(DecodeError::invalid(known_id, "jsonrpc must be \"2.0\"")),
    }
    let params = env.params.map(RawValue::to_owned);
    if let Some(p) = &params {
        let c = p.get().as_bytes().first().copied();
        if c != Some(b'{') && c != Some(b'[') {
            return Err(DecodeError::invalid(
                known_id,
                "params must be an object or an array",
            ));
        }
    }
    if let Some(method) = env.method {
        let serde_json::Value::String(method) = method else {
            return Err(DecodeError::invalid(known_id, "method must be a string"));
        };
        if env.result.is_some() || env.error.is_some() {
            return Err(DecodeError::invalid(
                known_id,
                "a request carries no result or error",
            ));
        }
        return match id {
            IdField::Id(id) => Ok(Message::Request { id, method, params }),
            IdField::Absent => Ok(Message::Notification { method, params }),
            IdField::Null => Err(DecodeError::invalid(None, "id must not be null")),
        };
    }
    match (env.result, env.error) {
        (Some(result), None) => match id {
            IdField::Id(id) => Ok(Message::Response {
                id,
                result: result.to_owned(),
            }),
            _ => Err(DecodeError::invalid(None, "a response needs an id")),
        },
        (None, Some(error)) => {
            let error: ErrorObject = serde_json::from_value(error)
                .map_err(|_| DecodeError::invalid(known_id.clone(), "malformed error object"))?;
            match id {
                IdField::Absent | IdField::Null => Ok(Message::Error { id: None, error }),
                IdField::Id(id) => Ok(Message::Error {
                    id: Some(id),
                    error,
                }),
            }
        }
        (Some(_), Some(_)) => Err(DecodeError::invalid(
            known_id,
            "a response carries result or error, not both",
        )),
        (None, None) => Err(DecodeError::invalid(known_id, "missing method")),
    }
}

/// The usual request or notification, as purra's encoders and most peers write it, read in one
/// scan: exactly `{"jsonrpc":"2.0","id":N,"method":"M","params":P}` (the id an integer, or
/// absent for a notification; the method without escapes; the params an object or array, or
/// absent), perhaps followed by JSON whitespace. `None` for anything else, which the general
/// way reads (and words any error of); whatever this reads, the general way reads the same.
fn decode_usual(text: &str) -> Option<Message> {
    // Byte scans throughout (the bytes looked for are ASCII, so every split is at a character
    // boundary): on texts this short they cost a fraction of `str`'s searches.
    let end = text
        .bytes()
        .rposition(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))?;
    let rest = text[..=end].strip_prefix(r#"{"jsonrpc":"2.0","#)?;
    let (id, rest) = match rest.strip_prefix(r#""id":"#) {
        Some(rest) => {
            let end = rest.bytes().position(|b| b == b',')?;
            let (digits, rest) = rest.split_at(end);
            // A JSON integer (`-?(0|[1-9][0-9]*)`) within i64, as the general way reads it.
            let unsigned = digits.strip_prefix('-').unwrap_or(digits);
            let plain = match unsigned.as_bytes() {
                [b'0'] => true,
                [b'1'..=b'9', more @ ..] => more.iter().all(u8::is_ascii_digit),
                _ => false,
            };
            if !plain {
                return None;
            }
            (Some(digits.parse::<i64>().ok()?), &rest[1..])
        }
        None => (None, rest),
    };
    if let (Some(id), Some(result)) = (id, rest.strip_prefix(r#""result":"#)) {
        return usual_response(id, result);
    }
    let (method, rest) = plain_str(rest.strip_prefix(r#""method":""#)?)?;
    let params = if rest == "}" {
        None
    } else {
        let p = rest.strip_prefix(r#","params":"#)?;
        Some(last_value(p, |b| matches!(b, b'{' | b'['))?.to_owned())
    };
    let method = method.to_owned();
    Some(match id {
        Some(id) => Message::Request {
            id: RequestId::Number(id),
            method,
            params,
        },
        None => Message::Notification { method, params },
    })
}

/// The rest of the usual response, `R}` after `{"jsonrpc":"2.0","id":N,"result":`: `R` one JSON
/// value right after the colon (no whitespace before it) and not `null` (which the general way
/// reads as no result at all), the frame's last `}` closing the envelope, no member after it.
fn usual_response(id: i64, rest: &str) -> Option<Message> {
    let raw = last_value(rest, |b| !matches!(b, b'n' | b' ' | b'\t' | b'\n' | b'\r'))?;
    Some(Message::Response {
        id: RequestId::Number(id),
        result: raw.to_owned(),
    })
}

/// The value of an object's last member, `V}` after the member's colon: `V` one JSON value
/// whose first byte `first` admits, followed by nothing but whitespace before the text's last
/// `}` (serde_json checks the trailing bytes), so that `}` closes the object and no member
/// follows. `None` otherwise (the one-scan reads then leave the text to the general way).
pub(crate) fn last_value(rest: &str, first: impl Fn(u8) -> bool) -> Option<&RawValue> {
    let value = rest.strip_suffix('}')?;
    if !first(*value.as_bytes().first()?) {
        return None;
    }
    serde_json::from_str(value).ok()
}

/// A JSON string without escapes or control characters (whose text is its value) at the start
/// of `rest`, which follows its opening quote: its text, and what follows its closing quote.
/// `None` when the string has an escape or a control character, or does not end.
pub(crate) fn plain_str(rest: &str) -> Option<(&str, &str)> {
    let end = rest
        .bytes()
        .position(|b| b == b'"' || b == b'\\' || b < 0x20)?;
    (rest.as_bytes()[end] == b'"').then(|| (&rest[..end], &rest[end + 1..]))
}

enum IdField {
    Absent,
    Null,
    Id(RequestId),
}

// The encoders write the envelope's fixed bytes directly: the same compact JSON serde_json's map
// serializer writes (member order `jsonrpc`, `id`, `method`/`result`, `params`), without escaping
// constant keys again for every message. Ids and methods still go through serde_json.

/// Writes `id` as JSON (an integer, or an escaped string).
fn put_id(out: &mut Vec<u8>, id: &RequestId) {
    serde_json::to_writer(&mut *out, id).expect("in-memory write");
}

/// Writes `s` as a JSON string.
fn put_str(out: &mut Vec<u8>, s: &str) {
    serde_json::to_writer(&mut *out, s).expect("in-memory write");
}

/// Encodes a request. `params` is already-serialized JSON.
pub fn encode_request(id: &RequestId, method: &str, params: Option<&RawValue>) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + method.len() + params.map_or(0, |p| p.get().len()));
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    put_id(&mut out, id);
    out.extend_from_slice(br#","method":"#);
    put_str(&mut out, method);
    if let Some(p) = params {
        out.extend_from_slice(br#","params":"#);
        out.extend_from_slice(p.get().as_bytes());
    }
    out.push(b'}');
    out
}

/// Encodes a request whose params are serialized straight into the frame: the same bytes as
/// [`encode_request`] with [`to_raw`]'s params, without the copy.
pub(crate) fn encode_request_serialized<P: Serialize + ?Sized>(
    id: &RequestId,
    method: &str,
    params: &P,
) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::with_capacity(128 + method.len());
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    put_id(&mut out, id);
    out.extend_from_slice(br#","method":"#);
    put_str(&mut out, method);
    out.extend_from_slice(br#","params":"#);
    serde_json::to_writer(&mut out, params).map_err(EncodeError)?;
    out.push(b'}');
    Ok(out)
}

/// Encodes a notification.
pub fn encode_notification(method: &str, params: Option<&RawValue>) -> Vec<u8> {
    let mut out = Vec::with_capacity(48 + method.len() + params.map_or(0, |p| p.get().len()));
    out.extend_from_slice(br#"{"jsonrpc":"2.0","method":"#);
    put_str(&mut out, method);
    if let Some(p) = params {
        out.extend_from_slice(br#","params":"#);
        out.extend_from_slice(p.get().as_bytes());
    }
    out.push(b'}');
    out
}

/// Encodes a successful response.
pub fn encode_response(id: &RequestId, result: &RawValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(40 + result.get().len());
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    put_id(&mut out, id);
    out.extend_from_slice(br#","result":"#);
    out.extend_from_slice(result.get().as_bytes());
    out.push(b'}');
    out
}

/// A request's result as a service hands it to the engine: raw JSON, or the whole response
/// frame, written once by a service that knew the request's id (the result serialized straight
/// after the envelope's prefix: no raw copy of it is made and copied again).
#[derive(Debug)]
pub(crate) enum Answer {
    /// The result's JSON; the engine writes the envelope around it.
    Raw(Box<RawValue>),
    /// A whole response frame for `id`; its result runs from `result_at` to the closing brace.
    /// Only a server writes one.
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    Framed {
        /// The id the frame was written for.
        id: RequestId,
        /// The frame.
        frame: Vec<u8>,
        /// Where the result begins in `frame`.
        result_at: usize,
    },
}

impl From<Box<RawValue>> for Answer {
    fn from(raw: Box<RawValue>) -> Self {
        Answer::Raw(raw)
    }
}

impl Answer {
    /// Serializes `result` straight into the response frame for `id`.
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pub(crate) fn framed<T: Serialize + ?Sized>(
        id: &RequestId,
        result: &T,
    ) -> Result<Answer, EncodeError> {
        let mut frame = Vec::with_capacity(192);
        frame.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
        put_id(&mut frame, id);
        frame.extend_from_slice(br#","result":"#);
        let result_at = frame.len();
        serde_json::to_writer(&mut frame, result).map_err(EncodeError)?;
        frame.push(b'}');
        Ok(Answer::Framed {
            id: id.clone(),
            frame,
            result_at,
        })
    }

    /// [`framed`](Self::framed) for a tool's result: the usual one (one text block, nothing
    /// else but `isError`) written without the serializer's walk, the same bytes it writes.
    #[cfg(feature = "server")]
    pub(crate) fn framed_tool_result(
        id: &RequestId,
        result: &crate::types::CallToolResult,
    ) -> Result<Answer, EncodeError> {
        use crate::types::Content;
        let text = match (
            result.content.as_slice(),
            &result.structured_content,
            &result.meta,
        ) {
            ([Content::Text(t)], None, None) if t.annotations.is_none() && t.meta.is_none() => {
                &t.text
            }
            _ => return Answer::framed(id, result),
        };
        let mut frame = Vec::with_capacity(96 + text.len());
        frame.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
        put_id(&mut frame, id);
        frame.extend_from_slice(br#","result":"#);
        let result_at = frame.len();
        frame.extend_from_slice(br#"{"content":[{"type":"text","text":"#);
        put_str(&mut frame, text);
        frame.extend_from_slice(b"}]");
        match result.is_error {
            Some(true) => frame.extend_from_slice(br#","isError":true"#),
            Some(false) => frame.extend_from_slice(br#","isError":false"#),
            None => {}
        }
        frame.extend_from_slice(b"}}");
        Ok(Answer::Framed {
            id: id.clone(),
            frame,
            result_at,
        })
    }

    /// The result's JSON text.
    pub(crate) fn result_text(&self) -> &str {
        match self {
            Answer::Raw(raw) => raw.get(),
            Answer::Framed {
                frame, result_at, ..
            } => {
                // Written from `str`s and serde_json's output: UTF-8 throughout.
                std::str::from_utf8(&frame[*result_at..frame.len() - 1]).unwrap_or("null")
            }
        }
    }

    /// The result's JSON alone (copied out of a frame), for a caller that wraps or keeps it.
    pub(crate) fn into_raw(self) -> Box<RawValue> {
        match self {
            Answer::Raw(raw) => raw,
            framed => RawValue::from_string(framed.result_text().to_owned())
                .expect("a serialized result is JSON"),
        }
    }

    /// The response frame for `id`: the frame already written when it was written for `id`.
    pub(crate) fn into_frame(self, id: &RequestId) -> Vec<u8> {
        match self {
            Answer::Framed {
                id: written, frame, ..
            } if &written == id => frame,
            other => encode_response(id, &other.into_raw()),
        }
    }
}

/// Encodes an error response; `id: None` is written as `null`.
pub fn encode_error(id: Option<&RequestId>, error: &ErrorObject) -> Vec<u8> {
    let mut out = Vec::with_capacity(96 + error.message.len());
    let mut ser = serde_json::Serializer::new(&mut out);
    let mut map = ser.serialize_map(None).expect("in-memory write");
    map.serialize_entry("jsonrpc", "2.0")
        .expect("in-memory write");
    map.serialize_entry("id", &id).expect("in-memory write");
    map.serialize_entry("error", error)
        .expect("in-memory write");
    SerializeMap::end(map).expect("in-memory write");
    out
}

/// Serializes a value into raw JSON once, for a request's params or a result. MCP's own types
/// always serialize; a caller's `Serialize` impl may fail, and that is an [`EncodeError`], never a
/// panic.
pub(crate) fn to_raw<T: Serialize + ?Sized>(value: &T) -> Result<Box<RawValue>, EncodeError> {
    serde_json::value::to_raw_value(value).map_err(EncodeError)
}

/// A value that could not be serialized to JSON (a `Serialize` impl failed, or a map had
/// non-string keys). Answering a request with it is -32603; sending it fails the call locally
/// with [`Error::Encode`](crate::Error::Encode).
#[derive(Debug)]
pub(crate) struct EncodeError(serde_json::Error);

impl From<EncodeError> for ErrorObject {
    fn from(e: EncodeError) -> Self {
        ErrorObject::internal(format!(
            "Internal error: the result could not be encoded: {}",
            e.0
        ))
    }
}

impl From<EncodeError> for crate::Error {
    fn from(e: EncodeError) -> Self {
        crate::Error::Encode(e.0.to_string())
    }
}

/// Deserializes raw params; absent params are read as `{}`.
pub(crate) fn from_params<T: for<'de> Deserialize<'de>>(
    params: Option<&RawValue>,
) -> Result<T, ErrorObject> {
    let text = params.map_or("{}", RawValue::get);
    serde_json::from_str(text)
        .map_err(|e| ErrorObject::invalid_params(format!("Invalid params: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tool's usual result written directly is byte for byte what the serializer writes, and
    /// any other result is the serializer's.
    #[cfg(feature = "server")]
    #[test]
    fn a_usual_tool_result_is_written_as_the_serializer_writes_it() {
        use crate::types::{CallToolResult, Content};
        let id = RequestId::String("a\"b".into());
        let mut results = Vec::new();
        for text in ["", "hello", "q\"uote\\ \n\u{1} é 😀 \u{7f}"] {
            results.push(CallToolResult::text(text));
            results.push(CallToolResult::error(text));
            let mut ok = CallToolResult::text(text);
            ok.is_error = Some(false);
            results.push(ok);
        }
        results.push(CallToolResult::new(vec![
            Content::text("a"),
            Content::text("b"),
        ]));
        results.push(CallToolResult::new(Vec::new()));
        results.push(CallToolResult::structured(serde_json::json!({"x": 1})));
        for r in &results {
            let Answer::Framed { frame, .. } = Answer::framed_tool_result(&id, r).unwrap() else {
                panic!("framed");
            };
            let Answer::Framed { frame: general, .. } = Answer::framed(&id, r).unwrap() else {
                panic!("framed");
            };
            assert_eq!(
                String::from_utf8(frame).unwrap(),
                String::from_utf8(general).unwrap()
            );
        }
    }

    /// Found by the fuzz target `frame`: a batch element serde_json cannot read although the
    /// batch is JSON (a number beyond a double's range) was answered as a parse error.
    #[test]
    fn an_unreadable_batch_element_is_an_invalid_request() {
        let Frame::Batch(items) = decode_frame(b"[2e1000 ]\n\r") else {
            panic!("not a batch");
        };
        assert_eq!(items.len(), 1);
        let e = items[0].as_ref().unwrap_err();
        assert_eq!(e.error.code, RpcErrorCode::INVALID_REQUEST);
        assert_eq!(e.id, None);
        // Beside a good element, which still decodes.
        let Frame::Batch(items) =
            decode_frame(br#"[{"jsonrpc":"2.0","method":"ping","id":1},{"method":1e999}]"#)
        else {
            panic!("not a batch");
        };
        assert!(matches!(&items[0], Ok(Message::Request { method, .. }) if method == "ping"));
        let e = items[1].as_ref().unwrap_err();
        assert_eq!(e.error.code, RpcErrorCode::INVALID_REQUEST);
    }

    /// Found by the fuzz target `frame`: invalid UTF-8 in a member the envelope ignores was
    /// answered -32600 (or decoded), although the frame is not JSON.
    #[test]
    fn invalid_utf8_anywhere_is_a_parse_error() {
        for frame in [
            &b"{\"jsonrpc\":\"2.0\",\"medhot\":\"\xff\"}"[..],
            &b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"x\":\"\xff\"}"[..],
            &b"[{\"jsonrpc\":\"2.0\",\"method\":\"n\",\"\xc3\":1}]"[..],
        ] {
            match decode_frame(frame) {
                Frame::Single(Err(e)) => {
                    assert_eq!(e.error.code, RpcErrorCode::PARSE_ERROR, "{frame:?}");
                    assert_eq!(e.id, None);
                }
                other => panic!("{frame:?} decoded as {other:?}"),
            }
        }
    }

    fn single(bytes: &str) -> Result<Message, DecodeError> {
        match decode_frame(bytes.as_bytes()) {
            Frame::Single(m) => m,
            Frame::Batch(_) => panic!("batch"),
        }
    }

    #[test]
    fn decodes_each_shape() {
        assert!(matches!(
            single(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
            Ok(Message::Request {
                id: RequestId::Number(1),
                ..
            })
        ));
        assert!(matches!(
            single(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Ok(Message::Notification { .. })
        ));
        assert!(matches!(
            single(r#"{"jsonrpc":"2.0","id":"a","result":{}}"#),
            Ok(Message::Response { .. })
        ));
        assert!(matches!(
            single(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#),
            Ok(Message::Error { id: None, .. })
        ));
    }

    #[test]
    fn rejects_bad_envelopes_with_the_required_codes() {
        assert_eq!(
            single("{").unwrap_err().error.code,
            RpcErrorCode::PARSE_ERROR
        );
        assert_eq!(
            single("[1,").unwrap_err().error.code,
            RpcErrorCode::PARSE_ERROR
        );
        let e = single(r#"{"jsonrpc":"2.0","id":7}"#).unwrap_err();
        assert_eq!(
            (e.id, e.error.code),
            (Some(RequestId::Number(7)), RpcErrorCode::INVALID_REQUEST)
        );
        let e = single(r#"{"jsonrpc":"1.0","id":7,"method":"x"}"#).unwrap_err();
        assert_eq!(e.error.code, RpcErrorCode::INVALID_REQUEST);
        let e = single(r#"{"jsonrpc":"2.0","id":{"a":1},"method":"x"}"#).unwrap_err();
        assert_eq!((e.id, e.error.code), (None, RpcErrorCode::INVALID_REQUEST));
        let e = single(r#"42"#).unwrap_err();
        assert_eq!(e.error.code, RpcErrorCode::INVALID_REQUEST);
        let e = single(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":3}"#).unwrap_err();
        assert_eq!(e.error.code, RpcErrorCode::INVALID_REQUEST);
    }

    /// The one-scan read of the usual envelope takes the usual frames, and whatever it reads
    /// the general way reads the same (anything else it leaves to the general way).
    #[test]
    fn the_usual_envelope_read_in_one_scan_is_read_as_the_general_way_reads_it() {
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        let framed =
            |params: &str| format!(r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{params}}}"#);
        let usual = [
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":0,"method":"m"}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":-9223372036854775808,"method":"m","params":[]}"#.to_owned(),
            "{\"jsonrpc\":\"2.0\",\"id\":-0,\"method\":\"é \u{7f}\",\"params\":{} }".to_owned(),
            "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\r\n".to_owned(),
            // Raw params are skipped without a depth limit, inside the frame or alone.
            framed(&deep(126)),
            framed(&deep(127)),
            framed(&deep(5000)),
        ];
        let others = [
            r#"{"jsonrpc":"2.0","id":01,"method":"m"}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":9223372036854775808,"method":"m"}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":"a","method":"m"}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1.0,"method":"m"}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":"a\"b"}"#.to_owned(),
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\tb\"}".to_owned(),
            framed("3"),
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{},"id":2}"#.to_owned(),
            framed("{}}"),
            framed(r#"{"a":}"#),
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{},"result":{}}"#.to_owned(),
            framed(" {}"),
            r#"{"jsonrpc": "2.0","id":1,"method":"m"}"#.to_owned(),
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}\u{c}".to_owned(),
        ];
        for text in &usual {
            let fast = decode_usual(text).unwrap_or_else(|| panic!("usual: {text}"));
            let general = decode_general(text, false);
            assert_eq!(
                format!("{:?}", Ok::<_, DecodeError>(fast)),
                format!("{general:?}")
            );
        }
        for text in &others {
            assert!(decode_usual(text).is_none(), "{text}");
        }
    }

    /// The usual response is read in one scan too, as the general way reads it; every other
    /// response goes the general way.
    #[test]
    fn the_usual_response_read_in_one_scan_is_read_as_the_general_way_reads_it() {
        let usual = [
            r#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"hi"}]}}"#,
            r#"{"jsonrpc":"2.0","id":0,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":-7,"result":[1,"a",{"b":null}]}"#,
            r#"{"jsonrpc":"2.0","id":3,"result":"text"}"#,
            r#"{"jsonrpc":"2.0","id":4,"result":false}"#,
            r#"{"jsonrpc":"2.0","id":5,"result":12.5e3}"#,
            "{\"jsonrpc\":\"2.0\",\"id\":6,\"result\":{\"a\":\"\\\"q\\u00e9\"} }\r\n",
        ];
        let others = [
            r#"{"jsonrpc":"2.0","id":1,"result":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"result": {}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{},"id":2}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"a":}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":}"#,
            r#"{"jsonrpc":"2.0","id":"s","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":null,"result":{}}"#,
            r#"{"jsonrpc":"2.0","result":{},"id":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":nul}"#,
        ];
        for text in usual {
            let fast = decode_usual(text).unwrap_or_else(|| panic!("usual: {text}"));
            assert!(matches!(fast, Message::Response { .. }), "{text}");
            let general = decode_general(text, false);
            assert_eq!(
                format!("{:?}", Ok::<_, DecodeError>(fast)),
                format!("{general:?}")
            );
        }
        for text in others {
            assert!(decode_usual(text).is_none(), "{text}");
        }
    }

    #[test]
    fn encodes_exact_json() {
        let raw = to_raw(&serde_json::json!({"a": 1})).unwrap();
        assert_eq!(
            String::from_utf8(encode_request(&RequestId::Number(3), "m", Some(&raw))).unwrap(),
            r#"{"jsonrpc":"2.0","id":3,"method":"m","params":{"a":1}}"#
        );
        assert_eq!(
            String::from_utf8(encode_error(
                None,
                &ErrorObject::new(RpcErrorCode::PARSE_ERROR, "p")
            ))
            .unwrap(),
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"p"}}"#
        );
    }

    /// The envelope written byte by byte is exactly what serde_json's map serializer writes
    /// (the encoders before they wrote bytes), with ids and methods that need escaping.
    #[test]
    fn the_direct_encoders_write_what_serde_json_writes() {
        fn reference(members: &[(&str, &dyn erased::Ser)]) -> Vec<u8> {
            let mut out = Vec::new();
            let mut ser = serde_json::Serializer::new(&mut out);
            let mut map = ser.serialize_map(None).unwrap();
            for (k, v) in members {
                map.serialize_entry(k, v).unwrap();
            }
            SerializeMap::end(map).unwrap();
            out
        }
        mod erased {
            pub trait Ser {
                fn json(&self) -> serde_json::Value;
            }
            impl<T: serde::Serialize> Ser for T {
                fn json(&self) -> serde_json::Value {
                    serde_json::to_value(self).unwrap()
                }
            }
            impl serde::Serialize for dyn Ser + '_ {
                fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                    self.json().serialize(s)
                }
            }
        }
        let raw = to_raw(&serde_json::json!({"x": ["\u{1}", "é\"\\"]})).unwrap();
        let params: serde_json::Value = serde_json::from_str(raw.get()).unwrap();
        let ids = [
            RequestId::Number(0),
            RequestId::Number(-7),
            RequestId::Number(i64::MAX),
            RequestId::String("".into()),
            RequestId::String("a\"b\\c\n\u{7f}é😀".into()),
        ];
        let methods = ["tools/call", "", "we\"ird\\\t\u{0}"];
        for id in &ids {
            assert_eq!(
                encode_response(id, &raw),
                reference(&[("jsonrpc", &"2.0"), ("id", id), ("result", &params)])
            );
            for method in methods {
                assert_eq!(
                    encode_request(id, method, None),
                    reference(&[("jsonrpc", &"2.0"), ("id", id), ("method", &method)])
                );
                assert_eq!(
                    encode_request(id, method, Some(&raw)),
                    reference(&[
                        ("jsonrpc", &"2.0"),
                        ("id", id),
                        ("method", &method),
                        ("params", &params)
                    ])
                );
            }
        }
        for method in methods {
            assert_eq!(
                encode_notification(method, None),
                reference(&[("jsonrpc", &"2.0"), ("method", &method)])
            );
            assert_eq!(
                encode_notification(method, Some(&raw)),
                reference(&[
                    ("jsonrpc", &"2.0"),
                    ("method", &method),
                    ("params", &params)
                ])
            );
        }
    }
}
