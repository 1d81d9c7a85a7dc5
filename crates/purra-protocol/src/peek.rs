//! What a frame that cannot be decoded still says about itself: its top-level `id` and whether
//! it is a request or a response, read from bounded pieces of its bytes.
//!
//! An oversize line is discarded unread, but the request it answers must fail at once; a
//! malformed response must fail its request rather than be answered with an error. Peers put
//! the id first (Python SDK: `{"jsonrpc":"2.0","id":1,"result":…}`) or last (TypeScript SDK:
//! `{"result":…,"jsonrpc":"2.0","id":1}`), so the members are read forward from the frame's
//! first bytes and backward from its last bytes, stopping at the first value that does not fit.

use std::sync::Arc;

use crate::jsonrpc::RequestId;

/// How many bytes of the start and of the end of an oversize frame a transport keeps.
pub(crate) const PEEK_BYTES: usize = 4096;

/// The longest string id read from a peek (longer ids are not looked for).
const MAX_ID_BYTES: usize = 256;

/// What the top-level members seen say.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Peek {
    /// The `id` member: absent (not seen), null, or an id.
    pub id: PeekId,
    /// A `method` member was seen: a request or a notification.
    pub method: bool,
    /// A `result` or `error` member was seen: a response.
    pub response: bool,
}

/// The `id` member as far as it was seen.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) enum PeekId {
    /// Not seen (absent, or beyond what was read, or two different ids).
    #[default]
    Unknown,
    /// `"id": null`.
    Null,
    /// A string or integer id.
    Id(RequestId),
}

impl Peek {
    /// Reads `head` (the frame's first bytes, or all of it) forward and `tail` (its last bytes)
    /// backward.
    pub(crate) fn read(head: &[u8], tail: &[u8]) -> Peek {
        let mut peek = Peek::default();
        let mut ids = Vec::new();
        forward(head, &mut peek, &mut ids);
        backward(tail, &mut peek, &mut ids);
        peek.id = match ids.split_first() {
            Some((first, rest)) if rest.iter().all(|i| i == first) => first.clone(),
            _ => PeekId::Unknown,
        };
        peek
    }

    /// Reads a whole frame that is in memory.
    pub(crate) fn frame(bytes: &[u8]) -> Peek {
        let tail = &bytes[bytes.len().saturating_sub(PEEK_BYTES)..];
        Peek::read(&bytes[..bytes.len().min(PEEK_BYTES)], tail)
    }

    /// A response, known by its members (`result`/`error` and no `method`).
    pub(crate) fn is_response(&self) -> bool {
        self.response && !self.method
    }

    fn member(&mut self, key: &[u8], value: Option<&[u8]>, ids: &mut Vec<PeekId>) {
        match key {
            b"method" => self.method = true,
            b"result" | b"error" => self.response = true,
            b"id" => ids.push(value.map_or(PeekId::Unknown, id_value)),
            _ => {}
        }
    }
}

