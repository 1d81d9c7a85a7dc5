//! The page's answers: plain text, HTML, redirects, and the JSON-or-HTML answer to a
//! state-changing request.

use axum::response::{IntoResponse, Response};
use http::request::Parts;
use http::{header, HeaderValue, StatusCode};
use purra_core::StoreError;
use serde_json::json;

use crate::render;

/// A plain-text answer.
pub(crate) fn text(status: StatusCode, body: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body.to_owned(),
    )
        .into_response()
}

/// The answer to a path the page does not serve.
pub(crate) fn not_found() -> Response {
    text(StatusCode::NOT_FOUND, "not found")
}

/// An HTML answer.
pub(crate) fn html(status: StatusCode, body: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        body,
    )
        .into_response()
}

/// A redirect to one of the page's own paths.
pub(crate) fn see_other(to: &'static str) -> Response {
    (StatusCode::SEE_OTHER, [(header::LOCATION, to)]).into_response()
}

/// A state-changing request done: `message` as JSON for the script, else back to the page `back`.
pub(crate) fn done(parts: &Parts, message: &str, back: &'static str) -> Response {
    if wants_json(parts) {
        answer(parts, StatusCode::OK, message)
    } else {
        see_other(back)
    }
}

/// A redirect to `to` (500 when it is not a header value).
pub(crate) fn redirect_to(to: &str) -> Response {
    match HeaderValue::from_str(to) {
        Ok(v) => (StatusCode::SEE_OTHER, [(header::LOCATION, v)]).into_response(),
        Err(_) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "a redirect that is not a URL",
        ),
    }
}

/// Whether the client asked for JSON (the page's script does).
pub(crate) fn wants_json(parts: &Parts) -> bool {
    parts
        .headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/json"))
}

/// A refusal or an answer to a state-changing request: JSON `{ok, message}` for the script, a
/// small page for a form posted without it.
pub(crate) fn answer(parts: &Parts, status: StatusCode, message: &str) -> Response {
    if wants_json(parts) {
        let body = json!({"ok": status.is_success(), "message": message}).to_string();
        (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
    } else {
        let title = if status.is_success() {
            "Done"
        } else {
            "Refused"
        };
        html(status, render::message(title, message))
    }
}

/// A refused request, answered as [`answer`] does.
pub(crate) fn refusal(parts: &Parts, status: StatusCode, message: &str) -> Response {
    answer(parts, status, message)
}

/// A store's failure, answered 503.
pub(crate) fn store_failed(parts: &Parts, e: &StoreError) -> Response {
    answer(
        parts,
        StatusCode::SERVICE_UNAVAILABLE,
        &format!("the store failed: {e}"),
    )
}
