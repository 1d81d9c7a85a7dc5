//! Held writes as MCP tasks: the gateway's [`TaskStore`] over the durable store's table of tasks
//! (purra-core's `TaskTable`), so a task created on one instance of a fleet is read
//! (`tasks/get`), waited on (`tasks/result`), listed and cancelled on any.
//!
//! A write tool is served with `taskSupport: optional`: a client that calls it with task
//! augmentation gets a task at once while the call waits for its decision (not just
//! `approval_wait`: until the approval's request expires); the decision ends the task with the
//! call's result or its refusal ([`crate::runtime::write`]). Cancelling the task withdraws the
//! approval while it is undecided.

use std::sync::Arc;
use std::time::Duration;

use purra_core::{StoredTask, TaskInsert, TaskTable};
use purra_protocol::tasks::{
    TaskChange, TaskLimits, TaskOutcome, TaskRecord, TaskStatus, TaskStore, TaskStoreError,
};
use purra_protocol::ErrorObject;
use purra_protocol::{BoxFuture, TaskOptions};

use serde_json::{json, Value};

/// How often a task running on this instance re-reads its row (a cancellation on another).
const WATCH: Duration = Duration::from_secs(1);

/// How often clients are asked to poll a held write's task.
const POLL: Duration = Duration::from_secs(1);

/// The status message of a held write's task: the one place it is worded.
pub(crate) fn waiting_message(approval: &str, votes: Option<(usize, u32)>) -> String {
    match votes {
        Some((cast, need)) => format!("waiting for approval {approval}, {cast} of {need} votes"),
        None => format!("waiting for approval {approval}"),
    }
}

/// The most tasks the store keeps (ended ones until their ttl runs out included).
const TOTAL: usize = 16_384;

/// The task options of a gateway on `table`: tasks kept as long as an approval's request plus an
/// hour, whatever shorter ttl a client asks for (a held write waits on people), owned by the
/// caller's principal (`anonymous`: the configured one, for callers without a proved principal);
/// at most 64 tasks not yet ended per principal and 16 384 in all, results up to 4 MiB.
pub(crate) fn options(
    table: Arc<dyn TaskTable>,
    request_ttl: Duration,
    anonymous: &str,
) -> TaskOptions {
    let ttl = request_ttl.saturating_add(Duration::from_secs(3600));
    TaskOptions::default()
        .store(Arc::new(StoredTasks {
            table,
            limits: TaskLimits::default().total(TOTAL),
        }))
        .default_ttl(ttl)
        .max_ttl(ttl)
        .min_ttl(ttl)
        .poll_interval(POLL)
        .anonymous_owner(format!("principal:{anonymous}"))
        .watch_store(WATCH)
}

/// A [`TaskStore`] over a [`TaskTable`]: each record's JSON in its row.
pub(crate) struct StoredTasks {
    table: Arc<dyn TaskTable>,
    limits: TaskLimits,
}

fn backend(e: purra_core::StoreError) -> TaskStoreError {
    TaskStoreError::Backend(e.to_string())
}

