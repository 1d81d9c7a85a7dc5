//! The store at scale (issue 50, item 7): `store-scale` each round on SQLite (and PostgreSQL when
//! the suite has a server), its stores filled once per run (100 000 completed write cycles and
//! 10 000 pending approvals, kept between rounds with `--reuse`) beside an empty store and one
//! holding a page's worth; the p99 of `purra approvals list`'s reads, the page's pending and
//! history views and a new write's claim, as ratios filled ÷ empty paired round by round.

use std::fmt::Write as _;
use std::time::Duration;

use purra_bench::rounds::Spread;

use super::{fmt_ratio, run_json, Env, Results};

/// The operations `store-scale` times, with what each one is.
const OPERATIONS: &[(&str, &str)] = &[
    (
        "list",
        "`purra approvals list` (a page of 50 and how many are older)",
    ),
    ("pending", "the page's pending view (`GET /`)"),
    ("pending_fragment", "the pending list the script re-reads"),
    ("history", "the page's history view (`GET /history`)"),
    ("history_fragment", "the history list the script re-reads"),
    ("claim", "a new write's claim (a durable commit)"),
];

/// The store sizes `store-scale` measures.
const SIZES: &[&str] = &["empty", "page", "filled"];

/// Where the filled stores are kept between rounds.
const DIR: &str = "target/bench/scale";

/// The target: the filled store's p99 at most this many times the empty store's.
pub(super) const AT_MOST: f64 = 2.0;

/// One round: `store-scale` on SQLite and, with `postgres`, on PostgreSQL too.
pub(super) async fn round(env: &Env, res: &mut Results, quick: bool, postgres: Option<&str>) {
    let mut cmd = vec![
        env.bin("store-scale"),
        "--dir".into(),
        DIR.into(),
        "--reuse".into(),
        "--samples".into(),
        if quick { "20" } else { "200" }.into(),
        // A claim's p99 is its `fsync`'s tail: over 200 samples the second slowest.
        "--claim-samples".into(),
        if quick { "20" } else { "1000" }.into(),
    ];
    if quick {
        cmd.extend(["--receipts".into(), "2000".into()]);
        cmd.extend(["--pending".into(), "200".into()]);
    }
    cmd.extend([
        "--waiting".into(),
        "60".into(),
        "--purra".into(),
        env.bin("purra"),
        "--server".into(),
        env.bin("purra-bench-server"),
    ]);
    if let Some(url) = postgres {
        cmd.extend(["--postgres".into(), url.into()]);
    }
    match run_json(&cmd, Duration::from_secs(1800)).await {
        Ok(v) => {
            for (key, what) in [
                ("rss_per_waiting_call", "scale/gateway/rss-per-waiting-call"),
                (
                    "store_bytes_per_waiting_call",
                    "scale/gateway/store-per-waiting-call",
                ),
            ] {
                match v["waiting"][key].as_f64() {
                    Some(x) => res.put(what, x),
                    None => res.fail(what, format!("no {key} in {}", v["waiting"])),
                }
            }
            let Some(stores) = v["stores"].as_array() else {
                res.fail("scale", format!("no stores in {v}"));
                return;
            };
            for store in stores {
                let backend = store["backend"].as_str().unwrap_or("?");
                for (key, what) in [
                    ("bytes_per_pending", "bytes-per-pending"),
                    ("rss_per_pending", "rss-per-pending"),
                    ("fill_s", "fill-s"),
                ] {
                    if let Some(x) = store[key].as_f64() {
                        res.put(&format!("scale/{backend}/{what}"), x);
                    }
                }
                for row in store["rows"].as_array().into_iter().flatten() {
                    let op = row["op"].as_str().unwrap_or("?");
                    for size in SIZES {
                        if let Some(p99) = row[*size]["p99_us"].as_f64() {
                            res.put(&format!("scale/{backend}/{size}/{op}"), p99);
                        }
                    }
                }
            }
        }
        Err(e) => res.fail("scale", e),
    }
}

/// The backends measured in this run.
fn backends(res: &Results) -> Vec<&'static str> {
    ["sqlite", "postgres"]
        .into_iter()
        .filter(|b| res.median(&format!("scale/{b}/filled/list")).is_some())
        .collect()
}

