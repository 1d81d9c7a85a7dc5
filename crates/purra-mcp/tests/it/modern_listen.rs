//! The adapter on a 2026-07-28 connection, against a scripted server over `memory::raw()` that
//! controls the `subscriptions/listen` stream exactly: a list change on the stream makes
//! registrations stale; the stream's end makes them stale too, and discovery refuses while no
//! stream is open; an `input_required` result is unsupported on this tools-only path.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use purra_mcp::{codes, CatalogMonitor};
use purra_protocol::memory::{self, RawEnd};
use purra_protocol::{Client, ClientOptions, ProtocolMode, ProtocolVersion};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::support::{call, discover};

const SUB: &str = "io.modelcontextprotocol/subscriptionId";

const LIST: &str = r#"{"resultType":"complete","tools":[{"name":"search","description":"Searches","inputSchema":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"],"additionalProperties":false}}]}"#;
const DISCOVER: &str = r#"{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"scripted","version":"1"}}}"#;
const FOUND: &str = r#"{"resultType":"complete","content":[{"type":"text","text":"found"}]}"#;
const INPUT_REQUIRED: &str = r#"{"resultType":"input_required","inputRequests":{"confirm":{"method":"elicitation/create","params":{"message":"Sure?","requestedSchema":{"type":"object","properties":{}}}}},"requestState":"opaque"}"#;

/// What the test tells the server to do.
enum Cmd {
    /// `notifications/tools/list_changed` on the open stream.
    ListChanged,
    /// Ends every open stream (answers its request).
    EndStreams,
    /// Acknowledges the streams opened while acknowledging was off, and turns it back on.
    AckPending,
}

/// What the server saw and how it answers.
#[derive(Default)]
struct Script {
    call_result: String,
    /// Whether a new `subscriptions/listen` is acknowledged at once.
    ack: bool,
    /// Open streams: the request id (JSON text) and whether it was acknowledged.
    streams: Vec<(String, bool)>,
    listens: usize,
    lists: usize,
    calls: usize,
}

fn ack_frame(id: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{{"notifications":{{"toolsListChanged":true}},"_meta":{{"{SUB}":{id}}}}}}}"#
    )
}

fn scripted_listen(mut raw: RawEnd, script: Arc<Mutex<Script>>, mut cmds: mpsc::Receiver<Cmd>) {
    tokio::spawn(async move {
        loop {
            let frames: Vec<String> = tokio::select! {
                frame = raw.recv() => {
                    let Some(frame) = frame else { return };
                    let msg: Value = serde_json::from_str(&frame).unwrap();
                    let Some(id) = msg.get("id").map(Value::to_string) else {
                        continue;
                    };
                    // Every request carries the envelope of the revision.
                    assert_eq!(
                        msg["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
                        json!("2026-07-28")
                    );
                    let reply = |result: &str| {
                        vec![format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#)]
                    };
                    let mut s = script.lock().unwrap();
                    match msg["method"].as_str().unwrap() {
                        "server/discover" => reply(DISCOVER),
                        "subscriptions/listen" => {
                            s.listens += 1;
                            let ack = s.ack;
                            s.streams.push((id.clone(), ack));
                            // The stream stays open: no answer, only its acknowledgment.
                            if ack { vec![ack_frame(&id)] } else { vec![] }
                        }
                        "tools/list" => {
                            s.lists += 1;
                            reply(LIST)
                        }
                        "tools/call" => {
                            s.calls += 1;
                            reply(&s.call_result)
                        }
                        other => panic!("unexpected {other}"),
                    }
                }
                cmd = cmds.recv() => {
                    let Some(cmd) = cmd else { return };
                    let mut s = script.lock().unwrap();
                    match cmd {
                        Cmd::ListChanged => s
                            .streams
                            .iter()
                            .filter(|(_, acked)| *acked)
                            .map(|(id, _)| format!(
                                r#"{{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{{"_meta":{{"{SUB}":{id}}}}}}}"#
                            ))
                            .collect(),
                        Cmd::EndStreams => s
                            .streams
                            .drain(..)
                            .map(|(id, _)| format!(
                                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"complete","_meta":{{"{SUB}":{id}}}}}}}"#
                            ))
                            .collect(),
                        Cmd::AckPending => {
                            s.ack = true;
                            s.streams
                                .iter_mut()
                                .filter(|(_, acked)| !*acked)
                                .map(|(id, acked)| {
                                    *acked = true;
                                    ack_frame(id)
                                })
                                .collect()
                        }
                    }
                }
            };
            for f in frames {
                raw.send(f).await;
            }
        }
    });
}

