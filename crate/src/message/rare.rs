//! What few messages have (`Rare`): a model's reasoning, its thinking blocks, a search's
//! citations and a provider's server content blocks. Four optional vectors inline were 96 bytes
//! in every message of a long chat, most of them a user's line or a tool's result that never has
//! any; behind one pointer they are 8 (issue 41). `ChatMessage` reads and sets them through
//! methods of the fields' names, which keep the pointer `None` when all four are, so a message
//! that had them and lost them equals one that never had them.

use super::{ChatMessage, RawJson};
use serde::Serialize;
use serde_json::Value;

#[derive(Serialize, Clone, Debug, PartialEq, Default)]
pub struct Rare {
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking_blocks: Option<Vec<Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    citations: Option<Vec<RawJson>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    server_content_blocks: Option<Vec<RawJson>>,
}

impl Rare {
    fn is_empty(&self) -> bool {
        self.reasoning_content.is_none()
            && self.thinking_blocks.is_none()
            && self.citations.is_none()
            && self.server_content_blocks.is_none()
    }
}

impl ChatMessage {
    pub fn reasoning_content(&self) -> Option<&str> {
        self.rare.as_ref()?.reasoning_content.as_deref()
    }

    pub fn thinking_blocks(&self) -> Option<&[Value]> {
        self.rare.as_ref()?.thinking_blocks.as_deref()
    }

    pub fn citations(&self) -> Option<&[RawJson]> {
        self.rare.as_ref()?.citations.as_deref()
    }

    pub fn server_content_blocks(&self) -> Option<&[RawJson]> {
        self.rare.as_ref()?.server_content_blocks.as_deref()
    }

    pub fn set_reasoning_content(&mut self, reasoning: Option<String>) {
        self.change_rare(|rare| rare.reasoning_content = reasoning);
    }

    pub fn set_thinking_blocks(&mut self, blocks: Option<Vec<Value>>) {
        self.change_rare(|rare| rare.thinking_blocks = blocks);
    }

    pub fn set_citations(&mut self, citations: Option<Vec<RawJson>>) {
        self.change_rare(|rare| rare.citations = citations);
    }

    pub fn set_server_content_blocks(&mut self, blocks: Option<Vec<RawJson>>) {
        self.change_rare(|rare| rare.server_content_blocks = blocks);
    }

    /// Changes the rare fields, the pointer made when one is set and dropped when none is left.
    fn change_rare(&mut self, change: impl FnOnce(&mut Rare)) {
        let mut rare = self.rare.take().unwrap_or_default();
        change(&mut rare);
        if !rare.is_empty() {
            self.rare = Some(rare);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Role;

    #[test]
    fn a_message_that_lost_its_reasoning_equals_one_that_never_had_it() {
        let plain = ChatMessage::text("m1", Role::Assistant, "hi");
        let mut reasoned = plain.clone();
        reasoned.set_reasoning_content(Some("because".into()));
        assert_ne!(reasoned, plain);
        assert_eq!(reasoned.reasoning_content(), Some("because"));
        reasoned.set_reasoning_content(None);
        assert_eq!(reasoned, plain);
    }

    #[test]
    fn the_rare_fields_are_written_in_their_place_and_read_back() {
        let text = r#"{"message_id":"m1","role":"assistant","content":"hi","tool_failed":true,"reasoning_content":"r","thinking_blocks":[{"type":"thinking"}],"citations":[{"u":1}],"server_content_blocks":[{"b":2}],"finish_reason":"stop"}"#;
        let message: ChatMessage = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(message.thinking_blocks().map(<[Value]>::len), Some(1));
        assert_eq!(serde_json::to_string(&message).ok().as_deref(), Some(text));
    }
}
