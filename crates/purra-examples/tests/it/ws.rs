//! The WebSocket transport over real sockets on 127.0.0.1: purra's client against purra's server
//! (the full fixture checks, in process and through the example binaries), and both directions
//! against a raw peer built on the Python `websockets` package (`peers/python/ws_raw.py`,
//! installed by `scripts/setup-peers.sh`), which checks frames, close codes and handshake refusals.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use purra_examples::checks::{self, Target};
use purra_examples::fixture_server;
use purra_protocol::ws::{self, WsClientOptions, WsServerOptions};
use purra_protocol::{Client, ClientOptions, Error};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::process::Command;
use tokio::sync::oneshot;
use tokio::time::timeout;

use purra_examples::checks::CHECKS;

use crate::support::{python, repo_root};

fn ws_raw() -> PathBuf {
    repo_root().join("peers/python/ws_raw.py")
}

/// A purra WebSocket server with the fixture surface on 127.0.0.1 (a free port): its URL, the
/// trigger that shuts it down, and the task that returns once it has.
async fn start_server(
    options: WsServerOptions,
) -> (String, oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("ws://{}", listener.local_addr().expect("addr"));
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let task = tokio::spawn(ws::serve(
        fixture_server::build(),
        listener,
        options,
        async move {
            let _ = stop_rx.await;
        },
    ));
    (url, stop_tx, task)
}

