//! Shaping results for the modern revision without a round trip through `serde_json::Value`:
//! the top level of an encoded result is read as raw members in order, the revision's members
//! (`resultType`, `_meta.serverInfo`, `ttlMs`, `cacheScope`) are added where the handler left them
//! out, and the object is written back. Nested values are copied as the bytes they were.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::{meta, CacheHint, RESULT_COMPLETE};
use crate::modern::raw;
use crate::types::Implementation;

/// One member: its key and its value as the bytes it was (or a new value), borrowed from the
/// object being read where they can be.
type Member<'a> = (Cow<'a, str>, Cow<'a, RawValue>);

/// The top-level members of a JSON object, in order, values raw.
struct Members<'a>(Vec<Member<'a>>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<'de>, A::Error> {
                let mut out = Vec::with_capacity(map.size_hint().unwrap_or(8));
                while let Some(Key(k)) = map.next_key::<Key<'de>>()? {
                    let v: &'de RawValue = map.next_value()?;
                    out.push((k, Cow::Borrowed(v)));
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// A member's key, borrowed unless it had escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

fn write(members: &[Member<'_>]) -> Box<RawValue> {
    let mut out = Vec::with_capacity(
        members
            .iter()
            .map(|(k, v)| k.len() + v.get().len() + 4)
            .sum::<usize>()
            + 2,
    );
    out.push(b'{');
    for (i, (k, v)) in members.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut out, k.as_ref()).expect("keys serialize");
        out.push(b':');
        out.extend_from_slice(v.get().as_bytes());
    }
    out.push(b'}');
    let out = String::from_utf8(out).expect("written from strings");
    RawValue::from_string(out).expect("written from valid members")
}

fn raw_str(s: &str) -> Box<RawValue> {
    raw(&s)
}

/// Adds what a complete modern result carries: `resultType` (when absent), the server's identity
/// in `_meta` (when absent; a non-object `_meta` is left as the handler made it), and for
/// cacheable methods `ttlMs` and `cacheScope` (each when absent). A result that is not an object
/// is returned unchanged.
pub fn complete(
    result: Box<RawValue>,
    server_info: Option<&Implementation>,
    cache: Option<CacheHint>,
) -> Box<RawValue> {
    let info = server_info.map(raw);
    complete_with(result, info.as_deref(), cache)
}

/// [`complete`] with the server's identity already written as JSON (the server keeps it so).
pub(crate) fn complete_with(
    result: Box<RawValue>,
    server_info: Option<&RawValue>,
    cache: Option<CacheHint>,
) -> Box<RawValue> {
    static COMPLETE: std::sync::LazyLock<Box<RawValue>> =
        std::sync::LazyLock::new(|| raw_str(RESULT_COMPLETE));
    let Ok(Members(mut members)) = serde_json::from_str::<Members>(result.get()) else {
        return result;
    };
    let has = |members: &[Member<'_>], key: &str| members.iter().any(|(k, _)| k == key);
    if !has(&members, "resultType") {
        members.push(("resultType".into(), Cow::Borrowed(&**COMPLETE)));
    }
    if let Some(hint) = cache {
        if !has(&members, "ttlMs") {
            members.push(("ttlMs".into(), Cow::Owned(raw(&hint.ttl_ms))));
        }
        if !has(&members, "cacheScope") {
            members.push(("cacheScope".into(), Cow::Owned(raw(&hint.scope))));
        }
    }
    if let Some(info) = server_info {
        stamp_meta(&mut members, meta::SERVER_INFO, Cow::Borrowed(info));
    }
    write(&members)
}

/// Puts `key: value` into the `_meta` member (created when absent) unless it is already there.
fn stamp_meta<'a>(members: &mut Vec<Member<'a>>, key: &str, value: Cow<'a, RawValue>) {
    match members.iter_mut().find(|(k, _)| k == "_meta") {
        None => {
            let m = write(&[(Cow::Borrowed(key), value)]);
            members.push(("_meta".into(), Cow::Owned(m)));
        }
        Some((_, existing)) => {
            let stamped = {
                let Ok(Members(mut inner)) = serde_json::from_str::<Members>(existing.get()) else {
                    return;
                };
                if inner.iter().any(|(k, v)| k == key && v.get() != "null") {
                    return;
                }
                inner.retain(|(k, _)| k != key);
                inner.push((Cow::Borrowed(key), value));
                write(&inner)
            };
            *existing = Cow::Owned(stamped);
        }
    }
}

/// Adds `_meta[key] = value` to an encoded object (a result or notification params).
pub fn with_meta(object: Box<RawValue>, key: &str, value: Box<RawValue>) -> Box<RawValue> {
    let Ok(Members(mut members)) = serde_json::from_str::<Members>(object.get()) else {
        return object;
    };
    stamp_meta(&mut members, key, Cow::Owned(value));
    write(&members)
}

/// The `resultType` of an encoded result: absent reads as `complete` (servers of earlier
/// revisions never send it).
pub fn result_type(result: &RawValue) -> String {
    #[derive(Deserialize)]
    struct T {
        #[serde(default, rename = "resultType")]
        result_type: Option<String>,
    }
    serde_json::from_str::<T>(result.get())
        .ok()
        .and_then(|t| t.result_type)
        .unwrap_or_else(|| RESULT_COMPLETE.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::modern::CacheScope;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_owned()).unwrap()
    }

    #[test]
    fn a_result_gets_the_revisions_members_in_order() {
        let info = Implementation::new("s", "1");
        let out = complete(
            raw(r#"{"tools":[{"name":"a","inputSchema":{"b":1,"a":2}}]}"#),
            Some(&info),
            Some(CacheHint::new(5, CacheScope::Public)),
        );
        assert_eq!(
            out.get(),
            r#"{"tools":[{"name":"a","inputSchema":{"b":1,"a":2}}],"resultType":"complete","ttlMs":5,"cacheScope":"public","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1"}}}"#
        );
    }

    #[test]
    fn escaped_keys_and_nested_bytes_are_kept() {
        let out = complete(
            raw(r#"{"a\u0062":{"x" : [1, 2]},"_meta":{"k\"":null}}"#),
            Some(&Implementation::new("s", "1")),
            None,
        );
        assert_eq!(
            out.get(),
            r#"{"ab":{"x" : [1, 2]},"_meta":{"k\"":null,"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1"}},"resultType":"complete"}"#
        );
    }

    #[test]
    fn what_the_handler_set_wins() {
        let info = Implementation::new("s", "1");
        let out = complete(
            raw(r#"{"resultType":"input_required","_meta":{"x":1}}"#),
            Some(&info),
            None,
        );
        assert_eq!(
            out.get(),
            r#"{"resultType":"input_required","_meta":{"x":1,"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1"}}}"#
        );
        assert_eq!(result_type(&out), "input_required");
        assert_eq!(result_type(&raw("{}")), "complete");
    }
}
