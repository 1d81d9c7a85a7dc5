//! The store at scale: what an operator and a write do against a store holding many receipts and
//! many pending approvals, beside the same on an empty store and on one holding a page's worth.
//!
//! Each store is filled through the store's own APIs (nothing written behind its back): a
//! completed write cycle is `prepare`, `decide` (approve), `check_and_claim` and `complete` with a
//! small receipt (the rows a gateway's cycle leaves once its run is dropped); a pending approval
//! is `prepare` and `save_suspended` (the call waiting for it, as the gateway saves it). The fill
//! runs many cycles at once, so their durable writes share group commits.
//!
//! Timed on each store, one operation at a time, `--samples` times each (after five untimed runs):
//! - `list`: what `purra approvals list` reads: one page of 50, the newest first, and how many
//!   are older (counted up to 1 001, as the command counts them);
//! - `pending`, `history`, `history_fragment`: the approver page's views, `GET` over HTTP from a
//!   page served in this process on the store, signed in;
//! - `claim`: a new write's claim (`check_and_claim` of an approved approval, a durable commit).
//!
//! Also: the store's bytes per pending approval (file growth while the pending approvals were
//! added, SQLite) and this process's resident memory growth per pending approval while the page
//! lists them.
//!
//! With `--waiting N --purra PURRA --server SERVER`: a `purra gateway` over stdio (one write bound
//! to the server's `echo`, decided only by an operator) holding N write calls waiting; its
//! resident memory growth per waiting call and its store's bytes per waiting call (N at most 63:
//! one stdio session runs 64 requests at once).
//!
//! A claim is a durable commit, so its p99 over 200 samples is the second-slowest `fsync` of the
//! run; `--claim-samples` (default: `--samples`) times more of them than of the reads.
//!
//! Usage: `store-scale --dir DIR [--receipts N] [--pending N] [--samples N] [--claim-samples N]
//! [--postgres URL] [--reuse] [--postgres-only] [--waiting N --purra PURRA --server SERVER]` (or
//! `PURRA_BENCH_POSTGRES=URL`). With `--reuse` the filled store is kept and used again by the next
//! run that asks for the same numbers (the suite fills once per run, not per round; each run's
//! claims add a few hundred completed cycles to it; a PostgreSQL schema filled in part is topped
//! up). Prints a table and, last, one JSON line.

#![allow(clippy::print_stdout)] // a benchmark program: stdout is its result

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use purra_core::{
    ApprovalId, ApprovalQuery, ClaimVerdict, Decision, EffectOutcome, OperatorStore, SuspendedRun,
    ToolCall, Verdict,
};
use purra_page::{Page, PageConfig};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The operations timed, in the table's order.
pub const OPERATIONS: [&str; 6] = [
    "list",
    "pending",
    "pending_fragment",
    "history",
    "history_fragment",
    "claim",
];

/// What the program was asked.
struct Args {
    dir: PathBuf,
    receipts: usize,
    pending: usize,
    samples: usize,
    /// How many claims are timed (`--claim-samples`; by default `samples`).
    claim_samples: usize,
    postgres: Option<String>,
    /// Keep the filled stores between runs and use them again when they hold what was asked.
    reuse: bool,
    /// Only PostgreSQL (`--postgres-only`): the SQLite rows are skipped.
    postgres_only: bool,
    /// How many write calls a gateway holds waiting (`--waiting`; 0: not measured).
    waiting: usize,
    /// The `purra` program (for `--waiting`).
    purra: Option<String>,
    /// The upstream server program (for `--waiting`).
    server: Option<String>,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        dir: std::env::temp_dir().join("purra-store-scale"),
        receipts: 100_000,
        pending: 10_000,
        samples: 200,
        claim_samples: 0,
        postgres: std::env::var("PURRA_BENCH_POSTGRES")
            .ok()
            .filter(|s| !s.is_empty()),
        reuse: false,
        postgres_only: false,
        waiting: 0,
        purra: None,
        server: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--dir" => a.dir = PathBuf::from(value()?),
            "--receipts" => a.receipts = value()?.parse().map_err(|e| format!("{e}"))?,
            "--pending" => a.pending = value()?.parse().map_err(|e| format!("{e}"))?,
            "--samples" => a.samples = value()?.parse().map_err(|e| format!("{e}"))?,
            "--claim-samples" => a.claim_samples = value()?.parse().map_err(|e| format!("{e}"))?,
            "--postgres" => a.postgres = Some(value()?),
            "--reuse" => a.reuse = true,
            "--postgres-only" => a.postgres_only = true,
            "--waiting" => a.waiting = value()?.parse().map_err(|e| format!("{e}"))?,
            "--purra" => a.purra = Some(value()?),
            "--server" => a.server = Some(value()?),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if a.claim_samples == 0 {
        a.claim_samples = a.samples;
    }
    Ok(a)
}

