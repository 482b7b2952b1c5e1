//! The Anthropic Messages decoder (SPEC §6.2): `message_start`, `content_block_start/delta/stop`,
//! `message_delta`, `message_stop`, `ping`, `error`; unknown events are ignored.
//!
//! Content blocks are tracked by their `index`. Text appends to the content; thinking appends to
//! the reasoning and, at the block's stop, becomes the text of its thinking block. Thinking blocks
//! carry their content `index` (the merge key, SPEC §3.3); a `signature_delta` replaces the
//! signature; `redacted_thinking` is kept byte for byte. `tool_use` input fragments append to the
//! call's `arguments` text; a block cut by `max_tokens` keeps what arrived. Server tool blocks
//! (`server_tool_use`, `*_tool_result`, `mcp_tool_use`) are emitted whole at their stop, with
//! their streamed input parsed. Usage is merged field by field over the raw reports, then
//! normalized (SPEC §6.4). Blocks left open by a cut stream are flushed at `message_stop` or end.
//!
//! Events are read typed (issue 20): the per-token deltas (`text_delta`, `thinking_delta`,
//! `input_json_delta`) borrowing their strings, the others with only the parts a handler reads
//! (a block, a delta, a usage) as small values. An event with a field of an unexpected type is
//! read as a `Value` instead; every way reaches the same handlers.

use super::framed::{event_kind, failure_from, json_object, non_empty_str, Events};
use super::literal::Cursor;
use super::usage::{self, AnthropicReport};
use super::DecodeItem;
use crate::delta::DeltaOp;
use crate::error::StreamDecodeError;
use crate::message::RawJson;
use crate::message::ToolCall;
use crate::sse::SseEvent;
use crate::thinking::{fill_empty_thinking, merge_thinking_blocks};
use litemap::LiteMap;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::borrow::Cow;

mod events;

use events::*;

pub type Decoder = super::framed::Framed<State>;

#[derive(Debug)]
enum Block {
    Text,
    Thinking,
    Tool { start_input: String },
    Server { block: RawJson, json: String },
    Other,
}

#[derive(Debug, Default)]
pub struct State {
    open: LiteMap<u64, Block>,
    tool_calls: LiteMap<u64, ToolCall>,
    thinking: Vec<Value>,
    reasoning_by_index: LiteMap<u64, String>,
    usage: AnthropicReport,
}

impl Events for State {
    const PROVIDER: &'static str = "anthropic";

    fn event(
        &mut self,
        event: &SseEvent,
        items: &mut Vec<DecodeItem>,
    ) -> Result<(), StreamDecodeError> {
        if may_be_block_delta(event) {
            if let Some(delta) = TypedBlockDelta::read(event.data) {
                self.typed_delta(&delta, items);
                return Ok(());
            }
        }
        if let Some(index) = read_block_stop(event.data) {
            self.stop_block(index, items);
            return Ok(());
        }
        if let Some(typed) = TypedEvent::read(event.data) {
            let (model, message) = match typed.message {
                Some(head) => (head.model, head.usage),
                None => (None, None),
            };
            let (delta, usage, error) = (typed.delta, typed.usage, typed.error);
            let kind = typed.kind.as_deref().or(event.event).unwrap_or("");
            self.dispatch(
                EventParts {
                    kind,
                    index: typed.index.unwrap_or(0),
                    message_usage: message,
                    message_model: model,
                    content_block: typed.content_block.map(StartedBlock::Text),
                    delta: delta.as_ref(),
                    usage,
                    error: error.as_ref(),
                },
                items,
            );
            return Ok(());
        }
        let Some(mut data) = json_object(event, Self::PROVIDER)? else {
            return Ok(());
        };
        let content_block = data
            .get_mut("content_block")
            .map(Value::take)
            .filter(|v| !v.is_null())
            .map(StartedBlock::Value);
        let part = |key: &str| data.get(key).filter(|v| !v.is_null());
        self.dispatch(
            EventParts {
                kind: event_kind(&data, event),
                index: data.get("index").and_then(Value::as_u64).unwrap_or(0),
                message_usage: part("message")
                    .and_then(|m| m.get("usage"))
                    .and_then(AnthropicReport::from_value),
                message_model: part("message")
                    .and_then(|m| m.get("model"))
                    .and_then(Value::as_str)
                    .map(String::from),
                content_block,
                delta: part("delta"),
                usage: part("usage").and_then(AnthropicReport::from_value),
                error: part("error"),
            },
            items,
        );
        Ok(())
    }

