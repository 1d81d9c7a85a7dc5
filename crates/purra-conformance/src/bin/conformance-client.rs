//! `purra-conformance-client`: run by the conformance suite as `<binary> [args...] <url>` with
//! the scenario in env `MCP_CONFORMANCE_SCENARIO`; exits 0 when the scenario ran, 1 with a
//! message on stderr when it failed or is unknown, 2 on bad usage.

#[tokio::main]
async fn main() {
    let Some(url) = std::env::args().skip(1).last() else {
        eprintln!("usage: MCP_CONFORMANCE_SCENARIO=<name> purra-conformance-client <server url>");
        std::process::exit(2);
    };
    let Ok(scenario) = std::env::var("MCP_CONFORMANCE_SCENARIO") else {
        eprintln!("purra-conformance-client: MCP_CONFORMANCE_SCENARIO is not set");
        std::process::exit(2);
    };
    match purra_conformance::client::run(&scenario, &url).await {
        Ok(()) => eprintln!("purra-conformance-client: {scenario}: done"),
        Err(e) => {
            eprintln!("purra-conformance-client: {scenario}: {e}");
            std::process::exit(1);
        }
    }
}
