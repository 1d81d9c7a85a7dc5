//! Helpers shared by purra-protocol's integration tests: a server on an in-memory raw end,
//! initialized at a revision, and a request sent and its answer read (at most 5 s).

#![allow(dead_code)] // each test binary uses what it needs

use std::time::Duration;

use purra_protocol::memory::{self, RawEnd};
use purra_protocol::Server;

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

/// Sends `frame` and returns the next frame the server writes.
pub async fn ask(raw: &mut RawEnd, frame: &str) -> String {
    raw.send(frame.to_owned()).await;
    tokio::time::timeout(Duration::from_secs(5), raw.recv())
        .await
        .expect("an answer")
        .expect("open")
}
