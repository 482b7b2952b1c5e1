//! The message model (SPEC §1): `ChatMessage`, its roles, content, tool calls and usage.
//!
//! Invariant: unknown keys are never dropped. Every key this struct does not name lands in
//! `extra` and is written back flattened, as Refact trajectories carry them. A nested `"extra"`
//! object found on load is folded into `extra` so both spellings read the same.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// Who speaks. Hidden roles (`event`, `plan`, `compression_report`, `error`) are stored and
/// shown but never sent to a provider by name (SPEC §7).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
    /// Refact's result of a patch tool: a tool result whose content lists file edits. Stored as
    /// `diff` (a trajectory round-trips unchanged) and sent as a tool result.
    Diff,
    ContextFile,
    CdInstruction,
    Event,
    Plan,
    CompressionReport,
    Error,
}

impl Role {
    pub fn is_hidden(self) -> bool {
        matches!(
            self,
            Role::Event | Role::Plan | Role::CompressionReport | Role::Error
        )
    }
}

/// A message body: plain text, or an array of parts (`text`, `image_url`, …) kept as JSON.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<Value>),
}

impl Default for Content {
    fn default() -> Self {
        Content::Text(String::new())
    }
}

impl Content {
    /// The text of the body; parts contribute their `text` fields joined by newlines.
    pub fn text(&self) -> String {
        match self {
            Content::Text(text) => text.clone(),
            Content::Parts(parts) => parts
                .iter()
                .filter_map(|part| part.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }

    pub fn is_empty(&self) -> bool {
        match self {
            Content::Text(text) => text.is_empty(),
            Content::Parts(parts) => parts.is_empty(),
        }
    }

    pub fn image_count(&self) -> usize {
        match self {
            Content::Text(_) => 0,
            Content::Parts(parts) => parts.iter().filter(|p| is_image_part(p)).count(),
        }
    }
}

pub fn is_image_part(part: &Value) -> bool {
    part.get("type").and_then(Value::as_str) == Some("image_url")
}

/// A `null` content reads as empty text (OpenAI sends `content: null` beside tool calls).
fn content_or_empty<'de, D: Deserializer<'de>>(de: D) -> Result<Content, D::Error> {
    Ok(Option::<Content>::deserialize(de)?.unwrap_or_default())
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct FunctionCall {
    pub name: String,
    /// JSON text as the model wrote it; not guaranteed to parse.
    pub arguments: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ToolCall {
    pub id: String,
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    pub function: FunctionCall,
}

fn function_type() -> String {
    "function".to_string()
}

impl ToolCall {
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        ToolCall {
            id: id.into(),
            kind: function_type(),
            function: FunctionCall {
                name: name.into(),
                arguments: arguments.into(),
            },
        }
    }
}

/// Usage normalized across providers (SPEC §1, §6.4). `prompt_tokens` counts every input token,
/// cached included. Absent numbers stay `None` so a later report only overwrites what it names.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_creation_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
}

impl Usage {
    /// Field-by-field overwrite: a field the later report lacks keeps its earlier value.
    pub fn merge(&mut self, later: &Usage) {
        fn take(slot: &mut Option<u64>, later: Option<u64>) {
            if later.is_some() {
                *slot = later;
            }
        }
        take(&mut self.prompt_tokens, later.prompt_tokens);
        take(&mut self.completion_tokens, later.completion_tokens);
        take(&mut self.cache_read_tokens, later.cache_read_tokens);
        take(&mut self.cache_creation_tokens, later.cache_creation_tokens);
        take(&mut self.reasoning_tokens, later.reasoning_tokens);
        take(&mut self.total_tokens, later.total_tokens);
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ChatMessage {
    #[serde(default)]
    pub message_id: String,
    pub role: Role,
    #[serde(default, deserialize_with = "content_or_empty")]
    pub content: Content,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_failed: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_blocks: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub citations: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_content_blocks: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at_ms: Option<u64>,
    #[serde(flatten, deserialize_with = "fold_nested_extra")]
    pub extra: Map<String, Value>,
}

/// Reads the flattened unknown keys, folding a nested `"extra": {...}` object into them.
fn fold_nested_extra<'de, D: Deserializer<'de>>(de: D) -> Result<Map<String, Value>, D::Error> {
    let mut map = Map::<String, Value>::deserialize(de)?;
    if let Some(Value::Object(nested)) = map.remove("extra") {
        for (key, value) in nested {
            map.entry(key).or_insert(value);
        }
    }
    Ok(map)
}

impl ChatMessage {
    pub fn new(message_id: impl Into<String>, role: Role, content: Content) -> Self {
        ChatMessage {
            message_id: message_id.into(),
            role,
            content,
            tool_calls: None,
            tool_call_id: None,
            tool_failed: None,
            reasoning_content: None,
            thinking_blocks: None,
            citations: None,
            server_content_blocks: None,
            usage: None,
            finish_reason: None,
            created_at_ms: None,
            extra: Map::new(),
        }
    }

    pub fn text(message_id: impl Into<String>, role: Role, text: impl Into<String>) -> Self {
        Self::new(message_id, role, Content::Text(text.into()))
    }

    pub fn tool_result(
        message_id: impl Into<String>,
        call_id: &str,
        text: &str,
        failed: bool,
    ) -> Self {
        let mut message = Self::text(message_id, Role::Tool, text);
        message.tool_call_id = Some(call_id.to_string());
        message.tool_failed = failed.then_some(true);
        message
    }

    pub fn tool_calls(&self) -> &[ToolCall] {
        self.tool_calls.as_deref().unwrap_or(&[])
    }
}
