//! Integrity and confidentiality for the `requestState` of multi round-trip requests.
//!
//! The revision makes `requestState` an attacker-controlled echo: a server hands it to the client
//! in an `input_required` result and gets it back on the retry. purra seals every state it mints
//! in an AES-256-GCM envelope under a server key and opens only what it sealed, unmodified. The
//! envelope binds the state to the originating request (method, tool/prompt name or URI, a digest
//! of the arguments), to the server (its name as audience), to the authenticated principal when
//! there is one, and to an expiry. Anything else is refused with -32602 "Invalid or expired
//! requestState"; the precise reason never goes on the wire.
//!
//! Token format: `v1.` then base64url (no padding) of key id (4 bytes), nonce (12 bytes) and the
//! sealed claims; the prefix and key id are authenticated as associated data.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};
use serde_json::Value;

use crate::jsonrpc::{ErrorObject, RpcErrorCode};

const PREFIX: &str = "v1.";
const KDF_INFO: &[u8] = b"purra/request-state/v1/aes-256-gcm";
const KID_INFO: &[u8] = b"purra/request-state/v1/kid:";
const KID_LEN: usize = 4;
const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;
const ENVELOPE_VERSION: u64 = 1;
/// How far in the future an issue time may lie (clock skew between instances sharing a key).
const FUTURE_SKEW_MS: u64 = 60_000;

/// Why keys for [`RequestStateSecurity`] were refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RequestStateKeyError {
    /// No key was given.
    NoKeys,
    /// A key is shorter than 32 bytes (its index).
    TooShort(usize),
    /// Two keys derive the same key id (their indexes).
    Duplicate(usize, usize),
}

impl std::fmt::Display for RequestStateKeyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestStateKeyError::NoKeys => f.write_str("request-state security needs a key"),
            RequestStateKeyError::TooShort(i) => write!(
                f,
                "request-state key {i} is shorter than 32 bytes of secret randomness"
            ),
            RequestStateKeyError::Duplicate(a, b) => {
                write!(f, "request-state keys {a} and {b} are the same key")
            }
        }
    }
}

impl std::error::Error for RequestStateKeyError {}

struct Slot {
    kid: [u8; KID_LEN],
    key: LessSafeKey,
}

/// How a server protects `requestState`: a key ring (the first key seals, every key opens, so
/// keys rotate without refusing state in flight) and how long a state stays valid.
#[derive(Clone)]
pub struct RequestStateSecurity {
    ring: Arc<Vec<Slot>>,
    ttl: Duration,
}

impl std::fmt::Debug for RequestStateSecurity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestStateSecurity")
            .field("keys", &self.ring.len())
            .field("ttl", &self.ttl)
            .finish()
    }
}

impl RequestStateSecurity {
    /// A key ring from secrets of at least 32 random bytes each; `keys[0]` seals. Instances that
    /// serve the same clients (behind a load balancer) must share it. The TTL is 10 minutes.
    pub fn new<K: AsRef<[u8]>>(keys: &[K]) -> Result<Self, RequestStateKeyError> {
        if keys.is_empty() {
            return Err(RequestStateKeyError::NoKeys);
        }
        let mut ring: Vec<Slot> = Vec::with_capacity(keys.len());
        for (i, secret) in keys.iter().enumerate() {
            let secret = secret.as_ref();
            if secret.len() < 32 {
                return Err(RequestStateKeyError::TooShort(i));
            }
            let mut key = [0u8; 32];
            ring::hkdf::Salt::new(ring::hkdf::HKDF_SHA256, &[])
                .extract(secret)
                .expand(&[KDF_INFO], ring::hkdf::HKDF_SHA256)
                .and_then(|okm| okm.fill(&mut key))
                .expect("32 bytes is a valid HKDF-SHA256 output length");
            let mut kid = [0u8; KID_LEN];
            let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
            ctx.update(KID_INFO);
            ctx.update(&key);
            kid.copy_from_slice(&ctx.finish().as_ref()[..KID_LEN]);
            if let Some(j) = ring.iter().position(|s| s.kid == kid) {
                return Err(RequestStateKeyError::Duplicate(j, i));
            }
            let key = LessSafeKey::new(
                UnboundKey::new(&AES_256_GCM, &key).expect("32 bytes is an AES-256 key"),
            );
            ring.push(Slot { kid, key });
        }
        Ok(RequestStateSecurity {
            ring: Arc::new(ring),
            ttl: Duration::from_secs(600),
        })
    }

