//! What a request must pass before it is served: its client address, a live session, the same
//! origin and the session's CSRF token for a state-changing request, a bounded form body.

use std::net::{IpAddr, SocketAddr};

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::response::Response;
use http::request::Parts;
use http::{header, StatusCode};

use crate::respond::refusal;
use crate::session::{self, Session};
use crate::{throttle, Inner};

/// The longest request body the page reads (forms are small).
const MAX_BODY: usize = 16 * 1024;

/// Who the request counts as for the per-client bounds: its connection's peer address.
pub(crate) fn client(parts: &Parts) -> IpAddr {
    throttle::client_of(
        parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0),
    )
}

/// The session of the request's cookie, if it is live.
pub(crate) fn session(page: &Inner, parts: &Parts) -> Option<(String, Session)> {
    let id = session::cookie_session(&parts.headers, page.cookies.session)?;
    let s = page.sessions.get(&id)?;
    Some((id, s))
}

/// A state-changing request must come from the page itself: its `Origin`, when sent, is exactly
/// the page's own (`http://` or `https://` and the `Host` the request names), and a browser's
/// `Sec-Fetch-Site` says `same-origin` (or `none`: typed by the user).
pub(crate) fn same_origin(parts: &Parts) -> Result<(), &'static str> {
    if let Some(site) = parts.headers.get("sec-fetch-site") {
        if !matches!(site.to_str(), Ok("same-origin" | "none")) {
            return Err("refused: a cross-site request cannot change anything here");
        }
    }
    if let Some(origin) = parts.headers.get(header::ORIGIN) {
        let host = parts
            .headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        // `https://` too: behind a proxy that terminates TLS the page's origin is that.
        let own = |scheme: &str| format!("{scheme}://{host}");
        let origin = origin.to_str().unwrap_or("");
        if host.is_empty() || (origin != own("http") && origin != own("https")) {
            return Err("refused: the request does not come from this page's origin");
        }
    }
    Ok(())
}

/// Reads a form body (bounded) into its fields.
pub(crate) async fn form(body: Body) -> Result<Vec<(String, String)>, &'static str> {
    let bytes = axum::body::to_bytes(body, MAX_BODY)
        .await
        .map_err(|_| "refused: the form is too large")?;
    Ok(form_urlencoded::parse(&bytes).into_owned().collect())
}

/// The value of the form field `name`, if sent.
pub(crate) fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// A decision form's `verdict` (`true` for approve, `false` for deny) and its trimmed `note` (at
/// most `max_note` characters); the refusal to answer otherwise.
pub(crate) fn verdict_and_note(
    fields: &[(String, String)],
    max_note: usize,
) -> Result<(bool, &str), String> {
    let approve = match field(fields, "verdict") {
        Some("approve") => true,
        Some("deny") => false,
        _ => return Err("refused: the verdict must be approve or deny".to_owned()),
    };
    let note = field(fields, "note").map(str::trim).unwrap_or("");
    if note.chars().count() > max_note {
        return Err(format!("refused: a note is at most {max_note} characters"));
    }
    Ok((approve, note))
}

/// The checks every state-changing request passes: same origin, a live session, its CSRF token.
pub(crate) async fn checked(
    page: &Inner,
    parts: &Parts,
    body: Body,
) -> Result<(String, Session, Vec<(String, String)>), Response> {
    same_origin(parts).map_err(|m| refusal(parts, StatusCode::FORBIDDEN, m))?;
    let Some((id, s)) = session(page, parts) else {
        return Err(refusal(
            parts,
            StatusCode::UNAUTHORIZED,
            "refused: sign in first (no session)",
        ));
    };
    let fields = form(body)
        .await
        .map_err(|m| refusal(parts, StatusCode::PAYLOAD_TOO_LARGE, m))?;
    let csrf_ok = field(&fields, "csrf").is_some_and(|t| session::same_secret(t, &s.csrf));
    if !csrf_ok {
        return Err(refusal(
            parts,
            StatusCode::FORBIDDEN,
            "refused: the form's CSRF token is missing or wrong (reload the page)",
        ));
    }
    Ok((id, s, fields))
}

/// The decision a link preselects: `decision=approve` or `decision=deny` in `query` (anything
/// else preselects nothing). A preselection never decides: the approver confirms.
pub(crate) fn preselected(query: &str) -> Option<&'static str> {
    form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "decision")
        .and_then(|(_, v)| match v.as_ref() {
            "approve" => Some("approve"),
            "deny" => Some("deny"),
            _ => None,
        })
}

/// The longest approval id a sign-in returns to (store ids are `approval-N`).
const MAX_TARGET_ID: usize = 64;