async fn stop_server(stop: oneshot::Sender<()>, task: tokio::task::JoinHandle<()>) {
    let _ = stop.send(());
    timeout(Duration::from_secs(10), task)
        .await
        .expect("serve returns after shutdown")
        .expect("serve task");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purra_client_with_purra_server_over_ws() {
    let (url, stop, task) = start_server(WsServerOptions::default()).await;
    for (i, version) in ["2025-11-25", "2025-06-18"].into_iter().enumerate() {
        let mut reported = Vec::new();
        let mut report = |c: &str| reported.push(c.to_owned());
        let dynamic = format!("dynamic_{}", i + 1);
        let res = checks::run(
            &Target::Ws(url.clone()),
            version,
            true,
            &dynamic,
            &mut report,
        )
        .await;
        assert_eq!(res, Ok(20), "{version}: passed {reported:?}");
        assert_eq!(reported, CHECKS, "{version}");
    }
    stop_server(stop, task).await;
}

#[tokio::test]
async fn example_client_with_example_server_over_ws() {
    let mut server = Command::new(env!("CARGO_BIN_EXE_purra-example-server"))
        .args(["--ws", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the example server");
    let mut lines = BufReader::new(server.stderr.take().expect("stderr")).lines();
    let first = timeout(Duration::from_secs(10), lines.next_line())
        .await
        .expect("the server announces its address")
        .expect("read")
        .expect("a line");
    let url = first
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_owned();
    assert!(url.starts_with("ws://127.0.0.1:"), "{url}");
    let out = timeout(
        Duration::from_secs(120),
        Command::new(env!("CARGO_BIN_EXE_purra-example-client"))
            .args(["--ws", &url])
            .env("FIXTURE_SERVER_IS_PURRA", "1")
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .expect("the client finishes")
    .expect("run the example client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 41, "{stdout}");
    assert_eq!(lines[40], "fixture-client: 40 passed, 0 failed");
    // The example server prints nothing to stdout in WebSocket mode and stops on SIGTERM.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(server.id().expect("pid") as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM");
    let status = timeout(Duration::from_secs(10), server.wait())
        .await
        .expect("the server exits on SIGTERM")
        .expect("wait");
    assert!(status.success(), "{status:?}");
    let mut server_stdout = String::new();
    server
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut server_stdout)
        .await
        .expect("read stdout");
    assert_eq!(server_stdout, "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_websockets_client_with_purra_server() {
    let (url, stop, task) = start_server(WsServerOptions::default().max_message_bytes(4096)).await;
    let out = timeout(
        Duration::from_secs(60),
        Command::new(python())
            .arg(ws_raw())
            .args(["client", &url, "4096"])
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .expect("ws_raw.py finishes")
    .expect("run ws_raw.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{:?}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let expected = [
        "subprotocol mcp",
        r#"initialize {"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true},"resources":{"listChanged":true,"subscribe":true},"prompts":{"listChanged":true},"logging":{},"completions":{}},"serverInfo":{"name":"fixture-purra","version":"1.0.0"},"instructions":"fixture server"}}"#,
        r#"ping {"jsonrpc":"2.0","id":2,"result":{}}"#,
        "websocket pong",
        "closed 1000",
        "binary: close 1003 purra: binary frames are not supported; send JSON-RPC as text frames",
        r#"at-limit: 4096 bytes, answer {"jsonrpc":"2.0","id":3,"result":{}}"#,
        "oversize: close 1009 purra: message too big: 4097 bytes, the limit is 4096",
        r#"no-subprotocol: HTTP 400 purra: the "mcp" subprotocol is required (Sec-WebSocket-Protocol: mcp)"#,
        r#"other-subprotocol: HTTP 400 purra: the "mcp" subprotocol is required (Sec-WebSocket-Protocol: mcp)"#,
        r#"bad-origin: HTTP 403 purra: Origin "http://evil.example" is not allowed"#,
        "localhost-origin: subprotocol mcp",
    ];
    assert_eq!(stdout.lines().collect::<Vec<_>>(), expected, "\n{stdout}");
    stop_server(stop, task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purra_client_with_python_websockets_server() {
    let mut peer = Command::new(python())
        .arg(ws_raw())
        .arg("server")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn ws_raw.py server");
    let mut lines = BufReader::new(peer.stdout.take().expect("stdout")).lines();
    let first = timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("ws_raw.py announces its address")
        .expect("read")
        .expect("a line");
    let url = first
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_owned();
    let conn = Client::connect_ws(
        &url,
        WsClientOptions::default(),
        ClientOptions::default().client_info("ws-raw-test", "1.0.0"),
    )
    .await
    .expect("connect");
    assert_eq!(conn.server_info().name, "ws-raw-server");
    assert_eq!(conn.protocol_version(), "2025-11-25");
    assert_eq!(
        conn.tools()
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>(),
        ["echo"]
    );
    let r = conn
        .call_tool("echo", json!({"text": "hi"}))
        .await
        .expect("tools/call");
    assert_eq!(r.texts().collect::<Vec<_>>(), ["raw:hi"]);
    // Then the peer sends a binary frame: purra closes the connection (1003).
    timeout(Duration::from_secs(5), conn.peer().closed())
        .await
        .expect("the connection closes after a binary frame");
    let again = conn.call_tool("echo", json!({"text": "again"})).await;
    assert!(matches!(again, Err(Error::ConnectionClosed)), "{again:?}");
    let mut rest = Vec::new();
    while let Ok(Some(line)) = timeout(Duration::from_secs(10), lines.next_line())
        .await
        .expect("ws_raw.py finishes")
    {
        rest.push(line);
    }
    assert_eq!(
        rest,
        [
            "offered mcp; selected mcp",
            "initialize 2025-11-25 from ws-raw-test",
            "initialized",
            "tools/list",
            "tools/call echo",
            "client closed: 1003 purra: binary frames are not supported; send JSON-RPC as text frames",
        ]
    );
    let status = timeout(Duration::from_secs(10), peer.wait())
        .await
        .expect("ws_raw.py exits")
        .expect("wait");
    assert!(status.success(), "{status:?}");
}

/// Sends a raw opening handshake and returns the response's status line.
async fn raw_handshake(addr: &str, host: &str, protocol: Option<&str>) -> String {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let mut req = format!(
        "GET / HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
    );
    if let Some(p) = protocol {
        req.push_str(&format!("Sec-WebSocket-Protocol: {p}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).await.expect("write");
    let mut lines = BufReader::new(s).lines();
    timeout(Duration::from_secs(5), lines.next_line())
        .await
        .expect("a response")
        .expect("read")
        .expect("a status line")
}

#[tokio::test]
async fn handshake_checks_host_and_subprotocol() {
    let (url, stop, task) = start_server(WsServerOptions::default()).await;
    let addr = url.strip_prefix("ws://").expect("ws url").to_owned();
    let port = addr.rsplit(':').next().expect("port");
    assert_eq!(
        raw_handshake(&addr, &format!("evil.example:{port}"), Some("mcp")).await,
        "HTTP/1.1 403 Forbidden"
    );
    assert_eq!(
        raw_handshake(&addr, &format!("localhost:{port}"), None).await,
        "HTTP/1.1 400 Bad Request"
    );
    assert_eq!(
        raw_handshake(&addr, &format!("localhost:{port}"), Some("chat, mcp")).await,
        "HTTP/1.1 101 Switching Protocols"
    );
    stop_server(stop, task).await;

    // An allow-listed name is accepted.
    let options = WsServerOptions::default().allow_host("mcp.example");
    let (url, stop, task) = start_server(options).await;
    let addr = url.strip_prefix("ws://").expect("ws url").to_owned();
    assert_eq!(
        raw_handshake(&addr, "MCP.example", Some("mcp")).await,
        "HTTP/1.1 101 Switching Protocols"
    );
    stop_server(stop, task).await;
}

#[tokio::test]
async fn connect_failures_are_transport_errors_with_the_reason() {
    // Nothing listens on a port that was just released.
    let port = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let url = format!("ws://127.0.0.1:{port}");
    match ws::connect(&url, WsClientOptions::default()).await {
        Err(Error::Transport(why)) => assert!(
            why.starts_with(&format!("WebSocket connection to {url} failed: ")),
            "{why}"
        ),
        other => panic!("{other:?}"),
    }
    match ws::connect("http://127.0.0.1:1", WsClientOptions::default()).await {
        Err(Error::Transport(why)) => assert!(why.contains("invalid URL"), "{why}"),
        other => panic!("{other:?}"),
    }

    // wss:// goes through rustls (ring): a peer that is not TLS fails the handshake.
    let plain = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let wss = format!(
        "wss://localhost:{}",
        plain.local_addr().expect("addr").port()
    );
    tokio::spawn(async move {
        if let Ok((mut s, _)) = plain.accept().await {
            let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
        }
    });
    match ws::connect(&wss, WsClientOptions::default()).await {
        Err(Error::Transport(why)) => assert!(
            why.starts_with(&format!("WebSocket connection to {wss} failed: ")),
            "{why}"
        ),
        other => panic!("{other:?}"),
    }

    // Custom headers are sent: a browser-like Origin is refused with the server's reason.
    let (url, stop, task) = start_server(WsServerOptions::default()).await;
    let options = WsClientOptions::default().header("Origin", "http://evil.example");
    match ws::connect(&url, options).await {
        Err(Error::Transport(why)) => assert_eq!(
            why,
            format!(
                "WebSocket connection to {url} failed: HTTP 403 Forbidden: purra: Origin \"http://evil.example\" is not allowed"
            )
        ),
        other => panic!("{other:?}"),
    }
    stop_server(stop, task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_shutdown_closes_open_connections() {
    let (url, stop, task) = start_server(WsServerOptions::default()).await;
    let conn = Client::connect_ws(&url, WsClientOptions::default(), ClientOptions::default())
        .await
        .expect("connect");
    conn.ping().await.expect("ping");
    stop_server(stop, task).await;
    timeout(Duration::from_secs(5), conn.peer().closed())
        .await
        .expect("the connection closes when the server shuts down");
}
