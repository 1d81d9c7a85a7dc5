//! Skill bindings (`[skills.NAME]`): only bound skills pass through, under `skill://NAME/…`,
//! their entries pinned at start; a file is answered only when the upstream's bytes are the
//! pinned entry's; what cannot be pinned is a start mistake at its binding. The upstream is a
//! purra server on loopback Streamable HTTP in this process, serving skills and no tool.

use purra_gateway::{load_str, Gateway, StartOptions};
use purra_protocol::skills::{digest, SkillBundle};
use purra_protocol::{
    Client, ClientOptions, Error, HttpServerConfig, Server, StreamableHttpServer,
};
use serde_json::{json, Value};

use crate::support::{serve_upstream, start_text};

const REFUNDS: &str =
    "---\nname: refunds\ndescription: Process refunds\n---\n# Refunds\nSee examples/email.md.\n";
const EMAIL: &str = "Dear customer,\n";
const GIT: &str = "---\nname: git-workflow\ndescription: Commit like us\n---\nRebase.\n";

fn refunds(email: &str) -> SkillBundle {
    SkillBundle::new("acme/refunds")
        .file("SKILL.md", REFUNDS)
        .file("examples/email.md", email.to_owned())
}

/// The upstream server (kept, to change its skills) and its URL.
async fn upstream() -> (Server, String) {
    let server = Server::builder("skills-upstream", "1.0.0").build();
    server
        .add_skill(refunds(EMAIL))
        .unwrap()
        .add_skill(SkillBundle::new("git-workflow").file("SKILL.md", GIT))
        .unwrap();
    let url = serve_upstream(server.clone(), std::future::pending()).await;
    (server, url)
}

