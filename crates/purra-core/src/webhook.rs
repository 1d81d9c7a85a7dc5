//! The webhook outbox contract: approval and effect events recorded for delivery in the same
//! transaction as the change they report, delivered at least once by whoever holds the endpoints'
//! secrets.
//!
//! ```text
//! (change) ──same transaction──▶ pending ──claim (lease)──▶ attempt ──2xx──▶ delivered (row removed)
//!                                   ▲                          │
//!                                   └──── retry after a delay ─┤
//!                                                              └── given up ──▶ failed (kept, visible)
//! ```
//!
//! A store records a delivery only for the endpoints registered with
//! [`WebhookOutbox::set_webhook_endpoints`] that subscribe to the event's type: with none
//! registered nothing is written (one read of an empty index per write, no page changed). When one
//! is registered, the delivery row is inserted by the very transaction that prepares, decides,
//! completes or reconciles, so a change is never reported without having happened and never
//! happens without being reported, whichever process made it (a gateway, `purra approvals approve`,
//! an approver page, another host of a fleet).
//!
//! Each delivery carries its [`WebhookEvent`]'s `webhook-id`, fixed when it is recorded: a retry,
//! a restart, or another process delivering it sends the same id. A delivery is claimed with a
//! lease (its next instant is moved past the attempt), so concurrent deliverers attempt it once at
//! a time, and a deliverer killed mid-attempt leaves it to be claimed again when its lease lapses.
//! The attempt's result is recorded only under the claim it was made under (its attempt number and
//! message id): a late answer of a lapsed lease changes nothing but a success.
//!
//! What an event says ([`WebhookEvent`]): its type, when it happened, and data naming the approval,
//! the tool, the principal that asked, the decision (verdict, approver, note) or the effect (and the
//! reason of an `unknown` one). Never the arguments, a receipt or a token: they may be secret.
//!
//! Delivery itself (HTTP, signatures, the retry schedule) is not here: a deliverer (purra-gateway's
//! `webhooks`) claims, sends, and records what happened.

use crate::approval::{ApprovalId, ApprovalRequest, Decision, Verdict};
use crate::idempotency::{EffectOutcome, IdempotencyKey};
use crate::store::{BoxFuture, StoreError};
use crate::visible::{one_line, WHO_MAX_CHARS};
use serde_json::{json, Map, Value};
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The types of event a webhook endpoint may subscribe to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WebhookEventType {
    /// `approval.pending`: an approval was prepared and waits for a decision.
    ApprovalPending,
    /// `approval.decided`: an approval was approved or denied (by any path, any process).
    ApprovalDecided,
    /// `effect.committed`: a claimed call's effect was recorded committed (or an operator
    /// reconciled an `unknown` one to committed).
    EffectCommitted,
    /// `effect.unknown`: a claimed call's effect is unknown (the call may or may not have had its
    /// effect; an operator reconciles it).
    EffectUnknown,
    /// `effect.reconciled`: an operator recorded a decision on an `unknown` effect (committed or
    /// not sent), with who and the evidence.
    EffectReconciled,
    /// `catalog.changed`: an upstream lists a bound tool differently from its pinned definition
    /// (or no longer lists it); the change waits for an operator (recorded once per distinct
    /// difference, whichever process saw it).
    CatalogChanged,
    /// `approval.voted`: one vote on an approval that needs a quorum left it pending (the vote
    /// that closes it records `approval.decided`); with the tally.
    ApprovalVoted,
    /// `approval.escalated`: an approval undecided after its binding's `escalate_after` may now
    /// be decided by `escalate_to` too (recorded once for a fleet).
    ApprovalEscalated,
    /// `approval.expired`: an approval undecided at its request's expiry was denied (its binding
    /// says `on_expiry = "deny"`).
    ApprovalExpired,
}

impl WebhookEventType {
    /// Every type, in the order of the write state machine, then the catalog's.
    pub const ALL: [WebhookEventType; 9] = [
        WebhookEventType::ApprovalPending,
        WebhookEventType::ApprovalDecided,
        WebhookEventType::EffectCommitted,
        WebhookEventType::EffectUnknown,
        WebhookEventType::EffectReconciled,
        WebhookEventType::CatalogChanged,
        WebhookEventType::ApprovalVoted,
        WebhookEventType::ApprovalEscalated,
        WebhookEventType::ApprovalExpired,
    ];

