//! Subagents (issue 18; seeds 000 and 004): a chat's `spawn_agent` call becomes a child chat with
//! its own thread, trajectory and turn loop; its final answer becomes the call's result.
//!
//! A session only asks (`tools::AgentRequest`, drained by the engine after each input); this module keeps
//! the links between parents and children and decides — without IO — whether a spawn is allowed
//! (depth, per-root count, a subset of the parent's tools), which queued child may start (at most
//! `MAX_RUNNING_PER_ROOT` at once, in order), and what a finished child answers. The engine moves
//! the sessions (`engine.rs`).

use crate::event::{PauseReason, SubagentView};
use crate::message::{ChatMessage, Role};
use crate::session::SessionState;
use crate::thread::{ThreadParams, DEFAULT_MAX_SUBAGENTS, DEFAULT_MAX_SUBAGENT_DEPTH};
pub use crate::tools::AgentRequest;
use litemap::LiteMap;
use serde_json::{json, Value};

/// Children of one root that run at once; the others wait, first asked first started.
pub const MAX_RUNNING_PER_ROOT: usize = 4;
/// The part of a child's answer the parent's tool result carries; the rest is in the child chat.
pub const ANSWER_CAP_CHARS: usize = 8_000;

/// Where a child stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkStatus {
    Queued,
    Running,
    Done,
    Failed,
    Stopped,
    /// The page closed while it worked (found again when its parent opened from storage): it
    /// waits for the user's Resume or Cancel.
    Interrupted,
}

impl LinkStatus {
    pub fn name(self) -> &'static str {
        match self {
            LinkStatus::Queued => "queued",
            LinkStatus::Running => "running",
            LinkStatus::Done => "done",
            LinkStatus::Failed => "failed",
            LinkStatus::Stopped => "stopped",
            LinkStatus::Interrupted => "interrupted",
        }
    }

    pub fn is_over(self) -> bool {
        matches!(
            self,
            LinkStatus::Done | LinkStatus::Failed | LinkStatus::Stopped
        )
    }
}

/// How a child ended, as its parent reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub status: LinkStatus,
    /// The answer (done), or the reason (failed, stopped).
    pub text: String,
}

/// One parent → child link.
#[derive(Debug, Clone)]
pub struct Link {
    pub child: String,
    pub parent: String,
    pub root: String,
    pub call_id: String,
    pub task: String,
    pub title: String,
    /// The parent's call waits for the answer (else `wait_agents` collects it).
    pub wait: bool,
    pub status: LinkStatus,
    pub outcome: Option<Outcome>,
    /// The answer reached the parent (as the call's result or after `wait_agents`).
    pub delivered: bool,
    pub started_at_ms: u64,
    pub ended_at_ms: Option<u64>,
    /// Asked order (set by `Subagents::add`): queued children start in this order.
    pub order: u64,
    /// Resumed after an interruption: its answer, arriving at a parent no longer in that turn,
    /// carries the parent's turn on.
    pub resumed: bool,
}

#[derive(Debug, Default)]
pub struct Subagents {
    links: LiteMap<String, Link>,
    next_order: u64,
}

impl Subagents {
    pub fn get(&self, child: &str) -> Option<&Link> {
        self.links.get(child)
    }

    pub fn get_mut(&mut self, child: &str) -> Option<&mut Link> {
        self.links.get_mut(child)
    }

    pub fn links(&self) -> impl Iterator<Item = &Link> {
        self.links.values()
    }

    pub fn add(&mut self, mut link: Link) {
        link.order = self.next_order;
        self.next_order += 1;
        self.links.insert(link.child.clone(), link);
    }

    /// Children of this root ever spawned (the per-root limit counts them all).
    pub fn count_for_root(&self, root: &str) -> usize {
        self.links.values().filter(|l| l.root == root).count()
    }

    /// The queued children that may start now, oldest first, within the per-root cap.
    pub fn ready_to_start(&self) -> Vec<String> {
        let mut running: LiteMap<&str, usize> = LiteMap::new();
        for link in self.links.values() {
            if link.status == LinkStatus::Running {
                *running.entry(&link.root).or_default() += 1;
            }
        }
        let mut queued: Vec<&Link> = self
            .links
            .values()
            .filter(|l| l.status == LinkStatus::Queued)
            .collect();
        queued.sort_by_key(|l| l.order);
        let mut ready = Vec::new();
        for link in queued {
            let count = running.entry(&link.root).or_default();
            if *count < MAX_RUNNING_PER_ROOT {
                *count += 1;
                ready.push(link.child.clone());
            }
        }
        ready
    }

