//! Configuration files: every mistake found at once, each with its exact message, line and key;
//! the file reader and plain serde read a correct file into the same configuration.

use std::time::Duration;

use purra_gateway::{
    load_str, ApprovalBy, ClaimType, ConfigError, Dur, EffectConfig, GatewayConfig, Listen,
    ScopeConfig, WebhookEventName, WebhookFormat,
};

const GOOD: &str = r#"
[gateway]
name = "notes_gw"
db = "notes.db"
listen = "127.0.0.1:8787"
principal = "ada"
approval_wait = "45s"
progress_interval = "2s"
elicitation = true
apps = true
approval_ttl = "5m"
approval_request_ttl = "2h"
run_decided_without_caller = true
lease = "20s"

[limits]
timeout = "10s"
max_result_bytes = 32768

[upstreams.notes]
command = ["python3", "notes.py", "--flag"]
env = { NOTES_MODE = "test" }

[upstreams.remote]
url = "http://127.0.0.1:9000/mcp"
headers = { Authorization = "Bearer x" }

[reads.get_note]
upstream = "notes"
title = "Read the note"
concurrency = "safe"
scope = "open"

[reads.search]
upstream = "remote"
tool = "remote.search"
title = "Search"
scope = { clients = ["claude-code"], arguments = ["len(query) <= 100"] }
tasks = true

[writes.set_note]
upstream = "notes"
title = "Replace the note"
effect = "write"
risk = "write"
binding_id = "notes"
binding_revision = "3"
scope_id = "notes-writers"
scope_revision = "7"
approval = "client"

[writes.set_note.scope]
principals = ["ada", "grace"]
arguments = ["len(text) <= 200", "text matches \"^[^<>]*$\""]
"#;

/// What an embedding host reads with serde alone, from the same types (no per-key messages).
fn serde_only(text: &str) -> Result<GatewayConfig, String> {
    toml::from_str(text).map_err(|e| e.to_string())
}

fn errors(text: &str) -> Vec<String> {
    load_str("g.toml", text)
        .expect_err("mistakes")
        .0
        .iter()
        .map(ConfigError::to_string)
        .collect()
}

#[test]
fn a_correct_file_reads_the_same_with_the_reader_and_with_serde() {
    let loaded = load_str("g.toml", GOOD).expect("no mistakes");
    let c = &loaded.config;
    assert_eq!(c.gateway.name, "notes_gw");
    assert_eq!(
        c.gateway.listen,
        Listen::Http("127.0.0.1:8787".parse().unwrap())
    );
    assert_eq!(c.gateway.approval_wait, Dur(Duration::from_secs(45)));
    assert_eq!(
        c.gateway.approval_request_ttl,
        Dur(Duration::from_secs(7200))
    );
    assert!(c.gateway.apps && c.gateway.elicitation);
    assert_eq!(c.limits.limits().timeout, Duration::from_secs(10));
    assert_eq!(c.limits.limits().max_result_bytes, 32768);
    assert_eq!(c.limits.limits().max_pages, 32);
    assert_eq!(c.reads["get_note"].scope, ScopeConfig::Open);
    assert!(c.reads["search"].tasks);
    assert!(!c.reads["get_note"].tasks);
    assert_eq!(c.writes["set_note"].effect, EffectConfig::Write);
    assert_eq!(c.writes["set_note"].approval, ApprovalBy::Client);
    assert_eq!(
        c.writes["set_note"].scope.principals,
        Some(vec!["ada".to_owned(), "grace".to_owned()])
    );
    assert_eq!(serde_only(GOOD).expect("serde"), *c);
    // And back: the configuration serializes to TOML that reads the same.
    let text = toml::to_string(c).expect("serialize");
    assert_eq!(load_str("again.toml", &text).expect("reads").config, *c);
    // Every key's line is known, to place mistakes found later (at start).
    assert_eq!(loaded.source.keys["writes.set_note.binding_revision"], 47);
    assert_eq!(loaded.source.keys["reads.search"], 34);
}

#[test]
fn an_empty_file_is_a_gateway_with_nothing_bound() {
    let c = load_str("g.toml", "").expect("empty is fine").config;
    assert_eq!(c, GatewayConfig::default());
    assert_eq!(c.gateway.listen, Listen::Stdio);
    assert_eq!(c.gateway.approval_wait, Dur(Duration::from_secs(30)));
    assert_eq!(
        c.gateway.approval_request_ttl,
        Dur(Duration::from_secs(24 * 3600))
    );
}

#[test]
fn a_request_must_outlive_its_wait_and_expiries_are_bounded() {
    let text = r#"[gateway]
approval_wait = "2m"
approval_ttl = "9000h"
approval_request_ttl = "1m"
"#;
    assert_eq!(
        errors(text),
        [
            "g.toml:3: gateway.approval_ttl: must be at most 8760h (a year)",
            "g.toml:4: gateway.approval_request_ttl: must be at least approval_wait (2m): a request must outlive the wait for it",
        ]
    );
    let text = r#"[gateway]
approval_request_ttl = "8761h"
"#;
    assert_eq!(
        errors(text),
        ["g.toml:2: gateway.approval_request_ttl: must be at most 8760h (a year)"]
    );
    // The bounds themselves are fine.
    let c = load_str(
        "g.toml",
        "[gateway]\napproval_wait = \"2m\"\napproval_request_ttl = \"2m\"\napproval_ttl = \"8760h\"\n",
    )
    .expect("at the bounds")
    .config;
    assert_eq!(
        c.gateway.approval_request_ttl,
        Dur(Duration::from_secs(120))
    );
}

#[test]
fn wrong_types_and_values_are_each_reported_with_their_line() {
    let text = r#"[gateway]
name = 7
listen = "everywhere"
approval_wait = "30"
elicitation = "yes"

[limits]
max_pages = 1000

[upstreams.notes]
command = "python3 notes.py"

[reads.get_note]
upstream = "notes"
title = "Read"
concurrency = "sometimes"
scope = "closed"
tasks = "yes"
"#;
    assert_eq!(
        errors(text),
        [
            "g.toml:2: gateway.name: expected a string, found integer 7",
            "g.toml:3: gateway.listen: expected \"stdio\" or an address such as \"127.0.0.1:8787\" or \"localhost:8787\", found \"everywhere\"",
            "g.toml:4: gateway.approval_wait: expected a duration with a unit ms, s, m or h (such as \"30s\"), found \"30\"",
            "g.toml:5: gateway.elicitation: expected a boolean, found \"yes\"",
            "g.toml:11: upstreams.notes.command: expected an array, found \"python3 notes.py\"",
            "g.toml:16: reads.get_note.concurrency: expected \"safe\" or \"exclusive\", found \"sometimes\"",
            "g.toml:17: reads.get_note.scope: expected \"open\" or a table, found \"closed\"",
            "g.toml:18: reads.get_note.tasks: expected a boolean, found \"yes\"",
        ]
    );
}

#[test]
fn semantic_mistakes_name_their_keys() {
    let text = r#"[gateway]
name = "Notes Gateway"
approval_wait = "5ms"

[limits]
max_pages = 1000

[upstreams.notes]
command = ["python3"]
url = "http://127.0.0.1:1/mcp"

[upstreams.other]

[reads.get_note]
upstream = "nowhere"
title = ""
scope = { clients = [] }

[writes.get_note]
upstream = "notes"
tool = "get_note"
title = "Write"
effect = "destructive"
risk = "write"
binding_id = " "
binding_revision = "1"
scope_id = "s"
scope_revision = "1"
scope = { arguments = ["text == 1"] }
"#;
    assert_eq!(
        errors(text),
        [
            "g.toml:2: gateway.name: must match ^[a-z][a-z0-9_]{0,63}$",
            "g.toml:3: gateway.approval_wait: must be at least 10ms",
            "g.toml:5: limits: each limit must be at least 1 and at most its default, the timeout at most 300s",
            "g.toml:8: upstreams.notes: give either command or url, not both",
            "g.toml:12: upstreams.other: needs a command or a url",
            "g.toml:15: reads.get_note.upstream: no upstream \"nowhere\" is configured",
            "g.toml:16: reads.get_note.title: must not be empty",
            "g.toml:17: reads.get_note.scope.clients: an empty list allows no caller; leave it out to allow any",
            "g.toml:19: writes.get_note: the local name \"get_note\" is also a read binding",
            "g.toml:24: writes.get_note.risk: the risk must match the effect (destructive)",
            "g.toml:25: writes.get_note.binding_id: must not be empty",
        ]
    );
}

