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
