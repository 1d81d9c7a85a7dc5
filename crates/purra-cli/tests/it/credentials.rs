//! `purra credentials list|set|revoke|rotate` as an operator runs them: a secret set from standard
//! input is kept only sealed (the SQLite file with its WAL, and a `pg_dump` of the PostgreSQL
//! schema, hold neither its bytes nor their base64 or hex), never printed by `list` nor logged at
//! `-v`; a missing key is named, rotation lets the old key go, revoke deletes.

use base64::Engine as _;
use purra_core::vault::{Keyring, Secret};
use purra_core::{CredentialKey, CredentialKind};
use purra_store::{AnyStore, StoreLocation};
use purra_store_tests::credentials::secret_spellings;
use std::io::Write as _;
use std::path::Path;

use crate::support::peers::{pg_dump, postgres_url};
use crate::support::run::TempDir;
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

/// What one run of purra gave.
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs purra in `dir` with `args`, `stdin` as its standard input, and `env` set (and
/// `PURRA_CREDENTIAL_KEYS` unset unless `env` sets it).
fn purra_with_stdin(dir: &Path, args: &[&str], stdin: &[u8], env: &[(&str, &str)]) -> Ran {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_purra"));
    cmd.args(args)
        .current_dir(dir)
        .env_remove("PURRA_CREDENTIAL_KEYS")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("run purra");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    Ran {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `n` random bytes (the vault's own key generator is the randomness).
fn random_bytes(n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    while out.len() < n {
        let line = Keyring::new_key_line("r").unwrap();
        let b64 = line.split_once(':').unwrap().1;
        out.extend(
            base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap(),
        );
    }
    out.truncate(n);
    out
}

/// A recognisable secret: 40 random bytes in hexadecimal.
fn recognisable_secret() -> String {
    random_bytes(40)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Writes a key file of new keys `ids` (the first current); answers its lines.
fn key_file(path: &str, lines: &[&str]) {
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

fn new_line(id: &str) -> String {
    Keyring::new_key_line(id).unwrap().to_string()
}

/// Asserts `haystack` holds no spelling of `secret`.
fn holds_no_secret(what: &str, haystack: &[u8], secret: &str) {
    for needle in secret_spellings(secret.as_bytes()) {
        assert!(
            !haystack
                .windows(needle.len())
                .any(|w| w == needle.as_slice()),
            "{what} holds the secret as {:?}",
            String::from_utf8_lossy(&needle)
        );
    }
}

/// Opens the record at `key` in `db` with the keys of `key_lines`.
fn open_record(db: &str, key: &CredentialKey, key_lines: &[&str]) -> Secret {
    let ring = Keyring::parse(&key_lines.join("\n")).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = AnyStore::open(&StoreLocation::parse(db).unwrap(), None)
            .await
            .unwrap();
        let record = store
            .credentials()
            .credential(key.clone())
            .await
            .unwrap()
            .expect("the record is stored");
        assert_eq!(record.info.kind, CredentialKind::Secret);
        ring.open(key, record.info.kind, &record.sealed).unwrap()
    })
}

/// Sets a recognisable secret through the CLI at `-v`, lists it, and checks that the store opens
/// it back while no output holds it; answers the secret.
fn set_and_list(tmp: &TempDir, db: &str) -> String {
    let keys = tmp.path("keys");
    let k1 = new_line("k1");
    key_file(&keys, &[&k1]);
    let secret = recognisable_secret();
    let set = purra_with_stdin(
        &tmp.0,
        &[
            "-v",
            "credentials",
            "set",
            "--keys",
            &keys,
            "--db",
            db,
            "--principal",
            "alice",
            "--upstream",
            "github",
            "GITHUB_TOKEN",
        ],
        format!("{secret}\n").as_bytes(),
        &[],
    );
    assert_eq!(set.code, Some(0), "{}", set.stderr);
    let shown = StoreLocation::parse(db).unwrap().shown();
    assert_eq!(
        set.stdout,
        format!(
            "stored secret GITHUB_TOKEN for principal alice at upstream github in {shown} \
             (sealed under key k1, version 1)\n"
        )
    );
    assert!(
        set.stderr.contains("stored a sealed credential"),
        "-v logs the store: {}",
        set.stderr
    );
    holds_no_secret("set's stdout", set.stdout.as_bytes(), &secret);
    holds_no_secret("set's stderr at -v", set.stderr.as_bytes(), &secret);
    // One trailing newline dropped: the stored secret is exactly what was typed.
    let key = CredentialKey::new("alice", "github", "GITHUB_TOKEN");
    assert_eq!(
        open_record(db, &key, &[&k1]).expose(),
        secret.as_bytes(),
        "the store holds it, sealed"
    );
    for json in [false, true] {
        let mut args = vec!["-v", "credentials", "list", "--db", db];
        if json {
            args.push("--json");
        }
        let list = purra_with_stdin(&tmp.0, &args, b"", &[]);
        assert_eq!(list.code, Some(0), "{}", list.stderr);
        holds_no_secret("list's stdout", list.stdout.as_bytes(), &secret);
        holds_no_secret("list's stderr at -v", list.stderr.as_bytes(), &secret);
        if json {
            let doc: serde_json::Value = serde_json::from_str(&list.stdout).unwrap();
            let c = &doc["credentials"][0];
            assert_eq!(
                (&c["principal"], &c["upstream"], &c["name"], &c["kind"]),
                (
                    &serde_json::json!("alice"),
                    &serde_json::json!("github"),
                    &serde_json::json!("GITHUB_TOKEN"),
                    &serde_json::json!("secret")
                )
            );
            assert_eq!(c["version"], 1);
        } else {
            let lines: Vec<&str> = list.stdout.lines().collect();
            assert_eq!(lines.len(), 2, "{}", list.stdout);
            let header: Vec<&str> = lines[0].split_whitespace().collect();
            assert_eq!(
                header,
                [
                    "PRINCIPAL",
                    "UPSTREAM",
                    "NAME",
                    "KIND",
                    "SUBJECT",
                    "EXPIRES",
                    "UPDATED"
                ]
            );
            let row: Vec<&str> = lines[1].split_whitespace().collect();
            assert_eq!(
                &row[..6],
                ["alice", "github", "GITHUB_TOKEN", "secret", "-", "-"]
            );
            assert!(row[6].ends_with('Z') && row[6].len() == 20, "{}", row[6]);
        }
    }
    secret
}

#[test]
fn credentials_set_leaves_no_secret_in_the_sqlite_file_or_output() {
    let tmp = TempDir::new("credentials", "sqlite");
    let db = tmp.path("purra.db");
    let secret = set_and_list(&tmp, &db);
    let mut at_rest = Vec::new();
    for suffix in ["", "-wal", "-shm"] {
        if let Ok(bytes) = std::fs::read(format!("{db}{suffix}")) {
            at_rest.extend(bytes);
        }
    }
    assert!(
        at_rest.windows(12).any(|w| w == b"GITHUB_TOKEN"),
        "the file and its WAL hold the record"
    );
    holds_no_secret("the SQLite file and its WAL", &at_rest, &secret);
}

/// A store in a fresh schema of the test command's PostgreSQL server (the tests never skip it).
fn postgres_db(name: &str) -> (String, String) {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() % 1_000_000_000);
    let schema = format!("cli_{name}_{}_{nanos}", std::process::id());
    (format!("{}?schema={schema}", postgres_url()), schema)
}

#[test]
fn credentials_set_leaves_no_secret_in_a_postgres_dump() {
    let tmp = TempDir::new("credentials", "postgres");
    let (db, schema) = postgres_db("cred");
    let secret = set_and_list(&tmp, &db);
    let url = std::env::var("PURRA_TEST_POSTGRES").unwrap();
    let out = Command::new(pg_dump())
        .args(["--schema", &schema, "--dbname", &url])
        .output()
        .expect("run pg_dump");
    assert!(
        out.status.success(),
        "pg_dump: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stdout.windows(12).any(|w| w == b"GITHUB_TOKEN"),
        "the dump holds the record"
    );
    holds_no_secret("the pg_dump of the schema", &out.stdout, &secret);
}

#[test]
fn the_secret_comes_only_from_stdin_and_keys_are_required() {
    let tmp = TempDir::new("credentials", "input");
    let db = tmp.path("purra.db");
    let keys = tmp.path("keys");
    key_file(&keys, &[&new_line("k1")]);
    let set = |extra: &[&str], stdin: &[u8], env: &[(&str, &str)]| {
        let mut args = vec![
            "credentials",
            "set",
            "--db",
            &db,
            "--principal",
            "alice",
            "--upstream",
            "github",
            "token",
        ];
        args.extend_from_slice(extra);
        purra_with_stdin(&tmp.0, &args, stdin, env)
    };
    // A secret on the command line is not an option: a usage error, nothing stored.
    let argv = set(&["--keys", &keys, "ghp_on_the_command_line"], b"", &[]);
    assert_eq!(argv.code, Some(64), "{}", argv.stderr);
    let empty = set(&["--keys", &keys], b"\n", &[]);
    assert_eq!(empty.code, Some(64));
    assert_eq!(
        empty.stderr.lines().next(),
        Some("purra: credentials set reads the secret from standard input, which was empty")
    );
    let no_keys = set(&[], b"s", &[]);
    assert_eq!(no_keys.code, Some(64));
    assert!(
        no_keys.stderr.starts_with(
            "purra: no credential keys: give --keys FILE or set PURRA_CREDENTIAL_KEYS"
        ),
        "{}",
        no_keys.stderr
    );
    let bad_env = set(&[], b"s", &[("PURRA_CREDENTIAL_KEYS", "k1:c2hvcnQ=")]);
    assert_eq!(bad_env.code, Some(78));
    assert_eq!(
        bad_env.stderr,
        "purra: credential keys: PURRA_CREDENTIAL_KEYS: line 1: key `k1` is 5 bytes, not 32\n"
    );
    assert!(!Path::new(&db).exists(), "nothing was stored");
    // The variable is the key source without --keys.
    let line = new_line("env1");
    let from_env = set(&[], b"s", &[("PURRA_CREDENTIAL_KEYS", &line)]);
    assert_eq!(from_env.code, Some(0), "{}", from_env.stderr);
    assert!(from_env
        .stdout
        .contains("(sealed under key env1, version 1)"));
    let big = vec![b'x'; 32 * 1024 + 1];
    let too_long = set(&[], &big, &[("PURRA_CREDENTIAL_KEYS", &line)]);
    assert_eq!(too_long.code, Some(64));
    assert_eq!(
        too_long.stderr.lines().next(),
        Some("purra: a credential secret is at most 32768 bytes")
    );
}

#[test]
fn rotation_reseals_under_the_new_key_and_a_missing_key_is_named() {
    let tmp = TempDir::new("credentials", "rotate");
    let db = tmp.path("purra.db");
    let (old, new) = (tmp.path("old"), tmp.path("new"));
    let (k1, k2) = (new_line("k1"), new_line("k2"));
    key_file(&old, &[&k1]);
    for (principal, secret) in [("alice", "alice-pat"), ("bob", "bob-pat")] {
        let set = purra_with_stdin(
            &tmp.0,
            &[
                "credentials",
                "set",
                "--keys",
                &old,
                "--db",
                &db,
                "--principal",
                principal,
                "--upstream",
                "github",
                "token",
            ],
            secret.as_bytes(),
            &[],
        );
        assert_eq!(set.code, Some(0), "{}", set.stderr);
    }
    // The new key alone cannot open what k1 sealed: rotate says which key is missing.
    key_file(&new, &[&k2]);
    let missing = purra_with_stdin(
        &tmp.0,
        &["credentials", "rotate", "--keys", &new, "--db", &db],
        b"",
        &[],
    );
    assert_eq!(missing.code, Some(2));
    assert_eq!(
        missing.stderr,
        "purra: credentials rotate: the credential alice/github/token is sealed under key `k1`, \
         which the credential keys do not hold (add its line back)\n"
    );
    // k2 first, k1 below: every record re-sealed under k2.
    key_file(&new, &[&k2, &k1]);
    let rotated = purra_with_stdin(
        &tmp.0,
        &["credentials", "rotate", "--keys", &new, "--db", &db],
        b"",
        &[],
    );
    assert_eq!(rotated.code, Some(0), "{}", rotated.stderr);
    assert_eq!(
        rotated.stdout,
        format!(
            "re-sealed 2 credential(s) under key k2 in {db} (0 already were); keys other than k2 \
             can now be removed\n"
        )
    );
    // k1 removed: everything opens with k2 alone, and nothing is left to re-seal.
    key_file(&new, &[&k2]);
    for (principal, secret) in [("alice", "alice-pat"), ("bob", "bob-pat")] {
        let key = CredentialKey::new(principal, "github", "token");
        assert_eq!(open_record(&db, &key, &[&k2]).expose(), secret.as_bytes());
    }
    let again = purra_with_stdin(
        &tmp.0,
        &[
            "credentials",
            "rotate",
            "--keys",
            &new,
            "--db",
            &db,
            "--json",
        ],
        b"",
        &[],
    );
    let doc: serde_json::Value = serde_json::from_str(&again.stdout).unwrap();
    assert_eq!(
        doc,
        serde_json::json!({"keyId": "k2", "resealed": 0, "alreadyCurrent": 2})
    );
}

#[test]
fn revoke_deletes_one_credential_or_all_of_a_principal_at_an_upstream() {
    let tmp = TempDir::new("credentials", "revoke");
    let db = tmp.path("purra.db");
    let line = new_line("k1");
    let env = [("PURRA_CREDENTIAL_KEYS", line.as_str())];
    for (principal, upstream, name) in [
        ("alice", "github", "token"),
        ("alice", "github", "app"),
        ("alice", "linear", "token"),
        ("bob", "github", "token"),
    ] {
        let set = purra_with_stdin(
            &tmp.0,
            &[
                "credentials",
                "set",
                "--db",
                &db,
                "--principal",
                principal,
                "--upstream",
                upstream,
                name,
            ],
            b"s",
            &env,
        );
        assert_eq!(set.code, Some(0), "{}", set.stderr);
    }
    let revoke = |args: &[&str]| {
        let mut all = vec!["credentials", "revoke", "--db", &db];
        all.extend_from_slice(args);
        purra_with_stdin(&tmp.0, &all, b"", &[])
    };
    let one = revoke(&["--principal", "alice", "--upstream", "github", "app"]);
    assert_eq!(
        (one.code, one.stdout.as_str()),
        (
            Some(0),
            "revoked app of principal alice at upstream github\n"
        )
    );
    let all = revoke(&["--principal", "alice", "--upstream", "github"]);
    assert_eq!(
        (all.code, all.stdout.as_str()),
        (
            Some(0),
            "revoked token of principal alice at upstream github\n"
        )
    );
    let none = revoke(&["--principal", "alice", "--upstream", "github"]);
    assert_eq!(none.code, Some(2));
    assert_eq!(
        none.stderr,
        format!("purra: no credential of principal alice at upstream github in {db}\n")
    );
    let list = purra_with_stdin(
        &tmp.0,
        &["credentials", "list", "--db", &db, "--json"],
        b"",
        &[],
    );
    let doc: serde_json::Value = serde_json::from_str(&list.stdout).unwrap();
    let left: Vec<String> = doc["credentials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| format!("{}/{}/{}", c["principal"], c["upstream"], c["name"]).replace('"', ""))
        .collect();
    assert_eq!(left, ["alice/linear/token", "bob/github/token"]);
    let bob = purra_with_stdin(
        &tmp.0,
        &[
            "credentials",
            "list",
            "--db",
            &db,
            "--upstream",
            "github",
            "--principal",
            "bob",
        ],
        b"",
        &[],
    );
    assert_eq!(bob.stdout.lines().count(), 2, "{}", bob.stdout);
    assert!(bob.stdout.lines().nth(1).unwrap().starts_with("bob "));
}
