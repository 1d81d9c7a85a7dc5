//! `purra inspect`: what a server is and offers, from the handshake (or `server/discover`) and its
//! catalogs, and which era and revision the connection speaks.

use purra_protocol::types::{JsonObject, ServerCapabilities};
use purra_protocol::{Connection, ProtocolMode};
use serde_json::{json, Value};

use crate::cli::InspectArgs;
use crate::exit::Failure;
use crate::render;
use crate::status::Status;
use crate::target::{protocol_mode, Target};

/// Runs `purra inspect`.
pub async fn run(args: InspectArgs) -> Result<(), Failure> {
    let positional: Vec<String> = args.target.into_iter().collect();
    let (target, rest) = Target::split(&positional, &args.command)?;
    if let Some(extra) = rest.first() {
        return Err(Failure::usage(format!(
            "unexpected argument {extra:?}: with a command after `--`, inspect takes no URL"
        )));
    }
    let (mode, _) = protocol_mode(&args.connect.protocol_version)?;
    let status = Status::new();
    let conn = target.connect(&args.connect, &status).await?;
    let json = args.connect.json;
    let schemas = args.schemas;
    let out = super::with_status(conn, &status, async |conn, _status| {
        Ok(if json {
            document(conn, &mode)
        } else {
            Value::String(readable(conn, &mode, schemas))
        })
    })
    .await?;
    match out {
        Value::String(text) => super::print_readable(&render::line(&text)),
        doc => super::print_json(&doc),
    }
    Ok(())
}

/// The era the connection speaks (`handshake` or `modern`) and how it was chosen: `auto`, or
/// `pinned` by `--protocol-version`.
fn era_and_choice(conn: &Connection, mode: &ProtocolMode) -> (&'static str, &'static str) {
    let era = if conn.is_modern() {
        "modern"
    } else {
        "handshake"
    };
    let choice = match mode {
        ProtocolMode::Auto => "auto",
        _ => "pinned",
    };
    (era, choice)
}

/// The machine form: server info, the revision spoken, its era (`handshake` or `modern`) and how
/// it was chosen (`auto` or `pinned`), capabilities, instructions and the full catalogs (tools with
/// their schemas).
pub fn document(conn: &Connection, mode: &ProtocolMode) -> Value {
    let (era, choice) = era_and_choice(conn, mode);
    let mut doc = json!({
        "serverInfo": conn.server_info(),
        "protocolVersion": conn.protocol_version(),
        "era": era,
        "protocolChoice": choice,
        "transport": conn.peer().transport(),
        "capabilities": conn.server_capabilities(),
        "instructions": conn.instructions(),
        "tools": *conn.tools(),
        "resources": *conn.resources(),
        "resourceTemplates": *conn.resource_templates(),
        "prompts": *conn.prompts(),
    });
    // The Skills extension's listing, when the server declares it.
    if conn.serves_skills() {
        doc["skills"] = json!(*conn.skills());
    }
    doc
}

/// `name (flag, flag)` for one capability.
fn capability(name: &str, obj: Option<&JsonObject>) -> Option<String> {
    let obj = obj?;
    let flags: Vec<&str> = obj
        .iter()
        .filter(|(_, v)| v.as_bool() == Some(true))
        .map(|(k, _)| k.as_str())
        .collect();
    Some(if flags.is_empty() {
        name.to_owned()
    } else {
        format!("{name} ({})", flags.join(", "))
    })
}

fn capabilities(c: &ServerCapabilities) -> String {
    let all = [
        capability("tools", c.tools.as_ref()),
        capability("resources", c.resources.as_ref()),
        capability("prompts", c.prompts.as_ref()),
        capability("logging", c.logging.as_ref()),
        capability("completions", c.completions.as_ref()),
        capability("tasks", c.tasks.as_ref()),
        capability("experimental", c.experimental.as_ref()),
    ];
    let present: Vec<String> = all.into_iter().flatten().collect();
    if present.is_empty() {
        "none".to_owned()
    } else {
        present.join(", ")
    }
}

/// The first line of a description.
fn first_line(s: Option<&str>) -> &str {
    s.and_then(|d| d.lines().map(str::trim).find(|l| !l.is_empty()))
        .unwrap_or("")
}

/// Rows of `name  text`, the names padded to one width, each under `heading (N):`.
fn section(out: &mut String, heading: &str, rows: &[(String, String)]) {
    out.push_str(&format!("\n{heading} ({}):\n", rows.len()));
    let width = rows
        .iter()
        .map(|(n, _)| n.chars().count())
        .max()
        .unwrap_or(0);
    for (name, text) in rows {
        let row = format!("  {name:<width$}  {text}");
        out.push_str(row.trim_end());
        out.push('\n');
    }
}

/// Indents every line of `s` by `n` spaces.
fn indent(s: &str, n: usize) -> String {
    let pad = " ".repeat(n);
    s.lines().map(|l| format!("{pad}{l}\n")).collect()
}

