//! The gateway's metrics: one registry of counters, gauges and histograms, read by the
//! Prometheus endpoint (`/metrics`, the text exposition format, [`Metrics::render`]) and by an
//! OTLP exporter (the `purra` binary's, through [`Metrics::snapshot`]), so both say the same.
//!
//! Every family is named in [`FAMILIES`] (name, kind, help); a label set is created on first
//! use, and the effects and verdicts are created at zero when the gateway starts, so
//! `purra_gateway_effects_total{state="unknown"} 0` is there to alert on before the first one.
//! Recording takes one short lock; nothing waits. A family added later is a row of
//! [`FAMILIES`] and calls of [`Metrics::add`] / [`Metrics::observe`], as the webhook deliveries'
//! are (counted from the gateway's own [`crate::webhooks::Observer`]).
//!
//! Label values are ones the gateway controls, never a caller's text: a request's `method` is
//! [`purra_protocol::method_label`]'s (a method MCP defines, else `other`), its `tool` a bound
//! tool's local name or [`UNBOUND`]; upstreams, endpoints and operations come from the
//! configuration and the code. As defence in depth each family keeps at most
//! [`MAX_SERIES_PER_FAMILY`] label sets ([`SERIES_DROPPED`] counts the rest), so neither the
//! registry, a scrape nor an OTLP export (whose attributes are these labels) can grow without
//! bound.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

/// What a family is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (since the process started).
    Counter,
    /// Goes up and down; set, not added.
    Gauge,
    /// Observations in [`BUCKETS`] (seconds), with their sum and count.
    Histogram,
}

/// One family's name, kind and help text.
#[derive(Debug, Clone, Copy)]
pub struct Family {
    /// The metric's name (Prometheus naming: `_total` for counters, units in the name).
    pub name: &'static str,
    /// Counter, gauge or histogram.
    pub kind: Kind,
    /// What it counts.
    pub help: &'static str,
}

/// Downstream requests by method, tool (for `tools/call` and `prompts/get`) and outcome.
pub const REQUESTS: &str = "purra_gateway_requests_total";
/// Downstream request durations by method and tool.
pub const REQUEST_DURATION: &str = "purra_gateway_request_duration_seconds";
/// Whether an upstream is connected and its tools discovered (1) or not (0).
pub const UPSTREAM_UP: &str = "purra_gateway_upstream_up";
/// Reconnections to an upstream after its connection closed.
pub const UPSTREAM_RECONNECTS: &str = "purra_gateway_upstream_reconnects_total";
/// Failed attempts to connect to or discover an upstream.
pub const UPSTREAM_FAILURES: &str = "purra_gateway_upstream_failures_total";
/// Approvals this gateway prepared.
pub const APPROVALS_PREPARED: &str = "purra_gateway_approvals_prepared_total";
/// Approvals waiting for a decision in the store (read when scraped or exported).
pub const APPROVALS_PENDING: &str = "purra_gateway_approvals_pending";
/// Decided approvals this gateway settled, by verdict (`approve`, `deny`).
pub const APPROVALS_DECIDED: &str = "purra_gateway_approvals_decided_total";
/// Outcomes of the writes this gateway dispatched, by state.
pub const EFFECTS: &str = "purra_gateway_effects_total";
/// Store operations' durations by operation.
pub const STORE_DURATION: &str = "purra_gateway_store_operation_duration_seconds";
/// Downstream sessions open (read when scraped or exported).
pub const SESSIONS_OPEN: &str = "purra_gateway_sessions_open";
/// Webhook delivery attempts this process made, by endpoint, event and result.
pub const WEBHOOK_ATTEMPTS: &str = "purra_gateway_webhook_attempts_total";
/// Webhook delivery attempts' durations by endpoint.
pub const WEBHOOK_DURATION: &str = "purra_gateway_webhook_attempt_duration_seconds";
/// Label sets not recorded because their family already had [`MAX_SERIES_PER_FAMILY`].
pub const SERIES_DROPPED: &str = "purra_gateway_metric_series_dropped_total";

