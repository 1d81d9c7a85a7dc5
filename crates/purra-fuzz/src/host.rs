//! The Host/Origin check and the Last-Event-ID parser: a request passes the loopback policy only
//! with a loopback or explicitly allowed authority (no userinfo) and a web origin of such a host,
//! independent of letter case; `HostPolicy::any()` passes everything; a parsed event id prints back
//! to an id that parses to the same stream and sequence.

use http::header::{HOST, ORIGIN};
use http::uri::Authority;
use http::{HeaderMap, HeaderValue, Uri};
use purra_protocol::HostPolicy;

use crate::input::Input;

const LOOPBACK: &[&str] = &["localhost", "127.0.0.1", "[::1]"];

/// Checks one input: three length-prefixed strings (Host, Origin, an extra allowed host) and
/// flags (which headers are present, whether the URI carries the authority), then an event id.
pub fn check(data: &[u8]) {
    let mut input = Input::new(data);
    let flags = input.byte();
    let field = |input: &mut Input| {
        let n = usize::from(input.byte() % 64);
        input.take(n).to_vec()
    };
    let host = field(&mut input);
    let origin = field(&mut input);
    let extra = String::from_utf8_lossy(&field(&mut input)).into_owned();
    let event_id = String::from_utf8_lossy(input.rest()).into_owned();
    event_id_round_trips(&event_id);

    let mut headers = HeaderMap::new();
    if flags & 1 != 0 {
        if let Ok(v) = HeaderValue::from_bytes(&host) {
            headers.insert(HOST, v);
        }
    }
    if flags & 2 != 0 {
        if let Ok(v) = HeaderValue::from_bytes(&origin) {
            headers.insert(ORIGIN, v);
        }
    }
    let uri: Uri = if flags & 4 != 0 {
        std::str::from_utf8(&host)
            .ok()
            .and_then(|h| format!("http://{h}/mcp").parse().ok())
            .unwrap_or_else(|| Uri::from_static("/mcp"))
    } else {
        Uri::from_static("/mcp")
    };
    let policy = if flags & 8 != 0 {
        HostPolicy::loopback().allow_host(&extra)
    } else {
        HostPolicy::loopback()
    };
    // An entry is trimmed; one with userinfo or a port that is no number is ignored.
    let extra_host = extra
        .trim()
        .parse::<Authority>()
        .ok()
        .filter(|a| !a.as_str().contains('@'))
        .filter(|a| a.as_str().len() == a.host().len() || a.port_u16().is_some())
        .map(|a| a.host().to_ascii_lowercase())
        .filter(|_| flags & 8 != 0);
    let allowed_host = |host: &str| {
        let host = host.to_ascii_lowercase();
        LOOPBACK.contains(&host.as_str()) || extra_host.as_deref() == Some(host.as_str())
    };

    assert!(
        HostPolicy::any().check(&uri, &headers).is_ok(),
        "any() refused"
    );
    let verdict = policy.check(&uri, &headers);
    // The reason is shown to the client: it never panics and is never empty.
    if let Err(e) = &verdict {
        assert!(!e.to_string().is_empty());
    }
    if verdict.is_ok() {
        let authority = uri.authority().cloned().or_else(|| {
            headers
                .get(HOST)
                .and_then(|h| h.to_str().ok())
                .and_then(|h| h.trim().parse::<Authority>().ok())
        });
        let authority = authority.expect("a request without an authority passed");
        assert!(
            !authority.as_str().contains('@'),
            "userinfo passed: {authority}"
        );
        assert!(allowed_host(authority.host()), "{authority} passed");
        if let Some(origin) = headers.get(ORIGIN) {
            let origin = String::from_utf8_lossy(origin.as_bytes());
            let origin = origin.trim().trim_end_matches('/');
            let uri: Uri = origin.parse().expect("an origin that is no URI passed");
            assert!(
                matches!(uri.scheme_str(), Some("http" | "https")),
                "{origin} passed"
            );
            let a = uri.authority().expect("an origin without authority passed");
            assert!(
                !a.as_str().contains('@') && allowed_host(a.host()),
                "{origin} passed"
            );
        }
    }
    // Letter case does not matter in host names.
    let mut upper = headers.clone();
    if let Some(h) = headers.get(HOST) {
        if let Ok(s) = h.to_str() {
            upper.insert(
                HOST,
                HeaderValue::from_str(&s.to_ascii_uppercase()).expect("ASCII"),
            );
        }
    }
    if uri.authority().is_none() {
        assert_eq!(
            policy.check(&uri, &upper).is_ok(),
            verdict.is_ok(),
            "Host {:?} and its upper case differ",
            headers.get(HOST)
        );
    }
}

/// A parsed Last-Event-ID prints back to an id that parses to the same pair.
fn event_id_round_trips(id: &str) {
    if let Some((stream, seq)) = purra_protocol::__private::parse_event_id(id) {
        assert!(id.starts_with('s'), "{id:?} parsed");
        let printed = format!("s{stream}e{seq}");
        assert_eq!(
            purra_protocol::__private::parse_event_id(&printed),
            Some((stream, seq)),
            "{printed:?}"
        );
    }
}
