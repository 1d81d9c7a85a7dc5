//! The gateway's configuration as data: settings, limits, upstream servers, and one read or write
//! binding per upstream tool a downstream client may use. The bottom layer of the crate: it
//! imports nothing else of it, and reading a file starts nothing.
//!
//! One set of types is the configuration's only declaration: they derive serde
//! (`deny_unknown_fields`), so an embedding host can build them in code or deserialize them from
//! any format, and schemars, from which come the JSON Schema ([`json_schema`], published as
//! `docs/src/reference/gateway.schema.json` for editors), the reference page ([`reference`](mod@reference)) and
//! the reading of a file with every mistake at once, each with its file, line and key
//! ([`load_str`], [`load_file`]; [`crate::load`] also reads the policy files it names).
//! [`GatewayConfig::check`] is the part of the validation that needs no file (names, scope rules,
//! write authorizations); both paths run it.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use purra_core::{Concurrency, Risk};
use purra_mcp::{Limits, WriteEffect};
use purra_protocol::skills::{is_skill_name, skill_root};
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::config::rule::ArgumentRule;

pub(crate) mod parse;
pub mod reference;
pub(crate) mod rule;
mod schema;
pub(crate) mod secret;

pub use parse::{load_file, load_str, ConfigSource, Loaded, MAX_CONFIG_BYTES};
pub(crate) use parse::{read, LineIndex};
pub use schema::json_schema;

/// The gateway's app-only tool that reads and decides one write call's approval (`[gateway]
/// apps`): no binding may take its name while apps are on.
pub const APPROVAL_TOOL: &str = "purra_approval";

/// The longest `approval_ttl` and `approval_request_ttl`: a year.
const MAX_TTL: Duration = Duration::from_secs(365 * 24 * 3600);

/// The default of `max_pending_per_caller`: a person deciding works through a handful of waiting
/// writes; an agent that asks for more is flooding the approvers.
const DEFAULT_MAX_PENDING_PER_CALLER: u32 = 16;

/// The largest `max_pending_per_caller`: the count before each new approval reads at most this
/// many index entries (a listing's page bound).
const MAX_PENDING_PER_CALLER: u32 = purra_core::MAX_PAGE;

/// The default of `max_calls_per_minute_per_caller`: ten calls a second, sustained, for one
/// principal; far more than a person's agent makes, far less than a runaway loop.
const DEFAULT_MAX_CALLS_PER_MINUTE: u32 = 600;

/// The largest `max_calls_per_minute_per_caller`: a thousand calls a second.
const MAX_CALLS_PER_MINUTE: u32 = 60_000;

/// The default of `max_sessions`: the HTTP listener's established MCP sessions, all callers.
const DEFAULT_MAX_SESSIONS: usize = 10_000;

/// The largest `max_sessions`.
const MAX_MAX_SESSIONS: usize = 1_000_000;

/// The default of `max_sessions_per_caller`: an agent holds a session or two at a time; sixteen
/// leaves room for restarts whose old sessions have not expired.
const DEFAULT_MAX_SESSIONS_PER_CALLER: usize = 16;

/// The default of `session_idle_timeout`.
const DEFAULT_SESSION_IDLE_TIMEOUT: Duration = Duration::from_secs(600);

/// The most policy files `[policies] files` may name (each is read whole at start).
pub const MAX_POLICY_FILES: usize = 64;

/// The longest name of a declared claim, in bytes.
const MAX_CLAIM_NAME_BYTES: usize = 128;

/// A whole gateway configuration.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GatewayConfig {
    /// Settings of the gateway itself.
    #[serde(default)]
    pub gateway: Settings,
    /// Bounds on upstream discovery and calls.
    #[serde(default)]
    pub limits: LimitsConfig,
    /// Upstream servers by id.
    #[serde(default)]
    pub upstreams: BTreeMap<String, UpstreamConfig>,
    /// Read bindings by local name.
    #[serde(default)]
    pub reads: BTreeMap<String, ReadConfig>,
    /// Write bindings by local name.
    #[serde(default)]
    pub writes: BTreeMap<String, WriteConfig>,
    /// Skill bindings (the Skills extension) by the skill's name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub skills: BTreeMap<String, SkillConfig>,
    /// The approver page's sign-in, when the gateway serves the page (`--page`).
    #[serde(default)]
    pub page: PageSettings,
    /// Cedar policies every call of a bound tool must be permitted by (the `[policies]` table);
    /// none: only the bindings' scope rules decide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policies: Option<PoliciesConfig>,
    /// Webhook endpoints by name: where approval and effect events are delivered.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub webhooks: BTreeMap<String, WebhookConfig>,
    /// Where spans and metrics go (the `[telemetry]` table).
    #[serde(default)]
    pub telemetry: TelemetrySettings,
    /// How the store `[gateway] db` names is used (the `[store]` table).
    #[serde(default)]
    pub store: StoreSettings,
    /// Approver groups by name (`[approvers.groups]`), for the `group:NAME` entries of a
    /// write's `approval` rules.
    #[serde(default, skip_serializing_if = "ApproversConfig::is_empty")]
    pub approvers: ApproversConfig,
}

/// The `[approvers]` table: who belongs to which approver group, by name. The approver page
/// adds the groups of an OpenID Connect sign-in's groups claim; `purra approvals approve --as
/// NAME` and token approvers of the page are members of the groups listing `NAME`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApproversConfig {
    /// Group name to member names (`sre = ["alice", "bob"]`).
    #[serde(default)]
    pub groups: BTreeMap<String, Vec<String>>,
}

impl ApproversConfig {
    /// Whether no group is configured.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// The groups listing `name`, sorted.
    pub fn groups_of(&self, name: &str) -> Vec<String> {
        self.groups
            .iter()
            .filter(|(_, members)| members.iter().any(|m| m == name))
            .map(|(g, _)| g.clone())
            .collect()
    }
}

/// The events a webhook endpoint may subscribe to, as the configuration spells them.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum WebhookEventName {
    /// An approval waits for a decision.
    #[serde(rename = "approval.pending")]
    ApprovalPending,
    /// An approval was approved or denied.
    #[serde(rename = "approval.decided")]
    ApprovalDecided,
    /// A write's effect was recorded committed.
    #[serde(rename = "effect.committed")]
    EffectCommitted,
    /// A write's effect is unknown.
    #[serde(rename = "effect.unknown")]
    EffectUnknown,
    /// An operator reconciled an unknown effect (who, the evidence).
    #[serde(rename = "effect.reconciled")]
    EffectReconciled,
    /// An upstream lists a bound tool differently from its pin (a catalog change waits).
    #[serde(rename = "catalog.changed")]
    CatalogChanged,
    /// One vote on an approval that needs a quorum left it pending (with the tally).
    #[serde(rename = "approval.voted")]
    ApprovalVoted,
    /// An approval undecided after `escalate_after` may be decided by `escalate_to` too.
    #[serde(rename = "approval.escalated")]
    ApprovalEscalated,
    /// An approval undecided at its expiry was denied (`on_expiry = "deny"`).
    #[serde(rename = "approval.expired")]
    ApprovalExpired,
}

impl WebhookEventName {
    /// Every event, in the order of the write state machine (the default subscription).
    pub const ALL: [WebhookEventName; 9] = [
        WebhookEventName::ApprovalPending,
        WebhookEventName::ApprovalDecided,
        WebhookEventName::EffectCommitted,
        WebhookEventName::EffectUnknown,
        WebhookEventName::EffectReconciled,
        WebhookEventName::CatalogChanged,
        WebhookEventName::ApprovalVoted,
        WebhookEventName::ApprovalEscalated,
        WebhookEventName::ApprovalExpired,
    ];

    /// Core's event type.
    pub fn event_type(self) -> purra_core::WebhookEventType {
        use purra_core::WebhookEventType as T;
        match self {
            WebhookEventName::ApprovalPending => T::ApprovalPending,
            WebhookEventName::ApprovalDecided => T::ApprovalDecided,
            WebhookEventName::EffectCommitted => T::EffectCommitted,
            WebhookEventName::EffectUnknown => T::EffectUnknown,
            WebhookEventName::EffectReconciled => T::EffectReconciled,
            WebhookEventName::CatalogChanged => T::CatalogChanged,
            WebhookEventName::ApprovalVoted => T::ApprovalVoted,
            WebhookEventName::ApprovalEscalated => T::ApprovalEscalated,
            WebhookEventName::ApprovalExpired => T::ApprovalExpired,
        }
    }
}

/// What a webhook request's body is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WebhookFormat {
    /// The Standard Webhooks payload (`{"type", "timestamp", "data"}`), signed (the default).
    #[default]
    Standard,
    /// A Slack-compatible incoming-webhook message (`{"text"}`), signed too when a secret is
    /// given.
    Slack,
}

/// One webhook endpoint (a `[webhooks.NAME]` table).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookConfig {
    /// Where events are POSTed: an `http(s)` URL.
    pub url: String,
    /// A file holding the endpoint's Standard Webhooks secret (`whsec_` and base64 of 24 to 64
    /// random bytes; relative to the configuration file's directory). Never the secret itself
    /// in this file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_file: Option<PathBuf>,
    /// An environment variable holding the secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_env: Option<String>,
    /// The events delivered to it (default: every one).
    #[serde(default = "all_webhook_events")]
    pub events: Vec<WebhookEventName>,
    /// The body's format (default `standard`).
    #[serde(default)]
    pub format: WebhookFormat,
    /// How long one request may take, connecting included (default 15 s, at most 300 s).
    #[serde(default = "default_webhook_timeout")]
    pub timeout: Dur,
    /// The delay before the first retry; each further failure doubles it (default 5 s).
    #[serde(default = "default_webhook_backoff")]
    pub backoff: Dur,
    /// The longest delay between two attempts (default 1 h).
    #[serde(default = "default_webhook_max_backoff")]
    pub max_backoff: Dur,
    /// How old a delivery may be when an attempt fails before it is given up: kept, `failed`,
    /// until an operator retries it (default 72 h, at most a year).
    #[serde(default = "default_webhook_give_up_after")]
    pub give_up_after: Dur,
}

fn all_webhook_events() -> Vec<WebhookEventName> {
    WebhookEventName::ALL.to_vec()
}

fn default_webhook_timeout() -> Dur {
    Dur(Duration::from_secs(15))
}

fn default_webhook_backoff() -> Dur {
    Dur(Duration::from_secs(5))
}

fn default_webhook_max_backoff() -> Dur {
    Dur(Duration::from_secs(3600))
}

fn default_webhook_give_up_after() -> Dur {
    Dur(Duration::from_secs(72 * 3600))
}

