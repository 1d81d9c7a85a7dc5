//! Server-sent events: encoding events for the server, and a bounded incremental parser for the
//! client.

// The server uses the encoder, the client the parser; a build with one of them leaves the other
// unused.
#![cfg_attr(
    not(all(feature = "http-server", feature = "http-client")),
    allow(dead_code)
)]

use bytes::{Bytes, BytesMut};

/// Encodes one event: `id`, optional `retry` (milliseconds), and `data` (one JSON message, which
/// never contains a newline).
pub(crate) fn encode_event(id: &str, retry_ms: Option<u64>, data: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(data.len() + id.len() + 32);
    out.extend_from_slice(b"id: ");
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(b"\n");
    if let Some(ms) = retry_ms {
        out.extend_from_slice(format!("retry: {ms}\n").as_bytes());
    }
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\n\n");
    out.freeze()
}

/// One parsed event.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Event {
    /// The `id` field, if any.
    pub id: Option<String>,
    /// The `event` field, if any.
    pub event: Option<String>,
    /// The data lines joined with `\n`.
    pub data: String,
    /// The `retry` field, if any.
    pub retry: Option<u64>,
}

/// Why parsing stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SseError {
    /// An event or a line grew past the bound.
    TooLarge,
}

/// An incremental SSE parser that never buffers more than `max` bytes of one event.
#[derive(Debug)]
pub(crate) struct Parser {
    buf: BytesMut,
    current: Event,
    has_field: bool,
    /// The last chunk ended with `\r`: a `\n` starting the next chunk belongs to it.
    pending_cr: bool,
    max: usize,
}

impl Parser {
    /// A parser bounding one event to `max` bytes.
    pub(crate) fn new(max: usize) -> Self {
        Parser {
            buf: BytesMut::new(),
            current: Event::default(),
            has_field: false,
            pending_cr: false,
            max,
        }
    }

    /// Feeds a chunk; returns the events it completed.
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> Result<Vec<Event>, SseError> {
        let chunk = match (self.pending_cr, chunk.first()) {
            (true, Some(b'\n')) => &chunk[1..],
            _ => chunk,
        };
        self.pending_cr = false;
        self.buf.extend_from_slice(chunk);
        let mut events = Vec::new();
        while let Some(pos) = self.buf.iter().position(|b| *b == b'\n' || *b == b'\r') {
            let terminator = self.buf[pos];
            let mut line = self.buf.split_to(pos + 1);
            line.truncate(pos);
            if terminator == b'\r' {
                match self.buf.first() {
                    Some(b'\n') => drop(self.buf.split_to(1)),
                    Some(_) => {}
                    None => self.pending_cr = true,
                }
            }
            let line = String::from_utf8_lossy(&line).into_owned();
            if line.is_empty() {
                if self.has_field {
                    events.push(std::mem::take(&mut self.current));
                    self.has_field = false;
                }
                continue;
            }
            self.field(&line);
            if self.current.data.len() > self.max {
                return Err(SseError::TooLarge);
            }
        }
        if self.buf.len() > self.max {
            return Err(SseError::TooLarge);
        }
        Ok(events)
    }

    fn field(&mut self, line: &str) {
        if line.starts_with(':') {
            return;
        }
        let (name, value) = match line.split_once(':') {
            Some((n, v)) => (n, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match name {
            "data" => {
                if self.has_field && !self.current.data.is_empty() {
                    self.current.data.push('\n');
                }
                self.current.data.push_str(value);
                self.has_field = true;
            }
            "id" => {
                self.current.id = Some(value.to_owned());
                self.has_field = true;
            }
            "event" => {
                self.current.event = Some(value.to_owned());
                self.has_field = true;
            }
            "retry" => {
                if let Ok(ms) = value.parse() {
                    self.current.retry = Some(ms);
                }
                self.has_field = true;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_events_across_chunks() {
        let mut p = Parser::new(1024);
        assert_eq!(
            p.feed(b"id: a\nretry: 500\ndata: \n\nid: b\nda")
                .unwrap()
                .len(),
            1
        );
        let ev = p.feed(b"ta: {\"x\":1}\r").unwrap();
        assert!(ev.is_empty());
        let ev = p.feed(b"\n\r\n: comment\n\n").unwrap();
        assert_eq!(
            ev,
            [Event {
                id: Some("b".into()),
                event: None,
                data: "{\"x\":1}".into(),
                retry: None
            }]
        );
    }

    #[test]
    fn bounds_events() {
        let mut p = Parser::new(8);
        assert_eq!(
            p.feed(b"data: 0123456789\n").unwrap_err(),
            SseError::TooLarge
        );
        let mut p = Parser::new(8);
        assert_eq!(p.feed(b"data: 0123456789").unwrap_err(), SseError::TooLarge);
    }

    #[test]
    fn encodes_events() {
        assert_eq!(
            &encode_event("s1e2", Some(500), b"{}")[..],
            b"id: s1e2\nretry: 500\ndata: {}\n\n"
        );
    }
}
