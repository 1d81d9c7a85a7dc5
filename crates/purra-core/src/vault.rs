//! Sealing credentials for the store: XChaCha20-Poly1305 under a keyring of 32-byte keys, each
//! sealed blob bound to the record it belongs to.
//!
//! A [`Keyring`] is read from a key file or an environment variable ([`KEYS_ENV`]) holding one
//! `id:base64key` per line (standard base64 of exactly 32 bytes; blank lines and lines starting
//! with `#` are skipped); the first key is the current one, which seals, and every listed key
//! opens. Rotating is: put a new key on the first line, keep the old ones below, run
//! [`rotate`] (`purra credentials rotate`), which re-seals every record under the current key
//! (compare-and-swap per record), then remove the old lines.
//!
//! A sealed blob is `pcv1`, the key id's length (one byte) and the key id, a random 24-byte nonce,
//! and the ciphertext with its 16-byte tag. The associated data is the record's principal,
//! upstream, name and kind and the key id, each length-prefixed: a blob copied to another
//! record (another principal, upstream, name or kind) does not open.
//!
//! Failures are [`VaultError`]s naming the key id and the record, never a key or a plaintext; a
//! [`Secret`]'s `Debug` is `[redacted]`, and its buffer is zeroed when dropped (as are keys).

use crate::credential::{CredentialFilter, CredentialKey, CredentialKind, CredentialStore};
use crate::credential::{CredentialWrite, SealedSecret};
use crate::store::StoreError;
use base64::Engine as _;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use std::fmt;
use std::path::Path;
use std::time::SystemTime;
use zeroize::Zeroizing;

/// The environment variable a keyring may be read from (the key file's format).
pub const KEYS_ENV: &str = "PURRA_CREDENTIAL_KEYS";
/// The longest key file (or variable) read, in bytes.
pub const MAX_KEYRING_TEXT: usize = 64 * 1024;
/// The most keys a keyring holds.
pub const MAX_KEYS: usize = 256;
/// The longest plaintext sealed, in bytes (well under the store's bound on sealed bytes).
pub const MAX_PLAINTEXT: usize = 32 * 1024;

const MAGIC: &[u8; 4] = b"pcv1";
const NONCE_LEN: usize = 24;
const TAG_LEN: usize = 16;
const AD_CONTEXT: &[u8] = b"purra credential v1\0";

/// A secret in memory (a token, a personal access token): `Debug` prints `[redacted]`, and the
/// buffer is zeroed when dropped.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Zeroizing<Vec<u8>>);

impl Secret {
    /// Holds `bytes` as a secret.
    pub fn new(bytes: Vec<u8>) -> Secret {
        Secret(Zeroizing::new(bytes))
    }

    /// The secret's bytes, for the one place that uses them.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }

    /// The secret's length in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the secret is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<String> for Secret {
    fn from(text: String) -> Secret {
        Secret::new(text.into_bytes())
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Why sealing, opening or rotating failed. The text names key ids and records, never a key or a
/// plaintext.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum VaultError {
    /// The key file or variable is malformed (the text names the line, never its key).
    Keyring(String),
    /// A record is sealed under a key id the keyring does not hold.
    UnknownKey {
        /// The key id the record names.
        id: String,
        /// The record.
        key: CredentialKey,
    },
    /// A record does not open under its key: the key with that id is not the one it was sealed
    /// with, or the blob was altered or copied from another record.
    Unopenable {
        /// The key id the record names.
        id: String,
        /// The record.
        key: CredentialKey,
    },
    /// A record's bytes are not a sealed blob.
    Malformed(CredentialKey),
    /// The plaintext is longer than [`MAX_PLAINTEXT`].
    TooLong,
    /// No randomness for a nonce.
    Randomness(String),
    /// The store failed.
    Store(StoreError),
}

impl fmt::Display for VaultError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VaultError::Keyring(why) => write!(f, "credential keys: {why}"),
            VaultError::UnknownKey { id, key } => write!(
                f,
                "the credential {key} is sealed under key `{id}`, which the credential keys do \
                 not hold (add its line back)"
            ),
            VaultError::Unopenable { id, key } => write!(
                f,
                "the credential {key} does not open under key `{id}`: that key is not the one it \
                 was sealed with, or the record was altered or moved from another principal, \
                 upstream or name"
            ),
            VaultError::Malformed(key) => {
                write!(f, "the credential {key} is not a sealed credential")
            }
            VaultError::TooLong => {
                write!(f, "a credential secret is at most {MAX_PLAINTEXT} bytes")
            }
            VaultError::Randomness(why) => write!(f, "no randomness for a nonce: {why}"),
            VaultError::Store(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for VaultError {}

impl From<StoreError> for VaultError {
    fn from(e: StoreError) -> Self {
        VaultError::Store(e)
    }
}

/// One key of a keyring.
#[derive(Clone)]
struct RingKey {
    id: String,
    key: Zeroizing<[u8; 32]>,
}

/// The keys credentials are sealed with: the first is the current one (it seals), every one opens.
/// `Debug` shows the ids only.
#[derive(Clone)]
pub struct Keyring {
    keys: Vec<RingKey>,
}

impl fmt::Debug for Keyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyring")
            .field("ids", &self.ids())
            .field("keys", &"[redacted]")
            .finish()
    }
}

