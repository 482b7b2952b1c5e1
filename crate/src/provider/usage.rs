//! Usage normalization per provider (SPEC §6.4): where each provider reports each number.

use crate::message::Usage;
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
