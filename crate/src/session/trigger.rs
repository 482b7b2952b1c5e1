//! What moves a chat's state machine (`ChatSession::transition`): the host's inputs and the
//! engine's answers, as triggers.

use crate::tools::ToolOutcome;

/// A request failure reported by the host before or instead of a body.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestFailure {
    pub status: Option<u16>,
    pub error_type: Option<String>,
    pub message: String,
    pub retry_after_ms: Option<u64>,
    /// Response headers (`retry-after`, `retry-after-ms`, `x-should-retry`).
    pub headers: litemap::LiteMap<String, String>,
    /// A context window the error body states.
    pub context_window: Option<u64>,
    /// The prompt's size in tokens the error body states.
    pub prompt_tokens: Option<u64>,
}

/// The inputs that move the state machine.
#[derive(Debug)]
pub enum Trigger {
    StartTurn,
    StreamBytes(Vec<u8>),
    StreamEnd,
    RequestFailed(RequestFailure),
    ToolResult {
        tool_call_id: String,
        outcome: ToolOutcome,
    },
    Approve(Vec<String>),
    /// The calls rejected, and what the user said about it (the model reads it).
    Reject(Vec<String>, Option<String>),
    Abort,
    Tick,
    /// The user changed the history without starting a turn (edit, remove, truncate, restore):
    /// an error about the old history no longer holds.
    HistoryEdited,
    /// The engine answers a `wait_agents` call whose subagents are not all over: the call gets
    /// `content`, and the turn then waits (`WaitingUserInput`) for `agents`.
    AgentsPending {
        tool_call_id: String,
        content: String,
        agents: Vec<String>,
    },
    /// Every subagent a `wait_agents` waited for is over: their answers come as a message and
    /// the turn goes on.
    AgentsAnswered(String),
    /// The result of a call the chat's stored history left without one (a subagent a reload
    /// interrupted, resumed or cancelled): recorded, and with `go_on` the turn goes on once no
    /// call of that answer is left unanswered.
    LateToolResult {
        tool_call_id: String,
        outcome: ToolOutcome,
        go_on: bool,
    },
}