    fn end(&mut self, items: &mut Vec<DecodeItem>) {
        let open: Vec<u64> = self.open.keys().copied().collect();
        for index in open {
            self.stop_block(index, items);
        }
    }
}

fn non_empty<'a>(text: &'a Option<Cow<'_, str>>) -> Option<&'a str> {
    text.as_deref().filter(|s| !s.is_empty())
}

fn op(op: DeltaOp) -> DecodeItem {
    DecodeItem::Op(op)
}

fn is_server_block(kind: &str) -> bool {
    kind == "server_tool_use" || kind == "mcp_tool_use" || kind.ends_with("_tool_result")
}

impl State {
    fn dispatch(&mut self, event: EventParts<'_>, items: &mut Vec<DecodeItem>) {
        let null = &Value::Null;
        match event.kind {
            "message_start" => {
                if let Some(model) = event.message_model.filter(|m| !m.is_empty()) {
                    items.push(DecodeItem::Model(model));
                }
                if let Some(usage) = event.message_usage {
                    self.take_usage(usage, items);
                }
            }
            "content_block_start" => {
                let block = event
                    .content_block
                    .unwrap_or(StartedBlock::Value(Value::Null));
                self.start_block(event.index, block, items)
            }
            "content_block_delta" => {
                self.block_delta(event.index, event.delta.unwrap_or(null), items)
            }
            "content_block_stop" => self.stop_block(event.index, items),
            "message_delta" => self.message_delta(event.delta, event.usage, items),
            "message_stop" => {
                self.end(items);
                items.push(DecodeItem::Done);
            }
            "error" => items.push(DecodeItem::Failure(failure_from(
                event.error.unwrap_or(null),
                "provider_error",
            ))),
            _ => {}
        }
    }

    fn start_block(&mut self, index: u64, block: StartedBlock, items: &mut Vec<DecodeItem>) {
        let kind = block.kind();
        // Only the kinds whose fields are read are read as a value.
        let open = match kind.as_str() {
            "text" => match block.plain_text() {
                Some(text) => {
                    self.append_text(Some(text.as_ref()).filter(|t| !t.is_empty()), items);
                    Block::Text
                }
                None => self.start_text(index, &block.into_value(), items),
            },
            "thinking" => self.start_thinking(index, block.into_value(), items),
            "redacted_thinking" => {
                merge_thinking_blocks(&mut self.thinking, block.into_value());
                self.emit_thinking(items);
                Block::Other
            }
            "tool_use" => self.start_tool(index, &block.into_value(), items),
            kind if is_server_block(kind) => Block::Server {
                block: block.into_raw(),
                json: String::new(),
            },
            _ => Block::Other,
        };
        self.open.insert(index, open);
    }

    fn start_text(&mut self, index: u64, block: &Value, items: &mut Vec<DecodeItem>) -> Block {
        if let Some(text) = non_empty_str(block.get("text")) {
            self.block_delta(index, &json!({"type": "text_delta", "text": text}), items);
        }
        for citation in block["citations"].as_array().into_iter().flatten() {
            items.push(op(DeltaOp::AddCitation {
                citation: RawJson::from_value(citation),
            }));
        }
        Block::Text
    }

    fn start_thinking(&mut self, index: u64, block: Value, items: &mut Vec<DecodeItem>) -> Block {
        let mut incoming = block;
        let mut text = None;
        if let Some(fields) = incoming.as_object_mut() {
            fields.insert("index".into(), json!(index));
            text = fields.insert("thinking".into(), json!(""));
        }
        merge_thinking_blocks(&mut self.thinking, incoming);
        if let Some(text) = non_empty_str(text.as_ref()) {
            self.append_thinking(index, text, items);
        }
        self.emit_thinking(items);
        Block::Thinking
    }

