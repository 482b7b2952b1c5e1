//! The OpenAI Responses decoder (SPEC §6.2). Output items are tracked by `output_index`.
//!
//! - `response.output_text.delta` appends to the content; `response.output_text.annotation.added`
//!   is a citation;
//! - `response.reasoning_summary_text.delta` appends to the reasoning; summary parts after the
//!   first are separated by a blank line (`\n\n`);
//! - `reasoning` items are thinking blocks (`type: "reasoning"`, merged by `id`, SPEC §3.3): the
//!   sparse item of `output_item.added` is enriched by the complete one of `output_item.done`
//!   and then by the one in `response.completed` (each step re-encrypts `encrypted_content`; the
//!   completed response's is the one to send back);
//! - `function_call` items are tool calls (id = `call_id`); argument deltas append, and the
//!   item's final `arguments` (at `.done`) win;
//! - `web_search_call` (and other server tool call) items are server content blocks, emitted
//!   whole at `output_item.done`;
//! - `response.completed` carries the usage (SPEC §6.4) and ends with `stop`, or `tool_calls`
//!   when the response holds function calls (the Responses API has no finish reason of its own);
//!   `response.incomplete` ends with `length` for `max_output_tokens`, else its reason;
//! - `error` and `response.failed` end the round as a failure with the provider's code.

use super::framed::{event_kind, failure_from, json_object, non_empty_str, Events};
use super::DecodeItem;
use crate::delta::DeltaOp;
use crate::error::StreamDecodeError;
use crate::message::{RawJson, ToolCall, Usage};
use crate::sse::SseEvent;
use crate::thinking::merge_thinking_blocks;
use litemap::LiteMap;
use serde_json::Value;

pub type Decoder = super::framed::Framed<State>;

#[derive(Debug, Default)]
pub struct State {
    tool_calls: LiteMap<u64, ToolCall>,
    thinking: Vec<Value>,
    summary_parts: usize,
}

fn op(op: DeltaOp) -> DecodeItem {
    DecodeItem::Op(op)
}

impl Events for State {
    const PROVIDER: &'static str = "openai-responses";

    fn event(
        &mut self,
        event: &SseEvent,
        items: &mut Vec<DecodeItem>,
    ) -> Result<(), StreamDecodeError> {
        let Some(data) = json_object(event, Self::PROVIDER)? else {
            return Ok(());
        };
        let kind = event_kind(&data, event);
        let index = data
            .get("output_index")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        match kind {
            "response.created" => {
                if let Some(model) = non_empty_str(data["response"].get("model")) {
                    items.push(DecodeItem::Model(model.to_string()));
                }
            }
            "response.output_text.delta" => {
                text(&data, items, |text| DeltaOp::AppendContent { text })
            }
            "response.reasoning_summary_part.added" => self.summary_part(items),
            "response.reasoning_summary_text.delta" => {
                text(&data, items, |text| DeltaOp::AppendReasoning { text })
            }
            "response.output_text.annotation.added" => annotation(&data, items),
            "response.output_item.added" => self.item(index, &data["item"], false, items),
            "response.output_item.done" => self.item(index, &data["item"], true, items),
            "response.function_call_arguments.delta" => self.arguments(index, &data, items),
            "response.completed" => self.completed(&data["response"], items),
            "response.incomplete" => incomplete(&data["response"], items),
            "error" => items.push(DecodeItem::Failure(failure_from(
                data.get("error").filter(|e| e.is_object()).unwrap_or(&data),
                "provider_error",
            ))),
            "response.failed" => items.push(DecodeItem::Failure(failure_from(
                &data["response"]["error"],
                "response_failed",
            ))),
            _ => {}
        }
        Ok(())
    }

    fn end(&mut self, _items: &mut Vec<DecodeItem>) {}
}

fn text(data: &Value, items: &mut Vec<DecodeItem>, make: impl Fn(String) -> DeltaOp) {
    if let Some(delta) = non_empty_str(data.get("delta")) {
        items.push(op(make(delta.to_string())));
    }
}

fn annotation(data: &Value, items: &mut Vec<DecodeItem>) {
    if let Some(citation) = data.get("annotation").filter(|a| a.is_object()) {
        items.push(op(DeltaOp::AddCitation {
            citation: RawJson::from_value(citation),
        }));
    }
}