/// The most label sets one family keeps. Labels carry only values the gateway controls (a
/// bound tool's name or `(unbound)`, a known method or `other`, configured upstreams and
/// endpoints), so a catalog of some 2000 tools (five outcomes each) fits; it bounds what a
/// mistake could cost (a histogram's label set is about 300 bytes). A new label set past it is not recorded and counts in [`SERIES_DROPPED`].
pub const MAX_SERIES_PER_FAMILY: usize = 10_000;

/// The `tool` label of a `tools/call` or `prompts/get` whose name is not bound: the caller's
/// text is never a label.
pub const UNBOUND: &str = "(unbound)";

/// Every family the gateway records.
pub const FAMILIES: &[Family] = &[
    Family {
        name: REQUESTS,
        kind: Kind::Counter,
        help: "Downstream MCP requests answered, by method, tool and outcome (ok, tool_error, error, cancelled, panic).",
    },
    Family {
        name: REQUEST_DURATION,
        kind: Kind::Histogram,
        help: "Downstream MCP request durations in seconds, by method and tool (a write's includes its wait for a decision).",
    },
    Family {
        name: UPSTREAM_UP,
        kind: Kind::Gauge,
        help: "Whether the upstream is connected with its tools discovered (1) or not (0).",
    },
    Family {
        name: UPSTREAM_RECONNECTS,
        kind: Kind::Counter,
        help: "Reconnections to the upstream after its connection closed.",
    },
    Family {
        name: UPSTREAM_FAILURES,
        kind: Kind::Counter,
        help: "Failed attempts to connect to the upstream or discover its tools.",
    },
    Family {
        name: APPROVALS_PREPARED,
        kind: Kind::Counter,
        help: "Approvals this gateway prepared for write calls.",
    },
    Family {
        name: APPROVALS_PENDING,
        kind: Kind::Gauge,
        help: "Approvals waiting for a decision in the store, whichever gateway prepared them.",
    },
    Family {
        name: APPROVALS_DECIDED,
        kind: Kind::Counter,
        help: "Decided approvals this gateway settled, by verdict (approve, deny).",
    },
    Family {
        name: EFFECTS,
        kind: Kind::Counter,
        help: "Outcomes recorded for the writes this gateway dispatched, by state (committed, not_started, unknown).",
    },
    Family {
        name: STORE_DURATION,
        kind: Kind::Histogram,
        help: "Store operations' durations in seconds, by operation.",
    },
    Family {
        name: SESSIONS_OPEN,
        kind: Kind::Gauge,
        help: "Downstream MCP sessions open.",
    },
    Family {
        name: WEBHOOK_ATTEMPTS,
        kind: Kind::Counter,
        help: "Webhook delivery attempts this gateway made, by endpoint, event and result (delivered, retry, gave_up, gone).",
    },
    Family {
        name: WEBHOOK_DURATION,
        kind: Kind::Histogram,
        help: "Webhook delivery attempts' durations in seconds, by endpoint.",
    },
    Family {
        name: SERIES_DROPPED,
        kind: Kind::Counter,
        help: "Label sets not recorded because their family was full, by family.",
    },
];

/// The histograms' bucket bounds in seconds: a store write's milliseconds to a write's wait for
/// a person's decision.
pub const BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    300.0, 900.0,
];

/// Labels: name and value pairs, in the order they are written.
pub type Labels = Vec<(&'static str, String)>;

/// One label set's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A counter's count.
    Counter(u64),
    /// A gauge's value.
    Gauge(i64),
    /// A histogram: cumulative count per bucket of [`BUCKETS`] (then `+Inf`, which is `count`),
    /// the sum of the observations and their count.
    Histogram {
        /// Observations at most each bound, cumulative.
        buckets: Vec<u64>,
        /// The sum of the observations.
        sum: f64,
        /// How many observations.
        count: u64,
    },
}

/// One family's label sets and values, as [`Metrics::snapshot`] reads them.
#[derive(Debug, Clone)]
pub struct FamilySnapshot {
    /// The family.
    pub family: Family,
    /// Each label set with its value, in label order.
    pub points: Vec<(Labels, Value)>,
}

