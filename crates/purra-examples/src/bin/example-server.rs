//! The example MCP server: the fixture surface of `peers/FIXTURES.md`, served over stdio.

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        None | Some("--stdio") => purra_examples::fixture_server::build().serve_stdio().await,
        Some(other) => {
            eprintln!("usage: purra-example-server [--stdio]   (unknown argument {other:?})");
            std::process::exit(2);
        }
    }
}
