//! Health for load balancers and orchestrators, on the gateway's HTTP listener beside `/mcp`:
//!
//! - `GET /healthz`: the process is up and serving HTTP (`200 ok`), whatever else is true;
//! - `GET /readyz`: it should be sent calls: `200` when the store answers (one read, within
//!   [`STORE_PROBE_TIMEOUT`], reused for [`STORE_PROBE_CACHE`]), every upstream is connected and
//!   discovered, and the gateway is not draining; `503` otherwise. The body is only the status,
//!   `{"ready":true}` or `{"ready":false}`: which upstream is down and the store's error are for
//!   the operator, logged (at `-v`) when they change, and in [`Gateway::readiness`].
//!
//! Both answer without authentication (they say nothing about calls, callers, upstreams or the
//! store) and before the Host check of the MCP endpoint (a load balancer's check names the instance's address). HAProxy
//! uses `/readyz` (`option httpchk GET /readyz`): an instance that drains, lost its store or an
//! upstream gets no new session, and its sessions move to others when it dies.
//!
//! The same service counts the POSTs whose answer is still being written ([`InFlight`]): a call's
//! result leaves after its handler returned, so a drained gateway waits for them before it ends
//! the sessions' streams ([`Gateway::serve_http`]).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use http::{header, Request, Response, StatusCode};
use serde_json::{json, Value};
use tokio::sync::Notify;

use crate::runtime::gateway::Gateway;

/// How long `/readyz` waits for the store's answer before it says the store is not reachable.
pub const STORE_PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// How long `/readyz` reuses its last store probe: a load balancer's checks, however many,
/// read the store at most once in it.
pub const STORE_PROBE_CACHE: Duration = Duration::from_secs(1);

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
    /// The whole readiness as JSON, for the operator's log: `{"ready":true,"draining":false,
    /// "revision":1,"store":"ok","upstreams":{"values":"ok"}}` (`"down"` for an upstream being
    /// reconnected, the failure for the store). `/readyz` answers only `{"ready":...}`.
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
        let store = self.probe_store().await;
        let draining = inner.drain.is_draining();
        Readiness {
            ready: !draining && store.is_ok() && upstreams.values().all(|up| *up),
            draining,
            revision: catalog.revision,
            store,
            upstreams,
        }
    }

    /// Whether the store answers a read: the last probe when it is younger than
    /// [`STORE_PROBE_CACHE`], else a new one (timed as store operation `readiness`).
    async fn probe_store(&self) -> Result<(), String> {
        let inner = &self.inner;
        let mut last = inner.store_probe.lock().await;
        if let Some((at, result)) = &*last {
            if at.elapsed() < STORE_PROBE_CACHE {
                return result.clone();
            }
        }
        let probe = inner.metrics.store("readiness", inner.store.ping());
        let result = match tokio::time::timeout(STORE_PROBE_TIMEOUT, probe).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(format!("the store failed: {e}")),
            Err(_) => Err(format!(
                "the store did not answer within {} s",
                STORE_PROBE_TIMEOUT.as_secs()
            )),
        };
        *last = Some((std::time::Instant::now(), result.clone()));
        result
    }

    /// Logs `readiness` in full when it differs from what was last logged.
    fn log_readiness(&self, readiness: &Readiness) {
        let text = readiness.to_json().to_string();
        let mut logged = self
            .inner
            .readiness_logged
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if *logged != text {
            tracing::info!(readiness = %text, "readiness changed");
            *logged = text;
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
            in_flight: InFlight::default(),
        }
    }
}

/// The POSTs a [`HealthService`] passed on whose answer is not written to its end yet.
#[derive(Debug, Clone, Default)]
pub struct InFlight(Arc<InFlightInner>);

#[derive(Debug, Default)]
struct InFlightInner {
    count: AtomicUsize,
    idle: Notify,
}

impl InFlight {
    /// POSTs whose answer is still being written.
    pub fn count(&self) -> usize {
        self.0.count.load(Ordering::SeqCst)
    }

