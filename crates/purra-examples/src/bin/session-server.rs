//! A purra server over Streamable HTTP whose sessions live in a SQLite file, for the fleet
//! tests: several processes on one `--db PATH` serve any session any of them began.
//! `purra-session-server --name NAME --db PATH ADDR`; the tool `echo {i}` answers `NAME:i`, so
//! a client sees which process served each call. Stops on SIGINT.

use std::sync::Arc;

use purra_protocol::{HandlerResult, HttpServerConfig, RequestCtx, Server, StreamableHttpServer};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Echo {
    i: u64,
}

fn usage(why: &str) -> ! {
    eprintln!(
        "purra-session-server: {why}\nusage: purra-session-server --name NAME --db PATH ADDR"
    );
    std::process::exit(2)
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [flag_name, name, flag_db, db, addr] = args.as_slice() else {
        usage("wrong arguments")
    };
    if flag_name != "--name" || flag_db != "--db" {
        usage("wrong arguments");
    }
    let store = purra_sqlite::SqliteStore::open(db)
        .unwrap_or_else(|e| usage(&format!("cannot open {db}: {e}")));
    let server = Server::builder("session-purra", "1.0.0").logging().build();
    let me = name.clone();
    server
        .tool(
            "echo",
            "answers NAME:i, NAME being the process that served the call",
            move |Echo { i }, _c: RequestCtx| {
                let me = me.clone();
                async move { HandlerResult::Ok(format!("{me}:{i}")) }
            },
        )
        .expect("register");
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .unwrap_or_else(|e| usage(&format!("cannot bind {addr}: {e}")));
    let config = HttpServerConfig {
        session_store: Some(Arc::new(store)),
        ..HttpServerConfig::default()
    };
    let http = StreamableHttpServer::new(server, config);
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    if let Err(e) = http.serve(listener, shutdown).await {
        eprintln!("purra-session-server: {e}");
        std::process::exit(1);
    }
}
