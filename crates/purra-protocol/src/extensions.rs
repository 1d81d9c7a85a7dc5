//! Protocol extensions: optional features a client and a server agree on under
//! `capabilities.extensions`, keyed by a reverse-DNS name (`io.modelcontextprotocol/tasks`), each
//! with its own settings object.
//!
//! A server declares the extensions it offers with
//! [`ServerBuilder::extension`](crate::ServerBuilder::extension) (the server's own features, such
//! as tasks, add theirs); a client declares the ones it speaks in its capabilities, at the
//! handshake or, in 2026-07-28, on each request. An extension is *negotiated* for a request when
//! both sides declared it; handlers read that with
//! [`RequestCtx::negotiated_extensions`](crate::RequestCtx::negotiated_extensions) and
//! [`RequestCtx::client_extension`](crate::RequestCtx::client_extension).

use std::collections::BTreeMap;

use crate::types::{ClientCapabilities, JsonObject, ServerCapabilities};

/// The tasks extension of 2026-07-28 (SEP-2663).
pub const TASKS: &str = "io.modelcontextprotocol/tasks";

/// Declared extensions: name to settings.
pub type Extensions = BTreeMap<String, JsonObject>;

/// Whether `name` is an extension name: a reverse-DNS prefix of at least two dot-separated
/// labels (letters, digits, `-`), a `/`, and a non-empty name of letters, digits, `-`, `_`, `.`
/// and `/`, at most 255 bytes in all.
pub fn is_valid_name(name: &str) -> bool {
    let Some((prefix, rest)) = name.split_once('/') else {
        return false;
    };
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    name.len() <= 255
        && prefix.split('.').count() >= 2
        && prefix.split('.').all(label_ok)
        && !rest.is_empty()
        && rest
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'/'))
}

/// The extensions both sides declared, in name order.
pub fn negotiated(server: &ServerCapabilities, client: &ClientCapabilities) -> Vec<String> {
    let (Some(s), Some(c)) = (&server.extensions, &client.extensions) else {
        return Vec::new();
    };
    s.keys().filter(|k| c.contains_key(*k)).cloned().collect()
}

/// Whether the client declared `name`.
pub fn client_declares(client: &ClientCapabilities, name: &str) -> bool {
    client
        .extensions
        .as_ref()
        .is_some_and(|e| e.contains_key(name))
}

/// The `data` of a -32021 error naming an extension the request needed:
/// `{"requiredCapabilities": {"extensions": {name: {}}}}`.
pub fn required_data(name: &str) -> serde_json::Value {
    serde_json::json!({ "requiredCapabilities": { "extensions": { name: {} } } })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_reverse_dns_slash_name() {
        assert!(is_valid_name(TASKS));
        assert!(is_valid_name("com.example/apps-ui"));
        assert!(!is_valid_name("tasks"));
        assert!(!is_valid_name("example/tasks"));
        assert!(!is_valid_name("io.modelcontextprotocol/"));
        assert!(!is_valid_name("io..x/tasks"));
        assert!(!is_valid_name("io.x/ta sks"));
    }

    #[test]
    fn negotiation_is_the_intersection() {
        let mut s = Extensions::new();
        s.insert(TASKS.into(), JsonObject::new());
        s.insert("com.example/ui".into(), JsonObject::new());
        let mut c = Extensions::new();
        c.insert(TASKS.into(), JsonObject::new());
        c.insert("org.other/x".into(), JsonObject::new());
        let server = ServerCapabilities::default().with_extensions(s);
        let client = ClientCapabilities::default().with_extensions(c);
        assert_eq!(negotiated(&server, &client), vec![TASKS.to_owned()]);
        assert!(negotiated(&server, &ClientCapabilities::default()).is_empty());
    }
}
