//! Protocol rules over the raw in-memory transport: every answer is asserted as exact JSON.

use crate::support::{ask, initialized, start, Nothing, Text};

use std::time::Duration;

use purra_protocol::memory::{self, RawEnd};
use purra_protocol::types::*;
use purra_protocol::{
    Client, ClientOptions, EngineConfig, Error, ErrorObject, HandlerError, HandlerResult, Json,
    RegistrationError, RequestCtx, RequestOptions, RpcErrorCode, Server,
};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{json, Value};

#[derive(Serialize, JsonSchema)]
struct Sum {
    sum: i64,
}

fn test_server(engine: EngineConfig) -> Server {
    let server = Server::builder("t", "1").engine(engine).logging().build();
    register(&server).expect("the test tools register");
    server
}

fn register(server: &Server) -> Result<(), RegistrationError> {
    server.tool("echo", "echo", |a: Text, _c: RequestCtx| async move {
        HandlerResult::Ok(a.text)
    })?;
    server.tool(
        "wait",
        "waits until cancelled",
        |_: Nothing, c: RequestCtx| async move {
            tokio::select! {
                _ = c.cancelled() => HandlerResult::Ok("cancelled"),
                _ = tokio::time::sleep(Duration::from_millis(300)) => HandlerResult::Ok("waited"),
            }
        },
    )?;
    server.tool(
        "rpc_error",
        "fails with a protocol error",
        |_: Nothing, _c: RequestCtx| async move {
            Err::<String, _>(HandlerError::from(
                ErrorObject::new(RpcErrorCode(-32042), "need a URL")
                    .with_data(json!({"url": "https://example.invalid"})),
            ))
        },
    )?;
    server.tool("other_error", "fails otherwise", |_: Nothing, _c: RequestCtx| async move {
        Err::<String, _>(HandlerError::from("disk on fire"))
    })?;
    server.tool(
        "panics",
        "panics",
        |_: Nothing, _c: RequestCtx| async move {
            if true {
                panic!("boom");
            }
            HandlerResult::Ok("unreachable")
        },
    )?;
    let bad = Tool::new(
        "bad_output",
        json!({"type": "object"}).as_object().cloned().unwrap(),
    )
    .with_output_schema(
        json!({"type": "object", "properties": {"sum": {"type": "integer"}}})
            .as_object()
            .cloned()
            .unwrap(),
    );
    server.raw_tool(bad.clone(), |_args, _c: RequestCtx| async move {
        HandlerResult::Ok(
            CallToolResult::default().with_structured_content(json!({"sum": "not a number"})),
        )
    })?;
    let mut plain = bad;
    plain.name = "no_structured".into();
    server.raw_tool(plain, |_args, _c: RequestCtx| async move {
        HandlerResult::Ok(CallToolResult::text("plain"))
    })?;
    server.tool("sum", "adds", |_: Nothing, _c: RequestCtx| async move {
        HandlerResult::Ok(Json(Sum { sum: 3 }))
    })?;
    server.tool("log", "logs", |_: Nothing, c: RequestCtx| async move {
        for level in [
            LoggingLevel::Debug,
            LoggingLevel::Warning,
            LoggingLevel::Error,
        ] {
            c.log(level, Some("t"), json!("m")).await?;
        }
        HandlerResult::Ok("logged")
    })?;
    server.tool(
        "progress",
        "reports progress",
        |_: Nothing, c: RequestCtx| async move {
            c.progress(1.0, Some(2.0), Some("half")).await?;
            c.progress(2.0, Some(2.0), None).await?;
            HandlerResult::Ok("done")
        },
    )?;
    Ok(())
}

