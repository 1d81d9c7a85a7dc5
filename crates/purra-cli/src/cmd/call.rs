//! `purra call`: calls one tool, with progress on stderr, and prints its result.

use std::time::Instant;

use purra_protocol::types::{CallToolResult, Content};
use purra_protocol::{Error, RequestOptions};

use crate::cli::CallArgs;
use crate::exit::Failure;
use crate::status::Status;
use crate::target::{request_timeout, seconds, Target};
use crate::{kv, render, term};

/// Runs `purra call`.
pub async fn run(args: CallArgs) -> Result<(), Failure> {
    let (target, rest) = Target::split(&args.positional, &args.command)?;
    let Some((tool, pairs)) = rest.split_first() else {
        return Err(Failure::usage("no tool name given"));
    };
    // Checked before connecting (a usage mistake costs no connection), converted once the
    // tool's input schema is known.
    kv::tool_arguments(args.args_json.as_deref(), pairs, None)?;
    let timeout = request_timeout(&args.connect)?;
    let max_time = seconds("--max-time", args.max_time)?;
    let json = args.connect.json;
    let status = Status::new();
    let conn = target.connect(&args.connect, &status).await?;
    let result = super::with_status(conn, &status, async |conn, status| {
        let progress = status.clone();
        // Progress restarts the timeout, but never past --max-time: a server reporting progress
        // forever cannot keep the call alive forever.
        let options = RequestOptions::default()
            .timeout(timeout)
            .on_progress(move |p| progress.progress(p), Some(max_time));
        let start = Instant::now();
        let schema = conn
            .tools()
            .iter()
            .find(|t| t.name == *tool)
            .map(|t| serde_json::Value::Object(t.input_schema.clone()));
        let arguments = kv::tool_arguments(args.args_json.as_deref(), pairs, schema.as_ref())?;
        let required = conn
            .tools()
            .iter()
            .any(|t| t.name == *tool && t.requires_task());
        if args.task || required {
            let shown = status.clone();
            let run = conn.run_tool_task(tool, arguments, None, move |t| {
                shown.print_line(&format!(
                    "purra: task {} {}{}",
                    t.id,
                    t.status,
                    t.status_message
                        .as_deref()
                        .map(|m| format!(": {m}"))
                        .unwrap_or_default()
                ));
            });
            return match tokio::time::timeout(max_time, run).await {
                Ok(r) => {
                    r.map_err(|e| Failure::protocol(format!("running tool {tool} as a task"), e))
                }
                Err(_) => Err(Failure::protocol(
                    format!(
                        "running tool {tool} as a task: no result within --max-time {}s",
                        args.max_time
                    ),
                    Error::Timeout,
                )),
            };
        }
        conn.call_tool_with(tool, arguments, options)
            .await
            .map_err(|e| {
                let context = if e == Error::Timeout && start.elapsed() >= max_time {
                    format!(
                        "calling tool {tool}: no result within --max-time {}s",
                        args.max_time
                    )
                } else {
                    format!("calling tool {tool}")
                };
                Failure::protocol(context, e)
            })
    })
    .await?;
    if json {
        super::print_json(&serde_json::to_value(&result).unwrap_or_default());
    } else if result.is_error() {
        eprintln!("purra: tool {} reported an error:", term::for_stderr(tool));
        eprint!("{}", term::for_stderr(&readable(&result)));
    } else {
        super::print_readable(&readable(&result));
    }
    if result.is_error() {
        Err(Failure::ToolError)
    } else {
        Ok(())
    }
}

/// The readable form: structured content pretty-printed (a text block that only mirrors it as
/// JSON is not repeated), then every other block, one per line.
pub fn readable(result: &CallToolResult) -> String {
    let mut out = String::new();
    if let Some(structured) = &result.structured_content {
        out.push_str(&render::line(&render::pretty(structured)));
    }
    for block in &result.content {
        if let (Some(structured), Content::Text(t)) = (&result.structured_content, block) {
            if render::mirrors(&t.text, structured) {
                continue;
            }
        }
        out.push_str(&render::line(&render::content(block)));
    }
    out
}
