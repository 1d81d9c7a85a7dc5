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

/// Encodes one event without an id: an optional `event` name and `data` (one JSON message).
pub(crate) fn data_event(event: Option<&str>, data: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(data.len() + 24);
    if let Some(name) = event {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b"\n");
    }
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\n\n");
    out.freeze()
}

/// One parsed event.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Event {
    /// The `id` field, if any.
    pub id: Option<String>,
    /// The `event` field, if any.
    pub event: Option<String>,
    /// The data lines joined with `\n`.
    pub data: String,
    /// The `retry` field, if any.
    pub retry: Option<u64>,
}

/// What the parser yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// A complete event.
    Event(Event),
    /// The current event grew past the bound: its data is dropped, the rest of it is skipped,
    /// and the next event is parsed as usual. Yielded once per such event, as soon as it is seen.
    TooLarge,
}

/// An incremental SSE parser that never buffers more than `max` bytes of one event, and looks at
/// each byte once however the stream is chunked.
#[derive(Debug)]
pub struct Parser {
    /// The unterminated line so far.
    line: Vec<u8>,
    current: Event,
    has_field: bool,
    /// The last chunk ended with `\r`: a `\n` starting the next chunk belongs to it.
    pending_cr: bool,
    /// The current event is over the bound: its data lines are dropped until it ends.
    discarding: bool,
    /// The current line is over the bound: its bytes are dropped until it ends.
    skipping_line: bool,
    max: usize,
}

impl Parser {
    /// A parser bounding one event to `max` bytes.
    pub fn new(max: usize) -> Self {
        Parser {
            line: Vec::new(),
            current: Event::default(),
            has_field: false,
            pending_cr: false,
            discarding: false,
            skipping_line: false,
            max,
        }
    }

    /// Feeds a chunk; returns what it completed.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<Item> {
        let mut out = Vec::new();
        let mut rest = chunk;
        if std::mem::take(&mut self.pending_cr) && rest.first() == Some(&b'\n') {
            rest = &rest[1..];
        }
        while let Some(pos) = memchr::memchr2(b'\n', b'\r', rest) {
            let part = &rest[..pos];
            if std::mem::take(&mut self.skipping_line) {
                self.line.clear();
            } else if self.line.len() + part.len() > self.max {
                self.line.clear();
                self.overflow(&mut out);
            } else if self.line.is_empty() {
                self.line_done(part, &mut out);
            } else {
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(part);
                self.line_done(&line, &mut out);
                line.clear();
                self.line = line;
            }
            let terminator = rest[pos];
            rest = &rest[pos + 1..];
            if terminator == b'\r' {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    Some(_) => {}
                    None => self.pending_cr = true,
                }
            }
        }
        if !self.skipping_line {
            if self.line.len() + rest.len() > self.max {
                self.line.clear();
                self.skipping_line = true;
                self.overflow(&mut out);
            } else {
                self.line.extend_from_slice(rest);
            }
        }
        out
    }

    fn overflow(&mut self, out: &mut Vec<Item>) {
        self.current.data = String::new();
        if !self.discarding {
            self.discarding = true;
            out.push(Item::TooLarge);
        }
    }

    fn line_done(&mut self, line: &[u8], out: &mut Vec<Item>) {
        if line.is_empty() {
            if std::mem::take(&mut self.discarding) {
                self.current = Event::default();
                self.has_field = false;
            } else if std::mem::take(&mut self.has_field) {
                out.push(Item::Event(std::mem::take(&mut self.current)));
            }
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (name, value) = match memchr::memchr(b':', line) {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        let value = String::from_utf8_lossy(value);
        match name {
            b"data" => {
                self.has_field = true;
                if self.discarding {
                    return;
                }
                if self.current.data.len() + value.len() + 1 > self.max {
                    self.overflow(out);
                    return;
                }
                if !self.current.data.is_empty() {
                    self.current.data.push('\n');
                }
                self.current.data.push_str(&value);
            }
            b"id" => {
                self.current.id = Some(value.into_owned());
                self.has_field = true;
            }
            b"event" => {
                self.current.event = Some(value.into_owned());
                self.has_field = true;
            }
            b"retry" => {
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

    fn events(items: Vec<Item>) -> Vec<Event> {
        items
            .into_iter()
            .map(|i| match i {
                Item::Event(e) => e,
                Item::TooLarge => panic!("unexpected TooLarge"),
            })
            .collect()
    }

    #[test]
    fn parses_events_across_chunks() {
        let mut p = Parser::new(1024);
        assert_eq!(
            events(p.feed(b"id: a\nretry: 500\ndata: \n\nid: b\nda")).len(),
            1
        );
        assert!(p.feed(b"ta: {\"x\":1}\r").is_empty());
        assert_eq!(
            events(p.feed(b"\n\r\n: comment\n\n")),
            [Event {
                id: Some("b".into()),
                event: None,
                data: "{\"x\":1}".into(),
                retry: None
            }]
        );
    }

    #[test]
    fn bounds_events_and_goes_on_after_them() {
        let mut p = Parser::new(8);
        assert_eq!(p.feed(b"data: 0123456789\nid: 1\n"), [Item::TooLarge]);
        // The rest of the oversize event is skipped; the next one is read.
        assert_eq!(
            p.feed(b"data: more\n\ndata: ok\n\n"),
            [Item::Event(Event {
                data: "ok".into(),
                ..Event::default()
            })]
        );
        let mut p = Parser::new(8);
        assert_eq!(p.feed(b"data: 0123456789"), [Item::TooLarge]);
        assert!(p.feed(b"0123456789").is_empty());
        assert_eq!(
            p.feed(b"\n\ndata: 1\ndata: 2\n\n"),
            [Item::Event(Event {
                data: "1\n2".into(),
                ..Event::default()
            })]
        );
        // Several data lines add up to the bound.
        let mut p = Parser::new(8);
        assert_eq!(p.feed(b"data: 1234\ndata: 5678\n"), [Item::TooLarge]);
    }

    /// One byte at a time, a 1 MiB event is parsed in linear time (the old parser rescanned
    /// everything buffered on every chunk: about 5 * 10^11 byte comparisons here).
    #[test]
    fn one_byte_chunks_take_linear_time() {
        let mut stream = b"id: big\ndata: ".to_vec();
        stream.extend(std::iter::repeat_n(b'x', 1 << 20));
        stream.extend_from_slice(b"\n\n");
        let mut p = Parser::new(2 << 20);
        let start = std::time::Instant::now();
        let mut got = Vec::new();
        for b in &stream {
            got.extend(p.feed(std::slice::from_ref(b)));
        }
        assert!(start.elapsed() < std::time::Duration::from_secs(20));
        let got = events(got);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].id.as_deref(), Some("big"));
        assert_eq!(got[0].data.len(), 1 << 20);
    }

    #[test]
    fn encodes_events() {
        assert_eq!(
            &encode_event("s1e2", Some(500), b"{}")[..],
            b"id: s1e2\nretry: 500\ndata: {}\n\n"
        );
    }
}
