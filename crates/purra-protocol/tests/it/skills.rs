//! The Skills extension (SEP-2640) over the in-memory transport: the server's answers as exact
//! JSON in both eras, and purra's client reading them, verifying every file and refusing what
//! does not match its entry.

use crate::support::{ask, initialized, start};

use std::time::Duration;

use purra_protocol::memory;
use purra_protocol::skills::{digest, Skill, SkillBundle};
use purra_protocol::types::*;
use purra_protocol::{
    Client, ClientOptions, Connection, Error, HandlerResult, RegistrationError, RequestCtx, Server,
};
use serde_json::{json, Value};

const MD: &str = "---\nname: refunds\ndescription: Process refunds\nmetadata:\n  version: \"2\"\n---\n# Refunds\nSee [the email](examples/email.md).\n";
const EMAIL: &str = "Dear customer,\n";
const GIT: &str = "---\nname: git-workflow\ndescription: Commit like us\n---\nRebase.\n";

fn skills_server() -> Server {
    let server = Server::builder("skills", "1").build();
    server
        .add_skill(
            SkillBundle::new("acme/refunds")
                .file("SKILL.md", MD)
                .file("examples/email.md", EMAIL)
                .file("bin/logo.png", vec![0x89, b'P', b'N', b'G', 0xff]),
        )
        .unwrap()
        .add_skill(SkillBundle::new("git-workflow").file("SKILL.md", GIT))
        .unwrap();
    server
}

fn d(s: &[u8]) -> String {
    digest(s)
}

fn refunds_entry() -> Value {
    json!({
        "uri": "skill://acme/refunds/SKILL.md",
        "frontmatter": {"name": "refunds", "description": "Process refunds", "metadata": {"version": "2"}},
        "resources": [
            {"uri": "skill://acme/refunds/SKILL.md", "digest": d(MD.as_bytes()), "size": MD.len()},
            {"uri": "skill://acme/refunds/bin/logo.png", "digest": d(&[0x89, b'P', b'N', b'G', 0xff]), "size": 5},
            {"uri": "skill://acme/refunds/examples/email.md", "digest": d(EMAIL.as_bytes()), "size": EMAIL.len()},
        ]
    })
}

fn git_entry() -> Value {
    json!({
        "uri": "skill://git-workflow/SKILL.md",
        "frontmatter": {"name": "git-workflow", "description": "Commit like us"},
        "resources": [{"uri": "skill://git-workflow/SKILL.md", "digest": d(GIT.as_bytes()), "size": GIT.len()}]
    })
}

fn v(s: &str) -> Value {
    serde_json::from_str(s).unwrap()
}

