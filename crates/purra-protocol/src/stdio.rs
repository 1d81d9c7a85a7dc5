//! stdio: newline-delimited JSON-RPC over a child's pipes (client) or the process's own
//! stdin/stdout (server), with bounded line reading and one writer that batches flushes.
//!
//! **Architecture invariant:** this is the only module that writes to the process's stdout.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fmt;
#[cfg(unix)]
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

#[cfg(unix)]
use crate::lane::{InlineWrite, Lane};
use crate::peek::PEEK_BYTES;
use crate::transport::{
    Inbound, InboundSource, Outbound, OutboundSink, Transport, CHANNEL_CAPACITY,
    DEFAULT_MAX_FRAME_BYTES,
};

/// Reads newline-delimited frames from `reader` into `tx` ([`LineReader`]), for a transport
/// whose engine reads a channel.
pub(crate) async fn read_lines<R: AsyncRead + Unpin>(
    reader: R,
    max_frame: usize,
    tx: mpsc::Sender<Inbound>,
) {
    let mut lines = LineReader::new(reader, max_frame);
    while let Some(item) = lines.next().await {
        if tx.send(item).await.is_err() {
            return;
        }
    }
}

/// Newline-delimited frames from a reader, never buffering more than `max_frame` bytes of one
/// line: a longer line (its `\r` included, blank or not) is discarded and reported as
/// [`Inbound::Oversize`], with its first and last few KiB so the engine can tell what it was.
/// Otherwise a trailing `\r` is dropped and a blank line skipped. A final line without a
/// newline is delivered at EOF. How the bytes are chunked changes nothing.
///
/// The engine of a stdio connection reads it in place ([`InboundSource::Lines`]): a frame
/// already buffered costs no system call, and no task or channel stands between the pipe and
/// the engine.
pub(crate) struct LineReader<R> {
    reader: R,
    max_frame: usize,
    buf: BytesMut,
    /// How much of `buf` is known to hold no newline.
    scanned: usize,
    /// The line being discarded, once it has grown past the bound.
    discarding: Option<Discard>,
    /// The input ended or failed: nothing more comes.
    done: bool,
}

impl<R> fmt::Debug for LineReader<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LineReader")
            .field("buffered", &self.buf.len())
            .field("done", &self.done)
            .finish()
    }
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    /// Lines of at most `max_frame` bytes from `reader`.
    pub(crate) fn new(reader: R, max_frame: usize) -> Self {
        LineReader {
            reader,
            max_frame,
            buf: BytesMut::with_capacity(64 * 1024),
            scanned: 0,
            discarding: None,
            done: false,
        }
    }

    /// The next frame (or oversize report, or read failure); `None` once the input has ended.
    /// Cancel-safe: the only wait is the read, and what a read returns is buffered before this
    /// returns or waits again.
    pub(crate) async fn next(&mut self) -> Option<Inbound> {
        loop {
            if self.done {
                return None;
            }
            if let Some(item) = self.buffered() {
                return Some(item);
            }
            match self.reader.read_buf(&mut self.buf).await {
                Ok(0) => {
                    self.done = true;
                    return self.at_end();
                }
                Ok(_) => {}
                Err(e) => {
                    self.done = true;
                    return Some(Inbound::Failed(format!("read failed: {e}")));
                }
            }
        }
    }

    /// The next complete line already buffered, if any; otherwise bounds what is buffered and
    /// makes room for the next read.
    fn buffered(&mut self) -> Option<Inbound> {
        while let Some(pos) = memchr::memchr(b'\n', &self.buf[self.scanned..]) {
            let end = self.scanned + pos;
            let mut line = self.buf.split_to(end + 1);
            self.scanned = 0;
            line.truncate(end);
            if let Some(mut d) = self.discarding.take() {
                d.push(&line);
                return Some(d.finish());
            }
            // The bound applies before anything is dropped, as it does to a line still arriving.
            if line.len() > self.max_frame {
                return Some(Discard::of(&line).finish());
            }
            if line.last() == Some(&b'\r') {
                line.truncate(line.len() - 1);
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            return Some(Inbound::Frame(line.freeze()));
        }
        self.scanned = self.buf.len();
        match &mut self.discarding {
            Some(d) => {
                // Only the newline is looked for now; nothing of the line is kept but its ends.
                d.push(&self.buf);
                self.buf.clear();
                self.scanned = 0;
            }
            None if self.buf.len() > self.max_frame => {
                self.discarding = Some(Discard::of(&self.buf));
                self.buf.clear();
                self.scanned = 0;
            }
            None => {}
        }
        if self.buf.capacity() - self.buf.len() < 8 * 1024 {
            self.buf.reserve(64 * 1024);
        }
        None
    }

    /// What is left at the end of the input: the last line, if it had no newline.
    fn at_end(&mut self) -> Option<Inbound> {
        match self.discarding.take() {
            Some(mut d) => {
                d.push(&self.buf);
                Some(d.finish())
            }
            None if self.buf.len() > self.max_frame => Some(Discard::of(&self.buf).finish()),
            None => {
                if self.buf.last() == Some(&b'\r') {
                    self.buf.truncate(self.buf.len() - 1);
                }
                if self.buf.iter().all(u8::is_ascii_whitespace) {
                    None
                } else {
                    Some(Inbound::Frame(self.buf.split().freeze()))
                }
            }
        }
    }
}

