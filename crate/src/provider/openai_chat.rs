//! The OpenAI Chat Completions decoder (SPEC §6.2), also for every OpenAI-compatible server.
//!
//! Only choice 0 is assembled (`n > 1` streams interleave choices). Tool-call fragments are
//! accumulated by their `index`, whatever number it starts from; `id`, `type` and `name` are set
//! once, never concatenated (some servers repeat them in every fragment); `arguments` append.
//! Reasoning comes as `reasoning_content` (DeepSeek, xAI) or `reasoning` (OpenRouter, Groq).
//! A chunk with an `error` object ends the round as a failure carrying the provider's words.

use super::{usage, DecodeItem};
use crate::delta::{DeltaOp, StreamFailure};
use crate::error::StreamDecodeError;
use crate::message::ToolCall;
use crate::sse::{SseDecoder, SseEvent};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

const PROVIDER: &str = "openai-chat";

#[derive(Debug)]
pub struct Decoder {
    sse: SseDecoder,
    tool_calls: BTreeMap<u64, ToolCall>,
    refusal_marked: bool,
    failed: Option<StreamDecodeError>,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder {
            sse: SseDecoder::new(PROVIDER),
            tool_calls: BTreeMap::new(),
            refusal_marked: false,
            failed: None,
        }
    }
}

impl Decoder {
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<DecodeItem>, StreamDecodeError> {
        self.check_not_failed()?;
        let events = self.sse.feed(bytes).map_err(|e| self.fail(e))?;
        self.decode_events(events)
    }

    pub fn finish(&mut self) -> Result<Vec<DecodeItem>, StreamDecodeError> {
        self.check_not_failed()?;
        let events = self.sse.finish().map_err(|e| self.fail(e))?;
        self.decode_events(events)
    }

    fn check_not_failed(&self) -> Result<(), StreamDecodeError> {
        self.failed.clone().map_or(Ok(()), Err)
    }

    fn fail(&mut self, error: StreamDecodeError) -> StreamDecodeError {
        self.failed = Some(error.clone());
        error
    }

    fn decode_events(
        &mut self,
        events: Vec<SseEvent>,
    ) -> Result<Vec<DecodeItem>, StreamDecodeError> {
        let mut items = Vec::new();
        for event in events {
            self.decode_event(&event, &mut items)
                .map_err(|e| self.fail(e))?;
        }
        Ok(items)
    }

    fn decode_event(
        &mut self,
        event: &SseEvent,
        items: &mut Vec<DecodeItem>,
    ) -> Result<(), StreamDecodeError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            items.push(DecodeItem::Done);
            return Ok(());
        }
        if data.is_empty() {
            return Ok(());
        }
        let chunk: Value =
            serde_json::from_str(data).map_err(|e| StreamDecodeError::MalformedStream {
                provider: PROVIDER.into(),
                offset: event.offset,
                reason: format!("chunk is not JSON: {e}"),
            })?;
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            items.push(DecodeItem::Failure(failure_from(error)));
            return Ok(());
        }
        if !chunk.is_object() {
            return Err(StreamDecodeError::ProviderMisbehaved {
                provider: PROVIDER.into(),
                offset: event.offset,
                reason: "chunk is not a JSON object".into(),
            });
        }
        self.decode_chunk(&chunk, items);
        Ok(())
    }

    fn decode_chunk(&mut self, chunk: &Value, items: &mut Vec<DecodeItem>) {
        if let Some(choice) = first_choice(chunk) {
            if let Some(delta) = choice.get("delta") {
                self.decode_delta(delta, items);
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                items.push(DecodeItem::Finish(reason.to_string()));
            }
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            items.push(DecodeItem::Op(DeltaOp::SetUsage {
                usage: usage::openai_chat(usage),
            }));
        }
    }

    fn decode_delta(&mut self, delta: &Value, items: &mut Vec<DecodeItem>) {
        for key in ["reasoning_content", "reasoning"] {
            if let Some(text) = non_empty_str(delta.get(key)) {
                items.push(DecodeItem::Op(DeltaOp::AppendReasoning {
                    text: text.to_string(),
                }));
            }
        }
        if let Some(text) = non_empty_str(delta.get("content")) {
            items.push(DecodeItem::Op(DeltaOp::AppendContent {
                text: text.to_string(),
            }));
        }
        if let Some(text) = non_empty_str(delta.get("refusal")) {
            self.decode_refusal(text, items);
        }
        if let Some(fragments) = delta.get("tool_calls").and_then(Value::as_array) {
            self.decode_tool_fragments(fragments, items);
        }
    }

    /// A refusal is shown as the content (SPEC §6.3), marked once in `extra.refusal`.
    fn decode_refusal(&mut self, text: &str, items: &mut Vec<DecodeItem>) {
        if !self.refusal_marked {
            self.refusal_marked = true;
            let mut extra = Map::new();
            extra.insert("refusal".into(), Value::Bool(true));
            items.push(DecodeItem::Op(DeltaOp::MergeExtra { extra }));
        }
        items.push(DecodeItem::Op(DeltaOp::AppendContent {
            text: text.to_string(),
        }));
    }

    fn decode_tool_fragments(&mut self, fragments: &[Value], items: &mut Vec<DecodeItem>) {
        for (position, fragment) in fragments.iter().enumerate() {
            let index = fragment
                .get("index")
                .and_then(Value::as_u64)
                .unwrap_or(position as u64);
            let call = self
                .tool_calls
                .entry(index)
                .or_insert_with(|| ToolCall::new("", "", ""));
            merge_fragment(call, fragment);
        }
        let tool_calls = self.tool_calls.values().cloned().collect();
        items.push(DecodeItem::Op(DeltaOp::SetToolCalls { tool_calls }));
    }
}

fn first_choice(chunk: &Value) -> Option<&Value> {
    chunk
        .get("choices")?
        .as_array()?
        .iter()
        .find(|choice| choice.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
}

fn merge_fragment(call: &mut ToolCall, fragment: &Value) {
    if let Some(id) = non_empty_str(fragment.get("id")) {
        if call.id.is_empty() {
            call.id = id.to_string();
        }
    }
    if let Some(kind) = non_empty_str(fragment.get("type")) {
        call.kind = kind.to_string();
    }
    let function = fragment.get("function");
    if let Some(name) = non_empty_str(function.and_then(|f| f.get("name"))) {
        if call.function.name.is_empty() {
            call.function.name = name.to_string();
        }
    }
    if let Some(arguments) = function
        .and_then(|f| f.get("arguments"))
        .and_then(Value::as_str)
    {
        call.function.arguments.push_str(arguments);
    }
}

fn non_empty_str(value: Option<&Value>) -> Option<&str> {
    value.and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// `{"error": {...}}` as OpenAI, OpenRouter and Groq send it mid-stream.
fn failure_from(error: &Value) -> StreamFailure {
    let code = ["code", "type"]
        .iter()
        .filter_map(|key| error.get(*key))
        .find_map(|v| match v {
            Value::String(s) if !s.is_empty() => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        })
        .unwrap_or_else(|| "provider_error".to_string());
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| error.to_string());
    StreamFailure { code, message }
}
