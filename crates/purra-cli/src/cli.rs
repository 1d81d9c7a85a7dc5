//! The command line: every subcommand and option, parsed with clap (derive).
//!
//! The durable-store subcommands (`approvals list|show|approve|deny`, `runs list|show`, `demo`)
//! work on a store given by `--db`: a SQLite file (default `./purra.db`) or a `postgres://` URL;
//! `approvals` and `runs` also find it through a gateway file (`--config FILE`, or
//! `./gateway.toml` when there is no `./purra.db`).

use clap::{Args, Parser, Subcommand, ValueEnum};
use purra_protocol::types::LoggingLevel;

/// Shown after the top-level help: targets, `key=value` arguments and exit codes.
const AFTER_HELP: &str = "\
Targets:
  A server is either a URL, given as the first argument
      http://HOST:PORT/PATH, https://...   Streamable HTTP
      ws://HOST:PORT/PATH, wss://...       WebSocket (subprotocol mcp)
  or a command run over stdio, given last after `--` (and then no URL):
      purra call echo text=hi -- python server.py

Arguments:
  Tool arguments are KEY=VALUE pairs, converted by the tool's input schema: a property of type
  string takes VALUE as written (zip=94103 is the string \"94103\"); any other VALUE is parsed
  as JSON when it parses (numbers, true, false, null, objects, arrays, \"quoted strings\"),
  otherwise it is the string as written: n=3 is the number 3, text=hi the string \"hi\".
  --args '{...}' gives a raw JSON object first (never converted); KEY=VALUE pairs then set or
  replace keys.
  Prompt arguments are always strings (MCP prompt arguments are strings).

Output:
  Results go to stdout: text as is, structured content as pretty-printed JSON, images, audio
  and binary resources summarized (e.g. [image image/png, 1.2 KiB]). --json prints one JSON
  document instead. Progress and server log messages go to stderr (a live progress bar when
  stderr is a terminal, plain lines otherwise). On a terminal, control characters a server
  sent (escape sequences) are shown as escapes like \\x1b, never obeyed; pipes and files get
  the text exactly as sent. `call --max-time SECS` (default 600) bounds a call in all, however
  much progress the server reports.

Exit codes:
  0   success
  1   the tool reported an error (a result with isError: true)
  2   protocol or transport error (could not connect, JSON-RPC error such as an unknown
      tool or resource, timeout, connection closed)
  64  usage error (bad arguments, invalid --args JSON, no target)
  2   also: an unknown approval or run id, or a store that cannot be opened or read
  3   conflict (for example deciding an approval a second time)
  78  the gateway's configuration file has mistakes (each printed with its line and key)
  130 interrupted (Ctrl-C; the request is cancelled)

Durable writes:
  purra demo                           an agent reads, asks for a write, the write is approved,
                                       dispatched once and its receipt kept in ./purra.db
  purra demo --no-approve              stop at the pending approval (decide it yourself)
  purra demo --interactive             wait for `purra approvals approve ID` from elsewhere
  purra approvals list|show ID|approve ID|deny ID [--note TEXT]
  purra runs list|show ID
  purra effects list [--unknown]|show KEY|reconcile KEY --committed|--not-sent --evidence TEXT
  purra effects resend KEY --config gateway.toml
                                       settle unknown effects (resend: idempotent writes only)
  purra grants add --principal P --tool T --uses N --until 8h [--rule RULE]...
  purra grants list|show ID|revoke ID  standing grants: covered writes sent without waiting
  purra credentials list|set|revoke|rotate
                                       per-principal upstream secrets, sealed at rest
                                       (keys: --keys FILE or PURRA_CREDENTIAL_KEYS)
  Each takes --db PATH|URL (a SQLite file, default ./purra.db, or a postgres:// URL) and --json;
  approvals, runs and effects also --config FILE (a gateway file's [gateway] db; without --db and
  without ./purra.db, ./gateway.toml's).
  purra approvals serve                the approver page on 127.0.0.1:8470 (sign-in tokens
                                       printed; --page-approver NAME, repeatable)
  purra gateway --config gateway.toml  serve bound upstream tools to MCP clients; writes
                                       wait for `purra approvals approve ID` (or elicitation;
                                       or the approver page beside it with --page)

Examples:
  purra serve-example --http 127.0.0.1:3000
  purra inspect http://127.0.0.1:3000/mcp
  purra call http://127.0.0.1:3000/mcp add a=2 b=3
  purra inspect --schemas -- purra serve-example
  purra read fixture://static/1 -- purra serve-example
  purra serve-example --ws 127.0.0.1:3001
  purra prompt ws://127.0.0.1:3001 greet name=Ada";

/// purra: inspect and call any MCP server over stdio, Streamable HTTP or WebSocket; decide
/// durable approvals and see runs in a store (SQLite or PostgreSQL); the durable-write demo.
#[derive(Debug, Parser)]
#[command(name = "purra", version, after_help = AFTER_HELP)]
pub struct Cli {
    /// Trace on stderr: -v every request and notification (method, id, outcome, duration) and
    /// why a connection closed; -vv also each notification's arrival and other crates' debug
    /// output (HTTP, TLS).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// How log lines on stderr are written: `text`, or `json` (one JSON object a line, with the
    /// trace and span ids of the request they belong to); `purra gateway` and `purra approvals
    /// serve` write their operational messages the same way. Neither carries a token, an
    /// argument value or an upstream's text below -vv.
    #[arg(long, value_enum, default_value_t = crate::telemetry::LogFormat::Text, global = true)]
    pub log_format: crate::telemetry::LogFormat,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Connect and show server info, negotiated version, capabilities, tools, resources,
    /// resource templates and prompts.
    #[command(override_usage = "purra inspect [OPTIONS] <URL>\n       \
                                purra inspect [OPTIONS] -- <COMMAND> [ARGS]...")]
    Inspect(InspectArgs),
    /// Call a tool and print its result.
    #[command(
        override_usage = "purra call [OPTIONS] <URL> <TOOL> [KEY=VALUE]...\n       \
                          purra call [OPTIONS] <TOOL> [KEY=VALUE]... -- <COMMAND> [ARGS]..."
    )]
    Call(CallArgs),
    /// List, show or cancel the tasks a server runs for this client (2025-11-25 tasks; tasks
    /// belong to the session or principal that created them).
    #[command(subcommand)]
    Tasks(TasksCommand),
    /// Read a resource and print its contents.
    #[command(override_usage = "purra read [OPTIONS] <URL> <URI>\n       \
                                purra read [OPTIONS] <URI> -- <COMMAND> [ARGS]...")]
    Read(ReadArgs),
    /// Get a prompt and print its messages.
    #[command(
        override_usage = "purra prompt [OPTIONS] <URL> <NAME> [KEY=VALUE]...\n       \
                          purra prompt [OPTIONS] <NAME> [KEY=VALUE]... -- <COMMAND> [ARGS]..."
    )]
    Prompt(PromptArgs),
    /// Run purra's example MCP server (tools, resources, templates, prompts, completion,
    /// logging, progress) over stdio (default), Streamable HTTP or WebSocket.
    ServeExample(ServeArgs),
    /// Authorize purra at a Streamable HTTP server that requires OAuth: prints the
    /// authorization URL, waits for the browser on a loopback redirect, and stores the tokens
    /// for that server (inspect, call, read and prompt then use and refresh them).
    Login(LoginArgs),
    /// Forget the tokens stored for a server.
    Logout(LogoutArgs),
    /// List, show, approve or deny the approvals in a store.
    #[command(subcommand)]
    Approvals(ApprovalsCommand),
    /// Standing grants: a principal's calls of one write tool approved without waiting, at
    /// most N times, until a time (add, list, show, revoke).
    #[command(subcommand)]
    Grants(GrantsCommand),
    /// List or show the runs in a store.
    #[command(subcommand)]
    Runs(RunsCommand),
    /// List, show, reconcile or resend the effects (claimed writes) in a store; `unknown` ones
    /// change only by an operator's recorded decision or a resend under the same key.
    #[command(subcommand)]
    Effects(EffectsCommand),
    /// Review the catalog changes a gateway holds: bound tools an upstream lists differently
    /// from their pinned definition (or no longer lists); approve (re-pin) or deny each.
    #[command(subcommand)]
    Catalog(CatalogCommand),
    /// List the webhook deliveries a store has not made yet (pending and failed), or send the
    /// failed ones again.
    #[command(subcommand)]
    Webhooks(WebhooksCommand),
    /// List, set, revoke or re-seal the upstream credentials principals hold in a store (kept
    /// only sealed, under the keys of --keys FILE or PURRA_CREDENTIAL_KEYS).
    #[command(subcommand)]
    Credentials(CredentialsCommand),
    /// The durable-write demo: an agent reads from a server, asks for a write, the write is
    /// approved, dispatched once and its receipt stored; run again, it is not sent again.
    Demo(DemoArgs),
    /// Run the demo server (`get_note`, `set_note`) over stdio; `purra demo` starts it.
    #[command(hide = true)]
    ServeDemo(ServeDemoArgs),
    /// Serve the bound tools of upstream MCP servers to downstream MCP clients under host
    /// authority: reads with the adapter's limits and codes, writes only after a durable
    /// approval (configured in a TOML file; see the guide's gateway chapter, docs/src/gateway).
    Gateway(GatewayArgs),
}