    /// `approval.pending`, `approval.decided`, `effect.committed`, `effect.unknown`,
    /// `effect.reconciled`, `catalog.changed`, `approval.voted`, `approval.escalated` or
    /// `approval.expired`.
    pub fn as_str(self) -> &'static str {
        match self {
            WebhookEventType::ApprovalPending => "approval.pending",
            WebhookEventType::ApprovalDecided => "approval.decided",
            WebhookEventType::EffectCommitted => "effect.committed",
            WebhookEventType::EffectUnknown => "effect.unknown",
            WebhookEventType::EffectReconciled => "effect.reconciled",
            WebhookEventType::CatalogChanged => "catalog.changed",
            WebhookEventType::ApprovalVoted => "approval.voted",
            WebhookEventType::ApprovalEscalated => "approval.escalated",
            WebhookEventType::ApprovalExpired => "approval.expired",
        }
    }

    /// Reads [`WebhookEventType::as_str`]'s words.
    pub fn parse(word: &str) -> Option<WebhookEventType> {
        WebhookEventType::ALL
            .into_iter()
            .find(|t| t.as_str() == word)
    }
}

impl fmt::Display for WebhookEventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A webhook message id (`webhook-id`): `msg_` and 32 lowercase hexadecimal digits of 128 random
/// bits, fixed when the event is recorded. It never contains a `.`, which the signature scheme
/// uses as its separator.
pub fn new_message_id() -> Result<String, StoreError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|e| StoreError::Backend(format!("no randomness for a webhook id: {e}")))?;
    let mut id = String::with_capacity(36);
    id.push_str("msg_");
    for b in bytes {
        id.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
        id.push(char::from(b"0123456789abcdef"[usize::from(b & 15)]));
    }
    Ok(id)
}

/// An instant as RFC 3339 in UTC with microseconds (`2026-05-04T12:30:05.123456Z`), as the
/// Standard Webhooks payload's `timestamp` is written.
pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (y, m, day) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        d.subsec_micros()
    )
}

/// The proleptic Gregorian date of `days` after 1970-01-01 (the days-to-civil conversion over
/// 400-year eras of 146 097 days).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// What an approval event names of its approval: the id, the tool, and the principal that asked
/// (its request's `principal` label, when it has one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApprovalRef {
    /// The approval.
    pub id: ApprovalId,
    /// The local tool name.
    pub tool: String,
    /// The principal the approval was asked for.
    pub principal: Option<String>,
}

/// One event as a receiver gets it: the Standard Webhooks payload `{"type", "timestamp",
/// "data"}`.
#[derive(Clone, Debug, PartialEq)]
pub struct WebhookEvent {
    /// What happened.
    pub event_type: WebhookEventType,
    /// When it happened (recorded by the store).
    pub at: SystemTime,
    /// The event's data (camelCase members).
    pub data: Value,
}

impl WebhookEvent {
    /// `approval.pending` for the request prepared as `id` at `at`: the approval, the tool, the run,
    /// the intent digest, the principal, who asked and when, until when a decision is accepted,
    /// and the request's labels. Not its arguments.
    pub fn pending(id: &ApprovalId, request: &ApprovalRequest, at: SystemTime) -> WebhookEvent {
        let mut data = Map::new();
        data.insert("approval".into(), json!(id.0));
        data.insert("tool".into(), json!(request.intent.tool));
        data.insert("run".into(), json!(request.intent.run_id.as_str()));
        data.insert(
            "intentDigest".into(),
            json!(request.intent.digest().as_str()),
        );
        data.insert("principal".into(), json!(request.requester()));
        // Who asked names a client, which chooses its name: one line, escaped and bounded.
        data.insert(
            "requestedBy".into(),
            json!(one_line(&request.requested_by, WHO_MAX_CHARS)),
        );
        data.insert("requestedAt".into(), json!(rfc3339(request.requested_at)));
        data.insert("expiresAt".into(), json!(request.expires_at.map(rfc3339)));
        // Labels may carry what a client chose (the gateway's `client` label is its declared
        // name): each value one line, escaped and bounded, like who asked. The input schema an
        // approver's edit is checked against is for the page, not for notices.
        let labels: Map<String, Value> = request
            .labels
            .iter()
            .filter(|(k, _)| k.as_str() != crate::edit::INPUT_SCHEMA_LABEL)
            .map(|(k, v)| (k.clone(), json!(one_line(v, WHO_MAX_CHARS))))
            .collect();
        data.insert("labels".into(), Value::Object(labels));
        WebhookEvent {
            event_type: WebhookEventType::ApprovalPending,
            at,
            data: Value::Object(data),
        }
    }

