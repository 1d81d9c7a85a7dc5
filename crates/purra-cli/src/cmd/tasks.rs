//! `purra tasks list|get|cancel`: the tasks a server runs for this client (2025-11-25 form).

use purra_protocol::tasks::Task;

use crate::cli::TasksCommand;
use crate::exit::Failure;
use crate::status::Status;
use crate::target::Target;

/// One task as JSON (what `--json` prints).
pub fn task_json(t: &Task) -> serde_json::Value {
    serde_json::json!({
        "taskId": t.id,
        "status": t.status.as_str(),
        "statusMessage": t.status_message,
        "createdAt": t.created_at,
        "lastUpdatedAt": t.last_updated_at,
        "ttlMs": t.ttl_ms,
        "pollIntervalMs": t.poll_interval_ms,
    })
}

/// One task on one line: id, status, and the status message when there is one.
pub fn task_line(t: &Task) -> String {
    match &t.status_message {
        Some(m) => format!("{}  {}  {m}\n", t.id, t.status),
        None => format!("{}  {}\n", t.id, t.status),
    }
}

/// Runs `purra tasks`.
pub async fn run(command: TasksCommand) -> Result<(), Failure> {
    let args = command.args();
    let (target, rest) = Target::split(&args.positional, &args.command)?;
    let id = match (&command, rest.as_slice()) {
        (TasksCommand::List(_), []) => None,
        (TasksCommand::List(_), _) => return Err(Failure::usage("tasks list takes no task id")),
        (_, [id]) => Some(id.clone()),
        (_, []) => return Err(Failure::usage("no task id given")),
        (_, _) => return Err(Failure::usage("give exactly one task id")),
    };
    let json = args.connect.json;
    let status = Status::new();
    let conn = target.connect(&args.connect, &status).await?;
    let tasks = super::with_status(conn, &status, async |conn, _status| {
        let failed = |what: String| move |e| Failure::protocol(what, e);
        match (&command, id) {
            (TasksCommand::Get(_), Some(id)) => conn
                .get_task(&id)
                .await
                .map(|t| vec![t])
                .map_err(failed(format!("getting task {id}"))),
            (TasksCommand::Cancel(_), Some(id)) => conn
                .cancel_task(&id)
                .await
                .map(|t| vec![t])
                .map_err(failed(format!("cancelling task {id}"))),
            _ => {
                let mut all = Vec::new();
                let mut cursor: Option<String> = None;
                loop {
                    let (page, next) = conn
                        .list_tasks(cursor.as_deref())
                        .await
                        .map_err(failed("listing tasks".to_owned()))?;
                    all.extend(page);
                    match next {
                        Some(c) if all.len() < 100_000 => cursor = Some(c),
                        _ => break,
                    }
                }
                Ok(all)
            }
        }
    })
    .await?;
    if json {
        let docs: Vec<_> = tasks.iter().map(task_json).collect();
        match (&command, docs.as_slice()) {
            (TasksCommand::List(_), _) => super::print_json(&serde_json::Value::Array(docs)),
            (_, [one]) => super::print_json(one),
            _ => super::print_json(&serde_json::Value::Array(docs)),
        }
    } else {
        let text: String = tasks.iter().map(task_line).collect();
        super::print_readable(&text);
    }
    Ok(())
}
