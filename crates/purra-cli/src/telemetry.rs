//! What `purra` says about itself: the log lines on stderr (text, or with `--log-format json` one
//! JSON object a line, trace ids included), and with the `otel` feature the OpenTelemetry bridge
//! and the OTLP/HTTP exporters (spans, and the gateway's metrics) when an endpoint is
//! configured (`[telemetry] otlp_endpoint`, else `OTEL_EXPORTER_OTLP_ENDPOINT`).
//!
//! Levels: without `-v` nothing is written in text (as before), and in JSON purra's events at
//! info and above; `-v` purra's spans and events at debug, `-vv` at trace with other crates' at
//! debug. Nothing purra logs below `-vv` carries a token, an argument value or an upstream's
//! text (spans name methods, tools, outcomes and codes).

use std::io::{IsTerminal, Write};
use std::sync::OnceLock;

use clap::ValueEnum;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;
use tracing_subscriber::prelude::*;

/// How log lines are written on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum LogFormat {
    /// Lines for people (`purra gateway: ...`, tracing's own format with `-v`).
    #[default]
    Text,
    /// One JSON object a line: `timestamp`, `level`, `target`, `message`, the event's `fields`,
    /// `span` (the innermost span's `name` and fields) and `spans` (all of them, outermost
    /// first), and `trace_id` / `span_id` inside a traced span.
    Json,
}

static FORMAT: OnceLock<LogFormat> = OnceLock::new();
static VERBOSE: OnceLock<u8> = OnceLock::new();

/// How many `-v` were given (0 until telemetry started).
pub fn verbose() -> u8 {
    VERBOSE.get().copied().unwrap_or(0)
}

/// The format chosen at start (text until then).
pub fn format() -> LogFormat {
    FORMAT.get().copied().unwrap_or_default()
}

/// Where and as what the spans (and the gateway's metrics) are exported.
#[derive(Debug, Clone, Default)]
pub struct Export {
    /// The OTLP/HTTP collector's base URL; none: nothing is exported.
    pub endpoint: Option<String>,
    /// `service.name`.
    #[cfg_attr(not(feature = "otel"), allow(dead_code))]
    pub service_name: String,
}

impl Export {
    /// The exporter the environment asks for (`OTEL_EXPORTER_OTLP_ENDPOINT`,
    /// `OTEL_SERVICE_NAME`), with `service` as the default name.
    pub fn from_env(service: &str) -> Export {
        Export::configured(None, None, service)
    }

    /// The exporter of a configuration file (`endpoint`, `name`), else the environment's.
    pub fn configured(endpoint: Option<&str>, name: Option<&str>, service: &str) -> Export {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        Export {
            endpoint: endpoint
                .map(str::to_owned)
                .or_else(|| env("OTEL_EXPORTER_OTLP_ENDPOINT"))
                .map(|e| e.trim().trim_end_matches('/').to_owned()),
            service_name: name
                .map(str::to_owned)
                .or_else(|| env("OTEL_SERVICE_NAME"))
                .unwrap_or_else(|| service.to_owned()),
        }
    }
}