#[tokio::test]
async fn initialize_answers_exactly_and_negotiates() {
    let server = Server::builder("exact", "2")
        .instructions("be nice")
        .build();
    server
        .tool("echo", "echo", |a: Text, _c: RequestCtx| async move {
            HandlerResult::Ok(a.text)
        })
        .unwrap();
    let mut raw = start(&server).await;
    let got = ask(&mut raw, r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#).await;
    assert_eq!(
        got,
        r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"exact","version":"2"},"instructions":"be nice"}}"#
    );
    // An unsupported revision is answered with the latest.
    let mut raw = start(&server).await;
    let got = ask(&mut raw, r#"{"jsonrpc":"2.0","id":"x","method":"initialize","params":{"protocolVersion":"1999-01-01","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#).await;
    assert!(
        got.starts_with(r#"{"jsonrpc":"2.0","id":"x","result":{"protocolVersion":"2025-11-25","#),
        "{got}"
    );
}

#[tokio::test]
async fn an_empty_server_advertises_nothing() {
    let server = Server::builder("empty", "1").build();
    let mut raw = start(&server).await;
    let got = ask(&mut raw, r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#).await;
    assert_eq!(
        got,
        r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"empty","version":"1"}}}"#
    );
    let got = ask(
        &mut raw,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
    )
    .await;
    assert_eq!(
        got,
        r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"Method not found: tools/list"}}"#
    );
}

#[tokio::test]
async fn framing_errors_get_the_required_codes() {
    let server = test_server(EngineConfig {
        max_frame_bytes: 256,
        ..EngineConfig::default()
    });
    let mut raw = start(&server).await;
    assert_eq!(
        ask(&mut raw, "{not json").await,
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: key must be a string at line 1 column 2"}}"#
    );
    raw.tx
        .send(purra_protocol::Inbound::Frame(
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"x\":\"\xff\xfe\"}}"[..].into(),
        ))
        .await
        .unwrap();
    assert_eq!(
        raw.recv().await.unwrap(),
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: invalid unicode code point at line 1 column 56"}}"#
    );
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(300)
    );
    assert_eq!(
        ask(&mut raw, &big).await,
        // Discarded unread, but its id is read from its first bytes: the peer learns which
        // request failed.
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"Invalid request: frame of 360 bytes exceeds the 256-byte limit"}}"#
    );
    assert_eq!(
        ask(&mut raw, r#"{"jsonrpc":"2.0","id":7}"#).await,
        r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"Invalid request: missing method"}}"#
    );
    assert_eq!(
        ask(&mut raw, r#"{"jsonrpc":"1.0","id":8,"method":"ping"}"#).await,
        r#"{"jsonrpc":"2.0","id":8,"error":{"code":-32600,"message":"Invalid request: jsonrpc must be \"2.0\""}}"#
    );
    assert_eq!(
        ask(&mut raw, r#"[]"#).await,
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid request: empty batch"}}"#
    );
    // A request before initialize gets an error, and the session lives on.
    assert_eq!(
        ask(
            &mut raw,
            r#"{"jsonrpc":"2.0","id":9,"method":"tools/list"}"#
        )
        .await,
        r#"{"jsonrpc":"2.0","id":9,"error":{"code":-32600,"message":"Invalid request: the session is not initialized; send initialize first"}}"#
    );
    assert_eq!(
        ask(&mut raw, r#"{"jsonrpc":"2.0","id":10,"method":"ping"}"#).await,
        r#"{"jsonrpc":"2.0","id":10,"result":{}}"#
    );
}

#[tokio::test]
async fn method_params_and_resource_errors() {
    let server = test_server(EngineConfig::default());
    server.resource(Resource::new("mem://a", "a"), |uri, _c| async move {
        HandlerResult::Ok(ReadResourceResult::text(uri, "A"))
    });
    let mut raw = initialized(&server, "2025-11-25").await;
    assert_eq!(
        ask(
            &mut raw,
            r#"{"jsonrpc":"2.0","id":1,"method":"nope/nothing"}"#
        )
        .await,
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found: nope/nothing"}}"#
    );
    assert_eq!(
        ask(
            &mut raw,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"arguments":{}}}"#
        )
        .await,
        r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"Invalid params: missing field `name` at line 1 column 16"}}"#
    );
    assert_eq!(
        ask(
            &mut raw,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"missing"}}"#
        )
        .await,
        r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"Unknown tool: missing"}}"#
    );
    assert_eq!(
        ask(
            &mut raw,
            r#"{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"mem://b"}}"#
        )
        .await,
        r#"{"jsonrpc":"2.0","id":4,"error":{"code":-32002,"message":"Resource not found","data":{"uri":"mem://b"}}}"#
    );
    assert_eq!(
        ask(
            &mut raw,
            r#"{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":"mem://a"}}"#
        )
        .await,
        r#"{"jsonrpc":"2.0","id":5,"result":{"contents":[{"uri":"mem://a","text":"A"}]}}"#
    );
    assert_eq!(
        ask(
            &mut raw,
            r#"{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{"cursor":"forged"}}"#
        )
        .await,
        r#"{"jsonrpc":"2.0","id":6,"error":{"code":-32602,"message":"Invalid cursor"}}"#
    );
}

