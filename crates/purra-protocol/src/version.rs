//! The protocol revisions purra speaks, compared by set membership, never by string order.

/// 2024-11-05, the first published revision.
pub const V2024_11_05: &str = "2024-11-05";
/// 2025-03-26: Streamable HTTP, batches, annotations.
pub const V2025_03_26: &str = "2025-03-26";
/// 2025-06-18: structured tool output, elicitation, the protocol-version header.
pub const V2025_06_18: &str = "2025-06-18";
/// 2025-11-25: tasks, URL elicitation, JSON Schema 2020-12 by default.
pub const V2025_11_25: &str = "2025-11-25";
/// 2026-07-28: the stateless ("modern") revision with a per-request envelope.
pub const V2026_07_28: &str = "2026-07-28";

/// Revisions that begin with an `initialize` handshake, oldest first.
pub const HANDSHAKE_VERSIONS: [&str; 4] = [V2024_11_05, V2025_03_26, V2025_06_18, V2025_11_25];
/// Revisions that carry their context in every request's `_meta` (no handshake).
pub const MODERN_VERSIONS: [&str; 1] = [V2026_07_28];
/// The newest handshake revision: what a client asks for by default.
pub const LATEST_HANDSHAKE_VERSION: &str = V2025_11_25;

/// Whether `v` is a handshake revision purra speaks.
pub fn is_handshake(v: &str) -> bool {
    HANDSHAKE_VERSIONS.contains(&v)
}

/// Whether `v` is a modern (stateless) revision.
pub fn is_modern(v: &str) -> bool {
    MODERN_VERSIONS.contains(&v)
}

/// The server's answer to an `initialize` asking for `requested`: the same revision when it is
/// supported, otherwise the latest handshake revision.
pub fn negotiate(requested: &str) -> &'static str {
    HANDSHAKE_VERSIONS
        .iter()
        .find(|v| **v == requested)
        .copied()
        .unwrap_or(LATEST_HANDSHAKE_VERSION)
}

/// Whether batches (JSON arrays of messages) are legal in revision `v`: only 2025-03-26.
pub fn allows_batches(v: &str) -> bool {
    v == V2025_03_26
}

/// Whether `v` has structured tool output and elicitation (2025-06-18 and later handshake revisions).
pub fn has_structured_output(v: &str) -> bool {
    v == V2025_06_18 || v == V2025_11_25
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_echoes_supported_and_answers_latest_otherwise() {
        assert_eq!(negotiate("2025-06-18"), "2025-06-18");
        assert_eq!(negotiate("2024-11-05"), "2024-11-05");
        assert_eq!(negotiate("2099-01-01"), "2025-11-25");
        assert_eq!(negotiate("2026-07-28"), "2025-11-25");
        assert!(!is_handshake("2026-07-28") && is_modern("2026-07-28"));
    }
}
