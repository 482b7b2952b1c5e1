//! Commands arriving at a session (SPEC §2.2, §2.3): validation and refusal, the queue and its
//! gating, and what each command does when it is popped.
//!
//! A command is answered at once with an `ack`: `accepted: true` once it is applied or queued,
//! `accepted: false` with a typed reason (and no other change) when it is refused. A queued
//! command that can no longer apply when popped is answered by a second, refusing `ack`.

use super::state::SessionState;
use super::{ChatSession, Ctx, Trigger};
use crate::command::{Command, CommandEnvelope};
use crate::error::Refusal;
use crate::event::Event;
use crate::message::{ChatMessage, Content, Role};
use crate::tools::ToolOutcome;
use crate::trajectory;
use serde_json::{json, Value};

/// How an admitted command is carried out.
enum Admitted {
    Queue,
    Abort,
    Params(serde_json::Map<String, Value>, crate::thread::ThreadParams),
    Branch(BranchSource, String),
    Done,
}

/// A branch's source, resolved by the engine from the other chat.
#[derive(Debug, Clone)]
pub struct BranchSource {
    pub messages: Vec<ChatMessage>,
    pub root_chat_id: String,
}

const ALWAYS: [&str; 15] = [
    "user_message",
    "set_params",
    "update_message",
    "remove_message",
    "truncate_messages",
    "retry_from_index",
    "abort",
    "branch_from_chat",
    "restore_from_trajectory",
    "clear_draft",
    "set_draft",
    "regenerate",
    "cancel_queued",
    "resume_queue",
    "insert_message",
];

impl ChatSession {
    /// The commands the current state accepts (applied at once or queued).
    pub fn accepts(&self) -> Vec<String> {
        let mut accepts: Vec<String> = ALWAYS.iter().map(|s| s.to_string()).collect();
        match &self.state {
            SessionState::Paused(_) => {
                accepts.extend(["approve_tools".into(), "reject_tools".into()])
            }
            SessionState::WaitingIde(_) => accepts.push("ide_tool_result".into()),
            _ => {}
        }
        accepts
    }

    pub fn receive(
        &mut self,
        ctx: &mut Ctx,
        envelope: CommandEnvelope,
        branch: Option<BranchSource>,
    ) {
        let id = envelope.client_request_id.clone();
        if self.hold_queue && redoes_a_turn(&envelope.command) && self.state.can_start_turn() {
            return self.run_alone(ctx, envelope);
        }
        match self.admit(envelope, branch) {
            Ok(admitted) => {
                self.emit(Event::Ack {
                    client_request_id: id,
                    accepted: true,
                    reason: None,
                });
                self.apply_admitted(ctx, admitted);
            }
            Err(refusal) => self.refuse(&id, &refusal),
        }
    }

    /// After a Stop the queue is held; a command that redoes a turn (regenerate, edit-and-resend)
    /// runs on its own then, exactly one turn, and the held messages stay held until the user
    /// sends them or discards them (issue 14 §9).
    fn run_alone(&mut self, ctx: &mut Ctx, envelope: CommandEnvelope) {
        let id = envelope.client_request_id.clone();
        let admitted = envelope
            .command
            .validate()
            .and_then(|()| self.check_state_accepts(&envelope.command))
            .and_then(|()| self.queue.remember(&id));
        if let Err(refusal) = admitted {
            return self.refuse(&id, &refusal);
        }
        self.emit(Event::Ack {
            client_request_id: id,
            accepted: true,
            reason: None,
        });
        self.execute(ctx, envelope);
    }

    /// Whether the queue is held since an `abort` (shown as "paused" with send now / discard).
    pub fn queue_held(&self) -> bool {
        self.hold_queue && !self.queue.is_empty()
    }

