//! The approvals' views and actions: the pending and history lists (whole pages and the
//! fragments the script re-reads), one approval's page, the live-update stream, deciding and
//! reconciling.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::extract::{RawPathParams, Request, State};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use http::request::Parts;
use http::StatusCode;
use purra_core::{
    ApprovalId, ApprovalQuery, ApprovalState, ApprovalStatus, ApprovalView, Decision,
    EffectOutcome, StoreError, Verdict, MAX_PAGE,
};
use serde_json::json;

use crate::guard::{
    approval_target, checked, field, preselected, session, verdict_and_note, Resume,
};
use crate::render::{self, Item, Listing, View};
use crate::respond::{answer, done, html, redirect_to, see_other, store_failed, text, wants_json};
use crate::Inner;

/// The longest note kept with a decision, in characters.
const MAX_NOTE: usize = 2000;
/// The longest reconciliation evidence, in bytes (what the store records).
const MAX_EVIDENCE: usize = purra_core::MAX_EVIDENCE_BYTES;
/// A comment on an idle live-update stream this often (and a check that its session still lives).
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The cursor of the page a list request asks for: `?before=ID`, the approvals older than that
/// one (the first page without it). Other parameters are ignored.
fn before(parts: &Parts) -> Result<Option<ApprovalId>, &'static str> {
    let query = parts.uri.query().unwrap_or("");
    let Some((_, id)) = form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == "before")
    else {
        return Ok(None);
    };
    let id = ApprovalId(id.into_owned());
    if purra_core::stored::approval_seq(&id).is_none() {
        return Err("bad request: before must be an approval id such as approval-12");
    }
    Ok(Some(id))
}

/// A page size of the configuration, as a listing's limit.
fn page_size(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(MAX_PAGE).clamp(1, MAX_PAGE)
}

/// One page of `view` before `before`: the newest first, one page at a time (never the whole
/// store). Pending approvals with how many there are in all and how many follow (counted through
/// the store's index of pending approvals, up to one past `COUNTED_UP_TO`: `1000+` beyond); decided ones with their trails and whether older ones
/// follow (one approval read past the page).
async fn listing(
    page: &Inner,
    view: View,
    before: Option<ApprovalId>,
) -> Result<Listing, StoreError> {
    let store = &page.store;
    let paged = before.is_some();
    let (query, limit) = match view {
        View::Pending => (
            ApprovalQuery::all().status(ApprovalStatus::Pending),
            page.config.pending_page,
        ),
        // The effects queue has a listing of its own (`effects`); never asked here.
        View::History | View::Effects | View::Grants => {
            (ApprovalQuery::all().decided(), page.config.history_limit)
        }
    };
    let mut query = query.newest_first().limit(page_size(limit));
    if let Some(id) = before {
        query = query.before(id);
    }
    let read = store.approval_page(query.clone()).await?;
    let mut items = Vec::with_capacity(read.approvals.len());
    // What each card shows beside its approval, read for the whole listing at once.
    let (mut runs, mut trails) = match view {
        View::Pending => {
            let ids = read
                .approvals
                .iter()
                .map(|a| a.request.intent.run_id.clone());
            (store.load_suspended_each(ids.collect()).await?, Vec::new())
        }
        View::History | View::Effects | View::Grants => {
            let ids = read.approvals.iter().map(|a| a.id.clone());
            (Vec::new(), store.approval_audits(ids.collect()).await?)
        }
    };
    runs.reverse();
    trails.reverse();
    for view_of in read.approvals {
        let (trail, run) = (
            trails.pop().unwrap_or_default(),
            runs.pop().unwrap_or_default(),
        );
        let votes = if view_of.request.votes_required().is_some() {
            store.votes(view_of.id.clone()).await?
        } else {
            Vec::new()
        };
        items.push(Item {
            view: view_of,
            trail,
            run,
            votes,
        });
    }
    let (more, total) = match view {
        View::History | View::Effects | View::Grants => (None, None),
        View::Pending => {
            // Counted through the index up to one past COUNTED_UP_TO (shown as `1000+`).
            let up_to = purra_core::COUNTED_UP_TO + 1;
            let more = match &read.next {
                Some(next) => {
                    store
                        .count_approvals_up_to(query.continued(next.clone()), up_to)
                        .await?
                }
                None => 0,
            };
            let total = if paged {
                store
                    .count_approvals_up_to(
                        ApprovalQuery::all().status(ApprovalStatus::Pending),
                        up_to,
                    )
                    .await?
            } else {
                items.len() as u64 + more
            };
            (Some(more), Some(total))
        }
    };
    Ok(Listing {
        items,
        total,
        more,
        next: read.next,
        paged,
    })
}