    /// A key made now and known only to this process: enough for one process (stdio, a single
    /// HTTP instance); state minted before a restart is refused after it.
    pub fn ephemeral() -> Self {
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).expect("the OS random source");
        Self::new(&[secret]).expect("one fresh 32-byte key")
    }

    /// How long a minted state stays valid (default 10 minutes).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// Seals `payload` for the request `binding` describes.
    pub(crate) fn seal(&self, binding: &Binding<'_>, payload: Value) -> String {
        let now = now_ms();
        let mut claims = serde_json::json!({
            "v": ENVELOPE_VERSION,
            "iat": now,
            "exp": now.saturating_add(u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX)),
            "m": binding.method,
            "t": binding.target,
            "a": binding.args_digest,
            "aud": binding.audience,
            "s": payload,
        });
        if let Some(p) = binding.principal {
            claims["p"] = Value::String(principal_digest(p));
        }
        let slot = &self.ring[0];
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).expect("the OS random source");
        let mut sealed = serde_json::to_vec(&claims).expect("claims serialize");
        slot.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad(&slot.kid)),
                &mut sealed,
            )
            .expect("AES-GCM seals any length purra produces");
        let mut raw = Vec::with_capacity(KID_LEN + NONCE_LEN + sealed.len());
        raw.extend_from_slice(&slot.kid);
        raw.extend_from_slice(&nonce);
        raw.extend_from_slice(&sealed);
        format!(
            "{PREFIX}{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
        )
    }

    /// Opens a state sealed by [`seal`](Self::seal) for the same request; any other token, an
    /// expired one, or one minted for another request, server or principal is refused.
    pub(crate) fn open(&self, token: &str, binding: &Binding<'_>) -> Result<Value, Rejected> {
        let body = token.strip_prefix(PREFIX).ok_or(Rejected("malformed"))?;
        let mut raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(body)
            .map_err(|_| Rejected("malformed"))?;
        if raw.len() < KID_LEN + NONCE_LEN + TAG_LEN {
            return Err(Rejected("malformed"));
        }
        let slot = self
            .ring
            .iter()
            .find(|s| s.kid[..] == raw[..KID_LEN])
            .ok_or(Rejected("unknown key"))?;
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&raw[KID_LEN..KID_LEN + NONCE_LEN]);
        let opened = slot
            .key
            .open_in_place(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad(&slot.kid)),
                &mut raw[KID_LEN + NONCE_LEN..],
            )
            .map_err(|_| Rejected("seal"))?;
        let mut claims: Value =
            serde_json::from_slice(opened).map_err(|_| Rejected("malformed"))?;
        let now = now_ms();
        if claims.get("v").and_then(Value::as_u64) != Some(ENVELOPE_VERSION) {
            return Err(Rejected("malformed"));
        }
        match claims.get("iat").and_then(Value::as_u64) {
            Some(iat) if iat <= now.saturating_add(FUTURE_SKEW_MS) => {}
            _ => return Err(Rejected("issued in the future")),
        }
        match claims.get("exp").and_then(Value::as_u64) {
            Some(exp) if now < exp => {}
            _ => return Err(Rejected("expired")),
        }
        let str_claim = |k: &str| claims.get(k).and_then(Value::as_str);
        if str_claim("m") != Some(binding.method)
            || str_claim("t") != Some(binding.target)
            || str_claim("a") != Some(binding.args_digest.as_str())
        {
            return Err(Rejected("request binding"));
        }
        if str_claim("aud") != Some(binding.audience) {
            return Err(Rejected("audience"));
        }
        match (str_claim("p"), binding.principal) {
            (None, None) => {}
            (Some(claimed), Some(p)) if constant_time_eq(claimed, &principal_digest(p)) => {}
            _ => return Err(Rejected("principal")),
        }
        Ok(claims
            .as_object_mut()
            .and_then(|o| o.remove("s"))
            .unwrap_or(Value::Null))
    }
}

/// What one round's state is bound to.
#[derive(Debug, Clone)]
pub(crate) struct Binding<'a> {
    pub method: &'a str,
    /// The tool or prompt name, or the resource URI.
    pub target: &'a str,
    /// A digest of the arguments (empty object when there are none).
    pub args_digest: String,
    pub audience: &'a str,
    pub principal: Option<&'a str>,
}

impl<'a> Binding<'a> {
    /// The binding of a `tools/call`, `prompts/get` or `resources/read` with these params.
    pub fn of(
        method: &'a str,
        params: &'a Value,
        audience: &'a str,
        principal: Option<&'a str>,
    ) -> Binding<'a> {
        let (target, args) = if method == crate::types::methods::RESOURCES_READ {
            (params.get("uri"), None)
        } else {
            (params.get("name"), params.get("arguments"))
        };
        let empty = Value::Object(Default::default());
        let args = args.filter(|a| !a.is_null()).unwrap_or(&empty);
        Binding {
            method,
            target: target.and_then(Value::as_str).unwrap_or(""),
            args_digest: crate::modern::short_digest(
                crate::modern::canonical_json(args).as_bytes(),
                16,
            ),
            audience,
            principal,
        }
    }
}

