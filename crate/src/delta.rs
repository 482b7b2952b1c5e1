//! Delta ops (SPEC §3.2) and the streaming draft they are applied to.
//!
//! Invariant: applying an append costs O(length of the delta); nothing here re-sends or copies
//! the whole message per token. The draft turns into the assembled message (SPEC §6.3) at the end.

use crate::message::{ChatMessage, Content, RawJson, Role, ToolCall, Usage};
use crate::tagged::{self, Fields};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// Read by hand (`tagged::Fields`), written by derive.
#[derive(Serialize, Clone, Debug, PartialEq)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum DeltaOp {
    AppendContent { text: String },
    AppendReasoning { text: String },
    SetToolCalls { tool_calls: Vec<ToolCall> },
    SetThinkingBlocks { blocks: Vec<Value> },
    AddCitation { citation: RawJson },
    AddServerContentBlock { block: RawJson },
    SetUsage { usage: Usage },
    MergeExtra { extra: Map<String, Value> },
}

impl<'de> Deserialize<'de> for DeltaOp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        tagged::read(deserializer, DeltaOp::from_fields)
    }
}

impl DeltaOp {
    const VARIANTS: &'static [&'static str] = &[
        "append_content",
        "append_reasoning",
        "set_tool_calls",
        "set_thinking_blocks",
        "add_citation",
        "add_server_content_block",
        "set_usage",
        "merge_extra",
    ];

    fn from_fields(mut f: Fields) -> Result<Self, serde_json::Error> {
        let tag = f.tag("op")?;
        Ok(match tag.as_str() {
            "append_content" => DeltaOp::AppendContent {
                text: f.take("text")?,
            },
            "append_reasoning" => DeltaOp::AppendReasoning {
                text: f.take("text")?,
            },
            "set_tool_calls" => DeltaOp::SetToolCalls {
                tool_calls: f.take("tool_calls")?,
            },
            "set_thinking_blocks" => DeltaOp::SetThinkingBlocks {
                blocks: f.take("blocks")?,
            },
            "add_citation" => DeltaOp::AddCitation {
                citation: f.take("citation")?,
            },
            "add_server_content_block" => DeltaOp::AddServerContentBlock {
                block: f.take("block")?,
            },
            "set_usage" => DeltaOp::SetUsage {
                usage: f.take("usage")?,
            },
            "merge_extra" => DeltaOp::MergeExtra {
                extra: f.take("extra")?,
            },
            other => return Err(tagged::unknown_variant(other, Self::VARIANTS)),
        })
    }

    /// Whether this op shows the user something (so a retry would no longer be silent).
    pub fn is_visible_content(&self) -> bool {
        !matches!(self, DeltaOp::SetUsage { .. } | DeltaOp::MergeExtra { .. })
    }
}

/// The error a stream ended with, carried on the assembled message.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct StreamFailure {
    pub code: String,
    pub message: String,
}

/// The message being streamed. Fields mirror the assembled message of SPEC §6.3.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Draft {
    pub message_id: String,
    pub content: String,
    pub reasoning_content: String,
    pub tool_calls: Vec<ToolCall>,
    pub thinking_blocks: Vec<Value>,
    pub citations: Vec<RawJson>,
    pub server_content_blocks: Vec<RawJson>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub extra: Map<String, Value>,
}

impl Draft {
    pub fn new(message_id: impl Into<String>) -> Self {
        Draft {
            message_id: message_id.into(),
            ..Draft::default()
        }
    }

    /// Applies an op that is also kept (sent to subscribers): appends copy only the new text.
    pub fn apply(&mut self, op: &DeltaOp) {
        match op {
            DeltaOp::AppendContent { text } => self.content.push_str(text),
            DeltaOp::AppendReasoning { text } => self.reasoning_content.push_str(text),
            DeltaOp::SetUsage { usage } => {
                self.usage.get_or_insert_with(Usage::default).merge(usage)
            }
            other => self.apply_owned(other.clone()),
        }
    }

    /// Applies an op nobody keeps, moving what it carries (issue 20: a 20 KB server block was
    /// copied into the draft of a stream whose ops were then dropped).
    pub fn apply_owned(&mut self, op: DeltaOp) {
        match op {
            DeltaOp::AppendContent { text } => self.content.push_str(&text),
            DeltaOp::AppendReasoning { text } => self.reasoning_content.push_str(&text),
            DeltaOp::SetToolCalls { tool_calls } => self.tool_calls = tool_calls,
            DeltaOp::SetThinkingBlocks { blocks } => self.thinking_blocks = blocks,
            DeltaOp::AddCitation { citation } => self.citations.push(citation),
            DeltaOp::AddServerContentBlock { block } => self.server_content_blocks.push(block),
            DeltaOp::SetUsage { usage } => {
                self.usage.get_or_insert_with(Usage::default).merge(&usage)
            }
            DeltaOp::MergeExtra { extra } => self.extra.extend(extra),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.content.is_empty()
            && self.reasoning_content.is_empty()
            && self.tool_calls.is_empty()
            && self.thinking_blocks.is_empty()
            && self.server_content_blocks.is_empty()
    }

    /// The assembled message of SPEC §6.3, as the conformance suite and `palaver decode` print it;
    /// what the draft holds moves into it.
    pub fn into_assembled(
        self,
        finish_reason: Option<&str>,
        error: Option<&StreamFailure>,
    ) -> Assembled {
        Assembled {
            role: Role::Assistant,
            content: self.content,
            reasoning_content: self.reasoning_content,
            thinking_blocks: self.thinking_blocks,
            tool_calls: self.tool_calls,
            citations: self.citations,
            server_content_blocks: self.server_content_blocks,
            finish_reason: finish_reason.map(str::to_string),
            usage: self.usage,
            error: error.cloned(),
        }
    }

    /// The stored assistant message this draft becomes.
    pub fn into_message(self, finish_reason: Option<String>, created_at_ms: u64) -> ChatMessage {
        let mut message = ChatMessage::new(
            self.message_id,
            Role::Assistant,
            Content::Text(self.content),
        );
        message.set_reasoning_content(non_empty_string(self.reasoning_content));
        message.tool_calls = non_empty(self.tool_calls);
        message.set_thinking_blocks(non_empty(self.thinking_blocks));
        message.set_citations(non_empty(self.citations));
        message.set_server_content_blocks(non_empty(self.server_content_blocks));
        message.usage = self.usage.map(Box::new);
        message.finish_reason = finish_reason;
        message.created_at_ms = Some(created_at_ms);
        message.extra = self.extra.into();
        message
    }
}

/// The assembled message (SPEC §6.3): every field written, in this order, `null` for a missing
/// finish reason or usage; `error` only after a failure.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Assembled {
    pub role: Role,
    pub content: String,
    pub reasoning_content: String,
    pub thinking_blocks: Vec<Value>,
    pub tool_calls: Vec<ToolCall>,
    pub citations: Vec<RawJson>,
    pub server_content_blocks: Vec<RawJson>,
    pub finish_reason: Option<String>,
    pub usage: Option<Usage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<StreamFailure>,
}

impl Assembled {
    /// As a JSON value (the conformance suite compares it with the oracles).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

fn non_empty<T>(items: Vec<T>) -> Option<Vec<T>> {
    (!items.is_empty()).then_some(items)
}

fn non_empty_string(text: String) -> Option<String> {
    (!text.is_empty()).then_some(text)
}
