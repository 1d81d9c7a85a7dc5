//! Server rules against a hostile client, over the raw in-memory transport with exact JSON: a
//! cursor at the end of the offset range, a handler's panic text, an unbounded number of
//! resource subscriptions, and a tool filter's pages.

use crate::support::{self, ask, Nothing};

use purra_protocol::types::*;
use purra_protocol::{HandlerResult, RequestCtx, Server};

fn hardened_server(max_subscriptions: usize) -> Server {
    let server = Server::builder("t", "1")
        .page_size(2)
        .max_subscriptions(max_subscriptions)
        .build();
    for name in ["a", "b", "c"] {
        server
            .tool(name, "a tool", |_: Nothing, _c: RequestCtx| async move {
                HandlerResult::Ok("ok")
            })
            .unwrap();
    }
    server
        .tool(
            "panics",
            "panics",
            |_: Nothing, _c: RequestCtx| async move {
                if true {
                    panic!("secret at /home/ada/.token");
                }
                HandlerResult::Ok("never")
            },
        )
        .unwrap();
    let resource = Resource::new("mem://r", "r");
    server.resource(resource, |uri, _c| async move {
        HandlerResult::Ok(ReadResourceResult::text(uri, "r"))
    });
    server
}

#[tokio::test]
async fn a_cursor_at_the_end_of_the_offset_range_is_an_empty_last_page() {
    let mut raw = support::initialized(&hardened_server(8), "2025-11-25").await;
    // The cursor format is `purra-<hex offset>`; the largest offset overflowed `offset + size`.
    assert_eq!(
        ask(&mut raw, r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"purra-ffffffffffffffff"}}"#).await,
        r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#
    );
    assert_eq!(
        ask(&mut raw, r#"{"jsonrpc":"2.0","id":2,"method":"resources/list","params":{"cursor":"purra-fffffffffffffffe"}}"#).await,
        r#"{"jsonrpc":"2.0","id":2,"result":{"resources":[]}}"#
    );
    // The connection goes on, and ordinary pages still page: four tools, two per page.
    let first = ask(
        &mut raw,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{}}"#,
    )
    .await;
    let v: serde_json::Value = serde_json::from_str(&first).unwrap();
    assert_eq!(v["result"]["tools"][0]["name"], "a");
    assert_eq!(v["result"]["tools"][1]["name"], "b");
    assert_eq!(v["result"]["nextCursor"], "purra-2");
    let last = ask(
        &mut raw,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"cursor":"purra-2"}}"#,
    )
    .await;
    let v: serde_json::Value = serde_json::from_str(&last).unwrap();
    let names: Vec<_> = v["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["c", "panics"]);
    assert!(v["result"].get("nextCursor").is_none(), "{last}");
}

/// `Server::tool_filter`: `tools/list` shows a request only the tools the filter keeps for its
/// caller, paged over the kept tools (a cursor past them an empty last page).
#[tokio::test]
async fn a_tool_filter_lists_only_the_kept_tools_in_pages_of_them() {
    let s = hardened_server(8);
    s.tool_filter(|tool, ctx| {
        tool.name != "b"
            && ctx.client_info().is_some_and(|i| i.name == "c")
            && ctx.client_name().as_deref() == Some("c")
            || tool.name == "panics"
    });
    let mut raw = support::initialized(&s, "2025-11-25").await;
    let names = |page: &str| -> (Vec<String>, Option<String>) {
        let v: serde_json::Value = serde_json::from_str(page).unwrap();
        (
            v["result"]["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_owned())
                .collect(),
            v["result"]["nextCursor"].as_str().map(str::to_owned),
        )
    };
    let first = ask(
        &mut raw,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#,
    )
    .await;
    assert_eq!(
        names(&first),
        (
            vec!["a".to_owned(), "c".to_owned()],
            Some("purra-2".to_owned())
        )
    );
    let last = ask(
        &mut raw,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"cursor":"purra-2"}}"#,
    )
    .await;
    assert_eq!(names(&last), (vec!["panics".to_owned()], None));
    assert_eq!(
        ask(&mut raw, r#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"cursor":"purra-ffffffffffffffff"}}"#).await,
        r#"{"jsonrpc":"2.0","id":3,"result":{"tools":[]}}"#
    );
}

#[tokio::test]
async fn a_handler_panic_is_a_generic_internal_error_and_its_text_stays_here() {
    let mut raw = support::initialized(&hardened_server(8), "2025-11-25").await;
    assert_eq!(
        ask(&mut raw, r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"panics","arguments":{}}}"#).await,
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Internal error"}}"#
    );
    assert_eq!(
        ask(
            &mut raw,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a","arguments":{}}}"#
        )
        .await,
        r#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"ok"}]}}"#
    );
}

#[tokio::test]
async fn resource_subscriptions_per_session_are_bounded() {
    let mut raw = support::initialized(&hardened_server(3), "2025-11-25").await;
    let subscribe = |id: u32, uri: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"resources/subscribe","params":{{"uri":"{uri}"}}}}"#
        )
    };
    for (id, uri) in [(1, "mem://1"), (2, "mem://2"), (3, "mem://3")] {
        assert_eq!(
            ask(&mut raw, &subscribe(id, uri)).await,
            format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#)
        );
    }
    let refused = r#"{"jsonrpc":"2.0","id":4,"error":{"code":-32602,"message":"Invalid params: this session already has 3 resource subscriptions, the server's limit; unsubscribe from one first"}}"#;
    assert_eq!(ask(&mut raw, &subscribe(4, "mem://4")).await, refused);
    // Subscribing again to a URI it has costs nothing; unsubscribing makes room.
    assert_eq!(
        ask(&mut raw, &subscribe(5, "mem://3")).await,
        r#"{"jsonrpc":"2.0","id":5,"result":{}}"#
    );
    assert_eq!(
        ask(&mut raw, r#"{"jsonrpc":"2.0","id":6,"method":"resources/unsubscribe","params":{"uri":"mem://1"}}"#).await,
        r#"{"jsonrpc":"2.0","id":6,"result":{}}"#
    );
    assert_eq!(
        ask(&mut raw, &subscribe(7, "mem://4")).await,
        r#"{"jsonrpc":"2.0","id":7,"result":{}}"#
    );
    // One URI is bounded too (4 KiB).
    let long = format!("mem://{}", "x".repeat(4096));
    assert_eq!(
        ask(&mut raw, &subscribe(8, &long)).await,
        r#"{"jsonrpc":"2.0","id":8,"error":{"code":-32602,"message":"Invalid params: a subscribed URI is at most 4096 bytes"}}"#
    );
}
