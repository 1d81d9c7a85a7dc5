//! Write discovery: remote tools the host explicitly authorizes as writes. Each needs the confirm
//! policy, a risk matching the declared effect, a scope validator (no opt-out), and non-empty
//! binding and scope ids and revisions. Server annotations never grant it. The write snapshot
//! (schema 2) includes the host authorization; its digest is the effective binding revision
//! every registration's approval binding carries, so an approval never survives a change of
//! server, schema, host binding or scope.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use purra_core::{ApprovalBinding, Concurrency, Risk, ScopeCheck, ToolRegistration};
use purra_protocol::types::Tool;
use purra_protocol::Connection;
use serde_json::{json, Value};

use crate::call::{CallTarget, TaskUse};
use crate::codes;
use crate::discovery::{base_entry, envelope_schema, list_tools, select_bindings, Snapshot};
use crate::limits::Limits;
use crate::monitor::CatalogMonitor;
use crate::AdapterError;

/// What a write does, as the host declares it; it must match the binding's risk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteEffect {
    /// Changes state.
    Write,
    /// Destroys state.
    Destructive,
}

/// The host's explicit authorization of one remote tool as a write.
#[derive(Debug, Clone)]
pub struct WriteBinding {
    /// The local name the agent sees.
    pub local_name: String,
    /// The title the approver sees.
    pub title: String,
    /// The risk the approver is told about.
    pub risk: Risk,
    /// The effect the host declares; must match `risk`.
    pub effect: WriteEffect,
    /// The scope validator. Writes cannot opt out: [`ScopeCheck::OptOut`] fails discovery.
    pub scope: ScopeCheck,
    /// The host's binding identifier.
    pub binding_id: String,
    /// The host's binding revision (its configuration version).
    pub binding_revision: String,
    /// The scope identifier.
    pub scope_id: String,
    /// The scope revision.
    pub scope_revision: String,
}

impl WriteBinding {
    fn valid(&self) -> bool {
        let matching = matches!(
            (self.risk, self.effect),
            (Risk::Write, WriteEffect::Write) | (Risk::Destructive, WriteEffect::Destructive)
        );
        matching
            && matches!(self.scope, ScopeCheck::Check(_))
            && !self.title.is_empty()
            && [
                &self.binding_id,
                &self.binding_revision,
                &self.scope_id,
                &self.scope_revision,
            ]
            .iter()
            .all(|s| !s.trim().is_empty())
    }
}

/// What write discovery produced.
#[derive(Debug)]
pub struct WriteCatalog {
    /// The schema-2 snapshot.
    pub snapshot: Snapshot,
    /// One confirm-policy registration per binding, in local-name order; each carries its
    /// approval binding with the effective binding revision.
    pub registrations: Vec<ToolRegistration>,
}

fn risk_name(r: Risk) -> &'static str {
    match r {
        Risk::Write => "write",
        Risk::Destructive => "destructive",
    }
}

/// Discovers the remote tools named in `bindings` as approval-gated writes.
///
/// Sends only paginated `tools/list` requests. Every binding is checked first (confirm policy
/// is implied; risk must match effect; a scope validator; non-empty ids and revisions) and any
/// violation is `mcp_config_invalid`. Concurrency is always exclusive.
pub async fn discover_write_tools(
    conn: &Arc<Connection>,
    server_id: &str,
    bindings: &BTreeMap<String, WriteBinding>,
    monitor: &CatalogMonitor,
    limits: Limits,
) -> Result<WriteCatalog, AdapterError> {
    if server_id.is_empty() || !bindings.values().all(WriteBinding::valid) {
        return Err(AdapterError::new(codes::config_invalid()));
    }
    let (tools, generation) = list_tools(conn, monitor, &limits).await?;
    write_catalog(
        conn, server_id, bindings, monitor, limits, tools, generation,
    )
}