impl WebhookConfig {
    /// An endpoint at `url` with every default (no secret: set one).
    pub fn new(url: impl Into<String>) -> WebhookConfig {
        WebhookConfig {
            url: url.into(),
            secret_file: None,
            secret_env: None,
            events: all_webhook_events(),
            format: WebhookFormat::Standard,
            timeout: default_webhook_timeout(),
            backoff: default_webhook_backoff(),
            max_backoff: default_webhook_max_backoff(),
            give_up_after: default_webhook_give_up_after(),
        }
    }
}

/// The default of `[store] pool_size`.
pub const DEFAULT_POOL_SIZE: usize = 16;

/// The largest `[store] pool_size`.
pub const MAX_POOL_SIZE: usize = 256;

/// The store (the `[store]` table): how the gateway uses the store `[gateway] db` names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct StoreSettings {
    /// The most connections to PostgreSQL the gateway opens for its store's reads and writes
    /// (1 to 256, default 16; the event listener has one more of its own): up to this many
    /// calls' store operations run side by side. A SQLite file has one writer and ignores it.
    pub pool_size: usize,
}

impl Default for StoreSettings {
    fn default() -> Self {
        StoreSettings {
            pool_size: DEFAULT_POOL_SIZE,
        }
    }
}

/// The default interval between two exports of the metrics over OTLP.
pub const DEFAULT_METRICS_INTERVAL: Duration = Duration::from_secs(60);

/// Telemetry (the `[telemetry]` table): the Prometheus endpoint and the OTLP/HTTP exporter.
/// Nothing is exported or served unless configured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetrySettings {
    /// The OTLP/HTTP collector's base URL (`http://127.0.0.1:4318`): spans go to `/v1/traces`,
    /// metrics to `/v1/metrics`. Unset: `OTEL_EXPORTER_OTLP_ENDPOINT`, else nothing is exported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub otlp_endpoint: Option<String>,
    /// The exported `service.name`. Unset: `OTEL_SERVICE_NAME`, else `purra-gateway`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
    /// The address of the Prometheus endpoint, `/metrics` on a listener of its own (no MCP, no
    /// page on it; `localhost:PORT` is `127.0.0.1:PORT`). Unset: no endpoint.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "optional_address"
    )]
    #[schemars(with = "Option<Address>")]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// How often the metrics are exported over OTLP (default 60 s, at least 1 s).
    pub metrics_interval: Dur,
    /// A file holding the bearer token every scrape of the Prometheus endpoint must carry
    /// (relative to the configuration file's directory). Unset: the endpoint answers any
    /// scrape that names an allowed host; bound beyond loopback, set it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics_token_file: Option<PathBuf>,
}

impl Default for TelemetrySettings {
    fn default() -> Self {
        TelemetrySettings {
            otlp_endpoint: None,
            service_name: None,
            metrics_listen: None,
            metrics_interval: Dur(DEFAULT_METRICS_INTERVAL),
            metrics_token_file: None,
        }
    }
}

/// Cedar policies (the `[policies]` table): who may call which bound tool with which arguments.
/// Every call of a bound tool is evaluated against them (after the binding's scope rules, before
/// anything is prepared or sent); a call no policy permits, or one a policy forbids, is refused
/// with `policy_denied`. See [`crate::policy`] for the schema the policies are validated against.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PoliciesConfig {
    /// Policy files in Cedar's language (relative to the configuration file's directory), at
    /// least one and at most 64 ([`MAX_POLICY_FILES`]), each at most 1 MiB.
    pub files: Vec<PathBuf>,
    /// Token claims the policies may read as `principal.claims.NAME`, each with its Cedar type.
    /// Claims are open-ended, so only the declared ones are typed and shown to policies; each is
    /// optional (`principal.claims has NAME`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub claims: BTreeMap<String, ClaimType>,
}

/// The Cedar type of a declared token claim (`[policies.claims]`): `"String"`, `"Long"`,
/// `"Bool"`, `"Set<String>"` or `"Set<Long>"`. A caller whose token carries a declared claim of
/// another type is refused (`policy_denied`): its policies cannot be evaluated as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimType {
    /// A JSON string.
    String,
    /// A JSON integer within the signed 64-bit range.
    Long,
    /// A JSON boolean.
    Bool,
    /// A JSON array of strings.
    SetOfStrings,
    /// A JSON array of integers within the signed 64-bit range.
    SetOfLongs,
}

impl ClaimType {
    /// Every type, in the order messages name them.
    pub const ALL: [ClaimType; 5] = [
        ClaimType::String,
        ClaimType::Long,
        ClaimType::Bool,
        ClaimType::SetOfStrings,
        ClaimType::SetOfLongs,
    ];

    /// The type as Cedar writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            ClaimType::String => "String",
            ClaimType::Long => "Long",
            ClaimType::Bool => "Bool",
            ClaimType::SetOfStrings => "Set<String>",
            ClaimType::SetOfLongs => "Set<Long>",
        }
    }
}

impl Serialize for ClaimType {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ClaimType {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        ClaimType::ALL
            .into_iter()
            .find(|t| t.as_str() == text)
            .ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "expected one of \"String\", \"Long\", \"Bool\", \"Set<String>\", \"Set<Long>\", found {text:?}"
                ))
            })
    }
}

/// The approver page's sign-in and cookies (the `[page]` table).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct PageSettings {
    /// Whether the access tokens printed at start sign in (default true); may be false only
    /// with `[page.oidc]`.
    pub token_login: bool,
    /// Whether the page's cookies are `Secure` and its session cookie named with the `__Host-`
    /// prefix (default false): set it when browsers reach the page over TLS, through a proxy
    /// that terminates it (`--page-secure-cookie` says the same).
    pub secure_cookie: bool,
    /// The page's public URL, as approvers reach it (`https://approvals.example`, perhaps
    /// through a proxy): webhook events link to an approval under it. Default: the address
    /// `--page` serves on, when the gateway serves the page; otherwise events carry no link.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Sign-in through an OpenID Connect provider.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oidc: Option<PageOidc>,
}

impl Default for PageSettings {
    fn default() -> Self {
        PageSettings {
            token_login: true,
            secure_cookie: false,
            url: None,
            oidc: None,
        }
    }
}

/// Sign-in to the approver page through an OpenID Connect provider (the `[page.oidc]` table).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PageOidc {
    /// The provider's issuer URL (its discovery document is read from it): https, or plain
    /// http on a loopback host.
    pub issuer: String,
    /// The page's client id at the provider.
    pub client_id: String,
    /// A file holding the client secret of a confidential client (relative to the
    /// configuration file's directory). Never the secret itself in this file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret_file: Option<PathBuf>,
    /// An environment variable holding the client secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret_env: Option<String>,
    /// The callback URL registered with the provider (default: `http://ADDR/login/callback` on
    /// the page's address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_uri: Option<String>,
    /// The scopes asked for (default `openid email profile`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<String>>,
    /// The provider's name on the sign-in button.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Subjects (`sub`) who may approve.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_subjects: Vec<String>,
    /// Emails who may approve (only when the ID token says `email_verified: true`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_emails: Vec<String>,
    /// `NAME=VALUE`: a claim every approver must carry (a list claim must contain the value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require_claim: Option<String>,
    /// The ID token claim listing the approver's groups, for the `group:NAME` entries of a
    /// write's `approval` rules (default `groups`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups_claim: Option<String>,
}

impl PageOidc {
    /// `require_claim` split into its name and value.
    pub fn required_claim(&self) -> Option<Result<(String, String), String>> {
        self.require_claim.as_deref().map(parse_claim)
    }
}

/// `NAME=VALUE` as a required claim: a non-empty name and value.
pub fn parse_claim(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((n, v)) if !n.trim().is_empty() && !v.trim().is_empty() => {
            Ok((n.trim().to_owned(), v.trim().to_owned()))
        }
        _ => Err(format!(
            "expected NAME=VALUE (e.g. groups=approvers), found {text:?}"
        )),
    }
}

