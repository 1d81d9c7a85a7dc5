//! The stdio line reader under random chunking: what it delivers does not depend on how the bytes
//! arrive, and equals a line-by-line model (blank lines skipped, a line longer than the bound
//! reported as oversize with its exact length, first and last bytes).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use purra_protocol::Inbound;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::mpsc;

use crate::input::{chunks, Input};

/// How many bytes of an oversize line's ends are kept (`Inbound::Oversize`'s head and tail).
const PEEK_BYTES: usize = 4096;

/// What the reader delivered, comparable.
#[derive(Debug, PartialEq, Eq)]
enum Item {
    Frame(Bytes),
    Oversize {
        len: usize,
        head: Bytes,
        tail: Bytes,
    },
}

/// Checks one input: a bound (1 to 64 bytes, or 5000 to test the head and tail), chunk sizes,
/// then the stream.
pub fn check(data: &[u8]) {
    let mut input = Input::new(data);
    let b = input.byte();
    let max = if b == 255 {
        5000
    } else {
        1 + usize::from(b % 64)
    };
    let spec_len = usize::from(input.byte() % 8);
    let spec = input.take(spec_len);
    let stream = input.rest();
    let whole = read(vec![stream], max);
    let chunked = read(chunks(spec, stream), max);
    assert_eq!(
        whole, chunked,
        "chunking changed what was read (bound {max})"
    );
    assert_eq!(
        whole,
        model(stream, max),
        "the reader differs from the model (bound {max})"
    );
}

/// The reader's output when `parts` arrive one read at a time.
fn read(parts: Vec<&[u8]>, max: usize) -> Vec<Item> {
    let rt = crate::paused_runtime();
    rt.block_on(async {
        let (tx, mut rx) = mpsc::channel(16);
        let reader = Chunked {
            parts: parts.into_iter().map(Bytes::copy_from_slice).collect(),
            next: 0,
        };
        let collect = async {
            let mut out = Vec::new();
            while let Some(item) = rx.recv().await {
                out.push(match item {
                    Inbound::Frame(f) => Item::Frame(f),
                    Inbound::Oversize { len, head, tail } => Item::Oversize { len, head, tail },
                    other => panic!("the line reader delivered {other:?}"),
                });
            }
            out
        };
        let ((), out) = tokio::join!(
            purra_protocol::__private::read_lines(reader, max, tx),
            collect
        );
        out
    })
}

/// The reference: split on `\n`; a line (its `\r` included) longer than the bound is oversize;
/// otherwise one trailing `\r` goes and a blank line is skipped. The last line needs no `\n`.
fn model(stream: &[u8], max: usize) -> Vec<Item> {
    let mut out = Vec::new();
    let mut lines: Vec<&[u8]> = stream.split(|b| *b == b'\n').collect();
    if lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    for line in lines {
        if line.len() > max {
            out.push(Item::Oversize {
                len: line.len(),
                head: Bytes::copy_from_slice(&line[..line.len().min(PEEK_BYTES)]),
                tail: Bytes::copy_from_slice(&line[line.len().saturating_sub(PEEK_BYTES)..]),
            });
            continue;
        }
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if !line.iter().all(u8::is_ascii_whitespace) {
            out.push(Item::Frame(Bytes::copy_from_slice(line)));
        }
    }
    out
}

/// An `AsyncRead` that hands out `parts` one per read.
struct Chunked {
    parts: Vec<Bytes>,
    next: usize,
}

impl AsyncRead for Chunked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if let Some(part) = this.parts.get_mut(this.next) {
            let n = part.len().min(buf.remaining());
            buf.put_slice(&part.split_to(n));
            if part.is_empty() {
                this.next += 1;
            }
        }
        Poll::Ready(Ok(()))
    }
}