    /// `approval.decided` for `approval`'s `decision`, recorded at `at`: the verdict (`approve` or
    /// `deny`), the approver (with the path it came by), the note, when, and until when an approval
    /// authorizes its call.
    pub fn decided(approval: &ApprovalRef, decision: &Decision, at: SystemTime) -> WebhookEvent {
        let mut data = approval_data(approval);
        data.insert(
            "verdict".into(),
            json!(match decision.verdict {
                Verdict::Approve => "approve",
                Verdict::Deny => "deny",
            }),
        );
        data.insert(
            "approver".into(),
            json!(one_line(&decision.approver, WHO_MAX_CHARS)),
        );
        data.insert("note".into(), json!(decision.note));
        data.insert("decidedAt".into(), json!(rfc3339(decision.decided_at)));
        data.insert("expiresAt".into(), json!(decision.expires_at.map(rfc3339)));
        WebhookEvent {
            event_type: WebhookEventType::ApprovalDecided,
            at,
            data: Value::Object(data),
        }
    }

    /// `approval.voted` for `vote` on `approval`, recorded at `at`: the voter, the verdict, the
    /// note, and the tally (`votes`: approving votes so far, `required`).
    pub fn voted(
        approval: &ApprovalRef,
        vote: &crate::workflow::Vote,
        votes: u32,
        required: u32,
        at: SystemTime,
    ) -> WebhookEvent {
        let mut data = approval_data(approval);
        data.insert(
            "verdict".into(),
            json!(match vote.verdict {
                Verdict::Approve => "approve",
                Verdict::Deny => "deny",
            }),
        );
        data.insert(
            "approver".into(),
            json!(one_line(&vote.approver, WHO_MAX_CHARS)),
        );
        data.insert("note".into(), json!(vote.note));
        data.insert("votes".into(), json!(votes));
        data.insert("required".into(), json!(required));
        WebhookEvent {
            event_type: WebhookEventType::ApprovalVoted,
            at,
            data: Value::Object(data),
        }
    }

    /// `approval.escalated` or `approval.expired` (`event_type`) for `approval` at `at`, with
    /// who may decide now (`escalateTo`) or the reason of the denial (`reason`).
    pub fn workflow(
        event_type: WebhookEventType,
        approval: &ApprovalRef,
        detail: (&str, Value),
        at: SystemTime,
    ) -> WebhookEvent {
        let mut data = approval_data(approval);
        data.insert(detail.0.into(), detail.1);
        WebhookEvent {
            event_type,
            at,
            data: Value::Object(data),
        }
    }

    /// `effect.committed` or `effect.unknown` for the claim `key` (made by `approval`, when an
    /// approval made it) completed with `outcome` at `at`; `reconciled` when an operator's
    /// reconciliation recorded it. `None` for `not_started`, which no event reports. Never the
    /// receipt.
    pub fn effect(
        key: &IdempotencyKey,
        approval: Option<&ApprovalRef>,
        outcome: &EffectOutcome,
        reconciled: bool,
        at: SystemTime,
    ) -> Option<WebhookEvent> {
        let mut data = match approval {
            Some(a) => approval_data(a),
            None => {
                let mut m = Map::new();
                m.insert("approval".into(), Value::Null);
                m.insert("tool".into(), Value::Null);
                m.insert("principal".into(), Value::Null);
                m
            }
        };
        data.insert("key".into(), json!(key.0));
        let event_type = match outcome {
            EffectOutcome::Committed { .. } => {
                data.insert("effect".into(), json!("committed"));
                WebhookEventType::EffectCommitted
            }
            EffectOutcome::Unknown { reason } => {
                data.insert("effect".into(), json!("unknown"));
                data.insert("reason".into(), json!(reason.as_str()));
                WebhookEventType::EffectUnknown
            }
            EffectOutcome::NotStarted => return None,
        };
        data.insert("reconciled".into(), json!(reconciled));
        Some(WebhookEvent {
            event_type,
            at,
            data: Value::Object(data),
        })
    }

