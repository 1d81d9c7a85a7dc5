//! The server in the 2026-07-28 revision over the raw in-memory transport (a stream connection,
//! as stdio and WebSocket are): the era chosen by the first request, the envelope ladder, the
//! shaped results, multi round-trip requests with a sealed requestState, and subscriptions/listen.
//! Every answer is asserted as exact JSON (a requestState, which is random, is cut out first).

use purra_protocol::modern::{CacheHint, CacheScope, InputRequest, InputResponse};
use purra_protocol::types::*;
use purra_protocol::{HandlerResult, RequestCtx, Server};
use serde_json::{json, Value};

use crate::support::{ask, recv, start, Nothing};

fn name_form(message: &str, field: &str) -> ElicitParams {
    ElicitParams::form(
        message,
        json!({"type": "object", "properties": {field: {"type": "string"}}, "required": [field]})
            .as_object()
            .cloned()
            .unwrap(),
    )
}

fn modern_server() -> Server {
    let server = Server::builder("modern", "3")
        .logging()
        .cache_hint("tools/list", CacheHint::new(60_000, CacheScope::Public))
        .unwrap()
        .build();
    server
        .tool(
            "greet",
            "asks a name",
            |_: Nothing, c: RequestCtx| async move {
                let r = c.elicit(name_form("What is your name?", "name")).await?;
                let name = r
                    .content
                    .and_then(|c| c.get("name").and_then(Value::as_str).map(str::to_owned))
                    .unwrap_or_default();
                HandlerResult::Ok(format!("Hello, {name}!"))
            },
        )
        .unwrap();
    server
        .tool(
            "two_steps",
            "asks twice, carrying state",
            |_: Nothing, c: RequestCtx| async move {
                c.set_request_state(json!({"step": 1}));
                let a = c
                    .input("first", InputRequest::Elicit(name_form("First?", "a")))
                    .await?;
                c.set_request_state(json!({"step": 2}));
                let b = c
                    .input("second", InputRequest::Elicit(name_form("Second?", "b")))
                    .await?;
                let state = c.request_state();
                let (InputResponse::Elicit(a), InputResponse::Elicit(b)) = (a, b) else {
                    return HandlerResult::Ok("wrong kinds".to_owned());
                };
                HandlerResult::Ok(format!(
                    "{} {} {}",
                    a.content.unwrap()["a"],
                    b.content.unwrap()["b"],
                    state.unwrap_or_default()
                ))
            },
        )
        .unwrap();
    server
        .tool(
            "all_at_once",
            "asks three things together",
            |_: Nothing, c: RequestCtx| async move {
                let (a, b, r) = tokio::join!(
                    c.input(
                        "user_name",
                        InputRequest::Elicit(name_form("Name?", "name"))
                    ),
                    c.input(
                        "greeting",
                        InputRequest::Sample(CreateMessageParams::new(
                            vec![SamplingMessage::new(
                                Role::User,
                                json!({"type": "text", "text": "Say hi"}),
                            )],
                            50,
                        )),
                    ),
                    c.list_roots(),
                );
                let (a, b, r) = (a?, b?, r?);
                HandlerResult::Ok(format!("{} answers, {} roots", [&a, &b].len(), r.len()))
            },
        )
        .unwrap();
    server
        .tool(
            "logs",
            "logs twice",
            |_: Nothing, c: RequestCtx| async move {
                c.log(LoggingLevel::Debug, None, json!("debug")).await?;
                c.log(LoggingLevel::Error, None, json!("error")).await?;
                // The envelope's client, by name alone and whole.
                let (name, info) = (c.client_name(), c.client_info().map(|i| i.name));
                HandlerResult::Ok(format!("logged for {name:?} ({info:?})"))
            },
        )
        .unwrap();
    server.resource(Resource::new("m://a", "a"), |uri, _c| async move {
        HandlerResult::Ok(ReadResourceResult::text(uri, "A"))
    });
    server
}

const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"sampling":{},"roots":{}},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}}"#;

/// Cuts the (random) requestState out of an answer: (the answer with `"requestState":"…"`
/// replaced by `"requestState":"<state>"`, the state).
/// `got` and `want` are the same JSON value (members in any order: serde_json keeps insertion
/// order when `preserve_order` is on, as in a workspace build with purra-gateway's Cedar).
#[track_caller]
fn same_json(got: &str, want: &str) {
    let parse = |t: &str| serde_json::from_str::<serde_json::Value>(t).expect("json");
    assert_eq!(parse(got), parse(want), "{got}");
}

