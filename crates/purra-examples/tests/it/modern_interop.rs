//! Interop in the 2026-07-28 revision with the official SDKs, in both directions, over real stdio
//! pipes and Streamable HTTP: purra's client (auto mode) against the Python SDK 2.3.0's and the
//! TypeScript SDK v2 2.4.0's modern fixture servers and against purra's own (dual-era) example
//! server; their clients (auto mode) against purra's example server. Every run covers the checks
//! of `peers/FIXTURES.md` ("2026-07-28"): the revision spoken without a handshake, an elicitation
//! through input_required, a tampered requestState refused, and a list change learned through
//! subscriptions/listen.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use purra_examples::modern_checks::MODERN_CHECKS;

use crate::support;
use support::*;

/// Asserts that a modern fixture client passed every check, in order, with the exact summary.
fn assert_modern_checks(out: &Output) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "exit {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    let reported: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("ok "))
        .collect();
    assert_eq!(
        reported, MODERN_CHECKS,
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert_eq!(
        stdout.lines().last(),
        Some("modern-client: 5 passed, 0 failed"),
        "stdout:\n{stdout}"
    );
}

fn purra_client(args: &[String]) -> Output {
    example_client("--modern", args)
}

fn stdio(server: &[String]) -> Vec<String> {
    let mut args = vec!["--".to_owned()];
    args.extend(server.iter().cloned());
    args
}

fn python_server() -> Vec<String> {
    vec![
        python().to_string_lossy().into_owned(),
        script("python/modern.py"),
        "server".into(),
    ]
}

fn typescript_server() -> Vec<String> {
    vec![
        node().to_string_lossy().into_owned(),
        script("node-v2/server.mjs"),
    ]
}

fn purra_server() -> Vec<String> {
    vec![env!("CARGO_BIN_EXE_purra-example-server").to_owned()]
}

#[test]
fn purra_client_with_purra_server() {
    assert_modern_checks(&purra_client(&stdio(&purra_server())));
}

#[test]
fn purra_client_with_python_sdk_server() {
    assert_modern_checks(&purra_client(&stdio(&python_server())));
}

#[test]
fn purra_client_with_typescript_sdk_server() {
    assert_modern_checks(&purra_client(&stdio(&typescript_server())));
}

fn peer_client(program: PathBuf, client: &[&str], target: &[String]) -> Output {
    let mut cmd = Command::new(program);
    cmd.args(client).args(target);
    run(cmd, Duration::from_secs(120))
}

#[test]
fn python_sdk_client_with_purra_server() {
    let out = peer_client(
        python(),
        &[&script("python/modern.py"), "client"],
        &stdio(&purra_server()),
    );
    assert_modern_checks(&out);
}

#[test]
fn typescript_sdk_client_with_purra_server() {
    let out = peer_client(
        node(),
        &[&script("node-v2/client.mjs")],
        &stdio(&purra_server()),
    );
    assert_modern_checks(&out);
}

#[test]
fn http_purra_client_with_python_sdk_server() {
    let server = peer_http_server(
        python(),
        &[script("python/modern.py"), "server".into(), "--http".into()],
    );
    assert_modern_checks(&purra_client(&["--http".into(), server.url.clone()]));
}

#[test]
fn http_purra_client_with_typescript_sdk_server() {
    let server = peer_http_server(node(), &[script("node-v2/server.mjs"), "--http".into()]);
    assert_modern_checks(&purra_client(&["--http".into(), server.url.clone()]));
}

#[test]
fn http_purra_client_with_purra_server() {
    let server = example_server_http();
    assert_modern_checks(&purra_client(&["--http".into(), server.url.clone()]));
}

#[test]
fn http_python_sdk_client_with_purra_server() {
    let server = example_server_http();
    let out = peer_client(
        python(),
        &[&script("python/modern.py"), "client"],
        std::slice::from_ref(&server.url),
    );
    assert_modern_checks(&out);
}

#[test]
fn http_typescript_sdk_client_with_purra_server() {
    let server = example_server_http();
    let out = peer_client(
        node(),
        &[&script("node-v2/client.mjs")],
        std::slice::from_ref(&server.url),
    );
    assert_modern_checks(&out);
}
