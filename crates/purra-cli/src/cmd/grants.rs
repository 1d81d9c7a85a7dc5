//! `purra grants add | list | show | revoke`: standing grants in a store. A grant approves a
//! principal's calls of one write tool, under argument rules, at most N times, until a time; a
//! gateway on the store sends such a call without waiting, taking one use in the transaction
//! that approves it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use purra_core::{GrantId, GrantView, NewGrant};
use serde_json::{json, Value};

use crate::cli::GrantsCommand;
use crate::cmd::{print_json, print_readable, store};
use crate::exit::Failure;

/// Runs one `purra grants` subcommand.
pub async fn run(command: GrantsCommand) -> Result<(), Failure> {
    let args = command.store_args();
    let json_out = args.json;
    let now = SystemTime::now();
    match &command {
        GrantsCommand::Add {
            principal,
            tool,
            rules,
            uses,
            until,
            by,
            note,
            ..
        } => {
            for r in rules {
                purra_gateway::check_grant_rule(r)
                    .map_err(|e| Failure::usage(format!("grants add: --rule {r:?}: {e}")))?;
            }
            let until = parse_until(until, now)
                .map_err(|e| Failure::usage(format!("grants add: --until: {e}")))?;
            let grant = NewGrant {
                principal: principal.clone(),
                tool: tool.clone(),
                rules: rules.clone(),
                max_uses: *uses,
                until,
                granted_by: by.clone(),
                note: note.clone(),
            };
            grant
                .check(now)
                .map_err(|e| Failure::usage(format!("grants add: {e}")))?;
            let (_, db) = store::open_located(args).await?;
            let id = db
                .grants()
                .add_grant(grant)
                .await
                .map_err(|e| store::failure("adding the grant", e))?;
            if json_out {
                print_json(&json!({ "granted": id.0 }));
            } else {
                println!(
                    "{id}: {principal} may call {tool} {uses} time(s) until {}",
                    when(until)
                );
            }
        }
        GrantsCommand::List { .. } => {
            let (location, db) = store::open_located(args).await?;
            let listed = db
                .grants()
                .grants(purra_core::MAX_PAGE)
                .await
                .map_err(|e| store::failure("listing grants", e))?;
            if json_out {
                let all: Vec<Value> = listed.iter().map(|g| grant_json(g, now)).collect();
                print_json(&json!({ "grants": all }));
            } else if listed.is_empty() {
                println!("no grant is stored in {}", location.shown());
            } else {
                let shown = |s: &str| crate::term::for_stdout(s).into_owned();
                let rows: Vec<Vec<String>> = listed
                    .iter()
                    .map(|g| {
                        vec![
                            g.id.0.clone(),
                            shown(&g.grant.principal),
                            shown(&g.grant.tool),
                            format!("{}/{}", g.uses_left(), g.grant.max_uses),
                            when(g.grant.until),
                            g.status(now).to_owned(),
                            shown(&g.grant.granted_by),
                        ]
                    })
                    .collect();
                print!(
                    "{}",
                    crate::render::table(
                        &["ID", "PRINCIPAL", "TOOL", "LEFT", "UNTIL", "STATUS", "BY"],
                        &rows
                    )
                );
            }
        }
        GrantsCommand::Show { id, .. } => {
            let (_, db) = store::open_located(args).await?;
            let g = db
                .grants()
                .grant(GrantId(id.clone()))
                .await
                .map_err(|e| store::failure(&format!("grant {id}"), e))?
                .ok_or_else(|| Failure::store("not_found", format!("unknown grant id: {id}")))?;
            if json_out {
                print_json(&grant_json(&g, now));
            } else {
                let mut out = format!(
                    "{}: {} may call {} ({})\nuses: {} of {} left\nuntil: {}\ngranted by: {} at {}\n",
                    g.id,
                    g.grant.principal,
                    g.grant.tool,
                    g.status(now),
                    g.uses_left(),
                    g.grant.max_uses,
                    when(g.grant.until),
                    g.grant.granted_by,
                    when(g.granted_at)
                );
                for r in &g.grant.rules {
                    out.push_str(&format!("rule: {r}\n"));
                }
                if let Some(n) = &g.grant.note {
                    out.push_str(&format!("note: {n}\n"));
                }
                if let Some((at, by)) = &g.revoked {
                    out.push_str(&format!("revoked by: {by} at {}\n", when(*at)));
                }
                for u in &g.uses {
                    out.push_str(&format!("used: {} at {}\n", u.approval_id.0, when(u.at)));
                }
                print_readable(&out);
            }
        }
        GrantsCommand::Revoke { id, by, .. } => {
            let (_, db) = store::open_located(args).await?;
            db.grants()
                .revoke_grant(
                    GrantId(id.clone()),
                    purra_core::DecisionPath::Cli.approver(by),
                )
                .await
                .map_err(|e| store::failure(&format!("revoking {id}"), e))?;
            if json_out {
                print_json(&json!({ "revoked": id }));
            } else {
                println!("{id} revoked: no call uses it any more");
            }
        }
    }
    Ok(())
}