#[tokio::test]
async fn tool_failures_follow_the_rules() {
    let server = test_server(EngineConfig::default());
    let mut raw = initialized(&server, "2025-11-25").await;
    assert_eq!(
        ask(&mut raw, r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":5}}}"#).await,
        r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"Invalid arguments for tool echo: /text: 5 is not of type \"string\""}],"isError":true}}"#
    );
    assert_eq!(
        ask(
            &mut raw,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"rpc_error"}}"#
        )
        .await,
        r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32042,"message":"need a URL","data":{"url":"https://example.invalid"}}}"#
    );
    assert_eq!(
        ask(
            &mut raw,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"other_error"}}"#
        )
        .await,
        r#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"disk on fire"}],"isError":true}}"#
    );
    assert_eq!(
        ask(
            &mut raw,
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"panics"}}"#
        )
        .await,
        r#"{"jsonrpc":"2.0","id":4,"error":{"code":-32603,"message":"Internal error"}}"#
    );
    assert_eq!(
        ask(
            &mut raw,
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"bad_output"}}"#
        )
        .await,
        r#"{"jsonrpc":"2.0","id":5,"error":{"code":-32603,"message":"Tool bad_output returned structuredContent that does not match its output schema"}}"#
    );
    assert_eq!(
        ask(
            &mut raw,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"no_structured"}}"#
        )
        .await,
        r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"Tool no_structured has an output schema but returned no structuredContent"}}"#
    );
    assert_eq!(
        ask(
            &mut raw,
            r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"sum"}}"#
        )
        .await,
        r#"{"jsonrpc":"2.0","id":6,"result":{"content":[{"type":"text","text":"{\"sum\":3}"}],"structuredContent":{"sum":3}}}"#
    );
}

#[tokio::test]
async fn batches_are_answered_for_2025_03_26_only() {
    let server = test_server(EngineConfig::default());
    let mut raw = initialized(&server, "2025-03-26").await;
    let got = ask(
        &mut raw,
        r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"b"}}},{"jsonrpc":"2.0","id":3}]"#,
    )
    .await;
    assert_eq!(
        got,
        r#"[{"jsonrpc":"2.0","id":3,"error":{"code":-32600,"message":"Invalid request: missing method"}},{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"b"}]}}]"#
    );
    let mut raw = initialized(&server, "2025-11-25").await;
    assert_eq!(
        ask(&mut raw, r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#).await,
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid request: batches are only allowed in protocol version 2025-03-26"}}"#
    );
}

/// On a current-thread runtime (a stdio server's, and this test's) a handler that answers without
/// waiting is polled in the connection's own task: no task per request (every call here runs in
/// one task, the connection's); one that waits still gets a task of its own and is answered.
#[tokio::test]
async fn a_handler_that_answers_at_once_runs_in_the_connection_s_task() {
    let server = test_server(EngineConfig::default());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let ids = seen.clone();
    server
        .tool(
            "where",
            "where it runs",
            move |_: Nothing, _c: RequestCtx| {
                let ids = ids.clone();
                async move {
                    ids.lock().unwrap().push(tokio::task::id());
                    HandlerResult::Ok("here")
                }
            },
        )
        .unwrap();
    let mut raw = initialized(&server, "2025-11-25").await;
    for id in 1..=3 {
        assert_eq!(
            ask(
                &mut raw,
                format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"where"}}}}"#)
            )
            .await,
            format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"here"}}]}}}}"#)
        );
    }
    let ids = seen.lock().unwrap().clone();
    assert_eq!(ids.len(), 3);
    assert!(
        ids.iter().all(|i| *i == ids[0]),
        "tasks per request: {ids:?}"
    );
    // One that waits: the connection reads on (the ping is answered first), then it answers.
    raw.send(r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"wait"}}"#)
        .await;
    assert_eq!(
        ask(&mut raw, r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#).await,
        r#"{"jsonrpc":"2.0","id":5,"result":{}}"#
    );
    assert_eq!(
        raw.recv().await.unwrap(),
        r#"{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"waited"}]}}"#
    );
}

