//! The message model (SPEC §1): `ChatMessage`, its roles, content, tool calls and usage.
//!
//! Invariant: unknown keys are never dropped. Every key this struct does not name lands in
//! `extra` and is written back flattened, as Refact trajectories carry them. A nested `"extra"`
//! object found on load is folded into `extra` so both spellings read the same.

mod extra;
mod rare;
pub use extra::Extra;
use rare::Rare;
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use std::fmt;

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
/// Read by hand (`ContentVisitor`): an untagged derive buffers every body before it tries a variant.
#[derive(Serialize, Clone, Debug, PartialEq)]
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

    /// `text()`, borrowed when the content is one string (a request copies no text it sends).
    pub fn as_text(&self) -> std::borrow::Cow<'_, str> {
        match self {
            Content::Text(text) => std::borrow::Cow::Borrowed(text),
            parts => std::borrow::Cow::Owned(parts.text()),
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

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        de.deserialize_any(ContentVisitor)
    }
}

struct ContentVisitor;

impl<'de> Visitor<'de> for ContentVisitor {
    type Value = Content;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string or an array of content parts")
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Content, E> {
        Ok(Content::Text(text.to_string()))
    }

    fn visit_string<E: de::Error>(self, text: String) -> Result<Content, E> {
        Ok(Content::Text(text))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Content, A::Error> {
        let mut parts = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(part) = seq.next_element::<Value>()? {
            parts.push(part);
        }
        Ok(Content::Parts(parts))
    }
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

/// Written by derive (the unknown keys flattened back); read by hand (`MessageVisitor`), because
/// a derived `flatten` buffers each message into an intermediate map before reading any field —
/// most of the cost of loading a trajectory.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct ChatMessage {
    pub message_id: String,
    pub role: Role,
    pub content: Content,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_failed: Option<bool>,
    /// Reasoning, thinking blocks, citations, server content blocks: written in their place
    /// (flattened), held behind one pointer (`Rare`). Read and set through the methods of the
    /// same names, which keep it `None` when all four are.
    #[serde(flatten)]
    rare: Option<Box<Rare>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Box<Usage>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_at_ms: Option<u64>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// The unknown keys of a message, a nested `"extra": {...}` object folded into them.
fn fold_nested_extra(mut extra: Extra) -> Extra {
    if let Some(Value::Object(nested)) = extra.remove("extra") {
        for (key, value) in nested {
            if !extra.contains_key(&key) {
                extra.insert(key, value);
            }
        }
    }
    extra
}

impl<'de> Deserialize<'de> for ChatMessage {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        de.deserialize_map(MessageVisitor)
    }
}

/// A message key: one of the fields, or an unknown key kept for `extra`. Read without allocating
/// for the known ones.
enum MessageKey {
    MessageId,
    Role,
    Content,
    ToolCalls,
    ToolCallId,
    ToolFailed,
    ReasoningContent,
    ThinkingBlocks,
    Citations,
    ServerContentBlocks,
    Usage,
    FinishReason,
    CreatedAtMs,
    Other(String),
}

impl MessageKey {
    fn of(key: &str) -> MessageKey {
        match key {
            "message_id" => MessageKey::MessageId,
            "role" => MessageKey::Role,
            "content" => MessageKey::Content,
            "tool_calls" => MessageKey::ToolCalls,
            "tool_call_id" => MessageKey::ToolCallId,
            "tool_failed" => MessageKey::ToolFailed,
            "reasoning_content" => MessageKey::ReasoningContent,
            "thinking_blocks" => MessageKey::ThinkingBlocks,
            "citations" => MessageKey::Citations,
            "server_content_blocks" => MessageKey::ServerContentBlocks,
            "usage" => MessageKey::Usage,
            "finish_reason" => MessageKey::FinishReason,
            "created_at_ms" => MessageKey::CreatedAtMs,
            other => MessageKey::Other(other.to_string()),
        }
    }
}

impl<'de> Deserialize<'de> for MessageKey {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = MessageKey;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a message key")
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<MessageKey, E> {
                Ok(MessageKey::of(key))
            }
        }
        de.deserialize_str(KeyVisitor)
    }
}

struct MessageVisitor;

