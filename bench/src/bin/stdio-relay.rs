//! The floor of a stdio front: a process between a client and a stdio server that copies bytes
//! each way as they arrive (one blocking thread per direction, no framing, no parsing, nothing
//! buffered past a read). What it adds to a round trip is what any process in the middle costs
//! (two more pipe hops and the wake-ups they take) before it does any work of its own, so the
//! suite sets `purra gateway`'s added p50 beside it.
//!
//! Usage: `stdio-relay -- COMMAND [ARGS...]` (the server it starts as its child).

use std::io::{Read, Write};
use std::process::{Command, Stdio};

fn usage() -> ! {
    eprintln!("usage: stdio-relay -- COMMAND [ARGS...]");
    std::process::exit(64)
}

/// Copies `from` to `to` until `from` ends, each read written and flushed at once.
fn copy(mut from: impl Read, mut to: impl Write) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if to.write_all(&buf[..n]).and_then(|()| to.flush()).is_err() {
                    return;
                }
            }
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    if args.next().as_deref() != Some("--") {
        usage()
    }
    let Some(program) = args.next() else { usage() };
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            eprintln!("stdio-relay: cannot start the server: {e}");
            std::process::exit(69)
        });
    let to_child = child.stdin.take().expect("piped stdin");
    let from_child = child.stdout.take().expect("piped stdout");
    // The client's requests to the server; when the client closes, the server's stdin closes.
    std::thread::spawn(move || copy(std::io::stdin().lock(), to_child));
    copy(from_child, std::io::stdout().lock());
    let _ = child.wait();
}
