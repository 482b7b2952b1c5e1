//! The event stream (SPEC §3.1). Every event of a chat carries `seq`, rising by exactly 1; a
//! snapshot carries the current counter without incrementing it.

use crate::delta::{DeltaOp, Draft};
use crate::message::ChatMessage;
mod runtime;

pub use crate::queue::QueuedItemSummary;
use crate::tagged::{self, Fields};
pub use runtime::{
    ContextUsage, ErrorInfo, ErrorSource, LeftOutCounts, PauseReason, PromptTiers, RetryStatus,
    Runtime, SubagentView, ToolCallView,
};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// Read by hand (`tagged::Fields`, see there why), written by derive.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct EventEnvelope {
    pub chat_id: String,
    pub seq: u64,
    #[serde(flatten)]
    pub event: Event,
}

/// A chat's `snapshot` envelope borrowed from what holds the chat, written as the owned one is
/// (the same text, tested) without a copy of its messages: a 5 000-message chat's copy doubled
/// the wasm memory its opening needs (issue 41).
#[derive(Serialize)]
pub struct SnapshotView<'a> {
    pub chat_id: &'a str,
    pub seq: u64,
    #[serde(rename = "type")]
    kind: &'static str,
    pub thread: Value,
    pub runtime: Runtime,
    pub messages: Windowed<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub draft: Option<&'a Draft>,
}

/// A chat's messages, those before `light_before` written light (`LightMessage`).
pub struct Windowed<'a> {
    pub messages: &'a [ChatMessage],
    pub light_before: usize,
}

impl Serialize for Windowed<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = serializer.serialize_seq(Some(self.messages.len()))?;
        for (i, message) in self.messages.iter().enumerate() {
            if i < self.light_before {
                seq.serialize_element(&LightMessage(message))?;
            } else {
                seq.serialize_element(message)?;
            }
        }
        seq.end()
    }
}

/// A message without its texts, for a page that draws a long chat's end: what finds it and
/// places it (id, role, its tool calls' ids and names, the call it answers, its time and
/// usage) and `light: true`. The page asks for the whole message when it draws it.
struct LightMessage<'a>(&'a ChatMessage);

impl Serialize for LightMessage<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let m = self.0;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("message_id", &m.message_id)?;
        map.serialize_entry("role", &m.role)?;
        if let Some(calls) = &m.tool_calls {
            let calls: Vec<Value> = calls
                .iter()
                .map(|c| serde_json::json!({"id": c.id, "function": {"name": c.function.name}}))
                .collect();
            map.serialize_entry("tool_calls", &calls)?;
        }
        if let Some(id) = &m.tool_call_id {
            map.serialize_entry("tool_call_id", id)?;
        }
        if let Some(usage) = &m.usage {
            map.serialize_entry("usage", usage)?;
        }
        if let Some(at) = m.created_at_ms {
            map.serialize_entry("created_at_ms", &at)?;
        }
        map.serialize_entry("light", &true)?;
        map.end()
    }
}

impl<'a> SnapshotView<'a> {
    pub fn new(
        chat_id: &'a str,
        seq: u64,
        thread: Value,
        runtime: Runtime,
        messages: &'a [ChatMessage],
        draft: Option<&'a Draft>,
    ) -> Self {
        SnapshotView {
            chat_id,
            seq,
            kind: "snapshot",
            thread,
            runtime,
            messages: Windowed {
                messages,
                light_before: 0,
            },
            draft,
        }
    }

    /// Only the last `window` messages whole; those before them light (`LightMessage`).
    pub fn window(mut self, window: usize) -> Self {
        self.messages.light_before = self.messages.messages.len().saturating_sub(window);
        self
    }
}

#[derive(Serialize, Clone, Debug, PartialEq)]
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
        /// The turn's phase after these ops (`thinking` until the answer has text, `streaming`).
        phase: String,
        /// The answer's tokens so far (`runtime.context_usage.draft_tokens`).
        draft_tokens: u64,
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

