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
//!
//! Two switches, given to both sides, measure what the floor leaves out, one part at a time:
//! `--json` reads and writes every message with serde (the request into typed structs with owned
//! strings, its method and tool checked, the result serialized from typed structs, the client
//! reading the answer the same way): the least JSON work a typed MCP `echo` needs; `--tokio` does
//! the same I/O on a current-thread tokio runtime (non-blocking pipes woken through epoll) instead
//! of blocking reads and writes. Neither is an MCP implementation; both bound what one can reach.

#![allow(clippy::print_stdout)] // a benchmark program: stdout is its result

use std::collections::HashMap;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::Instant;

use purra_bench::{echo_text, micros_since, result_line, ClientArgs, Latencies};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How each side reads and writes messages, and with what I/O.
#[derive(Clone, Copy)]
struct Mode {
    json: bool,
    tokio: bool,
    mt: bool,
}

impl Mode {
    /// Takes `--json` and `--tokio` out of `args`.
    fn take(args: &mut Vec<String>) -> Mode {
        let mut take = |flag: &str| match args.iter().position(|a| a == flag) {
            // Only before `--`: after it the words are the server's command.
            Some(i) if args[..i].iter().all(|a| a != "--") => {
                args.remove(i);
                true
            }
            _ => false,
        };
        Mode {
            json: take("--json"),
            tokio: take("--tokio"),
            mt: take("--mt"),
        }
    }

    fn name(self) -> &'static str {
        match (self.json, self.tokio, self.mt) {
            (false, false, _) => "floor",
            (true, false, _) => "floor-json",
            (false, true, false) => "floor-tokio",
            (true, true, false) => "floor-json-tokio",
            (false, true, true) => "floor-tokio-mt",
            (true, true, true) => "floor-json-tokio-mt",
        }
    }
}

#[derive(Serialize)]
struct OutRequest<'a> {
    jsonrpc: &'static str,
    id: usize,
    method: &'static str,
    params: OutParams<'a>,
}

#[derive(Serialize)]
struct OutParams<'a> {
    name: &'static str,
    arguments: OutArguments<'a>,
}

#[derive(Serialize)]
struct OutArguments<'a> {
    text: &'a str,
}

#[derive(Deserialize)]
struct InRequest {
    jsonrpc: String,
    id: usize,
    method: String,
    params: InParams,
}

#[derive(Deserialize)]
struct InParams {
    name: String,
    arguments: InArguments,
}

#[derive(Deserialize)]
struct InArguments {
    text: String,
}

#[derive(Serialize)]
struct OutResponse<'a> {
    jsonrpc: &'static str,
    id: usize,
    result: OutResult<'a>,
}

#[derive(Serialize)]
struct OutResult<'a> {
    content: [OutBlock<'a>; 1],
}

#[derive(Serialize)]
struct OutBlock<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
}

#[derive(Deserialize)]
struct InResponse {
    jsonrpc: String,
    id: usize,
    result: InResult,
}

#[derive(Deserialize)]
struct InResult {
    content: Vec<InBlock>,
}

#[derive(Deserialize)]
struct InBlock {
    #[serde(rename = "type")]
    kind: String,
    text: String,
}

/// Appends request `id` with `text`, one line.
fn write_request(mode: Mode, id: usize, text: &str, out: &mut Vec<u8>) {
    if mode.json {
        let r = OutRequest {
            jsonrpc: "2.0",
            id,
            method: "tools/call",
            params: OutParams {
                name: "echo",
                arguments: OutArguments { text },
            },
        };
        serde_json::to_writer(&mut *out, &r).expect("serializes");
        out.push(b'\n');
    } else {
        request(id, text, out);
    }
}

