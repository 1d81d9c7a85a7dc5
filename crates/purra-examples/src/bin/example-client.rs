//! The example MCP client: runs the client checks of `peers/FIXTURES.md` against a fixture
//! server, once per protocol version — over stdio (a fresh server process per run), Streamable
//! HTTP or WebSocket.
//!
//! Usage: `purra-example-client [--protocol-version V]... [--modern] [--http URL | --ws URL | --
//! COMMAND ARGS...]`. Without a URL or command it starts the example server that sits beside this
//! binary. `--modern` runs the 2026-07-28 checks (auto mode) instead. With
//! `FIXTURE_SERVER_IS_PURRA=1` the checks hold the server to purra's exact behaviour.

#![allow(clippy::print_stdout)] // a command-line program: stdout is its output

use std::process::ExitCode;

use purra_examples::checks::Target;
use purra_protocol::{StderrMode, StdioCommand};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let mut versions = Vec::new();
    let mut command: Vec<String> = Vec::new();
    let mut http: Option<String> = None;
    let mut ws: Option<String> = None;
    let mut modern = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--protocol-version" => match args.next() {
                Some(v) => versions.push(v),
                None => return usage("--protocol-version needs a value"),
            },
            "--http" => match args.next() {
                Some(u) => http = Some(u),
                None => return usage("--http needs a URL"),
            },
            "--modern" => modern = true,
            "--ws" => match args.next() {
                Some(u) => ws = Some(u),
                None => return usage("--ws needs a URL"),
            },
            "--" => {
                command.extend(args.by_ref());
            }
            other => return usage(&format!("unknown argument {other:?}")),
        }
    }
    if versions.is_empty() {
        versions = vec!["2025-11-25".into(), "2025-06-18".into()];
    }
    let strict = std::env::var("FIXTURE_SERVER_IS_PURRA").is_ok_and(|v| v == "1");
    if command.is_empty() {
        let exe = std::env::current_exe().expect("own path");
        let server = exe.with_file_name("purra-example-server");
        command.push(server.to_string_lossy().into_owned());
    }
    let target = || match (&http, &ws) {
        (Some(url), _) => Target::Http(url.clone()),
        (None, Some(url)) => Target::Ws(url.clone()),
        (None, None) => Target::Stdio(
            StdioCommand::new(&command[0])
                .args(&command[1..])
                .stderr(StderrMode::Inherit),
        ),
    };
    if modern {
        let mut report = |check: &str| println!("ok {check}");
        return match purra_examples::modern_checks::run(&target(), &mut report).await {
            Ok(n) => {
                println!("modern-client: {n} passed, 0 failed");
                ExitCode::SUCCESS
            }
            Err((check, why)) => {
                println!("FAIL {check}: {why}");
                ExitCode::FAILURE
            }
        };
    }
    let mut total = 0usize;
    for (i, version) in versions.iter().enumerate() {
        let target = target();
        let dynamic = format!("dynamic_{}", i + 1);
        let mut report = |check: &str| println!("ok {check} ({version})");
        match purra_examples::checks::run(&target, version, strict, &dynamic, &mut report).await {
            Ok(n) => total += n,
            Err((check, why)) => {
                println!("FAIL {check} ({version}): {why}");
                return ExitCode::FAILURE;
            }
        }
    }
    println!("fixture-client: {total} passed, 0 failed");
    ExitCode::SUCCESS
}

fn usage(why: &str) -> ExitCode {
    eprintln!("purra-example-client: {why}\nusage: purra-example-client [--protocol-version V]... [--modern] [--http URL | --ws URL | -- COMMAND ARGS...]");
    ExitCode::from(2)
}
