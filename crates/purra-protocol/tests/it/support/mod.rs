//! Helpers shared by purra-protocol's integration tests: a server on an in-memory raw end,
//! initialized at a revision, and a request sent and its answer read (at most 5 s); the argument
//! types the test tools share; a server on a loopback port ([`http`]); processes and peers
//! ([`process`]); the counted heap ([`heap`]) and a test run alone in a child process ([`alone`]).

#![allow(dead_code)] // each test module uses what it needs

mod alone;
pub mod heap;
pub mod http;
pub mod process;

pub use alone::alone;

use schemars::JsonSchema;
use serde::Deserialize;

use std::time::Duration;

use purra_protocol::memory::{self, RawEnd};
use purra_protocol::Server;

/// A bare `initialize` request at 2025-11-25, id 1.
pub const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

// The argument types of the test tools. No doc comments: a doc comment would become the
// schema's description, and the tests assert the schemas exactly.

#[derive(Deserialize, JsonSchema)]
pub struct Nothing {}

#[derive(Deserialize, JsonSchema)]
pub struct Text {
    pub text: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct Size {
    pub bytes: usize,
}

/// Starts `server` on an in-memory transport; the test holds the raw end.
pub async fn start(server: &Server) -> RawEnd {
    let (t, raw) = memory::raw();
    server.start(t);
    raw
}

/// Starts `server` and completes the handshake at `version` (asserting it was accepted).
pub async fn initialized(server: &Server, version: &str) -> RawEnd {
    let mut raw = start(server).await;
    raw.send(format!(
        r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{version}","capabilities":{{}},"clientInfo":{{"name":"c","version":"1"}}}}}}"#
    ))
    .await;
    let init = raw.recv().await.unwrap();
    assert!(
        init.contains(&format!(r#""protocolVersion":"{version}""#)),
        "{init}"
    );
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await;
    raw
}

/// The next frame the server writes (at most 5 s).
pub async fn recv(raw: &mut RawEnd) -> String {
    tokio::time::timeout(Duration::from_secs(5), raw.recv())
        .await
        .expect("an answer")
        .expect("open")
}

/// Sends `frame` and returns the next frame the server writes.
pub async fn ask(raw: &mut RawEnd, frame: impl Into<String>) -> String {
    raw.send(frame.into()).await;
    recv(raw).await
}

/// An access token by the client credentials grant at `endpoint` for client `(id, secret)`
/// (`client_secret_basic`).
#[cfg(feature = "auth")]
pub async fn client_credentials_token(
    http: &reqwest::Client,
    endpoint: &str,
    (id, secret): (&str, &str),
) -> String {
    let body: serde_json::Value = http
        .post(endpoint)
        .basic_auth(id, Some(secret))
        .form(&[("grant_type", "client_credentials")])
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .map(|b| serde_json::from_slice(&b).unwrap())
        .unwrap();
    body["access_token"]
        .as_str()
        .unwrap_or_else(|| panic!("no access token: {body}"))
        .to_owned()
}
