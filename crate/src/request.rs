//! Request building (SPEC §6.5): the linearized history → the body and URL of a provider request.
//! The core never sees an API key: the host adds the provider's auth header to the effect.

use crate::history_limit::{limit_history, CompressionStrength, HistoryLimitError};
use crate::linearize::{linearize, Thinking};
use crate::message::{ChatMessage, Content, Role};
use crate::provider::ProviderKind;
use crate::thread::ThreadParams;
use crate::tools::ToolSpec;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::borrow::Cow;

/// Where a provider lives, without its key (SPEC §6.1), and the model settings the user chose
/// for it; a chat's own params (`set_params`) take precedence over each.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct ProviderConfig {
    pub kind: ProviderKind,
    #[serde(default)]
    pub base_url: String,
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub headers: Map<String, Value>,
    /// The model's context window, from the provider (`/models`, `/props`) or the user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n_ctx: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// OpenAI chat and Responses: `low` / `medium` / `high`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    /// Anthropic and Gemini: thinking tokens; set, it turns thinking on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_budget: Option<u64>,
}

impl ProviderConfig {
    /// The thread's params with each model setting it leaves unset taken from this provider.
    pub fn effective<'a>(&self, thread: &'a ThreadParams) -> Cow<'a, ThreadParams> {
        let unset = (thread.max_tokens.is_none() && self.max_tokens.is_some())
            || (thread.temperature.is_none() && self.temperature.is_some())
            || (thread.reasoning_effort.is_none() && self.reasoning_effort.is_some())
            || (thread.thinking_budget.is_none() && self.thinking_budget.is_some());
        if !unset {
            return Cow::Borrowed(thread);
        }
        let mut params = thread.clone();
        params.max_tokens = params.max_tokens.or(self.max_tokens);
        params.temperature = params.temperature.or(self.temperature);
        params.reasoning_effort = params
            .reasoning_effort
            .clone()
            .or_else(|| self.reasoning_effort.clone());
        params.thinking_budget = params.thinking_budget.or(self.thinking_budget);
        Cow::Owned(params)
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ProviderRequest {
    pub provider: ProviderKind,
    pub url: String,
    pub headers: Map<String, Value>,
    pub body: Value,
    /// How far the history limit went for this request (SPEC §5).
    #[serde(default)]
    pub compression_strength: CompressionStrength,
}

pub struct RequestInput<'a> {
    pub provider: &'a ProviderConfig,
    pub thread: &'a ThreadParams,
    pub system_prompt: Option<&'a str>,
    pub tools: &'a [ToolSpec],
    pub history: &'a [ChatMessage],
    /// Tokens the history may take (`None`: no limit; only stage 3's repairs run).
    pub budget: Option<u64>,
}

/// Builds the request; `Err` names what this provider cannot do yet.
/// The request for the history after the history limit (SPEC §5), which works on a copy.
pub fn build_request(input: &RequestInput) -> Result<ProviderRequest, HistoryLimitError> {
    let limited = limit_history(input.history, input.budget)?;
    let history = &limited.messages;
    let mut request = match input.provider.kind {
        ProviderKind::OpenaiChat => openai_chat(input, history),
        ProviderKind::Anthropic => crate::request_anthropic::anthropic(input, history),
        ProviderKind::Gemini => crate::request_gemini::gemini(input, history),
        ProviderKind::OpenaiResponses => crate::request_responses::responses(input, history),
    };
    request.compression_strength = limited.strength;
    Ok(request)
}

pub(crate) fn model_of<'a>(input: &'a RequestInput) -> &'a str {
    if input.thread.model.is_empty() {
        &input.provider.model
    } else {
        &input.thread.model
    }
}

fn openai_chat(input: &RequestInput, history: &[Cow<'_, ChatMessage>]) -> ProviderRequest {
    let mut messages = Vec::new();
    if let Some(system) = input.system_prompt.filter(|s| !s.is_empty()) {
        messages.push(json!({"role": "system", "content": system}));
    }
    messages.extend(
        prepared_history(history, Thinking::Off)
            .iter()
            .map(openai_message),
    );
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
        provider: ProviderKind::OpenaiChat,
        url: format!(
            "{}/chat/completions",
            input.provider.base_url.trim_end_matches('/')
        ),
        headers: input.provider.headers.clone(),
        body: Value::Object(body),
        compression_strength: CompressionStrength::Absent,
    }
}

/// The limited copy (see `build_request`), linearized (SPEC §7).
pub(crate) fn prepared_history<M: std::borrow::Borrow<ChatMessage>>(
    history: &[M],
    thinking: Thinking,
) -> Vec<ChatMessage> {
    linearize(history, thinking)
}

/// `data:<mime>;base64,<data>` → `(mime, data)`; anything else is a URL, not inline data.
pub(crate) fn data_url(url: &str) -> Option<(&str, &str)> {
    let (header, data) = url.strip_prefix("data:")?.split_once(',')?;
    Some((header.strip_suffix(";base64")?, data))
}

fn openai_tool(spec: &ToolSpec) -> Value {
    json!({"type": "function", "function": {"name": spec.name, "description": spec.description, "parameters": spec.parameters}})
}

fn openai_message(message: &ChatMessage) -> Value {
    let role = match message.role {
        Role::System => "system",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
        _ => "user",
    };
    let mut out = Map::new();
    out.insert("role".into(), role.into());
    out.insert("content".into(), content_json(&message.content));
    if let Some(calls) = message.tool_calls.as_ref().filter(|c| !c.is_empty()) {
        out.insert(
            "tool_calls".into(),
            serde_json::to_value(calls).unwrap_or(Value::Null),
        );
    }
    if let Some(id) = &message.tool_call_id {
        out.insert("tool_call_id".into(), id.clone().into());
    }
    Value::Object(out)
}

fn content_json(content: &Content) -> Value {
    match content {
        Content::Text(text) => Value::String(text.clone()),
        Content::Parts(parts) => Value::Array(parts.clone()),
    }
}

/// The characters of the parts of a request that are not history: system prompt and tools.
pub fn fixed_chars(system_prompt: Option<&str>, tools: &[ToolSpec]) -> usize {
    system_prompt.map_or(0, str::len)
        + tools
            .iter()
            .map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len())
            .sum::<usize>()
}