#[test]
fn with_apps_on_no_binding_takes_the_approval_tools_name() {
    let text = r#"[gateway]
apps = true

[upstreams.notes]
command = ["python3", "notes.py"]

[reads.purra_approval]
upstream = "notes"
title = "Read"
scope = "open"
"#;
    assert_eq!(
        errors(text),
        ["g.toml:7: reads.purra_approval: the local name \"purra_approval\" is the gateway's own approval tool while gateway.apps is on"]
    );
    // Without apps the name is an ordinary local name.
    assert!(load_str("g.toml", &text.replace("apps = true", "apps = false")).is_ok());
}

#[test]
fn writes_cannot_opt_out_and_need_every_authorization_key() {
    let text = r#"[upstreams.notes]
command = ["python3", "notes.py"]

[writes.set_note]
upstream = "notes"
title = "Replace"
effect = "write"
scope = "open"
tasks = true
"#;
    assert_eq!(
        errors(text),
        [
            "g.toml:4: writes.set_note.binding_id: required: the host's binding identifier",
            "g.toml:4: writes.set_note.binding_revision: required: the binding's revision: change it whenever the authorization changes",
            "g.toml:4: writes.set_note.scope_id: required: the scope identifier",
            "g.toml:4: writes.set_note.scope_revision: required: the scope's revision: change it whenever the scope rules change",
            "g.toml:8: writes.set_note.scope: expected a table, found \"open\"",
            "g.toml:9: writes.set_note.tasks: unknown key (expected one of: allow_edit, approval, approver_max_age, binding_id, binding_revision, dispatch, effect, idempotent, receipt_ttl, risk, scope, scope_id, scope_revision, title, tool, upstream)",
        ]
    );
}

#[test]
fn a_read_without_scope_is_refused_authority_is_never_defaulted() {
    let text = r#"[upstreams.notes]
command = ["python3", "notes.py"]

[reads.get_note]
upstream = "notes"
title = "Read"
"#;
    assert_eq!(
        errors(text),
        ["g.toml:4: reads.get_note.scope: required: the scope: `\"open\"` or rules"]
    );
}

#[test]
fn invalid_toml_is_reported_with_its_line() {
    let errs = errors("[gateway]\nname = \"gw\"\nlisten = \n");
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].starts_with("g.toml:3: invalid TOML: "), "{errs:?}");
}

#[test]
fn the_page_sign_in_is_read_and_its_mistakes_named_with_their_lines() {
    let good = r#"[page]
token_login = false
secure_cookie = true

[page.oidc]
issuer = "https://id.example/realms/ops"
client_id = "purra-page"
client_secret_file = "page-secret.txt"
allow_subjects = ["alice"]
allow_emails = ["bob@example.com"]
require_claim = "groups=approvers"
label = "Example ID"
"#;
    let c = load_str("g.toml", good).expect("no mistakes").config;
    let o = c.page.oidc.as_ref().unwrap();
    assert!(!c.page.token_login);
    assert!(c.page.secure_cookie);
    assert_eq!(o.issuer, "https://id.example/realms/ops");
    assert_eq!(
        o.required_claim(),
        Some(Ok(("groups".to_owned(), "approvers".to_owned())))
    );
    assert_eq!(serde_only(good).expect("serde"), c);
    let text = toml::to_string(&c).expect("serialize");
    assert_eq!(load_str("again.toml", &text).expect("reads").config, c);

    let bad = r#"[page]
token_login = false

[page.oidc]
issuer = "id.example"
client_id = ""
client_secret_file = "s.txt"
client_secret_env = "PAGE_SECRET"
redirect_uri = "http://127.0.0.1:8470/callback"
require_claim = "groups"
client_secret = "inline"
"#;
    assert_eq!(
        errors(bad),
        [
            "g.toml:5: page.oidc.issuer: must be an http(s) URL",
            "g.toml:6: page.oidc.client_id: must not be empty",
            "g.toml:8: page.oidc.client_secret_env: name the secret's file or its environment variable, not both",
            "g.toml:9: page.oidc.redirect_uri: must be an http(s) URL whose path is /login/callback",
            "g.toml:10: page.oidc.require_claim: expected NAME=VALUE (e.g. groups=approvers), found \"groups\"",
            "g.toml:11: page.oidc.client_secret: unknown key (expected one of: allow_emails, allow_subjects, client_id, client_secret_env, client_secret_file, groups_claim, issuer, label, redirect_uri, require_claim, scopes)",
        ]
    );
    assert_eq!(
        errors("[page]\ntoken_login = false\n"),
        ["g.toml:2: page.token_login: token sign-in can be turned off only with [page.oidc]"]
    );
    // Finding 7: the page's cookies are `Secure` only when the file says so (or the flag).
    assert!(
        !load_str("g.toml", "[page]\n")
            .unwrap()
            .config
            .page
            .secure_cookie
    );
    assert_eq!(
        errors("[page]\n\nsecure_cookie = \"yes\"\n"),
        ["g.toml:3: page.secure_cookie: expected a boolean, found \"yes\""]
    );
    assert_eq!(
        errors("\n[page.oidc]\nissuer = \"https://id.example\"\nclient_id = \"x\"\n"),
        ["g.toml:2: page.oidc: needs an allow-list: allow_subjects, allow_emails or require_claim"]
    );
    assert_eq!(
        errors("[page.oidc]\nclient_id = \"x\"\nallow_subjects = [\"a\"]\n"),
        ["g.toml:1: page.oidc.issuer: required: the provider's issuer URL (its discovery document is read from it): https, or plain http on a loopback host"]
    );
}

/// The cap on a caller's approvals waiting at once (finding 5): 16 by default, read from the
/// file, and between 1 and 1000.
#[test]
fn the_pending_approvals_per_caller_are_bounded() {
    let c = load_str("g.toml", "").expect("empty").config;
    assert_eq!(c.gateway.max_pending_per_caller, 16);
    let c = load_str("g.toml", "[gateway]\nmax_pending_per_caller = 1000\n")
        .expect("at the bound")
        .config;
    assert_eq!(c.gateway.max_pending_per_caller, 1000);
    assert_eq!(
        serde_only("[gateway]\nmax_pending_per_caller = 1000\n").expect("serde"),
        c
    );
    for value in ["0", "1001"] {
        assert_eq!(
            errors(&format!("[gateway]\nmax_pending_per_caller = {value}\n")),
            ["g.toml:2: gateway.max_pending_per_caller: must be at least 1 and at most 1000"]
        );
    }
}

/// Finding 6 of issue 43: the introspection cache's settings are read by the file's reader and
/// by plain serde alike, absent by default, and a concurrency of 0 is a mistake at its line.
#[test]
fn finding_6_the_introspection_cache_settings_are_read() {
    let text = r#"[gateway]
listen = "127.0.0.1:8787"

[gateway.auth]
issuer = "https://auth.example"

[gateway.auth.introspection]
endpoint = "https://auth.example/introspect"
client_id = "gateway"
client_secret_env = "GATEWAY_SECRET"
cache_max_age = "2m"
cache_inactive = "5s"
cache_max_entries = 500
max_concurrent_per_address = 2
"#;
    let c = load_str("g.toml", text).expect("no mistakes").config;
    let i = c
        .gateway
        .auth
        .as_ref()
        .and_then(|a| a.introspection.as_ref())
        .expect("introspection");
    assert_eq!(i.cache_max_age, Some(Dur(Duration::from_secs(120))));
    assert_eq!(i.cache_inactive, Some(Dur(Duration::from_secs(5))));
    assert_eq!(i.cache_max_entries, Some(500));
    assert_eq!(i.max_concurrent_per_address, Some(2));
    assert_eq!(serde_only(text).expect("serde"), c);
    let again = toml::to_string(&c).expect("serialize");
    assert_eq!(load_str("again.toml", &again).expect("reads").config, c);

    let defaults = text
        .lines()
        .filter(|l| !l.starts_with("cache_") && !l.starts_with("max_concurrent"))
        .collect::<Vec<_>>()
        .join("\n");
    let c = load_str("g.toml", &defaults).expect("no mistakes").config;
    let i = c.gateway.auth.unwrap().introspection.unwrap();
    assert_eq!(
        (
            i.cache_max_age,
            i.cache_inactive,
            i.cache_max_entries,
            i.max_concurrent_per_address
        ),
        (None, None, None, None)
    );

    let zero = text.replace(
        "max_concurrent_per_address = 2",
        "max_concurrent_per_address = 0",
    );
    assert_eq!(
        errors(&zero),
        ["g.toml:14: gateway.auth.introspection.max_concurrent_per_address: must be at least 1"]
    );
}

