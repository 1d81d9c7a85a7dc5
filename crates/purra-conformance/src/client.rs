//! The client scenarios of the conformance suite (0.1.16, and the 2026-07-28 ones of
//! 0.2.0-alpha.12) that purra implements, each run with purra's Streamable HTTP client against
//! the suite's mock server: the handshake-era ones in legacy mode, the others in auto mode
//! (`tools_call`, which both suites run, in auto mode against either).

use std::sync::Arc;
use std::time::Duration;

use purra_protocol::auth::{
    AuthorizationRequest, AuthorizationResponse, Authorizer, BearerChallenge, OAuthClient,
    OAuthConfig, SigningAlgorithm, SigningKey, UrlPolicy,
};
use purra_protocol::http::reqwest;
use purra_protocol::types::{
    CallToolResult, CreateMessageResult, ElicitAction, ElicitResult, Root,
};
use purra_protocol::{
    AuthError, Client, ClientOptions, Connection, HttpClientOptions, ProtocolMode,
};
use serde_json::{json, Value};

/// The scenarios [`run`] knows, by the names the suite gives them.
pub const SCENARIOS: [&str; 11] = [
    "initialize",
    "tools_call",
    "elicitation-sep1034-client-defaults",
    "sse-retry",
    "request-metadata",
    "sep-2322-client-request-state",
    "http-standard-headers",
    "http-custom-headers",
    "http-invalid-tool-headers",
    "json-schema-ref-no-deref",
    "json-schema-2020-12-preservation",
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

/// The authorization server of the scenario at `url`, for the scenarios that hand the client a
/// secret: an operator configures the server a secret was issued by; the suite names it only
/// in the server's metadata, which the harness reads (and trusts) here the way the operator
/// would have looked it up.
async fn scenario_authorization_server(url: &str) -> Result<String, String> {
    let http = reqwest::Client::new();
    let probe = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "purra-conformance-client", "version": env!("CARGO_PKG_VERSION")}}});
    let resp = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(probe.to_string())
        .send()
        .await
        .map_err(|e| format!("POST {url}: {e}"))?;
    let challenge = resp
        .headers()
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .and_then(BearerChallenge::parse)
        .unwrap_or_default();
    let metadata = match challenge.resource_metadata {
        Some(m) => m,
        None => {
            let u = reqwest::Url::parse(url).map_err(|e| e.to_string())?;
            format!(
                "{}/.well-known/oauth-protected-resource{}",
                u.origin().ascii_serialization(),
                u.path().trim_end_matches('/')
            )
        }
    };
    let doc: Value = serde_json::from_str(
        &http
            .get(&metadata)
            .send()
            .await
            .map_err(|e| format!("GET {metadata}: {e}"))?
            .text()
            .await
            .map_err(|e| format!("GET {metadata}: {e}"))?,
    )
    .map_err(|e| format!("GET {metadata}: {e}"))?;
    doc["authorization_servers"][0]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("{metadata} names no authorization server"))
}

/// How the client authorizes in `scenario` at `url`. The suite's servers are on this machine,
/// over plain http: followed by the option for it.
async fn auth_config(scenario: &str, url: &str) -> Result<OAuthConfig, String> {
    let ctx = context();
    let config = match scenario {
        "auth/client-credentials-basic" => OAuthConfig::client_credentials(
            context_str(&ctx, "client_id")?,
            context_str(&ctx, "client_secret")?,
        )
        .authorization_server(scenario_authorization_server(url).await?),
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
                    .client_secret(context_str(&ctx, "client_secret")?)
                    .authorization_server(scenario_authorization_server(url).await?);
            }
            config
        }
    };
    Ok(config.url_policy(UrlPolicy::strict().allow_loopback(true)))
}

