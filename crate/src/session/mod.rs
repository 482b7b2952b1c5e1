//! `ChatSession`: one chat — its thread, messages, state machine, queue, event counter, draft
//! and save bookkeeping (SPEC §2). Every state change goes through `transition`, the one place
//! where state × trigger is matched; each arm calls a named function in `turn`, `step` or here.
//!
//! Invariants: `seq` rises by exactly 1 per emitted event; a refused command changes nothing but
//! the event it is answered with; applying the emitted events to a snapshot gives `snapshot()`.

mod commands;
mod compaction;
mod failure;
mod late_result;
mod left_out;
mod proposals;
mod report;
pub mod state;
mod tool_step;
mod trigger;
mod turn;
mod window;

pub use crate::event::{ContextUsage, ErrorInfo, RetryStatus, Runtime};
pub use commands::BranchSource;
pub use state::SessionState;
pub use trigger::{RequestFailure, Trigger};

use crate::config::{EngineConfig, IdGen};
use crate::delta::Draft;
use crate::effect::Effect;
use crate::event::{Event, EventEnvelope, QueuedItemSummary};
use crate::message::{ChatMessage, Role};
use crate::queue::CommandQueue;
use crate::thread::PromptProfile;
use crate::thread::ThreadParams;
use crate::tools::ToolOutcome;
use crate::trajectory::TrajectoryBook;
use serde_json::Value;

/// What the host gives every call: the time, the config, the id source.
pub struct Ctx<'a> {
    pub now: u64,
    pub config: &'a EngineConfig,
    pub ids: &'a mut IdGen,
}

#[derive(Debug)]
pub struct ChatSession {
    pub chat_id: String,
    pub thread: ThreadParams,
    pub messages: Vec<ChatMessage>,
    state: SessionState,
    queue: CommandQueue,
    event_seq: u64,
    draft: Option<Draft>,
    /// Characters of the streaming answer so far (`draft_tokens` is a quarter of it).
    draft_chars: u64,
    /// The model the provider said answers this round (the answer is labelled with it).
    reported_model: Option<String>,
    book: TrajectoryBook,
    /// Set by `abort`: the queue waits for the next command before it is popped again.
    hold_queue: bool,
    last_runtime: Option<Runtime>,
    /// What the runtime reports that is derived from the stored history (the token estimate,
    /// the plan, the pending questions); recomputed only after the history changes, so a stream
    /// chunk costs O(chunk), not O(chat).
    derived: std::cell::OnceCell<Derived>,
    last_queue: Vec<QueuedItemSummary>,
    /// The last compaction's status for `runtime_updated` (`running`, `applied`, …).
    compression_phase: Option<String>,
    /// Why compaction started, was skipped or failed (SPEC §2's `compression_reason`).
    compression_reason: Option<String>,
    /// After a skipped or failed compaction, none is tried before the history reaches this length.
    compaction_blocked_until: Option<usize>,
    /// The streaming reply as last checkpointed for saving, and when.
    draft_checkpoint: Option<ChatMessage>,
    pub(crate) draft_checkpoint_at: u64,
    /// The history limit's strength for the last chat request sent.
    last_strength: Option<crate::history_limit::CompressionStrength>,
    /// A context window a provider reported in a context-too-long error (it caps `n_ctx`).
    pub(crate) learned_n_ctx: Option<u64>,
    /// How much larger than estimated the provider counts this chat's prompts (≥ 1; learned
    /// from a refusal the window should have held).
    estimate_scale: f64,
    /// What the history limit left out of the last request, and what the last marker said.
    left_out: left_out::LeftOutShown,
    /// What the engine tools asked of the engine (spawn, wait); drained after each input.
    agent_requests: Vec<crate::tools::AgentRequest>,
    /// This chat's subagents as they stand (set by the engine; shown in the runtime).
    subagents: Vec<crate::event::SubagentView>,
    /// In `WaitingUserInput` after `wait_agents`: the subagents the turn waits for.
    waiting_for_agents: Vec<String>,
    /// After a fallback (issue 18): the model this turn answers with, and how many of the
    /// chat's fallback models it went through. Reset when a turn starts.
    turn_model: Option<crate::thread::ModelRef>,
    fallbacks_used: usize,
    /// Calls made for edit blocks and suggested commands, not answered yet (`proposals`).
    proposals_running: Vec<String>,
    /// The prompt items' stability tiers (issue 40), updated after each chat request is built.
    stability: crate::stability::Tracker,
    prompt_tiers: Option<crate::event::PromptTiers>,
    events: Vec<EventEnvelope>,
    effects: Vec<Effect>,
}