    /// Every child below `parent` (children, their children, …) not over yet.
    pub fn open_descendants(&self, parent: &str) -> Vec<String> {
        let mut found = Vec::new();
        let mut frontier = vec![parent.to_string()];
        while let Some(next) = frontier.pop() {
            for link in self.links.values().filter(|l| l.parent == next) {
                frontier.push(link.child.clone());
                if !link.status.is_over() {
                    found.push(link.child.clone());
                }
            }
        }
        found
    }

    /// The parent's children in the order they were asked for.
    pub fn children_of(&self, parent: &str) -> Vec<&Link> {
        let mut children: Vec<&Link> = self.links.values().filter(|l| l.parent == parent).collect();
        children.sort_by_key(|l| l.order);
        children
    }

    /// The chats that started subagents, each once.
    pub fn parents(&self) -> std::collections::BTreeSet<String> {
        self.links.values().map(|l| l.parent.clone()).collect()
    }
}

/// Why a spawn is refused, as the model reads it; `None` when it may go ahead.
pub fn refusal(
    parent: &ThreadParams,
    spawned_for_root: usize,
    tools: Option<&[String]>,
    parent_tools: &[String],
) -> Option<String> {
    let max_depth = parent
        .max_subagent_depth
        .unwrap_or(DEFAULT_MAX_SUBAGENT_DEPTH);
    if parent.depth + 1 > max_depth {
        return Some(format!(
            "spawn_agent refused: this agent is at depth {} and subagents may go {} deep (max_subagent_depth). Do the task yourself.",
            parent.depth, max_depth
        ));
    }
    let max = parent.max_subagents.unwrap_or(DEFAULT_MAX_SUBAGENTS) as usize;
    if spawned_for_root >= max {
        return Some(format!(
            "spawn_agent refused: this conversation already started {spawned_for_root} subagents, the most it may (max_subagents). Do the rest yourself or with wait_agents."
        ));
    }
    let unknown: Vec<&str> = tools
        .unwrap_or_default()
        .iter()
        .filter(|t| !parent_tools.contains(t))
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        return Some(format!(
            "spawn_agent refused: a subagent gets a subset of your tools, and you do not have {}. Yours: {}.",
            unknown.join(", "),
            parent_tools.join(", ")
        ));
    }
    None
}

/// The child's thread: the parent's provider, model, mode, rules and limits, linked to it.
pub fn child_thread(
    parent_id: &str,
    parent: &ThreadParams,
    title: &str,
    tools: Option<Vec<String>>,
    model: Option<String>,
) -> ThreadParams {
    let mut thread = parent.clone();
    thread.title = title.to_string();
    if let Some(model) = model {
        thread.model = model;
        thread.pinned_model = true;
    }
    thread.parent_id = Some(parent_id.to_string());
    thread.root_chat_id = Some(
        parent
            .root_chat_id
            .clone()
            .unwrap_or_else(|| parent_id.to_string()),
    );
    thread.link_type = Some("subagent".into());
    thread.depth = parent.depth + 1;
    // Never more than the parent: its own limit, narrowed by the call's list.
    thread.allowed_tools = match (tools, &parent.allowed_tools) {
        (Some(asked), _) => Some(asked),
        (None, inherited) => inherited.clone(),
    };
    thread.composer_draft = String::new();
    thread
}

/// A title from the task when the call gave none: its first line, cut at 60 characters.
pub fn title_of(task: &str) -> String {
    let line = task.lines().next().unwrap_or("").trim();
    let mut title: String = line.chars().take(60).collect();
    if line.chars().count() > 60 {
        title.push('…');
    }
    if title.is_empty() {
        "Subagent".into()
    } else {
        title
    }
}

/// A child chat id from its parent's and the call's: stable, readable, safe in a URL.
pub fn child_id(parent: &str, call_id: &str) -> String {
    let call: String = call_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{parent}~{call}")
}