/// The registry. Cheap to record into; see the module's documentation.
#[derive(Debug)]
pub struct Metrics {
    series: Mutex<Series>,
    /// The most label sets per family ([`MAX_SERIES_PER_FAMILY`]; smaller in tests).
    cap: usize,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics {
            series: Mutex::default(),
            cap: MAX_SERIES_PER_FAMILY,
        }
    }
}

/// Every series, and how many each family has (to hold the cap without counting).
#[derive(Debug, Default)]
struct Series {
    values: BTreeMap<(&'static str, Labels), Value>,
    per_family: BTreeMap<&'static str, usize>,
}

impl Series {
    /// The value of `(name, labels)`, created as `init` when new and the family has room;
    /// `None` (and one more in [`SERIES_DROPPED`]) when it is full.
    fn slot(
        &mut self,
        cap: usize,
        name: &'static str,
        labels: Labels,
        init: impl FnOnce() -> Value,
    ) -> Option<&mut Value> {
        let key = (name, labels);
        if !self.values.contains_key(&key) {
            let n = self.per_family.entry(name).or_insert(0);
            if *n >= cap && name != SERIES_DROPPED {
                let dropped = (SERIES_DROPPED, vec![("family", name.to_owned())]);
                if !self.values.contains_key(&dropped) {
                    *self.per_family.entry(SERIES_DROPPED).or_insert(0) += 1;
                }
                if let Value::Counter(c) = self.values.entry(dropped).or_insert(Value::Counter(0)) {
                    *c += 1;
                }
                return None;
            }
            *n += 1;
            self.values.insert(key.clone(), init());
        }
        self.values.get_mut(&key)
    }
}

impl Series {
    /// Records `duration` in the histogram `(name, labels)` and gives the labels back (a caller
    /// recording more under the same labels reuses them).
    fn observe_in(
        &mut self,
        cap: usize,
        name: &'static str,
        labels: Labels,
        duration: Duration,
    ) -> Labels {
        let secs = duration.as_secs_f64();
        let key = (name, labels);
        // Whether the histogram exists, recording the observation when it does.
        let record = |values: &mut BTreeMap<(&'static str, Labels), Value>| {
            let Some(Value::Histogram {
                buckets,
                sum,
                count,
            }) = values.get_mut(&key)
            else {
                return false;
            };
            for (b, bound) in buckets.iter_mut().zip(BUCKETS) {
                if secs <= *bound {
                    *b += 1;
                }
            }
            *sum += secs;
            *count += 1;
            true
        };
        // One look-up for a series that exists (every request's but the first); a new one is
        // made first (or, the family being full, counted as dropped and not recorded).
        if !record(&mut self.values) {
            self.slot(cap, name, key.1.clone(), || Value::Histogram {
                buckets: vec![0; BUCKETS.len()],
                sum: 0.0,
                count: 0,
            });
            record(&mut self.values);
        }
        key.1
    }
}

fn family(name: &str) -> &'static Family {
    FAMILIES
        .iter()
        .find(|f| f.name == name)
        .expect("every recorded family is in FAMILIES")
}

impl Metrics {
    /// A registry with the series that must exist before anything happened: every effect
    /// state and verdict at zero.
    pub fn new() -> Metrics {
        Metrics::with_cap(MAX_SERIES_PER_FAMILY)
    }

