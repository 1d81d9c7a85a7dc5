//! Write discovery against purra's adapter fixture server (a separate process over stdio):
//! explicit host authorization, the schema-2 snapshot, the effective binding revision, effect
//! classification, and the confirm-only convenience.

use std::collections::BTreeMap;
use std::sync::Arc;

use purra_core::tool::Effect;
use purra_core::{json_identity, Policy, Risk, ScopeCheck, ScopeDecision, ToolError};
use purra_mcp::{
    codes, confirm_bindings_for_all, discover_write_tools, CatalogMonitor, Limits, WriteBinding,
    WriteCatalog, WriteEffect,
};
use purra_protocol::Connection;
use serde_json::{json, Value};

use crate::support::{adapter_fixture, call_registered, run_context};

async fn connect() -> (Arc<Connection>, CatalogMonitor) {
    let conn = adapter_fixture().await;
    let monitor = CatalogMonitor::attach(&conn);
    (conn, monitor)
}

fn write_binding(local: &str) -> WriteBinding {
    WriteBinding {
        local_name: local.into(),
        title: format!("Update via {local}"),
        risk: Risk::Write,
        effect: WriteEffect::Write,
        scope: ScopeCheck::check(|_args, run| {
            if run.agent == "writer" {
                ScopeDecision::Allow
            } else {
                ScopeDecision::Deny
            }
        }),
        binding_id: "document-service".into(),
        binding_revision: "host-config-1".into(),
        scope_id: "sandbox-documents".into(),
        scope_revision: "scope-1".into(),
    }
}

async fn discover(
    conn: &Arc<Connection>,
    monitor: &CatalogMonitor,
    b: BTreeMap<String, WriteBinding>,
) -> Result<WriteCatalog, purra_mcp::AdapterError> {
    discover_write_tools(conn, "fixture", &b, monitor, Limits::default()).await
}

async fn call(
    cat: &WriteCatalog,
    local: &str,
    args: Value,
    agent: &str,
) -> Result<Value, ToolError> {
    call_registered(&cat.registrations, local, args, run_context("run-w", agent)).await
}

#[tokio::test]
async fn write_discovery_binds_the_host_authorization() {
    let (conn, monitor) = connect().await;
    let b = BTreeMap::from([
        ("search".to_owned(), write_binding("update_doc")),
        ("fails".to_owned(), write_binding("fail_doc")),
    ]);
    let cat = discover(&conn, &monitor, b).await.unwrap();
    let snap = cat.snapshot.as_json();
    assert_eq!(snap["schemaVersion"], 2);
    let entry = &snap["entries"][1];
    assert_eq!(entry["localName"], "update_doc");
    assert_eq!(
        entry["policy"],
        json!({"mode": "confirm", "title": "Update via update_doc", "riskLevel": "write"})
    );
    assert_eq!(entry["effect"], "write");
    assert_eq!(entry["concurrencySafe"], false);
    assert_eq!(
        entry["hostAuthorization"],
        json!({"bindingId": "document-service", "bindingRevision": "host-config-1", "scopeId": "sandbox-documents", "scopeRevision": "scope-1"})
    );
    let mut without = snap.clone();
    without.as_object_mut().unwrap().remove("revisionDigest");
    assert_eq!(
        cat.snapshot.revision_digest(),
        &json_identity(&without).unwrap()
    );
    for reg in &cat.registrations {
        assert!(
            matches!(
                reg.policy(),
                Policy::Confirm {
                    risk: Risk::Write,
                    ..
                }
            ),
            "{:?}",
            reg.policy()
        );
        assert_eq!(reg.concurrency(), purra_core::Concurrency::Exclusive);
        let binding = reg.approval_binding().unwrap();
        // The effective binding revision is the whole write catalog's digest, not the host's.
        assert_eq!(
            binding.binding_revision,
            cat.snapshot.revision_digest().as_str()
        );
        assert_eq!(binding.binding_id, "document-service");
        assert_eq!(binding.scope_revision, "scope-1");
    }
    // A success is a success; a failure after sending is `unknown`, before sending `not_started`.
    assert_eq!(
        call(&cat, "update_doc", json!({"query": "x"}), "writer")
            .await
            .unwrap()["text"],
        json!(["found: x"])
    );
    let e = call(&cat, "fail_doc", json!({}), "writer")
        .await
        .unwrap_err();
    assert_eq!((e.code, e.effect), (codes::tool_error(), Effect::Unknown));
    let e = call(&cat, "update_doc", json!({"query": "x"}), "reader")
        .await
        .unwrap_err();
    assert_eq!(
        (e.code, e.effect),
        (codes::scope_denied(), Effect::NotStarted)
    );
    let e = call(&cat, "update_doc", json!({"query": 3}), "writer")
        .await
        .unwrap_err();
    assert_eq!(
        (e.code, e.effect),
        (codes::invalid_arguments(), Effect::NotStarted)
    );
}

