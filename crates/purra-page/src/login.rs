//! Signing in and out: the sign-in page, access tokens (with their backoff), OpenID Connect's
//! start and callback, the session and pre-login cookies, signing out.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::extract::{Request, State};
use axum::response::Response;
use http::{header, HeaderValue, StatusCode};

use crate::guard::{checked, client, field, form, same_origin, Resume};
use crate::respond::{html, not_found, redirect_to, see_other};
use crate::{oidc, render, session, Inner};

/// The cookies' names and their `Secure` attribute, plain or for a page reached over TLS.
pub(crate) struct Cookies {
    /// The session cookie's name.
    pub(crate) session: &'static str,
    /// The pre-login cookie's name.
    login: &'static str,
    /// The attributes the cookies add (`; Secure` over TLS).
    secure: &'static str,
}

impl Cookies {
    /// The cookies of a page reached over TLS (`secure`) or not.
    pub(crate) fn new(secure: bool) -> Cookies {
        if secure {
            Cookies {
                session: session::SECURE_COOKIE,
                login: oidc::SECURE_LOGIN_COOKIE,
                secure: "; Secure",
            }
        } else {
            Cookies {
                session: session::COOKIE,
                login: oidc::LOGIN_COOKIE,
                secure: "",
            }
        }
    }
}

/// `GET /login`: the sign-in page (`?next=/approvals/ID…&max_age=N`: returning to that
/// approval, asking the provider for a sign-in no older than N seconds).
pub(crate) async fn sign_in_page(State(page): State<Arc<Inner>>, req: Request) -> Response {
    let resume = Resume::of_query(&req.into_parts().0);
    login_page_to(&page, StatusCode::OK, None, &resume)
}

/// The sign-in page with what this page offers, and `message` above it.
fn login_page(page: &Inner, status: StatusCode, message: Option<&str>) -> Response {
    login_page_to(page, status, message, &Resume::default())
}

/// The sign-in page that resumes `resume` once signed in.
fn login_page_to(
    page: &Inner,
    status: StatusCode,
    message: Option<&str>,
    resume: &Resume,
) -> Response {
    let label = page.config.oidc.as_ref().map(|o| o.label.as_str());
    html(
        status,
        render::login(message, page.config.token_login, label, resume),
    )
}

