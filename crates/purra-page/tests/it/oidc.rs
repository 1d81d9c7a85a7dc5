//! Sign-in through an OpenID Connect provider, over real HTTP, with exact statuses and bodies: a
//! small issuer in the test (discovery, JWKS, a token endpoint that checks PKCE, the client's
//! secret and the redirect URI, and answers ID tokens signed with the protocol crate's JWT code)
//! stands in for the provider, so each refusal can be provoked on purpose: an unknown or replayed
//! `state`, a callback without the pre-login cookie, a subject off the allow-list, an ID token for
//! another audience or with another nonce. The real provider (oidc-provider) and a real browser
//! are the CLI's browser test.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use axum::extract::{Form, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::Json;
use base64::Engine as _;
use purra_core::{ApprovalGateway, ApprovalState, OperatorStore, Verdict};
use purra_page::{AllowList, OidcConfig, OidcLogin, Page, PageConfig};
use purra_protocol::auth::{SigningAlgorithm, SigningKey};
use purra_sqlite::SqliteStore;
use purra_store_tests::request;
use serde_json::{json, Value};

use crate::support::{fresh_store, no_redirects, serve, TempDir};

const CLIENT: &str = "purra-page";
const SECRET: &str = "page-secret";

/// What the token endpoint does to the next ID tokens: claims merged over the genuine ones.
#[derive(Default)]
struct Issuer {
    url: String,
    key: Option<SigningKey>,
    /// code -> (claims of its ID token, PKCE challenge, redirect URI)
    codes: HashMap<String, (Value, String, String)>,
}

type Shared = Arc<Mutex<Issuer>>;

async fn discovery(State(i): State<Shared>) -> Json<Value> {
    let url = i.lock().unwrap().url.clone();
    Json(json!({
        "issuer": url,
        "authorization_endpoint": format!("{url}/auth"),
        "token_endpoint": format!("{url}/token"),
        "jwks_uri": format!("{url}/jwks"),
        "response_types_supported": ["code"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic"],
        "id_token_signing_alg_values_supported": ["ES256"],
    }))
}

async fn jwks(State(i): State<Shared>) -> Json<Value> {
    let key = i.lock().unwrap().key.clone().unwrap();
    Json(json!({"keys": [key.public_jwk()]}))
}

/// The token endpoint: the code once, its PKCE verifier, the redirect URI it was issued for,
/// and the client's secret (Basic).
async fn token(
    State(i): State<Shared>,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> axum::response::Response {
    let refuse =
        |error: &str| (StatusCode::BAD_REQUEST, Json(json!({"error": error}))).into_response();
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{CLIENT}:{SECRET}"));
    if headers.get("authorization").and_then(|v| v.to_str().ok())
        != Some(format!("Basic {basic}").as_str())
    {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"error": "invalid_client"})),
        )
            .into_response();
    }
    let mut issuer = i.lock().unwrap();
    let Some((claims, challenge, redirect)) = issuer
        .codes
        .remove(form.get("code").map_or("", String::as_str))
    else {
        return refuse("invalid_grant");
    };
    let verifier = form.get("code_verifier").cloned().unwrap_or_default();
    let digest = ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes());
    if base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest) != challenge
        || form.get("redirect_uri") != Some(&redirect)
        || form.get("grant_type").map(String::as_str) != Some("authorization_code")
    {
        return refuse("invalid_grant");
    }
    let id_token = issuer.key.as_ref().unwrap().sign(&claims).unwrap();
    Json(json!({"access_token": "at", "token_type": "Bearer", "expires_in": 60, "id_token": id_token}))
        .into_response()
}

