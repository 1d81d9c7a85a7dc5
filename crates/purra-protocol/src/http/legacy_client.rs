//! The HTTP+SSE client transport of 2024-11-05: GET the event stream, wait for its `endpoint`
//! event (a URL on the stream's own origin), then POST every message there; everything the
//! server sends arrives on the stream as `message` events.
//!
//! The bounds of the Streamable HTTP client apply: each event at most `max_frame_bytes` (a
//! larger one is skipped and reported to the engine as oversize, which fails the request it
//! answers), the stream must name its endpoint within `connect_timeout`, each POST is bounded by
//! `message_timeout`, and authorization goes through the same [`HttpAuth`](super::HttpAuth).

use bytes::Bytes;
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::client::{
    authorization, challenged, error_chain, option_headers, read_bounded, set_authorization,
    HttpClientOptions,
};
use super::sse::{Item, Parser};
use crate::error::Error;
use crate::jsonrpc::{decode_frame, Frame, Message};
use crate::transport::{Inbound, Outbound, Transport, CHANNEL_CAPACITY};

/// How much of an error response body is kept for the error.
const SHOWN_BODY: usize = 1024;

/// The event stream of a connection, between reads.
struct Stream {
    resp: reqwest::Response,
    parser: Parser,
    /// The bound on one event.
    max: usize,
    /// Events parsed and not yet delivered.
    ready: std::collections::VecDeque<Item>,
}

impl Stream {
    /// The next event, or why the stream ended.
    async fn next(&mut self) -> Result<Item, String> {
        loop {
            if let Some(item) = self.ready.pop_front() {
                return Ok(item);
            }
            match self.resp.chunk().await {
                Ok(Some(bytes)) => self.ready.extend(self.parser.feed(&bytes)),
                Ok(None) => return Err("the server ended the event stream".into()),
                Err(e) => return Err(format!("the event stream failed: {}", error_chain(&e))),
            }
        }
    }
}

/// Sends one request, authorized, answering 401/403 through the connection's auth as the
/// Streamable HTTP client does.
async fn send(
    options: &HttpClientOptions,
    build: impl Fn(reqwest::header::HeaderMap) -> reqwest::RequestBuilder,
    what: &str,
) -> Result<reqwest::Response, Error> {
    let mut rounds = 0;
    loop {
        let mut headers = option_headers(options, &[]);
        let sent = authorization(options).await?;
        set_authorization(&mut headers, sent.clone());
        let resp = build(headers)
            .send()
            .await
            .map_err(|e| Error::Transport(format!("{what}: {}", error_chain(&e))))?;
        if !challenged(options, &resp, sent.as_deref(), &mut rounds).await? {
            return Ok(resp);
        }
    }
}