#[tokio::test]
async fn a_cancelled_request_gets_no_response() {
    let server = test_server(EngineConfig::default());
    let (t, mut raw) = memory::raw();
    let (session, _join) = server.start(t);
    raw.send(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#).await;
    raw.recv().await.unwrap();
    raw.send(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"wait"}}"#)
        .await;
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"changed my mind"}}"#).await;
    // The next frame is the ping's answer: the cancelled call is never answered.
    assert_eq!(
        ask(&mut raw, r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#).await,
        r#"{"jsonrpc":"2.0","id":2,"result":{}}"#
    );
    let late = tokio::time::timeout(Duration::from_millis(600), raw.recv()).await;
    assert!(late.is_err(), "a cancelled request was answered: {late:?}");
    assert_eq!(session.peer().stats().cancelled_by_peer(), 1);
}

#[tokio::test]
async fn duplicate_ids_and_unmatched_responses() {
    let server = test_server(EngineConfig::default());
    let (t, mut raw) = memory::raw();
    let (session, _join) = server.start(t);
    raw.send(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#).await;
    raw.recv().await.unwrap();
    raw.send(r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"wait"}}"#)
        .await;
    assert_eq!(
        ask(&mut raw, r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#).await,
        r#"{"jsonrpc":"2.0","id":5,"error":{"code":-32600,"message":"Invalid request: request id 5 is already in use"}}"#
    );
    assert_eq!(
        raw.recv().await.unwrap(),
        r#"{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"waited"}]}}"#
    );
    raw.send(r#"{"jsonrpc":"2.0","id":999,"result":{}}"#).await;
    raw.send(r#"{"jsonrpc":"2.0","id":"zz","error":{"code":1,"message":"x"}}"#)
        .await;
    assert_eq!(
        ask(&mut raw, r#"{"jsonrpc":"2.0","id":6,"method":"ping"}"#).await,
        r#"{"jsonrpc":"2.0","id":6,"result":{}}"#
    );
    assert_eq!(session.peer().stats().unmatched_responses(), 2);
}

#[tokio::test]
async fn logging_honours_the_level_and_progress_echoes_the_token() {
    let server = test_server(EngineConfig::default());
    let mut raw = initialized(&server, "2025-11-25").await;
    assert_eq!(
        ask(
            &mut raw,
            r#"{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"warning"}}"#
        )
        .await,
        r#"{"jsonrpc":"2.0","id":1,"result":{}}"#
    );
    raw.send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"log"}}"#)
        .await;
    let frames = [
        raw.recv().await.unwrap(),
        raw.recv().await.unwrap(),
        raw.recv().await.unwrap(),
    ];
    assert_eq!(
        frames,
        [
            r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"warning","logger":"t","data":"m"}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"error","logger":"t","data":"m"}}"#,
            r#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"logged"}]}}"#,
        ]
    );
    raw.send(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"progress","_meta":{"progressToken":"tok"}}}"#).await;
    let frames = [
        raw.recv().await.unwrap(),
        raw.recv().await.unwrap(),
        raw.recv().await.unwrap(),
    ];
    assert_eq!(
        frames,
        [
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"tok","progress":1.0,"total":2.0,"message":"half"}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"tok","progress":2.0,"total":2.0}}"#,
            r#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"done"}]}}"#,
        ]
    );
}

#[tokio::test]
async fn registration_while_serving_pushes_list_changed_and_updates_reach_subscribers_only() {
    let server = test_server(EngineConfig::default());
    server.resource(Resource::new("mem://watched", "w"), |uri, _c| async move {
        HandlerResult::Ok(ReadResourceResult::text(uri, "w"))
    });
    let mut subscriber = initialized(&server, "2025-11-25").await;
    let mut other = initialized(&server, "2025-11-25").await;
    assert_eq!(
        ask(&mut subscriber, r#"{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"mem://watched"}}"#).await,
        r#"{"jsonrpc":"2.0","id":1,"result":{}}"#
    );
    server.notify_resource_updated("mem://watched").await;
    assert_eq!(
        subscriber.recv().await.unwrap(),
        r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"mem://watched"}}"#
    );
    server
        .tool(
            "late",
            "added later",
            |_: Nothing, _c: RequestCtx| async move { HandlerResult::Ok("late") },
        )
        .unwrap();
    let changed = r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#;
    assert_eq!(subscriber.recv().await.unwrap(), changed);
    // The other session got the list_changed, but never the resource update.
    assert_eq!(other.recv().await.unwrap(), changed);
}

