//! The protocol revisions purra speaks, compared by set membership, never by string order.
//!
//! A [`ProtocolVersion`] holds any revision string a peer may send (an unknown one is kept as
//! written, so it can be answered or reported); the revisions purra knows are its associated
//! constants, and [`ProtocolVersion::era`] says how a known revision carries its context.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A protocol revision (`YYYY-MM-DD`), known or not.
///
/// ```
/// use purra_protocol::{Era, ProtocolVersion};
///
/// let v: ProtocolVersion = "2025-06-18".parse().unwrap();
/// assert_eq!(v, ProtocolVersion::V2025_06_18);
/// assert_eq!(v.era(), Some(Era::Handshake));
/// assert_eq!(ProtocolVersion::negotiate(&"2099-01-01".parse().unwrap()), ProtocolVersion::LATEST_HANDSHAKE);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProtocolVersion(Cow<'static, str>);

/// How a revision carries its context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Era {
    /// An `initialize` handshake fixes the revision and capabilities for the connection.
    Handshake,
    /// Every request carries its context in `_meta`; there is no handshake (stateless).
    Modern,
}

impl fmt::Display for Era {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Era::Handshake => "handshake",
            Era::Modern => "modern",
        })
    }
}

impl ProtocolVersion {
    /// 2024-11-05, the first published revision.
    pub const V2024_11_05: ProtocolVersion = ProtocolVersion(Cow::Borrowed("2024-11-05"));
    /// 2025-03-26: Streamable HTTP, batches, annotations.
    pub const V2025_03_26: ProtocolVersion = ProtocolVersion(Cow::Borrowed("2025-03-26"));
    /// 2025-06-18: structured tool output, elicitation, the protocol-version header.
    pub const V2025_06_18: ProtocolVersion = ProtocolVersion(Cow::Borrowed("2025-06-18"));
    /// 2025-11-25: tasks, URL elicitation, icons, JSON Schema 2020-12 by default.
    pub const V2025_11_25: ProtocolVersion = ProtocolVersion(Cow::Borrowed("2025-11-25"));
    /// 2026-07-28: the stateless ("modern") revision with a per-request envelope.
    pub const V2026_07_28: ProtocolVersion = ProtocolVersion(Cow::Borrowed("2026-07-28"));

    /// Revisions that begin with an `initialize` handshake, oldest first.
    pub const HANDSHAKE: &'static [ProtocolVersion] = &[
        Self::V2024_11_05,
        Self::V2025_03_26,
        Self::V2025_06_18,
        Self::V2025_11_25,
    ];
    /// Revisions that carry their context in every request's `_meta` (no handshake).
    pub const MODERN: &'static [ProtocolVersion] = &[Self::V2026_07_28];
    /// The newest handshake revision: what a client asks for by default.
    pub const LATEST_HANDSHAKE: ProtocolVersion = Self::V2025_11_25;

    /// A revision from its string (any string: unknown revisions are kept as written).
    pub fn new(v: impl Into<String>) -> Self {
        let v = v.into();
        match Self::known(&v) {
            Some(k) => k.clone(),
            None => ProtocolVersion(Cow::Owned(v)),
        }
    }

    fn known(v: &str) -> Option<&'static ProtocolVersion> {
        Self::HANDSHAKE
            .iter()
            .chain(Self::MODERN)
            .find(|k| k.as_str() == v)
    }

    /// The revision as written on the wire.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The era of a revision purra speaks; `None` for an unknown revision.
    pub fn era(&self) -> Option<Era> {
        if Self::HANDSHAKE.contains(self) {
            Some(Era::Handshake)
        } else if Self::MODERN.contains(self) {
            Some(Era::Modern)
        } else {
            None
        }
    }

    /// Whether this is a handshake revision purra speaks.
    pub fn is_handshake(&self) -> bool {
        self.era() == Some(Era::Handshake)
    }

    /// Whether this is a modern (stateless) revision purra speaks.
    pub fn is_modern(&self) -> bool {
        self.era() == Some(Era::Modern)
    }

    /// The server's answer to an `initialize` asking for `requested`: the same revision when it
    /// is a handshake revision purra speaks, otherwise the latest handshake revision.
    pub fn negotiate(requested: &ProtocolVersion) -> ProtocolVersion {
        if requested.is_handshake() {
            requested.clone()
        } else {
            Self::LATEST_HANDSHAKE
        }
    }

    /// Whether batches (JSON arrays of messages) are legal in this revision: only 2025-03-26.
    pub fn allows_batches(&self) -> bool {
        *self == Self::V2025_03_26
    }

    /// Whether this revision has structured tool output and elicitation (2025-06-18 and later
    /// handshake revisions).
    pub fn has_structured_output(&self) -> bool {
        *self == Self::V2025_06_18 || *self == Self::V2025_11_25
    }
}

impl Default for ProtocolVersion {
    /// The latest handshake revision.
    fn default() -> Self {
        Self::LATEST_HANDSHAKE
    }
}

impl fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for ProtocolVersion {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(ProtocolVersion::new(s))
    }
}

impl From<&str> for ProtocolVersion {
    fn from(s: &str) -> Self {
        ProtocolVersion::new(s)
    }
}

impl From<String> for ProtocolVersion {
    fn from(s: String) -> Self {
        ProtocolVersion::new(s)
    }
}

impl PartialEq<str> for ProtocolVersion {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for ProtocolVersion {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl std::ops::Deref for ProtocolVersion {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for ProtocolVersion {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Serialize for ProtocolVersion {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ProtocolVersion {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(ProtocolVersion::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_echoes_supported_and_answers_latest_otherwise() {
        let n = |v: &str| ProtocolVersion::negotiate(&v.into());
        assert_eq!(n("2025-06-18"), ProtocolVersion::V2025_06_18);
        assert_eq!(n("2024-11-05"), ProtocolVersion::V2024_11_05);
        assert_eq!(n("2099-01-01"), ProtocolVersion::V2025_11_25);
        assert_eq!(n("2026-07-28"), ProtocolVersion::V2025_11_25);
        let modern = ProtocolVersion::new("2026-07-28");
        assert!(!modern.is_handshake() && modern.is_modern());
        assert_eq!(modern.era(), Some(Era::Modern));
        assert_eq!(ProtocolVersion::new("2025-13-01").era(), None);
    }

    #[test]
    fn serde_and_display_are_the_wire_string() {
        let v: ProtocolVersion = serde_json::from_str("\"2025-03-26\"").unwrap();
        assert_eq!(v, ProtocolVersion::V2025_03_26);
        assert!(v.allows_batches() && !v.has_structured_output());
        assert_eq!(serde_json::to_string(&v).unwrap(), "\"2025-03-26\"");
        let unknown: ProtocolVersion = serde_json::from_str("\"draft\"").unwrap();
        assert_eq!(unknown.to_string(), "draft");
        assert_eq!(unknown, "draft");
        assert_eq!(
            ProtocolVersion::default(),
            ProtocolVersion::LATEST_HANDSHAKE
        );
    }
}