/// The installed telemetry; [`Telemetry::shutdown`] sends what is still buffered.
#[derive(Default)]
pub struct Telemetry {
    #[cfg(feature = "otel")]
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl Telemetry {
    /// Ends the exporter, sending the spans still buffered (call before the runtime stops:
    /// the requests run on it). Blocks: call it outside the runtime's tasks.
    pub fn shutdown(self) {
        #[cfg(feature = "otel")]
        if let Some(p) = self.provider {
            let _ = p.shutdown();
        }
    }

    /// [`Telemetry::shutdown`] from a task: it blocks a thread of its own.
    pub async fn shutdown_async(self) {
        let _ = tokio::task::spawn_blocking(move || self.shutdown()).await;
    }
}

/// purra's own crates (and the binary's target).
const OURS: [&str; 8] = [
    "purra_protocol",
    "purra_mcp",
    "purra_core",
    "purra_sqlite",
    "purra_postgres",
    "purra_gateway",
    "purra_page",
    "purra",
];

/// Installs the subscriber: log lines in `log` format at `verbose`'s levels, and the
/// OpenTelemetry layer when exporting (or, for trace ids in JSON lines, when logging JSON).
/// Must run inside the runtime (the exporter sends on it).
pub fn init(verbose: u8, log: LogFormat, export: &Export) -> Result<Telemetry, String> {
    let _ = FORMAT.set(log);
    let _ = VERBOSE.set(verbose);
    let (ours, others) = match (verbose, log) {
        (0, LogFormat::Text) => (LevelFilter::OFF, LevelFilter::OFF),
        (0, LogFormat::Json) => (LevelFilter::INFO, LevelFilter::OFF),
        (1, _) => (LevelFilter::DEBUG, LevelFilter::OFF),
        _ => (LevelFilter::TRACE, LevelFilter::DEBUG),
    };
    let filter = Targets::new()
        .with_default(others)
        .with_targets(OURS.map(|t| (t, ours)));
    let text = (log == LogFormat::Text && verbose > 0).then(|| {
        tracing_subscriber::fmt::layer()
            .fmt_fields(text_fields())
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal())
            .with_target(false)
            .with_filter(filter.clone())
    });
    let json = (log == LogFormat::Json).then(|| {
        let fields = SpanFields.with_filter(filter.clone());
        let lines = tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .event_format(JsonLines)
            .with_filter(filter);
        fields.and_then(lines)
    });
    // The OpenTelemetry layer first: a span's context is active when the JSON layers see it
    // entered, so they can note its ids.
    #[cfg(feature = "otel")]
    {
        // Without an exporter, spans are made only for the ids of JSON lines that show them.
        let (layer, provider) =
            if export.endpoint.is_some() || (log == LogFormat::Json && verbose > 0) {
                let (layer, provider) = otel::layer(export)?;
                (Some(layer), Some(provider))
            } else {
                (None, None)
            };
        tracing_subscriber::registry()
            .with(layer)
            .with(text)
            .with(json)
            .try_init()
            .map_err(|e| e.to_string())?;
        Ok(Telemetry { provider })
    }
    #[cfg(not(feature = "otel"))]
    {
        if export.endpoint.is_some() {
            return Err(
                "this purra was built without the otel feature: it cannot export over OTLP".into(),
            );
        }
        tracing_subscriber::registry()
            .with(text)
            .with(json)
            .try_init()
            .map_err(|e| e.to_string())?;
        Ok(Telemetry::default())
    }
}

/// How many characters of one field's value a text log line shows.
const LOG_VALUE_MAX_CHARS: usize = 4096;

/// The text format's fields (`-v`): each value on one line, its control and invisible
/// characters escaped and bounded ([`purra_core::visible::one_line`]). A value may be a method
/// name or a URI a client sent, and tracing writes `%` values as they are: a newline there
/// would forge a log line, an escape sequence drive the terminal.
fn text_fields() -> impl for<'w> tracing_subscriber::fmt::FormatFields<'w> + 'static {
    use tracing_subscriber::field::MakeExt;
    tracing_subscriber::fmt::format::debug_fn(|w, field, value| {
        let shown = format!("{value:?}");
        let shown = purra_core::visible::one_line(&shown, LOG_VALUE_MAX_CHARS);
        if field.name() == "message" {
            write!(w, "{shown}")
        } else {
            write!(w, "{field}={shown}")
        }
    })
    .delimited(" ")
}

/// One operational message of `prefix` (`purra gateway`): `prefix: message` on stderr, or in
/// JSON a line `{"timestamp", "level": "INFO", "target": prefix, "message"}`.
pub fn say(prefix: &str, message: &str) {
    match format() {
        // Never a panic when stderr is gone: a gateway (and its webhook deliveries) goes on.
        // A log line's control characters are escapes wherever it goes (a file too): a
        // message may quote text a client chose.
        LogFormat::Text => {
            let _ = writeln!(
                std::io::stderr(),
                "{prefix}: {}",
                crate::term::safe(message)
            );
        }
        LogFormat::Json => {
            let line = serde_json::json!({
                "timestamp": now(),
                "level": "INFO",
                "target": prefix,
                "message": message,
            });
            let _ = writeln!(std::io::stderr(), "{line}");
        }
    }
}

/// How many characters of a panic's message are written ([`panic_line`]).
const PANIC_MESSAGE_MAX_CHARS: usize = 1024;