/// A line being discarded: how long it is so far, its first and its last bytes.
#[derive(Debug, Default)]
pub(crate) struct Discard {
    len: usize,
    head: Vec<u8>,
    tail: Vec<u8>,
}

impl Discard {
    /// Starts with `bytes`.
    pub(crate) fn of(bytes: &[u8]) -> Discard {
        let mut d = Discard::default();
        d.push(bytes);
        d
    }

    /// Takes the next bytes of the line into account.
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        self.len += bytes.len();
        if self.head.len() < PEEK_BYTES {
            let take = (PEEK_BYTES - self.head.len()).min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
        }
        if bytes.len() >= PEEK_BYTES {
            self.tail.clear();
            self.tail
                .extend_from_slice(&bytes[bytes.len() - PEEK_BYTES..]);
        } else {
            self.tail.extend_from_slice(bytes);
            let excess = self.tail.len().saturating_sub(PEEK_BYTES);
            self.tail.drain(..excess);
        }
    }

    /// The report for the engine.
    pub(crate) fn finish(self) -> Inbound {
        Inbound::Oversize {
            len: self.len,
            head: Bytes::from(self.head),
            tail: Bytes::from(self.tail),
        }
    }
}

/// Writes frames from `rx`, newline-terminated: everything queued is written before one flush.
/// When `close` fires, what is already queued is still written, then the writer shuts down.
pub(crate) async fn write_lines<W: AsyncWrite + Unpin>(
    mut writer: W,
    mut rx: mpsc::Receiver<Outbound>,
    close: CancellationToken,
) {
    let mut buf: Vec<u8> = Vec::with_capacity(64 * 1024);
    loop {
        let first = tokio::select! {
            biased;
            m = rx.recv() => m,
            _ = close.cancelled() => None,
        };
        let Some(first) = first else { break };
        buf.extend_from_slice(&first.frame);
        buf.push(b'\n');
        while buf.len() < 1024 * 1024 {
            match rx.try_recv() {
                Ok(m) => {
                    buf.extend_from_slice(&m.frame);
                    buf.push(b'\n');
                }
                Err(_) => break,
            }
        }
        if writer.write_all(&buf).await.is_err() || writer.flush().await.is_err() {
            return;
        }
        buf.clear();
    }
    while let Ok(m) = rx.try_recv() {
        buf.extend_from_slice(&m.frame);
        buf.push(b'\n');
    }
    if !buf.is_empty() {
        let _ = writer.write_all(&buf).await;
    }
    let _ = writer.flush().await;
    let _ = writer.shutdown().await;
}

/// Starts a transport over any reader and writer (a socket, a pipe pair, a test duplex).
pub fn transport<R, W>(reader: R, writer: W, max_frame: usize) -> Transport
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (in_tx, in_rx) = mpsc::channel(CHANNEL_CAPACITY);
    let (out_tx, out_rx) = mpsc::channel(CHANNEL_CAPACITY);
    let close = CancellationToken::new();
    tokio::spawn(read_lines(reader, max_frame, in_tx));
    let flushed = CancellationToken::new();
    tokio::spawn(write_then_signal(
        writer,
        out_rx,
        close.clone(),
        flushed.clone(),
    ));
    let mut t = Transport::from_channels(in_rx, out_tx, close).labeled("stdio", None);
    t.flushed = Some(flushed);
    t
}

/// The write side of a lane ([`crate::lane`]): written inline by senders outside the runtime's
/// tasks while idle, and by [`write_lane`] otherwise.
#[cfg(unix)]
pub(crate) trait LaneWrite: InlineWrite + AsyncWrite + Unpin + 'static {
    /// Waits until the write side can take more.
    fn writable(&self) -> impl std::future::Future<Output = std::io::Result<()>> + Send;
}