/// `purra serve-demo`.
#[derive(Debug, Args)]
pub struct ServeDemoArgs {
    /// Keep `set_note`'s idempotent results in DIR/results.db (a fresh process answers a key an
    /// earlier one executed) and log every executed `set_note` in DIR/writes.log.
    #[arg(long, value_name = "DIR")]
    pub state: Option<std::path::PathBuf>,
}

/// `purra gateway`.
#[derive(Debug, Args)]
pub struct GatewayArgs {
    /// The configuration file (TOML): [gateway] settings, [upstreams.ID], [reads.NAME] and
    /// [writes.NAME] bindings, [limits], [policies] (Cedar policy files).
    #[arg(long, value_name = "FILE")]
    pub config: std::path::PathBuf,
    /// Check the configuration against the upstreams, print the bound tools and exit (the store
    /// is opened and each address to listen on tried, as a start would).
    #[arg(long)]
    pub check: bool,
    /// With --check: the file is for a running gateway's reload (kill -HUP), which keeps its
    /// listeners; their addresses, held by that gateway, are not tried.
    #[arg(long, requires = "check")]
    pub for_reload: bool,
    /// Also serve the approver page on this address (loopback: 127.0.0.1:8470); decisions made
    /// there wake this gateway's waiting calls at once.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:8470")]
    pub page: Option<std::net::SocketAddr>,
    /// The approver page's options.
    #[command(flatten)]
    pub page_options: PageArgs,
}

