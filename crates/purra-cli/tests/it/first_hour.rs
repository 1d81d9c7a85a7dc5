//! Issue 44, "an operator's first hour": `purra gateway --check` over the official
//! server-filesystem (TypeScript SDK) says exactly what the start would meet. One mistake in the
//! file is one mistake in the output (no spurious draft-07 lines); a tool the upstream marks
//! destructive or not read-only bound as a read is a mistake unless the binding asserts it only
//! reads (then a warning at every start); an unusable store and a busy address are mistakes at
//! their key and line (exit 78), as at start; an argument rule on an argument the tool does not
//! take is a mistake naming the rule, the argument and the tool's arguments.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::support::peers;
use crate::support::run::purra;

use peers::{fresh_dir, own_lines, peer, peers_dir, repo_root};

/// A directory with `gateway.toml` over server-filesystem (serving `files/`), removed when
/// dropped.
struct Scenario {
    dir: PathBuf,
    text: String,
}

impl Drop for Scenario {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Scenario {
    /// `[gateway]` with `gateway` (its lines), server-filesystem as `up`, then `bindings`.
    fn new(name: &str, gateway: &str, bindings: &str) -> Scenario {
        let dir = fresh_dir("first-hour", name);
        let files = dir.join("files");
        std::fs::create_dir_all(&files).expect("files");
        let command = vec![
            peer(peers_dir().join("bin/node")),
            peer(repo_root().join(
                "peers/node/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
            )),
            files.to_string_lossy().into_owned(),
        ];
        let text =
            format!("[gateway]\n{gateway}\n\n[upstreams.up]\ncommand = {command:?}\n\n{bindings}");
        std::fs::write(dir.join("gateway.toml"), &text).expect("config");
        Scenario { dir, text }
    }

    fn config(&self) -> String {
        self.dir.join("gateway.toml").to_string_lossy().into_owned()
    }

    /// The configuration's 1-based line that starts with `prefix`.
    fn line_of(&self, prefix: &str) -> usize {
        1 + self
            .text
            .lines()
            .position(|l| l.starts_with(prefix))
            .expect("a line")
    }

    fn check(&self) -> Output {
        purra(&["gateway", "--config", &self.config(), "--check"])
    }

    /// `purra gateway --check` run by `user`'s command line (`setpriv ...`), `purra` last.
    fn check_as(&self, user: &[&str]) -> Output {
        Command::new(user[0])
            .args(&user[1..])
            .args([env!("CARGO_BIN_EXE_purra"), "gateway", "--config"])
            .arg(self.config())
            .arg("--check")
            .stdin(Stdio::null())
            .output()
            .expect("run purra as another user")
    }