fn cut_state(answer: &str) -> (String, String) {
    let v: Value = serde_json::from_str(answer).unwrap();
    let state = v["result"]["requestState"].as_str().unwrap().to_owned();
    (answer.replace(&state, "<state>"), state)
}

const INFO: &str =
    r#""_meta":{"io.modelcontextprotocol/serverInfo":{"name":"modern","version":"3"}}"#;

#[tokio::test]
async fn discover_and_lists_carry_the_revisions_members() {
    let mut raw = start(&modern_server()).await;
    let got = ask(
        &mut raw,
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{{{META}}}}}"#),
    )
    .await;
    assert_eq!(
        got,
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"result":{{"supportedVersions":["2026-07-28"],"capabilities":{{"tools":{{"listChanged":true}},"resources":{{"listChanged":true,"subscribe":true}},"logging":{{}}}},"resultType":"complete","ttlMs":0,"cacheScope":"private",{INFO}}}}}"#
        )
    );
    let got = ask(
        &mut raw,
        format!(r#"{{"jsonrpc":"2.0","id":2,"method":"resources/list","params":{{{META}}}}}"#),
    )
    .await;
    assert_eq!(
        got,
        format!(
            r#"{{"jsonrpc":"2.0","id":2,"result":{{"resources":[{{"uri":"m://a","name":"a"}}],"resultType":"complete","ttlMs":0,"cacheScope":"private",{INFO}}}}}"#
        )
    );
    let got = ask(
        &mut raw,
        format!(r#"{{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{{{META}}}}}"#),
    )
    .await;
    assert!(
        got.ends_with(&format!(
            r#"],"resultType":"complete","ttlMs":60000,"cacheScope":"public",{INFO}}}}}"#
        )),
        "{got}"
    );
    // A missing resource is -32602 in this revision, the URI kept in data.
    let got = ask(&mut raw, format!(r#"{{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{{"uri":"m://nope",{META}}}}}"#)).await;
    assert_eq!(
        got,
        r#"{"jsonrpc":"2.0","id":4,"error":{"code":-32602,"message":"Resource not found","data":{"uri":"m://nope"}}}"#
    );
}

#[tokio::test]
async fn the_ladder_and_removed_methods_answer_with_the_revisions_codes() {
    let mut raw = start(&modern_server()).await;
    for (id, method) in [
        (1, "ping"),
        (2, "logging/setLevel"),
        (3, "resources/subscribe"),
        (4, "unknown/method"),
    ] {
        let got = ask(
            &mut raw,
            format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{{META}}}}}"#),
        )
        .await;
        assert_eq!(
            got,
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32601,"message":"Method not found: {method}"}}}}"#
            )
        );
    }
    let got = ask(
        &mut raw,
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{}}"#,
    )
    .await;
    assert_eq!(
        got,
        r#"{"jsonrpc":"2.0","id":5,"error":{"code":-32602,"message":"Invalid params: params._meta must be an object carrying \"io.modelcontextprotocol/protocolVersion\" and \"io.modelcontextprotocol/clientCapabilities\""}}"#
    );
    let got = ask(&mut raw, r#"{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}"#).await;
    same_json(
        &got,
        r#"{"jsonrpc":"2.0","id":6,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"requested":"2099-01-01","supported":["2026-07-28"]}}}"#,
    );
    // The connection chose the modern revision: a handshake now names what it speaks.
    let got = ask(&mut raw, r#"{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#).await;
    assert_eq!(
        got,
        r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32022,"message":"Unsupported protocol version: this connection speaks 2026-07-28 and accepts no initialize handshake","data":{"requested":"2025-11-25","supported":["2026-07-28"]}}}"#
    );
}

#[tokio::test]
async fn a_handshake_connection_refuses_modern_requests() {
    let mut raw = start(&modern_server()).await;
    let init = ask(&mut raw, r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#).await;
    assert!(init.contains(r#""protocolVersion":"2025-11-25""#), "{init}");
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await;
    let got = ask(
        &mut raw,
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{{META}}}}}"#),
    )
    .await;
    assert_eq!(
        got,
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"Invalid request: this connection speaks a handshake revision; requests carrying the 2026-07-28 envelope are not accepted on it"}}"#
    );
}

