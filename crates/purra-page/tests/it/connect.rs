//! Per-user OAuth connections against real parts: oidc-provider (`peers/oidc/server.mjs`) as the
//! upstream's authorization server (dynamic registration, PKCE, refresh-token rotation,
//! revocation), its development login played by `peers/oidc/browser.mjs` (or by headless Chromium
//! through the page), and a purra-protocol server behind `AuthLayer` as the resource server that
//! answers with the subject of the token it validated. Connections live in SQLite or, for the
//! race between two instances, PostgreSQL (`PURRA_TEST_POSTGRES`, from `scripts/postgres.sh`).

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use purra_core::vault::Keyring;
use purra_core::{CredentialKey, CredentialKind, CredentialStore};
use purra_page::connect::{
    ConnectConfig, ConnectError, Connection, ConnectionAuth, Connections, Connector, OAuthUpstream,
    CONNECTION,
};
use purra_protocol::auth::{AuthLayer, JwtValidator};
use purra_protocol::http::{serve, ConnectionLimits};
use purra_protocol::{
    CancellationToken, Client, ClientOptions, HandlerResult, HttpClientOptions, HttpServerConfig,
    RequestCtx, Server, StreamableHttpServer,
};
use purra_store::{AnyStore, StoreLocation};
use serde_json::{json, Value};
use tokio::io::AsyncBufReadExt;

