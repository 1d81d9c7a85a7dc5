//! The Skills extension (SEP-2640) with the official SDKs, over real stdio pipes and Streamable
//! HTTP, in both eras: purra's client reads the skills of the TypeScript SDK 2.4.0's
//! `ext/skills` server (`peers/node-v2/skills_server.mjs`) and of an rmcp 3.11.0 `SkillCatalog`
//! server (`consumers/rmcp-skills`, built here), every file verified against its entry; the
//! TypeScript SDK's `SkillsClient` (`peers/node-v2/skills_client.mjs`) reads purra's
//! (`purra-skills-server`), verifying every file itself. All three serve the same folder,
//! `peers/skills`, and every entry must be the one purra computes from it.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use purra_protocol::skills::{load_dir, Skill, SkillsDirOptions};
use purra_protocol::stdio::StdioCommand;
use purra_protocol::{Client, ClientOptions, Connection, Error, ProtocolMode};
use serde_json::Value;

use crate::support;
use support::*;

fn skills_dir() -> PathBuf {
    repo_root().join("peers/skills")
}

/// What purra computes from the folder: the entries and every file's bytes.
fn expected() -> (Vec<Value>, std::collections::BTreeMap<String, Vec<u8>>) {
    let loaded = load_dir(&skills_dir(), &SkillsDirOptions::default()).unwrap();
    let entries = loaded
        .skills
        .iter()
        .map(|s| serde_json::to_value(s).unwrap())
        .collect();
    (entries, loaded.files)
}

fn modes() -> [ProtocolMode; 2] {
    [
        ProtocolMode::Legacy,
        ProtocolMode::Pinned("2026-07-28".into()),
    ]
}

/// Everything purra's client does with a skills server: the listing equals purra's own
/// computation, every entry comes back from `skills/get`, every file reads and verifies with the
/// folder's bytes, each skill's folder lists its children, an unknown skill is -32602.
async fn read_everything(conn: &Connection, label: &str) {
    let (entries, files) = expected();
    assert!(conn.serves_skills(), "{label}");
    let listed: Vec<Value> = conn
        .skills()
        .iter()
        .map(|s| serde_json::to_value(s).unwrap())
        .collect();
    assert_eq!(listed, entries, "{label}");
    for skill in conn.skills().iter() {
        let got: Skill = conn.get_skill(&skill.uri).await.unwrap();
        assert_eq!(&got, skill, "{label}");
        for f in skill.files() {
            let read = conn.read_skill(skill, &f.uri).await.unwrap();
            assert!(read.verified, "{label}: {}", f.uri);
            assert_eq!(read.bytes, files[&f.uri], "{label}: {}", f.uri);
        }
        let md = conn.read_skill(skill, "SKILL.md").await.unwrap();
        assert!(md.body.as_deref().unwrap().starts_with("# "), "{label}");
    }
    let children: Vec<(String, Option<String>)> = conn
        .read_skill_directory("skill://pdf-processing")
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.uri, r.mime_type))
        .collect();
    let dir = Some("inode/directory".to_owned());
    assert_eq!(
        children,
        [
            (
                "skill://pdf-processing/SKILL.md".to_owned(),
                Some("text/markdown".to_owned())
            ),
            ("skill://pdf-processing/references".to_owned(), dir.clone()),
            ("skill://pdf-processing/templates".to_owned(), dir),
        ],
        "{label}"
    );
    match conn.get_skill("skill://not-served/SKILL.md").await {
        Err(Error::Rpc(e)) => assert_eq!(e.code.0, -32602, "{label}"),
        other => panic!("{label}: {other:?}"),
    }
    let skill = &conn.skills()[0];
    assert!(
        matches!(
            conn.read_skill(skill, "../elsewhere/SKILL.md").await,
            Err(Error::SkillVerification { .. })
        ),
        "{label}"
    );
}

async fn over_stdio(program: PathBuf, args: Vec<String>, mode: ProtocolMode) -> Connection {
    let cmd = StdioCommand::new(program).args(args);
    tokio::time::timeout(
        Duration::from_secs(60),
        Client::connect_stdio(cmd, ClientOptions::default().mode(mode)),
    )
    .await
    .expect("connected in time")
    .expect("connected")
}

#[tokio::test]
async fn purra_client_reads_the_typescript_sdk_server_over_stdio() {
    for mode in modes() {
        let conn = over_stdio(
            node(),
            vec![
                script("node-v2/skills_server.mjs"),
                skills_dir().display().to_string(),
            ],
            mode.clone(),
        )
        .await;
        assert_eq!(conn.server_info().name, "fixture-node-skills");
        read_everything(&conn, &format!("typescript stdio {mode:?}")).await;
        conn.close().await;
    }
}

#[tokio::test]
async fn purra_client_reads_the_typescript_sdk_server_over_http() {
    let mut cmd = Command::new(node());
    cmd.args([
        script("node-v2/skills_server.mjs"),
        skills_dir().display().to_string(),
        "--http".into(),
    ]);
    let server = http_server(cmd, |port| port.to_string());
    for mode in modes() {
        let conn = Client::connect_http(
            &server.url,
            purra_protocol::HttpClientOptions::default(),
            ClientOptions::default().mode(mode.clone()),
        )
        .await
        .unwrap();
        read_everything(&conn, &format!("typescript http {mode:?}")).await;
        conn.close().await;
    }
}

