//! The approver page as the CLI serves it (`purra approvals serve`, `purra gateway --page`): binds
//! the address, prints where it serves and each approver's sign-in token on stderr, and serves
//! until interrupted. With an OpenID Connect provider (flags, or the gateway file's `[page.oidc]`),
//! the provider is discovered before anything is served, and the callback URL is printed too.
//! With `--page-secure-cookie` (or `[page] secure_cookie = true`) the cookies are `Secure` and
//! that is printed. Both commands serve through `Page::serve`: the MCP endpoint's accept loop and
//! connection limits. Webhook events link to an approval on the page (`/approvals/ID`) under the
//! file's `[page] url`, else under the address the page serves on.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use purra_core::OperatorStore;
use purra_gateway::{ConfigSource, PageSettings};
use purra_page::{AllowList, Decide, HostPolicy, OidcConfig, OidcLogin, Page, PageConfig};

use crate::cli::PageArgs;
use crate::exit::Failure;
use crate::telemetry::say;

/// A page bound to its address, ready to serve.
pub struct Bound {
    page: Page,
    listener: tokio::net::TcpListener,
    url: String,
}

/// The gateway file's `[page]` table and where its keys are.
pub struct FilePage<'a> {
    /// The table.
    pub page: &'a PageSettings,
    /// The file's keys and lines, for mistakes found now (an unreadable secret file).
    pub source: &'a ConfigSource,
    /// The connect flow of the gateway's upstreams called with each principal's OAuth
    /// connection (`/connect/ID`), when there are any.
    pub connections: Option<Arc<purra_page::connect::Connections>>,
    /// The file's approver groups (`[approvers.groups]`).
    pub groups: std::collections::BTreeMap<String, Vec<String>>,
}

/// The longest client secret file read.
const MAX_SECRET_BYTES: u64 = 4096;

/// The client secret in `file` (its first line) or in the environment variable `env`.
fn secret(file: Option<&Path>, env: Option<&str>) -> Result<Option<String>, String> {
    use std::io::Read;
    let text = match (file, env) {
        (Some(f), _) => {
            let mut text = String::new();
            std::fs::File::open(f)
                .and_then(|h| h.take(MAX_SECRET_BYTES + 1).read_to_string(&mut text))
                .map_err(|e| format!("cannot read the client secret file {}: {e}", f.display()))?;
            if text.len() as u64 > MAX_SECRET_BYTES {
                return Err(format!(
                    "the client secret file {} is over {MAX_SECRET_BYTES} bytes",
                    f.display()
                ));
            }
            text
        }
        (None, Some(var)) => std::env::var(var)
            .map_err(|_| format!("the environment variable {var} holds no client secret"))?,
        (None, None) => return Ok(None),
    };
    let line = text.lines().next().unwrap_or("").trim().to_owned();
    if line.is_empty() {
        return Err("the client secret is empty".into());
    }
    Ok(Some(line))
}

