//! `purra-conformance-server`: the conformance fixtures over Streamable HTTP at
//! `http://127.0.0.1:PORT/mcp` (`--port N`, else env `PORT`, else 3000); stops on SIGTERM or
//! SIGINT. With `--stdio` it serves one client over its stdin and stdout instead, until stdin ends.

use std::net::{Ipv4Addr, SocketAddr};

use purra_protocol::{HttpServerConfig, StreamableHttpServer};

const USAGE: &str =
    "usage: purra-conformance-server [--port N | --stdio]   (default: env PORT, else 3000)";

fn port() -> Result<u16, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let text = match args.as_slice() {
        [] => std::env::var("PORT").unwrap_or_else(|_| "3000".to_owned()),
        [flag, n] if flag == "--port" => n.clone(),
        [arg] if arg.starts_with("--port=") => arg["--port=".len()..].to_owned(),
        _ => return Err(USAGE.to_owned()),
    };
    text.trim()
        .parse()
        .map_err(|_| format!("not a port number: {text:?}\n{USAGE}"))
}

/// Resolves on SIGTERM or SIGINT; both handlers are installed before this returns.
fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("a SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("a SIGINT handler");
    async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    }
}

#[tokio::main]
async fn main() {
    if std::env::args().skip(1).collect::<Vec<_>>() == ["--stdio"] {
        purra_conformance::server::build().serve_stdio().await;
        return;
    }
    let port = match port() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("purra-conformance-server: {e}");
            std::process::exit(2);
        }
    };
    let shutdown = shutdown_signal();
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("purra-conformance-server: cannot bind {addr}: {e}");
            std::process::exit(1);
        }
    };
    let local = listener.local_addr().expect("a bound address");
    let http = StreamableHttpServer::new(
        purra_conformance::server::build(),
        HttpServerConfig::default(),
    );
    eprintln!("purra-conformance-server: listening on http://{local}/mcp");
    if let Err(e) = http.serve(listener, shutdown).await {
        eprintln!("purra-conformance-server: {e}");
        std::process::exit(1);
    }
    eprintln!("purra-conformance-server: stopped");
}
