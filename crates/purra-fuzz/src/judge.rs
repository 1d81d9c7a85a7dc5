//! The adapter's result judging: every failure is one of the adapter's codes (no remote text);
//! a success is `{text, structured}` made from an I-JSON result within the limits, without
//! `isError`, only text blocks, and `structuredContent` that passes the output schema.

use purra_core::{parse_json, CompiledSchema, JsonLimits};
use purra_mcp::__private::judge_result;
use purra_mcp::{codes, Limits};
use serde_json::{json, Value};

use crate::input::Input;

/// Checks one input: limits and a schema choice from three bytes, then the result text.
pub fn check(data: &[u8]) {
    let mut input = Input::new(data);
    let limits = Limits {
        max_result_bytes: 1 + u64::from(input.u16()),
        max_content_blocks: 1 + u32::from(input.byte() % 8),
        ..Limits::default()
    };
    let schema = match input.byte() % 3 {
        0 => None,
        1 => Some(json!({"type": "object"})),
        _ => Some(json!({
            "type": "object",
            "properties": {"n": {"type": "integer", "minimum": 0}},
            "required": ["n"],
            "additionalProperties": false
        })),
    };
    let output = schema.map(|s| CompiledSchema::compile(&s).expect("a profile schema"));
    let Ok(raw) = std::str::from_utf8(input.rest()) else {
        return;
    };
    match judge_result(raw, &limits, output.as_ref()) {
        Err(code) => assert!(
            codes::all().contains(&code),
            "{code:?} is not an adapter code"
        ),
        Ok(v) => {
            assert!(raw.len() as u64 <= limits.max_result_bytes);
            let result = parse_json(
                raw.as_bytes(),
                &JsonLimits {
                    max_bytes: 1 << 20,
                    max_depth: 512,
                    max_nodes: 1 << 20,
                },
            )
            .expect("a judged result is I-JSON");
            assert_ne!(result.get("isError"), Some(&Value::Bool(true)));
            let obj = v.as_object().expect("an object");
            assert_eq!(obj.len(), 2, "{v}");
            let text = obj["text"].as_array().expect("text is an array");
            assert!(text.len() <= limits.max_content_blocks as usize);
            let blocks = result
                .get("content")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            assert_eq!(text.len(), blocks.len());
            for (t, b) in text.iter().zip(&blocks) {
                assert_eq!(b["type"], "text");
                assert_eq!(t, &b["text"]);
            }
            let structured = &obj["structured"];
            match &output {
                Some(schema) => {
                    assert!(structured.is_object());
                    assert!(schema.is_valid(structured));
                    assert_eq!(structured, &result["structuredContent"]);
                }
                None => assert!(structured.is_object() || structured.is_null()),
            }
        }
    }
}
