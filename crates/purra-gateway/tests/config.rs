//! Configuration files: every mistake found at once, each with its exact message, line and key;
//! the file reader and plain serde read a correct file into the same configuration.

use std::time::Duration;

use purra_gateway::{
    from_toml_serde, load_str, ApprovalBy, ConfigError, Dur, EffectConfig, GatewayConfig, Listen,
    ScopeConfig,
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
    assert_eq!(from_toml_serde(GOOD).expect("serde"), *c);
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
            "g.toml:2: gateway.name: invalid type: integer `7`, expected a string",
            "g.toml:3: gateway.listen: expected \"stdio\" or an address such as \"127.0.0.1:8787\", found \"everywhere\"",
            "g.toml:4: gateway.approval_wait: expected a duration with a unit ms, s, m or h (such as \"30s\"), found \"30\"",
            "g.toml:5: gateway.elicitation: invalid type: string \"yes\", expected a boolean",
            "g.toml:11: upstreams.notes.command: invalid type: string \"python3 notes.py\", expected a sequence",
            "g.toml:16: reads.get_note.concurrency: unknown variant `sometimes`, expected `safe` or `exclusive`",
            "g.toml:17: reads.get_note.scope: expected \"open\" or a table of rules (principals, clients, arguments)",
            "g.toml:18: reads.get_note.tasks: invalid type: string \"yes\", expected a boolean",
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
            "g.toml:4: writes.set_note.binding_id: required",
            "g.toml:4: writes.set_note.binding_revision: a write binding needs its binding revision (change it whenever the authorization changes)",
            "g.toml:4: writes.set_note.scope_id: required",
            "g.toml:4: writes.set_note.scope_revision: a write binding needs its scope revision (change it whenever the scope rules change)",
            "g.toml:8: writes.set_note.scope: writes cannot opt out of scope rules: give a table (principals, clients, arguments)",
            "g.toml:9: writes.set_note.tasks: unknown key (expected one of: approval, binding_id, binding_revision, effect, risk, scope, scope_id, scope_revision, title, tool, upstream)",
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
        ["g.toml:4: reads.get_note.scope: required: scope rules, or \"open\" to opt out explicitly"]
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
    assert_eq!(o.issuer, "https://id.example/realms/ops");
    assert_eq!(
        o.required_claim(),
        Some(Ok(("groups".to_owned(), "approvers".to_owned())))
    );
    assert_eq!(from_toml_serde(good).expect("serde"), c);
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
            "g.toml:11: page.oidc.client_secret: unknown key (expected one of: allow_emails, allow_subjects, client_id, client_secret_env, client_secret_file, issuer, label, redirect_uri, require_claim, scopes)",
        ]
    );
    assert_eq!(
        errors("[page]\ntoken_login = false\n"),
        ["g.toml:2: page.token_login: token sign-in can be turned off only with [page.oidc]"]
    );
    assert_eq!(
        errors("\n[page.oidc]\nissuer = \"https://id.example\"\nclient_id = \"x\"\n"),
        ["g.toml:2: page.oidc: needs an allow-list: allow_subjects, allow_emails or require_claim"]
    );
    assert_eq!(
        errors("[page.oidc]\nclient_id = \"x\"\nallow_subjects = [\"a\"]\n"),
        ["g.toml:1: page.oidc.issuer: required"]
    );
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
        from_toml_serde(&write("", "")).expect("serde").writes["set_note"].approval,
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
        ["g.toml:15: writes.set_note.approval: unknown variant `anyone`, expected `operator` or `client`"]
    );
    assert_eq!(
        from_toml_serde(&write("approval = \"anyone\"", "apps = true")).map(|_| ()),
        Err("TOML parse error at line 15, column 12\n   |\n15 | approval = \"anyone\"\n   |            ^^^^^^^^\nunknown variant `anyone`, expected `operator` or `client`\n".to_owned())
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
            "g.toml:14: writes.set_note.scope.arguments[0]: cannot parse \"id == 1e400\": the number 1e400 cannot be represented: it is beyond the largest binary64 number",
            "g.toml:14: writes.set_note.scope.arguments[1]: cannot parse \"id == 1234567890123456789012345678901234567890\": the integer 1234567890123456789012345678901234567890 cannot be compared exactly: integers must lie within -9223372036854775808 to 18446744073709551615",
            "g.toml:14: writes.set_note.scope.arguments[3]: cannot parse \"path within \\\"/srv/notes/\\\"\": `within` needs an absolute directory path in normal form, such as \"/srv/notes\" (starting with /; no empty, . or .. segment, so no trailing /; no NUL or other control character, \\ or %)",
        ]
    );
}
