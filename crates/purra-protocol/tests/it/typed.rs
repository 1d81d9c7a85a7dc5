//! Typed tools, prompts and templates: definitions and derived schemas as `tools/list` and
//! `prompts/list` show them, registration refusals as values (never panics), and the
//! method-based server of `#[handlers]`; exact JSON over the raw in-memory transport.

use crate::support::ask;

use std::collections::BTreeMap;
use std::sync::Mutex;

use purra_protocol::memory::{self, RawEnd};
use purra_protocol::types::*;
use purra_protocol::{
    Args, HandlerResult, Json, PromptDef, RegistrationError, RequestCtx, Server, ToolDef,
};
use serde_json::{json, Value};

async fn session(server: &Server) -> RawEnd {
    let (t, mut raw) = memory::raw();
    server.start(t);
    raw.send(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#.to_owned()).await;
    raw.recv().await.expect("an initialize result");
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned())
        .await;
    raw
}

async fn ask_json(raw: &mut RawEnd, frame: &str) -> Value {
    serde_json::from_str(&ask(raw, frame).await).expect("JSON")
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct City {
    /// The city's name.
    city: String,
    /// Days ahead (0 is today).
    days: Option<u8>,
}

#[derive(serde::Serialize, schemars::JsonSchema)]
struct Forecast {
    city: String,
    high: f64,
}

#[allow(dead_code)]
#[derive(serde::Deserialize, schemars::JsonSchema)]
enum Unit {
    Celsius,
    Fahrenheit,
}

#[allow(dead_code)]
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(tag = "op", rename_all = "lowercase")]
enum Op {
    Add { by: i32 },
    Reset {},
}

#[allow(dead_code)]
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Tree {
    label: String,
    children: Vec<Tree>,
}

#[allow(dead_code)]
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Tags {
    tags: Vec<String>,
}

#[tokio::test]
async fn a_tool_def_shows_everything_and_schemas_come_from_the_types() {
    let server = Server::builder("t", "1").build();
    server
        .add_tool(
            ToolDef::new("forecast")
                .description("The forecast for a city")
                .title("Forecast")
                .annotations(ToolAnnotations::new().with_read_only(true))
                .icon(Icon::new("https://example.com/sun.png").with_mime_type("image/png"))
                .meta(json!({"example.com/cost": 1}).as_object().cloned().unwrap())
                .task_support(TaskSupport::Optional),
            |c: City, _: RequestCtx| async move {
                HandlerResult::Ok(Json(Forecast {
                    city: c.city,
                    high: 21.5 + f64::from(c.days.unwrap_or(0)),
                }))
            },
        )
        .unwrap();
    let mut raw = session(&server).await;
    let list = ask_json(
        &mut raw,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
    )
    .await;
    assert_eq!(
        list,
        json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": [{
            "name": "forecast",
            "title": "Forecast",
            "description": "The forecast for a city",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "The city's name."},
                    "days": {"type": ["integer", "null"], "minimum": 0, "maximum": 255, "description": "Days ahead (0 is today)."}
                },
                "required": ["city"]
            },
            "outputSchema": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "high": {"type": "number"}},
                "required": ["city", "high"]
            },
            "annotations": {"readOnlyHint": true},
            "execution": {"taskSupport": "optional"},
            "icons": [{"src": "https://example.com/sun.png", "mimeType": "image/png"}],
            "_meta": {"example.com/cost": 1}
        }]}})
    );
    assert_eq!(
        ask(&mut raw, r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"forecast","arguments":{"city":"Oslo","days":2}}}"#).await,
        r#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"{\"city\":\"Oslo\",\"high\":23.5}"}],"structuredContent":{"city":"Oslo","high":23.5}}}"#
    );
    // Out of u8's range: refused by the schema before the handler, as a result the model reads.
    assert_eq!(
        ask(&mut raw, r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"forecast","arguments":{"city":"Oslo","days":300}}}"#).await,
        r#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"Invalid arguments for tool forecast: /days: 300 is greater than the maximum of 255"}],"isError":true}}"#
    );
}

