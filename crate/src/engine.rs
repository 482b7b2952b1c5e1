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
use serde_json::Value;

/// Bytes from the host: a JSON string (UTF-8 text) or an array of byte values.
#[derive(Serialize, Clone, Debug, PartialEq, Default)]
#[serde(transparent)]
pub struct Bytes(pub Vec<u8>);

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        // By hand: an untagged derive would buffer the value before trying each shape.
        match Value::deserialize(de)? {
            Value::String(text) => Ok(Bytes(text.into_bytes())),
            raw @ Value::Array(_) => Vec::<u8>::deserialize(raw)
                .map(Bytes)
                .map_err(serde::de::Error::custom),
            other => Err(serde::de::Error::custom(format!(
                "invalid bytes: {other}, expected a string or an array of byte values"
            ))),
        }
    }
}

/// Read by hand (`tagged::Fields`, see there why), written by derive.
#[derive(Serialize, Clone, Debug, PartialEq)]
#[serde(tag = "input", rename_all = "snake_case")]
pub enum Input {
    OpenChat {
        chat_id: String,
        /// The stored chat as JSON text: read once, straight into the message model
        /// (`trajectory::load_text`; no `Value` tree of a long chat is built).
        #[serde(default)]
        trajectory: Option<trajectory::TrajectoryText>,
        /// Where the trajectory's messages are stored, in order (the browser host reads it with
        /// them); without it their indexes are taken as their positions.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stored: Option<Vec<trajectory::StoredMessage>>,
    },
    CloseChat {
        chat_id: String,
    },
    /// The chat's stored records changed under the engine (sync brought another device's
    /// messages): an open, idle chat with nothing unsaved takes them and its subscribers get a
    /// snapshot; a busy or unsaved one refuses, and the host asks again when it is idle.
    ReloadChat {
        chat_id: String,
        trajectory: trajectory::TrajectoryText,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stored: Option<Vec<trajectory::StoredMessage>>,
    },
    Command {
        chat_id: String,
        command: Value,
    },
    StreamBytes {
        request_id: String,
        bytes: Bytes,
    },
    StreamEnd {
        request_id: String,
    },
    RequestFailed {
        request_id: String,
        #[serde(default)]
        status: Option<u16>,
        #[serde(default)]
        error_type: Option<String>,
        #[serde(default)]
        message: String,
        #[serde(default)]
        retry_after_ms: Option<u64>,
        /// The response headers, if there was a response; names in any case.
        #[serde(default)]
        headers: LiteMap<String, String>,
        /// A context window the error body states (llama.cpp's `n_ctx`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        context_window: Option<u64>,
        /// The prompt's size in tokens the error body states (llama.cpp's `n_prompt_tokens`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prompt_tokens: Option<u64>,
    },
    ToolResult {
        chat_id: String,
        tool_call_id: String,
        content: String,
        #[serde(default)]
        tool_failed: bool,
        #[serde(default)]
        data: Option<Value>,
        /// Keys the tool merges into the thread (SPEC §8.3); never the ones that steer the agent.
        #[serde(default)]
        session_metadata: Option<serde_json::Map<String, Value>>,
        /// Parts beside the text — images an MCP tool returned (`{type: "image_url", …}`): the
        /// result becomes a parts message, sent as images to providers that take them.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        parts: Vec<Value>,
    },
    /// A line of output from a running workspace tool (`run_command`'s NDJSON, MCP progress).
    ToolProgress {
        chat_id: String,
        tool_call_id: String,
        #[serde(default)]
        stream: String,
        text: String,
    },
    SaveAcked {
        chat_id: String,
        version: u64,
    },
    SaveFailed {
        chat_id: String,
        version: u64,
        #[serde(default)]
        reason: String,
    },
    Tick {},
}

impl<'de> Deserialize<'de> for Input {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        tagged::read(deserializer, Input::from_fields)
    }
}

