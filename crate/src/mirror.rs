//! `ChatMirror`: what a subscriber holds — a snapshot with the events after it applied in order
//! (SPEC §3.1). The conformance suite checks after every step that it equals the engine's own
//! snapshot; the JS side mirrors the same rules.

use crate::delta::Draft;
use crate::event::{Event, EventEnvelope};
use crate::message::ChatMessage;
use crate::session::Runtime;
use serde_json::Value;
use thiserror::Error;

#[derive(Error, Debug, Clone, PartialEq, Eq)]
pub enum ViewError {
    #[error("event seq {got} after {last}: a gap; ask for a new snapshot")]
    Gap { last: u64, got: u64 },
    #[error("the first thing a view takes is a snapshot")]
    NoSnapshot,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatMirror {
    pub seq: u64,
    pub thread: Value,
    pub runtime: Runtime,
    pub messages: Vec<ChatMessage>,
    pub draft: Option<Draft>,
}

impl ChatMirror {
    pub fn from_snapshot(snapshot: &EventEnvelope) -> Result<Self, ViewError> {
        let Event::Snapshot {
            thread,
            runtime,
            messages,
            draft,
        } = &snapshot.event
        else {
            return Err(ViewError::NoSnapshot);
        };
        Ok(ChatMirror {
            seq: snapshot.seq,
            thread: thread.clone(),
            runtime: runtime.clone(),
            messages: messages.clone(),
            draft: draft.clone(),
        })
    }

    /// Applies one event. Old events (seq ≤ last) are ignored; a gap is an error.
    pub fn apply(&mut self, envelope: &EventEnvelope) -> Result<(), ViewError> {
        if envelope.seq <= self.seq {
            return Ok(());
        }
        if envelope.seq != self.seq + 1 {
            return Err(ViewError::Gap {
                last: self.seq,
                got: envelope.seq,
            });
        }
        self.seq = envelope.seq;
        self.apply_event(&envelope.event);
        Ok(())
    }

    fn apply_event(&mut self, event: &Event) {
        match event {
            Event::Snapshot {
                thread,
                runtime,
                messages,
                draft,
            } => {
                self.thread = thread.clone();
                self.runtime = runtime.clone();
                self.messages = messages.clone();
                self.draft = draft.clone();
            }
            Event::StreamStarted { message_id } => {
                self.draft = Some(Draft::new(message_id.clone()));
                self.runtime.apply_live("thinking", 0);
            }
            Event::StreamDelta {
                ops,
                phase,
                draft_tokens,
                ..
            } => {
                if let Some(draft) = self.draft.as_mut() {
                    ops.iter().for_each(|op| draft.apply(op));
                }
                self.runtime.apply_live(phase, *draft_tokens);
            }
            Event::StreamFinished { .. } => {
                // Still generating (a retry, the next round) until a `runtime_updated` says not.
                self.draft = None;
                self.runtime.apply_live("thinking", 0);
            }
            Event::MessageAdded { message, index } => {
                let at = (*index).min(self.messages.len());
                self.messages.insert(at, message.clone());
            }
            Event::MessageUpdated {
                message_id,
                message,
            } => {
                if let Some(slot) = self
                    .messages
                    .iter_mut()
                    .find(|m| &m.message_id == message_id)
                {
                    *slot = message.clone();
                }
            }
            Event::MessageRemoved { message_id } => {
                self.messages.retain(|m| &m.message_id != message_id)
            }
            Event::MessagesTruncated { from_index } => self.messages.truncate(*from_index),
            Event::ThreadUpdated { patch } => {
                if let Value::Object(thread) = &mut self.thread {
                    for (key, value) in patch {
                        if value.is_null() {
                            thread.remove(key);
                        } else {
                            thread.insert(key.clone(), value.clone());
                        }
                    }
                }
            }
            Event::QueueUpdated {
                queue_size,
                queued_items,
            } => {
                self.runtime.queue_size = *queue_size;
                self.runtime.queued_items.clone_from(queued_items);
            }
            Event::RuntimeUpdated { runtime } => self.runtime = runtime.clone(),
            Event::PauseRequired { reasons } => self.runtime.pause_reasons.clone_from(reasons),
            Event::PauseCleared {} => self.runtime.pause_reasons.clear(),
            Event::IdeToolRequired { .. }
            | Event::ToolProgress { .. }
            | Event::ToolDecision { .. }
            | Event::SubagentSpawned { .. }
            | Event::SubagentResult { .. }
            | Event::ModelFallback { .. }
            | Event::Ack { .. } => {}
        }
    }

    /// The view as a snapshot envelope, borrowed (what a following tab's subscriber is sent).
    pub fn snapshot_view<'a>(&'a self, chat_id: &'a str) -> crate::event::SnapshotView<'a> {
        crate::event::SnapshotView::new(
            chat_id,
            self.seq,
            self.thread.clone(),
            self.runtime.clone(),
            &self.messages,
            self.draft.as_ref(),
        )
    }

    /// The view as a snapshot envelope, to compare with the engine's.
    pub fn to_snapshot(&self, chat_id: &str) -> EventEnvelope {
        EventEnvelope {
            chat_id: chat_id.to_string(),
            seq: self.seq,
            event: Event::Snapshot {
                thread: self.thread.clone(),
                runtime: self.runtime.clone(),
                messages: self.messages.clone(),
                draft: self.draft.clone(),
            },
        }
    }
}
