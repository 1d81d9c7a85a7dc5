//! The client scenarios of the conformance suite 0.1.16 that purra implements, each run with
//! purra's Streamable HTTP client against the suite's mock server.

use std::sync::Arc;
use std::time::Duration;

use purra_protocol::auth::{
    AuthorizationRequest, AuthorizationResponse, Authorizer, OAuthClient, OAuthConfig,
    SigningAlgorithm, SigningKey,
};
use purra_protocol::http::reqwest;
use purra_protocol::types::{CallToolResult, ElicitAction, ElicitResult};
use purra_protocol::{AuthError, Client, ClientOptions, Connection, HttpClientOptions};
use serde_json::json;

/// The scenarios [`run`] knows, by the names the suite gives them.
pub const SCENARIOS: [&str; 4] = [
    "initialize",
    "tools_call",
    "elicitation-sep1034-client-defaults",
    "sse-retry",
];

/// The authorization scenarios [`run`] knows: every `auth/` scenario of the suite but SEP-990's
/// cross-app access.
pub const AUTH_SCENARIOS: [&str; 21] = [
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
    "auth/client-credentials-jwt",
    "auth/client-credentials-basic",
];

/// The client id URL the suite's `auth/basic-cimd` expects (a Client ID Metadata Document).
const CIMD_URL: &str = "https://conformance-test.local/client-metadata.json";

/// Plays the user's browser against the suite's mock authorization server: it answers the
/// authorization request with a redirect at once, whose `Location` carries the code.
struct Browser {
    http: reqwest::Client,
}

impl Authorizer for Browser {
    fn redirect_uri(&self) -> String {
        "http://localhost:3000/callback".to_owned()
    }
    fn authorize(
        &self,
        request: AuthorizationRequest,
    ) -> purra_protocol::auth::BoxFuture<'_, Result<AuthorizationResponse, AuthError>> {
        Box::pin(async move {
            let resp = self
                .http
                .get(request.url.clone())
                .send()
                .await
                .map_err(|e| AuthError::Authorization(format!("GET the authorization URL: {e}")))?;
            let location = resp
                .headers()
                .get("location")
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| {
                    AuthError::Authorization(format!(
                        "the authorization endpoint answered {} without a redirect",
                        resp.status()
                    ))
                })?;
            AuthorizationResponse::from_redirect(location)
        })
    }
}

/// `MCP_CONFORMANCE_CONTEXT`, the JSON object some scenarios pass (client ids, secrets, keys).
fn context() -> serde_json::Value {
    std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or(serde_json::Value::Null)
}

fn context_str(ctx: &serde_json::Value, key: &str) -> Result<String, String> {
    ctx[key]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("MCP_CONFORMANCE_CONTEXT has no {key}"))
}

/// How the client authorizes in `scenario`.
fn auth_config(scenario: &str) -> Result<OAuthConfig, String> {
    let ctx = context();
    Ok(match scenario {
        "auth/client-credentials-basic" => OAuthConfig::client_credentials(
            context_str(&ctx, "client_id")?,
            context_str(&ctx, "client_secret")?,
        ),
        "auth/client-credentials-jwt" => {
            let alg = ctx["signing_algorithm"].as_str().unwrap_or("ES256");
            let alg = SigningAlgorithm::from_name(alg)
                .ok_or_else(|| format!("unknown signing algorithm {alg}"))?;
            let key = SigningKey::from_pkcs8(context_str(&ctx, "private_key_pem")?.as_bytes(), alg)
                .map_err(|e| e.to_string())?;
            OAuthConfig::client_credentials_jwt(context_str(&ctx, "client_id")?, key)
        }
        _ => {
            let http = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .map_err(|e| e.to_string())?;
            let mut config = OAuthConfig::authorization_code(Arc::new(Browser { http }))
                .client_name("purra-conformance-client")
                .client_metadata_url(CIMD_URL);
            if scenario == "auth/pre-registration" {
                config = config
                    .client_id(context_str(&ctx, "client_id")?)
                    .client_secret(context_str(&ctx, "client_secret")?);
            }
            config
        }
    })
}

