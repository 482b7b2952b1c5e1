//! Subagent runs the page's closing cut (a reload, a tab crash; or the parent opened on another
//! device): when a parent opens from storage, its `spawn_agent` calls become its tree again —
//! answered ones as done or failed, a call of its last answer still without a result as
//! `interrupted`. An interrupted child waits for the user: Resume (its chat goes on; its answer
//! reaches the call and the parent's turn goes on) or Cancel (the call is answered as
//! interrupted). A new message to the parent cancels them first. Either way the parent's call gets
//! a result the model reads, so the same call never spawns a second child.

use super::*;
use crate::message::{ChatMessage, Role};

/// What an interrupted subagent's chat is told when the user resumes it.
const RESUME_TASK: &str = "Your run was interrupted (the page closed) before you finished. Go on with the task from where you left off, then give your answer.";

impl Engine {
    /// After a chat opens from storage: the links of its subagents, as its history shows them.
    pub(super) fn adopt_stored_subagents(&mut self, now: u64, parent: &str) {
        let Some(session) = self.sessions.get(parent) else {
            return;
        };
        let root = session
            .thread
            .root_chat_id
            .clone()
            .unwrap_or_else(|| parent.to_string());
        let unanswered: Vec<String> = session
            .unanswered_calls()
            .iter()
            .map(|c| c.id.clone())
            .collect();
        let mut links = Vec::new();
        for call in session.messages.iter().flat_map(ChatMessage::tool_calls) {
            if call.function.name != "spawn_agent" {
                continue;
            }
            let args: Value = serde_json::from_str(&call.function.arguments).unwrap_or(Value::Null);
            let Ok(AgentRequest::Spawn {
                task, title, wait, ..
            }) = AgentRequest::spawn(&call.id, &args)
            else {
                continue;
            };
            let result = session
                .messages
                .iter()
                .find(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some(&call.id));
            let child = subagents::child_id(parent, &call.id);
            let outcome = match result {
                // A child started with `wait: false` ends in its own chat: known once that chat
                // is open here (the page opens a parent's children after it), then linked.
                Some(_) if !wait => match self.sessions.get(&child) {
                    Some(child_session) => background_outcome(child_session),
                    None => continue,
                },
                Some(result) => Some(Outcome {
                    status: if result.tool_failed == Some(true) {
                        LinkStatus::Failed
                    } else {
                        LinkStatus::Done
                    },
                    text: result.content.text(),
                }),
                None if unanswered.contains(&call.id) => None,
                None => continue,
            };
            // A background child's answer was handed over when a `wait_agents` result carries it.
            let delivered = if wait {
                outcome.is_some()
            } else {
                let handed = format!("Subagent `{child}`");
                session
                    .messages
                    .iter()
                    .any(|m| m.role == Role::Tool && m.content.text().contains(&handed))
            };
            links.push(Link {
                child,
                parent: parent.to_string(),
                root: root.clone(),
                call_id: call.id.clone(),
                title: title.unwrap_or_else(|| subagents::title_of(&task)),
                task,
                wait,
                status: outcome
                    .as_ref()
                    .map_or(LinkStatus::Interrupted, |o| o.status),
                delivered,
                outcome,
                started_at_ms: now,
                ended_at_ms: None,
                order: 0,
                resumed: false,
            });
        }
        for link in links {
            if self.subagents.get(&link.child).is_none() {
                self.subagents.add(link);
            }
        }
    }

    /// After a subagent's own chat opens from storage: its parent, if open here, links it (a
    /// child started with `wait: false` is known only from its own chat).
    pub(super) fn adopt_stored_child(&mut self, now: u64, child: &str) {
        let parent = self
            .sessions
            .get(child)
            .filter(|s| s.thread.link_type.as_deref() == Some("subagent"))
            .and_then(|s| s.thread.parent_id.clone());
        if let Some(parent) = parent.filter(|p| self.sessions.contains_key(p)) {
            self.adopt_stored_subagents(now, &parent);
        }
    }

    /// `resume_subagent` / `cancel_subagent` to `parent`; `false` when the command is another.
    pub(super) fn subagent_command(
        &mut self,
        now: u64,
        parent: &str,
        envelope: &CommandEnvelope,
        step: &mut Step,
    ) -> bool {
        let id = envelope.client_request_id.as_str();
        let done = match &envelope.command {
            Command::ResumeSubagent { child_id } => self.resume(now, parent, child_id, step),
            Command::CancelSubagent { child_id } => self.cancel(now, parent, child_id, step),
            Command::UserMessage { .. } => {
                self.cancel_interrupted(now, parent, step);
                return false;
            }
            _ => return false,
        };
        match done {
            Ok(()) => {
                let ack = Event::Ack {
                    client_request_id: id.to_string(),
                    accepted: true,
                    reason: None,
                };
                self.to_chat(now, parent, step, |s, _| s.emit(ack));
            }
            Err(refusal) => self.to_chat(now, parent, step, |s, _| s.refuse(id, &refusal)),
        }
        true
    }