#[test]
fn registration_refusals_are_values_whatever_the_argument_type() {
    let server = Server::builder("t", "1").build();
    let refused = server
        .tool("unit_enum", "", |_: Unit, _: RequestCtx| async {
            HandlerResult::Ok("never")
        })
        .unwrap_err();
    assert_eq!(
        refused,
        RegistrationError::ArgumentsNotObject {
            name: "unit_enum".into(),
            found: "string".into()
        }
    );
    assert_eq!(
        refused.to_string(),
        "the arguments of \"unit_enum\" must be a JSON object, but its arguments type describes string; use a struct (or `()` for no arguments)"
    );
    assert!(matches!(
        server.tool("number", "", |_: u32, _: RequestCtx| async {
            HandlerResult::Ok("")
        }),
        Err(RegistrationError::ArgumentsNotObject { .. })
    ));
    // No arguments, any arguments, an internally tagged enum and a recursive type register.
    server
        .tool("none", "", |(), _: RequestCtx| async {
            HandlerResult::Ok("")
        })
        .unwrap()
        .tool("any", "", |v: Value, _: RequestCtx| async move {
            HandlerResult::Ok(v.to_string())
        })
        .unwrap()
        .tool("op", "", |_: Op, _: RequestCtx| async {
            HandlerResult::Ok("")
        })
        .unwrap()
        .tool("tree", "", |_: Tree, _: RequestCtx| async {
            HandlerResult::Ok("")
        })
        .unwrap();
    assert_eq!(
        server
            .tool("list", "", |(), _: RequestCtx| async {
                HandlerResult::Ok(Json(vec![1u8]))
            })
            .unwrap_err(),
        RegistrationError::OutputNotObject {
            name: "list".into(),
            found: "array".into()
        }
    );
    assert_eq!(
        server
            .prompt("tags", "", |_: Tags, _: RequestCtx| async {
                HandlerResult::Ok(String::new())
            })
            .unwrap_err(),
        RegistrationError::InvalidPromptArgument {
            name: "tags".into(),
            argument: "tags".into()
        }
    );
    assert_eq!(
        server
            .resource_template(
                ResourceTemplate::new("weather://{town}/now", "now"),
                |_, _: City, _: RequestCtx| async {
                    HandlerResult::Ok(ReadResourceResult::default())
                },
            )
            .unwrap_err()
            .to_string(),
        "invalid URI template \"weather://{town}/now\": the variables type requires \"city\", which the template does not have"
    );
}

