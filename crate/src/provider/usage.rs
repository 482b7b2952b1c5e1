//! Usage normalization per provider (SPEC §6.4): where each provider reports each number.

use crate::message::Usage;
use serde::Deserialize;
use serde_json::Value;

fn number(value: &Value, path: &[&str]) -> Option<u64> {
    path.iter().try_fold(value, |v, key| v.get(*key))?.as_u64()
}

/// OpenAI Chat Completions and compatible servers (DeepSeek, OpenRouter, xAI, Groq, …).
pub fn openai_chat(usage: &Value) -> Usage {
    Usage {
        prompt_tokens: number(usage, &["prompt_tokens"]),
        completion_tokens: number(usage, &["completion_tokens"]),
        cache_read_tokens: number(usage, &["prompt_tokens_details", "cached_tokens"])
            .or_else(|| number(usage, &["prompt_cache_hit_tokens"]))
            .or_else(|| number(usage, &["cache_read_input_tokens"])),
        cache_creation_tokens: number(usage, &["cache_creation_input_tokens"]),
        reasoning_tokens: number(usage, &["completion_tokens_details", "reasoning_tokens"]),
        total_tokens: number(usage, &["total_tokens"]),
    }
}

/// What `anthropic` reads of an Anthropic usage report: four counts, each as it came (a
/// report's other parts — `iterations`, `cache_creation`, `server_tool_use` — are skipped
/// unread: building them as values was a third of a short stream, issue 20). Reports merge
/// field by field: a later field that is absent or null keeps the earlier one.
#[derive(Deserialize, Debug, Default, Clone)]
pub struct AnthropicReport {
    #[serde(default)]
    input_tokens: Option<Value>,
    #[serde(default)]
    cache_read_input_tokens: Option<Value>,
    #[serde(default)]
    cache_creation_input_tokens: Option<Value>,
    #[serde(default)]
    output_tokens: Option<Value>,
}

impl AnthropicReport {
    /// The report in a usage object already read as a `Value`; `None` when it is not an object.
    pub fn from_value(usage: &Value) -> Option<Self> {
        let field = |key: &str| usage.get(key).filter(|v| !v.is_null()).cloned();
        usage.is_object().then(|| AnthropicReport {
            input_tokens: field("input_tokens"),
            cache_read_input_tokens: field("cache_read_input_tokens"),
            cache_creation_input_tokens: field("cache_creation_input_tokens"),
            output_tokens: field("output_tokens"),
        })
    }

    pub fn merge(&mut self, later: AnthropicReport) {
        fn take(slot: &mut Option<Value>, later: Option<Value>) {
            if later.is_some() {
                *slot = later;
            }
        }
        take(&mut self.input_tokens, later.input_tokens);
        take(
            &mut self.cache_read_input_tokens,
            later.cache_read_input_tokens,
        );
        take(
            &mut self.cache_creation_input_tokens,
            later.cache_creation_input_tokens,
        );
        take(&mut self.output_tokens, later.output_tokens);
    }
}

/// Anthropic Messages, from the merged `message_start` + `message_delta` usage: the prompt is
/// every input token, cached or not (`input_tokens` + cache read + cache creation).
pub fn anthropic(usage: &AnthropicReport) -> Usage {
    let number = |value: &Option<Value>| value.as_ref().and_then(Value::as_u64);
    let input = number(&usage.input_tokens);
    let cache_read = number(&usage.cache_read_input_tokens);
    let cache_creation = number(&usage.cache_creation_input_tokens);
    Usage {
        prompt_tokens: input.map(|n| n + cache_read.unwrap_or(0) + cache_creation.unwrap_or(0)),
        completion_tokens: number(&usage.output_tokens),
        cache_read_tokens: cache_read,
        cache_creation_tokens: cache_creation,
        reasoning_tokens: None,
        total_tokens: None,
    }
}

/// Gemini `usageMetadata` (cumulative: each report is the total so far).
pub fn gemini(usage: &Value) -> Usage {
    Usage {
        prompt_tokens: number(usage, &["promptTokenCount"]),
        completion_tokens: number(usage, &["candidatesTokenCount"]),
        cache_read_tokens: number(usage, &["cachedContentTokenCount"]),
        cache_creation_tokens: None,
        reasoning_tokens: number(usage, &["thoughtsTokenCount"]),
        total_tokens: number(usage, &["totalTokenCount"]),
    }
}
