//! A skills server (the Skills extension, `io.modelcontextprotocol/skills`): the skills of a
//! folder of skill folders (`ServerBuilder::skills_dir`), and one skill built in code,
//! `purra-hello`, over stdio (default) or Streamable HTTP (`--http ADDR`, endpoint `/mcp`; it
//! prints `listening on http://ADDR/mcp` to stderr). A folder that breaks a bound or a rule is
//! refused at start: the reason on stderr, exit 1.
//!
//! Usage: `purra-skills-server DIR [--http ADDR]`

use purra_protocol::skills::SkillBundle;
use purra_protocol::{HttpServerConfig, Server, StreamableHttpServer};

/// The skill built in code.
const HELLO: &str = "---\nname: purra-hello\ndescription: Greets in the house style\n---\n# Hello\n\nGreet with [the greeting](greeting.txt).\n";

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (dir, http) = match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        [dir] => (dir.to_string(), None),
        [dir, "--http", addr] => (dir.to_string(), Some(addr.to_string())),
        _ => {
            eprintln!("usage: purra-skills-server DIR [--http ADDR]");
            std::process::exit(2);
        }
    };
    let server = match Server::builder("purra-skills", "1.0.0").skills_dir(&dir) {
        Ok(b) => b.build(),
        Err(e) => {
            eprintln!("purra-skills-server: {e}");
            std::process::exit(1);
        }
    };
    server
        .add_skill(
            SkillBundle::new("purra-hello")
                .file("SKILL.md", HELLO)
                .file("greeting.txt", "Hello from purra.\n"),
        )
        .expect("a valid skill");
    let Some(addr) = http else {
        server.serve_stdio().await;
        return;
    };
    let listener = match tokio::net::TcpListener::bind(&addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("purra-skills-server: cannot bind {addr}: {e}");
            std::process::exit(1);
        }
    };
    let local = listener.local_addr().expect("bound address");
    eprintln!("listening on http://{local}/mcp");
    let http = StreamableHttpServer::new(server, HttpServerConfig::default());
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    if let Err(e) = http.serve(listener, shutdown).await {
        eprintln!("purra-skills-server: {e}");
        std::process::exit(1);
    }
}