#[test]
fn the_auth_guard_is_read_and_its_mistakes_named_with_their_lines() {
    let good = r#"[gateway]
listen = "127.0.0.1:8787"
approvers_must_differ = true

[gateway.auth]
issuer = "https://auth.example"
resource = "https://gateway.example/mcp"
jwks_uri = "https://auth.example/jwks?v=2"
require_at_jwt = true
scopes = ["mcp:gateway"]
scopes_supported = ["mcp:gateway", "mcp:admin"]
"#;
    let c = load_str("g.toml", good).expect("no mistakes").config;
    assert!(c.gateway.approvers_must_differ);
    let a = c.gateway.auth.as_ref().expect("auth");
    assert_eq!(a.issuer, "https://auth.example");
    assert_eq!(a.resource.as_deref(), Some("https://gateway.example/mcp"));
    assert_eq!(a.jwks_uri.as_deref(), Some("https://auth.example/jwks?v=2"));
    assert_eq!(a.require_at_jwt, Some(true));
    assert_eq!(a.scopes, ["mcp:gateway"]);
    assert_eq!(a.introspection, None);
    assert_eq!(serde_only(good).expect("serde"), c);
    let text = toml::to_string(&c).expect("serialize");
    assert_eq!(load_str("again.toml", &text).expect("reads").config, c);

    let introspected = r#"[gateway]
listen = "0.0.0.0:8787"

[gateway.auth]
issuer = "https://auth.example"
resource = "https://gateway.example/mcp"

[gateway.auth.introspection]
endpoint = "https://auth.example/introspect"
client_id = "gateway"
client_secret_env = "GATEWAY_SECRET"
"#;
    let c = load_str("g.toml", introspected)
        .expect("no mistakes")
        .config;
    let i = c
        .gateway
        .auth
        .as_ref()
        .unwrap()
        .introspection
        .as_ref()
        .unwrap();
    assert_eq!(i.client_secret_env.as_deref(), Some("GATEWAY_SECRET"));
    assert_eq!(serde_only(introspected).expect("serde"), c);

    // Every mistake at once, each on its line.
    let bad = r#"[gateway]
listen = "0.0.0.0:8787"
approvers_must_differ = "yes"

[gateway.auth]
issuer = "https://auth.example/#frag"
jwks_uri = "auth.example/jwks"
require_at_jwt = true
scopes = ["mcp read"]
audience = "x"

[gateway.auth.introspection]
endpoint = "ftp://auth.example/introspect"
client_id = ""
client_secret_file = "s.txt"
client_secret_env = "S"
client_secret = "inline"
"#;
    assert_eq!(
        errors(bad),
        [
            "g.toml:3: gateway.approvers_must_differ: expected a boolean, found \"yes\"",
            "g.toml:5: gateway.auth.resource: required when listen is 0.0.0.0:8787: tokens name the gateway's public URL as their audience (such as \"https://gateway.example/mcp\")",
            "g.toml:6: gateway.auth.issuer: must be an http(s) URL without a query or fragment",
            "g.toml:7: gateway.auth.jwks_uri: must be an http(s) URL",
            "g.toml:7: gateway.auth.jwks_uri: is for JWT access tokens; tokens are checked by introspection here",
            "g.toml:8: gateway.auth.require_at_jwt: is for JWT access tokens; tokens are checked by introspection here",
            "g.toml:9: gateway.auth.scopes[0]: a scope is one non-empty word",
            "g.toml:10: gateway.auth.audience: unknown key (expected one of: introspection, issuer, jwks_uri, require_at_jwt, resource, scopes, scopes_supported)",
            "g.toml:13: gateway.auth.introspection.endpoint: must be an http(s) URL",
            "g.toml:14: gateway.auth.introspection.client_id: must not be empty",
            "g.toml:16: gateway.auth.introspection.client_secret_env: name the secret's file or its environment variable, not both",
            "g.toml:17: gateway.auth.introspection.client_secret: unknown key (expected one of: cache_inactive, cache_max_age, cache_max_entries, client_id, client_secret_env, client_secret_file, endpoint, max_concurrent_per_address)",
        ]
    );
    // The guard is for the HTTP listener: with stdio it is a mistake.
    assert_eq!(
        errors("[gateway.auth]\nissuer = \"https://auth.example\"\n"),
        ["g.toml:1: gateway.auth: guards the HTTP listener, and listen is \"stdio\" (stdio callers are the local principal): set listen to an address, or remove [gateway.auth]"]
    );
    assert_eq!(
        errors(
            "[gateway]\nlisten = \"127.0.0.1:1\"\n[gateway.auth]\nissuer = \"https://a\"\n\
             [gateway.auth.introspection]\nendpoint = \"https://a/i\"\nclient_id = \"g\"\n"
        ),
        ["g.toml:5: gateway.auth.introspection: needs client_secret_file or client_secret_env (the secret is never in this file)"]
    );
    assert_eq!(
        errors("[gateway]\nlisten = \"127.0.0.1:1\"\n[gateway.auth]\nscopes = []\n"),
        ["g.toml:3: gateway.auth.issuer: required: the authorization server's issuer URL: the `iss` every token must carry, and the issuer half of every caller's principal"]
    );
}

/// Finding 10 of the security review: an issuer (the guard's, or the page's OpenID Connect
/// provider) or a JWKS over plain http off loopback is a configuration mistake, named at its
/// line; plain http on a loopback host stays for development.
#[test]
fn finding_10_http_issuers_off_loopback_are_mistakes() {
    const HTTPS: &str =
        "must be https (plain http only on a loopback host: localhost, 127.0.0.1, [::1])";
    let bad = r#"[gateway]
listen = "127.0.0.1:8787"

[gateway.auth]
issuer = "http://auth.example"
jwks_uri = "http://auth.example/jwks"

[page.oidc]
issuer = "http://id.example/realms/ops"
client_id = "page"
allow_subjects = ["ada"]
"#;
    assert_eq!(
        errors(bad),
        [
            format!("g.toml:5: gateway.auth.issuer: {HTTPS}"),
            format!("g.toml:6: gateway.auth.jwks_uri: {HTTPS}"),
            format!("g.toml:9: page.oidc.issuer: {HTTPS}"),
        ]
    );
    for host in ["127.0.0.1:9000", "localhost:9000", "[::1]:9000"] {
        let good = format!(
            "[gateway]\nlisten = \"127.0.0.1:8787\"\n[gateway.auth]\nissuer = \"http://{host}\"\n\
             jwks_uri = \"http://{host}/jwks\"\n[page.oidc]\nissuer = \"http://{host}/realms/ops\"\n\
             client_id = \"page\"\nallow_subjects = [\"ada\"]\n"
        );
        assert!(load_str("g.toml", &good).is_ok(), "{host}");
    }
    // The introspection endpoint is sent the gateway's client secret and every caller's token.
    let introspection = |endpoint: &str| {
        format!(
            "[gateway]\nlisten = \"127.0.0.1:8787\"\n[gateway.auth]\nissuer = \"https://auth.example\"\n\
             [gateway.auth.introspection]\nendpoint = \"{endpoint}\"\nclient_id = \"gw\"\n\
             client_secret_env = \"GW_SECRET\"\n"
        )
    };
    assert_eq!(
        errors(&introspection("http://auth.example/introspect")),
        [format!(
            "g.toml:6: gateway.auth.introspection.endpoint: {HTTPS}"
        )]
    );
    assert!(load_str("g.toml", &introspection("http://127.0.0.1:9000/introspect")).is_ok());
    assert!(load_str("g.toml", &introspection("https://auth.example/introspect")).is_ok());
}