    /// `purra gateway` (a real start; it must fail before serving).
    fn start(&self) -> Output {
        purra(&["gateway", "--config", &self.config()])
    }
}

const READ: &str = r#"[reads.read_text_file]
upstream = "up"
title = "Read a file"
scope = "open"
"#;

const WRITE: &str = r#"[writes.write_file]
upstream = "up"
title = "Write a file"
effect = "destructive"
binding_id = "fs"
binding_revision = "1"
scope_id = "fs"
scope_revision = "1"

[writes.write_file.scope]
arguments = ["path within \"/srv\""]
"#;

/// Defect 1: with one other mistake in the file, the all-mistakes path checked the upstream's
/// tools under the library's limits (earlier dialects off) and reported every draft-07 schema.
#[test]
fn defect_1_one_mistake_over_server_filesystem_is_the_only_mistake() {
    let sc = Scenario::new(
        "dialects",
        "db = \"gateway.db\"\napproval_wait = \"90\"",
        &format!("{READ}\n{WRITE}"),
    );
    let out = sc.check();
    assert_eq!(out.status.code(), Some(78));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    assert_eq!(
        own_lines(&out.stderr),
        [
            "purra: the configuration has 1 mistake:".to_owned(),
            format!(
                "  {}:{}: gateway.approval_wait: expected a duration with a unit ms, s, m or h (such as \"30s\"), found \"90\"",
                sc.config(),
                sc.line_of("approval_wait")
            ),
        ]
    );
}

const WRITE_FILE_AS_READ: &str = r#"[reads.write_file]
upstream = "up"
title = "Write a file"
scope = "open"
"#;

/// `bindings` over server-filesystem hold one mistake, `mistake(sc)`: `--check` and the start
/// both refuse the file with exactly it (exit 78, nothing on stdout); beside another mistake (an
/// `approval_wait` without a unit, so the path that reports every mistake at once) both are
/// reported.
fn refused_alone_and_beside_another(
    name: &str,
    bindings: &str,
    mistake: impl Fn(&Scenario) -> String,
) {
    let sc = Scenario::new(
        name,
        "db = \"gateway.db\"\nlisten = \"127.0.0.1:0\"",
        bindings,
    );
    let alone = vec![
        "purra: the configuration has 1 mistake:".to_owned(),
        mistake(&sc),
    ];
    let out = sc.check();
    assert_eq!(out.status.code(), Some(78));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    assert_eq!(own_lines(&out.stderr), alone);
    let out = sc.start();
    assert_eq!(out.status.code(), Some(78));
    assert_eq!(own_lines(&out.stderr), alone);

    let sc = Scenario::new(
        &format!("{name}-and-more"),
        "db = \"gateway.db\"\napproval_wait = \"90\"",
        bindings,
    );
    let out = sc.check();
    assert_eq!(out.status.code(), Some(78));
    assert_eq!(
        own_lines(&out.stderr),
        [
            "purra: the configuration has 2 mistakes:".to_owned(),
            format!(
                "  {}:{}: gateway.approval_wait: expected a duration with a unit ms, s, m or h (such as \"30s\"), found \"90\"",
                sc.config(),
                sc.line_of("approval_wait")
            ),
            mistake(&sc),
        ]
    );
}

/// Defect 2: server-filesystem's `write_file` (`destructiveHint: true`, `readOnlyHint: false`)
/// bound under `[reads.*]` ran without approval; now `--check` and the start refuse it.
#[test]
fn defect_2_a_destructive_tool_bound_as_a_read_is_refused() {
    let refused = |sc: &Scenario| {
        format!(
            "  {}:{}: reads.write_file: upstream \"up\" marks the tool \"write_file\" destructive (destructiveHint: true) and not read-only (readOnlyHint: false), but it is bound as a read, which runs without approval: bind it as [writes.write_file], or, if it only reads, say asserted_read_only = true",
            sc.config(),
            sc.line_of("[reads.write_file]")
        )
    };
    refused_alone_and_beside_another("destructive-read", WRITE_FILE_AS_READ, refused);
}

/// Defect 2: with `asserted_read_only = true` the host takes it on itself; the warning is
/// printed by `--check` (and at every start).
#[test]
fn defect_2_a_destructive_tool_asserted_read_only_is_served_with_a_warning() {
    let sc = Scenario::new(
        "asserted-read",
        "db = \"gateway.db\"\nlisten = \"127.0.0.1:0\"",
        &format!("{WRITE_FILE_AS_READ}asserted_read_only = true\n"),
    );
    let out = sc.check();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "configuration ok: 1 tools: write_file\n"
    );
    assert_eq!(
        own_lines(&out.stderr),
        [format!(
            "purra gateway: warning: {}:{}: reads.write_file.asserted_read_only: upstream \"up\" marks the tool \"write_file\" destructive (destructiveHint: true) and not read-only (readOnlyHint: false); it is served as a read, without approval, because the binding asserts it only reads",
            sc.config(),
            sc.line_of("asserted_read_only")
        )]
    );
}

/// `--check` on `sc` fails with exactly one mistake at `key` (line of `prefix`) whose message
/// starts with `message`; the start fails with the same place.
fn one_mistake(sc: &Scenario, key: &str, prefix: &str, message: &str) {
    let out = sc.check();
    let lines = own_lines(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{lines:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0], "purra: the configuration has 1 mistake:");
    let at = format!("  {}:{}: {key}: {message}", sc.config(), sc.line_of(prefix));
    assert!(lines[1].starts_with(&at), "{:?} is not {at:?}…", lines[1]);
}

fn store_case(name: &str, db: &str, prepare: impl FnOnce(&Path), reason: &str) -> Scenario {
    let sc = Scenario::new(
        name,
        &format!("db = {db:?}\nlisten = \"127.0.0.1:0\""),
        READ,
    );
    prepare(&sc.dir);
    one_mistake(&sc, "gateway.db", "db = ", reason);
    // The start names the key and line too.
    let out = sc.start();
    assert_ne!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let at = format!("{}:{}: gateway.db: ", sc.config(), sc.line_of("db = "));
    assert!(stderr.contains(&at), "{stderr}");
    sc
}

/// Defect 3: a store in a directory that does not exist.
#[test]
fn defect_3_check_refuses_a_store_in_a_missing_directory() {
    let _ = store_case(
        "store-missing",
        "missing/gateway.db",
        |_| {},
        "cannot open the store ",
    );
}