/// Installs the process's panic hook: a panic is written as one log line in `log`'s format
/// (`panic_line`) instead of Rust's default text, which prints the message raw. A message
/// may quote what a client sent (a URI, a name): a newline or an escape sequence there must
/// not forge a log line or drive the terminal.
pub fn install_panic_hook(log: LogFormat) {
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("(no message)");
        let location = info
            .location()
            .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()));
        // Never a panic in the hook when stderr is gone.
        let _ = writeln!(
            std::io::stderr(),
            "{}",
            panic_line(log, message, location.as_deref())
        );
    }));
}

/// One panic as a log line: in text `purra: internal error (a bug in purra): panicked at
/// LOCATION: MESSAGE`, in JSON `{"timestamp", "level": "ERROR", "target": "purra", "message":
/// "panicked at LOCATION: MESSAGE"}`. The message is on one line, its control and invisible
/// characters escaped (`\n`, `\u001b`, `\u202e`), and cut after
/// [`PANIC_MESSAGE_MAX_CHARS`] characters.
fn panic_line(log: LogFormat, message: &str, location: Option<&str>) -> String {
    let message = purra_core::visible::one_line(message, PANIC_MESSAGE_MAX_CHARS);
    let what = match location {
        Some(at) => format!(
            "panicked at {}: {message}",
            purra_core::visible::one_line(at, 512)
        ),
        None => format!("panicked: {message}"),
    };
    match log {
        LogFormat::Text => format!("purra: internal error (a bug in purra): {what}"),
        LogFormat::Json => serde_json::json!({
            "timestamp": now(),
            "level": "ERROR",
            "target": "purra",
            "message": what,
        })
        .to_string(),
    }
}

/// The time as tracing-subscriber writes it (RFC 3339, UTC).
fn now() -> String {
    let mut s = String::new();
    let _ = tracing_subscriber::fmt::time::SystemTime.format_time(&mut Writer::new(&mut s));
    s
}

/// The JSON event format: one object a line.
struct JsonLines;

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for JsonLines
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let meta = event.metadata();
        let mut fields = Fields(serde_json::Map::new());
        event.record(&mut fields);
        let mut line = serde_json::Map::new();
        line.insert("timestamp".into(), now().into());
        line.insert("level".into(), meta.level().as_str().into());
        line.insert("target".into(), meta.target().into());
        if let Some(m) = fields.0.remove("message") {
            line.insert("message".into(), m);
        }
        if !fields.0.is_empty() {
            line.insert("fields".into(), fields.0.into());
        }
        if let Some(scope) = ctx.event_scope() {
            let spans: Vec<serde_json::Value> = scope
                .from_root()
                .map(|span| {
                    let mut o = serde_json::Map::new();
                    o.insert("name".into(), span.name().into());
                    if let Some(JsonFields(f)) = span.extensions().get::<JsonFields>() {
                        o.extend(f.iter().map(|(k, v)| (k.clone(), v.clone())));
                    }
                    serde_json::Value::Object(o)
                })
                .collect();
            if let Some(last) = spans.last() {
                line.insert("span".into(), last.clone());
            }
            line.insert("spans".into(), spans.into());
        }
        // The ids of the innermost span that has them (noted when it was entered).
        #[cfg(feature = "otel")]
        if let Some(scope) = ctx.event_scope() {
            for span in scope {
                if let Some(TraceIds(trace, id)) = span.extensions().get::<TraceIds>() {
                    line.insert("trace_id".into(), trace.as_str().into());
                    line.insert("span_id".into(), id.as_str().into());
                    break;
                }
            }
        }
        writeln!(writer, "{}", serde_json::Value::Object(line))
    }
}

/// A span's fields as JSON values, kept in its extensions for the JSON lines (`otel.*`, which
/// only name the exported span, left out).
struct JsonFields(serde_json::Map<String, serde_json::Value>);

/// A span's OpenTelemetry trace and span ids, noted when it is first entered.
#[cfg(feature = "otel")]
struct TraceIds(String, String);

/// Keeps each span's fields as [`JsonFields`].
struct SpanFields;