/// Settings of the gateway itself (the `[gateway]` table).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// The gateway's name: part of every write's run id, so two gateways on one store never
    /// share a call (default `gateway`).
    pub name: String,
    /// The store (default `purra.db`): a SQLite file, a relative path being relative to the
    /// configuration file's directory, or a `postgres://` URL (purra-postgres, shared by a fleet).
    pub db: PathBuf,
    /// Where downstream clients connect: `stdio` (default) or an address for Streamable HTTP
    /// (the endpoint is `/mcp`).
    pub listen: Listen,
    /// The principal downstream callers act as when no token proves who they are (default
    /// `local`): every stdio caller, and every HTTP caller without `[gateway.auth]`. Matched by
    /// scope rules' `principals`; an authenticated caller's principal is its token's
    /// `ISSUER#SUBJECT` instead.
    pub principal: String,
    /// How long a write call waits for a decision before it returns a result naming the
    /// pending approval (default 30 s).
    pub approval_wait: Dur,
    /// How often a waiting write call sends a progress notification (default 5 s).
    pub progress_interval: Dur,
    /// Whether a write may be approved or denied by the downstream client's user through an
    /// elicitation form, when that client declared elicitation and the write's binding says
    /// `approval = "client"` (default false). It trusts the client to show the form to a person
    /// and to send back only that person's answer: a client that answers the form itself decides
    /// its own write.
    pub elicitation: bool,
    /// How long an approval made through elicitation or the approval view authorizes dispatch
    /// (default 10 min).
    pub approval_ttl: Dur,
    /// How long a write's approval request accepts a decision (default 24 h, at least
    /// `approval_wait`, at most a year). A decision after that is refused by the store, and the
    /// same call made again asks for a new approval.
    pub approval_request_ttl: Dur,
    /// Whether write tools carry their approval prompt as an MCP App (`io.modelcontextprotocol/ui`)
    /// that a host rendering Apps shows while the call waits, and in which its user may approve
    /// or deny through the app-only `purra_approval` tool when the write's binding says
    /// `approval = "client"` (otherwise the view only shows the write's state) (default false).
    /// Like `elicitation`, it trusts the downstream host: to show the view to a person and to
    /// keep the app-only tool from its model; a client that calls `purra_approval` itself
    /// decides its own write.
    pub apps: bool,
    /// Whether an approved write whose caller has gone (its call ended undecided, or the
    /// gateway restarted) is dispatched anyway (default false: it waits for the same call to
    /// be repeated, and expires).
    pub run_decided_without_caller: bool,
    /// What the gateway does when an upstream lists a bound tool differently from the
    /// definition pinned when it was first bound, or no longer lists it: `"hold"` (default:
    /// the pinned definition is served, calls are refused `mcp_catalog_changed` or
    /// `mcp_tool_removed`, and the change waits for an operator, `purra catalog diff`) or
    /// `"serve"` (nothing is pinned: whatever the upstream lists is served, as before pinning;
    /// said at start).
    pub on_catalog_change: OnCatalogChange,
    /// The store owner's lease: claims a killed gateway left become `unknown` once it lapsed
    /// (default 60 s). A running call's SSE stream is leased for this, at most 5 s: another
    /// instance takes the call over once it lapsed.
    pub lease: Dur,
    /// The most approvals one caller (one principal) may have waiting for a decision at once
    /// (pending, their request not expired; default 16, at most 1000). One more new write call is
    /// refused with `approval_limit` and prepares nothing; the same call made again is never
    /// refused. Counted in the store, so every gateway on it and every restart agrees.
    pub max_pending_per_caller: u32,
    /// The most tool calls one caller (one principal) may make a minute (default 600, at most
    /// 60000), calls naming a tool the gateway does not have included: a sustained rate with
    /// bursts of up to as many at once. One more call is answered at once with `rate_limited`,
    /// sending and preparing nothing. Its other requests
    /// (opening a session, `ping`, listings) are counted apart at this rate (at least 60 a
    /// minute). Counted by this gateway process (see [`crate::limit`]).
    pub max_calls_per_minute_per_caller: u32,
    /// The most MCP sessions the HTTP listener keeps, all callers together (default 10 000, at
    /// most 1 000 000); an `initialize` beyond it is answered 503.
    pub max_sessions: usize,
    /// The most MCP sessions one caller (one principal; callers without one share one count)
    /// may hold on the HTTP listener (default 16, at most `max_sessions`). A new session at the
    /// bound closes that caller's own least recently used idle session, never another's; with
    /// every one of them in use it is answered 429.
    pub max_sessions_per_caller: usize,
    /// How long an MCP session on the HTTP listener may stay idle before it is closed (default
    /// 10 min, at least 1 s, at most 24 h).
    pub session_idle_timeout: Dur,
    /// Where the HTTP listener keeps its MCP sessions: `"store"` (default) in the gateway's
    /// store, so every instance of a fleet serves every session (round robin needs no
    /// stickiness; a client's streams resume, and its held calls are taken over, at another
    /// instance), at the cost of a store read on each request and the store writes of its
    /// events; or `"process"`, in this process's memory (no store round trip: a fleet then needs
    /// sessions sticky by `Mcp-Session-Id`, and an instance's sessions end with it).
    pub sessions: SessionsIn,
    /// Separation of duties: whether a write's approval refuses a decision by the principal that
    /// asked for it (default false). The rule travels with the approval request, so the approver
    /// page and `purra approvals` in other processes enforce it too; elicitation and the approval
    /// view (the caller deciding its own call) are then never asked.
    pub approvers_must_differ: bool,
    /// How long a drain (`SIGTERM`) waits for the calls and dispatches in flight before the
    /// process exits anyway (default 30 s, at most 1 h). Writes waiting for their decision are
    /// answered as pending at once (on PostgreSQL, those on SSE streams are handed over to the
    /// fleet's other instances, where their clients resume them); a dispatch still running at the
    /// bound becomes `unknown` once the lease lapses, never sent again.
    pub drain_timeout: Dur,
    /// Host names the HTTP listener answers besides the loopback names (`localhost`,
    /// `127.0.0.1`, `[::1]`): a name on any port (`mcp.example.com`) or `name:port` on that port
    /// only. Behind a load balancer, the name clients reach it by; any other `Host` is refused
    /// 403 (protection against DNS rebinding). Default none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed_hosts: Vec<String>,
    /// A key file for the credentials stored for upstreams called as each principal (one
    /// `ID:BASE64KEY` line per key, the first the current one; relative to the configuration
    /// file's directory). Default: the `PURRA_CREDENTIAL_KEYS` environment variable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credential_keys: Option<PathBuf>,
    /// The OAuth resource-server guard in front of the HTTP listener (`[gateway.auth]`): every
    /// HTTP request needs a bearer token for the gateway's resource, and each caller's principal
    /// is its token's issuer and subject.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthSettings>,
}

/// The default of `drain_timeout`: a write's dispatch usually takes seconds; an orchestrator
/// gives a stopping container about this long before it kills it.
const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest `drain_timeout`.
const MAX_DRAIN_TIMEOUT: Duration = Duration::from_secs(3600);

/// The OAuth resource-server guard in front of the gateway's Streamable HTTP listener (the
/// `[gateway.auth]` table): tokens are JWTs checked against the issuer's keys (its JWKS), or
/// checked by token introspection; their audience must be the gateway's resource URL; the
/// protected resource metadata (RFC 9728) is served at
/// `/.well-known/oauth-protected-resource/mcp`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuthSettings {
    /// The authorization server's issuer URL: the `iss` every token must carry, and the issuer
    /// half of every caller's principal. https, or plain http on a loopback host.
    pub issuer: String,
    /// The gateway's resource URL: the audience every token must name, and the metadata's
    /// `resource` (default `http://ADDR/mcp` on the address the listener is bound to; required
    /// when `listen` is an unspecified address such as `0.0.0.0`, or when the gateway is reached
    /// through a proxy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// The issuer's JWKS URL (default: read from the issuer's metadata). Not with
    /// `introspection`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwks_uri: Option<String>,
    /// Whether a JWT access token's header must say `typ: at+jwt` (RFC 9068; default true, so
    /// an ID token from the same issuer is no access token; false only for an authorization
    /// server that does not type its access tokens). Not with `introspection`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require_at_jwt: Option<bool>,
    /// Scopes every request's token needs (403 `insufficient_scope` otherwise); also the
    /// `scope` of the 401 challenge.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// The metadata's `scopes_supported`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes_supported: Option<Vec<String>>,
    /// Check tokens by introspection (RFC 7662) instead of as JWTs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub introspection: Option<IntrospectionSettings>,
}

/// Token introspection (the `[gateway.auth.introspection]` table): the gateway asks the
/// authorization server about each token as a client of its own.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IntrospectionSettings {
    /// The introspection endpoint's URL: https (plain http only on a loopback host), since it
    /// is sent the gateway's client secret and every caller's token.
    pub endpoint: String,
    /// The gateway's client id at the authorization server.
    pub client_id: String,
    /// A file holding the client secret (relative to the configuration file's directory).
    /// Never the secret itself in this file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret_file: Option<PathBuf>,
    /// An environment variable holding the client secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret_env: Option<String>,
    /// The longest an active token's answer is used before it is introspected again (default
    /// 60 s, never past the token's `exp`; `0s`: not kept). A token revoked at the
    /// authorization server is accepted for up to this long.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_max_age: Option<Dur>,
    /// How long a refused token's answer is used before it is introspected again (default
    /// 10 s; `0s`: not kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_inactive: Option<Dur>,
    /// How many answers are kept at most (default 10 000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_max_entries: Option<u32>,
    /// How many introspections run at once for one client address (default 4, at least 1);
    /// further checks from that address wait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent_per_address: Option<u32>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            credential_keys: None,
            name: "gateway".into(),
            db: PathBuf::from("purra.db"),
            listen: Listen::Stdio,
            principal: "local".into(),
            approval_wait: Dur(Duration::from_secs(30)),
            progress_interval: Dur(Duration::from_secs(5)),
            elicitation: false,
            approval_ttl: Dur(Duration::from_secs(600)),
            approval_request_ttl: Dur(Duration::from_secs(24 * 3600)),
            apps: false,
            run_decided_without_caller: false,
            on_catalog_change: OnCatalogChange::Hold,
            lease: Dur(Duration::from_secs(60)),
            max_pending_per_caller: DEFAULT_MAX_PENDING_PER_CALLER,
            max_calls_per_minute_per_caller: DEFAULT_MAX_CALLS_PER_MINUTE,
            max_sessions: DEFAULT_MAX_SESSIONS,
            max_sessions_per_caller: DEFAULT_MAX_SESSIONS_PER_CALLER,
            session_idle_timeout: Dur(DEFAULT_SESSION_IDLE_TIMEOUT),
            sessions: SessionsIn::Store,
            approvers_must_differ: false,
            drain_timeout: Dur(DEFAULT_DRAIN_TIMEOUT),
            allowed_hosts: Vec::new(),
            auth: None,
        }
    }
}

/// Where the HTTP listener keeps its MCP sessions (`[gateway] sessions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionsIn {
    /// In the gateway's store: any instance serves any session.
    #[default]
    Store,
    /// In this process's memory: a fleet needs sticky sessions.
    Process,
}

/// What the gateway does when an upstream's listing of a bound tool differs from its pin
/// (`[gateway] on_catalog_change`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnCatalogChange {
    /// Serve the pinned definition, refuse calls, and hold the change for an operator.
    #[default]
    Hold,
    /// Serve what the upstream lists (no pinning).
    Serve,
}

/// Where the gateway serves downstream clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listen {
    /// This process's stdin and stdout.
    Stdio,
    /// Streamable HTTP on this address, endpoint `/mcp`.
    Http(SocketAddr),
}

impl Serialize for Listen {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Listen::Stdio => s.serialize_str("stdio"),
            Listen::Http(a) => s.serialize_str(&a.to_string()),
        }
    }
}

impl<'de> Deserialize<'de> for Listen {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        if text == "stdio" {
            return Ok(Listen::Stdio);
        }
        parse_address(&text).map(Listen::Http).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "expected \"stdio\" or an address such as \"127.0.0.1:8787\" or \"localhost:8787\", found {text:?}"
            ))
        })
    }
}

/// An address to listen on: `IP:PORT`, or `localhost:PORT` (the IPv4 loopback address).
fn parse_address(text: &str) -> Option<SocketAddr> {
    match text.strip_prefix("localhost:") {
        Some(port) => port
            .parse::<u16>()
            .map(|p| SocketAddr::from(([127, 0, 0, 1], p)))
            .ok(),
        None => text.parse().ok(),
    }
}

/// An address to listen on as a configuration value ([`parse_address`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Address(pub SocketAddr);

impl<'de> Deserialize<'de> for Address {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        parse_address(&text).map(Address).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "expected an address such as \"127.0.0.1:9464\" or \"localhost:9464\", found {text:?}"
            ))
        })
    }
}

fn optional_address<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SocketAddr>, D::Error> {
    Ok(Option::<Address>::deserialize(d)?.map(|a| a.0))
}

/// A duration written as a number and a unit: `500ms`, `30s`, `10m`, `1h`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Dur(pub Duration);

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        if ms % 3_600_000 == 0 && ms > 0 {
            write!(f, "{}h", ms / 3_600_000)
        } else if ms % 60_000 == 0 && ms > 0 {
            write!(f, "{}m", ms / 60_000)
        } else if ms % 1000 == 0 {
            write!(f, "{}s", ms / 1000)
        } else {
            write!(f, "{ms}ms")
        }
    }
}

