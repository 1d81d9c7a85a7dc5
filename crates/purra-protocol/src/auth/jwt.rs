//! JSON Web Tokens as far as MCP authorization needs them: decoding a compact JWS, verifying its
//! signature against a JWK (RSA PKCS#1 and PSS, ECDSA P-256 and P-384, Ed25519), and signing a
//! client assertion with a PKCS#8 private key. Cryptography is ring's.

use std::fmt;

use ring::signature::{self, KeyPair as _, UnparsedPublicKey};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::{b64url, b64url_decode};

/// The bound on a token's length: a JWT longer than this is refused before it is decoded.
pub(crate) const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// A JWS signature algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SigningAlgorithm {
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    RS256,
    /// RSASSA-PKCS1-v1_5 with SHA-384.
    RS384,
    /// RSASSA-PKCS1-v1_5 with SHA-512.
    RS512,
    /// RSASSA-PSS with SHA-256.
    PS256,
    /// RSASSA-PSS with SHA-384.
    PS384,
    /// RSASSA-PSS with SHA-512.
    PS512,
    /// ECDSA P-256 with SHA-256.
    ES256,
    /// ECDSA P-384 with SHA-384.
    ES384,
    /// Ed25519.
    EdDSA,
}

impl SigningAlgorithm {
    /// The JWS `alg` name.
    pub fn name(self) -> &'static str {
        match self {
            SigningAlgorithm::RS256 => "RS256",
            SigningAlgorithm::RS384 => "RS384",
            SigningAlgorithm::RS512 => "RS512",
            SigningAlgorithm::PS256 => "PS256",
            SigningAlgorithm::PS384 => "PS384",
            SigningAlgorithm::PS512 => "PS512",
            SigningAlgorithm::ES256 => "ES256",
            SigningAlgorithm::ES384 => "ES384",
            SigningAlgorithm::EdDSA => "EdDSA",
        }
    }

    /// The algorithm named `name`; `None` for `none`, HMAC and anything unknown.
    pub fn from_name(name: &str) -> Option<SigningAlgorithm> {
        Some(match name {
            "RS256" => SigningAlgorithm::RS256,
            "RS384" => SigningAlgorithm::RS384,
            "RS512" => SigningAlgorithm::RS512,
            "PS256" => SigningAlgorithm::PS256,
            "PS384" => SigningAlgorithm::PS384,
            "PS512" => SigningAlgorithm::PS512,
            "ES256" => SigningAlgorithm::ES256,
            "ES384" => SigningAlgorithm::ES384,
            "EdDSA" => SigningAlgorithm::EdDSA,
            _ => return None,
        })
    }

    fn key_type(self) -> &'static str {
        match self {
            SigningAlgorithm::ES256 | SigningAlgorithm::ES384 => "EC",
            SigningAlgorithm::EdDSA => "OKP",
            _ => "RSA",
        }
    }
}

impl fmt::Display for SigningAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A public JSON Web Key (RFC 7517), the fields signature verification uses.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Jwk {
    pub kty: String,
    #[serde(default)]
    pub kid: Option<String>,
    #[serde(default)]
    pub alg: Option<String>,
    #[serde(default, rename = "use")]
    pub use_: Option<String>,
    #[serde(default)]
    pub n: Option<String>,
    #[serde(default)]
    pub e: Option<String>,
    #[serde(default)]
    pub crv: Option<String>,
    #[serde(default)]
    pub x: Option<String>,
    #[serde(default)]
    pub y: Option<String>,
}

/// A JWK Set.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct JwkSet {
    pub keys: Vec<Jwk>,
}

impl Jwk {
    /// Whether this key may verify a signature made with `alg`: the key type fits, and the
    /// key's own `alg` and `use`, when it states them, agree.
    pub fn fits(&self, alg: SigningAlgorithm) -> bool {
        self.kty == alg.key_type()
            && self.alg.as_deref().is_none_or(|a| a == alg.name())
            && self.use_.as_deref().is_none_or(|u| u == "sig")
            && match alg {
                SigningAlgorithm::ES256 => self.crv.as_deref() == Some("P-256"),
                SigningAlgorithm::ES384 => self.crv.as_deref() == Some("P-384"),
                SigningAlgorithm::EdDSA => self.crv.as_deref() == Some("Ed25519"),
                _ => true,
            }
    }

