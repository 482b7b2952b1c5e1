//! Request building (SPEC §6.5): the linearized history → the body and URL of a provider request.
//! The core never sees an API key: the host adds the provider's auth header to the effect.
//! One file per provider kind, as in `provider/`; what they share is in `common.rs`.

mod anthropic;
mod body;
mod common;
mod gemini;
mod openai_chat;
mod openai_responses;
mod tiers;

pub use body::RequestBody;
pub use tiers::TiersApplied;

use crate::history_limit::{limit_history_for, CompressionStrength, HistoryLimitError};
use crate::message::ChatMessage;
use crate::provider::ProviderKind;
use crate::thread::ThreadParams;
use crate::tools::ToolSpec;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
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
    /// The most the model may write in one answer, as the provider says (model lists, `/props`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    /// What the model reads (`["text"]`, `["text", "image"]`), as the provider says; `None`:
    /// not known (images are sent, and a refusal is reported as the provider's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_modalities: Option<Vec<String>>,
    /// Whether the model is given tools: `false` marks a provider "chat only" (a plain prompt,
    /// no tools); `None`: yes, except for the model in the page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_use: Option<bool>,
    /// A model given no tools changes files with edit blocks in its answer (issue 40): its
    /// chats get the edit-block prompt and the workspace. Ignored when the model has tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edit_blocks: Option<bool>,
    /// The server takes llama.cpp's `return_progress` (its `/props` answered): an OpenAI chat
    /// request asks it to say how far it has read the prompt (`runtime.prompt_progress`).
    /// Other servers are not asked (OpenAI refuses a parameter it does not know).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub return_progress: Option<bool>,
}

/// The least and most a default answer limit takes (a quarter of the window between them).
pub const DEFAULT_OUTPUT_RANGE: (u64, u64) = (256, 8192);

impl ProviderConfig {
    /// The answer's limit sent with every request, and kept free in the window: the chat's or
    /// the provider's `max_tokens` when set; else the model's own limit (as the provider says
    /// it), else a quarter of the window (256 to 8 192) — never more than half the window.
    pub fn output_tokens(&self, thread: &ThreadParams, n_ctx: u64) -> u64 {
        if let Some(set) = thread.max_tokens.or(self.max_tokens) {
            return set.max(1);
        }
        let half = (n_ctx / 2).max(1);
        let share = (n_ctx / 4).clamp(DEFAULT_OUTPUT_RANGE.0, DEFAULT_OUTPUT_RANGE.1);
        self.max_output_tokens.unwrap_or(share).min(half).max(1)
    }

    /// Whether the model reads images (`false` only when the provider said it does not).
    pub fn takes_images(&self) -> bool {
        self.input_modalities
            .as_ref()
            .is_none_or(|m| m.iter().any(|k| k == "image"))
    }

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

#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct ProviderRequest {
    pub provider: ProviderKind,
    pub url: String,
    pub headers: Map<String, Value>,
    /// The JSON text sent, written once from the history (issue 20: no `Value` tree of a long
    /// chat is built, copied or dropped), in pieces (issue 41); [`ProviderRequest::body_json`]
    /// parses it.
    pub body: RequestBody,
    /// How far the history limit went for this request (SPEC §5).
    #[serde(default)]
    pub compression_strength: CompressionStrength,
    /// The stored messages the history limit left out of this request or shortened in it: the
    /// chat shows them (issue 35). Not part of the request.
    #[serde(skip)]
    pub left_out: LeftOut,
    /// How this request was laid out in the chat's stability tiers (issue 40); the session
    /// keeps the tracker for its next request. Not part of the request.
    #[serde(skip)]
    pub tiers: Option<Box<TiersApplied>>,
}

/// Message ids the history limit left out of a request, and those it sent shortened.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeftOut {
    pub dropped: Vec<String>,
    pub shortened: Vec<String>,
}

impl LeftOut {
    pub fn is_empty(&self) -> bool {
        self.dropped.is_empty() && self.shortened.is_empty()
    }
}

impl ProviderRequest {
    /// The body parsed (the CLI's pretty print, tests, the last request shown to the user).
    pub fn body_json(&self) -> Value {
        serde_json::from_str(&self.body.text()).unwrap_or(Value::Null)
    }
}

impl PartialEq for ProviderRequest {
    fn eq(&self, other: &Self) -> bool {
        self.provider == other.provider
            && self.url == other.url
            && self.headers == other.headers
            && self.body == other.body
            && self.compression_strength == other.compression_strength
    }
}

pub struct RequestInput<'a> {
    pub provider: &'a ProviderConfig,
    pub thread: &'a ThreadParams,
    pub system_prompt: Option<&'a str>,
    pub tools: &'a [ToolSpec],
    pub history: &'a [ChatMessage],
    /// Tokens the history may take (`None`: no limit; only stage 3's repairs run).
    pub budget: Option<u64>,
    /// The chat's stability tiers (issue 40); `None`: the prompt and history as they are.
    pub tiers: Option<&'a crate::stability::Tracker>,
}

/// Builds the request; `Err` names what this provider cannot do yet.
/// The request for the history after the history limit (SPEC §5), which works on a copy.
pub fn build_request(input: &RequestInput) -> Result<ProviderRequest, HistoryLimitError> {
    let limited = limit_history_for(input.history, input.budget, Some(input.provider.kind))?;
    let history = &limited.messages;
    let mut request = match input.provider.kind {
        // The model in the page takes OpenAI chat requests (llama.cpp's server code).
        ProviderKind::OpenaiChat | ProviderKind::Local => openai_chat::openai_chat(input, history),
        ProviderKind::Anthropic => anthropic::anthropic(input, history),
        ProviderKind::Gemini => gemini::gemini(input, history),
        ProviderKind::OpenaiResponses => openai_responses::responses(input, history),
    };
    request.compression_strength = limited.strength;
    if limited.strength != CompressionStrength::Absent {
        request.left_out = left_out(input.history, history);
    }
    Ok(request)
}

/// What of `stored` the limited copy `sent` lacks, or holds changed (a diff sent as a tool
/// result is not a change; messages the model never sees are not counted).
fn left_out(stored: &[ChatMessage], sent: &[crate::history_limit::LimitedMessage]) -> LeftOut {
    use crate::history_limit::LimitedMessage;
    use crate::message::Role;
    let kept: rustc_hash::FxHashSet<&str> = sent.iter().map(|m| m.message_id.as_str()).collect();
    let originals: rustc_hash::FxHashMap<&str, &ChatMessage> =
        stored.iter().map(|m| (m.message_id.as_str(), m)).collect();
    let seen = |m: &ChatMessage| !m.is_ui_only() && m.role != Role::CompressionReport;
    LeftOut {
        dropped: stored
            .iter()
            .filter(|m| seen(m) && !kept.contains(m.message_id.as_str()))
            .map(|m| m.message_id.clone())
            .collect(),
        shortened: sent
            .iter()
            .filter_map(|m| match m {
                LimitedMessage::Changed(changed) => {
                    let original = originals.get(changed.message_id.as_str())?;
                    (original.role != Role::Diff && original.content != changed.content)
                        .then(|| changed.message_id.clone())
                }
                LimitedMessage::Stored(_) => None,
            })
            .collect(),
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