    /// [`Metrics::new`] keeping at most `cap` label sets per family.
    fn with_cap(cap: usize) -> Metrics {
        let m = Metrics {
            series: Mutex::default(),
            cap,
        };
        for state in ["committed", "not_started", "unknown"] {
            m.add(EFFECTS, vec![("state", state.to_owned())], 0);
        }
        for verdict in ["approve", "deny"] {
            m.add(APPROVALS_DECIDED, vec![("verdict", verdict.to_owned())], 0);
        }
        m.add(APPROVALS_PREPARED, Vec::new(), 0);
        m
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Series> {
        self.series.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One answered request: its duration in [`REQUEST_DURATION`] under `labels`, and one more
    /// in [`REQUESTS`] under `labels` and `("outcome", outcome)`, under one lock and with one
    /// label set (what [`Metrics::observe`] then [`Metrics::add`] would record).
    pub fn request(&self, labels: Labels, outcome: &str, duration: Duration) {
        let mut series = self.lock();
        let mut labels = series.observe_in(self.cap, REQUEST_DURATION, labels, duration);
        labels.push(("outcome", outcome.to_owned()));
        let key = (REQUESTS, labels);
        if let Some(Value::Counter(c)) = series.values.get_mut(&key) {
            *c += 1;
            return;
        }
        let labels = key.1;
        if let Some(Value::Counter(c)) =
            series.slot(self.cap, REQUESTS, labels, || Value::Counter(0))
        {
            *c += 1;
        }
    }

    /// Adds `n` to a counter.
    pub fn add(&self, name: &'static str, labels: Labels, n: u64) {
        debug_assert_eq!(family(name).kind, Kind::Counter, "{name}");
        let mut series = self.lock();
        if let Some(Value::Counter(c)) = series.slot(self.cap, name, labels, || Value::Counter(0)) {
            *c += n;
        }
    }

    /// Sets a counter kept elsewhere (an upstream's reconnections) to its current count.
    pub fn set_count(&self, name: &'static str, labels: Labels, count: u64) {
        debug_assert_eq!(family(name).kind, Kind::Counter, "{name}");
        if let Some(v) = self
            .lock()
            .slot(self.cap, name, labels, || Value::Counter(0))
        {
            *v = Value::Counter(count);
        }
    }

    /// Sets a gauge.
    pub fn set(&self, name: &'static str, labels: Labels, value: i64) {
        debug_assert_eq!(family(name).kind, Kind::Gauge, "{name}");
        if let Some(v) = self.lock().slot(self.cap, name, labels, || Value::Gauge(0)) {
            *v = Value::Gauge(value);
        }
    }

    /// Removes a series (a gauge of an upstream a reload removed): it is no longer exported.
    pub fn forget(&self, name: &'static str, labels: Labels) {
        let mut series = self.lock();
        if series.values.remove(&(name, labels)).is_some() {
            if let Some(n) = series.per_family.get_mut(name) {
                *n = n.saturating_sub(1);
            }
        }
    }

    /// Adds one observation to a histogram.
    pub fn observe(&self, name: &'static str, labels: Labels, duration: Duration) {
        debug_assert_eq!(family(name).kind, Kind::Histogram, "{name}");
        self.lock().observe_in(self.cap, name, labels, duration);
    }

    /// How many label sets are recorded, in all families: what [`MAX_SERIES_PER_FAMILY`]
    /// bounds.
    pub fn series_count(&self) -> usize {
        self.lock().values.len()
    }

    /// Times `fut` as store operation `operation`.
    pub async fn store<T>(
        &self,
        operation: &'static str,
        fut: impl std::future::Future<Output = T>,
    ) -> T {
        let started = std::time::Instant::now();
        let out = fut.await;
        self.observe(
            STORE_DURATION,
            vec![("operation", operation.to_owned())],
            started.elapsed(),
        );
        out
    }

    /// A counter's or gauge's current value (0 when the label set was never recorded); a
    /// histogram's count.
    pub fn value(&self, name: &'static str, labels: &[(&'static str, &str)]) -> u64 {
        let key: Labels = labels.iter().map(|(k, v)| (*k, (*v).to_owned())).collect();
        match self.lock().values.get(&(name, key)) {
            Some(Value::Counter(c)) => *c,
            Some(Value::Gauge(g)) => u64::try_from(*g).unwrap_or(0),
            Some(Value::Histogram { count, .. }) => *count,
            None => 0,
        }
    }

    /// Every family with its series, in [`FAMILIES`]' order (families without a series left
    /// out).
    pub fn snapshot(&self) -> Vec<FamilySnapshot> {
        let series = self.lock();
        FAMILIES
            .iter()
            .filter_map(|f| {
                let points: Vec<(Labels, Value)> = series
                    .values
                    .range((f.name, Vec::new())..)
                    .take_while(|((name, _), _)| *name == f.name)
                    .map(|((_, labels), v)| (labels.clone(), v.clone()))
                    .collect();
                (!points.is_empty()).then_some(FamilySnapshot { family: *f, points })
            })
            .collect()
    }