/// The page's address in the library-level tests (never contacted: the callback is handed over
/// by the test).
const PAGE: &str = "http://127.0.0.1:9";
const UPSTREAM: &str = "files";

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn node() -> PathBuf {
    let peers = std::env::var_os("PURRA_PEERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".peers"));
    peers.join("bin/node")
}

/// oidc-provider, its dynamically registered clients' access tokens living `ttl` seconds.
struct Issuer {
    url: String,
    _child: tokio::process::Child,
}

async fn issuer(ttl: u64) -> Issuer {
    issuer_at("127.0.0.1", ttl).await
}

/// oidc-provider naming itself `http://HOST:PORT` (a loopback name).
async fn issuer_at(host: &str, ttl: u64) -> Issuer {
    let mut child = tokio::process::Command::new(node())
        .arg(repo_root().join("peers/oidc/server.mjs"))
        .env("PURRA_OIDC_OTHER_TTL", ttl.to_string())
        .env("PURRA_OIDC_HOST", host)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node (set PURRA_PEERS_DIR)");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let line = lines.next_line().await.unwrap().expect("the issuer line");
    let v: Value = serde_json::from_str(&line).unwrap();
    // Its later notices go to stdout too: keep reading, or it dies of a broken pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Issuer {
        url: v["issuer"].as_str().unwrap().to_owned(),
        _child: child,
    }
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Nothing {}

/// The upstream: `whoami` answers the subject of the token the guard validated.
struct Resource {
    url: String,
    stop: CancellationToken,
}

impl Drop for Resource {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn resource(issuer: &str) -> Resource {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let server = Server::builder("files", "1").build();
    server
        .tool(
            "whoami",
            "Who is calling",
            |_: Nothing, ctx: RequestCtx| async move {
                let p = ctx.principal().expect("the guard's principal");
                let r: HandlerResult<String> = Ok(p.subject.clone());
                r
            },
        )
        .unwrap();
    let config = HttpServerConfig {
        json_response: true,
        ..HttpServerConfig::default()
    };
    let validator = JwtValidator::new(issuer, &url).unwrap();
    let guard = AuthLayer::new(&url, issuer, validator)
        .unwrap()
        .required_scopes(["mcp:read"])
        .scopes_supported(["mcp:read", "mcp:write"]);
    let service = guard.layer(StreamableHttpServer::new(server, config).router());
    let stop = CancellationToken::new();
    tokio::spawn(serve(
        listener,
        service,
        ConnectionLimits::default(),
        stop.clone(),
    ));
    Resource { url, stop }
}

fn keys() -> Arc<Keyring> {
    Arc::new(Keyring::parse(&Keyring::new_key_line("k1").unwrap()).unwrap())
}

fn upstream(resource: &Resource) -> OAuthUpstream {
    OAuthUpstream::new(UPSTREAM, &resource.url)
        .scopes(["mcp:read"])
        .allow_loopback(true)
}

/// Plays `user` at the authorization server's login and consent forms from `url` and answers
/// the callback's query string.
async fn play_user(url: &str, user: &str, page: &str) -> String {
    let prefix = format!("{page}/connect/{UPSTREAM}/callback");
    let out = tokio::process::Command::new(node())
        .arg(repo_root().join("peers/oidc/browser.mjs"))
        .args([url, user, &prefix])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let back = String::from_utf8(out.stdout).unwrap();
    back.trim().split_once('?').unwrap().1.to_owned()
}

/// Connects `principal` (as `user` at the authorization server) through the flow's library.
async fn connect(connections: &Connections, principal: &str, user: &str) {
    let url = connections
        .start(principal, "browser-1", UPSTREAM)
        .await
        .unwrap();
    assert!(url.contains("code_challenge_method=S256"), "{url}");
    let query = play_user(&url, user, PAGE).await;
    let info = connections
        .finish(Some(principal), "browser-1", UPSTREAM, &query)
        .await
        .unwrap();
    assert_eq!(info.kind, CredentialKind::OAuth);
    assert_eq!(info.meta.subject.as_deref(), Some(user));
}

async fn whoami(auth: ConnectionAuth, url: &str) -> Result<String, String> {
    let http = HttpClientOptions::default().auth(auth);
    let conn = Client::connect_http(url, http, ClientOptions::default())
        .await
        .map_err(|e| e.to_string())?;
    let r = conn
        .call_tool("whoami", json!({}))
        .await
        .map_err(|e| e.to_string())?;
    assert!(!r.is_error(), "{r:?}");
    Ok(r.texts().collect::<Vec<_>>().join(""))
}

fn open(keys: &Keyring, record: &purra_core::CredentialRecord, key: &CredentialKey) -> Connection {
    let plain = keys
        .open(key, CredentialKind::OAuth, &record.sealed)
        .unwrap();
    serde_json::from_slice(plain.expose()).unwrap()
}

async fn sqlite(dir: &std::path::Path) -> (Arc<dyn CredentialStore>, PathBuf) {
    let path = dir.join("purra.db");
    let store = AnyStore::open(&StoreLocation::parse(path.to_str().unwrap()).unwrap(), None)
        .await
        .unwrap();
    (store.credentials(), path)
}

fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("purra-connect-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A connection made through the flow is stored sealed (the SQLite file holds none of its token
/// bytes) and a call with it reaches the upstream as the user who connected; a principal without
/// one is told the connect URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_is_sealed_and_calls_reach_the_upstream_as_its_user() {
    let issuer = issuer(3600).await;
    let rs = resource(&issuer.url).await;
    let dir = tempdir("sealed");
    let (store, path) = sqlite(&dir).await;
    let keys = keys();
    let connections = Connections::new(ConnectConfig::new(
        PAGE,
        vec![upstream(&rs)],
        store.clone(),
        keys.clone(),
    ));
    connect(&connections, "alice-principal", "alice").await;

    let key = CredentialKey::new("alice-principal", UPSTREAM, CONNECTION);
    let record = store.credential(key.clone()).await.unwrap().unwrap();
    let conn = open(&keys, &record, &key);
    let file = std::fs::read(&path).unwrap();
    let wal = std::fs::read(dir.join("purra.db-wal")).unwrap_or_default();
    for secret in [&conn.access_token, conn.refresh_token.as_ref().unwrap()] {
        for bytes in [&file, &wal] {
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "a token is in the store's file"
            );
        }
    }
    assert_eq!(
        record.info.meta.issuer.as_deref(),
        Some(issuer.url.as_str())
    );

    let connector = Arc::new(Connector::new(UPSTREAM, PAGE, store.clone(), keys.clone()));
    let who = whoami(
        ConnectionAuth::new(connector.clone(), "alice-principal"),
        &rs.url,
    )
    .await
    .unwrap();
    assert_eq!(who, "alice");
    assert_eq!(
        connector.called_as("alice-principal").as_deref(),
        Some("alice")
    );
    assert_eq!(connector.refreshes(), 0);
    let used = connections.list("alice-principal").await.unwrap();
    assert!(used[0].last_used_at.is_some(), "a use is recorded");
    assert_eq!(used[0].version, 1, "a use moves no version");

    // bob never connected: the error names where to.
    let err = connector.access("bob-principal", None).await.unwrap_err();
    assert_eq!(
        err,
        ConnectError::Missing(format!(
            "bob-principal has no connection to upstream \"files\": connect at {PAGE}/connect/files"
        ))
    );
    let err = whoami(
        ConnectionAuth::new(connector.clone(), "bob-principal"),
        &rs.url,
    )
    .await
    .unwrap_err();
    assert!(
        err.contains("connect at http://127.0.0.1:9/connect/files"),
        "{err}"
    );

    // bob connects: the client registered for alice's connection is used again, and each call
    // reaches the upstream as its own user.
    connect(&connections, "bob-principal", "bob").await;
    let bob_key = CredentialKey::new("bob-principal", UPSTREAM, CONNECTION);
    let bobs = open(
        &keys,
        &store.credential(bob_key.clone()).await.unwrap().unwrap(),
        &bob_key,
    );
    assert_eq!(
        bobs.client_id, conn.client_id,
        "one registration per upstream"
    );
    let (a, b) = tokio::join!(
        whoami(
            ConnectionAuth::new(connector.clone(), "alice-principal"),
            &rs.url
        ),
        whoami(
            ConnectionAuth::new(connector.clone(), "bob-principal"),
            &rs.url
        )
    );
    assert_eq!((a.unwrap().as_str(), b.unwrap().as_str()), ("alice", "bob"));

    // A callback is accepted only in the browser that started it (and, signed in, for the
    // principal that did), once; the connection is stored under the principal that started it
    // even when the callback comes without the page's session (a cross-site navigation).
    let url = connections
        .start("carol-principal", "browser-c", UPSTREAM)
        .await
        .unwrap();
    let query = play_user(&url, "carol", PAGE).await;
    let refused = "this connection was not started here by you, or it expired: start again";
    for (signed_in, browser) in [
        (Some("carol-principal"), "browser-x"),
        (None, "browser-x"),
        (Some("bob-principal"), "browser-c"),
    ] {
        let err = connections
            .finish(signed_in, browser, UPSTREAM, &query)
            .await
            .unwrap_err();
        assert_eq!(err, refused);
    }
    let info = connections
        .finish(None, "browser-c", UPSTREAM, &query)
        .await
        .unwrap();
    assert_eq!(info.key.principal, "carol-principal");
    assert_eq!(info.meta.subject.as_deref(), Some("carol"));
    let err = connections
        .finish(None, "browser-c", UPSTREAM, &query)
        .await
        .unwrap_err();
    assert_eq!(err, refused, "a state is used once");
    assert!(
        connections
            .revoke("carol-principal", UPSTREAM)
            .await
            .unwrap()
            .0
    );

    // The listing shows alice's own connection, never bob's; revoke deletes it (and revokes at
    // the authorization server, which offers RFC 7009): the next call asks to connect.
    let mine = connections.list("alice-principal").await.unwrap();
    assert_eq!(mine.len(), 1);
    assert_eq!(connections.list("bob-principal").await.unwrap().len(), 1);
    assert!(connections
        .list("carol-principal")
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        connections
            .revoke("alice-principal", UPSTREAM)
            .await
            .unwrap(),
        (true, None)
    );
    assert!(matches!(
        connector.access("alice-principal", None).await,
        Err(ConnectError::Missing(_))
    ));
    let _ = std::fs::remove_dir_all(&dir);
}

/// An access token the authorization server expires (2 s) is refreshed without the user, the
/// rotated refresh token stored; after the grant is revoked at the authorization server, the
/// next refresh is refused: the record is deleted and the call fails naming the connect URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_token_is_refreshed_and_a_revoked_connection_asks_to_connect_again() {
    let issuer = issuer(2).await;
    let rs = resource(&issuer.url).await;
    let dir = tempdir("expiry");
    let (store, _) = sqlite(&dir).await;
    let keys = keys();
    let connections = Connections::new(ConnectConfig::new(
        PAGE,
        vec![upstream(&rs)],
        store.clone(),
        keys.clone(),
    ));
    connect(&connections, "alice-principal", "alice").await;
    let key = CredentialKey::new("alice-principal", UPSTREAM, CONNECTION);
    let first = open(
        &keys,
        &store.credential(key.clone()).await.unwrap().unwrap(),
        &key,
    );

    // No margin: the token is used until the authorization server's expiry, then refreshed.
    let connector = Arc::new(
        Connector::new(UPSTREAM, PAGE, store.clone(), keys.clone()).refresh_before(Duration::ZERO),
    );
    let auth = || ConnectionAuth::new(connector.clone(), "alice-principal");
    assert_eq!(whoami(auth(), &rs.url).await.unwrap(), "alice");
    assert_eq!(connector.refreshes(), 0);
    tokio::time::sleep(Duration::from_millis(3100)).await;
    assert_eq!(whoami(auth(), &rs.url).await.unwrap(), "alice");
    assert_eq!(connector.refreshes(), 1);
    let second = open(
        &keys,
        &store.credential(key.clone()).await.unwrap().unwrap(),
        &key,
    );
    assert_ne!(second.access_token, first.access_token);
    assert_ne!(second.refresh_token, first.refresh_token, "rotated");
    assert!(second.expires_at.unwrap() > first.expires_at.unwrap());

    // Revoked at the authorization server (RFC 7009, the grant with it).
    let http = reqwest::Client::new();
    let revoked = http
        .post(
            second
                .revocation_endpoint
                .clone()
                .expect("oidc-provider offers revocation"),
        )
        .form(&[
            ("token", second.refresh_token.clone().unwrap()),
            ("token_type_hint", "refresh_token".into()),
            ("client_id", second.client_id.clone()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), 200);
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let err = whoami(auth(), &rs.url).await.unwrap_err();
    assert!(
        err.contains("alice-principal must connect again to upstream \"files\": connect again at http://127.0.0.1:9/connect/files"),
        "{err}"
    );
    assert!(
        err.contains("(the authorization server refused the refresh (HTTP 400: invalid_grant))"),
        "{err}"
    );
    assert!(
        !err.contains(&second.access_token)
            && !err.contains(second.refresh_token.as_deref().unwrap())
    );
    assert!(
        store.credential(key.clone()).await.unwrap().is_none(),
        "the record is deleted"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two instances (two connectors, as two gateway instances) on one PostgreSQL store refresh the
/// same connection at once, 100 rounds: every call succeeds with the same new token, one refresh
/// reaches the authorization server per round, and only the stored refresh token still works
/// (a rotated one is refused).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_refreshing_one_connection_keep_one_valid_refresh_token() {
    let Some(pg) = std::env::var("PURRA_TEST_POSTGRES").ok() else {
        panic!("PURRA_TEST_POSTGRES is not set: eval \"$(bash scripts/postgres.sh start DIR)\"");
    };
    let issuer = issuer(3600).await;
    let rs = resource(&issuer.url).await;
    let open_store = || async {
        AnyStore::open(&StoreLocation::parse(&pg).unwrap(), None)
            .await
            .unwrap()
            .credentials()
    };
    let (store_a, store_b) = (open_store().await, open_store().await);
    let keys = keys();
    let principal = format!("alice-race-{}", std::process::id());
    let connections = Connections::new(ConnectConfig::new(
        PAGE,
        vec![upstream(&rs)],
        store_a.clone(),
        keys.clone(),
    ));
    connect(&connections, &principal, "alice").await;
    let key = CredentialKey::new(&principal, UPSTREAM, CONNECTION);
    let first = open(
        &keys,
        &store_a.credential(key.clone()).await.unwrap().unwrap(),
        &key,
    );

    let a = Arc::new(Connector::new(
        UPSTREAM,
        PAGE,
        store_a.clone(),
        keys.clone(),
    ));
    let b = Arc::new(Connector::new(
        UPSTREAM,
        PAGE,
        store_b.clone(),
        keys.clone(),
    ));
    let http = HttpClientOptions::default;
    let client_a = Client::connect_http(
        &rs.url,
        http().auth(ConnectionAuth::new(a.clone(), &principal)),
        ClientOptions::default(),
    )
    .await
    .unwrap();
    let client_b = Client::connect_http(
        &rs.url,
        http().auth(ConnectionAuth::new(b.clone(), &principal)),
        ClientOptions::default(),
    )
    .await
    .unwrap();
    let mut current = first.access_token.clone();
    for round in 0..100 {
        // Both were refused the current token at once (as after its expiry): both refresh.
        let (ta, tb) = tokio::join!(
            a.access(&principal, Some(&current)),
            b.access(&principal, Some(&current))
        );
        let (ta, tb) = (ta.unwrap(), tb.unwrap());
        assert_eq!(
            ta.token, tb.token,
            "round {round}: both use the winner's token"
        );
        assert_ne!(ta.token, current, "round {round}");
        current = ta.token;
        let (ra, rb) = tokio::join!(
            client_a.call_tool("whoami", json!({})),
            client_b.call_tool("whoami", json!({}))
        );
        for r in [ra.unwrap(), rb.unwrap()] {
            assert!(!r.is_error(), "round {round}: {r:?}");
            assert_eq!(r.texts().collect::<String>(), "alice");
        }
    }
    assert_eq!(a.refreshes() + b.refreshes(), 100, "one refresh per round");
    let last = open(
        &keys,
        &store_a.credential(key.clone()).await.unwrap().unwrap(),
        &key,
    );
    assert_eq!(last.access_token, current);
    assert_eq!(last.lease_until, None);
    // At rest in PostgreSQL only sealed: a dump holds none of the token bytes.
    let dump = std::process::Command::new(pg_dump())
        .args(["--data-only", "--dbname", &pg])
        .output()
        .unwrap();
    assert!(
        dump.status.success(),
        "{}",
        String::from_utf8_lossy(&dump.stderr)
    );
    assert!(
        dump.stdout.len() > 1000,
        "the dump holds the store's tables"
    );
    for secret in [
        first.refresh_token.as_deref().unwrap(),
        &first.access_token,
        last.refresh_token.as_deref().unwrap(),
        &last.access_token,
    ] {
        assert!(
            !dump
                .stdout
                .windows(secret.len())
                .any(|w| w == secret.as_bytes()),
            "a token is in the PostgreSQL dump"
        );
    }
    // The stored refresh token works (one more refresh through an instance) …
    let next = a.access(&principal, Some(&current)).await.unwrap();
    assert_ne!(next.token, current);
    // … and a rotated one does not (the first; refused as reused, which also ends the grant:
    // done last).
    let refused = reqwest::Client::new()
        .post(&first.token_endpoint)
        .form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", first.refresh_token.as_deref().unwrap()),
            ("client_id", first.client_id.as_str()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    let body: Value = serde_json::from_slice(&refused.bytes().await.unwrap()).unwrap();
    assert_eq!(body["error"], "invalid_grant");
    store_a.delete_credential(key).await.unwrap();
}

use purra_store_tests::pg_dump;

use purra_store_tests::webdriver;

/// The whole flow in a browser: alice signs in at the page through the provider, opens
/// `/connect/files`, signs in and consents at the upstream's authorization server (another
/// site: `localhost`, so the page's `SameSite=Strict` session cookie stays behind on the way
/// back, as with any real one), and comes back connected;
/// her record is sealed, a call with it reaches the upstream as alice, the page lists the
/// connection (hers only) and revokes it.
#[test]
fn chromium_connects_a_signed_in_user_and_revokes_on_the_page() {
    use purra_page::{AllowList, OidcConfig, OidcLogin, Page, PageConfig};
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let issuer = rt.block_on(issuer(3600));
    let upstream_as = rt.block_on(issuer_at("localhost", 3600));
    let rs = rt.block_on(resource(&upstream_as.url));
    let dir = tempdir("chromium");
    let path = dir.join("purra.db");
    let any = rt.block_on(async {
        AnyStore::open(&StoreLocation::parse(path.to_str().unwrap()).unwrap(), None)
            .await
            .unwrap()
    });
    let store = any.credentials();
    let keys = keys();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let page_url = format!("http://{}", listener.local_addr().unwrap());
    let connections = Arc::new(Connections::new(ConnectConfig::new(
        &page_url,
        vec![upstream(&rs)],
        store.clone(),
        keys.clone(),
    )));
    let sign_in = OidcLogin::new(
        OidcConfig::new(&issuer.url, "purra-page")
            .client_secret("page-secret")
            .scopes(["openid", "email", "profile", "groups"]),
        AllowList::default().subject("alice"),
    );
    let config = PageConfig::default()
        .token_login(false)
        .oidc(sign_in)
        .oauth(connections);
    let page = Page::new(any.operator(), config);
    rt.spawn(async move { page.serve(listener, std::future::pending()).await });

    let b = webdriver::Browser::new(1000, 900);
    b.goto(&format!("{page_url}/login"));
    b.click_css("#login-oidc");
    b.type_css("input[name=login]", "alice");
    b.type_css("input[name=password]", "any");
    b.click_css("button.login-submit");
    b.wait_for("input[name=prompt][value=consent]");
    b.click_css("button.login-submit");
    b.wait_for("#approver");

    b.goto(&format!("{page_url}/connect/{UPSTREAM}"));
    b.type_css("input[name=login]", "alice");
    b.type_css("input[name=password]", "any");
    b.click_css("button.login-submit");
    b.wait_for("input[name=prompt][value=consent]");
    b.click_css("button.login-submit");
    b.wait_text("#connect-message", "You are connected to files.");
    assert!(b
        .url()
        .starts_with(&format!("{page_url}/connect/files/callback?")));
    let cookies = b.cookies();
    assert!(
        !cookies.to_string().contains("purra_page_connect"),
        "the connect cookie is used once: {cookies}"
    );

    let principal = purra_core::principal_name(&issuer.url, "alice");
    let key = CredentialKey::new(&principal, UPSTREAM, CONNECTION);
    let record = rt
        .block_on(store.credential(key.clone()))
        .unwrap()
        .expect("the connection is stored under alice's principal");
    let conn = open(&keys, &record, &key);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend(std::fs::read(dir.join("purra.db-wal")).unwrap_or_default());
    for secret in [&conn.access_token, conn.refresh_token.as_ref().unwrap()] {
        assert!(
            !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "a token is in the store's file"
        );
    }
    let connector = Arc::new(Connector::new(
        UPSTREAM,
        &page_url,
        store.clone(),
        keys.clone(),
    ));
    let who = rt
        .block_on(whoami(ConnectionAuth::new(connector, &principal), &rs.url))
        .unwrap();
    assert_eq!(who, "alice");

    b.goto(&format!("{page_url}/connect"));
    b.wait_for("tr.connection[data-upstream=files]");
    assert!(!b.body_text().contains(&conn.access_token));
    b.click_css("tr.connection[data-upstream=files] button");
    b.wait_text("#connect-message", "Your connection to files is revoked.");
    assert!(rt.block_on(store.credential(key)).unwrap().is_none());
    let _ = std::fs::remove_dir_all(&dir);
}
