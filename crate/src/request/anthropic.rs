//! The Anthropic Messages request (SPEC §6.1, §6.5): system prompt as a text block, tools as
//! `input_schema`, images as base64 or URL sources, tool calls as `tool_use` blocks and their
//! results as `tool_result` blocks in the next user turn, roles strictly alternating.
//!
//! Thinking blocks of the open tool-use turn (after the last user message) go back unchanged —
//! byte for byte, with their signatures — minus the engine's own `index` merge key; elsewhere
//! they are stripped (SPEC §3.3, §7). Blocks without a signature (a stopped partial) never go.

use super::common::{data_url, image_parts, model_of, prepared_history};
use super::{ProviderRequest, RequestInput};
use crate::linearize::Thinking;
use crate::message::{ChatMessage, Content, Role};
use crate::provider::ProviderKind;
use crate::tools::ToolSpec;
use serde_json::{json, Map, Value};
use std::borrow::Cow;

/// Anthropic requires `max_tokens`; this is used when the thread sets none.
pub const DEFAULT_MAX_TOKENS: u64 = 8192;

pub(super) fn anthropic(input: &RequestInput, history: &[Cow<'_, ChatMessage>]) -> ProviderRequest {
    let thinking = if input.thread.thinking_budget.is_some() {
        Thinking::KeepCurrentTurn
    } else {
        Thinking::Off
    };
    let history = prepared_history(history, thinking);
    let mut body = Map::new();
    body.insert("model".into(), model_of(input).into());
    body.insert(
        "max_tokens".into(),
        json!(input.thread.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
    );
    if let Some(system) = input.system_prompt.filter(|s| !s.is_empty()) {
        body.insert("system".into(), json!([{"type": "text", "text": system}]));
    }
    let mut messages = turns(&history);
    let mut tools: Vec<Value> = input.tools.iter().map(tool).collect();
    place_cache_breakpoints(&mut body, &mut tools, &mut messages);
    body.insert("messages".into(), Value::Array(messages));
    if !tools.is_empty() {
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(budget) = input.thread.thinking_budget {
        body.insert(
            "thinking".into(),
            json!({"type": "enabled", "budget_tokens": budget}),
        );
    } else if let Some(t) = input.thread.temperature {
        body.insert("temperature".into(), json!(t));
    }
    body.insert("stream".into(), Value::Bool(true));
    let mut headers = input.provider.headers.clone();
    headers.insert("anthropic-version".into(), "2023-06-01".into());
    headers.insert(
        "anthropic-dangerous-direct-browser-access".into(),
        "true".into(),
    );
    ProviderRequest {
        provider: ProviderKind::Anthropic,
        url: format!("{}/messages", input.provider.base_url.trim_end_matches('/')),
        headers,
        body: Value::Object(body),
        compression_strength: Default::default(),
    }
}

/// Message counts at which a history breakpoint settles: a tier moves only every `TIER` turns,
/// so its prefix stays cached for that long (SPEC §6.5, seed 002).
const STABLE_TIERS: [usize; 2] = [32, 8];

/// At most 4 `cache_control` breakpoints: after the system prompt and tools (on the last tool,
/// else on the system block), at the end of the two stable tiers, and on the last turn (which
/// moves every round and is read back by the next one).
fn place_cache_breakpoints(
    body: &mut Map<String, Value>,
    tools: &mut [Value],
    messages: &mut [Value],
) {
    let marker = || json!({"type": "ephemeral"});
    // Anthropic's prefix is tools, then system, then messages: a breakpoint on the system prompt
    // caches the tools with it (SPEC §6.5: "after the system prompt and tools").
    let system_block = match body.get_mut("system") {
        Some(Value::Array(system)) => system.last_mut(),
        _ => None,
    };
    if let Some(block) = system_block {
        block["cache_control"] = marker();
    } else if let Some(last_tool) = tools.last_mut() {
        last_tool["cache_control"] = marker();
    }
    let n = messages.len();
    let mut positions: Vec<usize> = STABLE_TIERS
        .iter()
        .filter_map(|tier| (n / tier * tier).checked_sub(1))
        .collect();
    positions.extend(n.checked_sub(1));
    positions.sort_unstable();
    positions.dedup();
    for position in positions {
        if let Some(block) = messages[position]["content"]
            .as_array_mut()
            .and_then(|blocks| blocks.iter_mut().rev().find(|b| can_carry_cache_control(b)))
        {
            block["cache_control"] = marker();
        }
    }
}

/// Thinking blocks cannot be marked; every other content block can.
fn can_carry_cache_control(block: &Value) -> bool {
    !matches!(
        block["type"].as_str(),
        Some("thinking" | "redacted_thinking")
    )
}

fn tool(spec: &ToolSpec) -> Value {
    json!({"name": spec.name, "description": spec.description, "input_schema": spec.parameters})
}

/// Linearized messages → alternating `user`/`assistant` turns of content blocks.
fn turns(history: &[ChatMessage]) -> Vec<Value> {
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in history {
        let (role, blocks) = match message.role {
            Role::Assistant => ("assistant", assistant_blocks(message)),
            Role::Tool => ("user", vec![tool_result(message)]),
            _ => ("user", content_blocks(&message.content)),
        };
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last, existing)) if *last == role => existing.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    turns
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect()
}

fn assistant_blocks(message: &ChatMessage) -> Vec<Value> {
    let mut blocks: Vec<Value> = message
        .thinking_blocks
        .iter()
        .flatten()
        .filter_map(thinking_block)
        .collect();
    let text = message.content.text();
    if !text.is_empty() {
        blocks.push(json!({"type": "text", "text": text}));
    }
    for call in message.tool_calls() {
        let input = serde_json::from_str::<Value>(&call.function.arguments)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({}));
        blocks.push(
            json!({"type": "tool_use", "id": call.id, "name": call.function.name, "input": input}),
        );
    }
    blocks
}

/// A thinking block as Anthropic sent it: without the engine's `index`; only when complete.
fn thinking_block(block: &Value) -> Option<Value> {
    let mut block = block.as_object()?.clone();
    block.remove("index");
    let complete = match block.get("type").and_then(Value::as_str) {
        Some("thinking") => block
            .get("signature")
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty()),
        Some("redacted_thinking") => block.get("data").and_then(Value::as_str).is_some(),
        _ => false,
    };
    complete.then_some(Value::Object(block))
}