    pub(crate) fn refuse(&mut self, client_request_id: &str, refusal: &Refusal) {
        let mut reason = serde_json::to_value(refusal).unwrap_or(Value::Null);
        if let Value::Object(map) = &mut reason {
            map.insert("message".into(), refusal.to_string().into());
        }
        self.emit(Event::Ack {
            client_request_id: client_request_id.to_string(),
            accepted: false,
            reason: Some(reason),
        });
    }

    /// Decides, without changing anything visible, whether the command is taken and how.
    fn admit(
        &mut self,
        envelope: CommandEnvelope,
        branch: Option<BranchSource>,
    ) -> Result<Admitted, Refusal> {
        envelope.command.validate()?;
        self.check_state_accepts(&envelope.command)?;
        if let Command::CancelQueued {} = envelope.command {
            return self
                .queue
                .cancel(&envelope.client_request_id)
                .map(|_| Admitted::Done);
        }
        if let Command::ResumeQueue {} = envelope.command {
            self.queue.remember(&envelope.client_request_id)?;
            self.hold_queue = false;
            return Ok(Admitted::Done);
        }
        let admitted = match &envelope.command {
            Command::Abort {} => Admitted::Abort,
            Command::SetParams { patch } => {
                Admitted::Params(patch.clone(), self.thread.patched(patch)?)
            }
            Command::BranchFromChat { source_chat_id, .. } => {
                let source = branch.ok_or_else(|| Refusal::UnknownChat {
                    chat_id: source_chat_id.clone(),
                })?;
                Admitted::Branch(source, source_chat_id.clone())
            }
            _ if self.queue.len() >= crate::queue::MAX_QUEUE => {
                return Err(Refusal::QueueFull {
                    limit: crate::queue::MAX_QUEUE,
                })
            }
            _ => Admitted::Queue,
        };
        self.queue.remember(&envelope.client_request_id)?;
        self.hold_queue = false;
        if let Admitted::Queue = admitted {
            self.queue.push(envelope)?;
        }
        Ok(admitted)
    }

    fn apply_admitted(&mut self, ctx: &mut Ctx, admitted: Admitted) {
        match admitted {
            Admitted::Abort => self.transition(ctx, Trigger::Abort),
            Admitted::Params(patch, next) => self.patch_thread(patch, next),
            Admitted::Branch(source, source_chat_id) => self.branch_from(source, &source_chat_id),
            Admitted::Queue | Admitted::Done => {}
        }
    }

    /// Refusals that depend on the state or on the history, checked before anything changes.
    fn check_state_accepts(&self, command: &Command) -> Result<(), Refusal> {
        let refused = || Refusal::Refused {
            state: self.state.name().to_string(),
            command: command.name().to_string(),
            accepts: self.accepts(),
        };
        match (command, &self.state) {
            (
                Command::ApproveTools { tool_call_ids }
                | Command::RejectTools { tool_call_ids, .. },
                SessionState::Paused(p),
            ) => {
                match tool_call_ids
                    .iter()
                    .find(|id| !p.step.awaiting_approval.contains(*id))
                {
                    Some(_) => Err(refused()),
                    None => Ok(()),
                }
            }
            (Command::ApproveTools { .. } | Command::RejectTools { .. }, _) => Err(refused()),
            (Command::IdeToolResult { tool_call_id, .. }, SessionState::WaitingIde(step))
                if step.waiting_host.contains(tool_call_id) =>
            {
                Ok(())
            }
            (Command::IdeToolResult { .. }, _) => Err(refused()),
            (
                Command::ApplyEditBlock { .. }
                | Command::SkipEditBlock { .. }
                | Command::RunSuggestedCommand { .. },
                _,
            ) => self.check_proposal(command),
            (
                Command::UpdateMessage { message_id, .. }
                | Command::RemoveMessage { message_id, .. },
                _,
            ) => {
                self.message_index(message_id)
                    .map(|_| ())
                    .ok_or_else(|| Refusal::UnknownMessage {
                        message_id: message_id.clone(),
                    })
            }
            (Command::InsertMessage { index, message }, _) => {
                if *index > self.messages.len() {
                    return Err(Refusal::InvalidCommand {
                        reason: format!(
                            "index {index} is past the end of the history ({} messages)",
                            self.messages.len()
                        ),
                    });
                }
                match self.message_index(&message.message_id) {
                    Some(_) => Err(Refusal::InvalidCommand {
                        reason: format!("a message {} is already there", message.message_id),
                    }),
                    None => Ok(()),
                }
            }
            (Command::Regenerate {}, _) if !self.messages.iter().any(|m| m.role == Role::User) => {
                Err(Refusal::InvalidCommand {
                    reason: "nothing to regenerate: no user message".into(),
                })
            }
            (
                Command::TruncateMessages { from_index }
                | Command::RetryFromIndex {
                    index: from_index, ..
                },
                _,
            ) if *from_index > self.messages.len() => Err(Refusal::InvalidCommand {
                reason: format!(
                    "index {from_index} is past the end ({})",
                    self.messages.len()
                ),
            }),
            (Command::BranchFromChat { .. }, _)
                if !self.messages.is_empty() || !self.state.can_start_turn() =>
            {
                Err(Refusal::InvalidCommand {
                    reason: "a branch is made into a new, empty chat".into(),
                })
            }
            _ => Ok(()),
        }
    }

