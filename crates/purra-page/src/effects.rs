//! The queue of `unknown` effects (`/effects`, and the fragment the script re-reads): each with
//! when and by which instance it was claimed, the tool and what was sent, and the two ways it
//! changes: an approver's recorded reconciliation (committed or not sent, with evidence) and,
//! when the page runs where an upstream can be reached (`Page::set_resend`), a resend under the
//! same key; elsewhere the page says why resend is unavailable.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::{Path, Request, State};
use axum::response::Response;
use http::request::Parts;
use http::StatusCode;
use purra_core::visible::{one_line, WHO_MAX_CHARS};
use purra_core::{
    ClaimState, EffectOutcome, EffectPage, EffectQuery, EffectView, IdempotencyKey, StoreError,
    MAX_EVIDENCE_BYTES, MAX_PAGE,
};
use serde_json::json;

use crate::guard::{checked, field, list_view};
use crate::render::{self, esc, View};
use crate::respond::{answer, done, store_failed, text};
use crate::Inner;

/// Why this page cannot resend, when no resend was set.
const NO_RESEND: &str = "this page was started without the gateway configuration that binds the \
                         upstreams (purra approvals serve --config FILE, or purra gateway --page), \
                         so it cannot reach them";

/// The longest key a path may name (a digest is far shorter).
const MAX_KEY: usize = 256;

/// The cursor of the page asked for (`?before=KEY`).
fn before(parts: &Parts) -> Result<Option<IdempotencyKey>, &'static str> {
    let query = parts.uri.query().unwrap_or("");
    match form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == "before") {
        None => Ok(None),
        Some((_, k)) if k.is_empty() || k.len() > MAX_KEY => {
            Err("bad request: before must be an effect's key")
        }
        Some((_, k)) => Ok(Some(IdempotencyKey(k.into_owned()))),
    }
}

/// The queue's HTML (the list inside the page, also the fragment).
pub(crate) async fn list_html(page: &Inner, parts: &Parts, csrf: &str) -> Result<String, Response> {
    let before = before(parts).map_err(|m| text(StatusCode::BAD_REQUEST, m))?;
    let limit = u32::try_from(page.config.history_limit)
        .unwrap_or(MAX_PAGE)
        .clamp(1, MAX_PAGE);
    let mut query = EffectQuery::unknown().limit(limit);
    let paged = before.is_some();
    if let Some(k) = before {
        query = query.before(k);
    }
    match page.store.effects(query).await {
        Ok(read) => Ok(render_queue(
            &read,
            paged,
            page.resend.get().is_some(),
            csrf,
        )),
        Err(StoreError::NotFound) => Err(text(
            StatusCode::BAD_REQUEST,
            "bad request: before names no effect",
        )),
        Err(e) => Err(text(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!("the store could not be read: {e}"),
        )),
    }
}

/// `GET /effects`: the queue of unknown effects.
pub(crate) async fn queue(State(page): State<Arc<Inner>>, req: Request) -> Response {
    let (parts, _) = req.into_parts();
    list_view(
        &page,
        &parts,
        "Unknown effects",
        View::Effects,
        false,
        |csrf| {
            let (page, parts) = (&page, &parts);
            async move { list_html(page, parts, &csrf).await }
        },
    )
    .await
}

/// `GET /fragment/effects`: the queue alone, as the script re-reads it.
pub(crate) async fn queue_fragment(State(page): State<Arc<Inner>>, req: Request) -> Response {
    let (parts, _) = req.into_parts();
    list_view(
        &page,
        &parts,
        "Unknown effects",
        View::Effects,
        true,
        |csrf| {
            let (page, parts) = (&page, &parts);
            async move { list_html(page, parts, &csrf).await }
        },
    )
    .await
}

/// `POST /effects/KEY/reconcile`: an approver's decision on an unknown effect, with evidence
/// (same origin, CSRF token), recorded as theirs.
pub(crate) async fn reconcile(
    State(page): State<Arc<Inner>>,
    Path(key): Path<String>,
    req: Request,
) -> Response {
    let (parts, body) = req.into_parts();
    let (page, parts) = (&*page, &parts);
    let (_, s, fields) = match checked(page, parts, body).await {
        Ok(c) => c,
        Err(resp) => return resp,
    };
    let evidence = field(&fields, "evidence").map(str::trim).unwrap_or("");
    if evidence.is_empty() || evidence.len() > MAX_EVIDENCE_BYTES {
        return answer(
            parts,
            StatusCode::BAD_REQUEST,
            &format!("refused: a reconciliation needs evidence (1 to {MAX_EVIDENCE_BYTES} bytes)"),
        );
    }
    let by = format!("{} (approver page)", s.approver);
    let outcome = match field(&fields, "outcome") {
        Some("committed") => EffectOutcome::Committed {
            receipt: json!({"reconciled": {"by": by, "evidence": evidence}}),
        },
        Some("not_started") => EffectOutcome::NotStarted,
        _ => {
            return answer(
                parts,
                StatusCode::BAD_REQUEST,
                "refused: the outcome must be committed or not_started",
            )
        }
    };
    let word = purra_core::stored::outcome_kind(&outcome);
    match page
        .store
        .reconcile_effect(
            IdempotencyKey(key.clone()),
            by,
            evidence.to_owned(),
            outcome,
        )
        .await
    {
        Ok(()) => done(
            parts,
            &format!("{key} reconciled as {word} by {}", s.approver),
            "/effects",
        ),
        Err(StoreError::NotFound) => answer(
            parts,
            StatusCode::NOT_FOUND,
            &format!("not found: no effect {key}"),
        ),
        Err(StoreError::Conflict(why)) => answer(
            parts,
            StatusCode::CONFLICT,
            &format!("conflict: {key}: {why}"),
        ),
        Err(e) => store_failed(parts, &e),
    }
}