/// A store this program fills and times.
trait Scaled: OperatorStore + Clone + 'static {}
impl<S: OperatorStore + Clone + 'static> Scaled for S {}

/// The suspended run waiting for approval `id` of `request` (as the gateway saves it).
fn waiting_run(id: &ApprovalId, request: &purra_core::ApprovalRequest) -> SuspendedRun {
    let run_id = request.intent.run_id.clone();
    SuspendedRun {
        run_id: run_id.clone(),
        root_run_id: run_id,
        agent: "gateway".into(),
        preset_fingerprint: request.intent.preset_fingerprint.clone(),
        transcript: Vec::new(),
        pending_call: ToolCall {
            id: "call".into(),
            name: request.intent.tool.clone(),
            arguments: request.arguments.clone(),
        },
        approval_id: id.clone(),
        intent_digest: request.intent.digest(),
        turns_used: 0,
        waiting_until: None,
    }
}

/// Adds `receipts` completed write cycles and then `pending` pending approvals (each with its
/// waiting run), `width` at a time.
async fn fill<S: Scaled>(
    store: &S,
    receipts: usize,
    pending: usize,
    width: usize,
) -> Result<(), String> {
    async fn spread<S: Scaled>(
        store: &S,
        n: usize,
        width: usize,
        complete: bool,
    ) -> Result<(), String> {
        let mut tasks = tokio::task::JoinSet::new();
        for w in 0..width {
            let share = n / width + usize::from(w < n % width);
            let store = store.clone();
            tasks.spawn(async move {
                for _ in 0..share {
                    let request = purra_bench::fresh_request("");
                    let intent = request.intent.clone();
                    let id = store
                        .prepare(request.clone())
                        .await
                        .map_err(|e| e.to_string())?;
                    if complete {
                        purra_bench::approve_claim_commit(&store, id, &intent).await?;
                    } else {
                        store
                            .save_suspended(waiting_run(&id, &request))
                            .await
                            .map_err(|e| e.to_string())?;
                    }
                }
                Ok::<_, String>(())
            });
        }
        while let Some(r) = tasks.join_next().await {
            r.map_err(|e| e.to_string())??;
        }
        Ok(())
    }
    spread(store, receipts, width, true).await?;
    spread(store, pending, width, false).await
}

/// p50 and p99 of `samples` (microseconds).
fn percentiles(mut samples: Vec<f64>) -> (f64, f64) {
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    (at(0.50), at(0.99))
}

/// One keep-alive HTTP/1.1 connection to the page, signed in.
struct Browser {
    conn: TcpStream,
    host: String,
    cookie: String,
}