#[tokio::test]
async fn a_handshake_session_lists_gets_reads_and_walks_skills() {
    let server = skills_server();
    let mut raw = start(&server).await;
    let init = ask(&mut raw, r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#).await;
    assert_eq!(
        v(&init)["result"]["capabilities"],
        json!({"resources": {"listChanged": true, "subscribe": true},
               "extensions": {"io.modelcontextprotocol/skills": {"directoryRead": true}}})
    );
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await;

    let got = ask(
        &mut raw,
        r#"{"jsonrpc":"2.0","id":1,"method":"skills/list","params":{}}"#,
    )
    .await;
    assert_eq!(
        v(&got),
        json!({"jsonrpc": "2.0", "id": 1, "result": {"skills": [refunds_entry(), git_entry()]}})
    );

    let got = ask(&mut raw, r#"{"jsonrpc":"2.0","id":2,"method":"skills/get","params":{"uri":"skill://git-workflow/SKILL.md"}}"#).await;
    assert_eq!(
        v(&got),
        json!({"jsonrpc": "2.0", "id": 2, "result": {"skill": git_entry()}})
    );
    let got = ask(&mut raw, r#"{"jsonrpc":"2.0","id":3,"method":"skills/get","params":{"uri":"skill://nope/SKILL.md"}}"#).await;
    assert_eq!(
        got,
        r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"No skill is served at skill://nope/SKILL.md"}}"#
    );

    let got = ask(
        &mut raw,
        r#"{"jsonrpc":"2.0","id":4,"method":"resources/list"}"#,
    )
    .await;
    assert_eq!(
        v(&got)["result"],
        json!({"resources": [
            {"uri": "skill://acme/refunds/SKILL.md", "name": "refunds", "description": "Process refunds", "mimeType": "text/markdown", "size": MD.len()},
            {"uri": "skill://git-workflow/SKILL.md", "name": "git-workflow", "description": "Commit like us", "mimeType": "text/markdown", "size": GIT.len()},
        ]})
    );

    let got = ask(&mut raw, r#"{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":"skill://acme/refunds/SKILL.md"}}"#).await;
    assert_eq!(
        v(&got)["result"],
        json!({"contents": [{"uri": "skill://acme/refunds/SKILL.md", "mimeType": "text/markdown", "text": MD}]})
    );
    let got = ask(&mut raw, r#"{"jsonrpc":"2.0","id":6,"method":"resources/read","params":{"uri":"skill://acme/refunds/bin/logo.png"}}"#).await;
    assert_eq!(
        v(&got)["result"],
        json!({"contents": [{"uri": "skill://acme/refunds/bin/logo.png", "mimeType": "image/png", "blob": "iVBOR/8="}]})
    );
    let got = ask(&mut raw, r#"{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{"uri":"skill://acme/refunds/examples"}}"#).await;
    assert_eq!(
        got,
        r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32002,"message":"skill://acme/refunds/examples is a folder of a skill; list it with resources/directory/read","data":{"uri":"skill://acme/refunds/examples"}}}"#
    );

    let got = ask(&mut raw, r#"{"jsonrpc":"2.0","id":8,"method":"resources/directory/read","params":{"uri":"skill://acme/refunds"}}"#).await;
    assert_eq!(
        v(&got)["result"],
        json!({"resources": [
            {"uri": "skill://acme/refunds/SKILL.md", "name": "SKILL.md", "mimeType": "text/markdown", "size": MD.len()},
            {"uri": "skill://acme/refunds/bin", "name": "bin", "mimeType": "inode/directory"},
            {"uri": "skill://acme/refunds/examples", "name": "examples", "mimeType": "inode/directory"},
        ]})
    );
    let got = ask(&mut raw, r#"{"jsonrpc":"2.0","id":9,"method":"resources/directory/read","params":{"uri":"skill://acme/refunds/examples"}}"#).await;
    assert_eq!(
        v(&got)["result"],
        json!({"resources": [{"uri": "skill://acme/refunds/examples/email.md", "name": "email.md", "mimeType": "text/markdown", "size": EMAIL.len()}]})
    );
    let got = ask(&mut raw, r#"{"jsonrpc":"2.0","id":10,"method":"resources/directory/read","params":{"uri":"skill://acme/refunds/SKILL.md"}}"#).await;
    assert_eq!(
        got,
        r#"{"jsonrpc":"2.0","id":10,"error":{"code":-32602,"message":"skill://acme/refunds/SKILL.md is not a folder of a skill this server serves"}}"#
    );
}

#[tokio::test]
async fn pages_split_between_entries_and_resources_follow_the_registered_ones() {
    let server = Server::builder("skills", "1").page_size(1).build();
    server.resource(Resource::new("m://a", "a"), |uri, _c| async move {
        HandlerResult::Ok(ReadResourceResult::text(uri, "A"))
    });
    server
        .add_skill(SkillBundle::new("acme/refunds").file("SKILL.md", MD))
        .unwrap()
        .add_skill(SkillBundle::new("git-workflow").file("SKILL.md", GIT))
        .unwrap();
    let mut raw = initialized(&server, "2025-11-25").await;
    let got = ask(
        &mut raw,
        r#"{"jsonrpc":"2.0","id":1,"method":"skills/list"}"#,
    )
    .await;
    assert_eq!(
        v(&got)["result"]["skills"][0]["uri"],
        "skill://acme/refunds/SKILL.md"
    );
    assert_eq!(v(&got)["result"]["nextCursor"], "purra-1");
    let got = ask(
        &mut raw,
        r#"{"jsonrpc":"2.0","id":2,"method":"skills/list","params":{"cursor":"purra-1"}}"#,
    )
    .await;
    assert_eq!(
        v(&got),
        json!({"jsonrpc": "2.0", "id": 2, "result": {"skills": [git_entry()]}})
    );
    let mut uris = Vec::new();
    let mut cursor = String::new();
    for id in 3..8 {
        let params = if cursor.is_empty() {
            "{}".to_owned()
        } else {
            format!(r#"{{"cursor":"{cursor}"}}"#)
        };
        let got = v(&ask(
            &mut raw,
            &format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"resources/list","params":{params}}}"#
            ),
        )
        .await);
        for r in got["result"]["resources"].as_array().unwrap() {
            uris.push(r["uri"].as_str().unwrap().to_owned());
        }
        match got["result"]["nextCursor"].as_str() {
            Some(c) => cursor = c.to_owned(),
            None => break,
        }
    }
    assert_eq!(
        uris,
        [
            "m://a",
            "skill://acme/refunds/SKILL.md",
            "skill://git-workflow/SKILL.md"
        ]
    );
}

#[tokio::test]
async fn a_server_without_skills_declares_nothing_and_knows_no_method() {
    let server = Server::builder("plain", "1").build();
    let mut raw = initialized(&server, "2025-11-25").await;
    for (id, m) in [
        (1, "skills/list"),
        (2, "skills/get"),
        (3, "resources/directory/read"),
    ] {
        assert_eq!(
            ask(&mut raw, &format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{m}","params":{{"uri":"skill://a/SKILL.md"}}}}"#)).await,
            format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32601,"message":"Method not found: {m}"}}}}"#)
        );
    }
    assert_eq!(
        Server::builder("x", "1")
            .extension("io.modelcontextprotocol/skills", Default::default())
            .unwrap_err(),
        RegistrationError::InvalidExtension("io.modelcontextprotocol/skills".into())
    );
}