/// A fake server on a raw transport: answers initialize with `version` and no capabilities.
async fn fake_server(
    version: &str,
) -> (
    tokio::task::JoinHandle<Result<purra_protocol::Connection, Error>>,
    RawEnd,
) {
    let (t, mut raw) = memory::raw();
    let options = ClientOptions::default().request_timeout(Duration::from_secs(5));
    let connect = tokio::spawn(Client::connect(t, options));
    let init = raw.recv().await.unwrap();
    let v: Value = serde_json::from_str(&init).unwrap();
    assert_eq!(v["method"], "initialize");
    assert_eq!(v["params"]["protocolVersion"], "2025-11-25");
    raw.send(format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{"protocolVersion":"{version}","capabilities":{{}},"serverInfo":{{"name":"fake","version":"0"}}}}}}"#,
        v["id"]
    ))
    .await;
    (connect, raw)
}

#[tokio::test]
async fn the_client_refuses_an_unsupported_version() {
    let (connect, _raw) = fake_server("1999-01-01").await;
    let err = connect.await.unwrap().unwrap_err();
    assert_eq!(err, Error::UnsupportedProtocolVersion("1999-01-01".into()));
    assert_eq!(
        err.to_string(),
        "the server chose protocol version \"1999-01-01\", which this client does not support"
    );
}

#[tokio::test]
async fn client_timeouts_cancel_and_late_responses_are_dropped() {
    let (connect, mut raw) = fake_server("2025-11-25").await;
    assert_eq!(
        raw.recv().await.unwrap(),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
    );
    let conn = connect.await.unwrap().unwrap();
    let call = conn.peer().request_raw(
        "tools/call",
        Some(serde_json::value::to_raw_value(&json!({"name": "slow"})).unwrap()),
        RequestOptions::default().timeout(Duration::from_millis(100)),
    );
    let (res, sent) = tokio::join!(call, raw.recv());
    assert_eq!(res.unwrap_err(), Error::Timeout);
    assert_eq!(
        sent.unwrap(),
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}"#
    );
    assert_eq!(
        raw.recv().await.unwrap(),
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"timeout"}}"#
    );
    raw.send(r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#)
        .await;
    // A JSON-RPC error keeps code, message and data.
    let ping = conn.ping();
    let answer = async {
        let sent = raw.recv().await.unwrap();
        assert_eq!(
            sent,
            r#"{"jsonrpc":"2.0","id":2,"method":"ping","params":{}}"#
        );
        raw.send(r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32000,"message":"nope","data":[1]}}"#)
            .await;
    };
    let (res, ()) = tokio::join!(ping, answer);
    assert_eq!(
        res.unwrap_err(),
        Error::Rpc(ErrorObject::new(RpcErrorCode(-32000), "nope").with_data(json!([1])))
    );
    assert_eq!(conn.peer().stats().unmatched_responses(), 1);
}

#[tokio::test]
async fn a_shorter_timeout_behind_a_longer_one_fires_first_and_the_longer_one_survives() {
    let (connect, mut raw) = fake_server("2025-11-25").await;
    raw.recv().await.unwrap();
    let conn = connect.await.unwrap().unwrap();
    let call = |name: &str, ms: u64| {
        conn.peer().request_raw(
            "tools/call",
            Some(serde_json::value::to_raw_value(&json!({ "name": name })).unwrap()),
            RequestOptions::default().timeout(Duration::from_millis(ms)),
        )
    };
    // The connection's one timer is armed for the first request's 30 s; the second's 100 ms
    // must re-arm it earlier, and the first must still be waiting for its answer afterwards.
    let long = call("long", 30_000);
    let short = async {
        let started = tokio::time::Instant::now();
        let res = call("short", 100).await;
        (res, started.elapsed())
    };
    let server = async {
        assert_eq!(
            raw.recv().await.unwrap(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"long"}}"#
        );
        assert_eq!(
            raw.recv().await.unwrap(),
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"short"}}"#
        );
        assert_eq!(
            raw.recv().await.unwrap(),
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"timeout"}}"#
        );
        raw.send(r#"{"jsonrpc":"2.0","id":1,"result":{"ok":true}}"#)
            .await;
    };
    let (long, (short, took), ()) = tokio::join!(long, short, server);
    assert_eq!(short.unwrap_err(), Error::Timeout);
    assert!(
        took >= Duration::from_millis(100) && took < Duration::from_secs(5),
        "{took:?}"
    );
    assert_eq!(long.unwrap().get(), r#"{"ok":true}"#);
    assert_eq!(conn.peer().stats().unmatched_responses(), 0);
}