/// Finding 1 of issue 40: who may decide a write. Left out, an operator only; `"client"` is
/// the operator's explicit choice, and a mistake when neither elicitation nor the approval view
/// is on (nothing could use it).
#[test]
fn who_may_decide_a_write_is_an_operator_unless_the_binding_says_client() {
    let write = |approval: &str, gateway: &str| {
        format!(
            r#"[gateway]
{gateway}

[upstreams.notes]
command = ["python3", "notes.py"]

[writes.set_note]
upstream = "notes"
title = "Replace"
effect = "write"
binding_id = "notes"
binding_revision = "1"
scope_id = "notes"
scope_revision = "1"
{approval}
scope = {{ clients = ["claude-code"] }}
"#
        )
    };
    let c = load_str("g.toml", &write("", "elicitation = true\napps = true"))
        .expect("no mistakes")
        .config;
    assert_eq!(c.writes["set_note"].approval, ApprovalBy::Operator);
    assert_eq!(
        serde_only(&write("", "")).expect("serde").writes["set_note"].approval,
        ApprovalBy::Operator
    );
    for on in ["elicitation = true", "apps = true"] {
        let c = load_str("g.toml", &write("approval = \"client\"", on))
            .expect("no mistakes")
            .config;
        assert_eq!(c.writes["set_note"].approval, ApprovalBy::Client, "{on}");
    }
    assert_eq!(
        errors(&write("approval = \"client\"", "elicitation = false")),
        ["g.toml:15: writes.set_note.approval: \"client\" lets the downstream client's user decide through elicitation or the approval view, but gateway.elicitation and gateway.apps are both off: nothing could use it (turn one on, or leave approval out: an operator decides)"]
    );
    assert_eq!(
        errors(&write("approval = \"anyone\"", "apps = true")),
        ["g.toml:15: writes.set_note.approval: expected \"operator\" or \"client\" or a table, found \"anyone\""]
    );
    assert_eq!(
        serde_only(&write("approval = \"anyone\"", "apps = true")).map(|_| ()),
        Err("TOML parse error at line 15, column 12\n   |\n15 | approval = \"anyone\"\n   |            ^^^^^^^^\nunknown variant `anyone`, expected `operator` or `client`\n".to_owned())
    );
}

/// Issue 44, defect 5: a write binding may bound how long its receipts answer the same call
/// (`receipt_ttl`); left out, they answer for ever; less than a second is a mistake.
#[test]
fn a_write_binding_may_bound_how_long_its_receipts_answer() {
    let write = |ttl: &str| {
        format!(
            r#"[upstreams.notes]
command = ["python3", "notes.py"]

[writes.set_note]
upstream = "notes"
title = "Replace"
effect = "write"
binding_id = "notes"
binding_revision = "1"
scope_id = "notes"
scope_revision = "1"
{ttl}
scope = {{ clients = ["claude-code"] }}
"#
        )
    };
    let c = load_str("g.toml", &write("")).expect("no mistakes").config;
    assert_eq!(c.writes["set_note"].receipt_ttl, None);
    let c = load_str("g.toml", &write("receipt_ttl = \"10m\""))
        .expect("no mistakes")
        .config;
    assert_eq!(
        c.writes["set_note"].receipt_ttl,
        Some(Dur(Duration::from_secs(600)))
    );
    assert_eq!(
        serde_only(&write("receipt_ttl = \"10m\""))
            .expect("serde")
            .writes["set_note"]
            .receipt_ttl,
        Some(Dur(Duration::from_secs(600)))
    );
    assert_eq!(
        errors(&write("receipt_ttl = \"500ms\"")),
        ["g.toml:12: writes.set_note.receipt_ttl: must be at least 1s (leave it out for receipts that answer for ever)"]
    );
    let c = load_str("g.toml", &write("approver_max_age = \"5m\""))
        .expect("no mistakes")
        .config;
    assert_eq!(
        c.writes["set_note"].approver_max_age,
        Some(Dur(Duration::from_secs(300)))
    );
    assert_eq!(
        errors(&write("approver_max_age = \"0s\"")),
        ["g.toml:12: writes.set_note.approver_max_age: must be at least 1s (leave it out for any live session)"]
    );
}

/// Finding 3 of issue 40: a rule whose number cannot mean exactly what it says, and a `within`
/// directory that is not in normal form, are mistakes with their key and line.
#[test]
fn rule_literals_that_cannot_be_compared_exactly_are_mistakes() {
    let text = r#"[upstreams.notes]
command = ["python3", "notes.py"]

[writes.set_note]
upstream = "notes"
title = "Replace"
effect = "write"
binding_id = "notes"
binding_revision = "1"
scope_id = "notes"
scope_revision = "1"

[writes.set_note.scope]
arguments = [
  "id == 1e400",
  "id == 1234567890123456789012345678901234567890",
  "id == 9007199254740993",
  "path within \"/srv/notes/\"",
  "path within \"/srv/notes\"",
]
"#;
    assert_eq!(
        errors(text),
        [
            "g.toml:15: writes.set_note.scope.arguments[0]: cannot parse \"id == 1e400\": the number 1e400 cannot be represented: it is beyond the largest binary64 number",
            "g.toml:16: writes.set_note.scope.arguments[1]: cannot parse \"id == 1234567890123456789012345678901234567890\": the integer 1234567890123456789012345678901234567890 cannot be compared exactly: integers must lie within -9223372036854775808 to 18446744073709551615",
            "g.toml:18: writes.set_note.scope.arguments[3]: cannot parse \"path within \\\"/srv/notes/\\\"\": `within` needs an absolute directory path in normal form, such as \"/srv/notes\" (starting with /; no empty, . or .. segment, so no trailing /; no NUL or other control character, \\ or %)",
        ]
    );
}

#[test]
fn earlier_schema_dialects_are_accepted_by_default_and_can_be_turned_off() {
    // The gateway's default, unlike purra-mcp's: TypeScript-SDK servers declare draft-07.
    let c = load_str("g.toml", "").expect("empty").config;
    assert!(c.limits.limits().earlier_schema_dialects);
    assert!(!purra_mcp::Limits::default().earlier_schema_dialects);
    let text = "[limits]\nearlier_schema_dialects = false\n";
    let c = load_str("g.toml", text).expect("no mistakes").config;
    assert_eq!(c.limits.earlier_schema_dialects, Some(false));
    assert!(!c.limits.limits().earlier_schema_dialects);
    assert_eq!(serde_only(text).expect("serde"), c);
    assert_eq!(
        errors("[limits]\nearlier_schema_dialects = \"no\"\n"),
        ["g.toml:2: limits.earlier_schema_dialects: expected a boolean, found \"no\""]
    );
    assert_eq!(
        errors("[limits]\ndialects = false\n"),
        ["g.toml:2: limits.dialects: unknown key (expected one of: earlier_schema_dialects, max_catalog_bytes, max_content_blocks, max_description_bytes, max_pages, max_result_bytes, max_schema_bytes, max_tools, timeout)"]
    );
}

/// The calls one caller may make a minute: 600 by default, read from the file, between 1 and
/// 60000.
#[test]
fn the_calls_per_minute_per_caller_are_bounded() {
    let c = load_str("g.toml", "").expect("empty").config;
    assert_eq!(c.gateway.max_calls_per_minute_per_caller, 600);
    let text = "[gateway]\nmax_calls_per_minute_per_caller = 60000\n";
    let c = load_str("g.toml", text).expect("at the bound").config;
    assert_eq!(c.gateway.max_calls_per_minute_per_caller, 60000);
    assert_eq!(serde_only(text).expect("serde"), c);
    for value in ["0", "60001"] {
        assert_eq!(
            errors(&format!(
                "[gateway]\nmax_calls_per_minute_per_caller = {value}\n"
            )),
            ["g.toml:2: gateway.max_calls_per_minute_per_caller: must be at least 1 and at most 60000"]
        );
    }
    assert_eq!(
        errors("[gateway]\nmax_calls_per_minute_per_caller = \"many\"\n"),
        ["g.toml:2: gateway.max_calls_per_minute_per_caller: expected an integer, found \"many\""]
    );
}

