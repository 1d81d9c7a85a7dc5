//! An idempotent purra server as a process over stdio, for the restart tests: the tool
//! `charge {amount}` is `#[tool(idempotent)]`, its results kept in the SQLite file `--db PATH`;
//! every execution appends a line to `--executions FILE` (fsynced) as it starts. A charge of 100
//! then takes 60 seconds, so a test can stop the process while it runs.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use purra_mcp::DurableIdempotentResults;
use purra_protocol::idempotency::IdempotentLimits;
use purra_protocol::{Json, Server};

#[derive(serde::Serialize, schemars::JsonSchema)]
struct Charged {
    charged: i64,
    execution: usize,
}

struct Billing {
    executions: PathBuf,
}

#[purra_protocol::handlers]
impl Billing {
    /// Charges an amount (idempotent by key).
    #[tool(idempotent)]
    async fn charge(&self, amount: i64) -> Json<Charged> {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.executions)
            .expect("executions file");
        writeln!(f, "{amount}").expect("write");
        f.sync_all().expect("fsync");
        let execution = std::fs::read_to_string(&self.executions)
            .map(|t| t.lines().count())
            .unwrap_or(0);
        if amount == 100 {
            tokio::time::sleep(Duration::from_secs(60)).await;
        }
        Json(Charged {
            charged: amount,
            execution,
        })
    }
}

fn usage(why: &str) -> ! {
    eprintln!("purra-idempotent-server: {why}\nusage: purra-idempotent-server --db PATH --executions FILE");
    std::process::exit(2)
}

#[tokio::main]
async fn main() {
    let (mut db, mut executions) = (None, None);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let value = args
            .next()
            .unwrap_or_else(|| usage(&format!("{a} needs a value")));
        match a.as_str() {
            "--db" => db = Some(PathBuf::from(value)),
            "--executions" => executions = Some(PathBuf::from(value)),
            other => usage(&format!("unknown argument {other:?}")),
        }
    }
    let (Some(db), Some(executions)) = (db, executions) else {
        usage("--db and --executions are required")
    };
    let store = purra_sqlite::SqliteStore::open(&db)
        .unwrap_or_else(|e| usage(&format!("cannot open {}: {e}", db.display())));
    let server = Server::builder("idempotent-purra", "1.0.0")
        .idempotent_results(Arc::new(DurableIdempotentResults::new(
            Arc::new(store),
            IdempotentLimits::default(),
        )))
        .build();
    server.register(Billing { executions }).expect("register");
    server.serve_stdio().await;
}