impl std::str::FromStr for Dur {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let split = text
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len());
        let (n, unit) = text.split_at(split);
        let n: u64 = n
            .parse()
            .map_err(|_| format!("expected a duration such as \"30s\", found {text:?}"))?;
        let ms = match unit {
            "ms" => Some(n),
            "s" => n.checked_mul(1000),
            "m" => n.checked_mul(60_000),
            "h" => n.checked_mul(3_600_000),
            _ => {
                return Err(format!(
                "expected a duration with a unit ms, s, m or h (such as \"30s\"), found {text:?}"
            ))
            }
        };
        ms.map(|ms| Dur(Duration::from_millis(ms)))
            .ok_or_else(|| format!("the duration {text:?} is too long"))
    }
}

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// Bounds on upstream discovery and calls (the `[limits]` table); each may be lowered from
/// purra-mcp's default, the timeout raised to 300 s; and whether upstream tool schemas may
/// declare JSON Schema draft-07 or 2019-09.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Pages of `tools/list`.
    pub max_pages: Option<u32>,
    /// Tools across all pages.
    pub max_tools: Option<u32>,
    /// Bytes of all `tools/list` results together.
    pub max_catalog_bytes: Option<u64>,
    /// Bytes of one selected schema.
    pub max_schema_bytes: Option<u64>,
    /// Bytes of one selected description.
    pub max_description_bytes: Option<u64>,
    /// Bytes of one result (also bounds the encoded arguments).
    pub max_result_bytes: Option<u64>,
    /// Content blocks of one result.
    pub max_content_blocks: Option<u32>,
    /// Per-request timeout of upstream calls.
    pub timeout: Option<Dur>,
    /// Whether a bound tool's schema may declare draft-07 or 2019-09 at its root, as every
    /// TypeScript-SDK server's does (default true: accepted when every keyword means the same as
    /// in 2020-12; `false` keeps purra-mcp's default, 2020-12 only).
    pub earlier_schema_dialects: Option<bool>,
}

impl LimitsConfig {
    /// The adapter's limits: the defaults with what is set here.
    pub fn limits(&self) -> Limits {
        let d = Limits::default();
        Limits {
            max_pages: self.max_pages.unwrap_or(d.max_pages),
            max_tools: self.max_tools.unwrap_or(d.max_tools),
            max_catalog_bytes: self.max_catalog_bytes.unwrap_or(d.max_catalog_bytes),
            max_schema_bytes: self.max_schema_bytes.unwrap_or(d.max_schema_bytes),
            max_description_bytes: self
                .max_description_bytes
                .unwrap_or(d.max_description_bytes),
            max_result_bytes: self.max_result_bytes.unwrap_or(d.max_result_bytes),
            max_content_blocks: self.max_content_blocks.unwrap_or(d.max_content_blocks),
            timeout: self.timeout.map_or(d.timeout, |t| t.0),
            earlier_schema_dialects: self.earlier_schema_dialects.unwrap_or(true),
        }
    }
}

/// One upstream server: a stdio command, or an `http(s)://` or `ws(s)://` URL.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct UpstreamConfig {
    /// The program and its arguments, started as a child process speaking MCP over stdio.
    pub command: Option<Vec<String>>,
    /// Environment variables for the command (added to the gateway's own).
    pub env: BTreeMap<String, String>,
    /// The command's working directory (relative to the configuration file's directory).
    pub cwd: Option<PathBuf>,
    /// A Streamable HTTP (`http://`, `https://`) or WebSocket (`ws://`, `wss://`) URL.
    pub url: Option<String>,
    /// Headers sent with every HTTP request (for example `Authorization`).
    pub headers: BTreeMap<String, String>,
    /// Who the upstream is called as (the `[upstreams.ID.auth]` table): a service identity
    /// (`client_credentials`), or each caller's own token from an RFC 8693 exchange of the
    /// caller's validated inbound token (`token_exchange`). None: the configured `headers` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<UpstreamAuth>,
    /// A stdio upstream started once per calling principal, with that principal's stored
    /// secrets in its environment (`env_from_credential`), from a bounded pool.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub per_principal: bool,
    /// With `per_principal`: environment variables taken from the calling principal's stored
    /// credentials, variable name to credential name (`purra credentials set --principal P
    /// --upstream ID NAME`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env_from_credential: BTreeMap<String, String>,
    /// The most per-principal connections (processes, for a stdio upstream) open at once
    /// (default 16); one more closes the least recently used idle one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_principals: Option<u32>,
    /// How long a per-principal connection (process) may stay idle before it is closed
    /// (default 10 min).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_timeout: Option<Dur>,
}

/// The default of an upstream's `max_principals`.
pub const DEFAULT_MAX_PRINCIPALS: u32 = 16;
/// The default of an upstream's `idle_timeout`.
pub const DEFAULT_PRINCIPAL_IDLE_TIMEOUT: Duration = Duration::from_secs(600);

/// Who an upstream is called as (`[upstreams.ID.auth]`, chosen by `mode`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum UpstreamAuth {
    /// A service identity for a machine upstream: OAuth client credentials at the
    /// authorization server, refreshed before they expire.
    ClientCredentials(OAuthClientAuth),
    /// Each caller's own token: the caller's validated inbound token exchanged (RFC 8693) at the
    /// authorization server for one whose audience is the upstream; the gateway's own client
    /// credentials token lists the upstream's tools (and, with `actor`, names the gateway as
    /// the actor of every exchanged token).
    TokenExchange(OAuthClientAuth),
    /// Each principal's own OAuth connection to the upstream's authorization server (found
    /// through the upstream's RFC 9728 metadata, then RFC 8414), made once on the approver page
    /// at `[page] url` + `/connect/ID` (authorization code + PKCE, in the user's browser) and
    /// kept sealed in the store; refreshed when it expires.
    Oauth(OAuthConnectAuth),
}

impl UpstreamAuth {
    /// The OAuth client settings of the client credentials and token exchange modes.
    pub fn client(&self) -> Option<&OAuthClientAuth> {
        match self {
            UpstreamAuth::ClientCredentials(c) | UpstreamAuth::TokenExchange(c) => Some(c),
            UpstreamAuth::Oauth(_) => None,
        }
    }

    /// The files it names (client secrets, private keys), to resolve against the file's
    /// directory.
    pub fn files_mut(&mut self) -> Vec<&mut PathBuf> {
        match self {
            UpstreamAuth::ClientCredentials(c) | UpstreamAuth::TokenExchange(c) => {
                [c.client_secret_file.as_mut(), c.private_key_file.as_mut()]
                    .into_iter()
                    .flatten()
                    .collect()
            }
            UpstreamAuth::Oauth(o) => o.client_secret_file.as_mut().into_iter().collect(),
        }
    }
}

/// Per-user OAuth connections to an upstream (`mode = "oauth"`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OAuthConnectAuth {
    /// The authorization server's issuer URL, with a pre-registered `client_id` (default:
    /// found through the upstream's metadata, the client registered dynamically).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// A client id registered at the authorization server for the page's callback
    /// (`[page] url` + `/connect/ID/callback`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// A file holding that client's secret (a confidential client).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret_file: Option<PathBuf>,
    /// The scopes asked for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// The principal (`ISSUER#SUBJECT`) whose connection lists the upstream's tools: the gateway
    /// starts without them and serves them once this principal has connected on the page.
    pub discovery_principal: String,
}

/// The gateway as an OAuth client of an upstream's authorization server.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OAuthClientAuth {
    /// The authorization server's issuer URL (its metadata is read from there). https, or
    /// plain http on a loopback host.
    pub issuer: String,
    /// The token endpoint, on the issuer's origin (required for `token_exchange`; for
    /// `client_credentials` the default is the one the issuer's metadata names).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_endpoint: Option<String>,
    /// The gateway's client id at the authorization server.
    pub client_id: String,
    /// A file holding the client secret (relative to the configuration file's directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret_file: Option<PathBuf>,
    /// An environment variable holding the client secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret_env: Option<String>,
    /// A PKCS#8 PEM private key file: the client authenticates with `private_key_jwt`
    /// instead of a secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_key_file: Option<PathBuf>,
    /// The private key's algorithm (`ES256`, `RS256`, `EdDSA`, ...; default `ES256`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_key_alg: Option<String>,
    /// The private key's id (`kid`), when the authorization server needs it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    /// The audiences the issued token must name (default: the upstream's URL).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub audience: Vec<String>,
    /// Resource indicators (RFC 8707) for the issued token, instead of or beside `audience`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource: Vec<String>,
    /// The scope asked for (the narrowest that serves the bound tools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// token_exchange: send the gateway's own client credentials token as the `actor_token`,
    /// so the issued token names the gateway as actor (`act`). Default false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub actor: bool,
}

/// A binding's scope: explicitly open (reads only), or rules.
#[derive(Debug, Clone, PartialEq)]
pub enum ScopeConfig {
    /// `scope = "open"`: no scope check (an explicit opt-out; writes cannot opt out).
    Open,
    /// Caller and argument rules; every rule must hold.
    Rules(ScopeRules),
}

impl Serialize for ScopeConfig {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ScopeConfig::Open => s.serialize_str("open"),
            ScopeConfig::Rules(r) => r.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for ScopeConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Word(String),
            Rules(ScopeRules),
        }
        match Either::deserialize(d).map_err(|_| {
            serde::de::Error::custom(
                "expected \"open\" or a table of principals, clients and arguments rules",
            )
        })? {
            Either::Word(w) if w == "open" => Ok(ScopeConfig::Open),
            Either::Word(w) => Err(serde::de::Error::custom(format!(
                "expected \"open\" or a table of rules, found {w:?}"
            ))),
            Either::Rules(r) => Ok(ScopeConfig::Rules(r)),
        }
    }
}

/// Scope rules: who may call, and what the arguments must satisfy.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ScopeRules {
    /// Principals allowed to call (absent: any).
    pub principals: Option<Vec<String>>,
    /// Downstream client names (`clientInfo.name`) allowed to call (absent: any).
    ///
    /// Not authentication: a client chooses its own name, and any client that calls itself
    /// `claude-code` passes `clients = ["claude-code"]`. It keeps honest clients to their tools;
    /// for authority name `principals` (with `[gateway.auth]`, the token's `ISSUER#SUBJECT`) or
    /// write policies on the token's claims. `--check` warns when a write's only caller rule
    /// is `clients` on an HTTP listener with `[gateway.auth]`.
    pub clients: Option<Vec<String>>,
    /// Argument rules such as `len(text) <= 200` (see [`crate::scope`]).
    pub arguments: Vec<String>,
}

/// How calls of a read tool may overlap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ConcurrencyConfig {
    /// May run beside other safe calls.
    Safe,
    /// Runs alone (the default).
    #[default]
    Exclusive,
}

impl From<ConcurrencyConfig> for Concurrency {
    fn from(c: ConcurrencyConfig) -> Self {
        match c {
            ConcurrencyConfig::Safe => Concurrency::Safe,
            ConcurrencyConfig::Exclusive => Concurrency::Exclusive,
        }
    }
}

