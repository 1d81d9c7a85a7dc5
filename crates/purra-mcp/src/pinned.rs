//! Discovery against a pinned snapshot: a host that reviewed a server's tools keeps serving them
//! as reviewed, and is told of every difference instead of having it replace what it serves.
//!
//! A [`PinnedSnapshot`] holds, per remote tool name, the pinned definition (the members
//! [`purra_core::pins::PINNED_MEMBERS`] names: title, description, input and output schema,
//! annotations). [`discover_pinned`] lists the server's tools (paginated, bounded, as read and
//! write discovery do) and answers a [`PinnedDiscovery`]: `served`, the listing in which every
//! pinned tool is as pinned (one the server changed or no longer lists is rebuilt from its pin),
//! and `changes`, one [`PinnedChange`] per pinned tool whose listing differs. Tools the server
//! lists without a pin are in `served` as listed (the host pins them when it binds them).
//! [`discover_read_tools_pinned`] and [`discover_write_tools_pinned`] bind over `served`, so a
//! write's effective binding revision (the snapshot digest its approvals are bound to) moves
//! only when the pin does.
//!
//! ```no_run
//! # async fn f(conn: std::sync::Arc<purra_protocol::Connection>) -> Result<(), purra_mcp::AdapterError> {
//! use purra_mcp::{discover_pinned, CatalogMonitor, Limits, PinnedSnapshot};
//! let monitor = CatalogMonitor::attach(&conn);
//! let mut pins = PinnedSnapshot::default();
//! pins.pin("search", serde_json::json!({"description": "Searches", "inputSchema": {"type": "object"}}));
//! let found = discover_pinned(&conn, &monitor, Limits::default(), &pins).await?;
//! for change in &found.changes {
//!     println!("{} differs from its pin: {:?}", change.tool, change.listed.is_some());
//! }
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use purra_core::pins::pinned_definition;
use purra_protocol::types::Tool;
use purra_protocol::Connection;
use serde_json::Value;

use crate::discovery::{list_tools, read_catalog, ReadBinding, ReadCatalog};
use crate::limits::Limits;
use crate::monitor::CatalogMonitor;
use crate::write::{write_catalog, WriteBinding, WriteCatalog};
use crate::{codes, AdapterError};

/// Pinned definitions by remote tool name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PinnedSnapshot {
    tools: BTreeMap<String, Value>,
}

impl PinnedSnapshot {
    /// Pins `definition` (only its [`purra_core::pins::PINNED_MEMBERS`] count) for the remote
    /// tool `name`.
    pub fn pin(&mut self, name: impl Into<String>, definition: Value) {
        self.tools
            .insert(name.into(), pinned_definition(&definition));
    }

    /// The pinned definition of `name`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.tools.get(name)
    }

    /// Whether nothing is pinned.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

/// The pinned definition of a listed tool: its [`purra_core::pins::PINNED_MEMBERS`] as JSON.
pub fn tool_definition(tool: &Tool) -> Value {
    pinned_definition(&serde_json::to_value(tool).unwrap_or(Value::Null))
}

/// A pinned tool the server lists differently, or no longer lists.
#[derive(Debug, Clone, PartialEq)]
pub struct PinnedChange {
    /// The remote tool name.
    pub tool: String,
    /// Its pinned definition.
    pub pinned: Value,
    /// What the server lists now (`None`: it no longer lists the tool, or lists it more than
    /// once, so which one is meant is unknowable).
    pub listed: Option<Value>,
}

/// What [`discover_pinned`] found.
#[derive(Debug, Clone)]
pub struct PinnedDiscovery {
    /// The listing with every pinned tool as pinned.
    pub served: Vec<Tool>,
    /// The pinned tools whose listing differs, by remote name order.
    pub changes: Vec<PinnedChange>,
    generation: u64,
}

impl PinnedDiscovery {
    /// The change of the remote tool `name`, if its listing differs from its pin.
    pub fn change(&self, name: &str) -> Option<&PinnedChange> {
        self.changes.iter().find(|c| c.tool == name)
    }
}

/// `listed` with its pinned members replaced by `pinned`'s (its name and other members kept).
fn as_pinned(name: &str, listed: Option<&Tool>, pinned: &Value) -> Result<Tool, AdapterError> {
    let mut doc = match listed.map(serde_json::to_value) {
        Some(Ok(Value::Object(o))) => o,
        _ => serde_json::Map::new(),
    };
    for m in purra_core::pins::PINNED_MEMBERS {
        doc.remove(m);
        if let Some(v) = pinned.get(m) {
            doc.insert(m.to_owned(), v.clone());
        }
    }
    doc.insert("name".into(), Value::String(name.to_owned()));
    serde_json::from_value(Value::Object(doc))
        .map_err(|_| AdapterError::new(codes::result_invalid()))
}

