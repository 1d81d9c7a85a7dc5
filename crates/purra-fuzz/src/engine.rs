//! The engine driven by frame sequences over `memory::raw()`: everything it writes is one valid
//! JSON-RPC message, it never answers an id more often than the id was sent, it answers every
//! request the peer did not cancel unless it closed the connection, and it stops once its
//! transport ends.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use purra_protocol::__private::{decode_frame, Frame, Message};
use purra_protocol::{memory, ErrorObject, HandlerResult, Inbound, RequestCtx, Server};
use serde_json::{Map, Value};

/// At most this many frames per input.
const MAX_FRAMES: usize = 32;

/// A server with tools that answer at once, after a while, and with an error.
pub(crate) fn test_server() -> Server {
    let server = Server::builder("fuzz", "0.1.0").build();
    server
        .tool(
            "echo",
            "Echoes its arguments",
            |args: Map<String, Value>, _ctx: RequestCtx| async move {
                HandlerResult::Ok(Value::Object(args).to_string())
            },
        )
        .expect("a valid tool");
    server
        .tool(
            "slow",
            "Answers after five seconds",
            |_: Map<String, Value>, _ctx: RequestCtx| async move {
                tokio::time::sleep(Duration::from_secs(5)).await;
                HandlerResult::Ok("done".to_owned())
            },
        )
        .expect("a valid tool");
    server
        .tool(
            "fail",
            "Always fails",
            |_: Map<String, Value>, _ctx: RequestCtx| async move {
                HandlerResult::<String>::Err(ErrorObject::internal("failed").into())
            },
        )
        .expect("a valid tool");
    server
}

/// The ids (as JSON text) the frame may be answered with: requests' ids, and the ids of refused
/// frames that carry one; and whether the answer is due (a single request's; a batch may be
/// refused as a whole, a refused frame's id may not be trusted).
fn ids_sent(frame: &[u8], cancelled: &mut HashSet<String>) -> Vec<(String, bool)> {
    let (items, single) = match decode_frame(frame) {
        Frame::Single(item) => (vec![item], true),
        Frame::Batch(items) => (items, false),
    };
    let mut ids = Vec::new();
    for item in items {
        match item {
            Ok(Message::Request { id, .. }) => ids.push((key(&id), single)),
            Ok(Message::Notification { method, params }) if method == "notifications/cancelled" => {
                let params: Option<Value> = params.and_then(|p| serde_json::from_str(p.get()).ok());
                if let Some(id) = params.as_ref().and_then(|p| p.get("requestId")) {
                    cancelled.insert(id.to_string());
                }
            }
            Err(e) => ids.extend(e.id.as_ref().map(|id| (key(id), false))),
            Ok(_) => {}
        }
    }
    ids
}

fn key(id: &purra_protocol::RequestId) -> String {
    serde_json::to_string(id).expect("an id serializes")
}

/// Checks one input: frames separated by `\n`.
pub fn check(data: &[u8]) {
    let rt = crate::paused_runtime();
    rt.block_on(async {
        let server = test_server();
        let (transport, raw) = memory::raw();
        let (_session, join) = server.start(transport);
        let memory::RawEnd { tx, mut rx } = raw;
        let written = Arc::new(Mutex::new(Vec::new()));
        let collector = {
            let written = written.clone();
            tokio::spawn(async move {
                while let Some(out) = rx.recv().await {
                    written.lock().expect("not poisoned").push(out.into_frame());
                }
            })
        };
        let mut sent: HashMap<String, usize> = HashMap::new();
        let mut due = HashSet::new();
        let mut cancelled = HashSet::new();
        for frame in data.split(|b| *b == b'\n').take(MAX_FRAMES) {
            if tx
                .send(Inbound::Frame(Bytes::copy_from_slice(frame)))
                .await
                .is_err()
            {
                break;
            }
            for (id, is_due) in ids_sent(frame, &mut cancelled) {
                *sent.entry(id.clone()).or_default() += 1;
                if is_due {
                    due.insert(id);
                }
            }
        }
        // Let every handler finish (virtual time), then end the transport.
        tokio::time::sleep(Duration::from_secs(60)).await;
        let closed_early = join.is_finished();
        drop(tx);
        tokio::time::timeout(Duration::from_secs(60), join)
            .await
            .expect("the engine stops once its transport ends")
            .expect("the engine does not panic");
        // The session handle may keep the outbound channel open: what was written is in by now.
        tokio::time::sleep(Duration::from_secs(1)).await;
        collector.abort();

        let written = std::mem::take(&mut *written.lock().expect("not poisoned"));
        let mut answered: HashMap<String, usize> = HashMap::new();
        for out in &written {
            let text = std::str::from_utf8(out).expect("the engine writes UTF-8");
            // A batch (2025-03-26) is answered with a batch of responses.
            let items = match decode_frame(out) {
                Frame::Single(item) => vec![item],
                Frame::Batch(items) => items,
            };
            for item in items {
                let id = match item {
                    Ok(Message::Response { id, .. }) => Some(id),
                    Ok(Message::Error { id, error }) => {
                        assert!(
                            !error.message.contains("panicked"),
                            "a panic reached the peer: {text}"
                        );
                        id
                    }
                    Ok(Message::Notification { .. } | Message::Request { .. }) => None,
                    Err(e) => panic!("the engine wrote {text}: {e:?}"),
                };
                if let Some(id) = id {
                    let k = key(&id);
                    let n = answered.entry(k.clone()).or_default();
                    *n += 1;
                    assert!(
                        *n <= sent.get(&k).copied().unwrap_or(0),
                        "id {k} answered {n} times, sent {:?} times: {text}",
                        sent.get(&k)
                    );
                }
            }
        }
        if !closed_early {
            for id in &due {
                assert!(
                    answered.contains_key(id) || cancelled.contains(id),
                    "request {id} was never answered"
                );
            }
        }
    });
}
