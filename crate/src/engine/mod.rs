//! `Engine`: the one door into the core (SPEC §0, GUIDE §1).
//!
//! Call protocol: the host creates an `Engine` with an `EngineConfig`, then calls
//! `handle(now, input)` for every command, stream chunk, tool result, save acknowledgement and
//! timer, and performs the returned effects: `start_request` (then feed `stream_bytes`,
//! `stream_end` or `request_failed` with its `request_id`), `cancel_request`, `run_tool` (then
//! `tool_result`), `cancel_tool`, `save_trajectory` (then `save_acked` or `save_failed`) and
//! `wake_at` (then `tick` at or after that time). `snapshot(chat_id)` answers a subscriber.
//! The engine reads no clock and does no IO; the same inputs give the same outputs.

use crate::command::{Command, CommandEnvelope};
pub use crate::config::{EngineConfig, IdGen};
pub use crate::effect::{Effect, RequestPurpose};
use crate::error::Refusal;
use crate::event::Event;
use crate::event::EventEnvelope;
use crate::session::{BranchSource, ChatSession, Ctx, RequestFailure, Trigger};
use crate::subagents::{self, AgentRequest, Link, LinkStatus, Outcome, Subagents};
use crate::tagged::{self, Fields};
use crate::thread::ThreadParams;
use crate::tools::ToolOutcome;
use crate::trajectory;
use litemap::LiteMap;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{json, Value};

mod input;
mod interrupted_subagents;
mod subagent_runs;

pub use input::*;

/// What one `handle` call produced.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Step {
    pub events: Vec<EventEnvelope>,
    pub effects: Vec<Effect>,
    /// Inputs the engine could not take at all (not JSON of an input, unknown request): typed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<Refusal>,
}

#[derive(Debug, Default)]
pub struct Engine {
    config: EngineConfig,
    ids: IdGen,
    sessions: LiteMap<String, ChatSession>,
    requests: LiteMap<String, String>,
    /// Parent → child links of subagents (issue 18).
    subagents: Subagents,
}

impl Engine {
    pub fn new(config: EngineConfig) -> Self {
        let ids = IdGen::new(&config.id_prefix);
        Engine {
            config,
            ids,
            sessions: LiteMap::new(),
            requests: LiteMap::new(),
            subagents: Subagents::default(),
        }
    }

    /// The workspace tools offered from the next request on (the host learned that an MCP
    /// server's tools changed); a round under way keeps what it was sent with.
    pub fn set_workspace_tools(&mut self, tools: Vec<crate::tools::ToolSpec>) {
        self.config.workspace_tools = tools;
    }

    /// New settings from the host (Settings saved): providers, the prompt, tools, rules, windows,
    /// from the next request on — no reopening, so nothing the user does meanwhile waits or is
    /// lost (issue 34). Open chats report what changed for them (a window, say) in this step.
    /// The id prefix stays the one the engine was made with: ids already given out keep theirs.
    pub fn reconfigure(&mut self, now: u64, mut config: EngineConfig) -> Step {
        config.id_prefix = self.config.id_prefix.clone();
        self.config = config;
        let mut step = Step::default();
        let chats: Vec<String> = self.sessions.keys().cloned().collect();
        for chat_id in chats {
            self.to_chat(now, &chat_id, &mut step, |_, _| {});
        }
        self.track_requests(&step);
        step
    }

    /// The user's approval rules from the next tool step on (Settings changed; SECURITY F2).
    pub fn set_tool_rules(&mut self, rules: crate::thread::ToolRules) {
        self.config.tool_rules = rules;
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    pub fn session(&self, chat_id: &str) -> Option<&ChatSession> {
        self.sessions.get(chat_id)
    }

    pub fn chat_ids(&self) -> impl Iterator<Item = &String> {
        self.sessions.keys()
    }

    /// An open chat's snapshot without copying it, to be written out (`SnapshotView`).
    pub fn snapshot_view(&self, chat_id: &str) -> Option<crate::event::SnapshotView<'_>> {
        self.sessions
            .get(chat_id)
            .map(|s| s.snapshot_view(&self.config))
    }

    pub fn snapshot(&self, chat_id: &str) -> Option<EventEnvelope> {
        self.sessions.get(chat_id).map(|s| s.snapshot(&self.config))
    }

