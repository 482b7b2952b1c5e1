//! The Gemini request (`models/{model}:streamGenerateContent?alt=sse`, SPEC §6.1, §6.5): the
//! system prompt as `systemInstruction`, tools as one `functionDeclarations` list, roles `user`
//! and `model` strictly alternating, tool calls as `functionCall` parts and their results as
//! `functionResponse` parts (named after their call) in the next user turn, images as
//! `inlineData` (data URLs) or `fileData` (other URLs).
//!
//! Thought signatures go back on the part that carried them (SPEC §6.2): the decoder records,
//! for each signature, whether it came on a thought, the text or a function call (and which
//! one); within the open turn (after the last user message) the request puts each back there.
//! Elsewhere, and when thinking is off, they are stripped with the rest of the thinking.

use super::body::RequestBody;
use super::common::{data_url, image_parts, laid_out, model_of};
use super::{ProviderRequest, RequestInput};
use crate::history_limit::LimitedMessage;
use crate::linearize::{Linear, Thinking};
use crate::message::{Content, Role};
use crate::provider::ProviderKind;
use crate::tools::ToolSpec;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

pub(super) fn gemini(input: &RequestInput, history: &[LimitedMessage<'_>]) -> ProviderRequest {
    let thinking = if input.thread.thinking_budget.is_some() {
        Thinking::KeepCurrentTurn
    } else {
        Thinking::Off
    };
    let layout = laid_out(input, history, thinking);
    let history = &layout.messages;
    let mut body = Map::new();
    body.insert("contents".into(), Value::Array(contents(&history)));
    if let Some(system) = layout.system.as_deref() {
        body.insert(
            "systemInstruction".into(),
            json!({"parts": [{"text": system}]}),
        );
    }
    if !input.tools.is_empty() {
        let declarations: Vec<Value> = input.tools.iter().map(declaration).collect();
        body.insert(
            "tools".into(),
            json!([{"functionDeclarations": declarations}]),
        );
    }
    let config = generation_config(input);
    if !config.is_empty() {
        body.insert("generationConfig".into(), Value::Object(config));
    }
    let model = model_of(input);
    let model = model.strip_prefix("models/").unwrap_or(model);
    ProviderRequest {
        provider: ProviderKind::Gemini,
        url: format!(
            "{}/models/{model}:streamGenerateContent?alt=sse",
            input.provider.base_url.trim_end_matches('/')
        ),
        headers: input.provider.headers.clone(),
        body: RequestBody::write(&body),
        compression_strength: Default::default(),
        left_out: Default::default(),
        tiers: layout.tiers,
    }
}

fn generation_config(input: &RequestInput) -> Map<String, Value> {
    let mut config = Map::new();
    if let Some(t) = input.thread.temperature {
        config.insert("temperature".into(), json!(t));
    }
    if let Some(max) = input.thread.max_tokens {
        config.insert("maxOutputTokens".into(), json!(max));
    }
    if let Some(budget) = input.thread.thinking_budget {
        config.insert(
            "thinkingConfig".into(),
            json!({"thinkingBudget": budget, "includeThoughts": true}),
        );
    }
    config
}

fn declaration(spec: &ToolSpec) -> Value {
    json!({"name": spec.name, "description": spec.description, "parameters": spec.parameters})
}

/// Linearized messages → alternating `user`/`model` contents.
fn contents(history: &[Linear<'_>]) -> Vec<Value> {
    let call_names: BTreeMap<&str, &str> = history
        .iter()
        .flat_map(|m| m.tool_calls())
        .map(|c| (c.id.as_str(), c.function.name.as_str()))
        .collect();
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in history {
        let (role, parts) = match message.role {
            Role::Assistant => ("model", model_parts(message)),
            Role::Tool => ("user", function_response_parts(message, &call_names)),
            _ => ("user", user_parts(&message.content)),
        };
        if parts.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last, existing)) if *last == role => existing.extend(parts),
            _ => turns.push((role, parts)),
        }
    }
    turns
        .into_iter()
        .map(|(role, parts)| json!({"role": role, "parts": parts}))
        .collect()
}

