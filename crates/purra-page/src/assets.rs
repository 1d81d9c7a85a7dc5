//! The page's own script and style sheet, served from the binary.

use axum::response::{IntoResponse, Response};
use http::header;

const SCRIPT: &str = include_str!("page.js");
const STYLE: &str = include_str!("page.css");

/// `GET /page.js`: live updates, time left, decisions without leaving the page.
pub(crate) async fn script() -> Response {
    asset(SCRIPT, "text/javascript; charset=utf-8")
}

/// `GET /page.css`: the style sheet.
pub(crate) async fn style() -> Response {
    asset(STYLE, "text/css; charset=utf-8")
}

fn asset(body: &'static str, kind: &'static str) -> Response {
    ([(header::CONTENT_TYPE, kind)], body).into_response()
}