    /// Verifies `sig` over `message` with this key and `alg`.
    pub fn verify(&self, alg: SigningAlgorithm, message: &[u8], sig: &[u8]) -> bool {
        if !self.fits(alg) {
            return false;
        }
        let field = |f: &Option<String>| f.as_deref().and_then(b64url_decode);
        match alg {
            SigningAlgorithm::RS256
            | SigningAlgorithm::RS384
            | SigningAlgorithm::RS512
            | SigningAlgorithm::PS256
            | SigningAlgorithm::PS384
            | SigningAlgorithm::PS512 => {
                let (Some(n), Some(e)) = (field(&self.n), field(&self.e)) else {
                    return false;
                };
                let params: &signature::RsaParameters = match alg {
                    SigningAlgorithm::RS256 => &signature::RSA_PKCS1_2048_8192_SHA256,
                    SigningAlgorithm::RS384 => &signature::RSA_PKCS1_2048_8192_SHA384,
                    SigningAlgorithm::RS512 => &signature::RSA_PKCS1_2048_8192_SHA512,
                    SigningAlgorithm::PS256 => &signature::RSA_PSS_2048_8192_SHA256,
                    SigningAlgorithm::PS384 => &signature::RSA_PSS_2048_8192_SHA384,
                    _ => &signature::RSA_PSS_2048_8192_SHA512,
                };
                signature::RsaPublicKeyComponents { n: &n, e: &e }
                    .verify(params, message, sig)
                    .is_ok()
            }
            SigningAlgorithm::ES256 | SigningAlgorithm::ES384 => {
                let (Some(x), Some(y)) = (field(&self.x), field(&self.y)) else {
                    return false;
                };
                let (alg, len): (&'static signature::EcdsaVerificationAlgorithm, usize) =
                    if alg == SigningAlgorithm::ES256 {
                        (&signature::ECDSA_P256_SHA256_FIXED, 32)
                    } else {
                        (&signature::ECDSA_P384_SHA384_FIXED, 48)
                    };
                if x.len() != len || y.len() != len {
                    return false;
                }
                let mut point = Vec::with_capacity(1 + 2 * len);
                point.push(4);
                point.extend_from_slice(&x);
                point.extend_from_slice(&y);
                UnparsedPublicKey::new(alg, point)
                    .verify(message, sig)
                    .is_ok()
            }
            SigningAlgorithm::EdDSA => {
                let Some(x) = field(&self.x) else {
                    return false;
                };
                UnparsedPublicKey::new(&signature::ED25519, x)
                    .verify(message, sig)
                    .is_ok()
            }
        }
    }
}

/// The protected header fields a verifier looks at.
#[derive(Debug, Deserialize)]
pub(crate) struct Header {
    pub alg: String,
    #[serde(default)]
    pub kid: Option<String>,
    #[serde(default)]
    pub typ: Option<String>,
    #[serde(default)]
    pub crit: Option<Vec<String>>,
}

/// A compact JWS split and decoded, signature not yet verified.
pub(crate) struct Decoded {
    pub header: Header,
    pub claims: Map<String, Value>,
    /// `header.payload`, the signed bytes.
    pub signing_input_len: usize,
    pub signature: Vec<u8>,
}

/// Splits and decodes a compact JWS (`header.payload.signature`); why not, as a fixed phrase
/// that names no part of the token.
pub(crate) fn decode(token: &str) -> Result<Decoded, &'static str> {
    if token.len() > MAX_TOKEN_BYTES {
        return Err("the token is too long");
    }
    let mut parts = token.split('.');
    let (Some(h), Some(p), Some(s), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("the token is not a JWT");
    };
    let header: Header = b64url_decode(h)
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or("the token header is malformed")?;
    let claims: Map<String, Value> = b64url_decode(p)
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or("the token claims are malformed")?;
    let signature = b64url_decode(s).ok_or("the token signature is malformed")?;
    Ok(Decoded {
        header,
        claims,
        signing_input_len: h.len() + 1 + p.len(),
        signature,
    })
}

/// A private key that signs client assertions (`private_key_jwt`).
pub(crate) enum PrivateKey {
    Ecdsa(signature::EcdsaKeyPair, SigningAlgorithm),
    Rsa(signature::RsaKeyPair, SigningAlgorithm),
    Ed25519(signature::Ed25519KeyPair),
}

