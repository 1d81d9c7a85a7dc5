//! The durable-store subcommands run as a user runs them: `purra demo` (a gateway over the demo
//! server and a scripted client: complete, stopped at the approval, denied, interactive, run
//! twice; on SQLite and on PostgreSQL), `purra approvals` and `purra runs` on the store it leaves.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Value};

use crate::support::peers::postgres_schema;
use crate::support::run::{expect_code, json_of, purra_in, TempDir, QUICK_LIMIT as LIMIT, RUN};

/// The store file of a test's directory.
fn db_in(tmp: &TempDir) -> String {
    tmp.0.join("d.db").to_string_lossy().into_owned()
}

fn has_line(text: &str, line: &str) {
    assert!(
        text.lines().any(|l| l == line),
        "no line {line:?} in:\n{text}"
    );
}

fn has_prefix(text: &str, prefix: &str) -> String {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting {prefix:?} in:\n{text}"))
        .to_owned()
}

const SENT: &str = r#"client: set_note -> {"stored":"hello from purra","writes":1}"#;
const AGAIN: &str = r#"client: set_note again, same arguments -> {"stored":"hello from purra","writes":1} (the stored receipt)"#;

#[test]
fn demo_writes_once_and_a_second_run_sends_nothing() {
    let tmp = TempDir::new("cli", "demo");
    let db = db_in(&tmp);
    let first = expect_code(&purra_in(&tmp.0, &["demo", "--db", &db]), 0);
    has_line(&first, "client: tools/list -> get_note, set_note");
    has_line(&first, r#"client: get_note -> {"note":"","writes":0}"#);
    has_line(&first, "pending approval: approval-1");
    let approving = has_prefix(&first, "approving: `");
    assert!(
        approving.ends_with(&format!(
            " approvals approve approval-1 --db {db}` (another process, as an operator would)"
        )),
        "{approving}"
    );
    has_line(&first, SENT);
    has_line(&first, AGAIN);
    has_line(
        &first,
        "server: write requests this server process received = 1",
    );
    has_line(
        &first,
        &format!("sent once: the claim was recorded in {db} before the request left the gateway."),
    );

    let second = expect_code(&purra_in(&tmp.0, &["demo", "--db", &db]), 0);
    assert!(!second.contains("pending approval"), "{second}");
    has_line(&second, SENT);
    has_line(&second, AGAIN);
    has_line(
        &second,
        "server: write requests this server process received = 0",
    );
    has_line(
        &second,
        &format!("already done: an earlier run sent this write; its receipt is in {db}, so nothing was sent now."),
    );

    // The store agrees: one approval, one claim, committed, decided by `purra approvals`.
    let run = json_of(&purra_in(
        &tmp.0,
        &["runs", "show", RUN, "--db", &db, "--json"],
    ));
    assert_eq!(run["state"], "finished");
    let approvals = run["approvals"].as_array().expect("approvals");
    assert_eq!(approvals.len(), 1, "{run}");
    assert_eq!(approvals[0]["dispatches"], 1);
    assert_eq!(approvals[0]["effect"], "committed");
    assert_eq!(approvals[0]["decision"]["approver"], "purra demo (cli)");
    assert_eq!(
        approvals[0]["receipt"],
        json!({
            "text": [r#"{"stored":"hello from purra","writes":1}"#],
            "structured": {"stored": "hello from purra", "writes": 1}
        })
    );
}

#[test]
fn approvals_and_runs_on_a_demo_stopped_at_the_approval() {
    let tmp = TempDir::new("cli", "approvals");
    let db = db_in(&tmp);
    let prep = expect_code(&purra_in(&tmp.0, &["demo", "--no-approve", "--db", &db]), 0);
    has_line(&prep, "pending approval: approval-1");
    let result = has_prefix(&prep, "client: set_note -> ");
    assert!(
        result.starts_with("client: set_note -> set_note was not sent: approval approval-1 is pending (intent sha256:"),
        "{result}"
    );
    has_prefix(&prep, "left pending. Decide it with `");
    has_line(
        &prep,
        "server: write requests this server process received = 0",
    );
    let digest = result
        .split("(intent ")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .expect("digest")
        .to_owned();

    // approvals list / show, readable and JSON.
    let list = expect_code(&purra_in(&tmp.0, &["approvals", "list", "--db", &db]), 0);
    let rows: Vec<Vec<&str>> = list
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0], ["ID", "STATE", "TOOL", "RUN", "EFFECT"], "{list}");
    assert_eq!(
        rows[1],
        ["approval-1", "pending", "set_note", RUN, "-"],
        "{list}"
    );
    assert_eq!(rows.len(), 2, "{list}");
    let list = json_of(&purra_in(
        &tmp.0,
        &["approvals", "list", "--db", &db, "--json"],
    ));
    assert_eq!(list["approvals"][0]["id"], "approval-1");
    assert_eq!(list["approvals"][0]["state"], "pending");
    assert_eq!(list["approvals"][0]["intentDigest"], digest.as_str());

    let show = expect_code(
        &purra_in(&tmp.0, &["approvals", "show", "approval-1", "--db", &db]),
        0,
    );
    has_line(&show, "approval: approval-1");
    has_line(&show, "state: pending");
    has_line(&show, "tool: set_note");
    has_line(&show, r#"arguments: {"text":"hello from purra"}"#);
    has_line(&show, &format!("run: {RUN}"));
    has_line(&show, &format!("intent digest: {digest}"));
    has_line(&show, "dispatches: 0");
    let show = json_of(&purra_in(
        &tmp.0,
        &["approvals", "show", "approval-1", "--db", &db, "--json"],
    ));
    assert_eq!(show["arguments"]["text"], "hello from purra");
    assert_eq!(show["effect"], Value::Null);

    // runs list / show.
    let runs = expect_code(&purra_in(&tmp.0, &["runs", "list", "--db", &db]), 0);
    let rows: Vec<Vec<&str>> = runs
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        [
            vec!["ID", "STATE", "APPROVALS"],
            vec![RUN, "suspended", "approval-1"]
        ]
    );
    let run = expect_code(&purra_in(&tmp.0, &["runs", "show", RUN, "--db", &db]), 0);
    has_line(&run, "state: suspended");
    has_line(&run, "agent: demo");
    has_line(
        &run,
        r#"waiting for: approval-1 to call set_note {"text":"hello from purra"}"#,
    );
    let run = json_of(&purra_in(
        &tmp.0,
        &["runs", "show", RUN, "--db", &db, "--json"],
    ));
    assert_eq!(run["state"], "suspended");
    assert_eq!(run["pendingCall"]["approvalId"], "approval-1");
    let runs = json_of(&purra_in(&tmp.0, &["runs", "list", "--db", &db, "--json"]));
    assert_eq!(runs["runs"][0]["id"], RUN);

    // Unknown ids: exit 2 with a message.
    for args in [
        vec!["approvals", "show", "approval-9"],
        vec!["approvals", "approve", "approval-9"],
        vec!["approvals", "deny", "nonsense"],
        vec!["runs", "show", "nope"],
    ] {
        let mut full = args.clone();
        full.extend(["--db", db.as_str()]);
        let out = purra_in(&tmp.0, &full);
        expect_code(&out, 2);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("unknown"), "{args:?}: {err}");
    }
    let missing = purra_in(&tmp.0, &["approvals", "list", "--db", "no-such.db"]);
    expect_code(&missing, 2);
    assert!(
        !tmp.0.join("no-such.db").exists(),
        "a missing store is not created"
    );

    // Approve; a second decision is a conflict (exit 3) and changes nothing.
    let approved = expect_code(
        &purra_in(
            &tmp.0,
            &[
                "approvals",
                "approve",
                "approval-1",
                "--db",
                &db,
                "--note",
                "looks right",
            ],
        ),
        0,
    );
    has_line(&approved, &format!("approved: approval-1 (set_note {RUN})"));
    for verb in ["deny", "approve"] {
        let again = purra_in(
            &tmp.0,
            &["approvals", verb, "approval-1", "--db", &db, "--json"],
        );
        expect_code(&again, 3);
        let err = json_of(&again);
        assert_eq!(err["error"]["kind"], "conflict");
        assert_eq!(
            err["error"]["message"],
            "approval approval-1 is already decided (approved); a decision is final"
        );
    }
    let show = json_of(&purra_in(
        &tmp.0,
        &["approvals", "show", "approval-1", "--db", &db, "--json"],
    ));
    assert_eq!(show["state"], "approved");
    assert_eq!(show["decision"]["verdict"], "approve");
    assert_eq!(show["decision"]["approver"], "operator (cli)");
    assert_eq!(show["decision"]["note"], "looks right");

    // The demo makes the same call again: the gateway claims the approval and sends it once.
    let resumed = expect_code(&purra_in(&tmp.0, &["demo", "--db", &db]), 0);
    assert!(!resumed.contains("pending approval"), "{resumed}");
    has_line(&resumed, SENT);
    has_line(&resumed, AGAIN);
    has_line(
        &resumed,
        "server: write requests this server process received = 1",
    );
    let list = expect_code(&purra_in(&tmp.0, &["approvals", "list", "--db", &db]), 0);
    let row: Vec<&str> = list
        .lines()
        .nth(1)
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(
        row,
        ["approval-1", "claimed", "set_note", RUN, "committed"],
        "{list}"
    );
    let runs = expect_code(&purra_in(&tmp.0, &["runs", "list", "--db", &db]), 0);
    assert!(
        runs.lines()
            .any(|l| l.split_whitespace().eq([RUN, "finished", "approval-1"])),
        "{runs}"
    );
}

