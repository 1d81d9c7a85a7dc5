//! Standing grants (`/grants`, and the fragment the script re-reads): each grant with whom and
//! which tool it covers, its rules, its uses left and until when, its status, the approvals its
//! uses approved, and a form revoking a live one (recorded as the signed-in approver's, by the
//! page). Grants are made with `purra grants add`; the page lists and revokes them.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::SystemTime;

use axum::extract::{Path, Request, State};
use axum::response::Response;
use http::StatusCode;
use purra_core::visible::{one_line, WHO_MAX_CHARS};
use purra_core::{GrantId, GrantView, StoreError, MAX_PAGE};

use crate::guard::{checked, list_view};
use crate::render::{self, esc, View};
use crate::respond::{answer, done, store_failed, text};
use crate::Inner;

/// Why the page lists no grant when it was given no grant store.
const NO_GRANTS: &str = "this page was started without the store's grants";

/// The list's HTML (inside the page, also the fragment).
pub(crate) async fn list_html(page: &Inner, csrf: &str) -> Result<String, Response> {
    let Some(grants) = page.grants.get() else {
        return Ok(format!(
            "<h2>Standing grants</h2><p class=\"empty\" id=\"empty\">{}.</p>",
            esc(NO_GRANTS)
        ));
    };
    let limit = u32::try_from(page.config.history_limit)
        .unwrap_or(MAX_PAGE)
        .clamp(1, MAX_PAGE);
    let listed = grants.grants(limit).await.map_err(|e| {
        text(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!("the store could not be read: {e}"),
        )
    })?;
    // Each grant's uses (at most a page of grants, each read by its key).
    let mut shown = Vec::with_capacity(listed.len());
    for g in listed {
        let full = grants.grant(g.id.clone()).await.ok().flatten().unwrap_or(g);
        shown.push(full);
    }
    Ok(render_list(&shown, csrf, SystemTime::now()))
}

/// `GET /grants`: the standing grants.
pub(crate) async fn list(State(page): State<Arc<Inner>>, req: Request) -> Response {
    let (parts, _) = req.into_parts();
    list_view(
        &page,
        &parts,
        "Standing grants",
        View::Grants,
        false,
        |csrf| {
            let page = &page;
            async move { list_html(page, &csrf).await }
        },
    )
    .await
}

/// `GET /fragment/grants`: the list alone, as the script re-reads it.
pub(crate) async fn list_fragment(State(page): State<Arc<Inner>>, req: Request) -> Response {
    let (parts, _) = req.into_parts();
    list_view(
        &page,
        &parts,
        "Standing grants",
        View::Grants,
        true,
        |csrf| {
            let page = &page;
            async move { list_html(page, &csrf).await }
        },
    )
    .await
}

/// `POST /grants/ID/revoke`: revokes a grant (same origin, CSRF token), recorded as the
/// signed-in approver's; the next call it would have covered waits for an approval.
pub(crate) async fn revoke(
    State(page): State<Arc<Inner>>,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    let (parts, body) = req.into_parts();
    let (page, parts) = (&*page, &parts);
    let (_, s, _) = match checked(page, parts, body).await {
        Ok(c) => c,
        Err(resp) => return resp,
    };
    let Some(grants) = page.grants.get() else {
        return answer(
            parts,
            StatusCode::CONFLICT,
            &format!("refused: {NO_GRANTS}"),
        );
    };
    let by = format!("{} (page)", s.approver);
    match grants.revoke_grant(GrantId(id.clone()), by).await {
        Ok(()) => done(parts, &format!("{id} revoked by {}", s.approver), "/grants"),
        Err(StoreError::NotFound) => answer(
            parts,
            StatusCode::NOT_FOUND,
            &format!("not found: no grant {id}"),
        ),
        Err(StoreError::Conflict(why)) => answer(
            parts,
            StatusCode::CONFLICT,
            &format!("conflict: {id}: {why}"),
        ),
        Err(e) => store_failed(parts, &e),
    }
}

/// The list: a heading with the count, then each grant.
fn render_list(grants: &[GrantView], csrf: &str, now: SystemTime) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<h2>Standing grants <span id=\"count\">{}</span></h2>\
         <p class=\"hint\">A call inside a live grant is approved by it and sent without waiting; \
         each use is listed with the approval it made. Grants are made with \
         <code>purra grants add</code>.</p>",
        grants.len()
    );
    if grants.is_empty() {
        out.push_str("<p class=\"empty\" id=\"empty\">No grant yet.</p>");
    }
    for g in grants {
        grant(&mut out, g, csrf, now);
    }
    out
}

/// One grant.
fn grant(out: &mut String, g: &GrantView, csrf: &str, now: SystemTime) {
    let id = esc(&g.id.0);
    let status = g.status(now);
    let _ = write!(
        out,
        "<article class=\"grant\" id=\"{id}\" data-status=\"{status}\"><h3>{id}: {} may call {}</h3>\
         <p><b class=\"uses-left\">{}</b> of {} uses left, until {}; granted by {} at {}; \
         <b class=\"status\">{status}</b>.</p>",
        esc(&one_line(&g.grant.principal, WHO_MAX_CHARS)),
        esc(&one_line(&g.grant.tool, WHO_MAX_CHARS)),
        g.uses_left(),
        g.grant.max_uses,
        esc(&render::utc(g.grant.until)),
        esc(&one_line(&g.grant.granted_by, WHO_MAX_CHARS)),
        esc(&render::utc(g.granted_at)),
    );
    for r in &g.grant.rules {
        let _ = write!(out, "<p class=\"rule\">Rule: <code>{}</code></p>", esc(r));
    }
    if let Some(note) = &g.grant.note {
        let _ = write!(out, "<p class=\"note\">Note: {}</p>", esc(note));
    }
    if let Some((at, by)) = &g.revoked {
        let _ = write!(
            out,
            "<p class=\"revoked\">Revoked by {} at {}.</p>",
            esc(&one_line(by, WHO_MAX_CHARS)),
            esc(&render::utc(*at))
        );
    }
    if !g.uses.is_empty() {
        out.push_str("<ul class=\"uses\">");
        for u in &g.uses {
            let _ = write!(
                out,
                "<li><a href=\"/approvals/{0}\">{0}</a> at {1}</li>",
                esc(&u.approval_id.0),
                esc(&render::utc(u.at))
            );
        }
        out.push_str("</ul>");
    }
    if g.revoked.is_none() {
        let _ = write!(
            out,
            "<form class=\"revoke\" method=\"post\" action=\"/grants/{id}/revoke\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
             <div class=\"buttons\"><button type=\"submit\" id=\"revoke-{id}\">Revoke</button></div></form>",
            csrf = esc(csrf)
        );
    }
    out.push_str("</article>");
}
