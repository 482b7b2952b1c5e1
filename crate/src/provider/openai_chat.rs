//! The OpenAI Chat Completions decoder (SPEC §6.2), also for every OpenAI-compatible server.
//!
//! Only choice 0 is assembled (`n > 1` streams interleave choices). Tool-call fragments are
//! accumulated by their `index`, whatever number it starts from; `id`, `type` and `name` are set
//! once, never concatenated (some servers repeat them in every fragment); `arguments` append.
//! Reasoning comes as `reasoning_content` (DeepSeek, xAI) or `reasoning` (OpenRouter, Groq).
//! A chunk with an `error` object ends the round as a failure carrying the provider's words.

use super::framed::{failure_from, json_object, non_empty_str, Events, Framed};
use super::{usage, DecodeItem};
use crate::delta::DeltaOp;
use crate::error::StreamDecodeError;
use crate::message::ToolCall;
use crate::sse::SseEvent;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

const PROVIDER: &str = "openai-chat";

/// The openai-chat stream decoder: the shared framing around `State`.
pub type Decoder = Framed<State>;

#[derive(Debug, Default)]
pub struct State {
    tool_calls: BTreeMap<u64, ToolCall>,
    refusal_marked: bool,
}

impl Events for State {
    const PROVIDER: &'static str = PROVIDER;

    fn event(
        &mut self,
        event: &SseEvent,
        items: &mut Vec<DecodeItem>,
    ) -> Result<(), StreamDecodeError> {
        if event.data.trim() == "[DONE]" {
            items.push(DecodeItem::Done);
            return Ok(());
        }
        let Some(chunk) = json_object(event, PROVIDER)? else {
            return Ok(());
        };
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            // OpenRouter bills the failed generation and says so in the error chunk (SECURITY D4).
            if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
                items.push(DecodeItem::Op(DeltaOp::SetUsage {
                    usage: usage::openai_chat(usage),
                }));
            }
            items.push(DecodeItem::Failure(failure_from(error, "provider_error")));
            return Ok(());
        }
        self.decode_chunk(&chunk, items);
        Ok(())
    }

    fn end(&mut self, _items: &mut Vec<DecodeItem>) {}
}

impl State {
    fn decode_chunk(&mut self, chunk: &Value, items: &mut Vec<DecodeItem>) {
        if let Some(choice) = first_choice(chunk) {
            if let Some(delta) = choice.get("delta") {
                self.decode_delta(delta, items);
            }
            if let Some(reason) = non_empty_str(choice.get("finish_reason")) {
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
                .unwrap_or_else(|| self.index_without_one(fragment, position));
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

impl State {
    /// Some servers (Gemini's and Ollama's OpenAI endpoints, small routers) send no `index`:
    /// a fragment with a known `id` continues that call, one with a new `id` starts the next
    /// call, and one with neither continues the last call (or is the call at its position).
    fn index_without_one(&self, fragment: &Value, position: usize) -> u64 {
        let last = self.tool_calls.keys().next_back().copied();
        match non_empty_str(fragment.get("id")) {
            Some(id) => self
                .tool_calls
                .iter()
                .find(|(_, call)| call.id == id)
                .map(|(index, _)| *index)
                .unwrap_or_else(|| last.map_or(position as u64, |i| (i + 1).max(position as u64))),
            None => last.unwrap_or(position as u64).max(position as u64),
        }
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
