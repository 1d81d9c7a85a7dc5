//! `purra login`, `call` with the stored tokens, and `purra logout`, against
//! `purra serve-example --http ... --auth-issuer ...` guarded by a real authorization server,
//! oidc-provider (`peers/oidc/server.mjs`, installed by `scripts/setup-peers.sh`); the user's
//! browser is `peers/oidc/browser.mjs`.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::peers::{node, peer, repo_root};
use crate::support::run::{describe, http_get, purra, Killed};

/// Node, with the OpenID provider's packages installed.
fn oidc_node() -> String {
    peer(repo_root().join("peers/oidc/node_modules/oidc-provider"));
    node()
}

/// Reads lines of `from` until one starts with `prefix`; returns it.
fn line_starting(from: &mut impl BufRead, prefix: &str, what: &str) -> String {
    let mut line = String::new();
    loop {
        line.clear();
        let n = from.read_line(&mut line).expect("read");
        assert!(n > 0, "{what} ended before printing {prefix:?}");
        if let Some(rest) = line.trim().strip_prefix(prefix) {
            return rest.to_owned();
        }
    }
}

#[test]
fn login_call_logout() {
    let node = oidc_node();
    let mut oidc = Killed(
        Command::new(&node)
            .arg("server.mjs")
            .current_dir(repo_root().join("peers/oidc"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start peers/oidc/server.mjs"),
    );
    let mut out = BufReader::new(oidc.0.stdout.take().unwrap());
    let issuer_json = line_starting(&mut out, "{", "the authorization server");
    let issuer: serde_json::Value = serde_json::from_str(&format!("{{{issuer_json}")).unwrap();
    let issuer = issuer["issuer"].as_str().unwrap().to_owned();

    let mut server = Killed(
        Command::new(env!("CARGO_BIN_EXE_purra"))
            .args([
                "serve-example",
                "--http",
                "127.0.0.1:0",
                "--auth-issuer",
                &issuer,
            ])
            .args(["--auth-scope", "mcp:read"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start purra serve-example"),
    );
    let mut server_err = BufReader::new(server.0.stderr.take().unwrap());
    let url = line_starting(&mut server_err, "listening on ", "purra serve-example");
    let metadata = line_starting(
        &mut server_err,
        "protected resource metadata at ",
        "purra serve-example",
    );
    assert_eq!(
        metadata,
        url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
    );
    std::thread::spawn(move || server_err.lines().for_each(drop));

    let dir = std::env::temp_dir().join(format!("purra-auth-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let tokens = dir.join("tokens.json");
    let tokens = tokens.to_str().unwrap();

    // Before login: refused, with the way out.
    let out = purra(&["call", &url, "echo", "text=hi", "--tokens", tokens]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("run `purra login {url}` first")),
        "{}",
        describe(&out)
    );

    // Finding 9 of the security review: the authorization server is on this machine over
    // plain http, which login follows only when told (--allow-loopback); nothing is stored.
    let out = purra(&[
        "login",
        &url,
        "--client-id",
        "purra-public",
        "--tokens",
        tokens,
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "purra: logging in to {url} (--allow-loopback follows it): refusing {issuer}/: plain http on a loopback host, followed only with allow_loopback (for development)\n"
        )
    );
    assert!(!Path::new(tokens).exists());
    // A client secret goes only to the authorization server named beside it.
    let out = purra(&[
        "login",
        &url,
        "--client-id",
        "purra-page",
        "--client-secret",
        "page-secret",
        "--tokens",
        tokens,
    ]);
    assert_eq!(out.status.code(), Some(64), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--authorization-server <URL>"),
        "{}",
        describe(&out)
    );

    // Login: the URL on stderr, the browser, the loopback redirect.
    let mut login = Killed(
        Command::new(env!("CARGO_BIN_EXE_purra"))
            .args([
                "login",
                &url,
                "--client-id",
                "purra-public",
                "--allow-loopback",
                "--tokens",
                tokens,
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start purra login"),
    );
    let mut login_err = BufReader::new(login.0.stderr.take().unwrap());
    let authorization = line_starting(&mut login_err, "http", "purra login");
    let authorization = format!("http{authorization}");
    let redirect = line_starting(
        &mut login_err,
        "Waiting for the redirect to ",
        "purra login",
    );
    let redirect = redirect.trim_end_matches(" ...").to_owned();
    assert!(
        redirect.starts_with("http://127.0.0.1:") && redirect.ends_with("/callback"),
        "{redirect}"
    );
    let browser = Command::new(&node)
        .arg(repo_root().join("peers/oidc/browser.mjs"))
        .args([&authorization, "carol", &redirect])
        .output()
        .expect("run peers/oidc/browser.mjs");
    assert!(browser.status.success(), "{}", describe(&browser));
    let back = String::from_utf8(browser.stdout).unwrap();
    // The loopback listener answers the browser, and purra login finishes.
    let page = http_get_url(back.trim());
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    let start = Instant::now();
    let status = loop {
        if let Some(s) = login.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "purra login did not finish"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut rest = String::new();
    login_err.read_to_string(&mut rest).unwrap();
    assert!(status.success(), "{status}: {rest}");
    assert!(
        rest.contains(&format!("Logged in to {url}; tokens stored in {tokens}")),
        "{rest}"
    );

    // The token file: the owner's only, tokens under the server's URL.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(tokens).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(tokens).unwrap()).unwrap();
    assert!(
        file["servers"][&url]["tokens"]["access_token"].is_string(),
        "{file}"
    );

    let out = purra(&["call", &url, "echo", "text=hi", "--tokens", tokens]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\n");
    // No token on the terminal, whatever the verbosity.
    let access = file["servers"][&url]["tokens"]["access_token"]
        .as_str()
        .unwrap();
    let out = purra(&["-vv", "call", &url, "echo", "text=hi", "--tokens", tokens]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(!String::from_utf8_lossy(&out.stderr).contains(access));

    // Logout: the tokens are gone, and the server refuses again.
    let out = purra(&["logout", &url, "--tokens", tokens]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(tokens).unwrap()).unwrap();
    assert_eq!(file, serde_json::json!({"servers": {}}));
    let out = purra(&["call", &url, "echo", "text=hi", "--tokens", tokens]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A bare HTTP/1.1 GET of `url` (the loopback redirect); the raw response.
fn http_get_url(url: &str) -> String {
    let rest = url.strip_prefix("http://").expect("an http URL");
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    http_get(host, path).expect("GET the redirect")
}