/// See `ChatSession::derived` (`report`).
#[derive(Debug)]
struct Derived {
    estimated_tokens: u64,
    plan: Option<crate::plan::CurrentPlan>,
    questions: Option<Vec<String>>,
}

impl ChatSession {
    pub fn new(chat_id: &str, thread: ThreadParams, messages: Vec<ChatMessage>) -> Self {
        Self::restored(chat_id, thread, messages, None)
    }

    /// A chat loaded from storage, with where its messages are stored (see `TrajectoryBook::restore`).
    pub fn restored(
        chat_id: &str,
        thread: ThreadParams,
        messages: Vec<ChatMessage>,
        stored: Option<&[crate::trajectory::StoredMessage]>,
    ) -> Self {
        let mut book = TrajectoryBook::default();
        book.restore(&messages, stored);
        ChatSession {
            chat_id: chat_id.to_string(),
            thread,
            messages,
            state: SessionState::Idle,
            queue: CommandQueue::default(),
            event_seq: 0,
            draft: None,
            draft_chars: 0,
            reported_model: None,
            book,
            hold_queue: false,
            last_runtime: None,
            derived: std::cell::OnceCell::new(),
            last_queue: Vec::new(),
            compression_phase: None,
            compression_reason: None,
            compaction_blocked_until: None,
            last_strength: None,
            draft_checkpoint: None,
            draft_checkpoint_at: 0,
            learned_n_ctx: None,
            estimate_scale: 1.0,
            left_out: Default::default(),
            agent_requests: Vec::new(),
            subagents: Vec::new(),
            waiting_for_agents: Vec::new(),
            turn_model: None,
            fallbacks_used: 0,
            proposals_running: Vec::new(),
            stability: Default::default(),
            prompt_tiers: None,
            events: Vec::new(),
            effects: Vec::new(),
        }
    }

    pub fn state(&self) -> &SessionState {
        &self.state
    }

    /// Whether the stored history may replace this chat's now: not mid-turn, nothing queued and
    /// nothing unsaved (which the store does not hold yet).
    pub fn can_reload(&self) -> Result<(), crate::error::Refusal> {
        if self.state.is_busy() || self.book.is_dirty() || !self.queue.is_empty() {
            return Err(crate::error::Refusal::Refused {
                state: self.state.name().to_string(),
                command: "reload_chat".into(),
                accepts: vec!["idle, saved and with nothing queued".into()],
            });
        }
        Ok(())
    }

    /// Takes the stored history (see `can_reload`); subscribers get it as a snapshot in the
    /// event stream.
    pub fn reload(
        &mut self,
        config: &EngineConfig,
        thread: ThreadParams,
        messages: Vec<ChatMessage>,
        stored: Option<&[crate::trajectory::StoredMessage]>,
    ) {
        let mut book = TrajectoryBook::default();
        book.restore(&messages, stored);
        self.book = book;
        self.thread = thread;
        self.messages = messages;
        self.derived.take();
        self.last_runtime = None;
        self.event_seq += 1;
        let snapshot = self.snapshot(config);
        self.events.push(snapshot);
    }

    /// A chat the engine made (a subagent's): its thread is saved with its first save, as a
    /// `set_params` would have it saved.
    pub fn new_linked(chat_id: &str, thread: ThreadParams) -> Self {
        let mut session = ChatSession::new(chat_id, thread, Vec::new());
        session.book.touch_thread();
        session
    }

    /// What the engine tools asked since the last call (the engine performs it).
    pub fn take_agent_requests(&mut self) -> Vec<crate::tools::AgentRequest> {
        std::mem::take(&mut self.agent_requests)
    }

    /// The calls waiting for the user's approval (a subagent's show in its parent's tree).
    pub fn pause_reasons(&self) -> Vec<crate::event::PauseReason> {
        match &self.state {
            SessionState::Paused(paused) => paused.reasons.clone(),
            _ => Vec::new(),
        }
    }

    pub fn has_agent_requests(&self) -> bool {
        !self.agent_requests.is_empty()
    }

    /// The engine's view of this chat's subagents (the runtime shows it).
    pub fn set_subagents(&mut self, views: Vec<crate::event::SubagentView>) {
        self.subagents = views;
    }