#[tokio::test]
async fn progress_restarts_the_timeout_up_to_the_hard_maximum() {
    let (connect, mut raw) = fake_server("2025-11-25").await;
    raw.recv().await.unwrap();
    let conn = connect.await.unwrap().unwrap();
    let opts = RequestOptions::default()
        .timeout(Duration::from_millis(200))
        .on_progress(|_p: &ProgressParams| {}, Some(Duration::from_millis(700)));
    let call = async {
        let started = tokio::time::Instant::now();
        let res = conn
            .peer()
            .request_raw(
                "tools/call",
                Some(serde_json::value::to_raw_value(&json!({"name": "x"})).unwrap()),
                opts,
            )
            .await;
        (res, started.elapsed())
    };
    let server = async {
        let sent = raw.recv().await.unwrap();
        // As JSON values: the token is added to the params' members, whose order follows
        // serde_json's `preserve_order` (on in a workspace build, for purra-gateway's Cedar).
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&sent).unwrap(),
            serde_json::from_str::<serde_json::Value>(
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":1},"name":"x"}}"#
            )
            .unwrap(),
            "{sent}"
        );
        let start = tokio::time::Instant::now();
        // Progress every 150 ms keeps the 200 ms timeout alive, until the 700 ms maximum.
        for _ in 0..8 {
            tokio::time::sleep(Duration::from_millis(150)).await;
            raw.send(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#).await;
        }
        (start, raw)
    };
    let ((res, took), (_s, mut raw)) = tokio::join!(call, server);
    assert_eq!(res.unwrap_err(), Error::Timeout);
    assert!(
        took >= Duration::from_millis(650) && took < Duration::from_millis(1100),
        "{took:?}"
    );
    assert_eq!(
        raw.recv().await.unwrap(),
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"timeout"}}"#
    );
}

#[tokio::test]
async fn a_closed_connection_is_distinct_from_a_transport_failure() {
    let (connect, mut raw) = fake_server("2025-11-25").await;
    raw.recv().await.unwrap();
    let conn = connect.await.unwrap().unwrap();
    let call = conn.ping();
    let close = async {
        raw.recv().await.unwrap();
        drop(raw);
    };
    let (res, ()) = tokio::join!(call, close);
    assert_eq!(res.unwrap_err(), Error::ConnectionClosed);
    assert_eq!(conn.ping().await.unwrap_err(), Error::ConnectionClosed);
    conn.close().await;
    conn.close().await;
}

#[tokio::test]
async fn client_and_server_over_the_memory_pair() {
    let server = test_server(EngineConfig::default());
    let (a, b) = memory::pair();
    tokio::spawn({
        let server = server.clone();
        async move { server.serve(b).await }
    });
    let conn = Client::connect(a, ClientOptions::default()).await.unwrap();
    assert_eq!(conn.protocol_version(), "2025-11-25");
    assert_eq!(conn.tools().len(), 10);
    let r = conn.call_tool("sum", json!({})).await.unwrap();
    assert_eq!(r.structured_content, Some(json!({"sum": 3})));
    // The client enforces a declared output schema too.
    let err = conn.call_tool("bad_output", json!({})).await.unwrap_err();
    assert_eq!(err.to_string(), "JSON-RPC error -32603: Tool bad_output returned structuredContent that does not match its output schema");
}

