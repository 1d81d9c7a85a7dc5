//! `purra read`: reads one resource and prints its contents.

use purra_protocol::types::ReadResourceResult;

use crate::cli::ReadArgs;
use crate::exit::Failure;
use crate::render;
use crate::status::Status;
use crate::target::Target;

/// Runs `purra read`.
pub async fn run(args: ReadArgs) -> Result<(), Failure> {
    let (target, rest) = Target::split(&args.positional, &args.command)?;
    let uri = match rest.as_slice() {
        [uri] => uri.clone(),
        [] => return Err(Failure::usage("no resource URI given")),
        _ => return Err(Failure::usage("give exactly one resource URI")),
    };
    let status = Status::new();
    let conn = target.connect(&args.connect, &status).await?;
    let result = super::with_status(conn, &status, async |conn, _status| {
        conn.read_resource(&uri)
            .await
            .map_err(|e| Failure::protocol(format!("reading {uri}"), e))
    })
    .await?;
    if args.connect.json {
        super::print_json(&serde_json::to_value(&result).unwrap_or_default());
    } else {
        super::print_readable(&readable(&result));
    }
    Ok(())
}

/// Each content's text (blobs summarized); with several contents, each under a `--- uri` line.
pub fn readable(result: &ReadResourceResult) -> String {
    let many = result.contents.len() > 1;
    let mut out = String::new();
    for c in &result.contents {
        if many {
            match &c.mime_type {
                Some(m) => out.push_str(&format!("--- {} ({m})\n", c.uri)),
                None => out.push_str(&format!("--- {}\n", c.uri)),
            }
        }
        out.push_str(&render::line(&render::resource_contents(c)));
    }
    out
}