impl Input {
    /// The `input` tags, in the order the TypeScript union lists them (a test compares them).
    pub const VARIANTS: &'static [&'static str] = &[
        "open_chat",
        "close_chat",
        "reload_chat",
        "command",
        "stream_bytes",
        "stream_end",
        "request_failed",
        "tool_result",
        "tool_progress",
        "save_acked",
        "save_failed",
        "tick",
    ];

    fn from_fields(mut f: Fields) -> Result<Self, serde_json::Error> {
        let tag = f.tag("input")?;
        Ok(match tag.as_str() {
            "open_chat" => Input::OpenChat {
                chat_id: f.take("chat_id")?,
                trajectory: f.or_default("trajectory")?,
                stored: f.or_default("stored")?,
            },
            "close_chat" => Input::CloseChat {
                chat_id: f.take("chat_id")?,
            },
            "reload_chat" => Input::ReloadChat {
                chat_id: f.take("chat_id")?,
                trajectory: f.take("trajectory")?,
                stored: f.or_default("stored")?,
            },
            "command" => Input::Command {
                chat_id: f.take("chat_id")?,
                command: f.take("command")?,
            },
            "stream_bytes" => Input::StreamBytes {
                request_id: f.take("request_id")?,
                bytes: f.take("bytes")?,
            },
            "stream_end" => Input::StreamEnd {
                request_id: f.take("request_id")?,
            },
            "request_failed" => Input::RequestFailed {
                request_id: f.take("request_id")?,
                status: f.or_default("status")?,
                error_type: f.or_default("error_type")?,
                message: f.or_default("message")?,
                retry_after_ms: f.or_default("retry_after_ms")?,
                headers: f.or_default("headers")?,
                context_window: f.or_default("context_window")?,
                prompt_tokens: f.or_default("prompt_tokens")?,
            },
            "tool_result" => Input::ToolResult {
                chat_id: f.take("chat_id")?,
                tool_call_id: f.take("tool_call_id")?,
                content: f.take("content")?,
                tool_failed: f.or_default("tool_failed")?,
                data: f.or_default("data")?,
                session_metadata: f.or_default("session_metadata")?,
                parts: f.or_default("parts")?,
            },
            "tool_progress" => Input::ToolProgress {
                chat_id: f.take("chat_id")?,
                tool_call_id: f.take("tool_call_id")?,
                stream: f.or_default("stream")?,
                text: f.take("text")?,
            },
            "save_acked" => Input::SaveAcked {
                chat_id: f.take("chat_id")?,
                version: f.take("version")?,
            },
            "save_failed" => Input::SaveFailed {
                chat_id: f.take("chat_id")?,
                version: f.take("version")?,
                reason: f.or_default("reason")?,
            },
            "tick" => Input::Tick {},
            other => return Err(tagged::unknown_variant(other, Self::VARIANTS)),
        })
    }
}

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

    pub fn snapshot(&self, chat_id: &str) -> Option<EventEnvelope> {
        self.sessions.get(chat_id).map(|s| s.snapshot(&self.config))
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
            Input::RequestFailed {
                request_id,
                status,
                error_type,
                message,
                retry_after_ms,
                headers,
                context_window,
                prompt_tokens,
            } => {
                let failure = RequestFailure {
                    status,
                    error_type,
                    message,
                    retry_after_ms,
                    headers,
                    context_window,
                    prompt_tokens,
                };
                self.to_request(now, &request_id, Trigger::RequestFailed(failure), &mut step);
            }
            Input::ToolResult {
                chat_id,
                tool_call_id,
                content,
                tool_failed,
                data,
                session_metadata,
                parts,
            } => {
                let outcome = ToolOutcome {
                    content,
                    failed: tool_failed,
                    data,
                    session_metadata,
                    parts,
                };
                self.to_chat(now, &chat_id, &mut step, |s, ctx| {
                    s.transition(
                        ctx,
                        Trigger::ToolResult {
                            tool_call_id,
                            outcome,
                        },
                    )
                });
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
            Input::Tick {} => {
                let chats: Vec<String> = self.sessions.keys().cloned().collect();
                for chat_id in chats {
                    self.to_chat(now, &chat_id, &mut step, |s, ctx| {
                        s.transition(ctx, Trigger::Tick)
                    });
                }
            }
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

    /// Performs what the chats' engine tools asked (spawn, wait), starts queued subagents, hands
    /// finished ones' answers to their parents, and refreshes each parent's subagent tree. Runs
    /// after every input until nothing moves (each pass consumes a request, ends a link or starts
    /// one, so it stops).
    fn settle_subagents(&mut self, now: u64, step: &mut Step) {
        if self.subagents.links().next().is_none()
            && !self.sessions.values().any(ChatSession::has_agent_requests)
        {
            return;
        }
        for _ in 0..1_000 {
            let mut moved = false;
            let asking: Vec<String> = self
                .sessions
                .iter()
                .filter(|(_, s)| s.has_agent_requests())
                .map(|(id, _)| id.clone())
                .collect();
            for parent in asking {
                let requests = self
                    .sessions
                    .get_mut(&parent)
                    .map(ChatSession::take_agent_requests)
                    .unwrap_or_default();
                for request in requests {
                    moved = true;
                    self.agent_request(now, &parent, request, step);
                }
            }
            moved |= self.collect_finished(now, step);
            moved |= self.answer_waiting_parents(now, step);
            for child in self.subagents.ready_to_start() {
                moved = true;
                self.start_child(now, &child, step);
            }
            if !moved {
                break;
            }
        }
        self.refresh_subagent_views(now, step);
    }

    fn agent_request(&mut self, now: u64, parent: &str, request: AgentRequest, step: &mut Step) {
        match request {
            AgentRequest::Spawn {
                call_id,
                task,
                title,
                tools,
                model,
                wait,
            } => self.spawn(now, parent, &call_id, task, title, tools, model, wait, step),
            AgentRequest::Wait { call_id, agent_ids } => {
                self.wait_agents(now, parent, &call_id, &agent_ids, step)
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn spawn(
        &mut self,
        now: u64,
        parent: &str,
        call_id: &str,
        task: String,
        title: Option<String>,
        tools: Option<Vec<String>>,
        model: Option<String>,
        wait: bool,
        step: &mut Step,
    ) {
        let Some(session) = self.sessions.get(parent) else {
            return;
        };
        let parent_thread = session.thread.clone();
        let root = parent_thread
            .root_chat_id
            .clone()
            .unwrap_or_else(|| parent.to_string());
        let parent_tools: Vec<String> = session
            .offered_tools(&self.config)
            .into_iter()
            .filter(|t| crate::tools::EngineTool::from_name(&t.name).is_none())
            .map(|t| t.name)
            .collect();
        if let Some(reason) = subagents::refusal(
            &parent_thread,
            self.subagents.count_for_root(&root),
            tools.as_deref(),
            &parent_tools,
        ) {
            return self.answer_call(now, parent, call_id, ToolOutcome::failed(reason), step);
        }
        let mut child = subagents::child_id(parent, call_id);
        while self.sessions.contains_key(&child) || self.subagents.get(&child).is_some() {
            child.push('_');
        }
        let title = title.unwrap_or_else(|| subagents::title_of(&task));
        let thread = subagents::child_thread(parent, &parent_thread, &title, tools, model);
        self.sessions
            .insert(child.clone(), ChatSession::new_linked(&child, thread));
        self.subagents.add(Link {
            child: child.clone(),
            parent: parent.to_string(),
            root,
            call_id: call_id.to_string(),
            task: task.clone(),
            title: title.clone(),
            wait,
            status: LinkStatus::Queued,
            outcome: None,
            delivered: false,
            started_at_ms: now,
            ended_at_ms: None,
            order: 0,
        });
        let spawned = Event::SubagentSpawned {
            parent: parent.to_string(),
            child: child.clone(),
            tool_call_id: call_id.to_string(),
            title: title.clone(),
            task,
        };
        self.to_chat(now, parent, step, |s, _| s.emit(spawned));
        if !wait {
            let started = format!(
                "Started subagent `{child}` ({title}); it works while you go on. Call wait_agents to get its answer."
            );
            self.answer_call(now, parent, call_id, ToolOutcome::ok(started), step);
        }
    }

    fn start_child(&mut self, now: u64, child: &str, step: &mut Step) {
        let Some(link) = self.subagents.get_mut(child) else {
            return;
        };
        link.status = LinkStatus::Running;
        link.started_at_ms = now;
        let command = subagents::task_command(link);
        self.command(now, child, command, step);
    }

    /// `wait_agents`: answered at once when every subagent named is over; otherwise the parent's
    /// turn waits for the rest (and gets what is over already now).
    fn wait_agents(
        &mut self,
        now: u64,
        parent: &str,
        call_id: &str,
        ids: &[String],
        step: &mut Step,
    ) {
        let mine: Vec<String> = self
            .subagents
            .children_of(parent)
            .into_iter()
            .filter(|l| !l.wait && (!ids.is_empty() || !l.delivered))
            .map(|l| l.child.clone())
            .collect();
        let unknown: Vec<&String> = ids.iter().filter(|id| !mine.contains(id)).collect();
        if !unknown.is_empty() {
            let reason = format!(
                "wait_agents: no subagent started with wait: false is called {}. Yours: {}.",
                unknown
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                if mine.is_empty() {
                    "none".to_string()
                } else {
                    mine.join(", ")
                }
            );
            return self.answer_call(now, parent, call_id, ToolOutcome::failed(reason), step);
        }
        let wanted = if ids.is_empty() { mine } else { ids.to_vec() };
        if wanted.is_empty() {
            let none = ToolOutcome::ok("There are no subagents to wait for.".to_string());
            return self.answer_call(now, parent, call_id, none, step);
        }
        let (over, open): (Vec<String>, Vec<String>) = wanted
            .into_iter()
            .partition(|id| self.subagents.get(id).is_some_and(|l| l.status.is_over()));
        let answers = self.take_answers(&over);
        if open.is_empty() {
            return self.answer_call(now, parent, call_id, ToolOutcome::ok(answers), step);
        }
        let content = format!(
            "Waiting for {} (their answers come as the next message).{}",
            open.join(", "),
            if answers.is_empty() {
                String::new()
            } else {
                format!("\n\nAlready over:\n{answers}")
            }
        );
        self.to_chat(now, parent, step, |s, ctx| {
            s.transition(
                ctx,
                Trigger::AgentsPending {
                    tool_call_id: call_id.to_string(),
                    content,
                    agents: open,
                },
            )
        });
    }

    /// The answers of these children (over), marked delivered.
    fn take_answers(&mut self, children: &[String]) -> String {
        let mut text = Vec::new();
        for child in children {
            if let Some(link) = self.subagents.get_mut(child) {
                link.delivered = true;
                if let Some(outcome) = &link.outcome {
                    text.push(subagents::result_text(link, outcome));
                }
            }
        }
        text.join("\n\n")
    }

    /// Children whose turn ended (or whose chat was closed) become over; a waiting parent's call
    /// gets the answer, or the reason as a tool error.
    fn collect_finished(&mut self, now: u64, step: &mut Step) -> bool {
        let running: Vec<String> = self
            .subagents
            .links()
            .filter(|l| l.status == LinkStatus::Running)
            .map(|l| l.child.clone())
            .collect();
        let mut moved = false;
        for child in running {
            let outcome = match self.sessions.get(&child) {
                Some(session) => {
                    match subagents::child_status(session.state(), &session.messages) {
                        Ok(_) => continue,
                        Err(outcome) => outcome,
                    }
                }
                None => Outcome {
                    status: LinkStatus::Stopped,
                    text: "The subagent's chat was closed.".into(),
                },
            };
            moved = true;
            self.end_link(now, &child, outcome, step);
        }
        moved
    }

    fn end_link(&mut self, now: u64, child: &str, outcome: Outcome, step: &mut Step) {
        let Some(link) = self.subagents.get_mut(child) else {
            return;
        };
        link.status = outcome.status;
        link.ended_at_ms = Some(now);
        link.outcome = Some(outcome.clone());
        let link = link.clone();
        let result = Event::SubagentResult {
            parent: link.parent.clone(),
            child: link.child.clone(),
            tool_call_id: link.call_id.clone(),
            outcome: outcome.status.name().to_string(),
            text: outcome.text.clone(),
        };
        self.to_chat(now, &link.parent, step, |s, _| s.emit(result));
        if link.wait {
            if let Some(l) = self.subagents.get_mut(child) {
                l.delivered = true;
            }
            let content = subagents::result_text(&link, &outcome);
            let answer = if outcome.status == LinkStatus::Done {
                ToolOutcome::ok(content)
            } else {
                ToolOutcome::failed(content)
            };
            self.answer_call(now, &link.parent, &link.call_id, answer, step);
        }
    }

    /// A parent left waiting by `wait_agents` whose subagents are all over gets their answers.
    fn answer_waiting_parents(&mut self, now: u64, step: &mut Step) -> bool {
        let ready: Vec<(String, Vec<String>)> = self
            .sessions
            .iter()
            .filter(|(_, s)| !s.waiting_for_agents().is_empty())
            .filter(|(_, s)| {
                s.waiting_for_agents()
                    .iter()
                    .all(|c| self.subagents.get(c).is_none_or(|l| l.status.is_over()))
            })
            .map(|(id, s)| (id.clone(), s.waiting_for_agents().to_vec()))
            .collect();
        let moved = !ready.is_empty();
        for (parent, children) in ready {
            let links: Vec<Link> = children
                .iter()
                .filter_map(|c| self.subagents.get(c).cloned())
                .collect();
            let text = subagents::answers_message(&links.iter().collect::<Vec<_>>());
            for child in &children {
                if let Some(link) = self.subagents.get_mut(child) {
                    link.delivered = true;
                }
            }
            self.to_chat(now, &parent, step, |s, ctx| {
                s.transition(ctx, Trigger::AgentsAnswered(text))
            });
        }
        moved
    }

    /// The parent was stopped: every subagent below it stops too (their partial work kept and
    /// marked); queued ones never start.
    fn stop_subagents_of(&mut self, now: u64, parent: &str, step: &mut Step) {
        for child in self.subagents.open_descendants(parent) {
            let queued = self
                .subagents
                .get(&child)
                .is_some_and(|l| l.status == LinkStatus::Queued);
            if !queued {
                self.to_chat(now, &child, step, |s, ctx| {
                    s.transition(ctx, Trigger::Abort)
                });
            }
            let text = if queued {
                "The subagent was stopped with its parent before it started."
            } else {
                "The subagent was stopped with its parent; its partial work is in its chat."
            };
            let outcome = Outcome {
                status: LinkStatus::Stopped,
                text: text.to_string(),
            };
            self.end_link(now, &child, outcome, step);
        }
    }

    fn answer_call(
        &mut self,
        now: u64,
        chat: &str,
        call_id: &str,
        outcome: ToolOutcome,
        step: &mut Step,
    ) {
        if !self.sessions.contains_key(chat) {
            return;
        }
        self.to_chat(now, chat, step, |s, ctx| {
            s.transition(
                ctx,
                Trigger::ToolResult {
                    tool_call_id: call_id.to_string(),
                    outcome,
                },
            )
        });
    }

    /// Each parent's runtime shows its children: status, model, tokens, time, approvals asked.
    fn refresh_subagent_views(&mut self, now: u64, step: &mut Step) {
        for parent in self.subagents.parents() {
            let views: Vec<_> = self
                .subagents
                .children_of(&parent)
                .into_iter()
                .map(|link| {
                    let session = self.sessions.get(&link.child);
                    let status = match (link.status, session) {
                        (LinkStatus::Running, Some(s)) => {
                            subagents::child_status(s.state(), &s.messages).unwrap_or("running")
                        }
                        (status, _) => status.name(),
                    };
                    let model =
                        session.map_or(String::new(), |s| s.answering_model(&self.config).model);
                    let tokens = session.map_or(0, |s| subagents::tokens_used(&s.messages));
                    let reasons = session.map(ChatSession::pause_reasons).unwrap_or_default();
                    subagents::view(link, status, &model, tokens, reasons)
                })
                .collect();
            let changed = self
                .sessions
                .get(&parent)
                .is_some_and(|s| s.subagents() != views.as_slice());
            if changed {
                self.to_chat(now, &parent, step, |s, _| s.set_subagents(views));
            }
        }
    }
}