impl Browser {
    /// Signs in to the page at `addr` with `token`.
    async fn sign_in(addr: std::net::SocketAddr, token: &str) -> Result<Browser, String> {
        let conn = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        conn.set_nodelay(true).map_err(|e| e.to_string())?;
        let mut b = Browser {
            conn,
            host: addr.to_string(),
            cookie: String::new(),
        };
        let body = format!("token={token}");
        let req = format!(
            "POST /login HTTP/1.1\r\nHost: {h}\r\nOrigin: http://{h}\r\n\
             Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
            body.len(),
            h = b.host
        );
        let (status, head, _) = b.exchange(&req).await?;
        if status != 303 {
            return Err(format!("sign-in answered {status}"));
        }
        let cookie = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .starts_with("set-cookie:")
                    .then(|| l["set-cookie:".len()..].trim().to_owned())
            })
            .ok_or("sign-in set no cookie")?;
        b.cookie = cookie.split(';').next().unwrap_or("").to_owned();
        Ok(b)
    }

    /// `GET path`: its status and body.
    async fn get(&mut self, path: &str) -> Result<(u16, String), String> {
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nCookie: {}\r\n\r\n",
            self.host, self.cookie
        );
        let (status, _, body) = self.exchange(&req).await?;
        Ok((status, body))
    }

    /// Sends `req` and reads one response with a `Content-Length` body.
    async fn exchange(&mut self, req: &str) -> Result<(u16, String, String), String> {
        self.conn
            .write_all(req.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        let mut buf = Vec::with_capacity(64 * 1024);
        let mut chunk = vec![0u8; 64 * 1024];
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            self.read_more(&mut buf, &mut chunk, "the page closed the connection")
                .await?;
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        let status: u16 = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or("no status")?;
        let length: usize = head
            .lines()
            .find_map(|l| {
                let l = l.to_ascii_lowercase();
                l.strip_prefix("content-length:")
                    .and_then(|v| v.trim().parse().ok())
            })
            .ok_or("an answer without Content-Length")?;
        while buf.len() < head_end + length {
            self.read_more(
                &mut buf,
                &mut chunk,
                "the page closed the connection mid-body",
            )
            .await?;
        }
        let body = String::from_utf8_lossy(&buf[head_end..head_end + length]).into_owned();
        Ok((status, head, body))
    }

    /// Reads what the connection has into `buf` (through `chunk`); `Err(closed)` at its end.
    async fn read_more(
        &mut self,
        buf: &mut Vec<u8>,
        chunk: &mut [u8],
        closed: &str,
    ) -> Result<(), String> {
        let n = self.conn.read(chunk).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err(closed.to_owned());
        }
        buf.extend_from_slice(&chunk[..n]);
        Ok(())
    }
}

/// Untimed runs of each operation before its timed samples: the first reads of a store just
/// opened fetch its pages from the file, which the steady state's p99 is not about.
const WARM_UP: usize = 5;

/// This process's resident memory (bytes).
fn rss() -> u64 {
    purra_bench::rss_of(std::process::id()).map_or(0, |(rss, _)| rss)
}