/// A p99 cell: the median over rounds in µs.
fn micros(res: &Results, key: &str) -> String {
    res.median(key)
        .map_or_else(|| "—".to_owned(), |v| format!("{v:.0} µs"))
}

/// The filled store's p99 ÷ `base`'s, paired round by round.
fn ratio(res: &Results, backend: &str, base: &str, op: &str) -> Option<Spread> {
    res.paired(
        &format!("scale/{backend}/filled/{op}"),
        &format!("scale/{backend}/{base}/{op}"),
    )
}

/// The section's table: every operation's p99 per store size and the ratios.
pub(super) fn report(res: &Results, s: &mut String) {
    let backends = backends(res);
    if backends.is_empty() && !res.failed("scale") {
        return;
    }
    let _ = writeln!(s, "\n### The store at scale\n");
    let _ = writeln!(
        s,
        "`store-scale`: each operation timed one at a time (200 samples a round, a claim \
         1 000: its p99 is an `fsync`'s tail), its p99 on an empty store, on one holding a \
         page's worth (60 receipts, 60 pending) and on one filled through the store's APIs with \
         100 000 completed write cycles and 10 000 pending approvals \
         (filled once per run). The page's views are `GET`s over HTTP from a page served in \
         process, signed in. Ratios of p99s, paired round by round. PostgreSQL's rows are measured \
         when `store-scale` is given a server: `--scale-postgres`, or `PURRA_BENCH_POSTGRES` \
         (which `bench/run.sh` sets to its own server).\n"
    );
    for (key, why) in res.failures.iter().filter(|(k, _)| k.starts_with("scale")) {
        let _ = writeln!(s, "FAILED {key}: {why}\n");
    }
    waiting_line(res, s);
    for backend in backends {
        let _ = writeln!(
            s,
            "| {backend}: operation | empty p99 | page's worth p99 | filled p99 | filled ÷ empty | filled ÷ page's worth |"
        );
        let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|");
        for (op, what) in OPERATIONS {
            let key = |size: &str| format!("scale/{backend}/{size}/{op}");
            let _ = writeln!(
                s,
                "| {what} | {} | {} | {} | {} | {} |",
                micros(res, &key("empty")),
                micros(res, &key("page")),
                micros(res, &key("filled")),
                fmt_ratio(ratio(res, backend, "empty", op)),
                fmt_ratio(ratio(res, backend, "page", op)),
            );
        }
        let per = |what: &str| {
            res.median(&format!("scale/{backend}/{what}"))
                .map_or_else(|| "—".to_owned(), |v| format!("{v:.0} B"))
        };
        let _ = writeln!(
            s,
            "\n{backend}: the store grows by {} per pending approval (with its waiting run); \
             listing all of them, page by page, grows this process by {} per approval held.\n",
            per("bytes-per-pending"),
            per("rss-per-pending"),
        );
    }
}

/// The memory a gateway holds per write call waiting for its approval.
fn waiting_line(res: &Results, s: &mut String) {
    let b = |key: &str| {
        res.median(key)
            .map_or_else(|| "FAILED".to_owned(), |v| format!("{v:.0} B"))
    };
    let _ = writeln!(
        s,
        "A `purra gateway` (SQLite) holding 60 write calls over one stdio session (it runs 64 at once) waiting for an operator's \
         decision grows by {} resident per waiting call, its store by {} per waiting call (the \
         approval with the call's saved run).\n",
        b("scale/gateway/rss-per-waiting-call"),
        b("scale/gateway/store-per-waiting-call"),
    );
}

/// The targets' rows: each operation's filled p99 within 2× that of a store holding one page of
/// each list (an empty store lists nothing, so a view's p99 on it measures an empty page: its
/// ratio is in the section's table).
pub(super) fn targets(res: &Results, s: &mut String) {
    for backend in backends(res) {
        for (op, what) in OPERATIONS {
            let r = ratio(res, backend, "page", op);
            let verdict = match r {
                Some(r) if r.median <= AT_MOST => "met",
                Some(_) => "not met",
                None => "FAILED",
            };
            let _ = writeln!(
                s,
                "| store at scale ({backend}): {what}, p99 with 100 000 receipts and 10 000 pending ≤ {AT_MOST}× with a page's worth | {} | {verdict} |",
                fmt_ratio(r)
            );
        }
    }
}