    /// The Prometheus text exposition format (version 0.0.4) of every series.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for snap in self.snapshot() {
            let f = snap.family;
            let kind = match f.kind {
                Kind::Counter => "counter",
                Kind::Gauge => "gauge",
                Kind::Histogram => "histogram",
            };
            let _ = writeln!(out, "# HELP {} {}", f.name, f.help);
            let _ = writeln!(out, "# TYPE {} {kind}", f.name);
            for (labels, value) in &snap.points {
                match value {
                    Value::Counter(c) => {
                        let _ = writeln!(out, "{}{} {c}", f.name, label_text(labels, None));
                    }
                    Value::Gauge(g) => {
                        let _ = writeln!(out, "{}{} {g}", f.name, label_text(labels, None));
                    }
                    Value::Histogram {
                        buckets,
                        sum,
                        count,
                    } => {
                        for (b, bound) in buckets.iter().zip(BUCKETS) {
                            let le = bound.to_string();
                            let _ = writeln!(
                                out,
                                "{}_bucket{} {b}",
                                f.name,
                                label_text(labels, Some(&le))
                            );
                        }
                        let _ = writeln!(
                            out,
                            "{}_bucket{} {count}",
                            f.name,
                            label_text(labels, Some("+Inf"))
                        );
                        let _ = writeln!(out, "{}_sum{} {sum}", f.name, label_text(labels, None));
                        let _ =
                            writeln!(out, "{}_count{} {count}", f.name, label_text(labels, None));
                    }
                }
            }
        }
        out
    }
}

