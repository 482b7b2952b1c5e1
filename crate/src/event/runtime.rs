//! The runtime summary sent in snapshots and `runtime_updated` (SPEC §2, §3.1, §5), and the
//! parts it is made of: the error that ended a turn, the pause reasons, the retry countdown.

use crate::plan::CurrentPlan;
use crate::queue::QueuedItemSummary;
use crate::retry::ErrorClass;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One reason a round paused for approval (SPEC §8.4).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct PauseReason {
    pub tool_call_id: String,
    pub tool_name: String,
    pub args: Value,
    pub rule: String,
}

/// What ended a turn in `error` (SPEC §2.4): the kind (`llm_error`, `stream_error`,
/// `max_tool_rounds`), the provider's or engine's code, its words, and whether retrying may help.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ErrorInfo {
    pub kind: String,
    pub code: String,
    pub message: String,
    pub retryable: bool,
    /// The class the UI shows a remedy for (SECURITY D24).
    #[serde(default)]
    pub class: ErrorClass,
    /// How many attempts the request got before giving up (0: not a provider request).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub attempts: u32,
    /// Who said what `message` says: the provider (its own words), the app (its own checks, or
    /// what it saw of a stream), or the connection (the browser could not reach the provider).
    #[serde(default, skip_serializing_if = "ErrorSource::is_provider")]
    pub source: ErrorSource,
}

/// Who an error's words are from: the page says so (issue 35: the app never speaks as the
/// provider).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum ErrorSource {
    #[default]
    Provider,
    App,
    Connection,
}

impl ErrorSource {
    pub fn is_provider(&self) -> bool {
        *self == ErrorSource::Provider
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ContextUsage {
    pub estimated_tokens: u64,
    pub n_ctx: u64,
    pub message_count: usize,
    pub pressure: f64,
    /// The answer streaming now, counted as the history is: the gauge shows
    /// `estimated_tokens + draft_tokens` while it streams (it travels in `stream_delta`).
    #[serde(default)]
    pub draft_tokens: u64,
    /// `n_ctx` is the window a provider reported when it refused a prompt (the page keeps it
    /// in the provider's settings).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub learned: bool,
    /// The answer's limit the next request carries, kept free in the window.
    #[serde(default)]
    pub output_tokens: u64,
    /// What the history limit left out of the last request sent (the gauge says it).
    #[serde(default, skip_serializing_if = "LeftOutCounts::is_empty")]
    pub left_out: LeftOutCounts,
}

/// How many messages the history limit left out of a request, and how many tool results it
/// sent shortened.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LeftOutCounts {
    pub dropped: usize,
    pub shortened: usize,
}

impl LeftOutCounts {
    pub fn is_empty(&self) -> bool {
        self.dropped == 0 && self.shortened == 0
    }

    pub fn total(&self) -> usize {
        self.dropped + self.shortened
    }
}

/// A tool call of the current turn and where it stands (`ChatSession::tool_calls`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ToolCallView {
    pub id: String,
    pub name: String,
    pub status: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Runtime {
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorInfo>,
    #[serde(default)]
    pub pause_reasons: Vec<PauseReason>,
    #[serde(default)]
    pub queue_size: usize,
    #[serde(default)]
    pub queued_items: Vec<QueuedItemSummary>,
    /// The queued commands wait since a Stop, until `resume_queue` or a new command.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub queue_held: bool,
    pub context_usage: ContextUsage,
    #[serde(default)]
    pub is_compressing: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression_phase: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_error: Option<String>,
    /// How far the history limit went for the last request sent (SPEC §5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression_strength: Option<crate::history_limit::CompressionStrength>,
    /// A provider request being retried: the countdown and its cause (SPEC §6.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryStatus>,
    /// A turn is under way (generating, running tools, paused or waiting for the IDE): the page
    /// shows Stop instead of Send. The one place that says which states are busy.
    #[serde(default)]
    pub busy: bool,
    /// The current plan with its updates (SPEC §8.2), as the page shows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<CurrentPlan>,
    /// In `waiting_user_input`: the questions of the `ask_questions` call the turn waits on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub questions: Option<Vec<String>>,
    /// The subagents this chat started (issue 18), as they stand: the page's subagent tree.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subagents: Vec<SubagentView>,
    /// In `waiting_user_input` after `wait_agents`: the subagents the turn waits for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting_for_agents: Vec<String>,
    /// The turn's phase (seed 004): `thinking`, `streaming`, `working`, `compacting` or `done`
    /// (it changes within `generating` through `stream_delta`).
    #[serde(default)]
    pub phase: String,
    /// What the user can do now: `send` or `queue`, `stop`, `regenerate`, `answer`, `approve`,
    /// `reject`, `resume_queue` (the page offers exactly these).
    #[serde(default)]
    pub offers: Vec<String>,
    /// The current turn's tool calls with their status.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallView>,
    /// The model the next request asks: the chat's pinned one, else Settings' active provider
    /// with its model (each answer records the model that did answer, as the provider said).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<crate::thread::ModelRef>,
    /// What the next request carries: the agent's prompt and tools, or a plain chat's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_profile: Option<crate::thread::PromptProfile>,
    /// How the last chat request was laid out in stability tiers (issue 40, seed 002's HUD).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tiers: Option<PromptTiers>,
    /// While `thinking`: how far the server has read the prompt, where it says (llama.cpp).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_progress: Option<crate::provider::PromptProgress>,
}

/// The last request's tiers: estimated tokens of each, and what the update after it moved.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct PromptTiers {
    pub l0: u64,
    pub l1: u64,
    pub l2: u64,
    pub l3: u64,
    pub active: u64,
    /// The most stable tier whose content changed with that request (`null`: none did).
    #[serde(default)]
    pub broken: Option<crate::stability::Tier>,
    #[serde(default)]
    pub promoted: usize,
    #[serde(default)]
    pub demoted: usize,
    #[serde(default)]
    pub removed: usize,
}

