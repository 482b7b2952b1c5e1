//! Thread params (SPEC §2): a chat's settings, patched by `set_params` and persisted with it.
//! Unknown keys are kept in `extra`. `composer_draft` is the composer's unsent text.

use crate::error::Refusal;
use crate::provider::ProviderKind;
use crate::tagged::{self, Fields};
use litemap::LiteMap;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

pub const DEFAULT_MAX_TOOL_ROUNDS: u32 = 50;
/// How deep subagents nest below a root chat unless the thread says otherwise (issue 18).
pub const DEFAULT_MAX_SUBAGENT_DEPTH: u32 = 2;
/// Subagents one root turn may spawn in all unless the thread says otherwise.
pub const DEFAULT_MAX_SUBAGENTS: u32 = 8;

/// A model to answer with: a provider kind (configured in the engine) and a model name.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ModelRef {
    pub provider: ProviderKind,
    #[serde(default)]
    pub model: String,
}

/// What a chat's requests carry (issue 35): `agent` — the agent prompt, the workspace context
/// and the tools; `chat` — a short plain prompt and no tools (the workspace context only when
/// the chat asks for it); `edit_blocks` — no tools, the workspace and the edit-block format.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum PromptProfile {
    Agent,
    Chat,
    /// No tools; the workspace and the edit-block format in the prompt (issue 40).
    EditBlocks,
}

/// A tool's approval rule (SPEC §8.4).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ToolRule {
    Auto,
    Ask,
    Deny,
}

/// Read by hand (`tagged::Fields`: a derived `flatten` would buffer the object), written by
/// derive; a field added here is read in `from_fields` too (a round trip test checks it).
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct ThreadParams {
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub provider: ProviderKind,
    #[serde(default = "default_mode")]
    pub mode: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_budget: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_tokens_cap: Option<u64>,
    /// This chat's system prompt, replacing the host's (SPEC §7); `None`: the host's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// A system prompt that came with the chat from outside (an import, the workspace, a pull):
    /// shown to the user, never sent until they accept it (SECURITY F2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposed_system_prompt: Option<String>,
    #[serde(default = "default_max_tool_rounds")]
    pub max_tool_rounds: u32,
    #[serde(default)]
    pub tool_policy: LiteMap<String, ToolRule>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_chat_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_type: Option<String>,
    /// How far below its root this chat is: 0 for a root, its parent's + 1 for a subagent.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub depth: u32,
    /// How deep subagents may nest below the root (`None`: `DEFAULT_MAX_SUBAGENT_DEPTH`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_subagent_depth: Option<u32>,
    /// Subagents one root turn may spawn (`None`: `DEFAULT_MAX_SUBAGENTS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_subagents: Option<u32>,
    /// The tools this chat may use, when a parent gave it a subset (`None`: every tool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_tools: Option<Vec<String>>,
    /// Models the turn goes on with, in order, when the chat's own fails with an error another
    /// model may not have (overloaded, rate-limited, failing, missing, too small a window).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallback_models: Vec<ModelRef>,
    #[serde(default)]
    pub composer_draft: String,
    /// The chat answers with its own `provider` and `model`, not the one Settings make active
    /// (a subagent asked for a model, or the user chose one for this chat).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pinned_model: bool,
    /// The workspace (`palaver serve`'s `workspace_id`) this chat was last used with: its copy
    /// is kept there and nowhere else (SECURITY F4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_id: Option<String>,
    /// The chat's prompt profile, when the user chose one (else the provider's: see
    /// `ChatSession::prompt_profile`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_profile: Option<PromptProfile>,
    /// A plain chat sends the workspace's instructions and file list only when this is set.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub workspace_context: bool,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn default_mode() -> String {
    "agent".to_string()
}

fn default_max_tool_rounds() -> u32 {
    DEFAULT_MAX_TOOL_ROUNDS
}

