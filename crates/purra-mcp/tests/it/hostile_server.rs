//! A scripted server that breaks the rules in ways a serde-based client would not notice: a
//! `tools/list` naming one tool twice with different schemas, and results or pages that repeat a
//! member name. Discovery and calls fail closed with a code, never by picking one reading.
//! The server is a task speaking raw frames over `memory::raw()`, so every byte it sends is
//! exactly what the test wrote.

use purra_mcp::codes;
use serde_json::json;

use crate::support::{call, connect, discover};

const SCHEMA: &str = r#"{"type":"object","properties":{"q":{"type":"string"}},"required":["q"],"additionalProperties":false}"#;

fn raw_tool(name: &str, schema: &str) -> String {
    format!(r#"{{"name":"{name}","description":"Searches","inputSchema":{schema}}}"#)
}

const TEXT_RESULT: &str = r#"{"content":[{"type":"text","text":"found"}]}"#;

#[tokio::test]
async fn a_tool_listed_twice_makes_discovery_refuse_the_catalog() {
    // Control: listed once, it binds and calls.
    let once = format!(r#"{{"tools":[{}]}}"#, raw_tool("search", SCHEMA));
    let (conn, monitor) = connect(once, TEXT_RESULT.into()).await;
    let cat = discover(&conn, &monitor).await.unwrap();
    assert_eq!(
        call(&cat, json!({"q": "x"})).await,
        Ok(json!({"text": ["found"], "structured": null}))
    );

    // The same name with a second, wider schema: neither is picked.
    let wider =
        r#"{"type":"object","properties":{"q":{"type":"string"},"path":{"type":"string"}}}"#;
    let twice = format!(
        r#"{{"tools":[{},{}]}}"#,
        raw_tool("search", SCHEMA),
        raw_tool("search", wider)
    );
    let (conn, monitor) = connect(twice, TEXT_RESULT.into()).await;
    assert_eq!(
        discover(&conn, &monitor).await.err(),
        Some(codes::catalog_ambiguous())
    );

    // Listed twice identically is refused too: the catalog still has two entries for one name.
    let same = format!(
        r#"{{"tools":[{},{}]}}"#,
        raw_tool("search", SCHEMA),
        raw_tool("search", SCHEMA)
    );
    let (conn, monitor) = connect(same, TEXT_RESULT.into()).await;
    assert_eq!(
        discover(&conn, &monitor).await.err(),
        Some(codes::catalog_ambiguous())
    );

    // A duplicate of a tool the host did not select is not the host's concern.
    let other = format!(
        r#"{{"tools":[{},{},{}]}}"#,
        raw_tool("search", SCHEMA),
        raw_tool("other", SCHEMA),
        raw_tool("other", wider)
    );
    let (conn, monitor) = connect(other, TEXT_RESULT.into()).await;
    assert!(discover(&conn, &monitor).await.is_ok());
}

#[tokio::test]
async fn a_result_that_repeats_a_member_name_is_refused_not_read_last_wins() {
    let list = format!(
        r#"{{"tools":[{}]}}"#,
        raw_tool(
            "search",
            r#"{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}"#
        )
    );
    // serde's derive already refuses a repeated field of a struct; keep it refused.
    let twice_error =
        r#"{"content":[{"type":"text","text":"found"}],"isError":true,"isError":false}"#;
    let (conn, monitor) = connect(list.clone(), twice_error.into()).await;
    let cat = discover(&conn, &monitor).await.unwrap();
    assert_eq!(
        call(&cat, json!({"q": "x"})).await,
        Err(codes::result_invalid())
    );

    // Inside structuredContent (a map) serde_json reads the last `n` and calls this a success.
    let twice_structured =
        r#"{"content":[{"type":"text","text":"{}"}],"structuredContent":{"n":1,"n":2}}"#;
    let (conn, monitor) = connect(list.clone(), twice_structured.into()).await;
    let cat = discover(&conn, &monitor).await.unwrap();
    assert_eq!(
        call(&cat, json!({"q": "x"})).await,
        Err(codes::result_invalid())
    );

    // A lone surrogate is not I-JSON either.
    let surrogate = r#"{"content":[{"type":"text","text":"\ud800"}]}"#;
    let (conn, monitor) = connect(list.clone(), surrogate.into()).await;
    let cat = discover(&conn, &monitor).await.unwrap();
    assert_eq!(
        call(&cat, json!({"q": "x"})).await,
        Err(codes::result_invalid())
    );

    // A tools/list page whose schema says `type` twice has two readings: refused.
    let two_types = format!(
        r#"{{"tools":[{}]}}"#,
        raw_tool("search", r#"{"type":"string","type":"object"}"#)
    );
    let (conn, monitor) = connect(two_types, TEXT_RESULT.into()).await;
    assert_eq!(
        discover(&conn, &monitor).await.err(),
        Some(codes::result_invalid())
    );
}

/// A read's call future carries neither a task's polling nor a 2026-07-28 request's rounds:
/// both are boxed, so a plain `tools/call` (every read of a handshake server) moves and
/// allocates only what it uses (this test's build: 2 016 bytes, 3 488 with both inline; the
/// gateway's release build: 7 376 with both inline).
#[tokio::test]
async fn a_reads_call_future_carries_no_task_polling_nor_modern_rounds() {
    let list = format!(r#"{{"tools":[{}]}}"#, raw_tool("search", SCHEMA));
    let (conn, monitor) = connect(list, TEXT_RESULT.into()).await;
    let cat = discover(&conn, &monitor).await.unwrap();
    let call = (cat.registrations[0].handler())(
        json!({"q": "x"}),
        crate::support::run(purra_core::Lease::unbounded()),
    );
    let size = std::mem::size_of_val(&*call);
    assert!(size <= 2_600, "a read's call future is {size} bytes");
    assert!(call.await.is_ok());
}
