//! The page's connect routes (present when [`PageConfig::oauth`](crate::PageConfig::oauth) is
//! set): `GET /connect` lists the signed-in user's own connections with a revoke button each,
//! `GET /connect/{upstream}` starts connecting, `GET /connect/{upstream}/callback` finishes,
//! `POST /connect/{upstream}/revoke` revokes. Each but the callback needs a live session; the
//! principal is the session's identity (an OpenID Connect sign-in's `ISSUER#SUBJECT`, as the
//! gateway names it).
//!
//! The callback is a cross-site navigation from the authorization server, which the session
//! cookie (`SameSite=Strict`) does not come with: the connection is bound to the browser that
//! started it by a connect cookie of its own (random, `HttpOnly`, `SameSite=Lax`, `Path=/connect`,
//! 10 minutes), and stored under the principal that started it. When the session cookie does
//! come along, its principal must be that one.

use std::sync::Arc;

use axum::extract::{RawPathParams, Request, State};
use axum::response::Response;
use http::StatusCode;

use crate::guard::{checked, session};
use crate::render::{esc, layout, utc};
use crate::respond::{html, redirect_to, see_other};
use crate::session::{cookie, random_token};
use crate::Inner;

/// The connect cookie's name over plain HTTP.
pub const CONNECT_COOKIE: &str = "purra_page_connect";
/// Its name when the page is reached over TLS (`Secure`).
pub const SECURE_CONNECT_COOKIE: &str = "__Secure-purra_page_connect";

fn connect_cookie(page: &Inner) -> (&'static str, &'static str) {
    if page.config.secure() {
        (SECURE_CONNECT_COOKIE, "; Secure")
    } else {
        (CONNECT_COOKIE, "")
    }
}

fn upstream_of(params: &RawPathParams) -> String {
    params
        .iter()
        .find(|(k, _)| *k == "upstream")
        .map(|(_, v)| v.to_owned())
        .unwrap_or_default()
}

fn message(status: StatusCode, title: &str, text: &str) -> Response {
    html(
        status,
        layout(
            title,
            None,
            None,
            &format!("<h1>{}</h1><p id=\"connect-message\">{}</p><p><a href=\"/connect\">Your connections</a></p>",
                esc(title), esc(text)),
        ),
    )
}

/// `GET /connect`: the signed-in user's connections (upstream, since, expiry), each with a
/// revoke form, and a connect link for each upstream.
pub(crate) async fn list(State(page): State<Arc<Inner>>, req: Request) -> Response {
    let (parts, _) = req.into_parts();
    let Some(connections) = page.config.oauth.clone() else {
        return crate::respond::not_found();
    };
    let Some((_, s)) = session(&page, &parts) else {
        return see_other("/login");
    };
    let mine = match connections.list(&s.identity).await {
        Ok(m) => m,
        Err(e) => return message(StatusCode::SERVICE_UNAVAILABLE, "Connections", &e),
    };
    let mut rows = String::new();
    for c in &mine {
        rows.push_str(&format!(
            "<tr class=\"connection\" data-upstream=\"{u}\"><td>{u}</td><td>{since}</td><td>{exp}</td>\
             <td><form method=\"post\" action=\"/connect/{u}/revoke\"><input type=\"hidden\" \
             name=\"csrf\" value=\"{csrf}\"><button type=\"submit\">Revoke</button></form></td></tr>",
            u = esc(&c.key.upstream),
            since = utc(c.created_at),
            exp = c.meta.expires_at.map(utc).unwrap_or_else(|| "—".into()),
            csrf = esc(&s.csrf),
        ));
    }
    let mut links = String::new();
    for u in connections.upstreams() {
        links.push_str(&format!(
            "<li><a href=\"/connect/{id}\">Connect to {id}</a></li>",
            id = esc(&u.id)
        ));
    }
    html(
        StatusCode::OK,
        layout(
            "Connections",
            None,
            Some(&s.approver),
            &format!(
                "<h1>Your connections</h1><table id=\"connections\"><tr><th>Upstream</th>\
                 <th>Since</th><th>Access token expires</th><th></th></tr>{rows}</table>\
                 <ul>{links}</ul>"
            ),
        ),
    )
}