/// Times every operation on `store`, `samples` times each and the claim `claims` times:
/// (operation, p50 µs, p99 µs).
async fn time_all<S: Scaled>(store: &S, samples: usize, claims: usize) -> Result<Timings, String> {
    let mut out = Vec::new();
    // `purra approvals list`: the page of 50 and the count of the older ones.
    let mut t = Vec::with_capacity(samples);
    for i in 0..WARM_UP + samples {
        let start = Instant::now();
        let query = ApprovalQuery::all().newest_first().limit(50);
        let page = store
            .approval_page(query.clone())
            .await
            .map_err(|e| e.to_string())?;
        if let Some(next) = &page.next {
            store
                .count_approvals_up_to(query.continued(next.clone()), purra_core::COUNTED_UP_TO + 1)
                .await
                .map_err(|e| e.to_string())?;
        }
        if i >= WARM_UP {
            t.push(purra_bench::micros_since(start));
        }
    }
    let (p50, p99) = percentiles(t);
    out.push(("list".to_owned(), p50, p99));

    // The page's views over HTTP.
    let page = Page::new(
        Arc::new(store.clone()) as Arc<dyn OperatorStore>,
        PageConfig::default().approver("ada"),
    );
    let token = page.tokens()[0].1.clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(async move {
        let _ = page
            .serve(listener, async {
                let _ = stopped.await;
            })
            .await;
    });
    let mut browser = Browser::sign_in(addr, &token).await?;
    for (op, path) in [
        ("pending", "/"),
        ("pending_fragment", "/fragment/pending"),
        ("history", "/history"),
        ("history_fragment", "/fragment/history"),
    ] {
        let mut t = Vec::with_capacity(samples);
        for i in 0..WARM_UP + samples {
            let start = Instant::now();
            let (status, body) = browser.get(path).await?;
            if i >= WARM_UP {
                t.push(purra_bench::micros_since(start));
            }
            if status != 200 || body.is_empty() {
                return Err(format!("GET {path} answered {status}"));
            }
        }
        let (p50, p99) = percentiles(t);
        out.push((op.to_owned(), p50, p99));
    }
    let _ = stop.send(());
    let _ = serving.await;

    // A new write's claim: prepared and approved untimed, claimed timed, completed untimed.
    let mut t = Vec::with_capacity(claims);
    for i in 0..WARM_UP + claims {
        let request = purra_bench::fresh_request("claim-");
        let intent = request.intent.clone();
        let id = store.prepare(request).await.map_err(|e| e.to_string())?;
        let decision = Decision {
            verdict: Verdict::Approve,
            approver: "alice".into(),
            decided_at: SystemTime::now(),
            expires_at: None,
            note: None,
        };
        store
            .decide(id.clone(), decision)
            .await
            .map_err(|e| e.to_string())?;
        let start = Instant::now();
        let claimed = store
            .check_and_claim(id, intent.digest(), SystemTime::now())
            .await;
        if i >= WARM_UP {
            t.push(purra_bench::micros_since(start));
        }
        let key = match claimed {
            Ok(ClaimVerdict::Claimed(key)) => key,
            other => return Err(format!("claim: {other:?}")),
        };
        let receipt = json!({"updated": intent.checkpoint_call.call_id});
        store
            .complete(key, EffectOutcome::Committed { receipt })
            .await
            .map_err(|e| e.to_string())?;
    }
    let (p50, p99) = percentiles(t);
    out.push(("claim".to_owned(), p50, p99));
    Ok(out)
}

/// Each operation's p50 and p99 (µs) on one store.
type Timings = Vec<(String, f64, f64)>;