async fn issuer() -> Shared {
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = ring::signature::EcdsaKeyPair::generate_pkcs8(
        &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
        &rng,
    )
    .unwrap();
    let key = SigningKey::from_pkcs8(pkcs8.as_ref(), SigningAlgorithm::ES256)
        .unwrap()
        .with_kid("k1");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let shared: Shared = Arc::new(Mutex::new(Issuer {
        url: format!("http://{}", listener.local_addr().unwrap()),
        key: Some(key),
        codes: HashMap::new(),
    }));
    let app = axum::Router::new()
        .route("/.well-known/openid-configuration", get(discovery))
        .route("/jwks", get(jwks))
        .route("/token", post(token))
        .with_state(shared.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    shared
}

struct Served {
    issuer: Shared,
    iss: String,
    store: SqliteStore,
    url: String,
    page: Page,
    http: reqwest::Client,
    _dir: TempDir,
}

/// A page allowing subject `alice` and `carol@example.com`, signing in at the test's issuer.
async fn served(name: &str) -> Served {
    served_with(name, |login| login).await
}

/// [`served`] with its sign-in changed by `change`.
async fn served_with(name: &str, change: impl FnOnce(OidcLogin) -> OidcLogin) -> Served {
    let issuer = issuer().await;
    let iss = issuer.lock().unwrap().url.clone();
    let (store, dir) = fresh_store("oidc", name);
    let login = OidcLogin::new(
        OidcConfig::new(iss.clone(), CLIENT).client_secret(SECRET),
        AllowList::default()
            .subject("alice")
            .email("carol@example.com"),
    )
    .label("Test ID");
    let config = PageConfig::default().oidc(change(login)).token_login(false);
    config.check().unwrap();
    let page = Page::new(Arc::new(store.clone()), config);
    page.discover().await.unwrap();
    assert!(page.tokens().is_empty());
    let url = format!("http://{}", serve(&page).await);
    while page.redirect_uri().is_none() {
        tokio::task::yield_now().await;
    }
    Served {
        issuer,
        iss,
        store,
        url,
        page,
        http: no_redirects(),
        _dir: dir,
    }
}

/// A sign-in started by a browser: its pre-login cookie and what the provider was asked.
struct Started {
    cookie: String,
    state: String,
    nonce: String,
    challenge: String,
}

struct Answer {
    status: u16,
    cookies: Vec<String>,
    body: String,
}

impl Served {
    async fn start(&self) -> Started {
        self.start_from(&self.http).await
    }

    /// A sign-in started by a browser using `client` (another client address, say).
    async fn start_from(&self, client: &reqwest::Client) -> Started {
        let r = client
            .get(format!("{}/login/oidc", self.url))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 303);
        let location = r.headers()["location"].to_str().unwrap().to_owned();
        let set = r.headers()["set-cookie"].to_str().unwrap().to_owned();
        let (pair, attrs) = set.split_once("; ").unwrap();
        let redirect_uri = self.page.redirect_uri().unwrap();
        if redirect_uri.starts_with("https://") {
            assert_eq!(
                attrs,
                "Path=/login; Secure; HttpOnly; SameSite=Lax; Max-Age=600"
            );
            assert!(pair.starts_with("__Secure-purra_page_login="), "{pair}");
        } else {
            assert_eq!(attrs, "Path=/login; HttpOnly; SameSite=Lax; Max-Age=600");
            assert!(pair.starts_with("purra_page_login="), "{pair}");
        }
        let url = reqwest::Url::parse(&location).unwrap();
        assert_eq!(
            &location[..location.find('?').unwrap()],
            format!("{}/auth", self.iss)
        );
        let q: HashMap<String, String> = url.query_pairs().into_owned().collect();
        assert_eq!(q["response_type"], "code");
        assert_eq!(q["client_id"], CLIENT);
        assert_eq!(q["redirect_uri"], redirect_uri);
        assert_eq!(q["scope"], "openid email profile");
        assert_eq!(q["code_challenge_method"], "S256");
        assert_eq!(q.len(), 8, "{q:?}");
        Started {
            cookie: pair.to_owned(),
            state: q["state"].clone(),
            nonce: q["nonce"].clone(),
            challenge: q["code_challenge"].clone(),
        }
    }

    /// What the provider signs for `sub` after sign-in `s`, with `over` merged in.
    fn issue(&self, s: &Started, code: &str, sub: &str, over: Value) {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let mut claims = json!({
            "iss": self.iss, "sub": sub, "aud": CLIENT, "iat": now, "exp": now + 300,
            "nonce": s.nonce,
        });
        for (k, v) in over.as_object().unwrap() {
            if v.is_null() {
                claims.as_object_mut().unwrap().remove(k);
            } else {
                claims[k] = v.clone();
            }
        }
        let redirect_uri = self.page.redirect_uri().unwrap().to_owned();
        self.issuer
            .lock()
            .unwrap()
            .codes
            .insert(code.to_owned(), (claims, s.challenge.clone(), redirect_uri));
    }

    async fn callback(&self, query: &str, cookie: Option<&str>) -> Answer {
        let mut req = self
            .http
            .get(format!("{}/login/callback?{query}", self.url));
        if let Some(c) = cookie {
            req = req.header("cookie", c);
        }
        let r = req.send().await.unwrap();
        let cookies = r
            .headers()
            .get_all("set-cookie")
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect();
        Answer {
            status: r.status().as_u16(),
            cookies,
            body: r.text().await.unwrap(),
        }
    }

    /// Signs `sub` in (with `over` in its ID token) through a whole sign-in.
    async fn sign_in(&self, code: &str, sub: &str, over: Value) -> (Started, Answer) {
        let s = self.start().await;
        self.issue(&s, code, sub, over);
        let a = self
            .callback(&format!("code={code}&state={}", s.state), Some(&s.cookie))
            .await;
        (s, a)
    }
}