async fn list_html(
    page: &Inner,
    parts: &Parts,
    view: View,
    csrf: &str,
) -> Result<String, Response> {
    let before = before(parts).map_err(|m| text(StatusCode::BAD_REQUEST, m))?;
    match listing(page, view, before).await {
        Ok(listing) => Ok(render::list(view, &listing, csrf, SystemTime::now())),
        Err(e) => Err(text(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!("the store could not be read: {e}"),
        )),
    }
}

/// `GET /`: the pending approvals' page.
pub(crate) async fn pending(State(page): State<Arc<Inner>>, req: Request) -> Response {
    whole(&page, &req.into_parts().0, View::Pending).await
}

/// `GET /history`: the decided approvals' page.
pub(crate) async fn history(State(page): State<Arc<Inner>>, req: Request) -> Response {
    whole(&page, &req.into_parts().0, View::History).await
}

/// `GET /fragment/pending`: the pending list alone, as the script re-reads it.
pub(crate) async fn pending_fragment(State(page): State<Arc<Inner>>, req: Request) -> Response {
    fragment(&page, &req.into_parts().0, View::Pending).await
}

/// `GET /fragment/history`: the history list alone, as the script re-reads it.
pub(crate) async fn history_fragment(State(page): State<Arc<Inner>>, req: Request) -> Response {
    fragment(&page, &req.into_parts().0, View::History).await
}

/// The approval id in the request's path, as sent (not percent-decoded).
fn id_of(params: &RawPathParams) -> &str {
    params.iter().next().map_or("", |(_, id)| id)
}

async fn whole(page: &Inner, parts: &Parts, view: View) -> Response {
    let Some((_, s)) = session(page, parts) else {
        return see_other("/login");
    };
    match list_html(page, parts, view, &s.csrf).await {
        Ok(list) => {
            let main = format!("<div id=\"list\">{list}</div>{}", render::sign_out(&s.csrf));
            let title = match view {
                View::Pending => "Pending",
                View::History => "History",
                View::Effects => "Unknown effects",
                View::Grants => "Standing grants",
            };
            html(
                StatusCode::OK,
                render::layout(title, Some(view), Some(&s.approver), &main),
            )
        }
        Err(resp) => resp,
    }
}

/// One approval's page (`/approvals/ID`): where webhook events link. 404 for an id that is not
/// an approval's. `?decision=approve|deny` (a notice's button) preselects that decision for the
/// approver to confirm; a GET never decides. Without a session: the sign-in page first, which
/// returns here with the preselection kept.
pub(crate) async fn one(
    State(page): State<Arc<Inner>>,
    params: RawPathParams,
    req: Request,
) -> Response {
    let (parts, _) = req.into_parts();
    let (page, parts) = (&*page, &parts);
    let id = id_of(&params);
    let chosen = preselected(parts.uri.query().unwrap_or(""));
    let Some((_, s)) = session(page, parts) else {
        let resume = Resume {
            next: approval_target(&format!(
                "/approvals/{id}?decision={}",
                chosen.unwrap_or("")
            )),
            max_age: None,
        };
        return redirect_to(&format!("/login{}", resume.query()));
    };
    let id = ApprovalId(id.to_owned());
    let found = match page.store.approval(id.clone()).await {
        Ok(found) => found,
        Err(e) => {
            return text(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("the store could not be read: {e}"),
            )
        }
    };
    let Some(view) = found else {
        return text(StatusCode::NOT_FOUND, "no such approval");
    };
    let read = if view.state == purra_core::ApprovalState::Prepared {
        page.store
            .load_suspended(view.request.intent.run_id.clone())
            .await
            .map(|run| (Vec::new(), run))
    } else {
        page.store
            .approval_audit(id.clone())
            .await
            .map(|trail| (trail, None))
    };
    let (trail, run) = {
        match read {
            Ok(read) => read,
            Err(e) => {
                return text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &format!("the store could not be read: {e}"),
                )
            }
        }
    };
    let votes = if view.request.votes_required().is_some() {
        page.store.votes(view.id.clone()).await.unwrap_or_default()
    } else {
        Vec::new()
    };
    let body = render::one(
        &render::Item {
            view,
            trail,
            run,
            votes,
        },
        &s.csrf,
        SystemTime::now(),
        chosen,
    );
    let main = format!(
        "<div id=\"approval\">{body}</div>{}",
        render::sign_out(&s.csrf)
    );
    html(
        StatusCode::OK,
        render::layout(&id.0, None, Some(&s.approver), &main),
    )
}