    /// `effect.reconciled` for the claim `key` (made by `approval`, when an approval made it)
    /// reconciled to `outcome` by the operator `by` with `evidence` (bounded by the store's
    /// checks, at most [`MAX_EVIDENCE_BYTES`](crate::MAX_EVIDENCE_BYTES)) at `at`. Never the
    /// receipt.
    pub fn reconciled(
        key: &IdempotencyKey,
        approval: Option<&ApprovalRef>,
        outcome: &EffectOutcome,
        by: &str,
        evidence: &str,
        at: SystemTime,
    ) -> WebhookEvent {
        let mut data = match approval {
            Some(a) => approval_data(a),
            None => {
                let mut m = Map::new();
                m.insert("approval".into(), Value::Null);
                m.insert("tool".into(), Value::Null);
                m.insert("principal".into(), Value::Null);
                m
            }
        };
        data.insert("key".into(), json!(key.0));
        data.insert(
            "outcome".into(),
            json!(crate::stored::outcome_kind(outcome)),
        );
        data.insert("by".into(), json!(one_line(by, WHO_MAX_CHARS)));
        data.insert("evidence".into(), json!(evidence));
        WebhookEvent {
            event_type: WebhookEventType::EffectReconciled,
            at,
            data: Value::Object(data),
        }
    }

    /// `catalog.changed` for `change`, recorded at `at`: the change's id, the upstream, the tool,
    /// the kind (`changed` or `removed`), the pinned and new digests and who saw it. Not the
    /// definitions (`purra catalog diff` shows them).
    pub fn catalog_changed(change: &crate::pins::CatalogChange, at: SystemTime) -> WebhookEvent {
        let mut data = Map::new();
        data.insert("change".into(), json!(change.id));
        data.insert("upstream".into(), json!(change.upstream));
        data.insert("tool".into(), json!(change.tool));
        data.insert("kind".into(), json!(change.kind.as_str()));
        data.insert("pinnedDigest".into(), json!(change.old_digest));
        data.insert("newDigest".into(), json!(change.new_digest));
        data.insert(
            "seenBy".into(),
            json!(one_line(&change.seen_by, WHO_MAX_CHARS)),
        );
        data.insert("seenAt".into(), json!(rfc3339(change.seen_at)));
        WebhookEvent {
            event_type: WebhookEventType::CatalogChanged,
            at,
            data: Value::Object(data),
        }
    }

    /// The event's type for an outcome (`None` for `not_started`).
    pub fn effect_type(outcome: &EffectOutcome) -> Option<WebhookEventType> {
        match outcome {
            EffectOutcome::Committed { .. } => Some(WebhookEventType::EffectCommitted),
            EffectOutcome::Unknown { .. } => Some(WebhookEventType::EffectUnknown),
            EffectOutcome::NotStarted => None,
        }
    }

    /// The payload as JSON.
    pub fn to_json(&self) -> Value {
        json!({
            "type": self.event_type.as_str(),
            "timestamp": rfc3339(self.at),
            "data": self.data,
        })
    }

    /// The payload as compact JSON text: what a store records and a deliverer sends. Members
    /// are written in RFC 8785's canonical order, so the bytes signed and sent are the same
    /// whatever order serde_json keeps maps in (its `preserve_order` feature, which another
    /// crate in the same build may turn on).
    pub fn payload(&self) -> String {
        let json = self.to_json();
        // Strings, nulls and small integers only; canonicalization fails on none of them, and
        // the plain form would still be valid JSON.
        crate::identity::canonicalize(&json).unwrap_or_else(|_| json.to_string())
    }
}

fn approval_data(a: &ApprovalRef) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("approval".into(), json!(a.id.0));
    m.insert("tool".into(), json!(a.tool));
    m.insert("principal".into(), json!(a.principal));
    m
}

/// One webhook endpoint as a store knows it: its name and the event types it subscribes to (the
/// URL and the secret stay with whoever delivers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookEndpoint {
    /// The endpoint's name (`[webhooks.NAME]`).
    pub name: String,
    /// The event types recorded for it.
    pub events: Vec<WebhookEventType>,
}

/// The claim on one attempt: which delivery, under which attempt number. Results are recorded
/// only under the claim that is current.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookLease {
    /// The delivery's row.
    pub seq: i64,
    /// Its message id.
    pub msg_id: String,
    /// The attempt this claim is for (1 for the first).
    pub attempt: u32,
}