    pub fn subagents(&self) -> &[crate::event::SubagentView] {
        &self.subagents
    }

    /// The subagents a `wait_agents` left this chat waiting for (empty when it waits for none).
    pub fn waiting_for_agents(&self) -> &[String] {
        match self.state {
            SessionState::WaitingUserInput => &self.waiting_for_agents,
            _ => &[],
        }
    }

    /// The tools this chat may use: engine tools, the host's and workspace tools, narrowed by
    /// its `allowed_tools` (a subagent's subset); a tool whose rule is `deny` is not offered
    /// (the model would only be refused).
    pub fn offered_tools(&self, config: &EngineConfig) -> Vec<crate::tools::ToolSpec> {
        if self.prompt_profile(config) != PromptProfile::Agent {
            return Vec::new(); // a plain chat, or edit blocks: no tools
        }
        let mut tools = crate::tools::engine_tool_specs();
        tools.extend(config.workspace_tools.iter().cloned());
        tools.extend(config.host_tools.iter().cloned());
        tools.retain(|t| {
            crate::tools::EngineTool::from_name(&t.name).is_some()
                || (self.thread.allows_tool(&t.name)
                    && self
                        .thread
                        .rule_for(&config.tool_rules, &t.name, t.is_read_only())
                        != crate::thread::ToolRule::Deny)
        });
        tools
    }

    pub fn seq(&self) -> u64 {
        self.event_seq
    }

    /// The one transition function: state × trigger → next state (SPEC §2.1).
    pub fn transition(&mut self, ctx: &mut Ctx, trigger: Trigger) {
        use SessionState as S;
        let state = std::mem::replace(&mut self.state, S::Idle);
        self.state = match (state, trigger) {
            (state, Trigger::Abort) => self.abort(ctx, state),
            (state, Trigger::StartTurn) if state.can_start_turn() => self.start_turn(ctx),
            (S::Generating(g), Trigger::StreamBytes(bytes)) => self.on_stream_bytes(ctx, g, &bytes),
            (S::Generating(g), Trigger::StreamEnd) => self.on_stream_end(ctx, g),
            (S::Generating(g), Trigger::RequestFailed(failure)) => {
                self.on_request_failed(ctx, g, failure)
            }
            (S::Generating(g), Trigger::Tick) => self.on_generating_tick(ctx, g),
            (
                S::ExecutingTools(step) | S::WaitingIde(step),
                Trigger::ToolResult {
                    tool_call_id,
                    outcome,
                },
            ) => self.on_tool_result(ctx, step, &tool_call_id, outcome),
            (S::Paused(paused), Trigger::Approve(ids)) => self.on_approve(ctx, paused, &ids),
            (S::Paused(paused), Trigger::Reject(ids, reason)) => {
                self.on_reject(ctx, paused, &ids, reason.as_deref())
            }
            (S::Error(_) | S::Completed, Trigger::HistoryEdited) => S::Idle,
            (
                S::ExecutingTools(step),
                Trigger::AgentsPending {
                    tool_call_id,
                    content,
                    agents,
                },
            ) => self.on_agents_pending(ctx, step, &tool_call_id, content, agents),
            (S::WaitingUserInput, Trigger::AgentsAnswered(text))
                if !self.waiting_for_agents.is_empty() =>
            {
                self.on_agents_answered(ctx, text)
            }
            (
                state,
                Trigger::LateToolResult {
                    tool_call_id,
                    outcome,
                    go_on,
                },
            ) if state.can_start_turn() => {
                self.on_late_tool_result(ctx, state, &tool_call_id, outcome, go_on)
            }
            // Anything else is stale (bytes of a cancelled request, a late tool result): ignored.
            (state, _) => state,
        };
    }

    /// Ends one call into the session: pops what the queue allows, emits the runtime and queue
    /// changes and a save, and hands back what was produced.
    pub fn finish_step(&mut self, ctx: &mut Ctx) -> (Vec<EventEnvelope>, Vec<Effect>) {
        self.pump(ctx);
        self.emit_status_changes(ctx);
        if let Some(save) = self.book.next_save(
            ctx.now,
            &self.chat_id,
            &self.thread,
            &self.messages,
            self.draft_checkpoint.as_ref(),
        ) {
            self.effects.push(Effect::SaveTrajectory { save });
        }
        (
            std::mem::take(&mut self.events),
            std::mem::take(&mut self.effects),
        )
    }