impl<'de> Deserialize<'de> for EventEnvelope {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        tagged::read(deserializer, |mut f| {
            Ok(EventEnvelope {
                chat_id: f.take("chat_id")?,
                seq: f.take("seq")?,
                event: Event::from_fields(f)?,
            })
        })
    }
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        tagged::read(deserializer, Event::from_fields)
    }
}

impl Event {
    const VARIANTS: &'static [&'static str] = &[
        "snapshot",
        "stream_started",
        "stream_delta",
        "stream_finished",
        "message_added",
        "message_updated",
        "message_removed",
        "messages_truncated",
        "thread_updated",
        "queue_updated",
        "runtime_updated",
        "pause_required",
        "pause_cleared",
        "ide_tool_required",
        "tool_decision",
        "tool_progress",
        "subagent_spawned",
        "subagent_result",
        "model_fallback",
        "ack",
    ];

    fn from_fields(mut f: Fields) -> Result<Self, serde_json::Error> {
        let tag = f.tag("type")?;
        Ok(match tag.as_str() {
            "snapshot" => Event::Snapshot {
                thread: f.take("thread")?,
                runtime: f.take("runtime")?,
                messages: f.take("messages")?,
                draft: f.or_default("draft")?,
            },
            "stream_started" => Event::StreamStarted {
                message_id: f.take("message_id")?,
            },
            "stream_delta" => Event::StreamDelta {
                message_id: f.take("message_id")?,
                ops: f.take("ops")?,
                phase: f.or_default("phase")?,
                draft_tokens: f.or_default("draft_tokens")?,
            },
            "stream_finished" => Event::StreamFinished {
                message_id: f.take("message_id")?,
                finish_reason: f.take("finish_reason")?,
            },
            "message_added" => Event::MessageAdded {
                message: f.take("message")?,
                index: f.take("index")?,
            },
            "message_updated" => Event::MessageUpdated {
                message_id: f.take("message_id")?,
                message: f.take("message")?,
            },
            "message_removed" => Event::MessageRemoved {
                message_id: f.take("message_id")?,
            },
            "messages_truncated" => Event::MessagesTruncated {
                from_index: f.take("from_index")?,
            },
            "thread_updated" => Event::ThreadUpdated {
                patch: f.take("patch")?,
            },
            "queue_updated" => Event::QueueUpdated {
                queue_size: f.take("queue_size")?,
                queued_items: f.take("queued_items")?,
            },
            "runtime_updated" => Event::RuntimeUpdated {
                runtime: f.rest_as()?,
            },
            "pause_required" => Event::PauseRequired {
                reasons: f.take("reasons")?,
            },
            "pause_cleared" => Event::PauseCleared {},
            "ide_tool_required" => Event::IdeToolRequired {
                tool_call_id: f.take("tool_call_id")?,
                tool_name: f.take("tool_name")?,
                args: f.take("args")?,
            },
            "tool_decision" => Event::ToolDecision {
                tool_call_id: f.take("tool_call_id")?,
                tool_name: f.take("tool_name")?,
                decision: f.take("decision")?,
                source: f.take("source")?,
            },
            "tool_progress" => Event::ToolProgress {
                tool_call_id: f.take("tool_call_id")?,
                stream: f.or_default("stream")?,
                text: f.take("text")?,
            },
            "subagent_spawned" => Event::SubagentSpawned {
                parent: f.take("parent")?,
                child: f.take("child")?,
                tool_call_id: f.take("tool_call_id")?,
                title: f.take("title")?,
                task: f.take("task")?,
            },
            "subagent_result" => Event::SubagentResult {
                parent: f.take("parent")?,
                child: f.take("child")?,
                tool_call_id: f.take("tool_call_id")?,
                outcome: f.take("outcome")?,
                text: f.take("text")?,
            },
            "model_fallback" => Event::ModelFallback {
                preferred: f.take("preferred")?,
                actual: f.take("actual")?,
                reason: f.take("reason")?,
            },
            "ack" => Event::Ack {
                client_request_id: f.take("client_request_id")?,
                accepted: f.take("accepted")?,
                reason: f.or_default("reason")?,
            },
            other => return Err(tagged::unknown_variant(other, Self::VARIANTS)),
        })
    }

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
