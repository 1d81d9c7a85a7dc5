//! MCP authorization end to end against a real authorization server: oidc-provider 9
//! (`peers/oidc/server.mjs`, installed by `scripts/setup-peers.sh`, started once for this test
//! binary) with resource indicators and JWT access tokens. purra's OAuth client runs the
//! authorization code flow (the test plays the user at the server's login and consent forms),
//! calls a guarded purra server, steps up to a wider scope and refreshes an expired token; the
//! guard refuses a token for another resource, an expired token, a token signed by another key
//! and a token missing a scope, each with its exact status and `WWW-Authenticate`; the principal
//! reaches the handler, and a session is refused to another principal; an ID token the server
//! issued is no access token (finding 10 of the security review). The official TypeScript SDK's
//! client (`peers/node/oauth_client.mjs`) authorizes against the same server and calls the
//! guarded purra server.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use purra_protocol::auth::{
    AuthLayer, AuthorizationRequest, AuthorizationResponse, Authorizer, BoxFuture, JwtValidator,
    MemoryTokenStore, OAuthClient, OAuthConfig, TokenRejection, TokenStore as _, TokenValidator,
    UrlPolicy,
};
use purra_protocol::http::{serve, ConnectionLimits};
use purra_protocol::{
    AuthError, CancellationToken, Client, ClientOptions, HandlerResult, HttpClientOptions,
    HttpServerConfig, RequestCtx, Server, StreamableHttpServer,
};
use reqwest::Url;
use serde_json::{json, Value};

use crate::support::{
    self,
    process::{node, repo_root},
    Nothing, INIT,
};

/// How long purra-public's access tokens live at the authorization server.
const PUBLIC_TTL: u64 = 4;
const REDIRECT_URI: &str = "http://127.0.0.1/callback";

/// The authorization server's issuer URL; the server is started on first use and lives as long
/// as this test binary (it exits when its stdin closes).
pub(crate) fn issuer() -> &'static str {
    static OIDC: OnceLock<(String, Mutex<Child>)> = OnceLock::new();
    &OIDC
        .get_or_init(|| {
            let node = node();
            let dir = repo_root().join("peers/oidc");
            assert!(
                node.exists() && dir.join("node_modules/oidc-provider").exists(),
                "{} or peers/oidc/node_modules is missing: run scripts/setup-peers.sh (the test command does)",
                node.display()
            );
            let mut child = Command::new(&node)
                .arg("server.mjs")
                .current_dir(&dir)
                .env("PURRA_OIDC_PUBLIC_TTL", PUBLIC_TTL.to_string())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("start peers/oidc/server.mjs");
            let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
            let issuer = loop {
                let line = lines
                    .next()
                    .expect("the authorization server ended before printing its issuer")
                    .unwrap();
                if line.starts_with('{') {
                    let v: Value = serde_json::from_str(&line).unwrap();
                    break v["issuer"].as_str().unwrap().to_owned();
                }
            };
            std::thread::spawn(move || lines.for_each(drop));
            (issuer, Mutex::new(child))
        })
        .0
}

/// Everything purra-protocol logs in this process, at every level (a global subscriber: the one
/// test that reads it runs alone in a child process).
fn logs() -> &'static Mutex<Vec<u8>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let writer = buf.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(move || Capture(writer.clone()))
            .finish();
        tracing::subscriber::set_global_default(subscriber).unwrap();
        buf
    })
}

