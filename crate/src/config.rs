//! `EngineConfig`: what the host configures the engine with (providers, prompt, tools, retry,
//! compaction), and `IdGen`, the deterministic ids made from its prefix. A leaf of the core:
//! sessions read it, nothing here reads a session.

use crate::provider::ProviderKind;
use crate::request::ProviderConfig;
use crate::retry::RetryPolicy;
use crate::thread::{ModelRef, ToolRules};
use crate::tools::ToolSpec;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct EngineConfig {
    /// Prefix of every id the engine makes; the host picks it unique (e.g. random per tab).
    #[serde(default)]
    pub id_prefix: String,
    #[serde(default = "default_stall_timeout")]
    pub stall_timeout_ms: u64,
    #[serde(default)]
    pub providers: Vec<ProviderConfig>,
    #[serde(default)]
    pub system_prompt: Option<String>,
    #[serde(default)]
    pub workspace_tools: Vec<ToolSpec>,
    #[serde(default)]
    pub host_tools: Vec<ToolSpec>,
    #[serde(default)]
    pub retry_seed: u64,
    #[serde(default = "default_n_ctx")]
    pub default_n_ctx: u64,
    /// Attempts and first backoff of provider requests (SPEC §6.5).
    #[serde(default)]
    pub retry: RetryPolicy,
    /// Compaction by the model starts when the estimate passes this fraction of n_ctx (SPEC §5);
    /// `null` turns it off.
    #[serde(default = "default_compact_at")]
    pub compact_at: Option<f64>,
    /// How long a request may go without its first byte; defaults to `stall_timeout_ms`.
    #[serde(default)]
    pub first_byte_timeout_ms: Option<u64>,
    /// The user's approval rules (Settings): the only source of a tool's rule; a chat's own
    /// policy may only make it stricter (SECURITY F2).
    #[serde(default)]
    pub tool_rules: ToolRules,
    /// The provider Settings make active: a chat answers with it (and its configured model)
    /// unless the chat pinned a model of its own (`ThreadParams::pinned_model`). `None`: each
    /// chat's own `provider`/`model` (the engine's behaviour before settings were global).
    #[serde(default)]
    pub active_provider: Option<ProviderKind>,
    /// Settings' fallback models, for chats without a list of their own (issue 18).
    #[serde(default)]
    pub fallback_models: Vec<ModelRef>,
    /// The plain chat's system prompt (`prompt::assemble_chat`), and the same with the
    /// workspace context for chats that ask for it; `None`: the default chat prompt.
    #[serde(default)]
    pub chat_prompt: Option<String>,
    #[serde(default)]
    pub chat_workspace_prompt: Option<String>,
    /// The prompt of a model that changes files with edit blocks (`prompt::assemble_edit_blocks`);
    /// `None`: the block format alone.
    #[serde(default)]
    pub edit_blocks_prompt: Option<String>,
}

fn default_stall_timeout() -> u64 {
    120_000
}

fn default_compact_at() -> Option<f64> {
    Some(0.7)
}

fn default_n_ctx() -> u64 {
    128_000
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            id_prefix: String::new(),
            stall_timeout_ms: default_stall_timeout(),
            providers: Vec::new(),
            system_prompt: None,
            workspace_tools: Vec::new(),
            host_tools: Vec::new(),
            retry_seed: 0,
            default_n_ctx: default_n_ctx(),
            retry: RetryPolicy::default(),
            first_byte_timeout_ms: None,
            compact_at: default_compact_at(),
            tool_rules: ToolRules::new(),
            active_provider: None,
            fallback_models: Vec::new(),
            chat_prompt: None,
            chat_workspace_prompt: None,
            edit_blocks_prompt: None,
        }
    }
}

impl EngineConfig {
    pub fn provider_for(&self, kind: ProviderKind) -> Option<&ProviderConfig> {
        self.providers.iter().find(|p| p.kind == kind)
    }
}

/// Deterministic ids: the host's prefix, a kind letter, a counter.
#[derive(Debug, Default)]
pub struct IdGen {
    prefix: String,
    counter: u64,
}

impl IdGen {
    pub fn new(prefix: &str) -> Self {
        IdGen {
            prefix: prefix.to_string(),
            counter: 0,
        }
    }

    pub fn next(&mut self, kind: &str) -> String {
        self.counter += 1;
        format!("{}{kind}{}", self.prefix, self.counter)
    }
}