/// Connects with OAuth, lists the tools, calls `test-tool`.
async fn run_auth(scenario: &str, url: &str) -> Result<(), String> {
    let auth = OAuthClient::new(url, auth_config(scenario)?).map_err(|e| e.to_string())?;
    let http = HttpClientOptions::default().auth(auth);
    let conn = Client::connect_http(url, http, options())
        .await
        .map_err(|e| format!("connecting to {url}: {e}"))?;
    let r = call(&conn, "test-tool", json!({})).await;
    conn.close().await;
    r.map(drop)
}

/// How long one request may take; the suite's own per-scenario timeout is 30 s.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

fn options() -> ClientOptions {
    ClientOptions::default()
        .client_info("purra-conformance-client", env!("CARGO_PKG_VERSION"))
        .request_timeout(REQUEST_TIMEOUT)
}

async fn connect(url: &str, options: ClientOptions) -> Result<Connection, String> {
    Client::connect_http(url, HttpClientOptions::default(), options)
        .await
        .map_err(|e| format!("connecting to {url}: {e}"))
}

async fn call(
    conn: &Connection,
    tool: &str,
    args: serde_json::Value,
) -> Result<CallToolResult, String> {
    if !conn.tools().iter().any(|t| t.name == tool) {
        return Err(format!("the server does not list the tool {tool}"));
    }
    let r = conn
        .call_tool(tool, args)
        .await
        .map_err(|e| format!("calling {tool}: {e}"))?;
    if r.is_error() {
        return Err(format!(
            "{tool} failed: {}",
            r.texts().collect::<Vec<_>>().join(" ")
        ));
    }
    Ok(r)
}

/// Runs `scenario` against the mock server at `url`; `Err` says what went wrong.
pub async fn run(scenario: &str, url: &str) -> Result<(), String> {
    match scenario {
        // Initialize (2025-11-25, clientInfo), then close.
        "initialize" => {
            let conn = connect(url, options()).await?;
            conn.close().await;
            Ok(())
        }
        // Initialize, list the tools, call add_numbers {a: 5, b: 3}.
        "tools_call" => {
            let conn = connect(url, options()).await?;
            let r = call(&conn, "add_numbers", json!({"a": 5, "b": 3})).await;
            conn.close().await;
            let r = r?;
            if !r.texts().any(|t| t.trim_end().ends_with(" 8")) {
                return Err(format!("add_numbers(5, 3) did not answer 8: {r:?}"));
            }
            Ok(())
        }
        // Accept the elicitation with nothing filled in: the client applies the schema's
        // defaults (SEP-1034) before it answers.
        "elicitation-sep1034-client-defaults" => {
            let opts = options()
                .apply_elicitation_defaults(true)
                .on_elicitation(false, |_params| async move {
                    Ok(ElicitResult::action(ElicitAction::Accept))
                });
            let conn = connect(url, opts).await?;
            let r = call(&conn, "test_client_elicitation_defaults", json!({})).await;
            conn.close().await;
            r.map(drop)
        }
        // SEP-1699: the server ends the tools/call stream after a priming event with
        // `retry: 500`; the client waits that long, resumes with GET and Last-Event-ID, and
        // reads the result there.
        "sse-retry" => {
            let conn = connect(url, options()).await?;
            let r = call(&conn, "test_reconnection", json!({})).await;
            conn.close().await;
            r.map(drop)
        }
        s if AUTH_SCENARIOS.contains(&s) => run_auth(s, url).await,
        other => Err(format!(
            "unknown scenario {other:?} (known: {}, {})",
            SCENARIOS.join(", "),
            AUTH_SCENARIOS.join(", ")
        )),
    }
}
