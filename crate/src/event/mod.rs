//! The event stream (SPEC §3.1). Every event of a chat carries `seq`, rising by exactly 1; a
//! snapshot carries the current counter without incrementing it.

use crate::delta::{DeltaOp, Draft};
use crate::message::ChatMessage;
mod runtime;

pub use crate::queue::QueuedItemSummary;
pub use runtime::{ContextUsage, ErrorInfo, PauseReason, RetryStatus, Runtime, SubagentView};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct EventEnvelope {
    pub chat_id: String,
    pub seq: u64,
    #[serde(flatten)]
    pub event: Event,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    Snapshot {
        thread: Value,
        runtime: Runtime,
        messages: Vec<ChatMessage>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        draft: Option<Draft>,
    },
    StreamStarted {
        message_id: String,
    },
    StreamDelta {
        message_id: String,
        ops: Vec<DeltaOp>,
    },
    StreamFinished {
        message_id: String,
        finish_reason: String,
    },
    MessageAdded {
        message: ChatMessage,
        index: usize,
    },
    MessageUpdated {
        message_id: String,
        message: ChatMessage,
    },
    MessageRemoved {
        message_id: String,
    },
    MessagesTruncated {
        from_index: usize,
    },
    ThreadUpdated {
        patch: Map<String, Value>,
    },
    QueueUpdated {
        queue_size: usize,
        queued_items: Vec<QueuedItemSummary>,
    },
    RuntimeUpdated {
        #[serde(flatten)]
        runtime: Runtime,
    },
    PauseRequired {
        reasons: Vec<PauseReason>,
    },
    PauseCleared {},
    IdeToolRequired {
        tool_call_id: String,
        tool_name: String,
        args: Value,
    },
    /// Who decided about a tool call that needed no question (SPEC §8.4): the thread's rule
    /// (`auto` → approved, `deny` → denied). Decisions the user makes are stored as
    /// `event(tool_decision)` messages; these are shown live beside the call.
    ToolDecision {
        tool_call_id: String,
        tool_name: String,
        decision: String,
        source: String,
    },
    /// A line of a running tool's output (seed 004 ToolProgress): shown live, never stored —
    /// the tool's result holds the output once it ends.
    ToolProgress {
        tool_call_id: String,
        #[serde(default)]
        stream: String,
        text: String,
    },
    /// The chat started a subagent (issue 18): its child chat and what it was asked.
    SubagentSpawned {
        parent: String,
        child: String,
        tool_call_id: String,
        title: String,
        task: String,
    },
    /// A subagent's turn ended: `done`, `failed` or `stopped`, with its answer or reason.
    SubagentResult {
        parent: String,
        child: String,
        tool_call_id: String,
        outcome: String,
        text: String,
    },
    /// A request failed on the preferred model after its retries; the turn goes on with the next
    /// model of the chat's fallback list.
    ModelFallback {
        preferred: crate::thread::ModelRef,
        actual: crate::thread::ModelRef,
        reason: String,
    },
    Ack {
        client_request_id: String,
        accepted: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<Value>,
    },
}

impl Event {
    pub fn name(&self) -> &'static str {
        match self {
            Event::Snapshot { .. } => "snapshot",
            Event::StreamStarted { .. } => "stream_started",
            Event::StreamDelta { .. } => "stream_delta",
            Event::StreamFinished { .. } => "stream_finished",
            Event::MessageAdded { .. } => "message_added",
            Event::MessageUpdated { .. } => "message_updated",
            Event::MessageRemoved { .. } => "message_removed",
            Event::MessagesTruncated { .. } => "messages_truncated",
            Event::ThreadUpdated { .. } => "thread_updated",
            Event::QueueUpdated { .. } => "queue_updated",
            Event::RuntimeUpdated { .. } => "runtime_updated",
            Event::PauseRequired { .. } => "pause_required",
            Event::PauseCleared {} => "pause_cleared",
            Event::IdeToolRequired { .. } => "ide_tool_required",
            Event::ToolProgress { .. } => "tool_progress",
            Event::ToolDecision { .. } => "tool_decision",
            Event::SubagentSpawned { .. } => "subagent_spawned",
            Event::SubagentResult { .. } => "subagent_result",
            Event::ModelFallback { .. } => "model_fallback",
            Event::Ack { .. } => "ack",
        }
    }
}
