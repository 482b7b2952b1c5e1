//! The OpenAI Responses request (`POST {base_url}/responses`, SPEC §6.1, §6.5): the system
//! prompt as `instructions`, history as input items (messages with `input_text`/`input_image`
//! parts, `function_call` and `function_call_output` items), tools as `{type: "function"}`,
//! `stream: true`, and `store: false` — the page keeps the chat, not the provider — so
//! reasoning travels back as the items themselves with their `encrypted_content` (requested
//! through `include`).
//!
//! Reasoning items of the open turn (after the last user message) go back as the provider sent
//! them, minus the engine's `index` merge key, before the message they belong to; items without
//! `encrypted_content` are useless without server-side storage and are left out.

use super::body::RequestBody;
use super::common::{image_parts, laid_out, model_of};
use super::{ProviderRequest, RequestInput};
use crate::history_limit::LimitedMessage;
use crate::linearize::{Linear, Thinking};
use crate::message::{Content, Role};
use crate::provider::ProviderKind;
use crate::tools::ToolSpec;
use serde_json::{json, Map, Value};

pub(super) fn responses(input: &RequestInput, history: &[LimitedMessage<'_>]) -> ProviderRequest {
    let reasoning = input.thread.reasoning_effort.is_some();
    let thinking = if reasoning {
        Thinking::KeepCurrentTurn
    } else {
        Thinking::Off
    };
    let layout = laid_out(input, history, thinking);
    let history = &layout.messages;
    let mut body = Map::new();
    body.insert("model".into(), model_of(input).into());
    if let Some(system) = layout.system.as_deref() {
        body.insert("instructions".into(), system.into());
    }
    body.insert(
        "input".into(),
        Value::Array(history.iter().flat_map(items).collect()),
    );
    if !input.tools.is_empty() {
        body.insert("tools".into(), input.tools.iter().map(tool).collect());
    }
    if let Some(t) = input.thread.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(max) = input.thread.max_tokens {
        body.insert("max_output_tokens".into(), json!(max));
    }
    if let Some(effort) = &input.thread.reasoning_effort {
        body.insert(
            "reasoning".into(),
            json!({"effort": effort, "summary": "auto"}),
        );
        body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    }
    body.insert("store".into(), Value::Bool(false));
    body.insert("stream".into(), Value::Bool(true));
    ProviderRequest {
        provider: ProviderKind::OpenaiResponses,
        url: format!(
            "{}/responses",
            input.provider.base_url.trim_end_matches('/')
        ),
        headers: input.provider.headers.clone(),
        body: RequestBody::write(&body),
        compression_strength: Default::default(),
        left_out: Default::default(),
        tiers: layout.tiers,
    }
}

fn tool(spec: &ToolSpec) -> Value {
    json!({"type": "function", "name": spec.name, "description": spec.description, "parameters": spec.parameters})
}

fn items(message: &Linear<'_>) -> Vec<Value> {
    match message.role {
        Role::Assistant => assistant_items(message),
        Role::Tool => vec![json!({
            "type": "function_call_output",
            "call_id": message.tool_call_id.unwrap_or_default(),
            "output": tool_output(&message.content),
        })],
        Role::System => text_message("system", &message.content),
        _ => user_message(&message.content),
    }
}

fn assistant_items(message: &Linear<'_>) -> Vec<Value> {
    let mut items: Vec<Value> = message
        .thinking_blocks
        .into_iter()
        .flatten()
        .filter_map(reasoning_item)
        .collect();
    let text = message.content.text();
    if !text.is_empty() {
        items.push(json!({"role": "assistant", "content": text}));
    }
    for call in message.tool_calls() {
        items.push(json!({
            "type": "function_call",
            "call_id": call.id,
            "name": call.function.name,
            "arguments": call.function.arguments,
        }));
    }
    items
}

/// A reasoning item as the provider sent it, without the engine's `index`; only when it carries
/// `encrypted_content` (with `store: false` an id alone refers to nothing).
fn reasoning_item(block: &Value) -> Option<Value> {
    let mut item = block.as_object()?.clone();
    if item.get("type").and_then(Value::as_str) != Some("reasoning") {
        return None;
    }
    item.get("encrypted_content")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())?;
    item.remove("index");
    item.remove("status");
    Some(Value::Object(item))
}

fn text_message(role: &str, content: &Content) -> Vec<Value> {
    let text = content.text();
    if text.is_empty() {
        return Vec::new();
    }
    vec![json!({"role": role, "content": text})]
}

/// A tool's output: its text, or with images (an MCP tool's) a list of input parts, which the
/// Responses API takes in a function call's output.
fn tool_output(content: &Content) -> Value {
    if image_parts(content).is_empty() {
        return Value::String(content.text());
    }
    match content {
        Content::Parts(parts) => Value::Array(parts.iter().filter_map(user_part).collect()),
        Content::Text(text) => Value::String(text.clone()),
    }
}

fn user_message(content: &Content) -> Vec<Value> {
    let parts: Vec<Value> = match content {
        Content::Text(text) if text.is_empty() => Vec::new(),
        Content::Text(text) => vec![json!({"type": "input_text", "text": text})],
        Content::Parts(parts) => parts.iter().filter_map(user_part).collect(),
    };
    if parts.is_empty() {
        return Vec::new();
    }
    vec![json!({"role": "user", "content": parts})]
}

fn user_part(part: &Value) -> Option<Value> {
    match part.get("type").and_then(Value::as_str)? {
        "text" => Some(json!({"type": "input_text", "text": part.get("text")?.as_str()?})),
        "image_url" => Some(json!({
            "type": "input_image",
            "image_url": part.get("image_url")?.get("url")?.as_str()?,
        })),
        _ => None,
    }
}
