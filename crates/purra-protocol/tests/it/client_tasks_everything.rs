//! Tasks purra's client runs for the reference server `@modelcontextprotocol/server-everything`
//! (pinned in `peers/node/package.json`, installed by `scripts/setup-peers.sh`), over stdio and
//! Streamable HTTP: its `trigger-elicitation-request-async` and `trigger-sampling-request-async`
//! tools (registered only for a client declaring task-augmented elicitation and sampling) send a
//! task-augmented request, poll the client's `tasks/get` once a second and read `tasks/result`;
//! the exact text they report is asserted.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use purra_protocol::stdio::StdioCommand;
use purra_protocol::types::{Content, CreateMessageResult, ElicitResult, JsonObject};
use purra_protocol::{Client, ClientOptions, ClientTaskOptions, Connection, HttpClientOptions};
use serde_json::{json, Value};

use crate::support::process::{node, repo_root};

fn existing(p: PathBuf) -> PathBuf {
    assert!(
        p.exists(),
        "{} is missing: run scripts/setup-peers.sh (the test command does) before these tests",
        p.display()
    );
    p
}

fn everything() -> PathBuf {
    existing(
        repo_root()
            .join("peers/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"),
    )
}

/// What the handlers were asked, in order.
type Asked = Arc<Mutex<Vec<Value>>>;

/// A client that runs the server's elicitation and sampling as tasks, answering at once.
fn task_options(asked: &Asked) -> ClientOptions {
    let (a, b) = (asked.clone(), asked.clone());
    ClientOptions::default()
        .on_elicitation(false, move |p| {
            a.lock().unwrap().push(json!({"elicitation": p.message}));
            let mut content = JsonObject::new();
            content.insert("name".into(), json!("Ada"));
            content.insert("favoriteColor".into(), json!("Blue"));
            content.insert("agreeToTerms".into(), json!(true));
            async move { Ok(ElicitResult::accept(content)) }
        })
        .on_sampling(move |p| {
            let prompt = p.messages[0].content["text"].clone();
            b.lock()
                .unwrap()
                .push(json!({"sampling": prompt, "maxTokens": p.max_tokens}));
            async move { Ok(CreateMessageResult::text("purra-test-model", "Hello back")) }
        })
        .run_server_tasks(ClientTaskOptions::default())
}

/// Splits `text` at `marker`; the part after it is JSON.
fn split_json<'a>(text: &'a str, marker: &str) -> (&'a str, Value) {
    let (head, tail) = text
        .split_once(marker)
        .unwrap_or_else(|| panic!("no {marker:?} in {text}"));
    (
        head,
        serde_json::from_str(tail).expect("JSON after the marker"),
    )
}

/// The task id the server reports in its progress lines.
fn created_id(text: &str) -> String {
    let id = text
        .split("Task created: ")
        .nth(1)
        .and_then(|r| r.lines().next())
        .unwrap_or_else(|| panic!("no task in {text}"))
        .to_owned();
    assert!(
        id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()),
        "{id}"
    );
    id
}

fn text_of(c: &Content) -> &str {
    match c {
        Content::Text(t) => &t.text,
        other => panic!("not text: {other:?}"),
    }
}

async fn run_both(conn: &Connection, asked: &Asked) {
    let names: Vec<String> = conn.tools().iter().map(|t| t.name.clone()).collect();
    for tool in [
        "trigger-elicitation-request-async",
        "trigger-sampling-request-async",
    ] {
        assert!(names.iter().any(|n| n == tool), "{tool} not in {names:?}");
    }

    let r = conn
        .call_tool("trigger-elicitation-request-async", json!({}))
        .await
        .expect("the elicitation tool");
    let texts: Vec<&str> = r.content.iter().map(text_of).collect();
    assert_eq!(texts.len(), 3, "{texts:?}");
    assert_eq!(
        texts[0],
        "[COMPLETED] User provided the requested information!"
    );
    assert_eq!(
        texts[1],
        "User inputs:\n- Name: Ada\n- Favorite Color: Blue\n- Agreed to terms: true"
    );
    let id = created_id(texts[2]);
    let (progress, raw) = split_json(texts[2], "\n\nRaw result: ");
    assert_eq!(
        progress,
        format!("\nProgress:\nTask created: {id}\nPoll 1: completed")
    );
    assert_eq!(
        raw,
        json!({
            "action": "accept",
            "content": {"name": "Ada", "favoriteColor": "Blue", "agreeToTerms": true},
            "_meta": {"io.modelcontextprotocol/related-task": {"taskId": id}},
        })
    );

    let r = conn
        .call_tool("trigger-sampling-request-async", json!({"prompt": "hello"}))
        .await
        .expect("the sampling tool");
    assert_eq!(r.content.len(), 1, "{:?}", r.content);
    let text = text_of(&r.content[0]);
    let id = created_id(text);
    let (progress, raw) = split_json(text, "\n\n**Result:**\n");
    assert_eq!(
        progress,
        format!(
            "[COMPLETED] Async sampling completed!\n\n**Progress:**\nTask created: {id}\nPoll 1: completed"
        )
    );
    assert_eq!(
        raw,
        json!({
            "role": "assistant",
            "content": {"type": "text", "text": "Hello back"},
            "model": "purra-test-model",
            "_meta": {"io.modelcontextprotocol/related-task": {"taskId": id}},
        })
    );
    assert_eq!(
        *asked.lock().unwrap(),
        vec![
            json!({"elicitation": "Please provide inputs for the following fields (async task demo):"}),
            json!({"sampling": "Resource trigger-sampling-request-async context: hello", "maxTokens": 100}),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_servers_async_tools_run_client_tasks_over_stdio() {
    let asked = Asked::default();
    let cmd =
        StdioCommand::new(existing(node())).args([everything().into_os_string(), "stdio".into()]);
    let conn = Client::connect_stdio(cmd, task_options(&asked))
        .await
        .expect("connect over stdio");
    run_both(&conn, &asked).await;
    conn.close().await;
}

/// Kills the server when the test ends, however it ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_servers_async_tools_run_client_tasks_over_streamable_http() {
    // The server prints the port it was given, not the one it got: pick a free one.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let _server = Killed(
        Command::new(existing(node()))
            .arg(everything())
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn server-everything"),
    );
    let start = Instant::now();
    while !accepting(port) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "server-everything did not listen on {port}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let asked = Asked::default();
    let conn = Client::connect_http(
        &format!("http://127.0.0.1:{port}/mcp"),
        HttpClientOptions::default(),
        task_options(&asked),
    )
    .await
    .expect("connect over Streamable HTTP");
    run_both(&conn, &asked).await;
    conn.close().await;
}

/// Whether a server accepts connections on the local `port`; a connection that was given `port`
/// as its own source and connected to itself (TCP simultaneous open, possible on an ephemeral
/// port nothing listens on) does not count.
fn accepting(port: u16) -> bool {
    std::net::TcpStream::connect(("127.0.0.1", port))
        .is_ok_and(|s| s.local_addr().ok() != s.peer_addr().ok())
}