/// A read binding (a `[reads.LOCAL_NAME]` table).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadConfig {
    /// The upstream's id.
    pub upstream: String,
    /// The upstream tool's name (default: the local name).
    #[serde(default)]
    pub tool: Option<String>,
    /// The title of the read policy.
    pub title: String,
    /// Whether calls may overlap (default exclusive).
    #[serde(default)]
    pub concurrency: ConcurrencyConfig,
    /// The scope: `"open"` or rules. Required: authority is never defaulted.
    pub scope: ScopeConfig,
    /// Whether a tool the upstream runs only as a task may run, as a task (default false: it
    /// fails closed). Writes have no such key.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tasks: bool,
    /// Whether the host asserts the tool only reads although its upstream marks it
    /// `destructiveHint: true` or `readOnlyHint: false` (default false: such a tool bound as a
    /// read is a configuration mistake; with true it is served as a read, with a warning at
    /// every start). Remote annotations grant nothing: they only make the host say so.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub asserted_read_only: bool,
}

/// A skill binding (a `[skills.NAME]` table): one skill an upstream serves (the Skills
/// extension), passed through to downstream clients as `skill://NAME/…`, its entry pinned when
/// the gateway starts (see [`crate::skills`](crate#skills)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SkillConfig {
    /// The upstream's id.
    pub upstream: String,
    /// The upstream skill's `SKILL.md` URI (default: the one skill the upstream lists under the
    /// name NAME).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
}

/// What a write does, as the host declares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EffectConfig {
    /// Changes state.
    Write,
    /// Destroys state.
    Destructive,
}

impl EffectConfig {
    /// The adapter's effect.
    pub fn effect(self) -> WriteEffect {
        match self {
            EffectConfig::Write => WriteEffect::Write,
            EffectConfig::Destructive => WriteEffect::Destructive,
        }
    }

    /// Core's risk.
    pub fn risk(self) -> Risk {
        match self {
            EffectConfig::Write => Risk::Write,
            EffectConfig::Destructive => Risk::Destructive,
        }
    }

    /// `write` or `destructive`.
    pub fn as_str(self) -> &'static str {
        match self {
            EffectConfig::Write => "write",
            EffectConfig::Destructive => "destructive",
        }
    }
}

/// A write binding (a `[writes.LOCAL_NAME]` table): the host's explicit authorization of one
/// upstream tool as an approval-gated write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteConfig {
    /// The upstream's id.
    pub upstream: String,
    /// The upstream tool's name (default: the local name).
    #[serde(default)]
    pub tool: Option<String>,
    /// The title the approver sees.
    pub title: String,
    /// What the write does.
    pub effect: EffectConfig,
    /// The risk the approver is told about (default: the effect; must match it).
    #[serde(default)]
    pub risk: Option<EffectConfig>,
    /// The host's binding identifier.
    pub binding_id: String,
    /// The binding's revision: change it whenever the authorization changes.
    pub binding_revision: String,
    /// The scope identifier.
    pub scope_id: String,
    /// The scope's revision: change it whenever the scope rules change.
    pub scope_revision: String,
    /// The scope rules (writes cannot opt out).
    pub scope: ScopeRules,
    /// Who may decide this write's approvals (default: an operator only): `"operator"`,
    /// `"client"`, or a workflow table such as `{ required = 2, from = ["group:sre"] }`
    /// (decided by operators under its rules: the `[writes.NAME.approval]` table).
    #[serde(default)]
    pub approval: ApprovalConfig,
    /// How long the receipt of a committed (or `not_started`) call answers the same call made
    /// again (default: for ever). Past it, the same call asks for a new approval; the old
    /// receipt stays in the store and its audit trail.
    #[serde(default)]
    pub receipt_ttl: Option<Dur>,
    /// The upstream tool deduplicates by the idempotency key (`io.purra/idempotency-key` in the
    /// request's `_meta`): a call sent again under the same key has its effect at most once.
    /// Only then (or when the upstream declares `tools.idempotency`) may an operator resend an
    /// `unknown` effect of this write (`purra effects resend`). Default: false.
    #[serde(default)]
    pub idempotent: bool,
    /// How recent an approver's sign-in must be to decide this write's approvals on the approver
    /// page (such as `"5m"`): an older sign-in is sent to sign in again (OpenID Connect `max_age`,
    /// the ID token's `auth_time` checked) before the decision is accepted. Carried with each
    /// approval request, so a page in another process enforces it too. The CLI
    /// (`purra approvals approve`) is an operator's path and is not bound by it. Default: any
    /// live session decides.
    #[serde(default)]
    pub approver_max_age: Option<Dur>,
    /// Whether an approver may approve this write with edited arguments on the approver page
    /// (approve with edit). The edited call is a new intent, checked by the input schema, the
    /// scope's argument rules and the policies exactly as if the caller had sent it, and is
    /// approved in the same decision; the caller's answer says it was edited. Default: false
    /// (an edit is refused everywhere).
    #[serde(default)]
    pub allow_edit: bool,
    /// When an approved call is sent: `"on_call"` (default: by the caller's call, waiting or
    /// made again, or by the task it waits in) or `"on_approval"` (the gateway sends it itself
    /// as soon as the approval lands, claimed once across a fleet, even with no caller waiting;
    /// the caller's next identical call, or its task, is answered from the receipt).
    #[serde(default)]
    pub dispatch: Dispatch,
}

/// When an approved write is sent (the `dispatch` key of a `[writes.NAME]` table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Dispatch {
    /// By the caller's call (the default): a call waiting, the same call made again, or the
    /// task it waits in; without one, only with `[gateway] run_decided_without_caller`.
    #[default]
    OnCall,
    /// By the gateway as soon as the approval lands, whether or not a caller waits.
    OnApproval,
}

/// Who may decide a write binding's approvals (the `approval` key of a `[writes.NAME]` table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalBy {
    /// Only an operator (the default): the approver page, `purra approvals approve|deny`, or an
    /// embedding host's `Gateway::decide`. No elicitation is asked for it, and the approval view
    /// shows its state without deciding it.
    #[default]
    Operator,
    /// Also the downstream client's user, through an elicitation form (`[gateway] elicitation`)
    /// or the approval view (`[gateway] apps`), when the session negotiated it. The operator's
    /// explicit choice: the gateway cannot tell a client's user from the client itself.
    Client,
}

/// A write binding's `approval` key: who decides, or the rules operators decide under.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ApprovalConfig {
    /// `"operator"` or `"client"`: one decision decides.
    By(ApprovalBy),
    /// A workflow table: operators decide under its rules.
    Rule(ApprovalRule),
}

impl Default for ApprovalConfig {
    fn default() -> Self {
        ApprovalConfig::By(ApprovalBy::Operator)
    }
}

impl ApprovalConfig {
    /// Who may decide (a workflow table: operators).
    pub fn by(&self) -> ApprovalBy {
        match self {
            ApprovalConfig::By(by) => *by,
            ApprovalConfig::Rule(_) => ApprovalBy::Operator,
        }
    }

    /// The workflow rules, when the key is a table.
    pub fn rule(&self) -> Option<&ApprovalRule> {
        match self {
            ApprovalConfig::By(_) => None,
            ApprovalConfig::Rule(r) => Some(r),
        }
    }
}

impl JsonSchema for ApprovalConfig {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ApprovalConfig".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let rule = generator.subschema_for::<ApprovalRule>();
        schemars::json_schema!({
            "description": "\"operator\" (the default), \"client\", or a workflow table (required, from, escalate_after, escalate_to, on_expiry).",
            "anyOf": [
                { "const": "operator" },
                { "const": "client" },
                rule,
            ],
        })
    }
}

impl From<ApprovalBy> for ApprovalConfig {
    fn from(by: ApprovalBy) -> Self {
        ApprovalConfig::By(by)
    }
}

impl PartialEq<ApprovalBy> for ApprovalConfig {
    fn eq(&self, other: &ApprovalBy) -> bool {
        self.by() == *other
    }
}

impl<'de> Deserialize<'de> for ApprovalConfig {
    /// A string is who decides, a table the workflow rules; each with its own errors.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = ApprovalConfig;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "\"operator\", \"client\", or a table such as { required = 2, from = [\"group:sre\"] }",
                )
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ApprovalConfig, E> {
                ApprovalBy::deserialize(serde::de::value::StrDeserializer::<E>::new(v))
                    .map(ApprovalConfig::By)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<ApprovalConfig, A::Error> {
                ApprovalRule::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(ApprovalConfig::Rule)
            }
        }
        d.deserialize_any(Visit)
    }
}

/// The workflow of a write's approvals (the table form of its `approval` key): how many
/// distinct approvers, from whom, escalation when nobody decides, and what an undecided
/// approval comes to at its expiry. Carried with each approval request (its labels), so every
/// instance, the approver page and `purra approvals` enforce it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalRule {
    /// How many distinct approvers must approve (default 1). Each decision is a vote, one per
    /// approver; any deny closes the approval; the call is sent only once this many approved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<u32>,
    /// Who may vote: `group:NAME` (an approver page sign-in whose groups claim holds `NAME`,
    /// or a name `[approvers.groups]` lists) or an approver's name. Default: any approver.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from: Vec<String>,
    /// After this long undecided, `escalate_to` may decide too and `approval.escalated` is
    /// recorded (once for a fleet). Needs `escalate_to`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalate_after: Option<Dur>,
    /// Who may decide once escalated (entries as `from`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub escalate_to: Vec<String>,
    /// What an approval still undecided at its request's expiry comes to: `"ask_again"` (the
    /// default: it expires and the same call asks anew) or `"deny"` (it is denied, the waiting
    /// caller is told why, and `approval.expired` is recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_expiry: Option<OnExpiry>,
}

/// What an undecided approval comes to at its expiry (`on_expiry`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnExpiry {
    /// It expires; the same call made again asks anew (today's behaviour).
    AskAgain,
    /// It is denied, with the reason a waiting caller sees.
    Deny,
}

/// The largest number of votes a write may require.
pub const MAX_VOTES_REQUIRED: u32 = 16;

impl ApprovalRule {
    /// The labels that carry the rule with each approval request (purra-core's `workflow`).
    pub fn labels(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if self.required.is_some() || !self.from.is_empty() {
            out.push((
                purra_core::VOTES_REQUIRED_LABEL,
                self.required.unwrap_or(1).to_string(),
            ));
        }
        if !self.from.is_empty() {
            out.push((purra_core::VOTES_FROM_LABEL, self.from.join(",")));
        }
        if let (Some(after), false) = (self.escalate_after, self.escalate_to.is_empty()) {
            out.push((
                purra_core::ESCALATE_AFTER_LABEL,
                after.0.as_secs().to_string(),
            ));
            out.push((purra_core::ESCALATE_TO_LABEL, self.escalate_to.join(",")));
        }
        if self.on_expiry == Some(OnExpiry::Deny) {
            out.push((purra_core::ON_EXPIRY_LABEL, "deny".to_owned()));
        }
        out
    }

