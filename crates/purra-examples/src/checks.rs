//! The client checks of `peers/FIXTURES.md`, run by purra's client against any fixture server.

use std::time::Duration;

use purra_protocol::types::*;
use purra_protocol::{
    Client, ClientOptions, Connection, Error, HttpClientOptions, RequestOptions, StdioCommand,
    WsClientOptions,
};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::time::timeout;

/// How the checks reach the server.
#[derive(Debug, Clone)]
pub enum Target {
    /// Start this command and speak over its stdin/stdout.
    Stdio(StdioCommand),
    /// A Streamable HTTP endpoint.
    Http(String),
    /// A WebSocket endpoint (`ws://` or `wss://`).
    Ws(String),
}

impl Target {
    /// Connects with `options`.
    pub async fn connect(&self, options: ClientOptions) -> Result<Connection, Error> {
        match self {
            Target::Stdio(cmd) => Client::connect_stdio(cmd.clone(), options).await,
            Target::Http(url) => {
                Client::connect_http(url, HttpClientOptions::default(), options).await
            }
            Target::Ws(url) => Client::connect_ws(url, WsClientOptions::default(), options).await,
        }
    }
}

/// The checks of `peers/FIXTURES.md`, in the order every fixture client runs and reports them,
/// once per protocol version.
pub const CHECKS: [&str; 20] = [
    "initialize",
    "ping",
    "tools-list",
    "echo",
    "structured",
    "is-error",
    "invalid-arguments",
    "resources-pages",
    "resource-read",
    "templates",
    "subscribe",
    "prompt",
    "completion",
    "logging",
    "progress",
    "cancellation",
    "sampling",
    "elicitation",
    "roots",
    "list-changed",
];

/// The tools every fixture server has.
pub const FIXTURE_TOOLS: [&str; 12] = [
    "echo",
    "add",
    "fail",
    "progress",
    "block",
    "cancellations",
    "log",
    "sample",
    "elicit",
    "roots",
    "add_tool",
    "touch",
];

const WAIT: Duration = Duration::from_secs(5);

/// Client options with the fixture handlers: sampling echoes, elicitation accepts `purra`,
/// one root.
pub fn fixture_client_options(version: &str) -> ClientOptions {
    ClientOptions::default()
        .client_info("fixture-client-purra", "1.0.0")
        .protocol_version(version)
        .request_timeout(Duration::from_secs(30))
        .on_sampling(|p: CreateMessageParams| async move {
            let text = p
                .messages
                .last()
                .and_then(SamplingMessage::text)
                .unwrap_or_default();
            Ok(
                CreateMessageResult::text("fixture-model", format!("echo:{text}"))
                    .with_stop_reason("endTurn"),
            )
        })
        .on_elicitation(false, |_p: ElicitParams| async move {
            Ok(ElicitResult::accept(
                json!({"name": "purra"})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            ))
        })
        .roots(vec![
            Root::new("file:///tmp/fixture-root").with_name("fixture")
        ])
}

fn texts(r: &CallToolResult) -> Vec<String> {
    r.texts().map(str::to_owned).collect()
}

fn expect(cond: bool, why: impl FnOnce() -> String) -> Result<(), String> {
    if cond {
        Ok(())
    } else {
        Err(why())
    }
}

async fn call_text(conn: &Connection, tool: &str, args: Value) -> Result<String, String> {
    let r = conn
        .call_tool(tool, args)
        .await
        .map_err(|e| format!("{tool}: {e}"))?;
    expect(!r.is_error(), || {
        format!("{tool} returned isError: {:?}", texts(&r))
    })?;
    Ok(texts(&r).join(""))
}