/// A delivery claimed for one attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookDelivery {
    /// The claim (the delivery's row, its `webhook-id`, the attempt number).
    pub lease: WebhookLease,
    /// The endpoint's name.
    pub endpoint: String,
    /// The event's type.
    pub event_type: WebhookEventType,
    /// The payload as recorded (compact JSON).
    pub payload: String,
    /// How long ago the event was recorded (by the store's clock).
    pub age: Duration,
}

/// What became of a failed attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookFailure {
    /// The HTTP status, when the receiver answered.
    pub status: Option<u16>,
    /// What went wrong, for operators (never shown to a model).
    pub error: String,
}

/// A delivery's state in one word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WebhookState {
    /// Waiting for its next attempt (or being attempted).
    Pending,
    /// Given up: kept, never attempted again unless an operator retries it.
    Failed,
}

impl WebhookState {
    /// `pending` or `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            WebhookState::Pending => "pending",
            WebhookState::Failed => "failed",
        }
    }
}

/// One undelivered delivery as an operator sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookDeliveryView {
    /// Its row (increasing, never reused).
    pub seq: i64,
    /// Its `webhook-id`.
    pub msg_id: String,
    /// The endpoint's name.
    pub endpoint: String,
    /// The event's type.
    pub event_type: WebhookEventType,
    /// The payload as recorded.
    pub payload: String,
    /// Pending or failed.
    pub state: WebhookState,
    /// Attempts started so far.
    pub attempts: u32,
    /// When the event was recorded.
    pub created_at: SystemTime,
    /// When it is attempted next (pending only).
    pub next_at: Option<SystemTime>,
    /// The last attempt's HTTP status, when the receiver answered.
    pub last_status: Option<u16>,
    /// What the last attempt's failure was.
    pub last_error: Option<String>,
}

/// Which deliveries [`WebhookOutbox::webhook_deliveries`] lists, oldest first.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct WebhookQuery {
    /// Only deliveries in this state.
    pub state: Option<WebhookState>,
    /// Only this endpoint's.
    pub endpoint: Option<String>,
    /// Only deliveries after this row.
    pub after: i64,
    /// At most this many (capped at [`crate::MAX_PAGE`]; 0 means the cap).
    pub limit: u32,
}

impl WebhookQuery {
    /// Every undelivered delivery (the first page).
    pub fn all() -> WebhookQuery {
        WebhookQuery::default()
    }

    /// Only deliveries in `state`.
    pub fn state(mut self, state: WebhookState) -> Self {
        self.state = Some(state);
        self
    }

    /// Only `endpoint`'s.
    pub fn endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.endpoint = Some(endpoint.into());
        self
    }

    /// Only deliveries after row `seq`.
    pub fn after(mut self, seq: i64) -> Self {
        self.after = seq;
        self
    }

    /// At most `limit`.
    pub fn limit(mut self, limit: u32) -> Self {
        self.limit = limit;
        self
    }

    /// The effective limit: at most [`crate::MAX_PAGE`], the cap when unset.
    pub fn page(&self) -> u32 {
        if self.limit == 0 {
            crate::MAX_PAGE
        } else {
            self.limit.min(crate::MAX_PAGE)
        }
    }
}

/// The reason recorded when an endpoint is no longer configured and its pending deliveries are
/// given up.
pub const ENDPOINT_REMOVED: &str = "the endpoint is no longer configured";