    fn start_tool(&mut self, index: u64, block: &Value, items: &mut Vec<DecodeItem>) -> Block {
        let id = block.get("id").and_then(Value::as_str).unwrap_or("");
        let name = block.get("name").and_then(Value::as_str).unwrap_or("");
        self.tool_calls.insert(index, ToolCall::new(id, name, ""));
        self.emit_tool_calls(items);
        let start_input = block
            .get("input")
            .filter(|v| !v.is_null())
            .map_or_else(|| "{}".to_string(), Value::to_string);
        Block::Tool { start_input }
    }

    /// A typed delta handled; another kind (`compaction_delta`…) is ignored, as `block_delta`
    /// ignores it.
    fn typed_delta(&mut self, event: &TypedBlockDelta<'_>, items: &mut Vec<DecodeItem>) {
        let delta = &event.delta;
        match delta.kind.as_ref() {
            "text_delta" => self.append_text(non_empty(&delta.text), items),
            "thinking_delta" => {
                if let Some(text) = non_empty(&delta.thinking) {
                    self.append_thinking(event.index, text, items);
                }
            }
            "input_json_delta" => {
                self.input_json(event.index, non_empty(&delta.partial_json), items)
            }
            "signature_delta" => {
                if let Some(signature) = &delta.signature {
                    self.signature(event.index, signature, items);
                }
            }
            "citations_delta" => {
                if let Some(citation) = delta.citation {
                    items.push(op(DeltaOp::AddCitation {
                        citation: RawJson::from_raw(citation),
                    }));
                }
            }
            _ => {}
        }
    }

    fn append_text(&mut self, text: Option<&str>, items: &mut Vec<DecodeItem>) {
        if let Some(text) = text {
            super::push_content(items, text);
        }
    }

    fn block_delta(&mut self, index: u64, delta: &Value, items: &mut Vec<DecodeItem>) {
        let kind = delta.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "text_delta" => self.append_text(non_empty_str(delta.get("text")), items),
            "thinking_delta" => {
                if let Some(text) = non_empty_str(delta.get("thinking")) {
                    self.append_thinking(index, text, items);
                }
            }
            "signature_delta" => {
                if let Some(signature) = delta.get("signature").and_then(Value::as_str) {
                    self.signature(index, signature, items);
                }
            }
            "input_json_delta" => {
                self.input_json(index, non_empty_str(delta.get("partial_json")), items)
            }
            "citations_delta" => {
                if let Some(citation) = delta.get("citation").filter(|c| !c.is_null()) {
                    items.push(op(DeltaOp::AddCitation {
                        citation: RawJson::from_value(citation),
                    }));
                }
            }
            _ => {}
        }
    }

    fn append_thinking(&mut self, index: u64, text: &str, items: &mut Vec<DecodeItem>) {
        self.reasoning_by_index
            .entry(index)
            .or_default()
            .push_str(text);
        super::push_reasoning(items, text);
    }

    fn signature(&mut self, index: u64, signature: &str, items: &mut Vec<DecodeItem>) {
        merge_thinking_blocks(
            &mut self.thinking,
            json!({"type": "thinking", "index": index, "signature": signature}),
        );
        self.emit_thinking(items);
    }

    fn input_json(&mut self, index: u64, fragment: Option<&str>, items: &mut Vec<DecodeItem>) {
        let Some(fragment) = fragment else {
            return;
        };
        match self.open.get_mut(&index) {
            Some(Block::Tool { .. }) => {
                if let Some(call) = self.tool_calls.get_mut(&index) {
                    call.function.arguments.push_str(fragment);
                }
                self.emit_tool_calls(items);
            }
            Some(Block::Server { json, .. }) => json.push_str(fragment),
            _ => {}
        }
    }

    fn stop_block(&mut self, index: u64, items: &mut Vec<DecodeItem>) {
        match self.open.remove(&index) {
            Some(Block::Thinking) => {
                if fill_empty_thinking(&mut self.thinking, &self.reasoning_by_index) {
                    self.emit_thinking(items);
                }
            }
            Some(Block::Tool { start_input }) => self.stop_tool(index, start_input, items),
            Some(Block::Server { block, json }) => {
                items.push(op(DeltaOp::AddServerContentBlock {
                    block: with_input(block, &json),
                }));
            }
            Some(Block::Text) | Some(Block::Other) | None => {}
        }
    }

    /// A tool block whose input never streamed keeps the input it started with (usually `{}`).
    fn stop_tool(&mut self, index: u64, start_input: String, items: &mut Vec<DecodeItem>) {
        if let Some(call) = self.tool_calls.get_mut(&index) {
            if call.function.arguments.is_empty() {
                call.function.arguments = start_input;
                self.emit_tool_calls(items);
            }
        }
    }

    fn message_delta(
        &mut self,
        delta: Option<&Value>,
        usage: Option<AnthropicReport>,
        items: &mut Vec<DecodeItem>,
    ) {
        if let Some(reason) = non_empty_str(delta.and_then(|d| d.get("stop_reason"))) {
            items.push(DecodeItem::Finish(reason.into()));
        }
        if let Some(usage) = usage {
            self.take_usage(usage, items);
        }
    }

    /// Field-by-field overwrite of the usage so far (absent or null keeps), then normalized.
    fn take_usage(&mut self, report: AnthropicReport, items: &mut Vec<DecodeItem>) {
        self.usage.merge(report);
        items.push(op(DeltaOp::SetUsage {
            usage: usage::anthropic(&self.usage),
        }));
    }

    fn emit_thinking(&self, items: &mut Vec<DecodeItem>) {
        items.push(op(DeltaOp::SetThinkingBlocks {
            blocks: self.thinking.clone(),
        }));
    }

    fn emit_tool_calls(&self, items: &mut Vec<DecodeItem>) {
        items.push(op(DeltaOp::SetToolCalls {
            tool_calls: self.tool_calls.values().cloned().collect(),
        }));
    }
}