#[cfg(unix)]
impl InlineWrite for tokio::net::unix::pipe::Sender {
    fn try_write_vectored(&self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
        tokio::net::unix::pipe::Sender::try_write_vectored(self, bufs)
    }
}

#[cfg(unix)]
impl LaneWrite for tokio::net::unix::pipe::Sender {
    fn writable(&self) -> impl std::future::Future<Output = std::io::Result<()>> + Send {
        tokio::net::unix::pipe::Sender::writable(self)
    }
}

#[cfg(unix)]
impl InlineWrite for tokio::net::UnixStream {
    fn try_write_vectored(&self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
        tokio::net::UnixStream::try_write_vectored(self, bufs)
    }
}

#[cfg(unix)]
impl LaneWrite for tokio::net::UnixStream {
    fn writable(&self) -> impl std::future::Future<Output = std::io::Result<()>> + Send {
        tokio::net::UnixStream::writable(self)
    }
}

/// Writes all of `buf` through `w`'s non-blocking writes, waiting for room as needed.
#[cfg(unix)]
async fn write_all_ready<W: LaneWrite>(w: &W, mut buf: &[u8]) -> std::io::Result<()> {
    // Written at once while the pipe has room (the usual case); waits for room only when full.
    while !buf.is_empty() {
        match w.try_write_vectored(&[std::io::IoSlice::new(buf)]) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => w.writable().await?,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// [`write_lines`] for a lane's write side: the same batching and the same close, and after
/// each write it tells the lane whether it is idle, so senders outside the runtime's tasks may
/// write inline ([`crate::lane`]). The lane is held weakly: it holds the channel's sender, and
/// the writer must see the channel close when the last sender goes.
#[cfg(unix)]
async fn write_lane<W: LaneWrite>(
    w: Arc<W>,
    lane: std::sync::Weak<Lane>,
    mut rx: mpsc::Receiver<Outbound>,
    close: CancellationToken,
    flushed: CancellationToken,
) {
    let mut buf: Vec<u8> = Vec::with_capacity(64 * 1024);
    let push = |buf: &mut Vec<u8>, m: Outbound| {
        buf.extend_from_slice(&m.frame);
        buf.push(b'\n');
    };
    // One wait for the close, made once (a new one per message costs a registration each).
    let closing = close.cancelled();
    tokio::pin!(closing);
    'wait: loop {
        let first = tokio::select! {
            biased;
            m = rx.recv() => m,
            _ = &mut closing => None,
        };
        let Some(first) = first else { break };
        push(&mut buf, first);
        loop {
            while buf.len() < 1024 * 1024 {
                match rx.try_recv() {
                    Ok(m) => push(&mut buf, m),
                    Err(_) => break,
                }
            }
            if write_all_ready(&*w, &buf).await.is_err() {
                if let Some(lane) = lane.upgrade() {
                    lane.stop();
                }
                flushed.cancel();
                return;
            }
            buf.clear();
            let next = match lane.upgrade() {
                Some(lane) => lane.idle(&mut rx),
                None => rx.try_recv().ok(),
            };
            match next {
                Some(m) => push(&mut buf, m),
                None => continue 'wait,
            }
        }
    }
    // Closing: inline writes end here; what is queued is still written, then the side is shut.
    if let Some(lane) = lane.upgrade() {
        lane.stop();
    }
    while let Ok(m) = rx.try_recv() {
        push(&mut buf, m);
    }
    if !buf.is_empty() {
        let _ = write_all_ready(&*w, &buf).await;
    }
    if let Ok(mut w) = Arc::try_unwrap(w) {
        let _ = w.shutdown().await;
    }
    flushed.cancel();
}

/// Starts a transport whose write side is a lane over `writer` ([`crate::lane`]).
#[cfg(unix)]
fn lane_transport<W: LaneWrite>(writer: W, inbound: InboundSource) -> Transport {
    let (out_tx, out_rx) = mpsc::channel(CHANNEL_CAPACITY);
    let close = CancellationToken::new();
    let flushed = CancellationToken::new();
    let writer = Arc::new(writer);
    let lane = Arc::new(Lane::new(out_tx, writer.clone()));
    tokio::spawn(write_lane(
        writer,
        Arc::downgrade(&lane),
        out_rx,
        close.clone(),
        flushed.clone(),
    ));
    let mut t = Transport::over(inbound, OutboundSink::Lane { lane, close }).labeled("stdio", None);
    t.flushed = Some(flushed);
    t
}

/// The engine's source for lines read in place from `reader` ([`LineReader`]).
fn lines<R: AsyncRead + Unpin + Send + 'static>(reader: R, max_frame: usize) -> InboundSource {
    let reader: Box<dyn AsyncRead + Unpin + Send> = Box::new(reader);
    InboundSource::Lines(Box::new(LineReader::new(reader, max_frame)))
}