#[tokio::test]
async fn an_elicitation_round_trips_through_input_required() {
    let mut raw = start(&modern_server()).await;
    let call = |id: u32, extra: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"greet","arguments":{{}}{extra},{META}}}}}"#
        )
    };
    let first = ask(&mut raw, call(1, "")).await;
    let (shape, state) = cut_state(&first);
    same_json(
        &shape,
        &format!(
            r#"{{"jsonrpc":"2.0","id":1,"result":{{"resultType":"input_required","inputRequests":{{"elicitation-0":{{"method":"elicitation/create","params":{{"message":"What is your name?","requestedSchema":{{"properties":{{"name":{{"type":"string"}}}},"required":["name"],"type":"object"}}}}}}}},"requestState":"<state>",{INFO}}}}}"#
        ),
    );
    let answer =
        r#","inputResponses":{"elicitation-0":{"action":"accept","content":{"name":"Alice"}}}"#;
    let done = ask(
        &mut raw,
        call(2, &format!(r#"{answer},"requestState":"{state}""#)),
    )
    .await;
    assert_eq!(
        done,
        format!(
            r#"{{"jsonrpc":"2.0","id":2,"result":{{"content":[{{"type":"text","text":"Hello, Alice!"}}],"resultType":"complete",{INFO}}}}}"#
        )
    );
    // A tampered state is refused, with the same error whatever was changed.
    let mut bytes = state.clone().into_bytes();
    let i = bytes.len() / 2;
    bytes[i] = if bytes[i] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(bytes).unwrap();
    let refused = ask(
        &mut raw,
        call(3, &format!(r#"{answer},"requestState":"{tampered}""#)),
    )
    .await;
    assert_eq!(
        refused,
        r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"Invalid or expired requestState","data":{"reason":"invalid_request_state"}}}"#
    );
    // The state belongs to the call it was minted for.
    let other = format!(
        r#"{{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{{"name":"greet","arguments":{{"x":1}}{answer},"requestState":"{state}",{META}}}}}"#
    );
    assert!(ask(&mut raw, other).await.contains(r#""code":-32602"#));
    // An answer that is not an elicitation result is -32602.
    let bad = ask(
        &mut raw,
        call(5, r#","inputResponses":{"elicitation-0":12345}"#),
    )
    .await;
    assert_eq!(
        bad,
        r#"{"jsonrpc":"2.0","id":5,"error":{"code":-32602,"message":"Invalid params: inputResponses[\"elicitation-0\"] is not an elicitation result: invalid type: integer `12345`, expected struct ElicitResult"}}"#
    );
    // Unknown keys are ignored; a missing answer is asked for again.
    let again = ask(
        &mut raw,
        call(6, r#","inputResponses":{"wrong_key":{"action":"accept"}}"#),
    )
    .await;
    assert!(
        again.contains(r#""resultType":"input_required""#),
        "{again}"
    );
}

#[tokio::test]
async fn rounds_carry_answers_and_handler_state() {
    let mut raw = start(&modern_server()).await;
    let call = |id: u32, extra: String| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"two_steps","arguments":{{}}{extra},{META}}}}}"#
        )
    };
    let (r1, s1) = cut_state(&ask(&mut raw, call(1, String::new())).await);
    assert!(r1.contains(r#""inputRequests":{"first":"#), "{r1}");
    let (r2, s2) = cut_state(
        &ask(
            &mut raw,
            call(2, format!(r#","inputResponses":{{"first":{{"action":"accept","content":{{"a":"A"}}}}}},"requestState":"{s1}""#)),
        )
        .await,
    );
    assert!(r2.contains(r#""inputRequests":{"second":"#), "{r2}");
    // Only the second answer is sent: the first rides in the state.
    let done = ask(
        &mut raw,
        call(3, format!(r#","inputResponses":{{"second":{{"action":"accept","content":{{"b":"B"}}}}}},"requestState":"{s2}""#)),
    )
    .await;
    assert_eq!(
        done,
        format!(
            r#"{{"jsonrpc":"2.0","id":3,"result":{{"content":[{{"type":"text","text":"\"A\" \"B\" {{\"step\":2}}"}}],"resultType":"complete",{INFO}}}}}"#
        )
    );
}

#[tokio::test]
async fn requests_made_together_are_asked_together_and_capabilities_are_honoured() {
    let mut raw = start(&modern_server()).await;
    let (shape, _) = cut_state(&ask(&mut raw, format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"all_at_once",{META}}}}}"#)).await);
    assert!(
        shape.contains(r#""inputRequests":{"user_name":{"method":"elicitation/create","#)
            && shape.contains(r#""greeting":{"method":"sampling/createMessage","#)
            && shape.contains(r#""roots-0":{"method":"roots/list","params":{}}"#),
        "{shape}"
    );
    // Without the sampling capability nothing is asked of sampling; once the rest is answered,
    // the handler's need for it is -32021 naming it.
    let no_sampling = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"roots":{}}}"#;
    let call = |id: u32, extra: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"all_at_once"{extra},{no_sampling}}}}}"#
        )
    };
    let (shape, state) = cut_state(&ask(&mut raw, call(2, "")).await);
    same_json(
        &shape,
        &format!(
            r#"{{"jsonrpc":"2.0","id":2,"result":{{"resultType":"input_required","inputRequests":{{"user_name":{{"method":"elicitation/create","params":{{"message":"Name?","requestedSchema":{{"properties":{{"name":{{"type":"string"}}}},"required":["name"],"type":"object"}}}}}},"roots-0":{{"method":"roots/list","params":{{}}}}}},"requestState":"<state>",{INFO}}}}}"#
        ),
    );
    let answers = format!(
        r#","inputResponses":{{"user_name":{{"action":"decline"}},"roots-0":{{"roots":[]}}}},"requestState":"{state}""#
    );
    let got = ask(&mut raw, call(3, &answers)).await;
    assert_eq!(
        got,
        r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32021,"message":"Missing required client capability: sampling","data":{"requiredCapabilities":{"sampling":{}}}}}"#
    );
}

