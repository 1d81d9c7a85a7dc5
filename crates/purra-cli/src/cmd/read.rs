//! `purra read`: reads one resource and prints its contents.

use purra_protocol::skills::Skill;
use purra_protocol::types::{ReadResourceResult, Resource};
use purra_protocol::{Connection, Error, SkillContent};
use serde_json::json;

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
    let read = super::with_status(conn, &status, async |conn, _status| {
        let failed = |e| Failure::protocol(format!("reading {uri}"), e);
        match skill_of(conn, &uri).await.map_err(failed)? {
            Some(Found::File(skill)) => conn
                .read_skill(&skill, &uri)
                .await
                .map(|c| Read::Skill(Box::new(skill), c))
                .map_err(failed),
            Some(Found::Folder) => conn
                .read_skill_directory(&uri)
                .await
                .map(Read::Folder)
                .map_err(failed),
            None => conn
                .read_resource(&uri)
                .await
                .map(Read::Plain)
                .map_err(failed),
        }
    })
    .await?;
    let result = match read {
        Read::Plain(r) => r,
        Read::Skill(skill, content) => return skill_file(&args, &skill, &content),
        Read::Folder(children) => return folder(&args, &uri, &children),
    };
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

/// What was read.
enum Read {
    /// A resource outside any skill.
    Plain(ReadResourceResult),
    /// A skill's file, verified against the entry.
    Skill(Box<Skill>, SkillContent),
    /// A skill's folder.
    Folder(Vec<Resource>),
}

/// Where a URI is among the server's skills.
enum Found {
    /// A file of this skill (the innermost one holding it).
    File(Skill),
    /// A folder of a listed skill.
    Folder,
}

/// Whether `uri` is a skill's file or folder: a server that declares the Skills extension is
/// asked through it, so what it serves is verified (a `SKILL.md` it does not list is looked up
/// with `skills/get`).
async fn skill_of(conn: &Connection, uri: &str) -> Result<Option<Found>, Error> {
    if !conn.serves_skills() {
        return Ok(None);
    }
    let skills = conn.skills();
    let mut holders: Vec<&Skill> = skills
        .iter()
        .filter(|s| {
            purra_protocol::skills::same_uri(&s.uri, uri)
                || purra_protocol::skills::relative_path(s.root(), uri).is_some()
        })
        .collect();
    holders.sort_by_key(|s| std::cmp::Reverse(s.root().len()));
    if let Some(s) = holders.iter().find(|s| s.file(uri).is_some()) {
        return Ok(Some(Found::File((*s).clone())));
    }
    let is_folder = skills.iter().any(|s| {
        purra_protocol::skills::same_uri(s.root(), uri)
            || s.files().iter().any(|f| {
                f.uri
                    .strip_prefix(uri)
                    .is_some_and(|rest| rest.starts_with('/'))
            })
    });
    if is_folder {
        return Ok(Some(Found::Folder));
    }
    if let Some(s) = holders.first() {
        // Inside a listed skill but not one of its files: refused by the verification.
        return Ok(Some(Found::File((*s).clone())));
    }
    if purra_protocol::skills::skill_root(uri).is_some() {
        return match conn.get_skill(uri).await {
            Ok(s) => Ok(Some(Found::File(s))),
            // Not a skill this server serves: an ordinary resource.
            Err(Error::Rpc(e)) if e.code == purra_protocol::RpcErrorCode::INVALID_PARAMS => {
                Ok(None)
            }
            Err(e) => Err(e),
        };
    }
    Ok(None)
}

/// A verified skill file: its text (a summary for binary content), or `--save`, or `--json`;
/// stderr says what it was checked against.
fn skill_file(args: &ReadArgs, skill: &Skill, c: &SkillContent) -> Result<(), Failure> {
    let entry = skill.file(&c.uri);
    if c.verified {
        eprintln!(
            "verified against the entry of {}: {} bytes, {}",
            crate::term::for_stderr(&skill.uri),
            c.bytes.len(),
            entry.map_or("", |f| f.digest.as_str())
        );
    } else {
        eprintln!(
            "not verified: {} is a \"dynamic\" skill, which publishes no digests",
            crate::term::for_stderr(&skill.uri)
        );
    }
    if let Some(path) = &args.save {
        std::fs::write(path, &c.bytes)
            .map_err(|e| Failure::usage(format!("cannot write {}: {e}", path.display())))?;
        eprintln!("saved {} bytes to {}", c.bytes.len(), path.display());
        return Ok(());
    }
    if args.connect.json {
        use base64::Engine as _;
        let mut doc = json!({
            "uri": c.uri,
            "skill": skill.uri,
            "verified": c.verified,
            "size": c.bytes.len(),
            "digest": entry.map(|f| f.digest.clone()),
            "mimeType": c.mime_type,
        });
        match c.text() {
            Some(t) => doc["text"] = json!(t),
            None => doc["blob"] = json!(base64::engine::general_purpose::STANDARD.encode(&c.bytes)),
        }
        super::print_json(&doc);
        return Ok(());
    }
    match c.text() {
        Some(t) => super::print_readable(&render::line(t)),
        None => super::print_readable(&format!(
            "[{} bytes{}; --save FILE writes them]\n",
            c.bytes.len(),
            c.mime_type
                .as_deref()
                .map(|m| format!(", {m}"))
                .unwrap_or_default()
        )),
    }
    Ok(())
}

/// A skill's folder: one row per child (`URI  (MIME type, size)`), or `--json`.
fn folder(args: &ReadArgs, uri: &str, children: &[Resource]) -> Result<(), Failure> {
    if args.save.is_some() {
        return Err(Failure::usage(format!(
            "{uri} is a folder of a skill: --save takes a file"
        )));
    }
    if args.connect.json {
        super::print_json(&json!({"uri": uri, "resources": children}));
        return Ok(());
    }
    let width = children
        .iter()
        .map(|c| c.uri.chars().count())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for c in children {
        let mut about = c.mime_type.clone().unwrap_or_default();
        if let Some(n) = c.size {
            about.push_str(&format!(", {n} bytes"));
        }
        out.push_str(&format!("{:<width$}  ({about})\n", c.uri));
    }
    super::print_readable(&out);
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