/// Defect 3: a store path that is a directory.
#[test]
fn defect_3_check_refuses_a_store_that_is_a_directory() {
    let _ = store_case(
        "store-dir",
        "adir",
        |dir| std::fs::create_dir(dir.join("adir")).expect("dir"),
        "cannot open the store ",
    );
}

/// Defect 3: a store file that is not SQLite (left as it was).
#[test]
fn defect_3_check_refuses_a_store_that_is_not_sqlite() {
    let text = "not a database, but a file someone keeps\n".repeat(200);
    let kept = text.clone();
    let sc = store_case(
        "store-text",
        "notes.txt",
        move |dir| std::fs::write(dir.join("notes.txt"), kept).expect("file"),
        "cannot open the store ",
    );
    // Nothing of it was lost or changed.
    assert_eq!(
        std::fs::read_to_string(sc.dir.join("notes.txt")).expect("file"),
        text
    );
}

/// Defect 3: PostgreSQL that is not there (a closed local port).
#[test]
fn defect_3_check_refuses_a_postgres_store_that_is_down() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let _ = store_case(
        "store-postgres",
        &format!("postgres://purra@127.0.0.1:{port}/purra"),
        |_| {},
        "cannot open the store postgres://purra@127.0.0.1:",
    );
}

/// Defect 3: a store in a directory the process may not write. Root may write anywhere, so as
/// root the check runs as the unprivileged user 65534 (`setpriv`, or `runuser -u nobody`), over
/// a configuration that user may read but whose store directory it may not write; only without
/// either tool is the case skipped, saying so.
#[test]
fn defect_3_check_refuses_a_store_in_a_read_only_directory() {
    use std::os::unix::fs::PermissionsExt;
    let sc = Scenario::new(
        "store-readonly",
        "db = \"ro/gateway.db\"\nlisten = \"127.0.0.1:0\"",
        READ,
    );
    let ro = sc.dir.join("ro");
    std::fs::create_dir(&ro).expect("dir");
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).expect("chmod");
    let out = if std::fs::write(ro.join("probe"), "").is_err() {
        sc.check()
    } else {
        std::fs::remove_file(ro.join("probe")).expect("probe");
        // Everything the other user needs is readable (the scenario's directory, the binary,
        // the peers); the store's directory stays unwritable to it.
        std::fs::set_permissions(&sc.dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let path = std::env::var_os("PATH").unwrap_or_default();
        let found = |tool: &str| {
            std::env::split_paths(&path)
                .map(|d| d.join(tool))
                .find(|p| p.is_file())
                .map(|p| p.to_string_lossy().into_owned())
        };
        let out = if let Some(setpriv) = found("setpriv") {
            sc.check_as(&[&setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"])
        } else if let Some(runuser) = found("runuser") {
            sc.check_as(&[&runuser, "-u", "nobody", "--"])
        } else {
            eprintln!(
                "skipped: this process may write a read-only directory (root) and neither \
                 setpriv nor runuser is installed to run the check as another user"
            );
            return;
        };
        assert!(
            !ro.join("gateway.db").exists(),
            "the check created the store"
        );
        out
    };
    let db = ro.join("gateway.db").display().to_string();
    assert_eq!(out.status.code(), Some(78));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    assert_eq!(
        own_lines(&out.stderr),
        [
            "purra: the configuration has 1 mistake:".to_owned(),
            format!(
                "  {}:{}: gateway.db: cannot open the store {db}: store failure: could not \
                 create {db}: Permission denied (os error 13)",
                sc.config(),
                sc.line_of("db = ")
            ),
        ]
    );
    let _ = std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o755));
}

/// Defect 3: a store `--check` created is not left behind; `localhost:PORT` is an address.
#[test]
fn defect_3_check_leaves_no_store_behind_and_accepts_localhost() {
    let sc = Scenario::new(
        "store-fresh",
        "db = \"gateway.db\"\nlisten = \"localhost:0\"",
        READ,
    );
    let out = sc.check();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "configuration ok: 1 tools: read_text_file\n"
    );
    let left: Vec<String> = std::fs::read_dir(&sc.dir)
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("gateway.db"))
        .collect();
    assert_eq!(left, Vec::<String>::new());
}

