//! The conformance fixtures over an in-memory connection: the names and shapes the suite's
//! server scenarios look for, and the client's refusal of an unknown scenario.

use purra_protocol::types::{Content, LoggingLevel};
use purra_protocol::{memory, Client, ClientOptions, Connection};
use serde_json::json;

async fn connect() -> Connection {
    let (a, b) = memory::pair();
    let server = purra_conformance::server::build();
    tokio::spawn(async move { server.serve(b).await });
    Client::connect(a, ClientOptions::default())
        .await
        .expect("connects")
}

#[tokio::test]
async fn every_fixture_is_listed_with_a_description() {
    let conn = connect().await;
    let caps = conn.server_capabilities();
    assert!(caps.resources_subscribe());
    assert!(caps.logging.is_some() && caps.completions.is_some());

    let tools = conn.tools();
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "confirm_delete",
            "failing_job",
            "greet",
            "json_schema_2020_12_tool",
            "multi_input",
            "protocol_error_job",
            "slow_compute",
            "test_audio_content",
            "test_custom_headers",
            "test_elicitation",
            "test_elicitation_sep1034_defaults",
            "test_elicitation_sep1330_enums",
            "test_embedded_resource",
            "test_error_handling",
            "test_image_content",
            "test_input_required_result_capabilities",
            "test_input_required_result_elicitation",
            "test_input_required_result_list_roots",
            "test_input_required_result_multi_round",
            "test_input_required_result_multiple_inputs",
            "test_input_required_result_request_state",
            "test_input_required_result_sampling",
            "test_input_required_result_tampered_state",
            "test_logging_tool",
            "test_missing_capability",
            "test_multiple_content_types",
            "test_reconnection",
            "test_sampling",
            "test_simple_text",
            "test_streaming_elicitation",
            "test_tool_with_logging",
            "test_tool_with_progress",
            "test_tool_with_task",
            "test_trigger_prompt_change",
            "test_trigger_tool_change",
        ]
    );
    assert!(tools.iter().all(|t| t.description.is_some()));
    let schema = &tools
        .iter()
        .find(|t| t.name == "json_schema_2020_12_tool")
        .expect("listed")
        .input_schema;
    assert_eq!(
        schema.get("$schema"),
        Some(&json!("https://json-schema.org/draft/2020-12/schema"))
    );
    assert_eq!(
        schema.get("$defs").and_then(|d| d.get("address")),
        Some(
            &json!({"$anchor": "addressDef", "type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}})
        )
    );
    assert_eq!(schema.get("additionalProperties"), Some(&json!(false)));
    for keyword in ["allOf", "if", "then", "else"] {
        assert!(schema.contains_key(keyword), "{keyword} is served");
    }

    let prompts = conn.prompts();
    let mut names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "test_input_required_result_prompt",
            "test_prompt_with_arguments",
            "test_prompt_with_embedded_resource",
            "test_prompt_with_image",
            "test_simple_prompt",
        ]
    );
    assert!(prompts.iter().all(|p| p.description.is_some()));

    let mut uris: Vec<String> = conn.resources().iter().map(|r| r.uri.clone()).collect();
    uris.sort_unstable();
    assert_eq!(
        uris,
        [
            "skill://acme/billing/refunds/SKILL.md",
            "skill://pdf-processing/SKILL.md",
            "test://static-binary",
            "test://static-text",
            "test://watched-resource"
        ]
    );
    // The skills scenarios' fixtures: each skill with a subfolder.
    let skills: Vec<(String, usize)> = conn
        .skills()
        .iter()
        .map(|s| (s.uri.clone(), s.files().len()))
        .collect();
    assert_eq!(
        skills,
        [
            ("skill://acme/billing/refunds/SKILL.md".to_owned(), 2),
            ("skill://pdf-processing/SKILL.md".to_owned(), 3),
        ]
    );
    let templates = conn.resource_templates();
    assert_eq!(templates.len(), 1);
    assert_eq!(templates[0].uri_template, "test://template/{id}/data");
}

#[tokio::test]
async fn fixtures_answer_as_the_scenarios_expect() {
    let conn = connect().await;
    let r = conn
        .call_tool("test_audio_content", json!({}))
        .await
        .unwrap();
    assert!(matches!(&r.content[..], [Content::Audio(a)] if a.mime_type == "audio/wav"));
    let r = conn
        .call_tool("test_error_handling", json!({}))
        .await
        .unwrap();
    assert!(r.is_error() && r.texts().next().is_some());

    let logs = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = logs.clone();
    let _l = conn.on("notifications/message", move |v| {
        sink.lock().unwrap().push(v.clone())
    });
    conn.set_logging_level(LoggingLevel::Debug).await.unwrap();
    conn.call_tool("test_tool_with_logging", json!({}))
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert_eq!(logs.lock().unwrap().len(), 3);

    let r = conn
        .read_resource("test://template/123/data")
        .await
        .unwrap();
    assert!(r.contents[0].text.as_deref().unwrap().contains("123"));
    let r = conn
        .get_prompt(
            "test_prompt_with_arguments",
            [("arg1", "testValue1"), ("arg2", "testValue2")]
                .map(|(k, v)| (k.to_owned(), v.to_owned())),
        )
        .await
        .unwrap();
    let text = r.messages[0].content.as_text().unwrap();
    assert!(text.contains("testValue1") && text.contains("testValue2"));
}

#[tokio::test]
async fn the_client_refuses_an_unknown_scenario() {
    let e = purra_conformance::client::run("no-such-scenario", "http://127.0.0.1:9/")
        .await
        .unwrap_err();
    assert!(e.contains("unknown scenario"), "{e}");
}