    /// Pops and runs what the state's gating allows (SPEC §2.2).
    pub(super) fn pump(&mut self, ctx: &mut Ctx) {
        while !self.hold_queue {
            let index = match &self.state {
                SessionState::Generating(_) | SessionState::ExecutingTools(_) => None,
                SessionState::Paused(_) => self.queue.position(|c| {
                    matches!(
                        c,
                        Command::ApproveTools { .. } | Command::RejectTools { .. }
                    )
                }),
                SessionState::WaitingIde(_) => self
                    .queue
                    .position(|c| matches!(c, Command::IdeToolResult { .. })),
                _ => (!self.queue.is_empty()).then_some(0),
            };
            let Some(envelope) = index.and_then(|i| self.queue.remove_at(i)) else {
                return;
            };
            self.execute(ctx, envelope);
        }
    }

    fn execute(&mut self, ctx: &mut Ctx, envelope: CommandEnvelope) {
        let id = envelope.client_request_id.clone();
        if let Err(refusal) = self.check_state_accepts(&envelope.command) {
            return self.refuse(&id, &refusal);
        }
        if edits_history_only(&envelope.command) {
            // Popped in `error`, an edit leaves `idle`: the error was about the old history.
            self.transition(ctx, Trigger::HistoryEdited);
        }
        match envelope.command {
            command @ Command::UserMessage { .. } => {
                self.add_user_message(ctx, command);
                for more in self.queue.pop_following_user_messages() {
                    self.add_user_message(ctx, more.command);
                }
                self.transition(ctx, Trigger::StartTurn);
            }
            Command::UpdateMessage {
                message_id,
                content,
                regenerate,
            } => self.update_message(ctx, &message_id, content, regenerate),
            Command::RemoveMessage {
                message_id,
                regenerate,
            } => {
                if let Some(index) = self.message_index(&message_id) {
                    self.remove_message_at(index);
                }
                self.start_if(ctx, regenerate);
            }
            Command::TruncateMessages { from_index } => self.truncate_at(from_index),
            Command::RetryFromIndex { index, content } => {
                self.truncate_at(index);
                self.add_user_message(ctx, user_command(content));
                self.transition(ctx, Trigger::StartTurn);
            }
            Command::Regenerate {} => {
                if let Some(last_user) = self.messages.iter().rposition(|m| m.role == Role::User) {
                    self.truncate_at(last_user + 1);
                }
                self.transition(ctx, Trigger::StartTurn);
            }
            Command::ApproveTools { tool_call_ids } => {
                self.transition(ctx, Trigger::Approve(tool_call_ids))
            }
            Command::RejectTools {
                tool_call_ids,
                reason,
            } => self.transition(ctx, Trigger::Reject(tool_call_ids, reason)),
            Command::IdeToolResult {
                tool_call_id,
                content,
                tool_failed,
            } => {
                let outcome = ToolOutcome {
                    content,
                    failed: tool_failed,
                    data: None,
                    session_metadata: None,
                    parts: Vec::new(),
                };
                self.transition(
                    ctx,
                    Trigger::ToolResult {
                        tool_call_id,
                        outcome,
                    },
                );
            }
            Command::RestoreFromTrajectory {
                trajectory,
                own_copy,
            } => self.restore(ctx, &id, &trajectory, own_copy),
            Command::SetDraft { text } => self.set_composer_draft(text),
            Command::InsertMessage { index, message } => self.insert_message_at(index, message),
            Command::ClearDraft {} => self.set_composer_draft(String::new()),
            Command::SetParams { .. }
            | Command::Abort {}
            | Command::BranchFromChat { .. }
            | Command::CancelQueued {}
            | Command::ResumeQueue {}
            // The engine's: it holds the links between chats (`engine/interrupted_subagents.rs`).
            | Command::ResumeSubagent { .. }
            | Command::CancelSubagent { .. } => {}
            command @ (Command::ApplyEditBlock { .. }
            | Command::SkipEditBlock { .. }
            | Command::RunSuggestedCommand { .. }) => self.act_on_proposal(ctx, &command),
        }
    }