    fn check(&self, key: &str, out: &mut Vec<Problem>) {
        if let Some(n) = self.required {
            if n == 0 || n > MAX_VOTES_REQUIRED {
                out.push((
                    format!("{key}.required"),
                    format!("must be between 1 and {MAX_VOTES_REQUIRED}"),
                ));
            }
        }
        for (field, list) in [("from", &self.from), ("escalate_to", &self.escalate_to)] {
            for e in list {
                let name = e.strip_prefix("group:").unwrap_or(e);
                if name.trim().is_empty() || name.trim() != name || e.contains(',') {
                    out.push((
                        format!("{key}.{field}"),
                        format!(
                            "{e:?} is not an approver name or group:NAME (no commas, no \
                             surrounding spaces)"
                        ),
                    ));
                }
            }
        }
        let named = self
            .from
            .iter()
            .filter(|e| !e.starts_with("group:"))
            .count();
        if let Some(n) = self.required {
            if !self.from.is_empty() && named == self.from.len() && (n as usize) > named {
                out.push((
                    format!("{key}.required"),
                    format!("{n} votes can never come from the {named} approvers `from` names"),
                ));
            }
        }
        match (self.escalate_after, self.escalate_to.is_empty()) {
            (Some(_), true) => out.push((
                format!("{key}.escalate_to"),
                "escalate_after needs escalate_to (who may decide once escalated)".into(),
            )),
            (None, false) => out.push((
                format!("{key}.escalate_after"),
                "escalate_to needs escalate_after (when it escalates)".into(),
            )),
            (Some(t), false) if t.0 < Duration::from_secs(1) => out.push((
                format!("{key}.escalate_after"),
                "must be at least 1s".into(),
            )),
            _ => {}
        }
    }
}

impl ApprovalBy {
    /// `operator` or `client`.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalBy::Operator => "operator",
            ApprovalBy::Client => "client",
        }
    }
}

/// One configuration mistake: where it is and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file (empty for a configuration built in code).
    pub file: String,
    /// The 1-based line, when the mistake has a place in a file.
    pub line: Option<usize>,
    /// The dotted key, such as `writes.set_note.binding_revision`.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.file.is_empty(), self.line) {
            (false, Some(line)) => write!(f, "{}:{line}: ", self.file)?,
            (false, None) => write!(f, "{}: ", self.file)?,
            (true, _) => {}
        }
        if self.key.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.key, self.message)
        }
    }
}