async fn write_then_signal<W: AsyncWrite + Unpin>(
    writer: W,
    rx: mpsc::Receiver<Outbound>,
    close: CancellationToken,
    flushed: CancellationToken,
) {
    write_lines(writer, rx, close).await;
    flushed.cancel();
}

/// The process's own stdin and stdout, for a server. When a descriptor is a pipe or a socket it
/// is used non-blocking on the event loop (Unix); otherwise (a terminal, a file, another
/// platform) tokio's blocking stdio is used.
pub fn server_transport(max_frame: usize) -> Transport {
    let inbound = match nonblocking_stdin() {
        #[cfg(unix)]
        Some(NonBlocking::Pipe(r)) => lines(r, max_frame),
        #[cfg(unix)]
        Some(NonBlocking::Socket(s)) => lines(s, max_frame),
        None => {
            let (in_tx, in_rx) = mpsc::channel(CHANNEL_CAPACITY);
            drop(tokio::spawn(read_lines(
                tokio::io::stdin(),
                max_frame,
                in_tx,
            )));
            InboundSource::Channel(in_rx)
        }
    };
    match nonblocking_stdout() {
        #[cfg(unix)]
        Some(NonBlockingOut::Pipe(w)) => lane_transport(w, inbound),
        #[cfg(unix)]
        Some(NonBlockingOut::Socket(s)) => lane_transport(s, inbound),
        None => {
            let (out_tx, out_rx) = mpsc::channel(CHANNEL_CAPACITY);
            let close = CancellationToken::new();
            let flushed = CancellationToken::new();
            tokio::spawn(write_then_signal(
                tokio::io::stdout(),
                out_rx,
                close.clone(),
                flushed.clone(),
            ));
            let mut t = Transport::over(inbound, OutboundSink::Channel { tx: out_tx, close })
                .labeled("stdio", None);
            t.flushed = Some(flushed);
            t
        }
    }
}

#[cfg(unix)]
enum NonBlocking {
    Pipe(tokio::net::unix::pipe::Receiver),
    Socket(tokio::net::UnixStream),
}

#[cfg(unix)]
enum NonBlockingOut {
    Pipe(tokio::net::unix::pipe::Sender),
    Socket(tokio::net::UnixStream),
}

#[cfg(unix)]
fn fd_kind(fd: &std::os::fd::OwnedFd) -> Option<(bool, bool)> {
    use std::os::unix::fs::FileTypeExt;
    let file = std::fs::File::from(fd.try_clone().ok()?);
    let ty = file.metadata().ok()?.file_type();
    Some((ty.is_fifo(), ty.is_socket()))
}

#[cfg(unix)]
fn nonblocking_stdin() -> Option<NonBlocking> {
    let fd = std::io::stdin().as_fd().try_clone_to_owned().ok()?;
    match fd_kind(&fd)? {
        (true, _) => tokio::net::unix::pipe::Receiver::from_owned_fd(fd)
            .ok()
            .map(NonBlocking::Pipe),
        (_, true) => {
            let s = std::os::unix::net::UnixStream::from(fd);
            s.set_nonblocking(true).ok()?;
            tokio::net::UnixStream::from_std(s)
                .ok()
                .map(NonBlocking::Socket)
        }
        _ => None,
    }
}

#[cfg(unix)]
fn nonblocking_stdout() -> Option<NonBlockingOut> {
    let fd = std::io::stdout().as_fd().try_clone_to_owned().ok()?;
    match fd_kind(&fd)? {
        (true, _) => tokio::net::unix::pipe::Sender::from_owned_fd(fd)
            .ok()
            .map(NonBlockingOut::Pipe),
        (_, true) => {
            let s = std::os::unix::net::UnixStream::from(fd);
            s.set_nonblocking(true).ok()?;
            tokio::net::UnixStream::from_std(s)
                .ok()
                .map(NonBlockingOut::Socket)
        }
        _ => None,
    }
}

#[cfg(not(unix))]
enum NonBlocking {}
#[cfg(not(unix))]
enum NonBlockingOut {}
#[cfg(not(unix))]
fn nonblocking_stdin() -> Option<NonBlocking> {
    None
}
#[cfg(not(unix))]
fn nonblocking_stdout() -> Option<NonBlockingOut> {
    None
}