    fn start_if(&mut self, ctx: &mut Ctx, regenerate: bool) {
        if regenerate {
            self.transition(ctx, Trigger::StartTurn);
        }
    }

    pub(super) fn add_user_message(&mut self, ctx: &mut Ctx, command: Command) {
        let Command::UserMessage {
            content,
            attachments,
            context_files,
            message_id,
        } = command
        else {
            return;
        };
        if let Some(files) = context_files.filter(|f| !f.is_empty()) {
            let text = Value::Array(files).to_string();
            let message = self.new_message(ctx, Role::ContextFile, Content::Text(text));
            self.push_message(message);
        }
        let content = with_attachments(content, attachments.unwrap_or_default());
        let title = self.thread.title.is_empty().then(|| title_from(&content));
        let mut message = self.new_message(ctx, Role::User, content);
        if let Some(id) = message_id.filter(|id| !id.is_empty() && self.message_index(id).is_none())
        {
            message.message_id = id;
        }
        self.push_message(message);
        self.name_if_untitled(title);
    }

    /// A chat without a title is named by its first message (the engine names it, issue 34).
    fn name_if_untitled(&mut self, title: Option<String>) {
        if let Some(title) = title.filter(|t| !t.is_empty() && self.thread.title.is_empty()) {
            let mut patch = serde_json::Map::new();
            patch.insert("title".into(), Value::String(title.clone()));
            let mut next = self.thread.clone();
            next.title = title;
            self.patch_thread(patch, next);
        }
    }

    fn update_message(
        &mut self,
        ctx: &mut Ctx,
        message_id: &str,
        content: Content,
        regenerate: bool,
    ) {
        let Some(index) = self.message_index(message_id) else {
            return;
        };
        let mut message = self.messages[index].clone();
        message.content = content;
        self.replace_message(index, message);
        if regenerate {
            self.truncate_at(index + 1);
            self.transition(ctx, Trigger::StartTurn);
        }
    }

    fn set_composer_draft(&mut self, text: String) {
        if self.thread.composer_draft == text {
            return;
        }
        let mut patch = serde_json::Map::new();
        patch.insert("composer_draft".into(), Value::String(text.clone()));
        let mut next = self.thread.clone();
        next.composer_draft = text;
        self.patch_thread(patch, next);
    }