/// Runs every check against the server `target` reaches, asking for `version`. `strict` holds
/// the server to purra's own behaviour where the contract lets peers differ. Each passed check
/// is reported to `report`; returns the count, or the first failure as `(check, why)`.
pub async fn run(
    target: &Target,
    version: &str,
    strict: bool,
    dynamic_tool: &str,
    report: &mut dyn FnMut(&str),
) -> Result<usize, (String, String)> {
    let conn = target
        .connect(fixture_client_options(version))
        .await
        .map_err(|e| ("initialize".to_owned(), e.to_string()))?;
    let mut passed = 0usize;
    let mut step = |name: &str, res: Result<(), String>| -> Result<(), (String, String)> {
        match res {
            Ok(()) => {
                passed += 1;
                report(name);
                Ok(())
            }
            Err(why) => Err((name.to_owned(), why)),
        }
    };

    step("initialize", check_initialize(&conn, version))?;
    step("ping", conn.ping().await.map_err(|e| e.to_string()))?;
    step("tools-list", check_tools(&conn))?;
    step(
        "echo",
        async {
            let t = call_text(&conn, "echo", json!({"text": "hello"})).await?;
            expect(t == "hello", || format!("got {t:?}"))
        }
        .await,
    )?;
    step(
        "structured",
        async {
            let r = conn
                .call_tool("add", json!({"a": 2, "b": 3}))
                .await
                .map_err(|e| e.to_string())?;
            let sum = r
                .structured_content
                .as_ref()
                .and_then(|s| s.get("sum"))
                .and_then(Value::as_f64);
            expect(sum == Some(5.0), || {
                format!("structuredContent {:?}", r.structured_content)
            })
        }
        .await,
    )?;
    step(
        "is-error",
        async {
            let r = conn
                .call_tool("fail", json!({}))
                .await
                .map_err(|e| e.to_string())?;
            expect(r.is_error() && texts(&r) == ["fixture failure"], || {
                format!("got {r:?}")
            })
        }
        .await,
    )?;
    step(
        "invalid-arguments",
        async {
            match conn.call_tool("echo", json!({})).await {
                Ok(r) => expect(r.is_error(), || format!("missing argument accepted: {r:?}")),
                Err(Error::Rpc(_)) if !strict => Ok(()),
                Err(e) => Err(format!("expected an isError result, got {e}")),
            }
        }
        .await,
    )?;
    step("resources-pages", check_pages(&conn).await)?;
    step(
        "resource-read",
        async {
            let r = conn
                .read_resource("fixture://static/3")
                .await
                .map_err(|e| e.to_string())?;
            let t = r.contents.first().and_then(|c| c.text.clone());
            expect(t.as_deref() == Some("static 3"), || format!("got {t:?}"))
        }
        .await,
    )?;
    step(
        "templates",
        async {
            let has = conn
                .resource_templates()
                .iter()
                .any(|t| t.uri_template == "fixture://items/{id}");
            expect(has, || {
                format!("templates: {:?}", conn.resource_templates())
            })?;
            let r = conn
                .read_resource("fixture://items/42")
                .await
                .map_err(|e| e.to_string())?;
            let t = r.contents.first().and_then(|c| c.text.clone());
            expect(t.as_deref() == Some("item 42"), || format!("got {t:?}"))
        }
        .await,
    )?;
    step("subscribe", check_subscribe(&conn).await)?;
    step(
        "prompt",
        async {
            let r = conn
                .get_prompt("greet", [("name".to_owned(), "Ada".to_owned())])
                .await
                .map_err(|e| e.to_string())?;
            let t = r
                .messages
                .first()
                .and_then(|m| m.content.as_text().map(str::to_owned));
            expect(t.as_deref() == Some("Hello, Ada!"), || format!("got {t:?}"))?;
            let r = conn
                .get_prompt(
                    "greet",
                    [
                        ("name".to_owned(), "Ada".to_owned()),
                        ("style".to_owned(), "loud".to_owned()),
                    ],
                )
                .await
                .map_err(|e| e.to_string())?;
            let t = r
                .messages
                .first()
                .and_then(|m| m.content.as_text().map(str::to_owned));
            expect(t.as_deref() == Some("HELLO, ADA!"), || format!("got {t:?}"))
        }
        .await,
    )?;
    step(
        "completion",
        async {
            let c = conn
                .complete(CompletionReference::prompt("greet"), "name", "al")
                .await
                .map_err(|e| e.to_string())?;
            expect(c.values == ["alice", "alan"], || {
                format!("got {:?}", c.values)
            })
        }
        .await,
    )?;
    step("logging", check_logging(&conn, strict).await)?;
    step("progress", check_progress(&conn).await)?;
    step("cancellation", check_cancellation(&conn).await)?;
    step(
        "sampling",
        async {
            let t = call_text(&conn, "sample", json!({"prompt": "hi"})).await?;
            expect(t == "echo:hi", || format!("got {t:?}"))
        }
        .await,
    )?;
    step(
        "elicitation",
        async {
            let t = call_text(&conn, "elicit", json!({"message": "name?"})).await?;
            expect(t == "accept:purra", || format!("got {t:?}"))
        }
        .await,
    )?;
    step(
        "roots",
        async {
            let t = call_text(&conn, "roots", json!({})).await?;
            expect(t == "file:///tmp/fixture-root", || format!("got {t:?}"))
        }
        .await,
    )?;
    step(
        "list-changed",
        check_list_changed(&conn, dynamic_tool).await,
    )?;
    conn.close().await;
    Ok(passed)
}

fn check_initialize(conn: &Connection, version: &str) -> Result<(), String> {
    let caps = conn.server_capabilities();
    expect(conn.server_info().name.starts_with("fixture-"), || {
        format!("server name {:?}", conn.server_info().name)
    })?;
    expect(
        caps.tools.is_some()
            && caps.resources_subscribe()
            && caps.prompts.is_some()
            && caps.logging.is_some()
            && caps.completions.is_some(),
        || format!("capabilities {caps:?}"),
    )?;
    expect(conn.protocol_version() == version, || {
        format!("negotiated {} for {version}", conn.protocol_version())
    })
}

fn check_tools(conn: &Connection) -> Result<(), String> {
    let tools = conn.tools();
    for name in FIXTURE_TOOLS {
        expect(tools.iter().any(|t| t.name == name), || {
            format!("missing tool {name}")
        })?;
    }
    let add = tools.iter().find(|t| t.name == "add").expect("checked");
    let sum_type = add
        .output_schema
        .as_ref()
        .and_then(|s| s.get("properties"))
        .and_then(|p| p.get("sum"))
        .and_then(|s| s.get("type"))
        .and_then(Value::as_str);
    expect(sum_type == Some("number"), || {
        format!("add outputSchema {:?}", add.output_schema)
    })
}

