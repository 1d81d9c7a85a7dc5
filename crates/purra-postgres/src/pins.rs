//! Pinned tool definitions and catalog changes (purra-core's `CatalogPins`) in the store's
//! schema, as purra-sqlite keeps them: `tool_pins` and `catalog_changes`, one change per distinct
//! difference (`UNIQUE`; `ON CONFLICT DO NOTHING` makes instances of a fleet that see the same
//! difference at once record it once, and only the one that inserted it records
//! `catalog.changed` in its transaction). Deciding re-pins in the same transaction.

use crate::store::{exec, query, query_opt, Error, PostgresStore, Tx};
use crate::webhook::{insert, wanted};
use purra_core::pins::{check_definition, definition_digest};
use purra_core::stored::{from_ns, to_ns};
use purra_core::{
    BoxFuture, CatalogChange, CatalogChangeKind, CatalogChangeState, CatalogDecision, CatalogPins,
    SeenChange, StoreError, ToolPin, WebhookEvent, WebhookEventType,
};
use serde_json::Value;
use std::sync::Arc;
use tokio_postgres::Row;

const CHANGE_COLUMNS: &str = "seq, upstream, tool, kind, old_definition, old_digest, \
                              new_definition, new_digest, state, seen_by, seen_at_ns, \
                              decided_by, decided_at_ns, note";

const PIN_COLUMNS: &str = "upstream, tool, definition, digest, pinned_by, pinned_at_ns";

fn json_of(text: &str) -> Result<Value, Error> {
    serde_json::from_str(text).map_err(|e| {
        Error::Store(StoreError::Backend(format!(
            "a stored tool definition is not JSON: {e}"
        )))
    })
}

fn pin_of(r: &Row) -> Result<ToolPin, Error> {
    Ok(ToolPin {
        upstream: r.get(0),
        tool: r.get(1),
        definition: json_of(r.get(2))?,
        digest: r.get(3),
        pinned_by: r.get(4),
        pinned_at: from_ns(r.get(5)),
    })
}

fn change_of(r: &Row) -> Result<CatalogChange, Error> {
    let bad = |what: &str, word: &str| {
        Error::Store(StoreError::Backend(format!(
            "stored change {what} `{word}` is unknown"
        )))
    };
    let kind: &str = r.get(3);
    let state: &str = r.get(8);
    let new_digest: String = r.get(7);
    Ok(CatalogChange {
        id: u64::try_from(r.get::<_, i64>(0)).unwrap_or(0),
        upstream: r.get(1),
        tool: r.get(2),
        kind: CatalogChangeKind::parse(kind).ok_or_else(|| bad("kind", kind))?,
        old_definition: json_of(r.get(4))?,
        old_digest: r.get(5),
        new_definition: r.get::<_, Option<&str>>(6).map(json_of).transpose()?,
        new_digest: Some(new_digest).filter(|d| !d.is_empty()),
        state: CatalogChangeState::parse(state).ok_or_else(|| bad("state", state))?,
        seen_by: r.get(9),
        seen_at: from_ns(r.get(10)),
        decided_by: r.get(11),
        decided_at: r.get::<_, Option<i64>>(12).map(from_ns),
        note: r.get(13),
    })
}

async fn change_by_seq(tx: &Tx<'_>, seq: i64) -> Result<Option<CatalogChange>, Error> {
    query_opt(
        tx,
        &format!("SELECT {CHANGE_COLUMNS} FROM catalog_changes WHERE seq = $1"),
        &[&seq],
    )
    .await?
    .as_ref()
    .map(change_of)
    .transpose()
}

/// A seen change's values, checked and converted once before its transaction.
struct Seen {
    seen: SeenChange,
    kind: &'static str,
    old: String,
    new: Option<String>,
    new_digest: String,
    at: i64,
}