    /// Copies a prefix of another chat: tool calls kept, thinking blocks dropped (SPEC §2.3).
    fn branch_from(&mut self, source: BranchSource, source_chat_id: &str) {
        let mut patch = serde_json::Map::new();
        patch.insert("parent_id".into(), json!(source_chat_id));
        patch.insert("link_type".into(), json!("branch"));
        patch.insert("root_chat_id".into(), json!(source.root_chat_id));
        if let Ok(next) = self.thread.patched(&patch) {
            self.patch_thread(patch, next);
        }
        for mut message in source.messages {
            message.set_thinking_blocks(None);
            message.set_reasoning_content(None);
            self.push_message(message);
        }
    }

    /// Replaces the history with an imported trajectory, repaired; its tool calls never re-run.
    fn restore(&mut self, ctx: &mut Ctx, client_request_id: &str, value: &Value, own_copy: bool) {
        let loaded = match trajectory::load(&self.chat_id, value) {
            Ok(loaded) => loaded,
            Err(refusal) => return self.refuse(client_request_id, &refusal),
        };
        self.truncate_at(0);
        // A trajectory comes from outside (an import, the workspace): its title and links come
        // back with it, but what steers the agent stays this chat's, and its own system prompt
        // waits for the user's yes (SECURITY F2).
        let outside = if own_copy {
            loaded.thread.to_json()
        } else {
            crate::thread::from_outside(&loaded.thread.to_json(), &self.thread.to_json())
        };
        if let (Value::Object(patch), Ok(thread)) = (
            outside.clone(),
            serde_json::from_value::<crate::thread::ThreadParams>(outside),
        ) {
            if thread != self.thread {
                self.patch_thread(patch, thread);
            }
        }
        for message in loaded.messages {
            self.push_message(message);
        }
        for note in loaded.notes {
            let mut message = self.new_message(ctx, Role::Event, Content::Text(note.clone()));
            message.set_event("system_notice", "restore", json!({"text": note}));
            self.push_message(message);
        }
        // A bare list of messages (no title of its own) is named like a chat typed here.
        let first = self.messages.iter().find(|m| m.role == Role::User);
        let title = first.map(|m| title_from(&m.content));
        self.name_if_untitled(title);
    }
}

fn user_command(content: Content) -> Command {
    Command::UserMessage {
        content,
        attachments: None,
        context_files: None,
        message_id: None,
    }
}

/// Attachments (image parts) join the content as parts.
fn with_attachments(content: Content, attachments: Vec<Value>) -> Content {
    if attachments.is_empty() {
        return content;
    }
    let mut parts = match content {
        Content::Text(text) if text.is_empty() => Vec::new(),
        Content::Text(text) => vec![json!({"type": "text", "text": text})],
        Content::Parts(parts) => parts,
    };
    parts.extend(attachments);
    Content::Parts(parts)
}

/// Commands that start the last turn again instead of adding to the conversation.
fn redoes_a_turn(command: &Command) -> bool {
    matches!(
        command,
        Command::Regenerate {}
            | Command::RetryFromIndex { .. }
            | Command::UpdateMessage {
                regenerate: true,
                ..
            }
            | Command::RemoveMessage {
                regenerate: true,
                ..
            }
    )
}

/// Commands that change the history without starting a turn.
fn edits_history_only(command: &Command) -> bool {
    matches!(
        command,
        Command::TruncateMessages { .. }
            | Command::InsertMessage { .. }
            | Command::RestoreFromTrajectory { .. }
            | Command::UpdateMessage {
                regenerate: false,
                ..
            }
            | Command::RemoveMessage {
                regenerate: false,
                ..
            }
    )
}

/// A title from a first message: its first line that has text, at most 60 characters (cut at a
/// word when one ends near there).
pub(crate) fn title_from(content: &Content) -> String {
    const MAX: usize = 60;
    let text = content.text();
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    if line.chars().count() <= MAX {
        return line.to_string();
    }
    let cut: String = line.chars().take(MAX).collect();
    let at_word = cut
        .rfind(' ')
        .filter(|at| *at >= MAX / 2)
        .unwrap_or(cut.len());
    format!("{}…", cut[..at_word].trim_end())
}
