//! Finding 9 of the security review, "the OAuth client follows URLs a server gives it", against
//! small HTTP servers in the test that play the MCP server, authorization servers and a slow
//! metadata host, and record every request they get: plain http and addresses that are not
//! public are refused (loopback only with its option, checked on what a name resolves to) with
//! nothing sent to them; every discovery and token request is bounded end to end; a configured
//! client secret reaches only the configured authorization server's token endpoint.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use purra_protocol::auth::{
    AuthorizationRequest, AuthorizationResponse, Authorizer, BoxFuture, OAuthClient, OAuthConfig,
    UrlPolicy,
};
use purra_protocol::{AuthError, Error};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One request a mock server got.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: String,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What a mock server answers.
enum Reply {
    Json(u16, Value),
    /// 401 with `WWW-Authenticate: Bearer` and these parameters.
    Challenge(String),
    /// 200 with headers promising a body of 100 000 bytes, then one byte every 100 ms.
    Trickle,
}

type Route = Box<dyn Fn(&Seen) -> Reply + Send + Sync>;

/// A one-route HTTP/1.1 server on a loopback port, recording what it is asked.
struct Mock {
    base: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    listener: Option<TcpListener>,
}

impl Mock {
    async fn bind() -> Mock {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        Mock {
            base: format!("http://{}", listener.local_addr().unwrap()),
            seen: Arc::new(Mutex::new(Vec::new())),
            listener: Some(listener),
        }
    }