/// One store's measurements: per size (`empty`, `page`, `filled`), each operation's p50/p99.
struct Measured {
    backend: &'static str,
    sizes: Vec<(&'static str, Timings)>,
    fill_seconds: f64,
    bytes_per_pending: Option<f64>,
    rss_per_pending: Option<f64>,
}

/// The sizes measured: name, receipts, pending.
fn sizes(a: &Args) -> [(&'static str, usize, usize); 3] {
    [
        ("empty", 0, 0),
        // One page of each view and a little more: both lists are full and have a next page.
        ("page", 60, 60),
        ("filled", a.receipts, a.pending),
    ]
}

/// The bytes the SQLite file at `path` uses: its pages in use once the write-ahead log is
/// checkpointed into it (free pages not counted).
fn sqlite_files(path: &Path) -> u64 {
    let used = |c: &rusqlite::Connection| -> rusqlite::Result<u64> {
        c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        let pages: i64 = c.query_row("PRAGMA page_count", [], |r| r.get(0))?;
        let free: i64 = c.query_row("PRAGMA freelist_count", [], |r| r.get(0))?;
        let size: i64 = c.query_row("PRAGMA page_size", [], |r| r.get(0))?;
        Ok(u64::try_from((pages - free) * size).unwrap_or(0))
    };
    rusqlite::Connection::open(path)
        .and_then(|c| used(&c))
        .unwrap_or(0)
}

async fn sqlite(a: &Args) -> Result<Measured, String> {
    std::fs::create_dir_all(&a.dir).map_err(|e| e.to_string())?;
    let mut m = Measured {
        backend: "sqlite",
        sizes: Vec::new(),
        fill_seconds: 0.0,
        bytes_per_pending: None,
        rss_per_pending: None,
    };
    for (name, receipts, pending) in sizes(a) {
        let path = a.dir.join(format!("scale-{name}.db"));
        let marker = a.dir.join(format!("scale-{name}.filled"));
        // Only the filled store is kept: the claims timed on a store add to it, and the empty
        // one and the page's worth are quick to make again.
        let reuse = a.reuse && name == "filled";
        let wanted = json!({"receipts": receipts, "pending": pending});
        let kept = std::fs::read_to_string(&marker)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .filter(|k| reuse && k["asked"] == wanted && path.exists());
        if kept.is_none() {
            let _ = std::fs::remove_file(&marker);
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
            }
        }
        let store = purra_sqlite::SqliteStore::open(&path).map_err(|e| e.to_string())?;
        if let Some(k) = &kept {
            m.fill_seconds = k["fill_s"].as_f64().unwrap_or(0.0);
            m.bytes_per_pending = k["bytes_per_pending"].as_f64();
        } else {
            let start = Instant::now();
            fill(&store, receipts, 0, 64).await?;
            let before = sqlite_files(&path);
            fill(&store, 0, pending, 64).await?;
            m.fill_seconds = start.elapsed().as_secs_f64();
            m.bytes_per_pending = (pending > 0)
                .then(|| (sqlite_files(&path).saturating_sub(before)) as f64 / pending as f64);
            if reuse {
                let done = json!({
                    "asked": wanted,
                    "fill_s": m.fill_seconds,
                    "bytes_per_pending": m.bytes_per_pending,
                });
                std::fs::write(&marker, done.to_string()).map_err(|e| e.to_string())?;
            }
        }
        if name == "filled" {
            let rss_before = rss();
            // Every pending approval listed, page after page, as the page lists them.
            let mut query = ApprovalQuery::all()
                .status(purra_core::ApprovalStatus::Pending)
                .newest_first()
                .limit(purra_core::MAX_PAGE);
            let mut kept = Vec::new();
            loop {
                let page = store
                    .approval_page(query.clone())
                    .await
                    .map_err(|e| e.to_string())?;
                kept.extend(page.approvals);
                match page.next {
                    Some(next) => query = query.continued(next),
                    None => break,
                }
            }
            if !kept.is_empty() {
                m.rss_per_pending =
                    Some(rss().saturating_sub(rss_before) as f64 / kept.len() as f64);
            }
            drop(kept);
        }
        m.sizes
            .push((name, time_all(&store, a.samples, a.claim_samples).await?));
    }
    Ok(m)
}

/// The bytes of every table (with its indexes and TOAST) in `schema`.
async fn schema_bytes(client: &tokio_postgres::Client, schema: &str) -> Result<i64, String> {
    let row = client
        .query_one(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = $1 AND c.relkind = 'r'",
            &[&schema],
        )
        .await
        .map_err(|e| e.to_string())?;
    Ok(row.get(0))
}

async fn postgres(a: &Args, url: &str) -> Result<Measured, String> {
    let mut m = Measured {
        backend: "postgres",
        sizes: Vec::new(),
        fill_seconds: 0.0,
        bytes_per_pending: None,
        rss_per_pending: None,
    };
    for (name, receipts, pending) in sizes(a) {
        // A schema of its own per size: the store's tables start empty.
        let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        let reuse = a.reuse && name == "filled";
        let schema = if reuse {
            format!("purra_store_scale_{name}")
        } else {
            format!("scale_{name}_{}", std::process::id())
        };
        // Kept from an earlier run: exactly `pending` pending and at least `receipts` decided.
        let held = client
            .query_one(
                "SELECT to_regclass($1) IS NOT NULL",
                &[&format!("\"{schema}\".approvals")],
            )
            .await
            .map_err(|e| e.to_string())?
            .get::<_, bool>(0);
        // With `--reuse`, a schema filled in part (an earlier run stopped) is topped up; one
        // holding more than asked is used as it is.
        let (mut have_receipts, mut have_pending) = (0usize, 0usize);
        if held && reuse {
            let row = client
                .query_one(
                    &format!(
                        "SELECT count(*) FILTER (WHERE state = 'prepared'),
                                count(*) FILTER (WHERE state <> 'prepared')
                         FROM \"{schema}\".approvals"
                    ),
                    &[],
                )
                .await
                .map_err(|e| e.to_string())?;
            let (p, d): (i64, i64) = (row.get(0), row.get(1));
            have_pending = usize::try_from(p).unwrap_or(0);
            have_receipts = usize::try_from(d).unwrap_or(0);
        }
        let kept = held && reuse;
        if !kept {
            (have_receipts, have_pending) = (0, 0);
            client
                .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
                .await
                .map_err(|e| e.to_string())?;
        }
        let store = purra_postgres::PostgresStore::connect_with(
            url,
            purra_postgres::PostgresOptions::default().schema(schema.clone()),
        )
        .await
        .map_err(|e| e.to_string())?;
        if have_receipts < receipts || have_pending < pending {
            let start = Instant::now();
            fill(&store, receipts.saturating_sub(have_receipts), 0, 64).await?;
            let before = schema_bytes(&client, &schema).await?;
            fill(&store, 0, pending - have_pending, 64).await?;
            if name == "filled" {
                m.fill_seconds = start.elapsed().as_secs_f64();
                if pending > have_pending {
                    let after = schema_bytes(&client, &schema).await?;
                    m.bytes_per_pending =
                        Some((after - before) as f64 / (pending - have_pending) as f64);
                }
            }
        }
        m.sizes
            .push((name, time_all(&store, a.samples, a.claim_samples).await?));
        drop(store);
        if !reuse {
            client
                .batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
                .await
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(m)
}

/// `filled p99 / base p99` for `op`.
fn ratio(m: &Measured, base: &str, op: &str) -> Option<f64> {
    let p99 = |size: &str| {
        m.sizes
            .iter()
            .find(|(s, _)| *s == size)?
            .1
            .iter()
            .find(|(o, _, _)| o == op)
            .map(|(_, _, p99)| *p99)
    };
    Some(p99("filled")? / p99(base)?)
}

fn report(m: &Measured) -> Value {
    println!(
        "{}: filled in {:.1} s; store bytes per pending approval {}; RSS per pending approval listed {}",
        m.backend,
        m.fill_seconds,
        m.bytes_per_pending
            .map_or("-".into(), |b| format!("{b:.0}")),
        m.rss_per_pending.map_or("-".into(), |b| format!("{b:.0}")),
    );
    println!(
        "{:<18} {:>22} {:>22} {:>22} {:>14} {:>14}",
        "operation",
        "empty p50/p99 µs",
        "page p50/p99 µs",
        "filled p50/p99 µs",
        "p99 ×empty",
        "p99 ×page"
    );
    let mut rows = Vec::new();
    for op in OPERATIONS {
        let cell = |size: &str| {
            m.sizes
                .iter()
                .find(|(s, _)| *s == size)
                .and_then(|(_, v)| v.iter().find(|(o, _, _)| o == op))
                .map(|(_, p50, p99)| (*p50, *p99))
        };
        let text = |c: Option<(f64, f64)>| c.map_or("-".into(), |(a, b)| format!("{a:.0}/{b:.0}"));
        let (e, p, f) = (cell("empty"), cell("page"), cell("filled"));
        let (re, rp) = (ratio(m, "empty", op), ratio(m, "page", op));
        println!(
            "{op:<18} {:>22} {:>22} {:>22} {:>14} {:>14}",
            text(e),
            text(p),
            text(f),
            re.map_or("-".into(), |r| format!("{r:.2}×")),
            rp.map_or("-".into(), |r| format!("{r:.2}×")),
        );
        rows.push(json!({
            "op": op,
            "empty": e.map(|(a, b)| json!({"p50_us": a, "p99_us": b})),
            "page": p.map(|(a, b)| json!({"p50_us": a, "p99_us": b})),
            "filled": f.map(|(a, b)| json!({"p50_us": a, "p99_us": b})),
            "p99_vs_empty": re,
            "p99_vs_page": rp,
        }));
    }
    json!({
        "backend": m.backend,
        "fill_s": m.fill_seconds,
        "bytes_per_pending": m.bytes_per_pending,
        "rss_per_pending": m.rss_per_pending,
        "rows": rows,
    })
}

/// The gateway's configuration for `--waiting`: one write (the benchmark server's `echo`) that
/// only an operator decides, so each call waits in the gateway for the decision.
fn waiting_config(server: &str, db: &str) -> String {
    format!(
        r#"[gateway]
name = "scale"
db = {db:?}
listen = "stdio"
approval_wait = "600s"
progress_interval = "600s"
max_pending_per_caller = 1000
max_calls_per_minute_per_caller = 60000

[upstreams.bench]
command = [{server:?}]

[writes.note]
upstream = "bench"
tool = "echo"
title = "Echo, bound as a write"
effect = "write"
binding_id = "bench"
binding_revision = "1"
scope_id = "bench"
scope_revision = "1"

[writes.note.scope]
clients = ["store-scale"]
arguments = ["len(text) <= 64"]
"#
    )
}

/// The process whose command line names `needle` (the gateway this program started).
fn pid_naming(needle: &str) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
        let text = String::from_utf8_lossy(&cmdline);
        (text.contains(needle) && text.contains("gateway")).then_some(pid)
    })
}