fn ms(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The row of `r`.
pub(crate) fn row_of(r: &TaskRecord) -> StoredTask {
    let outcome = match &r.outcome {
        Some(TaskOutcome::Result(v)) => json!({ "result": v }),
        Some(TaskOutcome::Error(e)) => json!({ "error": e }),
        _ => Value::Null,
    };
    let body = json!({
        "status": r.status,
        "statusMessage": r.status_message,
        "lastUpdatedAt": r.last_updated_at,
        "ttl": r.ttl_ms,
        "pollInterval": r.poll_interval_ms,
        "inputRequests": r.input_requests,
        "outcome": outcome,
    });
    StoredTask {
        id: r.id.clone(),
        owner: r.owner.clone(),
        created_ms: ms(r.created_at),
        expires_ms: ms(r.created_at.saturating_add(r.ttl_ms)),
        terminal: r.status.is_terminal(),
        body: body.to_string(),
    }
}

/// The record of a row (a malformed body is the store's failure).
pub(crate) fn record_of(row: StoredTask) -> Result<TaskRecord, TaskStoreError> {
    let bad = |why: &str| TaskStoreError::Backend(format!("task {:?}: {why}", row.id));
    let body: Value = serde_json::from_str(&row.body).map_err(|_| bad("unreadable"))?;
    let num = |k: &str| body.get(k).and_then(Value::as_u64).ok_or_else(|| bad(k));
    let mut r = TaskRecord::new(
        row.id.clone(),
        row.owner.clone(),
        num("ttl")?,
        num("pollInterval")?,
    );
    r.created_at = u64::try_from(row.created_ms).unwrap_or(0);
    r.last_updated_at = num("lastUpdatedAt")?;
    r.status =
        serde_json::from_value::<TaskStatus>(body["status"].clone()).map_err(|_| bad("status"))?;
    r.status_message = body["statusMessage"].as_str().map(str::to_owned);
    r.input_requests =
        serde_json::from_value(body["inputRequests"].clone()).map_err(|_| bad("inputRequests"))?;
    r.outcome = match &body["outcome"] {
        Value::Null => None,
        o if o.get("result").is_some() => Some(TaskOutcome::Result(o["result"].clone())),
        o => Some(TaskOutcome::Error(
            serde_json::from_value::<ErrorObject>(o["error"].clone()).map_err(|_| bad("error"))?,
        )),
    };
    Ok(r)
}

fn as_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl TaskStore for StoredTasks {
    fn create(&self, record: TaskRecord) -> BoxFuture<'_, Result<(), TaskStoreError>> {
        Box::pin(async move {
            let (per_owner, total) = (as_u32(self.limits.per_owner), as_u32(self.limits.total));
            match self
                .table
                .insert_task(row_of(&record), per_owner, total)
                .await
                .map_err(backend)?
            {
                TaskInsert::Inserted => Ok(()),
                TaskInsert::OwnerFull => Err(TaskStoreError::OwnerFull {
                    limit: self.limits.per_owner,
                }),
                TaskInsert::StoreFull => Err(TaskStoreError::StoreFull {
                    limit: self.limits.total,
                }),
            }
        })
    }

    fn get<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<TaskRecord>, TaskStoreError>> {
        Box::pin(async move {
            match self
                .table
                .task(owner.to_owned(), id.to_owned())
                .await
                .map_err(backend)?
            {
                Some(row) => record_of(row).map(Some),
                None => Ok(None),
            }
        })
    }

    fn update<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
        change: TaskChange,
    ) -> BoxFuture<'a, Result<Option<TaskRecord>, TaskStoreError>> {
        Box::pin(async move {
            let Some(mut r) = self.get(owner, id).await? else {
                return Ok(None);
            };
            if !r.apply(change, self.limits.max_result_bytes) {
                return Ok(Some(r));
            }
            if self.table.replace_task(row_of(&r)).await.map_err(backend)? {
                return Ok(Some(r));
            }
            // Another process ended it first: its record stands.
            self.get(owner, id).await
        })
    }

    fn list<'a>(
        &'a self,
        owner: &'a str,
        after: Option<&'a str>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<TaskRecord>, TaskStoreError>> {
        Box::pin(async move {
            self.table
                .tasks_of(owner.to_owned(), after.map(str::to_owned), as_u32(limit))
                .await
                .map_err(backend)?
                .into_iter()
                .map(record_of)
                .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_survives_its_row() {
        let mut r = TaskRecord::new("t1".into(), "principal:ada".into(), 60_000, 1000);
        r.apply(
            TaskChange::Status(waiting_message("approval-7", None)),
            1 << 20,
        );
        let back = record_of(row_of(&r)).unwrap();
        assert_eq!(back, r);
        assert_eq!(
            back.status_message.as_deref(),
            Some("waiting for approval approval-7")
        );
        r.apply(
            TaskChange::Finish(TaskOutcome::Result(json!({"content": [], "isError": true}))),
            1 << 20,
        );
        let row = row_of(&r);
        assert!(row.terminal);
        assert_eq!(record_of(row).unwrap(), r);
    }
}
