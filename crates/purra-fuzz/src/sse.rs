//! The SSE parser: what it yields does not depend on chunking (whole, random chunks, one byte at a
//! time), every event stays within the bound, and events written as the server writes them parse
//! back exactly.

use purra_protocol::__private::{SseEvent, SseItem, SseParser};

use crate::input::{chunks, Input};

/// Checks one input: a bound (1 to 128 bytes), chunk sizes, then the stream.
pub fn check(data: &[u8]) {
    let mut input = Input::new(data);
    let max = 1 + usize::from(input.byte() % 128);
    let spec_len = usize::from(input.byte() % 8);
    let spec = input.take(spec_len);
    let stream = input.rest();

    let whole = feed(&[stream], max);
    assert_eq!(
        whole,
        feed(&chunks(spec, stream), max),
        "random chunks (bound {max})"
    );
    let bytes: Vec<&[u8]> = stream.chunks(1).collect();
    assert_eq!(whole, feed(&bytes, max), "one byte at a time (bound {max})");
    for item in &whole {
        if let SseItem::Event(e) = item {
            assert!(
                e.data.len() <= max,
                "data of {} bytes, bound {max}",
                e.data.len()
            );
            // A field value is one line of at most `max` bytes; lossy UTF-8 may triple it.
            for field in [&e.id, &e.event].into_iter().flatten() {
                assert!(field.len() <= 3 * max, "a field of {} bytes", field.len());
            }
        }
    }
    round_trip(stream);
}

fn feed(parts: &[&[u8]], max: usize) -> Vec<SseItem> {
    let mut parser = SseParser::new(max);
    parts.iter().flat_map(|p| parser.feed(p)).collect()
}

/// Events made from the stream's pieces (split at 0xFF, line ends dropped), written with an id and
/// a retry as the server writes them, come back one for one.
fn round_trip(stream: &[u8]) {
    let mut text = Vec::new();
    let mut expected = Vec::new();
    for (i, piece) in stream.split(|b| *b == 0xFF).enumerate().take(16) {
        let data: Vec<u8> = piece
            .iter()
            .copied()
            .filter(|b| *b != b'\n' && *b != b'\r')
            .collect();
        let data = String::from_utf8_lossy(&data).into_owned();
        text.extend_from_slice(format!("id: s1e{i}\nretry: {i}\ndata: {data}\n\n").as_bytes());
        expected.push(SseItem::Event(SseEvent {
            id: Some(format!("s1e{i}")),
            event: None,
            // One leading space is the separator; a second one is data.
            data,
            retry: Some(i as u64),
        }));
    }
    assert_eq!(feed(&[&text], 1 << 20), expected, "round trip of {text:?}");
}
