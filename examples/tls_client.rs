//! A Streamable HTTP client that trusts one private CA, loaded from a PEM file, instead of the
//! built-in roots; it lists the tools and calls `echo`.
//! `cargo run -p examples --example tls_client -- https://localhost:8443/mcp ca.pem`.
#![allow(clippy::print_stdout)] // a command-line program: stdout is its output

use purra_protocol::http::reqwest::Certificate;
use purra_protocol::{Client, ClientOptions, HttpClientOptions};

/// Connects to URL trusting the CA in the PEM file, lists the tools and calls `echo`.
#[tokio::main(flavor = "current_thread")]
pub async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(url), Some(ca)) = (args.next(), args.next()) else {
        return Err("usage: tls_client URL CA.pem".into());
    };
    let ca = Certificate::from_pem(&std::fs::read(ca)?)?;
    let http = HttpClientOptions::default()
        .root_certificate(ca)
        .built_in_roots(false); // trust this CA only
    let conn = Client::connect_http(&url, http, ClientOptions::default()).await?;

    for tool in conn.tools().iter() {
        println!("tool {}", tool.name);
    }
    let args = serde_json::json!({ "text": "hello over TLS" });
    let result = conn.call_tool("echo", args).await?;
    println!("echo: {}", result.texts().collect::<String>());
    conn.close().await;
    Ok(())
}
