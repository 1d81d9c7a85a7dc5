//! `purra prompt`: gets one prompt and prints its messages.

use purra_protocol::types::GetPromptResult;

use crate::cli::PromptArgs;
use crate::exit::Failure;
use crate::status::Status;
use crate::target::Target;
use crate::{kv, render};

/// Runs `purra prompt`.
pub async fn run(args: PromptArgs) -> Result<(), Failure> {
    let (target, rest) = Target::split(&args.positional, &args.command)?;
    let Some((name, pairs)) = rest.split_first() else {
        return Err(Failure::usage("no prompt name given"));
    };
    let arguments = kv::prompt_arguments(pairs)?;
    let status = Status::new();
    let conn = target.connect(&args.connect, &status).await?;
    let result = super::with_status(conn, &status, async |conn, _status| {
        conn.get_prompt(name, arguments)
            .await
            .map_err(|e| Failure::protocol(format!("getting prompt {name}"), e))
    })
    .await?;
    if args.connect.json {
        super::print_json(&serde_json::to_value(&result).unwrap_or_default());
    } else {
        super::print_readable(&readable(&result));
    }
    Ok(())
}

/// The description (if any) as a `# ` line, then each message as `role: content`.
pub fn readable(result: &GetPromptResult) -> String {
    let mut out = String::new();
    if let Some(d) = &result.description {
        out.push_str(&render::line(&format!("# {d}")));
    }
    for m in &result.messages {
        let role = m.role;
        out.push_str(&render::line(&format!(
            "{role}: {}",
            render::content(&m.content)
        )));
    }
    out
}
