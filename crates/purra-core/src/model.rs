//! The model contract, the transcript, and a scripted model for tests and examples.
//!
//! [`Model::respond`] receives the instructions, the transcript and the tool specs and returns text and
//! tool calls. It returns a [`BoxFuture`] so `Arc<dyn Model>` works without the `async-trait` crate.
//! Tool results enter the transcript as values or as sanitized [`ErrorCode`]s only.

use crate::error_code::ErrorCode;
use crate::store::BoxFuture;
use crate::tool::{ToolCall, ToolSpec};
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::Mutex;

/// One entry of a run's transcript.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// The user's input.
    User {
        /// Text.
        text: String,
    },
    /// A model turn.
    Assistant {
        /// Text.
        text: String,
        /// Tool calls of this turn.
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call.
    Tool {
        /// The call id.
        call_id: String,
        /// The tool name.
        name: String,
        /// The result or a code.
        result: ToolMessage,
    },
}

/// What the model sees of one call's result.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ToolMessage {
    /// The validated result.
    Ok {
        /// The value.
        value: Value,
    },
    /// A sanitized failure.
    Error {
        /// The code.
        code: ErrorCode,
    },
}

/// What a model is asked.
#[derive(Clone, Copy, Debug)]
pub struct ModelRequest<'a> {
    /// The agent's instructions.
    pub instructions: &'a str,
    /// The transcript so far.
    pub transcript: &'a [Message],
    /// The tools it may call.
    pub tools: &'a [ToolSpec],
}

/// A model's answer for one turn.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelResponse {
    /// Text (the final answer when there are no tool calls).
    pub text: String,
    /// Tool calls, all admitted together as one batch.
    pub tool_calls: Vec<ToolCall>,
}

/// A model failure, as a code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelError {
    /// The code the run fails with.
    pub code: ErrorCode,
}

impl std::fmt::Display for ModelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "model failed: {}", self.code)
    }
}

impl std::error::Error for ModelError {}

/// The model contract.
pub trait Model: Send + Sync {
    /// The model id (part of the run preset fingerprint).
    fn id(&self) -> &str;
    /// Answers one turn.
    fn respond<'a>(
        &'a self,
        request: ModelRequest<'a>,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>>;
}

/// A model that plays back a fixed script and records every transcript it was shown.
#[derive(Debug)]
pub struct ScriptedModel {
    id: String,
    script: Mutex<VecDeque<ModelResponse>>,
    seen: Mutex<Vec<Vec<Message>>>,
}

impl ScriptedModel {
    /// A model with this id answering with `script`, one response per turn. When the script runs out it
    /// fails with `model_failed`.
    pub fn new(id: impl Into<String>, script: Vec<ModelResponse>) -> ScriptedModel {
        ScriptedModel {
            id: id.into(),
            script: Mutex::new(script.into()),
            seen: Mutex::new(Vec::new()),
        }
    }

    /// Every transcript shown to the model, in order.
    pub fn transcripts(&self) -> Vec<Vec<Message>> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// A response with only text.
    pub fn text(text: impl Into<String>) -> ModelResponse {
        ModelResponse {
            text: text.into(),
            tool_calls: Vec::new(),
        }
    }

    /// A response with tool calls given as `(id, name, arguments)`.
    pub fn calls(calls: &[(&str, &str, Value)]) -> ModelResponse {
        ModelResponse {
            text: String::new(),
            tool_calls: calls
                .iter()
                .map(|(id, name, arguments)| ToolCall {
                    id: (*id).to_owned(),
                    name: (*name).to_owned(),
                    arguments: arguments.clone(),
                })
                .collect(),
        }
    }
}

impl Model for ScriptedModel {
    fn id(&self) -> &str {
        &self.id
    }

    fn respond<'a>(
        &'a self,
        request: ModelRequest<'a>,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(request.transcript.to_vec());
        let next = self
            .script
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop_front();
        Box::pin(async move {
            next.ok_or(ModelError {
                code: ErrorCode::MODEL_FAILED,
            })
        })
    }
}