/// Appends the answer to request `line`, one line.
fn answer(mode: Mode, line: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    if !mode.json {
        let id = between(line, br#""id":"#, b',').ok_or("no id")?;
        let text = between(line, br#""text":""#, b'"').ok_or("no text")?;
        response(id, text, out);
        return Ok(());
    }
    let r: InRequest = serde_json::from_slice(line).map_err(|e| e.to_string())?;
    if r.jsonrpc != "2.0" || r.method != "tools/call" || r.params.name != "echo" {
        return Err(format!(
            "unexpected request {}",
            String::from_utf8_lossy(line)
        ));
    }
    let a = OutResponse {
        jsonrpc: "2.0",
        id: r.id,
        result: OutResult {
            content: [OutBlock {
                kind: "text",
                text: &r.params.arguments.text,
            }],
        },
    };
    serde_json::to_writer(&mut *out, &a).map_err(|e| e.to_string())?;
    out.push(b'\n');
    Ok(())
}

/// The id of answer `line`, after checking that it echoes that call's text.
fn check(mode: Mode, line: &[u8]) -> Result<usize, String> {
    let wrong = || format!("wrong answer {}", String::from_utf8_lossy(line));
    if !mode.json {
        let id: usize = between(line, br#""id":"#, b',')
            .and_then(|i| std::str::from_utf8(i).ok()?.parse().ok())
            .ok_or_else(|| format!("answer without id: {}", String::from_utf8_lossy(line)))?;
        if between(line, br#""text":""#, b'"') != Some(echo_text(id).as_bytes()) {
            return Err(wrong());
        }
        return Ok(id);
    }
    let r: InResponse = serde_json::from_slice(line).map_err(|e| e.to_string())?;
    match r.result.content.as_slice() {
        [b] if r.jsonrpc == "2.0" && b.kind == "text" && b.text == echo_text(r.id) => Ok(r.id),
        _ => Err(wrong()),
    }
}

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

fn server(mode: Mode) -> Result<(), String> {
    if mode.tokio {
        return runtime().block_on(server_async(mode));
    }
    let mut stdin = std::io::stdin().lock();
    let mut stdout = std::io::stdout().lock();
    let mut s = Serving::new(mode);
    loop {
        let n = stdin.read(&mut s.chunk).map_err(|e| e.to_string())?;
        if n == 0 {
            return Ok(());
        }
        s.took(n)?;
        if !s.out.is_empty() {
            stdout.write_all(&s.out).map_err(|e| e.to_string())?;
            stdout.flush().map_err(|e| e.to_string())?;
            s.out.clear();
        }
    }
}

/// A server's buffers, shared by the blocking and the tokio loops.
struct Serving {
    mode: Mode,
    buf: Vec<u8>,
    chunk: Vec<u8>,
    out: Vec<u8>,
}

impl Serving {
    fn new(mode: Mode) -> Serving {
        Serving {
            mode,
            buf: Vec::with_capacity(1 << 16),
            chunk: vec![0u8; 1 << 16],
            out: Vec::with_capacity(1 << 16),
        }
    }

    /// Takes the `n` bytes just read into `chunk`: answers every complete request into `out`.
    fn took(&mut self, n: usize) -> Result<(), String> {
        self.buf.extend_from_slice(&self.chunk[..n]);
        let (mode, out) = (self.mode, &mut self.out);
        each_line(&mut self.buf, |line| answer(mode, line, out))
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// The client's runtime: `#[tokio::main]`'s (multi-thread, the calls made in `block_on`'s
/// future) with `--mt`, else current-thread.
fn client_runtime(mode: Mode) -> tokio::runtime::Runtime {
    if !mode.mt {
        return runtime();
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// The server on non-blocking pipes (stdin and stdout must be pipes, as the client makes them).
async fn server_async(mode: Mode) -> Result<(), String> {
    use std::os::fd::AsFd;
    use tokio::net::unix::pipe;
    let own = |fd: std::os::fd::BorrowedFd<'_>| -> Result<std::fs::File, String> {
        Ok(std::fs::File::from(
            fd.try_clone_to_owned().map_err(|e| e.to_string())?,
        ))
    };
    let mut stdin = pipe::Receiver::from_file(own(std::io::stdin().as_fd())?)
        .map_err(|e| format!("stdin: {e}"))?;
    let mut stdout = pipe::Sender::from_file(own(std::io::stdout().as_fd())?)
        .map_err(|e| format!("stdout: {e}"))?;
    let mut s = Serving::new(mode);
    loop {
        let n = stdin.read(&mut s.chunk).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Ok(());
        }
        s.took(n)?;
        if !s.out.is_empty() {
            stdout.write_all(&s.out).await.map_err(|e| e.to_string())?;
            s.out.clear();
        }
    }
}

/// One client run's bookkeeping, shared by the blocking and the tokio loops: requests written
/// into `out` while the window allows, answers checked as lines arrive.
struct Exchange {
    mode: Mode,
    first: usize,
    calls: usize,
    window: usize,
    sent_at: HashMap<usize, Instant>,
    lat: Vec<f64>,
    sent: usize,
    done: usize,
    out: Vec<u8>,
    buf: Vec<u8>,
    chunk: Vec<u8>,
}

impl Exchange {
    fn new(mode: Mode, first: usize, calls: usize, window: usize) -> Exchange {
        Exchange {
            mode,
            first,
            calls,
            window,
            sent_at: HashMap::with_capacity(window * 2),
            lat: Vec::with_capacity(calls),
            sent: 0,
            done: 0,
            out: Vec::with_capacity(256 * window),
            buf: Vec::with_capacity(1 << 16),
            chunk: vec![0u8; 1 << 16],
        }
    }

    fn finished(&self) -> bool {
        self.done >= self.calls
    }

    /// Writes the requests the window allows into `out`.
    fn fill(&mut self) {
        while self.sent < self.calls && self.sent - self.done < self.window {
            let id = self.first + self.sent;
            write_request(self.mode, id, &echo_text(id), &mut self.out);
            self.sent_at.insert(id, Instant::now());
            self.sent += 1;
        }
    }

    /// Takes the `n` bytes just read into `chunk`: checks every complete answer.
    fn took(&mut self, n: usize) -> Result<(), String> {
        if n == 0 {
            return Err(format!("server closed after {} answers", self.done));
        }
        self.buf.extend_from_slice(&self.chunk[..n]);
        let (mode, sent_at, lat, done) =
            (self.mode, &mut self.sent_at, &mut self.lat, &mut self.done);
        each_line(&mut self.buf, |line| {
            let id = check(mode, line)?;
            let t = sent_at
                .remove(&id)
                .ok_or_else(|| format!("unexpected answer {id}"))?;
            lat.push(micros_since(t));
            *done += 1;
            Ok(())
        })
    }
}

/// Runs `calls` round trips with at most `window` unanswered; returns each call's latency.
fn exchange(
    mode: Mode,
    to: &mut impl Write,
    from: &mut impl Read,
    first: usize,
    calls: usize,
    window: usize,
) -> Result<Vec<f64>, String> {
    let mut x = Exchange::new(mode, first, calls, window);
    while !x.finished() {
        x.fill();
        if !x.out.is_empty() {
            to.write_all(&x.out).map_err(|e| e.to_string())?;
            to.flush().map_err(|e| e.to_string())?;
            x.out.clear();
        }
        let n = from.read(&mut x.chunk).map_err(|e| e.to_string())?;
        x.took(n)?;
    }
    Ok(x.lat)
}

/// [`exchange`] on tokio's non-blocking pipes.
async fn exchange_async(
    mode: Mode,
    to: &mut tokio::process::ChildStdin,
    from: &mut tokio::process::ChildStdout,
    first: usize,
    calls: usize,
    window: usize,
) -> Result<Vec<f64>, String> {
    let mut x = Exchange::new(mode, first, calls, window);
    while !x.finished() {
        x.fill();
        if !x.out.is_empty() {
            to.write_all(&x.out).await.map_err(|e| e.to_string())?;
            x.out.clear();
        }
        let n = from.read(&mut x.chunk).await.map_err(|e| e.to_string())?;
        x.took(n)?;
    }
    Ok(x.lat)
}

fn client(mode: Mode, args: ClientArgs) -> Result<(), String> {
    let per = args.calls / args.concurrency;
    let (lat, sequential, concurrent) = if mode.tokio {
        client_runtime(mode).block_on(client_async(mode, &args))?
    } else {
        let mut child = Command::new(&args.command[0])
            .args(&args.command[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("spawn: {e}"))?;
        let mut to = child.stdin.take().expect("piped");
        let mut from = child.stdout.take().expect("piped");
        exchange(mode, &mut to, &mut from, 1_000_000, 500, 1)?;
        let start = Instant::now();
        let lat = exchange(mode, &mut to, &mut from, 0, args.calls, 1)?;
        let sequential = start.elapsed();
        let start = Instant::now();
        exchange(
            mode,
            &mut to,
            &mut from,
            2_000_000,
            per * args.concurrency,
            args.concurrency,
        )?;
        let concurrent = start.elapsed();
        drop(to);
        child.wait().map_err(|e| e.to_string())?;
        (lat, sequential, concurrent)
    };
    let line = result_line(
        mode.name(),
        args.calls,
        sequential,
        &Latencies::new(lat),
        args.concurrency,
        per * args.concurrency,
        concurrent,
    );
    println!("{line}");
    Ok(())
}

async fn client_async(
    mode: Mode,
    args: &ClientArgs,
) -> Result<(Vec<f64>, std::time::Duration, std::time::Duration), String> {
    let mut child = tokio::process::Command::new(&args.command[0])
        .args(&args.command[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("spawn: {e}"))?;
    let mut to = child.stdin.take().expect("piped");
    let mut from = child.stdout.take().expect("piped");
    exchange_async(mode, &mut to, &mut from, 1_000_000, 500, 1).await?;
    let start = Instant::now();
    let lat = exchange_async(mode, &mut to, &mut from, 0, args.calls, 1).await?;
    let sequential = start.elapsed();
    let per = args.calls / args.concurrency;
    let start = Instant::now();
    exchange_async(
        mode,
        &mut to,
        &mut from,
        2_000_000,
        per * args.concurrency,
        args.concurrency,
    )
    .await?;
    let concurrent = start.elapsed();
    drop(to);
    child.wait().await.map_err(|e| e.to_string())?;
    Ok((lat, sequential, concurrent))
}

fn main() {
    let mut argv: Vec<String> = std::env::args().skip(1).collect();
    let mode = Mode::take(&mut argv);
    let mut argv = argv.into_iter();
    let result = match argv.next().as_deref() {
        Some("server") if argv.len() == 0 => server(mode),
        Some("client") => ClientArgs::parse(argv).and_then(|a| client(mode, a)),
        _ => Err(
            "usage: floor server [--json] [--tokio] | floor client [--json] [--tokio] \
                  [--calls N] [--concurrency K] -- SERVER..."
                .into(),
        ),
    };
    if let Err(e) = result {
        eprintln!("floor: {e}");
        std::process::exit(1);
    }
}
