//! purra-sqlite benchmarks: durable approval cycles per second on SQLite, next to the disk's raw fsync
//! rate measured in the same run and the same directory.
//!
//! Run with `cargo bench -p purra-bench --bench sqlite`. Workloads:
//! - `fsync_4k`: write 4 KiB at the start of a file and `fsync` it (`File::sync_all`), the floor of any
//!   durable commit on this disk;
//! - `approve_claim_commit`: `decide` (approve) + `check_and_claim` + `complete` (committed with a small
//!   receipt) on an intent prepared outside the timing, three `BEGIN IMMEDIATE` transactions;
//! - `prepare_approve_claim_commit`: the same with `prepare` inside the timing, four transactions;
//! - `approve_claim_commit_in_memory`: the three transactions on `SqliteStore::open_in_memory`, the part
//!   of a cycle that is CPU (SQL, JSON, `spawn_blocking` hand-offs) rather than disk.
//!
//! After criterion's report the harness runs 40 more rounds that alternate the workloads (30 fsyncs,
//! 10 + 10 durable cycles, 100 in-memory cycles), so that all see the same disk conditions, and prints, for those
//! interleaved medians and for criterion's medians, cycles per second, fsyncs per second and their
//! ratio. Fsync latency on a shared machine moves by an order of magnitude within minutes; the
//! interleaved ratio is the number to compare.

use criterion::{BatchSize, Criterion};
use purra_core::{ApprovalGateway, ApprovalId, ApprovalIntent};
use purra_sqlite::SqliteStore;
use serde_json::Value;
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The store, the raw file and the runtime every workload uses.
struct Fixture {
    rt: tokio::runtime::Runtime,
    store: SqliteStore,
    /// The same work without a disk: what the cycle costs in CPU (SQL, JSON, thread hand-offs).
    memory: SqliteStore,
    raw: File,
}

impl Fixture {
    fn new(dir: &Path) -> Fixture {
        let db = dir.join("bench.db");
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
        }
        Fixture {
            rt: tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap(),
            store: SqliteStore::open(&db).unwrap(),
            memory: SqliteStore::open_in_memory().unwrap(),
            raw: OpenOptions::new()
                .create(true)
                .truncate(true)
                .read(true)
                .write(true)
                .open(dir.join("fsync.bin"))
                .unwrap(),
        }
    }

    /// One raw durable write: 4 KiB at the start of the file, then fsync.
    fn fsync_4k(&mut self) {
        self.raw.seek(SeekFrom::Start(0)).unwrap();
        self.raw.write_all(&[0x5au8; 4096]).unwrap();
        self.raw.sync_all().unwrap();
    }

    fn prepare(&self, store: &SqliteStore) -> (ApprovalId, ApprovalIntent) {
        let request = purra_bench::fresh_request("");
        let intent = request.intent.clone();
        let id = self.rt.block_on(store.prepare(request)).unwrap();
        (id, intent)
    }

    fn approve_claim_commit(
        &self,
        store: &SqliteStore,
        (id, intent): (ApprovalId, ApprovalIntent),
    ) {
        self.rt
            .block_on(purra_bench::approve_claim_commit(store, id, &intent))
            .expect("a cycle");
    }
}