fn when(t: SystemTime) -> String {
    purra_core::webhook::rfc3339(t)
}

fn grant_json(g: &GrantView, now: SystemTime) -> Value {
    json!({
        "id": g.id.0,
        "principal": g.grant.principal,
        "tool": g.grant.tool,
        "rules": g.grant.rules,
        "maxUses": g.grant.max_uses,
        "used": g.used,
        "usesLeft": g.uses_left(),
        "until": when(g.grant.until),
        "status": g.status(now),
        "grantedBy": g.grant.granted_by,
        "grantedAt": when(g.granted_at),
        "note": g.grant.note,
        "revoked": g.revoked.as_ref().map(|(at, by)| json!({"at": when(*at), "by": by})),
        "uses": g.uses.iter().map(|u| json!({"approval": u.approval_id.0, "at": when(u.at)})).collect::<Vec<_>>(),
    })
}

/// `--until`: a duration from `now` (`8h`, `30m`) or an RFC 3339 time.
fn parse_until(text: &str, now: SystemTime) -> Result<SystemTime, String> {
    if text.starts_with(|c: char| c.is_ascii_digit()) && !text.contains('-') {
        let d: purra_gateway::config::Dur = text.parse()?;
        return now
            .checked_add(d.0)
            .ok_or_else(|| format!("{text:?} is too far"));
    }
    parse_rfc3339(text).ok_or_else(|| {
        format!(
            "expected an RFC 3339 time (2026-12-07T18:00:00Z) or a duration (8h), found {text:?}"
        )
    })
}

/// An RFC 3339 date-time (`YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`).
fn parse_rfc3339(text: &str) -> Option<SystemTime> {
    let b = text.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let s = text.get(r)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let mut rest = &text[19..];
    let mut nanos = 0u32;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let shown = &frac[..digits.min(9)];
        nanos = shown.parse::<u32>().ok()? * 10u32.pow(9 - shown.len() as u32);
        rest = &frac[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            if rest.len() != 6 || rest.as_bytes()[3] != b':' {
                return None;
            }
            let (oh, om) = (num_of(&rest[1..3])?, num_of(&rest[4..6])?);
            sign * (oh * 3600 + om * 60)
        }
    };
    // Days from the civil date (the inverse of the days-to-civil conversion).
    let yy = if mo <= 2 { y - 1 } else { y };
    let era = yy.div_euclid(400);
    let yoe = yy - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + s - offset;
    let secs = u64::try_from(secs).ok()?;
    UNIX_EPOCH.checked_add(Duration::new(secs, nanos))
}

fn num_of(s: &str) -> Option<i64> {
    s.bytes()
        .all(|c| c.is_ascii_digit())
        .then(|| s.parse().ok())?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn until_is_a_duration_or_an_rfc3339_time() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000);
        assert_eq!(
            parse_until("8h", now),
            Ok(now + Duration::from_secs(8 * 3600))
        );
        let t = parse_until("2026-12-07T18:00:00Z", now).unwrap();
        assert_eq!(when(t), "2026-12-07T18:00:00.000000Z");
        let t = parse_until("2026-12-07T20:00:00.5+02:00", now).unwrap();
        assert_eq!(when(t), "2026-12-07T18:00:00.500000Z");
        assert!(parse_until("tomorrow", now).is_err());
        assert!(parse_until("2026-13-07T18:00:00Z", now).is_err());
        assert!(parse_until("8 hours", now).is_err());
    }
}