fn incomplete(response: &Value, items: &mut Vec<DecodeItem>) {
    let reason = response["incomplete_details"]["reason"]
        .as_str()
        .unwrap_or("incomplete");
    let reason = if reason == "max_output_tokens" {
        "length"
    } else {
        reason
    };
    items.push(DecodeItem::Finish(reason.to_string()));
    usage_of(response, items);
    items.push(DecodeItem::Done);
}

fn usage_of(response: &Value, items: &mut Vec<DecodeItem>) {
    let Some(raw) = response.get("usage").filter(|u| u.is_object()) else {
        return;
    };
    let number = |path: &[&str]| path.iter().try_fold(raw, |v, k| v.get(*k))?.as_u64();
    let usage = Usage {
        prompt_tokens: number(&["input_tokens"]),
        completion_tokens: number(&["output_tokens"]),
        cache_read_tokens: number(&["input_tokens_details", "cached_tokens"]),
        cache_creation_tokens: None,
        reasoning_tokens: number(&["output_tokens_details", "reasoning_tokens"]),
        total_tokens: number(&["total_tokens"]),
    };
    items.push(op(DeltaOp::SetUsage { usage }));
}

fn is_server_item(kind: &str) -> bool {
    kind.ends_with("_call") && kind != "function_call" && kind != "custom_tool_call"
}

impl State {
    fn summary_part(&mut self, items: &mut Vec<DecodeItem>) {
        if self.summary_parts > 0 {
            items.push(op(DeltaOp::AppendReasoning {
                text: "\n\n".into(),
            }));
        }
        self.summary_parts += 1;
    }

    fn item(&mut self, index: u64, item: &Value, done: bool, items: &mut Vec<DecodeItem>) {
        let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "reasoning" => {
                merge_thinking_blocks(&mut self.thinking, without_nulls(item));
                items.push(op(DeltaOp::SetThinkingBlocks {
                    blocks: self.thinking.clone(),
                }));
            }
            "function_call" => self.function_call(index, item, items),
            kind if done && is_server_item(kind) => {
                items.push(op(DeltaOp::AddServerContentBlock {
                    block: without_nulls(item).into(),
                }));
            }
            _ => {}
        }
    }

    fn function_call(&mut self, index: u64, item: &Value, items: &mut Vec<DecodeItem>) {
        let call = self
            .tool_calls
            .entry(index)
            .or_insert_with(|| ToolCall::new("", "", ""));
        if let Some(id) = non_empty_str(item.get("call_id")) {
            call.id = id.to_string();
        }
        if let Some(name) = non_empty_str(item.get("name")) {
            call.function.name = name.to_string();
        }
        if let Some(arguments) = non_empty_str(item.get("arguments")) {
            call.function.arguments = arguments.to_string();
        }
        self.emit_tool_calls(items);
    }

    fn arguments(&mut self, index: u64, data: &Value, items: &mut Vec<DecodeItem>) {
        let Some(delta) = non_empty_str(data.get("delta")) else {
            return;
        };
        if let Some(call) = self.tool_calls.get_mut(&index) {
            call.function.arguments.push_str(delta);
            self.emit_tool_calls(items);
        }
    }

    fn completed(&mut self, response: &Value, items: &mut Vec<DecodeItem>) {
        let output = response["output"].as_array();
        let reasoning: Vec<&Value> = output
            .into_iter()
            .flatten()
            .filter(|item| item["type"] == "reasoning")
            .collect();
        for item in &reasoning {
            merge_thinking_blocks(&mut self.thinking, without_nulls(item));
        }
        if !reasoning.is_empty() {
            items.push(op(DeltaOp::SetThinkingBlocks {
                blocks: self.thinking.clone(),
            }));
        }
        let reason = if self.tool_calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        };
        items.push(DecodeItem::Finish(reason.into()));
        usage_of(response, items);
        items.push(DecodeItem::Done);
    }

    fn emit_tool_calls(&self, items: &mut Vec<DecodeItem>) {
        items.push(op(DeltaOp::SetToolCalls {
            tool_calls: self.tool_calls.values().cloned().collect(),
        }));
    }
}

/// An item without its null fields (they carry nothing and a merge skips them anyway).
fn without_nulls(item: &Value) -> Value {
    match item.as_object() {
        Some(fields) => Value::Object(
            fields
                .iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        None => item.clone(),
    }
}