/// Seconds per operation of `op` repeated `n` times.
fn per_op(n: u32, mut op: impl FnMut()) -> f64 {
    let start = Instant::now();
    for _ in 0..n {
        op();
    }
    start.elapsed().as_secs_f64() / f64::from(n)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Rounds that alternate the three workloads, so that all see the same disk conditions (other work on
/// the machine moves fsync latency a lot); returns the median per-operation seconds of each.
fn interleaved(fx: &mut Fixture, rounds: usize) -> [f64; 4] {
    let mut times = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
    for _ in 0..rounds {
        times[0].push(per_op(30, || fx.fsync_4k()));
        let prepared: Vec<_> = (0..10).map(|_| fx.prepare(&fx.store)).collect();
        let mut prepared = prepared.into_iter();
        times[1].push(per_op(10, || {
            fx.approve_claim_commit(&fx.store, prepared.next().unwrap())
        }));
        times[2].push(per_op(10, || {
            let p = fx.prepare(&fx.store);
            fx.approve_claim_commit(&fx.store, p)
        }));
        let prepared: Vec<_> = (0..100).map(|_| fx.prepare(&fx.memory)).collect();
        let mut prepared = prepared.into_iter();
        times[3].push(per_op(100, || {
            fx.approve_claim_commit(&fx.memory, prepared.next().unwrap())
        }));
    }
    times.map(median)
}

fn bench_sqlite(c: &mut Criterion, fx: &mut Fixture) {
    let mut group = c.benchmark_group("durable");
    group.sample_size(30);
    group.measurement_time(Duration::from_secs(6));
    group.bench_function("fsync_4k", |b| b.iter(|| fx.fsync_4k()));
    group.bench_function("approve_claim_commit", |b| {
        b.iter_batched(
            || fx.prepare(&fx.store),
            |p| fx.approve_claim_commit(&fx.store, p),
            BatchSize::SmallInput,
        )
    });
    group.bench_function("prepare_approve_claim_commit", |b| {
        b.iter(|| {
            let p = fx.prepare(&fx.store);
            fx.approve_claim_commit(&fx.store, p)
        })
    });
    group.bench_function("approve_claim_commit_in_memory", |b| {
        b.iter_batched(
            || fx.prepare(&fx.memory),
            |p| fx.approve_claim_commit(&fx.memory, p),
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

fn median_ns(dir: &Path, group: &str, function: &str) -> Option<f64> {
    let path = dir
        .join(group)
        .join(function)
        .join("new")
        .join("estimates.json");
    let text = std::fs::read_to_string(path).ok()?;
    let estimates: Value = serde_json::from_str(&text).ok()?;
    estimates["median"]["point_estimate"].as_f64()
}

fn main() {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let criterion_dir = tmp.join("criterion");
    let data_dir = tmp.join("sqlite-bench");
    std::fs::create_dir_all(&data_dir).unwrap();
    let mut c = Criterion::default()
        .output_directory(&criterion_dir)
        .warm_up_time(Duration::from_secs(1))
        .configure_from_args();
    let mut fx = Fixture::new(&data_dir);
    bench_sqlite(&mut c, &mut fx);
    c.final_summary();
    let [fsync, acc, pacc, memory] = interleaved(&mut fx, 40);
    // Benchmarks are the one place that reports on stdout.
    #[allow(clippy::print_stdout)]
    {
        println!("\ndurable cycles against the disk's fsync rate, same directory, same run");
        let show = |source: &str, fsync: f64, cycles: [(&str, Option<f64>); 3]| {
            println!(
                "{source}: fsync_4k {:>8.1} µs = {:>6.0} fsync/s",
                fsync * 1e6,
                1.0 / fsync
            );
            for (name, cycle) in cycles {
                if let Some(cycle) = cycle {
                    println!(
                        "{source}: {name:<30} {:>8.1} µs = {:>6.0} cycles/s  cycles/s ÷ fsync/s = {:.3} ({:.2} fsync times per cycle)",
                        cycle * 1e6,
                        1.0 / cycle,
                        fsync / cycle,
                        cycle / fsync
                    );
                }
            }
        };
        show(
            "interleaved medians",
            fsync,
            [
                ("approve_claim_commit", Some(acc)),
                ("prepare_approve_claim_commit", Some(pacc)),
                ("approve_claim_commit_in_memory", Some(memory)),
            ],
        );
        let criterion = |name| median_ns(&criterion_dir, "durable", name).map(|ns| ns / 1e9);
        if let Some(fsync) = criterion("fsync_4k") {
            show(
                "criterion medians",
                fsync,
                [
                    ("approve_claim_commit", criterion("approve_claim_commit")),
                    (
                        "prepare_approve_claim_commit",
                        criterion("prepare_approve_claim_commit"),
                    ),
                    (
                        "approve_claim_commit_in_memory",
                        criterion("approve_claim_commit_in_memory"),
                    ),
                ],
            );
        }
    }
}
