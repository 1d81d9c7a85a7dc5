//! The HTTP request behind a message, for handlers: the Streamable HTTP server attaches it to
//! every frame of a POST, the WebSocket server to every frame of a connection (its handshake).

use http::request::Parts;
use http::HeaderMap;

/// The HTTP request that carried a message, as a handler sees it through
/// [`RequestCtx::http`](crate::RequestCtx::http): the request's parts (method, URI, headers,
/// and the extensions that layers in front of the endpoint filled) and the session id. Over
/// WebSocket it is the handshake request, without a session.
#[derive(Debug)]
pub struct HttpContext {
    parts: Parts,
    session_id: Option<String>,
}

impl HttpContext {
    pub(crate) fn new(parts: Parts, session_id: Option<String>) -> Self {
        HttpContext { parts, session_id }
    }
    /// The request's method, URI, version, headers and extensions.
    pub fn parts(&self) -> &Parts {
        &self.parts
    }
    /// The request's headers.
    pub fn headers(&self) -> &HeaderMap {
        &self.parts.headers
    }
    /// The Streamable HTTP session the request belongs to (`None` in stateless mode and over
    /// WebSocket).
    pub fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }
}
