//! Request idempotency: one key per logical `tools/call`, so that a retried call runs its tool once.
//!
//! A client carries the key in the call's `_meta` under [`META_KEY`] and, when the server declared
//! `capabilities.tools.idempotency` (SEP-3182, a proposal: [`CAPABILITY`]), also as the call's
//! `idempotencyKey` ([`CallToolParams::with_idempotency_key`]). A key is at most
//! [`MAX_KEY_BYTES`] bytes; a call carrying two different keys, or a longer one, is refused.
//!
//! A server honours the key for the tools registered as idempotent
//! ([`ToolDef::idempotent`](crate::ToolDef::idempotent), `#[tool(idempotent)]`): the handler runs
//! once per key, and the same key with the same tool and arguments is answered with the stored
//! result (an `isError` result included) without running it again. A repeat that arrives while
//! the first call still runs in the same process waits for it. The same key with other arguments
//! is refused (-32602), never answered with the stored result. A key whose run started but never
//! finished here (the process stopped while it ran, the call was cancelled, or another instance
//! sharing a durable store runs it) is refused (-32603, "outcome unknown"): it is never run again
//! blindly. Before refusing, such a repeat polls the store for the key's result for
//! [`ServerBuilder::idempotent_wait`](crate::ServerBuilder::idempotent_wait) (default zero), so
//! instances of a fleet wait for each other. A handler's protocol error (a JSON-RPC error rather than a result) releases the key.
//! A 2026-07-28 round that ends `input_required` drops the handler like a cancellation does: a
//! key carried by such a call is then of unknown outcome, so a tool that asks for input in rounds
//! is called without a key (SEP-3182 leaves multi round-trip calls out as well).
//! Where results are kept is an [`IdempotentResults`] store: [`InMemoryIdempotentResults`] by
//! default, bounded by count and age ([`IdempotentLimits`]); a durable one is given with
//! [`ServerBuilder::idempotent_results`](crate::ServerBuilder::idempotent_results).

use serde_json::Value;

use crate::types::CallToolParams;

/// The `_meta` member a `tools/call` carries its idempotency key in.
pub const META_KEY: &str = "io.purra/idempotency-key";

/// The member of a server's `capabilities.tools` that declares SEP-3182 request idempotency (an
/// object, `{}`); a client then also sends the key as `params.idempotencyKey`.
pub const CAPABILITY: &str = "idempotency";

/// The longest idempotency key accepted, in bytes.
pub const MAX_KEY_BYTES: usize = 255;

/// The key a `tools/call` carries (in `_meta` [`META_KEY`] or `idempotencyKey`), if any. Both
/// present must be equal; a key must be a non-empty string of at most [`MAX_KEY_BYTES`] bytes.
/// The error says what is wrong, for a -32602 answer.
pub fn carried_key(params: &CallToolParams) -> Result<Option<&str>, String> {
    let meta = match params.meta.as_ref().and_then(|m| m.get(META_KEY)) {
        None => None,
        Some(Value::String(s)) => Some(s.as_str()),
        Some(_) => return Err(format!("_meta.{META_KEY} must be a string")),
    };
    let key = match (meta, params.idempotency_key.as_deref()) {
        (Some(a), Some(b)) if a != b => {
            return Err(format!(
            "the call carries two different idempotency keys (_meta.{META_KEY} and idempotencyKey)"
        ))
        }
        (a, b) => a.or(b),
    };
    match key {
        Some(k) if k.len() > MAX_KEY_BYTES => Err(format!(
            "the idempotency key is {} bytes long; at most {MAX_KEY_BYTES} are accepted",
            k.len()
        )),
        Some("") => Err("the idempotency key is empty".to_owned()),
        k => Ok(k),
    }
}

impl CallToolParams {
    /// Carries the idempotency key `key`: always in `_meta` ([`META_KEY`], beside any other
    /// `_meta`), and also as `idempotencyKey` when `declared` (the server declared
    /// `capabilities.tools.idempotency`, see `Connection::supports_idempotency`).
    pub fn with_idempotency_key(mut self, key: &str, declared: bool) -> Self {
        self.meta
            .get_or_insert_with(Default::default)
            .insert(META_KEY.to_owned(), Value::String(key.to_owned()));
        if declared {
            self.idempotency_key = Some(key.to_owned());
        }
        self
    }
}

pub use store::*;

mod store {
    use std::collections::HashMap;
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    #[cfg(feature = "server")]
    use serde_json::Value;

    use crate::session::BoxFuture;

    /// What [`IdempotentResults::begin`] found for a key.
    #[derive(Debug, Clone, PartialEq, Eq)]
    #[non_exhaustive]
    pub enum Begin {
        /// The key was new: it is now running, and the caller runs the tool and then calls
        /// [`IdempotentResults::finish`] (or [`IdempotentResults::release`]).
        Run,
        /// The same request under this key started and has no result yet.
        Running,
        /// The same request under this key finished with this result (JSON text).
        Done(String),
        /// The key was used for a different request: refused.
        Conflict,
    }

    /// A store's failure.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct IdempotentStoreError(pub String);

