//! Serving downstream clients over Streamable HTTP (endpoint `/mcp`): the server, the guard of
//! `[gateway.auth]` around it, the health checks in front, and a stop that lets the last answers
//! out.

use std::time::Duration;

use purra_protocol::{HttpServerConfig, StreamableHttpServer};

use crate::runtime::gateway::Gateway;

/// How long a stopping HTTP listener lets the answers still being written go out before it ends
/// every stream.
const FLUSH_BOUND: Duration = Duration::from_secs(5);
/// How long a stopping HTTP listener keeps its sessions' streams open after the last answer left.
const READ_GRACE: Duration = Duration::from_millis(500);

impl Gateway {
    /// A Streamable HTTP server for downstream clients (endpoint `/mcp`) on `addr`, **without**
    /// the guard of `[gateway.auth]` and the health checks: mount
    /// [`StreamableHttpServer::router`] behind [`Gateway::auth_layer`] (beside other routes) or
    /// bind it; [`Gateway::serve_http`] does both, with `/healthz` and `/readyz`. It answers the
    /// loopback names and `[gateway] allowed_hosts`.
    pub fn http_server(&self, addr: std::net::SocketAddr) -> StreamableHttpServer {
        let server = StreamableHttpServer::new(self.inner.server.clone(), self.http_config(addr));
        self.hand_over_on_drain(&server);
        server
    }

    /// On a fleet's store, a drain hands this server's running SSE streams over to the other
    /// instances (see [`GatewayStore::shared_by_a_fleet`](crate::GatewayStore::shared_by_a_fleet)).
    fn hand_over_on_drain(&self, server: &StreamableHttpServer) {
        if self.drain_hands_streams_over() {
            self.inner.drain.serves(server);
        }
    }

    fn http_config(&self, addr: std::net::SocketAddr) -> HttpServerConfig {
        let mut policy = purra_protocol::HostPolicy::loopback();
        for host in &self.inner.settings.allowed_hosts {
            policy = policy.allow_host(host);
        }
        let settings = &self.inner.settings;
        HttpServerConfig {
            bind: addr,
            host_policy: policy,
            max_sessions: settings.max_sessions,
            max_sessions_per_principal: settings.max_sessions_per_caller,
            session_idle_timeout: settings.session_idle_timeout.0,
            // Sessions in the store (a durable one): any instance on it serves any session;
            // with `sessions = "process"`, in this process only.
            session_store: match settings.sessions {
                crate::config::SessionsIn::Store => self.inner.store.sessions(),
                crate::config::SessionsIn::Process => None,
            },
            // A call whose instance died is taken over where its client resumes: reads are
            // reads, and a write is claimed once in the store (a re-run finds its approval).
            take_over_streams: true,
            stream_lease: settings.lease.0.min(Duration::from_secs(5)),
            ..HttpServerConfig::default()
        }
    }

    /// The OAuth resource-server guard of `[gateway.auth]` for a listener bound to `local` (its
    /// resource: the configured one, else `http://LOCAL/mcp`), to put around
    /// [`Gateway::http_server`]'s router: `layer.layer(gateway.http_server(local).router())`.
    /// `None` without `[gateway.auth]`: then every HTTP caller acts as the configured principal.
    pub fn auth_layer(
        &self,
        local: std::net::SocketAddr,
    ) -> Result<Option<purra_protocol::auth::AuthLayer>, purra_protocol::AuthError> {
        self.inner.auth.as_ref().map(|a| a.layer(local)).transpose()
    }

    /// Serves downstream clients over Streamable HTTP (endpoint `/mcp`) on `listener` until
    /// `shutdown` resolves, behind the guard of `[gateway.auth]` when it is configured (the
    /// protected resource metadata is then served at `/.well-known/oauth-protected-resource/mcp`,
    /// logged at start). Without it, a warning is logged: HTTP callers are not authenticated.
    /// `/healthz` and `/readyz` are answered in front of both ([`crate::health`]).
    pub async fn serve_http(
        &self,
        listener: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let local = listener.local_addr()?;
        let guard = self
            .auth_layer(local)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))?;
        let config = self.http_config(local);
        let endpoint = config.endpoint.clone();
        let stop = config.shutdown.clone();
        let limits = config.connections.clone();
        let mcp = StreamableHttpServer::new(self.inner.server.clone(), config);
        self.hand_over_on_drain(&mcp);
        // When `shutdown` resolves, the answers still being written (a drained call's result
        // leaves after its handler returned) are let out, for at most `FLUSH_BOUND`, and read, for
        // `READ_GRACE` more (a client that finds its session's GET stream gone at once may give
        // up before it handled the answer it just read: the Python SDK's does); then every stream
        // ends and every session closes.
        let watch = |in_flight: crate::serve::health::InFlight| {
            let trigger = stop.clone();
            tokio::spawn(async move {
                tokio::select! {
                    () = shutdown => {
                        in_flight
                            .settled(tokio::time::Instant::now() + FLUSH_BOUND)
                            .await;
                        tokio::time::sleep(READ_GRACE).await;
                        trigger.cancel();
                    }
                    () = trigger.cancelled() => {}
                }
            });
        };
        let Some(guard) = guard else {
            self.inner.log(&format!(
                "warning: HTTP callers are not authenticated ([gateway.auth] is not set): every \
                 caller that reaches {local} acts as principal {:?}",
                self.inner.settings.principal
            ));
            let service = self.with_health(mcp, Some(&endpoint));
            watch(service.in_flight());
            return purra_protocol::http::serve(listener, service, limits, stop).await;
        };
        self.inner.log(&format!(
            "callers need a token from {} for {}; protected resource metadata at {}",
            self.inner.auth.as_ref().map_or("", |a| a.issuer()),
            self.inner
                .auth
                .as_ref()
                .map(|a| a.resource(local))
                .unwrap_or_default(),
            guard.metadata_url()
        ));
        let service = self.with_health(guard.layer(mcp.router()), None);
        watch(service.in_flight());
        purra_protocol::http::serve(listener, service, limits, stop).await
    }
}
