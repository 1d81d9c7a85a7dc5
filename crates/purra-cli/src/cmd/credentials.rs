//! `purra credentials list | set | revoke | rotate`: each principal's upstream credentials in a
//! store, as an operator manages them. Secrets are read from standard input only, sealed with the
//! credential keys (`--keys FILE` or `PURRA_CREDENTIAL_KEYS`) before they reach the store, and
//! never printed, logged or put in an error.

use std::io::Read as _;
use std::time::{SystemTime, UNIX_EPOCH};

use purra_core::vault::{self, Keyring, Secret, KEYS_ENV, MAX_PLAINTEXT};
use purra_core::{
    CredentialFilter, CredentialInfo, CredentialKey, CredentialKind, CredentialMeta,
    CredentialWrite,
};
use serde_json::{json, Value};

use crate::cli::{CredentialsCommand, KeysArgs};
use crate::cmd::print_json;
use crate::cmd::store;
use crate::exit::Failure;

/// Runs one `purra credentials` subcommand.
pub async fn run(command: CredentialsCommand) -> Result<(), Failure> {
    let args = command.store_args();
    let json_out = args.json;
    match &command {
        CredentialsCommand::List {
            principal,
            upstream,
            ..
        } => {
            let (location, db) = store::open_located(args).await?;
            let listed = db
                .credentials()
                .credentials(CredentialFilter {
                    principal: principal.clone(),
                    upstream: upstream.clone(),
                })
                .await
                .map_err(|e| store::failure("listing credentials", e))?;
            tracing::debug!(count = listed.len(), "listed credentials");
            if json_out {
                let all: Vec<Value> = listed.iter().map(info_json).collect();
                print_json(&json!({ "credentials": all }));
            } else if listed.is_empty() {
                println!("no credential is stored in {}", location.shown());
            } else {
                let rows: Vec<Vec<String>> = listed
                    .iter()
                    .map(|c| {
                        let shown = |s: &str| crate::term::for_stdout(s).into_owned();
                        vec![
                            shown(&c.key.principal),
                            shown(&c.key.upstream),
                            shown(&c.key.name),
                            c.kind.to_string(),
                            shown(c.meta.subject.as_deref().unwrap_or("-")),
                            c.meta.expires_at.map_or("-".into(), when),
                            when(c.updated_at),
                        ]
                    })
                    .collect();
                print!(
                    "{}",
                    crate::render::table(
                        &[
                            "PRINCIPAL",
                            "UPSTREAM",
                            "NAME",
                            "KIND",
                            "SUBJECT",
                            "EXPIRES",
                            "UPDATED"
                        ],
                        &rows
                    )
                );
            }
        }
        CredentialsCommand::Set {
            principal,
            upstream,
            name,
            keys,
            ..
        } => {
            let key = CredentialKey::new(principal, upstream, name);
            key.check()
                .map_err(|e| Failure::usage(format!("credentials set: {e}")))?;
            let ring = keyring(keys)?;
            let secret = read_secret()?;
            let sealed = ring
                .seal(&key, CredentialKind::Secret, &secret)
                .map_err(|e| Failure::usage(format!("credentials set: {e}")))?;
            drop(secret);
            // The store is created when missing: setting a secret is often the first use of it.
            let found = store::locate(args)?;
            let db = store::open(&found.location, true).await?;
            let version = db
                .credentials()
                .put_credential(
                    key.clone(),
                    CredentialWrite {
                        kind: CredentialKind::Secret,
                        sealed,
                        meta: CredentialMeta::default(),
                        at: SystemTime::now(),
                    },
                )
                .await
                .map_err(|e| store::failure("storing the credential", e))?;
            tracing::debug!(
                principal = %key.principal,
                upstream = %key.upstream,
                name = %key.name,
                version,
                "stored a sealed credential"
            );
            if json_out {
                print_json(&json!({
                    "stored": key_json(&key),
                    "kind": "secret",
                    "keyId": ring.current_id(),
                    "version": version,
                }));
            } else {
                println!(
                    "stored secret {} for principal {} at upstream {} in {} (sealed under key {}, \
                     version {version})",
                    crate::term::for_stdout(&key.name),
                    crate::term::for_stdout(&key.principal),
                    crate::term::for_stdout(&key.upstream),
                    found.location.shown(),
                    ring.current_id()
                );
            }
        }
        CredentialsCommand::Revoke {
            principal,
            upstream,
            name,
            keys,
            ..
        } => {
            let (location, db) = store::open_located(args).await?;
            let credentials = db.credentials();
            let targets: Vec<CredentialKey> = match name {
                Some(name) => vec![CredentialKey::new(principal, upstream, name)],
                None => credentials
                    .credentials(CredentialFilter {
                        principal: Some(principal.clone()),
                        upstream: Some(upstream.clone()),
                    })
                    .await
                    .map_err(|e| store::failure("listing credentials", e))?
                    .into_iter()
                    .map(|c| c.key)
                    .collect(),
            };
            // The keys are needed only to revoke an OAuth connection at its server.
            let ring = keyring(keys).ok();
            let mut revoked = Vec::new();
            for key in targets {
                let oauth = matches!(
                    credentials.credential(key.clone()).await,
                    Ok(Some(r)) if r.info.kind == CredentialKind::OAuth
                );
                let (had, at_server) = match (&ring, oauth) {
                    (Some(ring), true) => {
                        let (had, at_server) = purra_page::connect::revoke_connection_at_server(
                            credentials.as_ref(),
                            ring,
                            &key,
                        )
                        .await
                        .map_err(|why| Failure::store("store", why))?;
                        (had, Some(at_server))
                    }
                    _ => {
                        let had = credentials
                            .delete_credential(key.clone())
                            .await
                            .map_err(|e| store::failure("revoking the credential", e))?;
                        (
                            had,
                            oauth.then(|| Err("no credential keys to open it".to_owned())),
                        )
                    }
                };
                if had {
                    revoked.push((key, at_server));
                }
            }
            if revoked.is_empty() {
                return Err(Failure::store(
                    "not_found",
                    format!(
                        "no credential{} of principal {principal} at upstream {upstream} in {}",
                        name.as_ref().map(|n| format!(" {n}")).unwrap_or_default(),
                        location.shown()
                    ),
                ));
            }
            if json_out {
                let all: Vec<Value> = revoked
                    .iter()
                    .map(|(key, at_server)| {
                        let mut v = key_json(key);
                        if let Some(at_server) = at_server {
                            v["atAuthorizationServer"] = match at_server {
                                Ok(true) => json!("revoked"),
                                Ok(false) => json!("not offered"),
                                Err(why) => json!({ "notRevoked": why }),
                            };
                        }
                        v
                    })
                    .collect();
                print_json(&json!({ "revoked": all }));
            } else {
                for (key, at_server) in &revoked {
                    let server = match at_server {
                        None => String::new(),
                        Some(Ok(true)) => " (and at its authorization server)".to_owned(),
                        Some(Ok(false)) => {
                            " (its authorization server offers no revocation)".to_owned()
                        }
                        Some(Err(why)) => format!(
                            " (not at its authorization server: {})",
                            crate::term::for_stdout(why)
                        ),
                    };
                    println!(
                        "revoked {} of principal {} at upstream {}{server}",
                        crate::term::for_stdout(&key.name),
                        crate::term::for_stdout(&key.principal),
                        crate::term::for_stdout(&key.upstream)
                    );
                }
            }
        }
        CredentialsCommand::Rotate { keys, .. } => {
            let ring = keyring(keys)?;
            let (location, db) = store::open_located(args).await?;
            let done = vault::rotate(db.credentials().as_ref(), &ring, SystemTime::now())
                .await
                .map_err(|e| Failure::store("store", format!("credentials rotate: {e}")))?;
            if json_out {
                print_json(&json!({
                    "keyId": ring.current_id(),
                    "resealed": done.resealed,
                    "alreadyCurrent": done.current,
                }));
            } else {
                println!(
                    "re-sealed {} credential(s) under key {} in {} ({} already were); keys other \
                     than {1} can now be removed",
                    done.resealed,
                    ring.current_id(),
                    location.shown(),
                    done.current
                );
            }
        }
    }
    Ok(())
}