/// `{a="x",b="y"}` (with `le` last for a bucket), escaped as the format says; empty without
/// labels.
fn label_text(labels: &Labels, le: Option<&str>) -> String {
    if labels.is_empty() && le.is_none() {
        return String::new();
    }
    let mut out = String::from("{");
    let mut first = true;
    let all = labels
        .iter()
        .map(|(k, v)| (*k, v.as_str()))
        .chain(le.map(|le| ("le", le)));
    for (k, v) in all {
        if !first {
            out.push(',');
        }
        first = false;
        out.push_str(k);
        out.push_str("=\"");
        for c in v.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        out.push('"');
    }
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_records_what_observe_then_add_record() {
        let labels =
            || -> Labels { vec![("method", "tools/call".into()), ("tool", "echo".into())] };
        let with_outcome = |outcome: &str| {
            let mut l = labels();
            l.push(("outcome", outcome.to_owned()));
            l
        };
        let (one, other) = (Metrics::new(), Metrics::new());
        for (outcome, ms) in [("ok", 3), ("ok", 700), ("tool_error", 30)] {
            let d = Duration::from_millis(ms);
            one.request(labels(), outcome, d);
            other.observe(REQUEST_DURATION, labels(), d);
            other.add(REQUESTS, with_outcome(outcome), 1);
        }
        assert_eq!(one.render(), other.render());
        assert_eq!(
            one.value(
                REQUESTS,
                &[
                    ("method", "tools/call"),
                    ("tool", "echo"),
                    ("outcome", "ok")
                ]
            ),
            2
        );
        // A full family drops the new label set and counts it, as `observe` does.
        let (full, other) = (Metrics::with_cap(1), Metrics::with_cap(1));
        for tool in ["a", "b"] {
            let l = || {
                vec![
                    ("method", "tools/call".to_owned()),
                    ("tool", tool.to_owned()),
                ]
            };
            full.request(l(), "ok", Duration::from_millis(1));
            other.observe(REQUEST_DURATION, l(), Duration::from_millis(1));
            let mut l = l();
            l.push(("outcome", "ok".to_owned()));
            other.add(REQUESTS, l, 1);
        }
        assert_eq!(full.render(), other.render());
        assert_eq!(
            full.value(SERIES_DROPPED, &[("family", REQUEST_DURATION)]),
            1
        );
    }

    #[test]
    fn the_exposition_is_exact() {
        let m = Metrics::new();
        m.add(
            REQUESTS,
            vec![
                ("method", "tools/call".into()),
                ("tool", "say \"hi\"\\".into()),
                ("outcome", "ok".into()),
            ],
            2,
        );
        m.set(UPSTREAM_UP, vec![("upstream", "values".into())], 1);
        m.observe(
            STORE_DURATION,
            vec![("operation", "claim".into())],
            Duration::from_millis(3),
        );
        m.add(EFFECTS, vec![("state", "committed".into())], 1);
        let text = m.render();
        assert!(text.contains(
            "# TYPE purra_gateway_requests_total counter\npurra_gateway_requests_total{method=\"tools/call\",tool=\"say \\\"hi\\\"\\\\\",outcome=\"ok\"} 2\n"
        ), "{text}");
        assert!(
            text.contains("purra_gateway_upstream_up{upstream=\"values\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("purra_gateway_effects_total{state=\"committed\"} 1\npurra_gateway_effects_total{state=\"not_started\"} 0\npurra_gateway_effects_total{state=\"unknown\"} 0\n"), "{text}");
        assert!(
            text.contains("purra_gateway_approvals_prepared_total 0\n"),
            "{text}"
        );
        assert!(text.contains("purra_gateway_store_operation_duration_seconds_bucket{operation=\"claim\",le=\"0.0025\"} 0\npurra_gateway_store_operation_duration_seconds_bucket{operation=\"claim\",le=\"0.005\"} 1\n"), "{text}");
        assert!(text.contains("purra_gateway_store_operation_duration_seconds_bucket{operation=\"claim\",le=\"+Inf\"} 1\npurra_gateway_store_operation_duration_seconds_sum{operation=\"claim\"} 0.003\npurra_gateway_store_operation_duration_seconds_count{operation=\"claim\"} 1\n"), "{text}");
        // Families without a series are left out.
        assert!(!text.contains(SESSIONS_OPEN), "{text}");
        assert_eq!(m.value(EFFECTS, &[("state", "unknown")]), 0);
        assert_eq!(m.value(EFFECTS, &[("state", "committed")]), 1);
    }

    #[test]
    fn a_full_family_drops_new_label_sets_and_counts_them() {
        let m = Metrics::with_cap(3);
        for i in 0..10 {
            let labels = vec![("upstream", format!("u{i}"))];
            m.set(UPSTREAM_UP, labels.clone(), 1);
            m.observe(
                WEBHOOK_DURATION,
                vec![("endpoint", format!("e{i}"))],
                Duration::ZERO,
            );
        }
        // A series that exists is still recorded into.
        m.set(UPSTREAM_UP, vec![("upstream", "u0".into())], 0);
        assert_eq!(m.value(UPSTREAM_UP, &[("upstream", "u2")]), 1);
        assert_eq!(m.value(UPSTREAM_UP, &[("upstream", "u3")]), 0);
        assert_eq!(m.value(SERIES_DROPPED, &[("family", UPSTREAM_UP)]), 7);
        assert_eq!(m.value(SERIES_DROPPED, &[("family", WEBHOOK_DURATION)]), 7);
        // Effects (3), verdicts (2), prepared (1), 3 + 3 recorded, 2 dropped counters.
        assert_eq!(m.series_count(), 14);
        // A forgotten series makes room for one more.
        m.forget(UPSTREAM_UP, vec![("upstream", "u1".into())]);
        m.set(UPSTREAM_UP, vec![("upstream", "u9".into())], 1);
        assert_eq!(m.value(UPSTREAM_UP, &[("upstream", "u9")]), 1);
        assert_eq!(m.value(SERIES_DROPPED, &[("family", UPSTREAM_UP)]), 7);
        let text = m.render();
        assert!(text.contains("purra_gateway_metric_series_dropped_total{family=\"purra_gateway_upstream_up\"} 7\n"), "{text}");
    }
}
