//! The floor: two processes of our own trading the same bytes as an MCP `echo` round trip over
//! the same kind of pipes, with no JSON work. What any MCP implementation's stdio round trip can
//! at best approach on this machine.
//!
//! `floor client [--calls N] [--concurrency K] -- SERVER COMMAND...` spawns the server and sends
//! `tools/call` request lines byte for byte as purra's client writes them (distinct ids and
//! texts), at most K unanswered, each write carrying every request the window allows; it checks
//! that each answer line carries the id and text it should. `floor server` answers each request
//! line with the response line purra's server writes, found by byte search (no parsing),
//! writing every answer of one read in one write. Blocking I/O, one thread per process.

#![allow(clippy::print_stdout)] // a benchmark program: stdout is its result

use std::collections::HashMap;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::Instant;

use purra_bench::{echo_text, micros_since, result_line, ClientArgs, Latencies};

fn request(id: usize, text: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(id.to_string().as_bytes());
    out.extend_from_slice(
        br#","method":"tools/call","params":{"name":"echo","arguments":{"text":""#,
    );
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(b"\"}}}\n");
}

fn response(id: &[u8], text: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(id);
    out.extend_from_slice(br#","result":{"content":[{"type":"text","text":""#);
    out.extend_from_slice(text);
    out.extend_from_slice(b"\"}]}}\n");
}

/// The bytes after `key` up to (not including) `end`.
fn between<'a>(line: &'a [u8], key: &[u8], end: u8) -> Option<&'a [u8]> {
    let at = memchr::memmem::find(line, key)? + key.len();
    let len = memchr::memchr(end, &line[at..])?;
    Some(&line[at..at + len])
}

/// Splits complete lines off the front of `buf`, calling `f` on each; keeps the partial rest.
fn each_line(
    buf: &mut Vec<u8>,
    mut f: impl FnMut(&[u8]) -> Result<(), String>,
) -> Result<(), String> {
    let mut start = 0;
    while let Some(nl) = memchr::memchr(b'\n', &buf[start..]) {
        f(&buf[start..start + nl])?;
        start += nl + 1;
    }
    buf.drain(..start);
    Ok(())
}

fn server() -> Result<(), String> {
    let mut stdin = std::io::stdin().lock();
    let mut stdout = std::io::stdout().lock();
    let mut buf = Vec::with_capacity(1 << 16);
    let mut chunk = vec![0u8; 1 << 16];
    let mut out = Vec::with_capacity(1 << 16);
    loop {
        let n = stdin.read(&mut chunk).map_err(|e| e.to_string())?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        each_line(&mut buf, |line| {
            let id = between(line, br#""id":"#, b',').ok_or("no id")?;
            let text = between(line, br#""text":""#, b'"').ok_or("no text")?;
            response(id, text, &mut out);
            Ok(())
        })?;
        if !out.is_empty() {
            stdout.write_all(&out).map_err(|e| e.to_string())?;
            stdout.flush().map_err(|e| e.to_string())?;
            out.clear();
        }
    }
}

/// Runs `calls` round trips with at most `window` unanswered; returns each call's latency.
fn exchange(
    to: &mut impl Write,
    from: &mut impl Read,
    first: usize,
    calls: usize,
    window: usize,
) -> Result<Vec<f64>, String> {
    let mut sent_at: HashMap<usize, Instant> = HashMap::with_capacity(window * 2);
    let mut lat = Vec::with_capacity(calls);
    let (mut sent, mut done) = (0, 0);
    let mut out = Vec::with_capacity(256 * window);
    let mut buf = Vec::with_capacity(1 << 16);
    let mut chunk = vec![0u8; 1 << 16];
    while done < calls {
        while sent < calls && sent - done < window {
            let id = first + sent;
            request(id, &echo_text(id), &mut out);
            sent_at.insert(id, Instant::now());
            sent += 1;
        }
        if !out.is_empty() {
            to.write_all(&out).map_err(|e| e.to_string())?;
            to.flush().map_err(|e| e.to_string())?;
            out.clear();
        }
        let n = from.read(&mut chunk).map_err(|e| e.to_string())?;
        if n == 0 {
            return Err(format!("server closed after {done} answers"));
        }
        buf.extend_from_slice(&chunk[..n]);
        each_line(&mut buf, |line| {
            let id: usize = between(line, br#""id":"#, b',')
                .and_then(|i| std::str::from_utf8(i).ok()?.parse().ok())
                .ok_or_else(|| format!("answer without id: {}", String::from_utf8_lossy(line)))?;
            let t = sent_at
                .remove(&id)
                .ok_or_else(|| format!("unexpected answer {id}"))?;
            if between(line, br#""text":""#, b'"') != Some(echo_text(id).as_bytes()) {
                return Err(format!(
                    "call {id}: wrong answer {}",
                    String::from_utf8_lossy(line)
                ));
            }
            lat.push(micros_since(t));
            done += 1;
            Ok(())
        })?;
    }
    Ok(lat)
}

fn client(args: ClientArgs) -> Result<(), String> {
    let mut child = Command::new(&args.command[0])
        .args(&args.command[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("spawn: {e}"))?;
    let mut to = child.stdin.take().expect("piped");
    let mut from = child.stdout.take().expect("piped");
    exchange(&mut to, &mut from, 1_000_000, 500, 1)?;
    let start = Instant::now();
    let lat = exchange(&mut to, &mut from, 0, args.calls, 1)?;
    let sequential = start.elapsed();
    let per = args.calls / args.concurrency;
    let start = Instant::now();
    exchange(
        &mut to,
        &mut from,
        2_000_000,
        per * args.concurrency,
        args.concurrency,
    )?;
    let concurrent = start.elapsed();
    let line = result_line(
        "floor",
        args.calls,
        sequential,
        &Latencies::new(lat),
        args.concurrency,
        per * args.concurrency,
        concurrent,
    );
    println!("{line}");
    drop(to);
    child.wait().map_err(|e| e.to_string())?;
    Ok(())
}

fn main() {
    let mut argv = std::env::args().skip(1);
    let result = match argv.next().as_deref() {
        Some("server") => server(),
        Some("client") => ClientArgs::parse(argv).and_then(client),
        _ => Err(
            "usage: floor server | floor client [--calls N] [--concurrency K] -- SERVER...".into(),
        ),
    };
    if let Err(e) = result {
        eprintln!("floor: {e}");
        std::process::exit(1);
    }
}