/// Waits (up to 10 s) until `f` holds.
async fn until(what: &str, f: impl Fn() -> bool) {
    let start = tokio::time::Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn list_changes_and_the_end_of_the_stream_make_registrations_stale() {
    let script = Arc::new(Mutex::new(Script {
        call_result: FOUND.into(),
        ack: true,
        ..Default::default()
    }));
    let (cmd, cmds) = mpsc::channel(8);
    let (client, server) = memory::raw();
    scripted_listen(server, script.clone(), cmds);
    let options =
        ClientOptions::default().mode(ProtocolMode::Pinned(ProtocolVersion::new("2026-07-28")));
    let conn = Arc::new(Client::connect(client, options).await.unwrap());
    let monitor = CatalogMonitor::attach(&conn);
    assert_eq!(monitor.protocol_version().as_deref(), Some("2026-07-28"));
    assert!(conn.follows_list_changes());

    let cat = discover(&conn, &monitor).await.unwrap();
    assert_eq!(
        cat.snapshot.as_json()["protocolVersion"],
        json!("2026-07-28")
    );
    assert_eq!(
        call(&cat, json!({"q": "x"})).await,
        Ok(json!({"text": ["found"], "structured": null}))
    );

    // This path installs no input handlers: an input_required result is unsupported.
    script.lock().unwrap().call_result = INPUT_REQUIRED.into();
    assert_eq!(
        call(&cat, json!({"q": "x"})).await,
        Err(codes::result_unsupported())
    );
    script.lock().unwrap().call_result = FOUND.into();

    // A list change on the stream: the registration is stale and sends nothing.
    cmd.send(Cmd::ListChanged).await.unwrap();
    until("the list change", || monitor.generation() == 1).await;
    let calls = script.lock().unwrap().calls;
    assert_eq!(
        call(&cat, json!({"q": "x"})).await,
        Err(codes::catalog_stale())
    );
    assert_eq!(script.lock().unwrap().calls, calls);

    // Rediscovery builds registrations that work.
    let cat = discover(&conn, &monitor).await.unwrap();
    assert_eq!(
        call(&cat, json!({"q": "x"})).await,
        Ok(json!({"text": ["found"], "structured": null}))
    );

    // The stream ends and its reopening is not acknowledged: changes could go unseen, so the
    // registrations are stale and discovery refuses, without sending anything.
    script.lock().unwrap().ack = false;
    cmd.send(Cmd::EndStreams).await.unwrap();
    until("the end of the stream", || {
        !conn.follows_list_changes() && monitor.generation() == 2
    })
    .await;
    let (lists, calls) = {
        let s = script.lock().unwrap();
        (s.lists, s.calls)
    };
    assert_eq!(
        call(&cat, json!({"q": "x"})).await,
        Err(codes::catalog_stale())
    );
    assert_eq!(
        discover(&conn, &monitor).await.err(),
        Some(codes::catalog_stale())
    );
    {
        let s = script.lock().unwrap();
        assert_eq!((s.lists, s.calls), (lists, calls));
    }

    // The client reopens the stream; once it is acknowledged, list changes are followed again
    // (the missed ones heard as one more change) and rediscovery works.
    until("the reopened stream", || {
        script.lock().unwrap().listens == 2
    })
    .await;
    cmd.send(Cmd::AckPending).await.unwrap();
    until("the acknowledgment", || {
        conn.follows_list_changes() && monitor.generation() == 3
    })
    .await;
    let cat = discover(&conn, &monitor).await.unwrap();
    assert_eq!(
        call(&cat, json!({"q": "x"})).await,
        Ok(json!({"text": ["found"], "structured": null}))
    );
}