#[test]
fn a_request_past_its_expiry_is_listed_expired_and_refuses_a_decision() {
    use purra_core::ApprovalGateway as _;
    let tmp = TempDir::new("cli", "expired");
    let db = db_in(&tmp);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let store = purra_sqlite::SqliteStore::open(&db).expect("store");
        let mut old = purra_store_tests::request("old");
        old.expires_at = Some(old.requested_at + Duration::from_secs(1));
        let mut live = purra_store_tests::request("live");
        live.expires_at = Some(SystemTime::now() + Duration::from_secs(3600));
        store.prepare(old).await.expect("prepare");
        store.prepare(live).await.expect("prepare");
    });
    let list = expect_code(&purra_in(&tmp.0, &["approvals", "list", "--db", &db]), 0);
    let states: Vec<(&str, &str)> = list
        .lines()
        .skip(1)
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((w.next()?, w.next()?))
        })
        .collect();
    assert_eq!(
        states,
        [("approval-2", "pending"), ("approval-1", "expired")],
        "{list}"
    );
    let show = json_of(&purra_in(
        &tmp.0,
        &["approvals", "show", "approval-1", "--db", &db, "--json"],
    ));
    assert_eq!(show["state"], "expired");
    assert_eq!(show["requestExpiresAtMs"], 6000);
    let refused = purra_in(&tmp.0, &["approvals", "approve", "approval-1", "--db", &db]);
    expect_code(&refused, 3);
    assert_eq!(
        String::from_utf8_lossy(&refused.stderr).trim_end(),
        "purra: approval approval-1 expired undecided; a decision is no longer accepted (the \
         same call made again asks for a new approval)"
    );
    let approved = purra_in(&tmp.0, &["approvals", "approve", "approval-2", "--db", &db]);
    expect_code(&approved, 0);
    // Issue 44: operator output carries no demo hints (only `purra demo` prints those).
    let said = String::from_utf8_lossy(&approved.stdout);
    assert!(
        said.ends_with(
            "a gateway call waiting on it sends the write once; otherwise the same call made again does\n"
        ),
        "{said}"
    );
    assert!(!said.contains("demo"), "{said}");
    let list = json_of(&purra_in(
        &tmp.0,
        &["approvals", "list", "--db", &db, "--json"],
    ));
    assert_eq!(list["approvals"][0]["state"], "approved");
    assert_eq!(list["approvals"][1]["state"], "expired");
}

