//! The command queue (SPEC §2.2): at most 100 items, `client_request_id` de-duplicated over the
//! last 100 ids seen, priority items inserted before the first non-priority one.
//! Gating (what may be popped in which state) lives in `session`; this is only the container.

use crate::command::{Command, CommandEnvelope};
use crate::error::Refusal;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// One queued command as subscribers see it (SPEC §3.1 `queue_updated`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct QueuedItemSummary {
    pub client_request_id: String,
    #[serde(rename = "type")]
    pub command: String,
    pub priority: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<String>,
}

pub const MAX_QUEUE: usize = 100;
const DEDUP_WINDOW: usize = 100;

#[derive(Debug, Default, Clone)]
pub struct CommandQueue {
    items: VecDeque<CommandEnvelope>,
    recent_ids: VecDeque<String>,
}

impl CommandQueue {
    /// Records an id; refuses one seen among the last 100.
    pub fn remember(&mut self, client_request_id: &str) -> Result<(), Refusal> {
        if self.recent_ids.iter().any(|id| id == client_request_id) {
            return Err(Refusal::Duplicate {
                client_request_id: client_request_id.to_string(),
            });
        }
        if self.recent_ids.len() == DEDUP_WINDOW {
            self.recent_ids.pop_front();
        }
        self.recent_ids.push_back(client_request_id.to_string());
        Ok(())
    }

    pub fn push(&mut self, envelope: CommandEnvelope) -> Result<(), Refusal> {
        if self.items.len() >= MAX_QUEUE {
            return Err(Refusal::QueueFull { limit: MAX_QUEUE });
        }
        let at = if envelope.priority {
            self.items
                .iter()
                .position(|item| !item.priority)
                .unwrap_or(self.items.len())
        } else {
            self.items.len()
        };
        self.items.insert(at, envelope);
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn front(&self) -> Option<&CommandEnvelope> {
        self.items.front()
    }

    pub fn position(&self, allowed: impl Fn(&Command) -> bool) -> Option<usize> {
        self.items.iter().position(|item| allowed(&item.command))
    }

    pub fn remove_at(&mut self, index: usize) -> Option<CommandEnvelope> {
        self.items.remove(index)
    }

    pub fn cancel(&mut self, client_request_id: &str) -> Result<CommandEnvelope, Refusal> {
        let index = self
            .items
            .iter()
            .position(|item| item.client_request_id == client_request_id)
            .ok_or_else(|| Refusal::NotQueued {
                client_request_id: client_request_id.to_string(),
            })?;
        self.items.remove(index).ok_or_else(|| Refusal::NotQueued {
            client_request_id: client_request_id.to_string(),
        })
    }

    /// Pops priority user messages waiting at the front (the "steer now" injection).
    pub fn pop_priority_user_messages(&mut self) -> Vec<CommandEnvelope> {
        let mut popped = Vec::new();
        while self
            .items
            .front()
            .is_some_and(|i| i.priority && matches!(i.command, Command::UserMessage { .. }))
        {
            popped.extend(self.items.pop_front());
        }
        popped
    }

    /// Pops the user messages that follow at the front, to be sent as one turn with the first.
    pub fn pop_following_user_messages(&mut self) -> Vec<CommandEnvelope> {
        let mut popped = Vec::new();
        while self
            .items
            .front()
            .is_some_and(|i| matches!(i.command, Command::UserMessage { .. }))
        {
            popped.extend(self.items.pop_front());
        }
        popped
    }

    pub fn summary(&self) -> Vec<QueuedItemSummary> {
        self.items.iter().map(summarize).collect()
    }
}

fn summarize(item: &CommandEnvelope) -> QueuedItemSummary {
    let preview = match &item.command {
        Command::UserMessage { content, .. } => Some(content.text().chars().take(80).collect()),
        _ => None,
    };
    QueuedItemSummary {
        client_request_id: item.client_request_id.clone(),
        command: item.command.name().to_string(),
        priority: item.priority,
        preview,
    }
}