    /// Returns when none is left, or at `deadline`.
    pub async fn settled(&self, deadline: tokio::time::Instant) {
        loop {
            let idle = self.0.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.count() == 0 {
                return;
            }
            tokio::select! {
                () = &mut idle => {}
                () = tokio::time::sleep_until(deadline) => return,
            }
        }
    }

    fn enter(&self) -> Counted {
        self.0.count.fetch_add(1, Ordering::SeqCst);
        Counted(self.0.clone())
    }
}

/// One POST in flight, counted until its answer's body ends (or is dropped).
struct Counted(Arc<InFlightInner>);

impl Drop for Counted {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// An answer's body that keeps its POST counted while it is written.
struct CountedBody {
    body: Body,
    _counted: Counted,
}

impl http_body::Body for CountedBody {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// A tower service answering `/healthz` and `/readyz` itself and everything else with the service
/// it wraps ([`Gateway::with_health`]).
#[derive(Clone)]
pub struct HealthService<S> {
    gateway: Gateway,
    inner: S,
    endpoint: Option<Arc<str>>,
    in_flight: InFlight,
}

impl<S> HealthService<S> {
    /// The POSTs whose answer is still being written.
    pub fn in_flight(&self) -> InFlight {
        self.in_flight.clone()
    }
}

impl<S> std::fmt::Debug for HealthService<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HealthService")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

/// The future of [`HealthService`]: the wrapped service's answer, or a health answer.
pub struct HealthFuture<F>(Kind<F>);

enum Kind<F> {
    /// The wrapped service answers.
    Inner(F),
    /// The wrapped service answers a POST, counted from the request until its answer is written.
    Counted(F, Option<Counted>),
    /// A health check (or a 404) answers.
    Own(Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>),
}

impl<F> std::fmt::Debug for HealthFuture<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.0 {
            Kind::Inner(_) => "HealthFuture(inner)",
            Kind::Counted(..) => "HealthFuture(counted)",
            Kind::Own(_) => "HealthFuture(own)",
        })
    }
}

impl<F> Future for HealthFuture<F>
where
    F: Future<Output = Result<Response<Body>, Infallible>> + Unpin,
{
    type Output = Result<Response<Body>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.get_mut().0 {
            Kind::Inner(f) => Pin::new(f).poll(cx),
            Kind::Counted(f, counted) => {
                let Poll::Ready(Ok(response)) = Pin::new(f).poll(cx) else {
                    return Poll::Pending;
                };
                let Some(counted) = counted.take() else {
                    return Poll::Ready(Ok(response));
                };
                Poll::Ready(Ok(response.map(|body| {
                    Body::new(CountedBody {
                        body,
                        _counted: counted,
                    })
                })))
            }
            Kind::Own(f) => f.as_mut().poll(cx),
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
                return HealthFuture(Kind::Own(Box::pin(std::future::ready(Ok(r)))));
            }
            if path == HEALTHZ {
                return HealthFuture(Kind::Own(Box::pin(std::future::ready(Ok(plain(
                    StatusCode::OK,
                    "ok\n",
                ))))));
            }
            let gateway = self.gateway.clone();
            return HealthFuture(Kind::Own(Box::pin(async move {
                let readiness = gateway.readiness().await;
                gateway.log_readiness(&readiness);
                let status = if readiness.ready {
                    StatusCode::OK
                } else {
                    StatusCode::SERVICE_UNAVAILABLE
                };
                let body = json!({ "ready": readiness.ready }).to_string();
                let mut r = Response::new(Body::from(body));
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
            })));
        }
        if self.endpoint.as_deref().is_some_and(|e| e != path) {
            let mut r = Response::new(Body::empty());
            *r.status_mut() = StatusCode::NOT_FOUND;
            return HealthFuture(Kind::Own(Box::pin(std::future::ready(Ok(r)))));
        }
        // A POST's answer (a call's result among them) is counted until it is written; a GET's
        // stream lives as long as its session and is not.
        if req.method() == http::Method::POST {
            let counted = self.in_flight.enter();
            return HealthFuture(Kind::Counted(self.inner.call(req), Some(counted)));
        }
        HealthFuture(Kind::Inner(self.inner.call(req)))
    }
}