/// Issue 50, the store at scale: `purra approvals list` counts the older approvals up to 1 001
/// rows, never the whole store: past 1 000 its last line says `1000+` and `--json` says
/// `"more": 1000, "moreAtLeast": true`; a page with fewer behind it counts them exactly.
#[test]
fn approvals_list_past_a_thousand_older_says_1000_plus() {
    use purra_core::ApprovalGateway as _;
    let tmp = TempDir::new("cli", "list-thousand");
    let db = db_in(&tmp);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let store = purra_sqlite::SqliteStore::open(&db).expect("store");
        // Prepared at once (their commits grouped), so approval-1..=1052 in some order.
        let mut preparing = tokio::task::JoinSet::new();
        for n in 1..=1052 {
            let store = store.clone();
            preparing.spawn(async move {
                store
                    .prepare(purra_store_tests::request(&format!("t{n}")))
                    .await
                    .expect("prepare")
            });
        }
        while let Some(done) = preparing.join_next().await {
            done.expect("prepared");
        }
    });
    let first = expect_code(&purra_in(&tmp.0, &["approvals", "list", "--db", &db]), 0);
    assert_eq!(
        first.lines().last(),
        Some("1000+ more, older: see them with --before approval-1003"),
        "{first}"
    );
    let page = json_of(&purra_in(
        &tmp.0,
        &["approvals", "list", "--db", &db, "--json"],
    ));
    assert_eq!(
        (&page["next"], &page["more"], &page["moreAtLeast"]),
        (&json!("approval-1003"), &json!(1000), &json!(true))
    );
    let second = expect_code(
        &purra_in(
            &tmp.0,
            &[
                "approvals",
                "list",
                "--db",
                &db,
                "--before",
                "approval-1003",
            ],
        ),
        0,
    );
    assert_eq!(
        second.lines().last(),
        Some("952 more, older: see them with --before approval-953"),
        "{second}"
    );
    let page = json_of(&purra_in(
        &tmp.0,
        &[
            "approvals",
            "list",
            "--db",
            &db,
            "--before",
            "approval-1003",
            "--json",
        ],
    ));
    assert_eq!(
        (&page["more"], &page["moreAtLeast"]),
        (&json!(952), &json!(false))
    );
}