impl Default for ThreadParams {
    fn default() -> Self {
        serde_json::from_value(Value::Object(Map::new())).unwrap_or_else(|_| ThreadParams {
            title: String::new(),
            model: String::new(),
            provider: ProviderKind::default(),
            mode: default_mode(),
            temperature: None,
            max_tokens: None,
            reasoning_effort: None,
            thinking_budget: None,
            context_tokens_cap: None,
            system_prompt: None,
            proposed_system_prompt: None,
            max_tool_rounds: DEFAULT_MAX_TOOL_ROUNDS,
            tool_policy: LiteMap::new(),
            parent_id: None,
            root_chat_id: None,
            link_type: None,
            depth: 0,
            max_subagent_depth: None,
            max_subagents: None,
            allowed_tools: None,
            fallback_models: Vec::new(),
            composer_draft: String::new(),
            pinned_model: false,
            workspace_id: None,
            prompt_profile: None,
            workspace_context: false,
            extra: Map::new(),
        })
    }
}

impl<'de> Deserialize<'de> for ThreadParams {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        tagged::read(deserializer, ThreadParams::from_fields)
    }
}

impl ThreadParams {
    fn from_fields(mut f: Fields) -> Result<Self, serde_json::Error> {
        Ok(ThreadParams {
            title: f.or_default("title")?,
            model: f.or_default("model")?,
            provider: f.or_default("provider")?,
            mode: f.or_else("mode", default_mode)?,
            temperature: f.or_default("temperature")?,
            max_tokens: f.or_default("max_tokens")?,
            reasoning_effort: f.or_default("reasoning_effort")?,
            thinking_budget: f.or_default("thinking_budget")?,
            context_tokens_cap: f.or_default("context_tokens_cap")?,
            system_prompt: f.or_default("system_prompt")?,
            proposed_system_prompt: f.or_default("proposed_system_prompt")?,
            max_tool_rounds: f.or_else("max_tool_rounds", default_max_tool_rounds)?,
            tool_policy: f.or_default("tool_policy")?,
            parent_id: f.or_default("parent_id")?,
            root_chat_id: f.or_default("root_chat_id")?,
            link_type: f.or_default("link_type")?,
            depth: f.or_default("depth")?,
            max_subagent_depth: f.or_default("max_subagent_depth")?,
            max_subagents: f.or_default("max_subagents")?,
            allowed_tools: f.or_default("allowed_tools")?,
            fallback_models: f.or_default("fallback_models")?,
            composer_draft: f.or_default("composer_draft")?,
            pinned_model: f.or_default("pinned_model")?,
            workspace_id: f.or_default("workspace_id")?,
            prompt_profile: f.or_default("prompt_profile")?,
            workspace_context: f.or_default("workspace_context")?,
            extra: f.rest(),
        })
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// Applies a shallow patch; a patch that would give a field the wrong type is refused whole.
    pub fn patched(&self, patch: &Map<String, Value>) -> Result<ThreadParams, Refusal> {
        let mut value = self.to_json();
        if let Value::Object(map) = &mut value {
            for (key, v) in patch {
                // `null` unsets a key: an optional one becomes absent, another its default.
                if v.is_null() {
                    map.remove(key);
                } else {
                    map.insert(key.clone(), v.clone());
                }
            }
        }
        serde_json::from_value(value).map_err(|e| Refusal::InvalidCommand {
            reason: format!("bad params patch: {e}"),
        })
    }

    /// Whether this chat may use a tool (a subagent was given a subset).
    pub fn allows_tool(&self, name: &str) -> bool {
        self.allowed_tools
            .as_ref()
            .is_none_or(|allowed| allowed.iter().any(|t| t == name))
    }

    /// The rule for a tool (SECURITY F2): the host's rule — its settings by name, then `*`, then
    /// SPEC §8.4's default (`read_only`: a server the user trusts marks the tool so) — made
    /// stricter, never looser, by this chat's own policy. Approval never comes from chat data.
    pub fn rule_for(&self, host: &ToolRules, tool_name: &str, read_only: bool) -> ToolRule {
        let host_rule =
            lookup(host, tool_name).unwrap_or_else(|| default_rule(tool_name, read_only));
        match lookup(&self.tool_policy, tool_name) {
            Some(chat_rule) => host_rule.stricter(chat_rule),
            None => host_rule,
        }
    }
}

/// The approval rules the host sets (Settings → tool rules): by tool name, `*` for the rest.
pub type ToolRules = LiteMap<String, ToolRule>;

fn lookup(rules: &ToolRules, tool_name: &str) -> Option<ToolRule> {
    rules.get(tool_name).or_else(|| rules.get("*")).copied()
}

impl ToolRule {
    /// The stricter of two rules: deny over ask over auto.
    pub fn stricter(self, other: ToolRule) -> ToolRule {
        let rank = |rule: ToolRule| match rule {
            ToolRule::Auto => 0,
            ToolRule::Ask => 1,
            ToolRule::Deny => 2,
        };
        if rank(other) > rank(self) {
            other
        } else {
            self
        }
    }
}

/// The thread params that never come with a chat from outside (SECURITY F2): the steering params
/// but the chat's place among others (`parent_id`, `root_chat_id`, `link_type`, `depth`) and its
/// unsent text.
fn dropped_from_outside(key: &str) -> bool {
    STEERING_PARAMS.contains(&key)
        && !matches!(
            key,
            "parent_id" | "root_chat_id" | "link_type" | "depth" | "composer_draft"
        )
}

/// A thread as it may come from outside — an import, a restore from the workspace, a sync pull
/// (SECURITY F2): its own keys, but what steers the agent is this browser's (`local`, the thread
/// the chat has here, or nothing for a new chat). A system prompt the local thread does not have
/// becomes `proposed_system_prompt`: shown, and used only once the user accepts it.
pub fn from_outside(outside: &Value, local: &Value) -> Value {
    let empty = Map::new();
    let outside = outside.as_object().unwrap_or(&empty);
    let local = local.as_object().unwrap_or(&empty);
    let mut thread: Map<String, Value> = outside
        .iter()
        .filter(|(key, _)| !dropped_from_outside(key) && key.as_str() != "proposed_system_prompt")
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    for (key, value) in local {
        if dropped_from_outside(key) || key == "proposed_system_prompt" {
            thread.insert(key.clone(), value.clone());
        }
    }
    let proposed = outside
        .get("system_prompt")
        .or_else(|| outside.get("proposed_system_prompt"))
        .filter(|prompt| prompt.as_str().is_some_and(|p| !p.is_empty()))
        .filter(|prompt| local.get("system_prompt") != Some(*prompt));
    if let Some(prompt) = proposed {
        thread.insert("proposed_system_prompt".into(), prompt.clone());
    }
    Value::Object(thread)
}

/// The thread params a tool's `session_metadata` may not set (SPEC §8.3): what steers the agent.
pub const STEERING_PARAMS: [&str; 24] = [
    "model",
    "provider",
    "mode",
    "temperature",
    "max_tokens",
    "reasoning_effort",
    "thinking_budget",
    "context_tokens_cap",
    "system_prompt",
    "proposed_system_prompt",
    "pinned_model",
    "max_tool_rounds",
    "tool_policy",
    "parent_id",
    "root_chat_id",
    "link_type",
    "composer_draft",
    "depth",
    "max_subagent_depth",
    "max_subagents",
    "allowed_tools",
    "fallback_models",
    "prompt_profile",
    "workspace_context",
];

/// SPEC §8.4's defaults; an MCP server's tool asks, unless a server the user trusts marks it
/// read-only (issue 17, SECURITY F8: another program's tool may do anything, and its annotations
/// are its own word).
pub fn default_rule(tool_name: &str, read_only: bool) -> ToolRule {
    match tool_name {
        "write_file" | "edit_file" | "fetch_url" | "run_command" => ToolRule::Ask,
        name if name.starts_with(crate::tools::MCP_PREFIX) && !read_only => ToolRule::Ask,
        _ => ToolRule::Auto,
    }
}
