//! Webhook delivery: the events the store's outbox records (purra-core's `webhook`), POSTed to
//! the `[webhooks.NAME]` endpoints, signed as the Standard Webhooks specification says, at least
//! once, with retries and backoff.
//!
//! Recording is the store's: each prepare, decision, outcome and reconciliation writes its
//! delivery rows in its own transaction, whichever process makes it, for the endpoints registered
//! in the store ([`Webhooks::endpoints`], registered by [`crate::Gateway::start`]). Delivering is
//! this module's: one task per endpoint ([`Webhooks::spawn`]) claims the endpoint's next due
//! delivery under a lease, sends it, and records what happened, so a write call never waits for a
//! receiver and a slow or dead receiver only delays its own deliveries.
//!
//! A request carries `webhook-id` (fixed when the event was recorded: the same on every retry,
//! after a restart, from any deliverer), `webhook-timestamp` (the attempt's, in seconds) and,
//! with a secret, `webhook-signature` (`v1,` and the base64 HMAC-SHA256 of
//! `ID.TIMESTAMP.BODY` under the secret's bytes). Any 2xx is a delivery; `410 Gone` retires the
//! endpoint (its pending deliveries given up, nothing more recorded for it until a gateway starts
//! with it again); anything else, a timeout or a connection failure is retried after the
//! endpoint's backoff (doubling from `backoff` to `max_backoff`, ±20 % jitter, at least what a
//! `Retry-After` in seconds asks), until the delivery is `give_up_after` old, when it is kept as
//! `failed`. Redirects are not followed (a failure: the URL should be updated). The response
//! body is never read.
//!
//! While an endpoint fails, its task backs off as a whole (one probe at a time, not every
//! pending delivery each round); the first success after an outage makes its waiting deliveries
//! due at once ([`WebhookOutbox::webhooks_due_now`]), and so does a task's start (a restarted
//! gateway tries its waiting deliveries at once, then backs off again if the endpoint still
//! fails).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine;
use purra_core::{
    ApprovalGateway, StoreError, StoreEvent, StoreEvents, WebhookDelivery, WebhookEndpoint,
    WebhookEventType, WebhookFailure, WebhookOutbox,
};
use purra_protocol::http::reqwest;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::config::ConfigSource;
use crate::config::{ConfigError, ConfigErrors, GatewayConfig, WebhookConfig, WebhookFormat};
use crate::runtime::gateway::Log;

/// The shortest and longest secret, in bytes, the specification allows (24 to 64 random bytes).
pub const SECRET_BYTES: std::ops::RangeInclusive<usize> = 24..=64;

/// How long a deliverer with nothing due waits before it looks again, when no store event woke
/// it (a safety net: every change that records an event is also a store event).
pub const IDLE_POLL: Duration = Duration::from_secs(30);

/// How long a deliverer waits after its store failed before it tries again.
pub const STORE_RETRY: Duration = Duration::from_secs(1);

/// A Standard Webhooks signing secret: `whsec_` and the base64 of 24 to 64 random bytes.
#[derive(Clone)]
pub struct Secret {
    key: ring::hmac::Key,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    /// Reads a secret as the specification serializes it; the error says what is wrong without
    /// repeating it.
    pub fn parse(text: &str) -> Result<Secret, String> {
        let Some(encoded) = text.trim().strip_prefix("whsec_") else {
            return Err(
                "a Standard Webhooks secret starts with whsec_ (then base64 of 24 to 64 \
                        random bytes, such as whsec_ and the output of `openssl rand -base64 32`)"
                    .into(),
            );
        };
        let engine = base64::engine::GeneralPurpose::new(
            &base64::alphabet::STANDARD,
            base64::engine::GeneralPurposeConfig::new()
                .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
        );
        let bytes = engine
            .decode(encoded)
            .map_err(|_| "the secret after whsec_ is not base64".to_owned())?;
        if !SECRET_BYTES.contains(&bytes.len()) {
            return Err(format!(
                "the secret decodes to {} bytes; a Standard Webhooks secret is 24 to 64 random bytes",
                bytes.len()
            ));
        }
        Ok(Secret {
            key: ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &bytes),
        })
    }

    /// The `webhook-signature` value of `body` sent as message `msg_id` at `timestamp` (seconds
    /// since the Unix epoch): `v1,` and the base64 HMAC-SHA256 of `msg_id.timestamp.body`.
    pub fn sign(&self, msg_id: &str, timestamp: u64, body: &[u8]) -> String {
        let mut ctx = ring::hmac::Context::with_key(&self.key);
        ctx.update(msg_id.as_bytes());
        ctx.update(b".");
        ctx.update(timestamp.to_string().as_bytes());
        ctx.update(b".");
        ctx.update(body);
        let tag = ctx.sign();
        format!(
            "v1,{}",
            base64::engine::general_purpose::STANDARD.encode(tag.as_ref())
        )
    }
}

/// When an endpoint is attempted again after failures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// The delay after the first failure; each further failure doubles it.
    pub backoff: Duration,
    /// The longest delay.
    pub max_backoff: Duration,
    /// How old a delivery may be when an attempt fails before it is given up.
    pub give_up_after: Duration,
}