async fn start(text: &str) -> Result<Gateway, Vec<String>> {
    start_text(text, StartOptions::default()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_skill_passes_through_pinned_and_nothing_else_does() {
    let (upstream, url) = upstream().await;
    let gateway = start(&format!(
        "[upstreams.docs]\nurl = \"{url}\"\n\n[skills.refunds]\nupstream = \"docs\"\n"
    ))
    .await
    .expect("starts");
    let (a, b) = purra_protocol::memory::pair();
    let server = gateway.server().clone();
    tokio::spawn(async move { server.serve(a).await });
    let conn = Client::connect(b, ClientOptions::default())
        .await
        .expect("connect");
    let listed: Vec<Value> = conn
        .skills()
        .iter()
        .map(|s| serde_json::to_value(s).unwrap())
        .collect();
    assert_eq!(
        listed,
        [json!({
            "uri": "skill://refunds/SKILL.md",
            "frontmatter": {"name": "refunds", "description": "Process refunds"},
            "resources": [
                {"uri": "skill://refunds/SKILL.md", "digest": digest(REFUNDS.as_bytes()), "size": REFUNDS.len()},
                {"uri": "skill://refunds/examples/email.md", "digest": digest(EMAIL.as_bytes()), "size": EMAIL.len()},
            ]
        })]
    );
    let skill = conn.skills()[0].clone();
    let md = conn.read_skill(&skill, "SKILL.md").await.unwrap();
    assert_eq!(md.text(), Some(REFUNDS));
    let email = conn.read_skill(&skill, "examples/email.md").await.unwrap();
    assert_eq!(email.text(), Some(EMAIL));
    assert_eq!(
        conn.resources()
            .iter()
            .map(|r| r.uri.as_str())
            .collect::<Vec<_>>(),
        ["skill://refunds/SKILL.md"]
    );
    // The upstream's other skill is not there, by either URI.
    for uri in [
        "skill://git-workflow/SKILL.md",
        "skill://acme/refunds/SKILL.md",
    ] {
        match conn.get_skill(uri).await {
            Err(Error::Rpc(e)) => assert_eq!(e.message, format!("No skill is served at {uri}")),
            other => panic!("{other:?}"),
        }
    }
    match conn.read_resource("skill://git-workflow/SKILL.md").await {
        Err(Error::Rpc(e)) => assert_eq!(e.code.0, -32002),
        other => panic!("{other:?}"),
    }
    // The upstream changes the skill: the pinned entry stays, and the changed file is refused
    // with the gateway's words (no upstream text); the unchanged one is still served.
    upstream
        .add_skill(refunds("Dear valued customer,\n"))
        .unwrap();
    match conn.read_skill(&skill, "examples/email.md").await {
        Err(Error::Rpc(e)) => assert_eq!(
            (e.code.0, e.message.as_str()),
            (-32603, "skill://refunds/examples/email.md changed upstream since the gateway pinned its skill; it is not served until the gateway restarts")
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        conn.read_skill(&skill, "SKILL.md").await.unwrap().text(),
        Some(REFUNDS)
    );
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_cannot_be_pinned_is_a_mistake_at_its_binding() {
    let (_upstream, url) = upstream().await;
    let Err(refused) = start(&format!(
        "[upstreams.docs]\nurl = \"{url}\"\n\n\
[skills.refunds]\nupstream = \"docs\"\nuri = \"skill://git-workflow/SKILL.md\"\n\n\
[skills.pdf]\nupstream = \"docs\"\n\n\
[skills.gone]\nupstream = \"docs\"\nuri = \"skill://gone/SKILL.md\"\n"
    ))
    .await
    else {
        panic!("started")
    };
    assert_eq!(
        refused,
        [
            "g.toml:6: skills.refunds.uri: the upstream skill at skill://git-workflow/SKILL.md is named \"git-workflow\": bind it as [skills.git-workflow] (its SKILL.md passes through unchanged)",
            "g.toml:8: skills.pdf: the upstream lists no skill named \"pdf\"; name its SKILL.md with uri",
            "g.toml:13: skills.gone.uri: the upstream serves no skill at skill://gone/SKILL.md (JSON-RPC error -32602: No skill is served at skill://gone/SKILL.md)",
        ]
    );
    // An upstream without the extension.
    let plain = Server::builder("plain", "1").build();
    plain
        .tool("t", "t", |_: (), _c: purra_protocol::RequestCtx| async {
            purra_protocol::HandlerResult::Ok("x")
        })
        .unwrap();
    let bound = StreamableHttpServer::new(plain, HttpServerConfig::default())
        .bind()
        .await
        .unwrap();
    let plain_url = format!("http://{}/mcp", bound.local_addr().unwrap());
    tokio::spawn(bound.serve(std::future::pending()));
    let Err(refused) = start(&format!(
        "[upstreams.p]\nurl = \"{plain_url}\"\n\n[skills.x]\nupstream = \"p\"\n"
    ))
    .await
    else {
        panic!("started")
    };
    assert_eq!(
        refused,
        ["g.toml:4: skills.x: the upstream does not declare the skills extension (io.modelcontextprotocol/skills)"]
    );
}

#[test]
fn skill_bindings_are_checked_before_anything_starts() {
    let e = load_str(
        "g.toml",
        "[upstreams.docs]\nurl = \"http://127.0.0.1:1/mcp\"\n\n\
[skills.Big_Name]\nupstream = \"docs\"\n\n\
[skills.a]\nupstream = \"nowhere\"\nuri = \"skill://SKILL.md\"\n\n\
[skills.b]\nupstream = \"docs\"\nuri = \"skill://a/SKILL.md\"\n\n\
[skills.c]\nupstream = \"docs\"\nuri = \"skill://a/SKILL.md\"\ntool = \"x\"\n",
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        e,
        "the configuration has 5 mistakes:\n  \
g.toml:4: skills.Big_Name: a skill's name is 1 to 64 lowercase letters, digits and single hyphens (the name its SKILL.md declares)\n  \
g.toml:8: skills.a.upstream: no upstream \"nowhere\" is configured\n  \
g.toml:9: skills.a.uri: must be the URI of a skill's SKILL.md (such as skill://pdf-processing/SKILL.md)\n  \
g.toml:15: skills.c: binds the same upstream skill as skills.b\n  \
g.toml:18: skills.c.tool: unknown key (expected one of: upstream, uri)"
    );
}