impl CatalogPins for PostgresStore {
    fn tool_pins(&self, upstream: String) -> BoxFuture<'_, Result<Vec<ToolPin>, StoreError>> {
        self.read(move |c| {
            let upstream = upstream.clone();
            async move {
                let rows = query(
                    &c,
                    &format!(
                        "SELECT {PIN_COLUMNS} FROM tool_pins WHERE upstream = $1 ORDER BY tool"
                    ),
                    &[&upstream],
                )
                .await?;
                rows.iter().map(pin_of).collect()
            }
        })
    }

    fn pin_tool(&self, pin: ToolPin) -> BoxFuture<'_, Result<ToolPin, StoreError>> {
        Box::pin(async move {
            check_definition(&pin.definition)?;
            let digest = definition_digest(&pin.definition)?;
            let at = to_ns(pin.pinned_at)?;
            let text = pin.definition.to_string();
            let pin = Arc::new((pin, digest, at, text));
            self.transact(move |tx, _, _| {
                let pin = Arc::clone(&pin);
                Box::pin(async move {
                    let (p, digest, at, text) = &*pin;
                    exec(
                        tx,
                        "INSERT INTO tool_pins (upstream, tool, definition, digest, pinned_by,
                                                pinned_at_ns)
                         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (upstream, tool) DO NOTHING",
                        &[&p.upstream, &p.tool, text, digest, &p.pinned_by, at],
                    )
                    .await?;
                    let row = query_opt(
                        tx,
                        &format!(
                            "SELECT {PIN_COLUMNS} FROM tool_pins WHERE upstream = $1 AND tool = $2"
                        ),
                        &[&p.upstream, &p.tool],
                    )
                    .await?
                    .ok_or(Error::Store(StoreError::NotFound))?;
                    pin_of(&row)
                })
            })
            .await
        })
    }

    fn note_catalog_change(
        &self,
        seen: SeenChange,
    ) -> BoxFuture<'_, Result<(CatalogChange, bool), StoreError>> {
        Box::pin(async move {
            let new_digest = seen.new_digest()?.unwrap_or_default();
            let row = Arc::new(Seen {
                kind: seen.kind().as_str(),
                old: seen.pin.definition.to_string(),
                new: seen.new_definition.as_ref().map(Value::to_string),
                at: to_ns(seen.seen_at)?,
                new_digest,
                seen,
            });
            self.transact(move |tx, _, _| {
                let row = Arc::clone(&row);
                Box::pin(async move {
                    let s = &row.seen;
                    let find = || async {
                        query_opt(
                            tx,
                            "SELECT seq FROM catalog_changes
                             WHERE upstream = $1 AND tool = $2 AND old_digest = $3
                               AND new_digest = $4",
                            &[&s.pin.upstream, &s.pin.tool, &s.pin.digest, &row.new_digest],
                        )
                        .await
                        .map(|r| r.map(|r| r.get::<_, i64>(0)))
                    };
                    // Instances recording at once take turns (changes are rare), so the one
                    // that records it is the only one to spend a sequence number: ids have no
                    // gaps. Kept already (another instance, an earlier refresh): that one.
                    exec(
                        tx,
                        "LOCK TABLE catalog_changes IN SHARE ROW EXCLUSIVE MODE",
                        &[],
                    )
                    .await?;
                    if let Some(seq) = find().await? {
                        let change = change_by_seq(tx, seq)
                            .await?
                            .ok_or(Error::Store(StoreError::NotFound))?;
                        return Ok((change, false));
                    }
                    let inserted = query_opt(
                        tx,
                        "INSERT INTO catalog_changes (upstream, tool, kind, old_definition,
                                                      old_digest, new_definition, new_digest,
                                                      state, seen_by, seen_at_ns)
                         VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8, $9)
                         ON CONFLICT (upstream, tool, old_digest, new_digest) DO NOTHING
                         RETURNING seq",
                        &[
                            &s.pin.upstream,
                            &s.pin.tool,
                            &row.kind,
                            &row.old,
                            &s.pin.digest,
                            &row.new,
                            &row.new_digest,
                            &s.seen_by,
                            &row.at,
                        ],
                    )
                    .await?;
                    let seq: i64 = match &inserted {
                        Some(r) => r.get(0),
                        None => find().await?.ok_or(Error::Store(StoreError::NotFound))?,
                    };
                    let change = change_by_seq(tx, seq)
                        .await?
                        .ok_or(Error::Store(StoreError::NotFound))?;
                    let new = inserted.is_some();
                    if new && wanted(tx, WebhookEventType::CatalogChanged).await? {
                        insert(tx, &WebhookEvent::catalog_changed(&change, s.seen_at)).await?;
                    }
                    Ok((change, new))
                })
            })
            .await
        })
    }

    fn catalog_changes(
        &self,
        pending_only: bool,
    ) -> BoxFuture<'_, Result<Vec<CatalogChange>, StoreError>> {
        self.read(move |c| async move {
            let rows = query(
                &c,
                &format!(
                    "SELECT {CHANGE_COLUMNS} FROM catalog_changes
                     WHERE (NOT $1 OR state = 'pending') ORDER BY seq DESC LIMIT 1000"
                ),
                &[&pending_only],
            )
            .await?;
            rows.iter().map(change_of).collect()
        })
    }

    fn catalog_change(&self, id: u64) -> BoxFuture<'_, Result<Option<CatalogChange>, StoreError>> {
        self.read(move |c| async move {
            let Ok(seq) = i64::try_from(id) else {
                return Ok(None);
            };
            query_opt(
                &c,
                &format!("SELECT {CHANGE_COLUMNS} FROM catalog_changes WHERE seq = $1"),
                &[&seq],
            )
            .await?
            .as_ref()
            .map(change_of)
            .transpose()
        })
    }

    fn decide_catalog_change(
        &self,
        id: u64,
        decision: CatalogDecision,
    ) -> BoxFuture<'_, Result<CatalogChange, StoreError>> {
        Box::pin(async move {
            decision.check()?;
            let seq = i64::try_from(id).map_err(|_| StoreError::NotFound)?;
            let at = to_ns(decision.at)?;
            let decision = Arc::new(decision);
            self.transact(move |tx, _, retry| {
                let d = Arc::clone(&decision);
                Box::pin(async move {
                    // Locked: two operators deciding at once decide it once.
                    let change = query_opt(
                        tx,
                        &format!(
                            "SELECT {CHANGE_COLUMNS} FROM catalog_changes WHERE seq = $1 FOR UPDATE"
                        ),
                        &[&seq],
                    )
                    .await?
                    .as_ref()
                    .map(change_of)
                    .transpose()?
                    .ok_or(Error::Store(StoreError::NotFound))?;
                    if change.state != CatalogChangeState::Pending {
                        // A retry whose first attempt committed finds its own decision.
                        if retry
                            && change.decided_by.as_deref() == Some(d.by.as_str())
                            && change.decided_at.map(to_ns).transpose()? == Some(at)
                        {
                            return Ok(change);
                        }
                        return Err(Error::Store(StoreError::Conflict(
                            "the catalog change is decided already",
                        )));
                    }
                    if d.approve {
                        let pinned = query_opt(
                            tx,
                            "SELECT digest FROM tool_pins WHERE upstream = $1 AND tool = $2
                             FOR UPDATE",
                            &[&change.upstream, &change.tool],
                        )
                        .await?
                        .map(|r| r.get::<_, String>(0));
                        if pinned.as_deref() != Some(change.old_digest.as_str()) {
                            return Err(Error::Store(StoreError::Conflict(
                                "the tool was re-pinned since this change was seen (another change was approved)",
                            )));
                        }
                        // A removal approved keeps its pin (as purra-sqlite's).
                        if let (Some(def), Some(digest)) =
                            (&change.new_definition, &change.new_digest)
                        {
                            {
                                exec(
                                    tx,
                                    "UPDATE tool_pins SET definition = $3, digest = $4,
                                         pinned_by = $5, pinned_at_ns = $6
                                     WHERE upstream = $1 AND tool = $2",
                                    &[
                                        &change.upstream,
                                        &change.tool,
                                        &def.to_string(),
                                        digest,
                                        &d.by,
                                        &at,
                                    ],
                                )
                                .await?;
                            }
                        }
                    }
                    let state = if d.approve {
                        CatalogChangeState::Approved
                    } else {
                        CatalogChangeState::Denied
                    };
                    exec(
                        tx,
                        "UPDATE catalog_changes SET state = $2, decided_by = $3,
                             decided_at_ns = $4, note = $5
                         WHERE seq = $1 AND state = 'pending'",
                        &[&seq, &state.as_str(), &d.by, &at, &d.note],
                    )
                    .await?;
                    change_by_seq(tx, seq)
                        .await?
                        .ok_or(Error::Store(StoreError::NotFound))
                })
            })
            .await
        })
    }
}