    pub(crate) fn emit(&mut self, event: Event) {
        self.event_seq += 1;
        self.events.push(EventEnvelope {
            chat_id: self.chat_id.clone(),
            seq: self.event_seq,
            event,
        });
    }

    pub(crate) fn effect(&mut self, effect: Effect) {
        self.effects.push(effect);
    }

    /// The system prompt of this chat: its own (`set_params`), else the host's for its profile
    /// (the agent prompt, or the plain chat's — with the workspace context if the chat asks).
    pub(crate) fn system_prompt<'a>(&'a self, config: &'a EngineConfig) -> Option<&'a str> {
        let own = self
            .thread
            .system_prompt
            .as_deref()
            .filter(|p| !p.trim().is_empty());
        if own.is_some() {
            return own;
        }
        match self.prompt_profile(config) {
            PromptProfile::Agent => config.system_prompt.as_deref(),
            PromptProfile::Chat if self.thread.workspace_context => config
                .chat_workspace_prompt
                .as_deref()
                .or(config.chat_prompt.as_deref())
                .or(Some(crate::prompt::DEFAULT_CHAT_PROMPT)),
            PromptProfile::Chat => config
                .chat_prompt
                .as_deref()
                .or(Some(crate::prompt::DEFAULT_CHAT_PROMPT)),
            PromptProfile::EditBlocks => config
                .edit_blocks_prompt
                .as_deref()
                .or(Some(crate::prompt::EDIT_BLOCKS_PROMPT)),
        }
    }

    /// The chat's prompt profile: its own choice, else `chat` for a provider marked chat only
    /// and for the model in the page (unless marked as calling tools) — `edit_blocks` when that
    /// provider is set to edit blocks — else `agent`.
    pub fn prompt_profile(&self, config: &EngineConfig) -> PromptProfile {
        if let Some(chosen) = self.thread.prompt_profile {
            return chosen;
        }
        let answering = self.answering_provider(config);
        let provider = config.provider_for(answering);
        let tool_use = provider.and_then(|p| p.tool_use);
        let edit_blocks = provider.and_then(|p| p.edit_blocks) == Some(true);
        match (tool_use, answering) {
            (Some(false), _) | (None, crate::provider::ProviderKind::Local) if edit_blocks => {
                PromptProfile::EditBlocks
            }
            (Some(false), _) | (None, crate::provider::ProviderKind::Local) => PromptProfile::Chat,
            _ => PromptProfile::Agent,
        }
    }

    /// A reply recovered from a checkpoint on load: saved as a message, checkpoint cleared.
    pub fn adopt_recovered_draft(&mut self, message_id: &str) {
        self.book.touch(message_id);
        self.book.touch_draft();
    }

    /// Checkpoints the streaming reply at most every `DRAFT_CHECKPOINT_MS` (SECURITY decision
    /// 5): a reload mid-stream then keeps the reply up to the last checkpoint.
    pub(crate) fn checkpoint_draft(&mut self, now: u64) {
        let Some(draft) = self.draft.as_ref() else {
            return;
        };
        if draft.is_empty() || now < self.draft_checkpoint_at + DRAFT_CHECKPOINT_MS {
            return;
        }
        let mut message = draft.clone().into_message(Some("interrupted".into()), now);
        message.tool_calls = None;
        self.draft_checkpoint = Some(message);
        self.draft_checkpoint_at = now;
        self.book.touch_draft();
    }

    /// The streaming reply ended (committed, kept as a partial, or dropped): its checkpoint goes.
    pub(crate) fn clear_draft_checkpoint(&mut self) {
        if self.draft_checkpoint.take().is_some() {
            self.book.touch_draft();
        }
        self.draft_checkpoint_at = 0;
    }