    /// The child goes on with its task (or, if it had answered, that answer is handed over).
    fn resume(
        &mut self,
        now: u64,
        parent: &str,
        child: &str,
        step: &mut Step,
    ) -> Result<(), Refusal> {
        self.interrupted_link(parent, child)?;
        let Some(session) = self.sessions.get(child) else {
            return Err(Refusal::UnknownChat {
                chat_id: child.to_string(),
            });
        };
        let answered = !session.state().is_busy() && has_final_answer(&session.messages);
        if let Some(link) = self.subagents.get_mut(child) {
            link.status = LinkStatus::Running;
            link.resumed = true;
            link.started_at_ms = now;
        }
        if !answered {
            let command = json!({
                "type": "user_message",
                "client_request_id": format!("subagent-resume-{child}-{now}"),
                "content": RESUME_TASK,
            });
            self.command(now, child, command, step);
        }
        Ok(())
    }

    fn cancel(
        &mut self,
        now: u64,
        parent: &str,
        child: &str,
        step: &mut Step,
    ) -> Result<(), Refusal> {
        self.interrupted_link(parent, child)?;
        let text = format!(
            "The subagent was interrupted when the page closed, and the user cancelled it; what it did before is in its chat `{child}`."
        );
        let outcome = Outcome {
            status: LinkStatus::Stopped,
            text,
        };
        self.end_link(now, child, outcome, step);
        Ok(())
    }

    /// A new message to the parent: its interrupted subagents are cancelled first, so the model
    /// reads what became of their calls before the message.
    fn cancel_interrupted(&mut self, now: u64, parent: &str, step: &mut Step) {
        let interrupted: Vec<String> = self
            .subagents
            .children_of(parent)
            .into_iter()
            .filter(|l| l.status == LinkStatus::Interrupted)
            .map(|l| l.child.clone())
            .collect();
        for child in interrupted {
            let _ = self.cancel(now, parent, &child, step);
        }
    }

    fn interrupted_link(&self, parent: &str, child: &str) -> Result<(), Refusal> {
        match self.subagents.get(child) {
            Some(l) if l.parent == parent && l.status == LinkStatus::Interrupted => Ok(()),
            _ => Err(Refusal::InvalidCommand {
                reason: format!("{child} is not an interrupted subagent of this chat"),
            }),
        }
    }

    /// A result for `parent`'s call when the parent is no longer in the turn that made it.
    pub(super) fn answer_late(
        &mut self,
        now: u64,
        parent: &str,
        call_id: &str,
        outcome: ToolOutcome,
        go_on: bool,
        step: &mut Step,
    ) {
        self.to_chat(now, parent, step, |s, ctx| {
            s.transition(
                ctx,
                Trigger::LateToolResult {
                    tool_call_id: call_id.to_string(),
                    outcome,
                    go_on,
                },
            )
        });
    }

    /// Whether `parent`'s call is one its stored history left without a result.
    pub(super) fn is_late(&self, parent: &str, call_id: &str) -> bool {
        self.sessions.get(parent).is_some_and(|s| {
            s.state().can_start_turn() && s.unanswered_calls().iter().any(|c| c.id == call_id)
        })
    }
}

/// Where a background child's stored chat stands: its answer (done), or `None` — cut before it
/// answered (interrupted).
fn background_outcome(child: &crate::session::ChatSession) -> Option<Outcome> {
    let answered = !child.state().is_busy() && has_final_answer(&child.messages);
    answered.then(|| Outcome {
        status: LinkStatus::Done,
        text: child
            .messages
            .last()
            .map(|m| m.content.text())
            .unwrap_or_default(),
    })
}

/// The chat ends with a whole answer: the last message is the assistant's, with no calls, not
/// cut by a stop or a crash.
fn has_final_answer(messages: &[ChatMessage]) -> bool {
    messages.last().is_some_and(|m| {
        m.role == Role::Assistant
            && m.tool_calls().is_empty()
            && !m.is_stopped()
            && !m.is_interrupted()
            && !m.content.text().trim().is_empty()
    })
}
