//! A typed tool's arguments decoded and checked against their flat schema in the same scan.
//!
//! [`FlatSchema::decode`] runs the type's own `Deserialize` over serde_json's deserializer with
//! a thin layer between them: every key the type reads must be one of the schema's properties,
//! read once; every value must be of its property's JSON type (judged from the visit serde_json
//! makes for it, the same JSON token the byte check judges); every required property must be
//! present. Whatever the layer forwards it forwards unchanged (the same deserializer method,
//! the same visit with the same argument), so a decode that succeeds gives exactly what
//! `serde_json::from_str` gives, for an instance the byte check ([`FlatSchema::admits`]) admits.
//! Anything the layer does not recognise, any mismatch and any failure of the decode is an
//! error, and the caller then goes the general way (a `Value`, the compiled validator and its
//! wording), as it does today when the byte check does not admit the arguments.

use std::fmt;

use serde::de::{self, DeserializeOwned, DeserializeSeed, Deserializer, MapAccess, Visitor};

use super::flat::{FlatSchema, Kind};

/// The error of a check that fails: its text is never shown (the general way words errors).
fn refused<E: de::Error>() -> E {
    E::custom("not admitted by the flat check")
}

impl FlatSchema {
    /// `A` decoded from the object `text` when the flat check admits `text` and the decode
    /// succeeds, in one scan; `None` otherwise (the general way then reads the arguments).
    /// `text` may be anything: only one object followed by nothing but whitespace is decoded.
    pub(super) fn decode<A: DeserializeOwned>(&self, text: &str) -> Option<A> {
        if !text.starts_with('{') {
            return None;
        }
        let mut de = serde_json::Deserializer::from_str(text);
        let a = A::deserialize(Top(self, &mut de)).ok()?;
        de.end().ok()?;
        Some(a)
    }
}

/// The arguments object: any request for a map, a struct or any value reads it as a map.
struct Top<'s, D>(&'s FlatSchema, D);

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Top<'_, D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.1.deserialize_map(Object {
            schema: self.0,
            visitor,
        })
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.deserialize_any(visitor)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.deserialize_any(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        // serde_json hands a newtype its own deserializer (but for its raw value's token).
        if name.starts_with("$serde_json") {
            return Err(refused());
        }
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, D::Error> {
        Err(refused())
    }

    fn is_human_readable(&self) -> bool {
        self.1.is_human_readable()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct seq tuple tuple_struct enum identifier
    }
}

/// The visitor of the arguments object: only a map, checked member by member, then for its
/// required members.
struct Object<'s, V> {
    schema: &'s FlatSchema,
    visitor: V,
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Object<'_, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<V::Value, M::Error> {
        let mut checked = Members {
            schema: self.schema,
            map,
            seen: 0,
            at: None,
        };
        let value = self.visitor.visit_map(&mut checked)?;
        let required = self.schema.required();
        if checked.seen & required != required {
            return Err(refused());
        }
        Ok(value)
    }
}

/// The members of the arguments object, as the type reads them.
struct Members<'s, M> {
    schema: &'s FlatSchema,
    map: M,
    /// The properties read so far (bit `i`: property `i`).
    seen: u64,
    /// The property whose value is read next.
    at: Option<usize>,
}

impl<'de, M: MapAccess<'de>> MapAccess<'de> for Members<'_, M> {
    type Error = M::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, M::Error> {
        self.at = None;
        let key = self.map.next_key_seed(Check {
            seed,
            check: KeyCheck {
                schema: self.schema,
                at: &mut self.at,
            },
        })?;
        if key.is_some() {
            let at = self.at.ok_or_else(refused)?;
            if self.seen & (1 << at) != 0 {
                return Err(refused());
            }
            self.seen |= 1 << at;
        }
        Ok(key)
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, M::Error> {
        let at = self.at.take().ok_or_else(refused)?;
        let (kind, nullable) = self.schema.property_kind(at);
        self.map.next_value_seed(Check {
            seed,
            check: ValueCheck { kind, nullable },
        })
    }

    fn size_hint(&self) -> Option<usize> {
        self.map.size_hint()
    }
}

/// What one key or value must be: given a visitor, the visitor that checks each visit before
/// it passes it on.
trait Checker<'de>: Sized {
    /// The checking visitor around `V`.
    type Guard<V: Visitor<'de>>: Visitor<'de, Value = V::Value>;
    /// `visitor` behind the check.
    fn guard<V: Visitor<'de>>(self, visitor: V) -> Self::Guard<V>;
}

/// A seed whose deserializer is checked by `C`.
struct Check<S, C> {
    seed: S,
    check: C,
}

