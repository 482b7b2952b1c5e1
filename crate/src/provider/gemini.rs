//! The Gemini decoder (`streamGenerateContent?alt=sse`, SPEC §6.2): each `data:` JSON is one
//! GenerateContentResponse chunk; only candidate 0 is assembled. Neither SDK accumulates, so
//! this module defines the assembly:
//!
//! - a `text` part appends to the content, or to the reasoning when `thought: true`;
//! - a `functionCall` part is one tool call: id = `functionCall.id`, else `call_<n>` with `n` its
//!   position among the calls; `arguments` = the JSON text of `args` (`{}` when absent);
//! - a `thoughtSignature` (on any part) becomes a thinking block
//!   `{type: "thinking", thinking, signature, index: n, part}` where `n` counts signatures,
//!   `part` is `"text"`, `"thought"` or `"function_call"` and a function call's block also names
//!   its `tool_call_id`, so a request encoder can put the signature back on the same part. The
//!   block's text is the thought text streamed since the previous signature, filled at the end;
//! - `groundingMetadata`: the latest non-empty one is kept in `extra.grounding_metadata`, and
//!   each grounding chunk (`{web: {uri, title}}`, …) is a citation `{type: <kind>, ..fields}`,
//!   once per distinct citation;
//! - `usageMetadata` is cumulative (the last one is the total): prompt = `promptTokenCount`,
//!   completion = `candidatesTokenCount`, reasoning = `thoughtsTokenCount`, cache read =
//!   `cachedContentTokenCount`, total = `totalTokenCount`;
//! - `finishReason`: `STOP` → `stop`, `MAX_TOKENS` → `length`, any other lowercased (a function
//!   call still ends with `stop`, as Gemini sends it);
//! - a chunk with an `error` object ends the round as a failure.

use super::framed::{failure_from, json_object, non_empty_str, Events};
use super::{usage, DecodeItem};
use crate::delta::DeltaOp;
use crate::error::StreamDecodeError;
use crate::message::{RawJson, ToolCall};
use crate::sse::SseEvent;
use crate::thinking::{fill_empty_thinking, merge_thinking_blocks};
use litemap::LiteMap;
use serde_json::{json, Map, Value};

pub type Decoder = super::framed::Framed<State>;

#[derive(Debug, Default)]
pub struct State {
    tool_calls: Vec<ToolCall>,
    thinking: Vec<Value>,
    reasoning_by_index: LiteMap<u64, String>,
    signatures: u64,
    citations: Vec<Value>,
    model_said: bool,
}

impl Events for State {
    const PROVIDER: &'static str = "gemini";

    fn event(
        &mut self,
        event: &SseEvent,
        items: &mut Vec<DecodeItem>,
    ) -> Result<(), StreamDecodeError> {
        let Some(chunk) = json_object(event, Self::PROVIDER)? else {
            return Ok(());
        };
        if let Some(error) = chunk.get("error").filter(|e| e.is_object()) {
            items.push(DecodeItem::Failure(failure_from(error, "provider_error")));
            return Ok(());
        }
        if let Some(model) = chunk.get("modelVersion").and_then(Value::as_str) {
            if !self.model_said && !model.is_empty() {
                self.model_said = true;
                items.push(DecodeItem::Model(model.to_string()));
            }
        }
        if let Some(candidate) = first_candidate(&chunk) {
            self.candidate(candidate, items);
        }
        if let Some(raw) = chunk.get("usageMetadata").filter(|u| u.is_object()) {
            items.push(DecodeItem::Op(DeltaOp::SetUsage {
                usage: usage::gemini(raw),
            }));
        }
        Ok(())
    }

    fn end(&mut self, items: &mut Vec<DecodeItem>) {
        if fill_empty_thinking(&mut self.thinking, &self.reasoning_by_index) {
            self.emit_thinking(items);
        }
    }
}

