//! A usual response decoded straight into the type its request wants, in the one scan that also
//! checks it.
//!
//! An outbound request whose caller wants a typed result (a client's `tools/call`, whose result
//! is a `CallToolResult`) leaves its decoder with its pending entry. When a frame is exactly the
//! usual response `{"jsonrpc":"2.0","id":N,"result":R}` (perhaps followed by whitespace) for such
//! a request, the engine decodes `R` with that decoder instead of reading the frame: a decode that
//! succeeds read `R` whole, as one JSON value followed by nothing but whitespace, so the frame was
//! the usual response the frame's decode reads as `Response { id: N, result: R }`, and the
//! result is what the caller's own decode of `R` gives. Anything else, and any decode that fails,
//! goes the general way (the frame decoded, the raw result sent, the caller's decode and its
//! error), so every error is the one that way gives.

use std::any::Any;

use serde::de::DeserializeOwned;

/// Decodes a result's text into its request's type: `None` when it does not decode.
pub(crate) type TypedDecode = fn(&str) -> Option<Box<dyn Any + Send>>;

/// The [`TypedDecode`] of `R`.
#[cfg_attr(not(feature = "client"), allow(dead_code))]
pub(crate) fn decode_as<R: DeserializeOwned + Send + 'static>(
    text: &str,
) -> Option<Box<dyn Any + Send>> {
    serde_json::from_str::<R>(text)
        .ok()
        .map(|r| Box::new(r) as Box<dyn Any + Send>)
}

/// The id and the result's text of a frame that looks like the usual response,
/// `{"jsonrpc":"2.0","id":N,"result":R}` perhaps followed by whitespace, read from its fixed
/// bytes alone: `N` a JSON integer within `i64`, `R` starting with neither whitespace nor `n`
/// (as the frame's one-scan decode takes it). `R` (with any whitespace after it) is not scanned:
/// the frame is that response only when `R` reads whole. `None` for anything else.
pub(crate) fn usual_result(bytes: &[u8]) -> Option<(i64, &str)> {
    let rest = bytes.strip_prefix(br#"{"jsonrpc":"2.0","id":"#)?;
    // The id's end (an i64 has at most 20 bytes): a request's `"method"` after it is told from
    // a response's `"result"` before its digits are read.
    let comma = rest.iter().take(21).position(|&b| b == b',')?;
    let (digits, rest) = rest.split_at(comma);
    let rest = rest[1..].strip_prefix(br#""result":"#)?;
    let id = plain_i64(digits)?;
    let end = rest
        .iter()
        .rposition(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))?;
    let value = rest[..=end].strip_suffix(b"}")?;
    if matches!(value.first()?, b'n' | b' ' | b'\t' | b'\n' | b'\r') {
        return None;
    }
    // The rest of the frame is ASCII: the frame is UTF-8 when `R` is.
    Some((id, std::str::from_utf8(value).ok()?))
}

/// A JSON integer (`-?(0|[1-9][0-9]*)`) within i64, as serde_json reads it.
fn plain_i64(digits: &[u8]) -> Option<i64> {
    let (negative, unsigned) = match digits {
        [b'-', rest @ ..] => (true, rest),
        all => (false, all),
    };
    match unsigned {
        [b'0'] => return Some(0),
        [b'1'..=b'9', ..] => {}
        _ => return None,
    }
    let mut n: i64 = 0;
    for &d in unsigned {
        if !d.is_ascii_digit() {
            return None;
        }
        let d = i64::from(d - b'0');
        n = n.checked_mul(10)?;
        n = if negative {
            n.checked_sub(d)?
        } else {
            n.checked_add(d)?
        };
    }
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::{decode_frame, Frame, Message, RequestId};
    use crate::types::CallToolResult;

    fn typed(frame: &str) -> Option<(i64, CallToolResult)> {
        let (id, text) = usual_result(frame.as_bytes())?;
        let any = decode_as::<CallToolResult>(text)?;
        Some((id, *any.downcast::<CallToolResult>().ok()?))
    }

    fn general(frame: &str) -> Option<(i64, Result<CallToolResult, String>)> {
        match decode_frame(frame.as_bytes()) {
            Frame::Single(Ok(Message::Response {
                id: RequestId::Number(id),
                result,
            })) => Some((
                id,
                serde_json::from_str::<CallToolResult>(result.get()).map_err(|e| e.to_string()),
            )),
            _ => None,
        }
    }

    /// Whatever the typed read answers is what the frame's decode then the caller's decode
    /// give; what it does not answer goes that way.
    #[test]
    fn a_typed_reply_is_the_frames_decode_then_the_callers() {
        let answered = [
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}]}}"#,
            r#"{"jsonrpc":"2.0","id":-7,"result":{"content":[],"isError":true}}"#,
            r#"{"jsonrpc":"2.0","id":9223372036854775807,"result":{"content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":-9223372036854775808,"result":{"content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":-0,"result":{"content":[]}}"#,
            "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{ \"content\" : [ ] , \"x\":[1,{\"}\":null}] } \n}\r\n",
            r#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"\"}\u00e9\\"}],"structuredContent":{"a":[1,2.5,"}"]},"_meta":{"k":"v"}}}"#,
            r#"{"jsonrpc":"2.0","id":3,"result":{"content":[],"content":[]}}"#,
            // A struct reads from an array too, either way.
            r#"{"jsonrpc":"2.0","id":4,"result":[]}"#,
        ];
        for frame in answered {
            let general = general(frame).map(|(id, r)| (id, r.ok()));
            match typed(frame) {
                Some((id, result)) => assert_eq!(Some((id, Some(result))), general, "{frame}"),
                // Not read this way: the general way reads it (here, to a decode error).
                None => assert!(general.is_none_or(|(_, r)| r.is_none()), "{frame}"),
            }
        }
        for frame in &answered[..7] {
            assert!(typed(frame).is_some(), "{frame}");
        }
        let not_answered = [
            // A member after the result, a second result, an error beside it.
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]},"x":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]},"result":{"content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]},"error":{"code":1,"message":"m"}}"#,
            // Not the usual envelope.
            r#"{"jsonrpc":"2.0","id":"1","result":{"content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":01,"result":{"content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":99999999999999999999,"result":{"content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":9223372036854775808,"result":{"content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":1.0,"result":{"content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":-,"result":{"content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result": {"content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":null}"#,
            r#"{"id":1,"jsonrpc":"2.0","result":{"content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{}}"#,
            // Not JSON, or not the caller's type.
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"x":tru}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"x":"\q"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":{}}}"#,
        ];
        for frame in not_answered {
            assert!(typed(frame).is_none(), "{frame}");
        }
        // Bytes that are not UTF-8, even in a member nobody reads.
        let mut bad = br#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"x":""#.to_vec();
        bad.extend_from_slice(&[0xff, b'"', b'}', b'}']);
        assert!(usual_result(&bad).is_none());
    }
}