    impl std::fmt::Display for IdempotentStoreError {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "idempotent results store failure: {}", self.0)
        }
    }

    impl std::error::Error for IdempotentStoreError {}

    /// Where an idempotent tool's results are kept, by key: `key → (request digest, running |
    /// done(result))`. The request digest names the tool and its arguments. Implementations
    /// must be bounded (a count and an age, see [`IdempotentLimits`]) and atomic in `begin` (two
    /// callers of one new key: one gets [`Begin::Run`]).
    pub trait IdempotentResults: Send + Sync + 'static {
        /// Starts `key` for `request` if it is new; otherwise what it holds.
        fn begin<'a>(
            &'a self,
            key: &'a str,
            request: &'a str,
        ) -> BoxFuture<'a, Result<Begin, IdempotentStoreError>>;
        /// Records the result (JSON text) of the running `key`.
        fn finish<'a>(
            &'a self,
            key: &'a str,
            result: &'a str,
        ) -> BoxFuture<'a, Result<(), IdempotentStoreError>>;
        /// Forgets the running `key` (its run ended without a result to keep).
        fn release<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<(), IdempotentStoreError>>;
    }

    /// The bounds of an idempotent results store.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    #[non_exhaustive]
    pub struct IdempotentLimits {
        /// Keys kept at most (default 10 000); past it the oldest finished key is forgotten, and
        /// a new key is refused when every kept one is still running.
        pub max_keys: usize,
        /// How long a key is kept after it began (default 24 hours); a repeat after that runs
        /// the tool again.
        pub ttl: Duration,
        /// The largest result kept, in bytes of JSON (default 4 MiB, as a task's); a larger one
        /// is kept as an `isError` result saying so (the call ran once and is not run again).
        pub max_result_bytes: usize,
    }

    impl Default for IdempotentLimits {
        fn default() -> Self {
            IdempotentLimits {
                max_keys: 10_000,
                ttl: Duration::from_secs(24 * 60 * 60),
                max_result_bytes: 4 << 20,
            }
        }
    }

    impl IdempotentLimits {
        /// Sets the count bound.
        pub fn max_keys(mut self, n: usize) -> Self {
            self.max_keys = n.max(1);
            self
        }
        /// Sets the age bound.
        pub fn ttl(mut self, ttl: Duration) -> Self {
            self.ttl = ttl;
            self
        }
        /// Sets the result bound, in bytes.
        pub fn max_result_bytes(mut self, n: usize) -> Self {
            self.max_result_bytes = n;
            self
        }
    }

    /// The JSON text kept in place of a result larger than `limit` bytes.
    pub fn result_too_large(limit: usize) -> String {
        serde_json::json!({
            "content": [{"type": "text", "text": format!(
                "The call ran, but its result was larger than the {limit} bytes kept for idempotent repeats; it is not run again under this key."
            )}],
            "isError": true,
        })
        .to_string()
    }

    struct Entry {
        request: String,
        began: Instant,
        result: Option<String>,
    }

    /// The default [`IdempotentResults`]: a map in this process's memory, within
    /// [`IdempotentLimits`]. Not durable: a restart forgets every key.
    #[derive(Default)]
    pub struct InMemoryIdempotentResults {
        limits: IdempotentLimits,
        entries: Mutex<HashMap<String, Entry>>,
    }

    impl std::fmt::Debug for InMemoryIdempotentResults {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("InMemoryIdempotentResults")
                .field("limits", &self.limits)
                .finish_non_exhaustive()
        }
    }

    impl InMemoryIdempotentResults {
        /// A store with these bounds.
        pub fn new(limits: IdempotentLimits) -> Self {
            InMemoryIdempotentResults {
                limits,
                entries: Mutex::default(),
            }
        }

        /// How many keys it holds.
        pub fn len(&self) -> usize {
            self.entries.lock().expect("idempotent lock").len()
        }

        /// Whether it holds no key.
        pub fn is_empty(&self) -> bool {
            self.len() == 0
        }

        fn begin_now(&self, key: &str, request: &str) -> Result<Begin, IdempotentStoreError> {
            let mut entries = self.entries.lock().expect("idempotent lock");
            let ttl = self.limits.ttl;
            entries.retain(|_, e| e.began.elapsed() < ttl);
            if let Some(e) = entries.get(key) {
                return Ok(if e.request != request {
                    Begin::Conflict
                } else {
                    match &e.result {
                        Some(r) => Begin::Done(r.clone()),
                        None => Begin::Running,
                    }
                });
            }
            if entries.len() >= self.limits.max_keys {
                let oldest = entries
                    .iter()
                    .filter(|(_, e)| e.result.is_some())
                    .min_by_key(|(_, e)| e.began)
                    .map(|(k, _)| k.clone());
                match oldest {
                    Some(k) => {
                        entries.remove(&k);
                    }
                    None => {
                        return Err(IdempotentStoreError(format!(
                            "all {} kept keys are still running",
                            self.limits.max_keys
                        )))
                    }
                }
            }
            entries.insert(
                key.to_owned(),
                Entry {
                    request: request.to_owned(),
                    began: Instant::now(),
                    result: None,
                },
            );
            Ok(Begin::Run)
        }
    }

    impl IdempotentResults for InMemoryIdempotentResults {
        fn begin<'a>(
            &'a self,
            key: &'a str,
            request: &'a str,
        ) -> BoxFuture<'a, Result<Begin, IdempotentStoreError>> {
            Box::pin(std::future::ready(self.begin_now(key, request)))
        }

        fn finish<'a>(
            &'a self,
            key: &'a str,
            result: &'a str,
        ) -> BoxFuture<'a, Result<(), IdempotentStoreError>> {
            let kept = if result.len() > self.limits.max_result_bytes {
                result_too_large(self.limits.max_result_bytes)
            } else {
                result.to_owned()
            };
            if let Some(e) = self.entries.lock().expect("idempotent lock").get_mut(key) {
                e.result.get_or_insert(kept);
            }
            Box::pin(std::future::ready(Ok(())))
        }

        fn release<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<(), IdempotentStoreError>> {
            let mut entries = self.entries.lock().expect("idempotent lock");
            if entries.get(key).is_some_and(|e| e.result.is_none()) {
                entries.remove(key);
            }
            Box::pin(std::future::ready(Ok(())))
        }
    }

    #[cfg(feature = "server")]
    /// The request digest of a call: hexadecimal SHA-256 over the tool's name and its arguments
    /// in a canonical form (object members sorted), so a repeat matches whatever its member order.
    pub fn request_digest(tool: &str, arguments: &Value) -> String {
        let mut text = String::new();
        canonical(
            &serde_json::json!({"name": tool, "arguments": arguments}),
            &mut text,
        );
        let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
        let mut hex = String::with_capacity(71);
        hex.push_str("sha256:");
        for b in digest.as_ref() {
            hex.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
            hex.push(char::from(b"0123456789abcdef"[usize::from(b & 15)]));
        }
        hex
    }

    #[cfg(feature = "server")]
    fn canonical(v: &Value, out: &mut String) {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(k.clone()).to_string());
                    out.push(':');
                    canonical(&m[k], out);
                }
                out.push('}');
            }
            Value::Array(a) => {
                out.push('[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    canonical(x, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_carries_one_bounded_key() {
        let p = CallToolParams::new("t").with_idempotency_key("k1", false);
        assert_eq!(carried_key(&p), Ok(Some("k1")));
        assert_eq!(p.idempotency_key, None, "undeclared: only in _meta");
        let p = CallToolParams::new("t").with_idempotency_key("k1", true);
        assert_eq!(p.idempotency_key.as_deref(), Some("k1"));
        assert_eq!(carried_key(&p), Ok(Some("k1")));
        assert_eq!(carried_key(&CallToolParams::new("t")), Ok(None));
        let mut two = CallToolParams::new("t").with_idempotency_key("k1", false);
        two.idempotency_key = Some("k2".into());
        assert!(carried_key(&two).unwrap_err().contains("two different"));
        let long = "k".repeat(MAX_KEY_BYTES + 1);
        let p = CallToolParams::new("t").with_idempotency_key(&long, false);
        assert!(carried_key(&p).unwrap_err().contains("at most 255"));
        let p = CallToolParams::new("t").with_idempotency_key(&long[1..], false);
        assert_eq!(carried_key(&p), Ok(Some(&long[1..])));
    }

    #[tokio::test]
    async fn the_in_memory_store_runs_a_key_once_and_refuses_other_requests() {
        let s = InMemoryIdempotentResults::new(IdempotentLimits::default().max_keys(2));
        assert_eq!(s.begin("a", "r1").await, Ok(Begin::Run));
        assert_eq!(s.begin("a", "r1").await, Ok(Begin::Running));
        assert_eq!(s.begin("a", "r2").await, Ok(Begin::Conflict));
        s.finish("a", "{\"x\":1}").await.unwrap();
        assert_eq!(
            s.begin("a", "r1").await,
            Ok(Begin::Done("{\"x\":1}".into()))
        );
        assert_eq!(s.begin("b", "r1").await, Ok(Begin::Run));
        // Full: the oldest finished key goes; running ones stay.
        assert_eq!(s.begin("c", "r1").await, Ok(Begin::Run));
        assert_eq!(
            s.begin("a", "r1").await.unwrap_err().0,
            "all 2 kept keys are still running"
        );
        s.release("b").await.unwrap();
        assert_eq!(s.begin("a", "r1").await, Ok(Begin::Run));
    }

    #[cfg(feature = "server")]
    #[test]
    fn the_request_digest_ignores_member_order_and_names_the_tool() {
        assert_eq!(
            request_digest(
                "t",
                &serde_json::json!({"a": 1, "b": [1, {"d": 2, "c": 3}]})
            ),
            request_digest(
                "t",
                &serde_json::json!({"b": [1, {"c": 3, "d": 2}], "a": 1})
            )
        );
        assert_ne!(
            request_digest("t", &serde_json::json!({"a": 1})),
            request_digest("u", &serde_json::json!({"a": 1}))
        );
    }
}