fn first_candidate(chunk: &Value) -> Option<&Value> {
    chunk
        .get("candidates")?
        .as_array()?
        .iter()
        .find(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
}

/// Gemini's finish reasons in the OpenAI vocabulary the engine uses.
pub fn finish_reason(reason: &str) -> String {
    match reason {
        "STOP" => "stop".into(),
        "MAX_TOKENS" => "length".into(),
        other => other.to_ascii_lowercase(),
    }
}

impl State {
    fn candidate(&mut self, candidate: &Value, items: &mut Vec<DecodeItem>) {
        let parts = candidate["content"]["parts"].as_array();
        for part in parts.into_iter().flatten() {
            self.part(part, items);
        }
        if let Some(metadata) = candidate
            .get("groundingMetadata")
            .filter(|m| m.as_object().is_some_and(|m| !m.is_empty()))
        {
            self.grounding(metadata, items);
        }
        if let Some(reason) = non_empty_str(candidate.get("finishReason")) {
            items.push(DecodeItem::Finish(finish_reason(reason)));
        }
    }

    fn part(&mut self, part: &Value, items: &mut Vec<DecodeItem>) {
        let thought = part.get("thought").and_then(Value::as_bool) == Some(true);
        let mut kind = if thought { "thought" } else { "text" };
        let mut tool_call_id = None;
        if let Some(text) = non_empty_str(part.get("text")) {
            self.text(text, thought, items);
        }
        if let Some(call) = part.get("functionCall").filter(|c| c.is_object()) {
            kind = "function_call";
            tool_call_id = Some(self.function_call(call, items));
        }
        if let Some(signature) = non_empty_str(part.get("thoughtSignature")) {
            self.signature(signature, kind, tool_call_id, items);
        }
    }

    fn text(&mut self, text: &str, thought: bool, items: &mut Vec<DecodeItem>) {
        let text = text.to_string();
        if thought {
            self.reasoning_by_index
                .entry(self.signatures)
                .or_default()
                .push_str(&text);
            items.push(DecodeItem::Op(DeltaOp::AppendReasoning { text }));
        } else {
            items.push(DecodeItem::Op(DeltaOp::AppendContent { text }));
        }
    }

    fn function_call(&mut self, call: &Value, items: &mut Vec<DecodeItem>) -> String {
        let id = non_empty_str(call.get("id"))
            .map(str::to_string)
            .unwrap_or_else(|| format!("call_{}", self.tool_calls.len()));
        let name = call.get("name").and_then(Value::as_str).unwrap_or("");
        let arguments = call
            .get("args")
            .filter(|a| !a.is_null())
            .map_or_else(|| "{}".to_string(), Value::to_string);
        self.tool_calls
            .push(ToolCall::new(id.clone(), name, arguments));
        items.push(DecodeItem::Op(DeltaOp::SetToolCalls {
            tool_calls: self.tool_calls.clone(),
        }));
        id
    }

    fn signature(
        &mut self,
        signature: &str,
        part: &str,
        tool_call_id: Option<String>,
        items: &mut Vec<DecodeItem>,
    ) {
        let mut block = json!({"type": "thinking", "thinking": "", "signature": signature,
            "index": self.signatures, "part": part});
        if let (Some(id), Some(fields)) = (tool_call_id, block.as_object_mut()) {
            fields.insert("tool_call_id".into(), Value::String(id));
        }
        merge_thinking_blocks(&mut self.thinking, block);
        self.signatures += 1;
        self.emit_thinking(items);
    }

    fn grounding(&mut self, metadata: &Value, items: &mut Vec<DecodeItem>) {
        let mut extra = Map::new();
        extra.insert("grounding_metadata".into(), metadata.clone());
        items.push(DecodeItem::Op(DeltaOp::MergeExtra { extra }));
        let chunks = metadata["groundingChunks"].as_array();
        for citation in chunks.into_iter().flatten().filter_map(citation_of) {
            if !self.citations.contains(&citation) {
                self.citations.push(citation.clone());
                items.push(DecodeItem::Op(DeltaOp::AddCitation {
                    citation: RawJson::from_value(&citation),
                }));
            }
        }
    }

    fn emit_thinking(&self, items: &mut Vec<DecodeItem>) {
        items.push(DecodeItem::Op(DeltaOp::SetThinkingBlocks {
            blocks: self.thinking.clone(),
        }));
    }
}

/// `{web: {uri, title}}` → `{type: "web", uri, title}` (likewise `retrievedContext`, `maps`).
fn citation_of(chunk: &Value) -> Option<Value> {
    let (kind, body) = chunk.as_object()?.iter().next()?;
    let mut citation = body.as_object().cloned().unwrap_or_default();
    citation.insert("type".into(), Value::String(kind.clone()));
    Some(Value::Object(citation))
}
