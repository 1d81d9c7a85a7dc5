//! `purra call`: calls one tool, with progress on stderr, and prints its result.

use purra_protocol::types::{CallToolResult, Content};
use purra_protocol::RequestOptions;

use crate::cli::CallArgs;
use crate::exit::Failure;
use crate::target::{request_timeout, Target};
use crate::{kv, render};

/// Runs `purra call`.
pub async fn run(args: CallArgs) -> Result<(), Failure> {
    let (target, rest) = Target::split(&args.positional, &args.command)?;
    let Some((tool, pairs)) = rest.split_first() else {
        return Err(Failure::usage("no tool name given"));
    };
    let arguments = kv::tool_arguments(args.args_json.as_deref(), pairs)?;
    let timeout = request_timeout(&args.connect)?;
    let json = args.connect.json;
    let conn = target.connect(&args.connect).await?;
    let result = super::with_status(conn, async |conn, status| {
        let progress = status.clone();
        let options = RequestOptions::default()
            .timeout(timeout)
            .on_progress(move |p| progress.progress(p), None);
        conn.call_tool_with(tool, arguments, options)
            .await
            .map_err(|e| Failure::protocol(format!("calling tool {tool}"), e))
    })
    .await?;
    if json {
        super::print_json(&serde_json::to_value(&result).unwrap_or_default());
    } else if result.is_error() {
        eprintln!("purra: tool {tool} reported an error:");
        eprint!("{}", readable(&result));
    } else {
        print!("{}", readable(&result));
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