/// Builds the rmcp 3.11.0 skills server (its own workspace and lock, its own target folder so
/// it never waits on the workspace's build) and returns its path.
fn rmcp_server() -> PathBuf {
    let root = repo_root();
    let target = root.join("target/rmcp-skills");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--quiet", "--locked", "--manifest-path"])
        .arg(root.join("consumers/rmcp-skills/Cargo.toml"))
        .arg("--target-dir")
        .arg(&target);
    let out = run(cmd, Duration::from_secs(900));
    assert!(
        out.status.success(),
        "building consumers/rmcp-skills failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    target.join("debug/rmcp-skills-server")
}

#[tokio::test]
async fn purra_client_reads_the_rmcp_server() {
    let program = rmcp_server();
    for mode in modes() {
        let conn = over_stdio(
            program.clone(),
            vec![skills_dir().display().to_string()],
            mode.clone(),
        )
        .await;
        assert_eq!(conn.server_info().name, "fixture-rmcp-skills");
        read_everything(&conn, &format!("rmcp stdio {mode:?}")).await;
        conn.close().await;
    }
}

/// A file as the client prints it: URI, size, digest.
type FileLine = (String, usize, String);

/// What the TypeScript SDK's client prints after its revision line against purra's server.
fn typescript_client_lines() -> Vec<String> {
    let (entries, files) = expected();
    let hello_md = "---\nname: purra-hello\ndescription: Greets in the house style\n---\n# Hello\n\nGreet with [the greeting](greeting.txt).\n";
    let greeting = "Hello from purra.\n";
    let mut skills: Vec<(String, String, Vec<FileLine>)> = entries
        .iter()
        .map(|e| {
            let files = e["resources"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| {
                    let uri = f["uri"].as_str().unwrap().to_owned();
                    let size = files[&uri].len();
                    (uri, size, f["digest"].as_str().unwrap().to_owned())
                })
                .collect();
            (
                e["uri"].as_str().unwrap().to_owned(),
                e["frontmatter"]["name"].as_str().unwrap().to_owned(),
                files,
            )
        })
        .collect();
    skills.push((
        "skill://purra-hello/SKILL.md".into(),
        "purra-hello".into(),
        vec![
            (
                "skill://purra-hello/SKILL.md".into(),
                hello_md.len(),
                purra_protocol::skills::digest(hello_md.as_bytes()),
            ),
            (
                "skill://purra-hello/greeting.txt".into(),
                greeting.len(),
                purra_protocol::skills::digest(greeting.as_bytes()),
            ),
        ],
    ));
    let mut out = vec!["ok declared".to_owned()];
    for (uri, name, files) in &skills {
        let bytes: usize = files.iter().map(|f| f.1).sum();
        out.push(format!("skill {uri} {name} {} {bytes}", files.len()));
    }
    out.push("ok list".into());
    out.push("ok get".into());
    for (_, _, files) in &skills {
        for (uri, size, digest) in files {
            out.push(format!("file {uri} {size} {digest}"));
        }
    }
    out.push("ok read".into());
    for line in [
        "child skill://acme/refunds/SKILL.md text/markdown",
        "child skill://acme/refunds/examples inode/directory",
        "child skill://pdf-processing/SKILL.md text/markdown",
        "child skill://pdf-processing/references inode/directory",
        "child skill://pdf-processing/templates inode/directory",
        "child skill://purra-hello/SKILL.md text/markdown",
        "child skill://purra-hello/greeting.txt text/plain",
        "ok directory",
        "ok unknown",
        "ok outside",
        "skills-client: 7 passed, 0 failed",
    ] {
        out.push(line.into());
    }
    out
}

fn assert_typescript_client(target: &[String], modern: bool) {
    let mut cmd = Command::new(node());
    cmd.arg(script("node-v2/skills_client.mjs"));
    if modern {
        cmd.arg("--modern");
    }
    cmd.args(target);
    let out = run(cmd, Duration::from_secs(120));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines = stdout.lines();
    let version = if modern { "2026-07-28" } else { "2025-11-25" };
    assert_eq!(lines.next(), Some(format!("protocol {version}").as_str()));
    assert_eq!(lines.collect::<Vec<_>>(), typescript_client_lines());
}

fn purra_skills_server() -> Vec<String> {
    vec![
        env!("CARGO_BIN_EXE_purra-skills-server").to_owned(),
        skills_dir().display().to_string(),
    ]
}

#[test]
fn typescript_sdk_client_reads_purras_server_over_stdio() {
    let mut target = vec!["--".to_owned()];
    target.extend(purra_skills_server());
    assert_typescript_client(&target, false);
    assert_typescript_client(&target, true);
}

#[test]
fn typescript_sdk_client_reads_purras_server_over_http() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_purra-skills-server"));
    cmd.arg(skills_dir());
    cmd.arg("--http");
    let server = http_server(cmd, |port| format!("127.0.0.1:{port}"));
    assert_typescript_client(std::slice::from_ref(&server.url), false);
    assert_typescript_client(std::slice::from_ref(&server.url), true);
}
