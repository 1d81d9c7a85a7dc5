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
    if let Some(path) = &args.save {
        return save(&result, path);
    }
    if args.connect.json {
        super::print_json(&serde_json::to_value(&result).unwrap_or_default());
    } else {
        super::print_readable(&readable(&result));
    }
    Ok(())
}

/// Writes the one content's bytes to `path`; says what it wrote on stderr.
fn save(result: &ReadResourceResult, path: &std::path::Path) -> Result<(), Failure> {
    use base64::Engine as _;
    let [c] = result.contents.as_slice() else {
        return Err(Failure::usage(format!(
            "--save takes a resource with one content; this one has {}",
            result.contents.len()
        )));
    };
    let bytes = match (&c.text, &c.blob) {
        (Some(t), _) => t.as_bytes().to_vec(),
        (None, Some(b)) => base64::engine::general_purpose::STANDARD
            .decode(b)
            .map_err(|e| Failure::usage(format!("the resource's blob is not base64: {e}")))?,
        (None, None) => Vec::new(),
    };
    std::fs::write(path, &bytes)
        .map_err(|e| Failure::usage(format!("cannot write {}: {e}", path.display())))?;
    eprintln!(
        "saved {} bytes{} to {}",
        bytes.len(),
        c.mime_type
            .as_deref()
            .map(|m| format!(" ({})", crate::term::for_stderr(m)))
            .unwrap_or_default(),
        path.display()
    );
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