/// Waits until the store file at `db` holds `n` pending approvals (60 s at most), read with
/// SQLite itself (this program's store would migrate the gateway's file under it).
async fn until_pending(db: &Path, n: u64) -> Result<(), String> {
    let deadline = Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let held: i64 = rusqlite::Connection::open(db)
            .and_then(|c| {
                c.query_row(
                    "SELECT count(*) FROM approvals WHERE state = 'prepared'",
                    [],
                    |r| r.get(0),
                )
            })
            .unwrap_or(0);
        if held >= i64::try_from(n).unwrap_or(i64::MAX) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("{held} calls wait, not {n}"));
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// `--waiting N`: a gateway over stdio holding N write calls waiting for an operator's decision;
/// its resident memory growth per waiting call (after one call waited, so what every gateway
/// allocates once is not counted), and the store's bytes per waiting call.
async fn waiting(a: &Args, purra: &str, server: &str) -> Result<Value, String> {
    use purra_protocol::{Client, ClientOptions, StderrMode, StdioCommand};
    // Absolute: the gateway resolves a relative `db` against its configuration's directory.
    let dir = std::path::absolute(a.dir.join("waiting")).map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let db = dir.join("gateway.db");
    let file = dir.join("gateway.toml");
    // One stdio session runs at most 64 requests at once: the first call and N more.
    if a.waiting > 63 {
        return Err(
            "--waiting holds at most 63 calls (a stdio session runs 64 requests at once)".into(),
        );
    }
    // The gateway resolves a relative command against its configuration's directory.
    let server = std::fs::canonicalize(server).map_err(|e| format!("{server}: {e}"))?;
    let server = server.display().to_string();
    std::fs::write(&file, waiting_config(&server, &db.display().to_string()))
        .map_err(|e| e.to_string())?;
    let mut options = ClientOptions::default().request_timeout(std::time::Duration::from_secs(600));
    options.client_info = purra_protocol::types::Implementation::new("store-scale", "1");
    let config = file.display().to_string();
    let cmd = StdioCommand::new(purra)
        .args(["gateway", "--config", &config])
        .stderr(StderrMode::Null);
    let conn = Arc::new(
        Client::connect_stdio(cmd, options)
            .await
            .map_err(|e| format!("connect: {e}"))?,
    );
    let pid = pid_naming(&config).ok_or("the gateway's process was not found")?;
    let call = |n: usize| {
        let conn = conn.clone();
        tokio::spawn(async move {
            let _ = conn
                .call_tool("note", json!({ "text": format!("waiting {n}") }))
                .await;
        })
    };
    let mut calls = vec![call(0)];
    until_pending(&db, 1).await?;
    tokio::time::sleep(std::time::Duration::from_secs(12)).await;
    let gateway_rss = || purra_bench::rss_of(pid).map_or(0, |(rss, _)| rss);
    // Its threads (tokio's workers and the blocking pool's store calls).
    let threads = || {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Threads:").map(|v| v.trim().to_owned()))
            })
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let (rss_before, file_before, threads_before) = (gateway_rss(), sqlite_files(&db), threads());
    let n = a.waiting;
    calls.extend((1..=n).map(call));
    until_pending(&db, n as u64 + 1).await?;
    // Past the blocking pool's keep-alive (10 s): the threads the burst of prepares started are
    // gone unless a waiting call holds one.
    tokio::time::sleep(std::time::Duration::from_secs(12)).await;
    let (rss_after, file_after, threads_after) = (gateway_rss(), sqlite_files(&db), threads());
    let per_call = rss_after.saturating_sub(rss_before) as f64 / n as f64;
    let per_row = file_after.saturating_sub(file_before) as f64 / n as f64;
    println!(
        "gateway holding {n} waiting write calls: resident {} → {} KiB, {per_call:.0} B per waiting \
         call; its store {per_row:.0} B per waiting call; threads {threads_before} → {threads_after}",
        rss_before / 1024,
        rss_after / 1024
    );
    for c in &calls {
        c.abort();
    }
    conn.close().await;
    Ok(json!({
        "waiting": n,
        "gateway_rss_before": rss_before,
        "gateway_rss_after": rss_after,
        "rss_per_waiting_call": per_call,
        "store_bytes_per_waiting_call": per_row,
        "threads_before": threads_before,
        "threads_after": threads_after,
    }))
}