fn error_of(body: &str) -> &str {
    let from = body.find("<p class=\"error\" id=\"login-error\">").unwrap() + 34;
    &body[from..from + body[from..].find("</p>").unwrap()]
}

const CLEAR: &str = "purra_page_login=; Path=/login; HttpOnly; SameSite=Lax; Max-Age=0";

#[tokio::test]
async fn a_listed_subject_signs_in_and_decides_under_their_oidc_identity() {
    let s = served("ok").await;
    // The sign-in page offers only the provider (token sign-in is off).
    let r = s.http.get(format!("{}/login", s.url)).send().await.unwrap();
    let body = r.text().await.unwrap();
    assert!(body.contains(
        "<a class=\"button\" id=\"login-oidc\" href=\"/login/oidc\">Sign in with Test ID</a>"
    ));
    assert!(!body.contains("name=\"token\""));
    let r = s
        .http
        .post(format!("{}/login", s.url))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("token=anything")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(
        error_of(&r.text().await.unwrap()),
        "Sign-in with an access token is turned off here."
    );

    let (started, a) = s
        .sign_in(
            "c1",
            "alice",
            json!({"email": "alice@example.com", "name": "Alice Liddell"}),
        )
        .await;
    let who = format!(
        "Alice Liddell &lt;alice@example.com&gt;, sub alice at {}",
        s.iss
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert!(
        a.body
            .contains(&format!("<p id=\"message\">Signed in as {who}.</p>")),
        "{}",
        a.body
    );
    assert!(a
        .body
        .contains("<meta http-equiv=\"refresh\" content=\"0;url=/\">"));
    assert_eq!(a.cookies.len(), 2);
    let (pair, attrs) = a.cookies[0].split_once("; ").unwrap();
    assert_eq!(attrs, "Path=/; HttpOnly; SameSite=Strict; Max-Age=43200");
    assert!(pair.starts_with("purra_page_session="));
    assert_eq!(a.cookies[1], CLEAR);

    // The session works as a token sign-in's: the list, then a decision in the person's name.
    let r = s
        .http
        .get(format!("{}/", s.url))
        .header("cookie", pair)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let page = r.text().await.unwrap();
    assert!(page.contains(&format!("Signed in as <b id=\"approver\">{who}</b>")));
    let from = page.find("name=\"csrf\" value=\"").unwrap() + 19;
    let csrf = &page[from..from + 43];
    let id = ApprovalGateway::prepare(&s.store, request("\"v1\""))
        .await
        .unwrap();
    let r = s
        .http
        .post(format!("{}/approvals/{}/decide", s.url, id.0))
        .header("cookie", pair)
        .header("origin", &s.url)
        .header("accept", "application/json")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("csrf={csrf}&verdict=approve"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let approver = format!("Alice Liddell <alice@example.com>, sub alice at {}", s.iss);
    assert_eq!(
        serde_json::from_str::<Value>(&r.text().await.unwrap()).unwrap(),
        json!({"ok": true, "message": format!("{} approved by {approver}", id.0)})
    );
    match ApprovalGateway::record(&s.store, id.clone())
        .await
        .unwrap()
        .unwrap()
        .state
    {
        ApprovalState::Decided(d) => {
            assert_eq!(d.verdict, Verdict::Approve);
            assert_eq!(d.approver, format!("{approver} (page)"));
        }
        other => panic!("{other:?}"),
    }
    let trail = OperatorStore::approval_audit(&s.store, id).await.unwrap();
    let decided: Vec<_> = trail.iter().filter(|e| e.event == "decided").collect();
    assert_eq!(decided.len(), 1);
    assert_eq!(
        decided[0].detail["approver"],
        format!("{approver} (page)").as_str()
    );

    // The same callback again: its state was used.
    let again = s
        .callback(
            &format!("code=c1&state={}", started.state),
            Some(&started.cookie),
        )
        .await;
    assert_eq!(again.status, 400);
    assert_eq!(
        error_of(&again.body),
        "Refused: this sign-in is unknown, expired or already used. Start again."
    );
    assert_eq!(again.cookies, [CLEAR]);

    // A listed email the provider says is verified admits another subject.
    let (_, a) = s
        .sign_in(
            "c2",
            "carol-sub",
            json!({"email": "carol@example.com", "email_verified": true}),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert!(a.body.contains(&format!(
        "Signed in as carol@example.com, sub carol-sub at {}.",
        s.iss
    )));
    assert_eq!(
        s.page.redirect_uri(),
        Some(format!("{}/login/callback", s.url).as_str())
    );
}

#[tokio::test]
async fn unknown_replayed_and_foreign_states_are_refused_without_a_session() {
    let s = served("state").await;
    // A browser on another name for the page goes to the callback's name first, so the
    // pre-login cookie is set where the callback will look for it.
    let port = s.url.rsplit(':').next().unwrap();
    let r = s
        .http
        .get(format!("{}/login/oidc", s.url))
        .header("host", format!("localhost:{port}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], format!("{}/login/oidc", s.url));
    assert!(r.headers().get("set-cookie").is_none());
    let unknown = "Refused: this sign-in is unknown, expired or already used. Start again.";
    // A state the page never issued.
    let a = s.callback("code=x&state=made-up", None).await;
    assert_eq!((a.status, error_of(&a.body)), (400, unknown));
    assert_eq!(a.cookies, [CLEAR]);
    // No state at all.
    let a = s.callback("code=x", None).await;
    assert_eq!(
        (a.status, error_of(&a.body)),
        (400, "Refused: the sign-in came back without its state.")
    );
    // A real state brought by a browser without the pre-login cookie (a login injected into
    // another browser), or with another sign-in's cookie: refused (the sign-in stays its own
    // browser's: `finding_11_…`); a used state is refused as unknown.
    let first = s.start().await;
    let second = s.start().await;
    s.issue(&first, "c1", "alice", json!({}));
    let foreign = "Refused: this sign-in was not started in this browser. Start again.";
    let a = s
        .callback(&format!("code=c1&state={}", first.state), None)
        .await;
    assert_eq!((a.status, error_of(&a.body)), (400, foreign));
    assert_eq!(a.cookies, [CLEAR]);
    let a = s
        .callback(
            &format!("code=c1&state={}", second.state),
            Some(&first.cookie),
        )
        .await;
    assert_eq!((a.status, error_of(&a.body)), (400, foreign));
    let a = s
        .callback(
            &format!("code=c1&state={}", first.state),
            Some(&first.cookie),
        )
        .await;
    assert_eq!(a.status, 200);
    let a = s
        .callback(
            &format!("code=c1&state={}", first.state),
            Some(&first.cookie),
        )
        .await;
    assert_eq!((a.status, error_of(&a.body)), (400, unknown));
    // The provider's own refusal ends the sign-in too.
    let third = s.start().await;
    let a = s
        .callback(
            &format!("error=access_denied&state={}", third.state),
            Some(&third.cookie),
        )
        .await;
    assert_eq!(
        (a.status, error_of(&a.body)),
        (401, "The provider did not sign you in: access_denied.")
    );
    assert_eq!(a.cookies, [CLEAR]);
}

#[tokio::test]
async fn bad_id_tokens_and_unlisted_people_get_no_session() {
    let s = served("tokens").await;
    let cases = [
        (
            "alice",
            json!({"aud": "another-client"}),
            401,
            "Refused: authorization failed: the ID token is refused: it is for another client (aud).",
        ),
        (
            "alice",
            json!({"nonce": "another-nonce"}),
            401,
            "Refused: authorization failed: the ID token is refused: its nonce is not this sign-in&#39;s.",
        ),
        (
            "alice",
            json!({"nonce": null}),
            401,
            "Refused: authorization failed: the ID token is refused: its nonce is not this sign-in&#39;s.",
        ),
        (
            "alice",
            json!({"aud": [CLIENT, "another-client"], "azp": "another-client"}),
            401,
            "Refused: authorization failed: the ID token is refused: it was issued to another party (azp).",
        ),
        (
            "alice",
            json!({"aud": [CLIENT, "another-client"]}),
            401,
            "Refused: authorization failed: the ID token is refused: it was issued to another party (azp).",
        ),
        (
            "alice",
            json!({"iss": "http://127.0.0.1:9"}),
            401,
            "Refused: authorization failed: the ID token is refused: the token is from another issuer.",
        ),
        (
            "alice",
            json!({"exp": 1_000_000}),
            401,
            "Refused: authorization failed: the ID token is refused: the token has expired.",
        ),
        (
            "alice",
            json!({"iat": null}),
            401,
            "Refused: authorization failed: the ID token is refused: it has no iat.",
        ),
        (
            "eve",
            json!({"email": "eve@example.com", "email_verified": true}),
            403,
            "Refused: eve@example.com, sub eve at ISS may not approve here.",
        ),
        (
            "dave",
            json!({"email": "carol@example.com", "email_verified": false}),
            403,
            "Refused: carol@example.com, sub dave at ISS may not approve here.",
        ),
        (
            "dave",
            json!({"email": "carol@example.com"}),
            403,
            "Refused: carol@example.com, sub dave at ISS may not approve here.",
        ),
    ];
    for (i, (sub, over, status, message)) in cases.into_iter().enumerate() {
        let (_, a) = s.sign_in(&format!("c{i}"), sub, over.clone()).await;
        let message = message.replace("ISS", &s.iss);
        assert_eq!(
            (a.status, error_of(&a.body)),
            (status, message.as_str()),
            "{over}"
        );
        assert_eq!(a.cookies, [CLEAR], "{over}");
    }
    // A code the provider does not know (or refuses) is the token endpoint's refusal.
    let started = s.start().await;
    let a = s
        .callback(
            &format!("code=never-issued&state={}", started.state),
            Some(&started.cookie),
        )
        .await;
    assert_eq!(
        (a.status, error_of(&a.body)),
        (
            401,
            "Refused: the token endpoint refused the request: invalid_grant."
        )
    );
}

#[test]
fn configurations_that_cannot_work_are_refused() {
    let provider = OidcConfig::new("https://id.example", CLIENT);
    let cases = [
        (
            PageConfig::default().token_login(false),
            "token sign-in can be turned off only when OpenID Connect sign-in is configured",
        ),
        (
            PageConfig::default().oidc(OidcLogin::new(provider.clone(), AllowList::default())),
            "OpenID Connect sign-in needs an allow-list: subjects, emails or a required claim",
        ),
        (
            PageConfig::default().oidc(
                OidcLogin::new(provider.clone(), AllowList::default().subject("a"))
                    .redirect_uri("http://127.0.0.1:8470/callback"),
            ),
            "the redirect URI \"http://127.0.0.1:8470/callback\" must be an http(s) URL whose path is /login/callback",
        ),
        // Finding 10 of the security review: a provider over plain http off loopback.
        (
            PageConfig::default().oidc(OidcLogin::new(
                OidcConfig::new("http://id.example", CLIENT),
                AllowList::default().subject("a"),
            )),
            "OpenID Connect sign-in: issuer \"http://id.example\" must be https (plain http only on a loopback host: localhost, 127.0.0.1, [::1])",
        ),
    ];
    for (config, message) in cases {
        assert_eq!(config.check(), Err(message.to_owned()));
    }
    assert_eq!(
        PageConfig::default()
            .oidc(
                OidcLogin::new(
                    provider,
                    AllowList::default().require_claim("groups", "ops")
                )
                .redirect_uri("https://approvals.example/login/callback")
            )
            .check(),
        Ok(())
    );
}

/// Separation of duties with a provider's sign-in: its identity is `ISSUER#SUBJECT`, so it
/// cannot decide a request that names that principal as who asked and says approvers must
/// differ; another person signed in at the same provider can.
#[tokio::test]
async fn an_oidc_sign_in_cannot_decide_what_its_own_principal_asked_for() {
    let s = served("differ").await;
    let mut r = request("\"alice's\"");
    r.labels.insert(
        purra_core::PRINCIPAL_LABEL.into(),
        purra_core::principal_name(&s.iss, "alice"),
    );
    r.labels.insert(
        purra_core::APPROVERS_MUST_DIFFER_LABEL.into(),
        "true".into(),
    );
    let id = ApprovalGateway::prepare(&s.store, r).await.unwrap();
    let decide = |sub: &'static str, code: &'static str, email: &'static str| {
        let s = &s;
        let id = id.clone();
        async move {
            let (_, a) = s
                .sign_in(code, sub, json!({"email": email, "email_verified": true}))
                .await;
            assert_eq!(a.status, 200, "{}", a.body);
            let pair = a.cookies[0].split_once("; ").unwrap().0.to_owned();
            let page = s
                .http
                .get(format!("{}/", s.url))
                .header("cookie", &pair)
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            let from = page.find("name=\"csrf\" value=\"").unwrap() + 19;
            let csrf = page[from..from + 43].to_owned();
            let r = s
                .http
                .post(format!("{}/approvals/{}/decide", s.url, id.0))
                .header("cookie", &pair)
                .header("origin", &s.url)
                .header("accept", "application/json")
                .header("content-type", "application/x-www-form-urlencoded")
                .body(format!("csrf={csrf}&verdict=approve"))
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            (
                status,
                serde_json::from_str::<Value>(&r.text().await.unwrap()).unwrap(),
            )
        }
    };
    let (status, body) = decide("alice", "d1", "alice@example.com").await;
    assert_eq!(
        (status, body),
        (
            403,
            json!({"ok": false, "message": format!(
                "refused: {}: approvers must differ: {}#alice asked for this approval and cannot decide it",
                id.0, s.iss
            )})
        )
    );
    assert_eq!(
        ApprovalGateway::record(&s.store, id.clone())
            .await
            .unwrap()
            .unwrap()
            .state,
        ApprovalState::Prepared
    );
    // Another person at the same provider (admitted by their verified email).
    let (status, body) = decide("carol-sub", "d2", "carol@example.com").await;
    assert_eq!(
        (status, body),
        (
            200,
            json!({"ok": true, "message": format!("{} approved by carol@example.com, sub carol-sub at {}", id.0, s.iss)})
        )
    );
}

/// The session cookie an answer sets (`NAME=VALUE`), if any.
fn session_of(a: &Answer) -> Option<&str> {
    a.cookies
        .iter()
        .find(|c| c.contains("purra_page_session="))
        .map(|c| c.split_once("; ").unwrap().0)
}

/// Finding 11 of the approver page's security review: the sign-in of a `state` was taken before
/// the browser's cookie was checked, so a callback from another browser (or none) spent it. Now
/// callbacks without the pre-login cookie or with another sign-in's are refused and leave the
/// sign-in to the browser that started it, which then signs in.
#[tokio::test]
async fn finding_11_a_callback_from_another_browser_leaves_the_sign_in_to_its_own() {
    let s = served("foreign-keeps").await;
    let mine = s.start().await;
    let theirs = s.start().await;
    s.issue(&mine, "c1", "alice", json!({}));
    let foreign = "Refused: this sign-in was not started in this browser. Start again.";
    for cookie in [
        None,
        Some(theirs.cookie.as_str()),
        Some("purra_page_login=forged"),
    ] {
        let a = s
            .callback(&format!("code=c1&state={}", mine.state), cookie)
            .await;
        assert_eq!((a.status, error_of(&a.body)), (400, foreign), "{cookie:?}");
        assert_eq!(a.cookies, [CLEAR]);
    }
    let a = s
        .callback(&format!("code=c1&state={}", mine.state), Some(&mine.cookie))
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    let session = session_of(&a).expect("a session cookie").to_owned();
    let r = s
        .http
        .get(format!("{}/", s.url))
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // The other browser's own sign-in is still under way too.
    s.issue(&theirs, "c2", "alice", json!({}));
    let a = s
        .callback(
            &format!("code=c2&state={}", theirs.state),
            Some(&theirs.cookie),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
}

/// Finding 11 of the approver page's security review: 256 unauthenticated `GET /login/oidc`
/// evicted every sign-in under way. Now sign-ins are bounded per client address: 300 starts from
/// one address (127.0.0.2) make room among that address's own (its oldest is refused as unknown,
/// its newest completes), and a sign-in another address started meanwhile completes.
#[tokio::test]
async fn finding_11_one_address_cannot_evict_other_browsers_sign_ins() {
    let s = served("flood").await;
    let victim = s.start().await;
    let flooder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .local_address("127.0.0.2".parse::<std::net::IpAddr>().unwrap())
        .build()
        .unwrap();
    let mut flood = Vec::new();
    for _ in 0..300 {
        flood.push(s.start_from(&flooder).await);
    }
    s.issue(&victim, "v", "alice", json!({}));
    let a = s
        .callback(
            &format!("code=v&state={}", victim.state),
            Some(&victim.cookie),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert!(session_of(&a).is_some());
    let unknown = "Refused: this sign-in is unknown, expired or already used. Start again.";
    let oldest = &flood[0];
    s.issue(oldest, "f0", "alice", json!({}));
    let a = s
        .callback(
            &format!("code=f0&state={}", oldest.state),
            Some(&oldest.cookie),
        )
        .await;
    assert_eq!((a.status, error_of(&a.body)), (400, unknown));
    let newest = flood.last().unwrap();
    s.issue(newest, "f1", "alice", json!({}));
    let a = s
        .callback(
            &format!("code=f1&state={}", newest.state),
            Some(&newest.cookie),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
}

/// Finding 7 of the approver page's security review, with the provider: an `https://` redirect
/// URI says the page is reached over TLS, so the pre-login cookie is `Secure` (`__Secure-`) and
/// the session it opens is the `Secure`, `__Host-` cookie; the plain-named pre-login cookie does
/// not count.
#[tokio::test]
async fn finding_7_an_https_redirect_uri_makes_the_cookies_secure() {
    let s = served_with("https", |login| {
        login.redirect_uri("https://approvals.example/login/callback")
    })
    .await;
    assert_eq!(
        s.page.redirect_uri(),
        Some("https://approvals.example/login/callback")
    );
    let started = s.start().await;
    s.issue(&started, "c1", "alice", json!({}));
    let value = started.cookie.split_once('=').unwrap().1;
    let plain = format!("purra_page_login={value}");
    let a = s
        .callback(&format!("code=c1&state={}", started.state), Some(&plain))
        .await;
    assert_eq!(
        (a.status, error_of(&a.body)),
        (
            400,
            "Refused: this sign-in was not started in this browser. Start again."
        )
    );
    let a = s
        .callback(
            &format!("code=c1&state={}", started.state),
            Some(&started.cookie),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    let session = a
        .cookies
        .iter()
        .find(|c| c.starts_with("__Host-purra_page_session="))
        .expect("the secure session cookie");
    assert!(
        session.ends_with("; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age=43200"),
        "{session}"
    );
    assert!(a.cookies.contains(
        &"__Secure-purra_page_login=; Path=/login; Secure; HttpOnly; SameSite=Lax; Max-Age=0"
            .to_owned()
    ));
}

impl Served {
    /// A sign-in started at `/login/oidc{query}` (a link's `next`, a decision's `max_age`):
    /// the pre-login cookie and the provider's query as asked.
    async fn start_at(&self, query: &str) -> (Started, HashMap<String, String>) {
        let r = self
            .http
            .get(format!("{}/login/oidc{query}", self.url))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 303);
        let location = r.headers()["location"].to_str().unwrap().to_owned();
        let set = r.headers()["set-cookie"].to_str().unwrap().to_owned();
        let pair = set.split_once("; ").unwrap().0.to_owned();
        let url = reqwest::Url::parse(&location).unwrap();
        let q: HashMap<String, String> = url.query_pairs().into_owned().collect();
        let started = Started {
            cookie: pair,
            state: q["state"].clone(),
            nonce: q["nonce"].clone(),
            challenge: q["code_challenge"].clone(),
        };
        (started, q)
    }

    async fn state(&self, id: &purra_core::ApprovalId) -> ApprovalState {
        ApprovalGateway::record(&self.store, id.clone())
            .await
            .unwrap()
            .unwrap()
            .state
    }

    /// A whole sign-in of `sub` started at `/login/oidc{query}`, with `over` in its ID token.
    async fn sign_in_at(&self, query: &str, code: &str, sub: &str, over: Value) -> Answer {
        let (s, _) = self.start_at(query).await;
        self.issue(&s, code, sub, over);
        self.callback(&format!("code={code}&state={}", s.state), Some(&s.cookie))
            .await
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Issue 47 item 6: a notice's link opens the approval with its decision preselected, never
/// deciding; signing in returns there; with the binding's `approver_max_age` (carried in the
/// request's labels) the provider is asked for `max_age`, an ID token without `auth_time` or with
/// an older one gets no session, and a decision by a sign-in older than it is refused on the
/// POST itself (the browser sent to sign in again, back to the same preselection).
#[tokio::test]
async fn approver_max_age_is_checked_on_the_decision() {
    let s = served("max-age").await;
    let mut r = request("\"fresh\"");
    r.labels
        .insert(purra_core::APPROVER_MAX_AGE_LABEL.into(), "2".into());
    let id = ApprovalGateway::prepare(&s.store, r).await.unwrap();
    let link = format!("/approvals/{}?decision=approve", id.0);
    let next = "next=%2Fapprovals%2Fapproval-1%3Fdecision%3Dapprove";

    // Not signed in: the link goes to the sign-in page, which carries it on to the provider.
    let r = s.http.get(format!("{}{link}", s.url)).send().await.unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], format!("/login?{next}"));
    let r = s
        .http
        .get(format!("{}/login?{next}", s.url))
        .send()
        .await
        .unwrap();
    let body = r.text().await.unwrap();
    assert!(
        body.contains(&format!(
            "<a class=\"button\" id=\"login-oidc\" href=\"/login/oidc?{next}\">Sign in with Test ID</a>"
        )),
        "{body}"
    );

    // The first sign-in (no freshness asked yet) lands back on the approval.
    let a = s
        .sign_in_at(&format!("?{next}"), "c1", "alice", json!({}))
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert!(a.body.contains(
        "<meta http-equiv=\"refresh\" content=\"0;url=/approvals/approval-1?decision=approve\">"
    ));
    let cookie = session_of(&a).unwrap().to_owned();
    let r = s
        .http
        .get(format!("{}{link}", s.url))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let page = r.text().await.unwrap();
    assert!(page.contains(
        "<p id=\"preselected\">You chose to <strong>approve</strong> this call. Nothing is \
         decided until you confirm. Deciding it needs a sign-in within the last 2 s.</p>"
    ));
    assert!(page.contains("<input type=\"hidden\" name=\"verdict\" value=\"approve\">"));
    assert!(page
        .contains("<dt>Sign-in at most (seconds)</dt><dd class=\"label-approver_max_age\">2</dd>"));
    assert!(page.contains("id=\"confirm\" class=\"approve\">Confirm: approve</button>"));
    // The GET decided nothing.
    assert_eq!(s.state(&id).await, ApprovalState::Prepared);
    let from = page.find("name=\"csrf\" value=\"").unwrap() + 19;
    let csrf = page[from..from + 43].to_owned();

    // The sign-in grows older than 2 s: the decision is refused on the POST, by the script's
    // JSON and a form's redirect to sign in again (asking the provider for max_age).
    tokio::time::sleep(std::time::Duration::from_millis(3200)).await;
    let decide = format!("{}/approvals/{}/decide", s.url, id.0);
    let post = |accept: &'static str, cookie: String, csrf: String| {
        let (s, decide) = (&s, &decide);
        async move {
            s.http
                .post(decide)
                .header("cookie", cookie)
                .header("origin", &s.url)
                .header("accept", accept)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(format!("csrf={csrf}&verdict=approve&note="))
                .send()
                .await
                .unwrap()
        }
    };
    let r = post("application/json", cookie.clone(), csrf.clone()).await;
    assert_eq!(r.status(), 401);
    let body: Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
    assert_eq!(body["ok"], false);
    let message = body["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "refused: deciding approval-1 needs a sign-in within the last 2 s (yours was "
        ) && message.ends_with(" s ago): sign in again"),
        "{message}"
    );
    let r = post("text/html", cookie.clone(), csrf.clone()).await;
    assert_eq!(r.status(), 303);
    let again = format!("/login?{next}&max_age=2");
    assert_eq!(r.headers()["location"], again.as_str());
    assert_eq!(s.state(&id).await, ApprovalState::Prepared);
    let body = s
        .http
        .get(format!("{}{again}", s.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(body.contains(
        "<p id=\"login-again\">Deciding this approval needs a sign-in within the last 2 s: sign \
         in again.</p>"
    ));
    assert!(body.contains(&format!("href=\"/login/oidc?{next}&amp;max_age=2\"")));

    // The provider is asked for max_age=2; a token without auth_time, or with an older one, is
    // refused and opens no session.
    let (_, q) = s.start_at(&format!("?{next}&max_age=2")).await;
    assert_eq!(q["max_age"], "2");
    let refused = s
        .sign_in_at(&format!("?{next}&max_age=2"), "c2", "alice", json!({}))
        .await;
    assert_eq!(refused.status, 401);
    assert!(
        error_of(&refused.body).contains("it has no auth_time, and max_age was asked"),
        "{}",
        refused.body
    );
    assert_eq!(session_of(&refused), None);
    let old = s
        .sign_in_at(
            &format!("?{next}&max_age=2"),
            "c3",
            "alice",
            json!({"auth_time": unix_now() - 60}),
        )
        .await;
    assert_eq!(old.status, 401);
    assert!(
        error_of(&old.body).contains("its auth_time is older than the max_age asked"),
        "{}",
        old.body
    );
    assert_eq!(session_of(&old), None);

    // A fresh sign-in returns to the preselection and its confirmation decides.
    let fresh = s
        .sign_in_at(
            &format!("?{next}&max_age=2"),
            "c4",
            "alice",
            json!({"auth_time": unix_now()}),
        )
        .await;
    assert_eq!(fresh.status, 200, "{}", fresh.body);
    let cookie = session_of(&fresh).unwrap().to_owned();
    let page = s
        .http
        .get(format!("{}{link}", s.url))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let from = page.find("name=\"csrf\" value=\"").unwrap() + 19;
    let csrf = page[from..from + 43].to_owned();
    let r = post("text/html", cookie, csrf).await;
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], "/");
    let record = ApprovalGateway::record(&s.store, id.clone())
        .await
        .unwrap()
        .unwrap();
    match record.state {
        ApprovalState::Decided(d) => assert_eq!(d.verdict, Verdict::Approve),
        other => panic!("{other:?}"),
    }
}
