//! The `purra` binary run as a user runs it: against purra's example server over stdio,
//! Streamable HTTP and WebSocket, and against the official Python SDK's fixture server
//! (`peers/python/server.py`) over stdio and HTTP (installed by `scripts/setup-peers.sh`).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::peers::{peer, peers_dir, repo_root};
use crate::support::run::{describe, expect_code, json_of, purra, purra_bin, stdout};

/// The fixture contract's twelve tools (`peers/FIXTURES.md`).
const FIXTURE_TOOLS: [&str; 12] = [
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

/// `-- purra serve-example`: purra's example server over stdio.
fn example_stdio() -> Vec<String> {
    vec![
        "--".into(),
        purra_bin().into(),
        "serve-example".into(),
        "--stdio".into(),
    ]
}

/// `-- python peers/python/server.py`: the official Python SDK's fixture server over stdio.
fn python_stdio() -> Vec<String> {
    vec![
        "--".into(),
        peer(peers_dir().join("venv/bin/python")),
        peer(repo_root().join("peers/python/server.py")),
    ]
}

/// `purra <sub> [url] words... [-- command]`.
fn run_on(target: &Target, sub: &str, words: &[&str]) -> Output {
    let mut args: Vec<String> = vec![sub.to_owned()];
    match target {
        Target::Url(url) => {
            args.push(url.clone());
            args.extend(words.iter().map(|s| (*s).to_owned()));
        }
        Target::Stdio(command) => {
            args.extend(words.iter().map(|s| (*s).to_owned()));
            args.extend(command.iter().cloned());
        }
        Target::Pinned(inner, version) => {
            let mut pinned = vec!["--protocol-version", version];
            pinned.extend_from_slice(words);
            return run_on(inner, sub, &pinned);
        }
    }
    purra(&args)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// How the test reaches a server.
enum Target {
    Url(String),
    Stdio(Vec<String>),
    /// The same server with `--protocol-version` given.
    Pinned(Box<Target>, &'static str),
}

/// A server process serving on a port it announced with `listening on <url>` on stderr;
/// killed when dropped.
struct Served {
    child: Child,
    url: String,
}

impl Served {
    fn start(program: &str, args: &[&str]) -> Served {
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn server");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(at) = line.find("listening on ") {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(line[at + "listening on ".len()..].trim().to_owned());
                    }
                }
                // Keep draining so the server never blocks on a full pipe.
            }
        });
        let url = match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(url) => url,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{program} {args:?} did not announce its address");
            }
        };
        // A server may announce itself before it accepts (uvicorn): wait until it does.
        let authority = url
            .split_once("://")
            .map(|(_, rest)| rest.split('/').next().unwrap_or(rest))
            .expect("a URL")
            .to_owned();
        let start = Instant::now();
        while std::net::TcpStream::connect(&authority).is_err() {
            if start.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{program} {args:?} announced {url} but does not accept connections");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Served { child, url }
    }

    /// `purra serve-example --http 127.0.0.1:0` (or `--ws`): the OS picks a free port.
    fn example(flag: &str) -> Served {
        Served::start(purra_bin(), &["serve-example", flag, "127.0.0.1:0"])
    }

    fn target(&self) -> Target {
        Target::Url(self.url.clone())
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tool_names(doc: &Value) -> Vec<String> {
    doc["tools"]
        .as_array()
        .expect("tools array")
        .iter()
        .map(|t| t["name"].as_str().expect("tool name").to_owned())
        .collect()
}

/// What `inspect` reports of the protocol: the revision, its era and how it was chosen.
struct Spoken {
    revision: &'static str,
    era: &'static str,
    choice: &'static str,
}

/// `auto` against a server that answers `server/discover`.
const AUTO_MODERN: Spoken = Spoken {
    revision: "2026-07-28",
    era: "modern",
    choice: "auto",
};

/// `--protocol-version 2025-11-25`.
const PINNED_HANDSHAKE: Spoken = Spoken {
    revision: "2025-11-25",
    era: "handshake",
    choice: "pinned",
};

/// `inspect --json` against a fixture server: exact server info, version and catalogs.
fn check_inspect_json(target: &Target, server_name: &str, spoken: &Spoken) {
    let out = run_on(target, "inspect", &["--json"]);
    expect_code(&out, 0);
    let doc = json_of(&out);
    assert_eq!(doc["serverInfo"]["name"], server_name, "{doc}");
    assert_eq!(doc["serverInfo"]["version"], "1.0.0", "{doc}");
    assert_eq!(doc["protocolVersion"], spoken.revision, "{doc}");
    assert_eq!(doc["era"], spoken.era, "{doc}");
    assert_eq!(doc["protocolChoice"], spoken.choice, "{doc}");
    let mut names = tool_names(&doc);
    names.sort();
    let mut want: Vec<String> = FIXTURE_TOOLS.iter().map(|s| (*s).to_owned()).collect();
    want.sort();
    assert_eq!(names, want);
    let add = doc["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "add")
        .unwrap();
    assert_eq!(
        add["outputSchema"]["properties"]["sum"]["type"], "number",
        "tools carry their schemas: {add}"
    );
    assert_eq!(doc["capabilities"]["resources"]["subscribe"], true);
    assert!(doc["capabilities"]["logging"].is_object());
    let uris: Vec<&str> = doc["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert_eq!(uris.len(), 6, "every page: {uris:?}");
    assert!(uris.contains(&"fixture://static/3") && uris.contains(&"fixture://watched"));
    assert_eq!(
        doc["resourceTemplates"][0]["uriTemplate"],
        "fixture://items/{id}"
    );
    assert_eq!(doc["prompts"][0]["name"], "greet");
}

/// `inspect` (readable) against a fixture server.
fn check_inspect_readable(target: &Target, server_name: &str, spoken: &Spoken) {
    let out = run_on(target, "inspect", &[]);
    let text = expect_code(&out, 0);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        format!("server:       {server_name} 1.0.0"),
        "{text}"
    );
    let how = match spoken.choice {
        "auto" => "auto",
        _ => "pinned by --protocol-version",
    };
    assert_eq!(
        lines[1..3],
        [
            format!("protocol:     {}", spoken.revision),
            format!("era:          {} ({how})", spoken.era),
        ],
        "{text}"
    );
    let caps = lines
        .iter()
        .find(|l| l.starts_with("capabilities: "))
        .expect("capabilities line");
    for c in ["tools", "resources", "prompts", "logging", "completions"] {
        assert!(caps.contains(c), "{caps}");
    }
    assert!(lines.contains(&"tools (12):"), "{text}");
    for tool in FIXTURE_TOOLS {
        assert!(
            lines
                .iter()
                .any(|l| l.split_whitespace().next() == Some(tool)),
            "tool {tool} not listed\n{text}"
        );
    }
    assert!(lines.contains(&"resources (6):"), "{text}");
    assert!(
        lines
            .iter()
            .any(|l| l.trim_start().starts_with("fixture://static/3")
                && l.ends_with("static-3 (text/plain)")),
        "{text}"
    );
    assert!(lines.contains(&"resource templates (1):"), "{text}");
    assert!(
        lines.contains(&"  fixture://items/{id}  item (text/plain)"),
        "{text}"
    );
    assert!(lines.contains(&"prompts (1):"), "{text}");
    assert!(
        lines
            .iter()
            .any(|l| l.trim_start().starts_with("greet(name, style?)")),
        "{text}"
    );
}

/// `call`: text, structured (pretty-printed, the JSON mirror not repeated), `--args`, isError
/// (exit 1, content on stderr), `--json`.
fn check_call(target: &Target) {
    let out = run_on(target, "call", &["echo", "text=hello world"]);
    assert_eq!(expect_code(&out, 0), "hello world\n");

    // `text` is a string property: a value that would parse as JSON is sent as written.
    let out = run_on(target, "call", &["echo", "text=94103"]);
    assert_eq!(expect_code(&out, 0), "94103\n");
    let out = run_on(target, "call", &["echo", "text=true"]);
    assert_eq!(expect_code(&out, 0), "true\n");

    // A value that parses as JSON is JSON: a=2 is the number 2.
    let out = run_on(target, "call", &["add", "a=2", "b=3"]);
    let text = expect_code(&out, 0);
    let v: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("stdout is only the structured content ({e}):\n{text}"));
    assert_eq!(v["sum"].as_f64(), Some(5.0), "{text}");
    assert!(
        text.starts_with("{\n  \"sum\": 5"),
        "pretty-printed: {text}"
    );

    let out = run_on(
        target,
        "call",
        &["--args", r#"{"a": 1.5, "b": 1}"#, "add", "b=2"],
    );
    let v: Value = serde_json::from_str(&expect_code(&out, 0)).unwrap();
    assert_eq!(v["sum"].as_f64(), Some(3.5));

    let out = run_on(target, "call", &["fail"]);
    assert_eq!(expect_code(&out, 1), "", "an isError result goes to stderr");
    assert!(
        stderr(&out).contains("fixture failure"),
        "{}",
        describe(&out)
    );

    let out = run_on(target, "call", &["--json", "echo", "text=hi"]);
    let doc = {
        expect_code(&out, 0);
        json_of(&out)
    };
    assert_eq!(doc["content"][0]["type"], "text");
    assert_eq!(doc["content"][0]["text"], "hi");

    let out = run_on(target, "call", &["--json", "fail"]);
    expect_code(&out, 1);
    let doc = json_of(&out);
    assert_eq!(doc["isError"], true);
    assert_eq!(doc["content"][0]["text"], "fixture failure");
}

/// Progress as plain lines on stderr (stderr is a pipe here), the result on stdout.
fn check_progress(target: &Target) {
    let out = run_on(target, "call", &["progress", "steps=3"]);
    assert_eq!(expect_code(&out, 0), "done 3\n");
    let err = stderr(&out);
    let progress: Vec<&str> = err.lines().filter(|l| l.starts_with("progress ")).collect();
    assert_eq!(
        progress,
        [
            "progress 1/3 step 1",
            "progress 2/3 step 2",
            "progress 3/3 step 3"
        ],
        "{err}"
    );
}

/// Server log messages on stderr; `--log-level` filters them at the server.
fn check_logs(target: &Target) {
    let out = run_on(target, "call", &["log", "--log-level", "debug"]);
    assert_eq!(expect_code(&out, 0), "logged\n");
    let err = stderr(&out);
    let logs: Vec<&str> = err.lines().filter(|l| l.starts_with('[')).collect();
    assert_eq!(
        logs,
        [
            "[debug] fixture: debug message",
            "[info] fixture: info message",
            "[warning] fixture: warning message",
            "[error] fixture: error message"
        ],
        "{err}"
    );
    let out = run_on(target, "call", &["log", "--log-level", "warning"]);
    assert_eq!(expect_code(&out, 0), "logged\n");
    let err = stderr(&out);
    let logs: Vec<&str> = err.lines().filter(|l| l.starts_with('[')).collect();
    assert_eq!(
        logs,
        [
            "[warning] fixture: warning message",
            "[error] fixture: error message"
        ],
        "{err}"
    );
}

/// `read`: a static resource, a template, an unknown URI (a JSON-RPC error: exit 2).
fn check_read(target: &Target) {
    let out = run_on(target, "read", &["fixture://static/3"]);
    assert_eq!(expect_code(&out, 0), "static 3\n");
    let out = run_on(target, "read", &["fixture://items/42"]);
    assert_eq!(expect_code(&out, 0), "item 42\n");
    let out = run_on(target, "read", &["--json", "fixture://static/1"]);
    expect_code(&out, 0);
    let doc = json_of(&out);
    assert_eq!(doc["contents"][0]["uri"], "fixture://static/1");
    assert_eq!(doc["contents"][0]["text"], "static 1");
    assert_eq!(doc["contents"][0]["mimeType"], "text/plain");

    let out = run_on(target, "read", &["fixture://nope"]);
    assert_eq!(expect_code(&out, 2), "");
    assert!(
        stderr(&out).contains("fixture://nope"),
        "{}",
        describe(&out)
    );
    let out = run_on(target, "read", &["--json", "fixture://nope"]);
    expect_code(&out, 2);
    let doc = json_of(&out);
    assert_eq!(doc["error"]["kind"], "rpc", "{doc}");
    assert!(doc["error"]["code"].is_i64(), "{doc}");
}

/// The readable prompt without its description line (`# Greeting`; the Python SDK sends the
/// prompt's description, purra's server none).
fn prompt_messages(out: &Output) -> String {
    let text = expect_code(out, 0);
    match text.strip_prefix("# ") {
        Some(rest) => {
            let (description, messages) = rest.split_once('\n').unwrap();
            assert_eq!(description, "Greeting");
            messages.to_owned()
        }
        None => text,
    }
}

/// `prompt`: arguments are strings, messages as `role: text`.
fn check_prompt(target: &Target) {
    let out = run_on(target, "prompt", &["greet", "name=Ada"]);
    assert_eq!(prompt_messages(&out), "user: Hello, Ada!\n");
    let out = run_on(target, "prompt", &["greet", "name=Ada", "style=loud"]);
    assert_eq!(prompt_messages(&out), "user: HELLO, ADA!\n");
    // A number-looking value stays a string for prompts.
    let out = run_on(target, "prompt", &["greet", "name=42"]);
    assert_eq!(prompt_messages(&out), "user: Hello, 42!\n");
    let out = run_on(target, "prompt", &["--json", "greet", "name=Ada"]);
    expect_code(&out, 0);
    let doc = json_of(&out);
    assert_eq!(doc["messages"][0]["role"], "user");
    assert_eq!(doc["messages"][0]["content"]["text"], "Hello, Ada!");
    let out = run_on(target, "prompt", &["nope"]);
    expect_code(&out, 2);
}

#[test]
fn help_documents_targets_arguments_and_exit_codes() {
    let out = purra(&["--help"]);
    let text = expect_code(&out, 0);
    for needle in [
        "inspect",
        "call",
        "read",
        "prompt",
        "serve-example",
        "after `--`",
        "KEY=VALUE",
        "converted by the tool's input schema",
        "Exit codes:",
        "  1   the tool reported an error",
        "  2   protocol or transport error",
        "  64  usage error",
    ] {
        assert!(
            text.contains(needle),
            "{needle:?} missing from --help:\n{text}"
        );
    }
    let out = purra(&["call", "--help"]);
    let text = expect_code(&out, 0);
    assert!(
        text.contains("purra call [OPTIONS] <URL> <TOOL> [KEY=VALUE]...")
            && text.contains("purra call [OPTIONS] <TOOL> [KEY=VALUE]... -- <COMMAND> [ARGS]..."),
        "{text}"
    );
    expect_code(&purra(&["--version"]), 0);
}

#[test]
fn usage_errors_exit_64() {
    let bin = purra_bin();
    let cases: Vec<Vec<&str>> = vec![
        vec![],
        vec!["bogus"],
        vec!["call"],
        // No target: the first argument is not a URL and nothing follows `--`.
        vec!["call", "echo", "text=hi"],
        vec!["inspect"],
        vec!["inspect", "ftp://example"],
        // Bad arguments are refused before the server is started.
        vec!["call", "echo", "novalue", "--", bin, "serve-example"],
        vec!["call", "--args", "[1]", "echo", "--", bin, "serve-example"],
        vec!["call", "--args", "{", "echo", "--", bin, "serve-example"],
        vec!["call", "--timeout", "0", "echo", "--", bin, "serve-example"],
        vec!["read", "--", bin, "serve-example"],
        vec!["read", "a://1", "b://2", "--", bin, "serve-example"],
        vec!["prompt", "greet", "name", "--", bin, "serve-example"],
        vec![
            "inspect",
            "http://127.0.0.1:1/mcp",
            "--",
            bin,
            "serve-example",
        ],
        vec!["inspect", "-H", "X-A: b", "--", bin, "serve-example"],
        vec![
            "serve-example",
            "--http",
            "127.0.0.1:0",
            "--ws",
            "127.0.0.1:0",
        ],
        vec![
            "call",
            "--log-level",
            "loud",
            "http://127.0.0.1:1/mcp",
            "echo",
        ],
    ];
    for args in cases {
        let out = purra(&args);
        assert_eq!(out.status.code(), Some(64), "{args:?}\n{}", describe(&out));
        assert!(out.stdout.is_empty(), "{args:?}\n{}", describe(&out));
    }
}

#[test]
fn transport_failure_exits_2() {
    // Nothing listens on port 1; a command that does not exist cannot start.
    let out = purra(&["call", "http://127.0.0.1:1/mcp", "echo", "text=hi"]);
    expect_code(&out, 2);
    let out = purra(&["inspect", "ws://127.0.0.1:1/"]);
    expect_code(&out, 2);
    let out = purra(&["inspect", "--json", "--", "/nonexistent/purra-test-server"]);
    expect_code(&out, 2);
    assert_eq!(json_of(&out)["error"]["kind"], "transport");
}

#[test]
fn example_server_over_stdio() {
    let target = Target::Stdio(example_stdio());
    check_inspect_json(&target, "fixture-purra", &AUTO_MODERN);
    check_inspect_readable(&target, "fixture-purra", &AUTO_MODERN);
    check_call(&target);
    check_progress(&target);
    check_logs(&target);
    check_read(&target);
    check_prompt(&target);

    // purra's server answers an unknown tool with a JSON-RPC error: exit 2, not 1.
    let out = run_on(&target, "call", &["nope"]);
    expect_code(&out, 2);
    assert!(stderr(&out).contains("nope"), "{}", describe(&out));
    let out = run_on(&target, "call", &["--json", "nope"]);
    expect_code(&out, 2);
    let doc = json_of(&out);
    assert_eq!(doc["error"]["kind"], "rpc");
    assert_eq!(doc["error"]["code"], -32602);
}

/// `--protocol-version`: `auto` (the default), a handshake revision (the handshake at it) or
/// 2026-07-28 (pinned), against purra's example server, which speaks both eras; `inspect` says
/// which era and revision were used.
#[test]
fn protocol_version_chooses_the_era() {
    let stdio = || Target::Stdio(example_stdio());
    for (given, spoken) in [
        (None, AUTO_MODERN),
        (Some("auto"), AUTO_MODERN),
        (
            Some("2026-07-28"),
            Spoken {
                revision: "2026-07-28",
                era: "modern",
                choice: "pinned",
            },
        ),
        (
            Some("2025-06-18"),
            Spoken {
                revision: "2025-06-18",
                era: "handshake",
                choice: "pinned",
            },
        ),
        (Some("2025-11-25"), PINNED_HANDSHAKE),
    ] {
        let target = match given {
            Some(v) => Target::Pinned(Box::new(stdio()), v),
            None => stdio(),
        };
        check_inspect_json(&target, "fixture-purra", &spoken);
        check_inspect_readable(&target, "fixture-purra", &spoken);
        // The other subcommands speak it too.
        let out = run_on(&target, "call", &["echo", "text=both eras"]);
        assert_eq!(expect_code(&out, 0), "both eras\n");
    }
    // Anything else is a usage error, before any server is started.
    let target = Target::Pinned(Box::new(stdio()), "2099-01-01");
    let out = run_on(&target, "inspect", &[]);
    expect_code(&out, 64);
    assert_eq!(
        stderr(&out),
        "purra: --protocol-version \"2099-01-01\" is not a revision purra speaks: use auto or one \
         of 2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25, 2026-07-28\n\
         Try 'purra --help' for more information.\n",
        "{}",
        describe(&out)
    );
}

#[test]
fn inspect_schemas_shows_input_and_output_schemas() {
    let target = Target::Stdio(example_stdio());
    let out = run_on(&target, "inspect", &["--schemas"]);
    let text = expect_code(&out, 0);
    let add = text
        .split("\n  add  Adds two numbers\n")
        .nth(1)
        .unwrap_or_else(|| panic!("add not listed with its schemas:\n{text}"));
    let add = add.split("\n  fail  ").next().unwrap();
    assert!(add.starts_with("    input schema:\n      {\n"), "{add}");
    assert!(add.contains("    output schema:\n"), "{add}");
    assert!(add.contains("\"sum\""), "{add}");
    assert!(add.contains("\"required\""), "{add}");
    // Without --schemas there are none.
    let out = run_on(&target, "inspect", &[]);
    assert!(!expect_code(&out, 0).contains("input schema:"));
}

#[test]
fn example_server_over_http() {
    let served = Served::example("--http");
    assert!(served.url.starts_with("http://127.0.0.1:") && served.url.ends_with("/mcp"));
    let target = served.target();
    check_inspect_json(&target, "fixture-purra", &AUTO_MODERN);
    check_inspect_readable(&target, "fixture-purra", &AUTO_MODERN);
    let doc = json_of(&run_on(&target, "inspect", &["--json"]));
    assert_eq!(doc["transport"], "http", "{doc}");
    check_call(&target);
    check_progress(&target);
    check_logs(&target);
    check_read(&target);
    check_prompt(&target);
    let out = run_on(&target, "call", &["nope"]);
    expect_code(&out, 2);
    // A header is accepted for URL targets.
    let out = run_on(&target, "call", &["-H", "X-Test: 1", "echo", "text=h"]);
    assert_eq!(expect_code(&out, 0), "h\n");
}

#[test]
fn example_server_over_websocket() {
    let served = Served::example("--ws");
    assert!(served.url.starts_with("ws://127.0.0.1:"), "{}", served.url);
    let target = served.target();
    check_inspect_json(&target, "fixture-purra", &AUTO_MODERN);
    check_inspect_readable(&target, "fixture-purra", &AUTO_MODERN);
    check_call(&target);
    check_progress(&target);
    check_logs(&target);
    check_read(&target);
    check_prompt(&target);
    let out = run_on(&target, "call", &["nope"]);
    expect_code(&out, 2);
}

#[test]
fn python_sdk_fixture_server_over_stdio() {
    // The fixture's handlers are the handshake era's (server-to-client requests, results without
    // `resultType`), though the SDK answers `server/discover`: pinned to the handshake.
    let target = Target::Pinned(Box::new(Target::Stdio(python_stdio())), "2025-11-25");
    check_inspect_json(&target, "fixture-python", &PINNED_HANDSHAKE);
    check_inspect_readable(&target, "fixture-python", &PINNED_HANDSHAKE);
    check_call(&target);
    check_progress(&target);
    check_logs(&target);
    check_read(&target);
    check_prompt(&target);
    // By default (auto) the SDK's answer to `server/discover` makes it 2026-07-28.
    let auto = Target::Stdio(python_stdio());
    let doc = json_of(&run_on(&auto, "inspect", &["--json"]));
    assert_eq!(
        [&doc["protocolVersion"], &doc["era"], &doc["protocolChoice"]],
        ["2026-07-28", "modern", "auto"],
        "{doc}"
    );
    let out = run_on(&auto, "read", &["fixture://static/1"]);
    assert_eq!(expect_code(&out, 0), "static 1\n");
    // The Python fixture answers an unknown tool with an isError result (not a JSON-RPC
    // error), so it is a tool error: exit 1.
    let out = run_on(&target, "call", &["nope"]);
    expect_code(&out, 1);
    assert!(
        stderr(&out).contains("unknown tool: nope"),
        "{}",
        describe(&out)
    );
}

#[test]
fn python_sdk_fixture_server_over_http() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
        .to_string();
    let python = peer(peers_dir().join("venv/bin/python"));
    let script = peer(repo_root().join("peers/python/server.py"));
    let served = Served::start(&python, &[&script, "--http", &port]);
    let target = Target::Pinned(Box::new(served.target()), "2025-11-25");
    check_inspect_json(&target, "fixture-python", &PINNED_HANDSHAKE);
    check_call(&target);
    check_progress(&target);
    check_read(&target);
    check_prompt(&target);
}

/// `purra` against the official SDKs' servers on the HTTP+SSE transport of 2024-11-05 only: by
/// default Streamable HTTP is tried first (they refuse its POST with 405) and the CLI falls back;
/// `--transport sse` goes there directly; `--transport streamable-http` does not fall back.
#[test]
fn legacy_http_sse_servers_of_both_sdks() {
    let port = || {
        std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port()
            .to_string()
    };
    let python = peer(peers_dir().join("venv/bin/python"));
    let script = peer(repo_root().join("peers/python/server.py"));
    let py = Served::start(&python, &[&script, "--sse", &port()]);
    assert!(py.url.ends_with("/sse"), "{}", py.url);
    let node = peer(peers_dir().join("bin/node"));
    let script = peer(repo_root().join("peers/node/server.mjs"));
    let ts = Served::start(&node, &[&script, "--sse", &port()]);
    let handshake = Spoken {
        revision: "2025-11-25",
        era: "handshake",
        choice: "auto",
    };
    for (served, name) in [(&py, "fixture-python"), (&ts, "fixture-node")] {
        let target = served.target();
        check_inspect_json(&target, name, &handshake);
        let text = expect_code(&run_on(&target, "inspect", &[]), 0);
        assert!(
            text.contains("\ntransport:    HTTP+SSE (2024-11-05)\n"),
            "{text}"
        );
        check_call(&target);
        check_read(&target);
        check_prompt(&target);
        let out = run_on(
            &target,
            "call",
            &["--transport", "sse", "echo", "text=direct"],
        );
        assert_eq!(expect_code(&out, 0), "direct\n");
        let out = run_on(
            &target,
            "call",
            &["--transport", "streamable-http", "echo", "text=x"],
        );
        expect_code(&out, 2);
        assert!(
            stderr(&out).contains("HTTP status 405"),
            "{}",
            describe(&out)
        );
    }
    // `--transport` belongs to http(s) URLs.
    let out = purra(&["call", "--transport", "sse", "ws://127.0.0.1:1/", "echo"]);
    assert_eq!(expect_code(&out, 64), "");
    assert!(
        stderr(&out).contains("--transport applies to http(s) URLs only"),
        "{}",
        describe(&out)
    );
}

/// `purra` against an MCP Apps server of the official Python SDK (`mcp.server.apps`): `inspect`
/// shows the negotiated-able extension and which tool has a UI, and `read --save` writes the UI's
/// HTML to a file as it is.
#[test]
fn a_python_sdk_apps_server_is_seen_as_such() {
    let python = peer(peers_dir().join("venv/bin/python"));
    let script = peer(repo_root().join("peers/python/apps_server.py"));
    let target = Target::Stdio(vec!["--".into(), python, script]);
    let out = run_on(&target, "inspect", &[]);
    let text = expect_code(&out, 0);
    assert!(
        text.contains("\nextensions:   io.modelcontextprotocol/ui\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "\n  get_time  The time on the fixture's clock  [app: ui://clock/app.html]\n"
        ),
        "{text}"
    );
    let doc = json_of(&run_on(&target, "inspect", &["--json"]));
    assert_eq!(
        doc["tools"][0]["_meta"]["ui"]["resourceUri"], "ui://clock/app.html",
        "{doc}"
    );
    let dir = std::env::temp_dir().join(format!("purra-apps-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("clock.html");
    let out = run_on(
        &target,
        "read",
        &["ui://clock/app.html", "--save", file.to_str().unwrap()],
    );
    assert_eq!(expect_code(&out, 0), "");
    assert_eq!(
        stderr(&out).trim_end(),
        format!(
            "saved 36 bytes (text/html;profile=mcp-app) to {}",
            file.display()
        )
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "<!doctype html><p id=clock>12:00</p>"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The subcommands a help text lists under `Commands:` (`help` left out).
fn listed_subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim_end() != "Commands:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

/// `bytes` with clap's own styling removed: SGR sequences `ESC [ digits and ; m`, which clap
/// writes when colour is forced. Any other ESC is kept.
fn without_styles(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == 0x1b && bytes.get(i + 1) == Some(&b'[') {
            let end = bytes[i + 2..]
                .iter()
                .position(|b| !(b.is_ascii_digit() || *b == b';'))
                .map(|n| i + 2 + n);
            if let Some(end) = end.filter(|e| bytes[*e] == b'm') {
                i = end + 1;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    out
}

/// `purra --help` and every subcommand's `--help` (nested ones too) are plain text: no byte
/// below 0x20 but newline and tab, piped and with colour forced (clap's styling aside), so on a
/// terminal too (issue 44 defect 7: a raw ESC in a string literal garbled the top-level help;
/// piped, clap stripped it with the two characters after it, on a terminal it was sent).
#[test]
fn help_text_has_no_control_bytes() {
    let mut queue: Vec<Vec<String>> = vec![Vec::new()];
    let mut seen = 0;
    while let Some(path) = queue.pop() {
        let mut args = path.clone();
        args.push("--help".into());
        let out = purra(&args);
        let text = expect_code(&out, 0);
        assert!(out.stderr.is_empty(), "purra {args:?}: {}", describe(&out));
        let forced = Command::new(purra_bin())
            .args(&args)
            .env("CLICOLOR_FORCE", "1")
            .env_remove("NO_COLOR")
            .stdin(Stdio::null())
            .output()
            .expect("purra");
        assert_eq!(forced.status.code(), Some(0), "{}", describe(&forced));
        for (how, bytes) in [
            ("piped", out.stdout.clone()),
            ("forced colour", without_styles(&forced.stdout)),
        ] {
            if let Some((i, b)) = bytes
                .iter()
                .enumerate()
                .find(|(_, b)| **b < 0x20 && **b != b'\n' && **b != b'\t')
            {
                panic!(
                    "purra {args:?} ({how}) prints the byte {b:#04x} at offset {i}:\n{}",
                    String::from_utf8_lossy(&bytes)
                );
            }
        }
        for sub in listed_subcommands(&text) {
            let mut next = path.clone();
            next.push(sub);
            queue.push(next);
        }
        seen += 1;
    }
    // The top level and its subcommands, and the nested ones (`approvals list`, ...).
    assert!(seen > 20, "only {seen} help texts were found");
    let top = stdout(&purra(&["--help"]));
    assert!(
        top.contains("shown as escapes like \\x1b, never obeyed"),
        "{top}"
    );
}

/// Issue 43, "nothing a client sends reaches a log line unescaped": a method name a client
/// sends (a newline, a forged JSON line, an escape sequence, a bidi override) never reaches the
/// log lines of `purra -v serve-example`, in text and in JSON: a method MCP does not define is
/// logged as `other` (finding 1), and no raw control character or forged line appears (tracing
/// writes `%` fields as they are: before, the newline began a line of the client's).
#[test]
fn finding_7_client_text_reaches_log_lines_escaped() {
    use std::io::{Read, Write};
    let method = "x\n{\"message\":\"forged\"}\u{1b}[2J\u{202e}";
    for format in ["text", "json"] {
        let mut child = Command::new(purra_bin())
            .args(["-v", "--log-format", format, "serve-example"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("purra serve-example");
        let mut stdin = child.stdin.take().expect("stdin");
        for message in [
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "finding-7", "version": "1"}}}),
            serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": method}),
        ] {
            writeln!(stdin, "{message}").expect("write");
        }
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut answered = false;
        for _ in 0..2 {
            let mut line = String::new();
            stdout.read_line(&mut line).expect("read");
            let v: Value = serde_json::from_str(&line).expect("JSON");
            answered |= v["id"] == 2 && v["error"]["code"] == -32601;
        }
        assert!(answered, "{format}: no -32601 for the made-up method");
        drop(stdin);
        let mut err = String::new();
        child
            .stderr
            .take()
            .expect("stderr")
            .read_to_string(&mut err)
            .expect("stderr");
        let _ = child.wait();
        assert!(
            !err.contains(['\u{1b}', '\u{202e}']),
            "{format}: a raw control in {err}"
        );
        assert!(
            !err.lines()
                .any(|l| l.starts_with("{\"message\":\"forged\"}")),
            "{format}: a forged line in {err}"
        );
        match format {
            "text" => assert!(
                err.contains(r#"method="other""#) && !err.contains("forged"),
                "{err}"
            ),
            _ => {
                let mut seen = false;
                for line in err.lines() {
                    let v: Value = serde_json::from_str(line)
                        .unwrap_or_else(|e| panic!("a raw line ({e}): {line:?}"));
                    seen |= v["span"]["method"] == "other";
                    assert!(!line.contains("forged"), "{line}");
                }
                assert!(seen, "{err}");
            }
        }
    }
}