/// Write discovery over a listing already made (`tools`, listed at `generation`).
pub(crate) fn write_catalog(
    conn: &Arc<Connection>,
    server_id: &str,
    bindings: &BTreeMap<String, WriteBinding>,
    monitor: &CatalogMonitor,
    limits: Limits,
    tools: Vec<Tool>,
    generation: u64,
) -> Result<WriteCatalog, AdapterError> {
    if server_id.is_empty() || !bindings.values().all(WriteBinding::valid) {
        return Err(AdapterError::new(codes::config_invalid()));
    }
    let selected = select_bindings(tools, bindings, |b| b.local_name.as_str(), &limits)?;
    let entries: Vec<Value> = selected
        .iter()
        .map(|(b, s)| {
            let mut e = base_entry(&b.local_name, s);
            e.insert(
                "policy".into(),
                json!({"mode": "confirm", "title": b.title, "riskLevel": risk_name(b.risk)}),
            );
            e.insert("effect".into(), json!(risk_name(b.risk)));
            e.insert("concurrencySafe".into(), json!(false));
            e.insert(
                "hostAuthorization".into(),
                json!({
                    "bindingId": b.binding_id,
                    "bindingRevision": b.binding_revision,
                    "scopeId": b.scope_id,
                    "scopeRevision": b.scope_revision,
                }),
            );
            Value::Object(e)
        })
        .collect();
    let snapshot = Snapshot::of_entries(2, server_id, monitor, entries)?;
    let effective = snapshot.revision_digest().as_str().to_owned();
    let mut registrations = Vec::with_capacity(selected.len());
    for (binding, s) in selected {
        let target = Arc::new(CallTarget {
            conn: conn.clone(),
            remote: s.name.clone(),
            generation,
            monitor: monitor.clone(),
            limits,
            input: s.input.clone(),
            output: s.output.clone(),
            scope: binding.scope.clone(),
            // A write never runs as a task: a task-only tool fails closed, sending nothing.
            task: if s.task_only {
                TaskUse::Refuse
            } else {
                TaskUse::Never
            },
            write: true,
        });
        let approval = ApprovalBinding {
            binding_id: binding.binding_id.clone(),
            binding_revision: effective.clone(),
            scope_id: binding.scope_id.clone(),
            scope_revision: binding.scope_revision.clone(),
        };
        let description = if s.description.is_empty() {
            binding.title.clone()
        } else {
            s.description.clone()
        };
        let builder = ToolRegistration::builder(binding.local_name.clone())
            .description(description)
            .input_schema(s.input)
            .confirm(binding.title.clone(), binding.risk, approval)
            .scope(binding.scope.clone())
            .concurrency(Concurrency::Exclusive)
            .boxed_handler(target.handler())
            .output_schema(envelope_schema(s.output.as_ref())?);
        registrations.push(
            builder
                .build()
                .map_err(|_| AdapterError::new(codes::config_invalid()))?,
        );
    }
    Ok(WriteCatalog {
        snapshot,
        registrations,
    })
}

/// Binds every tool the connection lists under the **confirm** policy (never read: host
/// authority is never implied), with the given authorization, risk and scope validator. Local
/// names are the remote names lower-cased with other characters as `_`; a collision, or a name
/// that cannot be made valid, is `mcp_config_invalid`. Sends only paginated `tools/list`.
pub async fn confirm_bindings_for_all(
    conn: &Connection,
    monitor: &CatalogMonitor,
    limits: Limits,
    template: &WriteBinding,
) -> Result<BTreeMap<String, WriteBinding>, AdapterError> {
    let (tools, _) = list_tools(conn, monitor, &limits).await?;
    let mut out = BTreeMap::new();
    let mut locals = HashSet::new();
    for t in tools {
        let local =
            local_name(&t.name).ok_or_else(|| AdapterError::new(codes::config_invalid()))?;
        if !locals.insert(local.clone()) {
            return Err(AdapterError::new(codes::config_invalid()));
        }
        let mut b = template.clone();
        b.title = t.title.clone().unwrap_or_else(|| t.name.clone());
        b.local_name = local;
        out.insert(t.name, b);
    }
    Ok(out)
}

/// A local name for a remote one: `^[a-z][a-z0-9_]{0,63}$`, or none.
fn local_name(remote: &str) -> Option<String> {
    let s: String = remote
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    let ok = s.len() <= 64 && s.starts_with(|c: char| c.is_ascii_lowercase());
    ok.then_some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_names_from_remote_names() {
        assert_eq!(
            local_name("remote.Update-Doc"),
            Some("remote_update_doc".into())
        );
        assert_eq!(local_name("9lives"), None);
        assert_eq!(local_name(&"a".repeat(65)), None);
    }
}