/// Receives each line a child writes to stderr.
pub type StderrCallback = Arc<dyn Fn(&str) + Send + Sync>;

/// What happens to a child server's stderr. It is never parsed as protocol.
#[derive(Clone, Default)]
pub enum StderrMode {
    /// The child writes to the host's own stderr.
    #[default]
    Inherit,
    /// Discarded.
    Null,
    /// Captured: the last lines are kept (bounded) and readable with
    /// [`Connection::stderr_tail`](crate::client::Connection::stderr_tail); each line is also
    /// passed to the callback, if any.
    Capture(Option<StderrCallback>),
}

impl fmt::Debug for StderrMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StderrMode::Inherit => f.write_str("Inherit"),
            StderrMode::Null => f.write_str("Null"),
            StderrMode::Capture(_) => f.write_str("Capture"),
        }
    }
}

/// How to start a stdio server process.
#[derive(Debug, Clone)]
pub struct StdioCommand {
    /// The program.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Variables to set on top of the inherited environment.
    pub env: Vec<(OsString, OsString)>,
    /// Start from an empty environment instead of the inherited one.
    pub clear_env: bool,
    /// Working directory (inherited when `None`).
    pub cwd: Option<PathBuf>,
    /// What to do with the child's stderr.
    pub stderr: StderrMode,
    /// The bound on one inbound line.
    pub max_frame_bytes: usize,
    /// How long to wait after closing stdin, and again after SIGTERM, before escalating.
    pub shutdown_grace: Duration,
}

impl StdioCommand {
    /// A command running `program` with default settings.
    pub fn new(program: impl Into<OsString>) -> Self {
        StdioCommand {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            clear_env: false,
            cwd: None,
            stderr: StderrMode::Inherit,
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            shutdown_grace: Duration::from_secs(2),
        }
    }
    /// Adds arguments.
    pub fn args<I: IntoIterator<Item = S>, S: Into<OsString>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }
    /// Sets one environment variable.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }
    /// Sets the working directory.
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }
    /// Sets the stderr mode.
    pub fn stderr(mut self, mode: StderrMode) -> Self {
        self.stderr = mode;
        self
    }

    /// Spawns the child in a process group of its own and starts a transport over its pipes.
    /// Shutting it down signals the whole group, so a wrapper (`npx`, `uvx`, a shell script)
    /// does not leave the real server running, nor a server its forked workers.
    pub fn spawn(&self) -> std::io::Result<Transport> {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true);
        #[cfg(unix)]
        cmd.process_group(0);
        if self.clear_env {
            cmd.env_clear();
        }
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        if let Some(cwd) = &self.cwd {
            cmd.current_dir(cwd);
        }
        cmd.stderr(match self.stderr {
            StderrMode::Inherit => Stdio::inherit(),
            StderrMode::Null => Stdio::null(),
            StderrMode::Capture(_) => Stdio::piped(),
        });
        let mut child = cmd.spawn()?;
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let tail = Arc::new(Mutex::new(StderrTail::default()));
        if let (Some(err), StderrMode::Capture(cb)) = (child.stderr.take(), &self.stderr) {
            tokio::spawn(read_stderr(err, tail.clone(), cb.clone()));
        }
        // The child's stdin as a lane, so a caller outside the runtime's tasks writes its
        // request inline instead of waking a worker ([`crate::lane`]).
        #[cfg(unix)]
        let mut t = {
            let stdin = tokio::net::unix::pipe::Sender::from_owned_fd(stdin.into_owned_fd()?)?;
            lane_transport(stdin, lines(stdout, self.max_frame_bytes))
        };
        #[cfg(not(unix))]
        let mut t = transport(stdout, stdin, self.max_frame_bytes);
        t.child = Some(ChildProcess {
            pid: child.id(),
            group: child.id().and_then(|p| i32::try_from(p).ok()),
            child: Some(child),
            close_write: t
                .outbound
                .close_token()
                .expect("a stdio transport is a channel")
                .clone(),
            grace: self.shutdown_grace,
            stderr: tail,
            exit: watch::channel(None).0,
        });
        Ok(t)
    }
}

const STDERR_TAIL_LINES: usize = 256;
const STDERR_LINE_BYTES: usize = 4096;

/// The last lines a child wrote to stderr.
#[derive(Debug, Default)]
pub(crate) struct StderrTail {
    lines: VecDeque<String>,
}

