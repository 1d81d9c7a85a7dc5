//! The catalog changes' view and actions (`/catalog`): bound tools an upstream lists differently
//! from their pinned definition (or no longer lists), each with its diff and approve/deny, decided
//! under the signed-in approver's identity; and the latest decided ones.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::SystemTime;

use axum::extract::{RawPathParams, Request, State};
use axum::response::Response;
use http::StatusCode;
use purra_core::pins::definition_diff;
use purra_core::{CatalogChange, CatalogChangeState, CatalogDecision, StoreError};

use crate::guard::{checked, session, verdict_and_note};
use crate::render::{self, esc};
use crate::respond::{answer, done, html, see_other, store_failed, text};
use crate::Inner;

/// The longest note kept with a decision, in characters (as an approval's).
const MAX_NOTE: usize = 1000;
/// How many decided changes the page shows under the pending ones.
const DECIDED_SHOWN: usize = 20;

/// One change's header, diff and (pending) its form.
fn change_html(out: &mut String, c: &CatalogChange, csrf: &str) {
    let id = c.id;
    let _ = write!(
        out,
        "<article class=\"catalog-change\" id=\"change-{id}\" data-id=\"{id}\" data-state=\"{state}\">\
         <h3>{tool} <small>upstream {upstream} · change {id} · {kind}</small></h3>\
         <p>Seen by {seen_by} at {seen_at}.</p>",
        state = c.state.as_str(),
        tool = esc(&c.tool),
        upstream = esc(&c.upstream),
        kind = c.kind.as_str(),
        seen_by = esc(&c.seen_by),
        seen_at = esc(&purra_core::webhook::rfc3339(c.seen_at)),
    );
    out.push_str("<pre class=\"diff\">");
    out.push_str("<span class=\"del\">--- pinned</span>\n");
    let listed = if c.new_definition.is_some() {
        "+++ listed"
    } else {
        "+++ listed (the upstream no longer lists the tool)"
    };
    let _ = writeln!(out, "<span class=\"add\">{listed}</span>");
    for f in definition_diff(&c.old_definition, c.new_definition.as_ref()) {
        let _ = writeln!(out, "<span class=\"hunk\">@@ {} @@</span>", esc(&f.field));
        for l in f.lines {
            let class = match l.sign {
                '+' => "add",
                '-' => "del",
                _ => "ctx",
            };
            let _ = writeln!(
                out,
                "<span class=\"{class}\">{}{}</span>",
                l.sign,
                esc(&l.text)
            );
        }
    }
    out.push_str("</pre>");
    match (&c.state, &c.decided_by, c.decided_at) {
        (CatalogChangeState::Pending, _, _) => {
            let _ = write!(
                out,
                "<form class=\"catalog-decide\" method=\"post\" action=\"/catalog/{id}/decide\">\
                 <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
                 <label for=\"note-change-{id}\">Note (optional)</label>\
                 <textarea id=\"note-change-{id}\" name=\"note\" rows=\"2\" maxlength=\"1000\"></textarea>\
                 <div class=\"buttons\"><button type=\"submit\" name=\"verdict\" value=\"approve\" \
                 id=\"approve-change-{id}\" class=\"approve\">Approve: serve the listed definition</button>\
                 <button type=\"submit\" name=\"verdict\" value=\"deny\" id=\"deny-change-{id}\" \
                 class=\"deny\">Deny: keep the pin</button></div></form>",
                csrf = esc(csrf)
            );
        }
        (state, Some(by), Some(at)) => {
            let _ = write!(
                out,
                "<p class=\"decision\">{} by <b class=\"decided-by\">{}</b> at {}{}</p>",
                state.as_str(),
                esc(by),
                esc(&purra_core::webhook::rfc3339(at)),
                c.note
                    .as_deref()
                    .map(|n| format!(": “{}”", esc(n)))
                    .unwrap_or_default()
            );
        }
        _ => {}
    }
    out.push_str("</article>");
}