/// Where a sign-in may send the browser afterwards: only an approval's page here,
/// `/approvals/ID` with its preselected decision when it has one; never another site or path
/// (`None`).
pub(crate) fn approval_target(next: &str) -> Option<String> {
    let (path, query) = next.split_once('?').unwrap_or((next, ""));
    let id = path.strip_prefix("/approvals/")?;
    let plain = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
    if id.is_empty() || id.len() > MAX_TARGET_ID || !id.bytes().all(plain) {
        return None;
    }
    Some(match preselected(query) {
        Some(d) => format!("/approvals/{id}?decision={d}"),
        None => format!("/approvals/{id}"),
    })
}

/// The longest `max_age` a sign-in asks for, in seconds (a day; a binding asking more is
/// satisfied by any session, which lives less).
const MAX_AGE_BOUND: u64 = 86_400;

/// What a sign-in resumes: the approval page to return to and the freshness a decision there
/// demands (`max_age`, seconds), from the sign-in page's query or form.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Resume {
    /// The approval page to return to (checked by [`approval_target`]).
    pub(crate) next: Option<String>,
    /// The `max_age` to ask the provider for.
    pub(crate) max_age: Option<u64>,
}

impl Resume {
    /// From `next` and `max_age` in `fields` (a query or a form); what does not check is dropped.
    pub(crate) fn of(fields: &[(String, String)]) -> Resume {
        Resume {
            next: field(fields, "next").and_then(approval_target),
            max_age: field(fields, "max_age")
                .and_then(|v| v.parse::<u64>().ok())
                .map(|v| v.min(MAX_AGE_BOUND)),
        }
    }

    /// From a request's query.
    pub(crate) fn of_query(parts: &Parts) -> Resume {
        let query: Vec<(String, String)> =
            form_urlencoded::parse(parts.uri.query().unwrap_or("").as_bytes())
                .into_owned()
                .collect();
        Resume::of(&query)
    }

    /// The query that carries it (`?next=…&max_age=…`), empty when there is nothing to carry.
    pub(crate) fn query(&self) -> String {
        let mut q = form_urlencoded::Serializer::new(String::new());
        if let Some(next) = &self.next {
            q.append_pair("next", next);
        }
        if let Some(age) = self.max_age {
            q.append_pair("max_age", &age.to_string());
        }
        let q = q.finish();
        if q.is_empty() {
            q
        } else {
            format!("?{q}")
        }
    }
}

/// A signed-in list view (`GET /VIEW` and `GET /fragment/VIEW`): without a live session the page
/// sends the browser to sign in and the fragment answers 401; otherwise `list` (given the
/// session's CSRF token) is the fragment, or the page `title` with it in `<div id="list">` and
/// the sign-out form.
pub(crate) async fn list_view<F, Fut>(
    page: &Inner,
    parts: &Parts,
    title: &str,
    view: crate::render::View,
    fragment: bool,
    list: F,
) -> Response
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = Result<String, Response>>,
{
    use crate::render;
    use crate::respond::{html, see_other, text};
    let Some((_, s)) = session(page, parts) else {
        return if fragment {
            text(StatusCode::UNAUTHORIZED, "sign in first (no session)")
        } else {
            see_other("/login")
        };
    };
    let list = match list(s.csrf.clone()).await {
        Ok(list) => list,
        Err(resp) => return resp,
    };
    if fragment {
        return html(StatusCode::OK, list);
    }
    let main = format!("<div id=\"list\">{list}</div>{}", render::sign_out(&s.csrf));
    html(
        StatusCode::OK,
        render::layout(title, Some(view), Some(&s.approver), &main),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sign-in returns only to an approval's page here, whatever `next` says.
    #[test]
    fn a_sign_in_returns_only_to_an_approvals_page() {
        assert_eq!(
            approval_target("/approvals/approval-7?decision=approve").as_deref(),
            Some("/approvals/approval-7?decision=approve")
        );
        assert_eq!(
            approval_target("/approvals/approval-7?decision=maybe").as_deref(),
            Some("/approvals/approval-7")
        );
        for bad in [
            "https://evil.example/approvals/approval-7",
            "//evil.example/approvals/a",
            "/approvals/../logout",
            "/approvals/a/decide",
            "/approvals/",
            "/effects",
            "/approvals/a%2F..",
        ] {
            assert_eq!(approval_target(bad), None, "{bad}");
        }
        let r = Resume::of(&[
            ("next".into(), "/approvals/approval-2?decision=deny".into()),
            ("max_age".into(), "2".into()),
        ]);
        assert_eq!(
            r.query(),
            "?next=%2Fapprovals%2Fapproval-2%3Fdecision%3Ddeny&max_age=2"
        );
        assert_eq!(Resume::default().query(), "");
    }
}
