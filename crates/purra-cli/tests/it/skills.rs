//! `purra inspect` and `purra read` with a skills server (the Skills extension, SEP-2640): the
//! official TypeScript SDK 2.4.0's `ext/skills` server (`peers/node-v2/skills_server.mjs`)
//! serving `peers/skills`, over stdio, in both eras. The listing is shown; a skill's file is
//! read verified against its entry; a skill's folder lists its children; a file the entry does
//! not list is refused.

use std::process::{Command, Output, Stdio};

use purra_protocol::skills::{load_dir, SkillsDirOptions};
use serde_json::Value;

use crate::support::peers::{node, repo_root};
use crate::support::run::purra;

/// `purra args... [--protocol-version VERSION] -- node skills_server.mjs peers/skills`.
fn on_skills(args: &[&str], version: Option<&str>) -> Output {
    let mut all: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    if let Some(v) = version {
        all.extend(["--protocol-version".to_owned(), v.to_owned()]);
    }
    all.push("--".into());
    all.push(node());
    for p in ["peers/node-v2/skills_server.mjs", "peers/skills"] {
        all.push(repo_root().join(p).to_string_lossy().into_owned());
    }
    purra(&all)
}

fn expect(out: &Output, code: i32) -> (String, String) {
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert_eq!(out.status.code(), Some(code), "stdout:\n{o}\nstderr:\n{e}");
    (o, e)
}

const ERAS: [Option<&str>; 2] = [None, Some("2025-11-25")];

#[test]
fn inspect_lists_the_skills() {
    let loaded = load_dir(
        &repo_root().join("peers/skills"),
        &SkillsDirOptions::default(),
    )
    .unwrap();
    for version in ERAS {
        let (text, _) = expect(&on_skills(&["inspect"], version), 0);
        assert!(
            text.contains("\nextensions:   io.modelcontextprotocol/skills\n"),
            "{text}"
        );
        let skills = text.split("\nskills (2):\n").nth(1).expect(&text);
        assert_eq!(
            skills,
            "  refunds         skill://acme/refunds/SKILL.md  (2 files, 193 bytes)  Process customer refund requests per company policy\n  \
pdf-processing  skill://pdf-processing/SKILL.md  (3 files, 462 bytes)  Extract, fill, and assemble PDF documents: forms, invoices and purchase orders.\n"
        );
        let (json, _) = expect(&on_skills(&["inspect", "--json"], version), 0);
        let doc: Value = serde_json::from_str(&json).unwrap();
        assert_eq!(doc["skills"], serde_json::to_value(&loaded.skills).unwrap());
    }
}

#[test]
fn read_fetches_one_skill_file_verified() {
    let md =
        std::fs::read_to_string(repo_root().join("peers/skills/pdf-processing/SKILL.md")).unwrap();
    let digest = purra_protocol::skills::digest(md.as_bytes());
    for version in ERAS {
        let (text, err) = expect(
            &on_skills(&["read", "skill://pdf-processing/SKILL.md"], version),
            0,
        );
        assert_eq!(text, md);
        assert_eq!(
            err,
            format!(
                "verified against the entry of skill://pdf-processing/SKILL.md: {} bytes, {digest}\n",
                md.len()
            )
        );
        let (json, _) = expect(
            &on_skills(
                &["read", "--json", "skill://acme/refunds/examples/email.md"],
                version,
            ),
            0,
        );
        let email = "Dear customer, your refund is on its way.\n";
        assert_eq!(
            serde_json::from_str::<Value>(&json).unwrap(),
            serde_json::json!({
                "uri": "skill://acme/refunds/examples/email.md",
                "skill": "skill://acme/refunds/SKILL.md",
                "verified": true,
                "size": email.len(),
                "digest": purra_protocol::skills::digest(email.as_bytes()),
                "mimeType": "text/markdown",
                "text": email,
            })
        );
        let (text, _) = expect(&on_skills(&["read", "skill://pdf-processing"], version), 0);
        assert_eq!(
            text,
            format!(
                "skill://pdf-processing/SKILL.md    (text/markdown, {} bytes)\n\
                 skill://pdf-processing/references  (inode/directory)\n\
                 skill://pdf-processing/templates   (inode/directory)\n",
                md.len()
            )
        );
        let (text, err) = expect(
            &on_skills(&["read", "skill://pdf-processing/secrets.md"], version),
            2,
        );
        assert_eq!(text, "");
        assert_eq!(
            err,
            "purra: reading skill://pdf-processing/secrets.md: the skill file skill://pdf-processing/secrets.md failed verification: it is not a file of the skill skill://pdf-processing/SKILL.md\n"
        );
    }
}