/// Finding 5 of the security review: a flood of approvals must not hide real ones. `purra
/// approvals list` shows a page, the newest first, and a last line saying how many more are
/// older and how to see them; `--json` carries the cursor and the count; a cursor that is not an
/// approval id, and a limit out of its bounds, are usage errors.
#[test]
fn approvals_list_pages_newest_first_with_a_more_line() {
    use purra_core::ApprovalGateway as _;
    let tmp = TempDir::new("cli", "list-pages");
    let db = db_in(&tmp);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let store = purra_sqlite::SqliteStore::open(&db).expect("store");
        for n in 1..=60 {
            store
                .prepare(purra_store_tests::request(&format!("r{n}")))
                .await
                .expect("prepare");
        }
    });
    let ids = |list: &str| -> Vec<String> {
        list.lines()
            .skip(1)
            .filter(|l| l.starts_with("approval-"))
            .map(|l| l.split_whitespace().next().unwrap_or("").to_owned())
            .collect()
    };
    let want = |range: std::ops::RangeInclusive<u32>| -> Vec<String> {
        range.rev().map(|n| format!("approval-{n}")).collect()
    };
    let first = expect_code(&purra_in(&tmp.0, &["approvals", "list", "--db", &db]), 0);
    assert_eq!(ids(&first), want(11..=60), "{first}");
    assert_eq!(
        first.lines().last(),
        Some("10 more, older: see them with --before approval-11"),
        "{first}"
    );
    let rest = expect_code(
        &purra_in(
            &tmp.0,
            &["approvals", "list", "--db", &db, "--before", "approval-11"],
        ),
        0,
    );
    assert_eq!(ids(&rest), want(1..=10), "{rest}");
    assert!(
        rest.lines().last().unwrap_or("").starts_with("approval-1 "),
        "{rest}"
    );
    let page = json_of(&purra_in(
        &tmp.0,
        &[
            "approvals",
            "list",
            "--db",
            &db,
            "--limit",
            "3",
            "--before",
            "approval-10",
            "--json",
        ],
    ));
    let shown: Vec<&str> = page["approvals"]
        .as_array()
        .expect("approvals")
        .iter()
        .map(|a| a["id"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(shown, ["approval-9", "approval-8", "approval-7"]);
    assert_eq!(
        (&page["next"], &page["more"]),
        (&json!("approval-7"), &json!(6))
    );
    let last = json_of(&purra_in(
        &tmp.0,
        &[
            "approvals",
            "list",
            "--db",
            &db,
            "--before",
            "approval-2",
            "--json",
        ],
    ));
    assert_eq!(last["approvals"][0]["id"], "approval-1");
    assert_eq!((&last["next"], &last["more"]), (&Value::Null, &json!(0)));
    let none = expect_code(
        &purra_in(
            &tmp.0,
            &["approvals", "list", "--db", &db, "--before", "approval-1"],
        ),
        0,
    );
    assert_eq!(
        none.trim_end(),
        format!("no approval older than approval-1 in {db}")
    );
    let bad = purra_in(
        &tmp.0,
        &["approvals", "list", "--db", &db, "--before", "nonsense"],
    );
    expect_code(&bad, 64);
    assert_eq!(
        String::from_utf8_lossy(&bad.stderr).trim_end(),
        "purra: --before needs an approval id such as approval-12\n\
         Try 'purra --help' for more information."
    );
    for limit in ["0", "1001"] {
        expect_code(
            &purra_in(
                &tmp.0,
                &["approvals", "list", "--db", &db, "--limit", limit],
            ),
            64,
        );
    }
}

#[test]
fn help_lists_the_store_subcommands() {
    let tmp = TempDir::new("cli", "help");
    let help = expect_code(&purra_in(&tmp.0, &["--help"]), 0);
    for needle in [
        "approvals",
        "runs",
        "demo",
        "gateway",
        "  3   conflict",
        "  78  the gateway's configuration file has mistakes",
        "purra approvals list|show ID|approve ID|deny ID [--note TEXT]",
        "purra approvals serve                the approver page on 127.0.0.1:8470",
        "purra runs list|show ID",
        "purra gateway --config gateway.toml",
    ] {
        assert!(
            help.contains(needle),
            "{needle:?} missing from --help:\n{help}"
        );
    }
    assert!(
        !help.contains("serve-demo"),
        "the demo server is an internal subcommand"
    );
    let demo = expect_code(&purra_in(&tmp.0, &["demo", "--help"]), 0);
    for needle in [
        "--db <PATH|URL>",
        "[default: purra.db]",
        "--no-approve",
        "--interactive",
    ] {
        assert!(
            demo.contains(needle),
            "{needle:?} missing from demo --help:\n{demo}"
        );
    }
    let both = purra_in(&tmp.0, &["demo", "--no-approve", "--interactive"]);
    expect_code(&both, 64);
    let gateway = expect_code(&purra_in(&tmp.0, &["gateway", "--help"]), 0);
    for needle in [
        "--config <FILE>",
        "--check",
        "--page [<ADDR>]",
        "--page-approver <NAME>",
    ] {
        assert!(
            gateway.contains(needle),
            "{needle:?} missing from gateway --help:\n{gateway}"
        );
    }
}

#[test]
fn a_denied_demo_write_is_never_sent() {
    let tmp = TempDir::new("cli", "deny");
    let db = db_in(&tmp);
    expect_code(&purra_in(&tmp.0, &["demo", "--no-approve", "--db", &db]), 0);
    let denied = json_of(&purra_in(
        &tmp.0,
        &[
            "approvals",
            "deny",
            "approval-1",
            "--note",
            "not today",
            "--db",
            &db,
            "--json",
        ],
    ));
    assert_eq!(denied["state"], "denied");
    let out = expect_code(&purra_in(&tmp.0, &["demo", "--db", &db]), 0);
    has_line(
        &out,
        "client: set_note -> set_note was not sent: approval approval-1 was denied by operator (cli) (note: not today) (approval_denied); calling set_note again with the same arguments asks for a new approval",
    );
    has_line(
        &out,
        "server: write requests this server process received = 0",
    );
    assert!(!out.contains("approving"), "{out}");
    let shown = json_of(&purra_in(
        &tmp.0,
        &["approvals", "show", "approval-1", "--db", &db, "--json"],
    ));
    assert_eq!(shown["state"], "denied");
    assert_eq!(shown["dispatches"], 0);
}

#[test]
fn interactive_demo_waits_for_an_approval_from_another_process() {
    let tmp = TempDir::new("cli", "interactive");
    interactive(&tmp, &db_in(&tmp));
}

#[test]
fn interactive_demo_on_postgres_wakes_on_an_approval_from_another_process() {
    let tmp = TempDir::new("cli", "interactive-pg");
    interactive(&tmp, &postgres_db("interactive"));
}

/// A store in a fresh schema of the test command's PostgreSQL server (the tests never skip it).
fn postgres_db(name: &str) -> String {
    postgres_schema(&format!("cli_{name}"))
}

#[test]
fn demo_and_store_subcommands_on_postgres() {
    let tmp = TempDir::new("cli", "postgres");
    let db = postgres_db("demo");
    let first = expect_code(&purra_in(&tmp.0, &["demo", "--db", &db]), 0);
    has_line(
        &first,
        &format!("store: {db} (PostgreSQL: approvals, claims and receipts survive restarts)"),
    );
    has_line(&first, "pending approval: approval-1");
    has_line(&first, SENT);
    has_line(&first, AGAIN);
    has_line(
        &first,
        "server: write requests this server process received = 1",
    );
    has_line(
        &first,
        &format!("sent once: the claim was recorded in {db} before the request left the gateway."),
    );
    let again = expect_code(&purra_in(&tmp.0, &["demo", "--db", &db]), 0);
    assert!(!again.contains("pending approval"), "{again}");
    has_line(
        &again,
        "server: write requests this server process received = 0",
    );
    has_line(
        &again,
        &format!("already done: an earlier run sent this write; its receipt is in {db}, so nothing was sent now."),
    );
    let list = json_of(&purra_in(
        &tmp.0,
        &["approvals", "list", "--db", &db, "--json"],
    ));
    let all = list["approvals"].as_array().expect("approvals");
    assert_eq!(all.len(), 1, "{list}");
    let a = &all[0];
    assert_eq!(
        (&a["id"], &a["state"], &a["effect"], &a["dispatches"]),
        (
            &Value::from("approval-1"),
            &Value::from("claimed"),
            &Value::from("committed"),
            &Value::from(1)
        )
    );
    assert_eq!(a["arguments"]["text"], "hello from purra");
    assert_eq!(a["requestedBy"], "local (purra-demo)");
    assert_eq!(a["decision"]["approver"], "purra demo (cli)");
    let runs = json_of(&purra_in(&tmp.0, &["runs", "list", "--db", &db, "--json"]));
    assert_eq!(runs["runs"][0]["id"], RUN);
    assert_eq!(runs["runs"][0]["state"], "finished");
    let unknown = purra_in(&tmp.0, &["approvals", "show", "approval-9", "--db", &db]);
    expect_code(&unknown, 2);
}

/// `purra demo --interactive --db DB` waits; `purra approvals approve` from another process wakes it.
fn interactive(tmp: &TempDir, db: &str) {
    let db = db.to_owned();
    let mut child = Command::new(env!("CARGO_BIN_EXE_purra"))
        .args(["demo", "--interactive", "--db", &db])
        .current_dir(&tmp.0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn purra demo");
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let deadline = Instant::now() + LIMIT;
    let mut id = None;
    while id.is_none() {
        let line = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|_| {
                let _ = child.kill();
                panic!("no pending approval line; saw {seen:?}")
            });
        if let Some(rest) = line.strip_prefix("pending approval: ") {
            id = Some(rest.to_owned());
        }
        seen.push(line);
    }
    let id = id.unwrap_or_default();
    // It waits: nothing is decided or dispatched until another process decides.
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        child.try_wait().expect("wait").is_none(),
        "the demo did not wait"
    );
    let show = json_of(&purra_in(
        &tmp.0,
        &["approvals", "show", &id, "--db", &db, "--json"],
    ));
    assert_eq!(show["state"], "pending");
    expect_code(
        &purra_in(&tmp.0, &["approvals", "approve", &id, "--db", &db]),
        0,
    );

    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            panic!("the demo did not finish after the approval");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0));
    seen.extend(rx.iter());
    let text = seen.join("\n");
    let waiting = has_prefix(&text, "waiting: approve it from another terminal with `");
    assert!(
        waiting.ends_with(&format!(" approvals approve {id} --db {db}` (or deny it)")),
        "{waiting}"
    );
    has_line(&text, SENT);
    has_line(
        &text,
        "server: write requests this server process received = 1",
    );
    let shown = json_of(&purra_in(
        &tmp.0,
        &["approvals", "show", &id, "--db", &db, "--json"],
    ));
    assert_eq!(shown["decision"]["approver"], "operator (cli)");
    assert_eq!(shown["effect"], "committed");
}