#[tokio::main]
async fn main() {
    let a = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("store-scale: {e}");
            std::process::exit(2);
        }
    };
    println!(
        "store-scale: {} receipts, {} pending approvals, {} samples per operation, {} claims",
        a.receipts, a.pending, a.samples, a.claim_samples
    );
    let mut all = Vec::new();
    if !a.postgres_only {
        match sqlite(&a).await {
            Ok(m) => all.push(report(&m)),
            Err(e) => {
                eprintln!("store-scale: sqlite: {e}");
                std::process::exit(1);
            }
        }
    }
    if let Some(url) = &a.postgres {
        match postgres(&a, url).await {
            Ok(m) => all.push(report(&m)),
            Err(e) => {
                eprintln!("store-scale: postgres: {e}");
                std::process::exit(1);
            }
        }
    }
    let mut held = Value::Null;
    if a.waiting > 0 {
        let (Some(purra), Some(server)) = (&a.purra, &a.server) else {
            eprintln!("store-scale: --waiting needs --purra and --server");
            std::process::exit(2);
        };
        match waiting(&a, purra, server).await {
            Ok(v) => held = v,
            Err(e) => {
                eprintln!("store-scale: waiting calls: {e}");
                std::process::exit(1);
            }
        }
    }
    println!("{}", json!({ "stores": all, "waiting": held }));
}