async fn read_stderr(
    err: tokio::process::ChildStderr,
    tail: Arc<Mutex<StderrTail>>,
    cb: Option<StderrCallback>,
) {
    let mut reader = BufReader::new(err);
    let mut line = Vec::new();
    loop {
        line.clear();
        // Bounded: a line longer than the cap is cut, the rest is read as further lines.
        let mut limited = (&mut reader).take(STDERR_LINE_BYTES as u64);
        match limited.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\n', '\r']);
        if let Some(cb) = &cb {
            cb(text);
        }
        let mut t = tail.lock().expect("stderr tail lock");
        if t.lines.len() == STDERR_TAIL_LINES {
            t.lines.pop_front();
        }
        t.lines.push_back(text.to_owned());
    }
}

/// The captured tail of a child's stderr.
#[derive(Debug, Clone)]
#[cfg_attr(not(feature = "client"), allow(dead_code))]
pub(crate) struct StderrHandle(Arc<Mutex<StderrTail>>);

#[cfg_attr(not(feature = "client"), allow(dead_code))]
impl StderrHandle {
    /// The last lines (at most 256, each at most 4 KiB).
    pub fn lines(&self) -> Vec<String> {
        self.0
            .lock()
            .expect("stderr tail lock")
            .lines
            .iter()
            .cloned()
            .collect()
    }
}

/// How a child ended on its own, once it was reaped.
#[derive(Debug, Clone)]
#[cfg_attr(not(feature = "client"), allow(dead_code))]
pub(crate) struct ExitHandle(watch::Receiver<Option<std::process::ExitStatus>>);

#[cfg_attr(not(feature = "client"), allow(dead_code))]
impl ExitHandle {
    /// The child's exit status, waiting at most `within` for it to be reaped; `None` when it
    /// has not ended on its own by then (or was ended by a signal this side sent).
    pub async fn status(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let waited = tokio::time::timeout(within, self.0.wait_for(Option::is_some))
            .await
            .ok()
            .and_then(Result::ok)
            .and_then(|s| *s);
        waited.or(*self.0.borrow())
    }
}

/// An exit status in words: `exited with status 3`, `was killed by signal 9 (SIGKILL)`.
#[cfg_attr(not(feature = "client"), allow(dead_code))]
pub(crate) fn describe_exit(status: std::process::ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("exited with status {code}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt as _;
        if let Some(sig) = status.signal() {
            return match nix::sys::signal::Signal::try_from(sig) {
                Ok(name) => format!("was killed by signal {sig} ({})", name.as_str()),
                Err(_) => format!("was killed by signal {sig}"),
            };
        }
    }
    format!("ended ({status})")
}

/// A child server process: shut down gracefully on close, killed when dropped.
#[derive(Debug)]
#[cfg_attr(not(feature = "client"), allow(dead_code))]
pub(crate) struct ChildProcess {
    pid: Option<u32>,
    /// The child's process group (its own pid: it leads a group of its own).
    group: Option<i32>,
    child: Option<Child>,
    close_write: CancellationToken,
    grace: Duration,
    stderr: Arc<Mutex<StderrTail>>,
    /// Set when the child is reaped having ended on its own (before any signal from here).
    exit: watch::Sender<Option<std::process::ExitStatus>>,
}

#[cfg_attr(not(feature = "client"), allow(dead_code))]
impl ChildProcess {
    /// The child's process id.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// A handle on the captured stderr lines that outlives the process handle.
    pub fn stderr_handle(&self) -> StderrHandle {
        StderrHandle(self.stderr.clone())
    }

    /// A handle on the child's exit status that outlives the process handle.
    pub fn exit_handle(&self) -> ExitHandle {
        ExitHandle(self.exit.subscribe())
    }

    /// Closes stdin, waits; sends SIGTERM to the child's process group, waits; sends SIGKILL.
    /// Once the child is reaped, whatever it left in its group (a wrapper's real server, a
    /// forked worker) gets SIGTERM, then SIGKILL. Returns when that is done.
    pub async fn shutdown(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        shutdown_child(
            &mut child,
            &self.close_write,
            self.grace,
            self.group,
            &self.exit,
        )
        .await;
    }
}

/// Process groups: a shutdown signals the child's whole group, and ends with whatever the child
/// left in it.
#[cfg(unix)]
mod group {
    use std::time::Duration;

    use nix::sys::signal::{killpg, Signal};
    use nix::unistd::Pid;

    /// Kills a process group when dropped while armed: a shutdown cut short (the runtime
    /// stopping, the future dropped) leaves no member of the group behind.
    pub(super) struct Guard(pub(super) Option<i32>);

