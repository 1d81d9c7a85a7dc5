//! Frame decoding: not-JSON is -32700 with id null, JSON that is no JSON-RPC message is -32600,
//! every error answer decodes back as that error, and every decoded message re-encodes to a frame
//! that decodes to the same message (params and results byte for byte).

use purra_protocol::__private::{
    decode_frame, encode_error, encode_notification, encode_request, encode_response, DecodeError,
    Frame, Message,
};
use serde::de::IgnoredAny;

/// Checks one frame.
pub fn check(data: &[u8]) {
    // JSON text is UTF-8 (serde_json skips ignored strings without checking it). Between "not
    // JSON by any measure" and "JSON serde_json reads as a value" is a grey zone that may go
    // either way: numbers out of a double's range and lone surrogates (RFC 8259 lets parsers
    // refuse them; the corpus file `frame/huge-exponent` is one).
    let is_json = std::str::from_utf8(data)
        .is_ok_and(|text| serde_json::from_str::<IgnoredAny>(text).is_ok());
    let is_value = serde_json::from_slice::<serde_json::Value>(data).is_ok();
    match decode_frame(data) {
        Frame::Single(Err(e)) => {
            let code = e.error.code.0;
            assert!(code == -32700 || code == -32600, "code {code}");
            if !is_json {
                assert_eq!(code, -32700, "a frame that is not JSON answered {code}");
            }
            if is_value {
                assert_eq!(code, -32600, "valid JSON refused with {code}");
            }
            error_answer_round_trips(&e);
        }
        Frame::Single(Ok(m)) => {
            assert!(is_json, "a frame that is not JSON decoded as {m:?}");
            round_trip(&m);
        }
        Frame::Batch(items) => {
            let elements = serde_json::from_slice::<Vec<IgnoredAny>>(data)
                .expect("a batch is a JSON array")
                .len();
            assert!(elements > 0, "an empty batch decoded as a batch");
            assert_eq!(items.len(), elements, "one result per batch element");
            for item in &items {
                match item {
                    Ok(m) => round_trip(m),
                    Err(e) => {
                        assert_eq!(e.error.code.0, -32600, "a batch element is JSON");
                        error_answer_round_trips(e);
                    }
                }
            }
        }
    }
}

/// The answer to a refused frame decodes as an error response with the same id and code.
fn error_answer_round_trips(e: &DecodeError) {
    if e.error.code.0 == -32700 {
        assert!(e.id.is_none(), "a parse error names an id: {e:?}");
    }
    let answer = encode_error(e.id.as_ref(), &e.error);
    match decode_frame(&answer) {
        Frame::Single(Ok(Message::Error { id, error })) => {
            assert_eq!(id, e.id);
            assert_eq!(error.code, e.error.code);
            assert_eq!(error.message, e.error.message);
        }
        other => panic!("the answer {answer:?} decodes as {other:?}"),
    }
}

/// A decoded message re-encodes to a frame that decodes to the same message.
fn round_trip(m: &Message) {
    let encoded = match m {
        Message::Request { id, method, params } => encode_request(id, method, params.as_deref()),
        Message::Notification { method, params } => encode_notification(method, params.as_deref()),
        Message::Response { id, result } => encode_response(id, result),
        Message::Error { id, error } => encode_error(id.as_ref(), error),
    };
    let again = match decode_frame(&encoded) {
        Frame::Single(Ok(again)) => again,
        other => panic!("{m:?} re-encoded as {encoded:?} decodes as {other:?}"),
    };
    let raw = |p: &Option<Box<serde_json::value::RawValue>>| p.as_ref().map(|p| p.get().to_owned());
    match (m, &again) {
        (
            Message::Request { id, method, params },
            Message::Request {
                id: id2,
                method: method2,
                params: params2,
            },
        ) => {
            assert_eq!(id, id2);
            assert_eq!(method, method2);
            assert_eq!(raw(params), raw(params2));
        }
        (
            Message::Notification { method, params },
            Message::Notification {
                method: method2,
                params: params2,
            },
        ) => {
            assert_eq!(method, method2);
            assert_eq!(raw(params), raw(params2));
        }
        (
            Message::Response { id, result },
            Message::Response {
                id: id2,
                result: result2,
            },
        ) => {
            assert_eq!(id, id2);
            assert_eq!(result.get(), result2.get());
        }
        (
            Message::Error { id, error },
            Message::Error {
                id: id2,
                error: error2,
            },
        ) => {
            assert_eq!(id, id2);
            assert_eq!(error.code, error2.code);
            assert_eq!(error.message, error2.message);
            // `data` is a Value: floats may move by an ulp through serde_json; presence must not.
            assert_eq!(error.data.is_some(), error2.data.is_some());
        }
        _ => panic!("{m:?} re-encoded as {encoded:?} decodes as {again:?}"),
    }
}