    /// The snapshot as `snapshot` writes it, borrowing the messages (what a subscriber is sent).
    pub fn snapshot_view(&self, config: &EngineConfig) -> crate::event::SnapshotView<'_> {
        crate::event::SnapshotView::new(
            &self.chat_id,
            self.event_seq,
            self.thread.to_json(),
            self.runtime(config),
            &self.messages,
            self.draft.as_ref(),
        )
    }

    pub fn snapshot(&self, config: &EngineConfig) -> EventEnvelope {
        EventEnvelope {
            chat_id: self.chat_id.clone(),
            seq: self.event_seq,
            event: Event::Snapshot {
                thread: self.thread.to_json(),
                runtime: self.runtime(config),
                messages: self.messages.clone(),
                draft: self.draft.clone(),
            },
        }
    }

    // --- History mutations: each emits its event and marks the trajectory dirty. ---

    pub(crate) fn push_message(&mut self, message: ChatMessage) {
        self.derived.take();
        let index = self.messages.len();
        self.book.touch(&message.message_id);
        self.messages.push(message.clone());
        self.emit(Event::MessageAdded { message, index });
    }

    pub(crate) fn insert_message_at(&mut self, index: usize, message: ChatMessage) {
        self.derived.take();
        let index = index.min(self.messages.len());
        self.book.touch(&message.message_id);
        self.messages.insert(index, message.clone());
        self.emit(Event::MessageAdded { message, index });
    }

    pub(crate) fn replace_message(&mut self, index: usize, message: ChatMessage) {
        self.derived.take();
        self.book.touch(&message.message_id);
        self.messages[index] = message.clone();
        self.emit(Event::MessageUpdated {
            message_id: message.message_id.clone(),
            message,
        });
    }

    pub(crate) fn remove_message_at(&mut self, index: usize) {
        self.derived.take();
        let removed = self.messages.remove(index);
        // Later messages keep their stored positions (gaps are fine): one record goes.
        self.book.remove(&removed.message_id);
        self.emit(Event::MessageRemoved {
            message_id: removed.message_id,
        });
    }

    pub(crate) fn truncate_at(&mut self, from_index: usize) {
        self.derived.take();
        if from_index >= self.messages.len() {
            return;
        }
        for removed in self.messages.drain(from_index..) {
            self.book.remove(&removed.message_id);
        }
        self.emit(Event::MessagesTruncated { from_index });
    }

    /// Applies admitted params. The event's patch is normalized to what the thread now holds: a
    /// `null` that reset a key to its default carries that default, and a `null` that unset an
    /// optional key stays `null`, which a view applies as "remove" (`ChatMirror`).
    pub(crate) fn patch_thread(
        &mut self,
        patch: serde_json::Map<String, Value>,
        next: ThreadParams,
    ) {
        let now = next.to_json();
        let patch = patch
            .into_iter()
            .map(|(key, value)| {
                let value = match value {
                    Value::Null => now.get(&key).cloned().unwrap_or(Value::Null),
                    other => other,
                };
                (key, value)
            })
            .collect();
        self.thread = next;
        self.book.touch_thread();
        self.emit(Event::ThreadUpdated { patch });
    }

    /// A running tool's output line becomes a `tool_progress` event; a line for a call that is
    /// not running (late, unknown, another chat's) is dropped — progress is only for the eye.
    pub fn on_tool_progress(&mut self, tool_call_id: String, stream: String, text: String) {
        let running = matches!(&self.state, SessionState::ExecutingTools(step) if step.in_flight.contains(&tool_call_id));
        if running {
            self.emit(Event::ToolProgress {
                tool_call_id,
                stream,
                text,
            });
        }
    }

    /// A message id no message of this chat has: a host whose ids restart (no prefix) must
    /// still not give a stored id twice (records are keyed by message id).
    pub(crate) fn next_message_id(&self, ctx: &mut Ctx) -> String {
        loop {
            let id = ctx.ids.next("m");
            if self.message_index(&id).is_none() {
                return id;
            }
        }
    }

    pub(crate) fn message_index(&self, message_id: &str) -> Option<usize> {
        self.messages
            .iter()
            .position(|m| m.message_id == message_id)
    }

    pub(crate) fn new_message(
        &self,
        ctx: &mut Ctx,
        role: Role,
        content: crate::message::Content,
    ) -> ChatMessage {
        let mut message = ChatMessage::new(self.next_message_id(ctx), role, content);
        message.created_at_ms = Some(ctx.now);
        message
    }

    // --- Trajectory acknowledgements (SPEC §4). ---

    pub fn on_save_acked(&mut self, version: u64) {
        self.book.acked(version);
    }

    pub fn on_save_failed(&mut self, ctx: &mut Ctx, version: u64, reason: &str) {
        if let Some(wake) = self.book.failed(ctx.now, version, reason) {
            self.effect(Effect::WakeAt { at_ms: wake });
        }
    }

    pub fn trajectory_version(&self) -> u64 {
        self.book.version()
    }
}

pub use crate::history_limit::estimate_tokens;

/// How often a streaming reply is checkpointed to storage.
pub const DRAFT_CHECKPOINT_MS: u64 = 2000;