/// Connects with OAuth, lists the tools, calls `test-tool`.
async fn run_auth(scenario: &str, url: &str) -> Result<(), String> {
    let auth =
        OAuthClient::new(url, auth_config(scenario, url).await?).map_err(|e| e.to_string())?;
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

/// Auto mode (the 2026-07-28 probe, falling back to the handshake), declaring sampling,
/// elicitation and roots; elicitation accepts with `{"confirmed": true}`.
fn auto_options() -> ClientOptions {
    options()
        .mode(ProtocolMode::Auto)
        .on_elicitation(false, |_p| async move {
            Ok(ElicitResult::accept(
                json!({"confirmed": true})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            ))
        })
        .on_sampling(|_p| async move {
            Ok(
                CreateMessageResult::text("purra-conformance", "conformance")
                    .with_stop_reason("endTurn"),
            )
        })
        .roots(vec![
            Root::new("file:///conformance").with_name("conformance")
        ])
}

/// The tool calls the suite asks for in `MCP_CONFORMANCE_CONTEXT` (`{"toolCalls": [...]}`).
fn context_tool_calls() -> Result<Vec<(String, Value)>, String> {
    let raw = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .map_err(|_| "MCP_CONFORMANCE_CONTEXT is not set".to_owned())?;
    let v: Value =
        serde_json::from_str(&raw).map_err(|e| format!("MCP_CONFORMANCE_CONTEXT: {e}"))?;
    Ok(v.get("toolCalls")
        .and_then(Value::as_array)
        .map(|calls| {
            calls
                .iter()
                .filter_map(|c| {
                    Some((
                        c.get("name")?.as_str()?.to_owned(),
                        c.get("arguments").cloned().unwrap_or(json!({})),
                    ))
                })
                .collect()
        })
        .unwrap_or_default())
}

/// Calls every listed tool with no arguments (a tool the client refused is not listed).
async fn call_every_tool(conn: &Connection) -> Result<(), String> {
    for tool in conn.tools().iter() {
        conn.call_tool(&tool.name, json!({}))
            .await
            .map_err(|e| format!("calling {}: {e}", tool.name))?;
    }
    Ok(())
}

/// Runs `scenario` against the mock server at `url`; `Err` says what went wrong.
pub async fn run(scenario: &str, url: &str) -> Result<(), String> {
    match scenario {
        // Every POST carries the envelope and the version header; the first one is refused
        // with -32022, and the probe asks again at the version the server names.
        "request-metadata" => {
            let conn = connect(url, auto_options()).await?;
            conn.refresh_tools()
                .await
                .map_err(|e| format!("tools/list: {e}"))?;
            conn.close().await;
            Ok(())
        }
        // input_required rounds: the state echoed byte for byte, no state when none was
        // given, a fresh id per retry, nothing carried into an unrelated call, and a result
        // without resultType taken as complete.
        "sep-2322-client-request-state" => {
            let conn = connect(url, auto_options()).await?;
            for tool in [
                "test_mrtr_echo_state",
                "test_mrtr_unrelated",
                "test_mrtr_no_state",
                "test_mrtr_no_result_type",
            ] {
                call(&conn, tool, json!({})).await?;
            }
            conn.close().await;
            Ok(())
        }
        // Mcp-Method and Mcp-Name on every request: each tool called, each resource read,
        // each prompt got.
        "http-standard-headers" => {
            let conn = connect(url, auto_options()).await?;
            let r = async {
                call_every_tool(&conn).await?;
                for res in conn.resources().iter() {
                    conn.read_resource(&res.uri)
                        .await
                        .map_err(|e| format!("reading {}: {e}", res.uri))?;
                }
                for p in conn.prompts().iter() {
                    conn.get_prompt(&p.name, Vec::new())
                        .await
                        .map_err(|e| format!("getting {}: {e}", p.name))?;
                }
                Ok::<(), String>(())
            }
            .await;
            conn.close().await;
            r
        }
        // Mcp-Param-* headers mirrored from the arguments the suite names.
        "http-custom-headers" => {
            let conn = connect(url, auto_options()).await?;
            let mut r = Ok(());
            for (tool, args) in context_tool_calls()? {
                if let Err(e) = call(&conn, &tool, args).await {
                    r = Err(e);
                    break;
                }
            }
            conn.close().await;
            r
        }
        // Tools with invalid x-mcp-header annotations are not offered, so not called; the
        // valid one is.
        "http-invalid-tool-headers" => {
            let conn = connect(url, auto_options()).await?;
            let r = call_every_tool(&conn).await;
            conn.close().await;
            r
        }
        // The tool list is fetched; a network $ref in a schema is never dereferenced (purra
        // dereferences nothing).
        "json-schema-ref-no-deref" => {
            let conn = connect(url, auto_options()).await?;
            let r = conn
                .refresh_tools()
                .await
                .map(drop)
                .map_err(|e| format!("tools/list: {e}"));
            conn.close().await;
            r
        }
        // The focal tool's inputSchema, as listed, sent back verbatim to the echo tool.
        "json-schema-2020-12-preservation" => {
            let conn = connect(url, auto_options()).await?;
            let schema = conn
                .tools()
                .iter()
                .find(|t| t.name == "json_schema_2020_12_tool")
                .map(|t| Value::Object(t.input_schema.clone()));
            let r = match schema {
                Some(schema) => call(&conn, "json_schema_echo", json!({ "schema": schema }))
                    .await
                    .map(drop),
                None => Err("the server does not list json_schema_2020_12_tool".into()),
            };
            conn.close().await;
            r
        }
        // Initialize (2025-11-25, clientInfo), then close.
        "initialize" => {
            let conn = connect(url, options()).await?;
            conn.close().await;
            Ok(())
        }
        // Initialize, list the tools, call add_numbers {a: 5, b: 3}.
        "tools_call" => {
            let conn = connect(url, auto_options()).await?;
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