/// The credential keys: `--keys FILE`, else [`KEYS_ENV`]; neither is a usage failure.
fn keyring(args: &KeysArgs) -> Result<Keyring, Failure> {
    if let Some(path) = &args.keys {
        return Keyring::from_file(path).map_err(|e| Failure::Config(e.to_string()));
    }
    match Keyring::from_env(KEYS_ENV) {
        Ok(Some(ring)) => Ok(ring),
        Ok(None) => Err(Failure::usage(format!(
            "no credential keys: give --keys FILE or set {KEYS_ENV} (one `id:base64key` a line, \
             32 bytes each, the current key first)"
        ))),
        Err(e) => Err(Failure::Config(e.to_string())),
    }
}

/// The secret on standard input, bounded, without one trailing newline.
fn read_secret() -> Result<Secret, Failure> {
    if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        eprintln!("purra: reading the secret from standard input (end with Ctrl-D)");
    }
    // Room for all of it up front: a growing buffer would leave copies of the secret behind.
    let mut bytes = zeroize::Zeroizing::new(Vec::with_capacity(MAX_PLAINTEXT + 3));
    std::io::stdin()
        .lock()
        .take(MAX_PLAINTEXT as u64 + 3)
        .read_to_end(&mut bytes)
        .map_err(|e| Failure::usage(format!("cannot read the secret from standard input: {e}")))?;
    if bytes.ends_with(b"\n") {
        bytes.pop();
        if bytes.ends_with(b"\r") {
            bytes.pop();
        }
    }
    if bytes.is_empty() {
        return Err(Failure::usage(
            "credentials set reads the secret from standard input, which was empty",
        ));
    }
    if bytes.len() > MAX_PLAINTEXT {
        return Err(Failure::usage(format!(
            "a credential secret is at most {MAX_PLAINTEXT} bytes"
        )));
    }
    Ok(Secret::new(std::mem::take(&mut *bytes)))
}

fn key_json(key: &CredentialKey) -> Value {
    json!({ "principal": key.principal, "upstream": key.upstream, "name": key.name })
}

fn info_json(c: &CredentialInfo) -> Value {
    json!({
        "principal": c.key.principal,
        "upstream": c.key.upstream,
        "name": c.key.name,
        "kind": c.kind.as_str(),
        "issuer": c.meta.issuer,
        "scopes": c.meta.scopes,
        "subject": c.meta.subject,
        "expiresAt": c.meta.expires_at.map(secs),
        "createdAt": secs(c.created_at),
        "updatedAt": secs(c.updated_at),
        "lastUsedAt": c.last_used_at.map(secs),
        "version": c.version,
    })
}

fn secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// An instant as the table shows it: RFC 3339 in UTC to the second.
fn when(t: SystemTime) -> String {
    let full = purra_core::webhook::rfc3339(t);
    // `2026-05-04T12:30:05.123456Z` → `2026-05-04T12:30:05Z`.
    match full.split_once('.') {
        Some((seconds, _)) => format!("{seconds}Z"),
        None => full,
    }
}