impl RetryPolicy {
    /// The delay after `failures` failures in a row (1 for the first): `backoff` doubled
    /// `failures - 1` times, at most `max_backoff`, before jitter.
    pub fn delay(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(32);
        self.backoff
            .checked_mul(1u32 << doublings.min(31))
            .unwrap_or(self.max_backoff)
            .min(self.max_backoff)
    }

    /// The retry of a delivery whose attempt number `attempt` failed when it was `age` old, the
    /// receiver asking for `retry_after`: `None` (give up) once `age` reached `give_up_after`,
    /// else [`RetryPolicy::delay`] with `jitter` (a factor, 0.8 to 1.2), at least `retry_after`
    /// (itself at most `max_backoff`).
    pub fn retry(
        &self,
        attempt: u32,
        age: Duration,
        retry_after: Option<Duration>,
        jitter: f64,
    ) -> Option<Duration> {
        if age >= self.give_up_after {
            return None;
        }
        let asked = retry_after.unwrap_or_default().min(self.max_backoff);
        Some(
            self.delay(attempt)
                .mul_f64(jitter.clamp(0.8, 1.2))
                .max(asked),
        )
    }
}

/// A jitter factor between 0.8 and 1.2.
fn jitter() -> f64 {
    let mut b = [0u8; 4];
    let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut b);
    0.8 + 0.4 * (f64::from(u32::from_le_bytes(b)) / f64::from(u32::MAX))
}

/// What one attempt came to, as [`Observer`]s hear it (logs, traces, metrics).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AttemptResult {
    /// A 2xx: delivered (the row is gone).
    Delivered {
        /// The status.
        status: u16,
    },
    /// Failed; attempted again after `after`.
    Retry {
        /// The status, when the receiver answered.
        status: Option<u16>,
        /// What went wrong.
        error: String,
        /// The delay before the next attempt.
        after: Duration,
    },
    /// Failed and given up: the delivery is kept as failed.
    GaveUp {
        /// The status, when the receiver answered.
        status: Option<u16>,
        /// What went wrong.
        error: String,
    },
    /// `410 Gone`: the endpoint is retired.
    Gone,
}

impl AttemptResult {
    /// The result as one word, as the metrics label it: `delivered`, `retry`, `gave_up` or
    /// `gone`.
    pub fn name(&self) -> &'static str {
        match self {
            AttemptResult::Delivered { .. } => "delivered",
            AttemptResult::Retry { .. } => "retry",
            AttemptResult::GaveUp { .. } => "gave_up",
            AttemptResult::Gone => "gone",
        }
    }
}

/// One attempt, reported to an [`Observer`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Attempt {
    /// The endpoint's name.
    pub endpoint: String,
    /// The delivery's `webhook-id`.
    pub msg_id: String,
    /// The event's type.
    pub event_type: WebhookEventType,
    /// The attempt's number (1 for the first).
    pub attempt: u32,
    /// How long the request took.
    pub elapsed: Duration,
    /// What it came to.
    pub result: AttemptResult,
}

/// Hears every attempt (for traces and metrics); it must not block.
pub type Observer = Arc<dyn Fn(&Attempt) + Send + Sync>;

/// One endpoint as this process delivers to it.
struct Target {
    name: String,
    url: String,
    secret: Option<Secret>,
    format: WebhookFormat,
    events: Vec<WebhookEventType>,
    timeout: Duration,
    policy: RetryPolicy,
    client: reqwest::Client,
}

/// The configured webhook endpoints, their secrets read, ready to register and deliver to.
#[derive(Clone)]
pub struct Webhooks {
    targets: Vec<Arc<Target>>,
    /// The approver page's public URL: events link to an approval under it.
    page_url: Arc<Mutex<Option<String>>>,
}

