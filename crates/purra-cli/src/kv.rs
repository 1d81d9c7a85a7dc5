//! `KEY=VALUE` arguments: a value is converted by the tool's input schema when the schema gives
//! the property one kind of value (a string property takes the text as written, `zip=94103` the
//! string "94103"); otherwise it is JSON when it parses as JSON, else the string as written.

use serde_json::{Map, Value};

use crate::exit::Failure;

/// Splits `KEY=VALUE` at the first `=`.
fn split(arg: &str) -> Result<(&str, &str), Failure> {
    match arg.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key, value)),
        _ => Err(Failure::usage(format!(
            "{arg:?} is not KEY=VALUE (tool and prompt arguments are KEY=VALUE pairs)"
        ))),
    }
}

/// The value of a tool argument: JSON when `text` parses as JSON, else the string itself.
pub fn value(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// Tool arguments: the `--args` object (raw JSON, never converted), then each `KEY=VALUE` set on
/// top of it, converted by `schema` (the tool's `inputSchema`, when known).
pub fn tool_arguments(
    json: Option<&str>,
    pairs: &[String],
    schema: Option<&Value>,
) -> Result<Value, Failure> {
    let mut args = match json {
        None => Map::new(),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(o)) => o,
            Ok(_) => return Err(Failure::usage("--args must be a JSON object")),
            Err(e) => return Err(Failure::usage(format!("--args is not valid JSON: {e}"))),
        },
    };
    for pair in pairs {
        let (key, text) = split(pair)?;
        let value = if takes_only_strings(schema, key) {
            Value::String(text.to_owned())
        } else {
            value(text)
        };
        args.insert(key.to_owned(), value);
    }
    Ok(Value::Object(args))
}

/// Whether `schema` declares property `key` with `type` "string" (or a list of types whose only
/// non-null one is "string"): then the text is the value as written, as the MCP Inspector's CLI
/// does; a property with no such declaration (none, a union, `anyOf`, a `$ref`) takes JSON when
/// the text parses.
fn takes_only_strings(schema: Option<&Value>, key: &str) -> bool {
    let Some(ty) = schema.and_then(|s| s.get("properties")?.get(key)?.get("type")) else {
        return false;
    };
    match ty {
        Value::String(t) => t == "string",
        Value::Array(types) => {
            let mut kinds = types.iter().filter(|t| *t != "null");
            kinds.next().is_some_and(|t| t == "string") && kinds.next().is_none()
        }
        _ => false,
    }
}

/// Prompt arguments: every value is a string, as MCP prompt arguments are.
pub fn prompt_arguments(pairs: &[String]) -> Result<Vec<(String, String)>, Failure> {
    pairs
        .iter()
        .map(|p| split(p).map(|(k, v)| (k.to_owned(), v.to_owned())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_json_when_they_parse() {
        assert_eq!(value("3"), json!(3));
        assert_eq!(value("2.5"), json!(2.5));
        assert_eq!(value("true"), json!(true));
        assert_eq!(value("null"), json!(null));
        assert_eq!(value("{\"a\":[1]}"), json!({"a": [1]}));
        assert_eq!(value("\"3\""), json!("3"));
        assert_eq!(value("hi"), json!("hi"));
        assert_eq!(value(""), json!(""));
        assert_eq!(value("a=b"), json!("a=b"));
        assert_eq!(value("{broken"), json!("{broken"));
    }

    #[test]
    fn pairs_go_on_top_of_the_json_object() {
        let pairs = vec!["b=3".to_owned(), "text=x=y".to_owned()];
        assert_eq!(
            tool_arguments(Some(r#"{"a": 1, "b": 2}"#), &pairs, None).unwrap(),
            json!({"a": 1, "b": 3, "text": "x=y"})
        );
        assert_eq!(tool_arguments(None, &[], None).unwrap(), json!({}));
        assert!(matches!(
            tool_arguments(Some("[1]"), &[], None),
            Err(Failure::Usage(_))
        ));
        assert!(matches!(
            tool_arguments(Some("{"), &[], None),
            Err(Failure::Usage(_))
        ));
        assert!(matches!(
            tool_arguments(None, &["=1".to_owned()], None),
            Err(Failure::Usage(_))
        ));
        assert!(matches!(
            tool_arguments(None, &["novalue".to_owned()], None),
            Err(Failure::Usage(_))
        ));
    }

    #[test]
    fn a_string_property_takes_the_text_as_written() {
        let schema = json!({"type": "object", "properties": {
            "zip": {"type": "string"},
            "note": {"type": ["string", "null"]},
            "n": {"type": "integer"},
            "either": {"type": ["string", "integer"]},
            "any": {"anyOf": [{"type": "string"}]},
        }});
        let pairs: Vec<String> = [
            "zip=94103",
            "note=true",
            "n=3",
            "either=3",
            "any=4",
            "other=5",
        ]
        .iter()
        .map(|p| (*p).to_owned())
        .collect();
        assert_eq!(
            tool_arguments(None, &pairs, Some(&schema)).unwrap(),
            json!({"zip": "94103", "note": "true", "n": 3, "either": 3, "any": 4, "other": 5})
        );
        // --args is raw JSON: a number stays a number even where the schema wants a string.
        assert_eq!(
            tool_arguments(Some(r#"{"zip": 94103}"#), &[], Some(&schema)).unwrap(),
            json!({"zip": 94103})
        );
        // Without the schema (not listed by the server), the old rule.
        assert_eq!(
            tool_arguments(None, &pairs[..1], None).unwrap(),
            json!({"zip": 94103})
        );
    }

    #[test]
    fn prompt_values_stay_strings() {
        assert_eq!(
            prompt_arguments(&["n=3".to_owned()]).unwrap(),
            vec![("n".to_owned(), "3".to_owned())]
        );
    }
}