    /// An open chat's "refact" export (what its workspace copy holds), written from its messages
    /// to `out` as it is made; `None`: the chat is not open.
    pub fn write_refact<W: std::io::Write>(
        &self,
        chat_id: &str,
        out: W,
    ) -> Option<Result<(), String>> {
        let session = self.sessions.get(chat_id)?;
        Some(crate::export::write_refact(
            out,
            chat_id,
            &session.thread.to_json(),
            &session.messages,
        ))
    }

    /// Every open chat hears the time (deadlines, backoff, stalls).
    fn tick(&mut self, now: u64, step: &mut Step) {
        let chats: Vec<String> = self.sessions.keys().cloned().collect();
        for chat_id in chats {
            self.to_chat(now, &chat_id, step, |s, ctx| {
                s.transition(ctx, Trigger::Tick)
            });
        }
    }

    pub fn handle(&mut self, now: u64, input: Input) -> Step {
        let mut step = Step::default();
        match input {
            Input::OpenChat {
                chat_id,
                trajectory,
                stored,
            } => self.open_chat(
                now,
                &chat_id,
                trajectory.as_ref(),
                stored.as_deref(),
                &mut step,
            ),
            Input::ReloadChat {
                chat_id,
                trajectory,
                stored,
            } => self.reload_chat(now, &chat_id, &trajectory, stored.as_deref(), &mut step),
            Input::CloseChat { chat_id } => {
                self.sessions.remove(&chat_id);
                self.requests.retain(|_, chat| *chat != chat_id);
            }
            Input::Command { chat_id, command } => self.command(now, &chat_id, command, &mut step),
            Input::StreamBytes { request_id, bytes } => {
                self.to_request(now, &request_id, Trigger::StreamBytes(bytes.0), &mut step)
            }
            Input::StreamEnd { request_id } => {
                self.to_request(now, &request_id, Trigger::StreamEnd, &mut step)
            }
            failed @ Input::RequestFailed { .. } => {
                if let Some((request_id, failure)) = failed.into_request_failure() {
                    let trigger = Trigger::RequestFailed(failure);
                    self.to_request(now, &request_id, trigger, &mut step);
                }
            }
            result @ Input::ToolResult { .. } => {
                if let Some((chat_id, tool_call_id, outcome)) = result.into_tool_result() {
                    self.to_chat(now, &chat_id, &mut step, |s, ctx| {
                        s.tool_result(ctx, tool_call_id, outcome)
                    });
                }
            }
            Input::ToolProgress {
                chat_id,
                tool_call_id,
                stream,
                text,
            } => self.to_chat(now, &chat_id, &mut step, |s, _| {
                s.on_tool_progress(tool_call_id, stream, text)
            }),
            Input::SaveAcked { chat_id, version } => {
                self.to_chat(now, &chat_id, &mut step, |s, _| s.on_save_acked(version))
            }
            Input::SaveFailed {
                chat_id,
                version,
                reason,
            } => {
                self.to_chat(now, &chat_id, &mut step, |s, ctx| {
                    s.on_save_failed(ctx, version, &reason)
                });
            }
            Input::Tick {} => self.tick(now, &mut step),
        }
        self.settle_subagents(now, &mut step);
        self.track_requests(&step);
        step
    }

    /// Opens (or reopens) a chat, from a stored trajectory when one is given.
    fn open_chat(
        &mut self,
        now: u64,
        chat_id: &str,
        trajectory: Option<&trajectory::TrajectoryText>,
        stored: Option<&[trajectory::StoredMessage]>,
        step: &mut Step,
    ) {
        let session = match trajectory.map(|t| trajectory::load_text(chat_id, t.get())) {
            Some(Ok(loaded)) => {
                let recovered = loaded.recovered_draft.clone();
                let mut session =
                    ChatSession::restored(chat_id, loaded.thread, loaded.messages, stored);
                if let Some(id) = recovered {
                    session.adopt_recovered_draft(&id);
                }
                session
            }
            Some(Err(refusal)) => return step.errors.push(refusal),
            None => ChatSession::new(chat_id, ThreadParams::default(), Vec::new()),
        };
        self.sessions.insert(chat_id.to_string(), session);
        if trajectory.is_some() {
            self.adopt_stored_subagents(now, chat_id);
            self.adopt_stored_child(now, chat_id);
        }
        self.to_chat(now, chat_id, step, |_, _| {});
    }

