//! The side-by-side benchmark suite's shared parts (`bench/run.sh` runs it): the result line every
//! stdio benchmark client prints, latency statistics, and a raw Streamable HTTP client that any
//! MCP server can be measured with; per-round pairing of measurements into ratios with their
//! spread (`rounds`); Criterion benchmarks of purra-core and purra-sqlite are in
//! `benches/`.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub mod http;
pub mod rounds;
pub mod svg;

/// One sorted set of latencies in microseconds.
#[derive(Debug, Clone, Default)]
pub struct Latencies(Vec<f64>);

impl Latencies {
    /// Latencies from unsorted samples in microseconds.
    pub fn new(mut samples: Vec<f64>) -> Latencies {
        samples.sort_by(f64::total_cmp);
        Latencies(samples)
    }

    /// The `q` quantile (0..=1), nearest-rank below; 0 when empty.
    pub fn quantile(&self, q: f64) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        self.0[((self.0.len() as f64 - 1.0) * q) as usize]
    }
}

/// The median of `v` (the mean of the two middle values for an even count); 0 when empty.
pub fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The arguments every stdio benchmark client takes:
/// `--calls N --concurrency K -- SERVER COMMAND...`.
#[derive(Debug, Clone)]
pub struct ClientArgs {
    /// Calls measured one at a time, and again with `concurrency` in flight.
    pub calls: usize,
    /// Calls in flight in the second phase.
    pub concurrency: usize,
    /// The server command.
    pub command: Vec<String>,
}

impl ClientArgs {
    /// Parses the process's arguments; `Err` says what is wrong.
    pub fn from_env() -> Result<ClientArgs, String> {
        ClientArgs::parse(std::env::args().skip(1))
    }

    /// Parses `args` (without the program name); `Err` says what is wrong.
    pub fn parse(mut args: impl Iterator<Item = String>) -> Result<ClientArgs, String> {
        let mut out = ClientArgs {
            calls: 20_000,
            concurrency: 16,
            command: Vec::new(),
        };
        while let Some(a) = args.next() {
            let mut num = |what: &str| -> Result<usize, String> {
                args.next()
                    .and_then(|v| v.parse().ok())
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("{what} needs a positive number"))
            };
            match a.as_str() {
                "--calls" => out.calls = num("--calls")?,
                "--concurrency" => out.concurrency = num("--concurrency")?,
                "--" => out.command.extend(args.by_ref()),
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        if out.command.is_empty() {
            return Err("usage: CLIENT [--calls N] [--concurrency K] -- SERVER COMMAND...".into());
        }
        Ok(out)
    }
}

/// The text the `n`th `echo` call sends and expects back.
pub fn echo_text(n: usize) -> String {
    format!("hello, purra {n}")
}

/// The JSON line a stdio benchmark client prints: sequential calls per second with their p50 and
/// p99, and calls per second with `concurrency` in flight.
pub fn result_line(
    client: &str,
    calls: usize,
    sequential: Duration,
    latencies: &Latencies,
    concurrency: usize,
    concurrent_calls: usize,
    concurrent: Duration,
) -> Value {
    json!({
        "client": client,
        "calls": calls,
        "sequential_calls_per_s": (calls as f64 / sequential.as_secs_f64()).round(),
        "p50_us": latencies.quantile(0.5).round(),
        "p99_us": latencies.quantile(0.99).round(),
        "concurrency": concurrency,
        "concurrent_calls_per_s": (concurrent_calls as f64 / concurrent.as_secs_f64()).round(),
    })
}

/// Microseconds since `t`.
pub fn micros_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e6
}

/// The resident set size (`VmRSS`) and its peak (`VmHWM`) of process `pid`, in bytes, from
/// `/proc/PID/status`.
pub fn rss_of(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        let kib: u64 = line[name.len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some(kib * 1024)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// A fresh approval request for the store benchmarks: its arguments (and so its intent digest and
/// idempotency key) differ on every call and in every process; `tag` names what they are for.
pub fn fresh_request(tag: &str) -> purra_core::ApprovalRequest {
    use purra_core::{
        json_identity, ApprovalBinding, ApprovalIntent, ApprovalRequest, CheckpointCall, RunId,
    };
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    // The process's own prefix: a store kept between runs (`store-scale --reuse`) already
    // holds the calls an earlier run made with the same counter.
    static RUN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let run = RUN.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        format!("{:x}{:x}-", std::process::id(), nanos & 0xFFFF_FFFF_FFFF)
    });
    let n = format!("{run}{}", NEXT.fetch_add(1, Ordering::Relaxed));
    let id = |v: Value| json_identity(&v).expect("I-JSON");
    let arguments = json!({"id": format!("doc-{tag}{n}"), "text": "hello"});
    let binding = ApprovalBinding {
        binding_id: "documents".into(),
        binding_revision: "1".into(),
        scope_id: "sandbox".into(),
        scope_revision: "1".into(),
    };
    ApprovalRequest {
        intent: ApprovalIntent {
            tool: "update_document".into(),
            arguments_digest: id(arguments.clone()),
            approval_binding: binding.identity(),
            checkpoint_call: CheckpointCall {
                call_id: format!("call-{tag}{n}"),
                tool: "update_document".into(),
            },
            run_id: RunId::new(format!("run-{tag}{n}")),
            preset_fingerprint: id(json!("preset")),
        },
        arguments,
        binding,
        requested_by: "writer".into(),
        requested_at: std::time::SystemTime::now(),
        expires_at: None,
        labels: Default::default(),
    }
}

/// One approve-claim-commit cycle on an approval prepared before: `decide` (approve),
/// `check_and_claim`, then `complete` (committed with a small receipt), the three durable
/// transactions a resumed run makes for one approved write. The store benchmarks of every backend
/// time this; it returns the claimed key.
pub async fn approve_claim_commit<S>(
    store: &S,
    id: purra_core::ApprovalId,
    intent: &purra_core::ApprovalIntent,
) -> Result<purra_core::IdempotencyKey, String>
where
    S: purra_core::ApprovalGateway + purra_core::IdempotencyStore,
{
    use purra_core::{ClaimVerdict, Decision, EffectOutcome, Verdict};
    use std::time::SystemTime;
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
    let key = match store
        .check_and_claim(id, intent.digest(), SystemTime::now())
        .await
    {
        Ok(ClaimVerdict::Claimed(key)) => key,
        other => return Err(format!("claim: {other:?}")),
    };
    let receipt = serde_json::json!({"updated": intent.checkpoint_call.call_id});
    store
        .complete(key.clone(), EffectOutcome::Committed { receipt })
        .await
        .map_err(|e| e.to_string())?;
    Ok(key)
}
