//! MCP tasks kept in the store's file (purra-core's `TaskTable`): one row per task in
//! `mcp_tasks`. An insert counts the owner's tasks not yet ended and all tasks in its own transaction (the
//! group commit: no other writer of the file runs between its steps); a replacement is one
//! conditional `UPDATE … WHERE terminal = 0`, so an ended task is never changed again.

use crate::store::{backend, SqliteStore};
use purra_core::held_tasks::now_ms;
use purra_core::{BoxFuture, StoreError, StoredTask, TaskInsert, TaskTable};
use rusqlite::{params, OptionalExtension, Row};

const COLUMNS: &str = "id, owner, created_ms, expires_ms, terminal, body";

fn task_of(r: &Row<'_>) -> rusqlite::Result<StoredTask> {
    Ok(StoredTask {
        id: r.get(0)?,
        owner: r.get(1)?,
        created_ms: r.get(2)?,
        expires_ms: r.get(3)?,
        terminal: r.get::<_, i64>(4)? != 0,
        body: r.get(5)?,
    })
}

impl TaskTable for SqliteStore {
    fn insert_task(
        &self,
        task: StoredTask,
        per_owner: u32,
        total: u32,
    ) -> BoxFuture<'_, Result<TaskInsert, StoreError>> {
        self.write(move |tx, _| {
            let now = now_ms();
            tx.execute("DELETE FROM mcp_tasks WHERE expires_ms <= ?1", params![now])
                .map_err(backend)?;
            let all: i64 = tx
                .query_row("SELECT count(*) FROM mcp_tasks", [], |r| r.get(0))
                .map_err(backend)?;
            if all >= i64::from(total) {
                return Ok(TaskInsert::StoreFull);
            }
            let mine: i64 = tx
                .query_row(
                    "SELECT count(*) FROM mcp_tasks WHERE owner = ?1 AND terminal = 0",
                    params![task.owner],
                    |r| r.get(0),
                )
                .map_err(backend)?;
            if mine >= i64::from(per_owner) {
                return Ok(TaskInsert::OwnerFull);
            }
            tx.execute(
                "INSERT INTO mcp_tasks (id, owner, created_ms, expires_ms, terminal, body)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    task.id,
                    task.owner,
                    task.created_ms,
                    task.expires_ms,
                    i64::from(task.terminal),
                    task.body
                ],
            )
            .map_err(backend)?;
            Ok(TaskInsert::Inserted)
        })
    }

    fn task(
        &self,
        owner: String,
        id: String,
    ) -> BoxFuture<'_, Result<Option<StoredTask>, StoreError>> {
        self.run(move |conn, _| {
            conn.query_row(
                &format!(
                    "SELECT {COLUMNS} FROM mcp_tasks WHERE id = ?1 AND owner = ?2 AND expires_ms > ?3"
                ),
                params![id, owner, now_ms()],
                task_of,
            )
            .optional()
            .map_err(backend)
        })
    }

    fn replace_task(&self, task: StoredTask) -> BoxFuture<'_, Result<bool, StoreError>> {
        self.write(move |tx, _| {
            let n = tx
                .execute(
                    "UPDATE mcp_tasks SET terminal = ?1, body = ?2
                     WHERE id = ?3 AND owner = ?4 AND terminal = 0 AND expires_ms > ?5",
                    params![
                        i64::from(task.terminal),
                        task.body,
                        task.id,
                        task.owner,
                        now_ms()
                    ],
                )
                .map_err(backend)?;
            Ok(n == 1)
        })
    }

    fn tasks_of(
        &self,
        owner: String,
        after: Option<String>,
        limit: u32,
    ) -> BoxFuture<'_, Result<Vec<StoredTask>, StoreError>> {
        self.run(move |conn, _| {
            let now = now_ms();
            let limit = i64::from(limit);
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM mcp_tasks
                     WHERE owner = ?1 AND expires_ms > ?2
                       AND (?3 IS NULL OR (created_ms, id) >
                            (SELECT created_ms, id FROM mcp_tasks WHERE id = ?3 AND owner = ?1))
                     ORDER BY created_ms, id LIMIT ?4"
                ))
                .map_err(backend)?;
            let rows = stmt
                .query_map(params![owner, now, after, limit], task_of)
                .map_err(backend)?
                .collect::<rusqlite::Result<Vec<_>>>()
                .map_err(backend)?;
            Ok(rows)
        })
    }
}