/// Finding 4 of issue 40: `purra approvals show` printed U+202E, U+200B and other hidden
/// characters raw. The readable form shows them as escapes under a warning (the arguments, who
/// decided and the note); `--json` stays the exact data.
#[test]
fn approvals_show_prints_hidden_characters_escaped_with_a_warning() {
    let tmp = TempDir::new("cli", "hidden");
    let db = db_in(&tmp);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        use purra_core::ApprovalGateway;
        let store = purra_sqlite::SqliteStore::open(&db).expect("store");
        let id = store
            .prepare(purra_store_tests::request(
                "/srv/notes/\u{202e}txt.exe\u{200b}",
            ))
            .await
            .expect("prepare");
        let mut decision = purra_store_tests::decision(purra_core::Verdict::Deny, None);
        decision.approver = "bot\u{2066} (app)".into();
        decision.note = Some("fine\u{e0041}".into());
        store.decide(id, decision).await.expect("decide");
    });
    let out = expect_code(
        &purra_in(&tmp.0, &["approvals", "show", "approval-1", "--db", &db]),
        0,
    );
    for line in [
        "warning: the arguments contain invisible or direction-changing characters (such as \
         U+202E or U+200B), shown as \\u escapes; what is sent is exactly the JSON (--json shows \
         it unescaped)",
        r#"arguments: "/srv/notes/\u202etxt.exe\u200b""#,
        r"decision: deny by bot\u2066 (app)",
        r"note: fine\u{e0041}",
    ] {
        has_line(&out, line);
    }
    for hidden in ['\u{202e}', '\u{200b}', '\u{2066}', '\u{e0041}'] {
        assert!(!out.contains(hidden), "{hidden:?} raw in {out}");
    }
    let exact = json_of(&purra_in(
        &tmp.0,
        &["approvals", "show", "approval-1", "--db", &db, "--json"],
    ));
    assert_eq!(exact["arguments"], "/srv/notes/\u{202e}txt.exe\u{200b}");
    assert_eq!(exact["decision"]["approver"], "bot\u{2066} (app)");
    assert_eq!(exact["decision"]["note"], "fine\u{e0041}");
}

