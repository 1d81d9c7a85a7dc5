//! The params of an outbound `tools/call`, borrowed and written straight into the request's
//! frame: the tool's name, the caller's arguments as they are (a `Value` map or any `Serialize`
//! that writes a JSON object), and the idempotency key. The bytes are those of
//! [`CallToolParams`](crate::types::CallToolParams) with the same fields (a test says so); no
//! owned copy of the name, the arguments or the key is made.

use serde::ser::{Impossible, Serialize, Serializer};
use serde_json::Value;

use crate::error::Error;
use crate::types::JsonObject;

/// `tools/call` params over borrowed parts.
#[derive(serde::Serialize)]
pub(super) struct CallParams<'a, A: ?Sized> {
    pub(super) name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) arguments: Option<ObjectOnly<'a, A>>,
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub(super) meta: Option<IdempotencyMeta<'a>>,
    #[serde(rename = "idempotencyKey", skip_serializing_if = "Option::is_none")]
    pub(super) idempotency_key: Option<&'a str>,
}

/// A call's `_meta` when it carries an idempotency key (the only `_meta` a call made through
/// `Connection` carries).
#[derive(serde::Serialize)]
pub(super) struct IdempotencyMeta<'a> {
    // `crate::idempotency::META_KEY` (an attribute takes a literal; a test checks they agree).
    #[serde(rename = "io.purra/idempotency-key")]
    pub(super) key: &'a str,
}

/// A tool call's arguments from a `Value`: an object, or `null` for none; anything else is refused
/// before sending.
pub(super) fn object_arguments(arguments: Value) -> Result<Option<JsonObject>, Error> {
    match arguments {
        Value::Object(o) => Some(Ok(o)),
        Value::Null => None,
        _ => Some(Err(Error::Protocol(
            "tool arguments must be a JSON object".into(),
        ))),
    }
    .transpose()
}

/// Serializes the value it holds only if that writes a JSON object (a map, a struct, or an
/// externally tagged enum's non-unit variant); anything else fails the serialization with an
/// error that says so, before a byte of it is written.
pub(super) struct ObjectOnly<'a, A: ?Sized>(pub(super) &'a A);

const NOT_AN_OBJECT: &str = "tool arguments must serialize to a JSON object";

impl<A: Serialize + ?Sized> Serialize for ObjectOnly<'_, A> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(Gate(serializer))
    }
}

/// The serializer [`ObjectOnly`] wraps around the real one: objects pass through, every other
/// kind of value is an error.
struct Gate<S>(S);

fn refuse<E: serde::ser::Error>() -> E {
    E::custom(NOT_AN_OBJECT)
}

macro_rules! refuse {
    ($($name:ident($($arg:ty),*);)*) => {
        $(
            fn $name(self, $(_: $arg),*) -> Result<S::Ok, S::Error> {
                Err(refuse())
            }
        )*
    };
}

impl<S: Serializer> Serializer for Gate<S> {
    type Ok = S::Ok;
    type Error = S::Error;
    type SerializeSeq = Impossible<S::Ok, S::Error>;
    type SerializeTuple = Impossible<S::Ok, S::Error>;
    type SerializeTupleStruct = Impossible<S::Ok, S::Error>;
    type SerializeTupleVariant = S::SerializeTupleVariant;
    type SerializeMap = S::SerializeMap;
    type SerializeStruct = S::SerializeStruct;
    type SerializeStructVariant = S::SerializeStructVariant;