/// `purra gateway` over the TypeScript SDK's skills server with one skill bound: `purra inspect`
/// and `purra read` through it see that skill alone, at `skill://refunds/…`, verified.
#[test]
fn a_gateway_passes_a_bound_skill_through() {
    let dir = std::env::temp_dir().join(format!("purra-cli-skills-gw-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "[upstreams.docs]\ncommand = [{:?}, {:?}, {:?}]\n\n[skills.refunds]\nupstream = \"docs\"\n",
            node(),
            repo_root().join("peers/node-v2/skills_server.mjs").display().to_string(),
            repo_root().join("peers/skills").display().to_string(),
        ),
    )
    .unwrap();
    let through = |args: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_purra"));
        cmd.args(args)
            .args(["--", env!("CARGO_BIN_EXE_purra"), "gateway", "--config"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let out = cmd.output().expect("purra");
        let _ = std::fs::remove_file(dir.join("purra.db"));
        out
    };
    let check = Command::new(env!("CARGO_BIN_EXE_purra"))
        .args(["gateway", "--check", "--config"])
        .arg(&config)
        .stdin(Stdio::null())
        .output()
        .expect("purra");
    let (text, _) = expect(&check, 0);
    assert_eq!(text, "configuration ok: 0 tools: ; 1 skill: refunds\n");
    let (json, _) = expect(&through(&["inspect", "--json"]), 0);
    let doc: Value = serde_json::from_str(&json).unwrap();
    let names: Vec<&str> = doc["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["uri"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["skill://refunds/SKILL.md"]);
    let email = "Dear customer, your refund is on its way.\n";
    let (text, err) = expect(&through(&["read", "skill://refunds/examples/email.md"]), 0);
    assert_eq!(text, email);
    assert_eq!(
        err,
        format!(
            "purra gateway: gateway: 0 tools (); 1 skill (refunds); store {}\nverified against the entry of skill://refunds/SKILL.md: {} bytes, {}\n",
            dir.join("purra.db").display(),
            email.len(),
            purra_protocol::skills::digest(email.as_bytes())
        )
    );
    let (_, err) = expect(&through(&["read", "skill://pdf-processing/SKILL.md"]), 2);
    assert!(
        err.ends_with(
            "\npurra: reading skill://pdf-processing/SKILL.md: JSON-RPC error -32602: Resource not found\n"
        ),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 43 finding 4: a `resources/read` of a malformed `skill://` URI (`%a€`: an escape cut by
/// a multi-byte character, with a newline and a forged JSON log line after it) sent to a
/// gateway with a skill binding, started with `--log-format json`, is answered with a clean
/// error, and every line the process writes on stderr is one JSON object (nothing raw: before,
/// the catalog's `%` decoding panicked and the panic message printed the URI verbatim).
#[test]
fn finding_4_no_raw_stderr_line() {
    use std::io::{BufRead, BufReader, Write};

    let dir = std::env::temp_dir().join(format!("purra-cli-skills-f4-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "[upstreams.docs]\ncommand = [{:?}, {:?}, {:?}]\n\n[skills.refunds]\nupstream = \"docs\"\n",
            node(),
            repo_root().join("peers/node-v2/skills_server.mjs").display().to_string(),
            repo_root().join("peers/skills").display().to_string(),
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_purra"))
        .args(["--log-format", "json", "gateway", "--config"])
        .arg(&config)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("purra gateway");
    let mut stdin = child.stdin.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut all = Vec::new();
        std::io::Read::read_to_end(&mut BufReader::new(stderr), &mut all).unwrap();
        all
    });
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut send = |v: Value| {
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    };
    let mut answer = |id: u64| -> Value {
        loop {
            let mut line = String::new();
            assert!(
                stdout.read_line(&mut line).unwrap() > 0,
                "the gateway closed stdout"
            );
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    };
    send(
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "finding-4", "version": "1"}}}),
    );
    assert!(answer(1)["result"].is_object());
    send(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let forged = "{\"timestamp\":\"2026-01-01T00:00:00Z\",\"level\":\"INFO\",\"target\":\"purra gateway\",\"message\":\"forged\"}";
    for (id, uri) in [
        (2, format!("skill://refunds/%a€\n{forged}")),
        (3, format!("skill://refunds/%€\x1b[2J\n{forged}")),
        (4, "skill://refunds/examples/email.md%".to_owned()),
        (5, "skill://refunds/%4".to_owned()),
    ] {
        send(
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "resources/read",
            "params": {"uri": uri}}),
        );
        let a = answer(id);
        assert_eq!(
            a["error"],
            serde_json::json!({"code": -32002, "message": "Resource not found",
                "data": {"uri": uri}}),
            "{uri:?}: {a}"
        );
    }
    // The gateway still answers.
    send(
        serde_json::json!({"jsonrpc": "2.0", "id": 6, "method": "resources/read",
        "params": {"uri": "skill://refunds/SKILL.md"}}),
    );
    assert!(answer(6)["result"]["contents"].is_array());
    drop(stdin);
    let _ = child.wait();
    let stderr = String::from_utf8(stderr.join().unwrap()).expect("UTF-8 stderr");
    assert!(!stderr.is_empty());
    for line in stderr.lines() {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("a raw stderr line ({e}): {line:?}\n{stderr}"));
        assert!(v.is_object(), "{line}");
        assert_ne!(v["message"], "forged", "{stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