impl PrivateKey {
    /// Reads a PKCS#8 key (PEM `PRIVATE KEY`, or DER) for `alg`.
    pub fn from_pkcs8(pem_or_der: &[u8], alg: SigningAlgorithm) -> Result<PrivateKey, String> {
        let der = pem_to_der(pem_or_der)?;
        let rng = ring::rand::SystemRandom::new();
        match alg {
            SigningAlgorithm::ES256 | SigningAlgorithm::ES384 => {
                let a = if alg == SigningAlgorithm::ES256 {
                    &signature::ECDSA_P256_SHA256_FIXED_SIGNING
                } else {
                    &signature::ECDSA_P384_SHA384_FIXED_SIGNING
                };
                signature::EcdsaKeyPair::from_pkcs8(a, &der, &rng)
                    .map(|k| PrivateKey::Ecdsa(k, alg))
                    .map_err(|e| format!("not a PKCS#8 {alg} key: {e}"))
            }
            SigningAlgorithm::EdDSA => signature::Ed25519KeyPair::from_pkcs8_maybe_unchecked(&der)
                .map(PrivateKey::Ed25519)
                .map_err(|e| format!("not a PKCS#8 Ed25519 key: {e}")),
            _ => signature::RsaKeyPair::from_pkcs8(&der)
                .map(|k| PrivateKey::Rsa(k, alg))
                .map_err(|e| format!("not a PKCS#8 RSA key: {e}")),
        }
    }

    pub fn algorithm(&self) -> SigningAlgorithm {
        match self {
            PrivateKey::Ecdsa(_, a) | PrivateKey::Rsa(_, a) => *a,
            PrivateKey::Ed25519(_) => SigningAlgorithm::EdDSA,
        }
    }

    /// Signs `claims` as a compact JWS with header `{alg, typ: JWT}` (and `kid` when given).
    pub fn sign(&self, kid: Option<&str>, claims: &Value) -> Result<String, String> {
        self.sign_typed(kid, "JWT", claims)
    }

    /// Signs `claims` as a compact JWS with header `{alg, typ}` (and `kid` when given): `at+jwt`
    /// for an access token (RFC 9068).
    pub fn sign_typed(
        &self,
        kid: Option<&str>,
        typ: &str,
        claims: &Value,
    ) -> Result<String, String> {
        let mut header = serde_json::json!({"alg": self.algorithm().name(), "typ": typ});
        if let Some(kid) = kid {
            header["kid"] = Value::String(kid.to_owned());
        }
        let input = format!(
            "{}.{}",
            b64url(header.to_string().as_bytes()),
            b64url(claims.to_string().as_bytes())
        );
        let rng = ring::rand::SystemRandom::new();
        let sig = match self {
            PrivateKey::Ecdsa(k, _) => k
                .sign(&rng, input.as_bytes())
                .map_err(|_| "ECDSA signing failed".to_owned())?
                .as_ref()
                .to_vec(),
            PrivateKey::Ed25519(k) => k.sign(input.as_bytes()).as_ref().to_vec(),
            PrivateKey::Rsa(k, alg) => {
                let padding: &'static dyn signature::RsaEncoding = match alg {
                    SigningAlgorithm::RS384 => &signature::RSA_PKCS1_SHA384,
                    SigningAlgorithm::RS512 => &signature::RSA_PKCS1_SHA512,
                    SigningAlgorithm::PS256 => &signature::RSA_PSS_SHA256,
                    SigningAlgorithm::PS384 => &signature::RSA_PSS_SHA384,
                    SigningAlgorithm::PS512 => &signature::RSA_PSS_SHA512,
                    _ => &signature::RSA_PKCS1_SHA256,
                };
                let mut sig = vec![0u8; k.public().modulus_len()];
                k.sign(padding, &rng, input.as_bytes(), &mut sig)
                    .map_err(|_| "RSA signing failed".to_owned())?;
                sig
            }
        };
        Ok(format!("{input}.{}", b64url(&sig)))
    }

    /// The public half as a JWK (for publishing a JWKS, and for tests).
    pub fn public_jwk(&self, kid: Option<&str>) -> Value {
        let mut jwk = match self {
            PrivateKey::Ecdsa(k, alg) => {
                let p = k.public_key().as_ref();
                let n = (p.len() - 1) / 2;
                serde_json::json!({
                    "kty": "EC",
                    "crv": if *alg == SigningAlgorithm::ES256 { "P-256" } else { "P-384" },
                    "x": b64url(&p[1..1 + n]),
                    "y": b64url(&p[1 + n..]),
                    "alg": alg.name(),
                })
            }
            PrivateKey::Ed25519(k) => serde_json::json!({
                "kty": "OKP", "crv": "Ed25519", "x": b64url(k.public_key().as_ref()), "alg": "EdDSA",
            }),
            PrivateKey::Rsa(k, alg) => {
                let c: signature::RsaPublicKeyComponents<Vec<u8>> = k.public().into();
                serde_json::json!({
                    "kty": "RSA", "n": b64url(&c.n), "e": b64url(&c.e), "alg": alg.name(),
                })
            }
        };
        if let Some(kid) = kid {
            jwk["kid"] = Value::String(kid.to_owned());
        }
        jwk
    }
}

