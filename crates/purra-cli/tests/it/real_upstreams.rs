//! `purra gateway` over real upstreams no one here wrote the schemas of: the official reference
//! servers server-filesystem, server-memory and server-everything (TypeScript SDK, every schema
//! declaring draft-07), a FastMCP 4.1.6 server and a Python SDK 2.3.0 `MCPServer` (their schemas
//! generated from type hints). For each: `--check` binds the chosen read and write (and says
//! what it warns about); then one gateway on Streamable HTTP serves the official Python SDK
//! 2.3.0 client and then the TypeScript SDK 1.32.2 client, each listing, writing after
//! `purra approvals approve` from another process, and reading the effect back; each write
//! reached the upstream exactly once (`peers/python/count_relay.py` between the gateway and the
//! server records every `tools/call` that reached it, fsynced) and the store holds one claim and
//! a committed effect per approval. Real schemas the profile refuses are named exactly.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::Receiver;
use std::sync::Mutex;
use std::time::Instant;

use serde_json::{json, Value};

use crate::support::clients::{gateway_client, json_lines, serving, spawn_gateway, Sdk};
use crate::support::peers;
use crate::support::peers::node;
use crate::support::run::{approvals_json, ledger_lines, purra, purra_bin, wait_approval, LIMIT};

use peers::{fresh_dir, own, own_lines, peer, peers_dir, python, repo_root};

fn reference(name: &str) -> String {
    peer(repo_root().join(format!(
        "peers/node/node_modules/@modelcontextprotocol/{name}/dist/index.js"
    )))
}

/// One real upstream and the two tools bound over it.
struct Upstream {
    /// The server command (run behind the counting relay).
    command: Vec<String>,
    /// Environment of the command, as TOML inline-table members.
    env: String,
    read: (&'static str, &'static str),
    write: (&'static str, &'static str, &'static str),
}

/// A scenario's directory (removed when dropped) with its configuration.
struct Scenario {
    dir: PathBuf,
    text: String,
}

impl Drop for Scenario {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Scenario {
    /// Writes `gateway.toml` for `up` (with `extra` appended) in a fresh directory; `make` builds
    /// the upstream from that directory.
    fn new(name: &str, make: impl FnOnce(&Path) -> Upstream, extra: &str) -> Scenario {
        let dir = fresh_dir("real", name);
        let up = make(&dir);
        let mut command = vec![
            python(),
            peer(repo_root().join("peers/python/count_relay.py")),
            "--ledger".into(),
            dir.join("ledger.txt").to_string_lossy().into_owned(),
            "--".into(),
        ];
        command.extend(up.command);
        let text = format!(
            r#"[gateway]
name = "real"
db = "gateway.db"
listen = "127.0.0.1:0"
approval_wait = "90s"
progress_interval = "1s"

[upstreams.up]
command = {command:?}
env = {{ {env} }}

[reads.{read}]
upstream = "up"
tool = "{read_remote}"
title = "Read"
scope = "open"

[writes.{write}]
upstream = "up"
tool = "{write_remote}"
title = "Write"
effect = "{effect}"
binding_id = "real"
binding_revision = "1"
scope_id = "real-clients"
scope_revision = "1"

[writes.{write}.scope]
clients = ["gateway-client-python", "gateway-client-node"]
{extra}"#,
            env = up.env,
            read = up.read.0,
            read_remote = up.read.1,
            write = up.write.0,
            write_remote = up.write.1,
            effect = up.write.2,
        );
        let sc = Scenario { dir, text };
        std::fs::write(sc.config(), &sc.text).expect("config");
        sc
    }

    fn config(&self) -> String {
        self.dir.join("gateway.toml").to_string_lossy().into_owned()
    }

    fn db(&self) -> String {
        self.dir.join("gateway.db").to_string_lossy().into_owned()
    }

    /// The configuration's 1-based line that starts with `prefix`.
    fn line_of(&self, prefix: &str) -> usize {
        1 + self
            .text
            .lines()
            .position(|l| l.starts_with(prefix))
            .expect("a line")
    }

    /// How many `tools/call` of `tool` reached the upstream.
    fn calls(&self, tool: &str) -> usize {
        ledger_lines(&self.dir.join("ledger.txt"))
            .iter()
            .filter(|l| **l == format!("call {tool}"))
            .count()
    }