    fn serve(&mut self, route: impl Fn(&Seen) -> Reply + Send + Sync + 'static) {
        let listener = self.listener.take().expect("served once");
        let seen = self.seen.clone();
        let route: Arc<Route> = Arc::new(Box::new(route));
        tokio::spawn(async move {
            loop {
                let Ok((mut conn, _)) = listener.accept().await else {
                    return;
                };
                let (seen, route) = (seen.clone(), route.clone());
                tokio::spawn(async move {
                    let Some(req) = read_request(&mut conn).await else {
                        return;
                    };
                    seen.lock().unwrap().push(req.clone());
                    match route(&req) {
                        Reply::Json(status, body) => {
                            let body = body.to_string();
                            let head = format!(
                                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                                body.len()
                            );
                            let _ = conn.write_all(format!("{head}{body}").as_bytes()).await;
                        }
                        Reply::Challenge(params) => {
                            let head = format!(
                                "HTTP/1.1 401 Unauthorized\r\nwww-authenticate: Bearer {params}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                            );
                            let _ = conn.write_all(head.as_bytes()).await;
                        }
                        Reply::Trickle => {
                            let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n";
                            if conn.write_all(head.as_bytes()).await.is_err() {
                                return;
                            }
                            for _ in 0..100_000 {
                                tokio::time::sleep(Duration::from_millis(100)).await;
                                if conn.write_all(b" ").await.is_err() {
                                    return;
                                }
                            }
                        }
                    }
                });
            }
        });
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

async fn read_request(conn: &mut tokio::net::TcpStream) -> Option<Seen> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let n = conn.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, path) = (first.next()?.to_owned(), first.next()?.to_owned());
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < len {
        let n = conn.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Seen {
        method,
        path,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// An MCP server at `{base}/mcp` that answers every POST 401 with `challenge`, and serves
/// `prm` (when given) at its path-based well-known URL.
fn mcp_server(mock: &mut Mock, challenge: String, prm: Option<Value>) {
    mock.serve(move |req| match (req.method.as_str(), req.path.as_str()) {
        ("POST", "/mcp") => Reply::Challenge(challenge.clone()),
        ("GET", "/.well-known/oauth-protected-resource/mcp") => match &prm {
            Some(p) => Reply::Json(200, p.clone()),
            None => Reply::Json(404, json!({})),
        },
        _ => Reply::Json(404, json!({})),
    });
}

/// An authorization server at its base URL: its metadata (with `token_endpoint`) and a token
/// endpoint that issues a token for any client.
fn authorization_server(mock: &mut Mock, token_endpoint: Option<String>) {
    let base = mock.base.clone();
    let token_endpoint = token_endpoint.unwrap_or_else(|| format!("{base}/token"));
    mock.serve(move |req| match (req.method.as_str(), req.path.as_str()) {
        ("GET", "/.well-known/oauth-authorization-server") => Reply::Json(
            200,
            json!({"issuer": base, "authorization_endpoint": format!("{base}/authorize"),
                   "token_endpoint": token_endpoint, "code_challenge_methods_supported": ["S256"],
                   "grant_types_supported": ["client_credentials"]}),
        ),
        ("POST", "/token") => Reply::Json(
            200,
            json!({"access_token": "issued-token", "token_type": "Bearer", "expires_in": 3600}),
        ),
        _ => Reply::Json(404, json!({})),
    });
}

/// The protected resource metadata of the server at `mcp` naming `issuer`.
fn prm(mcp: &str, issuer: &str) -> Value {
    json!({"resource": format!("{mcp}/mcp"), "authorization_servers": [issuer]})
}

/// An authorizer no test here may reach: every refusal comes before the user is asked.
struct Unreachable;

impl Authorizer for Unreachable {
    fn redirect_uri(&self) -> String {
        "http://127.0.0.1/callback".into()
    }
    fn authorize(
        &self,
        request: AuthorizationRequest,
    ) -> BoxFuture<'_, Result<AuthorizationResponse, AuthError>> {
        panic!("the user was sent to {}", request.url)
    }
}

fn user() -> OAuthConfig {
    OAuthConfig::authorization_code(Arc::new(Unreachable))
}

/// `purra login`'s path: the probe, the 401, discovery and the grant; the error, as shown.
async fn login(server: &Mock, config: OAuthConfig) -> Result<bool, String> {
    let client = OAuthClient::new(&format!("{}/mcp", server.base), config).unwrap();
    tokio::time::timeout(Duration::from_secs(60), client.login())
        .await
        .expect("the login was not cut off within 60 s")
        .map_err(|e| match e {
            Error::Auth(e) => e.to_string(),
            other => panic!("not an authorization error: {other}"),
        })
}

const LOOPBACK_HTTP: &str =
    "plain http on a loopback host, followed only with allow_loopback (for development)";

#[tokio::test]
async fn finding_9_plain_http_a_server_names_is_refused() {
    // The challenge's resource_metadata on another loopback port, and off loopback.
    let mut metadata = Mock::bind().await;
    metadata.serve(|_| Reply::Json(200, json!({})));
    for (target, reason) in [
        (format!("{}/prm", metadata.base), LOOPBACK_HTTP),
        ("http://metadata.example/prm".to_owned(), "not https"),
    ] {
        let mut server = Mock::bind().await;
        mcp_server(&mut server, format!("resource_metadata=\"{target}\""), None);
        assert_eq!(
            login(&server, user()).await,
            Err(format!("refusing {target}: {reason}"))
        );
        assert_eq!(server.seen().len(), 1, "the probe only");
    }
    assert!(metadata.seen().is_empty(), "{:?}", metadata.seen());

    // The authorization server the resource's own metadata names, over plain http.
    let mut auth = Mock::bind().await;
    authorization_server(&mut auth, None);
    for (issuer, reason) in [
        (auth.base.clone(), LOOPBACK_HTTP),
        ("http://as.example".to_owned(), "not https"),
    ] {
        let mut server = Mock::bind().await;
        let p = prm(&server.base, &issuer);
        mcp_server(&mut server, String::new(), Some(p));
        assert_eq!(
            login(&server, user()).await,
            Err(format!("refusing {}/: {reason}", issuer))
        );
        // The probe and the server's own metadata, which is as trusted as the server.
        let paths: Vec<String> = server.seen().iter().map(|s| s.path.clone()).collect();
        assert_eq!(paths, ["/mcp", "/.well-known/oauth-protected-resource/mcp"]);
    }
    assert!(auth.seen().is_empty(), "{:?}", auth.seen());
}

#[tokio::test]
async fn finding_9_addresses_that_are_not_public_are_refused() {
    // Literal addresses, whatever the scheme says.
    for (target, reason) in [
        (
            "https://10.0.0.7/prm",
            "10.0.0.7 is a private address, followed only with allow_private_addresses",
        ),
        (
            "https://[fd00::7]/prm",
            "fd00::7 is a private address, followed only with allow_private_addresses",
        ),
        (
            "https://169.254.169.254/latest/meta-data",
            "169.254.169.254 is a link-local address, never followed",
        ),
        (
            "https://[fe80::1]/prm",
            "fe80::1 is a link-local address, never followed",
        ),
    ] {
        let mut server = Mock::bind().await;
        mcp_server(&mut server, format!("resource_metadata=\"{target}\""), None);
        let policy = UrlPolicy::strict().allow_private_addresses(target.contains("fe80"));
        assert_eq!(
            login(&server, user().url_policy(policy)).await,
            Err(format!("refusing {target}: {reason}"))
        );
    }

    // A name: refused for what it resolves to (localhost: a loopback address), over https
    // too; nothing reaches the port it names.
    let mut metadata = Mock::bind().await;
    metadata.serve(|_| Reply::Json(200, json!({})));
    let port = metadata.base.rsplit(':').next().unwrap().to_owned();
    let target = format!("https://localhost:{port}/prm");
    let mut server = Mock::bind().await;
    mcp_server(&mut server, format!("resource_metadata=\"{target}\""), None);
    let refused = |ip: &str| {
        Err(format!(
            "refusing {target}: localhost resolves to {ip}, a loopback address, followed only with allow_loopback (for development)"
        ))
    };
    let got = login(&server, user()).await;
    assert!(
        got == refused("127.0.0.1") || got == refused("::1"),
        "{got:?}"
    );
    assert!(metadata.seen().is_empty(), "{:?}", metadata.seen());
}

#[tokio::test]
async fn finding_9_loopback_is_followed_only_with_its_option() {
    let mut auth = Mock::bind().await;
    authorization_server(&mut auth, None);
    let mut metadata = Mock::bind().await;
    let mut server = Mock::bind().await;
    let p = prm(&server.base, &auth.base);
    metadata.serve(move |_| Reply::Json(200, p.clone()));
    mcp_server(
        &mut server,
        format!("resource_metadata=\"{}/prm\"", metadata.base),
        None,
    );
    let config = || {
        OAuthConfig::client_credentials("svc", "s3cret")
            .authorization_server(auth.base.clone())
            .url_policy(UrlPolicy::strict().allow_loopback(true))
    };
    assert_eq!(login(&server, config()).await, Ok(true));
    let paths: Vec<String> = metadata.seen().iter().map(|s| s.path.clone()).collect();
    assert_eq!(paths, ["/prm"]);
    let asked: Vec<(String, String)> = auth
        .seen()
        .iter()
        .map(|s| (s.method.clone(), s.path.clone()))
        .collect();
    assert_eq!(
        asked,
        [
            (
                "GET".into(),
                "/.well-known/oauth-authorization-server".into()
            ),
            ("POST".into(), "/token".into())
        ]
    );
}

#[tokio::test]
async fn finding_9_every_discovery_request_is_bounded_end_to_end() {
    let loopback = UrlPolicy::strict().allow_loopback(true);
    // Metadata whose headers come at once and whose body trickles.
    let mut slow = Mock::bind().await;
    slow.serve(|_| Reply::Trickle);
    let mut server = Mock::bind().await;
    mcp_server(
        &mut server,
        format!("resource_metadata=\"{}/prm\"", slow.base),
        None,
    );
    assert_eq!(
        login(
            &server,
            user()
                .url_policy(loopback)
                .request_timeout(Duration::from_secs(1))
        )
        .await,
        Err(format!(
            "authorization discovery failed: GET {}/prm: no complete answer within 1 s",
            slow.base
        ))
    );
    assert_eq!(slow.seen().len(), 1);

    // The authorization server's metadata, then its token endpoint.
    let mut slow_as = Mock::bind().await;
    slow_as.serve(|_| Reply::Trickle);
    let mut server = Mock::bind().await;
    let p = prm(&server.base, &slow_as.base);
    mcp_server(&mut server, String::new(), Some(p));
    assert_eq!(
        login(
            &server,
            user()
                .url_policy(loopback)
                .request_timeout(Duration::from_millis(1500))
        )
        .await,
        Err(format!(
            "authorization discovery failed: GET {}/.well-known/oauth-authorization-server: no complete answer within 1500 ms",
            slow_as.base
        ))
    );
    let mut auth = Mock::bind().await;
    let slow_token = format!("{}/token", slow.base);
    authorization_server(&mut auth, Some(slow_token.clone()));
    let mut server = Mock::bind().await;
    let p = prm(&server.base, &auth.base);
    mcp_server(&mut server, String::new(), Some(p));
    let config = OAuthConfig::client_credentials_jwt("svc", signing_key())
        .url_policy(loopback)
        .request_timeout(Duration::from_secs(1));
    assert_eq!(
        login(&server, config).await,
        Err(format!(
            "the token endpoint refused the request: request_failed (POST {slow_token}: no complete answer within 1 s)"
        ))
    );
}

/// A private key for `private_key_jwt` (no secret involved).
fn signing_key() -> purra_protocol::auth::SigningKey {
    let rng = ring::rand::SystemRandom::new();
    let doc = ring::signature::EcdsaKeyPair::generate_pkcs8(
        &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
        &rng,
    )
    .unwrap();
    purra_protocol::auth::SigningKey::from_pkcs8(
        doc.as_ref(),
        purra_protocol::auth::SigningAlgorithm::ES256,
    )
    .unwrap()
}

#[tokio::test]
async fn finding_9_a_client_secret_goes_only_to_the_configured_authorization_server() {
    let loopback = UrlPolicy::strict().allow_loopback(true);
    // A secret without the server it belongs to cannot be configured.
    assert_eq!(
        OAuthClient::new(
            "https://mcp.example/mcp",
            OAuthConfig::client_credentials("svc", "s3cret")
        )
        .unwrap_err()
        .to_string(),
        "authorization configuration: a client secret goes only to the authorization server it was issued by: name it (OAuthConfig::authorization_server)"
    );
    assert_eq!(
        OAuthClient::new(
            "https://mcp.example/mcp",
            OAuthConfig::client_credentials("svc", "s3cret").authorization_server("http://as.example")
        )
        .unwrap_err()
        .to_string(),
        "authorization configuration: the authorization server \"http://as.example\" must be https (plain http only on a loopback host: localhost, 127.0.0.1, [::1])"
    );

    let mut home = Mock::bind().await;
    authorization_server(&mut home, None);
    let config = || {
        OAuthConfig::client_credentials("svc", "s3cret")
            .authorization_server(home.base.clone())
            .url_policy(loopback)
    };

    // The resource names another authorization server: nothing is sent to it.
    let mut elsewhere = Mock::bind().await;
    authorization_server(&mut elsewhere, None);
    let mut server = Mock::bind().await;
    let p = prm(&server.base, &elsewhere.base);
    mcp_server(&mut server, String::new(), Some(p));
    assert_eq!(
        login(&server, config()).await,
        Err(format!(
            "refusing {}: not the configured authorization server {}",
            elsewhere.base, home.base
        ))
    );
    assert!(elsewhere.seen().is_empty(), "{:?}", elsewhere.seen());

    // The configured server's metadata points its token endpoint elsewhere: the secret is
    // not sent there.
    let mut taker = Mock::bind().await;
    authorization_server(&mut taker, None);
    let mut home2 = Mock::bind().await;
    authorization_server(&mut home2, Some(format!("{}/token", taker.base)));
    let mut server = Mock::bind().await;
    let p = prm(&server.base, &home2.base);
    mcp_server(&mut server, String::new(), Some(p));
    let config2 = OAuthConfig::client_credentials("svc", "s3cret")
        .authorization_server(home2.base.clone())
        .url_policy(loopback);
    assert_eq!(
        login(&server, config2).await,
        Err(format!(
            "refusing {}/token: the client secret goes only to the configured authorization server {}, on its origin",
            taker.base, home2.base
        ))
    );
    assert!(taker.seen().is_empty(), "{:?}", taker.seen());

    // Its own token endpoint gets it, once, by HTTP Basic.
    let mut server = Mock::bind().await;
    let p = prm(&server.base, &home.base);
    mcp_server(&mut server, String::new(), Some(p));
    assert_eq!(login(&server, config()).await, Ok(true));
    let token: Vec<Seen> = home
        .seen()
        .into_iter()
        .filter(|s| s.path == "/token")
        .collect();
    assert_eq!(token.len(), 1);
    assert_eq!(
        token[0].header("authorization"),
        Some("Basic c3ZjOnMzY3JldA==")
    );
    assert!(
        token[0].body.contains("grant_type=client_credentials"),
        "{}",
        token[0].body
    );
}