/// The session cookie of a new session for `approver` whose identity (what separation of duties
/// compares) is `identity`.
fn session_cookie(
    page: &Inner,
    approver: &str,
    identity: &str,
    signed_in: SystemTime,
    mut groups: Vec<String>,
) -> Option<HeaderValue> {
    for g in page.config.groups_of(approver) {
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    let id = page.sessions.open_in(approver, identity, signed_in, groups);
    let cookie = format!(
        "{}={id}; Path=/{}; HttpOnly; SameSite=Strict; Max-Age={}",
        page.cookies.session,
        page.cookies.secure,
        page.config.session_ttl.as_secs()
    );
    HeaderValue::from_str(&cookie).ok()
}

/// `POST /login`: signs in with an access token, bounded per client address.
pub(crate) async fn login(State(page): State<Arc<Inner>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let (page, parts) = (&*page, &parts);
    if !page.config.token_login {
        return login_page(
            page,
            StatusCode::FORBIDDEN,
            Some("Sign-in with an access token is turned off here."),
        );
    }
    if let Err(m) = same_origin(parts) {
        return login_page(page, StatusCode::FORBIDDEN, Some(m));
    }
    // An address backing off is refused before its token is even read: no answer tells it
    // whether a token it sends now is right.
    let client = client(parts);
    if let Err(wait) = page.throttle.check(client, Instant::now()) {
        let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        let secs = secs.max(1);
        let mut resp = login_page(
            page,
            StatusCode::TOO_MANY_REQUESTS,
            Some(&format!(
                "Too many wrong access tokens from your address: try again in {secs} s."
            )),
        );
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        return resp;
    }
    let fields = match form(body).await {
        Ok(f) => f,
        Err(m) => return login_page(page, StatusCode::PAYLOAD_TOO_LARGE, Some(m)),
    };
    let given = field(&fields, "token").unwrap_or("").trim();
    // Every token is compared, so the time taken does not tell which approver nearly matched.
    let mut found = None;
    for (approver, token) in &page.tokens {
        if session::same_secret(given, token) {
            found = Some(approver.clone());
        }
    }
    let Some(approver) = found else {
        page.throttle.failed(client, Instant::now());
        return login_page(
            page,
            StatusCode::UNAUTHORIZED,
            Some("That access token is not valid."),
        );
    };
    page.throttle.succeeded(client);
    // Back to the approval a link opened, when the sign-in came from one.
    let mut resp = match Resume::of(&fields).next {
        Some(next) => redirect_to(&next),
        None => see_other("/"),
    };
    // A token approver's identity is its name; presenting the token is the sign-in.
    if let Some(v) = session_cookie(page, &approver, &approver, SystemTime::now(), Vec::new()) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    resp
}

/// Starts a sign-in with the provider: remembers its `state`, `nonce` and PKCE verifier, bound to
/// this browser by a pre-login cookie, and sends the browser to the provider. A browser that
/// reached the page under another name than the callback's is first sent to that name, so the
/// cookie and the callback meet.
pub(crate) async fn oidc_start(State(page): State<Arc<Inner>>, req: Request) -> Response {
    let (parts, _) = req.into_parts();
    let (page, parts) = (&*page, &parts);
    let Some(redirect_uri) = page.redirect_uri.get() else {
        return login_page(
            page,
            StatusCode::SERVICE_UNAVAILABLE,
            Some("Sign-in with the provider is not ready: the page has no callback address."),
        );
    };
    let callback = redirect_uri.parse::<http::Uri>().ok();
    let own = callback
        .as_ref()
        .and_then(|u| u.authority())
        .map(|a| a.as_str());
    let host = parts
        .headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok());
    // Only for a callback on a loopback address (the page's own, typically): behind a proxy the
    // Host the page sees may differ from the public name by design, and sending the browser
    // there again would loop.
    let loopback = callback
        .as_ref()
        .and_then(|u| u.host())
        .is_some_and(|h| h == "127.0.0.1" || h == "[::1]" || h == "localhost");
    let resume = Resume::of_query(parts);
    if let (Some(own), Some(u), true) = (own, &callback, loopback) {
        if host != Some(own) {
            let to = format!(
                "{}://{own}/login/oidc{}",
                u.scheme_str().unwrap_or("http"),
                resume.query()
            );
            return redirect_to(&to);
        }
    }
    let provider = match page.provider().await {
        Ok(p) => p,
        Err(e) => {
            return login_page(
                page,
                StatusCode::SERVICE_UNAVAILABLE,
                Some(&format!("The sign-in provider cannot be used now: {e}")),
            )
        }
    };
    // A decision that needs a fresh sign-in asks the provider for one (`max_age`), and the
    // ID token's `auth_time` is checked against it.
    let (url, login) =
        provider.begin_with_max_age(redirect_uri, resume.max_age.map(Duration::from_secs));
    let browser = page.pending.start(login, client(parts), resume.next);
    let mut resp = redirect_to(url.as_str());
    // Lax, not Strict: it must come back with the provider's redirect, a cross-site navigation.
    let cookie = format!(
        "{}={browser}; Path=/login{}; HttpOnly; SameSite=Lax; Max-Age={}",
        page.cookies.login,
        page.cookies.secure,
        oidc::LOGIN_TTL.as_secs()
    );
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    resp
}

/// Ends a sign-in with the provider on the browser's side: its pre-login cookie goes.
fn clear_login_cookie(page: &Inner, mut resp: Response) -> Response {
    let clear = format!(
        "{}=; Path=/login{}; HttpOnly; SameSite=Lax; Max-Age=0",
        page.cookies.login, page.cookies.secure
    );
    if let Ok(v) = HeaderValue::from_str(&clear) {
        resp.headers_mut().append(header::SET_COOKIE, v);
    }
    resp
}

