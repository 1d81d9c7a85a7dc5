//! The host adapter's fixture server as a process: stdio by default, `--http ADDR` for
//! Streamable HTTP; `--page-size N`, `--pad-tools N`, `--pad-description-bytes N`, `--canary S`.

use purra_examples::adapter_fixture::AdapterFixture;
use purra_protocol::{HttpServerConfig, StreamableHttpServer};

#[tokio::main]
async fn main() {
    let mut fx = AdapterFixture::default();
    let mut http: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| usage(&format!("{a} needs a value")))
        };
        match a.as_str() {
            "--page-size" => {
                fx.page_size = value().parse().unwrap_or_else(|_| usage("bad --page-size"))
            }
            "--pad-tools" => {
                fx.pad_tools = value().parse().unwrap_or_else(|_| usage("bad --pad-tools"))
            }
            "--pad-description-bytes" => {
                fx.pad_description_bytes = value()
                    .parse()
                    .unwrap_or_else(|_| usage("bad --pad-description-bytes"))
            }
            "--canary" => fx.canary = value(),
            "--http" => http = Some(value()),
            other => usage(&format!("unknown argument {other:?}")),
        }
    }
    let (server, _seen) = fx.build();
    match http {
        None => server.serve_stdio().await,
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(&addr)
                .await
                .unwrap_or_else(|e| usage(&format!("cannot bind {addr}: {e}")));
            eprintln!(
                "listening on http://{}/mcp",
                listener.local_addr().expect("bound")
            );
            let http = StreamableHttpServer::new(server, HttpServerConfig::default());
            let _ = http.serve(listener, std::future::pending()).await;
        }
    }
}

fn usage(why: &str) -> ! {
    eprintln!("purra-adapter-fixture: {why}\nusage: purra-adapter-fixture [--http ADDR] [--page-size N] [--pad-tools N] [--pad-description-bytes N] [--canary S]");
    std::process::exit(2)
}