/// Options of the approver page (`purra approvals serve`, `purra gateway --page`).
#[derive(Debug, Clone, Args)]
pub struct PageArgs {
    /// Who may sign in to the page (repeatable; `operator` when none): each gets a random access
    /// token, printed on stderr at start, recorded as the approver of their decisions.
    #[arg(long = "page-approver", value_name = "NAME")]
    pub approvers: Vec<String>,
    /// Another host name the page is reached under, besides the loopback names (repeatable).
    #[arg(long = "page-allow-host", value_name = "HOST")]
    pub allow_hosts: Vec<String>,
    /// Seconds an approval made on the page authorizes dispatch.
    #[arg(
        long = "page-approval-ttl",
        value_name = "SECS",
        default_value_t = 3600
    )]
    pub approval_ttl: u64,
    /// Sign approvers in through this OpenID Connect provider (its issuer URL; discovery
    /// finds the rest); the callback is http://ADDR/login/callback on the page's address.
    #[arg(long = "page-oidc-issuer", value_name = "URL")]
    pub oidc_issuer: Option<String>,
    /// The page's client id at the provider.
    #[arg(long = "page-oidc-client-id", value_name = "ID")]
    pub oidc_client_id: Option<String>,
    /// A file holding the client secret (a confidential client); none for a public client.
    #[arg(long = "page-oidc-client-secret-file", value_name = "FILE")]
    pub oidc_secret_file: Option<std::path::PathBuf>,
    /// An environment variable holding the client secret.
    #[arg(long = "page-oidc-client-secret-env", value_name = "VAR")]
    pub oidc_secret_env: Option<String>,
    /// The callback URL registered with the provider, when not http://ADDR/login/callback.
    #[arg(long = "page-oidc-redirect-uri", value_name = "URL")]
    pub oidc_redirect_uri: Option<String>,
    /// A scope to ask for (repeatable; default openid email profile).
    #[arg(long = "page-oidc-scope", value_name = "SCOPE")]
    pub oidc_scopes: Vec<String>,
    /// The provider's name on the sign-in button.
    #[arg(long = "page-oidc-label", value_name = "NAME")]
    pub oidc_label: Option<String>,
    /// A subject (`sub`) who may approve (repeatable).
    #[arg(long = "page-allow-subject", value_name = "SUB")]
    pub allow_subjects: Vec<String>,
    /// An email who may approve (repeatable; only when the provider says it is verified).
    #[arg(long = "page-allow-email", value_name = "EMAIL")]
    pub allow_emails: Vec<String>,
    /// A claim every approver must carry, NAME=VALUE (a list claim must contain VALUE).
    #[arg(long = "page-require-claim", value_name = "NAME=VALUE")]
    pub require_claim: Option<String>,
    /// Turn sign-in with the printed access tokens off (only with an OpenID Connect provider).
    #[arg(long = "page-no-token-login")]
    pub no_token_login: bool,
    /// Browsers reach the page over TLS (through a proxy that terminates it): its cookies are
    /// `Secure`, the session cookie named `__Host-purra_page_session`. On without this flag when
    /// the OpenID Connect redirect URI is https.
    #[arg(long = "page-secure-cookie")]
    pub secure_cookie: bool,
}

/// Options of every store subcommand.
#[derive(Debug, Args)]
pub struct StoreArgs {
    /// The store: a SQLite file (an existing one, e.g. made by `purra demo`) or a
    /// `postgres://USER@HOST:PORT/DATABASE` URL. Without it (and without --config): ./purra.db
    /// when it exists, else the `[gateway] db` of ./gateway.toml when that exists.
    #[arg(long, value_name = "PATH|URL")]
    pub db: Option<String>,
    /// A gateway configuration whose `[gateway] db` is the store (relative to the file's
    /// directory, as `purra gateway` reads it).
    #[arg(long, value_name = "FILE", conflicts_with = "db")]
    pub config: Option<std::path::PathBuf>,
    /// Print one JSON document on stdout instead of readable output.
    #[arg(long)]
    pub json: bool,
}

