//! Where `purra approvals` and `purra runs` find their store without `--db`: `--config FILE`
//! reads a gateway file's `[gateway] db` (relative to the file's directory, as the gateway
//! does), `./purra.db` when it exists, else `./gateway.toml`'s `db`, else a message naming what
//! was looked for; and their tables, each column as wide as its widest value. The store is the
//! one `purra demo --no-approve` leaves (one pending approval of a suspended run).

use std::path::Path;

use crate::support::run::{purra_in, TempDir, RUN};

/// (exit code, stdout, stderr).
fn run(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = purra_in(dir, args);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A gateway file whose store is `db`.
fn gateway_file(db: &str) -> String {
    format!(
        r#"[gateway]
db = "{db}"

[upstreams.notes]
command = ["notes-server"]

[reads.get_note]
upstream = "notes"
title = "Read the note"
scope = "open"
"#
    )
}

#[test]
fn approvals_and_runs_find_the_gateways_store_and_fit_their_columns() {
    let tmp = TempDir::new("cli-store", "find");
    let root = &tmp.0;
    std::fs::create_dir_all(root.join("state")).expect("dir");
    std::fs::create_dir_all(root.join("elsewhere")).expect("dir");
    let (code, _, err) = run(root, &["demo", "--no-approve", "--db", "state/gw.db"]);
    assert_eq!(code, Some(0), "{err}");

    // Nothing here says where the store is: the message names what was looked for.
    let (code, out, err) = run(&root.join("elsewhere"), &["approvals", "list"]);
    assert_eq!((code, out.as_str()), (Some(2), ""));
    assert_eq!(
        err,
        "purra: no store: no --db or --config given, and neither ./purra.db nor ./gateway.toml (whose [gateway] db would name it) is here (give --db PATH|URL or --config FILE, or run `purra demo` to make ./purra.db)\n"
    );

    let listing = format!(
        "ID          STATE    TOOL      RUN                             EFFECT\n\
         approval-1  pending  set_note  {RUN}  -\n"
    );
    let runs = format!(
        "ID                              STATE      APPROVALS\n\
         {RUN}  suspended  approval-1\n"
    );
    // ./gateway.toml next to the operator: its db, relative to its directory.
    std::fs::write(root.join("gateway.toml"), gateway_file("state/gw.db")).expect("write");
    assert_eq!(
        run(root, &["approvals", "list"]),
        (Some(0), listing.clone(), String::new())
    );
    assert_eq!(
        run(root, &["runs", "list"]),
        (Some(0), runs.clone(), String::new())
    );
    // --config FILE from another directory: relative to the file's directory, not the caller's.
    std::fs::write(root.join("state/gateway-copy.toml"), gateway_file("gw.db")).expect("write");
    let config = root.join("state/gateway-copy.toml");
    let config = config.to_str().unwrap();
    assert_eq!(
        run(
            &root.join("elsewhere"),
            &["approvals", "list", "--config", config]
        ),
        (Some(0), listing.clone(), String::new())
    );
    let (code, out, _) = run(
        &root.join("elsewhere"),
        &[
            "approvals",
            "show",
            "approval-1",
            "--config",
            config,
            "--json",
        ],
    );
    assert_eq!(code, Some(0));
    let shown: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(shown["state"], "pending");

    // A gateway file whose store does not exist yet says so, and creates nothing.
    std::fs::write(root.join("elsewhere/gateway.toml"), gateway_file("none.db")).expect("write");
    let (code, _, err) = run(&root.join("elsewhere"), &["approvals", "list"]);
    assert_eq!(code, Some(2));
    assert_eq!(
        err,
        "purra: no store at ./none.db (the [gateway] db of gateway.toml; `purra gateway --config gateway.toml` makes it when it starts)\n"
    );
    assert!(!root.join("elsewhere/none.db").exists());

    // A gateway file with mistakes is refused as the gateway refuses it (exit 78).
    std::fs::write(root.join("elsewhere/gateway.toml"), "[gateway]\ndb = 7\n").expect("write");
    let (code, _, err) = run(&root.join("elsewhere"), &["runs", "list"]);
    assert_eq!(code, Some(78));
    assert!(
        err.starts_with("purra: the configuration has 3 mistakes:\n  gateway.toml: upstreams: no upstream server is configured"),
        "{err}"
    );
    assert!(
        err.contains("\n  gateway.toml:2: gateway.db: expected a string, found integer 7"),
        "{err}"
    );

    // ./purra.db, when it exists, comes first (as it always did): the gateway's approval is
    // approved, the one in ./purra.db still pending.
    let (code, _, err) = run(root, &["approvals", "approve", "approval-1"]);
    assert_eq!(code, Some(0), "{err}");
    let (code, _, err) = run(root, &["demo", "--no-approve", "--db", "purra.db"]);
    assert_eq!(code, Some(0), "{err}");
    let state = |args: &[&str]| {
        let (_, out, _) = run(root, args);
        let listed: serde_json::Value = serde_json::from_str(&out).expect("json");
        listed["approvals"][0]["state"].clone()
    };
    assert_eq!(state(&["approvals", "list", "--json"]), "pending");
    assert_eq!(
        state(&["approvals", "list", "--json", "--config", "gateway.toml"]),
        "approved"
    );

    // --db and --config together are a usage error.
    let (code, _, _) = run(
        root,
        &["approvals", "list", "--db", "x.db", "--config", config],
    );
    assert_eq!(code, Some(64));
}
