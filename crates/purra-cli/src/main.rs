//! `purra`: the command-line tool. Inspect and call any MCP server over stdio, Streamable HTTP
//! or WebSocket, run purra's example server, decide durable approvals, list runs and run the
//! durable-write demo. `purra --help` documents targets, arguments
//! and exit codes.

#![allow(
    clippy::print_stdout,
    reason = "a command-line tool: its results are its standard output"
)]
#![allow(
    rustdoc::broken_intra_doc_links,
    reason = "the doc comments of `cli` are clap's help text, where `[webhooks]` names a TOML table"
)]

mod cli;
mod cmd;
mod demo_server;
mod exit;
mod fixture_server;
mod kv;
mod render;
mod status;
mod target;
mod telemetry;
mod term;

use clap::Parser;

use crate::cli::{Cli, Command};

/// The process's allocator: mimalloc. A read through `purra gateway` allocates and frees its
/// frames, values and futures on every hop; under glibc's allocator that was about a fifth of
/// the gateway's instructions a read. mimalloc takes 15% fewer instructions a read and serves
/// about a tenth more reads 16 in flight, for about 7 MiB more resident (BENCHMARKS.md, "The gateway's
/// allocator").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use crate::exit::Failure;

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with 0; every other parse error is a usage error.
            let _ = e.print();
            std::process::exit(if e.use_stderr() { exit::USAGE } else { 0 });
        }
    };
    // From here on a panic is one log line in the chosen format, its message escaped.
    telemetry::install_panic_hook(cli.log_format);
    let json = match &cli.command {
        Command::Inspect(a) => a.connect.json,
        Command::Call(a) => a.connect.json,
        Command::Read(a) => a.connect.json,
        Command::Tasks(a) => a.args().connect.json,
        Command::Prompt(a) => a.connect.json,
        Command::ServeExample(_)
        | Command::ServeDemo(_)
        | Command::Demo(_)
        | Command::Gateway(_)
        | Command::Login(_)
        | Command::Logout(_) => false,
        Command::Approvals(a) => a.store_args().json,
        Command::Grants(a) => a.store_args().json,
        Command::Runs(a) => a.store_args().json,
        Command::Effects(a) => a.store_args().json,
        Command::Catalog(a) => a.store_args().json,
        Command::Webhooks(a) => a.store_args().json,
        Command::Credentials(a) => a.store_args().json,
    };
    // The gateway's file, read once here: it decides the runtime, and the gateway starts from it.
    let preloaded = match &cli.command {
        Command::Gateway(a) => purra_gateway::load(&a.config).ok(),
        _ => None,
    };
    let runtime = if preloaded
        .as_ref()
        .is_some_and(cmd::gateway::serves_one_client_on_stdio)
    {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
    };
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("purra: cannot start the async runtime: {e}");
            std::process::exit(exit::PROTOCOL_ERROR);
        }
    };
    // The gateway starts its telemetry once it read its file's `[telemetry]`; every other
    // command from the environment's OTEL_* variables.
    let telemetry = if matches!(cli.command, Command::Gateway(_)) {
        None
    } else {
        let service = match cli.command {
            Command::ServeExample(_) => "purra-example-server",
            _ => "purra",
        };
        let _runtime = runtime.enter();
        match telemetry::init(
            cli.verbose,
            cli.log_format,
            &telemetry::Export::from_env(service),
        ) {
            Ok(t) => Some(t),
            Err(e) => {
                eprintln!("purra: telemetry: {e}");
                std::process::exit(exit::CONFIG);
            }
        }
    };
    let (verbose, log_format) = (cli.verbose, cli.log_format);
    let outcome = runtime.block_on(async {
        let serving = matches!(
            cli.command,
            Command::ServeExample(_) | Command::ServeDemo(_) | Command::Gateway(_)
        );
        let work = dispatch(cli.command, preloaded, verbose, log_format);
        if serving {
            // The server handles SIGINT and SIGTERM itself and stops gracefully.
            return work.await;
        }
        tokio::select! {
            r = work => r,
            _ = tokio::signal::ctrl_c() => Err(Failure::Interrupted),
        }
    });
    // Spans still buffered are sent while the runtime can still run the requests.
    if let Some(t) = telemetry {
        let _runtime = runtime.enter();
        t.shutdown();
    }
    // Shutting the runtime down stops leftover tasks (a stdio server child is reaped by its
    // handle); a blocking task still running past a few seconds does not hold the exit.
    runtime.shutdown_timeout(std::time::Duration::from_secs(5));
    match outcome {
        Ok(()) => {}
        Err(Failure::ToolError) => std::process::exit(exit::TOOL_ERROR),
        Err(f) => {
            if json {
                if let Some(doc) = f.to_json() {
                    cmd::print_json(&doc);
                }
            }
            eprintln!("purra: {}", term::for_stderr(&f.to_string()));
            if matches!(f, Failure::Usage(_)) {
                eprintln!("Try 'purra --help' for more information.");
            }
            std::process::exit(f.code());
        }
    }
}

async fn dispatch(
    command: Command,
    preloaded: Option<purra_gateway::Loaded>,
    verbose: u8,
    log_format: telemetry::LogFormat,
) -> Result<(), Failure> {
    match command {
        Command::Inspect(a) => cmd::inspect::run(a).await,
        Command::Call(a) => cmd::call::run(a).await,
        Command::Read(a) => cmd::read::run(a).await,
        Command::Tasks(a) => cmd::tasks::run(a).await,
        Command::Prompt(a) => cmd::prompt::run(a).await,
        Command::ServeExample(a) => cmd::serve_example::run(a).await,
        Command::Login(a) => cmd::login::login(a).await,
        Command::Logout(a) => cmd::login::logout(a).await,
        Command::ServeDemo(a) => {
            demo_server::build(a.state.as_deref())
                .map_err(Failure::Config)?
                .serve_stdio()
                .await;
            Ok(())
        }
        Command::Approvals(a) => cmd::approvals::run(a).await,
        Command::Grants(a) => cmd::grants::run(a).await,
        Command::Runs(a) => cmd::runs::run(a).await,
        Command::Effects(a) => cmd::effects::run(a).await,
        Command::Webhooks(a) => cmd::webhooks::run(a).await,
        Command::Credentials(a) => cmd::credentials::run(a).await,
        Command::Catalog(a) => cmd::catalog::run(a).await,
        Command::Demo(a) => cmd::demo::run(a).await,
        Command::Gateway(a) => cmd::gateway::run(a, preloaded, verbose, log_format).await,
    }
}