/// Where each kept signature goes back: the thought parts, the text, or a function call by id.
#[derive(Default)]
struct Signatures<'a> {
    thoughts: Vec<(&'a str, &'a str)>,
    text: Option<&'a str>,
    calls: BTreeMap<&'a str, &'a str>,
}

fn signatures<'a>(message: &Linear<'a>) -> Signatures<'a> {
    let mut found = Signatures::default();
    for block in message.thinking_blocks.into_iter().flatten() {
        let Some(signature) = block.get("signature").and_then(Value::as_str) else {
            continue;
        };
        if signature.is_empty() {
            continue;
        }
        match block.get("part").and_then(Value::as_str) {
            Some("function_call") => {
                if let Some(id) = block.get("tool_call_id").and_then(Value::as_str) {
                    found.calls.insert(id, signature);
                }
            }
            Some("text") => found.text = Some(signature),
            _ => {
                let text = block.get("thinking").and_then(Value::as_str).unwrap_or("");
                found.thoughts.push((text, signature));
            }
        }
    }
    found
}

fn model_parts(message: &Linear<'_>) -> Vec<Value> {
    let signatures = signatures(message);
    let mut parts: Vec<Value> = signatures
        .thoughts
        .iter()
        .map(|(text, signature)| json!({"text": text, "thought": true, "thoughtSignature": signature}))
        .collect();
    let text = message.content.text();
    if !text.is_empty() {
        let mut part = json!({"text": text});
        if let Some(signature) = signatures.text {
            part["thoughtSignature"] = json!(signature);
        }
        parts.push(part);
    }
    for call in message.tool_calls() {
        let args = serde_json::from_str::<Value>(&call.function.arguments)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({}));
        let mut function_call = json!({"name": call.function.name, "args": args});
        if !is_generated_id(&call.id) {
            function_call["id"] = json!(call.id);
        }
        let mut part = json!({"functionCall": function_call});
        if let Some(signature) = signatures.calls.get(call.id.as_str()) {
            part["thoughtSignature"] = json!(signature);
        }
        parts.push(part);
    }
    parts
}

/// The decoder names calls Gemini sent without an id `call_<n>`; those ids are ours, not Gemini's.
fn is_generated_id(id: &str) -> bool {
    id.strip_prefix("call_")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// A tool result: its function response, then its images (an MCP tool's) as inline data in the
/// same user turn.
fn function_response_parts(message: &Linear<'_>, call_names: &BTreeMap<&str, &str>) -> Vec<Value> {
    let mut parts = vec![function_response(message, call_names)];
    parts.extend(
        image_parts(&message.content)
            .into_iter()
            .filter_map(user_part),
    );
    parts
}

fn function_response(message: &Linear<'_>, call_names: &BTreeMap<&str, &str>) -> Value {
    let id = message.tool_call_id.unwrap_or("");
    let name = call_names.get(id).copied().unwrap_or("");
    let text = message.content.text();
    let response = if message.tool_failed == Some(true) {
        json!({"error": text})
    } else {
        json!({"content": text})
    };
    let mut function_response = json!({"name": name, "response": response});
    if !id.is_empty() && !is_generated_id(id) {
        function_response["id"] = json!(id);
    }
    json!({"functionResponse": function_response})
}

fn user_parts(content: &Content) -> Vec<Value> {
    match content {
        Content::Text(text) if text.is_empty() => Vec::new(),
        Content::Text(text) => vec![json!({"text": text})],
        Content::Parts(parts) => parts.iter().filter_map(user_part).collect(),
    }
}

fn user_part(part: &Value) -> Option<Value> {
    match part.get("type").and_then(Value::as_str)? {
        "text" => Some(json!({"text": part.get("text")?.as_str()?})),
        "image_url" => {
            let url = part.get("image_url")?.get("url")?.as_str()?;
            if url.starts_with("data:") {
                let (mime, data) = data_url(url)?;
                return Some(json!({"inlineData": {"mimeType": mime, "data": data}}));
            }
            Some(json!({"fileData": {"fileUri": url}}))
        }
        _ => None,
    }
}