impl PromptTiers {
    pub fn of(tokens: [u64; 5], changes: &crate::stability::Changes) -> Self {
        let [l0, l1, l2, l3, active] = tokens;
        PromptTiers {
            l0,
            l1,
            l2,
            l3,
            active,
            broken: changes.broken,
            promoted: changes.promoted.len(),
            demoted: changes.demoted.len(),
            removed: changes.removed.len(),
        }
    }
}

/// A subagent as its parent shows it: what it was asked, where it is, what it cost.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct SubagentView {
    /// The child chat (open it to see the whole conversation).
    pub chat_id: String,
    pub title: String,
    pub task: String,
    /// The parent's `spawn_agent` call.
    pub tool_call_id: String,
    /// `queued` (over the cap of running subagents), `running`, `paused` (a call waits for the
    /// user's approval), `waiting` (it asked the user), `done`, `failed` or `stopped`.
    pub status: String,
    #[serde(default)]
    pub model: String,
    /// Tokens its requests used (prompt + completion, as the provider reported).
    #[serde(default)]
    pub tokens: u64,
    pub started_at_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at_ms: Option<u64>,
    /// Its calls waiting for approval: approving them here or in the child is the same.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pause_reasons: Vec<PauseReason>,
}

/// `attempt` of `max_attempts` is next (waiting until `at_ms`) or under way (`at_ms` absent).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct RetryStatus {
    pub attempt: u32,
    pub max_attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_ms: Option<u64>,
    pub class: ErrorClass,
    pub code: String,
    pub message: String,
}

/// The part of a runtime that other events carry (`Runtime::take_carried`).
pub struct Carried {
    pub queue_size: usize,
    pub queued_items: Vec<QueuedItemSummary>,
    draft_tokens: u64,
    streaming: bool,
}

impl Runtime {
    /// Takes out what other events carry — the queue (`queue_updated`), the answer's tokens and
    /// thinking turning into streaming (`stream_delta`) — so a change in those alone does not
    /// make a `runtime_updated` of its own; `restore_carried` puts them back.
    pub fn take_carried(&mut self) -> Carried {
        let streaming = self.phase == "streaming";
        if streaming {
            self.phase = "thinking".into();
        }
        Carried {
            queue_size: std::mem::take(&mut self.queue_size),
            queued_items: std::mem::take(&mut self.queued_items),
            draft_tokens: std::mem::take(&mut self.context_usage.draft_tokens),
            streaming,
        }
    }

    pub fn restore_carried(&mut self, carried: Carried) {
        self.queue_size = carried.queue_size;
        self.queued_items = carried.queued_items;
        self.context_usage.draft_tokens = carried.draft_tokens;
        if carried.streaming {
            self.phase = "streaming".into();
        }
    }

    /// What a `stream_delta` says of the runtime.
    pub fn apply_live(&mut self, phase: &str, draft_tokens: u64) {
        self.phase = phase.to_string();
        self.context_usage.draft_tokens = draft_tokens;
    }
}