#[tokio::test]
async fn typed_prompts_and_templates_decode_string_arguments() {
    let server = Server::builder("t", "1").build();
    server
        .add_prompt(
            PromptDef::new("outlook").title("Outlook"),
            |c: City, _: RequestCtx| async move {
                HandlerResult::Ok(format!(
                    "Describe {} in {} days.",
                    c.city,
                    c.days.unwrap_or(0)
                ))
            },
        )
        .unwrap()
        .resource_template(
            ResourceTemplate::new("weather://{city}/day/{days}", "day"),
            |uri, c: City, _: RequestCtx| async move {
                HandlerResult::Ok(ResourceContents::text(
                    uri,
                    format!("{} +{}", c.city, c.days.unwrap_or(0)),
                ))
            },
        )
        .unwrap();
    let mut raw = session(&server).await;
    assert_eq!(
        ask(
            &mut raw,
            r#"{"jsonrpc":"2.0","id":1,"method":"prompts/list"}"#
        )
        .await,
        r#"{"jsonrpc":"2.0","id":1,"result":{"prompts":[{"name":"outlook","title":"Outlook","arguments":[{"name":"city","description":"The city's name.","required":true},{"name":"days","description":"Days ahead (0 is today).","required":false}]}]}}"#
    );
    assert_eq!(
        ask(&mut raw, r#"{"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"name":"outlook","arguments":{"city":"Oslo","days":"3"}}}"#).await,
        r#"{"jsonrpc":"2.0","id":2,"result":{"messages":[{"role":"user","content":{"type":"text","text":"Describe Oslo in 3 days."}}]}}"#
    );
    assert_eq!(
        ask(&mut raw, r#"{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"outlook","arguments":{"city":"Oslo","days":"many"}}}"#).await,
        r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"Invalid arguments for prompt outlook: invalid type: string \"many\", expected u8"}}"#
    );
    assert_eq!(
        ask(
            &mut raw,
            r#"{"jsonrpc":"2.0","id":4,"method":"prompts/get","params":{"name":"outlook"}}"#
        )
        .await,
        r#"{"jsonrpc":"2.0","id":4,"error":{"code":-32602,"message":"Missing required argument: city"}}"#
    );
    assert_eq!(
        ask(&mut raw, r#"{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":"weather://Oslo/day/2"}}"#).await,
        r#"{"jsonrpc":"2.0","id":5,"result":{"contents":[{"uri":"weather://Oslo/day/2","text":"Oslo +2"}]}}"#
    );
    assert_eq!(
        ask(&mut raw, r#"{"jsonrpc":"2.0","id":6,"method":"resources/read","params":{"uri":"weather://Oslo/day/soon"}}"#).await,
        r#"{"jsonrpc":"2.0","id":6,"error":{"code":-32602,"message":"Invalid URI weather://Oslo/day/soon: invalid type: string \"soon\", expected u8"}}"#
    );
}

/// A method-based server: state shared by every call, tools and a prompt from methods.
#[derive(Default)]
struct Notes {
    notes: Mutex<BTreeMap<String, String>>,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Put {
    /// The note's key.
    key: String,
    /// Its text.
    text: String,
}

#[derive(serde::Serialize, schemars::JsonSchema)]
struct Count {
    count: usize,
}

#[purra_protocol::handlers]
impl Notes {
    /// Stores a note under a key.
    #[tool(idempotent, destructive = false)]
    fn put(&self, Args(put): Args<Put>) -> Json<Count> {
        let mut notes = self.notes.lock().unwrap();
        notes.insert(put.key, put.text);
        Json(Count { count: notes.len() })
    }

    /// Reads a note.
    #[tool(read_only, title = "Read a note")]
    async fn get(&self, key: String, ctx: RequestCtx) -> Result<String, String> {
        assert!(!ctx.is_cancelled());
        let notes = self.notes.lock().unwrap();
        notes
            .get(&key)
            .cloned()
            .ok_or_else(|| format!("no note {key:?}"))
    }

    /// How many notes there are.
    #[tool(name = "count")]
    fn how_many(&self) -> String {
        self.notes.lock().unwrap().len().to_string()
    }

    /// Summarizes the notes whose keys start with a prefix.
    #[prompt]
    fn summarize(&self, prefix: String) -> Vec<PromptMessage> {
        let notes = self.notes.lock().unwrap();
        notes
            .iter()
            .filter(|(k, _)| k.starts_with(&prefix))
            .map(|(k, v)| PromptMessage::user(format!("{k}: {v}")))
            .collect()
    }

    fn not_a_tool(&self) -> usize {
        self.notes.lock().unwrap().len()
    }
}

/// `#[tool(idempotent)]` honours idempotency keys: the server declares `tools.idempotency`, a
/// repeated key gets the stored result without running, other arguments under it are refused.
#[tokio::test]
async fn an_idempotent_method_runs_once_per_key() {
    let server = Server::builder("notes", "1").build();
    server.register(Notes::default()).unwrap();
    let (t, mut raw) = memory::raw();
    server.start(t);
    let init = ask_json(&mut raw, r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#).await;
    assert_eq!(
        init["result"]["capabilities"]["tools"],
        json!({"listChanged": true, "idempotency": {}})
    );
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned())
        .await;
    let put = |id: u32, key: &str, note: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"put","arguments":{{"key":"{note}","text":"t"}},"_meta":{{"io.purra/idempotency-key":"{key}"}}}}}}"#
        )
    };
    let answer = |id: u32, count: u32| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"{{\"count\":{count}}}"}}],"structuredContent":{{"count":{count}}}}}}}"#
        )
    };
    assert_eq!(ask(&mut raw, &put(1, "x", "a1")).await, answer(1, 1));
    assert_eq!(ask(&mut raw, &put(2, "y", "b2")).await, answer(2, 2));
    // The stored result of `x`: `a1` is not put again (a run would answer its count, 2).
    assert_eq!(ask(&mut raw, &put(3, "x", "a1")).await, answer(3, 1));
    // SEP-3182's member is the same key.
    assert_eq!(
        ask(&mut raw, r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"put","arguments":{"key":"a1","text":"t"},"idempotencyKey":"x"}}"#).await,
        answer(4, 1)
    );
    let refused = ask_json(&mut raw, &put(5, "x", "c3")).await;
    assert_eq!(refused["error"]["code"], -32602);
    assert_eq!(
        ask(&mut raw, &put(6, "z", "c3")).await,
        answer(6, 3),
        "c3 was not put by the refused call"
    );
}