#[tokio::test]
async fn log_messages_go_only_to_requests_that_ask_for_a_level() {
    let mut raw = start(&modern_server()).await;
    let got = ask(
        &mut raw,
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"logs",{META}}}}}"#
        ),
    )
    .await;
    assert!(
        got.starts_with(r#"{"jsonrpc":"2.0","id":1,"result":"#),
        "{got}"
    );
    assert!(
        got.contains(r#"logged for Some(\"c\") (Some(\"c\"))"#),
        "{got}"
    );
    let meta = META.replace(
        r#""io.modelcontextprotocol/clientInfo""#,
        r#""io.modelcontextprotocol/logLevel":"warning","io.modelcontextprotocol/clientInfo""#,
    );
    raw.send(format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"logs",{meta}}}}}"#
    ))
    .await;
    assert_eq!(
        recv(&mut raw).await,
        r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"error","data":"error"}}"#
    );
    assert!(recv(&mut raw)
        .await
        .starts_with(r#"{"jsonrpc":"2.0","id":2,"result":"#));
}

#[tokio::test]
async fn listen_acknowledges_then_tags_what_changes() {
    let server = modern_server();
    let mut raw = start(&server).await;
    raw.send(format!(r#"{{"jsonrpc":"2.0","id":"sub","method":"subscriptions/listen","params":{{"notifications":{{"toolsListChanged":true,"promptsListChanged":true,"resourceSubscriptions":["m://a"]}},{META}}}}}"#)).await;
    assert_eq!(
        recv(&mut raw).await,
        r#"{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{"toolsListChanged":true,"resourceSubscriptions":["m://a"]},"_meta":{"io.modelcontextprotocol/subscriptionId":"sub"}}}"#
    );
    server.remove_tool("logs");
    assert_eq!(
        recv(&mut raw).await,
        r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"sub"}}}"#
    );
    server.notify_resource_updated("m://other").await;
    server.notify_resource_updated("m://a").await;
    assert_eq!(
        recv(&mut raw).await,
        r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"m://a","_meta":{"io.modelcontextprotocol/subscriptionId":"sub"}}}"#
    );
    // Cancelled by the client: the stream ends without an answer.
    raw.send(
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"sub"}}"#,
    )
    .await;
    let got = ask(
        &mut raw,
        format!(r#"{{"jsonrpc":"2.0","id":9,"method":"server/discover","params":{{{META}}}}}"#),
    )
    .await;
    assert!(
        got.starts_with(r#"{"jsonrpc":"2.0","id":9,"result""#),
        "{got}"
    );
}