/// An id from its JSON text: an integer, a string without escapes, or null.
fn id_value(text: &[u8]) -> PeekId {
    match text {
        b"null" => PeekId::Null,
        [b'"', inner @ .., b'"'] if inner.len() <= MAX_ID_BYTES && !inner.contains(&b'\\') => {
            match std::str::from_utf8(inner) {
                Ok(s) => PeekId::Id(RequestId::String(Arc::from(s))),
                Err(_) => PeekId::Unknown,
            }
        }
        _ => std::str::from_utf8(text)
            .ok()
            .and_then(|s| s.parse::<i64>().ok())
            .map_or(PeekId::Unknown, |n| PeekId::Id(RequestId::Number(n))),
    }
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// Reads members from the start of an object until the bytes end or stop making sense.
fn forward(bytes: &[u8], peek: &mut Peek, ids: &mut Vec<PeekId>) {
    let mut i = skip_ws(bytes, 0);
    if bytes.get(i) != Some(&b'{') {
        return;
    }
    i += 1;
    loop {
        i = skip_ws(bytes, i);
        let Some(key_end) = string_end(bytes, i) else {
            return;
        };
        let key = &bytes[i + 1..key_end - 1];
        i = skip_ws(bytes, key_end);
        if bytes.get(i) != Some(&b':') {
            return;
        }
        i = skip_ws(bytes, i + 1);
        // The member counts as seen once its key is read: a huge `result` is a response even
        // though its value is never read to the end.
        let value_end = value_end(bytes, i);
        peek.member(key, value_end.map(|e| &bytes[i..e]), ids);
        let Some(end) = value_end else {
            return;
        };
        i = skip_ws(bytes, end);
        match bytes.get(i) {
            Some(b',') => i += 1,
            _ => return,
        }
    }
}

fn skip_ws(bytes: &[u8], mut i: usize) -> usize {
    while bytes.get(i).copied().is_some_and(is_ws) {
        i += 1;
    }
    i
}

/// The index after the string that starts at `i`, if it is complete.
fn string_end(bytes: &[u8], i: usize) -> Option<usize> {
    if bytes.get(i) != Some(&b'"') {
        return None;
    }
    let mut j = i + 1;
    loop {
        let k = j + memchr::memchr2(b'"', b'\\', bytes.get(j..)?)?;
        if bytes[k] == b'"' {
            return Some(k + 1);
        }
        j = k + 2;
    }
}

/// The index after the value that starts at `i`, if it is complete within `bytes`.
fn value_end(bytes: &[u8], i: usize) -> Option<usize> {
    match *bytes.get(i)? {
        b'"' => string_end(bytes, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            loop {
                match *bytes.get(j)? {
                    b'"' => {
                        j = string_end(bytes, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        _ => {
            // A number or a literal: it ends at a delimiter, which must be within the bytes.
            let len = bytes[i..]
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']') || is_ws(*b))?;
            (len > 0).then_some(i + len)
        }
    }
}

/// Reads members from the end of an object backward, as long as their values are scalars.
fn backward(bytes: &[u8], peek: &mut Peek, ids: &mut Vec<PeekId>) {
    let mut end = skip_ws_back(bytes, bytes.len());
    if end == 0 || bytes[end - 1] != b'}' {
        return;
    }
    end -= 1;
    loop {
        end = skip_ws_back(bytes, end);
        let Some(value_start) = scalar_start_back(bytes, end) else {
            return;
        };
        let value = &bytes[value_start..end];
        let mut i = skip_ws_back(bytes, value_start);
        if i == 0 || bytes[i - 1] != b':' {
            return;
        }
        i = skip_ws_back(bytes, i - 1);
        let Some(key_start) = string_start_back(bytes, i) else {
            return;
        };
        let key = &bytes[key_start + 1..i - 1];
        // The key's opening quote follows `,` or `{`: anything else means the quote was not
        // where a key can be.
        let before = skip_ws_back(bytes, key_start);
        match before.checked_sub(1).map(|b| bytes[b]) {
            Some(b',') => {
                peek.member(key, Some(value), ids);
                end = before - 1;
            }
            Some(b'{') => {
                peek.member(key, Some(value), ids);
                return;
            }
            _ => return,
        }
    }
}

fn skip_ws_back(bytes: &[u8], mut end: usize) -> usize {
    while end > 0 && is_ws(bytes[end - 1]) {
        end -= 1;
    }
    end
}

/// The start of the string that ends (with its closing quote) just before `end`.
fn string_start_back(bytes: &[u8], end: usize) -> Option<usize> {
    if end < 2 || bytes[end - 1] != b'"' {
        return None;
    }
    let mut j = end - 1;
    loop {
        let k = memchr::memrchr(b'"', &bytes[..j])?;
        // A quote preceded by an odd number of backslashes is escaped.
        let slashes = bytes[..k].iter().rev().take_while(|b| **b == b'\\').count();
        if slashes % 2 == 0 {
            return Some(k);
        }
        j = k;
    }
}

/// The start of the scalar value (string, number, literal) that ends just before `end`.
fn scalar_start_back(bytes: &[u8], end: usize) -> Option<usize> {
    let last = *bytes.get(end.checked_sub(1)?)?;
    if last == b'"' {
        return string_start_back(bytes, end);
    }
    let start = bytes[..end]
        .iter()
        .rposition(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'-' | b'+' | b'.')))
        .map_or(0, |p| p + 1);
    (start < end).then_some(start)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: i64) -> PeekId {
        PeekId::Id(RequestId::Number(n))
    }

    #[test]
    fn reads_the_id_first_or_last() {
        let py = br#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"x","#;
        assert_eq!(
            Peek::read(py, b"}}]}}"),
            Peek {
                id: id(7),
                method: false,
                response: true
            }
        );
        let ts = br#"{"result":{"content":[{"type":"text","text":"aaaa"#;
        let tail = br#"aaaa \"id\":9}"}]} , "jsonrpc" : "2.0", "id" : "req-1" }"#;
        assert_eq!(
            Peek::read(ts, tail),
            Peek {
                id: PeekId::Id(RequestId::from("req-1")),
                method: false,
                response: true
            }
        );
    }

    #[test]
    fn tells_requests_from_responses() {
        let p = Peek::read(
            br#"{"method":"tools/call","params":{"a":"#,
            br#""x"},"id":3}"#,
        );
        assert!(p.method && !p.is_response());
        assert_eq!(p.id, id(3));
        let p = Peek::frame(br#"{"jsonrpc":"2.0","id":null,"result":{}}"#);
        assert_eq!(p.id, PeekId::Null);
        assert!(p.is_response());
    }

    #[test]
    fn ids_inside_values_are_not_taken() {
        // A nested id at the end, an escaped one inside a string, a key after a non-separator.
        let p = Peek::read(br#"{"result":{"#, br#"{"x":{"id":5}}}"#);
        assert_eq!(p.id, PeekId::Unknown);
        let p = Peek::read(br#"{"result":"#, br#"aaa,\"id\":5"}"#);
        assert_eq!(p.id, PeekId::Unknown);
        let p = Peek::read(br#"{"result":"a"#, br#"a "id":5}"#);
        assert_eq!(p.id, PeekId::Unknown);
        // A number cut at the end of the head is not an id.
        assert_eq!(Peek::read(br#"{"id":12"#, b"").id, PeekId::Unknown);
        // Two different ids name nothing.
        assert_eq!(
            Peek::read(br#"{"id":1,"result":{"#, br#"},"id":2}"#).id,
            PeekId::Unknown
        );
    }

    #[test]
    fn nonsense_is_unknown() {
        for bytes in [
            &b""[..],
            b"[1,2]",
            b"\"id\"",
            b"{",
            b"}",
            b"{\"id\"",
            b"not json",
        ] {
            assert_eq!(Peek::frame(bytes), Peek::default(), "{bytes:?}");
        }
    }
}