    refuse! {
        serialize_bool(bool);
        serialize_i8(i8);
        serialize_i16(i16);
        serialize_i32(i32);
        serialize_i64(i64);
        serialize_i128(i128);
        serialize_u8(u8);
        serialize_u16(u16);
        serialize_u32(u32);
        serialize_u64(u64);
        serialize_u128(u128);
        serialize_f32(f32);
        serialize_f64(f64);
        serialize_char(char);
        serialize_str(&str);
        serialize_bytes(&[u8]);
        serialize_none();
        serialize_unit();
        serialize_unit_struct(&'static str);
        serialize_unit_variant(&'static str, u32, &'static str);
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<S::Ok, S::Error> {
        value.serialize(self)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<S::Ok, S::Error> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<S::Ok, S::Error> {
        self.0
            .serialize_newtype_variant(name, index, variant, value)
    }

    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, S::Error> {
        Err(refuse())
    }

    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, S::Error> {
        Err(refuse())
    }

    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, S::Error> {
        Err(refuse())
    }

    fn serialize_tuple_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self::SerializeTupleVariant, S::Error> {
        self.0.serialize_tuple_variant(name, index, variant, len)
    }

    fn serialize_map(self, len: Option<usize>) -> Result<Self::SerializeMap, S::Error> {
        self.0.serialize_map(len)
    }

    fn serialize_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStruct, S::Error> {
        self.0.serialize_struct(name, len)
    }

    fn serialize_struct_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStructVariant, S::Error> {
        self.0.serialize_struct_variant(name, index, variant, len)
    }

    fn is_human_readable(&self) -> bool {
        self.0.is_human_readable()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;
    use crate::types::CallToolParams;

    #[derive(serde::Serialize)]
    struct Echo<'a> {
        text: &'a str,
    }

    #[derive(serde::Serialize)]
    struct Wrapped<'a>(Echo<'a>);

    #[derive(serde::Serialize)]
    enum Shape {
        Circle { r: u32 },
        Unit,
    }

    fn write<A: Serialize + ?Sized>(a: &A) -> Result<String, String> {
        serde_json::to_string(&ObjectOnly(a)).map_err(|e| e.to_string())
    }

    #[test]
    fn objects_pass_as_they_are() {
        assert_eq!(write(&Echo { text: "hi" }).unwrap(), r#"{"text":"hi"}"#);
        assert_eq!(
            write(&Wrapped(Echo { text: "a" })).unwrap(),
            r#"{"text":"a"}"#
        );
        assert_eq!(write(&Some(Echo { text: "b" })).unwrap(), r#"{"text":"b"}"#);
        assert_eq!(write(&json!({"n": 1})).unwrap(), r#"{"n":1}"#);
        assert_eq!(write(&BTreeMap::from([("k", 2)])).unwrap(), r#"{"k":2}"#);
        assert_eq!(
            write(&Shape::Circle { r: 3 }).unwrap(),
            r#"{"Circle":{"r":3}}"#
        );
    }

    #[test]
    fn anything_else_is_refused_by_name() {
        for refused in [
            write("text"),
            write(&7),
            write(&[1, 2]),
            write(&vec![Echo { text: "x" }]),
            write(&Value::Null),
            write(&None::<Echo<'_>>),
            write(&()),
            write(&Shape::Unit),
            write(&json!("s")),
        ] {
            assert_eq!(refused.unwrap_err(), NOT_AN_OBJECT);
        }
    }

    #[test]
    fn the_bytes_are_those_of_call_tool_params() {
        let args = json!({"text": "hé \"q\"", "n": [1, 2]});
        let object = args.as_object().unwrap().clone();
        for (key, declared) in [(None, false), (Some("k-1"), false), (Some("k-2"), true)] {
            let mut owned = CallToolParams::new("echo").with_arguments(object.clone());
            if let Some(k) = key {
                owned = owned.with_idempotency_key(k, declared);
            }
            let borrowed = CallParams {
                name: "echo",
                arguments: Some(ObjectOnly(&object)),
                meta: key.map(|key| IdempotencyMeta { key }),
                idempotency_key: key.filter(|_| declared),
            };
            assert_eq!(
                serde_json::to_string(&borrowed).unwrap(),
                serde_json::to_string(&owned).unwrap()
            );
        }
        let none = CallParams::<Value> {
            name: "t",
            arguments: None,
            meta: None,
            idempotency_key: None,
        };
        assert_eq!(
            serde_json::to_string(&none).unwrap(),
            serde_json::to_string(&CallToolParams::new("t")).unwrap()
        );
    }

    #[test]
    fn a_value_is_an_object_or_none() {
        assert_eq!(object_arguments(Value::Null).unwrap(), None);
        assert_eq!(
            object_arguments(json!({"a": 1})).unwrap(),
            Some(json!({"a": 1}).as_object().unwrap().clone())
        );
        let e = object_arguments(json!([1])).unwrap_err();
        assert_eq!(
            e.to_string(),
            Error::Protocol("tool arguments must be a JSON object".into()).to_string()
        );
    }
}