/// The OpenID Connect sign-in of the flags or of the file's `[page.oidc]` (not both), and
/// whether token sign-in stays on.
fn oidc(
    args: &PageArgs,
    file: Option<&FilePage<'_>>,
) -> Result<(Option<OidcLogin>, bool), Failure> {
    let flagged = args.oidc_client_id.is_some()
        || args.oidc_secret_file.is_some()
        || args.oidc_secret_env.is_some()
        || args.oidc_redirect_uri.is_some()
        || !args.oidc_scopes.is_empty()
        || args.oidc_label.is_some()
        || !args.allow_subjects.is_empty()
        || !args.allow_emails.is_empty()
        || args.require_claim.is_some();
    let token_login = !args.no_token_login && file.is_none_or(|f| f.page.token_login);
    let from_file = file.and_then(|f| f.page.oidc.as_ref().map(|o| (o, f.source)));
    let Some(issuer) = &args.oidc_issuer else {
        if flagged {
            return Err(Failure::Usage(
                "the --page-oidc-* and --page-allow-* options need --page-oidc-issuer".into(),
            ));
        }
        let Some((o, source)) = from_file else {
            return Ok((None, token_login));
        };
        let secret = secret(
            o.client_secret_file.as_deref(),
            o.client_secret_env.as_deref(),
        )
        .map_err(|why| {
            let key = if o.client_secret_file.is_some() {
                "page.oidc.client_secret_file"
            } else {
                "page.oidc.client_secret_env"
            };
            Failure::Config(source.error(key, why).to_string())
        })?;
        let mut allow = AllowList::default();
        allow.subjects.clone_from(&o.allow_subjects);
        allow.emails.clone_from(&o.allow_emails);
        allow.claim = o.required_claim().and_then(Result::ok);
        let login = login(
            issuer_config(&o.issuer, &o.client_id, secret, o.scopes.clone()),
            allow,
            o.label.clone(),
            o.redirect_uri.clone(),
        );
        return Ok((Some(login), token_login));
    };
    if from_file.is_some() {
        return Err(Failure::Usage(
            "OpenID Connect sign-in is configured in the file's [page.oidc]; \
             drop --page-oidc-issuer or that table"
                .into(),
        ));
    }
    let Some(client_id) = &args.oidc_client_id else {
        return Err(Failure::Usage(
            "--page-oidc-issuer needs --page-oidc-client-id".into(),
        ));
    };
    if args.oidc_secret_file.is_some() && args.oidc_secret_env.is_some() {
        return Err(Failure::Usage(
            "name the client secret's file or its environment variable, not both".into(),
        ));
    }
    let secret = secret(
        args.oidc_secret_file.as_deref(),
        args.oidc_secret_env.as_deref(),
    )
    .map_err(Failure::Config)?;
    let mut allow = AllowList::default();
    allow.subjects.clone_from(&args.allow_subjects);
    allow.emails.clone_from(&args.allow_emails);
    if let Some(c) = &args.require_claim {
        let (name, value) = purra_gateway::parse_claim(c)
            .map_err(|why| Failure::Usage(format!("--page-require-claim: {why}")))?;
        allow = allow.require_claim(name, value);
    }
    let scopes = (!args.oidc_scopes.is_empty()).then(|| args.oidc_scopes.clone());
    let login = login(
        issuer_config(issuer, client_id, secret, scopes),
        allow,
        args.oidc_label.clone(),
        args.oidc_redirect_uri.clone(),
    );
    Ok((Some(login), token_login))
}

fn issuer_config(
    issuer: &str,
    client_id: &str,
    secret: Option<String>,
    scopes: Option<Vec<String>>,
) -> OidcConfig {
    let mut c = OidcConfig::new(issuer, client_id);
    if let Some(s) = secret {
        c = c.client_secret(s);
    }
    if let Some(s) = scopes {
        c = c.scopes(s);
    }
    c
}

fn login(
    provider: OidcConfig,
    allow: AllowList,
    label: Option<String>,
    redirect_uri: Option<String>,
) -> OidcLogin {
    let mut login = OidcLogin::new(provider, allow);
    if let Some(l) = label {
        login = login.label(l);
    }
    if let Some(r) = redirect_uri {
        login = login.redirect_uri(r);
    }
    login
}