/// The readable form: server, title, protocol, era and capabilities, then tools (with `schemas`,
/// each tool's input and output schema), resources, resource templates, prompts, the skills (when
/// the server declares the Skills extension: name, `SKILL.md` URI, files and bytes, description),
/// and last the server's instructions.
pub fn readable(conn: &Connection, mode: &ProtocolMode, schemas: bool) -> String {
    let (era, choice) = era_and_choice(conn, mode);
    let info = conn.server_info();
    let mut out = String::new();
    let mut field = |label: &str, value: &str| {
        out.push_str(&format!("{:<14}{value}\n", format!("{label}:")));
    };
    field("server", &format!("{} {}", info.name, info.version));
    if let Some(title) = &info.title {
        field("title", title);
    }
    field("protocol", conn.protocol_version());
    field(
        "era",
        &match choice {
            "auto" => format!("{era} (auto)"),
            _ => format!("{era} (pinned by --protocol-version)"),
        },
    );
    field(
        "transport",
        match conn.peer().transport() {
            "http" => "Streamable HTTP",
            "sse" => "HTTP+SSE (2024-11-05)",
            "ws" => "WebSocket",
            other => other,
        },
    );
    field("capabilities", &capabilities(conn.server_capabilities()));
    if let Some(e) = conn
        .server_capabilities()
        .extensions
        .as_ref()
        .filter(|e| !e.is_empty())
    {
        let names: Vec<&str> = e.keys().map(String::as_str).collect();
        field("extensions", &names.join(", "));
    }

    let tools = conn.tools();
    if schemas {
        out.push_str(&format!("\ntools ({}):\n", tools.len()));
        for t in tools.iter() {
            out.push_str(&format!("  {}", t.name));
            let d = first_line(t.description.as_deref());
            if !d.is_empty() {
                out.push_str(&format!("  {d}"));
            }
            if let Some(ui) = purra_protocol::apps::tool_ui(t) {
                out.push_str(&format!("  [app: {ui}]"));
            }
            out.push('\n');
            out.push_str("    input schema:\n");
            out.push_str(&indent(
                &render::pretty(&Value::Object(t.input_schema.clone())),
                6,
            ));
            if let Some(o) = &t.output_schema {
                out.push_str("    output schema:\n");
                out.push_str(&indent(&render::pretty(&Value::Object(o.clone())), 6));
            }
        }
    } else {
        let rows: Vec<(String, String)> = tools
            .iter()
            .map(|t| {
                let mut text = first_line(t.description.as_deref()).to_owned();
                // A tool bound to an MCP App: `purra read URL UI_URI --save FILE` saves it.
                if let Some(ui) = purra_protocol::apps::tool_ui(t) {
                    text.push_str(&format!("  [app: {ui}]"));
                }
                (t.name.clone(), text)
            })
            .collect();
        section(&mut out, "tools", &rows);
    }

    let rows: Vec<(String, String)> = conn
        .resources()
        .iter()
        .map(|r| {
            let mut text = r.name.clone();
            if let Some(m) = &r.mime_type {
                text.push_str(&format!(" ({m})"));
            }
            let d = first_line(r.description.as_deref());
            if !d.is_empty() {
                text.push_str(&format!("  {d}"));
            }
            (r.uri.clone(), text)
        })
        .collect();
    section(&mut out, "resources", &rows);

    let rows: Vec<(String, String)> = conn
        .resource_templates()
        .iter()
        .map(|t| {
            let mut text = t.name.clone();
            if let Some(m) = &t.mime_type {
                text.push_str(&format!(" ({m})"));
            }
            let d = first_line(t.description.as_deref());
            if !d.is_empty() {
                text.push_str(&format!("  {d}"));
            }
            (t.uri_template.clone(), text)
        })
        .collect();
    section(&mut out, "resource templates", &rows);

    let rows: Vec<(String, String)> = conn
        .prompts()
        .iter()
        .map(|p| {
            let args: Vec<String> = p
                .arguments
                .iter()
                .flatten()
                .map(|a| {
                    if a.required == Some(true) {
                        a.name.clone()
                    } else {
                        format!("{}?", a.name)
                    }
                })
                .collect();
            let name = format!("{}({})", p.name, args.join(", "));
            (name, first_line(p.description.as_deref()).to_owned())
        })
        .collect();
    section(&mut out, "prompts", &rows);

    if conn.serves_skills() {
        let rows: Vec<(String, String)> = conn
            .skills()
            .iter()
            .map(|s| {
                let size = match &s.resources {
                    purra_protocol::skills::SkillResources::Files(_) => {
                        let (n, bytes) = s.totals();
                        format!("{n} file{}, {bytes} bytes", if n == 1 { "" } else { "s" })
                    }
                    purra_protocol::skills::SkillResources::Dynamic => "dynamic".to_owned(),
                };
                let d = first_line(Some(s.description()));
                (s.name().to_owned(), format!("{}  ({size})  {d}", s.uri))
            })
            .collect();
        section(&mut out, "skills", &rows);
    }

    if let Some(instructions) = conn.instructions() {
        out.push_str("\ninstructions:\n");
        for l in instructions.lines() {
            let row = format!("  {l}");
            out.push_str(row.trim_end());
            out.push('\n');
        }
    }
    out
}