async fn fragment(page: &Inner, parts: &Parts, view: View) -> Response {
    let Some((_, s)) = session(page, parts) else {
        return text(StatusCode::UNAUTHORIZED, "sign in first (no session)");
    };
    match list_html(page, parts, view, &s.csrf).await {
        Ok(list) => html(StatusCode::OK, list),
        Err(resp) => resp,
    }
}

/// Server-sent events: one `change` event per store event (its name, or `resync`); the script
/// re-reads the list on each. Ends the moment the session ends (logout, expiry, closed to make
/// room) or the page stops.
pub(crate) async fn events(State(page): State<Arc<Inner>>, req: Request) -> Response {
    let (parts, _) = req.into_parts();
    let (page, parts) = (&page, &parts);
    let Some((sid, s)) = session(page, parts) else {
        return text(StatusCode::UNAUTHORIZED, "sign in first (no session)");
    };
    let Ok(permit) = page.streams.clone().try_acquire_owned() else {
        return text(
            StatusCode::SERVICE_UNAVAILABLE,
            "too many live-update streams are open",
        );
    };
    let expires = s.expires.map(tokio::time::Instant::from_std);
    let state = (page.store.subscribe(), page.clone(), sid, s.ended, permit);
    let stream = futures_util::stream::unfold(
        state,
        move |(mut events, page, sid, ended, permit)| async move {
            let expiry = async move {
                match expires {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            let event = tokio::select! {
                // The session's end wins over an event ready at the same time.
                biased;
                () = page.stop.cancelled() => return None,
                () = ended.cancelled() => return None,
                () = expiry => return None,
                e = events.next() => match e {
                    Some(e) => Event::default().event("change").data(e.to_string()),
                    None => return None,
                },
                () = tokio::time::sleep(KEEP_ALIVE) => {
                    page.sessions.get(&sid)?;
                    Event::default().comment("keep-alive")
                }
            };
            Some((
                Ok::<_, Infallible>(event),
                (events, page, sid, ended, permit),
            ))
        },
    );
    Sse::new(stream).into_response()
}

/// `POST /approvals/ID/decide`: approves or denies (same origin, CSRF token, separation of
/// duties).
pub(crate) async fn decide(
    State(page): State<Arc<Inner>>,
    params: RawPathParams,
    req: Request,
) -> Response {
    let (parts, body) = req.into_parts();
    let (page, parts) = (&*page, &parts);
    let id = id_of(&params);
    let (_, s, fields) = match checked(page, parts, body).await {
        Ok(c) => c,
        Err(resp) => return resp,
    };
    if field(&fields, "verdict") == Some("edit") {
        return edit(page, parts, id, &s, &fields).await;
    }
    let (verdict, note) = match verdict_and_note(&fields, MAX_NOTE) {
        Ok((true, note)) => (Verdict::Approve, note),
        Ok((false, note)) => (Verdict::Deny, note),
        Err(refusal) => return answer(parts, StatusCode::BAD_REQUEST, &refusal),
    };
    let aid = ApprovalId(id.to_owned());
    match view(page, parts, id).await {
        Ok(v) if v.state != ApprovalState::Prepared => {
            return answer(parts, StatusCode::CONFLICT, &already(&v))
        }
        // Separation of duties: the signed-in approver must not be the principal that asked.
        Ok(v) => {
            if let Err(refused) = v.request.check_decider(&s.identity) {
                return answer(
                    parts,
                    StatusCode::FORBIDDEN,
                    &format!("refused: {id}: {refused}"),
                );
            }
            // A workflow's `from` (and `escalate_to` once escalated): the approver by name or
            // identity, or a member of a group (sign-in claim, configured groups).
            if let Err(refused) =
                v.request
                    .check_voter(&[&s.approver, &s.identity], &s.groups, SystemTime::now())
            {
                return answer(
                    parts,
                    StatusCode::FORBIDDEN,
                    &format!("refused: {id}: {refused}"),
                );
            }
            // A binding's `approver_max_age`: the session's sign-in must be that recent, checked
            // here on the decision itself (whatever the page showed).
            if let Some(resp) = fresh_enough(parts, &v, &s, verdict) {
                return resp;
            }
        }
        Err(resp) => return resp,
    }
    let now = SystemTime::now();
    let decision = Decision {
        verdict,
        approver: purra_core::DecisionPath::Page.approver(&s.approver),
        decided_at: now,
        expires_at: (verdict == Verdict::Approve).then(|| now + page.config.approval_ttl),
        note: (!note.is_empty()).then(|| note.to_owned()),
    };
    match (page.decide)(aid.clone(), decision).await {
        Ok(()) => {
            // One vote of a quorum: the approval still waits for more.
            if let Ok(Some(v)) = page.store.approval(aid.clone()).await {
                if let (ApprovalState::Prepared, Some(required)) =
                    (&v.state, v.request.votes_required())
                {
                    let cast = page.store.votes(aid).await.unwrap_or_default();
                    let approving = cast
                        .iter()
                        .filter(|c| c.verdict == Verdict::Approve)
                        .count();
                    let message = format!(
                        "{id}: your vote is recorded, {approving} of {required} votes; the \
                         write is sent once the rest approve"
                    );
                    return done(parts, &message, "/");
                }
            }
            let word = match verdict {
                Verdict::Approve => "approved",
                Verdict::Deny => "denied",
            };
            let message = format!("{id} {word} by {}", s.approver);
            done(parts, &message, "/")
        }
        // Another decision won the race since the state was read.
        Err(StoreError::Conflict("already decided")) => match page.store.approval(aid).await {
            Ok(Some(v)) => answer(parts, StatusCode::CONFLICT, &already(&v)),
            _ => answer(
                parts,
                StatusCode::CONFLICT,
                &format!("conflict: {id} was already decided"),
            ),
        },
        Err(StoreError::Conflict("already voted")) => answer(
            parts,
            StatusCode::CONFLICT,
            &format!(
                "conflict: {id}: {} already voted on it; one approver votes once",
                s.approver
            ),
        ),
        Err(StoreError::Conflict(why)) => answer(
            parts,
            StatusCode::CONFLICT,
            &format!("conflict: {id}: {why}"),
        ),
        Err(e) => store_failed(parts, &e),
    }
}

/// `POST /approvals/ID/decide` with `verdict=edit`: approves with the edited `arguments` (JSON)
/// through the gateway, which checks the edited call as if its caller had sent it. The same
/// checks as an approval first (separation of duties, `approver_max_age`); a refused edit is
/// answered 422 with why, and nothing is decided.
async fn edit(
    page: &Inner,
    parts: &Parts,
    id: &str,
    s: &crate::session::Session,
    fields: &[(String, String)],
) -> Response {
    let note = field(fields, "note").map(str::trim).unwrap_or("");
    if note.chars().count() > MAX_NOTE {
        let why = format!("refused: a note is at most {MAX_NOTE} characters");
        return answer(parts, StatusCode::BAD_REQUEST, &why);
    }
    let text = field(fields, "arguments").unwrap_or("");
    if text.len() > purra_core::MAX_EDIT_BYTES {
        let why = format!(
            "refused: {id}: the edited arguments are over {} bytes",
            purra_core::MAX_EDIT_BYTES
        );
        return answer(parts, StatusCode::UNPROCESSABLE_ENTITY, &why);
    }
    let arguments: serde_json::Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            let why = format!("refused: {id}: the edited arguments are not JSON: {e}");
            return answer(parts, StatusCode::UNPROCESSABLE_ENTITY, &why);
        }
    };
    match view(page, parts, id).await {
        Ok(v) if v.state != ApprovalState::Prepared => {
            return answer(parts, StatusCode::CONFLICT, &already(&v))
        }
        Ok(v) => {
            if !purra_core::allows_edit(&v.request) {
                let why = format!("refused: {id}: this write does not allow edits");
                return answer(parts, StatusCode::FORBIDDEN, &why);
            }
            if let Err(refused) = v.request.check_decider(&s.identity) {
                let why = format!("refused: {id}: {refused}");
                return answer(parts, StatusCode::FORBIDDEN, &why);
            }
            if let Some(resp) = fresh_enough(parts, &v, s, Verdict::Approve) {
                return resp;
            }
        }
        Err(resp) => return resp,
    }
    let Some(edit) = page.edit.get() else {
        let why = format!(
            "refused: {id}: approving with an edit needs the gateway's own page \
             (`purra gateway --page`), which checks the edited call"
        );
        return answer(parts, StatusCode::CONFLICT, &why);
    };
    let now = SystemTime::now();
    let decision = Decision {
        verdict: Verdict::Approve,
        approver: purra_core::DecisionPath::Page.approver(&s.approver),
        decided_at: now,
        expires_at: Some(now + page.config.approval_ttl),
        note: (!note.is_empty()).then(|| note.to_owned()),
    };
    match edit(ApprovalId(id.to_owned()), arguments, decision).await {
        Ok(edited) => {
            let message = format!("{id} approved with edit as {} by {}", edited.0, s.approver);
            done(parts, &message, "/")
        }
        Err(why) => answer(
            parts,
            StatusCode::UNPROCESSABLE_ENTITY,
            &format!("refused: {id}: the edit was not recorded: {why}"),
        ),
    }
}