/// `purra approvals`.
#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// The approvals in the store, the newest first, one page at a time (a last line says how
    /// many more are older and how to see them).
    List {
        /// Only approvals older than this one (the next page: the id the last line names).
        #[arg(long, value_name = "ID")]
        before: Option<String>,
        /// At most this many (1 to 1000).
        #[arg(long, value_name = "N", default_value_t = 50,
              value_parser = clap::value_parser!(u32).range(1..=1000))]
        limit: u32,
        /// The store and output options.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// One approval: tool, arguments (while its run waits), intent digest, decision, effect.
    Show {
        /// The approval id, e.g. approval-1.
        id: String,
        /// The store and output options.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Approve a pending approval (valid for --ttl seconds); the run dispatches on resume.
    Approve {
        /// The approval id, e.g. approval-1.
        id: String,
        /// Who decides (recorded as the approver, with the path: `NAME (cli)`; a member of the
        /// groups the gateway file's `[approvers.groups]` lists NAME in).
        #[arg(
            long,
            visible_alias = "as",
            value_name = "NAME",
            default_value = "operator"
        )]
        approver: String,
        /// A note recorded with the decision (why, conditions).
        #[arg(long, value_name = "TEXT")]
        note: Option<String>,
        /// Seconds the approval authorizes dispatch.
        #[arg(long, value_name = "SECS", default_value_t = 3600)]
        ttl: u64,
        /// The store and output options.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Serve the approver page for the store: pending approvals updated live, approve or deny
    /// with a note, the history with effects, receipts and audit trails. Found through a gateway
    /// file (--config, ./gateway.toml), it serves the file's [page] settings and its
    /// [approvers.groups] (a workflow's `from`), and with [webhooks] delivers their events too.
    Serve {
        /// Where to listen (loopback by default).
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8470")]
        listen: std::net::SocketAddr,
        /// The page's options (boxed: they outweigh every other subcommand's).
        #[command(flatten)]
        page: Box<PageArgs>,
        /// The store and output options.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Deny a pending approval; the call is never dispatched.
    Deny {
        /// The approval id, e.g. approval-1.
        id: String,
        /// Who decides (recorded as the approver, with the path: `NAME (cli)`; a member of the
        /// groups the gateway file's `[approvers.groups]` lists NAME in).
        #[arg(
            long,
            visible_alias = "as",
            value_name = "NAME",
            default_value = "operator"
        )]
        approver: String,
        /// A note recorded with the decision (why, conditions).
        #[arg(long, value_name = "TEXT")]
        note: Option<String>,
        /// The store and output options.
        #[command(flatten)]
        store: StoreArgs,
    },
}

/// `purra effects`.
#[derive(Debug, Subcommand)]
pub enum EffectsCommand {
    /// The effects in the store, the newest claim first, one page at a time.
    List {
        /// Only the `unknown` ones (the operator's queue).
        #[arg(long)]
        unknown: bool,
        /// Only effects older than this key (the next page: the key the last line names).
        #[arg(long, value_name = "KEY")]
        before: Option<String>,
        /// At most this many (1 to 1000).
        #[arg(long, value_name = "N", default_value_t = 50,
              value_parser = clap::value_parser!(u32).range(1..=1000))]
        limit: u32,
        /// The store and output options.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// One effect: when it was claimed and by which instance, the tool and the arguments sent,
    /// what came back last, its reconciliation and its resend.
    Show {
        /// The idempotency key, or the id of the approval that claimed it (approval-12).
        key: String,
        /// The store and output options.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Record an operator's decision on an `unknown` effect, with evidence: it was committed,
    /// or it was never sent. Audited; the `effect.reconciled` webhook event.
    #[command(group(clap::ArgGroup::new("outcome").required(true).args(["committed", "not_sent"])))]
    Reconcile {
        /// The idempotency key, or the id of the approval that claimed it.
        key: String,
        /// The upstream did have the effect.
        #[arg(
            long,
            conflicts_with = "not_sent",
            required_unless_present = "not_sent"
        )]
        committed: bool,
        /// The upstream never had the effect.
        #[arg(long)]
        not_sent: bool,
        /// Independent evidence of what happened (1 to 4096 bytes).
        #[arg(long, value_name = "TEXT")]
        evidence: String,
        /// Who decides (recorded with the path: `NAME (cli)`).
        #[arg(long, value_name = "NAME", default_value = "operator")]
        by: String,
        /// The store and output options.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Send an `unknown` effect again under the same idempotency key, once: only when its
    /// `[writes.NAME]` says `idempotent = true` or the upstream declares `tools.idempotency`.
    /// Needs --config (the gateway file that binds the tool).
    Resend {
        /// The idempotency key, or the id of the approval that claimed it.
        key: String,
        /// Who asks (recorded with the path: `NAME (cli)`).
        #[arg(long, value_name = "NAME", default_value = "operator")]
        by: String,
        /// The store and output options (--config is required).
        #[command(flatten)]
        store: StoreArgs,
    },
}

impl EffectsCommand {
    /// The store and output options of this subcommand.
    pub fn store_args(&self) -> &StoreArgs {
        match self {
            EffectsCommand::List { store, .. }
            | EffectsCommand::Show { store, .. }
            | EffectsCommand::Reconcile { store, .. }
            | EffectsCommand::Resend { store, .. } => store,
        }
    }
}

