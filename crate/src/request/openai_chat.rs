//! OpenAI Chat Completions requests (and every OpenAI-compatible server: llama.cpp, Ollama, vLLM).

use super::common::{image_parts, model_of, prepared_history};
use super::{ProviderRequest, RequestInput};
use crate::history_limit::CompressionStrength;
use crate::linearize::Thinking;
use crate::message::{ChatMessage, Content, Role, ToolCall};
use crate::tools::ToolSpec;
use serde_json::{json, Map, Value};
use std::borrow::Cow;

pub(super) fn openai_chat(
    input: &RequestInput,
    history: &[Cow<'_, ChatMessage>],
) -> ProviderRequest {
    let mut messages = Vec::new();
    if let Some(system) = input.system_prompt.filter(|s| !s.is_empty()) {
        messages.push(json!({"role": "system", "content": system}));
    }
    messages.extend(with_tool_images_after(prepared_history(
        history,
        Thinking::Off,
    )));
    let mut body = Map::new();
    body.insert("model".into(), model_of(input).into());
    body.insert("messages".into(), Value::Array(messages));
    if !input.tools.is_empty() {
        body.insert(
            "tools".into(),
            input.tools.iter().map(openai_tool).collect(),
        );
    }
    if let Some(t) = input.thread.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(max) = input.thread.max_tokens {
        body.insert("max_tokens".into(), json!(max));
    }
    if let Some(effort) = &input.thread.reasoning_effort {
        body.insert("reasoning_effort".into(), json!(effort));
    }
    body.insert("stream".into(), Value::Bool(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
    ProviderRequest {
        // `local` speaks this format too; the request keeps the kind the host routes by.
        provider: input.provider.kind,
        url: format!(
            "{}/chat/completions",
            input.provider.base_url.trim_end_matches('/')
        ),
        headers: input.provider.headers.clone(),
        body: Value::Object(body),
        compression_strength: CompressionStrength::Absent,
    }
}

/// The messages in OpenAI's shape. A tool message carries text only (the API takes no images
/// there): the images of a step's results follow its last result as one user message.
/// Takes the linearized copy by value: its texts move into the body, none is copied again.
fn with_tool_images_after(history: Vec<ChatMessage>) -> Vec<Value> {
    let mut out = Vec::with_capacity(history.len());
    let mut images: Vec<Value> = Vec::new();
    for mut message in history {
        if message.role != Role::Tool && !images.is_empty() {
            out.push(tool_images_message(std::mem::take(&mut images)));
        }
        if message.role == Role::Tool && matches!(message.content, Content::Parts(_)) {
            images.extend(image_parts(&message.content).into_iter().cloned());
            message.content = Content::Text(message.content.text());
        }
        out.push(openai_message(message));
    }
    if !images.is_empty() {
        out.push(tool_images_message(images));
    }
    out
}

fn tool_images_message(images: Vec<Value>) -> Value {
    let mut content =
        vec![json!({"type": "text", "text": "The images the tool calls above returned:"})];
    content.extend(images);
    json!({"role": "user", "content": content})
}

fn openai_tool(spec: &ToolSpec) -> Value {
    json!({"type": "function", "function": {"name": spec.name, "description": spec.description, "parameters": spec.parameters}})
}

fn openai_message(message: ChatMessage) -> Value {
    let role = match message.role {
        Role::System => "system",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
        _ => "user",
    };
    let mut out = Map::new();
    out.insert("role".into(), role.into());
    out.insert("content".into(), content_json(message.content));
    if let Some(calls) = message.tool_calls.filter(|c| !c.is_empty()) {
        out.insert(
            "tool_calls".into(),
            calls.into_iter().map(tool_call_json).collect(),
        );
    }
    if let Some(id) = message.tool_call_id {
        out.insert("tool_call_id".into(), id.into());
    }
    Value::Object(out)
}

/// A call as `ToolCall` serializes (`id`, `type`, `function`), its strings moved.
fn tool_call_json(call: ToolCall) -> Value {
    let mut function = Map::new();
    function.insert("name".into(), call.function.name.into());
    function.insert("arguments".into(), call.function.arguments.into());
    let mut out = Map::new();
    out.insert("id".into(), call.id.into());
    out.insert("type".into(), call.kind.into());
    out.insert("function".into(), Value::Object(function));
    Value::Object(out)
}

fn content_json(content: Content) -> Value {
    match content {
        Content::Text(text) => Value::String(text),
        Content::Parts(parts) => Value::Array(parts),
    }
}
