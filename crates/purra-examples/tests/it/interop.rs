//! Interop with the official SDKs over real stdio pipes, Streamable HTTP and the HTTP+SSE transport of
//! 2024-11-05, in both directions: purra's example
//! client against the Python (`mcp` 2.3.0) and TypeScript (`@modelcontextprotocol/sdk` 1.32.2)
//! fixture servers, and their fixture clients against purra's example server. The peers are
//! installed by `scripts/setup-peers.sh`; every check is listed in `peers/FIXTURES.md`.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use purra_examples::checks::CHECKS;

use crate::support;
use support::*;

/// Asserts that a fixture client passed every check for both versions and closed with the
/// exact summary line.
fn assert_all_checks(out: &Output) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "exit {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    let lines: Vec<&str> = stdout.lines().collect();
    for version in ["2025-11-25", "2025-06-18"] {
        for check in CHECKS {
            let purra = format!("ok {check} ({version})");
            let peer = format!("ok {check}");
            assert!(
                lines.iter().any(|l| *l == purra)
                    || lines
                        .iter()
                        .filter(|l| **l == peer || l.starts_with(&format!("{peer} ")))
                        .count()
                        >= 2,
                "check {check} ({version}) not reported\nstdout:\n{stdout}\nstderr:\n{stderr}"
            );
        }
    }
    assert_eq!(
        lines.last().copied(),
        Some("fixture-client: 40 passed, 0 failed"),
        "stdout:\n{stdout}"
    );
}

fn purra_client(server: &[String]) -> Output {
    example_client("--", server)
}

fn peer_client(program: PathBuf, client_script: &str) -> Output {
    let mut cmd = Command::new(program);
    cmd.arg(script(client_script))
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_purra-example-server"))
        .env("FIXTURE_SERVER_IS_PURRA", "1");
    run(cmd, Duration::from_secs(120))
}

#[test]
fn purra_client_with_purra_server() {
    let out = purra_client(&[env!("CARGO_BIN_EXE_purra-example-server").to_owned()]);
    assert_all_checks(&out);
}

#[test]
fn purra_client_with_python_sdk_server() {
    let out = purra_client(&[
        python().to_string_lossy().into_owned(),
        script("python/server.py"),
    ]);
    assert_all_checks(&out);
}

#[test]
fn purra_client_with_typescript_sdk_server() {
    let out = purra_client(&[
        node().to_string_lossy().into_owned(),
        script("node/server.mjs"),
    ]);
    assert_all_checks(&out);
}

#[test]
fn python_sdk_client_with_purra_server() {
    let out = peer_client(python(), "python/client.py");
    assert_all_checks(&out);
}

#[test]
fn typescript_sdk_client_with_purra_server() {
    let out = peer_client(node(), "node/client.mjs");
    assert_all_checks(&out);
}

fn purra_client_http(url: &str) -> Output {
    example_client("--http", &[url.into()])
}

fn peer_client_http(program: PathBuf, client_script: &str, url: &str) -> Output {
    let mut cmd = Command::new(program);
    cmd.arg(script(client_script))
        .args(["--http", url])
        .env("FIXTURE_SERVER_IS_PURRA", "1");
    run(cmd, Duration::from_secs(120))
}

#[test]
fn http_purra_client_with_purra_server() {
    let server = example_server_http();
    assert_all_checks(&purra_client_http(&server.url));
}

#[test]
fn http_purra_client_with_python_sdk_server() {
    let server = peer_http_server(python(), &[script("python/server.py"), "--http".into()]);
    assert_all_checks(&purra_client_http(&server.url));
}

#[test]
fn http_purra_client_with_typescript_sdk_server() {
    let server = peer_http_server(node(), &[script("node/server.mjs"), "--http".into()]);
    assert_all_checks(&purra_client_http(&server.url));
}

#[test]
fn http_python_sdk_client_with_purra_server() {
    let server = example_server_http();
    assert_all_checks(&peer_client_http(python(), "python/client.py", &server.url));
}

#[test]
fn http_typescript_sdk_client_with_purra_server() {
    let server = example_server_http();
    assert_all_checks(&peer_client_http(node(), "node/client.mjs", &server.url));
}

/// The SSE URL of an HTTP peer started on `port` (its event stream is at `/sse`).
fn sse_url(peer: &HttpPeer) -> String {
    peer.url.replace("/mcp", "/sse")
}

fn peer_client_sse(program: PathBuf, client_script: &str, url: &str) -> Output {
    let mut cmd = Command::new(program);
    cmd.arg(script(client_script))
        .args(["--sse", url])
        .env("FIXTURE_SERVER_IS_PURRA", "1");
    run(cmd, Duration::from_secs(120))
}

// HTTP+SSE (2024-11-05). purra's client is given the legacy-only peers' stream URLs with the
// default transport: Streamable HTTP first, whose POST they refuse (405), then HTTP+SSE.

#[test]
fn sse_purra_client_falls_back_to_the_python_sdk_legacy_server() {
    let server = peer_http_server(python(), &[script("python/server.py"), "--sse".into()]);
    assert_all_checks(&purra_client_http(&sse_url(&server)));
}

#[test]
fn sse_purra_client_falls_back_to_the_typescript_sdk_legacy_server() {
    let server = peer_http_server(node(), &[script("node/server.mjs"), "--sse".into()]);
    assert_all_checks(&purra_client_http(&sse_url(&server)));
}

#[test]
fn sse_python_sdk_client_with_purra_legacy_server() {
    let server = example_server_http();
    assert_all_checks(&peer_client_sse(
        python(),
        "python/client.py",
        &sse_url(&server),
    ));
}

#[test]
fn sse_typescript_sdk_client_with_purra_legacy_server() {
    let server = example_server_http();
    assert_all_checks(&peer_client_sse(
        node(),
        "node/client.mjs",
        &sse_url(&server),
    ));
}
