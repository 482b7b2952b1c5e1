//! The runtime summary sent in snapshots and `runtime_updated` (SPEC §2, §3.1, §5).

use crate::event::{PauseReason, QueuedItemSummary};
use crate::retry::ErrorClass;
use crate::session::state::ErrorInfo;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ContextUsage {
    pub estimated_tokens: u64,
    pub n_ctx: u64,
    pub message_count: usize,
    pub pressure: f64,
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
    pub storage_error: Option<String>,
    /// How far the history limit went for the last request sent (SPEC §5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression_strength: Option<crate::history_limit::CompressionStrength>,
    /// A provider request being retried: the countdown and its cause (SPEC §6.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryStatus>,
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

impl Runtime {
    /// The runtime without its queue part, which travels in `queue_updated` instead.
    pub fn without_queue(&self) -> Runtime {
        Runtime {
            queue_size: 0,
            queued_items: Vec::new(),
            ..self.clone()
        }
    }
}