#[tokio::test]
async fn write_bindings_must_be_explicit_and_complete() {
    let (conn, monitor) = connect().await;
    let mut cases: Vec<(&str, WriteBinding)> = Vec::new();
    let mut b = write_binding("w");
    b.scope = ScopeCheck::OptOut;
    cases.push(("scope opt-out", b));
    let mut b = write_binding("w");
    b.effect = WriteEffect::Destructive;
    cases.push(("risk and effect differ", b));
    let mut b = write_binding("w");
    b.binding_revision = " ".into();
    cases.push(("blank binding revision", b));
    let mut b = write_binding("w");
    b.scope_id = String::new();
    cases.push(("empty scope id", b));
    for (why, b) in cases {
        let err = discover(&conn, &monitor, BTreeMap::from([("search".to_owned(), b)]))
            .await
            .unwrap_err();
        assert_eq!(err.code, codes::config_invalid(), "{why}");
    }
    let mut destructive = write_binding("wipe");
    destructive.risk = Risk::Destructive;
    destructive.effect = WriteEffect::Destructive;
    let cat = discover(
        &conn,
        &monitor,
        BTreeMap::from([("search".to_owned(), destructive)]),
    )
    .await
    .unwrap();
    assert_eq!(
        cat.snapshot.as_json()["entries"][0]["policy"]["riskLevel"],
        "destructive"
    );
}

#[tokio::test]
async fn rediscovery_builds_new_registrations_with_a_content_addressed_revision() {
    let (conn, monitor) = connect().await;
    let b = BTreeMap::from([("search".to_owned(), write_binding("update_doc"))]);
    let first = discover(&conn, &monitor, b.clone()).await.unwrap();
    // The tool list changes (change_list adds a tool while it runs): old registrations are stale.
    conn.call_tool("change_list", json!({})).await.unwrap();
    let e = call(&first, "update_doc", json!({"query": "x"}), "writer")
        .await
        .unwrap_err();
    assert_eq!(
        (e.code, e.effect),
        (codes::catalog_stale(), Effect::NotStarted)
    );
    let rev = |c: &WriteCatalog| {
        c.registrations[0]
            .approval_binding()
            .unwrap()
            .binding_revision
            .clone()
    };
    // Rediscovery builds working registrations. The revision is the digest of what was
    // selected (server, schemas, host binding, scope): unchanged content, unchanged revision.
    let second = discover(&conn, &monitor, b.clone()).await.unwrap();
    assert_eq!(rev(&first), rev(&second));
    call(&second, "update_doc", json!({"query": "x"}), "writer")
        .await
        .unwrap();
    // Any change of the host's binding or scope revision gives a new effective revision.
    let mut rescoped = b.clone();
    rescoped.get_mut("search").unwrap().scope_revision = "scope-2".into();
    let third = discover(&conn, &monitor, rescoped).await.unwrap();
    assert_ne!(rev(&second), rev(&third));
    let mut rebound = b;
    rebound.get_mut("search").unwrap().binding_revision = "host-config-2".into();
    let fourth = discover(&conn, &monitor, rebound).await.unwrap();
    assert_ne!(rev(&second), rev(&fourth));
    assert_ne!(rev(&third), rev(&fourth));
}

#[tokio::test]
async fn every_listed_tool_is_bound_under_confirm_never_read() {
    let (conn, monitor) = connect().await;
    let all = confirm_bindings_for_all(
        &conn,
        &monitor,
        Limits::default(),
        &write_binding("template"),
    )
    .await
    .unwrap();
    assert!(all.contains_key("search") && all.contains_key("with_default"));
    assert_eq!(all["lookup_text_only"].local_name, "lookup_text_only");
    // Those whose schemas are inside the profile can then be discovered, all as confirm tools.
    let usable: BTreeMap<String, WriteBinding> = all
        .into_iter()
        .filter(|(k, _)| ["search", "lookup", "fails"].contains(&k.as_str()))
        .collect();
    let cat = discover(&conn, &monitor, usable).await.unwrap();
    assert_eq!(cat.registrations.len(), 3);
    assert!(cat
        .registrations
        .iter()
        .all(|r| matches!(r.policy(), Policy::Confirm { .. })));
}