/// Lists the server's tools and compares each pinned one with its pin (see the module
/// documentation). Sends only paginated `tools/list` requests; fails as read discovery's listing
/// does (a closed connection, a list that changed while it was read, limits).
pub async fn discover_pinned(
    conn: &Connection,
    monitor: &CatalogMonitor,
    limits: Limits,
    pinned: &PinnedSnapshot,
) -> Result<PinnedDiscovery, AdapterError> {
    let (tools, generation) = list_tools(conn, monitor, &limits).await?;
    compare(tools, generation, pinned)
}

/// [`discover_pinned`]'s comparison of a listing made at `generation`.
fn compare(
    tools: Vec<Tool>,
    generation: u64,
    pinned: &PinnedSnapshot,
) -> Result<PinnedDiscovery, AdapterError> {
    let mut served = Vec::with_capacity(tools.len());
    let mut changes = Vec::new();
    let mut by_name: BTreeMap<&str, Vec<&Tool>> = BTreeMap::new();
    for t in &tools {
        by_name.entry(t.name.as_str()).or_default().push(t);
    }
    for (name, pin) in &pinned.tools {
        match by_name.get(name.as_str()).map(Vec::as_slice) {
            Some([one]) => {
                let listed = tool_definition(one);
                if &listed != pin {
                    changes.push(PinnedChange {
                        tool: name.clone(),
                        pinned: pin.clone(),
                        listed: Some(listed),
                    });
                }
                served.push(as_pinned(name, Some(one), pin)?);
            }
            _ => {
                changes.push(PinnedChange {
                    tool: name.clone(),
                    pinned: pin.clone(),
                    listed: None,
                });
                served.push(as_pinned(name, None, pin)?);
            }
        }
    }
    for t in tools {
        if !pinned.tools.contains_key(&t.name) {
            served.push(t);
        }
    }
    Ok(PinnedDiscovery {
        served,
        changes,
        generation,
    })
}

/// Read discovery ([`crate::discover_read_tools`]) over `found.served`: every pinned tool is
/// bound as pinned. Sends nothing.
pub fn discover_read_tools_pinned(
    conn: &Arc<Connection>,
    server_id: &str,
    bindings: &BTreeMap<String, ReadBinding>,
    monitor: &CatalogMonitor,
    limits: Limits,
    found: &PinnedDiscovery,
) -> Result<ReadCatalog, AdapterError> {
    limits.validate()?;
    read_catalog(
        conn,
        server_id,
        bindings,
        monitor,
        limits,
        found.served.clone(),
        found.generation,
    )
}

/// Write discovery ([`crate::discover_write_tools`]) over `found.served`: every pinned tool is
/// bound as pinned, so the effective binding revision moves only when a pin does. Sends nothing.
pub fn discover_write_tools_pinned(
    conn: &Arc<Connection>,
    server_id: &str,
    bindings: &BTreeMap<String, WriteBinding>,
    monitor: &CatalogMonitor,
    limits: Limits,
    found: &PinnedDiscovery,
) -> Result<WriteCatalog, AdapterError> {
    limits.validate()?;
    write_catalog(
        conn,
        server_id,
        bindings,
        monitor,
        limits,
        found.served.clone(),
        found.generation,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, description: &str) -> Tool {
        serde_json::from_value(json!({
            "name": name,
            "description": description,
            "inputSchema": {"type": "object"},
            "execution": {"taskSupport": "forbidden"},
        }))
        .unwrap()
    }

    #[test]
    fn a_pinned_tool_is_served_as_pinned_and_its_difference_reported() {
        let mut pins = PinnedSnapshot::default();
        pins.pin("a", tool_definition(&tool("a", "Reads a")));
        pins.pin("gone", tool_definition(&tool("gone", "Was here")));
        let listed = vec![
            tool("a", "Reads a, then mails it elsewhere"),
            tool("b", "New"),
        ];
        let found = compare(listed, 7, &pins).unwrap();
        let names: Vec<&str> = found.served.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["a", "gone", "b"]);
        assert_eq!(found.served[0].description.as_deref(), Some("Reads a"));
        // What is not pinned (its execution) is the listing's.
        assert!(found.served[0].execution.is_some());
        assert_eq!(found.served[1].description.as_deref(), Some("Was here"));
        assert_eq!(found.changes.len(), 2);
        let a = found.change("a").unwrap();
        assert_eq!(a.pinned["description"], "Reads a");
        assert_eq!(
            a.listed.as_ref().unwrap()["description"],
            "Reads a, then mails it elsewhere"
        );
        assert_eq!(found.change("gone").unwrap().listed, None);
        assert!(found.change("b").is_none());
        // The same listing as pinned: nothing differs.
        let same = compare(vec![tool("a", "Reads a")], 1, &pins).unwrap();
        assert_eq!(same.changes.len(), 1, "only the removed one");
    }
}
