//! The 2026-07-28 client checks of `peers/FIXTURES.md` ("2026-07-28"), run by purra's client in
//! auto mode against any modern fixture server (purra's example server, the Python SDK's and the
//! TypeScript SDK v2's modern fixtures).

use std::time::Duration;

use purra_protocol::types::*;
use purra_protocol::{ClientOptions, Connection, Error, ProtocolMode, RequestOptions};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::time::timeout;

use crate::checks::Target;

/// The checks, in the order every modern fixture client runs and reports them.
pub const MODERN_CHECKS: [&str; 5] = [
    "discover",
    "echo",
    "elicit-input-required",
    "tampered-state",
    "listen-list-changed",
];

/// A failed check: its name and why.
pub type Failure = (&'static str, String);

fn text(r: &CallToolResult) -> String {
    r.texts().collect::<Vec<_>>().join("")
}

fn options() -> ClientOptions {
    ClientOptions::default()
        .client_info("fixture-purra-modern-client", "1.0.0")
        .mode(ProtocolMode::Auto)
        .request_timeout(Duration::from_secs(20))
        .on_elicitation(false, |_p| async move {
            Ok(ElicitResult::accept(
                json!({"name": "purra"})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            ))
        })
}

/// Runs every check against `target`, calling `report` with each check that passed; the number
/// passed, or the first failure.
pub async fn run(target: &Target, report: &mut dyn FnMut(&str)) -> Result<usize, Failure> {
    let conn = target
        .connect(options())
        .await
        .map_err(|e| ("discover", format!("connecting: {e}")))?;
    let r = checks(&conn, report).await;
    conn.close().await;
    r
}

async fn checks(conn: &Connection, report: &mut dyn FnMut(&str)) -> Result<usize, Failure> {
    if !conn.is_modern() || conn.protocol_version() != "2026-07-28" {
        return Err((
            "discover",
            format!(
                "spoke {} (modern: {})",
                conn.protocol_version(),
                conn.is_modern()
            ),
        ));
    }
    report("discover");

    let r = conn
        .call_tool("echo", json!({"text": "hello"}))
        .await
        .map_err(|e| ("echo", e.to_string()))?;
    if text(&r) != "hello" {
        return Err(("echo", format!("{r:?}")));
    }
    report("echo");

    let r = conn
        .call_tool("elicit", json!({"message": "Who are you?"}))
        .await
        .map_err(|e| ("elicit-input-required", e.to_string()))?;
    if text(&r) != "accept:purra" {
        return Err(("elicit-input-required", format!("{r:?}")));
    }
    report("elicit-input-required");

    tampered_state(conn).await?;
    report("tampered-state");

    list_changed(conn).await?;
    report("listen-list-changed");
    Ok(MODERN_CHECKS.len())
}

/// Drives one round by hand: the server's sealed `requestState`, altered, must be refused with
/// -32602.
async fn tampered_state(conn: &Connection) -> Result<(), Failure> {
    let fail = |why: String| ("tampered-state", why);
    let call = json!({"name": "elicit", "arguments": {"message": "Who are you?"}});
    let first = conn
        .request_raw("tools/call", call.clone(), RequestOptions::default())
        .await
        .map_err(|e| fail(e.to_string()))?;
    let first: Value = serde_json::from_str(first.get()).map_err(|e| fail(e.to_string()))?;
    let (Some(state), Some(requests)) = (
        first["requestState"].as_str(),
        first["inputRequests"].as_object(),
    ) else {
        return Err(fail(format!(
            "expected input_required with a requestState: {first}"
        )));
    };
    let middle = state.len() / 2;
    let swap = if &state[middle..=middle] == "A" {
        "B"
    } else {
        "A"
    };
    let tampered = format!("{}{swap}{}", &state[..middle], &state[middle + 1..]);
    let answers: serde_json::Map<String, Value> = requests
        .keys()
        .map(|k| {
            (
                k.clone(),
                json!({"action": "accept", "content": {"name": "x"}}),
            )
        })
        .collect();
    let mut retry = call;
    retry["inputResponses"] = Value::Object(answers);
    retry["requestState"] = Value::String(tampered);
    match conn
        .request_raw("tools/call", retry, RequestOptions::default())
        .await
    {
        Err(Error::Rpc(e)) if e.code == purra_protocol::RpcErrorCode::INVALID_PARAMS => Ok(()),
        Err(e) => Err(fail(format!("expected -32602, got {e}"))),
        Ok(r) => Err(fail(format!(
            "a tampered requestState was accepted: {}",
            r.get()
        ))),
    }
}

/// A tool added on the server reaches the catalog through the subscription the connection keeps
/// open: the catalog is refetched before the listener runs.
async fn list_changed(conn: &Connection) -> Result<(), Failure> {
    let fail = |why: String| ("listen-list-changed", why);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let handle = conn.on("notifications/tools/list_changed", move |_| {
        let _ = tx.send(());
    });
    let r = conn
        .call_tool("add_tool", json!({"name": "late"}))
        .await
        .map_err(|e| fail(e.to_string()))?;
    if text(&r) != "added late" {
        return Err(fail(format!("add_tool answered {r:?}")));
    }
    timeout(Duration::from_secs(10), rx.recv())
        .await
        .map_err(|_| fail("no notifications/tools/list_changed within 10 s".into()))?;
    handle.cancel();
    if !conn.tools().iter().any(|t| t.name == "late") {
        let names: Vec<String> = conn.tools().iter().map(|t| t.name.clone()).collect();
        return Err(fail(format!("late is not in the catalog: {names:?}")));
    }
    Ok(())
}
