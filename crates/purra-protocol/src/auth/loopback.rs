//! An [`Authorizer`] for native apps and CLIs (RFC 8252): it hands the authorization URL to the
//! host's callback (print it, open a browser) and listens on a loopback port for the redirect.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

use super::client::{AuthorizationRequest, AuthorizationResponse, Authorizer};
use crate::error::AuthError;
use crate::session::BoxFuture;

/// The bound on the redirect request's head; a longer one is refused.
const MAX_REQUEST_BYTES: usize = 16 * 1024;

type OnUrl = Arc<dyn Fn(&AuthorizationRequest) + Send + Sync>;

/// Listens on a loopback address for the authorization server's redirect
/// (`http://127.0.0.1:PORT/callback`). `on_url` decides how the user sees the URL.
pub struct LoopbackAuthorizer {
    listener: tokio::sync::Mutex<TcpListener>,
    addr: SocketAddr,
    on_url: OnUrl,
    timeout: Duration,
}

impl fmt::Debug for LoopbackAuthorizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoopbackAuthorizer")
            .field("addr", &self.addr)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl LoopbackAuthorizer {
    /// Binds `addr` (a loopback address; port 0 picks a free port) and calls `on_url` with each
    /// authorization request.
    pub async fn bind(
        addr: &str,
        on_url: impl Fn(&AuthorizationRequest) + Send + Sync + 'static,
    ) -> Result<Self, AuthError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|e| AuthError::Config(format!("listening on {addr}: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| AuthError::Config(format!("listening on {addr}: {e}")))?;
        if !addr.ip().is_loopback() {
            return Err(AuthError::Config(format!(
                "{addr} is not a loopback address; the redirect must not be reachable from elsewhere"
            )));
        }
        Ok(LoopbackAuthorizer {
            listener: tokio::sync::Mutex::new(listener),
            addr,
            on_url: Arc::new(on_url),
            timeout: Duration::from_secs(300),
        })
    }

    /// How long to wait for the redirect (default 5 minutes).
    pub fn timeout(mut self, d: Duration) -> Self {
        self.timeout = d;
        self
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    async fn wait(
        &self,
        request: AuthorizationRequest,
    ) -> Result<AuthorizationResponse, AuthError> {
        let listener = self.listener.lock().await;
        (self.on_url)(&request);
        let wait = async {
            loop {
                let Ok((mut sock, _)) = listener.accept().await else {
                    continue;
                };
                let Some(target) = read_target(&mut sock).await else {
                    let _ = respond(&mut sock, 400, "Bad request.").await;
                    continue;
                };
                if !(target == "/callback" || target.starts_with("/callback?")) {
                    let _ = respond(&mut sock, 404, "Not found.").await;
                    continue;
                }
                let query = target.split_once('?').map(|(_, q)| q).unwrap_or("");
                match AuthorizationResponse::from_redirect(query) {
                    Ok(r) if r.state.as_deref() == Some(request.state.as_str()) => {
                        let _ = respond(
                            &mut sock,
                            200,
                            "Authorized. You can close this window and return to the terminal.",
                        )
                        .await;
                        return Ok(r);
                    }
                    // Not this authorization's redirect: ignore it, keep waiting.
                    Ok(_) => {
                        let _ =
                            respond(&mut sock, 400, "This is not the authorization in progress.")
                                .await;
                    }
                    Err(e) => {
                        // The authorization server reported an error for this request.
                        let ours = query
                            .split('&')
                            .any(|p| p == format!("state={}", request.state));
                        let _ = respond(&mut sock, 400, "Authorization failed.").await;
                        if ours {
                            return Err(e);
                        }
                    }
                }
            }
        };
        tokio::time::timeout(self.timeout, wait)
            .await
            .map_err(|_| {
                AuthError::Authorization(format!(
                    "no redirect arrived within {} s",
                    self.timeout.as_secs()
                ))
            })?
    }
}

/// The request target of an HTTP/1 `GET`, read within the bound and 10 seconds.
async fn read_target(sock: &mut tokio::net::TcpStream) -> Option<String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 2048];
    let read = async {
        loop {
            let n = sock.read(&mut chunk).await.ok()?;
            if n == 0 {
                return None;
            }
            buf.extend_from_slice(&chunk[..n]);
            if buf.windows(4).any(|w| w == b"\r\n\r\n") {
                break;
            }
            if buf.len() > MAX_REQUEST_BYTES {
                return None;
            }
        }
        let head = std::str::from_utf8(&buf).ok()?;
        let line = head.lines().next()?;
        let mut parts = line.split(' ');
        let (Some("GET"), Some(target)) = (parts.next(), parts.next()) else {
            return None;
        };
        Some(target.to_owned())
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .ok()
        .flatten()
}

async fn respond(sock: &mut tokio::net::TcpStream, status: u16, text: &str) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        _ => "Bad Request",
    };
    let body = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>purra</title></head><body><p>{text}</p></body></html>"
    );
    let resp = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\ncache-control: no-store\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    sock.write_all(resp.as_bytes()).await?;
    sock.shutdown().await
}

impl Authorizer for LoopbackAuthorizer {
    fn redirect_uri(&self) -> String {
        format!("http://{}/callback", self.addr)
    }

    fn authorize(
        &self,
        request: AuthorizationRequest,
    ) -> BoxFuture<'_, Result<AuthorizationResponse, AuthError>> {
        Box::pin(self.wait(request))
    }
}