fn tool_result(message: &ChatMessage) -> Value {
    let images = image_parts(&message.content);
    let content = if images.is_empty() {
        Value::String(message.content.text())
    } else {
        // Anthropic takes images inside a tool result.
        Value::Array(content_blocks(&message.content))
    };
    let mut block = json!({
        "type": "tool_result",
        "tool_use_id": message.tool_call_id.clone().unwrap_or_default(),
        "content": content,
    });
    if message.tool_failed == Some(true) {
        block["is_error"] = Value::Bool(true);
    }
    block
}

fn content_blocks(content: &Content) -> Vec<Value> {
    match content {
        Content::Text(text) if text.is_empty() => Vec::new(),
        Content::Text(text) => vec![json!({"type": "text", "text": text})],
        Content::Parts(parts) => parts.iter().filter_map(part_block).collect(),
    }
}

fn part_block(part: &Value) -> Option<Value> {
    match part.get("type").and_then(Value::as_str)? {
        "text" => Some(json!({"type": "text", "text": part.get("text")?.as_str()?})),
        "image_url" => image_block(part.get("image_url")?.get("url")?.as_str()?),
        _ => None,
    }
}

/// `data:<mime>;base64,<data>` → a base64 source; an http(s) URL → a URL source.
fn image_block(url: &str) -> Option<Value> {
    if url.starts_with("data:") {
        let (media_type, data) = data_url(url)?;
        return Some(
            json!({"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}),
        );
    }
    Some(json!({"type": "image", "source": {"type": "url", "url": url}}))
}