const META_BARE: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}}"#;

#[tokio::test]
async fn the_modern_era_adds_its_members() {
    let server = skills_server();
    let mut raw = start(&server).await;
    let got = v(&ask(
        &mut raw,
        &format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{{{META_BARE}}}}}"#
        ),
    )
    .await);
    assert_eq!(
        got["result"]["capabilities"]["extensions"],
        json!({"io.modelcontextprotocol/skills": {"directoryRead": true}})
    );
    let info = json!({"io.modelcontextprotocol/serverInfo": {"name": "skills", "version": "1"}});
    let got = v(&ask(
        &mut raw,
        &format!(r#"{{"jsonrpc":"2.0","id":2,"method":"skills/list","params":{{{META_BARE}}}}}"#),
    )
    .await);
    assert_eq!(
        got["result"],
        json!({"skills": [refunds_entry(), git_entry()], "resultType": "complete", "_meta": info, "ttlMs": 0, "cacheScope": "private"})
    );
    let got = v(&ask(&mut raw, &format!(r#"{{"jsonrpc":"2.0","id":3,"method":"skills/get","params":{{"uri":"skill://git-workflow/SKILL.md",{META_BARE}}}}}"#)).await);
    assert_eq!(
        got["result"],
        json!({"skill": git_entry(), "resultType": "complete", "_meta": info, "ttlMs": 0, "cacheScope": "private"})
    );
    let got = ask(&mut raw, &format!(r#"{{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{{"uri":"skill://acme/refunds/bin",{META_BARE}}}}}"#)).await;
    assert_eq!(
        got,
        r#"{"jsonrpc":"2.0","id":4,"error":{"code":-32602,"message":"skill://acme/refunds/bin is a folder of a skill; list it with resources/directory/read","data":{"uri":"skill://acme/refunds/bin"}}}"#
    );
    let got = v(&ask(&mut raw, &format!(r#"{{"jsonrpc":"2.0","id":5,"method":"resources/directory/read","params":{{"uri":"skill://acme/refunds/bin",{META_BARE}}}}}"#)).await);
    assert_eq!(
        got["result"],
        json!({"resources": [{"uri": "skill://acme/refunds/bin/logo.png", "name": "logo.png", "mimeType": "image/png", "size": 5}],
               "resultType": "complete", "_meta": info, "ttlMs": 0, "cacheScope": "private"})
    );
}

#[tokio::test]
async fn a_reader_is_checked_against_its_entry_before_anything_is_sent() {
    let server = Server::builder("proxy", "1").build();
    let (entry, _) = SkillBundle::new("git-workflow")
        .file("SKILL.md", GIT)
        .build()
        .unwrap();
    let served = std::sync::Arc::new(std::sync::Mutex::new(GIT.to_owned()));
    let s2 = served.clone();
    server
        .add_skill_with(entry.clone(), move |uri, _c: RequestCtx| {
            let text = s2.lock().unwrap().clone();
            async move {
                assert_eq!(uri, "skill://git-workflow/SKILL.md");
                HandlerResult::Ok(text.into_bytes())
            }
        })
        .unwrap();
    let mut raw = initialized(&server, "2025-11-25").await;
    let read = r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"skill://git-workflow/SKILL.md"}}"#;
    assert_eq!(
        v(&ask(&mut raw, read).await)["result"]["contents"][0]["text"],
        GIT
    );
    *served.lock().unwrap() = GIT.replace("Rebase", "Merge!");
    assert_eq!(
        ask(&mut raw, &read.replace("\"id\":1", "\"id\":2")).await,
        format!(
            r#"{{"jsonrpc":"2.0","id":2,"error":{{"code":-32603,"message":"skill://git-workflow/SKILL.md no longer matches its skill's entry ({} bytes, {}); it is not served"}}}}"#,
            GIT.len(),
            d(GIT.as_bytes())
        )
    );
    let mut dynamic = entry.clone();
    dynamic.resources = purra_protocol::skills::SkillResources::Dynamic;
    let refused = server
        .add_skill_with(dynamic, |_u, _c: RequestCtx| async {
            HandlerResult::Ok(Vec::new())
        })
        .map(|_| ())
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "the skill skill://git-workflow/SKILL.md cannot be served: \"dynamic\" skills are not served: every file a purra server serves is checked against its entry's digest"
    );
}

async fn client_of(server: &Server, options: ClientOptions) -> Connection {
    let (c, s) = memory::pair();
    server.start(s);
    Client::connect(c, options).await.unwrap()
}

#[tokio::test]
async fn purras_client_lists_reads_and_verifies_in_both_eras() {
    for mode in [
        purra_protocol::ProtocolMode::Legacy,
        purra_protocol::ProtocolMode::Pinned("2026-07-28".into()),
    ] {
        let server = skills_server();
        let conn = client_of(&server, ClientOptions::default().mode(mode.clone())).await;
        assert!(conn.serves_skills());
        let skills = conn.skills();
        let got: Vec<Value> = skills
            .iter()
            .map(|s| serde_json::to_value(s).unwrap())
            .collect();
        assert_eq!(got, vec![refunds_entry(), git_entry()], "{mode:?}");
        let refunds = &skills[0];
        let md = conn.read_skill(refunds, "SKILL.md").await.unwrap();
        assert_eq!(md.text(), Some(MD));
        assert!(md.verified);
        assert_eq!(
            md.body.as_deref(),
            Some("# Refunds\nSee [the email](examples/email.md).\n")
        );
        let email = conn.read_skill(refunds, "examples/email.md").await.unwrap();
        assert_eq!((email.text(), email.body.as_deref()), (Some(EMAIL), None));
        let logo = conn
            .read_skill(refunds, "skill://acme/refunds/bin/logo.png")
            .await
            .unwrap();
        assert_eq!(logo.bytes, [0x89, b'P', b'N', b'G', 0xff]);
        assert_eq!(logo.mime_type.as_deref(), Some("image/png"));
        assert_eq!(
            conn.read_skill(refunds, "examples/other.md")
                .await
                .unwrap_err(),
            Error::SkillVerification {
                uri: "skill://acme/refunds/examples/other.md".into(),
                reason: "it is not a file of the skill skill://acme/refunds/SKILL.md".into()
            }
        );
        let got = conn
            .get_skill("skill://git-workflow/SKILL.md")
            .await
            .unwrap();
        assert_eq!(serde_json::to_value(&got).unwrap(), git_entry());
        assert_eq!(
            conn.read_skill_directory("skill://acme/refunds/examples")
                .await
                .unwrap(),
            vec![
                Resource::new("skill://acme/refunds/examples/email.md", "email.md")
                    .with_mime_type("text/markdown".to_owned())
                    .with_size(EMAIL.len() as u64)
            ]
        );
        match conn.get_skill("skill://nope/SKILL.md").await.unwrap_err() {
            Error::Rpc(e) => assert_eq!(e.code.0, -32602),
            e => panic!("{e:?}"),
        }

        // A skill added while connected: the listing follows (resources/list_changed).
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let _l = conn.on("notifications/resources/list_changed", move |_| {
            let _ = tx.send(());
        });
        server
            .add_skill(
                SkillBundle::new("zeta").file("SKILL.md", "---\nname: zeta\ndescription: z\n---\n"),
            )
            .unwrap();
        tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .unwrap();
        let names: Vec<String> = conn.skills().iter().map(|s| s.name().to_owned()).collect();
        assert_eq!(names, ["refunds", "git-workflow", "zeta"], "{mode:?}");
        assert!(server.remove_skill("skill://zeta/SKILL.md"));
        tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .unwrap();
        assert_eq!(conn.skills().len(), 2);
        conn.close().await;
    }
}

/// A server that answers `skills/list` with `entry` and `resources/read` with `text`.
async fn lying(entry: Value, text: &str) -> Connection {
    let (t, mut raw) = memory::raw();
    let text = text.to_owned();
    tokio::spawn(async move {
        while let Some(frame) = raw.recv().await {
            let req: Value = serde_json::from_str(&frame).unwrap();
            let id = req["id"].clone();
            let result = match req["method"].as_str().unwrap() {
                "initialize" => {
                    json!({"protocolVersion": "2025-11-25", "serverInfo": {"name": "liar", "version": "1"},
                    "capabilities": {"resources": {}, "extensions": {"io.modelcontextprotocol/skills": {}}}})
                }
                "resources/list" => json!({"resources": []}),
                "resources/templates/list" => json!({"resourceTemplates": []}),
                "skills/list" => json!({"skills": [entry]}),
                "resources/read" => {
                    json!({"contents": [{"uri": req["params"]["uri"], "text": text}]})
                }
                _ => continue,
            };
            raw.send(json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string())
                .await;
        }
    });
    Client::connect(t, ClientOptions::default()).await.unwrap()
}

#[tokio::test]
async fn what_does_not_match_its_entry_is_refused() {
    let entry = git_entry();
    let conn = lying(entry.clone(), &GIT.replace("Rebase", "Merge!")).await;
    let skill = conn.skills()[0].clone();
    assert_eq!(
        conn.read_skill(&skill, "SKILL.md").await.unwrap_err(),
        Error::SkillVerification {
            uri: "skill://git-workflow/SKILL.md".into(),
            reason: format!(
                "its digest is {}; the entry lists {}",
                d(GIT.replace("Rebase", "Merge!").as_bytes()),
                d(GIT.as_bytes())
            )
        }
    );
    let conn = lying(entry.clone(), &format!("{GIT}more")).await;
    assert_eq!(
        conn.read_skill(&conn.skills()[0], "SKILL.md").await.unwrap_err().to_string(),
        format!("the skill file skill://git-workflow/SKILL.md failed verification: it is {} bytes; the entry lists {}", GIT.len() + 4, GIT.len())
    );
    // The frontmatter is checked even where no digest can be: a dynamic skill.
    let mut dynamic = entry.clone();
    dynamic["resources"] = json!("dynamic");
    let conn = lying(dynamic, &GIT.replace("Commit like us", "Commit like them")).await;
    let skill: Skill = conn.skills()[0].clone();
    assert_eq!(
        conn.read_skill(&skill, "SKILL.md").await.unwrap_err().to_string(),
        "the skill file skill://git-workflow/SKILL.md failed verification: its frontmatter differs from the entry's: description: the entry has \"Commit like us\", SKILL.md has \"Commit like them\""
    );
    assert_eq!(
        conn.read_skill(&skill, "../other/SKILL.md").await.unwrap_err().to_string(),
        "the skill file ../other/SKILL.md failed verification: it is not a file of the skill skill://git-workflow/SKILL.md"
    );
    let conn = lying(dynamic_ok(), GIT).await;
    let got = conn
        .read_skill(&conn.skills()[0], "SKILL.md")
        .await
        .unwrap();
    assert!(!got.verified);
    // An invalid entry fails the listing, naming it.
    let mut bad = entry;
    bad["frontmatter"]["name"] = json!("other");
    let (t, mut raw) = memory::raw();
    tokio::spawn(async move {
        while let Some(frame) = raw.recv().await {
            let req: Value = serde_json::from_str(&frame).unwrap();
            let result = match req["method"].as_str().unwrap() {
                "initialize" => {
                    json!({"protocolVersion": "2025-11-25", "serverInfo": {"name": "liar", "version": "1"},
                    "capabilities": {"extensions": {"io.modelcontextprotocol/skills": {}}}})
                }
                "skills/list" => json!({"skills": [bad, {"uri": 5}]}),
                _ => continue,
            };
            raw.send(json!({"jsonrpc": "2.0", "id": req["id"], "result": result}).to_string())
                .await;
        }
    });
    assert_eq!(
        Client::connect(t, ClientOptions::default()).await.unwrap_err().to_string(),
        "protocol violation: skills/list returned invalid skill entries: #0 skill://git-workflow/SKILL.md: frontmatter name \"other\" must equal the skill's folder name \"git-workflow\" | #1: invalid type: integer `5`, expected a string"
    );
}

fn dynamic_ok() -> Value {
    let mut e = git_entry();
    e["resources"] = json!("dynamic");
    e
}
