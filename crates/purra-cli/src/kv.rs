//! `KEY=VALUE` arguments: a value is JSON when it parses as JSON, otherwise the string as written.

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

/// Tool arguments: the `--args` object (if any), then each `KEY=VALUE` set on top of it.
pub fn tool_arguments(json: Option<&str>, pairs: &[String]) -> Result<Value, Failure> {
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
        args.insert(key.to_owned(), value(text));
    }
    Ok(Value::Object(args))
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
            tool_arguments(Some(r#"{"a": 1, "b": 2}"#), &pairs).unwrap(),
            json!({"a": 1, "b": 3, "text": "x=y"})
        );
        assert_eq!(tool_arguments(None, &[]).unwrap(), json!({}));
        assert!(matches!(
            tool_arguments(Some("[1]"), &[]),
            Err(Failure::Usage(_))
        ));
        assert!(matches!(
            tool_arguments(Some("{"), &[]),
            Err(Failure::Usage(_))
        ));
        assert!(matches!(
            tool_arguments(None, &["=1".to_owned()]),
            Err(Failure::Usage(_))
        ));
        assert!(matches!(
            tool_arguments(None, &["novalue".to_owned()]),
            Err(Failure::Usage(_))
        ));
    }

    #[test]
    fn prompt_values_stay_strings() {
        assert_eq!(
            prompt_arguments(&["n=3".to_owned()]).unwrap(),
            vec![("n".to_owned(), "3".to_owned())]
        );
    }
}