/// The child's state as its parent's tree shows it, or its outcome once its turn is over.
pub fn child_status(
    state: &SessionState,
    messages: &[ChatMessage],
) -> Result<&'static str, Outcome> {
    match state {
        SessionState::Paused(_) => Ok("paused"),
        SessionState::WaitingUserInput => Ok("waiting"),
        state if state.is_busy() => Ok("running"),
        SessionState::Error(info) => Err(Outcome {
            status: LinkStatus::Failed,
            text: info.message.clone(),
        }),
        _ => Err(final_answer(messages)),
    }
}

/// What a child that ended answers: its last words (or `task_done`'s summary); a stopped child
/// says so, with what it had.
fn final_answer(messages: &[ChatMessage]) -> Outcome {
    let stopped = messages
        .iter()
        .rev()
        .find(|m| m.role == Role::Assistant)
        .is_some_and(ChatMessage::is_stopped);
    let answer = messages
        .iter()
        .rev()
        .filter(|m| m.role == Role::Assistant)
        .map(|m| m.content.text())
        .find(|t| !t.trim().is_empty())
        .or_else(|| task_done_summary(messages))
        .unwrap_or_default();
    if stopped {
        let text = if answer.is_empty() {
            "The subagent was stopped before it answered.".to_string()
        } else {
            format!("The subagent was stopped. What it had: {answer}")
        };
        return Outcome {
            status: LinkStatus::Stopped,
            text,
        };
    }
    Outcome {
        status: LinkStatus::Done,
        text: if answer.is_empty() {
            "The subagent ended without an answer.".into()
        } else {
            answer
        },
    }
}

fn task_done_summary(messages: &[ChatMessage]) -> Option<String> {
    let call = messages
        .iter()
        .rev()
        .flat_map(|m| m.tool_calls().iter())
        .find(|c| c.function.name == "task_done")?;
    let args: Value = serde_json::from_str(&call.function.arguments).ok()?;
    args.get("summary")
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// The parent's tool result for a finished child: its answer, capped, and where the rest is.
pub fn result_text(link: &Link, outcome: &Outcome) -> String {
    let mut text: String = outcome.text.chars().take(ANSWER_CAP_CHARS).collect();
    if outcome.text.chars().count() > ANSWER_CAP_CHARS {
        text.push_str(&format!(
            "\n[… cut at {ANSWER_CAP_CHARS} characters; the whole answer is in the subagent's chat]"
        ));
    }
    let how = match outcome.status {
        LinkStatus::Failed => "failed",
        LinkStatus::Stopped => "was stopped",
        _ => "answered",
    };
    format!(
        "Subagent `{}` ({}) {how}:\n{text}\n\n(Its whole chat: {}.)",
        link.child, link.title, link.child
    )
}

/// Tokens a chat's requests used, as its providers reported them.
pub fn tokens_used(messages: &[ChatMessage]) -> u64 {
    messages
        .iter()
        .filter_map(|m| m.usage.as_ref())
        .map(|u| {
            u.total_tokens
                .unwrap_or_else(|| u.prompt_tokens.unwrap_or(0) + u.completion_tokens.unwrap_or(0))
        })
        .sum()
}

/// A child as its parent's tree shows it.
pub fn view(
    link: &Link,
    status: &str,
    model: &str,
    tokens: u64,
    pause_reasons: Vec<PauseReason>,
) -> SubagentView {
    SubagentView {
        chat_id: link.child.clone(),
        title: link.title.clone(),
        task: link.task.clone(),
        tool_call_id: link.call_id.clone(),
        status: status.to_string(),
        model: model.to_string(),
        tokens,
        started_at_ms: link.started_at_ms,
        ended_at_ms: link.ended_at_ms,
        pause_reasons,
    }
}

/// The `user_message` command that gives a child its task.
pub fn task_command(link: &Link) -> Value {
    json!({
        "type": "user_message",
        "client_request_id": format!("subagent-task-{}", link.call_id),
        "content": link.task,
    })
}

/// The message a parent waiting in `wait_agents` gets once every child it waits for is over.
pub fn answers_message(links: &[&Link]) -> String {
    let mut text = String::from("[The subagents you waited for have finished.]\n");
    for link in links {
        if let Some(outcome) = &link.outcome {
            text.push('\n');
            text.push_str(&result_text(link, outcome));
            text.push('\n');
        }
    }
    text
}