struct Capture(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Capture {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A purra server behind the guard: `whoami` answers with the principal the handler sees,
/// `write` needs `mcp:write` on top of the `mcp:read` every request needs.
struct Guarded {
    url: String,
    metadata: String,
    stop: CancellationToken,
}

impl Drop for Guarded {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn guarded() -> Guarded {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let server = Server::builder("guarded", "1").build();
    server
        .tool(
            "whoami",
            "Who is calling",
            |_: Nothing, ctx: RequestCtx| async move {
                let p = ctx
                    .principal()
                    .expect("the guard put a principal in the request");
                let r: HandlerResult<String> = Ok(json!({
                    "subject": p.subject,
                    "issuer": p.issuer,
                    "client_id": p.client_id,
                    "scopes": p.scopes,
                    "session": ctx.session_id().is_some(),
                })
                .to_string());
                r
            },
        )
        .unwrap()
        .tool(
            "token_tail",
            "The last 8 characters of the token the guard validated for this request",
            |_: Nothing, ctx: RequestCtx| async move {
                let token = ctx
                    .extension::<purra_protocol::auth::ValidatedToken>()
                    .expect("the guard put the validated token in the request");
                let tail = &token.secret()[token.secret().len() - 8..];
                let r: HandlerResult<String> = Ok(tail.to_owned());
                r
            },
        )
        .unwrap()
        .tool("write", "Writes", |_: Nothing, _ctx: RequestCtx| async {
            let r: HandlerResult<&'static str> = Ok("written");
            r
        })
        .unwrap();
    let config = HttpServerConfig {
        json_response: true,
        ..HttpServerConfig::default()
    };
    let validator = JwtValidator::new(issuer(), &url)
        .unwrap()
        .leeway(Duration::from_secs(1));
    let guard = AuthLayer::new(&url, issuer(), validator)
        .unwrap()
        .required_scopes(["mcp:read"])
        .tool_scopes("write", ["mcp:write"])
        .scopes_supported(["mcp:read", "mcp:write"]);
    let metadata = guard.metadata_url().to_owned();
    let service = guard.layer(StreamableHttpServer::new(server, config).router());
    let stop = CancellationToken::new();
    tokio::spawn(serve(
        listener,
        service,
        ConnectionLimits::default(),
        stop.clone(),
    ));
    Guarded {
        url,
        metadata,
        stop,
    }
}

/// Plays the user's browser: follows the authorization server's redirects with its cookies,
/// signs in as `user` on the login form and accepts the consent form, and hands back the
/// redirect to [`REDIRECT_URI`] without following it.
struct Browser {
    http: reqwest::Client,
    user: String,
    /// Where the authorization server sends the browser back ([`REDIRECT_URI`] unless said).
    redirect: &'static str,
    cookies: Mutex<HashMap<String, String>>,
    authorizations: AtomicU32,
}

impl Browser {
    fn new(user: &str) -> Arc<Self> {
        Self::returning_to(user, REDIRECT_URI)
    }

    fn returning_to(user: &str, redirect: &'static str) -> Arc<Self> {
        Arc::new(Browser {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            user: user.to_owned(),
            redirect,
            cookies: Mutex::new(HashMap::new()),
            authorizations: AtomicU32::new(0),
        })
    }

    async fn send(&self, rb: reqwest::RequestBuilder) -> reqwest::Response {
        let cookie = {
            let jar = self.cookies.lock().unwrap();
            jar.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join("; ")
        };
        let resp = rb.header("cookie", cookie).send().await.unwrap();
        let mut jar = self.cookies.lock().unwrap();
        for v in resp.headers().get_all("set-cookie") {
            let pair = v.to_str().unwrap().split(';').next().unwrap();
            let (k, v) = pair.split_once('=').unwrap();
            jar.insert(k.to_owned(), v.to_owned());
        }
        resp
    }

    async fn run(&self, start: Url) -> Result<AuthorizationResponse, AuthError> {
        let mut url = start;
        let mut resp = self.send(self.http.get(url.clone())).await;
        for _ in 0..20 {
            let status = resp.status();
            if status.is_redirection() {
                let location = resp.headers()["location"].to_str().unwrap().to_owned();
                url = url.join(&location).unwrap();
                if url.as_str().starts_with(self.redirect) {
                    return AuthorizationResponse::from_redirect(url.as_str());
                }
                resp = self.send(self.http.get(url.clone())).await;
                continue;
            }
            let body = resp.text().await.unwrap();
            assert_eq!(status, 200, "{url}: {body}");
            assert!(url.path().starts_with("/interaction/"), "{url}: {body}");
            let form: Vec<(&str, &str)> = if body.contains(r#"name="prompt" value="login""#) {
                vec![
                    ("prompt", "login"),
                    ("login", &self.user),
                    ("password", "x"),
                ]
            } else if body.contains(r#"name="prompt" value="consent""#) {
                vec![("prompt", "consent")]
            } else {
                panic!("{url} shows neither the login nor the consent form: {body}");
            };
            resp = self.send(self.http.post(url.clone()).form(&form)).await;
        }
        panic!("the authorization did not end within 20 steps");
    }
}

/// [`Authorizer`] for an `Arc<Browser>` (the test keeps a handle to count authorizations).
struct User(Arc<Browser>);

impl Authorizer for User {
    fn redirect_uri(&self) -> String {
        REDIRECT_URI.to_owned()
    }
    fn authorize(
        &self,
        request: AuthorizationRequest,
    ) -> BoxFuture<'_, Result<AuthorizationResponse, AuthError>> {
        self.0.authorizations.fetch_add(1, Ordering::SeqCst);
        Box::pin(self.0.run(request.url))
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The single text block of a tool result, as JSON when it is JSON.
fn text(r: &purra_protocol::types::CallToolResult) -> String {
    assert!(!r.is_error(), "{r:?}");
    r.texts().collect::<Vec<_>>().join("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorization_code_flow_step_up_and_refresh() {
    // Alone in a child process: the global subscriber that captures the logs sees only this
    // test's events.
    if !support::alone(
        module_path!(),
        "authorization_code_flow_step_up_and_refresh",
    ) {
        return;
    }
    let logs = logs();
    let server = guarded().await;
    let browser = Browser::new("ada");
    let store = Arc::new(MemoryTokenStore::new());
    // The authorization server is on this machine, over plain http: allowed by the option.
    let config = OAuthConfig::authorization_code(Arc::new(User(browser.clone())))
        .client_id("purra-public")
        .url_policy(UrlPolicy::strict().allow_loopback(true))
        .store(store.clone())
        .refresh_before(Duration::from_secs(1));
    let auth = OAuthClient::new(&server.url, config).unwrap();
    let http = HttpClientOptions::default().auth(auth.clone());
    let conn = Client::connect_http(&server.url, http, ClientOptions::default())
        .await
        .unwrap();

    // The 401 on initialize sent the client through discovery and one authorization with the
    // challenge's scope; the handler sees the user.
    assert_eq!(browser.authorizations.load(Ordering::SeqCst), 1);
    let me: Value =
        serde_json::from_str(&text(&conn.call_tool("whoami", json!({})).await.unwrap())).unwrap();
    assert_eq!(
        me,
        json!({"subject": "ada", "issuer": issuer(), "client_id": "purra-public",
               "scopes": ["mcp:read"], "session": true})
    );
    let first = auth.tokens().await.unwrap().unwrap();
    assert!(first.refresh_token.is_some());

    // `write` needs mcp:write: 403 insufficient_scope, a second authorization (consent only,
    // the user is signed in), then the call goes through.
    let r = conn.call_tool("write", json!({})).await.unwrap();
    assert_eq!(text(&r), "written");
    assert_eq!(browser.authorizations.load(Ordering::SeqCst), 2);
    let me: Value =
        serde_json::from_str(&text(&conn.call_tool("whoami", json!({})).await.unwrap())).unwrap();
    assert_eq!(me["scopes"], json!(["mcp:read", "mcp:write"]));
    let stepped = auth.tokens().await.unwrap().unwrap();
    assert_eq!(stepped.scope.as_deref(), Some("mcp:read mcp:write"));

    // Let the access token expire: the next call refreshes it, with no new authorization.
    let expires = stepped.expires_at.expect("expires_in");
    assert!(expires <= now() + PUBLIC_TTL + 1, "expires at {expires}");
    tokio::time::sleep(Duration::from_secs(expires.saturating_sub(now()) + 2)).await;
    let me: Value =
        serde_json::from_str(&text(&conn.call_tool("whoami", json!({})).await.unwrap())).unwrap();
    assert_eq!(me["subject"], "ada");
    assert_eq!(browser.authorizations.load(Ordering::SeqCst), 2);
    let refreshed = auth.tokens().await.unwrap().unwrap();
    assert_ne!(refreshed.access_token, stepped.access_token);
    assert!(refreshed.expires_at.unwrap() > expires);
    conn.close().await;

    // A token the server refuses though it has not expired (here: signed by another key):
    // the 401 makes a client holding only stored tokens refresh and send the request again.
    let mut stored = store.load(auth.store_key()).await.unwrap().unwrap();
    let refused = resigned_by_another_key(&refreshed.access_token);
    let tokens = stored.tokens.as_mut().unwrap();
    tokens.access_token = refused.clone();
    tokens.expires_at = Some(now() + 3600);
    let store2 = Arc::new(MemoryTokenStore::new());
    store2.save(auth.store_key(), stored).await.unwrap();
    let auth2 = OAuthClient::new(
        &server.url,
        OAuthConfig::stored_only().store(store2.clone()),
    )
    .unwrap();
    let http = HttpClientOptions::default().auth(auth2.clone());
    let conn = Client::connect_http(&server.url, http, ClientOptions::default())
        .await
        .unwrap();
    let me: Value =
        serde_json::from_str(&text(&conn.call_tool("whoami", json!({})).await.unwrap())).unwrap();
    assert_eq!(me["subject"], "ada");
    let after_401 = auth2.tokens().await.unwrap().unwrap();
    assert_ne!(after_401.access_token, refused);
    assert_eq!(browser.authorizations.load(Ordering::SeqCst), 2);
    conn.close().await;

    // No token, refresh token or authorization code in anything logged.
    let logged = String::from_utf8_lossy(&logs.lock().unwrap()).into_owned();
    assert!(!logged.is_empty());
    assert!(!logged.contains(&refused), "a refused token was logged");
    for t in [&first, &stepped, &refreshed, &after_401] {
        assert!(
            !logged.contains(&t.access_token),
            "an access token was logged"
        );
        if let Some(r) = &t.refresh_token {
            assert!(!logged.contains(r.as_str()), "a refresh token was logged");
        }
    }
}

/// A client credentials token from the authorization server.
async fn service_token(client_id: &str, resource: &str, scope: &str) -> String {
    let resp = reqwest::Client::new()
        .post(format!("{}/token", issuer()))
        .basic_auth(client_id, Some("service-secret"))
        .form(&[
            ("grant_type", "client_credentials"),
            ("resource", resource),
            ("scope", scope),
        ])
        .send()
        .await
        .unwrap();
    let status = resp.status();
    let body: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
    assert_eq!(status, 200, "{body}");
    body["access_token"].as_str().unwrap().to_owned()
}

fn b64url(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// `token` re-signed by a key the authorization server never had, under its key id.
fn resigned_by_another_key(token: &str) -> String {
    let header: Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(token.split('.').next().unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(header["alg"], "ES256");
    let payload = token.split('.').nth(1).unwrap();
    let input = format!("{}.{payload}", b64url(header.to_string().as_bytes()));
    let rng = ring::rand::SystemRandom::new();
    let alg = &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING;
    let doc = ring::signature::EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap();
    let key = ring::signature::EcdsaKeyPair::from_pkcs8(alg, doc.as_ref(), &rng).unwrap();
    let sig = key.sign(&rng, input.as_bytes()).unwrap();
    format!("{input}.{}", b64url(sig.as_ref()))
}

/// POSTs `body` with `token` (and `session`); status, `WWW-Authenticate`, session id, body.
async fn post_bearer(
    url: &str,
    token: Option<&str>,
    session: Option<&str>,
    body: &str,
) -> (u16, Option<String>, Option<String>, String) {
    let mut rb = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .body(body.to_owned());
    if let Some(t) = token {
        rb = rb.bearer_auth(t);
    }
    if let Some(s) = session {
        rb = rb.header("mcp-session-id", s);
    }
    let resp = rb.send().await.unwrap();
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let (www, sid) = (header("www-authenticate"), header("mcp-session-id"));
    (resp.status().as_u16(), www, sid, resp.text().await.unwrap())
}

fn call_frame(id: u32, tool: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": {}}})
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guard_refusals() {
    let server = guarded().await;
    let url = server.url.as_str();
    let md = &server.metadata;
    let invalid = |why: &str| {
        Some(format!(
            r#"Bearer error="invalid_token", error_description="{why}", scope="mcp:read", resource_metadata="{md}""#
        ))
    };

    // The metadata names the resource and the authorization server.
    let m = reqwest::get(md.as_str())
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let m: Value = serde_json::from_str(&m).unwrap();
    assert_eq!(
        m,
        json!({"resource": url, "authorization_servers": [issuer()],
               "scopes_supported": ["mcp:read", "mcp:write"],
               "bearer_methods_supported": ["header"]})
    );

    // No token.
    let (status, www, _, _) = post_bearer(url, None, None, INIT).await;
    assert_eq!(status, 401);
    assert_eq!(
        www,
        Some(format!(
            r#"Bearer scope="mcp:read", resource_metadata="{md}""#
        ))
    );

    // A token for another resource.
    let other = service_token("purra-service", "http://127.0.0.1:1/other", "mcp:read").await;
    let (status, www, _, body) = post_bearer(url, Some(&other), None, INIT).await;
    assert_eq!(
        (status, www),
        (401, invalid("the token is for another resource"))
    );
    assert!(!body.contains(&other));

    // A token signed by another key.
    let good = service_token("purra-service", url, "mcp:read").await;
    let forged = resigned_by_another_key(&good);
    let (status, www, _, _) = post_bearer(url, Some(&forged), None, INIT).await;
    assert_eq!(
        (status, www),
        (401, invalid("the token's signature is invalid"))
    );

    // An expired token (purra-short's live 1 s; the guard allows 1 s of clock skew).
    let short = service_token("purra-short", url, "mcp:read").await;
    let (status, _, _, _) = post_bearer(url, Some(&short), None, INIT).await;
    assert_eq!(status, 200, "before it expires");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (status, www, _, _) = post_bearer(url, Some(&short), None, INIT).await;
    assert_eq!((status, www), (401, invalid("the token has expired")));

    // A token missing a scope: mcp:read opens a session, `write` needs mcp:write too.
    let (status, _, sid, _) = post_bearer(url, Some(&good), None, INIT).await;
    assert_eq!(status, 200);
    let sid = sid.unwrap();
    let (status, www, _, body) =
        post_bearer(url, Some(&good), Some(&sid), &call_frame(2, "write")).await;
    assert_eq!(status, 403);
    assert_eq!(
        www,
        Some(format!(
            r#"Bearer error="insufficient_scope", error_description="this request needs scope \"mcp:read mcp:write\"", scope="mcp:read mcp:write", resource_metadata="{md}""#
        ))
    );
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        json!({"error": "insufficient_scope",
               "error_description": "this request needs scope \"mcp:read mcp:write\""})
    );
    // A token without even the required scope.
    let none = service_token("purra-service", url, "").await;
    let (status, www, _, _) = post_bearer(url, Some(&none), None, INIT).await;
    assert_eq!(status, 403);
    assert_eq!(
        www,
        Some(format!(
            r#"Bearer error="insufficient_scope", error_description="this request needs scope \"mcp:read\"", scope="mcp:read", resource_metadata="{md}""#
        ))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_bound_to_their_principal() {
    let server = guarded().await;
    let url = server.url.as_str();
    let alice = service_token("purra-service", url, "mcp:read").await;
    let mallory = service_token("purra-other", url, "mcp:read").await;
    // A second token of the same principal (a refreshed one) keeps the session.
    let alice2 = service_token("purra-service", url, "mcp:read").await;
    assert_ne!(alice, alice2);

    let (status, _, sid, _) = post_bearer(url, Some(&alice), None, INIT).await;
    assert_eq!(status, 200);
    let sid = sid.unwrap();
    // The session is still pending (no request since initialize): refused to another all
    // the same, and still there for its owner afterwards.
    let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let (status, _, _, body) = post_bearer(url, Some(&mallory), Some(&sid), note).await;
    assert_eq!(status, 404, "{body}");
    let (status, _, _, _) = post_bearer(url, Some(&alice), Some(&sid), note).await;
    assert_eq!(status, 202);

    let (status, _, _, body) =
        post_bearer(url, Some(&alice2), Some(&sid), &call_frame(2, "whoami")).await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let me: Value =
        serde_json::from_str(v["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        me,
        json!({"subject": "purra-service", "issuer": issuer(), "client_id": "purra-service",
               "scopes": ["mcp:read"], "session": true})
    );
    // The handler sees the token of this request (alice2's), not the one that opened the session.
    let (status, _, _, body) =
        post_bearer(url, Some(&alice2), Some(&sid), &call_frame(5, "token_tail")).await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v["result"]["content"][0]["text"],
        alice2[alice2.len() - 8..]
    );
    assert_eq!(
        format!(
            "{:?}",
            purra_protocol::auth::ValidatedToken::from_secret(&alice2)
        ),
        "ValidatedToken([redacted])"
    );

    // Another principal presenting the session id: 404 on POST, GET, GET with
    // Last-Event-ID (replay) and DELETE.
    let (status, _, _, body) =
        post_bearer(url, Some(&mallory), Some(&sid), &call_frame(3, "whoami")).await;
    assert_eq!(status, 404);
    assert_eq!(
        body,
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Not Found: unknown or expired session"}}"#
    );
    let http = reqwest::Client::new();
    for last in [None, Some("s0e0")] {
        let mut rb = http
            .get(url)
            .bearer_auth(&mallory)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &sid);
        if let Some(l) = last {
            rb = rb.header("last-event-id", l);
        }
        assert_eq!(
            rb.send().await.unwrap().status(),
            404,
            "GET, Last-Event-ID {last:?}"
        );
    }
    let resp = http
        .delete(url)
        .bearer_auth(&mallory)
        .header("mcp-session-id", &sid)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);

    // The owner's session is untouched.
    let (status, _, _, body) =
        post_bearer(url, Some(&alice), Some(&sid), &call_frame(4, "whoami")).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_sdk_client_authorizes_and_calls() {
    let server = guarded().await;
    let script = repo_root().join("peers/node/oauth_client.mjs");
    let url = server.url.clone();
    let out = tokio::process::Command::new(node())
        .arg(&script)
        .arg(&url)
        .arg("bob")
        .current_dir(repo_root().join("peers/node"))
        .stdin(Stdio::null())
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), out)
        .await
        .expect("the TypeScript client did not finish within 60 s")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(
        v,
        json!({"whoami": {"subject": "bob", "issuer": issuer(), "client_id": "purra-ts",
                          "scopes": ["mcp:read"], "session": true},
               "scope": "mcp:read"})
    );
}

/// Finding 10 of the security review (token typing): an ID token the authorization server
/// issued, signed with the same key as its access tokens, is refused as an access token by
/// default, for its missing `typ: at+jwt` alone (a validator told not to look takes it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_10_an_id_token_is_no_access_token() {
    const PAGE_REDIRECT: &str = "http://127.0.0.1/login/callback";
    let http = reqwest::Client::new();
    let discovery: Value = http
        .get(format!("{}/.well-known/openid-configuration", issuer()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap();
    // The page's sign-in client: the code flow with PKCE, for an ID token naming it.
    let verifier = "v".repeat(43);
    let challenge =
        b64url(ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes()).as_ref());
    let mut start = Url::parse(discovery["authorization_endpoint"].as_str().unwrap()).unwrap();
    start
        .query_pairs_mut()
        .append_pair("response_type", "code")
        .append_pair("client_id", "purra-page")
        .append_pair("redirect_uri", PAGE_REDIRECT)
        .append_pair("scope", "openid")
        .append_pair("state", "st")
        .append_pair("nonce", "no")
        .append_pair("code_challenge", &challenge)
        .append_pair("code_challenge_method", "S256");
    let back = Browser::returning_to("grace", PAGE_REDIRECT)
        .run(start)
        .await
        .unwrap();
    let resp = http
        .post(discovery["token_endpoint"].as_str().unwrap())
        .basic_auth("purra-page", Some("page-secret"))
        .form(&[
            ("grant_type", "authorization_code"),
            ("code", back.code.as_str()),
            ("redirect_uri", PAGE_REDIRECT),
            ("code_verifier", verifier.as_str()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let answer: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
    let id_token = answer["id_token"].as_str().unwrap();
    let header: Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(id_token.split('.').next().unwrap())
            .unwrap(),
    )
    .unwrap();
    // No `typ` at all (RFC 9068 leaves ID tokens untyped); the access tokens' key signs it.
    assert_eq!(header, json!({"alg": "ES256", "kid": "es256-1"}));

    // A resource whose audience is the ID token's (the client id): refused by default...
    let strict = JwtValidator::new(issuer(), "purra-page").unwrap();
    assert_eq!(
        strict.validate(id_token).await.map(|p| p.subject),
        Err(TokenRejection::Invalid(
            "the token is not an access token (typ)".into()
        ))
    );
    // ...for its type alone: every other check passes it.
    let lax = JwtValidator::new(issuer(), "purra-page")
        .unwrap()
        .require_at_jwt(false);
    assert_eq!(
        lax.validate(id_token).await.map(|p| p.subject),
        Ok("grace".to_owned())
    );
    // The server's access tokens say at+jwt, and pass by default.
    let resource = "http://127.0.0.1:1/typed";
    let access = service_token("purra-service", resource, "mcp:read").await;
    let validator = JwtValidator::new(issuer(), resource).unwrap();
    assert_eq!(
        validator.validate(&access).await.map(|p| p.subject),
        Ok("purra-service".to_owned())
    );
}