/// Whether `id` is a key id: 1 to 64 of `A-Z a-z 0-9 . _ -`.
fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

impl Keyring {
    /// Reads a keyring from its text: one `id:base64key` per line, the first the current key.
    pub fn parse(text: &str) -> Result<Keyring, VaultError> {
        if text.len() > MAX_KEYRING_TEXT {
            return Err(VaultError::Keyring(format!(
                "longer than {MAX_KEYRING_TEXT} bytes"
            )));
        }
        let mut keys: Vec<RingKey> = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let n = n + 1;
            let Some((id, b64)) = line.split_once(':') else {
                return Err(VaultError::Keyring(format!("line {n}: not `id:base64key`")));
            };
            let id = id.trim();
            if !valid_id(id) {
                return Err(VaultError::Keyring(format!(
                    "line {n}: a key id is 1 to 64 of A-Z a-z 0-9 . _ -"
                )));
            }
            let bytes = Zeroizing::new(
                base64::engine::general_purpose::STANDARD
                    .decode(b64.trim())
                    .map_err(|_| {
                        VaultError::Keyring(format!("line {n}: key `{id}` is not standard base64"))
                    })?,
            );
            let key: [u8; 32] = bytes.as_slice().try_into().map_err(|_| {
                VaultError::Keyring(format!(
                    "line {n}: key `{id}` is {} bytes, not 32",
                    bytes.len()
                ))
            })?;
            if keys.iter().any(|k| k.id == id) {
                return Err(VaultError::Keyring(format!(
                    "line {n}: key id `{id}` is listed twice"
                )));
            }
            if keys.len() == MAX_KEYS {
                return Err(VaultError::Keyring(format!("more than {MAX_KEYS} keys")));
            }
            keys.push(RingKey {
                id: id.to_owned(),
                key: Zeroizing::new(key),
            });
        }
        if keys.is_empty() {
            return Err(VaultError::Keyring(
                "no key (one `id:base64key` a line)".into(),
            ));
        }
        Ok(Keyring { keys })
    }

    /// Reads a keyring from a key file.
    pub fn from_file(path: &Path) -> Result<Keyring, VaultError> {
        use std::io::Read as _;
        let file = std::fs::File::open(path)
            .map_err(|e| VaultError::Keyring(format!("cannot read {}: {e}", path.display())))?;
        // Room for all of it up front: a growing buffer would leave copies of keys behind.
        let mut text = Zeroizing::new(String::with_capacity(MAX_KEYRING_TEXT + 1));
        file.take(MAX_KEYRING_TEXT as u64 + 1)
            .read_to_string(&mut text)
            .map_err(|e| VaultError::Keyring(format!("cannot read {}: {e}", path.display())))?;
        Keyring::parse(&text).map_err(|e| match e {
            VaultError::Keyring(why) => VaultError::Keyring(format!("{}: {why}", path.display())),
            other => other,
        })
    }

    /// Reads a keyring from the environment variable `name` (the key file's format); `None` when
    /// it is not set.
    pub fn from_env(name: &str) -> Result<Option<Keyring>, VaultError> {
        match std::env::var(name) {
            Ok(text) => {
                let text = Zeroizing::new(text);
                Keyring::parse(&text).map(Some).map_err(|e| match e {
                    VaultError::Keyring(why) => VaultError::Keyring(format!("{name}: {why}")),
                    other => other,
                })
            }
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => {
                Err(VaultError::Keyring(format!("{name} is not UTF-8")))
            }
        }
    }

    /// A new key file line `id:base64key` with 32 random bytes (`id` must be a key id).
    pub fn new_key_line(id: &str) -> Result<Zeroizing<String>, VaultError> {
        if !valid_id(id) {
            return Err(VaultError::Keyring(
                "a key id is 1 to 64 of A-Z a-z 0-9 . _ -".into(),
            ));
        }
        let mut key = Zeroizing::new([0u8; 32]);
        getrandom::fill(key.as_mut()).map_err(|e| VaultError::Randomness(e.to_string()))?;
        Ok(Zeroizing::new(format!(
            "{id}:{}",
            base64::engine::general_purpose::STANDARD.encode(key.as_ref())
        )))
    }

    /// The current key's id (the one that seals).
    pub fn current_id(&self) -> &str {
        &self.keys[0].id
    }

    /// Every key id, the current one first.
    pub fn ids(&self) -> Vec<&str> {
        self.keys.iter().map(|k| k.id.as_str()).collect()
    }

    /// Seals `secret` for the record at `key` of `kind` under the current key, with a new random
    /// nonce.
    pub fn seal(
        &self,
        key: &CredentialKey,
        kind: CredentialKind,
        secret: &Secret,
    ) -> Result<SealedSecret, VaultError> {
        if secret.len() > MAX_PLAINTEXT {
            return Err(VaultError::TooLong);
        }
        let current = &self.keys[0];
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(|e| VaultError::Randomness(e.to_string()))?;
        let cipher = XChaCha20Poly1305::new_from_slice(current.key.as_ref())
            .map_err(|_| VaultError::Keyring("a key is not 32 bytes".into()))?;
        let ad = associated_data(key, kind, &current.id);
        let sealed = cipher
            .encrypt(
                &XNonce::from(nonce),
                Payload {
                    msg: secret.expose(),
                    aad: &ad,
                },
            )
            .map_err(|_| VaultError::TooLong)?;
        let mut blob = Vec::with_capacity(5 + current.id.len() + NONCE_LEN + sealed.len());
        blob.extend_from_slice(MAGIC);
        blob.push(current.id.len() as u8);
        blob.extend_from_slice(current.id.as_bytes());
        blob.extend_from_slice(&nonce);
        blob.extend_from_slice(&sealed);
        Ok(SealedSecret(blob))
    }

    /// Opens the blob sealed for the record at `key` of `kind`, with the key it names.
    pub fn open(
        &self,
        key: &CredentialKey,
        kind: CredentialKind,
        sealed: &SealedSecret,
    ) -> Result<Secret, VaultError> {
        let (id, nonce, ciphertext) =
            split(&sealed.0).ok_or_else(|| VaultError::Malformed(key.clone()))?;
        let Some(ring_key) = self.keys.iter().find(|k| k.id == id) else {
            return Err(VaultError::UnknownKey {
                id: id.to_owned(),
                key: key.clone(),
            });
        };
        let cipher = XChaCha20Poly1305::new_from_slice(ring_key.key.as_ref())
            .map_err(|_| VaultError::Keyring("a key is not 32 bytes".into()))?;
        let ad = associated_data(key, kind, id);
        let nonce: [u8; NONCE_LEN] = nonce
            .try_into()
            .map_err(|_| VaultError::Malformed(key.clone()))?;
        cipher
            .decrypt(
                &XNonce::from(nonce),
                Payload {
                    msg: ciphertext,
                    aad: &ad,
                },
            )
            .map(Secret::new)
            .map_err(|_| VaultError::Unopenable {
                id: id.to_owned(),
                key: key.clone(),
            })
    }
}