async fn status_error(resp: reqwest::Response, max: usize) -> Error {
    let status = resp.status().as_u16();
    let body = read_bounded(resp, max.min(SHOWN_BODY))
        .await
        .unwrap_or_default();
    Error::Http {
        status,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// Opens the event stream at `url` and waits for its endpoint: the stream and the URL to POST to.
async fn open(
    http: &reqwest::Client,
    url: &reqwest::Url,
    options: &HttpClientOptions,
) -> Result<(Stream, reqwest::Url), Error> {
    let resp = send(
        options,
        |h| {
            http.get(url.clone())
                .headers(h)
                .header(ACCEPT, "text/event-stream")
        },
        &format!("GET {url}"),
    )
    .await?;
    if !resp.status().is_success() {
        return Err(status_error(resp, options.max_frame_bytes).await);
    }
    let ct = resp
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .eq_ignore_ascii_case("text/event-stream")
    {
        return Err(Error::InvalidResponse(format!(
            "GET {url} answered {ct:?}, not an event stream (not an HTTP+SSE server)"
        )));
    }
    let mut stream = Stream {
        resp,
        parser: Parser::new(options.max_frame_bytes),
        max: options.max_frame_bytes,
        ready: Default::default(),
    };
    loop {
        match stream.next().await.map_err(Error::Transport)? {
            Item::Event(ev) if ev.event.as_deref() == Some("endpoint") => {
                let endpoint = url.join(ev.data.trim()).map_err(|e| {
                    Error::InvalidResponse(format!("the endpoint event {:?}: {e}", ev.data))
                })?;
                // A server may only direct messages to its own origin.
                if endpoint.origin() != url.origin() {
                    return Err(Error::InvalidResponse(format!(
                        "the endpoint {endpoint} is not on the event stream's origin {}",
                        url.origin().ascii_serialization()
                    )));
                }
                return Ok((stream, endpoint));
            }
            // Nothing can be answered before the endpoint is known.
            Item::Event(_) => {}
            Item::TooLarge => {
                return Err(Error::InvalidResponse(format!(
                    "an event before the endpoint exceeded {} bytes",
                    options.max_frame_bytes
                )))
            }
        }
    }
}

/// Connects to an HTTP+SSE server (2024-11-05) whose event stream is at `url` (`http://` or
/// `https://`, usually ending in `/sse`): the stream is opened and its endpoint known when this
/// returns, so a server that is not one fails here, before `initialize`.
pub async fn connect_sse(url: &str, options: HttpClientOptions) -> Result<Transport, Error> {
    let url = reqwest::Url::parse(url)
        .map_err(|e| Error::Transport(format!("invalid URL {url:?}: {e}")))?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(Error::Transport(format!("not an http(s) URL: {url}")));
    }
    let http = options.build_client()?;
    let (stream, endpoint) =
        tokio::time::timeout(options.connect_timeout, open(&http, &url, &options))
            .await
            .map_err(|_| {
                Error::Transport(format!(
                    "GET {url}: no endpoint event within {:?}",
                    options.connect_timeout
                ))
            })??;
    let (in_tx, in_rx) = mpsc::channel(CHANNEL_CAPACITY);
    let (out_tx, out_rx) = mpsc::channel(CHANNEL_CAPACITY);
    let close = CancellationToken::new();
    tokio::spawn(read_loop(stream, in_tx.clone(), close.clone()));
    tokio::spawn(write_loop(
        http,
        endpoint,
        options,
        out_rx,
        in_tx,
        close.clone(),
    ));
    Ok(Transport::from_channels(in_rx, out_tx, close).labeled("sse", None))
}

/// Delivers the stream's `message` events to the engine until the stream or the connection ends.
async fn read_loop(mut stream: Stream, inbound: mpsc::Sender<Inbound>, close: CancellationToken) {
    let max = stream.max;
    loop {
        let item = tokio::select! {
            i = stream.next() => i,
            _ = close.cancelled() => return,
        };
        let delivered = match item {
            // An event without a type is a `message` (the SSE default).
            Ok(Item::Event(ev)) if matches!(ev.event.as_deref(), None | Some("message")) => {
                if ev.data.trim().is_empty() {
                    continue;
                }
                Inbound::Frame(Bytes::from(ev.data.into_bytes()))
            }
            Ok(Item::Event(_)) => continue,
            // Its data is gone: the engine fails whatever request it may have answered.
            Ok(Item::TooLarge) => Inbound::Oversize {
                len: max + 1,
                head: Bytes::new(),
                tail: Bytes::new(),
            },
            Err(why) => {
                let _ = inbound.send(Inbound::Failed(why)).await;
                return;
            }
        };
        if inbound.send(delivered).await.is_err() {
            return;
        }
    }
}

/// POSTs every message the engine writes, in order, each within `message_timeout`; a request
/// whose POST fails fails at once with the error.
async fn write_loop(
    http: reqwest::Client,
    endpoint: reqwest::Url,
    options: HttpClientOptions,
    mut outbound: mpsc::Receiver<Outbound>,
    inbound: mpsc::Sender<Inbound>,
    close: CancellationToken,
) {
    loop {
        let out = tokio::select! {
            biased;
            m = outbound.recv() => m,
            _ = close.cancelled() => None,
        };
        let Some(out) = out else { return };
        let frame = out.frame().to_vec();
        let posted = tokio::time::timeout(
            options.message_timeout,
            post(&http, &endpoint, &options, &frame),
        )
        .await
        .unwrap_or_else(|_| {
            Err(Error::Transport(format!(
                "POST {endpoint}: no answer within {:?}",
                options.message_timeout
            )))
        });
        let Err(error) = posted else { continue };
        if let Frame::Single(Ok(Message::Request { id, .. })) = decode_frame(&frame) {
            if inbound
                .send(Inbound::RequestFailed { id, error })
                .await
                .is_err()
            {
                return;
            }
        } else {
            tracing::debug!(%error, "a message to the HTTP+SSE server was not accepted");
        }
    }
}

async fn post(
    http: &reqwest::Client,
    endpoint: &reqwest::Url,
    options: &HttpClientOptions,
    frame: &[u8],
) -> Result<(), Error> {
    let resp = send(
        options,
        |h| {
            http.post(endpoint.clone())
                .headers(h)
                .header(CONTENT_TYPE, "application/json")
                .body(frame.to_vec())
        },
        &format!("POST {endpoint}"),
    )
    .await?;
    if resp.status().is_success() {
        return Ok(());
    }
    Err(status_error(resp, options.max_frame_bytes).await)
}

/// Whether a Streamable HTTP `initialize` failed in the way the specification's
/// backwards-compatibility section names for an HTTP+SSE server: a 4xx answer to the POST
/// (typically 404 or 405). Anything else (a connection refused, a 5xx, a 401 the client could
/// not satisfy, a protocol error) is not a reason to try the old transport.
pub(crate) fn means_legacy(e: &Error) -> bool {
    matches!(e, Error::Http { status, .. } if (400..500).contains(status) && *status != 401 && *status != 403)
}

/// The Streamable HTTP refusal that made the client try HTTP+SSE, with why that failed too.
pub(crate) fn both_failed(streamable: Error, legacy: &Error) -> Error {
    match streamable {
        Error::Http { status, body } => Error::Http {
            status,
            body: format!("{body} (and as an HTTP+SSE server: {legacy})"),
        },
        other => other,
    }
}