/// Every mistake of one configuration, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.len();
        writeln!(
            f,
            "the configuration has {n} mistake{}:",
            if n == 1 { "" } else { "s" }
        )?;
        for (i, e) in self.0.iter().enumerate() {
            if i + 1 < n {
                writeln!(f, "  {e}")?;
            } else {
                write!(f, "  {e}")?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// A mistake found by [`GatewayConfig::check`]: the dotted key and the message.
pub type Problem = (String, String);

impl GatewayConfig {
    fn check_webhooks(&self, out: &mut Vec<Problem>) {
        if let Some(why) = self.page.url.as_deref().and_then(|u| url_problem(u, true)) {
            out.push(("page.url".into(), why.into()));
        }
        for (name, w) in &self.webhooks {
            let key = format!("webhooks.{name}");
            if !identifier(name) {
                out.push((
                    key.clone(),
                    "webhook names must match ^[a-z][a-z0-9_]{0,63}$".into(),
                ));
            }
            if let Some(why) = url_problem(&w.url, false) {
                out.push((format!("{key}.url"), why.into()));
            }
            match (&w.secret_file, &w.secret_env) {
                (Some(_), Some(_)) => out.push((
                    format!("{key}.secret_env"),
                    "name the secret's file or its environment variable, not both".into(),
                )),
                (None, None) if w.format == WebhookFormat::Standard => out.push((
                    key.clone(),
                    "needs secret_file or secret_env: the Standard Webhooks secret (whsec_ and \
                     base64) its requests are signed with, never in this file"
                        .into(),
                )),
                _ => {}
            }
            if w.events.is_empty() {
                out.push((
                    format!("{key}.events"),
                    "subscribes to no event: leave events out for every one".into(),
                ));
            }
            let mut seen = std::collections::BTreeSet::new();
            for (i, e) in w.events.iter().enumerate() {
                if !seen.insert(*e) {
                    out.push((
                        format!("{key}.events[{i}]"),
                        format!("{} is named twice", e.event_type()),
                    ));
                }
            }
            if !(Duration::from_millis(100)..=Duration::from_secs(300)).contains(&w.timeout.0) {
                out.push((
                    format!("{key}.timeout"),
                    "must be at least 100ms and at most 300s".into(),
                ));
            }
            if w.backoff.0 < Duration::from_millis(10) {
                out.push((format!("{key}.backoff"), "must be at least 10ms".into()));
            }
            if w.max_backoff.0 < w.backoff.0 {
                out.push((
                    format!("{key}.max_backoff"),
                    format!("must be at least backoff ({})", w.backoff),
                ));
            }
            if w.give_up_after.0 < w.backoff.0 || w.give_up_after.0 > MAX_TTL {
                out.push((
                    format!("{key}.give_up_after"),
                    format!("must be at least backoff ({}) and at most 8760h", w.backoff),
                ));
            }
        }
    }

    fn check_page(&self, out: &mut Vec<Problem>) {
        let Some(o) = &self.page.oidc else {
            if !self.page.token_login {
                out.push((
                    "page.token_login".into(),
                    "token sign-in can be turned off only with [page.oidc]".into(),
                ));
            }
            return;
        };
        let http_url = |u: &str| {
            let rest = u
                .strip_prefix("https://")
                .or_else(|| u.strip_prefix("http://"));
            rest.is_some_and(|r| {
                let authority = r.split(['/', '?', '#']).next().unwrap_or("");
                !authority.is_empty() && !r.contains(char::is_whitespace)
            })
        };
        if !http_url(&o.issuer) {
            out.push(("page.oidc.issuer".into(), "must be an http(s) URL".into()));
        } else if let Some(why) = plain_http_off_loopback(&o.issuer) {
            out.push(("page.oidc.issuer".into(), why.into()));
        }
        if o.client_id.is_empty() {
            out.push(("page.oidc.client_id".into(), "must not be empty".into()));
        }
        if o.client_secret_file.is_some() && o.client_secret_env.is_some() {
            out.push((
                "page.oidc.client_secret_env".into(),
                "name the secret's file or its environment variable, not both".into(),
            ));
        }
        if let Some(uri) = &o.redirect_uri {
            if !http_url(uri) || !uri.ends_with("/login/callback") {
                out.push((
                    "page.oidc.redirect_uri".into(),
                    "must be an http(s) URL whose path is /login/callback".into(),
                ));
            }
        }
        if let Some(Err(why)) = o.required_claim() {
            out.push(("page.oidc.require_claim".into(), why));
        }
        if o.allow_subjects.is_empty() && o.allow_emails.is_empty() && o.require_claim.is_none() {
            out.push((
                "page.oidc".into(),
                "needs an allow-list: allow_subjects, allow_emails or require_claim".into(),
            ));
        }
    }
}

impl GatewayConfig {
    /// The mistakes of an upstream's `auth`, `per_principal` and their companions.
    fn check_upstream_identity(
        &self,
        key: &str,
        u: &UpstreamConfig,
        out: &mut Vec<(String, String)>,
    ) {
        if let Some(UpstreamAuth::Oauth(o)) = &u.auth {
            let at = format!("{key}.auth");
            if u.url.is_none() {
                out.push((
                    at.clone(),
                    "auth is for url upstreams (Streamable HTTP)".into(),
                ));
            }
            if self.page.url.is_none() {
                out.push((
                    format!("{at}.mode"),
                    "oauth sends principals to connect on the approver page: set [page] url \
                     (the page's public URL; the gateway serves the page with --page)"
                        .into(),
                ));
            }
            if o.discovery_principal.trim().is_empty() {
                out.push((
                    format!("{at}.discovery_principal"),
                    "must name the principal whose connection lists the tools".into(),
                ));
            }
            if o.client_id.is_some() != o.issuer.is_some() {
                out.push((
                    at.clone(),
                    "client_id and issuer go together (a client registered at that \
                     authorization server)"
                        .into(),
                ));
            }
            if o.client_secret_file.is_some() && o.client_id.is_none() {
                out.push((
                    format!("{at}.client_secret_file"),
                    "client_secret_file is for a configured client_id".into(),
                ));
            }
            if let Some(why) = o.issuer.as_deref().and_then(plain_http_off_loopback) {
                out.push((format!("{at}.issuer"), why.into()));
            }
            if u.per_principal {
                out.push((
                    format!("{key}.per_principal"),
                    "per_principal is for command upstreams without auth".into(),
                ));
            }
        }
        if let (Some(auth), Some(c)) = (&u.auth, u.auth.as_ref().and_then(UpstreamAuth::client)) {
            let at = format!("{key}.auth");
            if u.url.is_none() {
                out.push((
                    at.clone(),
                    "auth is for url upstreams (Streamable HTTP)".into(),
                ));
            }
            if let Some(why) = plain_http_off_loopback(&c.issuer) {
                out.push((format!("{at}.issuer"), why.into()));
            }
            if let Some(why) = c
                .token_endpoint
                .as_deref()
                .and_then(plain_http_off_loopback)
            {
                out.push((format!("{at}.token_endpoint"), why.into()));
            }
            if c.client_id.is_empty() {
                out.push((format!("{at}.client_id"), "must not be empty".into()));
            }
            let ways = [
                c.client_secret_file.is_some(),
                c.client_secret_env.is_some(),
                c.private_key_file.is_some(),
            ]
            .iter()
            .filter(|w| **w)
            .count();
            if ways != 1 {
                out.push((
                    at.clone(),
                    "give exactly one of client_secret_file, client_secret_env and \
                     private_key_file (how the gateway authenticates as its client)"
                        .into(),
                ));
            }
            if c.private_key_file.is_none() && (c.private_key_alg.is_some() || c.key_id.is_some()) {
                out.push((
                    at.clone(),
                    "private_key_alg and key_id are for private_key_file".into(),
                ));
            }
            // Every one of these at once (a `match` would stop at the first).
            let exchange = matches!(auth, UpstreamAuth::TokenExchange(_));
            if exchange && self.gateway.auth.is_none() {
                out.push((
                    format!("{at}.mode"),
                    "token_exchange exchanges each caller's validated token: it needs \
                     [gateway.auth]"
                        .into(),
                ));
            }
            if exchange && c.token_endpoint.is_none() {
                out.push((
                    format!("{at}.token_endpoint"),
                    "token_exchange needs the authorization server's token endpoint".into(),
                ));
            }
            if !exchange && (!c.audience.is_empty() || !c.resource.is_empty()) {
                out.push((
                    at.clone(),
                    "audience and resource are for token_exchange (client credentials name the \
                     upstream's URL as their resource)"
                        .into(),
                ));
            }
            if !exchange && c.actor {
                out.push((format!("{at}.actor"), "actor is for token_exchange".into()));
            }
            if u.per_principal {
                out.push((
                    format!("{key}.per_principal"),
                    "per_principal is for command upstreams without auth".into(),
                ));
            }
        }
        if u.per_principal {
            if u.command.is_none() {
                out.push((
                    format!("{key}.per_principal"),
                    "per_principal starts a command per principal: it needs a command".into(),
                ));
            }
            if u.env_from_credential.is_empty() {
                out.push((
                    format!("{key}.env_from_credential"),
                    "per_principal needs env_from_credential (which stored credential goes in \
                     which environment variable)"
                        .into(),
                ));
            }
        } else if !u.env_from_credential.is_empty() {
            out.push((
                format!("{key}.env_from_credential"),
                "env_from_credential is for per_principal upstreams".into(),
            ));
        }
        let per_principal = u.per_principal
            || matches!(
                u.auth,
                Some(UpstreamAuth::TokenExchange(_) | UpstreamAuth::Oauth(_))
            );
        if !per_principal && (u.max_principals.is_some() || u.idle_timeout.is_some()) {
            out.push((
                key.to_owned(),
                "max_principals and idle_timeout are for per-principal upstreams (per_principal, \
                 or auth mode token_exchange)"
                    .into(),
            ));
        }
        if u.max_principals == Some(0) {
            out.push((format!("{key}.max_principals"), "must be at least 1".into()));
        }
        for var in u.env_from_credential.keys() {
            if var.is_empty() || var.contains('=') || var.contains('\0') {
                out.push((
                    format!("{key}.env_from_credential"),
                    format!("{var:?} is not an environment variable name"),
                ));
            }
        }
    }
}

/// Why an issuer (or its keys' URL) `u`, an `http(s)` URL, cannot be trusted: plain http off
/// loopback, where anyone on the way could change the metadata and keys that decide which
/// tokens pass.
fn plain_http_off_loopback(u: &str) -> Option<&'static str> {
    let url = purra_protocol::http::reqwest::Url::parse(u).ok()?;
    (!purra_protocol::auth::secure_or_loopback(&url)).then_some(
        "must be https (plain http only on a loopback host: localhost, 127.0.0.1, [::1])",
    )
}

/// Why `u` is not an `http(s)` URL with a host (and, for an `identifier` such as an issuer or a
/// resource, no query or fragment), if it is not.
fn url_problem(u: &str, identifier: bool) -> Option<&'static str> {
    let Some(rest) = u
        .strip_prefix("https://")
        .or_else(|| u.strip_prefix("http://"))
    else {
        return Some("must be an http(s) URL");
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.is_empty() || rest.contains(|c: char| c.is_whitespace() || c.is_control()) {
        return Some("must be an http(s) URL");
    }
    if identifier && rest.contains(['?', '#']) {
        return Some("must be an http(s) URL without a query or fragment");
    }
    None
}

impl GatewayConfig {
    fn check_auth(&self, out: &mut Vec<Problem>) {
        let Some(a) = &self.gateway.auth else {
            return;
        };
        match self.gateway.listen {
            Listen::Stdio => out.push((
                "gateway.auth".into(),
                "guards the HTTP listener, and listen is \"stdio\" (stdio callers are the local \
                 principal): set listen to an address, or remove [gateway.auth]"
                    .into(),
            )),
            Listen::Http(addr) if addr.ip().is_unspecified() && a.resource.is_none() => out.push((
                "gateway.auth.resource".into(),
                format!(
                    "required when listen is {addr}: tokens name the gateway's public URL as \
                     their audience (such as \"https://gateway.example/mcp\")"
                ),
            )),
            Listen::Http(_) => {}
        }
        if let Some(why) =
            url_problem(&a.issuer, true).or_else(|| plain_http_off_loopback(&a.issuer))
        {
            out.push(("gateway.auth.issuer".into(), why.into()));
        }
        if let Some(why) = a.resource.as_deref().and_then(|r| url_problem(r, true)) {
            out.push(("gateway.auth.resource".into(), why.into()));
        }
        if let Some(why) = a
            .jwks_uri
            .as_deref()
            .and_then(|u| url_problem(u, false).or_else(|| plain_http_off_loopback(u)))
        {
            out.push(("gateway.auth.jwks_uri".into(), why.into()));
        }
        for (i, scope) in a.scopes.iter().enumerate() {
            if scope.is_empty() || scope.contains(|c: char| c.is_whitespace() || c.is_control()) {
                out.push((
                    format!("gateway.auth.scopes[{i}]"),
                    "a scope is one non-empty word".into(),
                ));
            }
        }
        let Some(i) = &a.introspection else {
            return;
        };
        for (key, set) in [
            ("jwks_uri", a.jwks_uri.is_some()),
            ("require_at_jwt", a.require_at_jwt.is_some()),
        ] {
            if set {
                out.push((
                    format!("gateway.auth.{key}"),
                    "is for JWT access tokens; tokens are checked by introspection here".into(),
                ));
            }
        }
        // The endpoint receives the gateway's client secret and every caller's token.
        if let Some(why) =
            url_problem(&i.endpoint, false).or_else(|| plain_http_off_loopback(&i.endpoint))
        {
            out.push(("gateway.auth.introspection.endpoint".into(), why.into()));
        }
        if i.client_id.is_empty() {
            out.push((
                "gateway.auth.introspection.client_id".into(),
                "must not be empty".into(),
            ));
        }
        if i.max_concurrent_per_address == Some(0) {
            out.push((
                "gateway.auth.introspection.max_concurrent_per_address".into(),
                "must be at least 1".into(),
            ));
        }
        match (&i.client_secret_file, &i.client_secret_env) {
            (Some(_), Some(_)) => out.push((
                "gateway.auth.introspection.client_secret_env".into(),
                "name the secret's file or its environment variable, not both".into(),
            )),
            (None, None) => out.push((
                "gateway.auth.introspection".into(),
                "needs client_secret_file or client_secret_env (the secret is never in this file)"
                    .into(),
            )),
            _ => {}
        }
    }
}

impl GatewayConfig {
    /// What a configuration needs to serve anything: an upstream and a binding. A file or a
    /// configuration built in code without them is refused before anything starts
    /// ([`crate::load`] and [`crate::Gateway::start`] run this beside [`GatewayConfig::check`];
    /// [`crate::load_str`] does not, so a fragment can be checked on its own).
    pub fn check_serves(&self) -> Vec<Problem> {
        let mut out = Vec::new();
        if self.upstreams.is_empty() {
            out.push((
                "upstreams".into(),
                "no upstream server is configured: add an [upstreams.ID] table with a command or a url"
                    .into(),
            ));
        }
        if self.reads.is_empty() && self.writes.is_empty() && self.skills.is_empty() {
            out.push((
                "reads".into(),
                "nothing is bound: add a [reads.NAME] or [writes.NAME] table naming an upstream tool"
                    .into(),
            ));
        }
        out
    }
}

/// Whether `host` is a host name, an IP literal, or either with a port: what a `Host` header
/// names (no scheme, path, user or empty name).
fn allowed_host(host: &str) -> bool {
    let Ok(authority) = host.parse::<http::uri::Authority>() else {
        return false;
    };
    let has_port = authority.as_str().len() > authority.host().len();
    !host.contains('@')
        && !authority.host().is_empty()
        && (!has_port || authority.port_u16().is_some())
}

fn identifier(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_')
}

impl GatewayConfig {
    /// The checks that need no file and no upstream: names, upstream references, scope rules,
    /// write authorizations and limits. Each problem names its dotted key.
    pub fn check(&self) -> Vec<Problem> {
        let mut out: Vec<Problem> = Vec::new();
        if !(1..=MAX_POOL_SIZE).contains(&self.store.pool_size) {
            out.push((
                "store.pool_size".into(),
                format!("must be from 1 to {MAX_POOL_SIZE}"),
            ));
        }
        let t = &self.telemetry;
        if let Some(url) = &t.otlp_endpoint {
            if !(url.starts_with("http://") || url.starts_with("https://"))
                || url.contains(char::is_whitespace)
            {
                out.push((
                    "telemetry.otlp_endpoint".into(),
                    "must be an http:// or https:// URL, such as \"http://127.0.0.1:4318\"".into(),
                ));
            }
        }
        if t.service_name.as_deref() == Some("") {
            out.push(("telemetry.service_name".into(), "must not be empty".into()));
        }
        if t.metrics_interval.0 < Duration::from_secs(1) {
            out.push((
                "telemetry.metrics_interval".into(),
                "must be at least 1s".into(),
            ));
        }
        let g = &self.gateway;
        if !identifier(&g.name) {
            out.push((
                "gateway.name".into(),
                "must match ^[a-z][a-z0-9_]{0,63}$".into(),
            ));
        }
        if g.principal.is_empty() {
            out.push(("gateway.principal".into(), "must not be empty".into()));
        }
        for (key, d) in [
            ("approval_wait", g.approval_wait),
            ("progress_interval", g.progress_interval),
            ("approval_ttl", g.approval_ttl),
            ("approval_request_ttl", g.approval_request_ttl),
            ("lease", g.lease),
        ] {
            if d.0 < Duration::from_millis(10) {
                out.push((format!("gateway.{key}"), "must be at least 10ms".into()));
            }
        }
        if g.approval_request_ttl.0 < g.approval_wait.0 {
            out.push((
                "gateway.approval_request_ttl".into(),
                format!(
                    "must be at least approval_wait ({}): a request must outlive the wait for it",
                    g.approval_wait
                ),
            ));
        }
        // Expiry instants are stored as nanoseconds since 1970 in a signed 64-bit integer.
        for (key, d) in [
            ("approval_ttl", g.approval_ttl),
            ("approval_request_ttl", g.approval_request_ttl),
        ] {
            if d.0 > MAX_TTL {
                out.push((
                    format!("gateway.{key}"),
                    "must be at most 8760h (a year)".into(),
                ));
            }
        }
        if !(1..=MAX_PENDING_PER_CALLER).contains(&g.max_pending_per_caller) {
            out.push((
                "gateway.max_pending_per_caller".into(),
                format!("must be at least 1 and at most {MAX_PENDING_PER_CALLER}"),
            ));
        }
        if !(1..=MAX_CALLS_PER_MINUTE).contains(&g.max_calls_per_minute_per_caller) {
            out.push((
                "gateway.max_calls_per_minute_per_caller".into(),
                format!("must be at least 1 and at most {MAX_CALLS_PER_MINUTE}"),
            ));
        }
        if g.drain_timeout.0 > MAX_DRAIN_TIMEOUT {
            out.push(("gateway.drain_timeout".into(), "must be at most 1h".into()));
        }
        if !(1..=MAX_MAX_SESSIONS).contains(&g.max_sessions) {
            out.push((
                "gateway.max_sessions".into(),
                format!("must be at least 1 and at most {MAX_MAX_SESSIONS}"),
            ));
        }
        if !(1..=g.max_sessions.max(1)).contains(&g.max_sessions_per_caller) {
            out.push((
                "gateway.max_sessions_per_caller".into(),
                format!(
                    "must be at least 1 and at most max_sessions ({})",
                    g.max_sessions
                ),
            ));
        }
        let idle = g.session_idle_timeout.0;
        if idle < Duration::from_secs(1) || idle > Duration::from_secs(24 * 3600) {
            out.push((
                "gateway.session_idle_timeout".into(),
                "must be at least 1s and at most 24h".into(),
            ));
        }
        for (i, host) in g.allowed_hosts.iter().enumerate() {
            if !allowed_host(host) {
                out.push((
                    format!("gateway.allowed_hosts[{i}]"),
                    format!(
                        "expected a host name such as \"mcp.example.com\" or \"mcp.example.com:443\", found {host:?}"
                    ),
                ));
            }
        }
        self.check_policies(&mut out);
        self.check_page(&mut out);
        self.check_auth(&mut out);
        self.check_webhooks(&mut out);
        if self.limits.limits().validate().is_err() {
            out.push((
                "limits".into(),
                "each limit must be at least 1 and at most its default, the timeout at most 300s"
                    .into(),
            ));
        }
        for (id, u) in &self.upstreams {
            let key = format!("upstreams.{id}");
            if !identifier(id) {
                out.push((
                    key.clone(),
                    "upstream ids must match ^[a-z][a-z0-9_]{0,63}$".into(),
                ));
            }
            match (&u.command, &u.url) {
                (Some(_), Some(_)) => {
                    out.push((key.clone(), "give either command or url, not both".into()))
                }
                (None, None) => out.push((key.clone(), "needs a command or a url".into())),
                (Some(c), None) if c.is_empty() || c[0].is_empty() => out.push((
                    format!("{key}.command"),
                    "needs at least the program".into(),
                )),
                (None, Some(url)) => {
                    let scheme_ok = ["http://", "https://", "ws://", "wss://"]
                        .iter()
                        .any(|s| url.starts_with(s));
                    if !scheme_ok {
                        out.push((
                            format!("{key}.url"),
                            "must start with http://, https://, ws:// or wss://".into(),
                        ));
                    }
                }
                _ => {}
            }
            if u.url.is_none() && !u.headers.is_empty() {
                out.push((
                    format!("{key}.headers"),
                    "headers are for url upstreams".into(),
                ));
            }
            if u.command.is_none() && (!u.env.is_empty() || u.cwd.is_some()) {
                out.push((key.clone(), "env and cwd are for command upstreams".into()));
            }
            self.check_upstream_identity(&key, u, &mut out);
        }
        let mut remote_seen: BTreeMap<(&str, &str), String> = BTreeMap::new();
        let bindings = self
            .reads
            .iter()
            .map(|(n, r)| ("reads", n, &r.upstream, r.tool.as_deref()))
            .chain(
                self.writes
                    .iter()
                    .map(|(n, w)| ("writes", n, &w.upstream, w.tool.as_deref())),
            );
        for (table, name, upstream, tool) in bindings {
            let key = format!("{table}.{name}");
            if !identifier(name) {
                out.push((
                    key.clone(),
                    "local names must match ^[a-z][a-z0-9_]{0,63}$".into(),
                ));
            }
            if g.apps && name == APPROVAL_TOOL {
                out.push((
                    key.clone(),
                    format!(
                        "the local name {name:?} is the gateway's own approval tool while \
                         gateway.apps is on"
                    ),
                ));
            }
            if table == "writes" && self.reads.contains_key(name) {
                out.push((
                    key.clone(),
                    format!("the local name {name:?} is also a read binding"),
                ));
            }
            if !self.upstreams.contains_key(upstream) {
                out.push((
                    format!("{key}.upstream"),
                    format!("no upstream {upstream:?} is configured"),
                ));
            }
            let remote = tool.unwrap_or(name);
            if let Some(other) = remote_seen.insert((upstream, remote), key.clone()) {
                out.push((
                    key.clone(),
                    format!("binds the same upstream tool {remote:?} as {other}"),
                ));
            }
        }
        self.check_skills(&mut out);
        for (name, r) in &self.reads {
            let key = format!("reads.{name}");
            if r.title.is_empty() {
                out.push((format!("{key}.title"), "must not be empty".into()));
            }
            if let ScopeConfig::Rules(rules) = &r.scope {
                check_rules(&format!("{key}.scope"), rules, &mut out);
            }
        }
        for (name, w) in &self.writes {
            let key = format!("writes.{name}");
            if w.title.is_empty() {
                out.push((format!("{key}.title"), "must not be empty".into()));
            }
            if w.approver_max_age
                .is_some_and(|t| t.0 < Duration::from_secs(1))
            {
                out.push((
                    format!("{key}.approver_max_age"),
                    "must be at least 1s (leave it out for any live session)".into(),
                ));
            }
            if w.receipt_ttl.is_some_and(|t| t.0 < Duration::from_secs(1)) {
                out.push((
                    format!("{key}.receipt_ttl"),
                    "must be at least 1s (leave it out for receipts that answer for ever)".into(),
                ));
            }
            if w.risk.is_some_and(|r| r != w.effect) {
                out.push((
                    format!("{key}.risk"),
                    format!("the risk must match the effect ({})", w.effect.as_str()),
                ));
            }
            for (field, value) in [
                ("binding_id", &w.binding_id),
                ("binding_revision", &w.binding_revision),
                ("scope_id", &w.scope_id),
                ("scope_revision", &w.scope_revision),
            ] {
                if value.trim().is_empty() {
                    out.push((format!("{key}.{field}"), "must not be empty".into()));
                }
            }
            check_rules(&format!("{key}.scope"), &w.scope, &mut out);
            if let Some(rule) = w.approval.rule() {
                rule.check(&format!("{key}.approval"), &mut out);
                // An edit approves the edited call in one approver's decision: it cannot stand
                // for the votes of a quorum.
                if w.allow_edit && rule.required.is_some_and(|n| n > 1) {
                    out.push((
                        format!("{key}.allow_edit"),
                        "an edit is one approver's decision, but the approval asks for several votes \
                         (approval.required): leave allow_edit out, or require one vote"
                            .into(),
                    ));
                }
            }
            if w.approval == ApprovalBy::Client && !g.elicitation && !g.apps {
                out.push((
                    format!("{key}.approval"),
                    "\"client\" lets the downstream client's user decide through elicitation or \
                     the approval view, but gateway.elicitation and gateway.apps are both off: \
                     nothing could use it (turn one on, or leave approval out: an operator decides)"
                        .into(),
                ));
            }
        }
        out
    }
}

impl GatewayConfig {
    fn check_policies(&self, out: &mut Vec<Problem>) {
        let Some(p) = &self.policies else {
            return;
        };
        if p.files.is_empty() {
            out.push((
                "policies.files".into(),
                "name at least one Cedar policy file (or leave [policies] out)".into(),
            ));
        }
        if p.files.len() > MAX_POLICY_FILES {
            out.push((
                "policies.files".into(),
                format!("at most {MAX_POLICY_FILES} policy files"),
            ));
        }
        for name in p.claims.keys() {
            if name.is_empty()
                || name.len() > MAX_CLAIM_NAME_BYTES
                || name.contains(|c: char| c.is_control())
            {
                out.push((
                    format!("policies.claims.{name}"),
                    format!(
                        "a claim's name is 1 to {MAX_CLAIM_NAME_BYTES} bytes without control \
                         characters"
                    ),
                ));
            }
        }
    }
}

impl GatewayConfig {
    /// The configuration's skill bindings checked without an upstream: names, upstreams, URIs, and
    /// one binding per upstream skill.
    fn check_skills(&self, out: &mut Vec<Problem>) {
        let config = self;
        let mut seen: BTreeMap<(&str, &str), String> = BTreeMap::new();
        for (name, s) in &config.skills {
            let key = format!("skills.{name}");
            if !is_skill_name(name) {
                out.push((
                    key.clone(),
                    "a skill's name is 1 to 64 lowercase letters, digits and single hyphens (the name its SKILL.md declares)".into(),
                ));
            }
            if !config.upstreams.contains_key(&s.upstream) {
                out.push((
                    format!("{key}.upstream"),
                    format!("no upstream {:?} is configured", s.upstream),
                ));
            }
            if let Some(uri) = &s.uri {
                if skill_root(uri).is_none() {
                    out.push((
                        format!("{key}.uri"),
                        "must be the URI of a skill's SKILL.md (such as skill://pdf-processing/SKILL.md)".into(),
                    ));
                }
            }
            let target = s.uri.as_deref().unwrap_or(name);
            if let Some(other) = seen.insert((&s.upstream, target), key.clone()) {
                out.push((key, format!("binds the same upstream skill as {other}")));
            }
        }
    }
}

pub(crate) fn check_rules(key: &str, rules: &ScopeRules, out: &mut Vec<Problem>) {
    for (field, list) in [
        ("principals", &rules.principals),
        ("clients", &rules.clients),
    ] {
        if list.as_ref().is_some_and(|l| l.is_empty()) {
            out.push((
                format!("{key}.{field}"),
                "an empty list allows no caller; leave it out to allow any".into(),
            ));
        }
    }
    for (i, rule) in rules.arguments.iter().enumerate() {
        if let Err(why) = ArgumentRule::parse(rule) {
            out.push((
                format!("{key}.arguments[{i}]"),
                format!("cannot parse {rule:?}: {why}"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_and_print() {
        assert_eq!("30s".parse::<Dur>(), Ok(Dur(Duration::from_secs(30))));
        assert_eq!("250ms".parse::<Dur>(), Ok(Dur(Duration::from_millis(250))));
        assert_eq!("10m".parse::<Dur>(), Ok(Dur(Duration::from_secs(600))));
        assert_eq!("2h".parse::<Dur>(), Ok(Dur(Duration::from_secs(7200))));
        assert_eq!(
            "30".parse::<Dur>(),
            Err(
                "expected a duration with a unit ms, s, m or h (such as \"30s\"), found \"30\""
                    .into()
            )
        );
        assert_eq!(
            "s".parse::<Dur>(),
            Err("expected a duration such as \"30s\", found \"s\"".into())
        );
        for text in ["250ms", "30s", "10m", "2h", "1500ms"] {
            assert_eq!(text.parse::<Dur>().unwrap().to_string(), text);
        }
    }
}