impl std::fmt::Debug for Webhooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhooks")
            .field(
                "endpoints",
                &self.targets.iter().map(|t| &t.name).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// The largest secret file read (4 KiB): bounded before it is read whole.
pub const MAX_SECRET_FILE_BYTES: u64 = 4096;

impl Webhooks {
    /// The `[webhooks.NAME]` endpoints of `config` with their secrets read (from their file or
    /// environment variable; a secret that cannot be read or is not a Standard Webhooks secret is
    /// a mistake at its key), and `[page] url` for links. Empty when none is configured.
    pub fn read(config: &GatewayConfig, source: &ConfigSource) -> Result<Webhooks, ConfigErrors> {
        let mut errors = Vec::new();
        let mut targets = Vec::new();
        for (name, w) in &config.webhooks {
            match Target::read(name, w, source) {
                Ok(t) => targets.push(Arc::new(t)),
                Err(e) => errors.push(e),
            }
        }
        if !errors.is_empty() {
            return Err(ConfigErrors(errors));
        }
        Ok(Webhooks {
            targets,
            page_url: Arc::new(Mutex::new(config.page.url.clone())),
        })
    }

    /// Whether no endpoint is configured.
    pub fn is_empty(&self) -> bool {
        self.targets.is_empty()
    }

    /// The endpoints as the store registers them (name and event types).
    pub fn endpoints(&self) -> Vec<WebhookEndpoint> {
        self.targets
            .iter()
            .map(|t| WebhookEndpoint {
                name: t.name.clone(),
                events: t.events.clone(),
            })
            .collect()
    }

    /// Sets the approver page's public URL events link under, unless `[page] url` set one.
    pub fn default_page_url(&self, url: &str) {
        let mut page = self.page_url.lock().unwrap_or_else(|p| p.into_inner());
        if page.is_none() {
            *page = Some(url.trim_end_matches('/').to_owned());
        }
    }

    /// The approver page's URL events link under, if known.
    pub fn page_url(&self) -> Option<String> {
        self.page_url
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Starts one delivery task per endpoint, claiming from `outbox`, woken by `events` (the
    /// store's stream, for a delivery recorded by any process), until `stop`. `log` hears what
    /// an operator should know (an endpoint failing and answering again, a delivery given up, a
    /// retired endpoint, the store failing); `observer` hears every attempt.
    pub fn spawn(
        &self,
        outbox: Arc<dyn WebhookOutbox>,
        events: Option<Arc<dyn ApprovalGateway>>,
        log: Option<Log>,
        observer: Option<Observer>,
        stop: CancellationToken,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        self.targets
            .iter()
            .map(|t| {
                let (target, outbox, events) = (Arc::clone(t), Arc::clone(&outbox), events.clone());
                let (page_url, log, observer) =
                    (Arc::clone(&self.page_url), log.clone(), observer.clone());
                let stop = stop.clone();
                // A panic of the task (a log or an observer that panics, such as a process
                // printing to a closed stderr) starts it again: deliveries never stop for it.
                tokio::spawn(async move {
                    loop {
                        let worker = Worker {
                            target: Arc::clone(&target),
                            outbox: Arc::clone(&outbox),
                            events: events.as_ref().map(|g| g.subscribe()),
                            page_url: Arc::clone(&page_url),
                            log: log.clone(),
                            observer: observer.clone(),
                        };
                        match tokio::spawn(worker.run(stop.clone())).await {
                            Err(e) if e.is_panic() => {
                                if sleep_or_stop(STORE_RETRY, &stop).await {
                                    return;
                                }
                            }
                            _ => return,
                        }
                    }
                })
            })
            .collect()
    }
}

impl Target {
    fn read(name: &str, w: &WebhookConfig, source: &ConfigSource) -> Result<Target, ConfigError> {
        let key = format!("webhooks.{name}");
        let text = match (&w.secret_file, &w.secret_env) {
            (Some(file), _) => Some((
                crate::runtime::secrets::read_secret_file(file)
                    .map_err(|why| source.error(&format!("{key}.secret_file"), why))?,
                "secret_file",
            )),
            (None, Some(var)) => Some((
                crate::config::secret::read_secret_env(var)
                    .map_err(|why| source.error(&format!("{key}.secret_env"), why))?,
                "secret_env",
            )),
            (None, None) => None,
        };
        let secret = match text {
            Some((text, at)) => Some(
                Secret::parse(&text).map_err(|why| source.error(&format!("{key}.{at}"), why))?,
            ),
            None => None,
        };
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(w.timeout.0)
            .connect_timeout(w.timeout.0)
            .user_agent(concat!("purra-webhooks/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| source.error(&key, format!("cannot make an HTTP client: {e}")))?;
        let mut events: Vec<WebhookEventType> = w.events.iter().map(|e| e.event_type()).collect();
        events.sort();
        events.dedup();
        Ok(Target {
            name: name.to_owned(),
            url: w.url.clone(),
            secret,
            format: w.format,
            events,
            timeout: w.timeout.0,
            policy: RetryPolicy {
                backoff: w.backoff.0,
                max_backoff: w.max_backoff.0,
                give_up_after: w.give_up_after.0,
            },
            client,
        })
    }

    /// How long a claim holds a delivery: twice the request's timeout and a second, so an
    /// attempt and the write of its result fit; a deliverer killed mid-attempt leaves the
    /// delivery to be claimed again after it.
    fn lease(&self) -> Duration {
        self.timeout * 2 + Duration::from_secs(1)
    }
}

/// The body of `payload` in `format`, with the approver page's link to the approval when
/// `page_url` is known. An `approval.pending` event also gets the links that open the page on the
/// approval with a decision preselected (`data.links`: `page`, `approve`, `deny`; in Slack's
/// format, Block Kit buttons). A link never decides: the page shows the approval and asks the
/// signed-in approver to confirm.
pub fn body(format: WebhookFormat, payload: &str, page_url: Option<&str>) -> String {
    let Ok(mut event) = serde_json::from_str::<Value>(payload) else {
        // Recorded by this build's store, so never; sent as recorded all the same.
        return payload.to_owned();
    };
    let link = match (page_url, event["data"]["approval"].as_str()) {
        (Some(page), Some(id)) => Some(format!("{}/approvals/{id}", page.trim_end_matches('/'))),
        _ => None,
    };
    let links = match &link {
        Some(link) if event["type"] == "approval.pending" => Some(DecisionLinks {
            approve: format!("{link}?decision=approve"),
            deny: format!("{link}?decision=deny"),
            page: link.clone(),
        }),
        _ => None,
    };
    match format {
        WebhookFormat::Standard => match (link, event["data"].as_object_mut()) {
            (Some(link), Some(data)) => {
                data.insert("url".into(), Value::String(link));
                if let Some(l) = &links {
                    data.insert(
                        "links".into(),
                        serde_json::json!({"page": l.page, "approve": l.approve, "deny": l.deny}),
                    );
                }
                event.to_string()
            }
            _ => payload.to_owned(),
        },
        WebhookFormat::Slack => {
            let text = slack_text(&event, link.as_deref());
            match links {
                // Block Kit: the summary, and buttons that open the page (Slack opens a button's
                // `url` in the browser; nothing is decided in Slack). `text` stays the fallback
                // for notifications and clients without blocks.
                Some(l) => serde_json::json!({
                    "text": text,
                    "blocks": [
                        {"type": "section",
                         "text": {"type": "mrkdwn", "text": slack_text(&event, None)}},
                        {"type": "actions", "elements": [
                            {"type": "button", "action_id": "approve", "style": "primary",
                             "text": {"type": "plain_text", "text": "Approve\u{2026}"},
                             "url": l.approve},
                            {"type": "button", "action_id": "deny", "style": "danger",
                             "text": {"type": "plain_text", "text": "Deny\u{2026}"},
                             "url": l.deny},
                            {"type": "button", "action_id": "open",
                             "text": {"type": "plain_text", "text": "Open"},
                             "url": l.page}
                        ]}
                    ]
                })
                .to_string(),
                None => serde_json::json!({ "text": text }).to_string(),
            }
        }
    }
}

/// The page's links for one pending approval: the approval, and the approval with a decision
/// preselected.
struct DecisionLinks {
    page: String,
    approve: String,
    deny: String,
}

/// Slack's `mrkdwn` escapes: `&`, `<` and `>` (the rest is shown as written).
fn slack_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// One line saying what happened, for a chat channel.
fn slack_text(event: &Value, link: Option<&str>) -> String {
    let data = &event["data"];
    let s = |k: &str| slack_escape(data[k].as_str().unwrap_or("?"));
    // Who asked and who decided name clients, which choose their names: one line (a newline
    // would forge a line in the channel), escaped and bounded.
    let who = |k: &str| {
        slack_escape(&purra_core::visible::one_line(
            data[k].as_str().unwrap_or("?"),
            purra_core::visible::WHO_MAX_CHARS,
        ))
    };
    let approval = data["approval"].as_str().map(slack_escape);
    let tool = s("tool");
    let subject = match &approval {
        Some(id) => format!("{tool} (approval {id})"),
        None => format!("{tool} (claim {})", s("key")),
    };
    let mut text = match event["type"].as_str().unwrap_or("") {
        "approval.pending" => {
            let mut t = format!(
                "Approval {} waits for a decision: {tool}, asked by {}",
                approval.clone().unwrap_or_default(),
                who("requestedBy")
            );
            if let Some(up) = data["labels"]["upstream"].as_str() {
                t.push_str(&format!(" (upstream {})", slack_escape(up)));
            }
            t.push('.');
            t
        }
        "approval.decided" => {
            let word = if data["verdict"] == "approve" {
                "approved"
            } else {
                "denied"
            };
            let mut t = format!("{subject} {word} by {}", who("approver"));
            match data["note"].as_str() {
                Some(note) if !note.is_empty() => {
                    t.push_str(&format!(": \u{201c}{}\u{201d}", slack_escape(note)))
                }
                _ => t.push('.'),
            }
            t
        }
        "effect.committed" => {
            if data["reconciled"] == true {
                format!("{subject} committed (reconciled by an operator).")
            } else {
                format!("{subject} committed.")
            }
        }
        "effect.unknown" => format!(
            "{subject}: effect unknown ({}). It is never sent again; an operator reconciles it \
             with evidence.",
            s("reason")
        ),
        "effect.reconciled" => {
            let outcome = if data["outcome"] == "committed" {
                "committed"
            } else {
                "not sent"
            };
            format!(
                "{subject}: reconciled as {outcome} by {}: \u{201c}{}\u{201d}",
                who("by"),
                slack_escape(&purra_core::visible::one_line(
                    data["evidence"].as_str().unwrap_or_default(),
                    purra_core::MAX_EVIDENCE_BYTES,
                ))
            )
        }
        "catalog.changed" => format!(
            "Upstream {} {} tool {tool}: held for review as catalog change {} (`purra catalog diff {}`).",
            s("upstream"),
            s("kind"),
            data["change"],
            data["change"]
        ),
        "approval.voted" => format!(
            "{subject}: {} voted {} ({} of {} votes).",
            who("approver"),
            s("verdict"),
            data["votes"],
            data["required"]
        ),
        "approval.escalated" => {
            let to: Vec<String> = data["escalateTo"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|e| slack_escape(e.as_str().unwrap_or("?")))
                        .collect()
                })
                .unwrap_or_default();
            format!(
                "{subject} is still undecided: escalated, {} may decide now.",
                to.join(", ")
            )
        }
        "approval.expired" => format!("{subject} denied at its expiry: {}.", s("reason")),
        other => format!("{} {subject}", slack_escape(other)),
    };
    if let Some(link) = link {
        text.push_str(&format!(" <{link}|Open it on the approver page>"));
    }
    text
}

/// What a request came to.
enum Sent {
    Delivered(u16),
    Gone,
    Failed {
        status: Option<u16>,
        error: String,
        retry_after: Option<Duration>,
    },
}

/// The delivery task of one endpoint.
struct Worker {
    target: Arc<Target>,
    outbox: Arc<dyn WebhookOutbox>,
    events: Option<StoreEvents>,
    page_url: Arc<Mutex<Option<String>>>,
    log: Option<Log>,
    observer: Option<Observer>,
}

impl Worker {
    fn log(&self, message: &str) {
        if let Some(log) = &self.log {
            log(&format!("webhook {}: {message}", self.target.name));
        }
    }

    async fn run(mut self, stop: CancellationToken) {
        let name = self.target.name.clone();
        // Endpoint failures in a row (a success resets it) and whether the store is failing.
        let mut failures: u32 = 0;
        let mut store_failing = false;
        // A deliverer that starts (a restarted gateway) tries what waits for a retry at once:
        // one probe, then the endpoint's backoff if it still fails.
        let _ = self.outbox.webhooks_due_now(name.clone()).await;
        loop {
            if stop.is_cancelled() {
                return;
            }
            let claimed = self
                .outbox
                .claim_webhook(name.clone(), self.target.lease())
                .await;
            let delivery = match claimed {
                Err(e) => {
                    self.store_failed(&mut store_failing, &e);
                    if sleep_or_stop(STORE_RETRY, &stop).await {
                        return;
                    }
                    continue;
                }
                Ok(None) => {
                    store_failing = false;
                    if self.idle(&stop).await {
                        return;
                    }
                    continue;
                }
                Ok(Some(d)) => d,
            };
            store_failing = false;
            let started = Instant::now();
            let sent = tokio::select! {
                sent = self.send(&delivery) => sent,
                // The lease stays: after it, this delivery is claimed again, with its id.
                () = stop.cancelled() => return,
            };
            let elapsed = started.elapsed();
            let result = match sent {
                Sent::Delivered(status) => {
                    self.record(self.outbox.webhook_delivered(delivery.lease.clone()).await);
                    if failures > 0 {
                        failures = 0;
                        self.log("answering again: delivering what waited");
                        let _ = self.outbox.webhooks_due_now(name.clone()).await;
                    }
                    AttemptResult::Delivered { status }
                }
                Sent::Gone => {
                    let gone = WebhookFailure {
                        status: Some(410),
                        error: "HTTP 410 Gone".into(),
                    };
                    self.record(
                        self.outbox
                            .webhook_failed(delivery.lease.clone(), gone, None)
                            .await,
                    );
                    let given_up = self
                        .outbox
                        .retire_webhook_endpoint(
                            name.clone(),
                            "the endpoint answered 410 Gone".into(),
                        )
                        .await;
                    self.log(&format!(
                        "answered 410 Gone: the endpoint is retired ({} pending deliveries given \
                         up, kept as failed; nothing more is recorded for it until the gateway \
                         starts with it again)",
                        given_up
                            .map_or_else(|e| format!("the store failed: {e}"), |n| n.to_string())
                    ));
                    self.observe(&delivery, elapsed, AttemptResult::Gone);
                    return;
                }
                Sent::Failed {
                    status,
                    error,
                    retry_after,
                } => {
                    let retry = self.target.policy.retry(
                        delivery.lease.attempt,
                        delivery.age,
                        retry_after,
                        jitter(),
                    );
                    let failure = WebhookFailure {
                        status,
                        error: error.clone(),
                    };
                    self.record(
                        self.outbox
                            .webhook_failed(delivery.lease.clone(), failure, retry)
                            .await,
                    );
                    failures = failures.saturating_add(1);
                    if failures == 1 {
                        self.log(&format!("delivery failed ({error}); retrying with backoff"));
                    }
                    match retry {
                        Some(after) => AttemptResult::Retry {
                            status,
                            error,
                            after,
                        },
                        None => {
                            self.log(&format!(
                                "gave up on {} ({}) after {} attempts, {} old: {error}; it is \
                                 kept as failed",
                                delivery.lease.msg_id,
                                delivery.event_type,
                                delivery.lease.attempt,
                                crate::config::Dur(Duration::from_secs(delivery.age.as_secs()))
                            ));
                            AttemptResult::GaveUp { status, error }
                        }
                    }
                }
            };
            let pause = match &result {
                AttemptResult::Retry { .. } | AttemptResult::GaveUp { .. } => {
                    let asked = match &result {
                        AttemptResult::Retry { after, .. } => *after,
                        _ => Duration::ZERO,
                    };
                    Some(
                        self.target
                            .policy
                            .delay(failures)
                            .mul_f64(jitter())
                            .max(asked.min(self.target.policy.max_backoff)),
                    )
                }
                _ => None,
            };
            self.observe(&delivery, elapsed, result);
            // The endpoint backs off as a whole: one probe per pause while it fails.
            if let Some(pause) = pause {
                if sleep_or_stop(pause, &stop).await {
                    return;
                }
            }
        }
    }

    fn observe(&self, d: &WebhookDelivery, elapsed: Duration, result: AttemptResult) {
        if let Some(observer) = &self.observer {
            observer(&Attempt {
                endpoint: d.endpoint.clone(),
                msg_id: d.lease.msg_id.clone(),
                event_type: d.event_type,
                attempt: d.lease.attempt,
                elapsed,
                result,
            });
        }
    }

    fn record(&self, written: Result<bool, StoreError>) {
        if let Err(e) = written {
            // The lease stays: the delivery is attempted again after it, with its id.
            self.log(&format!("could not record an attempt: {e}"));
        }
    }

    fn store_failed(&self, failing: &mut bool, e: &StoreError) {
        if !*failing {
            *failing = true;
            self.log(&format!("the store failed: {e}; trying again"));
        }
    }

    /// Waits until the next delivery is due, a store event may have recorded one, or
    /// [`IDLE_POLL`]; true when stopped.
    async fn idle(&mut self, stop: &CancellationToken) -> bool {
        let due = match self.outbox.next_webhook_due(self.target.name.clone()).await {
            Ok(Some(d)) => d,
            Ok(None) => IDLE_POLL,
            Err(_) => STORE_RETRY,
        };
        // Never a busy loop, whatever the store says is due.
        let wait = due.clamp(Duration::from_millis(25), IDLE_POLL);
        let events = &mut self.events;
        tokio::select! {
            () = stop.cancelled() => true,
            () = tokio::time::sleep(wait) => false,
            () = recorded(events) => false,
        }
    }

    async fn send(&self, d: &WebhookDelivery) -> Sent {
        let page = self
            .page_url
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let body = body(self.target.format, &d.payload, page.as_deref());
        let timestamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |t| t.as_secs());
        let mut request = self
            .target
            .client
            .post(&self.target.url)
            .header("content-type", "application/json")
            .header("webhook-id", &d.lease.msg_id)
            .header("webhook-timestamp", timestamp.to_string());
        if let Some(secret) = &self.target.secret {
            request = request.header(
                "webhook-signature",
                secret.sign(&d.lease.msg_id, timestamp, body.as_bytes()),
            );
        }
        match request.body(body).send().await {
            Ok(response) => {
                let status = response.status();
                let retry_after = response
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map(Duration::from_secs);
                // The body is never read: dropping the response closes the connection.
                drop(response);
                if status.is_success() {
                    Sent::Delivered(status.as_u16())
                } else if status.as_u16() == 410 {
                    Sent::Gone
                } else {
                    Sent::Failed {
                        status: Some(status.as_u16()),
                        error: format!("HTTP {status}"),
                        retry_after,
                    }
                }
            }
            Err(e) => Sent::Failed {
                status: None,
                error: describe(&e, self.target.timeout),
                retry_after: None,
            },
        }
    }
}

/// A failed request in words, without its URL (a chat service's URL is itself a credential).
fn describe(e: &reqwest::Error, timeout: Duration) -> String {
    if e.is_timeout() {
        return format!("no answer within {}", crate::config::Dur(timeout));
    }
    let mut text = if e.is_connect() {
        "could not connect".to_owned()
    } else {
        "the request failed".to_owned()
    };
    let mut source = std::error::Error::source(e);
    let mut last = None;
    while let Some(s) = source {
        last = Some(s.to_string());
        source = s.source();
    }
    if let Some(cause) = last {
        text.push_str(": ");
        text.push_str(&cause);
    }
    text
}

/// Resolves on the next store event that may have recorded a delivery (a prepare, a decision, an
/// vote or an escalation, an outcome, or a resync); never without a stream.
async fn recorded(events: &mut Option<StoreEvents>) {
    let Some(stream) = events.as_mut() else {
        return std::future::pending().await;
    };
    loop {
        match stream.next().await {
            None => {
                *events = None;
                return;
            }
            Some(
                StoreEvent::Prepared { .. }
                | StoreEvent::Decided { .. }
                | StoreEvent::Workflow { .. }
                | StoreEvent::Outcome { .. }
                | StoreEvent::Resync,
            ) => return,
            Some(_) => {}
        }
    }
}

/// Sleeps for `d`; true when `stop` came first.
async fn sleep_or_stop(d: Duration, stop: &CancellationToken) -> bool {
    tokio::select! {
        () = stop.cancelled() => true,
        () = tokio::time::sleep(d) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The specification's reference libraries' published vectors: the Python library's
    /// `test_sign_function` and the Rust library's `test_sign`.
    #[test]
    fn signatures_match_the_reference_libraries_vectors() {
        let python = Secret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        assert_eq!(
            python.sign(
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1_614_265_330,
                br#"{"test": 2432232314}"#
            ),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
        let rust = Secret::parse("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD").unwrap();
        assert_eq!(
            rust.sign(
                "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk",
                1_649_367_553,
                br#"{"email":"test@example.com","username":"test_user"}"#
            ),
            "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw="
        );
        // One byte of the body changed: another signature.
        assert_ne!(
            rust.sign(
                "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk",
                1_649_367_553,
                br#"{"email":"test@example.com","username":"test_userX"}"#
            ),
            "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw="
        );
    }

    #[test]
    fn secrets_are_whsec_and_24_to_64_bytes() {
        assert_eq!(
            Secret::parse("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap_err(),
            "a Standard Webhooks secret starts with whsec_ (then base64 of 24 to 64 random bytes, \
             such as whsec_ and the output of `openssl rand -base64 32`)"
        );
        assert_eq!(
            Secret::parse("whsec_not base64!").unwrap_err(),
            "the secret after whsec_ is not base64"
        );
        assert_eq!(
            Secret::parse("whsec_c2hvcnQ=").unwrap_err(),
            "the secret decodes to 5 bytes; a Standard Webhooks secret is 24 to 64 random bytes"
        );
        // Unpadded base64 and surrounding whitespace (a file's newline) are fine.
        assert!(Secret::parse("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD\n").is_ok());
        let long = format!(
            "whsec_{}",
            base64::engine::general_purpose::STANDARD.encode([7u8; 65])
        );
        assert!(Secret::parse(&long).is_err());
        assert_eq!(
            format!("{:?}", Secret::parse(&long[..long.len() - 4])),
            "Ok(Secret(..))"
        );
    }

    #[test]
    fn retries_back_off_exponentially_and_give_up_by_age() {
        let p = RetryPolicy {
            backoff: Duration::from_secs(5),
            max_backoff: Duration::from_secs(3600),
            give_up_after: Duration::from_secs(72 * 3600),
        };
        let delays: Vec<u64> = (1..=12).map(|n| p.delay(n).as_secs()).collect();
        assert_eq!(
            delays,
            [5, 10, 20, 40, 80, 160, 320, 640, 1280, 2560, 3600, 3600]
        );
        assert_eq!(p.delay(u32::MAX), Duration::from_secs(3600));
        let young = Duration::from_secs(60);
        assert_eq!(p.retry(3, young, None, 1.0), Some(Duration::from_secs(20)));
        assert_eq!(p.retry(3, young, None, 1.2), Some(Duration::from_secs(24)));
        assert_eq!(p.retry(3, young, None, 0.8), Some(Duration::from_secs(16)));
        // Jitter stays within ±20 % whatever it is given.
        assert_eq!(p.retry(3, young, None, 9.0), Some(Duration::from_secs(24)));
        // Retry-After is honoured, up to the longest delay.
        assert_eq!(
            p.retry(1, young, Some(Duration::from_secs(120)), 1.0),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            p.retry(1, young, Some(Duration::from_secs(86_400)), 1.0),
            Some(Duration::from_secs(3600))
        );
        assert_eq!(p.retry(40, Duration::from_secs(72 * 3600), None, 1.0), None);
        for _ in 0..100 {
            let j = jitter();
            assert!((0.8..=1.2).contains(&j), "{j}");
        }
    }

    /// Issue 43 finding 7: a client's name in a Slack message is one line (a newline would
    /// forge another line in the channel), escaped and bounded.
    #[test]
    fn finding_7_slack_shows_a_clients_name_on_one_escaped_bounded_line() {
        let text = |data: Value| -> String {
            let event = serde_json::json!({"type": data["type"], "data": data["data"]});
            let body: Value =
                serde_json::from_str(&body(WebhookFormat::Slack, &event.to_string(), None))
                    .unwrap();
            body["text"].as_str().unwrap().to_owned()
        };
        let pending = |by: &str| {
            serde_json::json!({"type": "approval.pending", "data": {"approval": "approval-7",
                "tool": "set_value", "requestedBy": by, "labels": {"upstream": "values"}}})
        };
        assert_eq!(
            text(pending("local (evil\u{202e}\nname)")),
            "Approval approval-7 waits for a decision: set_value, asked by local \
             (evil\\u202e\\nname) (upstream values)."
        );
        assert_eq!(
            text(pending(&format!("local ({})", "x".repeat(10_000)))),
            format!(
                "Approval approval-7 waits for a decision: set_value, asked by local ({}\u{2026} \
                 (upstream values).",
                "x".repeat(505)
            )
        );
        // As the gateway records it now: the name already bounded to 128 characters.
        assert_eq!(
            text(pending(&format!("local ({}\u{2026})", "x".repeat(128)))),
            format!(
                "Approval approval-7 waits for a decision: set_value, asked by local ({}\u{2026}) \
                 (upstream values).",
                "x".repeat(128)
            )
        );
        let decided = serde_json::json!({"type": "approval.decided", "data": {
            "approval": "approval-7", "tool": "set_value", "verdict": "approve",
            "approver": "evil\u{202e}\nname <b> (app)"}});
        assert_eq!(
            text(decided),
            "set_value (approval approval-7) approved by evil\\u202e\\nname &lt;b&gt; (app)."
        );
    }

    #[test]
    fn bodies_link_to_the_approval_and_slack_gets_one_escaped_line() {
        let pending = r#"{"data":{"approval":"approval-7","expiresAt":null,"intentDigest":"sha256:d","labels":{"upstream":"values"},"principal":"local","requestedAt":"1970-01-01T00:00:00.000000Z","requestedBy":"local (client)","run":"r","tool":"set_value"},"timestamp":"1970-01-01T00:00:01.000000Z","type":"approval.pending"}"#;
        assert_eq!(body(WebhookFormat::Standard, pending, None), pending);
        let linked: Value = serde_json::from_str(&body(
            WebhookFormat::Standard,
            pending,
            Some("https://approvals.example/"),
        ))
        .unwrap();
        assert_eq!(
            linked["data"]["url"],
            "https://approvals.example/approvals/approval-7"
        );
        let page = "https://approvals.example/approvals/approval-7";
        assert_eq!(
            linked["data"]["links"],
            serde_json::json!({"page": page, "approve": format!("{page}?decision=approve"),
                               "deny": format!("{page}?decision=deny")})
        );
        let summary = "Approval approval-7 waits for a decision: set_value, asked by local \
                       (client) (upstream values).";
        let slack: Value = serde_json::from_str(&body(
            WebhookFormat::Slack,
            pending,
            Some("https://approvals.example"),
        ))
        .unwrap();
        assert_eq!(
            slack,
            serde_json::json!({
                "text": format!("{summary} <{page}|Open it on the approver page>"),
                "blocks": [
                    {"type": "section", "text": {"type": "mrkdwn", "text": summary}},
                    {"type": "actions", "elements": [
                        {"type": "button", "action_id": "approve", "style": "primary",
                         "text": {"type": "plain_text", "text": "Approve\u{2026}"},
                         "url": format!("{page}?decision=approve")},
                        {"type": "button", "action_id": "deny", "style": "danger",
                         "text": {"type": "plain_text", "text": "Deny\u{2026}"},
                         "url": format!("{page}?decision=deny")},
                        {"type": "button", "action_id": "open",
                         "text": {"type": "plain_text", "text": "Open"}, "url": page}
                    ]}
                ]
            })
        );
        // Without the page's URL: the one line, no buttons.
        assert_eq!(
            body(WebhookFormat::Slack, pending, None),
            r#"{"text":"Approval approval-7 waits for a decision: set_value, asked by local (client) (upstream values)."}"#
        );
        let decided = r#"{"data":{"approval":"approval-7","approver":"Ada <ada@example> (page)","note":"a & b","principal":"local","tool":"set_value","verdict":"deny"},"type":"approval.decided"}"#;
        // Only a pending approval gets the decision links.
        let decided_linked: Value =
            serde_json::from_str(&body(WebhookFormat::Standard, decided, Some("https://p")))
                .unwrap();
        assert_eq!(
            decided_linked["data"]["url"],
            "https://p/approvals/approval-7"
        );
        assert_eq!(decided_linked["data"].get("links"), None);
        assert_eq!(
            body(WebhookFormat::Slack, decided, None),
            "{\"text\":\"set_value (approval approval-7) denied by Ada &lt;ada@example&gt; (page): \u{201c}a &amp; b\u{201d}\"}"
        );
        let unknown = r#"{"data":{"approval":null,"key":"sha256:k","effect":"unknown","reason":"interrupted","tool":null},"type":"effect.unknown"}"#;
        assert_eq!(
            body(WebhookFormat::Slack, unknown, Some("https://p")),
            r#"{"text":"? (claim sha256:k): effect unknown (interrupted). It is never sent again; an operator reconciles it with evidence."}"#
        );
        let committed = r#"{"data":{"approval":"approval-2","effect":"committed","reconciled":true,"tool":"set_value"},"type":"effect.committed"}"#;
        assert_eq!(
            body(WebhookFormat::Slack, committed, None),
            r#"{"text":"set_value (approval approval-2) committed (reconciled by an operator)."}"#
        );
        let reconciled = r#"{"data":{"approval":"approval-2","by":"ada (cli)","evidence":"ledger <7>\nok","key":"sha256:k","outcome":"not_started","tool":"set_value"},"type":"effect.reconciled"}"#;
        assert_eq!(
            body(WebhookFormat::Slack, reconciled, None),
            "{\"text\":\"set_value (approval approval-2): reconciled as not sent by ada (cli): \u{201c}ledger &lt;7&gt;\\\\nok\u{201d}\"}"
        );
        let changed = r#"{"data":{"change":3,"kind":"changed","tool":"lookup <x>","upstream":"docs"},"type":"catalog.changed"}"#;
        assert_eq!(
            body(WebhookFormat::Slack, changed, Some("https://p")),
            r#"{"text":"Upstream docs changed tool lookup &lt;x&gt;: held for review as catalog change 3 (`purra catalog diff 3`)."}"#
        );
    }

    /// Issue 47: the workflow events read as one line each in Slack.
    #[test]
    fn workflow_events_read_as_one_slack_line_each() {
        use serde_json::json;
        let event = |t: &str, extra: serde_json::Value| {
            let mut data =
                json!({"approval": "approval-7", "tool": "deploy", "principal": "carol"});
            for (k, v) in extra.as_object().unwrap() {
                data[k] = v.clone();
            }
            json!({"type": t, "data": data})
        };
        assert_eq!(
            slack_text(
                &event(
                    "approval.voted",
                    json!({"approver": "alice (page)", "verdict": "approve", "votes": 1, "required": 2})
                ),
                None
            ),
            "deploy (approval approval-7): alice (page) voted approve (1 of 2 votes)."
        );
        assert_eq!(
            slack_text(
                &event("approval.escalated", json!({"escalateTo": ["group:leads", "lena"]})),
                None
            ),
            "deploy (approval approval-7) is still undecided: escalated, group:leads, lena may decide now."
        );
        assert_eq!(
            slack_text(
                &event("approval.expired", json!({"reason": "expired undecided"})),
                None
            ),
            "deploy (approval approval-7) denied at its expiry: expired undecided."
        );
    }
}