/// A server block with its streamed input parsed in; unparseable input keeps the start's. Only
/// a block whose input streamed (a small `server_tool_use`) is read and written again.
fn with_input(block: RawJson, json: &str) -> RawJson {
    let Ok(input) = serde_json::from_str::<Value>(json) else {
        return block;
    };
    let mut block = block.to_value();
    if let Some(fields) = block.as_object_mut() {
        fields.insert("input".into(), input);
    }
    RawJson::from_value(&block)
}

/// A block that opens, as the event was read: its text (the typed reading, which leaves it
/// unread) or a value (the tolerant reading).
enum StartedBlock<'a> {
    Text(&'a RawValue),
    Value(Value),
}

impl StartedBlock<'_> {
    /// The block's `type` (`""` when it has none, or is not an object). A block that starts
    /// with its `type`, as Anthropic writes every one, is not read further: a 20 KB search
    /// result was scanned a second time only to find it (issue 20). A block that repeats its
    /// `type` (JSON leaves its meaning open) is read by the first one when it starts with it.
    fn kind(&self) -> String {
        let text = match self {
            StartedBlock::Value(block) => return kind_of_value(block),
            StartedBlock::Text(raw) => raw.get(),
        };
        let mut cursor = Cursor::new(text);
        match cursor.literal(r#"{"type":"#).and_then(|_| cursor.string()) {
            Some(kind) => kind.into_owned(),
            None => kind_of_value(&serde_json::from_str(text).unwrap_or(Value::Null)),
        }
    }

    /// A text block as Anthropic starts every one, `{"type":"text","text":"…"}` (no citations):
    /// its text, read by the literal path; `None` for any other block.
    fn plain_text(&self) -> Option<Cow<'_, str>> {
        let StartedBlock::Text(raw) = self else {
            return None;
        };
        let mut cursor = Cursor::new(raw.get());
        cursor.literal(r#"{"type":"text","text":"#)?;
        let text = cursor.string()?;
        cursor.literal("}")?;
        cursor.end().map(|_| text)
    }

    fn into_value(self) -> Value {
        match self {
            StartedBlock::Text(raw) => serde_json::from_str(raw.get()).unwrap_or(Value::Null),
            StartedBlock::Value(block) => block,
        }
    }

    fn into_raw(self) -> RawJson {
        match self {
            StartedBlock::Text(raw) => RawJson::from_raw(raw),
            StartedBlock::Value(block) => RawJson::from_value(&block),
        }
    }
}

fn kind_of_value(block: &Value) -> String {
    block
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}