/// The webhook outbox a durable store keeps beside its other contracts (see the module
/// documentation). Every method's instants are the store's own clock.
pub trait WebhookOutbox: Send + Sync {
    /// Registers exactly `endpoints`: from the next write on, an event is recorded for each of
    /// them that subscribes to its type. An endpoint registered before and missing from
    /// `endpoints` is retired ([`WebhookOutbox::retire_webhook_endpoint`] with
    /// [`ENDPOINT_REMOVED`]). `Conflict` for an empty or repeated name.
    fn set_webhook_endpoints(
        &self,
        endpoints: Vec<WebhookEndpoint>,
    ) -> BoxFuture<'_, Result<(), StoreError>>;
    /// The registered endpoints, by name, each with its types in [`WebhookEventType::ALL`]'s order.
    fn webhook_endpoints(&self) -> BoxFuture<'_, Result<Vec<WebhookEndpoint>, StoreError>>;
    /// Stops recording events for `endpoint` and gives up its pending deliveries (failed, with
    /// `reason`), in one transaction; how many were given up. They stay listed
    /// ([`WebhookOutbox::webhook_deliveries`]) and an operator may retry them.
    fn retire_webhook_endpoint(
        &self,
        endpoint: String,
        reason: String,
    ) -> BoxFuture<'_, Result<u64, StoreError>>;
    /// How long until `endpoint`'s next pending delivery is due (zero when one is due now, a
    /// leased one counting from its lease's end); `None` when none is pending.
    fn next_webhook_due(
        &self,
        endpoint: String,
    ) -> BoxFuture<'_, Result<Option<Duration>, StoreError>>;
    /// Claims `endpoint`'s delivery that has been due longest (oldest first among equals) for one
    /// attempt: its attempt count grows by one and it is not due again until `lease` has passed,
    /// so no other deliverer attempts it meanwhile. `None` when none is due.
    fn claim_webhook(
        &self,
        endpoint: String,
        lease: Duration,
    ) -> BoxFuture<'_, Result<Option<WebhookDelivery>, StoreError>>;
    /// Records a successful attempt: the delivery is removed. A success counts under any claim
    /// of the delivery (a lapsed lease's answer arriving late is still a delivery); false when
    /// the delivery was no longer pending.
    fn webhook_delivered(&self, lease: WebhookLease) -> BoxFuture<'_, Result<bool, StoreError>>;
    /// Records a failed attempt under `lease`: the delivery is due again after `retry` (the
    /// deliverer's backoff), or with `None` given up (failed, kept). False, and nothing changed,
    /// when `lease` is no longer the delivery's current claim (another deliverer claimed it
    /// since) or the delivery is no longer pending.
    fn webhook_failed(
        &self,
        lease: WebhookLease,
        failure: WebhookFailure,
        retry: Option<Duration>,
    ) -> BoxFuture<'_, Result<bool, StoreError>>;
    /// Makes every pending delivery of `endpoint` that waits for a retry (not one being
    /// attempted) due now, as when the endpoint answered again after an outage; how many.
    fn webhooks_due_now(&self, endpoint: String) -> BoxFuture<'_, Result<u64, StoreError>>;
    /// The undelivered deliveries `query` selects, oldest first.
    fn webhook_deliveries(
        &self,
        query: WebhookQuery,
    ) -> BoxFuture<'_, Result<Vec<WebhookDeliveryView>, StoreError>>;
    /// An operator's retry: every failed delivery (of `endpoint`, when given) becomes pending and
    /// due now, with its attempts kept; how many.
    fn retry_failed_webhooks(
        &self,
        endpoint: Option<String>,
    ) -> BoxFuture<'_, Result<u64, StoreError>>;
}

/// Checks the endpoints given to [`WebhookOutbox::set_webhook_endpoints`]: names non-empty and
/// distinct.
pub fn check_endpoints(endpoints: &[WebhookEndpoint]) -> Result<(), StoreError> {
    let mut seen = std::collections::BTreeSet::new();
    for e in endpoints {
        if e.name.is_empty() {
            return Err(StoreError::Conflict("a webhook endpoint needs a name"));
        }
        if !seen.insert(e.name.as_str()) {
            return Err(StoreError::Conflict("a webhook endpoint is named twice"));
        }
    }
    Ok(())
}