/// `POST /effects/KEY/resend`: sends an unknown effect again under the same key through the
/// resend this page was given (the gateway's, which refuses a binding that is not idempotent
/// and a second resend); without one, refused saying why.
pub(crate) async fn resend(
    State(page): State<Arc<Inner>>,
    Path(key): Path<String>,
    req: Request,
) -> Response {
    let (parts, body) = req.into_parts();
    let (page, parts) = (&*page, &parts);
    let (_, s, _) = match checked(page, parts, body).await {
        Ok(c) => c,
        Err(resp) => return resp,
    };
    let Some(resend) = page.resend.get() else {
        return answer(
            parts,
            StatusCode::CONFLICT,
            &format!("refused: resend is unavailable: {NO_RESEND}"),
        );
    };
    let by = format!("{} (approver page)", s.approver);
    match resend(IdempotencyKey(key.clone()), by).await {
        Ok(message) => done(parts, &message, "/effects"),
        Err(message) => answer(parts, StatusCode::CONFLICT, &message),
    }
}

/// The queue: a heading with the count on this page, each effect, and paging.
fn render_queue(read: &EffectPage, paged: bool, can_resend: bool, csrf: &str) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<h2>Unknown effects <span id=\"count\">{}</span></h2>\
         <p class=\"hint\">Whether these calls took effect is unknown; none is ever sent again on \
         its own. Record what independent evidence shows, or resend one under the same \
         idempotency key where its upstream deduplicates by it.</p>",
        read.effects.len()
    );
    if paged {
        out.push_str(
            "<p class=\"paging\"><a href=\"/effects\" id=\"newest\">Newest unknown effects</a></p>",
        );
    }
    if read.effects.is_empty() {
        out.push_str(if paged {
            "<p class=\"empty\" id=\"empty\">No older unknown effect.</p>"
        } else {
            "<p class=\"empty\" id=\"empty\">No effect is unknown.</p>"
        });
    }
    for (n, e) in read.effects.iter().enumerate() {
        effect(&mut out, n, e, can_resend, csrf);
    }
    if let Some(next) = &read.next {
        let _ = write!(
            out,
            "<p class=\"more\" id=\"more\">More unknown effects, older than these: \
             <a href=\"/effects?before={}\" id=\"more-link\">show them</a></p>",
            esc(&form_urlencoded::byte_serialize(next.0.as_bytes()).collect::<String>())
        );
    }
    out
}

/// One effect of the queue; `n` numbers its elements' ids on this page.
fn effect(out: &mut String, n: usize, e: &EffectView, can_resend: bool, csrf: &str) {
    let reason = match &e.state {
        ClaimState::Completed {
            outcome: EffectOutcome::Unknown { reason },
        } => reason.as_str().to_owned(),
        _ => String::new(),
    };
    let tool = e.tool.as_deref().unwrap_or("?");
    let key = esc(&e.key.0);
    let action = esc(&form_urlencoded::byte_serialize(e.key.0.as_bytes()).collect::<String>());
    let _ = write!(
        out,
        "<article class=\"effect\" id=\"effect-{n}\" data-key=\"{key}\"><h3>{}",
        esc(&one_line(tool, WHO_MAX_CHARS))
    );
    if let Some(a) = &e.approval {
        let _ = write!(out, " <a href=\"/approvals/{0}\">{0}</a>", esc(&a.0));
    }
    let _ = write!(
        out,
        "</h3><p>Claimed at {} by instance <b class=\"owner\">{}</b>; unknown: \
         <code class=\"reason\" id=\"reason-{n}\">{}</code>. Key <code>{key}</code>.</p>",
        esc(&render::utc(e.claimed_at)),
        esc(&one_line(&e.owner, WHO_MAX_CHARS)),
        esc(&reason)
    );
    if let Some(args) = &e.arguments {
        let _ = write!(
            out,
            "<h4>Sent</h4><pre class=\"arguments\">{}</pre>",
            esc(&serde_json::to_string_pretty(args).unwrap_or_default())
        );
    }
    let _ = write!(
        out,
        "<form class=\"reconcile\" method=\"post\" action=\"/effects/{action}/reconcile\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
         <label for=\"outcome-{n}\">Outcome</label><select id=\"outcome-{n}\" name=\"outcome\">\
         <option value=\"committed\">committed</option>\
         <option value=\"not_started\">not sent</option></select>\
         <label for=\"evidence-{n}\">Evidence (required)</label>\
         <textarea id=\"evidence-{n}\" name=\"evidence\" rows=\"2\" maxlength=\"{MAX_EVIDENCE_BYTES}\" required></textarea>\
         <div class=\"buttons\"><button type=\"submit\" id=\"reconcile-{n}\">Record</button></div></form>",
        csrf = esc(csrf)
    );
    if can_resend {
        let _ = write!(
            out,
            "<form class=\"reconcile resend\" method=\"post\" action=\"/effects/{action}/resend\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
             <p>Resend under the same key (only where the write's binding or its upstream says \
             the upstream deduplicates by it; once).</p>\
             <div class=\"buttons\"><button type=\"submit\" id=\"resend-{n}\">Resend</button></div></form>",
            csrf = esc(csrf)
        );
    } else {
        let _ = write!(
            out,
            "<p class=\"resend-unavailable\" id=\"resend-unavailable-{n}\">Resend is unavailable \
             here: {}.</p>",
            esc(NO_RESEND)
        );
    }
    out.push_str("</article>");
}
