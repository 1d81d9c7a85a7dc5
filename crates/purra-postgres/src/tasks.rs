//! MCP tasks kept in the store's schema (purra-core's `TaskTable`): one row per task in
//! `mcp_tasks`, shared by every instance of a fleet. An insert takes a transaction-scoped
//! advisory lock before it counts, so instances racing for the last free place store at most
//! the bound; a replacement is one conditional `UPDATE … WHERE NOT terminal`, so an ended task
//! is never changed again.

use crate::store::{exec, query, query_opt, Error, PostgresStore};
use purra_core::held_tasks::now_ms;
use purra_core::{BoxFuture, StoreError, StoredTask, TaskInsert, TaskTable};
use std::sync::Arc;
use tokio_postgres::Row;

const COLUMNS: &str = "id, owner, created_ms, expires_ms, terminal, body";

/// The advisory lock every insert takes (an arbitrary constant of this table).
const INSERT_LOCK: i64 = 0x7075_7272_6174_6b73;

fn task_of(r: &Row) -> StoredTask {
    StoredTask {
        id: r.get(0),
        owner: r.get(1),
        created_ms: r.get(2),
        expires_ms: r.get(3),
        terminal: r.get(4),
        body: r.get(5),
    }
}

impl TaskTable for PostgresStore {
    fn insert_task(
        &self,
        task: StoredTask,
        per_owner: u32,
        total: u32,
    ) -> BoxFuture<'_, Result<TaskInsert, StoreError>> {
        let task = Arc::new(task);
        self.transact(move |tx, _, _| {
            let task = Arc::clone(&task);
            Box::pin(async move {
                exec(tx, "SELECT pg_advisory_xact_lock($1)", &[&INSERT_LOCK]).await?;
                // A retry after a lost commit acknowledgement finds its own row.
                if query_opt(tx, "SELECT 1 FROM mcp_tasks WHERE id = $1", &[&task.id])
                    .await?
                    .is_some()
                {
                    return Ok(TaskInsert::Inserted);
                }
                let now = now_ms();
                exec(tx, "DELETE FROM mcp_tasks WHERE expires_ms <= $1", &[&now]).await?;
                let all: i64 = query_opt(tx, "SELECT count(*) FROM mcp_tasks", &[])
                    .await?
                    .map_or(0, |r| r.get(0));
                if all >= i64::from(total) {
                    return Ok(TaskInsert::StoreFull);
                }
                let mine: i64 = query_opt(
                    tx,
                    "SELECT count(*) FROM mcp_tasks WHERE owner = $1 AND NOT terminal",
                    &[&task.owner],
                )
                .await?
                .map_or(0, |r| r.get(0));
                if mine >= i64::from(per_owner) {
                    return Ok(TaskInsert::OwnerFull);
                }
                exec(
                    tx,
                    "INSERT INTO mcp_tasks (id, owner, created_ms, expires_ms, terminal, body)
                     VALUES ($1, $2, $3, $4, $5, $6)",
                    &[
                        &task.id,
                        &task.owner,
                        &task.created_ms,
                        &task.expires_ms,
                        &task.terminal,
                        &task.body,
                    ],
                )
                .await?;
                Ok::<_, Error>(TaskInsert::Inserted)
            })
        })
    }

    fn task(
        &self,
        owner: String,
        id: String,
    ) -> BoxFuture<'_, Result<Option<StoredTask>, StoreError>> {
        let key = Arc::new((owner, id));
        self.read(move |c| {
            let key = Arc::clone(&key);
            async move {
                let row = query_opt(
                    &c,
                    &format!(
                        "SELECT {COLUMNS} FROM mcp_tasks
                         WHERE id = $1 AND owner = $2 AND expires_ms > $3"
                    ),
                    &[&key.1, &key.0, &now_ms()],
                )
                .await?;
                Ok(row.as_ref().map(task_of))
            }
        })
    }

    fn replace_task(&self, task: StoredTask) -> BoxFuture<'_, Result<bool, StoreError>> {
        let task = Arc::new(task);
        self.transact(move |tx, _, _| {
            let task = Arc::clone(&task);
            Box::pin(async move {
                let n = exec(
                    tx,
                    "UPDATE mcp_tasks SET terminal = $1, body = $2
                     WHERE id = $3 AND owner = $4 AND NOT terminal AND expires_ms > $5",
                    &[&task.terminal, &task.body, &task.id, &task.owner, &now_ms()],
                )
                .await?;
                Ok::<_, Error>(n == 1)
            })
        })
    }

    fn tasks_of(
        &self,
        owner: String,
        after: Option<String>,
        limit: u32,
    ) -> BoxFuture<'_, Result<Vec<StoredTask>, StoreError>> {
        let key = Arc::new((owner, after));
        let limit = i64::from(limit);
        self.read(move |c| {
            let key = Arc::clone(&key);
            async move {
                let rows = query(
                    &c,
                    &format!(
                        "SELECT {COLUMNS} FROM mcp_tasks
                         WHERE owner = $1 AND expires_ms > $2
                           AND ($3::TEXT IS NULL OR (created_ms, id) >
                                (SELECT created_ms, id FROM mcp_tasks WHERE id = $3 AND owner = $1))
                         ORDER BY created_ms, id LIMIT $4"
                    ),
                    &[&key.0, &now_ms(), &key.1, &limit],
                )
                .await?;
                Ok(rows.iter().map(task_of).collect())
            }
        })
    }
}
