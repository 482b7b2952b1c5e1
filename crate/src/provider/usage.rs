//! Usage normalization per provider (SPEC §6.4): where each provider reports each number.

use crate::message::Usage;
use serde_json::{Map, Value};

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

/// Anthropic Messages, from the merged `message_start` + `message_delta` usage: the prompt is
/// every input token, cached or not (`input_tokens` + cache read + cache creation).
pub fn anthropic(usage: &Map<String, Value>) -> Usage {
    let number = |key: &str| usage.get(key).and_then(Value::as_u64);
    let input = number("input_tokens");
    let cache_read = number("cache_read_input_tokens");
    let cache_creation = number("cache_creation_input_tokens");
    Usage {
        prompt_tokens: input.map(|n| n + cache_read.unwrap_or(0) + cache_creation.unwrap_or(0)),
        completion_tokens: number("output_tokens"),
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