/// Defect 3: the listen and metrics addresses already in use are mistakes at their keys; the
/// start names the listener key too.
#[test]
fn defect_3_check_refuses_busy_addresses() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = busy.local_addr().expect("addr");
    let sc = Scenario::new(
        "busy",
        &format!(
            "db = \"gateway.db\"\nlisten = \"{addr}\"\n\n[telemetry]\nmetrics_listen = \"{addr}\""
        ),
        READ,
    );
    let in_use = format!(
        "address {addr} is in use (another process listens on it: stop it or choose another address)"
    );
    let out = sc.check();
    assert_eq!(out.status.code(), Some(78));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    assert_eq!(
        own_lines(&out.stderr),
        [
            "purra: the configuration has 2 mistakes:".to_owned(),
            format!(
                "  {}:{}: gateway.listen: {in_use}",
                sc.config(),
                sc.line_of("listen = ")
            ),
            format!(
                "  {}:{}: telemetry.metrics_listen: {in_use}",
                sc.config(),
                sc.line_of("metrics_listen = ")
            ),
        ]
    );
    // Nothing was left behind by the check.
    assert!(!sc.dir.join("gateway.db").exists());
    // A file for a running gateway's reload: its listeners are that gateway's, not tried.
    let out = purra(&[
        "gateway",
        "--config",
        &sc.config(),
        "--check",
        "--for-reload",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "configuration ok: 1 tools: read_text_file\n"
    );
    // The start: the metrics listener is bound first, and named.
    let out = sc.start();
    assert_eq!(out.status.code(), Some(78));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let at = format!(
        "{}:{}: telemetry.metrics_listen: {in_use}",
        sc.config(),
        sc.line_of("metrics_listen = ")
    );
    assert!(stderr.contains(&at), "{stderr}");
    drop(busy);
}

/// Defect 4: a rule on an argument the tool does not take passed `--check` and then denied
/// every call.
#[test]
fn defect_4_a_rule_on_a_missing_argument_is_a_mistake() {
    let refused = |sc: &Scenario| {
        format!(
            "  {}:{}: writes.write_file.scope.arguments[0]: the rule `pth within \"/srv\"` names the argument `pth`, which the tool \"write_file\" of upstream \"up\" does not take (it takes: path, content; did you mean `path`?): it would deny every call",
            sc.config(),
            sc.line_of("arguments = ")
        )
    };
    refused_alone_and_beside_another(
        "missing-argument",
        &WRITE.replace("path within", "pth within"),
        refused,
    );

    // The rule as meant passes.
    let ok = Scenario::new(
        "present-argument",
        "db = \"gateway.db\"\nlisten = \"127.0.0.1:0\"",
        WRITE,
    );
    let out = ok.check();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A scenario whose only upstream is `command` (a bound read over it).
fn broken(name: &str, command: &[&str], extra: &str) -> (PathBuf, String) {
    let dir = fresh_dir("first-hour", name);
    let text = format!(
        "[gateway]\ndb = \"gateway.db\"\n{extra}\n[upstreams.up]\ncommand = {command:?}\n\n[reads.get]\nupstream = \"up\"\ntitle = \"Get\"\nscope = \"open\"\n"
    );
    let config = dir.join("gateway.toml");
    std::fs::write(&config, text).expect("config");
    (dir, config.to_string_lossy().into_owned())
}

/// Friction: an upstream that ends at start said only "connection closed"; now its exit status
/// and its last line on stderr (and what it wrote still reaches the gateway's stderr).
#[test]
fn an_upstream_that_ends_at_start_names_its_exit_status_and_last_stderr_line() {
    let (dir, config) = broken(
        "crash",
        &[
            "sh",
            "-c",
            "echo 'starting' >&2; echo 'fatal: no token' >&2; exit 3",
        ],
        "",
    );
    let out = purra(&["gateway", "--config", &config, "--check"]);
    assert_eq!(out.status.code(), Some(78));
    assert_eq!(
        own_lines(&out.stderr),
        [
            "purra: the configuration has 1 mistake:".to_owned(),
            format!("  {config}:4: upstreams.up: cannot connect: the command exited with status 3 before answering initialize (last stderr line: \"fatal: no token\")"),
        ]
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("starting\nfatal: no token\n"), "{stderr}");
    let _ = std::fs::remove_dir_all(dir);
}

/// Friction: a hanging upstream took 60 s and named no setting; now `[limits] timeout` bounds
/// the handshake and the message names it.
#[test]
fn a_hanging_upstream_names_the_setting_that_bounds_it() {
    let (dir, config) = broken("hang", &["sleep", "30"], "\n[limits]\ntimeout = \"1s\"\n");
    let started = std::time::Instant::now();
    let out = purra(&["gateway", "--config", &config, "--check"]);
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(78));
    assert_eq!(
        own_lines(&out.stderr),
        [
            "purra: the configuration has 1 mistake:".to_owned(),
            format!("  {config}:7: upstreams.up: cannot connect: no answer within 1s (the [limits] timeout bounds the handshake and the listing)"),
        ]
    );
    let _ = std::fs::remove_dir_all(dir);
}