/// Finding 2 of the second security review: the HTTP listener's session bounds are
/// `[gateway]` keys (10 000 overall, 16 per caller, 10 minutes idle by default), read the same by
/// the reader and by serde, each mistake reported at its line.
#[test]
fn finding_2_the_session_bounds_are_gateway_keys() {
    let c = load_str("g.toml", "").expect("empty").config;
    assert_eq!(
        (
            c.gateway.max_sessions,
            c.gateway.max_sessions_per_caller,
            c.gateway.session_idle_timeout
        ),
        (10_000, 16, Dur(Duration::from_secs(600)))
    );
    let text = "[gateway]\nmax_sessions = 50\nmax_sessions_per_caller = 50\nsession_idle_timeout = \"90s\"\n";
    let c = load_str("g.toml", text).expect("valid").config;
    assert_eq!(
        (
            c.gateway.max_sessions,
            c.gateway.max_sessions_per_caller,
            c.gateway.session_idle_timeout
        ),
        (50, 50, Dur(Duration::from_secs(90)))
    );
    assert_eq!(serde_only(text).expect("serde"), c);
    assert_eq!(
        errors("[gateway]\nmax_sessions = 0\nmax_sessions_per_caller = 17\nsession_idle_timeout = \"25h\"\n"),
        [
            "g.toml:2: gateway.max_sessions: must be at least 1 and at most 1000000",
            "g.toml:3: gateway.max_sessions_per_caller: must be at least 1 and at most max_sessions (0)",
            "g.toml:4: gateway.session_idle_timeout: must be at least 1s and at most 24h",
        ]
    );
    assert_eq!(
        errors("[gateway]\nmax_sessions = 8\nmax_sessions_per_caller = 9\n"),
        ["g.toml:3: gateway.max_sessions_per_caller: must be at least 1 and at most max_sessions (8)"]
    );
    assert_eq!(
        errors("[gateway]\nmax_sessions_per_caller = -1\n"),
        ["g.toml:2: gateway.max_sessions_per_caller: must be at least 0, found integer -1"]
    );
}

/// `[gateway] sessions`: in the store by default (any instance serves any session), or in the
/// process (`"process"`: no store round trip per request, sticky routing in a fleet); any other
/// value is a mistake at its line.
#[test]
fn the_sessions_live_in_the_store_or_in_the_process() {
    use purra_gateway::SessionsIn;
    let c = load_str("g.toml", "").expect("empty").config;
    assert_eq!(c.gateway.sessions, SessionsIn::Store);
    let text = "[gateway]\nsessions = \"process\"\n";
    let c = load_str("g.toml", text).expect("valid").config;
    assert_eq!(c.gateway.sessions, SessionsIn::Process);
    assert_eq!(serde_only(text).expect("serde"), c);
    assert_eq!(
        errors("[gateway]\nsessions = \"disk\"\n"),
        ["g.toml:2: gateway.sessions: expected \"store\" or \"process\", found \"disk\""]
    );
}

/// `[policies]`: the files and the declared claims, read the same by the reader and by serde;
/// each mistake at its line.
#[test]
fn the_policies_table_is_read_and_its_mistakes_named_with_their_lines() {
    let text = r#"[policies]
files = ["policies/notes.cedar", "/etc/purra/common.cedar"]

[policies.claims]
groups = "Set<String>"
email = "String"
email_verified = "Bool"
level = "Long"
"https://example.com/roles" = "Set<Long>"
"#;
    let c = load_str("g.toml", text).expect("reads").config;
    let p = c.policies.clone().expect("policies");
    assert_eq!(
        p.files,
        [
            std::path::PathBuf::from("policies/notes.cedar"),
            std::path::PathBuf::from("/etc/purra/common.cedar")
        ]
    );
    assert_eq!(
        p.claims
            .iter()
            .map(|(k, t)| (k.as_str(), *t))
            .collect::<Vec<_>>(),
        [
            ("email", ClaimType::String),
            ("email_verified", ClaimType::Bool),
            ("groups", ClaimType::SetOfStrings),
            ("https://example.com/roles", ClaimType::SetOfLongs),
            ("level", ClaimType::Long),
        ]
    );
    assert_eq!(serde_only(text).expect("serde"), c);
    let again = toml::to_string(&c).expect("serialize");
    assert_eq!(load_str("again.toml", &again).expect("reads").config, c);

    assert_eq!(
        errors("[policies]\nclaims = { groups = \"Set<String>\" }\n"),
        ["g.toml:1: policies.files: required: policy files in Cedar's language (relative to the configuration file's directory), at least one and at most 64 (`MAX_POLICY_FILES`), each at most 1 MiB"]
    );
    assert_eq!(
        errors("[policies]\nfiles = []\n"),
        ["g.toml:2: policies.files: name at least one Cedar policy file (or leave [policies] out)"]
    );
    assert_eq!(
        errors(
            "[policies]\nfiles = [\"p.cedar\"]\nfile = \"x\"\n\n[policies.claims]\ngroups = \"List<String>\"\n"
        ),
        [
            "g.toml:3: policies.file: unknown key (expected one of: claims, files)",
            "g.toml:6: policies.claims.groups: expected one of \"String\", \"Long\", \"Bool\", \"Set<String>\", \"Set<Long>\", found \"List<String>\"",
        ]
    );
    assert_eq!(
        errors("[policies]\nfiles = [\"p.cedar\"]\nclaims = { \"\" = \"String\" }\n"),
        ["g.toml:3: policies.claims.: a claim's name is 1 to 128 bytes without control characters"]
    );
    let many: Vec<String> = (0..65).map(|i| format!("\"p{i}.cedar\"")).collect();
    assert_eq!(
        errors(&format!("[policies]\nfiles = [{}]\n", many.join(", "))),
        ["g.toml:2: policies.files: at most 64 policy files"]
    );
}