#[tokio::test]
async fn a_method_based_server_shares_its_state() {
    let server = Server::builder("notes", "1").build();
    server.register(Notes::default()).unwrap();
    assert_eq!(
        Notes::default().not_a_tool(),
        0,
        "unmarked methods stay plain methods"
    );
    let mut raw = session(&server).await;
    let list = ask_json(
        &mut raw,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
    )
    .await;
    assert_eq!(
        list["result"]["tools"],
        json!([
            {
                "name": "put",
                "description": "Stores a note under a key.",
                "inputSchema": {
                    "type": "object",
                    "properties": {
                        "key": {"type": "string", "description": "The note's key."},
                        "text": {"type": "string", "description": "Its text."}
                    },
                    "required": ["key", "text"]
                },
                "outputSchema": {
                    "type": "object",
                    "properties": {"count": {"type": "integer", "minimum": 0}},
                    "required": ["count"]
                },
                "annotations": {"destructiveHint": false, "idempotentHint": true}
            },
            {
                "name": "get",
                "title": "Read a note",
                "description": "Reads a note.",
                "inputSchema": {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
                "annotations": {"readOnlyHint": true}
            },
            {
                "name": "count",
                "description": "How many notes there are.",
                "inputSchema": {"type": "object", "properties": {}}
            }
        ])
    );
    assert_eq!(
        ask(&mut raw, r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"put","arguments":{"key":"a1","text":"first"}}}"#).await,
        r#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"{\"count\":1}"}],"structuredContent":{"count":1}}}"#
    );
    assert_eq!(
        ask(&mut raw, r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get","arguments":{"key":"a1"}}}"#).await,
        r#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"first"}]}}"#
    );
    assert_eq!(
        ask(&mut raw, r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"get","arguments":{"key":"zz"}}}"#).await,
        r#"{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"no note \"zz\""}],"isError":true}}"#
    );
    assert_eq!(
        ask(&mut raw, r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"count","arguments":{}}}"#).await,
        r#"{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"1"}]}}"#
    );
    assert_eq!(
        ask(
            &mut raw,
            r#"{"jsonrpc":"2.0","id":6,"method":"prompts/list"}"#
        )
        .await,
        r#"{"jsonrpc":"2.0","id":6,"result":{"prompts":[{"name":"summarize","description":"Summarizes the notes whose keys start with a prefix.","arguments":[{"name":"prefix","required":true}]}]}}"#
    );
    assert_eq!(
        ask(&mut raw, r#"{"jsonrpc":"2.0","id":7,"method":"prompts/get","params":{"name":"summarize","arguments":{"prefix":"a"}}}"#).await,
        r#"{"jsonrpc":"2.0","id":7,"result":{"messages":[{"role":"user","content":{"type":"text","text":"a1: first"}}]}}"#
    );
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Flat {
    text: String,
    n: Option<i64>,
    x: f64,
    on: bool,
}

/// The usual `tools/call` (no `_meta`, task or key) is read once and a flat typed tool's
/// arguments are decoded from their bytes; every answer is the one the general way gives (the
/// same call with `_meta` after them, which always goes that way), byte for byte, whatever the
/// arguments: duplicate and escaped keys, wrong types, unknown keys, numbers out of range.
#[tokio::test]
async fn a_usual_call_answers_as_the_general_way_byte_for_byte() {
    let server = Server::builder("t", "1").build();
    server
        .tool("flat", "", |f: Flat, _: RequestCtx| async move {
            HandlerResult::Ok(format!("{}|{:?}|{}|{}", f.text, f.n, f.x, f.on))
        })
        .unwrap();
    server
        .tool("sum", "", |f: Flat, _: RequestCtx| async move {
            HandlerResult::Ok(Json(Forecast {
                city: f.text,
                high: f.x,
            }))
        })
        .unwrap();
    server
        .tool("none", "", |_: (), _: RequestCtx| async {
            HandlerResult::Ok("none")
        })
        .unwrap();
    let mut raw = session(&server).await;
    let cases = [
        ("flat", r#"{"text":"a","x":1.5,"on":true}"#),
        ("flat", r#"{"text":"a","n":null,"x":1,"on":false}"#),
        ("flat", r#"{"text":"a","n":-7,"x":-0.5e3,"on":true}"#),
        ("flat", r#"{"text":"a","text":"b","x":1,"on":true}"#),
        ("flat", r#"{"te\u0078t":"esc","x":1,"on":true}"#),
        (
            "flat",
            r#"{"text":"a","x":1,"on":true,"other":{"deep":[1e400]}}"#,
        ),
        ("flat", r#"{"text":"a","x":1e400,"on":true}"#),
        ("flat", r#"{"text":"a","n":1.0,"x":1,"on":true}"#),
        (
            "flat",
            r#"{"text":"a","n":99999999999999999999,"x":1,"on":true}"#,
        ),
        ("flat", r#"{"text":5,"x":1,"on":true}"#),
        ("flat", r#"{"text":"a","x":"1","on":true}"#),
        ("flat", r#"{"text":"a","on":true}"#),
        ("flat", r#"{"text":"\ud800","x":1,"on":true}"#),
        ("flat", r#"[]"#),
        ("flat", r#"5"#),
        ("flat", r#"null"#),
        ("sum", r#"{"text":"Oslo","x":23.5,"on":true}"#),
        ("none", r#"{"anything":[1,2]}"#),
        ("none", r#"null"#),
        ("missing", r#"{}"#),
    ];
    for (i, (tool, args)) in cases.iter().enumerate() {
        let usual = ask(&mut raw, format!(r#"{{"jsonrpc":"2.0","id":"u{i}","method":"tools/call","params":{{"name":"{tool}","arguments":{args}}}}}"#)).await;
        let general = ask(&mut raw, format!(r#"{{"jsonrpc":"2.0","id":"u{i}","method":"tools/call","params":{{"name":"{tool}","arguments":{args},"_meta":{{}}}}}}"#)).await;
        assert_eq!(usual, general, "{tool} {args}");
    }
    // And exactly: the result is written into its frame, for a string id as for a number.
    assert_eq!(
        ask(&mut raw, r#"{"jsonrpc":"2.0","id":"s\"1","method":"tools/call","params":{"name":"flat","arguments":{"text":"a","text":"b","x":2,"on":true}}}"#).await,
        r#"{"jsonrpc":"2.0","id":"s\"1","result":{"content":[{"type":"text","text":"b|None|2|true"}]}}"#
    );
    assert_eq!(
        ask(&mut raw, r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"flat","arguments":{"text":"a","x":2,"on":true}}}"#).await,
        r#"{"jsonrpc":"2.0","id":9,"result":{"content":[{"type":"text","text":"a|None|2|true"}]}}"#
    );
}