/// Whether the session's sign-in is recent enough to decide `v` (its binding's
/// `approver_max_age`, carried in the request's labels): `None`, else the refusal. When it is
/// not: refused (401), and a
/// browser's form is sent to sign in again (asking the provider for `max_age`), then back to the
/// approval with its decision preselected. A label that is not seconds refuses every decision.
fn fresh_enough(
    parts: &Parts,
    v: &ApprovalView,
    s: &crate::session::Session,
    verdict: Verdict,
) -> Option<Response> {
    let max_age = match v.request.approver_max_age() {
        Ok(None) => return None,
        Ok(Some(age)) => age,
        Err(why) => {
            return Some(answer(
                parts,
                StatusCode::FORBIDDEN,
                &format!("refused: {}: {why}", v.id.0),
            ))
        }
    };
    let age = SystemTime::now()
        .duration_since(s.signed_in)
        .unwrap_or_default();
    if age <= max_age {
        return None;
    }
    let word = match verdict {
        Verdict::Approve => "approve",
        Verdict::Deny => "deny",
    };
    let resume = Resume {
        next: approval_target(&format!("/approvals/{}?decision={word}", v.id.0)),
        max_age: Some(max_age.as_secs()),
    };
    let again = format!("/login{}", resume.query());
    if wants_json(parts) {
        Some(answer(
            parts,
            StatusCode::UNAUTHORIZED,
            &format!(
                "refused: deciding {} needs a sign-in within the last {} s (yours was {} s ago): \
                 sign in again",
                v.id.0,
                max_age.as_secs(),
                age.as_secs()
            ),
        ))
    } else {
        Some(redirect_to(&again))
    }
}