/// A file's policy files are read with it: relative to its directory, bounded, parsed; an
/// unreadable one is a mistake at its `files` entry, a syntax mistake or a template at its own
/// file and line, beside the configuration's own mistakes.
#[test]
fn policy_files_are_read_with_the_configuration_bounded_and_parsed() {
    let dir = std::env::temp_dir().join(format!(
        "purra-gw-config-policies-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(dir.join("policies")).unwrap();
    let config = dir.join("gateway.toml");
    let d = dir.display().to_string();
    let body = r#"
[upstreams.notes]
command = ["python3", "notes.py"]

[reads.get_note]
upstream = "notes"
title = "Read"
scope = "open"
"#;
    let write = |policies: &str, extra: &str| {
        std::fs::write(
            &config,
            format!("[policies]\nfiles = [{policies}]\n{extra}{body}"),
        )
        .unwrap();
    };
    let messages = |e: purra_gateway::ConfigErrors| -> Vec<String> {
        e.0.iter()
            .map(|e| e.to_string().replace(&d, "DIR"))
            .collect()
    };

    std::fs::write(
        dir.join("policies/ok.cedar"),
        "permit(principal, action, resource);\n",
    )
    .unwrap();
    write("\"policies/ok.cedar\"", "");
    let loaded = purra_gateway::load(&config).expect("reads");
    assert_eq!(
        loaded.config.policies.expect("policies").files,
        [dir.join("policies/ok.cedar")]
    );

    write("\"policies/missing.cedar\", \"policies/ok.cedar\"", "");
    assert_eq!(
        messages(purra_gateway::load(&config).expect_err("missing")),
        ["DIR/gateway.toml:2: policies.files[0]: cannot read the policy file DIR/policies/missing.cedar: No such file or directory (os error 2)"]
    );

    std::fs::write(
        dir.join("policies/bad.cedar"),
        "permit(principal, action, resource);\n\nforbid(principal action, resource);\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("policies/slots.cedar"),
        "// a template\npermit(principal == ?principal, action, resource);\n",
    )
    .unwrap();
    std::fs::write(dir.join("policies/huge.cedar"), "/".repeat(1024 * 1024 + 1)).unwrap();
    write(
        "\"policies/bad.cedar\", \"policies/slots.cedar\", \"policies/huge.cedar\"",
        "",
    );
    assert_eq!(
        messages(purra_gateway::load(&config).expect_err("mistakes")),
        [
            "DIR/gateway.toml:2: policies.files[2]: cannot read the policy file DIR/policies/huge.cedar: the file is larger than 1048576 bytes",
            "DIR/policies/bad.cedar:3: unexpected token `action`",
            "DIR/policies/slots.cedar:2: a policy template (?principal, ?resource) never applies: the gateway links no template; write the policy without slots",
        ]
    );

    // Beside the configuration's own mistakes, when every mistake is reported at once (the
    // upstream, given both ways, is not asked for its tools).
    std::fs::write(
        &config,
        format!(
            "[policies]\nfiles = [\"policies/bad.cedar\"]\n[gateway]\n\
             max_calls_per_minute_per_caller = 0\n{}",
            body.replace("command =", "url = \"http://127.0.0.1:9/mcp\"\ncommand =")
        ),
    )
    .unwrap();
    let all = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(purra_gateway::load_reporting_all(&config))
        .expect_err("mistakes");
    assert_eq!(
        messages(all),
        [
            "DIR/gateway.toml:4: gateway.max_calls_per_minute_per_caller: must be at least 1 and at most 60000",
            "DIR/gateway.toml:6: upstreams.notes: give either command or url, not both",
            "DIR/policies/bad.cedar:3: unexpected token `action`",
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Webhook endpoints: defaults, every key read, the secret named by file or environment
/// variable and never written here, and every mistake at its line; `[page] url` for links.
#[test]
fn webhooks_are_read_and_their_mistakes_named_with_their_lines() {
    let good = r#"[page]
url = "https://approvals.example/purra"

[webhooks.ops]
url = "https://hooks.example/purra"
secret_file = "ops.whsec"

[webhooks.chat]
url = "https://chat.example/services/T1/B2/x"
format = "slack"
events = ["approval.pending", "approval.decided"]
timeout = "5s"
backoff = "1s"
max_backoff = "10m"
give_up_after = "24h"
"#;
    let c = load_str("g.toml", good).expect("no mistakes").config;
    assert_eq!(
        c.page.url.as_deref(),
        Some("https://approvals.example/purra")
    );
    let ops = &c.webhooks["ops"];
    assert_eq!(ops.events, WebhookEventName::ALL.to_vec());
    assert_eq!(ops.format, WebhookFormat::Standard);
    assert_eq!(
        (ops.timeout, ops.backoff, ops.max_backoff, ops.give_up_after),
        (
            Dur(Duration::from_secs(15)),
            Dur(Duration::from_secs(5)),
            Dur(Duration::from_secs(3600)),
            Dur(Duration::from_secs(72 * 3600))
        )
    );
    assert_eq!(
        ops.secret_file.as_deref(),
        Some(std::path::Path::new("ops.whsec"))
    );
    let chat = &c.webhooks["chat"];
    assert_eq!(chat.format, WebhookFormat::Slack);
    assert_eq!(chat.secret_file, None);
    assert_eq!(
        chat.events,
        [
            WebhookEventName::ApprovalPending,
            WebhookEventName::ApprovalDecided
        ]
    );
    assert_eq!(chat.give_up_after, Dur(Duration::from_secs(24 * 3600)));
    assert_eq!(serde_only(good).expect("serde"), c);
    let text = toml::to_string(&c).expect("serialize");
    assert_eq!(load_str("again.toml", &text).expect("reads").config, c);

    let bad = r#"[page]
url = "approvals.example"

[webhooks.ops]
url = "ftp://hooks.example"
secret_file = "a"
secret_env = "B"
events = ["approval.pending", "approval.claimed"]
timeout = "10m"

[webhooks.Bad]
url = "https://x.example"
format = "teams"
secret = "whsec_inline"

[webhooks.quiet]
url = "https://x.example"
secret_env = "S"
events = []
backoff = "5ms"
max_backoff = "1ms"
give_up_after = "9000h"

[webhooks.twice]
url = "https://x.example"
secret_env = "S"
events = ["effect.unknown", "effect.unknown"]

[webhooks.unsigned]
url = "https://x.example"

[webhooks.nourl]
secret_env = "S"
"#;
    assert_eq!(
        errors(bad),
        [
            "g.toml:8: webhooks.ops.events[1]: expected \"approval.pending\" or \"approval.decided\" or \"effect.committed\" or \"effect.unknown\" or \"effect.reconciled\" or \"catalog.changed\" or \"approval.voted\" or \"approval.escalated\" or \"approval.expired\", found \"approval.claimed\"",
            "g.toml:13: webhooks.Bad.format: expected \"standard\" or \"slack\", found \"teams\"",
            "g.toml:14: webhooks.Bad.secret: unknown key (expected one of: backoff, events, format, give_up_after, max_backoff, secret_env, secret_file, timeout, url)",
            "g.toml:32: webhooks.nourl.url: required: where events are POSTed: an `http(s)` URL",
        ]
    );
    // Once every value reads, the checks that need them.
    let bad = r#"[page]
url = "https://approvals.example/?x=1"

[webhooks.Ops]
url = "https://x.example"
secret_env = "S"

[webhooks.ops]
url = "ftp://hooks.example"
secret_file = "a"
secret_env = "B"
timeout = "10m"

[webhooks.quiet]
url = "https://x.example"
secret_env = "S"
events = []
backoff = "5ms"
max_backoff = "1ms"
give_up_after = "9000h"

[webhooks.twice]
url = "https://x.example"
secret_env = "S"
events = ["effect.unknown", "effect.unknown"]

[webhooks.unsigned]
url = "https://x.example"

[webhooks.slack]
url = "https://x.example"
format = "slack"
"#;
    assert_eq!(
        errors(bad),
        [
            "g.toml:2: page.url: must be an http(s) URL without a query or fragment",
            "g.toml:4: webhooks.Ops: webhook names must match ^[a-z][a-z0-9_]{0,63}$",
            "g.toml:9: webhooks.ops.url: must be an http(s) URL",
            "g.toml:11: webhooks.ops.secret_env: name the secret's file or its environment variable, not both",
            "g.toml:12: webhooks.ops.timeout: must be at least 100ms and at most 300s",
            "g.toml:17: webhooks.quiet.events: subscribes to no event: leave events out for every one",
            "g.toml:18: webhooks.quiet.backoff: must be at least 10ms",
            "g.toml:19: webhooks.quiet.max_backoff: must be at least backoff (5ms)",
            "g.toml:20: webhooks.quiet.give_up_after: must be at least backoff (5ms) and at most 8760h",
            "g.toml:25: webhooks.twice.events[1]: effect.unknown is named twice",
            "g.toml:27: webhooks.unsigned: needs secret_file or secret_env: the Standard Webhooks secret (whsec_ and base64) its requests are signed with, never in this file",
        ]
    );
}

#[test]
fn telemetry_is_read_with_the_file_and_its_mistakes_placed() {
    let text = r#"[telemetry]
otlp_endpoint = "http://127.0.0.1:4318"
service_name = "gw-east"
metrics_listen = "127.0.0.1:9464"
metrics_interval = "10s"
"#;
    let c = load_str("g.toml", text).expect("no mistakes").config;
    assert_eq!(
        c.telemetry.otlp_endpoint.as_deref(),
        Some("http://127.0.0.1:4318")
    );
    assert_eq!(c.telemetry.service_name.as_deref(), Some("gw-east"));
    assert_eq!(
        c.telemetry.metrics_listen,
        Some("127.0.0.1:9464".parse().unwrap())
    );
    assert_eq!(c.telemetry.metrics_interval, Dur(Duration::from_secs(10)));
    assert_eq!(serde_only(text).expect("serde"), c);
    // Issue 44: `localhost:PORT` is an address, for the metrics and for `listen`, in both
    // readers.
    let text = "[gateway]\nlisten = \"localhost:8787\"\n\n[telemetry]\nmetrics_listen = \"localhost:9464\"\n";
    let c = load_str("g.toml", text).expect("no mistakes").config;
    assert_eq!(
        c.telemetry.metrics_listen,
        Some("127.0.0.1:9464".parse().unwrap())
    );
    assert_eq!(
        c.gateway.listen,
        purra_gateway::Listen::Http("127.0.0.1:8787".parse().unwrap())
    );
    assert_eq!(serde_only(text).expect("serde"), c);
    // Nothing is served or exported unless asked for; the export interval is a minute.
    let d = GatewayConfig::default().telemetry;
    assert_eq!(
        (d.otlp_endpoint, d.metrics_listen, d.metrics_interval),
        (None, None, Dur(Duration::from_secs(60)))
    );
    let text = r#"[telemetry]
otlp_endpoint = "collector:4318"
service_name = ""
metrics_listen = "localhost"
metrics_interval = "500ms"
exporter = "otlp"
"#;
    assert_eq!(
        errors(text),
        [
            "g.toml:2: telemetry.otlp_endpoint: must be an http:// or https:// URL, such as \"http://127.0.0.1:4318\"",
            "g.toml:3: telemetry.service_name: must not be empty",
            "g.toml:4: telemetry.metrics_listen: expected an address such as \"127.0.0.1:9464\" or \"localhost:9464\", found \"localhost\"",
            "g.toml:5: telemetry.metrics_interval: must be at least 1s",
            "g.toml:6: telemetry.exporter: unknown key (expected one of: metrics_interval, metrics_listen, metrics_token_file, otlp_endpoint, service_name)",
        ]
    );
}

/// Issue 50: `[store] pool_size` sizes the PostgreSQL pool (16 by default), from 1 to 256.
#[test]
fn the_store_pool_is_sized_by_the_file_and_its_mistakes_placed() {
    assert_eq!(GatewayConfig::default().store.pool_size, 16);
    let text = "[store]\npool_size = 48\n";
    let c = load_str("g.toml", text).expect("no mistakes").config;
    assert_eq!(c.store.pool_size, 48);
    assert_eq!(serde_only(text).expect("serde"), c);
    let text = "[store]\npool_size = 0\nconnections = 4\n";
    assert_eq!(
        errors(text),
        [
            "g.toml:2: store.pool_size: must be from 1 to 256",
            "g.toml:3: store.connections: unknown key (expected one of: pool_size)",
        ]
    );
    assert_eq!(
        errors("[store]\npool_size = 257\n"),
        ["g.toml:2: store.pool_size: must be from 1 to 256"]
    );
}

fn repo() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The configuration reference page and the JSON Schema in the guide are what the types
/// generate; `PURRA_BLESS=1` rewrites them.
#[test]
fn the_configuration_reference_and_schema_are_generated_from_the_types() {
    let dir = repo().join("docs/src/reference");
    let schema = serde_json::to_string_pretty(&purra_gateway::config::json_schema()).unwrap();
    let pages = [
        (
            "configuration.md",
            purra_gateway::config::reference::reference_markdown(),
        ),
        ("gateway.schema.json", format!("{schema}\n")),
    ];
    for (file, text) in pages {
        let path = dir.join(file);
        if std::env::var_os("PURRA_BLESS").is_some() {
            std::fs::write(&path, &text).expect("write");
            continue;
        }
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            on_disk == text,
            "docs/src/reference/{file} is not what the configuration's types generate: refresh it \
             with PURRA_BLESS=1 cargo test -p purra-gateway --test config"
        );
    }
    // Every key of every table is on the page, with its description.
    let page = &pages_text();
    for key in [
        "`[gateway]`",
        "`[gateway.auth.introspection]`",
        "`[writes.NAME]`",
        "`[page.oidc]`",
        "| `max_sessions_per_caller` | integer | `16` |",
        "| `approval_wait` | duration | `\"30s\"` |",
    ] {
        assert!(page.contains(key), "{key} missing from the reference page");
    }
}

fn pages_text() -> String {
    purra_gateway::config::reference::reference_markdown()
}

/// The first TOML block of the guide's gateway chapter: a complete `gateway.toml`.
fn guide_gateway_toml() -> String {
    let page = std::fs::read_to_string(repo().join("docs/src/gateway/index.md")).expect("guide");
    let start = page.find("```toml\n").expect("a toml block") + "```toml\n".len();
    let end = start + page[start..].find("```").expect("closed");
    page[start..end].to_owned()
}

/// Validates `instance` against the generated schema with the Python `jsonschema` package from
/// PyPI (pinned by scripts/setup-peers.sh): its error lines, or `Ok` when it validates.
fn python_jsonschema(name: &str, instance: &serde_json::Value) -> Result<(), String> {
    let peers = std::env::var_os("PURRA_PEERS_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| repo().join(".peers"));
    let python = peers.join("venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/setup-peers.sh (the test command does) first",
        python.display()
    );
    let dir = std::env::temp_dir().join(format!("purra-schema-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let schema = dir.join("schema.json");
    let file = dir.join("gateway.json");
    std::fs::write(&schema, purra_gateway::config::json_schema().to_string()).unwrap();
    std::fs::write(&file, instance.to_string()).unwrap();
    let out = std::process::Command::new(python)
        .arg("-c")
        .arg(
            "import json, sys, jsonschema\n\
             schema = json.load(open(sys.argv[1]))\n\
             jsonschema.Draft202012Validator.check_schema(schema)\n\
             errors = list(jsonschema.Draft202012Validator(schema).iter_errors(json.load(open(sys.argv[2]))))\n\
             for e in errors: print(e.json_path, e.message)\n\
             sys.exit(1 if errors else 0)",
        )
        .arg(&schema)
        .arg(&file)
        .output()
        .expect("python runs");
    let _ = std::fs::remove_dir_all(&dir);
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0) => Ok(()),
        Some(1) if !text.contains("Traceback") => Err(text),
        _ => panic!("the validator failed: {text}"),
    }
}

/// The guide's complete `gateway.toml` validates against the generated JSON Schema with a
/// JSON Schema validator from PyPI (so editors using the schema accept it), and a broken
/// variant of it is refused by the same validator.
#[test]
fn the_guides_gateway_toml_passes_pythons_jsonschema() {
    let text = guide_gateway_toml();
    // The file is a correct configuration for purra too.
    load_str("guide.toml", &text).expect("the guide's file reads");
    let json: serde_json::Value = toml::from_str(&text).expect("toml");
    assert_eq!(python_jsonschema("good", &json), Ok(()));

    let broken = text
        .replace("[gateway]\n", "[gateway]\ncolour = \"blue\"\n")
        .replace("approval_wait = \"30s\"", "approval_wait = 30");
    let json: serde_json::Value = toml::from_str(&broken).expect("toml");
    let errs = python_jsonschema("broken", &json).expect_err("refused");
    assert!(errs.contains("$.gateway.approval_wait"), "{errs}");
    assert!(errs.contains("colour"), "{errs}");
}

/// `config/` is the bottom layer of the gateway: its code names nothing of the crate outside it
/// (doc links aside), so reading a file can start nothing and call up into nothing.
#[test]
fn the_config_module_imports_nothing_else_of_the_crate() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/config");
    let mut upward = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("src/config") {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        for (i, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            let mut rest = line;
            while let Some(at) = rest.find("crate::") {
                rest = &rest[at + "crate::".len()..];
                if !rest.starts_with("config") {
                    upward.push(format!("{}:{}: {}", path.display(), i + 1, line.trim()));
                }
            }
        }
    }
    assert!(upward.is_empty(), "config/ imports up: {upward:#?}");
}

/// A value the schema admits but a custom parser refuses (an address out of range, a duration
/// too long) is reported at its key and line too, and removed so the next one is found: every
/// such mistake at once, beside the schema's.
#[test]
fn mistakes_only_a_custom_parser_finds_are_placed_each_at_its_key() {
    let text = "[gateway]\n\
                listen = \"999.0.0.1:80\"\n\
                approval_wait = \"99999999999999999h\"\n\
                lease = \"99999999999999999999s\"\n\
                colour = \"blue\"\n";
    assert_eq!(
        errors(text),
        [
            "g.toml:2: gateway.listen: expected \"stdio\" or an address such as \"127.0.0.1:8787\" or \"localhost:8787\", found \"999.0.0.1:80\"",
            "g.toml:3: gateway.approval_wait: the duration \"99999999999999999h\" is too long",
            "g.toml:4: gateway.lease: expected a duration such as \"30s\", found \"99999999999999999999s\"",
            "g.toml:5: gateway.colour: unknown key (expected one of: allowed_hosts, approval_request_ttl, approval_ttl, approval_wait, approvers_must_differ, apps, auth, credential_keys, db, drain_timeout, elicitation, lease, listen, max_calls_per_minute_per_caller, max_pending_per_caller, max_sessions, max_sessions_per_caller, name, on_catalog_change, principal, progress_interval, run_decided_without_caller, session_idle_timeout, sessions)",
        ]
    );
}

/// The ```toml blocks of a markdown file, each with the line it starts on.
fn toml_blocks(path: &str) -> Vec<(usize, String)> {
    let page = std::fs::read_to_string(repo().join(path)).expect("the page");
    let mut out = Vec::new();
    let mut block: Option<(usize, String)> = None;
    for (i, line) in page.lines().enumerate() {
        match (&mut block, line) {
            (None, "```toml") => block = Some((i + 2, String::new())),
            (Some(_), "```") => out.extend(block.take()),
            (Some((_, text)), l) => {
                text.push_str(l);
                text.push('\n');
            }
            (None, _) => {}
        }
    }
    out
}

/// Issue 45: every example file of the guide's page on calling upstreams as the person who
/// asked, and of README's, reads without a mistake (and the page shows each of the four ways).
#[test]
fn every_identity_example_in_the_guide_reads() {
    let mut modes = Vec::new();
    for path in ["docs/src/gateway/identity.md", "README.md"] {
        for (line, text) in toml_blocks(path) {
            if let Err(e) = load_str(&format!("{path}:{line}"), &text) {
                panic!("{path}, the block at line {line}: {e}");
            }
            let v: toml::Value = toml::from_str(&text).expect("toml");
            for u in v
                .get("upstreams")
                .and_then(toml::Value::as_table)
                .into_iter()
                .flatten()
            {
                if let Some(mode) = u.1.get("auth").and_then(|a| a.get("mode")) {
                    modes.push((path, mode.as_str().expect("mode").to_owned()));
                } else if u.1.get("per_principal").is_some() {
                    modes.push((path, "per_principal".to_owned()));
                }
            }
        }
    }
    let guide: Vec<&str> = modes
        .iter()
        .filter(|(p, _)| p.ends_with("identity.md"))
        .map(|(_, m)| m.as_str())
        .collect();
    assert_eq!(
        guide,
        [
            "token_exchange",
            "oauth",
            "per_principal",
            "client_credentials"
        ]
    );
    assert!(modes.iter().any(|(p, _)| *p == "README.md"), "{modes:?}");
}

/// Issue 45: the mistakes of an upstream's `auth` and `per_principal` are all reported at once,
/// each at its key (none hides another).
#[test]
fn every_mistake_of_an_upstreams_identity_is_reported_at_once() {
    let text = r#"[gateway]
listen = "127.0.0.1:0"

[upstreams.notes]
url = "https://notes.example.com/mcp"

[upstreams.notes.auth]
mode = "token_exchange"
issuer = "http://login.example.com"
client_id = "purra-gateway"

[upstreams.gh]
command = ["true"]
env_from_credential = { TOKEN = "github" }

[reads.get_note]
upstream = "notes"
title = "x"
scope = "open"
"#;
    let errors = load_str("g.toml", text).expect_err("mistakes");
    let lines: Vec<String> = errors.0.iter().map(ToString::to_string).collect();
    assert_eq!(
        lines,
        [
            "g.toml:7: upstreams.notes.auth: give exactly one of client_secret_file, \
             client_secret_env and private_key_file (how the gateway authenticates as its client)",
            "g.toml:7: upstreams.notes.auth.token_endpoint: token_exchange needs the authorization \
             server's token endpoint",
            "g.toml:8: upstreams.notes.auth.mode: token_exchange exchanges each caller's validated \
             token: it needs [gateway.auth]",
            "g.toml:9: upstreams.notes.auth.issuer: must be https (plain http only on a loopback \
             host: localhost, 127.0.0.1, [::1])",
            "g.toml:14: upstreams.gh.env_from_credential: env_from_credential is for per_principal \
             upstreams",
        ]
    );
}

/// Issue 47: a write's `approval` is `"operator"`, `"client"`, or a workflow table (quorum,
/// escalation, expiry) carried as request labels; mistakes in the table have their key and line.
#[test]
fn a_write_approval_may_be_a_workflow_table() {
    let write = |approval: &str| {
        format!(
            r#"[upstreams.notes]
command = ["python3", "notes.py"]

[writes.set_note]
upstream = "notes"
title = "Replace"
effect = "write"
binding_id = "notes"
binding_revision = "1"
scope_id = "notes"
scope_revision = "1"
approval = {approval}
scope = {{ clients = ["claude-code"] }}

[approvers.groups]
sre = ["alice", "bob"]
"#
        )
    };
    let c = load_str("g.toml", &write("\"client\""));
    assert!(c.is_err(), "client needs elicitation or apps");
    let c = load_str(
        "g.toml",
        &write(
            r#"{ required = 2, from = ["group:sre"], escalate_after = "10m", escalate_to = ["group:leads"], on_expiry = "deny" }"#,
        ),
    )
    .expect("no mistakes")
    .config;
    let w = &c.writes["set_note"];
    assert_eq!(w.approval.by(), purra_gateway::config::ApprovalBy::Operator);
    let rule = w.approval.rule().expect("a table");
    assert_eq!(
        rule.labels(),
        [
            ("votes_required", "2".to_owned()),
            ("votes_from", "group:sre".to_owned()),
            ("escalate_after", "600".to_owned()),
            ("escalate_to", "group:leads".to_owned()),
            ("on_expiry", "deny".to_owned()),
        ]
    );
    assert_eq!(c.approvers.groups_of("bob"), ["sre"]);
    assert_eq!(
        serde_only(&write(r#"{ required = 2, from = ["group:sre"] }"#))
            .expect("serde")
            .writes["set_note"]
            .approval,
        w.approval
            .clone()
            .rule()
            .map(|r| {
                purra_gateway::config::ApprovalConfig::Rule(purra_gateway::config::ApprovalRule {
                    escalate_after: None,
                    escalate_to: vec![],
                    on_expiry: None,
                    ..r.clone()
                })
            })
            .expect("rule")
    );
    assert_eq!(
        errors(&write(r#"{ required = 0 }"#)),
        ["g.toml:12: writes.set_note.approval.required: must be between 1 and 16"]
    );
    assert_eq!(
        errors(&write(r#"{ required = 3, from = ["alice", "bob"] }"#)),
        ["g.toml:12: writes.set_note.approval.required: 3 votes can never come from the 2 approvers `from` names"]
    );
    assert_eq!(
        errors(&write(r#"{ from = ["group:"] }"#)),
        ["g.toml:12: writes.set_note.approval.from: \"group:\" is not an approver name or group:NAME (no commas, no surrounding spaces)"]
    );
    assert_eq!(
        errors(&write(r#"{ escalate_after = "10m" }"#)),
        ["g.toml:12: writes.set_note.approval.escalate_to: escalate_after needs escalate_to (who may decide once escalated)"]
    );
    assert_eq!(
        errors(&write(r#"{ required = 2 }
allow_edit = true"#)),
        ["g.toml:13: writes.set_note.allow_edit: an edit is one approver's decision, but the approval asks for several votes (approval.required): leave allow_edit out, or require one vote"]
    );
    assert!(load_str(
        "g.toml",
        &write(
            r#"{ required = 1, from = ["group:sre"] }
allow_edit = true"#
        )
    )
    .is_ok());
    let unknown = errors(&write(r#"{ quorum = 2 }"#));
    assert_eq!(unknown.len(), 1);
    assert!(unknown[0].contains("quorum"), "{unknown:?}");
    let bad = errors(&write(r#""everyone""#));
    assert_eq!(bad.len(), 1);
    assert!(bad[0].contains("everyone"), "{bad:?}");
}