    impl Drop for Guard {
        fn drop(&mut self) {
            if let Some(group) = self.0 {
                signal(group, Signal::SIGKILL);
            }
        }
    }

    pub(super) fn signal(group: i32, signal: Signal) {
        let _ = killpg(Pid::from_raw(group), signal);
    }

    /// Whether any process of the group is left.
    fn alive(group: i32) -> bool {
        killpg(Pid::from_raw(group), None).is_ok()
    }

    /// After the leader was reaped: SIGTERM to what it left in its group, then SIGKILL after
    /// `grace`. (The group's id cannot be reused while any member is alive.)
    pub(super) async fn end(group: i32, grace: Duration) {
        if !alive(group) {
            return;
        }
        signal(group, Signal::SIGTERM);
        let start = tokio::time::Instant::now();
        while alive(group) && start.elapsed() < grace {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if alive(group) {
            signal(group, Signal::SIGKILL);
        }
    }
}

async fn shutdown_child(
    child: &mut Child,
    close_write: &CancellationToken,
    grace: Duration,
    group: Option<i32>,
    exit: &watch::Sender<Option<std::process::ExitStatus>>,
) {
    #[cfg(unix)]
    let mut guard = group::Guard(group);
    close_write.cancel();
    // Reaped before any signal from here: the status is the child's own.
    let mut reaped = match tokio::time::timeout(grace, child.wait()).await {
        Ok(Ok(status)) => {
            exit.send_replace(Some(status));
            true
        }
        _ => false,
    };
    #[cfg(unix)]
    if !reaped {
        use nix::sys::signal::Signal;
        match group {
            Some(g) => group::signal(g, Signal::SIGTERM),
            None => {
                if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
                    let _ =
                        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), Signal::SIGTERM);
                }
            }
        }
        reaped = matches!(tokio::time::timeout(grace, child.wait()).await, Ok(Ok(_)));
    }
    if !reaped {
        #[cfg(unix)]
        if let Some(g) = group {
            group::signal(g, nix::sys::signal::Signal::SIGKILL);
        }
        let _ = child.kill().await;
    }
    #[cfg(unix)]
    {
        if let Some(g) = group {
            group::end(g, grace).await;
        }
        guard.0 = None;
    }
    #[cfg(not(unix))]
    let _ = (group, &mut reaped);
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let close_write = self.close_write.clone();
        let grace = self.grace;
        let group = self.group;
        let exit = self.exit.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                // The graceful sequence runs on; if the runtime stops first, dropping the task
                // drops the child (kill_on_drop sends SIGKILL) and its guard kills the group.
                handle.spawn(async move {
                    shutdown_child(&mut child, &close_write, grace, group, &exit).await
                });
            }
            Err(_) => {
                let _ = child.start_kill();
                #[cfg(unix)]
                if let Some(g) = group {
                    group::signal(g, nix::sys::signal::Signal::SIGKILL);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One sender that moves between the caller's thread (inline writes) and tasks (the
    /// writer's channel), over a real pipe whose reader is slow enough to fill it (partial and
    /// refused inline writes): every frame arrives whole, once, in the order it was sent.
    #[cfg(unix)]
    #[test]
    fn a_lane_keeps_send_order_across_inline_writes_and_the_writer() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let (tx_pipe, rx_pipe) = rt
            .block_on(async { tokio::net::unix::pipe::pipe() })
            .unwrap();
        let (in_tx, in_rx) = mpsc::channel(CHANNEL_CAPACITY);
        let t = rt.block_on(async { lane_transport(tx_pipe, InboundSource::Channel(in_rx)) });
        drop(in_tx);
        let crate::transport::OutboundSink::Lane { lane, .. } = &t.outbound else {
            panic!("a pipe gets a lane");
        };
        let lane = lane.clone();
        let reader = rt.spawn(async move {
            let (tx, mut rx) = mpsc::channel(16);
            tokio::spawn(read_lines(rx_pipe, 1 << 20, tx));
            let mut got = Vec::new();
            let mut n = 0u32;
            while let Some(Inbound::Frame(b)) = rx.recv().await {
                got.push(b);
                n += 1;
                if n % 64 == 0 {
                    // A slow reader: the pipe fills, inline writes are cut short or refused.
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
            got
        });
        let frame = |i: usize| {
            // Sizes from a few bytes to 40 KiB: some exceed what a pipe takes at once.
            let len = (i * 7919) % (40 * 1024) + 1;
            let mut f = format!("{i}:").into_bytes();
            f.resize(len.max(f.len()), b'a' + (i % 26) as u8);
            f
        };
        let total = 600;
        for i in 0..total {
            let out = Outbound {
                frame: frame(i),
                ..Outbound::default()
            };
            if i % 3 == 0 {
                let lane = lane.clone();
                rt.block_on(async move { tokio::spawn(async move { lane.send(out).await }).await })
                    .unwrap()
                    .unwrap();
            } else {
                rt.block_on(lane.send(out)).unwrap();
            }
        }
        t.outbound.close();
        drop(t);
        drop(lane);
        let got = rt.block_on(reader).unwrap();
        assert_eq!(got.len(), total);
        for (i, f) in got.iter().enumerate() {
            assert!(f[..] == frame(i)[..], "frame {i} differs");
        }
    }

    /// The engine reads lines in place inside a `select!`: a read dropped before its line is
    /// complete loses nothing, and the line arrives whole with the next.
    #[tokio::test]
    async fn a_line_read_dropped_midway_loses_nothing() {
        let (mut w, r) = tokio::io::duplex(64);
        let mut lines = LineReader::new(r, 1 << 20);
        w.write_all(br#"{"a""#).await.unwrap();
        let waited = tokio::time::timeout(Duration::from_millis(20), lines.next()).await;
        assert!(waited.is_err(), "no line is complete yet");
        w.write_all(b":1}\r\n\n{\"b\":2}").await.unwrap();
        drop(w);
        let mut got = Vec::new();
        while let Some(item) = lines.next().await {
            match item {
                Inbound::Frame(f) => got.push(String::from_utf8(f.to_vec()).unwrap()),
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(got, [r#"{"a":1}"#, r#"{"b":2}"#]);
        assert!(lines.next().await.is_none());
    }

    /// The frames `read_lines` makes of `input`, read in chunks of at most 7 bytes.
    async fn frames(input: &'static [u8], max: usize) -> Vec<String> {
        let (mut w, r) = tokio::io::duplex(7);
        tokio::spawn(async move {
            let _ = w.write_all(input).await;
        });
        let (tx, mut rx) = mpsc::channel(16);
        tokio::spawn(read_lines(r, max, tx));
        let mut out = Vec::new();
        while let Some(item) = rx.recv().await {
            out.push(match item {
                Inbound::Frame(b) => String::from_utf8_lossy(&b).into_owned(),
                Inbound::Oversize { len, head, tail } => format!(
                    "<oversize {len} {} {}>",
                    String::from_utf8_lossy(&head),
                    String::from_utf8_lossy(&tail)
                ),
                Inbound::Failed(e) => format!("<failed {e}>"),
                other => format!("<unexpected {other:?}>"),
            });
        }
        out
    }

    #[tokio::test]
    async fn splits_lines_and_bounds_them() {
        assert_eq!(frames(b"a\r\n\nbb\nccc", 16).await, ["a", "bb", "ccc"]);
        assert_eq!(
            frames(b"short\nthis line is far too long\nok\n", 8).await,
            [
                "short",
                "<oversize 25 this line is far too long this line is far too long>",
                "ok"
            ]
        );
        // The bound counts the `\r`, and blank lines alike, so a line read in pieces (here 7
        // bytes, past the bound of 6, before its `\n`) and the same line read at once are
        // treated the same (the fuzz target `stdio_lines` checks chunking independence).
        assert_eq!(
            frames(b"abcdef\r\nabcde\r\n", 6).await,
            ["<oversize 7 abcdef\r abcdef\r>", "abcde"]
        );
        let blank = format!("<oversize 7 {0} {0}>", " ".repeat(7));
        assert_eq!(
            frames(b"       \n \r\nok\r", 6).await,
            [blank.as_str(), "ok"]
        );
        // A line of 3 * PEEK_BYTES keeps its first and its last PEEK_BYTES, whatever the reads.
        let mut long = vec![b'a'; PEEK_BYTES];
        long.extend(vec![b'b'; PEEK_BYTES]);
        long.extend(vec![b'c'; PEEK_BYTES]);
        long.extend_from_slice(b"\nnext\n");
        let long: &'static [u8] = Box::leak(long.into_boxed_slice());
        let got = frames(long, 100).await;
        assert_eq!(
            got,
            [
                format!(
                    "<oversize {} {} {}>",
                    3 * PEEK_BYTES,
                    "a".repeat(PEEK_BYTES),
                    "c".repeat(PEEK_BYTES)
                ),
                "next".to_owned()
            ]
        );
    }
}
