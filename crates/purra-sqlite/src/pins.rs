//! Pinned tool definitions and catalog changes (purra-core's `CatalogPins`) in the store's file:
//! `tool_pins` (one row per upstream tool) and `catalog_changes` (one row per distinct
//! difference, `UNIQUE` on upstream, tool, pinned digest and new digest, so every process that
//! sees the same difference finds the one row). A new change records `catalog.changed` for the
//! webhooks in the same savepoint; deciding one re-pins in the same savepoint.

use crate::store::{backend, SqliteStore};
use crate::webhook::record;
use purra_core::pins::{check_definition, definition_digest};
use purra_core::stored::{from_ns, to_ns};
use purra_core::{
    BoxFuture, CatalogChange, CatalogChangeKind, CatalogChangeState, CatalogDecision, CatalogPins,
    SeenChange, StoreError, ToolPin, WebhookEvent, WebhookEventType,
};
use rusqlite::{params, Connection, OptionalExtension, Row};
use serde_json::Value;

const CHANGE_COLUMNS: &str = "seq, upstream, tool, kind, old_definition, old_digest, \
                              new_definition, new_digest, state, seen_by, seen_at_ns, \
                              decided_by, decided_at_ns, note";

fn json_of(text: &str) -> Result<Value, StoreError> {
    serde_json::from_str(text)
        .map_err(|e| StoreError::Backend(format!("a stored tool definition is not JSON: {e}")))
}

fn pin_of(r: &Row<'_>) -> rusqlite::Result<(String, String, String, String, String, i64)> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
    ))
}

fn pin_from(
    (upstream, tool, definition, digest, pinned_by, at): (
        String,
        String,
        String,
        String,
        String,
        i64,
    ),
) -> Result<ToolPin, StoreError> {
    Ok(ToolPin {
        upstream,
        tool,
        definition: json_of(&definition)?,
        digest,
        pinned_by,
        pinned_at: from_ns(at),
    })
}

type ChangeRow = (
    i64,
    String,
    String,
    String,
    String,
    String,
    Option<String>,
    String,
    String,
    String,
    i64,
    Option<String>,
    Option<i64>,
    Option<String>,
);

fn change_row(r: &Row<'_>) -> rusqlite::Result<ChangeRow> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
        r.get(7)?,
        r.get(8)?,
        r.get(9)?,
        r.get(10)?,
        r.get(11)?,
        r.get(12)?,
        r.get(13)?,
    ))
}

fn change_from(row: ChangeRow) -> Result<CatalogChange, StoreError> {
    let (seq, upstream, tool, kind, old, old_digest, new, new_digest, state, seen_by, seen_at) = (
        row.0, row.1, row.2, row.3, row.4, row.5, row.6, row.7, row.8, row.9, row.10,
    );
    Ok(CatalogChange {
        id: u64::try_from(seq).unwrap_or(0),
        upstream,
        tool,
        kind: CatalogChangeKind::parse(&kind).ok_or_else(|| {
            StoreError::Backend(format!("stored change kind `{kind}` is unknown"))
        })?,
        old_definition: json_of(&old)?,
        old_digest,
        new_definition: new.as_deref().map(json_of).transpose()?,
        new_digest: Some(new_digest).filter(|d| !d.is_empty()),
        state: CatalogChangeState::parse(&state).ok_or_else(|| {
            StoreError::Backend(format!("stored change state `{state}` is unknown"))
        })?,
        seen_by,
        seen_at: from_ns(seen_at),
        decided_by: row.11,
        decided_at: row.12.map(from_ns),
        note: row.13,
    })
}

fn change_by_seq(conn: &Connection, seq: i64) -> Result<Option<CatalogChange>, StoreError> {
    conn.prepare_cached(&format!(
        "SELECT {CHANGE_COLUMNS} FROM catalog_changes WHERE seq = ?1"
    ))
    .and_then(|mut s| s.query_row(params![seq], change_row).optional())
    .map_err(backend)?
    .map(change_from)
    .transpose()
}

fn text(v: &Value) -> String {
    v.to_string()
}