/// Builds the page over `store` (deciding with `decide` when given), binds `addr` and prints, on
/// stderr prefixed `prefix`, the URL, the OpenID Connect callback when a provider is configured
/// (after discovering it: a provider that cannot be used stops the start), and one sign-in token
/// per approver.
pub async fn bind(
    store: Arc<dyn OperatorStore>,
    catalog: Option<Arc<dyn purra_core::CatalogPins>>,
    decide: Option<Decide>,
    addr: SocketAddr,
    args: &PageArgs,
    file: Option<FilePage<'_>>,
    prefix: &str,
) -> Result<Bound, Failure> {
    let mut policy = HostPolicy::loopback();
    for host in &args.allow_hosts {
        policy = policy.allow_host(host);
    }
    let (mut oidc, token_login) = oidc(args, file.as_ref())?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Failure::Config(format!("cannot listen on {addr}: {e}")))?;
    let local = listener.local_addr().map_err(|e| {
        Failure::protocol("serving", purra_protocol::Error::Transport(e.to_string()))
    })?;
    if let Some(o) = oidc.as_mut().filter(|o| o.redirect_uri.is_none()) {
        if local.ip().is_unspecified() {
            return Err(Failure::Config(format!(
                "the page listens on {local}, every address: name its OpenID Connect callback URL \
                 (--page-oidc-redirect-uri or [page.oidc] redirect_uri)"
            )));
        }
        o.redirect_uri = Some(format!("http://{local}/login/callback"));
    }
    let secure_cookie = args.secure_cookie || file.as_ref().is_some_and(|f| f.page.secure_cookie);
    // The page's connection limits are the MCP endpoint's (`PageConfig::default()`'s are
    // `ConnectionLimits::default()`, as `HttpServerConfig::default()`'s), on the same accept loop.
    let mut config = PageConfig::default()
        .host_policy(policy)
        .approval_ttl(Duration::from_secs(args.approval_ttl))
        .token_login(token_login)
        .secure_cookie(secure_cookie);
    if let Some(o) = oidc {
        config = config.oidc(o);
    }
    if let Some(c) = file.as_ref().and_then(|f| f.connections.clone()) {
        config = config.oauth(c);
    }
    if let Some(f) = file.as_ref() {
        config = config.groups(f.groups.clone());
        if let Some(claim) = f.page.oidc.as_ref().and_then(|o| o.groups_claim.clone()) {
            config = config.groups_claim(claim);
        }
    }
    config.check().map_err(Failure::Config)?;
    let config_secure = config.secure();
    for a in &args.approvers {
        config = config.approver(a.clone());
    }
    let mut page = match decide {
        Some(d) => Page::with_decide(store, config, d),
        None => Page::new(store, config),
    };
    if let Some(pins) = catalog {
        page = page.with_catalog(pins);
    }
    page.discover()
        .await
        .map_err(|e| Failure::Config(format!("the OpenID Connect provider cannot be used: {e}")))?;
    say(prefix, &format!("approver page at http://{local}/"));
    if config_secure {
        say(
            prefix,
            "the page's cookies are Secure (__Host-purra_page_session): browsers must reach it \
             over https",
        );
    }
    if let Some(uri) = page.redirect_uri() {
        say(prefix, &format!("OpenID Connect sign-in, callback {uri}"));
    }
    // JSON lines go to log stores: a sign-in token is written there only at -vv.
    let json = crate::telemetry::format() == crate::telemetry::LogFormat::Json;
    for (approver, token) in page.tokens() {
        if json && crate::telemetry::verbose() < 2 {
            say(
                prefix,
                &format!(
                    "the sign-in token of {approver} is not written: JSON lines carry no token below -vv"
                ),
            );
        } else {
            say(prefix, &format!("sign-in token for {approver}: {token}"));
        }
    }
    Ok(Bound {
        page,
        listener,
        url: format!("http://{local}"),
    })
}

/// The page's resend of unknown effects: the gateway's `resend` with the configuration `file`
/// as it reads now (a reload's bindings count), over `store`.
pub fn resend_through(
    file: std::path::PathBuf,
    store: Arc<dyn OperatorStore>,
) -> purra_page::Resend {
    Arc::new(move |key, by| {
        let (file, store) = (file.clone(), store.clone());
        Box::pin(async move {
            let loaded = purra_gateway::load(&file).map_err(|e| {
                format!(
                    "refused, nothing sent: {} has mistakes: {e}",
                    file.display()
                )
            })?;
            match purra_gateway::resend(&loaded.config, store.as_ref(), key.clone(), &by).await {
                Ok(r) => Ok(match r.outcome {
                    purra_core::EffectOutcome::Committed { .. } => format!(
                        "{} resent under the same key: committed, the receipt is recorded",
                        key.0
                    ),
                    purra_core::EffectOutcome::Unknown { reason } => {
                        format!(
                            "{} resent under the same key: still unknown ({reason})",
                            key.0
                        )
                    }
                    purra_core::EffectOutcome::NotStarted => format!(
                        "{} was not resent ({}): nothing left",
                        key.0,
                        r.not_sent.as_ref().map_or("-", |c| c.as_str())
                    ),
                }),
                Err(e) => Err(format!("{}: {e}", key.0)),
            }
        })
    })
}

impl Bound {
    /// Lets the page's queue of unknown effects resend through `resend`.
    pub fn set_resend(&self, resend: purra_page::Resend) {
        self.page.set_resend(resend);
    }

    /// Lets approvers approve with edited arguments through `edit` (the gateway's).
    pub fn set_edit(&self, edit: purra_page::Edit) {
        self.page.set_edit(edit);
    }

    /// Lets the page list and revoke the store's standing grants.
    pub fn set_grants(&self, grants: Arc<dyn purra_core::GrantStore>) {
        self.page.set_grants(grants);
    }

    /// Where the page serves (`http://ADDR`, no trailing slash).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Serves until `shutdown` completes.
    pub async fn serve(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<(), Failure> {
        self.page.serve(self.listener, shutdown).await.map_err(|e| {
            Failure::protocol("serving", purra_protocol::Error::Transport(e.to_string()))
        })
    }
}