/// `GET /catalog`: the pending catalog changes with their diffs, then the latest decided ones.
pub(crate) async fn list(State(page): State<Arc<Inner>>, req: Request) -> Response {
    let (parts, _) = req.into_parts();
    let Some((_, s)) = session(&page, &parts) else {
        return see_other("/login");
    };
    let mut main = String::from("<h2>Catalog changes</h2>");
    match &page.catalog {
        None => main.push_str("<p>This page's store keeps no pinned tool definitions.</p>"),
        Some(pins) => {
            let all = match pins.catalog_changes(false).await {
                Ok(all) => all,
                Err(e) => {
                    return text(
                        StatusCode::SERVICE_UNAVAILABLE,
                        &format!("the store could not be read: {e}"),
                    )
                }
            };
            let (pending, decided): (Vec<_>, Vec<_>) = all
                .iter()
                .partition(|c| c.state == CatalogChangeState::Pending);
            main.push_str("<section id=\"catalog-pending\">");
            if pending.is_empty() {
                main.push_str(
                    "<p class=\"empty\">No catalog change waits: every bound tool is served as \
                     approved.</p>",
                );
            } else {
                let _ = write!(
                    main,
                    "<p>{} bound tool definitions differ from what was approved: each is served \
                     as pinned and not called until it is decided.</p>",
                    pending.len()
                );
                for c in pending {
                    change_html(&mut main, c, &s.csrf);
                }
            }
            main.push_str("</section><section id=\"catalog-decided\"><h2>Decided</h2>");
            for c in decided.into_iter().take(DECIDED_SHOWN) {
                change_html(&mut main, c, &s.csrf);
            }
            main.push_str("</section>");
        }
    }
    main.push_str(&render::sign_out(&s.csrf));
    html(StatusCode::OK, render::layout_catalog(&s.approver, &main))
}

/// `POST /catalog/ID/decide`: approves (re-pins) or denies a catalog change (same origin, CSRF
/// token), recorded under the signed-in approver (`NAME (page)`).
pub(crate) async fn decide(
    State(page): State<Arc<Inner>>,
    params: RawPathParams,
    req: Request,
) -> Response {
    let (parts, body) = req.into_parts();
    let (page, parts) = (&*page, &parts);
    let raw = params.iter().next().map_or("", |(_, id)| id).to_owned();
    let (_, s, fields) = match checked(page, parts, body).await {
        Ok(c) => c,
        Err(resp) => return resp,
    };
    let Some(pins) = &page.catalog else {
        return answer(
            parts,
            StatusCode::NOT_FOUND,
            "this page's store keeps no catalog changes",
        );
    };
    let Ok(id) = raw.parse::<u64>() else {
        return answer(
            parts,
            StatusCode::NOT_FOUND,
            &format!("unknown catalog change: {raw}"),
        );
    };
    let (approve, note) = match verdict_and_note(&fields, MAX_NOTE) {
        Ok(v) => v,
        Err(refusal) => return answer(parts, StatusCode::BAD_REQUEST, &refusal),
    };
    let decision = CatalogDecision {
        approve,
        by: purra_core::DecisionPath::Page.approver(&s.approver),
        note: (!note.is_empty()).then(|| note.to_owned()),
        at: SystemTime::now(),
    };
    match pins.decide_catalog_change(id, decision).await {
        Ok(_) => {
            let message = format!(
                "catalog change {id} {} by {}",
                if approve { "approved" } else { "denied" },
                s.approver
            );
            done(parts, &message, "/catalog")
        }
        Err(StoreError::NotFound) => answer(
            parts,
            StatusCode::NOT_FOUND,
            &format!("unknown catalog change: {id}"),
        ),
        Err(StoreError::Conflict(why)) => answer(
            parts,
            StatusCode::CONFLICT,
            &format!("conflict: catalog change {id}: {why}"),
        ),
        Err(e) => store_failed(parts, &e),
    }
}
