//! RFC 8693 token exchange against a real authorization server: idpyoidc (PyPI,
//! `peers/idpyoidc/server.py`, its own token exchange and client credentials handlers, JWT access
//! tokens) and a resource server on the official Python SDK (`peers/python/exchange_upstream.py`,
//! the SDK's own bearer auth checking signature, issuer, expiry and that `aud` is itself, and
//! recording the subject of every call). Both are started once for this test binary. purra's
//! [`TokenExchange`] trades alice's and bob's inbound tokens for tokens for the upstream,
//! [`ExchangeCache`] keeps them per principal, and purra's client calls the upstream with them.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use base64::Engine as _;
use purra_protocol::auth::{
    ClientAuthMethod, ExchangeCache, ExchangeRequest, MemoryTokenStore, OAuthClient, OAuthConfig,
    SigningAlgorithm, SigningKey, TokenExchange, TokenExchangeConfig, UrlPolicy, ACCESS_TOKEN_TYPE,
};
use purra_protocol::stdio::StdioCommand;
use purra_protocol::{AuthError, Client, ClientOptions, Error, HttpClientOptions};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

const GATEWAY: &str = "purra-gateway";
const GATEWAY_SECRET: &str = "gateway-secret";

use crate::support::client_credentials_token;
use crate::support::process::{python, repo_root};

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts `cmd` and returns it with the first stdout line that starts with `prefix` (minus it).
/// The peer exits when its stdin (held by the returned child) closes.
fn start(mut cmd: Command, prefix: &str) -> (Child, String) {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start a peer");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = loop {
        let line = lines
            .next()
            .expect("the peer ended before it was ready")
            .unwrap();
        if let Some(rest) = line.strip_prefix(prefix) {
            break rest.to_owned();
        }
    };
    (child, line)
}

/// One idpyoidc authorization server and the resource server that trusts it.
struct Peers {
    issuer: String,
    upstream: String,
    record: PathBuf,
    key_pem: Vec<u8>,
    _children: Mutex<Vec<Child>>,
}

fn start_peers(tag: &str, lifetime: u64) -> Peers {
    let dir = std::env::temp_dir().join(format!("purra-exchange-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("gateway-key.pem");
    let record = dir.join("record.txt");
    let _ = std::fs::remove_file(&record);
    let mut idp = Command::new(python("venv-idp"));
    idp.arg(repo_root().join("peers/idpyoidc/server.py"))
        .arg("0")
        .arg(&key)
        .arg("--lifetime")
        .arg(lifetime.to_string())
        .current_dir(&dir);
    let (idp, issuer) = start(idp, "issuer ");
    let mut up = Command::new(python("venv"));
    up.arg(repo_root().join("peers/python/exchange_upstream.py"))
        .arg(free_port().to_string())
        .arg(&issuer)
        .arg(&record);
    let (up, upstream) = start(up, "ready ");
    wait_listening(&upstream);
    Peers {
        issuer,
        upstream,
        record,
        key_pem: std::fs::read(&key).unwrap(),
        _children: Mutex::new(vec![idp, up]),
    }
}

/// Waits until something accepts connections at the URL's port (uvicorn prints before binding).
fn wait_listening(url: &str) {
    let u = reqwest::Url::parse(url).unwrap();
    let addr = format!("127.0.0.1:{}", u.port().unwrap());
    for _ in 0..200 {
        if std::net::TcpStream::connect(&addr).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("nothing listens at {addr}");
}

fn peers() -> &'static Peers {
    static PEERS: OnceLock<Peers> = OnceLock::new();
    PEERS.get_or_init(|| start_peers("main", 3600))
}

fn token_endpoint(p: &Peers) -> String {
    format!("{}/token", p.issuer)
}

fn secret_exchange(p: &Peers, method: ClientAuthMethod) -> TokenExchange {
    TokenExchangeConfig::client_secret(&token_endpoint(p), &p.issuer, GATEWAY, GATEWAY_SECRET)
        .auth_method(method)
        .url_policy(UrlPolicy::strict().allow_loopback(true))
        .build()
        .unwrap()
}

fn jwt_exchange(p: &Peers) -> TokenExchange {
    let key = SigningKey::from_pkcs8(&p.key_pem, SigningAlgorithm::ES256)
        .unwrap()
        .with_kid("gw");
    TokenExchangeConfig::private_key_jwt(&token_endpoint(p), &p.issuer, GATEWAY, key)
        .url_policy(UrlPolicy::strict().allow_loopback(true))
        .build()
        .unwrap()
}

/// An inbound access token for `user` (audience: the gateway), from idpyoidc's token endpoint.
async fn inbound(p: &Peers, user: &str) -> String {
    let v: Value = reqwest::Client::new()
        .post(format!("{}/test/login", p.issuer))
        .form(&[("user", user)])
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .map(|b| serde_json::from_slice(&b).unwrap())
        .unwrap();
    v["access_token"]
        .as_str()
        .expect("an access token")
        .to_owned()
}

/// The gateway's own token (client credentials), its actor token.
async fn gateway_token(p: &Peers) -> String {
    client_credentials_token(
        &reqwest::Client::new(),
        &token_endpoint(p),
        (GATEWAY, GATEWAY_SECRET),
    )
    .await
}

fn claims(jwt: &str) -> Value {
    let payload = jwt.split('.').nth(1).unwrap();
    serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload)
            .unwrap(),
    )
    .unwrap()
}

