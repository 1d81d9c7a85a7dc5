//! purra-postgres benchmarks: approve-claim-commit cycles per second against PostgreSQL's own commit
//! rate on the same server, in the same run.
//!
//! Run with a server (for example the test command's: `eval "$(scripts/postgres.sh start DIR)"`) and
//! `PURRA_TEST_POSTGRES` set: `cargo bench -p purra-bench --bench postgres`. Workloads:
//! - `commit`: one `INSERT` per transaction (autocommit) on plain connections, the floor of any
//!   durable write on this server: 1 connection, 4 and 16 concurrent;
//! - `cycle`: `decide` (approve) + `check_and_claim` + `complete` (committed with a small receipt) on
//!   an approval prepared outside the timing: three transactions, each with its audit row and
//!   notification; 1 run at a time, 16 concurrent runs on one store, and 4 host processes (this
//!   binary re-executed) each with its own store.
//!
//! It prints cycles per second and commits per second at the same concurrency, and their ratio.

use purra_core::ApprovalGateway;
use purra_postgres::{PostgresOptions, PostgresStore};
use std::time::{Duration, Instant, SystemTime};

fn url() -> String {
    std::env::var("PURRA_TEST_POSTGRES")
        .expect("PURRA_TEST_POSTGRES: start a server with scripts/postgres.sh start DIR")
}

/// `runs` concurrent runs of `per_run` cycles each on `store`; cycles per second.
async fn cycles(store: &PostgresStore, runs: usize, per_run: usize, tag: &str) -> f64 {
    let mut prepared = Vec::new();
    for _ in 0..runs * per_run {
        let request = purra_bench::fresh_request(tag);
        let intent = request.intent.clone();
        prepared.push((store.prepare(request).await.unwrap(), intent));
    }
    let start = Instant::now();
    let mut tasks = Vec::new();
    for chunk in prepared.chunks(per_run) {
        let (store, chunk) = (store.clone(), chunk.to_vec());
        tasks.push(tokio::spawn(async move {
            for (id, intent) in chunk {
                purra_bench::approve_claim_commit(&store, id, &intent)
                    .await
                    .expect("a cycle");
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    (runs * per_run) as f64 / start.elapsed().as_secs_f64()
}

/// `conns` concurrent connections each committing `per_conn` one-row transactions; commits per second.
async fn commits(schema: &str, conns: usize, per_conn: usize) -> f64 {
    let mut clients = Vec::new();
    for _ in 0..conns {
        let mut config: tokio_postgres::Config = url().parse().unwrap();
        config.options(format!("-c search_path={schema}"));
        let (client, conn) = config.connect(tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(conn);
        clients.push(client);
    }
    clients[0]
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS commit_floor (n BIGINT, at TIMESTAMPTZ DEFAULT now())",
        )
        .await
        .unwrap();
    let start = Instant::now();
    let mut tasks = Vec::new();
    for client in clients {
        tasks.push(tokio::spawn(async move {
            let stmt = client
                .prepare("INSERT INTO commit_floor (n) VALUES ($1)")
                .await
                .unwrap();
            for n in 0..per_conn as i64 {
                client.execute(&stmt, &[&n]).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    (conns * per_conn) as f64 / start.elapsed().as_secs_f64()
}

async fn store(schema: &str) -> PostgresStore {
    PostgresStore::connect_with(&url(), PostgresOptions::default().schema(schema))
        .await
        .unwrap()
}

/// A child host process: `per_run` cycles on its own store, starting at the given instant.
async fn child(schema: &str, per_run: usize, start_ns: u128) {
    let store = store(schema).await;
    let mut prepared = Vec::new();
    for _ in 0..per_run {
        let request = purra_bench::fresh_request(&format!("p{}", std::process::id()));
        let intent = request.intent.clone();
        prepared.push((store.prepare(request).await.unwrap(), intent));
    }
    let go = SystemTime::UNIX_EPOCH + Duration::from_nanos(start_ns as u64);
    if let Ok(wait) = go.duration_since(SystemTime::now()) {
        tokio::time::sleep(wait).await;
    }
    for (id, intent) in prepared {
        purra_bench::approve_claim_commit(&store, id, &intent)
            .await
            .expect("a cycle");
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--child") {
        let (schema, per_run, start) = (&args[at + 1], &args[at + 2], &args[at + 3]);
        child(schema, per_run.parse().unwrap(), start.parse().unwrap()).await;
        return;
    }
    let schema = format!("bench_{}", std::process::id());
    let one = store(&schema).await;
    // Warm-up: connections, prepared statements.
    cycles(&one, 4, 10, "warm").await;
    commits(&schema, 4, 50).await;
    let floor_1 = commits(&schema, 1, 1000).await;
    let cycles_1 = cycles(&one, 1, 300, "one").await;
    let floor_16 = commits(&schema, 16, 200).await;
    let cycles_16 = cycles(&one, 16, 40, "sixteen").await;
    let floor_4 = commits(&schema, 4, 500).await;
    // 4 host processes, each its own store (own pool, own listener), started together.
    let per_run = 150;
    let start = SystemTime::now() + Duration::from_secs(3);
    let start_ns = start
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..4)
        .map(|_| {
            std::process::Command::new(&exe)
                .args([
                    "--child",
                    &schema,
                    &per_run.to_string(),
                    &start_ns.to_string(),
                ])
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let elapsed = start.elapsed().unwrap().as_secs_f64();
    let cycles_4p = (4 * per_run) as f64 / elapsed;
    drop(one);
    // Benchmarks are the one place that reports on stdout.
    #[allow(clippy::print_stdout)]
    {
        println!("approve-claim-commit cycles (3 transactions each) against PostgreSQL's own commit rate");
        for (what, cycles, floor) in [
            ("1 run", cycles_1, floor_1),
            ("16 concurrent runs, one store", cycles_16, floor_16),
            ("4 host processes", cycles_4p, floor_4),
        ] {
            println!(
                "{what:<32} {cycles:>8.0} cycles/s   commits/s at that concurrency {floor:>8.0}   ratio {:.3} ({:.2} commit times per cycle)",
                cycles / floor,
                floor / cycles
            );
        }
    }
}
