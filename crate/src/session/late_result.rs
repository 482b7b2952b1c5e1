//! Calls the stored history left without a result: the page closed while a subagent worked for
//! the call, and the chat was opened again from storage (after a reload, a tab crash, on another
//! device). Such a call is answered late — by the subagent's answer once resumed, or as
//! interrupted — so the model always sees what became of it and never asks for it a second time.

use super::*;

impl ChatSession {
    /// The calls of the chat's last answer with tools that no result answers yet, provided
    /// nothing the user said came after it (a later message already moved the chat on).
    pub fn unanswered_calls(&self) -> Vec<&crate::message::ToolCall> {
        let Some(at) = self
            .messages
            .iter()
            .rposition(|m| m.role == Role::Assistant && !m.tool_calls().is_empty())
        else {
            return Vec::new();
        };
        let after = &self.messages[at + 1..];
        if after
            .iter()
            .any(|m| m.role == Role::User && !m.is_ui_only())
        {
            return Vec::new();
        }
        let answered = |id: &str| {
            after
                .iter()
                .any(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some(id))
        };
        self.messages[at]
            .tool_calls()
            .iter()
            .filter(|call| !answered(&call.id))
            .collect()
    }

    /// Records a late result; with `go_on`, the turn goes on once the answer's calls all have one.
    pub(super) fn on_late_tool_result(
        &mut self,
        ctx: &mut Ctx,
        state: SessionState,
        tool_call_id: &str,
        outcome: ToolOutcome,
        go_on: bool,
    ) -> SessionState {
        if !self.unanswered_calls().iter().any(|c| c.id == tool_call_id) {
            return state;
        }
        let mut message = ChatMessage::tool_result(
            self.next_message_id(ctx),
            tool_call_id,
            &outcome.content,
            outcome.failed,
        );
        message.created_at_ms = Some(ctx.now);
        self.push_message(message);
        if go_on && self.unanswered_calls().is_empty() {
            return self.start_turn(ctx);
        }
        state
    }
}