#[tokio::test]
async fn roots_changes_are_announced_and_served() {
    let (t, mut raw) = memory::raw();
    let options = ClientOptions::default().roots(vec![Root::new("file:///a")]);
    let connect = tokio::spawn(Client::connect(t, options));
    let init = raw.recv().await.unwrap();
    assert!(
        init.contains(r#""capabilities":{"roots":{"listChanged":true}}"#),
        "{init}"
    );
    raw.send(r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"fake","version":"0"}}}"#).await;
    raw.recv().await.unwrap();
    let conn = connect.await.unwrap().unwrap();
    conn.set_roots(vec![Root::new("file:///b").with_name("b")])
        .await
        .unwrap();
    assert_eq!(
        raw.recv().await.unwrap(),
        r#"{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}"#
    );
    raw.send(r#"{"jsonrpc":"2.0","id":"r1","method":"roots/list"}"#)
        .await;
    assert_eq!(
        raw.recv().await.unwrap(),
        r#"{"jsonrpc":"2.0","id":"r1","result":{"roots":[{"uri":"file:///b","name":"b"}]}}"#
    );
    // A handler the client did not provide is method-not-found, and no capability was declared.
    raw.send(r#"{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}}"#).await;
    assert_eq!(
        raw.recv().await.unwrap(),
        r#"{"jsonrpc":"2.0","id":"s1","error":{"code":-32601,"message":"Method not found: sampling/createMessage"}}"#
    );
}

#[tokio::test]
async fn a_pipelined_client_is_served_in_order_and_sees_list_changes() {
    // initialize, initialized and a call that registers a tool, all sent before any answer: the
    // call sees the session initialized, and the list change reaches this very session before
    // the call's result (the session is registered before its first frame is read).
    for _ in 0..20 {
        let server = test_server(EngineConfig::default());
        let adder = server.clone();
        server
            .tool(
                "register",
                "registers a tool",
                move |_: Nothing, _c: RequestCtx| {
                    let server = adder.clone();
                    async move {
                        server.tool("late", "added", |_: Nothing, _c: RequestCtx| async move {
                            HandlerResult::Ok("late")
                        })?;
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        HandlerResult::Ok("registered")
                    }
                },
            )
            .unwrap();
        let (t, mut raw) = memory::raw();
        raw.send(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#).await;
        raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
        raw.send(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"register"}}"#)
            .await;
        let (_session, _join) = server.start(t);
        let init = raw.recv().await.unwrap();
        assert!(
            init.starts_with(r#"{"jsonrpc":"2.0","id":0,"result":"#),
            "{init}"
        );
        assert_eq!(
            raw.recv().await.unwrap(),
            r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#
        );
        assert_eq!(
            raw.recv().await.unwrap(),
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"registered"}]}}"#
        );
    }
}

#[tokio::test]
async fn malformed_responses_fail_their_request_and_are_never_answered() {
    let (connect, mut raw) = fake_server("2025-11-25").await;
    raw.recv().await.unwrap(); // notifications/initialized
    let conn = connect.await.unwrap().unwrap();
    // A response with a bad envelope fails the request it names, at once.
    let (res, sent) = tokio::join!(conn.ping(), async {
        let sent = raw.recv().await.unwrap();
        raw.send(r#"{"jsonrpc":"1.0","id":1,"result":{}}"#).await;
        sent
    });
    assert_eq!(
        sent,
        r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{}}"#
    );
    assert_eq!(
        res.unwrap_err(),
        Error::Protocol("malformed response: Invalid request: jsonrpc must be \"2.0\"".into())
    );
    // An oversize frame whose last bytes name a pending request fails that request.
    let (res, _) = tokio::join!(conn.ping(), async {
        raw.recv().await.unwrap();
        raw.tx
            .send(purra_protocol::Inbound::Frame(
                format!(
                    r#"{{"result":{{"pad":"{}"}},"jsonrpc":"2.0","id":2}}"#,
                    "x".repeat(5 << 20)
                )
                .into_bytes()
                .into(),
            ))
            .await
            .unwrap();
    });
    assert_eq!(
        res.unwrap_err(),
        Error::ResponseTooLarge {
            len: (5 << 20) + 44,
            limit: 4 << 20
        }
    );
    // Neither was answered with an error: a response is never answered.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(raw.rx.try_recv().is_err());
    // The connection goes on.
    let (res, _) = tokio::join!(conn.ping(), async {
        raw.recv().await.unwrap();
        raw.send(r#"{"jsonrpc":"2.0","id":3,"result":{}}"#).await;
    });
    res.unwrap();
}