/// `GET /connect/{upstream}`: sends the signed-in user to the upstream's authorization server.
pub(crate) async fn start(
    State(page): State<Arc<Inner>>,
    params: RawPathParams,
    req: Request,
) -> Response {
    let (parts, _) = req.into_parts();
    let Some(connections) = page.config.oauth.clone() else {
        return crate::respond::not_found();
    };
    let Some((_, s)) = session(&page, &parts) else {
        return see_other("/login");
    };
    let upstream = upstream_of(&params);
    if !connections.upstreams().iter().any(|u| u.id == upstream) {
        return message(
            StatusCode::NOT_FOUND,
            "Cannot connect",
            &format!("No upstream {upstream:?} takes connections here."),
        );
    }
    let browser = random_token();
    match connections.start(&s.identity, &browser, &upstream).await {
        Ok(url) => {
            let mut resp = redirect_to(&url);
            let (name, secure) = connect_cookie(&page);
            let set = format!(
                "{name}={browser}; Path=/connect; HttpOnly; SameSite=Lax; Max-Age={}{secure}",
                crate::connect::PENDING_TTL.as_secs()
            );
            if let Ok(v) = http::HeaderValue::from_str(&set) {
                resp.headers_mut().append(http::header::SET_COOKIE, v);
            }
            resp
        }
        Err(e) => message(StatusCode::BAD_GATEWAY, "Cannot connect", &e),
    }
}

/// `GET /connect/{upstream}/callback`: checks state and session, redeems the code, stores the
/// connection.
pub(crate) async fn callback(
    State(page): State<Arc<Inner>>,
    params: RawPathParams,
    req: Request,
) -> Response {
    let (parts, _) = req.into_parts();
    let Some(connections) = page.config.oauth.clone() else {
        return crate::respond::not_found();
    };
    let (name, secure) = connect_cookie(&page);
    let Some(browser) = cookie(&parts.headers, name) else {
        return message(
            StatusCode::BAD_REQUEST,
            "Not connected",
            "This connection was not started in this browser: start again from the page.",
        );
    };
    let signed_in = session(&page, &parts).map(|(_, s)| s.identity);
    let upstream = upstream_of(&params);
    let query = parts.uri.query().unwrap_or("");
    if query.len() > 8 * 1024 {
        return message(
            StatusCode::BAD_REQUEST,
            "Not connected",
            "The callback is too long.",
        );
    }
    let mut resp = match connections
        .finish(signed_in.as_deref(), &browser, &upstream, query)
        .await
    {
        Ok(_) => message(
            StatusCode::OK,
            "Connected",
            &format!("You are connected to {upstream}."),
        ),
        Err(e) => message(StatusCode::BAD_REQUEST, "Not connected", &e),
    };
    // One use: the cookie goes.
    let clear = format!("{name}=; Path=/connect; HttpOnly; SameSite=Lax; Max-Age=0{secure}");
    if let Ok(v) = http::HeaderValue::from_str(&clear) {
        resp.headers_mut().append(http::header::SET_COOKIE, v);
    }
    resp
}

/// `POST /connect/{upstream}/revoke`: revokes the signed-in user's connection.
pub(crate) async fn revoke(
    State(page): State<Arc<Inner>>,
    params: RawPathParams,
    req: Request,
) -> Response {
    let (parts, body) = req.into_parts();
    let Some(connections) = page.config.oauth.clone() else {
        return crate::respond::not_found();
    };
    let (_, s, _) = match checked(&page, &parts, body).await {
        Ok(c) => c,
        Err(resp) => return resp,
    };
    let upstream = upstream_of(&params);
    match connections.revoke(&s.identity, &upstream).await {
        Ok((true, None)) => message(StatusCode::OK, "Revoked", &format!("Your connection to {upstream} is revoked.")),
        Ok((true, Some(e))) => message(
            StatusCode::OK,
            "Revoked",
            &format!("Your connection to {upstream} is deleted here; the authorization server's revocation failed: {e}"),
        ),
        Ok((false, _)) => message(StatusCode::NOT_FOUND, "Not connected", &format!("You have no connection to {upstream}.")),
        Err(e) => message(StatusCode::SERVICE_UNAVAILABLE, "Not revoked", &e),
    }
}
