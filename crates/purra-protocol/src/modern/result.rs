//! Shaping results for the modern revision without a round trip through `serde_json::Value`:
//! the top level of an encoded result is read as raw members in order, the revision's members
//! (`resultType`, `_meta.serverInfo`, `ttlMs`, `cacheScope`) are added where the handler left them
//! out, and the object is written back. Nested values are copied as the bytes they were.

use std::fmt;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::{meta, CacheHint, RESULT_COMPLETE};
use crate::modern::raw;
use crate::types::Implementation;

/// The top-level members of a JSON object, in order, values raw.
struct Members(Vec<(String, Box<RawValue>)>);

impl<'de> Deserialize<'de> for Members {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Members;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members, A::Error> {
                let mut out = Vec::with_capacity(map.size_hint().unwrap_or(4));
                while let Some((k, v)) = map.next_entry::<String, Box<RawValue>>()? {
                    out.push((k, v));
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(V)
    }
}

fn write(members: &[(String, Box<RawValue>)]) -> Box<RawValue> {
    let mut out = String::with_capacity(
        members
            .iter()
            .map(|(k, v)| k.len() + v.get().len() + 4)
            .sum::<usize>()
            + 2,
    );
    out.push('{');
    for (i, (k, v)) in members.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&serde_json::to_string(k).expect("keys serialize"));
        out.push(':');
        out.push_str(v.get());
    }
    out.push('}');
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
    let Ok(Members(mut members)) = serde_json::from_str::<Members>(result.get()) else {
        return result;
    };
    let has =
        |members: &[(String, Box<RawValue>)], key: &str| members.iter().any(|(k, _)| k == key);
    if !has(&members, "resultType") {
        members.push(("resultType".into(), raw_str(RESULT_COMPLETE)));
    }
    if let Some(hint) = cache {
        if !has(&members, "ttlMs") {
            members.push(("ttlMs".into(), raw(&hint.ttl_ms)));
        }
        if !has(&members, "cacheScope") {
            members.push(("cacheScope".into(), raw(&hint.scope)));
        }
    }
    if let Some(info) = server_info {
        stamp_meta(&mut members, meta::SERVER_INFO, raw(info));
    }
    write(&members)
}

/// Puts `key: value` into the `_meta` member (created when absent) unless it is already there.
pub(crate) fn stamp_meta(
    members: &mut Vec<(String, Box<RawValue>)>,
    key: &str,
    value: Box<RawValue>,
) {
    match members.iter_mut().find(|(k, _)| k == "_meta") {
        None => {
            let m = write(&[(key.to_owned(), value)]);
            members.push(("_meta".into(), m));
        }
        Some((_, existing)) => {
            let Ok(Members(mut inner)) = serde_json::from_str::<Members>(existing.get()) else {
                return;
            };
            if inner.iter().any(|(k, v)| k == key && v.get() != "null") {
                return;
            }
            inner.retain(|(k, _)| k != key);
            inner.push((key.to_owned(), value));
            *existing = write(&inner);
        }
    }
}

/// Adds `_meta[key] = value` to an encoded object (a result or notification params).
pub fn with_meta(object: Box<RawValue>, key: &str, value: Box<RawValue>) -> Box<RawValue> {
    let Ok(Members(mut members)) = serde_json::from_str::<Members>(object.get()) else {
        return object;
    };
    stamp_meta(&mut members, key, value);
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