async fn check_pages(conn: &Connection) -> Result<(), String> {
    let mut pages = 0;
    let mut items = Vec::new();
    let mut cursor = None;
    loop {
        let page = conn
            .list_resources_page(cursor.take())
            .await
            .map_err(|e| e.to_string())?;
        pages += 1;
        items.extend(page.resources.into_iter().map(|r| r.uri));
        match page.next_cursor {
            Some(c) if pages < 50 => cursor = Some(c),
            _ => break,
        }
    }
    expect(pages >= 3 && items.len() == 6, || {
        format!("{pages} pages, resources {items:?}")
    })?;
    expect(conn.resources().len() == 6, || {
        format!("prefetched {:?}", conn.resources())
    })
}

async fn check_subscribe(conn: &Connection) -> Result<(), String> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let listener = conn.on(methods::RESOURCE_UPDATED, move |p| {
        let _ = tx.send(
            p.get("uri")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        );
    });
    let sub = conn
        .subscribe_resource("fixture://watched")
        .await
        .map_err(|e| e.to_string())?;
    call_text(conn, "touch", json!({"uri": "fixture://watched"})).await?;
    let got = timeout(WAIT, rx.recv())
        .await
        .map_err(|_| "no updated notification".to_owned())?;
    listener.cancel();
    expect(got.as_deref() == Some("fixture://watched"), || {
        format!("updated {got:?}")
    })?;
    sub.unsubscribe().await.map_err(|e| e.to_string())
}

async fn check_logging(conn: &Connection, strict: bool) -> Result<(), String> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let listener = conn.on(methods::MESSAGE, move |p| {
        let _ = tx.send(
            p.get("data")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        );
    });
    conn.set_logging_level(LoggingLevel::Warning)
        .await
        .map_err(|e| e.to_string())?;
    call_text(conn, "log", json!({})).await?;
    let mut got = Vec::new();
    while let Ok(Some(m)) = timeout(Duration::from_millis(300), rx.recv()).await {
        got.push(m);
    }
    listener.cancel();
    let want = ["warning message", "error message"];
    if strict {
        expect(got == want, || format!("messages {got:?}"))
    } else {
        expect(want.iter().all(|w| got.iter().any(|g| g == w)), || {
            format!("messages {got:?}")
        })
    }
}

async fn check_progress(conn: &Connection) -> Result<(), String> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let opts = RequestOptions::default().on_progress(
        move |p: &ProgressParams| {
            let _ = tx.send((p.progress, p.total));
        },
        Some(Duration::from_secs(60)),
    );
    let r = conn
        .call_tool_with("progress", json!({"steps": 3}), opts)
        .await
        .map_err(|e| e.to_string())?;
    expect(texts(&r) == ["done 3"], || format!("got {:?}", texts(&r)))?;
    let mut got = Vec::new();
    while let Ok(p) = rx.try_recv() {
        got.push(p);
    }
    let want = [(1.0, Some(3.0)), (2.0, Some(3.0)), (3.0, Some(3.0))];
    expect(got == want, || format!("progress {got:?}"))
}

async fn check_cancellation(conn: &Connection) -> Result<(), String> {
    // A shared server (HTTP) keeps counting across runs: expect one more than before.
    let before: u64 = call_text(conn, "cancellations", json!({}))
        .await?
        .parse()
        .map_err(|e| format!("cancellations: {e}"))?;
    let token = tokio_util_token();
    let opts = RequestOptions::default().cancel_with(token.clone());
    let call = conn.call_tool_with("block", json!({}), opts);
    let cancel = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        token.cancel();
    };
    let (res, ()) = tokio::join!(call, cancel);
    expect(matches!(res, Err(Error::Cancelled)), || {
        format!("block ended with {res:?}")
    })?;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let n = call_text(conn, "cancellations", json!({})).await?;
        if n == (before + 1).to_string() {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!("cancellations = {n}"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn tokio_util_token() -> purra_protocol::CancellationToken {
    purra_protocol::CancellationToken::new()
}

async fn check_list_changed(conn: &Connection, name: &str) -> Result<(), String> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let listener = conn.on(methods::TOOLS_LIST_CHANGED, move |_| {
        let _ = tx.send(());
    });
    let t = call_text(conn, "add_tool", json!({"name": name})).await?;
    expect(t == format!("added {name}"), || format!("got {t:?}"))?;
    timeout(WAIT, rx.recv())
        .await
        .map_err(|_| "no tools/list_changed".to_owned())?;
    listener.cancel();
    expect(conn.tools().iter().any(|t| t.name == name), || {
        "the catalog was not refetched before the listener ran".to_owned()
    })?;
    let fresh = conn.refresh_tools().await.map_err(|e| e.to_string())?;
    expect(fresh.iter().any(|t| t.name == name), || {
        format!("{name} not listed")
    })
}