    fn reload_chat(
        &mut self,
        now: u64,
        chat_id: &str,
        trajectory: &trajectory::TrajectoryText,
        stored: Option<&[trajectory::StoredMessage]>,
        step: &mut Step,
    ) {
        let Some(session) = self.sessions.get(chat_id) else {
            return;
        };
        if let Err(refusal) = session.can_reload() {
            return step.errors.push(refusal);
        }
        match trajectory::load_text(chat_id, trajectory.get()) {
            Ok(loaded) => self.to_chat(now, chat_id, step, |s, ctx| {
                s.reload(ctx.config, loaded.thread, loaded.messages, stored)
            }),
            Err(refusal) => step.errors.push(refusal),
        }
    }

    fn command(&mut self, now: u64, chat_id: &str, command: Value, step: &mut Step) {
        let envelope: CommandEnvelope = match crate::command::parse_envelope(command.clone()) {
            Ok(envelope) => envelope,
            Err(refusal) => {
                let id = command
                    .get("client_request_id")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                // A refused command changes nothing: an unknown chat is not made for it.
                if !self.sessions.contains_key(chat_id) {
                    return step.errors.push(refusal);
                }
                return self.to_chat(now, chat_id, step, |s, _| s.refuse(&id, &refusal));
            }
        };
        if self.subagent_command(now, chat_id, &envelope, step) {
            return;
        }
        let branch = self.branch_source(&envelope);
        let abort = matches!(envelope.command, Command::Abort {});
        self.session_or_new(chat_id);
        self.to_chat(now, chat_id, step, |s, ctx| {
            s.receive(ctx, envelope, branch)
        });
        if abort {
            self.stop_subagents_of(now, chat_id, step);
        }
    }

    /// Chats are opened lazily: a command to an unknown chat creates it.
    fn session_or_new(&mut self, chat_id: &str) {
        self.sessions
            .entry(chat_id.to_string())
            .or_insert_with(|| ChatSession::new(chat_id, ThreadParams::default(), Vec::new()));
    }

    fn branch_source(&self, envelope: &CommandEnvelope) -> Option<BranchSource> {
        let Command::BranchFromChat {
            source_chat_id,
            up_to_message_id,
        } = &envelope.command
        else {
            return None;
        };
        let source = self.sessions.get(source_chat_id)?;
        let end = source
            .messages
            .iter()
            .position(|m| &m.message_id == up_to_message_id)?;
        let root = source
            .thread
            .root_chat_id
            .clone()
            .unwrap_or_else(|| source_chat_id.clone());
        Some(BranchSource {
            messages: source.messages[..=end].to_vec(),
            root_chat_id: root,
        })
    }

    fn to_request(&mut self, now: u64, request_id: &str, trigger: Trigger, step: &mut Step) {
        let Some(chat_id) = self.requests.get(request_id).cloned() else {
            return;
        };
        if !matches!(trigger, Trigger::StreamBytes(_)) {
            self.requests.remove(request_id);
        }
        self.to_chat(now, &chat_id, step, |s, ctx| s.transition(ctx, trigger));
    }

    fn to_chat(
        &mut self,
        now: u64,
        chat_id: &str,
        step: &mut Step,
        f: impl FnOnce(&mut ChatSession, &mut Ctx),
    ) {
        let Some(session) = self.sessions.get_mut(chat_id) else {
            return step.errors.push(Refusal::UnknownChat {
                chat_id: chat_id.to_string(),
            });
        };
        let mut ctx = Ctx {
            now,
            config: &self.config,
            ids: &mut self.ids,
        };
        f(session, &mut ctx);
        let (events, effects) = session.finish_step(&mut ctx);
        step.events.extend(events);
        step.effects.extend(effects);
    }

    fn track_requests(&mut self, step: &Step) {
        for effect in &step.effects {
            match effect {
                Effect::StartRequest {
                    chat_id,
                    request_id,
                    ..
                } => {
                    self.requests.insert(request_id.clone(), chat_id.clone());
                }
                Effect::CancelRequest { request_id } => {
                    self.requests.remove(request_id);
                }
                _ => {}
            }
        }
    }
}
