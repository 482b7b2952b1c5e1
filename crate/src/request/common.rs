//! What the per-provider request builders share: the model name, the linearized history, inline
//! image data.

use super::tiers::{self, Layout};
use super::RequestInput;
use crate::history_limit::LimitedMessage;
use crate::linearize::{linear, Linear, Thinking};
use crate::message::{ChatMessage, Content};
use crate::provider::ProviderKind;
use serde_json::value::RawValue;
use serde_json::Value;

pub(super) fn model_of<'a>(input: &'a RequestInput) -> &'a str {
    if input.thread.model.is_empty() {
        &input.provider.model
    } else {
        &input.thread.model
    }
}

/// The limited copy (see `build_request`), linearized (SPEC §7), borrowing its texts.
pub(super) fn prepared_history<M: std::borrow::Borrow<ChatMessage>>(
    history: &[M],
    thinking: Thinking,
) -> Vec<Linear<'_>> {
    linear(history, thinking)
}

/// The prompt and history laid out in the chat's stability tiers (issue 40); untiered when the
/// request has no tracker (compaction, the CLI) or goes to the model in the page (one small
/// context of its own, which the tiers' extra messages would only crowd).
pub(super) fn laid_out<'a>(
    input: &RequestInput<'a>,
    history: &'a [LimitedMessage<'a>],
    thinking: Thinking,
) -> Layout<'a> {
    let linear = prepared_history(history, thinking);
    match input.tiers {
        Some(tracker) if input.provider.kind != ProviderKind::Local => {
            tiers::tiered(input.system_prompt, linear, tracker)
        }
        _ => tiers::plain(input.system_prompt, linear),
    }
}

/// A body as the JSON text that is sent (`json_text`: serde_json's bytes, escaped a word at a
/// time; `from_string` checks the text once more, still faster in the wasm than serde_json's
/// escaping). Serializing plain data cannot fail; if it ever did, the body would be `null` and
/// the provider would say what is wrong.
/// `size` is about how long the text will be ([`body_size`]): the body is the longest text a
/// turn writes, and grown by doubling it had up to three times its size alive at once in a wasm
/// memory that never shrinks (issue 41).
pub(super) fn body_text<T: serde::Serialize>(body: &T, size: usize) -> Box<RawValue> {
    crate::json_text::to_string_sized(body, size)
        .ok()
        .and_then(|text| RawValue::from_string(text).ok())
        .unwrap_or_else(null_body)
}

/// About how many bytes a request's body takes: what is sent of the history (its texts, tool
/// calls and thinking), the system prompt and tools, room for each message's keys, and an eighth
/// more for escapes. An estimate only: a body longer than it grows as any text does.
pub(super) fn body_size(input: &RequestInput, layout: &Layout<'_>) -> usize {
    const PER_MESSAGE: usize = 96;
    let fixed = super::fixed_chars(layout.system.as_deref(), input.tools) + 512;
    let messages: usize = layout
        .messages
        .iter()
        .map(|m| PER_MESSAGE + linear_bytes(m))
        .sum();
    let total = fixed + messages;
    size_class(total + total / 8)
}

/// A body of 64 KB or more takes a power of two: a chat's successive bodies, each a little longer,
/// take the same size and so fit the hole the last one left in the wasm memory, which then grows
/// only when the body's size doubles (with eight sizes per doubling, every new size left a hole
/// that the turn's small allocations split: the memory grew by about eight bodies, issue 41).
fn size_class(size: usize) -> usize {
    if size < 64 * 1024 {
        size
    } else {
        size.next_power_of_two()
    }
}

fn linear_bytes(message: &Linear<'_>) -> usize {
    let content = match message.content.as_ref() {
        Content::Text(text) => text.len(),
        Content::Parts(parts) => parts.iter().map(strings_bytes).sum(),
    };
    let calls: usize = message
        .tool_calls
        .iter()
        .flat_map(|calls| calls.iter())
        .map(|call| call.id.len() + call.function.name.len() + call.function.arguments.len() + 64)
        .sum();
    let thinking: usize = message
        .thinking_blocks
        .iter()
        .flat_map(|blocks| blocks.iter())
        .map(strings_bytes)
        .sum();
    content + calls + thinking + message.reasoning_content.map_or(0, str::len)
}

/// The bytes of a JSON value's strings, keys and all: a content part, a thinking block.
fn strings_bytes(value: &Value) -> usize {
    match value {
        Value::String(text) => text.len() + 2,
        Value::Array(items) => items.iter().map(strings_bytes).sum(),
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| k.len() + 4 + strings_bytes(v))
            .sum(),
        _ => 8,
    }
}

fn null_body() -> Box<RawValue> {
    RawValue::from_string("null".into()).unwrap_or_default()
}

/// `data:<mime>;base64,<data>` → `(mime, data)`; anything else is a URL, not inline data.
pub(super) fn data_url(url: &str) -> Option<(&str, &str)> {
    let (header, data) = url.strip_prefix("data:")?.split_once(',')?;
    Some((header.strip_suffix(";base64")?, data))
}

/// The image parts of a message (a tool result with images from an MCP server).
pub(super) fn image_parts(content: &Content) -> Vec<&Value> {
    match content {
        Content::Text(_) => Vec::new(),
        Content::Parts(parts) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("image_url"))
            .collect(),
    }
}