impl<S> tracing_subscriber::Layer<S> for SpanFields
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let mut fields = Fields(serde_json::Map::new());
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(JsonFields(fields.0));
        }
    }

    #[cfg(feature = "otel")]
    fn on_enter(&self, id: &tracing::span::Id, ctx: tracing_subscriber::layer::Context<'_, S>) {
        use opentelemetry::trace::TraceContextExt;
        let Some(span) = ctx.span(id) else { return };
        if span.extensions().get::<TraceIds>().is_some() {
            return;
        }
        let cx = opentelemetry::Context::current();
        let otel = cx.span();
        let sc = otel.span_context();
        if sc.is_valid() {
            span.extensions_mut().insert(TraceIds(
                sc.trace_id().to_string(),
                sc.span_id().to_string(),
            ));
        }
    }

    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if let Some(span) = ctx.span(id) {
            let mut ext = span.extensions_mut();
            if let Some(JsonFields(map)) = ext.get_mut::<JsonFields>() {
                let mut fields = Fields(std::mem::take(map));
                values.record(&mut fields);
                *map = fields.0;
            }
        }
    }
}

/// An event's (or a span's) fields as JSON values.
struct Fields(serde_json::Map<String, serde_json::Value>);

impl Fields {
    /// A text value: JSON escapes every C0 control; the other characters nobody sees (bidi
    /// controls, C1 controls, zero-width ones) are shown as `\u202e` escapes too.
    fn text(&mut self, field: &tracing::field::Field, value: &str) {
        let shown = purra_core::visible::escape_hidden(value).into_owned();
        self.put(field, shown.into());
    }

    fn put(&mut self, field: &tracing::field::Field, value: serde_json::Value) {
        if !field.name().starts_with("otel.") {
            self.0.insert(field.name().into(), value);
        }
    }
}

impl tracing::field::Visit for Fields {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.text(field, value);
    }
    fn record_bool(&mut self, field: &tracing::field::Field, value: bool) {
        self.put(field, value.into());
    }
    fn record_i64(&mut self, field: &tracing::field::Field, value: i64) {
        self.put(field, value.into());
    }
    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        self.put(field, value.into());
    }
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.text(field, &format!("{value:?}"));
    }
}

#[cfg(feature = "otel")]
pub use otel::export_metrics;

#[cfg(feature = "otel")]
mod otel {
    use std::time::{Duration, SystemTime};

    use bytes::Bytes;
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
    use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
    use opentelemetry_proto::tonic::common::v1::{
        any_value, AnyValue, InstrumentationScope, KeyValue,
    };
    use opentelemetry_proto::tonic::metrics::v1::{
        metric, number_data_point, AggregationTemporality, Gauge, Histogram, HistogramDataPoint,
        Metric, NumberDataPoint, ResourceMetrics, ScopeMetrics, Sum,
    };
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use opentelemetry_sdk::trace::SdkTracerProvider;
    use prost::Message as _;
    use purra_gateway::metrics::{Kind, Value, BUCKETS};
    use purra_protocol::http::reqwest;
    use tracing_subscriber::registry::LookupSpan;
    use tracing_subscriber::Layer;

    use super::Export;

    /// How long one export may take (connecting, sending, reading the answer).
    const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

    /// Sends the OTLP exporter's requests with purra's reqwest, on the runtime it was made on
    /// (the batch processor calls from a thread of its own).
    #[derive(Debug, Clone)]
    struct OnRuntime {
        client: reqwest::Client,
        runtime: tokio::runtime::Handle,
    }

    #[async_trait::async_trait]
    impl opentelemetry_http::HttpClient for OnRuntime {
        async fn send_bytes(
            &self,
            request: opentelemetry_http::Request<Bytes>,
        ) -> Result<opentelemetry_http::Response<Bytes>, opentelemetry_http::HttpError> {
            let client = self.client.clone();
            let (parts, body) = request.into_parts();
            let sent = self.runtime.spawn(async move {
                let mut req = client
                    .request(parts.method, parts.uri.to_string())
                    .body(body);
                for (name, value) in &parts.headers {
                    req = req.header(name, value);
                }
                let res = req.send().await?;
                let status = res.status();
                let body = res.bytes().await?;
                Ok::<_, reqwest::Error>((status, body))
            });
            let (status, body) = sent.await??;
            Ok(opentelemetry_http::Response::builder()
                .status(status.as_u16())
                .body(body)?)
        }
    }

    fn client() -> Result<OnRuntime, String> {
        Ok(OnRuntime {
            client: reqwest::Client::builder()
                .timeout(EXPORT_TIMEOUT)
                .build()
                .map_err(|e| e.to_string())?,
            runtime: tokio::runtime::Handle::try_current().map_err(|e| e.to_string())?,
        })
    }