/// The approval `id`, or the answer saying it is unknown (404) or unreadable (503).
async fn view(page: &Inner, parts: &Parts, id: &str) -> Result<ApprovalView, Response> {
    match page.store.approval(ApprovalId(id.to_owned())).await {
        Ok(Some(v)) => Ok(v),
        Ok(None) => Err(answer(
            parts,
            StatusCode::NOT_FOUND,
            &format!("unknown approval id: {id}"),
        )),
        Err(e) => Err(store_failed(parts, &e)),
    }
}

/// The conflict message for a decided approval: who decided it and how.
fn already(v: &ApprovalView) -> String {
    match render::decision(&v.state) {
        Some(d) => {
            let word = match d.verdict {
                Verdict::Approve => "approved",
                Verdict::Deny => "denied",
            };
            format!(
                "conflict: {} was already decided: {word} by {} ({})",
                v.id.0,
                d.approver,
                v.status()
            )
        }
        None => format!("conflict: {} was already decided", v.id.0),
    }
}

/// `POST /approvals/ID/reconcile`: records an `unknown` outcome's reconciliation, with evidence.
pub(crate) async fn reconcile(
    State(page): State<Arc<Inner>>,
    params: RawPathParams,
    req: Request,
) -> Response {
    let (parts, body) = req.into_parts();
    let (page, parts) = (&*page, &parts);
    let id = id_of(&params);
    let (_, s, fields) = match checked(page, parts, body).await {
        Ok(c) => c,
        Err(resp) => return resp,
    };
    let evidence = field(&fields, "evidence").map(str::trim).unwrap_or("");
    if evidence.is_empty() || evidence.len() > MAX_EVIDENCE {
        return answer(
            parts,
            StatusCode::BAD_REQUEST,
            &format!("refused: a reconciliation needs evidence (1 to {MAX_EVIDENCE} bytes)"),
        );
    }
    let view = match view(page, parts, id).await {
        Ok(v) => v,
        Err(resp) => return resp,
    };
    let outcome = match field(&fields, "outcome") {
        Some("committed") => EffectOutcome::Committed {
            receipt: json!({"reconciled": {"by": s.approver, "evidence": evidence}}),
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
    let Some(claim) = view.claim else {
        return answer(
            parts,
            StatusCode::CONFLICT,
            &format!("conflict: {id} was never dispatched; there is nothing to reconcile"),
        );
    };
    // The audit log keeps who reconciled (on this page), with their evidence.
    match page
        .store
        .reconcile_effect(
            claim.key,
            format!("{} (approver page)", s.approver),
            evidence.to_owned(),
            outcome,
        )
        .await
    {
        Ok(()) => {
            let message = format!("{id} reconciled by {}", s.approver);
            done(parts, &message, "/history")
        }
        Err(StoreError::Conflict(why)) => answer(
            parts,
            StatusCode::CONFLICT,
            &format!("conflict: {id}: {why}"),
        ),
        Err(e) => store_failed(parts, &e),
    }
}