impl CatalogPins for SqliteStore {
    fn tool_pins(&self, upstream: String) -> BoxFuture<'_, Result<Vec<ToolPin>, StoreError>> {
        self.run(move |conn, _| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT upstream, tool, definition, digest, pinned_by, pinned_at_ns
                     FROM tool_pins WHERE upstream = ?1 ORDER BY tool",
                )
                .map_err(backend)?;
            let rows = stmt.query_map(params![upstream], pin_of).map_err(backend)?;
            rows.map(|r| pin_from(r.map_err(backend)?)).collect()
        })
    }

    fn pin_tool(&self, pin: ToolPin) -> BoxFuture<'_, Result<ToolPin, StoreError>> {
        self.write(move |tx, _| {
            check_definition(&pin.definition)?;
            let digest = definition_digest(&pin.definition)?;
            tx.prepare_cached(
                "INSERT INTO tool_pins (upstream, tool, definition, digest, pinned_by, pinned_at_ns)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (upstream, tool) DO NOTHING",
            )
            .and_then(|mut s| {
                s.execute(params![
                    pin.upstream,
                    pin.tool,
                    text(&pin.definition),
                    digest,
                    pin.pinned_by,
                    to_ns(pin.pinned_at).unwrap_or(0)
                ])
            })
            .map_err(backend)?;
            tx.prepare_cached(
                "SELECT upstream, tool, definition, digest, pinned_by, pinned_at_ns
                 FROM tool_pins WHERE upstream = ?1 AND tool = ?2",
            )
            .and_then(|mut s| s.query_row(params![pin.upstream, pin.tool], pin_of))
            .map_err(backend)
            .and_then(pin_from)
        })
    }

    fn note_catalog_change(
        &self,
        seen: SeenChange,
    ) -> BoxFuture<'_, Result<(CatalogChange, bool), StoreError>> {
        self.write(move |tx, _| {
            let new_digest = seen.new_digest()?.unwrap_or_default();
            let at = to_ns(seen.seen_at)?;
            let n = tx
                .prepare_cached(
                    "INSERT INTO catalog_changes (upstream, tool, kind, old_definition, old_digest,
                                                  new_definition, new_digest, state, seen_by,
                                                  seen_at_ns)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'pending', ?8, ?9)
                     ON CONFLICT (upstream, tool, old_digest, new_digest) DO NOTHING",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        seen.pin.upstream,
                        seen.pin.tool,
                        seen.kind().as_str(),
                        text(&seen.pin.definition),
                        seen.pin.digest,
                        seen.new_definition.as_ref().map(text),
                        new_digest,
                        seen.seen_by,
                        at
                    ])
                })
                .map_err(backend)?;
            let seq: i64 = tx
                .prepare_cached(
                    "SELECT seq FROM catalog_changes
                     WHERE upstream = ?1 AND tool = ?2 AND old_digest = ?3 AND new_digest = ?4",
                )
                .and_then(|mut s| {
                    s.query_row(
                        params![
                            seen.pin.upstream,
                            seen.pin.tool,
                            seen.pin.digest,
                            new_digest
                        ],
                        |r| r.get(0),
                    )
                })
                .map_err(backend)?;
            let change = change_by_seq(tx, seq)?.ok_or(StoreError::NotFound)?;
            if n == 1 {
                record(tx, WebhookEventType::CatalogChanged, |_| {
                    Ok(WebhookEvent::catalog_changed(&change, seen.seen_at))
                })?;
            }
            Ok((change, n == 1))
        })
    }

    fn catalog_changes(
        &self,
        pending_only: bool,
    ) -> BoxFuture<'_, Result<Vec<CatalogChange>, StoreError>> {
        self.run(move |conn, _| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {CHANGE_COLUMNS} FROM catalog_changes
                     WHERE (?1 = 0 OR state = 'pending') ORDER BY seq DESC LIMIT 1000"
                ))
                .map_err(backend)?;
            let rows = stmt
                .query_map(params![i64::from(pending_only)], change_row)
                .map_err(backend)?;
            rows.map(|r| change_from(r.map_err(backend)?)).collect()
        })
    }

    fn catalog_change(&self, id: u64) -> BoxFuture<'_, Result<Option<CatalogChange>, StoreError>> {
        self.run(move |conn, _| match i64::try_from(id) {
            Ok(seq) => change_by_seq(conn, seq),
            Err(_) => Ok(None),
        })
    }

    fn decide_catalog_change(
        &self,
        id: u64,
        decision: CatalogDecision,
    ) -> BoxFuture<'_, Result<CatalogChange, StoreError>> {
        self.write(move |tx, _| {
            decision.check()?;
            let seq = i64::try_from(id).map_err(|_| StoreError::NotFound)?;
            let change = change_by_seq(tx, seq)?.ok_or(StoreError::NotFound)?;
            if change.state != CatalogChangeState::Pending {
                return Err(StoreError::Conflict("the catalog change is decided already"));
            }
            let at = to_ns(decision.at)?;
            if decision.approve {
                let pinned: Option<String> = tx
                    .prepare_cached("SELECT digest FROM tool_pins WHERE upstream = ?1 AND tool = ?2")
                    .and_then(|mut s| {
                        s.query_row(params![change.upstream, change.tool], |r| r.get(0))
                            .optional()
                    })
                    .map_err(backend)?;
                if pinned.as_deref() != Some(change.old_digest.as_str()) {
                    return Err(StoreError::Conflict(
                        "the tool was re-pinned since this change was seen (another change was approved)",
                    ));
                }
                // A removal approved keeps its pin: the tool stays withheld while its binding
                // names it (the operator removes the binding), and is served as pinned if the
                // upstream lists it again unchanged.
                if let (Some(def), Some(digest)) = (&change.new_definition, &change.new_digest) {
                    tx.prepare_cached(
                            "UPDATE tool_pins SET definition = ?3, digest = ?4, pinned_by = ?5,
                                 pinned_at_ns = ?6
                             WHERE upstream = ?1 AND tool = ?2",
                        )
                        .and_then(|mut s| {
                            s.execute(params![
                                change.upstream,
                                change.tool,
                                text(def),
                                digest,
                                decision.by,
                                at
                            ])
                        })
                        .map_err(backend)?;
                }
            }
            let state = if decision.approve {
                CatalogChangeState::Approved
            } else {
                CatalogChangeState::Denied
            };
            tx.prepare_cached(
                "UPDATE catalog_changes SET state = ?2, decided_by = ?3, decided_at_ns = ?4,
                     note = ?5
                 WHERE seq = ?1 AND state = 'pending'",
            )
            .and_then(|mut s| {
                s.execute(params![seq, state.as_str(), decision.by, at, decision.note])
            })
            .map_err(backend)?;
            change_by_seq(tx, seq)?.ok_or(StoreError::NotFound)
        })
    }
}