    /// The OpenTelemetry layer for purra's spans (not the connections', which would make every
    /// request of a long connection one trace, nor the notifications') and its provider: exporting when an endpoint is
    /// configured, else only making the ids JSON lines carry.
    pub(super) fn layer<S>(
        export: &Export,
    ) -> Result<(impl Layer<S> + Send + Sync + 'static, SdkTracerProvider), String>
    where
        S: tracing::Subscriber + for<'a> LookupSpan<'a> + Send + Sync + 'static,
    {
        let resource = opentelemetry_sdk::Resource::builder()
            .with_service_name(export.service_name.clone())
            .build();
        let mut builder = SdkTracerProvider::builder().with_resource(resource);
        if let Some(endpoint) = &export.endpoint {
            let exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(Protocol::HttpBinary)
                .with_endpoint(format!("{endpoint}/v1/traces"))
                .with_timeout(EXPORT_TIMEOUT)
                .with_http_client(client()?)
                .build()
                .map_err(|e| format!("the OTLP exporter for {endpoint}: {e}"))?;
            builder = builder.with_batch_exporter(exporter);
        }
        let provider = builder.build();
        let tracer = provider.tracer("purra");
        let filter = tracing_subscriber::filter::filter_fn(|meta| {
            meta.is_span()
                && meta.name() != "mcp.connection"
                && meta.name() != "notification"
                && super::OURS
                    .iter()
                    .any(|t| meta.target() == *t || meta.target().starts_with(&format!("{t}::")))
                && *meta.level() <= tracing::Level::DEBUG
        });
        let layer = tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_threads(false)
            .with_filter(filter);
        Ok((layer, provider))
    }

    /// Exports `gateway`'s metrics to `export`'s endpoint (`/v1/metrics`, OTLP/HTTP protobuf)
    /// every `interval`, and once more when `stop` is cancelled, then returns. A failed export is
    /// reported once through `say` and tried again at the next interval.
    pub async fn export_metrics(
        gateway: purra_gateway::Gateway,
        export: Export,
        interval: Duration,
        stop: purra_protocol::CancellationToken,
    ) {
        let Some(endpoint) = export.endpoint.clone() else {
            return;
        };
        let Ok(client) = client() else { return };
        let url = format!("{endpoint}/v1/metrics");
        let start = unix_nanos(SystemTime::now());
        let mut failing = false;
        loop {
            let last = tokio::select! {
                () = stop.cancelled() => true,
                () = tokio::time::sleep(interval) => false,
            };
            gateway.refresh_metrics().await;
            let body = request(&gateway, &export.service_name, start).encode_to_vec();
            let sent = client
                .client
                .post(&url)
                .header("content-type", "application/x-protobuf")
                .body(body)
                .send()
                .await;
            match sent {
                Ok(r) if r.status().is_success() => failing = false,
                other => {
                    if !failing {
                        let why = match other {
                            Ok(r) => format!("answered {}", r.status()),
                            Err(e) => format!("{e}"),
                        };
                        super::say(
                            "purra gateway",
                            &format!("exporting metrics to {url} failed: {why}"),
                        );
                    }
                    failing = true;
                }
            }
            if last {
                return;
            }
        }
    }

    fn unix_nanos(t: SystemTime) -> u64 {
        t.duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }

    fn string(key: &str, value: &str) -> KeyValue {
        KeyValue {
            key: key.to_owned(),
            value: Some(AnyValue {
                value: Some(any_value::Value::StringValue(value.to_owned())),
            }),
            ..Default::default()
        }
    }

    /// One export: every series of the registry, cumulative since `start`.
    fn request(
        gateway: &purra_gateway::Gateway,
        service: &str,
        start: u64,
    ) -> ExportMetricsServiceRequest {
        let now = unix_nanos(SystemTime::now());
        let metrics = gateway
            .metrics()
            .snapshot()
            .into_iter()
            .map(|family| {
                let attrs = |labels: &purra_gateway::metrics::Labels| -> Vec<KeyValue> {
                    labels.iter().map(|(k, v)| string(k, v)).collect()
                };
                let data = match family.family.kind {
                    Kind::Counter | Kind::Gauge => {
                        let points = family
                            .points
                            .iter()
                            .map(|(labels, value)| NumberDataPoint {
                                attributes: attrs(labels),
                                start_time_unix_nano: start,
                                time_unix_nano: now,
                                value: Some(match value {
                                    Value::Counter(c) => number_data_point::Value::AsInt(
                                        i64::try_from(*c).unwrap_or(i64::MAX),
                                    ),
                                    Value::Gauge(g) => number_data_point::Value::AsInt(*g),
                                    Value::Histogram { count, .. } => {
                                        number_data_point::Value::AsInt(
                                            i64::try_from(*count).unwrap_or(i64::MAX),
                                        )
                                    }
                                }),
                                ..Default::default()
                            })
                            .collect();
                        if family.family.kind == Kind::Counter {
                            metric::Data::Sum(Sum {
                                data_points: points,
                                aggregation_temporality: AggregationTemporality::Cumulative as i32,
                                is_monotonic: true,
                            })
                        } else {
                            metric::Data::Gauge(Gauge {
                                data_points: points,
                            })
                        }
                    }
                    Kind::Histogram => metric::Data::Histogram(Histogram {
                        data_points: family
                            .points
                            .iter()
                            .filter_map(|(labels, value)| match value {
                                Value::Histogram {
                                    buckets,
                                    sum,
                                    count,
                                } => {
                                    // OTLP's bucket counts are per bucket, the registry's cumulative.
                                    let mut per = Vec::with_capacity(buckets.len() + 1);
                                    let mut below = 0;
                                    for b in buckets.iter().chain(std::iter::once(count)) {
                                        per.push(b - below);
                                        below = *b;
                                    }
                                    Some(HistogramDataPoint {
                                        attributes: attrs(labels),
                                        start_time_unix_nano: start,
                                        time_unix_nano: now,
                                        count: *count,
                                        sum: Some(*sum),
                                        bucket_counts: per,
                                        explicit_bounds: BUCKETS.to_vec(),
                                        ..Default::default()
                                    })
                                }
                                _ => None,
                            })
                            .collect(),
                        aggregation_temporality: AggregationTemporality::Cumulative as i32,
                    }),
                };
                Metric {
                    name: family.family.name.to_owned(),
                    description: family.family.help.to_owned(),
                    unit: if family.family.kind == Kind::Histogram {
                        "s".to_owned()
                    } else {
                        String::new()
                    },
                    data: Some(data),
                    ..Default::default()
                }
            })
            .collect();
        ExportMetricsServiceRequest {
            resource_metrics: vec![ResourceMetrics {
                resource: Some(Resource {
                    attributes: vec![string("service.name", service)],
                    ..Default::default()
                }),
                scope_metrics: vec![ScopeMetrics {
                    scope: Some(InstrumentationScope {
                        name: "purra-gateway".to_owned(),
                        version: env!("CARGO_PKG_VERSION").to_owned(),
                        ..Default::default()
                    }),
                    metrics,
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 43 finding 4: a panic whose message quotes a client's text (a newline, a forged
    /// JSON line, an escape sequence, a bidi override) is one log line, escaped, in either
    /// format.
    #[test]
    fn finding_4_a_panic_is_one_escaped_log_line() {
        let message = "no file at skill://r/%a\u{20ac}\n{\"message\":\"forged\"}\u{1b}[2J\u{202e}";
        let shown = "no file at skill://r/%a\u{20ac}\\n{\"message\":\"forged\"}\\u001b[2J\\u202e";
        assert_eq!(
            panic_line(LogFormat::Text, message, Some("src/a.rs:1:2")),
            format!("purra: internal error (a bug in purra): panicked at src/a.rs:1:2: {shown}")
        );
        let line = panic_line(LogFormat::Json, message, None);
        assert!(!line.contains(['\n', '\u{1b}', '\u{202e}']), "{line}");
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["level"], "ERROR");
        assert_eq!(v["target"], "purra");
        assert_eq!(v["message"], format!("panicked: {shown}"));
        assert_eq!(v.as_object().unwrap().len(), 4, "{v}");
        // Bounded.
        let long = "y".repeat(5000);
        assert_eq!(
            panic_line(LogFormat::Text, &long, None),
            format!(
                "purra: internal error (a bug in purra): panicked: {}\u{2026}",
                "y".repeat(1024)
            )
        );
    }
}