/// A refused state; the reason is for logs and tests, never for the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rejected(pub &'static str);

impl Rejected {
    /// The wire error: -32602, the same for every reason.
    pub fn to_error(self) -> ErrorObject {
        ErrorObject::new(
            RpcErrorCode::INVALID_PARAMS,
            "Invalid or expired requestState",
        )
        .with_data(serde_json::json!({"reason": "invalid_request_state"}))
    }
}

fn aad(kid: &[u8; KID_LEN]) -> Vec<u8> {
    let mut a = PREFIX.as_bytes().to_vec();
    a.extend_from_slice(kid);
    a
}

fn principal_digest(p: &str) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    ctx.update(b"purra/request-state/principal:");
    ctx.update(p.as_bytes());
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&ctx.finish().as_ref()[..16])
}

fn constant_time_eq(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn binding<'a>(params: &'a Value, principal: Option<&'a str>) -> Binding<'a> {
        Binding::of("tools/call", params, "srv", principal)
    }

    #[test]
    fn a_sealed_state_opens_only_for_its_own_request() {
        let sec = RequestStateSecurity::ephemeral();
        let params = json!({"name": "t", "arguments": {"a": 1, "b": [2]}});
        let token = sec.seal(&binding(&params, None), json!({"k": "v"}));
        assert!(token.starts_with("v1."));
        assert_eq!(
            sec.open(&token, &binding(&params, None)),
            Ok(json!({"k": "v"}))
        );
        // Argument order does not matter; their values do.
        let reordered = json!({"arguments": {"b": [2], "a": 1}, "name": "t"});
        assert!(sec.open(&token, &binding(&reordered, None)).is_ok());
        let other = json!({"name": "t", "arguments": {"a": 2, "b": [2]}});
        assert_eq!(
            sec.open(&token, &binding(&other, None)),
            Err(Rejected("request binding"))
        );
        let prompt = Binding::of("prompts/get", &params, "srv", None);
        assert_eq!(sec.open(&token, &prompt), Err(Rejected("request binding")));
        let aud = Binding::of("tools/call", &params, "other", None);
        assert_eq!(sec.open(&token, &aud), Err(Rejected("audience")));
        assert_eq!(
            sec.open(&token, &binding(&params, Some("alice"))),
            Err(Rejected("principal"))
        );
    }

    #[test]
    fn tampering_expiry_and_foreign_keys_are_refused() {
        let sec = RequestStateSecurity::ephemeral();
        let params = json!({"name": "t"});
        let token = sec.seal(&binding(&params, Some("alice")), json!(1));
        assert_eq!(
            sec.open(&token, &binding(&params, Some("alice"))),
            Ok(json!(1))
        );
        assert_eq!(
            sec.open(&token, &binding(&params, Some("bob"))),
            Err(Rejected("principal"))
        );
        let mut bytes = token.clone().into_bytes();
        let last = bytes.len() - 1;
        bytes[last] = if bytes[last] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(bytes).unwrap();
        assert!(sec
            .open(&tampered, &binding(&params, Some("alice")))
            .is_err());
        assert_eq!(
            sec.open("garbage", &binding(&params, None)),
            Err(Rejected("malformed"))
        );
        let other = RequestStateSecurity::ephemeral();
        assert_eq!(
            other.open(&token, &binding(&params, Some("alice"))),
            Err(Rejected("unknown key"))
        );
        let expired = sec
            .clone()
            .ttl(Duration::ZERO)
            .seal(&binding(&params, None), json!(1));
        assert_eq!(
            sec.open(&expired, &binding(&params, None)),
            Err(Rejected("expired"))
        );
    }

    #[test]
    fn keys_rotate_and_short_keys_are_refused() {
        let old = [7u8; 32];
        let new = [9u8; 32];
        let before = RequestStateSecurity::new(&[old]).unwrap();
        let params = json!({"name": "t"});
        let token = before.seal(&binding(&params, None), json!("s"));
        let after = RequestStateSecurity::new(&[new, old]).unwrap();
        assert_eq!(after.open(&token, &binding(&params, None)), Ok(json!("s")));
        assert_eq!(
            RequestStateSecurity::new(&[[1u8; 16]]).unwrap_err(),
            RequestStateKeyError::TooShort(0)
        );
        assert_eq!(
            RequestStateSecurity::new(&[old, old]).unwrap_err(),
            RequestStateKeyError::Duplicate(0, 1)
        );
    }
}
