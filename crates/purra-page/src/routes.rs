//! The page's routes: one axum route per endpoint; the router answers an unsupported method
//! (405) and an unknown path (404); every request passes the Host and Origin policy, and every
//! answer carries the security headers, both as layers over the whole router.

use std::net::SocketAddr;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use http::{header, HeaderValue, StatusCode};

use crate::respond::{not_found, refusal, text};
use crate::{approvals, assets, catalog, connect_routes, effects, grants, login, oidc, Inner};

/// The Content-Security-Policy of every answer: the page's own script and style only, never in
/// a frame.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The page's router over `page`. The OpenID Connect paths exist only when it is configured.
pub(crate) fn router(page: Arc<Inner>) -> Router {
    let mut routes = Router::new()
        .route("/page.js", get(assets::script))
        .route("/page.css", get(assets::style))
        .route("/login", get(login::sign_in_page).post(login::login))
        .route("/logout", post(login::logout))
        .route("/", get(approvals::pending))
        .route("/history", get(approvals::history))
        .route("/fragment/pending", get(approvals::pending_fragment))
        .route("/fragment/history", get(approvals::history_fragment))
        .route("/events", get(approvals::events))
        .route("/approvals/{id}", get(approvals::one))
        .route("/approvals/{id}/decide", post(approvals::decide))
        .route("/approvals/{id}/reconcile", post(approvals::reconcile))
        .route("/effects", get(effects::queue))
        .route("/fragment/effects", get(effects::queue_fragment))
        .route("/effects/{key}/reconcile", post(effects::reconcile))
        .route("/effects/{key}/resend", post(effects::resend))
        .route("/catalog", get(catalog::list))
        .route("/catalog/{id}/decide", post(catalog::decide))
        .route("/grants", get(grants::list))
        .route("/fragment/grants", get(grants::list_fragment))
        .route("/grants/{id}/revoke", post(grants::revoke));
    if page.config.oidc.is_some() {
        routes = routes
            .route("/login/oidc", get(login::oidc_start))
            .route(oidc::CALLBACK, get(login::oidc_callback));
    }
    if page.config.oauth.is_some() {
        routes = routes
            .route("/connect", get(connect_routes::list))
            .route("/connect/{upstream}", get(connect_routes::start))
            .route(
                "/connect/{upstream}/callback",
                get(connect_routes::callback),
            )
            .route("/connect/{upstream}/revoke", post(connect_routes::revoke));
    }
    routes
        .method_not_allowed_fallback(method_not_allowed)
        .fallback(unknown)
        .layer(middleware::from_fn_with_state(page.clone(), host_policy))
        .layer(middleware::map_response(security_headers))
        .with_state(page)
}

/// A method a path does not serve (the router adds `Allow`, the methods it does).
async fn method_not_allowed() -> Response {
    text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed")
}

/// A path the page does not serve.
async fn unknown() -> Response {
    not_found()
}

/// Every request, whatever its path and method, first passes the MCP endpoints' Host and Origin
/// policy.
async fn host_policy(State(page): State<Arc<Inner>>, req: Request, next: Next) -> Response {
    let (parts, body) = req.into_parts();
    if let Err(e) = page.config.host_policy.check(&parts.uri, &parts.headers) {
        return refusal(&parts, StatusCode::FORBIDDEN, &format!("refused: {e}"));
    }
    next.run(Request::from_parts(parts, body)).await
}

/// The security headers every answer carries (404s, 405s and refusals too), replacing any a
/// handler set.
async fn security_headers(mut resp: Response) -> Response {
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// The page's router for one connection: each request carries the peer's address
/// (`ConnectInfo`), as axum's own connect-info service would put it.
#[derive(Clone)]
pub(crate) struct WithPeer {
    pub(crate) router: axum::Router,
    pub(crate) peer: SocketAddr,
}

impl<B> tower_service::Service<http::Request<B>> for WithPeer
where
    axum::Router: tower_service::Service<http::Request<B>>,
{
    type Response = <axum::Router as tower_service::Service<http::Request<B>>>::Response;
    type Error = <axum::Router as tower_service::Service<http::Request<B>>>::Error;
    type Future = <axum::Router as tower_service::Service<http::Request<B>>>::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        tower_service::Service::<http::Request<B>>::poll_ready(&mut self.router, cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        req.extensions_mut().insert(ConnectInfo(self.peer));
        self.router.call(req)
    }
}