/// The id of the key a sealed blob names, if it is a sealed blob (no key needed).
pub fn sealed_key_id(sealed: &SealedSecret) -> Option<&str> {
    split(&sealed.0).map(|(id, _, _)| id)
}

/// A blob's key id, nonce and ciphertext.
fn split(blob: &[u8]) -> Option<(&str, &[u8], &[u8])> {
    let rest = blob.strip_prefix(MAGIC.as_slice())?;
    let (&len, rest) = rest.split_first()?;
    let len = usize::from(len);
    if rest.len() < len + NONCE_LEN + TAG_LEN {
        return None;
    }
    let (id, rest) = rest.split_at(len);
    let id = std::str::from_utf8(id).ok().filter(|id| valid_id(id))?;
    let (nonce, ciphertext) = rest.split_at(NONCE_LEN);
    Some((id, nonce, ciphertext))
}

/// The associated data binding a blob to its record and key id: a context string, then each part
/// with its length (four bytes, big-endian) before it.
fn associated_data(key: &CredentialKey, kind: CredentialKind, id: &str) -> Vec<u8> {
    let mut ad = AD_CONTEXT.to_vec();
    for part in [
        key.principal.as_str(),
        key.upstream.as_str(),
        key.name.as_str(),
        kind.as_str(),
        id,
    ] {
        ad.extend_from_slice(&(part.len() as u32).to_be_bytes());
        ad.extend_from_slice(part.as_bytes());
    }
    ad
}

