//! The Prometheus endpoint (`GET /metrics`) on a listener of its own; the families it renders are
//! [`crate::metrics`]'s.

use tokio_util::sync::CancellationToken;

use crate::runtime::gateway::Gateway;

/// Whether `headers` carry `Authorization: Bearer TOKEN` with exactly `token` (compared in
/// time independent of where they differ).
fn bearer_matches(headers: &axum::http::HeaderMap, token: &str) -> bool {
    let Some(given) = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, rest) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        })
    else {
        return false;
    };
    purra_protocol::auth::same_secret(given, token)
}

impl Gateway {
    /// Serves the Prometheus endpoint, `GET /metrics` (the text exposition format, refreshed
    /// per scrape), on `listener` until `shutdown` resolves: a listener of its own, on
    /// purra-protocol's accept loop with the MCP endpoint's connection limits; anything else is
    /// 404. It answers the loopback names and `[gateway] allowed_hosts` (any other `Host` is
    /// 403, as on the MCP endpoint and the page), and with `[telemetry] metrics_token_file` only
    /// a scrape carrying that bearer token (401 otherwise).
    pub async fn serve_metrics(
        &self,
        listener: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        use axum::response::IntoResponse;
        let local = listener.local_addr()?;
        if !local.ip().is_loopback() {
            self.inner.log(&format!(
                "warning: the metrics endpoint listens on {local}, beyond loopback: {}",
                if self.inner.metrics_token.is_some() {
                    "scrapes need the bearer token of [telemetry] metrics_token_file"
                } else {
                    "anyone who reaches it reads the gateway's metrics; set [telemetry] \
                     metrics_token_file to require a bearer token"
                }
            ));
        }
        let gateway = self.clone();
        let mut policy = purra_protocol::HostPolicy::loopback();
        for host in &self.inner.settings.allowed_hosts {
            policy = policy.allow_host(host);
        }
        let router = axum::Router::new().route(
            "/metrics",
            axum::routing::get(
                move |uri: axum::http::Uri, headers: axum::http::HeaderMap| {
                    let gateway = gateway.clone();
                    let checked = policy.check(&uri, &headers).map_err(|e| {
                        (axum::http::StatusCode::FORBIDDEN, format!("refused: {e}\n"))
                            .into_response()
                    });
                    async move {
                        if let Err(refused) = checked {
                            return refused;
                        }
                        if let Some(token) = &gateway.inner.metrics_token {
                            if !bearer_matches(&headers, token) {
                                return (
                                    axum::http::StatusCode::UNAUTHORIZED,
                                    [(axum::http::header::WWW_AUTHENTICATE, "Bearer")],
                                    "a bearer token is required\n",
                                )
                                    .into_response();
                            }
                        }
                        gateway.refresh_metrics().await;
                        (
                            [(
                                axum::http::header::CONTENT_TYPE,
                                "text/plain; version=0.0.4; charset=utf-8",
                            )],
                            gateway.inner.metrics.render(),
                        )
                            .into_response()
                    }
                },
            ),
        );
        let stop = CancellationToken::new();
        let trigger = stop.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = shutdown => trigger.cancel(),
                () = trigger.cancelled() => {}
            }
        });
        purra_protocol::http::serve(
            listener,
            router,
            purra_protocol::http::ConnectionLimits::default(),
            stop,
        )
        .await
    }
}