/// Issue 43 finding 7: `purra approvals show` prints who asked and who decided, which name a
/// client that chose its own name, on one line each, escaped and bounded (a record made before
/// the gateway bounded names included).
#[test]
fn finding_7_approvals_show_prints_a_clients_name_escaped_and_bounded() {
    let tmp = TempDir::new("cli", "client-name");
    let db = db_in(&tmp);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        use purra_core::ApprovalGateway;
        let store = purra_sqlite::SqliteStore::open(&db).expect("store");
        let mut evil = purra_store_tests::request("a");
        evil.requested_by = "local (evil\u{202e}\nname)".into();
        let id = store.prepare(evil).await.expect("prepare");
        let mut decision = purra_store_tests::decision(purra_core::Verdict::Deny, None);
        decision.approver = "evil\u{202e}\nname (app)".into();
        store.decide(id, decision).await.expect("decide");
        let mut long = purra_store_tests::request("b");
        long.requested_by = format!("local ({})", "x".repeat(10_000));
        store.prepare(long).await.expect("prepare");
    });
    let out = expect_code(
        &purra_in(&tmp.0, &["approvals", "show", "approval-1", "--db", &db]),
        0,
    );
    has_line(&out, r"requested by: local (evil\u202e\nname)");
    has_line(&out, r"decision: deny by evil\u202e\nname (app)");
    assert!(!out.contains('\u{202e}'), "{out}");
    let out = expect_code(
        &purra_in(&tmp.0, &["approvals", "show", "approval-2", "--db", &db]),
        0,
    );
    has_line(
        &out,
        &format!("requested by: local ({}\u{2026}", "x".repeat(505)),
    );
}