/// What [`rotate`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rotation {
    /// Records re-sealed under the current key.
    pub resealed: u64,
    /// Records already sealed under it.
    pub current: u64,
    /// Records that changed while being re-sealed and were read again (each ended re-sealed or
    /// already current).
    pub raced: u64,
}

/// How many times [`rotate`] reads a record again that keeps changing under it.
const ROTATE_TRIES: u32 = 16;

/// Re-seals every record of `store` not sealed under `keyring`'s current key, each with a
/// compare-and-swap on its version (a record written meanwhile is read again); `at` is recorded
/// as each re-sealed record's `updated_at`. After it, every key but the current one can be
/// removed from the key file. Stops at the first record that does not open.
pub async fn rotate(
    store: &dyn CredentialStore,
    keyring: &Keyring,
    at: SystemTime,
) -> Result<Rotation, VaultError> {
    let mut done = Rotation::default();
    for info in store.credentials(CredentialFilter::default()).await? {
        let mut tries = 0;
        loop {
            let Some(record) = store.credential(info.key.clone()).await? else {
                break; // Deleted meanwhile: nothing to re-seal.
            };
            let key = &record.info.key;
            if sealed_key_id(&record.sealed) == Some(keyring.current_id()) {
                done.current += 1;
                break;
            }
            let secret = keyring.open(key, record.info.kind, &record.sealed)?;
            let sealed = keyring.seal(key, record.info.kind, &secret)?;
            let write = CredentialWrite {
                kind: record.info.kind,
                sealed,
                meta: record.info.meta.clone(),
                at,
            };
            if store
                .replace_credential_if_version(key.clone(), record.info.version, write)
                .await?
            {
                done.resealed += 1;
                break;
            }
            done.raced += 1;
            tries += 1;
            if tries == ROTATE_TRIES {
                return Err(VaultError::Store(StoreError::Conflict(
                    "a credential kept changing while it was re-sealed",
                )));
            }
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(lines: &[&str]) -> Keyring {
        Keyring::parse(&lines.join("\n")).unwrap()
    }

    fn line(id: &str) -> String {
        Keyring::new_key_line(id).unwrap().to_string()
    }

    #[test]
    fn a_sealed_secret_opens_only_for_its_own_record_and_kind() {
        let k1 = line("k1");
        let keys = ring(&[&k1]);
        let alice = CredentialKey::new("alice", "github", "token");
        let secret = Secret::from("ghp_0123456789abcdef".to_owned());
        let sealed = keys.seal(&alice, CredentialKind::Secret, &secret).unwrap();
        assert!(
            !sealed.0.windows(secret.len()).any(|w| w == secret.expose()),
            "the plaintext is not in the blob"
        );
        assert_eq!(sealed_key_id(&sealed), Some("k1"));
        assert_eq!(
            keys.open(&alice, CredentialKind::Secret, &sealed).unwrap(),
            secret
        );
        // A nonce per seal: the same secret seals differently each time.
        assert_ne!(
            keys.seal(&alice, CredentialKind::Secret, &secret).unwrap(),
            sealed
        );
        for moved in [
            CredentialKey::new("bob", "github", "token"),
            CredentialKey::new("alice", "linear", "token"),
            CredentialKey::new("alice", "github", "other"),
        ] {
            let err = keys
                .open(&moved, CredentialKind::Secret, &sealed)
                .unwrap_err();
            assert_eq!(
                err,
                VaultError::Unopenable {
                    id: "k1".into(),
                    key: moved.clone()
                }
            );
        }
        assert!(matches!(
            keys.open(&alice, CredentialKind::OAuth, &sealed),
            Err(VaultError::Unopenable { .. })
        ));
        let mut flipped = sealed.clone();
        let last = flipped.0.len() - 1;
        flipped.0[last] ^= 1;
        assert!(matches!(
            keys.open(&alice, CredentialKind::Secret, &flipped),
            Err(VaultError::Unopenable { .. })
        ));
        assert_eq!(
            keys.open(
                &alice,
                CredentialKind::Secret,
                &SealedSecret(b"plain".to_vec())
            ),
            Err(VaultError::Malformed(alice.clone()))
        );
    }

    #[test]
    fn a_missing_or_wrong_key_is_named_never_a_panic_nor_the_plaintext() {
        let (k1, k2, k1_other) = (line("k1"), line("k2"), line("k1"));
        let alice = CredentialKey::new("alice", "github", "token");
        let secret = Secret::from("the-plaintext-secret".to_owned());
        let sealed = ring(&[&k1])
            .seal(&alice, CredentialKind::Secret, &secret)
            .unwrap();
        let err = ring(&[&k2])
            .open(&alice, CredentialKind::Secret, &sealed)
            .unwrap_err();
        assert_eq!(
            err,
            VaultError::UnknownKey {
                id: "k1".into(),
                key: alice.clone()
            }
        );
        let text = err.to_string();
        assert!(
            text.contains("`k1`") && text.contains("alice/github/token"),
            "{text}"
        );
        let err = ring(&[&k1_other])
            .open(&alice, CredentialKind::Secret, &sealed)
            .unwrap_err();
        assert!(
            err.to_string().contains("does not open under key `k1`"),
            "{err}"
        );
        // An older listed key opens.
        let both = ring(&[&k2, &k1]);
        assert_eq!(
            both.open(&alice, CredentialKind::Secret, &sealed).unwrap(),
            secret
        );
        assert_eq!(both.current_id(), "k2");
        assert_eq!(format!("{secret:?}"), "[redacted]");
        let shown = format!("{both:?}");
        assert!(
            shown.contains("k2") && shown.contains("[redacted]"),
            "{shown}"
        );
        for l in [&k1, &k2] {
            let b64 = l.split_once(':').unwrap().1;
            assert!(!shown.contains(b64), "Debug shows no key");
        }
    }

    #[test]
    fn key_files_are_checked_line_by_line_without_echoing_keys() {
        let b64_31 = base64::engine::general_purpose::STANDARD.encode([7u8; 31]);
        let cases = [
            ("", "no key"),
            ("# only a comment\n\n", "no key"),
            ("k1", "line 1: not `id:base64key`"),
            ("bad id:AAAA", "line 1: a key id is"),
            ("k1:not base64!", "line 1: key `k1` is not standard base64"),
        ];
        for (text, want) in cases {
            let err = Keyring::parse(text).unwrap_err().to_string();
            assert!(err.contains(want), "{text:?}: {err}");
        }
        let short = format!("k1:{b64_31}");
        let err = Keyring::parse(&short).unwrap_err().to_string();
        assert!(err.contains("key `k1` is 31 bytes, not 32"), "{err}");
        assert!(!err.contains(&b64_31));
        let k = line("k1");
        let twice = format!("{k}\n{k}");
        assert!(Keyring::parse(&twice)
            .unwrap_err()
            .to_string()
            .contains("line 2: key id `k1` is listed twice"));
        let commented = format!("# current first\n{}\n\n{}\n", line("new"), line("old"));
        assert_eq!(Keyring::parse(&commented).unwrap().ids(), ["new", "old"]);
        assert!(Keyring::new_key_line("no spaces").is_err());
    }
}