/// The provider's redirect back: the `state` must be a live sign-in started by this browser
/// (single use), the code is exchanged and the ID token checked, and the person must be on the
/// allow-list; then the same session as a token sign-in opens, in the person's name.
pub(crate) async fn oidc_callback(State(page): State<Arc<Inner>>, req: Request) -> Response {
    let (parts, _) = req.into_parts();
    let (page, parts) = (&*page, &parts);
    let Some(o) = &page.config.oidc else {
        return not_found();
    };
    let query: Vec<(String, String)> =
        form_urlencoded::parse(parts.uri.query().unwrap_or("").as_bytes())
            .into_owned()
            .collect();
    // The sign-in is over either way: the pre-login cookie goes.
    let refused = |status: StatusCode, message: &str| {
        clear_login_cookie(page, login_page(page, status, Some(message)))
    };
    let Some(state) = field(&query, "state") else {
        return refused(
            StatusCode::BAD_REQUEST,
            "Refused: the sign-in came back without its state.",
        );
    };
    let (login, next) = match page.pending.take(
        state,
        session::cookie(&parts.headers, page.cookies.login).as_deref(),
    ) {
        Ok(l) => l,
        Err(oidc::StateRefusal::Unknown) => {
            return refused(
                StatusCode::BAD_REQUEST,
                "Refused: this sign-in is unknown, expired or already used. Start again.",
            )
        }
        Err(oidc::StateRefusal::OtherBrowser) => {
            return refused(
                StatusCode::BAD_REQUEST,
                "Refused: this sign-in was not started in this browser. Start again.",
            )
        }
    };
    if let Some(error) = field(&query, "error") {
        let error: String = error.chars().filter(|c| !c.is_control()).take(64).collect();
        return refused(
            StatusCode::UNAUTHORIZED,
            &format!("The provider did not sign you in: {error}."),
        );
    }
    let Some(code) = field(&query, "code") else {
        return refused(
            StatusCode::BAD_REQUEST,
            "Refused: the sign-in came back without a code.",
        );
    };
    let provider = match page.provider().await {
        Ok(p) => p,
        Err(e) => {
            return refused(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("The sign-in provider cannot be used now: {e}"),
            )
        }
    };
    let who = match provider.finish(&login, code, field(&query, "iss")).await {
        Ok(who) => who,
        Err(e) => return refused(StatusCode::UNAUTHORIZED, &format!("Refused: {e}.")),
    };
    let approver = oidc::approver_name(&who);
    if !o.allow.admits(&who) {
        return refused(
            StatusCode::FORBIDDEN,
            &format!("Refused: {approver} may not approve here."),
        );
    }
    let mut resp = html(
        StatusCode::OK,
        render::signed_in(&approver, next.as_deref()),
    );
    let identity = purra_core::principal_name(&who.issuer, &who.subject);
    // When the person proved who they are: the ID token's `auth_time` (checked against any
    // `max_age` asked), else now.
    let signed_in = who
        .claims
        .get("auth_time")
        .and_then(serde_json::Value::as_u64)
        .map_or_else(SystemTime::now, |t| UNIX_EPOCH + Duration::from_secs(t))
        .min(SystemTime::now());
    // The approver groups the provider says the approver belongs to (bounded: at most 64
    // names of at most 256 bytes each are kept).
    let groups: Vec<String> = match who.claims.get(&page.config.groups_claim) {
        Some(serde_json::Value::Array(list)) => list
            .iter()
            .filter_map(serde_json::Value::as_str)
            .filter(|g| !g.is_empty() && g.len() <= 256)
            .take(64)
            .map(str::to_owned)
            .collect(),
        Some(serde_json::Value::String(g)) if !g.is_empty() && g.len() <= 256 => vec![g.clone()],
        _ => Vec::new(),
    };
    if let Some(v) = session_cookie(page, &approver, &identity, signed_in, groups) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    clear_login_cookie(page, resp)
}

/// `POST /logout`: ends the session (same origin, CSRF token) and clears its cookie.
pub(crate) async fn logout(State(page): State<Arc<Inner>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let (page, parts) = (&*page, &parts);
    match checked(page, parts, body).await {
        Ok((id, _, _)) => {
            page.sessions.close(&id);
            let mut resp = see_other("/login");
            let cookie = format!(
                "{}=; Path=/{}; HttpOnly; SameSite=Strict; Max-Age=0",
                page.cookies.session, page.cookies.secure
            );
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                resp.headers_mut().insert(header::SET_COOKIE, v);
            }
            resp
        }
        Err(resp) => resp,
    }
}
