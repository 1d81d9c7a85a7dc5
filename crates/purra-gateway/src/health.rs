//! Health for load balancers and orchestrators, on the gateway's HTTP listener beside `/mcp`:
//!
//! - `GET /healthz`: the process is up and serving HTTP (`200 ok`), whatever else is true;
//! - `GET /readyz`: it should be sent calls: `200` when the store answers (one read, within
//!   [`STORE_PROBE_TIMEOUT`]), every upstream is connected and discovered, and the gateway is not
//!   draining; `503` otherwise. The body says which, as JSON:
//!   `{"ready":true,"draining":false,"revision":1,"store":"ok","upstreams":{"values":"ok"}}`
//!   (`"down"` for an upstream being reconnected, the failure for the store).
//!
//! Both answer without authentication (they say nothing about calls or callers) and before the
//! Host check of the MCP endpoint (a load balancer's check names the instance's address). HAProxy
//! uses `/readyz` (`option httpchk GET /readyz`): an instance that drains, lost its store or an
//! upstream gets no new session, and its sessions move to others when it dies.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use http::{header, Request, Response, StatusCode};
use serde_json::{json, Value};

use crate::gateway::Gateway;

/// How long `/readyz` waits for the store's answer before it says the store is not reachable.
pub const STORE_PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The path of the liveness check.
pub const HEALTHZ: &str = "/healthz";

/// The path of the readiness check.
pub const READYZ: &str = "/readyz";

/// Whether a gateway should be sent calls, and why not ([`Gateway::readiness`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Readiness {
    /// Ready: the store answers, every upstream is discovered, not draining.
    pub ready: bool,
    /// Whether the gateway is draining ([`Gateway::drain`]).
    pub draining: bool,
    /// The configuration's revision: 1 at start, one more for each reload.
    pub revision: u64,
    /// `Ok` when the store answered a read in time, else why not.
    pub store: Result<(), String>,
    /// Each upstream by id: whether it is connected with its bindings discovered.
    pub upstreams: BTreeMap<String, bool>,
}

impl Readiness {
    /// The JSON body of `/readyz`.
    pub fn to_json(&self) -> Value {
        let upstreams: serde_json::Map<String, Value> = self
            .upstreams
            .iter()
            .map(|(id, up)| (id.clone(), json!(if *up { "ok" } else { "down" })))
            .collect();
        json!({
            "ready": self.ready,
            "draining": self.draining,
            "revision": self.revision,
            "store": match &self.store {
                Ok(()) => "ok".to_owned(),
                Err(why) => why.clone(),
            },
            "upstreams": upstreams,
        })
    }
}

impl Gateway {
    /// Whether this gateway should be sent calls now (what `/readyz` answers).
    pub async fn readiness(&self) -> Readiness {
        let inner = &self.inner;
        let catalog = inner.catalog();
        let upstreams: BTreeMap<String, bool> = catalog
            .upstreams
            .iter()
            .map(|(id, u)| {
                let up = u.live().is_some_and(|l| !l.conn.peer().is_closed());
                (id.clone(), up)
            })
            .collect();
        let store = match tokio::time::timeout(STORE_PROBE_TIMEOUT, inner.store.ping()).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(format!("the store failed: {e}")),
            Err(_) => Err(format!(
                "the store did not answer within {} s",
                STORE_PROBE_TIMEOUT.as_secs()
            )),
        };
        let draining = inner.drain.is_draining();
        Readiness {
            ready: !draining && store.is_ok() && upstreams.values().all(|up| *up),
            draining,
            revision: catalog.revision,
            store,
            upstreams,
        }
    }

    /// `service` (the MCP endpoint, perhaps behind its guard) with `/healthz` and `/readyz` in
    /// front of it; with `endpoint`, any other path than it is answered `404` (the standalone
    /// server's rule), else everything else goes to `service`.
    pub fn with_health<S>(&self, service: S, endpoint: Option<&str>) -> HealthService<S> {
        HealthService {
            gateway: self.clone(),
            inner: service,
            endpoint: endpoint.map(Arc::from),
        }
    }
}

/// A tower service answering `/healthz` and `/readyz` itself and everything else with the service
/// it wraps ([`Gateway::with_health`]).
#[derive(Clone)]
pub struct HealthService<S> {
    gateway: Gateway,
    inner: S,
    endpoint: Option<Arc<str>>,
}

impl<S> std::fmt::Debug for HealthService<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HealthService")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

/// The future of [`HealthService`]: the wrapped service's, or a health answer.
pub enum HealthFuture<F> {
    /// The wrapped service answers.
    Inner(F),
    /// A health check (or a 404) answers.
    Own(Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>),
}

impl<F> std::fmt::Debug for HealthFuture<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HealthFuture::Inner(_) => "HealthFuture::Inner",
            HealthFuture::Own(_) => "HealthFuture::Own",
        })
    }
}

impl<F> Future for HealthFuture<F>
where
    F: Future<Output = Result<Response<Body>, Infallible>> + Unpin,
{
    type Output = Result<Response<Body>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            HealthFuture::Inner(f) => Pin::new(f).poll(cx),
            HealthFuture::Own(f) => f.as_mut().poll(cx),
        }
    }
}

fn plain(status: StatusCode, body: &'static str) -> Response<Body> {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

impl<S, B> tower_service::Service<Request<B>> for HealthService<S>
where
    S: tower_service::Service<Request<B>, Response = Response<Body>, Error = Infallible>,
    S::Future: Unpin,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = HealthFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let path = req.uri().path();
        let get = req.method() == http::Method::GET || req.method() == http::Method::HEAD;
        if path == HEALTHZ || path == READYZ {
            if !get {
                let r = plain(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
                return HealthFuture::Own(Box::pin(std::future::ready(Ok(r))));
            }
            if path == HEALTHZ {
                return HealthFuture::Own(Box::pin(std::future::ready(Ok(plain(
                    StatusCode::OK,
                    "ok\n",
                )))));
            }
            let gateway = self.gateway.clone();
            return HealthFuture::Own(Box::pin(async move {
                let readiness = gateway.readiness().await;
                let status = if readiness.ready {
                    StatusCode::OK
                } else {
                    StatusCode::SERVICE_UNAVAILABLE
                };
                let mut r = Response::new(Body::from(readiness.to_json().to_string()));
                *r.status_mut() = status;
                r.headers_mut().insert(
                    header::CONTENT_TYPE,
                    http::HeaderValue::from_static("application/json"),
                );
                r.headers_mut().insert(
                    header::CACHE_CONTROL,
                    http::HeaderValue::from_static("no-store"),
                );
                Ok(r)
            }));
        }
        if self.endpoint.as_deref().is_some_and(|e| e != path) {
            let mut r = Response::new(Body::empty());
            *r.status_mut() = StatusCode::NOT_FOUND;
            return HealthFuture::Own(Box::pin(std::future::ready(Ok(r))));
        }
        HealthFuture::Inner(self.inner.call(req))
    }
}