    /// `purra gateway --config FILE --check` (with `-v` when `verbose`).
    fn check(&self, verbose: bool) -> Output {
        let config = self.config();
        let mut args = vec!["gateway", "--config", config.as_str(), "--check"];
        if verbose {
            args.insert(0, "-v");
        }
        purra(&args)
    }

    /// `purra approvals ARGS --db DB --json`.
    fn approvals(&self, args: &[&str]) -> Value {
        approvals_json(&self.db(), args)
    }

    /// Waits until approval `id` is pending.
    fn wait_pending(&self, id: &str) {
        wait_approval(&self.db(), &format!("{id} (pending)"), |a| {
            a["id"] == id && a["state"] == "pending"
        });
    }
}

/// A gateway on Streamable HTTP, killed when dropped; its stderr lines are kept.
struct Gateway {
    child: Child,
    url: String,
    /// Its stderr lines read so far, and the rest as they come.
    lines: Mutex<(Vec<String>, Receiver<String>)>,
}

impl Gateway {
    fn start(sc: &Scenario) -> Gateway {
        let (child, rx) = spawn_gateway(sc.config());
        let (url, started) = serving(&rx, LIMIT);
        let lines = Mutex::new((started, rx));
        Gateway { child, url, lines }
    }

    /// [`own`] of every line it printed so far.
    fn own_lines(&self) -> Vec<String> {
        let mut lines = self.lines.lock().unwrap();
        let (read, rx) = &mut *lines;
        read.extend(rx.try_iter());
        own(read.iter().map(String::as_str))
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A downstream client over Streamable HTTP running `steps`; its JSON lines on a channel.
struct Client {
    child: Child,
    lines: Receiver<Value>,
}

impl Client {
    fn start(sdk: Sdk, url: &str, steps: &Value) -> Client {
        let mut cmd = gateway_client(sdk);
        let (child, lines) = json_lines(cmd.args(["--steps", &steps.to_string(), "--http", url]));
        Client { child, lines }
    }

    /// Every step the client printed, once it is done.
    fn finish(mut self) -> Vec<Value> {
        let start = Instant::now();
        let mut steps = Vec::new();
        loop {
            let v: Value = self
                .lines
                .recv_timeout(LIMIT.saturating_sub(start.elapsed()))
                .unwrap_or_else(|_| panic!("the client never finished; it printed {steps:?}"));
            if v["event"] == "done" {
                break;
            }
            if v.get("step").is_some() {
                steps.push(v);
            }
        }
        let _ = self.child.wait();
        steps
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What one client's run showed: the tool names listed, the write's result, the read's result.
struct Seen {
    names: Vec<String>,
    write: Value,
    read: Value,
}

/// `--check` binds both tools; then one gateway serves the Python SDK client and then the
/// TypeScript SDK client, each writing `args(sdk)` once after an approval from another process
/// and reading with `read_args`. Returns what each client saw (Python first) and the gateway's
/// own stderr lines; asserts one dispatch per approval and one upstream call per write.
fn both_clients_write_once(
    sc: &Scenario,
    write_args: impl Fn(Sdk) -> Value,
    read_args: Value,
    warnings: &[String],
) -> Vec<Seen> {
    let (read, write) = bound(sc);
    let out = sc.check(false);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut names = [read.clone(), write.clone()];
    names.sort();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("configuration ok: 2 tools: {}\n", names.join(", "))
    );
    assert_eq!(own_lines(&out.stderr), warnings);

    let gateway = Gateway::start(sc);
    let mut seen = Vec::new();
    for (i, sdk) in [Sdk::Python, Sdk::Node].into_iter().enumerate() {
        let id = format!("approval-{}", i + 1);
        let client = Client::start(
            sdk,
            &gateway.url,
            &json!([
                {"list": true},
                {"call": write, "args": write_args(sdk)},
                {"call": read, "args": read_args},
            ]),
        );
        sc.wait_pending(&id);
        assert_eq!(
            sc.calls(&remote_write(sc)),
            i,
            "nothing sent before the approval"
        );
        assert_eq!(
            sc.approvals(&["approve", &id, "--approver", "ada"])["state"],
            "approved"
        );
        let steps = client.finish();
        assert_eq!(steps.len(), 3, "{sdk:?}: {steps:?}");
        let listed: Vec<String> = steps[0]["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .map(|t| t["name"].as_str().unwrap_or("").to_owned())
            .collect();
        let shown = sc.approvals(&["show", &id]);
        assert_eq!(
            (&shown["state"], &shown["effect"], &shown["dispatches"]),
            (&json!("claimed"), &json!("committed"), &json!(1)),
            "{sdk:?}: {shown}"
        );
        assert_eq!(shown["arguments"], write_args(sdk));
        // Exactly one request reached the upstream for this write.
        assert_eq!(sc.calls(&remote_write(sc)), i + 1, "{sdk:?}");
        seen.push(Seen {
            names: listed,
            write: steps[1]["result"].clone(),
            read: steps[2]["result"].clone(),
        });
    }
    assert_eq!(sc.calls(&remote_read(sc)), 2);
    let first = gateway.own_lines();
    assert_eq!(
        first[..warnings.len()],
        *warnings,
        "the start warns as --check does"
    );
    for s in &seen {
        assert_eq!(s.names, names, "only the bound tools are listed");
        assert_ne!(s.write["isError"], true, "{}", s.write);
        assert_ne!(s.read["isError"], true, "{}", s.read);
    }
    seen
}

/// The local names of the scenario's read and write.
fn bound(sc: &Scenario) -> (String, String) {
    let local = |table: &str| {
        sc.text
            .lines()
            .find_map(|l| l.strip_prefix(&format!("[{table}.")))
            .and_then(|l| l.strip_suffix(']'))
            .expect("a binding")
            .to_owned()
    };
    (local("reads"), local("writes"))
}

fn remote(sc: &Scenario, nth: usize) -> String {
    sc.text
        .lines()
        .filter_map(|l| l.strip_prefix("tool = \""))
        .nth(nth)
        .and_then(|l| l.strip_suffix('"'))
        .expect("a tool")
        .to_owned()
}

fn remote_read(sc: &Scenario) -> String {
    remote(sc, 0)
}

fn remote_write(sc: &Scenario) -> String {
    remote(sc, 1)
}

fn text_of(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or("")
}

fn filesystem(dir: &Path) -> Upstream {
    let files = dir.join("files");
    std::fs::create_dir_all(&files).expect("files");
    Upstream {
        command: vec![
            node(),
            reference("server-filesystem"),
            files.to_string_lossy().into_owned(),
        ],
        env: String::new(),
        read: ("read_text_file", "read_text_file"),
        write: ("write_file", "write_file", "write"),
    }
}

#[test]
fn server_filesystem_binds_read_text_file_and_write_file() {
    let sc = Scenario::new("filesystem", filesystem, "");
    let files = sc.dir.join("files");
    let path = |sdk: Sdk| {
        files
            .join(format!("{sdk:?}.txt"))
            .to_string_lossy()
            .into_owned()
    };
    let warning = format!(
        "purra gateway: warning: {}:{}: writes.write_file.effect: upstream \"up\" marks the tool \"write_file\" destructive (destructiveHint: true), but the binding declares effect = \"write\": approvers are told it writes; declare effect = \"destructive\" if it can destroy data",
        sc.config(),
        sc.line_of("effect = ")
    );
    let seen = both_clients_write_once(
        &sc,
        |sdk| json!({"path": path(sdk), "content": format!("from {sdk:?}")}),
        json!({"path": path(Sdk::Python)}),
        &[warning],
    );
    for (s, sdk) in seen.iter().zip([Sdk::Python, Sdk::Node]) {
        assert_eq!(
            s.write["structuredContent"],
            json!({"content": format!("Successfully wrote to {}", path(sdk))})
        );
        assert_eq!(
            s.read["structuredContent"],
            json!({"content": "from Python"})
        );
        // The effect at the upstream: the file, as written.
        assert_eq!(
            std::fs::read_to_string(path(sdk)).expect("written"),
            format!("from {sdk:?}")
        );
    }

    // The same server with the dialects turned off: every TypeScript-SDK schema is refused.
    let off = Scenario::new(
        "filesystem-off",
        filesystem,
        "\n[limits]\nearlier_schema_dialects = false\n",
    );
    let out = off.check(false);
    assert_eq!(out.status.code(), Some(78));
    let file = off.config();
    let reason = "draft-07 is not accepted here: only https://json-schema.org/draft/2020-12/schema is (the host did not opt in to earlier dialects)";
    assert_eq!(
        own_lines(&out.stderr),
        [
            "purra: the configuration has 2 mistakes:".to_owned(),
            format!(
                "  {file}:{}: reads.read_text_file.tool: upstream \"up\" tool \"read_text_file\" at /inputSchema/$schema: {reason} (mcp_schema_unsupported)",
                off.line_of("tool = \"read_text_file\"")
            ),
            format!(
                "  {file}:{}: writes.write_file.tool: upstream \"up\" tool \"write_file\" at /inputSchema/$schema: {reason} (mcp_schema_unsupported)",
                off.line_of("tool = \"write_file\"")
            ),
        ]
    );
}

#[test]
fn server_memory_binds_read_graph_and_create_entities() {
    let sc = Scenario::new(
        "memory",
        |dir| Upstream {
            command: vec![node(), reference("server-memory")],
            env: format!(
                "MEMORY_FILE_PATH = {:?}",
                dir.join("memory.jsonl").to_string_lossy()
            ),
            read: ("read_graph", "read_graph"),
            write: ("create_entities", "create_entities", "write"),
        },
        "",
    );
    let entity = |sdk: Sdk| json!({"name": format!("{sdk:?}"), "entityType": "client", "observations": ["wrote through the gateway"]});
    let seen = both_clients_write_once(
        &sc,
        |sdk| json!({"entities": [entity(sdk)]}),
        json!({}),
        &[],
    );
    assert_eq!(
        seen[0].write["structuredContent"],
        json!({"entities": [entity(Sdk::Python)]})
    );
    assert_eq!(
        seen[1].read["structuredContent"],
        json!({"entities": [entity(Sdk::Python), entity(Sdk::Node)], "relations": []})
    );
    // The effect at the upstream: one entity line per write in its memory file.
    let memory = std::fs::read_to_string(sc.dir.join("memory.jsonl")).expect("memory file");
    let entities: Vec<Value> = memory
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert_eq!(entities.len(), 2, "{memory}");
    assert_eq!(entities[0]["name"], "Python");
    assert_eq!(entities[1]["name"], "Node");
}

#[test]
fn server_everything_binds_get_sum_and_toggle_simulated_logging() {
    let sc = Scenario::new(
        "everything",
        |_| Upstream {
            command: vec![node(), reference("server-everything"), "stdio".into()],
            env: String::new(),
            read: ("get_sum", "get-sum"),
            write: ("toggle_logging", "toggle-simulated-logging", "write"),
        },
        "",
    );
    let seen = both_clients_write_once(&sc, |_| json!({}), json!({"a": 2, "b": 3}), &[]);
    // The first write started the upstream's simulated logging, the second stopped it: each
    // reached the server once.
    assert!(
        text_of(&seen[0].write).starts_with("Started simulated, random-leveled logging"),
        "{}",
        seen[0].write
    );
    assert!(
        text_of(&seen[1].write).starts_with("Stopped simulated logging"),
        "{}",
        seen[1].write
    );
    for s in &seen {
        assert_eq!(text_of(&s.read), "The sum of 2 and 3 is 5.");
    }
}

/// A notes server (FastMCP's or the Python SDK's) in `dir`.
fn notes(python: String, script: &'static str) -> impl FnOnce(&Path) -> Upstream {
    move |dir| Upstream {
        command: vec![
            python,
            peer(repo_root().join(format!("peers/python/{script}"))),
            "--dir".into(),
            dir.to_string_lossy().into_owned(),
        ],
        env: String::new(),
        read: ("list_notes", "list_notes"),
        write: ("add_note", "add_note", "write"),
    }
}

fn fastmcp_python() -> String {
    peer(peers_dir().join("venv-fastmcp/bin/python"))
}

/// Both clients add a note each through `sc`'s gateway and read both back.
fn notes_are_added_once(sc: &Scenario) {
    let seen = both_clients_write_once(
        sc,
        |sdk| json!({"text": format!("note from {sdk:?}")}),
        json!({}),
        &[],
    );
    assert_eq!(
        seen[0].write["structuredContent"],
        json!({"added": "note from Python", "count": 1})
    );
    assert_eq!(
        seen[1].write["structuredContent"],
        json!({"added": "note from Node", "count": 2})
    );
    assert_eq!(
        seen[1].read["structuredContent"],
        json!({"notes": ["note from Python", "note from Node"]})
    );
    assert_eq!(
        std::fs::read_to_string(sc.dir.join("notes.txt")).expect("notes"),
        "note from Python\nnote from Node\n"
    );
}

#[test]
fn fastmcp_binds_list_notes_and_add_note() {
    let sc = Scenario::new("fastmcp", notes(fastmcp_python(), "notes_fastmcp.py"), "");
    notes_are_added_once(&sc);
}

#[test]
fn python_sdk_server_binds_list_notes_and_add_note() {
    let sc = Scenario::new("python-sdk", notes(python(), "notes_sdk.py"), "");
    notes_are_added_once(&sc);
}

/// A real upstream's schemas the profile refuses: FastMCP's `default` and its wrapped result
/// (`x-fastmcp-wrap-result`), the Python SDK's `default`; each named at its binding with the
/// pointer and the reason, and with `-v` the listed JSON there. Nothing is called.
#[test]
fn real_schemas_outside_the_profile_are_named_exactly() {
    let sc = Scenario::new(
        "fastmcp-refused",
        |dir| Upstream {
            read: ("search_notes", "search_notes"),
            write: ("count_notes", "count_notes", "write"),
            ..notes(fastmcp_python(), "notes_fastmcp.py")(dir)
        },
        "",
    );
    let file = sc.config();
    let search = format!(
        "  {file}:{}: reads.search_notes.tool: upstream \"up\" tool \"search_notes\" at /inputSchema/properties/limit/default: keyword outside purra.output-schema/v1 (mcp_schema_unsupported)",
        sc.line_of("tool = \"search_notes\"")
    );
    let count = format!(
        "  {file}:{}: writes.count_notes.tool: upstream \"up\" tool \"count_notes\" at /outputSchema/x-fastmcp-wrap-result: keyword outside purra.output-schema/v1 (mcp_schema_unsupported)",
        sc.line_of("tool = \"count_notes\"")
    );
    let out = sc.check(false);
    assert_eq!(out.status.code(), Some(78));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    assert_eq!(
        own_lines(&out.stderr),
        [
            "purra: the configuration has 2 mistakes:".to_owned(),
            search.clone(),
            count.clone()
        ]
    );
    // -v: the listed JSON around each place (purra's trace lines are around it on stderr).
    let out = sc.check(true);
    assert_eq!(out.status.code(), Some(78));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let block = format!(
        "purra: the configuration has 2 mistakes:\n{search}\n      the listed JSON there: {{\"default\":10,\"type\":\"integer\"}}\n{count}\n      the listed JSON there: {{\"properties\":{{\"result\":{{\"type\":\"integer\"}}}},\"required\":[\"result\"],\"type\":\"object\",\"x-fastmcp-wrap-result\":true}}\n"
    );
    assert!(stderr.contains(&block), "{stderr}");
    // Also at start, the same mistakes, and nothing served or called.
    let out = purra(&["gateway", "--config", &file]);
    assert_eq!(out.status.code(), Some(78));
    assert_eq!(
        own_lines(&out.stderr),
        [
            "purra: the configuration has 2 mistakes:".to_owned(),
            search,
            count
        ]
    );
    assert_eq!(sc.calls("search_notes") + sc.calls("count_notes"), 0);

    // The Python SDK's generated schema for the same signature.
    let sdk = Scenario::new(
        "python-sdk-refused",
        |dir| Upstream {
            read: ("search_notes", "search_notes"),
            ..notes(python(), "notes_sdk.py")(dir)
        },
        "",
    );
    let out = sdk.check(false);
    assert_eq!(out.status.code(), Some(78));
    assert_eq!(
        own_lines(&out.stderr),
        [
            "purra: the configuration has 1 mistake:".to_owned(),
            format!(
                "  {}:{}: reads.search_notes.tool: upstream \"up\" tool \"search_notes\" at /inputSchema/properties/limit/default: keyword outside purra.output-schema/v1 (mcp_schema_unsupported)",
                sdk.config(),
                sdk.line_of("tool = \"search_notes\"")
            ),
        ]
    );
}

/// docs/src/gateway/clients.md's stdio snippet (the Claude Desktop block, the same `command` and `args` the
/// other clients' stdio snippets give) over docs/src/examples/official-servers.toml: the Python SDK
/// client starts `purra` from PATH with exactly the snippet's arguments (the file's path put in
/// place of the placeholder, /srv/notes in the sample made a fresh folder), lists the five bound
/// tools and reads a file through the official filesystem server. npx finds the pinned reference
/// servers in a `node_modules` beside the file, offline, as it would after a first download.
#[test]
fn the_documented_stdio_snippet_starts_the_gateway_over_the_official_servers() {
    let root = repo_root();
    let guide = std::fs::read_to_string(root.join("docs/src/gateway/clients.md"))
        .expect("docs/src/gateway/clients.md");
    let after = guide
        .split("<!-- stdio-snippet")
        .nth(1)
        .expect("the stdio-snippet marker");
    let block = after
        .split("```json\n")
        .nth(1)
        .and_then(|b| b.split("\n```").next())
        .expect("the snippet's JSON block");
    let snippet: Value = serde_json::from_str(block).expect("the snippet is JSON");
    let server = &snippet["mcpServers"]["purra"];
    assert_eq!(server["command"], "purra");
    let placeholder = "/absolute/path/to/gateway.toml";

    let dir = fresh_dir("real", "snippet");
    let notes = dir.join("notes");
    std::fs::create_dir_all(&notes).expect("notes");
    std::fs::write(notes.join("hello.txt"), "hello from the notes\n").expect("a note");
    std::os::unix::fs::symlink(
        root.join("peers/node/node_modules"),
        dir.join("node_modules"),
    )
    .expect("node_modules");
    let sample = std::fs::read_to_string(root.join("docs/src/examples/official-servers.toml"))
        .expect("the sample gateway file");
    assert!(
        sample.contains("\"/srv/notes\""),
        "the sample names /srv/notes"
    );
    let config = dir.join("gateway.toml");
    std::fs::write(
        &config,
        sample.replace("/srv/notes", &notes.to_string_lossy()),
    )
    .expect("config");
    let args: Vec<String> = server["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| {
            let a = a.as_str().expect("a string");
            if a == placeholder {
                config.to_string_lossy().into_owned()
            } else {
                a.to_owned()
            }
        })
        .collect();
    assert!(
        args.iter().any(|a| *a == config.to_string_lossy()),
        "{args:?}"
    );

    let bin_dir = Path::new(purra_bin()).parent().expect("bin dir").to_owned();
    let path = format!(
        "{}:{}:{}",
        bin_dir.display(),
        peers_dir().join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let file = notes.join("hello.txt").to_string_lossy().into_owned();
    let steps = json!([{"list": true}, {"call": "read_text_file", "args": {"path": file}}]);
    let out = Command::new(python())
        .arg(peer(root.join("peers/python/gateway_client.py")))
        .args(["--steps", &steps.to_string(), "--", "purra"])
        .args(&args)
        .current_dir(&dir)
        .env("PATH", path)
        .env("npm_config_offline", "true")
        .stdin(Stdio::null())
        .output()
        .expect("run the Python SDK client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let docs: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let list = docs.iter().find(|d| d["step"] == "list").expect("the list");
    let mut names: Vec<&str> = list["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().expect("a name"))
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "create_entities",
            "list_directory",
            "read_graph",
            "read_text_file",
            "write_file"
        ]
    );
    let call = docs.iter().find(|d| d["step"] == "call").expect("the call");
    assert_eq!(
        call["result"]["structuredContent"],
        json!({"content": "hello from the notes\n"}),
        "{call}"
    );
    assert!(docs.iter().any(|d| d["event"] == "done"));
    let _ = std::fs::remove_dir_all(&dir);
}