/// The event types of a stored word list, in [`WebhookEventType::ALL`]'s order (unknown words
/// are a backend failure: a newer build wrote them).
pub fn types_of<'a>(
    words: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<WebhookEventType>, StoreError> {
    let mut out = Vec::new();
    for w in words {
        let t = WebhookEventType::parse(w)
            .ok_or_else(|| StoreError::Backend(format!("stored webhook event type {w:?}")))?;
        if !out.contains(&t) {
            out.push(t);
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::{ApprovalIntent, CheckpointCall};
    use crate::identity::json_identity;
    use crate::run::RunId;
    use crate::tool::ApprovalBinding;
    use std::collections::BTreeMap;

    #[test]
    fn instants_are_written_in_rfc3339_utc_to_the_microsecond() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000000Z");
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::new(1_667_507_170, 344_522_999)),
            "2022-11-03T20:26:10.344522Z"
        );
        // A leap day, the last second of a century year, and 2100 (not a leap year).
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00.000000Z"
        );
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(978_307_199)),
            "2000-12-31T23:59:59.000000Z"
        );
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(4_107_542_400)),
            "2100-03-01T00:00:00.000000Z"
        );
    }

    #[test]
    fn message_ids_are_random_and_never_hold_a_dot() {
        let a = new_message_id().unwrap();
        let b = new_message_id().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert!(a.starts_with("msg_"));
        assert!(a[4..]
            .chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)));
    }

    #[test]
    fn types_have_one_word_each() {
        let words: Vec<&str> = WebhookEventType::ALL.iter().map(|t| t.as_str()).collect();
        assert_eq!(
            words,
            [
                "approval.pending",
                "approval.decided",
                "effect.committed",
                "effect.unknown",
                "effect.reconciled",
                "catalog.changed",
                "approval.voted",
                "approval.escalated",
                "approval.expired"
            ]
        );
        for t in WebhookEventType::ALL {
            assert_eq!(WebhookEventType::parse(t.as_str()), Some(t));
        }
        assert_eq!(WebhookEventType::parse("approval.claimed"), None);
        assert_eq!(
            types_of(["effect.unknown", "approval.pending", "effect.unknown"]),
            Ok(vec![
                WebhookEventType::ApprovalPending,
                WebhookEventType::EffectUnknown
            ])
        );
        assert!(types_of(["approval.other"]).is_err());
        let named = |n: &str| WebhookEndpoint {
            name: n.into(),
            events: vec![],
        };
        assert_eq!(check_endpoints(&[named("a"), named("b")]), Ok(()));
        assert!(check_endpoints(&[named("a"), named("a")]).is_err());
        assert!(check_endpoints(&[named("")]).is_err());
    }

    fn request() -> ApprovalRequest {
        let binding = ApprovalBinding {
            binding_id: "b".into(),
            binding_revision: "1".into(),
            scope_id: "s".into(),
            scope_revision: "1".into(),
        };
        let arguments = json!({"value": "secret argument"});
        ApprovalRequest {
            intent: ApprovalIntent {
                tool: "set_value".into(),
                arguments_digest: json_identity(&arguments).unwrap(),
                approval_binding: binding.identity(),
                checkpoint_call: CheckpointCall {
                    call_id: "call".into(),
                    tool: "set_value".into(),
                },
                run_id: RunId::new("gw:set_value:0011"),
                preset_fingerprint: json_identity(&json!("p")).unwrap(),
            },
            arguments,
            binding,
            requested_by: "local (client)".into(),
            requested_at: UNIX_EPOCH + Duration::from_secs(60),
            expires_at: Some(UNIX_EPOCH + Duration::from_secs(3660)),
            labels: BTreeMap::from([
                ("principal".to_owned(), "local".to_owned()),
                ("upstream".to_owned(), "values".to_owned()),
            ]),
        }
    }

    /// Issue 43 finding 7: a client's name in who asked and who decided reaches a Standard
    /// Webhooks payload on one line, escaped and bounded, whatever the record holds.
    #[test]
    fn finding_7_payloads_carry_a_clients_name_escaped_and_bounded() {
        let id = ApprovalId("approval-7".into());
        let at = UNIX_EPOCH + Duration::from_secs(61);
        let mut r = request();
        r.requested_by = "local (evil\u{202e}\nname)".into();
        let pending = WebhookEvent::pending(&id, &r, at);
        assert_eq!(
            pending.to_json()["data"]["requestedBy"],
            "local (evil\\u202e\\nname)"
        );
        assert!(pending
            .payload()
            .contains(r#""requestedBy":"local (evil\\u202e\\nname)""#));
        // The gateway's `client` label holds the declared name as sent: shown escaped too.
        r.labels
            .insert("client".into(), "evil\u{202e}\nname".into());
        assert_eq!(
            WebhookEvent::pending(&id, &r, at).to_json()["data"]["labels"]["client"],
            "evil\\u202e\\nname"
        );
        // The input schema an edit is checked against stays on the page.
        r.labels
            .insert(crate::edit::INPUT_SCHEMA_LABEL.into(), "{}".into());
        r.labels
            .insert(crate::edit::ALLOW_EDIT_LABEL.into(), "true".into());
        let labels = &WebhookEvent::pending(&id, &r, at).to_json()["data"]["labels"];
        assert!(labels.get(crate::edit::INPUT_SCHEMA_LABEL).is_none());
        assert_eq!(labels[crate::edit::ALLOW_EDIT_LABEL], "true");
        r.requested_by = format!("local ({})", "x".repeat(10_000));
        assert_eq!(
            WebhookEvent::pending(&id, &r, at).to_json()["data"]["requestedBy"],
            format!("local ({}\u{2026}", "x".repeat(505))
        );
        let a = ApprovalRef {
            id,
            tool: "set_value".into(),
            principal: Some("local".into()),
        };
        let decision = Decision {
            verdict: Verdict::Approve,
            approver: "evil\u{202e}\nname (app)".into(),
            decided_at: UNIX_EPOCH + Duration::from_secs(70),
            expires_at: None,
            note: None,
        };
        assert_eq!(
            WebhookEvent::decided(&a, &decision, at).to_json()["data"]["approver"],
            "evil\\u202e\\nname (app)"
        );
    }

    /// The payloads, exactly: the Standard Webhooks shape, camelCase data, and never the
    /// arguments or the receipt.
    #[test]
    fn payloads_name_the_approval_and_never_the_arguments_or_the_receipt() {
        let r = request();
        let id = ApprovalId("approval-7".into());
        let at = UNIX_EPOCH + Duration::from_secs(61);
        let pending = WebhookEvent::pending(&id, &r, at);
        assert_eq!(
            pending.to_json(),
            json!({
                "type": "approval.pending",
                "timestamp": "1970-01-01T00:01:01.000000Z",
                "data": {
                    "approval": "approval-7",
                    "tool": "set_value",
                    "run": "gw:set_value:0011",
                    "intentDigest": r.intent.digest().as_str(),
                    "principal": "local",
                    "requestedBy": "local (client)",
                    "requestedAt": "1970-01-01T00:01:00.000000Z",
                    "expiresAt": "1970-01-01T01:01:00.000000Z",
                    "labels": {"principal": "local", "upstream": "values"}
                }
            })
        );
        assert!(!pending.payload().contains("secret argument"));
        let a = ApprovalRef {
            id: id.clone(),
            tool: "set_value".into(),
            principal: Some("local".into()),
        };
        let decision = Decision {
            verdict: Verdict::Deny,
            approver: "ada (cli)".into(),
            decided_at: UNIX_EPOCH + Duration::from_secs(70),
            expires_at: None,
            note: Some("not today".into()),
        };
        assert_eq!(
            WebhookEvent::decided(&a, &decision, at).payload(),
            "{\"data\":{\"approval\":\"approval-7\",\"approver\":\"ada (cli)\",\
             \"decidedAt\":\"1970-01-01T00:01:10.000000Z\",\"expiresAt\":null,\"note\":\"not today\",\
             \"principal\":\"local\",\"tool\":\"set_value\",\"verdict\":\"deny\"},\
             \"timestamp\":\"1970-01-01T00:01:01.000000Z\",\"type\":\"approval.decided\"}"
        );
        let key = IdempotencyKey("sha256:k".into());
        let committed = EffectOutcome::Committed {
            receipt: json!({"stored": "secret receipt"}),
        };
        let e = WebhookEvent::effect(&key, Some(&a), &committed, false, at).unwrap();
        assert_eq!(e.event_type, WebhookEventType::EffectCommitted);
        assert_eq!(
            e.data,
            json!({"approval": "approval-7", "tool": "set_value", "principal": "local",
                   "key": "sha256:k", "effect": "committed", "reconciled": false})
        );
        assert!(!e.payload().contains("secret receipt"));
        let unknown = EffectOutcome::Unknown {
            reason: crate::ErrorCode::new("interrupted").unwrap(),
        };
        let u = WebhookEvent::effect(&key, None, &unknown, true, at).unwrap();
        assert_eq!(
            u.data,
            json!({"approval": null, "tool": null, "principal": null, "key": "sha256:k",
                   "effect": "unknown", "reason": "interrupted", "reconciled": true})
        );
        assert_eq!(
            WebhookEvent::effect(&key, Some(&a), &EffectOutcome::NotStarted, false, at),
            None
        );
        assert_eq!(WebhookEvent::effect_type(&EffectOutcome::NotStarted), None);
    }

    #[test]
    fn queries_are_capped() {
        assert_eq!(WebhookQuery::all().page(), crate::MAX_PAGE);
        assert_eq!(WebhookQuery::all().limit(5).page(), 5);
        assert_eq!(WebhookQuery::all().limit(50_000).page(), crate::MAX_PAGE);
    }
}