impl<'de> Visitor<'de> for MessageVisitor {
    type Value = ChatMessage;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a chat message object")
    }

    /// The same rules as a derive would apply: `role` is required, `message_id` and `content`
    /// default to empty (`content: null` too: OpenAI sends it beside tool calls), a `null`
    /// optional field is absent, and a later duplicate key wins as in a JSON object.
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ChatMessage, A::Error> {
        let mut message = ChatMessage::new(String::new(), Role::User, Content::default());
        let mut role = None;
        let mut extra = Extra::new();
        while let Some(key) = map.next_key::<MessageKey>()? {
            match key {
                MessageKey::MessageId => message.message_id = map.next_value()?,
                MessageKey::Role => role = Some(map.next_value()?),
                MessageKey::Content => {
                    message.content = map.next_value::<Option<Content>>()?.unwrap_or_default()
                }
                MessageKey::ToolCalls => message.tool_calls = map.next_value()?,
                MessageKey::ToolCallId => message.tool_call_id = map.next_value()?,
                MessageKey::ToolFailed => message.tool_failed = map.next_value()?,
                MessageKey::ReasoningContent => message.set_reasoning_content(map.next_value()?),
                MessageKey::ThinkingBlocks => message.set_thinking_blocks(map.next_value()?),
                MessageKey::Citations => message.set_citations(map.next_value()?),
                MessageKey::ServerContentBlocks => {
                    message.set_server_content_blocks(map.next_value()?)
                }
                MessageKey::Usage => message.usage = map.next_value()?,
                MessageKey::FinishReason => message.finish_reason = map.next_value()?,
                MessageKey::CreatedAtMs => message.created_at_ms = map.next_value()?,
                MessageKey::Other(key) => {
                    let value = map.next_value()?;
                    extra.insert(key, value);
                }
            }
        }
        message.role = role.ok_or_else(|| de::Error::missing_field("role"))?;
        message.extra = fold_nested_extra(extra);
        Ok(message)
    }
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
            rare: None,
            usage: None,
            finish_reason: None,
            created_at_ms: None,
            extra: Extra::new(),
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

    /// A copy with other content; the old content is not copied first (a compressed tool result
    /// of a long chat would otherwise copy its whole text only to drop it).
    pub fn with_content(&self, content: Content) -> ChatMessage {
        ChatMessage {
            message_id: self.message_id.clone(),
            role: self.role,
            content,
            tool_calls: self.tool_calls.clone(),
            tool_call_id: self.tool_call_id.clone(),
            tool_failed: self.tool_failed,
            rare: self.rare.clone(),
            usage: self.usage.clone(),
            finish_reason: self.finish_reason.clone(),
            created_at_ms: self.created_at_ms,
            extra: self.extra.clone(),
        }
    }
}

/// A JSON value kept as the text it came in, written out as it is: a provider's server content
/// block (a 20 KB web search result) is read once, as text, and never built as a `Value` tree
/// to be written out again (issue 20: that was a third of decoding such a stream in the wasm).
/// Two are equal when they are the same JSON value, whatever their spacing.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct RawJson(Box<serde_json::value::RawValue>);

impl RawJson {
    /// A value's compact text.
    pub fn from_value(value: &serde_json::Value) -> Self {
        // Writing a `Value` cannot fail (its keys are strings); `null` for the impossible case.
        RawJson(serde_json::value::to_raw_value(value).unwrap_or_else(|_| Self::null().0))
    }

    /// A text already checked as one JSON value (a `RawValue` read from an event).
    pub fn from_raw(raw: &serde_json::value::RawValue) -> Self {
        RawJson(raw.to_owned())
    }

    fn null() -> Self {
        RawJson(serde_json::value::RawValue::NULL.to_owned())
    }

    pub fn as_str(&self) -> &str {
        self.0.get()
    }

    /// The value, read from the text (for a caller that looks inside).
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::from_str(self.0.get()).unwrap_or(serde_json::Value::Null)
    }
}

impl PartialEq for RawJson {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str() || self.to_value() == other.to_value()
    }
}

impl From<serde_json::Value> for RawJson {
    fn from(value: serde_json::Value) -> Self {
        RawJson::from_value(&value)
    }
}