fn for_upstream(p: &Peers, subject: &str) -> ExchangeRequest {
    ExchangeRequest::new(subject)
        .audience(&p.upstream)
        .scope("mcp:read")
}

async fn connect(url: &str, bearer: &str) -> Result<purra_protocol::Connection, Error> {
    let http = HttpClientOptions::default().header("authorization", bearer);
    Client::connect_http(url, http, ClientOptions::default()).await
}

fn text(r: &purra_protocol::types::CallToolResult) -> String {
    assert!(!r.is_error(), "{r:?}");
    r.texts().collect::<Vec<_>>().join("")
}

async fn whoami(url: &str, bearer: &str) -> Value {
    let conn = connect(url, bearer).await.expect("connect with the token");
    let me =
        serde_json::from_str(&text(&conn.call_tool("whoami", json!({})).await.unwrap())).unwrap();
    conn.close().await;
    me
}

fn recorded(p: &Peers) -> Vec<String> {
    std::fs::read_to_string(&p.record)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exchange_names_the_caller_the_upstream_and_the_actor() {
    let p = peers();
    let alice = inbound(p, "alice").await;
    assert_eq!(claims(&alice)["aud"], json!([GATEWAY]));

    // client_secret_basic, no actor: aud is the upstream, sub is alice, no act.
    let t = secret_exchange(p, ClientAuthMethod::ClientSecretBasic)
        .exchange(&for_upstream(p, &alice))
        .await
        .unwrap();
    assert_eq!(t.issued_token_type, ACCESS_TOKEN_TYPE);
    assert_eq!(t.token_type, "Bearer");
    assert_eq!(t.scope.as_deref(), Some("mcp:read"));
    let c = claims(&t.access_token);
    assert_eq!(c["aud"], json!([p.upstream]));
    assert_eq!(c["sub"], "alice");
    assert_eq!(c["client_id"], GATEWAY);
    assert!(c.get("act").is_none(), "{c}");
    // The expiry is the earlier of expires_in and the JWT's own exp.
    assert_eq!(t.expires_at, c["exp"].as_u64());
    assert_ne!(t.access_token, alice);

    // With the gateway's own token as actor token: act.sub names the gateway.
    let actor = gateway_token(p).await;
    let t = secret_exchange(p, ClientAuthMethod::ClientSecretPost)
        .exchange(&for_upstream(p, &alice).actor_token(&actor, ACCESS_TOKEN_TYPE))
        .await
        .unwrap();
    let c = claims(&t.access_token);
    assert_eq!(
        (&c["sub"], &c["act"], &c["aud"]),
        (
            &json!("alice"),
            &json!({"sub": GATEWAY}),
            &json!([p.upstream])
        )
    );

    // private_key_jwt authenticates the same client.
    let t = jwt_exchange(p)
        .exchange(&for_upstream(p, &alice))
        .await
        .unwrap();
    assert_eq!(claims(&t.access_token)["sub"], "alice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_sees_the_caller_and_refuses_the_inbound_token() {
    let p = peers();
    let ex = secret_exchange(p, ClientAuthMethod::ClientSecretBasic);
    for user in ["alice", "bob"] {
        let inbound = inbound(p, user).await;
        let t = ex.exchange(&for_upstream(p, &inbound)).await.unwrap();
        let me = whoami(&p.upstream, &t.bearer()).await;
        assert_eq!(me, json!({"sub": user, "act": "-"}));
        assert!(
            recorded(p).contains(&format!("whoami {user} - -")),
            "{:?}",
            recorded(p)
        );
        // The inbound token (audience: the gateway) is refused by the upstream's own auth.
        let err = connect(&p.upstream, &format!("Bearer {inbound}"))
            .await
            .expect_err("the inbound token is refused");
        assert!(matches!(err, Error::Http { status: 401, .. }), "{err:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_is_per_principal_and_exchanges_again_near_expiry() {
    let p = peers();
    let (alice, bob) = (inbound(p, "alice").await, inbound(p, "bob").await);
    let cache = ExchangeCache::with_bounds(
        secret_exchange(p, ClientAuthMethod::ClientSecretBasic),
        Duration::from_secs(5),
        16,
    );
    let a1 = cache
        .token("alice", &for_upstream(p, &alice))
        .await
        .unwrap();
    let a2 = cache
        .token("alice", &for_upstream(p, &alice))
        .await
        .unwrap();
    assert_eq!(a1, a2);
    assert_eq!(cache.exchanges(), 1);
    let b = cache.token("bob", &for_upstream(p, &bob)).await.unwrap();
    assert_ne!(b.access_token, a1.access_token);
    assert_eq!(claims(&b.access_token)["sub"], "bob");
    assert_eq!(cache.exchanges(), 2);
    // Another principal presenting alice's token gets an exchange of its own, not alice's entry.
    let other = cache
        .token("mallory", &for_upstream(p, &alice))
        .await
        .unwrap();
    assert_ne!(other.access_token, a1.access_token);
    assert_eq!(cache.exchanges(), 3);
    // Another scope is another entry.
    let w = cache
        .token("alice", &for_upstream(p, &alice).scope("mcp:write"))
        .await
        .unwrap();
    assert_eq!(w.scope.as_deref(), Some("mcp:write"));
    assert_eq!(cache.exchanges(), 4);
    assert_eq!(cache.len(), 4);

    // A cache whose refresh margin is longer than the tokens live: every token is due, so
    // each call exchanges again.
    let due = ExchangeCache::with_bounds(
        secret_exchange(p, ClientAuthMethod::ClientSecretBasic),
        Duration::from_secs(24 * 3600),
        16,
    );
    let t1 = due.token("alice", &for_upstream(p, &alice)).await.unwrap();
    let t2 = due.token("alice", &for_upstream(p, &alice)).await.unwrap();
    assert_ne!(t1.access_token, t2.access_token);
    assert_eq!(due.exchanges(), 2);
    assert_eq!(claims(&t2.access_token)["sub"], "alice");

    // Bounded: a cache of 2 keys holds 2.
    let small = ExchangeCache::with_bounds(
        secret_exchange(p, ClientAuthMethod::ClientSecretBasic),
        Duration::from_secs(5),
        2,
    );
    for who in ["a", "b", "c"] {
        small.token(who, &for_upstream(p, &alice)).await.unwrap();
    }
    assert_eq!(small.len(), 2);
    cache.forget("alice");
    assert_eq!(cache.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_reach_the_upstream_as_their_caller() {
    let p = peers();
    let (alice, bob) = (inbound(p, "alice").await, inbound(p, "bob").await);
    let cache = ExchangeCache::with_bounds(
        secret_exchange(p, ClientAuthMethod::ClientSecretBasic),
        Duration::from_secs(5),
        16,
    );
    let gate = Arc::new(tokio::sync::Semaphore::new(16));
    let mut tasks = Vec::new();
    for i in 0..200 {
        let (who, subject) = if i % 2 == 0 {
            ("alice", alice.clone())
        } else {
            ("bob", bob.clone())
        };
        let (cache, gate, url) = (cache.clone(), gate.clone(), p.upstream.clone());
        let req = for_upstream(p, &subject);
        tasks.push(tokio::spawn(async move {
            let t = cache.token(who, &req).await.unwrap();
            let _permit = gate.acquire().await.unwrap();
            let conn = connect(&url, &t.bearer()).await.unwrap();
            let value = format!("{who}-{i}");
            let r = conn
                .call_tool("set_value", json!({"value": value}))
                .await
                .unwrap();
            let answer: Value = serde_json::from_str(&text(&r)).unwrap();
            conn.close().await;
            assert_eq!(answer["sub"], who);
            assert_eq!(answer["value"], value);
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    // One exchange per principal (the concurrent misses waited for it).
    assert_eq!(cache.exchanges(), 2);
    let lines: Vec<String> = recorded(p)
        .into_iter()
        .filter(|l| l.starts_with("set_value ") && (l.contains(" alice-") || l.contains(" bob-")))
        .collect();
    assert_eq!(lines.len(), 200, "{lines:?}");
    for l in &lines {
        let f: Vec<&str> = l.split(' ').collect();
        assert_eq!(f.len(), 4, "{l}");
        assert!(
            f[3].starts_with(&format!("{}-", f[1])),
            "recorded as the wrong caller: {l}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_subject_token_is_a_typed_error_without_token_text() {
    let p = peers();
    let ex = secret_exchange(p, ClientAuthMethod::ClientSecretBasic);
    let bogus = "not-a-token-issued-by-this-server-0123456789";
    let err = ex.exchange(&for_upstream(p, bogus)).await.unwrap_err();
    assert!(
        matches!(&err, AuthError::Token { error, .. } if error == "invalid_request"),
        "{err:?}"
    );
    assert!(!err.to_string().contains(bogus), "{err}");

    let alice = inbound(p, "alice").await;
    let resp = reqwest::Client::new()
        .post(format!("{}/test/revoke", p.issuer))
        .form(&[("token", alice.as_str())])
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success());
    let err = ex.exchange(&for_upstream(p, &alice)).await.unwrap_err();
    assert!(
        matches!(&err, AuthError::Token { error, .. } if error == "invalid_request"),
        "{err:?}"
    );
    let shown = format!("{err} {err:?}");
    assert!(!shown.contains(&alice), "{shown}");
    assert!(!shown.contains(GATEWAY_SECRET), "{shown}");

    // A resource the authorization server does not know: its own error code, invalid_target.
    let alice = inbound(p, "alice").await;
    let err = ex
        .exchange(&ExchangeRequest::new(&alice).resource("https://unknown.example/mcp"))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the token endpoint refused the request: invalid_target (Unknown resource)"
    );

    // A wrong client secret: the authorization server's own error code.
    let wrong = TokenExchangeConfig::client_secret(&token_endpoint(p), &p.issuer, GATEWAY, "nope")
        .url_policy(UrlPolicy::strict().allow_loopback(true))
        .build()
        .unwrap();
    let alice = inbound(p, "alice").await;
    let err = wrong.exchange(&for_upstream(p, &alice)).await.unwrap_err();
    assert!(
        matches!(&err, AuthError::Token { error, .. } if error == "invalid_client"),
        "{err:?}"
    );
    assert!(!format!("{err} {err:?}").contains(&alice));
}

#[test]
fn exchange_configuration_is_checked_before_sending() {
    let plain = TokenExchangeConfig::client_secret(
        "http://as.example/token",
        "http://as.example",
        GATEWAY,
        "s",
    )
    .build()
    .unwrap_err();
    assert!(plain.to_string().contains("https"), "{plain}");
    let loopback_not_allowed = TokenExchangeConfig::client_secret(
        "http://127.0.0.1:1/token",
        "http://127.0.0.1:1",
        GATEWAY,
        "s",
    )
    .build()
    .unwrap_err();
    assert!(
        matches!(loopback_not_allowed, AuthError::UrlRefused { .. }),
        "{loopback_not_allowed:?}"
    );
    let elsewhere = TokenExchangeConfig::client_secret(
        "https://other.example/token",
        "https://as.example",
        GATEWAY,
        "s",
    )
    .build()
    .unwrap_err();
    assert!(elsewhere.to_string().contains("origin"), "{elsewhere}");
    let public = TokenExchangeConfig::client_secret(
        "https://as.example/token",
        "https://as.example",
        GATEWAY,
        "s",
    )
    .auth_method(ClientAuthMethod::None)
    .build()
    .unwrap_err();
    assert!(
        public.to_string().contains("authenticated client"),
        "{public}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_credentials_are_refreshed_after_expiry() {
    // A pair of its own whose tokens live 3 s.
    let p = start_peers("cc", 3);
    let store = Arc::new(MemoryTokenStore::new());
    let config = OAuthConfig::client_credentials(GATEWAY, GATEWAY_SECRET)
        .authorization_server(&p.issuer)
        .url_policy(UrlPolicy::strict().allow_loopback(true))
        .store(store)
        .refresh_before(Duration::from_secs(1));
    let auth = OAuthClient::new(&p.upstream, config).unwrap();
    let http = HttpClientOptions::default().auth(auth.clone());
    let conn = Client::connect_http(&p.upstream, http, ClientOptions::default())
        .await
        .unwrap();
    let first = auth.tokens().await.unwrap().expect("a token").access_token;
    let c = claims(&first);
    assert_eq!(c["aud"], json!([p.upstream]));
    text(&conn.call_tool("whoami", json!({})).await.unwrap());
    tokio::time::sleep(Duration::from_secs(3)).await;
    // Due: the next call obtains a new one first.
    text(&conn.call_tool("whoami", json!({})).await.unwrap());
    let second = auth.tokens().await.unwrap().expect("a token").access_token;
    assert_ne!(first, second);
    assert!(claims(&second)["exp"].as_u64() > c["exp"].as_u64());
    assert_eq!(
        recorded(&p)
            .iter()
            .filter(|l| l.starts_with("whoami "))
            .count(),
        2
    );
    conn.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_server_sees_only_the_token_in_its_environment() {
    let secret = "alice-personal-token-0123";
    let cmd = StdioCommand::new(python("venv"))
        .args([repo_root().join("peers/python/token_env_server.py")])
        .env("PURRA_TEST_TOKEN", secret);
    let conn = Client::connect_stdio(cmd, ClientOptions::default())
        .await
        .unwrap();
    let answer = text(&conn.call_tool("whoami", json!({})).await.unwrap());
    assert_eq!(answer, format!("{:x}", Sha256::digest(secret.as_bytes())));
    assert!(!answer.contains(secret));
    conn.close().await;
}

/// A token endpoint on a raw socket that answers every request with `answer` (or never, when it
/// is `None`): what a broken or hostile authorization server does, which idpyoidc will not.
async fn raw_endpoint(answer: Option<Vec<u8>>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            let answer = answer.clone();
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut buf = vec![0u8; 16 * 1024];
                let _ = s.read(&mut buf).await;
                match answer {
                    Some(a) => {
                        let _ = s.write_all(&a).await;
                    }
                    None => tokio::time::sleep(Duration::from_secs(30)).await,
                }
            });
        }
    });
    url
}

fn raw_exchange(base: &str) -> TokenExchange {
    TokenExchangeConfig::client_secret(&format!("{base}/token"), base, GATEWAY, GATEWAY_SECRET)
        .url_policy(UrlPolicy::strict().allow_loopback(true))
        .request_timeout(Duration::from_millis(500))
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exchange_answers_are_bounded_in_time_and_size() {
    let subject = "subject-token-that-must-not-show-0123456789";
    let silent = raw_endpoint(None).await;
    let err = raw_exchange(&silent)
        .exchange(&ExchangeRequest::new(subject).audience("u"))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "the token endpoint refused the request: request_failed (POST {silent}/token: no complete answer within 500 ms)"
        )
    );

    let mut big =
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 300000\r\n\r\n"
            .to_vec();
    big.extend(std::iter::repeat_n(b' ', 300_000));
    let huge = raw_endpoint(Some(big)).await;
    let err = raw_exchange(&huge)
        .exchange(&ExchangeRequest::new(subject).audience("u"))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the token endpoint refused the request: invalid_response (the body is over 262144 bytes)"
    );

    // An error answer that echoes the subject token back: the token is taken out.
    let body = format!(r#"{{"error":"invalid_grant","error_description":"bad token {subject}"}}"#);
    let echo = format!(
        "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let echoing = raw_endpoint(Some(echo.into_bytes())).await;
    let err = raw_exchange(&echoing)
        .exchange(&ExchangeRequest::new(subject).audience("u"))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the token endpoint refused the request: invalid_grant (bad token <redacted>)"
    );
}