/// `purra catalog`.
#[derive(Debug, Subcommand)]
pub enum CatalogCommand {
    /// The pending catalog changes, the newest first (with --all, the decided ones too).
    Changes {
        /// The decided changes too.
        #[arg(long)]
        all: bool,
        /// The store and output options.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// One change's difference, field by field, as a unified diff of the pinned and the listed
    /// definition (without ID: every pending change's).
    Diff {
        /// The change's id (as `purra catalog changes` lists it).
        id: Option<u64>,
        /// The store and output options.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Approve a pending change: the tool is re-pinned to what the upstream lists, and every
    /// gateway on the store serves it within a second or so; a write's approvals prepared under
    /// the old definition are refused. A removal approved is acknowledged: the tool stays
    /// withheld while a binding names it.
    Approve {
        /// The change's id.
        id: u64,
        /// Who decides (recorded with the change and the new pin).
        #[arg(long, value_name = "NAME", default_value = "operator")]
        by: String,
        /// A note recorded with the decision.
        #[arg(long, value_name = "TEXT")]
        note: Option<String>,
        /// The store and output options.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Deny a pending change: the pin stays and the tool stays withheld while the upstream
    /// lists the difference.
    Deny {
        /// The change's id.
        id: u64,
        /// Who decides.
        #[arg(long, value_name = "NAME", default_value = "operator")]
        by: String,
        /// A note recorded with the decision.
        #[arg(long, value_name = "TEXT")]
        note: Option<String>,
        /// The store and output options.
        #[command(flatten)]
        store: StoreArgs,
    },
}

impl CatalogCommand {
    /// The store and output options of this subcommand.
    pub fn store_args(&self) -> &StoreArgs {
        match self {
            CatalogCommand::Changes { store, .. }
            | CatalogCommand::Diff { store, .. }
            | CatalogCommand::Approve { store, .. }
            | CatalogCommand::Deny { store, .. } => store,
        }
    }
}

/// `purra runs`.
#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// Every run the store knows of: suspended (waiting for an approval) or finished.
    List {
        /// The store and output options.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// One run: its state, its pending call, its approvals and their effects.
    Show {
        /// The run id, e.g. demo.
        id: String,
        /// The store and output options.
        #[command(flatten)]
        store: StoreArgs,
    },
}

/// `purra webhooks`.
#[derive(Debug, Subcommand)]
pub enum WebhooksCommand {
    /// The deliveries not made yet, the oldest first: pending (waiting for an attempt or a
    /// retry) and failed (given up, kept), with their attempts and last failure.
    List {
        /// Only the failed ones.
        #[arg(long)]
        failed: bool,
        /// Only this endpoint's.
        #[arg(long, value_name = "NAME")]
        endpoint: Option<String>,
        /// At most this many (1 to 1000).
        #[arg(long, value_name = "N", default_value_t = 50,
              value_parser = clap::value_parser!(u32).range(1..=1000))]
        limit: u32,
        /// The store and output options.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Make every failed delivery (of one endpoint, with --endpoint) pending and due now: the
    /// gateway sends each again, under its own webhook-id.
    Retry {
        /// Only this endpoint's.
        #[arg(long, value_name = "NAME")]
        endpoint: Option<String>,
        /// The store and output options.
        #[command(flatten)]
        store: StoreArgs,
    },
}

/// The credential keys: `--keys FILE`, else the `PURRA_CREDENTIAL_KEYS` variable.
#[derive(Debug, Args)]
pub struct KeysArgs {
    /// The credential key file: one `id:base64key` (32 bytes, standard base64) a line, the
    /// current key first. Without it: the PURRA_CREDENTIAL_KEYS variable, in the same format.
    #[arg(long, value_name = "FILE")]
    pub keys: Option<std::path::PathBuf>,
}

/// `purra grants`.
#[derive(Debug, Subcommand)]
pub enum GrantsCommand {
    /// Grant a principal's calls of one write tool (the gateway's local name), under argument
    /// rules, at most N times, until a time: such a call is approved by the grant and sent
    /// without waiting.
    Add {
        /// The principal whose calls it covers (as the gateway names callers).
        #[arg(long, value_name = "P")]
        principal: String,
        /// The write tool (the gateway's local name).
        #[arg(long, value_name = "T")]
        tool: String,
        /// An argument rule every covered call satisfies, in the gateway's grammar, such as
        /// 'path within "/srv/notes"' (repeatable; all must hold).
        #[arg(long = "rule", value_name = "RULE")]
        rules: Vec<String>,
        /// At most this many uses (1 to 10000).
        #[arg(long, value_name = "N",
              value_parser = clap::value_parser!(u32).range(1..=10_000))]
        uses: u32,
        /// Until when: an RFC 3339 time (2026-12-07T18:00:00Z) or a duration from now (8h,
        /// 30m).
        #[arg(long, value_name = "TIME|DURATION")]
        until: String,
        /// Who grants (recorded with the grant and as the approver of each use).
        #[arg(long, value_name = "NAME", default_value = "operator")]
        by: String,
        /// A note kept with the grant and each approval it makes.
        #[arg(long, value_name = "TEXT")]
        note: Option<String>,
        /// The store and output options.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// The grants in the store, the newest first, with their uses left and status.
    List {
        /// The store and output options.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// One grant with every use (the approval each use approved).
    Show {
        /// The grant id, e.g. grant-1.
        id: String,
        /// The store and output options.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Revoke a grant: no call uses it after this.
    Revoke {
        /// The grant id, e.g. grant-1.
        id: String,
        /// Who revokes (recorded with the path: `NAME (cli)`).
        #[arg(long, value_name = "NAME", default_value = "operator")]
        by: String,
        /// The store and output options.
        #[command(flatten)]
        store: StoreArgs,
    },
}

impl GrantsCommand {
    /// The store and output options of this subcommand.
    pub fn store_args(&self) -> &StoreArgs {
        match self {
            GrantsCommand::Add { store, .. }
            | GrantsCommand::List { store }
            | GrantsCommand::Show { store, .. }
            | GrantsCommand::Revoke { store, .. } => store,
        }
    }
}

/// `purra credentials`.
#[derive(Debug, Subcommand)]
pub enum CredentialsCommand {
    /// The credentials in the store (principal, upstream, name, kind, subject, expiry, when
    /// updated), never a secret.
    List {
        /// Only this principal's.
        #[arg(long, value_name = "P")]
        principal: Option<String>,
        /// Only this upstream's.
        #[arg(long, value_name = "U")]
        upstream: Option<String>,
        /// The store and output options.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Store a secret for a principal at an upstream (as the upstream's `env_from_credential`
    /// names it), read from standard input (never from the command line; one trailing newline
    /// is dropped), sealed under the current key.
    Set {
        /// The principal the secret belongs to.
        #[arg(long, value_name = "P")]
        principal: String,
        /// The upstream it is for.
        #[arg(long, value_name = "U")]
        upstream: String,
        /// The secret's name under that principal and upstream.
        name: String,
        /// The credential keys.
        #[command(flatten)]
        keys: KeysArgs,
        /// The store and output options.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Delete a principal's credential at an upstream (all of them there without NAME); an
    /// OAuth connection is revoked at its authorization server too (RFC 7009) when it offers
    /// that and the keys open it.
    Revoke {
        /// The principal.
        #[arg(long, value_name = "P")]
        principal: String,
        /// The upstream.
        #[arg(long, value_name = "U")]
        upstream: String,
        /// Only this one.
        name: Option<String>,
        /// The credential keys (to open an OAuth connection and revoke it at its server).
        #[command(flatten)]
        keys: KeysArgs,
        /// The store and output options.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Re-seal every credential under the current key (the first line of the keys), so the
    /// older keys can then be removed.
    Rotate {
        /// The credential keys.
        #[command(flatten)]
        keys: KeysArgs,
        /// The store and output options.
        #[command(flatten)]
        store: StoreArgs,
    },
}

impl CredentialsCommand {
    /// The store and output options of this subcommand.
    pub fn store_args(&self) -> &StoreArgs {
        match self {
            CredentialsCommand::List { store, .. }
            | CredentialsCommand::Set { store, .. }
            | CredentialsCommand::Revoke { store, .. }
            | CredentialsCommand::Rotate { store, .. } => store,
        }
    }
}

impl WebhooksCommand {
    /// The store and output options of this subcommand.
    pub fn store_args(&self) -> &StoreArgs {
        match self {
            WebhooksCommand::List { store, .. } | WebhooksCommand::Retry { store, .. } => store,
        }
    }
}

/// `purra demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// The store: a SQLite file (created if missing) or a `postgres://` URL.
    #[arg(long, value_name = "PATH|URL", default_value = "purra.db")]
    pub db: String,
    /// Stop at the pending approval and exit, leaving it for `purra approvals`.
    #[arg(long, conflicts_with = "interactive")]
    pub no_approve: bool,
    /// Wait for the approval to be decided elsewhere (`purra approvals approve ID`) instead of
    /// approving it.
    #[arg(long)]
    pub interactive: bool,
}

/// Options every client subcommand takes.
#[derive(Debug, Args)]
pub struct ConnectArgs {
    /// Print one JSON document on stdout instead of readable output.
    #[arg(long)]
    pub json: bool,
    /// Request timeout in seconds; progress notifications restart it (up to `call --max-time`).
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    pub timeout: f64,
    /// An HTTP header for a URL target, `Name: value` (repeatable), e.g. an Authorization header.
    #[arg(short = 'H', long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
    /// The protocol revision: `auto` (the default: 2026-07-28 when the server answers
    /// `server/discover`, else the handshake at 2025-11-25), a handshake revision (2024-11-05,
    /// 2025-03-26, 2025-06-18, 2025-11-25: the handshake only, asking for it) or 2026-07-28 (that
    /// revision only, no fallback).
    #[arg(long, value_name = "VERSION", default_value = "auto")]
    pub protocol_version: String,
    /// Ask the server to send log messages at this level and above (logging/setLevel).
    #[arg(long, value_name = "LEVEL")]
    pub log_level: Option<LogLevel>,
    /// The HTTP transport for an http(s) URL: `auto` (Streamable HTTP, falling back to the
    /// HTTP+SSE transport of 2024-11-05 when the server answers its POST with a 4xx as an
    /// HTTP+SSE server does), `streamable-http`, or `sse` (the URL is the event stream's).
    #[arg(long, value_name = "TRANSPORT", default_value = "auto")]
    pub transport: HttpTransportArg,
    /// The token file `purra login` wrote (default: $PURRA_TOKENS, else
    /// $XDG_CONFIG_HOME/purra/tokens.json, else ~/.config/purra/tokens.json).
    #[arg(long, value_name = "PATH")]
    pub tokens: Option<std::path::PathBuf>,
}

/// `purra login`.
#[derive(Debug, Args)]
pub struct LoginArgs {
    /// The server's Streamable HTTP URL.
    #[arg(value_name = "URL")]
    pub url: String,
    /// A client id registered with the authorization server (else a Client ID Metadata
    /// Document URL or dynamic registration).
    #[arg(long, value_name = "ID")]
    pub client_id: Option<String>,
    /// The secret of a confidential pre-registered client (needs --authorization-server: the
    /// secret goes only to the server it was issued by).
    #[arg(long, value_name = "SECRET", requires = "authorization_server")]
    pub client_secret: Option<String>,
    /// The authorization server (its issuer URL) the client id and secret were issued by:
    /// purra authorizes only there, whatever server the MCP server names.
    #[arg(long, value_name = "URL")]
    pub authorization_server: Option<String>,
    /// Follow authorization servers and metadata on this machine (localhost, 127.0.0.0/8,
    /// ::1), over plain http too: for development. Without it, only https URLs with public
    /// addresses are followed.
    #[arg(long)]
    pub allow_loopback: bool,
    /// Follow authorization servers and metadata at private addresses (10.0.0.0/8,
    /// 172.16.0.0/12, 192.168.0.0/16, fc00::/7, ...): an authorization server inside a private
    /// network. Link-local addresses are never followed.
    #[arg(long)]
    pub allow_private_addresses: bool,
    /// A Client ID Metadata Document URL (https) that identifies purra as the client.
    #[arg(long, value_name = "URL")]
    pub client_metadata_url: Option<String>,
    /// The scopes to ask for (repeatable; default: what the server names).
    #[arg(long = "scope", value_name = "SCOPE")]
    pub scopes: Vec<String>,
    /// The loopback address the redirect comes back to (port 0 picks a free port).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub redirect: String,
    /// The token file (see `purra inspect --help`).
    #[arg(long, value_name = "PATH")]
    pub tokens: Option<std::path::PathBuf>,
}

/// `purra logout`.
#[derive(Debug, Args)]
pub struct LogoutArgs {
    /// The server's Streamable HTTP URL.
    #[arg(value_name = "URL")]
    pub url: String,
    /// The token file (see `purra inspect --help`).
    #[arg(long, value_name = "PATH")]
    pub tokens: Option<std::path::PathBuf>,
}

/// `purra inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// Show each tool's input and output schema.
    #[arg(long)]
    pub schemas: bool,
    /// Connection and output options.
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// The server URL (omit it when a command follows `--`).
    #[arg(value_name = "URL")]
    pub target: Option<String>,
    /// The stdio server command and its arguments.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// `purra call`.
#[derive(Debug, Args)]
pub struct CallArgs {
    /// Tool arguments as a JSON object; KEY=VALUE pairs set keys on top of it.
    #[arg(long = "args", value_name = "JSON")]
    pub args_json: Option<String>,
    /// The most seconds the call may take in all: progress restarts --timeout, never this.
    #[arg(long, value_name = "SECS", default_value_t = 600.0)]
    pub max_time: f64,
    /// Run the call as a task (2025-11-25 tasks), with its status on stderr; a tool whose
    /// taskSupport is required always runs as one.
    #[arg(long)]
    pub task: bool,
    /// Connection and output options.
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// The positional words: an optional URL, the tool, then its KEY=VALUE arguments.
    #[arg(
        value_name = "ARGS",
        required = true,
        help = "[URL] TOOL [KEY=VALUE]..."
    )]
    pub positional: Vec<String>,
    /// The stdio server command and its arguments.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// `purra tasks`.
#[derive(Debug, Subcommand)]
pub enum TasksCommand {
    /// List this client's tasks on the server.
    #[command(override_usage = "purra tasks list [OPTIONS] <URL>\n       \
                                purra tasks list [OPTIONS] -- <COMMAND> [ARGS]...")]
    List(TasksArgs),
    /// Show one task.
    #[command(override_usage = "purra tasks get [OPTIONS] <URL> <TASK_ID>\n       \
                                purra tasks get [OPTIONS] <TASK_ID> -- <COMMAND> [ARGS]...")]
    Get(TasksArgs),
    /// Cancel one task.
    #[command(
        override_usage = "purra tasks cancel [OPTIONS] <URL> <TASK_ID>\n       \
                                purra tasks cancel [OPTIONS] <TASK_ID> -- <COMMAND> [ARGS]..."
    )]
    Cancel(TasksArgs),
}

impl TasksCommand {
    /// The arguments, whichever the subcommand.
    pub fn args(&self) -> &TasksArgs {
        match self {
            TasksCommand::List(a) | TasksCommand::Get(a) | TasksCommand::Cancel(a) => a,
        }
    }
}

/// `purra tasks list|get|cancel`.
#[derive(Debug, Args)]
pub struct TasksArgs {
    /// Connection and output options.
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// The positional words: an optional URL, then the task id (get, cancel).
    #[arg(value_name = "ARGS", help = "[URL] [TASK_ID]")]
    pub positional: Vec<String>,
    /// The stdio server command and its arguments.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// `purra read`.
#[derive(Debug, Args)]
pub struct ReadArgs {
    /// Connection and output options.
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// The positional words: an optional URL, then the resource URI.
    #[arg(value_name = "ARGS", required = true, help = "[URL] URI")]
    pub positional: Vec<String>,
    /// Write the resource's contents to FILE as they are (text, or a blob decoded) instead of
    /// printing them: an MCP App's HTML (`ui://...`), an image. One content only.
    #[arg(long, value_name = "FILE")]
    pub save: Option<std::path::PathBuf>,
    /// The stdio server command and its arguments.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// `purra prompt`.
#[derive(Debug, Args)]
pub struct PromptArgs {
    /// Connection and output options.
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// The positional words: an optional URL, the prompt name, then its KEY=VALUE arguments.
    #[arg(
        value_name = "ARGS",
        required = true,
        help = "[URL] NAME [KEY=VALUE]..."
    )]
    pub positional: Vec<String>,
    /// The stdio server command and its arguments.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// `purra serve-example`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Serve over stdin/stdout (the default).
    #[arg(long, conflicts_with_all = ["http", "ws"])]
    pub stdio: bool,
    /// Serve Streamable HTTP at http://ADDR/mcp (e.g. 127.0.0.1:3000; port 0 picks a free
    /// port). Prints `listening on <url>` to stderr; stops on SIGINT or SIGTERM.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<String>,
    /// Serve WebSocket at ws://ADDR. Prints `listening on <url>` to stderr; stops on SIGINT or
    /// SIGTERM.
    #[arg(long, value_name = "ADDR", conflicts_with = "http")]
    pub ws: Option<String>,
    /// Require OAuth access tokens from this authorization server (its issuer URL: https, or
    /// plain http on a loopback host) on the HTTP endpoint: JWT access tokens (typ at+jwt)
    /// checked against its JWKS, for the resource http://ADDR/mcp; serves the protected
    /// resource metadata. Needs --http.
    #[arg(long, value_name = "URL", requires = "http")]
    pub auth_issuer: Option<String>,
    /// A scope every request needs (repeatable; with --auth-issuer).
    #[arg(long = "auth-scope", value_name = "SCOPE", requires = "auth_issuer")]
    pub auth_scopes: Vec<String>,
}

/// An HTTP transport for `--transport`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HttpTransportArg {
    /// Streamable HTTP, falling back to HTTP+SSE.
    Auto,
    /// Streamable HTTP only.
    StreamableHttp,
    /// HTTP+SSE (2024-11-05) only.
    Sse,
}

impl From<HttpTransportArg> for purra_protocol::http::HttpTransport {
    fn from(t: HttpTransportArg) -> Self {
        match t {
            HttpTransportArg::Auto => purra_protocol::http::HttpTransport::Auto,
            HttpTransportArg::StreamableHttp => purra_protocol::http::HttpTransport::Streamable,
            HttpTransportArg::Sse => purra_protocol::http::HttpTransport::Sse,
        }
    }
}

/// A log level for `--log-level`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogLevel {
    /// Debugging detail (RFC 5424).
    Debug,
    /// Informational messages (RFC 5424).
    Info,
    /// Normal but significant events (RFC 5424).
    Notice,
    /// Warning conditions (RFC 5424).
    Warning,
    /// Error conditions (RFC 5424).
    Error,
    /// Critical conditions (RFC 5424).
    Critical,
    /// Action must be taken immediately (RFC 5424).
    Alert,
    /// The system is unusable (RFC 5424).
    Emergency,
}

impl From<LogLevel> for LoggingLevel {
    fn from(l: LogLevel) -> Self {
        match l {
            LogLevel::Debug => LoggingLevel::Debug,
            LogLevel::Info => LoggingLevel::Info,
            LogLevel::Notice => LoggingLevel::Notice,
            LogLevel::Warning => LoggingLevel::Warning,
            LogLevel::Error => LoggingLevel::Error,
            LogLevel::Critical => LoggingLevel::Critical,
            LogLevel::Alert => LoggingLevel::Alert,
            LogLevel::Emergency => LoggingLevel::Emergency,
        }
    }
}

impl ApprovalsCommand {
    /// The store and output options of this subcommand.
    pub fn store_args(&self) -> &StoreArgs {
        match self {
            ApprovalsCommand::List { store, .. }
            | ApprovalsCommand::Show { store, .. }
            | ApprovalsCommand::Approve { store, .. }
            | ApprovalsCommand::Deny { store, .. }
            | ApprovalsCommand::Serve { store, .. } => store,
        }
    }
}

impl RunsCommand {
    /// The store and output options of this subcommand.
    pub fn store_args(&self) -> &StoreArgs {
        match self {
            RunsCommand::List { store } | RunsCommand::Show { store, .. } => store,
        }
    }
}