impl<'de, S: DeserializeSeed<'de>, C: Checker<'de>> DeserializeSeed<'de> for Check<S, C> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.seed.deserialize(Checked {
            de: d,
            check: self.check,
        })
    }
}

/// A deserializer that asks `de` exactly what it is asked, with the visitor behind the check.
struct Checked<D, C> {
    de: D,
    check: C,
}

macro_rules! forward {
    ($($method:ident($($arg:ident: $ty:ty),*);)*) => {
        $(
            fn $method<V: Visitor<'de>>(
                self,
                $($arg: $ty,)*
                visitor: V,
            ) -> Result<V::Value, D::Error> {
                self.de.$method($($arg,)* self.check.guard(visitor))
            }
        )*
    };
}

impl<'de, D: Deserializer<'de>, C: Checker<'de>> Deserializer<'de> for Checked<D, C> {
    type Error = D::Error;

    forward! {
        deserialize_any();
        deserialize_bool();
        deserialize_i8();
        deserialize_i16();
        deserialize_i32();
        deserialize_i64();
        deserialize_i128();
        deserialize_u8();
        deserialize_u16();
        deserialize_u32();
        deserialize_u64();
        deserialize_u128();
        deserialize_f32();
        deserialize_f64();
        deserialize_char();
        deserialize_str();
        deserialize_string();
        deserialize_bytes();
        deserialize_byte_buf();
        deserialize_option();
        deserialize_unit();
        deserialize_unit_struct(name: &'static str);
        deserialize_newtype_struct(name: &'static str);
        deserialize_seq();
        deserialize_tuple(len: usize);
        deserialize_tuple_struct(name: &'static str, len: usize);
        deserialize_map();
        deserialize_struct(name: &'static str, fields: &'static [&'static str]);
        deserialize_enum(name: &'static str, variants: &'static [&'static str]);
        deserialize_identifier();
    }

    // An ignored value is read as any value: serde_json's skip visits nothing, and the check
    // must see its token.
    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.de.deserialize_any(self.check.guard(visitor))
    }

    fn is_human_readable(&self) -> bool {
        self.de.is_human_readable()
    }
}

/// A key must be one of the schema's properties; which one is noted for its value.
struct KeyCheck<'s, 'a> {
    schema: &'s FlatSchema,
    at: &'a mut Option<usize>,
}

impl<'de, 's, 'a> Checker<'de> for KeyCheck<'s, 'a> {
    type Guard<V: Visitor<'de>> = KeyGuard<'s, 'a, V>;

    fn guard<V: Visitor<'de>>(self, visitor: V) -> KeyGuard<'s, 'a, V> {
        KeyGuard {
            visitor,
            check: self,
        }
    }
}

impl KeyCheck<'_, '_> {
    fn note<E: de::Error>(self, key: &str) -> Result<(), E> {
        *self.at = Some(self.schema.position(key).ok_or_else(refused)?);
        Ok(())
    }
}

/// A key's visitor: string visits are noted, then passed on; any other visit is refused.
struct KeyGuard<'s, 'a, V> {
    visitor: V,
    check: KeyCheck<'s, 'a>,
}

impl<'de, V: Visitor<'de>> Visitor<'de> for KeyGuard<'_, '_, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a property's name")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<V::Value, E> {
        self.check.note(v)?;
        self.visitor.visit_str(v)
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<V::Value, E> {
        self.check.note(v)?;
        self.visitor.visit_borrowed_str(v)
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<V::Value, E> {
        self.check.note(&v)?;
        self.visitor.visit_string(v)
    }
}

/// A value must be of its property's JSON type (`null` only when the property admits it).
#[derive(Clone, Copy)]
struct ValueCheck {
    kind: Kind,
    nullable: bool,
}

impl<'de> Checker<'de> for ValueCheck {
    type Guard<V: Visitor<'de>> = ValueGuard<V>;

    fn guard<V: Visitor<'de>>(self, visitor: V) -> ValueGuard<V> {
        ValueGuard {
            visitor,
            check: self,
        }
    }
}

/// 10^20: the integers of at most 20 digits are those below it.
const BOUND: i128 = 100_000_000_000_000_000_000;

/// A value's visitor: each visit passed on when its token is of the property's type (a number
/// of `integer` only when serde_json reads it as an integer: `1.0`, `-0` and integers beyond 64
/// bits read as a double go the general way); maps, sequences and enums are refused.
struct ValueGuard<V> {
    visitor: V,
    check: ValueCheck,
}

impl<V> ValueGuard<V> {
    fn require<E: de::Error>(&self, ok: bool) -> Result<(), E> {
        if ok {
            Ok(())
        } else {
            Err(refused())
        }
    }
    fn string<E: de::Error>(&self) -> Result<(), E> {
        self.require(self.check.kind == Kind::String)
    }
    fn integer<E: de::Error>(&self) -> Result<(), E> {
        self.require(matches!(self.check.kind, Kind::Number | Kind::Integer))
    }
    fn null<E: de::Error>(&self) -> Result<(), E> {
        self.require(self.check.nullable)
    }
}

impl<'de, V: Visitor<'de>> Visitor<'de> for ValueGuard<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a value of the property's type")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<V::Value, E> {
        self.require(self.check.kind == Kind::Boolean)?;
        self.visitor.visit_bool(v)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<V::Value, E> {
        self.integer()?;
        self.visitor.visit_i64(v)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<V::Value, E> {
        self.integer()?;
        self.visitor.visit_u64(v)
    }
    // serde_json visits 128 bits only for an integer literal (`deserialize_i128`, `_u128`):
    // of `integer` when as short as the byte check takes (20 bytes: JSON has no leading
    // zeros, so the value bounds the literal's length).
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<V::Value, E> {
        let short = if v < 0 { v > -BOUND / 10 } else { v < BOUND };
        self.require(
            self.check.kind == Kind::Number || (self.check.kind == Kind::Integer && short),
        )?;
        self.visitor.visit_i128(v)
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<V::Value, E> {
        let short = v < BOUND as u128;
        self.require(
            self.check.kind == Kind::Number || (self.check.kind == Kind::Integer && short),
        )?;
        self.visitor.visit_u128(v)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<V::Value, E> {
        self.require(self.check.kind == Kind::Number)?;
        self.visitor.visit_f64(v)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<V::Value, E> {
        self.string()?;
        self.visitor.visit_str(v)
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<V::Value, E> {
        self.string()?;
        self.visitor.visit_borrowed_str(v)
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<V::Value, E> {
        self.string()?;
        self.visitor.visit_string(v)
    }
    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<V::Value, E> {
        self.string()?;
        self.visitor.visit_bytes(v)
    }
    fn visit_borrowed_bytes<E: de::Error>(self, v: &'de [u8]) -> Result<V::Value, E> {
        self.string()?;
        self.visitor.visit_borrowed_bytes(v)
    }
    fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<V::Value, E> {
        self.string()?;
        self.visitor.visit_byte_buf(v)
    }
    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.null()?;
        self.visitor.visit_none()
    }
    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.null()?;
        self.visitor.visit_unit()
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        // serde_json visits `some` for any value but `null`: the value itself is checked.
        self.visitor.visit_some(Checked {
            de: d,
            check: self.check,
        })
    }
    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.visitor.visit_newtype_struct(Checked {
            de: d,
            check: self.check,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    #[derive(Deserialize, Debug, PartialEq)]
    struct Many {
        s: String,
        n: f64,
        i: i64,
        b: bool,
        #[serde(default)]
        o: Option<String>,
        #[serde(rename = "q\"k", default)]
        q: Option<i32>,
        #[serde(default)]
        u: Option<u8>,
        #[serde(default)]
        big: Option<u128>,
        #[serde(default)]
        neg: Option<i128>,
        #[serde(default)]
        c: Option<char>,
        #[serde(default, skip_deserializing)]
        skipped: Option<bool>,
    }

    #[derive(Deserialize, Debug, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Strict {
        s: String,
    }

    #[derive(Deserialize, Debug, PartialEq)]
    struct Newtype(Strict);

    fn schema() -> FlatSchema {
        let integer = json!({"type": "integer"});
        let schema = json!({
            "type": "object",
            "properties": {
                "s": {"type": "string", "description": "text"},
                "n": {"type": "number"},
                "i": {"type": "integer"},
                "b": {"type": "boolean"},
                "o": {"type": ["string", "null"]},
                "q\"k": {"type": ["null", "integer"]},
                "u": integer,
                "big": integer,
                "neg": integer,
                "c": {"type": "string"},
                "skipped": {"type": "boolean"},
            },
            "required": ["s", "n", "i", "b"],
        });
        FlatSchema::of(schema.as_object().unwrap()).expect("flat")
    }

    /// The arguments to try: a valid base with each member varied (types, escapes, order,
    /// whitespace, duplicates, extras, nesting, what follows the object).
    fn texts() -> Vec<String> {
        let base = r#""s":"a","n":1,"i":-3,"b":true"#;
        let mut texts: Vec<String> = [
            format!("{{{base}}}"),
            format!("{{{base}}}  \n"),
            format!("{{ {base} }}"),
            r#"{ "b" : false ,
                "i":0,"n":-1.5e3,"s":"x\"y\u00e9\\" }"#
                .to_owned(),
            r#"{"\u0073":"a","n":1,"i":1,"b":true}"#.to_owned(),
            r#"{"s":"a","n":1,"i":1}"#.to_owned(),
            r#"{"n":1,"i":1,"b":true}"#.to_owned(),
            r#"{}"#.to_owned(),
            r#"[]"#.to_owned(),
            r#"null"#.to_owned(),
            r#""s""#.to_owned(),
            format!("{{{base}}} x"),
            format!(r#"{{{base}}},"_meta":{{}}"#),
            format!(r#"{{{base}}}}}"#),
            format!("{{{base}"),
        ]
        .into();
        for member in [
            r#""s":"b""#,
            r#""s":1"#,
            r#""s":null"#,
            r#""s":true"#,
            r#""s":{"a":1}"#,
            r#""n":"1""#,
            r#""n":1.5"#,
            r#""n":-0"#,
            r#""n":1e400"#,
            r#""n":18446744073709551616"#,
            r#""n":null"#,
            r#""i":1.0"#,
            r#""i":-0"#,
            r#""i":1e2"#,
            r#""i":9223372036854775808"#,
            r#""i":"1""#,
            r#""b":1"#,
            r#""b":"true""#,
            r#""o":null"#,
            r#""o":"x""#,
            r#""o":["x"]"#,
            r#""o":1"#,
            r#""q\"k":5"#,
            r#""q\"k":null"#,
            r#""q\"k":"5""#,
            r#""q\u0022k":5"#,
            r#""u":7"#,
            r#""u":300"#,
            r#""u":-1"#,
            r#""u":7.0"#,
            r#""big":18446744073709551616"#,
            r#""big":99999999999999999999"#,
            r#""big":100000000000000000000"#,
            r#""big":1.5"#,
            r#""big":-1"#,
            r#""neg":-9999999999999999999"#,
            r#""neg":-10000000000000000000"#,
            r#""neg":-0"#,
            r#""neg":5"#,
            r#""c":"x""#,
            r#""c":"xy""#,
            r#""c":"\u00e9""#,
            r#""c":1"#,
            r#""skipped":true"#,
            r#""skipped":"no""#,
            r#""skipped":[1]"#,
            r#""x":1"#,
        ] {
            texts.push(format!("{{{base},{member}}}"));
            texts.push(format!("{{{member},{base}}}"));
            texts.push(format!("{{{member}, {base}, {member}}}"));
        }
        texts
    }

    /// The one-scan decode gives what the byte check then serde_json's own decode give, on
    /// every text tried, for each of the types.
    #[test]
    fn the_checked_decode_is_the_byte_check_then_the_decode() {
        let schema = schema();
        let mut decoded = 0;
        for text in texts() {
            let admitted = schema.admits(&text);
            // The checked decode of `text` into `T` is what the byte check then serde give.
            fn same<T>(schema: &FlatSchema, text: &str, admitted: bool, name: &str) -> bool
            where
                T: DeserializeOwned + PartialEq + std::fmt::Debug,
            {
                let checked = schema.decode::<T>(text);
                let expected = serde_json::from_str::<T>(text).ok().filter(|_| admitted);
                assert_eq!(checked, expected, "{name}: {text}");
                checked.is_some()
            }
            decoded += usize::from(same::<Many>(&schema, &text, admitted, "Many"));
            same::<Strict>(&schema, &text, admitted, "Strict");
            same::<Newtype>(&schema, &text, admitted, "Newtype");
            // An integer beyond 64 bits (or -0) that serde_json reads as a double, in a type that reads
            // any number: the byte check took it, this goes the general way, which gives the
            // same (the double read from a `Value`).
            type Map = serde_json::Map<String, serde_json::Value>;
            let value = schema.decode::<Map>(&text);
            let expected = serde_json::from_str::<Map>(&text).ok().filter(|_| admitted);
            let wide = [
                "18446744073709551616",
                "99999999999999999999",
                "9223372036854775808",
                "-9999999999999999999",
                ":-0",
            ];
            if value.is_none() && expected.is_some() && wide.iter().any(|w| text.contains(w)) {
                let general = serde_json::from_str::<serde_json::Value>(&text)
                    .ok()
                    .and_then(|v| serde_json::from_value::<Map>(v).ok());
                assert_eq!(general, expected, "Map: {text}");
            } else {
                assert_eq!(value, expected, "Map: {text}");
            }
        }
        // Most variations are admitted and decoded.
        assert!(decoded > 25, "{decoded}");
    }
}