/// The DER inside a PEM `PRIVATE KEY` block, or the input when it is already DER.
fn pem_to_der(input: &[u8]) -> Result<Vec<u8>, String> {
    let Ok(text) = std::str::from_utf8(input) else {
        return Ok(input.to_vec());
    };
    if !text.contains("-----BEGIN") {
        return Ok(input.to_vec());
    }
    if text.contains("-----BEGIN EC PRIVATE KEY") || text.contains("-----BEGIN RSA PRIVATE KEY") {
        return Err("the key is not PKCS#8 (convert it: openssl pkcs8 -topk8 -nocrypt)".into());
    }
    let start = text
        .find("-----BEGIN PRIVATE KEY-----")
        .ok_or("no PEM PRIVATE KEY block")?;
    let rest = &text[start + "-----BEGIN PRIVATE KEY-----".len()..];
    let end = rest
        .find("-----END PRIVATE KEY-----")
        .ok_or("the PEM block does not end")?;
    let b64: String = rest[..end].chars().filter(|c| !c.is_whitespace()).collect();
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|_| "the PEM block is not base64".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn es256() -> PrivateKey {
        let rng = ring::rand::SystemRandom::new();
        let doc = signature::EcdsaKeyPair::generate_pkcs8(
            &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            &rng,
        )
        .unwrap();
        PrivateKey::from_pkcs8(doc.as_ref(), SigningAlgorithm::ES256).unwrap()
    }

    #[test]
    fn sign_then_verify() {
        let key = es256();
        let jwk: Jwk = serde_json::from_value(key.public_jwk(Some("k1"))).unwrap();
        let token = key
            .sign(Some("k1"), &serde_json::json!({"sub": "ada"}))
            .unwrap();
        let d = decode(&token).unwrap();
        assert_eq!(d.header.alg, "ES256");
        assert_eq!(d.header.kid.as_deref(), Some("k1"));
        assert_eq!(d.claims["sub"], "ada");
        let input = &token.as_bytes()[..d.signing_input_len];
        assert!(jwk.verify(SigningAlgorithm::ES256, input, &d.signature));
        // Another key, another algorithm, a changed payload: all refused.
        let other: Jwk = serde_json::from_value(es256().public_jwk(None)).unwrap();
        assert!(!other.verify(SigningAlgorithm::ES256, input, &d.signature));
        assert!(!jwk.verify(SigningAlgorithm::RS256, input, &d.signature));
        let mut changed = input.to_vec();
        changed[input.len() - 2] ^= 1;
        assert!(!jwk.verify(SigningAlgorithm::ES256, &changed, &d.signature));
    }

    #[test]
    fn pem_round_trip() {
        let rng = ring::rand::SystemRandom::new();
        let doc = signature::EcdsaKeyPair::generate_pkcs8(
            &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            &rng,
        )
        .unwrap();
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD.encode(doc.as_ref());
        let pem = format!("-----BEGIN PRIVATE KEY-----\n{b64}\n-----END PRIVATE KEY-----\n");
        assert!(PrivateKey::from_pkcs8(pem.as_bytes(), SigningAlgorithm::ES256).is_ok());
        assert!(
            PrivateKey::from_pkcs8(b"-----BEGIN EC PRIVATE KEY-----", SigningAlgorithm::ES256)
                .is_err()
        );
    }

    #[test]
    fn malformed_tokens() {
        assert_eq!(decode("a.b").err(), Some("the token is not a JWT"));
        assert_eq!(decode("a.b.c.d").err(), Some("the token is not a JWT"));
        assert_eq!(
            decode("!!.e30.AA").err(),
            Some("the token header is malformed")
        );
        assert_eq!(
            decode(&"x".repeat(MAX_TOKEN_BYTES + 1)).err(),
            Some("the token is too long")
        );
    }
}
